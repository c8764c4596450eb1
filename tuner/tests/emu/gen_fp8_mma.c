/* tuner/tests/emu/gen_fp8_mma.c - matmul_mma's FP8 candidates (sm_89) for the CPU emulator
 * (emu_dyn.h's generator command line; emulate_fp8_mma.sh drives it with emu_mma.cpp, whose
 * mma.sync m16n8k32 takes the operands' formats from launch.h). One size set: the ops are
 * static. The check computes the op in double from the decoded inputs (scales, per-block scales,
 * the div + cast epilogue of a quantizing case).
 * CASE: 0 e4m3 x e5m2, row/col scales, f32 out, 40x72x272; 1 the same, fast_accum false; 2 per-block
 * scales, bf16 out, 150x136x400; 3 tensor scales / s, quantized to e4m3, 64x64x160; 4 a decode shape,
 * e5m2 x e4m3, tensor and column scales, 9x136x512 (16-row tiles, split-K, deep rings). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tuner/template.h"
#include "tuner/tests/common.h"
#include "tuner/tests/emu/emu_dyn.h"
#include "tuner/tests/host_values.h"

static tuner_op case_op(int c)
{
    const tuner_dtype E4 = TUNER_F8E4M3, E5 = TUNER_F8E5M2;
    switch (c) {
    case 0:
        return t_fp8_matmul(E4, E5, TUNER_F32, 0, 40, 72, 272, TUNER_SCALE_ROW, TUNER_SCALE_COL, false);
    case 1:
        return t_fp8_promoted(t_fp8_matmul(E4, E5, TUNER_F32, 0, 40, 72, 272, TUNER_SCALE_ROW, TUNER_SCALE_COL, false));
    case 2:
        return t_fp8_matmul(E4, E4, TUNER_BF16, 0, 150, 136, 400, TUNER_SCALE_BLOCK, TUNER_SCALE_BLOCK, false);
    case 4:
        return t_fp8_matmul(E5, E4, TUNER_BF16, 0, 9, 136, 512, TUNER_SCALE_TENSOR, TUNER_SCALE_COL, false);
    default:
        return t_fp8_quantized(
            t_fp8_matmul(E4, E4, TUNER_BF16, 0, 64, 64, 160, TUNER_SCALE_TENSOR, TUNER_SCALE_TENSOR, false));
    }
}

/* Element k of input i (host_values decodes FP8 and f32 alike). */
#define IN(i, k) ((double)t_host_get(op->inputs[i].dtype, in[i], (size_t)(k)))

static int check_set(const char *dir, const tuner_op *op, const int64_t *sz)
{
    (void)sz;
    emu_set set;
    if (!emu_set_load(dir, op, (size_t)(tuner_tensor_numel(&op->output) * tuner_dtype_size(op->output.dtype)), &set))
        return 1;
    void *const *in = set.in;
    const unsigned char *out = set.out;
    const long long M = op->output.shape[0], N = op->output.shape[1], K = op->inputs[0].shape[1], KB = (K + 127) / 128;
    const tuner_scale_kind sa = op->attrs.matmul.scale_a, sb = op->attrs.matmul.scale_b;
    long bad = 0;
    double maxerr = 0;
    for (long long m = 0; m < M; m++)
        for (long long n = 0; n < N; n++) {
            double acc = 0;
            for (long long kb = 0; kb < KB; kb++) {
                double s = 0;
                for (long long k = kb * 128; k < K && k < kb * 128 + 128; k++)
                    s += IN(0, m * K + k) * IN(1, n * K + k);
                if (sa == TUNER_SCALE_BLOCK)
                    s *= IN(2, m * KB + kb) * IN(3, (n / 128) * KB + kb);
                acc += s;
            }
            if (sa == TUNER_SCALE_ROW || sa == TUNER_SCALE_TENSOR)
                acc *= IN(2, sa == TUNER_SCALE_ROW ? m : 0);
            if (sb == TUNER_SCALE_COL || sb == TUNER_SCALE_TENSOR)
                acc *= IN(3, sb == TUNER_SCALE_COL ? n : 0);
            if (tuner_dtype_is_fp8(op->output.dtype))
                acc /= IN(4, 0);
            const double got = t_host_get(op->output.dtype, out, (size_t)(m * N + n));
            const double tol = tuner_dtype_is_fp8(op->output.dtype) ? 0.13 : op->output.dtype == TUNER_BF16 ? 1e-2 : 1e-4;
            const double e = fabs(got - acc) / (1.0 + fabs(acc));
            if (!(e <= tol)) {
                if (bad < 5)
                    fprintf(stderr, "m %lld n %lld: got %g want %g\n", m, n, got, acc);
                bad++;
            }
            if (e > maxerr || e != e)
                maxerr = e;
        }
    char what[64];
    snprintf(what, sizeof(what), "[%lldx%lldx%lld]", M, N, K);
    return emu_set_verdict(&set, op, what, bad, M * N, maxerr);
}

static void set_sizes(const tuner_op *op, int j, int64_t *sz)
{
    (void)op;
    (void)j;
    for (int k = 0; k < TUNER_MAX_DIMS; k++)
        sz[k] = 1;
}

/* FP8 values of magnitude <= 2 (the writer rounds them to the input's format), scales in
 * [0.5, 1.5]. */
static float input_value(int input)
{
    if (input < 2)
        return (float)t_rnd_int(-256, 256) / 128.0f;
    return 0.5f + (float)t_rnd_int(0, 1024) / 1024.0f;
}

int main(int argc, char **argv)
{
    const emu_dyn_gen g = {case_op, set_sizes, check_set, input_value, "// ---- end of tuner/gemm helpers ----",
                           {.sm = 89}, "matmul_mma", 1};
    return emu_dyn_main(argc, argv, &g);
}
