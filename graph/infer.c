/* graph/infer.c - checks each node of a graph and infers its output's shape and dtype.
 *
 * A kernel op's node becomes a /v1/kernels request (graph__op_request's format) and goes through
 * proto_kernel_request_parse: one validator for both APIs, so a node is accepted exactly when
 * the same kernel request would be, and its output is what the kernel will write. Its errors
 * are re-addressed to the node ("inputs[1].shape" -> "nodes[4].inputs[1]"). Steps follow numpy
 * broadcasting; layout ops and batchnorm have their own rules here. */
#include "graph/graph_int.h"
#include "proto/dims.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

/* ---- broadcasting ----------------------------------------------------------------------------- */

bool graph__broadcast(const tuner_tensor *a, const tuner_tensor *b, tuner_tensor *out)
{
    int r = a->rank > b->rank ? a->rank : b->rank;
    tuner_tensor o = *a;
    for (int i = 1; i <= r; i++) {
        int64_t x = i <= a->rank ? a->shape[a->rank - i] : 1;
        int64_t y = i <= b->rank ? b->shape[b->rank - i] : 1;
        const unsigned xs = i <= a->rank ? a->sym[a->rank - i] : 0;
        const unsigned ys = i <= b->rank ? b->sym[b->rank - i] : 0;
        /* A name meets the same name or a fixed 1 (the kernel level's rule): never a number
         * that happens to equal its max, nor another name. */
        if ((xs || ys) && xs != ys && (xs && ys ? true : xs ? y != 1 : x != 1))
            return false;
        if (x != y && x != 1 && y != 1)
            return false;
        o.shape[r - i] = xs ? x : ys ? y : x == 1 ? y : x;
        o.sym[r - i] = (uint8_t)(xs ? xs : ys);
    }
    o.rank = r;
    *out = o;
    return true;
}

char *graph_sym_text(const graph *g, unsigned mask, char *buf, size_t len)
{
    size_t at = 0;
    if (!len)
        return buf;
    buf[0] = '\0';
    for (int k = 0; k < g->n_dims && k < TUNER_MAX_DIMS; k++) {
        if (!(mask & (1u << k)))
            continue;
        int w = snprintf(buf + at, len - at, "%s%s", at ? "*" : "", g->dims[k].name);
        if (w < 0 || (size_t)w >= len - at)
            break;
        at += (size_t)w;
    }
    return buf;
}

/* "[b, s, 768]": names where the axes are named (g may be NULL: numbers only). */
static void shape_text(const graph *g, const tuner_tensor *t, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < t->rank && n < len; i++) {
        char name[80];
        if (g && t->sym[i])
            n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", graph_sym_text(g, t->sym[i], name, sizeof(name)));
        else
            n += (size_t)snprintf(buf + n, len - n, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    }
    if (n < len)
        snprintf(buf + n, len - n, "]");
}

/* ---- kernel requests -------------------------------------------------------------------------- */

/* A tensor in the request language; g (may be NULL) names its named axes ("n", "b*s"). */
static cJSON *tensor_json_in(const tuner_tensor *t, const graph *g)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *shape = cJSON_AddArrayToObject(o, "shape");
    for (int i = 0; i < t->rank; i++) {
        char name[80];
        if (g && t->sym[i])
            cJSON_AddItemToArray(shape, cJSON_CreateString(graph_sym_text(g, t->sym[i], name, sizeof(name))));
        else
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[i]));
    }
    cJSON_AddStringToObject(o, "dtype", tuner_dtype_name(t->dtype));
    if (t->align && t->align < 16)
        cJSON_AddNumberToObject(o, "align", t->align);
    return o;
}

static cJSON *tensor_json(const tuner_tensor *t)
{
    return tensor_json_in(t, NULL);
}

/* A mask step's fields in the request language (proto's parse_mask_step): its first operand as
 * "input" ("operand" in a prologue), where's "other", a comparison's constant or masked_fill's
 * value (an infinity as "-inf"/"inf", which JSON numbers cannot say). */
static void mask_step_json(cJSON *o, const tuner_ew_step *s, int target)
{
    int ops[2];
    const int n = tuner_ew_operands(s, ops);
    if (n >= 1)
        cJSON_AddNumberToObject(o, target >= 0 ? "operand" : "input", ops[0]);
    if (s->kind == TUNER_EW_WHERE)
        cJSON_AddNumberToObject(o, "other", ops[1]);
    if (s->kind == TUNER_EW_MASKED_FILL || n == 0) {
        if (isinf(s->scalar))
            cJSON_AddStringToObject(o, "value", s->scalar < 0 ? "-inf" : "inf");
        else
            cJSON_AddNumberToObject(o, "value", s->scalar);
    }
}

/* One step in the request language. `target` >= 0: a prologue step of anchor input `target`. */
static cJSON *step_json(const tuner_ew_step *s, int target)
{
    cJSON *o = cJSON_CreateObject();
    if (target >= 0)
        cJSON_AddNumberToObject(o, "input", target);
    if (s->kind == TUNER_EW_GELU_TANH) {
        cJSON_AddStringToObject(o, "op", "gelu");
        cJSON_AddStringToObject(o, "approximate", "tanh");
        return o;
    }
    cJSON_AddStringToObject(o, "op", tuner_ew_name(s->kind));
    if (TUNER_EW_IS_BINARY(s->kind))
        cJSON_AddNumberToObject(o, target >= 0 ? "operand" : "input", s->operand);
    if (tuner_ew_is_mask(s->kind))
        mask_step_json(o, s, target);
    const tuner_ew_param *prm;
    int np = tuner_ew_params(s->kind, &prm);
    for (int j = 0; j < np; j++) /* an infinite one is clamp's open bound: absent */
        if (!isinf(tuner_ew_slot_value(s, j)))
            cJSON_AddNumberToObject(o, prm[j].key, tuner_ew_slot_value(s, j));
    if (s->kind == TUNER_EW_CAST)
        cJSON_AddStringToObject(o, "dtype", tuner_dtype_name(s->dtype));
    return o;
}

static void add_pair(cJSON *o, const char *key, const int v[2])
{
    cJSON *a = cJSON_AddArrayToObject(o, key);
    cJSON_AddItemToArray(a, cJSON_CreateNumber(v[0]));
    cJSON_AddItemToArray(a, cJSON_CreateNumber(v[1]));
}

/* A copy's stride or offset over g's dims: the number, or "768*s" when it scales with names. */
static cJSON *scaled_json(const graph *g, int64_t value_at_max, unsigned sym)
{
    if (!g || !sym)
        return cJSON_CreateNumber((double)value_at_max);
    int64_t per = 1;
    for (int k = 0; k < g->n_dims; k++)
        if (sym & (1u << k))
            per *= g->dims[k].max;
    char names[80], text[112];
    graph_sym_text(g, sym, names, sizeof(names));
    if (value_at_max == per)
        snprintf(text, sizeof(text), "%s", names);
    else
        snprintf(text, sizeof(text), "%lld*%s", (long long)(value_at_max / per), names);
    return cJSON_CreateString(text);
}

static cJSON *attrs_json(const tuner_op *op, const graph *g)
{
    cJSON *a = cJSON_CreateObject();
    switch (op->kind) {
    case TUNER_OP_MATMUL:
        cJSON_AddBoolToObject(a, "trans_a", op->attrs.matmul.trans_a);
        cJSON_AddBoolToObject(a, "trans_b", op->attrs.matmul.trans_b);
        cJSON_AddBoolToObject(a, "allow_tf32", op->attrs.matmul.allow_tf32);
        if (tuner_dtype_is_fp8(op->inputs[0].dtype)) { /* an FP8 matmul's own attrs */
            cJSON_AddStringToObject(a, "out_dtype", tuner_dtype_name(op->attrs.matmul.out_dtype));
            cJSON_AddStringToObject(a, "scale_a", tuner_scale_name(op->attrs.matmul.scale_a));
            cJSON_AddStringToObject(a, "scale_b", tuner_scale_name(op->attrs.matmul.scale_b));
            cJSON_AddBoolToObject(a, "fast_accum", op->attrs.matmul.fast_accum);
        }
        break;
    case TUNER_OP_CONV2D:
        add_pair(a, "stride", op->attrs.conv2d.stride);
        add_pair(a, "padding", op->attrs.conv2d.pad);
        add_pair(a, "dilation", op->attrs.conv2d.dilation);
        cJSON_AddNumberToObject(a, "groups", op->attrs.conv2d.groups);
        cJSON_AddStringToObject(a, "layout", op->attrs.conv2d.nchw ? "nchw" : "nhwc");
        break;
    case TUNER_OP_LAYERNORM:
    case TUNER_OP_RMSNORM:
        cJSON_AddNumberToObject(a, "eps", op->attrs.norm.eps);
        break;
    case TUNER_OP_SOFTMAX:
        if (op->attrs.softmax.log)
            cJSON_AddBoolToObject(a, "log", true);
        break;
    case TUNER_OP_REDUCE:
        cJSON_AddStringToObject(a, "kind", tuner_reduce_name(op->attrs.reduce.kind));
        if (op->attrs.reduce.naxes > 1) {
            cJSON *axes = cJSON_AddArrayToObject(a, "axes");
            for (int k = 0; k < op->attrs.reduce.naxes; k++)
                cJSON_AddItemToArray(axes, cJSON_CreateNumber(op->attrs.reduce.axis + k));
        } else {
            cJSON_AddNumberToObject(a, "axis", op->attrs.reduce.axis);
        }
        cJSON_AddBoolToObject(a, "keepdim", op->attrs.reduce.keepdim);
        break;
    case TUNER_OP_COPY: {
        cJSON *shape = cJSON_AddArrayToObject(a, "shape");
        cJSON *strides = cJSON_AddArrayToObject(a, "strides");
        for (int d = 0; d < op->output.rank; d++) {
            char name[80];
            if (g && op->output.sym[d])
                cJSON_AddItemToArray(shape, cJSON_CreateString(graph_sym_text(g, op->output.sym[d], name, sizeof(name))));
            else
                cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)op->output.shape[d]));
            cJSON_AddItemToArray(strides, scaled_json(g, op->attrs.copy.strides[d], op->attrs.copy.stride_sym[d]));
        }
        cJSON_AddItemToObject(a, "offset", scaled_json(g, op->attrs.copy.offset, op->attrs.copy.offset_sym));
        if (op->attrs.copy.padded) {
            cJSON *lo = cJSON_AddArrayToObject(a, "pad_lower");
            cJSON *hi = cJSON_AddArrayToObject(a, "pad_upper");
            for (int d = 0; d < op->output.rank; d++) {
                cJSON_AddItemToArray(lo, cJSON_CreateNumber((double)op->attrs.copy.pad_lower[d]));
                cJSON_AddItemToArray(hi, cJSON_CreateNumber((double)op->attrs.copy.pad_upper[d]));
            }
            cJSON_AddNumberToObject(a, "pad_value", op->attrs.copy.pad_value);
        }
        break;
    }
    case TUNER_OP_CONCAT:
        cJSON_AddNumberToObject(a, "axis", op->attrs.concat.axis);
        break;
    case TUNER_OP_GATHER:
        cJSON_AddNumberToObject(a, "axis", op->attrs.gather.axis);
        break;
    case TUNER_OP_ATTENTION:
        /* the scale as validation resolved it: written always, so the request keys the same */
        cJSON_AddBoolToObject(a, "causal", op->attrs.attention.causal);
        cJSON_AddNumberToObject(a, "scale", op->attrs.attention.scale);
        cJSON_AddStringToObject(a, "layout",
                                op->attrs.attention.packed ? "bshd_packed" : op->attrs.attention.bshd ? "bshd" : "bhsd");
        if (op->attrs.attention.packed)
            cJSON_AddNumberToObject(a, "kv_heads", op->attrs.attention.kv_heads);
        break;
    case TUNER_OP_POOL2D: {
        /* Only the kind's own attributes: the validator refuses the others by name. */
        const tuner_pool_kind k = op->attrs.pool2d.kind;
        const bool nchw = op->attrs.pool2d.nchw;
        cJSON_AddStringToObject(a, "kind", tuner_pool_name(k));
        cJSON_AddStringToObject(a, "layout", nchw ? "nchw" : "nhwc");
        if (k == TUNER_POOL_ADAPTIVE_AVG) {
            const int size[2] = {(int)op->output.shape[nchw ? 2 : 1], (int)op->output.shape[nchw ? 3 : 2]};
            add_pair(a, "output_size", size);
            break;
        }
        add_pair(a, "kernel_size", op->attrs.pool2d.kernel);
        add_pair(a, "stride", op->attrs.pool2d.stride);
        add_pair(a, "padding", op->attrs.pool2d.pad);
        cJSON_AddBoolToObject(a, "ceil_mode", op->attrs.pool2d.ceil_mode);
        if (k == TUNER_POOL_MAX)
            add_pair(a, "dilation", op->attrs.pool2d.dilation);
        else
            cJSON_AddBoolToObject(a, "count_include_pad", op->attrs.pool2d.count_include_pad);
        break;
    }
    default:
        break;
    }
    return a;
}

/* The request body of op; with g, its named axes as names and a "dims" object of the names it
 * uses (their ranges and hints). */
static char *op_request(const tuner_op *op, const graph *g)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "op", tuner_op_name(op->kind));
    cJSON *ins = cJSON_AddArrayToObject(o, "inputs");
    for (int i = 0; i < op->n_inputs; i++)
        cJSON_AddItemToArray(ins, tensor_json_in(&op->inputs[i], g));
    cJSON_AddItemToObject(o, "attrs", attrs_json(op, g));
    cJSON *pro = cJSON_AddArrayToObject(o, "prologue");
    for (int i = 0; i < op->n_anchor_inputs; i++)
        for (int k = 0; k < op->prologue[i].n; k++)
            cJSON_AddItemToArray(pro, step_json(&op->prologue[i].steps[k], i));
    cJSON *epi = cJSON_AddArrayToObject(o, "epilogue");
    for (int k = 0; k < op->epilogue.n; k++)
        cJSON_AddItemToArray(epi, step_json(&op->epilogue.steps[k], -1));
    unsigned used = 0;
    for (int i = 0; g && i < op->n_inputs; i++)
        for (int d = 0; d < op->inputs[i].rank; d++)
            used |= op->inputs[i].sym[d];
    /* A copy's output may name what its input does not (a prefix of a fixed axis cut to "s"). */
    for (int d = 0; g && op->kind == TUNER_OP_COPY && d < op->output.rank; d++)
        used |= op->output.sym[d];
    if (used) {
        cJSON *dims = cJSON_AddObjectToObject(o, "dims");
        for (int k = 0; k < g->n_dims; k++) {
            if (!(used & (1u << k)))
                continue;
            cJSON *d = cJSON_AddObjectToObject(dims, g->dims[k].name);
            cJSON_AddNumberToObject(d, "min", (double)g->dims[k].min);
            cJSON_AddNumberToObject(d, "max", (double)g->dims[k].max);
            if (g->dims[k].multiple_of > 1)
                cJSON_AddNumberToObject(d, "multiple_of", (double)g->dims[k].multiple_of);
            if (g->dyn.n_hints[k] > 0) {
                cJSON *h = cJSON_AddArrayToObject(d, "hints");
                for (int j = 0; j < g->dyn.n_hints[k]; j++)
                    cJSON_AddItemToArray(h, cJSON_CreateNumber((double)g->dyn.hints[k][j]));
            }
        }
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

char *graph__op_request(const tuner_op *op)
{
    return op_request(op, NULL);
}

/* ---- leading named axes merged ------------------------------------------------------------------ */

static unsigned named_axes(const tuner_tensor *t)
{
    unsigned m = 0;
    for (int d = 0; d < t->rank; d++)
        m |= t->sym[d];
    return m;
}

/* Whether tensor t, right-aligned against the merged axes [0, L) of a tensor of rank ref_rank
 * whose named axes there are ref_sym, can be merged alike: its axes over [0, L) carry the same
 * names (merged into their product) or are all 1 (merged into 1); axes it does not reach are
 * broadcast. *keep: t does not reach [0, L) at all. */
static bool mergeable(const tuner_tensor *t, int ref_rank, const uint8_t *ref_sym, int L, bool *keep)
{
    const int off = ref_rank - t->rank;
    *keep = off >= L;
    if (*keep)
        return true;
    bool ones = true, same = off == 0;
    for (int j = 0; j < L - off && j < t->rank; j++) {
        ones = ones && !t->sym[j] && t->shape[j] == 1;
        same = same && t->sym[j] && t->sym[j] == ref_sym[off + j];
    }
    return ones || same;
}

/* t's axes [0, n) as one (n >= 1): their names' product, or 1. */
static void merge_axes(tuner_tensor *t, int n)
{
    if (n <= 1)
        return;
    int64_t size = 1;
    unsigned sym = 0;
    for (int j = 0; j < n; j++) {
        size *= t->shape[j];
        sym |= t->sym[j];
    }
    t->shape[0] = size;
    t->sym[0] = (uint8_t)sym;
    for (int j = n; j < t->rank; j++) {
        t->shape[j - n + 1] = t->shape[j];
        t->sym[j - n + 1] = t->sym[j];
    }
    for (int j = t->rank - n + 1; j < t->rank; j++) {
        t->shape[j] = 0;
        t->sym[j] = 0;
    }
    t->rank -= n - 1;
}

/* How many leading axes of op's output are merged into one: the named axes it leads with, where
 * the kernel's tensors are contiguous and its rows (the normalised or reduced axes, matmul's K
 * and N) come after them, and every operand lines up with them; 0 for none. The kernels take
 * a name on axis 0 (proto/dims.h), so [b, s, 768] is presented as [b*s, 768]; a matmul's N and
 * K may be named too once it is 2-D ([b, s, d] @ k^T with k [s, d]: [b*s, d] @ [s, d]^T). */
static int merge_count(const tuner_op *op)
{
    const tuner_tensor *o = &op->output;
    int L = 0;
    while (L < o->rank && o->sym[L])
        L++;
    switch (op->kind) {
    case TUNER_OP_ELEMENTWISE:
        break;
    case TUNER_OP_SOFTMAX:
    case TUNER_OP_LAYERNORM:
    case TUNER_OP_RMSNORM:
        if (op->inputs[0].rank != o->rank)
            return 0;
        L = L < o->rank - 1 ? L : o->rank - 1;
        break;
    case TUNER_OP_REDUCE:
        L = L < op->attrs.reduce.axis ? L : op->attrs.reduce.axis;
        break;
    case TUNER_OP_MATMUL:
        if (op->inputs[1].rank != 2 || op->inputs[0].rank != o->rank || op->attrs.matmul.trans_a)
            return 0;
        L = L < o->rank - 1 ? L : o->rank - 1;
        /* b's names (its K and N: q @ k^T with k [s, d], p @ v with v [s, d]) stay on b; the
         * kernels take them on a 2-D matmul, so every leading axis of a must merge into M. */
        if (named_axes(&op->inputs[1]) && L != o->rank - 1)
            return 0;
        break;
    default:
        return 0;
    }
    if (L < 2)
        return 0;
    bool keep;
    /* The anchor inputs (matmul's b stays as it is: it has no leading axes), then the operands
     * against what their steps apply to. */
    const int anchors = op->kind == TUNER_OP_ELEMENTWISE ? op->n_inputs : op->n_anchor_inputs;
    for (int i = 0; i < anchors; i++) {
        if (op->kind == TUNER_OP_MATMUL && i == 1)
            continue;
        const tuner_tensor *t = &op->inputs[i];
        if (op->kind == TUNER_OP_REDUCE && i == 0) {
            for (int j = 0; j < L; j++)
                if (t->sym[j] != o->sym[j])
                    return 0;
            continue;
        }
        if (!mergeable(t, o->rank, o->sym, L, &keep))
            return 0;
    }
    for (int s = 0; s < op->epilogue.n; s++) {
        int ops[2];
        const int n = tuner_ew_operands(&op->epilogue.steps[s], ops);
        for (int j = 0; j < n; j++)
            if (ops[j] >= 0 && ops[j] < op->n_inputs && !mergeable(&op->inputs[ops[j]], o->rank, o->sym, L, &keep))
                return 0;
    }
    for (int t = 0; t < op->n_anchor_inputs; t++)
        for (int s = 0; s < op->prologue[t].n; s++) {
            int ops[2];
            const int n = tuner_ew_operands(&op->prologue[t].steps[s], ops);
            for (int j = 0; j < n; j++) {
                if (ops[j] < 0 || ops[j] >= op->n_inputs)
                    continue;
                const tuner_tensor *x = &op->inputs[ops[j]];
                if (op->kind == TUNER_OP_MATMUL && t == 1) {
                    if (named_axes(x))
                        return 0;
                    continue;
                }
                if (!mergeable(x, op->inputs[t].rank, op->inputs[t].sym, L, &keep))
                    return 0;
            }
        }
    return L;
}

/* op with its leading named axes merged (merge_count): every tensor that reaches them, right-
 * aligned against what it applies to (an operand: the output, or the anchor input its prologue
 * reads; matmul's b and its operands have no leading axes and stay). */
static void merge_op(const tuner_op *op, int L, tuner_op *ret)
{
    *ret = *op;
    if (L < 2)
        return;
    int ref_rank[TUNER_MAX_INPUTS];
    for (int i = 0; i < op->n_inputs; i++)
        ref_rank[i] = op->output.rank;
    if (op->kind == TUNER_OP_REDUCE)
        ref_rank[0] = op->inputs[0].rank;
    if (op->kind == TUNER_OP_MATMUL)
        ref_rank[1] = -1;
    for (int t = 0; t < op->n_anchor_inputs; t++)
        for (int s = 0; s < op->prologue[t].n; s++) {
            int ops[2];
            const int n = tuner_ew_operands(&op->prologue[t].steps[s], ops);
            for (int j = 0; j < n; j++)
                if (ops[j] >= 0 && ops[j] < op->n_inputs)
                    ref_rank[ops[j]] = op->kind == TUNER_OP_MATMUL && t == 1 ? -1 : op->inputs[t].rank;
        }
    for (int i = 0; i < op->n_inputs; i++) {
        const int off = ref_rank[i] - op->inputs[i].rank;
        if (ref_rank[i] >= 0 && off < L)
            merge_axes(&ret->inputs[i], L - off);
    }
    merge_axes(&ret->output, L);
    if (op->kind == TUNER_OP_REDUCE)
        ret->attrs.reduce.axis -= L - 1;
}

char *graph__op_request_in(const tuner_op *op, const graph *g, tuner_op *ret_flat)
{
    if (!g || g->n_dims == 0) {
        if (ret_flat)
            *ret_flat = *op;
        return op_request(op, NULL);
    }
    tuner_op *flat = malloc(sizeof(*flat));
    if (!flat)
        return NULL;
    merge_op(op, merge_count(op), flat);
    char *s = op_request(flat, g);
    if (ret_flat)
        *ret_flat = *flat;
    free(flat);
    return s;
}

/* Re-addresses a proto error about a request made from node i to the node. */
static int node_error(const graph *g, int i, const proto_error *pe, proto_error *e)
{
    char field[96];
    int ci = g->node_index[i];
    if (strncmp(pe->field, "inputs[", 7) == 0) {
        int k = atoi(pe->field + 7);
        snprintf(field, sizeof(field), "nodes[%d].inputs[%d]", ci, k);
    } else if (strncmp(pe->field, "attrs", 5) == 0) {
        snprintf(field, sizeof(field), "nodes[%d].%.60s", ci, pe->field);
    } else {
        snprintf(field, sizeof(field), "nodes[%d]", ci);
    }
    /* The status is the one /v1/kernels gives for the same mistake in the node's own JSON (its
     * attrs: 400 for an unknown or mistyped attribute, docs/api.md); what the graph made of the
     * node (its inputs, shapes) is the graph's meaning, 422. */
    const bool own = strncmp(pe->field, "attrs", 5) == 0;
    const char *what = g->nodes[i].alias ? g->nodes[i].alias : tuner_op_name(g->nodes[i].op.kind);
    return proto_fail(e, pe->status == 400 && !own ? 422 : pe->status, pe->code, field,
                       "node \"%.64s\" (%s): %.150s", g->nodes[i].name, what, pe->message);
}

static int check_attr_keys(const graph *g, int i, const cJSON *attrs, const char *const *allowed,
                           proto_error *e);
static int input_error(const graph *g, int i, int k, proto_error *e, const char *msg);

/* embedding(weight, ids) and index_select(x, index) as the gather they are: PyTorch's rules
 * first (a 2-D table and no attributes; a required axis and a 1-D index), then the attributes
 * of the gather request (*ret: a new object, or NULL for none). */
static int gather_alias_attrs(const graph *g, int i, const cJSON *attrs, cJSON **ret, proto_error *e)
{
    static const char *const none[] = {NULL};
    static const char *const axis_only[] = {"axis", NULL};
    const graph_node *n = &g->nodes[i];
    char field[96];
    int r;
    *ret = NULL;
    if (n->n_in != 2) {
        snprintf(field, sizeof(field), "nodes[%d].inputs", g->node_index[i]);
        return proto_fail(e, 422, "invalid_graph", field, "node \"%s\" (%s) takes 2 inputs, not %d", n->name, n->alias,
                          n->n_in);
    }
    if (strcmp(n->alias, "embedding") == 0) {
        if ((r = check_attr_keys(g, i, attrs, none, e)) < 0)
            return r;
        if (g->tensors[n->in[0]].t.rank != 2)
            return input_error(g, i, 0, e, "embedding's weight must be a [num_embeddings, embedding_dim] table");
        *ret = cJSON_CreateObject();
        if (!*ret || !cJSON_AddNumberToObject(*ret, "axis", 0)) {
            cJSON_Delete(*ret);
            *ret = NULL;
            return -ENOMEM;
        }
        return 0;
    }
    if ((r = check_attr_keys(g, i, attrs, axis_only, e)) < 0)
        return r;
    if (!attrs || !cJSON_GetObjectItemCaseSensitive(attrs, "axis")) {
        snprintf(field, sizeof(field), "nodes[%d].attrs.axis", g->node_index[i]);
        return proto_fail(e, 400, "invalid_field", field, "node \"%s\" (index_select) needs %s (the dim to select along)",
                          n->name, field);
    }
    if (g->tensors[n->in[1]].t.rank != 1)
        return input_error(g, i, 1, e, "index_select's index must be 1-D");
    *ret = cJSON_Duplicate(attrs, true);
    return *ret ? 0 : -ENOMEM;
}

static int softmax_node(graph *g, int i, const cJSON *attrs, proto_error *e);
static int reduce_axes_node(graph *g, int i, const cJSON *attrs, proto_error *e);

static int infer_kernel(graph *g, int i, const cJSON *attrs, proto_error *e)
{
    graph_node *n = &g->nodes[i];
    int r;
    /* A softmax over an earlier axis and a reduce over axes that are not one range are the
     * graph's (1: the node became one of its own classes). */
    if (n->op.kind == TUNER_OP_SOFTMAX && (r = softmax_node(g, i, attrs, e)) != 0)
        return r < 0 ? r : 0;
    if (n->op.kind == TUNER_OP_REDUCE && attrs && cJSON_GetObjectItemCaseSensitive(attrs, "axes") &&
        (r = reduce_axes_node(g, i, attrs, e)) != 0)
        return r < 0 ? r : 0;
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return -ENOMEM;
    cJSON_AddStringToObject(o, "op", tuner_op_name(n->op.kind));
    cJSON *ins = cJSON_AddArrayToObject(o, "inputs");
    for (int k = 0; k < n->n_in; k++)
        cJSON_AddItemToArray(ins, tensor_json(&g->tensors[n->in[k]].t));
    if (n->alias) {
        cJSON *ga = NULL;
        r = gather_alias_attrs(g, i, attrs, &ga, e);
        if (r < 0) {
            cJSON_Delete(o);
            return r;
        }
        cJSON_AddItemToObject(o, "attrs", ga);
    } else {
        cJSON *ra = attrs ? cJSON_Duplicate(attrs, true) : cJSON_CreateObject();
        if (ra && n->log) /* log_softmax: softmax's log flag */
            cJSON_AddBoolToObject(ra, "log", true);
        if (ra)
            cJSON_AddItemToObject(o, "attrs", ra);
    }
    /* An FP8 matmul's operands may still be transposes that the partitioner folds into trans_b,
     * and the target is the partitioner's to check (graph__with_arch): here "native" defers both. */
    for (int k = 0; k < n->n_in && k < 2; k++)
        if (n->op.kind == TUNER_OP_MATMUL && tuner_dtype_is_fp8(g->tensors[n->in[k]].t.dtype)) {
            cJSON_AddStringToObject(o, "arch", "native");
            break;
        }
    char *body = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!body)
        return -ENOMEM;
    proto_kernel_request *rq = malloc(sizeof(*rq));
    if (!rq) {
        free(body);
        return -ENOMEM;
    }
    proto_error pe;
    r = proto_kernel_request_parse(body, strlen(body), rq, &pe);
    free(body);
    if (r == 0) {
        n->op = rq->op;
        g->tensors[n->out].t = rq->op.output;
        g->tensors[n->out].t.align = 16;
    } else if (r == -EINVAL) {
        r = node_error(g, i, &pe, e);
    }
    free(rq);
    return r;
}

/* ---- attributes of the other nodes -------------------------------------------------------------- */

static int check_attr_keys(const graph *g, int i, const cJSON *attrs, const char *const *allowed,
                           proto_error *e)
{
    if (!attrs)
        return 0;
    int ci = g->node_index[i];
    for (const cJSON *c = attrs->child; c; c = c->next) {
        bool ok = false;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = strcmp(c->string, *a) == 0;
        char field[96];
        snprintf(field, sizeof(field), "nodes[%d].attrs.%.40s", ci, c->string);
        if (!ok) {
            const char *near = proto_closest_name(c->string, allowed);
            return proto_fail(e, 400, "invalid_field", field,
                               "node \"%s\": unknown attribute \"%.40s\"%s%s%s", g->nodes[i].name,
                               c->string, near ? "; did you mean \"" : "", near ? near : "",
                               near ? "\"?" : "");
        }
        for (const cJSON *p = attrs->child; p != c; p = p->next)
            if (strcmp(p->string, c->string) == 0)
                return proto_fail(e, 400, "invalid_field", field, "duplicate attribute \"%.40s\"",
                                   c->string);
    }
    return 0;
}

static int attr_field(const graph *g, int i, const char *key, char *buf, size_t len)
{
    return snprintf(buf, len, "nodes[%d].attrs.%s", g->node_index[i], key);
}

static int attr_number(const graph *g, int i, const cJSON *attrs, const char *key, bool required,
                       double def, double *ret, proto_error *e)
{
    char field[96];
    attr_field(g, i, key, field, sizeof(field));
    const cJSON *v = attrs ? cJSON_GetObjectItemCaseSensitive(attrs, key) : NULL;
    if (!v) {
        if (required)
            return proto_fail(e, 400, "invalid_field", field, "node \"%s\" needs %s",
                               g->nodes[i].name, field);
        *ret = def;
        return 0;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return proto_fail(e, 400, "invalid_field", field, "%s must be a finite number", field);
    *ret = v->valuedouble;
    return 0;
}

static int attr_int(const graph *g, int i, const cJSON *attrs, const char *key, bool required,
                    int64_t def, int64_t *ret, proto_error *e)
{
    double d;
    int r = attr_number(g, i, attrs, key, required, (double)def, &d, e);
    if (r < 0)
        return r;
    if (d != floor(d) || fabs(d) > 4e18) {
        char field[96];
        attr_field(g, i, key, field, sizeof(field));
        return proto_fail(e, 400, "invalid_field", field, "%s must be an integer", field);
    }
    *ret = (int64_t)d;
    return 0;
}

/* An integer list attribute; *ret_n 0 when absent. */
static int attr_list(const graph *g, int i, const cJSON *attrs, const char *key, int max,
                     int64_t *ret, int *ret_n, proto_error *e)
{
    char field[96];
    attr_field(g, i, key, field, sizeof(field));
    *ret_n = 0;
    const cJSON *v = attrs ? cJSON_GetObjectItemCaseSensitive(attrs, key) : NULL;
    if (!v)
        return 0;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > max)
        return proto_fail(e, 400, "invalid_field", field,
                           "%s must be an array of at most %d integers", field, max);
    int n = 0;
    for (const cJSON *c = v->child; c; c = c->next) {
        if (!cJSON_IsNumber(c) || c->valuedouble != floor(c->valuedouble) ||
            fabs(c->valuedouble) > 4e18)
            return proto_fail(e, 400, "invalid_field", field, "%s must hold integers", field);
        ret[n++] = (int64_t)c->valuedouble;
    }
    *ret_n = n;
    return 0;
}

static int need_inputs(const graph *g, int i, int lo, int hi, proto_error *e)
{
    const graph_node *n = &g->nodes[i];
    if (n->n_in >= lo && n->n_in <= hi)
        return 0;
    char field[48];
    snprintf(field, sizeof(field), "nodes[%d].inputs", g->node_index[i]);
    if (lo == hi)
        return proto_fail(e, 422, "invalid_graph", field, "node \"%s\" takes %d input%s, not %d",
                           n->name, lo, lo == 1 ? "" : "s", n->n_in);
    return proto_fail(e, 422, "invalid_graph", field, "node \"%s\" takes %d to %d inputs, not %d",
                       n->name, lo, hi, n->n_in);
}

static int input_error(const graph *g, int i, int k, proto_error *e, const char *msg)
{
    char field[48];
    snprintf(field, sizeof(field), "nodes[%d].inputs[%d]", g->node_index[i], k);
    return proto_fail(e, 422, "invalid_graph", field, "node \"%s\": %s", g->nodes[i].name, msg);
}

/* Normalises an axis in [-rank, rank) to [0, rank); -1 when out of range. */
static int norm_axis(int64_t axis, int rank)
{
    if (axis < -rank || axis >= rank)
        return -1;
    return (int)(axis < 0 ? axis + rank : axis);
}

/* Broadcasts `out` (numpy, both ways) with input k of node i, which must have dtype `dt` unless
 * dt is negative; an input_error names input k otherwise. */
static int broadcast_input(graph *g, int i, int k, int dt, tuner_tensor *out, proto_error *e)
{
    const tuner_tensor *b = &g->tensors[g->nodes[i].in[k]].t;
    char sa[96], sb[96], msg[256];
    if (dt >= 0 && b->dtype != (tuner_dtype)dt) {
        snprintf(msg, sizeof(msg), "dtype %s differs from %s's %s (add a cast node)", tuner_dtype_name(b->dtype),
                 g->nodes[i].step.kind == TUNER_EW_WHERE ? "the second input" : "the first input",
                 tuner_dtype_name((tuner_dtype)dt));
        return input_error(g, i, k, e, msg);
    }
    shape_text(g, out, sa, sizeof(sa));
    shape_text(g, b, sb, sizeof(sb));
    const tuner_dtype keep = out->dtype;
    if (!graph__broadcast(out, b, out)) {
        snprintf(msg, sizeof(msg), "shapes %s and %s do not broadcast", sa, sb);
        return input_error(g, i, k, e, msg);
    }
    out->dtype = keep;
    return 0;
}

/* log is a plain unary step (infer_step); the masks are checked here. Comparisons take two
 * inputs of one dtype (numpy broadcasting both ways, as add) or one input and attr "value" (a
 * finite number); where takes [cond, a, b], a and b of one dtype, cond of any (nonzero is
 * true), all three broadcast; masked_fill takes [x, mask] and attr "value" (a finite number,
 * "-inf" or "inf"), the mask of any dtype, both broadcast. The output has the dtype of the
 * values (x, a, the compared inputs): a comparison's 1 and 0 are in its inputs' dtype. */
static int infer_mask_step(graph *g, int i, const cJSON *attrs, proto_error *e)
{
    graph_node *n = &g->nodes[i];
    const tuner_ew_kind k = n->step.kind;
    static const char *const value[] = {"value", NULL};
    static const char *const none[] = {NULL};
    char field[96];
    int r;
    if (k == TUNER_EW_WHERE)
        r = need_inputs(g, i, 3, 3, e);
    else if (k == TUNER_EW_MASKED_FILL)
        r = need_inputs(g, i, 2, 2, e);
    else
        r = need_inputs(g, i, 1, 2, e);
    if (r < 0 || (r = check_attr_keys(g, i, attrs, k == TUNER_EW_WHERE ? none : value, e)) < 0)
        return r;
    const cJSON *v = attrs ? cJSON_GetObjectItemCaseSensitive(attrs, "value") : NULL;
    attr_field(g, i, "value", field, sizeof(field));
    tuner_tensor out = g->tensors[n->in[k == TUNER_EW_WHERE ? 1 : 0]].t;
    if (k == TUNER_EW_WHERE) {
        if ((r = broadcast_input(g, i, 0, -1, &out, e)) < 0 || (r = broadcast_input(g, i, 2, out.dtype, &out, e)) < 0)
            return r;
    } else if (k == TUNER_EW_MASKED_FILL) {
        if (!v)
            return proto_fail(e, 400, "invalid_field", field, "node \"%s\" needs %s (a finite number, \"-inf\" or \"inf\")",
                              n->name, field);
        if ((r = proto_fill_value(v, field, &n->step.scalar, e)) < 0 || (r = broadcast_input(g, i, 1, -1, &out, e)) < 0)
            return r;
    } else if (n->n_in == 2) {
        if (v)
            return proto_fail(e, 400, "invalid_field", field,
                              "node \"%s\" compares two inputs or one input with a value, not both", n->name);
        if ((r = broadcast_input(g, i, 1, out.dtype, &out, e)) < 0)
            return r;
    } else if ((r = attr_number(g, i, attrs, "value", true, 0, &n->step.scalar, e)) < 0) {
        return r;
    }
    out.align = 16;
    g->tensors[n->out].t = out;
    return 0;
}

static int infer_step(graph *g, int i, const cJSON *attrs, proto_error *e)
{
    graph_node *n = &g->nodes[i];
    tuner_ew_kind k = n->step.kind;
    bool binary = TUNER_EW_IS_BINARY(k);
    int r;
    if (tuner_ew_is_mask(k))
        return infer_mask_step(g, i, attrs, e);
    if ((r = need_inputs(g, i, binary ? 2 : 1, binary ? 2 : 1, e)) < 0)
        return r;
    static const char *const gelu[] = {"approximate", NULL};
    static const char *const cast[] = {"dtype", NULL};
    /* A numeric parameter's key (tuner_ew_params); none for relu6, whose clamp is preset. */
    const tuner_ew_param *prm = NULL;
    int np = n->step_fixed ? 0 : tuner_ew_params(k, &prm);
    const char *pkeys[3] = {NULL, NULL, NULL};
    for (int j = 0; j < np; j++)
        pkeys[j] = prm[j].key;
    const char *const *keys = k == TUNER_EW_GELU_ERF ? gelu : k == TUNER_EW_CAST ? cast : pkeys;
    if ((r = check_attr_keys(g, i, attrs, keys, e)) < 0)
        return r;
    char field[96];
    tuner_tensor out = g->tensors[n->in[0]].t;
    /* An integer tensor is only converted (attention_mask.to(float)): every other step computes
     * in floats, and no kernel writes integers. */
    for (int s = 0; s < n->n_in; s++)
        if (tuner_dtype_is_int(g->tensors[n->in[s]].t.dtype) && (k != TUNER_EW_CAST || s > 0)) {
            char msg[200];
            snprintf(msg, sizeof(msg), "%s is an integer tensor; a step reads floats (convert it with a cast node first)",
                     tuner_dtype_name(g->tensors[n->in[s]].t.dtype));
            return input_error(g, i, s, e, msg);
        }
    if (k == TUNER_EW_GELU_ERF && attrs && cJSON_GetObjectItemCaseSensitive(attrs, "approximate")) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(attrs, "approximate");
        attr_field(g, i, "approximate", field, sizeof(field));
        if (!cJSON_IsString(v) || (strcmp(v->valuestring, "none") && strcmp(v->valuestring, "tanh")))
            return proto_fail(e, 422, "invalid_field", field,
                               "%s must be \"none\" or \"tanh\"", field);
        if (strcmp(v->valuestring, "tanh") == 0)
            n->step.kind = TUNER_EW_GELU_TANH;
    } else if (np > 0) {
        /* Defaults come from the node's parse (the kind's, or an alias's preset bounds). */
        bool given = false;
        for (int j = 0; j < np; j++) {
            double *slot = tuner_ew_slot(&n->step, j);
            given = given || (attrs && cJSON_GetObjectItemCaseSensitive(attrs, prm[j].key));
            if ((r = attr_number(g, i, attrs, prm[j].key, prm[j].required, *slot, slot, e)) < 0)
                return r;
        }
        if (k == TUNER_EW_CLAMP && !given && isinf(n->step.scalar) && isinf(n->step.scalar2)) {
            attr_field(g, i, "min", field, sizeof(field));
            return proto_fail(e, 400, "invalid_field", field, "node \"%s\" (clamp) needs min, max or both",
                               n->name);
        }
    } else if (k == TUNER_EW_CAST) {
        const cJSON *v = attrs ? cJSON_GetObjectItemCaseSensitive(attrs, "dtype") : NULL;
        attr_field(g, i, "dtype", field, sizeof(field));
        if (!v)
            return proto_fail(e, 400, "invalid_field", field, "node \"%s\" needs %s", n->name,
                               field);
        if (!cJSON_IsString(v) || tuner_dtype_parse(v->valuestring, &n->step.dtype) < 0)
            return proto_fail(e, 422, "unknown_dtype", field, "%s must be f16, bf16, f32, f8e4m3 or f8e5m2",
                               field);
        if (tuner_dtype_is_int(n->step.dtype))
            return proto_fail(e, 422, "invalid_field", field,
                               "%s must be f16, bf16, f32, f8e4m3 or f8e5m2: no kernel writes %s",
                               field, n->step.dtype == TUNER_I32 ? "i32" : "i64");
        out.dtype = n->step.dtype;
    }
    if (binary) {
        const tuner_tensor *b = &g->tensors[n->in[1]].t;
        char sa[96], sb[96];
        char msg[256];
        if (b->dtype != out.dtype) {
            snprintf(msg, sizeof(msg), "dtype %s differs from the first input's %s (add a cast "
                     "node)", tuner_dtype_name(b->dtype), tuner_dtype_name(out.dtype));
            return input_error(g, i, 1, e, msg);
        }
        shape_text(g, &out, sa, sizeof(sa));
        shape_text(g, b, sb, sizeof(sb));
        if (!graph__broadcast(&g->tensors[n->in[0]].t, b, &out)) {
            snprintf(msg, sizeof(msg), "shapes %s and %s do not broadcast", sa, sb);
            return input_error(g, i, 1, e, msg);
        }
    }
    out.align = 16;
    g->tensors[n->out].t = out;
    return 0;
}

static int infer_reshape(graph *g, int i, const cJSON *attrs, proto_error *e)
{
    static const char *const keys[] = {"shape", NULL};
    graph_node *n = &g->nodes[i];
    const tuner_tensor *x = &g->tensors[n->in[0]].t;
    int64_t dims[TUNER_MAX_RANK];
    int nd, r, infer = -1;
    char field[96];
    if ((r = need_inputs(g, i, 1, 1, e)) < 0 || (r = check_attr_keys(g, i, attrs, keys, e)) < 0 ||
        (r = attr_list(g, i, attrs, "shape", TUNER_MAX_RANK, dims, &nd, e)) < 0)
        return r;
    attr_field(g, i, "shape", field, sizeof(field));
    if (nd < 1 || nd > TUNER_MAX_RANK)
        return proto_fail(e, 400, "invalid_field", field, "node \"%s\" needs %s (1 to %d sizes)",
                           n->name, field, TUNER_MAX_RANK);
    int64_t known = 1, numel = tuner_tensor_numel(x);
    for (int k = 0; k < nd; k++) {
        if (dims[k] == -1 && infer < 0) {
            infer = k;
        } else if (dims[k] < 1 || dims[k] > PROTO_MAX_DIM) {
            return proto_fail(e, 422, "invalid_field", field,
                               "%s: sizes are at least 1, with at most one -1 (inferred)", field);
        } else {
            known *= dims[k];
            if (known > numel)
                break;
        }
    }
    if (infer >= 0 && known > 0 && numel % known == 0)
        dims[infer] = numel / known;
    tuner_tensor out = {.rank = nd, .dtype = x->dtype, .align = 16};
    memcpy(out.shape, dims, sizeof(int64_t) * (size_t)nd);
    if (tuner_tensor_numel(&out) != numel || (infer >= 0 && known > numel)) {
        char sa[96];
        shape_text(g, x, sa, sizeof(sa));
        return proto_fail(e, 422, "invalid_field", field,
                           "node \"%s\": %s holds %lld elements, which the shape %s cannot",
                           n->name, "the input", (long long)numel, sa);
    }
    g->tensors[n->out].t = out;
    return 0;
}

static int infer_transpose(graph *g, int i, const cJSON *attrs, proto_error *e)
{
    static const char *const keys[] = {"perm", NULL};
    graph_node *n = &g->nodes[i];
    const tuner_tensor *x = &g->tensors[n->in[0]].t;
    int64_t perm[TUNER_MAX_RANK];
    int np, r;
    if ((r = need_inputs(g, i, 1, 1, e)) < 0 || (r = check_attr_keys(g, i, attrs, keys, e)) < 0 ||
        (r = attr_list(g, i, attrs, "perm", TUNER_MAX_RANK, perm, &np, e)) < 0)
        return r;
    if (np == 0) { /* ONNX's default: reverse the axes */
        np = x->rank;
        for (int k = 0; k < np; k++)
            perm[k] = np - 1 - k;
    }
    char field[96];
    attr_field(g, i, "perm", field, sizeof(field));
    bool seen[TUNER_MAX_RANK] = {false};
    if (np != x->rank)
        return proto_fail(e, 422, "invalid_field", field,
                           "node \"%s\": perm has %d axes, the input %d", n->name, np, x->rank);
    tuner_tensor out = *x;
    for (int k = 0; k < np; k++) {
        int a = norm_axis(perm[k], x->rank);
        if (a < 0 || seen[a])
            return proto_fail(e, 422, "invalid_field", field,
                               "node \"%s\": perm must be a permutation of 0..%d", n->name,
                               x->rank - 1);
        seen[a] = true;
        n->perm[k] = a;
        out.shape[k] = x->shape[a];
    }
    g->tensors[n->out].t = out;
    return 0;
}

/* A slice's "starts" or "ends": attr_list's integers, or in a graph with names also names and
 * products of names ("s", "b*s"), their bits in syms[k] and their max in ret[k] (0 elsewhere). */
static int slice_bounds(const graph *g, int i, const cJSON *attrs, const char *key, int64_t *ret, uint8_t *syms,
                        int *ret_n, proto_error *e)
{
    memset(syms, 0, TUNER_MAX_RANK);
    const cJSON *v = attrs ? cJSON_GetObjectItemCaseSensitive(attrs, key) : NULL;
    bool named = false;
    for (const cJSON *c = v && cJSON_IsArray(v) ? v->child : NULL; c; c = c->next)
        named = named || cJSON_IsString(c);
    if (!named || g->n_dims == 0 || cJSON_GetArraySize(v) > TUNER_MAX_RANK)
        return attr_list(g, i, attrs, key, TUNER_MAX_RANK, ret, ret_n, e);
    tuner_op *dimop = calloc(1, sizeof(*dimop));
    if (!dimop)
        return -ENOMEM;
    dimop->n_dims = g->n_dims;
    memcpy(dimop->dims, g->dims, sizeof(g->dims));
    char field[96], sub[112];
    attr_field(g, i, key, field, sizeof(field));
    int n = 0, r = 0;
    for (const cJSON *c = v->child; c && r == 0; c = c->next, n++) {
        snprintf(sub, sizeof(sub), "%s[%d]", field, n);
        if (cJSON_IsString(c))
            r = proto__parse_named_axis(c, sub, dimop, 0, &syms[n], &ret[n], e);
        else if (!cJSON_IsNumber(c) || c->valuedouble != floor(c->valuedouble) || fabs(c->valuedouble) > 4e18)
            r = proto_fail(e, 400, "invalid_field", sub, "%s must be an integer, a name or a product of names", sub);
        else
            ret[n] = (int64_t)c->valuedouble;
    }
    free(dimop);
    *ret_n = n;
    return r;
}

static int infer_slice(graph *g, int i, const cJSON *attrs, proto_error *e)
{
    static const char *const keys[] = {"starts", "ends", "axes", "steps", NULL};
    graph_node *n = &g->nodes[i];
    const tuner_tensor *x = &g->tensors[n->in[0]].t;
    int64_t starts[TUNER_MAX_RANK], ends[TUNER_MAX_RANK], axes[TUNER_MAX_RANK], steps[TUNER_MAX_RANK];
    uint8_t start_sym[TUNER_MAX_RANK], end_sym[TUNER_MAX_RANK];
    int ns, ne, na, nst, r;
    if ((r = need_inputs(g, i, 1, 1, e)) < 0 || (r = check_attr_keys(g, i, attrs, keys, e)) < 0 ||
        (r = slice_bounds(g, i, attrs, "starts", starts, start_sym, &ns, e)) < 0 ||
        (r = slice_bounds(g, i, attrs, "ends", ends, end_sym, &ne, e)) < 0 ||
        (r = attr_list(g, i, attrs, "axes", TUNER_MAX_RANK, axes, &na, e)) < 0 ||
        (r = attr_list(g, i, attrs, "steps", TUNER_MAX_RANK, steps, &nst, e)) < 0)
        return r;
    char field[96];
    attr_field(g, i, "ends", field, sizeof(field));
    if (ns == 0 || ns != ne || (na && na != ns) || (nst && nst != ns))
        return proto_fail(e, 422, "invalid_field", field,
                           "node \"%s\": starts and ends (and axes, steps when given) must have "
                           "the same number of entries", n->name);
    tuner_tensor out = *x;
    for (int d = 0; d < x->rank; d++) {
        n->start[d] = 0;
        n->stop[d] = x->shape[d];
        n->stride[d] = 1;
    }
    bool seen[TUNER_MAX_RANK] = {false};
    for (int k = 0; k < ns; k++) {
        int a = norm_axis(na ? axes[k] : k, x->rank);
        int64_t step = nst ? steps[k] : 1;
        attr_field(g, i, na ? "axes" : "starts", field, sizeof(field));
        if (a < 0 || seen[a])
            return proto_fail(e, 422, "invalid_field", field,
                               "node \"%s\": axis out of range or given twice", n->name);
        seen[a] = true;
        if (step < 1) {
            attr_field(g, i, "steps", field, sizeof(field));
            return proto_fail(e, 422, "invalid_field", field,
                               "node \"%s\": steps must be at least 1", n->name);
        }
        int64_t dim = x->shape[a], s = starts[k], t = ends[k];
        if (start_sym[k] || end_sym[k]) {
            /* A named end: the first `name` items of a fixed axis, [0, name) - the axis becomes
             * the name (position ids [1, 512] sliced to [1, "s"]). */
            char nm[80], sub[112];
            snprintf(sub, sizeof(sub), "nodes[%d].attrs.%s[%d]", g->node_index[i], start_sym[k] ? "starts" : "ends", k);
            if (start_sym[k] || s != 0 || step != 1)
                return proto_fail(e, 422, "invalid_field", sub,
                                  "node \"%s\": a slice bounded by a name is [0, name) with step 1 (its length is "
                                  "then the name): a named start, or a start or step besides, is not", n->name);
            if (x->sym[a])
                return proto_fail(e, 422, "invalid_field", sub,
                                  "node \"%s\": axis %d is named (%s): only a fixed axis can be sliced to a name",
                                  n->name, a, graph_sym_text(g, x->sym[a], nm, sizeof(nm)));
            if (t > dim)
                return proto_fail(e, 422, "invalid_field", sub,
                                  "node \"%s\": %s's max is %lld, past axis %d's %lld items", n->name,
                                  graph_sym_text(g, end_sym[k], nm, sizeof(nm)), (long long)t, a, (long long)dim);
            n->start[a] = 0;
            n->stop[a] = t;
            n->stride[a] = 1;
            out.shape[a] = t;
            out.sym[a] = end_sym[k];
            continue;
        }
        /* numpy's clamping: negative indices count from the end, then into [0, dim]. */
        s = s < 0 ? s + dim : s;
        t = t < 0 ? t + dim : t;
        s = s < 0 ? 0 : s > dim ? dim : s;
        t = t < 0 ? 0 : t > dim ? dim : t;
        if (t <= s) {
            attr_field(g, i, "ends", field, sizeof(field));
            return proto_fail(e, 422, "invalid_field", field,
                               "node \"%s\": the slice of axis %d is empty", n->name, a);
        }
        n->start[a] = s;
        n->stop[a] = t;
        n->stride[a] = step;
        out.shape[a] = (t - s + step - 1) / step;
    }
    g->tensors[n->out].t = out;
    return 0;
}

bool graph__named_prefix_slice(const graph *g, int i)
{
    const graph_node *n = &g->nodes[i];
    if (g->n_dims == 0 || n->cls != GRAPH_NODE_SLICE)
        return false;
    const tuner_tensor *x = &g->tensors[n->in[0]].t, *o = &g->tensors[n->out].t;
    int cut = -1;
    for (int d = 0; d < x->rank; d++) {
        if (o->sym[d] == x->sym[d] && o->shape[d] == x->shape[d])
            continue;
        if (cut >= 0 || x->sym[d] || !o->sym[d] || n->start[d] != 0 || n->stride[d] != 1)
            return false;
        cut = d;
    }
    for (int d = 0; d < cut; d++)
        if (x->shape[d] != 1)
            return false;
    return cut >= 0;
}

static int infer_batchnorm(graph *g, int i, const cJSON *attrs, proto_error *e)
{
    static const char *const keys[] = {"eps", "axis", NULL};
    graph_node *n = &g->nodes[i];
    int64_t axis = 1;
    int r;
    if ((r = need_inputs(g, i, 5, 5, e)) < 0 || (r = check_attr_keys(g, i, attrs, keys, e)) < 0 ||
        (r = attr_number(g, i, attrs, "eps", false, 1e-5, &n->eps, e)) < 0 ||
        (r = attr_int(g, i, attrs, "axis", false, 1, &axis, e)) < 0)
        return r;
    const tuner_tensor *x = &g->tensors[n->in[0]].t;
    char field[96];
    if (!(n->eps > 0 && n->eps < 1)) {
        attr_field(g, i, "eps", field, sizeof(field));
        return proto_fail(e, 422, "invalid_field", field, "%s must be in (0, 1)", field);
    }
    int a = norm_axis(axis, x->rank);
    if (a < 0) {
        attr_field(g, i, "axis", field, sizeof(field));
        return proto_fail(e, 422, "invalid_field", field,
                           "node \"%s\": axis %lld is out of range for rank %d (1 is NCHW's "
                           "channels, -1 NHWC's)", n->name, (long long)axis, x->rank);
    }
    static const char *const what[] = {"", "scale", "bias", "mean", "var"};
    for (int k = 1; k < 5; k++) {
        const tuner_tensor *t = &g->tensors[n->in[k]].t;
        if (t->rank != 1 || t->shape[0] != x->shape[a]) {
            char sa[96], msg[256];
            shape_text(g, t, sa, sizeof(sa));
            snprintf(msg, sizeof(msg), "%s has shape %s; channel axis %d needs [%lld]", what[k],
                     sa, a, (long long)x->shape[a]);
            return input_error(g, i, k, e, msg);
        }
    }
    n->axis = a;
    g->tensors[n->out].t = *x;
    return 0;
}

/* ---- issue 37's shape nodes ------------------------------------------------------------------ */

/* softmax / log_softmax: the last axis is a kernel node (0, the caller builds its request); an
 * earlier one becomes GRAPH_NODE_SOFTMAX_AXIS (1). */
static int softmax_node(graph *g, int i, const cJSON *attrs, proto_error *e)
{
    static const char *const softmax_keys[] = {"axis", "log", NULL};
    static const char *const log_keys[] = {"axis", NULL}; /* log_softmax: the flag is its name */
    graph_node *n = &g->nodes[i];
    const tuner_tensor *x = &g->tensors[n->in[0]].t;
    int64_t axis;
    int r;
    char field[96];
    if ((r = need_inputs(g, i, 1, 1, e)) < 0 ||
        (r = check_attr_keys(g, i, attrs, n->log ? log_keys : softmax_keys, e)) < 0 ||
        (r = attr_int(g, i, attrs, "axis", false, -1, &axis, e)) < 0)
        return r;
    int a = norm_axis(axis, x->rank);
    if (a < 0) {
        attr_field(g, i, "axis", field, sizeof(field));
        return proto_fail(e, 422, "invalid_field", field, "node \"%s\": axis %lld is out of range for rank %d",
                           n->name, (long long)axis, x->rank);
    }
    if (a == x->rank - 1)
        return 0;
    const cJSON *lv = attrs ? cJSON_GetObjectItemCaseSensitive(attrs, "log") : NULL;
    if (lv) {
        attr_field(g, i, "log", field, sizeof(field));
        if (!cJSON_IsBool(lv))
            return proto_fail(e, 400, "invalid_field", field, "%s must be a boolean", field);
        n->log = cJSON_IsTrue(lv);
    }
    n->cls = GRAPH_NODE_SOFTMAX_AXIS;
    n->axis = a;
    g->tensors[n->out].t = *x;
    g->tensors[n->out].t.align = 16;
    return 1;
}

/* reduce with "axes": a range of consecutive axes is a kernel node (0: its request carries the
 * axes); any other set becomes GRAPH_NODE_REDUCE_AXES (1), a chain of kernels. */
static int reduce_axes_node(graph *g, int i, const cJSON *attrs, proto_error *e)
{
    static const char *const keys[] = {"kind", "axes", "keepdim", NULL};
    graph_node *n = &g->nodes[i];
    const tuner_tensor *x = &g->tensors[n->in[0]].t;
    int64_t axes[TUNER_MAX_RANK];
    int na, r;
    char field[96];
    if ((r = need_inputs(g, i, 1, 1, e)) < 0)
        return r;
    if (cJSON_GetObjectItemCaseSensitive(attrs, "axis")) {
        attr_field(g, i, "axes", field, sizeof(field));
        return proto_fail(e, 422, "invalid_field", field, "node \"%s\": give axis or axes, not both", n->name);
    }
    if ((r = check_attr_keys(g, i, attrs, keys, e)) < 0 ||
        (r = attr_list(g, i, attrs, "axes", TUNER_MAX_RANK, axes, &na, e)) < 0)
        return r;
    attr_field(g, i, "axes", field, sizeof(field));
    if (na < 1)
        return proto_fail(e, 422, "invalid_field", field, "node \"%s\": %s needs 1 to %d axes", n->name, field,
                           TUNER_MAX_RANK);
    unsigned mask = 0;
    int lo = x->rank, hi = -1;
    for (int k = 0; k < na; k++) {
        int a = norm_axis(axes[k], x->rank);
        if (a < 0 || (mask & (1u << a)))
            return proto_fail(e, 422, "invalid_field", field,
                               "node \"%s\": axis %lld is out of range for rank %d or given twice", n->name,
                               (long long)axes[k], x->rank);
        mask |= 1u << a;
        lo = a < lo ? a : lo;
        hi = a > hi ? a : hi;
    }
    if (hi - lo + 1 == na)
        return 0; /* one range: one kernel */
    tuner_reduce_kind kind = TUNER_REDUCE_SUM;
    bool keepdim = false;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(attrs, "kind");
    if (v && (!cJSON_IsString(v) || tuner_reduce_parse(v->valuestring, &kind) < 0)) {
        attr_field(g, i, "kind", field, sizeof(field));
        return proto_fail(e, 422, "invalid_field", field, "kind must be \"sum\", \"mean\" or \"max\"");
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "keepdim"))) {
        attr_field(g, i, "keepdim", field, sizeof(field));
        if (!cJSON_IsBool(v))
            return proto_fail(e, 400, "invalid_field", field, "%s must be a boolean", field);
        keepdim = cJSON_IsTrue(v);
    }
    tuner_tensor out = {.rank = 0, .dtype = x->dtype, .align = 16};
    for (int d = 0; d < x->rank; d++)
        if (!(mask & (1u << d)))
            out.shape[out.rank++] = x->shape[d];
        else if (keepdim)
            out.shape[out.rank++] = 1;
    if (out.rank == 0)
        out.shape[out.rank++] = 1;
    n->cls = GRAPH_NODE_REDUCE_AXES;
    n->reduce_axes = mask;
    n->reduce_kind = kind;
    n->keepdim = keepdim;
    g->tensors[n->out].t = out;
    return 1;
}

/* expand: torch.expand's sizes - -1 keeps an axis, new leading axes, only size-1 axes grow. */
static int infer_expand(graph *g, int i, const cJSON *attrs, proto_error *e)
{
    static const char *const keys[] = {"shape", NULL};
    graph_node *n = &g->nodes[i];
    const tuner_tensor *x = &g->tensors[n->in[0]].t;
    int64_t dims[TUNER_MAX_RANK];
    int nd, r;
    char field[96];
    if ((r = need_inputs(g, i, 1, 1, e)) < 0 || (r = check_attr_keys(g, i, attrs, keys, e)) < 0 ||
        (r = attr_list(g, i, attrs, "shape", TUNER_MAX_RANK, dims, &nd, e)) < 0)
        return r;
    attr_field(g, i, "shape", field, sizeof(field));
    if (nd < 1)
        return proto_fail(e, 400, "invalid_field", field, "node \"%s\" needs %s (1 to %d sizes)", n->name, field,
                           TUNER_MAX_RANK);
    if (nd < x->rank)
        return proto_fail(e, 422, "invalid_field", field,
                           "node \"%s\": %s has %d sizes, fewer than the input's rank %d", n->name, field, nd,
                           x->rank);
    tuner_tensor out = {.rank = nd, .dtype = x->dtype, .align = 16};
    const int lead = nd - x->rank;
    for (int d = 0; d < nd; d++) {
        const int j = d - lead;
        const int64_t want = dims[d];
        if (j < 0 && want < 1)
            return proto_fail(e, 422, "invalid_field", field,
                               "node \"%s\": a new leading axis (%d) needs a size of at least 1, not %lld", n->name,
                               d, (long long)want);
        if (j >= 0 && want == -1) {
            out.shape[d] = x->shape[j];
            continue;
        }
        if (want < 1 || want > PROTO_MAX_DIM || (j >= 0 && x->shape[j] != 1 && want != x->shape[j]))
            return proto_fail(e, 422, "invalid_field", field,
                               "node \"%s\": size %lld at axis %d: only a size-1 axis grows (the input's is "
                               "%lld; -1 keeps it)", n->name, (long long)want, d,
                               (long long)(j >= 0 ? x->shape[j] : 1));
        out.shape[d] = want;
    }
    if (tuner_tensor_numel(&out) > PROTO_MAX_NUMEL)
        return proto_fail(e, 422, "limit_exceeded", field, "node \"%s\": the result has more than 2^31 elements",
                           n->name);
    g->tensors[n->out].t = out;
    return 0;
}

/* pad: F.pad's constant mode - pads in pairs (before, after) from the last axis backwards;
 * negative pads crop. */
static int infer_pad(graph *g, int i, const cJSON *attrs, proto_error *e)
{
    static const char *const keys[] = {"pads", "value", "mode", NULL};
    graph_node *n = &g->nodes[i];
    const tuner_tensor *x = &g->tensors[n->in[0]].t;
    int64_t pads[2 * TUNER_MAX_RANK];
    int np, r;
    char field[96];
    if ((r = need_inputs(g, i, 1, 1, e)) < 0 || (r = check_attr_keys(g, i, attrs, keys, e)) < 0 ||
        (r = attr_list(g, i, attrs, "pads", 2 * TUNER_MAX_RANK, pads, &np, e)) < 0 ||
        (r = attr_number(g, i, attrs, "value", false, 0, &n->pad_value, e)) < 0)
        return r;
    const cJSON *mode = attrs ? cJSON_GetObjectItemCaseSensitive(attrs, "mode") : NULL;
    if (mode && (!cJSON_IsString(mode) || strcmp(mode->valuestring, "constant") != 0)) {
        attr_field(g, i, "mode", field, sizeof(field));
        return proto_fail(e, 422, "invalid_field", field,
                           "node \"%s\": only mode \"constant\" is supported (reflect, replicate and circular "
                           "are not)", n->name);
    }
    attr_field(g, i, "pads", field, sizeof(field));
    if (np < 2 || np % 2 || np / 2 > x->rank)
        return proto_fail(e, 422, "invalid_field", field,
                           "node \"%s\": %s needs pairs (before, after) for 1 to %d axes, from the last "
                           "(F.pad's order)", n->name, field, x->rank);
    tuner_tensor out = *x;
    out.align = 16;
    for (int d = 0; d < TUNER_MAX_RANK; d++)
        n->pad_before[d] = n->pad_after[d] = 0;
    for (int k = 0; k < np / 2; k++) {
        const int d = x->rank - 1 - k;
        const int64_t b = pads[2 * k], a = pads[2 * k + 1];
        const int64_t kept = x->shape[d] - (b < 0 ? -b : 0) - (a < 0 ? -a : 0);
        if (b > PROTO_MAX_DIM || a > PROTO_MAX_DIM || kept < 1)
            return proto_fail(e, 422, "invalid_field", field,
                               "node \"%s\": pads (%lld, %lld) of axis %d leave nothing of its size %lld",
                               n->name, (long long)b, (long long)a, d, (long long)x->shape[d]);
        n->pad_before[d] = b;
        n->pad_after[d] = a;
        out.shape[d] = x->shape[d] + a + b;
        if (out.shape[d] > PROTO_MAX_DIM)
            return proto_fail(e, 422, "limit_exceeded", field, "node \"%s\": axis %d grows past 2^31-1",
                               n->name, d);
    }
    if (tuner_tensor_numel(&out) > PROTO_MAX_NUMEL)
        return proto_fail(e, 422, "limit_exceeded", field, "node \"%s\": the result has more than 2^31 elements",
                           n->name);
    g->tensors[n->out].t = out;
    return 0;
}

/* ---- named dimensions ---------------------------------------------------------------------------- */

/* reshape in a graph with names: every entry of "shape" is a size, -1 (one, inferred) or a
 * name or product of names ("b*s"). The result must hold the input's elements at every size:
 * the same names (each once) and the same product of the fixed sizes. A -1 becomes what is
 * left: a number, or a product of names, never both (no kernel takes "3*n"). */
static int infer_reshape_named(graph *g, int i, const cJSON *attrs, proto_error *e)
{
    static const char *const keys[] = {"shape", NULL};
    graph_node *n = &g->nodes[i];
    const tuner_tensor *x = &g->tensors[n->in[0]].t;
    char field[96], sub[112], sa[160], msg[512];
    int r;
    if ((r = need_inputs(g, i, 1, 1, e)) < 0 || (r = check_attr_keys(g, i, attrs, keys, e)) < 0)
        return r;
    attr_field(g, i, "shape", field, sizeof(field));
    const cJSON *v = attrs ? cJSON_GetObjectItemCaseSensitive(attrs, "shape") : NULL;
    const int nd = v && cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 0;
    if (nd < 1 || nd > TUNER_MAX_RANK)
        return proto_fail(e, 400, "invalid_field", field,
                          "node \"%s\" needs %s (1 to %d sizes, -1 or names)", n->name, field, TUNER_MAX_RANK);
    shape_text(g, x, sa, sizeof(sa));
    /* The input: its names (each once) and the product of its fixed sizes. */
    unsigned in_names = 0;
    int64_t in_fixed = 1;
    for (int d = 0; d < x->rank; d++) {
        if (x->sym[d] & in_names)
            return input_error(g, i, 0, e, "the input names a dimension on two axes: no reshape of it can be named");
        in_names |= x->sym[d];
        if (!x->sym[d])
            in_fixed *= x->shape[d];
    }
    tuner_op *dimop = calloc(1, sizeof(*dimop));
    if (!dimop)
        return -ENOMEM;
    dimop->n_dims = g->n_dims;
    memcpy(dimop->dims, g->dims, sizeof(g->dims));
    tuner_tensor out = {.rank = nd, .dtype = x->dtype, .align = 16};
    unsigned out_names = 0;
    int64_t out_fixed = 1;
    int infer = -1, k = 0;
    r = 0;
    for (const cJSON *d = v->child; d && r == 0; d = d->next, k++) {
        snprintf(sub, sizeof(sub), "%s[%d]", field, k);
        if (cJSON_IsString(d)) {
            r = proto__parse_named_axis(d, sub, dimop, 0, &out.sym[k], &out.shape[k], e);
            if (r == 0 && (out.sym[k] & out_names))
                r = proto_fail(e, 422, "invalid_field", sub, "node \"%s\": %s names a dimension given before", n->name,
                               sub);
            if (r == 0 && (out.sym[k] & ~in_names)) {
                char nm[80];
                r = proto_fail(e, 422, "invalid_field", sub,
                               "node \"%s\": %s names %s, which the input %s does not have", n->name, sub,
                               graph_sym_text(g, out.sym[k] & ~in_names, nm, sizeof(nm)), sa);
            }
            out_names |= out.sym[k];
        } else if (cJSON_IsNumber(d) && d->valuedouble == -1 && infer < 0) {
            infer = k;
        } else if (!cJSON_IsNumber(d) || d->valuedouble != floor(d->valuedouble) || d->valuedouble < 1 ||
                   d->valuedouble > (double)PROTO_MAX_DIM) {
            r = proto_fail(e, 422, "invalid_field", sub,
                           "%.100s: sizes are at least 1, names or products of names, with at most one -1 (inferred)", sub);
        } else {
            out.shape[k] = (int64_t)d->valuedouble;
            out_fixed *= out.shape[k];
            if (out_fixed > PROTO_MAX_NUMEL)
                r = proto_fail(e, 422, "invalid_field", field, "node \"%s\": %s has more elements than the input %s",
                               n->name, field, sa);
        }
    }
    free(dimop);
    if (r < 0)
        return r;
    if (infer >= 0) {
        const unsigned left = in_names & ~out_names;
        if (in_fixed % out_fixed != 0 || (left && in_fixed / out_fixed != 1)) {
            snprintf(msg, sizeof(msg),
                     "node \"%.64s\": the -1 of %s would be what is left of the input %s, which is not a size nor a "
                     "product of names (write its axes with names)", n->name, field, sa);
            return proto_fail(e, 422, "invalid_field", field, "%s", msg);
        }
        out.sym[infer] = (uint8_t)left;
        out.shape[infer] = in_fixed / out_fixed;
        for (int j = 0; j < g->n_dims; j++)
            if (left & (1u << j))
                out.shape[infer] *= g->dims[j].max;
        out_names |= left;
        out_fixed = in_fixed;
    }
    if (out_names != in_names || out_fixed != in_fixed) {
        char sb[160];
        shape_text(g, &out, sb, sizeof(sb));
        return proto_fail(e, 422, "invalid_field", field,
                          "node \"%s\": the input %s cannot be reshaped to %s: they hold the same elements only "
                          "when they have the same names and the same product of fixed sizes", n->name, sa, sb);
    }
    g->tensors[n->out].t = out;
    return 0;
}

/* Input k of node i refused: "<what> <axis> ... (<names>): <rule>". */
static int named_error(const graph *g, int i, int k, proto_error *e, const char *what, int axis, unsigned sym,
                       const char *rule)
{
    char nm[80], msg[300];
    snprintf(msg, sizeof(msg), "%s %d is named %s: %s", what, axis, sym ? graph_sym_text(g, sym, nm, sizeof(nm)) : "by no name",
             rule);
    return input_error(g, i, k, e, msg);
}

/* A kernel node's result's names, from its inputs' (the op's own shape rules, on names): a
 * name stands where the kernel's result has the axis it comes from. */
static int names_kernel(graph *g, int i, proto_error *e)
{
    graph_node *n = &g->nodes[i];
    const tuner_op *op = &n->op;
    tuner_tensor *out = &g->tensors[n->out].t;
    const tuner_tensor *x = &g->tensors[n->in[0]].t;
    unsigned any = 0;
    for (int k = 0; k < n->n_in; k++)
        any |= named_axes(&g->tensors[n->in[k]].t);
    memset(out->sym, 0, sizeof(out->sym));
    if (!any)
        return 0;
    switch (op->kind) {
    case TUNER_OP_MATMUL: {
        const tuner_tensor *b = &g->tensors[n->in[1]].t;
        const int ra = x->rank, rb = b->rank;
        const bool ta = op->attrs.matmul.trans_a, tb = op->attrs.matmul.trans_b;
        const int ka = ta ? ra - 2 : ra - 1, ma = ta ? ra - 1 : ra - 2;
        const int kb = tb ? rb - 1 : rb - 2, nb = tb ? rb - 2 : rb - 1;
        if (x->sym[ka] != b->sym[kb])
            return named_error(g, i, 1, e, "matmul's K, b's axis", kb, b->sym[kb], "it must be named as a's K");
        if (ra == 3 && rb == 3 && x->sym[0] != b->sym[0])
            return named_error(g, i, 1, e, "the batch, b's axis", 0, b->sym[0], "it must be named as a's batch");
        int o = 0;
        if (ra == 3 || rb == 3)
            out->sym[o++] = ra == 3 ? x->sym[0] : b->sym[0];
        out->sym[o++] = x->sym[ma];
        out->sym[o++] = b->sym[nb];
        break;
    }
    case TUNER_OP_SOFTMAX:
    case TUNER_OP_LAYERNORM:
    case TUNER_OP_RMSNORM:
        memcpy(out->sym, x->sym, sizeof(out->sym));
        break;
    case TUNER_OP_REDUCE: {
        const int a = op->attrs.reduce.axis, na = op->attrs.reduce.naxes > 0 ? op->attrs.reduce.naxes : 1;
        int o = 0;
        for (int d = 0; d < x->rank; d++) {
            if (d >= a && d < a + na) {
                if (x->sym[d])
                    return named_error(g, i, 0, e, "axis", d, x->sym[d], "it is reduced: a reduced axis may not be named");
                if (op->attrs.reduce.keepdim)
                    out->sym[o++] = 0;
            } else {
                out->sym[o++] = x->sym[d];
            }
        }
        break;
    }
    case TUNER_OP_GATHER: {
        const tuner_tensor *idx = &g->tensors[n->in[1]].t;
        const int a = op->attrs.gather.axis;
        if (x->sym[a])
            return named_error(g, i, 0, e, "axis", a, x->sym[a], "gathered from: it may not be named");
        int o = 0;
        for (int d = 0; d < a; d++)
            out->sym[o++] = x->sym[d];
        for (int d = 0; d < idx->rank; d++)
            out->sym[o++] = idx->sym[d];
        for (int d = a + 1; d < x->rank; d++)
            out->sym[o++] = x->sym[d];
        break;
    }
    case TUNER_OP_CONCAT: {
        const int a = op->attrs.concat.axis;
        for (int k = 0; k < n->n_in; k++) {
            const tuner_tensor *t = &g->tensors[n->in[k]].t;
            for (int d = 0; d < t->rank; d++) {
                if (d == a && t->sym[d])
                    return named_error(g, i, k, e, "axis", d, t->sym[d], "joined along: it may not be named");
                if (t->sym[d] != x->sym[d])
                    return named_error(g, i, k, e, "axis", d, t->sym[d], "it must be named as the first input's");
            }
        }
        memcpy(out->sym, x->sym, sizeof(out->sym));
        break;
    }
    case TUNER_OP_ATTENTION: {
        if (n->n_in < 3 || op->attrs.attention.packed || out->rank != x->rank)
            return input_error(g, i, 0, e, "names are not supported in this layout of attention");
        const tuner_tensor *v = &g->tensors[n->in[2]].t;
        if (out->rank != x->rank)
            return input_error(g, i, 0, e, "names are not supported in this layout of attention");
        memcpy(out->sym, x->sym, sizeof(out->sym));
        out->sym[out->rank - 1] = v->sym[v->rank - 1];
        break;
    }
    default: {
        char msg[200];
        snprintf(msg, sizeof(msg), "%s's inputs may not be named (a named dimension stands in elementwise, softmax, "
                 "layernorm, rmsnorm, reduce, matmul, gather, concat and attention nodes)", tuner_op_name(op->kind));
        for (int k = 0; k < n->n_in; k++)
            if (named_axes(&g->tensors[n->in[k]].t))
                return input_error(g, i, k, e, msg);
        break;
    }
    }
    return 0;
}

/* The names of node i's result once its shape is inferred (at the names' max), and the
 * refusals of what names cannot say: a sliced, padded, reduced or normalised named axis, an
 * expand of one to a number. Steps carry names through graph__broadcast, reshapes through
 * infer_reshape_named. */
static int names_node(graph *g, int i, const cJSON *attrs, proto_error *e)
{
    graph_node *n = &g->nodes[i];
    tuner_tensor *out = &g->tensors[n->out].t;
    const tuner_tensor *x = &g->tensors[n->in[0]].t;
    char field[96];
    switch (n->cls) {
    case GRAPH_NODE_KERNEL:
        return names_kernel(g, i, e);
    case GRAPH_NODE_STEP:
    case GRAPH_NODE_RESHAPE:
        return 0;
    case GRAPH_NODE_TRANSPOSE:
        for (int k = 0; k < x->rank; k++)
            out->sym[k] = x->sym[n->perm[k]];
        return 0;
    case GRAPH_NODE_SLICE:
        /* A named axis is kept whole, or sliced within its smallest size: [b, s, 768][:, 0] is
         * [b, 1, 768] at every size, the slice's axis fixed (the copy's strides scale with s). */
        for (int d = 0; d < x->rank; d++) {
            if (!x->sym[d] || (n->start[d] == 0 && n->stop[d] == x->shape[d] && n->stride[d] == 1))
                continue;
            int64_t least = 1;
            for (int k = 0; k < g->n_dims; k++)
                if (x->sym[d] & (1u << k))
                    least *= g->dims[k].min;
            if (n->stop[d] > least) {
                char nm[80];
                attr_field(g, i, "ends", field, sizeof(field));
                return proto_fail(e, 422, "invalid_field", field,
                                  "node \"%s\": axis %d is named (%s): a slice of a named axis ends within the "
                                  "name's smallest size (%lld here: end %lld is past it; a slice to the end of a "
                                  "named axis cannot be named)", n->name, d, graph_sym_text(g, x->sym[d], nm, sizeof(nm)),
                                  (long long)least, (long long)n->stop[d]);
            }
            out->sym[d] = 0;
        }
        return 0;
    case GRAPH_NODE_BATCHNORM:
        if (x->sym[n->axis])
            return named_error(g, i, 0, e, "the channel axis", n->axis, x->sym[n->axis], "the channel axis may not be named");
        for (int k = 1; k < n->n_in; k++)
            if (named_axes(&g->tensors[n->in[k]].t))
                return input_error(g, i, k, e, "batchnorm's statistics may not be named");
        return 0;
    case GRAPH_NODE_EXPAND: {
        int64_t dims[TUNER_MAX_RANK];
        int nd, r;
        if ((r = attr_list(g, i, attrs, "shape", TUNER_MAX_RANK, dims, &nd, e)) < 0)
            return r;
        const int lead = nd - x->rank;
        memset(out->sym, 0, sizeof(out->sym));
        for (int d = lead; d < nd; d++) {
            if (x->sym[d - lead] && dims[d] != -1) {
                attr_field(g, i, "shape", field, sizeof(field));
                return proto_fail(e, 422, "invalid_field", field,
                                  "node \"%s\": axis %d of the input is named: expand keeps it with -1", n->name,
                                  d - lead);
            }
            out->sym[d] = x->sym[d - lead];
        }
        return 0;
    }
    case GRAPH_NODE_PAD:
        for (int d = 0; d < x->rank; d++)
            if (x->sym[d] && (n->pad_before[d] || n->pad_after[d]))
                return named_error(g, i, 0, e, "axis", d, x->sym[d], "it is padded: a padded axis may not be named");
        return 0;
    case GRAPH_NODE_REDUCE_AXES: {
        int o = 0;
        for (int d = 0; d < x->rank; d++) {
            if (n->reduce_axes & (1u << d)) {
                if (x->sym[d])
                    return named_error(g, i, 0, e, "axis", d, x->sym[d], "it is reduced: a reduced axis may not be named");
                if (n->keepdim)
                    out->sym[o++] = 0;
            } else {
                out->sym[o++] = x->sym[d];
            }
        }
        return 0;
    }
    case GRAPH_NODE_SOFTMAX_AXIS:
        if (x->sym[n->axis])
            return named_error(g, i, 0, e, "axis", n->axis, x->sym[n->axis], "softmax runs along it: it may not be named");
        memcpy(out->sym, x->sym, sizeof(out->sym));
        return 0;
    }
    return 0;
}

static int infer_node(graph *g, int i, const cJSON *attrs, proto_error *e);

int graph__infer_node(graph *g, int i, const cJSON *attrs, proto_error *e)
{
    int r = infer_node(g, i, attrs, e);
    if (r == 0 && g->n_dims > 0)
        r = names_node(g, i, attrs, e);
    return r;
}

static int infer_node(graph *g, int i, const cJSON *attrs, proto_error *e)
{
    /* Layout copies and batchnorm compute in floats; an integer tensor may only be reshaped (a
     * view) before a gather or a cast reads it. */
    const graph_node_class cls = g->nodes[i].cls;
    if (cls == GRAPH_NODE_TRANSPOSE || cls == GRAPH_NODE_SLICE || cls == GRAPH_NODE_BATCHNORM)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (tuner_dtype_is_int(g->tensors[g->nodes[i].in[k]].t.dtype)) {
                /* (a prefix sliced to a name, as position ids are, is a view: checked once inferred) */
                int r = cls == GRAPH_NODE_SLICE && g->n_dims > 0 ? infer_slice(g, i, attrs, e) : -1;
                if (r == 0 && graph__named_prefix_slice(g, i))
                    return 0;
                if (r < -1)
                    return r;
                return input_error(g, i, k, e,
                                   "an integer tensor (i32, i64) is read only by gather, embedding, index_select and "
                                   "cast nodes, or reshaped (or sliced to a name: [0, name) of its memory's start)");
            }
    /* FP8 tensors are decoded to f32 by the elementwise kernels (steps, cast), are a matmul's a
     * and b (scaled: docs/api.md's FP8 matmul), and may be reshaped (a view) or transposed (which
     * the partitioner folds into the matmul reading it; a copy of FP8 is refused there); every
     * other kernel computes from f16, bf16 or f32. */
    if (cls != GRAPH_NODE_STEP && cls != GRAPH_NODE_RESHAPE && cls != GRAPH_NODE_TRANSPOSE)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (tuner_dtype_is_fp8(g->tensors[g->nodes[i].in[k]].t.dtype) &&
                !(cls == GRAPH_NODE_KERNEL && g->nodes[i].op.kind == TUNER_OP_MATMUL && k < 2))
                return input_error(g, i, k, e,
                                   "an FP8 tensor (f8e4m3, f8e5m2) is read only by cast and elementwise step nodes "
                                   "(which decode it to f32), as a matmul's a and b, or reshaped and transposed; cast "
                                   "it to f16, bf16 or f32 first");
    switch (g->nodes[i].cls) {
    case GRAPH_NODE_KERNEL:
        return infer_kernel(g, i, attrs, e);
    case GRAPH_NODE_STEP:
        return infer_step(g, i, attrs, e);
    case GRAPH_NODE_RESHAPE:
        return g->n_dims > 0 ? infer_reshape_named(g, i, attrs, e) : infer_reshape(g, i, attrs, e);
    case GRAPH_NODE_TRANSPOSE:
        return infer_transpose(g, i, attrs, e);
    case GRAPH_NODE_SLICE:
        return infer_slice(g, i, attrs, e);
    case GRAPH_NODE_BATCHNORM:
        return infer_batchnorm(g, i, attrs, e);
    case GRAPH_NODE_EXPAND:
        return infer_expand(g, i, attrs, e);
    case GRAPH_NODE_PAD:
        return infer_pad(g, i, attrs, e);
    case GRAPH_NODE_REDUCE_AXES:
    case GRAPH_NODE_SOFTMAX_AXIS:
        break; /* set by infer_kernel, never by the parse */
    }
    return -EINVAL;
}
