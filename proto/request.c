/* proto/request.c - kernel request JSON -> validated tuner_op; canonical op JSON. */
#include "proto/request.h"
#include "proto/dims.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

/* ---------------------------------------------------------------------------------------------
 * Names
 *
 * Ops, dtypes, steps, reduce kinds, tune modes and archs are op/'s vocabularies (op/op.h); only
 * the request language's own words live here. */

static const char *const prio_names[] = {"blocking", "normal", "background"};

const char *proto_priority_name(int priority)
{
    return priority >= 0 && priority < 3 ? prio_names[priority] : "?";
}

/* ---------------------------------------------------------------------------------------------
 * Errors */

int proto_fail(proto_error *e, int status, const char *code, const char *field, const char *fmt,
               ...)
{
    va_list ap;
    e->status = status;
    snprintf(e->code, sizeof(e->code), "%s", code);
    snprintf(e->field, sizeof(e->field), "%s", field ? field : "");
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof(e->message), fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* A wrong JSON type or a missing required field: the request is malformed (400). */
static int type_error(proto_error *e, const char *field, const char *what)
{
    return proto_fail(e, 400, "invalid_field", field, "%s must be %s", field[0] ? field : "the body",
                what);
}

/* ---------------------------------------------------------------------------------------------
 * JSON helpers */

/* Depth of nested arrays/objects, measured on the raw text so that a deeply nested body is
 * refused before cJSON recurses into it. Strings are skipped (brackets inside them don't count).
 * Returns -1 when a string contains an escaped NUL. */
static int json_depth(const char *s, size_t len)
{
    int depth = 0, max = 0;
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\') {
                /* cJSON would cut the string at an escaped NUL: "matmul\u0000x" must not pass
                 * as "matmul". */
                if (len - i >= 6 && memcmp(s + i, "\\u0000", 6) == 0)
                    return -1;
                i++;
            } else if (c == '"') {
                in_str = false;
            }
            continue;
        }
        if (c == '"') {
            in_str = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max)
                max = depth;
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return max;
}

/* Edit distance (Levenshtein, letters compared without case) between a and b, or a number
 * above cap as soon as it cannot be cap or less; names here are short (64 characters kept). */
static size_t edit_distance(const char *a, const char *b, size_t cap)
{
    size_t la = strnlen(a, 64), lb = strnlen(b, 64), row[65];
    if ((la > lb ? la - lb : lb - la) > cap)
        return cap + 1;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0], best = row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t sub = diag + (tolower((unsigned char)a[i - 1]) !=
                                 tolower((unsigned char)b[j - 1]));
            size_t v = up + 1 < row[j - 1] + 1 ? up + 1 : row[j - 1] + 1;
            row[j] = sub < v ? sub : v;
            diag = up;
            if (row[j] < best)
                best = row[j];
        }
        if (best > cap)
            return cap + 1;
    }
    return row[lb];
}

/* true when each '_'-separated word of abbr starts the same word of s, and they have as many
 * words: "trans_b" abbreviates "transpose_b" (two letters off by edit distance are few, four
 * are not). */
static bool abbreviates(const char *abbr, const char *s)
{
    while (*abbr && *s) {
        size_t a = strcspn(abbr, "_"), w = strcspn(s, "_");
        if (a == 0 || a > w || strncmp(abbr, s, a) != 0)
            return false;
        abbr += a;
        s += w;
        if ((*abbr == '_') != (*s == '_'))
            return false;
        if (*abbr)
            abbr++, s++;
    }
    return !*abbr && !*s;
}

const char *proto_closest_name(const char *s, const char *const *known)
{
    size_t len = strnlen(s, 64), cap = len <= 3 ? 1 : len <= 6 ? 2 : 3, best_d = cap + 1;
    const char *best = NULL;
    for (const char *const *k = known; *k; k++) {
        size_t d = edit_distance(s, *k, cap);
        if (d < best_d) {
            best_d = d;
            best = *k;
        }
    }
    for (const char *const *k = known; !best && *k; k++)
        if (strchr(*k, '_') && abbreviates(*k, s))
            best = *k;
    return best;
}

/* Rejects fields not in allowed (NULL-terminated) and duplicate names: a strict language means a
 * misspelt option is an error instead of silently taking its default. The error names the
 * closest allowed field when there is one. */
int proto_check_keys(const cJSON *obj, const char *const *allowed, const char *path,
                     proto_error *e)
{
    char field[96];
    for (const cJSON *c = obj->child; c; c = c->next) {
        bool ok = false;
        for (const char *const *a = allowed; *a; a++) {
            if (strcmp(c->string, *a) == 0) {
                ok = true;
                break;
            }
        }
        snprintf(field, sizeof(field), "%.40s%s%.40s", path, path[0] ? "." : "", c->string);
        if (!ok) {
            const char *near = proto_closest_name(c->string, allowed);
            return proto_fail(e, 400, "invalid_field", field, "unknown field \"%.64s\"%s%s%s",
                        c->string, near ? "; did you mean \"" : "", near ? near : "",
                        near ? "\"?" : "");
        }
        for (const cJSON *p = obj->child; p != c; p = p->next) {
            if (strcmp(p->string, c->string) == 0)
                return proto_fail(e, 400, "invalid_field", field, "duplicate field \"%.64s\"",
                            c->string);
        }
    }
    return 0;
}

/* An integral JSON number. Values beyond +-2^62 are clamped (every caller's range is far
 * smaller, so a clamped value is still out of range and rejected). */
static int json_int(const cJSON *v, const char *field, int64_t *ret, proto_error *e)
{
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble))
        return type_error(e, field, "an integer");
    double d = v->valuedouble;
    if (d > 4.6e18)
        *ret = INT64_C(1) << 62;
    else if (d < -4.6e18)
        *ret = -(INT64_C(1) << 62);
    else
        *ret = (int64_t)d;
    return 0;
}

static int json_int_range(const cJSON *v, const char *field, int64_t lo, int64_t hi, int *ret,
                          proto_error *e)
{
    int64_t x;
    int r = json_int(v, field, &x, e);
    if (r < 0)
        return r;
    if (x < lo || x > hi)
        return proto_fail(e, 422, "invalid_field", field, "%s must be between %lld and %lld", field,
                    (long long)lo, (long long)hi);
    *ret = (int)x;
    return 0;
}

static int json_bool(const cJSON *v, const char *field, bool *ret, proto_error *e)
{
    if (!cJSON_IsBool(v))
        return type_error(e, field, "true or false");
    *ret = cJSON_IsTrue(v);
    return 0;
}

static int json_finite(const cJSON *v, const char *field, double *ret, proto_error *e)
{
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return type_error(e, field, "a finite number");
    *ret = v->valuedouble;
    return 0;
}

static int json_string(const cJSON *v, const char *field, const char **ret, proto_error *e)
{
    if (!cJSON_IsString(v) || !v->valuestring)
        return type_error(e, field, "a string");
    *ret = v->valuestring;
    return 0;
}

/* Index of s in names[0..n), or -1. */
static int lookup(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

/* ---------------------------------------------------------------------------------------------
 * Shapes */

static int64_t shape_numel(const int64_t *shape, int rank)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        n *= shape[i];
        if (n > PROTO_MAX_NUMEL) /* dims are < 2^31, so this never overflows before the check */
            return PROTO_MAX_NUMEL + 1;
    }
    return n;
}

/* true when a tensor of shape a broadcasts (numpy rules, one way) to shape b. */
static bool broadcasts_to(const int64_t *a, int ra, const int64_t *b, int rb)
{
    if (ra > rb)
        return false;
    for (int i = 1; i <= ra; i++) {
        int64_t x = a[ra - i], y = b[rb - i];
        if (x != y && x != 1)
            return false;
    }
    return true;
}

/* Two-way numpy broadcast of (out, *rout) with b, in place. */
static bool broadcast_merge(int64_t *out, int *rout, const int64_t *b, int rb)
{
    int64_t res[TUNER_MAX_RANK];
    int r = *rout > rb ? *rout : rb;
    for (int i = 1; i <= r; i++) {
        int64_t x = i <= *rout ? out[*rout - i] : 1;
        int64_t y = i <= rb ? b[rb - i] : 1;
        if (x != y && x != 1 && y != 1)
            return false;
        res[r - i] = x == 1 ? y : x;
    }
    memcpy(out, res, sizeof(int64_t) * (size_t)r);
    *rout = r;
    return true;
}

/* op: the request's dims, which a shape entry may name (proto/dims.h). */
static int parse_tensor(const cJSON *t, const char *path, const tuner_op *op, tuner_tensor *ret, proto_error *e)
{
    static const char *const keys[] = {"shape", "dtype", "align", NULL};
    char field[96];
    int r;

    if (!cJSON_IsObject(t))
        return type_error(e, path, "an object {\"shape\": [...], \"dtype\": ...}");
    if ((r = proto_check_keys(t, keys, path, e)) < 0)
        return r;

    tuner_tensor out = {.align = 16};
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(t, "shape");
    snprintf(field, sizeof(field), "%.40s.shape", path);
    if (!shape)
        return type_error(e, field, "given");
    if (!cJSON_IsArray(shape))
        return type_error(e, field, "an array of integers");
    int rank = cJSON_GetArraySize(shape);
    if (rank == 0)
        return proto_fail(e, 422, "invalid_field", field, "%s must have at least one dimension", field);
    if (rank > TUNER_MAX_RANK)
        return proto_fail(e, 422, "limit_exceeded", field, "%s has rank %d; at most %d is supported",
                    field, rank, TUNER_MAX_RANK);
    int i = 0;
    for (const cJSON *d = shape->child; d; d = d->next, i++) {
        int64_t v;
        snprintf(field, sizeof(field), "%.40s.shape[%d]", path, i);
        if (cJSON_IsString(d)) {
            if ((r = proto__parse_named_axis(d, field, op, i, &out.sym[i], &out.shape[i], e)) < 0)
                return r;
            continue;
        }
        if ((r = json_int(d, field, &v, e)) < 0)
            return r;
        if (v < 0)
            return proto_fail(e, 422, "invalid_field", field,
                        "%s is %lld: a size known only at launch is named, not -1: write \"n\" there "
                        "and give its range at the top level, \"dims\": {\"n\": {\"min\": 1, "
                        "\"max\": 8192}} (docs/api.md, named dimensions)", field, (long long)v);
        if (v < 1)
            return proto_fail(e, 422, "invalid_field", field, "%s must be at least 1", field);
        if (v > PROTO_MAX_DIM)
            return proto_fail(e, 422, "limit_exceeded", field, "%s exceeds 2^31-1", field);
        out.shape[i] = v;
    }
    out.rank = rank;
    snprintf(field, sizeof(field), "%.40s.shape", path);
    if (shape_numel(out.shape, rank) > PROTO_MAX_NUMEL)
        return proto_fail(e, 422, "limit_exceeded", field, "%s has more than 2^31 elements", field);

    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "dtype");
    const char *s = NULL;
    snprintf(field, sizeof(field), "%.40s.dtype", path);
    if (!dt)
        return type_error(e, field, "given");
    if ((r = json_string(dt, field, &s, e)) < 0)
        return r;
    if (tuner_dtype_parse(s, &out.dtype) < 0)
        return proto_fail(e, 422, "unknown_dtype", field,
                          "unknown dtype \"%.32s\" (f16, bf16, f32, i32, i64, f8e4m3, f8e5m2; also "
                          "float16, half, fp16, bfloat16, float32, fp32, int32, int64, float8_e4m3fn, "
                          "float8_e5m2)", s);

    const cJSON *al = cJSON_GetObjectItemCaseSensitive(t, "align");
    if (al) {
        int a;
        snprintf(field, sizeof(field), "%.40s.align", path);
        if ((r = json_int_range(al, field, 1, 1 << 20, &a, e)) < 0)
            return r;
        if ((a & (a - 1)) != 0 || a < tuner_dtype_size(out.dtype))
            return proto_fail(e, 422, "invalid_field", field,
                        "%s must be a power of two no smaller than the element size", field);
        /* Templates only ask for up to 16 bytes, so larger guarantees mean the same kernel. */
        out.align = a > 16 ? 16 : a;
    }
    *ret = out;
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Fused steps */

typedef struct pstep {
    tuner_ew_step s;
    bool bias;      /* "bias": an add whose operand must be [N] */
    int target;     /* prologue only: the anchor input the step applies to */
    char path[64];  /* "epilogue[3]" for error fields */
} pstep;

typedef struct pchain {
    int n;
    pstep steps[TUNER_MAX_STEPS];
} pchain;

/* Fills a step from its name; no operand/params yet. Returns -1 for an unknown name. */
static int step_kind(const char *name, tuner_ew_kind *ret, bool *ret_bias)
{
    *ret_bias = false;
    if (strcmp(name, "bias") == 0) {
        *ret = TUNER_EW_ADD;
        *ret_bias = true;
        return 0;
    }
    /* "gelu_tanh" is the canonical JSON's name only: a request says gelu with
     * "approximate": "tanh" (docs/api.md), so there is one spelling per step. */
    if (strcmp(name, "gelu_tanh") == 0)
        return -1;
    return tuner_ew_parse(name, ret) < 0 ? -1 : 0;
}

int proto_fill_value(const cJSON *v, const char *field, double *ret, proto_error *e)
{
    if (cJSON_IsString(v) && v->valuestring && strcmp(v->valuestring, "-inf") == 0)
        *ret = -HUGE_VAL;
    else if (cJSON_IsString(v) && v->valuestring && strcmp(v->valuestring, "inf") == 0)
        *ret = HUGE_VAL;
    else if (cJSON_IsNumber(v) && isfinite(v->valuedouble))
        *ret = v->valuedouble;
    else
        return type_error(e, field, "a finite number, \"-inf\" or \"inf\"");
    return 0;
}

/* A mask step (op/op.h), past its "op": a comparison reads an input (its operand key) or a
 * constant ("value"), exactly one of them; where reads its condition there and the input it
 * takes where the condition is 0 from "other"; masked_fill reads its mask there and fills with
 * "value" (proto_fill_value: -inf is what attention masks use). */
static int parse_mask_step(const cJSON *o, const char *path, bool prologue, pstep *st, proto_error *e)
{
    char field[96];
    int r;
    const tuner_ew_kind k = st->s.kind;
    const char *operand_key = prologue ? "operand" : "input";
    const char *keys[5] = {"op", operand_key, k == TUNER_EW_WHERE ? "other" : "value", NULL, NULL};
    if (prologue)
        keys[3] = "input";
    if ((r = proto_check_keys(o, keys, path, e)) < 0)
        return r;
    if (prologue) {
        const cJSON *in = cJSON_GetObjectItemCaseSensitive(o, "input");
        snprintf(field, sizeof(field), "%.40s.input", path);
        if (!in)
            return type_error(e, field, "given (the anchor input this step applies to)");
        if ((r = json_int_range(in, field, 0, TUNER_MAX_INPUTS - 1, &st->target, e)) < 0)
            return r;
    }
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(o, operand_key);
    const cJSON *val = cJSON_GetObjectItemCaseSensitive(o, "value");
    snprintf(field, sizeof(field), "%.40s.%s", path, operand_key);
    if (tuner_ew_is_compare(k)) {
        if (in && val) {
            snprintf(field, sizeof(field), "%.40s.value", path);
            return proto_fail(e, 400, "invalid_field", field,
                              "%s compares with an input (%s) or a constant (value), not both",
                              tuner_ew_name(k), operand_key);
        }
        if (!in && !val)
            return type_error(e, field, "given (index of the input to compare with), or value (a constant)");
        if (!in) {
            snprintf(field, sizeof(field), "%.40s.value", path);
            return json_finite(val, field, &st->s.scalar, e);
        }
        return json_int_range(in, field, 0, TUNER_MAX_INPUTS - 1, &st->s.operand, e);
    }
    if (!in)
        return type_error(e, field, k == TUNER_EW_WHERE ? "given (index of the condition in inputs)"
                                                        : "given (index of the mask in inputs)");
    if ((r = json_int_range(in, field, 0, TUNER_MAX_INPUTS - 1, &st->s.operand, e)) < 0)
        return r;
    if (k == TUNER_EW_WHERE) {
        const cJSON *other = cJSON_GetObjectItemCaseSensitive(o, "other");
        snprintf(field, sizeof(field), "%.40s.other", path);
        if (!other)
            return type_error(e, field, "given (index of the input taken where the condition is 0)");
        return json_int_range(other, field, 0, TUNER_MAX_INPUTS - 1, &st->s.operand2, e);
    }
    snprintf(field, sizeof(field), "%.40s.value", path);
    if (!val)
        return type_error(e, field, "given (a finite number, \"-inf\" or \"inf\")");
    return proto_fill_value(val, field, &st->s.scalar, e);
}

/* One step object. In a prologue, "input" names the anchor input the step applies to and a binary
 * step's operand is "operand"; in an epilogue (and elementwise "ops") the operand is "input". */
static int parse_step(const cJSON *o, const char *path, bool prologue, pstep *ret, proto_error *e)
{
    char field[96];
    const char *name = NULL;
    int r;

    if (!cJSON_IsObject(o))
        return type_error(e, path, "an object {\"op\": ...}");
    pstep st = {.s = {.operand = -1}, .target = -1};
    snprintf(st.path, sizeof(st.path), "%s", path);

    const cJSON *opv = cJSON_GetObjectItemCaseSensitive(o, "op");
    snprintf(field, sizeof(field), "%.40s.op", path);
    if (!opv)
        return type_error(e, field, "given");
    if ((r = json_string(opv, field, &name, e)) < 0)
        return r;
    /* Parameters start at their defaults; an alias (relu6, hardtanh) presets clamp's. */
    bool alias = false, fixed = false;
    if (tuner_ew_alias(name, &st.s, &fixed) == 0) {
        alias = true;
    } else {
        if (step_kind(name, &st.s.kind, &st.bias) < 0) {
            char known[384];
            return proto_fail(e, 422, "unknown_op", field, "unknown step \"%.32s\" (steps: %s)",
                              name, tuner_step_names(known, sizeof(known)));
        }
        const tuner_ew_param *prm;
        int np = tuner_ew_params(st.s.kind, &prm);
        for (int i = 0; i < np; i++)
            *tuner_ew_slot(&st.s, i) = prm[i].dflt;
    }
    if (tuner_ew_is_mask(st.s.kind)) {
        if ((r = parse_mask_step(o, path, prologue, &st, e)) < 0)
            return r;
        *ret = st;
        return 0;
    }

    const char *operand_key = prologue ? "operand" : "input";
    const char *keys[5] = {"op", NULL, NULL, NULL, NULL};
    int nk = 1;
    if (prologue)
        keys[nk++] = "input";
    const tuner_ew_param *prm = NULL;
    int np = fixed ? 0 : tuner_ew_params(st.s.kind, &prm);
    if (TUNER_EW_IS_BINARY(st.s.kind))
        keys[nk++] = operand_key;
    else if (st.s.kind == TUNER_EW_GELU_ERF)
        keys[nk++] = "approximate";
    else if (st.s.kind == TUNER_EW_CAST) {
        keys[nk++] = "dtype";
        if (!prologue)
            keys[nk++] = "amax";
    }
    for (int i = 0; i < np; i++)
        keys[nk++] = prm[i].key;
    if ((r = proto_check_keys(o, keys, path, e)) < 0)
        return r;
    /* Numeric parameters: finite numbers; a required one must be given, and a clamp needs a
     * bound (PyTorch refuses clamp() with neither). */
    bool given = false;
    for (int i = 0; i < np; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, prm[i].key);
        snprintf(field, sizeof(field), "%.40s.%s", path, prm[i].key);
        if (!v && prm[i].required)
            return type_error(e, field, "given");
        if (v && (r = json_finite(v, field, tuner_ew_slot(&st.s, i), e)) < 0)
            return r;
        given = given || v;
    }
    if (st.s.kind == TUNER_EW_CLAMP && !alias && !given) {
        snprintf(field, sizeof(field), "%.40s.min", path);
        return proto_fail(e, 422, "invalid_field", field, "clamp needs min, max or both");
    }

    if (prologue) {
        const cJSON *in = cJSON_GetObjectItemCaseSensitive(o, "input");
        snprintf(field, sizeof(field), "%.40s.input", path);
        if (!in)
            return type_error(e, field, "given (the anchor input this step applies to)");
        if ((r = json_int_range(in, field, 0, TUNER_MAX_INPUTS - 1, &st.target, e)) < 0)
            return r;
    }
    if (TUNER_EW_IS_BINARY(st.s.kind)) {
        const cJSON *in = cJSON_GetObjectItemCaseSensitive(o, operand_key);
        snprintf(field, sizeof(field), "%.40s.%s", path, operand_key);
        if (!in)
            return type_error(e, field, "given (index of the operand in inputs)");
        if ((r = json_int_range(in, field, 0, TUNER_MAX_INPUTS - 1, &st.s.operand, e)) < 0)
            return r;
    } else if (st.s.kind == TUNER_EW_GELU_ERF) {
        const cJSON *ap = cJSON_GetObjectItemCaseSensitive(o, "approximate");
        if (ap) {
            const char *s = NULL;
            snprintf(field, sizeof(field), "%.40s.approximate", path);
            if ((r = json_string(ap, field, &s, e)) < 0)
                return r;
            if (strcmp(s, "tanh") == 0)
                st.s.kind = TUNER_EW_GELU_TANH;
            else if (strcmp(s, "none") != 0)
                return proto_fail(e, 422, "invalid_field", field,
                            "approximate must be \"none\" or \"tanh\"");
        }
    } else if (st.s.kind == TUNER_EW_CAST) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "dtype");
        const char *s = NULL;
        snprintf(field, sizeof(field), "%.40s.dtype", path);
        if (!v)
            return type_error(e, field, "given");
        if ((r = json_string(v, field, &s, e)) < 0)
            return r;
        if (tuner_dtype_parse(s, &st.s.dtype) < 0)
            return proto_fail(e, 422, "unknown_dtype", field,
                              "unknown dtype \"%.32s\" (f16, bf16, f32)", s);
        if (prologue)
            return proto_fail(e, 422, "invalid_field", field,
                        "cast is not allowed in a prologue (the anchor's input dtype is given by "
                        "inputs)");
        if (tuner_dtype_is_int(st.s.dtype))
            return proto_fail(e, 422, "invalid_field", field,
                        "a cast converts to f16, bf16 or f32; no kernel writes %s", tuner_dtype_name(st.s.dtype));
        /* FP8: only as an FP8 matmul's last epilogue step (check_fp8_casts). */
        const cJSON *am = cJSON_GetObjectItemCaseSensitive(o, "amax");
        if (am) {
            /* The input the quantize step raises to its largest |value| (op/op.h; checked against
             * the op by check_fp8_casts). */
            int idx;
            snprintf(field, sizeof(field), "%.40s.amax", path);
            if ((r = json_int_range(am, field, 0, TUNER_MAX_INPUTS - 1, &idx, e)) < 0)
                return r;
            st.s.amax = idx + 1;
        }
    }
    *ret = st;
    return 0;
}

/* Appends the steps of a JSON array (name gives the path prefix) to chain. */
static int parse_steps(const cJSON *arr, const char *name, bool prologue, pchain *chain,
                       proto_error *e)
{
    char path[64];
    int r, i = 0;
    if (!cJSON_IsArray(arr))
        return type_error(e, name, "an array of steps");
    for (const cJSON *s = arr->child; s; s = s->next, i++) {
        if (chain->n >= TUNER_MAX_STEPS)
            return proto_fail(e, 422, "limit_exceeded", name, "at most %d fused steps are allowed",
                        TUNER_MAX_STEPS);
        snprintf(path, sizeof(path), "%.32s[%d]", name, i);
        if ((r = parse_step(s, path, prologue, &chain->steps[chain->n], e)) < 0)
            return r;
        chain->n++;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Op attributes and shape inference */

/* An int or [h, w]. */
static int parse_pair(const cJSON *v, const char *field, int lo, int hi, int out[2],
                      proto_error *e)
{
    char f[96];
    int r;
    if (cJSON_IsNumber(v)) {
        if ((r = json_int_range(v, field, lo, hi, &out[0], e)) < 0)
            return r;
        out[1] = out[0];
        return 0;
    }
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2)
        return type_error(e, field, "an integer or [h, w]");
    for (int i = 0; i < 2; i++) {
        snprintf(f, sizeof(f), "%.40s[%d]", field, i);
        if ((r = json_int_range(cJSON_GetArrayItem(v, i), f, lo, hi, &out[i], e)) < 0)
            return r;
    }
    return 0;
}

/* An array of 1..TUNER_MAX_RANK integers in [lo, hi]. */
static int json_dims(const cJSON *v, const char *field, int64_t lo, int64_t hi, int64_t *out,
                     int *ret_n, proto_error *e)
{
    char f[96];
    int r;
    if (!cJSON_IsArray(v))
        return type_error(e, field, "an array of integers");
    int n = cJSON_GetArraySize(v);
    if (n < 1 || n > TUNER_MAX_RANK)
        return proto_fail(e, 422, "invalid_field", field, "%s must have 1 to %d entries", field,
                    TUNER_MAX_RANK);
    int i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        int64_t x;
        snprintf(f, sizeof(f), "%.40s[%d]", field, i);
        if ((r = json_int(c, f, &x, e)) < 0)
            return r;
        if (x < lo || x > hi)
            return proto_fail(e, 422, "invalid_field", f, "%s must be between %lld and %lld", f,
                        (long long)lo, (long long)hi);
        out[i] = x;
    }
    *ret_n = n;
    return 0;
}

/* A dynamic copy's stride or offset: an integer, or (with "dims") a product of an optional
 * coefficient and names, "768*s" - its value at the names' max in *ret, the names in *sym. */
static int json_scaled(const cJSON *v, const char *field, const tuner_op *op, int64_t *ret, uint8_t *sym,
                       proto_error *e)
{
    *sym = 0;
    if (!cJSON_IsString(v) || op->n_dims == 0)
        return json_int(v, field, ret, e);
    const char *s = v->valuestring;
    int64_t coef = 1, val = 1;
    unsigned m = 0;
    bool any_number = false;
    const char *p = s;
    while (*p) {
        const char *q = strchr(p, '*');
        const size_t n = q ? (size_t)(q - p) : strlen(p);
        char part[TUNER_DIM_NAME_LEN + 24];
        if (n == 0 || n >= sizeof(part))
            return proto_fail(e, 422, "invalid_field", field,
                              "%s is not an integer nor a coefficient times names (\"768*s\")", field);
        memcpy(part, p, n);
        part[n] = '\0';
        if (isdigit((unsigned char)part[0])) {
            char *end = NULL;
            const long long c = strtoll(part, &end, 10);
            if (*end || any_number || c < 1 || c > PROTO_MAX_NUMEL)
                return proto_fail(e, 422, "invalid_field", field,
                                  "%s: one coefficient, 1 to 2^31-1, then names (\"768*s\")", field);
            coef = c;
            any_number = true;
        } else if (proto__add_name(op, part, field, &m, &val, e) < 0) {
            return -EINVAL;
        }
        if (coef * val > PROTO_MAX_NUMEL)
            return proto_fail(e, 422, "invalid_field", field, "%s exceeds 2^31-1 at the names' max", field);
        p = q ? q + 1 : p + n;
        if (q && !*p)
            return proto_fail(e, 422, "invalid_field", field, "%s ends with '*'", field);
    }
    if (!m)
        return proto_fail(e, 422, "invalid_field", field, "%s names no dim: write a number", field);
    *ret = coef * val;
    *sym = (uint8_t)m;
    return 0;
}

/* copy: the output's shape (default x's), element strides into x (default: dense row-major
 * strides of the output's shape) and an element offset (default 0). The output's shape is set
 * here; infer_output checks that every element read lies inside x. With "dims", the shape may
 * hold names and the strides and offset coefficients times names (json_scaled). */
static int parse_copy_attrs(const cJSON *attrs, tuner_op *op, proto_error *e)
{
    const cJSON *v;
    int r, rank = op->inputs[0].rank, ns = 0;
    int64_t shape[TUNER_MAX_RANK], strides[TUNER_MAX_RANK];
    uint8_t shape_sym[TUNER_MAX_RANK] = {0}, stride_sym[TUNER_MAX_RANK] = {0}, offset_sym = 0;
    memcpy(shape, op->inputs[0].shape, sizeof(shape));
    memcpy(shape_sym, op->inputs[0].sym, sizeof(shape_sym));
    if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "shape"))) {
        bool named = false;
        for (const cJSON *c = cJSON_IsArray(v) ? v->child : NULL; c; c = c->next)
            named = named || cJSON_IsString(c);
        memset(shape_sym, 0, sizeof(shape_sym));
        if (!named || op->n_dims == 0) {
            if ((r = json_dims(v, "attrs.shape", 1, PROTO_MAX_DIM, shape, &rank, e)) < 0)
                return r;
        } else {
            rank = cJSON_GetArraySize(v);
            if (rank < 1 || rank > TUNER_MAX_RANK)
                return proto_fail(e, 422, "invalid_field", "attrs.shape", "attrs.shape must have 1 to %d entries",
                                  TUNER_MAX_RANK);
            int i = 0;
            for (const cJSON *c = v->child; c; c = c->next, i++) {
                char f[48];
                snprintf(f, sizeof(f), "attrs.shape[%d]", i);
                if (cJSON_IsString(c))
                    r = proto__parse_named_axis(c, f, op, i, &shape_sym[i], &shape[i], e);
                else if ((r = json_int(c, f, &shape[i], e)) == 0 && (shape[i] < 1 || shape[i] > PROTO_MAX_DIM))
                    r = proto_fail(e, 422, "invalid_field", f, "%s must be between 1 and %lld", f,
                                   (long long)PROTO_MAX_DIM);
                if (r < 0)
                    return r;
            }
        }
    }
    int64_t dense = 1;
    unsigned dense_sym = 0;
    for (int d = rank - 1; d >= 0; d--) {
        strides[d] = dense;
        stride_sym[d] = (uint8_t)dense_sym;
        dense *= shape[d];
        dense_sym |= shape_sym[d];
        if (dense > PROTO_MAX_NUMEL)
            return proto_fail(e, 422, "limit_exceeded", "attrs.shape",
                        "attrs.shape has more than 2^31 elements");
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "strides"))) {
        if (!cJSON_IsArray(v))
            return type_error(e, "attrs.strides", "an array of integers");
        ns = cJSON_GetArraySize(v);
        if (ns < 1 || ns > TUNER_MAX_RANK)
            return proto_fail(e, 422, "invalid_field", "attrs.strides", "attrs.strides must have 1 to %d entries",
                              TUNER_MAX_RANK);
        if (ns != rank)
            return proto_fail(e, 422, "invalid_field", "attrs.strides",
                        "attrs.strides needs one stride per output dimension (%d)", rank);
        int i = 0;
        for (const cJSON *c = v->child; c; c = c->next, i++) {
            char f[48];
            snprintf(f, sizeof(f), "attrs.strides[%d]", i);
            if ((r = json_scaled(c, f, op, &strides[i], &stride_sym[i], e)) < 0)
                return r;
            if (strides[i] < 0 || strides[i] > PROTO_MAX_NUMEL)
                return proto_fail(e, 422, "invalid_field", f, "%s must be between 0 and %lld", f,
                                  (long long)PROTO_MAX_NUMEL);
        }
    }
    int64_t offset = 0;
    if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "offset"))) {
        if ((r = json_scaled(v, "attrs.offset", op, &offset, &offset_sym, e)) < 0)
            return r;
        if (offset < 0 || offset >= PROTO_MAX_NUMEL)
            return proto_fail(e, 422, "invalid_field", "attrs.offset",
                        "attrs.offset must be between 0 and 2^31-1");
    }
    /* Constant padding: pad_lower/pad_upper (per output dim, >= 0) and pad_value. */
    int64_t lower[TUNER_MAX_RANK] = {0}, upper[TUNER_MAX_RANK] = {0};
    double value = 0;
    bool padded = false;
    static const char *const pad_keys[] = {"pad_lower", "pad_upper"};
    for (int k = 0; k < 2; k++) {
        int np = 0;
        if (!(v = cJSON_GetObjectItemCaseSensitive(attrs, pad_keys[k])))
            continue;
        char f[32];
        snprintf(f, sizeof(f), "attrs.%s", pad_keys[k]);
        if ((r = json_dims(v, f, 0, PROTO_MAX_DIM, k ? upper : lower, &np, e)) < 0)
            return r;
        if (np != rank)
            return proto_fail(e, 422, "invalid_field", f,
                        "%s needs one entry per output dimension (%d)", f, rank);
    }
    for (int d = 0; d < rank; d++) {
        padded = padded || lower[d] || upper[d];
        if (lower[d] + upper[d] >= shape[d])
            return proto_fail(e, 422, "invalid_field", "attrs.pad_lower",
                        "the padding of dimension %d (%lld + %lld) leaves nothing of its size %lld to copy",
                        d, (long long)lower[d], (long long)upper[d], (long long)shape[d]);
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "pad_value"))) {
        if ((r = json_finite(v, "attrs.pad_value", &value, e)) < 0)
            return r;
        if (!padded)
            return proto_fail(e, 422, "invalid_field", "attrs.pad_value",
                        "attrs.pad_value needs a padding (pad_lower or pad_upper with an entry above 0)");
    }
    op->attrs.copy.padded = padded;
    memcpy(op->attrs.copy.pad_lower, lower, sizeof(lower));
    memcpy(op->attrs.copy.pad_upper, upper, sizeof(upper));
    op->attrs.copy.pad_value = value;
    op->output.rank = rank;
    memset(op->output.shape, 0, sizeof(op->output.shape));
    memcpy(op->output.shape, shape, sizeof(int64_t) * (size_t)rank);
    op->attrs.copy.offset = offset;
    memset(op->attrs.copy.strides, 0, sizeof(op->attrs.copy.strides));
    memcpy(op->attrs.copy.strides, strides, sizeof(int64_t) * (size_t)rank);
    /* (proto__check_named refuses names on a padded copy) */
    memset(op->attrs.copy.stride_sym, 0, sizeof(op->attrs.copy.stride_sym));
    memset(op->attrs.copy.shape_sym, 0, sizeof(op->attrs.copy.shape_sym));
    if (op->n_dims > 0) {
        memcpy(op->attrs.copy.stride_sym, stride_sym, (size_t)rank);
        memcpy(op->attrs.copy.shape_sym, shape_sym, (size_t)rank);
        op->attrs.copy.offset_sym = offset_sym;
    }
    return 0;
}

/* pool2d: "kind" (max, avg, adaptive_avg) and the attributes of that kind, PyTorch's defaults
 * (stride = kernel_size, padding 0, dilation 1, ceil_mode false, count_include_pad true).
 * An attribute the kind does not have is refused by name (avg_pool2d has no dilation,
 * max_pool2d no count_include_pad, adaptive_avg only output_size). adaptive_avg's output_size
 * is kept in op->output.shape[0..1] until infer_output builds the output. */
static int parse_pool_attrs(const cJSON *attrs, tuner_op *op, proto_error *e)
{
    enum { MX = 1 << TUNER_POOL_MAX, AV = 1 << TUNER_POOL_AVG, AD = 1 << TUNER_POOL_ADAPTIVE_AVG };
    static const struct {
        const char *key, *kinds;
        int mask;
    } only_of[] = {
        {"kernel_size", "max and avg", MX | AV}, {"stride", "max and avg", MX | AV},
        {"padding", "max and avg", MX | AV},     {"ceil_mode", "max and avg", MX | AV},
        {"dilation", "max", MX},                 {"count_include_pad", "avg", AV},
        {"output_size", "adaptive_avg", AD},
    };
    const cJSON *v;
    const char *s = NULL;
    int r;
    char field[64];
    if (!(v = cJSON_GetObjectItemCaseSensitive(attrs, "kind")))
        return type_error(e, "attrs.kind", "given (\"max\", \"avg\" or \"adaptive_avg\")");
    if ((r = json_string(v, "attrs.kind", &s, e)) < 0)
        return r;
    tuner_pool_kind kind;
    if (tuner_pool_parse(s, &kind) < 0)
        return proto_fail(e, 422, "invalid_field", "attrs.kind",
                    "attrs.kind must be \"max\", \"avg\" or \"adaptive_avg\"");
    for (size_t i = 0; i < sizeof(only_of) / sizeof(only_of[0]); i++) {
        if (!cJSON_GetObjectItemCaseSensitive(attrs, only_of[i].key) || (only_of[i].mask & (1 << kind)))
            continue;
        snprintf(field, sizeof(field), "attrs.%s", only_of[i].key);
        return proto_fail(e, 422, "invalid_field", field, "%s applies to %s pooling only, not %s",
                    only_of[i].key, only_of[i].kinds, s);
    }
    op->attrs.pool2d.kind = kind;
    if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "layout"))) {
        if ((r = json_string(v, "attrs.layout", &s, e)) < 0)
            return r;
        if (strcmp(s, "nchw") == 0)
            op->attrs.pool2d.nchw = true;
        else if (strcmp(s, "nhwc") != 0)
            return proto_fail(e, 422, "invalid_field", "attrs.layout",
                        "layout must be \"nhwc\" or \"nchw\"");
    }
    if (kind == TUNER_POOL_ADAPTIVE_AVG) {
        int out[2];
        if (!(v = cJSON_GetObjectItemCaseSensitive(attrs, "output_size")))
            return type_error(e, "attrs.output_size", "given (an integer or [h, w]; 1 is global average pooling)");
        if ((r = parse_pair(v, "attrs.output_size", 1, 65535, out, e)) < 0)
            return r;
        op->output.shape[0] = out[0];
        op->output.shape[1] = out[1];
        return 0;
    }
    int *k = op->attrs.pool2d.kernel, *st = op->attrs.pool2d.stride, *pd = op->attrs.pool2d.pad,
        *dl = op->attrs.pool2d.dilation;
    if (!(v = cJSON_GetObjectItemCaseSensitive(attrs, "kernel_size")))
        return type_error(e, "attrs.kernel_size", "given (an integer or [h, w])");
    if ((r = parse_pair(v, "attrs.kernel_size", 1, 65535, k, e)) < 0)
        return r;
    st[0] = k[0], st[1] = k[1];
    dl[0] = dl[1] = 1;
    op->attrs.pool2d.count_include_pad = kind == TUNER_POOL_AVG;
    if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "stride")) &&
        (r = parse_pair(v, "attrs.stride", 1, 65535, st, e)) < 0)
        return r;
    if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "padding")) &&
        (r = parse_pair(v, "attrs.padding", 0, 65535, pd, e)) < 0)
        return r;
    if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "dilation")) &&
        (r = parse_pair(v, "attrs.dilation", 1, 65535, dl, e)) < 0)
        return r;
    if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "ceil_mode")) &&
        (r = json_bool(v, "attrs.ceil_mode", &op->attrs.pool2d.ceil_mode, e)) < 0)
        return r;
    if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "count_include_pad")) &&
        (r = json_bool(v, "attrs.count_include_pad", &op->attrs.pool2d.count_include_pad, e)) < 0)
        return r;
    /* PyTorch refuses padding above half the kernel: a window could lie wholly in the padding. */
    for (int d = 0; d < 2; d++)
        if (pd[d] > k[d] / 2) {
            snprintf(field, sizeof(field), "attrs.padding[%d]", d);
            return proto_fail(e, 422, "invalid_field", field,
                        "padding %d is more than half the kernel size %d (PyTorch refuses it too)", pd[d], k[d]);
        }
    return 0;
}

/* reduce's "axes": several axes at once, in any order, each once; one kernel reduces a range of
 * consecutive axes (a reshaped view's one axis), so the set must be one. Sets axis (the first,
 * normalised) and naxes. */
static int parse_reduce_axes(const cJSON *attrs, const cJSON *v, tuner_op *op, proto_error *e)
{
    int64_t axes[TUNER_MAX_RANK];
    int n = 0, r, rank = op->inputs[0].rank;
    char f[48];
    if (cJSON_GetObjectItemCaseSensitive(attrs, "axis"))
        return proto_fail(e, 422, "invalid_field", "attrs.axes", "give attrs.axis or attrs.axes, not both");
    if ((r = json_dims(v, "attrs.axes", -TUNER_MAX_RANK, TUNER_MAX_RANK - 1, axes, &n, e)) < 0)
        return r;
    bool seen[TUNER_MAX_RANK] = {false};
    int lo = rank, hi = -1;
    for (int k = 0; k < n; k++) {
        snprintf(f, sizeof(f), "attrs.axes[%d]", k);
        if (axes[k] < -rank || axes[k] >= rank)
            return proto_fail(e, 422, "invalid_field", f, "axis %lld is out of range for rank %d",
                        (long long)axes[k], rank);
        int a = (int)(axes[k] < 0 ? axes[k] + rank : axes[k]);
        if (seen[a])
            return proto_fail(e, 422, "invalid_field", f, "axis %d is given twice", a);
        seen[a] = true;
        lo = a < lo ? a : lo;
        hi = a > hi ? a : hi;
    }
    if (hi - lo + 1 != n)
        return proto_fail(e, 422, "invalid_field", "attrs.axes",
                    "a reduce kernel takes consecutive axes (such as [1, 2]: one axis of a reshaped "
                    "view); reduce other sets in steps (a graph's reduce node does)");
    op->attrs.reduce.axis = lo;
    op->attrs.reduce.naxes = n;
    return 0;
}

/* An FP8 matmul's attrs (op/op.h's MATMUL): out_dtype (f16, bf16 or f32; bf16 when absent, as
 * serving frameworks run their FP8 linear layers), scale_a ("none", "tensor", "row", "block") and
 * scale_b ("none", "tensor", "col", "block"), both "none" when absent. Whether the inputs are FP8
 * at all is infer_matmul's check (inputs are parsed first, but the keys are read here). */
static int parse_fp8_attrs(const cJSON *attrs, tuner_op *op, proto_error *e)
{
    const bool fp8 = tuner_dtype_is_fp8(op->inputs[0].dtype);
    const cJSON *v;
    const char *s = NULL;
    int r;
    op->attrs.matmul.out_dtype = fp8 ? TUNER_BF16 : op->inputs[0].dtype;
    op->attrs.matmul.scale_a = op->attrs.matmul.scale_b = TUNER_SCALE_NONE;
    op->attrs.matmul.fast_accum = fp8;
    if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "fast_accum"))) {
        if (!fp8)
            return proto_fail(e, 422, "invalid_field", "attrs.fast_accum",
                              "attrs.fast_accum applies to FP8 (f8e4m3, f8e5m2) inputs only; these are %s",
                              tuner_dtype_name(op->inputs[0].dtype));
        if ((r = json_bool(v, "attrs.fast_accum", &op->attrs.matmul.fast_accum, e)) < 0)
            return r;
    }
    static const char *const keys[] = {"out_dtype", "scale_a", "scale_b"};
    for (int i = 0; i < 3; i++) {
        char field[32];
        snprintf(field, sizeof(field), "attrs.%s", keys[i]);
        if (!(v = cJSON_GetObjectItemCaseSensitive(attrs, keys[i])))
            continue;
        if (!fp8)
            return proto_fail(e, 422, "invalid_field", field,
                              "%s applies to FP8 (f8e4m3, f8e5m2) inputs only; these are %s", field,
                              tuner_dtype_name(op->inputs[0].dtype));
        if ((r = json_string(v, field, &s, e)) < 0)
            return r;
        if (i == 0) {
            tuner_dtype dt;
            if (tuner_dtype_parse(s, &dt) < 0 || (dt != TUNER_F16 && dt != TUNER_BF16 && dt != TUNER_F32))
                return proto_fail(e, 422, "invalid_field", field,
                                  "an FP8 matmul writes f16, bf16 or f32 (fp32 accumulation), not \"%.32s\"", s);
            op->attrs.matmul.out_dtype = dt;
            continue;
        }
        tuner_scale_kind k;
        const tuner_scale_kind vec = i == 1 ? TUNER_SCALE_ROW : TUNER_SCALE_COL;
        if (tuner_scale_parse(s, &k) < 0 || (k != TUNER_SCALE_NONE && k != TUNER_SCALE_TENSOR && k != vec &&
                                             k != TUNER_SCALE_BLOCK))
            return proto_fail(e, 422, "invalid_field", field, "%s must be \"none\", \"tensor\", \"%s\" or \"block\", not \"%.32s\"",
                              field, tuner_scale_name(vec), s);
        *(i == 1 ? &op->attrs.matmul.scale_a : &op->attrs.matmul.scale_b) = k;
    }
    if ((op->attrs.matmul.scale_a == TUNER_SCALE_BLOCK) != (op->attrs.matmul.scale_b == TUNER_SCALE_BLOCK))
        return proto_fail(e, 422, "invalid_field",
                          op->attrs.matmul.scale_a == TUNER_SCALE_BLOCK ? "attrs.scale_b" : "attrs.scale_a",
                          "per-block scales go together: scale_a \"block\" (1x128) with scale_b \"block\" (128x128)");
    /* Per-block scales promote every k block: one spelling, one cache key. */
    if (op->attrs.matmul.scale_a == TUNER_SCALE_BLOCK)
        op->attrs.matmul.fast_accum = false;
    return 0;
}

static int parse_attrs(const cJSON *attrs, tuner_op *op, int *softmax_axis, pchain *ew,
                       proto_error *e)
{
    static const char *const matmul_keys[] = {"trans_a", "trans_b", "allow_tf32", "out_dtype", "scale_a", "scale_b",
                                              "fast_accum", NULL};
    static const char *const conv_keys[] = {"stride", "padding", "dilation", "groups", "layout",
                                            NULL};
    static const char *const softmax_keys[] = {"axis", "log", NULL};
    static const char *const norm_keys[] = {"eps", NULL};
    static const char *const reduce_keys[] = {"kind", "axis", "keepdim", "axes", NULL};
    static const char *const ew_keys[] = {"ops", "fn", NULL};
    static const char *const copy_keys[] = {"shape", "strides", "offset", "pad_lower", "pad_upper",
                                            "pad_value", NULL};
    static const char *const concat_keys[] = {"axis", NULL};
    static const char *const pool_keys[] = {"kind", "kernel_size", "stride", "padding", "dilation",
                                            "ceil_mode", "count_include_pad", "output_size",
                                            "layout", NULL};
    static const char *const gather_keys[] = {"axis", NULL};
    static const char *const attention_keys[] = {"causal", "scale", "layout", "kv_heads", NULL};
    static const char *const *const keys[TUNER_OP_COUNT] = {
        matmul_keys, conv_keys, softmax_keys, norm_keys, norm_keys, reduce_keys, ew_keys,
        copy_keys, concat_keys, pool_keys,
        [TUNER_OP_GATHER] = gather_keys,
        [TUNER_OP_ATTENTION] = attention_keys,
    };
    cJSON empty = {.type = cJSON_Object};
    const cJSON *v;
    const char *s = NULL;
    int r;

    if (!attrs)
        attrs = &empty;
    if (!cJSON_IsObject(attrs))
        return type_error(e, "attrs", "an object");
    if ((r = proto_check_keys(attrs, keys[op->kind], "attrs", e)) < 0)
        return r;

    switch (op->kind) {
    case TUNER_OP_MATMUL:
        op->attrs.matmul.allow_tf32 = true;
        if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "trans_a")) &&
            (r = json_bool(v, "attrs.trans_a", &op->attrs.matmul.trans_a, e)) < 0)
            return r;
        if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "trans_b")) &&
            (r = json_bool(v, "attrs.trans_b", &op->attrs.matmul.trans_b, e)) < 0)
            return r;
        if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "allow_tf32")) &&
            (r = json_bool(v, "attrs.allow_tf32", &op->attrs.matmul.allow_tf32, e)) < 0)
            return r;
        if ((r = parse_fp8_attrs(attrs, op, e)) < 0)
            return r;
        break;
    case TUNER_OP_CONV2D:
        op->attrs.conv2d.stride[0] = op->attrs.conv2d.stride[1] = 1;
        op->attrs.conv2d.dilation[0] = op->attrs.conv2d.dilation[1] = 1;
        op->attrs.conv2d.groups = 1;
        if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "stride")) &&
            (r = parse_pair(v, "attrs.stride", 1, 65535, op->attrs.conv2d.stride, e)) < 0)
            return r;
        if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "padding")) &&
            (r = parse_pair(v, "attrs.padding", 0, 65535, op->attrs.conv2d.pad, e)) < 0)
            return r;
        if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "dilation")) &&
            (r = parse_pair(v, "attrs.dilation", 1, 65535, op->attrs.conv2d.dilation, e)) < 0)
            return r;
        if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "groups")) &&
            (r = json_int_range(v, "attrs.groups", 1, 65535, &op->attrs.conv2d.groups, e)) < 0)
            return r;
        if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "layout"))) {
            if ((r = json_string(v, "attrs.layout", &s, e)) < 0)
                return r;
            if (strcmp(s, "nchw") == 0)
                op->attrs.conv2d.nchw = true;
            else if (strcmp(s, "nhwc") != 0)
                return proto_fail(e, 422, "invalid_field", "attrs.layout",
                            "layout must be \"nhwc\" or \"nchw\"");
        }
        break;
    case TUNER_OP_SOFTMAX:
        *softmax_axis = -1;
        if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "axis")) &&
            (r = json_int_range(v, "attrs.axis", -TUNER_MAX_RANK, TUNER_MAX_RANK, softmax_axis,
                                e)) < 0)
            return r;
        if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "log")) &&
            (r = json_bool(v, "attrs.log", &op->attrs.softmax.log, e)) < 0)
            return r;
        break;
    case TUNER_OP_LAYERNORM:
    case TUNER_OP_RMSNORM:
        op->attrs.norm.eps = op->kind == TUNER_OP_LAYERNORM ? 1e-5 : 1e-6;
        if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "eps"))) {
            if ((r = json_finite(v, "attrs.eps", &op->attrs.norm.eps, e)) < 0)
                return r;
            if (!(op->attrs.norm.eps > 0 && op->attrs.norm.eps < 1))
                return proto_fail(e, 422, "invalid_field", "attrs.eps", "eps must be in (0, 1)");
        }
        break;
    case TUNER_OP_REDUCE:
        op->attrs.reduce.kind = TUNER_REDUCE_SUM;
        op->attrs.reduce.axis = -1; /* normalised once the rank is known */
        if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "kind"))) {
            if ((r = json_string(v, "attrs.kind", &s, e)) < 0)
                return r;
            if (tuner_reduce_parse(s, &op->attrs.reduce.kind) < 0)
                return proto_fail(e, 422, "invalid_field", "attrs.kind",
                            "kind must be \"sum\", \"mean\" or \"max\"");
        }
        if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "axis")) &&
            (r = json_int_range(v, "attrs.axis", -TUNER_MAX_RANK, TUNER_MAX_RANK,
                                &op->attrs.reduce.axis, e)) < 0)
            return r;
        if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "keepdim")) &&
            (r = json_bool(v, "attrs.keepdim", &op->attrs.reduce.keepdim, e)) < 0)
            return r;
        op->attrs.reduce.naxes = 1;
        if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "axes")) && (r = parse_reduce_axes(attrs, v, op, e)) < 0)
            return r;
        break;
    case TUNER_OP_COPY:
        return parse_copy_attrs(attrs, op, e);
    case TUNER_OP_POOL2D:
        return parse_pool_attrs(attrs, op, e);
    case TUNER_OP_GATHER:
        op->attrs.gather.axis = 0; /* normalised once x's rank is known (infer_gather) */
        if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "axis")) &&
            (r = json_int_range(v, "attrs.axis", -TUNER_MAX_RANK, TUNER_MAX_RANK - 1, &op->attrs.gather.axis,
                                e)) < 0)
            return r;
        break;
    case TUNER_OP_ATTENTION:
        /* scale 0 stands for "not given" until infer_attention knows D (a given one is > 0). */
        op->attrs.attention.causal = false;
        op->attrs.attention.scale = 0;
        op->attrs.attention.bshd = false;
        op->attrs.attention.packed = false;
        op->attrs.attention.kv_heads = 0;
        if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "causal")) &&
            (r = json_bool(v, "attrs.causal", &op->attrs.attention.causal, e)) < 0)
            return r;
        if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "scale"))) {
            if ((r = json_finite(v, "attrs.scale", &op->attrs.attention.scale, e)) < 0)
                return r;
            if (!(op->attrs.attention.scale > 0))
                return proto_fail(e, 422, "invalid_field", "attrs.scale",
                            "scale must be > 0 (it multiplies q . k; leave it out for 1/sqrt(D))");
        }
        if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "layout"))) {
            if ((r = json_string(v, "attrs.layout", &s, e)) < 0)
                return r;
            if (strcmp(s, "bshd") == 0)
                op->attrs.attention.bshd = true;
            else if (strcmp(s, "bshd_packed") == 0)
                op->attrs.attention.bshd = op->attrs.attention.packed = true;
            else if (strcmp(s, "bhsd") != 0)
                return proto_fail(e, 422, "invalid_field", "attrs.layout",
                            "layout must be \"bhsd\" ([B,H,S,D], the default), \"bshd\" ([B,S,H,D]) or "
                            "\"bshd_packed\" (one qkv input [B,S,Hq+2*Hkv,D])");
        }
        /* kv_heads 0 stands for "not given" until infer_attention knows qkv's heads. */
        if ((v = cJSON_GetObjectItemCaseSensitive(attrs, "kv_heads"))) {
            if (!op->attrs.attention.packed)
                return proto_fail(e, 422, "invalid_field", "attrs.kv_heads",
                            "kv_heads belongs to layout \"bshd_packed\" only (the other layouts read Hkv from "
                            "k's shape)");
            if ((r = json_int_range(v, "attrs.kv_heads", 1, INT32_MAX, &op->attrs.attention.kv_heads, e)) < 0)
                return r;
        }
        break;
    case TUNER_OP_CONCAT:
        if (!(v = cJSON_GetObjectItemCaseSensitive(attrs, "axis")))
            return type_error(e, "attrs.axis", "given (the axis to join along)");
        if ((r = json_int_range(v, "attrs.axis", -TUNER_MAX_RANK, TUNER_MAX_RANK - 1,
                                &op->attrs.concat.axis, e)) < 0)
            return r;
        break;
    case TUNER_OP_ELEMENTWISE: {
        const cJSON *ops = cJSON_GetObjectItemCaseSensitive(attrs, "ops");
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(attrs, "fn");
        if (ops && fn)
            return proto_fail(e, 400, "invalid_field", "attrs.fn",
                        "give attrs.ops or attrs.fn, not both");
        if (ops && (r = parse_steps(ops, "attrs.ops", false, ew, e)) < 0)
            return r;
        if (fn) {
            pstep *st = &ew->steps[0];
            if ((r = json_string(fn, "attrs.fn", &s, e)) < 0)
                return r;
            *st = (pstep){.s = {.operand = -1}, .target = -1};
            snprintf(st->path, sizeof(st->path), "attrs.fn");
            bool fixed = false;
            if (tuner_ew_alias(s, &st->s, &fixed) == 0) {
                if (!fixed) /* hardtanh's bounds may be given: in attrs.ops */
                    return proto_fail(e, 422, "invalid_field", "attrs.fn",
                                "\"%s\" takes parameters: use attrs.ops", s);
            } else if (step_kind(s, &st->s.kind, &st->bias) < 0) {
                return proto_fail(e, 422, "unknown_op", "attrs.fn", "unknown function \"%.32s\"", s);
            } else {
                /* A parameter with a default (leaky_relu's slope) takes it; one without needs
                 * attrs.ops, as does a clamp, which needs a bound. */
                const tuner_ew_param *prm;
                int np = tuner_ew_params(st->s.kind, &prm);
                for (int i = 0; i < np; i++) {
                    if (prm[i].required || st->s.kind == TUNER_EW_CLAMP)
                        return proto_fail(e, 422, "invalid_field", "attrs.fn",
                                    "\"%s\" takes a parameter: use attrs.ops", s);
                    *tuner_ew_slot(&st->s, i) = prm[i].dflt;
                }
                if (st->s.kind == TUNER_EW_CAST)
                    return proto_fail(e, 422, "invalid_field", "attrs.fn",
                                "\"%s\" takes a parameter: use attrs.ops", s);
            }
            if (TUNER_EW_IS_BINARY(st->s.kind))
                st->s.operand = 1;
            /* A comparison compares x with inputs[1], as a binary step reads it; where and
             * masked_fill need their operands and value spelt out. */
            if (st->s.kind == TUNER_EW_WHERE || st->s.kind == TUNER_EW_MASKED_FILL)
                return proto_fail(e, 422, "invalid_field", "attrs.fn",
                                  "\"%s\" takes parameters: use attrs.ops", s);
            if (tuner_ew_is_compare(st->s.kind))
                st->s.operand = 1;
            ew->n = 1;
        }
        break;
    }
    default:
        break;
    }
    return 0;
}

/* An FP8 matmul's scale inputs (after A and B, scale_a's first): f32, of the shapes their modes
 * give (op/op.h's tuner_scale_kind), fixed sizes. */
static int check_fp8_scales(const tuner_op *op, int64_t m, int64_t n, int64_t kdim, proto_error *e)
{
    char field[64];
    int idx = 2;
    for (int w = 0; w < 2; w++) {
        const tuner_scale_kind k = w ? op->attrs.matmul.scale_b : op->attrs.matmul.scale_a;
        if (k == TUNER_SCALE_NONE)
            continue;
        const tuner_tensor *t = &op->inputs[idx];
        const char *who = w ? "scale_b" : "scale_a";
        snprintf(field, sizeof(field), "inputs[%d].dtype", idx);
        if (t->dtype != TUNER_F32)
            return proto_fail(e, 422, "invalid_field", field, "%s (inputs[%d]) must be f32, not %s", who, idx,
                              tuner_dtype_name(t->dtype));
        snprintf(field, sizeof(field), "inputs[%d].shape", idx);
        for (int d = 0; d < t->rank; d++)
            if (t->sym[d])
                return proto_fail(e, 422, "invalid_field", field, "%s (inputs[%d]) has fixed sizes", who, idx);
        if ((k == TUNER_SCALE_ROW || k == TUNER_SCALE_BLOCK) && tuner_op_is_dynamic(op))
            return proto_fail(e, 422, "unsupported", w ? "attrs.scale_b" : "attrs.scale_a",
                              "%s scales of a matmul with named dims are not supported yet (use \"tensor\")",
                              tuner_scale_name(k));
        bool ok;
        const int64_t len = k == TUNER_SCALE_ROW ? m : n;
        const int64_t kb = (kdim + 127) / 128;
        if (k == TUNER_SCALE_BLOCK) {
            if (op->inputs[0].rank != 2 || op->inputs[1].rank != 2)
                return proto_fail(e, 422, "unsupported", "attrs.scale_a",
                                  "per-block scales take rank-2 A and B (no batch)");
            const int64_t rows = w ? (n + 127) / 128 : m;
            if (t->rank != 2 || t->shape[0] != rows || t->shape[1] != kb)
                return proto_fail(e, 422, "shape_mismatch", field,
                                  "%s \"block\" (inputs[%d]) is %s: shape [%lld, %lld]", who, idx,
                                  w ? "one per 128x128 block of B, [ceil(N/128), ceil(K/128)]"
                                    : "one per row of A and 128 k, [M, ceil(K/128)]",
                                  (long long)rows, (long long)kb);
            idx++;
            continue;
        }
        if (k == TUNER_SCALE_TENSOR)
            ok = t->rank == 1 && t->shape[0] == 1;
        else if (k == TUNER_SCALE_ROW)
            ok = (t->rank == 1 && t->shape[0] == m) || (t->rank == 2 && t->shape[0] == m && t->shape[1] == 1);
        else
            ok = (t->rank == 1 && t->shape[0] == n) || (t->rank == 2 && t->shape[0] == 1 && t->shape[1] == n);
        if (!ok)
            return k == TUNER_SCALE_TENSOR
                       ? proto_fail(e, 422, "shape_mismatch", field, "%s \"tensor\" (inputs[%d]) is one value: shape [1]",
                                    who, idx)
                       : proto_fail(e, 422, "shape_mismatch", field,
                                    "%s \"%s\" (inputs[%d]) has one value per %s: shape [%lld] (or %s)", who,
                                    tuner_scale_name(k), idx, k == TUNER_SCALE_ROW ? "row of A" : "column of B",
                                    (long long)len, k == TUNER_SCALE_ROW ? "[M, 1]" : "[1, N]");
        idx++;
    }
    return 0;
}

static int infer_matmul(tuner_op *op, proto_error *e)
{
    const tuner_tensor *a = &op->inputs[0], *b = &op->inputs[1];
    char field[64];
    int r;
    if (a->rank < 2 || a->rank > 3)
        return proto_fail(e, 422, "invalid_field", "inputs[0].shape",
                    "matmul operands have rank 2 ([M,K]) or 3 ([batch,M,K])");
    if (b->rank < 2 || b->rank > 3)
        return proto_fail(e, 422, "invalid_field", "inputs[1].shape",
                    "matmul operands have rank 2 ([K,N]) or 3 ([batch,K,N])");
    const bool fp8 = tuner_dtype_is_fp8(a->dtype);
    if (fp8 != tuner_dtype_is_fp8(b->dtype) || (!fp8 && a->dtype != b->dtype))
        return proto_fail(e, 422, "invalid_field", "inputs[1].dtype",
                    "matmul operands must have the same dtype (or both be FP8: f8e4m3 or f8e5m2), not %s and %s",
                    tuner_dtype_name(a->dtype), tuner_dtype_name(b->dtype));
    /* wgmma and mma.sync take e4m3 x e4m3, e4m3 x e5m2, e5m2 x e4m3 and e5m2 x e5m2; the last has
     * too little precision on both sides for a GEMM anyone asks for (issue 41 lists three). */
    if (a->dtype == TUNER_F8E5M2 && b->dtype == TUNER_F8E5M2)
        return proto_fail(e, 422, "invalid_field", "inputs[1].dtype",
                    "f8e5m2 x f8e5m2 is not supported: use f8e4m3 for one of the operands (e4m3 x e4m3, "
                    "e4m3 x e5m2, e5m2 x e4m3)");
    int ra = a->rank, rb = b->rank;
    bool ta = op->attrs.matmul.trans_a, tb = op->attrs.matmul.trans_b;
    int64_t m = ta ? a->shape[ra - 1] : a->shape[ra - 2];
    int64_t k = ta ? a->shape[ra - 2] : a->shape[ra - 1];
    int kb_idx = tb ? rb - 1 : rb - 2;
    int64_t n = tb ? b->shape[rb - 2] : b->shape[rb - 1];
    if (b->shape[kb_idx] != k) {
        snprintf(field, sizeof(field), "inputs[1].shape[%d]", kb_idx);
        return proto_fail(e, 422, "shape_mismatch", field,
                    "matmul K mismatch: A has K=%lld, B has K=%lld", (long long)k,
                    (long long)b->shape[kb_idx]);
    }
    if (ra == 3 && rb == 3 && a->shape[0] != b->shape[0])
        return proto_fail(e, 422, "shape_mismatch", "inputs[1].shape[0]",
                    "matmul batch mismatch: %lld vs %lld", (long long)a->shape[0],
                    (long long)b->shape[0]);
    tuner_tensor *o = &op->output;
    o->rank = 0;
    if (ra == 3 || rb == 3)
        o->shape[o->rank++] = ra == 3 ? a->shape[0] : b->shape[0];
    o->shape[o->rank++] = m;
    o->shape[o->rank++] = n;
    o->dtype = fp8 ? op->attrs.matmul.out_dtype : a->dtype;
    if (fp8 && (r = check_fp8_scales(op, m, n, k, e)) < 0)
        return r;
    /* tf32 only exists for fp32 inputs; normalising keeps equal requests on one cache key. */
    if (a->dtype != TUNER_F32)
        op->attrs.matmul.allow_tf32 = false;
    return 0;
}

static int infer_conv2d(tuner_op *op, proto_error *e)
{
    const tuner_tensor *x = &op->inputs[0], *w = &op->inputs[1];
    bool nchw = op->attrs.conv2d.nchw;
    char field[64];
    if (x->rank != 4)
        return proto_fail(e, 422, "invalid_field", "inputs[0].shape",
                    nchw ? "conv2d input is [N,C,H,W]" : "conv2d input is [N,H,W,C]");
    if (w->rank != 4)
        return proto_fail(e, 422, "invalid_field", "inputs[1].shape",
                    nchw ? "conv2d weight is [K,C/groups,R,S]"
                         : "conv2d weight is [K,R,S,C/groups]");
    if (x->dtype != w->dtype)
        return proto_fail(e, 422, "invalid_field", "inputs[1].dtype",
                    "conv2d input and weight must have the same dtype");
    int64_t n = x->shape[0], c = x->shape[nchw ? 1 : 3];
    int64_t h = x->shape[nchw ? 2 : 1], wd = x->shape[nchw ? 3 : 2];
    int64_t k = w->shape[0], cg = w->shape[nchw ? 1 : 3];
    int r_idx = nchw ? 2 : 1, s_idx = nchw ? 3 : 2;
    int64_t r = w->shape[r_idx], s = w->shape[s_idx];
    int g = op->attrs.conv2d.groups;
    if (c % g != 0)
        return proto_fail(e, 422, "shape_mismatch", "attrs.groups",
                    "groups (%d) must divide the input channels (%lld)", g, (long long)c);
    if (k % g != 0)
        return proto_fail(e, 422, "shape_mismatch", "inputs[1].shape[0]",
                    "groups (%d) must divide the output channels (%lld)", g, (long long)k);
    if (cg != c / g) {
        snprintf(field, sizeof(field), "inputs[1].shape[%d]", nchw ? 1 : 3);
        return proto_fail(e, 422, "shape_mismatch", field,
                    "conv2d channel mismatch: weight has %lld input channels, expected %lld",
                    (long long)cg, (long long)(c / g));
    }
    const int *st = op->attrs.conv2d.stride, *pd = op->attrs.conv2d.pad,
              *dl = op->attrs.conv2d.dilation;
    int64_t ph = h + 2 * (int64_t)pd[0] - (int64_t)dl[0] * (r - 1) - 1;
    int64_t pw = wd + 2 * (int64_t)pd[1] - (int64_t)dl[1] * (s - 1) - 1;
    if (ph < 0 || pw < 0) {
        snprintf(field, sizeof(field), "inputs[1].shape[%d]", ph < 0 ? r_idx : s_idx);
        return proto_fail(e, 422, "shape_mismatch", field,
                    "the (dilated) filter is larger than the padded input");
    }
    int64_t p = ph / st[0] + 1, q = pw / st[1] + 1;
    tuner_tensor *o = &op->output;
    o->rank = 4;
    o->shape[0] = n;
    o->shape[nchw ? 1 : 3] = k;
    o->shape[nchw ? 2 : 1] = p;
    o->shape[nchw ? 3 : 2] = q;
    o->dtype = x->dtype;
    return 0;
}

/* pool2d's output: PyTorch's size per spatial dimension (tuner_pool_out_size), at least one
 * window; adaptive_avg's from attrs.output_size (parse_pool_attrs left it in output.shape). */
static int infer_pool2d(tuner_op *op, proto_error *e)
{
    const tuner_tensor *x = &op->inputs[0];
    const bool nchw = op->attrs.pool2d.nchw;
    char field[64];
    if (x->rank != 4)
        return proto_fail(e, 422, "invalid_field", "inputs[0].shape",
                    nchw ? "pool2d input is [N,C,H,W]" : "pool2d input is [N,H,W,C]");
    const int hd = nchw ? 2 : 1, wd = nchw ? 3 : 2;
    int64_t out[2];
    if (op->attrs.pool2d.kind == TUNER_POOL_ADAPTIVE_AVG) {
        out[0] = op->output.shape[0];
        out[1] = op->output.shape[1];
    } else {
        const int *k = op->attrs.pool2d.kernel, *st = op->attrs.pool2d.stride, *pd = op->attrs.pool2d.pad,
                  *dl = op->attrs.pool2d.dilation;
        for (int d = 0; d < 2; d++) {
            const int64_t in = x->shape[d ? wd : hd];
            out[d] = tuner_pool_out_size(in, k[d], st[d], pd[d], dl[d], op->attrs.pool2d.ceil_mode);
            if (out[d] < 1) {
                snprintf(field, sizeof(field), "attrs.kernel_size[%d]", d);
                return proto_fail(e, 422, "shape_mismatch", field,
                            "the %swindow (%lld) is larger than the padded input's %s (%lld)",
                            dl[d] > 1 ? "dilated " : "", (long long)dl[d] * (k[d] - 1) + 1,
                            d ? "width" : "height", (long long)(in + 2 * pd[d]));
            }
        }
    }
    tuner_tensor *o = &op->output;
    *o = *x;
    o->shape[hd] = out[0];
    o->shape[wd] = out[1];
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * The request */

static int parse_budget(const cJSON *b, proto_job_options *opt, proto_error *e)
{
    static const char *const keys[] = {"seconds", "candidates", NULL};
    const cJSON *v;
    int r;
    if (!cJSON_IsObject(b))
        return type_error(e, "budget", "an object {\"seconds\": ..., \"candidates\": ...}");
    if ((r = proto_check_keys(b, keys, "budget", e)) < 0)
        return r;
    if ((v = cJSON_GetObjectItemCaseSensitive(b, "seconds"))) {
        if ((r = json_finite(v, "budget.seconds", &opt->budget_s, e)) < 0)
            return r;
        if (opt->budget_s <= 0)
            return proto_fail(e, 422, "invalid_field", "budget.seconds", "budget.seconds must be > 0");
        if (opt->budget_s > PROTO_MAX_BUDGET_S)
            return proto_fail(e, 422, "limit_exceeded", "budget.seconds",
                        "budget.seconds must be at most %g", PROTO_MAX_BUDGET_S);
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(b, "candidates"))) {
        int64_t c;
        if ((r = json_int(v, "budget.candidates", &c, e)) < 0)
            return r;
        if (c < 1)
            return proto_fail(e, 422, "invalid_field", "budget.candidates",
                        "budget.candidates must be >= 1");
        if (c > PROTO_MAX_BUDGET_CANDIDATES)
            return proto_fail(e, 422, "limit_exceeded", "budget.candidates",
                        "budget.candidates must be at most %d", PROTO_MAX_BUDGET_CANDIDATES);
        opt->budget_candidates = (int)c;
    }
    return 0;
}

/* gather's output: x.shape[:axis] + index.shape + x.shape[axis+1:] in x's dtype, at most rank 6
 * (check_int_inputs has already made x a float and index an integer). */
static int infer_gather(tuner_op *op, proto_error *e)
{
    const tuner_tensor *x = &op->inputs[0], *ix = &op->inputs[1];
    int axis = op->attrs.gather.axis;
    if (axis < -x->rank || axis >= x->rank)
        return proto_fail(e, 422, "invalid_field", "attrs.axis", "axis %d is out of range for inputs[0]'s rank %d",
                    axis, x->rank);
    if (axis < 0)
        axis += x->rank;
    op->attrs.gather.axis = axis;
    const int rank = x->rank - 1 + ix->rank;
    if (rank > TUNER_MAX_RANK)
        return proto_fail(e, 422, "limit_exceeded", "inputs[1].shape",
                    "the output would have rank %d (x's rank - 1 + the index's rank); at most %d is supported",
                    rank, TUNER_MAX_RANK);
    tuner_tensor *o = &op->output;
    o->rank = 0;
    for (int d = 0; d < axis; d++)
        o->shape[o->rank++] = x->shape[d];
    for (int d = 0; d < ix->rank; d++)
        o->shape[o->rank++] = ix->shape[d];
    for (int d = axis + 1; d < x->rank; d++)
        o->shape[o->rank++] = x->shape[d];
    o->dtype = x->dtype;
    return 0;
}

/* The mask of attention (inputs[mi]): a float dtype, broadcasting to [B,Hq,S,Skv]. */
static int check_attention_mask(const tuner_op *op, int mi, proto_error *e)
{
    const tuner_tensor *m = &op->inputs[mi];
    char field[64];
    snprintf(field, sizeof(field), "inputs[%d].dtype", mi);
    if (m->dtype != TUNER_F16 && m->dtype != TUNER_BF16 && m->dtype != TUNER_F32)
        return proto_fail(e, 422, "invalid_field", field,
                    "the mask (inputs[%d]) is added to the scores: it must be f16, bf16 or f32, not %s", mi,
                    tuner_dtype_name(m->dtype));
    const tuner_attention_dims dm = tuner_attention_dims_of(op);
    const int64_t full[4] = {dm.b, dm.hq, dm.s, dm.skv};
    snprintf(field, sizeof(field), "inputs[%d].shape", mi);
    if (m->rank > 4 || !broadcasts_to(m->shape, m->rank, full, 4))
        return proto_fail(e, 422, "shape_mismatch", field,
                    "the mask (rank %d) must broadcast to [B,Hq,S,Skv] = [%lld,%lld,%lld,%lld]", m->rank,
                    (long long)full[0], (long long)full[1], (long long)full[2], (long long)full[3]);
    return 0;
}

/* attention's output in layout bshd_packed: qkv [B,S,Hq+2*Hkv,D] (f16/bf16, a supported head
 * dim), Hkv attrs.kv_heads (a third of the heads when not given) with Hq a positive multiple of
 * it, and the mask as in the other layouts; the output [B,S,Hq,D]. */
static int infer_attention_packed(tuner_op *op, proto_error *e)
{
    const tuner_tensor *qkv = &op->inputs[0];
    if (qkv->rank != 4)
        return proto_fail(e, 422, "invalid_field", "inputs[0].shape",
                    "qkv (inputs[0]) has rank %d; attention's qkv in layout bshd_packed is [B,S,Hq+2*Hkv,D]",
                    qkv->rank);
    if (qkv->dtype != TUNER_F16 && qkv->dtype != TUNER_BF16)
        return proto_fail(e, 422, "invalid_field", "inputs[0].dtype",
                    "attention's qkv must be f16 or bf16, not %s", tuner_dtype_name(qkv->dtype));
    const int64_t d = qkv->shape[3], heads = qkv->shape[2];
    if (!tuner_attention_head_dim_ok(d))
        return proto_fail(e, 422, "invalid_field", "inputs[0].shape",
                    "head dim %lld (qkv's last dimension) is not supported: it must be 64, 80, 96, 128 or 256",
                    (long long)d);
    if (op->attrs.attention.kv_heads == 0) {
        if (heads % 3 != 0)
            return proto_fail(e, 422, "shape_mismatch", "inputs[0].shape",
                        "qkv's %lld heads are not 3 equal parts q, k, v: give attrs.kv_heads (Hkv, of "
                        "Hq + 2*Hkv heads)", (long long)heads);
        op->attrs.attention.kv_heads = (int)(heads / 3);
    }
    const int64_t hkv = op->attrs.attention.kv_heads, hq = heads - 2 * hkv;
    if (hq <= 0 || hq % hkv != 0)
        return proto_fail(e, 422, "shape_mismatch", "attrs.kv_heads",
                    "qkv's %lld heads less 2 * kv_heads (%lld) leave %lld query heads, which must be a positive "
                    "multiple of kv_heads (each kv head serves Hq / Hkv query heads)", (long long)heads,
                    (long long)hkv, (long long)hq);
    if (op->n_anchor_inputs == 2) {
        int r = check_attention_mask(op, 1, e);
        if (r < 0)
            return r;
    }
    if (op->attrs.attention.scale == 0)
        op->attrs.attention.scale = 1.0 / sqrt((double)d);
    op->output = *qkv;
    op->output.shape[2] = hq;
    return 0;
}

/* attention's output: q's shape and dtype, once q, k, v (and the mask) agree (op/op.h's ATTENTION):
 * rank 4 each, one f16/bf16 dtype, one supported head dim, k and v alike, one batch, Hq a multiple
 * of Hkv, and a float mask that broadcasts to [B,Hq,S,Skv]. A scale not given becomes 1/sqrt(D). */
static int infer_attention(tuner_op *op, proto_error *e)
{
    static const char *const names[] = {"q", "k", "v", "the mask"};
    const tuner_tensor *q = &op->inputs[0], *k = &op->inputs[1], *v = &op->inputs[2];
    const bool bshd = op->attrs.attention.bshd;
    char field[64];
    for (int i = 0; i < 3; i++) {
        if (op->inputs[i].rank != 4) {
            snprintf(field, sizeof(field), "inputs[%d].shape", i);
            return proto_fail(e, 422, "invalid_field", field, "%s (inputs[%d]) has rank %d; attention's %s is %s", names[i], i,
                        op->inputs[i].rank, names[i],
                        bshd ? (i ? "[B,Skv,Hkv,D] (layout bshd)" : "[B,S,Hq,D] (layout bshd)")
                             : (i ? "[B,Hkv,Skv,D] (layout bhsd)" : "[B,Hq,S,D] (layout bhsd)"));
        }
    }
    if (q->dtype != TUNER_F16 && q->dtype != TUNER_BF16)
        return proto_fail(e, 422, "invalid_field", "inputs[0].dtype",
                    "attention's q, k and v must be f16 or bf16, not %s", tuner_dtype_name(q->dtype));
    for (int i = 1; i < 3; i++) {
        if (op->inputs[i].dtype != q->dtype) {
            snprintf(field, sizeof(field), "inputs[%d].dtype", i);
            return proto_fail(e, 422, "invalid_field", field, "%s is %s but q is %s: q, k and v share one dtype",
                        names[i], tuner_dtype_name(op->inputs[i].dtype), tuner_dtype_name(q->dtype));
        }
    }
    const int64_t d = q->shape[3];
    if (!tuner_attention_head_dim_ok(d))
        return proto_fail(e, 422, "invalid_field", "inputs[0].shape",
                    "head dim %lld (q's last dimension) is not supported: it must be 64, 80, 96, 128 or 256",
                    (long long)d);
    for (int i = 1; i < 3; i++) {
        if (op->inputs[i].shape[3] != d) {
            snprintf(field, sizeof(field), "inputs[%d].shape", i);
            return proto_fail(e, 422, "shape_mismatch", field, "%s's head dim (last dimension) is %lld but q's is %lld",
                        names[i], (long long)op->inputs[i].shape[3], (long long)d);
        }
    }
    if (memcmp(k->shape, v->shape, sizeof(int64_t) * 4) != 0)
        return proto_fail(e, 422, "shape_mismatch", "inputs[2].shape",
                    "v must have k's shape [%lld,%lld,%lld,%lld]", (long long)k->shape[0], (long long)k->shape[1],
                    (long long)k->shape[2], (long long)k->shape[3]);
    if (k->shape[0] != q->shape[0])
        return proto_fail(e, 422, "shape_mismatch", "inputs[1].shape", "k's batch (%lld) differs from q's (%lld)",
                    (long long)k->shape[0], (long long)q->shape[0]);
    const int hd = bshd ? 2 : 1;
    if (q->shape[hd] % k->shape[hd] != 0)
        return proto_fail(e, 422, "shape_mismatch", "inputs[1].shape",
                    "q's %lld heads are not a multiple of k's and v's %lld (each kv head serves Hq / Hkv query "
                    "heads)", (long long)q->shape[hd], (long long)k->shape[hd]);
    if (op->n_anchor_inputs == 4) {
        int r = check_attention_mask(op, 3, e);
        if (r < 0)
            return r;
    }
    if (op->attrs.attention.scale == 0)
        op->attrs.attention.scale = 1.0 / sqrt((double)d);
    op->output = *q;
    return 0;
}

/* Integer tensors only where a kernel reads them as integers or converts them first: gather's
 * index (which must be one), and an elementwise kernel's inputs[0] whose chain (attrs.ops, then
 * the epilogue) starts with a cast to a float dtype. Everything else computes in floats from
 * f16/bf16/f32 inputs. */
static int check_int_inputs(const tuner_op *op, const pchain *ew, const pchain *epi, proto_error *e)
{
    char field[96];
    const pstep *first = ew->n ? &ew->steps[0] : epi->n ? &epi->steps[0] : NULL;
    const bool converts = first && first->s.kind == TUNER_EW_CAST;
    for (int i = 0; i < op->n_inputs; i++) {
        const tuner_dtype dt = op->inputs[i].dtype;
        snprintf(field, sizeof(field), "inputs[%d].dtype", i);
        if (op->kind == TUNER_OP_GATHER && i == 1) {
            if (!tuner_dtype_is_int(dt))
                return proto_fail(e, 422, "invalid_field", field, "gather's index (inputs[1]) must be i32 or i64, not %s",
                            tuner_dtype_name(dt));
            continue;
        }
        if (!tuner_dtype_is_int(dt))
            continue;
        if (op->kind == TUNER_OP_ELEMENTWISE && i == 0) {
            if (converts)
                continue;
            return proto_fail(e, 422, "invalid_field", field,
                        "an integer inputs[0] (%s) of elementwise must first be converted: start the chain with a "
                        "cast to f16, bf16 or f32", tuner_dtype_name(dt));
        }
        if (op->kind == TUNER_OP_GATHER && i == 0)
            return proto_fail(e, 422, "invalid_field", field, "gather's x (inputs[0]) must be f16, bf16 or f32, not %s",
                        tuner_dtype_name(dt));
        if (op->kind == TUNER_OP_ATTENTION && i == tuner_attention_mask_input(op) &&
            op->n_anchor_inputs == i + 1)
            return proto_fail(e, 422, "invalid_field", field,
                        "the mask (inputs[%d]) is added to the scores: it must be f16, bf16 or f32, not %s "
                        "(turn a boolean or integer mask into 0 / -inf first)", i, tuner_dtype_name(dt));
        return proto_fail(e, 422, "invalid_field", field,
                    "%s is an integer dtype, which only gather's index and an elementwise cast's input may be (%s "
                    "computes in floats)", tuner_dtype_name(dt), tuner_op_name(op->kind));
    }
    return 0;
}

/* FP8 tensors only as a matmul's A and B (op/op.h's tuner_dtype), which take no prologue (the copy
 * engine brings them into shared memory as they are), and as any input of an elementwise kernel,
 * which decodes them to f32 for its chain (exactly: every FP8 value is a float). */
static int check_fp8_inputs(const tuner_op *op, const pchain *pro, proto_error *e)
{
    char field[96];
    for (int i = 0; i < op->n_inputs; i++) {
        const tuner_dtype dt = op->inputs[i].dtype;
        if (!tuner_dtype_is_fp8(dt) || op->kind == TUNER_OP_ELEMENTWISE)
            continue;
        snprintf(field, sizeof(field), "inputs[%d].dtype", i);
        if (op->kind != TUNER_OP_MATMUL)
            return proto_fail(e, 422, "invalid_field", field,
                              "%s is an FP8 dtype, which only matmul's A and B and elementwise's inputs may be (%s "
                              "computes in f16, bf16 or f32)",
                              tuner_dtype_name(dt), tuner_op_name(op->kind));
        if (i >= 2)
            return proto_fail(e, 422, "invalid_field", field,
                              "%s is an FP8 dtype, which only matmul's A and B (inputs[0] and inputs[1]) may be; "
                              "inputs[%d] is %s", tuner_dtype_name(dt), i,
                              i < op->n_anchor_inputs ? "a scale (f32)" : "a fused step's operand");
    }
    if (op->kind == TUNER_OP_MATMUL && tuner_dtype_is_fp8(op->inputs[0].dtype) && pro->n > 0)
        return proto_fail(e, 422, "invalid_field", "prologue",
                          "an FP8 matmul takes no prologue (its operands go to the tensor cores as they are); "
                          "scale them with attrs.scale_a and attrs.scale_b");
    return 0;
}

/* A cast to FP8 quantizes the output: it ends an FP8 matmul's epilogue (saturating, as cuBLASLt's
 * FP8 output) or is anywhere in an elementwise kernel's chain (PyTorch's .to(float8_*): NaN or inf
 * past the largest value; the last cast gives the output dtype); no other kernel writes FP8. */
static int check_fp8_casts(const tuner_op *op, const pchain *ew, const pchain *epi, proto_error *e)
{
    char field[96];
    const bool fp8_mm = op->kind == TUNER_OP_MATMUL && tuner_dtype_is_fp8(op->inputs[0].dtype);
    if (op->kind == TUNER_OP_ELEMENTWISE)
        return 0;
    for (int c = 0; c < 2; c++) {
        const pchain *ch = c ? epi : ew;
        for (int j = 0; j < ch->n; j++) {
            const pstep *st = &ch->steps[j];
            if (st->s.kind != TUNER_EW_CAST || !tuner_dtype_is_fp8(st->s.dtype))
                continue;
            snprintf(field, sizeof(field), "%.40s.dtype", st->path);
            if (!fp8_mm || !c)
                return proto_fail(e, 422, "invalid_field", field,
                                  "a cast to %s (quantizing the output) ends an FP8 matmul's epilogue or is an "
                                  "elementwise kernel's step; other kernels write f16, bf16 or f32",
                                  tuner_dtype_name(st->s.dtype));
            if (j != ch->n - 1)
                return proto_fail(e, 422, "invalid_field", field,
                                  "a cast to %s quantizes the output: it is the epilogue's last step",
                                  tuner_dtype_name(st->s.dtype));
        }
    }
    /* amax: on the quantize step only (a cast to FP8 ending an FP8 matmul's epilogue, above),
     * into an f32 input of one element that no step reads (the kernel writes it while it runs). */
    for (int c = 0; c < 2; c++) {
        const pchain *ch = c ? epi : ew;
        for (int j = 0; j < ch->n; j++) {
            const pstep *st = &ch->steps[j];
            if (!st->s.amax)
                continue;
            snprintf(field, sizeof(field), "%.40s.amax", st->path);
            const int idx = st->s.amax - 1;
            const tuner_tensor *t = &op->inputs[idx];
            if (!c || !fp8_mm || !tuner_dtype_is_fp8(st->s.dtype))
                return proto_fail(e, 422, "invalid_field", field,
                                  "amax goes with the quantize step: a cast to f8e4m3 or f8e5m2 ending an FP8 "
                                  "matmul's epilogue");
            if (t->dtype != TUNER_F32 || tuner_tensor_numel(t) != 1 || (t->rank > 0 && t->sym[0]))
                return proto_fail(e, 422, "invalid_field", field,
                                  "amax names inputs[%d], which must be f32 with one element (shape [1]): the "
                                  "kernel raises it to the largest |value| it quantizes",
                                  idx);
            for (int k = 0; k < ch->n; k++) {
                int ops[2];
                const int n_ops = tuner_ew_operands(&ch->steps[k].s, ops);
                for (int m = 0; m < n_ops; m++)
                    if (ops[m] == idx)
                        return proto_fail(e, 422, "invalid_field", field,
                                          "amax's inputs[%d] is written by the kernel while it runs: no step may "
                                          "read it (%.40s does)",
                                          idx, ch->steps[k].path);
            }
        }
    }
    return 0;
}

/* Fixed number of anchor inputs, or 0 when it depends on the inputs (norms). */
static int fixed_anchor_inputs(tuner_op_kind k)
{
    switch (k) {
    case TUNER_OP_MATMUL:
    case TUNER_OP_CONV2D:
        return 2;
    case TUNER_OP_GATHER:
        return 2; /* x, index */
    case TUNER_OP_LAYERNORM:
    case TUNER_OP_RMSNORM:
    case TUNER_OP_ATTENTION:
        return 0;
    default:
        return 1;
    }
}

/* Checks every step's operand against the inputs and the value shape it is applied to, turns
 * the parsed chain into a tuner_ew_chain and tracks the value dtype through casts. */
static int finish_chain(const tuner_op *op, const pchain *pc, const int64_t *shape, int rank,
                        tuner_dtype *dtype, bool epilogue, tuner_ew_chain *out, proto_error *e)
{
    char field[96];
    for (int i = 0; i < pc->n; i++) {
        const pstep *st = &pc->steps[i];
        int ops[2];
        const int n_ops = tuner_ew_operands(&st->s, ops);
        for (int j = 0; j < n_ops; j++) {
            int idx = ops[j];
            snprintf(field, sizeof(field), "%.40s.%s", st->path,
                     j == 1 ? "other" : epilogue || st->target < 0 ? "input" : "operand");
            if (strcmp(st->path, "attrs.fn") == 0)
                snprintf(field, sizeof(field), "attrs.fn");
            const tuner_tensor *t = &op->inputs[idx];
            if (st->bias) {
                if (t->rank != 1 || t->shape[0] != shape[rank - 1])
                    return proto_fail(e, 422, "shape_mismatch", field,
                                "bias inputs[%d] must have shape [%lld] (the output's last "
                                "dimension)", idx, (long long)shape[rank - 1]);
            } else if (!broadcasts_to(t->shape, t->rank, shape, rank)) {
                return proto_fail(e, 422, "shape_mismatch", field,
                            "inputs[%d] does not broadcast to the shape it is applied to", idx);
            }
        }
        if (st->s.kind == TUNER_EW_CAST)
            *dtype = st->s.dtype;
        out->steps[out->n++] = st->s;
    }
    return 0;
}

/* "op" and "inputs": the op kind and every input tensor, before anything refers to them. */
static int validate_inputs(const cJSON *root, tuner_op *op, proto_error *e)
{
    const cJSON *v;
    const char *s = NULL;
    char field[96];
    int r;

    if (!(v = cJSON_GetObjectItemCaseSensitive(root, "op")))
        return type_error(e, "op", "given");
    if ((r = json_string(v, "op", &s, e)) < 0)
        return r;
    if (tuner_op_parse(s, &op->kind) < 0) {
        char known[160] = "";
        return proto_fail(e, 422, "unknown_op", "op", "unknown op \"%.32s\" (known ops: %s)", s,
                    tuner_op_names(known, sizeof(known)));
    }

    if (!(v = cJSON_GetObjectItemCaseSensitive(root, "inputs")))
        return type_error(e, "inputs", "given");
    if (!cJSON_IsArray(v))
        return type_error(e, "inputs", "an array of tensors");
    int n_inputs = cJSON_GetArraySize(v);
    if (n_inputs > TUNER_MAX_INPUTS)
        return proto_fail(e, 422, "limit_exceeded", "inputs", "at most %d inputs are allowed",
                    TUNER_MAX_INPUTS);
    if (n_inputs == 0)
        return proto_fail(e, 422, "invalid_field", "inputs", "at least one input is required");
    int i = 0;
    for (const cJSON *t = v->child; t; t = t->next, i++) {
        snprintf(field, sizeof(field), "inputs[%d]", i);
        if ((r = parse_tensor(t, field, op, &op->inputs[i], e)) < 0)
            return r;
    }
    op->n_inputs = n_inputs;
    return 0;
}

/* Operand binding: the anchor's inputs come first, then the operands of fused steps. Decides
 * n_anchor_inputs (from the lowest operand for the norms, whose gamma and beta are optional) and
 * checks that every step reads an existing extra input and every extra input is read. chains are
 * attrs.ops, the prologue and the epilogue, in that order. */
static int bind_operands(tuner_op *op, const pchain *const chains[3], proto_error *e)
{
    char field[96];
    const int n_inputs = op->n_inputs;
    bool used[TUNER_MAX_INPUTS] = {false};
    int min_operand = n_inputs;
    for (int c = 0; c < 3; c++) {
        for (int j = 0; j < chains[c]->n; j++) {
            const pstep *st = &chains[c]->steps[j];
            int ops[2];
            const int n_ops = tuner_ew_operands(&st->s, ops);
            for (int m = 0; m < n_ops; m++) {
                if (ops[m] >= n_inputs) {
                    snprintf(field, sizeof(field), "%s", st->path);
                    if (strcmp(st->path, "attrs.fn") != 0)
                        snprintf(field, sizeof(field), "%.40s.%s", st->path,
                                 m == 1 ? "other" : c == 1 ? "operand" : "input");
                    return proto_fail(e, 422, "invalid_field", field, "inputs[%d] does not exist",
                                ops[m]);
                }
                used[ops[m]] = true;
                if (ops[m] < min_operand)
                    min_operand = ops[m];
            }
            /* A quantize step's amax output is an input of its own (no step reads it). */
            if (st->s.amax) {
                snprintf(field, sizeof(field), "%.40s.amax", st->path);
                if (st->s.amax - 1 >= n_inputs)
                    return proto_fail(e, 422, "invalid_field", field, "inputs[%d] does not exist", st->s.amax - 1);
                used[st->s.amax - 1] = true;
            }
        }
    }
    /* Every input of a concat is joined: it has no operands for binary steps. */
    int n_anchor = op->kind == TUNER_OP_CONCAT ? n_inputs : fixed_anchor_inputs(op->kind);
    if (op->kind == TUNER_OP_MATMUL)
        n_anchor += tuner_matmul_n_scales(op); /* an FP8 matmul's scales follow A and B */
    if (n_anchor == 0 && op->kind == TUNER_OP_ATTENTION) {
        /* q, k, v and an optional mask: the mask is inputs[3] unless a fused step reads it (a step
         * reading q, k or v is refused by its field below). */
        if (op->attrs.attention.packed) {
            /* qkv and an optional mask, the same way */
            if (n_inputs < 1)
                return proto_fail(e, 422, "invalid_field", "inputs",
                            "attention (layout bshd_packed) needs 1 input: qkv (then an optional mask)");
            n_anchor = min_operand < 2 ? 1 : 2;
        } else {
            if (n_inputs < 3)
                return proto_fail(e, 422, "invalid_field", "inputs",
                            "attention needs 3 inputs: q, k, v (then an optional mask)");
            n_anchor = min_operand < 3 ? 3 : min_operand < 4 ? min_operand : 4;
        }
    } else if (n_anchor == 0) {
        int hi = op->kind == TUNER_OP_LAYERNORM ? 3 : 2;
        n_anchor = min_operand;
        if (n_anchor != 1 && n_anchor != hi)
            return proto_fail(e, 422, "invalid_field", "inputs",
                        op->kind == TUNER_OP_LAYERNORM
                            ? "layernorm takes x, or x, gamma and beta, before any operand of a "
                              "fused step"
                            : "rmsnorm takes x, or x and gamma, before any operand of a fused "
                              "step");
    }
    if (n_inputs < n_anchor)
        return proto_fail(e, 422, "invalid_field", "inputs", "%s needs %d inputs",
                    tuner_op_name(op->kind), n_anchor);
    op->n_anchor_inputs = n_anchor;
    if (op->kind != TUNER_OP_ELEMENTWISE) {
        for (int c = 0; c < 3; c++) {
            for (int j = 0; j < chains[c]->n; j++) {
                const pstep *st = &chains[c]->steps[j];
                int ops[2];
                const int n_ops = tuner_ew_operands(&st->s, ops);
                if (st->s.amax && st->s.amax - 1 < n_anchor) {
                    snprintf(field, sizeof(field), "%.40s.amax", st->path);
                    return proto_fail(e, 422, "invalid_field", field,
                                      "amax names an extra input (index >= %d) that the kernel writes, not one of the "
                                      "anchor's", n_anchor);
                }
                for (int m = 0; m < n_ops; m++) {
                    if (ops[m] >= n_anchor)
                        continue;
                    snprintf(field, sizeof(field), "%.40s.%s", st->path,
                             m == 1 ? "other" : c == 1 ? "operand" : "input");
                    return proto_fail(e, 422, "invalid_field", field,
                                "a fused step reads an extra input (index >= %d), not one of "
                                "the anchor's", n_anchor);
                }
            }
        }
    }
    for (int j = n_anchor; j < n_inputs; j++) {
        if (!used[j]) {
            snprintf(field, sizeof(field), "inputs[%d]", j);
            return proto_fail(e, 422, "invalid_field", field,
                        "inputs[%d] is not an input of %s and no fused step reads it", j,
                        tuner_op_name(op->kind));
        }
    }
    return 0;
}

/* Output inference: the anchor's output shape and dtype from its inputs and attributes (before
 * any epilogue cast), within the element limit. */
static int infer_output(tuner_op *op, int softmax_axis, proto_error *e)
{
    char field[96];
    int r;
    const int n_inputs = op->n_inputs, n_anchor = op->n_anchor_inputs;

    switch (op->kind) {
    case TUNER_OP_MATMUL:
        if ((r = infer_matmul(op, e)) < 0)
            return r;
        break;
    case TUNER_OP_CONV2D:
        if ((r = infer_conv2d(op, e)) < 0)
            return r;
        break;
    case TUNER_OP_SOFTMAX: {
        int rank = op->inputs[0].rank;
        if (softmax_axis != -1 && softmax_axis != rank - 1)
            return proto_fail(e, 422, "invalid_field", "attrs.axis",
                        "a softmax kernel is over the last axis: axis must be -1 or %d (a graph's "
                        "softmax node takes any axis)", rank - 1);
        op->output = op->inputs[0];
        break;
    }
    case TUNER_OP_LAYERNORM:
    case TUNER_OP_RMSNORM: {
        const tuner_tensor *x = &op->inputs[0];
        for (int j = 1; j < n_anchor; j++) {
            const tuner_tensor *g = &op->inputs[j];
            if (g->rank != 1 || g->shape[0] != x->shape[x->rank - 1]) {
                snprintf(field, sizeof(field), "inputs[%d].shape", j);
                return proto_fail(e, 422, "shape_mismatch", field,
                            "%s must have shape [%lld] (the last dimension of x)",
                            j == 1 ? "gamma" : "beta", (long long)x->shape[x->rank - 1]);
            }
        }
        op->output = *x;
        break;
    }
    case TUNER_OP_REDUCE: {
        const tuner_tensor *x = &op->inputs[0];
        int axis = op->attrs.reduce.axis;
        if (axis < -x->rank || axis >= x->rank)
            return proto_fail(e, 422, "invalid_field", "attrs.axis",
                        "axis %d is out of range for rank %d", axis, x->rank);
        if (axis < 0)
            axis += x->rank;
        op->attrs.reduce.axis = axis;
        const int axis_end = axis + op->attrs.reduce.naxes; /* naxes: 1, or parse_reduce_axes' range */
        tuner_tensor *o = &op->output;
        o->rank = 0;
        for (int d = 0; d < x->rank; d++) {
            if (d < axis || d >= axis_end)
                o->shape[o->rank++] = x->shape[d];
            else if (op->attrs.reduce.keepdim)
                o->shape[o->rank++] = 1;
        }
        /* A full reduction of a vector gives one element; it is described as [1] so every
         * tensor keeps rank >= 1. */
        if (o->rank == 0)
            o->shape[o->rank++] = 1;
        o->dtype = x->dtype;
        break;
    }
    case TUNER_OP_ELEMENTWISE: {
        tuner_tensor *o = &op->output;
        o->rank = op->inputs[0].rank;
        memcpy(o->shape, op->inputs[0].shape, sizeof(o->shape));
        for (int j = 1; j < n_inputs; j++) {
            if (!broadcast_merge(o->shape, &o->rank, op->inputs[j].shape, op->inputs[j].rank)) {
                snprintf(field, sizeof(field), "inputs[%d].shape", j);
                return proto_fail(e, 422, "shape_mismatch", field,
                            "inputs[%d] does not broadcast with the other inputs", j);
            }
        }
        if (shape_numel(o->shape, o->rank) > PROTO_MAX_NUMEL)
            return proto_fail(e, 422, "limit_exceeded", "inputs",
                        "the broadcast output has more than 2^31 elements");
        o->dtype = op->inputs[0].dtype;
        break;
    }
    case TUNER_OP_COPY: {
        const tuner_tensor *x = &op->inputs[0];
        int64_t last = op->attrs.copy.offset;
        /* The copied region: the output less its padding. */
        for (int d = 0; d < op->output.rank; d++)
            last += (op->output.shape[d] - op->attrs.copy.pad_lower[d] - op->attrs.copy.pad_upper[d] - 1) *
                    op->attrs.copy.strides[d];
        if (last >= tuner_tensor_numel(x))
            return proto_fail(e, 422, "invalid_field", "attrs",
                        "the copy reads element %lld of inputs[0], which has %lld", (long long)last,
                        (long long)tuner_tensor_numel(x));
        op->output.dtype = x->dtype;
        break;
    }
    case TUNER_OP_CONCAT: {
        tuner_tensor *o = &op->output;
        *o = op->inputs[0];
        int axis = op->attrs.concat.axis;
        if (axis < -o->rank || axis >= o->rank)
            return proto_fail(e, 422, "invalid_field", "attrs.axis", "axis %d is out of range for rank %d",
                        axis, o->rank);
        if (axis < 0)
            axis += o->rank;
        op->attrs.concat.axis = axis;
        for (int j = 1; j < n_inputs; j++) {
            const tuner_tensor *t = &op->inputs[j];
            bool ok = t->rank == o->rank && t->dtype == o->dtype;
            for (int d = 0; ok && d < o->rank; d++)
                ok = d == axis || t->shape[d] == o->shape[d];
            if (!ok) {
                snprintf(field, sizeof(field), "inputs[%d]", j);
                return proto_fail(e, 422, "shape_mismatch", field,
                            "inputs[%d] must have inputs[0]'s rank and dtype and its sizes off "
                            "axis %d", j, axis);
            }
            o->shape[axis] += t->shape[axis];
            if (o->shape[axis] > PROTO_MAX_DIM)
                return proto_fail(e, 422, "limit_exceeded", "inputs", "the joined axis exceeds 2^31-1");
        }
        break;
    }
    case TUNER_OP_POOL2D:
        if ((r = infer_pool2d(op, e)) < 0)
            return r;
        break;
    case TUNER_OP_GATHER:
        if ((r = infer_gather(op, e)) < 0)
            return r;
        break;
    case TUNER_OP_ATTENTION:
        if ((r = (op->attrs.attention.packed ? infer_attention_packed : infer_attention)(op, e)) < 0)
            return r;
        break;
    default:
        return proto_fail(e, 500, "internal", "op", "op not handled");
    }
    if (shape_numel(op->output.shape, op->output.rank) > PROTO_MAX_NUMEL)
        return proto_fail(e, 422, "limit_exceeded", "inputs", "the output has more than 2^31 elements");
    op->output.align = 16;
    return 0;
}

/* Prologue: each step applies to one anchor input, its operand broadcast to that input. */
static int bind_prologue(tuner_op *op, const pchain *pro, proto_error *e)
{
    char field[96];
    int r;
    const int n_anchor = op->n_anchor_inputs;

    for (int j = 0; j < pro->n; j++) {
        const pstep *st = &pro->steps[j];
        snprintf(field, sizeof(field), "%.40s.input", st->path);
        if (op->kind == TUNER_OP_ELEMENTWISE)
            return proto_fail(e, 422, "invalid_field", "prologue",
                        "elementwise takes its whole chain in attrs.ops and epilogue");
        if (op->kind == TUNER_OP_COPY || op->kind == TUNER_OP_CONCAT || op->kind == TUNER_OP_GATHER ||
            op->kind == TUNER_OP_ATTENTION)
            return proto_fail(e, 422, "invalid_field", "prologue",
                        "%s takes no prologue (its steps go in the epilogue)",
                        tuner_op_name(op->kind));
        if (st->target >= n_anchor)
            return proto_fail(e, 422, "invalid_field", field,
                        "a prologue applies to one of the %s's %d anchor inputs",
                        tuner_op_name(op->kind), n_anchor);
        /* Row and column templates fuse a prologue into x only: gamma and beta are parameters. */
        if (st->target != 0 && op->kind != TUNER_OP_MATMUL && op->kind != TUNER_OP_CONV2D)
            return proto_fail(e, 422, "invalid_field", field, "a %s takes a prologue on input 0 (x) only",
                        tuner_op_name(op->kind));
        tuner_ew_chain *ch = &op->prologue[st->target];
        if (ch->n >= TUNER_MAX_STEPS)
            return proto_fail(e, 422, "limit_exceeded", "prologue", "at most %d steps per input",
                        TUNER_MAX_STEPS);
        pchain one = {.n = 1, .steps = {*st}};
        const tuner_tensor *t = &op->inputs[st->target];
        tuner_dtype dt = t->dtype;
        if ((r = finish_chain(op, &one, t->shape, t->rank, &dt, false, ch, e)) < 0)
            return r;
    }
    return 0;
}

int proto_parse_job_options(const cJSON *root, proto_job_options *opt, proto_error *e)
{
    const cJSON *v;
    const char *s = NULL;
    int r;

    opt->target = (tuner_target){.sm = 90, .arch_specific = false};
    opt->arch_given = opt->arch_native = false;
    opt->tune = TUNER_TUNE_MODEL;
    opt->tune_given = false;
    opt->wait = true;
    opt->priority = PROTO_PRIO_NORMAL;
    opt->budget_s = 0;
    opt->budget_candidates = 0;
    opt->retune = false;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "arch"))) {
        if ((r = json_string(v, "arch", &s, e)) < 0)
            return r;
        opt->arch_given = true;
        if (strcmp(s, "native") == 0)
            opt->arch_native = true;
        else if (tuner_target_parse(s, &opt->target) < 0) {
            char archs[128];
            return proto_fail(e, 422, "invalid_field", "arch",
                        "unsupported arch \"%.32s\" (%s, or native: the daemon's GPU)", s,
                        tuner_target_names(archs, sizeof(archs)));
        }
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "tune"))) {
        if ((r = json_string(v, "tune", &s, e)) < 0)
            return r;
        if (tuner_tune_parse(s, &opt->tune) < 0)
            return proto_fail(e, 422, "invalid_field", "tune",
                        "tune must be \"none\", \"model\" or \"measure\"");
        opt->tune_given = true;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "wait")) &&
        (r = json_bool(v, "wait", &opt->wait, e)) < 0)
        return r;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "retune")) &&
        (r = json_bool(v, "retune", &opt->retune, e)) < 0)
        return r;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "priority"))) {
        if ((r = json_string(v, "priority", &s, e)) < 0)
            return r;
        int p = lookup(s, prio_names, 3);
        if (p < 0)
            return proto_fail(e, 422, "invalid_field", "priority",
                        "priority must be \"blocking\", \"normal\" or \"background\"");
        opt->priority = p;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "budget")) &&
        (r = parse_budget(v, opt, e)) < 0)
        return r;
    return 0;
}

/* The whole request, in the order its errors are reported: inputs, attributes and fused steps,
 * operand binding, output inference, prologue, the output chain, job options. */
static int validate(const cJSON *root, proto_kernel_request *req, proto_error *e)
{
    static const char *const top_keys[] = {"op", "inputs", "attrs", "prologue", "epilogue",
                                           "arch", "tune", "wait", "priority", "budget", "retune",
                                           "dims", "sizes", NULL};
    tuner_op *op = &req->op;
    const cJSON *v;
    int r, softmax_axis = -1;
    pchain ew = {0}, epi = {0}, pro = {0};

    if (!cJSON_IsObject(root))
        return type_error(e, "", "a JSON object");
    if ((r = proto_check_keys(root, top_keys, "", e)) < 0)
        return r;
    if ((r = proto__parse_dims(root, op, &req->dyn, e)) < 0)
        return r;
    if ((r = validate_inputs(root, op, e)) < 0)
        return r;

    /* attrs, prologue, epilogue */
    if ((r = parse_attrs(cJSON_GetObjectItemCaseSensitive(root, "attrs"), op, &softmax_axis, &ew,
                         e)) < 0)
        return r;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "prologue")) &&
        (r = parse_steps(v, "prologue", true, &pro, e)) < 0)
        return r;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "epilogue")) &&
        (r = parse_steps(v, "epilogue", false, &epi, e)) < 0)
        return r;
    if (ew.n + epi.n > TUNER_MAX_STEPS)
        return proto_fail(e, 422, "limit_exceeded", "epilogue",
                    "at most %d steps are allowed (attrs.ops and epilogue together)",
                    TUNER_MAX_STEPS);

    const pchain *const chains[3] = {&ew, &pro, &epi};
    if ((r = bind_operands(op, chains, e)) < 0)
        return r;
    if ((r = check_int_inputs(op, &ew, &epi, e)) < 0)
        return r;
    if ((r = check_fp8_inputs(op, &pro, e)) < 0)
        return r;
    if ((r = check_fp8_casts(op, &ew, &epi, e)) < 0)
        return r;
    if ((r = proto__check_named_inputs(op, e)) < 0)
        return r;
    if ((r = infer_output(op, softmax_axis, e)) < 0)
        return r;
    if ((r = bind_prologue(op, &pro, e)) < 0)
        return r;

    /* Elementwise chain then epilogue, both applied to the output value. */
    tuner_dtype dt = op->output.dtype;
    if ((r = finish_chain(op, &ew, op->output.shape, op->output.rank, &dt, true, &op->epilogue,
                          e)) < 0)
        return r;
    if ((r = finish_chain(op, &epi, op->output.shape, op->output.rank, &dt, true, &op->epilogue,
                          e)) < 0)
        return r;
    op->output.dtype = dt;
    /* The shapes were inferred at the names' max; now the names themselves. */
    if ((r = proto__check_named(op, e)) < 0)
        return r;
    if ((r = proto__parse_sizes(root, op, &req->dyn, e)) < 0)
        return r;

    if ((r = proto_parse_job_options(root, &req->opt, e)) < 0)
        return r;
    /* A native arch is known once the daemon resolves it; the space builder says the same then. */
    char why[320];
    if (!req->opt.arch_native && tuner_fp8_unsupported(op, &req->opt.target, why, sizeof(why)))
    {
        const tuner_target *t = &req->opt.target;
        /* sm_90a transposes MN-major FP8 operands in the kernel: there only their row length
         * (M of a [K,M] A, N of a [K,N] B) can be refused. */
        const bool wg = t->sm == 90 && t->arch_specific;
        const tuner_tensor *b = &op->inputs[1];
        const bool rows_ok = !(op->attrs.matmul.trans_a && op->inputs[0].shape[op->inputs[0].rank - 1] % 16) &&
                             !(!op->attrs.matmul.trans_b && b->shape[b->rank - 1] % 16);
        char amax_field[48];
        snprintf(amax_field, sizeof(amax_field), "epilogue[%d].amax", op->epilogue.n - 1);
        const char *field = !tuner_fp8_target(t)                       ? "arch"
                            : !wg && op->attrs.matmul.trans_a          ? "attrs.trans_a"
                            : !wg && !op->attrs.matmul.trans_b         ? "attrs.trans_b"
                            : !op->attrs.matmul.trans_b && b->shape[b->rank - 1] % 16 &&
                                      !(op->attrs.matmul.trans_a && op->inputs[0].shape[op->inputs[0].rank - 1] % 16)
                                ? "inputs[1].shape"
                            : !wg && rows_ok && tuner_fp8_amax_input(op) >= 0 && strstr(why, "amax")
                                ? amax_field
                                : "inputs[0].shape";
        return proto_fail(e, 422, "unsupported", field, "%s", why);
    }
    return 0;
}

int proto_parse_json_body(const char *body, size_t len, cJSON **root, proto_error *e)
{
    if (len == 0)
        return proto_fail(e, 400, "invalid_json", "", "the body is empty; a JSON object is expected");
    if (memchr(body, '\0', len))
        return proto_fail(e, 400, "invalid_json", "", "the body contains a NUL byte");
    int depth = json_depth(body, len);
    if (depth < 0)
        return proto_fail(e, 400, "invalid_json", "", "\\u0000 is not allowed in strings");
    if (depth > PROTO_MAX_JSON_DEPTH)
        return proto_fail(e, 400, "limit_exceeded", "", "JSON nesting deeper than %d", PROTO_MAX_JSON_DEPTH);
    char *copy = malloc(len + 1);
    if (!copy) {
        proto_fail(e, 500, "internal", "", "out of memory");
        return -ENOMEM;
    }
    memcpy(copy, body, len);
    copy[len] = '\0';
    const char *end = NULL;
    *root = cJSON_ParseWithOpts(copy, &end, true);
    int r = 0;
    if (!*root) {
        size_t at = end && end >= copy ? (size_t)(end - copy) : 0;
        if (!end || at > len) /* cJSON leaves end unset on allocation failure */
            at = 0;
        r = proto_fail(e, 400, "invalid_json", "", "malformed JSON near byte %zu", at);
    }
    free(copy);
    return r;
}

int proto_kernel_request_parse(const char *body, size_t len, proto_kernel_request *ret,
                               proto_error *ret_err)
{
    proto_kernel_request *req = NULL;
    cJSON *root = NULL;
    int r;

    if (!ret_err)
        return -EINVAL;
    if (!ret || (!body && len > 0))
        return proto_fail(ret_err, 500, "internal", "", "invalid arguments");
    if ((r = proto_parse_json_body(body, len, &root, ret_err)) < 0)
        return r;
    req = calloc(1, sizeof(*req));
    if (!req) {
        proto_fail(ret_err, 500, "internal", "", "out of memory");
        r = -ENOMEM;
        goto out;
    }
    r = validate(root, req, ret_err);
    if (r < 0)
        goto out;
    *ret = *req;
out:
    cJSON_Delete(root);
    free(req);
    return r;
}

/* ---------------------------------------------------------------------------------------------
 * Error bodies */

/* Length of the well-formed UTF-8 sequence at s (RFC 3629: no overlongs, no surrogates, at most
 * U+10FFFF), or 0 when the byte at s does not start one. */
static size_t utf8_seq_len(const unsigned char *s)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        else if (c == 0xED)
            hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90; /* overlong */
        else if (c == 0xF4)
            hi = 0x8F; /* past U+10FFFF */
    } else {
        return 0;
    }
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return n;
}

char *proto_utf8_escape(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    if (!s)
        s = "";
    size_t len = strlen(s);
    /* Each byte becomes at most four characters. */
    char *out = malloc(len * 4 + 1);
    if (!out)
        return NULL;
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0;
    while (*p) {
        size_t n = utf8_seq_len(p);
        if (n > 0) {
            memcpy(out + o, p, n);
            o += n;
            p += n;
            continue;
        }
        out[o++] = '\\';
        out[o++] = 'x';
        out[o++] = hex[*p >> 4];
        out[o++] = hex[*p & 15];
        p++;
    }
    out[o] = '\0';
    return out;
}

char *proto_error_json(int status, const char *code, const char *message, const char *field)
{
    (void)status;
    char *out = NULL;
    char *msg = proto_utf8_escape(message);
    char *fld = proto_utf8_escape(field);
    cJSON *root = cJSON_CreateObject();
    cJSON *err = cJSON_AddObjectToObject(root, "error");
    if (!msg || !fld || !err || !cJSON_AddStringToObject(err, "code", code ? code : "internal") ||
        !cJSON_AddStringToObject(err, "message", msg) ||
        !cJSON_AddStringToObject(err, "field", fld))
        goto out;
    out = cJSON_PrintUnformatted(root);
out:
    cJSON_Delete(root);
    free(msg);
    free(fld);
    return out;
}

char *proto_error_to_json(const proto_error *err)
{
    if (!err)
        return NULL;
    return proto_error_json(err->status, err->code, err->message, err->field);
}
