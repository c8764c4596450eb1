/* tuner/cols.c - reduce over an outer or middle axis (column-style reduction).
 *
 * The input is viewed as [O, A, I] (A the reduced axis or the product of the consecutive reduced
 * axes, I > 1 the product of the dims after them).
 * Task mapping: a block of block_y x block_x threads (spatial(by, bx) over threadIdx.x) owns
 * block_x * vec consecutive columns of one outer index o. Thread (ty, tx) keeps vec column sums
 * (one 16-byte load per row when vec > 1) over rows a0 + ty, a0 + ty + by, ... of its chunk of A,
 * so a warp reads 32 * vec consecutive elements of a row; the by partial sums of a column are
 * combined through shared memory in a fixed order.
 *
 * Multi-block mapping (split > 1): few columns and a long axis leave most SMs idle, so grid.y
 * cuts A into `split` chunks. Each block writes its columns' partials to the workspace
 * ([split][O * I] floats) and a second kernel combines a column's partials in chunk order (the
 * result is the same on every run), then applies mean, the epilogue and the output cast.
 * The innermost-axis case is reduce_rows.
 *
 * A dynamic op whose names stand on the outer axes (before the reduced ones) takes the outer
 * extent O at launch (A and I stay fixed): the grid over (o, column block) and the combining kernel's grid follow rules, and
 * its bound and the partials' layout ([split][O * I] for the launch's O) read O from the hd_dim
 * parameters; the workspace is sized for the largest O. A reduce over a named axis, or one with
 * a name after the reduced axes, is left to the static op.
 */
#include "tuner/core.h"
#include "tuner/mapping.h"
#include "tuner/space.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const P_BX = "block_x";
static const char *const P_BY = "block_y";
static const char *const P_VEC = "vec";
static const char *const P_SPLIT = "split";

/* A chunk of A keeps at least this many rows: shorter ones cost more in partials than they save. */
#define MIN_CHUNK_ROWS 64
#define MAX_SPLIT 256
#define FIN_THREADS 256

typedef struct cols_geo {
    long long O, A, I;
    int vmax;    /* elements in 16 bytes of the input */
    bool vec_ok; /* rows start 16-byte aligned and hold whole vectors */
    /* O = ocoef * (product of the dims in omask) at launch; omask 0: O is fixed (static op). */
    unsigned omask;
    long long ocoef;
} cols_geo;

typedef struct cols_cfg {
    int bx, by, vec, split;
    long long nib;   /* column blocks per outer index */
    long long chunk; /* rows of A per split chunk */
} cols_cfg;

static cols_geo geo_of(const tuner_op *op)
{
    cols_geo g = {1, 1, 1, 1, false, 0, 1};
    const tuner_tensor *x = &op->inputs[0];
    int64_t outer, len, inner; /* several consecutive axes are one axis of a reshaped view */
    tuner_reduce_dims(op, &outer, &len, &inner);
    g.O = outer;
    g.A = len;
    g.I = inner;
    g.vmax = 16 / tuner_dtype_size(x->dtype);
    g.vec_ok = g.I % g.vmax == 0 && x->align >= 16;
    g.omask = tuner__sym_mask(x);
    g.ocoef = g.omask ? tuner_tensor_fixed_numel(x) / (g.A * g.I) : g.O;
    return g;
}

static bool cols_applies(const tuner_op *op, const tuner_target *t)
{
    if (op->kind != TUNER_OP_REDUCE || !tuner__arch(t) || !tuner__prologue_input0_only(op) || op->n_inputs < 1)
        return false;
    const tuner_tensor *x = &op->inputs[0];
    if (x->rank < 1 || op->attrs.reduce.axis < 0 || op->attrs.reduce.axis >= x->rank)
        return false;
    /* Dynamic: names on the outer axes (before the reduced ones) only, so O alone varies. */
    if (tuner_op_is_dynamic(op)) {
        if (!tuner__dyn_supported(op) || !tuner__sym_mask(x))
            return false;
        for (int d = op->attrs.reduce.axis; d < x->rank; d++)
            if (x->sym[d])
                return false;
    }
    return geo_of(op).I > 1;
}

static bool pow2(long v)
{
    return v > 0 && (v & (v - 1)) == 0;
}

/* Whether the parameters make a program at all (the space adds usefulness rules on top). */
static bool cfg_of(const cols_geo *g, int bx, int by, int vec, int split, cols_cfg *c)
{
    if (bx < 32 || bx > 1024 || !pow2(bx) || by < 1 || !pow2(by) || bx * by > 1024 || bx * by < 64)
        return false;
    if (vec != 1 && (vec != g->vmax || !g->vec_ok))
        return false;
    /* Static shared memory for the partial sums of the block's columns. */
    if (by > 1 && (long)by * bx * vec * 4 > 48 * 1024)
        return false;
    if (split < 1 || split > MAX_SPLIT || !pow2(split) || (split > 1 && g->A < (long long)split * MIN_CHUNK_ROWS))
        return false;
    c->bx = bx;
    c->by = by;
    c->vec = vec;
    c->split = split;
    c->nib = (g->I + (long long)bx * vec - 1) / ((long long)bx * vec);
    c->chunk = (g->A + split - 1) / split;
    return g->O * c->nib <= 0x7fffffffLL;
}

static bool cfg_from(const cols_geo *g, const tuner_schedule *s, cols_cfg *c)
{
    return cfg_of(g, tuner_schedule_param(s, P_BX, 0), tuner_schedule_param(s, P_BY, 0),
                  tuner_schedule_param(s, P_VEC, 1), tuner_schedule_param(s, P_SPLIT, 1), c);
}

/* The space's usefulness rules: blocks no wider than the (rounded-up) columns, no more threads
 * along A than rows, and a split only while the blocks would not fill the SMs twice over. */
static bool in_space(const cols_geo *g, const tuner_arch *a, const cols_cfg *c)
{
    if (c->bx > 32 && (long long)c->bx * c->vec > tuner__pow2ceil(g->I))
        return false;
    if (c->by > 1 && c->by > tuner__pow2ceil(g->A))
        return false;
    if (c->split > 1 && g->O * c->nib * c->split > 2LL * a->sm_count)
        return false;
    return true;
}

static const int split_values[] = {1, 4, 16, 64, 256};

static int cols_enumerate(const tuner_op *op, const tuner_target *t, tuner_schedule **items, size_t *n)
{
    const tuner_arch *a = tuner__arch(t);
    if (!a)
        return 0;
    cols_geo g = geo_of(op);
    static const int bxs[] = {32, 64, 128, 256};
    static const int bys[] = {1, 2, 4, 8, 16, 32};
    const char *names[4] = {P_BX, P_BY, P_VEC, P_SPLIT};
    for (int vi = 0; vi < 2; vi++) {
        const int vec = vi ? g.vmax : 1;
        for (size_t i = 0; i < sizeof(bxs) / sizeof(bxs[0]); i++)
            for (size_t j = 0; j < sizeof(bys) / sizeof(bys[0]); j++)
                for (size_t k = 0; k < sizeof(split_values) / sizeof(split_values[0]); k++) {
                    cols_cfg c;
                    if (!cfg_of(&g, bxs[i], bys[j], vec, split_values[k], &c) || !in_space(&g, a, &c))
                        continue;
                    int values[4] = {bxs[i], bys[j], vec, split_values[k]};
                    int r = tuner__space_push(items, n, "reduce_cols", 4, names, values);
                    if (r < 0)
                        return r;
                }
    }
    return 0;
}

/* The outputs O * I as a C expression: a literal, or a dynamic op's product of launch sizes. */
static const char *outs_expr(const cols_geo *g, char *buf, size_t n)
{
    return tuner__scaled_dims_expr(g->omask ? g->ocoef * g->I : g->O * g->I, g->omask, buf, n);
}

/* Writes the reduction's combine of expressions x and y (max or sum) into dst. */
static void combine(char *dst, size_t n, bool rmax, const char *x, const char *y)
{
    snprintf(dst, n, rmax ? "fmaxf(%s, %s)" : "%s + %s", x, y);
}

/* Emits the final value of one output element: v (the column's total) -> mean -> epilogue ->
 * out[ol]. */
static void emit_finish(tuner_sb *sb, const tuner_op *op, const cols_geo *g, const char *ol_expr)
{
    const tuner_tensor *out = &op->output;
    const long long last = out->rank >= 1 ? out->shape[out->rank - 1] : 1; /* fixed: I > 1 follows a name */
    if (op->attrs.reduce.kind == TUNER_REDUCE_MEAN)
        tuner_sb_printf(sb, "v = v / %lld.0f;\n", g->A);
    tuner_sb_printf(sb, "const long long ol = %s;\n", ol_expr);
    tuner_sb_printf(sb, "const long long orow = ol / %lldLL, ocol = ol %% %lldLL;\n", last, last);
    tuner__bcast_ctx ec = {op, "orow", "ocol"};
    tuner__emit_chain(sb, op, &op->epilogue, "v", tuner__bcast_load, &ec);
    tuner_sb_printf(sb, "out[ol] = hd_from_f32<%s>(v);\n", tuner__ctype(out->dtype));
}

static void emit_main(tuner_sb *sb, const tuner_op *op, const cols_geo *g, const cols_cfg *c, const char *kname)
{
    const bool rmax = op->attrs.reduce.kind == TUNER_REDUCE_MAX;
    const char *T = tuner__ctype(op->inputs[0].dtype);
    const int V = c->vec;
    tuner_sb_printf(sb, "extern \"C\" __global__ void __launch_bounds__(%d) %s(", c->bx * c->by, kname);
    tuner__emit_params(sb, op, op->output.dtype);
    if (c->split > 1)
        tuner_sb_puts(sb, ", float *__restrict__ ws");
    tuner__emit_dim_params(sb, op);
    tuner_sb_puts(sb, ")\n{\n");
    tuner__emit_input0_prologue(sb, op);
    tuner_mapping m = tuner_map_spatial(2, c->by, c->bx, 1);
    const char *names[3] = {"ty", "tx", NULL};
    tuner_map_emit_begin(sb, &m, "threadIdx.x", "tm", names);
    tuner_sb_printf(sb, "const long long o = (long long)blockIdx.x / %lldLL;\n", c->nib);
    tuner_sb_printf(sb, "const long long i = (((long long)blockIdx.x %% %lldLL) * %d + tx) * %d;\n", c->nib, c->bx, V);
    tuner_sb_printf(sb, "const bool ok = i < %lldLL;\n", g->I);
    tuner_sb_printf(sb, "const %s *xp = in0 + o * %lldLL + (ok ? i : 0LL);\n", T, g->A * g->I);
    if (c->split > 1)
        tuner_sb_printf(sb, "const long long a0 = (long long)blockIdx.y * %lldLL;\n"
                            "const long long a1 = a0 + %lldLL < %lldLL ? a0 + %lldLL : %lldLL;\n",
                        c->chunk, c->chunk, g->A, c->chunk, g->A);
    else
        tuner_sb_printf(sb, "const long long a0 = 0;\nconst long long a1 = %lldLL;\n", g->A);
    tuner_sb_printf(sb, "float acc[%d];\n#pragma unroll\nfor (int e = 0; e < %d; e++) acc[e] = %s;\n", V, V,
                    rmax ? "-HD_INF" : "0.0f");
    tuner_sb_printf(sb, "if (ok) {\n#pragma unroll 4\nfor (long long a = a0 + ty; a < a1; a += %d) {\n", c->by);
    char comb[64];
    combine(comb, sizeof(comb), rmax, "acc[e]", "xv[e]");
    if (V > 1)
        tuner_sb_printf(sb, "float xv[%d];\nhd_ldn_f32<%s, %d>(xp + a * %lldLL, xv);\n", V, T, V, g->I);
    else
        tuner_sb_printf(sb, "float xv[1];\nxv[0] = hd_f32(xp[a * %lldLL]);\n", g->I);
    if (op->prologue[0].n)
        tuner_sb_printf(sb, "#pragma unroll\nfor (int e = 0; e < %d; e++) xv[e] = hd_pro0(xv[e], (o * %lldLL + a) * %lldLL + i + e);\n",
                        V, g->A, g->I);
    tuner_sb_printf(sb, "#pragma unroll\nfor (int e = 0; e < %d; e++) acc[e] = %s;\n}\n}\n", V, comb);
    if (c->by > 1) {
        /* [by][vec][bx]: consecutive tx hit consecutive banks. */
        combine(comb, sizeof(comb), rmax, "acc[e]", "red[k][e][tx]");
        tuner_sb_printf(sb, "__shared__ float red[%d][%d][%d];\n", c->by, V, c->bx);
        tuner_sb_printf(sb, "#pragma unroll\nfor (int e = 0; e < %d; e++) red[ty][e][tx] = acc[e];\n__syncthreads();\n", V);
        tuner_sb_printf(sb, "if (ty == 0) {\n#pragma unroll\nfor (int k = 1; k < %d; k++)\n#pragma unroll\n"
                            "for (int e = 0; e < %d; e++) acc[e] = %s;\n}\n",
                        c->by, V, comb);
    }
    tuner_sb_printf(sb, "if (ty == 0 && ok) {\n#pragma unroll\nfor (int e = 0; e < %d; e++) {\n", V);
    if (c->split > 1) {
        char outs[128];
        tuner_sb_printf(sb, "ws[(long long)blockIdx.y * %s + o * %lldLL + i + e] = acc[e];\n",
                        outs_expr(g, outs, sizeof(outs)), g->I);
    } else {
        tuner_sb_puts(sb, "float v = acc[e];\n");
        char ol[64];
        snprintf(ol, sizeof(ol), "o * %lldLL + i + e", g->I);
        emit_finish(sb, op, g, ol);
    }
    tuner_sb_puts(sb, "}\n}\n");
    tuner_map_emit_end(sb, &m);
    tuner_sb_puts(sb, "}\n");
}

/* The split form's second kernel: one thread per output element, partials in chunk order. */
static void emit_fin(tuner_sb *sb, const tuner_op *op, const cols_geo *g, const cols_cfg *c, const char *kname)
{
    const bool rmax = op->attrs.reduce.kind == TUNER_REDUCE_MAX;
    char oi[128];
    outs_expr(g, oi, sizeof(oi));
    tuner_sb_printf(sb, "extern \"C\" __global__ void __launch_bounds__(%d) %s(", FIN_THREADS, kname);
    tuner__emit_params(sb, op, op->output.dtype);
    tuner_sb_puts(sb, ", float *__restrict__ ws");
    tuner__emit_dim_params(sb, op);
    tuner_sb_puts(sb, ")\n{\n");
    tuner_sb_printf(sb, "const long long gidx = (long long)blockIdx.x * %d + threadIdx.x;\n", FIN_THREADS);
    tuner_sb_printf(sb, "if (gidx >= %s) return;\n", oi);
    char part[192], comb[256];
    snprintf(part, sizeof(part), "ws[k * %s + gidx]", oi);
    combine(comb, sizeof(comb), rmax, "v", part);
    tuner_sb_printf(sb, "float v = ws[gidx];\nfor (int k = 1; k < %d; k++) v = %s;\n", c->split, comb);
    emit_finish(sb, op, g, "gidx");
    tuner_sb_puts(sb, "}\n");
}

static int cols_generate(const tuner_op *op, const tuner_target *t, const tuner_schedule *s, tuner_program *p,
                         char **err)
{
    cols_geo g = geo_of(op);
    cols_cfg c;
    if (!cfg_from(&g, s, &c)) {
        *err = strdup("invalid parameters for reduce_cols");
        return -EINVAL;
    }
    tuner_sb sb;
    tuner_sb_init(&sb);
    tuner__prelude(&sb, t->sm);
    int r = 0;
    if (c.split == 1) {
        emit_main(&sb, op, &g, &c, "hd_reduce_cols");
        tuner__one_launch(p, op, "hd_reduce_cols", (unsigned)(g.O * c.nib), (unsigned)(c.bx * c.by));
        if (g.omask) { /* a block per (o, column block) */
            r = tuner__launch_dim_args(&p->kernels[0], op);
            if (r == 0)
                r = tuner__grid_rule(&p->kernels[0], 0, op, g.omask, g.ocoef * c.nib, 1, 1, 0);
        }
    } else {
        emit_main(&sb, op, &g, &c, "hd_reduce_cols_part");
        emit_fin(&sb, op, &g, &c, "hd_reduce_cols_fin");
        tuner_launch *k1 = &p->kernels[0], *k2 = &p->kernels[1];
        memset(k1, 0, sizeof(*k1));
        snprintf(k1->name, sizeof(k1->name), "hd_reduce_cols_part");
        k1->grid[0] = (unsigned)(g.O * c.nib);
        k1->grid[1] = (unsigned)c.split;
        k1->grid[2] = 1;
        k1->block[0] = (unsigned)(c.bx * c.by);
        k1->block[1] = k1->block[2] = 1;
        tuner__launch_args(k1, op);
        k1->args[k1->n_args++] = TUNER_BUF_WORKSPACE;
        if (g.omask) {
            r = tuner__launch_dim_args(k1, op);
            if (r == 0)
                r = tuner__grid_rule(k1, 0, op, g.omask, g.ocoef * c.nib, 1, 1, 0);
        }
        *k2 = *k1;
        snprintf(k2->name, sizeof(k2->name), "hd_reduce_cols_fin");
        k2->grid[0] = (unsigned)((g.O * g.I + FIN_THREADS - 1) / FIN_THREADS);
        k2->grid[1] = 1;
        k2->block[0] = FIN_THREADS;
        if (g.omask && r == 0) /* a thread per output */
            r = tuner__grid_rule(k2, 0, op, g.omask, g.ocoef * g.I, FIN_THREADS, 1, 0);
        p->n_kernels = 2;
        /* Sized for the largest O: the partials of every launch's O fit in it. */
        p->workspace_bytes = (size_t)c.split * (size_t)(g.O * g.I) * sizeof(float);
    }
    if (r < 0) {
        tuner_sb_free(&sb);
        *err = strdup("reduce_cols: the launch's dims arguments or grid rule do not fit the op's sizes");
        return r;
    }
    p->source = tuner_sb_take(&sb);
    p->output_dtype = op->output.dtype;
    return p->source ? 0 : -ENOMEM;
}

static double cols_predict(const tuner_op *op, const tuner_target *t, const tuner_schedule *s)
{
    const tuner_arch *a = tuner__arch(t);
    cols_geo g = geo_of(op);
    cols_cfg c;
    if (!a || !cfg_from(&g, s, &c))
        return 1e12;
    const int isz = tuner_dtype_size(op->inputs[0].dtype), osz = tuner_dtype_size(op->output.dtype);
    const double outs = (double)g.O * g.I;
    double bytes = (double)g.O * g.A * g.I * isz + (c.split > 1 ? outs * 4.0 * c.split : outs * osz);
    for (int i = 1; i < op->n_inputs; i++)
        bytes += (double)tuner_tensor_numel(&op->inputs[i]) * tuner_dtype_size(op->inputs[i].dtype);
    /* A warp reads 32 * vec consecutive elements: 16-byte loads use whole segments; scalar 16-bit
     * loads of 64 bytes less well, and columns narrower than a warp waste the rest. */
    double eff = c.vec > 1 || isz == 4 ? 0.9 : 0.7;
    if (c.vec == 1 && g.I < 32)
        eff *= (double)g.I / 32.0;
    const double blocks = (double)g.O * c.nib * c.split;
    const double busy = fmin(1.0, (double)g.I / ((double)c.nib * c.bx * c.vec)) * fmin(1.0, (double)c.chunk / c.by);
    double instr = (double)g.O * g.A * g.I * (c.vec > 1 ? 2.0 : 5.0) +
                   outs * c.split * 10.0 + outs * tuner__chain_instr(&op->epilogue) +
                   (double)g.O * g.A * g.I * tuner__chain_instr(&op->prologue[0]);
    double us = tuner__mem_cost_us(a, bytes, blocks, c.bx * c.by, 4.0 * isz * c.vec * busy, 32,
                                   c.by > 1 ? c.bx * c.by * c.vec * 4 : 0, eff, instr / busy);
    /* Each thread walks chunk / by rows one after another. */
    const double trips = ceil((double)c.chunk / c.by);
    const double slots = (double)a->sm_count * (a->max_threads_per_sm / (c.bx * c.by));
    us += 0.002 * trips * ceil(blocks / slots);
    if (c.split > 1) /* the combining kernel: its launch and the partials read back */
        us += 3.0 + (outs * 4.0 * c.split + outs * osz) / (a->dram_gbps * 1e3);
    return us;
}

static int cols_preferred(const tuner_op *op, const tuner_target *t, tuner_schedule *ret)
{
    const tuner_arch *a = tuner__arch(t);
    cols_geo g = geo_of(op);
    /* 16-byte loads where the columns allow; a warp (or two) of column vectors x 8 rows:
     * coalesced, and enough threads per column for long reductions; a long axis under few
     * columns is split up to two blocks per SM. */
    const int vec = g.vec_ok ? g.vmax : 1;
    const int bx = g.I >= 64LL * vec ? 64 : 32;
    const int by = g.A >= 64 ? 8 : 4;
    int split = 1;
    cols_cfg c;
    for (size_t k = 1; a && k < sizeof(split_values) / sizeof(split_values[0]); k++)
        if (cfg_of(&g, bx, by, vec, split_values[k], &c) && in_space(&g, a, &c) &&
            g.O * c.nib * split_values[k] <= 2LL * a->sm_count)
            split = split_values[k];
    ret->n_params = 4;
    ret->params[0].name = P_BX;
    ret->params[0].value = bx;
    ret->params[1].name = P_BY;
    ret->params[1].value = by;
    ret->params[2].name = P_VEC;
    ret->params[2].value = vec;
    ret->params[3].name = P_SPLIT;
    ret->params[3].value = split;
    return 0;
}

const tuner_template tuner__reduce_cols = {
    .name = "reduce_cols",
    .space_signature = "reduce_cols v2: [O,A,I] I>1; block_x{32..256} (x vec <= pow2ceil(I) above 32), "
                       "block_y{1..32} <= pow2ceil(A), 64 <= threads <= 1024, vec{1,16 bytes: I % vec == 0, align 16}, "
                       "split{1,4,16,64,256}: chunks >= 64 rows, blocks x split <= 2 x SMs; two kernels when split",
    .applies = cols_applies,
    .enumerate = cols_enumerate,
    .generate = cols_generate,
    .predict_us = cols_predict,
    .preferred = cols_preferred,
    .default_rank = TUNER_RANK_CUDA_CORE,
    .dynamic_dims = true,
};
