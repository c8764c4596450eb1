/* tuner/attn/tests/gpu_attn_wgmma.c - runs every attention_wgmma candidate on an sm_90 GPU
 * against a CPU fp64 reference (needs one; exits 77 = skipped without it, or on another arch).
 *
 * Cases: causal with S < Skv and S > Skv, odd lengths, grouped-query heads, an f32 mask [S, Skv]
 * with -inf entries and one row entirely -inf (its output must be 0), a key-padding mask
 * [B, 1, 1, Skv] (the one the template stages in shared memory) with -inf keys, a batch entry
 * entirely -inf and one entirely -FLT_MAX, bshd, head dims 64, 80,
 * 128 and 256, f16 and bf16. Inputs are k/128, |k| <= 128 (exact in both dtypes). Every
 * candidate's output is poisoned with NaN bytes before its launch; the check is
 * max |out - ref| <= tol (f16 0.01, bf16 0.03: P and O are rounded to 16 bits) and no NaN. One
 * line per candidate with its max error. Then the default schedule (and, with
 * AW_TIME_ALL=1, every candidate) is timed on B=1, 16 heads, 4096 x 4096, hd128, f16, non-causal
 * and causal: TFLOP/s counts 4 * S * Skv * D per head (half the pairs, about, when causal).
 * AW_ONLY=<substring> runs only the cases whose name contains it.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/attn/attn.h"
#include "tuner/attn/tests/attn_host.h"
#include "tuner/attn/tests/ops.h"
#include "tuner/tests/gpu_driver.h"
#include "tuner/tests/gpu_jobs.h"
#include "tuner/tests/host_values.h"
#include "tuner/tuner.h"

typedef struct acase {
    const char *name;
    tuner_dtype dt;
    long long b, hq, hkv, s, skv, d;
    bool bshd, causal;
    int mask; /* 0: none; 2: [S, Skv]; 4: [B, 1, 1, Skv] (a key-padding mask); f32 */
    bool packed; /* layout bshd_packed: one qkv [B,S,Hq+2Hkv,D] (S = Skv), the mask inputs[1] */
} acase;

static tuner_op make_op(const acase *c)
{
    ta_shape ts = {.dt = c->dt, .b = c->b, .hq = c->hq, .hkv = c->hkv, .s = c->s, .skv = c->skv, .d = c->d,
                   .bshd = c->bshd, .causal = c->causal, .packed = c->packed};
    if (c->mask == 2) {
        ts.mask_rank = 2;
        ts.mask_shape[0] = c->s;
        ts.mask_shape[1] = c->skv;
    } else if (c->mask == 4) {
        ts.mask_rank = 4;
        const long long ms[4] = {c->b, 1, 1, c->skv};
        memcpy(ts.mask_shape, ms, sizeof(ms));
    }
    if (c->mask) {
        ts.mask_dt = TUNER_F32;
        ts.mask_align = 4;
    }
    return ta_attention(&ts);
}

/* out = the reference (attn_host.h) of every row, in the output's layout; a row without keys is 0. */
static void reference(const tuner_op *op, const void *const in[4], double *out)
{
    tuner__attn_problem p;
    char *err = NULL;
    if (tuner__attn_problem_init(op, &p, &err) < 0) {
        fprintf(stderr, "reference: %s\n", err ? err : "?");
        exit(2);
    }
    double *lg = malloc(sizeof(double) * (size_t)p.d.skv);
    for (long long b = 0; b < p.d.b; b++)
        for (long long h = 0; h < p.d.hq; h++)
            for (long long i = 0; i < p.d.s; i++)
                ta_reference_row(&p, in, b, h, i, out + b * p.o_sb + h * p.o_sh + i * p.o_ss, lg);
    free(lg);
}

static gpu_job *jobs;
static size_t n_jobs;

static CUdeviceptr bufs[TUNER_BUF_WORKSPACE + 1];

static const tuner_target sm90a = {.sm = 90, .arch_specific = true};
static int total_wrong;

/* Compiles the candidates of op's space that are attention_wgmma's (all, or only the default),
 * in parallel; returns how many jobs were made. */
static size_t compile_space(const tuner_op *op, tuner_space *sp, bool only_default)
{
    n_jobs = 0;
    jobs = calloc(sp->n, sizeof(*jobs));
    size_t def = tuner_default_index(op, &sm90a, sp);
    /* Where another template's schedule is the space's default: attention_wgmma's own preferred
     * one, which it enumerates first. */
    for (size_t i = 0; i < sp->n && strcmp(sp->items[def].template_name, "attention_wgmma"); i++)
        if (!strcmp(sp->items[i].template_name, "attention_wgmma"))
            def = i;
    for (size_t i = 0; i < sp->n; i++) {
        if (strcmp(sp->items[i].template_name, "attention_wgmma") || (only_default && i != def))
            continue;
        jobs[n_jobs].op = op;
        jobs[n_jobs].t = &sm90a;
        jobs[n_jobs].s = &sp->items[i];
        n_jobs++;
    }
    gpu_jobs_compile(jobs, n_jobs, 16);
    return n_jobs;
}

static void free_jobs(void)
{
    gpu_jobs_free(jobs, n_jobs);
    jobs = NULL;
}

static void sched_name(const tuner_schedule *s, char *buf, size_t len)
{
    snprintf(buf, len, "bn %d consumers %d stages %d overlap %d pingpong %d", tuner_schedule_param(s, "block_n", 0),
             tuner_schedule_param(s, "consumers", 0), tuner_schedule_param(s, "stages", 0),
             tuner_schedule_param(s, "overlap", 0), tuner_schedule_param(s, "pingpong", 0));
}

static void verify_case(const acase *c, CUstream st)
{
    tuner_op op = make_op(c);
    tuner_space *sp = NULL;
    char *err = NULL;
    if (tuner_space_build(&op, &sm90a, &sp, &err) < 0) {
        printf("%s: space error: %s\n", c->name, err ? err : "?");
        total_wrong++;
        return;
    }
    const size_t nq = (size_t)(c->b * c->hq * c->s * c->d), nkv = (size_t)(c->b * c->hkv * c->skv * c->d);
    uint16_t *hb[3] = {NULL, NULL, NULL};
    /* packed: qkv alone, q's, k's and v's heads in turn */
    const size_t ns[3] = {c->packed ? nq + 2 * nkv : nq, nkv, nkv};
    const int nbuf = c->packed ? 1 : 3, mbuf = c->packed ? 1 : 3;
    for (int t = 0; t < nbuf; t++) {
        hb[t] = malloc(ns[t] * 2);
        for (size_t k = 0; k < ns[t]; k++)
            t_host_put(c->dt, hb[t], k, (float)t_rnd_int(-128, 128) / 128.0f);
        CK(d_cuMemAlloc(&bufs[TUNER_BUF_INPUT0 + t], ns[t] * 2));
        CK(d_cuMemcpyHtoD(bufs[TUNER_BUF_INPUT0 + t], hb[t], ns[t] * 2));
    }
    float *mask = NULL;
    if (c->mask) {
        /* Values in [-2, 0], every 7th -inf, row 3 (when there is one) entirely -inf (its output
         * is 0), and row 4 entirely -FLT_MAX, PyTorch's finfo(f32).min mask (its output is the
         * mean of v, as softmax gives it); a key mask's rows are batch entries: entry 1 all -inf,
         * entry 2 all -FLT_MAX. */
        const long long rows = c->mask == 4 ? c->b : c->s;
        const size_t nm = (size_t)(rows * c->skv);
        mask = malloc(nm * sizeof(float));
        const size_t max_row = c->mask == 4 ? 2 : 4; /* the row of -FLT_MAX */
        for (size_t k = 0; k < nm; k++) {
            const size_t row = k / (size_t)c->skv;
            mask[k] = k % 7 == 0 || row == 3 || (c->mask == 4 && row == 1) ? -INFINITY
                      : row == max_row                                   ? -3.4028234663852886e38f
                                                                         : (float)t_rnd_int(-256, 0) / 128.0f;
        }
        CK(d_cuMemAlloc(&bufs[TUNER_BUF_INPUT0 + mbuf], nm * sizeof(float)));
        CK(d_cuMemcpyHtoD(bufs[TUNER_BUF_INPUT0 + mbuf], mask, nm * sizeof(float)));
    }
    CK(d_cuMemAlloc(&bufs[TUNER_BUF_OUTPUT], nq * 2));
    double *ref = malloc(nq * sizeof(double));
    const void *in[4] = {hb[0], hb[1], hb[2], mask};
    if (c->packed)
        in[1] = mask;
    reference(&op, in, ref);
    uint16_t *out = malloc(nq * 2);
    const double tol = c->dt == TUNER_F16 ? 0.01 : 0.03;
    compile_space(&op, sp, false);
    int wrong = 0;
    for (size_t i = 0; i < n_jobs; i++) {
        char sn[96];
        sched_name(jobs[i].s, sn, sizeof(sn));
        if (!jobs[i].bin) {
            printf("  %-40s %s: compile error: %s\n", c->name, sn, jobs[i].err ? jobs[i].err : "?");
            wrong++;
            continue;
        }
        CUmodule mod;
        CK(d_cuModuleLoadData(&mod, jobs[i].bin->cubin));
        CK(d_cuMemsetD8(bufs[TUNER_BUF_OUTPUT], 0xff, nq * 2));
        gpu_launch(mod, jobs[i].prog, bufs, st);
        CK(d_cuStreamSynchronize(st));
        CK(d_cuMemcpyDtoH(out, bufs[TUNER_BUF_OUTPUT], nq * 2));
        CK(d_cuModuleUnload(mod));
        double maxerr = 0;
        size_t at = 0, nans = 0;
        for (size_t k = 0; k < nq; k++) {
            const float o = t_host_get(c->dt, out, k);
            if (o != o) {
                nans++;
                at = k;
                maxerr = INFINITY;
                continue;
            }
            const double e = fabs((double)o - ref[k]);
            if (e > maxerr) {
                maxerr = e;
                at = k;
            }
        }
        const bool bad = !(maxerr <= tol);
        wrong += bad;
        printf("  %-40s %s: max err %.3g (at %zu: %g vs %g)%s%s\n", c->name, sn, maxerr, at,
               (double)t_host_get(c->dt, out, at), ref[at], nans ? " NaN" : "", bad ? " - WRONG" : "");
    }
    printf("%-40s %zu candidates, %d wrong\n", c->name, n_jobs, wrong);
    total_wrong += wrong;
    free_jobs();
    for (int t = 0; t < nbuf; t++) {
        free(hb[t]);
        CK(d_cuMemFree(bufs[TUNER_BUF_INPUT0 + t]));
    }
    if (mask) {
        CK(d_cuMemFree(bufs[TUNER_BUF_INPUT0 + mbuf]));
        free(mask);
    }
    CK(d_cuMemFree(bufs[TUNER_BUF_OUTPUT]));
    free(ref);
    free(out);
    tuner_space_free(sp);
}

static void time_case(bool causal, CUstream st)
{
    const acase c = {causal ? "time 4096x4096 hd128 causal" : "time 4096x4096 hd128", TUNER_F16, 1, 16, 16, 4096,
                     4096, 128, false, causal, 0, false};
    tuner_op op = make_op(&c);
    tuner_space *sp = NULL;
    char *err = NULL;
    if (tuner_space_build(&op, &sm90a, &sp, &err) < 0) {
        printf("%s: space error: %s\n", c.name, err ? err : "?");
        total_wrong++;
        return;
    }
    const size_t n = (size_t)(c.b * c.hq * c.s * c.d);
    for (int t = 0; t < 3; t++) {
        CK(d_cuMemAlloc(&bufs[TUNER_BUF_INPUT0 + t], n * 2));
        CK(d_cuMemsetD8(bufs[TUNER_BUF_INPUT0 + t], 0x1c, n * 2)); /* small positive values */
    }
    CK(d_cuMemAlloc(&bufs[TUNER_BUF_OUTPUT], n * 2));
    const char *all = getenv("AW_TIME_ALL");
    compile_space(&op, sp, !(all && atoi(all)));
    const double pairs = causal ? (double)c.s * (c.s + 1) / 2 : (double)c.s * c.skv;
    const double flops = 4.0 * c.b * c.hq * pairs * c.d;
    CUevent e0, e1;
    CK(d_cuEventCreate(&e0, 0));
    CK(d_cuEventCreate(&e1, 0));
    for (size_t i = 0; i < n_jobs; i++) {
        char sn[96];
        sched_name(jobs[i].s, sn, sizeof(sn));
        if (!jobs[i].bin) {
            printf("  %s %s: compile error: %s\n", c.name, sn, jobs[i].err ? jobs[i].err : "?");
            total_wrong++;
            continue;
        }
        CUmodule mod;
        CK(d_cuModuleLoadData(&mod, jobs[i].bin->cubin));
        for (int w = 0; w < 3; w++)
            gpu_launch(mod, jobs[i].prog, bufs, st);
        const int iters = 20;
        CK(d_cuEventRecord(e0, st));
        for (int w = 0; w < iters; w++)
            gpu_launch(mod, jobs[i].prog, bufs, st);
        CK(d_cuEventRecord(e1, st));
        CK(d_cuEventSynchronize(e1));
        float ms = 0;
        CK(d_cuEventElapsedTime(&ms, e0, e1));
        const double us = ms * 1e3 / iters;
        printf("  %s %s: %.1f us, %.1f TFLOP/s (model %.1f us)\n", c.name, sn, us, flops / us * 1e-6,
               tuner_predict_us(&op, &sm90a, jobs[i].s));
        CK(d_cuModuleUnload(mod));
    }
    CK(d_cuEventDestroy(e0));
    CK(d_cuEventDestroy(e1));
    free_jobs();
    for (int t = 0; t < 3; t++)
        CK(d_cuMemFree(bufs[TUNER_BUF_INPUT0 + t]));
    CK(d_cuMemFree(bufs[TUNER_BUF_OUTPUT]));
    tuner_space_free(sp);
}

static const acase cases[] = {
    {"hd128 f16 bhsd 256x256", TUNER_F16, 2, 4, 4, 256, 256, 128, false, false, 0, false},
    {"hd128 bf16 bhsd odd 77x333", TUNER_BF16, 2, 3, 3, 77, 333, 128, false, false, 0, false},
    {"hd64 f16 causal S<Skv 200x1000", TUNER_F16, 1, 4, 4, 200, 1000, 64, false, true, 0, false},
    {"hd128 bf16 causal S>Skv 500x130", TUNER_BF16, 1, 2, 2, 500, 130, 128, false, true, 0, false},
    {"hd128 f16 gqa 8/2 bshd causal 300x300", TUNER_F16, 1, 8, 2, 300, 300, 128, true, true, 0, false},
    {"hd80 f16 bshd 129x257", TUNER_F16, 2, 2, 2, 129, 257, 80, true, false, 0, false},
    {"hd256 bf16 bhsd causal 256x384", TUNER_BF16, 1, 2, 2, 256, 384, 256, false, true, 0, false},
    {"hd128 f16 mask [S,Skv] -inf row 100x200", TUNER_F16, 2, 2, 2, 100, 200, 128, false, false, 2, false},
    {"hd64 bf16 S=1 x 1000", TUNER_BF16, 2, 4, 4, 1, 1000, 64, false, false, 0, false},
    /* more causal items than SMs (192-384): odd rounds dealt backwards, a partial last round */
    {"hd64 f16 causal snake 1000", TUNER_F16, 3, 8, 8, 1000, 1000, 64, false, true, 0, false},
    /* bshd_packed: k and v at heads Hq and Hq + Hkv of one map over qkv */
    {"hd64 f16 packed gpt2 12/12 causal 300", TUNER_F16, 2, 12, 12, 300, 300, 64, true, true, 0, true},
    {"hd128 bf16 packed gqa 8/2 257", TUNER_BF16, 1, 8, 2, 257, 257, 128, true, false, 0, true},
    {"hd80 f16 packed mask 4/4 100", TUNER_F16, 2, 4, 4, 100, 100, 80, true, false, 2, true},
    {"hd256 f16 packed mqa 4/1 causal 130", TUNER_F16, 1, 4, 1, 130, 130, 256, true, true, 0, true},
    /* key-padding masks [B, 1, 1, Skv]: staged per stage in shared memory by the producer */
    {"hd64 f16 key mask 200x333", TUNER_F16, 3, 4, 4, 200, 333, 64, false, false, 4, false},
    {"hd128 bf16 key mask gqa 4/2 bshd causal 150x300", TUNER_BF16, 3, 4, 2, 150, 300, 128, true, true, 4, false},
    {"hd64 f16 packed key mask 6/6 130", TUNER_F16, 3, 6, 6, 130, 130, 64, true, false, 4, true},
    {"hd256 bf16 key mask 70x200", TUNER_BF16, 3, 2, 2, 70, 200, 256, false, false, 4, false},
};

int main(void)
{
    CUdevice dev;
    int major, minor;
    if (!gpu_driver_first_device(true, &dev, &major, &minor))
        return 77;
    if (major != 9 || minor != 0) {
        printf("sm_%d%d: attention_wgmma needs sm_90a: skipped\n", major, minor);
        return 77;
    }
    gpu_driver_use(dev);
    CUstream st;
    CK(d_cuStreamCreate(&st, 0));
    const char *only = getenv("AW_ONLY");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (!only || strstr(cases[i].name, only))
            verify_case(&cases[i], st);
    if (!only || strstr("time", only)) {
        time_case(false, st);
        time_case(true, st);
    }
    CK(d_cuStreamDestroy(st));
    printf("%s\n", total_wrong ? "WRONG results" : "all candidates correct");
    return total_wrong ? 1 : 0;
}
