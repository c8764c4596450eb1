/* tuner/attn/tests/attn_host.c - the attention GPU checks' fp64 reference (attn_host.h). */
#include "tuner/attn/tests/attn_host.h"

#include <math.h>

#include "tuner/tests/host_values.h"

bool ta_reference_row(const tuner__attn_problem *p, const void *const in[4], long long b, long long h, long long i,
                      double *out, double *scores)
{
    const tuner_attention_dims *d = &p->d;
    const long long hk = h / d->group;
    /* Packed: k and v are head ranges of qkv (in[0]), the mask in[1]. */
    const void *qin = in[0], *kin = p->packed ? in[0] : in[1], *vin = p->packed ? in[0] : in[2];
    const void *min = in[p->mask_in];
    const long long k0 = p->packed ? p->k_head0 * d->d : 0, v0 = p->packed ? p->v_head0 * d->d : 0;
    double mx = -INFINITY;
    for (long long j = 0; j < d->skv; j++) {
        double s = -INFINITY;
        if (!p->causal || j <= i + p->causal_off) {
            double dot = 0;
            for (long long c = 0; c < d->d; c++)
                dot += (double)t_host_get(p->dt, qin, (size_t)(b * p->q_sb + h * p->q_sh + i * p->q_ss + c)) *
                       (double)t_host_get(p->dt, kin, (size_t)(k0 + b * p->kv_sb + hk * p->kv_sh + j * p->kv_ss + c));
            s = p->scale * dot;
            if (d->has_mask)
                s += (double)t_host_get(p->mask_dt, min,
                                        (size_t)(b * p->m_st[0] + h * p->m_st[1] + i * p->m_st[2] + j * p->m_st[3]));
        }
        scores[j] = s;
        if (s > mx)
            mx = s;
    }
    for (long long c = 0; c < d->d; c++)
        out[c] = 0;
    if (mx == -INFINITY)
        return false;
    double l = 0;
    for (long long j = 0; j < d->skv; j++) {
        if (scores[j] == -INFINITY)
            continue;
        const double w = exp(scores[j] - mx);
        l += w;
        for (long long c = 0; c < d->d; c++)
            out[c] += w * (double)t_host_get(p->dt, vin, (size_t)(v0 + b * p->kv_sb + hk * p->kv_sh + j * p->kv_ss + c));
    }
    for (long long c = 0; c < d->d; c++)
        out[c] /= l;
    return true;
}
