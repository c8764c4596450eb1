/* tuner/gemm/tests/dyn_matmul.h - the dynamic matmuls (a named M or batch, issue 39) that the CPU
 * test (test_dynamic.c) and the GPU check (gpu_dynamic.c) both build: one dim "n", its tensors'
 * axis 0 named (sym bit 0) and holding the dim's max, as proto would parse them. */
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

#endif
