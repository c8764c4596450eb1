/* tuner/tests/test_core_dyn.c - dynamic ops (named dims, issue 39) in the core templates:
 * elementwise, softmax / layernorm / rmsnorm / reduce rows and reduce_cols, gather (named ids),
 * attention_mma and attention_wgmma (names on B, S and Skv) and attention_decode (B and Skv).
 * Cases marked cpu_two_runs run twice here (f16 on sm_80, f32 on sm_90a; attention's once, f16
 * on sm_80 or bf16 on sm_90a by turns; attention_wgmma's, sm90a_only, once on sm_90a, f16 or bf16
 * by turns, default_only / no_compile limiting what they compile).
 *
 * For every case of tuner/tests/dyn_cases.c x dtype x {sm_80, sm_90a}: the space is built (only
 * dynamic templates, the expected one among them, split and vector candidates as the case says)
 * and every candidate generated and checked:
 *  - every kernel declares the dims' parameters once and its launch passes TUNER_ARG_DIM0 + k
 *    after the buffers, in order;
 *  - at the sizes min, an odd one and max, each grid dimension (its rule, or the fixed value)
 *    equals the grid of the same schedule generated for the static op at those sizes
 *    (tuner_op_bind) - a persistent attention_wgmma grid no smaller and at most its cap -,
 *    kernel names and blocks agree, each tensor map bound at the sizes is the static op's or a
 *    flattening of it over the same bytes, and the workspace at max holds the bound op's;
 *  - the same schedule generated for the op with every dim's max raised is the same text: no
 *    named size is baked into the code (a literal row count or element bound would differ).
 * Every input's broadcast offset (tuner__bcast_offset) against the output and x, evaluated at the
 * three sizes with the dims' parameters bound, equals the static op's at sampled elements; for
 * attention, q's, k's, the output's and the mask's offsets likewise.
 * A sample of each case's candidates (the default always, HIDET_TEST_SAMPLE, common.h) is
 * compiled with NVRTC and ptxas, and the static reference at max is generated and compiled. Ops
 * the templates must refuse (a named row length, a reduce over a name, a name on an inner axis)
 * get no space.
 */
#include "common.h"
#include "dyn_cases.h"
#include "host_values.h"

#include <stdlib.h>
#include <string.h>

#include "tuner/attn/attn.h"
#include "tuner/core.h"
#include "tuner/space.h"
#include "tuner/template.h"

static int n_compiled;
static long n_offsets;  /* broadcast offsets compared with the static op's */
static size_t n_picks; /* picks so far, over every case: what the sample (common.h) numbers */

static int count_str(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
        n++;
    return n;
}

/* The dims' parameters and launch arguments of a dynamic program. */
static void check_dim_args(const char *what, const tuner_op *op, const tuner_program *p)
{
    char decl[48];
    for (int k = 0; k < op->n_dims; k++) {
        snprintf(decl, sizeof(decl), ", long long hd_dim%d", k);
        CHECK(count_str(p->source, decl) == p->n_kernels, "%s: %d declarations of hd_dim%d for %d kernels", what,
              count_str(p->source, decl), k, p->n_kernels);
    }
    snprintf(decl, sizeof(decl), ", long long hd_dim%d", op->n_dims);
    CHECK(!strstr(p->source, decl), "%s: a parameter for a dim the op does not have", what);
    for (int i = 0; i < p->n_kernels; i++) {
        const tuner_launch *l = &p->kernels[i];
        bool ok = l->n_args >= op->n_dims + 1;
        for (int k = 0; ok && k < op->n_dims; k++)
            ok = l->args[l->n_args - op->n_dims + k] == TUNER_ARG_DIM0 + k;
        for (int a = 0; ok && a < l->n_args - op->n_dims; a++)
            ok = l->args[a] < TUNER_ARG_DIM0;
        CHECK(ok, "%s: kernel %s does not end its arguments with the %d dims", what, l->name, op->n_dims);
        unsigned all = (1u << op->n_dims) - 1;
        int64_t max[TUNER_MAX_DIMS] = {1, 1, 1, 1};
        t_dyn_sizes(op, 2, max);
        for (int d = 0; d < 3; d++) {
            const tuner_grid_rule *r = &l->grid_rule[d];
            if (!r->dims)
                continue;
            CHECK((r->dims & ~all) == 0 && r->coef >= 1 && r->div >= 1 && r->mul >= 1 && r->cap >= 0,
                  "%s: kernel %s grid %d: a malformed rule", what, l->name, d);
            CHECK(tuner_grid_rule_eval(r, max) == (int64_t)l->grid[d], "%s: kernel %s grid %d: rule at max %lld, grid %u",
                  what, l->name, d, (long long)tuner_grid_rule_eval(r, max), l->grid[d]);
        }
    }
}

/* The program at sizes (which: min, odd, max) against the same schedule for the static op. */
static void check_against_bound(const char *what, const tuner_op *op, const tuner_target *t, const tuner_schedule *s,
                                const tuner_program *p, int which)
{
    int64_t sizes[TUNER_MAX_DIMS] = {1, 1, 1, 1};
    t_dyn_sizes(op, which, sizes);
    tuner_op bound;
    CHECK(tuner_op_bind(op, sizes, &bound) == 0, "%s: bind", what);
    tuner_program *q = NULL;
    char *err = NULL;
    const int r = tuner_generate(&bound, t, s, &q, &err);
    CHECK(r == 0, "%s: the schedule does not generate for the op at sizes %lld: %s", what, (long long)sizes[0],
          err ? err : "?");
    free(err);
    if (r < 0)
        return;
    CHECK(q->n_kernels == p->n_kernels, "%s: %d kernels, static %d", what, p->n_kernels, q->n_kernels);
    for (int i = 0; i < p->n_kernels && i < q->n_kernels; i++) {
        const tuner_launch *l = &p->kernels[i], *m = &q->kernels[i];
        CHECK(!strcmp(l->name, m->name) && !memcmp(l->block, m->block, sizeof(l->block)) &&
                  l->shared_bytes == m->shared_bytes,
              "%s: kernel %d differs from the static op's", what, i);
        for (int d = 0; d < 3; d++) {
            const int64_t g = l->grid_rule[d].dims ? tuner_grid_rule_eval(&l->grid_rule[d], sizes) : l->grid[d];
            /* A persistent kernel (attention_wgmma: min(work items, SMs) blocks walk the items)
             * may get more blocks than items where its rule can only bound them (names on B and
             * S: Hq * B * S), never fewer, nor more than its cap. */
            const int64_t cap = l->grid_rule[d].cap;
            const bool persistent = !strcmp(s->template_name, "attention_wgmma") && d == 0 && l->grid_rule[d].dims;
            CHECK(persistent ? g >= (int64_t)m->grid[d] && g <= (cap > (int64_t)m->grid[d] ? cap : (int64_t)m->grid[d])
                             : g == (int64_t)m->grid[d],
                  "%s: kernel %s grid %d at sizes (%lld, %lld): %lld, static %u", what, l->name, d, (long long)sizes[0],
                  (long long)sizes[1], (long long)g, m->grid[d]);
        }
        /* Tensor maps: bound at the sizes, each is the static op's or (named rows: flattened, so
         * that no stride depends on a size) one over the same bytes: the same row, elements,
         * extent and box, fewer dimensions. */
        CHECK(l->n_maps == m->n_maps, "%s: kernel %s: %d maps, static %d", what, l->name, l->n_maps, m->n_maps);
        for (int k = 0; k < l->n_maps && k < m->n_maps; k++) {
            tuner_tmap bm;
            const tuner_tmap *sm = &m->maps[k];
            if (tuner_tmap_bind(&l->maps[k], sizes, &bm) < 0) {
                CHECK(false, "%s: kernel %s map %d does not bind at sizes (%lld, %lld)", what, l->name, k,
                      (long long)sizes[0], (long long)sizes[1]);
                continue;
            }
            uint64_t n1 = 1, n2 = 1, b1 = 1, b2 = 1;
            for (int d = 0; d < bm.rank; d++)
                n1 *= bm.dims[d], b1 *= bm.box[d];
            for (int d = 0; d < sm->rank; d++)
                n2 *= sm->dims[d], b2 *= sm->box[d];
            const bool same = bm.rank == sm->rank && !memcmp(bm.dims, sm->dims, sizeof(bm.dims)) &&
                              !memcmp(bm.strides, sm->strides, sizeof(bm.strides)) && !memcmp(bm.box, sm->box, sizeof(bm.box));
            const bool flat = bm.rank < sm->rank && bm.dims[0] == sm->dims[0] && bm.strides[0] == sm->strides[0] &&
                              bm.box[0] == sm->box[0] && n1 == n2 && b1 == b2 &&
                              tuner_tmap_extent(&bm) == tuner_tmap_extent(sm);
            CHECK(bm.buf == sm->buf && bm.dtype == sm->dtype && bm.swizzle == sm->swizzle && (same || flat) &&
                      tuner_tmap_check(&bm, NULL, 0, NULL, 0) == 0,
                  "%s: kernel %s map %d at sizes (%lld, %lld): rank %d dims[1] %llu, static rank %d dims[1] %llu", what,
                  l->name, k, (long long)sizes[0], (long long)sizes[1], bm.rank, (unsigned long long)bm.dims[1],
                  sm->rank, (unsigned long long)sm->dims[1]);
        }
    }
    CHECK(q->workspace_bytes <= p->workspace_bytes, "%s: workspace %zu under the static op's %zu", what,
          p->workspace_bytes, q->workspace_bytes);
    tuner_program_free(q);
}

static void run_case(const t_dyn_case *c, const t_dyn_case *bumped, const tuner_target *t)
{
    char tn[16], what[320];
    tuner_target_name(t, tn, sizeof(tn));
    const tuner_op *op = &c->op;
    tuner_space *sp = NULL;
    char *err = NULL;
    int r = tuner_space_build(op, t, &sp, &err);
    CHECK(r == 0, "%s %s: space: %s", c->name, tn, err ? err : "?");
    free(err);
    if (r < 0)
        return;
    CHECK(sp->n > 0, "%s %s: empty space", c->name, tn);
    size_t mine = 0, splits = 0, vecs = 0;
    for (size_t i = 0; i < sp->n; i++) {
        const tuner_template *tp = NULL;
        for (int reg = 0; tuner__registries[reg] && !tp; reg++)
            for (int k = 0; tuner__registries[reg][k]; k++)
                if (!strcmp(tuner__registries[reg][k]->name, sp->items[i].template_name))
                    tp = tuner__registries[reg][k];
        CHECK(tp && tp->dynamic_dims, "%s %s: %s is not a dynamic template", c->name, tn, sp->items[i].template_name);
        mine += !strcmp(sp->items[i].template_name, c->template_name);
        splits += tuner_schedule_param(&sp->items[i], "split", 1) > 1;
        vecs += tuner_schedule_param(&sp->items[i], "vec", 1) > 1;
    }
    CHECK(mine > 0, "%s %s: no %s candidates", c->name, tn, c->template_name);
    CHECK(!c->expect_split || splits > 0, "%s %s: no split candidates", c->name, tn);
    CHECK(!c->expect_scalar_only || vecs == 0, "%s %s: %zu vector candidates", c->name, tn, vecs);
    const size_t def = tuner_default_index(op, t, sp);
    CHECK(def < sp->n, "%s %s: default", c->name, tn);

    /* Every candidate: launches, grids at three sizes, the same text at a larger max (but where
     * the case allows its template to specialize on a short range). */
    size_t identical = 0, compiled = 0, checked = 0;
    for (size_t i = 0; i < sp->n; i++) {
        const tuner_schedule *s = &sp->items[i];
        char *sj = tuner_schedule_json(s);
        snprintf(what, sizeof(what), "%s %s %s", c->name, tn, sj ? sj : "?");
        free(sj);
        tuner_program *p = NULL;
        err = NULL;
        r = tuner_generate(op, t, s, &p, &err);
        CHECK(r == 0, "%s: generate: %s", what, err ? err : "?");
        free(err);
        if (r < 0)
            continue;
        CHECK(p->output_dtype == op->output.dtype, "%s: output dtype", what);
        check_dim_args(what, op, p);
        /* The default, and of 8 evenly spaced others those the sample takes (numbered over the
         * whole run, so that a sampled run still compiles some of every case's). */
        const size_t step = sp->n > 8 ? sp->n / 8 : 1;
        if (!c->no_compile && (i == def || (!c->default_only && i % step == 0 && t_in_sample(++n_picks)))) {
            CHECK(t_compile_check(what, p->source, t, p, NULL), "%s: compile", what);
            compiled++;
            n_compiled++;
        }
        if (i != def && !t_in_check_sample(i)) {
            tuner_program_free(p);
            continue;
        }
        checked++;
        for (int which = 0; which < 3; which++)
            check_against_bound(what, op, t, s, p, which);
        tuner_program *b = NULL;
        err = NULL;
        r = tuner_generate(&bumped->op, t, s, &b, &err);
        CHECK(r == 0, "%s: generate at a larger max: %s", what, err ? err : "?");
        free(err);
        const bool specialized = c->range_marker && !strcmp(s->template_name, c->template_name);
        if (specialized)
            CHECK(strstr(p->source, c->range_marker), "%s: not specialized to its short range (no \"%s\")", what,
                  c->range_marker);
        if (r == 0) {
            const bool same = !strcmp(p->source, b->source);
            CHECK(same || specialized, "%s: the source changes with the dims' max (a named size is baked in)", what);
            identical += same;
            tuner_program_free(b);
        }
        tuner_program_free(p);
    }
    tuner_program *ref = NULL;
    err = NULL;
    r = tuner_reference(op, t, &ref, &err);
    CHECK(r == 0, "%s %s: reference: %s", c->name, tn, err ? err : "?");
    free(err);
    if (r == 0) {
        snprintf(what, sizeof(what), "%s %s reference", c->name, tn);
        CHECK(ref->output_dtype == TUNER_F32, "%s: dtype", what);
        for (int k = 0; k < ref->n_kernels; k++)
            for (int a = 0; a < ref->kernels[k].n_args; a++)
                CHECK(ref->kernels[k].args[a] < TUNER_ARG_DIM0, "%s: a dim argument in the static reference", what);
        static size_t n_refs; /* references are the static ops' (tuner_core_* compile those): sampled */
        if (t_in_sample(n_refs++))
            CHECK(t_compile_check(what, ref->source, t, ref, NULL), "%s: compile", what);
        tuner_program_free(ref);
    }
    char *dj = tuner_schedule_json(&sp->items[def]);
    printf("%-62s %-6s space %4zu (split %3zu, vec %3zu) same text at a larger max %zu/%zu checked, compiled %zu; "
           "default %s\n",
           c->name, tn, sp->n, splits, vecs, identical, checked, compiled, dj ? dj : "?");
    free(dj);
    tuner_space_free(sp);
}

/* ---- broadcast offsets at launch sizes ----
 * tuner__bcast_offset's expression for a dynamic op, evaluated with hd_dim<k> = the sizes, must
 * equal the static op's (tuner_op_bind) at the same (row, col): the runtime strides and row
 * products of names on inner axes. A small evaluator of the expressions' C subset: long long
 * literals, row / col / hd_dim<k>, (long long) casts, + * / % and parentheses. */
typedef struct ev {
    const char *p;
    long long row, col;
    const int64_t *sizes;
    bool bad;
    const long long *o; /* a copy's output coordinate o0, o1, ... (tuner__copy_offset) */
} ev;

static long long ev_sum(ev *e);

static void ev_space(ev *e)
{
    while (*e->p == ' ')
        e->p++;
}

static long long ev_atom(ev *e)
{
    ev_space(e);
    if (!strncmp(e->p, "(long long)", 11)) {
        e->p += 11;
        return ev_atom(e);
    }
    if (*e->p == '(') {
        e->p++;
        long long v = ev_sum(e);
        ev_space(e);
        if (*e->p++ != ')')
            e->bad = true;
        return v;
    }
    if (*e->p >= '0' && *e->p <= '9') {
        char *end;
        long long v = strtoll(e->p, &end, 10);
        e->p = end;
        if (!strncmp(e->p, "LL", 2))
            e->p += 2;
        return v;
    }
    if (!strncmp(e->p, "hd_dim", 6)) {
        const int k = e->p[6] - '0';
        e->p += 7;
        return k >= 0 && k < TUNER_MAX_DIMS ? e->sizes[k] : (e->bad = true, 0);
    }
    if (e->o && e->p[0] == 'o' && e->p[1] >= '0' && e->p[1] < '0' + TUNER_MAX_RANK) {
        const int d = e->p[1] - '0';
        e->p += 2;
        return e->o[d];
    }
    if (!strncmp(e->p, "row", 3)) {
        e->p += 3;
        return e->row;
    }
    if (!strncmp(e->p, "col", 3)) {
        e->p += 3;
        return e->col;
    }
    e->bad = true;
    return 0;
}

static long long ev_product(ev *e)
{
    long long v = ev_atom(e);
    for (;;) {
        ev_space(e);
        const char o = *e->p;
        if (o != '*' && o != '/' && o != '%')
            return v;
        e->p++;
        const long long r = ev_atom(e);
        if (o != '*' && r == 0) {
            e->bad = true;
            return 0;
        }
        v = o == '*' ? v * r : o == '/' ? v / r : v % r;
    }
}

static long long ev_sum(ev *e)
{
    long long v = ev_product(e);
    for (;;) {
        ev_space(e);
        if (*e->p != '+' && *e->p != '-')
            return v;
        const char o = *e->p++;
        const long long r = ev_product(e);
        v = o == '+' ? v + r : v - r;
    }
}

static long long ev_eval(const char *expr, long long row, long long col, const int64_t *sizes, bool *bad)
{
    ev e = {expr, row, col, sizes, false, NULL};
    const long long v = ev_sum(&e);
    ev_space(&e);
    *bad = e.bad || *e.p;
    return v;
}

/* A copy's source offset (tuner__copy_offset) at min, odd and max sizes, at sampled output
 * coordinates (every corner and a stride through the interior), against the bound op's. */
static void check_copy_offsets(const t_dyn_case *c)
{
    const tuner_op *op = &c->op;
    char *dyn = tuner__copy_offset(op);
    int checked = 0;
    for (int which = 0; which < 3 && dyn; which++) {
        int64_t sizes[TUNER_MAX_DIMS] = {1, 1, 1, 1};
        t_dyn_sizes(op, which, sizes);
        tuner_op b;
        if (tuner_op_bind(op, sizes, &b) < 0)
            continue;
        char *fix = tuner__copy_offset(&b);
        const long long numel = tuner_tensor_numel(&b.output);
        for (long long vi = 0; fix && vi < numel; vi += vi < 64 ? 1 : 97) {
            long long o[TUNER_MAX_RANK] = {0}, rem = vi;
            for (int d = b.output.rank - 1; d >= 0; d--) {
                o[d] = rem % b.output.shape[d];
                rem /= b.output.shape[d];
            }
            ev e1 = {dyn, 0, 0, sizes, false, o}, e2 = {fix, 0, 0, sizes, false, o};
            const long long x = ev_sum(&e1), y = ev_sum(&e2);
            CHECK(!e1.bad && !e2.bad && x == y && y < tuner_tensor_numel(&b.inputs[0]),
                  "%s: copy offset of element %lld at sizes (%lld, %lld): %lld, static %lld of %lld (%s | %s)", c->name,
                  vi, (long long)sizes[0], (long long)sizes[1], x, y, (long long)tuner_tensor_numel(&b.inputs[0]), dyn,
                  fix);
            checked++;
        }
        free(fix);
    }
    free(dyn);
    CHECK(checked > 0, "%s: no copy offsets checked", c->name);
    n_offsets += checked;
}

/* Every input of c against the output and against x, at min, odd and max, at sampled elements. */
static void check_offsets(const t_dyn_case *c)
{
    const tuner_op *op = &c->op;
    int checked = 0;
    for (int which = 0; which < 3; which++) {
        int64_t sizes[TUNER_MAX_DIMS] = {1, 1, 1, 1};
        t_dyn_sizes(op, which, sizes);
        tuner_op b;
        if (tuner_op_bind(op, sizes, &b) < 0)
            continue;
        for (int i = 0; i < op->n_inputs; i++)
            for (int against = 0; against < 2; against++) {
                const tuner_tensor *to = against ? &op->inputs[0] : &op->output;
                const tuner_tensor *bto = against ? &b.inputs[0] : &b.output;
                const tuner_tensor *in = &op->inputs[i];
                if (in->rank > to->rank)
                    continue;
                bool fits = true; /* only inputs that broadcast to `to` (the template's pairs) */
                for (int d = 0; d < in->rank; d++) {
                    const int td = to->rank - in->rank + d;
                    fits = fits && (in->sym[d] == to->sym[td] || (!in->sym[d] && in->shape[d] == 1)) &&
                           (in->sym[d] || in->shape[d] == 1 || in->shape[d] == to->shape[td]);
                }
                if (!fits)
                    continue;
                char *dyn = tuner__bcast_offset(in, to, "row", "col");
                char *fix = tuner__bcast_offset(&b.inputs[i], bto, "row", "col");
                const long long last = bto->shape[bto->rank - 1], rows = tuner_tensor_numel(bto) / last;
                for (int k = 0; k < 64 && dyn && fix; k++) {
                    const long long row = k < 2 ? (k ? rows - 1 : 0) : (long long)t_rnd_int(0, (int)(rows - 1));
                    const long long col = k < 2 ? (k ? last - 1 : 0) : (long long)t_rnd_int(0, (int)(last - 1));
                    bool bad1 = false, bad2 = false;
                    const long long a = ev_eval(dyn, row, col, sizes, &bad1);
                    const long long e = ev_eval(fix, row, col, sizes, &bad2);
                    CHECK(!bad1 && !bad2 && a == e, "%s: input %d against %s at (%lld, %lld), sizes (%lld, %lld, %lld): "
                          "%lld, static %lld (%s | %s)",
                          c->name, i, against ? "x" : "the output", row, col, (long long)sizes[0], (long long)sizes[1],
                          (long long)sizes[2], a, e, dyn, fix);
                    if (bad1 || bad2 || a != e)
                        break;
                    checked++;
                }
                free(dyn);
                free(fix);
            }
    }
    CHECK(checked > 0, "%s: no offsets checked", c->name);
    n_offsets += checked;
}

/* attention: q's, k's / v's, the output's and the mask's element offsets (tuner/attn/attn.h) of
 * the dynamic op at the three sizes against the bound op's, at sampled coordinates. */
static void check_attn_offsets(const t_dyn_case *c)
{
    const tuner_op *op = &c->op;
    int checked = 0;
    for (int which = 0; which < 3; which++) {
        int64_t sizes[TUNER_MAX_DIMS] = {1, 1, 1, 1};
        t_dyn_sizes(op, which, sizes);
        tuner_op b;
        tuner__attn_problem pd, pb;
        char *err = NULL;
        if (tuner_op_bind(op, sizes, &b) < 0 || tuner__attn_problem_init(op, &pd, &err) < 0 ||
            tuner__attn_problem_init(&b, &pb, &err) < 0) {
            CHECK(false, "%s: attention problem: %s", c->name, err ? err : "bind");
            free(err);
            return;
        }
        for (int k = 0; k < 48; k++) {
            char cb[24], ch[24], ci[24], cj[24], cc[24];
            snprintf(cb, sizeof(cb), "%d", t_rnd_int(0, (int)pb.d.b - 1));
            snprintf(ch, sizeof(ch), "%d", t_rnd_int(0, (int)pb.d.hq - 1));
            snprintf(ci, sizeof(ci), "%d", t_rnd_int(0, (int)pb.d.s - 1));
            snprintf(cj, sizeof(cj), "%d", t_rnd_int(0, (int)pb.d.skv - 1));
            snprintf(cc, sizeof(cc), "%d", t_rnd_int(0, (int)pb.d.d - 1));
            for (int w = 0; w < 4; w++) {
                char *x = NULL, *y = NULL;
                if (w == 0) {
                    x = tuner__attn_q_offset(&pd, cb, ch, ci, cc);
                    y = tuner__attn_q_offset(&pb, cb, ch, ci, cc);
                } else if (w == 1) {
                    x = tuner__attn_kv_offset(&pd, cb, "0", cj, cc);
                    y = tuner__attn_kv_offset(&pb, cb, "0", cj, cc);
                } else if (w == 2) {
                    x = tuner__attn_out_offset(&pd, cb, ch, ci, cc);
                    y = tuner__attn_out_offset(&pb, cb, ch, ci, cc);
                } else if (pd.d.has_mask) {
                    /* hd_f32(inM[offset]): the offset alone */
                    char *mx = tuner__attn_mask_value(&pd, cb, ch, ci, cj), *my = tuner__attn_mask_value(&pb, cb, ch, ci, cj);
                    if (mx && my && strlen(mx) > 12 && strlen(my) > 12) {
                        x = strdup(mx + 11);
                        y = strdup(my + 11);
                        x[strlen(x) - 2] = y[strlen(y) - 2] = '\0';
                    }
                    free(mx);
                    free(my);
                }
                if (!x || !y) {
                    free(x);
                    free(y);
                    continue;
                }
                bool bad1 = false, bad2 = false;
                const long long vx = ev_eval(x, 0, 0, sizes, &bad1), vy = ev_eval(y, 0, 0, sizes, &bad2);
                CHECK(!bad1 && !bad2 && vx == vy, "%s: attention offset %d at (%s, %s, %s, %s, %s): %lld, static %lld (%s | %s)",
                      c->name, w, cb, ch, ci, cj, cc, vx, vy, x, y);
                checked += !bad1 && !bad2 && vx == vy;
                free(x);
                free(y);
            }
        }
    }
    CHECK(checked > 0, "%s: no attention offsets checked", c->name);
    n_offsets += checked;
}

static const tuner_dtype dts[3] = {TUNER_F16, TUNER_BF16, TUNER_F32};

int main(int argc, char **argv)
{
    if (t_subset_init(&argc, argv) < 0)
        return 2;
    const char *only = argc > 1 ? argv[1] : NULL; /* a substring of the case names */
    const tuner_target targets[2] = {{80, false}, {90, true}};
    static t_dyn_case cases[T_DYN_MAX_CASES], bumped[T_DYN_MAX_CASES], bad[T_DYN_MAX_CASES];
    size_t job = 0;
    for (int di = 0; di < 3; di++) {
        const int n = t_dyn_cases(dts[di], false, cases);
        const int nb = t_dyn_cases(dts[di], true, bumped);
        CHECK(n == nb && n <= T_DYN_MAX_CASES, "case lists");
        for (int i = 0; di == 0 && i < n; i++) /* the index math does not depend on the dtype */
            if (!only || strstr(cases[i].name, only)) {
                check_offsets(&cases[i]);
                if (cases[i].op.kind == TUNER_OP_ATTENTION)
                    check_attn_offsets(&cases[i]);
                if (cases[i].op.kind == TUNER_OP_COPY)
                    check_copy_offsets(&cases[i]);
            }
        for (int ti = 0; ti < 2; ti++)
            for (int i = 0; i < n; i++) {
                if (only && !strstr(cases[i].name, only))
                    continue;
                if (cases[i].sm90a_only) {
                    /* once, on sm_90a: f16 and bf16 by turns over the cases */
                    if (ti != 1 || dts[di] != (i % 2 ? TUNER_BF16 : TUNER_F16))
                        continue;
                } else if (cases[i].cpu_two_runs) {
                    /* attention's candidates compile slowest: one run of each case, alternating
                     * f16 on sm_80 and bf16 on sm_90a over the cases */
                    const bool attn = cases[i].op.kind == TUNER_OP_ATTENTION;
                    const bool first = dts[di] == TUNER_F16 && ti == 0;
                    const bool second = dts[di] == (attn ? TUNER_BF16 : TUNER_F32) && ti == 1;
                    if (attn ? !(i % 2 ? second : first) : !(first || second))
                        continue;
                }
                if (t_in_shard(job++))
                    run_case(&cases[i], &bumped[i], &targets[ti]);
            }
        const int nbad = t_dyn_unsupported(dts[di], bad);
        for (int ti = 0; ti < 2; ti++)
            for (int i = 0; i < nbad; i++) {
                tuner_space *sp = NULL;
                char *err = NULL;
                const int r = tuner_space_build(&bad[i].op, &targets[ti], &sp, &err);
                CHECK(r < 0 && err && strstr(err, "named dimensions"), "%s: a space (%zu candidates) or another error: %s",
                      bad[i].name, sp ? sp->n : 0, err ? err : "none");
                if (ti == 0 && r < 0)
                    printf("%-62s refused: %s\n", bad[i].name, err ? err : "?");
                free(err);
                tuner_space_free(sp);
            }
    }
    printf("core dynamic: %d candidates compiled, %ld broadcast offsets compared, %d failures\n", n_compiled, n_offsets,
           t_failures);
    return t_failures ? 1 : 0;
}
