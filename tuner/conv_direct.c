/* tuner/conv_direct.c - conv2d_direct: depthwise and small-group convolutions (NHWC), computed
 * directly instead of as an implicit GEMM.
 *
 * With fewer than 8 input channels per group a GEMM's reduction axis (C/groups * R * S) is too
 * short and its N axis (K/groups) too narrow for tensor-core tiles: the work is a stencil, and
 * memory-bound. Here a block owns KT consecutive output channels of BQ * TQ consecutive output
 * pixels of TP consecutive output rows (n, p0 .. p0 + TP - 1). Its weights are staged once in
 * shared memory as floats, tap-major ([R*S*cpg][KT]) so a thread reads its VEC channels of one
 * tap as one vector. A thread computes VEC consecutive channels of TQ pixels: each tap's weights
 * are read once and used for TQ pixels, and every input load is VEC channels wide (16 bytes when
 * the channels allow), so loads and stores are coalesced along the channels of NHWC. The epilogue runs per element and
 * results leave as VEC-wide stores. With TP > 1 (depthwise only) the thread walks the input rows
 * under its TP output rows once, each row's window feeding every output row it overlaps: with a
 * 3x3 filter and stride 1, 2 output rows read 4 input rows instead of 6, 4 read 6 instead of 12.
 * Such threads hold many accumulators and window values; `regs` 128 caps their registers
 * (__launch_bounds__ with the blocks per SM that leaves each thread 128), so that more blocks
 * share an SM: on an H100 a 144-channel layer's 140-register threads ran 10% faster capped.
 *
 * Applies to NHWC convolutions with fewer than 8 input channels per group and no prologue; the
 * GEMM templates take the rest. Its default outranks the tensor-core templates' for these ops
 * (TUNER_RANK_SPECIALISED), since they run them several times slower.
 */
#include "tuner/core.h"
#include "tuner/space.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const P_VEC = "vec";
static const char *const P_KT = "kt";
static const char *const P_BQ = "bq";
static const char *const P_TQ = "tq";
static const char *const P_TP = "tp";
static const char *const P_REGS = "regs";

#define REG_CAP 128 /* the registers per thread `regs` may ask for */

#define SMEM_LIMIT (48 * 1024) /* static shared memory, no attribute needed at launch */

/* Idle lanes (pixels or channels past the output's edge) also cost bandwidth: they hold
 * an SM's thread slots without loads in flight. The streaming rate scales by used^this, fitted
 * on H100 depthwise 3x3 layers: blocks with 44% of their lanes busy ran 25-30% slower than
 * full ones where the DRAM time alone said 0-10% (bench/results/2026-11-25-h100-model-ring and
 * 2026-11-25-h100-calibration-2). */
#define USED_BW_EXP 0.3

static bool direct_applies(const tuner_op *op, const tuner_target *t)
{
    if (op->kind != TUNER_OP_CONV2D || !tuner__arch(t) || op->attrs.conv2d.nchw || !tuner__no_prologue(op) ||
        op->n_anchor_inputs != 2 || op->inputs[0].rank != 4 || op->inputs[1].rank != 4)
        return false;
    tuner__conv_geo g = tuner__conv_geo_of(op);
    return g.cpg >= 1 && g.cpg < 8 && g.kpg >= 1 && g.P >= 1 && g.Q >= 1;
}

typedef struct direct_cfg {
    int vec, kt, bq, tq, tp;
    int span;       /* input columns under a thread's TQ pixels (its window, in channel vectors) */
    int rows_in;    /* input rows under a block's TP output rows, first to last */
    int min_blocks; /* __launch_bounds__'s blocks per SM: 0 none, else what caps at REG_CAP */
    long long qblocks, pblocks, ktiles, grid_x;
    unsigned threads;
    size_t smem;
} direct_cfg;

/* The widest vector of channels: 16 bytes of the output when depthwise (one input channel per
 * output channel, so input, weights and output channels line up) with K and both tensors'
 * alignment allowing it. */
static int vmax_of(const tuner_op *op, const tuner__conv_geo *g)
{
    int v = 16 / tuner_dtype_size(op->output.dtype);
    int vi = 16 / tuner_dtype_size(op->inputs[0].dtype);
    if (vi < v)
        v = vi;
    if (g->cpg != 1 || g->kpg != 1 || g->K % v != 0 || op->inputs[0].align < 16 || op->output.align < 16)
        return 1;
    return v;
}

static bool cfg_of(const tuner_op *op, const tuner_arch *a, const tuner__conv_geo *g, const tuner_schedule *s,
                   direct_cfg *c)
{
    c->vec = tuner_schedule_param(s, P_VEC, 1);
    c->kt = tuner_schedule_param(s, P_KT, 32);
    c->bq = tuner_schedule_param(s, P_BQ, 8);
    c->tq = tuner_schedule_param(s, P_TQ, 1);
    c->tp = tuner_schedule_param(s, P_TP, 1);
    if (c->vec != 1 && c->vec != vmax_of(op, g))
        return false;
    if (c->kt < 1 || c->kt % c->vec || c->bq < 1 || c->tq < 1 || c->tq > 8)
        return false;
    /* Several output rows per thread: depthwise (vector) paths only, at most 64 accumulators,
     * and only where the rows share input rows and there are rows to share. */
    if (c->tp != 1 && (c->tp < 1 || c->tp > 4 || c->vec == 1 || c->tp * c->tq * c->vec > 64 || g->P < c->tp ||
                       (long long)g->sh > (g->R - 1) * g->dh))
        return false;
    c->threads = (unsigned)(c->kt / c->vec) * (unsigned)c->bq;
    if (c->threads < 32 || c->threads > 512)
        return false;
    c->span = (c->tq - 1) * g->sw + (int)(g->S - 1) * g->dw + 1;
    c->rows_in = (c->tp - 1) * g->sh + (int)(g->R - 1) * g->dh + 1;
    /* A register cap: depthwise threads only, where their accumulators and input window (plus
     * about 24 for addresses) would take more, and where a whole number of blocks per SM above
     * one gives each thread REG_CAP (registers are allocated per warp). */
    const int regs = tuner_schedule_param(s, P_REGS, 0);
    c->min_blocks = 0;
    if (regs != 0) {
        const int want = c->tp * c->tq * c->vec + c->span * c->vec + 24;
        const int warps = (int)(c->threads + 31) / 32;
        c->min_blocks = a->regs_per_sm / (warps * 32 * REG_CAP);
        if (regs != REG_CAP || c->vec == 1 || want <= REG_CAP || c->min_blocks < 2)
            return false;
    }
    c->smem = (size_t)c->kt * (size_t)(g->R * g->S * g->cpg) * sizeof(float);
    if (c->smem > SMEM_LIMIT)
        return false;
    /* A channel tile much wider than K only idles threads. */
    if (c->kt > 32 && c->kt / 2 >= g->K)
        return false;
    if (c->kt > 256)
        return false;
    c->qblocks = (g->Q + (long long)c->bq * c->tq - 1) / ((long long)c->bq * c->tq);
    c->pblocks = (g->P + c->tp - 1) / c->tp;
    c->ktiles = (g->K + c->kt - 1) / c->kt;
    c->grid_x = g->N * c->pblocks * c->qblocks;
    return c->grid_x <= 0x7fffffffLL && c->ktiles <= 65535;
}

static int direct_enumerate(const tuner_op *op, const tuner_target *t, tuner_schedule **items, size_t *n)
{
    const tuner_arch *arch = tuner__arch(t);
    tuner__conv_geo g = tuner__conv_geo_of(op);
    int vmax = vmax_of(op, &g);
    /* Channel tiles: powers of two, and the tiles that split K evenly (K / d for a few d), so
     * that a K such as 144 or 960 leaves no block half idle. */
    int kts[12] = {8, 16, 32, 64, 128};
    size_t n_kt = 5;
    for (int d = 1; d <= 8 && n_kt < 12; d++)
        if (g.K % d == 0 && g.K / d <= 256 && g.K / d > 8 && ((g.K / d) & (g.K / d - 1)) != 0)
            kts[n_kt++] = (int)(g.K / d);
    static const int bqs[] = {2, 4, 8, 16, 32};
    static const int tqs[] = {1, 2, 4};
    static const int tps[] = {1, 2, 4};
    static const int regss[] = {0, REG_CAP};
    const char *names[6] = {P_VEC, P_KT, P_BQ, P_TQ, P_TP, P_REGS};
    for (int v = 0; v < 2; v++) {
        if (v && vmax == 1)
            continue;
        for (size_t a = 0; a < n_kt; a++)
            for (size_t b = 0; b < 5; b++)
                for (size_t c = 0; c < 3; c++)
                    for (size_t d = 0; d < 3; d++)
                        for (size_t e = 0; e < 2; e++) {
                            int values[6] = {v ? vmax : 1, kts[a], bqs[b], tqs[c], tps[d], regss[e]};
                            tuner_schedule s = {0};
                            tuner__schedule_params(&s, 6, names, values);
                            direct_cfg cfg;
                            if (!cfg_of(op, arch, &g, &s, &cfg))
                                continue;
                            int r = tuner__space_push(items, n, "conv2d_direct", 6, names, values);
                            if (r < 0)
                                return r;
                        }
    }
    return 0;
}

/* Depthwise: the input row at `xrow` under the thread's TQ pixels, loaded once as a window of
 * `span` channel vectors xw (zeros past the image's columns); each is then used by every tap and
 * pixel it overlaps ((TQ - 1) * stride + (S - 1) * dilation + 1 loads instead of S * TQ). */
static void emit_row_window(tuner_sb *sb, const tuner__conv_geo *g, const direct_cfg *c, const char *XT)
{
    tuner_sb_printf(sb, "  float xw[%d][%d];\n", c->span, c->vec);
    tuner_sb_printf(sb, "  const long long w0 = qbase * %d - %d;\n", g->sw, g->pw);
    tuner_sb_printf(sb, "#pragma unroll\n  for (int j = 0; j < %d; j++) {\n", c->span);
    tuner_sb_puts(sb, "    const long long wi = w0 + j;\n");
    tuner_sb_printf(sb, "    if (wi >= 0 && wi < %lldLL) hd_ldn_f32<%s, %d>(xrow + wi * %lldLL + cbase, xw[j]);\n", g->W,
                    XT, c->vec, g->C);
    tuner_sb_printf(sb, "    else {\n#pragma unroll\n      for (int e = 0; e < %d; e++) xw[j][e] = 0.0f; }\n  }\n", c->vec);
}

/* Depthwise: the taps of filter row `r` (an expression) applied to the window xw, into output
 * row u's accumulators. */
static void emit_row_taps(tuner_sb *sb, const tuner__conv_geo *g, const direct_cfg *c, const char *r, int u)
{
    tuner_sb_printf(sb, "#pragma unroll\n  for (int s = 0; s < %lld; s++) {\n", g->S);
    tuner_sb_printf(sb, "    const float *wt = ws + (%s * %lld + s) * %d + lane * %d;\n", r, g->S, c->kt, c->vec);
    tuner_sb_printf(sb, "    float wv[%d];\n#pragma unroll\n    for (int e = 0; e < %d; e++) wv[e] = wt[e];\n", c->vec,
                    c->vec);
    tuner_sb_printf(sb, "#pragma unroll\n    for (int t = 0; t < %d; t++)\n#pragma unroll\n"
                        "      for (int e = 0; e < %d; e++) acc[%d][t][e] += xw[t * %d + s * %d][e] * wv[e];\n",
                    c->tq, c->vec, u, g->sw, g->dw);
    tuner_sb_puts(sb, "  }\n");
}

/* The filter row through which input row j (counted from the first output row's top) feeds
 * output row u of a block, j = u * stride + r * dilation; -1 where it feeds none. */
static int filter_row(const tuner__conv_geo *g, int j, int u)
{
    const int rd = j - u * g->sh;
    return rd >= 0 && rd % g->dh == 0 && rd / g->dh < g->R ? rd / g->dh : -1;
}

/* Depthwise, TP output rows: each input row under them is loaded once (rows no output row uses
 * are skipped) and its window feeds every output row it overlaps (filter_row). */
static void emit_shared_rows(tuner_sb *sb, const tuner__conv_geo *g, const direct_cfg *c, const char *XT)
{
    for (int j = 0; j < c->rows_in; j++) {
        bool used = false;
        for (int u = 0; u < c->tp; u++)
            used = used || filter_row(g, j, u) >= 0;
        if (!used)
            continue;
        tuner_sb_printf(sb, "{\n  const long long h = p0 * %d - %d + %d;\n", g->sh, g->ph, j);
        tuner_sb_printf(sb, "  if (h >= 0 && h < %lldLL) {\n", g->H);
        tuner_sb_printf(sb, "  const %s *xrow = in0 + ((n * %lldLL + h) * %lldLL) * %lldLL;\n", XT, g->H, g->W, g->C);
        emit_row_window(sb, g, c, XT);
        for (int u = 0; u < c->tp; u++) {
            const int r = filter_row(g, j, u);
            if (r < 0)
                continue;
            char rs[16];
            snprintf(rs, sizeof(rs), "%d", r);
            emit_row_taps(sb, g, c, rs, u);
        }
        tuner_sb_puts(sb, "  }\n}\n");
    }
}

/* One output row: a loop over the filter rows, each input row's window (depthwise) or elements
 * (scalar paths) loaded where the row lies inside the image. */
static void emit_filter_rows(tuner_sb *sb, const tuner__conv_geo *g, const direct_cfg *c, const char *XT)
{
    tuner_sb_printf(sb, "for (int r = 0; r < %lld; r++) {\n", g->R);
    tuner_sb_printf(sb, "  const long long h = p0 * %d - %d + r * %d;\n", g->sh, g->ph, g->dh);
    tuner_sb_printf(sb, "  if (h < 0 || h >= %lldLL) continue;\n", g->H);
    tuner_sb_printf(sb, "  const %s *xrow = in0 + ((n * %lldLL + h) * %lldLL) * %lldLL;\n", XT, g->H, g->W, g->C);
    if (c->vec > 1) {
        emit_row_window(sb, g, c, XT);
        emit_row_taps(sb, g, c, "r", 0);
        tuner_sb_puts(sb, "}\n");
    } else {
        tuner_sb_printf(sb, "  for (int s = 0; s < %lld; s++) {\n", g->S);
        tuner_sb_printf(sb, "   for (int ci = 0; ci < %d; ci++) {\n", g->cpg);
        tuner_sb_printf(sb, "    const float wv = ws[((r * %lld + s) * %d + ci) * %d + lane];\n", g->S, g->cpg, c->kt);
        tuner_sb_printf(sb, "#pragma unroll\n    for (int t = 0; t < %d; t++) {\n", c->tq);
        tuner_sb_puts(sb, "      const long long q = qbase + t;\n");
        tuner_sb_printf(sb, "      const long long wi = q * %d - %d + s * %d;\n", g->sw, g->pw, g->dw);
        tuner_sb_printf(sb, "      if (q >= %lldLL || wi < 0 || wi >= %lldLL) continue;\n", g->Q, g->W);
        tuner_sb_printf(sb, "      acc[0][t][0] += hd_f32(xrow[wi * %lldLL + cbase + ci]) * wv;\n", g->C);
        tuner_sb_puts(sb, "    }\n   }\n  }\n}\n");
    }
}

static int direct_generate(const tuner_op *op, const tuner_target *t, const tuner_schedule *s, tuner_program *p,
                           char **err)
{
    tuner__conv_geo g = tuner__conv_geo_of(op);
    direct_cfg c;
    if (!tuner__arch(t) || !cfg_of(op, tuner__arch(t), &g, s, &c)) {
        *err = strdup("invalid parameters for conv2d_direct");
        return -EINVAL;
    }
    const long long taps = g.R * g.S * g.cpg;
    const int lanes = c.kt / c.vec; /* threads along the channels */
    const char *XT = tuner__ctype(op->inputs[0].dtype);
    const char *OT = tuner__ctype(op->output.dtype);
    tuner_sb sb;
    tuner_sb_init(&sb);
    tuner__prelude(&sb, t->sm);
    if (c.min_blocks)
        tuner_sb_printf(&sb, "extern \"C\" __global__ void __launch_bounds__(%u, %d) hd_conv2d_direct(", c.threads,
                        c.min_blocks);
    else
        tuner_sb_printf(&sb, "extern \"C\" __global__ void __launch_bounds__(%u) hd_conv2d_direct(", c.threads);
    tuner__emit_params(&sb, op, op->output.dtype);
    tuner_sb_puts(&sb, ")\n{\n");
    tuner_sb_printf(&sb, "__shared__ float ws[%lld * %d];\n", taps, c.kt);
    /* Which output rows, pixel block and channel tile. */
    tuner_sb_printf(&sb, "const long long qb = blockIdx.x %% %lldLL, np = blockIdx.x / %lldLL;\n", c.qblocks, c.qblocks);
    tuner_sb_printf(&sb, "const long long n = np / %lldLL, p0 = (np %% %lldLL) * %d;\n", c.pblocks, c.pblocks, c.tp);
    tuner_sb_printf(&sb, "const long long k0 = (long long)blockIdx.y * %d;\n", c.kt);
    /* Stage the tile's weights: ws[tap][kl] = w[k0 + kl][r][s][ci], tap = (r * S + s) * cpg + ci. */
    tuner_sb_printf(&sb, "for (int i = threadIdx.x; i < %lld; i += %u) {\n", taps * c.kt, c.threads);
    tuner_sb_printf(&sb, "  const int kl = i %% %d, tap = i / %d;\n", c.kt, c.kt);
    tuner_sb_printf(&sb, "  const long long k = k0 + kl;\n");
    tuner_sb_printf(&sb, "  ws[i] = k < %lldLL ? hd_f32(in1[k * %lldLL + tap]) : 0.0f;\n}\n", g.K, taps);
    tuner_sb_puts(&sb, "__syncthreads();\n");
    tuner_sb_printf(&sb, "const int lane = threadIdx.x %% %d, qi = threadIdx.x / %d;\n", lanes, lanes);
    tuner_sb_printf(&sb, "const long long k = k0 + (long long)lane * %d;\n", c.vec);
    tuner_sb_printf(&sb, "if (k >= %lldLL) return;\n", g.K);
    tuner_sb_printf(&sb, "const long long qbase = qb * %dLL + (long long)qi * %d;\n", c.bq * c.tq, c.tq);
    /* Input channel of output channel k (and of its vector, when depthwise). */
    tuner_sb_printf(&sb, "const long long cbase = (k / %d) * %d;\n", g.kpg, g.cpg);
    tuner_sb_printf(&sb, "float acc[%d][%d][%d];\n", c.tp, c.tq, c.vec);
    tuner_sb_printf(&sb, "#pragma unroll\nfor (int u = 0; u < %d; u++)\n#pragma unroll\nfor (int t = 0; t < %d; t++)\n"
                         "#pragma unroll\nfor (int e = 0; e < %d; e++) acc[u][t][e] = 0.0f;\n", c.tp, c.tq, c.vec);
    if (c.tp > 1)
        emit_shared_rows(&sb, &g, &c, XT);
    else
        emit_filter_rows(&sb, &g, &c, XT);
    /* Epilogue and store, per pixel of each output row. */
    tuner_sb_printf(&sb, "#pragma unroll\nfor (int u = 0; u < %d; u++) {\n", c.tp);
    tuner_sb_puts(&sb, "const long long p = p0 + u;\n");
    if (g.P % c.tp)
        tuner_sb_printf(&sb, "if (p >= %lldLL) break;\n", g.P);
    tuner_sb_printf(&sb, "#pragma unroll\nfor (int t = 0; t < %d; t++) {\n", c.tq);
    tuner_sb_puts(&sb, "  const long long q = qbase + t;\n");
    tuner_sb_printf(&sb, "  if (q >= %lldLL) break;\n", g.Q);
    tuner_sb_printf(&sb, "  const long long row = (n * %lldLL + p) * %lldLL + q;\n", g.P, g.Q);
    tuner_sb_printf(&sb, "  float ov[%d];\n", c.vec);
    tuner_sb_printf(&sb, "#pragma unroll\n  for (int e = 0; e < %d; e++) {\n", c.vec);
    tuner_sb_puts(&sb, "    const long long col = k + e;\n    (void)col;\n    float v = acc[u][t][e];\n");
    tuner__bcast_ctx ec = {op, "row", "col"};
    tuner__emit_chain(&sb, op, &op->epilogue, "v", tuner__bcast_load, &ec);
    tuner_sb_puts(&sb, "    ov[e] = v;\n  }\n");
    if (c.vec > 1)
        tuner_sb_printf(&sb, "  hd_stn_f32<%s, %d>(out + row * %lldLL + k, ov);\n", OT, c.vec, g.K);
    else
        tuner_sb_printf(&sb, "  out[row * %lldLL + k] = hd_from_f32<%s>(ov[0]);\n", g.K, OT);
    tuner_sb_puts(&sb, "}\n}\n}\n");

    tuner__one_launch(p, op, "hd_conv2d_direct", (unsigned)c.grid_x, c.threads);
    p->kernels[0].grid[1] = (unsigned)c.ktiles;
    p->source = tuner_sb_take(&sb);
    p->output_dtype = op->output.dtype;
    return p->source ? 0 : -ENOMEM;
}

static double direct_predict(const tuner_op *op, const tuner_target *t, const tuner_schedule *s)
{
    const tuner_arch *a = tuner__arch(t);
    tuner__conv_geo g = tuner__conv_geo_of(op);
    direct_cfg c;
    if (!a || !cfg_of(op, a, &g, s, &c))
        return 1e12;
    double outs = (double)(g.N * g.P * g.Q * g.K);
    /* Per input pixel a block reads the channels of its kt output channels, one contiguous run
     * (the whole pixel where kt covers all of K). DRAM is read in 64-byte granules: a shorter
     * run fetches the whole granule, and the channel tiles that share it (blockIdx.y) run far
     * apart, so the rest is fetched again. On an H100 this model's first picks for depthwise 3x3
     * layers, 8-channel tiles on wide pixel rows, ran 1.7-4.6x slower than the measured best
     * (bench/results/2026-11-25-h100-epilogue-inline). */
    const double run = (c.kt >= g.K ? (double)g.C : (double)c.kt * g.cpg / g.kpg) * tuner_dtype_size(op->inputs[0].dtype);
    const double in_fetch = c.kt >= g.K ? 1.0 : 64.0 * ceil(run / 64.0) / run;
    double bytes = (double)tuner_tensor_numel(&op->inputs[0]) * tuner_dtype_size(op->inputs[0].dtype) * in_fetch +
                   outs * tuner_dtype_size(op->output.dtype) +
                   /* every block stages its tile's weights */
                   (double)c.grid_x * (double)c.ktiles * (double)c.kt * (double)(g.R * g.S * g.cpg) *
                       tuner_dtype_size(op->inputs[1].dtype) * 0.25;
    for (int i = op->n_anchor_inputs; i < op->n_inputs; i++)
        bytes += (double)tuner_tensor_numel(&op->inputs[i]) * tuner_dtype_size(op->inputs[i].dtype);
    /* Halo: neighbouring pixel blocks re-read the columns their windows share, (S - 1) * dw + 1
     * - sw of them per block (one at stride 2 for a 3x3 filter, two at stride 1). */
    const double halo = fmax(0.0, (double)((g.S - 1) * g.dw + 1 - g.sw));
    bytes *= 1.0 + halo / (double)(c.bq * c.tq * g.sw + halo);
    double eff = c.vec > 1 ? 1.0 : (tuner_dtype_size(op->output.dtype) == 2 ? 0.45 : 0.7);
    double macs = outs * (double)(g.R * g.S * g.cpg);
    /* Input rows loaded per output row, relative to one per filter row: TP output rows share
     * theirs. */
    const double rows = c.tp > 1 ? (double)c.rows_in / c.tp : (double)g.R;
    /* Per MAC: an FMA, and (spread over TQ pixels) the weight load; per tap a bounds check and,
     * depthwise, the window loads. */
    /* Threads whose pixels, rows or channels lie past the output's edge issue with their warp
     * and load nothing: a 64-pixel row block on a 7-pixel row keeps 7 of 64 busy (H100,
     * depthwise 3x3 at 7x7 to 28x28: 1.4-3x slower than 8- or 16-pixel blocks). Lanes idle
     * throughout are those whose pixels or channels lie outside (lanes_used, which also costs
     * bandwidth: USED_BW_EXP); a thread's rows past the edge only shorten its work. */
    const double lanes_used = (double)g.Q / (double)(c.qblocks * c.bq * c.tq) * (double)g.K / (double)(c.ktiles * c.kt);
    const double used = lanes_used * (double)g.P / (double)(c.pblocks * c.tp);
    double instr = (macs * (1.0 + 1.0 / c.tq + (c.vec > 1 ? 0.4 * rows / (double)g.R : 2.0)) +
                    outs * (6.0 + tuner__chain_instr(&op->epilogue))) /
                   used;
    double us = tuner__mem_cost_us(a, bytes, (double)(c.grid_x * c.ktiles), (int)c.threads,
                                   (double)(c.vec * tuner_dtype_size(op->inputs[0].dtype) * c.tq * c.tp) * used,
                                   c.min_blocks ? REG_CAP : 32 + 2 * c.vec * c.tq * c.tp, (int)c.smem,
                                   eff * pow(lanes_used, USED_BW_EXP), instr);
    return us;
}

static int direct_preferred(const tuner_op *op, const tuner_target *t, tuner_schedule *ret)
{
    tuner__conv_geo g = tuner__conv_geo_of(op);
    int vmax = vmax_of(op, &g);
    int kt = vmax > 1 ? 64 : 32;
    while (kt > 8 && kt / 2 >= g.K)
        kt /= 2;
    int bq = (int)(256 / (kt / vmax));
    if (bq > 32)
        bq = 32;
    if (bq < 2)
        bq = 2;
    /* Depthwise rows wide enough take four pixels per thread: the input window is loaded once
     * for all of them. */
    int values[4] = {vmax, kt, bq, vmax > 1 && g.Q >= 16 ? 4 : 2};
    const char *names[4] = {P_VEC, P_KT, P_BQ, P_TQ};
    tuner__schedule_params(ret, 4, names, values);
    direct_cfg c;
    return cfg_of(op, tuner__arch(t), &g, ret, &c) ? 0 : -EINVAL;
}

const tuner_template tuner__conv2d_direct = {
    .name = "conv2d_direct",
    .space_signature = "conv2d_direct v3: vec{1,16B} kt{8..128} bq{2..32} tq{1,2,4} tp{1,2,4 (vec, rows "
                       "overlapping, <= 64 acc)} regs{0,128 (vec, where more would be taken and >= 2 "
                       "blocks/SM result)}; NHWC, cpg < 8, weights staged in shared memory tap-major",
    .applies = direct_applies,
    .enumerate = direct_enumerate,
    .generate = direct_generate,
    .predict_us = direct_predict,
    .preferred = direct_preferred,
    .default_rank = TUNER_RANK_SPECIALISED,
};
