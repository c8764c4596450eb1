/* clients/c/parse.c - turns the daemon's JSON answers (kernel sets, jobs) into C structs.
 *
 * Required fields are checked strictly (a missing key or kernel list is -EPROTO: the client
 * must not launch something half-described); optional ones default quietly, so a newer daemon
 * that adds fields still works with this client.
 */
#include "clients/c/client_internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "op/tmap.h"

int hidet__fail(hidet_error *err, int r, int http_status, const char *fmt, ...)
{
    va_list ap;
    if (!err)
        return r;
    memset(err, 0, sizeof(*err));
    err->http_status = http_status;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
    return r;
}

void hidet__ok(hidet_error *err)
{
    if (err)
        memset(err, 0, sizeof(*err));
}

int hidet__status_code(int status)
{
    switch (status) {
    case 400:
    case 422:
        return -EINVAL;
    case 401:
    case 403:
        return -EACCES;
    case 404:
        return -ENOENT;
    case 408:
        return -ETIMEDOUT;
    case 413:
        return -E2BIG;
    case 429:
        return -EBUSY;
    case 503:
        return -EAGAIN;
    default:
        return -EREMOTEIO;
    }
}

bool hidet__is_key(const char *s)
{
    if (!s || strlen(s) != HIDET_KEY_LEN)
        return false;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
            return false;
    return true;
}

static const char *jstr(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void jcopy(const cJSON *o, const char *name, char *dst, size_t cap)
{
    const char *s = jstr(o, name);
    snprintf(dst, cap, "%s", s ? s : "");
}

/* NULL when absent; *oom set when the copy failed. */
static char *jdup(const cJSON *o, const char *name, bool *oom)
{
    const char *s = jstr(o, name);
    char *d;
    if (!s)
        return NULL;
    d = strdup(s);
    if (!d)
        *oom = true;
    return d;
}

/* A number, or dflt when absent or null. */
static double jnum(const cJSON *o, const char *name, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) ? v->valuedouble : dflt;
}

static bool jbool(const cJSON *o, const char *name)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, name));
}

/* Reads [x,y,z] of non-negative integers below 2^32. */
static bool jdim3(const cJSON *o, const char *name, uint32_t out[3])
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 3)
        return false;
    for (int i = 0; i < 3; i++) {
        const cJSON *v = cJSON_GetArrayItem(a, i);
        if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble < 4294967296.0) ||
            v->valuedouble != floor(v->valuedouble))
            return false;
        out[i] = (uint32_t)v->valuedouble;
    }
    return true;
}

static void free_kernel(hidet_kernel *k)
{
    free(k->name);
    free(k->params);
    free(k->ptx_url);
    free(k->cubin_url);
}

hidet_kernel_set *hidet_kernel_set_free(hidet_kernel_set *s)
{
    if (!s)
        return NULL;
    for (size_t i = 0; i < s->n_kernels; i++) {
        free_kernel(&s->kernels[i]);
        if (s->kernel_dims) {
            free(s->kernel_dims[i].param_dim);
            free(s->kernel_dims[i].map_dims);
        }
    }
    free(s->kernel_dims);
    free(s->kernels);
    free(s->warning);
    free(s->json);
    free(s);
    return NULL;
}

static const char *dim_name_of(const void *ctx, int k)
{
    return ((const hidet_dim *)ctx)[k].name;
}

/* A "tensor_map" parameter's description, checked as strictly as the daemon checked it (op/tmap.c),
 * into the public struct; a dimension that follows the set's dims by name into *sym. */
static int parse_tensor_map(const cJSON *j, const hidet_dim *dims, int n_dims, hidet_tensor_map *out,
                            hidet_map_dims *sym, char *why, size_t why_len)
{
    tuner_tmap m = {0};
    char field[32] = "", reason[160] = "";
    int64_t max[HIDET_MAX_DIMS] = {0};
    for (int k = 0; k < n_dims && k < HIDET_MAX_DIMS; k++)
        max[k] = dims[k].max;
    const tuner_tmap_dims names = {n_dims, max, dim_name_of, dims};
    if (tuner_tmap_from_json_dims(j, NULL, n_dims ? &names : NULL, &m, reason, sizeof(reason), field,
                                  sizeof(field)) < 0) {
        snprintf(why, why_len, "tensor_map.%s: %s", field, reason);
        return -EPROTO;
    }
    memset(sym, 0, sizeof(*sym));
    for (int d = 0; d < m.rank; d++)
        sym->dims[d] = m.sym[d], sym->coef[d] = m.sym_coef[d];
    snprintf(out->dtype, sizeof(out->dtype), "%s", tuner_dtype_name(m.dtype));
    out->rank = m.rank;
    for (int d = 0; d < m.rank; d++) {
        out->dims[d] = m.dims[d];
        out->box[d] = m.box[d];
        out->element_strides[d] = m.element_strides[d];
        if (d + 1 < m.rank)
            out->strides[d] = m.strides[d];
    }
    out->swizzle = m.swizzle;
    out->l2_promotion = m.l2_promotion;
    out->oob_nan = m.oob_fill == TUNER_TMAP_OOB_NAN;
    out->im2col = m.mode == TUNER_TMAP_IM2COL;
    for (int i = 0; i < TUNER_TMAP_MAX_RANK - 2; i++)
        out->lower_corner[i] = m.lower_corner[i], out->upper_corner[i] = m.upper_corner[i];
    out->channels_per_pixel = m.channels_per_pixel;
    out->pixels_per_column = m.pixels_per_column;
    return 0;
}

void hidet__tmap_of(const hidet_tensor_map *in, tuner_tmap *out)
{
    memset(out, 0, sizeof(*out));
    (void)tuner_dtype_parse(in->dtype, &out->dtype);
    out->rank = in->rank;
    for (int d = 0; d < in->rank && d < TUNER_TMAP_MAX_RANK; d++) {
        out->dims[d] = in->dims[d];
        out->box[d] = in->box[d];
        out->element_strides[d] = in->element_strides[d];
        if (d + 1 < in->rank)
            out->strides[d] = in->strides[d];
    }
    out->swizzle = in->swizzle;
    out->l2_promotion = in->l2_promotion;
    out->oob_fill = in->oob_nan ? TUNER_TMAP_OOB_NAN : TUNER_TMAP_OOB_ZERO;
    out->mode = in->im2col ? TUNER_TMAP_IM2COL : TUNER_TMAP_TILED;
    for (int i = 0; in->im2col && i < in->rank - 2 && i < TUNER_TMAP_MAX_RANK - 2; i++)
        out->lower_corner[i] = in->lower_corner[i], out->upper_corner[i] = in->upper_corner[i];
    out->channels_per_pixel = in->im2col ? in->channels_per_pixel : 0;
    out->pixels_per_column = in->im2col ? in->pixels_per_column : 0;
}

/* An "int" parameter: {"index": i, "type": "int", "dim": name}, name one of the set's dims;
 * *ret_dim its index there. */
static int parse_int_param(const cJSON *p, const hidet_dim *dims, int n_dims, hidet_param *out,
                           int *ret_dim, char *why, size_t why_len)
{
    const char *dim = jstr(p, "dim");
    if (!dim) {
        snprintf(why, why_len, "dim: an \"int\" parameter names the dim whose size it takes");
        return -EPROTO;
    }
    int k = hidet__dim_index(dims, n_dims, dim);
    if (k < 0) {
        snprintf(why, why_len, "dim: '%.32s' is not a dim of the kernel set (%s)", dim,
                 n_dims ? "see its \"dims\"" : "it declares no \"dims\"");
        return -EPROTO;
    }
    out->kind = HIDET_BUFFER_SIZE;
    out->input = -1;
    out->buffer[0] = '\0';
    *ret_dim = k;
    return 0;
}

static int parse_param(const cJSON *p, size_t pos, const hidet_dim *dims, int n_dims,
                       hidet_param *out, int *ret_dim, hidet_map_dims *sym, char *why, size_t why_len)
{
    const char *buf = jstr(p, "buffer");
    const cJSON *idx = cJSON_GetObjectItemCaseSensitive(p, "index");

    *ret_dim = -1;
    out->index = cJSON_IsNumber(idx) ? (int)idx->valuedouble : (int)pos;
    jcopy(p, "type", out->type, sizeof(out->type));
    if (strcmp(out->type, "int") == 0)
        return parse_int_param(p, dims, n_dims, out, ret_dim, why, why_len);
    snprintf(why, why_len, "bad buffer");
    if (!buf)
        return -EPROTO;
    snprintf(out->buffer, sizeof(out->buffer), "%s", buf);
    if (strcmp(out->type, "tensor_map") == 0) {
        if (parse_tensor_map(cJSON_GetObjectItemCaseSensitive(p, "tensor_map"), dims, n_dims, &out->tensor_map,
                             sym, why, why_len) < 0)
            return -EPROTO;
        out->is_tensor_map = true;
    }
    out->input = -1;
    if (strcmp(buf, "output") == 0) {
        out->kind = HIDET_BUFFER_OUTPUT;
    } else if (strcmp(buf, "workspace") == 0) {
        out->kind = HIDET_BUFFER_WORKSPACE;
    } else if (strncmp(buf, "input", 5) == 0) {
        char *end = NULL;
        long v = strtol(buf + 5, &end, 10);
        if (buf[5] < '0' || buf[5] > '9' || *end != '\0' || v < 0 || v > 1000)
            return -EPROTO;
        out->kind = HIDET_BUFFER_INPUT;
        out->input = (int)v;
    } else {
        out->kind = HIDET_BUFFER_OTHER;
    }
    return 0;
}

/* "grid": three entries, each a number or a rule object (docs/api.md); rules into kd (names
 * resolved against dims), and grid[d] the rule's value at the dims' max. */
static int parse_grid(const cJSON *k, const hidet_dim *dims, int n_dims, uint32_t grid[3],
                      hidet_kernel_dims *kd, bool *ret_dynamic, hidet_error *err, size_t i)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(k, "grid");
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 3)
        return hidet__fail(err, -EPROTO, 0, "kernels[%zu]: grid/block are not [x,y,z]", i);
    for (int d = 0; d < 3; d++) {
        const cJSON *v = cJSON_GetArrayItem(a, d);
        char why[160];
        if (cJSON_IsObject(v)) {
            int64_t at_max[HIDET_MAX_DIMS], g;
            if (hidet__grid_rule_parse(v, dims, n_dims, &kd->grid[d], why, sizeof(why)) < 0)
                return hidet__fail(err, -EPROTO, 0, "kernels[%zu].grid[%d]%s", i, d, why);
            for (int j = 0; j < n_dims; j++)
                at_max[j] = dims[j].max;
            if (hidet__grid_rule_eval(&kd->grid[d], at_max, d, &g) < 0)
                return hidet__fail(err, -EPROTO, 0, "kernels[%zu].grid[%d]: the rule gives %lld "
                                   "blocks at the dims' max, beyond CUDA's limit", i, d,
                                   (long long)g);
            grid[d] = (uint32_t)g;
            *ret_dynamic = true;
        } else if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 4294967296.0 &&
                   v->valuedouble == floor(v->valuedouble)) {
            grid[d] = (uint32_t)v->valuedouble;
        } else {
            return hidet__fail(err, -EPROTO, 0, "kernels[%zu].grid[%d]: expected a number or a "
                               "rule {\"dims\", \"coef\", \"div\", \"mul\", \"cap\"}", i, d);
        }
    }
    return 0;
}

static int parse_kernel(const cJSON *k, const hidet_dim *dims, int n_dims, hidet_kernel *out,
                        hidet_kernel_dims *kd, bool *ret_dynamic, hidet_error *err, size_t i)
{
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(k, "params");
    const char *name = jstr(k, "name");
    bool oom = false;
    int r;

    if (!cJSON_IsObject(k) || !name || !*name)
        return hidet__fail(err, -EPROTO, 0, "kernels[%zu]: no name", i);
    if ((r = parse_grid(k, dims, n_dims, out->grid, kd, ret_dynamic, err, i)) < 0)
        return r;
    if (!jdim3(k, "block", out->block))
        return hidet__fail(err, -EPROTO, 0, "kernels[%zu]: grid/block are not [x,y,z]", i);
    double sh = jnum(k, "shared_bytes", 0);
    if (sh < 0 || sh >= 4294967296.0)
        return hidet__fail(err, -EPROTO, 0, "kernels[%zu]: bad shared_bytes", i);
    out->shared_bytes = (uint32_t)sh;
    out->name = strdup(name);
    jcopy(k, "arch", out->arch, sizeof(out->arch));
    out->latency_us = jnum(k, "latency_us", -1.0);
    out->ptx_url = jdup(k, "ptx_url", &oom);
    out->cubin_url = jdup(k, "cubin_url", &oom);
    if (!out->name || oom)
        return hidet__fail(err, -ENOMEM, 0, "out of memory");
    if (params && !cJSON_IsArray(params))
        return hidet__fail(err, -EPROTO, 0, "kernels[%zu].params is not a list", i);
    size_t n = params ? (size_t)cJSON_GetArraySize(params) : 0;
    if (n) {
        out->params = calloc(n, sizeof(*out->params));
        kd->param_dim = malloc(n * sizeof(*kd->param_dim));
        kd->map_dims = calloc(n, sizeof(*kd->map_dims));
        if (!out->params || !kd->param_dim || !kd->map_dims)
            return hidet__fail(err, -ENOMEM, 0, "out of memory");
        bool sym_map = false;
        for (size_t j = 0; j < n; j++) {
            char why[192];
            if (parse_param(cJSON_GetArrayItem(params, (int)j), j, dims, n_dims, &out->params[j],
                            &kd->param_dim[j], &kd->map_dims[j], why, sizeof(why)) < 0)
                return hidet__fail(err, -EPROTO, 0, "kernels[%zu].params[%zu]: %s", i, j, why);
            for (int d = 0; d < 5; d++)
                sym_map |= kd->map_dims[j].dims[d] != 0;
            if (kd->param_dim[j] >= 0)
                *ret_dynamic = true;
            out->n_params = j + 1;
        }
        if (sym_map) {
            *ret_dynamic = true;
        } else {
            free(kd->map_dims); /* NULL: no map follows dims */
            kd->map_dims = NULL;
        }
    }
    return 0;
}

/* "output": {"shape", "dtype"}; a shape entry is a size or a name (product) of dims. */
int hidet__output_parse(const cJSON *o, const hidet_dim *dims, int n_dims, int *ret_rank,
                        int64_t *shape, unsigned *sym, char *dtype, size_t dtype_len,
                        hidet_error *err)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "shape");
    snprintf(dtype, dtype_len, "%s", jstr(o, "dtype") ? jstr(o, "dtype") : "");
    if (!cJSON_IsArray(a))
        return 0;
    int n = cJSON_GetArraySize(a);
    if (n > HIDET_MAX_RANK)
        return hidet__fail(err, -EPROTO, 0, "output rank %d is too large", n);
    for (int i = 0; i < n; i++) {
        const cJSON *d = cJSON_GetArrayItem(a, i);
        char why[160];
        sym[i] = 0;
        if (cJSON_IsString(d)) {
            if (hidet__dims_mask(dims, n_dims, d->valuestring, &sym[i], why, sizeof(why)) < 0)
                return hidet__fail(err, -EPROTO, 0, "output.shape[%d]: %s", i, why);
            shape[i] = 1;
            for (int k = 0; k < n_dims; k++)
                if ((sym[i] & (1u << k)) && __builtin_mul_overflow(shape[i], dims[k].max, &shape[i]))
                    return hidet__fail(err, -EPROTO, 0, "output.shape[%d]: %s is too large at its "
                                       "dims' max", i, d->valuestring);
        } else if (cJSON_IsNumber(d)) {
            shape[i] = (int64_t)d->valuedouble;
        } else {
            return hidet__fail(err, -EPROTO, 0, "output.shape[%d] is not a number or a name", i);
        }
    }
    *ret_rank = n;
    return 0;
}

int hidet_kernel_set_parse(const char *json, size_t len, hidet_kernel_set **ret, hidet_error *err)
{
    cJSON *root;
    int r;

    if (!json || !ret)
        return hidet__fail(err, -EINVAL, 0, "no JSON or no result pointer");
    root = cJSON_ParseWithLength(json, len);
    r = hidet__kernel_set_from_json(root, json, len, NULL, 0, ret, err);
    cJSON_Delete(root);
    return r;
}

int hidet__kernel_set_from_json(const cJSON *root, const char *json, size_t len,
                                const hidet_dim *inherit, int n_inherit, hidet_kernel_set **ret,
                                hidet_error *err)
{
    hidet_kernel_set *s = NULL;
    bool oom = false, dynamic = false;
    int r;

    if (!cJSON_IsObject(root)) {
        r = hidet__fail(err, -EPROTO, 0, "the kernel set is not a JSON object");
        goto out;
    }
    s = calloc(1, sizeof(*s));
    if (!s) {
        r = hidet__fail(err, -ENOMEM, 0, "out of memory");
        goto out;
    }
    const char *key = jstr(root, "key");
    if (!hidet__is_key(key)) {
        r = hidet__fail(err, -EPROTO, 0, "the kernel set has no valid key");
        goto out;
    }
    memcpy(s->key, key, HIDET_KEY_LEN + 1);
    if (hidet__is_key(jstr(root, "op_key")))
        memcpy(s->op_key, jstr(root, "op_key"), HIDET_KEY_LEN + 1);
    s->cached = jbool(root, "cached");
    s->measured = jbool(root, "measured");
    jcopy(root, "origin", s->origin, sizeof(s->origin));
    s->warning = jdup(root, "warning", &oom);
    jcopy(root, "op", s->op, sizeof(s->op));
    jcopy(root, "arch", s->arch, sizeof(s->arch));
    double ws = jnum(root, "workspace_bytes", 0);
    if (ws < 0 || ws > 9007199254740992.0) {
        r = hidet__fail(err, -EPROTO, 0, "bad workspace_bytes");
        goto out;
    }
    s->workspace_bytes = (uint64_t)ws;
    s->latency_us = jnum(root, "latency_us", -1.0);
    s->predicted_us = jnum(root, "predicted_us", -1.0);

    /* The dims first: parameters, grid rules and the output's shape name them. */
    const cJSON *dims = cJSON_GetObjectItemCaseSensitive(root, "dims");
    if (dims) {
        char why[192];
        if (hidet__dims_parse(dims, s->dims, &s->n_dims, why, sizeof(why)) < 0) {
            r = hidet__fail(err, -EPROTO, 0, "dims%s", why);
            goto out;
        }
    } else if (n_inherit > 0) {
        memcpy(s->dims, inherit, (size_t)n_inherit * sizeof(*inherit));
        s->n_dims = n_inherit;
    }

    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "output");
    if (cJSON_IsObject(o) &&
        (r = hidet__output_parse(o, s->dims, s->n_dims, &s->output_rank, s->output_shape,
                                 s->output_dims, s->output_dtype, sizeof(s->output_dtype), err)) < 0)
        goto out;

    const cJSON *ks = cJSON_GetObjectItemCaseSensitive(root, "kernels");
    if (!cJSON_IsArray(ks) || cJSON_GetArraySize(ks) < 1) {
        r = hidet__fail(err, -EPROTO, 0, "the kernel set has no kernels");
        goto out;
    }
    size_t n = (size_t)cJSON_GetArraySize(ks);
    s->kernels = calloc(n, sizeof(*s->kernels));
    s->kernel_dims = calloc(n, sizeof(*s->kernel_dims));
    if (!s->kernels || !s->kernel_dims) {
        r = hidet__fail(err, -ENOMEM, 0, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        s->n_kernels = i + 1; /* so free() sees what was partly filled */
        r = parse_kernel(cJSON_GetArrayItem(ks, (int)i), s->dims, s->n_dims, &s->kernels[i],
                         &s->kernel_dims[i], &dynamic, err, i);
        if (r < 0)
            goto out;
    }
    for (int d = 0; d < s->output_rank; d++)
        dynamic |= s->output_dims[d] != 0;
    if (!dynamic && !s->n_dims) {
        /* A static set: kernel_dims NULL, as before dims existed. */
        for (size_t i = 0; i < n; i++) {
            free(s->kernel_dims[i].param_dim);
            free(s->kernel_dims[i].map_dims);
        }
        free(s->kernel_dims);
        s->kernel_dims = NULL;
    }
    if (json) {
        s->json = malloc(len + 1);
        if (s->json) {
            memcpy(s->json, json, len);
            s->json[len] = '\0';
        }
    } else {
        s->json = cJSON_PrintUnformatted(root);
    }
    if (!s->json || oom) {
        r = hidet__fail(err, -ENOMEM, 0, "out of memory");
        goto out;
    }
    hidet__ok(err);
    *ret = s;
    s = NULL;
    r = 0;
out:
    hidet_kernel_set_free(s);
    return r;
}

/* ---- jobs --------------------------------------------------------------------------------- */

const char *hidet_job_state_name(hidet_job_state s)
{
    switch (s) {
    case HIDET_JOB_QUEUED: return "queued";
    case HIDET_JOB_RUNNING: return "running";
    case HIDET_JOB_DONE: return "done";
    case HIDET_JOB_FAILED: return "failed";
    case HIDET_JOB_CANCELLED: return "cancelled";
    case HIDET_JOB_UNKNOWN: break;
    }
    return "unknown";
}

hidet_job *hidet_job_free(hidet_job *j)
{
    if (!j)
        return NULL;
    free(j->result);
    free(j->warning);
    free(j->error_message);
    free(j->json);
    free(j);
    return NULL;
}

hidet_job **hidet_jobs_free(hidet_job **v, size_t n)
{
    if (!v)
        return NULL;
    for (size_t i = 0; i < n; i++)
        hidet_job_free(v[i]);
    free(v);
    return NULL;
}

/* Fills a job from its JSON object (not the {"job":...} wrapper). */
int hidet__job_from_json(const cJSON *o, hidet_job **ret, hidet_error *err)
{
    hidet_job *j = NULL;
    bool oom = false;
    int r;

    if (!cJSON_IsObject(o))
        return hidet__fail(err, -EPROTO, 0, "the job is not a JSON object");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
    const char *state = jstr(o, "state");
    if (!(cJSON_IsString(id) || cJSON_IsNumber(id)) || !state)
        return hidet__fail(err, -EPROTO, 0, "the job has no id or state");
    j = calloc(1, sizeof(*j));
    if (!j)
        return hidet__fail(err, -ENOMEM, 0, "out of memory");
    if (cJSON_IsString(id))
        snprintf(j->id, sizeof(j->id), "%s", id->valuestring);
    else
        snprintf(j->id, sizeof(j->id), "%.0f", id->valuedouble);
    j->state = HIDET_JOB_UNKNOWN;
    for (int s = HIDET_JOB_QUEUED; s < HIDET_JOB_UNKNOWN; s++)
        if (strcmp(state, hidet_job_state_name((hidet_job_state)s)) == 0)
            j->state = (hidet_job_state)s;
    jcopy(o, "op", j->op, sizeof(j->op));
    jcopy(o, "arch", j->arch, sizeof(j->arch));
    jcopy(o, "tune", j->tune, sizeof(j->tune));
    jcopy(o, "priority", j->priority, sizeof(j->priority));
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "candidates");
    j->total = (int64_t)jnum(c, "total", 0);
    j->done = (int64_t)jnum(c, "done", 0);
    j->failed = (int64_t)jnum(c, "failed", 0);
    j->best_us = jnum(o, "best_us", -1.0);
    j->elapsed_s = jnum(o, "elapsed_s", 0);
    j->waiters = (int64_t)jnum(o, "waiters", 0);
    j->result = jdup(o, "result", &oom);
    if (j->result) {
        const char *slash = strrchr(j->result, '/');
        if (slash && hidet__is_key(slash + 1))
            memcpy(j->result_key, slash + 1, HIDET_KEY_LEN + 1);
    }
    j->measured = jbool(o, "measured");
    j->warning = jdup(o, "warning", &oom);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "error");
    if (cJSON_IsObject(e)) {
        jcopy(e, "code", j->error_code, sizeof(j->error_code));
        j->error_message = jdup(e, "message", &oom);
    }
    j->json = cJSON_PrintUnformatted(o);
    if (oom || !j->json) {
        r = hidet__fail(err, -ENOMEM, 0, "out of memory");
        hidet_job_free(j);
        return r;
    }
    *ret = j;
    return 0;
}

int hidet_job_parse(const char *json, size_t len, hidet_job **ret, hidet_error *err)
{
    cJSON *root;
    int r;

    if (!json || !ret)
        return hidet__fail(err, -EINVAL, 0, "no JSON or no result pointer");
    root = cJSON_ParseWithLength(json, len);
    if (!root)
        return hidet__fail(err, -EPROTO, 0, "the job answer is not JSON");
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "job");
    r = hidet__job_from_json(o ? o : root, ret, err);
    cJSON_Delete(root);
    if (r == 0)
        hidet__ok(err);
    return r;
}
