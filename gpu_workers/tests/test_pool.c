/* gpu_workers/tests/test_pool.c - the worker pool against hidetd-worker-standin: discovery,
 * measurements, every injected fault, cancellation, out of service and the probes that bring a
 * GPU back, loop stalls, the log relay, closing, probe failures.
 *
 * Timing never decides pass or fail: every wait is "until the event happens", bounded only by a
 * generous safety limit that turns a hang into a failure instead of a stuck test.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_workers/gw.h"

#ifndef GW_STANDIN_PATH
#error "GW_STANDIN_PATH must be defined by the build"
#endif

#include "tests/check.h"

#define SAFETY_MS 60000

static uv_loop_t loop;
static char state_dir[] = "/tmp/gw-test-XXXXXX";

typedef struct env {
    gw_pool *pool;
    bool ready, closed;
    int log_lines;
} env;

typedef struct slot {
    bool done;
    int calls;
    gw_measure_result res;
} slot;

static void on_ready(void *u)
{
    ((env *)u)->ready = true;
}

static void on_closed(void *u)
{
    ((env *)u)->closed = true;
}

/* The pool's log lines since the last start(), kept for the tests that read them. */
#define LOG_KEEP 1024
static char *logged[LOG_KEEP];
static int n_logged;

static void log_reset(void)
{
    for (int i = 0; i < n_logged; i++)
        free(logged[i]);
    n_logged = 0;
}

/* How many kept log lines contain all of the given strings (NULL-terminated). */
static int log_count(const char *a, ...)
{
    int n = 0;
    for (int i = 0; i < n_logged; i++) {
        va_list ap;
        va_start(ap, a);
        bool all = true;
        for (const char *w = a; w && all; w = va_arg(ap, const char *))
            all = strstr(logged[i], w) != NULL;
        va_end(ap);
        n += all;
    }
    return n;
}

static void on_log(void *u, int level, const char *msg)
{
    (void)level;
    ((env *)u)->log_lines++;
    if (n_logged < LOG_KEEP)
        logged[n_logged++] = strdup(msg);
    if (getenv("GW_TEST_VERBOSE"))
        fprintf(stderr, "  log: %s\n", msg);
}

static void on_result(void *u, const gw_measure_result *r)
{
    slot *s = u;
    s->calls++;
    s->done = true;
    s->res = *r;
}

static void safety(uv_timer_t *t)
{
    *(bool *)t->data = true;
}

/* Runs the loop until *flag is true; false when the safety limit hit first. */
static bool run_until(bool *flag, const char *what)
{
    uv_timer_t t;
    bool expired = false;
    uv_timer_init(&loop, &t);
    t.data = &expired;
    uv_timer_start(&t, safety, SAFETY_MS, 0);
    while (!*flag && !expired)
        uv_run(&loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
    if (!*flag) {
        fprintf(stderr, "timed out waiting for %s\n", what);
        failures++;
        return false;
    }
    return true;
}

static void reset_state(const char *faults, int devices)
{
    char path[256], n[8];
    snprintf(path, sizeof(path), "%s/measure-count", state_dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/start-count", state_dir);
    unlink(path);
    unsetenv("HIDETD_STANDIN_START_FAULTS");
    unsetenv("HIDETD_STANDIN_STDERR");
    setenv("HIDETD_STANDIN_STATE_DIR", state_dir, 1);
    snprintf(n, sizeof(n), "%d", devices);
    setenv("HIDETD_STANDIN_DEVICES", n, 1);
    unsetenv("HIDETD_STANDIN_SM");
    unsetenv("HIDETD_STANDIN_PROBE");
    if (faults)
        setenv("HIDETD_STANDIN_FAULTS", faults, 1);
    else
        unsetenv("HIDETD_STANDIN_FAULTS");
}

static void start_probing(env *e, const char *path, int max_restarts, double probe_min_s,
                          double probe_max_s)
{
    gw_config c;
    memset(&c, 0, sizeof(c));
    c.worker_path = path;
    c.launch_timeout_s = 1.0;
    c.heartbeat_s = 0.5; /* 3 missed = 1.5 s: tolerant of a loaded 2-core machine */
    c.max_restarts = max_restarts;
    c.probe_min_s = probe_min_s;
    c.probe_max_s = probe_max_s;
    c.log = on_log;
    c.log_udata = e;
    memset(e, 0, sizeof(*e));
    log_reset();
    CHECK(gw_pool_start(&loop, &c, on_ready, e, &e->pool) == 0);
    run_until(&e->ready, "pool ready");
}

static void start(env *e, const char *path, int max_restarts)
{
    start_probing(e, path, max_restarts, 0, 0);
}

static void stop(env *e)
{
    gw_pool_close(e->pool, on_closed, e);
    run_until(&e->closed, "pool closed");
}

static const char ptx_a[] = "// candidate A\n";
static const char ptx_b[] = "// candidate B, a different one\n";
static const char ptx_ref[] = "// reference\n";

static void make_req(gw_measure_req *q, uint64_t id, const char *img)
{
    memset(q, 0, sizeof(*q));
    q->id = id;
    q->n_buffers = 3;
    q->buffers[0] = (gw_buffer){GW_BUF_INPUT, GW_F16, 1000};
    q->buffers[1] = (gw_buffer){GW_BUF_OUTPUT, GW_F16, 1000};
    q->buffers[2] = (gw_buffer){GW_BUF_REF_OUTPUT, GW_F32, 1000};
    q->candidate.image = (const uint8_t *)img;
    q->candidate.image_len = strlen(img) + 1;
    q->candidate.n_launches = 1;
    q->candidate.launches[0] = (gw_launch){.name = "cand", .grid = {4, 1, 1}, .block = {256, 1, 1}, .shared_bytes = 0, .n_args = 2, .args = {0, 1}};
    q->reference.image = (const uint8_t *)ptx_ref;
    q->reference.image_len = sizeof(ptx_ref);
    q->reference.n_launches = 1;
    q->reference.launches[0] = (gw_launch){.name = "ref", .grid = {4, 1, 1}, .block = {256, 1, 1}, .shared_bytes = 0, .n_args = 2, .args = {0, 2}};
    q->output_buffer = 1;
    q->ref_output_buffer = 2;
    q->check = true;
    q->rtol = 1e-2;
    q->atol = 1e-2;
    q->warmup = 2;
    q->min_reps = 10;
    q->max_reps = 50;
    q->min_time_ms = 1;
}

/* Submits one request on any device and waits for its result. */
static gw_measure_result measure_one(env *e, uint64_t id, const char *img)
{
    gw_measure_req q;
    slot s = {0};
    make_req(&q, id, img);
    int r = gw_measure(e->pool, -1, 0, &q, on_result, &s, NULL);
    CHECK(r == 0);
    if (r == 0)
        run_until(&s.done, "a result");
    CHECK(s.calls == 1);
    CHECK(s.res.id == id);
    return s.res;
}

static const gw_device_info *dev0(env *e)
{
    const gw_device_info *d = NULL;
    size_t n = gw_pool_devices(e->pool, &d);
    return n ? &d[0] : NULL;
}

static void test_discovery_and_measure(void)
{
    env e;
    const gw_device_info *d = NULL;
    reset_state(NULL, 2);
    start(&e, GW_STANDIN_PATH, 5);
    CHECK(gw_pool_devices(e.pool, &d) == 2);
    CHECK(gw_pool_usable(e.pool) == 2);
    CHECK(d[0].index == 0 && d[1].index == 1 && d[0].sm == 90 && !strcmp(d[1].name, "Stand-in GPU"));
    CHECK(d[0].state == GW_DEV_READY && d[1].state == GW_DEV_READY);
    CHECK(!strcmp(gw_pool_probe_error(e.pool), ""));

    gw_measure_result a1 = measure_one(&e, 1, ptx_a), a2 = measure_one(&e, 2, ptx_a),
                      b = measure_one(&e, 3, ptx_b);
    CHECK(a1.status == GW_OK && a2.status == GW_OK && b.status == GW_OK);
    CHECK(a1.median_us > 0 && a1.median_us == a2.median_us); /* same candidate, same number */
    CHECK(b.median_us != a1.median_us);
    CHECK(a1.reps >= 10 && !a1.early_stopped);

    /* Early stop against a time to beat far below this candidate's. */
    gw_measure_req q;
    slot s = {0};
    make_req(&q, 4, ptx_a);
    q.beat_us = a1.median_us / 2;
    CHECK(gw_measure(e.pool, 1, 90, &q, on_result, &s, NULL) == 0);
    run_until(&s.done, "early stop");
    CHECK(s.res.status == GW_OK && s.res.early_stopped && s.res.device == 1);

    /* A dynamic op's launch passes a size as a long long (GW_ARG_I64): the stand-in takes it
     * through the same decoding as the worker, and another size is another run. */
    gw_measure_result sized[2];
    for (int i = 0; i < 2; i++) {
        slot z = {0};
        make_req(&q, 5 + (uint64_t)i, ptx_a);
        gw_launch *l = &q.candidate.launches[0];
        l->args[l->n_args] = GW_ARG_I64;
        l->values[l->n_args++] = i ? 4096 : 8192;
        CHECK(gw_measure(e.pool, -1, 0, &q, on_result, &z, NULL) == 0);
        run_until(&z.done, "a sized launch");
        sized[i] = z.res;
    }
    CHECK(sized[0].status == GW_OK && sized[1].status == GW_OK && sized[0].median_us != a1.median_us &&
          sized[0].median_us != sized[1].median_us);

    /* Dispatch by sm: nothing runs sm_80 here; device 7 does not exist; bad requests refused. */
    CHECK(gw_measure(e.pool, -1, 80, &q, on_result, &s, NULL) == -ENODEV);
    CHECK(gw_measure(e.pool, 7, 0, &q, on_result, &s, NULL) == -ENODEV);
    q.output_buffer = 0;
    CHECK(gw_measure(e.pool, -1, 0, &q, on_result, &s, NULL) == -EINVAL);

    /* Two devices share work: many requests at once all complete, on both devices. */
    enum { N = 8 };
    slot many[N];
    memset(many, 0, sizeof(many));
    for (int i = 0; i < N; i++) {
        make_req(&q, 100 + (uint64_t)i, i % 2 ? ptx_a : ptx_b);
        CHECK(gw_measure(e.pool, -1, 90, &q, on_result, &many[i], NULL) == 0);
    }
    int used[2] = {0, 0};
    for (int i = 0; i < N; i++) {
        run_until(&many[i].done, "parallel results");
        CHECK(many[i].res.status == GW_OK && many[i].res.id == 100 + (uint64_t)i);
        if (many[i].res.device == 0 || many[i].res.device == 1)
            used[many[i].res.device]++;
    }
    CHECK(used[0] > 0 && used[1] > 0);
    gw_pool_devices(e.pool, &d);
    CHECK(d[0].measured + d[1].measured == N + 6); /* and the four above, and the two sized */
    /* Each device has its own worker process, and both spent time on requests. */
    CHECK(d[0].pid > 0 && d[1].pid > 0 && d[0].pid != d[1].pid);
    CHECK(d[0].busy_s > 0 && d[1].busy_s > 0);
    stop(&e);
    CHECK(e.log_lines > 0);
}

/* Busy time counts a request from dispatch to answer: a 300 ms measurement adds about 0.3 s. */
static void test_busy_time(void)
{
    env e;
    reset_state("slow@1:300", 1);
    start(&e, GW_STANDIN_PATH, 5);
    double before = dev0(&e)->busy_s;
    gw_measure_result r = measure_one(&e, 1, ptx_a);
    CHECK(r.status == GW_OK);
    double busy = dev0(&e)->busy_s - before;
    CHECK(busy >= 0.3 && busy < 5.0);
    stop(&e);
}

static void test_crash_and_restart(void)
{
    env e;
    reset_state("crash@1", 1);
    start(&e, GW_STANDIN_PATH, 5);
    int first_pid = dev0(&e)->pid;
    gw_measure_result r = measure_one(&e, 1, ptx_a);
    CHECK(r.status == GW_WORKER_DIED);
    CHECK(strstr(r.reason, "signal") != NULL);
    r = measure_one(&e, 2, ptx_a); /* queued until the restarted worker says hello */
    CHECK(r.status == GW_OK);
    CHECK(dev0(&e)->restarts == 1);
    CHECK(dev0(&e)->state == GW_DEV_READY);
    CHECK(first_pid > 0 && dev0(&e)->pid > 0 && dev0(&e)->pid != first_pid);
    stop(&e);
}

static void test_hang_timeout(void)
{
    env e;
    reset_state("hang@1", 1);
    start(&e, GW_STANDIN_PATH, 5);
    gw_measure_result r = measure_one(&e, 1, ptx_a);
    CHECK(r.status == GW_TIMEOUT);
    CHECK(strstr(r.reason, "heartbeat") != NULL);
    r = measure_one(&e, 2, ptx_a);
    CHECK(r.status == GW_OK);
    CHECK(dev0(&e)->restarts == 1);
    stop(&e);
}

static void test_wrong_and_fault(void)
{
    env e;
    reset_state("wrong@1,fault@2", 1);
    start(&e, GW_STANDIN_PATH, 1); /* a reported fault must not count against the device */
    gw_measure_result r = measure_one(&e, 1, ptx_a);
    CHECK(r.status == GW_WRONG && r.max_abs_err > 0);
    r = measure_one(&e, 2, ptx_a);
    CHECK(r.status == GW_FAULT && strstr(r.reason, "ILLEGAL_ADDRESS") != NULL);
    r = measure_one(&e, 3, ptx_a);
    CHECK(r.status == GW_OK);
    CHECK(dev0(&e)->restarts == 1 && dev0(&e)->state == GW_DEV_READY);
    CHECK(dev0(&e)->measured == 1 && dev0(&e)->failed == 2);
    stop(&e);
}

static void test_cancel(void)
{
    env e;
    gw_measure_req q;
    slot a = {0}, b = {0}, c = {0};
    gw_ticket *ta = NULL, *tb = NULL;

    reset_state("slow@1:20000", 1);
    start(&e, GW_STANDIN_PATH, 1);
    make_req(&q, 1, ptx_a);
    CHECK(gw_measure(e.pool, 0, 0, &q, on_result, &a, &ta) == 0);
    make_req(&q, 2, ptx_b);
    CHECK(gw_measure(e.pool, 0, 0, &q, on_result, &b, &tb) == 0);
    /* Wait until the first is running on the worker. */
    bool busy = false;
    for (int i = 0; i < 100000 && !busy; i++) {
        uv_run(&loop, UV_RUN_ONCE);
        busy = dev0(&e)->state == GW_DEV_BUSY;
    }
    CHECK(busy);
    gw_cancel(e.pool, tb); /* queued */
    CHECK(b.done && b.calls == 1 && b.res.status == GW_CANCELLED && b.res.id == 2);
    gw_cancel(e.pool, ta); /* running: the stand-in stops sleeping at the cancel */
    CHECK(a.done && a.calls == 1 && a.res.status == GW_CANCELLED);
    make_req(&q, 3, ptx_a);
    CHECK(gw_measure(e.pool, 0, 0, &q, on_result, &c, NULL) == 0);
    run_until(&c.done, "result after cancel");
    CHECK(c.res.status == GW_OK);
    CHECK(a.calls == 1 && b.calls == 1);
    CHECK(dev0(&e)->restarts == 0); /* the worker answered the cancel: no restart */
    stop(&e);
}

static void test_stuck(void)
{
    env e;
    gw_measure_req q;
    slot a = {0};
    gw_ticket *ta = NULL;

    /* A cancelled request the worker does not give up: it is killed after the drain allowance
     * and restarted, without counting against the device (max_restarts 1 would otherwise put
     * it out of service). */
    reset_state("stuck@1", 1);
    start(&e, GW_STANDIN_PATH, 1);
    make_req(&q, 1, ptx_a);
    CHECK(gw_measure(e.pool, 0, 0, &q, on_result, &a, &ta) == 0);
    bool busy = false;
    for (int i = 0; i < 100000 && !busy; i++) {
        uv_run(&loop, UV_RUN_ONCE);
        busy = dev0(&e)->state == GW_DEV_BUSY;
    }
    CHECK(busy);
    gw_cancel(e.pool, ta);
    CHECK(a.done && a.res.status == GW_CANCELLED);
    gw_measure_result r = measure_one(&e, 2, ptx_b);
    CHECK(r.status == GW_OK);
    CHECK(dev0(&e)->restarts == 1 && dev0(&e)->state == GW_DEV_READY);
    stop(&e);

    /* A request that outlives its deadline while the worker still sends heartbeats. */
    reset_state("stuck@1", 1);
    gw_config c;
    memset(&c, 0, sizeof(c));
    c.worker_path = GW_STANDIN_PATH;
    c.launch_timeout_s = 0.05;
    c.heartbeat_s = 0.5;
    c.request_slack_s = 0.5;
    memset(&e, 0, sizeof(e));
    CHECK(gw_pool_start(&loop, &c, on_ready, &e, &e.pool) == 0);
    run_until(&e.ready, "pool ready");
    make_req(&q, 3, ptx_a);
    q.check = false;
    q.warmup = 0;
    q.min_reps = q.max_reps = 1;
    slot s = {0};
    CHECK(gw_measure(e.pool, -1, 0, &q, on_result, &s, NULL) == 0);
    run_until(&s.done, "deadline");
    CHECK(s.res.status == GW_TIMEOUT && strstr(s.res.reason, "deadline") != NULL);
    r = measure_one(&e, 4, ptx_a);
    CHECK(r.status == GW_OK);
    stop(&e);
}

static void test_out_of_service(void)
{
    env e;
    gw_measure_req q;
    slot s[3];
    memset(s, 0, sizeof(s));

    reset_state("crash@1,crash@2", 1);
    start(&e, GW_STANDIN_PATH, 2);
    for (int i = 0; i < 3; i++) {
        make_req(&q, 10 + (uint64_t)i, ptx_a);
        CHECK(gw_measure(e.pool, -1, 0, &q, on_result, &s[i], NULL) == 0);
    }
    for (int i = 0; i < 3; i++)
        run_until(&s[i].done, "out-of-service results");
    CHECK(s[0].res.status == GW_WORKER_DIED && s[1].res.status == GW_WORKER_DIED);
    CHECK(s[2].res.status == GW_NO_DEVICE);
    CHECK(dev0(&e)->state == GW_DEV_OUT_OF_SERVICE);
    CHECK(gw_pool_usable(e.pool) == 0);
    make_req(&q, 20, ptx_a);
    CHECK(gw_measure(e.pool, -1, 0, &q, on_result, &s[0], NULL) == -ENODEV);
    stop(&e);

    /* With two devices, the queue of the one that fails moves to the other. */
    reset_state("crash@1", 2);
    start(&e, GW_STANDIN_PATH, 1);
    memset(s, 0, sizeof(s));
    for (int i = 0; i < 3; i++) {
        make_req(&q, 30 + (uint64_t)i, ptx_b);
        CHECK(gw_measure(e.pool, 0, 0, &q, on_result, &s[i], NULL) == 0 || i > 0);
    }
    /* s[1], s[2] were pinned to device 0 as well: they fail with GW_NO_DEVICE. */
    for (int i = 0; i < 3; i++)
        run_until(&s[i].done, "pinned results");
    CHECK(s[0].res.status == GW_WORKER_DIED);
    CHECK(s[1].res.status == GW_NO_DEVICE && s[2].res.status == GW_NO_DEVICE);
    CHECK(gw_pool_usable(e.pool) == 1);
    gw_measure_result r = measure_one(&e, 40, ptx_a);
    CHECK(r.status == GW_OK && r.device == 1);
    stop(&e);
}

static void test_redispatch(void)
{
    env e;
    gw_measure_req q;
    enum { N = 6 };
    slot s[N];
    memset(s, 0, sizeof(s));
    /* Device 0's worker never starts; the least-loaded choice still queues some requests on it
     * while it retries, and when it goes out of service they move to device 1. */
    reset_state(NULL, 2);
    setenv("HIDETD_STANDIN_REFUSE", "0", 1);
    start(&e, GW_STANDIN_PATH, 3);
    for (int i = 0; i < N; i++) {
        make_req(&q, 1 + (uint64_t)i, i % 2 ? ptx_a : ptx_b);
        CHECK(gw_measure(e.pool, -1, 90, &q, on_result, &s[i], NULL) == 0);
    }
    for (int i = 0; i < N; i++)
        run_until(&s[i].done, "redispatched results");
    for (int i = 0; i < N; i++)
        CHECK(s[i].res.status == GW_OK && s[i].res.device == 1);
    const gw_device_info *d = NULL;
    CHECK(gw_pool_devices(e.pool, &d) == 2 && d[0].state == GW_DEV_OUT_OF_SERVICE);
    CHECK(gw_pool_usable(e.pool) == 1);
    unsetenv("HIDETD_STANDIN_REFUSE");
    stop(&e);
}

static void test_close_pending(void)
{
    env e;
    gw_measure_req q;
    slot s[3];
    memset(s, 0, sizeof(s));
    reset_state("slow@1:20000", 1);
    start(&e, GW_STANDIN_PATH, 5);
    for (int i = 0; i < 3; i++) {
        make_req(&q, 50 + (uint64_t)i, ptx_a);
        CHECK(gw_measure(e.pool, -1, 0, &q, on_result, &s[i], NULL) == 0);
    }
    bool busy = false;
    for (int i = 0; i < 100000 && !busy; i++) {
        uv_run(&loop, UV_RUN_ONCE);
        busy = dev0(&e)->state == GW_DEV_BUSY;
    }
    CHECK(busy);
    stop(&e);
    for (int i = 0; i < 3; i++)
        CHECK(s[i].calls == 1 && s[i].res.status == GW_CANCELLED);

    /* Closing while the probe still runs: requests accepted meanwhile are cancelled too. */
    reset_state(NULL, 1);
    gw_config c;
    memset(&c, 0, sizeof(c));
    c.worker_path = GW_STANDIN_PATH;
    memset(&e, 0, sizeof(e));
    CHECK(gw_pool_start(&loop, &c, on_ready, &e, &e.pool) == 0);
    memset(s, 0, sizeof(s));
    make_req(&q, 60, ptx_a);
    CHECK(gw_measure(e.pool, -1, 0, &q, on_result, &s[0], NULL) == 0);
    stop(&e);
    CHECK(s[0].calls == 1 && s[0].res.status == GW_CANCELLED);
}

static void test_no_devices(void)
{
    env e;
    gw_measure_req q;
    slot s = {0};

    /* No worker binary at all. */
    reset_state(NULL, 1);
    start(&e, "/nonexistent/hidetd-worker", 5);
    CHECK(gw_pool_devices(e.pool, &(const gw_device_info *){NULL}) == 0);
    CHECK(gw_pool_usable(e.pool) == 0);
    CHECK(strstr(gw_pool_probe_error(e.pool), "cannot start") != NULL);
    make_req(&q, 1, ptx_a);
    CHECK(gw_measure(e.pool, -1, 0, &q, on_result, &s, NULL) == -ENODEV);
    stop(&e);

    /* A probe that prints garbage and fails. */
    reset_state(NULL, 1);
    setenv("HIDETD_STANDIN_PROBE", "fail", 1);
    start(&e, GW_STANDIN_PATH, 5);
    CHECK(gw_pool_usable(e.pool) == 0 && gw_pool_probe_error(e.pool)[0]);
    stop(&e);

    /* Zero devices reported cleanly. */
    reset_state(NULL, 0);
    start(&e, GW_STANDIN_PATH, 5);
    CHECK(gw_pool_usable(e.pool) == 0);
    CHECK(strstr(gw_pool_probe_error(e.pool), "HIDETD_STANDIN_DEVICES=0") != NULL);
    stop(&e);

    /* A request accepted during the probe fails with GW_NO_DEVICE once it finds nothing. */
    reset_state(NULL, 0);
    gw_config c;
    memset(&c, 0, sizeof(c));
    c.worker_path = GW_STANDIN_PATH;
    memset(&e, 0, sizeof(e));
    CHECK(gw_pool_start(&loop, &c, on_ready, &e, &e.pool) == 0);
    make_req(&q, 2, ptx_a);
    memset(&s, 0, sizeof(s));
    CHECK(gw_measure(e.pool, -1, 0, &q, on_result, &s, NULL) == 0);
    run_until(&s.done, "no-device result");
    CHECK(s.res.status == GW_NO_DEVICE && s.calls == 1);
    CHECK(e.ready);
    stop(&e);

    /* Bad configurations. */
    gw_pool *p = NULL;
    c.worker_path = NULL;
    CHECK(gw_pool_start(&loop, &c, NULL, NULL, &p) == -EINVAL);
    c.worker_path = GW_STANDIN_PATH;
    c.heartbeat_s = -1;
    CHECK(gw_pool_start(&loop, &c, NULL, NULL, &p) == -EINVAL);
}

static void test_worker_cannot_start(void)
{
    env e;
    const gw_device_info *d = NULL;
    /* The probe lists a device whose worker then refuses it (HELLO with an error) every time:
     * after max_restarts tries it is out of service, and `ready` still came. */
    reset_state(NULL, 1);
    setenv("HIDETD_STANDIN_REFUSE", "all", 1);
    start(&e, GW_STANDIN_PATH, 2);
    bool oos = false;
    for (int i = 0; i < 1000000 && !oos; i++) {
        oos = gw_pool_devices(e.pool, &d) == 1 && d[0].state == GW_DEV_OUT_OF_SERVICE;
        if (!oos)
            uv_run(&loop, UV_RUN_ONCE);
    }
    CHECK(oos);
    CHECK(d[0].restarts == 2);
    CHECK(strstr(d[0].last_error, "refused") != NULL);
    CHECK(gw_pool_usable(e.pool) == 0);
    unsetenv("HIDETD_STANDIN_REFUSE");
    stop(&e);
}

/* ---- loop stalls ---- */

typedef struct stall {
    int ms;
    bool done;
} stall;

static void stall_cb(uv_check_t *c)
{
    stall *st = c->data;
    if (st->done)
        return;
    /* The loop thread busy in a callback (a big graph, a flood): nothing is read meanwhile, and
     * libuv runs the timers before the next poll reads what the workers wrote. */
    usleep((useconds_t)st->ms * 1000);
    st->done = true;
}

static void stall_loop(int ms)
{
    uv_check_t c;
    stall st = {ms, false};
    uv_check_init(&loop, &c);
    c.data = &st;
    uv_check_start(&c, stall_cb);
    run_until(&st.done, "the stall");
    uv_close((uv_handle_t *)&c, NULL);
    uv_run(&loop, UV_RUN_NOWAIT); /* the handle lives on this stack until it is closed */
}

static void ran_out(uv_timer_t *t)
{
    *(bool *)t->data = true;
}

/* Runs the loop for ms milliseconds. */
static void run_for(int ms)
{
    uv_timer_t t;
    bool over = false;
    uv_timer_init(&loop, &t);
    t.data = &over;
    uv_timer_start(&t, ran_out, (uint64_t)ms, 0);
    while (!over)
        uv_run(&loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
}

static bool wait_busy(env *e)
{
    bool busy = false;
    for (int i = 0; i < 100000 && !busy; i++) {
        uv_run(&loop, UV_RUN_ONCE);
        busy = dev0(e)->state == GW_DEV_BUSY;
    }
    return busy;
}

/* Heartbeats are 0.5 s apart, 3 missed = hung; the loop stalls for 2.5 s (heartbeats waiting in
 * the socket) again and again: no worker is killed, with or without a request in flight, and the
 * GPU stays in service (before the fix each stall killed the worker; max_restarts 2 made the
 * second stall put the GPU out of service). */
static void test_loop_stall(void)
{
    env e;
    reset_state("slow@2:1000", 1);
    start(&e, GW_STANDIN_PATH, 2);
    int pid = dev0(&e)->pid;
    CHECK(measure_one(&e, 1, ptx_a).status == GW_OK);
    for (int i = 0; i < 3; i++) {
        stall_loop(2500);
        run_for(1800); /* longer than 3 heartbeat periods: a wrongly restarted clock would kill */
        CHECK(dev0(&e)->restarts == 0 && dev0(&e)->pid == pid);
        CHECK(dev0(&e)->state == GW_DEV_READY);
    }
    CHECK(dev0(&e)->loop_stalls >= 3 && dev0(&e)->hung_kills == 0);
    CHECK(log_count("event loop stalled", NULL) >= 1);

    /* A stall while a request runs (1 s): it completes, and nothing is killed. */
    gw_measure_req q;
    slot s = {0};
    make_req(&q, 2, ptx_b);
    CHECK(gw_measure(e.pool, 0, 0, &q, on_result, &s, NULL) == 0);
    CHECK(wait_busy(&e));
    stall_loop(2500);
    run_until(&s.done, "the result after a stall");
    CHECK(s.res.status == GW_OK);
    CHECK(dev0(&e)->restarts == 0 && dev0(&e)->pid == pid && gw_pool_usable(e.pool) == 1);
    stop(&e);

    /* A worker that really hangs across a stall is still found out: its clock restarted at the
     * stall, three periods later it is killed. */
    reset_state("hang@1", 1);
    start(&e, GW_STANDIN_PATH, 5);
    memset(&s, 0, sizeof(s));
    make_req(&q, 3, ptx_a);
    CHECK(gw_measure(e.pool, 0, 0, &q, on_result, &s, NULL) == 0);
    CHECK(wait_busy(&e));
    stall_loop(2500);
    run_until(&s.done, "the hung request");
    CHECK(s.res.status == GW_TIMEOUT && strstr(s.res.reason, "heartbeat") != NULL);
    CHECK(dev0(&e)->hung_kills == 1 && dev0(&e)->restarts == 1);
    CHECK(measure_one(&e, 4, ptx_a).status == GW_OK);
    stop(&e);
}

/* ---- out of service, probes, back in service ---- */

static bool wait_state(env *e, gw_device_state st, const char *what)
{
    for (int i = 0; i < 2000000; i++) {
        if (dev0(e)->state == st)
            return true;
        uv_run(&loop, UV_RUN_ONCE);
    }
    fprintf(stderr, "never reached %s\n", what);
    failures++;
    return false;
}

static void test_probe_and_return(void)
{
    env e;
    gw_measure_req q;
    slot s = {0};

    /* The first three starts crash: two failures put it out of service (max_restarts 2), the
     * first probe (start 3) fails, the second (start 4) brings it back. Probes wait 0.3 s, then
     * 0.6 capped at 0.5. */
    reset_state("crash@1", 1); /* measure request 1 crashes: see the probation below */
    setenv("HIDETD_STANDIN_START_FAULTS", "crash@1-3", 1);
    start_probing(&e, GW_STANDIN_PATH, 2, 0.3, 0.5);
    wait_state(&e, GW_DEV_OUT_OF_SERVICE, "out of service");
    const gw_device_info *d = dev0(&e);
    CHECK(d->oos_count == 1 && d->probes == 0);
    CHECK(strstr(d->oos_reason, "crashed") != NULL && strstr(d->oos_reason, "signal") != NULL);
    CHECK(d->oos_since > 1e9 && d->next_probe > d->oos_since && d->next_probe < d->oos_since + 1.0);
    CHECK(gw_pool_usable(e.pool) == 0);
    make_req(&q, 1, ptx_a);
    CHECK(gw_measure(e.pool, -1, 0, &q, on_result, &s, NULL) == -ENODEV);
    CHECK(log_count("gpu 0: out of service after 2 consecutive failures", "next probe in 0.3 s",
                    NULL) == 1);
    CHECK(log_count("gpu 0: worker: hidetd-worker-standin: planned crash at start", NULL) >= 1);

    wait_state(&e, GW_DEV_READY, "back in service");
    d = dev0(&e);
    CHECK(d->probes == 2 && d->oos_count == 1 && d->oos_since == 0 && d->next_probe == 0);
    CHECK(d->restarts == 2 && !d->oos_reason[0]);
    CHECK(gw_pool_usable(e.pool) == 1);
    CHECK(log_count("probe 1 failed", "next probe in 0.5 s", NULL) == 1);
    CHECK(log_count("back in service", "probe 2", NULL) == 1);

    /* On probation: the first failure takes it out again at once, with the longer wait. */
    CHECK(measure_one(&e, 2, ptx_a).status == GW_WORKER_DIED);
    CHECK(dev0(&e)->state == GW_DEV_OUT_OF_SERVICE && dev0(&e)->oos_count == 2);
    CHECK(log_count("out of service after 2 consecutive failures", "next probe in 0.5 s",
                    NULL) == 1);
    wait_state(&e, GW_DEV_READY, "back in service again");
    CHECK(measure_one(&e, 3, ptx_a).status == GW_OK);
    CHECK(dev0(&e)->probes == 3 && dev0(&e)->oos_count == 2);
    stop(&e);
    unsetenv("HIDETD_STANDIN_FAULTS");
    unsetenv("HIDETD_STANDIN_START_FAULTS");
}

/* A chatty worker: its stderr reaches the log with its GPU, lines cut at GW_LOG_LINE_MAX, at most
 * GW_LOG_BURST at once; the rest is counted and said. */
static void test_log_relay(void)
{
    env e;
    reset_state(NULL, 1);
    setenv("HIDETD_STANDIN_STDERR", "500", 1);
    start(&e, GW_STANDIN_PATH, 5);
    run_for(1500);
    int relayed = log_count("gpu 0: worker: stand-in stderr line ", NULL);
    CHECK(relayed >= 10 && relayed <= GW_LOG_BURST + 20);
    CHECK(log_count("gpu 0: worker: stand-in stderr line 1", NULL) >= 1);
    CHECK(log_count("gpu 0: worker: xxxx", "[7489 more bytes cut]", NULL) == 1);
    for (int i = 0; i < n_logged; i++)
        CHECK(strlen(logged[i]) < GW_LOG_LINE_MAX + 200);
    const gw_device_info *d = dev0(&e);
    CHECK(d->log_dropped >= 500 - (uint64_t)GW_LOG_BURST - 20);
    CHECK(log_count("gpu 0: ", "line(s) of the worker's output dropped", NULL) >= 1);
    CHECK(measure_one(&e, 1, ptx_a).status == GW_OK);
    stop(&e);
    unsetenv("HIDETD_STANDIN_STDERR");
}

int main(void)
{
    if (!mkdtemp(state_dir)) {
        perror("mkdtemp");
        return 1;
    }
    uv_loop_init(&loop);
    test_discovery_and_measure();
    test_busy_time();
    test_crash_and_restart();
    test_hang_timeout();
    test_wrong_and_fault();
    test_cancel();
    test_stuck();
    test_out_of_service();
    test_redispatch();
    test_close_pending();
    test_no_devices();
    test_worker_cannot_start();
    test_loop_stall();
    test_probe_and_return();
    test_log_relay();
    log_reset();
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&loop) == 0);
    char path[256];
    snprintf(path, sizeof(path), "%s/measure-count", state_dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/start-count", state_dir);
    unlink(path);
    rmdir(state_dir);
    if (failures) {
        fprintf(stderr, "test_pool: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_pool: ok\n");
    return 0;
}
