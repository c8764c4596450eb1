/* graph/graph_int.h - what graph/'s files share and nothing else includes. */
#ifndef HIDET_GRAPH_GRAPH_INT_H
#define HIDET_GRAPH_GRAPH_INT_H

#include "graph/graph.h"

typedef struct cJSON cJSON;

/* Checks node i (in dependency order; its inputs' shapes are known) with its attributes and
 * infers its output tensor (graph/infer.c). */
int graph__infer_node(graph *g, int i, const cJSON *attrs, proto_error *e);

/* Room for one more item in a growing array (*items of *cap items of `size` bytes, n used),
 * doubling it when full. 0 or -ENOMEM (then *items is unchanged). */
int graph__reserve(void **items, int *cap, int n, size_t size);

/* The heap bytes malloc(n) takes (glibc: 8 bytes of header, chunks rounded up to 16 bytes), for
 * the byte accounting of entries and plans; 0 for 0. */
static inline size_t graph__chunk(size_t n)
{
    return n ? (n + 8 + 15) / 16 * 16 : 0;
}

/* numpy broadcasting of a and b: whether they broadcast, the result's shape into out. */
bool graph__broadcast(const tuner_tensor *a, const tuner_tensor *b, tuner_tensor *out);

/* The /v1/kernels request body of an op (inputs, attributes, prologue, epilogue; no options),
 * as proto_kernel_request_parse reads it back to the same op. malloc'd, NULL when out of memory. */
char *graph__op_request(const tuner_op *op);

/* The request of an op over g's tensors (sym bits over g's dims): names where its axes are
 * named, a "dims" object of the names it uses (g's ranges and hints), and its leading named
 * axes merged into one where the kernel allows ([b, s, 768] -> ["b*s", 768]: the kernels take
 * names on axis 0). *ret_flat (may be NULL) gets the op as presented. A static g: exactly
 * graph__op_request. malloc'd, NULL when out of memory. */
char *graph__op_request_in(const tuner_op *op, const graph *g, tuner_op *ret_flat);

/* Whether slice node i (inferred) is a slice to a name whose result is the first elements of its
 * input's memory: one fixed axis cut to [0, name), every axis before it of size 1, every other
 * axis whole. Such a slice is a view where its input's memory is the caller's whole (partition). */
bool graph__named_prefix_slice(const graph *g, int i);

#endif
