/* graph/partition.c - a validated graph -> fused kernels in execution order (graph_partition).
 *
 * The graph is first lowered to primitives over the plan's tensors: anchors (the kernel ops),
 * injective steps, views (reshape: the same memory under another shape) and layout copies
 * (transpose, concat, slice). An inference batchnorm is lowered to what it computes: a scale
 * s = gamma * rsqrt(var + eps) and a shift t = beta - mean * s per channel (steps over the
 * statistics, so when those are weights they run once, in the prepare phase) and y = x * s + t
 * (two steps that fuse into the producer of x like any epilogue: a conv's batchnorm costs two
 * per-channel loads in the conv's store). A transpose of a matmul operand's last two axes
 * becomes the matmul's trans_a/trans_b; other transposes and slices become copy kernels (a strided
 * read) that grows an epilogue like an anchor; concat is a kernel op, an anchor like matmul, and
 * so is gather (embedding, index_select), whose epilogue takes the position embeddings' add.
 *
 * Then kernels are grown greedily, in the graph's order. An anchor takes the single-use
 * injective producers of its inputs as prologues and the single-use injective consumers of its
 * result as its epilogue; each remaining step starts an elementwise kernel that grows the same
 * way. Every growth is checked by proto_kernel_request_parse on the kernel's request, and kept
 * only when the request is valid and infers the result's shape and dtype the graph expects: a
 * fusion the request language cannot express is simply not made, so the steps stay separate
 * kernels and the plan stays correct. A kernel reading only weights (or prepared values) never
 * grows into one that reads run-time inputs, so the prepare phase stays separate. */
#include "graph/graph_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
    PRIM_ANCHOR = 0,
    PRIM_STEP,
    PRIM_VIEW,
    PRIM_TRANSPOSE,
    PRIM_SLICE,
    PRIM_EXPAND, /* a copy with zero strides, unless every reader broadcasts (fold_expands) */
    PRIM_PAD,    /* a padded copy */
} prim_kind;

typedef struct prim {
    prim_kind kind;
    int node;            /* the graph node (dependency order) it computes part of */
    tuner_op op;         /* ANCHOR */
    tuner_ew_step step;  /* STEP: a binary step reads in[1] */
    int n_in;
    int in[GRAPH_MAX_NODE_INPUTS];
    int out;
    int kernel;          /* -1 until a kernel computes it */
    bool live;
    /* VIEW: of the first elements only (a slice to a name, named_prefix_slice), not a reshape:
     * the rewrites that see through views stop at it */
    bool prefix;
    int perm[TUNER_MAX_RANK]; /* TRANSPOSE: output axis k reads input axis perm[k] */
    /* further graph nodes it computes (an attention or a GELU rewritten from its parts) */
    int n_also;
    int also[16];
} prim;

typedef struct part {
    const graph *g;
    const tuner_target *target;
    graph_plan *p;
    prim *prims;
    int n_prims, cap_prims;
    int *producer; /* plan tensor -> prim, -1 */
    int *uses;     /* plan tensor -> live prim input slots reading it */
    signed char *is_const; /* plan tensor -> constant()'s answer: 1, 0, or -1 not yet known */
    proto_error *e;
    proto_kernel_request *scratch;
    tuner_op *flat;  /* a graph with names: a kernel's op as its request presents it */
    proto_error why; /* a graph with names: why proto refused the last request (for the node's error) */
    proto_error fp8_why; /* why proto refused an FP8 matmul's request (arch, layout) */
} part;

uint64_t graph_tensor_bytes(const tuner_tensor *t)
{
    return (uint64_t)tuner_tensor_numel(t) * (uint64_t)tuner_dtype_size(t->dtype);
}

/* ---- plan tensors and primitives ---------------------------------------------------------------- */

int graph__reserve(void **items, int *cap, int n, size_t size)
{
    if (n < *cap)
        return 0;
    int ncap = *cap ? 2 * *cap : 16;
    void *grown = realloc(*items, size * (size_t)ncap);
    if (!grown)
        return -ENOMEM;
    *items = grown;
    *cap = ncap;
    return 0;
}

static int new_tensor(graph_plan *p, const char *name, const tuner_tensor *t, graph_tensor_kind kind)
{
    if (graph__reserve((void **)&p->tensors, &p->cap_tensors, p->n_tensors, sizeof(*p->tensors)) < 0)
        return -ENOMEM;
    graph_plan_tensor *pt = &p->tensors[p->n_tensors];
    memset(pt, 0, sizeof(*pt));
    snprintf(pt->name, sizeof(pt->name), "%s", name);
    pt->t = *t;
    pt->t.align = 16;
    pt->kind = kind;
    pt->view_of = -1;
    pt->producer = -1;
    pt->first = pt->last = -1;
    return p->n_tensors++;
}

static prim *new_prim(part *c, prim_kind kind, int node, int out)
{
    if (graph__reserve((void **)&c->prims, &c->cap_prims, c->n_prims, sizeof(*c->prims)) < 0)
        return NULL;
    prim *pr = &c->prims[c->n_prims++];
    memset(pr, 0, sizeof(*pr));
    pr->kind = kind;
    pr->node = node;
    pr->out = out;
    pr->kernel = -1;
    return pr;
}

static int root_of(const graph_plan *p, int t)
{
    while (p->tensors[t].view_of >= 0)
        t = p->tensors[t].view_of;
    return t;
}

/* A step prim: out = kind(a[, b]). */
static int add_step(part *c, int node, tuner_ew_kind kind, double scalar, tuner_dtype dt, int a,
                    int b, int out)
{
    prim *pr = new_prim(c, PRIM_STEP, node, out);
    if (!pr)
        return -ENOMEM;
    pr->step = (tuner_ew_step){.kind = kind, .operand = -1, .scalar = scalar, .dtype = dt};
    pr->in[0] = a;
    pr->n_in = 1;
    if (b >= 0)
        pr->in[pr->n_in++] = b;
    return 0;
}

/* A value made by lowering, named after its node ("bn1#scale"). */
static int made_tensor(part *c, int node, const char *what, const tuner_tensor *t)
{
    char name[GRAPH_NAME_MAX + 32];
    snprintf(name, sizeof(name), "%.128s#%.24s", c->g->nodes[node].name, what);
    return new_tensor(c->p, name, t, GRAPH_T_VALUE);
}

/* y = x * s + t with s = gamma * rsqrt(var + eps), t = beta - mean * s, per channel. */
static int lower_batchnorm(part *c, int i)
{
    const graph_node *n = &c->g->nodes[i];
    const graph_plan_tensor *T = c->p->tensors;
    int x = n->in[0], gamma = n->in[1], beta = n->in[2], mean = n->in[3], var = n->in[4];
    tuner_tensor cvec = T[var].t, f32vec = T[var].t;
    f32vec.dtype = TUNER_F32;
    int v1, v2, v3, s, u1, u2, u3, t, r;
    if ((v1 = made_tensor(c, i, "var_eps", &cvec)) < 0 || (v2 = made_tensor(c, i, "inv_std", &cvec)) < 0 ||
        (v3 = made_tensor(c, i, "scale_v", &cvec)) < 0 || (s = made_tensor(c, i, "scale", &f32vec)) < 0)
        return -ENOMEM;
    cvec = c->p->tensors[mean].t;
    if ((u1 = made_tensor(c, i, "mean_scaled", &cvec)) < 0 ||
        (u2 = made_tensor(c, i, "neg_mean_scaled", &cvec)) < 0 ||
        (u3 = made_tensor(c, i, "shift_v", &cvec)) < 0 || (t = made_tensor(c, i, "shift", &f32vec)) < 0)
        return -ENOMEM;
    if ((r = add_step(c, i, TUNER_EW_SHIFT, n->eps, 0, var, -1, v1)) < 0 ||
        (r = add_step(c, i, TUNER_EW_RSQRT, 0, 0, v1, -1, v2)) < 0 ||
        (r = add_step(c, i, TUNER_EW_MUL, 0, 0, v2, gamma, v3)) < 0 ||
        (r = add_step(c, i, TUNER_EW_CAST, 0, TUNER_F32, v3, -1, s)) < 0 ||
        (r = add_step(c, i, TUNER_EW_MUL, 0, 0, mean, s, u1)) < 0 ||
        (r = add_step(c, i, TUNER_EW_NEG, 0, 0, u1, -1, u2)) < 0 ||
        (r = add_step(c, i, TUNER_EW_ADD, 0, 0, u2, beta, u3)) < 0 ||
        (r = add_step(c, i, TUNER_EW_CAST, 0, TUNER_F32, u3, -1, t)) < 0)
        return r;
    /* The per-channel vectors as seen from x: [C, 1, ..., 1] for a channel axis before the last. */
    /* A copy, not a pointer: adding tensors below may move the array. */
    const tuner_tensor xv = c->p->tensors[x].t, *xt = &xv;
    int sv = s, tv = t;
    if (n->axis != xt->rank - 1) {
        tuner_tensor view = f32vec;
        view.rank = xt->rank - n->axis;
        view.shape[0] = xt->shape[n->axis];
        for (int k = 1; k < view.rank; k++)
            view.shape[k] = 1;
        if ((sv = made_tensor(c, i, "scale_c", &view)) < 0 || (tv = made_tensor(c, i, "shift_c", &view)) < 0)
            return -ENOMEM;
        c->p->tensors[sv].view_of = s;
        c->p->tensors[tv].view_of = t;
        prim *pv = new_prim(c, PRIM_VIEW, i, sv);
        if (!pv)
            return -ENOMEM;
        pv->in[0] = s, pv->n_in = 1;
        if (!(pv = new_prim(c, PRIM_VIEW, i, tv)))
            return -ENOMEM;
        pv->in[0] = t, pv->n_in = 1;
    }
    int y1 = made_tensor(c, i, "scaled", xt);
    if (y1 < 0)
        return -ENOMEM;
    if ((r = add_step(c, i, TUNER_EW_MUL, 0, 0, x, sv, y1)) < 0 ||
        (r = add_step(c, i, TUNER_EW_ADD, 0, 0, y1, tv, n->out)) < 0)
        return r;
    return 0;
}

static bool same_shape(const tuner_tensor *a, const tuner_tensor *b);

/* An anchor prim computing op (inputs[0] = plan tensor x, output = plan tensor out). */
static int add_anchor(part *c, int node, const tuner_op *op, int x, int out)
{
    prim *pr = new_prim(c, PRIM_ANCHOR, node, out);
    if (!pr)
        return -ENOMEM;
    pr->op = *op;
    pr->in[0] = x;
    pr->n_in = 1;
    return 0;
}

/* A reduce over axes that are not one range: one reduce kernel per range of consecutive axes,
 * the last range first (the earlier axes keep their indices, with keepdim or without). A max
 * is exact in any order. A sum or mean sums in fp32 throughout - every partial sum is kept as
 * fp32 (each kernel but the last ends in a cast to f32), so 16-bit inputs neither round nor
 * overflow between the kernels - and the last kernel scales by 1 / (the count of every reduced
 * element) and casts back: one rounding of the mean, not one per range as a mean of means. */
static int lower_reduce_axes(part *c, int i)
{
    const graph_node *n = &c->g->nodes[i];
    const tuner_tensor x = c->p->tensors[n->in[0]].t;
    int starts[TUNER_MAX_RANK], lens[TUNER_MAX_RANK], nr = 0;
    int64_t count = 1;
    for (int d = 0; d < x.rank; d++) {
        if (!(n->reduce_axes & (1u << d)))
            continue;
        count *= x.shape[d];
        if (nr && starts[nr - 1] + lens[nr - 1] == d) {
            lens[nr - 1]++;
        } else {
            starts[nr] = d;
            lens[nr++] = 1;
        }
    }
    const bool exact = n->reduce_kind == TUNER_REDUCE_MAX;
    int cur = n->in[0];
    tuner_tensor t = x;
    for (int k = nr - 1; k >= 0; k--) {
        tuner_op op;
        memset(&op, 0, sizeof(op));
        op.kind = TUNER_OP_REDUCE;
        op.n_inputs = op.n_anchor_inputs = 1;
        op.inputs[0] = t;
        op.attrs.reduce.kind = exact ? TUNER_REDUCE_MAX : TUNER_REDUCE_SUM;
        op.attrs.reduce.axis = starts[k];
        op.attrs.reduce.naxes = lens[k];
        op.attrs.reduce.keepdim = n->keepdim;
        tuner_tensor o = {.rank = 0, .dtype = t.dtype, .align = 16};
        for (int d = 0; d < t.rank; d++)
            if (d < starts[k] || d >= starts[k] + lens[k]) {
                o.sym[o.rank] = t.sym[d];
                o.shape[o.rank++] = t.shape[d];
            } else if (n->keepdim) {
                o.shape[o.rank++] = 1;
            }
        if (o.rank == 0)
            o.shape[o.rank++] = 1;
        op.output = o;
        tuner_ew_chain *epi = &op.epilogue;
        if (k > 0 && !exact && o.dtype != TUNER_F32) {
            epi->steps[epi->n++] = (tuner_ew_step){.kind = TUNER_EW_CAST, .operand = -1, .dtype = TUNER_F32};
            o.dtype = TUNER_F32;
        }
        if (k == 0 && n->reduce_kind == TUNER_REDUCE_MEAN)
            epi->steps[epi->n++] =
                (tuner_ew_step){.kind = TUNER_EW_SCALE, .operand = -1, .scalar = 1.0 / (double)count};
        if (k == 0 && o.dtype != x.dtype) {
            epi->steps[epi->n++] = (tuner_ew_step){.kind = TUNER_EW_CAST, .operand = -1, .dtype = x.dtype};
            o.dtype = x.dtype;
        }
        int out = n->out;
        if (k > 0) {
            char what[24];
            snprintf(what, sizeof(what), "partial%d", nr - k);
            if ((out = made_tensor(c, i, what, &o)) < 0)
                return -ENOMEM;
        }
        int r = add_anchor(c, i, &op, cur, out);
        if (r < 0)
            return r;
        cur = out;
        t = o;
    }
    return 0;
}

/* softmax / log_softmax over axis a before the last. When every axis after a has size 1, x is
 * a view [..., size of a] and the softmax its last axis (no copy). Otherwise a transpose moves a
 * last, the row kernel runs, and the inverse transpose brings it back: two copy kernels (the
 * second takes the softmax's consumers as its epilogue). The row kernel reads and writes rows
 * contiguously, which a column softmax over a strided axis would not; the copies cost two passes
 * over the tensor. */
static int lower_softmax_axis(part *c, int i)
{
    const graph_node *n = &c->g->nodes[i];
    const tuner_tensor x = c->p->tensors[n->in[0]].t;
    const int a = n->axis;
    bool trailing_ones = true;
    for (int d = a + 1; d < x.rank; d++)
        trailing_ones = trailing_ones && x.shape[d] == 1;
    tuner_op op;
    memset(&op, 0, sizeof(op));
    op.kind = TUNER_OP_SOFTMAX;
    op.n_inputs = op.n_anchor_inputs = 1;
    op.attrs.softmax.log = n->log;
    if (trailing_ones) {
        tuner_tensor v = x;
        v.rank = a + 1;
        int vin = made_tensor(c, i, "rows", &v), vout = made_tensor(c, i, "softmax", &v);
        if (vin < 0 || vout < 0)
            return -ENOMEM;
        c->p->tensors[vin].view_of = n->in[0];
        c->p->tensors[n->out].view_of = vout;
        prim *pv = new_prim(c, PRIM_VIEW, i, vin);
        if (!pv)
            return -ENOMEM;
        pv->in[0] = n->in[0], pv->n_in = 1;
        op.inputs[0] = op.output = v;
        int r = add_anchor(c, i, &op, vin, vout);
        if (r < 0)
            return r;
        if (!(pv = new_prim(c, PRIM_VIEW, i, n->out)))
            return -ENOMEM;
        pv->in[0] = vout, pv->n_in = 1;
        return 0;
    }
    int perm[TUNER_MAX_RANK], inv[TUNER_MAX_RANK], k = 0;
    for (int d = 0; d < x.rank; d++)
        if (d != a)
            perm[k++] = d;
    perm[k] = a;
    tuner_tensor tt = x;
    for (int d = 0; d < x.rank; d++) {
        inv[perm[d]] = d;
        tt.shape[d] = x.shape[perm[d]];
        tt.sym[d] = x.sym[perm[d]];
    }
    int t1 = made_tensor(c, i, "moved", &tt), t2 = made_tensor(c, i, "softmax", &tt);
    if (t1 < 0 || t2 < 0)
        return -ENOMEM;
    prim *pt = new_prim(c, PRIM_TRANSPOSE, i, t1);
    if (!pt)
        return -ENOMEM;
    pt->in[0] = n->in[0], pt->n_in = 1;
    memcpy(pt->perm, perm, sizeof(perm));
    op.inputs[0] = op.output = tt;
    int r = add_anchor(c, i, &op, t1, t2);
    if (r < 0)
        return r;
    if (!(pt = new_prim(c, PRIM_TRANSPOSE, i, n->out)))
        return -ENOMEM;
    pt->in[0] = t2, pt->n_in = 1;
    memcpy(pt->perm, inv, sizeof(inv));
    return 0;
}

/* Whether node i is a slice to a name (infer_slice: [0, name) of a fixed axis) whose result is
 * the first elements of its input's memory - every axis before the sliced one of size 1, every
 * other axis whole - and whose input is (a view of) a graph input or weight: memory the caller
 * holds whole, which the view reads a prefix of. (A value's producer writes the memory it is
 * given: a view of fewer elements could not be its home, home_outputs would make it one.) */
static bool named_prefix_slice(const part *c, int i)
{
    const graph_node *n = &c->g->nodes[i];
    return n->cls == GRAPH_NODE_SLICE && !c->g->tensors[n->out].is_output && graph__named_prefix_slice(c->g, i) &&
           c->p->tensors[root_of(c->p, n->in[0])].kind != GRAPH_T_VALUE;
}

static int lower(part *c)
{
    const graph *g = c->g;
    for (int t = 0; t < g->n_tensors; t++) {
        int k = new_tensor(c->p, g->tensors[t].name, &g->tensors[t].t, g->tensors[t].kind);
        if (k < 0)
            return k;
        c->p->tensors[k].is_output = g->tensors[t].is_output;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const graph_node *n = &g->nodes[i];
        prim *pr;
        switch (n->cls) {
        case GRAPH_NODE_BATCHNORM: {
            int r = lower_batchnorm(c, i);
            if (r < 0)
                return r;
            continue;
        }
        case GRAPH_NODE_KERNEL:
            pr = new_prim(c, PRIM_ANCHOR, i, n->out);
            if (pr) {
                /* The node's op was validated at the names' max; its tensors take the graph's
                 * names (its inputs are the node's, in order). */
                pr->op = n->op;
                for (int k = 0; k < n->n_in && k < pr->op.n_inputs; k++)
                    memcpy(pr->op.inputs[k].sym, g->tensors[n->in[k]].t.sym, sizeof(pr->op.inputs[k].sym));
                memcpy(pr->op.output.sym, g->tensors[n->out].t.sym, sizeof(pr->op.output.sym));
            }
            break;
        case GRAPH_NODE_STEP:
            pr = new_prim(c, PRIM_STEP, i, n->out);
            if (pr)
                pr->step = n->step;
            break;
        case GRAPH_NODE_RESHAPE:
            pr = new_prim(c, PRIM_VIEW, i, n->out);
            c->p->tensors[n->out].view_of = n->in[0];
            break;
        case GRAPH_NODE_TRANSPOSE:
            pr = new_prim(c, PRIM_TRANSPOSE, i, n->out);
            if (pr)
                memcpy(pr->perm, n->perm, sizeof(pr->perm));
            break;
        case GRAPH_NODE_REDUCE_AXES:
        case GRAPH_NODE_SOFTMAX_AXIS: {
            int r = n->cls == GRAPH_NODE_REDUCE_AXES ? lower_reduce_axes(c, i) : lower_softmax_axis(c, i);
            if (r < 0)
                return r;
            continue;
        }
        case GRAPH_NODE_EXPAND:
        case GRAPH_NODE_PAD: {
            /* The same shape (an expand that grows nothing, pads of 0) is the same memory. */
            const bool same = same_shape(&g->tensors[n->in[0]].t, &g->tensors[n->out].t) &&
                              (n->cls == GRAPH_NODE_EXPAND || !memcmp(n->pad_before, (int64_t[TUNER_MAX_RANK]){0},
                                                                       sizeof(n->pad_before)));
            pr = new_prim(c, same ? PRIM_VIEW : n->cls == GRAPH_NODE_EXPAND ? PRIM_EXPAND : PRIM_PAD, i, n->out);
            if (same)
                c->p->tensors[n->out].view_of = n->in[0];
            break;
        }
        default:
            /* A slice to a name that keeps a prefix of an input's or a weight's memory (position
             * ids [1, 512] to [1, s]) reads that memory as is: a view of fewer elements. */
            if (named_prefix_slice(c, i)) {
                pr = new_prim(c, PRIM_VIEW, i, n->out);
                c->p->tensors[n->out].view_of = n->in[0];
                if (pr)
                    pr->prefix = true;
            } else {
                pr = new_prim(c, PRIM_SLICE, i, n->out);
            }
            break;
        }
        if (!pr)
            return -ENOMEM;
        pr->n_in = n->n_in;
        memcpy(pr->in, n->in, sizeof(int) * (size_t)n->n_in);
    }
    return 0;
}

/* Producers, uses and liveness (a prim is live when an output depends on it). */
static int analyse(part *c)
{
    graph_plan *p = c->p;
    free(c->producer);
    free(c->uses);
    free(c->is_const);
    c->producer = malloc(sizeof(int) * (size_t)p->n_tensors);
    c->uses = calloc((size_t)p->n_tensors, sizeof(int));
    c->is_const = malloc((size_t)p->n_tensors);
    bool *needed = calloc((size_t)p->n_tensors, sizeof(bool));
    if (!c->producer || !c->uses || !c->is_const || !needed) {
        free(needed);
        return -ENOMEM;
    }
    for (int t = 0; t < p->n_tensors; t++) {
        c->producer[t] = -1;
        c->is_const[t] = -1;
        needed[t] = p->tensors[t].is_output;
    }
    for (int k = c->n_prims - 1; k >= 0; k--) {
        c->producer[c->prims[k].out] = k;
        c->prims[k].live = false;
    }
    /* Prims are in dataflow order, so one backward pass finds them all, except after a rewrite
     * that appended views read by earlier prims (fold_attention): passes until none is found. */
    for (bool found = true; found;) {
        found = false;
        for (int k = c->n_prims - 1; k >= 0; k--) {
            prim *pr = &c->prims[k];
            if (pr->live || !needed[pr->out])
                continue;
            pr->live = found = true;
            for (int j = 0; j < pr->n_in; j++)
                needed[pr->in[j]] = true;
        }
    }
    for (int k = 0; k < c->n_prims; k++)
        if (c->prims[k].live)
            for (int j = 0; j < c->prims[k].n_in; j++)
                c->uses[c->prims[k].in[j]]++;
    free(needed);
    return 0;
}

/* Where step q reads tensor t as its value (where's a, every other step's first input) and not
 * as an operand; a commutative binary step reads it as an operand once its inputs are swapped. */
static bool reads_as_value(const prim *q, int s)
{
    return s == (q->step.kind == TUNER_EW_WHERE ? 1 : 0);
}

static bool swaps(const prim *q)
{
    const tuner_ew_kind k = q->step.kind;
    return q->n_in == 2 && (k == TUNER_EW_ADD || k == TUNER_EW_MUL || k == TUNER_EW_MAX || k == TUNER_EW_MIN);
}

/* An exact upcast - a cast to f32 of f16 or bf16 values x that are in memory anyway (a
 * graph input or weight, an anchor's or a copy's result: not a step's, which would then have to
 * be written) - read by several prims is not written once as f32 and read back by all: a step
 * reading it as an operand reads x itself (an elementwise kernel decodes every operand to f32,
 * exactly; a commutative step's inputs are swapped to make it one), and a step reading it as its
 * value gets a copy of the cast just before it (kernels are grown in prim order), which its
 * kernel then takes as its first step. The last value reader keeps the cast itself when no
 * anchor reads it (it fuses there). A quantization reads x.float() for its amax and its scaled
 * cast: the second then reads x as bf16, not an f32 copy. (Not for FP8 x: only elementwise
 * kernels read FP8, and a matmul epilogue's operand is not one.) Returns how many reads changed. */
static int split_upcasts(part *c)
{
    int changed = 0;
    for (int k = 0; k < c->n_prims; k++) {
        const prim *u = &c->prims[k];
        if (!u->live || u->kind != PRIM_STEP || u->step.kind != TUNER_EW_CAST || u->step.dtype != TUNER_F32)
            continue;
        const int x = u->in[0], out = u->out, px = c->producer[x];
        const tuner_dtype from = c->p->tensors[x].t.dtype;
        if (!(from == TUNER_F16 || from == TUNER_BF16) || c->p->tensors[out].is_output ||
            c->uses[out] < 2 || (px >= 0 && c->prims[px].kind == PRIM_STEP))
            continue;
        int n_values = 0, n_anchors = 0;
        for (int j = k + 1; j < c->n_prims; j++) {
            prim *q = &c->prims[j];
            if (!q->live)
                continue;
            if (q->kind == PRIM_STEP && swaps(q) && q->in[0] == out && q->in[1] != out) {
                q->in[0] = q->in[1];
                q->in[1] = out;
            }
            for (int s = 0; s < q->n_in; s++) {
                if (q->in[s] != out)
                    continue;
                if (q->kind != PRIM_STEP) {
                    n_anchors++;
                } else if (!reads_as_value(q, s)) { /* an operand: x itself */
                    q->in[s] = x;
                    changed++;
                } else {
                    n_values++;
                }
            }
        }
        /* Backwards, so that a copy inserted before a reader leaves the earlier ones in place. */
        for (int j = c->n_prims - 1; j > k && n_values > 0; j--) {
            for (int s = c->prims[j].n_in - 1; s >= 0; s--) {
                const prim *q = &c->prims[j];
                if (!q->live || q->kind != PRIM_STEP || q->in[s] != out || !reads_as_value(q, s))
                    continue;
                if (n_values-- == 1 && n_anchors == 0)
                    break; /* the first value reader keeps the cast */
                char name[GRAPH_NAME_MAX + 32];
                snprintf(name, sizeof(name), "%.128s#up%d", c->p->tensors[out].name, changed);
                const tuner_tensor tt = c->p->tensors[out].t;
                const int t = new_tensor(c->p, name, &tt, GRAPH_T_VALUE);
                if (t < 0 || graph__reserve((void **)&c->prims, &c->cap_prims, c->n_prims, sizeof(*c->prims)) < 0)
                    return -ENOMEM;
                prim copy = c->prims[k];
                copy.out = t;
                memmove(&c->prims[j + 1], &c->prims[j], sizeof(prim) * (size_t)(c->n_prims - j));
                c->prims[j] = copy;
                c->n_prims++;
                c->prims[j + 1].in[s] = t;
                changed++;
            }
        }
    }
    return changed;
}

/* matmul(transpose(x, last two axes swapped), ...) reads x with trans_a/trans_b flipped. */
static void fold_transposes(part *c)
{
    for (int k = 0; k < c->n_prims; k++) {
        prim *pr = &c->prims[k];
        if (pr->kind != PRIM_ANCHOR || pr->op.kind != TUNER_OP_MATMUL)
            continue;
        for (int slot = 0; slot < 2; slot++) {
            int pk = c->producer[pr->in[slot]];
            if (pk < 0 || c->prims[pk].kind != PRIM_TRANSPOSE)
                continue;
            const prim *tp = &c->prims[pk];
            int rank = c->p->tensors[tp->in[0]].t.rank;
            bool swap_last = rank >= 2 && tp->perm[rank - 1] == rank - 2 && tp->perm[rank - 2] == rank - 1;
            for (int d = 0; d < rank - 2 && swap_last; d++)
                swap_last = tp->perm[d] == d;
            if (!swap_last)
                continue;
            const int src = tp->in[0];
            pr->in[slot] = src;
            pr->op.inputs[slot] = c->p->tensors[src].t;
            if (slot == 0)
                pr->op.attrs.matmul.trans_a = !pr->op.attrs.matmul.trans_a;
            else
                pr->op.attrs.matmul.trans_b = !pr->op.attrs.matmul.trans_b;
        }
    }
}

/* A binary step reading expand(x) reads x itself when x broadcasts with its other operand to the
 * step's result: the elementwise kernels broadcast their operands anyway, so the expanded tensor
 * need not exist. An expand that nothing else reads is then dead (no kernel); one that a
 * non-broadcasting reader (an anchor, a unary step, a graph output) needs is a copy kernel. */
static void fold_expands(part *c)
{
    for (int k = 0; k < c->n_prims; k++) {
        prim *q = &c->prims[k];
        if (!q->live || q->kind != PRIM_STEP || q->n_in != 2)
            continue;
        for (int slot = 0; slot < 2; slot++) {
            int pk = c->producer[q->in[slot]];
            if (pk < 0 || c->prims[pk].kind != PRIM_EXPAND)
                continue;
            const int x = c->prims[pk].in[0];
            tuner_tensor b;
            if (graph__broadcast(&c->p->tensors[x].t, &c->p->tensors[q->in[1 - slot]].t, &b) &&
                same_shape(&b, &c->p->tensors[q->out].t))
                q->in[slot] = x;
        }
    }
}

static bool op_valid(part *c, const tuner_op *op, const tuner_tensor *want, char **ret_request,
                     tuner_op *ret_op);

/* ---- attention spelled out ---------------------------------------------------------------------- */

/* A plan tensor that is a view of x under shape `shape` (rank 4) with names `sym` (all 0 in a
 * static graph), named after node i. The caller makes sure that x holds the same elements at
 * every size (same_elements). */
static int view4(part *c, int node, const char *what, int x, const int64_t shape[4], const uint8_t sym[4])
{
    tuner_tensor v = c->p->tensors[x].t;
    v.rank = 4;
    memcpy(v.shape, shape, sizeof(int64_t) * 4);
    memset(v.sym, 0, sizeof(v.sym));
    memcpy(v.sym, sym, 4);
    const int t = made_tensor(c, node, what, &v);
    if (t < 0)
        return t;
    c->p->tensors[t].view_of = x;
    prim *pv = new_prim(c, PRIM_VIEW, node, t);
    if (!pv)
        return -ENOMEM;
    pv->in[0] = x;
    pv->n_in = 1;
    return t;
}

/* Whether t holds names `names` and no name twice: with its element count checked by the
 * caller, a view of it under axes naming `names` holds the same elements at every size. */
static bool names_are(const tuner_tensor *t, unsigned names)
{
    unsigned m = 0;
    for (int d = 0; d < t->rank; d++) {
        if (m & t->sym[d])
            return false;
        m |= t->sym[d];
    }
    return m == names;
}

/* Prims an attention rewrite may take beside the two matmuls and the softmax. */
#define ATTN_MAX_CHAIN 12

/* Whether t is read by `uses` prims and is no graph output: a value a rewrite may do away with. */
static bool owned(const part *c, int t, int uses)
{
    return c->uses[t] == uses && !c->p->tensors[t].is_output;
}

/* Walks back from t over views and (with scales) scale steps, while what it passes is read only
 * there - `uses` readers for t itself, one for the rest - and is no graph output; each scale
 * step is multiplied into *scale and its prim appended to chain. Returns the first tensor that is
 * neither (t itself when t is not such a value). */
static int strip(const part *c, int t, int uses, bool scales, double *scale, int *chain, int *n_chain)
{
    for (;;) {
        const int pk = c->producer[t];
        if (pk < 0 || c->uses[t] != uses || c->p->tensors[t].is_output)
            return t;
        const prim *pr = &c->prims[pk];
        if (pr->kind == PRIM_VIEW && !pr->prefix) {
            t = pr->in[0];
        } else if (scales && pr->kind == PRIM_STEP && pr->step.kind == TUNER_EW_SCALE && pr->n_in == 1 &&
                   *n_chain < ATTN_MAX_CHAIN) {
            *scale *= pr->step.scalar;
            chain[(*n_chain)++] = pk;
            t = pr->in[0];
        } else {
            return t;
        }
        uses = 1;
    }
}

/* strip, then also through upcasts to f32 of f16/bf16 values (PyTorch's math backend computes
 * a 16-bit attention in f32: the attention op does as much inside), setting *up when it passed
 * one. */
static int strip_up(const part *c, int t, bool scales, double *scale, int *chain, int *n_chain, bool *up)
{
    for (;;) {
        t = strip(c, t, 1, scales, scale, chain, n_chain);
        const int pk = c->producer[t];
        if (pk < 0 || !owned(c, t, 1) || c->prims[pk].kind != PRIM_STEP || c->prims[pk].step.kind != TUNER_EW_CAST ||
            c->prims[pk].step.dtype != TUNER_F32 || *n_chain >= ATTN_MAX_CHAIN)
            return t;
        const tuner_dtype from = c->p->tensors[c->prims[pk].in[0]].t.dtype;
        if (from != TUNER_F16 && from != TUNER_BF16)
            return t;
        chain[(*n_chain)++] = pk;
        *up = true;
        t = c->prims[pk].in[0];
    }
}

/* Rewrites attention spelled out - matmul(q, k transposed) -> [scale] -> [add mask] -> softmax
 * over the last axis -> matmul(p, v), each intermediate read once (views between them allowed) -
 * into the attention op, so that the score matrix never reaches memory: the last matmul becomes
 * an attention anchor over 4-D views of q, k, v (and of the mask), and its result a view of the
 * attention's. The batch of the matmuls is [B, H] when the mask is added to a 4-D view of the
 * scores (the mask then broadcasts as the graph meant, e.g. [B, 1, 1, Skv]), else one axis.
 * A pattern the attention op cannot take (a head dim it has no template for, fp32, ...) fails
 * proto's validator and stays as it was. */
static int fold_attention_at(part *c, int k2)
{
    prim *m2 = &c->prims[k2];
    if (!m2->live || m2->kind != PRIM_ANCHOR || m2->op.kind != TUNER_OP_MATMUL || m2->op.attrs.matmul.trans_a ||
        m2->op.attrs.matmul.trans_b)
        return 0;
    /* strip and strip_up stop at ATTN_MAX_CHAIN; the four prims appended here beside them (the
     * _safe_softmax's three, the mask add) need room past it. */
    int chain[ATTN_MAX_CHAIN + 4], n_chain = 0;
    double scale = 1.0;
    /* The probabilities: a softmax over the last axis, or PyTorch's _safe_softmax as the lowering
     * writes it - softmax(x), then masked_fill(0) where max(x) < -FLT_MAX (a row with nothing
     * left), which is what the attention op gives such a row. */
    const int probs = strip(c, m2->in[0], 1, false, NULL, NULL, NULL);
    if (!owned(c, probs, 1))
        return 0;
    int ks = c->producer[probs], x_uses = 1;
    if (ks >= 0 && c->prims[ks].kind == PRIM_STEP && c->prims[ks].step.kind == TUNER_EW_MASKED_FILL &&
        c->prims[ks].n_in == 2 && c->prims[ks].step.scalar == 0.0) {
        const int fill = ks, dead = c->prims[fill].in[1];
        const int lt = c->producer[dead], y = strip(c, c->prims[fill].in[0], 1, false, NULL, NULL, NULL);
        ks = owned(c, y, 1) ? c->producer[y] : -1;
        if (lt < 0 || !owned(c, dead, 1) || c->prims[lt].kind != PRIM_STEP || c->prims[lt].step.kind != TUNER_EW_LT ||
            c->prims[lt].n_in != 1 || !(c->prims[lt].step.scalar <= -3.0e38))
            return 0;
        const int kr = c->producer[c->prims[lt].in[0]];
        if (kr < 0 || !owned(c, c->prims[lt].in[0], 1) || c->prims[kr].kind != PRIM_ANCHOR ||
            c->prims[kr].op.kind != TUNER_OP_REDUCE || c->prims[kr].op.attrs.reduce.kind != TUNER_REDUCE_MAX ||
            ks < 0 || c->prims[kr].in[0] != c->prims[ks].in[0] ||
            c->prims[kr].op.attrs.reduce.axis != c->p->tensors[c->prims[kr].in[0]].t.rank - 1)
            return 0;
        chain[n_chain++] = fill;
        chain[n_chain++] = lt;
        chain[n_chain++] = kr;
        x_uses = 2; /* the softmax and the row max read the scores */
    }
    if (ks < 0 || c->prims[ks].kind != PRIM_ANCHOR || c->prims[ks].op.kind != TUNER_OP_SOFTMAX ||
        c->prims[ks].op.attrs.softmax.log)
        return 0;
    /* Back from the softmax's input: an optional mask add, optional scales, the first matmul. */
    int cur = c->prims[ks].in[0];
    int mask = -1, at_mask = -1;
    int kp = owned(c, cur, x_uses) ? c->producer[cur] : -1;
    if (x_uses == 1) {
        cur = strip(c, cur, 1, true, &scale, chain, &n_chain);
        kp = owned(c, cur, 1) ? c->producer[cur] : -1;
    }
    if (kp >= 0 && c->prims[kp].kind == PRIM_STEP && c->prims[kp].step.kind == TUNER_EW_ADD && c->prims[kp].n_in == 2) {
        const prim *add = &c->prims[kp];
        /* The scores are the operand of the add's shape; the mask the other (broadcast). */
        const int a = add->in[0], b = add->in[1];
        const bool a_full = same_shape(&c->p->tensors[a].t, &c->p->tensors[add->out].t);
        const int scores = a_full ? a : b;
        mask = a_full ? b : a;
        if (!same_shape(&c->p->tensors[scores].t, &c->p->tensors[add->out].t) || scores == mask)
            return 0;
        at_mask = add->out;
        chain[n_chain++] = kp;
        cur = strip(c, scores, 1, true, &scale, chain, &n_chain);
        kp = owned(c, cur, 1) ? c->producer[cur] : -1;
    } else if (x_uses == 2 && kp >= 0) {
        cur = strip(c, cur, 2, true, &scale, chain, &n_chain);
        kp = owned(c, cur, 1) || (cur == c->prims[ks].in[0]) ? c->producer[cur] : -1;
    }
    if (kp < 0 || c->prims[kp].kind != PRIM_ANCHOR || c->prims[kp].op.kind != TUNER_OP_MATMUL ||
        c->prims[kp].op.attrs.matmul.trans_a)
        return 0;
    const int k1 = kp;
    /* q, k and v without the views and scales in front of them (PyTorch's math backend scales
     * q and the transposed k by sqrt(scale) each); k's transpose into the matmul, if it was
     * not folded into trans_b, is a transpose of its last two axes. */
    bool up_q = false, up_k = false, up_v = false;
    const int q = strip_up(c, c->prims[k1].in[0], true, &scale, chain, &n_chain, &up_q);
    int kk = strip_up(c, c->prims[k1].in[1], true, &scale, chain, &n_chain, &up_k);
    if (!c->prims[k1].op.attrs.matmul.trans_b) {
        const int tp = c->producer[kk];
        const tuner_tensor *tt = &c->p->tensors[kk].t;
        if (tp < 0 || !owned(c, kk, 1) || c->prims[tp].kind != PRIM_TRANSPOSE || tt->rank < 2 ||
            c->prims[tp].perm[tt->rank - 1] != tt->rank - 2 || c->prims[tp].perm[tt->rank - 2] != tt->rank - 1)
            return 0;
        for (int j = 0; j < tt->rank - 2; j++)
            if (c->prims[tp].perm[j] != j)
                return 0;
        kk = strip_up(c, c->prims[tp].in[0], true, &scale, chain, &n_chain, &up_k);
    }
    const int v = strip_up(c, m2->in[1], false, NULL, chain, &n_chain, &up_v);
    if (up_q != up_k || up_q != up_v)
        return 0;
    /* Upcast operands: the f32 result must go straight back to their dtype (views between
     * allowed); the attention then writes that cast's result. */
    int cast_back = -1;
    if (up_q) {
        int t = c->prims[k2].out;
        for (int guard = 0; guard < 16 && cast_back < 0; guard++) {
            int rd = -1;
            for (int j = k2 + 1; j < c->n_prims && owned(c, t, 1); j++)
                if (c->prims[j].live && c->prims[j].n_in >= 1 && c->prims[j].in[0] == t)
                    rd = j;
            if (rd < 0)
                return 0;
            if (c->prims[rd].kind == PRIM_VIEW && !c->prims[rd].prefix)
                t = c->prims[rd].out;
            else if (c->prims[rd].kind == PRIM_STEP && c->prims[rd].step.kind == TUNER_EW_CAST &&
                     c->prims[rd].n_in == 1 && c->prims[rd].step.dtype == c->p->tensors[q].t.dtype)
                cast_back = rd;
            else
                return 0;
        }
        if (cast_back < 0)
            return 0;
    }
    if (n_chain > ATTN_MAX_CHAIN - 2)
        return 0;
    /* Sizes from the matmuls: scores [bt.., S, Skv], q [.., S, D], v [.., Skv, D]. */
    const tuner_tensor *sc = &c->prims[k1].op.output, *a1 = &c->prims[k1].op.inputs[0], *b2 = &c->prims[k2].op.inputs[1];
    if (sc->rank < 2 || a1->rank < 2 || b2->rank < 2)
        return 0;
    const int r = sc->rank;
    const int64_t s = sc->shape[r - 2], skv = sc->shape[r - 1], d = a1->shape[a1->rank - 1];
    const int64_t bt = tuner_tensor_numel(sc) / (s * skv);
    if (b2->shape[b2->rank - 2] != skv || b2->shape[b2->rank - 1] != d ||
        tuner_tensor_numel(&c->p->tensors[q].t) != bt * s * d || tuner_tensor_numel(&c->p->tensors[kk].t) != bt * skv * d ||
        tuner_tensor_numel(&c->p->tensors[v].t) != bt * skv * d || tuner_tensor_numel(b2) != bt * skv * d)
        return 0;
    /* With names (a static graph has none: every sym below is 0): the batch axes' names `lead`
     * and fixed product; q, k, v and the views must hold the same names, so that the 4-D views
     * hold their elements at every size (the counts above are the max's). */
    const uint8_t s_sym = sc->sym[r - 2], skv_sym = sc->sym[r - 1];
    int64_t lead_fixed = 1;
    unsigned lead = 0;
    for (int j = 0; j < r - 2; j++) {
        if (lead & sc->sym[j])
            return 0;
        lead |= sc->sym[j];
        if (!sc->sym[j])
            lead_fixed *= sc->shape[j];
    }
    if (c->g->n_dims > 0 &&
        (a1->sym[a1->rank - 1] || b2->sym[b2->rank - 1] || b2->sym[b2->rank - 2] != skv_sym ||
         (lead & (s_sym | skv_sym)) || !names_are(&c->p->tensors[q].t, lead | s_sym) ||
         !names_are(&c->p->tensors[kk].t, lead | skv_sym) || !names_are(&c->p->tensors[v].t, lead | skv_sym)))
        return 0;
    /* [B, H] from a 4-D view of the scores where the mask is added, else [bt, 1] (with names:
     * [B, H] of 4-D scores, or a batch axis that is a product of names alone or fixed). */
    int64_t nb = bt, nh = 1;
    uint8_t nb_sym = (uint8_t)lead, nh_sym = 0;
    int64_t mshape[4] = {1, 1, 1, 1};
    uint8_t msym[4] = {0, 0, 0, 0};
    if (lead && lead_fixed != 1) {
        if (r != 4)
            return 0;
        nb = sc->shape[0], nb_sym = sc->sym[0];
        nh = sc->shape[1], nh_sym = sc->sym[1];
    }
    if (mask >= 0) {
        const tuner_tensor *st = &c->p->tensors[at_mask].t, *mt = &c->p->tensors[mask].t;
        if (st->rank == 4 && st->shape[0] * st->shape[1] == bt && st->shape[2] == s && st->shape[3] == skv &&
            (st->sym[0] | st->sym[1]) == lead && !(st->sym[0] & st->sym[1]) && st->sym[2] == s_sym &&
            st->sym[3] == skv_sym) {
            nb = st->shape[0], nb_sym = st->sym[0];
            nh = st->shape[1], nh_sym = st->sym[1];
            for (int j = 0; j < mt->rank; j++) {
                mshape[4 - mt->rank + j] = mt->shape[j];
                msym[4 - mt->rank + j] = mt->sym[j];
            }
        } else if (st->rank == r && r <= 3 && mt->rank <= 3 && nh == 1) {
            /* [bt, S, Skv] scores: the mask's batch axis (if any) moves before the head axis. */
            for (int j = 0; j < mt->rank; j++) {
                mshape[4 - mt->rank + j] = mt->shape[j];
                msym[4 - mt->rank + j] = mt->sym[j];
            }
            if (mt->rank == 3) {
                mshape[0] = mt->shape[0], msym[0] = mt->sym[0];
                mshape[1] = 1, msym[1] = 0;
            }
        } else {
            return 0;
        }
    }
    const tuner_tensor *qt = &c->p->tensors[q].t, *kt = &c->p->tensors[kk].t, *vt = &c->p->tensors[v].t;
    tuner_op op;
    memset(&op, 0, sizeof(op));
    op.kind = TUNER_OP_ATTENTION;
    op.n_inputs = op.n_anchor_inputs = mask >= 0 ? 4 : 3;
    op.attrs.attention.scale = scale;
    const int64_t q4[4] = {nb, nh, s, d}, kv4[4] = {nb, nh, skv, d};
    const uint8_t q4_sym[4] = {nb_sym, nh_sym, s_sym, 0}, kv4_sym[4] = {nb_sym, nh_sym, skv_sym, 0};
    op.inputs[0] = *qt;
    op.inputs[1] = *kt;
    op.inputs[2] = *vt;
    op.inputs[0].rank = op.inputs[1].rank = op.inputs[2].rank = 4;
    memcpy(op.inputs[0].shape, q4, sizeof(q4));
    memcpy(op.inputs[1].shape, kv4, sizeof(kv4));
    memcpy(op.inputs[2].shape, kv4, sizeof(kv4));
    for (int i = 0; i < 3; i++)
        memset(op.inputs[i].sym, 0, sizeof(op.inputs[i].sym));
    memcpy(op.inputs[0].sym, q4_sym, 4);
    memcpy(op.inputs[1].sym, kv4_sym, 4);
    memcpy(op.inputs[2].sym, kv4_sym, 4);
    if (mask >= 0) {
        op.inputs[3] = c->p->tensors[mask].t;
        op.inputs[3].rank = 4;
        memcpy(op.inputs[3].shape, mshape, sizeof(mshape));
        memset(op.inputs[3].sym, 0, sizeof(op.inputs[3].sym));
        memcpy(op.inputs[3].sym, msym, 4);
    }
    tuner_tensor want = op.inputs[0];
    want.dtype = cast_back >= 0 ? c->p->tensors[q].t.dtype : c->p->tensors[m2->out].t.dtype;
    char *request = NULL;
    tuner_op valid;
    if (!op_valid(c, &op, &want, &request, &valid))
        return 0;
    free(request);
    /* The rewrite: views of the inputs, the attention's result, the matmul's result a view of it.
     * (new_prim may move c->prims: indices only from here.) */
    const int node = m2->node, out = m2->out;
    int vq, vk, vv, vm = -1, att;
    if ((vq = view4(c, node, "q", q, q4, q4_sym)) < 0 || (vk = view4(c, node, "k", kk, kv4, kv4_sym)) < 0 ||
        (vv = view4(c, node, "v", v, kv4, kv4_sym)) < 0 ||
        (mask >= 0 && (vm = view4(c, node, "mask", mask, mshape, msym)) < 0))
        return -ENOMEM;
    if ((att = made_tensor(c, node, "attention", &valid.output)) < 0)
        return -ENOMEM;
    /* The attention anchor takes the last matmul's place (its index keeps the graph's order). */
    prim *a = &c->prims[k2];
    a->n_also = 0;
    a->op = valid;
    a->out = att;
    a->n_in = op.n_inputs;
    a->in[0] = vq, a->in[1] = vk, a->in[2] = vv;
    if (vm >= 0)
        a->in[3] = vm;
    /* What the attention replaced computes nothing now (analyse() finds it dead); its nodes are
     * the attention kernel's. */
    a->also[a->n_also++] = c->prims[k1].node;
    a->also[a->n_also++] = c->prims[ks].node;
    c->prims[k1].live = c->prims[ks].live = false;
    for (int j = 0; j < n_chain; j++) {
        c->prims[chain[j]].live = false;
        a->also[a->n_also++] = c->prims[chain[j]].node;
    }
    if (cast_back >= 0) {
        /* The cast back becomes a view of the attention's result (same dtype, same elements);
         * the f32 values before it are read by nothing now. */
        a->also[a->n_also++] = c->prims[cast_back].node;
        prim *cb = &c->prims[cast_back];
        cb->kind = PRIM_VIEW;
        cb->in[0] = att;
        cb->n_in = 1;
        c->p->tensors[cb->out].view_of = att;
        return 1;
    }
    prim *pv = new_prim(c, PRIM_VIEW, node, out); /* a is not valid after this */
    if (!pv)
        return -ENOMEM;
    pv->in[0] = att;
    pv->n_in = 1;
    c->p->tensors[out].view_of = att;
    return 1;
}

/* Rewrites every attention spelled out (fold_attention_at); analyse() must run again after a
 * rewrite. Returns the number of rewrites, or -ENOMEM. */
static int fold_attention(part *c)
{
    int n = 0;
    const int n_prims = c->n_prims; /* the rewrite appends views: they are not matmuls */
    for (int k = 0; k < n_prims; k++) {
        const int r = fold_attention_at(c, k);
        if (r < 0)
            return r;
        n += r;
    }
    return n;
}

/* Whether prim pk is a transpose swapping axes 1 and 2 of a 4-D tensor ([B,S,H,D] <-> [B,H,S,D]). */
static bool swaps_heads(const part *c, int pk)
{
    if (pk < 0 || c->prims[pk].kind != PRIM_TRANSPOSE || c->p->tensors[c->prims[pk].in[0]].t.rank != 4)
        return false;
    const int *perm = c->prims[pk].perm;
    return perm[0] == 0 && perm[1] == 2 && perm[2] == 1 && perm[3] == 3;
}

/* The prim of the head swap behind t - through views read only there, ending at a transpose whose
 * result has t's shape, so that the views amount to none (the attention rewrite reads 4-D views
 * of 3-D views of q, k and v) - or -1. */
static int head_swap_behind(const part *c, int t)
{
    const tuner_tensor *want = &c->p->tensors[t].t;
    for (int depth = 0; depth < ATTN_MAX_CHAIN; depth++) {
        const int pk = c->producer[t];
        if (pk < 0 || !owned(c, t, 1))
            return -1;
        if (c->prims[pk].kind != PRIM_VIEW || c->prims[pk].prefix)
            return swaps_heads(c, pk) && same_shape(&c->p->tensors[t].t, want) ? pk : -1;
        t = c->prims[pk].in[0];
    }
    return -1;
}

/* Attention between the permutes of a QKV projection - q, k and v each [B,S,H,D] transposed to
 * [B,H,S,D] (views of the same shape between allowed), the result transposed back to [B,S,H,D] -
 * reads and writes the [B,S,H,D] tensors themselves in the bshd layout: four copy kernels per
 * attention fewer. Only when every one of the four transposes is read by the attention alone
 * (and the result is no graph output). */
static int fold_attention_layout(part *c)
{
    int n = 0;
    for (int k = 0; k < c->n_prims; k++) {
        prim *a = &c->prims[k];
        if (!a->live || a->kind != PRIM_ANCHOR || a->op.kind != TUNER_OP_ATTENTION || a->op.attrs.attention.bshd)
            continue;
        bool ok = !c->p->tensors[a->out].is_output && c->uses[a->out] == 1;
        int tq[3];
        for (int i = 0; i < 3 && ok; i++)
            ok = (tq[i] = head_swap_behind(c, a->in[i])) >= 0;
        /* The one reader of the result (through views read only there, which amount to none when
         * the transpose reads the result's shape: the spelled-out rewrite leaves the [B*H, S, D]
         * matmul's result a view of it, viewed back as [B, H, S, D]): a transpose back. */
        int to = -1, res = a->out;
        for (int depth = 0; depth < ATTN_MAX_CHAIN && ok && to < 0; depth++) {
            /* (a rewrite appends the views it makes: a reader may come before its input) */
            int rd = -1;
            for (int j = 0; j < c->n_prims && rd < 0; j++)
                if (j != k && c->prims[j].live && c->prims[j].n_in == 1 && c->prims[j].in[0] == res)
                    rd = j;
            if (rd < 0)
                break;
            if (c->prims[rd].kind == PRIM_VIEW && !c->prims[rd].prefix && owned(c, c->prims[rd].out, 1))
                res = c->prims[rd].out;
            else
                to = rd;
        }
        if (!ok || !swaps_heads(c, to) || !same_shape(&c->p->tensors[res].t, &c->p->tensors[a->out].t))
            continue;
        tuner_op op = a->op;
        op.attrs.attention.bshd = true;
        for (int i = 0; i < 3; i++)
            op.inputs[i] = c->p->tensors[c->prims[tq[i]].in[0]].t;
        char *request = NULL;
        tuner_op valid;
        if (!op_valid(c, &op, &c->p->tensors[c->prims[to].out].t, &request, &valid))
            continue;
        free(request);
        const int old_out = a->out;
        a->op = valid;
        for (int i = 0; i < 3; i++)
            a->in[i] = c->prims[tq[i]].in[0];
        a->out = c->prims[to].out;
        /* The transpose back computes nothing now: it makes the old result, which nothing reads. */
        c->prims[to].out = old_out;
        c->prims[to].n_in = 0;
        n++;
    }
    return n;
}

/* The slice of the last axis behind t - through views read only there - that is read only there:
 * its prim, with the slice's input in *x and its columns [*start, *stop) of x's last axis (step
 * 1, every other axis whole); or -1. The views amount to a reshape of the slice's rows and
 * columns: their last shape splits the columns into heads of D only where the attention's input
 * has the slice's rows times [H, D], which op_valid's shapes ensure. */
static int last_axis_slice_behind(const part *c, int t, int *x, int64_t *start, int64_t *stop)
{
    for (int depth = 0; depth < ATTN_MAX_CHAIN; depth++) {
        const int pk = c->producer[t];
        if (pk < 0 || !owned(c, t, 1))
            return -1;
        const prim *pr = &c->prims[pk];
        if (pr->kind == PRIM_VIEW && !pr->prefix) {
            t = pr->in[0];
            continue;
        }
        if (pr->kind != PRIM_SLICE || pr->n_in != 1 || c->g->nodes[pr->node].cls != GRAPH_NODE_SLICE)
            return -1;
        const graph_node *n = &c->g->nodes[pr->node];
        const tuner_tensor *xt = &c->p->tensors[pr->in[0]].t, *st = &c->p->tensors[pr->out].t;
        const int r = xt->rank;
        if (r < 2 || st->rank != r)
            return -1;
        for (int d = 0; d < r - 1; d++)
            if (n->start[d] != 0 || n->stride[d] != 1 || st->shape[d] != xt->shape[d])
                return -1;
        if (n->stride[r - 1] != 1 || n->start[r - 1] < 0 || n->start[r - 1] + st->shape[r - 1] > xt->shape[r - 1])
            return -1;
        *x = pr->in[0];
        *start = n->start[r - 1];
        *stop = n->start[r - 1] + st->shape[r - 1];
        return pk;
    }
    return -1;
}

/* Self-attention straight out of a QKV projection: a bshd attention whose q, k and v are (views
 * of) three slices of one tensor X's last axis - columns [0, Hq D), [Hq D, (Hq + Hkv) D) and
 * [(Hq + Hkv) D, (Hq + 2 Hkv) D), the whole axis, as GPT-2's split of c_attn's output or a GQA
 * model's split_with_sizes give - reads X itself, viewed as [B, S, Hq + 2 Hkv, D], in the
 * bshd_packed layout: three copy kernels per attention fewer. Only when each slice (and each view
 * after it) is read by the attention alone and is no graph output. */
static int fold_attention_packed(part *c)
{
    int n = 0;
    const int n_prims = c->n_prims; /* the rewrite appends a view: not an attention */
    for (int k = 0; k < n_prims; k++) {
        prim *a = &c->prims[k];
        if (!a->live || a->kind != PRIM_ANCHOR || a->op.kind != TUNER_OP_ATTENTION || !a->op.attrs.attention.bshd ||
            a->op.attrs.attention.packed)
            continue;
        const tuner_op *op0 = &a->op;
        const int64_t b = op0->inputs[0].shape[0], s = op0->inputs[0].shape[1], hq = op0->inputs[0].shape[2];
        const int64_t skv = op0->inputs[1].shape[1], hkv = op0->inputs[1].shape[2], d = op0->inputs[0].shape[3];
        if (s != skv || op0->inputs[0].sym[1] != op0->inputs[1].sym[1])
            continue;
        int x[3], sl[3];
        int64_t start[3], stop[3];
        bool ok = true;
        for (int i = 0; i < 3 && ok; i++)
            ok = (sl[i] = last_axis_slice_behind(c, a->in[i], &x[i], &start[i], &stop[i])) >= 0;
        if (!ok || x[1] != x[0] || x[2] != x[0])
            continue;
        const tuner_tensor *xt = &c->p->tensors[x[0]].t;
        const int64_t h3 = hq + 2 * hkv;
        if (start[0] != 0 || stop[0] != hq * d || start[1] != hq * d || stop[1] != (hq + hkv) * d ||
            start[2] != (hq + hkv) * d || stop[2] != h3 * d || xt->shape[xt->rank - 1] != h3 * d ||
            tuner_tensor_numel(xt) != b * s * h3 * d || xt->sym[xt->rank - 1] ||
            !names_are(xt, (unsigned)(op0->inputs[0].sym[0] | op0->inputs[0].sym[1])))
            continue;
        const int64_t shape[4] = {b, s, h3, d};
        const uint8_t sym[4] = {op0->inputs[0].sym[0], op0->inputs[0].sym[1], 0, 0};
        const bool has_mask = op0->n_anchor_inputs == 4;
        tuner_op op;
        memset(&op, 0, sizeof(op));
        op.kind = TUNER_OP_ATTENTION;
        op.attrs.attention = op0->attrs.attention;
        op.attrs.attention.packed = true;
        op.attrs.attention.kv_heads = (int)hkv;
        op.n_inputs = op.n_anchor_inputs = has_mask ? 2 : 1;
        op.inputs[0] = *xt;
        op.inputs[0].rank = 4;
        memcpy(op.inputs[0].shape, shape, sizeof(shape));
        memset(op.inputs[0].sym, 0, sizeof(op.inputs[0].sym));
        memcpy(op.inputs[0].sym, sym, 4);
        if (has_mask)
            op.inputs[1] = op0->inputs[3];
        char *request = NULL;
        tuner_op valid;
        if (!op_valid(c, &op, &c->p->tensors[a->out].t, &request, &valid))
            continue;
        free(request);
        const int mask = has_mask ? a->in[3] : -1;
        const int vx = view4(c, a->node, "qkv", x[0], shape, sym);
        if (vx < 0)
            return -ENOMEM;
        a = &c->prims[k]; /* view4 may move c->prims */
        a->op = valid;
        a->n_in = has_mask ? 2 : 1;
        a->in[0] = vx;
        if (has_mask)
            a->in[1] = mask;
        /* The slices and their views are read by nothing now (analyse() finds them dead); the
         * slices' nodes are the attention kernel's. */
        for (int i = 0; i < 3 && a->n_also < (int)(sizeof(a->also) / sizeof(a->also[0])); i++)
            a->also[a->n_also++] = c->prims[sl[i]].node;
        n++;
    }
    return n;
}

/* ---- GELU spelled out -------------------------------------------------------------------------- */

/* The step prim producing t when it is of kind `kind` with n_in inputs and t is read only once
 * (and is no graph output); else NULL. */
static const prim *single_use_step(const part *c, int t, tuner_ew_kind kind, int n_in)
{
    const int pk = c->producer[t];
    if (pk < 0 || !owned(c, t, 1))
        return NULL;
    const prim *pr = &c->prims[pk];
    return pr->kind == PRIM_STEP && pr->step.kind == kind && pr->n_in == n_in ? pr : NULL;
}

/* A scalar step's constant as the model wrote it: equal to want up to float rounding. */
static bool near(double v, double want)
{
    return fabs(v - want) <= 1e-6 * fabs(want);
}

/* The x of half = x * 0.5, or -1. */
static int half_of(const part *c, int half)
{
    const prim *pr = single_use_step(c, half, TUNER_EW_SCALE, 1);
    return pr && near(pr->step.scalar, 0.5) ? pr->in[0] : -1;
}

/* Whether inner is sqrt(2/pi) * (x + 0.044715 * x^3), the argument of GELU's tanh form. */
static bool is_tanh_argument(const part *c, int inner, int x)
{
    const prim *sc = single_use_step(c, inner, TUNER_EW_SCALE, 1);
    if (!sc || !near(sc->step.scalar, 0.7978845608028654))
        return false;
    const prim *add = single_use_step(c, sc->in[0], TUNER_EW_ADD, 2);
    if (!add)
        return false;
    for (int j = 0; j < 2; j++) {
        const prim *cube_scaled = add->in[j] == x ? single_use_step(c, add->in[1 - j], TUNER_EW_SCALE, 1) : NULL;
        if (!cube_scaled || !near(cube_scaled->step.scalar, 0.044715))
            continue;
        const prim *cube = single_use_step(c, cube_scaled->in[0], TUNER_EW_POW, 1);
        if (cube && cube->step.scalar == 3.0 && cube->in[0] == x)
            return true;
    }
    return false;
}

/* The GELU step whose spelled-out form is one = 1 + tanh(...) or 1 + erf(...) of x, or -1. */
static int gelu_kind_of(const part *c, int one, int x)
{
    const prim *shift = single_use_step(c, one, TUNER_EW_SHIFT, 1);
    if (!shift || !near(shift->step.scalar, 1.0))
        return -1;
    const prim *f = single_use_step(c, shift->in[0], TUNER_EW_TANH, 1);
    if (f)
        return is_tanh_argument(c, f->in[0], x) ? TUNER_EW_GELU_TANH : -1;
    f = single_use_step(c, shift->in[0], TUNER_EW_ERF, 1);
    if (!f)
        return -1;
    const prim *sc = single_use_step(c, f->in[0], TUNER_EW_SCALE, 1);
    return sc && sc->in[0] == x && near(sc->step.scalar, 0.7071067811865476) ? TUNER_EW_GELU_ERF : -1;
}

/* Rewrites GELU spelled out in elementwise steps - (x * 0.5) * (1 + tanh(sqrt(2/pi) * (x + 0.044715
 * * x^3))), GPT-2's gelu_new as PyTorch records it, or (x * 0.5) * (1 + erf(x * 1/sqrt(2))) - into
 * the one GELU step: x is read three times there, so no epilogue could take the steps and each
 * was a kernel of its own (eight passes over GPT-2's widest activation). Every intermediate must
 * be read only there. The final multiply becomes the GELU step; analyse() then finds the others
 * dead. Returns how many it rewrote. */
static int fold_gelu(part *c)
{
    int n = 0;
    for (int k = 0; k < c->n_prims; k++) {
        prim *mul = &c->prims[k];
        if (!mul->live || mul->kind != PRIM_STEP || mul->step.kind != TUNER_EW_MUL || mul->n_in != 2)
            continue;
        for (int j = 0; j < 2; j++) {
            const int x = half_of(c, mul->in[j]);
            const int kind = x >= 0 ? gelu_kind_of(c, mul->in[1 - j], x) : -1;
            if (kind < 0 || !same_shape(&c->p->tensors[x].t, &c->p->tensors[mul->out].t) ||
                c->p->tensors[x].t.dtype != c->p->tensors[mul->out].t.dtype)
                continue;
            /* The matched prims are everything between mul and x: the GELU computes their nodes. */
            int stack[16], n_stack = 0;
            stack[n_stack++] = mul->in[0];
            stack[n_stack++] = mul->in[1];
            mul->n_also = 0;
            while (n_stack > 0) {
                const int t = stack[--n_stack];
                if (t == x)
                    continue;
                const prim *pr = &c->prims[c->producer[t]];
                if (mul->n_also < 16)
                    mul->also[mul->n_also++] = pr->node;
                for (int i = 0; i < pr->n_in && n_stack < 16; i++)
                    stack[n_stack++] = pr->in[i];
            }
            mul->step = (tuner_ew_step){.kind = (tuner_ew_kind)kind, .operand = -1, .dtype = mul->step.dtype};
            mul->in[0] = x;
            mul->n_in = 1;
            n++;
            break;
        }
    }
    return n;
}

/* ---- views below elementwise steps -------------------------------------------------------------- */

/* Moves a view below the step that alone reads it: view(a) -> step -> y becomes step(a) -> y0 ->
 * view -> y (y0 new, a's shape, the step's dtype; y a view of it). A step computes each element by
 * itself, so it commutes with any reshape - for a binary step when its other operand has the
 * view's shape (no broadcasting), read through a view of a's shape made here. So the step can
 * join the epilogue of a's producer, which reads a and not the view: PyTorch records a linear
 * layer as addmm on 2-D rows viewed back to [B, S, N], so a GELU or a residual add after it
 * (BERT, GPT-2) was a kernel of its own, a pass over the activation. The uses it reads are
 * analyse()'s, of the tensors the pass started with (a moved view may move again in the same
 * pass: the readers of its result did not change); graph_partition repeats the pass while it
 * moves one. Returns how many it moved. */
static int sink_views(part *c)
{
    const int n_tensors = c->p->n_tensors, n_prims = c->n_prims;
    int n = 0;
    for (int k = 0; k < n_prims; k++) {
        const prim *v = &c->prims[k];
        if (!v->live || v->kind != PRIM_VIEW || v->prefix || v->out >= n_tensors || !owned(c, v->out, 1))
            continue;
        int sk = -1, slot = -1;
        for (int j = k + 1; j < n_prims && sk < 0; j++)
            for (int i = 0; i < c->prims[j].n_in && sk < 0; i++)
                if (c->prims[j].live && c->prims[j].in[i] == v->out)
                    sk = j, slot = i;
        if (sk < 0)
            continue;
        const prim *st = &c->prims[sk];
        const int y = st->out;
        /* (y may be an output: home_outputs gives a view output the memory it views.) */
        if (st->kind != PRIM_STEP || y >= n_tensors || c->p->tensors[y].view_of >= 0)
            continue;
        const bool binary = st->n_in == 2 && TUNER_EW_IS_BINARY(st->step.kind);
        if (st->n_in != 1 && !(binary && st->in[1 - slot] < n_tensors &&
                               same_shape(&c->p->tensors[st->in[1 - slot]].t, &c->p->tensors[v->out].t)))
            continue;
        tuner_tensor t0 = c->p->tensors[v->in[0]].t;
        t0.dtype = c->p->tensors[y].t.dtype;
        const int y0 = made_tensor(c, st->node, "unviewed", &t0);
        if (y0 < 0)
            return y0;
        prim step = c->prims[sk], view = c->prims[k];
        if (binary) {
            /* The other operand, viewed as a. */
            const int other = step.in[1 - slot];
            tuner_tensor tr = c->p->tensors[view.in[0]].t;
            tr.dtype = c->p->tensors[other].t.dtype;
            const int r0 = made_tensor(c, st->node, "reshaped", &tr);
            if (r0 < 0)
                return r0;
            prim *rv = new_prim(c, PRIM_VIEW, step.node, r0);
            if (!rv)
                return -ENOMEM;
            rv->in[0] = other;
            rv->n_in = 1;
            c->p->tensors[r0].view_of = other;
            step.in[1 - slot] = r0;
        }
        step.in[slot] = view.in[0];
        step.out = y0;
        view.in[0] = y0;
        view.out = y;
        c->p->tensors[y].view_of = y0;
        /* The step takes the view's place in the dataflow order, the view the step's. */
        c->prims[k] = step;
        c->prims[sk] = view;
        n++;
    }
    return n;
}

/* ---- kernels ------------------------------------------------------------------------------------ */

/* Whether t depends on weights only. Before kernels exist, a value is constant when everything
 * its prim reads is; the answer is kept per tensor (the dataflow no longer changes once
 * analyse() has run), so shared values are not walked again: without it a chain of diamonds
 * costs 2^depth. */
static bool constant(const part *c, int t)
{
    t = root_of(c->p, t);
    if (c->is_const[t] >= 0)
        return c->is_const[t] == 1;
    const graph_plan_tensor *pt = &c->p->tensors[t];
    bool v = pt->kind == GRAPH_T_WEIGHT;
    const int pk = c->producer[t];
    /* A value with names has the run's sizes: it is computed in every run, not once. */
    bool named = false;
    for (int d = 0; d < pt->t.rank; d++)
        named = named || pt->t.sym[d];
    if (!v && pt->kind != GRAPH_T_INPUT && pk >= 0 && !named) {
        const prim *pr = &c->prims[pk];
        v = true;
        for (int j = 0; j < pr->n_in && v; j++)
            v = constant(c, pr->in[j]);
    }
    c->is_const[t] = v ? 1 : 0;
    return v;
}

/* The same shape at every size: the same sizes and the same names (a static graph has none). */
static bool same_shape(const tuner_tensor *a, const tuner_tensor *b)
{
    return a->rank == b->rank && memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->rank) == 0 &&
           memcmp(a->sym, b->sym, (size_t)a->rank) == 0;
}

static bool commutes(tuner_ew_kind k)
{
    return k == TUNER_EW_ADD || k == TUNER_EW_MUL || k == TUNER_EW_MAX || k == TUNER_EW_MIN;
}

/* Validates a candidate op through the request language; true when proto accepts its request and
 * infers `want` (shape and dtype) as its output. */
static bool any_named(const tuner_op *op, const tuner_tensor *want)
{
    unsigned m = 0;
    for (int d = 0; d < want->rank; d++)
        m |= want->sym[d];
    for (int i = 0; i < op->n_inputs; i++)
        for (int d = 0; d < op->inputs[i].rank; d++)
            m |= op->inputs[i].sym[d];
    return m != 0;
}

/* op_valid of an op with names (over the graph's dims): its request names them (leading named
 * axes merged, graph__op_request_in), proto validates it as any kernel request, and its output
 * must be `want` as presented, names included. *ret_op stays over the graph's tensors (the
 * growth goes on from it); the kernel's own op is the request's (add_kernel). */
/* An FP8 matmul's request names the plan's target: whether a kernel of this build computes it
 * there (docs/api.md: sm_90a, B K-major) is known only with one, and an FP8 matmul the target
 * cannot run is refused at its node with the reason rather than when its kernel is built. */
static char *with_target(part *c, const tuner_op *op, char *body)
{
    if (!body || op->kind != TUNER_OP_MATMUL || !tuner_dtype_is_fp8(op->inputs[0].dtype))
        return body;
    const size_t n = strlen(body);
    char arch[16];
    tuner_target_name(c->target, arch, sizeof(arch));
    char *out = malloc(n + 32);
    if (!out || n < 2 || body[n - 1] != '}') { /* the request is one JSON object */
        free(out);
        free(body);
        return NULL;
    }
    snprintf(out, n + 32, "%.*s,\"arch\":\"%s\"}", (int)(n - 1), body, arch);
    free(body);
    return out;
}

static bool op_valid_named(part *c, const tuner_op *op, const tuner_tensor *want, char **ret_request,
                           tuner_op *ret_op)
{
    tuner_op *probe = c->flat;
    *probe = *op;
    probe->output = *want;
    char *body = with_target(c, probe, graph__op_request_in(probe, c->g, c->flat));
    if (!body)
        return false;
    const tuner_tensor *fw = &c->flat->output; /* want, merged alike */
    bool ok = proto_kernel_request_parse(body, strlen(body), c->scratch, &c->why) == 0;
    const tuner_op *got = &c->scratch->op;
    if (ok) {
        ok = got->output.rank == fw->rank && got->output.dtype == fw->dtype &&
             memcmp(got->output.shape, fw->shape, sizeof(int64_t) * (size_t)fw->rank) == 0;
        for (int d = 0; ok && d < fw->rank; d++) {
            unsigned m = 0; /* the kernel's dims are the graph's that it uses, by name */
            for (int k = 0; k < got->n_dims; k++)
                if (got->output.sym[d] & (1u << k))
                    for (int j = 0; j < c->g->n_dims; j++)
                        if (strcmp(c->g->dims[j].name, got->dims[k].name) == 0)
                            m |= 1u << j;
            ok = m == fw->sym[d];
        }
        if (!ok)
            proto_fail(&c->why, 422, "unsupported", "", "the kernel's result is not the node's with its names");
    }
    if (ok) {
        *ret_op = *op;
        ret_op->output = *want;
        free(*ret_request);
        *ret_request = body;
    } else {
        free(body);
    }
    return ok;
}

static bool op_valid(part *c, const tuner_op *op, const tuner_tensor *want, char **ret_request,
                     tuner_op *ret_op)
{
    c->why.message[0] = '\0';
    if (c->g->n_dims > 0 && any_named(op, want))
        return op_valid_named(c, op, want, ret_request, ret_op);
    char *body = with_target(c, op, graph__op_request(op));
    if (!body)
        return false;
    proto_error pe;
    bool ok = proto_kernel_request_parse(body, strlen(body), c->scratch, &pe) == 0 &&
              same_shape(&c->scratch->op.output, want) && c->scratch->op.output.dtype == want->dtype;
    if (!ok && op->kind == TUNER_OP_MATMUL && tuner_dtype_is_fp8(op->inputs[0].dtype) && pe.message[0])
        c->fp8_why = pe; /* the reason an FP8 matmul cannot be one (unsupported() gives it) */
    if (ok) {
        *ret_op = c->scratch->op;
        free(*ret_request);
        *ret_request = body;
    } else {
        free(body);
    }
    return ok;
}

/* The index of tensor t among op's inputs from `from` on, adding it when absent; -1 when full. */
static int operand_index(tuner_op *op, int *bound, int t, const tuner_tensor *tt, int from)
{
    for (int j = from; j < op->n_inputs; j++)
        if (bound[j] == t)
            return j;
    if (op->n_inputs >= TUNER_MAX_INPUTS)
        return -1;
    op->inputs[op->n_inputs] = *tt;
    bound[op->n_inputs] = t;
    return op->n_inputs++;
}

typedef struct growing {
    tuner_op op;
    int bound[TUNER_MAX_INPUTS]; /* plan tensor of each input */
    int out;                     /* plan tensor the kernel writes */
    char *request;
    bool is_constant;
    int n_prims;
    int prims[512];
} growing;

/* A mask node as a step of the running value cur (its operands in ret_operands: the step's
 * operand, then where's other): a comparison of cur with an input or its value, or with cur on
 * the right as the swapped comparison (a < cur is cur > a); masked_fill of cur (x, never the
 * mask); where with cur as its `a` (the value taken where the condition holds). where(cond, a,
 * cur) and a node reading cur twice have no such step: 0, and they stay kernels of their own. */
static int mask_step_for(const prim *q, int cur, tuner_ew_step *ret, int ret_operands[2])
{
    tuner_ew_step s = q->step;
    s.operand = -1;
    if (s.kind == TUNER_EW_WHERE) {
        if (q->in[1] != cur || q->in[0] == cur || q->in[2] == cur)
            return 0;
        ret_operands[0] = q->in[0];
        ret_operands[1] = q->in[2];
    } else if (q->n_in == 1) { /* a comparison with its value */
        if (q->in[0] != cur)
            return 0;
    } else if (q->in[0] == cur && q->in[1] != cur) {
        ret_operands[0] = q->in[1];
    } else if (tuner_ew_is_compare(s.kind) && q->in[1] == cur && q->in[0] != cur) {
        ret_operands[0] = q->in[0];
        s.kind = tuner_ew_compare_swapped(s.kind);
    } else {
        return 0;
    }
    ret[0] = s;
    return 1;
}

/* The steps that compute `consumer` from the running value cur: step(cur[, operand]), or for
 * operand - cur the pair neg, add. 0 steps when it cannot be expressed. The inputs the last
 * step reads go to ret_operands (its operand, and where's other), -1 when none. */
static int steps_for(const part *c, const prim *q, int cur, tuner_ew_step *ret, int ret_operands[2])
{
    ret_operands[0] = ret_operands[1] = -1;
    int *ret_operand = &ret_operands[0];
    if (q->kind != PRIM_STEP)
        return 0;
    if (tuner_ew_is_mask(q->step.kind))
        return mask_step_for(q, cur, ret, ret_operands);
    tuner_ew_step s = q->step;
    s.operand = -1;
    if (!TUNER_EW_IS_BINARY(s.kind)) {
        ret[0] = s;
        return q->in[0] == cur ? 1 : 0;
    }
    if (q->in[0] == cur && q->in[1] != cur) {
        *ret_operand = q->in[1];
        ret[0] = s;
        return 1;
    }
    if (q->in[1] == cur && q->in[0] != cur) {
        *ret_operand = q->in[0];
        if (commutes(s.kind)) {
            ret[0] = s;
            return 1;
        }
        if (s.kind == TUNER_EW_SUB) { /* a - cur = (-cur) + a */
            ret[0] = (tuner_ew_step){.kind = TUNER_EW_NEG, .operand = -1};
            ret[1] = (tuner_ew_step){.kind = TUNER_EW_ADD, .operand = -1};
            return 2;
        }
    }
    (void)c;
    return 0;
}

/* Takes next - k grown by primitive pk, its output tensor `out` - in k's place when the validator
 * accepts it: k's request freed, the validated op kept, pk marked taken (its kernel's index is set
 * when the kernel is added). False, k as it was, when it does not. */
static bool take_grown(part *c, growing *k, growing *next, int out, int pk)
{
    tuner_op valid;
    if (!op_valid(c, &next->op, &c->p->tensors[out].t, &next->request, &valid))
        return false;
    free(k->request);
    *k = *next;
    k->op = valid;
    k->out = out;
    k->prims[k->n_prims++] = pk;
    c->prims[pk].kernel = -2;
    return true;
}

/* Grows k's epilogue (for an elementwise kernel: its chain) with single-use step consumers. */
static int grow_epilogue(part *c, growing *k)
{
    for (;;) {
        int cur = k->out;
        const graph_plan_tensor *ct = &c->p->tensors[cur];
        if (ct->is_output || c->uses[cur] != 1 || k->n_prims >= (int)(sizeof(k->prims) / sizeof(int)))
            return 0;
        int qk = -1;
        for (int j = c->producer[cur] + 1; j < c->n_prims && qk < 0; j++) {
            const prim *q = &c->prims[j];
            if (!q->live)
                continue;
            for (int s = 0; s < q->n_in; s++)
                if (q->in[s] == cur)
                    qk = j;
        }
        if (qk < 0 || c->prims[qk].kernel >= 0)
            return 0;
        prim *q = &c->prims[qk];
        tuner_ew_step steps[2];
        int operands[2];
        int n = steps_for(c, q, cur, steps, operands);
        if (n == 0 || k->op.epilogue.n + n > TUNER_MAX_STEPS)
            return 0;
        /* An FP8 matmul's quantizing cast saturates (cvt.rn.satfinite, as cuBLASLt); torch's
         * float8_e5m2 gives inf past 57344's range, which an elementwise kernel's cast does. */
        if (k->op.kind == TUNER_OP_MATMUL && steps[0].kind == TUNER_EW_CAST && steps[0].dtype == TUNER_F8E5M2)
            return 0;
        for (int j = 0; j < 2; j++)
            if (operands[j] >= 0 && k->is_constant && !constant(c, operands[j]))
                return 0;
        growing next = *k;
        next.request = NULL;
        int from = k->op.kind == TUNER_OP_ELEMENTWISE ? 0 : k->op.n_anchor_inputs;
        for (int j = 0; j < 2; j++) {
            if (operands[j] < 0)
                continue;
            int idx = operand_index(&next.op, next.bound, operands[j], &c->p->tensors[operands[j]].t, from);
            if (idx < 0)
                return 0;
            if (j == 0)
                steps[n - 1].operand = idx;
            else
                steps[n - 1].operand2 = idx;
        }
        for (int s = 0; s < n; s++)
            next.op.epilogue.steps[next.op.epilogue.n++] = steps[s];
        if (!take_grown(c, k, &next, q->out, qk))
            return 0;
    }
}

/* A reduce of an exact upcast - cast pk, to f32 from f16 or bf16 - reads the 16-bit tensor and
 * casts its result to f32 instead (a cast is no prologue step): the reduce computes in f32 from
 * exactly the same values, and its output stays the f32 the graph has. An amax of x.float() then
 * reads x once as bf16, not an f32 copy written for it. The prologue stops there: x's own
 * producer rounded it to 16 bits, which a prologue in f32 would not. */
static int reduce_through_upcast(part *c, growing *k, int slot, int pk)
{
    const prim *p = &c->prims[pk];
    const int x = p->in[0];
    const tuner_dtype from = c->p->tensors[x].t.dtype;
    if (k->op.kind != TUNER_OP_REDUCE || slot != 0 || p->step.dtype != TUNER_F32 ||
        (from != TUNER_F16 && from != TUNER_BF16) || k->op.epilogue.n != 0 ||
        k->n_prims >= (int)(sizeof(k->prims) / sizeof(int)))
        return 0;
    growing next = *k;
    next.request = NULL;
    next.op.inputs[slot] = c->p->tensors[x].t;
    next.bound[slot] = x;
    next.op.epilogue.steps[0] = (tuner_ew_step){.kind = TUNER_EW_CAST, .operand = -1, .dtype = TUNER_F32};
    next.op.epilogue.n = 1;
    take_grown(c, k, &next, k->out, pk);
    return 0;
}

/* Grows anchor input `slot`'s prologue with the single-use step producers of what it reads. */
static int grow_prologue(part *c, growing *k, int slot)
{
    for (;;) {
        int x = k->bound[slot];
        const graph_plan_tensor *xt = &c->p->tensors[x];
        int pk = c->producer[x];
        if (xt->is_output || xt->view_of >= 0 || c->uses[x] != 1 || pk < 0 ||
            c->prims[pk].kind != PRIM_STEP || c->prims[pk].kernel != -1 || constant(c, x) ||
            k->n_prims >= (int)(sizeof(k->prims) / sizeof(int)))
            return 0;
        const prim *p = &c->prims[pk];
        if (p->step.kind == TUNER_EW_CAST)
            return reduce_through_upcast(c, k, slot, pk);
        if (k->op.prologue[slot].n + 1 > TUNER_MAX_STEPS)
            return 0;
        /* The value must have x's shape (a prologue runs per element of the input it loads).
         * where's value is its `a` (mask_step_for); a comparison swaps sides as add does. */
        tuner_ew_kind kind = p->step.kind;
        int value = p->in[0], operand = p->n_in > 1 ? p->in[1] : -1, other = -1;
        if (kind == TUNER_EW_WHERE) {
            value = p->in[1];
            operand = p->in[0];
            other = p->in[2];
        } else if (operand >= 0 && !same_shape(&c->p->tensors[value].t, &xt->t) &&
                   (commutes(kind) || tuner_ew_is_compare(kind))) {
            value = p->in[1];
            operand = p->in[0];
            kind = tuner_ew_compare_swapped(kind);
        }
        if (!same_shape(&c->p->tensors[value].t, &xt->t) || value == operand || value == other)
            return 0;
        growing next = *k;
        next.request = NULL;
        tuner_ew_step s = p->step;
        s.kind = kind;
        s.operand = -1;
        if (operand >= 0) {
            int idx = operand_index(&next.op, next.bound, operand, &c->p->tensors[operand].t,
                                    k->op.n_anchor_inputs);
            if (idx < 0)
                return 0;
            s.operand = idx;
        }
        if (other >= 0) {
            int idx = operand_index(&next.op, next.bound, other, &c->p->tensors[other].t, k->op.n_anchor_inputs);
            if (idx < 0)
                return 0;
            s.operand2 = idx;
        }
        tuner_ew_chain *ch = &next.op.prologue[slot];
        memmove(&ch->steps[1], &ch->steps[0], sizeof(ch->steps[0]) * (size_t)ch->n);
        ch->steps[0] = s;
        ch->n++;
        next.op.inputs[slot] = c->p->tensors[value].t;
        next.bound[slot] = value;
        if (!take_grown(c, k, &next, k->out, pk))
            return 0;
    }
}

static int add_kernel(part *c, growing *k)
{
    graph_plan *p = c->p;
    if (graph__reserve((void **)&p->kernels, &p->cap_kernels, p->n_kernels, sizeof(*p->kernels)) < 0)
        return -ENOMEM;
    const int idx = p->n_kernels;
    graph_kernel *gk = &p->kernels[idx];
    memset(gk, 0, sizeof(*gk));
    p->n_kernels++; /* counted now, so that graph_plan_free frees what it holds on failure */
    gk->request = k->request;
    k->request = NULL;
    gk->op = malloc(sizeof(*gk->op));
    int n_nodes = 0;
    for (int j = 0; j < k->n_prims; j++)
        n_nodes += 1 + c->prims[k->prims[j]].n_also;
    gk->nodes = malloc(sizeof(int) * (size_t)(n_nodes ? n_nodes : 1));
    if (!gk->op || !gk->nodes)
        return -ENOMEM;
    *gk->op = k->op;
    if (c->g->n_dims > 0) {
        /* The kernel resolved is its request's: its own dims, its axes as presented. */
        proto_error pe;
        if (proto_kernel_request_parse(gk->request, strlen(gk->request), c->scratch, &pe) < 0)
            return proto_fail(c->e, 500, "internal", "", "a kernel request of the plan does not parse: %.300s",
                              pe.message);
        *gk->op = c->scratch->op;
        if (gk->op->n_dims > 0) {
            if (!(gk->dyn = malloc(sizeof(*gk->dyn))))
                return -ENOMEM;
            *gk->dyn = c->scratch->dyn;
        }
    }
    gk->n_in = k->op.n_inputs;
    memcpy(gk->in, k->bound, sizeof(int) * (size_t)gk->n_in);
    gk->out = k->out;
    gk->prepare = k->is_constant;
    for (int j = 0; j < k->n_prims; j++) {
        const prim *pr = &c->prims[k->prims[j]];
        for (int a = -1; a < pr->n_also; a++) {
            int node = c->g->node_index[a < 0 ? pr->node : pr->also[a]];
            bool seen = false;
            for (int m = 0; m < gk->n_nodes && !seen; m++)
                seen = gk->nodes[m] == node;
            if (!seen)
                gk->nodes[gk->n_nodes++] = node;
        }
        c->prims[k->prims[j]].kernel = idx;
    }
    p->tensors[k->out].producer = idx;
    return 0;
}

static int unsupported(part *c, const prim *pr, const char *why)
{
    char field[48];
    int ci = c->g->node_index[pr->node];
    snprintf(field, sizeof(field), "nodes[%d]", ci);
    if (c->g->n_dims > 0 && c->why.message[0])
        /* A graph with names: the kernel level's reason (which axis, which op), as /v1/kernels
         * gives it for the kernel's request. */
        return proto_fail(c->e, 422, "unsupported", field, "node \"%.64s\": its kernel cannot take the names "
                          "where they stand: %.380s", c->g->nodes[pr->node].name, c->why.message);
    if (pr->kind != PRIM_ANCHOR && pr->kind != PRIM_STEP && pr->n_in > 0 &&
        tuner_dtype_is_fp8(c->p->tensors[pr->in[0]].t.dtype))
        return proto_fail(c->e, 422, "unsupported", field,
                          "node \"%.64s\": an FP8 tensor is not copied (no layout kernel moves FP8); a transpose of "
                          "its last two axes folds into the matmul that reads it, or cast it first",
                          c->g->nodes[pr->node].name);
    if (pr->kind == PRIM_ANCHOR && pr->op.kind == TUNER_OP_MATMUL && tuner_dtype_is_fp8(pr->op.inputs[0].dtype) &&
        c->fp8_why.message[0])
        return proto_fail(c->e, 422, "unsupported", field, "node \"%.64s\": an FP8 matmul: %.380s (at %.48s)",
                          c->g->nodes[pr->node].name, c->fp8_why.message, c->fp8_why.field);
    return proto_fail(c->e, 422, "unsupported", field, "node \"%s\": %s", c->g->nodes[pr->node].name,
                       why);
}

/* A kernel started from prim pk: it computes pk and writes pk's result; constant when every
 * input of pk is. The caller sets op and bound. NULL when out of memory. */
static growing *kernel_begin(part *c, int pk)
{
    prim *pr = &c->prims[pk];
    growing *k = calloc(1, sizeof(*k));
    if (!k)
        return NULL;
    k->out = pr->out;
    k->prims[k->n_prims++] = pk;
    pr->kernel = -2;
    k->is_constant = true;
    for (int d = 0; d < c->p->tensors[pr->out].t.rank; d++) /* a result with names: a run's sizes */
        k->is_constant = k->is_constant && !c->p->tensors[pr->out].t.sym[d];
    for (int j = 0; j < pr->n_in; j++)
        k->is_constant = k->is_constant && constant(c, pr->in[j]);
    return k;
}

/* Validates the started kernel (a graph that cannot be one is refused at its node with `why`),
 * grows its first `prologue_slots` prologues and its epilogue, and adds it. Frees k. */
static int kernel_finish(part *c, growing *k, int prologue_slots, const char *why)
{
    const prim *pr = &c->prims[k->prims[0]];
    int r;
    if (!op_valid(c, &k->op, &c->p->tensors[k->out].t, &k->request, &k->op)) {
        r = unsupported(c, pr, why);
    } else {
        for (int s = 0; s < prologue_slots; s++)
            grow_prologue(c, k, s);
        grow_epilogue(c, k);
        r = add_kernel(c, k);
    }
    free(k->request);
    free(k);
    return r;
}

static int anchor_kernel(part *c, int pk)
{
    prim *pr = &c->prims[pk];
    growing *k = kernel_begin(c, pk);
    if (!k)
        return -ENOMEM;
    k->op = pr->op;
    memcpy(k->bound, pr->in, sizeof(int) * (size_t)pr->n_in);
    /* softmax, the norms, reduce and concat take a prologue on x only (concat none at all:
     * the validator refuses it, so none is grown). */
    int slots = pr->op.kind == TUNER_OP_MATMUL || pr->op.kind == TUNER_OP_CONV2D ? 2 : 1;
    if (pr->op.kind == TUNER_OP_GATHER)
        slots = 0; /* gather takes no prologue: its table is read as is, its ids are integers */
    return kernel_finish(c, k, slots, "its kernel request is not valid after folding transposes");
}

/* Dense row-major strides of t. */
static void dense_strides(const tuner_tensor *t, int64_t *ret)
{
    int64_t s = 1;
    for (int d = t->rank - 1; d >= 0; d--) {
        ret[d] = s;
        s *= t->shape[d];
    }
}

/* A layout op whose copy the kernels cannot take with names: a pad of a named tensor (its
 * padding is at fixed coordinates) or a slice whose offset sums starts over axes whose strides
 * scale with different names. */
static int unsupported_named_copy(part *c, const prim *pr, int axis)
{
    char field[48], nm[80];
    const tuner_tensor *x = &c->p->tensors[pr->in[0]].t;
    const tuner_tensor *o = &c->p->tensors[pr->out].t;
    const unsigned sym = axis < x->rank && x->sym[axis] ? x->sym[axis] : axis < o->rank ? o->sym[axis] : 0;
    snprintf(field, sizeof(field), "nodes[%d]", c->g->node_index[pr->node]);
    return proto_fail(c->e, 422, "unsupported", field,
                      "node \"%.64s\": a %s of a tensor named on axis %d (%s) is a copy whose strides depend on the "
                      "names' sizes in a way the copy kernel cannot take (a padded copy; an offset summing starts "
                      "along axes whose strides scale with different names)", c->g->nodes[pr->node].name,
                      pr->kind == PRIM_TRANSPOSE ? "transpose" : pr->kind == PRIM_SLICE ? "slice"
                      : pr->kind == PRIM_EXPAND ? "expand" : "pad", axis,
                      sym ? graph_sym_text(c->g, sym, nm, sizeof(nm)) : "no name");
}

/* A transpose or a slice as a copy kernel (a strided read of x); it grows an epilogue like an
 * anchor. (A concat is a kernel op of its own, and an anchor.) */
static int layout_kernel(part *c, int pk)
{
    prim *pr = &c->prims[pk];
    const graph_node *n = &c->g->nodes[pr->node];
    growing *k = kernel_begin(c, pk);
    if (!k)
        return -ENOMEM;
    const tuner_tensor *x = &c->p->tensors[pr->in[0]].t;
    tuner_op *op = &k->op;
    op->kind = TUNER_OP_COPY;
    op->n_inputs = op->n_anchor_inputs = 1;
    op->inputs[0] = *x;
    op->output = c->p->tensors[pr->out].t;
    k->bound[0] = pr->in[0];
    /* With names, a stride is a coefficient times the sizes of the names after its axis in x
     * (dense_sym), which the copy kernel reads at launch (attrs.copy.stride_sym, offset_sym); a
     * padded copy and an offset summing two different products of names are refused. */
    uint8_t xsym[TUNER_MAX_RANK] = {0};
    bool named = false;
    for (int d = 0; d < x->rank; d++)
        named = named || x->sym[d];
    for (int d = 0; d < op->output.rank; d++)
        named = named || op->output.sym[d];
    if (named && pr->kind == PRIM_PAD) {
        int d = 0;
        while (d < x->rank - 1 && !x->sym[d])
            d++;
        free(k);
        return unsupported_named_copy(c, pr, d);
    }
    for (int d = x->rank - 2; d >= 0 && named; d--)
        xsym[d] = (uint8_t)(xsym[d + 1] | x->sym[d + 1]);
    int64_t xs[TUNER_MAX_RANK];
    dense_strides(x, xs);
    memcpy(op->attrs.copy.shape_sym, op->output.sym, sizeof(op->attrs.copy.shape_sym));
    if (pr->kind == PRIM_EXPAND) {
        /* Output axis d is x's axis d - lead; new axes and size-1 axes read with stride 0. */
        const int lead = op->output.rank - x->rank;
        for (int d = 0; d < op->output.rank; d++) {
            const bool zero = d < lead || (x->shape[d - lead] == 1 && !x->sym[d - lead]);
            op->attrs.copy.strides[d] = zero ? 0 : xs[d - lead];
            op->attrs.copy.stride_sym[d] = zero ? 0 : xsym[d - lead];
        }
        return kernel_finish(c, k, 0, "this expand is not a valid copy kernel");
    }
    for (int d = 0; d < x->rank; d++) {
        if (pr->kind == PRIM_TRANSPOSE) {
            op->attrs.copy.strides[d] = xs[pr->perm[d]];
            op->attrs.copy.stride_sym[d] = xsym[pr->perm[d]];
        } else if (pr->kind == PRIM_PAD) {
            /* A negative pad crops (an offset into x); a positive one pads the copy. */
            const int64_t b = n->pad_before[d], a = n->pad_after[d];
            op->attrs.copy.offset += (b < 0 ? -b : 0) * xs[d];
            op->attrs.copy.strides[d] = xs[d];
            op->attrs.copy.pad_lower[d] = b > 0 ? b : 0;
            op->attrs.copy.pad_upper[d] = a > 0 ? a : 0;
            op->attrs.copy.padded = op->attrs.copy.padded || b > 0 || a > 0;
        } else {
            if (n->start[d] && op->attrs.copy.offset && xsym[d] != op->attrs.copy.offset_sym) {
                free(k);
                return unsupported_named_copy(c, pr, d);
            }
            if (n->start[d])
                op->attrs.copy.offset_sym = xsym[d];
            op->attrs.copy.offset += n->start[d] * xs[d];
            op->attrs.copy.strides[d] = n->stride[d] * xs[d];
            op->attrs.copy.stride_sym[d] = xsym[d];
        }
    }
    if (op->attrs.copy.padded)
        op->attrs.copy.pad_value = n->pad_value;
    return kernel_finish(c, k, 0, "this layout op is not a valid copy kernel");
}

static int step_kernel(part *c, int pk)
{
    prim *pr = &c->prims[pk];
    growing *k = kernel_begin(c, pk);
    if (!k)
        return -ENOMEM;
    k->op.kind = TUNER_OP_ELEMENTWISE;
    k->op.n_inputs = 1;
    k->op.n_anchor_inputs = 1;
    /* where's value is its `a` (inputs [cond, a, b]); every other step's is its first input. */
    const bool where = pr->step.kind == TUNER_EW_WHERE;
    const int x = pr->in[where ? 1 : 0];
    k->op.inputs[0] = c->p->tensors[x].t;
    k->bound[0] = x;
    tuner_ew_step s = pr->step;
    s.operand = -1;
    if (where) {
        s.operand = operand_index(&k->op, k->bound, pr->in[0], &c->p->tensors[pr->in[0]].t, 0);
        s.operand2 = operand_index(&k->op, k->bound, pr->in[2], &c->p->tensors[pr->in[2]].t, 0);
    } else if (pr->n_in > 1) {
        s.operand = operand_index(&k->op, k->bound, pr->in[1], &c->p->tensors[pr->in[1]].t, 0);
    }
    k->op.epilogue.steps[k->op.epilogue.n++] = s;
    return kernel_finish(c, k, 0, "this step cannot be expressed as an elementwise kernel");
}

/* A copy of tensor src into dst (an output that must own its memory). */
static int copy_kernel(part *c, int src, int dst)
{
    growing *k = calloc(1, sizeof(*k));
    if (!k)
        return -ENOMEM;
    k->op.kind = TUNER_OP_ELEMENTWISE;
    k->op.n_inputs = 1;
    k->op.n_anchor_inputs = 1;
    k->op.inputs[0] = c->p->tensors[dst].t;
    k->op.inputs[0].dtype = c->p->tensors[src].t.dtype;
    k->bound[0] = src;
    k->out = dst;
    int r = 0;
    if (op_valid(c, &k->op, &c->p->tensors[dst].t, &k->request, &k->op))
        r = add_kernel(c, k);
    else if (c->g->n_dims > 0) /* names where no elementwise kernel takes them ([768, "b*s"]) */
        r = proto_fail(c->e, 422, "unsupported", "graph.outputs",
                       "output \"%.64s\" must be copied out of \"%.64s\", and no kernel can copy it with its names "
                       "where they stand: %.300s", c->p->tensors[dst].name, c->p->tensors[src].name, c->why.message);
    else
        r = proto_fail(c->e, 500, "internal", "", "a copy of \"%s\" is not a valid kernel",
                        c->p->tensors[src].name);
    free(k->request);
    free(k);
    return r;
}

/* ---- prefixes of prepared values ---------------------------------------------------------------- */

/* A static graph computes a value cut from weights in the prepare phase (BERT's position and
 * token-type embeddings at [1, 128, 768]); with names the cut has the run's sizes, so it was a
 * step of every run: a copy of the prepared table's first s rows, or a gather of s token-type
 * ids. Both become prepare work and a view, as the static plan has them:
 *  - a slice to a name whose result is a prefix of a constant value's memory (graph__named_
 *    prefix_slice; the value is prepared into its own buffer, whole - not an output's - and never
 *    re-homed into one: home_outputs leaves prepared values where they are) is a prefix view of it;
 *  - a gather along axis 0 of a constant table by ids that are the first elements of constant
 *    ids (a prefix view, every axis before its cut of size 1, possibly reshaped: GPT-2's
 *    arange(0, 1024)[:s] viewed as [1, s]) gathers all the ids (prepared) and views the first
 *    rows of that: each index element selects its own row, in the index's order.
 * The view reads the first elements of memory computed in full once. Runs after the first
 * analyse(); returns how many it rewrote (analyse() must run again then). */
static int view_prepared_prefixes(part *c)
{
    int n = 0;
    const int n_prims = c->n_prims;
    for (int k = 0; k < n_prims; k++) {
        prim *pr = &c->prims[k];
        if (!pr->live || pr->kind != PRIM_SLICE || c->p->tensors[pr->out].is_output ||
            !graph__named_prefix_slice(c->g, pr->node))
            continue;
        const graph_plan_tensor *root = &c->p->tensors[root_of(c->p, pr->in[0])];
        if (root->kind != GRAPH_T_VALUE || root->is_output || !constant(c, pr->in[0]))
            continue;
        pr->kind = PRIM_VIEW;
        pr->prefix = true;
        c->p->tensors[pr->out].view_of = pr->in[0];
        n++;
    }
    for (int k = 0; k < n_prims; k++) {
        const prim *pr = &c->prims[k];
        if (!pr->live || pr->kind != PRIM_ANCHOR || pr->op.kind != TUNER_OP_GATHER || pr->op.attrs.gather.axis != 0 ||
            pr->n_in != 2 || c->p->tensors[pr->out].is_output || !constant(c, pr->in[0]))
            continue;
        /* Back from the index over views - reshapes (the same memory) and prefixes (its first
         * elements): the index is the first elements of whole_ids, cut where a prefix is met. */
        int whole_ids = pr->in[1], ik;
        bool cut = false;
        while ((ik = c->producer[whole_ids]) >= 0 && c->prims[ik].kind == PRIM_VIEW) {
            cut = cut || c->prims[ik].prefix;
            whole_ids = c->prims[ik].in[0];
        }
        if (!cut || !constant(c, whole_ids))
            continue;
        /* The whole index as the gather reads it (copied: made_tensor may move the tensors). */
        const tuner_tensor *wi = &c->p->tensors[whole_ids].t, *table = &pr->op.inputs[0];
        bool named = false;
        for (int d = 0; d < wi->rank; d++)
            named = named || wi->sym[d];
        if (named || wi->rank + table->rank - 1 > TUNER_MAX_RANK)
            continue;
        tuner_tensor ids = pr->op.inputs[1];
        ids.rank = wi->rank;
        memset(ids.shape, 0, sizeof(ids.shape));
        memset(ids.sym, 0, sizeof(ids.sym));
        memcpy(ids.shape, wi->shape, sizeof(int64_t) * (size_t)wi->rank);
        /* The result over the whole index: its shape, then the table's row. */
        tuner_tensor w = pr->op.output;
        w.rank = wi->rank + table->rank - 1;
        memset(w.shape, 0, sizeof(w.shape));
        memset(w.sym, 0, sizeof(w.sym));
        memcpy(w.shape, wi->shape, sizeof(int64_t) * (size_t)wi->rank);
        memcpy(w.shape + wi->rank, table->shape + 1, sizeof(int64_t) * (size_t)(table->rank - 1));
        const int wt = made_tensor(c, pr->node, "whole", &w);
        if (wt < 0)
            return wt;
        const int out = pr->out;
        prim *v = new_prim(c, PRIM_VIEW, c->prims[k].node, out);
        if (!v)
            return -ENOMEM;
        v->in[0] = wt;
        v->n_in = 1;
        v->prefix = true;
        prim *g = &c->prims[k]; /* new_prim may have moved the prims */
        g->in[1] = whole_ids;
        g->op.inputs[1] = ids;
        g->op.output = w;
        g->out = wt;
        c->p->tensors[out].view_of = wt;
        n++;
    }
    return n;
}

/* ---- outputs own their memory ------------------------------------------------------------------- */

/* An output that is a view (a reshape) of a value only it shows takes that value's memory: the
 * producer writes into the caller's buffer. An output viewing an input, a weight, another output
 * or a value shown twice gets a copy. */
static int home_outputs(part *c)
{
    graph_plan *p = c->p;
    for (int o = 0; o < p->n_tensors; o++) {
        graph_plan_tensor *ot = &p->tensors[o];
        if (!ot->is_output || ot->view_of < 0)
            continue;
        int root = root_of(p, o);
        graph_plan_tensor *rt = &p->tensors[root];
        bool own = rt->kind == GRAPH_T_VALUE && !rt->is_output && rt->producer >= 0 &&
                   !p->kernels[rt->producer].prepare;
        if (own) {
            /* The value becomes a view of the output: same memory, the output's name. */
            for (int t = 0; t < p->n_tensors && own; t++) {
                if (t == o || p->tensors[t].view_of < 0 || root_of(p, t) != root)
                    continue;
                /* A view on the output's own chain (o -> t -> ... -> root) stays a view of the
                 * same memory; another view of it: keep it simple and copy. */
                bool on_chain = false;
                for (int u = p->tensors[o].view_of; u >= 0 && !on_chain; u = p->tensors[u].view_of)
                    on_chain = u == t;
                own = on_chain;
            }
        }
        if (own) {
            ot->view_of = -1;
            ot->producer = rt->producer;
            rt->view_of = o;
            rt->producer = -1;
            p->kernels[ot->producer].out = o;
            continue;
        }
        ot->view_of = -1;
        int r = copy_kernel(c, root, o);
        if (r < 0)
            return r;
    }
    /* An output that is a graph input or weight itself: a copy. */
    for (int o = 0; o < p->n_tensors; o++) {
        graph_plan_tensor *ot = &p->tensors[o];
        if (ot->is_output && ot->kind != GRAPH_T_VALUE)
            return proto_fail(c->e, 422, "invalid_graph", "graph.outputs",
                               "\"%s\" is a graph input or weight; an output must be computed",
                               ot->name);
    }
    return 0;
}

/* ---- order -------------------------------------------------------------------------------------- */

/* Kernels in an order where each comes after the producers of what it reads, prepare kernels
 * first: passes over the kernels placing every ready one, until a pass places none (kernels are
 * built in dataflow order, so a pass or two usually suffices). */
static int order_kernels(part *c)
{
    graph_plan *p = c->p;
    int n = p->n_kernels;
    p->order = malloc(sizeof(int) * (size_t)(n ? n : 1));
    bool *done = calloc((size_t)(n ? n : 1), sizeof(bool));
    if (!p->order || !done) {
        free(done);
        return -ENOMEM;
    }
    int placed = 0;
    for (int phase = 0; phase < 2; phase++) {
        bool want_prepare = phase == 0;
        for (bool progress = true; progress;) {
            progress = false;
            for (int k = 0; k < n; k++) {
                if (done[k] || p->kernels[k].prepare != want_prepare)
                    continue;
                bool ready = true;
                for (int j = 0; j < p->kernels[k].n_in && ready; j++) {
                    int pk = p->tensors[root_of(p, p->kernels[k].in[j])].producer;
                    ready = pk < 0 || done[pk];
                }
                if (!ready)
                    continue;
                done[k] = true;
                p->order[placed++] = k;
                progress = true;
            }
        }
        if (want_prepare)
            p->n_prepare = placed;
    }
    free(done);
    if (placed != n)
        return proto_fail(c->e, 500, "internal", "", "the kernels of the graph form a cycle");
    return 0;
}

/* p->node_names: the graph's node names by the client's index, in one allocation. */
static int name_nodes(const graph *g, graph_plan *p)
{
    size_t bytes = 0;
    for (int i = 0; i < g->n_nodes; i++)
        bytes += strlen(g->nodes[i].name) + 1;
    p->node_names = malloc(sizeof(char *) * ((size_t)g->n_nodes + 1) + bytes);
    if (!p->node_names)
        return -ENOMEM;
    char *at = (char *)(p->node_names + g->n_nodes + 1);
    for (int i = 0; i < g->n_nodes; i++) {
        size_t n = strlen(g->nodes[i].name) + 1;
        memcpy(at, g->nodes[i].name, n);
        p->node_names[g->node_index[i]] = at;
        at += n;
    }
    p->node_names[g->n_nodes] = NULL;
    p->n_node_names = g->n_nodes;
    return 0;
}

int graph_partition(const graph *g, const tuner_target *t, graph_plan *ret, proto_error *ret_err)
{
    memset(ret, 0, sizeof(*ret));
    part c = {.g = g, .target = t, .p = ret, .e = ret_err};
    c.scratch = malloc(sizeof(*c.scratch));
    c.flat = malloc(sizeof(*c.flat));
    int r = c.scratch && c.flat ? lower(&c) : -ENOMEM;
    if (r == 0)
        r = analyse(&c);
    if (r == 0 && c.g->n_dims > 0 && (r = view_prepared_prefixes(&c)) > 0)
        r = analyse(&c);
    if (r == 0) {
        fold_transposes(&c);
        fold_expands(&c);
        r = analyse(&c);
    }
    if (r == 0 && (r = fold_gelu(&c)) > 0)
        r = analyse(&c);
    /* The attention rewrites view tensors under shapes of their own (rank 4, heads split); with
     * names, the views carry them (a rewrite whose views could not is not made). */
    if (r == 0 && (r = fold_attention(&c)) > 0)
        r = analyse(&c);
    if (r == 0 && (r = fold_attention_layout(&c)) > 0)
        r = analyse(&c);
    if (r == 0 && (r = fold_attention_packed(&c)) > 0)
        r = analyse(&c);
    while (r == 0 && (r = sink_views(&c)) > 0)
        r = analyse(&c);
    if (r == 0 && (r = split_upcasts(&c)) > 0)
        r = analyse(&c);
    for (int k = 0; r == 0 && k < c.n_prims; k++) {
        const prim *pr = &c.prims[k];
        if (!pr->live || pr->kernel != -1)
            continue;
        if (pr->kind == PRIM_ANCHOR)
            r = anchor_kernel(&c, k);
        else if (pr->kind == PRIM_TRANSPOSE || pr->kind == PRIM_SLICE || pr->kind == PRIM_EXPAND ||
                 pr->kind == PRIM_PAD)
            r = layout_kernel(&c, k);
    }
    for (int k = 0; r == 0 && k < c.n_prims; k++)
        if (c.prims[k].live && c.prims[k].kind == PRIM_STEP && c.prims[k].kernel == -1)
            r = step_kernel(&c, k);
    if (r == 0)
        r = home_outputs(&c);
    if (r == 0)
        r = order_kernels(&c);
    if (r == 0)
        r = name_nodes(g, ret);
    if (r == -ENOMEM)
        proto_fail(ret_err, 500, "internal", "", "out of memory partitioning the graph");
    free(c.prims);
    free(c.producer);
    free(c.uses);
    free(c.is_const);
    free(c.scratch);
    free(c.flat);
    if (r < 0)
        graph_plan_free(ret);
    return r;
}

void graph_plan_free(graph_plan *p)
{
    if (!p)
        return;
    for (int k = 0; k < p->n_kernels; k++) {
        free(p->kernels[k].op);
        free(p->kernels[k].dyn);
        free(p->kernels[k].request);
        free(p->kernels[k].nodes);
    }
    free(p->kernels);
    free(p->tensors);
    free(p->order);
    free(p->node_names);
    memset(p, 0, sizeof(*p));
}

size_t graph_plan_bytes(const graph_plan *p)
{
    size_t b = graph__chunk(sizeof(*p->tensors) * (size_t)p->cap_tensors) +
               graph__chunk(sizeof(*p->kernels) * (size_t)p->cap_kernels) +
               graph__chunk(sizeof(int) * ((size_t)p->n_kernels + 1));
    if (p->node_names) {
        size_t names = sizeof(char *) * ((size_t)p->n_node_names + 1);
        for (int i = 0; i < p->n_node_names; i++)
            names += strlen(p->node_names[i]) + 1;
        b += graph__chunk(names);
    }
    for (int k = 0; k < p->n_kernels; k++) {
        const graph_kernel *gk = &p->kernels[k];
        b += gk->op ? graph__chunk(sizeof(*gk->op)) : 0;
        b += gk->dyn ? graph__chunk(sizeof(*gk->dyn)) : 0;
        b += gk->request ? graph__chunk(strlen(gk->request) + 1) : 0;
        b += graph__chunk(sizeof(int) * (size_t)(gk->n_nodes ? gk->n_nodes : 1));
    }
    return b;
}
