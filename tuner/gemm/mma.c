/* tuner/gemm/mma.c - matmul_mma and conv2d_mma: fp16/bf16 GEMM (and implicit-GEMM convolution) on
 * tensor cores with mma.sync.m16n8k16, fp32 accumulation.
 *
 * Structure of one thread block (task mappings in Hidet's sense):
 *  - tiles: the block owns a block_m x block_n output tile (grouped raster order over blockIdx.x),
 *    blockIdx.z = batch entry (or conv group) x split-K slice;
 *  - loads: repeat(iters) * spatial(threads) over the 16-byte chunks of the A and B tiles, so
 *    consecutive threads copy consecutive chunks (coalesced). Aligned operands without a prologue
 *    are copied with cp.async (16 B, .cg, zero-fill at edges) into a `stages`-deep ring; otherwise
 *    the copy goes global -> registers (prologue applied) -> shared, double-buffered;
 *  - shared tiles keep the global contiguous dimension contiguous and XOR-swizzle 16-byte chunks
 *    by row, so both the chunk writes and the ldmatrix reads are free of bank conflicts;
 *  - warps: spatial(warps_m, warps_n), each warp a warp_m x warp_n tile of m16n8k16 mma tiles,
 *    fragments loaded by ldmatrix.x4 (.trans for an operand stored M/N-contiguous) and double
 *    buffered across the k16 steps of a tile;
 *  - epilogue: accumulators -> fused epilogue chain -> convert -> store (paired when the output
 *    row allows), or, with stage_out, -> shared memory, then the whole tile written with 16-byte
 *    row-contiguous stores (measured on an H100: 4096x3072x768 63 -> 48 us, as the pair stores
 *    of a short-K tile are exposed; long-K tiles move by a few percent either way, so the tuner
 *    measures both); or, with split-K, raw fp32 partials to a workspace that a second kernel
 *    sums in a fixed order before applying the epilogue; or (split_cluster, sm_90+) the K slices
 *    of a tile form one thread-block cluster and sum their partials through distributed shared
 *    memory, in the same fixed order, inside the one launch (emit_cluster_reduce).
 *
 * FP8 matmuls (issue 41; sm_89 and later: tuner_arch.tc_fp8_tflops) run the same kernel on bytes:
 * A [M,K] and B [N,K] (trans_b), both K-major as 8-bit fragments need (ldmatrix transposes 16-bit
 * elements only), 16-byte rows. A k tile of block_k FP8 elements is block_k bytes per row, so the
 * f16 tile of half as many k elements has the same shared layout, swizzle and 16-byte cp.async
 * chunks; ldmatrix.x4 (non-transposed, b16) of a k32 step yields exactly the m16n8k32 .e4m3/.e5m2
 * fragments: each 32-bit register is 4 consecutive k of one row, A's a0..a3 = (row g, k 4t..),
 * (g + 8, k 4t..), (g, k 16 + 4t..), (g + 8, k 16 + 4t..) and B's b0, b1 = (col g, k 4t..),
 * (col g, k 16 + 4t..) (PTX ISA, "mma.m16n8k32" fragments; g = lane / 4, t = lane % 4), which is
 * the m16n8k16 f16 layout read in pairs of bytes; the accumulators are laid out as f16's. So per
 * k32 step the warp issues the ldmatrix of an f16 k16 step and one mma.sync.m16n8k32 per mma tile
 * (gm_mma_f8), which runs at twice the f16 rate on Ada. Scales (tensor, row, column) and a
 * quantizing cast are the epilogue's (tuner/gemm/common.c, every store path: direct, staged,
 * split-K workspace or cluster sums). Fast accumulation (attrs.matmul.fast_accum, the default)
 * keeps every k32 product in the fp32 accumulators; otherwise, and always with per-block scales,
 * block_k is 128 (one k tile per 128-k block) and each k tile's mma accumulate into a tile of
 * their own (gm_t, the first step overwriting it) that is then added (per-block: times sa[m][kb] *
 * sb[n / 128][kb], loaded at the tile's start) into the fp32 accumulators: the same sums
 * matmul_wgmma forms (emit_promoting_loop), at one FADD or FFMA per accumulator per 128 k. Whether
 * Ada's mma.sync keeps fewer bits in its fp32 accumulation of FP8 products than a plain fp32 sum
 * (as Hopper's FP8 wgmma does) is not documented; the verification tolerance is the wgmma one
 * (tuner_fp8_accum_loss), which bounds either.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/gemm/gemm.h"
#include "tuner/mapping.h"

typedef struct mma_cfg {
    int bm, bn, bk, wm, wn, stages, split, group;
    int warps_m, warps_n, threads;
    bool async;
    bool stage_out; /* epilogue through shared memory and 16-byte stores */
    bool split_cluster; /* split-K slices of a tile are one cluster, summed in shared memory */
    bool promote; /* FP8: each k tile (128 k) summed apart and added to the accumulators */
    int smem;
    int regs; /* estimate per thread */
} mma_cfg;

/* fp16/bf16 anywhere; FP8 (any mix but e5m2 x e5m2) where the target has FP8 mma.sync, for a
 * matmul whose A [M,K] and B [N,K] are K-major with 16-byte rows (tuner_fp8_unsupported refuses
 * the rest before a space is built). */
static bool mma_supported(const tuner__gemm_problem *p, const tuner_arch *a)
{
    /* A named N or K: fp16/bf16 only (FP8 operands are refused with names there, proto). */
    if (p->fp8 && tuner__gemm_names_nk(p))
        return false;
    /* (The quantize step's amax is matmul_wgmma's: tuner_fp8_unsupported.) */
    if (p->fp8)
        return a && a->tc_fp8_tflops > 0 && !p->conv && p->amax_in < 0 && p->kmajor[0] && p->kmajor[1] && p->vec[0] == 16 &&
               p->vec[1] == 16 && !(p->dt == TUNER_F8E5M2 && p->dt_b == TUNER_F8E5M2);
    return p->dt == TUNER_F16 || p->dt == TUNER_BF16;
}

/* Bytes per operand element: 2, or 1 for FP8. */
static int op_bytes(const tuner__gemm_problem *p)
{
    return tuner_dtype_size(p->dt);
}

/* k elements per mma step: 16 (m16n8k16), 32 for FP8 (m16n8k32); either is 32 bytes of a row. */
static int mma_k(const tuner__gemm_problem *p)
{
    return 32 / op_bytes(p);
}

/* Path: cp.async (4, 8 or 16 bytes per copy) needs at least 4-byte vectors on both operands and
 * no transformation on the way in; otherwise loads are staged through registers. */
static bool mma_async(const tuner__gemm_problem *p)
{
    return p->vec[0] >= 2 && p->vec[1] >= 2 && !p->prologue[0] && !p->prologue[1];
}

/* Loader geometry of one operand: the shared tile is rows x cols elements, cols contiguous. */
static void tile_geom(const tuner__gemm_problem *p, const mma_cfg *c, int which, int *rows, int *cols)
{
    int mn = which == 0 ? c->bm : c->bn;
    if (p->kmajor[which]) {
        *rows = mn;
        *cols = c->bk;
    } else {
        *rows = c->bk;
        *cols = mn;
    }
}

static int load_vec(const tuner__gemm_problem *p, const mma_cfg *c, int which)
{
    (void)c;
    return p->vec[which];
}

static int load_iters(const tuner__gemm_problem *p, const mma_cfg *c, int which)
{
    int rows, cols;
    tile_geom(p, c, which, &rows, &cols);
    return tuner__gemm_cdiv((long long)rows * cols / load_vec(p, c, which), c->threads);
}

/* The staged output tile: block_m rows of block_n output elements, each row padded by 16 bytes so
 * that the fragment-order writes (8 rows x 4 lanes per store) fall in distinct banks. */
static int out_row_bytes(const tuner__gemm_problem *p, const mma_cfg *c)
{
    return c->bn * tuner_dtype_size(p->out_dt) + 16;
}

static int out_stage_bytes(const tuner__gemm_problem *p, const mma_cfg *c)
{
    return c->bm * out_row_bytes(p, c);
}

static int cfg_from(const tuner__gemm_problem *p, const tuner_schedule *s, mma_cfg *c)
{
    memset(c, 0, sizeof(*c));
    c->bm = tuner_schedule_param(s, "block_m", 0);
    c->bn = tuner_schedule_param(s, "block_n", 0);
    c->bk = tuner_schedule_param(s, "block_k", 0);
    c->wm = tuner_schedule_param(s, "warp_m", 0);
    c->wn = tuner_schedule_param(s, "warp_n", 0);
    c->stages = tuner_schedule_param(s, "stages", 0);
    c->split = tuner_schedule_param(s, "split_k", 1);
    c->group = tuner_schedule_param(s, "swizzle", 1);
    const int stage_out = tuner_schedule_param(s, "stage_out", 0);
    const int split_cluster = tuner_schedule_param(s, "split_cluster", 0);
    if (c->bm < 16 || c->bn < 16 || c->wm < 16 || c->wn < 16 || c->bk < 16 || c->stages < 2 || c->split < 1 ||
        c->group < 1 || (stage_out != 0 && stage_out != 1) || (split_cluster != 0 && split_cluster != 1))
        return -EINVAL;
    c->stage_out = stage_out == 1;
    c->split_cluster = split_cluster == 1;
    if (c->wm % 16 || c->wn % 16 || c->bk % 16 || c->bm % c->wm || c->bn % c->wn)
        return -EINVAL;
    c->warps_m = c->bm / c->wm;
    c->warps_n = c->bn / c->wn;
    c->threads = 32 * c->warps_m * c->warps_n;
    c->async = mma_async(p);
    c->promote = p->promote;
    int stage_bytes = (c->bm + c->bn) * c->bk * op_bytes(p);
    c->smem = (c->async ? c->stages : 2) * stage_bytes;
    if (c->stage_out && out_stage_bytes(p, c) > c->smem)
        c->smem = out_stage_bytes(p, c);
    /* A cluster split-K block parks its fp32 partial tile in the ring. */
    if (c->split_cluster && c->bm * tuner__gemm_partial_row_bytes(c->bn) > c->smem)
        c->smem = c->bm * tuner__gemm_partial_row_bytes(c->bn);
    int mi = c->wm / 16, ni = c->wn / 8;
    c->regs = mi * ni * 4 + 2 * (mi * 4 + ni * 2) + 40;
    /* A promoted k tile's own accumulators, and per-block scales' per row pair. */
    if (c->promote)
        c->regs += mi * ni * 4 + (p->block_scales ? mi * 2 + 1 : 0);
    /* Register-staged units: one register per 4 bytes (at least one) plus their hoisted
     * addresses; cp.async addresses fit in the base estimate (measured: 245 for 128x256). */
    for (int w = 0; w < 2; w++)
        c->regs += c->async ? 0 : load_iters(p, c, w) * (2 + (load_vec(p, c, w) > 2 ? load_vec(p, c, w) / 2 : 1));
    return 0;
}

static bool cfg_valid(const tuner__gemm_problem *p, const tuner_arch *a, const mma_cfg *c)
{
    if (c->threads < 64 || c->threads > 512 || c->threads > a->max_threads_per_block)
        return false;
    if (c->smem > a->max_smem_per_block)
        return false;
    if (c->regs > a->max_regs_per_thread || (long)c->regs * c->threads > a->regs_per_sm)
        return false;
    if (!c->async && c->stages != 2)
        return false; /* register-staged loads are double-buffered: only stages=2 exists */
    if (c->async && (c->bk / mma_k(p)) % 2)
        return false; /* the pipelined loop alternates fragment buffers over an even step count */
    /* A promoted k tile is one 128-k block; per-block scales: each warp's columns in one 128-wide
     * n block (one B scale per warp and k tile). */
    if (c->promote && (c->bk != 128 || !c->async))
        return false;
    if (p->block_scales && ((c->bn % 128 && 128 % c->bn) || 128 % c->wn))
        return false;
    if (p->batch * c->split > 65535)
        return false;
    /* Staging needs whole 16-byte output chunks per row and a single K slice (split-K partials
     * go to the fp32 workspace). */
    if (c->stage_out && (!p->out_chunk || c->split != 1 || c->bn % p->out_chunk))
        return false;
    /* Cluster split-K: thread-block clusters exist from sm_90; 8 CTAs is the portable cluster
     * size; the partial tile splits into whole pairs per CTA. */
    if (c->split_cluster && (a->sm < 90 || c->split < 2 || c->split > 8 || c->bn % 2))
        return false;
    long long tiles = (long long)tuner__gemm_cdiv(p->M, c->bm) * tuner__gemm_cdiv(p->N, c->bn);
    if (tiles > 0x7fffffffLL)
        return false;
    /* A named N or K: one K slice (the slices' planes and chunks are fixed at generation), no
     * staged output tile (its rows are the launch's N); a named N's tile columns fit a grid's y
     * when M is named too (tuner__gemm_emit_raster). */
    if (tuner__gemm_names_nk(p) && (c->split != 1 || c->stage_out))
        return false;
    if (p->n_sym && p->m_sym && tuner__gemm_cdiv(p->N, c->bn) > 65535)
        return false;
    /* Chunks per shared row must divide the block so every thread keeps one chunk column. */
    for (int w = 0; w < 2; w++) {
        int rows, cols;
        tile_geom(p, c, w, &rows, &cols);
        int units = cols / load_vec(p, c, w);
        if (units > c->threads || c->threads % units)
            return false;
        (void)rows;
    }
    return true;
}

/* Swizzle of a shared tile with `cols` elements of p's operands per row: 16-byte chunk ^ ((row >>
 * sh) & mask). */
static void swz_params(const tuner__gemm_problem *p, int cols, int *rowb, int *sh, int *mask)
{
    *rowb = cols * op_bytes(p);
    int chunks = *rowb / 16;
    if (chunks >= 8) {
        *sh = 0;
        *mask = 7;
    } else if (chunks == 4) {
        *sh = 1;
        *mask = 3;
    } else if (chunks == 2) {
        *sh = 2;
        *mask = 1;
    } else {
        *sh = 0;
        *mask = 0;
    }
}

static const char *vec_type(int bytes)
{
    switch (bytes) {
    case 2:
        return "gm_u16";
    case 4:
        return "hd_u32";
    case 8:
        return "hd_v2";
    default:
        return "hd_v4";
    }
}

static const char *sts_name(int bytes)
{
    return bytes == 2 ? "gm_sts16" : bytes == 4 ? "gm_sts32" : bytes == 8 ? "gm_sts64" : "gm_sts128";
}

/* C expression of 16-bit element e of a register of `bytes` bytes named v, and the statement
 * that replaces it with `bits`. */
static void elem_expr(char *buf, size_t len, const char *v, int bytes, int e)
{
    static const char *const w[] = {"x", "y", "z", "w"};
    if (bytes == 2)
        snprintf(buf, len, "(unsigned)%s", v);
    else if (bytes == 4)
        snprintf(buf, len, "(%s %s)", v, e ? ">> 16" : "& 0xffffu");
    else
        snprintf(buf, len, "(%s.%s %s)", v, w[e / 2], e % 2 ? ">> 16" : "& 0xffffu");
}

static void elem_set(tuner_sb *sb, const char *v, int bytes, int e, const char *bits)
{
    static const char *const w[] = {"x", "y", "z", "w"};
    if (bytes == 2) {
        tuner_sb_printf(sb, "%s = (gm_u16)(%s);\n", v, bits);
        return;
    }
    char word[32];
    if (bytes == 4)
        snprintf(word, sizeof(word), "%s", v);
    else
        snprintf(word, sizeof(word), "%s.%s", v, w[e / 2]);
    if (e % 2)
        tuner_sb_printf(sb, "%s = (%s & 0xffffu) | ((hd_u32)(%s) << 16);\n", word, word, bits);
    else
        tuner_sb_printf(sb, "%s = (%s & 0xffff0000u) | (hd_u32)(%s);\n", word, word, bits);
}

/* Coordinates (mn, k) of element `e` of load unit (gm_row, gm_u) of operand `which`. */
static void unit_coords(const tuner__gemm_problem *p, int which, int v, int e, char *mn, size_t mnl, char *k,
                        size_t kl)
{
    const char *mn0 = which == 0 ? "gm_m0" : "gm_n0";
    if (p->kmajor[which]) {
        snprintf(mn, mnl, "%s + gm_row", mn0);
        snprintf(k, kl, "gm_kb + gm_u * %d + %d", v, e);
    } else {
        snprintf(mn, mnl, "%s + gm_u * %d + %d", mn0, v, e);
        snprintf(k, kl, "gm_kb + gm_row");
    }
}

static void emit_loader(tuner_sb *sb, const tuner__gemm_problem *p, const mma_cfg *c, int which, bool regs_load,
                        bool regs_store)
{
    int rows, cols, rowb, sh, mask;
    tile_geom(p, c, which, &rows, &cols);
    swz_params(p, cols, &rowb, &sh, &mask);
    const int v = load_vec(p, c, which);
    const int upr = cols / v, total = rows * upr, iters = load_iters(p, c, which);
    const char *X = which == 0 ? "a" : "b";
    const int tile_off = which == 0 ? 0 : c->bm * c->bk * 2;
    char mn[64], k[64], tmp[16];
    snprintf(tmp, sizeof(tmp), "gl%s%d", X, regs_store ? 1 : 0);
    tuner_mapping m = tuner_map_compose(tuner_map_repeat(1, iters, 1, 1), tuner_map_spatial(1, c->threads, 1, 1));
    const char *names[TUNER_MAP_MAX_RANK] = {"gm_q", NULL, NULL};
    tuner_sb_puts(sb, "{\nint gm_it = 0;\n");
    tuner_map_emit_begin(sb, &m, "threadIdx.x", tmp, names);
    tuner_sb_printf(sb, "if (gm_q < %d) {\nconst int gm_row = gm_q / %d, gm_u = gm_q %% %d;\n", total, upr, upr);
    /* Byte offset of the unit in the swizzled tile: 16-byte chunk (gm_u * v) / 8 of the row. */
    char dst[256];
    snprintf(dst, sizeof(dst),
             "gm_st + %d + gm_row * %d + ((((gm_u * %d) >> 3) ^ ((gm_row >> %d) & %d)) << 4) + ((gm_u * %d) & 7) * 2",
             tile_off, rowb, v, sh, mask, v);
    if (!regs_load && !regs_store) {
        unit_coords(p, which, v, 0, mn, sizeof(mn), k, sizeof(k));
        tuner__gemm_emit_operand(sb, p, which, "g", "gm_zb", mn, k, "gm_kend");
        tuner_sb_printf(sb, "gm_cp%d(%s, in%d + (g_ok ? g_off : 0), g_ok ? %d : 0);\n", v * 2, dst, which, v * 2);
    } else if (regs_load) {
        unit_coords(p, which, v, 0, mn, sizeof(mn), k, sizeof(k));
        tuner__gemm_emit_operand(sb, p, which, "g", "gm_zb", mn, k, "gm_kend");
        tuner_sb_printf(sb, "gm_r%s[gm_it] = g_ok ? *reinterpret_cast<const %s *>(in%d + g_off) : %s{};\n", X,
                        vec_type(v * 2), which, vec_type(v * 2));
    } else {
        tuner_sb_printf(sb, "%s gm_v = gm_r%s[gm_it];\n", vec_type(v * 2), X);
        if (p->prologue[which]) {
            for (int e = 0; e < v; e++) {
                char ex[64];
                tuner_sb_puts(sb, "{\n");
                unit_coords(p, which, v, e, mn, sizeof(mn), k, sizeof(k));
                tuner__gemm_emit_operand(sb, p, which, "g", "gm_zb", mn, k, "gm_kend");
                elem_expr(ex, sizeof(ex), "gm_v", v * 2, e);
                tuner_sb_printf(sb, "if (g_ok) {\nfloat gm_f = gm_%s_bits(%s);\n", p->dt == TUNER_F16 ? "f16" : "bf16",
                                ex);
                tuner__gemm_emit_prologue(sb, p, which, "g", "gm_f");
                char bits[48];
                snprintf(bits, sizeof(bits), "gm_bits_%s(gm_f)", p->dt == TUNER_F16 ? "f16" : "bf16");
                elem_set(sb, "gm_v", v * 2, e, bits);
                tuner_sb_puts(sb, "}\n}\n");
            }
        }
        tuner_sb_printf(sb, "%s(%s, gm_v);\n", sts_name(v * 2), dst);
    }
    tuner_sb_puts(sb, "}\ngm_it++;\n");
    tuner_map_emit_end(sb, &m);
    tuner_sb_puts(sb, "}\n");
}

/* Matmul operands are affine in (mn, k): the cp.async loader keeps one base pointer per thread
 * and per operand and reaches unit `it` (rows it * rows_per_pass further) and tile kt by
 * compile-time strides, so a copy costs a compare, a 64-bit add and a select. With setup, emits
 * the per-thread constants (kernel scope); else the body of gm_load_<x>(gm_st, gm_kt). */
enum { AFF_SETUP, AFF_CP_ASYNC, AFF_REG_LOAD, AFF_REG_STORE };

/* Element strides of mn, k and the batch (group) in operands that are affine in them: both
 * matmul operands (A [M,K] / [K,M]; B [K,N] / [N,K]) and convolution weights ([K/g][R*S*C/g] per
 * group, k in memory order). */
static bool affine_operand(const tuner__gemm_problem *p, int which)
{
    /* (a named N or K makes a row stride the launch's: per-unit coordinates, emit_loader) */
    return (!p->conv || which == 1) && !tuner__gemm_names_nk(p);
}

static void affine_strides(const tuner__gemm_problem *p, int which, long long *mn_stride, long long *k_stride,
                           long long *bstride)
{
    if (p->conv) {
        *mn_stride = p->K;
        *k_stride = 1;
        *bstride = p->cgk * p->K;
        return;
    }
    const bool trans = which == 0 ? p->trans_a : p->trans_b;
    const bool batched = which == 0 ? p->a_batched : p->b_batched;
    *mn_stride = which == 0 ? (trans ? 1 : p->K) : (trans ? p->K : 1);
    *k_stride = which == 0 ? (trans ? p->M : 1) : (trans ? 1 : p->N);
    *bstride = !batched ? 0 : which == 0 ? p->M * p->K : p->K * p->N;
}

/* NHWC convolution input (kmajor, channels contiguous) for the cp.async path: each thread keeps,
 * per unit row (an output pixel m), the image base pointer and the top-left input coordinate;
 * per tile it decodes its k column (r, s, c) once, and each unit checks the padded window and
 * copies. With setup, emits the per-thread constants; else the body of gm_load_a. */
static void emit_im2col_loader(tuner_sb *sb, const tuner__gemm_problem *p, const mma_cfg *c, bool setup)
{
    int rows, cols, rowb, sh, mask;
    tile_geom(p, c, 0, &rows, &cols);
    swz_params(p, cols, &rowb, &sh, &mask);
    const int v = load_vec(p, c, 0), upr = cols / v, rpp = c->threads / upr;
    const int iters = (rows + rpp - 1) / rpp;
    const bool same_swz = mask == 0 || rpp % (8 << sh) == 0;
    if (setup) {
        tuner_sb_printf(sb, "const int a_r0 = threadIdx.x / %d, a_u = threadIdx.x %% %d;\n", upr, upr);
        tuner_sb_printf(sb, "const hd_u32 a_s0 = a_r0 * %d + ((((a_u * %d) >> 3) ^ ((a_r0 >> %d) & %d)) << 4) + "
                            "((a_u * %d) & 7) * 2;\n",
                        rowb, v, sh, mask, v);
        tuner_sb_printf(sb, "int a_h0[%d], a_w0[%d];\nconst %s *a_base[%d];\n", iters, iters, tuner__ctype(p->dt), iters);
        tuner_sb_printf(sb,
                        "#pragma unroll\nfor (int it = 0; it < %d; it++) {\n"
                        "const int m = gm_m0 + a_r0 + it * %d;\n"
                        "const int nb = m / %lld, pp = (m / %lld) %% %lld, qq = m %% %lld;\n"
                        /* A pixel past M gets a window that is never inside the image. */
                        "a_h0[it] = m < %lld ? pp * %d - %d : -(1 << 29);\n"
                        "a_w0[it] = qq * %d - %d;\n"
                        "a_base[it] = in0 + (long long)(m < %lld ? nb : 0) * %lldLL + (long long)gm_zb * %lld;\n}\n",
                        iters, rpp, p->cp * p->cq, p->cq, p->cp, p->cq, p->M, p->sh, p->ph, p->sw, p->pw, p->M,
                        p->ch * p->cw * p->cc, p->cgc);
        return;
    }
    tuner_sb_printf(sb,
                    "const int gm_k = gm_kb + a_u * %d;\nconst bool gm_kok = gm_k < gm_kend;\n"
                    "const int gm_c = gm_k %% %lld, gm_rs = gm_k / %lld;\n"
                    "const int gm_dh = (gm_rs / %lld) * %d, gm_dw = (gm_rs %% %lld) * %d;\n",
                    v, p->cgc, p->cgc, p->cs, p->dh, p->cs, p->dw);
    for (int it = 0; it < iters; it++) {
        const int r = it * rpp;
        tuner_sb_puts(sb, "{\n");
        const bool guard = rows % rpp != 0 && r + rpp > rows;
        if (guard)
            tuner_sb_printf(sb, "if (a_r0 + %d < %d) {\n", r, rows);
        tuner_sb_printf(sb,
                        "const int h = a_h0[%d] + gm_dh, w = a_w0[%d] + gm_dw;\n"
                        "const bool ok = gm_kok && (unsigned)h < %lldu && (unsigned)w < %lldu;\n",
                        it, it, p->ch, p->cw);
        if (same_swz)
            tuner_sb_printf(sb, "const hd_u32 dst = gm_st + a_s0 + %d;\n", r * rowb);
        else
            tuner_sb_printf(sb,
                            "const int rr = a_r0 + %d;\nconst hd_u32 dst = gm_st + rr * %d + ((((a_u * %d) >> 3) ^ "
                            "((rr >> %d) & %d)) << 4) + ((a_u * %d) & 7) * 2;\n",
                            r, rowb, v, sh, mask, v);
        tuner_sb_printf(sb, "gm_cp%d(dst, ok ? a_base[%d] + ((long long)(h * %lld + w) * %lld + gm_c) : in0, ok ? %d : 0);\n",
                        v * 2, it, p->cw, p->cc, v * 2);
        if (guard)
            tuner_sb_puts(sb, "}\n");
        tuner_sb_puts(sb, "}\n");
    }
}

static void emit_affine_loader(tuner_sb *sb, const tuner__gemm_problem *p, const mma_cfg *c, int which, int mode)
{
    int rows, cols, rowb, sh, mask;
    tile_geom(p, c, which, &rows, &cols);
    swz_params(p, cols, &rowb, &sh, &mask);
    const int v = load_vec(p, c, which), upr = cols / v, rpp = c->threads / upr;
    const int iters = (rows + rpp - 1) / rpp;
    const char *X = which == 0 ? "a" : "b";
    const bool km = p->kmajor[which];
    tuner__gemm_x lim = tuner__gemm_M(p, 0);
    if (which != 0)
        snprintf(lim.s, sizeof(lim.s), "%lld", p->N);
    long long mn_stride, k_stride, bstride;
    affine_strides(p, which, &mn_stride, &k_stride, &bstride);
    const int tile_off = which == 0 ? 0 : c->bm * c->bk * op_bytes(p);
    const long long it_delta = (long long)rpp * (km ? mn_stride : k_stride);
    /* A unit's 16-byte chunk in its row and its first byte in the chunk, from its first
     * element's index u * v: 8 or 16 elements per chunk. */
    const int esz = op_bytes(p);
    const char *chunk_sh = esz == 1 ? "4" : "3", *in_chunk = esz == 1 ? "& 15)" : "& 7) * 2";
    /* Row r0 + it * rpp has the swizzle of r0 when rpp spans whole swizzle periods. */
    const bool same_swz = mask == 0 || rpp % (8 << sh) == 0;
    if (mode == AFF_SETUP) {
        /* Unit (row r0 + it * rpp, column u): kmajor rows are mn, columns k; else the reverse. */
        tuner_sb_printf(sb, "const int %s_r0 = threadIdx.x / %d, %s_u = threadIdx.x %% %d;\n", X, upr, X, upr);
        if (km)
            tuner_sb_printf(sb, "const int %s_mn = gm_%s0 + %s_r0, %s_kl = %s_u * %d;\n", X, which == 0 ? "m" : "n", X,
                            X, X, v);
        else
            tuner_sb_printf(sb, "const int %s_mn = gm_%s0 + %s_u * %d, %s_kl = %s_r0;\n", X, which == 0 ? "m" : "n", X,
                            v, X, X);
        tuner_sb_printf(sb,
                        "const %s *%s_p0 = in%d + (long long)gm_zb * %lldLL + (long long)%s_mn * %lldLL + "
                        "(long long)(gm_kbeg + %s_kl) * %lldLL;\n",
                        tuner__ctype(p->dt), X, which, bstride, X, mn_stride, X, k_stride);
        /* kmajor: unit it is in range while it * rpp < mnrem; else the column is all in or out. */
        if (km)
            tuner_sb_printf(sb, "const int %s_mnrem = %s - %s_mn;\n", X, lim.s, X);
        else
            tuner_sb_printf(sb, "const bool %s_mnok = %s_mn < %s;\n", X, X, lim.s);
        tuner_sb_printf(sb, "const hd_u32 %s_s0 = %d + %s_r0 * %d + ((((%s_u * %d) >> %s) ^ ((%s_r0 >> %d) & %d)) << 4) + "
                            "((%s_u * %d) %s;\n",
                        X, tile_off, X, rowb, X, v, chunk_sh, X, sh, mask, X, v, in_chunk);
        return;
    }
    if (mode != AFF_REG_STORE) {
        tuner_sb_printf(sb, "const int gm_rem = gm_kend - gm_kb;\nconst long long gm_adv = (long long)gm_kt * %lldLL;\n",
                        (long long)c->bk * k_stride);
        if (km)
            tuner_sb_printf(sb, "const bool gm_kok = %s_kl < gm_rem;\n", X);
    }
    for (int it = 0; it < iters; it++) {
        const int r = it * rpp;
        tuner_sb_puts(sb, "{\n");
        if (rows % rpp != 0 && r + rpp > rows)
            tuner_sb_printf(sb, "if (%s_r0 + %d < %d) {\n", X, r, rows);
        if (mode == AFF_REG_STORE)
            ;
        else if (km)
            tuner_sb_printf(sb, "const bool ok = gm_kok && %d < %s_mnrem;\n", r, X);
        else
            tuner_sb_printf(sb, "const bool ok = %s_mnok && %s_kl + %d < gm_rem;\n", X, X, r);
        if (mode == AFF_REG_LOAD)
            tuner_sb_printf(sb, "gm_r%s[%d] = ok ? *reinterpret_cast<const %s *>(%s_p0 + (gm_adv + %lldLL)) : %s{};\n", X,
                            it, vec_type(v * 2), X, it * it_delta, vec_type(v * 2));
        else if (same_swz)
            tuner_sb_printf(sb, "const hd_u32 dst = gm_st + %s_s0 + %d;\n", X, r * rowb);
        else
            tuner_sb_printf(sb,
                            "const int rr = %s_r0 + %d;\nconst hd_u32 dst = gm_st + %d + rr * %d + ((((%s_u * %d) >> %s) ^ "
                            "((rr >> %d) & %d)) << 4) + ((%s_u * %d) %s;\n",
                            X, r, tile_off, rowb, X, v, chunk_sh, sh, mask, X, v, in_chunk);
        if (mode == AFF_CP_ASYNC)
            tuner_sb_printf(sb, "gm_cp%d(dst, ok ? %s_p0 + (gm_adv + %lldLL) : in%d, ok ? %d : 0);\n", v * esz, X,
                            it * it_delta, which, v * esz);
        else if (mode == AFF_REG_STORE)
            tuner_sb_printf(sb, "%s(dst, gm_r%s[%d]);\n", sts_name(v * 2), X, it);
        if (rows % rpp != 0 && r + rpp > rows)
            tuner_sb_puts(sb, "}\n");
        tuner_sb_puts(sb, "}\n");
    }
}

/* ldmatrix addressing of one operand's fragments: per-lane row/chunk parts and swizzle. */
static void emit_frag_setup(tuner_sb *sb, const tuner__gemm_problem *p, const mma_cfg *c, int which)
{
    int rows, cols, rowb, sh, mask;
    tile_geom(p, c, which, &rows, &cols);
    swz_params(p, cols, &rowb, &sh, &mask);
    const char *X = which == 0 ? "a" : "b";
    const char *r_lane, *c_lane;
    if (which == 0) {
        /* A (m16 x k16): matrices (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15). */
        r_lane = p->kmajor[0] ? "(lane & 15)" : "(((lane >> 4) << 3) + (lane & 7))";
        c_lane = p->kmajor[0] ? "(lane >> 4)" : "((lane >> 3) & 1)";
    } else {
        /* B (k16 x n16 = two n8 blocks): (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15). */
        r_lane = p->kmajor[1] ? "(((lane >> 4) << 3) + (lane & 7))" : "((((lane >> 3) & 1) << 3) + (lane & 7))";
        c_lane = p->kmajor[1] ? "((lane >> 3) & 1)" : "(lane >> 4)";
    }
    tuner_sb_printf(sb, "const int f%s_r = %s, f%s_c = %s, f%s_x = (f%s_r >> %d) & %d;\n", X, r_lane, X, c_lane, X, X,
                    sh, mask);
    (void)rows;
}

/* Emits the fragment loads of k16 step kk into buffer buf. */
static void emit_frag_load(tuner_sb *sb, const tuner__gemm_problem *p, const mma_cfg *c, int which, int kk, int buf,
                           const char *base)
{
    int rows, cols, rowb, sh, mask;
    tile_geom(p, c, which, &rows, &cols);
    swz_params(p, cols, &rowb, &sh, &mask);
    const int tile_off = which == 0 ? 0 : c->bm * c->bk * op_bytes(p);
    const bool km = p->kmajor[which];
    /* A fragments are row-major over (m, k): kmajor storage reads them as stored, M-contiguous
     * storage needs the transpose. B fragments are "column-major" (k pairs per register): the
     * other way round. */
    const bool trans = !km;
    const char *ld = trans ? "gm_ldsm4t" : "gm_ldsm4";
    if (which == 0) {
        int mi = c->wm / 16;
        tuner_sb_printf(sb, "#pragma unroll\nfor (int i = 0; i < %d; i++) ", mi);
        if (km)
            tuner_sb_printf(sb, "%s(fa[%d][i], %s + %d + (gm_wm * %d + i * 16 + fa_r) * %d + (((%d + fa_c) ^ fa_x) << 4));\n",
                            ld, buf, base, tile_off, c->wm, rowb, kk * 2);
        else
            tuner_sb_printf(sb, "%s(fa[%d][i], %s + %d + (%d + fa_r) * %d + (((gm_wm * %d + i * 2 + fa_c) ^ fa_x) << 4));\n",
                            ld, buf, base, tile_off, kk * 16, rowb, c->wm / 8);
    } else {
        int nj = c->wn / 16;
        tuner_sb_printf(sb, "#pragma unroll\nfor (int j = 0; j < %d; j++) ", nj);
        if (km)
            tuner_sb_printf(sb, "%s(fb[%d][j], %s + %d + (gm_wn * %d + j * 16 + fb_r) * %d + (((%d + fb_c) ^ fb_x) << 4));\n",
                            ld, buf, base, tile_off, c->wn, rowb, kk * 2);
        else
            tuner_sb_printf(sb, "%s(fb[%d][j], %s + %d + (%d + fb_r) * %d + (((gm_wn * %d + j * 2 + fb_c) ^ fb_x) << 4));\n",
                            ld, buf, base, tile_off, kk * 16, rowb, c->wn / 8);
    }
}

/* The mma of one k step (kk of the tile) from fragment buffer buf: into the accumulators, or with
 * promotion into the k tile's own (gm_t), which the tile's first step overwrites. */
static void emit_mma_batch(tuner_sb *sb, const tuner__gemm_problem *p, const mma_cfg *c, int buf, int kk)
{
    if (p->fp8)
        tuner_sb_printf(sb,
                        "#pragma unroll\nfor (int i = 0; i < %d; i++)\n#pragma unroll\nfor (int j = 0; j < %d; j++)\n"
                        "gm_mma_f8%s(%s[i][j], fa[%d][i], &fb[%d][j >> 1][(j & 1) * 2]);\n",
                        c->wm / 16, c->wn / 8, c->promote && kk == 0 ? "_z" : "", c->promote ? "gm_t" : "acc", buf,
                        buf);
    else
        tuner_sb_printf(sb,
                        "#pragma unroll\nfor (int i = 0; i < %d; i++)\n#pragma unroll\nfor (int j = 0; j < %d; j++)\n"
                        "hd_mma_%s_16816(acc[i][j], fa[%d][i], &fb[%d][j >> 1][(j & 1) * 2]);\n",
                        c->wm / 16, c->wn / 8, p->dt == TUNER_F16 ? "f16" : "bf16", buf, buf);
}

/* The FP8 mma.sync wrappers: gm_mma_f8 d += A * B, gm_mma_f8_z d = A * B (a zero C), m16n8k32
 * with A's and B's formats, fp32 accumulation. */
static void emit_fp8_mma_fns(tuner_sb *sb, const tuner__gemm_problem *p)
{
    const char *ta = p->dt == TUNER_F8E4M3 ? "e4m3" : "e5m2", *tb = p->dt_b == TUNER_F8E4M3 ? "e4m3" : "e5m2";
    tuner_sb_printf(sb,
                    "HD_INLINE void gm_mma_f8(float *d, const hd_u32 *a, const hd_u32 *b) { "
                    "asm volatile(\"mma.sync.aligned.m16n8k32.row.col.f32.%s.%s.f32 {%%0,%%1,%%2,%%3}, {%%4,%%5,%%6,%%7}, "
                    "{%%8,%%9}, {%%0,%%1,%%2,%%3};\" : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3]) : "
                    "\"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1])); }\n",
                    ta, tb);
    if (p->promote)
        tuner_sb_printf(sb,
                        "HD_INLINE void gm_mma_f8_z(float *d, const hd_u32 *a, const hd_u32 *b) { "
                        "asm volatile(\"mma.sync.aligned.m16n8k32.row.col.f32.%s.%s.f32 {%%0,%%1,%%2,%%3}, "
                        "{%%4,%%5,%%6,%%7}, {%%8,%%9}, {%%10,%%10,%%10,%%10};\" : \"=f\"(d[0]), \"=f\"(d[1]), "
                        "\"=f\"(d[2]), \"=f\"(d[3]) : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), "
                        "\"r\"(b[0]), \"r\"(b[1]), \"f\"(0.0f)); }\n",
                        ta, tb);
}

/* Promotion of an FP8 k tile (c->promote; one 128-k block, cfg_valid): before the tile's first
 * step, per-block scales load the tile's sa of each of the thread's rows (clamped into M) times
 * its warp's sb (gm_bs; their latency hides behind the tile's mma); after its last, gm_t is
 * added to the accumulators, scaled by them. The k block of tile kt is gm_kbeg / 128 + kt. */
static void emit_promote_scales(tuner_sb *sb, const tuner__gemm_problem *p, const mma_cfg *c)
{
    if (!p->block_scales)
        return;
    const long long kb = tuner__gemm_cdiv(p->K, 128);
    tuner_sb_printf(sb,
                    "float gm_bs[%d][2];\n{\nconst int gm_kb = gm_kbeg / 128 + kt;\n"
                    "const float gm_sbv = __ldg(gm_sbp + gm_kb);\n"
                    "#pragma unroll\nfor (int i = 0; i < %d; i++)\n#pragma unroll\nfor (int h = 0; h < 2; h++)\n"
                    "gm_bs[i][h] = __ldg(in%d + (long long)min(gm_sr + i * 16 + h * 8, %s) * %lldLL + gm_kb) * gm_sbv;\n}\n",
                    c->wm / 16, c->wm / 16, p->bsa_in, tuner__gemm_M(p, -1).s, kb);
}

static void emit_promote_add(tuner_sb *sb, const tuner__gemm_problem *p, const mma_cfg *c)
{
    tuner_sb_printf(sb,
                    "#pragma unroll\nfor (int i = 0; i < %d; i++)\n#pragma unroll\nfor (int j = 0; j < %d; j++)\n"
                    "#pragma unroll\nfor (int e = 0; e < 4; e++) %s\n",
                    c->wm / 16, c->wn / 8,
                    p->block_scales ? "acc[i][j][e] = fmaf(gm_t[i][j][e], gm_bs[i][e >> 1], acc[i][j][e]);"
                                    : "acc[i][j][e] += gm_t[i][j][e];");
}

/* Per-thread constants of the promotion: the tile of its own and, for per-block scales, the first
 * of the thread's rows and its warp's row of B's scales (its n block clamped into the scales). */
static void emit_promote_setup(tuner_sb *sb, const tuner__gemm_problem *p, const mma_cfg *c)
{
    tuner_sb_printf(sb, "float gm_t[%d][%d][4];\n", c->wm / 16, c->wn / 8);
    if (p->block_scales)
        tuner_sb_printf(sb,
                        "const int gm_sr = gm_m0 + gm_wm * %d + (lane >> 2);\n"
                        "const float *const gm_sbp = in%d + (long long)min((gm_n0 + gm_wn * %d) >> 7, %lld) * %lldLL;\n",
                        c->wm, p->bsb_in, c->wn, tuner__gemm_cdiv(p->N, 128) - 1, tuner__gemm_cdiv(p->K, 128));
}

/* The cp.async main loop, software-pipelined across tiles (the CUTLASS multistage scheme):
 * fragments of k16 step kk + 1 are loaded while step kk's mma run, the copies of tile
 * kt + stages - 1 are issued at the first step of tile kt (measured on an H100: as fast as or
 * faster than spreading them over the steps), and the wait for
 * tile kt + 1 plus the barrier sit before the last step, whose fragments are already in
 * registers, so the first fragments of the next tile overlap the last mma batch.
 *
 * Ring invariants: tile t lives in slot t % stages; one commit group per tile index (empty past
 * the end). Before the wait of iteration kt, stages - 1 + kt + 1 groups were committed and tiles
 * 0..kt+1 must have landed: wait_group(stages - 2). The slot written during iteration kt,
 * (kt - 1) % stages, was last read by fragment loads that precede the barrier of iteration
 * kt - 1, which every thread has passed. */
static void emit_async_loop(tuner_sb *sb, const tuner__gemm_problem *p, const mma_cfg *c, int stage_bytes)
{
    const int kks = c->bk / mma_k(p);
    const int S = c->stages;
    tuner_sb_printf(sb,
                    "#pragma unroll\nfor (int s = 0; s < %d; s++) {\n"
                    "if (s < gm_ktiles) { gm_load_a(gm_sbase + s * %d, s); gm_load_b(gm_sbase + s * %d, s); }\n"
                    "hd_cp_async_commit();\n}\n"
                    "hd_cp_async_wait<%d>();\n__syncthreads();\n",
                    S - 1, stage_bytes, stage_bytes, S - 2);
    tuner_sb_printf(sb, "int gm_rd = 0, gm_wr = %d;\nhd_u32 gm_cur = gm_sbase;\n", S - 1);
    tuner_sb_printf(sb, "hd_u32 fa[2][%d][4], fb[2][%d][4];\n", c->wm / 16, c->wn / 16);
    if (c->promote)
        emit_promote_setup(sb, p, c);
    emit_frag_load(sb, p, c, 0, 0, 0, "gm_cur");
    emit_frag_load(sb, p, c, 1, 0, 0, "gm_cur");
    tuner_sb_puts(sb, "for (int kt = 0; kt < gm_ktiles; kt++) {\n");
    tuner_sb_printf(sb, "const bool gm_more = kt + %d < gm_ktiles;\nconst hd_u32 gm_dst = gm_sbase + gm_wr * %d;\n", S - 1,
                    stage_bytes);
    if (c->promote)
        emit_promote_scales(sb, p, c);
    for (int kk = 0; kk < kks; kk++) {
        const int buf = kk & 1;
        if (kk == 0)
            tuner_sb_printf(sb, "if (gm_more) { gm_load_a(gm_dst, kt + %d); gm_load_b(gm_dst, kt + %d); }\n"
                                "hd_cp_async_commit();\n",
                            S - 1, S - 1);
        if (kk == kks - 1) {
            tuner_sb_printf(sb,
                            "hd_cp_async_wait<%d>();\n__syncthreads();\n"
                            "gm_rd = gm_rd == %d ? 0 : gm_rd + 1;\ngm_wr = gm_wr == %d ? 0 : gm_wr + 1;\n"
                            "gm_cur = gm_sbase + gm_rd * %d;\n",
                            S - 2, S - 1, S - 1, stage_bytes);
            emit_frag_load(sb, p, c, 0, 0, buf ^ 1, "gm_cur");
            emit_frag_load(sb, p, c, 1, 0, buf ^ 1, "gm_cur");
        } else {
            emit_frag_load(sb, p, c, 0, kk + 1, buf ^ 1, "gm_cur");
            emit_frag_load(sb, p, c, 1, kk + 1, buf ^ 1, "gm_cur");
        }
        emit_mma_batch(sb, p, c, buf, kk);
    }
    if (c->promote)
        emit_promote_add(sb, p, c);
    tuner_sb_puts(sb, "}\nhd_cp_async_wait_all();\n");
}

static void emit_compute(tuner_sb *sb, const tuner__gemm_problem *p, const mma_cfg *c)
{
    const int kks = c->bk / 16, mi = c->wm / 16, ni = c->wn / 8;
    tuner_sb_puts(sb, "auto gm_compute = [&](hd_u32 gm_sa) {\n");
    tuner_sb_printf(sb, "hd_u32 fa[2][%d][4], fb[2][%d][4];\n", mi, ni / 2);
    emit_frag_load(sb, p, c, 0, 0, 0, "gm_sa");
    emit_frag_load(sb, p, c, 1, 0, 0, "gm_sa");
    for (int kk = 0; kk < kks; kk++) {
        const int buf = kk & 1;
        if (kk + 1 < kks) {
            emit_frag_load(sb, p, c, 0, kk + 1, buf ^ 1, "gm_sa");
            emit_frag_load(sb, p, c, 1, kk + 1, buf ^ 1, "gm_sa");
        }
        tuner_sb_printf(sb,
                        "#pragma unroll\nfor (int i = 0; i < %d; i++)\n#pragma unroll\nfor (int j = 0; j < %d; j++)\n"
                        "hd_mma_%s_16816(acc[i][j], fa[%d][i], &fb[%d][j >> 1][(j & 1) * 2]);\n",
                        mi, ni, p->dt == TUNER_F16 ? "f16" : "bf16", buf, buf);
    }
    tuner_sb_puts(sb, "};\n");
}

/* Epilogue: accumulator (i, j, e) sits at row (lane / 4) + 8 * (e / 2), column
 * 2 * (lane % 4) + e % 2 of mma tile (i, j). The general form checks every pair against M and
 * N and computes its offset; a tile wholly inside the output (every tile when the tiles divide
 * M and N) instead stores at compile-time offsets from one per-thread pointer, which also lets
 * the compiler read a column operand (bias) once per column rather than once per element. */
static void emit_epilogue_nest(tuner_sb *sb, const mma_cfg *c)
{
    tuner_sb_printf(sb,
                    "#pragma unroll\nfor (int i = 0; i < %d; i++)\n#pragma unroll\nfor (int j = 0; j < %d; j++)\n"
                    "#pragma unroll\nfor (int h = 0; h < 2; h++) {\n",
                    c->wm / 16, c->wn / 8);
}

/* Whether every tile lies wholly inside the output (then no store needs a bounds check): for a
 * named M, only where its multiple_of guarantees it at every size. */
static bool tiles_divide_output(const tuner__gemm_problem *p, const mma_cfg *c)
{
    return tuner__gemm_m_divides(p, c->bm) && tuner__gemm_n_divides(p, c->bn);
}

/* Row-major outputs, matmul [batch][M][N] and NHWC convolution [pixels][K] (group g at column
 * g * K/g): elements between consecutive rows, and between consecutive batch entries / groups. */
static void affine_out_strides(const tuner__gemm_problem *p, long long *ld, long long *zstride)
{
    *ld = p->conv ? p->ck : p->N;
    *zstride = p->conv ? p->cgk : p->M * p->N;
    /* A named M has no batch (entry 0 only): no stride of a size in the code. */
    if (p->m_sym)
        *zstride = 0;
}

/* Opens `if (this block's tile lies inside the output) {` for edge-tile problems. */
static void emit_if_tile_inside(tuner_sb *sb, const tuner__gemm_problem *p, const mma_cfg *c)
{
    tuner_sb_printf(sb, "if (gm_m0 + %d <= %s && gm_n0 + %d <= %s) {\n", c->bm, tuner__gemm_M(p, 0).s, c->bn,
                    tuner__gemm_N(p, 0).s);
}

/* stage_out: every warp applies the epilogue to all its fragments, then writes the converted
 * pairs into a padded block_m x block_n tile in shared memory (the pipeline's buffers, free once
 * every warp is past the main loop); then the block writes the tile out in 16-byte chunks, each
 * row's chunks by consecutive threads. Edge tiles clamp the epilogue's coordinates into the
 * output (its operands are read in range; tuner__gemm_emit_epilogue_pair) and check elements and
 * chunks against M and N when storing (N is a multiple of a chunk). */
static void emit_staged_epilogue(tuner_sb *sb, const tuner__gemm_problem *p, const mma_cfg *c)
{
    const int esz = tuner_dtype_size(p->out_dt), rowb = out_row_bytes(p, c);
    const bool all_full = tiles_divide_output(p, c);
    const char *v2[2] = {"acc[i][j][2 * h]", "acc[i][j][2 * h + 1]"};
    tuner_sb_printf(sb, "__syncthreads();\nconst hd_u32 gm_os = gm_sbase + (gm_wm * %d + (lane >> 2)) * %d + "
                        "(gm_wn * %d + (lane & 3) * 2) * %d;\n",
                    c->wm, rowb, c->wn, esz);
    char saddr[96];
    snprintf(saddr, sizeof(saddr), "gm_os + (i * 16 + h * 8) * %d + j * %d", rowb, 8 * esz);
    for (int checked = 0; checked < 2; checked++) {
        if (checked && all_full)
            break;
        if (!all_full && checked)
            tuner_sb_puts(sb, "} else {\n");
        else if (!all_full)
            emit_if_tile_inside(sb, p, c);
        if (tuner__gemm_has_epilogue(p)) {
            emit_epilogue_nest(sb, c);
            tuner__gemm_emit_epilogue_pair(sb, p, "gm_zb", "gm_er + i * 16 + h * 8", "gm_ec + j * 8", v2, checked);
            tuner_sb_puts(sb, "}\n");
        }
        emit_epilogue_nest(sb, c);
        tuner__gemm_emit_store_smem(sb, p, "gm_zb", "gm_er + i * 16 + h * 8", "gm_ec + j * 8", v2, saddr,
                                    checked);
        tuner_sb_puts(sb, "}\n");
    }
    if (!all_full)
        tuner_sb_puts(sb, "}\n");
    const int cpr = c->bn / p->out_chunk, total = c->bm * cpr;
    long long ld, zstride;
    affine_out_strides(p, &ld, &zstride);
    tuner_sb_printf(sb, "__syncthreads();\n#pragma unroll\nfor (int gm_it = 0; gm_it < %d; gm_it++) {\n"
                        "const int gm_c = gm_it * %d + (int)threadIdx.x;\n",
                    (total + c->threads - 1) / c->threads, c->threads);
    if (total % c->threads)
        tuner_sb_printf(sb, "if (gm_c >= %d) break;\n", total);
    tuner_sb_printf(sb, "const int gm_r = gm_c / %d, gm_q = gm_c %% %d;\n", cpr, cpr);
    if (!all_full)
        tuner_sb_printf(sb, "if (gm_m0 + gm_r < %s && gm_n0 + gm_q * %d < %lld)\n", tuner__gemm_M(p, 0).s,
                        p->out_chunk, p->N);
    tuner_sb_printf(sb,
                    "hd_st16(out + (long long)gm_zb * %lldLL + (long long)(gm_m0 + gm_r) * %lldLL + gm_n0 + gm_q * %d, "
                    "gm_lds128(gm_sbase + gm_r * %d + gm_q * 16));\n}\n",
                    zstride, ld, p->out_chunk, rowb);
}

/* Split-K inside a cluster: the `split` CTAs of a cluster (__cluster_dims__(1, 1, split), the K
 * slices of one tile) each park their fp32 accumulators in their own shared memory (the ring is
 * free once every warp is past the main loop); after a cluster barrier CTA r sums share r of the
 * tile's in-range rows, pair by pair, over the partials of CTAs 0..split-1 in that order (the
 * workspace reduction's order: results do not depend on scheduling), applies the epilogue and
 * stores; a last cluster barrier keeps every CTA's shared memory alive until all reads are done.
 * What this saves against the workspace: a second launch and the partials' trip through DRAM,
 * which dominate a skinny GEMM's few microseconds. */
static void emit_cluster_reduce(tuner_sb *sb, const tuner__gemm_problem *p, const mma_cfg *c)
{
    const int rb = tuner__gemm_partial_row_bytes(c->bn);
    tuner_sb_printf(sb, "__syncthreads();\n{\nconst hd_u32 gm_ps = gm_sbase + (gm_wm * %d + (lane >> 2)) * %d + "
                        "(gm_wn * %d + (lane & 3) * 2) * 4;\n",
                    c->wm, rb, c->wn);
    emit_epilogue_nest(sb, c);
    tuner_sb_printf(sb, "gm_sts_f2(gm_ps + (i * 16 + h * 8) * %d + j * 32, acc[i][j][2 * h], acc[i][j][2 * h + 1]);\n}\n}\n",
                    rb);
    tuner_sb_puts(sb, "gm_cluster_sync();\n");
    const tuner__gemm_cluster_sum sum = {.block_m = c->bm, .block_n = c->bn, .row_bytes = rb, .split = c->split,
                                         .threads = c->threads, .tid = "(int)threadIdx.x", .base = "gm_sbase",
                                         .b = "gm_zb", .m0 = "gm_m0", .n0 = "gm_n0"};
    tuner__gemm_emit_cluster_sum(sb, p, &sum);
    tuner_sb_puts(sb, "gm_cluster_sync();\n");
}

static void emit_epilogue(tuner_sb *sb, const tuner__gemm_problem *p, const mma_cfg *c)
{
    tuner_sb_printf(sb,
                    "const int gm_er = gm_m0 + gm_wm * %d + (lane >> 2);\n"
                    "const int gm_ec = gm_n0 + gm_wn * %d + (lane & 3) * 2;\n",
                    c->wm, c->wn);
    if (c->split > 1 && c->split_cluster) {
        emit_cluster_reduce(sb, p, c);
        return;
    }
    if (c->split > 1) {
        emit_epilogue_nest(sb, c);
        tuner_sb_puts(sb, "const int em = gm_er + i * 16 + h * 8, en = gm_ec + j * 8;\n");
        tuner_sb_printf(sb, "if (em < %s) {\nfloat *wp = ws + (((long long)gm_zs * %s + gm_zb) * %s + em) * %lldLL;\n",
                        tuner__gemm_M(p, 0).s, tuner__gemm_B(p).s, tuner__gemm_M(p, 0).s, p->N);
        if (p->N % 2 == 0)
            tuner_sb_printf(sb, "if (en < %lld) { hd_v2 pk; pk.x = __float_as_uint(acc[i][j][2 * h]); "
                                "pk.y = __float_as_uint(acc[i][j][2 * h + 1]); hd_st8(wp + en, pk); }\n",
                            p->N);
        else
            tuner_sb_printf(sb, "if (en < %lld) wp[en] = acc[i][j][2 * h];\nif (en + 1 < %lld) wp[en + 1] = acc[i][j][2 * h + 1];\n",
                            p->N, p->N);
        tuner_sb_puts(sb, "}\n}\n");
        return;
    }
    if (c->stage_out) {
        emit_staged_epilogue(sb, p, c);
        return;
    }
    const char *v2[2] = {"acc[i][j][2 * h]", "acc[i][j][2 * h + 1]"};
    /* Row-major outputs (affine_out_strides) store from one per-thread pointer. */
    /* (a named N's row stride is the launch's: stores through the shared emitters) */
    const bool affine = p->out_vec == 2 && (!p->conv || !p->nchw) && !p->n_sym;
    const bool all_full = tiles_divide_output(p, c);
    if (affine) {
        long long ld, zstride;
        affine_out_strides(p, &ld, &zstride);
        if (!all_full)
            emit_if_tile_inside(sb, p, c);
        tuner_sb_printf(sb, "%s *const gm_op = out + (long long)gm_zb * %lldLL + (long long)gm_er * %lldLL + gm_ec;\n",
                        tuner__ctype(p->out_dt), zstride, ld);
        emit_epilogue_nest(sb, c);
        char dst[96];
        snprintf(dst, sizeof(dst), "gm_op + (i * 16 + h * 8) * %lldLL + j * 8", ld);
        tuner__gemm_emit_store_at(sb, p, "gm_zb", "gm_er + i * 16 + h * 8", "gm_ec + j * 8", v2, 2, dst);
        tuner_sb_puts(sb, "}\n");
        if (all_full)
            return;
        tuner_sb_puts(sb, "} else {\n");
    }
    emit_epilogue_nest(sb, c);
    tuner_sb_puts(sb, "const int em = gm_er + i * 16 + h * 8, en = gm_ec + j * 8;\n");
    tuner__gemm_emit_store_pair(sb, p, "gm_zb", "em", "en", v2[0], v2[1], false);
    tuner_sb_puts(sb, "}\n");
    if (affine)
        tuner_sb_puts(sb, "}\n");
}

static int mma_emit(const tuner__gemm_problem *p, const tuner_target *t, const tuner_schedule *s, const char *tmpl,
                    tuner_program *prog, char **err)
{
    const tuner_arch *a = tuner__arch(t);
    mma_cfg c;
    if (!a || !mma_supported(p, a) || cfg_from(p, s, &c) < 0 || !cfg_valid(p, a, &c)) {
        if (err)
            *err = strdup("invalid schedule for this op and target");
        return -EINVAL;
    }
    const int tiles_m = tuner__gemm_cdiv(p->M, c.bm);
    const long long kps = tuner__gemm_k_per_split(p->K, c.split, c.bk);
    const int mi = c.wm / 16, ni = c.wn / 8;
    const int stage_bytes = (c.bm + c.bn) * c.bk * op_bytes(p);
    char name[56], rname[64];
    tuner__gemm_kernel_name(name, sizeof(name), tmpl, s);
    snprintf(rname, sizeof(rname), "%s_red", name);

    tuner_sb sb;
    tuner_sb_init(&sb);
    tuner__gemm_emit_head(&sb, t);
    tuner_sb_puts(&sb, "typedef unsigned short gm_u16;\n");
    if (p->fp8)
        emit_fp8_mma_fns(&sb, p);
    if (tuner_dtype_is_fp8(p->out_dt))
        tuner_sb_puts(&sb, tuner__gemm_fp8_out_helpers);
    const bool in_cluster = c.split > 1 && c.split_cluster;
    if (in_cluster)
        tuner_sb_puts(&sb, tuner__gemm_cluster_helpers);
    tuner__gemm_emit_signature(&sb, p, name, c.threads, c.split > 1 && !in_cluster, in_cluster ? c.split : 1);
    tuner_sb_puts(&sb, "extern __shared__ __attribute__((aligned(128))) unsigned char gm_smem[];\n"
                       "const hd_u32 gm_sbase = hd_smem_addr(gm_smem);\n"
                       "const int lane = threadIdx.x & 31;\n");
    /* Warp layout: spatial(warps_m, warps_n) over the warp index; the nest's scope spans the
     * whole kernel body. */
    tuner_mapping wmap = tuner_map_spatial(2, c.warps_m, c.warps_n, 1);
    const char *wnames[TUNER_MAP_MAX_RANK] = {"gm_wm", "gm_wn", NULL};
    tuner_map_emit_begin(&sb, &wmap, "threadIdx.x >> 5", "gw", wnames);
    tuner__gemm_emit_raster(&sb, p, tiles_m, c.bm, c.bn, c.group);
    if (p->k_sym)
        /* A named K: one slice (cfg_valid), the whole K of the launch. */
        tuner_sb_printf(&sb,
                        "const int gm_zb = blockIdx.z / %d, gm_zs = blockIdx.z %% %d;\n"
                        "const int gm_m0 = gm_tm * %d, gm_n0 = gm_tn * %d;\n"
                        "const int gm_kbeg = 0;\n"
                        "const int gm_kend = gm_K;\n"
                        "const int gm_ktiles = (gm_kend + %d) / %d;\n",
                        c.split, c.split, c.bm, c.bn, c.bk - 1, c.bk);
    else
        tuner_sb_printf(&sb,
                        "const int gm_zb = blockIdx.z / %d, gm_zs = blockIdx.z %% %d;\n"
                        "const int gm_m0 = gm_tm * %d, gm_n0 = gm_tn * %d;\n"
                        "const int gm_kbeg = gm_zs * %lld;\n"
                        "const int gm_kend = (int)min(%lldLL, (long long)gm_kbeg + %lldLL);\n"
                        "const int gm_ktiles = gm_kend > gm_kbeg ? (gm_kend - gm_kbeg + %d) / %d : 0;\n",
                        c.split, c.split, c.bm, c.bn, kps, p->K, kps, c.bk - 1, c.bk);
    tuner_sb_printf(&sb, "float acc[%d][%d][4];\n#pragma unroll\nfor (int i = 0; i < %d; i++)\n#pragma unroll\n"
                         "for (int j = 0; j < %d; j++)\n#pragma unroll\nfor (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;\n",
                    mi, ni, mi, ni);
    emit_frag_setup(&sb, p, &c, 0);
    emit_frag_setup(&sb, p, &c, 1);
    if (!c.async)
        emit_compute(&sb, p, &c);

    if (c.async) {
        /* Affine operands (matmul, conv weights) and NHWC images keep per-thread bases;
         * anything else computes coordinates per unit. */
        const bool im2col = p->conv && !p->nchw;
        for (int w = 0; w < 2; w++) {
            if (affine_operand(p, w))
                emit_affine_loader(&sb, p, &c, w, AFF_SETUP);
            else if (w == 0 && im2col)
                emit_im2col_loader(&sb, p, &c, true);
        }
        for (int w = 0; w < 2; w++) {
            tuner_sb_printf(&sb, "auto gm_load_%s = [&](hd_u32 gm_st, int gm_kt) {\nconst int gm_kb = gm_kbeg + gm_kt * %d;\n",
                            w == 0 ? "a" : "b", c.bk);
            if (affine_operand(p, w))
                emit_affine_loader(&sb, p, &c, w, AFF_CP_ASYNC);
            else if (w == 0 && im2col)
                emit_im2col_loader(&sb, p, &c, false);
            else
                emit_loader(&sb, p, &c, w, false, false);
            tuner_sb_puts(&sb, "};\n");
        }
        emit_async_loop(&sb, p, &c, stage_bytes);
    } else {
        tuner_sb_printf(&sb, "%s gm_ra[%d];\n%s gm_rb[%d];\n", vec_type(p->vec[0] * 2), load_iters(p, &c, 0),
                        vec_type(p->vec[1] * 2), load_iters(p, &c, 1));
        /* Matmul operands without a prologue use the affine addressing (fewer live registers);
         * convolutions and prologue operands compute coordinates per unit. */
        bool aff[2];
        for (int w = 0; w < 2; w++) {
            aff[w] = affine_operand(p, w) && !p->prologue[w];
            if (aff[w])
                emit_affine_loader(&sb, p, &c, w, AFF_SETUP);
        }
        tuner_sb_printf(&sb, "auto gm_gload = [&](int gm_kt) {\nconst int gm_kb = gm_kbeg + gm_kt * %d;\n", c.bk);
        for (int w = 0; w < 2; w++) {
            tuner_sb_puts(&sb, "{\n");
            if (aff[w])
                emit_affine_loader(&sb, p, &c, w, AFF_REG_LOAD);
            else
                emit_loader(&sb, p, &c, w, true, false);
            tuner_sb_puts(&sb, "}\n");
        }
        tuner_sb_puts(&sb, "};\n");
        tuner_sb_printf(&sb, "auto gm_sstore = [&](hd_u32 gm_st, int gm_kt) {\nconst int gm_kb = gm_kbeg + gm_kt * %d;\n",
                        c.bk);
        for (int w = 0; w < 2; w++) {
            if (aff[w])
                emit_affine_loader(&sb, p, &c, w, AFF_REG_STORE);
            else
                emit_loader(&sb, p, &c, w, false, true);
        }
        tuner_sb_puts(&sb, "};\n");
        /* Two shared buffers: tile kt + 1 is fetched into registers before computing tile kt and
         * written to the other buffer after it; one barrier per tile orders both hand-overs. */
        tuner_sb_printf(&sb,
                        "if (gm_ktiles > 0) {\ngm_gload(0);\ngm_sstore(gm_sbase, 0);\n__syncthreads();\n}\n"
                        "for (int kt = 0; kt < gm_ktiles; kt++) {\n"
                        "const hd_u32 gm_cur = gm_sbase + (kt & 1) * %d, gm_nxt = gm_sbase + ((kt + 1) & 1) * %d;\n"
                        "if (kt + 1 < gm_ktiles) gm_gload(kt + 1);\n"
                        "gm_compute(gm_cur);\n"
                        "if (kt + 1 < gm_ktiles) gm_sstore(gm_nxt, kt + 1);\n"
                        "__syncthreads();\n}\n",
                        stage_bytes, stage_bytes);
    }

    emit_epilogue(&sb, p, &c);
    tuner_map_emit_end(&sb, &wmap);
    tuner_sb_puts(&sb, "}\n");
    return tuner__gemm_finish(&sb, p, prog, name, rname, c.bm, c.bn, c.split, in_cluster,
                              (unsigned)c.threads, (unsigned)c.smem);
}

/* ---- space ---- */

typedef struct tile_shape {
    int bm, bn, wm, wn;
} tile_shape;

/* Block/warp tiles of 4 or 8 warps: large tiles for big GEMMs (warp tiles 64x64 give the best
 * ldmatrix-to-mma ratio), small ones (with split-K) for skinny problems.
 *
 * 192x128 fits problems whose 128x128 tiles spill just past one per SM: 4096x768x3072 is 192
 * such tiles on 132 SMs (60 SMs run two, so the kernel takes two tiles' time) but 132 of these
 * (H100: 45.5 us against 50-52 us for the best 64x128 tile at 3 blocks per SM). Its warp tiles
 * are 48x64 so that 8 warps share an SM's four tensor pipes evenly (6 warps of 64x64 would not);
 * its long side is M because a 192-wide B row is 24 16-byte chunks, which a 256-thread loader
 * cannot split evenly.
 */
static const tile_shape big_tiles[] = {
    {128, 256, 64, 64}, {256, 128, 64, 64}, {128, 128, 64, 64}, {128, 128, 64, 32},
    {128, 128, 32, 64}, {64, 256, 32, 64},  {256, 64, 64, 32},  {192, 128, 48, 64},
};
static const tile_shape small_tiles[] = {
    {128, 64, 64, 32}, {64, 128, 32, 64}, {128, 64, 32, 32}, {64, 128, 32, 32},
    {64, 64, 32, 32},  {32, 64, 32, 16},  {64, 32, 16, 32},  {32, 32, 16, 16},
    {16, 64, 16, 16},  {16, 128, 16, 32},
};
/* Tiles one mma row high, only for problems of at most 16 rows (decode GEMMs): half the
 * ldmatrix and mma work of a 32-row tile on the same weight stream. */
enum { DECODE_TILE_M = 16 };
/* Skinny problems (at most this many rows) also get 5- and 6-deep rings on small tiles: their
 * time is the weight stream's, whose start is paced by the bytes each block has in flight (H100,
 * 1x4096x4096: 16x128 tiles with 2 K slices and 6 stages 13.97 us, with 4 slices and 4 stages
 * 14.37; bench/results/2026-11-24-h100-decode). */
enum { SKINNY_M = 128 };
/* ... and, with one K slice and block_k 64, 8- and 12-deep rings: split-K clusters cost more
 * than the blocks they add, a deeper ring in fewer blocks less (H100: 1x4096x4096 on 64 blocks
 * of 16x64 tiles 13.3-13.6 us with 12 stages against 14.1 for the 2-slice, 6-stage pick,
 * 16x4096x4096 13.5 against 14.7; bench/results/2026-11-24-h100-uniform). */
enum { SKINNY_DEEP_STAGES = 12 };
static const int mma_stage_counts[] = {2, 3, 4, 5, 6, 8, 12};

#define MMA_SPACE_SIG \
    "mma16816 v2: big{128x256/64x64,256x128/64x64,128x128/64x64,64x32,32x64,64x256/32x64,256x64/64x32,192x128/48x64} " \
    "bk{32,64} stages{2(bk64)..5|2} swz{1,8} split1; small{128x64/64x32,64x128/32x64,128x64/32x32," \
    "64x128/32x32,64x64/32x32,32x64/32x16,64x32/16x32,32x32/16x16,16x64/16x16(M<=16),16x128/16x32(M<=16)} " \
    "bk{32,64} stages{3,4|3..6, +8,12 (bk64 split1) if M<=128|2} split{1,2,4,8} split_cluster{split>1 on sm>=90}; " \
    "stage_out{0|1: big swz8 stages 3-4, small split1 stages 3; 16-byte output rows}; smem/regs/threads/chunk rules"

static bool same_values(const tuner_schedule *x, const tuner_schedule *y)
{
    if (x->n_params != y->n_params)
        return false;
    for (int i = 0; i < x->n_params; i++)
        if (x->params[i].value != y->params[i].value)
            return false;
    return true;
}

static int mma_enumerate(const tuner_op *op, const tuner_target *t, tuner_schedule **items, size_t *n)
{
    tuner__gemm_problem p;
    const tuner_arch *a = tuner__arch(t);
    if (!a || tuner__gemm_problem_init_fp8(op, &p, NULL) < 0 || !mma_supported(&p, a))
        return 0;
    const bool async = mma_async(&p);
    /* block_k in elements: 32 or 64 of 16-bit operands, 64 or 128 of FP8 ones (the same 64 or 128
     * bytes per shared row, the same ring sizes). */
    const int esz = op_bytes(&p);
    const char *tmpl = p.conv ? "conv2d_mma" : "matmul_mma";
    /* The preferred schedule (tune:"none") comes first. Matmul: 128x128x64 tiles of 64x64 warp
     * tiles with a 3-deep cp.async ring (96 KiB: two blocks per SM on sm_80/90, fits sm_86/89;
     * the fastest measured on an H100 for 4096^3, 0.58 of cuBLAS). Convolution: 128x64x64 with
     * 64x32 warp tiles, 4 stages (channel counts are often 64: a 128-wide N tile would be half
     * empty; fastest measured for a ResNet 3x3 layer). Loads staged through registers: 64x64
     * tiles of 32x32 (convolutions 32x16 with block_k 16: fewer im2col units per thread) so that
     * the default never spills. */
    tuner_schedule pref = {.template_name = tmpl};
    tuner__gemm_param(&pref, "block_m", async ? 128 : 64);
    tuner__gemm_param(&pref, "block_n", async ? (p.conv ? 64 : 128) : 64);
    const int pref_bk = async ? 128 / esz : (p.conv ? 16 : 32);
    tuner__gemm_param(&pref, "block_k", pref_bk);
    tuner__gemm_param(&pref, "warp_m", async ? 64 : 32);
    /* (A promoted FP8 k tile's own accumulators leave no registers for 64x64 warp tiles: 64x32.) */
    tuner__gemm_param(&pref, "warp_n", async ? (p.conv || p.promote ? 32 : 64) : p.conv ? 16 : 32);
    tuner__gemm_param(&pref, "stages", async ? (p.conv ? 4 : 3) : 2);
    tuner__gemm_param(&pref, "split_k", 1);
    tuner__gemm_param(&pref, "split_cluster", 0);
    tuner__gemm_param(&pref, "swizzle", p.conv ? 1 : 8);
    /* A short K loop stages its output tile (the pair stores would be exposed; 4096x3072x768 on
     * an H100: 48 instead of 63 us). For a long one the measurements disagree by a few percent
     * either way (a hand-written staged 2048x4096x4096 lost, 170 against 157 us; the tuner's
     * single-launch timings picked staged tiles for 4096^3 and 8192^3), so the default keeps the
     * direct stores there. */
    tuner__gemm_param(&pref, "stage_out", p.out_chunk && tuner__gemm_cdiv(p.K, pref_bk) <= 32);
    mma_cfg pc;
    const bool have_pref = cfg_from(&p, &pref, &pc) == 0 && cfg_valid(&p, a, &pc);
    if (have_pref) {
        int rc = tuner__gemm_push(items, n, &pref);
        if (rc < 0)
            return rc;
    }
    for (int big = 1; big >= 0; big--) {
        const tile_shape *ts = big ? big_tiles : small_tiles;
        size_t nts = big ? sizeof(big_tiles) / sizeof(big_tiles[0]) : sizeof(small_tiles) / sizeof(small_tiles[0]);
        for (size_t i = 0; i < nts; i++) {
            if (ts[i].bm == DECODE_TILE_M && p.M > DECODE_TILE_M)
                continue;
            for (int bkb = 64; bkb <= 128; bkb *= 2)
                for (size_t si = 0; si < sizeof(mma_stage_counts) / sizeof(mma_stage_counts[0]); si++) {
                    const int bk = bkb / esz;
                    const int st = mma_stage_counts[si];
                    if (!async && st != 2)
                        continue;
                    if (async && !big && (st < 3 || st > (p.M <= SKINNY_M ? SKINNY_DEEP_STAGES : 4)))
                        continue;
                    if (big && st > 5)
                        continue;
                    /* A two-stage cp.async ring prefetches one tile ahead: only with block_k 64
                     * (no tuned shape picked a two-stage big tile; the model ranks them low). */
                    if (async && big && st == 2 && bkb != 128)
                        continue;
                    /* The deep rings: one K slice, 64-deep k tiles (see SKINNY_DEEP_STAGES). */
                    if (st > 6 && bkb != 128)
                        continue;
                    for (int sp = 1; sp <= (big || st > 6 ? 1 : 8); sp *= 2)
                        for (int g = 1; g <= (big ? 8 : 1); g += 7) {
                            tuner_schedule s = {.template_name = tmpl};
                            tuner__gemm_param(&s, "block_m", ts[i].bm);
                            tuner__gemm_param(&s, "block_n", ts[i].bn);
                            tuner__gemm_param(&s, "block_k", bk);
                            tuner__gemm_param(&s, "warp_m", ts[i].wm);
                            tuner__gemm_param(&s, "warp_n", ts[i].wn);
                            tuner__gemm_param(&s, "stages", st);
                            tuner__gemm_param(&s, "split_k", sp);
                            /* Where clusters exist the K slices sum inside one (no workspace,
                             * no second launch); elsewhere through the workspace. */
                            tuner__gemm_param(&s, "split_cluster", sp > 1 && a->sm >= 90);
                            tuner__gemm_param(&s, "swizzle", g);
                            tuner__gemm_param(&s, "stage_out", 0);
                            /* Staged variants where they were measured to pay off (short K
                             * loops, and N=768-like shapes on small tiles): big tiles with
                             * grouped raster and a 3-4 deep ring, small ones without split-K
                             * and a 3-deep ring. (Swizzle 1 and 4-stage small tiles: within
                             * noise of these, and the space stays under 300.) */
                            const int so_max =
                                big ? (g > 1 && st >= 3 && st <= 4) : (sp == 1 && st == 3);
                            for (int so = 0; so <= so_max; so++) {
                                s.params[s.n_params - 1].value = so;
                                mma_cfg c;
                                if (cfg_from(&p, &s, &c) < 0 || !cfg_valid(&p, a, &c))
                                    continue;
                                if (have_pref && same_values(&s, &pref))
                                    continue;
                                int rc = tuner__gemm_push(items, n, &s);
                                if (rc < 0)
                                    return rc;
                            }
                        }
                }
        }
    }
    return 0;
}

static bool mma_applies_kind(const tuner_op *op, const tuner_target *t, tuner_op_kind k)
{
    tuner__gemm_problem p;
    const tuner_arch *a = tuner__arch(t);
    return op && op->kind == k && a && tuner__gemm_problem_init_fp8(op, &p, NULL) == 0 && mma_supported(&p, a);
}

static bool matmul_applies(const tuner_op *op, const tuner_target *t)
{
    return mma_applies_kind(op, t, TUNER_OP_MATMUL);
}

static bool conv_applies(const tuner_op *op, const tuner_target *t)
{
    return mma_applies_kind(op, t, TUNER_OP_CONV2D);
}

static int mma_generate(const tuner_op *op, const tuner_target *t, const tuner_schedule *s, tuner_program *prog,
                        char **err)
{
    tuner__gemm_problem p;
    int rc = tuner__gemm_problem_init_fp8(op, &p, err);
    if (rc < 0)
        return rc;
    return mma_emit(&p, t, s, p.conv ? "conv2d_mma" : "matmul_mma", prog, err);
}

/* A promoted FP8 k tile (c->promote) adds one FADD (per-block scales: FFMA and the scale loads)
 * per accumulator per 128 k, about 1/16 of a 64x64 warp tile's mma issue slots, and each tile's
 * first mma waits for the previous tile's sum to be read: an estimate, not measured. */
#define MMA_PROMOTE_SCALE 1.08

static double mma_predict(const tuner_op *op, const tuner_target *t, const tuner_schedule *s)
{
    tuner__gemm_problem p;
    const tuner_arch *a = tuner__arch(t);
    mma_cfg c;
    if (!a || tuner__gemm_problem_init_fp8(op, &p, NULL) < 0 || !mma_supported(&p, a) || cfg_from(&p, s, &c) < 0)
        return 1e12;
    /* A staged output tile pays two barriers and a shared-memory round trip, and saves the
     * exposed pair stores at the end of each tile: a gain that shrinks with the K loop's length
     * (H100: -23% at 12 k-tiles, a few percent either way at 64), on the compute side only (a
     * memory-bound loop does not speed up). Near-equal predictions keep both variants of a good
     * tile among the measured candidates. */
    double stage_scale = 1.0;
    if (c.stage_out) {
        const double ktiles = (double)tuner__gemm_cdiv(tuner__gemm_k_per_split(p.K, c.split, c.bk), c.bk);
        const double f = 1.06 - 2.8 / ktiles;
        stage_scale = f < 0.75 ? 0.75 : f;
    }
    tuner__gemm_cost_in in = {
        .block_m = c.bm, .block_n = c.bn, .block_k = c.bk, .threads = c.threads, .warp_m = c.wm, .warp_n = c.wn,
        .split_k = c.split, .stages = c.async ? c.stages : 2, .smem_bytes = c.smem, .regs_per_thread = c.regs,
        .split_in_cluster = c.split_cluster, .tensor_core = true, .tf32 = false, .async_copy = c.async, .vec_a = p.vec[0], .vec_b = p.vec[1],
        .compute_scale = stage_scale * (c.promote ? MMA_PROMOTE_SCALE : 1.0),
    };
    double us = tuner__gemm_cost(&p, a, &in);
    /* Rasterisation matters only when the operands overflow L2; a mild preference otherwise. */
    if (c.group > 1)
        us *= 0.97;
    return us;
}

const tuner_template tuner__gemm_matmul_mma = {
    .name = "matmul_mma",
    .space_signature = MMA_SPACE_SIG,
    .applies = matmul_applies,
    .enumerate = mma_enumerate,
    .generate = mma_generate,
    .predict_us = mma_predict,
    .preferred = NULL, /* enumerates its preferred schedule first */
    .default_rank = TUNER_RANK_TENSOR_CORE,
    /* A named M or batch is read from the hd_dim parameters in every bound (tuner__gemm_M), the
     * tile count of the grouped raster, the workspace planes and the grids (rules); the
     * unchecked-store fast path only where multiple_of makes every tile whole. */
    .dynamic_dims = true,
};

/* Static only: the im2col addressing decodes pixels with the image sizes, which a named batch
 * would not change, but nothing asks for it yet (docs/api.md: names stand on matmul's a). */
const tuner_template tuner__gemm_conv2d_mma = {
    .name = "conv2d_mma",
    .space_signature = MMA_SPACE_SIG " implicit-gemm nhwc(rsc)/nchw(crs)",
    .applies = conv_applies,
    .enumerate = mma_enumerate,
    .generate = mma_generate,
    .predict_us = mma_predict,
    .preferred = NULL, /* enumerates its preferred schedule first */
    .default_rank = TUNER_RANK_TENSOR_CORE,
};
