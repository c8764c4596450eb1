/* op/op_dims.c - named dimensions: the checks and the binding every module shares.
 *
 * A dynamic op (tuner_op.n_dims > 0) describes kernels valid for a range of sizes. Its tensors
 * hold, on each named axis, the size it is generated and tuned for (the dims' max), so the
 * modules that only read shapes - the space builder, the cost model, the verifying worker's
 * buffers - work on it unchanged. The launch binds the sizes: tuner_op_sizes_check is the one
 * range check (client libraries, workers and the daemon all call it, so the message is one),
 * and tuner_op_bind the static op a bound launch computes.
 */
#include "op/op.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int tuner_op_dim_index(const tuner_op *op, const char *name)
{
    for (int k = 0; name && k < op->n_dims && k < TUNER_MAX_DIMS; k++)
        if (strcmp(op->dims[k].name, name) == 0)
            return k;
    return -1;
}

int tuner_op_sizes_check(const tuner_op *op, const int64_t *sizes, char *why, size_t why_len, int *ret_dim)
{
    for (int k = 0; k < op->n_dims && k < TUNER_MAX_DIMS; k++) {
        const tuner_dim *d = &op->dims[k];
        const int64_t v = sizes[k];
        if (v >= d->min && v <= d->max && v % d->multiple_of == 0)
            continue;
        if (why && why_len) {
            if (d->multiple_of > 1)
                snprintf(why, why_len, "%s is %lld; its range is %lld..%lld, a multiple of %lld", d->name,
                         (long long)v, (long long)d->min, (long long)d->max, (long long)d->multiple_of);
            else
                snprintf(why, why_len, "%s is %lld; its range is %lld..%lld", d->name, (long long)v,
                         (long long)d->min, (long long)d->max);
        }
        if (ret_dim)
            *ret_dim = k;
        return -ERANGE;
    }
    return 0;
}

static void bind_tensor(tuner_tensor *t, const int64_t *sizes)
{
    for (int i = 0; i < t->rank && i < TUNER_MAX_RANK; i++) {
        if (t->sym[i])
            t->shape[i] = tuner_dims_product(sizes, t->sym[i]);
        t->sym[i] = 0;
    }
}

/* A dynamic copy's strides and offset at `sizes`, from op's at `max` (its dims' max). */
static void rescale_copy(const tuner_op *op, const int64_t *max, const int64_t *sizes, tuner_op *out)
{
    for (int d = 0; d < TUNER_MAX_RANK; d++) {
        const unsigned m = op->attrs.copy.stride_sym[d];
        if (m)
            out->attrs.copy.strides[d] = op->attrs.copy.strides[d] / tuner_dims_product(max, m) *
                                         tuner_dims_product(sizes, m);
    }
    const unsigned m = op->attrs.copy.offset_sym;
    if (m)
        out->attrs.copy.offset = op->attrs.copy.offset / tuner_dims_product(max, m) * tuner_dims_product(sizes, m);
}

static void dims_max(const tuner_op *op, int64_t *max)
{
    for (int k = 0; k < TUNER_MAX_DIMS; k++)
        max[k] = k < op->n_dims ? op->dims[k].max : 1;
}

int tuner_op_bind(const tuner_op *op, const int64_t *sizes, tuner_op *out)
{
    if (tuner_op_sizes_check(op, sizes, NULL, 0, NULL) < 0)
        return -ERANGE;
    *out = *op;
    for (int i = 0; i < out->n_inputs && i < TUNER_MAX_INPUTS; i++)
        bind_tensor(&out->inputs[i], sizes);
    bind_tensor(&out->output, sizes);
    if (out->kind == TUNER_OP_COPY) {
        int64_t max[TUNER_MAX_DIMS];
        dims_max(op, max);
        rescale_copy(op, max, sizes, out);
        memset(out->attrs.copy.stride_sym, 0, sizeof(out->attrs.copy.stride_sym));
        memset(out->attrs.copy.shape_sym, 0, sizeof(out->attrs.copy.shape_sym));
        out->attrs.copy.offset_sym = 0;
    }
    out->n_dims = 0;
    memset(out->dims, 0, sizeof(out->dims));
    return 0;
}

static void reshape_named(tuner_tensor *t, const int64_t *max)
{
    for (int i = 0; i < t->rank && i < TUNER_MAX_RANK; i++)
        if (t->sym[i])
            t->shape[i] = tuner_dims_product(max, t->sym[i]);
}

int tuner_op_restrict(const tuner_op *op, const int64_t *min, const int64_t *max, tuner_op *out)
{
    for (int k = 0; k < op->n_dims && k < TUNER_MAX_DIMS; k++) {
        const tuner_dim *d = &op->dims[k];
        if (min[k] < d->min || max[k] > d->max || min[k] > max[k] || min[k] % d->multiple_of ||
            max[k] % d->multiple_of)
            return -ERANGE;
    }
    int64_t old_max[TUNER_MAX_DIMS];
    dims_max(op, old_max);
    if (out != op)
        *out = *op;
    int64_t maxes[TUNER_MAX_DIMS] = {1, 1, 1, 1};
    for (int k = 0; k < out->n_dims && k < TUNER_MAX_DIMS; k++) {
        out->dims[k].min = min[k];
        out->dims[k].max = max[k];
        maxes[k] = max[k];
    }
    for (int i = 0; i < out->n_inputs && i < TUNER_MAX_INPUTS; i++)
        reshape_named(&out->inputs[i], maxes);
    reshape_named(&out->output, maxes);
    if (out->kind == TUNER_OP_COPY)
        rescale_copy(out, old_max, maxes, out); /* (out's strides are still op's) */
    return 0;
}

char *tuner_sym_text(const tuner_op *op, unsigned mask, char *buf, size_t len)
{
    size_t at = 0;
    if (!len)
        return buf;
    buf[0] = '\0';
    for (int k = 0; k < op->n_dims && k < TUNER_MAX_DIMS; k++) {
        if (!(mask & (1u << k)))
            continue;
        int w = snprintf(buf + at, len - at, "%s%s", at ? "*" : "", op->dims[k].name);
        if (w < 0 || (size_t)w >= len - at)
            break;
        at += (size_t)w;
    }
    return buf;
}

char *tuner_scaled_text(const tuner_op *op, int64_t value_at_max, unsigned mask, char *buf, size_t len)
{
    if (!len)
        return buf;
    int64_t max[TUNER_MAX_DIMS];
    dims_max(op, max);
    const int64_t per = tuner_dims_product(max, mask);
    const int64_t coef = per > 0 ? value_at_max / per : value_at_max;
    char names[TUNER_MAX_DIMS * TUNER_DIM_NAME_LEN + 8];
    if (!mask)
        snprintf(buf, len, "%lld", (long long)value_at_max);
    else if (coef == 1)
        snprintf(buf, len, "%s", tuner_sym_text(op, mask, names, sizeof(names)));
    else
        snprintf(buf, len, "%lld*%s", (long long)coef, tuner_sym_text(op, mask, names, sizeof(names)));
    return buf;
}
