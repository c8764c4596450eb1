/* op/op_json.c - the canonical JSON of an op (hashed into every cache key) and its fusion
 * anchor. Both follow op/op.h's conventions; they live beside the struct so the request
 * parser, the daemon and the scheduler all key on one and the same form. */
#include "op/op.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "op/sb.h"

static void sb_shape(tuner_sb *b, const int64_t *shape, int rank)
{
    tuner_sb_printf(b, "[");
    for (int i = 0; i < rank; i++)
        tuner_sb_printf(b, "%s%lld", i ? "," : "", (long long)shape[i]);
    tuner_sb_printf(b, "]");
}

/* A shape whose named axes are written by name ("n", "b*s"), as a request gives them. */
static void sb_tensor(tuner_sb *b, const tuner_op *op, const tuner_tensor *t)
{
    tuner_sb_printf(b, "{\"align\":%d,\"dtype\":\"%s\",\"shape\":[", t->align, tuner_dtype_name(t->dtype));
    for (int i = 0; i < t->rank && i < TUNER_MAX_RANK; i++) {
        char name[TUNER_MAX_DIMS * TUNER_DIM_NAME_LEN];
        if (t->sym[i])
            tuner_sb_printf(b, "%s\"%s\"", i ? "," : "", tuner_sym_text(op, t->sym[i], name, sizeof(name)));
        else
            tuner_sb_printf(b, "%s%lld", i ? "," : "", (long long)t->shape[i]);
    }
    tuner_sb_printf(b, "]}");
}

/* "dims":{"n":{"max":..,"min":..,"multiple_of":..},...}, names in dims order (sorted). */
static void sb_dims(tuner_sb *b, const tuner_op *op)
{
    tuner_sb_printf(b, ",\"dims\":{");
    for (int k = 0; k < op->n_dims && k < TUNER_MAX_DIMS; k++)
        tuner_sb_printf(b, "%s\"%s\":{\"max\":%lld,\"min\":%lld,\"multiple_of\":%lld}", k ? "," : "",
                        op->dims[k].name, (long long)op->dims[k].max, (long long)op->dims[k].min,
                        (long long)op->dims[k].multiple_of);
    tuner_sb_printf(b, "}");
}

/* A step's parameters whose keys sort before (before_op) or after "operand"; an infinite one
 * (clamp's open bound) is absent, as in the request. */
static void sb_params(tuner_sb *b, const tuner_ew_step *s, bool before_op)
{
    const tuner_ew_param *p;
    int n = tuner_ew_params(s->kind, &p);
    for (int j = 0; j < n; j++) {
        /* In key order: clamp's slots are min, max; "max" sorts first. */
        int i = s->kind == TUNER_EW_CLAMP ? 1 - j : j;
        double v = tuner_ew_slot_value(s, i);
        if ((strcmp(p[i].key, "op") < 0) != before_op || isinf(v))
            continue;
        tuner_sb_printf(b, before_op ? "\"%s\":%.17g," : ",\"%s\":%.17g", p[i].key, v);
    }
}

/* A mask step's fields after "op" (operand < other < value): a comparison's input or constant,
 * where's condition and other, masked_fill's mask and value. An infinite value (masked_fill's
 * -inf) is the string the request gives, "-inf" or "inf": %.17g would print inf, which is no
 * JSON, and both infinities must key apart. */
static void sb_mask_fields(tuner_sb *b, const tuner_ew_step *s)
{
    if (!tuner_ew_is_mask(s->kind))
        return;
    int ops[2];
    int n = tuner_ew_operands(s, ops);
    if (n >= 1)
        tuner_sb_printf(b, ",\"operand\":%d", ops[0]);
    if (s->kind == TUNER_EW_WHERE)
        tuner_sb_printf(b, ",\"other\":%d", ops[1]);
    if (s->kind == TUNER_EW_MASKED_FILL || n == 0) {
        if (isinf(s->scalar))
            tuner_sb_printf(b, ",\"value\":\"%s\"", s->scalar < 0 ? "-inf" : "inf");
        else if (isnan(s->scalar))
            tuner_sb_printf(b, ",\"value\":\"nan\"");
        else
            tuner_sb_printf(b, ",\"value\":%.17g", s->scalar);
    }
}

/* Keys sorted: amax < dtype < exponent < max < min < negative_slope < op < operand < other < value. */
static void sb_chain(tuner_sb *b, const tuner_ew_chain *c)
{
    tuner_sb_printf(b, "[");
    for (int i = 0; i < c->n; i++) {
        const tuner_ew_step *s = &c->steps[i];
        tuner_sb_printf(b, "%s{", i ? "," : "");
        if (s->kind == TUNER_EW_CAST && s->amax) /* only when given, so other casts keep their keys */
            tuner_sb_printf(b, "\"amax\":%d,", s->amax - 1);
        if (s->kind == TUNER_EW_CAST)
            tuner_sb_printf(b, "\"dtype\":\"%s\",", tuner_dtype_name(s->dtype));
        sb_params(b, s, true);
        tuner_sb_printf(b, "\"op\":\"%s\"", tuner_ew_name(s->kind));
        if (TUNER_EW_IS_BINARY(s->kind))
            tuner_sb_printf(b, ",\"operand\":%d", s->operand);
        sb_mask_fields(b, s);
        sb_params(b, s, false);
        tuner_sb_printf(b, "}");
    }
    tuner_sb_printf(b, "]");
}

static void sb_bool(tuner_sb *b, const char *key, bool v, bool comma)
{
    tuner_sb_printf(b, "%s\"%s\":%s", comma ? "," : "", key, v ? "true" : "false");
}

char *tuner_op_canonical_json(const tuner_op *op)
{
    if (!op)
        return NULL;
    tuner_sb b;
    tuner_sb_init(&b);
    /* Top-level keys in sorted order: attrs, dims (a dynamic op only: a static op keeps its
     * key), epilogue, inputs, n_anchor_inputs, op, output, prologue. */
    tuner_sb_printf(&b, "{\"attrs\":{");
    switch (op->kind) {
    case TUNER_OP_MATMUL:
        sb_bool(&b, "allow_tf32", op->attrs.matmul.allow_tf32, false);
        /* FP8 keys only for FP8 inputs, so every other matmul keeps its key. out_dtype is the
         * anchor's (an epilogue cast may change the output's after it). */
        if (tuner_dtype_is_fp8(op->inputs[0].dtype))
            tuner_sb_printf(&b, ",\"fast_accum\":%s,\"out_dtype\":\"%s\",\"scale_a\":\"%s\",\"scale_b\":\"%s\"",
                            op->attrs.matmul.fast_accum ? "true" : "false", tuner_dtype_name(op->attrs.matmul.out_dtype),
                            tuner_scale_name(op->attrs.matmul.scale_a), tuner_scale_name(op->attrs.matmul.scale_b));
        sb_bool(&b, "trans_a", op->attrs.matmul.trans_a, true);
        sb_bool(&b, "trans_b", op->attrs.matmul.trans_b, true);
        break;
    case TUNER_OP_CONV2D: {
        const int *d = op->attrs.conv2d.dilation, *p = op->attrs.conv2d.pad,
                  *s = op->attrs.conv2d.stride;
        tuner_sb_printf(&b,
                  "\"dilation\":[%d,%d],\"groups\":%d,\"layout\":\"%s\",\"padding\":[%d,%d],"
                  "\"stride\":[%d,%d]",
                  d[0], d[1], op->attrs.conv2d.groups, op->attrs.conv2d.nchw ? "nchw" : "nhwc",
                  p[0], p[1], s[0], s[1]);
        break;
    }
    case TUNER_OP_SOFTMAX:
        tuner_sb_printf(&b, "\"axis\":%d", op->n_inputs > 0 ? op->inputs[0].rank - 1 : -1);
        if (op->attrs.softmax.log) /* absent when false: a plain softmax keeps its key */
            sb_bool(&b, "log", true, true);
        break;
    case TUNER_OP_LAYERNORM:
    case TUNER_OP_RMSNORM:
        tuner_sb_printf(&b, "\"eps\":%.17g", op->attrs.norm.eps);
        break;
    case TUNER_OP_REDUCE:
        if (op->attrs.reduce.naxes > 1) { /* several consecutive axes: "axes", else "axis" */
            tuner_sb_printf(&b, "\"axes\":[");
            for (int k = 0; k < op->attrs.reduce.naxes; k++)
                tuner_sb_printf(&b, "%s%d", k ? "," : "", op->attrs.reduce.axis + k);
            tuner_sb_printf(&b, "]");
        } else {
            tuner_sb_printf(&b, "\"axis\":%d", op->attrs.reduce.axis);
        }
        sb_bool(&b, "keepdim", op->attrs.reduce.keepdim, true);
        tuner_sb_printf(&b, ",\"kind\":\"%s\"", tuner_reduce_name(op->attrs.reduce.kind));
        break;
    case TUNER_OP_COPY:
        if (op->attrs.copy.offset_sym) { /* a dynamic copy's: "64*s" (a static op's print as before) */
            char t[96];
            tuner_sb_printf(&b, "\"offset\":\"%s\"",
                            tuner_scaled_text(op, op->attrs.copy.offset, op->attrs.copy.offset_sym, t, sizeof(t)));
        } else {
            tuner_sb_printf(&b, "\"offset\":%lld", (long long)op->attrs.copy.offset);
        }
        if (op->attrs.copy.padded) { /* absent when not padded: a plain copy keeps its key */
            const int64_t *pl = op->attrs.copy.pad_lower, *pu = op->attrs.copy.pad_upper;
            tuner_sb_printf(&b, ",\"pad_lower\":");
            sb_shape(&b, pl, op->output.rank < TUNER_MAX_RANK ? op->output.rank : TUNER_MAX_RANK);
            tuner_sb_printf(&b, ",\"pad_upper\":");
            sb_shape(&b, pu, op->output.rank < TUNER_MAX_RANK ? op->output.rank : TUNER_MAX_RANK);
            tuner_sb_printf(&b, ",\"pad_value\":%.17g", op->attrs.copy.pad_value);
        }
        tuner_sb_printf(&b, ",\"strides\":[");
        for (int d = 0; d < op->output.rank && d < TUNER_MAX_RANK; d++) {
            char t[96];
            if (op->attrs.copy.stride_sym[d])
                tuner_sb_printf(&b, "%s\"%s\"", d ? "," : "",
                                tuner_scaled_text(op, op->attrs.copy.strides[d], op->attrs.copy.stride_sym[d], t,
                                                  sizeof(t)));
            else
                tuner_sb_printf(&b, "%s%lld", d ? "," : "", (long long)op->attrs.copy.strides[d]);
        }
        tuner_sb_printf(&b, "]");
        break;
    case TUNER_OP_CONCAT:
        tuner_sb_printf(&b, "\"axis\":%d", op->attrs.concat.axis);
        break;
    case TUNER_OP_POOL2D: {
        /* Every attribute, also those a kind does not use (zeros, false): one form per op. */
        const int *d = op->attrs.pool2d.dilation, *k = op->attrs.pool2d.kernel, *p = op->attrs.pool2d.pad,
                  *s = op->attrs.pool2d.stride;
        tuner_sb_printf(&b,
                        "\"ceil_mode\":%s,\"count_include_pad\":%s,\"dilation\":[%d,%d],\"kernel_size\":[%d,%d],"
                        "\"kind\":\"%s\",\"layout\":\"%s\",\"padding\":[%d,%d],\"stride\":[%d,%d]",
                        op->attrs.pool2d.ceil_mode ? "true" : "false",
                        op->attrs.pool2d.count_include_pad ? "true" : "false", d[0], d[1], k[0], k[1],
                        tuner_pool_name(op->attrs.pool2d.kind), op->attrs.pool2d.nchw ? "nchw" : "nhwc", p[0],
                        p[1], s[0], s[1]);
        break;
    }
    case TUNER_OP_GATHER:
        tuner_sb_printf(&b, "\"axis\":%d", op->attrs.gather.axis);
        break;
    case TUNER_OP_ATTENTION:
        /* Every attribute, defaults included (the scale as validation resolved it): a request
         * that spells out 1/sqrt(D) keys as one that leaves it out. */
        sb_bool(&b, "causal", op->attrs.attention.causal, false);
        /* kv_heads only in the packed layout, so that the other layouts keep their keys. */
        if (op->attrs.attention.packed)
            tuner_sb_printf(&b, ",\"kv_heads\":%d,\"layout\":\"bshd_packed\",\"scale\":%.17g",
                            op->attrs.attention.kv_heads, op->attrs.attention.scale);
        else
            tuner_sb_printf(&b, ",\"layout\":\"%s\",\"scale\":%.17g", op->attrs.attention.bshd ? "bshd" : "bhsd",
                            op->attrs.attention.scale);
        break;
    default:
        break;
    }
    tuner_sb_printf(&b, "}");
    if (op->n_dims > 0)
        sb_dims(&b, op);
    tuner_sb_printf(&b, ",\"epilogue\":");
    sb_chain(&b, &op->epilogue);
    tuner_sb_printf(&b, ",\"inputs\":[");
    for (int i = 0; i < op->n_inputs && i < TUNER_MAX_INPUTS; i++) {
        if (i)
            tuner_sb_printf(&b, ",");
        sb_tensor(&b, op, &op->inputs[i]);
    }
    tuner_sb_printf(&b, "],\"n_anchor_inputs\":%d,\"op\":\"%s\",\"output\":", op->n_anchor_inputs,
              tuner_op_name(op->kind));
    sb_tensor(&b, op, &op->output);
    tuner_sb_printf(&b, ",\"prologue\":[");
    for (int i = 0; i < op->n_anchor_inputs && i < TUNER_MAX_INPUTS; i++) {
        if (i)
            tuner_sb_printf(&b, ",");
        sb_chain(&b, &op->prologue[i]);
    }
    tuner_sb_printf(&b, "]}");
    return tuner_sb_take(&b);
}

void tuner_op_strip_fusion(const tuner_op *in, tuner_op *out)
{
    if (!in || !out)
        return;
    if (out != in)
        *out = *in;
    for (int i = 0; i < TUNER_MAX_INPUTS; i++)
        out->prologue[i].n = 0;
    out->epilogue.n = 0;
    out->n_inputs = out->n_anchor_inputs;
    /* An FP8 matmul's anchor writes attrs.out_dtype (its inputs' dtype is no output dtype). */
    out->output.dtype = out->kind == TUNER_OP_MATMUL && tuner_dtype_is_fp8(out->inputs[0].dtype)
                            ? out->attrs.matmul.out_dtype
                            : out->inputs[0].dtype;
    if (out->kind == TUNER_OP_ELEMENTWISE) {
        out->output.rank = out->inputs[0].rank;
        memcpy(out->output.shape, out->inputs[0].shape, sizeof(out->output.shape));
    }
    /* Slots beyond n_inputs are zeroed so stripped ops compare equal byte for byte. */
    for (int i = out->n_inputs; i < TUNER_MAX_INPUTS; i++)
        memset(&out->inputs[i], 0, sizeof(out->inputs[i]));
}
