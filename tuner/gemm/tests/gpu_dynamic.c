/* tuner/gemm/tests/gpu_dynamic.c - runs the candidates of dynamic matmuls (named M or batch,
 * issue 39) on a real GPU at several sizes against the static reference at each size (needs a
 * CUDA GPU; exits 77 = skipped without one).
 *
 * For each case: builds the dynamic op's space for the device's target (matmul_mma, matmul_simt,
 * matmul_tf32 and, on sm_90a, matmul_wgmma: the templates with dynamic_dims), generates and
 * compiles every candidate once (in parallel threads), fills the inputs at the dims' max with values exact in their dtype, and for
 * each size (min, an odd one, max): binds the static op there (tuner_op_bind; a named axis 0 is the
 * outermost, so the bound tensors are prefixes of the max-size buffers), runs its reference
 * (tuner_reference), poisons the whole max-size output with 0xff bytes (NaN in every dtype), then
 * launches each candidate as a client would: grids from the launch's grid rules at these sizes,
 * the sizes as `long long` arguments where the launch names TUNER_ARG_DIM0 + k, tensor maps
 * encoded with each dimension that follows the dims (tuner_tmap.sym) at sym_coef times the sizes'
 * product (so a tail tile's rows past M are zero-filled and its stores dropped by the copy
 * engine, not by a bound in the code). Every element of
 * the bound output must match the reference (|out - ref| <= tol * (rms(ref) + |ref|), no NaN; tol
 * as tests/gpu/template_sweep.c has it for GEMMs) and every byte past it must still be poison: a kernel that bounds M by max, or not at all,
 * writes there. Prints one line per case and size; exits 1 if any candidate is wrong.
 * Named N and K (issue 39; matmul_mma, matmul_simt, matmul_tf32) are cases of their own with sizes per dim: the bound tensors are then
 * the max-size buffers read densely at the launch's sizes (not prefixes), by the reference and
 * the kernels alike.
 * HIDET_VERIFY_MAX=N limits candidates per case (evenly spread; default all), HIDET_VERIFY_ONLY=s
 * runs the cases whose name contains s.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/gemm/gemm.h"
#include "tuner/gemm/tests/dyn_matmul.h"
#include "tuner/tests/common.h"
#include "tuner/tests/gpu_driver.h"
#include "tuner/tests/gpu_jobs.h"
#include "tuner/tests/host_values.h"
#include "tuner/tuner.h"

static int total_wrong;

static float out_value(tuner_dtype dt, const unsigned char *h, size_t k)
{
    float v;
    if (dt == TUNER_F32) {
        memcpy(&v, h + k * 4, 4);
        return v;
    }
    uint16_t b;
    memcpy(&b, h + k * 2, 2);
    return dt == TUNER_F16 ? t_f16_to_f32(b) : t_bf16_to_f32(b);
}

static void verify_case(const char *name, const tuner_op *op, const tuner_target *t, const int64_t *sizes,
                        int n_sizes, int threads)
{
    tuner_space *sp = NULL;
    char *err = NULL;
    if (tuner_space_build(op, t, &sp, &err) < 0) {
        printf("%-44s space error: %s\n", name, err ? err : "?");
        free(err);
        total_wrong++;
        return;
    }
    size_t limit = 0;
    gpu_job *jobs = gpu_jobs_pick(op, t, sp, 0, false, &limit);
    gpu_jobs_compile(jobs, limit, threads);

    /* Inputs at max, values exact in their dtype; the output (candidates) and the reference's
     * F32 output at max too; the largest workspace. */
    CUdeviceptr bufs[TUNER_BUF_WORKSPACE + 1] = {0}, refbufs[TUNER_BUF_WORKSPACE + 1] = {0};
    for (int i = 0; i < op->n_inputs; i++) {
        const tuner_tensor *x = &op->inputs[i];
        const size_t n = (size_t)tuner_tensor_numel(x), es = (size_t)tuner_dtype_size(x->dtype);
        void *h = malloc(n * es);
        for (size_t k = 0; k < n; k++) {
            float f = x->dtype == TUNER_F16    ? (float)t_rnd_int(-1024, 1024) / 1024.0f
                      : x->dtype == TUNER_BF16 ? (float)t_rnd_int(-128, 128) / 128.0f
                                               : (float)t_rnd_int(-(1 << 20), 1 << 20) / (float)(1 << 20);
            t_host_put(x->dtype, h, k, f);
        }
        CK(d_cuMemAlloc(&bufs[i], n * es));
        CK(d_cuMemcpyHtoD(bufs[i], h, n * es));
        refbufs[i] = bufs[i];
        free(h);
    }
    const tuner_dtype odt = op->output.dtype;
    const size_t nout_max = (size_t)tuner_tensor_numel(&op->output), oes = (size_t)tuner_dtype_size(odt);
    CK(d_cuMemAlloc(&bufs[TUNER_BUF_OUTPUT], nout_max * oes));
    CK(d_cuMemAlloc(&refbufs[TUNER_BUF_OUTPUT], nout_max * 4));
    size_t ws_max = 16;
    for (size_t i = 0; i < limit; i++)
        if (jobs[i].prog && jobs[i].prog->workspace_bytes > ws_max)
            ws_max = jobs[i].prog->workspace_bytes;
    CK(d_cuMemAlloc(&bufs[TUNER_BUF_WORKSPACE], ws_max));
    refbufs[TUNER_BUF_WORKSPACE] = bufs[TUNER_BUF_WORKSPACE];

    CUstream st;
    CK(d_cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CUmodule *mods = calloc(limit, sizeof(*mods));
    int failed = 0;
    for (size_t i = 0; i < limit; i++) {
        if (jobs[i].bin)
            CK(d_cuModuleLoadData(&mods[i], jobs[i].bin->cubin));
        else {
            failed++;
            printf("  compile failed: %s\n", jobs[i].err ? jobs[i].err : "?");
        }
    }
    total_wrong += failed;
    float *refh = malloc(nout_max * 4);
    unsigned char *outh = malloc(nout_max * oes);

    for (int z = 0; z < n_sizes; z++) {
        const int64_t *sz = sizes + (size_t)z * TUNER_MAX_DIMS;
        tuner_op bound;
        char why[128] = "";
        if (tuner_op_sizes_check(op, sz, why, sizeof(why), NULL) < 0 || tuner_op_bind(op, sz, &bound) < 0) {
            printf("%-44s bad sizes: %s\n", name, why);
            total_wrong++;
            continue;
        }
        tuner_program *ref = NULL;
        tuner_binary *refbin = NULL;
        if (tuner_reference(&bound, t, &ref, &err) < 0 || tuner_compile(ref->source, t, &refbin, &err) < 0) {
            printf("%-44s reference error: %s\n", name, err ? err : "?");
            exit(2);
        }
        CUmodule rmod;
        CK(d_cuModuleLoadData(&rmod, refbin->cubin));
        gpu_launch(rmod, ref, refbufs, st);
        CK(d_cuStreamSynchronize(st));
        const size_t nout = (size_t)tuner_tensor_numel(&bound.output);
        CK(d_cuMemcpyDtoH(refh, refbufs[TUNER_BUF_OUTPUT], nout * 4));
        double rms = 0;
        for (size_t k = 0; k < nout; k++)
            rms += (double)refh[k] * refh[k];
        rms = sqrt(rms / (double)(nout ? nout : 1));

        int ok = 0, wrong = 0;
        for (size_t i = 0; i < limit; i++) {
            const gpu_job *j = &jobs[i];
            if (!j->bin)
                continue;
            CK(d_cuMemsetD8(bufs[TUNER_BUF_OUTPUT], 0xff, nout_max * oes));
            CK(d_cuMemsetD8(bufs[TUNER_BUF_WORKSPACE], 0, ws_max));
            gpu_launch_sizes(mods[i], j->prog, bufs, sz, st);
            CK(d_cuStreamSynchronize(st));
            CK(d_cuMemcpyDtoH(outh, bufs[TUNER_BUF_OUTPUT], nout_max * oes));
            /* tests/gpu/template_sweep.c's GEMM tolerances; fp32 on CUDA cores much tighter. */
            const double tol = odt == TUNER_BF16 ? 4e-2
                               : odt == TUNER_F16 || strcmp(j->s->template_name, "matmul_tf32") == 0 ? 1e-2
                                                                                                   : 1e-4;
            size_t bad = 0, first_bad = 0, spilled = 0;
            for (size_t k = 0; k < nout; k++) {
                const float v = out_value(odt, outh, k);
                const double d = (double)v == refh[k] ? 0.0 : fabs((double)v - refh[k]);
                const double floor_ = odt == TUNER_F16 ? 5.97e-8 : 0.0;
                if (!(d <= tol * rms + tol * fabs(refh[k]) + floor_) && !bad++)
                    first_bad = k;
            }
            for (size_t b = nout * oes; b < nout_max * oes; b++)
                spilled += outh[b] != 0xff;
            if (bad || spilled) {
                wrong++;
                char *sj = tuner_schedule_json(j->s);
                printf("  WRONG at %s=%lld %s: %zu/%zu bad (first at %zu: %g vs ref %g), %zu bytes written past the "
                       "output\n",
                       op->dims[0].name, (long long)sz[0], sj ? sj : "?", bad, nout, first_bad,
                       bad ? (double)out_value(odt, outh, first_bad) : 0.0, bad ? (double)refh[first_bad] : 0.0,
                       spilled);
                free(sj);
            } else {
                ok++;
            }
        }
        char at[96] = "";
        for (int d = 0, o = 0; d < op->n_dims && o < (int)sizeof(at); d++)
            o += snprintf(at + o, sizeof(at) - (size_t)o, "%s%s=%lld", d ? "," : "", op->dims[d].name, (long long)sz[d]);
        printf("%-44s %-14s %3zu cand: ok %3d wrong %2d failed %2d\n", name, at, limit, ok, wrong, failed);
        fflush(stdout);
        total_wrong += wrong;
        CK(d_cuModuleUnload(rmod));
        tuner_program_free(ref);
        tuner_binary_free(refbin);
    }
    for (size_t i = 0; i < limit; i++)
        if (mods[i])
            CK(d_cuModuleUnload(mods[i]));
    free(mods);
    CK(d_cuStreamDestroy(st));
    for (int i = 0; i <= TUNER_BUF_WORKSPACE; i++)
        if (bufs[i])
            CK(d_cuMemFree(bufs[i]));
    CK(d_cuMemFree(refbufs[TUNER_BUF_OUTPUT]));
    free(outh);
    free(refh);
    gpu_jobs_free(jobs, limit);
    tuner_space_free(sp);
}

/* a [n, K] x b [K, N] + bias [N], n in [1, max]. */
static tuner_op dyn_rows_bias(tuner_dtype dt, long long max, long long N, long long K)
{
    tuner_op op = dyn_matmul_rows(dt, 1, max, 1, N, K, false, true);
    long long bias[1] = {N};
    op.inputs[2] = t_tensor(dt, 1, bias, 16);
    op.n_inputs = 3;
    op.epilogue.steps[op.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_ADD, .operand = 2};
    return op;
}

int main(void)
{
    CUdevice dev;
    int major, minor;
    if (!gpu_driver_first_device(false, &dev, &major, &minor))
        return 77;
    gpu_driver_use(dev);
    /* sm_90a on a Hopper part (matmul_wgmma's target) where the driver encodes tensor maps. */
    tuner_target t = {major * 10 + minor, major == 9 && d_encoders.tiled != NULL};
    if (t.sm > 90)
        t.sm = 90; /* run sm_90 code on newer parts */
    printf("device sm_%d\n", t.sm);
    t_rng_state = 12345;
    const char *only = getenv("HIDET_VERIFY_ONLY");
    struct {
        const char *name;
        tuner_op op;
        int64_t sizes[3];
    } cases[] = {
        {"f16 [n<=1000,512]x[512,776] +bias+res gelu", dyn_matmul_rows(TUNER_F16, 1, 1000, 1, 776, 512, true, true), {1, 333, 1000}},
        {"bf16 [n<=1024/64,320]x[320,1024] +bias+res", dyn_matmul_rows(TUNER_BF16, 64, 1024, 64, 1024, 320, true, true),
         {64, 448, 1024}},
        {"f16 [n<=64,4096]x[4096,4096] (decode)", dyn_matmul_rows(TUNER_F16, 1, 64, 1, 4096, 4096, false, true), {1, 17, 64}},
        {"f32 [n<=300,96]x[96,200] +bias+res (tf32)", dyn_matmul_rows(TUNER_F32, 1, 300, 1, 200, 96, true, true), {1, 151, 300}},
        {"f16 align2 relu(0.5a*[K]) [n<=1000,200]x[200,136]", dyn_matmul_prologue(TUNER_F16, 1000, 136, 200, true), {1, 501, 1000}},
        {"f16 [b<=16,100,64]x[b,64,72] +res+bias", dyn_matmul_batch(TUNER_F16, 1, 16, 100, 72, 64, true, true), {1, 7, 16}},
        {"bf16 [b<=8,128,256]x[256,128]", dyn_matmul_batch(TUNER_BF16, 2, 8, 128, 128, 256, false, false), {2, 5, 8}},
        {"f32 [b<=12,33,40]x[b,40,24]", dyn_matmul_batch(TUNER_F32, 1, 12, 33, 24, 40, true, false), {1, 5, 12}},
        /* matmul_wgmma's (sm_90a; the cases above hold its candidates too where they apply): the
         * issue's shape with a bias, odd sizes under 1000 against 14336 columns (75 N tiles of a
         * 192-wide pingpong tile: at n = 97 its grid has one block more than units, which must
         * find no tile), a named batch with b batched (3-D maps). */
        {"f16 [n<=8192,4096]x[4096,4096] +bias", dyn_rows_bias(TUNER_F16, 8192, 4096, 4096), {1, 4097, 8192}},
        {"bf16 [n<=1000,4096]x[4096,14336]", dyn_matmul_rows(TUNER_BF16, 1, 1000, 1, 14336, 4096, false, true), {1, 97, 999}},
        {"f16 [b<=16,200,128]x[b,128,192] +res+bias", dyn_matmul_batch(TUNER_F16, 1, 16, 200, 192, 128, true, true),
         {1, 7, 16}},
        /* An odd K: a's rows are not 16-byte aligned, matmul_wgmma's producer gathers them. */
        {"f16 [n<=1000,1001]x[1001,776] +bias+res (odd K, gathered)", dyn_matmul_rows(TUNER_F16, 1, 1000, 1, 776, 1001, true, true),
         {1, 333, 1000}},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        if (only && !strstr(cases[c].name, only))
            continue;
        int64_t sizes[3 * TUNER_MAX_DIMS] = {0};
        for (int z = 0; z < 3; z++)
            sizes[z * TUNER_MAX_DIMS] = cases[c].sizes[z];
        verify_case(cases[c].name, &cases[c].op, &t, sizes, 3, 16);
    }
    /* Named N and K (matmul_mma for 16 bits, matmul_simt and matmul_tf32 for fp32): sizes per
     * dim (dims sorted by name), at min, odd and max; with multiple_of 8 matmul_mma keeps its
     * 16-byte cp.async vectors. The bound tensors are the max-size buffers' first elements read densely at the
     * launch's sizes, as the reference reads them. */
    tuner_op tf32_n = dyn_matmul_nk(TUNER_F32, 200, 1000, 96, NULL, "n", NULL, 1, false, true);
    tuner_op by8 = dyn_matmul_nk(TUNER_BF16, 512, 1024, 512, "m", "n", "k", 8, false, true);
    for (int k = 0; k < by8.n_dims; k++)
        by8.dims[k].multiple_of = 8;
    tf32_n.attrs.matmul.allow_tf32 = true;
    struct {
        const char *name;
        tuner_op op;
        int64_t sizes[3][TUNER_MAX_DIMS];
    } nk_cases[] = {
        {"f16 [m,k]x[k,n] +bias+res gelu (M, N, K named)", dyn_matmul_nk(TUNER_F16, 1000, 776, 520, "m", "n", "k", 1, false, true),
         {{1, 1, 1}, {259, 333, 387}, {520, 1000, 776}}},
        {"f16 [300,k]x[n,k]^T +bias+res (N, K named)", dyn_matmul_nk(TUNER_F16, 300, 640, 200, NULL, "n", "k", 1, true, true),
         {{1, 1}, {77, 511}, {200, 640}}},
        {"f16 q@k^T [s,64]x[s,64]^T (M = N = s)", dyn_matmul_nk(TUNER_F16, 1024, 1024, 64, "s", "s", NULL, 1, true, false),
         {{1}, {333}, {1024}}},
        {"bf16 p@v [s,s]x[s,64] (M = K = s)", dyn_matmul_nk(TUNER_BF16, 1024, 64, 1024, "s", NULL, "s", 1, false, false),
         {{1}, {257}, {1024}}},
        {"f32 [200,96]x[96,n] +bias+res (tf32, N named)", tf32_n, {{1}, {501}, {1000}}},
        {"bf16 [m,k]x[k,n] /8 +bias+res gelu (16-byte vectors)", by8, {{8, 8, 8}, {264, 200, 520}, {512, 512, 1024}}},
        {"f32 [64,k]x[k,48] (K named, split-K at launch)", dyn_matmul_nk(TUNER_F32, 64, 48, 4096, NULL, NULL, "k", 1, false, false),
         {{1}, {1001}, {4096}}},
    };
    for (size_t c = 0; c < sizeof(nk_cases) / sizeof(nk_cases[0]); c++) {
        if (only && !strstr(nk_cases[c].name, only))
            continue;
        verify_case(nk_cases[c].name, &nk_cases[c].op, &t, &nk_cases[c].sizes[0][0], 3, 16);
    }
    printf("%s\n", total_wrong ? "FAILED" : "ok");
    return total_wrong ? 1 : 0;
}
