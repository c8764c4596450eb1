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

tuner_op dyn_matmul_nk(tuner_dtype dt, long long M, long long N, long long K, const char *mname, const char *nname,
                       const char *kname, long long min, bool trans_b, bool epi)
{
    tuner_op op = t_matmul(dt, 0, 0, M, N, K, false, trans_b, 16);
    const char *names[3] = {mname, nname, kname};
    const long long size[3] = {M, N, K};
    op.n_dims = 0;
    for (int i = 0; i < 3; i++) {
        if (!names[i])
            continue;
        int k = 0;
        while (k < op.n_dims && strcmp(op.dims[k].name, names[i]) != 0)
            k++;
        if (k < op.n_dims)
            continue;
        /* insertion in name order */
        while (k > 0 && strcmp(op.dims[k - 1].name, names[i]) > 0) {
            op.dims[k] = op.dims[k - 1];
            k--;
        }
        memset(&op.dims[k], 0, sizeof(op.dims[k]));
        snprintf(op.dims[k].name, sizeof(op.dims[k].name), "%s", names[i]);
        op.dims[k].min = min;
        op.dims[k].max = size[i];
        op.dims[k].multiple_of = 1;
        op.n_dims++;
    }
    unsigned bit[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++)
        for (int k = 0; names[i] && k < op.n_dims; k++)
            if (strcmp(op.dims[k].name, names[i]) == 0)
                bit[i] = 1u << k;
    const int bk = trans_b ? 1 : 0;
    op.inputs[0].sym[0] = (uint8_t)bit[0];
    op.inputs[0].sym[1] = (uint8_t)bit[2];
    op.inputs[1].sym[bk] = (uint8_t)bit[2];
    op.inputs[1].sym[1 - bk] = (uint8_t)bit[1];
    op.output.sym[0] = (uint8_t)bit[0];
    op.output.sym[1] = (uint8_t)bit[1];
    if (epi) {
        long long bias[1] = {N}, res[2] = {M, N};
        op.inputs[2] = t_tensor(dt, 1, bias, 16);
        op.inputs[2].sym[0] = (uint8_t)bit[1];
        op.inputs[3] = t_tensor(dt, 2, res, 16);
        op.inputs[3].sym[0] = (uint8_t)bit[0];
        op.inputs[3].sym[1] = (uint8_t)bit[1];
        op.n_inputs = 4;
        op.epilogue.steps[op.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_ADD, .operand = 2};
        op.epilogue.steps[op.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_ADD, .operand = 3};
        op.epilogue.steps[op.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_GELU_TANH, .operand = -1};
    }
    return op;
}
