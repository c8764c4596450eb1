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
/* reduce over the consecutive axes axis .. axis + naxes - 1 (a multi-axis reduce). */
tuner_op t_reduce_axes(tuner_dtype dt, int rank, const long long *shape, int axis, int naxes, tuner_reduce_kind k,
                       bool keepdim, int align);
/* copy: x [rows, d] padded with `value`, lower[k] before and upper[k] after axis k (F.pad). */
tuner_op t_pad2(tuner_dtype dt, long long rows, long long d, const long long lower[2], const long long upper[2],
                double value);
/* copy: x [1, d] expanded to [n, 1, d] (zero strides: torch's expand made dense). */
tuner_op t_expand2(tuner_dtype dt, long long n, long long d);
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
/* An FP8 matmul as a request gives it: A [bt?, M, K] of da, B [N, K] (trans_b) of db, out_dtype
 * out, scales sa and sb (tuner_scale_kind) as f32 inputs after A and B (fast accumulation but
 * with block scales, the request's default); with bias, a [N] f16 bias and GELU in the epilogue. */
tuner_op t_fp8_matmul(tuner_dtype da, tuner_dtype db, tuner_dtype out, long long bt, long long M, long long N,
                      long long K, tuner_scale_kind sa, tuner_scale_kind sb, bool bias);
/* op's output quantized to e4m3 as a serving framework's next layer wants it: divided by an f32
 * [1] scale (a new input), then cast (saturating), the epilogue's last step. */
tuner_op t_fp8_quantized(tuner_op op);
/* op with its FP8 operands MN-major as asked: A as [batch?][K, M] (trans_a), B as [batch?][K, N]
 * (trans_b false); sm_90a's matmul_wgmma transposes them in the kernel. */
tuner_op t_fp8_mn(tuner_op op, bool a_mn, bool b_mn);
/* t_fp8_quantized whose quantize step also records the amax (tuner_ew_step.amax) into a new f32
 * [1] input. */
tuner_op t_fp8_quantized_amax(tuner_op op);
/* op without fast accumulation: each 128-k tile's sum promoted into fp32 registers. */
tuner_op t_fp8_promoted(tuner_op op);
/* NHWC conv2d: x [n, h, w, c], w [k, r, r, c / groups], square stride and padding; output
 * inferred. */
tuner_op t_conv_nhwc(tuner_dtype dt, long long n, long long h, long long w, long long c, long long k, int r,
                     int stride, int pad, int groups);
/* pool2d as the validator leaves it: x [n,h,w,c] (or [n,c,h,w] with nchw), window k[2] with
 * square stride, padding and dilation, the output by PyTorch's rule; or, k NULL, adaptive_avg
 * to P x Q. count_include_pad is avg's default (true). */
tuner_op t_pool(tuner_dtype dt, tuner_pool_kind kind, bool nchw, long long n, long long c, long long h, long long w,
                const int *k, int s, int pad, int d, bool ceil, long long P, long long Q);
/* gather as the validator leaves it: x (dtype dt, rank xr) gathered along `axis` by an index
 * (dtype it, rank ir); the output x.shape[:axis] + index.shape + x.shape[axis+1:]. */
tuner_op t_gather(tuner_dtype dt, int xr, const long long *xs, int axis, tuner_dtype it, int ir, const long long *is);
/* elementwise: an integer x (dtype it) cast to dt, then the mask arithmetic of HF models:
 * (1 - mask) * -10000. */
tuner_op t_int_cast(tuner_dtype it, tuner_dtype dt, int rank, const long long *shape);
/* Adds a binary epilogue step with a new operand of `shape` (and a unary step after it). */
void t_add_epilogue(tuner_op *op, tuner_ew_kind bin, int rank, const long long *shape, tuner_ew_kind un);
/* Input 0's prologue: scale by 0.5, then `bin` with a new input of `shape` (broadcast to input 0),
 * then the unary `un`. */
void t_add_prologue(tuner_op *op, tuner_ew_kind bin, int rank, const long long *shape, tuner_ew_kind un);

/* Whether a driver launches a kernel asking for `dynamic` bytes of dynamic shared memory beside
 * `static_bytes` of static arrays, its launcher raising the limit only above 48 KiB (the launch
 * contract, docs/api.md): below that the driver allows 48 KiB less the static bytes. */
bool t_shared_launchable(unsigned long dynamic, unsigned long static_bytes);
/* Compiles source with tuner_compile (NVRTC for the real target: PTX, and a cubin from the ptxas
 * inside NVRTC) and checks that every launch of p (if not NULL) names an .entry of the PTX and is
 * t_shared_launchable with the static arrays its PTX declares; the first program of each target is
 * also assembled by the toolkit's ptxas -arch=sm_XX (t_ptxas). Returns true when all accept. On
 * success *ret_ms (if not NULL) is the NVRTC compile time. */
bool t_compile_check(const char *what, const char *source, const tuner_target *t, const tuner_program *p,
                     double *ret_ms);

/* Runs the toolkit's ptxas on ptx: /usr/local/cuda/bin/ptxas -arch=ARCH OPTS -o /dev/null (opts
 * "" or "-v", say). Returns its exit status (-1 when it could not be run, or for an arch or opts
 * with characters no option has) and, if out is not NULL, what it printed, stdout and stderr
 * (malloc'd; NULL if none could be kept). With HIDETD_COMPILE_CACHE set, an accepted PTX's
 * output is kept there (tuner/compile_cache.h), keyed by ptxas --version, arch, opts and the PTX,
 * and read back the next time: the test command's second build checks the same PTX - the spill
 * reports of ptxas -v included - without assembling it again. A rejection is never kept. */
int t_ptxas(const char *ptx, const char *arch, const char *opts, char **out);

double t_median(double *v, int n);

/* Which of its compile jobs a run takes. The compile checks (NVRTC for the real target) are
 * nearly all of these tests' time, and NVRTC is not our code: the generators are. So a test
 * generates and checks the source of every job it is given, and compiles
 *  - with --shard K/N on its command line: only the jobs i with i % N == K - 1 (meson runs the
 *    N shards as N tests, side by side; test_wgmma numbers the jobs it compiles and the ones
 *    it only generates apart, so that a sample is dealt evenly too);
 *  - with HIDET_TEST_SAMPLE=S[+R] in the environment (scripts/test.sh --quick sets it; the
 *    sanitizer build's registration sets HIDET_TEST_SAMPLE_BUILD, which it overrides): of each
 *    case's jobs j = 0, 1, ... only those with j % S == R (default R = 0, so a case's first job,
 *    its preferred candidate, is always compiled). A run prints what it sampled. Unset, or
 *    S = 1: every job. */
typedef struct t_subset {
    int shard, n_shards; /* 1-based; 1/1 without --shard */
    int every, rest;     /* the sample: j % every == rest */
} t_subset;
extern t_subset t_sub;
/* Reads --shard K/N from argv (removing it) and HIDET_TEST_SAMPLE from the environment into
 * t_sub; prints the subset when it is not everything. Returns 0, or -1 (after a message) on a
 * malformed value. */
int t_subset_init(int *argc, char **argv);
/* Whether job i (in the test's fixed order) is this shard's. */
bool t_in_shard(size_t i);
/* Whether job j of its case (numbered from 0 within the case) is compiled in this run. */
bool t_in_sample(size_t j);
/* True when the run compiles only a sample (HIDET_TEST_SAMPLE above 1). */
bool t_sampling(void);

/* Whether candidate i of a case gets a test's costly per-candidate checks (programs generated
 * again at other sizes, say) beside the cheap ones: every candidate, unless
 * HIDET_TEST_CHECK_EVERY=N is set (the sanitizer build's registrations set it, where generating a
 * program costs several times as much): then i % N == 0. A test also checks its default. */
bool t_in_check_sample(size_t i);

#endif
