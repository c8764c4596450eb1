/* tuner/attn/tests/test_attn_decode.c - the attention_decode template (tuner/attn/decode.c):
 * where it applies, its spaces, its default, its programs' launches and workspace, and NVRTC +
 * ptxas compiles of sampled candidates for sm_80 and sm_90a over the shapes of decoding: S = 1,
 * 5 and 16 against Skv 4096, 32768, 1000 (no multiple of a tile) and 1; GQA 32/8, MHA 16/16,
 * MQA 8/1; every head dim; f16 and bf16; both layouts; causal; an [Skv] f32 and a [B,1,S,Skv]
 * f16 mask; an epilogue; two dynamic ops (B and Skv named, Skv alone). Ops are built by hand as
 * the validator would leave them (output: q's shape). Per case and target the default
 * (tune:"none") and, by HIDET_TEST_SAMPLE, two more candidates are compiled; every candidate of
 * every space is generated and its launches checked (one kernel, or two for `fused` 0; a
 * workspace except for split 1 in one kernel).
 * The decode rows (B 1/16/64 x Skv 4K/32K, 32/8 heads, hd 128) print the model's pick and
 * the next four; their defaults must be the model's first over the whole space, not the starved
 * two-slot ring; the combine kernel must rank first only where a group's partials are large (an
 * MQA step's 64-row groups split 64 ways). The same rows' every candidate, as the H200 timed
 * them (bench/results/2026-11-30-h200-session10/c/decode.log, copied below by
 * `bench/decode_fit.py LOG --c-table`): the model's pick must measure within 5% of the best, and
 * its ranking keep a Spearman rho >= 0.65 against the measurements on every row.
 */
#include "tuner/tests/common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/attn/attn.h"
#include "tuner/attn/tests/ops.h"
#include "tuner/core.h"
#include "tuner/space.h"
#include "tuner/template.h"

enum { MASK_NONE, MASK_KEYS_F32, MASK_B1SK_F16 };

typedef struct shape {
    long long b, hq, hkv, s, skv, d;
    tuner_dtype dt;
    bool bshd, causal;
    int mask;
    bool epilogue;
    bool packed; /* layout bshd_packed: one qkv [B,S,Hq+2Hkv,D] (Skv = S), the mask inputs[1] */
} shape;

static tuner_op attn_op(const shape *sh)
{
    ta_shape ts = {.dt = sh->dt, .b = sh->b, .hq = sh->hq, .hkv = sh->hkv, .s = sh->s, .skv = sh->skv, .d = sh->d,
                   .bshd = sh->bshd, .causal = sh->causal, .packed = sh->packed};
    if (sh->mask == MASK_KEYS_F32) {
        ts.mask_rank = 1;
        ts.mask_shape[0] = sh->skv;
        ts.mask_dt = TUNER_F32;
    } else if (sh->mask == MASK_B1SK_F16) {
        ts.mask_rank = 4;
        memcpy(ts.mask_shape, (long long[4]){sh->b, 1, sh->s, sh->skv}, sizeof(ts.mask_shape));
        ts.mask_dt = TUNER_F16;
    }
    tuner_op op = ta_attention(&ts);
    if (sh->epilogue) {
        /* + a bias over the head dim, then silu. */
        long long bias[1] = {sh->d};
        t_add_epilogue(&op, TUNER_EW_ADD, 1, bias, TUNER_EW_SILU);
    }
    return op;
}

/* One kernel (fused 1: hd_attn_decode, a workspace only from split 2, for the partials and a
 * counter per (batch, kv head) group) or two (fused 0: the partials, then the combine, a block
 * per query row), with the grid (chunk, kv head, batch). */
static bool launch_sane(const tuner_program *p, const tuner_op *op, const tuner_schedule *s)
{
    const tuner_attention_dims d = tuner_attention_dims_of(op);
    const int split = tuner_schedule_param(s, "split", -1), block = tuner_schedule_param(s, "block", -1);
    const int fused = tuner_schedule_param(s, "fused", -1);
    if (fused != 0 && fused != 1)
        return false;
    if (fused ? p->n_kernels != 1 || strcmp(p->kernels[0].name, "hd_attn_decode")
              : p->n_kernels != 2 || split < 2 || strcmp(p->kernels[0].name, "hd_attn_decode_part") ||
                    strcmp(p->kernels[1].name, "hd_attn_decode_combine"))
        return false;
    const tuner_launch *k1 = &p->kernels[0];
    if ((long long)k1->grid[0] != split || (long long)k1->grid[1] != d.hkv || (long long)k1->grid[2] != d.b ||
        (int)k1->block[0] != block || k1->shared_bytes == 0)
        return false;
    if (!fused && ((long long)p->kernels[1].grid[0] != d.b * d.hq * d.s || p->kernels[1].block[0] != 128))
        return false;
    /* load 1: K's and V's maps on the first kernel (64-column boxes of a tile's keys), none on
     * the combine */
    const int load = tuner_schedule_param(s, "load", 0), tile = tuner_schedule_param(s, "kv_tile", 0);
    if (k1->n_maps != (load ? 2 : 0) || (!fused && p->kernels[1].n_maps != 0))
        return false;
    for (int m = 0; m < k1->n_maps; m++) {
        const tuner_tmap *tm = &k1->maps[m];
        const int buf = op->attrs.attention.packed ? TUNER_BUF_INPUT0 : TUNER_BUF_INPUT0 + 1 + m;
        uint32_t rows = 1;
        for (int x = 1; x < tm->rank; x++)
            rows *= tm->box[x];
        if (tm->buf != buf || tm->box[0] != 64 || (int)rows != tile || tm->swizzle != 128 || tuner_tmap_check(tm, NULL, 0, NULL, 0) < 0)
            return false;
    }
    const bool ws = !(fused && split == 1);
    for (int k = 0; k < p->n_kernels; k++) {
        const tuner_launch *l = &p->kernels[k];
        /* inputs, output, the workspace when there is one, then a dynamic op's sizes */
        const int nd = op->n_dims;
        if (l->n_args != op->n_inputs + 1 + ws + nd || l->args[op->n_inputs] != TUNER_BUF_OUTPUT ||
            (ws && l->args[op->n_inputs + 1] != TUNER_BUF_WORKSPACE))
            return false;
        for (int x = 0; x < nd; x++)
            if (l->args[op->n_inputs + 1 + ws + x] != TUNER_ARG_DIM0 + x)
                return false;
    }
    if (!ws)
        return p->workspace_bytes == 0;
    /* At least (m, l) and O[D] per query row and chunk, and a counter per group when fused. */
    return p->workspace_bytes >=
           (size_t)(d.b * d.hq * d.s * split * (d.d + 2)) * sizeof(float) + (fused ? (size_t)(d.b * d.hkv) * 8 : 0);
}

/* attn_op of sh as a dynamic op: B named "b" (when nb) and Skv "k" on q, k, v, a [Skv] mask
 * and the output, sized at the dims' max (gpu_attn_decode runs the same ops). */
static tuner_op dyn_op(const shape *sh, bool nb)
{
    tuner_op op = attn_op(sh);
    ta_name_b_skv(&op, nb, sh->b, sh->skv, sh->bshd, sh->mask == MASK_KEYS_F32);
    return op;
}

/* The H200's timings of every candidate of issue 38's six rows (sm_90a, L2 flushed between
 * timings): {row, split, block, kv_tile, stages, fused, measured us}. */
typedef struct timed {
    int row, split, block, tile, stages, fused;
    double us;
} timed;
static const timed h200_timed[] = {
    /* 0: B1 32/8 S1 Skv4096 D128 f16, 120 candidates */
    {0, 1, 128, 64, 2, 1, 78.66}, {0, 1, 128, 64, 3, 1, 67.65}, {0, 1, 128, 64, 4, 1, 67.10},
    {0, 1, 128, 64, 6, 1, 67.10}, {0, 1, 128, 128, 2, 1, 57.89}, {0, 1, 128, 128, 3, 1, 57.98},
    {0, 1, 64, 64, 2, 1, 118.46}, {0, 1, 64, 64, 3, 1, 118.62}, {0, 1, 64, 64, 4, 1, 122.40},
    {0, 1, 64, 64, 6, 1, 118.78}, {0, 1, 64, 32, 2, 1, 128.83}, {0, 1, 64, 32, 3, 1, 108.93},
    {0, 1, 64, 32, 4, 1, 107.62}, {0, 1, 64, 32, 6, 1, 108.48}, {0, 1, 256, 128, 2, 1, 64.32},
    {0, 1, 256, 128, 3, 1, 59.49}, {0, 2, 128, 64, 2, 1, 48.32}, {0, 2, 128, 64, 3, 1, 39.04},
    {0, 2, 128, 64, 4, 1, 38.66}, {0, 2, 128, 64, 6, 1, 38.62}, {0, 2, 128, 128, 2, 1, 36.32},
    {0, 2, 128, 128, 3, 1, 35.71}, {0, 2, 64, 64, 2, 1, 64.10}, {0, 2, 64, 64, 3, 1, 63.87},
    {0, 2, 64, 64, 4, 1, 63.36}, {0, 2, 64, 64, 6, 1, 63.36}, {0, 2, 64, 32, 2, 1, 70.78},
    {0, 2, 64, 32, 3, 1, 57.95}, {0, 2, 64, 32, 4, 1, 57.15}, {0, 2, 64, 32, 6, 1, 57.98},
    {0, 2, 256, 128, 2, 1, 39.17}, {0, 2, 256, 128, 3, 1, 37.60}, {0, 4, 128, 64, 2, 1, 29.38},
    {0, 4, 128, 64, 3, 1, 24.29}, {0, 4, 128, 64, 4, 1, 23.94}, {0, 4, 128, 64, 6, 1, 23.58},
    {0, 4, 128, 128, 2, 1, 23.55}, {0, 4, 128, 128, 3, 1, 22.21}, {0, 4, 64, 64, 2, 1, 36.86},
    {0, 4, 64, 64, 3, 1, 35.78}, {0, 4, 64, 64, 4, 1, 35.97}, {0, 4, 64, 64, 6, 1, 35.26},
    {0, 4, 64, 32, 2, 1, 40.99}, {0, 4, 64, 32, 3, 1, 34.43}, {0, 4, 64, 32, 4, 1, 33.95},
    {0, 4, 64, 32, 6, 1, 34.40}, {0, 4, 256, 128, 2, 1, 26.02}, {0, 4, 256, 128, 3, 1, 24.45},
    {0, 8, 128, 64, 2, 1, 21.92}, {0, 8, 128, 64, 3, 1, 18.62}, {0, 8, 128, 64, 4, 1, 18.24},
    {0, 8, 128, 64, 6, 1, 17.34}, {0, 8, 128, 128, 2, 1, 19.36}, {0, 8, 128, 128, 3, 1, 17.44},
    {0, 8, 64, 64, 2, 1, 23.84}, {0, 8, 64, 64, 3, 1, 23.10}, {0, 8, 64, 64, 4, 1, 22.56},
    {0, 8, 64, 64, 6, 1, 22.82}, {0, 8, 64, 32, 2, 1, 27.17}, {0, 8, 64, 32, 3, 1, 23.26},
    {0, 8, 64, 32, 4, 1, 22.88}, {0, 8, 64, 32, 6, 1, 22.98}, {0, 8, 256, 128, 2, 1, 21.44},
    {0, 8, 256, 128, 3, 1, 19.33}, {0, 16, 128, 64, 2, 1, 20.77}, {0, 16, 128, 64, 3, 1, 20.06},
    {0, 16, 128, 64, 4, 1, 19.71}, {0, 16, 128, 64, 6, 1, 19.84}, {0, 16, 128, 128, 2, 1, 20.58},
    {0, 16, 128, 128, 3, 1, 20.10}, {0, 16, 64, 64, 2, 1, 22.14}, {0, 16, 64, 64, 3, 1, 20.80},
    {0, 16, 64, 64, 4, 1, 20.61}, {0, 16, 64, 64, 6, 1, 20.67}, {0, 16, 64, 32, 2, 1, 23.39},
    {0, 16, 64, 32, 3, 1, 21.41}, {0, 16, 64, 32, 4, 1, 20.70}, {0, 16, 64, 32, 6, 1, 20.54},
    {0, 16, 256, 128, 2, 1, 22.21}, {0, 16, 256, 128, 3, 1, 21.73}, {0, 32, 128, 64, 2, 1, 24.67},
    {0, 32, 128, 64, 3, 1, 25.18}, {0, 32, 128, 64, 4, 1, 32.51}, {0, 32, 128, 64, 6, 1, 32.70},
    {0, 32, 128, 128, 2, 1, 33.15}, {0, 32, 128, 128, 3, 1, 33.18}, {0, 32, 64, 64, 2, 1, 25.79},
    {0, 32, 64, 64, 3, 1, 25.70}, {0, 32, 64, 64, 4, 1, 34.24}, {0, 32, 64, 64, 6, 1, 34.46},
    {0, 32, 64, 32, 2, 1, 26.08}, {0, 32, 64, 32, 3, 1, 25.41}, {0, 32, 64, 32, 4, 1, 25.44},
    {0, 32, 64, 32, 6, 1, 25.47}, {0, 32, 256, 128, 2, 1, 36.96}, {0, 32, 256, 128, 3, 1, 36.99},
    {0, 64, 128, 64, 2, 1, 39.01}, {0, 64, 128, 64, 3, 1, 46.40}, {0, 64, 128, 64, 4, 1, 62.02},
    {0, 64, 128, 64, 6, 1, 62.14}, {0, 64, 64, 64, 2, 1, 39.81}, {0, 64, 64, 64, 3, 1, 48.10},
    {0, 64, 64, 64, 4, 1, 63.68}, {0, 64, 64, 64, 6, 1, 64.06}, {0, 64, 64, 32, 2, 1, 38.24},
    {0, 64, 64, 32, 3, 1, 38.40}, {0, 64, 64, 32, 4, 1, 39.46}, {0, 64, 64, 32, 6, 1, 48.00},
    {0, 64, 128, 64, 2, 0, 20.96}, {0, 64, 128, 64, 3, 0, 20.45}, {0, 64, 128, 64, 4, 0, 24.74},
    {0, 64, 128, 64, 6, 0, 24.74}, {0, 64, 64, 64, 2, 0, 19.90}, {0, 64, 64, 64, 3, 0, 20.51},
    {0, 64, 64, 64, 4, 0, 25.95}, {0, 64, 64, 64, 6, 0, 26.50}, {0, 64, 64, 32, 2, 0, 17.25},
    {0, 64, 64, 32, 3, 0, 17.73}, {0, 64, 64, 32, 4, 0, 18.98}, {0, 64, 64, 32, 6, 0, 19.39},
    /* 1: B1 32/8 S1 Skv32768 D128 f16, 128 candidates */
    {1, 1, 128, 64, 2, 1, 578.37}, {1, 1, 128, 64, 3, 1, 503.42}, {1, 1, 128, 64, 4, 1, 501.57},
    {1, 1, 128, 64, 6, 1, 503.90}, {1, 1, 128, 128, 2, 1, 420.61}, {1, 1, 128, 128, 3, 1, 409.89},
    {1, 1, 64, 64, 2, 1, 909.34}, {1, 1, 64, 64, 3, 1, 936.29}, {1, 1, 64, 64, 4, 1, 911.68},
    {1, 1, 64, 64, 6, 1, 911.81}, {1, 1, 64, 32, 2, 1, 986.85}, {1, 1, 64, 32, 3, 1, 830.82},
    {1, 1, 64, 32, 4, 1, 826.75}, {1, 1, 64, 32, 6, 1, 830.37}, {1, 1, 256, 128, 2, 1, 451.42},
    {1, 1, 256, 128, 3, 1, 426.78}, {1, 2, 128, 64, 2, 1, 318.34}, {1, 2, 128, 64, 3, 1, 258.75},
    {1, 2, 128, 64, 4, 1, 258.08}, {1, 2, 128, 64, 6, 1, 261.22}, {1, 2, 128, 128, 2, 1, 234.53},
    {1, 2, 128, 128, 3, 1, 237.22}, {1, 2, 64, 64, 2, 1, 456.86}, {1, 2, 64, 64, 3, 1, 457.28},
    {1, 2, 64, 64, 4, 1, 456.03}, {1, 2, 64, 64, 6, 1, 457.22}, {1, 2, 64, 32, 2, 1, 491.90},
    {1, 2, 64, 32, 3, 1, 403.49}, {1, 2, 64, 32, 4, 1, 398.85}, {1, 2, 64, 32, 6, 1, 403.23},
    {1, 2, 256, 128, 2, 1, 247.97}, {1, 2, 256, 128, 3, 1, 240.00}, {1, 4, 128, 64, 2, 1, 161.79},
    {1, 4, 128, 64, 3, 1, 132.19}, {1, 4, 128, 64, 4, 1, 131.30}, {1, 4, 128, 64, 6, 1, 131.04},
    {1, 4, 128, 128, 2, 1, 124.06}, {1, 4, 128, 128, 3, 1, 118.72}, {1, 4, 64, 64, 2, 1, 232.77},
    {1, 4, 64, 64, 3, 1, 233.25}, {1, 4, 64, 64, 4, 1, 232.03}, {1, 4, 64, 64, 6, 1, 229.66},
    {1, 4, 64, 32, 2, 1, 254.59}, {1, 4, 64, 32, 3, 1, 208.42}, {1, 4, 64, 32, 4, 1, 206.27},
    {1, 4, 64, 32, 6, 1, 207.90}, {1, 4, 256, 128, 2, 1, 131.58}, {1, 4, 256, 128, 3, 1, 125.57},
    {1, 8, 128, 64, 2, 1, 94.43}, {1, 8, 128, 64, 3, 1, 72.22}, {1, 8, 128, 64, 4, 1, 70.69},
    {1, 8, 128, 64, 6, 1, 70.43}, {1, 8, 128, 128, 2, 1, 73.63}, {1, 8, 128, 128, 3, 1, 62.78},
    {1, 8, 64, 64, 2, 1, 113.66}, {1, 8, 64, 64, 3, 1, 110.72}, {1, 8, 64, 64, 4, 1, 110.21},
    {1, 8, 64, 64, 6, 1, 110.50}, {1, 8, 64, 32, 2, 1, 138.08}, {1, 8, 64, 32, 3, 1, 110.46},
    {1, 8, 64, 32, 4, 1, 108.93}, {1, 8, 64, 32, 6, 1, 109.57}, {1, 8, 256, 128, 2, 1, 78.75},
    {1, 8, 256, 128, 3, 1, 64.54}, {1, 16, 128, 64, 2, 1, 63.07}, {1, 16, 128, 64, 3, 1, 52.35},
    {1, 16, 128, 64, 4, 1, 52.61}, {1, 16, 128, 64, 6, 1, 53.54}, {1, 16, 128, 128, 2, 1, 53.57},
    {1, 16, 128, 128, 3, 1, 52.03}, {1, 16, 64, 64, 2, 1, 67.30}, {1, 16, 64, 64, 3, 1, 60.42},
    {1, 16, 64, 64, 4, 1, 60.06}, {1, 16, 64, 64, 6, 1, 60.64}, {1, 16, 64, 32, 2, 1, 82.78},
    {1, 16, 64, 32, 3, 1, 66.37}, {1, 16, 64, 32, 4, 1, 63.71}, {1, 16, 64, 32, 6, 1, 63.49},
    {1, 16, 256, 128, 2, 1, 56.10}, {1, 16, 256, 128, 3, 1, 53.70}, {1, 32, 128, 64, 2, 1, 58.59},
    {1, 32, 128, 64, 3, 1, 56.22}, {1, 32, 128, 64, 4, 1, 65.73}, {1, 32, 128, 64, 6, 1, 65.63},
    {1, 32, 128, 128, 2, 1, 67.04}, {1, 32, 128, 128, 3, 1, 64.16}, {1, 32, 64, 64, 2, 1, 58.56},
    {1, 32, 64, 64, 3, 1, 56.83}, {1, 32, 64, 64, 4, 1, 75.10}, {1, 32, 64, 64, 6, 1, 75.14},
    {1, 32, 64, 32, 2, 1, 64.77}, {1, 32, 64, 32, 3, 1, 57.28}, {1, 32, 64, 32, 4, 1, 57.18},
    {1, 32, 64, 32, 6, 1, 56.99}, {1, 32, 256, 128, 2, 1, 71.10}, {1, 32, 256, 128, 3, 1, 67.33},
    {1, 64, 128, 64, 2, 1, 73.34}, {1, 64, 128, 64, 3, 1, 75.04}, {1, 64, 128, 64, 4, 1, 88.48},
    {1, 64, 128, 64, 6, 1, 88.00}, {1, 64, 128, 128, 2, 1, 89.15}, {1, 64, 128, 128, 3, 1, 85.98},
    {1, 64, 64, 64, 2, 1, 76.48}, {1, 64, 64, 64, 3, 1, 80.10}, {1, 64, 64, 64, 4, 1, 100.16},
    {1, 64, 64, 64, 6, 1, 100.13}, {1, 64, 64, 32, 2, 1, 69.79}, {1, 64, 64, 32, 3, 1, 68.48},
    {1, 64, 64, 32, 4, 1, 76.38}, {1, 64, 64, 32, 6, 1, 82.43}, {1, 64, 256, 128, 2, 1, 96.29},
    {1, 64, 256, 128, 3, 1, 91.81}, {1, 64, 128, 64, 2, 0, 60.38}, {1, 64, 128, 64, 3, 0, 55.42},
    {1, 64, 128, 64, 4, 0, 60.19}, {1, 64, 128, 64, 6, 0, 59.07}, {1, 64, 128, 128, 2, 0, 59.78},
    {1, 64, 128, 128, 3, 0, 57.98}, {1, 64, 64, 64, 2, 0, 64.10}, {1, 64, 64, 64, 3, 0, 58.02},
    {1, 64, 64, 64, 4, 0, 76.06}, {1, 64, 64, 64, 6, 0, 77.70}, {1, 64, 64, 32, 2, 0, 53.22},
    {1, 64, 64, 32, 3, 0, 53.89}, {1, 64, 64, 32, 4, 0, 61.44}, {1, 64, 64, 32, 6, 0, 55.71},
    {1, 64, 256, 128, 2, 0, 68.58}, {1, 64, 256, 128, 3, 0, 65.70},
    /* 2: B16 32/8 S1 Skv4096 D128 f16, 64 candidates */
    {2, 1, 128, 64, 2, 1, 102.24}, {2, 1, 128, 64, 3, 1, 79.78}, {2, 1, 128, 64, 4, 1, 80.86},
    {2, 1, 128, 64, 6, 1, 83.26}, {2, 1, 128, 128, 2, 1, 80.70}, {2, 1, 128, 128, 3, 1, 79.90},
    {2, 1, 64, 64, 2, 1, 123.23}, {2, 1, 64, 64, 3, 1, 120.32}, {2, 1, 64, 64, 4, 1, 120.16},
    {2, 1, 64, 64, 6, 1, 121.44}, {2, 1, 64, 32, 2, 1, 144.32}, {2, 1, 64, 32, 3, 1, 112.96},
    {2, 1, 64, 32, 4, 1, 109.18}, {2, 1, 64, 32, 6, 1, 109.15}, {2, 1, 256, 128, 2, 1, 84.96},
    {2, 1, 256, 128, 3, 1, 82.72}, {2, 2, 128, 64, 2, 1, 82.91}, {2, 2, 128, 64, 3, 1, 83.46},
    {2, 2, 128, 64, 4, 1, 86.75}, {2, 2, 128, 64, 6, 1, 88.48}, {2, 2, 128, 128, 2, 1, 88.22},
    {2, 2, 128, 128, 3, 1, 86.69}, {2, 2, 64, 64, 2, 1, 83.71}, {2, 2, 64, 64, 3, 1, 85.50},
    {2, 2, 64, 64, 4, 1, 115.01}, {2, 2, 64, 64, 6, 1, 116.70}, {2, 2, 64, 32, 2, 1, 93.86},
    {2, 2, 64, 32, 3, 1, 83.36}, {2, 2, 64, 32, 4, 1, 83.94}, {2, 2, 64, 32, 6, 1, 86.66},
    {2, 2, 256, 128, 2, 1, 93.86}, {2, 2, 256, 128, 3, 1, 89.76}, {2, 4, 128, 64, 2, 1, 97.50},
    {2, 4, 128, 64, 3, 1, 87.74}, {2, 4, 128, 64, 4, 1, 95.07}, {2, 4, 128, 64, 6, 1, 96.13},
    {2, 4, 128, 128, 2, 1, 96.54}, {2, 4, 128, 128, 3, 1, 93.09}, {2, 4, 64, 64, 2, 1, 103.39},
    {2, 4, 64, 64, 3, 1, 91.71}, {2, 4, 64, 64, 4, 1, 124.19}, {2, 4, 64, 64, 6, 1, 125.89},
    {2, 4, 64, 32, 2, 1, 83.78}, {2, 4, 64, 32, 3, 1, 84.67}, {2, 4, 64, 32, 4, 1, 100.99},
    {2, 4, 64, 32, 6, 1, 91.10}, {2, 4, 256, 128, 2, 1, 104.86}, {2, 4, 256, 128, 3, 1, 99.49},
    {2, 8, 128, 64, 2, 1, 89.73}, {2, 8, 128, 64, 3, 1, 90.11}, {2, 8, 128, 64, 4, 1, 110.94},
    {2, 8, 128, 64, 6, 1, 109.22}, {2, 8, 128, 128, 2, 1, 111.36}, {2, 8, 128, 128, 3, 1, 104.19},
    {2, 8, 64, 64, 2, 1, 90.88}, {2, 8, 64, 64, 3, 1, 96.80}, {2, 8, 64, 64, 4, 1, 141.57},
    {2, 8, 64, 64, 6, 1, 142.30}, {2, 8, 64, 32, 2, 1, 90.94}, {2, 8, 64, 32, 3, 1, 89.98},
    {2, 8, 64, 32, 4, 1, 90.53}, {2, 8, 64, 32, 6, 1, 97.73}, {2, 8, 256, 128, 2, 1, 126.18},
    {2, 8, 256, 128, 3, 1, 116.93},
    /* 3: B16 32/8 S1 Skv32768 D128 f16, 64 candidates */
    {3, 1, 128, 64, 2, 1, 726.82}, {3, 1, 128, 64, 3, 1, 521.22}, {3, 1, 128, 64, 4, 1, 526.02},
    {3, 1, 128, 64, 6, 1, 527.23}, {3, 1, 128, 128, 2, 1, 551.36}, {3, 1, 128, 128, 3, 1, 530.46},
    {3, 1, 64, 64, 2, 1, 911.33}, {3, 1, 64, 64, 3, 1, 911.94}, {3, 1, 64, 64, 4, 1, 912.38},
    {3, 1, 64, 64, 6, 1, 913.76}, {3, 1, 64, 32, 2, 1, 1039.78}, {3, 1, 64, 32, 3, 1, 836.29},
    {3, 1, 64, 32, 4, 1, 826.50}, {3, 1, 64, 32, 6, 1, 832.06}, {3, 1, 256, 128, 2, 1, 584.74},
    {3, 1, 256, 128, 3, 1, 536.22}, {3, 2, 128, 64, 2, 1, 530.34}, {3, 2, 128, 64, 3, 1, 536.67},
    {3, 2, 128, 64, 4, 1, 530.53}, {3, 2, 128, 64, 6, 1, 533.38}, {3, 2, 128, 128, 2, 1, 567.90},
    {3, 2, 128, 128, 3, 1, 535.84}, {3, 2, 64, 64, 2, 1, 528.93}, {3, 2, 64, 64, 3, 1, 540.64},
    {3, 2, 64, 64, 4, 1, 814.72}, {3, 2, 64, 64, 6, 1, 819.49}, {3, 2, 64, 32, 2, 1, 609.89},
    {3, 2, 64, 32, 3, 1, 534.21}, {3, 2, 64, 32, 4, 1, 540.61}, {3, 2, 64, 32, 6, 1, 548.93},
    {3, 2, 256, 128, 2, 1, 598.94}, {3, 2, 256, 128, 3, 1, 538.56}, {3, 4, 128, 64, 2, 1, 614.43},
    {3, 4, 128, 64, 3, 1, 537.31}, {3, 4, 128, 64, 4, 1, 539.94}, {3, 4, 128, 64, 6, 1, 540.70},
    {3, 4, 128, 128, 2, 1, 562.91}, {3, 4, 128, 128, 3, 1, 536.86}, {3, 4, 64, 64, 2, 1, 664.74},
    {3, 4, 64, 64, 3, 1, 544.54}, {3, 4, 64, 64, 4, 1, 823.10}, {3, 4, 64, 64, 6, 1, 827.55},
    {3, 4, 64, 32, 2, 1, 533.98}, {3, 4, 64, 32, 3, 1, 538.08}, {3, 4, 64, 32, 4, 1, 645.22},
    {3, 4, 64, 32, 6, 1, 552.38}, {3, 4, 256, 128, 2, 1, 598.75}, {3, 4, 256, 128, 3, 1, 542.27},
    {3, 8, 128, 64, 2, 1, 560.03}, {3, 8, 128, 64, 3, 1, 540.54}, {3, 8, 128, 64, 4, 1, 552.00},
    {3, 8, 128, 64, 6, 1, 548.80}, {3, 8, 128, 128, 2, 1, 567.84}, {3, 8, 128, 128, 3, 1, 538.98},
    {3, 8, 64, 64, 2, 1, 579.81}, {3, 8, 64, 64, 3, 1, 549.06}, {3, 8, 64, 64, 4, 1, 840.29},
    {3, 8, 64, 64, 6, 1, 844.51}, {3, 8, 64, 32, 2, 1, 586.82}, {3, 8, 64, 32, 3, 1, 544.42},
    {3, 8, 64, 32, 4, 1, 552.35}, {3, 8, 64, 32, 6, 1, 551.87}, {3, 8, 256, 128, 2, 1, 602.30},
    {3, 8, 256, 128, 3, 1, 547.52},
    /* 4: B64 32/8 S1 Skv4096 D128 f16, 32 candidates */
    {4, 1, 128, 64, 2, 1, 316.96}, {4, 1, 128, 64, 3, 1, 274.27}, {4, 1, 128, 64, 4, 1, 278.14},
    {4, 1, 128, 64, 6, 1, 280.61}, {4, 1, 128, 128, 2, 1, 288.35}, {4, 1, 128, 128, 3, 1, 274.85},
    {4, 1, 64, 64, 2, 1, 352.90}, {4, 1, 64, 64, 3, 1, 280.03}, {4, 1, 64, 64, 4, 1, 464.58},
    {4, 1, 64, 64, 6, 1, 466.21}, {4, 1, 64, 32, 2, 1, 275.39}, {4, 1, 64, 32, 3, 1, 279.62},
    {4, 1, 64, 32, 4, 1, 337.31}, {4, 1, 64, 32, 6, 1, 283.04}, {4, 1, 256, 128, 2, 1, 309.57},
    {4, 1, 256, 128, 3, 1, 281.18}, {4, 2, 128, 64, 2, 1, 288.99}, {4, 2, 128, 64, 3, 1, 281.66},
    {4, 2, 128, 64, 4, 1, 298.56}, {4, 2, 128, 64, 6, 1, 297.28}, {4, 2, 128, 128, 2, 1, 304.22},
    {4, 2, 128, 128, 3, 1, 291.68}, {4, 2, 64, 64, 2, 1, 299.04}, {4, 2, 64, 64, 3, 1, 290.66},
    {4, 2, 64, 64, 4, 1, 439.68}, {4, 2, 64, 64, 6, 1, 442.24}, {4, 2, 64, 32, 2, 1, 304.03},
    {4, 2, 64, 32, 3, 1, 282.88}, {4, 2, 64, 32, 4, 1, 301.02}, {4, 2, 64, 32, 6, 1, 291.84},
    {4, 2, 256, 128, 2, 1, 326.18}, {4, 2, 256, 128, 3, 1, 298.78},
    /* 5: B64 32/8 S1 Skv32768 D128 f16, 32 candidates */
    {5, 1, 128, 64, 2, 1, 2365.66}, {5, 1, 128, 64, 3, 1, 2072.38}, {5, 1, 128, 64, 4, 1, 2069.95},
    {5, 1, 128, 64, 6, 1, 2073.44}, {5, 1, 128, 128, 2, 1, 2192.93}, {5, 1, 128, 128, 3, 1, 2051.39},
    {5, 1, 64, 64, 2, 1, 2672.13}, {5, 1, 64, 64, 3, 1, 2103.52}, {5, 1, 64, 64, 4, 1, 3649.12},
    {5, 1, 64, 64, 6, 1, 3633.47}, {5, 1, 64, 32, 2, 1, 2069.02}, {5, 1, 64, 32, 3, 1, 2088.51},
    {5, 1, 64, 32, 4, 1, 2569.34}, {5, 1, 64, 32, 6, 1, 2126.91}, {5, 1, 256, 128, 2, 1, 2336.74},
    {5, 1, 256, 128, 3, 1, 2070.05}, {5, 2, 128, 64, 2, 1, 2076.42}, {5, 2, 128, 64, 3, 1, 2107.87},
    {5, 2, 128, 64, 4, 1, 2087.39}, {5, 2, 128, 64, 6, 1, 2095.52}, {5, 2, 128, 128, 2, 1, 2180.48},
    {5, 2, 128, 128, 3, 1, 2110.85}, {5, 2, 64, 64, 2, 1, 2087.14}, {5, 2, 64, 64, 3, 1, 2097.38},
    {5, 2, 64, 64, 4, 1, 3211.36}, {5, 2, 64, 64, 6, 1, 3229.60}, {5, 2, 64, 32, 2, 1, 2116.64},
    {5, 2, 64, 32, 3, 1, 2085.34}, {5, 2, 64, 32, 4, 1, 2173.89}, {5, 2, 64, 32, 6, 1, 2103.39},
    {5, 2, 256, 128, 2, 1, 2302.98}, {5, 2, 256, 128, 3, 1, 2109.54},
};
/* The rows: B and Skv; 32/8 heads, S 1, D 128, f16. */
static const long long timed_rows[6][2] = {{1, 4096}, {1, 32768}, {16, 4096}, {16, 32768}, {64, 4096}, {64, 32768}};

/* Ranks 1..n of x (ties get their mean rank) into r. */
static void ranks(const double *x, size_t n, double *r)
{
    for (size_t i = 0; i < n; i++) {
        size_t below = 0, same = 0;
        for (size_t j = 0; j < n; j++)
            below += x[j] < x[i], same += x[j] == x[i];
        r[i] = (double)below + (double)(same + 1) / 2.0;
    }
}

/* Spearman's rho of a and b: Pearson's correlation of their ranks. */
static double spearman(const double *a, const double *b, size_t n)
{
    double *ra = malloc(n * sizeof(*ra)), *rb = malloc(n * sizeof(*rb));
    double rho = 0.0;
    if (ra && rb && n > 1) {
        ranks(a, n, ra);
        ranks(b, n, rb);
        const double m = (double)(n + 1) / 2.0;
        double cov = 0.0, va = 0.0, vb = 0.0;
        for (size_t i = 0; i < n; i++) {
            cov += (ra[i] - m) * (rb[i] - m);
            va += (ra[i] - m) * (ra[i] - m);
            vb += (rb[i] - m) * (rb[i] - m);
        }
        rho = va > 0 && vb > 0 ? cov / sqrt(va * vb) : 0.0;
    }
    free(ra);
    free(rb);
    return rho;
}

/* The model against the H200's timings: per row, the model's first among the timed candidates
 * must measure within 5% of the best, and rank the candidates with rho >= 0.65 (decode.log's
 * model had 0.20-0.81 and picks up to 1.165x the best: B1 kv4K's split 16 in one launch). */
static void check_timed(const tuner_op *op0, const tuner_target *t, int row, const char *name)
{
    size_t n = 0;
    for (size_t i = 0; i < sizeof(h200_timed) / sizeof(h200_timed[0]); i++)
        n += h200_timed[i].row == row;
    double *meas = malloc(n * sizeof(*meas)), *pred = malloc(n * sizeof(*pred));
    if (!meas || !pred) {
        free(meas);
        free(pred);
        CHECK(false, "%s: out of memory", name);
        return;
    }
    size_t k = 0, pick = 0, best = 0;
    const timed *pk = NULL;
    for (size_t i = 0; i < sizeof(h200_timed) / sizeof(h200_timed[0]); i++) {
        const timed *x = &h200_timed[i];
        if (x->row != row)
            continue;
        static const char *const nm[5] = {"split", "block", "kv_tile", "stages", "fused"};
        const int v[5] = {x->split, x->block, x->tile, x->stages, x->fused};
        tuner_schedule s = {0};
        s.template_name = "attention_decode";
        tuner__schedule_params(&s, 5, nm, v);
        meas[k] = x->us;
        pred[k] = tuner_predict_us(op0, t, &s);
        CHECK(pred[k] > 0 && pred[k] < 1e11, "%s: timed candidate %d %d %d %d %d: prediction %g", name, v[0],
              v[1], v[2], v[3], v[4], pred[k]);
        /* The first of equal predictions, as decode_preferred takes it (the log keeps the
         * space's order). */
        if (k == 0 || pred[k] < pred[pick])
            pick = k, pk = x;
        if (meas[k] < meas[best])
            best = k;
        k++;
    }
    const double ratio = meas[pick] / meas[best], rho = spearman(pred, meas, n);
    printf("  %-30s %3zu timed  pick split %2d block %3d tile %3d stages %d fused %d  %8.2f us / best %8.2f = "
           "%.3f  rho %.3f\n",
           name, n, pk->split, pk->block, pk->tile, pk->stages, pk->fused, meas[pick], meas[best], ratio, rho);
    CHECK(n >= 20, "%s: %zu timed candidates", name, n);
    CHECK(ratio <= 1.05, "%s: the model's pick measured %.2f us, %.3f x the best %.2f us", name, meas[pick], ratio,
          meas[best]);
    CHECK(rho >= 0.65, "%s: the model ranks the H200's timings with rho %.3f", name, rho);
    free(meas);
    free(pred);
}

static size_t n_cases;

/* Builds the space of op on t, checks it holds only valid attention_decode schedules (when the
 * template is the only attention template registered, all of it), the default is one of them,
 * every candidate generates, and compiles the default and a sample. Returns the number of
 * attention_decode schedules. */
static size_t run_case(const char *name, const tuner_op *op, const tuner_target *t)
{
    char tn[16], what[320];
    tuner_target_name(t, tn, sizeof(tn));
    n_cases++;
    CHECK(tuner__attn_decode.applies(op, t), "%s %s: attention_decode does not apply", name, tn);
    tuner_space *sp = NULL;
    char *err = NULL;
    const int r = tuner_space_build(op, t, &sp, &err);
    CHECK(r == 0, "%s %s: space: %s", name, tn, err ? err : "?");
    free(err);
    if (r < 0)
        return 0;
    size_t nd = 0, first = sp->n;
    for (size_t i = 0; i < sp->n; i++)
        if (!strcmp(sp->items[i].template_name, "attention_decode")) {
            nd++;
            if (first == sp->n)
                first = i;
        }
    CHECK(nd > 0, "%s %s: no attention_decode candidate", name, tn);
    const size_t def = tuner_default_index(op, t, sp);
    CHECK(def < sp->n && !strcmp(sp->items[def].template_name, "attention_decode"),
          "%s %s: the default is not attention_decode", name, tn);
    char *dj = def < sp->n ? tuner_schedule_json(&sp->items[def]) : NULL;
    printf("%-52s %-6s space %3zu (decode %3zu)  default %s  %.1f us\n", name, tn, sp->n, nd, dj ? dj : "?",
           def < sp->n ? tuner_predict_us(op, t, &sp->items[def]) : 0.0);
    free(dj);
    /* Every candidate generates a sane program; the default and two evenly spaced others (by
     * the sample) compile. */
    size_t picks[3] = {def, first + nd / 3, first + (2 * nd) / 3};
    size_t others = 0;
    for (size_t i = 0; i < sp->n; i++) {
        const tuner_schedule *s = &sp->items[i];
        if (strcmp(s->template_name, "attention_decode"))
            continue;
        const double us = tuner_predict_us(op, t, s);
        CHECK(us > 0 && us < 1e11, "%s %s candidate %zu: prediction %g", name, tn, i, us);
        tuner_program *p = NULL;
        err = NULL;
        char *sj = tuner_schedule_json(s);
        snprintf(what, sizeof(what), "%s %s %s", name, tn, sj ? sj : "?");
        free(sj);
        const int g = tuner_generate(op, t, s, &p, &err);
        CHECK(g == 0 && p, "%s: generate: %s", what, err ? err : "?");
        free(err);
        if (g < 0 || !p)
            continue;
        CHECK(launch_sane(p, op, s), "%s: launches", what);
        CHECK(p->output_dtype == op->output.dtype, "%s: output dtype", what);
        /* A sampling run (the normal build samples 1 in 2, the sanitizer build 1 in 16) compiles
         * the default of one case in 2S and no others: 40 cases of two-kernel programs are the
         * tuner's longest compiles (about 2 s each with ptxas). */
        bool compile = false;
        if (i == picks[0])
            compile = !t_sampling() || ((size_t)n_cases - 1) % (2 * (size_t)t_sub.every) == (size_t)t_sub.rest;
        else if ((i == picks[1] || i == picks[2]) && !t_sampling())
            compile = true;
        (void)others;
        if (compile)
            CHECK(t_compile_check(what, p->source, t, p, NULL), "%s: compile", what);
        tuner_program_free(p);
    }
    tuner_space_free(sp);
    return nd;
}

static void check_not_applies(const char *name, const shape *sh, const tuner_target *t)
{
    tuner_op op = attn_op(sh);
    CHECK(!tuner__attn_decode.applies(&op, t), "%s: attention_decode applies", name);
}

int main(int argc, char **argv)
{
    if (t_subset_init(&argc, argv) < 0)
        return 2;
    const tuner_target targets[2] = {{80, false}, {90, true}};
    const tuner_dtype dts[2] = {TUNER_F16, TUNER_BF16};

    /* The decode rows (B 1, 16, 64 x Skv 4K, 32K; 32/8 heads, hd 128, f16) on sm_90a:
     * the space has tens of candidates, and the default (tune "none") is the model's first over
     * the whole space (tune "model": every template), attention_decode (one launch, or at B1
     * kv4K split 64 with the combine kernel, the H200's best), all its blocks resident in one
     * wave, and not the ring the H200's ncu found starved (split 1, 2 slots of 128 keys: one
     * block per SM with half a tile in flight on average). Printed as the table of picks. */
    {
        const tuner_target t = targets[1];
        const tuner_arch *a = tuner__arch(&t);
        static const long long bs[3] = {1, 16, 64}, skvs[2] = {4096, 32768};
        printf("issue 38's decode rows, sm_90a, tune none = model:\n");
        for (int bi = 0; bi < 3; bi++)
            for (int si = 0; si < 2; si++) {
                shape sh = {bs[bi], 32, 8, 1, skvs[si], 128, TUNER_F16, false, false, MASK_NONE, false, false};
                tuner_op op = attn_op(&sh);
                tuner_space *sp = NULL;
                char *err = NULL;
                CHECK(tuner_space_build(&op, &t, &sp, &err) == 0, "B%lld Skv%lld: space: %s", sh.b, sh.skv,
                      err ? err : "?");
                free(err);
                if (!sp)
                    continue;
                size_t nd = 0, best = 0;
                double best_us = 1e300;
                for (size_t i = 0; i < sp->n; i++) {
                    nd += !strcmp(sp->items[i].template_name, "attention_decode");
                    const double us = tuner_predict_us(&op, &t, &sp->items[i]);
                    if (us < best_us)
                        best_us = us, best = i;
                }
                const size_t di = tuner_default_index(&op, &t, sp);
                const tuner_schedule *def = &sp->items[di];
                char *dj = tuner_schedule_json(def);
                printf("  B%-3lld Skv%-6lld %3zu decode candidates  %7.1f us  %s\n", sh.b, sh.skv, nd,
                       tuner_predict_us(&op, &t, def), dj ? dj : "?");
                free(dj);
                /* The next four by the model, for reading the ranking. */
                size_t *order = malloc(sp->n * sizeof(*order));
                double *us = malloc(sp->n * sizeof(*us));
                if (order && us) {
                    tuner_rank(&op, &t, sp, order, us);
                    for (size_t k = 1; k < 5 && k < sp->n; k++) {
                        char *kj = tuner_schedule_json(&sp->items[order[k]]);
                        printf("      then %7.1f us  %s\n", us[order[k]], kj ? kj : "?");
                        free(kj);
                    }
                }
                free(order);
                free(us);
                CHECK(nd >= 20 && nd <= 300, "B%lld Skv%lld: %zu attention_decode candidates", sh.b, sh.skv, nd);
                CHECK(di == best || tuner_predict_us(&op, &t, def) <= best_us,
                      "B%lld Skv%lld: the default is not the model's first", sh.b, sh.skv);
                /* Two launches are allowed: B1 kv4K's best on the H200 was split 64 with the combine
                 * kernel (17.25 us; one launch's best, split 8, 17.34 us). */
                CHECK(!strcmp(def->template_name, "attention_decode"), "B%lld Skv%lld: the default is not "
                      "attention_decode", sh.b, sh.skv);
                const int split = tuner_schedule_param(def, "split", 0), tile = tuner_schedule_param(def, "kv_tile", 0),
                          stages = tuner_schedule_param(def, "stages", 0);
                CHECK(!(split == 1 && tile == 128 && stages == 2), "B%lld Skv%lld: the starved ring", sh.b, sh.skv);
                /* One wave: at most 3 blocks of 128 threads per SM hold >= 64 keys' ring each. */
                CHECK(sh.b * 8 * split <= 4LL * a->sm_count, "B%lld Skv%lld: default split %d over a wave", sh.b,
                      sh.skv, split);
                /* Enough chunks that one sequence fills the SMs. */
                if (sh.b == 1)
                    CHECK(8 * split >= 0.9 * a->sm_count, "B1 Skv%lld: default split %d leaves SMs idle", sh.skv, split);
                tuner_space_free(sp);
            }
        /* The model against the H200's timings of every candidate of these rows. */
        printf("issue 38's decode rows against the H200's timings (session 10 call C):\n");
        for (int ri = 0; ri < 6; ri++) {
            shape sh = {timed_rows[ri][0], 32, 8, 1, timed_rows[ri][1], 128, TUNER_F16, false, false, MASK_NONE,
                        false, false};
            tuner_op op = attn_op(&sh);
            char nm[64];
            snprintf(nm, sizeof(nm), "B%lld 32/8 S1 Skv%lld D128 f16", sh.b, sh.skv);
            check_timed(&op, &t, ri, nm);
        }
        /* B = 64: the heads fill the GPU without a split. */
        shape sh = {64, 32, 8, 1, 32768, 128, TUNER_F16, false, false, MASK_NONE, false, false};
        tuner_op op = attn_op(&sh);
        tuner_space *sp = NULL;
        CHECK(tuner_space_build(&op, &t, &sp, NULL) == 0, "B=64: space");
        if (sp) {
            const tuner_schedule *def = &sp->items[tuner_default_index(&op, &t, sp)];
            CHECK(tuner_schedule_param(def, "split", 0) == 1, "B=64: default split %d",
                  tuner_schedule_param(def, "split", 0));
            tuner_space_free(sp);
        }
        /* Skv = 1: nothing to split. */
        sh.b = 1;
        sh.skv = 1;
        op = attn_op(&sh);
        sp = NULL;
        CHECK(tuner_space_build(&op, &t, &sp, NULL) == 0, "Skv=1: space");
        if (sp) {
            for (size_t i = 0; i < sp->n; i++)
                if (!strcmp(sp->items[i].template_name, "attention_decode"))
                    CHECK(tuner_schedule_param(&sp->items[i], "split", 0) == 1, "Skv=1: a split candidate");
            tuner_space_free(sp);
        }
        /* The combine's ranking: a 32/8 step's 4-row groups are combined by their last block at
         * every split (the combine kernel's launch costs more than reading 4 rows' partials); an
         * MQA step's 64-row groups (8/1 heads, S 8, hd 64) split 64 ways have 1 MB of partials
         * a group, which the combine kernel spreads over the GPU: it ranks first there. */
        sh = (shape){1, 8, 1, 8, 32768, 64, TUNER_F16, false, false, MASK_NONE, false, false};
        op = attn_op(&sh);
        sp = NULL;
        CHECK(tuner_space_build(&op, &t, &sp, NULL) == 0, "MQA: space");
        if (sp) {
            size_t pairs = 0;
            for (size_t i = 0; i < sp->n; i++) {
                const tuner_schedule *x = &sp->items[i];
                if (strcmp(x->template_name, "attention_decode") || tuner_schedule_param(x, "fused", 1) != 0)
                    continue;
                const int v[5] = {tuner_schedule_param(x, "split", 0), tuner_schedule_param(x, "block", 0),
                                  tuner_schedule_param(x, "kv_tile", 0), tuner_schedule_param(x, "stages", 0), 1};
                static const char *const nm[5] = {"split", "block", "kv_tile", "stages", "fused"};
                tuner_schedule f = {0};
                f.template_name = "attention_decode";
                tuner__schedule_params(&f, 5, nm, v);
                if (v[0] == 64) {
                    pairs++;
                    CHECK(tuner_predict_us(&op, &t, x) < tuner_predict_us(&op, &t, &f),
                          "MQA split 64: the combine kernel does not rank before the last block's combine");
                }
            }
            CHECK(pairs > 0, "MQA: no two-kernel candidate at split 64");
            tuner_space_free(sp);
        }
    }

    /* Where it does not apply: long query blocks, too many rows per kv head, f32, misaligned. */
    for (int ti = 0; ti < 2; ti++) {
        shape sh = {1, 32, 8, 128, 4096, 128, TUNER_F16, false, false, MASK_NONE, false, false};
        check_not_applies("S=128", &sh, &targets[ti]);
        sh.s = 17;
        check_not_applies("S=17", &sh, &targets[ti]);
        sh.s = 16;
        sh.hq = 64; /* group 8 x 16 rows = 128 */
        check_not_applies("group 8 x S 16", &sh, &targets[ti]);
        sh = (shape){1, 32, 8, 1, 4096, 128, TUNER_F32, false, false, MASK_NONE, false, false};
        check_not_applies("f32", &sh, &targets[ti]);
        sh.dt = TUNER_F16;
        tuner_op op = attn_op(&sh);
        op.inputs[1].align = 8;
        CHECK(!tuner__attn_decode.applies(&op, &targets[ti]), "k aligned to 8 bytes: applies");
    }

    static const shape cases[] = {
        /* b, hq, hkv, s, skv, d, dt, bshd, causal, mask, epilogue */
        {1, 32, 8, 1, 32768, 128, TUNER_F16, false, false, MASK_NONE, false, false},
        {4, 32, 8, 1, 4096, 128, TUNER_F16, true, false, MASK_NONE, false, false},
        {2, 32, 8, 1, 1000, 128, TUNER_F16, false, false, MASK_KEYS_F32, false, false},
        {1, 32, 8, 16, 4096, 128, TUNER_F16, true, true, MASK_NONE, false, false},
        {2, 16, 16, 5, 1000, 64, TUNER_F16, false, true, MASK_B1SK_F16, false, false},
        {1, 8, 1, 1, 4096, 80, TUNER_F16, true, false, MASK_NONE, true, false},
        {1, 8, 1, 5, 1000, 96, TUNER_F16, false, true, MASK_KEYS_F32, false, false},
        {2, 32, 8, 1, 1, 256, TUNER_F16, false, false, MASK_NONE, false, false},
        {1, 32, 8, 4, 4096, 256, TUNER_F16, true, false, MASK_B1SK_F16, true, false},
        {3, 16, 16, 1, 32768, 64, TUNER_F16, true, false, MASK_NONE, false, false},
        /* bshd_packed: self-attention over a few tokens (S = Skv <= 16) */
        {2, 12, 12, 1, 1, 64, TUNER_F16, true, true, MASK_NONE, false, true},
        {2, 32, 8, 8, 8, 128, TUNER_F16, true, true, MASK_B1SK_F16, false, true},
        {1, 8, 2, 16, 16, 256, TUNER_F16, true, false, MASK_KEYS_F32, true, true},
    };
    char name[160];
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++)
        for (int di = 0; di < 2; di++)
            for (int ti = 0; ti < 2; ti++) {
                shape sh = cases[ci];
                sh.dt = dts[di];
                tuner_op op = attn_op(&sh);
                snprintf(name, sizeof(name), "B%lld %lld/%lld S%lld Skv%lld D%lld %s%s%s%s%s%s", sh.b, sh.hq, sh.hkv,
                         sh.s, sh.skv, sh.d, tuner_dtype_name(sh.dt), sh.bshd ? " bshd" : "",
                         sh.causal ? " causal" : "",
                         sh.mask == MASK_KEYS_F32 ? " mask[Skv]f32" : sh.mask == MASK_B1SK_F16 ? " mask[B1SSkv]f16" : "",
                         sh.epilogue ? " +b silu" : "", sh.packed ? " packed" : "");
                run_case(name, &op, &targets[ti]);
            }
    /* gpu_attn_decode's dynamic ops: B and Skv named, a [Skv] mask; Skv alone, causal bshd. */
    for (int ti = 0; ti < 2; ti++) {
        const shape s1 = {4, 32, 8, 1, 4096, 128, TUNER_F16, false, false, MASK_KEYS_F32, false, false};
        tuner_op op = dyn_op(&s1, true);
        CHECK(tuner_op_is_dynamic(&op), "dynamic: not dynamic");
        run_case("dynamic [b,32,1,128] kv [b,8,k,128] mask[k]", &op, &targets[ti]);
        const shape s2 = {2, 32, 8, 4, 4096, 128, TUNER_BF16, true, true, MASK_NONE, false, false};
        op = dyn_op(&s2, false);
        run_case("dynamic bshd causal [2,4,32,128] kv [2,k,8,128]", &op, &targets[ti]);
    }
    /* K and V by TMA (load 1): offered on sm_90a only, first in its space (the model prices its
     * stream above cp.async's), each kernel with both maps, the copies and the swizzled reads;
     * where Skv is named, the maps are flattened (their rows follow the sizes) and the loop zeroes
     * V's rows past Skv, which such a map reads from the next head. */
    {
        const shape st = {16, 32, 8, 1, 32768, 128, TUNER_F16, false, false, MASK_NONE, false, false};
        const shape sp5 = {1, 8, 2, 16, 16, 256, TUNER_BF16, true, false, MASK_KEYS_F32, true, true};
        const shape sk = {4, 32, 8, 1, 4096, 128, TUNER_F16, false, false, MASK_KEYS_F32, false, false};
        const shape sb = {2, 32, 8, 4, 4096, 80, TUNER_F16, true, true, MASK_NONE, false, false};
        tuner_op ops[4] = {attn_op(&st), attn_op(&sp5), dyn_op(&sk, true), dyn_op(&sb, false)};
        const char *names[4] = {"B16 kv32K", "packed D256", "dynamic b, k", "dynamic bshd D80 k"};
        for (int oi = 0; oi < 4; oi++)
            for (int ti = 0; ti < 2; ti++) {
                const tuner_target *t = &targets[ti];
                tuner_space *sp = NULL;
                char *err = NULL;
                CHECK(tuner_space_build(&ops[oi], t, &sp, &err) == 0, "tma %s: space: %s", names[oi], err ? err : "?");
                free(err);
                if (!sp)
                    continue;
                size_t tma = 0, first = sp->n;
                for (size_t i = 0; i < sp->n; i++) {
                    if (strcmp(sp->items[i].template_name, "attention_decode"))
                        continue;
                    if (first == sp->n)
                        first = i;
                    tma += tuner_schedule_param(&sp->items[i], "load", 0) == 1;
                }
                if (ti == 0) {
                    CHECK(tma == 0, "tma %s sm_80: %zu load 1 candidates", names[oi], tma);
                    tuner_space_free(sp);
                    continue;
                }
                CHECK(tma > 0 && first < sp->n && tuner_schedule_param(&sp->items[first], "load", 0) == 1,
                      "tma %s sm_90a: %zu load 1 candidates, not first", names[oi], tma);
                if (first < sp->n) {
                    tuner_program *p = NULL;
                    err = NULL;
                    const int g = tuner_generate(&ops[oi], t, &sp->items[first], &p, &err);
                    CHECK(g == 0 && p, "tma %s: generate: %s", names[oi], err ? err : "?");
                    free(err);
                    if (p) {
                        const bool flat = oi >= 2;
                        CHECK(strstr(p->source, "cp.async.bulk.tensor") && strstr(p->source, "wg_wait(hd_bar") &&
                                  strstr(p->source, "^ (lane & 7)) << 4)") && !strstr(p->source, "hd_cp_async16(sk"),
                              "tma %s: the copies or the swizzled reads are missing", names[oi]);
                        CHECK(!flat == !strstr(p->source, "fence.proxy.async.shared::cta"),
                              "tma %s: V's rows past Skv %s zeroed", names[oi], flat ? "not" : "");
                        CHECK(!flat || (p->kernels[0].maps[0].sym[p->kernels[0].maps[0].rank - 1] != 0 &&
                                        p->kernels[0].maps[0].rank < 4),
                              "tma %s: the maps are not flattened", names[oi]);
                        /* ptxas on the packed D 256 boxes and the flattened maps' zeroing always,
                         * the others in unsampled runs */
                        if (oi == 1 || oi == 2 || !t_sampling())
                            CHECK(t_compile_check(names[oi], p->source, t, p, NULL), "tma %s: compile", names[oi]);
                        tuner_program_free(p);
                    }
                }
                tuner_space_free(sp);
            }
    }
    printf("attention_decode: %zu cases, %d failures\n", n_cases, (int)t_failures);
    return t_failures ? 1 : 0;
}
