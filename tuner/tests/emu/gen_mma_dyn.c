/* tuner/tests/emu/gen_mma_dyn.c - one f16/bf16 matmul_mma candidate of a dynamic op (named M, N
 * and/or K, issue 39) for emu_mma.cpp, with inputs at a few sizes of its dims, and the check of
 * what the emulation computed against the op in double, the poisoned margin past the output
 * untouched (a developer check without a GPU; emulate_mma_dyn.sh drives both; the command line
 * and the files: emu_dyn.h).
 * CASE (sm_80, or $EMU_SM; the dims' max kept small for the CPU): 0 f16 [m,k]x[k,n] <= 200x136x120, all named,
 * + bias[n] + residual[m,n], GELU (tanh); 1 f16 q @ k^T [s,64] x [s,64]^T, s <= 200; 2 bf16 p @ v
 * [s,s] x [s,64], s <= 200; 3 bf16 [m,k]x[k,n] <= 192x200x136, multiples of 8, + bias + residual;
 * 4 f16 [40,k]x[k,24], k <= 2048 (a long named K); 5 f16 [m,k]x[n,k]^T <= 196x132x124, multiples
 * of 4 (8-byte cp.async); 6 bf16 [m,k]x[k,n] <= 198x130x122, multiples of 2 (4-byte cp.async), +
 * bias + residual, GELU; for matmul_wgmma (EMU_SM=90a EMU_TEMPLATE=matmul_wgmma, emulate_wgmma.sh):
 * 7 f16 [m,k]x[k,n] m <= 200 named, N 136, K 120, + bias + residual, GELU; 8 bf16 [m,k]x[n,k]^T,
 * m <= 196, N 200, K 128; 9 f16 77x72x64 fixed, + bias + residual, GELU; 10 e4m3 x e4m3 -> f16
 * 96x256x256, B [N,K]; 11 the same with B [K,N] (transposed in the kernel); 12 f16 [m,2048]x[2048,1024],
 * m <= 1280 named (stream-K's division at launch, CASES=12 EMU_PARAM=stream_k=1); 13 e4m3 x e5m2 ->
 * bf16 96x256x256 with row and column scales (swapped FP8, CASES=13 EMU_PARAM=swap=1); 14 the same
 * with M named (n <= 96); 15 e4m3 -> bf16 96x208x144 with B [K,N] and row and column scales (B
 * transposed by a launch of its own, CASES=15 EMU_PARAM=pretranspose=1); 16 the same over a named
 * M (n <= 96). Size sets: every dim at
 * its min, odd sizes (odd multiples of multiple_of), every dim at its max, one step past a
 * multiple of 64. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/gemm/tests/dyn_matmul.h"
#include "tuner/tests/common.h"
#include "tuner/tests/emu/emu_dyn.h"
#include "tuner/tests/host_values.h"

/* An FP8 op of at most 96 rows with A's scales per row, over a named M (n <= 96): A's rows, its
 * row scales and the output's named with it. */
static tuner_op fp8_named_m(tuner_op op)
{
    dyn_matmul_set_dim(&op, 1, 96, 1);
    op.inputs[0].sym[0] = op.inputs[2].sym[0] = op.output.sym[0] = 1;
    return op;
}

static tuner_op case_op(int c)
{
    switch (c) {
    case 0:
        return dyn_matmul_nk(TUNER_F16, 200, 136, 120, "m", "n", "k", 1, false, true);
    case 1:
        return dyn_matmul_nk(TUNER_F16, 200, 200, 64, "s", "s", NULL, 1, true, false);
    case 2:
        return dyn_matmul_nk(TUNER_BF16, 200, 64, 200, "s", NULL, "s", 1, false, false);
    case 3: {
        tuner_op op = dyn_matmul_nk(TUNER_BF16, 192, 200, 136, "m", "n", "k", 8, false, true);
        for (int k = 0; k < op.n_dims; k++)
            op.dims[k].multiple_of = 8;
        return op;
    }
    case 4:
        return dyn_matmul_nk(TUNER_F16, 40, 24, 2048, NULL, NULL, "k", 1, false, false);
    /* For matmul_wgmma (EMU_SM=90a EMU_TEMPLATE=matmul_wgmma): M named or fixed, 16-byte rows. */
    case 7:
        return dyn_matmul_nk(TUNER_F16, 200, 136, 120, "m", NULL, NULL, 1, false, true);
    case 8:
        return dyn_matmul_nk(TUNER_BF16, 196, 200, 128, "m", NULL, NULL, 1, true, false);
    case 9:
        return dyn_matmul_nk(TUNER_F16, 77, 72, 64, NULL, NULL, NULL, 1, false, true);
    /* FP8 for matmul_wgmma: e4m3 x e4m3 -> f16, 96x256x256, B [N,K]; the same with B [K,N], which
     * the kernel's spare producer warps transpose. */
    case 10:
        return t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_F16, 0, 96, 256, 256, TUNER_SCALE_NONE, TUNER_SCALE_NONE, false);
    case 11:
        return t_fp8_mn(t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_F16, 0, 96, 256, 256, TUNER_SCALE_NONE,
                                     TUNER_SCALE_NONE, false),
                        false, true);
    /* Stream-K over a named M (EMU_PARAM=stream_k=1): 32 k tiles, so that the shared tiles hold 4
     * or more per block from 17 tiles up; at the size sets, tiles whole (m = 1), all shared (128x128
     * at 769 and 1280) and whole waves before shared ones (64x64 at 769 and 1280). */
    case 12:
        return dyn_matmul_nk(TUNER_F16, 1280, 1024, 2048, "m", NULL, NULL, 1, false, false);
    /* FP8 with swapped operands (EMU_PARAM=swap=1): e4m3 x e5m2 -> bf16 96x256x256, B [N,K], A's
     * scales per row and B's per column (applied at the output's coordinates by the transposed
     * store). */
    case 13:
        return t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E5M2, TUNER_BF16, 0, 96, 256, 256, TUNER_SCALE_ROW, TUNER_SCALE_COL,
                            false);
    /* The same over a named M (decode batches, n <= 96), A's row scales [n] named with it. */
    case 14:
        return fp8_named_m(case_op(13));
    /* FP8 with B [K,N] transposed before the GEMM (EMU_PARAM=pretranspose=1): N and K multiples
     * of 16 but not of 64, so that the transposing launch's last tiles are partial both ways. */
    case 15:
        return t_fp8_mn(t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, 96, 208, 144, TUNER_SCALE_ROW,
                                     TUNER_SCALE_COL, false),
                        false, true);
    /* The same over a named M (n <= 96; the transposing launch takes the size too), A's row
     * scales named with it. */
    case 16:
        return fp8_named_m(case_op(15));
    /* Pingpong's walk (EMU_PARAM=pingpong=1): 2176x1024 in 64x64 tiles is 544, more than two
     * per block of the 132 (a consumer's third and fourth tiles), 17 x 16 = 272 in 128x64 ones
     * (a last round of 8 tiles: blocks with three tiles beside blocks with two). One k tile. */
    case 17:
        return dyn_matmul_nk(TUNER_F16, 2176, 1024, 64, NULL, NULL, NULL, 1, false, false);
    default: {
        /* multiples of 4 (8-byte cp.async) and of 2 (4-byte) */
        const bool four = c == 5;
        tuner_op op = four ? dyn_matmul_nk(TUNER_F16, 196, 132, 124, "m", "n", "k", 4, true, false)
                           : dyn_matmul_nk(TUNER_BF16, 198, 130, 122, "m", "n", "k", 2, false, true);
        for (int k = 0; k < op.n_dims; k++)
            op.dims[k].multiple_of = four ? 4 : 2;
        return op;
    }
    }
}


/* The sizes of set j: the min, an odd size about 3/5 of the way (rounded to multiple_of; a
 * different one per dim), the max, and one multiple_of past the last multiple of 64 below the max
 * (a last tile of one row, column or K step after whole ones). */
static void set_sizes(const tuner_op *op, int j, int64_t *sz)
{
    for (int k = 0; k < TUNER_MAX_DIMS; k++)
        sz[k] = 1;
    for (int k = 0; k < op->n_dims; k++) {
        const tuner_dim *d = &op->dims[k];
        if (j == 0)
            sz[k] = d->min;
        else if (j == 2)
            sz[k] = d->max;
        else if (j == 3) {
            const long long v = (d->max - 1) / 64 * 64 + d->multiple_of;
            sz[k] = v < d->min ? d->min : v > d->max ? d->max : v;
        } else {
            long long v = d->min + (d->max - d->min) * (3 + k) / (5 + 2 * k);
            if (d->multiple_of > 1)
                v = (v / d->multiple_of | 1) * d->multiple_of;
            else
                v |= 1;
            sz[k] = v < d->min ? d->min : v > d->max ? d->max : v;
        }
    }
}

static int check_set(const char *dir, const tuner_op *op, const int64_t *sz)
{
    long long os[2], as[2];
    emu_shape_at(&op->output, sz, os);
    emu_shape_at(&op->inputs[0], sz, as);
    const long long M = os[0], N = os[1], K = as[1];
    const tuner_dtype dt = op->output.dtype;
    emu_set set;
    if (!emu_set_load(dir, op, (size_t)(M * N * tuner_dtype_size(dt)), &set))
        return 1;
    void *const *in = set.in;
    const unsigned char *out = set.out;
    /* An FP8 op's scales (inputs 2 and 3: A's per row or tensor, then B's per column or tensor)
     * multiply the product; another op's inputs past A and B are the bias and the residual. */
    const tuner_scale_kind sa = op->attrs.matmul.scale_a, sb = op->attrs.matmul.scale_b;
    const bool scaled = sa != TUNER_SCALE_NONE || sb != TUNER_SCALE_NONE;
    const bool tb = op->attrs.matmul.trans_b, epi = !scaled && op->n_inputs > 2;
    long bad = 0;
    double maxerr = 0;
    for (long long m = 0; m < M; m++)
        for (long long c = 0; c < N; c++) {
            double acc = 0;
            for (long long k = 0; k < K; k++)
                acc += (double)t_host_get(op->inputs[0].dtype, in[0], (size_t)(m * K + k)) *
                       t_host_get(op->inputs[1].dtype, in[1], (size_t)(tb ? c * K + k : k * N + c));
            if (scaled) {
                const int si = sa != TUNER_SCALE_NONE ? 3 : 2;
                if (sa != TUNER_SCALE_NONE)
                    acc *= t_host_get(TUNER_F32, in[2], (size_t)(sa == TUNER_SCALE_ROW ? m : 0));
                if (sb != TUNER_SCALE_NONE)
                    acc *= t_host_get(TUNER_F32, in[si], (size_t)(sb == TUNER_SCALE_COL ? c : 0));
            }
            if (epi) {
                acc += t_host_get(op->inputs[2].dtype, in[2], (size_t)c);
                acc += t_host_get(op->inputs[3].dtype, in[3], (size_t)(m * N + c));
                acc = 0.5 * acc * (1.0 + tanh(0.7978845608028654 * (acc + 0.044715 * acc * acc * acc)));
            }
            const double got = t_host_get(dt, out, (size_t)(m * N + c));
            const double e = fabs(got - acc) / (1.0 + fabs(acc));
            if (!(e <= (dt == TUNER_BF16 ? 1.6e-2 : 2e-3))) {
                if (bad < 5)
                    fprintf(stderr, "m %lld n %lld: got %g want %g\n", m, c, got, acc);
                bad++;
            }
            if (e > maxerr || e != e)
                maxerr = e;
        }
    char what[64];
    snprintf(what, sizeof(what), "[%lldx%lldx%lld]", M, N, K);
    return emu_set_verdict(&set, op, what, bad, M * N, maxerr);
}

/* Small integers / 16, exact in f16 and bf16 (products and sums of a few hundred stay well
 * inside f32's exact range relative to the tolerance). */
static float input_value(int input)
{
    (void)input;
    return (float)t_rnd_int(-16, 16) / 16.0f;
}

int main(int argc, char **argv)
{
    /* sm_80 unless EMU_SM says (90: the rings of 8 and 12 stages for M <= 128) */
    const char *sm = getenv("EMU_SM");
    const emu_dyn_gen g = {case_op, set_sizes, check_set, input_value, "// ---- end of tuner/gemm helpers ----",
                           {.sm = sm ? atoi(sm) : 80, .arch_specific = sm && strchr(sm, 'a')},
                           getenv("EMU_TEMPLATE")};
    return emu_dyn_main(argc, argv, &g);
}
