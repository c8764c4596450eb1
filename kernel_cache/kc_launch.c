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

const char *kc__launch_problem(const kc_launch *l)
{
    if (!l || l->n_kernels < 0 || l->n_kernels > KC_MAX_KERNELS)
        return "the number of kernels is out of range";
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
        for (int a = 0; a < k->n_args; a++)
            if (!kc_buf_name(k->args[a]))
                return "an argument names no buffer";
        if (k->n_maps < 0 || k->n_maps > KC_MAX_MAPS)
            return "a kernel's number of tensor maps is out of range";
        for (int m = 0; m < k->n_maps; m++)
            if (!kc_buf_name((kc_buf)k->maps[m].buf) ||
                tuner_tmap_check(&k->maps[m], NULL, 0, NULL, 0) < 0)
                return "a tensor map is not one the driver would encode";
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
            numel *= (uint64_t)l->output_shape[d];
            if (numel > KC_MAX_NUMEL)
                return "the output has more than 2^31 elements";
        }
    }
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
             (uint64_t)(l->kernels[i].n_maps > 0 ? l->kernels[i].n_maps : 0) * TUNER_TMAP_PACKED;
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
            cJSON *s = cJSON_CreateString(kc_buf_name(k->args[a]));
            if (!s || !cJSON_AddItemToArray(args, s)) {
                cJSON_Delete(s);
                goto out;
            }
        }
        if (!tuner_tmaps_add_json(o, k->maps, k->n_maps, "buffer", buf_name_json))
            goto out;
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

/* An argument: a buffer name, or (as some schema-1 rows wrote it) the buffer's number, which has
 * the same value in kc_buf as the tuner's TUNER_BUF_* had. */
static bool kc__arg(const cJSON *v, kc_buf *ret)
{
    double d;
    if (cJSON_IsString(v))
        return kc_buf_parse(v->valuestring, ret) == 0;
    if (!kc__jnum(v, 0, KC__N_BUFS - 1, &d))
        return false;
    *ret = (kc_buf)(int)d;
    return true;
}

/* A tensor map: its buffer's name beside tuner_tmap_to_json's members, as kc_launch_json writes
 * it; false when it is not one. */
static bool kc__map(const cJSON *v, tuner_tmap *ret)
{
    kc_buf b;
    if (!cJSON_IsObject(v) ||
        kc_buf_parse(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "buffer")), &b) < 0)
        return false;
    ret->buf = (int)b;
    return tuner_tmap_from_json(v, "buffer", ret, NULL, 0, NULL, 0) == 0;
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
                why = "an argument that names no buffer";
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
            if (!kc__map(a, &kk->maps[kk->n_maps++])) {
                why = "a malformed tensor map";
                goto out;
            }
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
    if (kc_launch_check(&l) < 0) {
        why = "a field out of range";
        goto out;
    }
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
