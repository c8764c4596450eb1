/* resolve/answer.c - the kernel set an artifact is answered with, and the rank policy's parts
 * (resolve.h, "pure functions"). Built with cJSON; the order of keys follows the agreed wire
 * format (docs/api.md) so answers read the same in every client's logs. */
#include "resolve/resolve.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tuner/tuner.h"

/* Dim k's name, for tuner_tmap_to_json_dims (ctx: the kc_launch). */
static const char *kc_launch_dim_name(const void *ctx, int k)
{
    return ((const kc_launch *)ctx)->dims[k].name;
}

/* Adds a number, or null when the value is "unknown" (negative or not finite). */
static cJSON *add_us(cJSON *obj, const char *name, double us)
{
    if (us < 0 || !isfinite(us))
        return cJSON_AddNullToObject(obj, name);
    return cJSON_AddNumberToObject(obj, name, us);
}

/* Parses stored JSON text (the schedule, embedded as is in the answer) or returns NULL. */
static cJSON *parse_opt(const char *text)
{
    if (!text || !*text)
        return NULL;
    return cJSON_Parse(text);
}

/* [x,y,z] of a launch (kc_launch_check() has made sure each is >= 1). */
static cJSON *dim3(const uint32_t v[3])
{
    cJSON *out = cJSON_CreateArray();
    for (int i = 0; out && i < 3; i++) {
        cJSON *n = cJSON_CreateNumber((double)v[i]);
        if (!n || !cJSON_AddItemToArray(out, n)) {
            cJSON_Delete(n);
            cJSON_Delete(out);
            return NULL;
        }
    }
    return out;
}

/* The names of the dims in bit set `mask` joined by "*" ("n", "b*s"): how a named axis reads in
 * a request and in the answer's output shape. */
static void sym_text(const kc_launch *l, unsigned mask, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int k = 0; k < l->n_dims; k++) {
        if (!(mask & (1u << k)))
            continue;
        int w = snprintf(buf + at, len - at, "%s%s", at ? "*" : "", l->dims[k].name);
        if (w < 0 || (size_t)w >= len - at)
            break;
        at += (size_t)w;
    }
}

/* A kernel's grid: [x,y,z] of numbers, where a dimension with a rule is the rule
 * {"dims": [names], "coef", "div", "mul", "cap"} (docs/api.md, "Named dimensions"). */
static cJSON *grid_json(const kc_launch *l, const kc_kernel *k)
{
    cJSON *out = cJSON_CreateArray();
    for (int d = 0; out && d < 3; d++) {
        const kc_grid_rule *r = &k->grid_rule[d];
        cJSON *g;
        if (!r->dims) {
            g = cJSON_CreateNumber((double)k->grid[d]);
        } else {
            g = cJSON_CreateObject();
            cJSON *names = g ? cJSON_AddArrayToObject(g, "dims") : NULL;
            for (int i = 0; names && i < l->n_dims; i++)
                if (r->dims & (1u << i))
                    cJSON_AddItemToArray(names, cJSON_CreateString(l->dims[i].name));
            if (!names || !cJSON_AddNumberToObject(g, "coef", (double)r->coef) ||
                !cJSON_AddNumberToObject(g, "div", (double)r->div) ||
                !cJSON_AddNumberToObject(g, "mul", (double)r->mul) ||
                !cJSON_AddNumberToObject(g, "cap", (double)r->cap)) {
                cJSON_Delete(g);
                g = NULL;
            }
        }
        if (!g || !cJSON_AddItemToArray(out, g)) {
            cJSON_Delete(g);
            cJSON_Delete(out);
            return NULL;
        }
    }
    return out;
}

const char *resolve_origin_name(resolve_origin o)
{
    switch (o) {
    case RESOLVE_ORIGIN_MEMORY:
    case RESOLVE_ORIGIN_LOCAL:
        return "local";
    case RESOLVE_ORIGIN_REMOTE:
        return "remote";
    case RESOLVE_ORIGIN_TUNED:
        return "tuned";
    default:
        return NULL;
    }
}

int resolve_kernel_set_json(const kc_artifact *a, bool cached, resolve_origin origin,
                            const char *warning, char **ret)
{
    if (!a || !ret)
        return -EINVAL;
    /* A stored record is refused rather than half-answered; a set of no kernels launches nothing
     * (its rows were lost), so it is refused too. */
    if (kc_launch_check(&a->launch) < 0 || a->launch.n_kernels < 1)
        return -EINVAL;
    const kc_launch *l = &a->launch;
    bool measured = a->choice == KC_CHOSEN_MEASURED;
    int r = -ENOMEM;
    cJSON *schedule = parse_opt(a->schedule_json);
    cJSON *root = cJSON_CreateObject();
    if (!root)
        goto out;
    char url[128];
    cJSON_AddStringToObject(root, "key", a->key);
    cJSON_AddStringToObject(root, "op_key", a->op_key);
    cJSON_AddBoolToObject(root, "cached", cached);
    if (resolve_origin_name(origin))
        cJSON_AddStringToObject(root, "origin", resolve_origin_name(origin));
    cJSON_AddBoolToObject(root, "measured", measured);
    if (warning && *warning)
        cJSON_AddStringToObject(root, "warning", warning);
    cJSON_AddStringToObject(root, "op", a->op);
    cJSON_AddStringToObject(root, "arch", a->target);
    /* A dynamic op's set: the ranges its sizes may take (clients check a launch's sizes). */
    if (l->n_dims) {
        cJSON *dims = cJSON_AddObjectToObject(root, "dims");
        if (!dims)
            goto out;
        for (int k = 0; k < l->n_dims; k++) {
            cJSON *d = cJSON_AddObjectToObject(dims, l->dims[k].name);
            if (!d)
                goto out;
            cJSON_AddNumberToObject(d, "min", (double)l->dims[k].min);
            cJSON_AddNumberToObject(d, "max", (double)l->dims[k].max);
            cJSON_AddNumberToObject(d, "multiple_of", (double)l->dims[k].multiple_of);
        }
    }
    if (l->has_output) {
        cJSON *o = cJSON_AddObjectToObject(root, "output");
        cJSON *shape = o ? cJSON_AddArrayToObject(o, "shape") : NULL;
        if (!shape)
            goto out;
        for (int i = 0; i < l->output_rank; i++) {
            if (l->output_sym[i]) {
                char name[KC_MAX_DIMS * KC_DIM_NAME_LEN];
                sym_text(l, l->output_sym[i], name, sizeof(name));
                cJSON_AddItemToArray(shape, cJSON_CreateString(name));
            } else {
                cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)l->output_shape[i]));
            }
        }
        cJSON_AddStringToObject(o, "dtype", l->output_dtype);
    } else {
        cJSON_AddNullToObject(root, "output");
    }
    cJSON_AddNumberToObject(root, "workspace_bytes", (double)l->workspace_bytes);

    cJSON *kernels = cJSON_AddArrayToObject(root, "kernels");
    if (!kernels)
        goto out;
    for (int i = 0; i < l->n_kernels; i++) {
        const kc_kernel *k = &l->kernels[i];
        cJSON *grid = grid_json(l, k);
        cJSON *block = dim3(k->block);
        cJSON *kj = cJSON_CreateObject();
        if (!kj || !grid || !block) {
            cJSON_Delete(grid);
            cJSON_Delete(block);
            cJSON_Delete(kj);
            goto out;
        }
        cJSON_AddItemToArray(kernels, kj);
        cJSON_AddStringToObject(kj, "name", k->name);
        cJSON_AddStringToObject(kj, "arch", a->target);
        cJSON_AddItemToObject(kj, "grid", grid);
        cJSON_AddItemToObject(kj, "block", block);
        cJSON_AddNumberToObject(kj, "shared_bytes", k->shared_bytes);
        cJSON *params = cJSON_AddArrayToObject(kj, "params");
        for (int index = 0; index < k->n_args; index++) {
            cJSON *p = cJSON_CreateObject();
            if (!p)
                goto out;
            cJSON_AddItemToArray(params, p);
            cJSON_AddNumberToObject(p, "index", index);
            if (kc_arg_is_dim(k->args[index])) {
                /* A size, a long long by value (kc_launch_check: the dim exists). */
                cJSON_AddStringToObject(p, "type", "int");
                cJSON_AddStringToObject(p, "dim", l->dims[k->args[index] - KC_ARG_DIM0].name);
                continue;
            }
            cJSON_AddStringToObject(p, "buffer", kc_buf_name(k->args[index]));
            cJSON_AddStringToObject(p, "type", "pointer");
        }
        /* Tensor maps follow the pointers: the launcher encodes each for its buffer's address
         * (cuTensorMapEncodeTiled with these fields) and passes the 128 bytes by value. */
        for (int m = 0; m < k->n_maps; m++) {
            cJSON *p = cJSON_CreateObject();
            /* A dynamic set's map dimension that follows named dims is written with their
             * names: {"dims": ["n"], "coef": 1} (docs/api.md, "Named dimensions"). */
            const tuner_tmap_dims names = {l->n_dims, NULL, kc_launch_dim_name, l};
            cJSON *tm = tuner_tmap_to_json_dims(&k->maps[m], &names);
            if (!p || !tm) {
                cJSON_Delete(p);
                cJSON_Delete(tm);
                goto out;
            }
            cJSON_AddItemToArray(params, p);
            cJSON_AddNumberToObject(p, "index", k->n_args + m);
            cJSON_AddStringToObject(p, "buffer", kc_buf_name((kc_buf)k->maps[m].buf));
            cJSON_AddStringToObject(p, "type", "tensor_map");
            cJSON_AddItemToObject(p, "tensor_map", tm);
        }
        snprintf(url, sizeof(url), "/v1/kernels/%s/ptx", a->key);
        cJSON_AddStringToObject(kj, "ptx_url", url);
        snprintf(url, sizeof(url), "/v1/kernels/%s/cubin", a->key);
        cJSON_AddStringToObject(kj, "cubin_url", url);
        /* One timing covers the whole set (launched in order); a single kernel carries it. */
        add_us(kj, "latency_us", l->n_kernels == 1 && measured ? a->latency_us : -1);
    }
    add_us(root, "latency_us", measured ? a->latency_us : -1);
    add_us(root, "predicted_us", a->predicted_us);
    /* A measured range's fit (kc_launch): what a dispatch table cuts its ranges by. */
    if (l->range_worst > 0)
        cJSON_AddNumberToObject(root, "range_worst", round(l->range_worst * 1000.0) / 1000.0);
    if (schedule) {
        cJSON_AddItemToObject(root, "schedule", schedule);
        schedule = NULL;
    } else {
        cJSON_AddNullToObject(root, "schedule");
    }
    char *text = cJSON_PrintUnformatted(root);
    if (text) {
        *ret = text;
        r = 0;
    }
out:
    cJSON_Delete(root);
    cJSON_Delete(schedule);
    return r;
}


int resolve_artifact_rank(const kc_artifact *a)
{
    /* kc_choice is ordered as the rank: default 0, model 1, measured 2. */
    return a ? (int)a->choice : 0;
}

bool resolve_rank_answers(int rank, tuner_tune_mode want, bool gpu_usable, bool *ret_warn)
{
    bool warn = false, ok;
    if (rank >= (int)want) {
        ok = true;
    } else if (want == TUNER_TUNE_MEASURE && !gpu_usable && rank >= 1) {
        ok = true;
        warn = true;
    } else {
        ok = false;
    }
    if (ret_warn)
        *ret_warn = warn;
    return ok;
}

int resolve_error_status(const char *code)
{
    static const struct {
        const char *code;
        int status;
    } map[] = {
        { "invalid_json", 400 },     { "invalid_field", 422 },   { "unknown_op", 422 },
        { "unknown_dtype", 422 },    { "shape_mismatch", 422 },  { "limit_exceeded", 422 },
        { "unsupported", 422 },      { "not_found", 404 },       { "queue_full", 429 },
        { "no_gpu", 503 },           { "shutting_down", 503 },   { "timeout", 503 },
        { "compile_error", 500 },    { "no_valid_candidate", 500 }, { "integrity_error", 500 },
        { "internal", 500 },
    };
    if (!code)
        return 500;
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strcmp(code, map[i].code) == 0)
            return map[i].status;
    return 500;
}
