/* op/tmap.c - checks, JSON and packed forms of a kernel's tensor-map parameter (op/tmap.h). */
#include "op/tmap.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cJSON.h>

static int tmap_fail(char *why, size_t why_len, char *field, size_t field_len, const char *name,
                     const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static int tmap_fail(char *why, size_t why_len, char *field, size_t field_len, const char *name,
                     const char *fmt, ...)
{
    if (why && why_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
    if (field && field_len)
        snprintf(field, field_len, "%s", name);
    return -EINVAL;
}

#define FAIL(name, ...) tmap_fail(why, why_len, field, field_len, name, __VA_ARGS__)

/* The range of an im2col map's corners: 16 bits shared by its spatial dimensions. */
static int corner_bits(int rank)
{
    return rank == 3 ? 16 : rank == 4 ? 8 : 5;
}

static int check_im2col(const tuner_tmap *m, char *why, size_t why_len, char *field, size_t field_len)
{
    char name[32];
    if (m->rank < 3)
        return FAIL("dims", "an im2col map has rank 3..5 (channels, 1..3 spatial dimensions, images)");
    const int32_t lim = 1 << (corner_bits(m->rank) - 1);
    for (int i = 0; i < m->rank - 2; i++) {
        if (m->lower_corner[i] < -lim || m->lower_corner[i] >= lim) {
            snprintf(name, sizeof(name), "lower_corner[%d]", i);
            return FAIL(name, "a corner of a rank-%d im2col map must be in %d..%d", m->rank, -lim, lim - 1);
        }
        if (m->upper_corner[i] < -lim || m->upper_corner[i] >= lim) {
            snprintf(name, sizeof(name), "upper_corner[%d]", i);
            return FAIL(name, "a corner of a rank-%d im2col map must be in %d..%d", m->rank, -lim, lim - 1);
        }
        /* dims - 1 + upper >= lower: the bounding box holds a pixel. */
        if ((int64_t)m->dims[i + 1] - 1 + m->upper_corner[i] < m->lower_corner[i]) {
            snprintf(name, sizeof(name), "upper_corner[%d]", i);
            return FAIL(name, "the bounding box of spatial dimension %d holds no pixel", i);
        }
    }
    for (int i = m->rank - 2; i < TUNER_TMAP_MAX_RANK - 2; i++)
        if (m->lower_corner[i] || m->upper_corner[i])
            return FAIL("lower_corner", "a corner past the map's spatial dimensions");
    if (m->channels_per_pixel < 1 || m->channels_per_pixel > 256)
        return FAIL("channels_per_pixel", "channels_per_pixel must be 1..256");
    if (m->pixels_per_column < 1 || m->pixels_per_column > 1024)
        return FAIL("pixels_per_column", "pixels_per_column must be 1..1024");
    for (int d = 0; d < TUNER_TMAP_MAX_RANK; d++)
        if (m->box[d])
            return FAIL("box", "an im2col map has no box");
    return 0;
}

int tuner_tmap_check(const tuner_tmap *m, char *why, size_t why_len, char *field, size_t field_len)
{
    char name[32];
    if (m->mode != TUNER_TMAP_TILED && m->mode != TUNER_TMAP_IM2COL)
        return FAIL("mode", "mode must be \"tiled\" or \"im2col\"");
    const bool im2col = m->mode == TUNER_TMAP_IM2COL;
    if (m->dtype != TUNER_F16 && m->dtype != TUNER_BF16 && m->dtype != TUNER_F32 && !tuner_dtype_is_fp8(m->dtype))
        return FAIL("dtype", "element type must be f16, bf16, f32, f8e4m3 or f8e5m2");
    if (m->rank < 1 || m->rank > TUNER_TMAP_MAX_RANK)
        return FAIL("dims", "rank must be 1..%d", TUNER_TMAP_MAX_RANK);
    const int esz = tuner_dtype_size(m->dtype);
    for (int d = 0; d < m->rank; d++) {
        if (m->dims[d] < 1 || m->dims[d] > (1ull << 32)) {
            snprintf(name, sizeof(name), "dims[%d]", d);
            return FAIL(name, "a dimension must be 1..2^32 elements");
        }
        if (!im2col && (m->box[d] < 1 || m->box[d] > 256)) {
            snprintf(name, sizeof(name), "box[%d]", d);
            return FAIL(name, "a box dimension must be 1..256 elements");
        }
        if (m->element_strides[d] < 1 || m->element_strides[d] > 8) {
            snprintf(name, sizeof(name), "element_strides[%d]", d);
            return FAIL(name, "an element stride must be 1..8");
        }
    }
    for (int d = 0; d < TUNER_TMAP_MAX_RANK; d++) {
        snprintf(name, sizeof(name), "dims[%d]", d);
        if (!m->sym[d]) {
            if (m->sym_coef[d])
                return FAIL(name, "a fixed dimension has no coefficient");
            continue;
        }
        if (d >= m->rank)
            return FAIL(name, "a dimension past the map's rank follows named dims");
        if (im2col)
            return FAIL(name, "only a tiled map's dimensions may follow named dims");
        if (m->sym[d] >> TUNER_MAX_DIMS)
            return FAIL(name, "a dimension follows a named dim beyond the op's %d", TUNER_MAX_DIMS);
        if (m->sym_coef[d] < 1 || m->dims[d] % m->sym_coef[d])
            return FAIL(name, "a dimension that follows named dims has a coefficient >= 1 that divides its "
                              "value at the dims' max");
    }
    for (int d = 0; d + 1 < m->rank; d++)
        if (m->strides[d] == 0 || m->strides[d] % 16 || m->strides[d] >= (1ull << 40)) {
            snprintf(name, sizeof(name), "strides[%d]", d);
            return FAIL(name, "a stride must be a positive multiple of 16 bytes below 2^40");
        }
    if (im2col) {
        int r = check_im2col(m, why, why_len, field, field_len);
        if (r < 0)
            return r;
    } else {
        for (int i = 0; i < TUNER_TMAP_MAX_RANK - 2; i++)
            if (m->lower_corner[i] || m->upper_corner[i])
                return FAIL("lower_corner", "only an im2col map has corners");
        if (m->channels_per_pixel || m->pixels_per_column)
            return FAIL("channels_per_pixel", "only an im2col map has pixels and channels per copy");
    }
    /* What one copy writes per row of shared memory. */
    const char *row = im2col ? "channels_per_pixel" : "box[0]";
    const unsigned inner = (im2col ? m->channels_per_pixel : m->box[0]) * (unsigned)esz;
    if (inner % 16)
        return FAIL(row, "a copy's row (%s) must be a multiple of 16 bytes", row);
    if (m->swizzle != 0 && m->swizzle != 32 && m->swizzle != 64 && m->swizzle != 128)
        return FAIL("swizzle", "swizzle must be 0, 32, 64 or 128 bytes");
    if (m->swizzle && inner > (unsigned)m->swizzle)
        return FAIL(row, "a copy's row (%u bytes) exceeds the swizzle span", inner);
    if (m->l2_promotion != 0 && m->l2_promotion != 64 && m->l2_promotion != 128 && m->l2_promotion != 256)
        return FAIL("l2_promotion", "l2_promotion must be 0, 64, 128 or 256 bytes");
    if (m->oob_fill != TUNER_TMAP_OOB_ZERO && m->oob_fill != TUNER_TMAP_OOB_NAN)
        return FAIL("oob_fill", "oob_fill must be \"zero\" or \"nan\"");
    return 0;
}

static const char *oob_name(tuner_tmap_oob o)
{
    return o == TUNER_TMAP_OOB_NAN ? "nan" : "zero";
}

/* Appends n numbers to a new array member of j; false when out of memory. */
static bool add_numbers(cJSON *j, const char *member, int n, double (*at)(const tuner_tmap *, int), const tuner_tmap *m)
{
    cJSON *a = cJSON_AddArrayToObject(j, member);
    for (int i = 0; a && i < n; i++)
        if (!cJSON_AddItemToArray(a, cJSON_CreateNumber(at(m, i))))
            return false;
    return a != NULL;
}

static double dim_at(const tuner_tmap *m, int i) { return (double)m->dims[i]; }
static double stride_at(const tuner_tmap *m, int i) { return (double)m->strides[i]; }
static double box_at(const tuner_tmap *m, int i) { return m->box[i]; }
static double estride_at(const tuner_tmap *m, int i) { return m->element_strides[i]; }
static double lower_at(const tuner_tmap *m, int i) { return m->lower_corner[i]; }
static double upper_at(const tuner_tmap *m, int i) { return m->upper_corner[i]; }

/* The "dims" member: numbers, a symbolic dimension as {"dims":[names or indices],"coef":N}. */
static bool add_dims(cJSON *j, const tuner_tmap *m, const tuner_tmap_dims *names)
{
    if (!tuner_tmap_is_symbolic(m))
        return add_numbers(j, "dims", m->rank, dim_at, m);
    cJSON *a = cJSON_AddArrayToObject(j, "dims");
    for (int i = 0; a && i < m->rank; i++) {
        cJSON *v = m->sym[i] ? cJSON_CreateObject() : cJSON_CreateNumber((double)m->dims[i]);
        if (!v || !cJSON_AddItemToArray(a, v)) {
            cJSON_Delete(v);
            return false;
        }
        if (!m->sym[i])
            continue;
        cJSON *which = cJSON_AddArrayToObject(v, "dims");
        for (int k = 0; which && k < TUNER_MAX_DIMS; k++) {
            if (!(m->sym[i] & (1u << k)))
                continue;
            cJSON *e = names && names->name ? cJSON_CreateString(names->name(names->ctx, k))
                                            : cJSON_CreateNumber(k);
            if (!e || !cJSON_AddItemToArray(which, e)) {
                cJSON_Delete(e);
                return false;
            }
        }
        if (!which || !cJSON_AddNumberToObject(v, "coef", (double)m->sym_coef[i]))
            return false;
    }
    return a != NULL;
}

cJSON *tuner_tmap_to_json(const tuner_tmap *m)
{
    return tuner_tmap_to_json_dims(m, NULL);
}

cJSON *tuner_tmap_to_json_dims(const tuner_tmap *m, const tuner_tmap_dims *names)
{
    cJSON *j = cJSON_CreateObject();
    if (!j)
        return NULL;
    const bool im2col = m->mode == TUNER_TMAP_IM2COL;
    bool ok = !im2col || cJSON_AddStringToObject(j, "mode", "im2col");
    ok = ok && cJSON_AddStringToObject(j, "dtype", tuner_dtype_name(m->dtype)) &&
         add_dims(j, m, names) && add_numbers(j, "strides", m->rank - 1, stride_at, m) &&
         (im2col || add_numbers(j, "box", m->rank, box_at, m)) &&
         add_numbers(j, "element_strides", m->rank, estride_at, m);
    if (ok && im2col)
        ok = add_numbers(j, "lower_corner", m->rank - 2, lower_at, m) &&
             add_numbers(j, "upper_corner", m->rank - 2, upper_at, m) &&
             cJSON_AddNumberToObject(j, "channels_per_pixel", m->channels_per_pixel) &&
             cJSON_AddNumberToObject(j, "pixels_per_column", m->pixels_per_column);
    ok = ok && cJSON_AddNumberToObject(j, "swizzle", m->swizzle) &&
         cJSON_AddNumberToObject(j, "l2_promotion", m->l2_promotion) &&
         cJSON_AddStringToObject(j, "oob_fill", oob_name(m->oob_fill));
    if (!ok) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

bool tuner_tmaps_add_json(cJSON *obj, const tuner_tmap *maps, int n, const char *buf_member,
                          cJSON *(*buf_item)(int buf))
{
    cJSON *arr = n ? cJSON_AddArrayToObject(obj, "maps") : NULL;
    for (int i = 0; i < n; i++) {
        cJSON *mj = arr ? tuner_tmap_to_json(&maps[i]) : NULL;
        if (!mj || !cJSON_AddItemToArray(arr, mj)) {
            cJSON_Delete(mj);
            return false;
        }
        if (!cJSON_AddItemToObject(mj, buf_member, buf_item(maps[i].buf)))
            return false;
    }
    return true;
}

/* A whole number in [lo, hi] (doubles hold every value up to 2^53 exactly). */
static bool whole_in(const cJSON *v, double lo, double hi, int64_t *ret)
{
    if (!cJSON_IsNumber(v))
        return false;
    const double x = v->valuedouble;
    if (!(x >= lo && x <= hi) || floor(x) != x)
        return false;
    *ret = (int64_t)x;
    return true;
}

/* A JSON array of lo_n..hi_n whole numbers in [lo, hi], or -EINVAL naming the member. */
static int parse_list(const cJSON *j, const char *member, int lo_n, int hi_n, double lo, double hi,
                      int64_t *out, int *n, char *why, size_t why_len, char *field, size_t field_len)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, member);
    if (!cJSON_IsArray(a))
        return FAIL(member, "%s must be an array", member);
    const int len = cJSON_GetArraySize(a);
    if (len < lo_n || len > hi_n)
        return FAIL(member, "%s must have %d..%d entries", member, lo_n, hi_n);
    int i = 0;
    for (const cJSON *v = a->child; v; v = v->next, i++) {
        if (!whole_in(v, lo, hi, &out[i])) {
            char name[32];
            snprintf(name, sizeof(name), "%s[%d]", member, i);
            return FAIL(name, "%s entries must be whole numbers in %.0f..%.0f", member, lo, hi);
        }
    }
    *n = len;
    return 0;
}

/* Whether member is one of the n names. */
static bool one_of(const char *member, const char *const *names, size_t n)
{
    for (size_t i = 0; member && i < n; i++)
        if (strcmp(member, names[i]) == 0)
            return true;
    return false;
}

/* One symbolic dimension {"dims":[names or indices],"coef":N} of "dims" (entry d) into m. */
static int parse_sym_dim(const cJSON *v, int d, const tuner_tmap_dims *names, tuner_tmap *m, char *why,
                         size_t why_len, char *field, size_t field_len)
{
    char name[32];
    snprintf(name, sizeof(name), "dims[%d]", d);
    if (!names)
        return FAIL(name, "a tensor map's dimension follows named dims its format does not carry");
    if (m->mode != TUNER_TMAP_TILED)
        return FAIL(name, "only a tiled map's dimensions may follow named dims");
    const cJSON *which = cJSON_GetObjectItemCaseSensitive(v, "dims");
    int64_t coef;
    if (cJSON_GetArraySize(v) != 2 || !cJSON_IsArray(which) || cJSON_GetArraySize(which) < 1 ||
        !whole_in(cJSON_GetObjectItemCaseSensitive(v, "coef"), 1, 4294967296.0, &coef))
        return FAIL(name, "a dimension that follows named dims is {\"dims\": [%s...], \"coef\": N >= 1}",
                    names->name ? "names" : "indices");
    unsigned set = 0;
    uint64_t at_max = (uint64_t)coef;
    for (const cJSON *e = which->child; e; e = e->next) {
        int k = -1;
        if (names->name) {
            for (int i = 0; cJSON_IsString(e) && i < names->n && k < 0; i++)
                if (strcmp(e->valuestring, names->name(names->ctx, i)) == 0)
                    k = i;
        } else {
            int64_t x;
            if (whole_in(e, 0, names->n - 1, &x))
                k = (int)x;
        }
        if (k < 0)
            return FAIL(name, "a dimension follows %s that is not one of the op's %d named dims",
                        names->name ? "a name" : "an index", names->n);
        if (set & (1u << k))
            return FAIL(name, "a dimension names a dim twice");
        set |= 1u << k;
        if (!names->max || names->max[k] < 1 || __builtin_mul_overflow(at_max, (uint64_t)names->max[k], &at_max))
            at_max = UINT64_MAX;
    }
    if (at_max > (1ull << 32))
        return FAIL(name, "a dimension that follows named dims is beyond 2^32 elements at their max");
    m->sym[d] = (uint8_t)set;
    m->sym_coef[d] = (uint64_t)coef;
    m->dims[d] = at_max;
    return 0;
}

/* "dims" as parse_list reads it, where an entry may also be a symbolic dimension. */
static int parse_dims(const cJSON *j, int lo_n, const tuner_tmap_dims *names, tuner_tmap *m, int *n, char *why,
                      size_t why_len, char *field, size_t field_len)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "dims");
    if (!cJSON_IsArray(a))
        return FAIL("dims", "dims must be an array");
    const int len = cJSON_GetArraySize(a);
    if (len < lo_n || len > TUNER_TMAP_MAX_RANK)
        return FAIL("dims", "dims must have %d..%d entries", lo_n, TUNER_TMAP_MAX_RANK);
    int i = 0, r;
    for (const cJSON *v = a->child; v; v = v->next, i++) {
        int64_t x;
        if (cJSON_IsObject(v)) {
            if ((r = parse_sym_dim(v, i, names, m, why, why_len, field, field_len)) < 0)
                return r;
        } else if (whole_in(v, 1, 4294967296.0, &x)) {
            m->dims[i] = (uint64_t)x;
        } else {
            char name[32];
            snprintf(name, sizeof(name), "dims[%d]", i);
            return FAIL(name, "dims entries must be whole numbers in 1..4294967296");
        }
    }
    *n = len;
    return 0;
}

int tuner_tmap_from_json(const cJSON *j, const char *own_member, tuner_tmap *ret, char *why, size_t why_len,
                         char *field, size_t field_len)
{
    return tuner_tmap_from_json_dims(j, own_member, NULL, ret, why, why_len, field, field_len);
}

int tuner_tmap_from_json_dims(const cJSON *j, const char *own_member, const tuner_tmap_dims *names, tuner_tmap *ret,
                              char *why, size_t why_len, char *field, size_t field_len)
{
    static const char *const common[] = {"mode", "dtype", "dims", "strides", "element_strides",
                                         "swizzle", "l2_promotion", "oob_fill"};
    static const char *const tiled[] = {"box"};
    static const char *const im2col[] = {"lower_corner", "upper_corner", "channels_per_pixel", "pixels_per_column"};
    if (!cJSON_IsObject(j))
        return FAIL("tensor_map", "a tensor map must be an object");
    tuner_tmap m = {.buf = ret->buf};
    const cJSON *mode = cJSON_GetObjectItemCaseSensitive(j, "mode");
    if (mode && cJSON_IsString(mode) && strcmp(mode->valuestring, "im2col") == 0)
        m.mode = TUNER_TMAP_IM2COL;
    else if (mode && !(cJSON_IsString(mode) && strcmp(mode->valuestring, "tiled") == 0))
        return FAIL("mode", "mode must be \"tiled\" or \"im2col\"");
    const bool is_im2col = m.mode == TUNER_TMAP_IM2COL;
    for (const cJSON *c = j->child; c; c = c->next) {
        const bool known = (own_member && c->string && strcmp(c->string, own_member) == 0) ||
                           one_of(c->string, common, sizeof(common) / sizeof(common[0])) ||
                           (is_im2col ? one_of(c->string, im2col, sizeof(im2col) / sizeof(im2col[0]))
                                      : one_of(c->string, tiled, 1));
        if (!known)
            return FAIL(c->string ? c->string : "tensor_map", "unknown member of %s tensor map",
                        is_im2col ? "an im2col" : "a tiled");
    }
    if (tuner_dtype_parse(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "dtype")), &m.dtype) < 0)
        return FAIL("dtype", "dtype must be \"f16\", \"bf16\", \"f32\", \"f8e4m3\" or \"f8e5m2\"");
    int64_t v[TUNER_TMAP_MAX_RANK];
    int n_dims, n, r;
    if ((r = parse_dims(j, is_im2col ? 3 : 1, names, &m, &n_dims, why, why_len, field, field_len)) < 0)
        return r;
    m.rank = n_dims;
    if ((r = parse_list(j, "strides", n_dims - 1, n_dims - 1, 16, 1099511627775.0, v, &n, why, why_len, field,
                        field_len)) < 0)
        return r;
    for (int d = 0; d + 1 < n_dims; d++)
        m.strides[d] = (uint64_t)v[d];
    if (!is_im2col) {
        if ((r = parse_list(j, "box", n_dims, n_dims, 1, 256, v, &n, why, why_len, field, field_len)) < 0)
            return r;
        for (int d = 0; d < n_dims; d++)
            m.box[d] = (uint32_t)v[d];
    }
    if ((r = parse_list(j, "element_strides", n_dims, n_dims, 1, 8, v, &n, why, why_len, field, field_len)) < 0)
        return r;
    for (int d = 0; d < n_dims; d++)
        m.element_strides[d] = (uint32_t)v[d];
    int64_t x;
    if (is_im2col) {
        if ((r = parse_list(j, "lower_corner", n_dims - 2, n_dims - 2, -32768, 32767, v, &n, why, why_len, field,
                            field_len)) < 0)
            return r;
        for (int i = 0; i < n; i++)
            m.lower_corner[i] = (int32_t)v[i];
        if ((r = parse_list(j, "upper_corner", n_dims - 2, n_dims - 2, -32768, 32767, v, &n, why, why_len, field,
                            field_len)) < 0)
            return r;
        for (int i = 0; i < n; i++)
            m.upper_corner[i] = (int32_t)v[i];
        if (!whole_in(cJSON_GetObjectItemCaseSensitive(j, "channels_per_pixel"), 1, 256, &x))
            return FAIL("channels_per_pixel", "channels_per_pixel must be a whole number in 1..256");
        m.channels_per_pixel = (uint32_t)x;
        if (!whole_in(cJSON_GetObjectItemCaseSensitive(j, "pixels_per_column"), 1, 1024, &x))
            return FAIL("pixels_per_column", "pixels_per_column must be a whole number in 1..1024");
        m.pixels_per_column = (uint32_t)x;
    }
    if (!whole_in(cJSON_GetObjectItemCaseSensitive(j, "swizzle"), 0, 128, &x))
        return FAIL("swizzle", "swizzle must be 0, 32, 64 or 128");
    m.swizzle = (int)x;
    if (!whole_in(cJSON_GetObjectItemCaseSensitive(j, "l2_promotion"), 0, 256, &x))
        return FAIL("l2_promotion", "l2_promotion must be 0, 64, 128 or 256");
    m.l2_promotion = (int)x;
    const char *oob = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "oob_fill"));
    if (oob && strcmp(oob, "zero") == 0)
        m.oob_fill = TUNER_TMAP_OOB_ZERO;
    else if (oob && strcmp(oob, "nan") == 0)
        m.oob_fill = TUNER_TMAP_OOB_NAN;
    else
        return FAIL("oob_fill", "oob_fill must be \"zero\" or \"nan\"");
    if ((r = tuner_tmap_check(&m, why, why_len, field, field_len)) < 0)
        return r;
    *ret = m;
    return 0;
}

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Record layout: buf, dtype, rank, swizzle/16, l2_promotion/16, oob_fill, mode, a zero byte,
 * then dims (5 x 8), strides (4 x 8), 20 bytes of what one copy moves, element_strides (5 x 4);
 * unused entries zero. Tiled, those 20 bytes are box (5 x 4); im2col, channels_per_pixel and
 * pixels_per_column (4 bytes each), then lower_corner and upper_corner (3 x 2 each, two's
 * complement), which is how a tiled map's record stayed what it was before im2col maps. */
void tuner_tmap_pack(const tuner_tmap *m, uint8_t out[TUNER_TMAP_PACKED])
{
    memset(out, 0, TUNER_TMAP_PACKED);
    out[0] = (uint8_t)m->buf;
    out[1] = (uint8_t)m->dtype;
    out[2] = (uint8_t)m->rank;
    out[3] = (uint8_t)(m->swizzle / 16);
    out[4] = (uint8_t)(m->l2_promotion / 16);
    out[5] = (uint8_t)m->oob_fill;
    out[6] = (uint8_t)m->mode;
    uint8_t *p = out + 8;
    for (int d = 0; d < TUNER_TMAP_MAX_RANK; d++, p += 8)
        put_le(p, d < m->rank ? m->dims[d] : 0, 8);
    for (int d = 0; d < TUNER_TMAP_MAX_RANK - 1; d++, p += 8)
        put_le(p, d + 1 < m->rank ? m->strides[d] : 0, 8);
    if (m->mode == TUNER_TMAP_IM2COL) {
        put_le(p, m->channels_per_pixel, 4);
        put_le(p + 4, m->pixels_per_column, 4);
        for (int i = 0; i < TUNER_TMAP_MAX_RANK - 2; i++) {
            put_le(p + 8 + 2 * i, (uint16_t)(i < m->rank - 2 ? m->lower_corner[i] : 0), 2);
            put_le(p + 14 + 2 * i, (uint16_t)(i < m->rank - 2 ? m->upper_corner[i] : 0), 2);
        }
        p += 20;
    } else {
        for (int d = 0; d < TUNER_TMAP_MAX_RANK; d++, p += 4)
            put_le(p, d < m->rank ? m->box[d] : 0, 4);
    }
    for (int d = 0; d < TUNER_TMAP_MAX_RANK; d++, p += 4)
        put_le(p, d < m->rank ? m->element_strides[d] : 0, 4);
}
_Static_assert(8 + 5 * 8 + 4 * 8 + 5 * 4 + 5 * 4 == TUNER_TMAP_PACKED, "tuner_tmap_pack's record size");
_Static_assert(4 + 4 + 2 * 2 * (TUNER_TMAP_MAX_RANK - 2) == 5 * 4, "an im2col map's fields fill a box's bytes");

int tuner_tmap_unpack(const uint8_t in[TUNER_TMAP_PACKED], int max_buf, tuner_tmap *ret)
{
    tuner_tmap m = {0};
    m.buf = in[0];
    m.dtype = (tuner_dtype)in[1];
    m.rank = in[2];
    m.swizzle = in[3] * 16;
    m.l2_promotion = in[4] * 16;
    m.oob_fill = (tuner_tmap_oob)in[5];
    m.mode = (tuner_tmap_mode)in[6];
    if (m.buf > max_buf || m.rank < 1 || m.rank > TUNER_TMAP_MAX_RANK || in[7])
        return -EINVAL;
    const uint8_t *p = in + 8;
    for (int d = 0; d < TUNER_TMAP_MAX_RANK; d++, p += 8)
        m.dims[d] = get_le(p, 8);
    for (int d = 0; d < TUNER_TMAP_MAX_RANK - 1; d++, p += 8)
        m.strides[d] = get_le(p, 8);
    if (m.mode == TUNER_TMAP_IM2COL) {
        m.channels_per_pixel = (uint32_t)get_le(p, 4);
        m.pixels_per_column = (uint32_t)get_le(p + 4, 4);
        for (int i = 0; i < TUNER_TMAP_MAX_RANK - 2; i++) {
            m.lower_corner[i] = (int16_t)get_le(p + 8 + 2 * i, 2);
            m.upper_corner[i] = (int16_t)get_le(p + 14 + 2 * i, 2);
        }
        p += 20;
    } else {
        for (int d = 0; d < TUNER_TMAP_MAX_RANK; d++, p += 4)
            m.box[d] = (uint32_t)get_le(p, 4);
    }
    for (int d = 0; d < TUNER_TMAP_MAX_RANK; d++, p += 4)
        m.element_strides[d] = (uint32_t)get_le(p, 4);
    if (tuner_tmap_check(&m, NULL, 0, NULL, 0) < 0)
        return -EINVAL;
    *ret = m;
    return 0;
}

bool tuner_tmap_equal(const tuner_tmap *a, const tuner_tmap *b)
{
    uint8_t pa[TUNER_TMAP_PACKED], pb[TUNER_TMAP_PACKED];
    tuner_tmap_pack(a, pa);
    tuner_tmap_pack(b, pb);
    return memcmp(pa, pb, sizeof(pa)) == 0 && memcmp(a->sym, b->sym, sizeof(a->sym)) == 0 &&
           memcmp(a->sym_coef, b->sym_coef, sizeof(a->sym_coef)) == 0;
}

bool tuner_tmap_is_symbolic(const tuner_tmap *m)
{
    for (int d = 0; d < TUNER_TMAP_MAX_RANK; d++)
        if (m->sym[d])
            return true;
    return false;
}

int tuner_tmap_bind(const tuner_tmap *m, const int64_t *sizes, tuner_tmap *out)
{
    tuner_tmap b = *m;
    for (int d = 0; d < TUNER_TMAP_MAX_RANK; d++) {
        if (!m->sym[d])
            continue;
        uint64_t v = m->sym_coef[d];
        for (int k = 0; k < TUNER_MAX_DIMS; k++) {
            if (!(m->sym[d] & (1u << k)))
                continue;
            if (sizes[k] < 1 || __builtin_mul_overflow(v, (uint64_t)sizes[k], &v))
                return -EINVAL;
        }
        b.dims[d] = v;
        b.sym[d] = 0;
        b.sym_coef[d] = 0;
    }
    if (tuner_tmap_check(&b, NULL, 0, NULL, 0) < 0)
        return -EINVAL;
    *out = b;
    return 0;
}

uint64_t tuner_tmap_extent(const tuner_tmap *m)
{
    uint64_t end, step;
    if (__builtin_mul_overflow(m->dims[0], (uint64_t)tuner_dtype_size(m->dtype), &end))
        return UINT64_MAX;
    for (int d = 1; d < m->rank && d < TUNER_TMAP_MAX_RANK; d++)
        if (m->dims[d] == 0 || __builtin_mul_overflow(m->dims[d] - 1, m->strides[d - 1], &step) ||
            __builtin_add_overflow(end, step, &end))
            return UINT64_MAX;
    return end;
}

int tuner_tmap_cu_dtype(const tuner_tmap *m)
{
    /* CU_TENSOR_MAP_DATA_TYPE_UINT8 0, _FLOAT16 6, _FLOAT32 7, _BFLOAT16 9; the copy engine only
     * moves bytes, so FP8 travels as UINT8 (CUDA 12's maps have no FP8 type). */
    return tuner_dtype_is_fp8(m->dtype) ? 0 : m->dtype == TUNER_F16 ? 6 : m->dtype == TUNER_BF16 ? 9 : 7;
}

int tuner_tmap_cu_swizzle(const tuner_tmap *m)
{
    /* CU_TENSOR_MAP_SWIZZLE_NONE 0, _32B 1, _64B 2, _128B 3 */
    return m->swizzle == 32 ? 1 : m->swizzle == 64 ? 2 : m->swizzle == 128 ? 3 : 0;
}

int tuner_tmap_cu_l2_promotion(const tuner_tmap *m)
{
    /* CU_TENSOR_MAP_L2_PROMOTION_NONE 0, _L2_64B 1, _L2_128B 2, _L2_256B 3 */
    return m->l2_promotion == 64 ? 1 : m->l2_promotion == 128 ? 2 : m->l2_promotion == 256 ? 3 : 0;
}

int tuner_tmap_cu_oob_fill(const tuner_tmap *m)
{
    /* CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE 0 (zeros), _NAN_REQUEST_ZERO_FMA 1 */
    return m->oob_fill == TUNER_TMAP_OOB_NAN ? 1 : 0;
}

const char *tuner_tmap_encoder_name(const tuner_tmap *m)
{
    return m->mode == TUNER_TMAP_IM2COL ? "cuTensorMapEncodeIm2col" : "cuTensorMapEncodeTiled";
}

bool tuner_tmap_can_encode(const tuner_tmap *m, const tuner_tmap_encoders *enc)
{
    return m->mode == TUNER_TMAP_IM2COL ? enc->im2col != NULL : enc->tiled != NULL;
}

int tuner_tmap_encode(const tuner_tmap *m, uint64_t addr, void *out, const tuner_tmap_encoders *enc)
{
    if (!tuner_tmap_can_encode(m, enc))
        return -ENOSYS;
    /* The encoders read rank - 1 strides and rank - 2 corners: hand them exactly the map's. */
    uint64_t dims[TUNER_TMAP_MAX_RANK] = {0}, strides[TUNER_TMAP_MAX_RANK - 1] = {0};
    uint32_t es[TUNER_TMAP_MAX_RANK] = {0};
    for (int d = 0; d < m->rank && d < TUNER_TMAP_MAX_RANK; d++) {
        dims[d] = m->dims[d];
        es[d] = m->element_strides[d];
        if (d + 1 < m->rank)
            strides[d] = m->strides[d];
    }
    void *const address = (void *)(uintptr_t)addr;
    if (m->mode == TUNER_TMAP_IM2COL) {
        int lower[TUNER_TMAP_MAX_RANK - 2] = {0}, upper[TUNER_TMAP_MAX_RANK - 2] = {0};
        for (int i = 0; i < m->rank - 2 && i < TUNER_TMAP_MAX_RANK - 2; i++)
            lower[i] = m->lower_corner[i], upper[i] = m->upper_corner[i];
        return enc->im2col(out, tuner_tmap_cu_dtype(m), (uint32_t)m->rank, address, dims, strides, lower, upper,
                           m->channels_per_pixel, m->pixels_per_column, es, 0 /* no interleave */,
                           tuner_tmap_cu_swizzle(m), tuner_tmap_cu_l2_promotion(m), tuner_tmap_cu_oob_fill(m));
    }
    return enc->tiled(out, tuner_tmap_cu_dtype(m), (uint32_t)m->rank, address, dims, strides, m->box, es,
                      0 /* no interleave */, tuner_tmap_cu_swizzle(m), tuner_tmap_cu_l2_promotion(m),
                      tuner_tmap_cu_oob_fill(m));
}
