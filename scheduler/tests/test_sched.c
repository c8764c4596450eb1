/* scheduler/tests/test_sched.c - jobs end to end on the CPU: a temp kernel cache, the real tuner
 * (NVRTC compiles, no GPU needed) and the stand-in worker (path in env HIDETD_STANDIN) for
 * "measurements" and fault injection.
 *
 * Pass/fail never depends on timing: the loop is driven until a condition holds (with a generous
 * guard so a bug fails instead of hanging forever).
 */
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "scheduler/sched.h"
#include "tuner/tuner.h"

#include "tests/check.h"

#define GUARD_S 240.0

static const char *g_devices = "1"; /* stand-in GPUs of the next env_open */
static int g_max_restarts = 5;        /* and the pool's max_restarts */
static const char *g_skew = NULL;     /* and HIDETD_STANDIN_SKEW (NULL: none) */

/* ---- environment: loop, cache, optional stand-in pool, scheduler ---- */

typedef struct env {
    uv_loop_t loop;
    char dir[128];
    kc_db *db;
    gw_pool *pool;
    sched *s;
} env;

static void flag_cb(void *udata)
{
    *(int *)udata = 1;
}

static void wake_cb(uv_timer_t *t)
{
    (void)t;
}

typedef bool (*pred_fn)(env *e, void *ctx);

/* Runs the loop until pred holds; false (and a failure) when the guard runs out. */
static bool run_until(env *e, pred_fn pred, void *ctx, const char *what)
{
    uv_timer_t wake;
    uv_timer_init(&e->loop, &wake);
    uv_timer_start(&wake, wake_cb, 20, 20); /* polled conditions are re-checked regularly */
    double start = (double)uv_hrtime() / 1e9;
    bool ok = true;
    while (!pred(e, ctx)) {
        if ((double)uv_hrtime() / 1e9 - start > GUARD_S) {
            fprintf(stderr, "gave up waiting for: %s\n", what);
            failures++;
            ok = false;
            break;
        }
        uv_run(&e->loop, UV_RUN_ONCE);
    }
    uv_close((uv_handle_t *)&wake, NULL);
    uv_run(&e->loop, UV_RUN_NOWAIT);
    return ok;
}

static bool int_set(env *e, void *ctx)
{
    (void)e;
    return *(int *)ctx != 0;
}

static void env_open(env *e, const sched_config *cfg, bool with_pool, const char *faults)
{
    memset(e, 0, sizeof(*e));
    CHECK(uv_loop_init(&e->loop) == 0);
    snprintf(e->dir, sizeof(e->dir), "/tmp/hidetd-sched-test-XXXXXX");
    if (!mkdtemp(e->dir)) {
        perror("mkdtemp");
        exit(1);
    }
    char path[256];
    snprintf(path, sizeof(path), "%s/kc.db", e->dir);
    char *err = NULL;
    if (kc_open(path, &e->db, &err) < 0) {
        fprintf(stderr, "kc_open: %s\n", err ? err : "?");
        exit(1);
    }
    if (with_pool) {
        const char *standin = getenv("HIDETD_STANDIN");
        if (!standin) {
            fprintf(stderr, "HIDETD_STANDIN is not set\n");
            exit(1);
        }
        snprintf(path, sizeof(path), "%s/state", e->dir);
        mkdir(path, 0700);
        setenv("HIDETD_STANDIN_STATE_DIR", path, 1);
        setenv("HIDETD_STANDIN_DEVICES", g_devices, 1);
        setenv("HIDETD_STANDIN_SM", "90", 1);
        if (g_skew)
            setenv("HIDETD_STANDIN_SKEW", g_skew, 1);
        else
            unsetenv("HIDETD_STANDIN_SKEW");
        if (faults)
            setenv("HIDETD_STANDIN_FAULTS", faults, 1);
        else
            unsetenv("HIDETD_STANDIN_FAULTS");
        gw_config gc;
        memset(&gc, 0, sizeof(gc));
        gc.worker_path = standin;
        gc.launch_timeout_s = 0.5;
        gc.heartbeat_s = 0.1;
        gc.max_restarts = g_max_restarts;
        int ready = 0;
        CHECK(gw_pool_start(&e->loop, &gc, flag_cb, &ready, &e->pool) == 0);
        run_until(e, int_set, &ready, "pool ready");
        CHECK(gw_pool_usable(e->pool) == atoi(g_devices));
    }
    CHECK(sched_new(&e->loop, e->db, e->pool, cfg, &e->s) == 0);
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static void env_close(env *e)
{
    int drained = 0;
    sched_drain(e->s, 0, flag_cb, &drained);
    run_until(e, int_set, &drained, "drain");
    sched_free(e->s);
    if (e->pool) {
        int closed = 0;
        gw_pool_close(e->pool, flag_cb, &closed);
        run_until(e, int_set, &closed, "pool close");
    }
    uv_run(&e->loop, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&e->loop) == 0);
    kc_close(e->db);
    nftw(e->dir, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
}

/* ---- ops ---- */

static tuner_tensor tensor(int rank, const int64_t *shape, tuner_dtype d)
{
    tuner_tensor t;
    memset(&t, 0, sizeof(t));
    t.rank = rank;
    for (int i = 0; i < rank; i++)
        t.shape[i] = shape[i];
    t.dtype = d;
    t.align = 16;
    return t;
}

static tuner_op matmul_f16(int64_t m, int64_t n, int64_t k)
{
    tuner_op op;
    memset(&op, 0, sizeof(op));
    op.kind = TUNER_OP_MATMUL;
    op.n_inputs = op.n_anchor_inputs = 2;
    op.inputs[0] = tensor(2, (int64_t[]){m, k}, TUNER_F16);
    op.inputs[1] = tensor(2, (int64_t[]){k, n}, TUNER_F16);
    op.output = tensor(2, (int64_t[]){m, n}, TUNER_F16);
    op.attrs.matmul.allow_tf32 = true;
    return op;
}

static tuner_op matmul_bias_relu_f16(int64_t m, int64_t n, int64_t k)
{
    tuner_op op = matmul_f16(m, n, k);
    op.n_inputs = 3;
    op.inputs[2] = tensor(1, (int64_t[]){n}, TUNER_F16);
    op.epilogue.n = 2;
    op.epilogue.steps[0] = (tuner_ew_step){.kind = TUNER_EW_ADD, .operand = 2, .scalar = 0, .dtype = TUNER_F16};
    op.epilogue.steps[1] = (tuner_ew_step){.kind = TUNER_EW_RELU, .operand = -1, .scalar = 0, .dtype = TUNER_F16};
    return op;
}

static tuner_op softmax_f16(int64_t rows, int64_t d)
{
    tuner_op op;
    memset(&op, 0, sizeof(op));
    op.kind = TUNER_OP_SOFTMAX;
    op.n_inputs = op.n_anchor_inputs = 1;
    op.inputs[0] = tensor(2, (int64_t[]){rows, d}, TUNER_F16);
    op.output = op.inputs[0];
    return op;
}

static const tuner_target T90 = {90, false};
static tuner_target g_target = {90, false}; /* of the next request() */

static sched_request request(const tuner_op *op, tuner_tune_mode mode, int prio)
{
    sched_request r;
    memset(&r, 0, sizeof(r));
    r.op = op;
    r.target = g_target;
    r.mode = mode;
    r.priority = prio;
    return r;
}

/* ---- waiters ---- */

typedef struct rec {
    int calls;
    int order;
    sched_job_info info;
} rec;

static int end_counter;

static void on_done(void *udata, const sched_job_info *info)
{
    rec *r = udata;
    r->calls++;
    r->order = ++end_counter;
    r->info = *info;
}

static bool rec_called(env *e, void *ctx)
{
    (void)e;
    return ((rec *)ctx)->calls > 0;
}

typedef struct recs {
    rec *r;
    int n;
} recs;

static bool all_called(env *e, void *ctx)
{
    (void)e;
    recs *rs = ctx;
    for (int i = 0; i < rs->n; i++)
        if (rs->r[i].calls == 0)
            return false;
    return true;
}

/* Tuning key of op as the scheduler computes it on the pool's first device. */
static int tuning_key_of(env *e, const tuner_op *op, char out[KC_KEY_LEN + 1])
{
    const gw_device_info *devs = NULL;
    if (gw_pool_devices(e->pool, &devs) < 1)
        return -ENODEV;
    tuner_space *sp = NULL;
    char *err = NULL;
    int rc = tuner_space_build(op, &T90, &sp, &err);
    free(err);
    if (rc < 0)
        return rc;
    rc = sched_tuning_key(op, &T90, &devs[0], sp->hash, out);
    tuner_space_free(sp);
    return rc;
}

static int count_trials(env *e, const tuner_op *op, kc_trial_status st, size_t *ret_total)
{
    char key[KC_KEY_LEN + 1];
    if (tuning_key_of(e, op, key) < 0)
        return -1;
    kc_trial *t = NULL;
    size_t n = 0;
    if (kc_trials_get(e->db, key, &t, &n) < 0)
        return -1;
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += t[i].status == st;
    kc_trials_free(t, n);
    if (ret_total)
        *ret_total = n;
    return k;
}

static void check_stored(env *e, const sched_job_info *info, bool measured)
{
    CHECK(info->state == SCHED_DONE);
    CHECK(info->measured == measured);
    char akey[KC_KEY_LEN + 1];
    /* A job that could not measure stored the cost model's (or the default's) choice. */
    kc_choice want = measured ? KC_CHOSEN_MEASURED
                   : info->mode == TUNER_TUNE_NONE ? KC_CHOSEN_DEFAULT : KC_CHOSEN_MODEL;
    kc_choice sel_choice = (kc_choice)-1;
    CHECK(kc_selection_get(e->db, info->op_key, akey, &sel_choice) == 0);
    CHECK(strcmp(akey, info->artifact_key) == 0);
    CHECK(sel_choice == want);
    kc_artifact *a = NULL;
    CHECK(kc_artifact_get(e->db, info->artifact_key, &a) == 0);
    if (!a)
        return;
    CHECK(a->choice == want);
    CHECK(measured ? a->latency_us > 0 : a->latency_us < 0);
    CHECK(a->ptx_len > 0 && a->ptx && strstr(a->ptx, ".entry"));
    CHECK(a->launch.n_kernels >= 1 && a->launch.kernels[0].name[0]);
    CHECK(a->launch.kernels[0].n_args >= 2 && a->launch.kernels[0].args[0] == KC_BUF_INPUT0);
    CHECK(a->launch.has_output && a->launch.output_rank >= 1 && a->launch.output_dtype[0]);
    CHECK(a->provenance_json && strstr(a->provenance_json, "\"daemon\":"));
    CHECK(a->schedule_json && strstr(a->schedule_json, "\"template\""));
    kc_artifact_free(a);
}

/* ---- cases ---- */

static void test_none_and_model(void)
{
    env e;
    env_open(&e, NULL, false, NULL);
    tuner_op mm = matmul_f16(64, 64, 64), sm = softmax_f16(8, 512);
    sched_request r1 = request(&mm, TUNER_TUNE_NONE, SCHED_PRIO_NORMAL);
    sched_request r2 = request(&sm, TUNER_TUNE_MODEL, SCHED_PRIO_NORMAL);
    rec a = {0}, b = {0};
    uint64_t id1 = 0, id2 = 0;
    CHECK(sched_submit(e.s, &r1, on_done, &a, &id1, NULL) == 0);
    CHECK(sched_submit(e.s, &r2, on_done, &b, &id2, NULL) == 0);
    CHECK(id1 > 0 && id2 > id1);
    CHECK(a.calls == 0); /* never called back from inside submit */
    run_until(&e, rec_called, &a, "none job");
    run_until(&e, rec_called, &b, "model job");
    CHECK(a.calls == 1 && b.calls == 1);
    if (a.info.state != SCHED_DONE)
        fprintf(stderr, "none job: %s %s\n", a.info.error_code, a.info.error);
    if (b.info.state != SCHED_DONE)
        fprintf(stderr, "model job: %s %s\n", b.info.error_code, b.info.error);
    check_stored(&e, &a.info, false);
    check_stored(&e, &b.info, false);
    CHECK(a.info.mode == TUNER_TUNE_NONE && b.info.mode == TUNER_TUNE_MODEL);
    sched_job_info got;
    CHECK(sched_job_get(e.s, id1, &got) == 0 && got.state == SCHED_DONE);
    CHECK(sched_job_get(e.s, 999999, &got) == -ENOENT);
    sched_stats st;
    sched_stats_get(e.s, &st);
    CHECK(st.jobs_done == 2 && st.candidates_measured == 0 && st.candidates_compiled >= 2);
    env_close(&e);
}

static void test_measure_without_gpu(void)
{
    env e;
    env_open(&e, NULL, false, NULL);
    tuner_op sm = softmax_f16(16, 256);
    sched_request r = request(&sm, TUNER_TUNE_MEASURE, SCHED_PRIO_NORMAL);
    rec a = {0};
    CHECK(sched_submit(e.s, &r, on_done, &a, NULL, NULL) == 0);
    run_until(&e, rec_called, &a, "fallback job");
    check_stored(&e, &a.info, false);
    CHECK(strstr(a.info.warning, "no GPU worker for sm_90: ranked by the cost model, not measured"));
    env_close(&e);

    sched_config cfg;
    sched_config_defaults(&cfg);
    cfg.measure_requires_gpu = true;
    env_open(&e, &cfg, false, NULL);
    rec b = {0};
    CHECK(sched_submit(e.s, &r, on_done, &b, NULL, NULL) == -ENODEV);
    r.mode = TUNER_TUNE_MODEL; /* model mode needs no GPU */
    CHECK(sched_submit(e.s, &r, on_done, &b, NULL, NULL) == 0);
    run_until(&e, rec_called, &b, "model job");
    CHECK(b.info.state == SCHED_DONE && b.info.warning[0] == '\0');
    env_close(&e);
}

static void test_priorities(void)
{
    sched_config cfg;
    sched_config_defaults(&cfg);
    cfg.max_running_jobs = 1;
    env e;
    env_open(&e, &cfg, false, NULL);
    tuner_op ops[4] = {softmax_f16(4, 128), softmax_f16(4, 256), softmax_f16(4, 384),
                       softmax_f16(4, 640)};
    int prio[4] = {SCHED_PRIO_BACKGROUND, SCHED_PRIO_NORMAL, SCHED_PRIO_BLOCKING, SCHED_PRIO_NORMAL};
    rec r[4] = {{0}};
    for (int i = 0; i < 4; i++) {
        sched_request q = request(&ops[i], TUNER_TUNE_NONE, prio[i]);
        CHECK(sched_submit(e.s, &q, on_done, &r[i], NULL, NULL) == 0);
    }
    sched_stats st;
    sched_stats_get(e.s, &st);
    CHECK(st.jobs_queued == 4 && st.jobs_running == 0);
    recs rs = {r, 4};
    run_until(&e, all_called, &rs, "four jobs");
    /* BLOCKING, then the NORMAL ones in submit order, then BACKGROUND. */
    CHECK(r[2].order < r[1].order);
    CHECK(r[1].order < r[3].order);
    CHECK(r[3].order < r[0].order);
    for (int i = 0; i < 4; i++)
        CHECK(r[i].info.state == SCHED_DONE);

    /* A blocking request that joins a queued background job raises the job's priority. */
    tuner_op x = softmax_f16(5, 128), y = softmax_f16(5, 256);
    sched_request rx = request(&x, TUNER_TUNE_NONE, SCHED_PRIO_NORMAL);
    sched_request ry = request(&y, TUNER_TUNE_NONE, SCHED_PRIO_BACKGROUND);
    rec wx = {0}, wy = {0}, wy2 = {0};
    uint64_t idy = 0;
    CHECK(sched_submit(e.s, &rx, on_done, &wx, NULL, NULL) == 0);
    CHECK(sched_submit(e.s, &ry, on_done, &wy, &idy, NULL) == 0);
    ry.priority = SCHED_PRIO_BLOCKING;
    CHECK(sched_submit(e.s, &ry, on_done, &wy2, NULL, NULL) == 0);
    sched_job_info info;
    CHECK(sched_job_get(e.s, idy, &info) == 0 && info.priority == SCHED_PRIO_BLOCKING);
    recs rs2 = {&wx, 1};
    run_until(&e, all_called, &rs2, "normal job");
    CHECK(wy.calls == 1 && wy2.calls == 1 && wy.order < wx.order);
    env_close(&e);
}

static void test_queue_limit_detach_cancel(void)
{
    sched_config cfg;
    sched_config_defaults(&cfg);
    cfg.max_running_jobs = 1;
    cfg.max_queued_jobs = 2;
    env e;
    env_open(&e, &cfg, false, NULL);
    tuner_op a = softmax_f16(2, 128), b = softmax_f16(2, 256), c = softmax_f16(2, 512);
    sched_request ra = request(&a, TUNER_TUNE_NONE, SCHED_PRIO_NORMAL);
    sched_request rb = request(&b, TUNER_TUNE_NONE, SCHED_PRIO_NORMAL);
    sched_request rc = request(&c, TUNER_TUNE_NONE, SCHED_PRIO_NORMAL);
    rec wa1 = {0}, wa2 = {0}, wb = {0}, wc = {0};
    uint64_t ida = 0, ida2 = 0, idb = 0;
    sched_waiter *w2 = NULL;
    CHECK(sched_submit(e.s, &ra, on_done, &wa1, &ida, NULL) == 0);
    CHECK(sched_submit(e.s, &rb, on_done, &wb, &idb, NULL) == 0);
    CHECK(sched_submit(e.s, &rc, on_done, &wc, NULL, NULL) == -EAGAIN);
    /* Joining does not need a queue slot. */
    CHECK(sched_submit(e.s, &ra, on_done, &wa2, &ida2, &w2) == 0);
    CHECK(ida2 == ida && w2 != NULL);
    sched_job_info info;
    CHECK(sched_job_get(e.s, ida, &info) == 0 && info.waiters == 2 && info.state == SCHED_QUEUED);
    sched_waiter_detach(e.s, w2);
    CHECK(sched_job_get(e.s, ida, &info) == 0 && info.waiters == 1);

    CHECK(sched_job_cancel(e.s, idb) == 0);
    CHECK(wb.calls == 1 && wb.info.state == SCHED_CANCELLED);
    CHECK(strcmp(wb.info.error_code, "cancelled") == 0);
    CHECK(sched_job_cancel(e.s, idb) == -ENOENT);
    CHECK(sched_job_get(e.s, idb, &info) == 0 && info.state == SCHED_CANCELLED);

    run_until(&e, rec_called, &wa1, "job a");
    CHECK(wa1.calls == 1 && wa1.info.state == SCHED_DONE);
    CHECK(wa2.calls == 0);

    sched_job_info *list = NULL;
    size_t n = 0;
    CHECK(sched_jobs_list(e.s, &list, &n) == 0 && n == 2);
    if (list && n == 2)
        CHECK(list[0].id == ida && list[1].id == idb); /* ended, newest first */
    free(list);
    sched_stats st;
    sched_stats_get(e.s, &st);
    CHECK(st.jobs_cancelled == 1 && st.jobs_done == 1);
    env_close(&e);
}

/* One client may hold only its share of the queue (and of blocking priority); joining an
 * existing job is never charged, and requests with no peer have no quota. */
static void test_peer_quota(void)
{
    sched_config cfg;
    sched_config_defaults(&cfg);
    cfg.max_running_jobs = 1;
    cfg.max_queued_jobs = 16;
    cfg.max_queued_per_peer = 3;
    cfg.max_blocking_per_peer = 1;
    env e;
    env_open(&e, &cfg, false, NULL);
    tuner_op ops[10];
    for (int i = 0; i < 10; i++)
        ops[i] = softmax_f16(2, 64 * (i + 1));
    sched_request r[10];
    for (int i = 0; i < 10; i++)
        r[i] = request(&ops[i], TUNER_TUNE_NONE, SCHED_PRIO_NORMAL);
    for (int i = 0; i < 3; i++) {
        r[i].peer = "uid:1";
        CHECK(sched_submit(e.s, &r[i], NULL, NULL, NULL, NULL) == 0);
    }
    r[3].peer = "uid:1";
    CHECK(sched_submit(e.s, &r[3], NULL, NULL, NULL, NULL) == -EDQUOT);
    /* Joining one's own (or anyone's) queued job is free. */
    CHECK(sched_submit(e.s, &r[0], NULL, NULL, NULL, NULL) == 0);
    r[3].peer = "ip:10.0.0.7";
    CHECK(sched_submit(e.s, &r[3], NULL, NULL, NULL, NULL) == 0);
    r[4].peer = "ip:10.0.0.7";
    r[4].priority = SCHED_PRIO_BLOCKING;
    CHECK(sched_submit(e.s, &r[4], NULL, NULL, NULL, NULL) == 0);
    r[5].peer = "ip:10.0.0.7";
    r[5].priority = SCHED_PRIO_BLOCKING;
    CHECK(sched_submit(e.s, &r[5], NULL, NULL, NULL, NULL) == -EDQUOT);
    r[5].priority = SCHED_PRIO_NORMAL;
    CHECK(sched_submit(e.s, &r[5], NULL, NULL, NULL, NULL) == 0);
    r[6].peer = "ip:10.0.0.7";
    CHECK(sched_submit(e.s, &r[6], NULL, NULL, NULL, NULL) == -EDQUOT);
    /* No peer: no quota. */
    r[6].peer = NULL;
    for (int i = 6; i < 10; i++)
        CHECK(sched_submit(e.s, &r[i], NULL, NULL, NULL, NULL) == 0);
    env_close(&e);
}

/* Fair queueing with real jobs: within a priority, clients take turns (test_fair.c checks the
 * order exactly, with hundreds of jobs; here the jobs really run). */
static void test_fair_turns(void)
{
    sched_config cfg;
    sched_config_defaults(&cfg);
    cfg.max_running_jobs = 1;
    env e;
    env_open(&e, &cfg, false, NULL);
    tuner_op a[4], b = softmax_f16(3, 1024), c = softmax_f16(3, 2048);
    rec ra[4] = {{0}}, rb = {0}, rc = {0};
    for (int i = 0; i < 4; i++) {
        a[i] = softmax_f16(3, 64 * (i + 1));
        sched_request q = request(&a[i], TUNER_TUNE_NONE, SCHED_PRIO_NORMAL);
        q.peer = "uid:1000";
        CHECK(sched_submit(e.s, &q, on_done, &ra[i], NULL, NULL) == 0);
    }
    sched_request qb = request(&b, TUNER_TUNE_NONE, SCHED_PRIO_NORMAL);
    qb.peer = "token:0123456789abcdef";
    CHECK(sched_submit(e.s, &qb, on_done, &rb, NULL, NULL) == 0);
    sched_request qc = request(&c, TUNER_TUNE_NONE, SCHED_PRIO_NORMAL);
    qc.peer = "uid:1001";
    CHECK(sched_submit(e.s, &qc, on_done, &rc, NULL, NULL) == 0);
    int base = end_counter;
    recs rs = {ra, 2};
    run_until(&e, all_called, &rs, "the first round and a half");
    /* uid:1000's first job, then the two others' in turn, then uid:1000's second (the jobs of
     * one loop iteration start in turns from the first round). */
    CHECK(ra[0].order == base + 1);
    CHECK(rb.calls == 1 && rb.order == base + 2);
    CHECK(rc.calls == 1 && rc.order == base + 3);
    CHECK(ra[1].order == base + 4);
    for (int i = 0; i < 2; i++)
        CHECK(ra[i].info.state == SCHED_DONE);
    CHECK(rb.info.state == SCHED_DONE && rc.info.state == SCHED_DONE);
    env_close(&e);
}

/* Ended jobs stay readable: the last 64 of them. */
static void test_ended_ring(void)
{
    env e;
    env_open(&e, NULL, false, NULL);
    enum { N = 70 };
    uint64_t ids[N];
    rec w[N];
    memset(w, 0, sizeof(w));
    for (int i = 0; i < N; i++) {
        tuner_op op = softmax_f16(1, 64 + 8 * i);
        sched_request r = request(&op, TUNER_TUNE_NONE, SCHED_PRIO_BACKGROUND);
        CHECK(sched_submit(e.s, &r, on_done, &w[i], &ids[i], NULL) == 0);
    }
    for (int i = 0; i < N; i++) /* still queued: nothing ran yet */
        CHECK(sched_job_cancel(e.s, ids[i]) == 0 && w[i].calls == 1);
    sched_job_info info;
    for (int i = 0; i < N; i++)
        CHECK(sched_job_get(e.s, ids[i], &info) == (i < N - 64 ? -ENOENT : 0));
    sched_job_info *list = NULL;
    size_t n = 0;
    CHECK(sched_jobs_list(e.s, &list, &n) == 0 && n == 64);
    if (list && n == 64)
        CHECK(list[0].id == ids[N - 1] && list[63].id == ids[N - 64]);
    free(list);
    env_close(&e);
}

static void test_drain(void)
{
    sched_config cfg;
    sched_config_defaults(&cfg);
    cfg.max_running_jobs = 1;
    env e;
    env_open(&e, &cfg, false, NULL);
    tuner_op a = softmax_f16(3, 128), b = softmax_f16(3, 256);
    sched_request ra = request(&a, TUNER_TUNE_MODEL, SCHED_PRIO_NORMAL);
    sched_request rb = request(&b, TUNER_TUNE_MODEL, SCHED_PRIO_NORMAL);
    rec wa = {0}, wb = {0};
    CHECK(sched_submit(e.s, &ra, on_done, &wa, NULL, NULL) == 0);
    CHECK(sched_submit(e.s, &rb, on_done, &wb, NULL, NULL) == 0);
    uv_run(&e.loop, UV_RUN_NOWAIT); /* a starts: its compile is on the thread pool */
    int drained = 0;
    sched_drain(e.s, 0, flag_cb, &drained);
    CHECK(wb.calls == 1 && wb.info.state == SCHED_CANCELLED);
    CHECK(strcmp(wb.info.error_code, "shutting_down") == 0);
    CHECK(sched_submit(e.s, &rb, on_done, &wb, NULL, NULL) == -ESHUTDOWN);
    run_until(&e, int_set, &drained, "drain done");
    CHECK(wa.calls == 1);
    CHECK(wa.info.state == SCHED_CANCELLED || wa.info.state == SCHED_DONE);
    sched_free(e.s);
    uv_run(&e.loop, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&e.loop) == 0); /* nothing left on the loop or the thread pool */
    kc_close(e.db);
    nftw(e.dir, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
}

typedef struct job_state_ctx {
    uint64_t id;
    sched_state state;
} job_state_ctx;

static bool job_in_state(env *e, void *ctx)
{
    job_state_ctx *c = ctx;
    sched_job_info info;
    return sched_job_get(e->s, c->id, &info) == 0 && info.state >= c->state;
}

/* 50 identical submits, half while queued and half while running -> one job, 50 answers; then
 * the same request again re-uses every trial; then a fused variant re-times only the top N.
 * The stand-in times every candidate alike, so that none of the anchor's is stopped early (the
 * fused variant re-times ok trials only; with image-hash timings how many are ok would depend
 * on the generated code). */
static void test_join_reuse_fused(void)
{
    sched_config cfg;
    sched_config_defaults(&cfg);
    cfg.budget_candidates = 3;
    cfg.fused_retime_top = 2;
    env e;
    setenv("HIDETD_STANDIN_LATENCY", "10", 1);
    env_open(&e, &cfg, true, NULL);
    tuner_op mm = matmul_f16(64, 64, 64);
    sched_request r = request(&mm, TUNER_TUNE_MEASURE, SCHED_PRIO_NORMAL);
    rec w[50];
    memset(w, 0, sizeof(w));
    uint64_t ids[50] = {0};
    for (int i = 0; i < 25; i++)
        CHECK(sched_submit(e.s, &r, on_done, &w[i], &ids[i], NULL) == 0);
    job_state_ctx running = {ids[0], SCHED_RUNNING};
    run_until(&e, job_in_state, &running, "job running");
    for (int i = 25; i < 50; i++)
        CHECK(sched_submit(e.s, &r, on_done, &w[i], &ids[i], NULL) == 0);
    recs rs = {w, 50};
    run_until(&e, all_called, &rs, "50 waiters");
    for (int i = 0; i < 50; i++) {
        CHECK(ids[i] == ids[0]);
        CHECK(w[i].calls == 1);
        CHECK(w[i].info.state == SCHED_DONE);
        CHECK(strcmp(w[i].info.artifact_key, w[0].info.artifact_key) == 0);
    }
    if (w[0].info.state != SCHED_DONE)
        fprintf(stderr, "measure job: %s %s\n", w[0].info.error_code, w[0].info.error);
    check_stored(&e, &w[0].info, true);
    CHECK(w[0].info.candidates_total == 3 && w[0].info.candidates_done == 3);
    CHECK(w[0].info.best_us > 0 && w[0].info.best_schedule[0] == '{');
    sched_stats st0;
    sched_stats_get(e.s, &st0);
    /* Three candidates, then all three again in the final round (flat latencies: within 1%). */
    CHECK(st0.jobs_done == 1 && st0.candidates_measured == 6);
    size_t total = 0;
    CHECK(count_trials(&e, &mm, KC_TRIAL_OK, &total) + count_trials(&e, &mm, KC_TRIAL_SLOWER, NULL) == 3);
    CHECK(total == 3);

    /* Same tuning key again: every candidate's trial is reused, nothing is measured. */
    rec again = {0};
    uint64_t id2 = 0;
    CHECK(sched_submit(e.s, &r, on_done, &again, &id2, NULL) == 0);
    CHECK(id2 > ids[0]);
    run_until(&e, rec_called, &again, "second job");
    check_stored(&e, &again.info, true);
    CHECK(strcmp(again.info.artifact_key, w[0].info.artifact_key) == 0);
    sched_stats st1;
    sched_stats_get(e.s, &st1);
    CHECK(st1.candidates_measured == st0.candidates_measured);
    CHECK(again.info.best_us == w[0].info.best_us);

    /* The artifact was removed (hidetctl cache rm) but the trials stay: the winner is compiled
     * again and stored, still without measuring anything. */
    kc_filter all;
    memset(&all, 0, sizeof(all));
    size_t removed = 0;
    CHECK(kc_remove(e.db, &all, &removed) == 0 && removed == 1);
    rec third = {0};
    CHECK(sched_submit(e.s, &r, on_done, &third, NULL, NULL) == 0);
    run_until(&e, rec_called, &third, "third job");
    check_stored(&e, &third.info, true);
    CHECK(strcmp(third.info.artifact_key, w[0].info.artifact_key) == 0);
    sched_stats_get(e.s, &st1);
    CHECK(st1.candidates_measured == st0.candidates_measured);

    /* Fused variant: the anchor (the plain matmul) is tuned, so only its best 2 are re-timed. */
    tuner_op fused = matmul_bias_relu_f16(64, 64, 64);
    sched_request rf = request(&fused, TUNER_TUNE_MEASURE, SCHED_PRIO_NORMAL);
    rec wf = {0};
    CHECK(sched_submit(e.s, &rf, on_done, &wf, NULL, NULL) == 0);
    run_until(&e, rec_called, &wf, "fused job");
    if (wf.info.state != SCHED_DONE)
        fprintf(stderr, "fused job: %s %s\n", wf.info.error_code, wf.info.error);
    check_stored(&e, &wf.info, true);
    CHECK(wf.info.candidates_total == 2);
    sched_stats st2;
    sched_stats_get(e.s, &st2);
    CHECK(st2.candidates_measured == st1.candidates_measured + 2 + 2); /* and their final round */
    /* Recorded under the fused op's own key; the anchor's record is unchanged. */
    CHECK(count_trials(&e, &fused, KC_TRIAL_OK, &total) == 2 && total == 2);
    CHECK(count_trials(&e, &mm, KC_TRIAL_OK, &total) == 3 && total == 3);
    env_close(&e);
    unsetenv("HIDETD_STANDIN_LATENCY");
}

static void test_fault(const char *faults, kc_trial_status expect, const char *what)
{
    sched_config cfg;
    sched_config_defaults(&cfg);
    cfg.budget_candidates = 4;
    env e;
    env_open(&e, &cfg, true, faults);
    tuner_op mm = matmul_f16(64, 64, 64);
    sched_request r = request(&mm, TUNER_TUNE_MEASURE, SCHED_PRIO_BLOCKING);
    rec w = {0};
    CHECK(sched_submit(e.s, &r, on_done, &w, NULL, NULL) == 0);
    run_until(&e, rec_called, &w, what);
    if (w.info.state != SCHED_DONE)
        fprintf(stderr, "%s: %s %s\n", what, w.info.error_code, w.info.error);
    check_stored(&e, &w.info, true);
    CHECK(w.info.candidates_done == 4 && w.info.candidates_failed == 1);
    size_t total = 0;
    int n = count_trials(&e, &mm, expect, &total);
    if (n != 1)
        fprintf(stderr, "%s: %d trials with status %s\n", what, n, kc_trial_status_name(expect));
    CHECK(n == 1 && total == 4);
    env_close(&e);
}

typedef struct busy_ctx {
    int dummy;
} busy_ctx;

static bool device_busy(env *e, void *ctx)
{
    (void)ctx;
    const gw_device_info *d = NULL;
    return gw_pool_devices(e->pool, &d) > 0 && d[0].state == GW_DEV_BUSY;
}

static void test_cancel_running(void)
{
    sched_config cfg;
    sched_config_defaults(&cfg);
    cfg.budget_candidates = 3;
    env e;
    env_open(&e, &cfg, true, "slow@1:60000");
    tuner_op mm = matmul_f16(64, 64, 64);
    sched_request r = request(&mm, TUNER_TUNE_MEASURE, SCHED_PRIO_NORMAL);
    rec w1 = {0}, w2 = {0};
    uint64_t id = 0;
    CHECK(sched_submit(e.s, &r, on_done, &w1, &id, NULL) == 0);
    CHECK(sched_submit(e.s, &r, on_done, &w2, NULL, NULL) == 0);
    busy_ctx bc = {0};
    run_until(&e, device_busy, &bc, "first measurement running");
    CHECK(sched_job_cancel(e.s, id) == 0);
    CHECK(w1.calls == 1 && w2.calls == 1);
    CHECK(w1.info.state == SCHED_CANCELLED && w2.info.state == SCHED_CANCELLED);
    char akey[KC_KEY_LEN + 1];
    CHECK(kc_selection_get(e.db, w1.info.op_key, akey, NULL) == -ENOENT);
    env_close(&e); /* the drain waits for the cancelled measurement's callback */
}

/* A time budget stops the search once a candidate passed: only the first one is measured. */
static void test_time_budget(void)
{
    sched_config cfg;
    sched_config_defaults(&cfg);
    cfg.budget_candidates = 4;
    env e;
    env_open(&e, &cfg, true, NULL);
    tuner_op mm = matmul_f16(64, 64, 64);
    sched_request r = request(&mm, TUNER_TUNE_MEASURE, SCHED_PRIO_NORMAL);
    r.budget_s = 1e-6;
    rec w = {0};
    CHECK(sched_submit(e.s, &r, on_done, &w, NULL, NULL) == 0);
    run_until(&e, rec_called, &w, "budget job");
    check_stored(&e, &w.info, true);
    CHECK(w.info.candidates_total == 4 && w.info.candidates_done == 1);
    env_close(&e);
}

typedef struct job_watch {
    sched *s;
    uint64_t id;
} job_watch;

static bool first_measured(env *e, void *ctx)
{
    (void)e;
    job_watch *w = ctx;
    sched_job_info info;
    return sched_job_get(w->s, w->id, &info) == 0 && info.candidates_done >= 1;
}

/* Compiling runs ahead of measuring by the job's share of the compile threads, not by a fixed two
 * per GPU: while the first candidate is timed (8 s on the stand-in), every other candidate of the
 * budget compiles. With two ahead only three candidates and the reference would have compiled. */
static void test_compile_ahead(void)
{
    sched_config cfg;
    sched_config_defaults(&cfg);
    cfg.budget_candidates = 8;
    cfg.compile_threads = 8; /* a share of 7 for the only running job */
    env e;
    env_open(&e, &cfg, true, "slow@1:8000");
    tuner_op mm = matmul_f16(80, 48, 64);
    sched_request r = request(&mm, TUNER_TUNE_MEASURE, SCHED_PRIO_NORMAL);
    rec w = {0};
    job_watch jw = {e.s, 0};
    CHECK(sched_submit(e.s, &r, on_done, &w, &jw.id, NULL) == 0);
    run_until(&e, first_measured, &jw, "first measurement");
    sched_stats st;
    sched_stats_get(e.s, &st);
    CHECK(st.candidates_compiled == 9); /* the reference and all 8 candidates */
    if (st.candidates_compiled != 9)
        fprintf(stderr, "compiled %llu when the first candidate was timed\n",
                (unsigned long long)st.candidates_compiled);
    run_until(&e, rec_called, &w, "compile-ahead job");
    check_stored(&e, &w.info, true);
    env_close(&e);
}

/* Every candidate wrong: the job fails with a summary of the reasons, every trial recorded. */
static void test_all_wrong(void)
{
    sched_config cfg;
    sched_config_defaults(&cfg);
    cfg.budget_candidates = 3;
    env e;
    env_open(&e, &cfg, true, "wrong@1,wrong@2,wrong@3");
    tuner_op mm = matmul_f16(64, 64, 64);
    sched_request r = request(&mm, TUNER_TUNE_MEASURE, SCHED_PRIO_NORMAL);
    rec w = {0};
    CHECK(sched_submit(e.s, &r, on_done, &w, NULL, NULL) == 0);
    run_until(&e, rec_called, &w, "all-wrong job");
    CHECK(w.info.state == SCHED_FAILED);
    CHECK(strcmp(w.info.error_code, "no_valid_candidate") == 0);
    CHECK(strstr(w.info.error, "3 wrong") != NULL);
    CHECK(w.info.candidates_failed == 3);
    size_t total = 0;
    CHECK(count_trials(&e, &mm, KC_TRIAL_WRONG, &total) == 3 && total == 3);
    char akey[KC_KEY_LEN + 1];
    CHECK(kc_selection_get(e.db, w.info.op_key, akey, NULL) == -ENOENT);
    env_close(&e);
}

/* Two identical GPUs share one job's candidates when the second has nothing else to do: the
 * first measurement (on the job's home GPU) takes 1.5 s, so the idle second GPU surely gets
 * candidates however fast they compile. A softmax job submitted next runs on the GPUs too. */
static void test_two_devices(void)
{
    sched_config cfg;
    sched_config_defaults(&cfg);
    cfg.budget_candidates = 4;
    g_devices = "2";
    env e;
    env_open(&e, &cfg, true, "slow@1:1500");
    g_devices = "1";
    tuner_op mm = matmul_f16(64, 64, 64);
    sched_request r = request(&mm, TUNER_TUNE_MEASURE, SCHED_PRIO_NORMAL);
    tuner_op sm = softmax_f16(32, 1024);
    sched_request rs = request(&sm, TUNER_TUNE_MEASURE, SCHED_PRIO_NORMAL);
    rs.budget_candidates = 2;
    rec w = {0}, ws = {0};
    CHECK(sched_submit(e.s, &r, on_done, &w, NULL, NULL) == 0);
    run_until(&e, rec_called, &w, "two-GPU job");
    CHECK(sched_submit(e.s, &rs, on_done, &ws, NULL, NULL) == 0);
    run_until(&e, rec_called, &ws, "softmax job");
    check_stored(&e, &w.info, true);
    if (ws.info.state != SCHED_DONE)
        fprintf(stderr, "softmax job: %s %s\n", ws.info.error_code, ws.info.error);
    check_stored(&e, &ws.info, true);
    CHECK(ws.info.candidates_done == 2);
    const gw_device_info *d = NULL;
    size_t n = gw_pool_devices(e.pool, &d);
    uint64_t measured = 0;
    for (size_t i = 0; i < n; i++)
        measured += d[i].measured;
    /* Both GPUs timed the matmul's candidates, so its best of each GPU were timed again on one. */
    CHECK(w.info.measured_on == 3u);
    CHECK(w.info.final_device >= 0 && w.info.final_candidates >= 2);
    CHECK(n == 2 && measured == 6u + (unsigned)w.info.final_candidates +
                                (unsigned)ws.info.final_candidates);
    env_close(&e);
}

/* Measure requests the stand-in workers of e handled (their shared counter, kept only while a
 * fault list is set: COUNT_ONLY is one that plans nothing); -1 when unread. */
#define COUNT_ONLY "count@0"

static long requests_of(env *e)
{
    char path[256], buf[32] = "";
    snprintf(path, sizeof(path), "%s/state/measure-count", e->dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0; /* none yet: the first request makes the file */
    long n = fgets(buf, sizeof(buf), f) ? strtol(buf, NULL, 10) : -1;
    fclose(f);
    return n;
}

/* A job on e, waited for. */
static sched_job_info run_job(env *e, const tuner_op *op)
{
    sched_request r = request(op, TUNER_TUNE_MEASURE, SCHED_PRIO_NORMAL);
    rec w = {0};
    CHECK(sched_submit(e->s, &r, on_done, &w, NULL, NULL) == 0);
    run_until(e, rec_called, &w, "tuning job");
    check_stored(e, &w.info, true);
    return w.info;
}

static long g_requests; /* requests_of the last tune_on's stand-ins */

/* Tunes op on `devices` stand-in GPUs, `skew` making one slower, with the stand-in's planned
 * `faults` (see test_final_round). */
/* The range_worst of the launch tune_on's job stored (-1: it stored none). */
static double g_stored_worst;

static sched_job_info tune_on(const char *devices, const char *skew, const char *faults,
                              const tuner_op *op, const sched_config *cfg)
{
    g_devices = devices;
    g_skew = skew;
    env e;
    env_open(&e, cfg, true, faults);
    g_devices = "1";
    g_skew = NULL;
    const sched_job_info info = run_job(&e, op);
    g_requests = requests_of(&e);
    kc_artifact *a = NULL;
    g_stored_worst = info.artifact_key[0] && kc_artifact_get_meta(e.db, info.artifact_key, &a) == 0 ? a->launch.range_worst : -1;
    kc_artifact_free(a);
    env_close(&e);
    return info;
}

/* Two GPUs of one model, one of them a thousand times slower, time one candidate each: candidates
 * compile one at a time in rank order, the first is timed for 3 s on GPU 0 ("slow@1:3000"), so
 * the second goes to GPU 1. Whichever of the two is faster, in one of the runs below it was
 * timed on the slow GPU: comparing first-round times would pick the other there. The final round
 * times both again on one GPU, so both runs pick what one GPU picks, and exactly one run changes
 * its first pick. */
static void test_final_round(void)
{
    sched_config cfg;
    sched_config_defaults(&cfg);
    cfg.budget_candidates = 2;
    cfg.compile_ahead = 1;
    tuner_op mm = matmul_f16(96, 160, 64);
    /* One GPU, the second candidate's timing made half the first's (flat latencies, "lucky" by
     * 50%): the two times lie far apart, so there is no round. Hash-derived times would make this
     * depend on the generated code (any codegen change moves them). */
    setenv("HIDETD_STANDIN_LATENCY", "10", 1);
    sched_job_info one = tune_on("1", NULL, "slow@1:3000,lucky@2:50", &mm, &cfg);
    unsetenv("HIDETD_STANDIN_LATENCY");
    CHECK(one.final_device == -1 && one.final_candidates == 0);
    /* The two-GPU runs time with the stand-in's hash of the code (not the flat, lucky times of
     * the run above, whose pick is no longer the hash's): each final round times both candidates
     * on one GPU, so both runs pick the same one, whichever GPU was slow. */
    int changed = 0;
    const char *skews[] = {"0:1000", "1:1000"};
    char picks[2][256] = {"", ""};
    for (int i = 0; i < 2; i++) {
        sched_job_info two = tune_on("2", skews[i], "slow@1:3000", &mm, &cfg);
        CHECK(two.measured_on == 3u);
        CHECK(two.final_device >= 0 && two.final_candidates == 2);
        snprintf(picks[i], sizeof(picks[i]), "%s", two.best_schedule);
        changed += two.final_changed;
    }
    CHECK(strcmp(picks[0], picks[1]) == 0, "skew 0:1000 picked %s, skew 1:1000 %s", picks[0], picks[1]);
    CHECK(changed == 1);
}

/* One GPU: candidates that came within the margin of the best are timed again one after
 * another, and the fastest of that round wins, each held to the worse of its two times, so a
 * run that came out fast by chance does not choose the kernel, in the first round or in the
 * final one (a kernel fast in one of its module loads and slow in the others). With flat
 * stand-in latencies the three candidates lie within 1% of each other; in turn each first
 * timing (requests 1 to 3), then each timing in the round (4 to 6), comes out 3% fast
 * ("lucky"). Every run must choose what the run without luck chose; exactly the two runs whose
 * lucky first timing is another candidate's change their first choice, and no run with luck in
 * the round does. */
static void test_final_round_one_gpu(void)
{
    sched_config cfg;
    sched_config_defaults(&cfg);
    cfg.budget_candidates = 3;
    cfg.compile_ahead = 1;
    tuner_op mm = matmul_f16(96, 160, 64);
    setenv("HIDETD_STANDIN_LATENCY", "10", 1);
    sched_job_info calm = tune_on("1", NULL, NULL, &mm, &cfg);
    CHECK(calm.final_device == 0 && calm.final_candidates == 3 && !calm.final_changed,
          "device %d, %d candidates", calm.final_device, calm.final_candidates);
    int changed = 0;
    const char *luck[] = {"lucky@1:3", "lucky@2:3", "lucky@3:3", "lucky@4:3", "lucky@5:3", "lucky@6:3"};
    for (int i = 0; i < 6; i++) {
        sched_job_info r = tune_on("1", NULL, luck[i], &mm, &cfg);
        CHECK(r.final_device == 0 && r.final_candidates == 3, "%s", luck[i]);
        CHECK(strcmp(r.best_schedule, calm.best_schedule) == 0, "%s picked %s (%.3f us), calm run %s (%.3f us)",
              luck[i], r.best_schedule, r.best_us, calm.best_schedule, calm.best_us);
        if (i < 3)
            changed += r.final_changed;
        else
            CHECK(!r.final_changed, "%s changed the first pick", luck[i]);
    }
    CHECK(changed == 2);
    unsetenv("HIDETD_STANDIN_LATENCY");
}

/* The heated trials under a tuning key on e (their reason says so): how many, and the least
 * time; *behind counts those timed behind a heater (NULL: not counted). */
static int heated_trials_at(env *e, const char *key, double *least_us, int *behind)
{
    kc_trial *t = NULL;
    size_t n = 0;
    if (kc_trials_get(e->db, key, &t, &n) < 0)
        return -1;
    int k = 0;
    *least_us = -1;
    for (size_t i = 0; i < n; i++)
        if (t[i].reason && strstr(t[i].reason, "back-to-back")) {
            k++;
            if (behind && strstr(t[i].reason, "of the heater"))
                ++*behind;
            if (*least_us < 0 || t[i].latency_us < *least_us)
                *least_us = t[i].latency_us;
        }
    kc_trials_free(t, n);
    return k;
}

/* heated_trials_at op's tuning key. */
static int heated_trials(env *e, const tuner_op *op, double *least_us, int *behind)
{
    char key[KC_KEY_LEN + 1];
    return tuning_key_of(e, op, key) < 0 ? -1 : heated_trials_at(e, key, least_us, behind);
}

static tuner_op ranged_matmul(void);

/* A long kernel's final round (SCHED__HEAT_*): with every first time at about 400 us (flat
 * stand-in latencies, within 1% of each other) the round takes ten of the twelve and times each
 * after 200 ms of back-to-back runs, the first round's best heating the others, which the
 * stand-in answers with 0-10% more per candidate (a power cap's reordering): the winner is the
 * least of the round's times, and the trials hold those. Kernels of 100 us keep the plain
 * round: three, not heated. */
static void test_final_round_heated(void)
{
    sched_config cfg;
    sched_config_defaults(&cfg);
    cfg.budget_candidates = 12;
    cfg.compile_ahead = 1;
    tuner_op mm = matmul_f16(96, 160, 64);
    setenv("HIDETD_STANDIN_LATENCY", "400", 1);
    env e;
    env_open(&e, &cfg, true, COUNT_ONLY);
    sched_job_info hot = run_job(&e, &mm);
    double least = -1;
    int behind = 0;
    const int n_heated = heated_trials(&e, &mm, &least, &behind);
    CHECK(hot.final_device == 0 && hot.final_heated && hot.final_candidates == 10,
          "heated %d, %d candidates", hot.final_heated, hot.final_candidates);
    CHECK(n_heated == 10 && least > 0 && hot.best_us == least, "%d heated trials, least %.3f us, best %.3f us",
          n_heated, least, hot.best_us);
    /* Every finalist but the first round's best ran behind it (set_heating). */
    CHECK(behind == 9, "%d of 10 behind the heater", behind);
    CHECK(requests_of(&e) == 12 + 10, "%ld requests", requests_of(&e));
    env_close(&e);
    /* A measured range: the round's finalists timed at the top and at the middle, each behind
     * the best at that size (its launches bound to the middle's sizes). */
    cfg.budget_candidates = 4;
    env_open(&e, &cfg, true, COUNT_ONLY);
    const tuner_op ranged = ranged_matmul();
    sched_job_info rj = run_job(&e, &ranged);
    char top_key[KC_KEY_LEN + 1], mid_key[KC_KEY_LEN + 1];
    const int64_t mid[TUNER_MAX_DIMS] = {181}; /* sqrt(64 x 512) */
    int behind_top = 0, behind_mid = 0;
    CHECK(tuning_key_of(&e, &ranged, top_key) == 0);
    sched_mid_tuning_key(top_key, mid, 1, mid_key);
    const int heated_top = heated_trials_at(&e, top_key, &least, &behind_top);
    const int heated_mid = heated_trials_at(&e, mid_key, &least, &behind_mid);
    CHECK(rj.final_heated && rj.final_candidates == 4 && heated_top == 4 && heated_mid == 4 && behind_top == 3 &&
              behind_mid == 3,
          "ranged: heated %d, %d candidates; heated %d/%d, behind %d/%d", rj.final_heated, rj.final_candidates,
          heated_top, heated_mid, behind_top, behind_mid);
    env_close(&e);
    setenv("HIDETD_STANDIN_LATENCY", "100", 1);
    env_open(&e, &cfg, true, NULL);
    sched_job_info cool = run_job(&e, &mm);
    CHECK(cool.final_device == 0 && !cool.final_heated && cool.final_candidates == 3 &&
              heated_trials(&e, &mm, &least, NULL) == 0,
          "heated %d, %d candidates", cool.final_heated, cool.final_candidates);
    env_close(&e);
    unsetenv("HIDETD_STANDIN_LATENCY");
}

/* How scheduler/tune.c compares a measured range's candidates: candidate i of n (items[i] in the
 * space, timed top[i] at the range's top and mid[i] at its middle) by the worst of its ratios to
 * the least time at each of the range's samples, each one's times carried there by the model's
 * ratio for it (prices' carry: from the middle at and below it, from the top above). */
static double worst_ratio(const tuner_range_prices *p, const size_t *items, const double *top, const double *mid,
                          int n, int i)
{
    double best[TUNER_RANGE_SAMPLES], worst = 1.0;
    for (int k = 0; k < TUNER_RANGE_SAMPLES; k++) {
        best[k] = 1e300;
        for (int c = 0; c < n; c++) {
            const double t = (k <= TUNER_RANGE_MIDDLE ? mid[c] : top[c]) * p->carry[items[c] * TUNER_RANGE_SAMPLES + k];
            best[k] = t < best[k] ? t : best[k];
        }
    }
    for (int k = 0; k < TUNER_RANGE_SAMPLES; k++) {
        const double t = (k <= TUNER_RANGE_MIDDLE ? mid[i] : top[i]) * p->carry[items[i] * TUNER_RANGE_SAMPLES + k];
        worst = t / best[k] > worst ? t / best[k] : worst;
    }
    return worst;
}

/* A dynamic op is timed at its range's top (the dims' max) and middle but serves the whole range:
 * the pick is the measured candidate with the least worst ratio to the best time at the range's
 * samples (worst_ratio), not the least time. [n,4096] x [4096,4096] at n 769..1024 on sm_90a: of
 * the model's first seven timed alike (flat stand-in latencies, within 1% of each other), the one
 * the model prices worst through the range against where it is timed (2x the best other at one
 * sample: a tile count that fills its waves only higher up) is timed 8% fast ("lucky", at the top
 * and at the middle: its requests are the (2i+1)th and (2i+2)th, each candidate timed at both
 * sizes in turn, see test_range_two_sizes): no other comes within the final round's margin of it
 * by time alone, so taking the least time picks it; by worst ratio another wins. */
static void test_measured_range(void)
{
    sched_config cfg;
    sched_config_defaults(&cfg);
    cfg.budget_candidates = 7;
    cfg.compile_ahead = 1; /* compiled, so timed, in the model's order */
    tuner_op mm = matmul_f16(1024, 4096, 4096);
    mm.n_dims = 1;
    snprintf(mm.dims[0].name, sizeof(mm.dims[0].name), "n");
    mm.dims[0].min = 769;
    mm.dims[0].max = 1024;
    mm.dims[0].multiple_of = 1;
    mm.inputs[0].sym[0] = mm.output.sym[0] = 1;
    const tuner_target t90a = {90, true};
    /* What the job measures (the model's first seven) and their prices. */
    tuner_space *sp = NULL;
    char *err = NULL;
    CHECK(tuner_space_build(&mm, &t90a, &sp, &err) == 0 && sp && sp->n > (size_t)cfg.budget_candidates,
          "measured range: space: %s", err ? err : "?");
    free(err);
    size_t *order = sp ? calloc(sp->n, sizeof(*order)) : NULL;
    double *carry = sp ? calloc(sp->n * TUNER_RANGE_SAMPLES, sizeof(*carry)) : NULL;
    CHECK(order && carry, "measured range: memory");
    if (!sp || sp->n <= (size_t)cfg.budget_candidates || !order || !carry) {
        free(order);
        free(carry);
        tuner_space_free(sp);
        return;
    }
    tuner_range_prices prices = {.carry = carry};
    tuner_rank_ranged(&mm, &t90a, sp, order, NULL, &prices);
    CHECK(prices.ranged, "measured range: no prices");
    /* The lucky one: of the measured, the one the model prices worst through the range against
     * where it is timed (its worst ratio if all were timed alike). */
    double top[16], mid[16], ratio[16];
    for (int i = 0; i < cfg.budget_candidates; i++)
        top[i] = mid[i] = 10;
    int lucky = 0;
    for (int i = 0; i < cfg.budget_candidates; i++) {
        ratio[i] = worst_ratio(&prices, order, top, mid, cfg.budget_candidates, i);
        lucky = ratio[i] > ratio[lucky] ? i : lucky;
    }
    /* Each one's worst ratio, timed as the stand-in will (10 us, the lucky one's 8% less). */
    top[lucky] = mid[lucky] = 9.2;
    double least = 1e9;
    for (int i = 0; i < cfg.budget_candidates; i++) {
        ratio[i] = worst_ratio(&prices, order, top, mid, cfg.budget_candidates, i);
        if (i != lucky)
            least = ratio[i] < least ? ratio[i] : least;
    }
    /* The premise: the lucky one is priced clearly worse through the range than the best of the
     * others, by more than its luck. */
    CHECK(ratio[lucky] > 1.05 * least, "measured range: worst ratios %.3f (lucky) against %.3f", ratio[lucky],
          least);
    g_target = t90a;
    setenv("HIDETD_STANDIN_LATENCY", "10", 1);
    char luck[32];
    snprintf(luck, sizeof(luck), "lucky@%d-%d:8", 2 * lucky + 1, 2 * lucky + 2);
    sched_job_info r = tune_on("1", NULL, luck, &mm, &cfg);
    unsetenv("HIDETD_STANDIN_LATENCY");
    g_target = T90;
    double picked = -1;
    for (int i = 0; i < cfg.budget_candidates; i++) {
        char *sj = tuner_schedule_json(&sp->items[order[i]]);
        if (sj && strcmp(sj, r.best_schedule) == 0)
            picked = ratio[i];
        free(sj);
    }
    CHECK(picked > 0, "measured range: the pick %s is not among the measured", r.best_schedule);
    CHECK(picked <= 1.0101 * least, "measured range: picked %s (worst ratio %.3f) where another has %.3f",
          r.best_schedule, picked, least);
    free(order);
    free(carry);
    tuner_space_free(sp);
}

/* [n, 256] x [256, 256] in f16 with n in [64, 512] on sm_90: a measured range (its middle
 * n = 181). */
static tuner_op ranged_matmul(void)
{
    tuner_op mm = matmul_f16(512, 256, 256);
    mm.n_dims = 1;
    snprintf(mm.dims[0].name, sizeof(mm.dims[0].name), "n");
    mm.dims[0].min = 64;
    mm.dims[0].max = 512;
    mm.dims[0].multiple_of = 1;
    mm.inputs[0].sym[0] = mm.output.sym[0] = 1;
    return mm;
}

/* A measured range job times each candidate that passed at the top a second time, unchecked, at
 * the range's middle, and picks by worst ratio (worst_ratio); a static job times each once.
 * Requests are counted by the stand-ins (their shared counter); with one GPU and one compile
 * ahead, candidate i's requests are the (2i+1)th (top) and (2i+2)th (middle). Flat latencies:
 * no candidate is stopped early. */
static void test_range_two_sizes(void)
{
    sched_config cfg;
    sched_config_defaults(&cfg);
    cfg.budget_candidates = 2;
    cfg.compile_ahead = 1;
    setenv("HIDETD_STANDIN_LATENCY", "10", 1);

    /* Static: one request per candidate, and per finalist of the round. */
    tuner_op st = matmul_f16(96, 160, 64);
    sched_job_info r = tune_on("1", NULL, COUNT_ONLY, &st, &cfg);
    CHECK(g_requests == 2 + r.final_candidates, "static: %ld requests, %d in the final round", g_requests,
          r.final_candidates);
    CHECK(r.n_range_dims == 0 && r.best_mid_us < 0 && r.range_worst < 0 && g_stored_worst == 0, "static: range fields");

    /* Ranged: two per candidate, and two per finalist. */
    tuner_op mm = ranged_matmul();
    sched_job_info calm = tune_on("1", NULL, COUNT_ONLY, &mm, &cfg);
    const double calm_stored_worst = g_stored_worst; /* what a dispatch table reads (kc_launch) */
    CHECK(calm.candidates_done == 2 && calm.candidates_failed == 0);
    /* The job says where it timed (n in [64, 512]: the top 512, the middle sqrt(64 x 512) = 181)
     * and the best's time there. */
    CHECK(calm.n_range_dims == 1 && strcmp(calm.range_dims[0], "n") == 0 && calm.range_top[0] == 512 &&
              calm.range_mid[0] == 181 && calm.best_mid_us > 0,
          "ranged: timed at %lld and %lld, middle %g us", (long long)calm.range_top[0], (long long)calm.range_mid[0],
          calm.best_mid_us);
    CHECK(g_requests == 2 * (2 + calm.final_candidates), "ranged: %ld requests, %d in the final round",
          g_requests, calm.final_candidates);
    /* Two GPUs: each candidate's middle is timed on the GPU that timed its top, and the final
     * round (one GPU) times its finalists at both sizes. */
    r = tune_on("2", NULL, COUNT_ONLY, &mm, &cfg);
    CHECK(r.candidates_done == 2 && r.candidates_failed == 0 && g_requests == 2 * (2 + r.final_candidates),
          "two GPUs: %ld requests, %d in the final round", g_requests, r.final_candidates);
    /* The middle's request is not checked: a wrong answer planned for it never happens (the
     * stand-in fails only checked requests), while one planned for the top fails the candidate,
     * which is then not timed at the middle. */
    r = tune_on("1", NULL, "wrong@2", &mm, &cfg);
    CHECK(r.candidates_failed == 0 && strcmp(r.best_schedule, calm.best_schedule) == 0 &&
          g_requests == 2 * (2 + r.final_candidates), "wrong@2: %d failed, %ld requests", r.candidates_failed,
          g_requests);
    r = tune_on("1", NULL, "wrong@1", &mm, &cfg);
    CHECK(r.candidates_failed == 1 && g_requests == 3 && r.final_candidates == 0,
          "wrong@1: %d failed, %ld requests", r.candidates_failed, g_requests);
    /* A kernel that faults at the middle is no kernel for the range. */
    r = tune_on("1", NULL, "fault@2", &mm, &cfg);
    CHECK(r.candidates_failed == 1 && r.final_candidates == 0, "fault@2: %d failed", r.candidates_failed);

    /* The calm pick, made slow at the middle only (its top timing as before), loses to the other,
     * which is good at both. */
    tuner_space *sp = NULL;
    char *err = NULL;
    CHECK(tuner_space_build(&mm, &T90, &sp, &err) == 0 && sp && sp->n >= 2, "range: space: %s", err ? err : "?");
    free(err);
    size_t *order = sp ? calloc(sp->n, sizeof(*order)) : NULL;
    double *carry = sp ? calloc(sp->n * TUNER_RANGE_SAMPLES, sizeof(*carry)) : NULL;
    if (sp && sp->n >= 2 && order && carry) {
        tuner_range_prices prices = {.carry = carry};
        tuner_rank_ranged(&mm, &T90, sp, order, NULL, &prices);
        char *sj[2] = {tuner_schedule_json(&sp->items[order[0]]), tuner_schedule_json(&sp->items[order[1]])};
        int pick = sj[0] && strcmp(sj[0], calm.best_schedule) == 0 ? 0 : 1;
        CHECK(sj[pick] && strcmp(sj[pick], calm.best_schedule) == 0, "range: the pick %s is not among the measured",
              calm.best_schedule);
        /* Enough that its worst ratio with the heavy middle exceeds the other's by more than the
         * final round's margin, whatever their prices. */
        const size_t two[2] = {order[pick], order[1 - pick]};
        const double top[2] = {10, 10};
        int pct = 15;
        for (; pct < 1000; pct += 5) {
            const double mid[2] = {10 * (1 + pct / 100.0), 10};
            if (worst_ratio(&prices, two, top, mid, 2, 0) > 1.15 * worst_ratio(&prices, two, top, mid, 2, 1))
                break;
        }
        /* The job reports its pick's worst ratio (the stand-in adds under 1% to each time). Two
         * flat candidates: about worst_ratio's for the calm pick. */
        const double flat[2] = {10, 10};
        const double calm_worst = worst_ratio(&prices, two, flat, flat, 2, 0);
        CHECK(calm.range_worst >= 1.0 && fabs(calm.range_worst - calm_worst) < 0.02 * calm_worst,
              "calm: range_worst %g, want %g", calm.range_worst, calm_worst);
        CHECK(calm_stored_worst == calm.range_worst, "calm: the artifact holds range_worst %g", calm_stored_worst);
        char heavy[32];
        snprintf(heavy, sizeof(heavy), "heavy@%d:%d", 2 * pick + 2, pct);
        r = tune_on("1", NULL, heavy, &mm, &cfg);
        CHECK(r.candidates_failed == 0 && sj[1 - pick] && strcmp(r.best_schedule, sj[1 - pick]) == 0,
              "%s: picked %s", heavy, r.best_schedule);
        /* A range neither serves well: the calm pick twice as slow at the middle, the other 1.5x
         * at the top. The other wins (no final round: the two are far apart), and its worst
         * ratio - at the samples above the middle, against the first's carried times - is what
         * the job reports. */
        char both[48];
        snprintf(both, sizeof(both), "heavy@%d:100,heavy@%d:50", 2 * pick + 2, 2 * (1 - pick) + 1);
        r = tune_on("1", NULL, both, &mm, &cfg);
        const double top2[2] = {10, 15}, mid2[2] = {20, 10};
        const double want = worst_ratio(&prices, two, top2, mid2, 2, 1);
        CHECK(r.candidates_failed == 0 && r.final_candidates == 0 && sj[1 - pick] &&
                  strcmp(r.best_schedule, sj[1 - pick]) == 0 && want > 1.3 &&
                  fabs(r.range_worst - want) < 0.02 * want && g_stored_worst == r.range_worst,
              "%s: picked %s, range_worst %g (stored %g), want %g (%d in the final round)", both, r.best_schedule,
              r.range_worst, g_stored_worst, want, r.final_candidates);
        free(sj[0]);
        free(sj[1]);
    }
    free(order);
    free(carry);
    tuner_space_free(sp);

    /* Reuse: a second job finds both sizes' trials and times nothing. A top trial without the
     * middle's (recorded before ranges were timed twice) is timed again, at both sizes. */
    env e;
    env_open(&e, &cfg, true, COUNT_ONLY);
    sched_job_info first = run_job(&e, &mm);
    long before = requests_of(&e);
    sched_job_info again = run_job(&e, &mm);
    CHECK(requests_of(&e) == before && strcmp(again.best_schedule, first.best_schedule) == 0,
          "reuse: %ld requests more", requests_of(&e) - before);
    env_close(&e);
    env_open(&e, &cfg, true, COUNT_ONLY);
    char key[KC_KEY_LEN + 1];
    CHECK(tuning_key_of(&e, &mm, key) == 0);
    tuner_space *sp2 = NULL;
    size_t *order2 = NULL;
    if (tuner_space_build(&mm, &T90, &sp2, NULL) == 0 && (order2 = calloc(sp2->n, sizeof(*order2)))) {
        tuner_rank_ranged(&mm, &T90, sp2, order2, NULL, NULL);
        for (int i = 0; i < 2; i++) {
            kc_trial t;
            memset(&t, 0, sizeof(t));
            t.candidate = (int)order2[i];
            t.schedule_json = tuner_schedule_json(&sp2->items[order2[i]]);
            t.status = KC_TRIAL_OK;
            t.latency_us = 5;
            snprintf(t.device, sizeof(t.device), "Stand-in GPU");
            CHECK(t.schedule_json && kc_trial_put(e.db, key, sp2->hash, &t) == 0);
            free(t.schedule_json);
        }
        sched_job_info top_only = run_job(&e, &mm);
        CHECK(requests_of(&e) == 2 * (2 + top_only.final_candidates), "top trials only: %ld requests",
              requests_of(&e));
    }
    free(order2);
    tuner_space_free(sp2);
    env_close(&e);
    unsetenv("HIDETD_STANDIN_LATENCY");
}

/* A fused op over a range re-times its anchor's best schedules by their worst ratio to the best
 * time at the range's samples: of four planted anchor trials, the two fastest at
 * the top are 19-20x the best at the middle, and the fused job times the other two (its own
 * trials, under its own key, name them). */
static void test_range_fused_anchor(void)
{
    sched_config cfg;
    sched_config_defaults(&cfg);
    cfg.fused_retime_top = 2;
    setenv("HIDETD_STANDIN_LATENCY", "10", 1);
    env e;
    env_open(&e, &cfg, true, COUNT_ONLY);
    const tuner_op mm = ranged_matmul();
    tuner_op fused = mm;
    fused.n_inputs = 3;
    fused.inputs[2] = tensor(1, (int64_t[]){mm.output.shape[1]}, TUNER_F16);
    fused.epilogue.n = 2;
    fused.epilogue.steps[0] = (tuner_ew_step){.kind = TUNER_EW_ADD, .operand = 2, .dtype = TUNER_F16};
    fused.epilogue.steps[1] = (tuner_ew_step){.kind = TUNER_EW_RELU, .operand = -1, .dtype = TUNER_F16};
    char akey[KC_KEY_LEN + 1], mkey[KC_KEY_LEN + 1], fkey[KC_KEY_LEN + 1];
    tuner_space *asp = NULL, *fsp = NULL;
    CHECK(tuning_key_of(&e, &mm, akey) == 0 && tuning_key_of(&e, &fused, fkey) == 0);
    const int64_t mid[TUNER_MAX_DIMS] = {181}; /* sqrt(64 x 512) */
    sched_mid_tuning_key(akey, mid, 1, mkey);
    CHECK(tuner_space_build(&mm, &T90, &asp, NULL) == 0 && tuner_space_build(&fused, &T90, &fsp, NULL) == 0 &&
          fsp->n >= 4);
    /* Top 5, 6, 7, 8 us; middle 20, 19, 1, 1: worst ratios about 20, 19, 1.4, 1.6. */
    static const double top_us[4] = {5, 6, 7, 8}, mid_us[4] = {20, 19, 1, 1};
    char *sj[4] = {NULL};
    for (int i = 0; asp && fsp && fsp->n >= 4 && i < 4; i++) {
        sj[i] = tuner_schedule_json(&fsp->items[i]);
        for (int k = 0; k < 2; k++) {
            kc_trial t;
            memset(&t, 0, sizeof(t));
            t.candidate = i;
            t.schedule_json = sj[i];
            t.status = KC_TRIAL_OK;
            t.latency_us = k ? mid_us[i] : top_us[i];
            snprintf(t.device, sizeof(t.device), "Stand-in GPU");
            CHECK(sj[i] && kc_trial_put(e.db, k ? mkey : akey, asp->hash, &t) == 0);
        }
    }
    sched_job_info f = run_job(&e, &fused);
    CHECK(f.candidates_total == 2, "fused over a range: %d candidates", f.candidates_total);
    kc_trial *ft = NULL;
    size_t n = 0;
    CHECK(kc_trials_get(e.db, fkey, &ft, &n) == 0 && n == 2, "fused trials: %zu", n);
    for (size_t i = 0; i < n; i++)
        CHECK(sj[2] && sj[3] && (!strcmp(ft[i].schedule_json, sj[2]) || !strcmp(ft[i].schedule_json, sj[3])),
              "fused over a range re-timed %s", ft[i].schedule_json);
    kc_trials_free(ft, n);
    for (int i = 0; i < 4; i++)
        free(sj[i]);
    tuner_space_free(asp);
    tuner_space_free(fsp);
    env_close(&e);
    unsetenv("HIDETD_STANDIN_LATENCY");
}

/* The only GPU goes out of service before any candidate passed: the job answers from the cost
 * model with the no-GPU warning instead of failing. */
static void test_gpu_lost(void)
{
    sched_config cfg;
    sched_config_defaults(&cfg);
    cfg.budget_candidates = 3;
    g_max_restarts = 1;
    env e;
    env_open(&e, &cfg, true, "crash@1");
    g_max_restarts = 5;
    tuner_op mm = matmul_f16(64, 64, 64);
    sched_request r = request(&mm, TUNER_TUNE_MEASURE, SCHED_PRIO_NORMAL);
    rec w = {0};
    CHECK(sched_submit(e.s, &r, on_done, &w, NULL, NULL) == 0);
    run_until(&e, rec_called, &w, "gpu-lost job");
    if (w.info.state != SCHED_DONE)
        fprintf(stderr, "gpu-lost job: %s %s\n", w.info.error_code, w.info.error);
    check_stored(&e, &w.info, false);
    CHECK(strstr(w.info.warning, "no GPU worker for sm_90") != NULL);
    CHECK(w.info.mode == TUNER_TUNE_MODEL);
    CHECK(count_trials(&e, &mm, KC_TRIAL_WORKER_DIED, NULL) == 1);
    env_close(&e);
}

static void test_unsupported(void)
{
    env e;
    env_open(&e, NULL, false, NULL);
    tuner_op mm = matmul_f16(64, 64, 64);
    sched_request r = request(&mm, TUNER_TUNE_NONE, SCHED_PRIO_NORMAL);
    r.target.sm = 70; /* below every template's minimum */
    rec w = {0};
    CHECK(sched_submit(e.s, &r, on_done, &w, NULL, NULL) == 0);
    run_until(&e, rec_called, &w, "unsupported job");
    CHECK(w.info.state == SCHED_FAILED && strcmp(w.info.error_code, "unsupported") == 0);
    CHECK(w.info.error[0] != '\0');
    env_close(&e);
}

int main(void)
{
    if (!getenv("HIDETD_STANDIN")) {
        fprintf(stderr, "HIDETD_STANDIN (path of hidetd-worker-standin) is not set\n");
        return 1;
    }
    test_none_and_model();
    test_measure_without_gpu();
    test_priorities();
    test_queue_limit_detach_cancel();
    test_peer_quota();
    test_fair_turns();
    test_drain();
    test_ended_ring();
    test_join_reuse_fused();
    test_fault("crash@2", KC_TRIAL_WORKER_DIED, "crash@2");
    test_fault("hang@2", KC_TRIAL_TIMEOUT, "hang@2");
    test_cancel_running();
    test_time_budget();
    test_compile_ahead();
    test_all_wrong();
    test_two_devices();
    test_final_round();
    test_final_round_heated();
    test_final_round_one_gpu();
    test_measured_range();
    test_range_two_sizes();
    test_range_fused_anchor();
    test_unsupported();
    test_gpu_lost();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("scheduler: ok\n");
    return 0;
}
