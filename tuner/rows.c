/* tuner/rows.c - row-wise templates: softmax (last axis), layernorm, rmsnorm and reduce over the
 * innermost axis.
 *
 * One generator, four templates. A row of D elements is handled by a group of threads_per_row
 * threads (a sub-warp, a warp, or several warps reducing through shared memory); a block holds
 * rows_per_block such groups. Rows are read with 16-byte vectors (vec > 1) when the row length
 * and every row-indexed pointer allow it, else element by element. With cache=1 a row is held in
 * registers (one DRAM read: load -> reduce -> normalise -> store), the per-thread slots laid out by
 * the task mapping repeat(NV) * spatial(threads_per_row) so that consecutive threads read
 * consecutive vectors (coalesced); with cache=0 the row is streamed twice (softmax's first pass is
 * the online max/sum recurrence). For very long rows and few rows, split > 1 spreads a row over
 * `split` blocks: a stats kernel writes per-chunk partials to the workspace and an apply kernel
 * combines them (every block in the same fixed order, so all agree) and writes its chunk.
 *
 * Every kernel keeps all threads alive to the end (no early return) so that warp shuffles with a
 * full mask and __syncthreads() are always reached by every thread; out-of-range rows and columns
 * are predicated instead.
 *
 * A dynamic op (named dims on any of x's axes before the row, tuner/codegen.h) keeps the row
 * length D fixed and takes the row count R = (x's fixed leading axes) x (the dims' sizes) at
 * launch: the leading axes are contiguous, so ["b", 12, "s", 64] is 12 * b * s rows of 64. Row
 * bounds read R from the hd_dim parameters, every grid dimension that counts rows has a rule, the
 * split form's workspace is sized for the largest R, and a fused operand's offset reads the named
 * sizes it needs (tuner__bcast_offset). A named row length (a named last axis, or a reduce over a
 * named axis) is left to the static op.
 */
#include "tuner/core.h"
#include "tuner/mapping.h"
#include "tuner/space.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { K_SOFTMAX, K_LAYERNORM, K_RMSNORM, K_REDUCE };

static const char *const P_TPR = "threads_per_row";
static const char *const P_RPB = "rows_per_block";
static const char *const P_VEC = "vec";
static const char *const P_CACHE = "cache";
static const char *const P_SPLIT = "split";

/* Register budget for cache=1: floats of the row held per thread. */
#define MAX_CACHED 32

typedef struct rows_geo {
    int kind;
    long long R, D;      /* rows, row length */
    tuner_dtype in_dt;   /* x */
    int vmax;            /* elements in 16 bytes of x */
    bool vec_ok;         /* 16-byte access allowed */
    /* R = rcoef * (product of the dims in rmask) at launch; rmask 0: R is fixed (static op). */
    unsigned rmask;
    long long rcoef;
} rows_geo;

typedef struct rows_cfg {
    int tpr, rpb, vec, cache, split;
    long long nvt; /* vectors per row */
    int nv;        /* cached vectors per thread */
    int block;
} rows_cfg;

static int op_kind(const tuner_op *op)
{
    switch (op->kind) {
    case TUNER_OP_SOFTMAX:
        return K_SOFTMAX;
    case TUNER_OP_LAYERNORM:
        return K_LAYERNORM;
    case TUNER_OP_RMSNORM:
        return K_RMSNORM;
    default:
        return K_REDUCE;
    }
}

/* Inner size of a reduction: product of the dims after the axis. */
static long long reduce_inner(const tuner_op *op)
{
    int64_t outer, len, inner;
    tuner_reduce_dims(op, &outer, &len, &inner);
    return inner;
}

static bool rows_applies_common(const tuner_op *op, const tuner_target *t)
{
    if (!tuner__arch(t) || !tuner__prologue_input0_only(op) || op->n_inputs < 1 || op->n_anchor_inputs < 1)
        return false;
    const tuner_tensor *x = &op->inputs[0];
    if (x->rank < 1 || tuner_tensor_numel(x) < 1)
        return false;
    if (tuner_op_is_dynamic(op)) {
        /* Named rows only (x's axes before the row): the row length and gamma / beta (indexed
         * by column) stay fixed; a reduce's reduced axes are the row. */
        if (!tuner__dyn_supported(op) || !tuner__sym_mask(x) || x->sym[x->rank - 1])
            return false;
        if (op->kind == TUNER_OP_REDUCE)
            for (int d = op->attrs.reduce.axis; d >= 0 && d < x->rank; d++)
                if (x->sym[d])
                    return false;
        for (int i = 1; i < op->n_anchor_inputs; i++)
            if (tuner__sym_mask(&op->inputs[i]))
                return false;
    }
    return true;
}

static bool softmax_applies(const tuner_op *op, const tuner_target *t)
{
    return op->kind == TUNER_OP_SOFTMAX && rows_applies_common(op, t);
}

static bool layernorm_applies(const tuner_op *op, const tuner_target *t)
{
    return op->kind == TUNER_OP_LAYERNORM && (op->n_anchor_inputs == 1 || op->n_anchor_inputs == 3) &&
           rows_applies_common(op, t);
}

static bool rmsnorm_applies(const tuner_op *op, const tuner_target *t)
{
    return op->kind == TUNER_OP_RMSNORM && (op->n_anchor_inputs == 1 || op->n_anchor_inputs == 2) &&
           rows_applies_common(op, t);
}

static bool reduce_rows_applies(const tuner_op *op, const tuner_target *t)
{
    return op->kind == TUNER_OP_REDUCE && rows_applies_common(op, t) && op->attrs.reduce.axis >= 0 &&
           op->attrs.reduce.axis < op->inputs[0].rank && reduce_inner(op) == 1;
}

static rows_geo geo_of(const tuner_op *op)
{
    rows_geo g;
    memset(&g, 0, sizeof(g));
    const tuner_tensor *x = &op->inputs[0];
    g.kind = op_kind(op);
    g.D = x->shape[x->rank - 1];
    if (g.kind == K_REDUCE) { /* the reduced axes are the rows (they end at the last axis) */
        int64_t outer, len, inner;
        tuner_reduce_dims(op, &outer, &len, &inner);
        g.D = len;
    }
    g.R = tuner_tensor_numel(x) / (g.D > 0 ? g.D : 1);
    g.rmask = tuner__sym_mask(x);
    g.rcoef = tuner_tensor_fixed_numel(x) / (g.D > 0 ? g.D : 1);
    g.in_dt = x->dtype;
    g.vmax = 16 / tuner_dtype_size(x->dtype);
    /* Vector access needs the row length to be a multiple of the vector and every pointer that is
     * indexed by column (x, gamma, beta, and the output for the row ops) to be 16-byte aligned. */
    g.vec_ok = g.D % g.vmax == 0 && x->align >= 16;
    for (int i = 1; i < op->n_anchor_inputs; i++)
        g.vec_ok = g.vec_ok && op->inputs[i].align >= 16;
    if (g.kind != K_REDUCE && op->output.align != 0 && op->output.align < 16)
        g.vec_ok = false;
    return g;
}

static bool cfg_of(const rows_geo *g, const tuner_schedule *s, rows_cfg *c)
{
    c->tpr = tuner_schedule_param(s, P_TPR, 32);
    c->rpb = tuner_schedule_param(s, P_RPB, 1);
    c->vec = tuner_schedule_param(s, P_VEC, 1);
    c->cache = tuner_schedule_param(s, P_CACHE, 0);
    c->split = tuner_schedule_param(s, P_SPLIT, 1);
    if (c->tpr < 1 || c->tpr > 1024 || (c->tpr & (c->tpr - 1)) || c->rpb < 1 || (c->rpb & (c->rpb - 1)))
        return false;
    if (c->vec != 1 && (c->vec != g->vmax || !g->vec_ok))
        return false;
    c->block = c->tpr * c->rpb;
    if (c->block < 32 || c->block > 1024)
        return false;
    c->nvt = g->D / c->vec;
    c->nv = (int)((c->nvt + c->tpr - 1) / c->tpr);
    if (c->cache && ((long long)c->nv * c->vec > MAX_CACHED || g->kind == K_REDUCE || c->split != 1))
        return false;
    if (c->split != 1) {
        if (c->split < 2 || c->split > 32 || c->rpb != 1 || c->tpr < 128 || g->R > 65535 ||
            c->nvt < (long long)c->split * c->tpr)
            return false;
    }
    return true;
}

/* The row count as a C expression: a literal, or for a dynamic op the product of the launch's
 * sizes (into buf). */
static const char *rows_expr(const rows_geo *g, char *buf, size_t n)
{
    if (g->rmask)
        return tuner__scaled_dims_expr(g->rcoef, g->rmask, buf, n);
    snprintf(buf, n, "%lldLL", g->R);
    return buf;
}

/* ---- enumeration ---------------------------------------------------------------------------- */

static int enumerate_rows_as(const tuner_op *op, const tuner_target *t, const char *name, tuner_schedule **items,
                             size_t *n, bool tiny);

/* A row group is at least half busy and a block has more rows than the tensor only when it
 * must: that leaves nothing for a tiny tensor (2 rows of 8: at most 8 x 2 threads, under a
 * warp), whose space then lets blocks take idle rows up to one warp (`tiny`). */
static int enumerate_rows(const tuner_op *op, const tuner_target *t, const char *name, tuner_schedule **items,
                          size_t *n)
{
    const size_t before = *n;
    int r = enumerate_rows_as(op, t, name, items, n, false);
    if (r == 0 && *n == before)
        r = enumerate_rows_as(op, t, name, items, n, true);
    return r;
}

static int enumerate_rows_as(const tuner_op *op, const tuner_target *t, const char *name, tuner_schedule **items,
                             size_t *n, bool tiny)
{
    const tuner_arch *a = tuner__arch(t);
    rows_geo g = geo_of(op);
    static const int tprs[] = {4, 8, 16, 32, 64, 128, 256, 512, 1024};
    static const int rpbs[] = {1, 2, 4, 8, 16, 32, 64};
    static const int splits[] = {1, 2, 4, 8, 16, 32};
    const char *names[5] = {P_TPR, P_RPB, P_VEC, P_CACHE, P_SPLIT};
    for (int vi = 0; vi < 2; vi++) {
        int vec = vi ? g.vmax : 1;
        if (vec > 1 && !g.vec_ok)
            continue;
        long long nvt = g.D / vec;
        for (size_t ti = 0; ti < sizeof(tprs) / sizeof(tprs[0]); ti++) {
            int tpr = tprs[ti];
            /* At least half of a row group has work: wider groups only idle. */
            if (tpr > 4 && tpr > tuner__pow2ceil(nvt))
                continue;
            for (size_t ri = 0; ri < sizeof(rpbs) / sizeof(rpbs[0]); ri++) {
                int rpb = rpbs[ri];
                if (rpb > 1 && rpb > tuner__pow2ceil(g.R) && !(tiny && tpr * rpb <= 32))
                    continue;
                int block = tpr * rpb;
                if (block < 32 || block > a->max_threads_per_block || block > 512 * (rpb == 1 ? 2 : 1))
                    continue;
                for (int cache = 0; cache < 2; cache++) {
                    for (size_t si = 0; si < sizeof(splits) / sizeof(splits[0]); si++) {
                        int split = splits[si];
                        /* Splitting a row only pays when there are fewer rows than SMs. */
                        if (split > 1 && (g.R > a->sm_count || g.D < 4096))
                            continue;
                        int values[5] = {tpr, rpb, vec, cache, split};
                        tuner_schedule s;
                        memset(&s, 0, sizeof(s));
                        s.template_name = name;
                        s.n_params = g.kind == K_REDUCE ? 3 : 5;
                        int nparams = 0;
                        for (int k = 0; k < 5; k++) {
                            if (g.kind == K_REDUCE && k == 3)
                                continue; /* a reduction has nothing to cache */
                            s.params[nparams].name = names[k];
                            s.params[nparams].value = values[k];
                            nparams++;
                        }
                        s.n_params = nparams;
                        if (g.kind == K_REDUCE && cache)
                            continue;
                        rows_cfg c;
                        if (!cfg_of(&g, &s, &c))
                            continue;
                        const char *pn[5];
                        int pv[5];
                        for (int k = 0; k < nparams; k++) {
                            pn[k] = s.params[k].name;
                            pv[k] = s.params[k].value;
                        }
                        int r = tuner__space_push(items, n, name, nparams, pn, pv);
                        if (r < 0)
                            return r;
                    }
                }
            }
        }
    }
    return 0;
}

static int softmax_enumerate(const tuner_op *op, const tuner_target *t, tuner_schedule **items, size_t *n)
{
    return enumerate_rows(op, t, "softmax_rows", items, n);
}
static int layernorm_enumerate(const tuner_op *op, const tuner_target *t, tuner_schedule **items, size_t *n)
{
    return enumerate_rows(op, t, "layernorm_rows", items, n);
}
static int rmsnorm_enumerate(const tuner_op *op, const tuner_target *t, tuner_schedule **items, size_t *n)
{
    return enumerate_rows(op, t, "rmsnorm_rows", items, n);
}
static int reduce_rows_enumerate(const tuner_op *op, const tuner_target *t, tuner_schedule **items, size_t *n)
{
    return enumerate_rows(op, t, "reduce_rows", items, n);
}

/* ---- code generation -------------------------------------------------------------------------- */

/* Group reduction of float `v` over the tpr threads of a row into `dst` (declared here). Each
 * reduction that crosses warps gets its own shared array, so no barrier is needed between
 * successive reductions. */
static void emit_group_reduce(tuner_sb *sb, const rows_cfg *c, bool is_max, const char *v, const char *dst, int id)
{
    const char *fn = is_max ? "hd_warp_max" : "hd_warp_sum";
    if (c->tpr <= 32) {
        tuner_sb_printf(sb, "const float %s = %s<%d>(%s);\n", dst, fn, c->tpr, v);
        return;
    }
    int nw = c->tpr / 32;
    tuner_sb_printf(sb, "__shared__ float red%d[%d][%d];\n", id, c->rpb, nw);
    tuner_sb_printf(sb, "{ const float w = %s<32>(%s); if ((lane & 31) == 0) red%d[lrow][lane >> 5] = w; }\n", fn, v,
                    id);
    tuner_sb_puts(sb, "__syncthreads();\n");
    tuner_sb_printf(sb, "float %s_acc = red%d[lrow][0];\n", dst, id);
    if (is_max)
        tuner_sb_printf(sb, "#pragma unroll\nfor (int w = 1; w < %d; w++) %s_acc = fmaxf(%s_acc, red%d[lrow][w]);\n", nw,
                        dst, dst, id);
    else
        tuner_sb_printf(sb, "#pragma unroll\nfor (int w = 1; w < %d; w++) %s_acc += red%d[lrow][w];\n", nw, dst, id);
    tuner_sb_printf(sb, "const float %s = %s_acc;\n", dst, dst);
}

/* Loads the VEC elements of x at vector index vi of this thread's row (`xr`, row `row`) as floats
 * into dst, with input 0's prologue applied. */
static void emit_load(tuner_sb *sb, const tuner_op *op, const rows_geo *g, const rows_cfg *c, const char *vi,
                      const char *dst)
{
    const char *T = tuner__ctype(g->in_dt);
    if (c->vec > 1)
        tuner_sb_printf(sb, "hd_ldn_f32<%s, %d>(xr + (long long)(%s) * %d, %s);\n", T, c->vec, vi, c->vec, dst);
    else
        tuner_sb_printf(sb, "(%s)[0] = hd_f32(xr[%s]);\n", dst, vi);
    if (op->prologue[0].n)
        tuner_sb_printf(sb, "#pragma unroll\nfor (int pe = 0; pe < %d; pe++) (%s)[pe] = hd_pro0((%s)[pe], row * %lldLL + "
                            "(long long)(%s) * %d + pe);\n",
                        c->vec, dst, dst, g->D, vi, c->vec);
}

/* Writes the layernorm shift into buf: the row's first element (after the prologue, like every
 * other element). */
static const char *shift_expr(const tuner_op *op, const rows_geo *g, char *buf, size_t n)
{
    if (op->prologue[0].n)
        snprintf(buf, n, "hd_pro0(hd_f32(xr[0]), row * %lldLL)", g->D);
    else
        snprintf(buf, n, "hd_f32(xr[0])");
    return buf;
}

/* Emits the per-element output computation and store for the VEC elements at vector index vi,
 * with the float values in `vals` (already the row values: for softmax the exp'ed values when
 * `softmax_done`). */
static void emit_store(tuner_sb *sb, const tuner_op *op, const rows_geo *g, const rows_cfg *c, const char *vi,
                       const char *vals, bool softmax_exp_done)
{
    const char *OT = tuner__ctype(op->output.dtype);
    tuner_sb_printf(sb, "{ float ov[%d];\n", c->vec);
    if (g->kind == K_LAYERNORM && op->n_anchor_inputs == 3) {
        tuner_sb_printf(sb, "float gv[%d], bv[%d];\n", c->vec, c->vec);
        if (c->vec > 1) {
            tuner_sb_printf(sb, "hd_ldn_f32<%s, %d>(in1 + (long long)(%s) * %d, gv);\n",
                            tuner__ctype(op->inputs[1].dtype), c->vec, vi, c->vec);
            tuner_sb_printf(sb, "hd_ldn_f32<%s, %d>(in2 + (long long)(%s) * %d, bv);\n",
                            tuner__ctype(op->inputs[2].dtype), c->vec, vi, c->vec);
        } else {
            tuner_sb_printf(sb, "gv[0] = hd_f32(in1[%s]); bv[0] = hd_f32(in2[%s]);\n", vi, vi);
        }
    } else if (g->kind == K_RMSNORM && op->n_anchor_inputs == 2) {
        tuner_sb_printf(sb, "float gv[%d];\n", c->vec);
        if (c->vec > 1)
            tuner_sb_printf(sb, "hd_ldn_f32<%s, %d>(in1 + (long long)(%s) * %d, gv);\n",
                            tuner__ctype(op->inputs[1].dtype), c->vec, vi, c->vec);
        else
            tuner_sb_printf(sb, "gv[0] = hd_f32(in1[%s]);\n", vi);
    }
    tuner_sb_printf(sb, "#pragma unroll\nfor (int e = 0; e < %d; e++) {\n", c->vec);
    tuner_sb_printf(sb, "const long long col = (long long)(%s) * %d + e;\n", vi, c->vec);
    tuner_sb_printf(sb, "float o = (%s)[e];\n", vals);
    switch (g->kind) {
    case K_SOFTMAX:
        if (op->attrs.softmax.log) /* x - max - log(sum(exp(x - max))); v holds x itself */
            tuner_sb_puts(sb, "o = (o - mx) - lse;\n");
        else if (softmax_exp_done)
            tuner_sb_puts(sb, "o = o * inv;\n");
        else
            tuner_sb_puts(sb, "o = expf(o - mx) * inv;\n");
        break;
    case K_LAYERNORM:
        tuner_sb_puts(sb, "o = (o - mean) * rstd;\n");
        if (op->n_anchor_inputs == 3)
            tuner_sb_puts(sb, "o = o * gv[e] + bv[e];\n");
        break;
    case K_RMSNORM:
        tuner_sb_puts(sb, "o = o * rstd;\n");
        if (op->n_anchor_inputs == 2)
            tuner_sb_puts(sb, "o = o * gv[e];\n");
        break;
    default:
        break;
    }
    tuner__bcast_ctx ec = {op, "row", "col"};
    tuner__emit_chain(sb, op, &op->epilogue, "o", tuner__bcast_load, &ec);
    tuner_sb_puts(sb, "ov[e] = o;\n}\n");
    if (c->vec > 1)
        tuner_sb_printf(sb, "hd_stn_f32<%s, %d>(yr + (long long)(%s) * %d, ov);\n", OT, c->vec, vi, c->vec);
    else
        tuner_sb_printf(sb, "yr[%s] = hd_from_f32<%s>(ov[0]);\n", vi, OT);
    tuner_sb_puts(sb, "}\n");
}

/* Statistics the second phase needs, from the group-reduced sums. */
static void emit_finish_stats(tuner_sb *sb, const tuner_op *op, const rows_geo *g)
{
    switch (g->kind) {
    case K_LAYERNORM:
        break; /* computed inline by the callers (cached vs. shifted sums) */
    case K_RMSNORM:
        tuner_sb_printf(sb, "const float rstd = 1.0f / sqrtf(ss / %lld.0f + ", g->D);
        tuner__emit_float(sb, op->attrs.norm.eps);
        tuner_sb_puts(sb, ");\n");
        break;
    default:
        break;
    }
}

/* What softmax's store needs from the row's sum of exp(x - max): its inverse, or log_softmax's
 * log-sum. */
static void emit_softmax_scale(tuner_sb *sb, const tuner_op *op)
{
    if (op->attrs.softmax.log)
        tuner_sb_puts(sb, "const float lse = logf(sum);\n");
    else
        tuner_sb_puts(sb, "const float inv = 1.0f / sum;\n");
}

static void emit_rstd_from_var(tuner_sb *sb, const tuner_op *op, const char *var)
{
    tuner_sb_printf(sb, "const float rstd = 1.0f / sqrtf(%s + ", var);
    tuner__emit_float(sb, op->attrs.norm.eps);
    tuner_sb_puts(sb, ");\n");
}

/* Reduction output of one row (reduce op): lane 0 applies the epilogue and stores. */
static void emit_reduce_store(tuner_sb *sb, const tuner_op *op, const rows_geo *g, const char *acc, const char *cond)
{
    const tuner_tensor *out = &op->output;
    long long last = out->rank >= 1 ? out->shape[out->rank - 1] : 1;
    tuner_sb_printf(sb, "if (%s) {\nfloat o = %s;\n", cond, acc);
    if (op->attrs.reduce.kind == TUNER_REDUCE_MEAN)
        tuner_sb_printf(sb, "o = o / %lld.0f;\n", g->D);
    char le[96];
    if (out->rank == 1 && out->sym[0]) /* one named output row: row is below its length */
        tuner_sb_puts(sb, "const long long orow = 0, ocol = row;\n");
    else if (out->rank >= 1 && out->sym[out->rank - 1]) /* a named last output axis: its length at launch
                                                         * (a full reduction has rank 0) */
        tuner_sb_printf(sb, "const long long orow = row / %s, ocol = row %% %s;\n",
                        tuner__axis_expr(out, out->rank - 1, le, sizeof(le)), le);
    else
        tuner_sb_printf(sb, "const long long orow = row / %lldLL, ocol = row %% %lldLL;\n", last, last);
    tuner__bcast_ctx ec = {op, "orow", "ocol"};
    tuner__emit_chain(sb, op, &op->epilogue, "o", tuner__bcast_load, &ec);
    tuner_sb_printf(sb, "out[row] = hd_from_f32<%s>(o);\n}\n", tuner__ctype(out->dtype));
}

static void emit_kernel_head(tuner_sb *sb, const tuner_op *op, const rows_cfg *c, const char *name, bool ws)
{
    tuner_sb_printf(sb, "extern \"C\" __global__ void __launch_bounds__(%d) %s(", c->block, name);
    tuner__emit_params(sb, op, op->output.dtype);
    if (ws)
        tuner_sb_puts(sb, ", float *__restrict__ ws");
    tuner__emit_dim_params(sb, op);
    tuner_sb_puts(sb, ")\n{\n");
    tuner__emit_input0_prologue(sb, op);
}

/* The single-kernel form (split == 1). */
/* Emits the statement that folds the element `x` into a thread's running statistics: the online
 * max and rescaled sum of softmax (lm, ls), the shifted sums of layernorm (l1, l2), or the sum of
 * squares / sum / max of rmsnorm and reduce, kept in `acc`. Shared by the one-pass kernels and the
 * first kernel of a split row. */
static void emit_accumulate(tuner_sb *sb, const rows_geo *g, bool rmax, const char *acc)
{
    switch (g->kind) {
    case K_SOFTMAX:
        /* Online softmax: rescale the running sum when the running max grows. A -inf element
         * adds nothing; added as exp(x - lm) it would be exp(-inf + inf) = NaN while the thread
         * has seen only -inf (a run of keys an additive -inf mask hides). A NaN element
         * is added, so that it reaches the row as PyTorch's does. */
        tuner_sb_puts(sb, "if (x > lm) { ls = ls * expf(lm - x) + 1.0f; lm = x; } else if (x != -HD_INF) { ls += expf(x - lm); }\n");
        break;
    case K_LAYERNORM:
        tuner_sb_puts(sb, "const float d = x - shift; l1 += d; l2 += d * d;\n");
        break;
    case K_RMSNORM:
        tuner_sb_printf(sb, "%s += x * x;\n", acc);
        break;
    default:
        if (rmax)
            tuner_sb_printf(sb, "%s = fmaxf(%s, x);\n", acc, acc);
        else
            tuner_sb_printf(sb, "%s += x;\n", acc);
        break;
    }
}

static void gen_single(tuner_sb *sb, const tuner_op *op, const rows_geo *g, const rows_cfg *c, const char *kname)
{
    char shift[96], rows[128];
    const char *T = tuner__ctype(g->in_dt);
    const bool is_reduce = g->kind == K_REDUCE;
    const bool rmax = is_reduce && op->attrs.reduce.kind == TUNER_REDUCE_MAX;
    emit_kernel_head(sb, op, c, kname, false);
    tuner_sb_printf(sb, "const int tid = threadIdx.x;\nconst int lane = tid %% %d;\nconst int lrow = tid / %d;\n", c->tpr,
                    c->tpr);
    tuner_sb_printf(sb, "const long long row = (long long)blockIdx.x * %d + lrow;\n", c->rpb);
    tuner_sb_printf(sb, "const bool row_ok = row < %s;\n", rows_expr(g, rows, sizeof(rows)));
    tuner_sb_printf(sb, "const %s *xr = in0 + (row_ok ? row : 0LL) * %lldLL;\n", T, g->D);
    if (!is_reduce)
        tuner_sb_printf(sb, "%s *yr = out + (row_ok ? row : 0LL) * %lldLL;\n", tuner__ctype(op->output.dtype), g->D);
    tuner_sb_puts(sb, "(void)lrow;\n");

    if (c->cache) {
        /* Registers: slot j of this thread holds vector j * tpr + lane (mapping repeat(nv) *
         * spatial(tpr)); padding slots hold a neutral value. */
        tuner_mapping m = tuner_map_compose(tuner_map_repeat(1, c->nv, 1, 1), tuner_map_spatial(1, c->tpr, 1, 1));
        const char *names[3] = {"vi", NULL, NULL};
        const char *neutral = g->kind == K_SOFTMAX ? "-HD_INF" : "0.0f";
        tuner_sb_printf(sb, "float v[%d];\n", c->nv * c->vec);
        tuner_map_emit_begin(sb, &m, "lane", "ld", names);
        tuner_sb_printf(sb, "if (row_ok && vi < %lld) { ", c->nvt);
        char dst[64];
        snprintf(dst, sizeof(dst), "&v[ld_a0_0 * %d]", c->vec);
        emit_load(sb, op, g, c, "vi", dst);
        tuner_sb_printf(sb, "} else {\n#pragma unroll\nfor (int e = 0; e < %d; e++) v[ld_a0_0 * %d + e] = %s; }\n",
                        c->vec, c->vec, neutral);
        tuner_map_emit_end(sb, &m);

        const int nel = c->nv * c->vec;
        switch (g->kind) {
        case K_SOFTMAX:
            tuner_sb_printf(sb, "float lm = -HD_INF;\n#pragma unroll\nfor (int k = 0; k < %d; k++) lm = fmaxf(lm, v[k]);\n",
                            nel);
            emit_group_reduce(sb, c, true, "lm", "mx", 0);
            if (op->attrs.softmax.log) /* the row stays in v: log_softmax reads x again */
                tuner_sb_printf(sb, "float ls = 0.0f;\n#pragma unroll\nfor (int k = 0; k < %d; k++) ls += expf(v[k] - mx);\n",
                                nel);
            else
                tuner_sb_printf(sb, "float ls = 0.0f;\n#pragma unroll\nfor (int k = 0; k < %d; k++) { v[k] = expf(v[k] - mx); "
                                    "ls += v[k]; }\n",
                                nel);
            emit_group_reduce(sb, c, false, "ls", "sum", 1);
            emit_softmax_scale(sb, op);
            break;
        case K_LAYERNORM:
            tuner_sb_printf(sb, "float ls = 0.0f;\n#pragma unroll\nfor (int k = 0; k < %d; k++) ls += v[k];\n", nel);
            emit_group_reduce(sb, c, false, "ls", "sum", 0);
            tuner_sb_printf(sb, "const float mean = sum / %lld.0f;\n", g->D);
            /* Exact second moment about the mean; padding slots are masked by their index. */
            tuner_sb_puts(sb, "float lq = 0.0f;\n");
            tuner_map_emit_begin(sb, &m, "lane", "lq", names);
            tuner_sb_printf(sb, "if (vi < %lld) {\n#pragma unroll\nfor (int e = 0; e < %d; e++) { const float d = "
                                "v[lq_a0_0 * %d + e] - mean; lq += d * d; } }\n",
                            c->nvt, c->vec, c->vec);
            tuner_map_emit_end(sb, &m);
            emit_group_reduce(sb, c, false, "lq", "sq", 1);
            tuner_sb_printf(sb, "const float var = sq / %lld.0f;\n", g->D);
            emit_rstd_from_var(sb, op, "var");
            break;
        case K_RMSNORM:
            tuner_sb_printf(sb, "float lss = 0.0f;\n#pragma unroll\nfor (int k = 0; k < %d; k++) lss += v[k] * v[k];\n",
                            nel);
            emit_group_reduce(sb, c, false, "lss", "ss", 0);
            emit_finish_stats(sb, op, g);
            break;
        default:
            break;
        }
        tuner_map_emit_begin(sb, &m, "lane", "st", names);
        tuner_sb_printf(sb, "if (row_ok && vi < %lld) ", c->nvt);
        char vals[64];
        snprintf(vals, sizeof(vals), "&v[st_a0_0 * %d]", c->vec);
        emit_store(sb, op, g, c, "vi", vals, true);
        tuner_map_emit_end(sb, &m);
        tuner_sb_puts(sb, "}\n");
        return;
    }

    /* Streaming: pass 1 accumulates per-thread statistics. */
    tuner_sb_printf(sb, "float xv[%d];\n", c->vec);
    switch (g->kind) {
    case K_SOFTMAX:
        tuner_sb_puts(sb, "float lm = -HD_INF, ls = 0.0f;\n");
        break;
    case K_LAYERNORM:
        /* Sums shifted by the row's first element keep E[x^2] - E[x]^2 well conditioned. */
        tuner_sb_printf(sb, "const float shift = row_ok ? %s : 0.0f;\nfloat l1 = 0.0f, l2 = 0.0f;\n",
                        shift_expr(op, g, shift, sizeof(shift)));
        break;
    case K_RMSNORM:
        tuner_sb_puts(sb, "float lss = 0.0f;\n");
        break;
    default:
        tuner_sb_printf(sb, "float acc = %s;\n", rmax ? "-HD_INF" : "0.0f");
        break;
    }
    tuner_sb_printf(sb, "if (row_ok) for (long long vi = lane; vi < %lldLL; vi += %d) {\n", c->nvt, c->tpr);
    emit_load(sb, op, g, c, "vi", "xv");
    tuner_sb_printf(sb, "#pragma unroll\nfor (int e = 0; e < %d; e++) { const float x = xv[e];\n", c->vec);
    emit_accumulate(sb, g, rmax, g->kind == K_RMSNORM ? "lss" : "acc");
    tuner_sb_puts(sb, "}\n}\n");
    switch (g->kind) {
    case K_SOFTMAX:
        emit_group_reduce(sb, c, true, "lm", "mx", 0);
        /* A thread that saw nothing or only -inf has lm = -inf and ls = 0: its term is 0, also
         * where the row's max is -inf too (0 * exp(NaN) would be NaN). */
        tuner_sb_puts(sb, "const float lsc = ls == 0.0f ? 0.0f : ls * expf(lm - mx);\n");
        emit_group_reduce(sb, c, false, "lsc", "sum", 1);
        emit_softmax_scale(sb, op);
        break;
    case K_LAYERNORM:
        emit_group_reduce(sb, c, false, "l1", "s1", 0);
        emit_group_reduce(sb, c, false, "l2", "s2", 1);
        tuner_sb_printf(sb, "const float m1 = s1 / %lld.0f;\nconst float mean = shift + m1;\n", g->D);
        tuner_sb_printf(sb, "const float var = fmaxf(s2 / %lld.0f - m1 * m1, 0.0f);\n", g->D);
        emit_rstd_from_var(sb, op, "var");
        break;
    case K_RMSNORM:
        emit_group_reduce(sb, c, false, "lss", "ss", 0);
        emit_finish_stats(sb, op, g);
        break;
    default:
        emit_group_reduce(sb, c, rmax, "acc", "total", 0);
        emit_reduce_store(sb, op, g, "total", "row_ok && lane == 0");
        tuner_sb_puts(sb, "}\n");
        return;
    }
    /* Pass 2: re-read (from L2 for rows that fit) and write. */
    tuner_sb_printf(sb, "if (row_ok) for (long long vi = lane; vi < %lldLL; vi += %d) {\n", c->nvt, c->tpr);
    emit_load(sb, op, g, c, "vi", "xv");
    emit_store(sb, op, g, c, "vi", "xv", false);
    tuner_sb_puts(sb, "}\n}\n");
}

/* Split form: grid (split, R); block (chunk, row). Partials: 2 floats per (row, chunk). Returns 0,
 * or a dynamic op's grid rule error. */
static int gen_split(tuner_sb *sb, const tuner_op *op, const rows_geo *g, const rows_cfg *c, const char *base,
                     tuner_program *p)
{
    char shift[96], rows[128];
    const char *T = tuner__ctype(g->in_dt);
    const bool rmax = g->kind == K_REDUCE && op->attrs.reduce.kind == TUNER_REDUCE_MAX;
    const long long ch = (c->nvt + c->split - 1) / c->split; /* vectors per chunk */
    char kname[64];

    /* Kernel 1: statistics of one chunk. */
    snprintf(kname, sizeof(kname), "%.48s_stats", base);
    emit_kernel_head(sb, op, c, kname, true);
    tuner_sb_printf(sb, "const int lane = threadIdx.x;\nconst int lrow = 0;\n(void)lrow;\n");
    tuner_sb_puts(sb, "const long long row = blockIdx.y;\nconst int chunk = blockIdx.x;\n");
    tuner_sb_printf(sb, "const %s *xr = in0 + row * %lldLL;\n", T, g->D);
    tuner_sb_printf(sb, "const long long v0 = (long long)chunk * %lldLL;\n", ch);
    tuner_sb_printf(sb, "const long long v1 = v0 + %lldLL < %lldLL ? v0 + %lldLL : %lldLL;\n", ch, c->nvt, ch, c->nvt);
    tuner_sb_printf(sb, "float xv[%d];\n", c->vec);
    switch (g->kind) {
    case K_SOFTMAX:
        tuner_sb_puts(sb, "float lm = -HD_INF, ls = 0.0f;\n");
        break;
    case K_LAYERNORM:
        tuner_sb_printf(sb, "const float shift = %s;\nfloat l1 = 0.0f, l2 = 0.0f;\n", shift_expr(op, g, shift, sizeof(shift)));
        break;
    case K_RMSNORM:
        tuner_sb_puts(sb, "float l1 = 0.0f;\n");
        break;
    default:
        tuner_sb_printf(sb, "float l1 = %s;\n", rmax ? "-HD_INF" : "0.0f");
        break;
    }
    tuner_sb_printf(sb, "for (long long vi = v0 + lane; vi < v1; vi += %d) {\n", c->tpr);
    emit_load(sb, op, g, c, "vi", "xv");
    tuner_sb_printf(sb, "#pragma unroll\nfor (int e = 0; e < %d; e++) { const float x = xv[e];\n", c->vec);
    emit_accumulate(sb, g, rmax, "l1");
    tuner_sb_puts(sb, "}\n}\n");
    switch (g->kind) {
    case K_SOFTMAX:
        emit_group_reduce(sb, c, true, "lm", "mx", 0);
        /* A chunk of only -inf: max -inf, sum 0 (the second kernel weighs it 0). */
        tuner_sb_puts(sb, "const float lsc = ls == 0.0f ? 0.0f : ls * expf(lm - mx);\n");
        emit_group_reduce(sb, c, false, "lsc", "sum", 1);
        tuner_sb_puts(sb, "if (lane == 0) { ws[(row * SPLIT + chunk) * 2] = mx; ws[(row * SPLIT + chunk) * 2 + 1] = sum; }\n");
        break;
    case K_LAYERNORM:
        emit_group_reduce(sb, c, false, "l1", "s1", 0);
        emit_group_reduce(sb, c, false, "l2", "s2", 1);
        tuner_sb_puts(sb, "if (lane == 0) { ws[(row * SPLIT + chunk) * 2] = s1; ws[(row * SPLIT + chunk) * 2 + 1] = s2; }\n");
        break;
    default:
        emit_group_reduce(sb, c, rmax, "l1", "s1", 0);
        tuner_sb_puts(sb, "if (lane == 0) { ws[(row * SPLIT + chunk) * 2] = s1; ws[(row * SPLIT + chunk) * 2 + 1] = 0.0f; }\n");
        break;
    }
    tuner_sb_puts(sb, "}\n");

    /* Kernel 2: combine the partials of the row (fixed order), then write. */
    if (g->kind == K_REDUCE) {
        snprintf(kname, sizeof(kname), "%.48s_apply", base);
        tuner_sb_printf(sb, "extern \"C\" __global__ void __launch_bounds__(256) %s(", kname);
        tuner__emit_params(sb, op, op->output.dtype);
        tuner_sb_puts(sb, ", float *__restrict__ ws");
        tuner__emit_dim_params(sb, op);
        tuner_sb_puts(sb, ")\n{\n");
        tuner_sb_puts(sb, "const long long row = (long long)blockIdx.x * 256 + threadIdx.x;\n");
        tuner_sb_printf(sb, "if (row >= %s) return;\n", rows_expr(g, rows, sizeof(rows))); /* no barriers here */
        tuner_sb_printf(sb, "float total = ws[row * SPLIT * 2];\nfor (int k = 1; k < SPLIT; k++) total = %s;\n",
                        rmax ? "fmaxf(total, ws[(row * SPLIT + k) * 2])" : "total + ws[(row * SPLIT + k) * 2]");
        emit_reduce_store(sb, op, g, "total", "true");
        tuner_sb_puts(sb, "}\n");
    } else {
        snprintf(kname, sizeof(kname), "%.48s_apply", base);
        emit_kernel_head(sb, op, c, kname, true);
        tuner_sb_printf(sb, "const int lane = threadIdx.x;\n(void)lane;\n");
        tuner_sb_puts(sb, "const long long row = blockIdx.y;\nconst int chunk = blockIdx.x;\n");
        tuner_sb_printf(sb, "const %s *xr = in0 + row * %lldLL;\n", T, g->D);
        tuner_sb_printf(sb, "%s *yr = out + row * %lldLL;\n", tuner__ctype(op->output.dtype), g->D);
        tuner_sb_printf(sb, "const long long v0 = (long long)chunk * %lldLL;\n", ch);
        tuner_sb_printf(sb, "const long long v1 = v0 + %lldLL < %lldLL ? v0 + %lldLL : %lldLL;\n", ch, c->nvt, ch,
                        c->nvt);
        tuner_sb_puts(sb, "const float *pw = ws + row * SPLIT * 2;\n");
        switch (g->kind) {
        case K_SOFTMAX:
            tuner_sb_puts(sb, "float mx = pw[0];\nfor (int k = 1; k < SPLIT; k++) mx = fmaxf(mx, pw[2 * k]);\n"
                              "float sum = 0.0f;\nfor (int k = 0; k < SPLIT; k++) sum += pw[2 * k + 1] * expf(pw[2 * k] - mx);\n");
            emit_softmax_scale(sb, op);
            break;
        case K_LAYERNORM:
            tuner_sb_printf(sb, "const float shift = %s;\n", shift_expr(op, g, shift, sizeof(shift)));
            tuner_sb_puts(sb, "float s1 = 0.0f, s2 = 0.0f;\nfor (int k = 0; k < SPLIT; k++) { s1 += pw[2 * k]; s2 += pw[2 * k + 1]; }\n");
            tuner_sb_printf(sb, "const float m1 = s1 / %lld.0f;\nconst float mean = shift + m1;\n", g->D);
            tuner_sb_printf(sb, "const float var = fmaxf(s2 / %lld.0f - m1 * m1, 0.0f);\n", g->D);
            emit_rstd_from_var(sb, op, "var");
            break;
        default:
            tuner_sb_puts(sb, "float ss = 0.0f;\nfor (int k = 0; k < SPLIT; k++) ss += pw[2 * k];\n");
            emit_finish_stats(sb, op, g);
            break;
        }
        tuner_sb_printf(sb, "float xv[%d];\n", c->vec);
        tuner_sb_printf(sb, "for (long long vi = v0 + lane; vi < v1; vi += %d) {\n", c->tpr);
        emit_load(sb, op, g, c, "vi", "xv");
        emit_store(sb, op, g, c, "vi", "xv", false);
        tuner_sb_puts(sb, "}\n}\n");
    }

    tuner_launch *k1 = &p->kernels[0], *k2 = &p->kernels[1];
    snprintf(k1->name, sizeof(k1->name), "%.48s_stats", base);
    k1->grid[0] = (unsigned)c->split;
    k1->grid[1] = (unsigned)g->R;
    k1->grid[2] = 1;
    k1->block[0] = (unsigned)c->tpr;
    k1->block[1] = k1->block[2] = 1;
    tuner__launch_args(k1, op);
    k1->args[k1->n_args++] = TUNER_BUF_WORKSPACE;
    int r = 0;
    if (g->rmask) { /* a block per (chunk, row): the rows at launch */
        r = tuner__launch_dim_args(k1, op);
        if (r == 0)
            r = tuner__grid_rule(k1, 1, op, g->rmask, g->rcoef, 1, 1, 0);
    }
    *k2 = *k1;
    snprintf(k2->name, sizeof(k2->name), "%.48s_apply", base);
    if (g->kind == K_REDUCE) {
        k2->grid[0] = (unsigned)((g->R + 255) / 256);
        k2->grid[1] = 1;
        k2->block[0] = 256;
        if (g->rmask && r == 0) { /* a thread per row */
            k2->grid_rule[1] = (tuner_grid_rule){0};
            r = tuner__grid_rule(k2, 0, op, g->rmask, g->rcoef, 256, 1, 0);
        }
    }
    p->n_kernels = 2;
    /* Sized for the largest R: a dynamic op's launches at every size fit in it. */
    p->workspace_bytes = (size_t)g->R * (size_t)c->split * 2 * sizeof(float);
    return r;
}

static int generate_rows(const tuner_op *op, const tuner_target *t, const tuner_schedule *s, tuner_program *p,
                         char **err)
{
    rows_geo g = geo_of(op);
    rows_cfg c;
    if (!cfg_of(&g, s, &c)) {
        *err = strdup("invalid parameters for this row template");
        return -EINVAL;
    }
    const char *base = s->template_name;
    char kname[64];
    snprintf(kname, sizeof(kname), "hd_%s", base);
    tuner_sb sb;
    tuner_sb_init(&sb);
    tuner__prelude(&sb, t->sm);
    int r = 0;
    if (c.split > 1) {
        tuner_sb_printf(&sb, "#define SPLIT %d\n", c.split);
        r = gen_split(&sb, op, &g, &c, kname, p);
    } else {
        gen_single(&sb, op, &g, &c, kname);
        /* Static shared memory only. */
        tuner__one_launch(p, op, kname, (unsigned)((g.R + c.rpb - 1) / c.rpb), (unsigned)c.block);
        if (g.rmask) { /* rows_per_block rows a block: ceil(R / rpb) */
            r = tuner__launch_dim_args(&p->kernels[0], op);
            if (r == 0)
                r = tuner__grid_rule(&p->kernels[0], 0, op, g.rmask, g.rcoef, c.rpb, 1, 0);
        }
    }
    if (r < 0) {
        tuner_sb_free(&sb);
        *err = strdup("the launch's dims arguments or grid rule do not fit the op's sizes");
        return r;
    }
    p->source = tuner_sb_take(&sb);
    p->output_dtype = op->output.dtype;
    return p->source ? 0 : -ENOMEM;
}

/* ---- cost model ------------------------------------------------------------------------------- */

static double predict_rows(const tuner_op *op, const tuner_target *t, const tuner_schedule *s)
{
    const tuner_arch *a = tuner__arch(t);
    rows_geo g = geo_of(op);
    rows_cfg c;
    if (!a || !cfg_of(&g, s, &c))
        return 1e12;
    double in_b = (double)g.R * (double)g.D * tuner_dtype_size(g.in_dt);
    double out_b = g.kind == K_REDUCE ? (double)g.R * tuner_dtype_size(op->output.dtype)
                                      : (double)g.R * (double)g.D * tuner_dtype_size(op->output.dtype);
    double extra = 0;
    for (int i = 1; i < op->n_inputs; i++)
        extra += (double)tuner_tensor_numel(&op->inputs[i]) * tuner_dtype_size(op->inputs[i].dtype);
    /* A second streaming pass re-reads the row: mostly from L2 when the rows in flight fit. */
    double reread = 0;
    if (!c.cache && g.kind != K_REDUCE)
        reread = in_b * (in_b < a->l2_bytes * 0.5 ? 0.3 : 1.0);
    double eff = c.vec > 1 ? 1.0 : (tuner_dtype_size(g.in_dt) == 2 ? 0.5 : 0.75);
    double inflight = (double)c.vec * tuner_dtype_size(g.in_dt) * (c.cache ? c.nv : 1.5);
    /* Threads without work in a row group do not load. */
    double busy = fmin(1.0, (double)c.nvt / ((double)c.tpr * c.nv));
    int regs = 32 + (c.cache ? c.nv * c.vec : 2 * c.vec);
    double blocks = (double)((g.R + c.rpb - 1) / c.rpb) * c.split;
    /* Per element: load/convert, the op's math (softmax: one expf cached, two streaming), store
     * and epilogue; idle lanes of a row group still issue. */
    double per_el = 6.0;
    if (g.kind == K_SOFTMAX)
        per_el += c.cache ? 22.0 : 44.0;
    else if (g.kind != K_REDUCE)
        per_el += 5.0;
    if (g.kind != K_REDUCE)
        per_el += tuner__chain_instr(&op->epilogue);
    /* The prologue runs at every read of x: once cached or reduced, twice streaming. */
    per_el += tuner__chain_instr(&op->prologue[0]) * (c.cache || g.kind == K_REDUCE ? 1.0 : 2.0);
    double instr = (double)g.R * (double)g.D * per_el / fmax(busy, 0.05);
    double us = tuner__mem_cost_us(a, in_b + out_b + extra + reread, blocks, c.block, inflight * busy, regs,
                                   (c.tpr > 32 ? c.rpb * (c.tpr / 32) * 8 : 0), eff, instr);
    /* Cross-warp reductions cost barriers, paid once per row per wave of rows in flight. */
    if (c.tpr > 32) {
        double per_sm_rows = (double)g.R / a->sm_count;
        double rows_in_flight = fmax(1.0, (double)(a->max_threads_per_sm / c.block) * c.rpb);
        us += 0.05 * ceil(per_sm_rows / rows_in_flight) * (g.kind == K_REDUCE ? 1 : 2);
    }
    /* A strided streaming loop issues one vector per thread per trip: long rows in a narrow group
     * serialise on latency. */
    double trips = ceil((double)c.nvt / c.tpr / c.split);
    us += 0.0015 * trips * ceil((double)g.R / ((double)a->sm_count * (a->max_threads_per_sm / c.block) * c.rpb));
    if (c.split > 1)
        us += 3.0; /* the second launch */
    return us;
}

/* ---- preferences for tune:"none" -------------------------------------------------------------- */

static int rows_preferred(const tuner_op *op, const tuner_target *t, tuner_schedule *ret)
{
    /* Vectorised when allowed; a group wide enough that each thread holds <= 8 vectors in
     * registers (a warp for rows up to 2-4K elements, a block beyond); small rows share a block. */
    rows_geo g = geo_of(op);
    const tuner_arch *a = tuner__arch(t);
    if (!a)
        return -ENOENT;
    int vec = g.vec_ok ? g.vmax : 1;
    long long nvt = g.D / vec;
    long per_thread = MAX_CACHED / vec; /* vectors a thread can hold in registers */
    long tpr = tuner__pow2ceil((nvt + per_thread - 1) / per_thread);
    if (tpr < 32)
        tpr = tuner__pow2ceil(nvt) < 32 ? tuner__pow2ceil(nvt) : 32;
    if (tpr < 4)
        tpr = 4;
    if (tpr > 1024)
        tpr = 1024;
    int rpb = tpr >= 128 ? 1 : (int)(128 / tpr);
    /* Few long rows: spread each over about one SM's worth of blocks per row (split form). */
    int split = 1;
    if (g.R <= a->sm_count / 2 && g.D >= 16384) {
        while (split < 32 && (long long)split * 2 * g.R <= a->sm_count && nvt >= (long long)split * 2 * 512)
            split *= 2;
        if (split > 1) {
            tpr = 512;
            rpb = 1;
        }
    }
    ret->n_params = 0;
    const char *names[5] = {P_TPR, P_RPB, P_VEC, P_CACHE, P_SPLIT};
    int values[5] = {(int)tpr, rpb, vec, (g.kind == K_REDUCE || split > 1) ? 0 : 1, split};
    for (int k = 0; k < 5; k++) {
        if (g.kind == K_REDUCE && k == 3)
            continue;
        ret->params[ret->n_params].name = names[k];
        ret->params[ret->n_params].value = values[k];
        ret->n_params++;
    }
    return 0;
}

const tuner_template tuner__softmax_rows = {
    .name = "softmax_rows",
    .space_signature = "softmax_rows v1: tpr{4..1024} rpb{1..64} vec{1,16B} cache{0,1} split{1..32}; "
                       "tpr>=half row, block 32..1024 (<=512 multi-row), cache<=32 floats/thread, split if R<=SMs && D>=4096",
    .applies = softmax_applies,
    .enumerate = softmax_enumerate,
    .generate = generate_rows,
    .predict_us = predict_rows,
    .preferred = rows_preferred,
    .default_rank = TUNER_RANK_CUDA_CORE,
    .dynamic_dims = true,
};

const tuner_template tuner__layernorm_rows = {
    .name = "layernorm_rows",
    .space_signature = "layernorm_rows v1: tpr{4..1024} rpb{1..64} vec{1,16B} cache{0,1} split{1..32}; same rules as softmax_rows",
    .applies = layernorm_applies,
    .enumerate = layernorm_enumerate,
    .generate = generate_rows,
    .predict_us = predict_rows,
    .preferred = rows_preferred,
    .default_rank = TUNER_RANK_CUDA_CORE,
    .dynamic_dims = true,
};

const tuner_template tuner__rmsnorm_rows = {
    .name = "rmsnorm_rows",
    .space_signature = "rmsnorm_rows v1: tpr{4..1024} rpb{1..64} vec{1,16B} cache{0,1} split{1..32}; same rules as softmax_rows",
    .applies = rmsnorm_applies,
    .enumerate = rmsnorm_enumerate,
    .generate = generate_rows,
    .predict_us = predict_rows,
    .preferred = rows_preferred,
    .default_rank = TUNER_RANK_CUDA_CORE,
    .dynamic_dims = true,
};

const tuner_template tuner__reduce_rows = {
    .name = "reduce_rows",
    .space_signature = "reduce_rows v1: innermost axis; tpr{4..1024} rpb{1..64} vec{1,16B} split{1..32}",
    .applies = reduce_rows_applies,
    .enumerate = reduce_rows_enumerate,
    .generate = generate_rows,
    .predict_us = predict_rows,
    .preferred = rows_preferred,
    .default_rank = TUNER_RANK_CUDA_CORE,
    .dynamic_dims = true,
};
