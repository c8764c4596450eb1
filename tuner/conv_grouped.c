/* tuner/conv_grouped.c - conv2d_grouped: grouped convolutions with 4-32 input channels per group
 * (ResNeXt, RegNet) on tensor cores, NHWC, f16/bf16 with fp32 accumulation (mma.sync, sm_80+).
 *
 * Why a template of its own: a group is narrower than the GEMM templates' tiles. conv2d_wgmma's
 * tiles are wider than a group; conv2d_mma runs one small GEMM per group (blockIdx.z) with N = 8
 * to 32 of its 64-128-wide tiles idle and every group re-reading its input pixels' rows, and
 * conv2d_direct (CUDA cores) is for fewer than 8 channels per group. These layers do 36-288 MACs
 * per output element: they are close to memory-bound (ResNeXt-50's 8-per-group layer at N = 32
 * moves 26 MB in and out, 5.4 us at the H200's 4.8 TB/s, for 0.9 GFLOP, 1.4 us of mma.sync), so
 * the design is about reading the input once and keeping shared memory traffic per MMA low.
 *
 * Design: a per-group implicit GEMM batched over the groups of a tile.
 *  - A block owns `tiles` consecutive output tiles of tp x tq pixels (rows x columns of one
 *    image) and gt consecutive groups (blockIdx.y). Its groups' weights are staged once in shared
 *    memory (u32 pairs, each output channel's row of K = R*S*cpg padded to a multiple of 16 and
 *    then to 4 mod 8 words, so the B-fragment reads of 8 rows x 4 lanes fall in 32 banks) and
 *    serve every tile the block walks.
 *  - Per tile, the input pixels under it (halo included: (tp-1)*sh + (R-1)*dh + 1 rows, the same
 *    for columns) of the gt*cpg channels are copied once with 16-byte cp.async (zero-filled
 *    outside the image), and reused by every tap and group. With tiles > 1 the next tile's copy
 *    runs while this one is computed (two buffers). Each pixel's channels are padded to an odd
 *    number of 16-byte units, so 8 consecutive pixels' 16 bytes cover all 32 banks; with a
 *    column stride sw the columns are stored phase-major (column c at (c % sw) * ceil(cols/sw) +
 *    c / sw) so that consecutive output pixels read consecutive slots under every tap.
 *  - Warps: wm along the tile's pixels x wg along its groups; a warp takes mt m16 tiles of pixels
 *    (the tile's pixels in row-major order, 16 per MMA row block; rows past the tile are dummies
 *    that read pixel 0 and store nothing) and walks its groups one after another. Per group: the
 *    GEMM M = pixels, N = kpg (n8 tiles, zero rows past kpg), K = R*S*cpg in the weights' own
 *    order (tap-major, channel-minor) padded to 16. A fragments are 32-bit shared loads of
 *    (pixel, tap, channel pair): with cpg a multiple of 8 every 8-wide k chunk lies in one tap and
 *    its offset is a constant; otherwise each lane's offsets are computed once per block. An A
 *    fragment serves all kpg/8 n tiles, a B fragment all mt m tiles.
 *  - Epilogue: accumulators -> fused epilogue chain -> channel pairs stored as one 32-bit store
 *    (a group's kpg channels of a pixel are contiguous in NHWC), or (`so` 1) written to an output
 *    tile in shared memory (pixel stride an odd number of 16-byte units) that then leaves in
 *    16-byte chunks along each pixel's gt * kpg channels: whole sectors instead of a warp store's
 *    8 pixels x 16 bytes (conv2d_mma's stage_out measured 63 -> 48 us on an H100 for a short-K
 *    GEMM, whose pair stores are exposed the same way).
 *
 * On paper, ResNeXt-50's 8-per-group layer at N = 32 on an H200: DRAM 26 MB, 5.4 us; MMAs
 * (K 72 padded to 80) 1.6 us; shared memory: every input byte is read once per tap by the A
 * fragments (9x the input, 4 wavefronts per m16 x k16 fragment, the same as ldmatrix.x4) plus
 * the copies in, ~4 us at 128 bytes a clock per SM. The kernel is DRAM-bound only where its
 * copies overlap its MMAs: across the blocks of an SM, and inside a block walking several tiles.
 * The cost model (grouped_predict) takes the largest of DRAM, L2, shared-memory and tensor time
 * and adds the shorter phase where one wave of single-tile blocks cannot hide it; tune:"none"
 * takes the model's best schedule of this template.
 *
 * Applies to NHWC f16/bf16 convolutions with groups > 1, an even 4 <= cpg <= 32, an even
 * kpg <= 64, C a multiple of 8 (16-byte channel chunks) and no prologue. Its default outranks the
 * GEMM templates' (TUNER_RANK_SPECIALISED) and, listed before conv2d_direct, takes 4 and 6
 * channels per group from it too (the direct template's grouped path is scalar).
 */
#include "tuner/core.h"
#include "tuner/space.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const P_TP = "tp";
static const char *const P_TQ = "tq";
static const char *const P_GT = "gt";
static const char *const P_WM = "wm";
static const char *const P_WG = "wg";
static const char *const P_TILES = "tiles";
static const char *const P_SO = "so";
#define N_PARAMS 7

/* Dynamic shared memory per block: at most this, so that two blocks share an SM's 228 KiB on
 * Hopper (164 KiB on the A100); above 48 KiB the launch sets the attribute. */
#define SMEM_CAP (96 * 1024)

static bool grouped_applies(const tuner_op *op, const tuner_target *t)
{
    const tuner_arch *a = tuner__arch(t);
    if (op->kind != TUNER_OP_CONV2D || !a || a->sm < 80 || !a->has_cp_async || op->attrs.conv2d.nchw ||
        !tuner__no_prologue(op) || op->n_anchor_inputs != 2 || op->inputs[0].rank != 4 || op->inputs[1].rank != 4 ||
        op->output.rank != 4)
        return false;
    const tuner_dtype dt = op->inputs[0].dtype;
    if ((dt != TUNER_F16 && dt != TUNER_BF16) || op->inputs[1].dtype != dt ||
        (op->output.dtype != TUNER_F16 && op->output.dtype != TUNER_BF16 && op->output.dtype != TUNER_F32))
        return false;
    if (op->inputs[0].align < 16 || op->inputs[1].align < 4)
        return false;
    tuner__conv_geo g = tuner__conv_geo_of(op);
    if (g.groups < 2 || g.C != (long long)g.cpg * g.groups || g.K != (long long)g.kpg * g.groups)
        return false;
    return g.cpg >= 4 && g.cpg <= 32 && g.cpg % 2 == 0 && g.kpg >= 2 && g.kpg <= 64 && g.kpg % 2 == 0 &&
           g.C % 8 == 0 && g.P >= 1 && g.Q >= 1 && g.sh >= 1 && g.sw >= 1 && g.dh >= 1 && g.dw >= 1;
}

typedef struct gconv_cfg {
    int tp, tq, gt, wm, wg, tiles;
    bool so;           /* output tile staged in shared memory, written in 16-byte chunks */
    int os;            /* its pixel stride (elements) */
    int os_bytes;
    int mtt;           /* m16 tiles of a pixel tile (the last part dummies) */
    int mt;            /* m16 tiles per warp */
    int nt;            /* n8 tiles of a group */
    int kk, nks;       /* K = R*S*cpg, and its k16 steps */
    int rw;            /* u32 words per staged weight row */
    int rows_in, cols_in, cpp, colslots; /* staged input rows, columns, slots per phase, slots */
    int ct, ps;        /* channels per staged pixel, and its padded stride (elements) */
    int threads;
    long long ptiles, qtiles, ntiles, grid_x, grid_y;
    int xs_bytes, ws_bytes, smem;
    int nbuf;
} gconv_cfg;

static bool cfg_of(const tuner__conv_geo *g, const tuner_schedule *s, gconv_cfg *c)
{
    memset(c, 0, sizeof(*c));
    c->tp = tuner_schedule_param(s, P_TP, 0);
    c->tq = tuner_schedule_param(s, P_TQ, 0);
    c->gt = tuner_schedule_param(s, P_GT, 0);
    c->wm = tuner_schedule_param(s, P_WM, 0);
    c->wg = tuner_schedule_param(s, P_WG, 0);
    c->tiles = tuner_schedule_param(s, P_TILES, 1);
    const int so = tuner_schedule_param(s, P_SO, 0);
    if (so != 0 && so != 1)
        return false;
    c->so = so == 1;
    if (c->tp < 1 || c->tp > 16 || c->tq < 1 || c->tq > 64 || c->gt < 1 || c->wm < 1 || c->wg < 1 || c->tiles < 1 ||
        c->tiles > 8)
        return false;
    if (c->gt % c->wg || (c->gt * g->cpg) % 8 || c->gt * g->cpg > 512 || c->gt > g->groups)
        return false;
    c->threads = 32 * c->wm * c->wg;
    if (c->threads < 64 || c->threads > 512)
        return false;
    const int pix = c->tp * c->tq;
    c->mtt = (pix + 15) / 16;
    if (c->wm > c->mtt)
        return false;
    c->mt = (c->mtt + c->wm - 1) / c->wm;
    c->nt = (g->kpg + 7) / 8;
    /* Accumulators mt x nt x 4 per thread. */
    if (c->mt * c->nt * 4 > 64)
        return false;
    c->kk = (int)(g->R * g->S) * g->cpg;
    c->nks = (c->kk + 15) / 16;
    c->rw = c->nks * 8 + 4;
    c->rows_in = (c->tp - 1) * g->sh + (int)(g->R - 1) * g->dh + 1;
    c->cols_in = (c->tq - 1) * g->sw + (int)(g->S - 1) * g->dw + 1;
    c->cpp = (c->cols_in + g->sw - 1) / g->sw;
    c->colslots = c->cpp * g->sw;
    c->ct = c->gt * g->cpg;
    c->ps = (c->ct / 8) % 2 ? c->ct : c->ct + 8;
    c->nbuf = c->tiles > 1 ? 2 : 1;
    c->xs_bytes = c->rows_in * c->colslots * c->ps * 2;
    c->ws_bytes = c->gt * c->nt * 8 * c->rw * 4;
    c->smem = c->nbuf * c->xs_bytes + c->ws_bytes;
    if (c->so) {
        /* Whole 16-byte chunks of a tile's output channels, every tile's first chunk aligned. */
        const int row_bytes = c->gt * g->kpg * g->osz;
        if (row_bytes % 16 || (g->K * g->osz) % 16 || g->oalign < 16)
            return false;
        const int unit = 16 / g->osz;
        c->os = c->gt * g->kpg + ((row_bytes / 16) % 2 ? 0 : unit);
        c->os_bytes = c->tp * c->tq * c->os * g->osz;
        c->smem += c->os_bytes;
    }
    if (c->smem > SMEM_CAP)
        return false;
    c->ptiles = (g->P + c->tp - 1) / c->tp;
    c->qtiles = (g->Q + c->tq - 1) / c->tq;
    c->ntiles = g->N * c->ptiles * c->qtiles;
    c->grid_x = (c->ntiles + c->tiles - 1) / c->tiles;
    c->grid_y = (g->groups + c->gt - 1) / c->gt;
    return c->grid_x <= 0x7fffffffLL && c->grid_y <= 65535;
}

/* Registers a thread may take (__launch_bounds__): 128, or 168 for warps holding 32
 * accumulators or more (a 32-per-group warp's 4 x 4 m16/n8 tiles spilled 416 bytes under 128, its
 * 2 x 4 tiles 16-32). */
static int reg_cap_of(const gconv_cfg *c)
{
    return c->mt * c->nt * 4 >= 32 ? 168 : 128;
}

/* __launch_bounds__'s blocks per SM: those that leave each thread its cap. */
static int min_blocks_of(const gconv_cfg *c)
{
    const int b = 65536 / (c->threads * reg_cap_of(c));
    return b < 1 ? 1 : b;
}

/* Pixel tiles worth offering: most of a tile inside the output (>= 1/2 of its rows and columns
 * used), 32 to 256 pixels, or a whole image of 16 or more (5x5, 4x4: one or two m16 tiles). */
static bool tile_sensible(const tuner__conv_geo *g, int tp, int tq)
{
    const int pix = tp * tq;
    if ((pix < 32 && !(tp == g->P && tq == g->Q && pix >= 16)) || pix > 256)
        return false;
    const double used_p = (double)g->P / (double)(((g->P + tp - 1) / tp) * tp);
    const double used_q = (double)g->Q / (double)(((g->Q + tq - 1) / tq) * tq);
    return used_p * used_q >= 0.5;
}

static int grouped_enumerate(const tuner_op *op, const tuner_target *t, tuner_schedule **items, size_t *n)
{
    const tuner_arch *arch = tuner__arch(t);
    if (!arch)
        return 0;
    tuner__conv_geo g = tuner__conv_geo_of(op);
    int tps[8] = {1, 2, 4, 8}, tqs[8] = {8, 16, 32};
    size_t n_tp = 4, n_tq = 3;
    /* The whole output height or width when it is short (7x7, 14x14): no idle tile rows. */
    if (g.P <= 16 && g.P != 1 && g.P != 2 && g.P != 4 && g.P != 8)
        tps[n_tp++] = (int)g.P;
    if (g.Q <= 32 && g.Q != 8 && g.Q != 16 && g.Q != 32)
        tqs[n_tq++] = (int)g.Q;
    static const int gts[] = {1, 2, 4, 8, 16, 32};
    static const int wms[] = {1, 2, 4, 8};
    static const int wgs[] = {1, 2, 4};
    static const int tiless[] = {1, 2, 4, 8};
    const char *names[N_PARAMS] = {P_TP, P_TQ, P_GT, P_WM, P_WG, P_TILES, P_SO};
    for (size_t a = 0; a < n_tp; a++)
        for (size_t b = 0; b < n_tq; b++) {
            if (!tile_sensible(&g, tps[a], tqs[b]))
                continue;
            for (size_t c = 0; c < sizeof(gts) / sizeof(gts[0]); c++) {
                /* 64 to 256 channels a tile: 128-byte runs or more per pixel. */
                const int ct = gts[c] * g.cpg;
                if (ct < 32 || ct > 256)
                    if (!(ct < 32 && gts[c] == g.groups))
                        continue;
                for (size_t d = 0; d < sizeof(wms) / sizeof(wms[0]); d++)
                    for (size_t e = 0; e < sizeof(wgs) / sizeof(wgs[0]); e++)
                        for (size_t f = 0; f < sizeof(tiless) / sizeof(tiless[0]); f++)
                          for (int so = 0; so < 2; so++) {
                            int values[N_PARAMS] = {tps[a], tqs[b], gts[c], wms[d], wgs[e], tiless[f], so};
                            tuner_schedule s = {0};
                            tuner__schedule_params(&s, N_PARAMS, names, values);
                            gconv_cfg cfg;
                            if (!cfg_of(&g, &s, &cfg))
                                continue;
                            /* A warp with more m tiles than a wider split would give it only
                             * when the block is small: at least 4 warps or 2 m tiles a warp. */
                            if (cfg.mt * cfg.wm - cfg.mtt >= cfg.mt)
                                continue;
                            /* Several tiles a block only while every SM still gets a block. */
                            if (cfg.tiles > 1 && cfg.grid_x * cfg.grid_y < arch->sm_count)
                                continue;
                            int r = tuner__space_push(items, n, "conv2d_grouped", N_PARAMS, names, values);
                            if (r < 0)
                                return r;
                        }
            }
        }
    return 0;
}

/* The element offset, in a staged input tile, of tap (r, s) relative to an output pixel's slot. */
static long long tap_offset(const tuner__conv_geo *g, const gconv_cfg *c, int r, int s)
{
    const int cs = s * g->dw;
    return ((long long)r * g->dh * c->colslots + (long long)(cs % g->sw) * c->cpp + cs / g->sw) * c->ps;
}

static int grouped_generate(const tuner_op *op, const tuner_target *t, const tuner_schedule *s, tuner_program *p,
                            char **err)
{
    tuner__conv_geo g = tuner__conv_geo_of(op);
    gconv_cfg c;
    if (!grouped_applies(op, t) || !cfg_of(&g, s, &c)) {
        *err = strdup("invalid parameters for conv2d_grouped");
        return -EINVAL;
    }
    const char *XT = tuner__ctype(op->inputs[0].dtype);
    const char *OT = tuner__ctype(op->output.dtype);
    const char *MMA = op->inputs[0].dtype == TUNER_BF16 ? "hd_mma_bf16_16816" : "hd_mma_f16_16816";
    const bool const_taps = g.cpg % 8 == 0; /* every 8-wide k chunk in one tap */
    const bool pair_store = tuner_dtype_size(op->output.dtype) == 2 && op->output.align >= 4;
    const int xs_elems = c.xs_bytes / 2;
    tuner_sb sb;
    tuner_sb_init(&sb);
    tuner__prelude(&sb, t->sm);
    /* At most reg_cap_of registers a thread (the blocks per SM that leave each thread that many):
     * unbounded, ptxas hoists the B fragments of every k step and a 32-per-group warp took 232. */
    tuner_sb_printf(&sb, "extern \"C\" __global__ void __launch_bounds__(%d, %d) hd_conv2d_grouped(", c.threads,
                    min_blocks_of(&c));
    tuner__emit_params(&sb, op, op->output.dtype);
    tuner_sb_puts(&sb, ")\n{\n");
    tuner_sb_puts(&sb, "extern __shared__ __align__(16) unsigned char hd_smem[];\n");
    tuner_sb_printf(&sb, "%s *const xs = reinterpret_cast<%s *>(hd_smem);\n", XT, XT);
    tuner_sb_printf(&sb, "hd_u32 *const ws = reinterpret_cast<hd_u32 *>(hd_smem + %d);\n", c.nbuf * c.xs_bytes);
    if (c.so)
        tuner_sb_printf(&sb, "%s *const ot = reinterpret_cast<%s *>(hd_smem + %d);\n", OT, OT,
                        c.nbuf * c.xs_bytes + c.ws_bytes);
    tuner_sb_printf(&sb, "const int g0 = blockIdx.y * %d;\n", c.gt);
    tuner_sb_printf(&sb, "const long long tile0 = (long long)blockIdx.x * %d;\n", c.tiles);
    /* The input tile's copy: 16-byte chunks, consecutive threads along a pixel's channels. */
    const int chunks = c.ct / 8;
    tuner_sb_printf(&sb, "auto load_tile = [&](long long tile, %s *dst) {\n", XT);
    tuner_sb_printf(&sb, "  const long long n = tile / %lldLL, pq = tile %% %lldLL;\n", c.ptiles * c.qtiles,
                    c.ptiles * c.qtiles);
    tuner_sb_printf(&sb, "  const long long h0 = (pq / %lldLL) * %d - %d, w0 = (pq %% %lldLL) * %d - %d;\n", c.qtiles,
                    c.tp * g.sh, g.ph, c.qtiles, c.tq * g.sw, g.pw);
    tuner_sb_printf(&sb, "  for (int i = threadIdx.x; i < %d; i += %d) {\n", c.rows_in * c.cols_in * chunks, c.threads);
    tuner_sb_printf(&sb, "    const int ch = i %% %d, pix = i / %d, col = pix %% %d, row = pix / %d;\n", chunks, chunks,
                    c.cols_in, c.cols_in);
    tuner_sb_puts(&sb, "    const long long h = h0 + row, w = w0 + col;\n");
    tuner_sb_printf(&sb, "    const long long cin = (long long)g0 * %d + ch * 8;\n", g.cpg);
    tuner_sb_printf(&sb, "    const bool in = h >= 0 && h < %lldLL && w >= 0 && w < %lldLL && cin < %lldLL;\n", g.H, g.W,
                    g.C);
    tuner_sb_printf(&sb, "    const %s *src = in ? in0 + ((n * %lldLL + h) * %lldLL + w) * %lldLL + cin : in0;\n", XT,
                    g.H, g.W, g.C);
    if (g.sw > 1)
        tuner_sb_printf(&sb, "    const int slot = (col %% %d) * %d + col / %d;\n", g.sw, c.cpp, g.sw);
    else
        tuner_sb_puts(&sb, "    const int slot = col;\n");
    tuner_sb_printf(&sb, "    hd_cp_async16(dst + (row * %d + slot) * %d + ch * 8, src, in);\n", c.colslots, c.ps);
    tuner_sb_puts(&sb, "  }\n  hd_cp_async_commit();\n};\n");
    tuner_sb_printf(&sb, "load_tile(tile0, xs);\n");
    /* The groups' weights, once: row (group, n) of u32 pairs along K, zero past kpg and K. */
    const int rows = c.gt * c.nt * 8;
    tuner_sb_printf(&sb, "for (int i = threadIdx.x; i < %d; i += %d) {\n", rows * c.rw, c.threads);
    tuner_sb_printf(&sb, "  const int e = i %% %d, row = i / %d, gl = row / %d, nn = row %% %d;\n", c.rw, c.rw, c.nt * 8,
                    c.nt * 8);
    tuner_sb_puts(&sb, "  hd_u32 v = 0u;\n");
    tuner_sb_printf(&sb, "  if (g0 + gl < %d && nn < %d && e < %d)\n", g.groups, g.kpg, c.kk / 2);
    tuner_sb_printf(&sb, "    v = reinterpret_cast<const hd_u32 *>(in1)[((long long)(g0 + gl) * %d + nn) * %d + e];\n",
                    g.kpg, c.kk / 2);
    tuner_sb_puts(&sb, "  ws[i] = v;\n}\n");
    /* The lane's fragment rows: the slot of each of its pixels (rows gid and gid + 8 of each m
     * tile), pixel 0 for the dummies. */
    tuner_sb_puts(&sb, "const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;\n");
    tuner_sb_printf(&sb, "const int wmi = warp %% %d, wgi = warp / %d;\n", c.wm, c.wm);
    tuner_sb_printf(&sb, "int pb[%d][2];\n", c.mt);
    tuner_sb_printf(&sb, "#pragma unroll\nfor (int m = 0; m < %d; m++)\n#pragma unroll\n  for (int h = 0; h < 2; h++) {\n",
                    c.mt);
    tuner_sb_printf(&sb, "    int i = (wmi * %d + m) * 16 + gid + 8 * h;\n", c.mt);
    tuner_sb_printf(&sb, "    if (i >= %d) i = 0;\n", c.tp * c.tq);
    tuner_sb_printf(&sb, "    pb[m][h] = ((i / %d) * %d + i %% %d) * %d%s;\n  }\n", c.tq, g.sh * c.colslots, c.tq, c.ps,
                    const_taps ? " + tig * 2" : "");
    if (!const_taps) {
        /* Each lane's k pair (ks * 16 + h * 8 + tig * 2, + 1) lies in one tap (cpg is even); its
         * offset from the pixel's slot, -1 past K. */
        tuner_sb_printf(&sb, "int toff[%d][2];\n", c.nks);
        tuner_sb_printf(&sb, "#pragma unroll\nfor (int ks = 0; ks < %d; ks++)\n#pragma unroll\n"
                             "  for (int h = 0; h < 2; h++) {\n", c.nks);
        tuner_sb_puts(&sb, "    const int k = ks * 16 + h * 8 + tig * 2;\n");
        tuner_sb_printf(&sb, "    const int tap = k / %d, ci = k %% %d, r = tap / %lld, s = tap %% %lld, cs = s * %d;\n",
                        g.cpg, g.cpg, g.S, g.S, g.dw);
        tuner_sb_printf(&sb, "    toff[ks][h] = k < %d ? (r * %d + (cs %% %d) * %d + cs / %d) * %d + ci : -1;\n  }\n", c.kk,
                        g.dh * c.colslots, g.sw, c.cpp, g.sw, c.ps);
    }
    tuner_sb_printf(&sb, "for (int t = 0; t < %d; t++) {\n", c.tiles);
    tuner_sb_puts(&sb, "  const long long tile = tile0 + t;\n");
    tuner_sb_printf(&sb, "  if (tile >= %lldLL) break;\n", c.ntiles);
    if (c.tiles > 1) {
        tuner_sb_printf(&sb, "  if (t + 1 < %d && tile + 1 < %lldLL) {\n", c.tiles, c.ntiles);
        tuner_sb_printf(&sb, "    load_tile(tile + 1, xs + ((t + 1) & 1) * %d);\n", xs_elems);
        tuner_sb_puts(&sb, "    hd_cp_async_wait<1>();\n  } else\n    hd_cp_async_wait<0>();\n");
        tuner_sb_printf(&sb, "  const %s *const xb = xs + (t & 1) * %d;\n", XT, xs_elems);
    } else {
        tuner_sb_puts(&sb, "  hd_cp_async_wait<0>();\n");
        tuner_sb_printf(&sb, "  const %s *const xb = xs;\n", XT);
    }
    tuner_sb_puts(&sb, "  __syncthreads();\n");
    tuner_sb_printf(&sb, "  const long long n = tile / %lldLL, pq = tile %% %lldLL;\n", c.ptiles * c.qtiles,
                    c.ptiles * c.qtiles);
    tuner_sb_printf(&sb, "  const long long p0 = (pq / %lldLL) * %d, q0 = (pq %% %lldLL) * %d;\n", c.qtiles, c.tp,
                    c.qtiles, c.tq);
    /* One group at a time (not unrolled): its accumulators and fragments are all a warp holds. */
    tuner_sb_printf(&sb, "#pragma unroll 1\n  for (int gj = 0; gj < %d; gj++) {\n", c.gt / c.wg);
    tuner_sb_printf(&sb, "    const int gl = wgi + gj * %d, g = g0 + gl;\n", c.wg);
    tuner_sb_printf(&sb, "    if (g >= %d) break;\n", g.groups);
    tuner_sb_printf(&sb, "    const %s *const xg = xb + gl * %d;\n", XT, g.cpg);
    tuner_sb_printf(&sb, "    const hd_u32 *const wgp = ws + gl * %d + gid * %d + tig;\n", c.nt * 8 * c.rw, c.rw);
    tuner_sb_printf(&sb, "    float acc[%d][%d][4];\n", c.mt, c.nt);
    tuner_sb_printf(&sb, "#pragma unroll\n    for (int m = 0; m < %d; m++)\n#pragma unroll\n"
                         "      for (int j = 0; j < %d; j++)\n#pragma unroll\n"
                         "        for (int e = 0; e < 4; e++) acc[m][j][e] = 0.0f;\n", c.mt, c.nt);
    for (int ks = 0; ks < c.nks; ks++) {
        tuner_sb_printf(&sb, "    {\n      hd_u32 b[%d][2];\n", c.nt);
        for (int j = 0; j < c.nt; j++)
            tuner_sb_printf(&sb, "      b[%d][0] = wgp[%d]; b[%d][1] = wgp[%d];\n", j, j * 8 * c.rw + ks * 8, j,
                            j * 8 * c.rw + ks * 8 + 4);
        tuner_sb_printf(&sb, "#pragma unroll\n      for (int m = 0; m < %d; m++) {\n        hd_u32 a[4];\n", c.mt);
        for (int h = 0; h < 2; h++) {
            const int k0 = ks * 16 + h * 8;
            for (int rr = 0; rr < 2; rr++) {
                const int reg = h * 2 + rr;
                if (const_taps) {
                    if (k0 >= c.kk) {
                        tuner_sb_printf(&sb, "        a[%d] = 0u;\n", reg);
                        continue;
                    }
                    const int tap = k0 / g.cpg, ci = k0 % g.cpg;
                    const long long off = tap_offset(&g, &c, tap / (int)g.S, tap % (int)g.S) + ci;
                    tuner_sb_printf(&sb, "        a[%d] = *reinterpret_cast<const hd_u32 *>(xg + pb[m][%d] + %lld);\n",
                                    reg, rr, off);
                } else {
                    tuner_sb_printf(&sb,
                                    "        a[%d] = toff[%d][%d] >= 0 ? *reinterpret_cast<const hd_u32 *>(xg + "
                                    "pb[m][%d] + toff[%d][%d]) : 0u;\n",
                                    reg, ks, h, rr, ks, h);
                }
            }
        }
        tuner_sb_printf(&sb, "#pragma unroll\n        for (int j = 0; j < %d; j++) %s(acc[m][j], a, b[j]);\n      }\n    }\n",
                        c.nt, MMA);
    }
    /* Epilogue: rows gid and gid + 8 of each m tile, channel pairs tig * 2 of each n tile. */
    tuner_sb_printf(&sb, "#pragma unroll\n    for (int m = 0; m < %d; m++)\n#pragma unroll\n"
                         "      for (int h = 0; h < 2; h++) {\n", c.mt);
    tuner_sb_printf(&sb, "        const int i = (wmi * %d + m) * 16 + gid + 8 * h;\n", c.mt);
    tuner_sb_printf(&sb, "        if (i >= %d) continue;\n", c.tp * c.tq);
    tuner_sb_printf(&sb, "        const long long p = p0 + i / %d, q = q0 + i %% %d;\n", c.tq, c.tq);
    tuner_sb_printf(&sb, "        if (p >= %lldLL || q >= %lldLL) continue;\n", g.P, g.Q);
    tuner_sb_printf(&sb, "        const long long row = (n * %lldLL + p) * %lldLL + q;\n", g.P, g.Q);
    tuner_sb_printf(&sb, "#pragma unroll\n        for (int j = 0; j < %d; j++) {\n", c.nt);
    tuner_sb_puts(&sb, "          const int cl = j * 8 + tig * 2;\n");
    if (g.kpg % 8)
        tuner_sb_printf(&sb, "          if (cl >= %d) continue;\n", g.kpg);
    tuner_sb_printf(&sb, "          const long long ch = (long long)g * %d + cl;\n", g.kpg);
    tuner_sb_puts(&sb, "          float o[2];\n");
    tuner__bcast_ctx ec = {op, "row", "col"};
    for (int e = 0; e < 2; e++) {
        tuner_sb_printf(&sb, "          {\n            const long long col = ch + %d;\n            (void)col;\n", e);
        tuner_sb_printf(&sb, "            float v = acc[m][j][h * 2 + %d];\n", e);
        tuner__emit_chain(&sb, op, &op->epilogue, "v", tuner__bcast_load, &ec);
        tuner_sb_printf(&sb, "            o[%d] = v;\n          }\n", e);
    }
    if (c.so && g.osz == 2)
        tuner_sb_printf(&sb, "          *reinterpret_cast<hd_u32 *>(ot + i * %d + gl * %d + cl) = hd_pack2<%s>(o[0], o[1]);\n",
                        c.os, g.kpg, OT);
    else if (c.so)
        tuner_sb_printf(&sb, "          ot[i * %d + gl * %d + cl] = hd_from_f32<%s>(o[0]);\n"
                             "          ot[i * %d + gl * %d + cl + 1] = hd_from_f32<%s>(o[1]);\n",
                        c.os, g.kpg, OT, c.os, g.kpg, OT);
    else if (pair_store)
        tuner_sb_printf(&sb, "          *reinterpret_cast<hd_u32 *>(out + row * %lldLL + ch) = hd_pack2<%s>(o[0], o[1]);\n",
                        g.K, OT);
    else
        tuner_sb_printf(&sb, "          out[row * %lldLL + ch] = hd_from_f32<%s>(o[0]);\n"
                             "          out[row * %lldLL + ch + 1] = hd_from_f32<%s>(o[1]);\n",
                        g.K, OT, g.K, OT);
    tuner_sb_puts(&sb, "        }\n      }\n  }\n");
    if (c.so) {
        /* The staged output tile leaves in 16-byte chunks, consecutive threads along a pixel's
         * channels (the chunks past the output's edge or past K stay behind). */
        const int unit = 16 / g.osz, cc = c.gt * g.kpg / unit;
        tuner_sb_puts(&sb, "  __syncthreads();\n");
        tuner_sb_printf(&sb, "  for (int i = threadIdx.x; i < %d; i += %d) {\n", c.tp * c.tq * cc, c.threads);
        tuner_sb_printf(&sb, "    const int pix = i / %d, cu = i %% %d;\n", cc, cc);
        tuner_sb_printf(&sb, "    const long long p = p0 + pix / %d, q = q0 + pix %% %d, ch = (long long)g0 * %d + cu * %d;\n",
                        c.tq, c.tq, g.kpg, unit);
        tuner_sb_printf(&sb, "    if (p >= %lldLL || q >= %lldLL || ch >= %lldLL) continue;\n", g.P, g.Q, g.K);
        tuner_sb_printf(&sb, "    hd_st16(out + ((n * %lldLL + p) * %lldLL + q) * %lldLL + ch, hd_ld16(ot + pix * %d + cu * %d));\n",
                        g.P, g.Q, g.K, c.os, unit);
        tuner_sb_puts(&sb, "  }\n");
    }
    /* The buffer just read is the next tile's next copy target (and, staged, the output tile
     * the next tile's fragments are written to). */
    if (c.tiles > 1)
        tuner_sb_puts(&sb, "  __syncthreads();\n");
    tuner_sb_puts(&sb, "}\n}\n");

    tuner__one_launch(p, op, "hd_conv2d_grouped", (unsigned)c.grid_x, (unsigned)c.threads);
    p->kernels[0].grid[1] = (unsigned)c.grid_y;
    p->kernels[0].shared_bytes = (unsigned)c.smem;
    p->source = tuner_sb_take(&sb);
    p->output_dtype = op->output.dtype;
    return p->source ? 0 : -ENOMEM;
}

/* Registers per thread, roughly: accumulators, fragments, the lane's pixel slots and offsets,
 * addresses. */
static int regs_of(const tuner__conv_geo *g, const gconv_cfg *c)
{
    int r = 40 + c->mt * c->nt * 4 + 4 + 2 * c->nt + 2 * c->mt;
    if (g->cpg % 8)
        r += 2 * c->nks;
    return r > reg_cap_of(c) ? reg_cap_of(c) : r;
}

static double grouped_predict(const tuner_op *op, const tuner_target *t, const tuner_schedule *s)
{
    const tuner_arch *a = tuner__arch(t);
    tuner__conv_geo g = tuner__conv_geo_of(op);
    gconv_cfg c;
    if (!a || !cfg_of(&g, s, &c))
        return 1e12;
    const double esz = tuner_dtype_size(op->inputs[0].dtype);
    const double outs = (double)(g.N * g.P * g.Q * g.K);
    /* DRAM: input, weights and output once (the tiles' halos and the blocks' weight copies come
     * from L2: an H200's 50 MB holds these layers' inputs), plus the epilogue's operands. */
    double dram = (double)tuner_tensor_numel(&op->inputs[0]) * esz +
                  (double)tuner_tensor_numel(&op->inputs[1]) * esz + outs * tuner_dtype_size(op->output.dtype);
    for (int i = op->n_anchor_inputs; i < op->n_inputs; i++)
        dram += (double)tuner_tensor_numel(&op->inputs[i]) * tuner_dtype_size(op->inputs[i].dtype);
    const double blocks = (double)c.grid_x * (double)c.grid_y;
    const double tiles_run = (double)c.ntiles * (double)c.grid_y;
    /* L2 -> SM: every tile's staged input (halo and the channel padding past C included) and every
     * block's weights; L2 serves about 2.5x DRAM's rate. */
    /* Direct pair stores write 4 bytes a lane, a pixel's 16 or 32 bytes per warp store: sectors
     * written in parts, at about twice the L2 traffic of the staged tile's whole chunks. */
    const double out_bytes = outs * g.osz;
    const double l2 = tiles_run * (double)c.rows_in * c.cols_in * c.ct * esz + blocks * (double)c.ws_bytes +
                      out_bytes * (c.so ? 1.0 : 2.0);
    const double l2_us = l2 / (a->dram_gbps * 1e3 * 2.5);
    /* Shared memory wavefronts per SM (128 bytes a clock at ~1.7 GHz): per warp, group and k
     * step, mt A fragments (4 loads) and nt B fragments (2 loads); and the copies in. */
    const double warp_steps = tiles_run * c.gt * c.wm * (double)c.nks;
    const double waves_lds = warp_steps * (c.mt * 4.0 + c.nt * 2.0) + l2 / 128.0 + (c.so ? 2.0 * out_bytes / 128.0 : 0.0);
    const double smem_us = waves_lds / (a->sm_count * 1.7e3);
    /* Tensor cores: every m16n8k16 issued, dummy rows and padded k included. */
    const double mmas = warp_steps * c.mt * c.nt;
    const double tc_us = mmas * 4096.0 / (a->tc_f16_tflops * 1e6);
    /* Thread-instructions: per MMA about one issue plus its loads and addresses; per output the
     * epilogue. */
    const double instr = 32.0 * (mmas * 1.5 + warp_steps * (c.mt * 4.0 + c.nt * 2.0)) +
                         outs * (8.0 + tuner__chain_instr(&op->epilogue));
    const double in_flight = (double)c.rows_in * c.cols_in * c.ct * esz / c.threads;
    double us = tuner__mem_cost_us(a, dram, blocks, c.threads, in_flight, regs_of(&g, &c), c.smem, 1.0, instr);
    /* The largest of the other limits, where it exceeds the DRAM / issue estimate, plus a
     * share of the rest: loads, MMAs and stores overlap only across blocks. */
    const double other = fmax(fmax(l2_us, smem_us), tc_us);
    const double launch = 3.0;
    const double body = us - launch;
    /* A block copies its tile in, then computes it: the copy of one overlaps the computing of
     * others on its SM, so the shorter phase hides behind the longer one except at the start
     * and end of each SM's run - over the number of tiles an SM walks (its resident blocks'
     * waves times their tiles; double-buffered blocks overlap their own). With one wave of
     * single-tile blocks the two phases add up. */
    int bps = a->max_threads_per_sm / c.threads;
    const int by_regs = a->regs_per_sm / (c.threads * regs_of(&g, &c));
    if (by_regs < bps)
        bps = by_regs;
    if (a->max_smem_per_sm / c.smem < bps)
        bps = a->max_smem_per_sm / c.smem;
    if (bps < 1)
        bps = 1;
    const double walked = fmax(1.0, blocks * c.tiles / ((double)bps * a->sm_count));
    us = launch + fmax(body, other) + fmin(body, other) / walked;
    return us;
}

/* tune:"none": the schedule of the space the model ranks first. */
static int grouped_preferred(const tuner_op *op, const tuner_target *t, tuner_schedule *ret)
{
    return tuner__model_first(&tuner__conv2d_grouped, op, t, ret);
}

const tuner_template tuner__conv2d_grouped = {
    .name = "conv2d_grouped",
    .space_signature = "conv2d_grouped v3: tp{1,2,4,8,P<=16} tq{8,16,32,Q<=32} (32..256 px or a whole image of 16+, >= 1/2 used) "
                       "gt{1..32: 32..256 ch} wm{1..8} wg{1,2,4} tiles{1,2,4,8 (>= 1 block per SM)} so{0,1 (16-byte output chunks)}; mt*nt*4 <= 64 acc, "
                       "64..512 threads, smem <= 96K; NHWC f16/bf16, groups > 1, cpg even 4..32, kpg even <= 64, "
                       "mma.sync m16n8k16 per group, input tile + weights in shared memory",
    .applies = grouped_applies,
    .enumerate = grouped_enumerate,
    .generate = grouped_generate,
    .predict_us = grouped_predict,
    .preferred = grouped_preferred,
    .default_rank = TUNER_RANK_SPECIALISED,
};
