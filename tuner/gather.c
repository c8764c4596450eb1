/* tuner/gather.c - gather: rows of x picked by an integer index (torch.embedding, index_select).
 *
 * x is seen as [O, N, I]: O the product of x's dims before the axis, N the axis, I the product
 * after it (the contiguous run one index value selects). The output is [O, M, I] with M the
 * index's element count: a "gathered row" (o, m) copies x[o, row(index[m]), :] to out[o, m, :],
 * where row() is tuner_gather_row: a negative id counts from the end, and an id outside [-N, N)
 * reads nothing and gives zeros (then the epilogue), so that no id can make a kernel read out of
 * bounds. Memory-bound, like copy: the cost is the output written and the rows read once each.
 *
 * Two paths (parameter `tpr`, threads per gathered row):
 *  - rows (tpr 8, 32 or 128): block / tpr gathered rows per block; a row's threads load its id
 *    once (a broadcast in L1) and copy the row in `vec`-wide accesses (16 bytes when I and the
 *    alignments allow: an embedding row of 768 f16 is 96 vectors), consecutive threads on
 *    consecutive vectors; with no epilogue and the same dtype out as in, each vector is a raw
 *    16-byte load and store;
 *  - elements (tpr 0): the output walked flat in items of `vec` elements with the task mapping
 *    repeat(ipt) * spatial(block) (tuner__emit_tiles_begin), each item finding its row and id by
 *    division by constants - the generic path, for short rows (index_select along the last axis:
 *    I = 1) where a row's threads would idle.
 * The epilogue (a position-embedding add, a scale) runs per element with operands broadcast to
 * the output, as in elementwise.
 *
 * Parameters: `tpr` {0, 8, 32, 128}, `vec` {1, 16 bytes}, `block` {128, 256} (rows) or
 * {128, 256, 512} (elements), `ipt` {1, 2, 4} (elements only; 1 on the rows path).
 *
 * A dynamic op names the index's axes (the ids of a batch of sequences, ["b", "s"]; the table
 * stays fixed): M = (the index's fixed size) x (the sizes) at launch bounds the rows and items,
 * the grid is the rule ceil(rows / rows_per_block) or ceil(items / tile), and the epilogue's
 * operands read the named sizes they need (tuner__bcast_offset). The space is the one at the
 * dims' max; nothing depends on M dividing anything.
 */
#include "tuner/core.h"
#include "tuner/space.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const P_TPR = "tpr";
static const char *const P_VEC = "vec";
static const char *const P_BLOCK = "block";
static const char *const P_IPT = "ipt";

typedef struct gather_geo {
    long long O, N, I, M; /* x as [O, N, I]; M index elements */
    /* A dynamic op: M = mcoef * (the sizes of the dims in mmask) at launch (the index's names);
     * mmask 0: M is fixed. */
    unsigned mmask;
    long long mcoef;
    long long rows;       /* gathered rows: O * M */
    long long L;          /* the output's last dim (epilogue operands' broadcast) */
    int vmax;             /* widest vector: 16 bytes of x and of the output, dividing I; else 1 */
    bool raw;             /* a vector may be copied as raw bits (no epilogue, same dtype) */
} gather_geo;

static gather_geo geo_of(const tuner_op *op)
{
    const tuner_tensor *x = &op->inputs[0], *ix = &op->inputs[1], *o = &op->output;
    const int axis = op->attrs.gather.axis;
    gather_geo g = {.O = 1, .N = x->shape[axis], .I = 1, .M = tuner_tensor_numel(ix), .vmax = 1};
    for (int d = 0; d < axis; d++)
        g.O *= x->shape[d];
    for (int d = axis + 1; d < x->rank; d++)
        g.I *= x->shape[d];
    g.rows = g.O * g.M;
    g.mmask = tuner__sym_mask(ix);
    g.mcoef = tuner_tensor_fixed_numel(ix);
    g.L = o->rank >= 1 ? o->shape[o->rank - 1] : 1;
    int v = 16 / tuner_dtype_size(x->dtype), vo = 16 / tuner_dtype_size(o->dtype);
    if (vo < v)
        v = vo;
    /* A vector never straddles two rows, and every row starts at a multiple of I elements. */
    if (g.I % v == 0 && x->align >= 16 && o->align >= 16)
        g.vmax = v;
    g.raw = op->epilogue.n == 0 && x->dtype == o->dtype;
    return g;
}

/* Dynamic: names on the index only (each once), the output's axes named as the index's they
 * come from, the epilogue's operands lined up with the output (a name against itself or 1), and
 * the buffers and dims within a launch's arguments. */
static bool dyn_ok(const tuner_op *op)
{
    const tuner_tensor *x = &op->inputs[0], *ix = &op->inputs[1], *o = &op->output;
    const int axis = op->attrs.gather.axis;
    if (op->n_inputs + 2 + op->n_dims > TUNER_MAX_ARGS || tuner__sym_mask(x) || !tuner__sym_mask(ix))
        return false;
    unsigned seen = 0;
    for (int d = 0; d < ix->rank; d++) {
        if (seen & ix->sym[d])
            return false;
        seen |= ix->sym[d];
    }
    for (int d = 0; d < o->rank; d++)
        if (o->sym[d] != (d >= axis && d < axis + ix->rank ? ix->sym[d - axis] : 0))
            return false;
    for (int i = 2; i < op->n_inputs; i++)
        if (!tuner__names_line_up(&op->inputs[i], o))
            return false;
    return true;
}

static bool gather_applies(const tuner_op *op, const tuner_target *t)
{
    if (op->kind != TUNER_OP_GATHER || !tuner__arch(t) || op->n_anchor_inputs != 2 || op->n_inputs < 2 ||
        !tuner__no_prologue(op))
        return false;
    const tuner_tensor *x = &op->inputs[0], *ix = &op->inputs[1];
    if (tuner_dtype_is_int(x->dtype) || !tuner_dtype_is_int(ix->dtype) || tuner_dtype_is_int(op->output.dtype))
        return false;
    if (op->attrs.gather.axis < 0 || op->attrs.gather.axis >= x->rank)
        return false;
    for (int i = 0; i < op->epilogue.n; i++) {
        const tuner_ew_step *st = &op->epilogue.steps[i];
        if (TUNER_EW_IS_BINARY(st->kind) && (st->operand < 2 || st->operand >= op->n_inputs))
            return false;
    }
    if (tuner_op_is_dynamic(op) && !dyn_ok(op))
        return false;
    return tuner_tensor_numel(&op->output) >= 1;
}

typedef struct gather_cfg {
    int tpr, vec, block, ipt;
    long long nvr;   /* vectors per gathered row */
    long long items; /* elements path: vectors of the output */
    long long grid;
} gather_cfg;

static bool cfg_of(const gather_geo *g, const tuner_schedule *s, gather_cfg *c)
{
    c->tpr = tuner_schedule_param(s, P_TPR, 0);
    c->vec = tuner_schedule_param(s, P_VEC, 1);
    c->block = tuner_schedule_param(s, P_BLOCK, 256);
    c->ipt = tuner_schedule_param(s, P_IPT, 1);
    if (c->vec != 1 && c->vec != g->vmax)
        return false;
    c->nvr = g->I / c->vec;
    if (c->tpr == 0) {
        if (c->block != 128 && c->block != 256 && c->block != 512)
            return false;
        if (c->ipt != 1 && c->ipt != 2 && c->ipt != 4)
            return false;
        c->items = g->rows * c->nvr;
        const long long per = (long long)c->block * c->ipt;
        c->grid = (c->items + per - 1) / per;
    } else {
        if (c->tpr != 8 && c->tpr != 32 && c->tpr != 128)
            return false;
        if ((c->block != 128 && c->block != 256) || c->ipt != 1 || c->tpr > c->block)
            return false;
        /* No row of mostly idle threads: a narrower tpr covers a short row. */
        if (c->tpr > 8 && c->nvr * 2 <= c->tpr)
            return false;
        const long long rpb = c->block / c->tpr;
        c->items = c->nvr;
        c->grid = (g->rows + rpb - 1) / rpb;
    }
    return c->grid >= 1 && c->grid <= 0x7fffffffLL;
}

/* Adds the schedule (tpr, vec, block, ipt) to the space when it has a configuration for g. */
static int push_valid(const gather_geo *g, const int values[4], tuner_schedule **items, size_t *n)
{
    static const char *const names[4] = {P_TPR, P_VEC, P_BLOCK, P_IPT};
    tuner_schedule s = {0};
    tuner__schedule_params(&s, 4, names, values);
    gather_cfg c;
    if (!cfg_of(g, &s, &c))
        return 0;
    /* Several items per thread only where a wave's worth of blocks remains (a usefulness rule of
     * the space: the code is right either way, and a dynamic op's smaller sizes make fewer). */
    if (c.tpr == 0 && c.ipt > 1 && c.grid < 64)
        return 0;
    return tuner__space_push(items, n, "gather", 4, names, values);
}

static int gather_enumerate(const tuner_op *op, const tuner_target *t, tuner_schedule **items, size_t *n)
{
    (void)t;
    gather_geo g = geo_of(op);
    /* 32 first: where the model ties (bandwidth-bound, whole trips), whole warps per row measured
     * best on an H200 (an embedding of 768 f16 or f32). */
    static const int tprs[] = {32, 8, 128};
    static const int blocks[] = {128, 256, 512};
    static const int ipts[] = {1, 2, 4};
    for (int v = 1; v >= 0; v--) {
        if (v && g.vmax == 1)
            continue;
        const int vec = v ? g.vmax : 1;
        /* The rows path first: it is the preferred one wherever a row is long enough. */
        for (size_t k = 0; k < 3; k++)
            for (size_t b = 0; b < 2; b++) {
                int r = push_valid(&g, (int[4]){tprs[k], vec, blocks[b], 1}, items, n);
                if (r < 0)
                    return r;
            }
        for (size_t b = 0; b < 3; b++)
            for (size_t i = 0; i < 3; i++) {
                int r = push_valid(&g, (int[4]){0, vec, blocks[b], ipts[i]}, items, n);
                if (r < 0)
                    return r;
            }
    }
    return 0;
}

/* Epilogue operands of the output element hd_oi (flat), as (row, col) over the output's last
 * dim. */
static char *epi_load(void *vctx, int i)
{
    tuner__bcast_ctx bc = {vctx, "hd_row", "hd_col"};
    return tuner__bcast_load(&bc, i);
}

/* The copy of one vector: x's element `src` (valid when `ok`) to the output's element `dst`,
 * both expressions of long long, each a multiple of vec. */
static void emit_vector(tuner_sb *sb, const tuner_op *op, const gather_geo *g, const gather_cfg *c, const char *XT,
                        const char *OT)
{
    if (g->raw && c->vec * tuner_dtype_size(op->inputs[0].dtype) == 16) {
        tuner_sb_puts(sb, "hd_v4 rv = {0u, 0u, 0u, 0u};\nif (ok) rv = hd_ld16(in0 + src);\nhd_st16(out + dst, rv);\n");
        return;
    }
    tuner_sb_printf(sb, "float xv[%d];\n", c->vec);
    tuner_sb_printf(sb, "if (ok) hd_ldn_f32<%s, %d>(in0 + src, xv);\nelse {\n#pragma unroll\n"
                        "for (int e = 0; e < %d; e++) xv[e] = 0.0f;\n}\n",
                    XT, c->vec, c->vec);
    if (op->epilogue.n) {
        tuner_sb_printf(sb, "#pragma unroll\nfor (int e = 0; e < %d; e++) {\nfloat v = xv[e];\n", c->vec);
        const tuner_tensor *o = &op->output;
        if (o->rank >= 1 && o->sym[o->rank - 1]) { /* a named last axis (x of rank 1): its length at launch */
            char le[96];
            tuner_sb_printf(sb, "const long long hd_oi = dst + e, hd_l = %s;\n"
                                "const long long hd_row = hd_oi / hd_l, hd_col = hd_oi %% hd_l;\n"
                                "(void)hd_row;\n(void)hd_col;\n",
                            tuner__axis_expr(o, o->rank - 1, le, sizeof(le)));
        } else {
            tuner_sb_printf(sb, "const long long hd_oi = dst + e;\n"
                                "const long long hd_row = hd_oi / %lldLL, hd_col = hd_oi %% %lldLL;\n"
                                "(void)hd_row;\n(void)hd_col;\n",
                            g->L, g->L);
        }
        tuner__emit_chain(sb, op, &op->epilogue, "v", epi_load, (void *)op);
        tuner_sb_puts(sb, "xv[e] = v;\n}\n");
    }
    tuner_sb_printf(sb, "hd_stn_f32<%s, %d>(out + dst, xv);\n", OT, c->vec);
}

/* The row of x the id in1[m] selects (tuner_gather_row), into `r` and `ok`. */
static void emit_row(tuner_sb *sb, const gather_geo *g)
{
    tuner_sb_printf(sb, "long long r = (long long)in1[m];\nif (r < 0) r += %lldLL;\n", g->N);
    tuner_sb_printf(sb, "const bool ok = r >= 0 && r < %lldLL;\n", g->N);
}

static int gather_generate(const tuner_op *op, const tuner_target *t, const tuner_schedule *s, tuner_program *p,
                           char **err)
{
    gather_geo g = geo_of(op);
    gather_cfg c;
    if (!tuner__arch(t) || !cfg_of(&g, s, &c)) {
        *err = strdup("invalid parameters for gather");
        return -EINVAL;
    }
    const char *XT = tuner__ctype(op->inputs[0].dtype);
    const char *OT = tuner__ctype(op->output.dtype);
    tuner_sb sb;
    tuner_sb_init(&sb);
    /* A dynamic op's index count M at launch, and the gathered rows O * M. */
    char mexpr[96], rows_expr[128];
    if (g.mmask) {
        tuner__scaled_dims_expr(g.mcoef, g.mmask, mexpr, sizeof(mexpr));
        snprintf(rows_expr, sizeof(rows_expr), "%lldLL * %s", g.O, mexpr);
    }
    if (c.tpr == 0) {
        tuner_mapping m;
        if (g.mmask) {
            char n_expr[160];
            snprintf(n_expr, sizeof(n_expr), "%s * %lldLL", rows_expr, c.nvr);
            tuner__emit_tiles_begin_dyn(&sb, op, t->sm, "hd_gather", c.block, c.ipt, false, n_expr, &m);
            tuner_sb_printf(&sb, "const long long hd_m = %s;\n", mexpr);
        } else {
            tuner__emit_tiles_begin(&sb, op, t->sm, "hd_gather", c.block, c.ipt, false, c.grid, c.items, &m);
        }
        /* The item's gathered row gr = o * M + m and its first element i0 in the row. */
        tuner_sb_printf(&sb, "const long long gr = vi / %lldLL, i0 = (vi %% %lldLL) * %d;\n", c.nvr, c.nvr, c.vec);
        if (g.mmask)
            tuner_sb_puts(&sb, "const long long o = gr / hd_m, m = gr % hd_m;\n");
        else
            tuner_sb_printf(&sb, "const long long o = gr / %lldLL, m = gr %% %lldLL;\n", g.M, g.M);
        emit_row(&sb, &g);
        tuner_sb_printf(&sb, "const long long src = (o * %lldLL + r) * %lldLL + i0, dst = vi * %d;\n(void)src;\n", g.N,
                        g.I, c.vec);
        emit_vector(&sb, op, &g, &c, XT, OT);
        tuner__emit_tiles_end(&sb, &m);
    } else {
        const int rpb = c.block / c.tpr;
        tuner__prelude(&sb, t->sm);
        tuner_sb_printf(&sb, "extern \"C\" __global__ void __launch_bounds__(%d) hd_gather(", c.block);
        tuner__emit_params(&sb, op, op->output.dtype);
        tuner__emit_dim_params(&sb, op);
        tuner_sb_puts(&sb, ")\n{\n");
        /* Thread (lane t of row slot q): consecutive threads take consecutive vectors of a row. */
        tuner_sb_printf(&sb, "const int t = threadIdx.x %% %d, q = threadIdx.x / %d;\n", c.tpr, c.tpr);
        if (g.mmask) {
            tuner_sb_printf(&sb, "const long long hd_m = %s;\n", mexpr);
            tuner_sb_printf(&sb, "const long long gr = (long long)blockIdx.x * %d + q;\nif (gr >= %s) return;\n", rpb,
                            rows_expr);
            tuner_sb_puts(&sb, "const long long o = gr / hd_m, m = gr % hd_m;\n");
        } else {
            tuner_sb_printf(&sb, "const long long gr = (long long)blockIdx.x * %d + q;\nif (gr >= %lldLL) return;\n",
                            rpb, g.rows);
            tuner_sb_printf(&sb, "const long long o = gr / %lldLL, m = gr %% %lldLL;\n", g.M, g.M);
        }
        emit_row(&sb, &g);
        tuner_sb_printf(&sb, "const long long sbase = (o * %lldLL + (ok ? r : 0)) * %lldLL, dbase = gr * %lldLL;\n",
                        g.N, g.I, g.I);
        tuner_sb_printf(&sb, "#pragma unroll 4\nfor (long long j = t; j < %lldLL; j += %d) {\n", c.nvr, c.tpr);
        tuner_sb_printf(&sb, "const long long src = sbase + j * %d, dst = dbase + j * %d;\n(void)src;\n", c.vec, c.vec);
        emit_vector(&sb, op, &g, &c, XT, OT);
        tuner_sb_puts(&sb, "}\n}\n");
    }
    tuner__one_launch(p, op, "hd_gather", (unsigned)c.grid, (unsigned)c.block);
    if (g.mmask) {
        /* Items of block * ipt vectors, or rows_per_block rows, over the launch's rows. */
        tuner_launch *l = &p->kernels[0];
        int r = tuner__launch_dim_args(l, op);
        if (r == 0 && c.tpr == 0)
            r = tuner__grid_rule(l, 0, op, g.mmask, g.O * g.mcoef * c.nvr, (long long)c.block * c.ipt, 1, 0);
        else if (r == 0)
            r = tuner__grid_rule(l, 0, op, g.mmask, g.O * g.mcoef, c.block / c.tpr, 1, 0);
        if (r == 0 && (long long)l->grid[0] != c.grid)
            r = -EINVAL;
        if (r < 0) {
            tuner_sb_free(&sb);
            *err = strdup("gather: the launch's dims arguments or grid rule do not fit the op's sizes");
            return r;
        }
    }
    p->source = tuner_sb_take(&sb);
    p->output_dtype = op->output.dtype;
    return p->source ? 0 : -ENOMEM;
}

static double gather_predict(const tuner_op *op, const tuner_target *t, const tuner_schedule *s)
{
    const tuner_arch *a = tuner__arch(t);
    gather_geo g = geo_of(op);
    gather_cfg c;
    if (!a || !cfg_of(&g, s, &c))
        return 1e12;
    const double out_n = (double)tuner_tensor_numel(&op->output);
    const int xs = tuner_dtype_size(op->inputs[0].dtype), is = tuner_dtype_size(op->inputs[1].dtype);
    /* DRAM: the output written, the gathered rows read once each (a row picked twice comes from
     * L2 - ignored), the index, and the epilogue's operands once each. */
    double bytes = out_n * (tuner_dtype_size(op->output.dtype) + xs) + (double)g.M * is;
    for (int i = 2; i < op->n_inputs; i++)
        bytes += (double)tuner_tensor_numel(&op->inputs[i]) * tuner_dtype_size(op->inputs[i].dtype);
    double eff = c.vec > 1 ? 1.0 : (xs == 2 ? 0.55 : 0.8);
    const double chain = tuner__chain_instr(&op->epilogue);
    double instr, inflight;
    int threads = c.block;
    if (c.tpr == 0) {
        /* Per item: the divisions that find its row, the id's load and test; per element the
         * conversion and the chain. */
        instr = (double)c.items * 24.0 + out_n * (2.0 + chain);
        /* Each item's data load waits on its id's load: about half of a thread's time has
         * nothing of x in flight (on an H200, ipt 2-4 beat ipt 1 by 5-35%). */
        inflight = (double)c.vec * xs * c.ipt * 0.5;
    } else {
        /* Lanes past a row's end idle: they neither load nor keep loads in flight. */
        const long long trips = (c.nvr + c.tpr - 1) / c.tpr;
        const double active = (double)c.nvr / (double)(trips * c.tpr);
        eff *= 0.5 + 0.5 * active;
        instr = (double)g.rows * c.tpr * 16.0 + (double)g.rows * c.nvr * 6.0 + out_n * (2.0 + chain);
        inflight = (double)c.vec * xs * (trips < 4 ? trips : 4) * active;
    }
    return tuner__mem_cost_us(a, bytes, (double)c.grid, threads, inflight, 32 + 4 * c.vec, 0, eff, instr);
}

static int gather_preferred(const tuner_op *op, const tuner_target *t, tuner_schedule *ret)
{
    (void)t;
    gather_geo g = geo_of(op);
    const long long nvr = g.I / g.vmax;
    /* A warp per row from 32 vectors on (an embedding row of 768 f16: 3 vectors per lane; on an
     * H200 within 2% of the best schedule for f16 and f32, where 128 lanes per row idle half of
     * their second trip in f32), 8 lanes for short rows, the elements path below 4 vectors. */
    int tpr = nvr >= 32 ? 32 : nvr >= 4 ? 8 : 0;
    ret->n_params = 4;
    ret->params[0].name = P_TPR;
    ret->params[0].value = tpr;
    ret->params[1].name = P_VEC;
    ret->params[1].value = g.vmax;
    ret->params[2].name = P_BLOCK;
    ret->params[2].value = 256;
    ret->params[3].name = P_IPT;
    ret->params[3].value = 1;
    return 0;
}

const tuner_template tuner__gather = {
    .name = "gather",
    .space_signature = "gather v1: tpr{0 (elements),8,32,128} vec{1,16B of x and out dividing I} "
                       "block{128,256 rows; 128,256,512 elements} ipt{1 rows; 1,2,4 elements, >1 with >= 64 blocks}; "
                       "no tpr with vectors per row * 2 <= tpr (but 8); out-of-range ids give 0",
    .applies = gather_applies,
    .enumerate = gather_enumerate,
    .generate = gather_generate,
    .predict_us = gather_predict,
    .preferred = gather_preferred,
    .default_rank = TUNER_RANK_CUDA_CORE,
    .dynamic_dims = true,
};
