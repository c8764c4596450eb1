/* graph/infer.c - checks each node of a graph and infers its output's shape and dtype.
 *
 * A kernel op's node becomes a /v1/kernels request (graph__op_request's format) and goes through
 * proto_kernel_request_parse: one validator for both APIs, so a node is accepted exactly when
 * the same kernel request would be, and its output is what the kernel will write. Its errors
 * are re-addressed to the node ("inputs[1].shape" -> "nodes[4].inputs[1]"). Steps follow numpy
 * broadcasting; layout ops and batchnorm have their own rules here. */
#include "graph/graph_int.h"

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
        if (x != y && x != 1 && y != 1)
            return false;
        o.shape[r - i] = x == 1 ? y : x;
    }
    o.rank = r;
    *out = o;
    return true;
}

static void shape_text(const tuner_tensor *t, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < t->rank && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (n < len)
        snprintf(buf + n, len - n, "]");
}

/* ---- kernel requests -------------------------------------------------------------------------- */

static cJSON *tensor_json(const tuner_tensor *t)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *shape = cJSON_AddArrayToObject(o, "shape");
    for (int i = 0; i < t->rank; i++)
        cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[i]));
    cJSON_AddStringToObject(o, "dtype", tuner_dtype_name(t->dtype));
    if (t->align && t->align < 16)
        cJSON_AddNumberToObject(o, "align", t->align);
    return o;
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

static cJSON *attrs_json(const tuner_op *op)
{
    cJSON *a = cJSON_CreateObject();
    switch (op->kind) {
    case TUNER_OP_MATMUL:
        cJSON_AddBoolToObject(a, "trans_a", op->attrs.matmul.trans_a);
        cJSON_AddBoolToObject(a, "trans_b", op->attrs.matmul.trans_b);
        cJSON_AddBoolToObject(a, "allow_tf32", op->attrs.matmul.allow_tf32);
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
    case TUNER_OP_REDUCE:
        cJSON_AddStringToObject(a, "kind", tuner_reduce_name(op->attrs.reduce.kind));
        cJSON_AddNumberToObject(a, "axis", op->attrs.reduce.axis);
        cJSON_AddBoolToObject(a, "keepdim", op->attrs.reduce.keepdim);
        break;
    case TUNER_OP_COPY: {
        cJSON *shape = cJSON_AddArrayToObject(a, "shape");
        cJSON *strides = cJSON_AddArrayToObject(a, "strides");
        for (int d = 0; d < op->output.rank; d++) {
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)op->output.shape[d]));
            cJSON_AddItemToArray(strides, cJSON_CreateNumber((double)op->attrs.copy.strides[d]));
        }
        cJSON_AddNumberToObject(a, "offset", (double)op->attrs.copy.offset);
        break;
    }
    case TUNER_OP_CONCAT:
        cJSON_AddNumberToObject(a, "axis", op->attrs.concat.axis);
        break;
    case TUNER_OP_GATHER:
        cJSON_AddNumberToObject(a, "axis", op->attrs.gather.axis);
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

char *graph__op_request(const tuner_op *op)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "op", tuner_op_name(op->kind));
    cJSON *ins = cJSON_AddArrayToObject(o, "inputs");
    for (int i = 0; i < op->n_inputs; i++)
        cJSON_AddItemToArray(ins, tensor_json(&op->inputs[i]));
    cJSON_AddItemToObject(o, "attrs", attrs_json(op));
    cJSON *pro = cJSON_AddArrayToObject(o, "prologue");
    for (int i = 0; i < op->n_anchor_inputs; i++)
        for (int k = 0; k < op->prologue[i].n; k++)
            cJSON_AddItemToArray(pro, step_json(&op->prologue[i].steps[k], i));
    cJSON *epi = cJSON_AddArrayToObject(o, "epilogue");
    for (int k = 0; k < op->epilogue.n; k++)
        cJSON_AddItemToArray(epi, step_json(&op->epilogue.steps[k], -1));
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
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

static int infer_kernel(graph *g, int i, const cJSON *attrs, proto_error *e)
{
    graph_node *n = &g->nodes[i];
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return -ENOMEM;
    cJSON_AddStringToObject(o, "op", tuner_op_name(n->op.kind));
    cJSON *ins = cJSON_AddArrayToObject(o, "inputs");
    for (int k = 0; k < n->n_in; k++)
        cJSON_AddItemToArray(ins, tensor_json(&g->tensors[n->in[k]].t));
    if (n->alias) {
        cJSON *ga = NULL;
        int r = gather_alias_attrs(g, i, attrs, &ga, e);
        if (r < 0) {
            cJSON_Delete(o);
            return r;
        }
        cJSON_AddItemToObject(o, "attrs", ga);
    } else if (attrs)
        cJSON_AddItemToObject(o, "attrs", cJSON_Duplicate(attrs, true));
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
    int r = proto_kernel_request_parse(body, strlen(body), rq, &pe);
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

static int infer_step(graph *g, int i, const cJSON *attrs, proto_error *e)
{
    graph_node *n = &g->nodes[i];
    tuner_ew_kind k = n->step.kind;
    bool binary = TUNER_EW_IS_BINARY(k);
    int r;
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
            return proto_fail(e, 422, "unknown_dtype", field, "%s must be f16, bf16 or f32",
                               field);
        if (tuner_dtype_is_int(n->step.dtype))
            return proto_fail(e, 422, "invalid_field", field, "%s must be f16, bf16 or f32: no kernel writes %s",
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
        shape_text(&out, sa, sizeof(sa));
        shape_text(b, sb, sizeof(sb));
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
        shape_text(x, sa, sizeof(sa));
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

static int infer_slice(graph *g, int i, const cJSON *attrs, proto_error *e)
{
    static const char *const keys[] = {"starts", "ends", "axes", "steps", NULL};
    graph_node *n = &g->nodes[i];
    const tuner_tensor *x = &g->tensors[n->in[0]].t;
    int64_t starts[TUNER_MAX_RANK], ends[TUNER_MAX_RANK], axes[TUNER_MAX_RANK], steps[TUNER_MAX_RANK];
    int ns, ne, na, nst, r;
    if ((r = need_inputs(g, i, 1, 1, e)) < 0 || (r = check_attr_keys(g, i, attrs, keys, e)) < 0 ||
        (r = attr_list(g, i, attrs, "starts", TUNER_MAX_RANK, starts, &ns, e)) < 0 ||
        (r = attr_list(g, i, attrs, "ends", TUNER_MAX_RANK, ends, &ne, e)) < 0 ||
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
            shape_text(t, sa, sizeof(sa));
            snprintf(msg, sizeof(msg), "%s has shape %s; channel axis %d needs [%lld]", what[k],
                     sa, a, (long long)x->shape[a]);
            return input_error(g, i, k, e, msg);
        }
    }
    n->axis = a;
    g->tensors[n->out].t = *x;
    return 0;
}

int graph__infer_node(graph *g, int i, const cJSON *attrs, proto_error *e)
{
    /* Layout copies and batchnorm compute in floats; an integer tensor may only be reshaped (a
     * view) before a gather or a cast reads it. */
    const graph_node_class cls = g->nodes[i].cls;
    if (cls == GRAPH_NODE_TRANSPOSE || cls == GRAPH_NODE_SLICE || cls == GRAPH_NODE_BATCHNORM)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (tuner_dtype_is_int(g->tensors[g->nodes[i].in[k]].t.dtype))
                return input_error(g, i, k, e,
                                   "an integer tensor (i32, i64) is read only by gather, embedding, index_select and "
                                   "cast nodes, or reshaped");
    switch (g->nodes[i].cls) {
    case GRAPH_NODE_KERNEL:
        return infer_kernel(g, i, attrs, e);
    case GRAPH_NODE_STEP:
        return infer_step(g, i, attrs, e);
    case GRAPH_NODE_RESHAPE:
        return infer_reshape(g, i, attrs, e);
    case GRAPH_NODE_TRANSPOSE:
        return infer_transpose(g, i, attrs, e);
    case GRAPH_NODE_SLICE:
        return infer_slice(g, i, attrs, e);
    case GRAPH_NODE_BATCHNORM:
        return infer_batchnorm(g, i, attrs, e);
    }
    return -EINVAL;
}
