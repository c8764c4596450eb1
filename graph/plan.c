/* graph/plan.c - placing intermediates in one arena, the plan's JSON, the graph's canonical text.
 *
 * Placement: each intermediate of the forward steps lives from the step that writes it to the
 * last step that reads it (a workspace: its own step). Buffers are placed largest first, each at
 * the lowest aligned offset where it overlaps no placed buffer whose lifetime meets its own -
 * the greedy first-fit that TVM's and XLA's planners start from; exact minimisation is NP-hard
 * and this stays within a few percent on chains like these. The prepare phase runs before any
 * forward step, so its workspaces take the arena from offset 0; its results are constants,
 * kept one after another for as long as the plan lives. */
#include "graph/graph_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

static uint64_t align_up(uint64_t x)
{
    return (x + GRAPH_ARENA_ALIGN - 1) / GRAPH_ARENA_ALIGN * GRAPH_ARENA_ALIGN;
}

static int root_of(const graph_plan *p, int t)
{
    while (p->tensors[t].view_of >= 0)
        t = p->tensors[t].view_of;
    return t;
}

static int add_workspace(graph_plan *p, int k, uint64_t bytes)
{
    if (graph__reserve((void **)&p->tensors, &p->cap_tensors, p->n_tensors, sizeof(*p->tensors)) < 0)
        return -ENOMEM;
    graph_plan_tensor *t = &p->tensors[p->n_tensors];
    memset(t, 0, sizeof(*t));
    snprintf(t->name, sizeof(t->name), "#workspace%d", k);
    t->kind = GRAPH_T_VALUE;
    t->view_of = -1;
    t->producer = k;
    t->region = GRAPH_REGION_WORKSPACE;
    t->bytes = bytes;
    t->t.dtype = TUNER_F32;
    return p->n_tensors++;
}

int graph_plan_workspace_of(const graph_plan *p, int k)
{
    for (int t = 0; t < p->n_tensors; t++)
        if (p->tensors[t].region == GRAPH_REGION_WORKSPACE && p->tensors[t].producer == k)
            return t;
    return -1;
}

typedef struct placed {
    int t;
    uint64_t bytes;
} placed;

static int by_size_desc(const void *a, const void *b)
{
    const placed *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    return x->t - y->t;
}

int graph_plan_place(graph_plan *p, const uint64_t *workspace)
{
    /* Forget an earlier placement (a cached plan is placed again for each set of kernels). */
    int n = p->n_tensors;
    while (n > 0 && p->tensors[n - 1].region == GRAPH_REGION_WORKSPACE)
        n--;
    p->n_tensors = n;
    if (p->n_kernels < 0 || p->n_tensors < 0)
        return -EINVAL;
    int *step_of = malloc(sizeof(int) * ((size_t)p->n_kernels + 1));
    if (!step_of)
        return -ENOMEM;
    for (int s = 0; s < p->n_kernels; s++)
        step_of[p->order[s]] = s;
    for (int t = 0; t < n; t++) {
        graph_plan_tensor *pt = &p->tensors[t];
        pt->first = pt->last = -1;
        pt->offset = 0;
        pt->bytes = 0;
        pt->region = GRAPH_REGION_CALLER;
        if (pt->view_of >= 0 || pt->kind != GRAPH_T_VALUE || pt->is_output || pt->producer < 0)
            continue;
        pt->region = p->kernels[pt->producer].prepare ? GRAPH_REGION_CONSTANTS : GRAPH_REGION_ARENA;
        pt->bytes = graph_tensor_bytes(&pt->t);
        pt->first = pt->last = step_of[pt->producer];
    }
    for (int k = 0; k < p->n_kernels; k++)
        for (int j = 0; j < p->kernels[k].n_in; j++) {
            graph_plan_tensor *rt = &p->tensors[root_of(p, p->kernels[k].in[j])];
            if (rt->region == GRAPH_REGION_ARENA && step_of[k] > rt->last)
                rt->last = step_of[k];
        }
    for (int k = 0; k < p->n_kernels; k++) {
        if (!workspace[k])
            continue;
        int w = add_workspace(p, k, workspace[k]);
        if (w < 0) {
            free(step_of);
            return w;
        }
        p->tensors[w].first = p->tensors[w].last = step_of[k];
    }
    free(step_of);

    /* Constants: one after another. */
    p->constants_bytes = 0;
    for (int t = 0; t < p->n_tensors; t++)
        if (p->tensors[t].region == GRAPH_REGION_CONSTANTS) {
            p->tensors[t].offset = p->constants_bytes;
            p->constants_bytes += align_up(p->tensors[t].bytes);
        }

    /* The arena: forward intermediates and forward workspaces, first fit by size. */
    placed *list = malloc(sizeof(placed) * ((size_t)p->n_tensors + 1));
    if (!list)
        return -ENOMEM;
    int m = 0;
    uint64_t prepare_ws = 0;
    for (int t = 0; t < p->n_tensors; t++) {
        graph_plan_tensor *pt = &p->tensors[t];
        bool ws = pt->region == GRAPH_REGION_WORKSPACE;
        if (ws && p->kernels[pt->producer].prepare) {
            pt->offset = 0; /* before every forward step: the whole arena is free */
            if (align_up(pt->bytes) > prepare_ws)
                prepare_ws = align_up(pt->bytes);
        } else if (ws || pt->region == GRAPH_REGION_ARENA) {
            list[m++] = (placed){t, align_up(pt->bytes)};
        }
    }
    qsort(list, (size_t)m, sizeof(*list), by_size_desc);
    uint64_t arena = prepare_ws;
    for (int i = 0; i < m; i++) {
        graph_plan_tensor *pt = &p->tensors[list[i].t];
        uint64_t off = 0;
        /* Move past every placed, lifetime-overlapping buffer that the candidate range hits,
         * until none does. The placed set is small (a plan's intermediates). */
        for (bool moved = true; moved;) {
            moved = false;
            for (int j = 0; j < i; j++) {
                const graph_plan_tensor *q = &p->tensors[list[j].t];
                bool live_together = q->first <= pt->last && pt->first <= q->last;
                bool overlap = off < q->offset + list[j].bytes && q->offset < off + list[i].bytes;
                if (live_together && overlap) {
                    off = q->offset + list[j].bytes;
                    moved = true;
                }
            }
        }
        pt->offset = off;
        if (off + list[i].bytes > arena)
            arena = off + list[i].bytes;
    }
    p->arena_bytes = arena;
    free(list);
    return 0;
}

/* ---- canonical text ----------------------------------------------------------------------------- */

/* A shape: numbers, and on a named axis its names ("n", "b*s", g's dims). */
static void shape_json(const graph *g, cJSON *o, const char *key, const tuner_tensor *t)
{
    cJSON *a = cJSON_AddArrayToObject(o, key);
    for (int i = 0; i < t->rank; i++) {
        char name[80];
        if (t->sym[i])
            cJSON_AddItemToArray(a, cJSON_CreateString(graph_sym_text(g, t->sym[i], name, sizeof(name))));
        else
            cJSON_AddItemToArray(a, cJSON_CreateNumber((double)t->shape[i]));
    }
}

/* The graph's "dims": each name's range (with its hints when `hints`), in the dims' order. */
static void dims_json(const graph *g, cJSON *o, bool hints)
{
    if (g->n_dims == 0)
        return;
    cJSON *dims = cJSON_AddObjectToObject(o, "dims");
    for (int k = 0; k < g->n_dims; k++) {
        cJSON *d = cJSON_AddObjectToObject(dims, g->dims[k].name);
        cJSON_AddNumberToObject(d, "min", (double)g->dims[k].min);
        cJSON_AddNumberToObject(d, "max", (double)g->dims[k].max);
        cJSON_AddNumberToObject(d, "multiple_of", (double)g->dims[k].multiple_of);
        if (hints && g->dyn.n_hints[k] > 0) {
            cJSON *h = cJSON_AddArrayToObject(d, "hints");
            for (int j = 0; j < g->dyn.n_hints[k]; j++)
                cJSON_AddItemToArray(h, cJSON_CreateNumber((double)g->dyn.hints[k][j]));
        }
    }
}

static cJSON *tensor_decl(const graph *g, const char *name, const tuner_tensor *t)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", name);
    shape_json(g, o, "shape", t);
    cJSON_AddStringToObject(o, "dtype", tuner_dtype_name(t->dtype));
    return o;
}

char *graph_canonical(const graph *g)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    /* The names and their ranges key the plan (one arena at max, tables over the ranges); the
     * hints too, as the kernels' requests carry them. */
    dims_json(g, o, true);
    cJSON *ins = cJSON_AddArrayToObject(o, "inputs");
    cJSON *ws = cJSON_AddArrayToObject(o, "weights");
    for (int t = 0; t < g->n_inputs + g->n_weights; t++)
        cJSON_AddItemToArray(t < g->n_inputs ? ins : ws, tensor_decl(g, g->tensors[t].name, &g->tensors[t].t));
    cJSON *nodes = cJSON_AddArrayToObject(o, "nodes");
    for (int i = 0; i < g->n_nodes; i++) {
        const graph_node *n = &g->nodes[i];
        cJSON *no = cJSON_CreateObject();
        cJSON_AddItemToArray(nodes, no);
        cJSON_AddStringToObject(no, "name", n->name);
        cJSON_AddNumberToObject(no, "class", n->cls);
        cJSON *in = cJSON_AddArrayToObject(no, "inputs");
        for (int k = 0; k < n->n_in; k++)
            cJSON_AddItemToArray(in, cJSON_CreateString(g->tensors[n->in[k]].name));
        cJSON_AddStringToObject(no, "output", g->tensors[n->out].name);
        switch (n->cls) {
        case GRAPH_NODE_KERNEL: {
            char *op = tuner_op_canonical_json(&n->op);
            cJSON_AddStringToObject(no, "op", op ? op : "");
            free(op);
            break;
        }
        case GRAPH_NODE_STEP:
            cJSON_AddStringToObject(no, "op", tuner_ew_name(n->step.kind));
            cJSON_AddNumberToObject(no, "value", n->step.scalar);
            if (n->step.kind == TUNER_EW_CLAMP) /* its max (an open bound prints as null) */
                cJSON_AddNumberToObject(no, "value2", n->step.scalar2);
            if (isinf(n->step.scalar)) /* masked_fill's -inf and inf: both print as null */
                cJSON_AddStringToObject(no, "value_inf", n->step.scalar < 0 ? "-inf" : "inf");
            cJSON_AddStringToObject(no, "dtype", tuner_dtype_name(n->step.dtype));
            break;
        default:
            /* Every attribute of a layout node is in its result's shape but these. */
            shape_json(g, no, "shape", &g->tensors[n->out].t);
            cJSON *a = cJSON_AddArrayToObject(no, "attrs");
            for (int d = 0; d < TUNER_MAX_RANK; d++) {
                cJSON_AddItemToArray(a, cJSON_CreateNumber(n->perm[d]));
                cJSON_AddItemToArray(a, cJSON_CreateNumber((double)n->start[d]));
                cJSON_AddItemToArray(a, cJSON_CreateNumber((double)n->stride[d]));
            }
            cJSON_AddNumberToObject(no, "axis", n->axis);
            cJSON_AddNumberToObject(no, "eps", n->eps);
            /* issue 37's nodes: what their result's shape does not say (absent for the others,
             * so their texts and graph keys stay as they were). */
            if (n->cls == GRAPH_NODE_PAD) {
                cJSON *pads = cJSON_AddArrayToObject(no, "pads");
                for (int d = 0; d < TUNER_MAX_RANK; d++) {
                    cJSON_AddItemToArray(pads, cJSON_CreateNumber((double)n->pad_before[d]));
                    cJSON_AddItemToArray(pads, cJSON_CreateNumber((double)n->pad_after[d]));
                }
                cJSON_AddNumberToObject(no, "value", n->pad_value);
            } else if (n->cls == GRAPH_NODE_REDUCE_AXES) {
                cJSON_AddNumberToObject(no, "axes", n->reduce_axes);
                cJSON_AddStringToObject(no, "kind", tuner_reduce_name(n->reduce_kind));
                cJSON_AddBoolToObject(no, "keepdim", n->keepdim);
            } else if (n->cls == GRAPH_NODE_SOFTMAX_AXIS) {
                cJSON_AddBoolToObject(no, "log", n->log);
            }
            break;
        }
    }
    cJSON *outs = cJSON_AddArrayToObject(o, "outputs");
    for (int k = 0; k < g->n_outputs; k++)
        cJSON_AddItemToArray(outs, cJSON_CreateString(g->tensors[g->outputs[k]].name));
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* ---- the plan's JSON ------------------------------------------------------------------------------ */

static const char *region_name(int region)
{
    switch (region) {
    case GRAPH_REGION_ARENA:
    case GRAPH_REGION_WORKSPACE:
        return "arena";
    case GRAPH_REGION_CONSTANTS:
        return "constants";
    default:
        return "caller";
    }
}

/* Kernel k's step; w is its workspace tensor or -1. */
static cJSON *step_json(const graph_plan *p, int k, int w, const cJSON *kernel_set)
{
    const graph_kernel *gk = &p->kernels[k];
    cJSON *s = cJSON_CreateObject();
    cJSON *nodes = cJSON_AddArrayToObject(s, "nodes");
    for (int j = 0; j < gk->n_nodes; j++) {
        int ci = gk->nodes[j];
        const char *name = p->node_names && ci >= 0 && ci < p->n_node_names ? p->node_names[ci] : "?";
        cJSON_AddItemToArray(nodes, cJSON_CreateString(name));
    }
    cJSON *b = cJSON_AddObjectToObject(s, "bindings");
    for (int j = 0; j < gk->n_in; j++) {
        char key[16];
        snprintf(key, sizeof(key), "input%d", j);
        cJSON_AddStringToObject(b, key, p->tensors[root_of(p, gk->in[j])].name);
    }
    cJSON_AddStringToObject(b, "output", p->tensors[root_of(p, gk->out)].name);
    if (w >= 0)
        cJSON_AddStringToObject(b, "workspace", p->tensors[w].name);
    cJSON *rq = cJSON_Parse(gk->request);
    if (rq)
        cJSON_AddItemToObject(s, "request", rq);
    cJSON *ks = kernel_set ? cJSON_Duplicate(kernel_set, true) : NULL;
    if (ks)
        cJSON_AddItemToObject(s, "kernel_set", ks);
    else
        cJSON_AddNullToObject(s, "kernel_set");
    return s;
}

int graph_plan_render(const graph_request *rq, const graph_plan *p, const cJSON *const *kernel_sets,
                      const char *graph_key, char **ret)
{
    const graph *g = &rq->g;
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return -ENOMEM;
    char arch[16];
    cJSON_AddStringToObject(o, "graph_key", graph_key);
    cJSON_AddStringToObject(o, "arch", tuner_target_name(&rq->opt.target, arch, sizeof(arch)));
    cJSON_AddStringToObject(o, "tune", tuner_tune_name(rq->opt.tune));
    dims_json(g, o, false);
    cJSON *ins = cJSON_AddArrayToObject(o, "inputs");
    cJSON *ws = cJSON_AddArrayToObject(o, "weights");
    for (int t = 0; t < g->n_inputs + g->n_weights; t++)
        cJSON_AddItemToArray(t < g->n_inputs ? ins : ws, tensor_decl(g, g->tensors[t].name, &g->tensors[t].t));
    cJSON *outs = cJSON_AddArrayToObject(o, "outputs");
    for (int k = 0; k < g->n_outputs; k++) {
        const graph_tensor *t = &g->tensors[g->outputs[k]];
        cJSON_AddItemToArray(outs, tensor_decl(g, t->name, &t->t));
    }
    cJSON_AddNumberToObject(o, "arena_bytes", (double)p->arena_bytes);
    cJSON_AddNumberToObject(o, "constants_bytes", (double)p->constants_bytes);
    cJSON *bufs = cJSON_AddArrayToObject(o, "buffers");
    for (int t = 0; t < p->n_tensors; t++) {
        const graph_plan_tensor *pt = &p->tensors[t];
        if (pt->region == GRAPH_REGION_CALLER || pt->view_of >= 0)
            continue;
        cJSON *b = cJSON_CreateObject();
        cJSON_AddItemToArray(bufs, b);
        cJSON_AddStringToObject(b, "name", pt->name);
        cJSON_AddStringToObject(b, "region", region_name(pt->region));
        cJSON_AddNumberToObject(b, "offset", (double)pt->offset);
        cJSON_AddNumberToObject(b, "bytes", (double)pt->bytes);
        if (pt->region != GRAPH_REGION_WORKSPACE) {
            shape_json(g, b, "shape", &pt->t);
            cJSON_AddStringToObject(b, "dtype", tuner_dtype_name(pt->t.dtype));
        }
    }
    cJSON *prep = cJSON_AddArrayToObject(o, "prepare");
    cJSON *steps = cJSON_AddArrayToObject(o, "steps");
    /* Each kernel's workspace tensor, found in one pass (not one search per kernel). */
    int *ws_of = malloc(sizeof(int) * ((size_t)p->n_kernels + 1));
    if (!ws_of) {
        cJSON_Delete(o);
        return -ENOMEM;
    }
    for (int k = 0; k < p->n_kernels; k++)
        ws_of[k] = -1;
    for (int t = 0; t < p->n_tensors; t++)
        if (p->tensors[t].region == GRAPH_REGION_WORKSPACE && p->tensors[t].producer >= 0 &&
            p->tensors[t].producer < p->n_kernels && ws_of[p->tensors[t].producer] < 0)
            ws_of[p->tensors[t].producer] = t;
    for (int s = 0; s < p->n_kernels; s++) {
        int k = p->order[s];
        cJSON_AddItemToArray(s < p->n_prepare ? prep : steps, step_json(p, k, ws_of[k], kernel_sets[k]));
    }
    free(ws_of);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!text)
        return -ENOMEM;
    *ret = text;
    return 0;
}
