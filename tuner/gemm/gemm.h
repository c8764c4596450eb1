/* tuner/gemm/gemm.h - shared pieces of the matmul and conv2d templates (internal to tuner/gemm/).
 *
 * Every template here sees its op as one implicit GEMM: C[b][m][n] = sum_k A[b][m][k] * B[b][k][n],
 * where b is the matmul batch or the conv2d group, and A/B element addresses come from the op's
 * real tensors (row-major or transposed matmul operands, im2col addressing for convolutions).
 * tuner__gemm_problem holds that view; the emitters below write the address/predicate code, the
 * fused prologue on A/B loads and the fused epilogue on stores, so that every template (and the
 * reference) applies exactly the same function to the same elements.
 */
#ifndef HIDET_TUNER_GEMM_GEMM_H
#define HIDET_TUNER_GEMM_GEMM_H

#include <stdbool.h>
#include <stdint.h>

#include "tuner/codegen.h"
#include "tuner/template.h"

typedef struct tuner__gemm_problem {
    const tuner_op *op;
    bool conv;
    tuner_dtype dt;     /* dtype of both anchor inputs (A's for FP8, whose B may differ) */
    tuner_dtype dt_b;   /* B's dtype: dt, or the other FP8 dtype (e4m3 x e5m2) */
    tuner_dtype out_dt; /* op->output.dtype */
    /* An FP8 matmul (tuner__gemm_problem_init_fp8): scales multiply the fp32 result before the
     * epilogue (tuner_scale_kind; the scale tensors are inputs 2 and, after scale_a's, 3). */
    bool fp8;
    tuner_scale_kind scale_a, scale_b;
    int scale_a_in, scale_b_in; /* their input indices (-1: none, or per-block scales) */
    /* The quantize step's amax output (tuner_fp8_amax_input; -1: none): the store emitters keep
     * the largest |value| the cast receives, of elements inside the output, in the float
     * gm_amax_v that a kernel declares (tuner__gemm_emit_amax_decl) and publishes
     * (tuner__gemm_emit_amax_flush). */
    int amax_in;
    /* Per-block scales (TUNER_SCALE_BLOCK, both operands): applied in the main loop per 128-k
     * block, not in the epilogue; A's [M, ceil(K/128)] is input bsa_in, B's [ceil(N/128),
     * ceil(K/128)] bsb_in. */
    bool block_scales;
    int bsa_in, bsb_in;
    /* Each 128-k tile's sum promoted into the fp32 accumulators (per-block scales, or an FP8
     * matmul without fast accumulation: attrs.matmul.fast_accum false). */
    bool promote;
    long long batch;    /* matmul batch (1 when unbatched) or conv groups */
    long long M, N, K;  /* per batch entry / per group */
    /* matmul */
    bool trans_a, trans_b;
    bool a_batched, b_batched; /* rank-3 operands; a rank-2 operand is broadcast */
    /* conv2d (NHWC names; NCHW only changes addressing) */
    long long cn, ch, cw, cc, ck, cr, cs, cp, cq, cgc, cgk; /* cgc = C/groups, cgk = K/groups */
    int sh, sw, ph, pw, dh, dw;
    bool nchw;
    /* Per operand (0 = A, 1 = B): K is the contiguous dimension in global memory (else M or N
     * is, or neither for NCHW im2col), widest vector access in elements along that dimension
     * allowed by its length and the base alignment (1, 2, 4 or 8; at most 16 bytes), and
     * whether a fused prologue applies. */
    bool kmajor[2];
    int vec[2];
    bool prologue[2];
    /* Output elements along n that may be stored together (1 or 2). */
    int out_vec;
    /* Output elements per 16-byte store when every output row allows one (row-major output,
     * row length and group offset multiples of it, base 16-byte aligned), else 0: what a tile
     * staged through shared memory is written out with. */
    int out_chunk;
    /* A dynamic matmul (op->n_dims > 0): the named dims (bit sets over op->dims) that M and the
     * batch stand for at launch, 0 where that extent is fixed. At most one of them is set, on
     * axis 0 (docs/api.md), so no stride depends on them: M is named for a 2-D `a` [M, K] (not
     * transposed), the batch for a rank-3 `a` [batch, M, K]. M, N, K and batch above hold the
     * sizes at the dims' max (what spaces and the cost model see); m_multiple is
     * a number every launch's M is a multiple of (the product of its dims' multiple_of; M itself
     * when fixed). conv2d is static only. */
    bool dynamic;
    unsigned m_sym, batch_sym;
    long long m_multiple;
    /* Named N and K (2-D a [M, K] and b [K, N] / [N, K] only, issue 39): the dims b's N axis and
     * a's (and b's) K axis stand for, 0 where fixed. With either set the strides of a, b, the
     * output and the fused operands follow the launch's sizes (gm_N, gm_K in generated code).
     * Only templates that say so take them (tuner__gemm_names_nk; matmul_simt, matmul_tf32 and
     * matmul_mma without split-K, cp.async through per-unit coordinates): matmul_wgmma refuses
     * such an op in its applies. */
    unsigned n_sym, k_sym;
    /* What every launch's N and K are multiples of (the product of their dims' multiple_of; the
     * size itself when fixed); the vector widths above (vec, out_vec, out_chunk) are cut to
     * divide them, so that a vector never straddles a row at any size. */
    long long n_multiple, k_multiple;
} tuner__gemm_problem;

/* How generated code spells M and the batch count: for a static op the literals the emitters
 * always printed ("1000", "1000LL"), for a dynamic one the ints gm_M and gm_B that every kernel
 * of it declares at its top from its hd_dim parameters (tuner__gemm_emit_signature), the literal
 * value where that extent is fixed. Written into a small by-value buffer. */
typedef struct tuner__gemm_x {
    char s[48];
} tuner__gemm_x;
/* M + add ("999" / "(gm_M - 1)"). */
tuner__gemm_x tuner__gemm_M(const tuner__gemm_problem *p, long long add);
/* M as a long long ("1000LL" / "(long long)gm_M"). */
tuner__gemm_x tuner__gemm_M_ll(const tuner__gemm_problem *p);
/* The batch count (matmul batch or conv groups: "4" / "gm_B"). */
tuner__gemm_x tuner__gemm_B(const tuner__gemm_problem *p);
/* N + add and K + add, as tuner__gemm_M: the literal where fixed, else from the ints gm_N and
 * gm_K a dynamic op's kernels declare (tuner__gemm_emit_dims_decl). */
tuner__gemm_x tuner__gemm_N(const tuner__gemm_problem *p, long long add);
tuner__gemm_x tuner__gemm_K(const tuner__gemm_problem *p, long long add);
/* Whether every launch's N is a multiple of block_n (tuner__gemm_m_divides for N). */
bool tuner__gemm_n_divides(const tuner__gemm_problem *p, int block_n);
/* Whether N or K is named (a template that does not take them refuses the op). */
static inline bool tuner__gemm_names_nk(const tuner__gemm_problem *p)
{
    return p->n_sym || p->k_sym;
}
/* Whether every launch's M is a multiple of block_m (so no tile row is partial): M % block_m
 * for a fixed M, the dims' multiple_of for a named one. */
bool tuner__gemm_m_divides(const tuner__gemm_problem *p, int block_m);

/* ceil(a / b) for b > 0: tiles, k tiles, waves. */
static inline long long tuner__gemm_cdiv(long long a, long long b)
{
    return (a + b - 1) / b;
}

/* Fills p from a validated matmul or conv2d op. Returns 0, or -EINVAL with a message in *err
 * (malloc'd) when the op is not something these templates handle: an FP8 matmul among them
 * (templates that read FP8 operands ask tuner__gemm_problem_init_fp8). */
int tuner__gemm_problem_init(const tuner_op *op, tuner__gemm_problem *p, char **err);
/* The same for templates that also take FP8 matmuls (matmul_wgmma, matmul_mma, the reference). */
int tuner__gemm_problem_init_fp8(const tuner_op *op, tuner__gemm_problem *p, char **err);

/* Emits the prelude plus the gm_ helpers the templates use (shared-address based ldmatrix and
 * cp.async, bit conversions). */
void tuner__gemm_emit_head(tuner_sb *sb, const tuner_target *t);

/* Emits `extern "C" __global__ void __launch_bounds__(threads) name(in0.., out[, ws]) {` with
 * typed pointers in0..in{n-1}, out and, when ws, the fp32 workspace; cluster_z > 1 adds
 * `__cluster_dims__(1, 1, cluster_z)` (sm_90+: consecutive blockIdx.z form one cluster). A
 * dynamic op's kernels also take `long long hd_dim0, ...` after the pointers and declare
 * `const int gm_M, gm_B, gm_N, gm_K` from them first thing (tuner__gemm_M, _N, _K). */
void tuner__gemm_emit_signature(tuner_sb *sb, const tuner__gemm_problem *p, const char *name,
                                int threads, bool ws, int cluster_z);
/* The declarations of gm_M and gm_B from the hd_dim parameters that a dynamic op's kernel opens
 * with (tuner__gemm_emit_signature's; for a template that writes its own signature); nothing
 * for a static op. */
void tuner__gemm_emit_dims_decl(tuner_sb *sb, const tuner__gemm_problem *p);

/* Emits declarations, in the current scope, for the element (b, mn, k) of operand `which`
 * (0 = A with mn = m, 1 = B with mn = n): `bool <pfx>_ok` (inside the tensor and k < kend; for
 * convolutions also inside the unpadded image), `long long <pfx>_off` (element offset into
 * in<input>, meaningful only when ok) and `long long <pfx>_t<i>` (its tensor coordinates, used
 * by prologue operands). b, mn, k and kend are C expressions. */
void tuner__gemm_emit_operand(tuner_sb *sb, const tuner__gemm_problem *p, int which, const char *pfx,
                              const char *b, const char *mn, const char *k, const char *kend);

/* Emits statements applying `chain` to float `var`, the element of tensor `value` at coordinates
 * <pfx>_t0..<pfx>_t<rank-1> (declared by the caller); binary operands are read from in<i> with
 * numpy broadcasting against `value`. */
void tuner__gemm_emit_chain_at(tuner_sb *sb, const tuner__gemm_problem *p, const tuner_ew_chain *chain,
                               const tuner_tensor *value, const char *pfx, const char *var);

/* Emits statements applying operand `which`'s prologue chain to float variable `var`, whose
 * tensor coordinates were declared by tuner__gemm_emit_operand() with `pfx`. */
void tuner__gemm_emit_prologue(tuner_sb *sb, const tuner__gemm_problem *p, int which, const char *pfx,
                               const char *var);

/* Emits a block that, for GEMM coordinates (b, m, n) (C expressions), applies the epilogue to
 * the `nv` (1 or 2) float variables vars[] (elements n and n+1), converts to the output dtype and
 * stores them, skipping out-of-range elements. nv == 2 requires p->out_vec == 2 and n even. */
void tuner__gemm_emit_store(tuner_sb *sb, const tuner__gemm_problem *p, const char *b, const char *m,
                            const char *n, const char *const *vars, int nv);

/* The same for an element known to be in range, stored at pointer expression `dst` (which must
 * equal out + the element's offset): no bounds check, so a caller that hoists the base pointer
 * gets compile-time store offsets, and epilogue operand loads repeated across elements (a bias
 * read once per column) are left to the compiler to merge. dst NULL is tuner__gemm_emit_store. */
void tuner__gemm_emit_store_at(tuner_sb *sb, const tuner__gemm_problem *p, const char *b, const char *m,
                               const char *n, const char *const *vars, int nv, const char *dst);

/* tuner__gemm_emit_store (with `applied`, tuner__gemm_emit_store_applied) of the pair (m, n),
 * (m, n + 1) holding the float expressions x0 and x1: one paired store where output rows allow
 * it, else two. */
void tuner__gemm_emit_store_pair(tuner_sb *sb, const tuner__gemm_problem *p, const char *b, const char *m,
                                 const char *n, const char *x0, const char *x1, bool applied);

/* Split-K inside a thread-block cluster (sm_90+): the K slices of one output tile are the CTAs
 * of one cluster; each parks its fp32 partial tile at the same shared address, and after a
 * cluster barrier CTA r sums share r of the tile's in-range rows over the partials of CTAs
 * 0..split-1, in that order (as the workspace reduction does: results do not depend on
 * scheduling), applies the epilogue and stores. Device helpers: gm_sts_f2 (an 8-byte shared
 * store), gm_ldc_f2 (an 8-byte load from the same shared offset in another CTA of the cluster:
 * mapa + ld.shared::cluster) and gm_cluster_sync (barrier.cluster with release / acquire). */
extern const char tuner__gemm_cluster_helpers[];
/* Bytes per row of a parked fp32 partial tile block_n wide: padded by 32 bytes so that the
 * fragment-order 8-byte writes of both GEMM templates (a half warp covers 4 rows x 4 lanes) hit
 * distinct banks. */
int tuner__gemm_partial_row_bytes(int block_n);
typedef struct tuner__gemm_cluster_sum {
    int block_m, block_n; /* the tile */
    int row_bytes;        /* partial tile rows, fp32 with padding */
    int split;            /* CTAs of the cluster */
    int threads;          /* threads that sum, numbered by `tid` from 0 */
    const char *tid;
    const char *base;     /* shared address of the partial tile (the same in every CTA) */
    const char *b, *m0, *n0; /* the tile's batch entry and origin (C expressions) */
    /* The partial tile is the output's transpose (matmul_wgmma's swapped operands): block_m
     * rows of output columns from n0, block_n columns of output rows from m0. */
    bool transposed;
} tuner__gemm_cluster_sum;
/* Emits the sum of CTA %cluster_ctarank's share, between the caller's two cluster barriers
 * (after every partial is written; before any CTA's shared memory may go away or be reused). */
void tuner__gemm_emit_cluster_sum(tuner_sb *sb, const tuner__gemm_problem *p, const tuner__gemm_cluster_sum *s);

/* Device helpers of an FP8 output (a quantizing epilogue: the chain's last step a cast to FP8):
 * gm_cvt_f8e4m3x2 / gm_cvt_f8e5m2x2 (two floats to two bytes, saturating, nearest) that the store
 * emitters use, and hd_round_f8e4m3 / hd_round_f8e5m2, the cast step's rounding. sm_89+. */
extern const char tuner__gemm_fp8_out_helpers[];

/* The quantize step's amax (tuner__gemm_problem.amax_in): `float gm_amax_v = 0.0f;`, to open a
 * kernel whose store emitters record it; nothing without one. */
void tuner__gemm_emit_amax_decl(tuner_sb *sb, const tuner__gemm_problem *p);
/* ... and its publication, where every thread of each warp arrives once, after its last store:
 * the warp's largest value (__reduce_max_sync on the bit patterns, whose order is the values'
 * for non-negative floats) raised into the amax input by one atomicMax of its first active lane
 * (an int max, so a negative value left in the buffer loses to any |value|). */
void tuner__gemm_emit_amax_flush(tuner_sb *sb, const tuner__gemm_problem *p);

/* Whether the op has a fused epilogue (tuner__gemm_emit_epilogue_pair has work to do): steps, or
 * an FP8 matmul's scales (applied first, as part of it). */
bool tuner__gemm_has_epilogue(const tuner__gemm_problem *p);

/* Emits a block that applies the epilogue, in place, to the float lvalues pair[0..1] (elements n
 * and n+1 at GEMM coordinates (b, m, n)). With `clamped` the pair may lie partly or wholly
 * outside the output (which needs N >= 2): it is then computed from the last row's or last pair's
 * operands and must not be stored; there is no branch. Templates run it over all fragments
 * before storing any: per-element bounds checks around the chain made every element a basic
 * block of its own, so its dependent chain (operand load, polynomial, ex2) could not overlap
 * the next element's (H100, 4096x3072x768 + bias + GELU: +30 us over the bare GEMM's 34), and
 * the staged stores are inline asm with a memory clobber, which orders every operand load
 * after the previous store. */
void tuner__gemm_emit_epilogue_pair(tuner_sb *sb, const tuner__gemm_problem *p, const char *b, const char *m,
                                    const char *n, const char *const *pair, bool clamped);

/* tuner__gemm_emit_epilogue_pair where some operands were loaded into a shared-memory tile:
 * smem_at[i] (NULL, or one entry per input: NULL for an operand read from global memory) is an
 * expression of the address (a pointer) of the pair's two elements of input i there, which are
 * read with one load before the chain (tuner__gemm_tile_operand says which inputs may be). */
void tuner__gemm_emit_epilogue_pair_x(tuner_sb *sb, const tuner__gemm_problem *p, const char *b, const char *m,
                                      const char *n, const char *const *pair, bool clamped,
                                      const char *const *smem_at);

/* Whether input i is a full-size epilogue operand that the copy engine can load as a tile of
 * the output's shape: read by the epilogue only, of the output's dtype, [M, N] (or [batch, M, N],
 * or [1, M, N]) as the output's rows and columns with nothing broadcast along them, 16-byte
 * rows and alignment; for an ungrouped NHWC convolution, an operand of the output's shape (its
 * [N*P*Q, K] matrix: a residual). *batched (may be NULL) tells whether it has a batch dimension
 * of its own. */
bool tuner__gemm_tile_operand(const tuner__gemm_problem *p, int i, bool *batched);

/* tuner__gemm_emit_store for values the epilogue was already applied to. */
void tuner__gemm_emit_store_applied(tuner_sb *sb, const tuner__gemm_problem *p, const char *b, const char *m,
                                    const char *n, const char *const *vars, int nv);

/* Emits a block that converts a pair (elements n and n+1, the epilogue already applied by
 * tuner__gemm_emit_epilogue_pair) to the output dtype and stores it to shared memory at the
 * 32-bit address expression `saddr` (one 4- or 8-byte store) for a staged epilogue to write out;
 * with `checked` out-of-range elements are skipped. */
void tuner__gemm_emit_store_smem(tuner_sb *sb, const tuner__gemm_problem *p, const char *b, const char *m,
                                 const char *n, const char *const *pair, const char *saddr, bool checked);

/* Emits a block that applies the epilogue (if the op has one) to a pair (elements n and n+1)
 * and stores it, converted to the output dtype, at `sptr` (an `unsigned char *` into shared
 * memory) in a tile that a TMA store writes out. The pair may lie outside the output, which the
 * TMA store clips: it is then computed from clamped coordinates' operands (N >= 2), with no
 * branch. The store is a plain C++ one, not asm with a memory clobber, so the chain's operand
 * loads may be scheduled ahead of earlier pairs' stores. */
void tuner__gemm_emit_staged_pair(tuner_sb *sb, const tuner__gemm_problem *p, const char *b, const char *m,
                                  const char *n, const char *const *pair, const char *sptr);
/* tuner__gemm_emit_staged_pair with operands read from shared memory, as
 * tuner__gemm_emit_epilogue_pair_x. */
void tuner__gemm_emit_staged_pair_x(tuner_sb *sb, const tuner__gemm_problem *p, const char *b, const char *m,
                                    const char *n, const char *const *pair, const char *sptr,
                                    const char *const *smem_at);

/* Emits `<name>`: the split-K reduction kernel (256 threads, one output element each) that sums
 * `split` fp32 partial planes of the workspace and applies the epilogue. */
void tuner__gemm_emit_splitk_reduce(tuner_sb *sb, const tuner__gemm_problem *p, const char *name,
                                    int split);

/* Emits `const int gm_tm, gm_tn` from blockIdx.x with grouped (L2-friendly) tile order: `group`
 * consecutive tile rows are walked column by column. group <= 1 is plain row-major order.
 * tiles_m is the count at p's sizes (a dynamic op's max); a dynamic op's code computes it from
 * gm_M, and a named N's count of tile columns from gm_N. With both M and N named the tiles are
 * a 2-D grid instead (gm_tm = blockIdx.x, gm_tn = blockIdx.y: their counts are two rules,
 * tuner__gemm_finish) and group is not used. */
void tuner__gemm_emit_raster(tuner_sb *sb, const tuner__gemm_problem *p, long long tiles_m, int block_m, int block_n,
                             int group);

/* K elements per split-K slice: a multiple of block_k covering K in `split` slices. */
long long tuner__gemm_k_per_split(long long K, int split, int block_k);

/* Finishes a program whose main kernel `name` is in sb: appends the split-K reduction kernel
 * `rname` when split > 1, hands the source over to prog and describes the launches (the main
 * kernel over ceil(M / block_m) * ceil(N / block_n) x 1 x (batch * split) blocks - with M and N
 * both named, ceil(M / block_m) x ceil(N / block_n) x (batch * split) -, then the reduction over
 * every output element) and the fp32 workspace of the partial sums. With split_in_cluster the
 * main kernel sums the slices itself (one cluster per tile): one launch over the same grid, no
 * workspace. A dynamic op's launches get the dims arguments and grid rules for every grid
 * dimension that depends on M, N or the batch (the workspace is sized at max). Returns 0, -ENOMEM
 * or -ERANGE (a grid out of CUDA's limits; sb is consumed either way). */
int tuner__gemm_finish(tuner_sb *sb, const tuner__gemm_problem *p, tuner_program *prog,
                       const char *name, const char *rname, int block_m, int block_n, int split,
                       bool split_in_cluster, unsigned threads, unsigned smem);

/* Device code of HD_INLINE void hd_bytes_4x4(const hd_u32 *w, hd_u32 *o): the 4x4 transpose
 * of the bytes of four words (byte j of w[i] becomes byte i of o[j]) in eight byte permutes;
 * the transposing launch's and matmul_wgmma's in-kernel transposers' (emitted once per source). */
extern const char tuner__gemm_bytes_4x4_fn[];

/* A kernel `name` that writes the byte matrix src [rows, cols] (row-major, FP8 elements) to dst
 * as its transpose [cols, rows]: 128 x 128 tiles, one per 256-thread block, grid
 * (ceil(cols / 128), ceil(rows / 128)); rows and cols multiples of 16 (whole 16-byte vectors,
 * every row's start 16-byte aligned), TUNER_BYTE_TRANSPOSE_SMEM bytes of dynamic shared memory.
 * Its parameters are src, dst (a float * as workspaces are), then a dynamic op's sizes (unused:
 * rows and cols are fixed). For an FP8 B given [K, N], which 8-bit wgmma cannot read, made
 * K-major once before the GEMM instead of in every tile (matmul_wgmma's pretranspose). */
#define TUNER_BYTE_TRANSPOSE_TILE 128
#define TUNER_BYTE_TRANSPOSE_SMEM (128 * 33 * 4)
void tuner__gemm_emit_byte_transpose(tuner_sb *sb, const tuner_op *op, const char *name, long long rows, long long cols);

/* Fills the launch arguments (inputs, output and, when ws, the workspace, then a dynamic op's
 * dims; the order of tuner__gemm_emit_signature()) and the kernel name of one launch. */
void tuner__gemm_set_launch(tuner_launch *l, const tuner__gemm_problem *p, const char *name,
                            unsigned gx, unsigned gy, unsigned gz, unsigned threads, unsigned smem,
                            bool ws);

/* Adds a schedule parameter (name must be a static string). */
void tuner__gemm_param(tuner_schedule *s, const char *name, int value);
/* Appends a schedule to a realloc'd array. Returns 0 or -ENOMEM. */
int tuner__gemm_push(tuner_schedule **items, size_t *n, const tuner_schedule *s);

/* Writes a kernel base name such as "hd_matmul_mma_128x256x32_w64x64_s3_k1_g8" into buf. */
void tuner__gemm_kernel_name(char *buf, size_t len, const char *tmpl, const tuner_schedule *s);

/* Cost-model helpers shared by the templates (tuner/gemm/cost.c). */
typedef struct tuner__gemm_cost_in {
    int block_m, block_n, block_k, threads;
    int warp_m, warp_n;  /* 0 for SIMT: thread tile used instead */
    int split_k, stages, smem_bytes, regs_per_thread;
    bool split_in_cluster; /* split-K slices summed through distributed shared memory */
    bool tensor_core;    /* else SIMT FMA */
    bool tf32;
    bool async_copy;     /* cp.async pipeline (else register-staged loads) */
    int vec_a, vec_b;    /* elements per global access */
    double compute_scale; /* the template's own factor on the compute time per k tile (0: 1) */
} tuner__gemm_cost_in;
double tuner__gemm_cost(const tuner__gemm_problem *p, const tuner_arch *a, const tuner__gemm_cost_in *c);
/* The tensor cores' rate on p's operands relative to tuner_arch.tc_f16_tflops (fp16/bf16): 2 for
 * FP8 (Hopper's dense e4m3/e5m2 wgmma peak is twice its fp16 one, 1979 against 989 TFLOP/s on an
 * H100 SXM), else 1. */
double tuner__gemm_tc_rate_factor(const tuner__gemm_problem *p);

/* The main loop of the blocks on one SM as a ring of k tiles: each is loaded (a latency, longer
 * for the part from DRAM than for L2 hits, then its share of L2 and DRAM bandwidth) and then
 * computed; the pipeline keeps `slots` of
 * them under way. tuner__gemm_ring_us gives the microseconds the SM needs for `ktiles` of them:
 * latency-bound with few slots, bound by the busiest of compute, DRAM and L2 with many. */
typedef struct tuner__gemm_ring {
    double ktiles;      /* k tiles the SM works through */
    int slots;          /* k tiles its resident blocks keep loading at once (stages - 1 each) */
    double compute_us;  /* one k tile on the SM's tensor (or FMA) units */
    double stage_bytes; /* operand bytes one k tile loads */
    double dram_frac;   /* the part of them that crosses DRAM (the rest hits L2) */
    double l2_penalty;  /* L2 cost per byte over 16-byte accesses' (1 for TMA, cp.async 16) */
    double sms;         /* SMs sharing DRAM and L2 bandwidth meanwhile */
    double extra_latency_us; /* added to every load's latency (e.g. TMA boxes mostly out of range) */
    double tile_ktiles; /* k tiles per tile of a non-persistent kernel (0: persistent, its
                         * producer runs ahead into the next tile) */
    int blocks;         /* resident blocks per SM sharing the slots (non-persistent) */
    double producer_us; /* one k tile's time on a producer of its own that is neither the copy
                         * engine nor free (0: none; tuner__gemm_gather_us), another bound */
} tuner__gemm_ring;
double tuner__gemm_ring_us(const tuner_arch *a, const tuner__gemm_ring *r);

/* Microseconds per k tile of matmul_wgmma's producer warpgroup gathering operands TMA cannot
 * address (tuner/gemm/wgmma.c, emit_gather_producer): `chunks` 16-byte chunks per producer
 * thread, loaded one k tile ahead, a `dram_frac` share of them from DRAM. */
double tuner__gemm_gather_us(double chunks, double dram_frac);

/* Microseconds a cluster split-K tile spends summing its `split` partials
 * (tuner__gemm_emit_cluster_sum and the barriers around it). */
double tuner__gemm_cluster_sum_us(int split);

/* Microseconds one SM spends on the fused epilogue's arithmetic for `elements` output elements
 * (0 without an epilogue); the templates' cost models charge it per tile. */
double tuner__gemm_epilogue_us(const tuner__gemm_problem *p, double elements);
/* Time per tile of `elements` output elements that its full-size epilogue operands ([M, N] like
 * the output) add: those read per fragment from global memory (all but `in_smem`) stall the
 * epilogue; the `in_smem` ones a template loads by TMA into shared memory during the main loop
 * cost part of their DRAM time at an SM's share (`sms` SMs at work) of the bandwidth. */
double tuner__gemm_operand_us(const tuner__gemm_problem *p, const tuner_arch *a, double elements, double sms,
                              int in_smem);

/* Templates (tuner/gemm/wgmma.c, mma.c, simt.c). */
extern const tuner_template tuner__gemm_matmul_wgmma;
extern const tuner_template tuner__gemm_conv2d_wgmma;
extern const tuner_template tuner__gemm_matmul_mma;
extern const tuner_template tuner__gemm_conv2d_mma;
extern const tuner_template tuner__gemm_matmul_simt;
extern const tuner_template tuner__gemm_conv2d_simt;
extern const tuner_template tuner__gemm_matmul_tf32;

#endif
