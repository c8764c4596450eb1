/* tuner/attn/decode.c - attention_decode: a few query rows against a long key sequence, the step
 * of an LLM that generates tokens (flash-decoding).
 *
 * With S <= 16 query rows there is almost no arithmetic per byte: the op is a stream over K and
 * V, and what matters is that every K/V element is read once, in 16-byte pieces, by enough
 * blocks to keep the DRAM system busy. So:
 *  - the R = group * S query rows of one kv head (GQA: the query heads that share it, times the
 *    rows) are computed together by one block, which reads each K/V row of its kv head once for
 *    all of them; R <= 64 (the bound of applies(): the rows make 1, 2 or 4 m16 tiles);
 *  - the keys are cut into `split` chunks (grid: chunk, kv head, batch), so that B * Hkv * split
 *    blocks fill the GPU even for one sequence;
 *  - a block streams its chunk in tiles of `kv_tile` keys through a ring of `stages` slots in
 *    shared memory - `load` 0: every thread's 16-byte cp.async into rows padded to D + 8 elements;
 *    `load` 1 (sm_90a): thread 0 arms the slot's mbarrier and issues one TMA copy per 64-column box
 *    of K and of V (tuner__attn_tmap's maps, 128-byte swizzle; ldmatrix XORs the 16-byte column
 *    with the row's low bits), which on the H200 streams 1.06-1.13x faster than the cp.async ring
 *    (bench/read_bw.cu: 4.4-4.6 against 4.1-4.2 TB/s) - and computes the scores with mma.sync
 *    m16n8k16 (the R rows padded to 16 per m tile: tensor cores have throughput to spare here, and
 *    the rows are never CUDA-core bound whatever the group), the mask, causality and the end of the
 *    keys, an online softmax in fp32 (base 2), and P V with mma.sync again. The block's warps are
 *    (m tile, key slice) pairs: a warp takes kv_tile / KW keys of every tile for its 16 rows; after
 *    the chunk the KW warps of an m tile merge their softmax states in shared memory;
 *  - `fused` 1 (one launch, hd_attn_decode): with split 1 the block then divides by the sum and
 *    stores the output from registers (no workspace); with split > 1 it writes one partial per
 *    row and chunk - max m (log2 domain), sum l and the unnormalised O[D] in fp32 - to the
 *    workspace and arrives at its (batch, kv head) group's counter there, and the group's last
 *    block combines the group's partials and stores the output (emit_last_block_combine: the
 *    counter is tagged with the launch's %gridid, so it needs no zeroed workspace);
 *  - `fused` 0 (hd_attn_decode_part, then hd_attn_decode_combine, a block per (b, query head,
 *    row)): the partials as above, combined by a second kernel spread over the whole GPU. It is
 *    in the space only where a group's partials reach 128 KiB (64-row groups split 8 ways and
 *    more, 4-row groups split 64 ways), where one block reading them all may take longer than a
 *    second launch (it does at B1 kv4K split 64 on the H200: 17.3 us against 38.2).
 *  Either combine rescales the partials by 2^(m_p - M), sums, divides by L and stores through
 *  tuner__attn_emit_store (epilogue). A partial whose keys were all masked has m = -inf and
 *  l = 0 and contributes nothing; a row with no key at all (L = 0) gives 0, never NaN.
 *
 * Parameters: load {1 (sm_90a), 0}, split {1, 2, ..., 64} (a chunk keeps >= 64 keys, and no split
 * whose half already gives 4 blocks per SM), block {64, 128, 256} threads, kv_tile {32, 64, 128}
 * keys, stages {2, 3, 4, 6} (6 only with tiles of 32 and 64 keys: deep rings of small tiles keep
 * more bytes in flight per SM than two slots of large ones, and let 2-4 blocks share an SM), fused
 * {1, 0}; valid when the warps divide into the m tiles and each warp's slice is 16 or 32 keys (16
 * for D = 256, whose 128 O accumulators per thread leave no room for more scores), and the ring
 * (and the warps' merge and the last block's weights after it) fits the target's shared
 * memory. Only the mma.sync path exists (no CUDA-core variant): with R padded to 16 the
 * tensor-core work is still far under the bandwidth bound.
 * The cost model (decode_predict), fitted on the H200's timings of every candidate of issue 38's
 * six decode rows (bench/results/2026-11-30-h200-session10/decode_model.md): a launch, then per
 * wave of blocks a pipeline over the chunk's tiles, each tile the longest of the warps' compute
 * chain (keys per warp x a per-key latency, more where warps share a scheduler), its bytes at
 * the block's share of its SM's stream, and the DRAM round trip the ring's stages - 1 tiles in
 * flight cover; at least all bytes at the DRAM's rate; then the combine (dec_combine_us: the
 * last block's costs a round trip per chunk, the combine kernel a launch). The default (tune
 * "none") is the model's first, so "none" and "model" pick alike.
 * Requirements (applies): f16/bf16, D in 64..256 of attn.h, no prologue, S <= 16, group * S <=
 * 64, q, k, v 16-byte aligned (cp.async and 16-byte q loads), B and Hkv within a grid dimension.
 *
 * A dynamic op may name B and Skv (not S: the block's rows are fixed; tuner__attn_dyn_ok): the
 * chunk length is cdiv(cdiv(Skv, split), kv_tile) tiles at launch (the last chunks may be empty
 * at a small Skv: their partials keep no key), the causal offset Skv - S and the batch and head
 * strides are read from the sizes, the blocks' grid.z and the combine kernel's rows follow B by
 * rules, and the workspace is sized for the largest B's layout (the counters follow the launch's
 * B's partials; their offset is computed at launch like o_base_expr's). split is chosen
 * at the dims' max; every block of the grid arrives at its counter, empty chunks too. With load
 * 1 the launcher encodes K's and V's maps at the sizes; a named Skv flattens them, so a last
 * tile reads the next head's rows past Skv, and the loop zeroes those rows of V before P.V
 * (emit_ring_wait: P is 0 there, but 0 times an inf of that head's would be NaN here).
 */
#include "tuner/attn/attn.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/core.h"
#include "tuner/hopper.h"
#include "tuner/space.h"

static const char *const P_SPLIT = "split";
static const char *const P_BLOCK = "block";
static const char *const P_TILE = "kv_tile";
static const char *const P_STAGES = "stages";
static const char *const P_FUSED = "fused";
static const char *const P_LOAD = "load";

/* The largest R (query rows per kv head) and S the template takes. */
#define DEC_MAX_ROWS 64
#define DEC_MAX_S 16
/* Each chunk of a split keeps at least this many keys. */
#define DEC_MIN_CHUNK 64
/* A group's partials from which a combine kernel is in the space (see dec_combine_us). */
#define DEC_TWO_KERNEL_MIN (128.0 * 1024)

typedef struct dec_cfg {
    int split, block, tile, stages;
    int fused;              /* 1: one kernel, the last block of a group combines; 0: a combine kernel */
    int load;               /* 0: cp.async into padded rows; 1: TMA boxes (sm_90a), 128-byte swizzle */
    int boxes;              /* load 1: 64-column boxes a row of K (or V) takes, cdiv(D, 64) */
    int slot;               /* bytes of one ring slot (a tile of K, then of V) */
    int warps, mt, kw, kpw; /* warps = mt m tiles x kw key slices; kpw keys per warp per tile */
    int dp;                 /* shared row stride in elements: D + 8 (conflict-free ldmatrix) */
    long long rows;         /* R = group * S */
    long long ch;           /* keys per chunk, a multiple of tile */
    long long np;           /* partials per query row: one per chunk (split) */
    long long nrows;        /* B * Hq * S query rows */
    long long o_base;       /* float offset of the O partials in the workspace (16-byte aligned) */
    long long groups;       /* B * Hkv (batch entry, kv head) groups, each the rows of split blocks */
    long long cnt_off;      /* fused, split > 1: float offset of the groups' 8-byte arrival counters */
    size_t smem, ws_bytes;
} dec_cfg;

static bool aligned16(const tuner_tensor *t)
{
    return t->align == 0 || t->align >= 16;
}

static bool decode_applies(const tuner_op *op, const tuner_target *t)
{
    if (!tuner__arch(t) || t->sm < 80 || !tuner__attn_supported(op))
        return false;
    const tuner_attention_dims d = tuner_attention_dims_of(op);
    if (d.hkv < 1 || d.hq % d.hkv != 0 || d.s < 1 || d.s > DEC_MAX_S || d.group * d.s > DEC_MAX_ROWS || d.skv < 1)
        return false;
    if (d.b > 65535 || d.hkv > 65535)
        return false;
    /* Dynamic: B and Skv may be named, not S (the block's query rows, group * S, are fixed). */
    if (tuner_op_is_dynamic(op)) {
        const tuner_tensor *q = &op->inputs[0];
        if (!tuner__attn_dyn_ok(op) || q->sym[op->attrs.attention.bshd || op->attrs.attention.packed ? 1 : 2])
            return false;
    }
    /* q, k and v (packed: qkv, which holds all three) */
    for (int i = 0; i < (op->attrs.attention.packed ? 1 : 3); i++)
        if (!aligned16(&op->inputs[i]))
            return false;
    return true;
}

/* Whether K and V can come by TMA (load 1): sm_90a (tuner/hopper.h's machinery), and for a
 * dynamic op whose Skv is named, a flattened map's row coordinate within an int32 at the dims'
 * max (tuner__attn_tmap; q, k and v are 16-byte aligned by applies). */
static bool dec_tma_ok(const tuner__attn_problem *p, const tuner_arch *a)
{
    if (!a || !a->has_wgmma)
        return false;
    const long long heads = p->bshd ? 1 : p->d.hkv; /* packed is bshd */
    return !tuner__attn_map_flat(p, 1) || p->d.b * heads * p->d.skv < (1LL << 31);
}

/* Static shared memory of the first kernel: the last block's flag (hd_last, fused split > 1),
 * and with load 1 the ring's mbarriers. */
static size_t dec_static_bytes(const dec_cfg *c)
{
    return (c->fused && c->split > 1 ? 16u : 0u) + (c->load ? 8u * (size_t)c->stages : 0u);
}

/* The schedule's configuration. With `useful`, the space's rules on top (a chunk keeps >= 64
 * keys, the last is not empty); without (generate), what the code needs: it is right for any
 * chunk, empty ones too, which a dynamic op's smaller Skv makes of a split chosen at its max. */
static bool cfg_of(const tuner__attn_problem *p, const tuner_arch *a, const tuner_schedule *s, dec_cfg *c, bool useful)
{
    memset(c, 0, sizeof(*c));
    c->split = tuner_schedule_param(s, P_SPLIT, 1);
    c->block = tuner_schedule_param(s, P_BLOCK, 128);
    c->tile = tuner_schedule_param(s, P_TILE, 64);
    c->stages = tuner_schedule_param(s, P_STAGES, 2);
    c->fused = tuner_schedule_param(s, P_FUSED, 1);
    c->load = tuner_schedule_param(s, P_LOAD, 0);
    if (c->split < 1 || c->split > 64 || (c->split & (c->split - 1)))
        return false;
    if (c->block != 64 && c->block != 128 && c->block != 256)
        return false;
    if (c->tile != 32 && c->tile != 64 && c->tile != 128)
        return false;
    if (c->stages != 2 && c->stages != 3 && c->stages != 4 && c->stages != 6)
        return false;
    /* A second kernel for one chunk per row would only add the partials' round trip. */
    if ((c->fused != 0 && c->fused != 1) || (!c->fused && c->split == 1))
        return false;
    if ((c->load != 0 && c->load != 1) || (c->load && !dec_tma_ok(p, a)))
        return false;
    const tuner_attention_dims *d = &p->d;
    c->rows = d->group * d->s;
    if (c->rows < 1 || c->rows > DEC_MAX_ROWS)
        return false;
    c->mt = c->rows <= 16 ? 1 : c->rows <= 32 ? 2 : 4;
    c->warps = c->block / 32;
    if (c->warps % c->mt)
        return false;
    c->kw = c->warps / c->mt;
    c->kpw = c->tile / c->kw;
    if (c->kpw * c->kw != c->tile || (c->kpw != 16 && c->kpw != 32))
        return false;
    /* Head dim 256 holds 128 accumulators of O per thread: 32 keys' scores on top spill. */
    if (p->d.d > 128 && c->kpw != 16)
        return false;
    /* Every chunk keeps DEC_MIN_CHUNK keys, and the last one is not empty. */
    if (useful && c->split > 1 && d->skv / c->split < DEC_MIN_CHUNK)
        return false;
    c->ch = tuner__attn_cdiv(tuner__attn_cdiv(d->skv, c->split), c->tile) * c->tile;
    if (useful && (long long)(c->split - 1) * c->ch >= d->skv)
        return false;
    c->dp = (int)d->d + 8;
    const int es = tuner_dtype_size(p->dt);
    c->boxes = (int)tuner__attn_cdiv(d->d, 64);
    c->slot = c->load ? 2 * c->boxes * c->tile * 128 : 2 * c->tile * c->dp * es;
    /* The ring, then q's rows; TMA's ring starts at the first 1 KiB boundary of the array. */
    c->smem = (size_t)c->stages * (size_t)c->slot + (size_t)(16 * c->mt * c->dp * es) + (c->load ? 1024u : 0u);
    /* The warps of an m tile merge in shared memory after the loop: (m, l) of every warp's rows
     * and the O of all but the first. */
    if (c->kw > 1) {
        const size_t merge = ((size_t)c->warps * 32 + (size_t)(c->warps - c->mt) * 16 * (size_t)d->d) * sizeof(float);
        if (merge > c->smem)
            c->smem = merge;
    }
    if (a && c->smem + dec_static_bytes(c) > (size_t)a->max_smem_per_block)
        return false;
    c->np = c->split;
    c->nrows = d->b * d->hq * d->s;
    c->groups = d->b * d->hkv;
    if (c->nrows > 0x7fffffffLL)
        return false;
    if (c->fused && c->split == 1) {
        /* The block holds its rows' whole softmax: it stores the output, no workspace. */
        c->o_base = c->cnt_off = 0;
        c->ws_bytes = 0;
        return true;
    }
    c->o_base = (c->nrows * c->np * 2 + 3) / 4 * 4;
    c->ws_bytes = (size_t)(c->o_base + c->nrows * c->np * d->d) * sizeof(float);
    if (c->fused) {
        /* One 8-byte counter per group after the partials (16-byte aligned: D is a multiple of 16);
         * the last block's combine keeps a weight per (row, chunk) and the rows' sums in shared
         * memory, where the ring was. */
        c->cnt_off = c->o_base + c->nrows * c->np * d->d;
        c->ws_bytes += (size_t)c->groups * 8;
        const size_t wsm = (size_t)(c->rows * c->split + c->rows) * sizeof(float);
        if (wsm > c->smem)
            c->smem = wsm;
        if (a && c->smem + dec_static_bytes(c) > (size_t)a->max_smem_per_block)
            return false;
    }
    return true;
}

/* ---- enumeration ---------------------------------------------------------------------------- */

/* `load` is named only where it is 1, so that the cp.async schedules keep their names. */
static const char *const dec_names[6] = {"split", "block", "kv_tile", "stages", "fused", "load"};

/* Bytes of one group's partials at a split: (m, l) and O[D] in fp32 per row and chunk, what the
 * combine of the group reads. */
static double group_partial_bytes(const tuner__attn_problem *p, int split)
{
    return (double)(p->d.group * p->d.s) * split * (double)(p->d.d + 2) * sizeof(float);
}

static int decode_enumerate(const tuner_op *op, const tuner_target *t, tuner_schedule **items, size_t *n)
{
    const tuner_arch *a = tuner__arch(t);
    tuner__attn_problem p;
    if (!a || tuner__attn_problem_init(op, &p, NULL) < 0)
        return 0;
    static const int splits[] = {1, 2, 4, 8, 16, 32, 64};
    static const int blocks[] = {128, 64, 256};
    static const int tiles[] = {64, 32, 128};
    static const int stages[] = {2, 3, 4, 6};
    const long long heads = p.d.b * p.d.hkv;
    /* TMA first where it exists: it streams faster (DEC_TMA_STREAM), and ties keep the space order. */
    for (int load = dec_tma_ok(&p, a) ? 1 : 0; load >= 0; load--) {
        for (size_t si = 0; si < sizeof(splits) / sizeof(splits[0]); si++) {
            /* A split whose half already puts 4 blocks on every SM only adds partials. */
            if (splits[si] > 1 && heads * (splits[si] / 2) >= 4LL * a->sm_count)
                continue;
            /* The combine kernel only where the last block's combine would read enough partials
             * to take longer than a second launch (dec_combine_us). */
            const bool two = splits[si] > 1 && group_partial_bytes(&p, splits[si]) >= DEC_TWO_KERNEL_MIN;
            for (int fused = 1; fused >= (two ? 0 : 1); fused--)
                for (size_t bi = 0; bi < 3; bi++)
                    for (size_t ti = 0; ti < 3; ti++)
                        for (size_t gi = 0; gi < sizeof(stages) / sizeof(stages[0]); gi++) {
                            /* Deep rings are of small tiles: 6 slots of 128 keys never fit. */
                            if (stages[gi] == 6 && tiles[ti] == 128)
                                continue;
                            const int values[6] = {splits[si], blocks[bi], tiles[ti], stages[gi], fused, load};
                            const int np = load ? 6 : 5;
                            tuner_schedule s = {0};
                            tuner__schedule_params(&s, np, dec_names, values);
                            dec_cfg c;
                            if (!cfg_of(&p, a, &s, &c, true))
                                continue;
                            int r = tuner__space_push(items, n, "attention_decode", np, dec_names, values);
                            if (r < 0)
                                return r;
                        }
        }
    }
    return 0;
}

/* ---- code generation ------------------------------------------------------------------------ */

/* The float offset of the O partials in the workspace: c->o_base, or with a named B the same
 * formula at the launch's B (both kernels compute it alike; the workspace is sized at max). */
static const char *o_base_expr(const tuner__attn_problem *p, const dec_cfg *c, char *buf, size_t len)
{
    char be[96];
    if (!p->b_sym)
        snprintf(buf, len, "%lldLL", c->o_base);
    else
        snprintf(buf, len, "((%lldLL * %s + 3LL) / 4LL * 4LL)", p->d.hq * p->d.s * c->np * 2,
                 tuner__attn_size_expr(p, 'b', be, sizeof(be)));
    return buf;
}

/* Stores nv (2 or 4) consecutive output elements of (b, h, i) from column c, the float C
 * expressions vars: one vector store where the output's alignment allows it, else nv element
 * stores (an output view aligned below the vector). */
static void emit_store_n(tuner_sb *sb, const tuner__attn_problem *p, const char *b, const char *h, const char *i,
                         const char *c, const char *const *vars, int nv)
{
    const int osz = tuner_dtype_size(p->out_dt);
    const int oal = p->op->output.align == 0 ? 16 : p->op->output.align;
    if (oal >= nv * osz) {
        tuner__attn_emit_store(sb, p, b, h, i, c, vars, nv);
        return;
    }
    for (int k = 0; k < nv; k++) {
        char col[64];
        snprintf(col, sizeof(col), "%s + %d", c, k);
        tuner__attn_emit_store(sb, p, b, h, i, col, &vars[k], 1);
    }
}

/* Split 1, one kernel: the block's warps kw = 0 hold their rows' whole softmax after the merge
 * (m, l and the unnormalised O of every key), so they divide by l and store the output from the
 * mma fragments - columns x * 8 + (lane & 3) * 2 and the next - with no workspace. A row with no
 * key (l = 0) gives 0, as the combine does. */
static void emit_direct_store(tuner_sb *sb, const tuner__attn_problem *p, const dec_cfg *c)
{
    const tuner_attention_dims *d = &p->d;
    tuner_sb_puts(sb, "if (kw == 0) {\n#pragma unroll\nfor (int h = 0; h < 2; h++) {\nconst int rr = r0 + h * 8;\n");
    tuner_sb_printf(sb, "if (rr < %lld) {\n", c->rows);
    tuner_sb_printf(sb, "const int hq = hk * %lld + rr / %lld, qi = rr %% %lld;\n", (long long)d->group,
                    (long long)d->s, (long long)d->s);
    tuner_sb_puts(sb, "const float inv = l_r[h] > 0.0f ? 1.0f / l_r[h] : 0.0f;\n");
    tuner_sb_printf(sb, "#pragma unroll\nfor (int x = 0; x < %d; x++) {\n", (int)d->d / 8);
    tuner_sb_puts(sb, "const float v0 = o[x][2 * h] * inv, v1 = o[x][2 * h + 1] * inv;\n");
    const char *vars[2] = {"v0", "v1"};
    emit_store_n(sb, p, "b", "hq", "qi", "(x * 8 + (lane & 3) * 2)", vars, 2);
    tuner_sb_puts(sb, "}\n}\n}\n}\n");
}

/* Split > 1, one kernel: after writing its partials the block arrives at its group's counter
 * (thread 0: __threadfence, then a compare-and-swap), and the block that arrives last combines
 * the group's R rows over every chunk, as the combine kernel does, and stores the output.
 *
 * The counter cannot rely on the workspace's contents (docs/api.md: a workspace needs no
 * initialising; a graph's sits in its arena among other tensors): a counter word holds the
 * launch's grid id (%gridid, unique per launch in a context) above its low 8 bits and the count
 * in them, and a word of another launch - or any garbage - counts as 0. The last block also
 * resets the word to 0, so that a replay that reused a grid id would start from 0 as well.
 * The partials are read through L2 (ld.global.cg): the other blocks wrote them, and the fences
 * order those writes before the count that this block saw. */
static void emit_last_block_combine(tuner_sb *sb, const tuner__attn_problem *p, const dec_cfg *c)
{
    char o_base[160];
    o_base_expr(p, c, o_base, sizeof(o_base));
    const tuner_attention_dims *d = &p->d;
    const int D = (int)d->d, C4 = D / 4, NT = c->block, W = c->block / 32, SPLIT = c->split;
    const long long R = c->rows;
    tuner_sb_puts(sb, "hd_cp_async_wait_all();\n__syncthreads();\n__shared__ int hd_last;\nif (tid == 0) {\n"
                      "__threadfence();\nunsigned long long gid;\n"
                      "asm volatile(\"mov.u64 %0, %%gridid;\" : \"=l\"(gid));\n"
                      "const unsigned long long tag = gid << 8;\n");
    char ce[256];
    if (!p->b_sym) {
        snprintf(ce, sizeof(ce), "%lldLL", c->cnt_off);
    } else {
        /* After the O partials of the launch's B, as o_base_expr places them (sized at max,
         * the workspace holds this layout for every smaller B). */
        char be[96];
        snprintf(ce, sizeof(ce), "(%s + %lldLL * %s)", o_base, (long long)(d->hq * d->s * c->np * d->d),
                 tuner__attn_size_expr(p, 'b', be, sizeof(be)));
    }
    tuner_sb_printf(sb, "unsigned long long *ctr = reinterpret_cast<unsigned long long *>(ws + %s) + (b * %lldLL + hk);\n",
                    ce, (long long)d->hkv);
    tuner_sb_printf(sb, "unsigned long long old = *reinterpret_cast<volatile unsigned long long *>(ctr), cnt;\n"
                        "for (;;) {\ncnt = ((old & ~0xffULL) == tag ? (old & 0xffULL) : 0ULL) + 1ULL;\n"
                        "const unsigned long long prev = atomicCAS(ctr, old, tag | cnt);\n"
                        "if (prev == old) break;\nold = prev;\n}\n"
                        "hd_last = cnt == %dULL;\nif (cnt == %dULL) { atomicExch(ctr, 0ULL); __threadfence(); }\n}\n"
                        "__syncthreads();\nif (!hd_last) return;\n",
                    SPLIT, SPLIT);
    /* The weights 2^(m_q - M) of each row's chunks and the row's sum L, a warp per row, in
     * shared memory (the ring is free); a lane loads its (m, l) pairs (split <= 64: two at most)
     * at once, one L2 round trip. A chunk that kept no key (m = -inf) weighs 0. */
    tuner_sb_puts(sb, "float *wsh = reinterpret_cast<float *>(hd_smem);\n");
    tuner_sb_printf(sb, "const long long g0 = (b * %lldLL + hk) * %lldLL;\n", (long long)d->hkv, R);
    tuner_sb_printf(sb, "for (int r = warp; r < %lld; r += %d) {\nconst long long pr0 = (g0 + r) * %dLL;\n", R, W, SPLIT);
    tuner_sb_printf(sb, "float ml[2][2] = {{-HD_INF, 0.0f}, {-HD_INF, 0.0f}};\n"
                        "#pragma unroll\nfor (int k = 0; k < 2; k++)\nif (lane + 32 * k < %d) hd_dec_ldcg2(ws + (pr0 + lane + 32 * k) * 2, ml[k]);\n"
                        "const float M = hd_warp_max<32>(fmaxf(ml[0][0], ml[1][0]));\nfloat L = 0.0f;\n"
                        "#pragma unroll\nfor (int k = 0; k < 2; k++)\nif (lane + 32 * k < %d) {\n"
                        "const float wq = ml[k][0] == -HD_INF ? 0.0f : exp2f(ml[k][0] - M);\n"
                        "wsh[r * %d + lane + 32 * k] = wq;\nL += wq * ml[k][1];\n}\n"
                        "L = hd_warp_sum<32>(L);\nif (lane == 0) wsh[%lld + r] = L;\n}\n__syncthreads();\n",
                    SPLIT, SPLIT, SPLIT, R * SPLIT);
    /* Then every (row, 4 columns) of the group: the weighted sum of the chunks' O, over L. */
    tuner_sb_printf(sb, "for (int it = tid; it < %lld; it += %d) {\nconst int r = it / %d, c4 = it %% %d;\n", R * C4, NT,
                    C4, C4);
    tuner_sb_printf(sb, "const float *po = ws + %s + (g0 + r) * %lldLL + c4 * 4;\n", o_base, (long long)SPLIT * D);
    tuner_sb_printf(sb, "float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;\n#pragma unroll 8\nfor (int q = 0; q < %d; q++) {\n"
                        "const float wq = wsh[r * %d + q];\nfloat v[4];\nhd_dec_ldcg4(po + (long long)q * %d, v);\n"
                        "a0 += wq * v[0];\na1 += wq * v[1];\na2 += wq * v[2];\na3 += wq * v[3];\n}\n",
                    SPLIT, SPLIT, D);
    tuner_sb_printf(sb, "const float L = wsh[%lld + r];\nconst float inv = L > 0.0f ? 1.0f / L : 0.0f;\n", R * SPLIT);
    tuner_sb_printf(sb, "const int hq = hk * %lld + r / %lld, qi = r %% %lld;\n", (long long)d->group, (long long)d->s,
                    (long long)d->s);
    tuner_sb_puts(sb, "const float o0 = a0 * inv, o1 = a1 * inv, o2 = a2 * inv, o3 = a3 * inv;\n");
    const char *vars[4] = {"o0", "o1", "o2", "o3"};
    emit_store_n(sb, p, "b", "hq", "qi", "(c4 * 4)", vars, 4);
    tuner_sb_puts(sb, "}\n");
}

/* load 0: this (batch entry, kv head)'s K and V rows (kb, vb); a tile of them into ring slot
 * t % stages by cp.async, every thread 16 bytes at a time into padded rows; keys past the chunk
 * are zero-filled, so that P (0 there) times V stays 0. Then the first stages - 1 tiles. */
static void emit_cp_async_ring(tuner_sb *sb, const tuner__attn_problem *p, const dec_cfg *c)
{
    const char *T = tuner__ctype(p->dt);
    const int D = (int)p->d.d, DP = c->dp, TILE = c->tile, NT = c->block;
    char sbe[96], she[96];
    tuner_sb_printf(sb, "const long long kvb = b * %s + (long long)hk * %s;\n",
                    tuner__attn_stride_expr(p, p->kv_sb, p->kv_sb_m, sbe, sizeof(sbe)),
                    tuner__attn_stride_expr(p, p->kv_sh, p->kv_sh_m, she, sizeof(she)));
    tuner_sb_printf(sb, "const %s *kb = %s + kvb;\nconst %s *vb = %s + kvb;\n", T, p->k_ptr, T, p->v_ptr);
    tuner_sb_puts(sb, "auto load_tile = [&](int t) {\n");
    tuner_sb_printf(sb, "%s *sk = skv + (t %% %d) * %d;\n%s *sv = sk + %d;\n", T, c->stages, 2 * TILE * DP, T,
                    TILE * DP);
    tuner_sb_printf(sb, "const long long j0 = k0 + (long long)t * %d;\n", TILE);
    tuner_sb_printf(sb, "for (int idx = tid; idx < %d; idx += %d) {\n", TILE * (D / 8), NT);
    tuner_sb_printf(sb, "const int r = idx / %d, cc = (idx %% %d) * 8;\n", D / 8, D / 8);
    tuner_sb_puts(sb, "const long long j = j0 + r;\nconst bool ok = j < k1;\n");
    tuner_sb_printf(sb, "const long long off = (ok ? j : 0LL) * %lldLL + cc;\n", p->kv_ss);
    tuner_sb_printf(sb, "hd_cp_async16(sk + r * %d + cc, kb + off, ok);\nhd_cp_async16(sv + r * %d + cc, vb + off, ok);\n",
                    DP, DP);
    tuner_sb_puts(sb, "}\n};\n");
    tuner_sb_printf(sb, "#pragma unroll\nfor (int t = 0; t < %d; t++) {\nif (t < ntiles) load_tile(t);\n"
                        "hd_cp_async_commit();\n}\n",
                    c->stages - 1);
}

/* load 1: thread 0 arms slot t % stages's barrier with the slot's bytes and issues the copies
 * of K's and V's boxes (tuner__attn_emit_tile_load). Boxes past Skv read zeros from a static
 * map; a flattened one (a named Skv) reads the next head's rows, which the loop zeroes in V
 * (emit_ring_wait). Then the first stages - 1 tiles. */
static void emit_tma_ring(tuner_sb *sb, const tuner__attn_problem *p, const dec_cfg *c)
{
    const int TILE = c->tile;
    char khead[48] = "hk", vhead[48] = "hk";
    if (p->packed) {
        snprintf(khead, sizeof(khead), "(hk + %lld)", p->k_head0);
        snprintf(vhead, sizeof(vhead), "(hk + %lld)", p->v_head0);
    }
    char seq[120];
    if (p->skv_sym)
        snprintf(seq, sizeof(seq), "(int)hd_skv");
    else
        snprintf(seq, sizeof(seq), "%lld", (long long)p->d.skv);
    tuner_sb_printf(sb, "auto load_tile = [&](int t) {\nconst int hd_s = t %% %d;\n"
                        "const hd_u32 hd_sk = hd_smem_addr(hd_ring) + (hd_u32)hd_s * %du, hd_sv = hd_sk + %du;\n"
                        "const int hd_j0 = (int)(k0 + (long long)t * %d);\nconst hd_u32 hd_full = hd_bar + 8 * hd_s;\n"
                        "wg_expect(hd_full, %d);\n",
                    c->stages, c->slot, c->slot / 2, TILE, c->slot);
    tuner__attn_emit_tile_load(sb, p, 1, c->boxes, "hd_sk", "hd_map_k", "hd_j0", khead, "(int)b", seq, TILE, "hd_full");
    tuner__attn_emit_tile_load(sb, p, 2, c->boxes, "hd_sv", "hd_map_v", "hd_j0", vhead, "(int)b", seq, TILE, "hd_full");
    tuner_sb_printf(sb, "};\nif (tid == 0) {\nfor (int t = 0; t < %d; t++)\nif (t < ntiles) load_tile(t);\n}\n",
                    c->stages - 1);
}

/* The loop's head for tile t: waits for its slot, lets every thread past the previous tile's
 * reads (the slot refilled next is that tile's), refills, and declares the slot's K and V: sk
 * and sv (load 0: padded rows), skb and svb (load 1: 64-column boxes of swizzled 128-byte rows).
 * A flattened map's last tile of the keys reads past Skv into the next head's rows: their V rows
 * are zeroed first (P is 0 there, but 0 times an inf of theirs would be NaN here), and the
 * generic writes are fenced before the copy engine refills the slot. */
static void emit_ring_wait(tuner_sb *sb, const tuner__attn_problem *p, const dec_cfg *c)
{
    const char *T = tuner__ctype(p->dt);
    const int TILE = c->tile, S = c->stages;
    if (!c->load) {
        tuner_sb_printf(sb, "hd_cp_async_wait<%d>();\n__syncthreads();\n", S - 2);
        tuner_sb_printf(sb, "if (t + %d < ntiles) load_tile(t + %d);\nhd_cp_async_commit();\n", S - 1, S - 1);
        tuner_sb_printf(sb, "const %s *sk = skv + (t %% %d) * %d;\nconst %s *sv = sk + %d;\n", T, S, 2 * TILE * c->dp, T,
                        TILE * c->dp);
        return;
    }
    tuner_sb_printf(sb, "wg_wait(hd_bar + 8 * (t %% %d), (t / %d) & 1);\n", S, S);
    tuner_sb_printf(sb, "const unsigned char *skb = hd_ring + (t %% %d) * %d;\nconst unsigned char *svb = skb + %d;\n", S,
                    c->slot, c->slot / 2);
    if (tuner__attn_map_flat(p, 2)) {
        tuner_sb_printf(sb, "if (k0 + (long long)t * %d + %d > k1) {\nconst int hd_kept = (int)(k1 - k0 - (long long)t * %d);\n",
                        TILE, TILE, TILE);
        tuner_sb_printf(sb, "for (int i = hd_kept * %d + tid; i < %d; i += %d) {\n", 8 * c->boxes, TILE * 8 * c->boxes,
                        c->block);
        tuner_sb_printf(sb, "const int r = i / %d, x = (i / 8) %% %d;\n", 8 * c->boxes, c->boxes);
        tuner_sb_printf(sb, "*reinterpret_cast<hd_v4 *>(const_cast<unsigned char *>(svb) + x * %d + r * 128 + (i & 7) * 16) = "
                            "hd_v4{0u, 0u, 0u, 0u};\n}\n"
                            "asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n}\n",
                        TILE * 128);
    }
    tuner_sb_printf(sb, "__syncthreads();\nif (tid == 0 && t + %d < ntiles) load_tile(t + %d);\n", S - 1, S - 1);
}

/* Kernel 1: the partials of one (chunk, kv head, batch entry). */
static void emit_part(tuner_sb *sb, const tuner__attn_problem *p, const dec_cfg *c)
{
    char o_base[160];
    o_base_expr(p, c, o_base, sizeof(o_base));
    const tuner_attention_dims *d = &p->d;
    const char *T = tuner__ctype(p->dt);
    const int D = (int)d->d, DP = c->dp, TILE = c->tile, NT = c->block;
    const char *mma = p->dt == TUNER_BF16 ? "hd_mma_bf16_16816" : "hd_mma_f16_16816";
    tuner_sb_printf(sb, "extern \"C\" __global__ void __launch_bounds__(%d) %s(", NT,
                    c->fused ? "hd_attn_decode" : "hd_attn_decode_part");
    tuner__attn_emit_params(sb, p);
    if (c->ws_bytes)
        tuner_sb_puts(sb, ", float *__restrict__ ws");
    tuner__emit_dim_params(sb, p->op);
    if (c->load) { /* the maps after the sizes, as the launch passes them */
        tuner__hopper_emit_map_param(sb, "hd_tm_k");
        tuner__hopper_emit_map_param(sb, "hd_tm_v");
    }
    tuner_sb_puts(sb, ")\n{\n");
    tuner_sb_puts(sb, "extern __shared__ __align__(16) unsigned char hd_smem[];\n");
    if (c->load) {
        /* The ring at the array's first 1 KiB boundary (the swizzle's period), q's rows after it;
         * a slot's `full` mbarrier per stage, armed by thread 0 with the slot's bytes. */
        tuner__hopper_emit_map_addr(sb, "hd_tm_k", "hd_map_k");
        tuner__hopper_emit_map_addr(sb, "hd_tm_v", "hd_map_v");
        tuner_sb_printf(sb,
                        "unsigned char *const hd_ring = hd_smem + ((1024u - (hd_smem_addr(hd_smem) & 1023u)) & 1023u);\n"
                        "%s *sq = reinterpret_cast<%s *>(hd_ring + %d);\n"
                        "__shared__ alignas(8) hd_u64 hd_dec_bar[%d];\nconst hd_u32 hd_bar = hd_smem_addr(hd_dec_bar);\n",
                        T, T, c->stages * c->slot, c->stages);
    } else {
        tuner_sb_printf(sb, "%s *sq = reinterpret_cast<%s *>(hd_smem);\n", T, T);
        tuner_sb_printf(sb, "%s *skv = sq + %d;\n", T, 16 * c->mt * DP);
    }
    tuner_sb_printf(sb, "const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;\n"
                        "const int mt = warp / %d, kw = warp %% %d;\n",
                    c->kw, c->kw);
    if (c->load)
        tuner_sb_printf(sb, "if (tid == 0) {\nfor (int s = 0; s < %d; s++) wg_bar_init(hd_bar + 8 * s, 1);\n"
                            "asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");\n}\n__syncthreads();\n",
                        c->stages);
    tuner_sb_puts(sb, "const int chunk = blockIdx.x, hk = blockIdx.y;\nconst long long b = blockIdx.z;\n");
    if (p->skv_sym) {
        /* Skv at launch: chunks of cdiv(cdiv(Skv, split), tile) tiles' keys; the last ones may be
         * empty (their partials keep no key and weigh 0 in the combine). */
        char ke[96];
        tuner_sb_printf(sb, "const long long hd_skv = %s;\n", tuner__attn_size_expr(p, 'k', ke, sizeof(ke)));
        tuner_sb_printf(sb, "const long long hd_ch = ((hd_skv + %dLL) / %dLL + %dLL) / %dLL * %dLL;\n", c->split - 1,
                        c->split, TILE - 1, TILE, TILE);
        tuner_sb_puts(sb, "const long long k0 = (long long)chunk * hd_ch;\n"
                          "const long long k1 = k0 + hd_ch < hd_skv ? k0 + hd_ch : hd_skv;\n");
    } else {
        tuner_sb_printf(sb, "const long long k0 = (long long)chunk * %lldLL;\n", c->ch);
        tuner_sb_printf(sb, "const long long k1 = k0 + %lldLL < %lldLL ? k0 + %lldLL : %lldLL;\n", c->ch,
                        (long long)d->skv, c->ch, (long long)d->skv);
    }
    tuner_sb_printf(sb, "const int ntiles = k1 > k0 ? (int)((k1 - k0 + %d) / %d) : 0;\n", TILE - 1, TILE);

    /* The block's query rows (unscaled: the scale is applied to the fp32 scores), rows past R
     * zero; r = (query head within the group) * S + row. */
    char *qoff = tuner__attn_q_offset(p, "b", "hq", "qi", "cc");
    tuner_sb_printf(sb, "for (int idx = tid; idx < %d; idx += %d) {\n", 16 * c->mt * (D / 8), NT);
    tuner_sb_printf(sb, "const int r = idx / %d, cc = (idx %% %d) * 8;\nhd_v4 v = {0u, 0u, 0u, 0u};\n", D / 8, D / 8);
    tuner_sb_printf(sb, "if (r < %lld) {\nconst int hq = hk * %lld + r / %lld, qi = r %% %lld;\nv = hd_ld16(%s + %s);\n}\n",
                    c->rows, (long long)d->group, (long long)d->s, (long long)d->s, p->q_ptr, qoff);
    tuner_sb_printf(sb, "*reinterpret_cast<hd_v4 *>(sq + r * %d + cc) = v;\n}\n", DP);
    free(qoff);

    if (c->load)
        emit_tma_ring(sb, p, c);
    else
        emit_cp_async_ring(sb, p, c);

    /* This thread's rows of its m tile (the mma fragment rows lane/4 and lane/4 + 8). */
    tuner_sb_printf(sb, "float o[%d][4];\n#pragma unroll\nfor (int x = 0; x < %d; x++) o[x][0] = o[x][1] = o[x][2] = "
                        "o[x][3] = 0.0f;\n",
                    D / 8, D / 8);
    tuner_sb_puts(sb, "float m_r[2] = {-HD_INF, -HD_INF}, l_r[2] = {0.0f, 0.0f};\n");
    tuner_sb_puts(sb, "const int r0 = mt * 16 + (lane >> 2);\n");
    tuner_sb_puts(sb, "const float sl2 = ");
    tuner__emit_float(sb, p->scale * 1.4426950408889634);
    tuner_sb_puts(sb, ";\n");

    tuner_sb_puts(sb, "for (int t = 0; t < ntiles; t++) {\n");
    emit_ring_wait(sb, p, c);
    tuner_sb_printf(sb, "const int kbase = kw * %d;\n", c->kpw);
    /* S = Q K^T for the warp's 16 rows and kpw keys. */
    tuner_sb_printf(sb, "float s[%d][4];\n#pragma unroll\nfor (int x = 0; x < %d; x++) s[x][0] = s[x][1] = s[x][2] = "
                        "s[x][3] = 0.0f;\n",
                    c->kpw / 8, c->kpw / 8);
    tuner_sb_printf(sb, "#pragma unroll\nfor (int ks = 0; ks < %d; ks++) {\n", D / 16);
    tuner_sb_printf(sb, "hd_u32 qa[4];\nhd_ldmatrix_x4(qa, sq + (mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * %d + "
                        "ks * 16 + (lane >> 4) * 8);\n",
                    DP);
    tuner_sb_printf(sb, "#pragma unroll\nfor (int np = 0; np < %d; np++) {\n", c->kpw / 16);
    if (c->load) /* row & 7 is lane & 7: the swizzle's XOR */
        tuner_sb_printf(sb, "hd_u32 kf[4];\nhd_ldmatrix_x4(kf, skb + (ks >> 2) * %d + (kbase + np * 16 + (lane & 7) + "
                            "(lane >> 4) * 8) * 128 + ((((ks & 3) * 2 + ((lane >> 3) & 1)) ^ (lane & 7)) << 4));\n",
                        TILE * 128);
    else
        tuner_sb_printf(sb, "hd_u32 kf[4];\nhd_ldmatrix_x4(kf, sk + (kbase + np * 16 + (lane & 7) + (lane >> 4) * 8) * %d + "
                            "ks * 16 + ((lane >> 3) & 1) * 8);\n",
                        DP);
    tuner_sb_printf(sb, "%s(s[2 * np], qa, kf);\n%s(s[2 * np + 1], qa, kf + 2);\n}\n}\n", mma, mma);

    /* Scale (base 2), mask, causality, the end of the chunk; the tile's row maxima. */
    tuner_sb_printf(sb, "const long long jt = k0 + (long long)t * %d + kbase;\n", TILE);
    tuner_sb_puts(sb, "float mx[2] = {-HD_INF, -HD_INF};\n");
    tuner_sb_printf(sb, "#pragma unroll\nfor (int x = 0; x < %d; x++) {\n#pragma unroll\nfor (int e = 0; e < 4; e++) {\n",
                    c->kpw / 8);
    tuner_sb_puts(sb, "const int rr = r0 + (e >> 1) * 8;\n");
    tuner_sb_puts(sb, "const long long jj = jt + x * 8 + (lane & 3) * 2 + (e & 1);\n");
    tuner_sb_puts(sb, "float sv_ = s[x][e] * sl2;\n");
    tuner_sb_puts(sb, "bool keep = jj < k1;\n");
    if (d->has_mask || p->causal)
        tuner_sb_printf(sb, "const int hq = hk * %lld + rr / %lld, qi = rr %% %lld;\n(void)hq;\n(void)qi;\n",
                        (long long)d->group, (long long)d->s, (long long)d->s);
    if (p->causal && p->skv_sym) /* Skv - S at launch */
        tuner_sb_printf(sb, "keep = keep && jj <= (long long)qi + (hd_skv - %lldLL);\n", (long long)d->s);
    else if (p->causal)
        tuner_sb_printf(sb, "keep = keep && jj <= (long long)qi + %lldLL;\n", p->causal_off);
    if (d->has_mask) {
        char *mv = tuner__attn_mask_log2(p, "b", "hq", "qi", "jj");
        tuner_sb_printf(sb, "if (keep && rr < %lld) sv_ += %s;\n", c->rows, mv);
        free(mv);
    }
    tuner_sb_puts(sb, "sv_ = keep ? sv_ : -HD_INF;\ns[x][e] = sv_;\nmx[e >> 1] = fmaxf(mx[e >> 1], sv_);\n}\n}\n");
    /* Online softmax: the quad of lanes that shares a row agrees on its max. A row with nothing
     * kept so far has max -inf: exponents are then taken against 0, so everything stays 0. */
    tuner_sb_puts(sb, "float mu[2];\n#pragma unroll\nfor (int h = 0; h < 2; h++) {\n"
                      "mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));\n"
                      "mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));\n"
                      "const float mn = fmaxf(m_r[h], mx[h]);\n"
                      "mu[h] = mn == -HD_INF ? 0.0f : mn;\n"
                      "const float al = hd_dec_exp2(m_r[h] - mu[h]);\n"
                      "m_r[h] = mn;\nl_r[h] *= al;\n");
    tuner_sb_printf(sb, "#pragma unroll\nfor (int x = 0; x < %d; x++) { o[x][2 * h] *= al; o[x][2 * h + 1] *= al; }\n}\n",
                    D / 8);
    tuner_sb_printf(sb, "#pragma unroll\nfor (int x = 0; x < %d; x++) {\n#pragma unroll\nfor (int e = 0; e < 4; e++) {\n"
                        "const float pe = hd_dec_exp2(s[x][e] - mu[e >> 1]);\ns[x][e] = pe;\nl_r[e >> 1] += pe;\n}\n}\n",
                    c->kpw / 8);
    /* O += P V: P's accumulator fragments are the A fragments of the next mma. */
    tuner_sb_printf(sb, "#pragma unroll\nfor (int kk = 0; kk < %d; kk++) {\n", c->kpw / 16);
    tuner_sb_printf(sb, "hd_u32 pa[4];\npa[0] = hd_pack2<%s>(s[2 * kk][0], s[2 * kk][1]);\n"
                        "pa[1] = hd_pack2<%s>(s[2 * kk][2], s[2 * kk][3]);\n"
                        "pa[2] = hd_pack2<%s>(s[2 * kk + 1][0], s[2 * kk + 1][1]);\n"
                        "pa[3] = hd_pack2<%s>(s[2 * kk + 1][2], s[2 * kk + 1][3]);\n",
                    T, T, T, T);
    tuner_sb_printf(sb, "#pragma unroll\nfor (int dp = 0; dp < %d; dp++) {\n", D / 16);
    if (c->load)
        tuner_sb_printf(sb, "hd_u32 vf[4];\nhd_ldmatrix_x4_trans(vf, svb + (dp >> 2) * %d + (kbase + kk * 16 + (lane & 7) + "
                            "((lane >> 3) & 1) * 8) * 128 + ((((dp & 3) * 2 + (lane >> 4)) ^ (lane & 7)) << 4));\n",
                        TILE * 128);
    else
        tuner_sb_printf(sb, "hd_u32 vf[4];\nhd_ldmatrix_x4_trans(vf, sv + (kbase + kk * 16 + (lane & 7) + ((lane >> 3) & 1) "
                            "* 8) * %d + dp * 16 + (lane >> 4) * 8);\n",
                        DP);
    tuner_sb_printf(sb, "%s(o[2 * dp], pa, vf);\n%s(o[2 * dp + 1], pa, vf + 2);\n}\n}\n", mma, mma);
    tuner_sb_puts(sb, "}\n"); /* tiles */

    /* The block's partial of each row: the kw warps of an m tile merge through shared memory
     * (reusing the ring, once every warp is past it) into warp kw = 0, which writes the row's
     * (m, l) - m in the log2 domain - and unnormalised O to the workspace. */
    tuner_sb_puts(sb, "#pragma unroll\nfor (int h = 0; h < 2; h++) {\n"
                      "l_r[h] += __shfl_xor_sync(0xffffffffu, l_r[h], 1);\n"
                      "l_r[h] += __shfl_xor_sync(0xffffffffu, l_r[h], 2);\n}\n");
    if (c->kw > 1) {
        tuner_sb_puts(sb, "hd_cp_async_wait_all();\n__syncthreads();\n");
        tuner_sb_puts(sb, "float *cml = reinterpret_cast<float *>(hd_smem);\n");
        tuner_sb_printf(sb, "float *cof = cml + %d;\n", c->warps * 32);
        tuner_sb_puts(sb, "if ((lane & 3) == 0) {\n#pragma unroll\nfor (int h = 0; h < 2; h++) {\n"
                          "cml[(warp * 16 + (lane >> 2) + h * 8) * 2] = m_r[h];\n"
                          "cml[(warp * 16 + (lane >> 2) + h * 8) * 2 + 1] = l_r[h];\n}\n}\n");
        tuner_sb_printf(sb, "if (kw > 0) {\nfloat *co = cof + (mt * %d + kw - 1) * %d + (lane >> 2) * %d + (lane & 3) * 2;\n",
                        c->kw - 1, 16 * D, D);
        tuner_sb_printf(sb, "#pragma unroll\nfor (int x = 0; x < %d; x++) { co[x * 8] = o[x][0]; co[x * 8 + 1] = o[x][1]; "
                            "co[8 * %d + x * 8] = o[x][2]; co[8 * %d + x * 8 + 1] = o[x][3]; }\n}\n",
                        D / 8, D, D);
        tuner_sb_puts(sb, "__syncthreads();\n");
        tuner_sb_puts(sb, "if (kw == 0) {\n#pragma unroll\nfor (int h = 0; h < 2; h++) {\n"
                          "const int row = (lane >> 2) + h * 8;\nfloat M = m_r[h];\n");
        tuner_sb_printf(sb, "#pragma unroll\nfor (int k = 1; k < %d; k++) M = fmaxf(M, cml[((mt * %d + k) * 16 + row) * 2]);\n",
                        c->kw, c->kw);
        tuner_sb_puts(sb, "const float mu = M == -HD_INF ? 0.0f : M;\nconst float a0 = hd_dec_exp2(m_r[h] - mu);\n"
                          "float L = l_r[h] * a0;\n");
        tuner_sb_printf(sb, "#pragma unroll\nfor (int x = 0; x < %d; x++) { o[x][2 * h] *= a0; o[x][2 * h + 1] *= a0; }\n",
                        D / 8);
        tuner_sb_printf(sb, "#pragma unroll\nfor (int k = 1; k < %d; k++) {\n"
                            "const float ak = hd_dec_exp2(cml[((mt * %d + k) * 16 + row) * 2] - mu);\n"
                            "L += ak * cml[((mt * %d + k) * 16 + row) * 2 + 1];\n"
                            "const float *co = cof + (mt * %d + k - 1) * %d + row * %d + (lane & 3) * 2;\n",
                        c->kw, c->kw, c->kw, c->kw - 1, 16 * D, D);
        tuner_sb_printf(sb, "#pragma unroll\nfor (int x = 0; x < %d; x++) { o[x][2 * h] += ak * co[x * 8]; "
                            "o[x][2 * h + 1] += ak * co[x * 8 + 1]; }\n}\n",
                        D / 8);
        tuner_sb_puts(sb, "m_r[h] = M;\nl_r[h] = L;\n}\n}\n");
    }
    if (c->fused && c->split == 1) {
        emit_direct_store(sb, p, c);
        tuner_sb_puts(sb, "}\n");
        return;
    }
    tuner_sb_puts(sb, "if (kw == 0) {\n#pragma unroll\nfor (int h = 0; h < 2; h++) {\nconst int rr = r0 + h * 8;\n");
    tuner_sb_printf(sb, "if (rr < %lld) {\n", c->rows);
    tuner_sb_printf(sb, "const long long gr = (b * %lld + hk) * %lld + rr;\n", (long long)d->hkv, c->rows);
    tuner_sb_printf(sb, "const long long pr = gr * %dLL + chunk;\n", c->split);
    tuner_sb_puts(sb, "if ((lane & 3) == 0) { ws[pr * 2] = m_r[h]; ws[pr * 2 + 1] = l_r[h]; }\n");
    tuner_sb_printf(sb, "float *po = ws + %s + pr * %d + (lane & 3) * 2;\n", o_base, D);
    tuner_sb_printf(sb, "#pragma unroll\nfor (int x = 0; x < %d; x++) { po[x * 8] = o[x][2 * h]; po[x * 8 + 1] = "
                        "o[x][2 * h + 1]; }\n",
                    D / 8);
    tuner_sb_puts(sb, "}\n}\n}\n");
    if (c->fused)
        emit_last_block_combine(sb, p, c);
    tuner_sb_puts(sb, "}\n");
}

/* Kernel 2: a block per query row gr = (b * Hq + h) * S + i combines the row's np partials:
 * thread t takes the 4 columns c4 = t % C4 (C4 = D / 4) of the partials q = t / C4, t / C4 + QG,
 * ... (QG = 128 / C4 groups, so that a row's partials are read by the whole block with many
 * loads in flight), and the groups' sums meet in shared memory. */
static void emit_combine(tuner_sb *sb, const tuner__attn_problem *p, const dec_cfg *c)
{
    char o_base[160];
    o_base_expr(p, c, o_base, sizeof(o_base));
    const tuner_attention_dims *d = &p->d;
    const int D = (int)d->d, C4 = D / 4, QG = 128 / C4;
    tuner_sb_puts(sb, "extern \"C\" __global__ void __launch_bounds__(128) hd_attn_decode_combine(");
    tuner__attn_emit_params(sb, p);
    tuner_sb_puts(sb, ", float *__restrict__ ws");
    tuner__emit_dim_params(sb, p->op);
    tuner_sb_puts(sb, ")\n{\n");
    tuner_sb_printf(sb, "__shared__ float wsh[%lld];\n__shared__ float red[%d][%d][4];\n__shared__ float lsh;\n", c->np,
                    QG, C4);
    tuner_sb_puts(sb, "const int tid = threadIdx.x;\nconst long long gr = blockIdx.x;\n");
    tuner_sb_printf(sb, "const float *pm = ws + gr * %lldLL;\n", 2 * c->np);
    tuner_sb_printf(sb, "const float *po = ws + %s + gr * %lldLL;\n", o_base, c->np * D);
    /* The weights 2^(m_q - M) by the first warp; a partial that kept no key (m = -inf) weighs 0,
     * and so does every one of a row that has no key at all (L = 0: the output is 0). */
    tuner_sb_printf(sb, "if (tid < 32) {\nfloat M = -HD_INF;\nfor (int q = tid; q < %lld; q += 32) M = fmaxf(M, pm[2 * q]);\n"
                        "M = hd_warp_max<32>(M);\nfloat L = 0.0f;\n"
                        "for (int q = tid; q < %lld; q += 32) {\nconst float mq = pm[2 * q];\n"
                        "const float wq = mq == -HD_INF ? 0.0f : exp2f(mq - M);\nwsh[q] = wq;\nL += wq * pm[2 * q + 1];\n}\n"
                        "L = hd_warp_sum<32>(L);\nif (tid == 0) lsh = L;\n}\n__syncthreads();\n",
                    c->np, c->np);
    tuner_sb_printf(sb, "const int c4 = tid %% %d, qg = tid / %d;\n", C4, C4);
    tuner_sb_puts(sb, "float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};\n");
    tuner_sb_printf(sb, "if (qg < %d) {\n#pragma unroll 4\nfor (int q = qg; q < %lld; q += %d) {\nconst float wq = wsh[q];\n"
                        "float v[4];\nhd_ldn_f32<float, 4>(po + (long long)q * %d + c4 * 4, v);\n"
                        "#pragma unroll\nfor (int e = 0; e < 4; e++) acc[e] += wq * v[e];\n}\n"
                        "#pragma unroll\nfor (int e = 0; e < 4; e++) red[qg][c4][e] = acc[e];\n}\n__syncthreads();\n",
                    QG, c->np, QG, D);
    tuner_sb_puts(sb, "if (qg == 0) {\n");
    tuner_sb_printf(sb, "#pragma unroll\nfor (int g = 1; g < %d; g++) {\n#pragma unroll\nfor (int e = 0; e < 4; e++) "
                        "acc[e] += red[g][c4][e];\n}\n",
                    QG);
    tuner_sb_puts(sb, "const float inv = lsh > 0.0f ? 1.0f / lsh : 0.0f;\n");
    tuner_sb_printf(sb, "const long long b = gr / %lldLL;\nconst int h = (int)((gr / %lld) %% %lld), i = (int)(gr %% %lld);\n",
                    (long long)(d->hq * d->s), (long long)d->s, (long long)d->hq, (long long)d->s);
    tuner_sb_puts(sb, "const float o0 = acc[0] * inv, o1 = acc[1] * inv, o2 = acc[2] * inv, o3 = acc[3] * inv;\n");
    const char *vars[4] = {"o0", "o1", "o2", "o3"};
    emit_store_n(sb, p, "b", "h", "i", "(c4 * 4)", vars, 4);
    tuner_sb_puts(sb, "}\n}\n");
}

static int decode_generate(const tuner_op *op, const tuner_target *t, const tuner_schedule *s, tuner_program *prog,
                           char **err)
{
    tuner__attn_problem p;
    if (tuner__attn_problem_init(op, &p, err) < 0)
        return -EINVAL;
    const tuner_arch *a = tuner__arch(t);
    dec_cfg c;
    if (!a || !decode_applies(op, t) || !cfg_of(&p, a, s, &c, false)) {
        *err = strdup("attention_decode: invalid parameters for this op");
        return -EINVAL;
    }
    tuner_sb sb;
    tuner_sb_init(&sb);
    tuner__prelude(&sb, t->sm);
    if (c.load)
        tuner_sb_puts(&sb, tuner__hopper_helpers);
    /* 2^x; ex2.approx gives +0 for -inf, which the masked keys rely on. */
    tuner_sb_puts(&sb, "HD_INLINE float hd_dec_exp2(float x) { float y; asm(\"ex2.approx.ftz.f32 %0, %1;\" : "
                       "\"=f\"(y) : \"f\"(x)); return y; }\n");
    if (c.fused && c.split > 1)
        /* The last block's reads of the other blocks' partials: L2, never a stale L1 line. */
        tuner_sb_puts(&sb, "HD_INLINE void hd_dec_ldcg2(const float *p, float *v) { asm volatile(\"ld.global.cg.v2.f32 "
                           "{%0, %1}, [%2];\" : \"=f\"(v[0]), \"=f\"(v[1]) : \"l\"(p) : \"memory\"); }\n"
                           "HD_INLINE void hd_dec_ldcg4(const float *p, float *v) { asm volatile(\"ld.global.cg.v4.f32 "
                           "{%0, %1, %2, %3}, [%4];\" : \"=f\"(v[0]), \"=f\"(v[1]), \"=f\"(v[2]), \"=f\"(v[3]) : "
                           "\"l\"(p) : \"memory\"); }\n");
    emit_part(&sb, &p, &c);
    if (!c.fused)
        emit_combine(&sb, &p, &c);

    tuner_launch *k1 = &prog->kernels[0], *k2 = &prog->kernels[1];
    memset(k1, 0, sizeof(*k1));
    snprintf(k1->name, sizeof(k1->name), "%s", c.fused ? "hd_attn_decode" : "hd_attn_decode_part");
    k1->grid[0] = (unsigned)c.split;
    k1->grid[1] = (unsigned)p.d.hkv;
    k1->grid[2] = (unsigned)p.d.b;
    k1->block[0] = (unsigned)c.block;
    k1->block[1] = k1->block[2] = 1;
    k1->shared_bytes = tuner__dynamic_shared((unsigned)c.smem, (unsigned)dec_static_bytes(&c));
    tuner__launch_args(k1, op);
    if (c.ws_bytes)
        k1->args[k1->n_args++] = TUNER_BUF_WORKSPACE;
    prog->n_kernels = 1;
    if (!c.fused) {
        *k2 = *k1; /* before the maps: the combine reads none */
        snprintf(k2->name, sizeof(k2->name), "hd_attn_decode_combine");
        k2->grid[0] = (unsigned)c.nrows;
        k2->grid[1] = k2->grid[2] = 1;
        k2->block[0] = 128;
        k2->shared_bytes = 0;
        prog->n_kernels = 2;
    }
    if (c.load) {
        k1->maps[k1->n_maps++] = tuner__attn_tmap(&p, 1, (uint32_t)c.tile);
        k1->maps[k1->n_maps++] = tuner__attn_tmap(&p, 2, (uint32_t)c.tile);
    }
    prog->workspace_bytes = c.ws_bytes;
    prog->source = tuner_sb_take(&sb);
    prog->output_dtype = op->output.dtype;
    if (prog->source && tuner_op_is_dynamic(op)) {
        /* The blocks' grid.z and the combine's rows follow B; the workspace's layout (O after
         * B * Hq * S * split pairs, the counters after the largest B's O) is the largest B's,
         * which both kernels share. */
        int r = tuner__launch_dim_args(k1, op);
        if (r == 0 && !c.fused)
            r = tuner__launch_dim_args(k2, op);
        if (r == 0 && p.b_sym)
            r = tuner__grid_rule(k1, 2, op, p.b_sym, 1, 1, 1, 0);
        if (r == 0 && p.b_sym && !c.fused)
            r = tuner__grid_rule(k2, 0, op, p.b_sym, p.d.hq * p.d.s, 1, 1, 0);
        if (r < 0) {
            *err = strdup("attention_decode: the launch's dims arguments or grid rules do not fit the op's sizes");
            return r;
        }
    }
    return prog->source ? 0 : -ENOMEM;
}

/* ---- cost model ----------------------------------------------------------------------------- */

/* The constants below are fitted on the H200's timings of every candidate of issue 38's six rows
 * (B 1/16/64 x Skv 4K/32K, 32/8 heads, D 128, f16; L2 flushed between timings):
 * bench/results/2026-11-30-h200-session10/c/decode.log, read by bench/decode_fit.py, before and
 * after in bench/results/2026-11-30-h200-session10/decode_model.md. */
/* Launching a kernel and ramping its blocks up, us. */
#define DEC_LAUNCH_US 2.5
/* A loaded DRAM round trip, us: a block's first tile, and the refill a ring of `stages` slots
 * hides over stages - 1 tiles (0.75 and 1 us rank the log's rows alike): at B1 kv4K split 1, 2
 * slots of 64 keys take 78.7 us, 3 slots 67.7 us (one tile per round trip against the compute
 * of one tile). */
#define DEC_LAT_US 1.0
/* The share of the arch's DRAM figure the stream reaches with enough loads in flight. The
 * sm_90 entry's dram_gbps is an H100's 3000 GB/s; the H200 streamed 4.04-4.19 TB/s at B64
 * kv32K (decode.log's best rows, 1.35-1.40x) and 3.2-3.4 TB/s at B16 kv4K; 1.3 x 3000 =
 * 3.9 TB/s ranks both. */
#define DEC_STREAM_SHARE 1.3
/* How much faster K and V stream by TMA (load 1) than by cp.async, at both rates above: the
 * H200 read a decode-shaped stream with nothing else to do (bench/read_bw.cu, session 22 call
 * a) at 4.13-4.23 TB/s by the cp.async ring and 4.36-4.58 by one bulk copy per tile of K and of
 * V at Skv 32K (1.06-1.09x), 3.57-3.62 against 3.87-4.10 at Skv 4K (1.08-1.13x). */
#define DEC_TMA_STREAM 1.08
/* What one SM streams at most, bytes per us: at least the 16.8 MB / 57.9 us / 8 = 36 KB/us an
 * SM of B1 kv4K split 1 (8 blocks on 8 SMs, tiles of 128 keys); 40 KiB/us ranks the six rows
 * best among 30-50. */
#define DEC_SM_STREAM (40.0 * 1024)
/* One warp's dependent chain per tile, us: a fixed step (the ring's wait, __syncthreads, the
 * next cp.async's issue) and per key of its slice at D 128 (the QK mma, the online softmax's
 * max, exp2 and shuffles, the PV mma of its 16 rows). Split 1 at B1 kv4K (one block per SM, one
 * warp per scheduler) is compute-bound: 64 steps of 16 keys a warp take 67.7 us (block 128,
 * tile 64), 32 steps of 32 keys 58.0 us (tile 128), 64 of 32 keys 118.5 us (block 64, tile
 * 64): about 0.3 us a step and 0.05-0.06 a key; the fit over the six rows gives 0.3 and 0.065.
 * Half of the per-key part is the softmax (per key), half the mma and ldmatrix (per key and 16
 * columns of D); a mask adds about a third to the softmax. */
#define DEC_STEP_US 0.3
#define DEC_KEY_US 0.065
/* Warps per scheduler (4 an SM) whose chains overlap before they share its issue: where an SM
 * holds more, the chains' time grows with them. 1 and 1.5 rank the six rows alike (mean rho
 * within 0.01), 2 and 3 worse; no row isolates it. */
#define DEC_WARPS_PER_SCHED 1.0
/* What every wave of blocks costs besides its tiles, us: a block's start (q's round trip) and
 * end (its warps' merge in shared memory), and, where the blocks write partials, their writes'
 * round trip, the fence and the counter's atomic. B1 kv4K split 32 with tiles of 128 keys (one
 * tile a chunk) takes 33.2 us in two waves of one block an SM against 25.2 us in one wave with
 * tiles of 64: a wave costs about 8 us where its tile computes in 2. */
#define DEC_BLOCK_US 2.0
#define DEC_PARTIAL_US 4.0
/* The last block's combine: the fence and the counter's atomic, us; then an L2 round trip for
 * the (m, l) pairs and one per chunk and round of (row, 4 columns) items of a thread: the chunk
 * loop's ld.global.cg are volatile asm, issued in order. At B1 kv4K split 64 the last block's
 * combine costs 18-21 us over the combine kernel (38.2 against 17.3 us at block 64, 39.0
 * against 21.0 at block 128): 64 chunks x 0.3 us; split 16 against split 8 one launch,
 * 19.7 against 17.3 us. */
#define DEC_ARRIVE_US 0.5
#define DEC_L2_LAT_US 0.3

/* Blocks of configuration c resident on one SM: threads, registers (about 128 a thread, 255 at
 * head dim 256, as ptxas allocates them) and shared memory per SM. */
static int blocks_per_sm(const tuner_arch *a, const tuner__attn_problem *p, const dec_cfg *c)
{
    const int regs = p->d.d > 128 ? 255 : 128;
    int bps = a->max_threads_per_sm / c->block;
    if (a->regs_per_sm / (c->block * regs) < bps)
        bps = a->regs_per_sm / (c->block * regs);
    /* The driver reserves 1 KiB of shared memory per block. */
    if ((int)(a->max_smem_per_sm / (c->smem + 1024)) < bps)
        bps = (int)(a->max_smem_per_sm / (c->smem + 1024));
    return bps < 1 ? 1 : bps;
}

/* The combine after the blocks' partials, us: none when split 1 stores from registers; the last
 * block's (the arrival, the (m, l) round trip, then a round trip per chunk for each round of
 * the group's (row, 4 columns) items over the block's threads: it grows with split, which is
 * what makes split 64 in one launch lose to the combine kernel at B1 kv4K); or a second kernel (a
 * launch, a round trip, the workspace read across the GPU). */
static double dec_combine_us(const tuner_arch *a, const tuner__attn_problem *p, const dec_cfg *c)
{
    if (c->fused && c->split == 1)
        return 0.0;
    if (c->fused) {
        const double rounds = ceil((double)c->rows * (double)(p->d.d / 4) / (double)c->block);
        return DEC_ARRIVE_US + DEC_L2_LAT_US * (1.0 + (double)c->split * rounds);
    }
    return DEC_LAUNCH_US + DEC_LAT_US + (double)c->ws_bytes / (a->dram_gbps * 1e3 * DEC_STREAM_SHARE);
}

/* A launch, then the waves of blocks, each a pipeline over its chunk's tiles, or the stream of
 * all bytes at the DRAM's rate if that is longer; then the combine. A tile of a block takes the
 * longest of: its warps' compute chain (a step and kpw keys each, slower where more warps than
 * DEC_WARPS_PER_SCHED share a scheduler), its bytes at the block's share of its SM's stream
 * (DEC_SM_STREAM, or the DRAM's rate over the SMs in use, shared by the SM's blocks), and the
 * round trip that the ring's stages - 1 tiles in flight cover. A chunk shorter than the ring is
 * all issued at once: one round trip, then its tiles. A wave adds its blocks' start and end
 * (DEC_BLOCK_US, DEC_PARTIAL_US). */
static double decode_predict(const tuner_op *op, const tuner_target *t, const tuner_schedule *s)
{
    const tuner_arch *a = tuner__arch(t);
    tuner__attn_problem p;
    dec_cfg c;
    if (!a || tuner__attn_problem_init(op, &p, NULL) < 0 || !cfg_of(&p, a, s, &c, true))
        return 1e12;
    const tuner_attention_dims *d = &p.d;
    const int es = tuner_dtype_size(p.dt);
    const double stream = c.load ? DEC_TMA_STREAM : 1.0;
    const double bw = a->dram_gbps * 1e3 * DEC_STREAM_SHARE * stream; /* bytes per us */
    const double sms = (double)a->sm_count;
    /* K, V, q, the mask, epilogue operands and the output (the op's minimum), and the partials
     * the blocks write (none at split 1 in one kernel). */
    const double bytes = tuner__attn_min_bytes(&p) + (double)c.ws_bytes;
    const double blocks = (double)c.split * (double)d->hkv * (double)d->b;
    const int bps = blocks_per_sm(a, &p, &c);
    const double waves = ceil(blocks / (bps * sms));
    const double used = fmin(blocks, sms);
    /* Blocks an SM holds at once in a wave. */
    const double nb = fmin((double)bps, ceil(blocks / sms));
    /* The compute chain of a tile: kpw keys of each warp; half of DEC_KEY_US scales with D. */
    const double soft = 0.5 * (d->has_mask ? 1.33 : 1.0), mma = 0.5 * (double)d->d / 128.0;
    double comp = DEC_STEP_US + c.kpw * DEC_KEY_US * (soft + mma);
    const double per_sched = nb * c.warps / 4.0;
    if (per_sched > DEC_WARPS_PER_SCHED)
        comp *= per_sched / DEC_WARPS_PER_SCHED;
    /* The tile's K and V at the block's share of its SM's stream. */
    const double sm_rate = fmin(DEC_SM_STREAM * stream, bw / used);
    const double tile_bytes = 2.0 * c.tile * (double)d->d * es;
    const double load = tile_bytes / (sm_rate / nb);
    const double ntiles = ceil((double)c.ch / c.tile);
    double block_us;
    if (ntiles < c.stages)
        block_us = DEC_LAT_US + ntiles * fmax(comp, load);
    else
        block_us = DEC_LAT_US + ntiles * fmax(fmax(comp, load), (DEC_LAT_US + load) / (c.stages - 1));
    block_us += DEC_BLOCK_US + (c.fused && c.split == 1 ? 0.0 : DEC_PARTIAL_US);
    const double tm = fmax(waves * block_us, bytes / bw);
    return DEC_LAUNCH_US + tm + dec_combine_us(a, &p, &c);
}

/* The default: the schedule the cost model ranks first (so that tune "none" and "model" agree
 * on these ops). */
static int decode_preferred(const tuner_op *op, const tuner_target *t, tuner_schedule *ret)
{
    return tuner__model_first(&tuner__attn_decode, op, t, ret);
}

const tuner_template tuner__attn_decode = {
    .name = "attention_decode",
    .space_signature = "attention_decode v3: S<=16, group*S<=64, q/k/v 16B-aligned; split{1..64 pow2, chunk>=64 "
                       "keys, last chunk non-empty, not if split/2 gives >=4 blocks/SM} block{64,128,256} "
                       "kv_tile{32,64,128} stages{2,3,4,6; 6 not with 128} fused{1; 0 from split 2 where a group's "
                       "partials reach 128 KiB} load{1 on sm_90a: TMA boxes of 64 columns, 128B swizzle, mbarrier ring; "
                       "0: cp.async into padded rows}; warps = m tiles(1,2,4) x key slices of 16 or 32 keys (16 for "
                       "D 256); ring+q, the warps' merge and the last block's weights in smem <= max; mma.sync QK "
                       "and PV; split 1 fused stores from registers; else fp32 partials (m log2, l, O) per row and "
                       "chunk in the workspace, combined by the group's last block (a gridid-tagged counter) or "
                       "a combine kernel",
    .applies = decode_applies,
    .enumerate = decode_enumerate,
    .generate = decode_generate,
    .predict_us = decode_predict,
    .preferred = decode_preferred,
    .default_rank = TUNER_RANK_SPECIALISED,
    .dynamic_dims = true,
};
