/* tuner/gemm/tests/dyn_matmul.h - the dynamic matmuls (a named M, N, K or batch, issue 39) that
 * the CPU test (test_dynamic.c) and the GPU check (gpu_dynamic.c) both build, their named axes
 * holding the dims' max, as proto would parse them: one dim "n" on axis 0 for the named M or
 * batch, named M, N and K with dims of their own (dyn_matmul_nk). */
#ifndef HIDET_TUNER_GEMM_TESTS_DYN_MATMUL_H
#define HIDET_TUNER_GEMM_TESTS_DYN_MATMUL_H

#include <stdbool.h>

#include "op/op.h"

/* op's only dim: "n" in [min, max], a multiple of mult. */
void dyn_matmul_set_dim(tuner_op *op, long long min, long long max, long long mult);

/* a [n, K] x b [K, N], n in [min, max] a multiple of mult; with epi, + bias [N] + residual
 * [n, N], then GELU (tanh); allow_tf32 as tf32 says. */
tuner_op dyn_matmul_rows(tuner_dtype dt, long long min, long long max, long long mult, long long N, long long K,
                         bool epi, bool tf32);

/* a [n, K] (2-byte aligned, so loads go through registers) with a prologue relu(0.5 * a * v[K])
 * x b [K, N], n in [1, max]. */
tuner_op dyn_matmul_prologue(tuner_dtype dt, long long max, long long N, long long K, bool tf32);

/* a [b, M, K] x b [b, K, N] (or [K, N] with !b_batched), b in [min, max]; with epi, + a residual
 * [b, M, N] (named) + a bias [1, N]. */
tuner_op dyn_matmul_batch(tuner_dtype dt, long long min, long long max, long long M, long long N, long long K,
                          bool b_batched, bool epi);

/* a [M, K] x b [K, N] (b [N, K] with trans_b) where M, N and K are named mname, nname and
 * kname (NULL: fixed; M and N may share a name, as q @ k^T of a self-attention does, then M ==
 * N), each dim in [min, its size] (sizes are the max) and the dims sorted by name as proto
 * sorts them; with epi, + bias [N] + residual [M, N] (named as the output), then GELU (tanh). */
tuner_op dyn_matmul_nk(tuner_dtype dt, long long M, long long N, long long K, const char *mname, const char *nname,
                       const char *kname, long long min, bool trans_b, bool epi);

#endif
