/* graph/parse.c - POST /v1/graphs bodies -> a validated graph (graph.h).
 *
 * Strict like the kernel request language: unknown fields, duplicates and wrong types are
 * refused, every error names its field ("nodes[3].inputs[1]"). Nodes may come in any order; they
 * are sorted so that each follows the producers of its inputs, and a cycle is reported at a node
 * on it. A kernel op's node is validated by proto_kernel_request_parse on a request built from the
 * node, so its attributes, shape rules and inferred output are exactly /v1/kernels'. */
#include "graph/graph_int.h"
#include "proto/dims.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

static int type_error(proto_error *e, const char *field, const char *what)
{
    return proto_fail(e, 400, "invalid_field", field, "%s must be %s", field, what);
}

static int json_int(const cJSON *v, const char *field, int64_t lo, int64_t hi, int64_t *ret,
                    proto_error *e)
{
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble))
        return type_error(e, field, "an integer");
    double d = v->valuedouble;
    if (d < (double)lo || d > (double)hi)
        return proto_fail(e, 422, "invalid_field", field, "%s must be between %lld and %lld",
                           field, (long long)lo, (long long)hi);
    *ret = (int64_t)d;
    return 0;
}

/* ---- names ------------------------------------------------------------------------------------ */

/* Names are printable ASCII without quotes, backslashes and '#' ("#" marks names the plan
 * makes, so they never collide with a client's). */
static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > GRAPH_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x21 || c > 0x7e || c == '"' || c == '\\' || c == '#')
            return false;
    }
    return true;
}

static int json_name(const cJSON *v, const char *field, const char **ret, proto_error *e)
{
    if (!cJSON_IsString(v) || !v->valuestring)
        return type_error(e, field, "a string");
    if (!name_ok(v->valuestring))
        return proto_fail(e, 422, "invalid_field", field,
                           "%s must be 1 to %d printable ASCII characters without spaces, "
                           "quotes, backslashes or '#'", field, GRAPH_NAME_MAX);
    *ret = v->valuestring;
    return 0;
}

/* Open-addressing map from tensor names to indices (FNV-1a). */
typedef struct name_map {
    size_t cap;
    int *slot; /* tensor index + 1, 0 = empty */
} name_map;

static uint64_t fnv(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static int map_find(const name_map *m, const graph *g, const char *name)
{
    for (size_t i = fnv(name) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        int v = m->slot[i];
        if (!v)
            return -1;
        if (strcmp(g->tensors[v - 1].name, name) == 0)
            return v - 1;
    }
}

static void map_put(name_map *m, const graph *g, int idx)
{
    size_t i = fnv(g->tensors[idx].name) & (m->cap - 1);
    while (m->slot[i])
        i = (i + 1) & (m->cap - 1);
    m->slot[i] = idx + 1;
}

/* ---- tensors ---------------------------------------------------------------------------------- */

/* dims: the graph's named dimensions as an op's (proto/dims.c parses names against it). */
static int parse_decl(const cJSON *o, const char *path, const tuner_op *dims, graph_tensor *ret, proto_error *e)
{
    static const char *const keys[] = {"name", "shape", "dtype", NULL};
    char field[128];
    int r;
    if (!cJSON_IsObject(o))
        return type_error(e, path, "an object {\"name\": ..., \"shape\": [...], \"dtype\": ...}");
    if ((r = proto_check_keys(o, keys, path, e)) < 0)
        return r;
    const char *name = NULL;
    snprintf(field, sizeof(field), "%.80s.name", path);
    const cJSON *nv = cJSON_GetObjectItemCaseSensitive(o, "name");
    if (!nv)
        return type_error(e, field, "given");
    if ((r = json_name(nv, field, &name, e)) < 0)
        return r;
    snprintf(ret->name, sizeof(ret->name), "%s", name);

    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(o, "shape");
    snprintf(field, sizeof(field), "%.80s.shape", path);
    if (!shape)
        return type_error(e, field, "given");
    if (!cJSON_IsArray(shape))
        return type_error(e, field, "an array of integers");
    int rank = cJSON_GetArraySize(shape);
    if (rank < 1 || rank > TUNER_MAX_RANK)
        return proto_fail(e, 422, "invalid_field", field, "%s must have rank 1 to %d", field,
                           TUNER_MAX_RANK);
    int i = 0;
    for (const cJSON *d = shape->child; d; d = d->next, i++) {
        snprintf(field, sizeof(field), "%.80s.shape[%d]", path, i);
        if (cJSON_IsNumber(d) && d->valuedouble < 0)
            return proto_fail(e, 422, "invalid_field", field,
                               "%s is negative: a dynamic size is named (\"n\", or \"b*s\") and its range "
                               "given in the top-level \"dims\" (docs/graphs.md, named dimensions)", field);
        if (cJSON_IsString(d) && ret->kind == GRAPH_T_WEIGHT)
            return proto_fail(e, 422, "invalid_field", field,
                               "%s is the name \"%.40s\": a weight's shape is fixed (names stand on the "
                               "graph's inputs)", field, d->valuestring);
        if (cJSON_IsString(d)) {
            /* Any axis of an input: whether a kernel takes the name there is its request's
             * question (graph/partition.c), asked of proto like every kernel's. */
            if ((r = proto__parse_named_axis(d, field, dims, 0, &ret->t.sym[i], &ret->t.shape[i], e)) < 0)
                return r;
            continue;
        }
        if ((r = json_int(d, field, 1, PROTO_MAX_DIM, &ret->t.shape[i], e)) < 0)
            return r;
    }
    ret->t.rank = rank;
    int64_t n = 1;
    for (i = 0; i < rank; i++) {
        n *= ret->t.shape[i];
        if (n > PROTO_MAX_NUMEL) {
            snprintf(field, sizeof(field), "%.80s.shape", path);
            return proto_fail(e, 422, "limit_exceeded", field, "%s has more than 2^31 elements",
                               field);
        }
    }
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(o, "dtype");
    snprintf(field, sizeof(field), "%.80s.dtype", path);
    if (!dt)
        return type_error(e, field, "given");
    if (!cJSON_IsString(dt) || !dt->valuestring)
        return type_error(e, field, "a string");
    if (tuner_dtype_parse(dt->valuestring, &ret->t.dtype) < 0)
        return proto_fail(e, 422, "unknown_dtype", field,
                           "unknown dtype \"%.32s\" (f16, bf16, f32, i32, i64, f8e4m3, f8e5m2)", dt->valuestring);
    /* FP8 tensors (f8e4m3, f8e5m2): which nodes read them is infer.c's (infer_node). */
    ret->t.align = 16;
    return 0;
}

/* ---- node ops --------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    graph_node_class cls;
} layout_ops[] = {
    {"reshape", GRAPH_NODE_RESHAPE},     {"transpose", GRAPH_NODE_TRANSPOSE},
    {"slice", GRAPH_NODE_SLICE},
    {"batchnorm", GRAPH_NODE_BATCHNORM},
    {"expand", GRAPH_NODE_EXPAND},       {"pad", GRAPH_NODE_PAD},
};

/* Names of kernel ops under their PyTorch names: embedding(weight, ids) is a gather along axis
 * 0, index_select(x, index) one with a 1-D index. */
static const char *const gather_aliases[] = {"embedding", "index_select"};

static int node_class(const char *op, graph_node *n)
{
    for (size_t i = 0; i < sizeof(gather_aliases) / sizeof(gather_aliases[0]); i++)
        if (strcmp(op, gather_aliases[i]) == 0) {
            n->cls = GRAPH_NODE_KERNEL;
            n->op.kind = TUNER_OP_GATHER;
            n->alias = gather_aliases[i];
            return 0;
        }
    tuner_op_kind k;
    if (strcmp(op, "log_softmax") == 0) { /* softmax with its log flag (graph/infer.c) */
        n->cls = GRAPH_NODE_KERNEL;
        n->op.kind = TUNER_OP_SOFTMAX;
        n->log = true;
        return 0;
    }
    if (tuner_op_parse(op, &k) == 0 && k != TUNER_OP_ELEMENTWISE) {
        n->cls = GRAPH_NODE_KERNEL;
        n->op.kind = k;
        return 0;
    }
    tuner_ew_kind s;
    /* gelu_tanh is the canonical JSON's spelling: a node says gelu with approximate "tanh". */
    if (strcmp(op, "gelu_tanh") != 0 && tuner_ew_parse(op, &s) == 0) {
        n->cls = GRAPH_NODE_STEP;
        n->step = (tuner_ew_step){.kind = s, .operand = -1, .dtype = TUNER_F32};
        /* Parameters start at their defaults (infer reads the node's attrs over them). */
        const tuner_ew_param *prm;
        int np = tuner_ew_params(s, &prm);
        for (int j = 0; j < np; j++)
            *tuner_ew_slot(&n->step, j) = prm[j].dflt;
        return 0;
    }
    /* relu6 and hardtanh: clamps with preset bounds. */
    bool fixed = false;
    if (tuner_ew_alias(op, &n->step, &fixed) == 0) {
        n->cls = GRAPH_NODE_STEP;
        n->step.dtype = TUNER_F32;
        n->step_fixed = fixed;
        return 0;
    }
    for (size_t i = 0; i < sizeof(layout_ops) / sizeof(layout_ops[0]); i++)
        if (strcmp(op, layout_ops[i].name) == 0) {
            n->cls = layout_ops[i].cls;
            return 0;
        }
    return -1;
}

/* Every op a node may name, for the errors' lists and suggestions. */
static const char *const known_ops[] = {
    "matmul", "conv2d", "softmax", "layernorm", "rmsnorm", "reduce", "copy", "concat", "pool2d", "add",
    "sub", "mul", "div", "max", "min", "relu", "gelu", "silu", "sigmoid", "tanh", "exp", "neg",
    "abs", "square", "sqrt", "rsqrt", "scale", "shift", "cast", "clamp", "relu6", "hardtanh",
    "hardswish", "hardsigmoid", "leaky_relu", "erf", "pow", "reshape", "transpose", "slice",
    "batchnorm", "log_softmax", "expand", "pad",
    "gather", "embedding", "index_select", "attention",
    "log", "eq", "ne", "lt", "le", "gt", "ge", "where", "masked_fill",
    NULL};

/* ---- the parse -------------------------------------------------------------------------------- */

typedef struct parse_ctx {
    graph *g;
    name_map map;
    const cJSON **attrs;  /* per client node */
    tuner_op *dims;       /* the graph's "dims" as proto/dims.c reads them (n_dims, dims) */
    proto_error *e;
} parse_ctx;

static int add_tensor(parse_ctx *c, const graph_tensor *t, const char *field)
{
    graph *g = c->g;
    int prev = map_find(&c->map, g, t->name);
    if (prev >= 0) {
        if (g->tensors[prev].kind == GRAPH_T_VALUE)
            return proto_fail(c->e, 422, "invalid_graph", field,
                               "tensor \"%s\" is produced twice (also by node \"%s\")", t->name,
                               g->nodes[g->tensors[prev].producer].name);
        return proto_fail(c->e, 422, "invalid_graph", field,
                           "tensor \"%s\" is declared twice (it is already a graph %s)", t->name,
                           g->tensors[prev].kind == GRAPH_T_INPUT ? "input" : "weight");
    }
    if (g->n_tensors >= GRAPH_MAX_TENSORS)
        return proto_fail(c->e, 422, "limit_exceeded", field, "more than %d tensors",
                           GRAPH_MAX_TENSORS);
    g->tensors[g->n_tensors] = *t;
    map_put(&c->map, g, g->n_tensors);
    g->n_tensors++;
    return 0;
}

static int parse_decls(parse_ctx *c, const cJSON *arr, const char *key, graph_tensor_kind kind)
{
    if (!arr)
        return kind == GRAPH_T_INPUT ? type_error(c->e, "graph.inputs", "given") : 0;
    char path[96];
    snprintf(path, sizeof(path), "graph.%s", key);
    if (!cJSON_IsArray(arr))
        return type_error(c->e, path, "an array of tensors");
    int i = 0;
    for (const cJSON *o = arr->child; o; o = o->next, i++) {
        snprintf(path, sizeof(path), "graph.%s[%d]", key, i);
        graph_tensor t = {.kind = kind, .producer = -1};
        int r = parse_decl(o, path, c->dims, &t, c->e);
        if (r < 0)
            return r;
        if ((r = add_tensor(c, &t, path)) < 0)
            return r;
    }
    return 0;
}

/* First pass over one node: its op, name, output (declared as a value) and the names of its
 * inputs (resolved once every output is known). */
static int parse_node_head(parse_ctx *c, const cJSON *o, int idx)
{
    static const char *const keys[] = {"name", "op", "inputs", "outputs", "attrs", NULL};
    graph *g = c->g;
    graph_node *n = &g->nodes[idx];
    char path[48], field[96];
    int r;
    snprintf(path, sizeof(path), "nodes[%d]", idx);
    if (!cJSON_IsObject(o))
        return type_error(c->e, path, "an object {\"op\": ..., \"inputs\": [...], \"outputs\": [...]}");
    if ((r = proto_check_keys(o, keys, path, c->e)) < 0)
        return r;

    const cJSON *nv = cJSON_GetObjectItemCaseSensitive(o, "name");
    if (nv) {
        const char *name;
        snprintf(field, sizeof(field), "%s.name", path);
        if ((r = json_name(nv, field, &name, c->e)) < 0)
            return r;
        snprintf(n->name, sizeof(n->name), "%s", name);
    } else {
        snprintf(n->name, sizeof(n->name), "%s", path);
    }

    const cJSON *opv = cJSON_GetObjectItemCaseSensitive(o, "op");
    snprintf(field, sizeof(field), "%s.op", path);
    if (!opv)
        return type_error(c->e, field, "given");
    if (!cJSON_IsString(opv) || !opv->valuestring)
        return type_error(c->e, field, "a string");
    if (node_class(opv->valuestring, n) < 0) {
        const char *near = proto_closest_name(opv->valuestring, known_ops);
        if (near)
            return proto_fail(c->e, 422, "unknown_op", field,
                               "unknown op \"%.32s\"; did you mean \"%s\"?", opv->valuestring,
                               near);
        /* As many names as the message holds: whole names, then "...". */
        char list[sizeof(c->e->message)];
        const size_t room = sizeof(c->e->message) - 64;
        size_t len = 0;
        for (int k = 0; known_ops[k]; k++) {
            if (len + strlen(known_ops[k]) + 2 > room - 12) {
                snprintf(list + len, sizeof(list) - len, ", ... (docs/graphs.md)");
                break;
            }
            len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s", k ? ", " : "",
                                    known_ops[k]);
        }
        return proto_fail(c->e, 422, "unknown_op", field, "unknown op \"%.32s\" (known: %s)",
                           opv->valuestring, list);
    }

    const cJSON *attrs = cJSON_GetObjectItemCaseSensitive(o, "attrs");
    snprintf(field, sizeof(field), "%s.attrs", path);
    if (attrs && !cJSON_IsObject(attrs))
        return type_error(c->e, field, "an object");
    c->attrs[idx] = attrs;

    const cJSON *outs = cJSON_GetObjectItemCaseSensitive(o, "outputs");
    snprintf(field, sizeof(field), "%s.outputs", path);
    if (!outs)
        return type_error(c->e, field, "given");
    if (!cJSON_IsArray(outs) || cJSON_GetArraySize(outs) != 1)
        return proto_fail(c->e, 422, "invalid_field", field,
                           "%s must name exactly one tensor (every op has one result)", field);
    const char *oname;
    snprintf(field, sizeof(field), "%s.outputs[0]", path);
    if ((r = json_name(outs->child, field, &oname, c->e)) < 0)
        return r;
    graph_tensor t = {.kind = GRAPH_T_VALUE, .producer = idx};
    snprintf(t.name, sizeof(t.name), "%s", oname);
    if ((r = add_tensor(c, &t, field)) < 0)
        return r;
    n->out = g->n_tensors - 1;
    return 0;
}

static int parse_node_inputs(parse_ctx *c, const cJSON *o, int idx)
{
    graph *g = c->g;
    graph_node *n = &g->nodes[idx];
    char field[96];
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(o, "inputs");
    snprintf(field, sizeof(field), "nodes[%d].inputs", idx);
    if (!ins)
        return type_error(c->e, field, "given");
    if (!cJSON_IsArray(ins))
        return type_error(c->e, field, "an array of tensor names");
    int cnt = cJSON_GetArraySize(ins);
    if (cnt < 1 || cnt > GRAPH_MAX_NODE_INPUTS)
        return proto_fail(c->e, 422, "invalid_field", field, "%s must name 1 to %d tensors",
                           field, GRAPH_MAX_NODE_INPUTS);
    int i = 0;
    for (const cJSON *v = ins->child; v; v = v->next, i++) {
        const char *name;
        int r;
        snprintf(field, sizeof(field), "nodes[%d].inputs[%d]", idx, i);
        if ((r = json_name(v, field, &name, c->e)) < 0)
            return r;
        int t = map_find(&c->map, g, name);
        if (t < 0)
            return proto_fail(c->e, 422, "invalid_graph", field,
                               "node \"%s\" reads tensor \"%s\", which is no graph input or "
                               "weight and no node's output", n->name, name);
        if (t == n->out)
            return proto_fail(c->e, 422, "invalid_graph", field,
                               "node \"%s\" reads its own output \"%s\" (a cycle)", n->name, name);
        n->in[i] = t;
    }
    n->n_in = cnt;
    return 0;
}

/* Sorts nodes so every node follows its inputs' producers (Kahn's algorithm, the client's order
 * among ready nodes). A cycle is reported at the first node left on it. */
static int sort_nodes(parse_ctx *c, const cJSON **node_json)
{
    graph *g = c->g;
    int n = g->n_nodes;
    int *indeg = calloc((size_t)n, sizeof(int));
    int *order = malloc(sizeof(int) * (size_t)(n ? n : 1));
    /* consumers of each node, as a CSR list */
    int *start = calloc((size_t)n + 1, sizeof(int));
    int *list = NULL;
    int r = 0;
    if (!indeg || !order || !start) {
        r = -ENOMEM;
        goto out;
    }
    int edges = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            int p = g->tensors[g->nodes[i].in[k]].producer;
            if (p >= 0) {
                indeg[i]++;
                start[p + 1]++;
                edges++;
            }
        }
    for (int i = 0; i < n; i++)
        start[i + 1] += start[i];
    list = malloc(sizeof(int) * (size_t)(edges ? edges : 1));
    int *fill = calloc((size_t)n, sizeof(int));
    if (!list || !fill) {
        free(fill);
        r = -ENOMEM;
        goto out;
    }
    for (int i = 0; i < n; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            int p = g->tensors[g->nodes[i].in[k]].producer;
            if (p >= 0)
                list[start[p] + fill[p]++] = i;
        }
    free(fill);
    /* A min-heap would keep the client's order exactly; a scan per step is O(n^2) worst case,
     * so ready nodes are taken from a FIFO seeded in client order instead. */
    int head = 0, tail = 0;
    for (int i = 0; i < n; i++)
        if (!indeg[i])
            order[tail++] = i;
    while (head < tail) {
        int v = order[head++];
        for (int k = start[v]; k < start[v + 1]; k++)
            if (--indeg[list[k]] == 0)
                order[tail++] = list[k];
    }
    if (tail < n) {
        int bad = 0;
        while (bad < n && !indeg[bad])
            bad++;
        int slot = 0;
        for (int k = 0; k < g->nodes[bad].n_in; k++) {
            int p = g->tensors[g->nodes[bad].in[k]].producer;
            if (p >= 0 && indeg[p]) {
                slot = k;
                break;
            }
        }
        char field[64];
        snprintf(field, sizeof(field), "nodes[%d].inputs[%d]", bad, slot);
        r = proto_fail(c->e, 422, "invalid_graph", field,
                        "the graph has a cycle through node \"%s\" (input \"%s\")",
                        g->nodes[bad].name, g->tensors[g->nodes[bad].in[slot]].name);
        goto out;
    }
    /* Permute nodes (and their JSON and attrs) into the order; fix producers. */
    graph_node *nodes = malloc(sizeof(graph_node) * (size_t)(n ? n : 1));
    const cJSON **attrs = malloc(sizeof(*attrs) * (size_t)(n ? n : 1));
    const cJSON **json = malloc(sizeof(*json) * (size_t)(n ? n : 1));
    if (!nodes || !attrs || !json) {
        free(nodes);
        free(attrs);
        free(json);
        r = -ENOMEM;
        goto out;
    }
    for (int i = 0; i < n; i++) {
        nodes[i] = g->nodes[order[i]];
        attrs[i] = c->attrs[order[i]];
        json[i] = node_json[order[i]];
        g->node_index[i] = order[i];
        g->tensors[nodes[i].out].producer = i;
    }
    memcpy(g->nodes, nodes, sizeof(graph_node) * (size_t)n);
    memcpy(c->attrs, attrs, sizeof(*attrs) * (size_t)n);
    memcpy(node_json, json, sizeof(*json) * (size_t)n);
    free(nodes);
    free(attrs);
    free(json);
out:
    free(indeg);
    free(order);
    free(start);
    free(list);
    return r;
}

static int parse_outputs(parse_ctx *c, const cJSON *outs);

/* The top-level "dims" and "sizes", by the parser of /v1/kernels (proto/dims.c): the same
 * grammar, the same errors. */
static int parse_dims(const cJSON *root, parse_ctx *c, graph_request *rq)
{
    graph *g = c->g;
    int r;
    if ((r = proto__parse_dims(root, c->dims, &g->dyn, c->e)) < 0)
        return r;
    g->n_dims = c->dims->n_dims;
    memcpy(g->dims, c->dims->dims, sizeof(g->dims));
    proto_dynamic sz;
    memset(&sz, 0, sizeof(sz));
    if ((r = proto__parse_sizes(root, c->dims, &sz, c->e)) < 0)
        return r;
    rq->has_sizes = sz.has_sizes;
    memcpy(rq->sizes, sz.sizes, sizeof(rq->sizes));
    return 0;
}

/* Every declared name stands on some input's axis (values only carry the inputs' names). */
static int check_dims_used(parse_ctx *c)
{
    const graph *g = c->g;
    unsigned used = 0;
    for (int t = 0; t < g->n_inputs; t++)
        for (int d = 0; d < g->tensors[t].t.rank; d++)
            used |= g->tensors[t].t.sym[d];
    for (int k = 0; k < g->n_dims; k++)
        if (!(used & (1u << k))) {
            char field[64];
            snprintf(field, sizeof(field), "dims.%s", g->dims[k].name);
            return proto_fail(c->e, 422, "invalid_field", field,
                              "%s is declared but no graph input's shape names it", field);
        }
    return 0;
}

static int parse_graph(const cJSON *root, graph_request *rq, proto_error *e)
{
    static const char *const top_keys[] = {"graph", "arch", "tune", "wait", "priority", "budget",
                                           "dims", "sizes", NULL};
    static const char *const graph_keys[] = {"inputs", "weights", "nodes", "outputs", NULL};
    graph *g = &rq->g;
    int r;
    if (!cJSON_IsObject(root))
        return proto_fail(e, 400, "invalid_json", "", "the body must be a JSON object");
    if ((r = proto_check_keys(root, top_keys, "", e)) < 0)
        return r;
    if ((r = proto_parse_job_options(root, &rq->opt, e)) < 0)
        return r;
    const cJSON *gj = cJSON_GetObjectItemCaseSensitive(root, "graph");
    if (!gj)
        return type_error(e, "graph", "given");
    if (!cJSON_IsObject(gj))
        return type_error(e, "graph", "an object");
    if ((r = proto_check_keys(gj, graph_keys, "graph", e)) < 0)
        return r;
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(gj, "nodes");
    if (!nodes)
        return type_error(e, "graph.nodes", "given");
    if (!cJSON_IsArray(nodes))
        return type_error(e, "graph.nodes", "an array of nodes");
    int n_nodes = cJSON_GetArraySize(nodes);
    if (n_nodes < 1 || n_nodes > GRAPH_MAX_NODES)
        return proto_fail(e, 422, "limit_exceeded", "graph.nodes",
                           "a graph has 1 to %d nodes", GRAPH_MAX_NODES);

    g->tensors = calloc(GRAPH_MAX_TENSORS, sizeof(graph_tensor));
    g->nodes = calloc((size_t)n_nodes, sizeof(graph_node));
    g->node_index = calloc((size_t)n_nodes, sizeof(int));
    parse_ctx c = {.g = g, .e = e, .map = {.cap = 2 * GRAPH_MAX_TENSORS}};
    c.map.slot = calloc(c.map.cap, sizeof(int));
    c.attrs = calloc((size_t)n_nodes, sizeof(*c.attrs));
    c.dims = calloc(1, sizeof(*c.dims));
    const cJSON **node_json = calloc((size_t)n_nodes, sizeof(*node_json));
    if (!g->tensors || !g->nodes || !g->node_index || !c.map.slot || !c.attrs || !c.dims || !node_json) {
        r = -ENOMEM;
        goto out;
    }
    g->n_nodes = n_nodes;
    if ((r = parse_dims(root, &c, rq)) < 0)
        goto out;
    if ((r = parse_decls(&c, cJSON_GetObjectItemCaseSensitive(gj, "inputs"), "inputs",
                         GRAPH_T_INPUT)) < 0)
        goto out;
    g->n_inputs = g->n_tensors;
    if ((r = check_dims_used(&c)) < 0)
        goto out;
    if ((r = parse_decls(&c, cJSON_GetObjectItemCaseSensitive(gj, "weights"), "weights",
                         GRAPH_T_WEIGHT)) < 0)
        goto out;
    g->n_weights = g->n_tensors - g->n_inputs;
    int i = 0;
    for (const cJSON *o = nodes->child; o; o = o->next, i++) {
        node_json[i] = o;
        if ((r = parse_node_head(&c, o, i)) < 0)
            goto out;
    }
    for (i = 0; i < n_nodes; i++)
        if ((r = parse_node_inputs(&c, node_json[i], i)) < 0)
            goto out;
    for (i = 0; i < g->n_tensors; i++)
        g->tensors[i].n_uses = 0;
    for (i = 0; i < n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            g->tensors[g->nodes[i].in[k]].n_uses++;
    for (i = 0; i < n_nodes; i++)
        g->node_index[i] = i;
    if ((r = sort_nodes(&c, node_json)) < 0)
        goto out;

    for (i = 0; i < n_nodes; i++)
        if ((r = graph__infer_node(g, i, c.attrs[i], e)) < 0)
            goto out;
    if ((r = parse_outputs(&c, cJSON_GetObjectItemCaseSensitive(gj, "outputs"))) < 0)
        goto out;
    /* Integer tensors are read (gather's ids, a cast's input), never written: no kernel makes
     * one, so none can be an output. */
    for (i = 0; i < g->n_outputs; i++)
        if (tuner_dtype_is_int(g->tensors[g->outputs[i]].t.dtype)) {
            char field[48];
            snprintf(field, sizeof(field), "graph.outputs[%d]", i);
            r = proto_fail(e, 422, "invalid_graph", field,
                           "output \"%s\" is an integer tensor (%s); no kernel writes one (cast it to a float)",
                           g->tensors[g->outputs[i]].name, tuner_dtype_name(g->tensors[g->outputs[i]].t.dtype));
            goto out;
        }
out:
    free(c.map.slot);
    free(c.attrs);
    free(c.dims);
    free(node_json);
    return r;
}

static int parse_outputs(parse_ctx *c, const cJSON *outs)
{
    graph *g = c->g;
    char field[48];
    if (!outs)
        return type_error(c->e, "graph.outputs", "given");
    if (!cJSON_IsArray(outs))
        return type_error(c->e, "graph.outputs", "an array of tensor names");
    int n = cJSON_GetArraySize(outs);
    if (n < 1 || n > GRAPH_MAX_TENSORS)
        return proto_fail(c->e, 422, "invalid_field", "graph.outputs",
                           "graph.outputs must name at least one tensor");
    g->outputs = calloc((size_t)n, sizeof(int));
    if (!g->outputs)
        return -ENOMEM;
    int i = 0;
    for (const cJSON *v = outs->child; v; v = v->next, i++) {
        const char *name;
        int r;
        snprintf(field, sizeof(field), "graph.outputs[%d]", i);
        if ((r = json_name(v, field, &name, c->e)) < 0)
            return r;
        int t = map_find(&c->map, g, name);
        if (t < 0)
            return proto_fail(c->e, 422, "invalid_graph", field,
                               "output \"%s\" is no tensor of the graph", name);
        if (g->tensors[t].is_output)
            return proto_fail(c->e, 422, "invalid_graph", field,
                               "output \"%s\" is named twice", name);
        g->tensors[t].is_output = true;
        g->outputs[g->n_outputs++] = t;
    }
    return 0;
}

int graph_request_parse(const char *body, size_t len, graph_request *ret, proto_error *ret_err)
{
    if (!ret || !ret_err || (!body && len))
        return -EINVAL;
    memset(ret, 0, sizeof(*ret));
    /* body{graph{nodes[node{attrs{list[ is six deep; PROTO_MAX_JSON_DEPTH leaves two spare. */
    cJSON *root = NULL;
    int r = proto_parse_json_body(body, len, &root, ret_err);
    if (r == 0) {
        r = parse_graph(root, ret, ret_err);
        if (r == -ENOMEM)
            proto_fail(ret_err, 500, "internal", "", "out of memory");
    }
    cJSON_Delete(root);
    if (r < 0)
        graph_request_free(ret);
    return r;
}

size_t graph_bytes(const graph *g)
{
    /* The tensors array is GRAPH_MAX_TENSORS long until graph_compact trims it; only the
     * tensors written are resident. */
    return graph__chunk(sizeof(graph_tensor) * (size_t)g->n_tensors) +
           (g->nodes ? graph__chunk(sizeof(graph_node) * (size_t)g->n_nodes) : 0) +
           (g->node_index ? graph__chunk(sizeof(int) * (size_t)g->n_nodes) : 0) +
           graph__chunk(sizeof(int) * (size_t)(g->n_outputs ? g->n_outputs : 1));
}

void graph_compact(graph *g)
{
    free(g->nodes);
    free(g->node_index);
    g->nodes = NULL;
    g->node_index = NULL;
    graph_tensor *t = realloc(g->tensors, sizeof(*t) * (size_t)(g->n_tensors ? g->n_tensors : 1));
    if (t)
        g->tensors = t;
}

void graph_request_free(graph_request *rq)
{
    if (!rq)
        return;
    free(rq->g.tensors);
    free(rq->g.nodes);
    free(rq->g.node_index);
    free(rq->g.outputs);
    memset(&rq->g, 0, sizeof(rq->g));
}
