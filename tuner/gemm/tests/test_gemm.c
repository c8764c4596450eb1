/* tuner/gemm/tests/test_gemm.c - unit tests of the matmul/conv2d templates (suite tuner_gemm).
 *
 * CPU only: spaces are counted, candidates of every template are generated for a deterministic
 * sample of schedules and shapes, compiled by the daemon's own NVRTC compile (tuner_compile, through
 * the test command's compile cache) and their PTX assembled by ptxas -v for the real
 * target; the PTX must contain the instructions the template is built on and the default
 * candidates must not spill. With TGEMM_DUMP=<dir>, every compiled program is also written there
 * (source, PTX and a launch description) for running on a GPU elsewhere. With HIDET_TEST_SAMPLE=S
 * (the sanitizer build, tuner/tests/common.h) the no-spill candidates and every S-th other job are
 * compiled and the rest generated and checked without compiling.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tuner/gemm/gemm.h"

static int compiled;

#include "tuner/tests/common.h"

/* Matmul (t_matmul) with tf32 allowed, so fp32 ops also get matmul_tf32's space. */
static tuner_op mk_matmul(tuner_dtype dt, long long bt_a, long long bt_b, long long M, long long N, long long K,
                          bool ta, bool tb, int align)
{
    tuner_op op = t_matmul(dt, bt_a, bt_b, M, N, K, ta, tb, align);
    op.attrs.matmul.allow_tf32 = true;
    return op;
}

static tuner_op mk_conv(tuner_dtype dt, long long n, long long h, long long w, long long c, long long k, int r,
                        int s, int stride, int pad, int dil, int groups, bool nchw, int align)
{
    tuner_op op = {.kind = TUNER_OP_CONV2D, .n_inputs = 2, .n_anchor_inputs = 2};
    long long p = (h + 2 * pad - dil * (r - 1) - 1) / stride + 1, q = (w + 2 * pad - dil * (s - 1) - 1) / stride + 1;
    long long xs[4] = {n, h, w, c}, ws[4] = {k, r, s, c / groups}, os[4] = {n, p, q, k};
    if (nchw) {
        long long xs2[4] = {n, c, h, w}, ws2[4] = {k, c / groups, r, s}, os2[4] = {n, k, p, q};
        memcpy(xs, xs2, sizeof(xs));
        memcpy(ws, ws2, sizeof(ws));
        memcpy(os, os2, sizeof(os));
    }
    op.inputs[0] = t_tensor(dt, 4, xs, align);
    op.inputs[1] = t_tensor(dt, 4, ws, align);
    op.output = t_tensor(dt, 4, os, 16);
    for (int i = 0; i < 2; i++) {
        op.attrs.conv2d.stride[i] = stride;
        op.attrs.conv2d.pad[i] = pad;
        op.attrs.conv2d.dilation[i] = dil;
    }
    op.attrs.conv2d.groups = groups;
    op.attrs.conv2d.nchw = nchw;
    return op;
}

/* Epilogue bias over the last output dim (channels / columns) followed by GELU(tanh). */
static void add_bias_gelu(tuner_op *op)
{
    const tuner_tensor *o = &op->output;
    long long c = op->kind == TUNER_OP_CONV2D && op->attrs.conv2d.nchw ? o->shape[1] : o->shape[o->rank - 1];
    long long shape[3] = {c, 1, 1};
    int rank = op->kind == TUNER_OP_CONV2D && op->attrs.conv2d.nchw ? 3 : 1;
    op->inputs[op->n_inputs] = t_tensor(o->dtype, rank, shape, 16);
    op->epilogue.steps[op->epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_ADD, .operand = op->n_inputs};
    op->epilogue.steps[op->epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_GELU_TANH, .operand = -1};
    op->n_inputs++;
}

/* Residual add of a full-size tensor. */
static void add_residual(tuner_op *op)
{
    op->inputs[op->n_inputs] = op->output;
    op->epilogue.steps[op->epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_ADD, .operand = op->n_inputs};
    op->n_inputs++;
}

/* An attention score's epilogue: * 0.125, masked_fill(-inf) with a [M,N] mask (a causal mask,
 * broadcast over the batch), then where with a [batch,1,N] condition and the mask as the other. */
static void add_attention_mask(tuner_op *op)
{
    const tuner_tensor *o = &op->output;
    long long mn[2] = {o->shape[o->rank - 2], o->shape[o->rank - 1]}, b1n[3] = {o->shape[0], 1, o->shape[o->rank - 1]};
    op->inputs[op->n_inputs] = t_tensor(o->dtype, 2, mn, 16);
    op->inputs[op->n_inputs + 1] = t_tensor(TUNER_F32, 3, b1n, 16);
    op->epilogue.steps[op->epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_SCALE, .operand = -1, .scalar = 0.125};
    op->epilogue.steps[op->epilogue.n++] =
        (tuner_ew_step){.kind = TUNER_EW_MASKED_FILL, .operand = op->n_inputs, .scalar = -HUGE_VAL};
    op->epilogue.steps[op->epilogue.n++] =
        (tuner_ew_step){.kind = TUNER_EW_WHERE, .operand = op->n_inputs + 1, .operand2 = op->n_inputs};
    op->n_inputs += 2;
}

/* Prologue on A: scale by 0.5, then multiply by a per-column (last dim) vector. */
static void add_prologue(tuner_op *op)
{
    const tuner_tensor *a = &op->inputs[0];
    long long shape[1] = {a->shape[a->rank - 1]};
    op->inputs[op->n_inputs] = t_tensor(a->dtype, 1, shape, 16);
    op->prologue[0].steps[op->prologue[0].n++] = (tuner_ew_step){.kind = TUNER_EW_SCALE, .operand = -1, .scalar = 0.5};
    op->prologue[0].steps[op->prologue[0].n++] = (tuner_ew_step){.kind = TUNER_EW_MUL, .operand = op->n_inputs};
    op->n_inputs++;
}

static const tuner_template *find_tmpl(const char *name)
{
    for (int i = 0; tuner__gemm_templates[i]; i++)
        if (strcmp(tuner__gemm_templates[i]->name, name) == 0)
            return tuner__gemm_templates[i];
    return NULL;
}

static int enumerate(const tuner_template *tp, const tuner_op *op, int sm, tuner_schedule **items, size_t *n)
{
    tuner_target t = {.sm = sm};
    *items = NULL;
    *n = 0;
    if (!tp->applies(op, &t))
        return 0;
    return tp->enumerate(op, &t, items, n);
}

static size_t space_size(const char *tmpl, const tuner_op *op, int sm)
{
    const tuner_template *tp = find_tmpl(tmpl);
    tuner_schedule *items = NULL;
    size_t n = 0;
    CHECK(tp, "template %s not registered", tmpl);
    if (!tp)
        return 0;
    CHECK(enumerate(tp, op, sm, &items, &n) == 0, "enumerate %s", tmpl);
    free(items);
    return n;
}

/* ---- compilation ---- */

static int write_file(const char *path, const char *data)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -errno;
    fputs(data, f);
    return fclose(f) == 0 ? 0 : -EIO;
}

static void dump_program(const char *tag, const tuner_program *pr, const char *ptx, int sm, const tuner_op *op)
{
    const char *dir = getenv("TGEMM_DUMP");
    if (!dir || sm != 90)
        return;
    char path[512];
    snprintf(path, sizeof(path), "%s/%s.ptx", dir, tag);
    write_file(path, ptx);
    snprintf(path, sizeof(path), "%s/%s.cu", dir, tag);
    write_file(path, pr->source);
    /* One line per launch: name grid block smem args..., then the buffers. */
    snprintf(path, sizeof(path), "%s/%s.launch", dir, tag);
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fprintf(f, "out_dtype %d ws %zu n_inputs %d\n", (int)pr->output_dtype, pr->workspace_bytes, op->n_inputs);
    for (int i = 0; i < op->n_inputs; i++)
        fprintf(f, "input %d dtype %d numel %lld\n", i, (int)op->inputs[i].dtype,
                (long long)tuner_tensor_numel(&op->inputs[i]));
    fprintf(f, "output numel %lld\n", (long long)tuner_tensor_numel(&op->output));
    for (int k = 0; k < pr->n_kernels; k++) {
        const tuner_launch *l = &pr->kernels[k];
        fprintf(f, "kernel %s %u %u %u %u %u %u %u %d", l->name, l->grid[0], l->grid[1], l->grid[2], l->block[0],
                l->block[1], l->block[2], l->shared_bytes, l->n_args);
        for (int a = 0; a < l->n_args; a++)
            fprintf(f, " %d", l->args[a]);
        fputc('\n', f);
    }
    fclose(f);
}

/* Generates (template or reference), compiles and assembles one program. want[] lists strings
 * the PTX must contain; no_spill requires ptxas to report no spills. */
static void check_program(const char *tag, const tuner_op *op, int sm, const tuner_template *tp,
                          const tuner_schedule *s, const char *const *want, bool no_spill, bool compile)
{
    tuner_target t = {.sm = sm};
    tuner_program pr;
    memset(&pr, 0, sizeof(pr));
    char *err = NULL;
    int rc = tp ? tp->generate(op, &t, s, &pr, &err) : tuner__gemm_reference(op, &t, &pr, &err);
    CHECK(rc == 0, "%s: generate: %s", tag, err ? err : "?");
    free(err);
    if (rc != 0)
        return;
    CHECK(pr.n_kernels >= 1 && pr.n_kernels <= TUNER_MAX_KERNELS, "%s: kernel count", tag);
    for (int k = 0; k < pr.n_kernels; k++) {
        const tuner_launch *l = &pr.kernels[k];
        CHECK(l->block[0] * l->block[1] * l->block[2] <= 1024 && l->block[0] > 0, "%s: block size", tag);
        CHECK(l->grid[0] > 0 && l->grid[1] > 0 && l->grid[2] > 0 && l->grid[1] <= 65535 && l->grid[2] <= 65535,
              "%s: grid", tag);
        CHECK(strstr(pr.source, l->name) != NULL, "%s: entry %s missing from source", tag, l->name);
        for (int a = 0; a < l->n_args; a++)
            CHECK(l->args[a] != TUNER_BUF_WORKSPACE || pr.workspace_bytes > 0, "%s: workspace arg without bytes", tag);
    }
    if (!compile) {
        printf("generated only: %s\n", tag);
        free(pr.source);
        return;
    }
    /* The daemon's own compile (its options; through HIDETD_COMPILE_CACHE where the test command
     * sets one, so the second build of the suite finds every program compiled by the first). */
    tuner_binary *bin = NULL;
    char *log = NULL;
    int crc = tuner_compile(pr.source, &t, &bin, &log);
    char *ptx = crc == 0 ? bin->ptx : NULL;
    CHECK(ptx != NULL, "%s: NVRTC failed:\n%s", tag, log ? log : "");
    if (!ptx && getenv("TGEMM_VERBOSE"))
        fprintf(stderr, "%s\n", pr.source);
    free(log);
    if (ptx) {
        __atomic_fetch_add(&compiled, 1, __ATOMIC_RELAXED);
        for (int i = 0; want && want[i]; i++)
            CHECK(strstr(ptx, want[i]) != NULL, "%s: PTX lacks %s", tag, want[i]);
        /* ptxas -v on the PTX (t_ptxas: the test command's second build reads the first's report). */
        if (!getenv("TGEMM_NO_PTXAS")) {
            char arch[16];
            snprintf(arch, sizeof(arch), "sm_%d", sm);
            char *out = NULL;
            int st = t_ptxas(ptx, arch, "-v", &out);
            CHECK(st == 0, "%s: ptxas sm_%d rejected the PTX:\n%s", tag, sm, out ? out : "");
            if (st == 0 && no_spill && out) {
                for (char *l = strstr(out, "bytes spill stores"); l; l = strstr(l + 1, "bytes spill stores")) {
                    char *b = l;
                    while (b > out && b[-1] != '\n' && b[-1] != ',')
                        b--;
                    CHECK(strncmp(b + strspn(b, " "), "0 bytes spill stores, 0 bytes spill loads", 41) == 0,
                          "%s: spills on sm_%d: %.60s", tag, sm, b);
                }
            }
            if (getenv("TGEMM_VERBOSE") && out)
                fprintf(stderr, "%s sm_%d:\n%s", tag, sm, out);
            free(out);
        }
        dump_program(tag, &pr, ptx, sm, op);
    }
    tuner_binary_free(bin);
    free(pr.source);
}

/* ---- compile jobs, run on two threads (NVRTC is thread-safe; ptxas runs as a child) ---- */

typedef struct job {
    char tag[160];
    tuner_op op;
    const tuner_template *tp; /* NULL: the reference */
    tuner_schedule sched;
    int sm;
    const char *const *want;
    bool no_spill;
} job;

static job *jobs;
static size_t n_jobs, next_job;
static pthread_mutex_t job_lock = PTHREAD_MUTEX_INITIALIZER;

static void add_job(const char *tag, const tuner_op *op, const tuner_template *tp, const tuner_schedule *s, int sm,
                    const char *const *want, bool no_spill)
{
    job *nj = realloc(jobs, (n_jobs + 1) * sizeof(*jobs));
    CHECK(nj != NULL, "out of memory");
    if (!nj)
        return;
    jobs = nj;
    job *j = &jobs[n_jobs++];
    memset(j, 0, sizeof(*j));
    snprintf(j->tag, sizeof(j->tag), "%s", tag);
    j->op = *op;
    j->tp = tp;
    if (s)
        j->sched = *s;
    j->sm = sm;
    j->want = want;
    j->no_spill = no_spill;
}

static void *job_worker(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&job_lock);
        size_t i = next_job < n_jobs ? next_job++ : n_jobs;
        pthread_mutex_unlock(&job_lock);
        if (i >= n_jobs)
            return NULL;
        job *j = &jobs[i];
        const char *only = getenv("TGEMM_ONLY");
        if (only && !strstr(j->tag, only))
            continue;
        /* Sampled (HIDET_TEST_SAMPLE, tuner/tests/common.h): the no-spill candidates (each
         * sample's default) and every S-th other job are compiled, the rest generated only. */
        check_program(j->tag, &j->op, j->sm, j->tp, j->tp ? &j->sched : NULL, j->want, j->no_spill,
                      j->no_spill || t_in_sample(i));
    }
}

static void run_jobs(void)
{
    pthread_t th[2];
    int started = 0;
    for (int i = 0; i < 2; i++)
        if (pthread_create(&th[i], NULL, job_worker, NULL) == 0)
            started++;
    if (started == 0)
        job_worker(NULL);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    free(jobs);
    jobs = NULL;
    n_jobs = next_job = 0;
}

/* Queues the default (first) candidate and `extra` more spread over the space (the last one
 * included when extra >= 1); every prediction must be positive and finite. */
static void check_sample(const char *tag, const char *tmpl, const tuner_op *op, int sm, int extra,
                         const char *const *want)
{
    const tuner_template *tp = find_tmpl(tmpl);
    tuner_schedule *items = NULL;
    size_t n = 0;
    CHECK(tp && enumerate(tp, op, sm, &items, &n) == 0, "%s: enumerate", tag);
    CHECK(n > 0, "%s: %s has no candidate on sm_%d", tag, tmpl, sm);
    for (size_t i = 0; i < n; i++) {
        double us = tp->predict_us(op, &(tuner_target){.sm = sm}, &items[i]);
        CHECK(us > 0.0 && us < 1e11, "%s: prediction %g for item %zu", tag, us, i);
    }
    size_t last = (size_t)-1;
    for (int i = 0; n > 0 && i <= extra; i++) {
        size_t idx = i == 0 ? 0 : i == extra ? n - 1 : (size_t)i * n / (size_t)(extra + 1);
        if (idx == last)
            continue;
        last = idx;
        char name[160];
        snprintf(name, sizeof(name), "%s_%s_sm%d_c%zu", tag, tmpl, sm, idx);
        add_job(name, op, tp, &items[idx], sm, want, i == 0);
    }
    free(items);
}

static const char *const want_mma_async[] = {"mma.sync.aligned.m16n8k16", "ldmatrix", "cp.async", NULL};
static const char *const want_mma_regs[] = {"mma.sync.aligned.m16n8k16", "ldmatrix", NULL};

static void test_spaces(void)
{
    static const tuner_dtype dts[] = {TUNER_F16, TUNER_BF16, TUNER_F32};
    for (int sm = 80; sm <= 90; sm += 10)
        for (int d = 0; d < 3; d++) {
            const char *dn = tuner_dtype_name(dts[d]);
            tuner_op mm = mk_matmul(dts[d], 0, 0, 4096, 4096, 4096, false, false, 16);
            size_t n_mma = space_size("matmul_mma", &mm, sm), n_simt = space_size("matmul_simt", &mm, sm),
                   n_tf32 = space_size("matmul_tf32", &mm, sm);
            printf("space sm_%d %s matmul 4096^3: matmul_mma %zu matmul_tf32 %zu matmul_simt %zu\n", sm, dn, n_mma,
                   n_tf32, n_simt);
            if (dts[d] != TUNER_F32)
                CHECK(n_mma >= (sm == 90 ? 50u : 20u) && n_mma <= 300, "matmul_mma space size %zu on sm_%d", n_mma, sm);
            else
                CHECK(n_mma == 0 && n_tf32 >= 20 && n_tf32 <= 300, "fp32 spaces: mma %zu tf32 %zu", n_mma, n_tf32);
            /* SIMT is the fp32 template (16-bit dtypes always have the tensor-core one). */
            if (dts[d] == TUNER_F32)
                CHECK(n_simt >= 20 && n_tf32 + n_simt <= 300, "fp32 space size %zu + %zu", n_tf32, n_simt);
            else
                CHECK(n_simt == 0, "matmul_simt in a 16-bit space (%zu)", n_simt);
            tuner_op cv = mk_conv(dts[d], 8, 56, 56, 64, 64, 3, 3, 1, 1, 1, 1, false, 16);
            size_t n_cv = space_size("conv2d_mma", &cv, sm), n_cvs = space_size("conv2d_simt", &cv, sm);
            printf("space sm_%d %s conv2d 8x56x56x64 k64 3x3: conv2d_mma %zu conv2d_simt %zu\n", sm, dn, n_cv, n_cvs);
            if (dts[d] != TUNER_F32)
                CHECK(n_cv >= 20 && n_cv <= 300, "conv2d_mma space size %zu on sm_%d", n_cv, sm);
            CHECK(dts[d] == TUNER_F32 ? n_cvs >= 20 && n_cvs <= 300 : n_cvs == 0, "conv2d_simt space size %zu", n_cvs);
        }
    /* Misaligned operands keep a tensor-core space (register-staged loads). */
    tuner_op odd = mk_matmul(TUNER_F16, 0, 0, 77, 1000, 333, false, false, 2);
    size_t n_odd = space_size("matmul_mma", &odd, 90);
    printf("space sm_90 f16 matmul 77x1000x333 align 2: matmul_mma %zu\n", n_odd);
    CHECK(n_odd >= 20, "misaligned space %zu", n_odd);
    /* tf32 is opt-out. */
    tuner_op f = mk_matmul(TUNER_F32, 0, 0, 64, 64, 64, false, false, 16);
    f.attrs.matmul.allow_tf32 = false;
    CHECK(space_size("matmul_tf32", &f, 90) == 0, "tf32 used without allow_tf32");
}

static void test_problem(void)
{
    tuner__gemm_problem p;
    tuner_op op = mk_matmul(TUNER_F16, 4, 0, 64, 48, 40, true, false, 16);
    CHECK(tuner__gemm_problem_init(&op, &p, NULL) == 0, "batched matmul problem");
    CHECK(p.batch == 4 && p.M == 64 && p.N == 48 && p.K == 40 && p.a_batched && !p.b_batched, "batched dims");
    CHECK(!p.kmajor[0] && !p.kmajor[1] && p.vec[0] == 8 && p.vec[1] == 8, "trans_a layout/vec");
    op = mk_matmul(TUNER_F16, 0, 0, 77, 1000, 333, false, false, 2);
    CHECK(tuner__gemm_problem_init(&op, &p, NULL) == 0 && p.vec[0] == 1 && p.vec[1] == 1, "align 2 -> scalar");
    op = mk_matmul(TUNER_F16, 0, 0, 77, 1000, 332, false, false, 8);
    CHECK(tuner__gemm_problem_init(&op, &p, NULL) == 0 && p.vec[0] == 4 && p.vec[1] == 4, "align 8 -> 4 elements");
    op = mk_conv(TUNER_F16, 2, 14, 14, 64, 128, 3, 3, 2, 1, 1, 4, false, 16);
    CHECK(tuner__gemm_problem_init(&op, &p, NULL) == 0, "conv problem");
    CHECK(p.batch == 4 && p.M == 2 * 7 * 7 && p.N == 32 && p.K == 3 * 3 * 16 && p.vec[0] == 8, "grouped conv dims");
    op.output.shape[1] = 8;
    CHECK(tuner__gemm_problem_init(&op, &p, NULL) == -EINVAL, "wrong conv output shape rejected");
    CHECK(tuner__gemm_k_per_split(1000, 4, 32) == 256 && tuner__gemm_k_per_split(64, 8, 32) == 32, "k per split");
}

static const char *const want_simt[] = {"fma.rn.f32", NULL};
static const char *const want_tf32[] = {"mma.sync.aligned.m16n8k8", "cvt.rna.tf32.f32", NULL};

/* Shapes are spread over (dtype, target) pairs so that each feature is compiled for both
 * targets and both 16-bit dtypes without compiling the full cross product. */
static void test_compile(void)
{
    static const tuner_dtype dts[] = {TUNER_F16, TUNER_BF16};
    for (int sm = 80; sm <= 90; sm += 10)
        for (int d = 0; d < 2; d++) {
            const tuner_dtype dt = dts[d];
            const bool alt = (sm == 90) == (d == 0);
            char tag[64];
            const char *dn = tuner_dtype_name(dt);
            tuner_op op = mk_matmul(dt, 0, 0, 128, 256, 64, false, false, 16);
            snprintf(tag, sizeof(tag), "mm128x256x64_%s", dn);
            check_sample(tag, "matmul_mma", &op, sm, sm == 90 ? 2 : 0, want_mma_async);
            op = mk_matmul(dt, 0, 0, 77, 1000, 333, false, false, 2);
            snprintf(tag, sizeof(tag), "mm77x1000x333_a2_%s", dn);
            check_sample(tag, "matmul_mma", &op, sm, 1, want_mma_regs);
            if (alt) {
                op = mk_matmul(dt, 3, 3, 96, 80, 72, true, true, 16);
                add_bias_gelu(&op);
                snprintf(tag, sizeof(tag), "mmbatch_tt_biasgelu_%s", dn);
                check_sample(tag, "matmul_mma", &op, sm, 1, want_mma_async);
                op = mk_matmul(dt, 4, 4, 64, 128, 32, false, true, 16);
                add_attention_mask(&op);
                snprintf(tag, sizeof(tag), "mmbatch_attention_mask_%s", dn);
                check_sample(tag, "matmul_mma", &op, sm, 1, want_mma_async);
                op = mk_conv(dt, 2, 15, 17, 12, 20, 3, 3, 2, 2, 2, 2, true, 16);
                snprintf(tag, sizeof(tag), "conv_nchw_g2_%s", dn);
                check_sample(tag, "conv2d_mma", &op, sm, 0, want_mma_regs);
                op = mk_matmul(dt, 0, 0, 130, 200, 96, false, true, 4);
                snprintf(tag, sizeof(tag), "mm_a4_cp8_%s", dn);
                check_sample(tag, "matmul_mma", &op, sm, 0, want_mma_async);
            } else {
                /* split-K lives at the end of the space (small tiles, split 8). */
                op = mk_matmul(dt, 0, 2, 16, 64, 4096, false, true, 16);
                add_residual(&op);
                add_prologue(&op);
                snprintf(tag, sizeof(tag), "mmskinny_prologue_%s", dn);
                check_sample(tag, "matmul_mma", &op, sm, 1, want_mma_regs);
                op = mk_conv(dt, 2, 28, 28, 64, 64, 3, 3, 1, 1, 1, 1, false, 16);
                add_bias_gelu(&op);
                snprintf(tag, sizeof(tag), "conv_nhwc_%s", dn);
                check_sample(tag, "conv2d_mma", &op, sm, 1, want_mma_async);

            }
        }
    for (int sm = 80; sm <= 90; sm += 10) {
        tuner_op op = mk_matmul(TUNER_F32, 0, 0, 77, 100, 133, false, false, 4);
        add_bias_gelu(&op);
        check_sample("mm_f32", "matmul_simt", &op, sm, 1, want_simt);
        check_sample("mm_f32", "matmul_tf32", &op, sm, 1, want_tf32);
        op = mk_conv(TUNER_F32, 2, 15, 17, 12, 20, 3, 3, 2, 2, 2, 2, sm == 80, 16);
        check_sample("conv_f32", "conv2d_simt", &op, sm, 1, want_simt);
        op = mk_matmul(TUNER_F32, 0, 3, 50, 70, 90, true, false, 2);
        add_prologue(&op);
        add_residual(&op);
        check_sample("mm_f32_a2_pro", sm == 80 ? "matmul_simt" : "matmul_tf32", &op, sm, 1,
                     sm == 80 ? want_simt : want_tf32);
    }
}

/* Staged epilogues (stage_out=1): present exactly when the output rows take 16-byte stores, the
 * default for a short K loop, and the programs compile (edge tiles, batches, groups, a fused
 * chain, a float output) with the staged tile's shared-memory copy-out. */
static const char *const want_staged[] = {"mma.sync.aligned.m16n8k16", "ld.shared.v4.u32", NULL};

static size_t count_staged(const tuner_op *op, int sm, const char *tmpl, tuner_schedule *first)
{
    const tuner_template *tp = find_tmpl(tmpl);
    tuner_schedule *items = NULL;
    size_t n = 0, staged = 0;
    CHECK(tp && enumerate(tp, op, sm, &items, &n) == 0, "%s: enumerate", tmpl);
    for (size_t i = 0; i < n; i++)
        if (tuner_schedule_param(&items[i], "stage_out", 0) == 1 && staged++ == 0 && first)
            *first = items[i];
    free(items);
    return staged;
}

static void test_staged_epilogue(void)
{
    tuner_schedule first;
    tuner_op op = mk_matmul(TUNER_F16, 0, 0, 130, 200, 96, false, false, 16);
    add_bias_gelu(&op);
    CHECK(count_staged(&op, 90, "matmul_mma", &first) > 0, "no staged schedule for 130x200x96");
    add_job("staged_mm130x200x96_biasgelu", &op, find_tmpl("matmul_mma"), &first, 90, want_staged, true);

    op = mk_matmul(TUNER_BF16, 3, 3, 200, 136, 96, false, true, 16);
    CHECK(count_staged(&op, 80, "matmul_mma", &first) > 0, "no staged schedule for the batched bf16 matmul");
    add_job("staged_mmbatch_bf16", &op, find_tmpl("matmul_mma"), &first, 80, want_staged, true);

    op = mk_matmul(TUNER_F16, 0, 0, 256, 128, 64, false, false, 16);
    op.output.dtype = TUNER_F32;
    op.epilogue.steps[op.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_CAST, .operand = -1, .dtype = TUNER_F32};
    CHECK(count_staged(&op, 90, "matmul_mma", &first) > 0, "no staged schedule for an f32 output");
    add_job("staged_mm_f32out", &op, find_tmpl("matmul_mma"), &first, 90, want_staged, true);

    op = mk_conv(TUNER_F16, 2, 28, 28, 64, 256, 1, 1, 1, 0, 1, 2, false, 16);
    add_bias_gelu(&op);
    CHECK(count_staged(&op, 90, "conv2d_mma", &first) > 0, "no staged schedule for a grouped NHWC conv");
    add_job("staged_conv_nhwc_g2", &op, find_tmpl("conv2d_mma"), &first, 90, want_staged, true);

    /* Rows that do not take 16-byte stores (N odd), NCHW outputs: never staged. */
    op = mk_matmul(TUNER_F16, 0, 0, 128, 1001, 96, false, false, 16);
    CHECK(count_staged(&op, 90, "matmul_mma", NULL) == 0, "staged schedule for N = 1001");
    op = mk_conv(TUNER_F16, 2, 15, 17, 16, 32, 3, 3, 1, 1, 1, 1, true, 16);
    CHECK(count_staged(&op, 90, "conv2d_mma", NULL) == 0, "staged schedule for an NCHW conv");

    /* The default stages a short K loop and not a long one. */
    tuner_schedule *items = NULL;
    size_t n = 0;
    op = mk_matmul(TUNER_F16, 0, 0, 4096, 3072, 768, false, false, 16);
    CHECK(enumerate(find_tmpl("matmul_mma"), &op, 90, &items, &n) == 0 && n > 0 &&
              tuner_schedule_param(&items[0], "stage_out", -1) == 1,
          "4096x3072x768: default not staged");
    free(items);
    items = NULL;
    op = mk_matmul(TUNER_F16, 0, 0, 4096, 4096, 4096, false, false, 16);
    CHECK(enumerate(find_tmpl("matmul_mma"), &op, 90, &items, &n) == 0 && n > 0 &&
              tuner_schedule_param(&items[0], "stage_out", -1) == 0,
          "4096^3: default staged");
    free(items);
}

/* The 192x128 tile of 48x64 warp tiles: the model's choice for 4096x768x3072 (132 tiles for 132
 * SMs, where 128x128 tiles would leave 60 SMs running two), and it compiles without spills on
 * edge tiles, staged or not, with a fused chain, for sm_80 and sm_90. */
static bool is_192x128(const tuner_schedule *s)
{
    return tuner_schedule_param(s, "block_m", 0) == 192 && tuner_schedule_param(s, "block_n", 0) == 128 &&
           tuner_schedule_param(s, "warp_m", 0) == 48 && tuner_schedule_param(s, "warp_n", 0) == 64;
}

static void test_192x128_tile(void)
{
    const tuner_template *tp = find_tmpl("matmul_mma");
    tuner_schedule *items = NULL;
    size_t n = 0;
    tuner_op op = mk_matmul(TUNER_F16, 0, 0, 4096, 768, 3072, false, false, 16);
    tuner_target t = {.sm = 90};
    CHECK(enumerate(tp, &op, 90, &items, &n) == 0 && n > 0, "4096x768x3072: enumerate");
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (tp->predict_us(&op, &t, &items[i]) < tp->predict_us(&op, &t, &items[best]))
            best = i;
    CHECK(n > 0 && is_192x128(&items[best]), "4096x768x3072: the model's best is not the 192x128 tile");
    free(items);

    for (int sm = 80; sm <= 90; sm += 10) {
        op = mk_matmul(sm == 90 ? TUNER_F16 : TUNER_BF16, 0, 0, 300, 200, 96, false, sm == 80, 16);
        add_bias_gelu(&op);
        items = NULL;
        CHECK(enumerate(tp, &op, sm, &items, &n) == 0, "300x200x96: enumerate");
        int found[2] = {0, 0};
        for (size_t i = 0; i < n; i++) {
            const int so = tuner_schedule_param(&items[i], "stage_out", 0);
            if (!is_192x128(&items[i]) || tuner_schedule_param(&items[i], "stages", 0) != 3 || found[so]++)
                continue;
            char tag[64];
            snprintf(tag, sizeof(tag), "mm192x128_%s_sm%d", so ? "staged" : "direct", sm);
            add_job(tag, &op, tp, &items[i], sm, so ? want_staged : want_mma_async, true);
        }
        CHECK(found[0] && found[1], "sm_%d: 192x128 tile missing (direct %d, staged %d)", sm, found[0], found[1]);
        free(items);
    }
}

/* Split-K where clusters exist (sm_90): every split candidate sums its K slices inside its
 * cluster, one launch and no workspace, and compiles (edge tiles, an odd N stored element by
 * element, batches, trans_b, a fused chain, register-staged prologue loads, grouped convolution);
 * sm_80 keeps the workspace and rejects the cluster form. 16-row tiles exist only for M <= 16. */
static const char *const want_cluster_split[] = {"mma.sync.aligned.m16n8k16", "barrier.cluster.arrive",
                                                 "mapa.shared::cluster", "ld.shared::cluster", NULL};

static void test_cluster_split(void)
{
    tuner_op ops[5];
    ops[0] = mk_matmul(TUNER_F16, 0, 0, 1, 4096, 4096, false, false, 16);
    ops[1] = mk_matmul(TUNER_BF16, 2, 2, 13, 999, 2000, false, true, 2);
    add_bias_gelu(&ops[1]);
    add_residual(&ops[1]);
    ops[2] = mk_matmul(TUNER_F16, 0, 0, 16, 64, 4096, false, false, 16);
    add_prologue(&ops[2]);
    ops[3] = mk_conv(TUNER_F16, 2, 7, 7, 64, 64, 3, 3, 1, 1, 1, 2, false, 16);
    add_bias_gelu(&ops[3]);
    ops[4] = mk_matmul(TUNER_F16, 0, 0, 17, 4096, 4096, false, false, 16);
    const char *names[5] = {"decode1x4096", "batched_tb_oddn", "prologue16", "conv_g2", "m17"};
    for (int i = 0; i < 5; i++) {
        const tuner_template *tp = find_tmpl(i == 3 ? "conv2d_mma" : "matmul_mma");
        for (int sm = 80; sm <= 90; sm += 10) {
            tuner_schedule *items = NULL;
            size_t n = 0;
            CHECK(enumerate(tp, &ops[i], sm, &items, &n) == 0 && n > 0, "%s: enumerate sm_%d", names[i], sm);
            size_t splits = 0, rows16 = 0, queued = 0;
            for (size_t j = 0; j < n; j++) {
                const int split = tuner_schedule_param(&items[j], "split_k", 1);
                const int in_cluster = tuner_schedule_param(&items[j], "split_cluster", -1);
                rows16 += tuner_schedule_param(&items[j], "block_m", 0) == 16;
                CHECK(in_cluster == (split > 1 && sm >= 90), "%s sm_%d: split %d with split_cluster %d", names[i], sm,
                      split, in_cluster);
                if (split == 1)
                    continue;
                splits++;
                tuner_program pr;
                memset(&pr, 0, sizeof(pr));
                char *err = NULL;
                tuner_target t = {.sm = sm};
                CHECK(tp->generate(&ops[i], &t, &items[j], &pr, &err) == 0, "%s: generate: %s", names[i], err ? err : "?");
                CHECK(sm < 90 ? pr.n_kernels == 2 && pr.workspace_bytes > 0 : pr.n_kernels == 1 && pr.workspace_bytes == 0,
                      "%s sm_%d split %d: %d kernels, workspace %zu", names[i], sm, split, pr.n_kernels, pr.workspace_bytes);
                if (sm >= 90)
                    CHECK(pr.kernels[0].grid[2] % (unsigned)split == 0, "%s: grid z %u, cluster %d", names[i],
                          pr.kernels[0].grid[2], split);
                free(pr.source);
                free(err);
                /* Compile the smallest and the largest split of the space on sm_90. */
                if (sm >= 90 && ((split == 2 && !(queued & 1)) || (split == 8 && !(queued & 2)))) {
                    queued |= split == 2 ? 1 : 2;
                    char tag[64];
                    snprintf(tag, sizeof(tag), "cluster_split%d_%s", split, names[i]);
                    add_job(tag, &ops[i], tp, &items[j], sm, want_cluster_split, false);
                }
            }
            CHECK(splits > 0, "%s sm_%d: no split-K candidate", names[i], sm);
            CHECK(sm < 90 || queued == 3, "%s: split 2 and 8 not both in the space", names[i]);
            const bool small_m = i != 3 && ops[i].output.shape[ops[i].output.rank - 2] <= 16;
            CHECK(small_m ? rows16 > 0 : rows16 == 0, "%s sm_%d: %zu 16-row tiles", names[i], sm, rows16);
            if (sm == 80 && n > 0) {
                /* The cluster form of an sm_80 split candidate is refused. */
                for (size_t j = 0; j < n; j++) {
                    if (tuner_schedule_param(&items[j], "split_k", 1) == 1)
                        continue;
                    tuner_schedule s = items[j];
                    for (int q = 0; q < s.n_params; q++)
                        if (!strcmp(s.params[q].name, "split_cluster"))
                            s.params[q].value = 1;
                    tuner_program pr;
                    memset(&pr, 0, sizeof(pr));
                    char *err = NULL;
                    CHECK(tp->generate(&ops[i], &(tuner_target){.sm = 80}, &s, &pr, &err) == -EINVAL,
                          "%s: split_cluster accepted on sm_80", names[i]);
                    free(pr.source);
                    free(err);
                    break;
                }
            }
            free(items);
        }
    }
}

static void test_references(void)
{
    tuner_op ops[4];
    ops[0] = mk_matmul(TUNER_F16, 2, 0, 77, 100, 33, true, false, 2);
    add_prologue(&ops[0]);
    add_bias_gelu(&ops[0]);
    ops[1] = mk_matmul(TUNER_F32, 0, 0, 64, 64, 64, false, true, 16);
    ops[2] = mk_conv(TUNER_BF16, 2, 15, 17, 12, 20, 3, 3, 2, 2, 2, 2, true, 16);
    add_bias_gelu(&ops[2]);
    ops[3] = mk_conv(TUNER_F16, 2, 9, 9, 16, 32, 3, 3, 1, 1, 1, 2, false, 16);
    add_residual(&ops[3]);
    for (int i = 0; i < 4; i++) {
        char tag[32];
        snprintf(tag, sizeof(tag), "ref%d", i);
        add_job(tag, &ops[i], NULL, NULL, i % 2 ? 80 : 90, NULL, false);
    }
}

int main(int argc, char **argv)
{
    if (t_subset_init(&argc, argv) < 0)
        return 2;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    test_problem();
    test_spaces();
    test_references();
    test_compile();
    test_staged_epilogue();
    test_192x128_tile();
    test_cluster_split();
    run_jobs();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("compiled %d programs in %.1f s\n", compiled,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    if (t_failures) {
        fprintf(stderr, "%d failure(s)\n", (int)t_failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
