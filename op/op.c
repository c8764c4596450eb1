/* op/op.c - the vocabularies of op/op.h: one table per enum, printed and parsed side by side
 * (used in requests, canonical JSON, keys, answers and generated names). */
#include "op/op.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Every table is indexed by its enum and sized by its _COUNT, so a value added to an enum without
 * a name leaves a NULL that lookup() skips and name() reports as "unknown"; the unit tests check
 * that no table has such a hole. */
static const char *const dtype_names[TUNER_DTYPE_COUNT] = {
    [TUNER_F16] = "f16",
    [TUNER_BF16] = "bf16",
    [TUNER_F32] = "f32",
    [TUNER_I32] = "i32",
    [TUNER_I64] = "i64",
    [TUNER_F8E4M3] = "f8e4m3",
    [TUNER_F8E5M2] = "f8e5m2",
};

static const char *const op_names[TUNER_OP_COUNT] = {
    [TUNER_OP_MATMUL] = "matmul",       [TUNER_OP_CONV2D] = "conv2d",
    [TUNER_OP_SOFTMAX] = "softmax",     [TUNER_OP_LAYERNORM] = "layernorm",
    [TUNER_OP_RMSNORM] = "rmsnorm",     [TUNER_OP_REDUCE] = "reduce",
    [TUNER_OP_ELEMENTWISE] = "elementwise", [TUNER_OP_COPY] = "copy",
    [TUNER_OP_CONCAT] = "concat",       [TUNER_OP_POOL2D] = "pool2d",
    [TUNER_OP_GATHER] = "gather",
    [TUNER_OP_ATTENTION] = "attention",
};

static const char *const ew_names[TUNER_EW_COUNT] = {
    [TUNER_EW_ADD] = "add",         [TUNER_EW_SUB] = "sub",
    [TUNER_EW_MUL] = "mul",         [TUNER_EW_DIV] = "div",
    [TUNER_EW_MAX] = "max",         [TUNER_EW_MIN] = "min",
    [TUNER_EW_RELU] = "relu",       [TUNER_EW_GELU_ERF] = "gelu",
    [TUNER_EW_GELU_TANH] = "gelu_tanh", [TUNER_EW_SILU] = "silu",
    [TUNER_EW_SIGMOID] = "sigmoid", [TUNER_EW_TANH] = "tanh",
    [TUNER_EW_EXP] = "exp",         [TUNER_EW_NEG] = "neg",
    [TUNER_EW_ABS] = "abs",         [TUNER_EW_SQUARE] = "square",
    [TUNER_EW_SCALE] = "scale",     [TUNER_EW_CAST] = "cast",
    [TUNER_EW_SQRT] = "sqrt",       [TUNER_EW_RSQRT] = "rsqrt",
    [TUNER_EW_SHIFT] = "shift",     [TUNER_EW_CLAMP] = "clamp",
    [TUNER_EW_HARDSWISH] = "hardswish", [TUNER_EW_HARDSIGMOID] = "hardsigmoid",
    [TUNER_EW_LEAKY_RELU] = "leaky_relu", [TUNER_EW_ERF] = "erf",
    [TUNER_EW_POW] = "pow",
    [TUNER_EW_LOG] = "log",
    [TUNER_EW_EQ] = "eq",           [TUNER_EW_NE] = "ne",
    [TUNER_EW_LT] = "lt",           [TUNER_EW_LE] = "le",
    [TUNER_EW_GT] = "gt",           [TUNER_EW_GE] = "ge",
    [TUNER_EW_WHERE] = "where",     [TUNER_EW_MASKED_FILL] = "masked_fill",
};

/* Parameters by kind (tuner_ew_params); PyTorch's defaults where it has them. */
static const tuner_ew_param p_value[] = {{"value", 0, true}};
static const tuner_ew_param p_clamp[] = {{"min", -HUGE_VAL, false}, {"max", HUGE_VAL, false}};
static const tuner_ew_param p_leaky[] = {{"negative_slope", 0.01, false}};
static const tuner_ew_param p_pow[] = {{"exponent", 0, true}};

static const char *const reduce_names[TUNER_REDUCE_COUNT] = {
    [TUNER_REDUCE_SUM] = "sum",
    [TUNER_REDUCE_MEAN] = "mean",
    [TUNER_REDUCE_MAX] = "max",
};

static const char *const pool_names[TUNER_POOL_COUNT] = {
    [TUNER_POOL_MAX] = "max",
    [TUNER_POOL_AVG] = "avg",
    [TUNER_POOL_ADAPTIVE_AVG] = "adaptive_avg",
};

static const char *const scale_names[TUNER_SCALE_COUNT] = {
    [TUNER_SCALE_NONE] = "none",
    [TUNER_SCALE_TENSOR] = "tensor",
    [TUNER_SCALE_ROW] = "row",
    [TUNER_SCALE_COL] = "col",
    [TUNER_SCALE_BLOCK] = "block",
};

static const char *const tune_names[TUNER_TUNE_COUNT] = {
    [TUNER_TUNE_NONE] = "none",
    [TUNER_TUNE_MODEL] = "model",
    [TUNER_TUNE_MEASURE] = "measure",
};

static const struct {
    const char *name;
    tuner_target target;
} targets[TUNER_TARGET_COUNT] = {
    [TUNER_TARGET_SM80] = {"sm_80", {.sm = 80}},
    [TUNER_TARGET_SM86] = {"sm_86", {.sm = 86}},
    [TUNER_TARGET_SM89] = {"sm_89", {.sm = 89}},
    [TUNER_TARGET_SM90] = {"sm_90", {.sm = 90}},
    [TUNER_TARGET_SM90A] = {"sm_90a", {.sm = 90, .arch_specific = true}},
    [TUNER_TARGET_SM100] = {"sm_100", {.sm = 100}},
    [TUNER_TARGET_SM120] = {"sm_120", {.sm = 120}},
};

static const char *name(const char *const *names, int n, int v)
{
    return v >= 0 && v < n && names[v] ? names[v] : "unknown";
}

/* Index of s in names[0..n), or -1. */
static int lookup(const char *s, const char *const *names, int n)
{
    if (!s)
        return -1;
    for (int i = 0; i < n; i++)
        if (names[i] && strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

const char *tuner_dtype_name(tuner_dtype d)
{
    return name(dtype_names, TUNER_DTYPE_COUNT, (int)d);
}

int tuner_dtype_parse(const char *s, tuner_dtype *ret)
{
    /* Long spellings a request may use; the canonical names come from dtype_names. */
    static const struct {
        const char *name;
        tuner_dtype d;
    } aliases[] = {
        {"float16", TUNER_F16}, {"half", TUNER_F16}, {"fp16", TUNER_F16},
        {"bfloat16", TUNER_BF16}, {"float32", TUNER_F32}, {"fp32", TUNER_F32},
        {"int32", TUNER_I32}, {"int64", TUNER_I64},
        /* PyTorch's names (the "fn": finite, no infinity) and the short ones */
        {"float8_e4m3fn", TUNER_F8E4M3}, {"e4m3", TUNER_F8E4M3},
        {"float8_e5m2", TUNER_F8E5M2}, {"e5m2", TUNER_F8E5M2},
    };
    int k = lookup(s, dtype_names, TUNER_DTYPE_COUNT);
    for (size_t i = 0; k < 0 && s && i < sizeof(aliases) / sizeof(aliases[0]); i++)
        if (strcmp(s, aliases[i].name) == 0)
            k = (int)aliases[i].d;
    if (k < 0 || !ret)
        return -EINVAL;
    *ret = (tuner_dtype)k;
    return 0;
}

const char *tuner_op_name(tuner_op_kind k)
{
    return name(op_names, TUNER_OP_COUNT, (int)k);
}

int tuner_op_parse(const char *s, tuner_op_kind *ret)
{
    int k = lookup(s, op_names, TUNER_OP_COUNT);
    if (k < 0 || !ret)
        return -EINVAL;
    *ret = (tuner_op_kind)k;
    return 0;
}

const char *tuner_ew_name(tuner_ew_kind k)
{
    return name(ew_names, TUNER_EW_COUNT, (int)k);
}

int tuner_ew_parse(const char *s, tuner_ew_kind *ret)
{
    int k = lookup(s, ew_names, TUNER_EW_COUNT);
    if (k < 0 || !ret)
        return -EINVAL;
    *ret = (tuner_ew_kind)k;
    return 0;
}

int tuner_ew_params(tuner_ew_kind k, const tuner_ew_param **ret)
{
    const tuner_ew_param *p = NULL;
    int n = 0;
    switch (k) {
    case TUNER_EW_SCALE:
    case TUNER_EW_SHIFT:
        p = p_value, n = 1;
        break;
    case TUNER_EW_CLAMP:
        p = p_clamp, n = 2;
        break;
    case TUNER_EW_LEAKY_RELU:
        p = p_leaky, n = 1;
        break;
    case TUNER_EW_POW:
        p = p_pow, n = 1;
        break;
    default:
        break;
    }
    if (ret)
        *ret = p;
    return n;
}

int tuner_ew_alias(const char *s, tuner_ew_step *ret, bool *ret_fixed)
{
    if (!s || !ret || !ret_fixed)
        return -EINVAL;
    if (strcmp(s, "relu6") == 0) {
        *ret = (tuner_ew_step){.kind = TUNER_EW_CLAMP, .operand = -1, .scalar = 0, .scalar2 = 6};
        *ret_fixed = true;
        return 0;
    }
    if (strcmp(s, "hardtanh") == 0) {
        *ret = (tuner_ew_step){.kind = TUNER_EW_CLAMP, .operand = -1, .scalar = -1, .scalar2 = 1};
        *ret_fixed = false;
        return 0;
    }
    return -EINVAL;
}

const char *tuner_reduce_name(tuner_reduce_kind k)
{
    return name(reduce_names, TUNER_REDUCE_COUNT, (int)k);
}

int tuner_reduce_parse(const char *s, tuner_reduce_kind *ret)
{
    int k = lookup(s, reduce_names, TUNER_REDUCE_COUNT);
    if (k < 0 || !ret)
        return -EINVAL;
    *ret = (tuner_reduce_kind)k;
    return 0;
}

const char *tuner_pool_name(tuner_pool_kind k)
{
    return name(pool_names, TUNER_POOL_COUNT, (int)k);
}

int tuner_pool_parse(const char *s, tuner_pool_kind *ret)
{
    int k = lookup(s, pool_names, TUNER_POOL_COUNT);
    if (k < 0 || !ret)
        return -EINVAL;
    *ret = (tuner_pool_kind)k;
    return 0;
}

const char *tuner_scale_name(tuner_scale_kind k)
{
    return name(scale_names, TUNER_SCALE_COUNT, (int)k);
}

int tuner_scale_parse(const char *s, tuner_scale_kind *ret)
{
    int k = lookup(s, scale_names, TUNER_SCALE_COUNT);
    if (k < 0 || !ret)
        return -EINVAL;
    *ret = (tuner_scale_kind)k;
    return 0;
}

const char *tuner_tune_name(tuner_tune_mode m)
{
    return name(tune_names, TUNER_TUNE_COUNT, (int)m);
}

int tuner_tune_parse(const char *s, tuner_tune_mode *ret)
{
    int k = lookup(s, tune_names, TUNER_TUNE_COUNT);
    if (k < 0 || !ret)
        return -EINVAL;
    *ret = (tuner_tune_mode)k;
    return 0;
}

char *tuner_op_names(char *buf, size_t len)
{
    size_t at = 0;
    for (int k = 0; buf && len && k < TUNER_OP_COUNT; k++) {
        int w = snprintf(buf + at, len - at, "%s%s", k ? ", " : "", op_names[k]);
        if (w < 0 || (size_t)w >= len - at)
            break;
        at += (size_t)w;
    }
    return buf;
}

char *tuner_step_names(char *buf, size_t len)
{
    /* "bias" is a step of its own (an add of a per-column vector); "gelu_tanh" is the canonical
     * JSON's name only (a request says gelu with "approximate": "tanh"). */
    int at = buf && len ? snprintf(buf, len, "bias") : 0;
    for (int k = 0; buf && len && at > 0 && k < TUNER_EW_COUNT; k++) {
        if (k == TUNER_EW_GELU_TANH)
            continue;
        int w = snprintf(buf + at, len - (size_t)at, ", %s", ew_names[k]);
        if (w < 0 || (size_t)w >= len - (size_t)at)
            break;
        at += w;
    }
    /* The spellings tuner_ew_alias() takes for clamp. */
    if (buf && len && at > 0 && (size_t)at < len)
        snprintf(buf + at, len - (size_t)at, ", relu6, hardtanh");
    return buf;
}

char *tuner_target_names(char *buf, size_t len)
{
    size_t at = 0;
    for (int k = 0; buf && len && k < TUNER_TARGET_COUNT; k++) {
        char name[16];
        tuner_target t = tuner_target_of((tuner_target_id)k);
        int w = snprintf(buf + at, len - at, "%s%s", k ? ", " : "",
                         tuner_target_name(&t, name, sizeof(name)));
        if (w < 0 || (size_t)w >= len - at)
            break;
        at += (size_t)w;
    }
    return buf;
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

int tuner_target_parse(const char *s, tuner_target *ret)
{
    if (!s || !ret)
        return -EINVAL;
    for (int i = 0; i < TUNER_TARGET_COUNT; i++) {
        if (strcmp(s, targets[i].name) == 0) {
            *ret = targets[i].target;
            return 0;
        }
    }
    return -EINVAL;
}

tuner_target tuner_target_of(tuner_target_id id)
{
    if ((int)id < 0 || id >= TUNER_TARGET_COUNT)
        return (tuner_target){0};
    return targets[id].target;
}

int tuner_target_id_of(const tuner_target *t)
{
    if (!t)
        return -1;
    for (int i = 0; i < TUNER_TARGET_COUNT; i++)
        if (targets[i].target.sm == t->sm && targets[i].target.arch_specific == t->arch_specific)
            return i;
    return -1;
}

double tuner_fp8_accum_loss(const tuner_op *op)
{
    if (!op || op->kind != TUNER_OP_MATMUL || !tuner_dtype_is_fp8(op->inputs[0].dtype))
        return 0.0;
    const tuner_tensor *a = &op->inputs[0];
    int64_t k = op->attrs.matmul.trans_a ? a->shape[a->rank - 2] : a->shape[a->rank - 1];
    double tiles = 1.0;
    if (!op->attrs.matmul.fast_accum && k > 128) {
        tiles = sqrt((double)((k + 127) / 128));
        k = 128;
    }
    return 2.0 * (double)((k + 31) / 32) * ldexp(1.0, -14) * tiles;
}

double tuner_fp8_step(tuner_dtype dt)
{
    return dt == TUNER_F8E4M3 ? 0.13 : dt == TUNER_F8E5M2 ? 0.26 : 0.0;
}

bool tuner_fp8_target(const tuner_target *t)
{
    /* mma.sync.m16n8k32 with e4m3/e5m2 operands needs sm_89 (PTX ISA 8.4); sm_90a adds wgmma. */
    return t && t->sm >= 89;
}

const char *tuner_fp8_unsupported(const tuner_op *op, const tuner_target *t, char *buf, size_t len)
{
    if (!op || op->kind != TUNER_OP_MATMUL || !tuner_dtype_is_fp8(op->inputs[0].dtype))
        return NULL;
    char tn[16];
    const tuner_tensor *a = &op->inputs[0], *b = &op->inputs[1];
    const int64_t k = op->attrs.matmul.trans_a ? a->shape[a->rank - 2] : a->shape[a->rank - 1];
    if (!tuner_fp8_target(t))
        snprintf(buf, len,
                 "fp8 needs sm_89 mma.sync or sm_90a wgmma: arch %s has no FP8 tensor cores (FP8 matmuls run on "
                 "sm_89, sm_90, sm_90a, sm_100 and sm_120)",
                 t ? tuner_target_name(t, tn, sizeof(tn)) : "(none)");
    /* 8-bit mma.sync and wgmma read both operands K-major only; matmul_wgmma (sm_90a) transposes
     * an MN-major operand in the kernel, matmul_mma (sm_89 and the rest) does not. */
    else if (op->attrs.matmul.trans_a && !(t->sm == 90 && t->arch_specific))
        snprintf(buf, len, "an FP8 matmul on %s needs A as [M,K] (trans_a false): 8-bit mma.sync reads A K-major "
                           "only (sm_90a's wgmma kernel transposes an MN-major A itself)",
                 tuner_target_name(t, tn, sizeof(tn)));
    else if (!op->attrs.matmul.trans_b && !(t->sm == 90 && t->arch_specific))
        snprintf(buf, len, "an FP8 matmul on %s needs B as [N,K] with trans_b true (torch._scaled_mm's column-major "
                           "B): 8-bit mma.sync reads B K-major only (sm_90a's wgmma kernel transposes a [K,N] B itself)",
                 tuner_target_name(t, tn, sizeof(tn)));
    else if (op->attrs.matmul.trans_a && a->shape[a->rank - 1] % 16)
        snprintf(buf, len, "an FP8 matmul with trans_a needs M a multiple of 16 (A's [K,M] rows are copied in "
                           "16-byte rows); M is %lld", (long long)a->shape[a->rank - 1]);
    else if (!op->attrs.matmul.trans_b && b->shape[b->rank - 1] % 16)
        snprintf(buf, len, "an FP8 matmul with B as [K,N] needs N a multiple of 16 (B's rows are copied in 16-byte "
                           "rows); N is %lld", (long long)b->shape[b->rank - 1]);
    else if (k % 16 || a->align < 16 || b->align < 16)
        snprintf(buf, len, "an FP8 matmul needs K a multiple of 16 and A and B 16-byte aligned (its kernels copy "
                           "16-byte rows); K is %lld", (long long)k);
    else if (tuner_fp8_amax_input(op) >= 0 && !(t->sm == 90 && t->arch_specific))
        snprintf(buf, len, "the quantize step's amax is computed by sm_90a's wgmma kernel only; on %s (mma.sync) "
                           "compute it apart (an elementwise amax of the output)",
                 tuner_target_name(t, tn, sizeof(tn)));
    else
        return NULL;
    return buf;
}
