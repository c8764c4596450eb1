/* proto/dims.c - named dimensions in kernel requests (see proto/dims.h). */
#include "proto/dims.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

/* Where a name may stand, for every refusal's message. */
#define WHERE_NAMES                                                                                   \
    "names stand on any axis in elementwise (a name broadcasts against the same name or 1), on x's "   \
    "axes before the last in softmax, layernorm and rmsnorm, before the reduced axes in reduce, and "  \
    "on matmul's M, N and K when a and b are 2-D (a [M, K] not transposed, b [K, N] or [N, K] with "  \
    "trans_b, K named alike on both) or on the batch (axis 0 of a rank-3 a, and of a rank-3 b), on B, S and " \
    "Skv of attention's q, k, v (and the mask's axes that follow them), on any axis of gather's index " \
    "(the table stays fixed); a name stands on one axis of a tensor"

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= TUNER_DIM_NAME_LEN || !((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return false;
    return true;
}

/* An integer in [lo, hi] (JSON 64 or 64.0). */
static int int_in(const cJSON *v, const char *field, int64_t lo, int64_t hi, int64_t *ret, proto_error *e)
{
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble))
        return proto_fail(e, 400, "invalid_field", field, "%s must be an integer", field);
    if (v->valuedouble < (double)lo || v->valuedouble > (double)hi)
        return proto_fail(e, 422, "invalid_field", field, "%s must be between %lld and %lld", field, (long long)lo,
                          (long long)hi);
    *ret = (int64_t)v->valuedouble;
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const tuner_dim *)a)->name, ((const tuner_dim *)b)->name);
}

int proto__parse_dims(const cJSON *root, tuner_op *op, proto_dynamic *dyn, proto_error *e)
{
    static const char *const keys[] = {"min", "max", "multiple_of", "hints", NULL};
    const cJSON *dims = cJSON_GetObjectItemCaseSensitive(root, "dims");
    char field[96];
    int r;

    op->n_dims = 0;
    memset(dyn, 0, sizeof(*dyn));
    if (!dims)
        return 0;
    if (!cJSON_IsObject(dims))
        return proto_fail(e, 400, "invalid_field", "dims",
                          "dims must be an object {\"n\": {\"min\": 1, \"max\": 8192}, ...}");
    const int n = cJSON_GetArraySize(dims);
    if (n == 0)
        return proto_fail(e, 422, "invalid_field", "dims", "dims is empty: leave it out for fixed shapes");
    if (n > TUNER_MAX_DIMS)
        return proto_fail(e, 422, "limit_exceeded", "dims", "at most %d named dimensions are supported",
                          TUNER_MAX_DIMS);

    /* The hints stay beside their dim while the dims are sorted by name. */
    struct {
        tuner_dim d;
        int n_hints;
        int64_t hints[PROTO_MAX_HINTS];
    } parsed[TUNER_MAX_DIMS];
    memset(parsed, 0, sizeof(parsed));
    int i = 0;
    for (const cJSON *d = dims->child; d; d = d->next, i++) {
        const char *name = d->string ? d->string : "";
        snprintf(field, sizeof(field), "dims.%.40s", name);
        if (!name_ok(name))
            return proto_fail(e, 422, "invalid_field", field,
                              "\"%.40s\" is not a dimension name: a lowercase letter or _, then letters, digits "
                              "or _, at most %d characters",
                              name, TUNER_DIM_NAME_LEN - 1);
        for (int j = 0; j < i; j++)
            if (strcmp(parsed[j].d.name, name) == 0)
                return proto_fail(e, 400, "invalid_field", field, "%s is given twice", field);
        if (!cJSON_IsObject(d))
            return proto_fail(e, 400, "invalid_field", field, "%s must be an object {\"min\": .., \"max\": ..}",
                              field);
        if ((r = proto_check_keys(d, keys, field, e)) < 0)
            return r;
        tuner_dim *td = &parsed[i].d;
        snprintf(td->name, sizeof(td->name), "%s", name);
        td->multiple_of = 1;
        const cJSON *v;
        char sub[128];
        if (!(v = cJSON_GetObjectItemCaseSensitive(d, "min")) || !cJSON_GetObjectItemCaseSensitive(d, "max"))
            return proto_fail(e, 400, "invalid_field", field, "%s needs \"min\" and \"max\"", field);
        snprintf(sub, sizeof(sub), "%s.min", field);
        if ((r = int_in(v, sub, 1, PROTO_MAX_DIM, &td->min, e)) < 0)
            return r;
        snprintf(sub, sizeof(sub), "%s.max", field);
        if ((r = int_in(cJSON_GetObjectItemCaseSensitive(d, "max"), sub, 1, PROTO_MAX_DIM, &td->max, e)) < 0)
            return r;
        if (td->max < td->min)
            return proto_fail(e, 422, "invalid_field", sub, "%s (%lld) is below min (%lld)", sub,
                              (long long)td->max, (long long)td->min);
        if ((v = cJSON_GetObjectItemCaseSensitive(d, "multiple_of"))) {
            snprintf(sub, sizeof(sub), "%s.multiple_of", field);
            if ((r = int_in(v, sub, 1, 1 << 20, &td->multiple_of, e)) < 0)
                return r;
            if (td->min % td->multiple_of || td->max % td->multiple_of)
                return proto_fail(e, 422, "invalid_field", sub, "min (%lld) and max (%lld) must be multiples of %lld",
                                  (long long)td->min, (long long)td->max, (long long)td->multiple_of);
        }
        if ((v = cJSON_GetObjectItemCaseSensitive(d, "hints"))) {
            snprintf(sub, sizeof(sub), "%s.hints", field);
            if (!cJSON_IsArray(v))
                return proto_fail(e, 400, "invalid_field", sub, "%s must be an array of sizes", sub);
            if (cJSON_GetArraySize(v) > PROTO_MAX_HINTS)
                return proto_fail(e, 422, "limit_exceeded", sub, "at most %d hints per name", PROTO_MAX_HINTS);
            int h = 0;
            for (const cJSON *x = v->child; x; x = x->next, h++) {
                char hf[160];
                snprintf(hf, sizeof(hf), "%s[%d]", sub, h);
                if ((r = int_in(x, hf, td->min, td->max, &parsed[i].hints[h], e)) < 0)
                    return r;
                if (parsed[i].hints[h] % td->multiple_of)
                    return proto_fail(e, 422, "invalid_field", hf, "%s must be a multiple of %lld", hf,
                                      (long long)td->multiple_of);
            }
            parsed[i].n_hints = h;
        }
    }
    /* Sorted by name: the canonical order (equal requests key alike) and the kernels' order. */
    int order[TUNER_MAX_DIMS];
    for (int k = 0; k < n; k++)
        order[k] = k;
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && by_name(&parsed[order[b - 1]].d, &parsed[order[b]].d) > 0; b--) {
            int t = order[b];
            order[b] = order[b - 1];
            order[b - 1] = t;
        }
    for (int k = 0; k < n; k++) {
        op->dims[k] = parsed[order[k]].d;
        dyn->n_hints[k] = parsed[order[k]].n_hints;
        memcpy(dyn->hints[k], parsed[order[k]].hints, sizeof(dyn->hints[k]));
    }
    op->n_dims = n;
    return 0;
}

int proto__add_name(const tuner_op *op, const char *name, const char *field, unsigned *mask, int64_t *max_product,
                    proto_error *e)
{
    const int k = tuner_op_dim_index(op, name);
    if (k < 0)
        return proto_fail(e, 422, "invalid_field", field, "%s names \"%.40s\", which \"dims\" does not declare", field,
                          name);
    if (*mask & (1u << k))
        return proto_fail(e, 422, "invalid_field", field, "%s names \"%.40s\" twice", field, name);
    *mask |= 1u << k;
    *max_product *= op->dims[k].max;
    return 0;
}

int proto__parse_named_axis(const cJSON *d, const char *field, const tuner_op *op, int axis, uint8_t *mask,
                            int64_t *size, proto_error *e)
{
    const char *s = d->valuestring ? d->valuestring : "";
    if (op->n_dims == 0 && !name_ok(s))
        return proto_fail(e, 400, "invalid_field", field, "%s must be an integer (or a name declared in \"dims\")",
                          field);
    if (op->n_dims == 0)
        return proto_fail(e, 422, "invalid_field", field,
                          "%s is the name \"%.40s\", but the request has no \"dims\": declare it, e.g. \"dims\": "
                          "{\"%.40s\": {\"min\": 1, \"max\": 8192}}",
                          field, s, s);
    char buf[TUNER_MAX_DIMS * TUNER_DIM_NAME_LEN + 8];
    if (strlen(s) >= sizeof(buf))
        return proto_fail(e, 422, "invalid_field", field, "%s is not a declared name or product of names", field);
    snprintf(buf, sizeof(buf), "%s", s);
    unsigned m = 0;
    int64_t v = 1;
    char *save = NULL;
    for (char *part = strtok_r(buf, "*", &save); part; part = strtok_r(NULL, "*", &save)) {
        if (proto__add_name(op, part, field, &m, &v, e) < 0)
            return -EINVAL;
        if (v > PROTO_MAX_DIM)
            return proto_fail(e, 422, "limit_exceeded", field, "%s exceeds 2^31-1 at the names' max", field);
    }
    if (!m || s[0] == '*' || s[strlen(s) - 1] == '*' || strstr(s, "**"))
        return proto_fail(e, 422, "invalid_field", field, "%s is not a declared name or product of names (\"n\", "
                          "\"b*s\")", field);
    (void)axis; /* where a name may stand depends on the op: proto__check_named_inputs */
    *mask = (uint8_t)m;
    *size = v;
    return 0;
}

static unsigned named_axes(const tuner_tensor *t)
{
    unsigned m = 0;
    for (int d = 0; d < t->rank; d++)
        m |= t->sym[d];
    return m;
}

/* Refuses input i's axis d: the op does not take a name there. */
static int refuse_axis(const tuner_op *op, int i, int d, proto_error *e)
{
    char field[64];
    snprintf(field, sizeof(field), "inputs[%d].shape[%d]", i, d);
    return proto_fail(e, 422, "invalid_field", field, "%s: a name may not stand here for %s; %s", field,
                      tuner_op_name(op->kind), WHERE_NAMES);
}

/* Refuses input i's first named axis. */
static int refuse_input(const tuner_op *op, int i, proto_error *e)
{
    const tuner_tensor *t = &op->inputs[i];
    int d = 0;
    while (d < t->rank - 1 && !t->sym[d])
        d++;
    return refuse_axis(op, i, d, e);
}

/* Input i's named axes from `from` on (none may be named there), or 0. */
static int refuse_from(const tuner_op *op, int i, int from, const char *why, proto_error *e)
{
    const tuner_tensor *t = &op->inputs[i];
    for (int d = from < 0 ? 0 : from; d < t->rank; d++)
        if (t->sym[d]) {
            char field[64];
            snprintf(field, sizeof(field), "inputs[%d].shape[%d]", i, d);
            return proto_fail(e, 422, "invalid_field", field, "%s %s: it may not be named; %s", field, why,
                              WHERE_NAMES);
        }
    return 0;
}

/* A dim named on two axes of one tensor (an axis's product and another axis, too): the kernels
 * size a tensor by the set of its names, so each stands once - but in attention's mask. */
static int check_names_once(const tuner_op *op, proto_error *e)
{
    char field[64], name[80];
    for (int i = 0; i < op->n_inputs; i++) {
        const tuner_tensor *t = &op->inputs[i];
        unsigned seen = 0;
        /* attention's mask follows [B, Hq, S, Skv] (check_attention), whose S and Skv may share a
         * name: [b, 1, s, s] */
        if (op->kind == TUNER_OP_ATTENTION && i == tuner_attention_mask_input(op) && i < op->n_anchor_inputs)
            continue;
        /* a 2-D matmul addresses every axis by its own size (M, N, K at launch), so a
         * self-attention's p [s, s] @ v and a [s, s] residual of its scores q @ k^T may share a
         * name between axes (the templates refuse what would need a square in a grid rule) */
        if (op->kind == TUNER_OP_MATMUL && op->n_anchor_inputs >= 2 && op->inputs[0].rank == 2 &&
            op->inputs[1].rank == 2)
            continue;
        for (int d = 0; d < t->rank; d++) {
            if (seen & t->sym[d]) {
                snprintf(field, sizeof(field), "inputs[%d].shape[%d]", i, d);
                return proto_fail(e, 422, "invalid_field", field,
                                  "%s names %s, which another axis of inputs[%d] names too: a name stands on one "
                                  "axis of a tensor",
                                  field, tuner_sym_text(op, seen & t->sym[d], name, sizeof(name)), i);
            }
            seen |= t->sym[d];
        }
    }
    return 0;
}

/* t (an operand read by a fused step, or an elementwise input) right-aligned against `to`: a
 * named axis must meet the same names; a name in `to` meets the same names or a fixed 1. */
static int check_broadcast(const tuner_op *op, int i, const tuner_tensor *t, const tuner_tensor *to,
                           const char *what, proto_error *e)
{
    char field[64], a[80], b[80];
    for (int d = 0; d < t->rank; d++) {
        const int od = to->rank - t->rank + d;
        if (od < 0)
            continue;
        const unsigned ts = t->sym[d], os = to->sym[od];
        if (ts == os)
            continue;
        if (!ts && t->shape[d] == 1)
            continue;
        snprintf(field, sizeof(field), "inputs[%d].shape[%d]", i, d);
        if (ts)
            tuner_sym_text(op, ts, a, sizeof(a));
        else
            snprintf(a, sizeof(a), "%lld", (long long)t->shape[d]);
        if (os)
            tuner_sym_text(op, os, b, sizeof(b));
        else
            snprintf(b, sizeof(b), "%lld", (long long)to->shape[od]);
        return proto_fail(e, 422, "shape_mismatch", field,
                          "%s is %s where %s has %s: a name broadcasts only against the same name or 1", field, a,
                          what, b);
    }
    return 0;
}

/* The operands of the fused chains against what they apply to. */
static int check_operands(const tuner_op *op, proto_error *e)
{
    int ops[2], r;
    for (int t = 0; t < op->n_anchor_inputs; t++)
        for (int s = 0; s < op->prologue[t].n; s++) {
            int n = tuner_ew_operands(&op->prologue[t].steps[s], ops);
            for (int j = 0; j < n; j++)
                if ((r = check_broadcast(op, ops[j], &op->inputs[ops[j]], &op->inputs[t], "the input it applies to",
                                         e)) < 0)
                    return r;
        }
    for (int s = 0; s < op->epilogue.n; s++) {
        int n = tuner_ew_operands(&op->epilogue.steps[s], ops);
        for (int j = 0; j < n; j++)
            if ((r = check_broadcast(op, ops[j], &op->inputs[ops[j]], &op->output, "the output", e)) < 0)
                return r;
    }
    return 0;
}

/* attention: names on B (axis 0 of q, k, v alike), S (q's sequence axis) and Skv (k's and v's,
 * alike; it may be S's name); the heads and the head dim stay fixed. The mask's axes follow the
 * names of [B, Hq, S, Skv] (the same name, or 1). Ranks other than 4 are inference's to refuse. */
static int check_attention(const tuner_op *op, proto_error *e)
{
    const bool packed = op->attrs.attention.packed, bshd = op->attrs.attention.bshd || packed;
    const int n_qkv = packed ? 1 : 3, seq = bshd ? 1 : 2;
    const tuner_tensor *q = &op->inputs[0];
    char field[64], a[80], b[80];
    int r;
    for (int i = 0; i < n_qkv && i < op->n_inputs; i++) {
        const tuner_tensor *t = &op->inputs[i];
        if (t->rank != 4)
            return 0;
        for (int d = 0; d < 4; d++)
            if (t->sym[d] && d != 0 && d != seq) {
                snprintf(field, sizeof(field), "inputs[%d].shape[%d]", i, d);
                return proto_fail(e, 422, "invalid_field", field,
                                  "%s is a head count or the head dim of attention's %s: it may not be named (names "
                                  "stand on B, S and Skv); %s",
                                  field, i == 0 ? (packed ? "qkv" : "q") : i == 1 ? "k" : "v", WHERE_NAMES);
            }
        if (i > 0 && t->sym[0] != q->sym[0]) {
            snprintf(field, sizeof(field), "inputs[%d].shape[0]", i);
            return proto_fail(e, 422, "shape_mismatch", field, "%s is %s where q's batch is %s: q, k and v share B",
                              field, t->sym[0] ? tuner_sym_text(op, t->sym[0], a, sizeof(a)) : "fixed",
                              q->sym[0] ? tuner_sym_text(op, q->sym[0], b, sizeof(b)) : "fixed");
        }
        if (i == 2 && t->sym[seq] != op->inputs[1].sym[seq]) {
            snprintf(field, sizeof(field), "inputs[2].shape[%d]", seq);
            return proto_fail(e, 422, "shape_mismatch", field, "%s must be named as k's Skv (inputs[1].shape[%d])",
                              field, seq);
        }
    }
    const int mi = tuner_attention_mask_input(op);
    if (op->n_anchor_inputs > mi && mi < op->n_inputs) {
        /* [B, Hq, S, Skv] with its names, right-aligned against the mask */
        tuner_tensor full = {.rank = 4};
        full.sym[0] = q->sym[0];
        full.sym[2] = q->sym[seq];
        full.sym[3] = packed ? q->sym[1] : op->inputs[1].rank == 4 ? op->inputs[1].sym[seq] : 0;
        /* the sizes, for the messages: q's (qkv's heads less k's and v's when packed) */
        const int kvh = op->attrs.attention.kv_heads;
        full.shape[0] = q->shape[0];
        full.shape[1] = packed ? (kvh ? q->shape[2] - 2 * kvh : q->shape[2] / 3) : q->shape[bshd ? 2 : 1];
        full.shape[2] = q->shape[seq];
        full.shape[3] = packed ? q->shape[1] : op->inputs[1].shape[seq];
        if ((r = check_broadcast(op, mi, &op->inputs[mi], &full, "attention's [B, Hq, S, Skv]", e)) < 0)
            return r;
    }
    return 0;
}

int proto__check_named_inputs(const tuner_op *op, proto_error *e)
{
    if (op->n_dims == 0)
        return 0;
    int r;
    if ((r = check_names_once(op, e)) < 0)
        return r;
    const tuner_tensor *x = &op->inputs[0];
    switch (op->kind) {
    case TUNER_OP_ELEMENTWISE:
        break;
    case TUNER_OP_SOFTMAX:
    case TUNER_OP_LAYERNORM:
    case TUNER_OP_RMSNORM:
        for (int i = 1; i < op->n_anchor_inputs; i++)
            if (named_axes(&op->inputs[i]))
                return refuse_input(op, i, e);
        if (x->sym[x->rank - 1]) {
            char field[64];
            snprintf(field, sizeof(field), "inputs[0].shape[%d]", x->rank - 1);
            return proto_fail(e, 422, "invalid_field", field,
                              "%s is the axis %s works along: it may not be named; %s", field,
                              tuner_op_name(op->kind), WHERE_NAMES);
        }
        break;
    case TUNER_OP_REDUCE: {
        /* axis is normalised by inference, which runs after this */
        const int axis = op->attrs.reduce.axis < 0 ? op->attrs.reduce.axis + x->rank : op->attrs.reduce.axis;
        const int naxes = op->attrs.reduce.naxes > 1 ? op->attrs.reduce.naxes : 1;
        if (axis >= 0 && axis < x->rank) {
            for (int d = axis; d < axis + naxes && d < x->rank; d++)
                if (x->sym[d])
                    return refuse_from(op, 0, d, "is reduced", e);
            if ((r = refuse_from(op, 0, axis + naxes, "follows the reduced axes", e)) < 0)
                return r;
        }
        break;
    }
    case TUNER_OP_MATMUL: {
        const tuner_tensor *b = &op->inputs[1];
        if (x->rank == 2 && b->rank == 2) {
            /* a [M, K] and b [K, N] ([N, K] with trans_b): M, K and N may be named; K alike on
             * both. The fused operands follow the output [M, N] (check_operands). */
            const bool tb = op->attrs.matmul.trans_b;
            const int bk = tb ? 1 : 0;
            char field[64], an[80], bn[80];
            if (op->attrs.matmul.trans_a && (x->sym[0] || x->sym[1])) {
                const int d = x->sym[0] ? 0 : 1;
                snprintf(field, sizeof(field), "inputs[0].shape[%d]", d);
                return proto_fail(e, 422, "invalid_field", field,
                                  "%s is %s of a transposed a: the kernels take no name on a transposed a; %s", field,
                                  d == 0 ? "K" : "M", WHERE_NAMES);
            }
            /* FP8 matmuls run on matmul_mma and matmul_wgmma, which take a named M only. */
            if (tuner_dtype_is_fp8(x->dtype) && (x->sym[1] || b->sym[1 - bk])) {
                const int d = x->sym[1] ? 1 : 1 - bk, i = x->sym[1] ? 0 : 1;
                snprintf(field, sizeof(field), "inputs[%d].shape[%d]", i, d);
                return proto_fail(e, 422, "invalid_field", field,
                                  "%s is %s of an FP8 matmul: its kernels take a named M only (N and K are named "
                                  "for f16, bf16 and f32); %s",
                                  field, i == 0 ? "K" : "N", WHERE_NAMES);
            }
            if (b->sym[bk] != x->sym[1]) {
                snprintf(field, sizeof(field), "inputs[1].shape[%d]", bk);
                return proto_fail(e, 422, "shape_mismatch", field,
                                  "%s is b's K (%s) where a's K (inputs[0].shape[1]) is %s: a's and b's K must have "
                                  "the same name or both be fixed",
                                  field, b->sym[bk] ? tuner_sym_text(op, b->sym[bk], bn, sizeof(bn)) : "fixed",
                                  x->sym[1] ? tuner_sym_text(op, x->sym[1], an, sizeof(an)) : "fixed");
            }
            break;
        }
        for (int i = 0; i < op->n_inputs; i++)
            if ((r = refuse_from(op, i, 1, "is not the batched matmul's batch axis", e)) < 0)
                return r;
        if (x->sym[0] && x->rank == 2 && op->attrs.matmul.trans_a)
            return proto_fail(e, 422, "invalid_field", "inputs[0].shape[0]",
                              "inputs[0].shape[0] is K of a transposed a: it may not be named; %s", WHERE_NAMES);
        if (x->sym[0] && x->rank == 2 && b->rank == 3)
            return proto_fail(e, 422, "invalid_field", "inputs[0].shape[0]",
                              "inputs[0].shape[0] is M of a matmul with a batched b: the output's M is not its axis "
                              "0; %s",
                              WHERE_NAMES);
        if (b->sym[0] && !(b->rank == 3 && x->rank == 3 && b->sym[0] == x->sym[0]))
            return proto_fail(e, 422, "invalid_field", "inputs[1].shape[0]",
                              "inputs[1].shape[0] may be named only as the batch of a batched b whose a has the same "
                              "name; %s",
                              WHERE_NAMES);
        if (x->rank == 3 && b->rank == 3 && x->sym[0] != b->sym[0])
            return proto_fail(e, 422, "shape_mismatch", "inputs[1].shape[0]",
                              "matmul batch mismatch: a's and b's batch must have the same name or size");
        break;
    }
    case TUNER_OP_ATTENTION:
        if ((r = check_attention(op, e)) < 0)
            return r;
        break;
    case TUNER_OP_COPY: /* any axis (strides and offset scale with the names: check_copy) */
        if (op->attrs.copy.padded && named_axes(x))
            return proto_fail(e, 422, "invalid_field", "attrs.pad_lower",
                              "a padded copy may not have names (its padding is at fixed coordinates); %s",
                              WHERE_NAMES);
        break;
    case TUNER_OP_GATHER: /* the index's axes (the rows looked up); the table stays fixed */
        if (named_axes(x))
            return refuse_input(op, 0, e);
        for (int i = 2; i < op->n_anchor_inputs; i++)
            if (named_axes(&op->inputs[i]))
                return refuse_input(op, i, e);
        break;
    default:
        for (int i = 0; i < op->n_inputs; i++)
            if (named_axes(&op->inputs[i]))
                return refuse_input(op, i, e);
        break;
    }
    return 0;
}

/* The last element a copy reads at `sizes` is inside x: infer_output checked it at the max;
 * here at every corner of the ranges (each dim at its min or max) and along each dim's range
 * with the others at a corner, so that strides growing with a name (a transpose of a named
 * axis) are checked where they are smallest against x. */
static bool copy_inside(const tuner_op *op, const int64_t *sizes)
{
    tuner_op b;
    if (tuner_op_bind(op, sizes, &b) < 0)
        return true; /* not a size the op takes (multiple_of) */
    int64_t last = b.attrs.copy.offset;
    for (int d = 0; d < b.output.rank; d++)
        last += (b.output.shape[d] - 1) * b.attrs.copy.strides[d];
    return last < tuner_tensor_numel(&b.inputs[0]);
}

/* A copy with names: the output takes attrs.shape's names, each on one axis; the strides' and
 * the offset's names are x's (a copy reads x at sizes of x's names). An output axis may name
 * what x does not - a prefix [0, s) of a fixed axis of x, as position embeddings are cut to the
 * sequence - since every element read lies in x at every size (copy_inside). */
static int check_copy(tuner_op *op, proto_error *e)
{
    const unsigned xn = named_axes(&op->inputs[0]);
    char field[64], name[80];
    unsigned seen = 0;
    for (int d = 0; d < op->output.rank; d++) {
        const unsigned m = op->attrs.copy.shape_sym[d];
        snprintf(field, sizeof(field), "attrs.shape[%d]", d);
        if (m & seen)
            return proto_fail(e, 422, "invalid_field", field,
                              "%s names %s, which another axis of the output names too: a copy's output names "
                              "each dim on one axis",
                              field, tuner_sym_text(op, m, name, sizeof(name)));
        seen |= m;
        op->output.sym[d] = (uint8_t)m;
    }
    for (int d = 0; d < op->output.rank; d++) {
        snprintf(field, sizeof(field), "attrs.strides[%d]", d);
        if (op->attrs.copy.stride_sym[d] & ~xn)
            return proto_fail(e, 422, "invalid_field", field, "%s scales with %s, which inputs[0] does not name", field,
                              tuner_sym_text(op, op->attrs.copy.stride_sym[d] & ~xn, name, sizeof(name)));
    }
    if (op->attrs.copy.offset_sym & ~xn)
        return proto_fail(e, 422, "invalid_field", "attrs.offset", "attrs.offset scales with %s, which inputs[0] does "
                          "not name", tuner_sym_text(op, op->attrs.copy.offset_sym & ~xn, name, sizeof(name)));
    const int n = op->n_dims < TUNER_MAX_DIMS ? op->n_dims : TUNER_MAX_DIMS;
    for (int corner = 0; corner < (1 << n); corner++) {
        int64_t sizes[TUNER_MAX_DIMS] = {1, 1, 1, 1};
        for (int k = 0; k < n; k++)
            sizes[k] = corner & (1 << k) ? op->dims[k].max : op->dims[k].min;
        for (int k = -1; k < n; k++) {
            const int64_t at = sizes[k < 0 ? 0 : k];
            const int64_t step = k < 0 ? 1 : op->dims[k].multiple_of,
                          lo = k < 0 ? at : op->dims[k].min, hi = k < 0 ? at : op->dims[k].max;
            /* along dim k (at most 4096 sizes of it: a coarser walk past that) */
            const int64_t stride = (hi - lo) / step > 4096 ? ((hi - lo) / 4096 + step - 1) / step * step : step;
            for (int64_t v = lo; v <= hi; v += stride) {
                if (k >= 0)
                    sizes[k] = v;
                if (!copy_inside(op, sizes)) {
                    char at_text[160];
                    int w = 0;
                    for (int j = 0; j < n; j++)
                        w += snprintf(at_text + w, sizeof(at_text) - (size_t)w, "%s%s=%lld", j ? ", " : "",
                                      op->dims[j].name, (long long)sizes[j]);
                    return proto_fail(e, 422, "invalid_field", "attrs",
                                      "the copy reads past the end of inputs[0] at %s (its strides and offset "
                                      "against its names)", at_text);
                }
            }
            if (k >= 0)
                sizes[k] = at;
        }
    }
    return 0;
}

int proto__check_named(tuner_op *op, proto_error *e)
{
    int r;
    unsigned used = 0;
    for (int i = 0; i < op->n_inputs; i++)
        used |= named_axes(&op->inputs[i]);
    if (op->n_dims == 0)
        return 0;
    memset(op->output.sym, 0, sizeof(op->output.sym));

    const tuner_tensor *x = &op->inputs[0];
    switch (op->kind) {
    case TUNER_OP_ELEMENTWISE: {
        /* Each axis of the output carries the names of the first input whose axis (right-
         * aligned) is named there; every input is then checked against the output, as a fused
         * operand is. */
        tuner_tensor *o = &op->output;
        for (int i = 0; i < op->n_inputs; i++) {
            const tuner_tensor *t = &op->inputs[i];
            for (int d = 0; d < t->rank; d++) {
                const int od = o->rank - t->rank + d;
                if (od < 0 || !t->sym[d] || o->sym[od])
                    continue;
                for (int q = 0; q < o->rank; q++)
                    if (o->sym[q] & t->sym[d]) { /* ["n", 1] + [1, "n"]: n on two axes of the output */
                        char field[64], name[80];
                        snprintf(field, sizeof(field), "inputs[%d].shape[%d]", i, d);
                        return proto_fail(e, 422, "invalid_field", field,
                                          "%s names %s on axis %d of the output, which another input names on axis "
                                          "%d: a name stands on one axis of a tensor",
                                          field, tuner_sym_text(op, o->sym[q] & t->sym[d], name, sizeof(name)), od,
                                          q);
                    }
                o->sym[od] = t->sym[d];
            }
        }
        for (int i = 0; i < op->n_inputs; i++)
            if ((r = check_broadcast(op, i, &op->inputs[i], o, "the output", e)) < 0)
                return r;
        break;
    }
    case TUNER_OP_MATMUL: {
        const tuner_tensor *b = &op->inputs[1];
        op->output.sym[0] = x->rank == 3 || b->rank == 2 ? x->sym[0] : b->sym[0];
        if (x->rank == 2 && b->rank == 2) /* the output's N is b's */
            op->output.sym[1] = b->sym[op->attrs.matmul.trans_b ? 0 : 1];
        break;
    }
    case TUNER_OP_GATHER: /* x's axes before the axis, the index's, x's after it */
        for (int d = 0; d < op->inputs[1].rank && op->attrs.gather.axis + d < op->output.rank; d++)
            op->output.sym[op->attrs.gather.axis + d] = op->inputs[1].sym[d];
        break;
    case TUNER_OP_COPY:
        if ((r = check_copy(op, e)) < 0)
            return r;
        break;
    case TUNER_OP_REDUCE: /* names stand before the reduced axes only: the output keeps them */
        for (int d = 0; d < op->attrs.reduce.axis && d < op->output.rank; d++)
            op->output.sym[d] = x->sym[d];
        break;
    default: /* the row ops: the output is x's shape */
        for (int d = 0; d < x->rank && d < op->output.rank; d++)
            op->output.sym[d] = x->sym[d];
        break;
    }
    if ((r = check_operands(op, e)) < 0)
        return r;

    if (op->kind == TUNER_OP_COPY) /* a copy's output may name what x does not (check_copy) */
        for (int d = 0; d < op->output.rank; d++)
            used |= op->output.sym[d];
    for (int k = 0; k < op->n_dims; k++)
        if (!(used & (1u << k))) {
            char field[64];
            snprintf(field, sizeof(field), "dims.%s", op->dims[k].name);
            return proto_fail(e, 422, "invalid_field", field, "%s is declared but no input's shape names it%s", field,
                              op->kind == TUNER_OP_COPY ? " (nor attrs.shape)" : "");
        }
    return 0;
}

int proto__parse_sizes(const cJSON *root, const tuner_op *op, proto_dynamic *dyn, proto_error *e)
{
    const cJSON *sizes = cJSON_GetObjectItemCaseSensitive(root, "sizes");
    char field[96];
    int r;
    if (!sizes)
        return 0;
    if (op->n_dims == 0)
        return proto_fail(e, 422, "invalid_field", "sizes", "sizes is given, but the request names no dimension");
    if (!cJSON_IsObject(sizes))
        return proto_fail(e, 400, "invalid_field", "sizes", "sizes must be an object {\"n\": 300, ...}");
    bool seen[TUNER_MAX_DIMS] = {false};
    for (const cJSON *v = sizes->child; v; v = v->next) {
        const char *name = v->string ? v->string : "";
        snprintf(field, sizeof(field), "sizes.%.40s", name);
        int k = tuner_op_dim_index(op, name);
        if (k < 0)
            return proto_fail(e, 422, "invalid_field", field, "%s: \"dims\" declares no such name", field);
        if (seen[k])
            return proto_fail(e, 400, "invalid_field", field, "%s is given twice", field);
        seen[k] = true;
        if ((r = int_in(v, field, 1, PROTO_MAX_DIM, &dyn->sizes[k], e)) < 0)
            return r;
    }
    for (int k = 0; k < op->n_dims; k++)
        if (!seen[k]) {
            snprintf(field, sizeof(field), "sizes.%s", op->dims[k].name);
            return proto_fail(e, 422, "invalid_field", field, "sizes must give every name: %s is missing", field);
        }
    char why[160];
    int bad = 0;
    if (tuner_op_sizes_check(op, dyn->sizes, why, sizeof(why), &bad) < 0) {
        snprintf(field, sizeof(field), "sizes.%s", op->dims[bad].name);
        return proto_fail(e, 422, "out_of_range", field, "%s", why);
    }
    dyn->has_sizes = true;
    return 0;
}
