/* tuner/attn/tests/gpu_attn.c - runs EVERY candidate of attention_mma on a real GPU against a CPU
 * fp64 reference written here (needs a CUDA GPU; exits 77 = skipped without one).
 *
 * Cases: odd S and Skv, S = 1, causal with S < Skv and S > Skv, GQA, bshd, head dims 64, 80, 96,
 * 128 and 256, f16 and bf16, additive masks of every broadcast shape in f32, f16 and bf16 with
 * -inf entries and fully masked rows (and a fully masked batch entry), rows masked by the
 * dtype's lowest finite value (averaged uniformly, as PyTorch does), an epilogue (scale; cast
 * and scale). For each case every candidate of the space for the device's target is generated
 * and compiled (threads), the inputs are filled with deterministic values exact in their dtype,
 * the output poisoned with NaN bytes, and every output element compared with the reference:
 * |out - ref| <= atol + rtol |ref| (f16 2e-3 + 2e-3, bf16 1.6e-2 + 1.6e-2), rows that keep no key
 * exactly 0 after the epilogue. Prints one line per case (max error, pass/fail) and exits 1 when
 * any candidate is wrong. Then times the preferred schedule (and the model's pick) on
 * B 1 x 16 heads x 4096 x 4096 x 128 f16, plain and causal, and checks 64 of its rows per head
 * against the reference.
 * HIDET_ATTN_ONLY=substring runs the matching cases only; HIDET_ATTN_TIMES=1 prints every
 * candidate's time.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/attn/attn.h"
#include "tuner/attn/tests/attn_host.h"
#include "tuner/attn/tests/ops.h"
#include "tuner/tests/common.h"
#include "tuner/tests/gpu_driver.h"
#include "tuner/tests/gpu_jobs.h"
#include "tuner/tests/host_values.h"
#include "tuner/tuner.h"

/* ---- host values: every one exact in its dtype (host_values.h) ---- */

/* A value exact in dt: k/128 (bf16 keeps 8 significant bits) or k/1024 (f16, f32), |k| <= lim. */
static float rnd_value(tuner_dtype dt, int lim)
{
    return dt == TUNER_BF16 ? (float)t_rnd_int(-lim / 8, lim / 8) / 128.0f : (float)t_rnd_int(-lim, lim) / 1024.0f;
}

/* ---- the reference: out[b, h, i, :] in fp64 (attn_host.h), then the epilogue (scale and cast steps) ---- */

static double round_to(double v, tuner_dtype dt)
{
    float f = (float)v;
    if (dt == TUNER_F32)
        return f;
    if (dt == TUNER_F16) {
        /* Round to nearest even at f16's precision (normal range; the values here are small). */
        if (f == 0 || isinf(f) || isnan(f))
            return f;
        int e;
        frexp(f, &e);
        const double q = ldexp(1.0, e - 11);
        return nearbyint(f / q) * q;
    }
    uint32_t b;
    memcpy(&b, &f, 4);
    b = (b + 0x7fff + ((b >> 16) & 1)) & 0xffff0000u;
    memcpy(&f, &b, 4);
    return f;
}

typedef struct host_case {
    const tuner_op *op;
    tuner__attn_problem p;
    void *h[4]; /* q, k, v, mask */
} host_case;

static double apply_epilogue(const tuner_op *op, double v)
{
    for (int s = 0; s < op->epilogue.n; s++) {
        const tuner_ew_step *st = &op->epilogue.steps[s];
        if (st->kind == TUNER_EW_SCALE)
            v *= st->scalar;
        else if (st->kind == TUNER_EW_CAST)
            v = round_to(v, st->dtype);
    }
    return v;
}

/* ---- candidates ---- */

static gpu_job *jobs;
static size_t n_jobs;

static double time_us(CUmodule mod, const tuner_program *p, const CUdeviceptr *bufs, CUstream st, int reps)
{
    CUevent e0, e1;
    CK(d_cuEventCreate(&e0, 0));
    CK(d_cuEventCreate(&e1, 0));
    for (int w = 0; w < 3; w++)
        gpu_launch(mod, p, bufs, st);
    double ts[32];
    if (reps > 32)
        reps = 32;
    for (int r = 0; r < reps; r++) {
        CK(d_cuEventRecord(e0, st));
        gpu_launch(mod, p, bufs, st);
        CK(d_cuEventRecord(e1, st));
        CK(d_cuEventSynchronize(e1));
        float ms = 0;
        CK(d_cuEventElapsedTime(&ms, e0, e1));
        ts[r] = ms * 1000.0;
    }
    CK(d_cuEventDestroy(e0));
    CK(d_cuEventDestroy(e1));
    return t_median(ts, reps);
}

static int total_wrong;

/* Fills the host inputs: q with a wider range (sharper softmax), k and v in [-1, 1], the mask in
 * [-2, 2] with about one entry in 8 at -inf, and, where the mask has rows (its S dimension), one
 * row wholly -inf; a [B,1,1,Skv] mask has batch entry 1 wholly -inf. */
static void fill_inputs(host_case *hc)
{
    const tuner_op *op = hc->op;
    for (int i = 0; i < op->n_inputs && i < 4; i++) {
        const tuner_tensor *x = &op->inputs[i];
        const size_t n = (size_t)tuner_tensor_numel(x);
        hc->h[i] = malloc(n * (size_t)tuner_dtype_size(x->dtype));
        for (size_t k = 0; k < n; k++) {
            float f;
            /* (packed: qkv is inputs[0], the mask inputs[1]) */
            if (i >= hc->p.mask_in)
                f = t_rnd_int(0, 7) == 0 ? -INFINITY : rnd_value(x->dtype, 2048);
            else if (i == 0)
                f = rnd_value(x->dtype, 4096);
            else
                f = rnd_value(x->dtype, 1024);
            t_host_put(x->dtype, hc->h[i], k, f);
        }
    }
    if (!hc->p.d.has_mask)
        return;
    const int mi = hc->p.mask_in;
    const tuner_tensor *m = &op->inputs[mi];
    const long long skv = m->shape[m->rank - 1];
    if (hc->p.m_st[2]) {
        /* Row 3 of every (b, h) entry the mask has (row index 3 % S). */
        const long long s = m->shape[m->rank - 2], rows = tuner_tensor_numel(m) / (s * skv);
        /* Row 5: the dtype's lowest finite value everywhere (HF's (1 - mask) * finfo.min):
         * finite, so PyTorch averages that row uniformly rather than giving 0. */
        const float lowest = m->dtype == TUNER_F16 ? -65504.0f : m->dtype == TUNER_BF16 ? -3.38953139e38f : -FLT_MAX;
        for (long long r = 0; r < rows; r++)
            for (long long j = 0; j < skv; j++) {
                t_host_put(m->dtype, hc->h[mi], (size_t)((r * s + 3 % s) * skv + j), -INFINITY);
                if (s > 5)
                    t_host_put(m->dtype, hc->h[mi], (size_t)((r * s + 5) * skv + j), lowest);
            }
    } else if (hc->p.m_st[0] && m->shape[0] > 1) {
        for (long long j = 0; j < skv; j++)
            t_host_put(m->dtype, hc->h[mi], (size_t)(1 * (tuner_tensor_numel(m) / m->shape[0]) + j), -INFINITY);
    }
}

static void verify_case(const char *name, const tuner_op *op, const tuner_target *t, int threads)
{
    host_case hc = {.op = op};
    char *err = NULL;
    if (tuner__attn_problem_init(op, &hc.p, &err) < 0) {
        printf("%-44s problem error: %s\n", name, err ? err : "?");
        free(err);
        total_wrong++;
        return;
    }
    tuner_schedule *items = NULL;
    size_t n = 0;
    if (!tuner__attn_mma.applies(op, t) || tuner__attn_mma.enumerate(op, t, &items, &n) < 0 || n == 0) {
        printf("%-44s no attention_mma candidate\n", name);
        total_wrong++;
        free(items);
        return;
    }
    n_jobs = n;
    jobs = calloc(n, sizeof(*jobs));
    for (size_t i = 0; i < n; i++) {
        items[i].template_name = "attention_mma";
        jobs[i] = (gpu_job){.op = op, .t = t, .s = &items[i]};
    }
    gpu_jobs_compile(jobs, n_jobs, threads);

    fill_inputs(&hc);
    const tuner_attention_dims *d = &hc.p.d;
    /* The reference for every output element, and which rows keep no key. */
    const size_t nout = (size_t)tuner_tensor_numel(&op->output);
    double *ref = malloc(nout * sizeof(double)), *row = malloc((size_t)d->d * sizeof(double)),
           *scores = malloc((size_t)d->skv * sizeof(double));
    long long empty_rows = 0;
    for (long long b = 0; b < d->b; b++)
        for (long long h = 0; h < d->hq; h++)
            for (long long i = 0; i < d->s; i++) {
                empty_rows += !ta_reference_row(&hc.p, (const void *const *)hc.h, b, h, i, row, scores);
                for (long long c = 0; c < d->d; c++)
                    ref[b * hc.p.o_sb + h * hc.p.o_sh + i * hc.p.o_ss + c] = apply_epilogue(op, row[c]);
            }

    CUdeviceptr bufs[TUNER_BUF_WORKSPACE + 1] = {0};
    for (int i = 0; i < op->n_inputs; i++) {
        const size_t bytes = (size_t)tuner_tensor_numel(&op->inputs[i]) * (size_t)tuner_dtype_size(op->inputs[i].dtype);
        CK(d_cuMemAlloc(&bufs[i], bytes));
        CK(d_cuMemcpyHtoD(bufs[i], hc.h[i], bytes));
    }
    const size_t oes = (size_t)tuner_dtype_size(op->output.dtype);
    CK(d_cuMemAlloc(&bufs[TUNER_BUF_OUTPUT], nout * oes));
    CUstream st;
    CK(d_cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    void *outh = malloc(nout * oes);
    const bool bf = op->output.dtype == TUNER_BF16;
    const double atol = bf ? 1.6e-2 : 2e-3, rtol = bf ? 1.6e-2 : 2e-3;
    int ok = 0, wrong = 0, failed = 0;
    double worst = 0;
    for (size_t k = 0; k < n; k++) {
        gpu_job *j = &jobs[k];
        char *sj = tuner_schedule_json(j->s);
        if (!j->bin) {
            failed++;
            printf("  FAILED to compile %s: %s\n", sj ? sj : "?", j->err ? j->err : "?");
            free(sj);
            continue;
        }
        CUmodule mod;
        CK(d_cuModuleLoadData(&mod, j->bin->cubin));
        CK(d_cuMemsetD8(bufs[TUNER_BUF_OUTPUT], 0xff, nout * oes));
        gpu_launch(mod, j->prog, bufs, st);
        CK(d_cuStreamSynchronize(st));
        CK(d_cuMemcpyDtoH(outh, bufs[TUNER_BUF_OUTPUT], nout * oes));
        double maxerr = 0;
        size_t bad = 0, first = 0;
        for (size_t e = 0; e < nout; e++) {
            const double v = t_host_get(op->output.dtype, outh, e), r = ref[e];
            const double diff = fabs(v - r);
            /* Empty rows: exactly the epilogue of 0. */
            const bool good = r == 0 ? v == 0 : diff <= atol + rtol * fabs(r);
            if (!good) {
                if (!bad)
                    first = e;
                bad++;
            }
            if (isnan(diff) || diff > maxerr)
                maxerr = isnan(diff) ? INFINITY : diff;
        }
        if (maxerr > worst)
            worst = maxerr;
        if (getenv("HIDET_ATTN_TIMES"))
            printf("    %9.2f us (model %9.2f) max err %.2e %s\n", time_us(mod, j->prog, bufs, st, 5),
                   tuner_predict_us(op, t, j->s), maxerr, sj ? sj : "?");
        if (bad) {
            wrong++;
            printf("  WRONG %s: %zu/%zu bad, max err %.3g, first at %zu: %g vs ref %g\n", sj ? sj : "?", bad, nout,
                   maxerr, first, t_host_get(op->output.dtype, outh, first), ref[first]);
        } else {
            ok++;
        }
        free(sj);
        CK(d_cuModuleUnload(mod));
    }
    printf("%-44s %2zu cand: ok %2d wrong %2d failed %2d  max err %.2e (tol %.1e + %.1e|ref|), %lld empty rows  %s\n",
           name, n, ok, wrong, failed, worst, atol, rtol, empty_rows, wrong || failed ? "FAIL" : "pass");
    fflush(stdout);
    total_wrong += wrong + failed;
    CK(d_cuStreamDestroy(st));
    for (int i = 0; i <= TUNER_BUF_WORKSPACE; i++)
        if (bufs[i])
            CK(d_cuMemFree(bufs[i]));
    for (int i = 0; i < 4; i++)
        free(hc.h[i]);
    free(outh);
    free(ref);
    free(row);
    free(scores);
    gpu_jobs_free(jobs, n);
    free(items);
}

/* Times the preferred schedule and the model's pick of a large problem; checks 64 rows per head
 * (spread over S) against the reference. */
static void time_case(const char *name, const tuner_op *op, const tuner_target *t)
{
    host_case hc = {.op = op};
    if (tuner__attn_problem_init(op, &hc.p, NULL) < 0)
        return;
    tuner_schedule pref = {0}, *items = NULL;
    size_t n = 0;
    if (tuner__attn_mma.preferred(op, t, &pref) != 0 || tuner__attn_mma.enumerate(op, t, &items, &n) < 0 || !n) {
        printf("%s: no schedule\n", name);
        total_wrong++;
        free(items);
        return;
    }
    pref.template_name = "attention_mma";
    size_t best = 0;
    for (size_t i = 0; i < n; i++) {
        items[i].template_name = "attention_mma";
        if (tuner_predict_us(op, t, &items[i]) < tuner_predict_us(op, t, &items[best]))
            best = i;
    }
    fill_inputs(&hc);
    const tuner_attention_dims *d = &hc.p.d;
    CUdeviceptr bufs[TUNER_BUF_WORKSPACE + 1] = {0};
    for (int i = 0; i < op->n_inputs; i++) {
        const size_t bytes = (size_t)tuner_tensor_numel(&op->inputs[i]) * (size_t)tuner_dtype_size(op->inputs[i].dtype);
        CK(d_cuMemAlloc(&bufs[i], bytes));
        CK(d_cuMemcpyHtoD(bufs[i], hc.h[i], bytes));
    }
    const size_t nout = (size_t)tuner_tensor_numel(&op->output), oes = (size_t)tuner_dtype_size(op->output.dtype);
    CK(d_cuMemAlloc(&bufs[TUNER_BUF_OUTPUT], nout * oes));
    CUstream st;
    CK(d_cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    void *outh = malloc(nout * oes);
    double *row = malloc((size_t)d->d * sizeof(double)), *scores = malloc((size_t)d->skv * sizeof(double));
    /* The reference of the rows checked: 64 per head, spread over S. */
    double *refrows = malloc((size_t)d->hq * 64 * (size_t)d->d * sizeof(double));
    for (long long h = 0; h < d->hq; h++)
        for (int r = 0; r < 64; r++) {
            ta_reference_row(&hc.p, (const void *const *)hc.h, 0, h, (long long)r * (d->s - 1) / 63, row, scores);
            memcpy(refrows + (h * 64 + r) * d->d, row, (size_t)d->d * sizeof(double));
        }
    const bool bf = op->output.dtype == TUNER_BF16;
    const double atol = bf ? 1.6e-2 : 2e-3, rtol = atol;
    const tuner_schedule *which[2] = {&pref, &items[best]};
    const double flops = 4.0 * (double)d->b * (double)d->hq * tuner__attn_pairs(&hc.p) * (double)d->d;
    for (int w = 0; w < 2; w++) {
        tuner_program *prog = NULL;
        tuner_binary *bin = NULL;
        char *err = NULL;
        char *sj = tuner_schedule_json(which[w]);
        if (tuner_generate(op, t, which[w], &prog, &err) < 0 || tuner_compile(prog->source, t, &bin, &err) < 0) {
            printf("%s: %s does not compile: %s\n", name, sj ? sj : "?", err ? err : "?");
            total_wrong++;
        } else {
            CUmodule mod;
            CK(d_cuModuleLoadData(&mod, bin->cubin));
            CK(d_cuMemsetD8(bufs[TUNER_BUF_OUTPUT], 0xff, nout * oes));
            gpu_launch(mod, prog, bufs, st);
            CK(d_cuStreamSynchronize(st));
            CK(d_cuMemcpyDtoH(outh, bufs[TUNER_BUF_OUTPUT], nout * oes));
            double maxerr = 0;
            long long bad = 0;
            for (long long h = 0; h < d->hq; h++)
                for (int r = 0; r < 64; r++) {
                    const long long i = (long long)r * (d->s - 1) / 63;
                    const double *rr = refrows + (h * 64 + r) * d->d;
                    for (long long c = 0; c < d->d; c++) {
                        const double v = t_host_get(op->output.dtype, outh,
                                             (size_t)(h * hc.p.q_sh + i * hc.p.q_ss + c));
                        const double diff = fabs(v - rr[c]);
                        bad += !(diff <= atol + rtol * fabs(rr[c]));
                        if (isnan(diff) || diff > maxerr)
                            maxerr = isnan(diff) ? INFINITY : diff;
                    }
                }
            const double us = time_us(mod, prog, bufs, st, 20);
            printf("%-44s %s %s: %8.1f us = %6.1f TFLOPS (model %8.1f us), %lld rows checked, max err %.2e%s\n", name,
                   w ? "model's pick" : "preferred   ", sj ? sj : "?", us, flops / (us * 1e6),
                   tuner_predict_us(op, t, which[w]), (long long)d->hq * 64, maxerr, bad ? " WRONG" : "");
            total_wrong += bad > 0;
            CK(d_cuModuleUnload(mod));
        }
        free(sj);
        free(err);
        tuner_program_free(prog);
        tuner_binary_free(bin);
    }
    CK(d_cuStreamDestroy(st));
    for (int i = 0; i <= TUNER_BUF_WORKSPACE; i++)
        if (bufs[i])
            CK(d_cuMemFree(bufs[i]));
    for (int i = 0; i < 4; i++)
        free(hc.h[i]);
    free(outh);
    free(row);
    free(scores);
    free(refrows);
    free(items);
}

static ta_shape shp(tuner_dtype dt, long long b, long long hq, long long hkv, long long s, long long skv, long long d)
{
    return (ta_shape){.dt = dt, .b = b, .hq = hq, .hkv = hkv, .s = s, .skv = skv, .d = d};
}

int main(void)
{
    CUdevice dev;
    int major, minor;
    if (!gpu_driver_first_device(false, &dev, &major, &minor))
        return 77;
    gpu_driver_use(dev);
    /* The nearest supported target at or below the device. */
    static const int sms[] = {120, 100, 90, 89, 86, 80};
    const int dsm = major * 10 + minor;
    tuner_target t = {.sm = 0};
    for (size_t i = 0; i < sizeof(sms) / sizeof(sms[0]); i++)
        if (sms[i] <= dsm) {
            t.sm = sms[i];
            break;
        }
    if (!t.sm) {
        printf("sm_%d: below sm_80, skipped\n", dsm);
        return 77;
    }
    printf("device sm_%d, target sm_%d\n", dsm, t.sm);
    t_rng_state = 12345;
    const char *only = getenv("HIDET_ATTN_ONLY");
    const int threads = 16;
    char name[128];
    tuner_op op;
#define CASE(label, shape_expr, extra)                                                             \
    do {                                                                                           \
        ta_shape sh_ = (shape_expr);                                                               \
        extra;                                                                                     \
        snprintf(name, sizeof(name), "%s %s", label, tuner_dtype_name(sh_.dt));                    \
        if (only && !strstr(name, only))                                                           \
            break;                                                                                 \
        op = ta_attention(&sh_);                                                                   \
        if (strstr(label, "epi"))                                                                  \
            add_epi(&op, strstr(label, "cast") != NULL);                                           \
        verify_case(name, &op, &t, threads);                                                       \
    } while (0)
#define add_epi(o, cast)                                                                                       \
    do {                                                                                                       \
        if (cast)                                                                                              \
            (o)->epilogue.steps[(o)->epilogue.n++] =                                                           \
                (tuner_ew_step){.kind = TUNER_EW_CAST, .operand = -1, .dtype = TUNER_BF16};                    \
        (o)->epilogue.steps[(o)->epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_SCALE, .operand = -1, .scalar = 0.5}; \
    } while (0)
    static const tuner_dtype dts[2] = {TUNER_F16, TUNER_BF16};
    for (int di = 0; di < 2; di++) {
        const tuner_dtype dt = dts[di];
        CASE("D64 2x4 S77 Skv333", shp(dt, 2, 4, 4, 77, 333, 64), (void)0);
        CASE("D80 1x3 S100 Skv129", shp(dt, 1, 3, 3, 100, 129, 80), (void)0);
        CASE("D96 1x2 S130 Skv200 causal", shp(dt, 1, 2, 2, 130, 200, 96), sh_.causal = true);
        CASE("D128 2x4 S257 Skv257", shp(dt, 2, 4, 4, 257, 257, 128), (void)0);
        CASE("D256 1x2 S100 Skv300", shp(dt, 1, 2, 2, 100, 300, 256), (void)0);
        CASE("D128 S1 Skv333", shp(dt, 3, 4, 4, 1, 333, 128), (void)0);
        CASE("D64 causal S300 Skv1000 bshd", shp(dt, 2, 4, 4, 300, 1000, 64), (sh_.causal = true, sh_.bshd = true));
        CASE("D128 causal S1000 Skv300", shp(dt, 1, 2, 2, 1000, 300, 128), sh_.causal = true);
        CASE("D128 causal S=Skv 333", shp(dt, 1, 2, 2, 333, 333, 128), sh_.causal = true);
        CASE("D128 GQA 8/2 S200 Skv300", shp(dt, 2, 8, 2, 200, 300, 128), (void)0);
        CASE("D64 GQA 8/2 bshd causal", shp(dt, 1, 8, 2, 150, 150, 64), (sh_.causal = true, sh_.bshd = true));
        CASE("D256 GQA 4/1 causal bshd", shp(dt, 1, 4, 1, 70, 90, 256), (sh_.causal = true, sh_.bshd = true));
        CASE("D128 mask [Skv] f32", shp(dt, 2, 4, 4, 77, 333, 128),
             (sh_.mask_rank = 1, sh_.mask_shape[0] = 333, sh_.mask_dt = TUNER_F32));
        CASE("D128 mask [S,Skv] f16", shp(dt, 2, 4, 4, 77, 333, 128),
             (sh_.mask_rank = 2, sh_.mask_shape[0] = 77, sh_.mask_shape[1] = 333, sh_.mask_dt = TUNER_F16));
        CASE("D64 mask [B,1,1,Skv] bf16", shp(dt, 2, 4, 4, 77, 333, 64),
             (sh_.mask_rank = 4, sh_.mask_shape[0] = 2, sh_.mask_shape[1] = 1, sh_.mask_shape[2] = 1,
              sh_.mask_shape[3] = 333, sh_.mask_dt = TUNER_BF16));
        CASE("D128 mask [B,Hq,S,Skv] f32 causal bshd", shp(dt, 2, 4, 2, 77, 100, 128),
             (sh_.mask_rank = 4, sh_.mask_shape[0] = 2, sh_.mask_shape[1] = 4, sh_.mask_shape[2] = 77,
              sh_.mask_shape[3] = 100, sh_.mask_dt = TUNER_F32, sh_.causal = true, sh_.bshd = true));
        CASE("D128 epi scale", shp(dt, 1, 4, 4, 100, 100, 128), (void)0);
        CASE("D64 epi cast scale bshd", shp(dt, 1, 4, 4, 100, 100, 64), sh_.bshd = true);
        /* bshd_packed: q, k, v read out of one qkv [B,S,Hq+2Hkv,D] (GPT-2's c_attn output) */
        CASE("D64 packed 12/12 causal S129", shp(dt, 2, 12, 12, 129, 129, 64), (sh_.packed = true, sh_.causal = true));
        CASE("D80 packed 4/4 S100", shp(dt, 1, 4, 4, 100, 100, 80), sh_.packed = true);
        CASE("D128 packed GQA 8/2 causal S200", shp(dt, 2, 8, 2, 200, 200, 128), (sh_.packed = true, sh_.causal = true));
        CASE("D256 packed MQA 4/1 S70", shp(dt, 1, 4, 1, 70, 70, 256), sh_.packed = true);
        CASE("D64 packed mask [B,1,1,S] f32", shp(dt, 2, 4, 4, 77, 77, 64),
             (sh_.packed = true, sh_.mask_rank = 4, sh_.mask_shape[0] = 2, sh_.mask_shape[1] = 1, sh_.mask_shape[2] = 1,
              sh_.mask_shape[3] = 77, sh_.mask_dt = TUNER_F32));
        CASE("D128 packed epi scale causal S1", shp(dt, 3, 4, 4, 1, 1, 128), (sh_.packed = true, sh_.causal = true));
    }
#undef CASE
    /* Timing: B 1 x 16 heads x 4096 x 4096 x 128, f16 (and bf16, and causal). */
    for (int w = 0; w < 3; w++) {
        ta_shape sh = shp(w == 1 ? TUNER_BF16 : TUNER_F16, 1, 16, 16, 4096, 4096, 128);
        sh.causal = w == 2;
        snprintf(name, sizeof(name), "time 1x16x4096x4096 D128 %s%s", tuner_dtype_name(sh.dt),
                 sh.causal ? " causal" : "");
        if (only && !strstr(name, only))
            continue;
        op = ta_attention(&sh);
        time_case(name, &op, &t);
    }
    printf("gpu_attn: %d wrong or failed candidates\n", total_wrong);
    return total_wrong ? 1 : 0;
}
