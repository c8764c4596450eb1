/* kernel_cache/kc_launch.c - the typed launch description (kc_launch), the choice and buffer
 * enums, and the one place that converts launch descriptions between JSON text and typed rows.
 *
 * JSON text appears only at the edges: the export file carries the launch as text (so files
 * written before schema 2 still import), and schema 1 stored it as text. Both are converted once,
 * on import or in the migration, and checked as strictly as the daemon checked them when it
 * answered from the text; everything after that reads the typed struct.
 */
#include "kernel_cache/kc.h"
#include "kernel_cache/kc_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

const char *kc_choice_name(kc_choice c)
{
    switch (c) {
    case KC_CHOSEN_DEFAULT: return "default";
    case KC_CHOSEN_MODEL: return "model";
    case KC_CHOSEN_MEASURED: return "measured";
    }
    return "unknown";
}

int kc__choice_parse(const char *name, kc_choice *ret)
{
    for (int c = KC_CHOSEN_DEFAULT; c <= KC_CHOSEN_MEASURED; c++) {
        if (name && strcmp(name, kc_choice_name((kc_choice)c)) == 0) {
            *ret = (kc_choice)c;
            return 0;
        }
    }
    return -EINVAL;
}

static const char *const kc__buf_names[] = {
    [KC_BUF_INPUT0 + 0] = "input0", [KC_BUF_INPUT0 + 1] = "input1",
    [KC_BUF_INPUT0 + 2] = "input2", [KC_BUF_INPUT0 + 3] = "input3",
    [KC_BUF_INPUT0 + 4] = "input4", [KC_BUF_INPUT0 + 5] = "input5",
    [KC_BUF_INPUT0 + 6] = "input6", [KC_BUF_INPUT0 + 7] = "input7",
    [KC_BUF_OUTPUT] = "output",     [KC_BUF_WORKSPACE] = "workspace",
};
_Static_assert(KC_MAX_INPUTS == 8, "one name per input in kc__buf_names");
#define KC__N_BUFS ((int)(sizeof(kc__buf_names) / sizeof(kc__buf_names[0])))

const char *kc_buf_name(kc_buf b)
{
    return (int)b >= 0 && (int)b < KC__N_BUFS ? kc__buf_names[b] : NULL;
}

int kc_buf_parse(const char *name, kc_buf *ret)
{
    for (int b = 0; name && b < KC__N_BUFS; b++) {
        if (strcmp(name, kc__buf_names[b]) == 0) {
            *ret = (kc_buf)b;
            return 0;
        }
    }
    return -EINVAL;
}

static const char *const kc__dim_arg_names[KC_MAX_DIMS] = {"dim0", "dim1", "dim2", "dim3"};
_Static_assert(KC_MAX_DIMS == 4, "one name per dim in kc__dim_arg_names");

const char *kc_arg_name(kc_buf a)
{
    if (kc_arg_is_dim(a))
        return kc__dim_arg_names[(int)a - KC_ARG_DIM0];
    return kc_buf_name(a);
}

int kc_arg_parse(const char *name, kc_buf *ret)
{
    for (int k = 0; name && k < KC_MAX_DIMS; k++) {
        if (strcmp(name, kc__dim_arg_names[k]) == 0) {
            *ret = (kc_buf)(KC_ARG_DIM0 + k);
            return 0;
        }
    }
    return kc_buf_parse(name, ret);
}

/* a * b for non-negative a, b, saturating at INT64_MAX. */
static int64_t kc__sat_mul(int64_t a, int64_t b)
{
    if (a != 0 && b > INT64_MAX / a)
        return INT64_MAX;
    return a * b;
}

int64_t kc_grid_rule_eval(const kc_grid_rule *r, const int64_t *sizes)
{
    int64_t n = r->coef < 0 ? 0 : r->coef;
    for (int k = 0; k < KC_MAX_DIMS; k++)
        if (r->dims & (1u << k))
            n = kc__sat_mul(n, sizes[k] < 0 ? 0 : sizes[k]);
    int64_t div = r->div < 1 ? 1 : r->div;
    int64_t g = kc__sat_mul(r->mul < 0 ? 0 : r->mul, n / div + (n % div != 0));
    return r->cap > 0 && g > r->cap ? r->cap : g;
}

static bool kc__cstr_ok(const char *s, size_t cap)
{
    return memchr(s, '\0', cap) != NULL && s[0] != '\0';
}

/* An extern "C" entry point: a C identifier. */
static bool kc__ident_ok(const char *s, size_t cap)
{
    if (!kc__cstr_ok(s, cap) || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return false;
    return true;
}

/* A dim's name as the request language writes it: [a-z_][a-z0-9_]*, shorter than its field. */
static bool kc__dim_name_ok(const char *s, size_t cap)
{
    if (!kc__cstr_ok(s, cap) || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return false;
    return true;
}

/* The dims table of a dynamic launch; NULL when it holds (also for none). */
static const char *kc__dims_problem(const kc_launch *l)
{
    if (l->n_dims < 0 || l->n_dims > KC_MAX_DIMS)
        return "the number of named dims is out of range";
    for (int k = 0; k < l->n_dims; k++) {
        const kc_dim *d = &l->dims[k];
        if (!kc__dim_name_ok(d->name, sizeof(d->name)))
            return "a dim's name is not one a request can give ([a-z_][a-z0-9_]*, at most 15)";
        for (int j = 0; j < k; j++)
            if (strcmp(l->dims[j].name, d->name) == 0)
                return "two dims have the same name";
        if (d->multiple_of < 1 || d->multiple_of > KC_MAX_DIM || d->min < 1 || d->min > d->max ||
            d->max > KC_MAX_DIM || d->min % d->multiple_of || d->max % d->multiple_of)
            return "a dim's range is not 1 <= min <= max <= 2^31-1, multiples of multiple_of";
    }
    for (int k = l->n_dims; k < KC_MAX_DIMS; k++) {
        static const kc_dim none;
        if (memcmp(&l->dims[k], &none, sizeof(none)) != 0)
            return "a dim beyond n_dims is set";
    }
    /* written as "!(x >= lo && x <= hi)" so that a NaN fails too */
    if (l->range_worst != 0 && (l->n_dims == 0 || !(l->range_worst >= 1.0 && l->range_worst <= KC_MAX_RANGE_WORST)))
        return "range_worst is not 0, or a dynamic launch's 1..1000";
    return NULL;
}

/* One grid dimension's rule against the launch's dims; grid: its value at the dims' max. */
static const char *kc__rule_problem(const kc_launch *l, const kc_grid_rule *r, uint32_t grid,
                                    uint32_t limit)
{
    if (r->dims == 0) {
        if (r->coef || r->div || r->mul || r->cap)
            return "a fixed grid dimension carries a rule's numbers";
        return NULL;
    }
    if (r->dims >> l->n_dims)
        return "a grid rule names a dim the launch does not have";
    if (r->coef < 1 || r->div < 1 || r->mul < 1 || r->coef > KC_MAX_DIM || r->div > KC_MAX_DIM ||
        r->mul > KC_MAX_DIM)
        return "a grid rule's coef, div or mul is not in 1..2^31-1";
    if (r->cap < 0 || r->cap > (int64_t)limit)
        return "a grid rule's cap is negative or beyond CUDA's grid limit";
    int64_t at_max[KC_MAX_DIMS] = {0};
    for (int k = 0; k < l->n_dims; k++)
        at_max[k] = l->dims[k].max;
    if (kc_grid_rule_eval(r, at_max) != (int64_t)grid)
        return "a grid rule's value at the dims' max is not the grid";
    return NULL;
}

const char *kc__launch_problem(const kc_launch *l)
{
    if (!l || l->n_kernels < 0 || l->n_kernels > KC_MAX_KERNELS)
        return "the number of kernels is out of range";
    const char *dims_why = kc__dims_problem(l);
    if (dims_why)
        return dims_why;
    for (int i = 0; i < l->n_kernels; i++) {
        const kc_kernel *k = &l->kernels[i];
        if (!kc__ident_ok(k->name, sizeof(k->name)))
            return "a kernel's name is not a C identifier";
        if (k->n_args < 0 || k->n_args > KC_MAX_ARGS)
            return "a kernel's number of arguments is out of range";
        for (int d = 0; d < 3; d++)
            if (k->grid[d] < 1 || k->block[d] < 1)
                return "a grid or block dimension is 0";
        if (k->grid[0] > KC_MAX_GRID_X || k->grid[1] > KC_MAX_GRID_YZ ||
            k->grid[2] > KC_MAX_GRID_YZ)
            return "a grid dimension is larger than CUDA allows (2^31-1, 65535, 65535)";
        if (k->block[0] > KC_MAX_BLOCK_THREADS || k->block[1] > KC_MAX_BLOCK_THREADS ||
            k->block[2] > KC_MAX_BLOCK_Z ||
            (uint64_t)k->block[0] * k->block[1] * k->block[2] > KC_MAX_BLOCK_THREADS)
            return "a block is larger than CUDA allows (1024 threads; z at most 64)";
        if (k->shared_bytes > KC_MAX_SHARED_BYTES)
            return "a kernel's shared memory is larger than any target gives a block";
        for (int a = 0; a < k->n_args; a++) {
            if (kc_arg_is_dim(k->args[a]) && (int)k->args[a] - KC_ARG_DIM0 >= l->n_dims)
                return "a size argument names a dim the launch does not have";
            if (!kc_arg_name(k->args[a]))
                return "an argument names no buffer and no dim";
        }
        const uint32_t limits[3] = {KC_MAX_GRID_X, KC_MAX_GRID_YZ, KC_MAX_GRID_YZ};
        for (int d = 0; d < 3; d++) {
            const char *why = kc__rule_problem(l, &k->grid_rule[d], k->grid[d], limits[d]);
            if (why)
                return why;
        }
        if (k->n_maps < 0 || k->n_maps > KC_MAX_MAPS)
            return "a kernel's number of tensor maps is out of range";
        for (int m = 0; m < k->n_maps; m++) {
            const tuner_tmap *t = &k->maps[m];
            if (!kc_buf_name((kc_buf)t->buf) || tuner_tmap_check(t, NULL, 0, NULL, 0) < 0)
                return "a tensor map is not one the driver would encode";
            for (int d = 0; d < t->rank; d++) {
                if (!t->sym[d])
                    continue;
                if (t->sym[d] >> l->n_dims)
                    return "a tensor map's dimension names a dim the launch does not have";
                int64_t at_max = (int64_t)t->sym_coef[d];
                for (int q = 0; q < l->n_dims; q++)
                    if (t->sym[d] & (1u << q))
                        at_max = kc__sat_mul(at_max, l->dims[q].max);
                if ((uint64_t)at_max != t->dims[d])
                    return "a tensor map's named dimension is not its coef times its dims' max";
            }
        }
    }
    if (l->workspace_bytes > KC_MAX_WORKSPACE_BYTES)
        return "workspace_bytes is larger than any request's kernels need";
    if (l->has_output) {
        tuner_dtype dt;
        if (l->output_rank < 1 || l->output_rank > KC_MAX_RANK)
            return "the output's rank is out of range";
        if (!kc__cstr_ok(l->output_dtype, sizeof(l->output_dtype)) ||
            tuner_dtype_parse(l->output_dtype, &dt) < 0 ||
            strcmp(tuner_dtype_name(dt), l->output_dtype) != 0)
            return "the output's dtype is not one this build knows";
        if (tuner_dtype_is_int(dt)) /* integers are inputs only (gather's index, a cast's input) */
            return "the output's dtype is an integer, which no kernel writes";
        uint64_t numel = 1;
        for (int d = 0; d < l->output_rank; d++) {
            if (l->output_shape[d] < 1 || l->output_shape[d] > KC_MAX_DIM)
                return "an output dimension is out of range (1 to 2^31-1)";
            if (l->output_sym[d]) {
                if (l->output_sym[d] >> l->n_dims)
                    return "an output axis names a dim the launch does not have";
                int64_t at_max = 1;
                for (int k = 0; k < l->n_dims; k++)
                    if (l->output_sym[d] & (1u << k))
                        at_max = kc__sat_mul(at_max, l->dims[k].max);
                if (at_max != l->output_shape[d])
                    return "a named output axis is not the product of its dims' max";
            }
            numel *= (uint64_t)l->output_shape[d];
            if (numel > KC_MAX_NUMEL)
                return "the output has more than 2^31 elements";
        }
    }
    for (int d = l->has_output ? l->output_rank : 0; d < KC_MAX_RANK; d++)
        if (l->output_sym[d])
            return "an output axis that is not there is named";
    return NULL;
}

int kc_launch_check(const kc_launch *l)
{
    return kc__launch_problem(l) ? -EINVAL : 0;
}

uint64_t kc__launch_bytes(const kc_launch *l)
{
    /* What the rows hold, roughly: names, nine integers, one byte per argument and a record per
     * tensor map per kernel. */
    uint64_t n = 8 + strnlen(l->output_dtype, sizeof(l->output_dtype)) +
                 8 * (uint64_t)(l->output_rank > 0 ? l->output_rank : 0);
    for (int i = 0; i < l->n_kernels && i < KC_MAX_KERNELS; i++)
        n += strnlen(l->kernels[i].name, sizeof(l->kernels[i].name)) + 9 * 8 +
             (uint64_t)(l->kernels[i].n_args > 0 ? l->kernels[i].n_args : 0) +
             (uint64_t)(l->kernels[i].n_maps > 0 ? l->kernels[i].n_maps : 0) * TUNER_TMAP_PACKED +
             (kc__kernel_is_dynamic(&l->kernels[i]) ? kc__rules_blob_len(&l->kernels[i]) : 0);
    /* A dim's row: its name and four integers. */
    for (int k = 0; k < l->n_dims && k < KC_MAX_DIMS; k++)
        n += strnlen(l->dims[k].name, sizeof(l->dims[k].name)) + 4 * 8;
    return n;
}

static cJSON *kc__u32_array(const uint32_t v[3])
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < 3; i++) {
        cJSON *n = cJSON_CreateNumber(v[i]);
        if (!n || !cJSON_AddItemToArray(a, n)) {
            cJSON_Delete(n);
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

/* A tensor map's buffer as export files name buffers ("input1", "output", ...). */
static cJSON *buf_name_json(int buf)
{
    return cJSON_CreateString(kc_buf_name((kc_buf)buf));
}

int kc_launch_json(const kc_launch *l, char **ret)
{
    int r = -ENOMEM;

    if (!ret || kc_launch_check(l) < 0)
        return -EINVAL;
    /* Keys in the order the scheduler wrote them in schema 1, so an export file reads the same. */
    cJSON *root = cJSON_CreateObject();
    cJSON *ks = cJSON_AddArrayToObject(root, "kernels");
    if (!ks)
        goto out;
    for (int i = 0; i < l->n_kernels; i++) {
        const kc_kernel *k = &l->kernels[i];
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(ks, o)) {
            cJSON_Delete(o);
            goto out;
        }
        cJSON *grid = kc__u32_array(k->grid), *block = kc__u32_array(k->block);
        if (!grid || !block || !cJSON_AddStringToObject(o, "name", k->name)) {
            cJSON_Delete(grid);
            cJSON_Delete(block);
            goto out;
        }
        cJSON_AddItemToObject(o, "grid", grid);
        cJSON_AddItemToObject(o, "block", block);
        if (!cJSON_AddNumberToObject(o, "shared_bytes", k->shared_bytes))
            goto out;
        cJSON *args = cJSON_AddArrayToObject(o, "args");
        if (!args)
            goto out;
        for (int a = 0; a < k->n_args; a++) {
            cJSON *s = cJSON_CreateString(kc_arg_name(k->args[a]));
            if (!s || !cJSON_AddItemToArray(args, s)) {
                cJSON_Delete(s);
                goto out;
            }
        }
        if (!tuner_tmaps_add_json(o, k->maps, k->n_maps, "buffer", buf_name_json))
            goto out;
        if (kc__kernel_is_dynamic(k)) {
            cJSON *rules = cJSON_AddArrayToObject(o, "grid_rules");
            if (!rules)
                goto out;
            for (int d = 0; d < 3; d++) {
                const kc_grid_rule *g = &k->grid_rule[d];
                cJSON *rj = g->dims ? cJSON_CreateObject() : cJSON_CreateNull();
                if (!rj || !cJSON_AddItemToArray(rules, rj)) {
                    cJSON_Delete(rj);
                    goto out;
                }
                if (g->dims && (!cJSON_AddNumberToObject(rj, "dims", g->dims) ||
                                !cJSON_AddNumberToObject(rj, "coef", (double)g->coef) ||
                                !cJSON_AddNumberToObject(rj, "div", (double)g->div) ||
                                !cJSON_AddNumberToObject(rj, "mul", (double)g->mul) ||
                                !cJSON_AddNumberToObject(rj, "cap", (double)g->cap)))
                    goto out;
            }
        }
    }
    if (!cJSON_AddNumberToObject(root, "workspace_bytes", (double)l->workspace_bytes))
        goto out;
    if (l->has_output) {
        cJSON *o = cJSON_AddObjectToObject(root, "output");
        cJSON *shape = o ? cJSON_AddArrayToObject(o, "shape") : NULL;
        if (!shape)
            goto out;
        for (int d = 0; d < l->output_rank; d++) {
            cJSON *n = cJSON_CreateNumber((double)l->output_shape[d]);
            if (!n || !cJSON_AddItemToArray(shape, n)) {
                cJSON_Delete(n);
                goto out;
            }
        }
        if (!cJSON_AddStringToObject(o, "dtype", l->output_dtype))
            goto out;
        if (l->n_dims) {
            cJSON *sym = cJSON_AddArrayToObject(o, "sym");
            for (int d = 0; sym && d < l->output_rank; d++) {
                cJSON *n = cJSON_CreateNumber(l->output_sym[d]);
                if (!n || !cJSON_AddItemToArray(sym, n)) {
                    cJSON_Delete(n);
                    sym = NULL;
                }
            }
            if (!sym)
                goto out;
        }
    }
    if (l->n_dims) {
        cJSON *dims = cJSON_AddArrayToObject(root, "dims");
        if (!dims)
            goto out;
        for (int k = 0; k < l->n_dims; k++) {
            cJSON *dj = cJSON_CreateObject();
            if (!dj || !cJSON_AddItemToArray(dims, dj)) {
                cJSON_Delete(dj);
                goto out;
            }
            if (!cJSON_AddStringToObject(dj, "name", l->dims[k].name) ||
                !cJSON_AddNumberToObject(dj, "min", (double)l->dims[k].min) ||
                !cJSON_AddNumberToObject(dj, "max", (double)l->dims[k].max) ||
                !cJSON_AddNumberToObject(dj, "multiple_of", (double)l->dims[k].multiple_of))
                goto out;
        }
        if (l->range_worst > 0 && !cJSON_AddNumberToObject(root, "range_worst", l->range_worst))
            goto out;
    }
    char *text = cJSON_PrintUnformatted(root);
    if (!text)
        goto out;
    *ret = text;
    r = 0;
out:
    cJSON_Delete(root);
    return r;
}

/* ---------------------------------------------------------------------------------------- */
/* from the JSON text of schema 1 and of export files */

/* An integer in [lo, hi] written as a JSON number. */
static bool kc__jnum(const cJSON *v, double lo, double hi, double *ret)
{
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble) ||
        v->valuedouble < lo || v->valuedouble > hi)
        return false;
    *ret = v->valuedouble;
    return true;
}

static bool kc__dim3(const cJSON *src, uint32_t out[3])
{
    double d;
    if (!cJSON_IsArray(src) || cJSON_GetArraySize(src) != 3)
        return false;
    for (int i = 0; i < 3; i++) {
        if (!kc__jnum(cJSON_GetArrayItem(src, i), 1, UINT32_MAX, &d))
            return false;
        out[i] = (uint32_t)d;
    }
    return true;
}

/* An argument: a buffer's or a dim's name (kc_arg_name), or (as some schema-1 rows wrote it) the
 * buffer's number, which has the same value in kc_buf as the tuner's TUNER_BUF_* had (schema 1
 * knew no dims, so a number is never one). */
static bool kc__arg(const cJSON *v, kc_buf *ret)
{
    double d;
    if (cJSON_IsString(v))
        return kc_arg_parse(v->valuestring, ret) == 0;
    if (!kc__jnum(v, 0, KC__N_BUFS - 1, &d))
        return false;
    *ret = (kc_buf)(int)d;
    return true;
}

/* A tensor map: its buffer's name beside tuner_tmap_to_json's members, as kc_launch_json writes
 * it (a symbolic dimension over l's dims, already read); false when it is not one. */
static bool kc__map(const cJSON *v, const kc_launch *l, tuner_tmap *ret)
{
    kc_buf b;
    if (!cJSON_IsObject(v) ||
        kc_buf_parse(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "buffer")), &b) < 0)
        return false;
    ret->buf = (int)b;
    /* A symbolic dimension names the launch's dims by index (tuner_tmap_to_json). */
    int64_t max[KC_MAX_DIMS] = {0};
    for (int k = 0; k < l->n_dims; k++)
        max[k] = l->dims[k].max;
    const tuner_tmap_dims dims = {l->n_dims, max, NULL, NULL};
    return tuner_tmap_from_json_dims(v, "buffer", &dims, ret, NULL, 0, NULL, 0) == 0;
}

/* A kernel's "grid_rules": three entries, each null (a fixed dimension) or
 * {"dims":MASK,"coef","div","mul","cap"} with nothing else; false when it is not that. The values
 * themselves are checked against the dims by kc_launch_check. */
static bool kc__grid_rules(const cJSON *v, kc_grid_rule out[3])
{
    static const char *const members[] = {"dims", "coef", "div", "mul", "cap"};
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 3)
        return false;
    for (int d = 0; d < 3; d++) {
        const cJSON *r = cJSON_GetArrayItem(v, d);
        double x[5];
        memset(&out[d], 0, sizeof(out[d]));
        if (cJSON_IsNull(r))
            continue;
        if (!cJSON_IsObject(r) || cJSON_GetArraySize(r) != 5)
            return false;
        for (int m = 0; m < 5; m++)
            if (!kc__jnum(cJSON_GetObjectItemCaseSensitive(r, members[m]), m == 0 ? 1 : 0,
                          m == 0 ? (1 << KC_MAX_DIMS) - 1 : KC_MAX_DIM, &x[m]))
                return false;
        out[d] = (kc_grid_rule){(uint8_t)x[0], (int64_t)x[1], (int64_t)x[2], (int64_t)x[3],
                                (int64_t)x[4]};
    }
    return true;
}

/* The top-level "dims": [{"name","min","max","multiple_of"}] (nothing else in an entry) into l;
 * false when it is not that. */
static bool kc__dims(const cJSON *v, kc_launch *l)
{
    const cJSON *dj;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) < 1 || cJSON_GetArraySize(v) > KC_MAX_DIMS)
        return false;
    cJSON_ArrayForEach(dj, v)
    {
        kc_dim *d = &l->dims[l->n_dims++];
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(dj, "name");
        double lo, hi, mo;
        if (!cJSON_IsObject(dj) || cJSON_GetArraySize(dj) != 4 || !cJSON_IsString(name) ||
            strlen(name->valuestring) >= sizeof(d->name) ||
            !kc__jnum(cJSON_GetObjectItemCaseSensitive(dj, "min"), 0, KC_MAX_DIM, &lo) ||
            !kc__jnum(cJSON_GetObjectItemCaseSensitive(dj, "max"), 0, KC_MAX_DIM, &hi) ||
            !kc__jnum(cJSON_GetObjectItemCaseSensitive(dj, "multiple_of"), 0, KC_MAX_DIM, &mo))
            return false;
        strcpy(d->name, name->valuestring);
        d->min = (int64_t)lo;
        d->max = (int64_t)hi;
        d->multiple_of = (int64_t)mo;
    }
    return true;
}

/* {"shape":[...],"dtype":"..."} into l's output; false when it is not one. */
static bool kc__output(const cJSON *o, kc_launch *l)
{
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(o, "shape");
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(o, "dtype");
    double d;
    int n = cJSON_GetArraySize(shape);

    if (!cJSON_IsObject(o) || !cJSON_IsArray(shape) || !cJSON_IsString(dtype) || n > KC_MAX_RANK ||
        !*dtype->valuestring || strlen(dtype->valuestring) >= sizeof(l->output_dtype))
        return false;
    for (int i = 0; i < n; i++) {
        if (!kc__jnum(cJSON_GetArrayItem(shape, i), 0, 9007199254740992.0, &d))
            return false;
        l->output_shape[i] = (int64_t)d;
    }
    l->output_rank = n;
    strcpy(l->output_dtype, dtype->valuestring);
    l->has_output = true;
    /* "sym": one bit set per axis (a dynamic launch's; checked against its dims later). */
    const cJSON *sym = cJSON_GetObjectItemCaseSensitive(o, "sym");
    if (sym) {
        if (!cJSON_IsArray(sym) || cJSON_GetArraySize(sym) != n)
            return false;
        for (int i = 0; i < n; i++) {
            if (!kc__jnum(cJSON_GetArrayItem(sym, i), 0, (1 << KC_MAX_DIMS) - 1, &d))
                return false;
            l->output_sym[i] = (uint8_t)d;
        }
    }
    return true;
}

int kc__launch_from_json(const char *launch_json, const char *op_json, kc_launch *ret,
                         const char **ret_why)
{
    cJSON *root = launch_json ? cJSON_Parse(launch_json) : NULL;
    cJSON *op = NULL;
    const cJSON *ks = cJSON_GetObjectItemCaseSensitive(root, "kernels");
    const char *why = NULL;
    kc_launch l;
    double d;

    memset(&l, 0, sizeof(l));
    if (!cJSON_IsObject(root) || !cJSON_IsArray(ks)) {
        why = "not a launch description";
        goto out;
    }
    if (cJSON_GetArraySize(ks) > KC_MAX_KERNELS) {
        why = "too many kernels";
        goto out;
    }
    /* The dims first: a tensor map's symbolic dimension is read against them. */
    const cJSON *dims = cJSON_GetObjectItemCaseSensitive(root, "dims");
    if (dims && !kc__dims(dims, &l)) {
        why = "a malformed dims list";
        goto out;
    }
    const cJSON *worst = cJSON_GetObjectItemCaseSensitive(root, "range_worst");
    if (worst) {
        /* a ratio, not an integer: kc__jnum does not apply */
        if (!cJSON_IsNumber(worst) || !(worst->valuedouble >= 1.0 && worst->valuedouble <= KC_MAX_RANGE_WORST)) {
            why = "a range_worst that is not a number in 1..1000";
            goto out;
        }
        l.range_worst = worst->valuedouble;
    }
    const cJSON *k;
    cJSON_ArrayForEach(k, ks)
    {
        kc_kernel *kk = &l.kernels[l.n_kernels++];
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(k, "name");
        const cJSON *smem = cJSON_GetObjectItemCaseSensitive(k, "shared_bytes");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(k, "args");
        if (!cJSON_IsString(name) || !*name->valuestring ||
            strlen(name->valuestring) >= sizeof(kk->name)) {
            why = "a kernel without a usable name";
            goto out;
        }
        strcpy(kk->name, name->valuestring);
        if (!kc__dim3(cJSON_GetObjectItemCaseSensitive(k, "grid"), kk->grid) ||
            !kc__dim3(cJSON_GetObjectItemCaseSensitive(k, "block"), kk->block)) {
            why = "a grid or block that is not three positive integers";
            goto out;
        }
        /* The daemon answered 0 for a missing size; a present one must be a size. */
        if (smem) {
            if (!kc__jnum(smem, 0, UINT32_MAX, &d)) {
                why = "bad shared_bytes";
                goto out;
            }
            kk->shared_bytes = (uint32_t)d;
        }
        if (!cJSON_IsArray(args) || cJSON_GetArraySize(args) > KC_MAX_ARGS) {
            why = "no argument list, or too many arguments";
            goto out;
        }
        const cJSON *a;
        cJSON_ArrayForEach(a, args)
        {
            if (!kc__arg(a, &kk->args[kk->n_args++])) {
                why = "an argument that names no buffer and no dim";
                goto out;
            }
        }
        const cJSON *maps = cJSON_GetObjectItemCaseSensitive(k, "maps");
        if (maps && (!cJSON_IsArray(maps) || cJSON_GetArraySize(maps) > KC_MAX_MAPS)) {
            why = "a map list that is not a list of at most four maps";
            goto out;
        }
        cJSON_ArrayForEach(a, maps)
        {
            if (!kc__map(a, &l, &kk->maps[kk->n_maps++])) {
                why = "a malformed tensor map";
                goto out;
            }
        }
        const cJSON *rules = cJSON_GetObjectItemCaseSensitive(k, "grid_rules");
        if (rules && !kc__grid_rules(rules, kk->grid_rule)) {
            why = "grid_rules that are not three rules or nulls";
            goto out;
        }
    }
    const cJSON *ws = cJSON_GetObjectItemCaseSensitive(root, "workspace_bytes");
    if (ws) {
        if (!kc__jnum(ws, 0, 9007199254740992.0, &d)) {
            why = "bad workspace_bytes";
            goto out;
        }
        l.workspace_bytes = (uint64_t)d;
    }
    /* The output's shape and dtype: in the launch description since the scheduler wrote them
     * there, before that only in the canonical op JSON (where the daemon looked next). */
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "output");
    if (cJSON_IsObject(o)) {
        if (!kc__output(o, &l)) {
            why = "a malformed output description";
            goto out;
        }
    } else if (op_json && (op = cJSON_Parse(op_json)) != NULL) {
        /* A malformed output here made the daemon answer "output": null; keep doing so. */
        kc_launch tmp = l;
        if (kc__output(cJSON_GetObjectItemCaseSensitive(op, "output"), &tmp))
            l = tmp;
    }
    if ((why = kc__launch_problem(&l)) != NULL)
        goto out;
    *ret = l;
out:
    cJSON_Delete(root);
    cJSON_Delete(op);
    if (why && ret_why)
        *ret_why = why;
    return why ? -EBADMSG : 0;
}

kc_choice kc__choice_from_v1(bool measured, const char *provenance_json)
{
    if (measured)
        return KC_CHOSEN_MEASURED;
    /* Schema 1 kept the tune mode only in the provenance text; the daemon read "none" as the
     * template default and anything else (even unreadable text) as the cost model's choice. */
    kc_choice c = KC_CHOSEN_MODEL;
    cJSON *p = provenance_json ? cJSON_Parse(provenance_json) : NULL;
    const cJSON *mode = cJSON_GetObjectItemCaseSensitive(p, "mode");
    if (cJSON_IsString(mode) && strcmp(mode->valuestring, "none") == 0)
        c = KC_CHOSEN_DEFAULT;
    cJSON_Delete(p);
    return c;
}
