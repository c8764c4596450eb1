/* tuner/tests/gpu_verify.c - runs every candidate of the core templates on a real GPU against the
 * reference (needs a CUDA GPU; exits 77 = skipped without one).
 *
 * For each case (softmax / layernorm / rmsnorm / reduce / elementwise, odd sizes, align=2 views,
 * fused epilogues, split rows, softmax rows with runs of -inf) x dtype: builds the space for the
 * device's target, generates and compiles every candidate (in parallel threads: tuner_compile is
 * thread-safe), fills the inputs with deterministic values exactly representable in the dtype,
 * runs the reference (F32 output),
 * poisons the candidate's output with NaN bytes, runs the candidate and compares every element:
 * |out - ref| <= atol * rms(ref) + rtol * |ref|, no NaN. Misaligned inputs (align=2) are really
 * passed at an odd 2-byte offset. Prints one line per case and exits 1 if any candidate is wrong.
 * HIDET_VERIFY_MAX=N limits candidates per case (default: all); HIDET_VERIFY_TIMES=1 prints every
 * candidate's time beside the cost model's prediction.
 *
 * On a Hopper GPU the FP8 matmuls (issue 41) follow, for sm_90a: e4m3/e5m2 operands filled with
 * random finite values of magnitude <= 2 (subnormals included), per-tensor, per-row and
 * per-column scales, epilogues, batches, edge tiles and a decode shape, against the reference's
 * bit-exact decoding and fp32 sums (HIDET_VERIFY_ONLY=fp8 runs only them; HIDET_VERIFY_FP8_MAX=N
 * candidates per case, default 12). Their tolerance adds to the output dtype's what FP8 wgmma's
 * accumulation may lose: it keeps about 14 bits of each partial sum (DeepSeek-V3's measurement
 * of Hopper's FP8 tensor cores) and rounds once per k32 step, so up to ceil(K / 32) * 2^-14 of the
 * sums' scale (twice that as margin); without fast accumulation, that of one 128-k block times the
 * square root of the blocks (their losses, independent, add up as a random walk). On sm_90a
 * the FP8 spaces hold matmul_mma's mma.sync m16n8k32 candidates beside matmul_wgmma's, so the
 * evenly spread sample runs both; MN-major operands (A [K,M], B [K,N]: matmul_wgmma transposes
 * them in the kernel) follow on sm_90a, every sampled candidate against the same reference.
 *
 * HIDET_VERIFY_ARCH=<target> (e.g. sm_89) builds every case's code, the FP8 cases' included, for
 * that target instead of the device's: where it is not the device's own (compute_89 PTX on a
 * Hopper part), modules are loaded from the PTX, which the driver JIT-compiles for the device
 * (PTX is forward-compatible; a cubin is not across major versions). So an H100/H200 runs the
 * code an Ada GPU would get (matmul_mma's FP8 path for sm_89) through the same checks, the
 * timings being Hopper's running that code. HIDET_VERIFY_ONLY=fp8 still selects the FP8 cases.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "gpu_driver.h"
#include "gpu_jobs.h"
#include "host_values.h"
#include "tuner/attn/tests/ops.h"
#include "tuner/tuner.h"

static gpu_job *jobs;
static size_t n_jobs;
/* Whether modules are loaded from PTX (a target other than the device's: HIDET_VERIFY_ARCH). */
static bool load_ptx;

/* Loads a compiled program: its cubin, or its PTX for the driver to JIT (load_ptx). */
static CUresult load_module(CUmodule *mod, const tuner_binary *b)
{
    return d_cuModuleLoadData(mod, load_ptx ? (const void *)b->ptx : (const void *)b->cubin);
}

typedef struct devbuf {
    CUdeviceptr base, ptr; /* ptr = base (+2 bytes for an align=2 input) */
    size_t bytes;
} devbuf;

static void launch_program(CUmodule mod, const tuner_program *p, const devbuf *bufs, CUstream st)
{
    CUdeviceptr ptrs[TUNER_BUF_WORKSPACE + 1];
    for (int i = 0; i <= TUNER_BUF_WORKSPACE; i++)
        ptrs[i] = bufs[i].ptr;
    gpu_launch(mod, p, ptrs, st);
}

static int total_wrong;
/* Candidates per case when HIDET_VERIFY_MAX does not say (0: all); the FP8 cases take fewer. */
static size_t case_max;

static long long host_id(const tuner_tensor *t, const void *h, size_t k)
{
    if (t->dtype == TUNER_I64) {
        int64_t v;
        memcpy(&v, (const char *)h + 8 * k, 8);
        return v;
    }
    int32_t v;
    memcpy(&v, (const char *)h + 4 * k, 4);
    return v;
}

/* gather's reference (tuner/reference.c) against the host, element by element and exactly: the
 * row tuner_gather_row picks (negative ids from the end, ids out of range: 0), then the epilogue
 * where it is adds of trailing-shaped operands and scales (float arithmetic, as the reference
 * does it). Counts the negative and out-of-range ids it saw, so that the output shows both kinds
 * were exercised. */
static void host_check_gather(const char *name, const tuner_op *op, void *const *hin, const float *refh)
{
    const tuner_tensor *x = &op->inputs[0], *ix = &op->inputs[1];
    const int axis = op->attrs.gather.axis;
    long long I = 1;
    const long long N = x->shape[axis], M = tuner_tensor_numel(ix), n = tuner_tensor_numel(&op->output);
    for (int d = axis + 1; d < x->rank; d++)
        I *= x->shape[d];
    for (int s = 0; s < op->epilogue.n; s++) {
        const tuner_ew_step *st = &op->epilogue.steps[s];
        if (st->kind != TUNER_EW_ADD && st->kind != TUNER_EW_SCALE) {
            printf("  host check of %s: skipped (epilogue step %s)\n", name, tuner_ew_name(st->kind));
            return;
        }
    }
    long long neg = 0, oor = 0, bad = 0, first = -1;
    for (long long m = 0; m < M; m++) {
        const long long id = host_id(ix, hin[1], (size_t)m);
        neg += id < 0;
        oor += tuner_gather_row(id, N) < 0;
    }
    for (long long k = 0; k < n; k++) {
        const long long i = k % I, m = (k / I) % M, o = k / (I * M);
        const long long r = tuner_gather_row(host_id(ix, hin[1], (size_t)m), N);
        float v = r < 0 ? 0.0f : t_host_get(x->dtype, hin[0], (size_t)((o * N + r) * I + i));
        for (int s = 0; s < op->epilogue.n; s++) {
            const tuner_ew_step *st = &op->epilogue.steps[s];
            if (st->kind == TUNER_EW_SCALE) {
                v = v * (float)st->scalar;
            } else {
                const tuner_tensor *b = &op->inputs[st->operand];
                v = v + t_host_get(b->dtype, hin[st->operand], (size_t)(k % tuner_tensor_numel(b)));
            }
        }
        if (!(refh[k] == v)) {
            if (first < 0)
                first = k;
            bad++;
        }
    }
    printf("  host check of %s: %lld ids (%lld negative, %lld out of range), %lld of %lld reference elements "
           "differ%s\n", name, M, neg, oor, bad, n, bad ? " - WRONG" : "");
    if (bad) {
        printf("    first at %lld: reference %g\n", first, (double)refh[first]);
        total_wrong++;
    }
    if (!neg || !oor) {
        printf("    the ids did not include both negative and out-of-range ones\n");
        total_wrong++;
    }
}

/* Element (b, h, i, j) of the attention mask broadcast to [B, Hq, S, Skv]: its offset. */
static size_t attn_mask_offset(const tuner_tensor *m, const long long crd[4])
{
    size_t off = 0, stride = 1;
    for (int k = 3; k >= 0; k--) {
        const int dm = m->rank - (4 - k);
        if (dm < 0)
            break;
        if (m->shape[dm] != 1)
            off += (size_t)crd[k] * stride;
        stride *= (size_t)m->shape[dm];
    }
    return off;
}

/* The attention reference (tuner/attn/reference.c) against the host in fp64, straight from op/
 * op.h's definition: inputs uniform in [-1, 1] (exact in their dtype), the mask -inf at every
 * 5th element and on the whole of some rows (row 3 of every (b, h) it has), the scores scaled
 * as the reference does (the scale rounded to float), softmax over the keys a row may see
 * (causal: j <= i + Skv - S), a row that sees none 0; then an epilogue of adds of output-shaped
 * operands and scales. The reference computes in fp32: |ref - host| <= 1e-4 (rms(host) +
 * |host|), and a row with no key must be exactly 0. want_empty: the case has such rows (they are
 * counted, so the check cannot pass without exercising them). */
static void verify_attn_reference(const char *name, const tuner_op *op, const tuner_target *t, bool want_empty)
{
    tuner_program *ref = NULL;
    tuner_binary *refbin = NULL;
    char *err = NULL;
    if (tuner_reference(op, t, &ref, &err) < 0 || tuner_compile(ref->source, t, &refbin, &err) < 0) {
        printf("%-40s reference error: %s\n", name, err ? err : "?");
        free(err);
        total_wrong++;
        tuner_program_free(ref);
        return;
    }
    const tuner_attention_dims d = tuner_attention_dims_of(op);
    const bool bshd = op->attrs.attention.bshd, causal = op->attrs.attention.causal;
    devbuf bufs[TUNER_BUF_WORKSPACE + 1];
    memset(bufs, 0, sizeof(bufs));
    void *hin[TUNER_MAX_INPUTS] = {NULL};
    for (int i = 0; i < op->n_inputs; i++) {
        const tuner_tensor *x = &op->inputs[i];
        const size_t n = (size_t)tuner_tensor_numel(x), es = (size_t)tuner_dtype_size(x->dtype);
        const bool mask = d.has_mask && i == tuner_attention_mask_input(op);
        const long long mrow = x->rank >= 2 ? x->shape[x->rank - 1] : 0; /* a mask row's length */
        void *h = malloc(n * es);
        for (size_t k = 0; k < n; k++) {
            const bool ninf = mask && (k % 5 == 2 || (mrow && x->shape[x->rank - 2] > 3 && (k / (size_t)mrow) %
                                                          (size_t)x->shape[x->rank - 2] == 3));
            if (x->dtype == TUNER_F16) {
                uint16_t v = ninf ? 0xfc00 : t_f32_to_f16((float)t_rnd_int(-1024, 1024) / 1024.0f);
                memcpy((char *)h + k * 2, &v, 2);
            } else if (x->dtype == TUNER_BF16) {
                float f = (float)t_rnd_int(-128, 128) / 128.0f;
                uint32_t b;
                memcpy(&b, &f, 4);
                uint16_t v = ninf ? 0xff80 : (uint16_t)(b >> 16);
                memcpy((char *)h + k * 2, &v, 2);
            } else {
                float f = ninf ? -INFINITY : (float)t_rnd_int(-(1 << 20), 1 << 20) / (float)(1 << 20);
                memcpy((char *)h + k * 4, &f, 4);
            }
        }
        bufs[i].bytes = n * es;
        CK(d_cuMemAlloc(&bufs[i].base, n * es));
        bufs[i].ptr = bufs[i].base;
        CK(d_cuMemcpyHtoD(bufs[i].ptr, h, n * es));
        hin[i] = h;
    }
    const size_t nout = (size_t)tuner_tensor_numel(&op->output);
    CK(d_cuMemAlloc(&bufs[TUNER_BUF_OUTPUT].base, nout * 4));
    bufs[TUNER_BUF_OUTPUT].ptr = bufs[TUNER_BUF_OUTPUT].base;
    CK(d_cuMemsetD8(bufs[TUNER_BUF_OUTPUT].ptr, 0xff, nout * 4)); /* NaN: every element must be written */
    CUstream st;
    CK(d_cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CUmodule rmod;
    CK(load_module(&rmod, refbin));
    launch_program(rmod, ref, bufs, st);
    CK(d_cuStreamSynchronize(st));
    float *refh = malloc(nout * 4);
    CK(d_cuMemcpyDtoH(refh, bufs[TUNER_BUF_OUTPUT].ptr, nout * 4));

    /* The host's output in the output's layout. */
    double *host = calloc(nout, sizeof(double));
    double *sc = malloc((size_t)d.skv * sizeof(double));
    const double scale = (double)(float)op->attrs.attention.scale;
    /* packed: q, k and v are head ranges of qkv (inputs[0], [B,S,Hq+2Hkv,D]), the mask inputs[1] */
    const bool packed = op->attrs.attention.packed;
    const int mi = tuner_attention_mask_input(op);
    const long long h3 = d.hq + 2 * d.hkv;
    const tuner_tensor *q = &op->inputs[0], *k = &op->inputs[packed ? 0 : 1], *v = &op->inputs[packed ? 0 : 2];
    const void *hk_in = hin[packed ? 0 : 1], *hv_in = hin[packed ? 0 : 2];
    long long empty = 0, partial = 0;
    for (long long b = 0; b < d.b; b++)
        for (long long h = 0; h < d.hq; h++)
            for (long long i = 0; i < d.s; i++) {
                const long long hk = h / d.group;
                /* orow: the output's row (q's, except in the packed layout) */
                const size_t orow = bshd ? (size_t)(((b * d.s + i) * d.hq + h) * d.d)
                                         : (size_t)(((b * d.hq + h) * d.s + i) * d.d);
                const size_t qrow = packed ? (size_t)(((b * d.s + i) * h3 + h) * d.d) : orow;
                double mx = -INFINITY;
                long long seen = 0;
                for (long long j = 0; j < d.skv; j++) {
                    sc[j] = -INFINITY;
                    if (causal && j > i + d.skv - d.s)
                        continue;
                    const size_t krow = packed ? (size_t)(((b * d.skv + j) * h3 + d.hq + hk) * d.d)
                                        : bshd ? (size_t)(((b * d.skv + j) * d.hkv + hk) * d.d)
                                               : (size_t)(((b * d.hkv + hk) * d.skv + j) * d.d);
                    double dot = 0;
                    for (long long c = 0; c < d.d; c++)
                        dot += (double)t_host_get(q->dtype, hin[0], qrow + (size_t)c) *
                               (double)t_host_get(k->dtype, hk_in, krow + (size_t)c);
                    double s_ = scale * dot;
                    if (d.has_mask) {
                        const long long crd[4] = {b, h, i, j};
                        s_ += (double)t_host_get(op->inputs[mi].dtype, hin[mi], attn_mask_offset(&op->inputs[mi], crd));
                    }
                    sc[j] = s_;
                    if (s_ > mx)
                        mx = s_;
                    seen += s_ != -INFINITY;
                }
                if (seen == 0)
                    empty++;
                else if (seen < d.skv)
                    partial++;
                for (long long c = 0; c < d.d; c++) {
                    double l = 0, acc = 0;
                    if (seen > 0)
                        for (long long j = 0; j < d.skv; j++) {
                            if (sc[j] == -INFINITY)
                                continue;
                            const size_t vrow = packed ? (size_t)(((b * d.skv + j) * h3 + d.hq + d.hkv + hk) * d.d)
                                                : bshd ? (size_t)(((b * d.skv + j) * d.hkv + hk) * d.d)
                                                       : (size_t)(((b * d.hkv + hk) * d.skv + j) * d.d);
                            const double e = exp(sc[j] - mx);
                            l += e;
                            acc += e * (double)t_host_get(v->dtype, hv_in, vrow + (size_t)c);
                        }
                    double o = seen > 0 ? acc / l : 0.0;
                    for (int s_ = 0; s_ < op->epilogue.n; s_++) {
                        const tuner_ew_step *stp = &op->epilogue.steps[s_];
                        if (stp->kind == TUNER_EW_SCALE)
                            o *= stp->scalar;
                        else /* an add of an output-shaped operand */
                            o += (double)t_host_get(op->inputs[stp->operand].dtype, hin[stp->operand],
                                                    orow + (size_t)c);
                    }
                    host[orow + (size_t)c] = o;
                }
            }
    double rms = 0;
    for (size_t e = 0; e < nout; e++)
        rms += host[e] * host[e];
    rms = sqrt(rms / (double)nout);
    long long bad = 0, zero_bad = 0, first = -1;
    double worst = 0;
    for (size_t e = 0; e < nout; e++) {
        const double diff = fabs((double)refh[e] - host[e]);
        if (!(diff <= 1e-4 * (rms + fabs(host[e])))) {
            if (first < 0)
                first = (long long)e;
            bad++;
        }
        if (host[e] == 0.0 && op->epilogue.n == 0 && refh[e] != 0.0f)
            zero_bad++;
        if (diff > worst || isnan(diff))
            worst = isnan(diff) ? INFINITY : diff;
    }
    printf("%-40s reference vs host fp64: %lld rows with no key, %lld partly masked, %lld of %zu differ "
           "(worst %.1e, rms %.2f)%s\n",
           name, empty, partial, bad + zero_bad, nout, worst, rms, bad || zero_bad ? " - WRONG" : "");
    if (bad || zero_bad) {
        if (first >= 0)
            printf("    first at %lld: reference %g, host %g\n", first, (double)refh[first], host[first]);
        total_wrong++;
    }
    if (want_empty && !empty) {
        printf("    the case has no row without a key: the 0 rule was not exercised\n");
        total_wrong++;
    }
    if (d.has_mask && !partial) {
        printf("    no row was partly masked\n");
        total_wrong++;
    }
    free(sc);
    free(host);
    free(refh);
    for (int i = 0; i < op->n_inputs; i++)
        free(hin[i]);
    CK(d_cuModuleUnload(rmod));
    CK(d_cuStreamDestroy(st));
    for (int i = 0; i <= TUNER_BUF_WORKSPACE; i++)
        if (bufs[i].base)
            CK(d_cuMemFree(bufs[i].base));
    tuner_program_free(ref);
    tuner_binary_free(refbin);
}

/* Set for the masked softmax cases: input 0 holds runs of -inf in every row (keys [D/3, D) of the
 * even rows, [0, 2D/3) of the odd ones), as an additive padding mask leaves the scores. Threads,
 * and whole chunks of a split row, then see only -inf: the streaming kernels' online sum once
 * made NaN of that (exp(-inf + inf)). */
static bool ninf_runs;

static void verify_case(const char *name, const tuner_op *op, const tuner_target *t, int threads)
{
    tuner_space *sp = NULL;
    char *err = NULL;
    if (tuner_space_build(op, t, &sp, &err) < 0) {
        printf("%-40s space error: %s\n", name, err ? err : "?");
        free(err);
        total_wrong++;
        return;
    }
    jobs = gpu_jobs_pick(op, t, sp, case_max, false, &n_jobs);
    gpu_jobs_compile(jobs, n_jobs, threads);

    tuner_program *ref = NULL;
    tuner_binary *refbin = NULL;
    if (tuner_reference(op, t, &ref, &err) < 0 || tuner_compile(ref->source, t, &refbin, &err) < 0) {
        printf("%-40s reference error: %s\n", name, err ? err : "?");
        exit(2);
    }

    /* Buffers: inputs (random exact values), output, reference output, workspace. */
    devbuf bufs[TUNER_BUF_WORKSPACE + 1];
    memset(bufs, 0, sizeof(bufs));
    void *hin[TUNER_MAX_INPUTS] = {NULL};
    for (int i = 0; i < op->n_inputs; i++) {
        const tuner_tensor *x = &op->inputs[i];
        size_t n = (size_t)tuner_tensor_numel(x), es = (size_t)tuner_dtype_size(x->dtype);
        /* Really misaligned when the op says so (by one element: an f32 is never below 4 bytes). */
        size_t off = x->align < 16 ? es : 0;
        void *h = malloc(n * es);
        for (size_t k = 0; k < n; k++) {
            if (tuner_dtype_is_int(x->dtype)) {
                /* gather's ids: uniform over [-N, N) (negative ones count from the end), every 7th
                 * negative for sure and every 7th past one end or the other (the kernels give 0
                 * there); a cast's input: small integers. */
                long long v = t_rnd_int(-2, 2);
                if (op->kind == TUNER_OP_GATHER && i == 1) {
                    const long long N = op->inputs[0].shape[op->attrs.gather.axis];
                    if (k % 7 == 3)
                        v = k % 2 ? N + (long long)(k % 5) : -N - 1 - (long long)(k % 5);
                    else if (k % 7 == 1)
                        v = -1 - (long long)(k % (size_t)N); /* in [-N, -1] */
                    else
                        v = t_rnd_int(-(int)N, (int)N - 1);
                }
                if (x->dtype == TUNER_I64) {
                    const int64_t w = v;
                    memcpy((char *)h + k * 8, &w, 8);
                } else {
                    const int32_t w = (int32_t)v;
                    memcpy((char *)h + k * 4, &w, 4);
                }
            } else if (tuner_dtype_is_fp8(x->dtype)) {
                /* Any finite byte of magnitude <= 2: both signs, subnormals, every mantissa. */
                uint8_t b;
                do
                    b = (uint8_t)t_rnd_int(0, 255);
                while (!(fabsf(tuner_fp8_to_f32(x->dtype, b)) <= 2.0f));
                ((uint8_t *)h)[k] = b;
            } else if (x->dtype == TUNER_F16) {
                t_host_put(x->dtype, h, k, (float)t_rnd_int(-1024, 1024) / 1024.0f);
            } else if (x->dtype == TUNER_BF16) {
                t_host_put(x->dtype, h, k, (float)t_rnd_int(-128, 128) / 128.0f);
            } else {
                t_host_put(TUNER_F32, h, k, (float)t_rnd_int(-(1 << 20), 1 << 20) / (float)(1 << 20));
            }
        }
        if (ninf_runs && i == 0) {
            const size_t D = (size_t)x->shape[x->rank - 1];
            for (size_t k = 0; k < n; k++) {
                const size_t row = k / D, col = k % D;
                if (row % 2 == 0 ? col >= D / 3 : col < 2 * D / 3)
                    t_host_put(x->dtype, h, k, -INFINITY);
            }
        }
        bufs[i].bytes = n * es;
        CK(d_cuMemAlloc(&bufs[i].base, n * es + 16));
        bufs[i].ptr = bufs[i].base + off;
        CK(d_cuMemcpyHtoD(bufs[i].ptr, h, n * es));
        hin[i] = h;
    }
    size_t nout = (size_t)tuner_tensor_numel(&op->output);
    size_t oes = (size_t)tuner_dtype_size(op->output.dtype);
    CK(d_cuMemAlloc(&bufs[TUNER_BUF_OUTPUT].base, nout * 4 + 16));
    bufs[TUNER_BUF_OUTPUT].ptr = bufs[TUNER_BUF_OUTPUT].base;
    size_t ws_max = 16;
    for (size_t i = 0; i < n_jobs; i++)
        if (jobs[i].prog && jobs[i].prog->workspace_bytes > ws_max)
            ws_max = jobs[i].prog->workspace_bytes;
    CK(d_cuMemAlloc(&bufs[TUNER_BUF_WORKSPACE].base, ws_max));
    bufs[TUNER_BUF_WORKSPACE].ptr = bufs[TUNER_BUF_WORKSPACE].base;

    CUstream st;
    CK(d_cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CUmodule rmod;
    CK(load_module(&rmod, refbin));
    /* The quantize step's amax (an FP8 matmul's, tuner_fp8_amax_input): its f32 buffer zeroed
     * before each launch, as its callers do, and read back after it. */
    const int amax_in = op->kind == TUNER_OP_MATMUL ? tuner_fp8_amax_input(op) : -1;
    float ref_amax = 0.0f;
    if (amax_in >= 0)
        CK(d_cuMemsetD8(bufs[amax_in].ptr, 0, 4));
    launch_program(rmod, ref, bufs, st);
    CK(d_cuStreamSynchronize(st));
    if (amax_in >= 0) {
        CK(d_cuMemcpyDtoH(&ref_amax, bufs[amax_in].ptr, 4));
        if (!(ref_amax > 0.0f)) {
            printf("  WRONG reference amax %g (the output has nonzero values)\n", (double)ref_amax);
            total_wrong++;
        }
    }
    float *refh = malloc(nout * 4);
    CK(d_cuMemcpyDtoH(refh, bufs[TUNER_BUF_OUTPUT].ptr, nout * 4));
    double rms = 0;
    for (size_t k = 0; k < nout; k++)
        rms += (double)refh[k] * refh[k];
    rms = sqrt(rms / (double)nout);
    if (op->kind == TUNER_OP_GATHER)
        host_check_gather(name, op, hin, refh);
    for (int i = 0; i < op->n_inputs; i++)
        free(hin[i]);
    double rtol = op->output.dtype == TUNER_F32 ? 2e-5 : op->output.dtype == TUNER_F16 ? 2e-3 : 1.6e-2;
    double atol = op->output.dtype == TUNER_F32 ? 2e-5 : op->output.dtype == TUNER_F16 ? 2e-3 : 1.6e-2;
    /* FP8: what its accumulation may lose (op/op.h), and a quantized output rounded to the
     * reference code's neighbour - near zero, the subnormals' step of rms's scale. */
    rtol += tuner_fp8_accum_loss(op) + tuner_fp8_step(op->output.dtype);
    atol += tuner_fp8_accum_loss(op) + (tuner_dtype_is_fp8(op->output.dtype) ? 0.02 : 0.0);

    unsigned char *outh = malloc(nout * oes);
    int ok = 0, wrong = 0, failed = 0;
    double worst = 0;
    char worst_s[256] = "";
    for (size_t i = 0; i < n_jobs; i++) {
        gpu_job *j = &jobs[i];
        if (!j->bin) {
            failed++;
            printf("  compile failed: %s\n", j->err ? j->err : "?");
            continue;
        }
        CUmodule mod;
        CK(load_module(&mod, j->bin));
        CK(d_cuMemsetD8(bufs[TUNER_BUF_OUTPUT].ptr, 0xff, nout * oes));
        CK(d_cuMemsetD8(bufs[TUNER_BUF_WORKSPACE].ptr, 0, ws_max));
        if (amax_in >= 0)
            CK(d_cuMemsetD8(bufs[amax_in].ptr, 0, 4));
        launch_program(mod, j->prog, bufs, st);
        CK(d_cuStreamSynchronize(st));
        CK(d_cuMemcpyDtoH(outh, bufs[TUNER_BUF_OUTPUT].ptr, nout * oes));
        double maxerr = 0;
        size_t bad = 0, first_bad = 0;
        /* The amax: the largest |value| the cast receives, within what the sums may lose (the
         * accumulation's share of the largest value) and 2% for the rest (the scales' and the
         * chain's rounding). */
        float amax = 0.0f;
        bool amax_bad = false;
        if (amax_in >= 0) {
            CK(d_cuMemcpyDtoH(&amax, bufs[amax_in].ptr, 4));
            amax_bad = !(fabs((double)amax - ref_amax) <= (0.02 + tuner_fp8_accum_loss(op)) * ref_amax);
        }
        for (size_t k = 0; k < nout; k++) {
            float v;
            if (op->output.dtype == TUNER_F32)
                memcpy(&v, outh + k * 4, 4);
            else if (tuner_dtype_is_fp8(op->output.dtype))
                v = tuner_fp8_to_f32(op->output.dtype, outh[k]);
            else {
                uint16_t h;
                memcpy(&h, outh + k * 2, 2);
                v = op->output.dtype == TUNER_F16 ? t_f16_to_f32(h) : t_bf16_to_f32(h);
            }
            /* Equal values (infinities too: a max over -inf inputs) are no error. */
            double d = (double)v == refh[k] ? 0.0 : fabs((double)v - refh[k]);
            /* f16 subnormals (below 6.1e-5) are spaced 2^-24 apart: allow one spacing. */
            double floor_ = op->output.dtype == TUNER_F16 ? 5.97e-8 : 0.0;
            if (!(d <= atol * rms + rtol * fabs(refh[k]) + floor_)) {
                if (!bad)
                    first_bad = k;
                bad++;
            }
            if (d > maxerr || isnan(d))
                maxerr = isnan(d) ? INFINITY : d;
        }
        /* Time it: 3 warm-up launches, then the median of 15 event-timed launches. */
        {
            CUevent e0, e1;
            CK(d_cuEventCreate(&e0, 0));
            CK(d_cuEventCreate(&e1, 0));
            for (int w = 0; w < 3; w++)
                launch_program(mod, j->prog, bufs, st);
            double ts[15];
            for (int rep = 0; rep < 15; rep++) {
                CK(d_cuEventRecord(e0, st));
                launch_program(mod, j->prog, bufs, st);
                CK(d_cuEventRecord(e1, st));
                CK(d_cuEventSynchronize(e1));
                float ms = 0;
                CK(d_cuEventElapsedTime(&ms, e0, e1));
                ts[rep] = ms * 1000.0;
            }
            j->measured_us = t_median(ts, 15);
            CK(d_cuEventDestroy(e0));
            CK(d_cuEventDestroy(e1));
        }
        char *sj = tuner_schedule_json(j->s);
        if (getenv("HIDET_VERIFY_TIMES")) /* every candidate's time beside the model's */
            printf("    %8.2f us (model %8.2f) %s\n", j->measured_us, tuner_predict_us(op, t, j->s), sj ? sj : "?");
        if (amax_bad) {
            printf("  WRONG amax %s: %g vs ref %g\n", sj ? sj : "?", (double)amax, (double)ref_amax);
            if (!bad)
                wrong++;
        }
        if (bad) {
            wrong++;
            float v0;
            if (op->output.dtype == TUNER_F32)
                memcpy(&v0, outh + first_bad * 4, 4);
            else if (tuner_dtype_is_fp8(op->output.dtype))
                v0 = tuner_fp8_to_f32(op->output.dtype, outh[first_bad]);
            else {
                uint16_t h;
                memcpy(&h, outh + first_bad * 2, 2);
                v0 = op->output.dtype == TUNER_F16 ? t_f16_to_f32(h) : t_bf16_to_f32(h);
            }
            printf("  WRONG %s: %zu/%zu bad, first at %zu: %g vs ref %g\n", sj ? sj : "?", bad, nout, first_bad,
                   (double)v0, (double)refh[first_bad]);
        } else if (!amax_bad) {
            ok++;
        }
        double rel = maxerr / (rms > 0 ? rms : 1);
        if (rel > worst) {
            worst = rel;
            snprintf(worst_s, sizeof(worst_s), "%s", sj ? sj : "?");
        }
        free(sj);
        CK(d_cuModuleUnload(mod));
    }
    /* Cost model check: measured time of the model's pick and of the default vs. the best. */
    double best_us = 1e30, model_us = 0, def_us = 0, model_pred = 1e30;
    size_t def = tuner_default_index(op, t, sp);
    double cms[4096];
    int ncms = 0;
    for (size_t i = 0; i < n_jobs; i++) {
        gpu_job *j = &jobs[i];
        if (j->bin && ncms < 4096)
            cms[ncms++] = j->bin->compile_ms;
        if (!j->bin || j->measured_us <= 0)
            continue;
        if (j->measured_us < best_us)
            best_us = j->measured_us;
        double pr = tuner_predict_us(op, t, j->s);
        if (pr < model_pred) {
            model_pred = pr;
            model_us = j->measured_us;
        }
        if (j->s == &sp->items[def])
            def_us = j->measured_us;
    }
    double cmed = t_median(cms, ncms);
    printf("%-40s %3zu cand: ok %3d wrong %2d failed %2d  err/rms %.1e | us best %7.2f model %7.2f default %7.2f | "
           "nvrtc med %.0f ms\n",
           name, n_jobs, ok, wrong, failed, worst, best_us, model_us, def_us, cmed);
    fflush(stdout);
    total_wrong += wrong + failed;
    CK(d_cuModuleUnload(rmod));
    CK(d_cuStreamDestroy(st));
    for (int i = 0; i <= TUNER_BUF_WORKSPACE; i++)
        if (bufs[i].base)
            CK(d_cuMemFree(bufs[i].base));
    free(outh);
    free(refh);
    gpu_jobs_free(jobs, n_jobs);
    tuner_program_free(ref);
    tuner_binary_free(refbin);
    tuner_space_free(sp);
}

int main(void)
{
    CUdevice dev;
    int major, minor;
    if (!gpu_driver_first_device(true, &dev, &major, &minor))
        return 77;
    gpu_driver_use(dev);
    tuner_target t = {major * 10 + minor, false};
    if (t.sm > 90)
        t.sm = 90; /* run sm_90 code on newer parts */
    const int device_sm = major * 10 + minor;
    int threads = 16;
    printf("device sm_%d\n", t.sm);
    /* FP8 matmuls: sm_90a's templates on a Hopper part, the device's own mma.sync ones on Ada. */
    tuner_target fp8_t = major == 9 ? (tuner_target){90, true} : t;
    const char *arch = getenv("HIDET_VERIFY_ARCH");
    if (arch) {
        if (tuner_target_parse(arch, &t) < 0) {
            fprintf(stderr, "HIDET_VERIFY_ARCH=%s: not a target (sm_80 .. sm_120)\n", arch);
            return 2;
        }
        fp8_t = t;
        load_ptx = t.sm != device_sm;
        printf("code for %s%s\n", arch, load_ptx ? ", loaded as PTX (the driver compiles it for the device)" : "");
        if (t.sm > device_sm || (t.arch_specific && t.sm != device_sm)) {
            fprintf(stderr, "HIDET_VERIFY_ARCH=%s: the device (sm_%d) cannot run that target's code\n", arch, device_sm);
            return 2;
        }
    }
    t_rng_state = 12345;

    static const tuner_dtype dts[3] = {TUNER_F16, TUNER_BF16, TUNER_F32};
    const char *only = getenv("HIDET_VERIFY_ONLY");
    char name[128];
    for (int di = 0; di < 3; di++) {
        tuner_dtype dt = dts[di];
        const char *dn = tuner_dtype_name(dt);
        tuner_op op;
#define CASE(label, expr)                                                                          \
    do {                                                                                           \
        snprintf(name, sizeof(name), "%s %s", label, dn);                                          \
        if (only && !strstr(name, only))                                                           \
            break;                                                                                 \
        op = (expr);                                                                               \
        verify_case(name, &op, &t, threads);                                                       \
    } while (0)
        CASE("softmax 77x1000", t_softmax(dt, 77, 1000, 16));
        CASE("softmax 5x77 align2", t_softmax(dt, 5, 77, 2));
        CASE("softmax 3x65537 align2", t_softmax(dt, 3, 65537, 2));
        CASE("softmax 2x131072", t_softmax(dt, 2, 131072, 16));
        CASE("softmax 1000x4096", t_softmax(dt, 1000, 4096, 16));
        ninf_runs = true;
        CASE("softmax 77x1000 -inf runs", t_softmax(dt, 77, 1000, 16));
        CASE("softmax 5x77 align2 -inf runs", t_softmax(dt, 5, 77, 2));
        CASE("softmax 2x131072 -inf runs", t_softmax(dt, 2, 131072, 16));
        ninf_runs = false;
        {
            snprintf(name, sizeof(name), "softmax 64x1000 *scale+cast %s", dn);
            if (!only || strstr(name, only)) {
                op = t_softmax(dt, 64, 1000, 16);
                long long s[2] = {64, 1};
                t_add_epilogue(&op, TUNER_EW_MUL, 2, s, TUNER_EW_SCALE);
                verify_case(name, &op, &t, threads);
            }
        }
        {
            snprintf(name, sizeof(name), "layernorm 77x1000 +res gelu %s", dn);
            if (!only || strstr(name, only)) {
                op = t_layernorm(dt, 77, 1000, 16, true);
                long long s[2] = {77, 1000};
                t_add_epilogue(&op, TUNER_EW_ADD, 2, s, TUNER_EW_GELU_ERF);
                verify_case(name, &op, &t, threads);
            }
        }
        CASE("layernorm 333x77", t_layernorm(dt, 333, 77, 16, false));
        CASE("layernorm 100x768 align2", t_layernorm(dt, 100, 768, 2, true));
        CASE("layernorm 8x65536", t_layernorm(dt, 8, 65536, 16, true));
        CASE("rmsnorm 77x4096", t_rmsnorm(dt, 77, 4096, 16, true));
        CASE("rmsnorm 513x1000 align2", t_rmsnorm(dt, 513, 1000, 2, false));
        CASE("rmsnorm 4x100000", t_rmsnorm(dt, 4, 100000, 16, true));
        {
            long long s3[3] = {7, 333, 1000};
            CASE("reduce sum [7,333,1000] ax2", t_reduce(dt, 3, s3, 2, TUNER_REDUCE_SUM, false, 16));
            CASE("reduce mean [7,333,1000] ax1 keep", t_reduce(dt, 3, s3, 1, TUNER_REDUCE_MEAN, true, 16));
            CASE("reduce max [7,333,1000] ax0 align2", t_reduce(dt, 3, s3, 0, TUNER_REDUCE_MAX, false, 2));
            long long s2[2] = {5, 300001};
            CASE("reduce max [5,300001] ax1", t_reduce(dt, 2, s2, 1, TUNER_REDUCE_MAX, false, 16));
            long long s1[1] = {1 << 20};
            CASE("reduce mean [1M]", t_reduce(dt, 1, s1, 0, TUNER_REDUCE_MEAN, false, 16));
            long long s4[4] = {3, 17, 5, 9};
            CASE("reduce sum [3,17,5,9] ax1", t_reduce(dt, 4, s4, 1, TUNER_REDUCE_SUM, true, 16));
            long long s5[2] = {100000, 64}, s6[3] = {3, 20001, 40};
            CASE("reduce sum [100000,64] ax0", t_reduce(dt, 2, s5, 0, TUNER_REDUCE_SUM, false, 16));
            CASE("reduce max [3,20001,40] ax1 keep", t_reduce(dt, 3, s6, 1, TUNER_REDUCE_MAX, true, 16));
        }
        CASE("elementwise 77x1000 +b gelu", t_elementwise(dt, 77, 1000, 16));
        /* Large shapes: where the cost model's ranking matters. */
        CASE("softmax 8192x4096", t_softmax(dt, 8192, 4096, 16));
        CASE("layernorm 16384x1024", t_layernorm(dt, 16384, 1024, 16, true));
        CASE("rmsnorm 4096x8192", t_rmsnorm(dt, 4096, 8192, 16, true));
        CASE("elementwise 4096x4096 +b gelu", t_elementwise(dt, 4096, 4096, 16));
        {
            long long sb[3] = {64, 512, 1024};
            CASE("reduce sum [64,512,1024] ax1", t_reduce(dt, 3, sb, 1, TUNER_REDUCE_SUM, false, 16));
            CASE("reduce sum [64,512,1024] ax2", t_reduce(dt, 3, sb, 2, TUNER_REDUCE_SUM, false, 16));
        }
        CASE("elementwise 77x1000 align2", t_elementwise(dt, 77, 1000, 2));
        {
            /* gather: candidates against the reference, the reference against the host
             * (host_check_gather), with negative and out-of-range ids. */
            const long long emb[2] = {30522, 768}, ids[2] = {8, 128}, pos[2] = {128, 768};
            snprintf(name, sizeof(name), "gather emb 30522x768 ids 8x128 +pos %s", dn);
            if (!only || strstr(name, only)) {
                op = t_gather(dt, 2, emb, 0, TUNER_I64, 2, ids);
                op.inputs[op.n_inputs] = t_tensor(dt, 2, pos, 16);
                op.epilogue.steps[op.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_ADD, .operand = op.n_inputs++};
                verify_case(name, &op, &t, threads);
            }
            CASE("gather emb 30522x768 i32 ids 8x128", t_gather(dt, 2, emb, 0, TUNER_I32, 2, ids));
            const long long big[2] = {64, 512};
            CASE("gather emb 30522x768 ids 64x512", t_gather(dt, 2, emb, 0, TUNER_I64, 2, big));
            const long long small[2] = {50, 24}, many[1] = {1000};
            snprintf(name, sizeof(name), "gather 50x24 ids 1000 *2 %s", dn);
            if (!only || strstr(name, only)) {
                op = t_gather(dt, 2, small, 0, TUNER_I64, 1, many);
                op.epilogue.steps[op.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_SCALE, .operand = -1, .scalar = 2.0};
                verify_case(name, &op, &t, threads);
            }
            const long long x3[3] = {4, 10, 37}, i1[1] = {5}, x4[4] = {3, 11, 5, 7}, i2[2] = {2, 3};
            CASE("index_select 4x10x37 last axis", t_gather(dt, 3, x3, 2, TUNER_I64, 1, i1));
            CASE("gather 3x11x5x7 axis 1 index 2x3 i32", t_gather(dt, 4, x4, 1, TUNER_I32, 2, i2));
            const long long mask[4] = {8, 1, 1, 128};
            CASE("elementwise i64 mask cast", t_int_cast(TUNER_I64, dt, 4, mask));
        }
        {
            /* pool2d: every kind and layout against the reference (tuner/reference.c). */
            const int k3[2] = {3, 3}, k2[2] = {2, 2}, k31[2] = {3, 1};
            CASE("pool max 2x112x112x64 3x3 s2 p1", t_pool(dt, TUNER_POOL_MAX, false, 2, 64, 112, 112, k3, 2, 1, 1, false, 0, 0));
            CASE("pool avg nchw 2x24x35x35 3x3 s2 p1 ceil",
                 t_pool(dt, TUNER_POOL_AVG, true, 2, 24, 35, 35, k3, 2, 1, 1, true, 0, 0));
            snprintf(name, sizeof(name), "pool avg 1x5x5x16 2x2 p1 ceil excl-pad %s", dn);
            if (!only || strstr(name, only)) {
                op = t_pool(dt, TUNER_POOL_AVG, false, 1, 16, 5, 5, k2, 2, 1, 1, true, 0, 0);
                op.attrs.pool2d.count_include_pad = false;
                verify_case(name, &op, &t, threads);
            }
            /* Padding 0: the validator (like PyTorch) refuses more than half the kernel, 1 wide here. */
            CASE("pool max 1x17x19x13 3x1 d2 ceil", t_pool(dt, TUNER_POOL_MAX, false, 1, 13, 17, 19, k31, 2, 0, 2, true, 0, 0));
            CASE("pool global avg 4x7x7x2048", t_pool(dt, TUNER_POOL_ADAPTIVE_AVG, false, 4, 2048, 7, 7, NULL, 0, 0, 0, false, 1, 1));
            CASE("pool adaptive avg nchw 2x8x17x10->5x3",
                 t_pool(dt, TUNER_POOL_ADAPTIVE_AVG, true, 2, 8, 17, 10, NULL, 0, 0, 0, false, 5, 3));
        }
        {
            /* issue 37's shape ops: reduces over consecutive axes (column and row kernels),
             * log_softmax (cached, streaming, split), padded and expanding copies. */
            long long nhwc[4] = {4, 7, 7, 256}, nchw[4] = {4, 64, 7, 7};
            CASE("reduce mean [4,7,7,256] ax1-2", t_reduce_axes(dt, 4, nhwc, 1, 2, TUNER_REDUCE_MEAN, false, 16));
            CASE("reduce max [4,64,7,7] ax2-3 keep", t_reduce_axes(dt, 4, nchw, 2, 2, TUNER_REDUCE_MAX, true, 16));
            const long long sizes[3][2] = {{77, 1000}, {5, 70001}, {2, 131072}};
            for (int k = 0; k < 3; k++) {
                snprintf(name, sizeof(name), "log_softmax %lldx%lld %s", sizes[k][0], sizes[k][1], dn);
                if (!only || strstr(name, only)) {
                    op = t_softmax(dt, sizes[k][0], sizes[k][1], 16);
                    op.attrs.softmax.log = true;
                    verify_case(name, &op, &t, threads);
                }
            }
            const long long lo[2] = {1, 3}, hi[2] = {2, 0};
            CASE("copy pad [50,61] (1,3)(2,0) -0.5", t_pad2(dt, 50, 61, lo, hi, -0.5));
            CASE("copy expand [1,130] -> [9,1,130]", t_expand2(dt, 9, 130));
        }
        CASE("copy transpose [33,65,129] +b relu", t_transpose3(dt, 33, 65, 129));
        CASE("copy slice [1000,77] rows 3.. step 2", t_slice2(dt, 1000, 77, 3, 500, 2));
        {
            long long d3[3] = {5, 1, 17};
            CASE("concat [7,{5,1,17},33] ax1 silu", t_concat3(dt, 7, d3, 33));
        }
        {
            snprintf(name, sizeof(name), "elementwise bcast [8,1,64]x[33,1] %s", dn);
            if (!only || strstr(name, only)) {
                memset(&op, 0, sizeof(op));
                op.kind = TUNER_OP_ELEMENTWISE;
                long long a[3] = {8, 1, 64}, b[2] = {33, 1}, o[3] = {8, 33, 64};
                op.inputs[0] = t_tensor(dt, 3, a, 16);
                op.n_inputs = op.n_anchor_inputs = 1;
                op.output = t_tensor(dt, 3, o, 16);
                t_add_epilogue(&op, TUNER_EW_SUB, 2, b, TUNER_EW_SIGMOID);
                t_add_epilogue(&op, TUNER_EW_MAX, 3, o, TUNER_EW_TANH);
                t_add_epilogue(&op, TUNER_EW_MIN, 1, (long long[]){64}, TUNER_EW_SILU);
                verify_case(name, &op, &t, threads);
            }
        }
    }
    if (tuner_fp8_target(&fp8_t)) {
        /* FP8 matmuls (issue 41) on sm_90a (matmul_wgmma and matmul_mma), or on the target that
         * HIDET_VERIFY_ARCH names or an Ada device has (matmul_mma): every pair of formats, every
         * scale kind, epilogues, a batch with edge tiles in M, N and K, a decode shape (split-K
         * in clusters or the workspace, N pairs), and a large square one (stream-K, pingpong,
         * pairs). */
        const tuner_target fp8_target = fp8_t;
        const char *fmax = getenv("HIDET_VERIFY_FP8_MAX");
        case_max = fmax ? (size_t)atoi(fmax) : 12;
        const tuner_dtype E4 = TUNER_F8E4M3, E5 = TUNER_F8E5M2;
        const struct {
            const char *label;
            tuner_op op;
        } f8[] = {
            {"fp8 e4m3 tensor 512x1024x2048 bf16",
             t_fp8_matmul(E4, E4, TUNER_BF16, 0, 512, 1024, 2048, TUNER_SCALE_TENSOR, TUNER_SCALE_TENSOR, false)},
            {"fp8 e4m3xe5m2 row/col 200x328x1040 f16 +bias gelu",
             t_fp8_matmul(E4, E5, TUNER_F16, 0, 200, 328, 1040, TUNER_SCALE_ROW, TUNER_SCALE_COL, true)},
            {"fp8 e5m2xe4m3 b2 130x256x4096 col f32",
             t_fp8_matmul(E5, E4, TUNER_F32, 2, 130, 256, 4096, TUNER_SCALE_NONE, TUNER_SCALE_COL, false)},
            {"fp8 e4m3 decode 16x8192x8192 tensor bf16",
             t_fp8_matmul(E4, E4, TUNER_BF16, 0, 16, 8192, 8192, TUNER_SCALE_TENSOR, TUNER_SCALE_TENSOR, false)},
            {"fp8 e4m3 4096x4096x4096 row/col bf16",
             t_fp8_matmul(E4, E4, TUNER_BF16, 0, 4096, 4096, 4096, TUNER_SCALE_ROW, TUNER_SCALE_COL, false)},
            {"fp8 e4m3 promoted 300x520x8192 tensor f32", t_fp8_promoted(t_fp8_matmul(
                 E4, E4, TUNER_F32, 0, 300, 520, 8192, TUNER_SCALE_TENSOR, TUNER_SCALE_TENSOR, false))},
            {"fp8 e4m3 4096x3072x4096 +bias gelu /s quantize e4m3", t_fp8_quantized(t_fp8_matmul(
                 E4, E4, TUNER_BF16, 0, 4096, 3072, 4096, TUNER_SCALE_TENSOR, TUNER_SCALE_TENSOR, true))},
            {"fp8 e4m3 1000x1000x2048 row/col +bias gelu /s quantize e4m3 amax", t_fp8_quantized_amax(t_fp8_matmul(
                 E4, E4, TUNER_BF16, 0, 1000, 1000, 2048, TUNER_SCALE_ROW, TUNER_SCALE_COL, true))},
            {"fp8 e4m3 block 1000x704x1040 bf16 +bias gelu",
             t_fp8_matmul(E4, E4, TUNER_BF16, 0, 1000, 704, 1040, TUNER_SCALE_BLOCK, TUNER_SCALE_BLOCK, true)},
            {"fp8 e4m3 block 4096x7168x7168 bf16",
             t_fp8_matmul(E4, E4, TUNER_BF16, 0, 4096, 7168, 7168, TUNER_SCALE_BLOCK, TUNER_SCALE_BLOCK, false)},
        };
        char why[320];
        for (size_t i = 0; i < sizeof(f8) / sizeof(f8[0]); i++)
            if (!only || strstr(f8[i].label, only)) {
                /* (the quantize step's amax is sm_90a's: HIDET_VERIFY_ARCH=sm_89 skips it) */
                if (tuner_fp8_unsupported(&f8[i].op, &fp8_target, why, sizeof(why))) {
                    printf("%-40s skipped: %s\n", f8[i].label, why);
                    continue;
                }
                verify_case(f8[i].label, &f8[i].op, &fp8_target, threads);
            }
        /* MN-major operands, transposed in matmul_wgmma's kernel (sm_90a only; mma.sync refuses
         * them): B [K,N] with row/col scales and edges, A [K,M] with a quantizing epilogue, both
         * under a batch, and per-block scales with promotion. */
        const struct {
            const char *label;
            tuner_op op;
        } mn[] = {
            {"fp8 mn B[K,N] e4m3 row/col 200x384x1040 f16 +bias gelu",
             t_fp8_mn(t_fp8_matmul(E4, E4, TUNER_F16, 0, 200, 384, 1040, TUNER_SCALE_ROW, TUNER_SCALE_COL, true), false,
                      true)},
            {"fp8 mn A[K,M] e4m3xe5m2 4096x3072x4096 /s quantize e4m3 amax",
             t_fp8_mn(t_fp8_quantized_amax(t_fp8_matmul(E4, E5, TUNER_BF16, 0, 4096, 3072, 4096, TUNER_SCALE_TENSOR,
                                                   TUNER_SCALE_TENSOR, true)),
                      true, false)},
            {"fp8 mn A[K,M] B[K,N] e5m2xe4m3 b2 272x512x2048 f32",
             t_fp8_mn(t_fp8_matmul(E5, E4, TUNER_F32, 2, 272, 512, 2048, TUNER_SCALE_NONE, TUNER_SCALE_COL, false), true,
                      true)},
            {"fp8 mn B[K,N] e4m3 decode 16x8192x8192 tensor bf16",
             t_fp8_mn(t_fp8_matmul(E4, E4, TUNER_BF16, 0, 16, 8192, 8192, TUNER_SCALE_TENSOR, TUNER_SCALE_TENSOR, false),
                      false, true)},
            {"fp8 mn B[K,N] e4m3 block 1000x768x1040 bf16",
             t_fp8_mn(t_fp8_matmul(E4, E4, TUNER_BF16, 0, 1000, 768, 1040, TUNER_SCALE_BLOCK, TUNER_SCALE_BLOCK, false),
                      false, true)},
        };
        for (size_t i = 0; i < sizeof(mn) / sizeof(mn[0]) && fp8_target.sm == 90 && fp8_target.arch_specific; i++)
            if (!only || strstr(mn[i].label, only))
                verify_case(mn[i].label, &mn[i].op, &fp8_target, threads);
        case_max = 0;
    }
    {
        /* attention's reference against the host (the templates' candidates are checked by
         * their own cases): GQA with causal rows that see no key (S > Skv) and a mask with
         * fully -inf rows; bshd with a [S,Skv] mask and an epilogue; decode with MQA. */
        const long long m4[4] = {2, 1, 40, 33}, m2[2] = {17, 50}, m1[4] = {2, 1, 1, 300}, res[4] = {1, 17, 8, 80};
        tuner_op op;
        if (!only || strstr("attention reference bhsd gqa causal", only)) {
            op = ta_attention_of(TUNER_F16, false, true, 2, 4, 2, 40, 33, 64, 4, m4, TUNER_F32);
            verify_attn_reference("attention reference bhsd gqa causal", &op, &t, true);
        }
        if (!only || strstr("attention reference bshd +res*0.5", only)) {
            op = ta_attention_of(TUNER_BF16, true, true, 1, 8, 2, 17, 50, 80, 2, m2, TUNER_F16);
            t_add_epilogue(&op, TUNER_EW_ADD, 4, res, TUNER_EW_SCALE);
            verify_attn_reference("attention reference bshd +res*0.5", &op, &t, true);
        }
        if (!only || strstr("attention reference decode mqa", only)) {
            op = ta_attention_of(TUNER_F16, false, false, 2, 8, 1, 1, 300, 128, 4, m1, TUNER_BF16);
            verify_attn_reference("attention reference decode mqa", &op, &t, false);
        }
        if (!only || strstr("attention reference packed gqa +res*0.5", only)) {
            /* bshd_packed: qkv [1,40,12,80] (8 query heads, 2 kv heads), causal, a [B,1,S,S]
             * mask (inputs[1]) with fully -inf rows, a residual on the [1,40,8,80] output */
            const long long pm[4] = {1, 1, 40, 40}, pres[4] = {1, 40, 8, 80};
            ta_shape ps = {.dt = TUNER_BF16, .b = 1, .hq = 8, .hkv = 2, .s = 40, .skv = 40, .d = 80, .packed = true,
                           .causal = true, .mask_rank = 4, .mask_dt = TUNER_F32};
            memcpy(ps.mask_shape, pm, sizeof(pm));
            op = ta_attention(&ps);
            t_add_epilogue(&op, TUNER_EW_ADD, 4, pres, TUNER_EW_SCALE);
            verify_attn_reference("attention reference packed gqa +res*0.5", &op, &t, true);
        }
    }
    printf("gpu_verify: %d wrong or failed candidates\n", total_wrong);
    return total_wrong ? 1 : 0;
}
