/* tuner/pool.c - pool2d: max, average and adaptive average pooling (NHWC and NCHW).
 *
 * Pooling is memory-bound: every output element reads a small window of its input and the
 * windows of neighbouring outputs overlap (3x3 stride 2: each input element is read 2.25 times
 * on average, from L1/L2). The kernel walks the output in items of `vec` elements with the task
 * mapping repeat(ipt) * spatial(block) over threadIdx.x (tuner__emit_tiles_begin), so that
 * consecutive threads own consecutive items of the output's memory order:
 *  - NHWC: an item is `vec` consecutive channels of one output pixel; every window tap is one
 *    `vec`-wide load (16 bytes when C and the alignments allow), coalesced across the threads of
 *    a warp, which read neighbouring channel vectors of the same input pixel;
 *  - NCHW: an item is one output element (vec 1); neighbouring threads take neighbouring output
 *    columns of the same row, reading input columns `stride` apart.
 * The window is unrolled for max and avg (kernel sizes are constants); adaptive windows vary in
 * size and are looped. Sums are kept in fp32 and divided once, with PyTorch's divisor: for avg,
 * the window clipped to the padded input (ceil mode's last window may pass it) when
 * count_include_pad, else clipped to the input. Max keeps a NaN, as PyTorch does. Input 0's
 * prologue applies to every element loaded (never to padding), the epilogue to every result.
 *
 * Parameters: `vec` (1 or 16 bytes of channels, NHWC only), `block` (64, 128, 256 threads),
 * `ipt` (1, 2, 4 items per thread).
 */
#include "tuner/core.h"
#include "tuner/space.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const P_VEC = "vec";
static const char *const P_BLOCK = "block";
static const char *const P_IPT = "ipt";

typedef struct pool_geo {
    long long N, C, H, W, P, Q;
    int kh, kw, sh, sw, ph, pw, dh, dw;
    tuner_pool_kind kind;
    bool nchw, ceil_mode, include_pad;
    int vmax; /* the widest channel vector (NHWC), 1 where none applies */
} pool_geo;

static pool_geo geo_of(const tuner_op *op)
{
    const tuner_tensor *x = &op->inputs[0], *o = &op->output;
    const bool nchw = op->attrs.pool2d.nchw;
    pool_geo g = {
        .N = x->shape[0],
        .C = x->shape[nchw ? 1 : 3],
        .H = x->shape[nchw ? 2 : 1],
        .W = x->shape[nchw ? 3 : 2],
        .P = o->shape[nchw ? 2 : 1],
        .Q = o->shape[nchw ? 3 : 2],
        .kh = op->attrs.pool2d.kernel[0],
        .kw = op->attrs.pool2d.kernel[1],
        .sh = op->attrs.pool2d.stride[0],
        .sw = op->attrs.pool2d.stride[1],
        .ph = op->attrs.pool2d.pad[0],
        .pw = op->attrs.pool2d.pad[1],
        .dh = op->attrs.pool2d.dilation[0],
        .dw = op->attrs.pool2d.dilation[1],
        .kind = op->attrs.pool2d.kind,
        .nchw = nchw,
        .ceil_mode = op->attrs.pool2d.ceil_mode,
        .include_pad = op->attrs.pool2d.count_include_pad,
        .vmax = 1,
    };
    /* 16 bytes of channels where C, both tensors' alignment and every epilogue operand allow:
     * an operand is read per element (its broadcast offsets), so it only needs no alignment. */
    int v = 16 / tuner_dtype_size(x->dtype);
    int vo = 16 / tuner_dtype_size(o->dtype);
    if (vo < v)
        v = vo;
    if (!nchw && g.C % v == 0 && x->align >= 16 && o->align >= 16)
        g.vmax = v;
    return g;
}

static bool pool_applies(const tuner_op *op, const tuner_target *t)
{
    if (op->kind != TUNER_OP_POOL2D || !tuner__arch(t) || op->n_anchor_inputs != 1 || op->inputs[0].rank != 4 ||
        op->output.rank != 4 || !tuner__prologue_input0_only(op))
        return false;
    pool_geo g = geo_of(op);
    if (g.kind != TUNER_POOL_ADAPTIVE_AVG && (g.kh < 1 || g.kw < 1 || g.sh < 1 || g.sw < 1 || g.dh < 1 || g.dw < 1))
        return false;
    return g.P >= 1 && g.Q >= 1;
}

typedef struct pool_cfg {
    int vec, block, ipt;
    long long items, tiles;
} pool_cfg;

static bool cfg_of(const tuner_op *op, const pool_geo *g, const tuner_schedule *s, pool_cfg *c)
{
    c->vec = tuner_schedule_param(s, P_VEC, 1);
    c->block = tuner_schedule_param(s, P_BLOCK, 256);
    c->ipt = tuner_schedule_param(s, P_IPT, 1);
    if (c->vec != 1 && c->vec != g->vmax)
        return false;
    if (c->block != 64 && c->block != 128 && c->block != 256)
        return false;
    if (c->ipt != 1 && c->ipt != 2 && c->ipt != 4)
        return false;
    c->items = tuner_tensor_numel(&op->output) / c->vec;
    const long long per_block = (long long)c->block * c->ipt;
    c->tiles = (c->items + per_block - 1) / per_block;
    /* Several items per thread only where they still leave a block per SM's worth of tiles. */
    if (c->ipt > 1 && c->tiles < 64)
        return false;
    return c->tiles >= 1 && c->tiles <= 0x7fffffffLL;
}

static int pool_enumerate(const tuner_op *op, const tuner_target *t, tuner_schedule **items, size_t *n)
{
    (void)t;
    pool_geo g = geo_of(op);
    static const int blocks[] = {64, 128, 256};
    static const int ipts[] = {1, 2, 4};
    const char *names[3] = {P_VEC, P_BLOCK, P_IPT};
    for (int v = 0; v < 2; v++) {
        if (v && g.vmax == 1)
            continue;
        for (size_t b = 0; b < 3; b++)
            for (size_t i = 0; i < 3; i++) {
                int values[3] = {v ? g.vmax : 1, blocks[b], ipts[i]};
                tuner_schedule s = {0};
                tuner__schedule_params(&s, 3, names, values);
                pool_cfg c;
                if (!cfg_of(op, &g, &s, &c))
                    continue;
                int r = tuner__space_push(items, n, "pool2d", 3, names, values);
                if (r < 0)
                    return r;
            }
    }
    return 0;
}

/* Epilogue operands of the element (row, col) of the output, row-major over its last dim. */
static char *epi_load(void *vctx, int i)
{
    tuner__bcast_ctx bc = {vctx, "hd_row", "hd_col"};
    return tuner__bcast_load(&bc, i);
}

/* One window tap at input row `h`, column `w` (expressions, known inside the input): loads the
 * item's `vec` channels and folds them into acc. */
static void emit_tap(tuner_sb *sb, const tuner_op *op, const pool_geo *g, const pool_cfg *c, const char *XT)
{
    if (g->nchw)
        tuner_sb_printf(sb, "const long long xo = ((nc * %lldLL + h) * %lldLL + w);\n", g->H, g->W);
    else
        tuner_sb_printf(sb, "const long long xo = ((n * %lldLL + h) * %lldLL + w) * %lldLL + c0;\n", g->H, g->W, g->C);
    tuner_sb_printf(sb, "float xv[%d];\nhd_ldn_f32<%s, %d>(in0 + xo, xv);\n", c->vec, XT, c->vec);
    tuner_sb_printf(sb, "#pragma unroll\nfor (int e = 0; e < %d; e++) {\n", c->vec);
    if (op->prologue[0].n)
        tuner_sb_puts(sb, "const float v = hd_pro0(xv[e], xo + e);\n");
    else
        tuner_sb_puts(sb, "const float v = xv[e];\n");
    if (g->kind == TUNER_POOL_MAX)
        tuner_sb_puts(sb, "if (v > acc[e] || v != v) acc[e] = v;\n");
    else
        tuner_sb_puts(sb, "acc[e] += v;\n");
    tuner_sb_puts(sb, "}\n");
}

static int pool_generate(const tuner_op *op, const tuner_target *t, const tuner_schedule *s, tuner_program *p,
                         char **err)
{
    pool_geo g = geo_of(op);
    pool_cfg c;
    if (!tuner__arch(t) || !cfg_of(op, &g, s, &c)) {
        *err = strdup("invalid parameters for pool2d");
        return -EINVAL;
    }
    const char *XT = tuner__ctype(op->inputs[0].dtype);
    const char *OT = tuner__ctype(op->output.dtype);
    tuner_sb sb;
    tuner_sb_init(&sb);
    tuner_mapping m;
    tuner__emit_tiles_begin(&sb, op, t->sm, "hd_pool2d", c.block, c.ipt, false, c.tiles, c.items, &m);
    tuner__emit_input0_prologue(&sb, op);
    /* The item's coordinates, from the output's memory order. */
    if (g.nchw) {
        tuner_sb_printf(&sb, "const long long q = vi %% %lldLL, t1 = vi / %lldLL;\n", g.Q, g.Q);
        tuner_sb_printf(&sb, "const long long p = t1 %% %lldLL, nc = t1 / %lldLL;\n", g.P, g.P);
    } else {
        const long long cv = g.C / c.vec;
        tuner_sb_printf(&sb, "const long long c0 = (vi %% %lldLL) * %d, t1 = vi / %lldLL;\n", cv, c.vec, cv);
        tuner_sb_printf(&sb, "const long long q = t1 %% %lldLL, t2 = t1 / %lldLL;\n", g.Q, g.Q);
        tuner_sb_printf(&sb, "const long long p = t2 %% %lldLL, n = t2 / %lldLL;\n", g.P, g.P);
    }
    tuner_sb_printf(&sb, "float acc[%d];\n#pragma unroll\nfor (int e = 0; e < %d; e++) acc[e] = %s;\n", c.vec, c.vec,
                    g.kind == TUNER_POOL_MAX ? "-HD_INF" : "0.0f");
    if (g.kind == TUNER_POOL_ADAPTIVE_AVG) {
        /* PyTorch's start_index / end_index: floor(p H / P), ceil((p + 1) H / P). */
        tuner_sb_printf(&sb, "const long long h0 = (p * %lldLL) / %lldLL, h1 = ((p + 1) * %lldLL + %lldLL) / %lldLL;\n",
                        g.H, g.P, g.H, g.P - 1, g.P);
        tuner_sb_printf(&sb, "const long long w0 = (q * %lldLL) / %lldLL, w1 = ((q + 1) * %lldLL + %lldLL) / %lldLL;\n",
                        g.W, g.Q, g.W, g.Q - 1, g.Q);
        tuner_sb_puts(&sb, "for (long long h = h0; h < h1; h++)\nfor (long long w = w0; w < w1; w++) {\n");
        emit_tap(&sb, op, &g, &c, XT);
        tuner_sb_puts(&sb, "}\nconst float div = (float)((h1 - h0) * (w1 - w0));\n");
    } else {
        tuner_sb_printf(&sb, "const long long hs = p * %dLL - %d, ws = q * %dLL - %d;\n", g.sh, g.ph, g.sw, g.pw);
        tuner_sb_printf(&sb, "#pragma unroll\nfor (int i = 0; i < %d; i++) {\n", g.kh);
        tuner_sb_printf(&sb, "const long long h = hs + i * %d;\nif (h < 0 || h >= %lldLL) continue;\n", g.dh, g.H);
        tuner_sb_printf(&sb, "#pragma unroll\nfor (int j = 0; j < %d; j++) {\n", g.kw);
        tuner_sb_printf(&sb, "const long long w = ws + j * %d;\nif (w < 0 || w >= %lldLL) continue;\n", g.dw, g.W);
        emit_tap(&sb, op, &g, &c, XT);
        tuner_sb_puts(&sb, "}\n}\n");
        if (g.kind == TUNER_POOL_AVG) {
            /* The window clipped to the padded input, then (without count_include_pad) to the
             * input itself. */
            tuner_sb_printf(&sb, "const long long he = min(hs + %d, %lldLL), we = min(ws + %d, %lldLL);\n", g.kh,
                            g.H + g.ph, g.kw, g.W + g.pw);
            if (g.include_pad)
                tuner_sb_puts(&sb, "const float div = (float)((he - hs) * (we - ws));\n");
            else
                tuner_sb_printf(&sb,
                                "const float div = (float)((min(he, %lldLL) - max(hs, 0LL)) * "
                                "(min(we, %lldLL) - max(ws, 0LL)));\n",
                                g.H, g.W);
        }
    }
    /* The results: averaged, the epilogue per element, stored as one vector. */
    const long long last = g.nchw ? g.Q : g.C;
    tuner_sb_printf(&sb, "float ov[%d];\n#pragma unroll\nfor (int e = 0; e < %d; e++) {\n", c.vec, c.vec);
    tuner_sb_printf(&sb, "float v = acc[e]%s;\n", g.kind == TUNER_POOL_MAX ? "" : " / div");
    if (op->epilogue.n) {
        tuner_sb_printf(&sb, "const long long hd_oi = vi * %d + e;\n", c.vec);
        tuner_sb_printf(&sb, "const long long hd_row = hd_oi / %lldLL, hd_col = hd_oi %% %lldLL;\n", last, last);
        tuner_sb_puts(&sb, "(void)hd_row;\n(void)hd_col;\n");
        tuner__emit_chain(&sb, op, &op->epilogue, "v", epi_load, (void *)op);
    }
    tuner_sb_puts(&sb, "ov[e] = v;\n}\n");
    tuner_sb_printf(&sb, "hd_stn_f32<%s, %d>(out + vi * %d, ov);\n", OT, c.vec, c.vec);
    tuner__emit_tiles_end(&sb, &m);

    tuner__one_launch(p, op, "hd_pool2d", (unsigned)c.tiles, (unsigned)c.block);
    p->source = tuner_sb_take(&sb);
    p->output_dtype = op->output.dtype;
    return p->source ? 0 : -ENOMEM;
}

static double pool_predict(const tuner_op *op, const tuner_target *t, const tuner_schedule *s)
{
    const tuner_arch *a = tuner__arch(t);
    pool_geo g = geo_of(op);
    pool_cfg c;
    if (!a || !cfg_of(op, &g, s, &c))
        return 1e12;
    const double out_n = (double)tuner_tensor_numel(&op->output);
    const int xs = tuner_dtype_size(op->inputs[0].dtype);
    /* DRAM: the input once (overlapping windows hit in L1/L2) and the output; operands of the
     * epilogue once each. */
    double bytes = (double)tuner_tensor_numel(&op->inputs[0]) * xs + out_n * tuner_dtype_size(op->output.dtype);
    for (int i = 1; i < op->n_inputs; i++)
        bytes += (double)tuner_tensor_numel(&op->inputs[i]) * tuner_dtype_size(op->inputs[i].dtype);
    double taps;
    if (g.kind == TUNER_POOL_ADAPTIVE_AVG)
        taps = ((double)g.H / g.P + 1) * ((double)g.W / g.Q + 1);
    else
        taps = (double)g.kh * g.kw;
    /* Per element: the taps' compare/add and bounds tests, index math per item, the chains. */
    double instr = out_n * (taps * 3.0 + 4.0 + tuner__chain_instr(&op->epilogue) +
                            taps * tuner__chain_instr(&op->prologue[0])) +
                   (double)c.items * 14.0;
    double inflight = (double)c.vec * xs * c.ipt * (taps < 4 ? taps : 4);
    double eff = c.vec > 1 ? 1.0 : (g.nchw && g.sw > 1 ? 0.5 : (xs == 2 ? 0.55 : 0.8));
    return tuner__mem_cost_us(a, bytes, (double)c.tiles, c.block, inflight, 32 + 8 * c.vec, 0, eff, instr);
}

static int pool_preferred(const tuner_op *op, const tuner_target *t, tuner_schedule *ret)
{
    (void)t;
    pool_geo g = geo_of(op);
    ret->n_params = 3;
    ret->params[0].name = P_VEC;
    ret->params[0].value = g.vmax;
    ret->params[1].name = P_BLOCK;
    ret->params[1].value = 256;
    ret->params[2].name = P_IPT;
    ret->params[2].value = 1;
    return 0;
}

const tuner_template tuner__pool2d = {
    .name = "pool2d",
    .space_signature = "pool2d v1: vec{1,16B of channels, NHWC} block{64,128,256} ipt{1,2,4}; "
                       "ipt>1 only with >= 64 tiles; max/avg windows unrolled, adaptive looped",
    .applies = pool_applies,
    .enumerate = pool_enumerate,
    .generate = pool_generate,
    .predict_us = pool_predict,
    .preferred = pool_preferred,
    .default_rank = TUNER_RANK_CUDA_CORE,
};
