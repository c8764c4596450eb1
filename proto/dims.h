/* proto/dims.h - named dimensions in kernel requests (internal to proto/; docs/api.md, "Named
 * dimensions").
 *
 * A request may name an axis ("shape": ["n", 4096]) and give each name's range in "dims". The
 * names become tuner_op.dims (sorted by name: the canonical order, which is also the order of the
 * kernels' size parameters) and each named axis a bit set in tuner_tensor.sym, its shape the
 * product of the dims' max. What the request adds beyond the op - the sizes worth tuning ahead
 * ("hints") and the size about to be launched ("sizes") - says how to fill the dispatch table,
 * not which kernel, so it stays out of the op and its key: proto_dynamic.
 *
 * The rules of this version: a name stands only where the op's kernels take a size at launch -
 * any axis of elementwise (broadcasting against the same name or 1), x's axes before the last in
 * softmax, layernorm and rmsnorm, the axes before the reduced ones in reduce, and axis 0 of
 * matmul's a (M of an untransposed [M, K] a, or the batch of a [batch, M, K] a) - and on one axis
 * of a tensor at most (the kernels size a tensor by the set of its names).
 */
#ifndef HIDET_PROTO_DIMS_H
#define HIDET_PROTO_DIMS_H

#include "proto/request.h"

typedef struct cJSON cJSON;

/* The "dims" object into op->dims (n_dims, sorted by name) and dyn's hints. Absent: a static
 * request (n_dims 0). 0, or -EINVAL with *e filled. */
int proto__parse_dims(const cJSON *root, tuner_op *op, proto_dynamic *dyn, proto_error *e);

/* One name of a product ("b" of "b*s", of a shape entry or a copy's stride): it must be declared in
 * "dims" and not already in *mask; its bit is added to *mask and its max multiplies *max_product.
 * 0, or -EINVAL with *e filled (field is the entry's path). */
int proto__add_name(const tuner_op *op, const char *name, const char *field, unsigned *mask, int64_t *max_product,
                    proto_error *e);

/* One shape entry that is a string: a declared name or a product of names ("b*s"). Sets *mask
 * and *size (the product of the dims' max). field is the entry's path; whether the op takes a
 * name on that axis is proto__check_named_inputs's. */
int proto__parse_named_axis(const cJSON *d, const char *field, const tuner_op *op, int axis, uint8_t *mask,
                            int64_t *size, proto_error *e);

/* Before the op's shapes are inferred (at the names' max): where the op does not take a name
 * at all, or not on the axis named (a reduced axis, a row length, matmul's K), or a tensor names
 * a dim on two axes, refused with the axis as field, so that inference never reports a size the
 * client did not write. */
int proto__check_named_inputs(const tuner_op *op, proto_error *e);

/* After the op's shapes are inferred at the dims' max: the named axes of the output, and the
 * refusals where a name may not stand (the op, the axis, a broadcast between a name and
 * another size, a fused operand's names), then the dims no tensor uses. 0 or -EINVAL. */
int proto__check_named(tuner_op *op, proto_error *e);

/* The "sizes" object (a size for every name, each in range) into dyn. 0 or -EINVAL. */
int proto__parse_sizes(const cJSON *root, const tuner_op *op, proto_dynamic *dyn, proto_error *e);

#endif
