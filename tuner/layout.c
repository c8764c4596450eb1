/* tuner/layout.c - data movement: `copy` (a strided view of x made dense: transposes, slices,
 * permutations, expands with zero strides, constant padding) and `concat` (inputs joined along one axis), with unary or broadcast epilogues.
 *
 * The output is walked element by element, so stores are coalesced; a thread's source element
 * is found from the output coordinate with division by constants baked from the shapes (the
 * strides of a transpose make the loads strided - the cost model charges for the sectors that
 * wastes). A block owns block * ipt consecutive elements, assigned repeat(ipt) * spatial(block)
 * over threadIdx.x so that consecutive threads touch consecutive elements on every trip; with
 * grid_stride a grid of about one wave loops over the tiles.
 *
 * A dynamic copy (names on any axis, tuner_op.attrs.copy's stride_sym/offset_sym) takes its
 * element count, its output's named sizes and its scaled strides and offset from the hd_dim
 * parameters; the grid is the rule ceil(n / tile) (capped at a wave with grid_stride). A static
 * copy's source is what it was.
 */
#include "tuner/core.h"
#include "tuner/space.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const P_BLOCK = "block";
static const char *const P_IPT = "ipt";
static const char *const P_GS = "grid_stride";

typedef struct lay_cfg {
    int block, ipt, gs;
    long long n, tiles, grid;
} lay_cfg;

static bool cfg_of(const tuner_op *op, const tuner_arch *a, const tuner_schedule *s, lay_cfg *c)
{
    c->block = tuner_schedule_param(s, P_BLOCK, 256);
    c->ipt = tuner_schedule_param(s, P_IPT, 1);
    c->gs = tuner_schedule_param(s, P_GS, 0);
    if (c->block < 32 || c->block > 1024 || c->block % 32 || c->ipt < 1 || c->ipt > 8 ||
        (c->gs != 0 && c->gs != 1))
        return false;
    c->n = tuner_tensor_numel(&op->output);
    long long per = (long long)c->block * c->ipt;
    c->tiles = (c->n + per - 1) / per;
    long long wave = (long long)a->sm_count * (a->max_threads_per_sm / c->block);
    c->grid = c->gs ? (c->tiles < wave ? c->tiles : wave) : c->tiles;
    return c->grid >= 1 && c->grid <= 0x7fffffffLL;
}

static bool copy_applies(const tuner_op *op, const tuner_target *t)
{
    return op->kind == TUNER_OP_COPY && tuner__arch(t) && tuner__no_prologue(op) && op->n_inputs >= 1 &&
           tuner_tensor_numel(&op->output) >= 1 &&
           (!tuner_op_is_dynamic(op) || (!op->attrs.copy.padded && tuner__dyn_supported(op)));
}

static bool concat_applies(const tuner_op *op, const tuner_target *t)
{
    if (op->kind != TUNER_OP_CONCAT || !tuner__arch(t) || !tuner__no_prologue(op) || op->n_inputs < 1)
        return false;
    int ops[2];
    for (int i = 0; i < op->epilogue.n; i++)
        if (tuner_ew_operands(&op->epilogue.steps[i], ops) > 0)
            return false; /* every input is joined; there is no operand to read */
    return tuner_tensor_numel(&op->output) >= 1;
}

static int enumerate(const tuner_op *op, const tuner_target *t, const char *name, tuner_schedule **items,
                     size_t *n)
{
    const tuner_arch *a = tuner__arch(t);
    static const int blocks[] = {128, 256, 512};
    static const int ipts[] = {1, 2, 4};
    const char *names[3] = {P_BLOCK, P_IPT, P_GS};
    for (size_t b = 0; b < 3; b++)
        for (size_t i = 0; i < 3; i++)
            for (int gs = 0; gs < 2; gs++) {
                int values[3] = {blocks[b], ipts[i], gs};
                tuner_schedule s = {0};
                tuner__schedule_params(&s, 3, names, values);
                lay_cfg c;
                if (!cfg_of(op, a, &s, &c) || (gs && c.tiles <= 1))
                    continue;
                int r = tuner__space_push(items, n, name, 3, names, values);
                if (r < 0)
                    return r;
            }
    return 0;
}

static int copy_enumerate(const tuner_op *op, const tuner_target *t, tuner_schedule **items, size_t *n)
{
    return enumerate(op, t, "copy", items, n);
}

static int concat_enumerate(const tuner_op *op, const tuner_target *t, tuner_schedule **items, size_t *n)
{
    return enumerate(op, t, "concat", items, n);
}

/* Declares o0..o{rank-1}, the output coordinate of element vi (row-major); a named axis's size
 * is read from the dims (tuner__axis_expr). */
static void emit_coords(tuner_sb *sb, const tuner_tensor *out)
{
    tuner_sb_puts(sb, "long long hd_rem = vi;\n");
    for (int d = out->rank - 1; d >= 0; d--) {
        if (d > 0 && out->sym[d]) {
            char le[96];
            tuner__axis_expr(out, d, le, sizeof(le));
            tuner_sb_printf(sb, "const long long o%d = hd_rem %% %s;\nhd_rem /= %s;\n", d, le, le);
        } else if (d > 0) {
            tuner_sb_printf(sb, "const long long o%d = hd_rem %% %lldLL;\nhd_rem /= %lldLL;\n", d,
                            (long long)out->shape[d], (long long)out->shape[d]);
        } else {
            tuner_sb_puts(sb, "const long long o0 = hd_rem;\n");
        }
    }
}

/* A dynamic copy's stride or offset as a C expression: its coefficient (value at the dims' max
 * over their max) times the launch's sizes of the dims in mask (tuner__scaled_dims_expr). */
static char *scaled_expr(const tuner_op *op, int64_t value_at_max, unsigned mask, char *buf, size_t len)
{
    int64_t max[TUNER_MAX_DIMS] = {1, 1, 1, 1};
    for (int k = 0; k < op->n_dims && k < TUNER_MAX_DIMS; k++)
        max[k] = op->dims[k].max;
    return tuner__scaled_dims_expr((long long)(value_at_max / tuner_dims_product(max, mask)), mask, buf, len);
}

/* The dense row-major offset in t of coordinate (o0, ..., with o<axis> replaced by `axis_expr`). */
static void emit_dense_offset(tuner_sb *sb, const tuner_tensor *t, int axis, const char *axis_expr)
{
    long long stride = 1;
    tuner_sb_puts(sb, "(0LL");
    for (int d = t->rank - 1; d >= 0; d--) {
        if (d == axis)
            tuner_sb_printf(sb, " + (%s) * %lldLL", axis_expr, stride);
        else if (t->shape[d] > 1)
            tuner_sb_printf(sb, " + o%d * %lldLL", d, stride);
        stride *= t->shape[d];
    }
    tuner_sb_puts(sb, ")");
}

char *tuner__copy_offset(const tuner_op *op)
{
    /* Strides and offset at the launch's sizes (a static op's as numbers); an axis of size 1
     * (never named: a name's max of 1 is a size of 1) adds nothing. */
    tuner_sb sb;
    tuner_sb_init(&sb);
    char e[128];
    tuner_sb_puts(&sb, scaled_expr(op, op->attrs.copy.offset, op->attrs.copy.offset_sym, e, sizeof(e)));
    for (int d = 0; d < op->output.rank; d++)
        if (op->attrs.copy.strides[d] && op->output.shape[d] > 1)
            tuner_sb_printf(&sb, " + o%d * %s", d,
                            scaled_expr(op, op->attrs.copy.strides[d], op->attrs.copy.stride_sym[d], e, sizeof(e)));
    return tuner_sb_take(&sb);
}

static void emit_value(tuner_sb *sb, const tuner_op *op)
{
    if (op->kind == TUNER_OP_COPY && op->attrs.copy.padded) {
        /* Inside the copied region on every padded axis: x's element, else the pad value (the
         * index is formed only inside, so no read leaves x). */
        const int64_t *lo = op->attrs.copy.pad_lower, *up = op->attrs.copy.pad_upper;
        tuner_sb_puts(sb, "const bool hd_inside = true");
        for (int d = 0; d < op->output.rank; d++) {
            if (lo[d])
                tuner_sb_printf(sb, " && o%d >= %lldLL", d, (long long)lo[d]);
            if (up[d])
                tuner_sb_printf(sb, " && o%d < %lldLL", d, (long long)(op->output.shape[d] - up[d]));
        }
        tuner_sb_puts(sb, ";\nfloat v = ");
        tuner__emit_float(sb, op->attrs.copy.pad_value);
        tuner_sb_printf(sb, ";\nif (hd_inside) v = hd_f32(in0[%lldLL", (long long)op->attrs.copy.offset);
        for (int d = 0; d < op->output.rank; d++)
            if (op->attrs.copy.strides[d] && op->output.shape[d] > 1)
                tuner_sb_printf(sb, " + (o%d - %lldLL) * %lldLL", d, (long long)lo[d],
                                (long long)op->attrs.copy.strides[d]);
        tuner_sb_puts(sb, "]);\n");
        return;
    }
    if (op->kind == TUNER_OP_COPY && tuner_op_is_dynamic(op)) {
        char *off = tuner__copy_offset(op);
        tuner_sb_printf(sb, "float v = hd_f32(in0[%s]);\n", off ? off : "0LL");
        free(off);
        return;
    }
    if (op->kind == TUNER_OP_COPY) {
        tuner_sb_printf(sb, "float v = hd_f32(in0[%lldLL", (long long)op->attrs.copy.offset);
        for (int d = 0; d < op->output.rank; d++)
            if (op->attrs.copy.strides[d] && op->output.shape[d] > 1)
                tuner_sb_printf(sb, " + o%d * %lldLL", d, (long long)op->attrs.copy.strides[d]);
        tuner_sb_puts(sb, "]);\n");
        return;
    }
    /* concat: the input whose range along the axis holds the coordinate. */
    const int ax = op->attrs.concat.axis;
    long long start = 0;
    tuner_sb_puts(sb, "float v;\n");
    for (int j = 0; j < op->n_inputs; j++) {
        const long long len = op->inputs[j].shape[ax];
        char rel[64];
        snprintf(rel, sizeof(rel), "o%d - %lldLL", ax, start);
        if (j < op->n_inputs - 1)
            tuner_sb_printf(sb, "%sif (o%d < %lldLL) v = hd_f32(in%d[", j ? "else " : "", ax, start + len, j);
        else
            tuner_sb_printf(sb, "%sv = hd_f32(in%d[", j ? "else " : "", j);
        emit_dense_offset(sb, &op->inputs[j], ax, rel);
        tuner_sb_puts(sb, "]);\n");
        start += len;
    }
}

static int lay_generate(const tuner_op *op, const tuner_target *t, const tuner_schedule *s, tuner_program *p,
                        char **err)
{
    const tuner_arch *a = tuner__arch(t);
    lay_cfg c;
    if (!a || !cfg_of(op, a, s, &c)) {
        *err = strdup("invalid parameters for a layout kernel");
        return -EINVAL;
    }
    const tuner_tensor *out = &op->output;
    const long long L = out->shape[out->rank - 1];
    const char *kname = op->kind == TUNER_OP_COPY ? "hd_copy" : "hd_concat";
    tuner_sb sb;
    tuner_sb_init(&sb);
    tuner_mapping m;
    const bool dyn = tuner_op_is_dynamic(op);
    const unsigned mask = tuner__sym_mask(out);
    if (dyn) {
        char numel[96];
        tuner__scaled_dims_expr(tuner_tensor_fixed_numel(out), mask, numel, sizeof(numel));
        tuner__emit_tiles_begin_dyn(&sb, op, t->sm, kname, c.block, c.ipt, c.gs, numel, &m);
    } else {
        tuner__emit_tiles_begin(&sb, op, t->sm, kname, c.block, c.ipt, c.gs, c.tiles, c.n, &m);
    }
    emit_coords(&sb, out);
    emit_value(&sb, op);
    if (op->epilogue.n && out->rank >= 1 && out->sym[out->rank - 1]) {
        char le[96];
        tuner__axis_expr(out, out->rank - 1, le, sizeof(le));
        tuner_sb_printf(&sb, "const long long row = vi / %s, col = vi %% %s;\n", le, le);
        tuner__bcast_ctx ec = {op, "row", "col"};
        tuner__emit_chain(&sb, op, &op->epilogue, "v", tuner__bcast_load, &ec);
    } else if (op->epilogue.n) {
        tuner_sb_printf(&sb, "const long long row = vi / %lldLL, col = vi %% %lldLL;\n", L, L);
        tuner__bcast_ctx ec = {op, "row", "col"};
        tuner__emit_chain(&sb, op, &op->epilogue, "v", tuner__bcast_load, &ec);
    }
    tuner_sb_printf(&sb, "out[vi] = hd_from_f32<%s>(v);\n", tuner__ctype(out->dtype));
    tuner__emit_tiles_end(&sb, &m);
    tuner__one_launch(p, op, kname, (unsigned)c.grid, (unsigned)c.block);
    if (dyn) {
        /* Tiles of block * ipt elements over the launch's elements; grid-stride: at most a wave. */
        tuner_launch *l = &p->kernels[0];
        const long long wave = (long long)a->sm_count * (a->max_threads_per_sm / c.block);
        int r = tuner__launch_dim_args(l, op);
        if (r == 0)
            r = tuner__grid_rule(l, 0, op, mask, tuner_tensor_fixed_numel(out), (long long)c.block * c.ipt, 1,
                                 c.gs ? wave : 0);
        if (r == 0 && (long long)l->grid[0] != c.grid)
            r = -EINVAL;
        if (r < 0) {
            tuner_sb_free(&sb);
            *err = strdup("copy: the launch's dims arguments or grid rule do not fit the op's sizes");
            return r;
        }
    }
    p->source = tuner_sb_take(&sb);
    p->output_dtype = out->dtype;
    return p->source ? 0 : -ENOMEM;
}

static double lay_predict(const tuner_op *op, const tuner_target *t, const tuner_schedule *s)
{
    const tuner_arch *a = tuner__arch(t);
    lay_cfg c;
    if (!a || !cfg_of(op, a, s, &c))
        return 1e12;
    const tuner_tensor *out = &op->output;
    const int osz = tuner_dtype_size(out->dtype), isz = tuner_dtype_size(op->inputs[0].dtype);
    double bytes = (double)c.n * osz;
    /* Reads: a copy whose innermost stride is not 1 touches a 32-byte sector per element. */
    double eff = osz == 2 ? 0.55 : 0.8;
    if (op->kind == TUNER_OP_COPY) {
        long long inner = out->rank ? op->attrs.copy.strides[out->rank - 1] : 1;
        if (inner == 1 || out->shape[out->rank - 1] == 1)
            bytes += (double)c.n * isz;
        else
            bytes += (double)c.n * 32.0;
    } else {
        bytes += (double)c.n * isz;
    }
    for (int i = op->n_anchor_inputs; i < op->n_inputs; i++)
        bytes += (double)tuner_tensor_numel(&op->inputs[i]) * tuner_dtype_size(op->inputs[i].dtype);
    double instr = (double)c.n * (8.0 + 3.0 * out->rank + tuner__chain_instr(&op->epilogue));
    double us = tuner__mem_cost_us(a, bytes, (double)c.grid, c.block, 4.0 * c.ipt, 24 + 8 * c.ipt, 0, eff, instr);
    if (c.gs)
        us += 0.2;
    return us;
}

static int lay_preferred(const tuner_op *op, const tuner_target *t, tuner_schedule *ret)
{
    (void)op;
    (void)t;
    ret->n_params = 3;
    ret->params[0].name = P_BLOCK;
    ret->params[0].value = 256;
    ret->params[1].name = P_IPT;
    ret->params[1].value = 4;
    ret->params[2].name = P_GS;
    ret->params[2].value = 0;
    return 0;
}

const tuner_template tuner__copy = {
    .name = "copy",
    .space_signature = "copy v1: block{128,256,512} ipt{1,2,4} grid_stride{0,1}; scalar, output-ordered",
    .applies = copy_applies,
    .enumerate = copy_enumerate,
    .generate = lay_generate,
    .predict_us = lay_predict,
    .preferred = lay_preferred,
    .default_rank = TUNER_RANK_CUDA_CORE,
    .dynamic_dims = true,
};

const tuner_template tuner__concat = {
    .name = "concat",
    .space_signature = "concat v1: block{128,256,512} ipt{1,2,4} grid_stride{0,1}; scalar, output-ordered",
    .applies = concat_applies,
    .enumerate = concat_enumerate,
    .generate = lay_generate,
    .predict_us = lay_predict,
    .preferred = lay_preferred,
    .default_rank = TUNER_RANK_CUDA_CORE,
};
