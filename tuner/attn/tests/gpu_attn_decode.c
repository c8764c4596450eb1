/* tuner/attn/tests/gpu_attn_decode.c - runs every attention_decode candidate (tuner/attn/decode.c)
 * on a real GPU against a CPU fp64 reference written here, then times the default for the
 * decoding shapes of a 32/8-head model (needs a CUDA GPU; exits 77 = skipped without one or
 * without a driver).
 *
 * Verification: per shape (GQA 32/8, S 1 and 4, Skv 1000 and 4096, S > Skv under causal, a mask
 * with -inf entries and a fully -inf row, bshd, f16 and bf16, D 128 and 256, an epilogue) the
 * space is built for the device's target, every attention_decode candidate generated and
 * compiled (threads), run on inputs of values exact in the dtype with the output poisoned with
 * NaN bytes and the workspace with garbage, and compared element by element with the reference:
 * |out - ref| <= atol + rtol * |ref|, no NaN (a row with no key is 0 there, then the epilogue).
 * Each candidate runs twice in a row on one workspace (first filled with garbage: the one-launch
 * combine's counters must neither need a zeroed workspace nor leave one that breaks the next
 * launch), then twice as a replayed CUDA graph (a replay may reuse a grid id). One line per
 * candidate and run: max error, pass/fail.
 * Dynamic ops (B and Skv named): every candidate at three sizes, one with every chunk but the
 * first empty, each checked against the static op's reference at those sizes; at the first, +inf
 * in V where a flattened TMA map reads past Skv (poison_next_group).
 * Timing: B in {1, 16, 64}, S = 1, Skv in {4096, 32768}, 32/8 heads, hd 128, f16: every
 * candidate is timed (L2 flushed before each launch: a 256 MiB memset outside the events), and
 * the default (tune:"none"), the model's pick and the fastest are reported with the GB/s of K and
 * V read (2 * B * Hkv * Skv * D * 2 bytes / time). HIDET_DECODE_ONLY=substr runs matching cases.
 */
#include <dlfcn.h>
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

/* ---- CUDA graphs ---------------------------------------------------------------------------- */

/* The driver's graph entry points, for verify's replays; looked up here (gpu_driver.h lists what
 * every GPU program needs, and no other needs these). Without them the replays are skipped with
 * a line. */
static struct {
    bool ok;
    CUresult (*begin)(CUstream, CUstreamCaptureMode);
    CUresult (*end)(CUstream, CUgraph *);
    CUresult (*instantiate)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*launch)(CUgraphExec, CUstream);
    CUresult (*exec_destroy)(CUgraphExec);
    CUresult (*destroy)(CUgraph);
} g_graph;

static void graph_open(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return;
    *(void **)&g_graph.begin = dlsym(h, "cuStreamBeginCapture_v2");
    *(void **)&g_graph.end = dlsym(h, "cuStreamEndCapture");
    *(void **)&g_graph.instantiate = dlsym(h, "cuGraphInstantiateWithFlags");
    *(void **)&g_graph.launch = dlsym(h, "cuGraphLaunch");
    *(void **)&g_graph.exec_destroy = dlsym(h, "cuGraphExecDestroy");
    *(void **)&g_graph.destroy = dlsym(h, "cuGraphDestroy");
    g_graph.ok = g_graph.begin && g_graph.end && g_graph.instantiate && g_graph.launch && g_graph.exec_destroy &&
                 g_graph.destroy;
    if (!g_graph.ok)
        printf("no CUDA graph entry points in the driver: the graph replays are skipped\n");
}

/* ---- host values -------------------------------------------------------------------------- */

/* A host tensor: its bytes (values exact in its dtype). */
typedef struct host_t {
    void *raw;
    size_t n, bytes;
} host_t;

static host_t host_fill(const tuner_tensor *t, float (*value)(size_t k, void *ctx), void *ctx)
{
    host_t h;
    h.n = (size_t)tuner_tensor_numel(t);
    h.bytes = h.n * (size_t)tuner_dtype_size(t->dtype);
    h.raw = malloc(h.bytes);
    for (size_t k = 0; k < h.n; k++)
        t_host_put(t->dtype, h.raw, k, value(k, ctx));
    return h;
}

static float rnd_value(size_t k, void *ctx)
{
    (void)k;
    const tuner_dtype dt = *(const tuner_dtype *)ctx;
    return dt == TUNER_BF16 ? (float)t_rnd_int(-128, 128) / 128.0f : (float)t_rnd_int(-1024, 1024) / 1024.0f;
}

/* ---- the cases ---------------------------------------------------------------------------- */

enum { MASK_NONE, MASK_KEYS, MASK_B1SK };

typedef struct shape {
    long long b, hq, hkv, s, skv, d;
    tuner_dtype dt;
    bool bshd, causal;
    int mask;       /* MASK_KEYS: [Skv] f32; MASK_B1SK: [B,1,S,Skv] f32 with a fully -inf row */
    bool epilogue;  /* + bias[D] (dtype), then silu */
    bool packed;    /* layout bshd_packed: one qkv [B,S,Hq+2Hkv,D], Skv = S, the mask inputs[1] */
} shape;

static tuner_op attn_op(const shape *sh)
{
    ta_shape ts = {.dt = sh->dt, .b = sh->b, .hq = sh->hq, .hkv = sh->hkv, .s = sh->s, .skv = sh->skv, .d = sh->d,
                   .bshd = sh->bshd, .causal = sh->causal, .mask_dt = TUNER_F32, .packed = sh->packed};
    if (sh->mask == MASK_KEYS) {
        ts.mask_rank = 1;
        ts.mask_shape[0] = sh->skv;
    } else if (sh->mask == MASK_B1SK) {
        ts.mask_rank = 4;
        memcpy(ts.mask_shape, (long long[4]){sh->b, 1, sh->s, sh->skv}, sizeof(ts.mask_shape));
    }
    tuner_op op = ta_attention(&ts);
    if (sh->epilogue) {
        long long bias[1] = {sh->d};
        op.inputs[op.n_inputs] = t_tensor(sh->dt, 1, bias, 16);
        op.epilogue.steps[op.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_ADD, .operand = op.n_inputs++};
        op.epilogue.steps[op.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_SILU, .operand = -1};
    }
    return op;
}

/* Mask values: mostly in [-2, 2], every 7th -inf; with MASK_B1SK row (b 0, i 1) all -inf. */
typedef struct mask_ctx {
    const shape *sh;
} mask_ctx;
static float mask_value(size_t k, void *vctx)
{
    const shape *sh = ((mask_ctx *)vctx)->sh;
    const long long j = (long long)(k % (size_t)sh->skv), row = (long long)(k / (size_t)sh->skv);
    if (sh->mask == MASK_B1SK && sh->s > 1 && row == 1) /* b = 0, i = 1 */
        return -INFINITY;
    if (sh->mask == MASK_B1SK && sh->s > 2 && row == 2) /* b = 0, i = 2: finfo(f32).min, averaged */
        return -3.4028234663852886e38f;
    if ((j + row * 3) % 7 == 3)
        return -INFINITY;
    return (float)t_rnd_int(-256, 256) / 128.0f;
}

/* The reference in fp64 (attn_host.h: out[b,h,i,:] = softmax_j(scale q.k_j + m_ij) V, causal
 * j <= i + Skv - S, 0 for a row with no key), then the epilogue. `ref` in q's layout. */
static void reference(const shape *sh, const tuner_op *op, host_t *in, double *ref)
{
    tuner__attn_problem p;
    char *err = NULL;
    if (tuner__attn_problem_init(op, &p, &err) < 0) {
        fprintf(stderr, "reference: %s\n", err ? err : "?");
        exit(2);
    }
    const int mi = tuner_attention_mask_input(op);
    const void *raw[4] = {in[0].raw, sh->packed ? NULL : in[1].raw, sh->packed ? NULL : in[2].raw, NULL};
    if (sh->mask != MASK_NONE)
        raw[mi] = in[mi].raw;
    double *sc = malloc((size_t)sh->skv * sizeof(double)), *row = malloc((size_t)sh->d * sizeof(double));
    for (long long b = 0; b < sh->b; b++)
        for (long long h = 0; h < sh->hq; h++)
            for (long long i = 0; i < sh->s; i++) {
                ta_reference_row(&p, raw, b, h, i, row, sc);
                const long long qo = b * p.o_sb + h * p.o_sh + i * p.o_ss;
                for (long long c = 0; c < sh->d; c++) {
                    double v = row[c];
                    if (sh->epilogue) {
                        const int bias = op->n_inputs - 1;
                        v += (double)t_host_get(op->inputs[bias].dtype, in[bias].raw, (size_t)c);
                        v = v / (1.0 + exp(-v));
                    }
                    ref[qo + c] = v;
                }
            }
    free(sc);
    free(row);
}

/* ---- compiling and running ---------------------------------------------------------------- */

static gpu_job *jobs;
static size_t n_jobs;

/* Generates and compiles every attention_decode candidate of sp (threads); returns how many. */
static size_t compile_all(const tuner_op *op, const tuner_target *t, const tuner_space *sp)
{
    n_jobs = 0;
    jobs = calloc(sp->n ? sp->n : 1, sizeof(*jobs));
    for (size_t i = 0; i < sp->n; i++)
        if (!strcmp(sp->items[i].template_name, "attention_decode"))
            jobs[n_jobs++] = (gpu_job){.op = op, .t = t, .s = &sp->items[i]};
    gpu_jobs_compile(jobs, n_jobs, 16);
    return n_jobs;
}

static void free_jobs(void)
{
    gpu_jobs_free(jobs, n_jobs);
    jobs = NULL;
    n_jobs = 0;
}

static int total_bad;

static void shape_name(const shape *sh, char *buf, size_t n)
{
    snprintf(buf, n, "B%lld %lld/%lld S%lld Skv%lld D%lld %s%s%s%s%s%s", sh->b, sh->hq, sh->hkv, sh->s, sh->skv, sh->d,
             tuner_dtype_name(sh->dt), sh->bshd ? " bshd" : "", sh->causal ? " causal" : "",
             sh->mask == MASK_KEYS ? " mask[Skv]" : sh->mask == MASK_B1SK ? " mask[B1SSkv]+row-inf" : "",
             sh->epilogue ? " +b silu" : "", sh->packed ? " packed" : "");
}

/* Compares an output (dtype dt, n elements) with the reference: |out - ref| <= atol + rtol *
 * |ref|, no NaN; an element whose reference is NaN is not compared. Returns the largest error (inf for a NaN); *nbad and *first count and place
 * the elements outside. */
static double compare(tuner_dtype dt, const void *out, const double *ref, size_t n, double atol, double rtol,
                      size_t *nbad, size_t *first)
{
    double maxerr = 0;
    *nbad = 0;
    *first = 0;
    for (size_t k = 0; k < n; k++) {
        if (isnan(ref[k])) /* a poisoned group's (poison_next_group) */
            continue;
        const double v = t_host_get(dt, out, k), d = fabs(v - ref[k]);
        if (!(d <= atol + rtol * fabs(ref[k]))) {
            if (!*nbad)
                *first = k;
            (*nbad)++;
        }
        if (!(d <= maxerr))
            maxerr = isnan(d) ? INFINITY : d;
    }
    return maxerr;
}

static void verify(const shape *sh, const tuner_target *t)
{
    char name[160];
    shape_name(sh, name, sizeof(name));
    const tuner_op op = attn_op(sh);
    tuner_space *sp = NULL;
    char *err = NULL;
    if (tuner_space_build(&op, t, &sp, &err) < 0) {
        printf("%s: space error: %s\n", name, err ? err : "?");
        free(err);
        total_bad++;
        return;
    }
    const size_t n = compile_all(&op, t, sp);
    host_t in[TUNER_MAX_INPUTS];
    CUdeviceptr bufs[TUNER_BUF_WORKSPACE + 1] = {0};
    for (int i = 0; i < op.n_inputs; i++) {
        tuner_dtype dt = op.inputs[i].dtype;
        mask_ctx mc = {sh};
        in[i] = i == tuner_attention_mask_input(&op) && sh->mask != MASK_NONE ? host_fill(&op.inputs[i], mask_value, &mc)
                                                : host_fill(&op.inputs[i], rnd_value, &dt);
        CK(d_cuMemAlloc(&bufs[TUNER_BUF_INPUT0 + i], in[i].bytes));
        CK(d_cuMemcpyHtoD(bufs[TUNER_BUF_INPUT0 + i], in[i].raw, in[i].bytes));
    }
    const size_t nout = (size_t)tuner_tensor_numel(&op.output);
    double *ref = malloc(nout * sizeof(double));
    reference(sh, &op, in, ref);
    CK(d_cuMemAlloc(&bufs[TUNER_BUF_OUTPUT], nout * 2));
    size_t ws = 16;
    for (size_t i = 0; i < n; i++)
        if (jobs[i].prog && jobs[i].prog->workspace_bytes > ws)
            ws = jobs[i].prog->workspace_bytes;
    CK(d_cuMemAlloc(&bufs[TUNER_BUF_WORKSPACE], ws));
    CUstream st;
    CK(d_cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    unsigned char *outh = malloc(nout * 2);
    const double atol = sh->dt == TUNER_F16 ? 2e-3 : 1.2e-2, rtol = sh->dt == TUNER_F16 ? 4e-3 : 1.6e-2;
    int ok = 0, bad = 0;
    printf("%s: %zu candidates\n", name, n);
    for (size_t i = 0; i < n; i++) {
        gpu_job *j = &jobs[i];
        char *sj = tuner_schedule_json(j->s);
        if (!j->bin) {
            printf("  FAIL %s: compile: %s\n", sj ? sj : "?", j->err ? j->err : "?");
            bad++;
            free(sj);
            continue;
        }
        CUmodule mod;
        CK(d_cuModuleLoadData(&mod, j->bin->cubin));
        /* Runs 1 and 2: plain launches, the first on a workspace of garbage (a client's is not
         * initialised, a graph's lies in its arena), the second on what the first left, which
         * the one-launch combine's counters must leave fit for the next launch. Runs 3 and 4:
         * one launch captured in a CUDA graph and replayed twice (torch.compile's cudagraphs),
         * where a replay may see the grid id of the one before: the counters' reset is then
         * what makes it right. */
        CK(d_cuMemsetD8(bufs[TUNER_BUF_WORKSPACE], 0x7f, ws)); /* large garbage */
        CUgraphExec ge = NULL;
        if (g_graph.ok) {
            CUgraph g;
            CK(g_graph.begin(st, CU_STREAM_CAPTURE_MODE_RELAXED));
            gpu_launch(mod, j->prog, bufs, st);
            CK(g_graph.end(st, &g));
            CK(g_graph.instantiate(&ge, g, 0));
            CK(g_graph.destroy(g));
        }
        bool failed = false;
        for (int run = 0; run < (ge ? 4 : 2); run++) {
            CK(d_cuMemsetD8(bufs[TUNER_BUF_OUTPUT], 0xff, nout * 2)); /* NaN */
            if (run < 2)
                gpu_launch(mod, j->prog, bufs, st);
            else
                CK(g_graph.launch(ge, st));
            CK(d_cuStreamSynchronize(st));
            CK(d_cuMemcpyDtoH(outh, bufs[TUNER_BUF_OUTPUT], nout * 2));
            size_t nbad = 0, first = 0;
            const double maxerr = compare(sh->dt, outh, ref, nout, atol, rtol, &nbad, &first);
            printf("  %s max err %.3e run %d%s %s", nbad ? "FAIL" : "ok  ", maxerr, run + 1, run < 2 ? "" : " (graph)",
                   sj ? sj : "?");
            if (nbad)
                printf(" - %zu/%zu bad, first at %zu: %g vs %g", nbad, nout, first,
                       (double)t_host_get(sh->dt, outh, first), ref[first]);
            printf("\n");
            failed = failed || nbad;
        }
        if (ge)
            CK(g_graph.exec_destroy(ge));
        failed ? bad++ : ok++;
        free(sj);
        CK(d_cuModuleUnload(mod));
    }
    printf("%s: ok %d bad %d\n", name, ok, bad);
    fflush(stdout);
    total_bad += bad + (n == 0);
    CK(d_cuStreamDestroy(st));
    for (int i = 0; i <= TUNER_BUF_WORKSPACE; i++)
        if (bufs[i])
            CK(d_cuMemFree(bufs[i]));
    for (int i = 0; i < op.n_inputs; i++) {
        free(in[i].raw);
    }
    free(outh);
    free(ref);
    free_jobs();
    tuner_space_free(sp);
}

/* A dynamic op of shape sh at its dims' max: B named "b" (when nb) and Skv "k" on q, k, v, the
 * mask ([Skv]) and the output, as a client's named dims leave them. */
static tuner_op dyn_op(const shape *sh, bool nb)
{
    tuner_op op = attn_op(sh);
    ta_name_b_skv(&op, nb, sh->b, sh->skv, sh->bshd, sh->mask == MASK_KEYS);
    return op;
}

/* The first run's poison (verify_dyn): +inf in V's key 0 of the (batch entry, kv head) whose
 * rows follow batch entry 0's kv head 0 in memory - kv head 1 (bhsd), batch entry 1 (bshd) -
 * which a flattened TMA map (a named Skv) reads as the keys past Skv of the last tile there.
 * Their P is 0, but 0 * inf is NaN: attention_decode zeroes those rows of V (decode.c
 * emit_ring_wait). The poisoned group's own outputs are inf or NaN in any correct kernel, so
 * their reference is set to NaN, which compare skips. */
static void poison_next_group(const shape *sh, host_t *in, double *ref)
{
    const long long pb = sh->bshd ? 1 : 0, ph = sh->bshd ? 0 : 1, group = sh->hq / sh->hkv;
    if (pb >= sh->b || ph >= sh->hkv)
        return;
    const long long row = sh->bshd ? (pb * sh->skv + 0) * sh->hkv + ph : (pb * sh->hkv + ph) * sh->skv + 0;
    for (long long c = 0; c < sh->d; c++)
        t_host_put(sh->dt, in[2].raw, (size_t)(row * sh->d + c), INFINITY);
    for (long long h = ph * group; h < (ph + 1) * group; h++)
        for (long long i = 0; i < sh->s; i++)
            for (long long c = 0; c < sh->d; c++) {
                const long long o = sh->bshd ? ((pb * sh->s + i) * sh->hq + h) * sh->d + c
                                             : ((pb * sh->hq + h) * sh->s + i) * sh->d + c;
                ref[o] = NAN;
            }
}

/* Every candidate of the dynamic op (dyn_op of sh) at each (B, Skv) of runs: inputs and the
 * reference of the static op of those sizes, the launch with them (gpu_launch_sizes), twice on
 * one workspace, the first time filled with garbage. A small Skv leaves the last chunks of a
 * split chosen at the max empty: their blocks arrive at the counter too, with partials that keep
 * no key. The first run's V is poisoned past batch entry 0's kv head 0 (poison_next_group). */
static void verify_dyn(const shape *sh, bool nb, const long long (*runs)[2], int n_runs, const tuner_target *t)
{
    char name[160];
    shape_name(sh, name, sizeof(name));
    const tuner_op op = dyn_op(sh, nb);
    tuner_space *sp = NULL;
    char *err = NULL;
    if (tuner_space_build(&op, t, &sp, &err) < 0) {
        printf("dynamic %s: space error: %s\n", name, err ? err : "?");
        free(err);
        total_bad++;
        return;
    }
    const size_t n = compile_all(&op, t, sp);
    size_t ws = 16;
    for (size_t i = 0; i < n; i++)
        if (jobs[i].prog && jobs[i].prog->workspace_bytes > ws)
            ws = jobs[i].prog->workspace_bytes;
    CUstream st;
    CK(d_cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    const double atol = sh->dt == TUNER_F16 ? 2e-3 : 1.2e-2, rtol = sh->dt == TUNER_F16 ? 4e-3 : 1.6e-2;
    int ok = 0, bad = 0;
    printf("dynamic %s (%s k named): %zu candidates\n", name, nb ? "b and" : "", n);
    for (int ri = 0; ri < n_runs; ri++) {
        shape rs = *sh;
        rs.b = runs[ri][0];
        rs.skv = runs[ri][1];
        const tuner_op rop = attn_op(&rs);
        host_t in[TUNER_MAX_INPUTS];
        CUdeviceptr bufs[TUNER_BUF_WORKSPACE + 1] = {0};
        for (int i = 0; i < rop.n_inputs; i++) {
            tuner_dtype dt = rop.inputs[i].dtype;
            mask_ctx mc = {&rs};
            in[i] = i == 3 && rs.mask != MASK_NONE ? host_fill(&rop.inputs[i], mask_value, &mc)
                                                   : host_fill(&rop.inputs[i], rnd_value, &dt);
            CK(d_cuMemAlloc(&bufs[TUNER_BUF_INPUT0 + i], in[i].bytes));
            CK(d_cuMemcpyHtoD(bufs[TUNER_BUF_INPUT0 + i], in[i].raw, in[i].bytes));
        }
        const size_t nout = (size_t)tuner_tensor_numel(&rop.output);
        double *ref = malloc(nout * sizeof(double));
        reference(&rs, &rop, in, ref);
        if (ri == 0) {
            poison_next_group(&rs, in, ref);
            CK(d_cuMemcpyHtoD(bufs[TUNER_BUF_INPUT0 + 2], in[2].raw, in[2].bytes));
        }
        CK(d_cuMemAlloc(&bufs[TUNER_BUF_OUTPUT], nout * 2));
        CK(d_cuMemAlloc(&bufs[TUNER_BUF_WORKSPACE], ws));
        unsigned char *outh = malloc(nout * 2);
        const int64_t sizes[2] = {nb ? rs.b : rs.skv, rs.skv};
        for (size_t i = 0; i < n; i++) {
            gpu_job *j = &jobs[i];
            char *sj = tuner_schedule_json(j->s);
            if (!j->bin) {
                printf("  FAIL %s: compile: %s\n", sj ? sj : "?", j->err ? j->err : "?");
                bad++;
                free(sj);
                continue;
            }
            CUmodule mod;
            CK(d_cuModuleLoadData(&mod, j->bin->cubin));
            CK(d_cuMemsetD8(bufs[TUNER_BUF_WORKSPACE], 0x7f, ws));
            bool failed = false;
            for (int run = 0; run < 2; run++) {
                CK(d_cuMemsetD8(bufs[TUNER_BUF_OUTPUT], 0xff, nout * 2));
                gpu_launch_sizes(mod, j->prog, bufs, sizes, st);
                CK(d_cuStreamSynchronize(st));
                CK(d_cuMemcpyDtoH(outh, bufs[TUNER_BUF_OUTPUT], nout * 2));
                size_t nbad = 0, first = 0;
                const double maxerr = compare(sh->dt, outh, ref, nout, atol, rtol, &nbad, &first);
                if (nbad || getenv("HIDET_DECODE_VERBOSE"))
                    printf("  %s B%lld Skv%lld run %d max err %.3e %s\n", nbad ? "FAIL" : "ok  ", rs.b, rs.skv, run + 1,
                           maxerr, sj ? sj : "?");
                failed = failed || nbad;
            }
            failed ? bad++ : ok++;
            free(sj);
            CK(d_cuModuleUnload(mod));
        }
        for (int i = 0; i <= TUNER_BUF_WORKSPACE; i++)
            if (bufs[i])
                CK(d_cuMemFree(bufs[i]));
        for (int i = 0; i < rop.n_inputs; i++)
            free(in[i].raw);
        free(outh);
        free(ref);
    }
    printf("dynamic %s: ok %d bad %d (candidate x size)\n", name, ok, bad);
    fflush(stdout);
    total_bad += bad + (n == 0);
    CK(d_cuStreamDestroy(st));
    free_jobs();
    tuner_space_free(sp);
}

/* Times every candidate (median of 15, L2 flushed before each) and reports the default's, the
 * model's pick's and the fastest's time and K/V bandwidth. */
static void bench(const shape *sh, const tuner_target *t, CUdeviceptr flush, size_t flush_bytes)
{
    char name[160];
    shape_name(sh, name, sizeof(name));
    const tuner_op op = attn_op(sh);
    tuner_space *sp = NULL;
    char *err = NULL;
    if (tuner_space_build(&op, t, &sp, &err) < 0) {
        printf("%s: space error: %s\n", name, err ? err : "?");
        free(err);
        total_bad++;
        return;
    }
    const size_t n = compile_all(&op, t, sp);
    CUdeviceptr bufs[TUNER_BUF_WORKSPACE + 1] = {0};
    for (int i = 0; i < op.n_inputs; i++) {
        const size_t bytes = (size_t)tuner_tensor_numel(&op.inputs[i]) * (size_t)tuner_dtype_size(op.inputs[i].dtype);
        CK(d_cuMemAlloc(&bufs[TUNER_BUF_INPUT0 + i], bytes));
        CK(d_cuMemsetD8(bufs[TUNER_BUF_INPUT0 + i], 0x11, bytes)); /* small finite values */
    }
    CK(d_cuMemAlloc(&bufs[TUNER_BUF_OUTPUT], (size_t)tuner_tensor_numel(&op.output) * 2));
    size_t ws = 16;
    for (size_t i = 0; i < n; i++)
        if (jobs[i].prog && jobs[i].prog->workspace_bytes > ws)
            ws = jobs[i].prog->workspace_bytes;
    CK(d_cuMemAlloc(&bufs[TUNER_BUF_WORKSPACE], ws));
    CUstream st;
    CK(d_cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CUevent e0, e1;
    CK(d_cuEventCreate(&e0, 0));
    CK(d_cuEventCreate(&e1, 0));
    const tuner_schedule *def = &sp->items[tuner_default_index(&op, t, sp)];
    double def_us = 0, best_us = 1e30, model_us = 0, model_pred = 1e30;
    const tuner_schedule *best = NULL, *model = NULL;
    for (size_t i = 0; i < n; i++) {
        gpu_job *j = &jobs[i];
        if (!j->bin) {
            printf("  compile failed: %s\n", j->err ? j->err : "?");
            total_bad++;
            continue;
        }
        CUmodule mod;
        CK(d_cuModuleLoadData(&mod, j->bin->cubin));
        gpu_launch(mod, j->prog, bufs, st);
        double ts[15];
        for (int r = 0; r < 15; r++) {
            CK(d_cuMemsetD8Async(flush, (unsigned char)r, flush_bytes, st));
            CK(d_cuEventRecord(e0, st));
            gpu_launch(mod, j->prog, bufs, st);
            CK(d_cuEventRecord(e1, st));
            CK(d_cuEventSynchronize(e1));
            float ms = 0;
            CK(d_cuEventElapsedTime(&ms, e0, e1));
            ts[r] = ms * 1000.0;
        }
        const double us = t_median(ts, 15), pred = tuner_predict_us(&op, t, j->s);
        if (getenv("HIDET_DECODE_TIMES")) {
            char *sj = tuner_schedule_json(j->s);
            printf("    %8.2f us (model %8.2f) %s\n", us, pred, sj ? sj : "?");
            free(sj);
        }
        if (j->s == def)
            def_us = us;
        if (us < best_us)
            best_us = us, best = j->s;
        if (pred < model_pred)
            model_pred = pred, model_us = us, model = j->s;
        CK(d_cuModuleUnload(mod));
    }
    const double kv = 2.0 * sh->b * sh->hkv * sh->skv * sh->d * 2.0;
    char *dj = tuner_schedule_json(def), *bj = best ? tuner_schedule_json(best) : NULL,
         *mj = model ? tuner_schedule_json(model) : NULL;
    printf("%s (K+V %.1f MB, %zu cand):\n  default %8.2f us %7.1f GB/s %s\n  model   %8.2f us %7.1f GB/s %s\n"
           "  best    %8.2f us %7.1f GB/s %s\n",
           name, kv / 1e6, n, def_us, def_us > 0 ? kv / def_us / 1e3 : 0, dj ? dj : "?", model_us,
           model_us > 0 ? kv / model_us / 1e3 : 0, mj ? mj : "?", best_us, kv / best_us / 1e3, bj ? bj : "?");
    fflush(stdout);
    free(dj);
    free(bj);
    free(mj);
    CK(d_cuEventDestroy(e0));
    CK(d_cuEventDestroy(e1));
    CK(d_cuStreamDestroy(st));
    for (int i = 0; i <= TUNER_BUF_WORKSPACE; i++)
        if (bufs[i])
            CK(d_cuMemFree(bufs[i]));
    free_jobs();
    tuner_space_free(sp);
}

int main(void)
{
    CUdevice dev;
    int major, minor;
    if (!gpu_driver_first_device(false, &dev, &major, &minor))
        return 77;
    gpu_driver_use(dev);
    /* sm_90 parts run the sm_90a space (the decode template is the same there); newer parts run
     * sm_90 code. */
    tuner_target t = {major * 10 + minor, false};
    if (t.sm >= 90) {
        t.sm = 90;
        t.arch_specific = true;
    }
    printf("device sm_%d%s\n", t.sm, t.arch_specific ? "a" : "");
    graph_open();
    const char *only = getenv("HIDET_DECODE_ONLY");
    char name[160];

    static const shape checks[] = {
        /* b, hq, hkv, s, skv, d, dt, bshd, causal, mask, epilogue */
        {1, 32, 8, 1, 1000, 128, TUNER_F16, false, false, MASK_NONE, false, false},
        {2, 32, 8, 1, 4096, 128, TUNER_BF16, true, false, MASK_KEYS, false, false},
        {2, 32, 8, 4, 1000, 128, TUNER_F16, false, true, MASK_B1SK, false, false},
        {1, 32, 8, 4, 4096, 256, TUNER_BF16, true, true, MASK_NONE, false, false},
        {2, 32, 8, 4, 1000, 256, TUNER_F16, true, false, MASK_B1SK, true, false},
        {1, 32, 8, 4, 2, 128, TUNER_F16, false, true, MASK_NONE, false, false}, /* S > Skv: rows 0, 1 have no key */
        {1, 8, 1, 8, 1000, 64, TUNER_BF16, false, true, MASK_KEYS, false, false}, /* MQA, 64 rows: 4 m tiles */
        {2, 16, 16, 1, 4096, 80, TUNER_F16, true, false, MASK_NONE, true, false},  /* MHA, hd 80 */
        /* bshd_packed (S = Skv, so only short sequences reach this template) */
        {2, 12, 12, 1, 1, 64, TUNER_F16, true, true, MASK_NONE, false, true},
        {2, 32, 8, 8, 8, 128, TUNER_BF16, true, true, MASK_B1SK, false, true},
        {1, 8, 2, 16, 16, 256, TUNER_F16, true, false, MASK_KEYS, true, true},
    };
    for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
        shape_name(&checks[i], name, sizeof(name));
        if (!only || strstr(name, only))
            verify(&checks[i], &t);
    }

    /* Dynamic B and Skv: split chosen at Skv 4096 (up to 64 chunks), run at 37 keys (every
     * chunk but the first empty), 1000 and the max; a causal bshd one with Skv alone named. */
    {
        static const long long runs1[3][2] = {{3, 37}, {1, 1000}, {4, 4096}};
        const shape s1 = {4, 32, 8, 1, 4096, 128, TUNER_F16, false, false, MASK_KEYS, false, false};
        shape_name(&s1, name, sizeof(name));
        if (!only || strstr(name, only) || strstr("dynamic", only))
            verify_dyn(&s1, true, runs1, 3, &t);
        static const long long runs2[3][2] = {{2, 5}, {2, 700}, {2, 4096}};
        const shape s2 = {2, 32, 8, 4, 4096, 128, TUNER_BF16, true, true, MASK_NONE, false, false};
        shape_name(&s2, name, sizeof(name));
        if (!only || strstr(name, only) || strstr("dynamic", only))
            verify_dyn(&s2, false, runs2, 3, &t);
    }

    const size_t flush_bytes = 256u << 20;
    CUdeviceptr flush;
    CK(d_cuMemAlloc(&flush, flush_bytes));
    static const long long bs[3] = {1, 16, 64}, skvs[2] = {4096, 32768};
    for (int bi = 0; bi < 3; bi++)
        for (int si = 0; si < 2; si++) {
            shape sh = {bs[bi], 32, 8, 1, skvs[si], 128, TUNER_F16, false, false, MASK_NONE, false, false};
            shape_name(&sh, name, sizeof(name));
            if (!only || strstr(name, only))
                bench(&sh, &t, flush, flush_bytes);
        }
    CK(d_cuMemFree(flush));
    printf("gpu_attn_decode: %d wrong or failed candidates\n", total_bad);
    return total_bad ? 1 : 0;
}
