/* scheduler/keys.c - op, tuning and artifact keys; the scheduler's canonical op JSON; the fusion
 * anchor of an op.
 *
 * Every key is kc_key() over length-prefixed parts. Op and tuning keys start with a part naming the
 * record kind, so an op key can never equal a tuning key; an artifact key hashes an op key with a
 * schedule. Versions that change what a key's kernel would be (schema,
 * codegen, NVRTC, numerics) are parts of every key: a new tuner never answers from an old entry.
 */
#include "scheduler/sched.h"
#include "tuner/tuner.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#define STR_(x) #x
#define STR(x) STR_(x)

void sched_op_key(const char *op_json, const tuner_target *t, char out[KC_KEY_LEN + 1])
{
    char target[16];
    tuner_target_name(t, target, sizeof(target));
    const char *parts[] = {
        "hidetd-op",
        STR(KC_SCHEMA_VERSION),
        op_json ? op_json : "",
        target,
        tuner_codegen_version(),
        tuner_nvrtc_version(),
        SCHED_NUMERICS_FLAGS,
        tuner_numerics_flags(),
    };
    kc_key(parts, sizeof(parts) / sizeof(parts[0]), out);
}

void sched_artifact_key(const char *op_key, const char *schedule_json, char out[KC_KEY_LEN + 1])
{
    /* The op key already names the record kind and every version, so two parts suffice. */
    const char *parts[] = {op_key ? op_key : "", schedule_json ? schedule_json : ""};
    kc_key(parts, 2, out);
}

int sched_tuning_key(const tuner_op *op, const tuner_target *t, const gw_device_info *dev,
                     const char *space_hash, char out[KC_KEY_LEN + 1])
{
    if (!op || !t || !dev || !space_hash || !out)
        return -EINVAL;
    char *json = sched_op_canonical_json(op);
    if (!json)
        return -ENOMEM;
    char target[16], sm_count[16], driver_major[16];
    tuner_target_name(t, target, sizeof(target));
    snprintf(sm_count, sizeof(sm_count), "%d", dev->sm_count);
    /* cuDriverGetVersion: 1000 * major + 10 * minor; minor driver updates keep their timings. */
    snprintf(driver_major, sizeof(driver_major), "%d", dev->driver_version / 1000);
    const char *parts[] = {
        "hidetd-tuning", STR(KC_SCHEMA_VERSION), json, target, tuner_codegen_version(),
        tuner_nvrtc_version(), SCHED_NUMERICS_FLAGS, tuner_numerics_flags(), dev->name, sm_count,
        driver_major, space_hash,
    };
    kc_key(parts, sizeof(parts) / sizeof(parts[0]), out);
    free(json);
    return 0;
}

static cJSON *shape_json(const tuner_tensor *t)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < t->rank; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)t->shape[i]));
    return a;
}

static cJSON *pair_json(const int v[2])
{
    return cJSON_CreateIntArray(v, 2);
}

static const char *reduce_name(tuner_reduce_kind k)
{
    switch (k) {
    case TUNER_REDUCE_SUM: return "sum";
    case TUNER_REDUCE_MEAN: return "mean";
    case TUNER_REDUCE_MAX: return "max";
    }
    return "?";
}

static cJSON *chain_json(const tuner_ew_chain *c)
{
    cJSON *a = cJSON_CreateArray();
    if (!a)
        return NULL;
    for (int i = 0; i < c->n && i < TUNER_MAX_STEPS; i++) {
        const tuner_ew_step *st = &c->steps[i];
        cJSON *o = cJSON_CreateObject();
        if (!o)
            break;
        /* Keys in sorted order; only the fields that matter for the step's kind. */
        if (st->kind == TUNER_EW_CAST)
            cJSON_AddStringToObject(o, "dtype", tuner_dtype_name(st->dtype));
        cJSON_AddStringToObject(o, "kind", tuner_ew_name(st->kind));
        if (TUNER_EW_IS_BINARY(st->kind))
            cJSON_AddNumberToObject(o, "operand", st->operand);
        if (st->kind == TUNER_EW_SCALE)
            cJSON_AddNumberToObject(o, "scalar", st->scalar);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

char *sched_op_canonical_json(const tuner_op *op)
{
    if (!op)
        return NULL;
    char *out = NULL;
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return NULL;

    cJSON *attrs = cJSON_AddObjectToObject(root, "attrs");
    if (!attrs)
        goto cleanup;
    switch (op->kind) {
    case TUNER_OP_MATMUL:
        cJSON_AddBoolToObject(attrs, "allow_tf32", op->attrs.matmul.allow_tf32);
        cJSON_AddBoolToObject(attrs, "trans_a", op->attrs.matmul.trans_a);
        cJSON_AddBoolToObject(attrs, "trans_b", op->attrs.matmul.trans_b);
        break;
    case TUNER_OP_CONV2D:
        cJSON_AddItemToObject(attrs, "dilation", pair_json(op->attrs.conv2d.dilation));
        cJSON_AddNumberToObject(attrs, "groups", op->attrs.conv2d.groups);
        cJSON_AddStringToObject(attrs, "layout", op->attrs.conv2d.nchw ? "nchw" : "nhwc");
        cJSON_AddItemToObject(attrs, "pad", pair_json(op->attrs.conv2d.pad));
        cJSON_AddItemToObject(attrs, "stride", pair_json(op->attrs.conv2d.stride));
        break;
    case TUNER_OP_LAYERNORM:
    case TUNER_OP_RMSNORM:
        cJSON_AddNumberToObject(attrs, "eps", op->attrs.norm.eps);
        break;
    case TUNER_OP_REDUCE:
        cJSON_AddNumberToObject(attrs, "axis", op->attrs.reduce.axis);
        cJSON_AddBoolToObject(attrs, "keepdim", op->attrs.reduce.keepdim);
        cJSON_AddStringToObject(attrs, "kind", reduce_name(op->attrs.reduce.kind));
        break;
    default:
        break;
    }

    cJSON_AddItemToObject(root, "epilogue", chain_json(&op->epilogue));

    cJSON *inputs = cJSON_AddArrayToObject(root, "inputs");
    if (!inputs)
        goto cleanup;
    for (int i = 0; i < op->n_inputs && i < TUNER_MAX_INPUTS; i++) {
        cJSON *in = cJSON_CreateObject();
        if (!in)
            goto cleanup;
        cJSON_AddItemToArray(inputs, in);
        cJSON_AddNumberToObject(in, "align", op->inputs[i].align);
        cJSON_AddStringToObject(in, "dtype", tuner_dtype_name(op->inputs[i].dtype));
        cJSON_AddItemToObject(in, "shape", shape_json(&op->inputs[i]));
    }
    cJSON_AddNumberToObject(root, "n_anchor_inputs", op->n_anchor_inputs);
    cJSON_AddStringToObject(root, "op", tuner_op_name(op->kind));

    cJSON *output = cJSON_AddObjectToObject(root, "output");
    if (!output)
        goto cleanup;
    cJSON_AddStringToObject(output, "dtype", tuner_dtype_name(op->output.dtype));
    cJSON_AddItemToObject(output, "shape", shape_json(&op->output));

    cJSON *prologue = cJSON_AddArrayToObject(root, "prologue");
    if (!prologue)
        goto cleanup;
    for (int i = 0; i < op->n_anchor_inputs && i < TUNER_MAX_INPUTS; i++)
        cJSON_AddItemToArray(prologue, chain_json(&op->prologue[i]));

    out = cJSON_PrintUnformatted(root);
cleanup:
    cJSON_Delete(root);
    return out;
}

bool sched_op_strip_fusion(const tuner_op *op, tuner_op *anchor)
{
    *anchor = *op;
    if (op->kind == TUNER_OP_ELEMENTWISE)
        return false; /* the chain is the op itself: there is nothing under it to reuse */
    bool fused = op->epilogue.n > 0 || op->n_inputs > op->n_anchor_inputs;
    for (int i = 0; i < TUNER_MAX_INPUTS; i++)
        fused = fused || op->prologue[i].n > 0;
    if (!fused)
        return false;
    memset(&anchor->prologue, 0, sizeof(anchor->prologue));
    memset(&anchor->epilogue, 0, sizeof(anchor->epilogue));
    /* Extra operands only feed fused steps; the anchor reads its own inputs only. */
    for (int i = op->n_anchor_inputs; i < TUNER_MAX_INPUTS; i++)
        memset(&anchor->inputs[i], 0, sizeof(anchor->inputs[i]));
    anchor->n_inputs = op->n_anchor_inputs;
    /* Every anchor computes in its first input's dtype (op.h); epilogue steps never change the
     * output shape (bijective), only a CAST step changes its dtype. */
    anchor->output.dtype = op->inputs[0].dtype;
    return true;
}
