/* clients/c/request.c - the request builder: C calls in, the agreed request JSON out.
 *
 * The builder keeps a cJSON tree and only ever adds typed values to it, so whatever names and
 * strings a caller passes end up correctly escaped; it does not judge them (the daemon does,
 * and answers which field is wrong).
 */
#include "clients/c/client_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

struct hidet_request {
    cJSON *root;
    cJSON *inputs;   /* created with root, so inputs come right after op */
    cJSON *dims;     /* created on first use */
    cJSON *sizes;    /* created on first use */
    cJSON *attrs;    /* created on first use */
    cJSON *prologue; /* created on first use */
    cJSON *epilogue; /* created on first use */
};

int hidet_request_new(const char *op, hidet_request **ret)
{
    hidet_request *r;

    if (!op || !*op || !ret)
        return -EINVAL;
    r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->root = cJSON_CreateObject();
    if (!r->root || !cJSON_AddStringToObject(r->root, "op", op) ||
        !(r->inputs = cJSON_AddArrayToObject(r->root, "inputs"))) {
        hidet_request_free(r);
        return -ENOMEM;
    }
    *ret = r;
    return 0;
}

hidet_request *hidet_request_free(hidet_request *r)
{
    if (!r)
        return NULL;
    cJSON_Delete(r->root);
    free(r);
    return NULL;
}

int hidet_request_add_input(hidet_request *r, const int64_t *shape, int rank, const char *dtype)
{
    return hidet_request_add_input_named(r, NULL, shape, rank, dtype);
}

int hidet_request_add_input_named(hidet_request *r, const char *const *dims, const int64_t *shape,
                                  int rank, const char *dtype)
{
    cJSON *t, *s;

    if (!r || rank < 0 || rank > HIDET_MAX_RANK || !dtype || !*dtype)
        return -EINVAL;
    for (int i = 0; i < rank; i++)
        if ((!dims || !dims[i]) && !shape)
            return -EINVAL;
    t = cJSON_CreateObject();
    if (!t)
        return -ENOMEM;
    if (!(s = cJSON_AddArrayToObject(t, "shape")))
        goto oom;
    for (int i = 0; i < rank; i++) {
        cJSON *d = dims && dims[i] ? cJSON_CreateString(dims[i]) : cJSON_CreateNumber((double)shape[i]);
        if (!d || !cJSON_AddItemToArray(s, d)) {
            cJSON_Delete(d);
            goto oom;
        }
    }
    if (!cJSON_AddStringToObject(t, "dtype", dtype) || !cJSON_AddItemToArray(r->inputs, t))
        goto oom;
    return 0;
oom:
    cJSON_Delete(t);
    return -ENOMEM;
}

/* Puts item under name in obj, replacing an earlier value; takes item in every case. */
static int hidet__set(cJSON *obj, const char *name, cJSON *item)
{
    if (!item)
        return -ENOMEM;
    if (cJSON_GetObjectItemCaseSensitive(obj, name)) {
        if (!cJSON_ReplaceItemInObjectCaseSensitive(obj, name, item)) {
            cJSON_Delete(item);
            return -ENOMEM;
        }
        return 0;
    }
    if (!cJSON_AddItemToObject(obj, name, item)) {
        cJSON_Delete(item);
        return -ENOMEM;
    }
    return 0;
}

/* r->*member, the top-level object name, created on first use. */
static cJSON *hidet__object(hidet_request *r, cJSON **member, const char *name)
{
    if (!*member)
        *member = cJSON_AddObjectToObject(r->root, name);
    return *member;
}

int hidet_request_dim(hidet_request *r, const char *name, int64_t min, int64_t max,
                      int64_t multiple_of)
{
    cJSON *dims, *d;

    if (!r || !name || !*name)
        return -EINVAL;
    if (!(dims = hidet__object(r, &r->dims, "dims")) || !(d = cJSON_CreateObject()))
        return -ENOMEM;
    if (!cJSON_AddNumberToObject(d, "min", (double)min) ||
        !cJSON_AddNumberToObject(d, "max", (double)max) ||
        (multiple_of > 1 && !cJSON_AddNumberToObject(d, "multiple_of", (double)multiple_of))) {
        cJSON_Delete(d);
        return -ENOMEM;
    }
    return hidet__set(dims, name, d);
}

int hidet_request_dim_hint(hidet_request *r, const char *name, int64_t v)
{
    cJSON *d, *hints, *h;

    if (!r || !name || !*name)
        return -EINVAL;
    d = r->dims ? cJSON_GetObjectItemCaseSensitive(r->dims, name) : NULL;
    if (!d)
        return -ENOENT;
    hints = cJSON_GetObjectItemCaseSensitive(d, "hints");
    if (!hints && !(hints = cJSON_AddArrayToObject(d, "hints")))
        return -ENOMEM;
    if (!(h = cJSON_CreateNumber((double)v)) || !cJSON_AddItemToArray(hints, h)) {
        cJSON_Delete(h);
        return -ENOMEM;
    }
    return 0;
}

int hidet_request_size(hidet_request *r, const char *name, int64_t v)
{
    cJSON *sizes;

    if (!r || !name || !*name)
        return -EINVAL;
    if (!(sizes = hidet__object(r, &r->sizes, "sizes")))
        return -ENOMEM;
    return hidet__set(sizes, name, cJSON_CreateNumber((double)v));
}

static cJSON *hidet__attrs(hidet_request *r)
{
    if (!r->attrs)
        r->attrs = cJSON_AddObjectToObject(r->root, "attrs");
    return r->attrs;
}

static int hidet__attr(hidet_request *r, const char *name, cJSON *item)
{
    cJSON *a;
    if (!r || !name || !*name) {
        cJSON_Delete(item);
        return -EINVAL;
    }
    a = hidet__attrs(r);
    if (!a) {
        cJSON_Delete(item);
        return -ENOMEM;
    }
    return hidet__set(a, name, item);
}

int hidet_request_attr_int(hidet_request *r, const char *name, int64_t v)
{
    return hidet__attr(r, name, cJSON_CreateNumber((double)v));
}

int hidet_request_attr_bool(hidet_request *r, const char *name, bool v)
{
    return hidet__attr(r, name, cJSON_CreateBool(v));
}

int hidet_request_attr_double(hidet_request *r, const char *name, double v)
{
    if (!isfinite(v))
        return -EINVAL; /* JSON has no NaN or infinity */
    return hidet__attr(r, name, cJSON_CreateNumber(v));
}

int hidet_request_attr_string(hidet_request *r, const char *name, const char *v)
{
    if (!v)
        return -EINVAL;
    return hidet__attr(r, name, cJSON_CreateString(v));
}

int hidet_request_attr_int_array(hidet_request *r, const char *name, const int64_t *v, size_t n)
{
    cJSON *a;

    if (n > 0 && !v)
        return -EINVAL;
    a = cJSON_CreateArray();
    if (!a)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        cJSON *d = cJSON_CreateNumber((double)v[i]);
        if (!d || !cJSON_AddItemToArray(a, d)) {
            cJSON_Delete(d);
            cJSON_Delete(a);
            return -ENOMEM;
        }
    }
    return hidet__attr(r, name, a);
}

static int hidet__step(hidet_request *r, cJSON **list, const char *listname, int input,
                       const char *op, hidet_step **ret_step)
{
    cJSON *s;

    if (!r || !op || !*op)
        return -EINVAL;
    if (!*list && !(*list = cJSON_AddArrayToObject(r->root, listname)))
        return -ENOMEM;
    s = cJSON_CreateObject();
    if (!s)
        return -ENOMEM;
    if ((input >= 0 && !cJSON_AddNumberToObject(s, "input", input)) ||
        !cJSON_AddStringToObject(s, "op", op) || !cJSON_AddItemToArray(*list, s)) {
        cJSON_Delete(s);
        return -ENOMEM;
    }
    if (ret_step)
        *ret_step = (hidet_step *)s;
    return 0;
}

int hidet_request_epilogue(hidet_request *r, const char *op, hidet_step **ret_step)
{
    return hidet__step(r, r ? &r->epilogue : NULL, "epilogue", -1, op, ret_step);
}

int hidet_request_prologue(hidet_request *r, int input, const char *op, hidet_step **ret_step)
{
    if (input < 0)
        return -EINVAL;
    return hidet__step(r, r ? &r->prologue : NULL, "prologue", input, op, ret_step);
}

static int hidet__step_set(hidet_step *s, const char *name, cJSON *item)
{
    if (!s || !name || !*name || strcmp(name, "op") == 0) {
        cJSON_Delete(item);
        return -EINVAL;
    }
    return hidet__set((cJSON *)s, name, item);
}

int hidet_step_int(hidet_step *s, const char *name, int64_t v)
{
    return hidet__step_set(s, name, cJSON_CreateNumber((double)v));
}

int hidet_step_double(hidet_step *s, const char *name, double v)
{
    if (!isfinite(v))
        return -EINVAL;
    return hidet__step_set(s, name, cJSON_CreateNumber(v));
}

int hidet_step_string(hidet_step *s, const char *name, const char *v)
{
    if (!v)
        return -EINVAL;
    return hidet__step_set(s, name, cJSON_CreateString(v));
}

static int hidet__top_string(hidet_request *r, const char *name, const char *v)
{
    if (!r || !v || !*v)
        return -EINVAL;
    return hidet__set(r->root, name, cJSON_CreateString(v));
}

int hidet_request_set_arch(hidet_request *r, const char *arch)
{
    return hidet__top_string(r, "arch", arch);
}

int hidet_request_set_tune(hidet_request *r, const char *tune)
{
    return hidet__top_string(r, "tune", tune);
}

int hidet_request_set_priority(hidet_request *r, const char *priority)
{
    return hidet__top_string(r, "priority", priority);
}

int hidet_request_set_wait(hidet_request *r, bool wait)
{
    if (!r)
        return -EINVAL;
    return hidet__set(r->root, "wait", cJSON_CreateBool(wait));
}

int hidet_request_set_budget(hidet_request *r, double seconds, int64_t candidates)
{
    cJSON *b;

    if (!r || !isfinite(seconds))
        return -EINVAL;
    b = cJSON_CreateObject();
    if (!b)
        return -ENOMEM;
    if ((seconds > 0 && !cJSON_AddNumberToObject(b, "seconds", seconds)) ||
        (candidates > 0 && !cJSON_AddNumberToObject(b, "candidates", (double)candidates))) {
        cJSON_Delete(b);
        return -ENOMEM;
    }
    return hidet__set(r->root, "budget", b);
}

int hidet_request_json(const hidet_request *r, char **ret)
{
    char *s, *copy;

    if (!r || !ret)
        return -EINVAL;
    s = cJSON_PrintUnformatted(r->root);
    if (!s)
        return -ENOMEM;
    /* Hand out malloc() memory, whatever allocator cJSON was built to use. */
    copy = strdup(s);
    cJSON_free(s);
    if (!copy)
        return -ENOMEM;
    *ret = copy;
    return 0;
}
