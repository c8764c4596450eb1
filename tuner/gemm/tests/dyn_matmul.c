/* tuner/gemm/tests/dyn_matmul.c - see dyn_matmul.h. */
#include "tuner/gemm/tests/dyn_matmul.h"

#include <stdio.h>
#include <string.h>

#include "tuner/tests/common.h"

void dyn_matmul_set_dim(tuner_op *op, long long min, long long max, long long mult)
{
    op->n_dims = 1;
    memset(&op->dims[0], 0, sizeof(op->dims[0]));
    snprintf(op->dims[0].name, sizeof(op->dims[0].name), "%s", "n");
    op->dims[0].min = min;
    op->dims[0].max = max;
    op->dims[0].multiple_of = mult;
}

tuner_op dyn_matmul_rows(tuner_dtype dt, long long min, long long max, long long mult, long long N, long long K,
                         bool epi, bool tf32)
{
    tuner_op op = t_matmul(dt, 0, 0, max, N, K, false, false, 16);
    op.attrs.matmul.allow_tf32 = tf32;
    dyn_matmul_set_dim(&op, min, max, mult);
    op.inputs[0].sym[0] = 1;
    op.output.sym[0] = 1;
    if (epi) {
        long long bias[1] = {N}, res[2] = {max, N};
        op.inputs[2] = t_tensor(dt, 1, bias, 16);
        op.inputs[3] = t_tensor(dt, 2, res, 16);
        op.inputs[3].sym[0] = 1;
        op.n_inputs = 4;
        op.epilogue.steps[op.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_ADD, .operand = 2};
        op.epilogue.steps[op.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_ADD, .operand = 3};
        op.epilogue.steps[op.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_GELU_TANH, .operand = -1};
    }
    return op;
}

tuner_op dyn_matmul_prologue(tuner_dtype dt, long long max, long long N, long long K, bool tf32)
{
    tuner_op op = dyn_matmul_rows(dt, 1, max, 1, N, K, false, tf32);
    op.inputs[0].align = 2;
    op.inputs[1].align = 2;
    long long v[1] = {K};
    t_add_prologue(&op, TUNER_EW_MUL, 1, v, TUNER_EW_RELU);
    return op;
}

tuner_op dyn_matmul_batch(tuner_dtype dt, long long min, long long max, long long M, long long N, long long K,
                          bool b_batched, bool epi)
{
    tuner_op op = t_matmul(dt, max, b_batched ? max : 0, M, N, K, false, false, 16);
    dyn_matmul_set_dim(&op, min, max, 1);
    op.inputs[0].sym[0] = 1;
    if (b_batched)
        op.inputs[1].sym[0] = 1;
    op.output.sym[0] = 1;
    if (epi) {
        long long res[3] = {max, M, N}, bias[2] = {1, N};
        op.inputs[2] = t_tensor(dt, 3, res, 16);
        op.inputs[2].sym[0] = 1;
        op.inputs[3] = t_tensor(dt, 2, bias, 16);
        op.n_inputs = 4;
        op.epilogue.steps[op.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_ADD, .operand = 2};
        op.epilogue.steps[op.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_ADD, .operand = 3};
    }
    return op;
}
