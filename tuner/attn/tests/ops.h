/* tuner/attn/tests/ops.h - attention ops built by hand for the attention templates' tests, as
 * validation would leave them (output q's shape and dtype, scale 1/sqrt(D) unless given). */
#ifndef HIDET_TUNER_ATTN_TESTS_OPS_H
#define HIDET_TUNER_ATTN_TESTS_OPS_H

#include <math.h>
#include <string.h>

#include "op/op.h"

typedef struct ta_shape {
    tuner_dtype dt;
    long long b, hq, hkv, s, skv, d;
    bool bshd, causal;
    /* The mask: rank 0 for none, else its shape (right-aligned against [B, Hq, S, Skv]). */
    int mask_rank;
    long long mask_shape[4];
    tuner_dtype mask_dt;
    double scale; /* 0: 1/sqrt(D) */
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
    op.inputs[0] = ta_tensor(sh->dt, 4, q);
    op.inputs[1] = ta_tensor(sh->dt, 4, kv);
    op.inputs[2] = ta_tensor(sh->dt, 4, kv);
    op.n_inputs = op.n_anchor_inputs = 3;
    if (sh->mask_rank > 0) {
        op.inputs[3] = ta_tensor(sh->mask_dt, sh->mask_rank, sh->mask_shape);
        op.n_inputs = op.n_anchor_inputs = 4;
    }
    op.output = ta_tensor(sh->dt, 4, q);
    op.attrs.attention.causal = sh->causal;
    op.attrs.attention.bshd = sh->bshd;
    op.attrs.attention.scale = sh->scale > 0 ? sh->scale : 1.0 / sqrt((double)sh->d);
    return op;
}

#endif
