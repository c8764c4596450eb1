/* tuner/attn/wgmma.c - attention_wgmma: fused attention (the ATTENTION op of op/op.h) on Hopper's
 * warpgroup tensor cores (sm_90a), FlashAttention-3's scheme; the mbarrier / TMA / wgmma
 * machinery is tuner/hopper.h's, shared with matmul_wgmma.
 *
 * One launch, persistent: a grid of min(work items, SMs) blocks walks the work items (batch,
 * query head, query block of block_m = 64 * consumers rows), gridDim.x apart; non-causal items
 * query block by query block of one head (neighbours share the head's K and V in L2), causal ones
 * longest first (the last query blocks see the most keys under bottom-right alignment), so the
 * short items fill the end of the waves. Warp-specialised warpgroups:
 *   - warpgroup 0, the producer (setmaxnreg.dec with 2 or 3 consumers): one thread loads, per
 *     work item, the Q tile (block_m rows x D) once, then the item's K and V tiles (block_n keys
 *     x D each) into a `stages`-deep ring, each stage with a `full` mbarrier armed with its byte
 *     count (expect_tx) and an `empty` one. Tiles are 128-byte-swizzled boxes of 64 columns x
 *     rows: D = 64 is one box, 80, 96 and 128 two (the copy engine zero-fills columns past D),
 *     256 four. Rows past S or Skv are zero-filled too. The Q buffer has a full/empty pair of its
 *     own: the next item's Q is loaded once every consumer warp's last Q.K^T of the item
 *     completed. A mask constant along the query rows (a key-padding mask [B, 1, 1, Skv], or
 *     [Skv]) is staged beside the ring: for stage s, producer warp 1 + s % 3 loads the tile's
 *     block_n values of the item's (batch, head) row, converts them to the log2 domain (-inf
 *     past Skv), waits for the stage's release, writes them to the stage's slot (static shared
 *     memory, fp32) and arrives on the stage's full barrier, whose count takes its 32 lanes.
 *     Read from global memory by every consumer thread after its Q.K^T, the same mask made
 *     BERT's [8,12,512,64] 3.1x slower (H200, session 18: 77 us against 24.4).
 *   - warpgroups 1..consumers (setmaxnreg.inc) each own 64 query rows of the item. Per K/V
 *     stage: S = Q.K^T by wgmma m64n{block_n}k16, both operands K-major descriptors (Q and K
 *     rows are contiguous along D), D / 16 k-steps, the first with scale-d 0 (no zeroing); the
 *     online softmax on the accumulator fragment (thread: rows lane/4 and lane/4 + 8 of its
 *     warp's 16, two adjacent columns per 8): logits scaled into the log2 domain (scale * log2 e
 *     folded, the mask times log2 e added: from the stage's slot, or a mask that varies along
 *     the rows read from global memory), keys >= Skv and causally hidden keys set to -inf on
 *     the tiles that need it (the last tile, diagonal tiles; tiles above the diagonal are never
 *     loaded), row max by two quad shuffles, exp2 against the max or 0 while the max is still
 *     -inf (so a row without keys has p = 0, l = 0 and no NaN), O and the per-thread partial row
 *     sum l rescaled; then P, packed to f16/bf16 pairs, is already in wgmma's register-A fragment
 *     layout, and O += P.V is wgmma with A from registers and B = the V tile read MN-major (V
 *     rows are contiguous along D: the transpose bit), block_n / 16 k-steps of N = D rounded up
 *     to 64. The stage goes back to the producer (one arrive per consumer warp) once that
 *     wgmma group completed.
 *   - the epilogue: l summed over the quad, O / l (0 where l is 0), the fused chain applied and
 *     rows < S, columns < D stored from registers (tuner__attn_emit_store).
 * With `overlap` (FA3's intra-warpgroup pipelining) tile n's Q.K^T is issued together with
 * tile n - 1's P.V (two wgmma groups), wait_group<1> waits for the former only, and tile n's
 * softmax runs while the tensor cores do P.V; O and the previous P, P.V's registers, are touched
 * only after wait_group<0> (then O is rescaled by tile n's factor and tile n's P packed), and
 * the last tile's P.V follows the loop. Without it each tile's Q.K^T, softmax and P.V run in
 * turn. Either way two or three consumer warpgroups interleave on the SM's tensor and
 * special-function units.
 *
 * With `pingpong` (two consumers) the consumers take turns issuing their wgmma groups (named
 * barriers 1 and 2: consumer c waits at 1 + c, hands over at 2 - c; consumer 1 hands the first
 * turn over before its first item, consumer 0 absorbs the last hand-over at the end), so that
 * one's softmax runs while the other's GEMMs hold the tensor cores (FA3's inter-warpgroup
 * pingpong). Both consumers walk the same items and tiles, so their turns pair up.
 *
 * With `stages` 1 (no overlap) the ring is one K slot and one V slot, each with a full and an
 * empty barrier of its own: K goes back to the producer once Q.K^T completed, V once P.V did, so
 * that tile n + 1's K loads during tile n's softmax and P.V, and its V during its Q.K^T and
 * softmax; a staged mask's slot, read by the softmax after K's release, waits for V's. That is
 * what lets 128 keys a tile fit at D = 256 (Q 64 KiB, K and V 64 KiB each, where two whole
 * stages would need 320), cuDNN's tile there. Without overlap P is packed into S's registers
 * (S is dead once P is made; P.V's wait comes before the next Q.K^T writes them).
 *
 * Schedule: block_n (64..256, keys per tile), consumers (1..3: block_m 64..192), stages (1..4;
 * 1 without overlap), overlap (0, 1), pingpong (0, 1; two consumers); valid where the ring, the
 * Q tile and 1 KiB of alignment slack fit the block's shared memory and O (D rounded up to 64,
 * halved, fp32), S (block_n / 2) and, with overlap, P (block_n / 4) plus 32 (56 with a mask) fit
 * a consumer thread's registers:
 * 240 with one consumer (256 threads), 232 with two and 152 with three after setmaxnreg (the
 * producer keeps 40). ptxas -v reports the kernel at its launch bound (168 with two consumers)
 * but allocates the consumers' code to the setmaxnreg budget.
 *
 * TMA maps (kernel parameters by value, encoded by the launcher from tuner_launch.maps): bhsd q
 * (D, S, Hq, B), k and v (D, Skv, Hkv, B), boxes (64, rows, 1, 1); bshd q (D, Hq, S, B), k and v
 * (D, Hkv, Skv, B), boxes (64, 1, rows, 1): either way a box lands as rows x 128 bytes. Layout
 * bshd_packed: all three map the whole qkv (D, Hq + 2 Hkv, S, B), boxes (64, 1, rows, 1), so a
 * box never reaches past the tensor (columns past D are zero-filled, not the next head's), and k
 * and v are loaded at heads Hq + hk and Hq + Hkv + hk.
 *
 * A dynamic op (named dims on B, S and Skv; tuner__attn_dyn_ok: never on the heads or D) reads
 * S, Skv and B from the dims' parameters (aw_S, aw_Skv, aw_B after the buffers), and with them the
 * work items, each item's key tiles, the causal offset Skv - S and the row and key bounds; the
 * output's, the mask's and the epilogue's strides follow the sizes (tuner/attn/common.c). The
 * launcher encodes the tensor maps at the sizes (tuner_tmap.sym), which may only change a map's
 * dimensions, never its strides: a map whose rows are named is flattened - bshd (D, heads, B *
 * rows), bhsd (D, B * heads * rows) - its row coordinate aw_b's (and head's) first row plus the
 * tile's; a named B alone is the 4-d map's outermost dimension. A flattened tile past S or Skv
 * then reads the next head's or batch entry's rows, not zeros (only past the tensor's end
 * zeros): q rows past S are computed and not stored, and keys past Skv are -inf before the
 * softmax (P = 0 there), so that only a non-finite v element of a neighbouring head could reach
 * the output (0 * inf). The grid min(items, SMs) is a rule: exact where B or S is fixed (Hq * B *
 * ceil(S / block_m) or Hq * query blocks * B), else min(Hq * B * S, SMs), never fewer blocks than
 * items up to the SMs (a block that finds no item returns). The space is the one at the dims' max.
 *
 * Applies on sm_90a to what tuner__attn_supported accepts with 16-byte aligned q, k, v (TMA).
 */
#include <errno.h>
#include <malloc.h> /* malloc_usable_size */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/attn/attn.h"
#include "tuner/core.h"
#include "tuner/hopper.h"

/* Registers a consumer thread needs beside its O, S and P fragments (indices, descriptors,
 * softmax state). */
#define AW_REG_OVERHEAD 32
/* ... and beside them the mask's indexing. */
#define AW_MASK_REGS 24
/* Registers of the producer warpgroup when it gives some back (setmaxnreg). */
#define AW_PRODUCER_REGS 40
/* Threads of the producer warpgroup that stage one key tile of a row-broadcast mask: one warp of
 * warps 1..3, which take the tiles in turn (see the header). */
#define AW_MASK_THREADS 32
/* With one K and one V slot (stages 1), V's full and empty barriers: byte offsets past K's, which
 * sit where stage 0's full and empty ones do. */
#define AW_VFULL 16
#define AW_VEMPTY 24

typedef struct aw_cfg {
    int bn, consumers, stages;
    bool pingpong; /* the two consumers take turns issuing wgmma (named barriers) */
    bool overlap;  /* one tile's softmax beside the previous tile's P.V (FA3's intra-warpgroup
                    * pipelining) */
    bool sum_mma;  /* the row sums by wgmma: P times a column of ones beside P.V (see
                    * emit_softmax) */
    bool split;    /* stages 1: one K slot and one V slot, each with barriers of its own (K
                    * refilled once Q.K^T is done, V once P.V is) */
    bool p_in_s;   /* without overlap, P packed into S's registers (S is dead once P is made) */
    int bm;        /* 64 * consumers query rows per work item */
    int dp;        /* D rounded up to 64: the columns the tiles hold (and O's N) */
    int boxes;     /* dp / 64 */
    int ksteps;    /* D / 16: k16 steps of Q.K^T */
    int threads;
    int q_bytes, kv_bytes, stage_bytes; /* kv_bytes: one K (or V) tile */
    bool mask_staged; /* the mask does not vary along the query rows: staged per stage (header) */
    int mask_bytes;   /* the staged mask: block_n fp32 per stage, static shared memory */
    int smem;      /* dynamic: the ring, the Q tile and 1 KiB of alignment slack */
    int regs;      /* per consumer thread after setmaxnreg */
} aw_cfg;

static int aw_consumer_regs(int consumers)
{
    if (consumers == 1)
        return 240; /* 256 threads: no redistribution needed */
    return (65536 / 128 - AW_PRODUCER_REGS) / consumers / 8 * 8;
}

static int aw_static_bytes(const aw_cfg *c);

/* Whether the dynamic ring and Q tile, plus the static barriers and staged mask, fit: the
 * dynamic array's 1 KiB alignment pads the static part to a multiple of 1 KiB (ptxas -v: 1024
 * bytes for the barriers alone; a launch asking for more than the rest fails). */
static bool aw_smem_fits(const tuner_arch *a, const aw_cfg *c)
{
    return c->smem + (aw_static_bytes(c) + 1023) / 1024 * 1024 <= a->max_smem_per_block;
}

/* Whether the op's mask is staged per stage in shared memory: one that does not vary along the
 * query rows (a key-padding mask [B, 1, 1, Skv], or [Skv]; see the header). */
static bool aw_mask_staged(const tuner__attn_problem *p)
{
    return p->d.has_mask && p->m_st[2] == 0;
}

static int cfg_from(const tuner__attn_problem *p, const tuner_schedule *s, aw_cfg *c)
{
    memset(c, 0, sizeof(*c));
    c->bn = tuner_schedule_param(s, "block_n", 0);
    c->consumers = tuner_schedule_param(s, "consumers", 0);
    c->stages = tuner_schedule_param(s, "stages", 0);
    const int ov = tuner_schedule_param(s, "overlap", 0);
    if (ov != 0 && ov != 1)
        return -EINVAL;
    c->overlap = ov == 1;
    const int pp = tuner_schedule_param(s, "pingpong", 0);
    if ((pp != 0 && pp != 1) || (pp && tuner_schedule_param(s, "consumers", 0) != 2))
        return -EINVAL;
    c->pingpong = pp == 1;
    const int sm = tuner_schedule_param(s, "sum_mma", 0);
    if (sm != 0 && sm != 1)
        return -EINVAL;
    c->sum_mma = sm == 1;
    if (c->bn < 64 || c->bn > 256 || c->bn % 16 || c->consumers < 1 || c->consumers > 3 || c->stages < 1 ||
        c->stages > 4)
        return -EINVAL;
    /* One slot each for K and V pipelines only tile by tile: with overlap, tile n's Q.K^T waits
     * for a K load the producer can issue only after tile n - 1's P.V. */
    if (c->stages == 1 && c->overlap)
        return -EINVAL;
    c->split = c->stages == 1;
    c->p_in_s = !c->overlap;
    c->bm = 64 * c->consumers;
    c->dp = (int)((p->d.d + 63) / 64 * 64);
    c->boxes = c->dp / 64;
    c->ksteps = (int)(p->d.d / 16);
    c->threads = 128 * (1 + c->consumers);
    c->q_bytes = c->bm * c->dp * 2;
    c->kv_bytes = c->bn * c->dp * 2;
    c->stage_bytes = 2 * c->kv_bytes;
    c->mask_staged = aw_mask_staged(p);
    c->mask_bytes = c->mask_staged ? c->stages * c->bn * 4 : 0;
    /* The row sums' B operand: 1 KiB of ones after the Q tile (one 128-byte swizzle atom). */
    c->smem = c->stages * c->stage_bytes + c->q_bytes + (c->sum_mma ? 1024 : 0) + 1024;
    c->regs = aw_consumer_regs(c->consumers);
    return 0;
}

/* The ring's barriers: a full and an empty one per stage; with one slot each, K's pair then V's. */
static int aw_ring_bars(const aw_cfg *c)
{
    return c->split ? 4 : 2 * c->stages;
}

/* Static shared memory: the ring's barriers, Q's pair and the staged mask. */
static int aw_static_bytes(const aw_cfg *c)
{
    return 8 * (aw_ring_bars(c) + 2) + c->mask_bytes;
}

static bool cfg_valid(const tuner__attn_problem *p, const tuner_arch *a, const aw_cfg *c)
{
    /* O (dp / 2 fp32 per thread), S (bn / 2) and, with overlap, P (bn / 4 packed pairs: the
     * previous tile's, beside this tile's S) live at once; a mask read from global memory needs
     * more for its addressing (ptxas -v: 176 keys with two consumers spilled with one); a staged
     * one two registers for a moment. */
    const int overhead = AW_REG_OVERHEAD + (p->d.has_mask && !c->mask_staged ? AW_MASK_REGS : 0);
    if (c->dp / 2 + c->bn / 2 + (c->p_in_s ? 0 : c->bn / 4) + (c->sum_mma ? 4 : 0) + overhead > c->regs)
        return false;
    if (!aw_smem_fits(a, c))
        return false;
    return c->threads <= a->max_threads_per_block;
}

/* Whether attention_wgmma applies: sm_90a, a supported op, TMA-addressable q, k, v. */
static bool aw_problem(const tuner_op *op, const tuner_target *t, tuner__attn_problem *p)
{
    const tuner_arch *a = tuner__arch(t);
    if (!op || !a || !a->has_wgmma || t->sm != 90 || !t->arch_specific || !tuner__attn_supported(op) ||
        !tuner__attn_dyn_ok(op))
        return false;
    /* q, k and v (packed: qkv, whose k and v heads start D * 2 bytes apart, a multiple of 16) */
    for (int i = 0; i < (op->attrs.attention.packed ? 1 : 3); i++)
        if (op->inputs[i].align < 16)
            return false;
    if (tuner__attn_problem_init(op, p, NULL) < 0)
        return false;
    if (tuner_op_is_dynamic(op)) {
        /* At the dims' max: sequence lengths ints with room for a block past them, and a
         * flattened map's row coordinate (tuner__attn_tmap) an int32 of the copy instruction. */
        const tuner_attention_dims *d = &p->d;
        if (d->s > (1LL << 30) || d->skv > (1LL << 30))
            return false;
        const long long hq = p->bshd ? 1 : d->hq, hkv = p->bshd ? 1 : d->hkv;
        if (d->b * hq * d->s >= (1LL << 31) || d->b * hkv * d->skv >= (1LL << 31))
            return false;
    }
    return true;
}

static bool aw_applies(const tuner_op *op, const tuner_target *t)
{
    tuner__attn_problem p;
    return aw_problem(op, t, &p);
}

static void aw_param(tuner_schedule *s, const char *name, int value)
{
    if (s->n_params >= TUNER_MAX_PARAMS)
        return;
    s->params[s->n_params].name = name;
    s->params[s->n_params].value = value;
    s->n_params++;
}

static void aw_schedule(tuner_schedule *s, int bn, int consumers, int stages, int overlap, int pingpong, int sum_mma)
{
    memset(s, 0, sizeof(*s));
    s->template_name = "attention_wgmma";
    aw_param(s, "block_n", bn);
    aw_param(s, "consumers", consumers);
    aw_param(s, "stages", stages);
    aw_param(s, "overlap", overlap);
    aw_param(s, "pingpong", pingpong);
    if (sum_mma) /* absent reads as 0: the schedules before it keep their names */
        aw_param(s, "sum_mma", sum_mma);
}

/* Whether the row sums by wgmma (sum_mma) are offered: beside a staged mask, whose load and add
 * make the softmax's fp32 work the tile's bound (H200, session 20, kbench in two processes:
 * BERT's [8,12,512,64] with its [8,1,1,512] mask 23.5-23.7 us against 25.0-25.3 summing in
 * fp32). Without a mask the folded softmax is lighter, and the eight n8 wgmmas a tile lengthen
 * P.V's group, which the next tile's rescale waits for: slower in every case measured
 * ([8,16,2048,D]: D = 64 325-330 us against 315-318, D = 128 478-489 against 476, causal 341-342
 * against 330-340, D = 256 1012-1022 against 979-980; BERT without a mask 22.9 against 21.8-22.0). */
static int aw_sum_mma_offered(const tuner__attn_problem *p)
{
    return aw_mask_staged(p);
}

/* The tune:"none" pick by head dim: D <= 128 128 keys per tile with two consumers and a 3-deep
 * ring (H200, 4096 x 4096 hd128, 16 heads: 3 stages 630 TFLOP/s, 2 stages 419 - the ring is
 * 64 KiB a stage, and 2 leave the consumers waiting for loads: ncu showed 0.39 eligible warps per
 * scheduler; causal 478 against 385; bench/results/2026-11-29-h200-attention), the same at
 * D = 64 (session 18: [8,16,2048,64] 320-328 us at 128 keys, 335-338 at 192), D = 256 128 keys
 * in one K and one V slot (O alone is 128 registers, and P goes into S's) with two consumers in
 * pingpong, without the intra-warpgroup overlap (session 18: 1031 us against 1196 with it at
 * [8,16,2048,256]; session 21: 950 us against 999-1003 for 80 keys in two stages, 3492-3508
 * against 3662-3694 at [2,16,8192,256]; aw_predict says why); one consumer where S fits one
 * 64-row block; causal hd128 from 2k queries three consumers (below). */
static void aw_pick(const tuner__attn_problem *p, int *bn, int *consumers, int *stages, int *overlap, int *pingpong,
                    int *sum_mma)
{
    const long long d = p->d.d;
    *consumers = p->d.s <= 64 ? 1 : 2;
    *bn = 128;
    *stages = d == 256 ? 1 : 3;
    *overlap = d == 256 ? 0 : 1;
    *pingpong = d == 256 && *consumers == 2;
    *sum_mma = aw_sum_mma_offered(p);
    if (p->causal && d == 128 && p->d.s >= 2048) {
        /* Causal hd128 from 2k queries: 96 keys over three consumers, without overlap (session
         * 22: 2-10% ahead of the above at 2k-16k; aw_predict's causal_three). */
        *consumers = 3;
        *bn = 96;
        *overlap = 0;
        *pingpong = 0;
    }
}

static const int aw_block_ns[] = {64, 80, 96, 128, 176, 192, 256};

/* One K and one V slot (stages 1) are offered only for tiles that two whole stages cannot hold
 * beside the Q tile (D = 256 from 96 keys, wider tiles at smaller D): where two fit, the deeper
 * ring (and overlap) measured ahead (session 21: BERT's masked [8,12,512,64] 27.3 us in one slot
 * each against 23.5 for its pick), and every candidate costs tuning time. */
static bool aw_one_slot_needed(const tuner__attn_problem *p, const tuner_arch *a, const tuner_schedule *s)
{
    if (tuner_schedule_param(s, "stages", 0) != 1)
        return true;
    tuner_schedule two = *s;
    for (int i = 0; i < two.n_params; i++)
        if (!strcmp(two.params[i].name, "stages"))
            two.params[i].value = 2;
    aw_cfg c;
    return cfg_from(p, &two, &c) < 0 || !cfg_valid(p, a, &c);
}

static int aw_enumerate(const tuner_op *op, const tuner_target *t, tuner_schedule **items, size_t *n)
{
    tuner__attn_problem p;
    if (!aw_problem(op, t, &p))
        return 0;
    const tuner_arch *a = tuner__arch(t);
    int pbn, pc, pst, pov, ppp, psm;
    aw_pick(&p, &pbn, &pc, &pst, &pov, &ppp, &psm);
    for (int pass = 0; pass < 2; pass++)
        for (size_t bi = 0; bi < sizeof(aw_block_ns) / sizeof(aw_block_ns[0]); bi++)
            for (int cons = 1; cons <= 3; cons++)
                for (int st = 1; st <= 4; st++)
                for (int ov = 1; ov >= 0; ov--)
                for (int pp = 0; pp <= (cons == 2); pp++)
                for (int sm = 0; sm <= aw_sum_mma_offered(&p); sm++) {
                    const bool pref = aw_block_ns[bi] == pbn && cons == pc && st == pst && ov == pov && pp == ppp && sm == psm;
                    if (pref != (pass == 0))
                        continue;
                    tuner_schedule s;
                    aw_schedule(&s, aw_block_ns[bi], cons, st, ov, pp, sm);
                    aw_cfg c;
                    if (cfg_from(&p, &s, &c) < 0 || !cfg_valid(&p, a, &c) || !aw_one_slot_needed(&p, a, &s))
                        continue;
                    /* Grown by half, with the room from malloc_usable_size, as tuner__space_push
                     * does (tuner/space.c says why). */
                    tuner_schedule *grown = *items;
                    if (!grown || malloc_usable_size(grown) < (*n + 1) * sizeof(**items)) {
                        grown = realloc(*items, (*n + *n / 2 + 16) * sizeof(**items));
                        if (!grown)
                            return -ENOMEM;
                        *items = grown;
                    }
                    grown[*n] = s;
                    (*n)++;
                }
    return 0;
}

static int aw_preferred(const tuner_op *op, const tuner_target *t, tuner_schedule *ret)
{
    tuner__attn_problem p;
    if (!aw_problem(op, t, &p))
        return -ENOENT;
    int bn, cons, st, ov, pp, sm;
    aw_pick(&p, &bn, &cons, &st, &ov, &pp, &sm);
    tuner_schedule s;
    aw_schedule(&s, bn, cons, st, ov, pp, sm);
    ret->n_params = s.n_params;
    memcpy(ret->params, s.params, sizeof(s.params));
    return 0;
}

/* ---- cost model ---- */

/* Key tiles of work item query block mb (causal: up to the last row's last key). */
static long long aw_item_tiles(const tuner__attn_problem *p, const aw_cfg *c, long long mb)
{
    const long long nt = tuner__attn_cdiv(p->d.skv, c->bn);
    if (!p->causal)
        return nt;
    const long long m0 = mb * c->bm, rows_end = m0 + c->bm < p->d.s ? m0 + c->bm : p->d.s;
    const long long lim = rows_end - 1 + p->causal_off;
    if (lim < 0)
        return 0;
    return lim / c->bn + 1 < nt ? lim / c->bn + 1 : nt;
}

/* Per key tile a consumer warpgroup runs two GEMMs on the tensor cores (wgmma at 1.5x the
 * arch's mma.sync rate, as matmul_wgmma's model, at 0.78 of it) and the softmax: block_m x
 * block_n exp2 on the SM's MUFU (16 per clock, ~1.7 GHz) and a few fp32 operations each; with
 * overlap, or two or three consumers, the softmax hides behind GEMMs, else they add up. Items are dealt to min(items, SMs) blocks (causal longest first:
 * the busiest block gets about the mean, at least the longest item); each item pays its Q load
 * and the ring's fill. Bounded below by moving q, k, v, mask and output through DRAM once. */
static double aw_predict(const tuner_op *op, const tuner_target *t, const tuner_schedule *s)
{
    tuner__attn_problem p;
    const tuner_arch *a = tuner__arch(t);
    aw_cfg c;
    if (!a || !aw_problem(op, t, &p) || cfg_from(&p, s, &c) < 0)
        return 1e12;
    const double tc_rate = a->tc_f16_tflops * 1.5 * 1e6 / a->sm_count; /* flop per us per SM */
    const double exp_rate = 16.0 * 1.7e3;                               /* exp2 per us per SM */
    /* FlashAttention-3 reaches about three quarters of the dense wgmma peak at hd128 (H100):
     * the fragment traffic between the GEMMs costs issue slots the GEMM of a plain matmul has. */
    double eff = 0.78 * (c.bn >= 128 ? 1.0 : 0.85);
    eff *= c.dp > p.d.d ? (double)p.d.d / c.dp : 1.0; /* padded columns of O's GEMM */
    const double t_tc = 4.0 * c.bm * c.bn * (double)c.dp / (tc_rate * eff);
    /* The softmax: an exp2 per element on the MUFU, and about six fp32 operations (scale, max,
     * subtract, sum, rescale share, pack) on the 128 FMA lanes. */
    /* Wider than 128 keys at D = 64, where the softmax bounds the tile, it costs more per key
     * (H200, session 18, two consumers in pingpong, 3 stages: [8,16,2048,64] 320-328 us at 128
     * keys, 335-338 at 192, 356 at 176; BERT's [8,12,512,64] 22.3 and 25.1 at 128 and 192). */
    const double wide_softmax = p.d.d <= 64 && c.bn > 128 ? 1.12 : 1.0;
    /* A staged mask adds its load and add per element; sum_mma takes the row sum's add off
     * (aw_sum_mma_offered has the measurements). */
    const double fp32_ops = 6.0 + (c.mask_staged ? 1.0 : 0.0) - (c.sum_mma ? 1.0 : 0.0);
    const double t_exp = ((double)c.bm * c.bn / exp_rate + (double)c.bm * c.bn * fp32_ops / (128.0 * 1.7e3)) * wide_softmax;
    /* Overlap, or a second consumer, hides the softmax behind GEMMs. */
    /* Every key tile also pays a fixed cost whatever its width: the full-barrier wait, the
     * wgmma fence, commit and wait round trips, the row max/sum shuffles and the stage release.
     * Fitted on the H200 at hd64 (b8 s2048, where the softmax bounds both widths): 0.81 us per
     * 64-key tile, 1.35 per 128-key tile a SM - 0.27 us plus 0.0084 per key
     * (bench/results/2026-11-29-h200-attention, run3). Without it the model saw 64- and 128-key
     * tiles as equal there and picked 64 (0.76x of the peer; 192 keys ran at 0.96x, session 8).
     * At hd256 too: with two consumers there, 80 keys a tile (26 tiles over 2048 keys, the last
     * part empty) ran 2% ahead of 64 (32 tiles): 1009 / 3711 us against 1031 / 3786 (session 18,
     * every candidate), 1001-1024 against 1023-1034 (session 19); without the term the model
     * charged only the empty keys and picked 64. A mask read from global memory
     * by the consumers with more than 128 keys a tile measured 2.6x slower than 128 (BERT's
     * [8,12,512,64] with its [8,1,1,512] mask, before such masks were staged: 81 us at 176 keys,
     * 30 at 128): ranked accordingly for the masks still read that way. A staged mask adds about 2 us there at any width (session 18,
     * the same case with its [8,1,1,512] mask: 24.3-24.4 us at 128 keys, 27.4 at 192, against
     * 22.3 and 25.1 without a mask; wide_softmax above ranks 128 first). */
    const double t_fixed = 0.27;
    const double masked_wide = p.d.has_mask && !c.mask_staged && c.bn > 128 ? 2.6 : 1.0;
    /* At D = 256 (O alone 128 registers a thread) only a second consumer hides the softmax:
     * the intra-warpgroup overlap did not with one (ncu, session 7: exp2 and the GEMMs
     * alternate) and cost 11-23% with two, and pingpong gained nothing (H200, session 18, every
     * candidate of [8,16,2048,256] and [2,16,8192,256]: two consumers, 80 keys, 2 stages, no
     * overlap 1009 / 3711 us; the same with overlap 1120-1192 / 4309-4538; one consumer 1164 /
     * 4375 at best). */
    const bool wide_o = p.d.d >= 256;
    const bool hidden = (c.overlap && !wide_o) || c.consumers >= 2;
    const double overlap_cost = c.overlap ? (wide_o ? 1.2 : 1.05) : 1.1;
    /* Pingpong at D = 256 pays only beside one slot each, whose releases it staggers (session 21:
     * 950 / 3492-3508 us against 971-973 / 3616-3654 without it). */
    const bool turns = c.pingpong && (!wide_o || c.stages == 1);
    /* Three consumers (192-row blocks) on a causal op run about 25% faster than this model
     * prices them against two: every candidate of hd128 causal [8,16,2048] ... [1,16,16384] timed
     * on the H200 (session 22 call e, trials_attn.tsv.gz; P in S's registers since session 21)
     * had 96 keys over three consumers without overlap 2-10% ahead of the two-consumer pingpong
     * tile this model put first (285.7 against 307.3 us at 2k, 1605.8 against 1637.0 at 16k),
     * which it ranked 20th-31st. Fitted as a factor of the tile: 0.75 puts the measured best
     * first at all six causal lengths and changes no other row's pick; on call f's timings (the
     * bf16 rows at 2k-16k, all four lengths) the pick is then within 1.004 of the best, where it
     * was 1.015-1.102. */
    const double causal_three = p.causal && c.consumers == 3 ? 0.75 : 1.0;
    const double t_tile = ((hidden ? (t_tc > t_exp ? t_tc : t_exp) * overlap_cost * (turns ? 0.97 : 1.0)
                                   : t_tc + t_exp) +
                           t_fixed) *
                          masked_wide * causal_three;
    /* Load latency of an item's first tiles and Q; a deeper ring hides more of a stage's. One
     * slot each for K and V (stages 1) leaves each load only the other GEMM and a softmax to land
     * in: fitted at D = 256 (H200, session 21, kbench in two processes: 128 keys in one slot each
     * 971-973 / 3616-3654 us at [8,16,2048,256] / [2,16,8192,256] against 999-1003 / 3662-3694
     * for 80 keys in two stages, where the wider tile's GEMM efficiency alone would put them 11%
     * ahead; BERT's masked [8,12,512,64] 27.3-27.4 in one slot each against 23.5 for its pick). */
    const double fill = 0.8, ring = c.stages == 1 ? 1.26 : c.stages == 2 ? 1.05 : 1.0;
    const long long nmb = tuner__attn_cdiv(p.d.s, c.bm), bh = p.d.b * p.d.hq, items = nmb * bh;
    const long long grid = items < a->sm_count ? items : a->sm_count;
    double total = 0, longest = 0;
    for (long long mb = 0; mb < nmb; mb++) {
        const double ti = (double)aw_item_tiles(&p, &c, mb) * t_tile * ring + fill;
        total += ti * (double)bh;
        if (ti > longest)
            longest = ti;
    }
    double busiest;
    if (p.causal)
        busiest = total / (double)grid > longest ? total / (double)grid : longest;
    else
        busiest = (double)tuner__attn_cdiv(items, grid) * (total / (double)items);
    const double dram = tuner__attn_min_bytes(&p) / (a->dram_gbps * 1e3);
    return (busiest > dram ? busiest : dram) + 3.0;
}

/* ---- code generation ---- */

/* The sizes as the generated code reads them: a static op's literals (printed as they always
 * were, so that its programs stay the same text), a dynamic op's variables (emit_dyn_sizes). */
typedef struct aw_sizes {
    char s[32], skv[32];     /* S, Skv: int */
    char off[32];            /* the causal offset Skv - S: long long */
    char nmb[32], nmb_ll[32]; /* query blocks per (batch, head): int, and as a long long */
    char bh_ll[32];          /* B * Hq: long long */
    char items_ll[32];       /* work items: long long */
    char nt[32], nt_ll[32];  /* key tiles of a whole row: int, long long */
    bool lpt;                /* causal items dealt by the table aw_emit_lpt wrote */
} aw_sizes;

static void aw_sizes_of(const tuner__attn_problem *p, const aw_cfg *c, aw_sizes *z)
{
    if (tuner_op_is_dynamic(p->op)) {
        *z = (aw_sizes){.s = "aw_S", .skv = "aw_Skv", .off = "aw_off", .nmb = "aw_nmb", .nmb_ll = "aw_nmb",
                        .bh_ll = "aw_bhn", .items_ll = "aw_items", .nt = "aw_ntk", .nt_ll = "(long long)aw_ntk"};
        return;
    }
    const long long nmb = tuner__attn_cdiv(p->d.s, c->bm), bh = p->d.b * p->d.hq;
    const long long nt = tuner__attn_cdiv(p->d.skv, c->bn);
    snprintf(z->s, sizeof(z->s), "%lld", (long long)p->d.s);
    snprintf(z->skv, sizeof(z->skv), "%lld", (long long)p->d.skv);
    snprintf(z->off, sizeof(z->off), "%lldLL", p->causal_off);
    snprintf(z->nmb, sizeof(z->nmb), "%lld", nmb);
    snprintf(z->nmb_ll, sizeof(z->nmb_ll), "%lldLL", nmb);
    snprintf(z->bh_ll, sizeof(z->bh_ll), "%lldLL", bh);
    snprintf(z->items_ll, sizeof(z->items_ll), "%lldLL", nmb * bh);
    snprintf(z->nt, sizeof(z->nt), "%lld", nt);
    snprintf(z->nt_ll, sizeof(z->nt_ll), "%lldLL", nt);
}

/* A dynamic op's sizes at launch, from the dims' parameters (S and Skv below 2^30 at the max:
 * aw_problem), and what the work items and tiles follow from them (aw_sizes). */
static void emit_dyn_sizes(tuner_sb *sb, const tuner__attn_problem *p, const aw_cfg *c)
{
    char se[96], ke[96], be[96];
    tuner_sb_printf(sb,
                    "const int aw_S = (int)%s, aw_Skv = (int)%s, aw_B = (int)%s;\n"
                    "const long long aw_off = (long long)aw_Skv - aw_S;\n"
                    "const int aw_nmb = (aw_S + %d) / %d, aw_ntk = (aw_Skv + %d) / %d;\n"
                    "const long long aw_bhn = (long long)aw_B * %lldLL, aw_items = aw_bhn * aw_nmb;\n",
                    tuner__attn_size_expr(p, 's', se, sizeof(se)), tuner__attn_size_expr(p, 'k', ke, sizeof(ke)),
                    tuner__attn_size_expr(p, 'b', be, sizeof(be)), c->bm - 1, c->bm, c->bn - 1, c->bn,
                    (long long)p->d.hq);
}

/* Causal items of a fixed-size op dealt by a table (aw_emit_lpt) up to this many, and what an
 * item costs beside its key tiles (its Q load, the ring's fill, the epilogue), in tiles. */
#define AW_LPT_MAX_ITEMS 8192
#define AW_LPT_ITEM_TILES 1

/* The loop over a block's work items t (every role walks the same ones, then emit_item): every
 * grid-th; causal, where items come longest first, the block's row of the deal's table
 * (aw_emit_lpt) or, for named sizes, a snake: odd rounds dealt backwards, so that block 0 does
 * not take the longest item of every round, and the last round, whole or not, in its own
 * direction - backwards it goes to the last blocks, which hold the least work. Each block counts
 * its own rounds, so that the loop has no early exit (one made ptxas serialize the wgmma). The
 * busiest block's work (an item's key tiles plus one) over the table's: at most 3% at
 * [8,16,2048,128] (152 against 148), 0.2-1.3% at the longer bench rows and at dynamic.py's
 * causal lengths from 2047, equal below (at 333 a snake that turned a partial round back over
 * its first blocks gave 6 against 5). */
static void aw_loop(tuner_sb *sb, const tuner__attn_problem *p, const aw_sizes *z)
{
    if (z->lpt)
        tuner_sb_puts(sb, "for (int aw_lj = aw_lpt_at[blockIdx.x]; aw_lj < aw_lpt_at[blockIdx.x + 1]; aw_lj++) {\n"
                          "const long long t = aw_lpt_item[aw_lj];\n");
    else if (p->causal)
        tuner_sb_printf(sb,
                        "const long long aw_rounds = %s / gridDim.x, aw_rem = %s %% gridDim.x;\n"
                        "const long long aw_mine = aw_rounds + (aw_rem > 0 && ((aw_rounds & 1) ? "
                        "(long long)blockIdx.x >= (long long)gridDim.x - aw_rem : (long long)blockIdx.x < aw_rem));\n"
                        "for (long long aw_rd = 0; aw_rd < aw_mine; aw_rd++) {\n"
                        "const long long t = aw_rd * gridDim.x + ((aw_rd & 1) ? gridDim.x - 1 - blockIdx.x : blockIdx.x);\n",
                        z->items_ll, z->items_ll);
    else
        tuner_sb_printf(sb, "for (long long t = blockIdx.x; t < %s; t += gridDim.x) {\n", z->items_ll);
}

/* The deal of a fixed-size causal op's items over `grid` blocks, longest first, each to the
 * block with the least work so far (LPT), as two constant tables: aw_lpt_item, the items block by
 * block in the order each block runs them, and aw_lpt_at, where each block's start. The snake
 * (aw_loop) leaves the busiest block 3% over the mean at [8,16,2048,128] (16 lengths, 2048 items
 * over 132 blocks: 136 tiles where the mean is 131.9); this deal 132 (H200, session 20: 324.4 ->
 * 322.1 us f16, 319.5 -> 315.8 bf16; the longer rows, where the snake was within 0.4%, as with
 * it). Items fit the tables' 16 bits (AW_LPT_MAX_ITEMS). */
static int aw_emit_lpt(tuner_sb *sb, const tuner__attn_problem *p, const aw_cfg *c, long long items, int grid)
{
    const long long bh = p->d.b * p->d.hq;
    long long *load = calloc((size_t)grid, sizeof(*load));
    int *owner = malloc((size_t)items * sizeof(*owner)), *item = malloc((size_t)items * sizeof(*item));
    int *at = calloc((size_t)grid + 1, sizeof(*at)), *fill = calloc((size_t)grid, sizeof(*fill));
    if (!load || !owner || !item || !at || !fill) {
        free(load), free(owner), free(item), free(at), free(fill);
        return -ENOMEM;
    }
    /* t runs the items longest first (emit_item: query block nmb - 1 - t / bh). */
    const long long nmb = tuner__attn_cdiv(p->d.s, c->bm);
    for (long long t = 0; t < items; t++) {
        int b = 0;
        for (int k = 1; k < grid; k++)
            if (load[k] < load[b])
                b = k;
        owner[t] = b;
        load[b] += aw_item_tiles(p, c, nmb - 1 - t / bh) + AW_LPT_ITEM_TILES;
        at[b + 1]++;
    }
    for (int b = 0; b < grid; b++)
        at[b + 1] += at[b];
    tuner_sb_printf(sb, "__constant__ unsigned short aw_lpt_item[%lld] = {", items);
    for (long long t = 0; t < items; t++)
        item[at[owner[t]] + fill[owner[t]]++] = (int)t;
    for (long long i = 0; i < items; i++)
        tuner_sb_printf(sb, "%s%d", i ? "," : "", item[i]);
    tuner_sb_printf(sb, "};\n__constant__ unsigned short aw_lpt_at[%d] = {", grid + 1);
    for (int b = 0; b <= grid; b++)
        tuner_sb_printf(sb, "%s%d", b ? "," : "", at[b]);
    tuner_sb_puts(sb, "};\n");
    free(load), free(owner), free(item), free(at), free(fill);
    return 0;
}

/* Declares the work item t's coordinates: aw_b, aw_h (query head), aw_hk (kv head), aw_m0 (first
 * query row) and aw_nt (key tiles); causal items longest first (aw_loop deals them). */
static void emit_item(tuner_sb *sb, const tuner__attn_problem *p, const aw_cfg *c, const aw_sizes *z)
{
    if (p->causal)
        tuner_sb_printf(sb, "const int aw_mb = %s - 1 - (int)(t / %s), aw_bh = (int)(t %% %s);\n", z->nmb, z->bh_ll,
                        z->bh_ll);
    else
        tuner_sb_printf(sb, "const int aw_mb = (int)(t %% %s), aw_bh = (int)(t / %s);\n", z->nmb_ll, z->nmb_ll);
    tuner_sb_printf(sb,
                    "const int aw_b = aw_bh / %lld, aw_h = aw_bh %% %lld, aw_hk = aw_h / %lld, aw_m0 = aw_mb * %d;\n",
                    (long long)p->d.hq, (long long)p->d.hq, (long long)p->d.group, c->bm);
    if (p->causal)
        tuner_sb_printf(sb,
                        "const long long aw_lim = (long long)min(aw_m0 + %d, %s) - 1 + %s;\n"
                        "const int aw_nt = aw_lim < 0 ? 0 : (int)min(aw_lim / %d + 1, %s);\n",
                        c->bm, z->s, z->off, c->bn, z->nt_ll);
    else
        tuner_sb_printf(sb, "const int aw_nt = %s;\n", z->nt);
}

/* Emits a consumer's softmax of the tile at key aw_kv0 (in aw_sc): logits into the log2
 * domain (without a mask, inside exp2's argument: `folded` below) plus the mask (fragment
 * (j, h, e): row aw_m0 + aw_r + 8h, key aw_kv0 + 8j + aw_q2 + e), keys past Skv (zero-filled by
 * the copy engine) and causally hidden ones -inf on the tiles that have any, then per row the
 * max over the quad, exp2 against it (0 while it is -inf) in place, l rescaled (a per-thread
 * partial sum until the epilogue) and O's factor left in aw_al. With sum_mma the row sums are
 * not added here: P.V's group also multiplies P by a 64x8 block of ones (wgmma n8, B the ones
 * after the Q tile) into aw_lo, a column of O in effect, rescaled with it; at D = 64 the
 * softmax's fp32 issue bounds the tile, and this takes bn / 2 FADDs off each thread's tile for
 * bn / 16 small wgmmas. The sums are then of the rounded P that P.V multiplies. */
static void emit_softmax(tuner_sb *sb, const tuner__attn_problem *p, const aw_cfg *c, const char *mask_value,
                         const aw_sizes *z)
{
    const double sl2 = p->scale * 1.4426950408889634;
    /* Without a mask the scores stay unscaled: the row max is taken on them and scaled once per
     * row, and each exp2 takes its argument from one FMA (score * scale - max) instead of a
     * multiply and a subtract (FlashAttention's folding; at D = 64 the softmax's fp32 work bounds
     * the tile, ncu of [8,16,2048,64]: FADD 24% and FMUL 17% of the instructions). The max
     * commutes with a positive scale only. */
    const bool folded = !c->mask_staged && !mask_value && sl2 > 0;
    if (c->mask_staged) {
        /* The stage's mask slot (log2 domain, -inf past Skv): this thread's two keys of each 8
         * in one 8-byte load, shared by its two rows. */
        tuner_sb_printf(sb,
                        "{\nconst hd_u32 aw_mks = aw_mk + (hd_u32)wg_s * %du + (hd_u32)aw_q2 * 4u;\n"
                        "#pragma unroll\nfor (int j = 0; j < %d; j++) {\n"
                        "float aw_k0, aw_k1;\n"
                        "asm volatile(\"ld.shared.v2.f32 {%%0, %%1}, [%%2];\" : \"=f\"(aw_k0), \"=f\"(aw_k1) : \"r\"(aw_mks + 32u * j));\n"
                        "#pragma unroll\nfor (int h = 0; h < 2; h++) {\n"
                        "aw_sc[4 * j + 2 * h] = fmaf(aw_sc[4 * j + 2 * h], %.9ef, aw_k0);\n"
                        "aw_sc[4 * j + 2 * h + 1] = fmaf(aw_sc[4 * j + 2 * h + 1], %.9ef, aw_k1);\n"
                        "}\n}\n}\n",
                        c->bn * 4, c->bn / 8, sl2, sl2);
    } else if (!folded) {
        tuner_sb_printf(sb,
                        "#pragma unroll\nfor (int j = 0; j < %d; j++)\n#pragma unroll\nfor (int h = 0; h < 2; h++)\n"
                        "#pragma unroll\nfor (int e = 0; e < 2; e++) {\n"
                        "float &x = aw_sc[4 * j + 2 * h + e];\nx *= %.9ef;\n",
                        c->bn / 8, sl2);
        if (mask_value)
            tuner_sb_printf(sb,
                            "const int aw_i = aw_m0 + aw_r + 8 * h, aw_j = aw_kv0 + 8 * j + aw_q2 + e;\n"
                            "if (aw_i < %s && aw_j < %s) x += %s;\n",
                            z->s, z->skv, mask_value);
        tuner_sb_puts(sb, "}\n");
    }
    /* Keys past Skv (a staged mask holds -inf there already) and causally hidden ones. */
    if (!c->mask_staged || p->causal) {
        tuner_sb_puts(sb, "if (");
        if (!c->mask_staged)
            tuner_sb_printf(sb, "aw_kv0 + %d > %s%s", c->bn, z->skv, p->causal ? " || " : "");
        if (p->causal)
            tuner_sb_printf(sb, "(long long)aw_kv0 + %d > (long long)aw_m0 + %s", c->bn - 1, z->off);
        tuner_sb_printf(sb,
                        ") {\n"
                        "#pragma unroll\nfor (int j = 0; j < %d; j++)\n#pragma unroll\nfor (int h = 0; h < 2; h++)\n"
                        "#pragma unroll\nfor (int e = 0; e < 2; e++) {\n"
                        "const int aw_i = aw_m0 + aw_r + 8 * h, aw_j = aw_kv0 + 8 * j + aw_q2 + e;\n"
                        "if (",
                        c->bn / 8);
        if (!c->mask_staged)
            tuner_sb_printf(sb, "aw_j >= %s%s", z->skv, p->causal ? " || " : "");
        if (p->causal)
            tuner_sb_printf(sb, "(long long)aw_j > (long long)aw_i + %s", z->off);
        tuner_sb_puts(sb, ") aw_sc[4 * j + 2 * h + e] = -HD_INF;\n}\n}\n");
    }
    /* aw_mx holds each row's max in the log2 domain (scaled) either way. */
    char scaled_max[64], exp_arg[96];
    if (folded) {
        snprintf(scaled_max, sizeof(scaled_max), "aw_m * %.9ef", sl2);
        snprintf(exp_arg, sizeof(exp_arg), "fmaf(aw_sc[4 * j + 2 * h + e], %.9ef, -aw_mu)", sl2);
    } else {
        snprintf(scaled_max, sizeof(scaled_max), "aw_m");
        snprintf(exp_arg, sizeof(exp_arg), "aw_sc[4 * j + 2 * h + e] - aw_mu");
    }
    tuner_sb_printf(sb,
                    "#pragma unroll\nfor (int h = 0; h < 2; h++) {\n"
                    "float aw_m = -HD_INF;\n"
                    "#pragma unroll\nfor (int j = 0; j < %d; j++) aw_m = fmaxf(aw_m, fmaxf(aw_sc[4 * j + 2 * h], aw_sc[4 * j + 2 * h + 1]));\n"
                    "aw_m = fmaxf(aw_m, __shfl_xor_sync(0xffffffffu, aw_m, 1));\n"
                    "aw_m = fmaxf(aw_m, __shfl_xor_sync(0xffffffffu, aw_m, 2));\n"
                    "aw_m = fmaxf(aw_mx[h], %s);\n"
                    "const float aw_mu = aw_m == -HD_INF ? 0.0f : aw_m;\n"
                    "aw_al[h] = aw_exp2(aw_mx[h] - aw_mu);\n"
                    "aw_mx[h] = aw_m;\n"
                    "%s"
                    "#pragma unroll\nfor (int j = 0; j < %d; j++)\n#pragma unroll\nfor (int e = 0; e < 2; e++) {\n"
                    "const float aw_p = aw_exp2(%s);\n"
                    "aw_sc[4 * j + 2 * h + e] = aw_p;%s\n}\n"
                    "%s"
                    "}\n",
                    c->bn / 8, scaled_max, c->sum_mma ? "" : "float aw_rs = 0.0f;\n", c->bn / 8, exp_arg,
                    c->sum_mma ? "" : "\naw_rs += aw_p;", c->sum_mma ? "" : "aw_ls[h] = aw_ls[h] * aw_al[h] + aw_rs;\n");
}

static int aw_generate(const tuner_op *op, const tuner_target *t, const tuner_schedule *s, tuner_program *prog,
                       char **err)
{
    tuner__attn_problem p;
    const tuner_arch *a = tuner__arch(t);
    aw_cfg c;
    if (!aw_problem(op, t, &p) || cfg_from(&p, s, &c) < 0 || !cfg_valid(&p, a, &c)) {
        if (err)
            *err = strdup("attention_wgmma: invalid schedule for this op/target");
        return -EINVAL;
    }
    const tuner_attention_dims *d = &p.d;
    const long long nmb = tuner__attn_cdiv(d->s, c.bm), items = nmb * d->b * d->hq;
    if (items > 0x7fffffffLL) {
        if (err)
            *err = strdup("attention_wgmma: too many work items");
        return -EINVAL;
    }
    const int grid = (int)(items < a->sm_count ? items : a->sm_count);
    const bool dyn = tuner_op_is_dynamic(op);
    aw_sizes z;
    aw_sizes_of(&p, &c, &z);
    z.lpt = p.causal && !dyn && items <= AW_LPT_MAX_ITEMS;
    /* The mask's value at (aw_b, aw_h, aw_i, aw_j), as the softmax reads it. */
    char *mv = d->has_mask ? tuner__attn_mask_log2(&p, "aw_b", "aw_h", c.mask_staged ? "0" : "aw_i", "aw_j") : NULL;
    if (d->has_mask && !mv)
        return -ENOMEM;
    const int S = c.stages;
    const char *pack = p.dt == TUNER_F16 ? "hd_pack_f16x2" : "hd_pack_bf16x2";
    char name[64];
    snprintf(name, sizeof(name), "hd_attention_wgmma_%d_%d_%d_%d_%d", c.bn, c.consumers, c.stages, c.overlap,
             c.pingpong);

    tuner_sb sb;
    tuner_sb_init(&sb);
    tuner__prelude(&sb, t->sm);
    tuner_sb_puts(&sb, "#pragma nv_diag_suppress 177\n");
    tuner_sb_puts(&sb, tuner__hopper_helpers);
    /* S = Q.K^T: both K-major; O += P.V: P from registers, V MN-major (transposed). */
    tuner__hopper_emit_mma_fn(&sb, "aw_mma_s", p.dt, c.bn, false, 0, 0, true);
    tuner__hopper_emit_mma_fn(&sb, "aw_mma_o", p.dt, c.dp, true, 0, 1, false);
    if (c.sum_mma) /* P times ones: the row sums (B K-major, all ones, so one descriptor) */
        tuner__hopper_emit_mma_fn(&sb, "aw_mma_l", p.dt, 8, true, 0, 0, false);
    /* ex2.approx of -inf is +0. */
    tuner_sb_puts(&sb, "HD_INLINE float aw_exp2(float x) { float y; asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(y) : "
                       "\"f\"(x)); return y; }\n");
    /* Pins registers in place: the compiler may not move their reads or writes across it (nor
     * across the wgmma fence, commit and wait asm it sits beside), so that no instruction
     * touches a wgmma's registers while the wgmma may still be using them. */
    tuner_sb_puts(&sb, "template <int N> HD_INLINE void aw_pin(float *r) {\n#pragma unroll\nfor (int i = 0; i < N; i++) "
                       "asm volatile(\"\" : \"+f\"(r[i]) :: \"memory\"); }\n"
                       "template <int N> HD_INLINE void aw_pin_u(hd_u32 (*r)[4]) {\n#pragma unroll\nfor (int i = 0; i < N; i++) "
                       "asm volatile(\"\" : \"+r\"(r[i][0]), \"+r\"(r[i][1]), \"+r\"(r[i][2]), \"+r\"(r[i][3]) :: \"memory\"); }\n");

    if (z.lpt && aw_emit_lpt(&sb, &p, &c, items, grid) < 0) {
        free(mv);
        tuner_sb_free(&sb);
        return -ENOMEM;
    }
    tuner_sb_printf(&sb, "extern \"C\" __global__ void __launch_bounds__(%d, 1) %s(", c.threads, name);
    tuner__attn_emit_params(&sb, &p);
    if (dyn) /* the sizes after the buffers, before the maps (as the launch passes them) */
        tuner__emit_dim_params(&sb, op);
    tuner__hopper_emit_map_param(&sb, "aw_tm_q");
    tuner__hopper_emit_map_param(&sb, "aw_tm_k");
    tuner__hopper_emit_map_param(&sb, "aw_tm_v");
    tuner_sb_puts(&sb, ")\n{\n");
    tuner__hopper_emit_map_addr(&sb, "aw_tm_q", "aw_map_q");
    tuner__hopper_emit_map_addr(&sb, "aw_tm_k", "aw_map_k");
    tuner__hopper_emit_map_addr(&sb, "aw_tm_v", "aw_map_v");
    if (dyn)
        emit_dyn_sizes(&sb, &p, &c);
    if (c.mask_staged)
        tuner_sb_printf(&sb, "__shared__ alignas(16) float aw_mkb[%d];\nconst hd_u32 aw_mk = hd_smem_addr(aw_mkb);\n",
                        c.mask_bytes / 4);
    /* With sum_mma, 1 KiB of ones (f16 or bf16 1.0 pairs) after the Q tile, written through the
     * generic proxy before the block's first barrier and fenced for wgmma's reads. */
    char ones[400] = "";
    if (c.sum_mma)
        snprintf(ones, sizeof(ones),
                 "const hd_u32 aw_ones = aw_q + %du;\n"
                 "for (int i = threadIdx.x; i < 64; i += %d)\n"
                 "asm volatile(\"st.shared.v4.u32 [%%0], {%%1,%%1,%%1,%%1};\" :: \"r\"(aw_ones + 16u * i), \"r\"(%uu) : \"memory\");\n"
                 "asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n",
                 c.q_bytes, c.threads, p.dt == TUNER_F16 ? 0x3c003c00u : 0x3f803f80u);
    /* Split (stages 1): K's full and empty barriers at 0 and 8 (where stage 0's are), V's at 16
     * (AW_VFULL) and 24 (AW_VEMPTY). */
    char vbars[120] = "";
    if (c.split)
        snprintf(vbars, sizeof(vbars), "wg_bar_init(wg_bar0 + %d, 1); wg_bar_init(wg_bar0 + %d, %d);\n", AW_VFULL, AW_VEMPTY,
                 4 * c.consumers);
    tuner_sb_printf(&sb,
                    "extern __shared__ __align__(1024) unsigned char aw_dyn[];\n"
                    "__shared__ alignas(8) hd_u64 aw_bars[%d];\n"
                    "const hd_u32 aw_ring = (hd_smem_addr(aw_dyn) + 1023u) & ~1023u;\n"
                    "const hd_u32 aw_q = aw_ring + %d;\n"
                    "const hd_u32 wg_bar0 = hd_smem_addr(aw_bars);\n"
                    "const hd_u32 aw_qfull = wg_bar0 + %d, aw_qempty = wg_bar0 + %d;\n"
                    "const int wg_g = __shfl_sync(0xffffffffu, threadIdx.x >> 7, 0);\n"
                    "%s"
                    "if (threadIdx.x == 0) {\n"
                    "for (int s = 0; s < %d; s++) { wg_bar_init(wg_bar0 + 8 * s, %d); wg_bar_init(wg_bar0 + 8 * (%d + s), %d); }\n"
                    "%s"
                    "wg_bar_init(aw_qfull, 1);\nwg_bar_init(aw_qempty, %d);\n"
                    "asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");\n"
                    "}\n__syncthreads();\n",
                    aw_ring_bars(&c) + 2, S * c.stage_bytes, 8 * aw_ring_bars(&c), 8 * aw_ring_bars(&c) + 8, ones, S,
                    /* a stage (split: K's slot) is full once its bytes landed and, staged, its
                     * mask warp wrote */
                    1 + (c.mask_staged ? AW_MASK_THREADS : 0), S, 4 * c.consumers, vbars, 4 * c.consumers);

    /* Producer. */
    tuner_sb_puts(&sb, "if (wg_g == 0) {\n");
    if (c.consumers >= 2)
        tuner__hopper_emit_setmaxnreg(&sb, false, AW_PRODUCER_REGS);
    tuner_sb_puts(&sb,
                    "if (threadIdx.x == 0) {\n"
                    "int wg_s = 0, wg_ph = 0, aw_qph = 0;\n");
    aw_loop(&sb, &p, &z);
    emit_item(&sb, &p, &c, &z);
    tuner_sb_printf(&sb, "wg_wait(aw_qempty, aw_qph ^ 1);\naw_qph ^= 1;\nwg_expect(aw_qfull, %d);\n", c.q_bytes);
    tuner__attn_emit_tile_load(&sb, &p, 0, c.boxes, "aw_q", "aw_map_q", "aw_m0", "aw_h", "aw_b", "aw_S", c.bm, "aw_qfull");
    tuner_sb_puts(&sb, "for (int n = 0; n < aw_nt; n++) {\n");
    tuner__hopper_emit_stage_acquire(&sb, S, c.stage_bytes, "wg_bar0", "aw_ring");
    tuner_sb_printf(&sb, "wg_expect(wg_full, %d);\nconst int aw_kv0 = n * %d;\n", c.split ? c.kv_bytes : c.stage_bytes,
                    c.bn);
    /* k's and v's heads: aw_hk, or packed in qkv's head dimension after q's (and k's) heads */
    char khead[48] = "aw_hk", vhead[48] = "aw_hk";
    if (p.packed) {
        snprintf(khead, sizeof(khead), "(aw_hk + %lld)", p.k_head0);
        snprintf(vhead, sizeof(vhead), "(aw_hk + %lld)", p.v_head0);
    }
    tuner__attn_emit_tile_load(&sb, &p, 1, c.boxes, "wg_st", "aw_map_k", "aw_kv0", khead, "aw_b", "aw_Skv", c.bn, "wg_full");
    char vdst[48], vfull[32] = "wg_full";
    snprintf(vdst, sizeof(vdst), "(wg_st + %d)", c.kv_bytes);
    if (c.split) { /* V's slot waits for the previous tile's P.V, K's only for its Q.K^T */
        snprintf(vfull, sizeof(vfull), "(wg_bar0 + %d)", AW_VFULL);
        tuner_sb_printf(&sb, "wg_wait(wg_bar0 + %d, wg_ph ^ 1);\nwg_expect(%s, %d);\n", AW_VEMPTY, vfull, c.kv_bytes);
    }
    tuner__attn_emit_tile_load(&sb, &p, 2, c.boxes, vdst, "aw_map_v", "aw_kv0", vhead, "aw_b", "aw_Skv", c.bn, vfull);
    tuner__hopper_emit_stage_advance(&sb, S);
    tuner_sb_puts(&sb, "}\n}\n}\n");
    if (c.mask_staged) {
        /* Warps 1..3 stage the mask, stage s's tiles warp s % 3's (up to three tiles' loads in
         * flight; one warp per stage keeps its parity waits exact, as the loader's: a stage's
         * previous use was the same warp's): the warp loads block_n values of the item's
         * (batch, head) row at the tile's keys, in the log2 domain the softmax adds (-inf past
         * Skv), then waits for the stage's release, writes its slot and arrives on the stage's
         * full barrier, each lane for its writes. */
        const int nq = (c.bn + 31) / 32;
        /* The slot is free once the stage's softmax read it: the stage's release after P.V, V's
         * with one slot each (K's comes before the softmax). */
        char mask_free[40];
        if (c.split)
            snprintf(mask_free, sizeof(mask_free), "wg_bar0 + %d", AW_VEMPTY);
        else
            snprintf(mask_free, sizeof(mask_free), "wg_bar0 + 8 * (%d + wg_s)", S);
        tuner_sb_puts(&sb,
                        "else if (threadIdx.x >= 32) {\n"
                        "const int aw_mw = (threadIdx.x >> 5) - 1, aw_ml = threadIdx.x & 31;\n"
                        "int wg_s = 0, wg_ph = 0;\n");
        aw_loop(&sb, &p, &z);
        emit_item(&sb, &p, &c, &z);
        tuner_sb_printf(&sb,
                        "for (int n = 0; n < aw_nt; n++) {\n"
                        "if (wg_s %% 3 == aw_mw) {\n"
                        "float aw_mv[%d];\n"
                        "#pragma unroll\nfor (int q = 0; q < %d; q++) {\n"
                        "const int aw_jj = aw_ml + 32 * q, aw_j = n * %d + aw_jj;\n"
                        "aw_mv[q] = aw_jj < %d && aw_j < %s ? %s : -HD_INF;\n"
                        "}\n"
                        "wg_wait(%s, wg_ph ^ 1);\n"
                        "const hd_u32 aw_mks = aw_mk + (hd_u32)wg_s * %du;\n"
                        "#pragma unroll\nfor (int q = 0; q < %d; q++)\n"
                        "if (aw_ml + 32 * q < %d) asm volatile(\"st.shared.f32 [%%0], %%1;\" :: \"r\"(aw_mks + 4u * (hd_u32)(aw_ml + 32 * q)), \"f\"(aw_mv[q]) : \"memory\");\n"
                        "wg_arrive(wg_bar0 + 8 * wg_s);\n"
                        "}\n",
                        nq, nq, c.bn, c.bn, z.skv, mv, mask_free, c.bn * 4, nq, c.bn);
        tuner__hopper_emit_stage_advance(&sb, S);
        tuner_sb_puts(&sb, "}\n}\n}\n");
    }

    /* Consumers. */
    tuner_sb_puts(&sb, "} else {\n");
    if (c.consumers >= 2)
        tuner__hopper_emit_setmaxnreg(&sb, true, c.regs);
    const int no = c.dp / 2, ns = c.bn / 2;
    /* P's registers: an array of their own with overlap (the previous tile's P beside this
     * tile's S), else S's first bn / 4 (rescale below packs in place). */
    char pa_decl[48] = "";
    if (!c.p_in_s)
        snprintf(pa_decl, sizeof(pa_decl), "hd_u32 aw_pa[%d][4];\n", c.bn / 16);
    /* Descriptors (in 16-byte units from their base): Q's k16 step kk is box kk / 4, 32 bytes
     * per step within the box's 128-byte rows, this consumer's 64 rows 8 KiB into each box; K's
     * likewise; V's step kk is 16 key rows (2 KiB) down its boxes, which lie block_n * 128 bytes
     * apart along N (LBO). */
    tuner_sb_printf(&sb,
                    "const int aw_c = wg_g - 1, wg_w = (threadIdx.x >> 5) & 3, wg_l = threadIdx.x & 31;\n"
                    "const int aw_r = aw_c * 64 + wg_w * 16 + (wg_l >> 2), aw_q2 = 2 * (wg_l & 3);\n"
                    "const hd_u32 aw_dq = wg_desc_lo(aw_q + aw_c * 8192, 16);\n"
                    "const hd_u32 aw_dk = wg_desc_lo(aw_ring, 16), aw_dv = wg_desc_lo(aw_ring + %d, %d);\n"
                    "float aw_o[%d], aw_sc[%d]%s;\n%s"
                    "int wg_s = 0, wg_ph = 0, aw_qph = 0;\n%s",
                    c.kv_bytes, c.bn * 128, no, ns, c.sum_mma ? ", aw_lo[4]" : "", pa_decl,
                    /* Consumer 0 takes the first turn. */
                    c.pingpong ? "if (aw_c == 1) asm volatile(\"bar.arrive 1, 256;\" ::: \"memory\");\n" : "");
    aw_loop(&sb, &p, &z);
    emit_item(&sb, &p, &c, &z);
    /* Register pins (aw_pin) around every wgmma fence and wait: S's accumulators, O's, P's. */
    char pin_s[48], pin_all[200];
    snprintf(pin_s, sizeof(pin_s), "aw_pin<%d>(aw_sc);\n", ns);
    char pin_pa[40] = "";
    if (!c.p_in_s)
        snprintf(pin_pa, sizeof(pin_pa), "aw_pin_u<%d>(aw_pa);\n", c.bn / 16);
    snprintf(pin_all, sizeof(pin_all), "aw_pin<%d>(aw_sc);\naw_pin<%d>(aw_o);\n%s%s", ns, no, pin_pa,
             c.sum_mma ? "aw_pin<4>(aw_lo);\n" : "");
    /* Q.K^T of stage wg_s into aw_sc (one group), and P.V of stage aw_ps (one group). */
    /* A flattened v map's tile past Skv holds the next head's or batch entry's rows (see the
     * header). P is 0 there, but 0 * (an inf or NaN of theirs) is NaN in this head's output -
     * one sequence of a batch poisoning another - so those rows are zeroed in the stage before
     * P.V reads it: by every warp of each consumer for itself (the same zeros, no barrier
     * between warps), then a proxy fence so that the copy engine's next fill and wgmma's read
     * see them in order. Static maps are zero-filled by the copy engine: nothing emitted. */
    char vzero[640] = "";
    if (tuner__attn_map_flat(&p, 2))
        snprintf(vzero, sizeof(vzero),
                 "if (aw_kv0 + %d > %s) {\n"
                 "const hd_u32 aw_vz = aw_ring + (hd_u32)wg_s * %du + %du;\n"
                 "#pragma unroll 1\nfor (int bx = 0; bx < %d; bx++)\n"
                 "for (int i = (%s - aw_kv0) * 8 + wg_l; i < %d; i += 32)\n"
                 "asm volatile(\"st.shared.v4.u32 [%%0], {%%1,%%1,%%1,%%1};\" :: \"r\"(aw_vz + (hd_u32)(bx * %d + i * 16)), \"r\"(0u) : \"memory\");\n"
                 "asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n}\n",
                 c.bn, z.skv, c.stage_bytes, c.kv_bytes, c.dp / 64, z.skv, c.bn * 8, c.bn * 128);
    char qk[1200], pv[900];
    snprintf(qk, sizeof(qk),
             "wg_wait(wg_bar0 + 8 * wg_s, wg_ph);\n%s"
             "#pragma unroll\nfor (int kk = 0; kk < %d; kk++)\n"
             "aw_mma_s(aw_sc, wg_desc(aw_dq + (kk >> 2) * %d + (kk & 3) * 2), "
             "wg_desc(aw_dk + (hd_u32)wg_s * %du + (kk >> 2) * %d + (kk & 3) * 2), kk > 0);\n"
             "wg_commit();\n",
             c.split ? "" : vzero, c.ksteps, c.bm * 128 / 16, c.stage_bytes / 16, c.bn * 128 / 16);
    /* k16 step kk's A fragment: P's registers (in S's: the same bits, no instruction). */
    const char *pk = c.p_in_s ? "const hd_u32 aw_pk[4] = {__float_as_uint(aw_sc[4 * kk]), __float_as_uint(aw_sc[4 * kk + 1]), "
                                "__float_as_uint(aw_sc[4 * kk + 2]), __float_as_uint(aw_sc[4 * kk + 3])};\n"
                              : "const hd_u32 *const aw_pk = aw_pa[kk];\n";
    snprintf(pv, sizeof(pv),
             "#pragma unroll\nfor (int kk = 0; kk < %d; kk++) {\n%s"
             "aw_mma_o(aw_o, aw_pk, wg_desc(aw_dv + (hd_u32)aw_ps * %du + kk * 128));\n%s}\n"
             "wg_commit();\n",
             c.bn / 16, pk, c.stage_bytes / 16, c.sum_mma ? "aw_mma_l(aw_lo, aw_pk, wg_desc(wg_desc_lo(aw_ones, 16)));\n" : "");
    /* The stage back to the producer once its P.V completed (split: V's slot; K's went back
     * after Q.K^T, k_release), and with one slot each V's wait before P.V (v_acquire: its bytes,
     * then a flattened map's rows past Skv zeroed, as qk does with one barrier). */
    char release[96], k_release[64] = "", v_acquire[700] = "";
    if (c.split) {
        snprintf(release, sizeof(release), "if (wg_l == 0) wg_arrive(wg_bar0 + %d);\n", AW_VEMPTY);
        snprintf(k_release, sizeof(k_release), "if (wg_l == 0) wg_arrive(wg_bar0 + 8);\n");
        snprintf(v_acquire, sizeof(v_acquire), "wg_wait(wg_bar0 + %d, wg_ph);\n%s", AW_VFULL, vzero);
    } else {
        snprintf(release, sizeof(release), "if (wg_l == 0) wg_arrive(wg_bar0 + 8 * (%d + aw_ps));\n", S);
    }
    /* After a tile's softmax: O rescaled by its factors, its P packed, its stage remembered. */
    /* In S's registers, P's pair (kk, r) goes to S's element 4 kk + r, below the pair 8 kk + 2 r
     * it is made of: in this order no pair is overwritten before it is read. */
    char rescale[760], pack_to[80];
    snprintf(pack_to, sizeof(pack_to), c.p_in_s ? "aw_sc[4 * kk + r] = __uint_as_float(%s" : "aw_pa[kk][r] = (%s", pack);
    snprintf(rescale, sizeof(rescale),
             "#pragma unroll\nfor (int j = 0; j < %d; j++)\n#pragma unroll\nfor (int h = 0; h < 2; h++) "
             "{ aw_o[4 * j + 2 * h] *= aw_al[h]; aw_o[4 * j + 2 * h + 1] *= aw_al[h]; }\n%s"
             "#pragma unroll\nfor (int kk = 0; kk < %d; kk++)\n#pragma unroll\nfor (int r = 0; r < 4; r++)\n"
             "%s(aw_sc[8 * kk + 2 * r], aw_sc[8 * kk + 2 * r + 1]));\n"
             "aw_ps = wg_s;\n",
             c.dp / 8, c.sum_mma ? "aw_lo[0] *= aw_al[0]; aw_lo[1] *= aw_al[0]; aw_lo[2] *= aw_al[1]; aw_lo[3] *= aw_al[1];\n" : "",
             c.bn / 16, pack_to);
    char advance[80];
    snprintf(advance, sizeof(advance), "if (++wg_s == %d) { wg_s = 0; wg_ph ^= 1; }\n", S);
    tuner_sb_printf(&sb,
                    "float aw_mx[2] = {-HD_INF, -HD_INF}, aw_al[2];\n%s"
                    "#pragma unroll\nfor (int j = 0; j < %d; j++) aw_o[j] = 0.0f;\n%s"
                    "int aw_ps = 0;\n"
                    "wg_wait(aw_qfull, aw_qph);\naw_qph ^= 1;\n",
                    c.sum_mma ? "" : "float aw_ls[2] = {0.0f, 0.0f};\n", no,
                    c.sum_mma ? "aw_lo[0] = aw_lo[1] = aw_lo[2] = aw_lo[3] = 0.0f;\n" : "");
    /* With pingpong the two consumers take turns issuing their wgmma (named barriers 1 + c:
     * consumer c's turn), so that one's softmax runs while the other's GEMMs occupy the tensor
     * cores. */
    const char *tw = c.pingpong ? "asm volatile(\"bar.sync %0, 256;\" :: \"r\"(1 + aw_c) : \"memory\");\n" : "";
    const char *tp = c.pingpong ? "asm volatile(\"bar.arrive %0, 256;\" :: \"r\"(2 - aw_c) : \"memory\");\n" : "";
    if (!c.overlap) {
        /* Each tile's Q.K^T, softmax and P.V in turn. */
        tuner_sb_printf(&sb,
                        "for (int n = 0; n < aw_nt; n++) {\nconst int aw_kv0 = n * %d;\n"
                        "%s%swg_fence();\n%s%swg_wait_group<0>();\n%s%s"
                        /* This warp is done with Q once its last Q.K^T completed. */
                        "if (n + 1 == aw_nt && wg_l == 0) wg_arrive(aw_qempty);\n",
                        c.bn, tw, pin_all, qk, tp, pin_all, k_release);
        emit_softmax(&sb, &p, &c, mv, &z);
        tuner_sb_printf(&sb, "%s%s%s%swg_fence();\n%s%swg_wait_group<0>();\n%s%s%s}\n", rescale, v_acquire, tw, pin_all,
                        pv, tp, pin_all, release, advance);
    } else {
        /* FA3's intra-warpgroup pipelining: tile 0's Q.K^T and softmax alone; then tile n's
         * Q.K^T and tile n - 1's P.V as two groups, tile n's softmax after the first completed
         * (wait_group 1), O and P left alone until the second completed (wait_group 0); the
         * last P.V after the loop. No wgmma is issued under a branch inside the pipeline, so
         * that ptxas can follow which groups are in flight. */
        tuner_sb_printf(&sb,
                        "if (aw_nt > 0) {\n{\nconst int aw_kv0 = 0;\n"
                        "%s%swg_fence();\n%s%swg_wait_group<0>();\n%s"
                        "if (aw_nt == 1 && wg_l == 0) wg_arrive(aw_qempty);\n",
                        tw, pin_all, qk, tp, pin_all);
        emit_softmax(&sb, &p, &c, mv, &z);
        tuner_sb_printf(&sb, "%s%s}\n"
                             "for (int n = 1; n < aw_nt; n++) {\nconst int aw_kv0 = n * %d;\n"
                             "%s%swg_fence();\n%s%s%swg_wait_group<1>();\n%s"
                             "if (n + 1 == aw_nt && wg_l == 0) wg_arrive(aw_qempty);\n",
                        rescale, advance, c.bn, tw, pin_all, qk, pv, tp, pin_s);
        emit_softmax(&sb, &p, &c, mv, &z);
        tuner_sb_printf(&sb, "wg_wait_group<0>();\n%s%s%s%s}\n"
                             "%s%swg_fence();\n%s%swg_wait_group<0>();\n%s%s}\n",
                        pin_all, release, rescale, advance, tw, pin_all, pv, tp, pin_all, release);
    }
    tuner_sb_puts(&sb, "if (aw_nt == 0 && wg_l == 0) wg_arrive(aw_qempty);\n");
    /* Epilogue: rows < S, columns < D. */
    tuner_sb_printf(&sb,
                    "#pragma unroll\nfor (int h = 0; h < 2; h++) {\n"
                    "%s"
                    "const float aw_inv = aw_l > 0.0f ? 1.0f / aw_l : 0.0f;\n"
                    "const int aw_i = aw_m0 + aw_r + 8 * h;\n"
                    "if (aw_i < %s) {\n"
                    "#pragma unroll\nfor (int j = 0; j < %lld; j++) {\n"
                    "const float aw_v0 = aw_o[4 * j + 2 * h] * aw_inv, aw_v1 = aw_o[4 * j + 2 * h + 1] * aw_inv;\n",
                    c.sum_mma ? "const float aw_l = aw_lo[2 * h];\n"
                              : "float aw_l = aw_ls[h];\n"
                                "aw_l += __shfl_xor_sync(0xffffffffu, aw_l, 1);\n"
                                "aw_l += __shfl_xor_sync(0xffffffffu, aw_l, 2);\n",
                    z.s, (long long)d->d / 8);
    static const char *const vars[2] = {"aw_v0", "aw_v1"};
    tuner__attn_emit_store(&sb, &p, "aw_b", "aw_h", "aw_i", "8 * j + aw_q2", vars, 2);
    tuner_sb_puts(&sb, "}\n}\n}\n}\n");
    /* Consumer 1's last hand-over, which nobody waited for: no barrier is left half-arrived. */
    if (c.pingpong)
        tuner_sb_puts(&sb, "if (aw_c == 0) asm volatile(\"bar.sync 1, 256;\" ::: \"memory\");\n");
    tuner_sb_puts(&sb, "}\n}\n");

    free(mv);
    char *src = tuner_sb_take(&sb);
    if (!src)
        return -ENOMEM;
    prog->source = src;
    prog->output_dtype = p.out_dt;
    prog->n_kernels = 1;
    prog->workspace_bytes = 0;
    tuner_launch *l = &prog->kernels[0];
    memset(l, 0, sizeof(*l));
    snprintf(l->name, sizeof(l->name), "%s", name);
    l->grid[0] = (unsigned)grid;
    l->grid[1] = l->grid[2] = 1;
    l->block[0] = (unsigned)c.threads;
    l->block[1] = l->block[2] = 1;
    l->shared_bytes = tuner__dynamic_shared((unsigned)c.smem, (unsigned)aw_static_bytes(&c));
    tuner__launch_args(l, op);
    for (int i = 0; i < 3; i++)
        l->maps[l->n_maps++] = tuner__attn_tmap(&p, i, (uint32_t)(i == 0 ? c.bm : c.bn));
    if (dyn) {
        /* The dims after the buffers; the grid min(work items, SMs) at the launch's sizes:
         * exactly where B or S is fixed (Hq * B * ceil(S / block_m), or Hq * query blocks * B),
         * else min(Hq * B * S, SMs), no fewer blocks than items up to the SMs (the extra ones
         * find no item and return). */
        int r = tuner__launch_dim_args(l, op);
        const long long hq = d->hq, nb = d->b;
        if (r == 0 && p.s_sym && !p.b_sym)
            r = tuner__grid_rule(l, 0, op, p.s_sym, 1, c.bm, hq * nb, a->sm_count);
        else if (r == 0 && p.s_sym)
            r = tuner__grid_rule(l, 0, op, p.s_sym | p.b_sym, hq, 1, 1, a->sm_count);
        else if (r == 0 && p.b_sym)
            r = tuner__grid_rule(l, 0, op, p.b_sym, hq * nmb, 1, 1, a->sm_count);
        if (r < 0) {
            free(prog->source);
            prog->source = NULL;
            if (err)
                *err = strdup("attention_wgmma: the launch's dims arguments or grid rules do not fit the op's sizes");
            return r;
        }
    }
    return 0;
}

const tuner_template tuner__attn_wgmma = {
    .name = "attention_wgmma",
    .space_signature = "attention_wgmma v1: persistent, TMA q once per item + k/v ring (full/empty mbarriers), "
                       "consumers x m64, s = q.k^T (smem desc, k-major, scale-d 0 first), online softmax exp2 in "
                       "registers, p.v with p from registers and v mn-major (tnsp); block_n{64,80,96,128,176,192,256} "
                       "consumers{1,2,3} stages{1 (one k and one v slot, own barriers; no overlap),2,3,4} overlap{0,1} "
                       "pingpong{0,1 (2 consumers; named-barrier turns)}; smem <= max, o+s+p+32 <= setmaxnreg budget, p in "
                       "s's registers without overlap "
                       "(producer 40); a mask constant along the query rows staged per stage in shared memory (fp32, "
                       "log2 domain) by producer warp 1 + stage % 3",
    .applies = aw_applies,
    .enumerate = aw_enumerate,
    .generate = aw_generate,
    .predict_us = aw_predict,
    .preferred = aw_preferred,
    .default_rank = TUNER_RANK_TENSOR_CORE,
    /* Names on B, S and Skv (tuner__attn_dyn_ok): sizes from the dims' parameters, the grid by a
     * rule, the maps' named dimensions encoded at launch (the header's "A dynamic op"). */
    .dynamic_dims = true,
};
