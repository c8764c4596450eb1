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

int tuner_tmap_check(const tuner_tmap *m, char *why, size_t why_len, char *field, size_t field_len)
{
    char name[32];
    if (m->dtype != TUNER_F16 && m->dtype != TUNER_BF16 && m->dtype != TUNER_F32)
        return FAIL("dtype", "element type must be f16, bf16 or f32");
    if (m->rank < 1 || m->rank > TUNER_TMAP_MAX_RANK)
        return FAIL("dims", "rank must be 1..%d", TUNER_TMAP_MAX_RANK);
    const int esz = tuner_dtype_size(m->dtype);
    for (int d = 0; d < m->rank; d++) {
        if (m->dims[d] < 1 || m->dims[d] > (1ull << 32)) {
            snprintf(name, sizeof(name), "dims[%d]", d);
            return FAIL(name, "a dimension must be 1..2^32 elements");
        }
        if (m->box[d] < 1 || m->box[d] > 256) {
            snprintf(name, sizeof(name), "box[%d]", d);
            return FAIL(name, "a box dimension must be 1..256 elements");
        }
        if (m->element_strides[d] < 1 || m->element_strides[d] > 8) {
            snprintf(name, sizeof(name), "element_strides[%d]", d);
            return FAIL(name, "an element stride must be 1..8");
        }
    }
    for (int d = 0; d + 1 < m->rank; d++)
        if (m->strides[d] == 0 || m->strides[d] % 16 || m->strides[d] >= (1ull << 40)) {
            snprintf(name, sizeof(name), "strides[%d]", d);
            return FAIL(name, "a stride must be a positive multiple of 16 bytes below 2^40");
        }
    const unsigned inner = m->box[0] * (unsigned)esz;
    if (inner % 16)
        return FAIL("box[0]", "the box's inner dimension must be a multiple of 16 bytes");
    if (m->swizzle != 0 && m->swizzle != 32 && m->swizzle != 64 && m->swizzle != 128)
        return FAIL("swizzle", "swizzle must be 0, 32, 64 or 128 bytes");
    if (m->swizzle && inner > (unsigned)m->swizzle)
        return FAIL("box[0]", "the box's inner dimension (%u bytes) exceeds the swizzle span", inner);
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

cJSON *tuner_tmap_to_json(const tuner_tmap *m)
{
    cJSON *j = cJSON_CreateObject();
    if (!j)
        return NULL;
    bool ok = cJSON_AddStringToObject(j, "dtype", tuner_dtype_name(m->dtype)) != NULL;
    cJSON *dims = cJSON_AddArrayToObject(j, "dims");
    cJSON *strides = cJSON_AddArrayToObject(j, "strides");
    cJSON *box = cJSON_AddArrayToObject(j, "box");
    cJSON *es = cJSON_AddArrayToObject(j, "element_strides");
    ok = ok && dims && strides && box && es;
    for (int d = 0; ok && d < m->rank; d++) {
        ok = cJSON_AddItemToArray(dims, cJSON_CreateNumber((double)m->dims[d])) &&
             cJSON_AddItemToArray(box, cJSON_CreateNumber(m->box[d])) &&
             cJSON_AddItemToArray(es, cJSON_CreateNumber(m->element_strides[d]));
        if (ok && d + 1 < m->rank)
            ok = cJSON_AddItemToArray(strides, cJSON_CreateNumber((double)m->strides[d]));
    }
    ok = ok && cJSON_AddNumberToObject(j, "swizzle", m->swizzle) &&
         cJSON_AddNumberToObject(j, "l2_promotion", m->l2_promotion) &&
         cJSON_AddStringToObject(j, "oob_fill", oob_name(m->oob_fill));
    if (!ok) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* A whole number in [lo, hi] (doubles hold every value up to 2^53 exactly). */
static bool whole_in(const cJSON *v, double lo, double hi, uint64_t *ret)
{
    if (!cJSON_IsNumber(v))
        return false;
    const double x = v->valuedouble;
    if (!(x >= lo && x <= hi) || floor(x) != x)
        return false;
    *ret = (uint64_t)x;
    return true;
}

/* A JSON array of n whole numbers in [lo, hi], or -EINVAL naming the member. */
static int parse_list(const cJSON *j, const char *member, int lo_n, int hi_n, double lo, double hi,
                      uint64_t *out, int *n, char *why, size_t why_len, char *field, size_t field_len)
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

int tuner_tmap_from_json(const cJSON *j, const char *own_member, tuner_tmap *ret, char *why, size_t why_len,
                         char *field, size_t field_len)
{
    static const char *const members[] = {"dtype", "dims", "strides", "box", "element_strides",
                                          "swizzle", "l2_promotion", "oob_fill"};
    if (!cJSON_IsObject(j))
        return FAIL("tensor_map", "a tensor map must be an object");
    for (const cJSON *c = j->child; c; c = c->next) {
        bool known = own_member && c->string && strcmp(c->string, own_member) == 0;
        for (size_t i = 0; i < sizeof(members) / sizeof(members[0]); i++)
            known = known || (c->string && strcmp(c->string, members[i]) == 0);
        if (!known)
            return FAIL(c->string ? c->string : "tensor_map", "unknown member");
    }
    tuner_tmap m = {.buf = ret->buf};
    if (tuner_dtype_parse(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "dtype")), &m.dtype) < 0)
        return FAIL("dtype", "dtype must be \"f16\", \"bf16\" or \"f32\"");
    uint64_t v[TUNER_TMAP_MAX_RANK];
    int n_dims, n;
    int r = parse_list(j, "dims", 1, TUNER_TMAP_MAX_RANK, 1, 4294967296.0, m.dims, &n_dims, why, why_len, field,
                       field_len);
    if (r < 0)
        return r;
    m.rank = n_dims;
    if ((r = parse_list(j, "strides", n_dims - 1, n_dims - 1, 16, 1099511627775.0, m.strides, &n, why, why_len,
                        field, field_len)) < 0)
        return r;
    if ((r = parse_list(j, "box", n_dims, n_dims, 1, 256, v, &n, why, why_len, field, field_len)) < 0)
        return r;
    for (int d = 0; d < n_dims; d++)
        m.box[d] = (uint32_t)v[d];
    if ((r = parse_list(j, "element_strides", n_dims, n_dims, 1, 8, v, &n, why, why_len, field, field_len)) < 0)
        return r;
    for (int d = 0; d < n_dims; d++)
        m.element_strides[d] = (uint32_t)v[d];
    uint64_t x;
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

/* Record layout: buf, dtype, rank, swizzle/16, l2_promotion/16, oob_fill, 2 zero bytes, then
 * dims (5 x 8), strides (4 x 8), box (5 x 4), element_strides (5 x 4); unused entries zero. */
void tuner_tmap_pack(const tuner_tmap *m, uint8_t out[TUNER_TMAP_PACKED])
{
    memset(out, 0, TUNER_TMAP_PACKED);
    out[0] = (uint8_t)m->buf;
    out[1] = (uint8_t)m->dtype;
    out[2] = (uint8_t)m->rank;
    out[3] = (uint8_t)(m->swizzle / 16);
    out[4] = (uint8_t)(m->l2_promotion / 16);
    out[5] = (uint8_t)m->oob_fill;
    uint8_t *p = out + 8;
    for (int d = 0; d < TUNER_TMAP_MAX_RANK; d++, p += 8)
        put_le(p, d < m->rank ? m->dims[d] : 0, 8);
    for (int d = 0; d < TUNER_TMAP_MAX_RANK - 1; d++, p += 8)
        put_le(p, d + 1 < m->rank ? m->strides[d] : 0, 8);
    for (int d = 0; d < TUNER_TMAP_MAX_RANK; d++, p += 4)
        put_le(p, d < m->rank ? m->box[d] : 0, 4);
    for (int d = 0; d < TUNER_TMAP_MAX_RANK; d++, p += 4)
        put_le(p, d < m->rank ? m->element_strides[d] : 0, 4);
}
_Static_assert(8 + 5 * 8 + 4 * 8 + 5 * 4 + 5 * 4 == TUNER_TMAP_PACKED, "tuner_tmap_pack's record size");

int tuner_tmap_unpack(const uint8_t in[TUNER_TMAP_PACKED], int max_buf, tuner_tmap *ret)
{
    tuner_tmap m = {0};
    m.buf = in[0];
    m.dtype = (tuner_dtype)in[1];
    m.rank = in[2];
    m.swizzle = in[3] * 16;
    m.l2_promotion = in[4] * 16;
    m.oob_fill = (tuner_tmap_oob)in[5];
    if (m.buf > max_buf || m.rank < 1 || m.rank > TUNER_TMAP_MAX_RANK || in[6] || in[7])
        return -EINVAL;
    const uint8_t *p = in + 8;
    for (int d = 0; d < TUNER_TMAP_MAX_RANK; d++, p += 8)
        m.dims[d] = get_le(p, 8);
    for (int d = 0; d < TUNER_TMAP_MAX_RANK - 1; d++, p += 8)
        m.strides[d] = get_le(p, 8);
    for (int d = 0; d < TUNER_TMAP_MAX_RANK; d++, p += 4)
        m.box[d] = (uint32_t)get_le(p, 4);
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
    return memcmp(pa, pb, sizeof(pa)) == 0;
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
    /* CU_TENSOR_MAP_DATA_TYPE_FLOAT16 6, _FLOAT32 7, _BFLOAT16 9 */
    return m->dtype == TUNER_F16 ? 6 : m->dtype == TUNER_BF16 ? 9 : 7;
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
