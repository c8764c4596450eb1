/* tuner/attn/tests/ops.h - attention ops built by hand for the attention templates' tests and
 * GPU checks, and for tuner/tests' checks of the attention reference, as validation would leave
 * them (output q's shape and dtype, scale 1/sqrt(D) unless given). */
#ifndef HIDET_TUNER_ATTN_TESTS_OPS_H
#define HIDET_TUNER_ATTN_TESTS_OPS_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "op/op.h"

typedef struct ta_shape {
    tuner_dtype dt;
    long long b, hq, hkv, s, skv, d;
    bool bshd, causal;
    /* Layout bshd_packed (bshd implied): one qkv input [B,S,Hq+2*Hkv,D], Skv = S (skv unread),
     * the mask inputs[1]. */
    bool packed;
    /* The mask: rank 0 for none, else its shape (right-aligned against [B, Hq, S, Skv]). */
    int mask_rank;
    long long mask_shape[4];
    tuner_dtype mask_dt;
    int mask_align; /* 0: 16 */
    double scale;   /* 0: 1/sqrt(D) */
} ta_shape;

static inline tuner_tensor ta_tensor(tuner_dtype dt, int rank, const long long *shape)
{
    tuner_tensor t;
    memset(&t, 0, sizeof(t));
    t.rank = rank;
    for (int i = 0; i < rank; i++)
        t.shape[i] = shape[i];
    t.dtype = dt;
    t.align = 16;
    return t;
}

static inline tuner_op ta_attention(const ta_shape *sh)
{
    tuner_op op;
    memset(&op, 0, sizeof(op));
    op.kind = TUNER_OP_ATTENTION;
    long long q[4] = {sh->b, sh->hq, sh->s, sh->d}, kv[4] = {sh->b, sh->hkv, sh->skv, sh->d};
    if (sh->bshd) {
        q[1] = sh->s;
        q[2] = sh->hq;
        kv[1] = sh->skv;
        kv[2] = sh->hkv;
    }
    if (sh->packed) {
        const long long qkv[4] = {sh->b, sh->s, sh->hq + 2 * sh->hkv, sh->d}, o[4] = {sh->b, sh->s, sh->hq, sh->d};
        op.inputs[0] = ta_tensor(sh->dt, 4, qkv);
        op.n_inputs = op.n_anchor_inputs = 1;
        if (sh->mask_rank > 0) {
            op.inputs[1] = ta_tensor(sh->mask_dt, sh->mask_rank, sh->mask_shape);
            if (sh->mask_align)
                op.inputs[1].align = sh->mask_align;
            op.n_inputs = op.n_anchor_inputs = 2;
        }
        op.output = ta_tensor(sh->dt, 4, o);
        op.attrs.attention.causal = sh->causal;
        op.attrs.attention.bshd = op.attrs.attention.packed = true;
        op.attrs.attention.kv_heads = (int)sh->hkv;
        op.attrs.attention.scale = sh->scale > 0 ? sh->scale : 1.0 / sqrt((double)sh->d);
        return op;
    }
    op.inputs[0] = ta_tensor(sh->dt, 4, q);
    op.inputs[1] = ta_tensor(sh->dt, 4, kv);
    op.inputs[2] = ta_tensor(sh->dt, 4, kv);
    op.n_inputs = op.n_anchor_inputs = 3;
    if (sh->mask_rank > 0) {
        op.inputs[3] = ta_tensor(sh->mask_dt, sh->mask_rank, sh->mask_shape);
        if (sh->mask_align)
            op.inputs[3].align = sh->mask_align;
        op.n_inputs = op.n_anchor_inputs = 4;
    }
    op.output = ta_tensor(sh->dt, 4, q);
    op.attrs.attention.causal = sh->causal;
    op.attrs.attention.bshd = sh->bshd;
    op.attrs.attention.scale = sh->scale > 0 ? sh->scale : 1.0 / sqrt((double)sh->d);
    return op;
}

/* ta_attention with the shape given in place: q [B,Hq,S,D] (bshd: [B,S,Hq,D]), k and v
 * [B,Hkv,Skv,D] ([B,Skv,Hkv,D]) in dt, a mask of rank mr (shape ms, dtype mdt) when mr > 0. */
static inline tuner_op ta_attention_of(tuner_dtype dt, bool bshd, bool causal, long long b, long long hq, long long hkv,
                                       long long s, long long skv, long long d, int mr, const long long *ms,
                                       tuner_dtype mdt)
{
    ta_shape sh = {.dt = dt, .b = b, .hq = hq, .hkv = hkv, .s = s, .skv = skv, .d = d, .bshd = bshd, .causal = causal};
    if (mr > 0) {
        sh.mask_rank = mr;
        for (int i = 0; i < mr; i++)
            sh.mask_shape[i] = ms[i];
        sh.mask_dt = mdt;
    }
    return ta_attention(&sh);
}

/* Names B ("b", when nb) and Skv ("k") of an attention op built at the dims' max, as a client's
 * named dims leave them: q's, k's, v's and the output's batch axis, k's and v's sequence axis
 * (axis 1 in bshd, else 2), and a [Skv] mask's one axis (key_mask). The decode tests' dynamic
 * ops (test_attn_decode on the CPU, gpu_attn_decode on the GPU). */
static inline void ta_name_b_skv(tuner_op *op, bool nb, long long b_max, long long skv_max, bool bshd, bool key_mask)
{
    int n = 0;
    const unsigned bb = nb ? 1u : 0u, kb = nb ? 2u : 1u;
    if (nb) {
        snprintf(op->dims[n].name, sizeof(op->dims[n].name), "b");
        op->dims[n].min = 1, op->dims[n].max = b_max, op->dims[n].multiple_of = 1;
        n++;
    }
    snprintf(op->dims[n].name, sizeof(op->dims[n].name), "k");
    op->dims[n].min = 1, op->dims[n].max = skv_max, op->dims[n].multiple_of = 1;
    op->n_dims = ++n;
    const int seq = bshd ? 1 : 2;
    op->inputs[0].sym[0] = op->output.sym[0] = (uint8_t)bb;
    for (int i = 1; i <= 2; i++) {
        op->inputs[i].sym[0] = (uint8_t)bb;
        op->inputs[i].sym[seq] = (uint8_t)kb;
    }
    if (key_mask)
        op->inputs[3].sym[0] = (uint8_t)kb;
}

#endif
