/* scheduler/tests/gpu_sched.c - measured jobs on a real GPU through the real hidetd-worker: the
 * scheduler's worker requests (buffers, launches, reference, tolerances) against real kernels.
 *
 * For each case a MEASURE job runs with a candidate budget; the program prints one line per job
 * (state, candidates done/failed, best time) and the trials by status, and fails when a job does
 * not end DONE+measured or any candidate is reported wrong (a wrong candidate means either a
 * template bug or a bad request from the scheduler; both must be looked at).
 * Without a usable GPU it exits 77 (skipped) and says why.
 *
 * The dynamic cases ([n, K] x [K, N] with n in 641..768, on sm_90a with TMA maps where the GPU
 * has it) are measured ranges: every candidate that passed at the top is timed again, unchecked,
 * at the middle (n = 701) with its grids and tensor maps bound there. They also fail when a passing
 * top trial has no passing middle trial, or when any candidate failed at the middle (a bad middle
 * request: sizes, grid or maps; or a kernel wrong at that size), and print the best's middle time.
 *
 * The last case's kernels run for hundreds of microseconds: its final round is heated, and every
 * finalist but the best must be timed behind the best (gw_measure_req.heater) at both sizes.
 *
 * Env: HIDETD_WORKER overrides the worker's path; GPU_SCHED_BUDGET the candidates per job (8).
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "scheduler/sched_int.h" /* sched__mid_sizes */
#include "tuner/tuner.h"

#ifndef GW_WORKER_PATH
#define GW_WORKER_PATH "hidetd-worker"
#endif

static uv_loop_t loop;

static void flag_cb(void *udata)
{
    *(int *)udata = 1;
}

static void wake_cb(uv_timer_t *t)
{
    (void)t;
}

static void run_until_set(int *flag)
{
    uv_timer_t wake;
    uv_timer_init(&loop, &wake);
    uv_timer_start(&wake, wake_cb, 50, 50);
    while (!*flag)
        uv_run(&loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&wake, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
}

typedef struct rec {
    int called;
    sched_job_info info;
} rec;

static void on_done(void *udata, const sched_job_info *info)
{
    rec *r = udata;
    r->info = *info;
    r->called = 1;
}

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

static tuner_op matmul(int64_t m, int64_t n, int64_t k, tuner_dtype d)
{
    tuner_op op;
    memset(&op, 0, sizeof(op));
    op.kind = TUNER_OP_MATMUL;
    op.n_inputs = op.n_anchor_inputs = 2;
    op.inputs[0] = tensor(2, (int64_t[]){m, k}, d);
    op.inputs[1] = tensor(2, (int64_t[]){k, n}, d);
    op.output = tensor(2, (int64_t[]){m, n}, d);
    op.attrs.matmul.allow_tf32 = true;
    return op;
}

static tuner_op bias_gelu(tuner_op op)
{
    int64_t n = op.output.shape[op.output.rank - 1];
    op.n_inputs = 3;
    op.inputs[2] = tensor(1, (int64_t[]){n}, op.inputs[0].dtype);
    op.epilogue.n = 2;
    op.epilogue.steps[0] = (tuner_ew_step){.kind = TUNER_EW_ADD, .operand = 2, .scalar = 0, .dtype = TUNER_F16};
    op.epilogue.steps[1] = (tuner_ew_step){.kind = TUNER_EW_GELU_TANH, .operand = -1, .scalar = 0, .dtype = TUNER_F16};
    return op;
}

static tuner_op rowwise(tuner_op_kind kind, int64_t rows, int64_t d, tuner_dtype dt)
{
    tuner_op op;
    memset(&op, 0, sizeof(op));
    op.kind = kind;
    op.n_inputs = op.n_anchor_inputs = 1;
    op.inputs[0] = tensor(2, (int64_t[]){rows, d}, dt);
    op.output = op.inputs[0];
    if (kind == TUNER_OP_LAYERNORM || kind == TUNER_OP_RMSNORM)
        op.attrs.norm.eps = 1e-5;
    return op;
}

/* op over n in [min, max] rows (its shapes at max). */
static tuner_op rows_ranged(tuner_op op, int64_t min, int64_t max)
{
    op.n_dims = 1;
    snprintf(op.dims[0].name, sizeof(op.dims[0].name), "n");
    op.dims[0].min = min;
    op.dims[0].max = max;
    op.dims[0].multiple_of = 1;
    op.inputs[0].shape[0] = op.output.shape[0] = max;
    op.inputs[0].sym[0] = op.output.sym[0] = 1;
    return op;
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

int main(void)
{
    const char *worker = getenv("HIDETD_WORKER") ? getenv("HIDETD_WORKER") : GW_WORKER_PATH;
    int budget = getenv("GPU_SCHED_BUDGET") ? atoi(getenv("GPU_SCHED_BUDGET")) : 8;
    uv_loop_init(&loop);

    gw_config gc;
    memset(&gc, 0, sizeof(gc));
    gc.worker_path = worker;
    gc.launch_timeout_s = 2;
    gc.heartbeat_s = 1;
    gc.max_restarts = 5;
    gw_pool *pool = NULL;
    int ready = 0;
    if (gw_pool_start(&loop, &gc, flag_cb, &ready, &pool) < 0) {
        fprintf(stderr, "gw_pool_start failed\n");
        return 1;
    }
    run_until_set(&ready);
    const gw_device_info *devs = NULL;
    size_t n_devs = gw_pool_devices(pool, &devs);
    if (n_devs == 0 || gw_pool_usable(pool) == 0) {
        printf("no CUDA GPU/driver: skipped (%s)\n", gw_pool_probe_error(pool));
        int closed = 0;
        gw_pool_close(pool, flag_cb, &closed);
        run_until_set(&closed);
        return 77;
    }
    tuner_target target = {devs[0].sm, false};
    printf("device: %s, sm_%d, %d SMs; budget %d candidates per job\n", devs[0].name, devs[0].sm,
           devs[0].sm_count, budget);

    char dir[] = "/tmp/hidetd-gpu-sched-XXXXXX", path[128];
    if (!mkdtemp(dir))
        return 1;
    snprintf(path, sizeof(path), "%s/kc.db", dir);
    kc_db *db = NULL;
    char *err = NULL;
    if (kc_open(path, &db, &err) < 0) {
        fprintf(stderr, "kc_open: %s\n", err ? err : "?");
        return 1;
    }
    sched_config cfg;
    sched_config_defaults(&cfg);
    cfg.budget_candidates = budget;
    cfg.fused_retime_top = 3;
    cfg.budget_s = 120;
    sched *s = NULL;
    if (sched_new(&loop, db, pool, &cfg, &s) < 0)
        return 1;

    struct {
        const char *name;
        tuner_op op;
        bool arch_a; /* sm_90a (wgmma, TMA) where the GPU is sm_90 */
    } cases[] = {
        {"matmul f16 256x256x256", matmul(256, 256, 256, TUNER_F16), false},
        {"matmul f16 77x1000x333", matmul(77, 1000, 333, TUNER_F16), false},
        {"matmul bf16 512x512x128", matmul(512, 512, 128, TUNER_BF16), false},
        {"matmul f32 128x256x64", matmul(128, 256, 64, TUNER_F32), false},
        {"matmul f16 256^3 +bias+gelu", bias_gelu(matmul(256, 256, 256, TUNER_F16)), false},
        {"softmax f16 64x1000", rowwise(TUNER_OP_SOFTMAX, 64, 1000, TUNER_F16), false},
        {"softmax f32 8x4096", rowwise(TUNER_OP_SOFTMAX, 8, 4096, TUNER_F32), false},
        {"layernorm f16 32x768", rowwise(TUNER_OP_LAYERNORM, 32, 768, TUNER_F16), false},
        {"matmul f16 [641,768]x1024x1024", rows_ranged(matmul(768, 1024, 1024, TUNER_F16), 641, 768), false},
        {"matmul f16 [641,768]x4096x4096 a", rows_ranged(matmul(768, 4096, 4096, TUNER_F16), 641, 768), true},
        /* Long enough (hundreds of us) for a heated final round, a heater at both sizes. */
        {"matmul f16 [3585,4096]x8192^2 a", rows_ranged(matmul(4096, 8192, 8192, TUNER_F16), 3585, 4096), true},
    };
    int n_cases = (int)(sizeof(cases) / sizeof(cases[0]));
    int bad = 0;
    for (int i = 0; i < n_cases; i++) {
        sched_request r;
        memset(&r, 0, sizeof(r));
        r.op = &cases[i].op;
        tuner_target ct = target;
        ct.arch_specific = cases[i].arch_a && target.sm == 90;
        r.target = ct;
        r.mode = TUNER_TUNE_MEASURE;
        r.priority = SCHED_PRIO_NORMAL;
        rec w = {0};
        double t0 = (double)uv_hrtime() / 1e9;
        if (sched_submit(s, &r, on_done, &w, NULL, NULL) < 0) {
            printf("%-30s submit failed\n", cases[i].name);
            bad++;
            continue;
        }
        run_until_set(&w.called);
        const sched_job_info *in = &w.info;
        printf("%-30s %-9s measured=%d done=%d/%d failed=%d best=%.2fus (%.1fs)%s%s\n",
               cases[i].name, sched_state_name(in->state), in->measured, in->candidates_done,
               in->candidates_total, in->candidates_failed, in->best_us,
               (double)uv_hrtime() / 1e9 - t0, in->error[0] ? " error: " : "", in->error);
        if (in->state != SCHED_DONE || !in->measured)
            bad++;

        /* Trials of this job, by status, with the first reason of each failure kind. */
        tuner_space *sp = NULL;
        char *e2 = NULL;
        char key[KC_KEY_LEN + 1];
        if (tuner_space_build(&cases[i].op, &ct, &sp, &e2) == 0 &&
            sched_tuning_key(&cases[i].op, &ct, &devs[0], sp->hash, key) == 0) {
            kc_trial *t = NULL;
            size_t n = 0;
            if (kc_trials_get(db, key, &t, &n) == 0) {
                int count[8] = {0};
                const char *why[8] = {0};
                double worst_err = 0;
                for (size_t k = 0; k < n; k++) {
                    count[t[k].status & 7]++;
                    if (!why[t[k].status & 7])
                        why[t[k].status & 7] = t[k].reason;
                    if (t[k].status == KC_TRIAL_OK && t[k].max_rel_err > worst_err)
                        worst_err = t[k].max_rel_err;
                }
                printf("    trials:");
                for (int st = 0; st < 8; st++)
                    if (count[st])
                        printf(" %s=%d", kc_trial_status_name((kc_trial_status)st), count[st]);
                printf(" (max rel err of ok: %.2e)\n", worst_err);
                for (int st = 1; st < 8; st++)
                    if (count[st] && why[st] && st != KC_TRIAL_SLOWER)
                        printf("    %s: %.300s\n", kc_trial_status_name((kc_trial_status)st), why[st]);
                if (count[KC_TRIAL_WRONG])
                    bad++;
                /* A heated final round (a long kernel): every finalist but the best timed behind
                 * it, at each size (the middle's heater bound to the middle's sizes). */
                int behind = 0;
                for (size_t k = 0; k < n; k++)
                    behind += t[k].reason && strstr(t[k].reason, "of the heater") != NULL;
                int64_t mid[TUNER_MAX_DIMS];
                const bool ranged = sched__mid_sizes(&cases[i].op, mid);
                if (in->final_heated) {
                    printf("    heated final round: %d finalists, %d trials behind the heater\n",
                           in->final_candidates, behind);
                    if (in->final_candidates >= 2 && behind < 1)
                        bad++;
                }
                if (ranged) {
                    /* Every top trial that passed has the middle's beside it, passing. */
                    char mkey[KC_KEY_LEN + 1];
                    sched_mid_tuning_key(key, mid, cases[i].op.n_dims, mkey);
                    kc_trial *mt = NULL;
                    size_t mn = 0;
                    int missing = 0, at_mid = 0, mid_behind = 0;
                    double best_mid = -1;
                    if (kc_trials_get(db, mkey, &mt, &mn) < 0)
                        mn = 0;
                    for (size_t q = 0; q < mn; q++)
                        mid_behind += mt[q].reason && strstr(mt[q].reason, "of the heater") != NULL;
                    if (in->final_heated) {
                        printf("    middle: %d trials behind the heater\n", mid_behind);
                        if (in->final_candidates >= 2 && mid_behind < 1)
                            bad++;
                    }
                    for (size_t k = 0; k < n; k++) {
                        at_mid += t[k].reason && strstr(t[k].reason, "at the middle of the range") != NULL;
                        if (t[k].status != KC_TRIAL_OK)
                            continue;
                        const kc_trial *m = NULL;
                        for (size_t q = 0; q < mn && !m; q++)
                            if (mt[q].schedule_json && t[k].schedule_json &&
                                strcmp(mt[q].schedule_json, t[k].schedule_json) == 0)
                                m = &mt[q];
                        if (!m || m->status != KC_TRIAL_OK || m->latency_us <= 0)
                            missing++;
                        else if (strcmp(t[k].schedule_json, in->best_schedule) == 0)
                            best_mid = m->latency_us;
                    }
                    printf("    middle n=%lld: %zu trials, %d ok at the top without a passing middle, "
                           "%d failed at the middle; the best %.2fus there\n",
                           (long long)mid[0], mn, missing, at_mid, best_mid);
                    if (missing || at_mid || best_mid <= 0)
                        bad++;
                    kc_trials_free(mt, mn);
                }
                kc_trials_free(t, n);
            }
        }
        free(e2);
        tuner_space_free(sp);
    }

    int drained = 0;
    sched_drain(s, 0, flag_cb, &drained);
    run_until_set(&drained);
    sched_free(s);
    int closed = 0;
    gw_pool_close(pool, flag_cb, &closed);
    run_until_set(&closed);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    kc_close(db);
    nftw(dir, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
    printf("%s\n", bad ? "FAILED" : "ok");
    return bad ? 1 : 0;
}
