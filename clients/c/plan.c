/* clients/c/plan.c - hidet_plan_*: a launch plan (docs/graphs.md) parsed, checked and run.
 *
 * Parsing resolves every kernel parameter once to where its pointer comes from (a caller's
 * tensor by index, or an offset into the arena or the constants), so a launch only adds base
 * pointers. A tensor-map parameter is encoded (tuner_tmap_encode) for its buffer's address
 * at the first launch and again only when that address changes. The CUDA driver is opened with
 * dlopen at the first hidet_plan_load(): the library has no link dependency on libcuda, so
 * CPU-only users and CI can link and parse without it.
 *
 * A plan with named dims (docs/graphs.md, "Named dimensions") runs at sizes: they come from the
 * inputs' shapes (hidet_plan_set_shape) or are given (hidet_plan_set_sizes), are checked for
 * consistency and against the ranges (the daemon's wording), and when they change every step
 * chooses its kernel set (the ready entry of its dispatch table holding them, else the generic
 * set) and binds it: grids from their rules, "int" parameters, tensor maps at the sizes (their
 * encodings kept per address and sizes). The arena is laid out at every name's max, so it is
 * allocated once. The C client does not ask the daemon again for ranges that are not tuned
 * yet (the Python runtime does): the generic set serves them.
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

/* SRC_SIZE: an "int" parameter, the size of a named dim (from hidet_kernel_set_bind). */
typedef enum { SRC_TENSOR = 0, SRC_ARENA, SRC_CONSTANTS, SRC_SIZE } src_kind;

/* Encodings of a tensor map that follows the sizes, one per (address, sizes) met lately. */
#define PLAN_MAP_CACHE 8
typedef struct {
    unsigned char bytes[TUNER_TMAP_BYTES] __attribute__((aligned(64)));
    uint64_t addr; /* 0: unused */
    int64_t sizes[HIDET_MAX_DIMS];
} plan_map_slot;

typedef struct {
    src_kind kind;
    size_t tensor; /* SRC_TENSOR: index into p->tensors */
    uint64_t offset;
    int map;             /* -1: a pointer; else the tensor map's slot in the kernel's maps */
    tuner_tmap tmap;     /* ... its description (at the current sizes for a `sym` map) */
    uint64_t encoded_for; /* ... the address its slot was encoded for (0: not yet) */
    bool sym;             /* ... its dims follow the sizes: encoded into `slots` */
    plan_map_slot *slots; /* PLAN_MAP_CACHE of them */
    size_t next_slot;     /* the one replaced next */
} plan_src;

typedef struct {
    char *name;
    uint32_t grid[3], block[3], shared; /* grid: at the current sizes for a dynamic set */
    size_t n_params;
    plan_src *params; /* by parameter index */
    long long *ints;  /* by parameter index: the "int" parameters at the current sizes */
    unsigned char *maps; /* TUNER_TMAP_BYTES per tensor-map parameter, 64-byte aligned */
    void *func;
} plan_kernel;

/* One kernel set a step may launch (its only one, or one of its dispatch table's). */
typedef struct {
    char key[HIDET_KEY_LEN + 1];
    plan_kernel *kernels;
    size_t n_kernels;
    void *module;
    hidet_kernel_set *set; /* kept for binding at sizes; NULL for a static set */
    bool owned;            /* set is freed with the step (else it belongs to the table) */
} plan_set;

typedef struct {
    plan_set *sets; /* [0]: the only set, or the table's generic one; then the ready entries' */
    size_t n_sets;
    hidet_dispatch *table; /* a step whose kernel takes names: its dispatch table, else NULL */
    long *entry_set;       /* per table entry: its index in sets, or -1 (not ready) */
    plan_set *cur;         /* what a launch runs (chosen at the current sizes) */
    long cur_entry;        /* the table entry holding the current sizes, or -1 */
} plan_step;

typedef struct {
    char *name;
    bool constants;
    uint64_t offset, bytes;
} plan_buffer;

typedef struct {
    hidet_plan_tensor t;       /* shape and bytes at every name's max */
    hidet_plan_role role;
    uint64_t ptr;              /* 0 until bound */
    uint64_t bound_bytes;      /* what hidet_plan_bind() was given */
    unsigned sym[HIDET_MAX_RANK]; /* per axis: 0, or the bit set of the plan's dims it is */
    bool named;                /* some axis is a name */
    int given_rank;            /* an input's shape from hidet_plan_set_shape(); 0: none */
    int64_t given[HIDET_MAX_RANK];
    int64_t shape_now[HIDET_MAX_RANK]; /* at the current sizes */
    uint64_t bytes_now;
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
    /* Named dims (none for a static plan). */
    int n_dims;
    hidet_dim dims[HIDET_MAX_DIMS];     /* sorted by name */
    int64_t explicit_sizes[HIDET_MAX_DIMS];
    bool explicit_given[HIDET_MAX_DIMS];
    int64_t sizes[HIDET_MAX_DIMS];      /* the sizes the steps are bound at */
    bool sized;                         /* ... valid */
};

static size_t dtype_size(const char *d)
{
    if (strcmp(d, "f16") == 0 || strcmp(d, "bf16") == 0)
        return 2;
    if (strcmp(d, "f32") == 0 || strcmp(d, "i32") == 0)
        return 4;
    if (strcmp(d, "i64") == 0) /* i32 and i64: integer inputs (token ids, masks) */
        return 8;
    if (strcmp(d, "f8e4m3") == 0 || strcmp(d, "f8e5m2") == 0) /* FP8 matmul operands */
        return 1;
    return 0;
}

/* {"shape": [...], "dtype": "..."} into t (name left alone); -EPROTO naming `where`. An axis may
 * be a name of the plan's dims or a product of them ("b*s"): sym[axis] (when sym is not NULL)
 * gets its bit set, t->shape and t->bytes its size at the names' max. */
static int parse_spec(const hidet_plan *p, const cJSON *o, hidet_plan_tensor *t, unsigned *sym,
                      const char *where, hidet_error *err)
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
        return hidet__fail(err, -EPROTO, 0, "%s.dtype: expected f16, bf16, f32, i32, i64, f8e4m3 or f8e5m2", where);
    t->bytes = dtype_size(dtype->valuestring);
    cJSON_ArrayForEach(d, shape) {
        if (sym)
            sym[n] = 0;
        if (cJSON_IsString(d)) {
            unsigned mask = 0;
            char why[160];
            if (!p || p->n_dims == 0)
                return hidet__fail(err, -EPROTO, 0, "%s.shape[%d]: '%.40s' is a name, but the plan "
                                   "declares no \"dims\"", where, n, d->valuestring);
            if (hidet__dims_mask(p->dims, p->n_dims, d->valuestring, &mask, why, sizeof(why)) < 0)
                return hidet__fail(err, -EPROTO, 0, "%s.shape[%d]: %s", where, n, why);
            if (!sym)
                return hidet__fail(err, -EPROTO, 0, "%s.shape[%d]: a name where sizes are fixed",
                                   where, n);
            int64_t v = 1;
            for (int k = 0; k < p->n_dims; k++)
                if (mask & (1u << k))
                    v *= p->dims[k].max;
            sym[n] = mask;
            t->shape[n++] = v;
            t->bytes *= (uint64_t)v;
            continue;
        }
        if (!cJSON_IsNumber(d) || d->valuedouble < 1 || d->valuedouble > 2147483647.0 ||
            d->valuedouble != (double)(int64_t)d->valuedouble)
            return hidet__fail(err, -EPROTO, 0, "%s.shape[%d]: expected a positive integer%s",
                               where, n, p && p->n_dims ? " or a name of the plan's dims" : "");
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
        if ((r = parse_spec(p, o, &t->t, t->sym, where, err)) < 0)
            return r;
        for (int d = 0; d < t->t.rank; d++)
            t->named |= t->sym[d] != 0;
        p->n_tensors++;
    }
    return 0;
}

/* Weights are given once, before the prepare steps: their shapes name no dims. */
static int check_weights_static(const hidet_plan *p, hidet_error *err)
{
    for (size_t i = 0; i < p->n_tensors; i++)
        if (p->tensors[i].role == HIDET_PLAN_WEIGHT && p->tensors[i].named)
            return hidet__fail(err, -EPROTO, 0, "weights: '%s' has a named axis; weights are "
                               "static", p->tensors[i].t.name);
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

/* One kernel set of a step made a plan_set: each parameter resolved to where its pointer comes
 * from, and checked against what it binds (sizes at the names' max: the plan's layout). `at`
 * names the set in messages ("steps[2].kernel_set" or "...dispatch.entries[1].kernel_set"). */
static int resolve_set(hidet_plan *p, plan_set *ps, const hidet_kernel_set *set,
                       const cJSON *bindings, const hidet_plan_tensor *in_specs, int n_in,
                       bool prepare, bool dynamic, const char *where, const char *at,
                       hidet_error *err)
{
    char w[200];

    memcpy(ps->key, set->key, sizeof(ps->key));
    ps->kernels = calloc(set->n_kernels, sizeof(*ps->kernels));
    if (!ps->kernels)
        return hidet__fail(err, -ENOMEM, 0, "out of memory");
    for (size_t k = 0; k < set->n_kernels; k++) {
        const hidet_kernel *hk = &set->kernels[k];
        plan_kernel *pk = &ps->kernels[ps->n_kernels++];
        memcpy(pk->grid, hk->grid, sizeof(pk->grid));
        memcpy(pk->block, hk->block, sizeof(pk->block));
        pk->shared = hk->shared_bytes;
        pk->n_params = hk->n_params;
        pk->name = strdup(hk->name);
        pk->params = calloc(hk->n_params + 1, sizeof(*pk->params));
        if (dynamic)
            pk->ints = calloc(hk->n_params + 1, sizeof(*pk->ints));
        size_t n_maps = 0;
        for (size_t j = 0; j < hk->n_params; j++)
            n_maps += hk->params[j].is_tensor_map;
        if (n_maps)
            pk->maps = aligned_alloc(64, n_maps * TUNER_TMAP_BYTES);
        if (!pk->name || !pk->params || (dynamic && !pk->ints) || (n_maps && !pk->maps))
            return hidet__fail(err, -ENOMEM, 0, "out of memory");
        int next_map = 0;
        for (size_t j = 0; j < hk->n_params; j++) {
            const hidet_param *hp = &hk->params[j];
            const char *buf = hp->buffer;
            uint64_t need;
            char what[96];
            snprintf(w, sizeof(w), "%s.bindings.%s", where, buf);
            if (hp->index < 0 || (size_t)hp->index >= hk->n_params)
                return hidet__fail(err, -EPROTO, 0, "%s.kernels[%zu].params[%zu].index: %d is out "
                                   "of range", at, k, j, hp->index);
            plan_src *src = &pk->params[hp->index];
            if (hp->kind == HIDET_BUFFER_SIZE) {
                /* A static plan's shapes are fixed (docs/graphs.md): its sets take no sizes. */
                if (!dynamic)
                    return hidet__fail(err, -EPROTO, 0, "%s.kernels[%zu].params[%zu].type: an "
                                       "\"int\" parameter (a dynamic op's size) in a plan, whose "
                                       "shapes are fixed", at, k, j);
                src->kind = SRC_SIZE;
                src->map = -1;
                continue;
            }
            if (strcmp(hp->type, "pointer") != 0 && !hp->is_tensor_map)
                return hidet__fail(err, -EPROTO, 0, "%s.kernels[%zu].params[%zu].type: '%s' is "
                                   "not a parameter kind this client can pass (pointer, "
                                   "tensor_map%s)", at, k, j, hp->type, dynamic ? ", int" : "");
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
                return hidet__fail(err, -EPROTO, 0, "%s.kernels[%zu].params[%zu].buffer: '%s' is "
                                   "not input<i> (i below %d), output or workspace", at, k, j,
                                   buf, n_in);
            }
            const cJSON *bn = cJSON_GetObjectItemCaseSensitive(bindings, buf);
            if (!cJSON_IsString(bn))
                return hidet__fail(err, -EPROTO, 0, "%s: the kernel reads %s, but the step binds "
                                   "nothing to it", w, buf);
            ssize_t ti = find_tensor(p, bn->valuestring), bi = find_buffer(p, bn->valuestring);
            uint64_t have;
            if (ti >= 0) {
                plan_tensor *t = &p->tensors[ti];
                if (prepare && t->role != HIDET_PLAN_WEIGHT)
                    return hidet__fail(err, -EPROTO, 0, "%s: a prepare step may read weights and "
                                       "write constants only, but it binds '%s'", w, t->t.name);
                if (hp->kind == HIDET_BUFFER_OUTPUT && t->role != HIDET_PLAN_OUTPUT)
                    return hidet__fail(err, -EPROTO, 0, "%s: the step writes '%s', a caller's %s",
                                       w, t->t.name,
                                       t->role == HIDET_PLAN_INPUT ? "input" : "weight");
                src->kind = SRC_TENSOR;
                src->tensor = (size_t)ti;
                have = t->t.bytes;
            } else if (bi >= 0) {
                plan_buffer *b = &p->buffers[bi];
                if (prepare && !b->constants)
                    return hidet__fail(err, -EPROTO, 0, "%s: a prepare step binds the arena "
                                       "buffer '%s'", w, b->name);
                src->kind = b->constants ? SRC_CONSTANTS : SRC_ARENA;
                src->offset = b->offset;
                have = b->bytes;
            } else {
                return hidet__fail(err, -EPROTO, 0, "%s: '%s' names no input, weight, output or "
                                   "buffer of the plan", w, bn->valuestring);
            }
            src->map = -1;
            const hidet_map_dims *md = set->kernel_dims && set->kernel_dims[k].map_dims
                                           ? &set->kernel_dims[k].map_dims[j] : NULL;
            for (int d = 0; md && d < 5; d++)
                if (md->dims[d]) {
                    /* As an "int" parameter: a static plan's shapes are fixed. */
                    if (!dynamic)
                        return hidet__fail(err, -EPROTO, 0, "%s.kernels[%zu].params[%zu]."
                                           "tensor_map.dims[%d]: a dimension that follows a "
                                           "dynamic op's sizes in a plan, whose shapes are fixed",
                                           at, k, j, d);
                    src->sym = true;
                }
            if (hp->is_tensor_map) {
                /* The copy engine must not reach past the bound buffer either (a map that
                 * follows the sizes: at their max, where the buffer is largest too). */
                src->map = next_map++;
                hidet__tmap_of(&hp->tensor_map, &src->tmap);
                if (src->sym && !(src->slots = aligned_alloc(64, PLAN_MAP_CACHE *
                                                                     sizeof(*src->slots))))
                    return hidet__fail(err, -ENOMEM, 0, "out of memory");
                if (src->slots)
                    memset(src->slots, 0, PLAN_MAP_CACHE * sizeof(*src->slots));
                const uint64_t reach = tuner_tmap_extent(&src->tmap);
                if (reach > need) {
                    need = reach;
                    snprintf(what, sizeof(what), "the tensor map of %s (%llu bytes)", buf,
                             (unsigned long long)reach);
                }
            }
            if (have < need)
                return hidet__fail(err, -EPROTO, 0, "%s: '%s' has %llu bytes, too few for %s", w,
                                   bn->valuestring, (unsigned long long)have, what);
        }
    }
    return 0;
}

/* A kernel set's "kernel_set" parse error, prefixed with where it is. */
static int set_fail(hidet_error *err, int r, const char *at)
{
    if (err) {
        char m[sizeof(err->message)];
        snprintf(m, sizeof(m), "%s", err->message);
        hidet__fail(err, r, 0, "%s: %s", at, m);
    }
    return r;
}

/* Every dim a dynamic set or table declares must be the plan's, with the plan's range (entries
 * are cut to their ranges: only the names are checked there). */
static int check_set_dims(const hidet_plan *p, const hidet_dim *dims, int n_dims, bool exact,
                          const char *at, hidet_error *err)
{
    for (int k = 0; k < n_dims; k++) {
        int i = hidet__dim_index(p->dims, p->n_dims, dims[k].name);
        if (i < 0)
            return hidet__fail(err, -EPROTO, 0, "%s.dims.%s: not a dim of the plan (%s)", at,
                               dims[k].name, p->n_dims ? "see its \"dims\"" : "it has none");
        const hidet_dim *d = &p->dims[i];
        if (exact && (d->min != dims[k].min || d->max != dims[k].max ||
                      d->multiple_of != dims[k].multiple_of))
            return hidet__fail(err, -EPROTO, 0, "%s.dims.%s: %lld..%lld (multiple of %lld), but "
                               "the plan's is %lld..%lld (multiple of %lld)", at, dims[k].name,
                               (long long)dims[k].min, (long long)dims[k].max,
                               (long long)dims[k].multiple_of, (long long)d->min,
                               (long long)d->max, (long long)d->multiple_of);
    }
    return 0;
}

/* One step: its kernel set (hidet_kernel_set_parse) or, for a kernel that takes names, its
 * dispatch table (hidet_dispatch_parse), each set's parameters resolved. */
static int parse_step(hidet_plan *p, const cJSON *s, plan_step *st, bool prepare,
                      const char *where, hidet_error *err)
{
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "request");
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(req, "inputs");
    const cJSON *bindings = cJSON_GetObjectItemCaseSensitive(s, "bindings");
    const cJSON *ks = cJSON_GetObjectItemCaseSensitive(s, "kernel_set"), *o;
    hidet_plan_tensor in_specs[8];
    unsigned in_sym[HIDET_MAX_RANK];
    char w[200], at[96], *text = NULL;
    int n_in = 0, r = 0;

    st->cur_entry = -1;
    if (!cJSON_IsArray(ins) || cJSON_GetArraySize(ins) < 1 || cJSON_GetArraySize(ins) > 8)
        return hidet__fail(err, -EPROTO, 0, "%s.request.inputs: expected 1 to 8 inputs", where);
    cJSON_ArrayForEach(o, ins) {
        snprintf(w, sizeof(w), "%s.request.inputs[%d]", where, n_in);
        if ((r = parse_spec(p, o, &in_specs[n_in++], prepare ? NULL : in_sym, w, err)) < 0)
            return r;
    }
    if (!cJSON_IsObject(bindings))
        return hidet__fail(err, -EPROTO, 0, "%s.bindings: expected an object", where);
    if (!cJSON_IsObject(ks) || !(text = cJSON_PrintUnformatted(ks)))
        return hidet__fail(err, -EPROTO, 0, "%s.kernel_set: expected an object", where);
    snprintf(at, sizeof(at), "%s.kernel_set", where);
    if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(ks, "dispatch"))) {
        if (prepare || p->n_dims == 0) {
            free(text);
            return hidet__fail(err, -EPROTO, 0, "%s: a dispatch table (a kernel that takes "
                               "names) in a %s", at, prepare ? "prepare step" : "plan without "
                               "\"dims\"");
        }
        r = hidet_dispatch_parse(text, strlen(text), &st->table, err);
        free(text);
        if (r < 0)
            return set_fail(err, r, at);
        const hidet_dispatch *d = st->table;
        if ((r = check_set_dims(p, d->dims, d->n_dims, true, at, err)) < 0)
            return r;
        st->sets = calloc(d->n_entries + 1, sizeof(*st->sets));
        st->entry_set = calloc(d->n_entries + 1, sizeof(*st->entry_set));
        if (!st->sets || !st->entry_set)
            return hidet__fail(err, -ENOMEM, 0, "out of memory");
        st->sets[0].set = d->generic;
        snprintf(w, sizeof(w), "%s.dispatch.generic", at);
        if ((r = resolve_set(p, &st->sets[st->n_sets++], d->generic, bindings, in_specs, n_in,
                             false, true, where, w, err)) < 0)
            return r;
        for (size_t i = 0; i < d->n_entries; i++) {
            st->entry_set[i] = -1;
            if (d->entries[i].state != HIDET_ENTRY_READY || !d->entries[i].kernel_set)
                continue;
            snprintf(w, sizeof(w), "%s.dispatch.entries[%zu].kernel_set", at, i);
            if ((r = check_set_dims(p, d->entries[i].kernel_set->dims,
                                    d->entries[i].kernel_set->n_dims, false, w, err)) < 0)
                return r;
            st->entry_set[i] = (long)st->n_sets;
            st->sets[st->n_sets].set = d->entries[i].kernel_set;
            if ((r = resolve_set(p, &st->sets[st->n_sets++], d->entries[i].kernel_set, bindings,
                                 in_specs, n_in, false, true, where, w, err)) < 0)
                return r;
        }
    } else {
        hidet_kernel_set *set = NULL;
        r = hidet_kernel_set_parse(text, strlen(text), &set, err);
        free(text);
        if (r < 0)
            return set_fail(err, r, at);
        if (!(st->sets = calloc(1, sizeof(*st->sets)))) {
            hidet_kernel_set_free(set);
            return hidet__fail(err, -ENOMEM, 0, "out of memory");
        }
        st->n_sets = 1;
        /* A set that takes sizes is kept for binding them; a static one is not needed after. */
        st->sets[0].set = set;
        st->sets[0].owned = true;
        const bool dynamic = set->n_dims && p->n_dims && !prepare;
        if (dynamic && (r = check_set_dims(p, set->dims, set->n_dims, true, at, err)) < 0)
            return r;
        r = resolve_set(p, &st->sets[0], set, bindings, in_specs, n_in, prepare, dynamic, where,
                        at, err);
        if (r < 0)
            return r;
        if (!dynamic) {
            hidet_kernel_set_free(set);
            st->sets[0].set = NULL;
        }
    }
    st->cur = &st->sets[0];
    return 0;
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
    const cJSON *dims = cJSON_GetObjectItemCaseSensitive(root, "dims");
    if (dims) {
        char why[192];
        if ((r = hidet__dims_parse(dims, p->dims, &p->n_dims, why, sizeof(why))) < 0) {
            r = hidet__fail(err, -EPROTO, 0, "dims%s", why);
            goto out;
        }
    }
    if ((r = parse_tensors(p, root, "inputs", HIDET_PLAN_INPUT, true, err)) < 0 ||
        (r = parse_tensors(p, root, "weights", HIDET_PLAN_WEIGHT, false, err)) < 0 ||
        (r = parse_tensors(p, root, "outputs", HIDET_PLAN_OUTPUT, true, err)) < 0 ||
        (r = check_weights_static(p, err)) < 0 ||
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

static void free_set(plan_set *ps)
{
    for (size_t k = 0; k < ps->n_kernels; k++) {
        plan_kernel *pk = &ps->kernels[k];
        for (size_t j = 0; pk->params && j < pk->n_params; j++)
            free(pk->params[j].slots);
        free(pk->name);
        free(pk->params);
        free(pk->ints);
        free(pk->maps);
    }
    free(ps->kernels);
    if (ps->owned)
        hidet_kernel_set_free(ps->set);
}

static void free_steps(plan_step *s, size_t n)
{
    for (size_t i = 0; s && i < n; i++) {
        for (size_t j = 0; j < s[i].n_sets; j++)
            free_set(&s[i].sets[j]);
        free(s[i].sets);
        free(s[i].entry_set);
        hidet_dispatch_free(s[i].table);
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
    /* A tensor with named axes is checked at the launch, against its size at the sizes. */
    if (!t->named && bytes < t->t.bytes)
        return hidet__fail(err, -EINVAL, 0, "'%s': %llu bytes given, the tensor (%s, rank %d) "
                           "needs %llu", name, (unsigned long long)bytes, t->t.dtype, t->t.rank,
                           (unsigned long long)t->t.bytes);
    t->ptr = ptr;
    t->bound_bytes = bytes;
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

/* The module of a kernel set (one per key, shared by the sets of every step with that key). */
static plan_set *set_with_module(hidet_plan *p, const char *key)
{
    plan_step *all[2] = {p->prepare, p->steps};
    size_t ns[2] = {p->n_prepare, p->n_steps};
    for (int a = 0; a < 2; a++)
        for (size_t i = 0; i < ns[a]; i++)
            for (size_t j = 0; j < all[a][i].n_sets; j++)
                if (all[a][i].sets[j].module && strcmp(all[a][i].sets[j].key, key) == 0)
                    return &all[a][i].sets[j];
    return NULL;
}

static int load_set(hidet_plan *p, hidet_client *c, plan_set *st, hidet_error *err)
{
    int r;

    for (size_t k = 0; k < st->n_kernels; k++)
        for (size_t j = 0; j < st->kernels[k].n_params; j++) {
            const plan_src *s = &st->kernels[k].params[j];
            if (s->map >= 0 && !tuner_tmap_can_encode(&s->tmap, &cu.tmap))
                return hidet__fail(err, -ELIBACC, 0, "kernel %s takes tensor maps, and the CUDA driver "
                                   "lacks %s (it needs a CUDA 12 driver or newer)", st->kernels[k].name,
                                   tuner_tmap_encoder_name(&s->tmap));
        }
    const plan_set *shared = set_with_module(p, st->key);
    if (shared)
        st->module = shared->module;
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

static int load_step(hidet_plan *p, hidet_client *c, plan_step *st, hidet_error *err)
{
    int r;
    for (size_t j = 0; j < st->n_sets; j++)
        if ((r = load_set(p, c, &st->sets[j], err)) < 0)
            return r;
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

/* ---- named dims: the sizes of a pass -------------------------------------------------------- */

int hidet_plan_n_dims(const hidet_plan *p) { return p ? p->n_dims : 0; }

const hidet_dim *hidet_plan_dim_at(const hidet_plan *p, int i)
{
    return p && i >= 0 && i < p->n_dims ? &p->dims[i] : NULL;
}

int hidet_plan_set_shape(hidet_plan *p, const char *name, const int64_t *shape, int rank,
                         hidet_error *err)
{
    if (!p || !name || (rank && !shape))
        return hidet__fail(err, -EINVAL, 0, "no plan, name or shape");
    ssize_t i = find_tensor(p, name);
    if (i < 0 || p->tensors[i].role != HIDET_PLAN_INPUT)
        return hidet__fail(err, -ENOENT, 0, "the plan has no input '%s'", name);
    plan_tensor *t = &p->tensors[i];
    if (rank != 0 && rank != t->t.rank)
        return hidet__fail(err, -EINVAL, 0, "input '%s': a shape of rank %d, the plan's has "
                           "rank %d", name, rank, t->t.rank);
    for (int d = 0; d < rank; d++)
        if (shape[d] < 1)
            return hidet__fail(err, -EINVAL, 0, "input '%s': shape[%d] is %lld", name, d,
                               (long long)shape[d]);
    memcpy(t->given, shape, (size_t)rank * sizeof(*shape));
    t->given_rank = rank;
    hidet__ok(err);
    return 0;
}

int hidet_plan_set_sizes(hidet_plan *p, const char *const *names, const int64_t *sizes, size_t n,
                         hidet_error *err)
{
    if (!p || (n && (!names || !sizes)))
        return hidet__fail(err, -EINVAL, 0, "no plan, or sizes without names");
    for (size_t i = 0; i < n; i++)
        if (hidet__dim_index(p->dims, p->n_dims, names[i]) < 0)
            return hidet__fail(err, -EINVAL, 0, "'%.40s' is not a dim of the plan (%s)",
                               names[i] ? names[i] : "(null)",
                               p->n_dims ? "see hidet_plan_dim_at()" : "it has none");
    memset(p->explicit_given, 0, sizeof(p->explicit_given));
    for (size_t i = 0; i < n; i++) {
        int k = hidet__dim_index(p->dims, p->n_dims, names[i]);
        p->explicit_given[k] = true;
        p->explicit_sizes[k] = sizes[i];
    }
    hidet__ok(err);
    return 0;
}

/* The product of the sizes of the dims in mask. */
static int64_t sym_size(const int64_t *sizes, unsigned mask)
{
    int64_t v = 1;
    for (int k = 0; k < HIDET_MAX_DIMS; k++)
        if (mask & (1u << k))
            v *= sizes[k];
    return v;
}

/* The sizes of the next pass (by index of p->dims): the explicit ones, then each input's plain
 * named axes; every fixed and product axis of a given shape checked against them; each size
 * checked against its range (hidet__sizes_resolve: the daemon's wording). */
static int resolve_sizes(const hidet_plan *p, int64_t *out, hidet_error *err)
{
    int64_t known[HIDET_MAX_DIMS] = {0};
    char from[HIDET_MAX_DIMS][160];
    const char *names[HIDET_MAX_DIMS];

    for (int k = 0; k < p->n_dims; k++) {
        names[k] = p->dims[k].name;
        if (p->explicit_given[k]) {
            known[k] = p->explicit_sizes[k];
            snprintf(from[k], sizeof(from[k]), "hidet_plan_set_sizes()");
        }
    }
    for (size_t i = 0; i < p->n_tensors; i++) {
        const plan_tensor *t = &p->tensors[i];
        if (t->role != HIDET_PLAN_INPUT || !t->given_rank)
            continue;
        for (int d = 0; d < t->t.rank; d++) {
            const unsigned m = t->sym[d];
            if (!m || (m & (m - 1)))
                continue;
            const int k = __builtin_ctz(m);
            if (!known[k]) {
                known[k] = t->given[d];
                snprintf(from[k], sizeof(from[k]), "input '%.100s' shape[%d]", t->t.name, d);
            } else if (known[k] != t->given[d]) {
                int r = hidet__fail(err, -EINVAL, 0, "input '%s' shape[%d]: %s is %lld here, but "
                                    "%lld from %s", t->t.name, d, names[k],
                                    (long long)t->given[d], (long long)known[k], from[k]);
                if (err)
                    snprintf(err->field, sizeof(err->field), "%.100s.shape[%d]", t->t.name, d);
                return r;
            }
        }
    }
    for (int k = 0; k < p->n_dims; k++)
        if (!known[k])
            return hidet__fail(err, -EINVAL, 0, "the size of %s is not known: no input shape "
                               "given (hidet_plan_set_shape()) has an axis that is %s alone; give "
                               "it with hidet_plan_set_sizes()", names[k], names[k]);
    int r = hidet__sizes_resolve(p->dims, p->n_dims, names, known, (size_t)p->n_dims, out, err);
    if (r < 0)
        return r;
    for (size_t i = 0; i < p->n_tensors; i++) {
        const plan_tensor *t = &p->tensors[i];
        if (t->role != HIDET_PLAN_INPUT || !t->given_rank)
            continue;
        for (int d = 0; d < t->t.rank; d++) {
            const int64_t want = t->sym[d] ? sym_size(out, t->sym[d]) : t->t.shape[d];
            if (t->given[d] == want)
                continue;
            char expr[HIDET_MAX_DIMS * HIDET_DIM_NAME_LEN] = "";
            for (int k = 0; k < p->n_dims; k++)
                if (t->sym[d] & (1u << k))
                    snprintf(expr + strlen(expr), sizeof(expr) - strlen(expr), "%s%s",
                             expr[0] ? "*" : "", names[k]);
            if (t->sym[d])
                r = hidet__fail(err, -EINVAL, 0, "input '%s' shape[%d] is %lld, but %s is %lld at "
                                "these sizes", t->t.name, d, (long long)t->given[d], expr,
                                (long long)want);
            else
                r = hidet__fail(err, -EINVAL, 0, "input '%s' shape[%d] is %lld, the plan's is "
                                "%lld", t->t.name, d, (long long)t->given[d], (long long)want);
            if (err)
                snprintf(err->field, sizeof(err->field), "%.100s.shape[%d]", t->t.name, d);
            return r;
        }
    }
    return 0;
}

/* A set's dims' names and their sizes (the set's dims are the plan's, checked at parsing). */
static size_t set_sizes_of(const hidet_plan *p, const hidet_dim *dims, int n_dims,
                           const int64_t *at, const char **names, int64_t *vals)
{
    for (int k = 0; k < n_dims; k++) {
        names[k] = dims[k].name;
        vals[k] = at[hidet__dim_index(p->dims, p->n_dims, dims[k].name)];
    }
    return (size_t)n_dims;
}

/* A step at the sizes: its kernel set chosen, then bound (grids, "int" parameters, the tensor
 * maps that follow the sizes described at them; encoded at the launch). */
static int bind_step(hidet_plan *p, plan_step *st, const int64_t *at, size_t index,
                     hidet_error *err)
{
    const char *names[HIDET_MAX_DIMS];
    int64_t vals[HIDET_MAX_DIMS];
    size_t n;
    int r;

    if (st->table) {
        const hidet_kernel_set *chosen = NULL;
        long entry = -1;
        n = set_sizes_of(p, st->table->dims, st->table->n_dims, at, names, vals);
        if ((r = hidet_dispatch_select(st->table, names, vals, n, &chosen, &entry, err)) < 0)
            goto fail;
        st->cur_entry = entry;
        st->cur = chosen != st->table->generic && entry >= 0 && st->entry_set[entry] >= 0
                      ? &st->sets[st->entry_set[entry]] : &st->sets[0];
    }
    plan_set *ps = st->cur;
    const hidet_kernel_set *set = ps->set;
    if (!set)
        return 0; /* a static set */
    n = set_sizes_of(p, set->dims, set->n_dims, at, names, vals);
    for (size_t k = 0; k < ps->n_kernels; k++) {
        plan_kernel *pk = &ps->kernels[k];
        if ((r = hidet_kernel_set_bind(set, k, names, vals, n, pk->grid, pk->ints, err)) < 0)
            goto fail;
        for (size_t j = 0; j < set->kernels[k].n_params; j++) {
            plan_src *src = &pk->params[set->kernels[k].params[j].index];
            hidet_tensor_map m;
            if (!src->sym)
                continue;
            if ((r = hidet_kernel_set_bind_map(set, k, j, names, vals, n, &m, err)) < 0)
                goto fail;
            hidet__tmap_of(&m, &src->tmap);
        }
    }
    return 0;
fail:
    if (err) {
        char m[sizeof(err->message)];
        snprintf(m, sizeof(m), "%s", err->message);
        hidet__fail(err, r, 0, "steps[%zu]: %s", index, m);
    }
    return r;
}

int hidet_plan_apply_sizes(hidet_plan *p, hidet_error *err)
{
    int64_t at[HIDET_MAX_DIMS] = {0};
    int r;

    if (!p)
        return hidet__fail(err, -EINVAL, 0, "no plan");
    if (p->n_dims == 0) {
        hidet__ok(err);
        return 0;
    }
    if ((r = resolve_sizes(p, at, err)) < 0)
        return r;
    if (!p->sized || memcmp(at, p->sizes, sizeof(at)) != 0) {
        p->sized = false;
        for (size_t i = 0; i < p->n_steps; i++)
            if ((r = bind_step(p, &p->steps[i], at, i, err)) < 0)
                return r;
        memcpy(p->sizes, at, sizeof(at));
        for (size_t i = 0; i < p->n_tensors; i++) {
            plan_tensor *t = &p->tensors[i];
            t->bytes_now = dtype_size(t->t.dtype);
            for (int d = 0; d < t->t.rank; d++) {
                t->shape_now[d] = t->sym[d] ? sym_size(at, t->sym[d]) : t->t.shape[d];
                t->bytes_now *= (uint64_t)t->shape_now[d];
            }
        }
        p->sized = true;
    }
    hidet__ok(err);
    return 0;
}

int hidet_plan_shape(const hidet_plan *p, const char *name, int64_t shape[HIDET_MAX_RANK],
                     int *ret_rank, uint64_t *ret_bytes, hidet_error *err)
{
    ssize_t i = p && name ? find_tensor(p, name) : -1;
    if (i < 0)
        return hidet__fail(err, -ENOENT, 0, "the plan has no input, weight or output '%s'",
                           name ? name : "(null)");
    const plan_tensor *t = &p->tensors[i];
    if (t->named && !p->sized)
        return hidet__fail(err, -EALREADY, 0, "'%s' has named axes: hidet_plan_apply_sizes() "
                           "first", name);
    for (int d = 0; shape && d < t->t.rank; d++)
        shape[d] = t->named ? t->shape_now[d] : t->t.shape[d];
    if (ret_rank)
        *ret_rank = t->t.rank;
    if (ret_bytes)
        *ret_bytes = t->named ? t->bytes_now : t->t.bytes;
    hidet__ok(err);
    return 0;
}

int hidet_plan_size(const hidet_plan *p, const char *name, int64_t *ret)
{
    int k = p ? hidet__dim_index(p->dims, p->n_dims, name) : -1;
    if (k < 0)
        return -ENOENT;
    if (!p->sized)
        return -EALREADY;
    if (ret)
        *ret = p->sizes[k];
    return 0;
}

/* The 8 bytes a launch passes for a parameter (a tensor map's: its buffer's address). */
static uint64_t param_value(const hidet_plan *p, const plan_kernel *pk, size_t j)
{
    const plan_src *s = &pk->params[j];
    return s->kind == SRC_TENSOR ? p->tensors[s->tensor].ptr
         : s->kind == SRC_ARENA  ? p->arena + s->offset
         : s->kind == SRC_SIZE   ? (uint64_t)pk->ints[j]
                                 : p->constants + s->offset;
}

int hidet_plan_step_kernel(const hidet_plan *p, size_t step, size_t kernel, long *ret_entry,
                           char ret_key[HIDET_KEY_LEN + 1], uint32_t ret_grid[3],
                           uint64_t *ret_args, size_t n_args, size_t *ret_n_params,
                           hidet_error *err)
{
    if (!p || step >= p->n_steps || kernel >= p->steps[step].cur->n_kernels)
        return hidet__fail(err, -EINVAL, 0, "no plan, or no step %zu kernel %zu", step, kernel);
    const plan_step *st = &p->steps[step];
    const plan_kernel *pk = &st->cur->kernels[kernel];
    if (ret_entry)
        *ret_entry = st->table ? st->cur_entry : -1;
    if (ret_key)
        memcpy(ret_key, st->cur->key, HIDET_KEY_LEN + 1);
    if (ret_grid)
        memcpy(ret_grid, pk->grid, sizeof(pk->grid));
    for (size_t j = 0; ret_args && j < n_args && j < pk->n_params; j++)
        ret_args[j] = param_value(p, pk, j);
    if (ret_n_params)
        *ret_n_params = pk->n_params;
    hidet__ok(err);
    return 0;
}

/* The encoding of a map that follows the sizes, for addr at the current sizes: kept ones are
 * reused (a pass at sizes met lately encodes nothing). */
static int sym_map(hidet_plan *p, plan_src *s, uint64_t addr, unsigned char **ret, hidet_error *err)
{
    for (size_t i = 0; i < PLAN_MAP_CACHE; i++)
        if (s->slots[i].addr == addr && memcmp(s->slots[i].sizes, p->sizes, sizeof(p->sizes)) == 0) {
            *ret = s->slots[i].bytes;
            return 0;
        }
    plan_map_slot *slot = &s->slots[s->next_slot];
    s->next_slot = (s->next_slot + 1) % PLAN_MAP_CACHE;
    slot->addr = 0;
    int cr = tuner_tmap_encode(&s->tmap, addr, slot->bytes, &cu.tmap);
    if (cr != 0)
        return cu_fail(err, cr, tuner_tmap_encoder_name(&s->tmap));
    slot->addr = addr;
    memcpy(slot->sizes, p->sizes, sizeof(p->sizes));
    *ret = slot->bytes;
    return 0;
}

static int launch_steps(hidet_plan *p, plan_step *steps, size_t n, void *stream, hidet_error *err)
{
    for (size_t i = 0; i < n; i++) {
        plan_set *ps = steps[i].cur;
        for (size_t k = 0; k < ps->n_kernels; k++) {
            plan_kernel *pk = &ps->kernels[k];
            uint64_t vals[64];
            void *args[64];
            int r;
            if (pk->n_params > 64)
                return hidet__fail(err, -E2BIG, 0, "kernel %s has %zu parameters", pk->name,
                                   pk->n_params);
            for (size_t j = 0; j < pk->n_params; j++) {
                plan_src *s = &pk->params[j];
                vals[j] = param_value(p, pk, j);
                args[j] = &vals[j];
                if (s->map >= 0 && s->sym) {
                    unsigned char *enc = NULL;
                    if ((r = sym_map(p, s, vals[j], &enc, err)) < 0)
                        return r;
                    args[j] = enc;
                } else if (s->map >= 0) {
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
        if (!weights_only && t->named && t->bound_bytes < t->bytes_now)
            return hidet__fail(err, -EINVAL, 0, "%s '%s': %llu bytes bound, at these sizes it "
                               "needs %llu", t->role == HIDET_PLAN_INPUT ? "input" : "output",
                               t->t.name, (unsigned long long)t->bound_bytes,
                               (unsigned long long)t->bytes_now);
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
    if ((r = hidet_plan_apply_sizes(p, err)) < 0 || (r = check_bound(p, false, err)) < 0)
        return r;
    return launch_steps(p, p->steps, p->n_steps, stream, err);
}
