/* op/op.c - static names of the enums in op/op.h (used in JSON, keys and generated names). */
#include "op/op.h"

#include <stdio.h>

const char *tuner_dtype_name(tuner_dtype d)
{
    switch (d) {
    case TUNER_F16:
        return "f16";
    case TUNER_BF16:
        return "bf16";
    case TUNER_F32:
        return "f32";
    default:
        return "unknown";
    }
}

const char *tuner_op_name(tuner_op_kind k)
{
    static const char *const names[TUNER_OP_COUNT] = {
        [TUNER_OP_MATMUL] = "matmul",       [TUNER_OP_CONV2D] = "conv2d",
        [TUNER_OP_SOFTMAX] = "softmax",     [TUNER_OP_LAYERNORM] = "layernorm",
        [TUNER_OP_RMSNORM] = "rmsnorm",     [TUNER_OP_REDUCE] = "reduce",
        [TUNER_OP_ELEMENTWISE] = "elementwise",
    };
    if ((int)k < 0 || k >= TUNER_OP_COUNT)
        return "unknown";
    return names[k];
}

const char *tuner_ew_name(tuner_ew_kind k)
{
    static const char *const names[TUNER_EW_COUNT] = {
        [TUNER_EW_ADD] = "add",         [TUNER_EW_SUB] = "sub",
        [TUNER_EW_MUL] = "mul",         [TUNER_EW_DIV] = "div",
        [TUNER_EW_MAX] = "max",         [TUNER_EW_MIN] = "min",
        [TUNER_EW_RELU] = "relu",       [TUNER_EW_GELU_ERF] = "gelu",
        [TUNER_EW_GELU_TANH] = "gelu_tanh", [TUNER_EW_SILU] = "silu",
        [TUNER_EW_SIGMOID] = "sigmoid", [TUNER_EW_TANH] = "tanh",
        [TUNER_EW_EXP] = "exp",         [TUNER_EW_NEG] = "neg",
        [TUNER_EW_ABS] = "abs",         [TUNER_EW_SQUARE] = "square",
        [TUNER_EW_SCALE] = "scale",     [TUNER_EW_CAST] = "cast",
    };
    if ((int)k < 0 || k >= TUNER_EW_COUNT)
        return "unknown";
    return names[k];
}

char *tuner_target_name(const tuner_target *t, char *buf, int len)
{
    if (!buf || len < 1)
        return buf;
    if (!t)
        snprintf(buf, (size_t)len, "sm_?");
    else
        snprintf(buf, (size_t)len, "sm_%d%s", t->sm, t->arch_specific ? "a" : "");
    return buf;
}

const char *tuner_reduce_name(tuner_reduce_kind k)
{
    switch (k) {
    case TUNER_REDUCE_SUM:
        return "sum";
    case TUNER_REDUCE_MEAN:
        return "mean";
    case TUNER_REDUCE_MAX:
        return "max";
    }
    return "unknown";
}
