/* clients/c/dims.c - named dimensions on the client side (docs/api.md, "Named dimensions"): the
 * "dims" of a kernel set or dispatch table, grid rules, the sizes a caller launches with checked
 * against the ranges and bound (each kernel's grid and "int" parameters), and the dispatch table
 * answered for a dynamic op, with the choice of the kernel set for given sizes.
 *
 * The range check words its refusal as op/op_dims.c's tuner_op_sizes_check does ("n is 9000; its
 * range is 1..8192"), so a size refused by the client reads as the daemon and the workers say it.
 */
#include "clients/c/client_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#define DIM_SIZE_MAX 2147483647LL
/* The largest grid CUDA launches: x up to 2^31-1, y and z up to 65535 blocks. */
static const int64_t grid_limit[3] = {2147483647LL, 65535, 65535};

int hidet__dim_index(const hidet_dim *dims, int n_dims, const char *name)
{
    for (int k = 0; name && k < n_dims; k++)
        if (strcmp(dims[k].name, name) == 0)
            return k;
    return -1;
}

static bool is_name(const char *s, size_t len)
{
    if (len == 0 || len >= HIDET_DIM_NAME_LEN || !((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
        return false;
    for (size_t i = 1; i < len; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return false;
    return true;
}

/* A whole JSON number in [lo, hi] into *ret. */
static bool whole(const cJSON *v, double lo, double hi, int64_t *ret)
{
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi) ||
        v->valuedouble != floor(v->valuedouble))
        return false;
    *ret = (int64_t)v->valuedouble;
    return true;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const hidet_dim *)a)->name, ((const hidet_dim *)b)->name);
}

int hidet__dims_parse(const cJSON *o, hidet_dim *out, int *ret_n, char *why, size_t why_len)
{
    const cJSON *d;
    int n = 0;

    if (!cJSON_IsObject(o)) {
        snprintf(why, why_len, ": expected an object of name: {\"min\", \"max\", \"multiple_of\"}");
        return -EPROTO;
    }
    cJSON_ArrayForEach(d, o) {
        const char *name = d->string;
        hidet_dim *dim = &out[n];
        if (!name || !is_name(name, strlen(name))) {
            snprintf(why, why_len, ".%.40s: a name is [a-z_][a-z0-9_]*, at most %d characters",
                     name ? name : "", HIDET_DIM_NAME_LEN - 1);
            return -EPROTO;
        }
        if (n == HIDET_MAX_DIMS) {
            snprintf(why, why_len, ".%s: more than %d dims", name, HIDET_MAX_DIMS);
            return -EPROTO;
        }
        if (hidet__dim_index(out, n, name) >= 0) {
            snprintf(why, why_len, ".%s: declared twice", name);
            return -EPROTO;
        }
        const cJSON *mult = cJSON_GetObjectItemCaseSensitive(d, "multiple_of");
        if (!cJSON_IsObject(d) ||
            !whole(cJSON_GetObjectItemCaseSensitive(d, "min"), 1, DIM_SIZE_MAX, &dim->min) ||
            !whole(cJSON_GetObjectItemCaseSensitive(d, "max"), 1, DIM_SIZE_MAX, &dim->max) ||
            dim->min > dim->max) {
            snprintf(why, why_len, ".%s: expected whole min and max, 1 <= min <= max <= 2^31-1",
                     name);
            return -EPROTO;
        }
        dim->multiple_of = 1;
        if (mult && (!whole(mult, 1, DIM_SIZE_MAX, &dim->multiple_of) ||
                     dim->min % dim->multiple_of || dim->max % dim->multiple_of)) {
            snprintf(why, why_len, ".%s.multiple_of: expected a whole number >= 1 that divides "
                     "min and max", name);
            return -EPROTO;
        }
        snprintf(dim->name, sizeof(dim->name), "%s", name);
        n++;
    }
    /* The canonical order, the one a dynamic op's kernels take their sizes in. */
    qsort(out, (size_t)n, sizeof(*out), by_name);
    *ret_n = n;
    return 0;
}

int hidet__dims_mask(const hidet_dim *dims, int n_dims, const char *expr, unsigned *ret,
                     char *why, size_t why_len)
{
    unsigned mask = 0;
    const char *p = expr;

    for (;;) {
        const char *star = strchr(p, '*');
        size_t len = star ? (size_t)(star - p) : strlen(p);
        char name[HIDET_DIM_NAME_LEN];
        if (!is_name(p, len)) {
            snprintf(why, why_len, "'%.40s' is not a name or a product of names (\"b*s\")", expr);
            return -EPROTO;
        }
        memcpy(name, p, len);
        name[len] = '\0';
        int k = hidet__dim_index(dims, n_dims, name);
        if (k < 0) {
            snprintf(why, why_len, "'%s' is not a dim of the kernel set (%s)", name,
                     n_dims ? "see its \"dims\"" : "it declares no \"dims\"");
            return -EPROTO;
        }
        if (mask & (1u << k)) {
            snprintf(why, why_len, "'%.40s' names %s twice", expr, name);
            return -EPROTO;
        }
        mask |= 1u << k;
        if (!star)
            break;
        p = star + 1;
    }
    *ret = mask;
    return 0;
}

int hidet__grid_rule_parse(const cJSON *o, const hidet_dim *dims, int n_dims, hidet_grid_rule *r,
                           char *why, size_t why_len)
{
    static const char *const members[] = {"dims", "coef", "div", "mul", "cap"};
    const cJSON *m, *names = cJSON_GetObjectItemCaseSensitive(o, "dims");
    int64_t *vals[] = {NULL, &r->coef, &r->div, &r->mul, &r->cap};

    memset(r, 0, sizeof(*r));
    /* A member this client does not know may change what the rule means: such a set must not
     * be launched (docs/api.md). */
    cJSON_ArrayForEach(m, o) {
        bool known = false;
        for (size_t i = 0; i < sizeof(members) / sizeof(*members); i++)
            known |= m->string && strcmp(m->string, members[i]) == 0;
        if (!known) {
            snprintf(why, why_len, ".%.40s: not a member of a grid rule this client knows (dims, "
                     "coef, div, mul, cap)", m->string ? m->string : "");
            return -EPROTO;
        }
    }
    if (!cJSON_IsArray(names) || cJSON_GetArraySize(names) < 1) {
        snprintf(why, why_len, ".dims: expected a non-empty list of dim names");
        return -EPROTO;
    }
    cJSON_ArrayForEach(m, names) {
        int k = cJSON_IsString(m) ? hidet__dim_index(dims, n_dims, m->valuestring) : -1;
        if (k < 0 || (r->dims & (1u << k))) {
            snprintf(why, why_len, ".dims: '%.40s' is not a dim of the kernel set, or is named "
                     "twice", cJSON_IsString(m) ? m->valuestring : "?");
            return -EPROTO;
        }
        r->dims |= 1u << k;
    }
    for (size_t i = 1; i < sizeof(members) / sizeof(*members); i++) {
        const double lo = strcmp(members[i], "cap") == 0 ? 0 : 1;
        if (!whole(cJSON_GetObjectItemCaseSensitive(o, members[i]), lo, DIM_SIZE_MAX, vals[i])) {
            snprintf(why, why_len, ".%s: expected a whole number in %.0f..2^31-1", members[i], lo);
            return -EPROTO;
        }
    }
    return 0;
}

/* a * b, saturated at INT64_MAX (both are positive). */
static int64_t mul_sat(int64_t a, int64_t b)
{
    int64_t p;
    return __builtin_mul_overflow(a, b, &p) ? INT64_MAX : p;
}

int hidet__grid_rule_eval(const hidet_grid_rule *r, const int64_t *sizes, int d, int64_t *ret)
{
    int64_t n = r->coef;
    for (int k = 0; k < HIDET_MAX_DIMS; k++)
        if (r->dims & (1u << k))
            n = mul_sat(n, sizes[k]);
    int64_t g = mul_sat(r->mul, n / r->div + (n % r->div != 0));
    if (r->cap > 0 && g > r->cap)
        g = r->cap;
    *ret = g;
    return g >= 1 && g <= grid_limit[d] ? 0 : -ERANGE;
}

int hidet__sizes_resolve(const hidet_dim *dims, int n_dims, const char *const *names,
                         const int64_t *sizes, size_t n, int64_t *out, hidet_error *err)
{
    bool given[HIDET_MAX_DIMS] = {false};

    if (n && (!names || !sizes))
        return hidet__fail(err, -EINVAL, 0, "sizes given without names or values");
    for (size_t i = 0; i < n; i++) {
        int k = hidet__dim_index(dims, n_dims, names[i]);
        if (k < 0) {
            char list[HIDET_MAX_DIMS * (HIDET_DIM_NAME_LEN + 2)] = "";
            for (int j = 0; j < n_dims; j++)
                snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", j ? ", " : "",
                         dims[j].name);
            return hidet__fail(err, -EINVAL, 0, "'%.40s' is not a dim of the kernel (%s)",
                               names[i] ? names[i] : "(null)", n_dims ? list : "it has none");
        }
        if (given[k])
            return hidet__fail(err, -EINVAL, 0, "the size of %s is given twice", names[i]);
        given[k] = true;
        out[k] = sizes[i];
    }
    for (int k = 0; k < n_dims; k++)
        if (!given[k])
            return hidet__fail(err, -EINVAL, 0, "no size given for %s", dims[k].name);
    for (int k = 0; k < n_dims; k++) {
        const hidet_dim *d = &dims[k];
        const int64_t v = out[k];
        if (v >= d->min && v <= d->max && v % d->multiple_of == 0)
            continue;
        int r;
        if (d->multiple_of > 1)
            r = hidet__fail(err, -ERANGE, 0, "%s is %lld; its range is %lld..%lld, a multiple of "
                            "%lld", d->name, (long long)v, (long long)d->min, (long long)d->max,
                            (long long)d->multiple_of);
        else
            r = hidet__fail(err, -ERANGE, 0, "%s is %lld; its range is %lld..%lld", d->name,
                            (long long)v, (long long)d->min, (long long)d->max);
        if (err)
            snprintf(err->field, sizeof(err->field), "sizes.%s", d->name);
        return r;
    }
    return 0;
}

int hidet_kernel_set_bind(const hidet_kernel_set *s, size_t kernel, const char *const *names,
                          const int64_t *sizes, size_t n, uint32_t ret_grid[3],
                          long long *ret_ints, hidet_error *err)
{
    int64_t at[HIDET_MAX_DIMS] = {0}, grid[3];
    int r;

    if (!s || kernel >= s->n_kernels || !ret_grid)
        return hidet__fail(err, -EINVAL, 0, "no kernel set, no grid pointer, or no kernel %zu",
                           kernel);
    if ((r = hidet__sizes_resolve(s->dims, s->n_dims, names, sizes, n, at, err)) < 0)
        return r;
    const hidet_kernel *k = &s->kernels[kernel];
    const hidet_kernel_dims *kd = s->kernel_dims ? &s->kernel_dims[kernel] : NULL;
    for (size_t j = 0; j < k->n_params; j++) {
        const hidet_param *p = &k->params[j];
        if (strcmp(p->type, "pointer") != 0 && strcmp(p->type, "tensor_map") != 0 &&
            strcmp(p->type, "int") != 0)
            return hidet__fail(err, -EPROTO, 0, "kernels[%zu].params[%zu].type: '%s' is not a "
                               "parameter kind this client can pass (pointer, tensor_map, int)",
                               kernel, j, p->type);
        if (p->index < 0 || (size_t)p->index >= k->n_params)
            return hidet__fail(err, -EPROTO, 0, "kernels[%zu].params[%zu].index: %d is out of "
                               "range", kernel, j, p->index);
        if (p->kind == HIDET_BUFFER_SIZE && !ret_ints)
            return hidet__fail(err, -EINVAL, 0, "kernel %s takes sizes: give ret_ints", k->name);
    }
    for (int d = 0; d < 3; d++) {
        grid[d] = k->grid[d];
        if (kd && kd->grid[d].dims && hidet__grid_rule_eval(&kd->grid[d], at, d, &grid[d]) < 0)
            return hidet__fail(err, -ERANGE, 0, "kernel %s: grid[%d] is %lld blocks at these "
                               "sizes, beyond CUDA's limit", k->name, d, (long long)grid[d]);
    }
    for (size_t j = 0; kd && j < k->n_params; j++)
        if (kd->param_dim && kd->param_dim[j] >= 0)
            ret_ints[k->params[j].index] = (long long)at[kd->param_dim[j]];
    for (int d = 0; d < 3; d++)
        ret_grid[d] = (uint32_t)grid[d];
    hidet__ok(err);
    return 0;
}

int hidet_kernel_set_bind_map(const hidet_kernel_set *s, size_t kernel, size_t param,
                              const char *const *names, const int64_t *sizes, size_t n,
                              hidet_tensor_map *ret, hidet_error *err)
{
    int64_t at[HIDET_MAX_DIMS] = {0};
    int r;

    if (!s || kernel >= s->n_kernels || param >= s->kernels[kernel].n_params || !ret)
        return hidet__fail(err, -EINVAL, 0, "no kernel set, no result pointer, or no kernel %zu "
                           "parameter %zu", kernel, param);
    const hidet_param *p = &s->kernels[kernel].params[param];
    if (!p->is_tensor_map)
        return hidet__fail(err, -EINVAL, 0, "kernels[%zu].params[%zu] is not a tensor map", kernel,
                           param);
    if ((r = hidet__sizes_resolve(s->dims, s->n_dims, names, sizes, n, at, err)) < 0)
        return r;
    const hidet_map_dims *md = s->kernel_dims && s->kernel_dims[kernel].map_dims
                                   ? &s->kernel_dims[kernel].map_dims[param] : NULL;
    hidet_tensor_map m = p->tensor_map;
    for (int d = 0; md && d < m.rank && d < 5; d++) {
        if (!md->dims[d])
            continue;
        uint64_t v = md->coef[d];
        for (int k = 0; k < HIDET_MAX_DIMS; k++)
            if ((md->dims[d] & (1u << k)) && __builtin_mul_overflow(v, (uint64_t)at[k], &v))
                v = UINT64_MAX;
        if (v < 1 || v > (UINT64_C(1) << 32))
            return hidet__fail(err, -ERANGE, 0, "kernels[%zu].params[%zu]: the tensor map's "
                               "dimension %d is %llu elements at these sizes, beyond 2^32", kernel,
                               param, d, (unsigned long long)v);
        m.dims[d] = v;
    }
    *ret = m;
    hidet__ok(err);
    return 0;
}

int hidet_kernel_set_output_dim(const hidet_kernel_set *s, int axis, const char *const *names,
                                const int64_t *sizes, size_t n, int64_t *ret, hidet_error *err)
{
    int64_t at[HIDET_MAX_DIMS] = {0};
    int r;

    if (!s || axis < 0 || axis >= s->output_rank || !ret)
        return hidet__fail(err, -EINVAL, 0, "no kernel set, no result pointer, or no output "
                           "axis %d", axis);
    if ((r = hidet__sizes_resolve(s->dims, s->n_dims, names, sizes, n, at, err)) < 0)
        return r;
    int64_t v = s->output_shape[axis];
    if (s->output_dims[axis]) {
        v = 1; /* at most the product at max, which parsing checked fits */
        for (int k = 0; k < s->n_dims; k++)
            if (s->output_dims[axis] & (1u << k))
                v *= at[k];
    }
    *ret = v;
    hidet__ok(err);
    return 0;
}

/* ---- dispatch tables --------------------------------------------------------------------- */

hidet_dispatch *hidet_dispatch_free(hidet_dispatch *d)
{
    if (!d)
        return NULL;
    hidet_kernel_set_free(d->generic);
    for (size_t i = 0; i < d->n_entries; i++) {
        hidet_kernel_set_free(d->entries[i].kernel_set);
        free(d->entries[i].job);
    }
    free(d->entries);
    free(d->json);
    free(d);
    return NULL;
}

bool hidet_is_dispatch(const char *json, size_t len)
{
    cJSON *root = json ? cJSON_ParseWithLength(json, len) : NULL;
    bool yes = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "dispatch"));
    cJSON_Delete(root);
    return yes;
}

static const char *const entry_states[] = {"ready", "tuning", "untuned"};

/* One entry of dispatch.entries (the `i`th). */
static int parse_entry(const hidet_dispatch *d, const cJSON *e, size_t i, hidet_dispatch_entry *out,
                       hidet_error *err)
{
    const cJSON *ranges = cJSON_GetObjectItemCaseSensitive(e, "ranges"), *rg;
    const cJSON *state = cJSON_GetObjectItemCaseSensitive(e, "state");
    bool seen[HIDET_MAX_DIMS] = {false};
    int r;

    if (!cJSON_IsObject(e) || !cJSON_IsObject(ranges))
        return hidet__fail(err, -EPROTO, 0, "dispatch.entries[%zu].ranges: expected an object of "
                           "name: [lo, hi]", i);
    cJSON_ArrayForEach(rg, ranges) {
        int k = hidet__dim_index(d->dims, d->n_dims, rg->string);
        int64_t lo, hi;
        if (k < 0 || seen[k])
            return hidet__fail(err, -EPROTO, 0, "dispatch.entries[%zu].ranges.%.40s: not a dim of "
                               "the table, or given twice", i, rg->string ? rg->string : "");
        if (!cJSON_IsArray(rg) || cJSON_GetArraySize(rg) != 2 ||
            !whole(cJSON_GetArrayItem(rg, 0), (double)d->dims[k].min, (double)d->dims[k].max, &lo) ||
            !whole(cJSON_GetArrayItem(rg, 1), (double)d->dims[k].min, (double)d->dims[k].max, &hi) ||
            lo > hi)
            return hidet__fail(err, -EPROTO, 0, "dispatch.entries[%zu].ranges.%s: expected [lo, "
                               "hi] with %lld <= lo <= hi <= %lld", i, rg->string,
                               (long long)d->dims[k].min, (long long)d->dims[k].max);
        seen[k] = true;
        out->lo[k] = lo;
        out->hi[k] = hi;
    }
    for (int k = 0; k < d->n_dims; k++)
        if (!seen[k])
            return hidet__fail(err, -EPROTO, 0, "dispatch.entries[%zu].ranges: no range of %s", i,
                               d->dims[k].name);
    if (!cJSON_IsString(state))
        return hidet__fail(err, -EPROTO, 0, "dispatch.entries[%zu].state: missing", i);
    snprintf(out->state_name, sizeof(out->state_name), "%s", state->valuestring);
    out->state = HIDET_ENTRY_UNKNOWN;
    for (int s = 0; s < (int)(sizeof(entry_states) / sizeof(*entry_states)); s++)
        if (strcmp(state->valuestring, entry_states[s]) == 0)
            out->state = (hidet_entry_state)s;
    const cJSON *job = cJSON_GetObjectItemCaseSensitive(e, "job");
    if (cJSON_IsString(job) && !(out->job = strdup(job->valuestring)))
        return hidet__fail(err, -ENOMEM, 0, "out of memory");
    out->coarse = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(e, "coarse"));
    if (out->state != HIDET_ENTRY_READY)
        return 0;
    /* A ready entry's set serves its ranges only: where the answer leaves its dims out, they
     * are the table's cut to the entry, so binding it outside them is refused. */
    hidet_dim in_range[HIDET_MAX_DIMS];
    for (int k = 0; k < d->n_dims; k++) {
        in_range[k] = d->dims[k];
        in_range[k].min = out->lo[k];
        in_range[k].max = out->hi[k];
    }
    r = hidet__kernel_set_from_json(cJSON_GetObjectItemCaseSensitive(e, "kernel_set"), NULL, 0,
                                    in_range, d->n_dims, &out->kernel_set, err);
    if (r < 0 && err) {
        char m[sizeof(err->message)];
        snprintf(m, sizeof(m), "%s", err->message);
        hidet__fail(err, r, 0, "dispatch.entries[%zu].kernel_set: %s", i, m);
    }
    return r;
}

int hidet_dispatch_parse(const char *json, size_t len, hidet_dispatch **ret, hidet_error *err)
{
    hidet_dispatch *d = NULL;
    cJSON *root;
    int r;

    if (!json || !ret)
        return hidet__fail(err, -EINVAL, 0, "no JSON or no result pointer");
    root = cJSON_ParseWithLength(json, len);
    const cJSON *disp = cJSON_GetObjectItemCaseSensitive(root, "dispatch");
    const cJSON *dims = cJSON_GetObjectItemCaseSensitive(root, "dims");
    if (!cJSON_IsObject(root) || !cJSON_IsObject(disp)) {
        r = hidet__fail(err, -EPROTO, 0, "the answer is not a dispatch table (no \"dispatch\")");
        goto out;
    }
    if (!(d = calloc(1, sizeof(*d)))) {
        r = hidet__fail(err, -ENOMEM, 0, "out of memory");
        goto out;
    }
    char why[192] = ": missing, or names no dim";
    if (!dims || hidet__dims_parse(dims, d->dims, &d->n_dims, why, sizeof(why)) < 0 ||
        d->n_dims == 0) {
        r = hidet__fail(err, -EPROTO, 0, "dims%s", why);
        goto out;
    }
    const cJSON *v;
    if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(root, "op")))
        snprintf(d->op, sizeof(d->op), "%s", v->valuestring);
    if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(root, "arch")))
        snprintf(d->arch, sizeof(d->arch), "%s", v->valuestring);
    if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(root, "op_key")) &&
        hidet__is_key(v->valuestring))
        memcpy(d->op_key, v->valuestring, HIDET_KEY_LEN + 1);
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "output");
    if (cJSON_IsObject(o) &&
        (r = hidet__output_parse(o, d->dims, d->n_dims, &d->output_rank, d->output_shape,
                                 d->output_dims, d->output_dtype, sizeof(d->output_dtype), err)) < 0)
        goto out;
    r = hidet__kernel_set_from_json(cJSON_GetObjectItemCaseSensitive(disp, "generic"), NULL, 0,
                                    d->dims, d->n_dims, &d->generic, err);
    if (r < 0) {
        if (err) {
            char m[sizeof(err->message)];
            snprintf(m, sizeof(m), "%s", err->message);
            hidet__fail(err, r, 0, "dispatch.generic: %s", m);
        }
        goto out;
    }
    const cJSON *entries = cJSON_GetObjectItemCaseSensitive(disp, "entries");
    if (!cJSON_IsArray(entries)) {
        r = hidet__fail(err, -EPROTO, 0, "dispatch.entries: expected a list");
        goto out;
    }
    size_t n = (size_t)cJSON_GetArraySize(entries);
    if (n && !(d->entries = calloc(n, sizeof(*d->entries)))) {
        r = hidet__fail(err, -ENOMEM, 0, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        d->n_entries = i + 1; /* so free() sees what was partly filled */
        if ((r = parse_entry(d, cJSON_GetArrayItem(entries, (int)i), i, &d->entries[i], err)) < 0)
            goto out;
    }
    if (!(d->json = malloc(len + 1))) {
        r = hidet__fail(err, -ENOMEM, 0, "out of memory");
        goto out;
    }
    memcpy(d->json, json, len);
    d->json[len] = '\0';
    hidet__ok(err);
    *ret = d;
    d = NULL;
    r = 0;
out:
    cJSON_Delete(root);
    hidet_dispatch_free(d);
    return r;
}

int hidet_dispatch_select(const hidet_dispatch *d, const char *const *names, const int64_t *sizes,
                          size_t n, const hidet_kernel_set **ret, long *ret_entry, hidet_error *err)
{
    int64_t at[HIDET_MAX_DIMS] = {0};
    long holding = -1;
    int r;

    if (!d || !ret)
        return hidet__fail(err, -EINVAL, 0, "no dispatch table or no result pointer");
    if ((r = hidet__sizes_resolve(d->dims, d->n_dims, names, sizes, n, at, err)) < 0)
        return r;
    /* Entries do not overlap (docs/api.md): the first holding the sizes is the one. */
    for (size_t i = 0; i < d->n_entries && holding < 0; i++) {
        const hidet_dispatch_entry *e = &d->entries[i];
        bool in = true;
        for (int k = 0; k < d->n_dims; k++)
            in &= at[k] >= e->lo[k] && at[k] <= e->hi[k];
        if (in)
            holding = (long)i;
    }
    const hidet_dispatch_entry *e = holding >= 0 ? &d->entries[holding] : NULL;
    *ret = e && e->state == HIDET_ENTRY_READY && e->kernel_set ? e->kernel_set : d->generic;
    if (ret_entry)
        *ret_entry = holding;
    hidet__ok(err);
    return 0;
}
