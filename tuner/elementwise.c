/* tuner/elementwise.c - elementwise/broadcast chains in one kernel.
 *
 * The output is walked in vectors of `vec` elements (16 bytes of output when every operand
 * allows it, else 1). A block owns a tile of block * ipt vectors, assigned by the task mapping
 * repeat(ipt) * spatial(block) over threadIdx.x, so consecutive threads touch consecutive vectors
 * on every trip (coalesced). With grid_stride=1 a grid of about one wave loops over the tiles;
 * otherwise the grid covers the output exactly. Broadcast index math uses constants baked from
 * the shapes; an operand that is constant along the output's last dim is read once per vector.
 *
 * A dynamic op (named dims, tuner/codegen.h) takes its element count at launch: the bound hd_n
 * is computed from the dims' parameters, the exact grid is the rule ceil(n / tile) and the
 * grid-stride one the same rule capped at a wave. Names may stand on any axis (no name on two
 * axes of a tensor): the fixed sizes and strides stay constants, a named axis's size and the
 * strides and row products it enters are read from the parameters (tuner__bcast_offset), so
 * ["b", "s", 768] + ["s", 768] indexes its operand by s at launch. A vector must divide every
 * size: with a named last axis vectors need the dims' multiple_of to be a multiple of the vector.
 */
#include "tuner/core.h"
#include "tuner/space.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const P_VEC = "vec";
static const char *const P_BLOCK = "block";
static const char *const P_IPT = "ipt";
static const char *const P_GS = "grid_stride";

typedef struct ew_geo {
    long long n, L; /* output elements, output last dim */
    int vmax;       /* elements in 16 bytes of the output */
    bool vec_ok;
    bool used[TUNER_MAX_INPUTS];
} ew_geo;

/* Whether vectors of vmax elements fit: they divide the last dim (and a named last axis's
 * multiple) and every operand read along the rows is 16-byte aligned, as is the output. */
static bool vec_fits(const tuner_op *op, const ew_geo *g, int vmax)
{
    const tuner_tensor *out = &op->output;
    bool ok = g->L % vmax == 0 && (out->align == 0 || out->align >= 16);
    if (out->rank >= 1 && out->sym[out->rank - 1]) { /* a named last axis: every size must divide */
        long long step = 1;
        for (int k = 0; k < op->n_dims && k < TUNER_MAX_DIMS; k++)
            if (out->sym[out->rank - 1] & (1u << k))
                step *= op->dims[k].multiple_of;
        ok = ok && step % vmax == 0;
    }
    for (int i = 0; i < op->n_inputs; i++)
        if (g->used[i] && tuner__bcast_last_contiguous(&op->inputs[i], out) && op->inputs[i].align < 16)
            ok = false;
    return ok;
}

static ew_geo geo_of(const tuner_op *op)
{
    ew_geo g;
    memset(&g, 0, sizeof(g));
    const tuner_tensor *out = &op->output;
    g.n = tuner_tensor_numel(out);
    g.L = out->rank >= 1 ? out->shape[out->rank - 1] : 1;
    g.used[0] = true;
    for (int i = 0; i < op->epilogue.n && i < TUNER_MAX_STEPS; i++) {
        const tuner_ew_step *st = &op->epilogue.steps[i];
        int ops[2];
        for (int j = tuner_ew_operands(st, ops) - 1; j >= 0; j--)
            if (ops[j] >= 0 && ops[j] < op->n_inputs)
                g.used[ops[j]] = true;
    }
    /* An FP8 input read along the output's rows widens the vector to 16 of its bytes (a 16-byte
     * load) when the sizes allow, else 16 bytes of output as for every other op. */
    g.vmax = 16 / tuner_dtype_size(out->dtype);
    g.vec_ok = vec_fits(op, &g, g.vmax);
    for (int i = 0; i < op->n_inputs && g.vmax < 16; i++)
        if (g.used[i] && tuner_dtype_is_fp8(op->inputs[i].dtype) &&
            tuner__bcast_last_contiguous(&op->inputs[i], out) && vec_fits(op, &g, 16)) {
            g.vmax = 16;
            g.vec_ok = true;
        }
    return g;
}

static bool ew_applies(const tuner_op *op, const tuner_target *t)
{
    if (op->kind != TUNER_OP_ELEMENTWISE || !tuner__arch(t) || !tuner__no_prologue(op) || op->n_inputs < 1 ||
        !tuner__dyn_supported(op) || (tuner_op_is_dynamic(op) && !tuner__sym_mask(&op->output)))
        return false;
    for (int i = 0; i < op->epilogue.n; i++) {
        const tuner_ew_step *st = &op->epilogue.steps[i];
        int ops[2];
        for (int j = tuner_ew_operands(st, ops) - 1; j >= 0; j--)
            if (ops[j] < 0 || ops[j] >= op->n_inputs)
                return false;
    }
    return tuner_tensor_numel(&op->output) >= 1;
}

typedef struct ew_cfg {
    int vec, block, ipt, gs;
    long long nvec, tiles;
    long long grid;
    long long wave; /* the grid-stride grid's cap: one wave of resident blocks */
} ew_cfg;

static bool cfg_of(const tuner_op *op, const tuner_arch *a, const ew_geo *g, const tuner_schedule *s, ew_cfg *c)
{
    (void)op;
    c->vec = tuner_schedule_param(s, P_VEC, 1);
    c->block = tuner_schedule_param(s, P_BLOCK, 256);
    c->ipt = tuner_schedule_param(s, P_IPT, 1);
    c->gs = tuner_schedule_param(s, P_GS, 0);
    if (c->vec != 1 && (c->vec != g->vmax || !g->vec_ok))
        return false;
    if (c->block < 32 || c->block > 1024 || c->block % 32 || c->ipt < 1 || c->ipt > 8 || (c->gs != 0 && c->gs != 1))
        return false;
    c->nvec = g->n / c->vec;
    long long per = (long long)c->block * c->ipt;
    c->tiles = (c->nvec + per - 1) / per;
    long long wave = (long long)a->sm_count * (a->max_threads_per_sm / c->block);
    c->wave = wave;
    c->grid = c->gs ? (c->tiles < wave ? c->tiles : wave) : c->tiles;
    return c->grid >= 1 && c->grid <= 0x7fffffffLL;
}

static int ew_enumerate(const tuner_op *op, const tuner_target *t, tuner_schedule **items, size_t *n)
{
    const tuner_arch *a = tuner__arch(t);
    ew_geo g = geo_of(op);
    static const int blocks[] = {128, 256, 512};
    static const int ipts[] = {1, 2, 4};
    const char *names[4] = {P_VEC, P_BLOCK, P_IPT, P_GS};
    for (int v = 0; v < 2; v++) {
        for (size_t b = 0; b < 3; b++) {
            for (size_t i = 0; i < 3; i++) {
                for (int gs = 0; gs < 2; gs++) {
                    int values[4] = {v ? g.vmax : 1, blocks[b], ipts[i], gs};
                    tuner_schedule s = {0};
                    tuner__schedule_params(&s, 4, names, values);
                    ew_cfg c;
                    if (!cfg_of(op, a, &g, &s, &c))
                        continue;
                    /* A grid-stride loop over a single tile is the exact grid again. */
                    if (gs && c.tiles <= 1)
                        continue;
                    int r = tuner__space_push(items, n, "elementwise", 4, names, values);
                    if (r < 0)
                        return r;
                }
            }
        }
    }
    return 0;
}

typedef struct epi_ctx {
    const tuner_op *op;
    bool vector; /* operands pre-loaded into a<i>[e] / b<i> */
    const bool *contiguous;
} epi_ctx;

static char *epi_load(void *vctx, int i)
{
    epi_ctx *c = vctx;
    if (!c->vector) {
        tuner__bcast_ctx bc = {c->op, "row", "col"};
        return tuner__bcast_load(&bc, i);
    }
    char *e = malloc(64);
    if (e)
        snprintf(e, 64, c->contiguous[i] ? "a%d[e]" : "b%d", i);
    return e;
}

static int ew_generate(const tuner_op *op, const tuner_target *t, const tuner_schedule *s, tuner_program *p,
                       char **err)
{
    const tuner_arch *a = tuner__arch(t);
    ew_geo g = geo_of(op);
    ew_cfg c;
    if (!a || !cfg_of(op, a, &g, s, &c)) {
        *err = strdup("invalid parameters for elementwise");
        return -EINVAL;
    }
    const tuner_tensor *out = &op->output;
    bool contiguous[TUNER_MAX_INPUTS] = {false};
    for (int i = 0; i < op->n_inputs; i++)
        contiguous[i] = tuner__bcast_last_contiguous(&op->inputs[i], out);

    tuner_sb sb;
    tuner_sb_init(&sb);
    tuner_mapping m;
    const bool dyn = tuner_op_is_dynamic(op);
    const unsigned mask = tuner__sym_mask(out);
    if (dyn) {
        /* The vectors at launch: the output's elements over vec (vec divides every size). */
        char numel[96], nv[128];
        tuner__scaled_dims_expr(tuner_tensor_fixed_numel(out), mask, numel, sizeof(numel));
        if (c.vec > 1)
            snprintf(nv, sizeof(nv), "%s / %d", numel, c.vec);
        else
            snprintf(nv, sizeof(nv), "%s", numel);
        tuner__emit_tiles_begin_dyn(&sb, op, t->sm, "hd_elementwise", c.block, c.ipt, c.gs, nv, &m);
    } else {
        tuner__emit_tiles_begin(&sb, op, t->sm, "hd_elementwise", c.block, c.ipt, c.gs, c.tiles, c.nvec, &m);
    }
    epi_ctx ec = {op, c.vec > 1, contiguous};
    const char *OT = tuner__value_ctype(out->dtype);
    /* A chain that ends in a cast to the FP8 output leaves the rounding to the store, which
     * converts the same way (one conversion per element instead of three). */
    tuner_ew_chain chain = op->epilogue;
    if (tuner_dtype_is_fp8(out->dtype) && chain.n > 0 && chain.steps[chain.n - 1].kind == TUNER_EW_CAST &&
        chain.steps[chain.n - 1].dtype == out->dtype)
        chain.n--;
    if (c.vec > 1) {
        /* All elements of the vector share the row (vec divides the last dim). */
        if (out->rank == 1 && out->sym[0]) { /* one named row: vi is below its vectors */
            tuner_sb_printf(&sb, "const long long row = 0;\nconst long long col0 = vi * %d;\n", c.vec);
        } else if (out->rank >= 1 && out->sym[out->rank - 1]) { /* a named last axis: its vectors at launch */
            char le[96];
            tuner__axis_expr(out, out->rank - 1, le, sizeof(le));
            tuner_sb_printf(&sb, "const long long hd_lv = %s / %d;\n", le, c.vec);
            tuner_sb_printf(&sb, "const long long row = vi / hd_lv;\nconst long long col0 = (vi %% hd_lv) * %d;\n",
                            c.vec);
        } else {
            tuner_sb_printf(&sb, "const long long row = vi / %lldLL;\nconst long long col0 = (vi %% %lldLL) * %d;\n",
                            g.L / c.vec, g.L / c.vec, c.vec);
        }
        for (int i = 0; i < op->n_inputs; i++) {
            if (!g.used[i])
                continue;
            char *off = tuner__bcast_offset(&op->inputs[i], out, "row", contiguous[i] ? "col0" : "0");
            if (!off) {
                tuner_sb_free(&sb);
                return -ENOMEM;
            }
            const char *Ti = tuner__value_ctype(op->inputs[i].dtype);
            if (contiguous[i])
                tuner_sb_printf(&sb, "float a%d[%d];\nhd_ldn_f32<%s, %d>(in%d + %s, a%d);\n", i, c.vec, Ti, c.vec, i,
                                off, i);
            else
                tuner_sb_printf(&sb, "const float b%d = hd_f32(in%d[%s]);\n", i, i, off);
            free(off);
        }
        tuner_sb_printf(&sb, "float ov[%d];\n#pragma unroll\nfor (int e = 0; e < %d; e++) {\n", c.vec, c.vec);
        tuner_sb_printf(&sb, "float v = %s;\n", contiguous[0] ? "a0[e]" : "b0");
        tuner__emit_chain(&sb, op, &chain, "v", epi_load, &ec);
        tuner_sb_puts(&sb, "ov[e] = v;\n}\n");
        tuner_sb_printf(&sb, "hd_stn_f32<%s, %d>(out + vi * %d, ov);\n", OT, c.vec, c.vec);
    } else {
        char le[96];
        if (out->rank == 1 && out->sym[0]) /* one named row: vi is below its length */
            tuner_sb_puts(&sb, "const long long row = 0;\nconst long long col = vi;\n");
        else if (out->rank >= 1 && out->sym[out->rank - 1]) /* a named last axis: its length at launch */
            tuner_sb_printf(&sb, "const long long hd_l = %s;\nconst long long row = vi / hd_l;\n"
                                 "const long long col = vi %% hd_l;\n",
                            tuner__axis_expr(out, out->rank - 1, le, sizeof(le)));
        else
            tuner_sb_printf(&sb, "const long long row = vi / %lldLL;\nconst long long col = vi %% %lldLL;\n", g.L, g.L);
        char *off = tuner__bcast_offset(&op->inputs[0], out, "row", "col");
        if (!off) {
            tuner_sb_free(&sb);
            return -ENOMEM;
        }
        tuner_sb_printf(&sb, "float v = hd_f32(in0[%s]);\n", off);
        free(off);
        tuner__emit_chain(&sb, op, &chain, "v", epi_load, &ec);
        tuner_sb_printf(&sb, "out[vi] = hd_from_f32<%s>(v);\n", OT);
    }
    tuner__emit_tiles_end(&sb, &m);

    tuner__one_launch(p, op, "hd_elementwise", (unsigned)c.grid, (unsigned)c.block);
    if (dyn) {
        /* Tiles of block * ipt vectors over the launch's elements; grid-stride: at most a wave. */
        tuner_launch *l = &p->kernels[0];
        int r = tuner__launch_dim_args(l, op);
        if (r == 0)
            r = tuner__grid_rule(l, 0, op, mask, tuner_tensor_fixed_numel(out), (long long)c.vec * c.block * c.ipt, 1,
                                 c.gs ? c.wave : 0);
        if (r == 0 && (long long)l->grid[0] != c.grid)
            r = -EINVAL;
        if (r < 0) {
            tuner_sb_free(&sb);
            *err = strdup("elementwise: the launch's dims arguments or grid rule do not fit the op's sizes");
            return r;
        }
    }
    p->source = tuner_sb_take(&sb);
    p->output_dtype = out->dtype;
    return p->source ? 0 : -ENOMEM;
}

static double ew_predict(const tuner_op *op, const tuner_target *t, const tuner_schedule *s)
{
    const tuner_arch *a = tuner__arch(t);
    ew_geo g = geo_of(op);
    ew_cfg c;
    if (!a || !cfg_of(op, a, &g, s, &c))
        return 1e12;
    double bytes = (double)g.n * tuner_dtype_size(op->output.dtype);
    double inflight = 0;
    for (int i = 0; i < op->n_inputs; i++) {
        if (!g.used[i])
            continue;
        double numel = (double)tuner_tensor_numel(&op->inputs[i]);
        int sz = tuner_dtype_size(op->inputs[i].dtype);
        bytes += numel * sz;
        if (tuner__bcast_last_contiguous(&op->inputs[i], &op->output))
            inflight += (double)c.vec * sz;
    }
    if (inflight == 0)
        inflight = 4;
    inflight *= c.ipt;
    double eff = c.vec > 1 ? 1.0 : (tuner_dtype_size(op->output.dtype) == 2 ? 0.55 : 0.8);
    /* Index math (div/mod by constants per element) is cheap but not free without vectors. */
    /* Per element: load/convert/store, index math (div/mod by constants, per vector when
     * vectorised), and the chain's own work. */
    double instr = (double)g.n * (4.0 + (c.vec > 1 ? 2.0 : 12.0) + tuner__chain_instr(&op->epilogue));
    double us = tuner__mem_cost_us(a, bytes, (double)c.grid, c.block, inflight, 24 + 8 * c.ipt, 0, eff, instr);
    if (c.gs)
        us += 0.2; /* loop overhead, but no tail of tiny blocks */
    return us;
}

static int ew_preferred(const tuner_op *op, const tuner_target *t, tuner_schedule *ret)
{
    (void)t;
    ew_geo g = geo_of(op);
    ret->n_params = 4;
    ret->params[0].name = P_VEC;
    ret->params[0].value = g.vec_ok ? g.vmax : 1;
    ret->params[1].name = P_BLOCK;
    ret->params[1].value = 256;
    ret->params[2].name = P_IPT;
    ret->params[2].value = g.vec_ok ? 1 : 4;
    ret->params[3].name = P_GS;
    ret->params[3].value = 0;
    return 0;
}

const tuner_template tuner__elementwise = {
    .name = "elementwise",
    .space_signature = "elementwise v1: vec{1,16B of output (16 elements with an FP8 input read along rows)} block{128,256,512} "
                       "ipt{1,2,4} grid_stride{0,1}; "
                       "vec when last dim % vec == 0 and contiguous operands 16B-aligned",
    .applies = ew_applies,
    .enumerate = ew_enumerate,
    .generate = ew_generate,
    .predict_us = ew_predict,
    .preferred = ew_preferred,
    .default_rank = TUNER_RANK_CUDA_CORE,
    .dynamic_dims = true,
};
