/* tuner/attn/reference.c - the verification reference of the attention op.
 *
 * Written from op/op.h's definition, not from the templates' tiling: one warp per (b, h, query
 * row i), two plain passes over every key. Pass 1 takes the row maximum of the scores over the
 * keys the row may see (causal: j <= i + Skv - S; the mask added, -inf excluding a key); pass 2
 * sums exp(score - max) with exact expf (the HD_EXACT_MATH prelude) and accumulates those
 * weights times v's row. The lanes split the D columns: each lane holds q's columns c = lane +
 * 32 t, a score is the lanes' partial dot products summed by shuffles and broadcast from lane 0
 * (so every lane uses the same value in both passes), and each lane accumulates its own output
 * columns. Everything is fp32; the row is acc / l, and a row that sees no key (max -inf, l 0)
 * is 0, as PyTorch's SDPA gives. The fused epilogue is applied with the same chain emitter and
 * broadcast rules as the candidates, and the result is stored to the reference's F32 buffer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/attn/attn.h"
#include "tuner/core.h"

/* Query rows per 128-thread block: one per warp. */
#define REF_WARPS 4

int tuner__attn_reference(const tuner_op *op, const tuner_target *t, tuner_program *prog, char **err)
{
    if (!op || !t || !prog)
        return -EINVAL;
    tuner__attn_problem p;
    int r = tuner__attn_problem_init(op, &p, err);
    if (r < 0)
        return r;
    const tuner_attention_dims *d = &p.d;
    const long long rows = (long long)(d->b * d->hq * d->s);
    const int nt = (int)((d->d + 31) / 32); /* columns per lane: 2 (D 64) .. 8 (D 256) */
    char *q_off = tuner__attn_q_offset(&p, "b", "h", "i", "c");
    char *k_off = tuner__attn_kv_offset(&p, "b", "hk", "j", "c");
    char *v_off = tuner__attn_kv_offset(&p, "b", "hk", "j", "c");
    char *o_off = tuner__attn_out_offset(&p, "b", "h", "i", "c");
    char *m_val = d->has_mask ? tuner__attn_mask_value(&p, "b", "h", "i", "j") : NULL;
    if (!q_off || !k_off || !v_off || !o_off || (d->has_mask && !m_val)) {
        free(q_off);
        free(o_off);
        free(k_off);
        free(v_off);
        free(m_val);
        return -ENOMEM;
    }

    tuner_sb sb;
    tuner_sb_init(&sb);
    tuner__prelude_reference(&sb, t->sm);
    tuner_sb_puts(&sb, "extern \"C\" __global__ void hd_reference(");
    tuner__emit_params(&sb, op, TUNER_F32);
    tuner_sb_puts(&sb, ")\n{\n");
    /* The row this warp computes, (b, h, i) in bhsd order whatever the layout. */
    tuner_sb_puts(&sb, "const long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;\n"
                       "const int lane = threadIdx.x % 32;\n");
    tuner_sb_printf(&sb, "if (row >= %lldLL) return;\n", rows);
    tuner_sb_printf(&sb, "const long long i = row %% %lldLL, h = (row / %lldLL) %% %lldLL, b = row / %lldLL;\n",
                    (long long)d->s, (long long)d->s, (long long)d->hq, (long long)(d->s * d->hq));
    tuner_sb_printf(&sb, "const long long hk = h / %lldLL;\n", (long long)d->group);
    tuner_sb_printf(&sb, "float qv[%d];\n", nt);
    tuner_sb_printf(&sb, "for (int t = 0; t < %d; t++) {\nconst long long c = lane + 32 * t;\n"
                         "qv[t] = c < %lldLL ? hd_f32(%s[%s]) : 0.0f;\n}\n",
                    nt, (long long)d->d, p.q_ptr, q_off);
    /* The score of key j: scale * (q_i . k_j) + mask, the same value on every lane. */
    tuner_sb_puts(&sb, "auto score = [&](long long j) -> float {\nfloat part = 0.0f;\n");
    tuner_sb_printf(&sb, "for (int t = 0; t < %d; t++) {\nconst long long c = lane + 32 * t;\n"
                         "if (c < %lldLL) part += qv[t] * hd_f32(%s[%s]);\n}\n",
                    nt, (long long)d->d, p.k_ptr, k_off);
    tuner_sb_puts(&sb, "for (int m = 16; m > 0; m >>= 1) part += __shfl_xor_sync(0xffffffffu, part, m);\n"
                       "float s = __shfl_sync(0xffffffffu, part, 0) * ");
    tuner__emit_float(&sb, p.scale);
    tuner_sb_puts(&sb, ";\n");
    if (d->has_mask)
        tuner_sb_printf(&sb, "s += %s;\n", m_val);
    tuner_sb_puts(&sb, "return s;\n};\n");
    /* The keys row i may see: all, or causal's j <= i + Skv - S (none when that is negative). */
    if (p.causal)
        tuner_sb_printf(&sb, "long long jend = i + %lldLL;\nif (jend > %lldLL) jend = %lldLL;\n", p.causal_off + 1,
                        (long long)d->skv, (long long)d->skv);
    else
        tuner_sb_printf(&sb, "const long long jend = %lldLL;\n", (long long)d->skv);
    /* Pass 1: the row max over those keys (-inf when every one is masked out or there is none). */
    tuner_sb_puts(&sb, "float mx = -HD_INF;\nfor (long long j = 0; j < jend; j++) mx = fmaxf(mx, score(j));\n");
    /* Pass 2: l = sum of exp(s - mx), acc[c] = sum of exp(s - mx) v[j, c]. */
    tuner_sb_printf(&sb, "float l = 0.0f, acc[%d];\nfor (int t = 0; t < %d; t++) acc[t] = 0.0f;\n", nt, nt);
    tuner_sb_puts(&sb, "if (mx != -HD_INF) {\nfor (long long j = 0; j < jend; j++) {\n"
                       "const float s = score(j);\nif (s == -HD_INF) continue;\nconst float e = expf(s - mx);\n"
                       "l += e;\n");
    tuner_sb_printf(&sb, "for (int t = 0; t < %d; t++) {\nconst long long c = lane + 32 * t;\n"
                         "if (c < %lldLL) acc[t] += e * hd_f32(%s[%s]);\n}\n}\n}\n",
                    nt, (long long)d->d, p.v_ptr, v_off);
    /* The store: out[b, h, i, c] through the epilogue, whose operands are named by the output's
     * flattened leading index (b, h, i) in bhsd, (b, i, h) in bshd, and the column c. */
    if (p.bshd)
        tuner_sb_printf(&sb, "const long long orow = (b * %lldLL + i) * %lldLL + h;\n", (long long)d->s,
                        (long long)d->hq);
    else
        tuner_sb_printf(&sb, "const long long orow = (b * %lldLL + h) * %lldLL + i;\n", (long long)d->hq,
                        (long long)d->s);
    tuner_sb_printf(&sb, "for (int t = 0; t < %d; t++) {\nconst long long c = lane + 32 * t;\n"
                         "if (c >= %lldLL) break;\n"
                         "float o = (mx == -HD_INF || l == 0.0f) ? 0.0f : acc[t] / l;\n",
                    nt, (long long)d->d);
    tuner__bcast_ctx ec = {op, "orow", "c"};
    tuner__emit_chain(&sb, op, &op->epilogue, "o", tuner__bcast_load, &ec);
    tuner_sb_printf(&sb, "out[%s] = o;\n}\n}\n", o_off);
    free(q_off);
    free(o_off);
    free(k_off);
    free(v_off);
    free(m_val);

    tuner__one_launch(prog, op, "hd_reference", (unsigned)((rows + REF_WARPS - 1) / REF_WARPS), 32 * REF_WARPS);
    prog->source = tuner_sb_take(&sb);
    prog->output_dtype = TUNER_F32;
    return prog->source ? 0 : -ENOMEM;
}
