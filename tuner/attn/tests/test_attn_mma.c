/* tuner/attn/tests/test_attn_mma.c - unit tests of attention_mma (suite tuner).
 *
 * CPU only: spaces are counted for common shapes on every target, the default schedule is
 * checked to be valid and in the space, the cost model to be finite and to rank sensibly, and
 * candidates are generated for head dims 64/80/96/128/256, f16 and bf16, both layouts, causal
 * masking with S < Skv and S > Skv, S = 1, odd S and Skv, GQA, masks of every broadcast shape in
 * f32 and f16, misaligned operands and fused epilogues, then compiled to PTX with NVRTC and
 * assembled by ptxas -v for sm_80 and sm_90a: the PTX must hold the template's instructions and
 * the default schedules of D 64/128/256 must not spill. Each case compiles its default and a few
 * candidates spread over its space; one case (D 128 on sm_80) compiles its whole space with the
 * spill check. HIDET_TEST_SAMPLE (tuner/tests/common.h) samples the non-default jobs and the
 * defaults of the cases without a spill check; with
 * TATTN_ALL=1 every candidate of every case is compiled and spill-checked (the calibration of
 * the register estimate), with TATTN_VERBOSE=1 ptxas -v's lines are printed, with TATTN_DUMP=<dir>
 * every generated source is written there, TATTN_ONLY=<substrings, comma-separated> runs the matching jobs only.
 */
#include <errno.h>
#include <math.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tuner/attn/attn.h"
#include "tuner/attn/tests/ops.h"
#include "tuner/compile_cache.h"
#include "tuner/tests/common.h"

static _Atomic int compiled;

static int enumerate(const tuner_op *op, const tuner_target *t, tuner_schedule **items, size_t *n)
{
    *items = NULL;
    *n = 0;
    if (!tuner__attn_mma.applies(op, t))
        return 0;
    return tuner__attn_mma.enumerate(op, t, items, n);
}

static size_t space_size(const tuner_op *op, const tuner_target *t)
{
    tuner_schedule *items = NULL;
    size_t n = 0;
    CHECK(enumerate(op, t, &items, &n) == 0, "enumerate");
    free(items);
    return n;
}

static bool same_schedule(const tuner_schedule *a, const tuner_schedule *b)
{
    if (a->n_params != b->n_params)
        return false;
    for (int i = 0; i < a->n_params; i++)
        if (strcmp(a->params[i].name, b->params[i].name) || a->params[i].value != b->params[i].value)
            return false;
    return true;
}

/* Index of the preferred schedule in the space (it must be there), or -1. */
static long preferred_in_space(const tuner_op *op, const tuner_target *t, const tuner_schedule *items, size_t n)
{
    tuner_schedule pref = {0};
    if (tuner__attn_mma.preferred(op, t, &pref) != 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (same_schedule(&items[i], &pref))
            return (long)i;
    return -1;
}

static ta_shape shape_of(tuner_dtype dt, long long b, long long hq, long long hkv, long long s, long long skv,
                         long long d)
{
    ta_shape sh = {.dt = dt, .b = b, .hq = hq, .hkv = hkv, .s = s, .skv = skv, .d = d};
    return sh;
}

static const tuner_target sm80 = {.sm = 80}, sm86 = {.sm = 86}, sm89 = {.sm = 89}, sm90 = {.sm = 90},
                          sm90a = {.sm = 90, .arch_specific = true}, sm100 = {.sm = 100}, sm120 = {.sm = 120};

static void test_spaces(void)
{
    const tuner_target *targets[] = {&sm80, &sm86, &sm89, &sm90, &sm90a, &sm100, &sm120};
    const char *tnames[] = {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_120"};
    static const long long dims[] = {64, 80, 96, 128, 256};
    for (size_t ti = 0; ti < sizeof(targets) / sizeof(targets[0]); ti++)
        for (size_t di = 0; di < sizeof(dims) / sizeof(dims[0]); di++) {
            ta_shape sh = shape_of(TUNER_F16, 1, 16, 16, 4096, 4096, dims[di]);
            tuner_op op = ta_attention(&sh);
            CHECK(tuner__attn_mma.applies(&op, targets[ti]), "applies on %s D %lld", tnames[ti], dims[di]);
            tuner_schedule *items = NULL;
            size_t n = 0;
            CHECK(enumerate(&op, targets[ti], &items, &n) == 0, "enumerate");
            printf("space %s f16 4096x4096 D %lld: attention_mma %zu\n", tnames[ti], dims[di], n);
            /* Tens of candidates up to D 128 where the shared memory is large (sm_80, sm_90),
             * fewer on the 100 KiB parts and on sm_100 (its ptxas needs more registers: no
             * 4-warp D 256); at D 256 a few, or the one that fits 100 KiB. */
            const int sm = targets[ti]->sm;
            const size_t min_small = sm == 80 || sm == 90 ? 20 : sm == 100 ? 16 : 12;
            const size_t min_big = sm == 80 || sm == 90 ? 5 : sm == 100 ? 3 : 1;
            CHECK(n >= (dims[di] <= 128 ? min_small : min_big) && n <= 48, "space size %zu on %s D %lld", n,
                  tnames[ti], dims[di]);
            const long pi = preferred_in_space(&op, targets[ti], items, n);
            CHECK(pi >= 0, "the preferred schedule is not in the space (%s D %lld)", tnames[ti], dims[di]);
            for (size_t i = 0; i < n; i++) {
                const double us = tuner__attn_mma.predict_us(&op, targets[ti], &items[i]);
                CHECK(us > 0 && us < 1e11 && isfinite(us), "prediction %g", us);
            }
            free(items);
        }
    /* bf16, bshd, GQA and causal masking do not change what is valid; a mask (its loads take
     * registers) leaves out the largest score tiles only. */
    ta_shape sh = shape_of(TUNER_BF16, 2, 32, 8, 4096, 4096, 128);
    sh.bshd = true;
    sh.causal = true;
    tuner_op op = ta_attention(&sh);
    ta_shape plain = shape_of(TUNER_F16, 2, 32, 32, 4096, 4096, 128);
    tuner_op op2 = ta_attention(&plain);
    CHECK(space_size(&op, &sm80) == space_size(&op2, &sm80), "space depends on flags");
    sh.mask_rank = 2;
    sh.mask_shape[0] = 4096;
    sh.mask_shape[1] = 4096;
    sh.mask_dt = TUNER_F32;
    op = ta_attention(&sh);
    const size_t n_masked = space_size(&op, &sm80);
    printf("space sm_80 bf16 4096x4096 D 128 bshd causal GQA, [S,Skv] mask: attention_mma %zu\n", n_masked);
    CHECK(n_masked >= 12 && n_masked <= space_size(&op2, &sm80), "masked space %zu", n_masked);
    /* What the templates do not take. */
    tuner_op bad = op2;
    bad.inputs[0].dtype = bad.inputs[1].dtype = bad.inputs[2].dtype = bad.output.dtype = TUNER_F32;
    CHECK(!tuner__attn_mma.applies(&bad, &sm80), "f32 attention taken");
    bad = op2;
    bad.inputs[0].shape[3] = bad.inputs[1].shape[3] = bad.inputs[2].shape[3] = bad.output.shape[3] = 48;
    CHECK(!tuner__attn_mma.applies(&bad, &sm80), "D 48 taken");
    tuner_op mm = t_matmul(TUNER_F16, 0, 0, 64, 64, 64, false, false, 16);
    CHECK(!tuner__attn_mma.applies(&mm, &sm80), "a matmul taken");
    tuner_target old = {.sm = 75};
    CHECK(!tuner__attn_mma.applies(&op2, &old), "sm_75 taken");
    /* An invalid schedule is refused with a message. */
    tuner_schedule s = {.template_name = "attention_mma"};
    s.n_params = 1;
    s.params[0].name = "block_m";
    s.params[0].value = 96;
    tuner_program pr;
    memset(&pr, 0, sizeof(pr));
    char *err = NULL;
    CHECK(tuner__attn_mma.generate(&op2, &sm80, &s, &pr, &err) == -EINVAL && err, "invalid schedule accepted");
    free(err);
}

/* The space through the tuner's own entry points: tuner_space_build lists attention_mma's
 * schedules, the default (tune:"none") is its preferred one, and ranking finds a schedule of
 * 128 query rows for a long non-causal D 128 problem. */
static void test_space_build(void)
{
    ta_shape sh = shape_of(TUNER_F16, 1, 16, 16, 4096, 4096, 128);
    tuner_op op = ta_attention(&sh);
    tuner_space *sp = NULL;
    char *err = NULL;
    CHECK(tuner_space_build(&op, &sm80, &sp, &err) == 0, "space build: %s", err ? err : "");
    free(err);
    if (!sp)
        return;
    size_t mine = 0;
    for (size_t i = 0; i < sp->n; i++)
        mine += strcmp(sp->items[i].template_name, "attention_mma") == 0;
    CHECK(mine == space_size(&op, &sm80), "space holds %zu attention_mma schedules", mine);
    tuner_schedule pref = {0};
    CHECK(tuner__attn_mma.preferred(&op, &sm80, &pref) == 0, "preferred");
    const size_t def = tuner_default_index(&op, &sm80, sp);
    CHECK(def < sp->n, "default index");
    if (def < sp->n && strcmp(sp->items[def].template_name, "attention_mma") == 0) {
        pref.template_name = "attention_mma";
        CHECK(same_schedule(&sp->items[def], &pref), "default is not the preferred schedule");
        CHECK(tuner_schedule_param(&sp->items[def], "block_m", 0) == 128 &&
                  tuner_schedule_param(&sp->items[def], "warps", 0) == 8 &&
                  tuner_schedule_param(&sp->items[def], "q_regs", 0) == 1,
              "default for D 128");
    }
    size_t *order = calloc(sp->n, sizeof(*order));
    double *pred = calloc(sp->n, sizeof(*pred));
    if (order && pred) {
        tuner_rank(&op, &sm80, sp, order, pred);
        const tuner_schedule *best = &sp->items[order[0]];
        char *j = tuner_schedule_json(best);
        printf("model's pick for f16 4096x4096 D 128 on sm_80: %s (%.1f us)\n", j ? j : "?", pred[order[0]]);
        free(j);
        if (strcmp(best->template_name, "attention_mma") == 0)
            CHECK(tuner_schedule_param(best, "block_m", 0) == 128 && tuner_schedule_param(best, "block_n", 0) >= 64,
                  "the model picks a small tile for a large problem");
        /* The whole op at the model's pick: between 40% and 100% of the mma.sync rate. */
        const double flops = 4.0 * 16 * 4096.0 * 4096.0 * 128;
        const double tflops = flops / (pred[order[0]] * 1e6);
        CHECK(tflops > 0.4 * 312 * 0.5 && tflops < 312, "predicted %.0f TFLOPS", tflops);
    }
    free(order);
    free(pred);
    /* D 256: the default re-reads Q (q_regs 0) on 64-row blocks of 4 warps. */
    sh.d = 256;
    op = ta_attention(&sh);
    CHECK(tuner__attn_mma.preferred(&op, &sm80, &pref) == 0 && tuner_schedule_param(&pref, "block_m", 0) == 64 &&
              tuner_schedule_param(&pref, "q_regs", 1) == 0 && tuner_schedule_param(&pref, "block_n", 0) == 64,
          "default for D 256 on sm_80");
    CHECK(tuner__attn_mma.preferred(&op, &sm86, &pref) == 0 && tuner_schedule_param(&pref, "block_n", 0) == 32,
          "default for D 256 on sm_86 (100 KiB of shared memory)");
    tuner_space_free(sp);
}

/* ---- compilation ---- */

static char *nvrtc_ptx(const char *src, const tuner_target *t, char **log)
{
    nvrtcProgram prog;
    *log = NULL;
    char arch[48];
    snprintf(arch, sizeof(arch), "--gpu-architecture=compute_%d%s", t->sm, t->arch_specific ? "a" : "");
    const char *opts[] = {arch, "-std=c++17", "-default-device", "--fmad=true"};
    /* The PTX of an accepted source is kept in HIDETD_COMPILE_CACHE (a tool's entry, keyed by
     * NVRTC's version, the options and the source): the test command's second build reads the
     * first's instead of compiling it again under the sanitizers. A failure is not kept. */
    char key[65];
    const char *parts[] = {"nvrtc-ptx", tuner_nvrtc_version(), opts[0], opts[1], opts[2], opts[3], src};
    if (tuner__compile_cache_dir()) {
        tuner__compile_cache_tool_key(parts, 7, key);
        char *ptx = NULL;
        if (tuner__compile_cache_get_tool(key, &ptx, NULL) == 1) {
            *log = calloc(1, 1);
            return ptx;
        }
    }
    if (nvrtcCreateProgram(&prog, src, "candidate.cu", 0, NULL, NULL) != NVRTC_SUCCESS)
        return NULL;
    nvrtcResult rc = nvrtcCompileProgram(prog, 4, opts);
    size_t ln = 0;
    nvrtcGetProgramLogSize(prog, &ln);
    *log = calloc(1, ln + 1);
    if (*log && ln)
        nvrtcGetProgramLog(prog, *log);
    char *ptx = NULL;
    if (rc == NVRTC_SUCCESS) {
        size_t pn = 0;
        nvrtcGetPTXSize(prog, &pn);
        ptx = calloc(1, pn + 1);
        if (ptx && nvrtcGetPTX(prog, ptx) == NVRTC_SUCCESS && tuner__compile_cache_dir())
            tuner__compile_cache_put_tool(key, ptx, strlen(ptx));
    }
    nvrtcDestroyProgram(&prog);
    return ptx;
}

static const char *const want_ptx[] = {"mma.sync.aligned.m16n8k16", "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
                                       "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16", "ex2.approx.ftz.f32", NULL};

typedef struct job {
    char tag[200];
    tuner_op op;
    tuner_target t;
    tuner_schedule sched;
    bool no_spill; /* ptxas must report no spills */
    bool compile;
    bool want_cp_async; /* 16-byte aligned operands: cp.async in the PTX */
} job;

static job *jobs;
static size_t n_jobs, next_job;
static pthread_mutex_t job_lock = PTHREAD_MUTEX_INITIALIZER;

static void add_job(const char *tag, const tuner_op *op, const tuner_target *t, const tuner_schedule *s,
                    bool no_spill, bool compile)
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
    j->t = *t;
    j->sched = *s;
    j->no_spill = no_spill;
    j->compile = compile;
    j->want_cp_async = true;
    for (int i = 0; i < 3; i++)
        if (op->inputs[i].align > 0 && op->inputs[i].align < 4)
            j->want_cp_async = false;
}

static void check_job(const job *j)
{
    tuner_program pr;
    memset(&pr, 0, sizeof(pr));
    char *err = NULL;
    int rc = tuner__attn_mma.generate(&j->op, &j->t, &j->sched, &pr, &err);
    CHECK(rc == 0, "%s: generate: %s", j->tag, err ? err : "?");
    free(err);
    if (rc != 0)
        return;
    /* The launch: one kernel, grid (query blocks, Hq, B), the shared memory it declares. */
    const tuner_attention_dims d = tuner_attention_dims_of(&j->op);
    const tuner_launch *l = &pr.kernels[0];
    const int bm = tuner_schedule_param(&j->sched, "block_m", 0);
    CHECK(pr.n_kernels == 1 && l->grid[0] == (unsigned)((d.s + bm - 1) / bm) && l->grid[1] == (unsigned)d.hq &&
              l->grid[2] == (unsigned)d.b,
          "%s: grid %u %u %u", j->tag, l->grid[0], l->grid[1], l->grid[2]);
    CHECK(l->block[0] == 32u * (unsigned)tuner_schedule_param(&j->sched, "warps", 0), "%s: block", j->tag);
    CHECK(l->n_args == j->op.n_inputs + 1 && l->args[l->n_args - 1] == TUNER_BUF_OUTPUT, "%s: args", j->tag);
    CHECK(pr.output_dtype == j->op.output.dtype && pr.workspace_bytes == 0, "%s: output", j->tag);
    CHECK(strstr(pr.source, l->name) != NULL, "%s: entry missing", j->tag);
    const char *dump = getenv("TATTN_DUMP");
    if (dump) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s.cu", dump, j->tag);
        FILE *f = fopen(path, "w");
        if (f) {
            fputs(pr.source, f);
            fclose(f);
        }
    }
    if (!j->compile) {
        printf("generated only: %s\n", j->tag);
        free(pr.source);
        return;
    }
    char *log = NULL;
    char *ptx = nvrtc_ptx(pr.source, &j->t, &log);
    CHECK(ptx != NULL, "%s: NVRTC failed:\n%s", j->tag, log ? log : "");
    if (!ptx && getenv("TATTN_VERBOSE"))
        fprintf(stderr, "%s\n", pr.source);
    free(log);
    if (ptx) {
        compiled++;
        for (int i = 0; want_ptx[i]; i++)
            CHECK(strstr(ptx, want_ptx[i]) != NULL, "%s: PTX lacks %s", j->tag, want_ptx[i]);
        if (j->want_cp_async)
            CHECK(strstr(ptx, "cp.async") != NULL, "%s: PTX lacks cp.async", j->tag);
        /* ptxas -v for the real target (t_ptxas: the test command's second build reads the
         * first's report). */
        char arch[16];
        snprintf(arch, sizeof(arch), "sm_%d%s", j->t.sm, j->t.arch_specific ? "a" : "");
        char *out = NULL;
        int st = t_ptxas(ptx, arch, "-v", &out);
        CHECK(st == 0, "%s: ptxas rejected the PTX:\n%s", j->tag, out ? out : "");
        if (st == 0 && out) {
            const char *u = strstr(out, "Used ");
            int regs = u ? atoi(u + 5) : -1;
            const char *sp = strstr(out, "bytes spill stores");
            const char *b = sp;
            while (b && b > out && b[-1] != '\n' && b[-1] != ',')
                b--;
            const bool spills = b && strncmp(b + strspn(b, " "), "0 bytes spill stores, 0 bytes spill loads", 41);
            if (getenv("TATTN_VERBOSE") || (spills && !j->no_spill))
                printf("ptxas: %s: %d registers%s\n", j->tag, regs, spills ? ", SPILLS" : "");
            if (j->no_spill)
                CHECK(!spills, "%s: spills: %.60s", j->tag, b ? b : "");
        }
        free(out);
        free(ptx);
    }
    free(pr.source);
}

/* TATTN_ONLY: comma-separated substrings of the tags to run (all when unset). */
static bool selected(const char *tag)
{
    const char *only = getenv("TATTN_ONLY");
    if (!only || !*only)
        return true;
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", only);
    for (char *save = NULL, *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save))
        if (strstr(tag, w))
            return true;
    return false;
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
        if (!selected(jobs[i].tag))
            continue;
        check_job(&jobs[i]);
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

/* Queues case `tag` on target t: its preferred schedule (job 0, always compiled, checked for
 * spills where no_spill) and `extra` more spread over its space (all of it when extra < 0 or
 * TATTN_ALL is set), those sampled by HIDET_TEST_SAMPLE. */
static void add_case(const char *tag, const tuner_op *op, const tuner_target *t, int extra, bool no_spill)
{
    tuner_schedule *items = NULL;
    size_t n = 0;
    CHECK(enumerate(op, t, &items, &n) == 0 && n > 0, "%s: no candidate", tag);
    if (n == 0) {
        free(items);
        return;
    }
    const long pi = preferred_in_space(op, t, items, n);
    CHECK(pi >= 0, "%s: the preferred schedule is not in the space", tag);
    const bool all = extra < 0 || getenv("TATTN_ALL");
    char tn[16];
    tuner_target_name(t, tn, sizeof(tn));
    /* Job 0: the preferred schedule; then the others in space order. */
    size_t j = 0;
    char name[200];
    if (pi >= 0) {
        /* A sampling run (the test command's builds) compiles the defaults whose spills are
         * checked, and of the others one case in S (HIDET_TEST_SAMPLE): every default still
         * generates. */
        static size_t n_cases;
        const bool compile = (no_spill && (t->sm == 80 || t->arch_specific || t_sub.every <= 2)) || !t_sampling() ||
                             t_in_sample(n_cases++) || getenv("TATTN_ALL");
        snprintf(name, sizeof(name), "%s_%s_default", tag, tn);
        add_job(name, op, t, &items[pi], no_spill || getenv("TATTN_ALL"), compile);
        j++;
    }
    size_t picked = 0;
    for (size_t i = 0; i < n; i++) {
        if ((long)i == pi)
            continue;
        /* Spread: the i-th of n when extra of them are wanted. */
        if (!all && (picked >= (size_t)extra || i * (size_t)extra / n != picked))
            continue;
        picked++;
        snprintf(name, sizeof(name), "%s_%s_c%zu_bm%d_bn%d_w%d_s%d_q%d", tag, tn, i,
                 tuner_schedule_param(&items[i], "block_m", 0), tuner_schedule_param(&items[i], "block_n", 0),
                 tuner_schedule_param(&items[i], "warps", 0), tuner_schedule_param(&items[i], "stages", 0),
                 tuner_schedule_param(&items[i], "q_regs", 0));
        add_job(name, op, t, &items[i], all && (no_spill || getenv("TATTN_ALL")), t_in_sample(j) || getenv("TATTN_ALL"));
        j++;
    }
    free(items);
}

/* A scale (or cast to bf16 and a scale) after the softmax. */
static void add_epilogue(tuner_op *op, bool cast)
{
    if (cast)
        op->epilogue.steps[op->epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_CAST, .operand = -1, .dtype = TUNER_BF16};
    op->epilogue.steps[op->epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_SCALE, .operand = -1, .scalar = 0.5};
}

/* The packed layout's addressing: q at in0, k and v at in0 plus Hq and Hq + Hkv heads, all with
 * qkv's row stride (Hq + 2 Hkv) * D; the mask in1; the output [B,S,Hq,D]. */
static void test_packed_source(void)
{
    ta_shape sh = shape_of(TUNER_F16, 2, 8, 2, 100, 100, 64);
    sh.packed = true;
    sh.mask_rank = 2;
    sh.mask_dt = TUNER_F32;
    sh.mask_shape[0] = 100;
    sh.mask_shape[1] = 100;
    tuner_op op = ta_attention(&sh);
    tuner__attn_problem p;
    CHECK(tuner__attn_problem_init(&op, &p, NULL) == 0, "packed problem");
    CHECK(p.packed && p.d.hq == 8 && p.d.hkv == 2 && p.d.s == 100 && p.d.skv == 100 && p.d.has_mask && p.mask_in == 1,
          "packed dims");
    CHECK(p.q_ss == 12 * 64 && p.kv_ss == 12 * 64 && p.q_sh == 64 && p.q_sb == 100 * 12 * 64 && p.kv_sb == p.q_sb &&
              p.o_ss == 8 * 64 && p.o_sb == 100 * 8 * 64 && p.k_head0 == 8 && p.v_head0 == 10,
          "packed strides");
    CHECK(!strcmp(p.q_ptr, "in0") && !strcmp(p.k_ptr, "(in0 + 512LL)") && !strcmp(p.v_ptr, "(in0 + 640LL)"),
          "packed pointers %s %s %s", p.q_ptr, p.k_ptr, p.v_ptr);
    tuner_schedule s = {0};
    CHECK(tuner__attn_mma.preferred(&op, &sm80, &s) == 0, "packed preferred");
    tuner_program pr;
    memset(&pr, 0, sizeof(pr));
    CHECK(tuner__attn_mma.generate(&op, &sm80, &s, &pr, NULL) == 0, "packed generate");
    if (pr.source) {
        CHECK(strstr(pr.source, "(in0 + 512LL)") && strstr(pr.source, "(in0 + 640LL)") && strstr(pr.source, "hd_f32(in1[") &&
                  !strstr(pr.source, "in2") && !strstr(pr.source, "in3"),
              "packed source addressing");
        CHECK(pr.kernels[0].n_args == 3 && pr.kernels[0].args[0] == TUNER_BUF_INPUT0 &&
                  pr.kernels[0].args[1] == TUNER_BUF_INPUT0 + 1, "packed args");
    }
    free(pr.source);
    /* The unpacked layouts keep in1 / in2 / in3. */
    sh.packed = false;
    sh.bshd = true;
    op = ta_attention(&sh);
    CHECK(tuner__attn_problem_init(&op, &p, NULL) == 0 && !strcmp(p.k_ptr, "in1") && !strcmp(p.v_ptr, "in2") &&
              p.mask_in == 3 && p.o_ss == p.q_ss && p.o_sb == p.q_sb, "bshd pointers");
}

static void test_compile(void)
{
    const tuner_target *targets[2] = {&sm80, &sm90a};
    for (int ti = 0; ti < 2; ti++) {
        const tuner_target *t = targets[ti];
        const bool alt = ti == 1;
        const tuner_dtype dt = alt ? TUNER_BF16 : TUNER_F16, dt2 = alt ? TUNER_F16 : TUNER_BF16;
        char tag[128];
        /* Every head dim; the defaults of D 64, 128 and 256 must not spill. */
        static const long long dims[] = {64, 80, 96, 128, 256};
        for (size_t di = 0; di < 5; di++) {
            ta_shape sh = shape_of(di % 2 ? dt2 : dt, 2, 8, 8, 512, 512, dims[di]);
            tuner_op op = ta_attention(&sh);
            snprintf(tag, sizeof(tag), "d%lld_%s", dims[di], tuner_dtype_name(sh.dt));
            /* The D 128 case on sm_80 compiles its whole space. */
            add_case(tag, &op, t, dims[di] == 128 && ti == 0 ? -1 : 2, dims[di] % 64 == 0);
        }
        /* bshd, causal with S < Skv (decoder with a cache) and S > Skv (rows with no key). */
        ta_shape sh = shape_of(dt, 2, 8, 8, 300, 1000, 128);
        sh.bshd = true;
        sh.causal = true;
        tuner_op op = ta_attention(&sh);
        add_case("bshd_causal_s300_skv1000", &op, t, 2, false);
        sh = shape_of(dt2, 1, 4, 4, 1000, 300, 64);
        sh.causal = true;
        op = ta_attention(&sh);
        add_case("causal_s1000_skv300", &op, t, 2, false);
        /* S = 1 and odd lengths. */
        sh = shape_of(dt, 4, 8, 8, 1, 333, 128);
        op = ta_attention(&sh);
        add_case("s1_skv333", &op, t, 1, false);
        sh = shape_of(dt, 2, 8, 8, 77, 333, 80);
        sh.causal = true;
        op = ta_attention(&sh);
        add_case("s77_skv333_causal_d80", &op, t, 1, false);
        /* GQA: 8 query heads on 2 kv heads, both layouts. */
        for (int bshd = 0; bshd < 2; bshd++) {
            sh = shape_of(bshd ? dt2 : dt, 2, 8, 2, 257, 257, 128);
            sh.bshd = bshd;
            op = ta_attention(&sh);
            snprintf(tag, sizeof(tag), "gqa8x2_%s", bshd ? "bshd" : "bhsd");
            add_case(tag, &op, t, 1, false);
        }
        /* Masks: [Skv], [S, Skv], [B, 1, 1, Skv], [B, Hq, S, Skv], f32 and f16 (bf16 too). */
        static const int ranks[] = {1, 2, 4, 4};
        for (int mi = 0; mi < 4; mi++)
            for (int mdi = 0; mdi < 2; mdi++) {
                const long long B = 2, H = 4, S = 77, SKV = 333;
                sh = shape_of(dt, B, H, H, S, SKV, mi % 2 ? 64 : 128);
                sh.mask_rank = ranks[mi];
                sh.mask_dt = mdi ? (alt ? TUNER_BF16 : TUNER_F16) : TUNER_F32;
                const long long shapes[4][4] = {{SKV}, {S, SKV}, {B, 1, 1, SKV}, {B, H, S, SKV}};
                memcpy(sh.mask_shape, shapes[mi], sizeof(sh.mask_shape));
                sh.causal = mi == 3;
                op = ta_attention(&sh);
                snprintf(tag, sizeof(tag), "mask_r%d_%d_%s", ranks[mi], mi, tuner_dtype_name(sh.mask_dt));
                add_case(tag, &op, t, mi == 3 ? 1 : 0, false);
            }
        /* Epilogues: a scale; a cast and a scale, on bshd. */
        sh = shape_of(dt, 2, 8, 8, 200, 200, 96);
        op = ta_attention(&sh);
        add_epilogue(&op, false);
        add_case("epi_scale_d96", &op, t, 1, false);
        sh.bshd = true;
        sh.d = 128;
        op = ta_attention(&sh);
        add_epilogue(&op, true);
        add_case("epi_cast_scale_bshd", &op, t, 1, false);
        /* Misaligned operands: 8-byte and 2-byte aligned q, k, v and a 2-byte aligned output. */
        static const int aligns[] = {8, 4, 2};
        for (int ai = 0; ai < 3; ai++) {
            sh = shape_of(dt, 1, 4, 4, 100, 100, 64);
            op = ta_attention(&sh);
            for (int i = 0; i < 3; i++)
                op.inputs[i].align = aligns[ai];
            op.output.align = aligns[ai] < 4 ? 2 : 16;
            snprintf(tag, sizeof(tag), "align%d", aligns[ai]);
            add_case(tag, &op, t, 0, false);
        }
    }
    /* bshd_packed: q, k, v out of one qkv [B,S,Hq+2Hkv,D]: GPT-2's block (the default must not
     * spill), GQA with a [B,1,1,S] mask (inputs[1]), D 80 and an 8-byte aligned qkv, on both
     * targets. */
    for (int ti = 0; ti < 2; ti++) {
        const tuner_target *t = targets[ti];
        ta_shape sh = shape_of(TUNER_F16, 8, 12, 12, 512, 512, 64);
        sh.packed = sh.causal = true;
        tuner_op op = ta_attention(&sh);
        add_case("packed_gpt2_causal", &op, t, 1, true);
        sh = shape_of(TUNER_BF16, 2, 8, 2, 257, 257, 128);
        sh.packed = true;
        sh.mask_rank = 4;
        sh.mask_dt = TUNER_F32;
        memcpy(sh.mask_shape, (long long[4]){2, 1, 1, 257}, sizeof(sh.mask_shape));
        op = ta_attention(&sh);
        add_case("packed_gqa8x2_mask", &op, t, 1, false);
        sh = shape_of(TUNER_F16, 1, 4, 4, 100, 100, 80);
        sh.packed = true;
        op = ta_attention(&sh);
        op.inputs[0].align = 8;
        add_epilogue(&op, false);
        add_case("packed_d80_align8_epi", &op, t, 0, false);
    }
    /* The other targets run the same mma.sync code: their defaults (D 128 and D 256, whose
     * 100 KiB parts take 32-key tiles) compile without spills too. */
    const tuner_target *others[] = {&sm86, &sm89, &sm90, &sm100, &sm120};
    for (size_t ti = 0; ti < sizeof(others) / sizeof(others[0]); ti++)
        for (long long d = 128; d <= 256; d *= 2) {
            ta_shape sh = shape_of(TUNER_BF16, 1, 8, 8, 1000, 1000, d);
            sh.causal = true;
            tuner_op op = ta_attention(&sh);
            char tag[32];
            snprintf(tag, sizeof(tag), "other_d%lld", d);
            add_case(tag, &op, others[ti], 0, true);
        }
    run_jobs();
}

int main(int argc, char **argv)
{
    if (t_subset_init(&argc, argv) < 0)
        return 2;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    test_spaces();
    test_space_build();
    test_packed_source();
    test_compile();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("compiled %d programs in %.1f s\n", (int)compiled,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    if (t_failures) {
        fprintf(stderr, "%d failure(s)\n", (int)t_failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
