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

int tuner_op_bind(const tuner_op *op, const int64_t *sizes, tuner_op *out)
{
    if (tuner_op_sizes_check(op, sizes, NULL, 0, NULL) < 0)
        return -ERANGE;
    *out = *op;
    for (int i = 0; i < out->n_inputs && i < TUNER_MAX_INPUTS; i++)
        bind_tensor(&out->inputs[i], sizes);
    bind_tensor(&out->output, sizes);
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
