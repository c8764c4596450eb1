/* clients/c/plan.c - hidet_plan_*: a launch plan (docs/graphs.md) parsed, checked and run.
 *
 * Parsing resolves every kernel parameter once to where its pointer comes from (a caller's
 * tensor by index, or an offset into the arena or the constants), so a launch only adds base
 * pointers. A tensor-map parameter is encoded (tuner_tmap_encode) for its buffer's address
 * at the first launch and again only when that address changes. The CUDA driver is opened with
 * dlopen at the first hidet_plan_load(): the library has no link dependency on libcuda, so
 * CPU-only users and CI can link and parse without it.
 */
#include "clients/c/client_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <cJSON.h>

#define HIDET_PLAN_ALIGN 256
#define HIDET_SHARED_STATIC_MAX (48 * 1024)
#define CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8

/* ---- the driver, opened at first use ----------------------------------------------------- */

typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_ctx_get_fn)(void **);
typedef int (*cu_ctx_set_fn)(void *);
typedef int (*cu_dev_get_fn)(int *, int);
typedef int (*cu_primary_fn)(void **, int);
typedef int (*cu_mod_load_fn)(void **, const void *);
typedef int (*cu_mod_unload_fn)(void *);
typedef int (*cu_mod_func_fn)(void **, void *, const char *);
typedef int (*cu_func_attr_fn)(void *, int, int);
typedef int (*cu_launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            unsigned, void *, void **, void **);
typedef int (*cu_alloc_fn)(uint64_t *, size_t);
typedef int (*cu_free_fn)(uint64_t);
typedef int (*cu_err_fn)(int, const char **);

static struct {
    void *lib;
    char why[256];
    cu_init_fn init;
    cu_ctx_get_fn ctx_get;
    cu_ctx_set_fn ctx_set;
    cu_dev_get_fn dev_get;
    cu_primary_fn primary;
    cu_mod_load_fn mod_load;
    cu_mod_unload_fn mod_unload;
    cu_mod_func_fn mod_func;
    cu_func_attr_fn func_attr;
    cu_launch_fn launch;
    cu_alloc_fn alloc;
    cu_free_fn free;
    cu_err_fn err_name, err_string;
    tuner_tmap_encoders tmap; /* each NULL in drivers before CUDA 12: plans with tensor maps
                               * then fail to load, the others run */
} cu;
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

static void cu_open(void)
{
    const char *path = getenv("HIDETD_LIBCUDA");
    if (!path || !*path)
        path = "libcuda.so.1";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(cu.why, sizeof(cu.why), "the CUDA driver (%s) cannot be loaded: %s; launching "
                 "plans needs an NVIDIA GPU and its driver", path, e ? e : "unknown error");
        return;
    }
    /* Function pointers through a union-free cast: POSIX guarantees dlsym results convert. */
#define SYM(field, name)                                                                           \
    do {                                                                                           \
        *(void **)&cu.field = dlsym(lib, name);                                                    \
        if (!cu.field) {                                                                           \
            snprintf(cu.why, sizeof(cu.why), "the CUDA driver %s lacks %s", path, name);           \
            dlclose(lib);                                                                          \
            return;                                                                                \
        }                                                                                          \
    } while (0)
    SYM(init, "cuInit");
    SYM(ctx_get, "cuCtxGetCurrent");
    SYM(ctx_set, "cuCtxSetCurrent");
    SYM(dev_get, "cuDeviceGet");
    SYM(primary, "cuDevicePrimaryCtxRetain");
    SYM(mod_load, "cuModuleLoadData");
    SYM(mod_unload, "cuModuleUnload");
    SYM(mod_func, "cuModuleGetFunction");
    SYM(func_attr, "cuFuncSetAttribute");
    SYM(launch, "cuLaunchKernel");
    SYM(alloc, "cuMemAlloc_v2");
    SYM(free, "cuMemFree_v2");
    SYM(err_name, "cuGetErrorName");
    SYM(err_string, "cuGetErrorString");
#undef SYM
    *(void **)&cu.tmap.tiled = dlsym(lib, "cuTensorMapEncodeTiled");
    *(void **)&cu.tmap.im2col = dlsym(lib, "cuTensorMapEncodeIm2col");
    int r = cu.init(0);
    if (r != 0) {
        const char *n = NULL;
        cu.err_name(r, &n);
        snprintf(cu.why, sizeof(cu.why), "cuInit failed: %s (no usable GPU?)", n ? n : "?");
        return;
    }
    cu.lib = lib;
}

static int cu_fail(hidet_error *err, int r, const char *what)
{
    const char *n = NULL, *s = NULL;
    if (cu.err_name)
        cu.err_name(r, &n);
    if (cu.err_string)
        cu.err_string(r, &s);
    return hidet__fail(err, -EIO, 0, "%s failed: %s (%s)", what, n ? n : "?", s ? s : "");
}

/* ---- the plan ---------------------------------------------------------------------------- */

typedef enum { SRC_TENSOR = 0, SRC_ARENA, SRC_CONSTANTS } src_kind;

typedef struct {
    src_kind kind;
    size_t tensor; /* SRC_TENSOR: index into p->tensors */
    uint64_t offset;
    int map;             /* -1: a pointer; else the tensor map's slot in the kernel's maps */
    tuner_tmap tmap;     /* ... its description */
    uint64_t encoded_for; /* ... the address its slot was encoded for (0: not yet) */
} plan_src;

typedef struct {
    char *name;
    uint32_t grid[3], block[3], shared;
    size_t n_params;
    plan_src *params; /* by parameter index */
    unsigned char *maps; /* TUNER_TMAP_BYTES per tensor-map parameter, 64-byte aligned */
    void *func;
} plan_kernel;

typedef struct {
    char key[HIDET_KEY_LEN + 1];
    plan_kernel *kernels;
    size_t n_kernels;
    void *module;
} plan_step;

typedef struct {
    char *name;
    bool constants;
    uint64_t offset, bytes;
} plan_buffer;

typedef struct {
    hidet_plan_tensor t;
    hidet_plan_role role;
    uint64_t ptr; /* 0 until bound */
} plan_tensor;

struct hidet_plan {
    plan_tensor *tensors;
    size_t n_tensors;
    plan_buffer *buffers;
    size_t n_buffers;
    plan_step *steps, *prepare;
    size_t n_steps, n_prepare;
    uint64_t arena_bytes, constants_bytes;
    uint64_t arena, constants;  /* device memory once loaded */
    void **modules;             /* each kernel set's module, loaded once */
    size_t n_modules;
    bool own_arena, own_constants, loaded, prepared;
};

static size_t dtype_size(const char *d)
{
    if (strcmp(d, "f16") == 0 || strcmp(d, "bf16") == 0)
        return 2;
    if (strcmp(d, "f32") == 0 || strcmp(d, "i32") == 0)
        return 4;
    if (strcmp(d, "i64") == 0) /* i32 and i64: integer inputs (token ids, masks) */
        return 8;
    return 0;
}

/* {"shape": [...], "dtype": "..."} into t (name left alone); -EPROTO naming `where`. */
static int parse_spec(const cJSON *o, hidet_plan_tensor *t, const char *where, hidet_error *err)
{
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(o, "shape");
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(o, "dtype");
    const cJSON *d;
    int n = 0;

    if (!cJSON_IsArray(shape) || cJSON_GetArraySize(shape) < 1 ||
        cJSON_GetArraySize(shape) > HIDET_MAX_RANK)
        return hidet__fail(err, -EPROTO, 0, "%s.shape: expected 1 to %d sizes", where,
                           HIDET_MAX_RANK);
    if (!cJSON_IsString(dtype) || !dtype_size(dtype->valuestring))
        return hidet__fail(err, -EPROTO, 0, "%s.dtype: expected f16, bf16, f32, i32 or i64", where);
    t->bytes = dtype_size(dtype->valuestring);
    cJSON_ArrayForEach(d, shape) {
        if (!cJSON_IsNumber(d) || d->valuedouble < 1 || d->valuedouble > 2147483647.0 ||
            d->valuedouble != (double)(int64_t)d->valuedouble)
            return hidet__fail(err, -EPROTO, 0, "%s.shape[%d]: expected a positive integer",
                               where, n);
        t->shape[n++] = (int64_t)d->valuedouble;
        t->bytes *= (uint64_t)d->valuedouble;
    }
    t->rank = n;
    snprintf(t->dtype, sizeof(t->dtype), "%s", dtype->valuestring);
    return 0;
}

static int parse_u64(const cJSON *o, const char *name, uint64_t *ret, const char *where,
                     hidet_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!v) {
        *ret = 0;
        return 0;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9.0e15 ||
        v->valuedouble != (double)(uint64_t)v->valuedouble)
        return hidet__fail(err, -EPROTO, 0, "%s%s: expected a non-negative integer", where, name);
    *ret = (uint64_t)v->valuedouble;
    return 0;
}

static ssize_t find_tensor(const hidet_plan *p, const char *name)
{
    for (size_t i = 0; i < p->n_tensors; i++)
        if (strcmp(p->tensors[i].t.name, name) == 0)
            return (ssize_t)i;
    return -1;
}

static ssize_t find_buffer(const hidet_plan *p, const char *name)
{
    for (size_t i = 0; i < p->n_buffers; i++)
        if (strcmp(p->buffers[i].name, name) == 0)
            return (ssize_t)i;
    return -1;
}

static int parse_tensors(hidet_plan *p, const cJSON *root, const char *field, hidet_plan_role role,
                         bool required, hidet_error *err)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, field), *o;
    char where[64];
    int i = 0, r;

    if (!a && !required)
        return 0;
    if (!cJSON_IsArray(a) || (required && cJSON_GetArraySize(a) == 0))
        return hidet__fail(err, -EPROTO, 0, "%s: expected a non-empty list", field);
    cJSON_ArrayForEach(o, a) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
        plan_tensor *t = &p->tensors[p->n_tensors];
        snprintf(where, sizeof(where), "%s[%d]", field, i++);
        if (!cJSON_IsString(name) || !*name->valuestring ||
            strlen(name->valuestring) >= sizeof(t->t.name))
            return hidet__fail(err, -EPROTO, 0, "%s.name: expected 1 to %zu characters", where,
                               sizeof(t->t.name) - 1);
        if (find_tensor(p, name->valuestring) >= 0)
            return hidet__fail(err, -EPROTO, 0, "%s.name: '%s' is listed twice", where,
                               name->valuestring);
        memset(t, 0, sizeof(*t));
        snprintf(t->t.name, sizeof(t->t.name), "%s", name->valuestring);
        t->role = role;
        if ((r = parse_spec(o, &t->t, where, err)) < 0)
            return r;
        p->n_tensors++;
    }
    return 0;
}

static int parse_buffers(hidet_plan *p, const cJSON *root, hidet_error *err)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "buffers"), *o;
    char where[64], at[48];
    int i = 0, r;

    if (!a)
        return 0;
    if (!cJSON_IsArray(a))
        return hidet__fail(err, -EPROTO, 0, "buffers: expected a list");
    p->buffers = calloc((size_t)cJSON_GetArraySize(a) + 1, sizeof(*p->buffers));
    if (!p->buffers)
        return hidet__fail(err, -ENOMEM, 0, "out of memory");
    cJSON_ArrayForEach(o, a) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
        const cJSON *region = cJSON_GetObjectItemCaseSensitive(o, "region");
        plan_buffer *b = &p->buffers[p->n_buffers];
        snprintf(at, sizeof(at), "buffers[%d]", i++);
        snprintf(where, sizeof(where), "%s.", at);
        if (!cJSON_IsString(name) || !*name->valuestring)
            return hidet__fail(err, -EPROTO, 0, "%sname: missing", where);
        if (find_buffer(p, name->valuestring) >= 0 || find_tensor(p, name->valuestring) >= 0)
            return hidet__fail(err, -EPROTO, 0, "%sname: '%s' is already the name of another "
                               "tensor of the plan", where, name->valuestring);
        if (!cJSON_IsString(region) || (strcmp(region->valuestring, "arena") != 0 &&
                                        strcmp(region->valuestring, "constants") != 0))
            return hidet__fail(err, -EPROTO, 0, "%sregion: expected \"arena\" or \"constants\"",
                               where);
        b->constants = strcmp(region->valuestring, "constants") == 0;
        if ((r = parse_u64(o, "offset", &b->offset, where, err)) < 0 ||
            (r = parse_u64(o, "bytes", &b->bytes, where, err)) < 0)
            return r;
        if (b->offset % HIDET_PLAN_ALIGN)
            return hidet__fail(err, -EPROTO, 0, "%soffset: %llu is not a multiple of %d", where,
                               (unsigned long long)b->offset, HIDET_PLAN_ALIGN);
        uint64_t limit = b->constants ? p->constants_bytes : p->arena_bytes;
        if (b->offset + b->bytes > limit)
            return hidet__fail(err, -EPROTO, 0, "%s: [%llu, %llu) lies outside the %s (%llu bytes)",
                               at,
                               (unsigned long long)b->offset,
                               (unsigned long long)(b->offset + b->bytes),
                               b->constants ? "constants" : "arena", (unsigned long long)limit);
        if (!(b->name = strdup(name->valuestring)))
            return hidet__fail(err, -ENOMEM, 0, "out of memory");
        p->n_buffers++;
    }
    return 0;
}

/* One step: its kernel set parsed by hidet_kernel_set_parse(), each parameter resolved. */
static int parse_step(hidet_plan *p, const cJSON *s, plan_step *st, bool prepare,
                      const char *where, hidet_error *err)
{
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "request");
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(req, "inputs");
    const cJSON *bindings = cJSON_GetObjectItemCaseSensitive(s, "bindings");
    const cJSON *ks = cJSON_GetObjectItemCaseSensitive(s, "kernel_set"), *o;
    hidet_plan_tensor in_specs[8];
    hidet_kernel_set *set = NULL;
    char w[160], *text = NULL;
    int n_in = 0, r = 0;

    if (!cJSON_IsArray(ins) || cJSON_GetArraySize(ins) < 1 || cJSON_GetArraySize(ins) > 8)
        return hidet__fail(err, -EPROTO, 0, "%s.request.inputs: expected 1 to 8 inputs", where);
    cJSON_ArrayForEach(o, ins) {
        snprintf(w, sizeof(w), "%s.request.inputs[%d]", where, n_in);
        if ((r = parse_spec(o, &in_specs[n_in++], w, err)) < 0)
            return r;
    }
    if (!cJSON_IsObject(bindings))
        return hidet__fail(err, -EPROTO, 0, "%s.bindings: expected an object", where);
    if (!cJSON_IsObject(ks) || !(text = cJSON_PrintUnformatted(ks)))
        return hidet__fail(err, -EPROTO, 0, "%s.kernel_set: expected an object", where);
    r = hidet_kernel_set_parse(text, strlen(text), &set, err);
    free(text);
    if (r < 0) {
        char m[sizeof(err->message)];
        if (err) {
            snprintf(m, sizeof(m), "%s", err->message);
            hidet__fail(err, r, 0, "%s.kernel_set: %s", where, m);
        }
        return r;
    }
    memcpy(st->key, set->key, sizeof(st->key));
    st->kernels = calloc(set->n_kernels, sizeof(*st->kernels));
    if (!st->kernels) {
        r = hidet__fail(err, -ENOMEM, 0, "out of memory");
        goto out;
    }
    for (size_t k = 0; k < set->n_kernels; k++) {
        const hidet_kernel *hk = &set->kernels[k];
        plan_kernel *pk = &st->kernels[st->n_kernels++];
        memcpy(pk->grid, hk->grid, sizeof(pk->grid));
        memcpy(pk->block, hk->block, sizeof(pk->block));
        pk->shared = hk->shared_bytes;
        pk->n_params = hk->n_params;
        pk->name = strdup(hk->name);
        pk->params = calloc(hk->n_params + 1, sizeof(*pk->params));
        size_t n_maps = 0;
        for (size_t j = 0; j < hk->n_params; j++)
            n_maps += hk->params[j].is_tensor_map;
        if (n_maps)
            pk->maps = aligned_alloc(64, n_maps * TUNER_TMAP_BYTES);
        if (!pk->name || !pk->params || (n_maps && !pk->maps)) {
            r = hidet__fail(err, -ENOMEM, 0, "out of memory");
            goto out;
        }
        int next_map = 0;
        for (size_t j = 0; j < hk->n_params; j++) {
            const hidet_param *hp = &hk->params[j];
            const char *buf = hp->buffer;
            uint64_t need;
            char what[96];
            snprintf(w, sizeof(w), "%s.bindings.%s", where, buf);
            if (hp->index < 0 || (size_t)hp->index >= hk->n_params) {
                r = hidet__fail(err, -EPROTO, 0, "%s.kernel_set.kernels[%zu].params[%zu].index: "
                                "%d is out of range", where, k, j, hp->index);
                goto out;
            }
            if (hp->kind == HIDET_BUFFER_SIZE) {
                /* A plan's shapes are fixed (docs/graphs.md): its steps' sets take no sizes. */
                r = hidet__fail(err, -EPROTO, 0, "%s.kernel_set.kernels[%zu].params[%zu].type: an "
                                "\"int\" parameter (a dynamic op's size) in a plan, whose shapes "
                                "are fixed", where, k, j);
                goto out;
            }
            if (strcmp(hp->type, "pointer") != 0 && !hp->is_tensor_map) {
                r = hidet__fail(err, -EPROTO, 0, "%s.kernel_set.kernels[%zu].params[%zu].type: "
                                "'%s' is not a parameter kind this client can pass (pointer, "
                                "tensor_map)", where, k, j, hp->type);
                goto out;
            }
            if (hp->kind == HIDET_BUFFER_INPUT && hp->input >= 0 && hp->input < n_in) {
                need = in_specs[hp->input].bytes;
                snprintf(what, sizeof(what), "%s (%llu bytes)", buf, (unsigned long long)need);
            } else if (hp->kind == HIDET_BUFFER_OUTPUT) {
                need = dtype_size(set->output_dtype);
                for (int d = 0; d < set->output_rank; d++)
                    need *= (uint64_t)set->output_shape[d];
                snprintf(what, sizeof(what), "its output (%llu bytes)", (unsigned long long)need);
            } else if (hp->kind == HIDET_BUFFER_WORKSPACE) {
                need = set->workspace_bytes;
                snprintf(what, sizeof(what), "a workspace of %llu bytes", (unsigned long long)need);
            } else {
                r = hidet__fail(err, -EPROTO, 0, "%s.kernel_set.kernels[%zu].params[%zu].buffer: "
                                "'%s' is not input<i> (i below %d), output or workspace", where,
                                k, j, buf, n_in);
                goto out;
            }
            const cJSON *bn = cJSON_GetObjectItemCaseSensitive(bindings, buf);
            if (!cJSON_IsString(bn)) {
                r = hidet__fail(err, -EPROTO, 0, "%s: the kernel reads %s, but the step binds "
                                "nothing to it", w, buf);
                goto out;
            }
            plan_src *src = &pk->params[hp->index];
            ssize_t ti = find_tensor(p, bn->valuestring), bi = find_buffer(p, bn->valuestring);
            uint64_t have;
            if (ti >= 0) {
                plan_tensor *t = &p->tensors[ti];
                if (prepare && t->role != HIDET_PLAN_WEIGHT) {
                    r = hidet__fail(err, -EPROTO, 0, "%s: a prepare step may read weights and "
                                    "write constants only, but it binds '%s'", w, t->t.name);
                    goto out;
                }
                if (hp->kind == HIDET_BUFFER_OUTPUT && t->role != HIDET_PLAN_OUTPUT) {
                    r = hidet__fail(err, -EPROTO, 0, "%s: the step writes '%s', a caller's %s",
                                    w, t->t.name, t->role == HIDET_PLAN_INPUT ? "input" : "weight");
                    goto out;
                }
                src->kind = SRC_TENSOR;
                src->tensor = (size_t)ti;
                have = t->t.bytes;
            } else if (bi >= 0) {
                plan_buffer *b = &p->buffers[bi];
                if (prepare && !b->constants) {
                    r = hidet__fail(err, -EPROTO, 0, "%s: a prepare step binds the arena buffer "
                                    "'%s'", w, b->name);
                    goto out;
                }
                src->kind = b->constants ? SRC_CONSTANTS : SRC_ARENA;
                src->offset = b->offset;
                have = b->bytes;
            } else {
                r = hidet__fail(err, -EPROTO, 0, "%s: '%s' names no input, weight, output or "
                                "buffer of the plan", w, bn->valuestring);
                goto out;
            }
            src->map = -1;
            const hidet_map_dims *md = set->kernel_dims && set->kernel_dims[k].map_dims
                                           ? &set->kernel_dims[k].map_dims[j] : NULL;
            for (int d = 0; md && d < 5; d++)
                if (md->dims[d]) {
                    /* As an "int" parameter: a plan's shapes are fixed (docs/graphs.md). */
                    r = hidet__fail(err, -EPROTO, 0, "%s.kernel_set.kernels[%zu].params[%zu]."
                                    "tensor_map.dims[%d]: a dimension that follows a dynamic op's "
                                    "sizes in a plan, whose shapes are fixed", where, k, j, d);
                    goto out;
                }
            if (hp->is_tensor_map) {
                /* The copy engine must not reach past the bound buffer either. */
                src->map = next_map++;
                hidet__tmap_of(&hp->tensor_map, &src->tmap);
                const uint64_t reach = tuner_tmap_extent(&src->tmap);
                if (reach > need) {
                    need = reach;
                    snprintf(what, sizeof(what), "the tensor map of %s (%llu bytes)", buf,
                             (unsigned long long)reach);
                }
            }
            if (have < need) {
                r = hidet__fail(err, -EPROTO, 0, "%s: '%s' has %llu bytes, too few for %s", w,
                                bn->valuestring, (unsigned long long)have, what);
                goto out;
            }
        }
    }
out:
    hidet_kernel_set_free(set);
    return r;
}

static int parse_steps(hidet_plan *p, const cJSON *root, const char *field, bool prepare,
                       plan_step **ret, size_t *ret_n, hidet_error *err)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, field), *s;
    char where[48];
    int r;

    if (!a && prepare)
        return 0;
    if (!cJSON_IsArray(a) || (!prepare && cJSON_GetArraySize(a) == 0))
        return hidet__fail(err, -EPROTO, 0, "%s: expected a%s list", field,
                           prepare ? "" : " non-empty");
    *ret = calloc((size_t)cJSON_GetArraySize(a) + 1, sizeof(**ret));
    if (!*ret)
        return hidet__fail(err, -ENOMEM, 0, "out of memory");
    cJSON_ArrayForEach(s, a) {
        snprintf(where, sizeof(where), "%s[%zu]", field, *ret_n);
        r = parse_step(p, s, &(*ret)[*ret_n], prepare, where, err);
        (*ret_n)++; /* counted also on failure: hidet_plan_free() releases what was made */
        if (r < 0)
            return r;
    }
    return 0;
}

int hidet_plan_parse(const char *json, size_t len, hidet_plan **ret, hidet_error *err)
{
    hidet_plan *p = NULL;
    cJSON *root = NULL;
    int r;

    if (!json || !ret)
        return hidet__fail(err, -EINVAL, 0, "no plan text or result pointer");
    root = cJSON_ParseWithLength(json, len);
    if (!cJSON_IsObject(root)) {
        r = hidet__fail(err, -EPROTO, 0, "the plan is not a JSON object");
        goto out;
    }
    p = calloc(1, sizeof(*p));
    size_t n = 0;
    const char *lists[] = {"inputs", "weights", "outputs"};
    for (size_t i = 0; i < 3; i++)
        n += (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(root, lists[i]));
    if (!p || !(p->tensors = calloc(n + 1, sizeof(*p->tensors)))) {
        r = hidet__fail(err, -ENOMEM, 0, "out of memory");
        goto out;
    }
    if ((r = parse_tensors(p, root, "inputs", HIDET_PLAN_INPUT, true, err)) < 0 ||
        (r = parse_tensors(p, root, "weights", HIDET_PLAN_WEIGHT, false, err)) < 0 ||
        (r = parse_tensors(p, root, "outputs", HIDET_PLAN_OUTPUT, true, err)) < 0 ||
        (r = parse_u64(root, "arena_bytes", &p->arena_bytes, "", err)) < 0 ||
        (r = parse_u64(root, "constants_bytes", &p->constants_bytes, "", err)) < 0 ||
        (r = parse_buffers(p, root, err)) < 0 ||
        (r = parse_steps(p, root, "prepare", true, &p->prepare, &p->n_prepare, err)) < 0 ||
        (r = parse_steps(p, root, "steps", false, &p->steps, &p->n_steps, err)) < 0)
        goto out;
    *ret = p;
    p = NULL;
    hidet__ok(err);
    r = 0;
out:
    hidet_plan_free(p);
    cJSON_Delete(root);
    return r;
}

int hidet_plan_request(hidet_client *c, const char *graph_request_json, hidet_plan **ret,
                       hidet_error *err)
{
    char *body = NULL;
    size_t len = 0;
    int status = 0, r;

    if (!c || !graph_request_json || !ret)
        return hidet__fail(err, -EINVAL, 0, "no client, request or result pointer");
    r = hidet_post_json(c, "/v1/graphs", graph_request_json, &status, &body, &len, err);
    if (r < 0)
        return r;
    if (status != 200)
        r = hidet__fail(err, -EAGAIN, status, "hidetd answered %d (a graph job?): send the "
                        "request with \"wait\": true", status);
    else
        r = hidet_plan_parse(body, len, ret, err);
    free(body);
    return r;
}

static void free_steps(plan_step *s, size_t n)
{
    for (size_t i = 0; s && i < n; i++) {
        for (size_t k = 0; k < s[i].n_kernels; k++) {
            free(s[i].kernels[k].name);
            free(s[i].kernels[k].params);
            free(s[i].kernels[k].maps);
        }
        free(s[i].kernels);
    }
    free(s);
}

hidet_plan *hidet_plan_free(hidet_plan *p)
{
    if (!p)
        return NULL;
    free_steps(p->prepare, p->n_prepare);
    free_steps(p->steps, p->n_steps);
    for (size_t i = 0; i < p->n_modules; i++)
        cu.mod_unload(p->modules[i]);
    free(p->modules);
    for (size_t i = 0; i < p->n_buffers; i++)
        free(p->buffers[i].name);
    free(p->buffers);
    free(p->tensors);
    if (p->own_arena && p->arena)
        cu.free(p->arena);
    if (p->own_constants && p->constants)
        cu.free(p->constants);
    free(p);
    return NULL;
}

size_t hidet_plan_count(const hidet_plan *p, hidet_plan_role role)
{
    size_t n = 0;
    for (size_t i = 0; p && i < p->n_tensors; i++)
        n += p->tensors[i].role == role;
    return n;
}

const hidet_plan_tensor *hidet_plan_tensor_at(const hidet_plan *p, hidet_plan_role role, size_t i)
{
    for (size_t j = 0; p && j < p->n_tensors; j++)
        if (p->tensors[j].role == role && i-- == 0)
            return &p->tensors[j].t;
    return NULL;
}

uint64_t hidet_plan_arena_bytes(const hidet_plan *p) { return p ? p->arena_bytes : 0; }
uint64_t hidet_plan_constants_bytes(const hidet_plan *p) { return p ? p->constants_bytes : 0; }
size_t hidet_plan_steps(const hidet_plan *p, bool prepare)
{
    return !p ? 0 : prepare ? p->n_prepare : p->n_steps;
}

int hidet_plan_buffer(const hidet_plan *p, const char *name, bool *ret_constants,
                      uint64_t *ret_offset, uint64_t *ret_bytes)
{
    ssize_t i = p && name ? find_buffer(p, name) : -1;
    if (i < 0)
        return -ENOENT;
    if (ret_constants)
        *ret_constants = p->buffers[i].constants;
    if (ret_offset)
        *ret_offset = p->buffers[i].offset;
    if (ret_bytes)
        *ret_bytes = p->buffers[i].bytes;
    return 0;
}

int hidet_plan_bind(hidet_plan *p, const char *name, uint64_t ptr, uint64_t bytes,
                    hidet_error *err)
{
    if (!p || !name)
        return hidet__fail(err, -EINVAL, 0, "no plan or name");
    ssize_t i = find_tensor(p, name);
    if (i < 0) {
        char known[256] = "";
        for (size_t j = 0; j < p->n_tensors; j++) {
            size_t l = strlen(known);
            snprintf(known + l, sizeof(known) - l, "%s%s", l ? ", " : "", p->tensors[j].t.name);
        }
        return hidet__fail(err, -ENOENT, 0, "the plan has no input, weight or output '%s' "
                           "(it has: %s)", name, known);
    }
    plan_tensor *t = &p->tensors[i];
    if (!ptr || ptr % 16)
        return hidet__fail(err, -EINVAL, 0, "'%s': the pointer 0x%llx is %s", name,
                           (unsigned long long)ptr, ptr ? "not 16-byte aligned" : "NULL");
    if (bytes < t->t.bytes)
        return hidet__fail(err, -EINVAL, 0, "'%s': %llu bytes given, the tensor (%s, rank %d) "
                           "needs %llu", name, (unsigned long long)bytes, t->t.dtype, t->t.rank,
                           (unsigned long long)t->t.bytes);
    t->ptr = ptr;
    if (t->role == HIDET_PLAN_WEIGHT)
        p->prepared = false;
    hidet__ok(err);
    return 0;
}

int hidet_plan_set_memory(hidet_plan *p, uint64_t arena, uint64_t constants, hidet_error *err)
{
    if (!p)
        return hidet__fail(err, -EINVAL, 0, "no plan");
    if (p->loaded)
        return hidet__fail(err, -EALREADY, 0, "hidet_plan_set_memory() after hidet_plan_load()");
    if ((p->arena_bytes && !arena) || (p->constants_bytes && !constants) ||
        arena % HIDET_PLAN_ALIGN || constants % HIDET_PLAN_ALIGN)
        return hidet__fail(err, -EINVAL, 0, "the arena (%llu bytes) and constants (%llu bytes) "
                           "need non-NULL, %d-byte aligned memory",
                           (unsigned long long)p->arena_bytes,
                           (unsigned long long)p->constants_bytes, HIDET_PLAN_ALIGN);
    p->arena = arena;
    p->constants = constants;
    hidet__ok(err);
    return 0;
}

/* The module of a step (one per kernel set, shared by steps with the same key). */
static int load_step(hidet_plan *p, hidet_client *c, plan_step *st, hidet_error *err)
{
    plan_step *all[2] = {p->prepare, p->steps};
    size_t ns[2] = {p->n_prepare, p->n_steps};
    int r;

    for (size_t k = 0; k < st->n_kernels; k++)
        for (size_t j = 0; j < st->kernels[k].n_params; j++) {
            const plan_src *s = &st->kernels[k].params[j];
            if (s->map >= 0 && !tuner_tmap_can_encode(&s->tmap, &cu.tmap))
                return hidet__fail(err, -ELIBACC, 0, "kernel %s takes tensor maps, and the CUDA driver "
                                   "lacks %s (it needs a CUDA 12 driver or newer)", st->kernels[k].name,
                                   tuner_tmap_encoder_name(&s->tmap));
        }
    for (int a = 0; a < 2 && !st->module; a++)
        for (size_t i = 0; i < ns[a]; i++)
            if (&all[a][i] != st && all[a][i].module && strcmp(all[a][i].key, st->key) == 0)
                st->module = all[a][i].module;
    if (!st->module) {
        void *img = NULL;
        size_t len = 0;
        if ((r = hidet_fetch_cubin(c, st->key, &img, &len, err)) < 0)
            return r;
        void **m = realloc(p->modules, (p->n_modules + 1) * sizeof(*m));
        if (!m) {
            free(img);
            return hidet__fail(err, -ENOMEM, 0, "out of memory");
        }
        p->modules = m;
        int cr = cu.mod_load(&st->module, img);
        free(img);
        if (cr != 0) {
            /* Not for this GPU's arch: the driver JIT-compiles the PTX instead. */
            char *ptx = NULL;
            if ((r = hidet_fetch_ptx(c, st->key, &ptx, &len, err)) < 0)
                return r;
            cr = cu.mod_load(&st->module, ptx);
            free(ptx);
            if (cr != 0)
                return cu_fail(err, cr, "cuModuleLoadData (cubin, then PTX)");
        }
        p->modules[p->n_modules++] = st->module;
    }
    for (size_t k = 0; k < st->n_kernels; k++) {
        plan_kernel *pk = &st->kernels[k];
        int cr = cu.mod_func(&pk->func, st->module, pk->name);
        if (cr != 0)
            return cu_fail(err, cr, "cuModuleGetFunction");
        if (pk->shared > HIDET_SHARED_STATIC_MAX &&
            (cr = cu.func_attr(pk->func, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                               (int)pk->shared)) != 0)
            return cu_fail(err, cr, "cuFuncSetAttribute (dynamic shared memory)");
    }
    return 0;
}

int hidet_plan_load(hidet_plan *p, hidet_client *c, hidet_error *err)
{
    void *ctx = NULL;
    int r, cr;

    if (!p || !c)
        return hidet__fail(err, -EINVAL, 0, "no plan or client");
    if (p->loaded)
        return hidet__fail(err, -EALREADY, 0, "the plan is loaded already");
    pthread_once(&cu_once, cu_open);
    if (!cu.lib)
        return hidet__fail(err, -ELIBACC, 0, "%s", cu.why);
    if ((cr = cu.ctx_get(&ctx)) != 0)
        return cu_fail(err, cr, "cuCtxGetCurrent");
    if (!ctx) {
        int dev = 0;
        if ((cr = cu.dev_get(&dev, 0)) != 0 || (cr = cu.primary(&ctx, dev)) != 0 ||
            (cr = cu.ctx_set(ctx)) != 0)
            return cu_fail(err, cr, "making device 0's primary context current");
    }
    for (size_t i = 0; i < p->n_prepare; i++)
        if ((r = load_step(p, c, &p->prepare[i], err)) < 0)
            return r;
    for (size_t i = 0; i < p->n_steps; i++)
        if ((r = load_step(p, c, &p->steps[i], err)) < 0)
            return r;
    if (p->arena_bytes && !p->arena) {
        if ((cr = cu.alloc(&p->arena, p->arena_bytes)) != 0)
            return cu_fail(err, cr, "cuMemAlloc (arena)");
        p->own_arena = true;
    }
    if (p->constants_bytes && !p->constants) {
        if ((cr = cu.alloc(&p->constants, p->constants_bytes)) != 0)
            return cu_fail(err, cr, "cuMemAlloc (constants)");
        p->own_constants = true;
    }
    p->loaded = true;
    hidet__ok(err);
    return 0;
}

static int launch_steps(hidet_plan *p, plan_step *steps, size_t n, void *stream, hidet_error *err)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < steps[i].n_kernels; k++) {
            plan_kernel *pk = &steps[i].kernels[k];
            uint64_t vals[64];
            void *args[64];
            if (pk->n_params > 64)
                return hidet__fail(err, -E2BIG, 0, "kernel %s has %zu parameters", pk->name,
                                   pk->n_params);
            for (size_t j = 0; j < pk->n_params; j++) {
                plan_src *s = &pk->params[j];
                vals[j] = s->kind == SRC_TENSOR ? p->tensors[s->tensor].ptr
                        : s->kind == SRC_ARENA  ? p->arena + s->offset
                                                : p->constants + s->offset;
                args[j] = &vals[j];
                if (s->map >= 0) {
                    unsigned char *slot = pk->maps + (size_t)s->map * TUNER_TMAP_BYTES;
                    if (s->encoded_for != vals[j]) {
                        int cr = tuner_tmap_encode(&s->tmap, vals[j], slot, &cu.tmap);
                        if (cr != 0)
                            return cu_fail(err, cr, tuner_tmap_encoder_name(&s->tmap));
                        s->encoded_for = vals[j];
                    }
                    args[j] = slot; /* passed by value: the driver copies the 128 bytes */
                }
            }
            int cr = cu.launch(pk->func, pk->grid[0], pk->grid[1], pk->grid[2], pk->block[0],
                               pk->block[1], pk->block[2], pk->shared, stream, args, NULL);
            if (cr != 0)
                return cu_fail(err, cr, "cuLaunchKernel");
        }
    }
    hidet__ok(err);
    return 0;
}

static int check_bound(const hidet_plan *p, bool weights_only, hidet_error *err)
{
    for (size_t i = 0; i < p->n_tensors; i++) {
        const plan_tensor *t = &p->tensors[i];
        if (!t->ptr && (!weights_only || t->role == HIDET_PLAN_WEIGHT))
            return hidet__fail(err, -EINVAL, 0, "%s '%s' is not bound (hidet_plan_bind())",
                               t->role == HIDET_PLAN_INPUT    ? "input"
                               : t->role == HIDET_PLAN_WEIGHT ? "weight"
                                                              : "output",
                               t->t.name);
    }
    return 0;
}

int hidet_plan_prepare(hidet_plan *p, void *stream, hidet_error *err)
{
    int r;
    if (!p)
        return hidet__fail(err, -EINVAL, 0, "no plan");
    if (!p->loaded)
        return hidet__fail(err, -EALREADY, 0, "hidet_plan_load() first");
    if ((r = check_bound(p, true, err)) < 0)
        return r;
    if ((r = launch_steps(p, p->prepare, p->n_prepare, stream, err)) < 0)
        return r;
    p->prepared = true;
    return 0;
}

int hidet_plan_launch(hidet_plan *p, void *stream, hidet_error *err)
{
    int r;
    if (!p)
        return hidet__fail(err, -EINVAL, 0, "no plan");
    if (!p->loaded || (!p->prepared && p->n_prepare))
        return hidet__fail(err, -EALREADY, 0, "%s first",
                           !p->loaded ? "hidet_plan_load()" : "hidet_plan_prepare()");
    if ((r = check_bound(p, false, err)) < 0)
        return r;
    return launch_steps(p, p->steps, p->n_steps, stream, err);
}
