/* tuner/attn/mma.c - attention_mma: fused attention (the ATTENTION op of op/op.h) in
 * FlashAttention-2's scheme, with mma.sync.m16n8k16 and cp.async, for every target from sm_80
 * (sm_90/sm_90a, sm_100 and sm_120 run the same mma.sync code).
 *
 * One thread block owns block_m query rows of one (batch entry, query head): grid
 * (cdiv(S, block_m), Hq, B), and under causal masking the query blocks run last-first (the
 * longest key ranges start first, so the tail of the launch is short blocks). Its `warps` warps
 * each own 16 * mi consecutive query rows (mi = block_m / 16 / warps m16 tiles), so softmax
 * statistics never leave a warp:
 *  - the Q tile is copied once into shared memory (cp.async, rows past S zero-filled); with
 *    q_regs its mma A fragments are then held in registers for the whole key loop (ldmatrix
 *    once), otherwise they are re-read from shared memory at every key tile (fewer registers:
 *    what head dim 256 needs);
 *  - keys go by in tiles of block_n: the K and V tiles of a key tile arrive by cp.async in a
 *    `stages`-deep ring (tile t in slot t % stages, rows past the block's last key zero-filled),
 *    K and V as separate commit groups so that the scores of tile t are computed while its V
 *    tile may still be in flight;
 *  - scores S = Q K^T in fp32 (K rows are contiguous along D, so K is the B operand as stored:
 *    ldmatrix without .trans); softmax runs on ex2: without a mask the scores stay unscaled and
 *    exp2 takes s * scale * log2(e) - max from one FMA (with a mask, read straight from global
 *    memory and added, they are scaled by scale, and their difference to the row maximum by
 *    log2(e): a finite mask of -3.4e38 stays finite); keys past Skv and, under causal
 *    masking, keys j > i + Skv - S are set to -inf, only on the tiles that contain such keys;
 *  - online softmax per row (max over the four lanes of a quad that share a row, then the
 *    running output and sum are rescaled); a row whose maximum is still -inf uses 0 as its
 *    maximum, so every exp2 of -inf gives 0 and never -inf - -inf = NaN;
 *  - P is rounded to q's dtype in registers and used directly as the A operand of P V
 *    (the m16n8 accumulator layout of two n8 score tiles is the m16k16 A fragment layout);
 *    V is the B operand through ldmatrix.trans;
 *  - at the end O / l (0 for a row that kept no key: fully masked, or causal with S > Skv), the
 *    fused epilogue, and stores of element pairs (tuner__attn_emit_store) for rows i < S.
 * Causal blocks visit only key tiles up to their last row's diagonal; a block whose rows all
 * have no key writes zeros (after the epilogue) without loading anything.
 *
 * Shared tiles keep D contiguous, 16-byte chunks XOR-swizzled by row where rows are whole
 * 128-byte periods (D 64, 128, 256) and rows padded by 16 bytes otherwise (D 80, 96): both make
 * the cp.async chunk writes and the ldmatrix row reads conflict-free. Operands aligned below 16
 * bytes are copied with 8- or 4-byte cp.async, or (2-byte aligned) by plain loads and stores.
 *
 * A dynamic op (named dims on B, S and Skv; tuner__attn_dyn_ok) reads S and Skv at launch
 * (AT_S, AT_SKV; the causal offset Skv - S from them), its batch and head strides and the mask's
 * strides from the sizes (tuner__attn_q_offset and friends), and sizes grid.x = cdiv(S, block_m)
 * and grid.z = B by rules; keys past Skv are tested on every last tile unless Skv's multiple_of
 * is a multiple of block_n. Row strides never depend on a size. The schedule space is the one
 * at the dims' max: every row and key bound is checked at launch anyway. Where Skv's range
 * holds a single key-tile count (not causal), the count and Skv's max are compiled in (fixed_nt
 * below): such a kernel is valid for its range only, which the launcher enforces.
 *
 * Parameters: block_m {64, 128}, block_n {32, 64, 128}, warps {4, 8} (at least 16 rows each),
 * stages {2, 3}, q_regs {0, 1}; valid when the tiles fit shared memory and the register estimate
 * fits (regs_estimate; ptxas -v shows no spills for the valid schedules, tuner/attn/tests).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/attn/attn.h"
#include "tuner/core.h"
#include "tuner/space.h"

static const char *const P_BM = "block_m";
static const char *const P_BN = "block_n";
static const char *const P_WARPS = "warps";
static const char *const P_STAGES = "stages";
static const char *const P_QREGS = "q_regs";

typedef struct attn_cfg {
    int bm, bn, warps, stages;
    bool qregs;
    int mi;        /* m16 tiles of query rows per warp */
    int threads;
    int row_bytes; /* of one shared row of Q, K or V */
    bool swizzle;  /* chunks XOR-swizzled (else rows padded by one chunk) */
    int smem;
    int regs;      /* estimate per thread */
} attn_cfg;

/* The register budget of the estimate below: the schedules within it compile without spills
 * (ptxas -v over the spaces of every head dim on sm_80 and sm_90a, tuner/attn/tests; the
 * largest, D 256 on 64 x 64 tiles, takes 254 registers), those above it spill or sit at 255. */
enum { REGS_BUDGET = 250 };

/* Registers per thread, fitted to ptxas -v: the fp32 output accumulators and Q's fragments when
 * held (both live across the key loop), the fp32 score tile at 1.5 registers a score (its P
 * fragments, the causal test's coordinates), 0.5 more a score where the mask's loads are in
 * flight (sm_90a, D 128 with a mask: 64 x 128 tiles spill at 255 registers, 52 bytes), row
 * statistics and addressing. */
static int regs_estimate(const tuner__attn_problem *p, const attn_cfg *c)
{
    const int d = (int)p->d.d;
    const int o = c->mi * (d / 8) * 4, s = c->mi * (c->bn / 8) * 4;
    const int q = c->qregs ? c->mi * (d / 16) * 4 : c->mi * 4;
    return o + q + s * 3 / 2 + (p->d.has_mask ? s / 2 : 0) + c->mi * 8 + 48;
}

static int align_of(const tuner_tensor *t)
{
    return t->align > 0 ? t->align : 16;
}

static int cfg_from(const tuner__attn_problem *p, const tuner_schedule *s, attn_cfg *c)
{
    memset(c, 0, sizeof(*c));
    c->bm = tuner_schedule_param(s, P_BM, 0);
    c->bn = tuner_schedule_param(s, P_BN, 0);
    c->warps = tuner_schedule_param(s, P_WARPS, 0);
    c->stages = tuner_schedule_param(s, P_STAGES, 0);
    const int qregs = tuner_schedule_param(s, P_QREGS, -1);
    if ((c->bm != 64 && c->bm != 128) || (c->bn != 32 && c->bn != 64 && c->bn != 128) ||
        (c->warps != 4 && c->warps != 8) || (c->stages != 2 && c->stages != 3) || (qregs != 0 && qregs != 1))
        return -EINVAL;
    if (c->bm % (16 * c->warps))
        return -EINVAL; /* every warp owns whole m16 tiles */
    c->qregs = qregs == 1;
    c->mi = c->bm / 16 / c->warps;
    c->threads = 32 * c->warps;
    const int d = (int)p->d.d;
    c->swizzle = d % 64 == 0;
    c->row_bytes = d * 2 + (c->swizzle ? 0 : 16);
    c->smem = (c->bm + 2 * c->stages * c->bn) * c->row_bytes;
    c->regs = regs_estimate(p, c);
    return 0;
}

/* sm_100's ptxas (CUDA 13.0) allocates more than sm_80/90's for the same code: D 256 on 4 warps
 * spills there (116 bytes on 64 x 64 and 64 x 32 tiles) where sm_80 needs 236-254 registers,
 * and the largest D 128 tiles reach 254-255. */
static int arch_regs(const tuner_arch *a, const attn_cfg *c)
{
    return a->sm == 100 ? 12 + (c->warps == 4 ? 28 : 0) : 0;
}

static bool cfg_valid(const tuner__attn_problem *p, const tuner_arch *a, const attn_cfg *c)
{
    if (c->threads > a->max_threads_per_block || c->smem > a->max_smem_per_block)
        return false;
    const int regs = c->regs + arch_regs(a, c);
    if (regs > REGS_BUDGET || regs > a->max_regs_per_thread || (long)regs * c->threads > a->regs_per_sm)
        return false;
    /* grid (query blocks, Hq, B); row indices are ints. */
    const tuner_attention_dims *d = &p->d;
    if (d->hq > 65535 || d->b > 65535 || d->s > (1LL << 30) || d->skv > (1LL << 30))
        return false;
    return true;
}

static bool attn_mma_applies(const tuner_op *op, const tuner_target *t)
{
    return op && op->kind == TUNER_OP_ATTENTION && tuner__arch(t) && tuner__attn_supported(op) &&
           tuner__attn_dyn_ok(op);
}

/* The key tiles query block qb visits: causal blocks stop at their last row's diagonal. */
static long long key_end(const tuner__attn_problem *p, long long m0, int bm)
{
    if (!p->causal)
        return p->d.skv;
    long long last = m0 + bm < p->d.s ? m0 + bm - 1 : p->d.s - 1;
    long long end = last + p->causal_off + 1;
    return end < 0 ? 0 : end > p->d.skv ? p->d.skv : end;
}

/* ---- code ---- */

static const char at_helpers[] =
    "// ---- tuner/attn/mma helpers ----\n"
    /* Shared addresses are 32-bit: one cvta at the start, then integer offsets. */
    "HD_INLINE void at_ldsm4(hd_u32 *r, hd_u32 a) { "
    "asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\" : \"=r\"(r[0]), "
    "\"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(a)); }\n"
    "HD_INLINE void at_ldsm4t(hd_u32 *r, hd_u32 a) { "
    "asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\" : \"=r\"(r[0]), "
    "\"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(a)); }\n"
    "HD_INLINE float at_exp2(float x) { float y; asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(y) : \"f\"(x)); "
    "return y; }\n"
    /* One 16-byte chunk global -> shared, zero-filled when !ok (src is then the tensor's base,
     * never read): cp.async of the widest size the operand's alignment allows, or for a 2-byte
     * aligned operand plain loads and a shared store (ordered by the same barriers). */
    "template <int A> HD_INLINE void at_chunk(hd_u32 dst, const void *src, bool ok) {\n"
    "  if constexpr (A >= 16) {\n"
    "    asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\" :: \"r\"(dst), \"l\"(src), "
    "\"r\"(ok ? 16 : 0) : \"memory\");\n"
    "  } else if constexpr (A >= 4) {\n"
    "#pragma unroll\n"
    "    for (int k = 0; k < 16 / A; k++) {\n"
    "      if constexpr (A == 8) asm volatile(\"cp.async.ca.shared.global [%0], [%1], 8, %2;\" :: \"r\"(dst + 8 * k), "
    "\"l\"((const char *)src + (ok ? 8 * k : 0)), \"r\"(ok ? 8 : 0) : \"memory\");\n"
    "      else asm volatile(\"cp.async.ca.shared.global [%0], [%1], 4, %2;\" :: \"r\"(dst + 4 * k), "
    "\"l\"((const char *)src + (ok ? 4 * k : 0)), \"r\"(ok ? 4 : 0) : \"memory\");\n"
    "    }\n"
    "  } else {\n"
    "    const unsigned short *s = (const unsigned short *)src;\n"
    "    hd_u32 w[4];\n"
    "#pragma unroll\n"
    "    for (int k = 0; k < 4; k++) w[k] = ok ? ((hd_u32)s[2 * k] | ((hd_u32)s[2 * k + 1] << 16)) : 0u;\n"
    "    asm volatile(\"st.shared.v4.u32 [%0], {%1,%2,%3,%4};\" :: \"r\"(dst), \"r\"(w[0]), \"r\"(w[1]), "
    "\"r\"(w[2]), \"r\"(w[3]) : \"memory\");\n"
    "  } }\n"
    "// ---- end of tuner/attn/mma helpers ----\n";

/* The range of a size that is the product of the named dims in mask (size itself when none). */
static void sym_range(const tuner_op *op, unsigned mask, long long size, long long *lo, long long *hi)
{
    *lo = *hi = mask ? 1 : size;
    for (int k = 0; k < op->n_dims; k++)
        if (mask & (1u << k)) {
            *lo *= op->dims[k].min;
            *hi *= op->dims[k].max;
        }
}

/* Kernel name from the schedule: attention_mma_bm128_bn64_w8_s2_q1. */
static void kernel_name(char *buf, size_t len, const attn_cfg *c)
{
    snprintf(buf, len, "attention_mma_bm%d_bn%d_w%d_s%d_q%d", c->bm, c->bn, c->warps, c->stages, c->qregs ? 1 : 0);
}

/* Copies a rows x D tile into the shared tile at `dst`, 16-byte chunks: each thread keeps one
 * chunk column at_lc and takes rows at_lr + it * rpp (rpp = threads / DC rows per pass;
 * consecutive threads copy consecutive chunks of a row, coalesced), so its global element
 * offset and shared byte offset advance by compile-time steps and a copy costs a compare and a
 * select (computing each chunk's row and column from a flat index held up to ~20 more registers
 * at 4 warps). Where DC does not divide the block (D 80, 96: 10 and 12 chunks) the last
 * threads % DC threads copy nothing. `goff` is the thread's element offset of the tile's row
 * at_lr (a long long expression), `row_ok` tests row `at_r`, `rstride` is the elements between
 * rows. */
static void emit_tile_copy(tuner_sb *sb, const attn_cfg *c, int rows, int dc, int align, const char *dst,
                           const char *row_ok, const char *ptr, const char *goff, long long rstride)
{
    const int rpp = c->threads / dc;
    const int iters = (rows + rpp - 1) / rpp;
    /* Row at_lr + it * rpp keeps at_lr's swizzle when rpp spans whole periods of 8 rows. */
    const bool same_swz = !c->swizzle || rpp % 8 == 0;
    tuner_sb_printf(sb, "const long long at_go = %s;\n", goff);
    if (c->threads % dc)
        tuner_sb_printf(sb, "if (at_tid < %d) {\n", rpp * dc);
    for (int it = 0; it < iters; it++) {
        tuner_sb_printf(sb, "{\nconst int at_r = at_lr + %d;\n", it * rpp);
        if (rows % rpp && (it + 1) * rpp > rows)
            tuner_sb_printf(sb, "if (at_r < %d) {\n", rows);
        else
            tuner_sb_puts(sb, "{\n");
        if (same_swz)
            tuner_sb_printf(sb, "const hd_u32 at_d = %s + at_ls + %d;\n", dst, it * rpp * c->row_bytes);
        else
            tuner_sb_printf(sb, "const hd_u32 at_d = %s + at_so(at_r, at_lc);\n", dst);
        tuner_sb_printf(sb,
                        "const bool at_ok = %s;\n"
                        "at_chunk<%d>(at_d, at_ok ? (const void *)(%s + (at_go + %lldLL)) : (const void *)%s, at_ok);\n"
                        "}\n}\n",
                        row_ok, align, ptr, (long long)it * rpp * rstride, ptr);
    }
    if (c->threads % dc)
        tuner_sb_puts(sb, "}\n");
}

/* The loaders at_load_q(), at_load_k(t, dst) and at_load_v(t, dst): rows past S (Q) and past
 * the block's last key (K, V) are zero-filled. */
static int emit_loaders(tuner_sb *sb, const tuner__attn_problem *p, const attn_cfg *c, int qa, int kva)
{
    const int dc = (int)p->d.d / 8;
    tuner_sb_puts(sb, "const int at_lr = at_tid / AT_DC, at_lc = at_tid % AT_DC;\n"
                      "const hd_u32 at_ls = at_so(at_lr, at_lc);\n");
    char *qoff = tuner__attn_q_offset(p, "at_b", "at_h", "at_m0 + at_lr", "at_lc * 8");
    char *kvoff = tuner__attn_kv_offset(p, "at_b", "at_hk", "at_j0 + at_lr", "at_lc * 8");
    if (!qoff || !kvoff) {
        free(qoff);
        free(kvoff);
        return -ENOMEM;
    }
    tuner_sb_puts(sb, "auto at_load_q = [&]() {\n");
    emit_tile_copy(sb, c, c->bm, dc, qa, "at_sq", "at_m0 + at_r < AT_S", p->q_ptr, qoff, p->q_ss);
    tuner_sb_puts(sb, "};\n");
    for (int w = 1; w <= 2; w++) {
        tuner_sb_printf(sb, "auto at_load_%c = [&](int at_t, hd_u32 at_dst) {\nconst int at_j0 = at_t * AT_BN;\n",
                        w == 1 ? 'k' : 'v');
        emit_tile_copy(sb, c, c->bn, dc, kva, "at_dst", "at_j0 + at_r < at_nend", w == 1 ? p->k_ptr : p->v_ptr, kvoff,
                       p->kv_ss);
        tuner_sb_puts(sb, "};\n");
    }
    free(qoff);
    free(kvoff);
    return 0;
}

static int attn_mma_generate(const tuner_op *op, const tuner_target *t, const tuner_schedule *s, tuner_program *prog,
                             char **err)
{
    tuner__attn_problem p;
    int rc = tuner__attn_problem_init(op, &p, err);
    if (rc < 0)
        return rc;
    const tuner_arch *a = tuner__arch(t);
    attn_cfg c;
    if (!a || cfg_from(&p, s, &c) < 0 || !cfg_valid(&p, a, &c)) {
        if (err)
            *err = strdup("attention_mma: invalid schedule for this op and target");
        return -EINVAL;
    }
    const tuner_attention_dims *d = &p.d;
    const int D = (int)d->d;
    const char *T = tuner__ctype(p.dt);
    const char *mma = p.dt == TUNER_F16 ? "hd_mma_f16_16816" : "hd_mma_bf16_16816";
    const int qa = align_of(&op->inputs[0]) < 16 ? align_of(&op->inputs[0]) : 16;
    /* Packed, k and v start whole heads (D * 2 bytes, a multiple of 16) into qkv: its alignment. */
    const tuner_tensor *kin = p.packed ? &op->inputs[0] : &op->inputs[1], *vin = p.packed ? &op->inputs[0] : &op->inputs[2];
    int kva = align_of(kin) < align_of(vin) ? align_of(kin) : align_of(vin);
    if (kva > 16)
        kva = 16;
    /* Pairs of output elements go out as one 4-byte store where the output allows it. */
    const int nv = align_of(&op->output) >= 2 * tuner_dtype_size(p.out_dt) ? 2 : 1;
    const long long nqb = tuner__attn_cdiv(d->s, c.bm);
    char name[64];
    kernel_name(name, sizeof(name), &c);
    /* Causal: key j <= i + (Skv - S), a constant, or at launch from the sizes. */
    char coff[64];
    if (p.s_sym || p.skv_sym)
        snprintf(coff, sizeof(coff), "AT_SKV - AT_S");
    else
        snprintf(coff, sizeof(coff), "%lld", p.causal_off);
    /* A dynamic Skv whose range holds one key-tile count (a short range of short sequences:
     * 17..20 keys in 32-key tiles), not causal: the count is a constant and Skv's max is one too
     * (skv_hi), also compared with in the key tests. The loop and the prefetches past it then
     * compile away, and the columns of the last tile past the max are masked at compile time,
     * their QK^T products gone, as in a static op: 640 SASS instructions for 17..20 keys in
     * 64x32 tiles against 904 before and the static kernel's 576 at 17. On the H200 the count
     * read at launch had cost 2.74 against 2.35 us at 17 keys, the same schedule static
     * (bench/results/2026-11-30-h200-session11/b). Only then: elsewhere nothing compiles away,
     * and the constants would keep neighbouring ranges' identical kernels from merging. */
    long long skv_hi = 0, fixed_nt = 0;
    if (p.skv_sym && !p.causal) {
        long long lo, hi;
        sym_range(op, p.skv_sym, d->skv, &lo, &hi);
        if (tuner__attn_cdiv(lo, c.bn) == tuner__attn_cdiv(hi, c.bn)) {
            skv_hi = hi;
            fixed_nt = tuner__attn_cdiv(hi, c.bn);
        }
    }
    /* Keys past Skv need the per-element test unless every Skv is a multiple of block_n. */
    long long skv_step = d->skv;
    if (p.skv_sym) {
        skv_step = 1;
        for (int k = 0; k < op->n_dims; k++)
            if (p.skv_sym & (1u << k))
                skv_step *= op->dims[k].multiple_of;
    }

    tuner_sb sb;
    tuner_sb_init(&sb);
    tuner__prelude(&sb, t->sm);
    /* Coordinates are declared for every element whether or not a fused chain reads them. */
    tuner_sb_puts(&sb, "#pragma nv_diag_suppress 177\n");
    tuner_sb_puts(&sb, at_helpers);
    /* Into the exp2 domain: with a mask the scores are in natural units (below), without one
     * they stay unscaled and the scale is folded in here and into exp2's FMA. */
    const bool fold = !d->has_mask && p.scale > 0; /* the max commutes with a positive scale only */
    if (d->has_mask)
        tuner_sb_puts(&sb, "#define AT_LG(x) ((x) * 1.4426950408889634f)\n"
                           "#define AT_EXP2_ARG(x, mu) AT_LG((x) - (mu))\n");
    else if (!fold)
        tuner_sb_puts(&sb, "#define AT_LG(x) (x)\n#define AT_EXP2_ARG(x, mu) ((x) - (mu))\n");
    else {
        tuner_sb_puts(&sb, "#define AT_SL2 ");
        tuner__emit_float(&sb, p.scale * M_LOG2E);
        tuner_sb_puts(&sb, "\n#define AT_LG(x) ((x) * AT_SL2)\n"
                           "#define AT_EXP2_ARG(x, mu) fmaf((x), AT_SL2, -(mu) * AT_SL2)\n");
    }
    /* One block per SM as the minimum: with the thread count alone ptxas aims at a higher
     * occupancy and spills (D 64, 64 x 32 tiles: 96 registers and a spill, against 124 and none). */
    tuner_sb_printf(&sb, "extern \"C\" __global__ void __launch_bounds__(%d, 1) %s(", c.threads, name);
    tuner__attn_emit_params(&sb, &p);
    tuner__emit_dim_params(&sb, op);
    tuner_sb_puts(&sb, ")\n{\n");
    tuner_sb_printf(&sb,
                    "constexpr int AT_BM = %d, AT_BN = %d, AT_D = %d, AT_MI = %d, AT_ST = %d;\n"
                    "constexpr int AT_DC = AT_D / 8, AT_DK = AT_D / 16, AT_RB = %d, AT_SWZ = %d;\n",
                    c.bm, c.bn, D, c.mi, c.stages, c.row_bytes, c.swizzle ? 1 : 0);
    if (p.s_sym || p.skv_sym) { /* the sequence lengths at launch (below 2^30: cfg_valid at max) */
        char se[96], ke[96];
        tuner_sb_printf(&sb, "const int AT_S = (int)%s, AT_SKV = (int)%s;\n", tuner__attn_size_expr(&p, 's', se, sizeof(se)),
                        tuner__attn_size_expr(&p, 'k', ke, sizeof(ke)));
        if (fixed_nt) /* checked at launch: a no-op that tells the compiler */
            tuner_sb_printf(&sb, "constexpr int AT_SKV_HI = %lld;\n__builtin_assume(AT_SKV <= AT_SKV_HI);\n", skv_hi);
    } else {
        tuner_sb_printf(&sb, "constexpr int AT_S = %lld, AT_SKV = %lld;\n", (long long)d->s, (long long)d->skv);
    }
    tuner_sb_puts(&sb, "extern __shared__ __attribute__((aligned(128))) unsigned char at_smem[];\n"
                       "const hd_u32 at_sq = hd_smem_addr(at_smem);\n"
                       "const int at_tid = threadIdx.x, at_lane = at_tid & 31, at_warp = at_tid >> 5;\n"
                       "const int at_g = at_lane >> 2, at_tq = at_lane & 3;\n");
    /* Causal: the last query blocks have the most keys; they go first. */
    tuner_sb_printf(&sb,
                    "const int at_qb = %s;\n"
                    "const int at_h = blockIdx.y, at_b = blockIdx.z, at_hk = at_h / %lld;\n"
                    "const int at_m0 = at_qb * AT_BM, at_wr = at_warp * (AT_MI * 16);\n",
                    p.causal ? "(int)(gridDim.x - 1 - blockIdx.x)" : "(int)blockIdx.x", (long long)d->group);
    if (p.causal)
        tuner_sb_printf(&sb,
                        "const int at_nend = max(0, min(AT_SKV, min(at_m0 + AT_BM, AT_S) - 1 + (%s) + 1));\n",
                        coff);
    else
        tuner_sb_puts(&sb, "const int at_nend = AT_SKV;\n");
    if (fixed_nt)
        tuner_sb_printf(&sb, "const int at_nt = %lld;\n", fixed_nt);
    else
        tuner_sb_puts(&sb, "const int at_nt = (at_nend + AT_BN - 1) / AT_BN;\n");
    /* Byte offset of chunk c of row r in a shared tile. */
    if (c.swizzle)
        tuner_sb_puts(&sb, "auto at_so = [](int r, int c) -> hd_u32 { return (hd_u32)(r * AT_RB + ((c ^ (r & 7)) << 4)); };\n");
    else
        tuner_sb_puts(&sb, "auto at_so = [](int r, int c) -> hd_u32 { return (hd_u32)(r * AT_RB + (c << 4)); };\n");
    /* Ring slot k: K tile then V tile, after the Q tile. */
    tuner_sb_puts(&sb, "auto at_sk = [&](int k) -> hd_u32 { return at_sq + AT_BM * AT_RB + k * (2 * AT_BN * AT_RB); };\n");

    if (emit_loaders(&sb, &p, &c, qa, kva) < 0) {
        free(tuner_sb_take(&sb));
        return -ENOMEM;
    }

    /* Lane parts of the ldmatrix row addresses: A (Q) rows lane % 16, chunk lane / 16; B from K
     * (n-rows, k contiguous) rows lane % 8 + 8 (lane / 16), chunk (lane / 8) % 2; B from V
     * (k-rows, n contiguous, .trans) rows lane % 8 + 8 ((lane / 8) % 2), chunk lane / 16. */
    tuner_sb_puts(&sb,
                  "const int at_ar = at_lane & 15, at_ac = at_lane >> 4;\n"
                  "const int at_kr = (at_lane & 7) + ((at_lane >> 4) << 3), at_kc = (at_lane >> 3) & 1;\n"
                  "const int at_vr = (at_lane & 7) + (((at_lane >> 3) & 1) << 3), at_vc = at_lane >> 4;\n");

    /* Prologue: Q (its own commit group), then K and V of tiles 0 .. stages - 2. */
    tuner_sb_puts(&sb,
                  "at_load_q();\nhd_cp_async_commit();\n"
                  "#pragma unroll\nfor (int at_t = 0; at_t < AT_ST - 1; at_t++) {\n"
                  "if (at_t < at_nt) at_load_k(at_t, at_sk(at_t));\nhd_cp_async_commit();\n"
                  "if (at_t < at_nt) at_load_v(at_t, at_sk(at_t) + AT_BN * AT_RB);\nhd_cp_async_commit();\n}\n");
    tuner_sb_puts(&sb,
                  "float at_o[AT_MI][AT_D / 8][4];\nfloat at_rm[AT_MI][2], at_rl[AT_MI][2];\n"
                  "#pragma unroll\nfor (int mt = 0; mt < AT_MI; mt++) {\n"
                  "#pragma unroll\nfor (int nd = 0; nd < AT_D / 8; nd++)\n"
                  "#pragma unroll\nfor (int e = 0; e < 4; e++) at_o[mt][nd][e] = 0.0f;\n"
                  "at_rm[mt][0] = at_rm[mt][1] = -HD_INF;\nat_rl[mt][0] = at_rl[mt][1] = 0.0f;\n}\n");
    if (c.qregs)
        tuner_sb_puts(&sb,
                      "hd_u32 at_qf[AT_MI][AT_DK][4];\n"
                      "hd_cp_async_wait<2 * (AT_ST - 1)>();\n__syncthreads();\n"
                      "#pragma unroll\nfor (int mt = 0; mt < AT_MI; mt++)\n"
                      "#pragma unroll\nfor (int ks = 0; ks < AT_DK; ks++)\n"
                      "at_ldsm4(at_qf[mt][ks], at_sq + (at_wr + mt * 16 + at_ar) * AT_RB + "
                      "(((2 * ks + at_ac) ^ (AT_SWZ ? at_ar & 7 : 0)) << 4));\n");

    /* The key loop. Groups: Q, then K_t, V_t per tile; before iteration t's first wait
     * 1 + 2 (stages - 1) + 2t groups were committed, so K_t (number 1 + 2t) has landed when at
     * most 2 stages - 3 are pending; V_t after this iteration's two commits when at most
     * 2 stages - 2 are. The slot refilled in iteration t, (t - 1) % stages, was last read before
     * the first barrier of iteration t. */
    tuner_sb_puts(&sb,
                  "for (int at_t = 0; at_t < at_nt; at_t++) {\n"
                  "const hd_u32 at_k = at_sk(at_t % AT_ST), at_v = at_k + AT_BN * AT_RB;\n"
                  "hd_cp_async_wait<2 * AT_ST - 3>();\n__syncthreads();\n"
                  "{\nconst int at_tn = at_t + AT_ST - 1;\nconst hd_u32 at_w = at_sk(at_tn % AT_ST);\n"
                  "if (at_tn < at_nt) at_load_k(at_tn, at_w);\nhd_cp_async_commit();\n"
                  "if (at_tn < at_nt) at_load_v(at_tn, at_w + AT_BN * AT_RB);\nhd_cp_async_commit();\n}\n");
    /* S = Q K^T. */
    tuner_sb_puts(&sb,
                  "float at_s[AT_MI][AT_BN / 8][4];\n"
                  "#pragma unroll\nfor (int mt = 0; mt < AT_MI; mt++)\n"
                  "#pragma unroll\nfor (int nb = 0; nb < AT_BN / 8; nb++)\n"
                  "#pragma unroll\nfor (int e = 0; e < 4; e++) at_s[mt][nb][e] = 0.0f;\n"
                  "#pragma unroll\nfor (int ks = 0; ks < AT_DK; ks++) {\n");
    if (!c.qregs)
        tuner_sb_puts(&sb, "hd_u32 at_qk[AT_MI][4];\n"
                           "#pragma unroll\nfor (int mt = 0; mt < AT_MI; mt++)\n"
                           "at_ldsm4(at_qk[mt], at_sq + (at_wr + mt * 16 + at_ar) * AT_RB + "
                           "(((2 * ks + at_ac) ^ (AT_SWZ ? at_ar & 7 : 0)) << 4));\n");
    tuner_sb_printf(&sb,
                    "#pragma unroll\nfor (int np = 0; np < AT_BN / 16; np++) {\n"
                    "hd_u32 at_kb[4];\n"
                    "at_ldsm4(at_kb, at_k + (np * 16 + at_kr) * AT_RB + (((2 * ks + at_kc) ^ (AT_SWZ ? at_kr & 7 : 0)) << 4));\n"
                    "#pragma unroll\nfor (int mt = 0; mt < AT_MI; mt++) {\n"
                    "%s(at_s[mt][2 * np], %s, at_kb);\n%s(at_s[mt][2 * np + 1], %s, at_kb + 2);\n}\n}\n}\n",
                    mma, c.qregs ? "at_qf[mt][ks]" : "at_qk[mt]", mma, c.qregs ? "at_qf[mt][ks]" : "at_qk[mt]");

    /* The scale and the additive mask, then -inf for keys the row may not see. */
    tuner_sb_puts(&sb, "const int at_n0 = at_t * AT_BN;\n");
    /* Without a mask the scores stay unscaled: the row max is taken on them and each exp2 gets
     * score * scale * log2(e) - max from one FMA (FlashAttention's folding: a multiply and a
     * subtract less per score). With one they are scaled into natural units and the mask added;
     * their difference to the maximum is scaled by log2(e) after the subtraction: a mask of
     * finfo(f32).min (-3.4e38) would overflow to -inf times log2(e) and turn a row that PyTorch
     * averages uniformly into an empty one. */
    if (!fold) {
        tuner_sb_puts(&sb, "#pragma unroll\nfor (int mt = 0; mt < AT_MI; mt++)\n"
                           "#pragma unroll\nfor (int nb = 0; nb < AT_BN / 8; nb++)\n"
                           "#pragma unroll\nfor (int e = 0; e < 4; e++) {\n"
                           "const int at_i = at_m0 + at_wr + mt * 16 + (e >> 1) * 8 + at_g;\n"
                           "const int at_j = at_n0 + nb * 8 + 2 * at_tq + (e & 1);\n"
                           "(void)at_i;\n(void)at_j;\n");
        tuner_sb_puts(&sb, "float at_x = at_s[mt][nb][e] * ");
        tuner__emit_float(&sb, d->has_mask ? p.scale : p.scale * M_LOG2E);
        tuner_sb_puts(&sb, ";\n");
    }
    if (d->has_mask) {
        char *mv = tuner__attn_mask_value(&p, "at_b", "at_h", "at_i", "at_j");
        if (!mv) {
            free(tuner_sb_take(&sb));
            return -ENOMEM;
        }
        tuner_sb_printf(&sb, "if (at_i < AT_S && %sat_j < AT_SKV) at_x += %s;\n", fixed_nt ? "at_j < AT_SKV_HI && " : "", mv);
        free(mv);
    }
    if (!fold)
        tuner_sb_puts(&sb, "at_s[mt][nb][e] = at_x;\n}\n");
    /* Only tiles past Skv or across the diagonal need the per-element test. */
    char cond[256] = "";
    if (skv_step % c.bn)
        snprintf(cond, sizeof(cond), "%sat_n0 + AT_BN > AT_SKV", fixed_nt ? "at_n0 + AT_BN > AT_SKV_HI || " : "");
    if (p.causal) {
        size_t l = strlen(cond);
        snprintf(cond + l, sizeof(cond) - l, "%sat_n0 + AT_BN - 1 > at_m0 + (%s)", l ? " || " : "", coff);
    }
    if (cond[0]) {
        tuner_sb_printf(&sb, "if (%s) {\n", cond);
        tuner_sb_puts(&sb, "#pragma unroll\nfor (int mt = 0; mt < AT_MI; mt++)\n"
                           "#pragma unroll\nfor (int nb = 0; nb < AT_BN / 8; nb++)\n"
                           "#pragma unroll\nfor (int e = 0; e < 4; e++) {\n"
                           "const int at_i = at_m0 + at_wr + mt * 16 + (e >> 1) * 8 + at_g;\n"
                           "const int at_j = at_n0 + nb * 8 + 2 * at_tq + (e & 1);\n"
                           "(void)at_i;\n");
        tuner_sb_printf(&sb, "if (%sat_j >= AT_SKV", fixed_nt ? "at_j >= AT_SKV_HI || " : "");
        if (p.causal)
            tuner_sb_printf(&sb, " || at_j > at_i + (%s)", coff);
        tuner_sb_puts(&sb, ") at_s[mt][nb][e] = -HD_INF;\n}\n}\n");
    }

    /* Online softmax: rows g (e 0, 1) and g + 8 (e 2, 3) of each m16 tile; the four lanes of a
     * quad hold one row. */
    tuner_sb_puts(&sb,
                  "#pragma unroll\nfor (int mt = 0; mt < AT_MI; mt++)\n"
                  "#pragma unroll\nfor (int hr = 0; hr < 2; hr++) {\n"
                  "float at_mx = -HD_INF;\n"
                  "#pragma unroll\nfor (int nb = 0; nb < AT_BN / 8; nb++) "
                  "at_mx = fmaxf(at_mx, fmaxf(at_s[mt][nb][2 * hr], at_s[mt][nb][2 * hr + 1]));\n"
                  "at_mx = fmaxf(at_mx, __shfl_xor_sync(0xffffffffu, at_mx, 1));\n"
                  "at_mx = fmaxf(at_mx, __shfl_xor_sync(0xffffffffu, at_mx, 2));\n"
                  "const float at_mn = fmaxf(at_rm[mt][hr], at_mx);\n"
                  /* A row with no key yet: exp2(-inf - 0) = 0 rather than exp2(-inf - -inf). */
                  "const float at_mu = at_mn == -HD_INF ? 0.0f : at_mn;\n"
                  "const float at_al = at_exp2(AT_LG(at_rm[mt][hr] - at_mu));\n"
                  "at_rm[mt][hr] = at_mn;\n"
                  "float at_sum = 0.0f;\n"
                  "#pragma unroll\nfor (int nb = 0; nb < AT_BN / 8; nb++)\n"
                  "#pragma unroll\nfor (int e = 0; e < 2; e++) {\n"
                  "const float at_pv = at_exp2(AT_EXP2_ARG(at_s[mt][nb][2 * hr + e], at_mu));\n"
                  "at_s[mt][nb][2 * hr + e] = at_pv;\nat_sum += at_pv;\n}\n"
                  "at_rl[mt][hr] = at_rl[mt][hr] * at_al + at_sum;\n"
                  "#pragma unroll\nfor (int nd = 0; nd < AT_D / 8; nd++) {\n"
                  "at_o[mt][nd][2 * hr] *= at_al;\nat_o[mt][nd][2 * hr + 1] *= at_al;\n}\n}\n");

    /* O += P V, P from the score registers. */
    tuner_sb_printf(&sb,
                    "hd_cp_async_wait<2 * AT_ST - 2>();\n__syncthreads();\n"
                    "#pragma unroll\nfor (int kk = 0; kk < AT_BN / 16; kk++) {\n"
                    "hd_u32 at_pf[AT_MI][4];\n"
                    "#pragma unroll\nfor (int mt = 0; mt < AT_MI; mt++) {\n"
                    "at_pf[mt][0] = hd_pack2<%s>(at_s[mt][2 * kk][0], at_s[mt][2 * kk][1]);\n"
                    "at_pf[mt][1] = hd_pack2<%s>(at_s[mt][2 * kk][2], at_s[mt][2 * kk][3]);\n"
                    "at_pf[mt][2] = hd_pack2<%s>(at_s[mt][2 * kk + 1][0], at_s[mt][2 * kk + 1][1]);\n"
                    "at_pf[mt][3] = hd_pack2<%s>(at_s[mt][2 * kk + 1][2], at_s[mt][2 * kk + 1][3]);\n}\n"
                    "#pragma unroll\nfor (int dp = 0; dp < AT_DK; dp++) {\n"
                    "hd_u32 at_vb[4];\n"
                    "at_ldsm4t(at_vb, at_v + (kk * 16 + at_vr) * AT_RB + (((2 * dp + at_vc) ^ (AT_SWZ ? at_vr & 7 : 0)) << 4));\n"
                    "#pragma unroll\nfor (int mt = 0; mt < AT_MI; mt++) {\n"
                    "%s(at_o[mt][2 * dp], at_pf[mt], at_vb);\n%s(at_o[mt][2 * dp + 1], at_pf[mt], at_vb + 2);\n}\n}\n}\n"
                    "}\nhd_cp_async_wait_all();\n",
                    T, T, T, T, mma, mma);

    /* O / l and the stores. */
    tuner_sb_puts(&sb,
                  "#pragma unroll\nfor (int mt = 0; mt < AT_MI; mt++)\n"
                  "#pragma unroll\nfor (int hr = 0; hr < 2; hr++) {\n"
                  "float at_l = at_rl[mt][hr];\n"
                  "at_l += __shfl_xor_sync(0xffffffffu, at_l, 1);\n"
                  "at_l += __shfl_xor_sync(0xffffffffu, at_l, 2);\n"
                  /* No key kept: 0. (A NaN sum stays NaN.) */
                  "const float at_inv = at_l == 0.0f ? 0.0f : 1.0f / at_l;\n"
                  "const int at_i = at_m0 + at_wr + mt * 16 + hr * 8 + at_g;\n"
                  "if (at_i < AT_S) {\n"
                  "#pragma unroll\nfor (int nd = 0; nd < AT_D / 8; nd++) {\n"
                  "const int at_c = nd * 8 + 2 * at_tq;\n"
                  "const float at_v0 = at_o[mt][nd][2 * hr] * at_inv, at_v1 = at_o[mt][nd][2 * hr + 1] * at_inv;\n");
    if (nv == 2) {
        const char *vars[2] = {"at_v0", "at_v1"};
        tuner__attn_emit_store(&sb, &p, "at_b", "at_h", "at_i", "at_c", vars, 2);
    } else {
        const char *v0[1] = {"at_v0"}, *v1[1] = {"at_v1"};
        tuner__attn_emit_store(&sb, &p, "at_b", "at_h", "at_i", "at_c", v0, 1);
        tuner__attn_emit_store(&sb, &p, "at_b", "at_h", "at_i", "at_c + 1", v1, 1);
    }
    tuner_sb_puts(&sb, "}\n}\n}\n}\n");

    prog->source = tuner_sb_take(&sb);
    if (!prog->source)
        return -ENOMEM;
    prog->output_dtype = p.out_dt;
    tuner_launch *l = &prog->kernels[0];
    memset(l, 0, sizeof(*l));
    snprintf(l->name, sizeof(l->name), "%s", name);
    l->grid[0] = (unsigned)nqb;
    l->grid[1] = (unsigned)d->hq;
    l->grid[2] = (unsigned)d->b;
    l->block[0] = (unsigned)c.threads;
    l->block[1] = l->block[2] = 1;
    l->shared_bytes = (unsigned)c.smem;
    tuner__launch_args(l, op);
    prog->n_kernels = 1;
    if (tuner_op_is_dynamic(op)) {
        /* Query blocks over the launch's S, and its batch; the dims after the buffers. */
        int r = tuner__launch_dim_args(l, op);
        if (r == 0 && p.s_sym)
            r = tuner__grid_rule(l, 0, op, p.s_sym, 1, c.bm, 1, 0);
        if (r == 0 && p.b_sym)
            r = tuner__grid_rule(l, 2, op, p.b_sym, 1, 1, 1, 0);
        if (r < 0) {
            if (err)
                *err = strdup("attention_mma: the launch's dims arguments or grid rules do not fit the op's sizes");
            return r;
        }
    }
    return 0;
}

/* ---- space, cost, default ---- */

#define ATTN_MMA_SPACE_SIG                                                                          \
    "attention_mma v1: block_m{64,128} block_n{32,64,128} warps{4,8} (>=16 rows each) stages{2,3} " \
    "q_regs{0,1}; smem (block_m + 2 stages block_n) rows of D*2 (+16 for D 80/96) <= max; "          \
    "regs o+q+1.5s(+0.5s mask)+8mi+48 (+12, +40 at 4 warps on sm_100) <= 250"

static const int bm_values[] = {128, 64};
static const int bn_values[] = {64, 128, 32};
static const int warps_values[] = {8, 4};
static const int stages_values[] = {2, 3};

static const char *const param_names[5] = {"block_m", "block_n", "warps", "stages", "q_regs"};

static void set_params(tuner_schedule *s, int bm, int bn, int warps, int stages, int qregs)
{
    const int values[5] = {bm, bn, warps, stages, qregs};
    tuner__schedule_params(s, 5, param_names, values);
}

static bool schedule_ok(const tuner__attn_problem *p, const tuner_arch *a, const tuner_schedule *s)
{
    attn_cfg c;
    return cfg_from(p, s, &c) == 0 && cfg_valid(p, a, &c);
}

/* tune:"none": 128 query rows on 8 warps with Q held in registers up to D 128 (FlashAttention-2's
 * forward tiles), 64 rows on 4 warps re-reading Q for D 256 (the register file holds the
 * 64 x 256 fp32 accumulators and one score tile, not Q's fragments as well); 64 keys per tile
 * and a 2-deep ring, or 32 keys where 64 do not fit shared memory (sm_86/89/120 at D 256);
 * D 256 on sm_100, whose 4-warp blocks spill, 128 x 32 on 8 warps. */
static int attn_mma_preferred(const tuner_op *op, const tuner_target *t, tuner_schedule *ret)
{
    tuner__attn_problem p;
    const tuner_arch *a = tuner__arch(t);
    if (!a || tuner__attn_problem_init(op, &p, NULL) < 0)
        return -ENOENT;
    const bool big = p.d.d > 128;
    /* block_m, block_n, warps in order of preference. */
    static const int small_d[][3] = {{128, 64, 8}, {128, 32, 8}};
    static const int big_d[][3] = {{64, 64, 4}, {64, 32, 4}, {128, 32, 8}};
    const int (*prefs)[3] = big ? big_d : small_d;
    const size_t n = big ? sizeof(big_d) / sizeof(big_d[0]) : sizeof(small_d) / sizeof(small_d[0]);
    for (size_t i = 0; i < n; i++) {
        tuner_schedule s = {.template_name = "attention_mma"};
        set_params(&s, prefs[i][0], prefs[i][1], prefs[i][2], 2, big ? 0 : 1);
        if (schedule_ok(&p, a, &s)) {
            *ret = s;
            return 0;
        }
    }
    return -ENOENT;
}

static int attn_mma_enumerate(const tuner_op *op, const tuner_target *t, tuner_schedule **items, size_t *n)
{
    tuner__attn_problem p;
    const tuner_arch *a = tuner__arch(t);
    if (!a || tuner__attn_problem_init(op, &p, NULL) < 0)
        return 0;
    for (size_t i = 0; i < sizeof(bm_values) / sizeof(bm_values[0]); i++)
        for (size_t w = 0; w < sizeof(warps_values) / sizeof(warps_values[0]); w++)
            for (size_t j = 0; j < sizeof(bn_values) / sizeof(bn_values[0]); j++)
                for (size_t k = 0; k < sizeof(stages_values) / sizeof(stages_values[0]); k++)
                    for (int q = 1; q >= 0; q--) {
                        const int values[5] = {bm_values[i], bn_values[j], warps_values[w], stages_values[k], q};
                        tuner_schedule s = {.template_name = "attention_mma"};
                        tuner__schedule_params(&s, 5, param_names, values);
                        if (!schedule_ok(&p, a, &s))
                            continue;
                        int rc = tuner__space_push(items, n, "attention_mma", 5, param_names, values);
                        if (rc < 0)
                            return rc;
                    }
    return 0;
}

/* Blocks of one configuration resident on an SM. */
static int blocks_per_sm(const tuner_arch *a, const attn_cfg *c)
{
    int bps = a->max_threads_per_sm / c->threads;
    const int regs = (c->regs + 7) / 8 * 8;
    const int by_regs = a->regs_per_sm / (c->threads * regs);
    if (by_regs < bps)
        bps = by_regs;
    const int by_smem = a->max_smem_per_sm / c->smem;
    if (by_smem < bps)
        bps = by_smem;
    return bps < 1 ? 1 : bps;
}

/* Predicted time: the tensor-core work of the whole tiles computed (causal blocks stop at their
 * diagonal) at mma.sync's rate times efficiencies of the tile shape, occupancy and waves; the
 * softmax (one ex2 on the SFU and a handful of ALU instructions per score), which overlaps the
 * mma of other warps only in part; memory: every input once from DRAM, K and V once per query
 * block from L2. */
static double attn_mma_predict(const tuner_op *op, const tuner_target *t, const tuner_schedule *s)
{
    tuner__attn_problem p;
    const tuner_arch *a = tuner__arch(t);
    attn_cfg c;
    if (!a || tuner__attn_problem_init(op, &p, NULL) < 0 || cfg_from(&p, s, &c) < 0)
        return 1e12;
    const tuner_attention_dims *d = &p.d;
    const double bh = (double)d->b * (double)d->hq;
    const long long nqb = tuner__attn_cdiv(d->s, c.bm);
    double tiles = 0; /* key tiles visited, summed over the query blocks of one (b, h) */
    if (!p.causal)
        tiles = (double)nqb * (double)tuner__attn_cdiv(d->skv, c.bn);
    else
        for (long long qb = 0; qb < nqb; qb++)
            tiles += (double)tuner__attn_cdiv(key_end(&p, qb * c.bm, c.bm), c.bn);
    const double pairs = bh * tiles * c.bm * c.bn; /* scores computed, padding included */
    const double flops = 4.0 * pairs * (double)d->d;

    /* mma.sync attention reaches about 0.6 of the mma rate at its best (FlashAttention-2 on an
     * A100: ~190 of 312 TFLOPS at D 128); less when each K/V fragment feeds one m16 tile only,
     * with short key tiles (a barrier pair and a softmax pass per tile), and when Q's fragments
     * are re-read from shared memory every tile. */
    double eff = 0.62;
    eff *= c.mi >= 2 ? 1.0 : 0.93;
    eff *= c.bn == 32 ? 0.84 : c.bn == 64 ? 0.97 : 1.0;
    eff *= c.qregs ? 1.0 : (d->d >= 256 ? 0.97 : 0.92);
    eff *= c.stages == 3 ? 1.02 : 1.0;
    const int bps = blocks_per_sm(a, &c);
    const double warps_per_sm = (double)bps * c.warps;
    eff *= fmin(1.0, 0.55 + 0.45 * warps_per_sm / 8.0);
    const double slots = (double)bps * a->sm_count, blocks = (double)nqb * bh;
    const double waves = ceil(blocks / slots);
    double wave_eff = blocks / (waves * slots);
    if (p.causal) /* longest blocks first: the tail is made of short blocks */
        wave_eff = 0.5 * (1.0 + wave_eff);
    const double tc_us = flops / (a->tc_f16_tflops * 1e6 * eff * wave_eff);
    /* SFU: 16 ex2 per clock per SM; ALU: ~6 instructions per score on 128 lanes; ~1.6 GHz. */
    const double used_sms = fmin((double)a->sm_count, blocks);
    const double sm_us = pairs * (1.0 / 16.0 + 6.0 / 128.0) / (used_sms * 1.6e3);
    const double compute = fmax(tc_us, sm_us) + 0.35 * fmin(tc_us, sm_us);
    /* Memory. */
    const double kv_l2 = bh * tiles * c.bn * (double)d->d * 2.0 * 2.0;
    const double mem = tuner__attn_min_bytes(&p) / (a->dram_gbps * 1e3) + kv_l2 / (a->dram_gbps * 1e3 * 3.0);
    return 3.0 + fmax(compute, mem) + 0.1 * fmin(compute, mem);
}

const tuner_template tuner__attn_mma = {
    .name = "attention_mma",
    .space_signature = ATTN_MMA_SPACE_SIG,
    .applies = attn_mma_applies,
    .enumerate = attn_mma_enumerate,
    .generate = attn_mma_generate,
    .predict_us = attn_mma_predict,
    .preferred = attn_mma_preferred,
    .default_rank = TUNER_RANK_TENSOR_CORE,
    .dynamic_dims = true,
};
