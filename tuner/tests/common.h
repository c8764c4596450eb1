/* tuner/tests/common.h - small helpers shared by the tuner's unit tests: checks, op builders,
 * and "compile with NVRTC, then let ptxas accept the PTX". */
#ifndef HIDET_TUNER_TESTS_COMMON_H
#define HIDET_TUNER_TESTS_COMMON_H

#include <stdbool.h>
#include <stdio.h>

#include "tuner/tuner.h"

/* One failure count for the test and these helpers. */
extern _Atomic int t_failures;
#define CHECK_FAILURES t_failures
#include "tests/check.h"

tuner_tensor t_tensor(tuner_dtype dt, int rank, const long long *shape, int align);
/* Ops: output inferred the way proto does for these simple cases. */
tuner_op t_softmax(tuner_dtype dt, long long rows, long long d, int align);
tuner_op t_layernorm(tuner_dtype dt, long long rows, long long d, int align, bool affine);
tuner_op t_rmsnorm(tuner_dtype dt, long long rows, long long d, int align, bool gamma);
tuner_op t_reduce(tuner_dtype dt, int rank, const long long *shape, int axis, tuner_reduce_kind k, bool keepdim,
                  int align);
/* x [rows, d] + bias [d] then gelu, scale, cast to dt. */
tuner_op t_elementwise(tuner_dtype dt, long long rows, long long d, int align);
/* copy: x [a, b, c] read as its transpose [c, a, b] (perm 2, 0, 1), then + bias [b] and relu. */
tuner_op t_transpose3(tuner_dtype dt, long long a, long long b, long long c);
/* copy: rows start..start+n-1 with every `step`-th column of x [rows, d] (a slice). */
tuner_op t_slice2(tuner_dtype dt, long long rows, long long d, long long start, long long n, long long step);
/* concat of three [r, d_i, c] tensors along axis 1, then silu. */
tuner_op t_concat3(tuner_dtype dt, long long r, const long long d[3], long long c);
/* matmul of A [bt_a,] M x K (K x M with ta) and B [bt_b,] K x N (N x K with tb), operands aligned
 * to `align` bytes; a batch of 0 makes that operand rank 2 (broadcast over the other's batch). */
tuner_op t_matmul(tuner_dtype dt, long long bt_a, long long bt_b, long long M, long long N, long long K, bool ta,
                  bool tb, int align);
/* NHWC conv2d: x [n, h, w, c], w [k, r, r, c / groups], square stride and padding; output
 * inferred. */
tuner_op t_conv_nhwc(tuner_dtype dt, long long n, long long h, long long w, long long c, long long k, int r,
                     int stride, int pad, int groups);
/* pool2d as the validator leaves it: x [n,h,w,c] (or [n,c,h,w] with nchw), window k[2] with
 * square stride, padding and dilation, the output by PyTorch's rule; or, k NULL, adaptive_avg
 * to P x Q. count_include_pad is avg's default (true). */
tuner_op t_pool(tuner_dtype dt, tuner_pool_kind kind, bool nchw, long long n, long long c, long long h, long long w,
                const int *k, int s, int pad, int d, bool ceil, long long P, long long Q);
/* Adds a binary epilogue step with a new operand of `shape` (and a unary step after it). */
void t_add_epilogue(tuner_op *op, tuner_ew_kind bin, int rank, const long long *shape, tuner_ew_kind un);
/* Input 0's prologue: scale by 0.5, then `bin` with a new input of `shape` (broadcast to input 0),
 * then the unary `un`. */
void t_add_prologue(tuner_op *op, tuner_ew_kind bin, int rank, const long long *shape, tuner_ew_kind un);

/* Compiles source with tuner_compile, writes the PTX to a temp file and runs
 * /usr/local/cuda/bin/ptxas -arch=sm_XX on it. Returns true when both accept. On success
 * *ret_ms (if not NULL) is the NVRTC compile time. `entries` names that must be .entry points. */
bool t_compile_check(const char *what, const char *source, const tuner_target *t, const tuner_program *p,
                     double *ret_ms);

double t_median(double *v, int n);

#endif
