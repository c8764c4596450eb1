/* graph/graph.h - model graphs in, fused kernel requests and a launch plan out.
 *
 * A client's graph (POST /v1/graphs, docs/graphs.md) names its tensors - inputs, weights and
 * the values its nodes produce - and its nodes, in the spirit of ONNX. This module
 *
 *   1. parses and validates the whole graph (graph_parse): strict JSON, every tensor produced
 *      once and read only after it exists, no cycles, shapes and dtypes inferred node by node;
 *      a kernel op's node is checked by the very validator of /v1/kernels (proto/request.h), so
 *      a graph accepts exactly what a kernel request would;
 *   2. partitions it into kernels (graph_partition), Hidet's post-scheduling fusion at the graph
 *      level: every anchor (matmul, conv2d, softmax, layernorm, rmsnorm, reduce) absorbs the
 *      single-use injective consumers of its result as its epilogue and the injective producers
 *      used only by it as prologues; transposes of a matmul operand's last two axes become its
 *      trans_a/trans_b; reshapes are views (no kernel); an inference batchnorm becomes a
 *      per-channel scale and shift, computed once from its statistics, that fuses like any
 *      other step; what is left of injective chains becomes one elementwise kernel each. Every
 *      fused kernel is an ordinary kernel request, validated by proto before it is accepted:
 *      a fusion the request language cannot express is not made (the steps stay separate
 *      kernels), so fusion never produces a wrong kernel. Kernels whose inputs are all weights
 *      (or results of such kernels) form the plan's "prepare" phase, run once per set of
 *      weights;
 *   3. plans them (graph_plan): steps in a dependency order, every kernel argument bound to a
 *      graph tensor or an intermediate buffer, intermediates placed in one arena where buffers
 *      whose lifetimes do not overlap share memory.
 *
 * Nothing here blocks, logs or keeps global state; graph/service.h resolves the kernels.
 */
#ifndef HIDET_GRAPH_GRAPH_H
#define HIDET_GRAPH_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "op/op.h"
#include "proto/request.h"

#define GRAPH_MAX_NODES 4096
#define GRAPH_MAX_TENSORS 8192
#define GRAPH_NAME_MAX 128      /* bytes of a tensor or node name */
#define GRAPH_MAX_NODE_INPUTS 8 /* a concat joins at most this many (TUNER_MAX_INPUTS) */
#define GRAPH_ARENA_ALIGN 256   /* every buffer's offset in the arena is a multiple of this */

typedef enum {
    GRAPH_T_INPUT = 0, /* given by the caller on every run */
    GRAPH_T_WEIGHT,    /* given by the caller once (the prepare phase reads only these) */
    GRAPH_T_VALUE,     /* produced by a node */
} graph_tensor_kind;

typedef struct graph_tensor {
    char name[GRAPH_NAME_MAX + 1];
    graph_tensor_kind kind;
    tuner_tensor t; /* shape and dtype (align: 16, as device allocations are) */
    int producer;   /* node index; -1 for inputs and weights */
    int n_uses;     /* node input slots that read it */
    bool is_output; /* named in the graph's "outputs" */
} graph_tensor;

typedef enum {
    GRAPH_NODE_KERNEL = 0, /* an op of /v1/kernels (matmul, conv2d, softmax, ..., concat) */
    GRAPH_NODE_STEP,       /* a fused step as a node of its own (add, gelu, cast, ...) */
    GRAPH_NODE_RESHAPE,
    GRAPH_NODE_TRANSPOSE,
    GRAPH_NODE_SLICE,
    GRAPH_NODE_BATCHNORM, /* inference form: x, scale, bias, mean, var */
    /* issue 37's shape nodes (graph/infer.c checks them, graph/partition.c lowers them): */
    GRAPH_NODE_EXPAND,       /* torch.expand to the output's shape: a copy with zero strides, or
                              * nothing when every reader broadcasts anyway */
    GRAPH_NODE_PAD,          /* F.pad, constant mode: a padded copy */
    GRAPH_NODE_REDUCE_AXES,  /* reduce over a set of axes that is not one range: a chain of
                              * reduce kernels (a range is a GRAPH_NODE_KERNEL reduce) */
    GRAPH_NODE_SOFTMAX_AXIS, /* softmax / log_softmax over an axis before the last: transposes
                              * around a last-axis softmax (a view when the axes after it are 1) */
} graph_node_class;

typedef struct graph_node {
    char name[GRAPH_NAME_MAX + 1];
    graph_node_class cls;
    int n_in;
    int in[GRAPH_MAX_NODE_INPUTS]; /* tensor indices */
    int out;
    /* GRAPH_NODE_KERNEL: the node as a validated single-kernel request (inputs, attributes,
     * inferred output); partitioning adds prologues and epilogues to copies of it. */
    tuner_op op;
    /* GRAPH_NODE_STEP: kind and parameters (operand unused: a binary step reads in[1]). */
    tuner_ew_step step;
    bool step_fixed;          /* STEP: relu6, a clamp whose bounds take no attribute */
    int perm[TUNER_MAX_RANK]; /* TRANSPOSE */
    int axis;                 /* BATCHNORM: the channel axis */
    int64_t start[TUNER_MAX_RANK], stop[TUNER_MAX_RANK], stride[TUNER_MAX_RANK]; /* SLICE */
    double eps;               /* BATCHNORM */
    /* PAD: torch's pads per axis (negative crops) and the value; SOFTMAX_AXIS uses `axis`. */
    int64_t pad_before[TUNER_MAX_RANK], pad_after[TUNER_MAX_RANK];
    double pad_value;
    unsigned reduce_axes;         /* REDUCE_AXES: bit d set for every reduced axis d */
    tuner_reduce_kind reduce_kind; /* REDUCE_AXES */
    bool keepdim;                 /* REDUCE_AXES */
    bool log;                     /* SOFTMAX_AXIS, and a log_softmax KERNEL node before inference */
    /* KERNEL: the name the node gave when it is an alias of a kernel op ("embedding" and
     * "index_select" are gathers; graph/infer.c applies their own rules), else NULL. */
    const char *alias;
} graph_node;

/* A parsed, validated graph. Nodes are kept in a dependency order (every node after the
 * producers of its inputs), whatever order the client wrote them in; node_index maps back. */
typedef struct graph {
    int n_tensors, n_nodes;
    graph_tensor *tensors;
    graph_node *nodes;
    int *node_index; /* nodes[i] was the client's "nodes"[node_index[i]] */
    int n_inputs, n_weights, n_outputs;
    int *outputs; /* tensor indices, in the client's order */
    /* Named dimensions (docs/graphs.md, "Named dimensions"): the body's "dims", sorted by name
     * as proto sorts a kernel's, and their hints. Every tensor's sym bits are over these dims; a
     * named axis's shape holds the product of its dims' max, so every size computed here (the
     * arena, the buffers) is the largest the plan serves. n_dims 0: a static graph. */
    int n_dims;
    tuner_dim dims[TUNER_MAX_DIMS];
    proto_dynamic dyn; /* hints only (the sizes are the request's, not the graph's) */
} graph;

/* What a request asked for beyond the graph. */
typedef struct graph_request {
    graph g;
    proto_job_options opt; /* as a kernel request's (the budget applies per kernel); retune is
                            * always false: a graph body cannot ask for it */
    bool has_sizes;        /* "sizes": the size of every name, about to be run (range jobs) */
    int64_t sizes[TUNER_MAX_DIMS];
} graph_request;

/* Parses and validates a POST /v1/graphs body of len bytes. Returns 0 and fills *ret (free it
 * with graph_request_free), -EINVAL with *ret_err filled (the status, code, message and field
 * the API answers with, e.g. 422 "nodes[3].inputs[1]"), or -ENOMEM. */
int graph_request_parse(const char *body, size_t len, graph_request *ret, proto_error *ret_err);
void graph_request_free(graph_request *rq);

/* ---- partitioning ---------------------------------------------------------------------------- */

/* One fused kernel: an ordinary kernel request and what its arguments are bound to. */
typedef struct graph_kernel {
    /* Validated by proto (the request below parses to it). malloc'd, owned by the plan; a holder
     * that needs only some kernels' ops may free the others and set them NULL (graph/service.c
     * keeps one op per distinct request: a tuner_op is 4 KB). */
    tuner_op *op;
    char *request;  /* the /v1/kernels body of the kernel, without arch and tune options */
    int n_in;
    int in[TUNER_MAX_INPUTS]; /* plan tensor bound to inputs<i> */
    int out;                  /* plan tensor bound to output */
    bool prepare;             /* reads only weights and prepared values: run once */
    /* A kernel with named dimensions: its op (above) is the request's as proto parses it (its own
     * dims, a subset of the graph's, leading named axes merged), and this its hints (malloc'd,
     * owned by the plan); NULL for a static kernel. */
    proto_dynamic *dyn;
    int n_nodes;
    int *nodes;               /* the client's node indices it computes (for names) */
} graph_kernel;

/* The plan's tensors: the graph's own (same indices), then values partitioning made (batchnorm's
 * scale and shift). A reshape's result is a view of another tensor (view_of >= 0): it has no
 * memory of its own. */
typedef struct graph_plan_tensor {
    char name[GRAPH_NAME_MAX + 32]; /* a client's name, or one the plan makes (with '#') */
    tuner_tensor t;
    graph_tensor_kind kind;
    bool is_output;
    int view_of;        /* -1, or the tensor whose memory it is */
    int producer;       /* kernel index, -1 */
    /* Placement (graph_plan): the region and offset of an intermediate or a prepared value. */
    int region;         /* GRAPH_REGION_* */
    uint64_t offset, bytes;
    int first, last;    /* steps (forward) that write it first and read it last */
} graph_plan_tensor;

enum {
    GRAPH_REGION_CALLER = 0, /* an input, a weight or an output: the caller's memory */
    GRAPH_REGION_ARENA,      /* an intermediate of the forward steps */
    GRAPH_REGION_CONSTANTS,  /* a value of the prepare phase, kept with the weights */
    GRAPH_REGION_WORKSPACE,  /* a kernel's workspace, in the arena (sized from its answer) */
};

typedef struct graph_plan {
    int n_tensors, cap_tensors;
    graph_plan_tensor *tensors;
    int n_kernels, cap_kernels;
    graph_kernel *kernels;
    int *order;     /* kernel indices in execution order: prepare kernels first */
    int n_prepare;  /* the first n_prepare of order are the prepare phase */
    uint64_t arena_bytes, constants_bytes;
    /* The graph's node names by the client's node index (into one allocation, node_names[0]),
     * so that rendering and error messages need neither the graph's nodes nor a search. */
    int n_node_names;
    char **node_names;
} graph_plan;

/* Partitions a validated graph into fused kernels for target t and orders them. Returns 0, -EINVAL
 * with *ret_err (a graph the kernels cannot express: a layout op that fuses nowhere, and the
 * node it is), or -ENOMEM. Free with graph_plan_free. */
int graph_partition(const graph *g, const tuner_target *t, graph_plan *ret, proto_error *ret_err);

/* Places the intermediates once each kernel's workspace size is known (workspace[k] for kernel
 * k, in bytes): lifetimes over the forward steps, then greedy first-fit by size into one arena
 * (GRAPH_ARENA_ALIGN), buffers whose lifetimes overlap never sharing a byte. Workspaces become
 * tensors of their own (GRAPH_REGION_WORKSPACE). Returns 0 or -ENOMEM. */
int graph_plan_place(graph_plan *p, const uint64_t *workspace);

/* For kernel k, the plan tensor of its workspace, or -1 (after graph_plan_place). */
int graph_plan_workspace_of(const graph_plan *p, int k);

void graph_plan_free(graph_plan *p);

/* The heap bytes p holds (arrays, requests, ops, names), each allocation counted with the
 * allocator's per-chunk overhead: what keeping the plan costs, for the plan cache's byte bound. */
size_t graph_plan_bytes(const graph_plan *p);
/* The same for a parsed graph (tensors, nodes, outputs). */
size_t graph_bytes(const graph *g);
/* Frees a graph's nodes (4.5 KB each) and trims its tensors to those it has, once the nodes are
 * no longer needed: after graph_canonical and graph_partition, rendering a plan reads only the
 * graph's tensors and outputs. n_nodes is kept (for counts); nodes and node_index become NULL. */
void graph_compact(graph *g);

/* The plan's JSON (docs/graphs.md): the graph's tensors (rq->g's tensors and outputs; its nodes
 * are not read, names come from p->node_names), "arena_bytes", "constants_bytes",
 * "buffers" (offsets and sizes), "prepare" and "steps" in execution order, each with the nodes it
 * computes, its kernel request, its kernel set (kernel_sets[k]: kernel k's /v1/kernels answer,
 * parsed, copied in as is; NULL writes null) and "bindings" from input<i>/output/workspace to
 * buffer or tensor names. Call after graph_plan_place. 0 and a malloc'd string in *ret, or
 * -ENOMEM. */
struct cJSON;
int graph_plan_render(const graph_request *rq, const graph_plan *p, const struct cJSON *const *kernel_sets,
                      const char *graph_key, char **ret);

/* The bytes a dense tensor takes. */
uint64_t graph_tensor_bytes(const tuner_tensor *t);

/* A canonical text of the graph (names, shapes, dtypes, nodes with normalised attributes, in
 * the client's node order), hashed to key the plan cache: two bodies that mean the same graph
 * give the same text. malloc'd, NULL when out of memory. */
char *graph_canonical(const graph *g);

/* The text of a sym bit set over g's dims: "n", "b*s" (into buf, returned). */
char *graph_sym_text(const graph *g, unsigned mask, char *buf, size_t len);

#endif
