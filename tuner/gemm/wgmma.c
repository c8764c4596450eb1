/* tuner/gemm/wgmma.c - matmul_wgmma and conv2d_wgmma: fp16/bf16 GEMM and NHWC implicit-GEMM
 * convolution on Hopper's warpgroup tensor cores (sm_90a), fp32 accumulation, operands brought in
 * by the tensor copy engine (TMA). The mbarrier, TMA and wgmma machinery (device helpers, the wgmma
 * wrapper, the ring's stage hand-over) is tuner/hopper.h's, shared with attention_wgmma.
 *
 * A program is one launch of `<name>`, persistent (one block per SM, tiles walked in grouped
 * raster order). Its TMA descriptors (tensor maps) of A and B (and, with stage_out, of the
 * output) are kernel parameters the launcher encodes from the launch's description of them
 * (wg_tmap_of, op/tmap.h) and passes by value, so the copy engine finds them in the parameter
 * bank. (Each block used to build its maps in the workspace with tensormap.replace, so that
 * every parameter was a plain pointer; the first copy came 0.6-1.4 us later per launch:
 * bench/results/2026-11-24-h100-tmap-params.) Warp-specialised warpgroups work:
 *      - warpgroup 0, the producer: one thread waits for a free stage of a `stages`-deep ring,
 *        arms its `full` mbarrier with the stage's byte count and issues the bulk tensor copies
 *        of a block_m x 64 A tile and a 64 x block_n B tile into 128-byte-swizzled shared memory;
 *        out-of-bounds box elements arrive as zeros, so edge tiles in M, N and K need no code;
 *      - warpgroups 1..consumers: wait for a full stage, issue wgmma.mma_async m64nNk16 (N =
 *        block_n) from shared-memory descriptors for each of their 64-row slices, keep one
 *        k-tile of wgmma in flight and hand the previous stage back (`empty` mbarrier), then
 *        apply the fused epilogue to the fp32 accumulators while the producer already loads
 *        the next tile, and store the results: with stage_out into a 128-byte-swizzled output
 *        tile in shared memory that one thread writes out with bulk tensor stores (clipped at
 *        the tensor's edges; with stage_out 2 half of the tile's columns at a time, so that a
 *        128x256 tile's ring can be 4 deep), else straight from registers with bounds checks.
 *    A full-size epilogue operand (an [M, N] residual or SwiGLU's up projection) is loaded by
 *    the producer too, a tile per consumer's tile into shared memory of its own or into the
 *    staged output tile, during the main loop, and read in the fragment layout (wg_plan_x).
 *    Cooperative schedules split each tile's rows between the consumers; pingpong ones give
 *    each consumer whole tiles of its own (and its own staged tile): the producer fills the
 *    ring tile after tile, and the consumers take turns at the tensor cores (named barriers),
 *    so that one's epilogue runs while the other's wgmma do. With two consumers the producer
 *    gives registers back (setmaxnreg.dec) and the consumers take them (setmaxnreg.inc).
 *    With `cluster` 2 the grid is pairs of CTAs (__cluster_dims__) working on neighbouring M
 *    tiles of one N tile: each producer loads its own A tile and half of the B tile, multicast
 *    to both CTAs (one L2 read of B per pair); each consumer warp releases a stage to both
 *    producers (a remote mbarrier arrive), and the pair meets at cluster barriers after
 *    initialising its mbarriers and before exiting. With `cluster_n` 2 the pair works on
 *    neighbouring N tiles of one M tile instead, sharing halves of the A tile the same way
 *    (decode-like shapes, where every N tile re-reads the whole A panel).
 *    With `split_k` S the launch is not persistent: one cluster of S CTAs per tile, CTA r
 *    loading and multiplying the r-th slice of the k tiles; after the main loop the consumers
 *    park their fp32 accumulators in the ring, and the cluster sums them through distributed
 *    shared memory, each CTA its share of the rows, applying the epilogue as it stores
 *    (emit_split_epilogue). For problems with fewer tiles than SMs.
 *    With `stream_k` the grid is one block per SM; the tiles of whole waves are dealt as usual
 *    and the k tiles of the rest are cut into one range per block, run backwards after its
 *    whole tiles (wg_sk_plan, emit_unit_loop): a segment that ends inside its tile leaves an
 *    fp32 partial and a flag in the workspace, one that starts inside its tile adds the
 *    partials of the lower blocks before its epilogue (emit_sk_fixup). A one-block kernel
 *    launched first clears the flags. For long runs of waves whose last is mostly empty.
 *
 * Layouts: a K-major operand (A without trans_a, B with trans_b) is one box of 64 k x rows, each
 * row 128 bytes, 8-row groups 1024 bytes apart (descriptor SBO); an MN-major operand (A with
 * trans_a, B without trans_b) is boxes of 64 mn x 64 k, one per 64 columns, 8 KiB apart
 * (descriptor LBO), 8-row k groups 1024 bytes apart (SBO), and wgmma reads it transposed (its
 * tnsp bit; fp16/bf16 allow it). The descriptors' start address moves by 32 bytes (K-major) or
 * 2 KiB (MN-major) per k16 step.
 *
 * A dynamic matmul (a named M or batch, tuner/gemm/README.md) takes the sizes after its pointers
 * and counts its tiles from them (gm_M, gm_B): the persistent loops, the raster and the grid
 * (wg_grid_rule) follow the launch's sizes, and the tensor maps' M and batch dimensions are
 * marked (tuner_tmap.sym) so that the launcher encodes them at those sizes: the copy engine then
 * zero-fills and clips a tail tile as it does a static one's. Stream-K makes its partition from
 * the tile count at launch (emit_unit_loop), with every tile whole where nothing is shared.
 *
 * FP8 matmuls (issue 41; op/op.h's MATMUL): A and B f8e4m3/f8e5m2 (any mix but e5m2 x e5m2).
 * 8-bit wgmma has no transpose bit: it reads both operands K-major (A [M,K], B [N,K] with
 * trans_b). An MN-major one (A [K,M] with trans_a, B [K,N]; wg_tnsp) is copied as it lies, boxes
 * of 128 mn x 128 k into a raw area after the stage's K-major tiles, and the producer warpgroup's
 * three spare warps transpose it into the K-major tile (emit_transposer: 4x4 byte blocks, 32-bit
 * shared loads, byte permutes and stores, conflict-free in both swizzles; with tnsp_wg four more
 * in a warpgroup of their own), then arrive on the stage's `ready` barrier, which the consumers
 * wait on instead of `full`; tiles of whole boxes along it, no CTA pairs. A stage row is still
 * 128 bytes,
 * now 128 k elements (wg_bk): the same boxes (UINT8 tensor maps), the same descriptors moving 32
 * bytes per step, four wgmma m64nNk32 .e4m3/.e5m2 per k tile instead of four k16 ones. Per-tensor,
 * per-row and per-column scales multiply the fp32 result before the epilogue's steps
 * (tuner/gemm/common.c, every store path); per-block scales (1x128, 128x128) are applied per k tile
 * in the main loop (emit_promoting_loop). An epilogue ending with a cast to FP8 stores bytes
 * (cvt.rn.satfinite), staged in boxes of 128 columns. The whole schedule space applies, the cost
 * model running the tensor cores at twice the fp16 rate on half the operand bytes.
 *
 * TMA needs 16-byte aligned rows and bases. A matmul operand without them (an odd K or N in
 * f16, an `align` under 16: tuner__gemm_problem.vec < 8) is gathered by the whole producer
 * warpgroup (emit_gather_producer): 16-byte aligned vector loads of each chunk's covering span,
 * the neighbour lane's vector by a shuffle, a funnel shift into place, st.shared into the same
 * 128-byte-swizzled stage TMA would have written, fence.proxy.async and an mbarrier arrive per
 * thread; the other operand keeps TMA. Neither operand may have a prologue (neither path
 * transforms elements); a convolution's must allow 16-byte chunks.
 *
 * conv2d_wgmma is the same kernel on the convolution's GEMM view (tuner/gemm/gemm.h): B is the
 * weight tensor, [groups][K/g][R*S*C/g] with k contiguous, loaded by TMA like a transposed
 * matmul B; the output map is (K/g, groups, N*P*Q) when grouped. A, the im2col matrix, has no
 * tensor the copy engine could address in tile mode. Where channels per group are a multiple of
 * 64 (a k tile is one window position's channels) the copy engine gathers it in im2col mode
 * (wg_im2col_a): per k tile one copy of block_m window positions (output pixels in n, p, q
 * order, the map stepping through the window corners by the strides) of 64 channels at the k
 * tile's window offset, zeros at the padding and past the last image; the producer is the
 * matmul's single thread. Otherwise the whole producer warpgroup gathers it
 * (emit_conv_producer): 16-byte cp.async copies of channel chunks, zero-filled at padding and
 * edges, into the layout TMA's 128-byte swizzle would have produced, arriving on the stage's
 * mbarrier through cp.async.mbarrier.arrive.noinc; consumers fence the generic-proxy writes
 * before wgmma reads them. An ungrouped 1x1, stride-1, unpadded convolution's A is the input
 * itself and is loaded by TMA. Channels per group must be multiples of 8 (one 16-byte chunk
 * never spans two pixels); depthwise and small-group convolutions are conv2d_direct's.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/core.h"
#include "tuner/gemm/gemm.h"
#include "tuner/hopper.h"

#define WG_BK 64        /* k elements per stage of 16-bit operands: one 128-byte swizzle row */
/* wgmma k steps per stage: a 128-byte row is four k16 steps of 16-bit elements or four k32 steps
 * of 8-bit ones, 32 bytes each. */
#define WG_KSTEPS 4
/* Load latency each TMA box row past M or N adds (the copy engine zero-fills it): fitted to
 * 64x64 tiles with 12 stages on M x 4096 x 4096 (H100: 24.3, 22.1 and 20.2 us at M = 1, 16,
 * 64; bench/results/2026-11-25-h100-model-ring). */
#define WG_OOB_ROW_US 0.011
/* Load latency a convolution's A tile adds (an im2col box or a gather of window rows): its
 * main loops needed 6-8 stages where a GEMM's with the same tile needed 4 (H100, 3x3 layers
 * of bench/results/2026-11-25-h100-model-ring). */
#define WG_CONV_LOAD_US 0.6
/* Fixed cost of splitting a convolution's k loop over a cluster (wg_predict). */
#define WG_CONV_SPLIT_US 3.0

/* Stream-K's division of a launch (stream_k 1, wg_sk_plan_of): one CTA per SM; the first
 * dp_tiles tiles are whole waves, dealt a tile per CTA and wave as without it; the sk_tiles
 * tiles after them, iters k tiles in all, are cut into `grid` equal ranges of k tiles, CTA g
 * taking [g * iters / grid, (g + 1) * iters / grid) after its whole tiles. */
typedef struct wg_sk_plan {
    long long grid, ktiles, dp_tiles, sk_tiles, iters;
} wg_sk_plan;

typedef struct wg_cfg {
    int bm, bn, stages, consumers, group;
    bool pingpong;   /* each consumer its own tiles, the two taking turns at the tensor cores */
    int unit_tiles;  /* tiles a block works on at once: 1, or 2 with pingpong (one per consumer) */
    int rows_per_wg; /* rows of a tile one consumer computes: 64 or 128 */
    int mi;          /* m64 slices per consumer warpgroup */
    int threads;
    int a_bytes, b_bytes, stage_bytes;
    /* FP8 operands given MN-major (wg_tnsp): the copy engine lands them as they lie in a raw
     * area of the stage (raw_at[which] from the stage's start, 0: none), the producer warpgroup's
     * spare warps transpose them into the K-major tile wgmma reads (emit_transposer). tma_bytes:
     * what the copies of one stage bring (its `full` barrier's expect_tx). */
    int raw_at[2];
    int tma_bytes;
    bool stage_out;  /* epilogue through shared memory and TMA stores */
    bool out_halves; /* ... staged half a tile at a time (stage_out 2): a buffer half the size,
                      * for a deeper ring beside it */
    int cluster;     /* 2: CTA pairs sharing an operand tile (TMA multicast): on neighbouring M
                      * tiles each B tile, or (pair_n) on neighbouring N tiles each A tile */
    bool pair_n;     /* ... the pair's tiles are neighbours along N (schedule cluster_n 2) */
    int split;       /* K slices of a tile: one cluster of `split` CTAs summing their partials
                      * through distributed shared memory (1: none) */
    bool stream_k;   /* the tiles past the last full wave are shared out by k tiles (wg_sk_plan) */
    /* Operands swapped (schedule swap 1, wg_swap_ok): the kernel computes C^T = B^T A^T, the
     * matmul's N on the wgmma M side (block_m) and its M on the N side (block_n, any multiple
     * of 8), so that a small or odd M is cut into tiles of 8-row steps instead of 64. The main
     * loop is the unswapped kernel's on that view (wg_kview); the epilogue stores transposed
     * (emit_swapped_store). */
    bool swap;
    /* An FP8 B given [K, N] made K-major before the GEMM by a kernel of its own
     * (schedule pretranspose 1, wg_pre_ok): the GEMM reads B^T [N, K] from the workspace by TMA
     * (wg_pview), with no transposing warps and no raw stage area. */
    bool pre;
    /* An FP8 operand transposed in the kernel (wg_tnsp) by a warpgroup of four more transposing
     * warps beside the producer's three (schedule tnsp_wg 1; one consumer warpgroup): seven
     * warps, each with its 4x4 blocks' shared-memory round trips, instead of three. */
    bool tnsp_wg;
    wg_sk_plan sk;   /* ... how (filled by wg_emit) */
    int out_bytes;   /* the staged output tiles, one per consumer's tile of a unit */
    /* Full-size epilogue operands loaded by TMA into shared memory (wg_plan_x): how many, which
     * inputs, whether each has a batch dimension; one operand tile's bytes (block_m x block_n,
     * boxes of 128-byte swizzled rows like the staged output's) and where the tiles start, from
     * the ring's start: n_x per consumer's tile of a unit, after the staged output. */
    int n_x;
    int x_in[2];
    bool x_batched[2];
    int x_bytes, x_at;
    bool x_in_out;   /* ... the one operand tile is loaded into the staged output tile instead,
                      * computed in place and stored from there (wg_plan_x) */
    int smem; /* dynamic shared memory, 1 KiB of it for aligning the ring to 1024 bytes */
} wg_cfg;

/* Whether a matmul's operand `which` (0 = A, 1 = B) is gathered by the producer warpgroup
 * (emit_gather_producer) rather than loaded by TMA: its rows (or its base) are not 16-byte
 * aligned, which the copy engine's global strides need. (FP8 operands never are: wg_supported.) */
static bool wg_gathered(const tuner__gemm_problem *p, int which)
{
    return !p->conv && p->vec[which] * tuner_dtype_size(p->dt) != 16;
}

static bool wg_any_gathered(const tuner__gemm_problem *p)
{
    return wg_gathered(p, 0) || wg_gathered(p, 1);
}

/* Whether operand `which` (0 = A, 1 = B) of an FP8 matmul is MN-major (A with trans_a, B without
 * trans_b): 8-bit wgmma has no transpose bit, so the kernel transposes its tiles in shared memory
 * before the consumers read them (emit_transposer). */
static bool wg_tnsp(const tuner__gemm_problem *p, int which)
{
    return p->fp8 && !p->kmajor[which];
}

static bool wg_any_tnsp(const tuner__gemm_problem *p)
{
    return wg_tnsp(p, 0) || wg_tnsp(p, 1);
}

/* Whether B may be transposed by a kernel of its own before the GEMM (wg_cfg.pre): an FP8 B
 * given [K, N] beside a K-major A, one matrix (not batched), K a whole number of 16-byte
 * rows (the copy's row stride). In the kernel the transposition costs three warps per stage
 * and a raw area that leaves room for three stages of a 256x128 tile: 4096^3 e4m3 ran at
 * 0.58 of cuBLAS against 1.13 K-major (bench/results/2026-11-30-h200-session16/b). Once
 * over the whole of B it is a copy of N x K bytes. */
static bool wg_pre_ok(const tuner__gemm_problem *p)
{
    return wg_tnsp(p, 1) && !wg_tnsp(p, 0) && !p->b_batched && p->K % 16 == 0;
}

/* The problem the GEMM sees: p, or with B pretransposed (wg_cfg.pre) B K-major, [N, K]. */
static const tuner__gemm_problem *wg_pview(const tuner__gemm_problem *p, bool pre, tuner__gemm_problem *q)
{
    if (!pre)
        return p;
    *q = *p;
    q->kmajor[1] = true;
    q->trans_b = true;
    return q;
}

/* k elements per stage: one 128-byte swizzle row, 64 of 16-bit operands, 128 of FP8 ones. */
static int wg_bk(const tuner__gemm_problem *p)
{
    return p->fp8 ? 128 : WG_BK;
}

/* No prologue (neither TMA nor the gather transforms elements). 16-bit: a matmul's operands may
 * have any row length and base alignment (an unaligned one is gathered: wg_gathered); a
 * convolution's must allow 16-byte vectors (TMA rows; for its A, whole 16-byte channel chunks of
 * one pixel), NHWC only. FP8 (a matmul's A and B, any mix but e5m2 x e5m2): 16-byte rows (no
 * gather); 8-bit wgmma reads both operands K-major only (no transpose bit), so an MN-major one
 * (A [K,M] with trans_a, B [K,N] without trans_b) is transposed in the kernel (wg_tnsp). */
static bool wg_supported(const tuner__gemm_problem *p)
{
    if (p->prologue[0] || p->prologue[1])
        return false;
    if (p->fp8)
        return !p->conv && !(p->dt == TUNER_F8E5M2 && p->dt_b == TUNER_F8E5M2) &&
               p->vec[0] == 16 && p->vec[1] == 16;
    /* The gather indexes input pixels with 32-bit integers. */
    const bool conv_ok = !p->conv || (!p->nchw && p->cn * p->ch * p->cw < (1LL << 31) && p->vec[0] == 8 && p->vec[1] == 8);
    return (p->dt == TUNER_F16 || p->dt == TUNER_BF16) && conv_ok;
}

/* Whether a convolution's A is the input itself: an ungrouped 1x1 convolution with stride 1 and
 * no padding reads a dense [N*H*W, C] matrix, which TMA loads like a matmul's. */
static bool wg_dense_a(const tuner__gemm_problem *p)
{
    return p->cr == 1 && p->cs == 1 && p->sh == 1 && p->sw == 1 && p->ph == 0 && p->pw == 0 && p->batch == 1;
}

/* Whether the copy engine gathers a convolution's A in im2col mode (wg_tmap_of): one copy per k
 * tile, block_m window positions of the tile's 64 channels at one (r, s). A k tile must then lie
 * within one window position and one group (channels per group a multiple of 64), and the
 * geometry must fit a rank-4 im2col map: corners (-padding, padding - dilation * (window - 1))
 * in [-128, 127], strides up to 8; the window offsets (r * dilation_h, s * dilation_w) are kept
 * below 128. */
static bool wg_im2col_a(const tuner__gemm_problem *p)
{
    if (!p->conv || wg_dense_a(p) || p->cgc % WG_BK)
        return false;
    const long long off_h = (long long)p->dh * (p->cr - 1), off_w = (long long)p->dw * (p->cs - 1);
    return p->sh <= 8 && p->sw <= 8 && p->ph <= 128 && p->pw <= 128 && off_h < 128 && off_w < 128 &&
           p->ph - off_h >= -128 && p->pw - off_w >= -128;
}

/* Whether the producer warpgroup gathers a convolution's A (im2col) with cp.async: where neither
 * a dense A nor an im2col map applies (channels per group not a multiple of 64, ...). */
static bool wg_gathers_a(const tuner__gemm_problem *p)
{
    return p->conv && !wg_dense_a(p) && !wg_im2col_a(p);
}

/* Whether operand `which` (0 = A, 1 = B, 2 = the output) has a batch (matmul) or group (conv2d)
 * dimension in its tensor map. A convolution's input is gathered by the producer (im2col), its
 * weights are [groups][K/g][R*S*C/g] and its output rows hold every group's channels. */
static bool wg_map_batched(const tuner__gemm_problem *p, int which)
{
    if (p->conv)
        return which != 0 && p->batch > 1;
    return which == 2 ? p->op->output.rank == 3 : which == 0 ? p->a_batched : p->b_batched;
}

/* Whether a matmul may run with swapped operands (wg_cfg.swap): unbatched 2-D operands and
 * output, A K-major (it becomes the kernel's B, whose tile rows are then any multiple of 8) and
 * both loaded by TMA; no quantize step's amax (its flush is the staged store's). 16-bit, or FP8
 * with both operands K-major (nothing to transpose in the kernel), a 16- or 32-bit output and the
 * scales applied in the epilogue (tensor, row or column: at the output's coordinates, which the
 * transposed store keeps); not promoted per k tile (per-block scales and slow accumulation index
 * their scales by the kernel's rows). */
static bool wg_swap_ok(const tuner__gemm_problem *p)
{
    const bool fp8_ok = !p->fp8 || (!wg_any_tnsp(p) && !p->promote && !tuner_dtype_is_fp8(p->out_dt));
    return !p->conv && fp8_ok && p->batch == 1 && !p->batch_sym && !p->a_batched && !p->b_batched &&
           p->op->output.rank == 2 && p->kmajor[0] && !wg_any_gathered(p) && p->amax_in < 0;
}

/* The problem the kernel's main loop sees: p itself, or with swapped operands its transpose,
 * C^T[N, M] = B^T A^T: operand 0 is B (K-major where B is [N, K]), operand 1 is A, M and N
 * exchanged. The matmul's named M (if any) is then the kernel's N; the view keeps it out of
 * m_sym (what sizes the kernel's M side at launch), and the swapped paths of emit_unit_loop,
 * wg_grid_rule and wg_kernel_tmap count tiles and encode maps from the matmul's own M. */
static const tuner__gemm_problem *wg_kview(const tuner__gemm_problem *p, const wg_cfg *c, tuner__gemm_problem *q)
{
    if (!c->swap)
        return p;
    *q = *p;
    q->M = p->N;
    q->N = p->M;
    q->dt = p->dt_b;
    q->dt_b = p->dt;
    q->kmajor[0] = p->kmajor[1];
    q->kmajor[1] = p->kmajor[0];
    q->vec[0] = p->vec[1];
    q->vec[1] = p->vec[0];
    q->m_sym = 0;
    q->m_multiple = p->N;
    q->n_multiple = p->m_multiple;
    return q;
}

/* A swapped pair (cluster_n 2 with swap: neighbouring tiles of the matmul's M, one B tile) whose
 * shared operand 0 (k: the kernel's view) is MN-major in a 64-row tile - a single 64-column box
 * per k tile, no half of which is a box - multicasts halves of the box's k rows instead: each
 * CTA loads 32 of the stage's 64 (a 1024-byte-aligned 4 KiB half, so the 128-byte swizzle is
 * the whole box's). cuBLAS's kernel for [100,4096] x [4096,4096] is such a pair of 64x56 tiles
 * (nvjet_sm90_hsh_64x56_64x14_1x2, 128 CTAs; bench/results/2026-11-30-h200-session17/g). On the
 * H200, with the weights hot in L2, that pair ran 12.6-12.8 us in two processes where the
 * unpaired 64x56 ran 14.6 (its two speeds, 11.8-14.9, follow where its buffers land) and cuBLAS
 * 12.6-12.8; with inputs rotated past L2 13.1 against cuBLAS's 12.4 (session17/h). */
static bool wg_pair_k_halves(const tuner__gemm_problem *k, const wg_cfg *c)
{
    return c->swap && c->pair_n && !k->kmajor[0] && c->bm == 64;
}

static int cfg_from(const tuner__gemm_problem *p, const tuner_schedule *s, wg_cfg *c)
{
    memset(c, 0, sizeof(*c));
    c->bm = tuner_schedule_param(s, "block_m", 0);
    c->bn = tuner_schedule_param(s, "block_n", 0);
    c->stages = tuner_schedule_param(s, "stages", 0);
    c->consumers = tuner_schedule_param(s, "consumers", 0);
    c->group = tuner_schedule_param(s, "swizzle", 1);
    const int pp = tuner_schedule_param(s, "pingpong", 0);
    if ((pp != 0 && pp != 1) || (pp && c->consumers != 2))
        return -EINVAL;
    c->pingpong = pp == 1;
    const int so = tuner_schedule_param(s, "stage_out", 0);
    if (so < 0 || so > 2)
        return -EINVAL;
    c->stage_out = so != 0;
    c->out_halves = so == 2;
    c->cluster = tuner_schedule_param(s, "cluster", 1);
    if (c->cluster != 1 && c->cluster != 2)
        return -EINVAL;
    const int cn = tuner_schedule_param(s, "cluster_n", 1);
    if ((cn != 1 && cn != 2) || (cn == 2 && c->cluster != 1))
        return -EINVAL;
    if (cn == 2) {
        c->cluster = 2;
        c->pair_n = true;
    }
    c->split = tuner_schedule_param(s, "split_k", 1);
    if (c->split < 1 || c->split > 8 || (c->split > 1 && (c->cluster != 1 || c->pingpong || c->stage_out)))
        return -EINVAL;
    const int sk = tuner_schedule_param(s, "stream_k", 0);
    if ((sk != 0 && sk != 1) || (sk && (c->cluster != 1 || c->pingpong || c->split > 1)))
        return -EINVAL;
    c->stream_k = sk == 1;
    const int sw = tuner_schedule_param(s, "swap", 0);
    /* (Swapped pairs are N pairs: neighbouring tiles of the matmul's M sharing its B tile.) */
    if ((sw != 0 && sw != 1) || (sw && (c->out_halves || (c->cluster != 1 && !c->pair_n) || c->stream_k)))
        return -EINVAL;
    c->swap = sw == 1;
    const int pre = tuner_schedule_param(s, "pretranspose", 0);
    /* (Stream-K's flags and partials would share the workspace with B^T.) */
    if ((pre != 0 && pre != 1) || (pre && (!wg_pre_ok(p) || c->stream_k)))
        return -EINVAL;
    c->pre = pre == 1;
    tuner__gemm_problem pq;
    p = wg_pview(p, c->pre, &pq);
    c->unit_tiles = c->pingpong ? 2 : 1;
    if (c->consumers < 1 || c->consumers > 2 || c->stages < 2 || c->stages > 12 || c->group < 1)
        return -EINVAL;
    /* block_n is wgmma's N: multiples of 64 (whole 128-byte output boxes, 64-column B boxes),
     * or with swapped operands (K-major B rows, register stores) any multiple of 8. */
    if (c->bm % (64 * (c->pingpong ? 1 : c->consumers)) || c->bn % (c->swap ? 8 : 64) || c->bn < (c->swap ? 8 : 64) ||
        c->bn > 256)
        return -EINVAL;
    c->rows_per_wg = c->pingpong ? c->bm : c->bm / c->consumers;
    c->mi = c->rows_per_wg / 64;
    if (c->mi < 1 || c->mi > 2)
        return -EINVAL;
    const int tw = tuner_schedule_param(s, "tnsp_wg", 0);
    if (tw != 0 && tw != 1)
        return -EINVAL;
    c->tnsp_wg = tw == 1;
    c->threads = 128 * (1 + c->consumers + (c->tnsp_wg ? 1 : 0));
    c->a_bytes = c->bm * 128; /* 128-byte rows: WG_BK 16-bit or 128 8-bit elements */
    c->b_bytes = c->bn * 128;
    c->stage_bytes = c->a_bytes + c->b_bytes;
    c->tma_bytes = c->stage_bytes;
    /* A transposed operand's raw tile (the same bytes, MN-major) after the K-major tiles: the
     * copies land there instead, so the bytes they bring stay the same. */
    for (int w = 0; w < 2; w++)
        if (wg_tnsp(p, w)) {
            c->raw_at[w] = c->stage_bytes;
            c->stage_bytes += w == 0 ? c->a_bytes : c->b_bytes;
        }
    /* A split tile's fp32 partial is parked in the ring once the main loop is done with it. */
    const int ring = c->stages * c->stage_bytes, partial = c->split > 1 ? c->bm * tuner__gemm_partial_row_bytes(c->bn) : 0;
    c->smem = (ring > partial ? ring : partial) + 1024;
    if (c->stage_out) {
        c->out_bytes = c->unit_tiles * c->bm * c->bn * tuner_dtype_size(p->out_dt) / (c->out_halves ? 2 : 1);
        c->smem += c->out_bytes;
    }
    return 0;
}

/* Output elements per 128-byte row of a staged output box. */
static int out_box_cols(const tuner__gemm_problem *p)
{
    return 128 / tuner_dtype_size(p->out_dt);
}

/* Which full-size epilogue operands (tuner__gemm_tile_operand: [M, N] like the output, its
 * dtype, 16-byte rows) c's kernel loads by TMA into shared memory tiles of their own, one per
 * consumer's tile of a unit, instead of reading them per fragment from global memory in the
 * epilogue. Measured on an H200, those reads cost the SwiGLU gate 4096x11008x4096 (silu, then mul
 * by an [M, N] operand) +21% over the bare GEMM's 556 us, where the operand's DRAM time is ~19
 * us: each thread's 4-byte reads (16 bytes per row per quad, half a sector) after the main loop,
 * stalled on L1TEX with the tensor cores idle (ncu; bench/results/2026-11-29-h200-kernel-gaps).
 * The producer issues the tile's copy once the tile's first k stages are under way, so it
 * arrives during the main loop. Only where the tiles fit beside the ring and the staged output
 * (else the operand keeps the global path), at most one tensor map per launch past A, B and the
 * output's (TUNER_MAX_TMAPS), never in a split-K cluster (its epilogue is the cluster sum's).
 * Where no tile of its own fits (128x256 and 128x192 tiles with their ring and a whole staged
 * output: the schedules of the bare GEMMs at LLM sizes, bench/results/2026-11-29-h200-kernel-gaps)
 * the operand is loaded into the staged output tile itself (x_in_out): each thread reads its pair
 * and writes the result in its place, the TMA store reads the tile from there, and the slot is
 * free for the next tile's copy once that store has read it (the storer waits for it and
 * arrives on the slot's `empty` barrier). */
static void wg_plan_x(const tuner__gemm_problem *p, const tuner_arch *a, wg_cfg *c)
{
    c->n_x = 0;
    c->x_in_out = false;
    /* (A swapped kernel's tiles are the output's transpose: its epilogue reads operands per
     * element, emit_swapped_store.) */
    if (c->swap)
        return;
    /* (A gathering producer warpgroup - a convolution's A, or a matmul's unaligned operand -
     * issues no copies of the operand tiles: emit_x_load is the TMA producer's.) */
    if (c->split > 1 || wg_gathers_a(p) || wg_any_gathered(p) || p->fp8)
        return;
    const int maps = 2 + (c->stage_out ? 1 : 0); /* A's, B's and the staged output's */
    const int tile = c->bm * c->bn * tuner_dtype_size(p->out_dt);
    for (int i = 0; i < p->op->n_inputs && c->n_x < 2 && maps + c->n_x < TUNER_MAX_TMAPS; i++) {
        bool batched = false;
        if (!tuner__gemm_tile_operand(p, i, &batched))
            continue;
        /* The ring, the staged output and the operand tiles, then the static barriers: the
         * ring's and a full/empty pair per operand tile slot. */
        const int need = c->smem + (c->n_x + 1) * c->unit_tiles * tile + 16 * (c->stages + c->unit_tiles);
        if (need > a->max_smem_per_block)
            break;
        c->x_in[c->n_x] = i;
        c->x_batched[c->n_x] = batched;
        c->n_x++;
    }
    if (c->n_x) {
        c->x_bytes = tile;
        c->x_at = c->smem - 1024; /* the ring (or split partial) region and the staged output */
        c->smem += c->n_x * c->unit_tiles * tile;
        return;
    }
    /* In the staged output tile: a whole one (stage_out 1), of the operand's element size. */
    if (!c->stage_out || c->out_halves || c->smem + 16 * (c->stages + c->unit_tiles) > a->max_smem_per_block)
        return;
    for (int i = 0; i < p->op->n_inputs; i++) {
        bool batched = false;
        if (!tuner__gemm_tile_operand(p, i, &batched))
            continue;
        c->n_x = 1;
        c->x_in[0] = i;
        c->x_batched[0] = batched;
        c->x_bytes = tile;
        c->x_at = c->smem - 1024 - c->out_bytes;
        c->x_in_out = true;
        return;
    }
}

/* cfg_from, then the operand tiles for a (wg_plan_x). */
static int cfg_of(const tuner__gemm_problem *p, const tuner_arch *a, const tuner_schedule *s, wg_cfg *c)
{
    const int rc = cfg_from(p, s, c);
    if (rc == 0)
        wg_plan_x(p, a, c);
    return rc;
}

/* Fills k for c's tiles on a; false where stream-K has nothing to share out (the tiles fill
 * whole waves) or too little (fewer than 4 k tiles per CTA). A remainder of less than half a
 * wave is shared out together with the wave before it: the same work per CTA, but each tile
 * cut into two or three ranges instead of many (fewer partial tiles to sum per tile). */
static bool wg_sk_plan_of(const tuner__gemm_problem *p, const tuner_arch *a, const wg_cfg *c, wg_sk_plan *k)
{
    const long long tiles = p->batch * tuner__gemm_cdiv(p->M, c->bm) * tuner__gemm_cdiv(p->N, c->bn);
    k->grid = a->sm_count;
    k->ktiles = tuner__gemm_cdiv(p->K, wg_bk(p));
    const long long rem = tiles % k->grid;
    if (tiles >= k->grid && rem == 0)
        return false;
    if (tiles < k->grid)
        k->sk_tiles = tiles;
    else
        k->sk_tiles = 2 * rem < k->grid ? rem + k->grid : rem;
    k->dp_tiles = tiles - k->sk_tiles;
    k->iters = k->sk_tiles * k->ktiles;
    return k->iters / k->grid >= 4;
}

/* Stream-K's workspace: a u32 flag per CTA at its start (zeroed by the set's first kernel, set
 * when the CTA's partial tile is written), then, from this offset, a partial tile of fp32
 * accumulators per CTA. */
static long long wg_sk_parts_at(const wg_sk_plan *k)
{
    return (k->grid * 4 + 127) / 128 * 128;
}

static int wg_gather_chunks(const tuner__gemm_problem *p, const wg_cfg *c);

static bool cfg_valid(const tuner__gemm_problem *p, const tuner_arch *a, const wg_cfg *c)
{
    tuner__gemm_problem pq;
    p = wg_pview(p, c->pre, &pq);
    if (c->swap && !wg_swap_ok(p))
        return false;
    tuner__gemm_problem kq;
    p = wg_kview(p, c, &kq);
    /* fp32 accumulators per consumer thread: mi * block_n / 2; past 128 the consumer spills. */
    if (c->mi * c->bn / 2 > 128)
        return false;
    /* Staging needs 16-byte output rows (TMA strides), and whole 128-byte boxes of the tile's
     * columns (64 of 16-bit outputs; 128 of FP8 ones: block_n 128 or more); a swapped tile's
     * output columns are its rows (block_m). */
    if (c->stage_out && (!p->out_chunk || (c->swap ? c->bm : c->bn) % out_box_cols(p)))
        return false;
    /* Promoted FP8 k tiles (emit_promoting_loop): a k tile's own accumulators beside the
     * tile's (at most 64 + 64 registers); per-block scales: a tile within one 128-column n block. */
    if (p->promote && (c->mi * c->bn / 2 > 64 || (p->block_scales && c->bn != 64 && c->bn != 128)))
        return false;
    /* Halves are whole output boxes, and only where the whole staged tile leaves no room for
     * this ring (else stage_out 1 is the same schedule with fewer barriers). */
    if (c->out_halves && ((c->bn / out_box_cols(p)) % 2 ||
                          c->smem + c->out_bytes + 16 * c->stages <= a->max_smem_per_block))
        return false;
    /* A pair multicasts half of the B tile each: whole 64-column boxes (MN-major) or halves of
     * 64 rows or more (K-major); one ring per CTA. */
    if (c->cluster == 2 && !c->pair_n && (c->pingpong || c->bn % 128))
        return false;
    /* An N pair multicasts half of the A tile each: halves of its rows (K-major) or whole
     * 64-column boxes (M-major; a swapped 64-row tile's one box is halved along k instead,
     * wg_pair_k_halves); a convolution's A is a matrix only when dense. */
    if (c->pair_n && (c->pingpong || (!p->kmajor[0] && c->bm % 128 && !wg_pair_k_halves(p, c)) ||
                      (p->conv && !wg_dense_a(p))))
        return false;
    /* Swapped pairs are 16-bit: FP8 ones have not run on a GPU (the emulator has no clusters). */
    if (c->swap && c->pair_n && p->fp8)
        return false;
    /* A convolution's gathering producer warpgroup fills one ring. */
    if (wg_gathers_a(p) && c->pingpong)
        return false;
    /* A matmul's gathering producer (unaligned operands) likewise, without multicast. Its
     * threads hold two k tiles' chunks, 8 registers each (emit_gather_producer): at most 8
     * chunks beside two consumers (168 registers for every warpgroup, wg_producer_regs; ptxas
     * -v: a 128x256 tile's consumers fit without spilling), 12 beside one (255 registers per
     * thread). */
    if (wg_any_gathered(p) &&
        (c->pingpong || c->cluster == 2 || wg_gather_chunks(p, c) > (c->consumers == 2 ? 8 : 12)))
        return false;
    /* The gather keeps a pixel index and a window mask per row in registers: at most 8 rows
     * per producer thread (block_m 128), at most 32 window positions. */
    if (wg_gathers_a(p) && (c->bm > 128 || p->cr * p->cs > 32))
        return false;
    /* A transposed FP8 operand (wg_tnsp) arrives in boxes of 128 mn x 128 k (128-byte rows
     * along mn, the 128-byte swizzle's), so its tile's mn extent is whole boxes; the transposers
     * fill their own CTA's tiles only, so no pair shares one by multicast. */
    if ((wg_tnsp(p, 0) && c->bm % 128) || (wg_tnsp(p, 1) && c->bn % 128) || (wg_any_tnsp(p) && c->cluster == 2))
        return false;
    /* A warpgroup of transposing warps more: only where something is transposed, beside one
     * cooperative consumer warpgroup (three warpgroups share the register file without
     * setmaxnreg: 168 registers each, room for at most 64 accumulators). */
    if (c->tnsp_wg && (!wg_any_tnsp(p) || c->consumers != 1 || c->pingpong || c->mi * c->bn / 2 > 64))
        return false;
    /* Dynamic ring (+ staged tile, + operand tiles) + the static barriers (+ the transposed
     * stages' `ready` ones). */
    if (c->smem + 16 * c->stages + (c->n_x ? 16 * c->unit_tiles : 0) + (wg_any_tnsp(p) ? 8 * c->stages : 0) >
        a->max_smem_per_block)
        return false;
    if (c->threads > a->max_threads_per_block)
        return false;
    /* A TMA box is at most 256 elements along each dimension (K-major boxes are block rows). */
    if (c->bm > 256 || c->bn > 256)
        return false;
    const long long tiles = p->batch * tuner__gemm_cdiv(p->M, c->bm) * tuner__gemm_cdiv(p->N, c->bn);
    if (c->split > 1) {
        /* One cluster per tile, all resident at once (a launch of tiles x split CTAs, not a
         * persistent grid): split-K is for problems with too few tiles to fill the SMs. On an
         * H100 32 clusters of 4 exceed the 30 that fit, and ran 1.3x slower than 3 slices
         * (bench/results/2026-11-24-h100-wgmma-split). Every slice gets at least two k tiles. */
        const long long ktiles = tuner__gemm_cdiv(p->K, wg_bk(p)), kper = tuner__gemm_cdiv(ktiles, c->split);
        if (tiles > tuner__arch_cluster_fit(a, c->split) || kper < 2 || (c->split - 1) * kper >= ktiles)
            return false;
    }
    /* Stream-K's partition (wg_sk_plan) is cut from the tile count: a static op's must share
     * something out. A dynamic op's is cut at launch (emit_unit_loop), its tiles whole at sizes
     * with nothing to share: it needs k tiles enough that a shared half wave holds 4 per block,
     * and a fixed K (the k tiles are compiled in). */
    wg_sk_plan k;
    if (c->stream_k && (p->dynamic ? p->k_sym || tuner__gemm_cdiv(p->K, wg_bk(p)) < 8 : !wg_sk_plan_of(p, a, c, &k)))
        return false;
    return tiles <= 0x7fffffffLL;
}

/* ---- code generation ---- */

/* The device helpers (mbarriers, TMA, wgmma, descriptors) are tuner/hopper.h's. */

/* An FP8 wgmma wrapper `fname`: m64nNk32 with e4m3/e5m2 operands (each its own type), both K-major
 * (the FP8 form has no transpose bits), A and B unscaled (imm-scale 1); scale_d 1: d += A*B, 0:
 * d = A*B. */
static void emit_fp8_mma_fn(tuner_sb *sb, const tuner__gemm_problem *p, const char *fname, int n, int scale_d)
{
    const int nacc = n / 2;
    const char *ta = p->dt == TUNER_F8E4M3 ? "e4m3" : "e5m2", *tb = p->dt_b == TUNER_F8E4M3 ? "e4m3" : "e5m2";
    tuner_sb_printf(sb, "HD_INLINE void %s(float *d, hd_u64 da, hd_u64 db) {\nasm volatile(\"{\\n"
                        ".reg .pred p;\\nsetp.ne.b32 p, %%%d, 0;\\n"
                        "wgmma.mma_async.sync.aligned.m64n%dk32.f32.%s.%s {",
                    fname, nacc + 2, n, ta, tb);
    for (int i = 0; i < nacc; i++)
        tuner_sb_printf(sb, "%s%%%d", i ? ", " : "", i);
    tuner_sb_printf(sb, "}, %%%d, %%%d, p, 1, 1;\\n}\\n\"\n: ", nacc, nacc + 1);
    for (int i = 0; i < nacc; i++)
        tuner_sb_printf(sb, "%s\"+f\"(d[%d])", i ? ", " : "", i);
    tuner_sb_printf(sb, "\n: \"l\"(da), \"l\"(db), \"r\"(%d) : \"memory\");\n}\n", scale_d);
}

/* The wgmma wrapper for one instruction shape: d (n/2 floats per thread) += A(desc) * B(desc). */
static void emit_mma_fn(tuner_sb *sb, const tuner__gemm_problem *p, int n)
{
    if (p->fp8) {
        emit_fp8_mma_fn(sb, p, "wg_mma", n, 1);
        if (p->promote)
            emit_fp8_mma_fn(sb, p, "wg_mma_z", n, 0); /* a k block's first step: d = A*B */
        return;
    }
    /* tnsp bits: 1 reads the operand MN-major (transposed); A is K-major unless trans_a, B is
     * K-major only with trans_b. Always accumulate (the accumulators are zeroed per tile). */
    tuner__hopper_emit_mma_fn(sb, "wg_mma", p->dt, n, false, p->kmajor[0] ? 0 : 1, p->kmajor[1] ? 0 : 1, false);
}

/* Whether the kernel takes a tensor map of operand `which` (0 = A, 1 = B, 2 = the output): a
 * gathered A has none, the output one only when the epilogue stores it with TMA. */
static bool wg_has_map(const tuner__gemm_problem *p, const wg_cfg *c, int which)
{
    return which == 0 ? !wg_gathers_a(p) && !wg_gathered(p, 0) : which == 1 ? !wg_gathered(p, 1) : c->stage_out;
}

/* The tensor map of operand `which` (0 = A, 1 = B) or, with which 2, of the output written by
 * the staged epilogue: a kernel parameter the launcher encodes (op/tmap.h). Dimension 0 is the
 * contiguous one; a batch or group dimension comes last, except in a grouped convolution's
 * output, where a row of M holds every group's channels: (K/g, groups, M). Boxes are 128-byte
 * swizzled; out-of-bounds elements read 0 (and are not written). */
static void wg_tmap_of(const tuner__gemm_problem *p, const wg_cfg *c, int which, tuner_tmap *ret)
{
    if (which == 0 && wg_im2col_a(p)) {
        /* The NHWC input as (C, W, H, N), in im2col mode: a copy at a tile's first output
         * pixel (its window's corner, stepping by the strides through the bounding box of
         * window corners, image after image) reads block_m pixels of 64 channels, each at the
         * k tile's window offset (emit_tma_operand); padding and rows past the last image read
         * zeros. */
        const uint64_t pixel = (uint64_t)p->cc * (uint64_t)tuner_dtype_size(p->dt);
        *ret = (tuner_tmap){
            .buf = TUNER_BUF_INPUT0,
            .mode = TUNER_TMAP_IM2COL,
            .dtype = p->dt,
            .rank = 4,
            .dims = {(uint64_t)p->cc, (uint64_t)p->cw, (uint64_t)p->ch, (uint64_t)p->cn},
            .strides = {pixel, pixel * (uint64_t)p->cw, pixel * (uint64_t)p->cw * (uint64_t)p->ch},
            .element_strides = {1, (uint32_t)p->sw, (uint32_t)p->sh, 1},
            .lower_corner = {-p->pw, -p->ph},
            .upper_corner = {(int32_t)(p->pw - p->dw * (p->cs - 1)), (int32_t)(p->ph - p->dh * (p->cr - 1))},
            .channels_per_pixel = WG_BK,
            .pixels_per_column = (uint32_t)c->bm,
            .swizzle = 128,
        };
        return;
    }
    const bool out = which == 2;
    const bool batched = wg_map_batched(p, which);
    const long long mn = which == 0 ? p->M : p->N;
    const bool kmaj = out ? false : p->kmajor[which];
    /* With a cluster pair each CTA loads half of a K-major shared tile's rows (B's, or A's in an
     * N pair), or of an MN-major one-box tile's k rows (wg_pair_k_halves). */
    const bool halved = kmaj && c->cluster == 2 && (which == 0) == c->pair_n;
    const bool k_halved = !out && which == 0 && wg_pair_k_halves(p, c);
    const int rows = (which == 0 ? c->bm : c->bn) / (halved ? 2 : 1);
    const tuner_dtype dt = out ? p->out_dt : which == 1 ? p->dt_b : p->dt;
    const int esz = tuner_dtype_size(dt);
    const long long d0 = out ? p->N : kmaj ? p->K : mn, d1 = out ? p->M : kmaj ? mn : p->K;
    tuner_tmap m = {
        .buf = out ? TUNER_BUF_OUTPUT : TUNER_BUF_INPUT0 + which,
        .dtype = dt,
        .rank = batched ? 3 : 2,
        .dims = {(uint64_t)d0, (uint64_t)d1, (uint64_t)p->batch},
        .strides = {(uint64_t)(d0 * esz), (uint64_t)(d0 * d1 * esz)},
        /* MN-major boxes: 128 bytes of mn (64 16-bit elements; 128 FP8 ones, transposed in the
         * kernel: wg_tnsp) x the stage's k. */
        .box = {(uint32_t)(out ? out_box_cols(p) : kmaj ? wg_bk(p) : 128 / esz),
                (uint32_t)(out ? c->bm : kmaj ? rows : wg_bk(p) / (k_halved ? 2 : 1)), 1},
        .element_strides = {1, 1, 1},
        .swizzle = 128,
    };
    if (out && p->conv && batched) {
        m.dims[1] = (uint64_t)p->batch;
        m.dims[2] = (uint64_t)p->M;
        m.box[1] = 1;
        m.box[2] = (uint32_t)c->bm;
        m.strides[1] = (uint64_t)(p->ck * esz);
    }
    /* A dynamic matmul's M (A's rows: a named M is never transposed; the output's) and batch
     * dimensions are the launch's: the launcher encodes them from the sizes (op/tmap.h), and
     * the copy engine zero-fills rows past M and drops the stores there. */
    if (p->m_sym && which != 1) {
        m.sym[1] = (uint8_t)p->m_sym;
        m.sym_coef[1] = 1;
    }
    if (p->batch_sym && batched) {
        m.sym[2] = (uint8_t)p->batch_sym;
        m.sym_coef[2] = 1;
    }
    *ret = m;
}

/* The tensor map of the kernel's operand `which` (or the output, 2): wg_tmap_of on the kernel's
 * view k of the matmul p (wg_kview). Swapped, operand 0 is the matmul's B (input 1) and operand
 * 1 its A (input 0), [M, K] K-major (wg_swap_ok), whose rows (dims[1]) a named M sizes. */
static void wg_kernel_tmap(const tuner__gemm_problem *p, const tuner__gemm_problem *k, const wg_cfg *c, int which,
                           tuner_tmap *ret)
{
    if (c->swap && which == 2) {
        /* The staged output: the matmul's [M, N] in boxes of 128-byte rows x block_n rows of M. */
        wg_tmap_of(p, c, 2, ret);
        ret->box[1] = (uint32_t)c->bn;
        return;
    }
    wg_tmap_of(k, c, which, ret);
    if (!c->swap)
        return;
    ret->buf = TUNER_BUF_INPUT0 + (which == 0 ? 1 : 0);
    if (p->m_sym && which == 1) {
        ret->sym[1] = (uint8_t)p->m_sym;
        ret->sym_coef[1] = 1;
    }
}

/* The tensor map of operand tile k (wg_plan_x): input x_in[k] as (N, M[, batch]), boxes of the
 * staged output's (128-byte rows x block_m rows, 128-byte swizzle), a named M or batch marked as
 * in the output's map; rows past M and columns past N read zeros. */
static void wg_tmap_x(const tuner__gemm_problem *p, const wg_cfg *c, int k, tuner_tmap *ret)
{
    const tuner_tensor *t = &p->op->inputs[c->x_in[k]];
    const int esz = tuner_dtype_size(t->dtype);
    const bool batched = c->x_batched[k];
    tuner_tmap m = {
        .buf = TUNER_BUF_INPUT0 + c->x_in[k],
        .dtype = t->dtype,
        .rank = batched ? 3 : 2,
        .dims = {(uint64_t)p->N, (uint64_t)p->M, (uint64_t)p->batch},
        .strides = {(uint64_t)(p->N * esz), (uint64_t)(p->N * p->M * esz)},
        .box = {(uint32_t)(128 / esz), (uint32_t)c->bm, 1},
        .element_strides = {1, 1, 1},
        .swizzle = 128,
    };
    if (t->rank == 2 && t->sym[0]) {
        m.sym[1] = (uint8_t)t->sym[0];
        m.sym_coef[1] = 1;
    }
    if (batched && t->sym[0]) {
        m.sym[2] = (uint8_t)t->sym[0];
        m.sym_coef[2] = 1;
    }
    *ret = m;
}

/* The kernel's parameters: the inputs' and the output's pointers, the workspace's when stream-K
 * uses one, then the tensor maps (wg_has_map: A unless gathered, B, the output with stage_out),
 * passed by value so that the copy engine reads them from the parameter bank. */
static void emit_signature(tuner_sb *sb, const tuner__gemm_problem *p, const wg_cfg *c, const char *name, int threads,
                           int min_blocks, int cluster)
{
    const tuner_op *op = p->op;
    tuner_sb_printf(sb, "extern \"C\" __global__ void __launch_bounds__(%d, %d) ", threads, min_blocks);
    if (cluster > 1) /* consecutive blockIdx.x */
        tuner_sb_printf(sb, "__cluster_dims__(%d, 1, 1) ", cluster);
    tuner_sb_printf(sb, "%s(", name);
    for (int i = 0; i < op->n_inputs; i++)
        tuner_sb_printf(sb, "const %s *__restrict__ in%d, ", tuner__ctype(op->inputs[i].dtype), i);
    tuner_sb_printf(sb, "%s *__restrict__ out", tuner__ctype(p->out_dt));
    if (c->stream_k)
        tuner_sb_puts(sb, ", float *__restrict__ ws");
    /* A dynamic op's sizes (tuner__gemm_set_launch puts them after the pointers). */
    tuner__emit_dim_params(sb, op);
    static const char *const map_names[] = {"wg_tm_a", "wg_tm_b", "wg_tm_c"};
    static const char *const map_addrs[] = {"wg_map_a", "wg_map_b", "wg_map_c"};
    static const char *const x_names[] = {"wg_tm_x0", "wg_tm_x1"}, *const x_addrs[] = {"wg_map_x0", "wg_map_x1"};
    for (int i = 0; i < 3; i++)
        if (wg_has_map(p, c, i))
            tuner__hopper_emit_map_param(sb, map_names[i]);
    for (int k = 0; k < c->n_x; k++) /* the operand tiles' maps (wg_tmap_x) */
        tuner__hopper_emit_map_param(sb, x_names[k]);
    tuner_sb_puts(sb, ")\n{\n");
    /* Generic addresses of the parameters, as the bulk tensor copies take them. */
    for (int i = 0; i < 3; i++)
        if (wg_has_map(p, c, i))
            tuner__hopper_emit_map_addr(sb, map_names[i], map_addrs[i]);
    for (int k = 0; k < c->n_x; k++)
        tuner__hopper_emit_map_addr(sb, x_names[k], x_addrs[k]);
    tuner__gemm_emit_dims_decl(sb, p);
    tuner__gemm_emit_amax_decl(sb, p);
}

/* A cluster pair's units: pm x pn pairs of tiles per batch entry, neighbours along M (along N
 * with pair_n) making one pair. */
static void wg_pair_grid(const wg_cfg *c, long long tiles_m, long long tiles_n, long long *pm, long long *pn)
{
    *pm = c->pair_n ? tiles_m : tuner__gemm_cdiv(tiles_m, 2);
    *pn = c->pair_n ? tuner__gemm_cdiv(tiles_n, 2) : tiles_n;
}

/* A dynamic op's count at launch of `rows`-row blocks of M, ceil(gm_M / rows) (a literal M's
 * folds), as an int expression in buf. */
static const char *wg_m_blocks(int rows, char *buf, size_t len)
{
    snprintf(buf, len, "((gm_M + %d) / %d)", rows - 1, rows);
    return buf;
}

/* Emits `gm_b` and the tile's coordinates, named tm and tn, for tile index `t`: batch-major,
 * then grouped raster order over the batch entry's tiles. tiles_m_x, tiles_n_x: NULL, or for a
 * dynamic op the expression of tiles_m (tiles_n: a swapped kernel's) at launch; tiles_m and
 * tiles_n are then their values at max (one tile row there is one at every size), and `batches`
 * the batch entries the loop's count holds at max (1: it counts none, as a swapped kernel's).
 *
 * A dynamic op's divisors are known only at launch, and a division by one is a chain of a few
 * tens of dependent instructions (64-bit: a call) that the producer runs before its first load:
 * at [112,4096] x [4096,4096] on the H200 the swapped 64x56 pair built for a named M ran 0.6 us
 * slower in a stream than the same pair built for 112 rows (13.0-13.1 against 12.5 us; 1 us
 * after a flush), which lost it the range 97..112 (session 20, calls h and l). So the batch
 * division goes where the count holds no batch, 32-bit division where the count fits an int,
 * and the group's division where the group size is a constant. */
static void emit_tile_coords(tuner_sb *sb, long long tiles_m, long long tiles_n, int group, const char *tm,
                             const char *tn, const char *tiles_m_x, const char *tiles_n_x, long long batches)
{
    char lm[32], ln[32];
    snprintf(lm, sizeof(lm), "%lld", tiles_m);
    snprintf(ln, sizeof(ln), "%lld", tiles_n);
    const char *xm = tiles_m_x ? tiles_m_x : lm, *xn = tiles_n_x ? tiles_n_x : ln;
    if ((tiles_m_x || tiles_n_x) && batches == 1)
        tuner_sb_puts(sb, "const int gm_b = 0, gm_r = (int)t;\n");
    else if ((tiles_m_x || tiles_n_x) && batches * tiles_m * tiles_n <= 0x7fffffffLL)
        tuner_sb_printf(sb, "const int gm_per = %s * %s;\nconst int gm_b = (int)t / gm_per, gm_r = (int)t %% gm_per;\n",
                        xm, xn);
    else if (tiles_m_x || tiles_n_x)
        tuner_sb_printf(sb, "const int gm_per = %s * %s;\nconst int gm_b = (int)(t / gm_per), gm_r = (int)(t %% gm_per);\n",
                        xm, xn);
    else
        tuner_sb_printf(sb, "const int gm_b = (int)(t / %lld), gm_r = (int)(t %% %lld);\n", tiles_m * tiles_n,
                        tiles_m * tiles_n);
    if (group <= 1 || tiles_m <= 1) {
        tuner_sb_printf(sb, "const int %s = gm_r / %s, %s = gm_r %% %s;\n", tm, xn, tn, xn);
        return;
    }
    /* Every group holds `group` tile rows where a fixed tiles_m divides into them. */
    char gsz[48] = "gm_gsz";
    if (!tiles_m_x && tiles_m % group == 0)
        snprintf(gsz, sizeof(gsz), "%d", group);
    tuner_sb_printf(sb,
                    "const int gm_width = %d * %s, gm_first = (gm_r / gm_width) * %d;\n"
                    "const int gm_gsz = min(%s - gm_first, %d);\n"
                    "const int %s = gm_first + (gm_r %% gm_width) %% %s, %s = (gm_r %% gm_width) / %s;\n",
                    group, xn, group, xm, group, tm, gsz, tn, gsz);
}

/* The number of units a launch's loops walk (tiles, or a cluster's pairs of tiles), as a C
 * expression of type long long: `count` as a literal for a static op, for a dynamic one gm_B *
 * (blocks of `m_rows` rows of M at launch: tile rows, or pairs of them) * n_units (per block of
 * rows). */
static const char *wg_count_expr(const tuner__gemm_problem *p, long long count, int m_rows, long long n_units,
                                 char *buf, size_t len)
{
    if (!p->dynamic) {
        snprintf(buf, len, "%lldLL", count);
        return buf;
    }
    char mb[48];
    snprintf(buf, len, "((long long)gm_B * %s * %lldLL)", wg_m_blocks(m_rows, mb, sizeof(mb)), n_units);
    return buf;
}

/* The tile count of an unpaired launch (wg_count_expr's units are tiles); a swapped kernel's
 * named M (wg_kview) counts its tiles along N: tiles_m * ceil(gm_M / block_n). */
static const char *wg_tiles_expr(const tuner__gemm_problem *p, const wg_cfg *c, long long tiles_m, long long tiles_n,
                                 char *buf, size_t len)
{
    if (p->dynamic && c->swap) {
        char nb[48];
        snprintf(buf, len, "(%lldLL * %s)", tiles_m, wg_m_blocks(c->bn, nb, sizeof(nb)));
        return buf;
    }
    return wg_count_expr(p, p->batch * tiles_m * tiles_n, c->bm, tiles_n, buf, len);
}

/* A swapped kernel's first row of the matmul's M in tile gm_tn, gm_n0 (p: the kernel's view, its
 * N the matmul's M): gm_tn * block_n, but for the last tile row of an M that does not divide into
 * whole tiles, M - block_n - the last tile overlaps the one before it instead of reaching past M.
 * Its rows are then all in the tensor: no box row past M to zero-fill, no store to clip. (On an
 * H200 swapped tiles whose last row was mostly past M ran as if that row took 2.9 whole rows'
 * time, bench/results/2026-11-30-h200-session13/f.) The rows both tiles hold are computed twice
 * from the same operands in the same order and stored twice with the same values. Where M is
 * smaller than one tile the tile starts at 0 and keeps its rows past M. A pair's second tile
 * past the last (an odd tile count) is the last tile again. */
static void emit_swapped_row0(tuner_sb *sb, const tuner__gemm_problem *p, const wg_cfg *c)
{
    if (p->dynamic)
        tuner_sb_printf(sb, "const int gm_n0 = min(gm_tn * %d, max((int)gm_M - %d, 0));\n", c->bn, c->bn);
    else if ((p->N % c->bn || c->cluster == 2) && p->N > c->bn)
        tuner_sb_printf(sb, "const int gm_n0 = min(gm_tn * %d, %lld);\n", c->bn, p->N - c->bn);
    else
        tuner_sb_printf(sb, "const int gm_n0 = gm_tn * %d;\n", c->bn);
}

/* Opens the loop over a producer's or consumer's tiles and declares the tile's gm_b, gm_tm,
 * gm_tn (and, swapped, gm_n0: emit_swapped_row0). A block takes tiles gridDim.x apart; the
 * producer walks them all in order, a pingpong consumer (`consumer`) every other one, from the
 * first (consumer 0) or the second (wg_c 1). So the busiest block has at most one tile more than
 * another, where units of two consecutive tiles per turn left up to two (8192x14336 FP8 128x128:
 * 56 tiles on 20 blocks, 54 on the rest). A split-K cluster's CTAs all take the cluster's tile. A
 * cluster pair walks pairs of M tiles (of N tiles with pair_n), its CTAs taking one each (an odd
 * last pair's second tile lies past M or N: its loads read zeros and its stores are clipped or
 * skipped). */
static void emit_unit_loop(tuner_sb *sb, const tuner__gemm_problem *p, const wg_cfg *c, long long tiles_m,
                           long long tiles_n, bool consumer)
{
    char cnt[96], tmx[48];
    if (c->cluster == 2 && c->swap) {
        /* Swapped N pairs (the kernel's N tiles are the matmul's M rows: a named M counts
         * ceil(gm_M / (2 block_n)) pairs per kernel tile row); the second tile of an odd last
         * pair overlaps the one before it, as a swapped last tile does (emit_swapped_row0). */
        long long pm, pn;
        wg_pair_grid(c, tiles_m, tiles_n, &pm, &pn);
        if (p->dynamic)
            snprintf(cnt, sizeof(cnt), "(%lldLL * %s)", pm, wg_m_blocks(2 * c->bn, tmx, sizeof(tmx)));
        else
            snprintf(cnt, sizeof(cnt), "%lldLL", pm * pn);
        tuner_sb_printf(sb, "for (long long t = (long long)(blockIdx.x >> 1); t < %s; t += (long long)(gridDim.x >> 1)) {\n",
                        cnt);
        emit_tile_coords(sb, pm, pn, c->group, "gm_tm", "gm_tp", NULL,
                         p->dynamic ? wg_m_blocks(2 * c->bn, tmx, sizeof(tmx)) : NULL, 1);
        tuner_sb_puts(sb, "const int gm_tn = 2 * gm_tp + (int)wg_rank;\n");
        emit_swapped_row0(sb, p, c);
        return;
    }
    if (c->cluster == 2) {
        long long pm, pn;
        wg_pair_grid(c, tiles_m, tiles_n, &pm, &pn);
        /* Pairs along M: ceil(tiles_m / 2) = ceil(M / (2 block_m)) pair rows. */
        const int pair_rows = c->pair_n ? c->bm : 2 * c->bm;
        tuner_sb_printf(sb, "for (long long t = (long long)(blockIdx.x >> 1); t < %s; t += (long long)(gridDim.x >> 1)) {\n",
                        wg_count_expr(p, p->batch * pm * pn, pair_rows, pn, cnt, sizeof(cnt)));
        emit_tile_coords(sb, pm, pn, c->group, c->pair_n ? "gm_tm" : "gm_tp", c->pair_n ? "gm_tp" : "gm_tn",
                         p->dynamic ? wg_m_blocks(pair_rows, tmx, sizeof(tmx)) : NULL, NULL, p->batch);
        tuner_sb_printf(sb, "const int %s = 2 * gm_tp + (int)wg_rank;\n", c->pair_n ? "gm_tn" : "gm_tm");
        return;
    }
    /* The loops' bound: the literal tile count, or a dynamic op's at launch. */
    const char *tiles_x = wg_tiles_expr(p, c, tiles_m, tiles_n, cnt, sizeof(cnt));
    if (c->stream_k) {
        /* Whole tiles first (k tiles [0, ktiles)); then the block's range of the shared k
         * tiles from its end backwards, one segment per tile it touches: the first segment a
         * block runs may end inside its tile (its partial goes to the workspace), the last may
         * start inside its tile (it adds the partials of the blocks before it and stores the
         * tile). So a block only ever waits for blocks of lower index, and for the first thing
         * they ran in this phase. The division is wg_sk_plan_of's, made from the tile count at
         * launch (a dynamic op's changes with its sizes): where the tiles fill whole waves, or
         * the shared ones hold under 4 k tiles per block (a range would be empty, and a block
         * wait for a partial nobody writes), every tile is whole. */
        const wg_sk_plan *k = &c->sk;
        tuner_sb_printf(sb,
                        "const long long wg_skn = %s, wg_rem = wg_skn %% %lldLL;\n"
                        "long long wg_skt = wg_skn < %lldLL ? wg_skn : wg_rem == 0 ? 0LL : "
                        "2 * wg_rem < %lldLL ? wg_rem + %lldLL : wg_rem;\n"
                        "if (wg_skt * %lldLL < 4LL * %lldLL) wg_skt = 0;\n"
                        "const long long wg_dp = wg_skn - wg_skt, wg_iters = wg_skt * %lldLL;\n"
                        "const long long wg_lo = (long long)blockIdx.x * wg_iters / %lldLL, "
                        "wg_hi = ((long long)blockIdx.x + 1) * wg_iters / %lldLL;\n"
                        "long long wg_it = wg_hi;\n"
                        "for (long long wg_u = 0;; wg_u++) {\n"
                        "long long t = (long long)blockIdx.x + wg_u * %lldLL;\nint wg_k0 = 0, wg_k1 = %lld;\n"
                        "if (t >= wg_dp) {\n"
                        "if (wg_it <= wg_lo) break;\n"
                        "const long long wg_kt = (wg_it - 1) / %lld, wg_beg = max(wg_kt * %lld, wg_lo);\n"
                        "t = wg_dp + wg_kt;\n"
                        "wg_k0 = (int)(wg_beg - wg_kt * %lld);\nwg_k1 = (int)(wg_it - wg_kt * %lld);\n"
                        "wg_it = wg_beg;\n}\n",
                        tiles_x, k->grid, k->grid, k->grid, k->grid, k->ktiles, k->grid, k->ktiles, k->grid,
                        k->grid, k->grid, k->ktiles, k->ktiles, k->ktiles, k->ktiles, k->ktiles);
    } else if (c->split > 1) /* the CTAs of a cluster, K slices of one tile */
        tuner_sb_printf(sb, "for (long long t = (long long)(blockIdx.x / %d); t < %s; t += (long long)(gridDim.x / %d)) {\n",
                        c->split, tiles_x, c->split);
    else if (c->pingpong && consumer) /* the block's tiles b + G c, b + G (c + 2), ... */
        tuner_sb_printf(sb, "for (long long t = (long long)blockIdx.x + (long long)gridDim.x * wg_c; t < %s; "
                            "t += (long long)gridDim.x * 2) {\n",
                        tiles_x);
    else
        tuner_sb_printf(sb, "for (long long t = blockIdx.x; t < %s; t += gridDim.x) {\n", tiles_x);
    const bool dyn_m = p->dynamic && !c->swap, dyn_n = p->dynamic && c->swap;
    /* A swapped kernel's count holds no batch entries (wg_tiles_expr). */
    emit_tile_coords(sb, tiles_m, tiles_n, c->group, "gm_tm", "gm_tn", dyn_m ? wg_m_blocks(c->bm, tmx, sizeof(tmx)) : NULL,
                     dyn_n ? wg_m_blocks(c->bn, tmx, sizeof(tmx)) : NULL, c->swap ? 1 : p->batch);
    if (c->swap)
        emit_swapped_row0(sb, p, c);
}

static void emit_tma_operand(tuner_sb *sb, const tuner__gemm_problem *p, const wg_cfg *c, int which)
{
    if (which == 0 && wg_im2col_a(p)) {
        /* k = (r * S + s) * C/g + channel: the k tile's window position and first channel, in
         * its group; the tile's window corner from emit_im2col_base. */
        tuner_sb_printf(sb,
                        "{\nconst int wg_rs = kt * %d / %lld, wg_ch = kt * %d %% %lld;\n"
                        "wg_tma_i2c(wg_st, wg_map_a, wg_i2c_c + wg_ch, wg_i2c_w, wg_i2c_h, wg_i2c_n, "
                        "(unsigned short)(wg_rs %% %lld * %d), (unsigned short)(wg_rs / %lld * %d), wg_full);\n}\n",
                        WG_BK, p->cgc, WG_BK, p->cgc, p->cs, p->dw, p->cs, p->dh);
        return;
    }
    const bool batched = wg_map_batched(p, which);
    const char *map = which == 0 ? "wg_map_a" : "wg_map_b";
    const int rows = which == 0 ? c->bm : c->bn;
    /* The tile's first row along mn: gm_tm * block_m (A), gm_tn * block_n (B); a swapped kernel's
     * B (the matmul's A rows) from gm_n0 (emit_swapped_row0). */
    char org[48];
    if (which == 1 && c->swap)
        snprintf(org, sizeof(org), "gm_n0");
    else
        snprintf(org, sizeof(org), "%s * %d", which == 0 ? "gm_tm" : "gm_tn", rows);
    const int off = which == 0 ? 0 : c->a_bytes;
    char bc[16];
    snprintf(bc, sizeof(bc), "%s", batched ? ", gm_b" : "");
    if (c->cluster == 2 && (which == 0) == c->pair_n) {
        /* This CTA's half of the shared tile (B's, or A's in an N pair), to both CTAs of the
         * pair. */
        if (p->kmajor[which]) {
            tuner_sb_printf(sb, "wg_tma%d_mc(wg_st + %d + wg_rank * %d, %s, kt * %d, %s + (int)wg_rank * %d%s, "
                                "wg_full, (unsigned short)3);\n",
                            batched ? 3 : 2, off, rows / 2 * 128, map, wg_bk(p), org, rows / 2, bc);
        } else if (wg_pair_k_halves(p, c)) {
            /* This CTA's half of the box's k rows, at its half of the stage's tile. */
            tuner_sb_printf(sb, "wg_tma%d_mc(wg_st + %d + wg_rank * %d, %s, %s, kt * %d + (int)wg_rank * %d%s, "
                                "wg_full, (unsigned short)3);\n",
                            batched ? 3 : 2, off, WG_BK / 2 * 128, map, org, WG_BK, WG_BK / 2, bc);
        } else {
            const int hb = rows / 128; /* 64-column boxes per CTA */
            for (int j = 0; j < hb; j++)
                tuner_sb_printf(sb, "wg_tma%d_mc(wg_st + %d + (wg_rank * %d + %d) * 8192, %s, %s + ((int)wg_rank * %d "
                                    "+ %d) * 64, kt * %d%s, wg_full, (unsigned short)3);\n",
                                batched ? 3 : 2, off, hb, j, map, org, hb, j, WG_BK, bc);
        }
        return;
    }
    if (p->kmajor[which]) {
        tuner_sb_printf(sb, "wg_tma%d(wg_st + %d, %s, kt * %d, %s%s, wg_full);\n", batched ? 3 : 2, off, map,
                        wg_bk(p), org, bc);
    } else if (wg_tnsp(p, which)) {
        /* Into the raw area, boxes of 128 mn x 128 k (16 KiB) one after the other
         * (emit_transposer reads them there). */
        for (int j = 0; j < rows / 128; j++)
            tuner_sb_printf(sb, "wg_tma%d(wg_st + %d, %s, %s + %d, kt * %d%s, wg_full);\n", batched ? 3 : 2,
                            c->raw_at[which] + j * 16384, map, org, j * 128, wg_bk(p), bc);
    } else {
        for (int j = 0; j < rows / 64; j++)
            tuner_sb_printf(sb, "wg_tma%d(wg_st + %d, %s, %s + %d, kt * %d%s, wg_full);\n", batched ? 3 : 2,
                            off + j * 8192, map, org, j * 64, WG_BK, bc);
    }
}

/* Opens a producer's loop over the block's k tiles [wg_k0, wg_k1): waits until the ring's next
 * stage is free (its `empty` barrier, `bars` + 8 * (stages + s)) and declares the stage's `full`
 * barrier wg_full and its shared address wg_st; `bars` and `ring` name the ring's first barrier
 * and stage. */
static void emit_stage_acquire(tuner_sb *sb, const wg_cfg *c, const char *bars, const char *ring)
{
    tuner_sb_puts(sb, "for (int kt = wg_k0; kt < wg_k1; kt++) {\n");
    tuner__hopper_emit_stage_acquire(sb, c->stages, c->stage_bytes, bars, ring);
}

/* At a new tile of an im2col convolution (wg_im2col_a): the coordinates of its first row's window
 * corner in the input map, (channel of its group, w, h, image). */
static void emit_im2col_base(tuner_sb *sb, const tuner__gemm_problem *p, const wg_cfg *c)
{
    tuner_sb_printf(sb,
                    "const int wg_i2c_m = gm_tm * %d, wg_i2c_pq = wg_i2c_m %% %lld;\n"
                    "const int wg_i2c_n = wg_i2c_m / %lld, wg_i2c_c = gm_b * %lld;\n"
                    "const int wg_i2c_h = wg_i2c_pq / %lld * %d - %d, wg_i2c_w = wg_i2c_pq %% %lld * %d - %d;\n",
                    c->bm, p->cp * p->cq, p->cp * p->cq, p->cgc, p->cq, p->sh, p->ph, p->cq, p->sw, p->pw);
}

/* The operand tiles' barriers (wg_plan_x), after the ring's 2 * stages: `full` of slot o at
 * 2 * stages + o (the producer's expect_tx), `empty` at 2 * stages + unit_tiles + o (an arrive
 * per consumer warp that reads the slot, or in the staged output the storer's). */
static int wg_x_full(const wg_cfg *c)
{
    return 2 * c->stages;
}

static int wg_x_empty(const wg_cfg *c)
{
    return 2 * c->stages + c->unit_tiles;
}

/* The transposed stages' `ready` barriers (wg_tnsp), after the ring's and the operand tiles':
 * stage s's at wg_ready(c) + s, an arrive per transposing warp once the stage's MN-major tiles
 * are in their K-major place; the consumers wait on it instead of `full`. */
static int wg_ready(const wg_cfg *c)
{
    return 2 * c->stages + (c->n_x ? 2 * c->unit_tiles : 0);
}

/* Transposing warps of the producer warpgroup (all but the TMA thread's warp). */
#define WG_TNSP_WARPS 3

/* All transposing warps: the producer's three, and the transposing warpgroup's four (tnsp_wg). */
static int wg_tnsp_warps(const wg_cfg *c)
{
    return WG_TNSP_WARPS + (c->tnsp_wg ? 4 : 0);
}

/* The transposition of one 128 x 128 byte square (emit_transposer): `raw`, 128 k rows of 128 mn
 * bytes as the copy engine's 128-byte swizzle leaves them (16-byte chunk c of row k at chunk
 * c ^ (k % 8)), into `dst`, 128 mn rows of 128 k bytes in the same swizzle, the K-major layout
 * wgmma reads. The square is 32 x 32 blocks of 4 x 4 bytes; in step r lane l takes block (k 4l,
 * mn 4 ((l + r) % 32)): four 32-bit loads (one k row each), eight byte permutes (a 4x4 byte
 * transpose, tuner__gemm_bytes_4x4_fn), four 32-bit stores (one mn row each). Both the loads
 * (banks (mn/16 ^ k%8) * 4 + mn%16/4: for a fixed l%4 the rows' k%8 is fixed, so the lanes' l/4
 * give 8 distinct chunks) and the stores (banks (k/16 ^ mn%8) * 4 + k%16/4, the same argument)
 * hit 32 distinct banks. */
static const char wg_tnsp_helpers[] =
    "HD_INLINE hd_u32 wg_lds32(hd_u32 a) { hd_u32 v; asm volatile(\"ld.shared.b32 %0, [%1];\" : \"=r\"(v) : \"r\"(a) : "
    "\"memory\"); return v; }\n"
    "HD_INLINE void wg_sts32(hd_u32 a, hd_u32 v) { asm volatile(\"st.shared.b32 [%0], %1;\" :: \"r\"(a), \"r\"(v) : "
    "\"memory\"); }\n"
    "HD_INLINE void wg_tnsp_block(hd_u32 raw, hd_u32 dst, int l, int r) {\n"
    "const int k0 = 4 * l, m0 = 4 * ((l + r) & 31);\n"
    "hd_u32 w[4], o[4];\n"
    "#pragma unroll\nfor (int i = 0; i < 4; i++)\n"
    "w[i] = wg_lds32(raw + (hd_u32)((k0 + i) * 128 + ((((m0 >> 4) ^ ((k0 + i) & 7)) << 4) | (m0 & 15))));\n"
    /* byte j of w[i] is (k0 + i, m0 + j); byte i of o[j] is then it */
    "hd_bytes_4x4(w, o);\n"
    "#pragma unroll\nfor (int j = 0; j < 4; j++)\n"
    "wg_sts32(dst + (hd_u32)((m0 + j) * 128 + ((((k0 >> 4) ^ ((m0 + j) & 7)) << 4) | (k0 & 15))), o[j]);\n"
    "}\n";

/* The transposing warps (warps 1..3 of the producer warpgroup, with a TMA producer; wg_tnsp; and
 * with tnsp_wg the four warps of the warpgroup after the consumers, `own_wg`, numbered 3..6):
 * they walk the ring as the producer thread does (the same units and k tiles), wait for each
 * stage's copies (`full`), transpose its MN-major tiles from the raw area into the K-major tiles
 * (wg_tnsp_block; the 32 steps of each 128 x 128 square dealt round-robin over the warps), make
 * those generic-proxy writes visible to wgmma's async proxy and arrive on the stage's `ready`
 * barrier. The stage goes back to the producer on `empty` as before, once the consumers are done:
 * by then the transposers are done with the raw area too (the consumers waited for them), and they
 * write the K-major tiles of a stage's next round only after its next `full`, so the ring stays
 * pipelined with the transposition one stage behind the copies. */
static void emit_transposer(tuner_sb *sb, const tuner__gemm_problem *p, const wg_cfg *c, long long tiles_m,
                            long long tiles_n, bool own_wg)
{
    if (own_wg)
        tuner_sb_printf(sb, "{\nconst int wg_tw = %d + ((threadIdx.x >> 5) & 3), wg_tl = threadIdx.x & 31;\n"
                            "int wg_s = 0, wg_ph = 0;\n",
                        WG_TNSP_WARPS);
    else
        tuner_sb_puts(sb, "if (threadIdx.x >= 32) {\n"
                          "const int wg_tw = (threadIdx.x >> 5) - 1, wg_tl = threadIdx.x & 31;\n"
                          "int wg_s = 0, wg_ph = 0;\n");
    emit_unit_loop(sb, p, c, tiles_m, tiles_n, false);
    tuner_sb_printf(sb,
                    "for (int kt = wg_k0; kt < wg_k1; kt++) {\n"
                    "wg_wait(wg_bar0 + 8 * wg_s, wg_ph);\n"
                    "const hd_u32 wg_st = wg_ring + (hd_u32)wg_s * %du;\n",
                    c->stage_bytes);
    for (int w = 0; w < 2; w++) {
        if (!wg_tnsp(p, w))
            continue;
        const int squares = (w == 0 ? c->bm : c->bn) / 128, kmaj_at = w == 0 ? 0 : c->a_bytes;
        tuner_sb_printf(sb,
                        "for (int wg_q = wg_tw; wg_q < %d; wg_q += %d)\n"
                        "wg_tnsp_block(wg_st + %du + (hd_u32)(wg_q >> 5) * 16384u, wg_st + %du + (hd_u32)(wg_q >> 5) * 16384u, "
                        "wg_tl, wg_q & 31);\n",
                        squares * 32, wg_tnsp_warps(c), c->raw_at[w], kmaj_at);
    }
    tuner_sb_printf(sb,
                    "asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n"
                    "__syncwarp();\n"
                    "if (wg_tl == 0) wg_arrive(wg_bar0 + 8 * (%d + wg_s));\n",
                    wg_ready(c));
    tuner__hopper_emit_stage_advance(sb, c->stages);
    tuner_sb_puts(sb, "}\n}\n}\n");
}

/* The operand tiles' copies (emit_x_load): bulk tensor copies with an L2 evict-first policy, as
 * each operand element is read once while the A and B panels are read again by other tiles. */
static const char wg_x_helpers[] =
    "HD_INLINE hd_u64 wg_evict_first() { hd_u64 p; asm volatile(\"createpolicy.fractional.L2::evict_first.b64 %0, "
    "1.0;\" : \"=l\"(p)); return p; }\n"
    "HD_INLINE void wg_tma2_ef(hd_u32 dst, const void *map, int c0, int c1, hd_u32 bar, hd_u64 pol) { asm volatile("
    "\"cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, "
    "%3}], [%4], %5;\" :: \"r\"(dst), \"l\"(map), \"r\"(c0), \"r\"(c1), \"r\"(bar), \"l\"(pol) : \"memory\"); }\n"
    "HD_INLINE void wg_tma3_ef(hd_u32 dst, const void *map, int c0, int c1, int c2, hd_u32 bar, hd_u64 pol) { asm "
    "volatile(\"cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], "
    "[%1, {%2, %3, %4}], [%5], %6;\" :: \"r\"(dst), \"l\"(map), \"r\"(c0), \"r\"(c1), \"r\"(c2), \"r\"(bar), "
    "\"l\"(pol) : \"memory\"); }\n";

/* In the producer's k loop: at the tile's min(stages, its k tiles)-th k tile (the ring is then
 * full: its next stage frees only once the consumers that take this tile have finished their
 * previous tile's epilogue and begun this one's main loop, so waiting for the operand slot here
 * costs the ring nothing),
 * the copies of the tile's operand tiles into its slot (pingpong: the consumer's, the parity of
 * the tile's place among the block's; else the one slot), once the consumers have read the
 * slot's previous tile. A stream-K segment that ends inside its tile has no epilogue: it loads
 * none. */
static void emit_x_load(tuner_sb *sb, const tuner__gemm_problem *p, const wg_cfg *c)
{
    if (!c->n_x)
        return;
    const int bc = 128 / tuner_dtype_size(p->out_dt), boxes = c->bn / bc;
    char last[48] = "";
    if (c->stream_k)
        snprintf(last, sizeof(last), " && wg_k1 == %lld", c->sk.ktiles);
    tuner_sb_printf(sb,
                    "if (kt == min(wg_k0 + %d, wg_k1 - 1)%s) {\n"
                    "const int wg_xo = %s;\n"
                    "const hd_u32 wg_xf = wg_bar0 + 8 * (%d + wg_xo);\n"
                    "wg_wait(wg_bar0 + 8 * (%d + wg_xo), (int)(((wg_xph >> wg_xo) & 1u) ^ 1u));\n"
                    "wg_expect(wg_xf, %d);\n"
                    "const hd_u32 wg_xd = wg_ring + %d + (hd_u32)wg_xo * %du;\n"
                    "const hd_u64 wg_xpol = wg_evict_first();\n",
                    c->stages - 1, last, c->pingpong ? "(int)(((t - (long long)blockIdx.x) / gridDim.x) & 1)" : "0",
                    wg_x_full(c), wg_x_empty(c), c->n_x * c->x_bytes, c->x_at, c->n_x * c->x_bytes);
    for (int k = 0; k < c->n_x; k++)
        for (int b = 0; b < boxes; b++) {
            const int at = k * c->x_bytes + b * c->bm * 128;
            if (c->x_batched[k])
                tuner_sb_printf(sb, "wg_tma3_ef(wg_xd + %d, wg_map_x%d, gm_tn * %d + %d, gm_tm * %d, gm_b, wg_xf, wg_xpol);\n",
                                at, k, c->bn, b * bc, c->bm);
            else
                tuner_sb_printf(sb, "wg_tma2_ef(wg_xd + %d, wg_map_x%d, gm_tn * %d + %d, gm_tm * %d, wg_xf, wg_xpol);\n",
                                at, k, c->bn, b * bc, c->bm);
        }
    tuner_sb_puts(sb, "wg_xph ^= 1u << wg_xo;\n}\n");
}

/* The producer of a matmul, or of a convolution whose A the copy engine gathers (im2col maps)
 * or reads whole (dense 1x1): one thread loads both operands with bulk tensor copies, tile after
 * tile of its block's units, into one ring. */
static void emit_tma_producer(tuner_sb *sb, const tuner__gemm_problem *p, const wg_cfg *c, long long tiles_m,
                              long long tiles_n)
{
    tuner_sb_puts(sb, "if (threadIdx.x == 0) {\n"
                      "int wg_s = 0, wg_ph = 0;\n");
    if (c->n_x) /* the phase of each operand tile slot's barriers, a bit per slot */
        tuner_sb_puts(sb, "unsigned wg_xph = 0u;\n");
    emit_unit_loop(sb, p, c, tiles_m, tiles_n, false);
    if (wg_im2col_a(p))
        emit_im2col_base(sb, p, c);
    emit_stage_acquire(sb, c, "wg_bar0", "wg_ring");
    tuner_sb_printf(sb, "wg_expect(wg_full, %d);\n", c->tma_bytes);
    emit_tma_operand(sb, p, c, 0);
    emit_tma_operand(sb, p, c, 1);
    emit_x_load(sb, p, c);
    tuner__hopper_emit_stage_advance(sb, c->stages);
    tuner_sb_puts(sb, "}\n}\n}\n");
}

/* The producer of a convolution: thread 0 loads the weight tile with a bulk tensor copy while
 * all 128 threads gather the A tile (im2col rows of the NHWC input) with 16-byte cp.async,
 * zero-filling padding and edges, into the same 128-byte swizzle TMA would write. Eight threads
 * cover one 128-byte k row (one coalesced read of 8 consecutive channel chunks); each thread
 * handles rows r0, r0 + 16, ..., so its chunks' swizzled column (j ^ row % 8) is fixed.
 *
 * With few output channels the producer's instructions, not memory, bound the kernel (on an H100
 * a 3x3 64->64 layer issued ~240 producer instructions per thread and k tile, one every ~4 cycles:
 * bench/results/2026-11-24-h100-conv-wgmma). So at each new tile a thread computes, for each of
 * its rows, the input pixel index of the window's corner and a mask of the window positions (r,
 * s) that fall inside the image (none past M), kept in registers; per k tile it derives its
 * chunk's channel, window position and pixel offset once, and per row tests one mask bit and
 * forms one address. Each thread's copies arrive on the stage's `full` barrier when they land
 * (cp.async.mbarrier.arrive.noinc: the barrier counts 128 such arrivals beside thread 0's
 * expect_tx). */
static void emit_conv_producer(tuner_sb *sb, const tuner__gemm_problem *p, const wg_cfg *c, long long tiles_m,
                               long long tiles_n)
{
    const int S = c->stages, nr = c->bm / 16;
    tuner_sb_printf(sb,
                    "const int wg_pt = threadIdx.x, wg_j = wg_pt & 7, wg_r0 = wg_pt >> 3;\n"
                    "const hd_u32 wg_jx = (hd_u32)((wg_j ^ (wg_r0 & 7)) << 4) + (hd_u32)wg_r0 * 128u;\n"
                    "int wg_pix[%d];\nunsigned wg_msk[%d];\n"
                    "int wg_s = 0, wg_ph = 0;\n",
                    nr, nr);
    emit_unit_loop(sb, p, c, tiles_m, tiles_n, false);
    tuner_sb_printf(sb,
                    "#pragma unroll\nfor (int i = 0; i < %d; i++) {\n"
                    "const int wg_m = gm_tm * %d + wg_r0 + 16 * i;\n"
                    "const int wg_n = wg_m / %lld, wg_pq = wg_m %% %lld;\n"
                    "const int wg_h0 = (wg_pq / %lld) * %d - %d, wg_w0 = (wg_pq %% %lld) * %d - %d;\n"
                    "wg_pix[i] = (wg_n * %lld + wg_h0) * %lld + wg_w0;\n"
                    "unsigned wg_mk = 0u;\n"
                    "#pragma unroll\nfor (int r = 0; r < %lld; r++)\n#pragma unroll\nfor (int s = 0; s < %lld; s++)\n"
                    "wg_mk |= (unsigned)((unsigned)(wg_h0 + r * %d) < %lldu && (unsigned)(wg_w0 + s * %d) < %lldu) "
                    "<< (r * %lld + s);\n"
                    "wg_msk[i] = wg_m < %lld ? wg_mk : 0u;\n"
                    "}\n",
                    nr, c->bm, p->cp * p->cq, p->cp * p->cq, p->cq, p->sh, p->ph, p->cq, p->sw, p->pw, p->ch, p->cw,
                    p->cr, p->cs, p->dh, p->ch, p->dw, p->cw, p->cs, p->M);
    emit_stage_acquire(sb, c, "wg_bar0", "wg_ring");
    tuner_sb_printf(sb, "if (wg_pt == 0) {\nwg_expect(wg_full, %d);\n", c->b_bytes);
    emit_tma_operand(sb, p, c, 1);
    tuner_sb_printf(sb,
                    "}\n"
                    "const int wg_k = kt * %d + wg_j * 8;\n"
                    "const int wg_ch = wg_k %% %lld, wg_rs = wg_k / %lld;\n"
                    "const int wg_kp = (wg_rs / %lld) * %lld + (wg_rs %% %lld) * %d;\n"
                    /* Past K no window position is valid (and rs may exceed 31). */
                    "const unsigned wg_bit = wg_k < %lld ? 1u << wg_rs : 0u;\n"
                    "const %s *wg_src = in0 + gm_b * %lld + wg_ch;\n"
                    "#pragma unroll\nfor (int i = 0; i < %d; i++) {\n"
                    "const bool wg_ok = (wg_msk[i] & wg_bit) != 0u;\n"
                    "gm_cp16(wg_st + wg_jx + i * 2048, wg_ok ? wg_src + (long long)(wg_pix[i] + wg_kp) * %lld : in0, "
                    "wg_ok ? 16 : 0);\n"
                    "}\n"
                    "asm volatile(\"cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%%0];\" :: \"r\"(wg_full) : "
                    "\"memory\");\n"
                    "if (++wg_s == %d) { wg_s = 0; wg_ph ^= 1; }\n}\n}\n",
                    WG_BK, p->cgc, p->cgc, p->cs, (long long)p->dh * p->cw, p->cs, p->dw, p->K, tuner__ctype(p->dt),
                    p->cgc, nr, p->cc, S);
}

/* Device helpers of the unaligned-operand gather (emit_gather_loads, emit_gather_stores), for the
 * 16-byte chunk of 8 16-bit elements at element e of an operand whose bytes are [lo, hi):
 *  - wg_gld issues the chunk's loads: the 16-byte aligned vector holding its first byte
 *    (ld.global.nc: the operands are read-only, and the next lane's vector is this one's second
 *    half, in L1) and, in the last lane of an 8-lane row, the vector after it, which the other
 *    lanes take from their neighbour; predicated, so that a k tile's loads are all issued
 *    before any is used (no branch between them for ptxas to stop at);
 *  - wg_gfin funnels the pair into place (whole words by selects, the odd half word by shf); a
 *    chunk off the fast path (its row past the operand, its columns past the row's end, or a
 *    covering vector reaching outside [lo, hi)) is read element by element, zeros past the
 *    row: no byte outside the operand is read. Every lane of the warp calls it (shuffles). */
static const char wg_gather_helpers[] =
    "HD_INLINE hd_v4 wg_ldg16p(hd_u64 a, bool p) { hd_v4 v; asm(\"{\\n.reg .pred q;\\nsetp.ne.b32 q, %5, 0;\\n"
    "mov.b32 %0, 0;\\nmov.b32 %1, 0;\\nmov.b32 %2, 0;\\nmov.b32 %3, 0;\\n"
    "@q ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\\n}\" : \"=&r\"(v.x), \"=&r\"(v.y), \"=&r\"(v.z), \"=&r\"(v.w) : \"l\"(a), "
    "\"r\"((int)p)); return v; }\n"
    "HD_INLINE void wg_sts16(hd_u32 a, hd_v4 v) { asm volatile(\"st.shared.v4.u32 [%0], {%1, %2, %3, %4};\" :: "
    "\"r\"(a), \"r\"(v.x), \"r\"(v.y), \"r\"(v.z), \"r\"(v.w) : \"memory\"); }\n"
    "HD_INLINE bool wg_gld(hd_u64 lo, hd_u64 hi, long long e, bool row_ok, int col, int col_end, int j, hd_v4 &v, "
    "hd_v4 &h)\n{\n"
    "const hd_u64 a = lo + (hd_u64)e * 2ull, al = a & ~15ull;\n"
    "const bool mis = (a & 15ull) != 0ull;\n"
    "const bool fast = row_ok && col + 8 <= col_end && al >= lo && al + (mis ? 32ull : 16ull) <= hi;\n"
    "v = wg_ldg16p(al, row_ok && al >= lo && al + 16ull <= hi);\n"
    "h = wg_ldg16p(al + 16ull, j == 7 && fast && mis);\n"
    "return fast;\n}\n"
    "HD_INLINE hd_v4 wg_gfin(const unsigned short *g, long long e, bool row_ok, int col, int col_end, int j, bool fast, "
    "hd_v4 v0, hd_v4 h)\n{\n"
    "hd_v4 v1;\n"
    "v1.x = __shfl_down_sync(0xffffffffu, v0.x, 1);\nv1.y = __shfl_down_sync(0xffffffffu, v0.y, 1);\n"
    "v1.z = __shfl_down_sync(0xffffffffu, v0.z, 1);\nv1.w = __shfl_down_sync(0xffffffffu, v0.w, 1);\n"
    "if (j == 7) v1 = h;\n"
    "hd_v4 r;\n"
    "if (fast) {\n"
    "const hd_u32 o = (hd_u32)(((hd_u64)g + (hd_u64)e * 2ull) & 15ull);\n"
    "const bool s8 = (o & 8u) != 0u, s4 = (o & 4u) != 0u;\n"
    "const hd_u32 u0 = s8 ? v0.z : v0.x, u1 = s8 ? v0.w : v0.y, u2 = s8 ? v1.x : v0.z, u3 = s8 ? v1.y : v0.w, "
    "u4 = s8 ? v1.z : v1.x, u5 = s8 ? v1.w : v1.y;\n"
    "const hd_u32 t0 = s4 ? u1 : u0, t1 = s4 ? u2 : u1, t2 = s4 ? u3 : u2, t3 = s4 ? u4 : u3, t4 = s4 ? u5 : u4;\n"
    "const hd_u32 sh = (o & 2u) * 8u;\n"
    "r.x = __funnelshift_r(t0, t1, sh);\nr.y = __funnelshift_r(t1, t2, sh);\n"
    "r.z = __funnelshift_r(t2, t3, sh);\nr.w = __funnelshift_r(t3, t4, sh);\n"
    "} else {\n"
    "hd_u32 w[4];\n"
    "#pragma unroll\nfor (int q = 0; q < 4; q++) {\n"
    "const hd_u32 x0 = row_ok && col + 2 * q < col_end ? (hd_u32)g[e + 2 * q] : 0u;\n"
    "const hd_u32 x1 = row_ok && col + 2 * q + 1 < col_end ? (hd_u32)g[e + 2 * q + 1] : 0u;\n"
    "w[q] = x0 | (x1 << 16);\n}\n"
    "r.x = w[0]; r.y = w[1]; r.z = w[2]; r.w = w[3];\n"
    "}\nreturn r;\n}\n";

/* The block's mbarriers (the static wg_bars): `full` and `empty` per stage, a pair per operand
 * tile (with n_x), a `ready` per stage (transposed FP8 stages). */
static int wg_bar_count(const tuner__gemm_problem *p, const wg_cfg *c)
{
    return 2 * c->stages + (c->n_x ? 2 * c->unit_tiles : 0) + (wg_any_tnsp(p) ? c->stages : 0);
}

/* Arrivals that complete a stage's `full` barrier: thread 0's expect_tx alone where TMA loads
 * everything; with a convolution's gathered A also the 128 producer threads' cp.async arrivals;
 * with a matmul's gathered operands the 128 threads' plain arrivals, plus thread 0's expect_tx
 * where the other operand comes by TMA. */
static int wg_full_count(const tuner__gemm_problem *p)
{
    if (wg_gathers_a(p))
        return 1 + 128;
    if (wg_any_gathered(p))
        return 128 + (wg_gathered(p, 0) && wg_gathered(p, 1) ? 0 : 1);
    return 1;
}

/* Chunks (16-byte loads in flight) per producer thread and stage of a matmul's gathered
 * operands: a 16-row slice of a tile per chunk (emit_gather_coords). */
static int wg_gather_chunks(const tuner__gemm_problem *p, const wg_cfg *c)
{
    return (wg_gathered(p, 0) ? c->bm / 16 : 0) + (wg_gathered(p, 1) ? c->bn / 16 : 0);
}

/* Gathered operand w's rows (the MN extent of its tile's lines) as a long long C expression:
 * M (named or not: a named M is only ever a K-major A's, gemm.h) or N. */
static void gather_mn(const tuner__gemm_problem *p, int w, char *buf, size_t len)
{
    if (w == 0)
        snprintf(buf, len, "%s", tuner__gemm_M_ll(p).s);
    else
        snprintf(buf, len, "%lldLL", p->N);
}

/* At a new tile, the constants of gathered operand w's loads: its elements as 16-bit words
 * (wg_gp<w>), its bytes [wg_lo<w>, wg_hi<w>) (every batch entry's, so that a covering vector
 * never leaves the tensor) and the tile's batch entry's first element (wg_bo<w>). */
static void emit_gather_setup(tuner_sb *sb, const tuner__gemm_problem *p, int w)
{
    const bool batched = wg_map_batched(p, w);
    char mn[48];
    gather_mn(p, w, mn, sizeof(mn));
    char bo[48];
    snprintf(bo, sizeof(bo), batched ? "(long long)gm_b * wg_slab%d" : "0LL", w);
    tuner_sb_printf(sb,
                    "const unsigned short *const wg_gp%d = reinterpret_cast<const unsigned short *>(in%d);\n"
                    "const long long wg_slab%d = %s * %lldLL;\n"
                    "const hd_u64 wg_lo%d = (hd_u64)wg_gp%d, wg_hi%d = wg_lo%d + (hd_u64)(%s%s * wg_slab%d) * 2ull;\n"
                    "const long long wg_bo%d = %s;\n",
                    w, w, w, mn, p->K, w, w, w, w, batched ? "(long long)" : "", batched ? tuner__gemm_B(p).s : "1LL",
                    w, w, bo);
}

/* Inside a loop over i, the coordinates of gathered operand w's chunk in line wg_r0 + 16 i of
 * k tile `kt`'s stage: 128-byte lines of 64 elements along the contiguous dimension, a K-major
 * tile one line per row (rows x 64 k), an MN-major one one line per k of each 64-column box
 * (boxes 8 KiB apart): wg_rk (the line's row lies in the operand), wg_cl (the chunk's first
 * column along the contiguous dimension), wg_e (its element), and wg_ce (the row's length). */
static void emit_gather_coords(tuner_sb *sb, const tuner__gemm_problem *p, const wg_cfg *c, int w, const char *kt)
{
    const int rows = w == 0 ? c->bm : c->bn;
    char mn[48];
    gather_mn(p, w, mn, sizeof(mn));
    const char *t0 = w == 0 ? "gm_tm" : "gm_tn";
    tuner_sb_puts(sb, "const int wg_L = wg_r0 + 16 * i;\n");
    if (p->kmajor[w])
        tuner_sb_printf(sb,
                        "const long long wg_rw = (long long)%s * %d + wg_L;\n"
                        "const int wg_cl = (%s) * %d + wg_j * 8, wg_ce = %lld;\n"
                        "const bool wg_rk = wg_rw < %s;\n"
                        "const long long wg_e = wg_bo%d + wg_rw * %lldLL + wg_cl;\n",
                        t0, rows, kt, WG_BK, p->K, mn, w, p->K);
    else
        tuner_sb_printf(sb,
                        "const long long wg_rw = (long long)(%s) * %d + (wg_L & 63);\n"
                        "const int wg_cl = %s * %d + (wg_L >> 6) * 64 + wg_j * 8, wg_ce = (int)%s;\n"
                        "const bool wg_rk = wg_rw < %lldLL;\n"
                        "const long long wg_e = wg_bo%d + wg_rw * %s + wg_cl;\n",
                        kt, WG_BK, t0, rows, mn, p->K, w, mn);
}

/* The loads of k tile `kt`'s gathered chunks into wg_v, wg_h, wg_fa (wg_gld), all issued before
 * any is used. */
static void emit_gather_loads(tuner_sb *sb, const tuner__gemm_problem *p, const wg_cfg *c, const char *kt)
{
    int at = 0;
    for (int w = 0; w < 2; w++) {
        if (!wg_gathered(p, w))
            continue;
        const int lines = (w == 0 ? c->bm : c->bn) / 16;
        tuner_sb_printf(sb, "#pragma unroll\nfor (int i = 0; i < %d; i++) {\n", lines);
        emit_gather_coords(sb, p, c, w, kt);
        tuner_sb_printf(sb, "wg_fa[%d + i] = wg_gld(wg_lo%d, wg_hi%d, wg_e, wg_rk, wg_cl, wg_ce, wg_j, wg_v[%d + i], wg_h[%d + i]);\n}\n",
                        at, w, w, at, at);
        at += lines;
    }
}

/* k tile kt's gathered chunks (loaded into wg_cv, wg_ch, wg_cf) funnelled into place and stored
 * in stage wg_st in the layout the copy engine's 128-byte swizzle gives a tile: line L's chunk j
 * at L * 128 + ((j ^ L % 8) << 4). Thread t takes chunk t % 8 of lines t / 8 + 16 i, so its
 * swizzled column is fixed (wg_jx) and 8 lanes read one line's 128 contiguous bytes. */
static void emit_gather_stores(tuner_sb *sb, const tuner__gemm_problem *p, const wg_cfg *c)
{
    int at = 0;
    for (int w = 0; w < 2; w++) {
        if (!wg_gathered(p, w))
            continue;
        const int lines = (w == 0 ? c->bm : c->bn) / 16;
        tuner_sb_printf(sb, "#pragma unroll\nfor (int i = 0; i < %d; i++) {\n", lines);
        emit_gather_coords(sb, p, c, w, "kt");
        tuner_sb_printf(sb,
                        "wg_sts16(wg_st + %d + wg_jx + i * 2048, wg_gfin(wg_gp%d, wg_e, wg_rk, wg_cl, wg_ce, wg_j, "
                        "wg_cf[%d + i], wg_cv[%d + i], wg_ch[%d + i]));\n}\n",
                        w == 0 ? 0 : c->a_bytes, w, at, at, at);
        at += lines;
    }
}

/* The producer of a matmul with an operand TMA cannot address (rows or base not 16-byte
 * aligned: an odd K or N in f16, wg_gathered). Per stage thread 0 arms the `full` barrier with
 * the bytes of the operand that still comes by TMA and issues its copies, while all 128 threads
 * gather the unaligned operand(s) with aligned 16-byte loads shifted into place (wg_gld,
 * wg_gfin), store them with st.shared, make the stores visible to the async proxy (wgmma's)
 * and arrive on the barrier. The loads go to registers, one k tile ahead: a stage's chunks
 * are stored while the next k tile's loads are in flight, so that a stage costs the producer
 * the longer of a load's round trip and its own instructions, not their sum (cfg_valid bounds
 * the chunks per thread: two sets of 8 registers each fit wg_producer_regs). */
static void emit_gather_producer(tuner_sb *sb, const tuner__gemm_problem *p, const wg_cfg *c, long long tiles_m,
                                 long long tiles_n)
{
    const int tma_bytes = (wg_gathered(p, 0) ? 0 : c->a_bytes) + (wg_gathered(p, 1) ? 0 : c->b_bytes);
    const int nc = wg_gather_chunks(p, c);
    tuner_sb_printf(sb,
                    "const int wg_pt = threadIdx.x, wg_j = wg_pt & 7, wg_r0 = wg_pt >> 3;\n"
                    "const hd_u32 wg_jx = (hd_u32)((wg_j ^ (wg_r0 & 7)) << 4) + (hd_u32)wg_r0 * 128u;\n"
                    "hd_v4 wg_v[%d], wg_h[%d];\nbool wg_fa[%d];\n"
                    "int wg_s = 0, wg_ph = 0;\n",
                    nc, nc, nc);
    emit_unit_loop(sb, p, c, tiles_m, tiles_n, false);
    for (int w = 0; w < 2; w++)
        if (wg_gathered(p, w))
            emit_gather_setup(sb, p, w);
    tuner_sb_puts(sb, "if (wg_k0 < wg_k1) {\n");
    emit_gather_loads(sb, p, c, "wg_k0");
    tuner_sb_puts(sb, "}\n");
    emit_stage_acquire(sb, c, "wg_bar0", "wg_ring");
    if (tma_bytes) {
        tuner_sb_printf(sb, "if (wg_pt == 0) {\nwg_expect(wg_full, %d);\n", tma_bytes);
        for (int w = 0; w < 2; w++)
            if (!wg_gathered(p, w))
                emit_tma_operand(sb, p, c, w);
        tuner_sb_puts(sb, "}\n");
    }
    /* This k tile's loads move aside; the next one's are issued before they are used. */
    tuner_sb_printf(sb,
                    "hd_v4 wg_cv[%d], wg_ch[%d];\nbool wg_cf[%d];\n"
                    "#pragma unroll\nfor (int q = 0; q < %d; q++) { wg_cv[q] = wg_v[q]; wg_ch[q] = wg_h[q]; wg_cf[q] = wg_fa[q]; }\n"
                    "if (kt + 1 < wg_k1) {\n",
                    nc, nc, nc, nc);
    emit_gather_loads(sb, p, c, "kt + 1");
    tuner_sb_puts(sb, "}\n");
    emit_gather_stores(sb, p, c);
    tuner_sb_puts(sb, "asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n"
                      "wg_arrive(wg_full);\n");
    tuner__hopper_emit_stage_advance(sb, c->stages);
    tuner_sb_puts(sb, "}\n}\n");
}

/* Opens loops over a consumer's accumulator fragments of 8-column groups j0 <= j < j1 and a
 * block: accumulator (i, 4j + 2h + e) is row i*64 + 16*warp + lane/4 + 8h, column
 * 8j + 2*(lane%4) + e of the consumer's slice. */
static void emit_frag_nest(tuner_sb *sb, const wg_cfg *c, int j0, int j1)
{
    tuner_sb_printf(sb,
                    "#pragma unroll\nfor (int i = 0; i < %d; i++)\n#pragma unroll\nfor (int j = %d; j < %d; j++)\n"
                    "#pragma unroll\nfor (int h = 0; h < 2; h++) {\n",
                    c->mi, j0, j1);
}

/* The barrier at which the warpgroups that share a staged output tile meet: named barrier 1 + wg_o
 * (pingpong: each consumer its own tile), a literal where there is one staged tile (a register
 * operand makes ptxas reserve all 16 barriers). */
static const char *wg_staged_bar(const wg_cfg *c)
{
    if (c->pingpong)
        return "asm volatile(\"bar.sync %0, 128;\" :: \"r\"(1 + wg_o) : \"memory\");\n";
    return c->consumers == 2 ? "asm volatile(\"bar.sync 1, 256;\" ::: \"memory\");\n"
                             : "asm volatile(\"bar.sync 1, 128;\" ::: \"memory\");\n";
}

/* The epilogue of a consumer's tile, closing the tile loop: the fused chain is applied to the
 * accumulators, then the values are stored from registers or through a staged tile. */
static void emit_tile_epilogue(tuner_sb *sb, const tuner__gemm_problem *p, const wg_cfg *c)
{
    const char *staged_bar = wg_staged_bar(c);
    tuner_sb_printf(sb,
                    "const int gm_er = gm_tm * %d + wg_row0 + wg_w * 16 + (wg_l >> 2), gm_ec = gm_tn * %d + 2 * (wg_l & 3);\n",
                    c->bm, c->bn);
    const char *v2[2] = {"acc[i][4 * j + 2 * h]", "acc[i][4 * j + 2 * h + 1]"};
    /* Operand tiles in shared memory (wg_plan_x): once the slot's copy has landed, a thread's
     * pair of fragment (i, j, h) sits where the staged output's would (same boxes, same
     * 128-byte swizzle, same element size: below), so a warp's 4-byte reads of 8 rows x 4
     * lanes fall in 32 distinct banks. x_at[input] names the pair's address per input. */
    const char *x_at[TUNER_MAX_INPUTS] = {0};
    char x_buf[2][48];
    if (c->n_x) {
        const int osz = tuner_dtype_size(p->out_dt);
        tuner_sb_printf(sb,
                        "wg_wait(wg_bar0 + 8 * (%d + wg_o), wg_xph);\nwg_xph ^= 1;\n"
                        "const int wg_xlb = 2 * (wg_l & 3) * %d, wg_xx = ((wg_xlb >> 4) ^ (wg_l >> 2)) << 4;\n"
                        "const unsigned char *const wg_xp = wg_dyn + (wg_ring + %du + (hd_u32)wg_o * %du - "
                        "hd_smem_addr(wg_dyn)) + (wg_row0 + wg_w * 16 + (wg_l >> 2)) * 128 + (wg_xlb & 15);\n",
                        wg_x_full(c), osz, c->x_at, c->n_x * c->x_bytes);
        for (int k = 0; k < c->n_x; k++) {
            snprintf(x_buf[k], sizeof(x_buf[k]), "wg_xa + %d", k * c->x_bytes);
            x_at[c->x_in[k]] = x_buf[k];
        }
    }
    char x_pair[192] = "";
    if (c->n_x)
        snprintf(x_pair, sizeof(x_pair),
                 "const unsigned char *const wg_xa = wg_xp + ((j * 8 / %d) * %d + (i * 64 + h * 8) * 128) + "
                 "(((j * 8 %% %d) * %d) ^ wg_xx);\n",
                 out_box_cols(p), c->bm * 128, out_box_cols(p), tuner_dtype_size(p->out_dt));
    /* The slot is free once every warp of its consumers has read its pairs; in the staged output
     * tile, once the TMA store has read the results there. */
    char x_free[160] = "";
    if (c->x_in_out)
        snprintf(x_free, sizeof(x_free),
                 "if (wg_storer) {\nasm volatile(\"cp.async.bulk.wait_group.read 0;\" ::: \"memory\");\n"
                 "wg_arrive(wg_bar0 + 8 * (%d + wg_o));\n}\n",
                 wg_x_empty(c));
    else if (c->n_x)
        snprintf(x_free, sizeof(x_free), "__syncwarp();\nif (wg_l == 0) wg_arrive(wg_bar0 + 8 * (%d + wg_o));\n",
                 wg_x_empty(c));
    /* Register stores apply the fused epilogue in a pass over every fragment before any store
     * (see tuner__gemm_emit_epilogue_pair); a staged tile applies it pair by pair on the way to
     * shared memory (tuner__gemm_emit_staged_pair), with neither branches nor asm in between. */
    const bool ep_pass = tuner__gemm_has_epilogue(p) && p->N >= 2 && !c->stage_out;
    if (ep_pass) {
        emit_frag_nest(sb, c, 0, c->bn / 8);
        tuner_sb_puts(sb, x_pair);
        tuner__gemm_emit_epilogue_pair_x(sb, p, "gm_b", "gm_er + i * 64 + h * 8", "gm_ec + j * 8", v2, true,
                                         c->n_x ? x_at : NULL);
        tuner_sb_puts(sb, "}\n");
        tuner_sb_puts(sb, x_free);
    }
    if (c->stage_out) {
        /* The staged tile: boxes of 128-byte rows (out_box_cols columns) x block_m rows, 16-byte
         * chunks XOR-swizzled by row as the TMA store's 128-byte swizzle expects; a warp's pair
         * writes (8 rows x 4 lanes) fall in distinct banks. With out_halves the buffer holds the
         * boxes of one half of the tile's columns at a time. Each part waits until the stores
         * before it (the previous tile's, or the first half's) have read the buffer.
         * A thread's pair of fragment (i, j, h) lies at row wg_orow = (its first row) + i * 64 +
         * h * 8, whose swizzle row (wg_orow & 7) is the lane's wg_l >> 2, and at byte
         * cb = cj + lb of its box row: cj = (j * 8 % box cols) * size, a multiple of 16, and
         * lb = the lane's 2 * (wg_l & 3) * size. Its chunk ((cb >> 4) ^ (wg_l >> 2)) is then
         * cj / 16 ^ ((lb >> 4) ^ (wg_l >> 2)): a per-thread part (wg_ox) XORed with a constant,
         * and everything else in the address is the thread's base (wg_op) plus a constant. */
        const int bc = out_box_cols(p), osz = tuner_dtype_size(p->out_dt), boxes = c->bn / bc;
        const int parts = c->out_halves ? 2 : 1, part_boxes = boxes / parts, part_j = c->bn / 8 / parts;
        const bool ob = wg_map_batched(p, 2); /* box coordinates in the output map's order (emit_tmap_fields) */
        tuner_sb_printf(sb,
                        "const int wg_olb = 2 * (wg_l & 3) * %d, wg_ox = ((wg_olb >> 4) ^ (wg_l >> 2)) << 4;\n"
                        "unsigned char *const wg_op = wg_dyn + (wg_ostage - hd_smem_addr(wg_dyn)) + "
                        "(wg_row0 + wg_w * 16 + (wg_l >> 2)) * 128 + (wg_olb & 15);\n",
                        osz);
        for (int part = 0; part < parts; part++) {
            tuner_sb_puts(sb, "if (wg_storer) asm volatile(\"cp.async.bulk.wait_group.read 0;\" ::: \"memory\");\n");
            tuner_sb_puts(sb, staged_bar);
            emit_frag_nest(sb, c, part * part_j, (part + 1) * part_j);
            tuner_sb_printf(sb,
                            "unsigned char *const wg_oa = wg_op + ((j * 8 / %d - %d) * %d + (i * 64 + h * 8) * 128) + "
                            "(((j * 8 %% %d) * %d) ^ wg_ox);\n",
                            bc, part * part_boxes, c->bm * 128, bc, osz);
            tuner_sb_puts(sb, x_pair);
            tuner__gemm_emit_staged_pair_x(sb, p, "gm_b", "gm_er + i * 64 + h * 8", "gm_ec + j * 8", v2, "wg_oa",
                                           c->n_x ? x_at : NULL);
            tuner_sb_printf(sb, "}\n"
                                /* Generic-proxy writes, then the copy engine reads them. */
                                "asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n"
                                "%s"
                                "if (wg_storer) {\n",
                            staged_bar);
            for (int b = part * part_boxes; b < (part + 1) * part_boxes; b++) {
                const int at = (b - part * part_boxes) * c->bm * 128;
                if (p->conv && ob)
                    tuner_sb_printf(sb, "wg_tma_st3(wg_map_c, gm_tn * %d + %d, gm_b, gm_tm * %d, wg_ostage + %d);\n",
                                    c->bn, b * bc, c->bm, at);
                else
                    tuner_sb_printf(sb, "wg_tma_st%d(wg_map_c, gm_tn * %d + %d, gm_tm * %d%s, wg_ostage + %d);\n",
                                    ob ? 3 : 2, c->bn, b * bc, c->bm, ob ? ", gm_b" : "", at);
            }
            tuner_sb_puts(sb, "asm volatile(\"cp.async.bulk.commit_group;\" ::: \"memory\");\n}\n");
        }
        /* (Every consumer thread is past the staged tile's barrier: its reads are done.) */
        tuner_sb_puts(sb, x_free);
        tuner_sb_puts(sb, "}\n");
    } else {
        emit_frag_nest(sb, c, 0, c->bn / 8);
        const int oalign = p->op->output.align > 0 ? p->op->output.align : 16;
        if (!p->conv && p->N % 2 && p->N >= 3 && oalign >= 2 * tuner_dtype_size(p->out_dt)) {
            /* An odd N leaves every other output row's pairs at odd element offsets: a pair
             * at an even offset (and not the row's last element) is one store of both, the
             * others two. */
            tuner__gemm_problem q = *p;
            q.out_vec = 2;
            tuner_sb_printf(sb,
                            "if (((((long long)gm_b * %s + (gm_er + i * 64 + h * 8)) * %lldLL + (gm_ec + j * 8)) & 1LL) == 0 "
                            "&& gm_ec + j * 8 + 1 < %lld) {\n",
                            tuner__gemm_M_ll(p).s, p->N, p->N);
            tuner__gemm_emit_store_pair(sb, &q, "gm_b", "gm_er + i * 64 + h * 8", "gm_ec + j * 8", v2[0], v2[1], ep_pass);
            tuner_sb_puts(sb, "} else {\n");
            tuner__gemm_emit_store_pair(sb, p, "gm_b", "gm_er + i * 64 + h * 8", "gm_ec + j * 8", v2[0], v2[1], ep_pass);
            tuner_sb_puts(sb, "}\n");
        } else {
            tuner__gemm_emit_store_pair(sb, p, "gm_b", "gm_er + i * 64 + h * 8", "gm_ec + j * 8", v2[0], v2[1], ep_pass);
        }
    }
    if (!c->stage_out)
        tuner_sb_puts(sb, "}\n}\n");
}

/* The epilogue of a swapped kernel's tile (wg_cfg.swap), closing the tile loop: a fragment's
 * rows are the matmul's n and its columns m, so a thread's two columns of one row are two output
 * rows apart. Lanes g and g ^ 1 (lane ^ 4) trade one value each, so that each holds two
 * neighbouring n of one m - the even lane its column 2t's, the odd one its column 2t + 1's -
 * a pair along the output's rows, n even. The fused epilogue is applied per element at its
 * coordinates.
 *   - From registers: stored as one pair where the output's rows allow it (out_vec 2), else as
 *     two elements, bounds checked (tuner__gemm_emit_store_pair).
 *   - Staged (stage_out 1): the tile is the output's [block_n rows of M][block_m of N], in boxes
 *     of 128-byte rows (out_box_cols of N) x block_n rows, each row's 16-byte chunks XOR-swizzled
 *     by the row as the TMA store's 128-byte swizzle expects; a thread's pair of fragment (i, j,
 *     h) lands in row 8 j + 2 t + odd, column (its n - the tile's) of its box. A warp's pair
 *     writes, 8 rows x one 16-byte chunk each, fall in distinct banks. The chain runs at clamped
 *     coordinates, and one thread then writes the boxes out with TMA stores (clipped at the
 *     output's edges), as the unswapped staged epilogue does. */
static void emit_swapped_store(tuner_sb *sb, const tuner__gemm_problem *p, const wg_cfg *c)
{
    tuner_sb_printf(sb,
                    "const int gm_en = gm_tm * %d + wg_row0 + wg_w * 16 + (wg_l >> 2), gm_em = gm_n0 + 2 * (wg_l & 3);\n"
                    "const int wg_odd = (wg_l >> 2) & 1;\n",
                    c->bm);
    const int bc = out_box_cols(p), osz = tuner_dtype_size(p->out_dt), boxes = c->bm / bc;
    const char *staged_bar = wg_staged_bar(c);
    if (c->stage_out) {
        /* The tile's local row (m) of pair (i, j, h) is 8 j + wg_sm, its local column (n) wg_sn
         * + i * 64 + h * 8; wait until the previous tile's stores have read the buffer. */
        tuner_sb_printf(sb,
                        "const int wg_sm = 2 * (wg_l & 3) + wg_odd, wg_sn = wg_row0 + wg_w * 16 + (wg_l >> 2) - wg_odd;\n"
                        "unsigned char *const wg_sp = wg_dyn + (wg_ostage - hd_smem_addr(wg_dyn)) + wg_sm * 128;\n"
                        "if (wg_storer) asm volatile(\"cp.async.bulk.wait_group.read 0;\" ::: \"memory\");\n%s",
                        staged_bar);
    }
    emit_frag_nest(sb, c, 0, c->bn / 8);
    tuner_sb_puts(sb, "const float wg_v0 = acc[i][4 * j + 2 * h], wg_v1 = acc[i][4 * j + 2 * h + 1];\n"
                      "const float wg_sx = __shfl_xor_sync(0xffffffffu, wg_odd ? wg_v0 : wg_v1, 4);\n"
                      "const float wg_p0 = wg_odd ? wg_sx : wg_v0, wg_p1 = wg_odd ? wg_v1 : wg_sx;\n");
    if (!c->stage_out) {
        tuner__gemm_emit_store_pair(sb, p, "gm_b", "gm_em + j * 8 + wg_odd", "gm_en + i * 64 + h * 8 - wg_odd", "wg_p0",
                                    "wg_p1", false);
        tuner_sb_puts(sb, "}\n}\n");
        return;
    }
    tuner_sb_printf(sb,
                    "const int wg_nl = wg_sn + i * 64 + h * 8, wg_nb = (wg_nl %% %d) * %d;\n"
                    "unsigned char *const wg_oa = wg_sp + (wg_nl / %d) * %d + j * 1024 + "
                    "((((wg_nb >> 4) ^ wg_sm) << 4) | (wg_nb & 15));\n",
                    bc, osz, bc, c->bn * 128);
    const char *pair[2] = {"wg_p0", "wg_p1"};
    tuner__gemm_emit_staged_pair_x(sb, p, "gm_b", "gm_em + j * 8 + wg_odd", "gm_en + i * 64 + h * 8 - wg_odd", pair,
                                   "wg_oa", NULL);
    tuner_sb_printf(sb, "}\n"
                        /* Generic-proxy writes, then the copy engine reads them. */
                        "asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n"
                        "%s"
                        "if (wg_storer) {\n",
                    staged_bar);
    for (int b = 0; b < boxes; b++)
        tuner_sb_printf(sb, "wg_tma_st2(wg_map_c, gm_tm * %d + %d, gm_n0, wg_ostage + %d);\n", c->bm, b * bc,
                        b * c->bn * 128);
    tuner_sb_puts(sb, "asm volatile(\"cp.async.bulk.commit_group;\" ::: \"memory\");\n}\n}\n");
}

/* Opens a loop over the consumer thread's accumulators in groups of four and declares `v`,
 * where group (i, q) lives in the partial tile at `base`: `acc` in fragment order, one thread's
 * 16-byte groups `threads` groups apart, so that each store or load of a warp is 512
 * contiguous bytes. */
static void emit_partial_nest(tuner_sb *sb, const wg_cfg *c, const char *v, const char *base)
{
    const int threads = 128 * c->consumers, quads = c->bn / 8;
    tuner_sb_printf(sb,
                    "#pragma unroll\nfor (int i = 0; i < %d; i++)\n#pragma unroll\nfor (int q = 0; q < %d; q++) {\n"
                    "float *const %s = %s + ((i * %d + q) * %d + ((int)threadIdx.x - 128)) * 4;\n",
                    c->mi, quads, v, base, quads, threads);
}

/* Stream-K's end of a consumer's unit, before the epilogue (wg_sk_plan, emit_unit_loop): a
 * segment that stops short of its tile's last k tile parks the fp32 accumulators in the
 * block's partial slot of the workspace, flags it (a release at GPU scope by one thread after
 * the consumers' barrier) and goes on to its next unit without an epilogue; a segment that
 * starts past the tile's first k tile adds the partials of the blocks before it whose ranges
 * reach into the tile (one thread acquires each flag, the consumers meet, all load; L2 only,
 * .cg, as the writes were) and goes on to the epilogue like a whole tile. The order of the sum
 * is fixed, so results do not vary between launches. */
static void emit_sk_fixup(tuner_sb *sb, const wg_cfg *c)
{
    const wg_sk_plan *k = &c->sk;
    const int threads = 128 * c->consumers;
    const long long slot = (long long)c->bm * c->bn;
    char base[96];
    tuner_sb_printf(sb,
                    "{\nunsigned *const wg_flags = reinterpret_cast<unsigned *>(ws);\n"
                    "float *const wg_parts = reinterpret_cast<float *>(reinterpret_cast<char *>(ws) + %lldLL);\n"
                    "if (wg_k1 < %lld) {\n",
                    wg_sk_parts_at(k), k->ktiles);
    snprintf(base, sizeof(base), "wg_parts + (long long)blockIdx.x * %lldLL", slot);
    emit_partial_nest(sb, c, "wg_pp", base);
    tuner_sb_printf(sb,
                    "asm volatile(\"st.global.cg.v4.f32 [%%0], {%%1, %%2, %%3, %%4};\" :: \"l\"(wg_pp), "
                    "\"f\"(acc[i][4 * q]), \"f\"(acc[i][4 * q + 1]), \"f\"(acc[i][4 * q + 2]), \"f\"(acc[i][4 * q + 3]) "
                    ": \"memory\");\n}\n"
                    "asm volatile(\"bar.sync 1, %d;\" ::: \"memory\");\n"
                    "if (threadIdx.x == 128) asm volatile(\"fence.acq_rel.gpu;\\n"
                    "st.relaxed.gpu.global.u32 [%%0], 1;\" :: \"l\"(wg_flags + blockIdx.x) : \"memory\");\n"
                    "continue;\n}\n"
                    /* The lower blocks whose ranges end inside this tile (every range ends where
                     * the next one starts). */
                    "if (wg_k0 > 0) {\n"
                    "const long long wg_t0 = (t - wg_dp) * %lld;\n"
                    "for (int wg_gp = (int)blockIdx.x - 1; wg_gp >= 0 && ((long long)wg_gp + 1) * wg_iters / %lld > wg_t0; "
                    "wg_gp--) {\n"
                    "if (threadIdx.x == 128) {\nunsigned wg_f = 0u;\n"
                    "do asm volatile(\"ld.acquire.gpu.global.u32 %%0, [%%1];\" : \"=r\"(wg_f) : \"l\"(wg_flags + wg_gp) : "
                    "\"memory\");\nwhile (wg_f == 0u);\n}\n"
                    "asm volatile(\"bar.sync 1, %d;\" ::: \"memory\");\n",
                    threads, k->ktiles, k->grid, threads);
    snprintf(base, sizeof(base), "wg_parts + (long long)wg_gp * %lldLL", slot);
    emit_partial_nest(sb, c, "wg_pp", base);
    tuner_sb_puts(sb, "float x0, x1, x2, x3;\n"
                      "asm volatile(\"ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];\" : \"=f\"(x0), \"=f\"(x1), \"=f\"(x2), "
                      "\"=f\"(x3) : \"l\"(wg_pp) : \"memory\");\n"
                      "acc[i][4 * q] += x0;\nacc[i][4 * q + 1] += x1;\nacc[i][4 * q + 2] += x2;\nacc[i][4 * q + 3] += x3;\n"
                      "}\n}\n}\n}\n");
}

/* The end of a split-K consumer's tile (its CTA's only tile, K slice %cluster_ctarank): once every
 * consumer is past the main loop the ring is free, and the fp32 accumulators are parked there in
 * fragment order; the cluster then sums the tile (tuner__gemm_emit_cluster_sum: every consumer
 * thread, its CTA's share of the rows, the epilogue applied there) between two cluster barriers,
 * which the producer warpgroup meets after its loads. Closes the tile loop. */
static void emit_split_epilogue(tuner_sb *sb, const tuner__gemm_problem *p, const wg_cfg *c)
{
    const int rb = tuner__gemm_partial_row_bytes(c->bn), threads = 128 * c->consumers;
    tuner_sb_printf(sb,
                    "asm volatile(\"bar.sync 1, %d;\" ::: \"memory\");\n"
                    "{\nconst hd_u32 wg_ps = wg_ring + (wg_row0 + wg_w * 16 + (wg_l >> 2)) * %d + (wg_l & 3) * 8;\n",
                    threads, rb);
    emit_frag_nest(sb, c, 0, c->bn / 8);
    tuner_sb_printf(sb,
                    "gm_sts_f2(wg_ps + (i * 64 + h * 8) * %d + j * 32, acc[i][4 * j + 2 * h], acc[i][4 * j + 2 * h + 1]);\n"
                    "}\n}\ngm_cluster_sync();\n",
                    rb);
    char m0[32], n0[32];
    /* The output's origin of the tile: swapped, the kernel's N tile is the output's rows. */
    if (c->swap)
        snprintf(m0, sizeof(m0), "gm_n0"); /* emit_swapped_row0 */
    else
        snprintf(m0, sizeof(m0), "gm_tm * %d", c->bm);
    snprintf(n0, sizeof(n0), "gm_t%s * %d", c->swap ? "m" : "n", c->swap ? c->bm : c->bn);
    const tuner__gemm_cluster_sum sum = {.block_m = c->bm, .block_n = c->bn, .row_bytes = rb, .split = c->split,
                                         .threads = threads, .tid = "((int)threadIdx.x - 128)", .base = "wg_ring",
                                         .b = "gm_b", .m0 = m0, .n0 = n0, .transposed = c->swap};
    tuner__gemm_emit_cluster_sum(sb, p, &sum);
    tuner_sb_puts(sb, "gm_cluster_sync();\n}\n");
}

/* Stream-K's first kernel, `<name>_flags`: one block clearing the blocks' flags
 * (emit_sk_fixup); its parameters are the workspace and a dynamic op's sizes (unused: every
 * launch of a dynamic op ends with them). Names it in zname. */
static void emit_sk_flags_kernel(tuner_sb *sb, const tuner__gemm_problem *p, const wg_cfg *c, const char *name,
                                 char *zname, size_t len)
{
    snprintf(zname, len, "%s_flags", name);
    tuner_sb_printf(sb, "extern \"C\" __global__ void __launch_bounds__(128, 1) %s(float *__restrict__ ws", zname);
    tuner__emit_dim_params(sb, p->op);
    tuner_sb_printf(sb,
                    ")\n{\n"
                    "unsigned *const wg_flags = reinterpret_cast<unsigned *>(ws);\n"
                    "for (int i = threadIdx.x; i < %lld; i += 128) wg_flags[i] = 0u;\n}\n",
                    c->sk.grid);
}

/* Registers per producer thread with two consumer warpgroups (setmaxnreg; the consumers take
 * the rest of the 64K): a TMA producer needs few; a gathering one keeps 16 row values and
 * spills below 72 (ptxas -v, 3x3 convolutions with every block_n); an unaligned matmul
 * operand's gather holds two k tiles' loads in registers (8 per 16-byte chunk, up to 8 chunks
 * per k tile: cfg_valid); the FP8 transposers (emit_transposer) hold a 4x4 byte block, its
 * permutes and the walk of the units beside it. */
static int wg_producer_regs(const tuner__gemm_problem *p)
{
    return wg_any_gathered(p) ? 168 : wg_gathers_a(p) ? 72 : wg_any_tnsp(p) ? 56 : 40;
}

/* A dynamic op's grid as a rule over its named M or batch (tuner_grid_rule: min(cap, mul *
 * ceil(coef * sizes / div))), its value at max the static grid wg_emit computes there:
 *  - persistent tiles: min(SMs, batch * ceil(M / block_m) * tiles_n);
 *  - cluster pairs: 2 * min(SMs / 2, pairs), ceil(tiles_m / 2) = ceil(M / (2 block_m)) pair rows;
 *  - split-K: split CTAs per tile, not capped (cfg_valid: at max they all fit, so at every size);
 *  - pingpong: a block per two tiles, min(SMs, ceil(tiles / 2)); a named batch or an even tiles_n
 *    makes that a rule, an odd tiles_n with a named M does not (ceil of a ceil): the rule then
 *    counts (tiles_n + 1) / 2 units per tile row, up to ceil(tiles_m / 2) more than there are:
 *    some blocks then hold one tile, any past the tile count none (emit_unit_loop; the
 *    hand-over at the end skips those);
 *  - swapped operands (p is the matmul's own view, tiles_m and tiles_n the kernel's): the named
 *    M counts block_n tiles, ceil(M / block_n) per kernel tile row, the same rules with the two
 *    sides exchanged.
 * Stream-K has none: one block per SM at every size (wg_emit). */
static int wg_grid_rule(const tuner__gemm_problem *p, const tuner_arch *a, const wg_cfg *c, long long tiles_m,
                        long long tiles_n, tuner_launch *l)
{
    const tuner_op *op = p->op;
    const unsigned mask = p->m_sym | p->batch_sym;
    /* Per named size: units = ceil(coef * size / div) * mul. */
    long long coef = 1, div = 1, mul = 1, cap = a->sm_count;
    if (c->swap && c->cluster == 2) { /* N pairs: pairs of the matmul's M tiles (emit_unit_loop) */
        if (!p->m_sym)
            coef = tiles_m * tuner__gemm_cdiv(tiles_n, 2), mul = 2;
        else
            div = 2 * c->bn, mul = 2 * tiles_m;
        cap = 2 * (a->sm_count / 2);
    } else if (c->swap) { /* (unbatched: wg_swap_ok) */
        if (c->split > 1) /* a cluster of split CTAs per tile, not capped (as unswapped) */
            cap = 0, mul = c->split;
        if (!p->m_sym)
            coef = tiles_m * tiles_n, div = c->pingpong ? 2 : 1;
        else
            div = c->bn, mul *= c->pingpong ? (tiles_m + 1) / 2 : tiles_m;
    } else if (c->cluster == 2) {
        long long pm, pn;
        wg_pair_grid(c, tiles_m, tiles_n, &pm, &pn);
        if (p->m_sym)
            div = c->pair_n ? c->bm : 2 * c->bm, mul = 2 * pn * p->batch;
        else
            coef = pm * pn, mul = 2;
        cap = 2 * (a->sm_count / 2);
    } else if (c->split > 1) {
        if (p->m_sym)
            div = c->bm, mul = tiles_n * p->batch * c->split;
        else
            coef = tiles_m * tiles_n, mul = c->split;
        cap = 0;
    } else if (c->pingpong) {
        if (p->m_sym)
            div = c->bm, mul = (tiles_n * p->batch + 1) / 2;
        else
            coef = tiles_m * tiles_n, div = 2;
    } else {
        if (p->m_sym)
            div = c->bm, mul = tiles_n * p->batch;
        else
            coef = tiles_m * tiles_n;
    }
    return tuner__grid_rule(l, 0, op, mask, coef, div, mul, cap);
}

/* The barrier a consumer waits on for stage wg_s: its `full` one, or where the stage holds a tile
 * transposed in the kernel (wg_tnsp) its `ready` one (wg_ready). */
static void wg_stage_ready(const tuner__gemm_problem *p, const wg_cfg *c, char *buf, size_t len)
{
    if (wg_any_tnsp(p))
        snprintf(buf, len, "wg_bar0 + 8 * (%d + wg_s)", wg_ready(c));
    else
        snprintf(buf, len, "wg_bar0 + 8 * wg_s");
}

/* The consumers' main loop of an FP8 matmul that promotes each k tile (a k tile is 128 FP8
 * k elements): its wgmma accumulate into a tile of their own (wg_t; the first k step overwrites
 * it, scale-d 0), which is then added to the fp32 accumulators. Without fast accumulation
 * (attrs.matmul.fast_accum false) that is all: no sum spans more than 128 k in the tensor cores,
 * whose FP8 partial sums keep only about 14 bits. With per-block scales (DeepSeek-V3's: A's
 * 1x128, [M, KB]; B's 128x128, [ceil(N/128), KB]; KB = ceil(K/128)) a k tile is one k block and
 * the addition is scaled: acc += wg_t * sa[row][kt] * sb[n block][kt], the scales loaded before
 * the stage is waited for, so that their latency hides behind it; a tile lies in one n block
 * (block_n 64 or 128, cfg_valid): one B scale per k tile. The addition reads the tile, so each k
 * tile's wgmma are waited for (and the stage goes back at once). */
static void emit_promoting_loop(tuner_sb *sb, const tuner__gemm_problem *p, const wg_cfg *c, int S, int a_k16,
                                int b_k16)
{
    const int nacc = c->bn / 2;
    char full[48];
    wg_stage_ready(p, c, full, sizeof(full));
    const long long kb = tuner__gemm_cdiv(p->K, 128);
    char peer[96] = "", loads[640] = "", sbp[128] = "";
    if (c->cluster == 2)
        snprintf(peer, sizeof(peer), " wg_arrive_peer(wg_bar0 + 8 * (%d + wg_s), wg_rank ^ 1u);", S);
    if (p->block_scales) {
        snprintf(sbp, sizeof(sbp), "const float *const wg_sbp = in%d + (long long)(gm_tn * %d / 128) * %lldLL;\n",
                 p->bsb_in, c->bn, kb);
        snprintf(loads, sizeof(loads),
                 "float wg_bs[%d][2];\n{\nconst float wg_sbv = __ldg(wg_sbp + kt);\n"
                 "#pragma unroll\nfor (int i = 0; i < %d; i++)\n#pragma unroll\nfor (int h = 0; h < 2; h++) {\n"
                 "const int wg_r = min(gm_tm * %d + wg_row0 + i * 64 + wg_w * 16 + (wg_l >> 2) + h * 8, %s);\n"
                 "wg_bs[i][h] = __ldg(in%d + (long long)wg_r * %lldLL + kt) * wg_sbv;\n}\n}\n",
                 c->mi, c->mi, c->bm, tuner__gemm_M(p, -1).s, p->bsa_in, kb);
    }
    tuner_sb_printf(sb,
                    "#pragma unroll\nfor (int i = 0; i < %d; i++)\n#pragma unroll\nfor (int j = 0; j < %d; j++) acc[i][j] = 0.0f;\n"
                    "int wg_prev = -1;\n"
                    "float wg_t[%d][%d];\n"
                    "%s"
                    "for (int kt = wg_k0; kt < wg_k1; kt++) {\n"
                    "%s"
                    "wg_wait(%s, wg_ph);\n"
                    "const hd_u32 wg_so = (hd_u32)wg_s * %du;\n"
                    "wg_fence();\n"
                    "#pragma unroll\nfor (int kk = 0; kk < %d; kk++) {\n"
                    "const hd_u64 wg_db = wg_desc(wg_dlb + wg_so + kk * %d);\n"
                    "#pragma unroll\nfor (int i = 0; i < %d; i++) {\n"
                    "const hd_u64 wg_da = wg_desc(wg_dla + wg_so + (hd_u32)(wg_row0 + i * 64) * 8u + kk * %d);\n"
                    "if (kk == 0) wg_mma_z(wg_t[i], wg_da, wg_db); else wg_mma(wg_t[i], wg_da, wg_db);\n"
                    "}\n}\n"
                    "wg_commit();\n"
                    "wg_wait_group<0>();\n"
                    "if (wg_l == 0) { wg_arrive(wg_bar0 + 8 * (%d + wg_s));%s }\n"
                    /* Fragment (i, 4 j + 2 h + e) is row i * 64 + h * 8 of the thread's rows. */
                    "#pragma unroll\nfor (int i = 0; i < %d; i++)\n#pragma unroll\nfor (int j = 0; j < %d; j++)\n"
                    "%s"
                    "if (++wg_s == %d) { wg_s = 0; wg_ph ^= 1; }\n"
                    "}\n"
                    "%s",
                    c->mi, nacc, c->mi, nacc, sbp, loads, full, c->stage_bytes / 16, WG_KSTEPS, b_k16 / 16, c->mi, a_k16 / 16,
                    S, peer, c->mi, nacc,
                    p->block_scales ? "acc[i][j] = fmaf(wg_t[i][j], wg_bs[i][(j >> 1) & 1], acc[i][j]);\n"
                                    : "acc[i][j] += wg_t[i][j];\n",
                    S, c->pingpong ? "asm volatile(\"bar.arrive %0, 256;\" :: \"r\"(4 - wg_c) : \"memory\");\n" : "");
}

/* The consumers' main loop (fast accumulation: the wgmma of every k tile accumulate into the
 * tile's fp32 accumulators): each k tile's wgmma issued as one group, one group kept in flight,
 * the stage of the group before it released. */
static void emit_pipelined_loop(tuner_sb *sb, const tuner__gemm_problem *p, const wg_cfg *c, int S, int a_k16,
                                int b_k16)
{
    const int nacc = c->bn / 2;
    char full[48];
    wg_stage_ready(p, c, full, sizeof(full));
    tuner_sb_printf(sb,
                    "#pragma unroll\nfor (int i = 0; i < %d; i++)\n#pragma unroll\nfor (int j = 0; j < %d; j++) acc[i][j] = 0.0f;\n"
                    "int wg_prev = -1;\n"
                    "for (int kt = wg_k0; kt < wg_k1; kt++) {\n"
                    "wg_wait(%s, wg_ph);\n%s"
                    "const hd_u32 wg_so = (hd_u32)wg_s * %du;\n"
                    "wg_fence();\n"
                    "#pragma unroll\nfor (int kk = 0; kk < %d; kk++) {\n"
                    "const hd_u64 wg_db = wg_desc(wg_dlb + wg_so + kk * %d);\n"
                    "#pragma unroll\nfor (int i = 0; i < %d; i++) {\n",
                    c->mi, nacc, full,
                    /* A gathered by cp.async (or an unaligned operand stored by the producer's
                     * threads) was written through the generic proxy; wgmma reads through the
                     * async one. */
                    wg_gathers_a(p) || wg_any_gathered(p) ? "asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n" : "",
                    c->stage_bytes / 16, WG_KSTEPS, b_k16 / 16, c->mi);
    /* In a pair a stage is free once both CTAs' consumers are done with it: the peer
     * multicasts its half of the shared tile into this CTA's stage too. */
    const char *peer_release = "";
    char peer_buf[96];
    if (c->cluster == 2) {
        snprintf(peer_buf, sizeof(peer_buf), " wg_arrive_peer(wg_bar0 + 8 * (%d + wg_prev), wg_rank ^ 1u);", S);
        peer_release = peer_buf;
    }
    /* The m64 slice: rows wg_row0 + i * 64; K-major rows are 128 bytes, MN-major slices are
     * whole 64-column boxes of 8 KiB (in descriptor units of 16 bytes: 8 per row). */
    tuner_sb_printf(sb,
                    "wg_mma(acc[i], wg_desc(wg_dla + wg_so + (hd_u32)(wg_row0 + i * 64) * 8u + kk * %d), wg_db);\n"
                    "}\n}\n"
                    "wg_commit();\n"
                    /* One k-tile of wgmma stays in flight; the one before it is done reading its
                     * stage, which goes back to the producer (one arrive per consumer warp). */
                    "wg_wait_group<1>();\n"
                    "if (wg_prev >= 0 && wg_l == 0) { wg_arrive(wg_bar0 + 8 * (%d + wg_prev));%s }\n"
                    "wg_prev = wg_s;\n"
                    "if (++wg_s == %d) { wg_s = 0; wg_ph ^= 1; }\n"
                    "}\n"
                    /* Every wgmma of the tile is issued: the other consumer's turn. */
                    "%s"
                    "wg_wait_group<0>();\n"
                    "if (wg_prev >= 0 && wg_l == 0) { wg_arrive(wg_bar0 + 8 * (%d + wg_prev));%s }\n",
                    a_k16 / 16, S, peer_release, S,
                    c->pingpong ? "asm volatile(\"bar.arrive %0, 256;\" :: \"r\"(4 - wg_c) : \"memory\");\n" : "", S,
                    peer_release);
}

static int wg_emit(const tuner__gemm_problem *p, const tuner_target *t, const tuner_schedule *s, tuner_program *prog,
                   char **err)
{
    const tuner_arch *a = tuner__arch(t);
    wg_cfg c;
    const char *tmpl = p->conv ? "conv2d_wgmma" : "matmul_wgmma";
    if (!a || !a->has_wgmma || !wg_supported(p) || cfg_of(p, a, s, &c) < 0 || !cfg_valid(p, a, &c)) {
        if (err) {
            char msg[80];
            snprintf(msg, sizeof(msg), "%s: invalid schedule for this op/target", tmpl);
            *err = strdup(msg);
        }
        return -EINVAL;
    }
    /* With B pretransposed the whole kernel reads it K-major (wg_pview); its launch comes after
     * the transposing one's (below). */
    tuner__gemm_problem pq;
    p = wg_pview(p, c.pre, &pq);
    /* The main loop's problem kv: p, or swapped its transpose (wg_kview); the signature, the
     * epilogue, the launch and the grid rule speak of p. */
    tuner__gemm_problem kq;
    const tuner__gemm_problem *kv = wg_kview(p, &c, &kq);
    const long long tiles_m = tuner__gemm_cdiv(kv->M, c.bm), tiles_n = tuner__gemm_cdiv(kv->N, c.bn);
    const long long tiles = p->batch * tiles_m * tiles_n;
    const long long ktiles = tuner__gemm_cdiv(p->K, wg_bk(p));
    /* Work units: tiles (cooperative) or pairs of tiles, one per consumer (pingpong). */
    const long long units = tuner__gemm_cdiv(tiles, c.unit_tiles);
    int grid = (int)(units < a->sm_count ? units : a->sm_count);
    if (c.cluster == 2) { /* pairs of CTAs, one pair per pair of M (or, pair_n, N) tiles */
        long long pm, pn;
        wg_pair_grid(&c, tiles_m, tiles_n, &pm, &pn);
        const long long pairs = p->batch * pm * pn;
        grid = 2 * (int)(pairs < a->sm_count / 2 ? pairs : a->sm_count / 2);
    }
    if (c.split > 1) /* one cluster of split CTAs per tile (cfg_valid: they all fit at once) */
        grid = (int)tiles * c.split;
    if (c.stream_k) { /* one block per SM (cfg_valid: there is work to share out) */
        wg_sk_plan_of(p, a, &c, &c.sk);
        grid = (int)c.sk.grid;
    }
    char name[56];
    tuner__gemm_kernel_name(name, sizeof(name), tmpl, s);

    tuner_sb sb;
    tuner_sb_init(&sb);
    tuner__gemm_emit_head(&sb, t);
    if (tuner_dtype_is_fp8(p->out_dt))
        tuner_sb_puts(&sb, tuner__gemm_fp8_out_helpers);
    tuner_sb_puts(&sb, tuner__hopper_helpers);
    if (wg_any_gathered(p))
        tuner_sb_puts(&sb, wg_gather_helpers);
    if (c.split > 1)
        tuner_sb_puts(&sb, tuner__gemm_cluster_helpers);
    if (c.n_x)
        tuner_sb_puts(&sb, wg_x_helpers);
    if (wg_any_tnsp(p)) {
        tuner_sb_puts(&sb, tuner__gemm_bytes_4x4_fn);
        tuner_sb_puts(&sb, wg_tnsp_helpers);
    }
    emit_mma_fn(&sb, kv, c.bn);

    emit_signature(&sb, p, &c, name, c.threads, 1, c.split > 1 ? c.split : c.cluster);
    const int S = c.stages;
    /* The operand tile slots' barriers (wg_x_full, wg_x_empty): the producer's expect_tx; an
     * arrive per warp of the consumers that read the slot (this CTA's only, also in a pair), or
     * in the staged output tile the storer's, once its store has read the tile. */
    char x_init[160] = "";
    if (c.n_x)
        snprintf(x_init, sizeof(x_init),
                 "for (int s = 0; s < %d; s++) { wg_bar_init(wg_bar0 + 8 * (%d + s), 1); "
                 "wg_bar_init(wg_bar0 + 8 * (%d + s), %d); }\n",
                 c.unit_tiles, wg_x_full(&c), wg_x_empty(&c), c.x_in_out ? 1 : c.pingpong ? 4 : 4 * c.consumers);
    /* The transposed stages' `ready` barriers (wg_ready): an arrive per transposing warp. */
    char t_init[128] = "";
    if (wg_any_tnsp(p))
        snprintf(t_init, sizeof(t_init), "for (int s = 0; s < %d; s++) wg_bar_init(wg_bar0 + 8 * (%d + s), %d);\n", S,
                 wg_ready(&c), wg_tnsp_warps(&c));
    tuner_sb_printf(&sb,
                    "extern __shared__ __align__(1024) unsigned char wg_dyn[];\n"
                    "__shared__ alignas(8) hd_u64 wg_bars[%d];\n"
                    "const hd_u32 wg_ring = (hd_smem_addr(wg_dyn) + 1023u) & ~1023u;\n"
                    "const hd_u32 wg_bar0 = hd_smem_addr(wg_bars);\n"
                    "const hd_u32 wg_stage = wg_ring + %d;\n"
                    /* The warpgroup, read from lane 0 so that the compiler knows it is the
                     * same across the warp: what derives from it (descriptors, the epilogue's
                     * rows) then lives in uniform registers, and wgmma takes its descriptors
                     * from there without a move per instruction. */
                    "const int wg_g = __shfl_sync(0xffffffffu, threadIdx.x >> 7, 0);\n"
                    "if (threadIdx.x == 0) {\n"
                    /* Stage s: `full` barrier s, `empty` barrier S + s. */
                    "for (int s = 0; s < %d; s++) { wg_bar_init(wg_bar0 + 8 * s, %d); wg_bar_init(wg_bar0 + 8 * (%d + s), %d); }\n"
                    "%s%s"
                    "asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");\n"
                    "}\n%s",
                    wg_bar_count(p, &c), S * c.stage_bytes, S,
                    wg_full_count(p), S, (c.pingpong ? 4 : 4 * c.consumers) * c.cluster, x_init, t_init,
                    /* A pair's barriers are initialised before either CTA multicasts into the
                     * other or arrives on its barriers. */
                    c.cluster == 2 ? "asm volatile(\"barrier.cluster.arrive.release.aligned;\\n"
                                     "barrier.cluster.wait.acquire.aligned;\" ::: \"memory\");\n"
                                   : "__syncthreads();\n");
    if (c.cluster == 2 || c.split > 1)
        tuner_sb_puts(&sb, "unsigned wg_rank;\nasm(\"mov.u32 %0, %%cluster_ctarank;\" : \"=r\"(wg_rank));\n");
    /* The block's k tiles: all, or a split-K cluster's slice (stream-K: per unit,
     * emit_unit_loop). */
    if (c.split > 1) {
        const long long kper = tuner__gemm_cdiv(ktiles, c.split);
        tuner_sb_printf(&sb, "const int wg_k0 = (int)wg_rank * %lld, wg_k1 = min(%lld, wg_k0 + %lld);\n", kper, ktiles,
                        kper);
    } else if (!c.stream_k) {
        tuner_sb_printf(&sb, "const int wg_k0 = 0, wg_k1 = %lld;\n", ktiles);
    }
    /* Producer. */
    tuner_sb_puts(&sb, "if (wg_g == 0) {\n");
    if (c.consumers == 2)
        tuner__hopper_emit_setmaxnreg(&sb, false, wg_producer_regs(p));
    if (wg_gathers_a(p))
        emit_conv_producer(&sb, p, &c, tiles_m, tiles_n);
    else if (wg_any_gathered(p))
        emit_gather_producer(&sb, p, &c, tiles_m, tiles_n);
    else
        emit_tma_producer(&sb, kv, &c, tiles_m, tiles_n);
    if (wg_any_tnsp(p))
        emit_transposer(&sb, p, &c, tiles_m, tiles_n, false);
    /* A split-K cluster's producers meet its consumers' two barriers (emit_split_epilogue). */
    if (c.split > 1)
        tuner_sb_puts(&sb, "__syncwarp();\ngm_cluster_sync();\ngm_cluster_sync();\n");
    /* The transposing warpgroup (tnsp_wg), after the consumers; it meets the split-K cluster's
     * barriers too (barrier.cluster counts every thread of the cluster). */
    if (c.tnsp_wg) {
        tuner_sb_printf(&sb, "} else if (wg_g == %d) {\n", 1 + c.consumers);
        emit_transposer(&sb, p, &c, tiles_m, tiles_n, true);
        if (c.split > 1)
            tuner_sb_puts(&sb, "__syncwarp();\ngm_cluster_sync();\ngm_cluster_sync();\n");
    }
    /* Consumers. */
    tuner_sb_puts(&sb, "} else {\n");
    if (c.consumers == 2)
        tuner__hopper_emit_setmaxnreg(&sb, true, (65536 / 128 - wg_producer_regs(p)) / 2 / 8 * 8);
    const int nacc = c.bn / 2;
    /* Descriptor strides: K-major rows are 128 bytes (SBO 1 KiB per 8 rows; LBO unused with the
     * 128-byte swizzle); MN-major boxes are 64 columns, 8 KiB apart (LBO), 8-row k groups 1 KiB
     * apart (SBO). Per k16 step (k32 of FP8) the start moves 32 bytes (K-major) or 16 rows = 2 KiB. */
    /* An FP8 operand transposed in the kernel (wg_tnsp) is K-major by the time wgmma reads it. */
    const bool ka = kv->kmajor[0] || wg_tnsp(kv, 0), kb = kv->kmajor[1] || wg_tnsp(kv, 1);
    const int a_k16 = ka ? 32 : 2048, b_k16 = kb ? 32 : 2048;
    const int a_lbo = ka ? 16 : 8192, b_lbo = kb ? 16 : 8192;
    /* Byte offset of consumer c's m64 slice i inside the A tile. */
    tuner_sb_printf(&sb,
                    "const int wg_c = wg_g - 1, wg_w = (threadIdx.x >> 5) & 3, wg_l = threadIdx.x & 31;\n"
                    /* Cooperative: the consumers split each tile's rows; pingpong: consumer c
                     * takes place c of every unit, whole tiles, and stages them in tile wg_o; the
                     * first thread of the staged tile's warpgroups issues its TMA stores. */
                    "const int wg_o = %s, wg_row0 = %s * %d;\n"
                    "const hd_u32 wg_ostage = wg_stage + wg_o * %d;\n"
                    "const bool wg_storer = threadIdx.x == 128 * (1 + wg_o);\n"
                    "float acc[%d][%d];\n"
                    "int wg_s = 0, wg_ph = 0;\n"
                    /* Descriptors of stage 0's A and B tiles, moved per stage and k step. */
                    "const hd_u32 wg_dla = wg_desc_lo(wg_ring, %d), wg_dlb = wg_desc_lo(wg_ring + %d, %d);\n",
                    c.pingpong ? "wg_c" : "0", c.pingpong ? "0" : "wg_c", c.rows_per_wg,
                    c.out_bytes / c.unit_tiles, c.mi, nacc, a_lbo, c.a_bytes, b_lbo);
    if (c.pingpong)
        tuner_sb_puts(&sb, "long long wg_i = 0;\n");
    if (c.n_x) /* the phase of this consumer's operand tile slot */
        tuner_sb_puts(&sb, "int wg_xph = 0;\n");
    emit_unit_loop(&sb, kv, &c, tiles_m, tiles_n, true);
    if (c.pingpong) {
        /* The producer fills the ring tile after tile of the block's: this consumer's i-th tile
         * is the block's (2i + c)-th, its k tiles start there. The consumers take turns at the
         * tensor cores (named barrier 3 + c: consumer c's turn), so one's epilogue runs beside
         * the other's wgmma; consumer 0 starts. */
        tuner_sb_printf(&sb,
                        "{\nconst long long wg_pos = (2 * wg_i + wg_c) * %lldLL;\n"
                        "wg_s = (int)(wg_pos %% %d);\nwg_ph = (int)((wg_pos / %d) & 1);\n}\n"
                        "if (wg_c != 0 || wg_i != 0) asm volatile(\"bar.sync %%0, 256;\" :: \"r\"(3 + wg_c) : \"memory\");\n"
                        "wg_i++;\n",
                        ktiles, S, S);
    }
    if (p->promote)
        emit_promoting_loop(&sb, p, &c, S, a_k16, b_k16);
    else
        emit_pipelined_loop(&sb, kv, &c, S, a_k16, b_k16);
    if (c.stream_k)
        emit_sk_fixup(&sb, &c);
    if (c.split > 1)
        emit_split_epilogue(&sb, p, &c);
    else if (c.swap)
        emit_swapped_store(&sb, p, &c);
    else
        emit_tile_epilogue(&sb, p, &c);
    if (c.pingpong) {
        /* Consumer 0 takes n0 tiles, consumer 1 n1 = n0 or n0 - 1. Each turn barrier ends with
         * one hand-over nobody waited for (consumer 1's last, or consumer 0's last when it had
         * the extra tile): its owner completes it, leaving no barrier half-arrived at exit. */
        if (p->dynamic) {
            /* A dynamic op's grid may hold blocks past the last unit (wg_grid_rule): with no
             * tile they hand nothing over. */
            char cnt[96];
            const char *tx = wg_tiles_expr(kv, &c, tiles_m, tiles_n, cnt, sizeof(cnt));
            tuner_sb_printf(&sb,
                            "{\nconst long long wg_t0 = blockIdx.x, wg_t1 = wg_t0 + gridDim.x, wg_g2 = 2LL * gridDim.x, wg_nt = %s;\n"
                            "const long long wg_n0 = wg_t0 < wg_nt ? (wg_nt - 1 - wg_t0) / wg_g2 + 1 : 0;\n"
                            "const long long wg_n1 = wg_t1 < wg_nt ? (wg_nt - 1 - wg_t1) / wg_g2 + 1 : 0;\n"
                            "if (wg_n0 > 0 && (wg_c == 0 ? wg_n0 == wg_n1 : wg_n0 > wg_n1)) "
                            "asm volatile(\"bar.sync %%0, 256;\" :: \"r\"(3 + wg_c) : \"memory\");\n}\n",
                            tx);
        } else {
            tuner_sb_printf(&sb,
                            "{\nconst long long wg_t0 = blockIdx.x, wg_t1 = wg_t0 + gridDim.x, wg_g2 = 2LL * gridDim.x;\n"
                            "const long long wg_n0 = (%lldLL - 1 - wg_t0) / wg_g2 + 1;\n"
                            "const long long wg_n1 = wg_t1 < %lldLL ? (%lldLL - 1 - wg_t1) / wg_g2 + 1 : 0;\n"
                            "if (wg_c == 0 ? wg_n0 == wg_n1 : wg_n0 > wg_n1) "
                            "asm volatile(\"bar.sync %%0, 256;\" :: \"r\"(3 + wg_c) : \"memory\");\n}\n",
                            tiles, tiles, tiles);
        }
    }
    /* The quantize step's amax: each consumer warp's largest value over all its block's tiles
     * (gm_amax_v, kept by the store emitters), one atomic per warp and block at the end. */
    if (p->amax_in >= 0) {
        tuner_sb_puts(&sb, "__syncwarp();\n");
        tuner__gemm_emit_amax_flush(&sb, p);
    }
    /* Stores still in flight complete before the block exits. */
    if (c.stage_out)
        tuner_sb_puts(&sb, "if (wg_storer) asm volatile(\"cp.async.bulk.wait_group 0;\" ::: \"memory\");\n");
    tuner_sb_puts(&sb, "}\n");
    /* Neither CTA of a pair leaves while the other may still multicast into it or arrive on
     * its barriers. */
    if (c.cluster == 2)
        tuner_sb_puts(&sb, "asm volatile(\"barrier.cluster.arrive.release.aligned;\\nbarrier.cluster.wait.acquire.aligned;\" "
                           "::: \"memory\");\n");
    tuner_sb_puts(&sb, "}\n");

    char zname[64];
    if (c.stream_k)
        emit_sk_flags_kernel(&sb, p, &c, name, zname, sizeof(zname));
    if (c.pre) {
        snprintf(zname, sizeof(zname), "%s_bt", name);
        tuner__gemm_emit_byte_transpose(&sb, p->op, zname, p->K, p->N);
    }
    char *src = tuner_sb_take(&sb);
    if (!src)
        return -ENOMEM;
    prog->source = src;
    prog->output_dtype = p->out_dt;
    tuner_launch *main_launch = &prog->kernels[0];
    prog->n_kernels = 1;
    prog->workspace_bytes = 0;
    if (c.stream_k) {
        /* The flags are cleared by a launch of their own before the GEMM's: its blocks cannot
         * tell a flag set in this launch from one left by another. */
        tuner__gemm_set_launch(&prog->kernels[0], p, zname, 1, 1, 1, 128, 0, true);
        prog->kernels[0].args[0] = TUNER_BUF_WORKSPACE;
        prog->kernels[0].n_args = 1;
        (void)tuner__launch_dim_args(&prog->kernels[0], p->op);
        main_launch = &prog->kernels[1];
        prog->n_kernels = 2;
        prog->workspace_bytes = (size_t)(wg_sk_parts_at(&c.sk) + c.sk.grid * (long long)c.bm * c.bn * 4);
    }
    if (c.pre) {
        /* B [K, N] -> B^T [N, K] in the workspace, then the GEMM (its B map on the workspace). */
        tuner_launch *bt = &prog->kernels[0];
        tuner__gemm_set_launch(bt, p, zname, (unsigned)tuner__gemm_cdiv(p->N, TUNER_BYTE_TRANSPOSE_TILE),
                               (unsigned)tuner__gemm_cdiv(p->K, TUNER_BYTE_TRANSPOSE_TILE), 1, 256,
                               TUNER_BYTE_TRANSPOSE_SMEM, true);
        bt->args[0] = TUNER_BUF_INPUT0 + 1;
        bt->args[1] = TUNER_BUF_WORKSPACE;
        bt->n_args = 2;
        (void)tuner__launch_dim_args(bt, p->op);
        main_launch = &prog->kernels[1];
        prog->n_kernels = 2;
        prog->workspace_bytes = (size_t)(p->N * p->K);
    }
    tuner__gemm_set_launch(main_launch, p, name, (unsigned)grid, 1, 1, (unsigned)c.threads,
                           tuner__dynamic_shared((unsigned)c.smem, 8u * (unsigned)wg_bar_count(p, &c)), c.stream_k);
    for (int i = 0; i < 3; i++)
        if (wg_has_map(p, &c, i))
            wg_kernel_tmap(p, kv, &c, i, &main_launch->maps[main_launch->n_maps++]);
    for (int k = 0; k < c.n_x; k++)
        wg_tmap_x(p, &c, k, &main_launch->maps[main_launch->n_maps++]);
    for (int i = 0; c.pre && i < main_launch->n_maps; i++)
        if (main_launch->maps[i].buf == TUNER_BUF_INPUT0 + 1)
            main_launch->maps[i].buf = TUNER_BUF_WORKSPACE;
    /* (Stream-K's grid is one block per SM at every size.) */
    if (p->dynamic && !c.stream_k)
        return wg_grid_rule(p, a, &c, tiles_m, tiles_n, main_launch);
    return 0;
}

/* ---- space ---- */

/* Tiles by consumer warpgroups: each consumer owns 64 or 128 rows of block_m and the whole
 * block_n (its wgmma N); accumulators stay within 128 fp32 registers per thread. Pingpong tiles
 * are one consumer's: two consumers work on two tiles at once, each with its own ring, so one's
 * epilogue overlaps the other's wgmma. */
static const int wg_tiles[][4] = {
    /* block_m, block_n, consumers, pingpong */
    {128, 256, 2, 0}, {128, 192, 2, 0}, {128, 128, 2, 0}, {128, 64, 2, 0}, {256, 128, 2, 0}, {256, 64, 2, 0},
    {64, 256, 1, 0},  {64, 192, 1, 0},  {64, 128, 1, 0},  {64, 64, 1, 0},  {128, 128, 1, 0}, {128, 64, 1, 0},
    {128, 128, 2, 1}, {64, 256, 2, 1},  {64, 192, 2, 1},  {64, 128, 2, 1}, {128, 64, 2, 1},
};

#define WG_SPACE_SIG                                                                                              \
    "wgmma v1: tma sw128 bk64, tmaps as kernel parameters; tiles{128x256c2,128x192c2," \
    "128x128c2,128x64c2,256x128c2,256x64c2,64x256c1,64x192c1,64x128c1,64x64c1,128x128c1,128x64c1; pingpong " \
    "(one ring, consumers take turns) 128x128,64x256,64x192,64x128,128x64} stages{3..6,8,12 (where they fit)} swz{1,8}; persistent "  \
    "grid min(units,SMs); acc<=128 regs, smem<=max; vec 8 both (conv2d), no prologue; stage_out{0,1,2 (swz 8; 2: halves where the whole tile leaves no room)}; "          \
    "cluster{1,2 (swz 8, block_n 128/256, B multicast)}; cluster_n{1,2 (swz 8, where tiles along M <= 2 and " \
    "tiles along N >= 2x those; A multicast, halves of K-major rows or 64-column boxes (block_m 128+); no pingpong; dense A only)}; split_k{1,2,3,4,6,8 (swz 8, no pair/pingpong/staging, " \
    "one cluster (x) per tile, tiles <= arch cluster_fit(split), >= 2 k tiles per slice, partials summed through dsmem)}; " \
    "stream_k{0,1 (swz 8, unpaired, no pingpong/split; grid = SMs; whole waves, then the rest (+ a wave when under half " \
    "of one) cut into equal k ranges run backwards; >= 4 k tiles per block; fp32 partials and flags in the workspace, " \
    "a flag-clearing launch first; a named M or batch: the division made at launch from the tile count, tiles whole where nothing " \
    "is shared, >= 8 k tiles, K fixed)}; matmul operands TMA cannot address (rows or base not 16-byte aligned): gathered " \
    "by the producer warpgroup (aligned ld.global.nc.v4 + shfl + funnel shift into sw128, st.shared, " \
    "fence.proxy.async, 128 (+1 expect_tx) arrivals on full), no pairs or pingpong, " \
    "two k tiles of chunks in flight (<= 8 per thread with two consumers, <= 12 with one), producer 168 regs (the most a .dec allows at 384 threads); " \
    "fp8 MN-major operands: boxes 128 mn x 128 k into a raw stage area, transposed by the producer's 3 spare warps " \
    "(4x4 byte blocks, prmt) into the K-major tile, `ready` barriers (3 arrivals), tiles of whole 128 boxes, no pairs, producer 56 regs; " \
    "tnsp_wg{0,1 (four transposing warps more in a warpgroup after one consumer's, <= 64 accumulators; 7 arrivals)}; " \
    "swap{0,1 (C^T = B^T A^T: 16-bit 2-D matmuls, or FP8 ones with both operands K-major, scales in the epilogue, no " \
    "promotion, no FP8 output; A K-major, TMA both, M <= 3072; block_n = M's side, the multiple of 8 " \
    "cutting M (max, and a named M's min) into t tiles for the 8 t from ceil(M/256), >= 16 past the first; block_m 64c1,128c1,128c2,64 pingpong; stages 4,6,8,12; " \
    "swz 8; lane pairs traded by shfl, stored from registers or (stage_out 1) through a staged tile of block_n rows of M " \
    "in 128-byte swizzled boxes and TMA stores, or split_k{2,3,4} (not pingpong; partials summed transposed through " \
    "dsmem, a pair of output columns per thread), or N pairs (cluster_n 2; 16-bit, not pingpong, stages 8/12, M > block_n: " \
    "B's tile multicast in halves, of its k rows for a 64-row MN-major one; an odd last pair's second tile the last again); " \
    "no halves or stream-K)}; " \
    "pretranspose{0,1 (FP8 B [K,N] beside a K-major A, unbatched, K % 16 == 0: a launch before the GEMM's writes B^T [N,K] " \
    "to the workspace, 128x128 byte tiles through shared memory, 4x4 blocks by prmt; the GEMM K-major, its B map on the " \
    "workspace, every schedule above (swapped too) but stream-K)}"

/* Fills p and says whether the template for ops of `kind` (matmul_wgmma or conv2d_wgmma)
 * applies to op on t. */
static bool wg_problem(const tuner_op *op, const tuner_target *t, tuner_op_kind kind, tuner__gemm_problem *p)
{
    const tuner_arch *a = tuner__arch(t);
    /* Its tensor maps follow a named M or batch only: a named N or K is refused (matmul_simt's). */
    return op && op->kind == kind && a && a->has_wgmma && tuner__gemm_problem_init_fp8(op, p, NULL) == 0 &&
           !tuner__gemm_names_nk(p) && wg_supported(p);
}

static bool matmul_applies(const tuner_op *op, const tuner_target *t)
{
    tuner__gemm_problem p;
    return wg_problem(op, t, TUNER_OP_MATMUL, &p);
}

static bool conv_applies(const tuner_op *op, const tuner_target *t)
{
    tuner__gemm_problem p;
    return wg_problem(op, t, TUNER_OP_CONV2D, &p);
}

/* Appends schedule s when it is valid for p on a. Returns 0 or -ENOMEM. */
static int push_valid(const tuner__gemm_problem *p, const tuner_arch *a, const tuner_schedule *s,
                      tuner_schedule **items, size_t *n)
{
    wg_cfg c;
    if (cfg_of(p, a, s, &c) < 0 || !cfg_valid(p, a, &c))
        return 0;
    return tuner__gemm_push(items, n, s);
}

/* Ring depths. Past 6 only small stages fit (cfg_valid checks shared memory): 8 for stages of
 * up to 24 KiB, 12 for 64x64 tiles. They are for streaming GEMMs, whose few blocks need many
 * bytes in flight: on an H100, 64x4096x4096 on 64 blocks of 64x64 ran in 16.9 us with 6
 * stages, 15.2 with 8 and 14.5 with 12 (bench/results/2026-11-24-h100-uniform). */
static const int wg_stage_counts[] = {3, 4, 5, 6, 8, 12};

/* K slices of split-K clusters (cfg_valid keeps those whose clusters all fit the GPU at once). */
static const int wg_splits[] = {1, 2, 3, 4, 6, 8};

/* Swapped tiles (wg_cfg.swap) for a matmul whose M is at most WG_SWAP_MAX_M: block_n (M's side)
 * the multiple of 8 that cuts M into t tiles with the least padding, for the t from the fewest
 * tiles of at most 256 rows up (WG_SWAP_BN of them; 16 rows or more, but for an M of 8 or
 * less) - of M at its largest and, for a named M, at its smallest too (the range's other end,
 * which tuner_rank prices as well) - beside
 * block_m 64 (one consumer), 128 (one or two) and pingpong 64; rings of 4, 6, 8 or 12 where they
 * fit, grouped raster, the output stored from registers or staged (where its rows allow), or,
 * for the non-pingpong tiles, by clusters of 2-4 CTAs splitting K (where they all fit at once:
 * few tiles). Where M is odd or small, these are the tiles that leave no rows idle:
 * cuBLAS's kernels for such shapes are the same transposition (its 64x56, 128x176 and 192x176
 * tiles on [n,4096]x[4096,4096] at n = 100, 700 and 2100, bench/results/2026-11-30-h200-session11). */
#define WG_SWAP_MAX_M 3072
#define WG_SWAP_BN 8
/* K slices of swapped split-K clusters: where the tiles of a small M fill too few SMs (cuBLAS's
 * 64x56 tiles at M = 100 pair CTAs too, bench/results/2026-11-30-h200-session11). */
static const int wg_swap_splits[] = {2, 3, 4};
#define WG_SWAP_N_SPLITS ((int)(sizeof(wg_swap_splits) / sizeof(wg_swap_splits[0])))
#define WG_SWAP_VARIANTS (2 + WG_SWAP_N_SPLITS + 2)
static int wg_enumerate_swapped(const tuner__gemm_problem *p, const tuner_arch *a, bool pre, tuner_schedule **items,
                                size_t *n)
{
    tuner__gemm_problem pq;
    if (!wg_swap_ok(wg_pview(p, pre, &pq)) || p->M > WG_SWAP_MAX_M)
        return 0;
    static const int kinds[][3] = {/* block_m, consumers, pingpong */ {64, 1, 0}, {128, 1, 0}, {128, 2, 0}, {64, 2, 1}};
    static const int stages[] = {4, 6, 8, 12};
    long long m_lo = 1;
    for (int d = 0; d < p->op->n_dims; d++)
        if (p->m_sym & (1u << d))
            m_lo *= p->op->dims[d].min;
    const long long ends[2] = {p->M, p->m_sym && m_lo < p->M ? m_lo : 0};
    int bns[2 * WG_SWAP_BN], n_bn = 0;
    for (int e = 0; e < 2 && ends[e] > 0; e++) {
        const long long t0 = tuner__gemm_cdiv(ends[e], 256);
        for (long long t = t0; t < t0 + WG_SWAP_BN; t++) {
            const int bn = (int)(tuner__gemm_cdiv(tuner__gemm_cdiv(ends[e], t), 8) * 8);
            if (bn < 16 && t > t0)
                break;
            bool seen = false;
            for (int k = 0; k < n_bn; k++)
                seen = seen || bns[k] == bn;
            if (!seen)
                bns[n_bn++] = bn;
        }
    }
    for (int b = 0; b < n_bn; b++) {
        const int bn = bns[b];
        for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
            for (size_t si = 0; si < sizeof(stages) / sizeof(stages[0]); si++)
                /* v: stage_out 0 and 1, then split-K clusters of WG_SWAP_SPLITS (registers out,
                 * no pingpong; cfg_valid keeps those whose clusters all fit at once), then N
                 * pairs (two tiles of M sharing the B tile) with stage_out 0 and 1, at rings of 8
                 * and 12 where M holds two tiles (16-bit: cfg_valid). */
                for (int v = 0; v < WG_SWAP_VARIANTS; v++) {
                    const bool pair = v >= 2 + WG_SWAP_N_SPLITS;
                    const int so = v < 2 ? v : pair ? v - 2 - WG_SWAP_N_SPLITS : 0;
                    const int sp = v < 2 || pair ? 1 : wg_swap_splits[v - 2];
                    if ((sp > 1 && kinds[i][2]) || (pair && (kinds[i][2] || stages[si] < 8 || p->M <= bn)))
                        continue;
                    tuner_schedule s = {.template_name = "matmul_wgmma"};
                    tuner__gemm_param(&s, "block_m", kinds[i][0]);
                    tuner__gemm_param(&s, "block_n", bn);
                    tuner__gemm_param(&s, "stages", stages[si]);
                    tuner__gemm_param(&s, "consumers", kinds[i][1]);
                    tuner__gemm_param(&s, "swizzle", 8);
                    tuner__gemm_param(&s, "pingpong", kinds[i][2]);
                    tuner__gemm_param(&s, "stage_out", so);
                    tuner__gemm_param(&s, "cluster", 1);
                    tuner__gemm_param(&s, "split_k", sp);
                    tuner__gemm_param(&s, "stream_k", 0);
                    tuner__gemm_param(&s, "cluster_n", pair ? 2 : 1);
                    tuner__gemm_param(&s, "swap", 1);
                    if (pre)
                        tuner__gemm_param(&s, "pretranspose", 1);
                    const int rc = push_valid(p, a, &s, items, n);
                    if (rc < 0)
                        return rc;
                }
    }
    return 0;
}

/* The tiles of wg_tiles for p on a (the preferred one first: pref, wg_preferred picks the
 * default by shape): every ring depth of wg_stage_counts that fits and both raster orders; with
 * grouped raster also staged output tiles, CTA pairs, split-K clusters and stream-K (none of the
 * others); with `pre`, B transposed before the GEMM (wg_pre_ok). */
static int wg_enumerate_tiles(const tuner__gemm_problem *p, const tuner_arch *a, bool pre, tuner_schedule **items,
                              size_t *n)
{
    /* 128x256 with two consumer warpgroups, a 4-deep ring (192 KiB) and grouped raster. */
    static const int pref[5] = {128, 256, 4, 2, 8};
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < sizeof(wg_tiles) / sizeof(wg_tiles[0]); i++)
            for (size_t si = 0; si < sizeof(wg_stage_counts) / sizeof(wg_stage_counts[0]); si++)
                for (int g = 1; g <= 8; g += 7) {
                    const int st = wg_stage_counts[si];
                    /* Pairs: along M (sharing B), and along N (sharing A) where every N tile
                     * re-reads the whole A panel: at most two tiles along M, at least twice as
                     * many along N (decode and skinny GEMMs). */
                    const long long tm_i = tuner__gemm_cdiv(p->M, wg_tiles[i][0]);
                    const bool n_pairs_ok = tm_i <= 2 && tuner__gemm_cdiv(p->N, wg_tiles[i][1]) >= 2 * tm_i;
                    const int max_so = g == 8 ? 2 : 0, max_cl = g == 8 ? (n_pairs_ok ? 3 : 2) : 1;
                    const int n_split = g == 8 ? (int)(sizeof(wg_splits) / sizeof(wg_splits[0])) : 1;
                    const int n_pairs = (max_so + 1) * max_cl, n_sk = g == 8 ? max_so + 1 : 0;
                    for (int v = 0; v < n_pairs + n_split - 1 + n_sk; v++) {
                        /* v past the (stage_out, pairing) pairs: split-K, neither of them; past
                         * those, stream-K with each stage_out, unpaired. Pairing 0 none, 1 along
                         * M, 2 along N. */
                        const bool split_v = v >= n_pairs && v < n_pairs + n_split - 1;
                        const bool sk_v = v >= n_pairs + n_split - 1;
                        const int sk_so = v - (n_pairs + n_split - 1);
                        const int so = sk_v ? sk_so : split_v ? 0 : v / max_cl;
                        const int pairing = split_v || sk_v ? 0 : v % max_cl;
                        const int sp = split_v ? wg_splits[v - n_pairs + 1] : 1;
                        const bool is_pref = wg_tiles[i][0] == pref[0] && wg_tiles[i][1] == pref[1] &&
                                             st == pref[2] && wg_tiles[i][2] == pref[3] && !wg_tiles[i][3] &&
                                             g == pref[4] && !so && sp == 1 && !sk_v;
                        if (is_pref != (pass == 0))
                            continue;
                        tuner_schedule s = {.template_name = p->conv ? "conv2d_wgmma" : "matmul_wgmma"};
                        tuner__gemm_param(&s, "block_m", wg_tiles[i][0]);
                        tuner__gemm_param(&s, "block_n", wg_tiles[i][1]);
                        tuner__gemm_param(&s, "stages", st);
                        tuner__gemm_param(&s, "consumers", wg_tiles[i][2]);
                        tuner__gemm_param(&s, "swizzle", g);
                        tuner__gemm_param(&s, "pingpong", wg_tiles[i][3]);
                        tuner__gemm_param(&s, "stage_out", so);
                        tuner__gemm_param(&s, "cluster", pairing == 1 ? 2 : 1);
                        tuner__gemm_param(&s, "split_k", sp);
                        tuner__gemm_param(&s, "stream_k", sk_v);
                        tuner__gemm_param(&s, "cluster_n", pairing == 2 ? 2 : 1);
                        if (pre)
                            tuner__gemm_param(&s, "pretranspose", 1);
                        int rc = push_valid(p, a, &s, items, n);
                        if (rc < 0)
                            return rc;
                        /* Transposed in the kernel: the same tile with a warpgroup of
                         * transposing warps more, where it fits (cfg_valid). */
                        if (!pre && wg_any_tnsp(p) && wg_tiles[i][2] == 1) {
                            tuner__gemm_param(&s, "tnsp_wg", 1);
                            rc = push_valid(p, a, &s, items, n);
                            if (rc < 0)
                                return rc;
                        }
                    }
                }
    return 0;
}

/* One enumeration for both templates, named after `kind`; each enumerates ops of its own kind
 * only: the unswapped tiles (wg_enumerate_tiles), then the swapped ones (wg_enumerate_swapped);
 * for an FP8 B given [K, N] each again with B transposed before the GEMM (wg_pre_ok), after
 * those that transpose it in the kernel. */
static int wg_enumerate(const tuner_op *op, const tuner_target *t, tuner_op_kind kind, tuner_schedule **items,
                        size_t *n)
{
    tuner__gemm_problem p;
    if (!wg_problem(op, t, kind, &p))
        return 0;
    const tuner_arch *a = tuner__arch(t);
    const int n_pre = wg_pre_ok(&p) ? 2 : 1;
    for (int pre = 0; pre < n_pre; pre++) {
        const int rc = wg_enumerate_tiles(&p, a, pre == 1, items, n);
        if (rc < 0)
            return rc;
    }
    for (int pre = 0; pre < n_pre; pre++) {
        const int rc = wg_enumerate_swapped(&p, a, pre == 1, items, n);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int matmul_enumerate(const tuner_op *op, const tuner_target *t, tuner_schedule **items, size_t *n)
{
    return wg_enumerate(op, t, TUNER_OP_MATMUL, items, n);
}

static int conv_enumerate(const tuner_op *op, const tuner_target *t, tuner_schedule **items, size_t *n)
{
    return wg_enumerate(op, t, TUNER_OP_CONV2D, items, n);
}

/* The fraction of the SMs' tile slots the tiles fill over their waves (1: the last wave full). */
static double wave_fill(long long tiles, int sms)
{
    return (double)tiles / (double)(tuner__gemm_cdiv(tiles, sms) * sms);
}

static double wg_predict(const tuner_op *op, const tuner_target *t, const tuner_schedule *s);
static double wg_predict_ex(const tuner_op *op, const tuner_target *t, const tuner_schedule *s, bool gather);

/* tune:"none", by shape, with the output tile staged and TMA-stored where rows allow it
 * (measured on an H100, bench/results/2026-11-24-h100-wgmma): cooperative 128x256 tiles where
 * they fill the GPU and the K loop is long (4096^3 212 us, 8192^3 1684 us, 1.0-1.04 of cuBLAS),
 * with a 4-deep ring beside an output staged in halves where the output is 16-bit (4096^3 213.9
 * against 210.8 us for cuBLAS, 0.985, where the 3-deep ring beside the whole staged tile ran at
 * 0.974; 2048x4096x4096 0.977 against 0.953: bench/results/2026-11-24-h100-staged-halves), else
 * a 3-deep one; 128x128 (or 128x192, below) with a 4-deep ring where
 * 128x128 tiles fill it (4096x3072x768 34.8 against 39.5 us for 128x256); else 64x128 tiles of
 * one consumer (1000^3 12.5 against 14.8 us for 128x128). */
static int wg_preferred_gathered(const tuner_op *op, const tuner_target *t, const tuner__gemm_problem *p,
                                 tuner_schedule *ret);

static int wg_preferred(const tuner_op *op, const tuner_target *t, tuner_schedule *ret)
{
    tuner__gemm_problem p;
    if (!op || !wg_problem(op, t, op->kind, &p))
        return -ENOENT;
    if (wg_any_gathered(&p))
        return wg_preferred_gathered(op, t, &p, ret);
    const tuner_arch *a = tuner__arch(t);
    const bool staged = p.out_chunk != 0;
    if (p.conv && !wg_dense_a(&p)) {
        /* Windowed convolutions, measured when all of them gathered A (H100,
         * bench/results/2026-11-24-h100-conv-wgmma) and still the best or within 1% of the
         * measured picks with im2col maps (bench/results/2026-11-24-h100-im2col: 23.9 us at
         * 56x56 against 23.4 for 256x64 tiles, 17.7 at 28x28, 16.6 at 14x14 against 16.4 for
         * 128x128, 17.8 at 7x7, the pick there): one consumer
         * and a 6-deep ring beat two consumers on every ResNet-50 3x3 layer; 128x64 tiles for 64
         * output channels (31.6 us at 56x56), 64x128 for 128 and 512 (22.9 us at 28x28, 24.2 at
         * 7x7), 64x256 where those tiles fill most SMs (21.4 us for 256 at 14x14). */
        const bool wide = p.N >= 256 && 10 * p.batch * tuner__gemm_cdiv(p.M, 64) * tuner__gemm_cdiv(p.N, 256) >= 7LL * a->sm_count;
        const int bn = p.N <= 64 ? 64 : wide ? 256 : 128;
        tuner__gemm_param(ret, "block_m", bn == 64 ? 128 : 64);
        tuner__gemm_param(ret, "block_n", bn);
        tuner__gemm_param(ret, "stages", bn == 256 ? 4 : 6);
        tuner__gemm_param(ret, "consumers", 1);
        tuner__gemm_param(ret, "swizzle", 8);
        tuner__gemm_param(ret, "pingpong", 0);
        tuner__gemm_param(ret, "stage_out", staged);
        tuner__gemm_param(ret, "cluster", 1);
        tuner__gemm_param(ret, "split_k", 1);
        tuner__gemm_param(ret, "stream_k", 0);
        tuner__gemm_param(ret, "cluster_n", 1);
        return 0;
    }
    const long long tiles_m = p.batch * tuner__gemm_cdiv(p.M, 128);
    const bool wide = tiles_m * tuner__gemm_cdiv(p.N, 256) >= a->sm_count && p.K > 1024;
    const bool square = tiles_m * tuner__gemm_cdiv(p.N, 128) >= a->sm_count;
    /* A convolution's N (output channels per group) is often 64 or 128: no wider tile than it. */
    int bn = p.conv && p.N <= 64 ? 64 : p.conv && p.N <= 128 ? 128 : wide ? 256 : 128;
    /* 128x192 where its last wave is clearly fuller than 128x128's (4096x768x3072: 128 tiles
     * on 132 SMs against 192, 30.4 against 43.7 us on an H100, bench/results/
     * 2026-11-24-h100-epilogue); equal fills keep 128x128 (4096x3072x768: 34.3 against 35.2). */
    if (!p.conv && !wide && square &&
        wave_fill(tiles_m * tuner__gemm_cdiv(p.N, 192), a->sm_count) >
            wave_fill(tiles_m * tuner__gemm_cdiv(p.N, 128), a->sm_count) + 0.05)
        bn = 192;
    /* A full-size epilogue operand's tile (wg_plan_x) fits beside a 4-deep ring of 128x128 (or
     * 64x128) tiles and their staged output, not beside 128x256's or 128x192's: without it the
     * operand's per-fragment reads cost the SwiGLU gate at 4096x11008x4096 +21% (H200,
     * bench/results/2026-11-29-h200-kernel-gaps). */
    bool full_operand = false;
    for (int i = 0; i < op->n_inputs; i++)
        full_operand = full_operand || tuner__gemm_tile_operand(&p, i, NULL);
    if (full_operand && bn > 128)
        bn = 128;
    /* Half of a 16-bit 128x256 tile leaves room for a 4th stage; an fp32 one's does not. */
    const bool halves = bn == 256 && staged && tuner_dtype_size(p.out_dt) == 2;
    tuner__gemm_param(ret, "block_m", wide || square ? 128 : 64);
    tuner__gemm_param(ret, "block_n", bn);
    tuner__gemm_param(ret, "stages", bn == 256 && staged && !halves ? 3 : 4);
    tuner__gemm_param(ret, "consumers", wide || square ? 2 : 1);
    tuner__gemm_param(ret, "swizzle", 8);
    tuner__gemm_param(ret, "pingpong", 0);
    tuner__gemm_param(ret, "stage_out", halves ? 2 : staged);
    tuner__gemm_param(ret, "cluster", 1);
    tuner__gemm_param(ret, "split_k", 1);
    tuner__gemm_param(ret, "stream_k", 0);
    tuner__gemm_param(ret, "cluster_n", 1);
    /* Stream-K where the cost model expects it to pay: long waves, the last one mostly empty
     * (on an H100 8192x14336x4096 and 8192^3 with 128x256 tiles, not 4096^3). */
    tuner_schedule sk = *ret;
    for (int i = 0; i < sk.n_params; i++)
        if (!strcmp(sk.params[i].name, "stream_k"))
            sk.params[i].value = 1;
    wg_cfg c;
    if (cfg_of(&p, a, &sk, &c) == 0 && cfg_valid(&p, a, &c) && wg_predict(op, t, &sk) < wg_predict(op, t, ret))
        *ret = sk;
    return 0;
}

/* tune:"none" where an operand is gathered (wg_gathered): the tile the cost model predicts
 * fastest among those the gather's registers allow (two consumers with up to 8 chunks per
 * producer thread, or one with up to 12), with a 3- to 8-deep ring, the output staged (whole
 * or in halves) where its rows allow. No preference (so matmul_mma's first schedule) where the gather shows: the
 * producer's 60-odd instructions per 16-byte chunk (tuner__gemm_gather_us) are hidden behind
 * large tiles' wgmma with one gathered operand, not with both; where the pick is predicted
 * more than 5% slower than the same schedule with TMA loads, mma.sync (measured at 0.95 of
 * cuBLAS on 2999x4001x1537, issue 40) is taken to be as fast. (matmul_mma's own model charges
 * its unaligned loads far more than that measurement: it is also asked, and wins where it
 * predicts itself faster.) */
static int wg_preferred_gathered(const tuner_op *op, const tuner_target *t, const tuner__gemm_problem *p,
                                 tuner_schedule *ret)
{
    static const int tiles[][3] = {{128, 256, 2}, {128, 192, 2}, {128, 128, 2}, {128, 64, 2}, {256, 64, 2},
                                   {64, 256, 1},  {64, 192, 1},  {64, 128, 1},  {128, 128, 1}};
    static const int depths[] = {3, 4, 5, 6, 8};
    const tuner_arch *a = tuner__arch(t);
    double best = 1e12;
    for (size_t i = 0; i < sizeof(tiles) / sizeof(tiles[0]); i++)
        for (size_t d = 0; d < sizeof(depths) / sizeof(depths[0]); d++)
            for (int so = 0; so <= (p->out_chunk ? 2 : 0); so++) {
            tuner_schedule s = {.template_name = "matmul_wgmma"};
            tuner__gemm_param(&s, "block_m", tiles[i][0]);
            tuner__gemm_param(&s, "block_n", tiles[i][1]);
            tuner__gemm_param(&s, "stages", depths[d]);
            tuner__gemm_param(&s, "consumers", tiles[i][2]);
            tuner__gemm_param(&s, "swizzle", 8);
            tuner__gemm_param(&s, "pingpong", 0);
            tuner__gemm_param(&s, "stage_out", so);
            tuner__gemm_param(&s, "cluster", 1);
            tuner__gemm_param(&s, "split_k", 1);
            tuner__gemm_param(&s, "stream_k", 0);
            tuner__gemm_param(&s, "cluster_n", 1);
            wg_cfg c;
            if (cfg_from(p, &s, &c) < 0 || !cfg_valid(p, a, &c))
                continue;
            const double us = wg_predict(op, t, &s);
            if (us < best) {
                best = us;
                *ret = s;
            }
        }
    if (best >= 1e12)
        return -ENOENT;
    /* matmul_mma's preferred schedule is its first. */
    tuner_schedule *items = NULL;
    size_t n = 0;
    const tuner_template *mma = &tuner__gemm_matmul_mma;
    const bool mma_wins = mma->applies(op, t) && mma->enumerate(op, t, &items, &n) == 0 && n > 0 &&
                          mma->predict_us(op, t, &items[0]) < best;
    free(items);
    return mma_wins || best > 1.05 * wg_predict_ex(op, t, ret, false) ? -ENOENT : 0;
}

static int wg_generate(const tuner_op *op, const tuner_target *t, const tuner_schedule *s, tuner_program *prog,
                       char **err)
{
    tuner__gemm_problem p;
    int rc = tuner__gemm_problem_init_fp8(op, &p, err);
    if (rc < 0)
        return rc;
    if (tuner__gemm_names_nk(&p)) {
        if (err)
            *err = strdup("matmul_wgmma does not take a named N or K");
        return -EINVAL;
    }
    return wg_emit(&p, t, s, prog, err);
}

/* Cost model of the persistent kernel: tiles are dealt to min(tiles, SMs) resident blocks, so the
 * time is the busiest SM's tiles at the wgmma rate, scaled by how well the tile feeds the tensor
 * cores (wider N reuses each A slice more; two consumer warpgroups hide each other's issue gaps
 * and epilogue; a deeper ring hides TMA latency), bounded below by L2 panel and DRAM traffic,
 * plus the launch and the blocks' tensor-map setup (H100: a separate map launch cost 0.6-1.8 us
 * more, bench/results/2026-11-24-h100-epilogue). */
static double wg_predict_ex(const tuner_op *op, const tuner_target *t, const tuner_schedule *s, bool gather);

static double wg_predict(const tuner_op *op, const tuner_target *t, const tuner_schedule *s)
{
    return wg_predict_ex(op, t, s, true);
}

/* wg_predict, with `gather` false as if the gathered operands came by TMA (what the gather
 * costs: wg_preferred_gathered). */
static double wg_predict_ex(const tuner_op *op, const tuner_target *t, const tuner_schedule *s, bool gather)
{
    tuner__gemm_problem p;
    const tuner_arch *a = tuner__arch(t);
    wg_cfg c;
    if (!a || tuner__gemm_problem_init_fp8(op, &p, NULL) < 0 || cfg_of(&p, a, s, &c) < 0)
        return 1e12;
    /* With B pretransposed the GEMM reads it K-major (wg_pview), after a launch of its own
     * that reads and writes N x K bytes at about a copy's bandwidth (on an H200 bench.py's
     * copy_tbps is 0.86 of the DRAM's peak). */
    double pre_us = 0.0;
    if (c.pre) {
        tuner__gemm_problem pq;
        p = *wg_pview(&p, true, &pq);
        pre_us = 2.0 * (double)p.N * p.K / (0.85 * a->dram_gbps * 1e3) + 2.0;
    }
    /* A swapped kernel is priced as the GEMM it runs (wg_kview), its register stores above. */
    if (c.swap) {
        tuner__gemm_problem kq;
        p = *wg_kview(&p, &c, &kq);
    }
    const int esz = tuner_dtype_size(p.dt), bk = wg_bk(&p);
    const long long tiles = p.batch * tuner__gemm_cdiv(p.M, c.bm) * tuner__gemm_cdiv(p.N, c.bn);
    const long long kp = tuner__gemm_cdiv(p.K, bk) * bk;
    /* A split-K cluster's CTAs each run one slice of a tile's k tiles. */
    const long long kslice = tuner__gemm_cdiv(tuner__gemm_cdiv(p.K, bk), c.split) * bk;
    const long long blocks = tiles * c.split;
    /* wgmma peak: mma.sync reaches about two thirds of it on Hopper (tuner/arch.c). */
    const double rate_sm = a->tc_f16_tflops * 1.5 * tuner__gemm_tc_rate_factor(&p) * 1e6 / a->sm_count;
    double eff = 0.82;
    /* The steps were measured at block_n 64, 128 and 192 (unswapped tiles). A swapped tile's
     * block_n between 64 and 128 takes the value interpolated, not block_n 64's: on an H200 the
     * swapped 128-row one-consumer tiles of 700x4096x4096 reached 0.65, 0.68, 0.71, 0.73 and
     * 0.83 of rate_sm at block_n 72, 80, 88, 104 and 120 (rising steadily, where the step priced
     * them all at 0.56), and the swapped 64x104 tile that was best on 100x4096x4096 0.73
     * (bench/results/2026-11-30-h200-session12, f/calib). One consumer only, as measured: two
     * consumers of 64 rows each priced so ran 1.3x slower than predicted (128x96 on
     * [700,4096]x[4096,14336], 175 us against 134; bench/results/2026-11-30-h200-session13/d). */
    eff *= c.bn >= 192 ? 1.0 : c.bn >= 128 ? 0.97 : c.bn > 64 && c.consumers == 1 ? 0.80 + 0.17 * (c.bn - 64) / 64.0 : 0.80;
    /* (A gathering convolution's single consumer is fed no worse: the gather, not the issue
     * gaps, sets its pace.) */
    eff *= c.consumers == 2 || wg_gathers_a(&p) ? 1.0 : 0.85;
    /* Measured on an H100: pingpong turns of 128x128 tiles run at 0.91-0.96 of the best
     * cooperative tile (4096^3 243 against 222 us, 2048x14336x4096 391 against 373; more
     * operand bytes per FLOP, a barrier per turn; bench/results/2026-11-24-h100-epilogue). */
    /* FP8 tiles are the other way round: on an H200 at the same (ncu-held) 1.31 GHz, 8192x14336x4096
     * e4m3 ran 748 us in pingpong 128x128 turns against 763-773 for the best cooperative tiles
     * (128x128 pairs, 128x192), cuBLASLt's non-cooperative 128x128 700; twice the tensor rate
     * makes a cooperative tile's exposed epilogue cost twice as much
     * (bench/results/2026-12-01-h200-session23/d). */
    eff *= c.pingpong ? (p.fp8 ? 1.0 : 0.94) : 1.0;
    /* Per-block FP8 scales wait for each k tile's wgmma before promoting them (no k tile in
     * flight across the promotion): not measured yet; DeepGEMM's same scheme runs at about 0.8 of
     * the FP8 peak where plain FP8 GEMMs reach 0.75-0.9 of it. */
    eff *= p.promote ? 0.85 : 1.0;
    /* FP8 tiles transposed in the kernel (emit_transposer, priced below by their instructions)
     * slowed the tensor cores far more than that: on an H200 4096^3 e4m3 with B [K, N] ran
     * 156.6 us at best (256x128, 3 stages, tuned over its 60 schedules) where these terms
     * alone priced it 112 and the K-major GEMM ran 96.6 (bench/results/2026-11-30-h200-session16/b);
     * memory-bound ones were priced right (16x8192x8192: 33.8 against 33.2). */
    eff *= wg_any_tnsp(&p) ? 0.7 : 1.0;
    /* A convolution's producer warpgroup issues bm/16 address computations and 16-byte copies
     * per thread and stage where TMA needs one instruction. */
    eff *= wg_gathers_a(&p) ? 0.92 : 1.0;
    /* The epilogue is overlapped with the next tile's loads but not with this warpgroup's own
     * wgmma (relatively more exposed with a short K loop), unless the other consumer computes
     * meanwhile (pingpong). Fragment-order register stores cost several k-tiles' time, also
     * in pingpong turns (H100: 4096^3 226 against 212 us staged, 4096x3072x768 58 against 40;
     * with bias + GELU, pingpong 64x256 tiles 50-53 against 42-46 us,
     * bench/results/2026-11-25-h100-epilogue-inline); a staged tile leaves by TMA stores. */
    const double ep =
        1.0 + (!c.stage_out ? 4.0 : c.pingpong ? 0.3 : c.out_halves ? 0.7 : 0.5) / (double)(kslice / bk);
    /* Pingpong consumers take turns at the tensor cores: a block's tiles run one after the
     * other. Priced as whole turns of two tiles, as the blocks walked them until session 23
     * (bench/results/2026-12-01-h200-session23): one tile more than the busiest block now
     * has where the last round is odd, and what the calibration (model_check_h200) measured. */
    double per_sm = (double)tuner__gemm_cdiv(blocks, (long long)a->sm_count * c.unit_tiles) * c.unit_tiles;
    /* A pair's two CTAs take the two tiles of a pair of M (or N) tiles, so an odd count leaves
     * one CTA of the last pair idle: a decode GEMM with one M tile runs half its CTAs empty. */
    long long ctas = blocks;
    if (c.cluster == 2) {
        long long pm, pn;
        wg_pair_grid(&c, tuner__gemm_cdiv(p.M, c.bm), tuner__gemm_cdiv(p.N, c.bn), &pm, &pn);
        const long long pairs = p.batch * pm * pn;
        per_sm = (double)tuner__gemm_cdiv(pairs, a->sm_count / 2);
        ctas = 2 * pairs;
    }
    /* Stream-K: the busiest block's whole tiles and its share of the rest's k tiles; then its
     * partial tile written and, where it finishes a tile, the partials of as many blocks as
     * the tile's k tiles span at most, at the block's share of L2 bandwidth, five times over:
     * measured on an H100, the shared phase cost 9-14 us more than the k tiles it saved on
     * 4096^3 and 2048x4096x4096 (128x256 tiles), 4 us on 1000^3 (64x128), about five times
     * that traffic at that share (ncu, 4096^3: no more operand reads from DRAM, but most
     * blocks write their partials at once and part of them is evicted to DRAM before it is
     * read back); and a fixed 5 us: the launch that clears the flags (a one-block launch
     * before a GEMM's cost 0.6-1.8 us, bench/results/2026-11-24-h100-epilogue) and the
     * partial-tile hand-over, which left stream-K schedules of short decode and convolution
     * loops 3-8 us slower than the same tiles without it (64x14336x4096, 128x4096x4096, 3x3
     * 64 -> 64 at 56x56; bench/results/2026-11-25-h100-model-ring). It pays
     * where the last wave is mostly empty and waves are long: 8192x14336x4096 ran at 0.982 of
     * cuBLAS against 0.942 without, 8192^3 at 1.033 against 1.016
     * (bench/results/2026-11-24-h100-stream-k). */
    double t_fixup = 0.0;
    wg_sk_plan k;
    if (c.stream_k && !wg_sk_plan_of(&p, a, &c, &k)) {
        /* Nothing to share at these sizes (a dynamic kernel's launch at sizes of a range whose
         * largest have some): every tile whole, after the launch that clears the flags. */
        t_fixup = 1.0;
    } else if (c.stream_k) {
        const long long per_block = k.iters / k.grid;
        per_sm = (double)(k.dp_tiles / k.grid) + (double)tuner__gemm_cdiv(k.iters, k.grid) / (double)k.ktiles;
        ctas = k.grid;
        const double partials = 1.0 + (double)tuner__gemm_cdiv(k.ktiles, per_block);
        t_fixup = 5.0 * partials * (double)c.bm * c.bn * 4.0 / (4.0 * a->dram_gbps * 1e3 / a->sm_count) + 5.0;
    }
    /* A fused epilogue's arithmetic stalls a cooperative tile's tensor cores; a pingpong
     * consumer's runs during the other's turn, yet slows that turn as much. On an H100, with
     * the chain applied on the way to the staged tile, 4096x3072x768 + bias + GELU cost
     * 0.9-1.2 us per 128x128 tile over the same schedule bare, cooperative (128x192, 128x128)
     * and pingpong (128x128) alike: 3/4 of tuner__gemm_epilogue_us
     * (bench/results/2026-11-25-h100-epilogue-inline). */
    /* An operand loaded into a cooperative tile's staged output holds its storer until the TMA
     * store has read the tile (wg_plan_x; an estimate: 32-64 KiB read by the copy engine). */
    const double t_chain = 0.75 * tuner__gemm_epilogue_us(&p, (double)c.bm * c.bn / c.split) +
                           tuner__gemm_operand_us(&p, a, (double)c.bm * c.bn / c.split,
                                                  blocks < a->sm_count ? (double)blocks : (double)a->sm_count, c.n_x) +
                           (c.x_in_out && !c.pingpong ? 0.15 : 0.0);
    /* A pair reads each B tile once for two M tiles. An N pair reads each A tile once for two N
     * tiles, but is not credited with it: on an H100 its decode GEMMs ran 2-3% slower than the
     * same tiles unpaired (64x14336x4096 44.0 against 43.0 us, 128x14336x4096 45.3 against 44.3;
     * bench/results/2026-11-24-h100-im2col), the lockstep costing more than the A panel saves. */
    /* TMA boxes are whole: rows past M or N are zero-filled by the copy engine, which moves
     * them through shared memory and takes longer per box (WG_OOB_ROW_US). Every tile of the
     * last tile row (past M) and column (past N) loads such boxes, not only where M or N is
     * smaller than one tile: on an H200 the swapped 128x96 two-consumer tiles of
     * [M,4096]x[4096,14336] ran 169.5 us at M = 700 (their last row 68 rows past M) and 138.2 at
     * 768 (none past), the same grid; swapped 64x176 ones 122.3 at 700 (4 rows past) and 218.1 at
     * 768 (112 past, where one more tile row explains 25% of the 78%), and unswapped 128x256
     * ones with 4 stages 129.2 and 139.6 (bench/results/2026-11-30-h200-session13/f). With this
     * term 64x176 is priced 133 and 185 us; the 128x96 tiles' 23% it does not see (their ring is
     * priced compute-bound, the latency hidden), nor why only swapped partial tiles are slow. A
     * swapped kernel's last tile along its N (the matmul's M) now overlaps the one before it
     * instead (emit_swapped_row0): no rows past M there, where M holds one tile or more. */
    const long long tiles_m = tuner__gemm_cdiv(p.M, c.bm), tiles_n = tuner__gemm_cdiv(p.N, c.bn);
    const double oob_m = (double)(tiles_m * c.bm - p.M),
                 oob_n = c.swap && p.N >= c.bn ? 0.0 : (double)(tiles_n * c.bn - p.N);
    const double last_m = oob_m > 0 ? 1.0 / (double)tiles_m : 0.0, last_n = oob_n > 0 ? 1.0 / (double)tiles_n : 0.0;
    const double panel = (double)tiles * (c.bm + (double)c.bn / (c.pair_n ? 1 : c.cluster)) * (double)kp * esz;
    /* Bytes read from DRAM at least once: a convolution's im2col rows overlap, its input is
     * read once. */
    const double a_uniq = p.conv ? (double)p.cn * p.ch * p.cw * p.cc : (double)p.batch * p.M * p.K;
    const double uniq = (a_uniq + (double)p.batch * p.K * p.N) * esz +
                        (double)p.batch * p.M * p.N * tuner_dtype_size(p.out_dt);
    /* The ring: stages - 1 k tiles loading per persistent block (a pair's CTAs each fetch half
     * of the shared operand). */
    /* FP8 tiles transposed in the kernel (emit_transposer): per k tile 32 steps per 128 x 128
     * square, dealt over three warps, each step about 24 instructions (4 loads, 8 permutes, 4
     * stores, addresses) and 8 conflict-free shared-memory wavefronts. Their pace bounds the
     * ring like a producer's (the issue of three warps, or the wavefronts, at the SM's clock:
     * its fp32 FMA rate over 128 lanes), and the wavefronts share shared-memory bandwidth with
     * the wgmma reading their operands: half of them are charged to the tensor cores' time.
     * Each warp's steps also run one after another at their latency (shared-memory loads, the
     * permutes on them, the stores): about 170 cycles a step, from the H200 (session 18, FP8
     * 16x8192x8192 with B [K,N], 64x128 tiles split in two, 32 steps a k tile: 30.3 us with the
     * producer's three warps, 24.3 with seven - tnsp_wg - where the weights' stream bounds it),
     * which the issue and the wavefronts alone priced the same. */
    double tnsp_us = 0.0, tnsp_smem_us = 0.0;
    if (wg_any_tnsp(&p)) {
        const double mhz = a->fma_f32_tflops * 1e6 / (a->sm_count * 256.0);
        const double units = 32.0 * ((wg_tnsp(&p, 0) ? c.bm / 128 : 0) + (wg_tnsp(&p, 1) ? c.bn / 128 : 0));
        const double steps = ceil(units / wg_tnsp_warps(&c));
        const double issue = steps * 24.0, smem = units * 8.0, latency = steps * 170.0;
        tnsp_us = fmax(fmax(issue, smem), latency) / mhz;
        tnsp_smem_us = smem / mhz;
    }
    const tuner__gemm_ring ring = {
        .ktiles = per_sm * (double)(kslice / bk),
        .slots = c.stages - 1,
        .compute_us = 2.0 * c.bm * c.bn * (double)bk / (rate_sm * eff) + 0.5 * tnsp_smem_us,
        .stage_bytes = (c.bm + (double)c.bn / (c.cluster == 2 && !c.pair_n ? 2 : 1)) * bk * esz,
        .dram_frac = panel > uniq ? uniq / panel : 1.0,
        /* Rasterised tiles share operands in L2 more often. */
        .l2_penalty = c.group > 1 ? 0.9 : 1.0,
        .sms = ctas < a->sm_count ? (double)ctas : (double)a->sm_count,
        .extra_latency_us = p.conv ? WG_CONV_LOAD_US : 0.0,
        /* Operands TMA cannot address: the producer's threads gather them, a stage at a time. */
        .producer_us = (gather ? tuner__gemm_gather_us(wg_gather_chunks(&p, &c), panel > uniq ? uniq / panel : 1.0) : 0.0) +
                       tnsp_us,
    };
    /* A pair advances at the pace of its slower CTA (each stage waits for both consumers):
     * measured on an H100 at 0.92-1.01 of the same tile unpaired, so it pays only where
     * halving the B panel traffic matters. A convolution's pair shares only the filter, a
     * small part of its traffic, and its main loop ran 15-20% longer than the same tiles'
     * unpaired (3x3 layers of bench/results/2026-11-25-h100-model-ring). */
    const double lockstep = c.cluster == 2 ? (p.conv ? 1.18 : 1.04) : 1.0;
    /* The ring of the interior tiles, of the last row's, the last column's and the corner's,
     * each by its share of the tiles. */
    double t_ring = 0.0;
    for (int e = 0; e < 4; e++) {
        const double share = (e & 1 ? last_m : 1.0 - last_m) * (e & 2 ? last_n : 1.0 - last_n);
        if (share <= 0.0)
            continue;
        tuner__gemm_ring r = ring;
        r.extra_latency_us += ((e & 1 ? oob_m : 0.0) + (e & 2 ? oob_n : 0.0)) * WG_OOB_ROW_US;
        t_ring += share * tuner__gemm_ring_us(a, &r);
    }
    double tm = t_ring * ep * lockstep + per_sm * t_chain + t_fixup;
    /* An N pair's lockstep (above), also where the weight stream bounds the time. */
    tm *= c.pair_n ? 1.025 : 1.0;
    /* A split convolution's CTAs each set up the gather of their tile's pixel rows and run a
     * short slice of k tiles behind it: on an H100 its split-K schedules of 3x3 512 -> 512 at
     * 7x7 ran 3-5 us above this model, where unsplit ones ran within 1-2
     * (bench/results/2026-11-25-h100-model-ring, calibration-conv.json). */
    const double split_us = c.split > 1 ? tuner__gemm_cluster_sum_us(c.split) + (p.conv ? WG_CONV_SPLIT_US : 0.0) : 0.0;
    return tm + 3.0 + 0.3 + split_us + pre_us;
}

const tuner_template tuner__gemm_matmul_wgmma = {
    .name = "matmul_wgmma",
    .space_signature = WG_SPACE_SIG,
    .applies = matmul_applies,
    .enumerate = matmul_enumerate,
    .generate = wg_generate,
    .predict_us = wg_predict,
    .preferred = wg_preferred,
    .default_rank = TUNER_RANK_TENSOR_CORE,
    /* A named M or batch (tuner/gemm/README.md): the kernel counts its tiles from the hd_dim
     * parameters, the grid follows a rule (wg_grid_rule), the tensor maps' M and batch
     * dimensions are encoded at launch (tuner_tmap.sym); stream-K divides its shared k tiles
     * at launch (emit_unit_loop). */
    .dynamic_dims = true,
};

/* Static only, as matmul_wgmma (and docs/api.md names no conv2d axis). */
const tuner_template tuner__gemm_conv2d_wgmma = {
    .name = "conv2d_wgmma",
    .space_signature = WG_SPACE_SIG "; conv2d: nhwc implicit gemm; A by TMA im2col maps where channels per group "
                                    "are a multiple of 64 (one copy of block_m pixels x 64 channels per k tile at its "
                                    "window offset; corners, offsets and strides within a rank-4 map's range), else "
                                    "gathered by cp.async into sw128 (zero fill), "
                                    "arrive.noinc on full (129), rows' pixel and window mask in registers (block_m <= 128, R*S <= 32), "
                                    "producer 72 regs, no pingpong; dense 1x1 by TMA",
    .applies = conv_applies,
    .enumerate = conv_enumerate,
    .generate = wg_generate,
    .predict_us = wg_predict,
    .preferred = wg_preferred,
    .default_rank = TUNER_RANK_TENSOR_CORE,
};
