/* tuner/attn/tests/attn_host.h - the host side shared by the attention templates' GPU checks
 * (gpu_attn.c, gpu_attn_decode.c, gpu_attn_wgmma.c): the fp64 reference every candidate's
 * output is compared with, computed from the very input buffers the kernels read. */
#ifndef HIDET_TUNER_ATTN_TESTS_ATTN_HOST_H
#define HIDET_TUNER_ATTN_TESTS_ATTN_HOST_H

#include <stdbool.h>

#include "tuner/attn/attn.h"

/* Row (b, h, i) of attention in fp64, straight from op/op.h's definition, before any epilogue:
 * out[c] = sum_j w_j v[b, h / group, j, c] / sum_j w_j with w_j = exp(s_j - max s), s_j =
 * scale q[b, h, i, :] . k[b, h / group, j, :] + mask (broadcast to [B, Hq, S, Skv]); keys past
 * i + causal_off under causal and keys whose score is -inf are left out. in[0..2] are q, k and v
 * (dtype p->dt), in[3] the mask (p->mask_dt; unread without one), host buffers in p's layouts;
 * in the packed layout in[0] is qkv and in[1] the mask.
 * scores: room for Skv doubles (overwritten). Returns false, with out[0..D) all 0, when the row
 * keeps no key. */
bool ta_reference_row(const tuner__attn_problem *p, const void *const in[4], long long b, long long h, long long i,
                      double *out, double *scores);

#endif
