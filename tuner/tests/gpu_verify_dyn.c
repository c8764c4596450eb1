/* tuner/tests/gpu_verify_dyn.c - dynamic ops (named dims, issue 39) of the core templates on a
 * real GPU: each candidate launched at several sizes against the static reference at that size
 * (needs a CUDA GPU; exits 77 = skipped without one).
 *
 * For every case of tuner/tests/dyn_cases.c x dtype (the core templates, gather with named ids -
 * uniform over [-N, N) and some out of range - and attention_mma / attention_decode, and on sm_90a
 * attention_wgmma, with names on B, S and Skv): builds the dynamic op's space for the
 * device's target and compiles its default and up to HIDET_VERIFY_MAX (default 12) evenly spaced
 * other candidates once. Buffers are allocated for the dims' max and filled with values exact in
 * their dtype; the op at smaller sizes reads the first elements of each buffer as its dense
 * tensors (with names on inner axes these are not the max tensors' prefixes, and need not be:
 * the reference reads the same elements). At the sizes min, an odd one in the middle and max (t_dyn_sizes): the static op there
 * (tuner_op_bind) gets its reference (tuner_reference, F32 output), and every candidate is
 * launched with the sizes as its dims' arguments and each grid from its rule (gpu_launch_sizes),
 * its output poisoned with NaN bytes first: the elements of the bound op must match the
 * reference (|out - ref| <= atol * rms(ref) + rtol * |ref|) and every element past them must
 * still be the poison (no write beyond the launch's size). Attention cases run each size twice:
 * the second time with v (packed: the whole qkv) +inf in every odd batch entry, where the
 * reference is not finite and is not compared; every finite reference element must still match,
 * so that a tile of one sequence reading past its end into the next (a flattened tensor map:
 * tuner/attn/wgmma.c) may not carry the other's values into it. One line per case and size;
 * exits 1 if any candidate is wrong. HIDET_VERIFY_ONLY=substring limits the cases.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "dyn_cases.h"
#include "gpu_driver.h"
#include "gpu_jobs.h"
#include "host_values.h"
#include "tuner/tuner.h"

static int total_wrong;

/* Fills n elements of input i of op with values exact in its dtype; gather's ids uniform over
 * [-N, N), every 7th past one end or the other (the kernels give 0 there). */
static void *host_fill(const tuner_op *op, int i, size_t n)
{
    const tuner_dtype dt = op->inputs[i].dtype;
    void *h = malloc(n * (size_t)tuner_dtype_size(dt) + 1);
    for (size_t k = 0; k < n; k++) {
        if (tuner_dtype_is_int(dt)) {
            long long v = t_rnd_int(-2, 2);
            if (op->kind == TUNER_OP_GATHER && i == 1) {
                const long long N = op->inputs[0].shape[op->attrs.gather.axis];
                v = k % 7 == 3 ? (k % 2 ? N + (long long)(k % 5) : -N - 1 - (long long)(k % 5))
                               : t_rnd_int(-(int)N, (int)N - 1);
            }
            if (dt == TUNER_I64) {
                const int64_t w = v;
                memcpy((char *)h + k * 8, &w, 8);
            } else {
                const int32_t w = (int32_t)v;
                memcpy((char *)h + k * 4, &w, 4);
            }
            continue;
        }
        float f;
        if (dt == TUNER_F16)
            f = (float)t_rnd_int(-1024, 1024) / 1024.0f;
        else if (dt == TUNER_BF16)
            f = (float)t_rnd_int(-128, 128) / 128.0f;
        else
            f = (float)t_rnd_int(-(1 << 20), 1 << 20) / (float)(1 << 20);
        t_host_put(dt, h, k, f);
    }
    return h;
}

static void verify_case(const t_dyn_case *c, const tuner_target *t, int threads)
{
    const tuner_op *op = &c->op;
    tuner_space *sp = NULL;
    char *err = NULL;
    if (tuner_space_build(op, t, &sp, &err) < 0) {
        printf("%-62s space error: %s\n", c->name, err ? err : "?");
        free(err);
        total_wrong++;
        return;
    }
    /* The default first, then evenly spaced others. */
    size_t n_jobs = 0;
    gpu_job *jobs = gpu_jobs_pick(op, t, sp, 12, true, &n_jobs);
    gpu_jobs_compile(jobs, n_jobs, threads);
    /* How many of them are the case's template's (attention_wgmma's cases, on sm_90a: its
     * schedules share the space with attention_mma's). */
    size_t mine = 0;
    for (size_t i = 0; i < n_jobs; i++)
        mine += c->template_name && !strcmp(jobs[i].s->template_name, c->template_name);

    /* References at the three sizes. */
    int64_t sizes[3][TUNER_MAX_DIMS];
    tuner_op bound[3];
    tuner_program *ref[3] = {NULL, NULL, NULL};
    tuner_binary *refbin[3] = {NULL, NULL, NULL};
    size_t ws = 16;
    for (int w = 0; w < 3; w++) {
        for (int k = 0; k < TUNER_MAX_DIMS; k++)
            sizes[w][k] = 1;
        t_dyn_sizes(op, w, sizes[w]);
        if (tuner_op_bind(op, sizes[w], &bound[w]) < 0 || tuner_reference(&bound[w], t, &ref[w], &err) < 0 ||
            tuner_compile(ref[w]->source, t, &refbin[w], &err) < 0) {
            printf("%-62s reference error: %s\n", c->name, err ? err : "?");
            exit(2);
        }
        if (ref[w]->workspace_bytes > ws)
            ws = ref[w]->workspace_bytes;
    }
    for (size_t i = 0; i < n_jobs; i++)
        if (jobs[i].prog && jobs[i].prog->workspace_bytes > ws)
            ws = jobs[i].prog->workspace_bytes;

    /* Buffers for the largest sizes (the dynamic op's shapes). */
    CUdeviceptr bufs[TUNER_BUF_WORKSPACE + 1];
    memset(bufs, 0, sizeof(bufs));
    /* Attention's v (packed: qkv), kept on the host for the poisoned pass. */
    const bool is_attn = op->kind == TUNER_OP_ATTENTION;
    const int vi = is_attn && op->attrs.attention.packed ? 0 : 2;
    void *v_host = NULL;
    size_t v_bytes = 0;
    for (int i = 0; i < op->n_inputs; i++) {
        const tuner_tensor *x = &op->inputs[i];
        const size_t n = (size_t)tuner_tensor_numel(x), bytes = n * (size_t)tuner_dtype_size(x->dtype);
        void *h = host_fill(op, i, n);
        CK(d_cuMemAlloc(&bufs[i], bytes + 16));
        CK(d_cuMemcpyHtoD(bufs[i], h, bytes));
        if (is_attn && i == vi) {
            v_host = h;
            v_bytes = bytes;
        } else {
            free(h);
        }
    }
    const size_t nmax = (size_t)tuner_tensor_numel(&op->output), oes = (size_t)tuner_dtype_size(op->output.dtype);
    CK(d_cuMemAlloc(&bufs[TUNER_BUF_OUTPUT], nmax * 4 + 16));
    CK(d_cuMemAlloc(&bufs[TUNER_BUF_WORKSPACE], ws));
    CUstream st;
    CK(d_cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    float *refh = malloc(nmax * 4);
    unsigned char *outh = malloc(nmax * oes);
    const double tol = op->output.dtype == TUNER_F32 ? 2e-5 : op->output.dtype == TUNER_F16 ? 2e-3 : 1.6e-2;
    CUmodule *mods = calloc(n_jobs, sizeof(*mods));
    for (size_t i = 0; i < n_jobs; i++)
        if (jobs[i].bin)
            CK(d_cuModuleLoadData(&mods[i], jobs[i].bin->cubin));

    for (int pass = 0; pass < (is_attn ? 6 : 3); pass++) {
        const int w = pass % 3;
        const bool poisoned = pass >= 3;
        if (poisoned) {
            /* v of the bound op (dense in the buffer's first elements, batch outermost in every
             * layout): odd batch entries +inf. */
            const tuner_tensor *bv = &bound[w].inputs[vi];
            const size_t per_b = (size_t)tuner_tensor_numel(bv) / (size_t)bv->shape[0];
            unsigned char *hp = malloc(v_bytes);
            memcpy(hp, v_host, v_bytes);
            for (long long b = 1; b < bv->shape[0]; b += 2)
                for (size_t k = 0; k < per_b; k++)
                    t_host_put(bv->dtype, hp, (size_t)b * per_b + k, INFINITY);
            CK(d_cuMemcpyHtoD(bufs[vi], hp, v_bytes));
            free(hp);
        }
        const size_t n = (size_t)tuner_tensor_numel(&bound[w].output);
        CUmodule rmod;
        CK(d_cuModuleLoadData(&rmod, refbin[w]->cubin));
        CK(d_cuMemsetD8(bufs[TUNER_BUF_OUTPUT], 0xff, nmax * 4));
        gpu_launch(rmod, ref[w], bufs, st);
        CK(d_cuStreamSynchronize(st));
        CK(d_cuMemcpyDtoH(refh, bufs[TUNER_BUF_OUTPUT], n * 4));
        CK(d_cuModuleUnload(rmod));
        double rms = 0;
        size_t n_finite = 0;
        for (size_t k = 0; k < n; k++)
            if (isfinite(refh[k])) {
                rms += (double)refh[k] * refh[k];
                n_finite++;
            }
        rms = sqrt(rms / (double)(n_finite ? n_finite : 1));
        int ok = 0, wrong = 0, failed = 0;
        for (size_t i = 0; i < n_jobs; i++) {
            gpu_job *j = &jobs[i];
            char *sj = tuner_schedule_json(j->s);
            if (!j->bin) {
                if (w == 0)
                    printf("  compile failed %s: %s\n", sj ? sj : "?", j->err ? j->err : "?");
                failed++;
                free(sj);
                continue;
            }
            CK(d_cuMemsetD8(bufs[TUNER_BUF_OUTPUT], 0xff, nmax * oes));
            CK(d_cuMemsetD8(bufs[TUNER_BUF_WORKSPACE], 0, ws));
            gpu_launch_sizes(mods[i], j->prog, bufs, sizes[w], st);
            CK(d_cuStreamSynchronize(st));
            CK(d_cuMemcpyDtoH(outh, bufs[TUNER_BUF_OUTPUT], nmax * oes));
            size_t bad = 0, first = 0, beyond = 0;
            for (size_t k = 0; k < n; k++) {
                if (poisoned && !isfinite(refh[k]))
                    continue; /* a poisoned sequence's own output */
                const float v = t_host_get(op->output.dtype, outh, k);
                const double d = (double)v == refh[k] ? 0.0 : fabs((double)v - refh[k]);
                const double floor_ = op->output.dtype == TUNER_F16 ? 5.97e-8 : 0.0;
                if (!(d <= tol * rms + tol * fabs(refh[k]) + floor_)) {
                    if (!bad)
                        first = k;
                    bad++;
                }
            }
            for (size_t b = n * oes; b < nmax * oes; b++)
                beyond += outh[b] != 0xff;
            if (bad || beyond) {
                wrong++;
                printf("  WRONG %s at sizes (%lld, %lld): %zu/%zu bad (first at %zu: %g vs ref %g), %zu bytes "
                       "written past the output\n",
                       sj ? sj : "?", (long long)sizes[w][0], (long long)sizes[w][1], bad, n, first,
                       bad ? (double)t_host_get(op->output.dtype, outh, first) : 0.0, bad ? (double)refh[first] : 0.0,
                       beyond);
            } else {
                ok++;
            }
            free(sj);
        }
        printf("%-62s sizes (%lld, %lld, %lld)%s %2zu cand (%zu %s): ok %2d wrong %2d failed %2d\n", c->name,
               (long long)sizes[w][0], op->n_dims > 1 ? (long long)sizes[w][1] : 0LL,
               op->n_dims > 2 ? (long long)sizes[w][2] : 0LL, poisoned ? " v+inf in odd b" : "", n_jobs, mine, c->template_name ? c->template_name : "-",
               ok, wrong, failed);
        fflush(stdout);
        total_wrong += wrong + failed;
    }
    for (size_t i = 0; i < n_jobs; i++)
        if (mods[i])
            CK(d_cuModuleUnload(mods[i]));
    free(mods);
    free(v_host);
    free(refh);
    free(outh);
    CK(d_cuStreamDestroy(st));
    for (int i = 0; i <= TUNER_BUF_WORKSPACE; i++)
        if (bufs[i])
            CK(d_cuMemFree(bufs[i]));
    for (int w = 0; w < 3; w++) {
        tuner_program_free(ref[w]);
        tuner_binary_free(refbin[w]);
    }
    gpu_jobs_free(jobs, n_jobs);
    tuner_space_free(sp);
}

int main(void)
{
    CUdevice dev;
    int major, minor;
    if (!gpu_driver_first_device(false, &dev, &major, &minor))
        return 77;
    gpu_driver_use(dev);
    tuner_target t = {major * 10 + minor, major * 10 + minor == 90};
    if (t.sm > 90)
        t = (tuner_target){90, false}; /* run sm_90 code on newer parts */
    char tn[16];
    tuner_target_name(&t, tn, sizeof(tn));
    printf("device %s\n", tn);
    t_rng_state = 12345;
    static const tuner_dtype dts[3] = {TUNER_F16, TUNER_BF16, TUNER_F32};
    static t_dyn_case cases[T_DYN_MAX_CASES];
    const char *only = getenv("HIDET_VERIFY_ONLY");
    for (int di = 0; di < 3; di++) {
        const int n = t_dyn_cases(dts[di], false, cases);
        for (int i = 0; i < n; i++)
            if (!only || strstr(cases[i].name, only))
                verify_case(&cases[i], &t, 16);
    }
    printf("gpu_verify_dyn: %d wrong or failed candidate launches\n", total_wrong);
    return total_wrong ? 1 : 0;
}
