/* tests/gpu/worker_selftest.c - hidetd-worker on a real GPU, through the real pool.
 *
 * Hand-written PTX kernels over 4096 floats: a correct candidate (out = 2x), a wrong one
 * (2x + 1), one that writes far out of bounds (-> GW_FAULT, worker restarted), one that spins
 * forever (-> GW_TIMEOUT, worker restarted), and after each failure the correct one again, which
 * must still verify and time. Also checks the >48 KiB dynamic shared memory path, early stop,
 * a size passed by value (a long long scalar argument, as a dynamic op's launches take),
 * scratch zeroed for each run of a timed span, and heating (heat_ms) before a timing, by the
 * candidate or by a heater.
 * Without a GPU and driver it exits 77 ("skipped") with the reason.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu_workers/gw.h"

#ifndef GW_WORKER_PATH
#error "GW_WORKER_PATH must be defined by the build"
#endif

#define N 4096

#include "tests/check.h"

/* One PTX module holding every kernel: (in, out) -> out[i] = f(in[i]) for i < N. */
static const char ptx[] =
    ".version 7.0\n"
    ".target sm_52\n"
    ".address_size 64\n"
    "\n"
    /* The body shared by the elementwise kernels; OP computes %f2 from %f1. */
#define ELEMENTWISE(NAME, OP)                                                                      \
    ".visible .entry " NAME "(.param .u64 p_in, .param .u64 p_out)\n"                              \
    "{\n"                                                                                          \
    "  .reg .pred %p;\n"                                                                           \
    "  .reg .b32 %r<5>;\n"                                                                         \
    "  .reg .f32 %f<4>;\n"                                                                         \
    "  .reg .b64 %rd<8>;\n"                                                                        \
    "  ld.param.u64 %rd1, [p_in];\n"                                                               \
    "  ld.param.u64 %rd2, [p_out];\n"                                                              \
    "  cvta.to.global.u64 %rd3, %rd1;\n"                                                           \
    "  cvta.to.global.u64 %rd4, %rd2;\n"                                                           \
    "  mov.u32 %r1, %ctaid.x;\n"                                                                   \
    "  mov.u32 %r2, %ntid.x;\n"                                                                    \
    "  mov.u32 %r3, %tid.x;\n"                                                                     \
    "  mad.lo.s32 %r4, %r1, %r2, %r3;\n"                                                           \
    "  setp.ge.u32 %p, %r4, 4096;\n"                                                               \
    "  @%p bra DONE;\n"                                                                            \
    "  mul.wide.u32 %rd5, %r4, 4;\n"                                                               \
    "  add.s64 %rd6, %rd3, %rd5;\n"                                                                \
    "  ld.global.f32 %f1, [%rd6];\n"                                                               \
    OP                                                                                             \
    "  add.s64 %rd7, %rd4, %rd5;\n"                                                                \
    "  st.global.f32 [%rd7], %f2;\n"                                                               \
    "DONE:\n"                                                                                      \
    "  ret;\n"                                                                                     \
    "}\n\n"
    ELEMENTWISE("ref_double", "  mul.f32 %f2, %f1, 0f40000000;\n")
    ELEMENTWISE("good_double", "  add.f32 %f2, %f1, %f1;\n")
    ELEMENTWISE("wrong_double", "  add.f32 %f3, %f1, %f1;\n  add.f32 %f2, %f3, 0f3F800000;\n")
    /* Out of bounds: 1 TiB past the output. */
    ELEMENTWISE("oob_write", "  add.f32 %f2, %f1, %f1;\n  add.s64 %rd4, %rd4, 1099511627776;\n")
    /* The same as good_double but also touching 64 KiB of dynamic shared memory. */
    ".extern .shared .align 16 .b8 dsmem[];\n"
    ".visible .entry big_smem(.param .u64 p_in, .param .u64 p_out)\n"
    "{\n"
    "  .reg .pred %p;\n"
    "  .reg .b32 %r<5>;\n"
    "  .reg .f32 %f<4>;\n"
    "  .reg .b64 %rd<10>;\n"
    "  ld.param.u64 %rd1, [p_in];\n"
    "  ld.param.u64 %rd2, [p_out];\n"
    "  cvta.to.global.u64 %rd3, %rd1;\n"
    "  cvta.to.global.u64 %rd4, %rd2;\n"
    "  mov.u32 %r1, %ctaid.x;\n"
    "  mov.u32 %r2, %ntid.x;\n"
    "  mov.u32 %r3, %tid.x;\n"
    "  mad.lo.s32 %r4, %r1, %r2, %r3;\n"
    "  setp.ge.u32 %p, %r4, 4096;\n"
    "  @%p bra DONE2;\n"
    "  mul.wide.u32 %rd5, %r4, 4;\n"
    "  add.s64 %rd6, %rd3, %rd5;\n"
    "  ld.global.f32 %f1, [%rd6];\n"
    "  mov.u64 %rd8, dsmem;\n"
    "  mul.wide.u32 %rd9, %r3, 256;\n" /* thread t uses bytes [256t, 256t + 4) of 64 KiB */
    "  add.s64 %rd8, %rd8, %rd9;\n"
    "  st.shared.f32 [%rd8], %f1;\n"
    "  ld.shared.f32 %f3, [%rd8];\n"
    "  add.f32 %f2, %f3, %f3;\n"
    "  add.s64 %rd7, %rd4, %rd5;\n"
    "  st.global.f32 [%rd7], %f2;\n"
    "DONE2:\n"
    "  ret;\n"
    "}\n\n"
    /* good_double over the first p_n elements only: p_n is a long long passed by value (a
     * dynamic op's size, GW_ARG_I64), so the result verifies only when the worker passes it. */
    ".visible .entry sized_double(.param .u64 p_in, .param .u64 p_out, .param .u64 p_n)\n"
    "{\n"
    "  .reg .pred %p;\n"
    "  .reg .b32 %r<5>;\n"
    "  .reg .f32 %f<4>;\n"
    "  .reg .b64 %rd<10>;\n"
    "  ld.param.u64 %rd1, [p_in];\n"
    "  ld.param.u64 %rd2, [p_out];\n"
    "  ld.param.u64 %rd8, [p_n];\n"
    "  cvta.to.global.u64 %rd3, %rd1;\n"
    "  cvta.to.global.u64 %rd4, %rd2;\n"
    "  mov.u32 %r1, %ctaid.x;\n"
    "  mov.u32 %r2, %ntid.x;\n"
    "  mov.u32 %r3, %tid.x;\n"
    "  mad.lo.s32 %r4, %r1, %r2, %r3;\n"
    "  cvt.u64.u32 %rd9, %r4;\n"
    "  setp.ge.s64 %p, %rd9, %rd8;\n"
    "  @%p bra DONE3;\n"
    "  mul.wide.u32 %rd5, %r4, 4;\n"
    "  add.s64 %rd6, %rd3, %rd5;\n"
    "  ld.global.f32 %f1, [%rd6];\n"
    "  add.f32 %f2, %f1, %f1;\n"
    "  add.s64 %rd7, %rd4, %rd5;\n"
    "  st.global.f32 [%rd7], %f2;\n"
    "DONE3:\n"
    "  ret;\n"
    "}\n\n"
    /* good_double that also counts its threads in a scratch word (p_count, zeroed before every
     * run) and traps where the count passes N: a run that finds its scratch dirty. The timed
     * spans of several runs must give each run scratch of its own. */
    ".visible .entry counted_double(.param .u64 p_in, .param .u64 p_out, .param .u64 p_count)\n"
    "{\n"
    "  .reg .pred %p;\n"
    "  .reg .b32 %r<6>;\n"
    "  .reg .f32 %f<3>;\n"
    "  .reg .b64 %rd<10>;\n"
    "  ld.param.u64 %rd1, [p_in];\n"
    "  ld.param.u64 %rd2, [p_out];\n"
    "  ld.param.u64 %rd8, [p_count];\n"
    "  cvta.to.global.u64 %rd3, %rd1;\n"
    "  cvta.to.global.u64 %rd4, %rd2;\n"
    "  cvta.to.global.u64 %rd9, %rd8;\n"
    "  mov.u32 %r1, %ctaid.x;\n"
    "  mov.u32 %r2, %ntid.x;\n"
    "  mov.u32 %r3, %tid.x;\n"
    "  mad.lo.s32 %r4, %r1, %r2, %r3;\n"
    "  setp.ge.u32 %p, %r4, 4096;\n"
    "  @%p bra DONE4;\n"
    "  atom.global.add.u32 %r5, [%rd9], 1;\n"
    "  setp.ge.u32 %p, %r5, 4096;\n"
    "  @%p trap;\n"
    "  mul.wide.u32 %rd5, %r4, 4;\n"
    "  add.s64 %rd6, %rd3, %rd5;\n"
    "  ld.global.f32 %f1, [%rd6];\n"
    "  add.f32 %f2, %f1, %f1;\n"
    "  add.s64 %rd7, %rd4, %rd5;\n"
    "  st.global.f32 [%rd7], %f2;\n"
    "DONE4:\n"
    "  ret;\n"
    "}\n\n"
    /* Spins until in[0] == 5.0, which never happens (inputs are in [-1, 1]). */
    ".visible .entry spin(.param .u64 p_in, .param .u64 p_out)\n"
    "{\n"
    "  .reg .pred %p;\n"
    "  .reg .f32 %f<2>;\n"
    "  .reg .b64 %rd<3>;\n"
    "  ld.param.u64 %rd1, [p_in];\n"
    "  cvta.to.global.u64 %rd2, %rd1;\n"
    "LOOP:\n"
    "  ld.volatile.global.f32 %f1, [%rd2];\n"
    "  setp.ne.f32 %p, %f1, 0f40A00000;\n"
    "  @%p bra LOOP;\n"
    "  ret;\n"
    "}\n";

static uv_loop_t loop;
static bool ready_flag, closed_flag;
static void on_ready(void *u) { (void)u; ready_flag = true; }
static void on_closed(void *u) { (void)u; closed_flag = true; }

typedef struct slot {
    bool done;
    gw_measure_result res;
} slot;

static void on_result(void *u, const gw_measure_result *r)
{
    slot *s = u;
    s->done = true;
    s->res = *r;
}

static void make_req(gw_measure_req *q, uint64_t id, const char *kernel, unsigned shared)
{
    memset(q, 0, sizeof(*q));
    q->id = id;
    q->n_buffers = 3;
    q->buffers[0] = (gw_buffer){GW_BUF_INPUT, GW_F32, N};
    q->buffers[1] = (gw_buffer){GW_BUF_OUTPUT, GW_F32, N};
    q->buffers[2] = (gw_buffer){GW_BUF_REF_OUTPUT, GW_F32, N};
    q->candidate.image = (const uint8_t *)ptx;
    q->candidate.image_len = sizeof(ptx);
    q->candidate.n_launches = 1;
    q->candidate.launches[0] = (gw_launch){.name = "", .grid = {N / 256, 1, 1}, .block = {256, 1, 1}, .shared_bytes = shared, .n_args = 2, .args = {0, 1}};
    snprintf(q->candidate.launches[0].name, sizeof(q->candidate.launches[0].name), "%s", kernel);
    q->reference.image = (const uint8_t *)ptx;
    q->reference.image_len = sizeof(ptx);
    q->reference.n_launches = 1;
    q->reference.launches[0] = (gw_launch){.name = "ref_double", .grid = {N / 256, 1, 1}, .block = {256, 1, 1}, .shared_bytes = 0, .n_args = 2, .args = {0, 2}};
    q->output_buffer = 1;
    q->ref_output_buffer = 2;
    q->check = true;
    q->rtol = 1e-6;
    q->atol = 1e-6;
    q->warmup = 3;
    q->min_reps = 20;
    q->max_reps = 200;
    q->min_time_ms = 2;
}

static gw_measure_result run(gw_pool *pool, gw_measure_req *q)
{
    slot s = {0};
    /* Everything on GPU 0, so that on a machine with several GPUs the restarts counted below
     * are all that one's. */
    int r = gw_measure(pool, 0, 0, q, on_result, &s, NULL);
    CHECK(r == 0);
    while (r == 0 && !s.done && uv_run(&loop, UV_RUN_ONCE))
        ;
    if (r != 0)
        s.res.status = GW_NO_DEVICE;
    printf("  %-14s %-12s median %8.2f us  min %8.2f us  reps %4d  max_rel_err %.3g%s%s%s\n",
           q->candidate.launches[0].name, gw_status_name(s.res.status), s.res.median_us,
           s.res.min_us, s.res.reps, s.res.max_rel_err, s.res.early_stopped ? "  early-stop" : "",
           s.res.reason[0] ? "  | " : "", s.res.reason);
    return s.res;
}

/* The worker binary: $HIDETD_WORKER, else the one this build made, else ../bin/hidetd-worker
 * beside this program (a packed copy of the build on another machine). */
static const char *worker_path(void)
{
    static char buf[4096];
    const char *e = getenv("HIDETD_WORKER");
    if (e && *e)
        return e;
    if (access(GW_WORKER_PATH, X_OK) == 0)
        return GW_WORKER_PATH;
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 32);
    if (n > 0) {
        buf[n] = 0;
        char *slash = strrchr(buf, '/');
        if (slash) {
            strcpy(slash, "/../bin/hidetd-worker");
            if (access(buf, X_OK) == 0)
                return buf;
        }
    }
    return GW_WORKER_PATH;
}

static void on_log(void *u, int level, const char *msg)
{
    (void)u;
    (void)level;
    printf("  [pool] %s\n", msg);
}

int main(void)
{
    uv_loop_init(&loop);
    gw_config c;
    memset(&c, 0, sizeof(c));
    c.worker_path = worker_path();
    c.launch_timeout_s = 1.0;
    c.heartbeat_s = 0.5;
    c.max_restarts = 3;
    c.log = on_log;
    gw_pool *pool = NULL;
    if (gw_pool_start(&loop, &c, on_ready, NULL, &pool) < 0)
        return 1;
    while (!ready_flag && uv_run(&loop, UV_RUN_ONCE))
        ;
    const gw_device_info *d = NULL;
    if (gw_pool_devices(pool, &d) == 0 || gw_pool_usable(pool) == 0) {
        printf("no CUDA GPU/driver: skipped (%s)\n", gw_pool_probe_error(pool));
        gw_pool_close(pool, on_closed, NULL);
        while (!closed_flag && uv_run(&loop, UV_RUN_ONCE))
            ;
        uv_loop_close(&loop);
        return 77;
    }
    printf("device 0: %s, sm_%d, %d SMs, driver %d\n", d[0].name, d[0].sm, d[0].sm_count,
           d[0].driver_version);

    gw_measure_req q;
    gw_measure_result r;
    make_req(&q, 1, "good_double", 0);
    r = run(pool, &q);
    CHECK(r.status == GW_OK && r.median_us > 0 && r.min_us <= r.median_us && r.reps >= 20 &&
          r.max_rel_err == 0);
    double good_us = r.median_us;

    /* Two input sets measured in turns (two jobs on one GPU): B's input is longer, so its first N
     * values differ from A's, and each set must be checked against its own reference. */
    for (int i = 0; i < 4; i++) {
        bool b = i % 2;
        make_req(&q, 10 + (uint64_t)i, i == 3 ? "wrong_double" : "good_double", 0);
        if (b)
            q.buffers[0].elems = N + 256;
        r = run(pool, &q);
        CHECK(i == 3 ? r.status == GW_WRONG : r.status == GW_OK && r.max_rel_err == 0);
    }

    make_req(&q, 2, "wrong_double", 0);
    r = run(pool, &q);
    CHECK(r.status == GW_WRONG && r.max_abs_err > 0.5);

    make_req(&q, 3, "big_smem", 64 * 1024);
    r = run(pool, &q);
    CHECK(r.status == GW_OK && r.max_rel_err == 0);

    /* A size passed by value: all N elements verify; half of them leave the rest of the
     * (poisoned) output unwritten, which must be found wrong. */
    for (int half = 0; half < 2; half++) {
        make_req(&q, 30 + (uint64_t)half, "sized_double", 0);
        gw_launch *l = &q.candidate.launches[0];
        l->args[l->n_args] = GW_ARG_I64;
        l->values[l->n_args++] = half ? N / 2 : N;
        r = run(pool, &q);
        CHECK(half ? r.status == GW_WRONG : r.status == GW_OK && r.max_rel_err == 0, "half %d", half);
    }

    /* Scratch zeroed for every run, in the timed spans of several runs too (the set, 48 KiB,
     * stays in the L2, so each timed run is a span). */
    make_req(&q, 40, "counted_double", 0);
    q.buffers[q.n_buffers++] = (gw_buffer){GW_BUF_SCRATCH, GW_F32, 1};
    q.candidate.launches[0].args[q.candidate.launches[0].n_args++] = 3;
    r = run(pool, &q);
    CHECK(r.status == GW_OK && r.max_rel_err == 0 && r.reps >= 20);

    make_req(&q, 4, "no_such_kernel", 0);
    r = run(pool, &q);
    CHECK(r.status == GW_LOAD_ERROR);

    /* Early stop: a time to beat far below this kernel's. */
    make_req(&q, 5, "good_double", 0);
    q.beat_us = good_us / 10;
    q.min_reps = 100;
    q.max_reps = 1000;
    r = run(pool, &q);
    CHECK(r.status == GW_OK && r.early_stopped && r.reps < 100);

    /* Heating (heat_ms): the candidate back to back for 100 ms before its timing, the runs
     * counted in the reason. */
    make_req(&q, 41, "good_double", 0);
    q.heat_ms = 100;
    struct timespec h0, h1;
    clock_gettime(CLOCK_MONOTONIC, &h0);
    r = run(pool, &q);
    clock_gettime(CLOCK_MONOTONIC, &h1);
    const char *heat = strstr(r.reason, "back-to-back runs (");
    const long heat_runs = heat ? strtol(heat + strlen("back-to-back runs ("), NULL, 10) : 0;
    const double heat_s = (double)(h1.tv_sec - h0.tv_sec) + 1e-9 * (double)(h1.tv_nsec - h0.tv_nsec);
    CHECK(r.status == GW_OK && r.max_rel_err == 0 && heat_runs >= 10 && heat_s >= 0.1,
          "heated: %s, %ld runs, %.3f s", r.reason, heat_runs, heat_s);

    /* Heated by a heater (another module on the same buffers, with a scratch word of its own
     * that must be zeroed before each of its runs), which also runs before each timed span; a
     * heater that does not load leaves the candidate to heat itself, and the result says so. */
    make_req(&q, 42, "good_double", 0);
    q.heat_ms = 100;
    q.heater = q.candidate;
    snprintf(q.heater.launches[0].name, sizeof(q.heater.launches[0].name), "counted_double");
    q.buffers[q.n_buffers++] = (gw_buffer){GW_BUF_SCRATCH, GW_F32, 1};
    q.heater.launches[0].args[q.heater.launches[0].n_args++] = q.n_buffers - 1;
    r = run(pool, &q);
    CHECK(r.status == GW_OK && r.max_rel_err == 0 && strstr(r.reason, "of the heater, each span after one more"),
          "heater: %s", r.reason);
    snprintf(q.heater.launches[0].name, sizeof(q.heater.launches[0].name), "no_such_kernel");
    q.id = 43;
    r = run(pool, &q);
    CHECK(r.status == GW_OK && r.max_rel_err == 0 && strstr(r.reason, "the heater did not load") &&
              !strstr(r.reason, "of the heater"),
          "heater that does not load: %s", r.reason);

    make_req(&q, 6, "oob_write", 0);
    r = run(pool, &q);
    CHECK(r.status == GW_FAULT);

    make_req(&q, 7, "good_double", 0);
    r = run(pool, &q);
    CHECK(r.status == GW_OK);

    make_req(&q, 8, "spin", 0);
    q.check = false;
    r = run(pool, &q);
    CHECK(r.status == GW_TIMEOUT);

    make_req(&q, 9, "good_double", 0);
    r = run(pool, &q);
    CHECK(r.status == GW_OK);

    gw_pool_devices(pool, &d);
    printf("device 0 after the run: state %s, restarts %d, measured %llu, failed %llu\n",
           gw_device_state_name(d[0].state), d[0].restarts, (unsigned long long)d[0].measured,
           (unsigned long long)d[0].failed);
    CHECK(d[0].restarts == 2 && d[0].state != GW_DEV_OUT_OF_SERVICE);

    gw_pool_close(pool, on_closed, NULL);
    while (!closed_flag && uv_run(&loop, UV_RUN_ONCE))
        ;
    CHECK(uv_loop_close(&loop) == 0);
    printf("worker_selftest: %s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
