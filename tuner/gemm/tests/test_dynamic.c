/* tuner/gemm/tests/test_dynamic.c - matmul with named dimensions (dynamic ops, issue 39) in the
 * matmul_mma / matmul_simt / matmul_tf32 / matmul_wgmma templates (suite tuner_gemm).
 *
 * CPU only. Dynamic ops are built directly (n_dims, dims[], sym[0] on the tensors, shape[0] =
 * max): a 2-D `a` [n, K] with M named (f16, bf16, f32; a bias [N] and a residual [n, N] named
 * too; multiple_of 1 and 64; M the product "b*s" of two dims), and rank-3 ones with the batch
 * named (b batched or broadcast). Every template but those four stays out of these spaces (and
 * names elsewhere than axis 0 of a are refused); sm_90a spaces hold matmul_wgmma, without
 * stream-K. For every candidate of each space:
 *  - the program takes the dims after the pointers in every launch, and its grids at max are
 *    those of the static program at max (tuner_op_bind) with the same schedule: kernels, names,
 *    blocks, shared memory and workspace too;
 *  - every grid rule gives, at min, an odd size and max, the grid of the static program at that
 *    size, and the dimensions without a rule are the static ones there (a matmul_wgmma pingpong
 *    grid over a named M with an odd count of N tiles may hold more blocks than units, never
 *    fewer, and the static count where that is the SMs');
 *  - its tensor maps, bound at each of those sizes (dims[i] = sym_coef[i] * the sizes of sym[i]),
 *    are the static program's there, and at max dims[] holds that value already;
 *  - the same op with another max (same min and multiple_of) gives the same source byte for
 *    byte: a size baked into the code (a bound, a tile count, a plane) would differ;
 *  - matmul_mma without split-K checks whole tiles against gm_M unless multiple_of makes every
 *    tile whole;
 *  - matmul_wgmma's tile coordinates over a named M take no 64-bit division, and a swapped
 *    kernel's no batch index (test_tile_index_divisions);
 * and a sample of the candidates (the first of each case, its preferred one, always) goes
 * through NVRTC and ptxas for the real target (HIDET_TEST_SAMPLE, tuner/tests/common.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tuner/gemm/gemm.h"
#include "tuner/gemm/tests/dyn_matmul.h"
#include "tuner/tests/common.h"

static int compiled;

/* The same op with dims[k].max set to max, and every named axis's tuning size (the product of
 * its dims' max) updated. */
static tuner_op with_max(const tuner_op *op, int k, long long max)
{
    tuner_op o = *op;
    o.dims[k].max = max;
    int64_t maxs[TUNER_MAX_DIMS] = {1, 1, 1, 1};
    for (int d = 0; d < o.n_dims; d++)
        maxs[d] = o.dims[d].max;
    for (int i = -1; i < o.n_inputs; i++) {
        tuner_tensor *x = i < 0 ? &o.output : &o.inputs[i];
        for (int d = 0; d < x->rank; d++)
            if (x->sym[d])
                x->shape[d] = tuner_dims_product(maxs, x->sym[d]);
    }
    return o;
}

/* A 2-D named M that is the product of two dims, "b*s" (a reshape of [b, s, K] to rows). */
static tuner_op dyn_rows2(tuner_dtype dt, long long bmax, long long smax, long long N, long long K)
{
    tuner_op op = dyn_matmul_rows(dt, 1, bmax * smax, 1, N, K, true, false);
    op.n_dims = 2;
    snprintf(op.dims[0].name, sizeof(op.dims[0].name), "%s", "b");
    op.dims[0].max = bmax;
    memset(&op.dims[1], 0, sizeof(op.dims[1]));
    snprintf(op.dims[1].name, sizeof(op.dims[1].name), "%s", "s");
    op.dims[1].min = 1;
    op.dims[1].max = smax;
    op.dims[1].multiple_of = 1;
    op.inputs[0].sym[0] = op.inputs[3].sym[0] = op.output.sym[0] = 3;
    return op;
}

static tuner_program *gen(const tuner_op *op, const tuner_target *t, const tuner_schedule *s, const char *what)
{
    tuner_program *p = NULL;
    char *err = NULL;
    int rc = tuner_generate(op, t, s, &p, &err);
    CHECK(rc == 0 && p, "%s: generate failed (%d): %s", what, rc, err ? err : "");
    free(err);
    return rc == 0 ? p : NULL;
}

/* The static op's program with the same schedule: through the template itself where the
 * template does not apply to the static op (matmul_simt for a 16-bit op that names N or K: at a
 * fixed size matmul_mma takes it, and matmul_simt stands aside). */
static tuner_program *gen_static(const tuner_op *op, const tuner_target *t, const tuner_schedule *s, const char *what)
{
    const tuner_template *tp = tuner__template_find(s->template_name);
    if (!tp || tp->applies(op, t))
        return gen(op, t, s, what);
    tuner_program *p = calloc(1, sizeof(*p));
    char *err = NULL;
    int rc = p ? tp->generate(op, t, s, p, &err) : -1;
    CHECK(rc == 0 && p && p->source, "%s: generate (static, direct) failed (%d): %s", what, rc, err ? err : "");
    free(err);
    if (rc != 0) {
        tuner_program_free(p);
        return NULL;
    }
    return p;
}

/* Whether s generates for the static op (quietly: a stream-K schedule has none at some sizes). */
static bool static_valid(const tuner_op *op, const tuner_target *t, const tuner_schedule *s)
{
    tuner_program *p = NULL;
    char *err = NULL;
    const int rc = tuner_generate(op, t, s, &p, &err);
    tuner_program_free(p);
    free(err);
    return rc == 0;
}

/* The bytes of a generated kernel's static mbarrier array (matmul_wgmma's `__shared__ alignas(8)
 * hd_u64 wg_bars[N]`), 0 where it has none. */
static unsigned static_barrier_bytes(const char *source)
{
    static const char decl[] = "__shared__ alignas(8) hd_u64 wg_bars[";
    const char *q = strstr(source, decl);
    return q ? 8u * (unsigned)atoi(q + strlen(decl)) : 0u;
}

static bool rules_equal(const tuner_grid_rule *a, const tuner_grid_rule *b)
{
    return a->dims == b->dims && a->coef == b->coef && a->div == b->div && a->mul == b->mul && a->cap == b->cap;
}

/* Whether a dynamic launch's grid dimension g is right where the static program's is sg: equal,
 * but for matmul_wgmma's pingpong schedules, whose rule over a named M with an odd count of N
 * tiles counts whole pairs of tiles per tile row (wgmma.c wg_grid_rule): more blocks than units
 * (the rest find no tile), never fewer, and the same where the static grid is the SM count
 * (every block busy). */
static bool grid_ok(const tuner_schedule *s, unsigned g, unsigned sg)
{
    if (g == sg)
        return true;
    const bool pingpong = strcmp(s->template_name, "matmul_wgmma") == 0 && tuner_schedule_param(s, "pingpong", 0);
    const tuner_arch *a = tuner__arch(&(tuner_target){.sm = 90, .arch_specific = true});
    return pingpong && g > sg && a && sg < (unsigned)a->sm_count;
}

/* The tensor maps of dynamic launch l bound at sizes sz (each dimension i with sym[i] set is
 * sym_coef[i] times the product of the sizes of its dims, as a launcher encodes it) against
 * those of the static program at sz (sl): equal (tuner_tmap_equal); and dims[] of l holds the
 * value at the dims' max. Maps of a static op carry no sym. */
static void check_maps(const char *what, const tuner_launch *l, const tuner_launch *sl, const tuner_op *op,
                       const int64_t *sz, const char *at)
{
    CHECK(l->n_maps == sl->n_maps, "%s: at %s %d maps, static %d", what, at, l->n_maps, sl->n_maps);
    int64_t maxs[TUNER_MAX_DIMS] = {1, 1, 1, 1};
    for (int d = 0; d < op->n_dims; d++)
        maxs[d] = op->dims[d].max;
    for (int m = 0; m < l->n_maps && m < sl->n_maps; m++) {
        tuner_tmap b = l->maps[m];
        for (int i = 0; i < TUNER_TMAP_MAX_RANK; i++) {
            CHECK(sl->maps[m].sym[i] == 0 && sl->maps[m].sym_coef[i] == 0, "%s: a static map has sym", what);
            if (!b.sym[i]) {
                CHECK(b.sym_coef[i] == 0, "%s: map %d dim %d has a coefficient but no dims", what, m, i);
                continue;
            }
            CHECK(i < b.rank && b.sym_coef[i] > 0 && (b.sym[i] >> op->n_dims) == 0,
                  "%s: map %d dim %d: sym %u coef %llu", what, m, i, b.sym[i], (unsigned long long)b.sym_coef[i]);
            CHECK(b.dims[i] == b.sym_coef[i] * (uint64_t)tuner_dims_product(maxs, b.sym[i]),
                  "%s: map %d dims[%d] %llu is not its value at max", what, m, i, (unsigned long long)b.dims[i]);
            b.dims[i] = b.sym_coef[i] * (uint64_t)tuner_dims_product(sz, b.sym[i]);
            b.sym[i] = 0;
            b.sym_coef[i] = 0;
        }
        CHECK(tuner_tmap_equal(&b, &sl->maps[m]) && b.buf == sl->maps[m].buf,
              "%s: map %d bound at %s differs from the static program's", what, m, at);
        /* ... and op/tmap's binding, which the launchers use, gives the same map. */
        tuner_tmap lb;
        CHECK(tuner_tmap_bind(&l->maps[m], sz, &lb) == 0 && tuner_tmap_equal(&lb, &sl->maps[m]),
              "%s: map %d: tuner_tmap_bind at %s differs from the static program's", what, m, at);
    }
}

/* Checks one candidate of case `name` (its dynamic op `op`, `alt` the same with another max). */
static void check_candidate(const char *name, const tuner_op *op, const tuner_op *alt, const tuner_target *t,
                            const tuner_schedule *s, size_t j, int *n_rules)
{
    char what[512];
    char *sj = tuner_schedule_json(s);
    snprintf(what, sizeof(what), "%s #%zu %s", name, j, sj ? sj : "?");
    free(sj);
    tuner_program *p = gen(op, t, s, what);
    if (!p)
        return;
    const int nd = op->n_dims;
    tuner__gemm_problem gp;
    const bool mn2d = tuner__gemm_problem_init(op, &gp, NULL) == 0 && gp.m_sym && gp.n_sym;

    /* The dims: a parameter of every kernel and the last arguments of every launch. */
    int params = 0;
    for (const char *q = p->source; (q = strstr(q, "long long hd_dim0")); q++)
        params++;
    CHECK(params == p->n_kernels, "%s: %d kernels take hd_dim0, want %d", what, params, p->n_kernels);
    for (int k = 0; k < p->n_kernels; k++) {
        const tuner_launch *l = &p->kernels[k];
        bool ok = l->n_args > nd;
        for (int d = 0; ok && d < nd; d++)
            ok = l->args[l->n_args - nd + d] == TUNER_ARG_DIM0 + d;
        CHECK(ok, "%s: launch %d does not end with the dims' arguments", what, k);
    }

    /* At max: the static program's launches. */
    int64_t maxs[TUNER_MAX_DIMS] = {1, 1, 1, 1}, sizes[3][TUNER_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        maxs[d] = op->dims[d].max;
    tuner_op bound;
    CHECK(tuner_op_bind(op, maxs, &bound) == 0, "%s: bind at max", what);
    tuner_program *sp = gen_static(&bound, t, s, what);
    if (sp) {
        CHECK(sp->n_kernels == p->n_kernels && sp->workspace_bytes == p->workspace_bytes,
              "%s: %d kernels / %zu workspace bytes, static at max %d / %zu", what, p->n_kernels,
              p->workspace_bytes, sp->n_kernels, sp->workspace_bytes);
        for (int k = 0; k < p->n_kernels && k < sp->n_kernels; k++) {
            const tuner_launch *l = &p->kernels[k], *sl = &sp->kernels[k];
            check_maps(what, l, sl, op, maxs, "max");
            CHECK(strcmp(l->name, sl->name) == 0 && l->block[0] == sl->block[0] && l->shared_bytes == sl->shared_bytes &&
                      l->n_args == sl->n_args + nd && memcmp(l->args, sl->args, sizeof(int) * (size_t)sl->n_args) == 0,
                  "%s: launch %d differs from the static one at max beyond the dims", what, k);
            for (int d = 0; d < 3; d++) {
                if (mn2d && k == 0 && d < 2)
                    /* M and N both named: tile rows in x, columns in y (the static grid's x
                     * holds them all) */
                    CHECK(d == 1 || (unsigned long long)l->grid[0] * l->grid[1] == sl->grid[0] * (unsigned long long)sl->grid[1],
                          "%s: %u x %u blocks at max, static %u x %u", what, l->grid[0], l->grid[1], sl->grid[0],
                          sl->grid[1]);
                else
                    CHECK(grid_ok(s, l->grid[d], sl->grid[d]), "%s: launch %d grid[%d] %u at max, static %u", what, k,
                          d, l->grid[d], sl->grid[d]);
                CHECK(sl->grid_rule[d].dims == 0, "%s: a static program has a grid rule", what);
                if (l->grid_rule[d].dims) {
                    (*n_rules)++;
                    CHECK(tuner_grid_rule_eval(&l->grid_rule[d], maxs) == (int64_t)l->grid[d],
                          "%s: launch %d rule %d gives %lld at max, grid %u", what, k, d,
                          (long long)tuner_grid_rule_eval(&l->grid_rule[d], maxs), l->grid[d]);
                }
            }
        }
        tuner_program_free(sp);
    }

    /* At min, an odd size (a multiple of multiple_of: odd where that is 1) and max of every dim:
     * each rule gives the static program's grid there, each other dimension is the static one. */
    for (int d = 0; d < nd; d++) {
        const tuner_dim *dm = &op->dims[d];
        long long mid = ((dm->min + dm->max) / 2 / dm->multiple_of) * dm->multiple_of;
        if (dm->multiple_of == 1 && mid % 2 == 0)
            mid = mid + 1 <= dm->max ? mid + 1 : mid - 1;
        if (mid < dm->min)
            mid = dm->min;
        sizes[0][d] = dm->min;
        sizes[1][d] = mid;
        sizes[2][d] = dm->max;
    }
    for (int z = 0; z < 3; z++) {
        int64_t *sz = sizes[z];
        char at[96] = "";
        for (int d = 0, o = 0; d < nd && o < (int)sizeof(at); d++)
            o += snprintf(at + o, sizeof(at) - (size_t)o, "%s%s=%lld", d ? "," : "", op->dims[d].name, (long long)sz[d]);
        if (tuner_op_bind(op, sz, &bound) != 0) {
            CHECK(false, "%s: bind at %s", what, at);
            continue;
        }
        /* A stream-K schedule has no static program where its tiles fill whole waves or share
         * too few k tiles: the dynamic one runs every tile whole there (emit_unit_loop). */
        if (tuner_schedule_param(s, "stream_k", 0) && !static_valid(&bound, t, s))
            continue;
        tuner_program *bp = gen_static(&bound, t, s, what);
        if (!bp)
            continue;
        CHECK(bp->n_kernels == p->n_kernels && bp->workspace_bytes <= p->workspace_bytes,
              "%s: at %s the static program has %d kernels, %zu workspace bytes (dynamic %d, %zu)", what, at,
              bp->n_kernels, bp->workspace_bytes, p->n_kernels, p->workspace_bytes);
        for (int k = 0; k < p->n_kernels && k < bp->n_kernels; k++) {
            check_maps(what, &p->kernels[k], &bp->kernels[k], op, sz, at);
            long long g[3];
            for (int d = 0; d < 3; d++) {
                const tuner_grid_rule *r = &p->kernels[k].grid_rule[d];
                g[d] = r->dims ? (long long)tuner_grid_rule_eval(r, sz) : (long long)p->kernels[k].grid[d];
            }
            /* What a driver refuses with "invalid argument": an empty grid, more shared memory
             * than a block may opt into, more threads than a block holds, and dynamic shared
             * memory of 48 KiB or less that the static barriers push past 48 KiB (a launcher
             * raises the limit only above 48 KiB: tuner__dynamic_shared). */
            const tuner_arch *ta = tuner__arch(t);
            const tuner_launch *dl = &p->kernels[k];
            const unsigned static_bytes = static_barrier_bytes(p->source);
            CHECK(t_shared_launchable(dl->shared_bytes, static_bytes),
                  "%s: %u dynamic and %u static shared bytes, launched without raising the limit", what,
                  dl->shared_bytes, static_bytes);
            CHECK(g[0] >= 1 && g[1] >= 1 && g[2] >= 1 && dl->block[0] * dl->block[1] * dl->block[2] <= 1024 &&
                      (!ta || dl->shared_bytes <= (unsigned)ta->max_smem_per_block),
                  "%s: at %s launch %d is %lld x %lld x %lld blocks of %u threads, %u shared bytes", what, at, k,
                  g[0], g[1], g[2], dl->block[0] * dl->block[1] * dl->block[2], dl->shared_bytes);
            for (int d = 0; d < 3; d++) {
                if (mn2d && k == 0 && d < 2)
                    CHECK(d == 1 || g[0] * g[1] == (long long)bp->kernels[k].grid[0] * bp->kernels[k].grid[1],
                          "%s: at %s %lld x %lld blocks, static %u x %u", what, at, g[0], g[1], bp->kernels[k].grid[0],
                          bp->kernels[k].grid[1]);
                else
                    CHECK(grid_ok(s, (unsigned)g[d], bp->kernels[k].grid[d]),
                          "%s: at %s launch %d grid[%d] is %lld, static %u", what, at, k, d, g[d],
                          bp->kernels[k].grid[d]);
            }
        }
        tuner_program_free(bp);
    }

    /* Another max: the same code and launches (rules and all), only the grids at max differ. */
    tuner_program *ap = gen(alt, t, s, what);
    if (ap) {
        const bool same = strcmp(ap->source, p->source) == 0;
        CHECK(same, "%s: the source depends on the dims' max (%s: %lld vs %lld)", what, op->dims[0].name,
              (long long)op->dims[0].max, (long long)alt->dims[0].max);
        if (!same && getenv("HIDET_TEST_DUMP")) {
            FILE *f = fopen("/tmp/dyn_a.cu", "w"), *g = fopen("/tmp/dyn_b.cu", "w");
            if (f && g) {
                fputs(p->source, f);
                fputs(ap->source, g);
            }
            if (f)
                fclose(f);
            if (g)
                fclose(g);
        }
        CHECK(ap->n_kernels == p->n_kernels, "%s: kernels depend on max", what);
        for (int k = 0; k < p->n_kernels && k < ap->n_kernels; k++) {
            CHECK(ap->kernels[k].n_args == p->kernels[k].n_args &&
                      memcmp(ap->kernels[k].args, p->kernels[k].args, sizeof(int) * (size_t)p->kernels[k].n_args) == 0,
                  "%s: launch %d's arguments depend on max", what, k);
            for (int d = 0; d < 3; d++)
                CHECK(rules_equal(&ap->kernels[k].grid_rule[d], &p->kernels[k].grid_rule[d]),
                      "%s: launch %d's grid rule %d depends on max", what, k, d);
        }
        tuner_program_free(ap);
    }

    /* matmul_mma's whole-tile fast path: taken only where every size makes every tile whole. */
    if (strcmp(s->template_name, "matmul_mma") == 0 && tuner_schedule_param(s, "split_k", 1) == 1) {
        const int bm = tuner_schedule_param(s, "block_m", 0), bn = tuner_schedule_param(s, "block_n", 0);
        const tuner_tensor *o = &op->output;
        const long long N = o->shape[o->rank - 1], M = o->shape[o->rank - 2];
        /* A named M (2-D) divides into whole tiles by its multiple_of, a fixed one by itself. */
        long long mult = 1;
        for (int d = 0; d < nd; d++)
            mult *= op->dims[d].multiple_of;
        /* (a named N divides by its multiple_of too) */
        const bool whole = (o->sym[o->rank - 2] ? mult : M) % bm == 0 && (o->sym[o->rank - 1] ? mult : N) % bn == 0;
        const bool checks = strstr(p->source, " <= gm_M && gm_n0 + ") != NULL;
        if (o->sym[o->rank - 1])
            /* a named N stores through the element-checked emitters, never the tile fast path */
            CHECK(!checks, "%s: a named N with the whole-tile fast path", what);
        else
            CHECK(checks == !whole, "%s: multiple_of %lld, tiles %dx%d: %s the whole-tile check", what, mult, bm, bn,
                  checks ? "has" : "lacks");
    }

    if (t_in_sample(j)) {
        if (t_compile_check(what, p->source, t, p, NULL))
            compiled++;
        else
            CHECK(false, "%s: compile", what);
    }
    tuner_program_free(p);
}

static const char *const dynamic_templates[] = {"matmul_mma", "matmul_simt", "matmul_tf32", "matmul_wgmma", NULL};

static void run_case(const char *name, const tuner_op *op, const tuner_op *alt, int sm)
{
    tuner_target t = {.sm = sm, .arch_specific = sm == 90};
    tuner_space *sp = NULL;
    char *err = NULL;
    char label[160];
    snprintf(label, sizeof(label), "%s sm_%d%s", name, sm, sm == 90 ? "a" : "");
    if (tuner_space_build(op, &t, &sp, &err) < 0) {
        CHECK(false, "%s: no space: %s", label, err ? err : "");
        free(err);
        return;
    }
    CHECK(sp->n > 0, "%s: empty space", label);
    int per_tmpl[4] = {0, 0, 0, 0}, n_rules = 0;
    for (size_t j = 0; j < sp->n; j++) {
        const tuner_schedule *s = &sp->items[j];
        int ti = -1;
        for (int k = 0; dynamic_templates[k]; k++)
            if (strcmp(s->template_name, dynamic_templates[k]) == 0)
                ti = k;
        CHECK(ti >= 0, "%s: %s in a dynamic op's space", label, s->template_name);
        if (ti < 0)
            continue;
        per_tmpl[ti]++;
        const double us = tuner_predict_us(op, &t, s);
        CHECK(isfinite(us) && us > 0 && us < 1e11, "%s #%zu: prediction %g", label, j, us);
        /* The sanitizer build checks a sample (HIDET_TEST_CHECK_EVERY), its compiled ones among it. */
        if (t_in_check_sample(j) || t_in_sample(j))
            check_candidate(label, op, alt, &t, s, j, &n_rules);
    }
    /* (a named K alone changes no grid: only the k loop's trip count) */
    const bool k_only = op->n_dims == 1 && op->inputs[0].rank == 2 && op->inputs[0].sym[1] && !op->inputs[0].sym[0] &&
                        !op->output.sym[1];
    CHECK(n_rules > 0 || k_only, "%s: no launch has a grid rule", label);
    /* tune:"none" picks an item of the space, and with a tensor-core template there, one of it. */
    const size_t def = tuner_default_index(op, &t, sp);
    CHECK(def < sp->n, "%s: default %zu of %zu", label, def, sp->n);
    if (def < sp->n && (per_tmpl[0] || per_tmpl[3]))
        CHECK(strcmp(sp->items[def].template_name, "matmul_mma") == 0 ||
                  strcmp(sp->items[def].template_name, "matmul_wgmma") == 0,
              "%s: default is %s", label, sp->items[def].template_name);
    /* On sm_90a a matmul the copy engine can load (16-byte rows, no prologue) has wgmma
     * candidates. */
    tuner__gemm_problem gp;
    const bool nk = tuner__gemm_problem_init(op, &gp, NULL) == 0 && tuner__gemm_names_nk(&gp);
    if (sm == 90 && !nk && op->inputs[0].dtype != TUNER_F32 && op->prologue[0].n == 0 && op->inputs[0].align != 2)
        CHECK(per_tmpl[3] > 0, "%s: no matmul_wgmma candidate", label);
    printf("%-44s %4zu candidates (mma %d simt %d tf32 %d wgmma %d), %d grid rules, default %s\n", label, sp->n,
           per_tmpl[0], per_tmpl[1], per_tmpl[2], per_tmpl[3], n_rules, def < sp->n ? sp->items[def].template_name : "?");
    fflush(stdout);
    tuner_space_free(sp);
}

/* A matmul_wgmma schedule with these values of its parameters, in wg_param_names' order. */
#define WG_PARAMS 11
static const char *const wg_param_names[WG_PARAMS] = {"block_m",   "block_n", "stages",  "consumers",
                                                      "swizzle",   "pingpong", "stage_out", "cluster",
                                                      "split_k",   "stream_k", "cluster_n"};
static tuner_schedule wgmma_schedule(const int values[WG_PARAMS])
{
    tuner_schedule s = {.template_name = "matmul_wgmma"};
    for (int i = 0; i < WG_PARAMS; i++)
        tuner__gemm_param(&s, wg_param_names[i], values[i]);
    return s;
}

/* matmul_wgmma is in a dynamic op's space on sm_90a with its stream-K candidates, as in the
 * static op's at max: their kernels cut the shared k tiles from the tile count at launch, on one
 * block per SM at every size, and run every tile whole where the tiles fill whole waves (priced
 * so). Ops that break the axis-0 rule are refused by the templates (no space at all). */
static void test_refusals(void)
{
    tuner_target t = {.sm = 90, .arch_specific = true};
    tuner_op op = dyn_matmul_rows(TUNER_F16, 1, 8192, 1, 14336, 4096, false, false);
    tuner_space *sp = NULL;
    char *err = NULL;
    size_t wg = 0, sk = 0;
    CHECK(tuner_space_build(&op, &t, &sp, &err) == 0, "dynamic 8192x14336x4096 on sm_90a: %s", err ? err : "");
    for (size_t j = 0; sp && j < sp->n; j++) {
        wg += strcmp(sp->items[j].template_name, "matmul_wgmma") == 0;
        sk += tuner_schedule_param(&sp->items[j], "stream_k", 0) != 0;
    }
    CHECK(wg > 0 && sk > 0, "dynamic space: %zu matmul_wgmma candidates, %zu stream-K", wg, sk);
    tuner_space_free(sp);
    sp = NULL;
    {
        /* 128x256 tiles: 56 along N, so 4224 rows (33 tile rows) are 14 whole waves. */
        const tuner_schedule s = wgmma_schedule((const int[WG_PARAMS]){128, 256, 3, 2, 8, 0, 1, 1, 1, 1, 1});
        const tuner_schedule whole = wgmma_schedule((const int[WG_PARAMS]){128, 256, 3, 2, 8, 0, 1, 1, 1, 0, 1});
        tuner_program *dp = gen(&op, &t, &s, "dynamic stream-K 128x256");
        int64_t at_max[TUNER_MAX_DIMS] = {8192, 1, 1, 1};
        tuner_op bound;
        tuner_program *mp = tuner_op_bind(&op, at_max, &bound) == 0 ? gen(&bound, &t, &s, "stream-K at 8192") : NULL;
        if (dp && mp) {
            const tuner_launch *l = &dp->kernels[dp->n_kernels - 1];
            CHECK(dp->n_kernels == 2 && l->grid[0] == 132 && l->grid_rule[0].dims == 0 &&
                      dp->workspace_bytes == mp->workspace_bytes,
                  "dynamic stream-K: %d kernels, grid %u (rule %u), workspace %zu (static at max %zu)", dp->n_kernels,
                  l->grid[0], l->grid_rule[0].dims, dp->workspace_bytes, mp->workspace_bytes);
            CHECK(strstr(dp->source, "wg_skn = ((long long)gm_B") != NULL && strstr(mp->source, "wg_skn = 3584LL") != NULL,
                  "stream-K's tile count: from the sizes in the dynamic kernel, 64 x 56 in the static one at max");
        }
        tuner_program_free(dp);
        tuner_program_free(mp);
        /* At 4224 rows there is nothing to share: no static stream-K program, and the dynamic
         * kernel priced as its tiles whole after the flags' launch. */
        int64_t whole_waves[TUNER_MAX_DIMS] = {4224, 1, 1, 1};
        if (tuner_op_bind(&op, whole_waves, &bound) == 0) {
            CHECK(!static_valid(&bound, &t, &s), "stream-K at 14 whole waves generates");
            const double sk_us = tuner_predict_us(&bound, &t, &s), whole_us = tuner_predict_us(&bound, &t, &whole);
            CHECK(sk_us > whole_us && sk_us < whole_us + 2.0, "stream-K at whole waves priced %g us, without %g", sk_us,
                  whole_us);
        }
    }
    /* The static op at max has stream-K candidates too. */
    tuner_op st = t_matmul(TUNER_F16, 0, 0, 8192, 14336, 4096, false, false, 16);
    wg = sk = 0;
    if (tuner_space_build(&st, &t, &sp, &err) == 0)
        for (size_t j = 0; j < sp->n; j++) {
            wg += strcmp(sp->items[j].template_name, "matmul_wgmma") == 0;
            sk += tuner_schedule_param(&sp->items[j], "stream_k", 0) != 0;
        }
    CHECK(wg > 0 && sk > 0, "the static op: %zu matmul_wgmma candidates, %zu stream-K", wg, sk);
    tuner_space_free(sp);
    sp = NULL;
    free(err);
    err = NULL;

    /* Pingpong 64x192 tiles over a named M with 75 N tiles: the rule counts 38 units per tile
     * row where two rows hold 75 (n = 97: 76 blocks, the static grid 75), and the blocks without
     * a tile skip the closing hand-over. */
    {
        tuner_op pp = dyn_matmul_rows(TUNER_BF16, 1, 1000, 1, 14336, 4096, false, false);
        const tuner_schedule s = wgmma_schedule((const int[WG_PARAMS]){64, 192, 4, 2, 8, 1, 1, 1, 1, 0, 1});
        tuner_program *dp = gen(&pp, &t, &s, "pingpong 64x192"), *bp = NULL;
        int64_t n97[TUNER_MAX_DIMS] = {97, 1, 1, 1};
        tuner_op bound;
        if (dp && tuner_op_bind(&pp, n97, &bound) == 0)
            bp = gen(&bound, &t, &s, "pingpong 64x192 at 97");
        if (dp && bp) {
            const long long g = tuner_grid_rule_eval(&dp->kernels[0].grid_rule[0], n97);
            CHECK(g == 76 && bp->kernels[0].grid[0] == 75 && grid_ok(&s, (unsigned)g, bp->kernels[0].grid[0]),
                  "pingpong 64x192 at n=97: rule %lld blocks, static %u", g, bp->kernels[0].grid[0]);
            CHECK(strstr(dp->source, "if (wg_n0 > 0 && ") != NULL, "pingpong: no guard for blocks without a tile");
        }
        tuner_program_free(dp);
        tuner_program_free(bp);
    }

    /* Names the kernels do not take: M of a transposed a; a named K on a alone (b's K fixed); a
     * named N of a batched matmul; a residual naming its N axis as M (the output's N is fixed);
     * an output whose N does not carry b's name. */
    tuner_op bad[5];
    bad[0] = t_matmul(TUNER_F16, 0, 0, 512, 256, 128, true, false, 16);
    dyn_matmul_set_dim(&bad[0], 1, 512, 1);
    bad[0].inputs[0].sym[1] = 1;
    bad[0].output.sym[0] = 1;
    bad[1] = t_matmul(TUNER_F16, 0, 0, 512, 256, 128, false, false, 16);
    dyn_matmul_set_dim(&bad[1], 1, 128, 1);
    bad[1].inputs[0].sym[1] = 1;
    bad[2] = dyn_matmul_batch(TUNER_F16, 1, 16, 100, 72, 64, true, false);
    bad[2].inputs[1].shape[2] = 16;
    bad[2].output.shape[2] = 16;
    bad[2].inputs[1].sym[2] = 1;
    bad[2].output.sym[2] = 1;
    bad[3] = dyn_matmul_nk(TUNER_F16, 512, 512, 128, "m", NULL, NULL, 1, false, true);
    bad[3].inputs[3].sym[1] = 1;
    bad[4] = dyn_matmul_nk(TUNER_F16, 512, 256, 128, NULL, "n", NULL, 1, false, false);
    bad[4].output.sym[1] = 0;
    for (int i = 0; i < 5; i++) {
        tuner__gemm_problem p;
        char *e = NULL;
        CHECK(tuner__gemm_problem_init(&bad[i], &p, &e) < 0 && e, "misplaced name %d accepted", i);
        free(e);
        CHECK(tuner_space_build(&bad[i], &t, &sp, &err) < 0, "misplaced name %d has a space", i);
        tuner_space_free(sp);
        sp = NULL;
        free(err);
        err = NULL;
    }
    /* The problem view of a good one. */
    tuner__gemm_problem p;
    tuner_op good = dyn_matmul_rows(TUNER_F16, 64, 4096, 64, 768, 512, true, false);
    CHECK(tuner__gemm_problem_init(&good, &p, NULL) == 0 && p.dynamic && p.m_sym == 1 && !p.batch_sym &&
              p.M == 4096 && p.m_multiple == 64,
          "dynamic problem view");
    good = dyn_matmul_batch(TUNER_BF16, 1, 16, 100, 72, 64, true, false);
    CHECK(tuner__gemm_problem_init(&good, &p, NULL) == 0 && p.dynamic && !p.m_sym && p.batch_sym == 1 &&
              p.batch == 16 && p.M == 100,
          "dynamic batch problem view");
    /* Named N (b [N, K] with trans_b) and K: the dims sort as k, m, n. */
    good = dyn_matmul_nk(TUNER_F16, 300, 200, 100, "m", "n", "k", 1, true, true);
    CHECK(tuner__gemm_problem_init(&good, &p, NULL) == 0 && p.dynamic && p.k_sym == 1 && p.m_sym == 2 &&
              p.n_sym == 4 && p.N == 200 && p.K == 100,
          "dynamic M, N, K problem view");
    /* ... whose sm_90a space is matmul_mma's, without split-K or a staged output (matmul_wgmma
     * refuses named N and K; matmul_simt stands aside for a 16-bit op matmul_mma takes). */
    if (tuner_space_build(&good, &t, &sp, &err) == 0) {
        size_t mma = 0, other = 0, split = 0;
        for (size_t j = 0; j < sp->n; j++) {
            const bool is_mma = strcmp(sp->items[j].template_name, "matmul_mma") == 0;
            mma += is_mma;
            other += !is_mma;
            split += tuner_schedule_param(&sp->items[j], "split_k", 1) != 1 ||
                     tuner_schedule_param(&sp->items[j], "stage_out", 0) != 0;
        }
        CHECK(mma > 0 && other == 0 && split == 0, "named N and K: %zu matmul_mma candidates, %zu others, %zu split-K or staged",
              mma, other, split);
    } else {
        CHECK(false, "named N and K: no space: %s", err ? err : "");
    }
    tuner_space_free(sp);
    sp = NULL;
    free(err);
    err = NULL;
}

/* A dynamic op is ranked for its whole range (tuner_rank): BERT's [b*s, 768] x [768, 768] at the
 * bottom, the geometric middle and the top of an entry's b and s ranges. The first pick must be
 * within 1.27x of the model's best at each of the three; the pick at the top alone (the 128x192
 * tile) was 1.5x slower on the H200 at 1379 rows than the exact-size pick. (The bound was 1.25
 * until issue 39's round trip (tuner/gemm/cost.c) priced 4-stage 128x192 tiles 2-4% faster: at
 * 13 x 257 and 7 x 415 their 108 tiles take one wave where the range pick's 162 128x128 tiles
 * take two, 1.22-1.25x its time before, 1.25-1.26x after; the pick itself, 128x128 with two
 * consumers, stayed.) With `picked`, it must
 * also be the model's first choice at one of them: at b 13..14, s 257..320 the worst ratio alone
 * chose 64x128 tiles the model never picks there, 1.3x slower on the H200 than the exact-size
 * pick at 14 x 274. */
static void rank_over_range_case(int64_t bmin, int64_t bmax, int64_t smin, int64_t smax, bool picked)
{
    tuner_op op = dyn_rows2(TUNER_F16, bmax, smax, 768, 768);
    op.dims[0].min = bmin;
    op.dims[1].min = smin;
    const tuner_target t = {90, true};
    tuner_space *sp = NULL;
    char *err = NULL;
    CHECK(tuner_space_build(&op, &t, &sp, &err) == 0 && sp && sp->n > 1, "rank over range: space: %s",
          err ? err : "?");
    free(err);
    if (!sp || sp->n <= 1) {
        tuner_space_free(sp);
        return;
    }
    size_t *order = malloc(sp->n * sizeof(*order));
    const int64_t sizes[3][2] = {{bmin, smin},
                                 {(int64_t)sqrt((double)bmin * bmax), (int64_t)sqrt((double)smin * smax)},
                                 {bmax, smax}};
    tuner_op at[3];
    bool bound = true;
    for (int p = 0; p < 3; p++)
        bound = bound && tuner_op_bind(&op, sizes[p], &at[p]) == 0;
    CHECK(order && bound, "rank over range: bind");
    if (order && bound) {
        tuner_rank(&op, &t, sp, order, NULL);
        const tuner_schedule *first = &sp->items[order[0]];
        bool first_somewhere = false;
        for (int p = 0; p < 3; p++) {
            double best = 1e12;
            for (size_t i = 0; i < sp->n; i++) {
                const double us = tuner_predict_us(&at[p], &t, &sp->items[i]);
                best = us < best ? us : best;
            }
            const double ratio = tuner_predict_us(&at[p], &t, first) / best;
            first_somewhere = first_somewhere || ratio <= 1.01;
            CHECK(ratio <= 1.27, "rank over range b %lld..%lld s %lld..%lld: the first pick is %.2fx the best at %lld x %lld",
                  (long long)bmin, (long long)bmax, (long long)smin, (long long)smax, ratio, (long long)sizes[p][0],
                  (long long)sizes[p][1]);
        }
        CHECK(!picked || first_somewhere,
              "rank over range b %lld..%lld s %lld..%lld: the first pick (%s %d x %d) is the model's first choice nowhere",
              (long long)bmin, (long long)bmax, (long long)smin, (long long)smax, first->template_name,
              tuner_schedule_param(first, "block_m", 0), tuner_schedule_param(first, "block_n", 0));
        /* The samples a measured job compares its candidates at: the bottom, the middle and the
         * top above among them, each name's sizes never falling; and what it carries a
         * candidate's times there by: each item's own prediction at a sample over its prediction
         * at the middle (at and below it) or the top (above) - its own, not the best's. */
        double *carry = malloc(sp->n * TUNER_RANGE_SAMPLES * sizeof(*carry));
        CHECK(carry != NULL, "rank over range: memory");
        int64_t sample[TUNER_RANGE_SAMPLES][TUNER_MAX_DIMS];
        tuner_op at_k[TUNER_RANGE_SAMPLES];
        bool bound_k = true;
        for (int k = 0; k < TUNER_RANGE_SAMPLES; k++) {
            tuner_range_sample(&op, k, sample[k]);
            bound_k = bound_k && tuner_op_bind(&op, sample[k], &at_k[k]) == 0;
            for (int n = 0; k > 0 && n < 2; n++)
                CHECK(sample[k][n] >= sample[k - 1][n], "rank over range: sample %d of name %d falls", k, n);
        }
        CHECK(bound_k, "rank over range: samples bind");
        static const int where[3] = {0, TUNER_RANGE_MIDDLE, TUNER_RANGE_TOP};
        for (int p = 0; p < 3; p++)
            CHECK(sample[where[p]][0] == sizes[p][0] && sample[where[p]][1] == sizes[p][1],
                  "rank over range: sample %d is %lld x %lld, want %lld x %lld", where[p],
                  (long long)sample[where[p]][0], (long long)sample[where[p]][1], (long long)sizes[p][0],
                  (long long)sizes[p][1]);
        if (carry && bound_k) {
            tuner_range_prices prices = {.carry = carry};
            tuner_rank_ranged(&op, &t, sp, order, NULL, &prices);
            CHECK(prices.ranged, "rank over range b %lld..%lld: not ranged", (long long)bmin, (long long)bmax);
            double best_lo = 1e12, best_mid = 1e12;
            for (size_t i = 0; i < sp->n; i++) {
                const double lo = tuner_predict_us(&at_k[0], &t, &sp->items[i]);
                const double mid = tuner_predict_us(&at_k[TUNER_RANGE_MIDDLE], &t, &sp->items[i]);
                best_lo = lo < best_lo ? lo : best_lo;
                best_mid = mid < best_mid ? mid : best_mid;
            }
            size_t n_own = 0;
            for (size_t i = 0; i < sp->n; i++) {
                double us[TUNER_RANGE_SAMPLES];
                for (int k = 0; k < TUNER_RANGE_SAMPLES; k++)
                    us[k] = tuner_predict_us(&at_k[k], &t, &sp->items[i]);
                if (us[TUNER_RANGE_MIDDLE] >= 1e12 || us[TUNER_RANGE_TOP] >= 1e12)
                    continue;
                for (int k = 0; k < TUNER_RANGE_SAMPLES; k++) {
                    const double want = us[k] >= 1e12 ? 1.0
                                                      : us[k] / us[k <= TUNER_RANGE_MIDDLE ? TUNER_RANGE_MIDDLE
                                                                                           : TUNER_RANGE_TOP];
                    CHECK(fabs(carry[i * TUNER_RANGE_SAMPLES + k] - want) <= 1e-9 * want,
                          "rank over range b %lld..%lld: item %zu sample %d carry %.4f, want %.4f", (long long)bmin,
                          (long long)bmax, i, k, carry[i * TUNER_RANGE_SAMPLES + k], want);
                }
                n_own += fabs(us[0] / us[TUNER_RANGE_MIDDLE] - best_lo / best_mid) > 0.01 * best_lo / best_mid;
            }
            CHECK(n_own > 0, "rank over range b %lld..%lld: every item's bottom/middle is the best's",
                  (long long)bmin, (long long)bmax);
        }
        free(carry);
    }
    free(order);
    tuner_space_free(sp);
}

static void test_rank_over_range(void)
{
    rank_over_range_case(2, 16, 193, 224, false);
    rank_over_range_case(13, 14, 257, 320, true);
    rank_over_range_case(7, 7, 385, 448, true);
}

/* A named M's tile coordinates take no 64-bit division (a call the producer waits on before its
 * first load: the swapped 64x56 pair built for a named M ran 0.6 us slower at 112 rows than its
 * fixed-size build on the H200, session 20): a swapped kernel's count holds no batch entries, so
 * its batch index is 0; every other divisor is 32-bit. */
static void test_tile_index_divisions(void)
{
    const tuner_target t = {.sm = 90, .arch_specific = true};
    tuner_op op = dyn_matmul_rows(TUNER_F16, 1, 112, 1, 4096, 4096, false, false);
    tuner_space *sp = NULL;
    char *err = NULL;
    if (tuner_space_build(&op, &t, &sp, &err) < 0) {
        CHECK(false, "space: %s", err ? err : "?");
        free(err);
        return;
    }
    size_t swapped = 0, checked = 0;
    for (size_t i = 0; i < sp->n; i++) {
        const tuner_schedule *s = &sp->items[i];
        if (strcmp(s->template_name, "matmul_wgmma") || tuner_schedule_param(s, "stream_k", 0))
            continue;
        tuner_program *pr = NULL;
        if (tuner_generate(&op, &t, s, &pr, NULL) < 0)
            continue;
        checked++;
        const bool swap = tuner_schedule_param(s, "swap", 0) == 1;
        swapped += swap;
        CHECK(!strstr(pr->source, "(int)(t / gm_per)"), "candidate %zu divides the tile index in 64 bits", i);
        CHECK(!swap || strstr(pr->source, "const int gm_b = 0, gm_r = (int)t;"),
              "swapped candidate %zu computes a batch index", i);
        tuner_program_free(pr);
    }
    CHECK(checked > 20 && swapped > 5, "%zu candidates checked, %zu swapped", checked, swapped);
    tuner_space_free(sp);
}

int main(int argc, char **argv)
{
    if (t_subset_init(&argc, argv) < 0)
        return 2;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    test_refusals();
    test_rank_over_range();
    test_tile_index_divisions();
    struct {
        const char *name;
        tuner_op op, alt;
        int sm;
    } cases[24];
    int nc = 0;
    /* Named M: odd N and K keep the edge paths (register-staged loads, partial N tiles) in. */
    cases[nc].name = "f16 [n<=4096,512]x[512,776] +bias+res";
    cases[nc].op = dyn_matmul_rows(TUNER_F16, 1, 4096, 1, 776, 512, true, false);
    cases[nc].alt = with_max(&cases[nc].op, 0, 3001);
    cases[nc++].sm = 80;
    cases[nc].name = "bf16 [n<=2048/64,320]x[320,1024] +bias+res";
    cases[nc].op = dyn_matmul_rows(TUNER_BF16, 64, 2048, 64, 1024, 320, true, false);
    cases[nc].alt = with_max(&cases[nc].op, 0, 1280);
    cases[nc++].sm = 90;
    cases[nc].name = "f16 [n<=64,4096]x[4096,4096] (decode)";
    cases[nc].op = dyn_matmul_rows(TUNER_F16, 1, 64, 1, 4096, 4096, false, false);
    cases[nc].alt = with_max(&cases[nc].op, 0, 40);
    cases[nc++].sm = 90;
    cases[nc].name = "f32 [n<=1000,96]x[96,200] +bias+res tf32";
    cases[nc].op = dyn_matmul_rows(TUNER_F32, 1, 1000, 1, 200, 96, true, true);
    cases[nc].alt = with_max(&cases[nc].op, 0, 777);
    cases[nc++].sm = 80;
    cases[nc].name = "bf16 [b*s<=8*512,256]x[256,384] +bias+res";
    cases[nc].op = dyn_rows2(TUNER_BF16, 8, 512, 384, 256);
    cases[nc].alt = with_max(&cases[nc].op, 0, 6);
    cases[nc++].sm = 80;
    cases[nc].name = "f16 align2 relu(0.5a*[K]) [n<=1000,200]x[200,136]";
    cases[nc].op = dyn_matmul_prologue(TUNER_F16, 1000, 136, 200, false);
    cases[nc].alt = with_max(&cases[nc].op, 0, 700);
    cases[nc++].sm = 80;
    /* Named batch. */
    cases[nc].name = "f16 [b<=16,100,64]x[b,64,72] +res+bias";
    cases[nc].op = dyn_matmul_batch(TUNER_F16, 1, 16, 100, 72, 64, true, true);
    cases[nc].alt = with_max(&cases[nc].op, 0, 11);
    cases[nc++].sm = 80;
    cases[nc].name = "bf16 [b<=8,128,256]x[256,128]";
    cases[nc].op = dyn_matmul_batch(TUNER_BF16, 2, 8, 128, 128, 256, false, false);
    cases[nc].alt = with_max(&cases[nc].op, 0, 5);
    cases[nc++].sm = 90;
    cases[nc].name = "f32 [b<=12,33,40]x[b,40,24]";
    cases[nc].op = dyn_matmul_batch(TUNER_F32, 1, 12, 33, 24, 40, true, false);
    cases[nc].alt = with_max(&cases[nc].op, 0, 7);
    cases[nc++].sm = 80;
    /* matmul_wgmma (sm_90a): the shapes (N 4096 and 14336: odd N-tile counts of 192-wide
     * pingpong tiles, 75), a named batch with b batched (3-D maps of A, B and the output). */
    cases[nc].name = "f16 [n<=8192,4096]x[4096,4096] +bias";
    cases[nc].op = dyn_matmul_rows(TUNER_F16, 1, 8192, 1, 4096, 4096, false, false);
    {
        long long bias[1] = {4096};
        tuner_op *o = &cases[nc].op;
        o->inputs[o->n_inputs] = t_tensor(TUNER_F16, 1, bias, 16);
        o->epilogue.steps[o->epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_ADD, .operand = o->n_inputs++};
    }
    cases[nc].alt = with_max(&cases[nc].op, 0, 5000);
    cases[nc++].sm = 90;
    cases[nc].name = "bf16 [n<=1000,4096]x[4096,14336]";
    cases[nc].op = dyn_matmul_rows(TUNER_BF16, 1, 1000, 1, 14336, 4096, false, false);
    cases[nc].alt = with_max(&cases[nc].op, 0, 999);
    cases[nc++].sm = 90;
    cases[nc].name = "f16 [b<=16,200,128]x[b,128,192] +res+bias";
    cases[nc].op = dyn_matmul_batch(TUNER_F16, 1, 16, 200, 192, 128, true, true);
    cases[nc].alt = with_max(&cases[nc].op, 0, 9);
    cases[nc++].sm = 90;
    /* Named N and K (matmul_mma for 16 bits, matmul_simt and matmul_tf32 for fp32): every axis
     * named with odd sizes, a
     * self-attention's q @ k^T (M and N both s, b = k transposed) and p @ v (M and K both s), a
     * named N alone with tf32, and a long named K (split-K slices cut at launch). */
    cases[nc].name = "f16 [m,k]x[k,n] <=1000x776x520 +bias+res";
    cases[nc].op = dyn_matmul_nk(TUNER_F16, 1000, 776, 520, "m", "n", "k", 1, false, true);
    cases[nc].alt = with_max(&cases[nc].op, 0, 333);
    cases[nc++].sm = 80;
    cases[nc].name = "f16 q@k^T [s,64]x[s,64]^T s<=1024";
    cases[nc].op = dyn_matmul_nk(TUNER_F16, 1024, 1024, 64, "s", "s", NULL, 1, true, false);
    cases[nc].alt = with_max(&cases[nc].op, 0, 777);
    cases[nc++].sm = 90;
    cases[nc].name = "bf16 p@v [s,s]x[s,64] s<=1024";
    cases[nc].op = dyn_matmul_nk(TUNER_BF16, 1024, 64, 1024, "s", NULL, "s", 1, false, false);
    cases[nc].alt = with_max(&cases[nc].op, 0, 901);
    cases[nc++].sm = 90;
    cases[nc].name = "bf16 [m,k]x[k,n] /8 <=512x1024x512 +bias+res";
    cases[nc].op = dyn_matmul_nk(TUNER_BF16, 512, 1024, 512, "m", "n", "k", 8, false, true);
    for (int k = 0; k < cases[nc].op.n_dims; k++)
        cases[nc].op.dims[k].multiple_of = 8;
    cases[nc].alt = with_max(&cases[nc].op, 0, 256);
    cases[nc++].sm = 80;
    cases[nc].name = "f32 [200,96]x[96,n<=1000] +bias+res tf32";
    cases[nc].op = dyn_matmul_nk(TUNER_F32, 200, 1000, 96, NULL, "n", NULL, 1, false, true);
    cases[nc].op.attrs.matmul.allow_tf32 = true;
    cases[nc].alt = with_max(&cases[nc].op, 0, 555);
    cases[nc++].sm = 80;
    cases[nc].name = "f32 [64,k<=4096]x[k,48]";
    cases[nc].op = dyn_matmul_nk(TUNER_F32, 64, 48, 4096, NULL, NULL, "k", 1, false, false);
    cases[nc].alt = with_max(&cases[nc].op, 0, 3001);
    cases[nc++].sm = 80;
    for (int c = 0; c < nc; c++)
        run_case(cases[c].name, &cases[c].op, &cases[c].alt, cases[c].sm);
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
