/* tuner/tests/test_core.c - spaces and generated code of the core templates.
 *
 * Usage: test_core GROUP (softmax, layernorm, rmsnorm, reduce, elementwise, layout, conv_direct,
 * conv_grouped, pool, gather). For every case of
 * the group x dtype x {sm_80, sm_90}: the space is built (its size printed), ranked, its default
 * chosen, and a deterministic sample of candidates (10 evenly spaced for a group's main case, 4
 * for its variants, plus the default and the model's best) and the reference are generated, compiled with NVRTC and the
 * PTX handed to ptxas. Cases include odd sizes (77 rows of 1000, 1 row of 8192+1, ...), align=2
 * inputs (only scalar candidates may be valid) and fused epilogues. Prints the median NVRTC time.
 * With HIDET_TEST_SAMPLE=S (the sanitizer build, common.h) a case compiles its default and every
 * S-th of its other picks (and every S-th case its reference), and every candidate of each space
 * is generated and its launches checked.
 */
#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/template.h"

#define MAX_TIMES 4096
static double times[MAX_TIMES];
static int n_times;
static size_t n_cases; /* cases run so far: which references a sampled run compiles */

static bool launch_sane(const tuner_program *p, const tuner_op *op)
{
    if (p->n_kernels < 1 || p->n_kernels > TUNER_MAX_KERNELS)
        return false;
    for (int k = 0; k < p->n_kernels; k++) {
        const tuner_launch *l = &p->kernels[k];
        unsigned threads = l->block[0] * l->block[1] * l->block[2];
        if (threads < 1 || threads > 1024 || l->grid[0] < 1 || l->grid[1] < 1 || l->grid[2] < 1 ||
            l->grid[1] > 65535 || l->grid[2] > 65535)
            return false;
        bool has_out = false;
        for (int a = 0; a < l->n_args; a++) {
            int b = l->args[a];
            if (b == TUNER_BUF_OUTPUT)
                has_out = true;
            else if (b == TUNER_BUF_WORKSPACE) {
                if (p->workspace_bytes == 0)
                    return false;
            } else if (b < TUNER_BUF_INPUT0 || b >= TUNER_BUF_INPUT0 + op->n_inputs)
                return false;
        }
        if (!has_out)
            return false;
    }
    return true;
}

static bool has_vec(const tuner_schedule *s)
{
    return tuner_schedule_param(s, "vec", 1) > 1;
}

/* Candidates compiled per case: >= 10 for the first case of a group and dtype, fewer for the
 * variants (odd sizes, alignment, split) so that the suite stays fast on a 2-core machine. */
static int sample_size = 10;

/* A long column reduction: the space offers split (two-kernel) candidates, the default splits,
 * and a split program has the partial and the combining kernel over a workspace of split
 * column partials. */
static void check_cols_split(const char *name, const tuner_op *op, const tuner_target *t)
{
    tuner_space *sp = NULL;
    char *err = NULL;
    CHECK(tuner_space_build(op, t, &sp, &err) == 0, "%s: space: %s", name, err ? err : "?");
    free(err);
    if (!sp)
        return;
    size_t splits = 0;
    for (size_t i = 0; i < sp->n; i++)
        splits += tuner_schedule_param(&sp->items[i], "split", 1) > 1;
    CHECK(splits > 0, "%s: no split candidates", name);
    const tuner_schedule *def = &sp->items[tuner_default_index(op, t, sp)];
    const int split = tuner_schedule_param(def, "split", 1);
    CHECK(split > 1, "%s: the default does not split", name);
    tuner_program *p = NULL;
    err = NULL;
    CHECK(tuner_generate(op, t, def, &p, &err) == 0 && p, "%s: generate: %s", name, err ? err : "?");
    free(err);
    long long cols = tuner_tensor_numel(&op->output);
    CHECK(p && p->n_kernels == 2 && !strcmp(p->kernels[0].name, "hd_reduce_cols_part") &&
              !strcmp(p->kernels[1].name, "hd_reduce_cols_fin") && (long long)p->kernels[0].grid[1] == split &&
              p->workspace_bytes == (size_t)(split * cols) * sizeof(float),
          "%s: split program shape (kernels %d, workspace %zu)", name, p ? p->n_kernels : -1,
          p ? p->workspace_bytes : 0);
    tuner_program_free(p);
    tuner_space_free(sp);
}

/* Generates schedule s of op (described as `what` in failures), checks its launch description and
 * output dtype and compiles it through NVRTC and ptxas; *ms gets the NVRTC time (ms may be NULL).
 * The program, whatever the checks said (the caller frees it), or NULL when generation failed. */
static tuner_program *generate_checked(const char *what, const tuner_op *op, const tuner_target *t,
                                       const tuner_schedule *s, double *ms)
{
    tuner_program *p = NULL;
    char *err = NULL;
    const int r = tuner_generate(op, t, s, &p, &err);
    CHECK(r == 0, "%s: generate: %s", what, err ? err : "?");
    free(err);
    if (r < 0)
        return NULL;
    CHECK(launch_sane(p, op), "%s: launch description", what);
    CHECK(p->output_dtype == op->output.dtype, "%s: output dtype", what);
    CHECK(t_compile_check(what, p->source, t, p, ms), "%s: compile", what);
    return p;
}

static void run_case(const char *name, const tuner_op *op, const tuner_target *t, bool expect_scalar_only)
{
    char tn[16], what[256];
    tuner_target_name(t, tn, sizeof(tn));
    tuner_space *sp = NULL;
    char *err = NULL;
    int r = tuner_space_build(op, t, &sp, &err);
    CHECK(r == 0, "%s %s: space: %s", name, tn, err ? err : "?");
    free(err);
    if (r < 0)
        return;
    size_t *order = malloc(sp->n * sizeof(*order));
    double *pred = malloc(sp->n * sizeof(*pred));
    tuner_rank(op, t, sp, order, pred);
    size_t def = tuner_default_index(op, t, sp);
    CHECK(def < sp->n, "%s: default index", name);
    int vec_items = 0;
    for (size_t i = 0; i < sp->n; i++) {
        vec_items += has_vec(&sp->items[i]);
        CHECK(pred[i] > 0 && pred[i] < 1e11, "%s: prediction %g", name, pred[i]);
        if (i > 0)
            CHECK(pred[order[i - 1]] <= pred[order[i]], "%s: ranking not sorted", name);
    }
    if (expect_scalar_only)
        CHECK(vec_items == 0, "%s %s: %d vector candidates despite align < 16", name, tn, vec_items);
    char *dj = tuner_schedule_json(&sp->items[def]);
    char *bj = tuner_schedule_json(&sp->items[order[0]]);
    printf("%-34s %-6s space %4zu (vec %3d)  default %s  best %s %.1fus\n", name, tn, sp->n, vec_items, dj ? dj : "?",
           bj ? bj : "?", pred[order[0]]);
    free(dj);
    free(bj);

    /* Deterministic sample. */
    size_t pick[40];
    int np = 0;
    if (sp->n <= (size_t)sample_size) {
        for (size_t i = 0; i < sp->n; i++)
            pick[np++] = i;
    } else {
        for (int i = 0; i < sample_size; i++)
            pick[np++] = (size_t)i * (sp->n - 1) / (size_t)(sample_size - 1);
    }
    pick[np++] = def;
    pick[np++] = order[0];
    /* Sampled (HIDET_TEST_SAMPLE, common.h): the default (tune:"none") is compiled always, the
     * others and the reference by the sample, and every candidate of the space is generated and
     * its launches checked (cheap, and the generators are what the sanitizers are for). */
    size_t others = 0, taken = 0;
    for (int i = 0; i < np; i++) {
        bool dup = false;
        for (int j = 0; j < i; j++)
            dup = dup || pick[j] == pick[i];
        if (dup)
            continue;
        if (pick[i] != def && !t_in_sample(++others))
            continue;
        taken++;
        const tuner_schedule *s = &sp->items[pick[i]];
        char *sj = tuner_schedule_json(s);
        snprintf(what, sizeof(what), "%s %s %s", name, tn, sj ? sj : "?");
        free(sj);
        double ms = 0;
        tuner_program *p = generate_checked(what, op, t, s, &ms);
        if (!p)
            continue;
        if (n_times < MAX_TIMES)
            times[n_times++] = ms;
        tuner_program_free(p);
    }
    if (t_sampling()) {
        int generated = 0;
        for (size_t i = 0; i < sp->n; i++) {
            tuner_program *p = NULL;
            err = NULL;
            snprintf(what, sizeof(what), "%s %s candidate %zu", name, tn, i);
            r = tuner_generate(op, t, &sp->items[i], &p, &err);
            CHECK(r == 0, "%s: generate: %s", what, err ? err : "?");
            free(err);
            if (r < 0)
                continue;
            CHECK(launch_sane(p, op) && p->output_dtype == op->output.dtype, "%s: launches", what);
            generated++;
            tuner_program_free(p);
        }
        printf("%-34s %-6s sampled: compiled %zu of %zu picks (the default and every %d-th other)%s, generated all %d\n",
               name, tn, taken, others + 1, t_sub.every, t_in_sample(n_cases) ? " and the reference" : "", generated);
    }
    tuner_program *ref = NULL;
    err = NULL;
    r = tuner_reference(op, t, &ref, &err);
    CHECK(r == 0, "%s %s: reference: %s", name, tn, err ? err : "?");
    free(err);
    if (r == 0) {
        snprintf(what, sizeof(what), "%s %s reference", name, tn);
        CHECK(ref->output_dtype == TUNER_F32 && launch_sane(ref, op), "%s: launch", what);
        if (t_in_sample(n_cases))
            CHECK(t_compile_check(what, ref->source, t, ref, NULL), "%s: compile", what);
        tuner_program_free(ref);
    }
    n_cases++;
    free(order);
    free(pred);
    tuner_space_free(sp);
}

/* conv2d_direct's shared input rows and register cap: a depthwise (vector) space offers tp 2 and
 * 4 and, with 16-bit channels, regs 128 (its program asks for the blocks per SM that leave 128
 * registers), and one candidate of each compiles; scalar paths (channel multipliers, groups)
 * offer none. */
static void check_direct_rows(const char *name, const tuner_op *op, const tuner_target *t, bool vector)
{
    tuner_space *sp = NULL;
    char *err = NULL;
    int r = tuner_space_build(op, t, &sp, &err);
    CHECK(r == 0, "%s: space: %s", name, err ? err : "?");
    free(err);
    if (r < 0)
        return;
    static const struct { const char *param; int value; } kinds[] = {{"tp", 2}, {"tp", 4}, {"regs", 128}};
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        const char *param = kinds[k].param;
        const int value = kinds[k].value;
        size_t first = sp->n;
        for (size_t i = 0; i < sp->n && first == sp->n; i++)
            if (tuner_schedule_param(&sp->items[i], param, 0) == value)
                first = i;
        if (!vector) {
            CHECK(first == sp->n, "%s: scalar space offers %s %d", name, param, value);
            continue;
        }
        /* fp32 vectors are 4 channels: too few accumulators and window values to need a cap. */
        if (!strcmp(param, "regs") && tuner_dtype_size(op->output.dtype) == 4)
            continue;
        CHECK(first < sp->n, "%s: no %s %d candidate", name, param, value);
        if (first == sp->n)
            continue;
        char what[160];
        snprintf(what, sizeof(what), "%s %s %d", name, param, value);
        tuner_program *p = generate_checked(what, op, t, &sp->items[first], NULL);
        if (!p)
            continue;
        if (!strcmp(param, "regs")) {
            const char *lb = strstr(p->source, "__launch_bounds__(");
            int threads = 0, blocks = 0;
            CHECK(lb && sscanf(lb, "__launch_bounds__(%d, %d)", &threads, &blocks) == 2 && blocks >= 2 &&
                      (threads + 31) / 32 * 32 * 128 * blocks <= 65536,
                  "%s: no blocks-per-SM bound that leaves 128 registers", what);
        }
        tuner_program_free(p);
    }
    tuner_space_free(sp);
}

/* conv2d_grouped (few channels per group on tensor cores): the template fills part of the space,
 * its schedule is the default (tune:"none") and it holds the model's best among its own, and
 * the default, `n_pick` of its candidates evenly spaced and its model-best (these two by the
 * sample, HIDET_TEST_SAMPLE) compile through NVRTC and ptxas. With `expect` false it must not apply (f32, unaligned, odd cpg). */
static void check_grouped(const char *name, const tuner_op *op, const tuner_target *t, bool expect, int n_pick)
{
    char tn[16], what[256];
    tuner_target_name(t, tn, sizeof(tn));
    tuner_space *sp = NULL;
    char *err = NULL;
    int r = tuner_space_build(op, t, &sp, &err);
    CHECK(r == 0, "%s %s: space: %s", name, tn, err ? err : "?");
    free(err);
    if (r < 0)
        return;
    size_t *mine = malloc(sp->n * sizeof(*mine)), n_mine = 0;
    for (size_t i = 0; i < sp->n; i++)
        if (!strcmp(sp->items[i].template_name, "conv2d_grouped"))
            mine[n_mine++] = i;
    const size_t def = tuner_default_index(op, t, sp);
    if (!expect) {
        CHECK(n_mine == 0, "%s %s: conv2d_grouped offers %zu candidates where it must not apply", name, tn, n_mine);
        printf("%-44s %-6s conv2d_grouped: none (as expected), default %s\n", name, tn,
               def < sp->n ? sp->items[def].template_name : "?");
        free(mine);
        tuner_space_free(sp);
        return;
    }
    CHECK(n_mine > 0, "%s %s: no conv2d_grouped candidates", name, tn);
    CHECK(def < sp->n && !strcmp(sp->items[def].template_name, "conv2d_grouped"), "%s %s: default is %s", name, tn,
          def < sp->n ? sp->items[def].template_name : "?");
    size_t best = n_mine ? mine[0] : 0;
    double best_us = 1e30;
    for (size_t i = 0; i < n_mine; i++) {
        const double us = tuner_predict_us(op, t, &sp->items[mine[i]]);
        CHECK(us > 0 && us < 1e11, "%s %s: prediction %g", name, tn, us);
        if (us < best_us) {
            best_us = us;
            best = mine[i];
        }
    }
    CHECK(n_mine == 0 || tuner_predict_us(op, t, &sp->items[def]) <= best_us * 1.0001,
          "%s %s: the default is not the model's best of conv2d_grouped", name, tn);
    char *dj = def < sp->n ? tuner_schedule_json(&sp->items[def]) : NULL;
    printf("%-44s %-6s conv2d_grouped %4zu of %4zu  default %s %.1fus\n", name, tn, n_mine, sp->n, dj ? dj : "?",
           best_us);
    free(dj);
    size_t pick[16];
    int np = 0;
    for (int i = 0; i < n_pick && n_mine > 0; i++)
        pick[np++] = mine[n_pick > 1 ? (size_t)i * (n_mine - 1) / (size_t)(n_pick - 1) : 0];
    pick[np++] = def;
    pick[np++] = best;
    for (int i = 0; i < np && n_mine > 0; i++) {
        bool dup = false;
        for (int j = 0; j < i; j++)
            dup = dup || pick[j] == pick[i];
        /* The default always; the others by the sample (common.h: every 8th in the suite). */
        static size_t grouped_others;
        if (dup || (pick[i] != def && !t_in_sample(++grouped_others)))
            continue;
        char *sj = tuner_schedule_json(&sp->items[pick[i]]);
        snprintf(what, sizeof(what), "%s %s %s", name, tn, sj ? sj : "?");
        free(sj);
        double ms = 0;
        tuner_program *p = generate_checked(what, op, t, &sp->items[pick[i]], &ms);
        if (n_times < MAX_TIMES)
            times[n_times++] = ms;
        tuner_program_free(p);
    }
    free(mine);
    tuner_space_free(sp);
}

static const tuner_dtype dts[3] = {TUNER_F16, TUNER_BF16, TUNER_F32};

/* FP8 in elementwise kernels (issue 41): a quantize (x * scale, cast to FP8), a dequantize (FP8
 * cast to dt, * scale) and FP8 operands of odd sizes; the default's source converts with the
 * hardware cvt on sm_89+ (c10's algorithm below it), reads and writes FP8 16 bytes at a time
 * where the sizes allow, and drops the last cast that the store does itself. */
static void check_fp8_elementwise(const tuner_target *t, tuner_dtype dt, tuner_dtype f8)
{
    char name[128], tn[16];
    tuner_target_name(t, tn, sizeof(tn));
    const char *dn = tuner_dtype_name(dt), *fn = tuner_dtype_name(f8);
    const bool hw = t->sm >= 89;
    const long long x[2] = {64, 1024}, one[1] = {1}, odd[2] = {7, 33}, v[1] = {33};
    for (int c = 0; c < 3; c++) {
        tuner_op op;
        memset(&op, 0, sizeof(op));
        op.kind = TUNER_OP_ELEMENTWISE;
        op.n_inputs = 2;
        op.n_anchor_inputs = 1;
        if (c == 0) { /* quantize: x * scale, cast to FP8 */
            op.inputs[0] = t_tensor(dt, 2, x, 16);
            op.inputs[1] = t_tensor(TUNER_F32, 1, one, 16);
            op.output = t_tensor(f8, 2, x, 16);
            op.epilogue.steps[0] = (tuner_ew_step){.kind = TUNER_EW_MUL, .operand = 1};
            op.epilogue.steps[1] = (tuner_ew_step){.kind = TUNER_EW_CAST, .operand = -1, .dtype = f8};
            op.epilogue.n = 2;
            snprintf(name, sizeof(name), "elementwise %s*s->%s", dn, fn);
        } else if (c == 1) { /* dequantize: FP8 to dt, * scale */
            op.inputs[0] = t_tensor(f8, 2, x, 16);
            op.inputs[1] = t_tensor(TUNER_F32, 1, one, 16);
            op.output = t_tensor(dt, 2, x, 16);
            op.epilogue.steps[0] = (tuner_ew_step){.kind = TUNER_EW_CAST, .operand = -1, .dtype = dt};
            op.epilogue.steps[1] = (tuner_ew_step){.kind = TUNER_EW_MUL, .operand = 1};
            op.epilogue.n = 2;
            snprintf(name, sizeof(name), "elementwise %s->%s*s", fn, dn);
        } else { /* odd sizes, an FP8 operand, a cast through FP8 in the middle */
            op.inputs[0] = t_tensor(f8, 2, odd, 1);
            op.inputs[1] = t_tensor(f8 == TUNER_F8E4M3 ? TUNER_F8E5M2 : TUNER_F8E4M3, 1, v, 1);
            op.output = t_tensor(dt, 2, odd, 2);
            op.epilogue.steps[0] = (tuner_ew_step){.kind = TUNER_EW_ADD, .operand = 1};
            op.epilogue.steps[1] = (tuner_ew_step){.kind = TUNER_EW_CAST, .operand = -1, .dtype = f8};
            op.epilogue.steps[2] = (tuner_ew_step){.kind = TUNER_EW_CAST, .operand = -1, .dtype = dt};
            op.epilogue.n = 3;
            snprintf(name, sizeof(name), "elementwise %s+f8->%s odd", fn, dn);
        }
        sample_size = 3;
        run_case(name, &op, t, c == 2);
        /* The default's source: vectors of 16 FP8 bytes, the conversion the target has. */
        tuner_space *sp = NULL;
        char *err = NULL;
        if (tuner_space_build(&op, t, &sp, &err) != 0) {
            free(err);
            continue;
        }
        const tuner_schedule *def = &sp->items[tuner_default_index(&op, t, sp)];
        tuner_program *p = NULL;
        CHECK(tuner_generate(&op, t, def, &p, &err) == 0, "%s %s: generate: %s", name, tn, err ? err : "?");
        free(err);
        if (p) {
            const char *src = p->source;
            CHECK(strstr(src, hw ? "cvt.rn.satfinite.e4m3x2.f32" : "hd_e4m3_from_f32_sw") != NULL, "%s %s: conversion",
                  name, tn);
            if (c < 2)
                CHECK(tuner_schedule_param(def, "vec", 1) == 16, "%s %s: default vec %d, not 16 FP8 bytes", name, tn,
                      tuner_schedule_param(def, "vec", 1));
            if (c == 0)
                CHECK(strstr(src, "= hd_cast_f8") == NULL && strstr(src, "hd_stn_f32<hd_f8") != NULL,
                      "%s %s: the last cast is the store's", name, tn);
            if (c == 2)
                CHECK(strstr(src, "= hd_cast_f8") != NULL, "%s %s: the cast through FP8", name, tn);
            tuner_program_free(p);
        }
        tuner_space_free(sp);
    }
}

int main(int argc, char **argv)
{
    if (t_subset_init(&argc, argv) < 0)
        return 2;
    const char *group = argc > 1 ? argv[1] : "softmax";
    /* pool2d, the newest template, is compiled for sm_90a (the arch-specific target). */
    const tuner_target targets[2] = {{80, false}, {90, strcmp(group, "pool") == 0 || strcmp(group, "gather") == 0 || strcmp(group, "conv_grouped") == 0}};
    char name[128];
    for (int ti = 0; ti < 2; ti++) {
        const tuner_target *t = &targets[ti];
        for (int di = 0; di < 3; di++) {
            tuner_dtype dt = dts[di];
            const char *dn = tuner_dtype_name(dt);
            sample_size = 10;
            if (!strcmp(group, "softmax")) {
                tuner_op op = t_softmax(dt, 77, 1000, 16);
                snprintf(name, sizeof(name), "softmax %s 77x1000", dn);
                run_case(name, &op, t, false);
                if (ti == 1) {
                    sample_size = 4;
                    op = t_softmax(dt, 4096, 4096, 16);
                    long long s[1] = {1};
                    t_add_epilogue(&op, TUNER_EW_MUL, 1, s, TUNER_EW_CAST);
                    op.epilogue.steps[1].dtype = dt;
                    snprintf(name, sizeof(name), "softmax %s 4096x4096 *s", dn);
                    run_case(name, &op, t, false);
                    op = t_softmax(dt, 3, 65537, 2);
                    snprintf(name, sizeof(name), "softmax %s 3x65537 align2", dn);
                    run_case(name, &op, t, true);
                    op = t_softmax(dt, 2, 131072, 16);
                    snprintf(name, sizeof(name), "softmax %s 2x131072 (split)", dn);
                    run_case(name, &op, t, false);
                    /* log_softmax: cached, streaming (long rows) and split forms. */
                    op = t_softmax(dt, 77, 1000, 16);
                    op.attrs.softmax.log = true;
                    snprintf(name, sizeof(name), "log_softmax %s 77x1000", dn);
                    run_case(name, &op, t, false);
                    op = t_softmax(dt, 2, 131072, 16);
                    op.attrs.softmax.log = true;
                    snprintf(name, sizeof(name), "log_softmax %s 2x131072 (split)", dn);
                    run_case(name, &op, t, false);
                    /* Tiny: blocks hold idle rows (a 10-class head's log_softmax). */
                    op = t_softmax(dt, 2, 8, 16);
                    op.attrs.softmax.log = true;
                    snprintf(name, sizeof(name), "log_softmax %s 2x8 (tiny)", dn);
                    run_case(name, &op, t, false);
                    op = t_softmax(dt, 1, 10, 2);
                    snprintf(name, sizeof(name), "softmax %s 1x10 (tiny)", dn);
                    run_case(name, &op, t, true);
                    /* Fused prologues on x: a mask and a scale before the softmax. */
                    long long ms[2] = {77, 1000};
                    op = t_softmax(dt, 77, 1000, 16);
                    t_add_prologue(&op, TUNER_EW_ADD, 2, ms, TUNER_EW_NEG);
                    snprintf(name, sizeof(name), "softmax %s 77x1000 prologue", dn);
                    run_case(name, &op, t, false);
                    /* An attention mask on x: masked_fill(-inf) with a [1000] mask, where. */
                    op = t_softmax(dt, 77, 1000, 16);
                    long long mv[1] = {1000};
                    op.inputs[1] = t_tensor(dt, 1, mv, 16);
                    op.inputs[2] = t_tensor(dt, 2, ms, 16);
                    op.n_inputs = 3;
                    op.prologue[0].n = 2;
                    op.prologue[0].steps[0] = (tuner_ew_step){.kind = TUNER_EW_MASKED_FILL, .operand = 1, .scalar = -HUGE_VAL};
                    op.prologue[0].steps[1] = (tuner_ew_step){.kind = TUNER_EW_WHERE, .operand = 2, .operand2 = 1};
                    snprintf(name, sizeof(name), "softmax %s 77x1000 masked prologue", dn);
                    run_case(name, &op, t, false);
                }
            } else if (!strcmp(group, "layernorm")) {
                tuner_op op = t_layernorm(dt, 77, 1000, 16, true);
                long long s[2] = {77, 1000};
                t_add_epilogue(&op, TUNER_EW_ADD, 2, s, TUNER_EW_GELU_ERF);
                snprintf(name, sizeof(name), "layernorm %s 77x1000 +res gelu", dn);
                run_case(name, &op, t, false);
                if (ti == 1) {
                    sample_size = 4;
                    op = t_layernorm(dt, 1000, 768, 2, true);
                    snprintf(name, sizeof(name), "layernorm %s 1000x768 align2", dn);
                    run_case(name, &op, t, true);
                    op = t_layernorm(dt, 8, 65536, 16, false);
                    snprintf(name, sizeof(name), "layernorm %s 8x65536 (split)", dn);
                    run_case(name, &op, t, false);
                    long long rs[2] = {8, 1};
                    op = t_layernorm(dt, 8, 65536, 16, true);
                    t_add_prologue(&op, TUNER_EW_MUL, 2, rs, TUNER_EW_SILU);
                    snprintf(name, sizeof(name), "layernorm %s 8x65536 prologue (split)", dn);
                    run_case(name, &op, t, false);
                    op = t_layernorm(dt, 333, 77, 16, false);
                    snprintf(name, sizeof(name), "layernorm %s 333x77", dn);
                    run_case(name, &op, t, true);
                }
            } else if (!strcmp(group, "rmsnorm")) {
                tuner_op op = t_rmsnorm(dt, 77, 4096, 16, true);
                snprintf(name, sizeof(name), "rmsnorm %s 77x4096", dn);
                run_case(name, &op, t, false);
                if (ti == 1) {
                    sample_size = 4;
                    op = t_rmsnorm(dt, 513, 1000, 2, false);
                    long long s[1] = {1000};
                    t_add_epilogue(&op, TUNER_EW_MUL, 1, s, TUNER_EW_SILU);
                    snprintf(name, sizeof(name), "rmsnorm %s 513x1000 align2 *w silu", dn);
                    run_case(name, &op, t, true);
                    op = t_rmsnorm(dt, 4, 100000, 16, true);
                    snprintf(name, sizeof(name), "rmsnorm %s 4x100000 (split)", dn);
                    run_case(name, &op, t, false);
                    long long cs[1] = {1000};
                    op = t_rmsnorm(dt, 513, 1000, 16, true);
                    t_add_prologue(&op, TUNER_EW_ADD, 1, cs, TUNER_EW_RELU);
                    snprintf(name, sizeof(name), "rmsnorm %s 513x1000 prologue", dn);
                    run_case(name, &op, t, false);
                }
            } else if (!strcmp(group, "reduce")) {
                long long s3[3] = {7, 333, 1000};
                tuner_op op = t_reduce(dt, 3, s3, 2, TUNER_REDUCE_SUM, false, 16);
                snprintf(name, sizeof(name), "reduce sum %s [7,333,1000] ax2", dn);
                run_case(name, &op, t, false);
                op = t_reduce(dt, 3, s3, 1, TUNER_REDUCE_MEAN, true, 16);
                long long bs[3] = {1, 1, 1000};
                t_add_epilogue(&op, TUNER_EW_ADD, 3, bs, TUNER_EW_RELU);
                snprintf(name, sizeof(name), "reduce mean %s [7,333,1000] ax1 keep", dn);
                run_case(name, &op, t, false);
                if (ti == 1) {
                    sample_size = 4;
                    op = t_reduce(dt, 3, s3, 0, TUNER_REDUCE_MAX, false, 2);
                    snprintf(name, sizeof(name), "reduce max %s [7,333,1000] ax0 align2", dn);
                    run_case(name, &op, t, true);
                    long long s2[2] = {5, 300001};
                    op = t_reduce(dt, 2, s2, 1, TUNER_REDUCE_MAX, false, 16);
                    snprintf(name, sizeof(name), "reduce max %s [5,300001] ax1", dn);
                    run_case(name, &op, t, true);
                    long long s1[1] = {1 << 20};
                    op = t_reduce(dt, 1, s1, 0, TUNER_REDUCE_SUM, false, 16);
                    snprintf(name, sizeof(name), "reduce sum %s [1M] (split)", dn);
                    run_case(name, &op, t, false);
                    /* Column reductions over a long axis: split into chunks, two kernels. */
                    long long sl[2] = {100000, 64};
                    op = t_reduce(dt, 2, sl, 0, TUNER_REDUCE_SUM, false, 16);
                    snprintf(name, sizeof(name), "reduce sum %s [100000,64] ax0 (split)", dn);
                    run_case(name, &op, t, false);
                    check_cols_split(name, &op, t);
                    long long sm3[3] = {3, 20001, 40}, sb[3] = {1, 1, 40};
                    op = t_reduce(dt, 3, sm3, 1, TUNER_REDUCE_MAX, true, 16);
                    t_add_epilogue(&op, TUNER_EW_ADD, 3, sb, TUNER_EW_RELU);
                    snprintf(name, sizeof(name), "reduce max %s [3,20001,40] ax1 keep +b relu (split)", dn);
                    run_case(name, &op, t, false);
                    check_cols_split(name, &op, t);
                    /* Prologues: along the reduced middle axis (columns), along the row. */
                    long long mid[2] = {333, 1};
                    op = t_reduce(dt, 3, s3, 1, TUNER_REDUCE_SUM, false, 16);
                    t_add_prologue(&op, TUNER_EW_MUL, 2, mid, TUNER_EW_SIGMOID);
                    snprintf(name, sizeof(name), "reduce sum %s [7,333,1000] ax1 prologue", dn);
                    run_case(name, &op, t, false);
                    long long last[1] = {1000};
                    op = t_reduce(dt, 3, s3, 2, TUNER_REDUCE_MAX, false, 16);
                    t_add_prologue(&op, TUNER_EW_SUB, 1, last, TUNER_EW_ABS);
                    snprintf(name, sizeof(name), "reduce max %s [7,333,1000] ax2 prologue", dn);
                    run_case(name, &op, t, false);
                }
                /* Several consecutive axes: NHWC's global mean [N,H,W,C] over [1,2] (columns),
                 * NCHW's over [2,3] (rows). */
                long long nhwc[4] = {4, 7, 7, 256}, nchw[4] = {4, 256, 7, 7};
                op = t_reduce_axes(dt, 4, nhwc, 1, 2, TUNER_REDUCE_MEAN, false, 16);
                snprintf(name, sizeof(name), "reduce mean %s [4,7,7,256] ax1-2", dn);
                run_case(name, &op, t, false);
                op = t_reduce_axes(dt, 4, nchw, 2, 2, TUNER_REDUCE_MAX, true, 16);
                snprintf(name, sizeof(name), "reduce max %s [4,256,7,7] ax2-3 keep", dn);
                run_case(name, &op, t, true);
                long long tiny[2] = {2, 8};
                op = t_reduce(dt, 2, tiny, 1, TUNER_REDUCE_SUM, false, 16);
                snprintf(name, sizeof(name), "reduce sum %s [2,8] ax1 (tiny)", dn);
                run_case(name, &op, t, false);
            } else if (!strcmp(group, "conv_direct")) {
                /* Depthwise 3x3 (vectors of channels), stride 2, a channel multiplier of 2 and
                 * 4 channels per group (scalar paths), an odd size with a bias + relu epilogue. */
                tuner_op op = t_conv_nhwc(dt, 2, 28, 28, 96, 96, 3, 1, 1, 96);
                snprintf(name, sizeof(name), "dwconv %s [2,28,28,96] 3x3", dn);
                run_case(name, &op, t, false);
                check_direct_rows(name, &op, t, true);
                op = t_conv_nhwc(dt, 2, 29, 29, 144, 144, 3, 2, 1, 144);
                long long kb[1] = {144};
                t_add_epilogue(&op, TUNER_EW_ADD, 1, kb, TUNER_EW_RELU);
                snprintf(name, sizeof(name), "dwconv %s [2,29,29,144] 3x3 s2 +b relu", dn);
                run_case(name, &op, t, false);
                op = t_conv_nhwc(dt, 1, 17, 13, 24, 48, 5, 1, 2, 24);
                snprintf(name, sizeof(name), "dwconv %s [1,17,13,24] 5x5 x2", dn);
                run_case(name, &op, t, true);
                check_direct_rows(name, &op, t, false);
                op = t_conv_nhwc(dt, 1, 15, 15, 32, 64, 3, 1, 1, 8);
                snprintf(name, sizeof(name), "gconv %s [1,15,15,32] g8 3x3", dn);
                run_case(name, &op, t, true);
            } else if (!strcmp(group, "conv_grouped")) {
                /* ResNeXt-50 32x4d's grouped 3x3 layers at N = 32 (4, 8, 16, 32 channels per
                 * group; the stride-2 first block of stage 2), a RegNet-style 16-per-group layer,
                 * and edge cases: 12 per group (offsets per lane), kpg 6 (a part n8 tile),
                 * dilation, 5x5 stride 2, odd sizes, a bias + relu epilogue, f32 output. */
                if (dt == TUNER_F32) {
                    tuner_op op = t_conv_nhwc(dt, 2, 28, 28, 256, 256, 3, 1, 1, 32);
                    check_grouped("gconv f32 (not applicable)", &op, t, false, 0);
                    continue;
                }
                const bool main_dt = dt == TUNER_F16;
                tuner_op op = t_conv_nhwc(dt, 32, 28, 28, 256, 256, 3, 1, 1, 32);
                snprintf(name, sizeof(name), "gconv %s [32,28,28,256] g32 (8/g)", dn);
                check_grouped(name, &op, t, true, main_dt ? 6 : 2);
                if (!main_dt)
                    continue;
                /* Every other target the template claims (sm_80 and up): its default compiles. */
                if (ti == 1) {
                    static const tuner_target others[] = {{86, false}, {89, false}, {90, false}, {100, false},
                                                          {120, false}};
                    for (size_t k = 0; k < sizeof(others) / sizeof(others[0]); k++)
                        check_grouped(name, &op, &others[k], true, 0);
                }
                op = t_conv_nhwc(dt, 32, 56, 56, 128, 128, 3, 1, 1, 32);
                check_grouped("gconv f16 [32,56,56,128] g32 (4/g)", &op, t, true, 1);
                op = t_conv_nhwc(dt, 32, 56, 56, 256, 256, 3, 2, 1, 32);
                check_grouped("gconv f16 [32,56,56,256] g32 s2 (8/g)", &op, t, true, 1);
                op = t_conv_nhwc(dt, 32, 14, 14, 512, 512, 3, 1, 1, 32);
                check_grouped("gconv f16 [32,14,14,512] g32 (16/g)", &op, t, true, 1);
                op = t_conv_nhwc(dt, 32, 7, 7, 1024, 1024, 3, 1, 1, 32);
                check_grouped("gconv f16 [32,7,7,1024] g32 (32/g)", &op, t, true, 1);
                op = t_conv_nhwc(dt, 32, 28, 28, 448, 448, 3, 1, 1, 28);
                check_grouped("gconv f16 [32,28,28,448] g28 (16/g)", &op, t, true, 1);
                op = t_conv_nhwc(dt, 3, 13, 11, 48, 48, 3, 1, 2, 4);
                op.attrs.conv2d.dilation[0] = op.attrs.conv2d.dilation[1] = 2;
                long long kb[1] = {48};
                t_add_epilogue(&op, TUNER_EW_ADD, 1, kb, TUNER_EW_RELU);
                check_grouped("gconv f16 [3,13,11,48] g4 (12/g) d2 +b relu", &op, t, true, 2);
                op = t_conv_nhwc(dt, 2, 9, 7, 64, 96, 5, 2, 2, 16);
                check_grouped("gconv f16 [2,9,7,64] k96 g16 (4/g, kpg 6) 5x5 s2", &op, t, true, 2);
                op = t_conv_nhwc(dt, 1, 15, 15, 64, 64, 3, 1, 1, 8);
                op.output.dtype = TUNER_F32;
                check_grouped("gconv f16->f32 [1,15,15,64] g8", &op, t, true, 1);
                op = t_conv_nhwc(dt, 1, 15, 15, 60, 60, 3, 1, 1, 4);
                check_grouped("gconv f16 [1,15,15,60] g4 (15/g: odd)", &op, t, false, 0);
            } else if (!strcmp(group, "layout")) {
                tuner_op op = t_transpose3(dt, 33, 65, 129);
                snprintf(name, sizeof(name), "copy %s transpose [33,65,129] +b relu", dn);
                run_case(name, &op, t, false);
                op = t_slice2(dt, 1000, 77, 3, 500, 2);
                snprintf(name, sizeof(name), "copy %s slice [1000,77] rows 3.. step 2", dn);
                run_case(name, &op, t, false);
                const long long lo[2] = {1, 3}, hi[2] = {2, 0};
                op = t_pad2(dt, 50, 61, lo, hi, -0.5);
                snprintf(name, sizeof(name), "copy %s pad [50,61] (1,3)(2,0)", dn);
                run_case(name, &op, t, false);
                op = t_expand2(dt, 9, 130);
                snprintf(name, sizeof(name), "copy %s expand [1,130] -> [9,1,130]", dn);
                run_case(name, &op, t, false);
                long long d3[3] = {5, 1, 17};
                op = t_concat3(dt, 7, d3, 33);
                snprintf(name, sizeof(name), "concat %s [7,{5,1,17},33] ax1 silu", dn);
                run_case(name, &op, t, false);
            } else if (!strcmp(group, "pool")) {
                /* ResNet's stem maxpool (NHWC): the whole space, a relu prologue on x. */
                const int k3[2] = {3, 3}, k2[2] = {2, 2}, k31[2] = {3, 1};
                /* f16: the whole space (2 vec x 3 block x 3 ipt); the other dtypes a sample, to
                 * keep the test's time small. */
                sample_size = dt == TUNER_F16 ? 18 : 4;
                tuner_op op = t_pool(dt, TUNER_POOL_MAX, false, 2, 64, 112, 112, k3, 2, 1, 1, false, 0, 0);
                op.prologue[0].steps[op.prologue[0].n++] = (tuner_ew_step){.kind = TUNER_EW_RELU, .operand = -1};
                snprintf(name, sizeof(name), "pool max %s 3x3 s2 p1 relu", dn);
                run_case(name, &op, t, false);
                /* Global average pooling ([N,7,7,2048] -> 1x1). */
                op = t_pool(dt, TUNER_POOL_ADAPTIVE_AVG, false, 4, 2048, 7, 7, NULL, 0, 0, 0, false, 1, 1);
                snprintf(name, sizeof(name), "pool global avg %s 7x7x2048", dn);
                run_case(name, &op, t, false);
                sample_size = 4;
                /* NCHW avg, ceil mode, padding not counted, a bias (per W column) and hardswish. */
                op = t_pool(dt, TUNER_POOL_AVG, true, 2, 24, 35, 35, k3, 2, 1, 1, true, 0, 0);
                op.attrs.pool2d.count_include_pad = false;
                long long bias[1] = {op.output.shape[3]};
                t_add_epilogue(&op, TUNER_EW_ADD, 1, bias, TUNER_EW_HARDSWISH);
                snprintf(name, sizeof(name), "pool avg %s nchw 3x3 s2 p1 ceil +b", dn);
                run_case(name, &op, t, false);
                /* NHWC max, odd channels (no vectors), dilation 2, ceil, a 3x1 window. */
                op = t_pool(dt, TUNER_POOL_MAX, false, 1, 13, 17, 19, k31, 2, 1, 2, true, 0, 0);
                snprintf(name, sizeof(name), "pool max %s 3x1 d2 ceil C13", dn);
                run_case(name, &op, t, true);
                /* Adaptive 17x10 -> 5x3 in NCHW (overlapping windows), then clamp. */
                op = t_pool(dt, TUNER_POOL_ADAPTIVE_AVG, true, 2, 8, 17, 10, NULL, 0, 0, 0, false, 5, 3);
                op.epilogue.steps[op.epilogue.n++] =
                    (tuner_ew_step){.kind = TUNER_EW_CLAMP, .operand = -1, .scalar = -0.5, .scalar2 = 0.5};
                snprintf(name, sizeof(name), "pool adaptive avg %s nchw 17x10->5x3", dn);
                run_case(name, &op, t, false);
                op = t_pool(dt, TUNER_POOL_AVG, false, 1, 32, 8, 8, k2, 2, 0, 1, false, 0, 0);
                snprintf(name, sizeof(name), "pool avg %s 2x2 s2", dn);
                run_case(name, &op, t, false);
            } else if (!strcmp(group, "gather")) {
                /* BERT's word embeddings, ids [8, 128] into [30522, 768], plus the position
                 * embeddings [128, 768]: the whole space for f16, a sample for the others. */
                sample_size = dt == TUNER_F16 ? 32 : 6;
                const long long emb[2] = {30522, 768}, ids[2] = {8, 128}, pos[2] = {128, 768};
                tuner_op op = t_gather(dt, 2, emb, 0, TUNER_I64, 2, ids);
                op.inputs[op.n_inputs] = t_tensor(dt, 2, pos, 16);
                op.epilogue.steps[op.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_ADD, .operand = op.n_inputs++};
                snprintf(name, sizeof(name), "gather %s embedding 768 +pos", dn);
                run_case(name, &op, t, false);
                /* A batch of 64 sequences of 512 (50 MB out in f16): where the ranking matters. */
                const long long big[2] = {64, 512};
                op = t_gather(dt, 2, emb, 0, TUNER_I64, 2, big);
                snprintf(name, sizeof(name), "gather %s embedding 64x512", dn);
                sample_size = 4;
                run_case(name, &op, t, false);
                sample_size = dt == TUNER_F16 ? 32 : 6;
                /* No epilogue: raw 16-byte copies; i32 ids. */
                op = t_gather(dt, 2, emb, 0, TUNER_I32, 2, ids);
                snprintf(name, sizeof(name), "gather %s embedding i32", dn);
                run_case(name, &op, t, false);
                sample_size = 6;
                /* index_select along the last axis (rows of one element: the elements path). */
                const long long x3[3] = {4, 10, 37}, i1[1] = {5};
                op = t_gather(dt, 3, x3, 2, TUNER_I64, 1, i1);
                snprintf(name, sizeof(name), "gather %s index_select last", dn);
                run_case(name, &op, t, true);
                /* A rank-2 index in the middle of a rank-4 x, odd rows (no vectors), a cast. */
                const long long x4[4] = {3, 11, 5, 7}, i2[2] = {2, 3};
                op = t_gather(dt, 4, x4, 1, TUNER_I32, 2, i2);
                op.epilogue.steps[op.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_CAST, .operand = -1, .dtype = TUNER_F32};
                op.output.dtype = TUNER_F32;
                snprintf(name, sizeof(name), "gather %s rank-2 index axis 1 ->f32", dn);
                run_case(name, &op, t, true);
                /* attention_mask.to(dtype): i64 and i32 masks converted, then (1 - m) * -1e4. */
                const long long mask[4] = {8, 1, 1, 128};
                op = t_int_cast(dt == TUNER_F32 ? TUNER_I32 : TUNER_I64, dt, 4, mask);
                snprintf(name, sizeof(name), "elementwise %s mask from int", dn);
                run_case(name, &op, t, false);
            } else if (!strcmp(group, "elementwise")) {
                check_fp8_elementwise(t, dt, dt == TUNER_BF16 ? TUNER_F8E5M2 : TUNER_F8E4M3);
                tuner_op op = t_elementwise(dt, 77, 1000, 16);
                snprintf(name, sizeof(name), "elementwise %s 77x1000 +b gelu", dn);
                run_case(name, &op, t, false);
                if (ti == 1) {
                    sample_size = 4;
                    op = t_elementwise(dt, 77, 1000, 2);
                    snprintf(name, sizeof(name), "elementwise %s 77x1000 align2", dn);
                    run_case(name, &op, t, true);
                    /* [8,1,64] x [1,33,64] -> [8,33,64], then every unary kind. */
                    tuner_op e;
                    memset(&e, 0, sizeof(e));
                    e.kind = TUNER_OP_ELEMENTWISE;
                    long long a[3] = {8, 1, 64}, b[3] = {33, 1}, o[3] = {8, 33, 64};
                    e.inputs[0] = t_tensor(dt, 3, a, 16);
                    e.n_inputs = e.n_anchor_inputs = 1;
                    e.output = t_tensor(dt, 3, o, 16);
                    t_add_epilogue(&e, TUNER_EW_SUB, 2, b, TUNER_EW_SIGMOID);
                    long long c3[3] = {8, 33, 64};
                    t_add_epilogue(&e, TUNER_EW_MAX, 3, c3, TUNER_EW_TANH);
                    snprintf(name, sizeof(name), "elementwise %s bcast [8,1,64]x[33,1]", dn);
                    run_case(name, &e, t, false);
                    /* Masks: x [4,64,128] scaled, compared with a [128] vector, then where with a
                     * [64,128] condition and a [4,1,128] other, masked_fill(-inf) with a [64,1]
                     * mask and log: operands of every broadcast kind in the vector path. */
                    tuner_op m;
                    memset(&m, 0, sizeof(m));
                    m.kind = TUNER_OP_ELEMENTWISE;
                    long long x3[3] = {4, 64, 128}, v1[1] = {128}, c2[2] = {64, 128}, o3[3] = {4, 1, 128},
                              m2[2] = {64, 1};
                    m.inputs[0] = t_tensor(dt, 3, x3, 16);
                    m.inputs[1] = t_tensor(dt, 1, v1, 16);
                    m.inputs[2] = t_tensor(TUNER_F32, 2, c2, 16);
                    m.inputs[3] = t_tensor(dt, 3, o3, 16);
                    m.inputs[4] = t_tensor(TUNER_BF16, 2, m2, 16);
                    m.n_inputs = 5;
                    m.n_anchor_inputs = 1;
                    m.output = t_tensor(dt, 3, x3, 16);
                    tuner_ew_step ms[] = {
                        {.kind = TUNER_EW_SCALE, .operand = -1, .scalar = 0.5},
                        {.kind = TUNER_EW_GT, .operand = 1},
                        {.kind = TUNER_EW_WHERE, .operand = 2, .operand2 = 3},
                        {.kind = TUNER_EW_MASKED_FILL, .operand = 4, .scalar = -HUGE_VAL},
                        {.kind = TUNER_EW_LE, .operand = -1, .scalar = 0.25},
                        {.kind = TUNER_EW_LOG, .operand = -1},
                    };
                    m.epilogue.n = (int)(sizeof(ms) / sizeof(ms[0]));
                    memcpy(m.epilogue.steps, ms, sizeof(ms));
                    snprintf(name, sizeof(name), "elementwise %s masks", dn);
                    run_case(name, &m, t, false);
                }
            }
        }
    }
    double med = t_median(times, n_times);
    printf("%s: %d candidates compiled, median NVRTC compile %.1f ms, %d failures\n", group, n_times, med,
           t_failures);
    return t_failures ? 1 : 0;
}
