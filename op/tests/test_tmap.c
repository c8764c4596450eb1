/* Unit tests of op/tmap.c: the encoder's limits as tuner_tmap_check states them (each refusal
 * naming its field), the JSON form (round trip, strictness), the packed form (round trip, refused
 * damage), the extent a launcher checks its buffer against, and the driver's enum values. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "op/tmap.h"

#include "tests/check.h"

/* A batched operand's map as matmul_wgmma describes it: [batch][rows][cols] of bf16. */
static tuner_tmap sample(void)
{
    return (tuner_tmap){.buf = 1, .dtype = TUNER_BF16, .rank = 3, .dims = {1000, 77, 3},
                        .strides = {2016, 2016 * 77}, .box = {64, 128, 1}, .element_strides = {1, 1, 1},
                        .swizzle = 128, .l2_promotion = 256};
}

/* tuner_tmap_check refuses m, naming want_field. */
static void refused(const tuner_tmap *m, const char *want_field)
{
    char why[128] = "", field[32] = "";
    CHECK(tuner_tmap_check(m, why, sizeof(why), field, sizeof(field)) == -EINVAL && why[0],
          "accepted (want a refusal at %s)", want_field);
    CHECK_STR(field, want_field);
}

static void test_check(void)
{
    tuner_tmap m = sample();
    CHECK(tuner_tmap_check(&m, NULL, 0, NULL, 0) == 0);
    m = sample(), m.dtype = TUNER_DTYPE_COUNT, refused(&m, "dtype");
    m = sample(), m.rank = 0, refused(&m, "dims");
    m = sample(), m.rank = 6, refused(&m, "dims");
    m = sample(), m.dims[2] = 0, refused(&m, "dims[2]");
    m = sample(), m.dims[0] = (1ull << 32) + 1, refused(&m, "dims[0]");
    m = sample(), m.box[1] = 257, refused(&m, "box[1]");
    m = sample(), m.element_strides[2] = 9, refused(&m, "element_strides[2]");
    m = sample(), m.strides[0] = 2008, refused(&m, "strides[0]"); /* not a multiple of 16 */
    m = sample(), m.strides[1] = 1ull << 40, refused(&m, "strides[1]");
    m = sample(), m.box[0] = 60, refused(&m, "box[0]");           /* 120 bytes: not 16-byte units */
    m = sample(), m.box[0] = 128, refused(&m, "box[0]");          /* 256 bytes > the 128 swizzle */
    m = sample(), m.swizzle = 96, refused(&m, "swizzle");
    m = sample(), m.l2_promotion = 512, refused(&m, "l2_promotion");
    m = sample(), m.oob_fill = (tuner_tmap_oob)2, refused(&m, "oob_fill");
    /* Without a swizzle a box row may be wider than 128 bytes. */
    m = sample(), m.swizzle = 0, m.box[0] = 256;
    CHECK(tuner_tmap_check(&m, NULL, 0, NULL, 0) == 0);
    /* Only the dimensions of the rank count. */
    m = sample(), m.rank = 2, m.strides[1] = 0, m.box[2] = 0;
    CHECK(tuner_tmap_check(&m, NULL, 0, NULL, 0) == 0);
}

static void test_json(void)
{
    const tuner_tmap m = sample();
    cJSON *j = tuner_tmap_to_json(&m);
    char *text = cJSON_PrintUnformatted(j);
    CHECK_STR(text, "{\"dtype\":\"bf16\",\"dims\":[1000,77,3],\"strides\":[2016,155232],\"box\":[64,128,1],"
                    "\"element_strides\":[1,1,1],\"swizzle\":128,\"l2_promotion\":256,\"oob_fill\":\"zero\"}");
    tuner_tmap back = {.buf = 1};
    CHECK(tuner_tmap_from_json(j, NULL, &back, NULL, 0, NULL, 0) == 0 && tuner_tmap_equal(&back, &m));
    /* A member the caller owns (its buffer) is allowed only when named. */
    char owner[32] = "";
    cJSON_AddStringToObject(j, "buffer", "input1");
    CHECK(tuner_tmap_from_json(j, "buffer", &back, NULL, 0, NULL, 0) == 0 && tuner_tmap_equal(&back, &m));
    CHECK(tuner_tmap_from_json(j, "buf", &back, NULL, 0, owner, sizeof(owner)) == -EINVAL);
    CHECK_STR(owner, "buffer");
    free(text);
    cJSON_Delete(j);

    /* Each damaged member is refused by name, and leaves *ret alone. */
    static const struct {
        const char *json, *field;
    } bad[] = {
        {"[]", "tensor_map"},
        {"{\"dtype\":\"f16\",\"dims\":[64],\"strides\":[],\"box\":[64],\"element_strides\":[1],\"swizzle\":128,"
         "\"l2_promotion\":0,\"oob_fill\":\"zero\",\"address\":0}", "address"},
        {"{\"dims\":[64],\"strides\":[],\"box\":[64],\"element_strides\":[1],\"swizzle\":128,"
         "\"l2_promotion\":0,\"oob_fill\":\"zero\"}", "dtype"},
        {"{\"dtype\":\"f64\",\"dims\":[64],\"strides\":[],\"box\":[64],\"element_strides\":[1],\"swizzle\":128,"
         "\"l2_promotion\":0,\"oob_fill\":\"zero\"}", "dtype"},
        {"{\"dtype\":\"f16\",\"dims\":[64,2],\"strides\":[],\"box\":[64,1],\"element_strides\":[1,1],"
         "\"swizzle\":128,\"l2_promotion\":0,\"oob_fill\":\"zero\"}", "strides"},
        {"{\"dtype\":\"f16\",\"dims\":[64,2],\"strides\":[128.5],\"box\":[64,1],\"element_strides\":[1,1],"
         "\"swizzle\":128,\"l2_promotion\":0,\"oob_fill\":\"zero\"}", "strides[0]"},
        {"{\"dtype\":\"f16\",\"dims\":[64,-2],\"strides\":[128],\"box\":[64,1],\"element_strides\":[1,1],"
         "\"swizzle\":128,\"l2_promotion\":0,\"oob_fill\":\"zero\"}", "dims[1]"},
        {"{\"dtype\":\"f16\",\"dims\":[64],\"strides\":[],\"box\":[64,1],\"element_strides\":[1],\"swizzle\":128,"
         "\"l2_promotion\":0,\"oob_fill\":\"zero\"}", "box"},
        {"{\"dtype\":\"f16\",\"dims\":[64],\"strides\":[],\"box\":[64],\"element_strides\":[1],\"swizzle\":\"128\","
         "\"l2_promotion\":0,\"oob_fill\":\"zero\"}", "swizzle"},
        {"{\"dtype\":\"f16\",\"dims\":[64],\"strides\":[],\"box\":[64],\"element_strides\":[1],\"swizzle\":32,"
         "\"l2_promotion\":0,\"oob_fill\":\"zero\"}", "box[0]"},
        {"{\"dtype\":\"f16\",\"dims\":[64],\"strides\":[],\"box\":[64],\"element_strides\":[1],\"swizzle\":128,"
         "\"l2_promotion\":0,\"oob_fill\":\"ones\"}", "oob_fill"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cJSON *b = cJSON_Parse(bad[i].json);
        tuner_tmap untouched = sample();
        char why[128] = "", field[32] = "";
        CHECK(b && tuner_tmap_from_json(b, NULL, &untouched, why, sizeof(why), field, sizeof(field)) == -EINVAL && why[0],
              "accepted %s", bad[i].json);
        CHECK(!strcmp(field, bad[i].field), "%s: field %s, want %s", bad[i].json, field, bad[i].field);
        const tuner_tmap s = sample();
        CHECK(tuner_tmap_equal(&untouched, &s));
        cJSON_Delete(b);
    }
}

static void test_packed(void)
{
    const tuner_tmap m = sample();
    uint8_t rec[TUNER_TMAP_PACKED];
    tuner_tmap_pack(&m, rec);
    tuner_tmap back;
    CHECK(tuner_tmap_unpack(rec, 9, &back) == 0 && back.buf == 1 && tuner_tmap_equal(&back, &m));
    /* A map of dims 2^32 and a NaN fill survives too. */
    tuner_tmap wide = sample();
    wide.dims[0] = 1ull << 32, wide.strides[0] = 1ull << 33, wide.strides[1] = 1ull << 39;
    wide.oob_fill = TUNER_TMAP_OOB_NAN, wide.swizzle = 0, wide.box[0] = 256;
    tuner_tmap_pack(&wide, rec);
    CHECK(tuner_tmap_unpack(rec, 9, &back) == 0 && tuner_tmap_equal(&back, &wide) && back.dims[0] == 1ull << 32);
    /* A buffer past the caller's last, nonzero padding, a record the encoder would refuse. */
    tuner_tmap_pack(&m, rec);
    CHECK(tuner_tmap_unpack(rec, 0, &back) == -EINVAL);
    rec[6] = 1;
    CHECK(tuner_tmap_unpack(rec, 9, &back) == -EINVAL);
    tuner_tmap_pack(&m, rec);
    rec[3] = 5; /* an 80-byte swizzle */
    CHECK(tuner_tmap_unpack(rec, 9, &back) == -EINVAL);
    memset(rec, 0, sizeof(rec));
    CHECK(tuner_tmap_unpack(rec, 9, &back) == -EINVAL);
}

static void test_extent_and_enums(void)
{
    tuner_tmap m = sample();
    /* The last element: 1000 bf16 of the last row of the last batch entry. */
    CHECK(tuner_tmap_extent(&m) == 2000 + 76 * 2016ull + 2 * 2016ull * 77);
    m.rank = 1;
    CHECK(tuner_tmap_extent(&m) == 2000);
    m = sample();
    m.dims[0] = m.dims[1] = m.dims[2] = 1ull << 32;
    m.strides[0] = m.strides[1] = (1ull << 40) - 16;
    CHECK(tuner_tmap_extent(&m) == UINT64_MAX); /* saturates */

    /* cuTensorMapEncodeTiled's values (cuda.h): FLOAT16 6, FLOAT32 7, BFLOAT16 9; swizzle
     * NONE/32B/64B/128B 0..3; L2 promotion NONE/64B/128B/256B 0..3; OOB fill NONE 0, NAN 1. */
    m = sample();
    m.dtype = TUNER_F16;
    CHECK(tuner_tmap_cu_dtype(&m) == 6);
    m.dtype = TUNER_F32;
    CHECK(tuner_tmap_cu_dtype(&m) == 7);
    m.dtype = TUNER_BF16;
    CHECK(tuner_tmap_cu_dtype(&m) == 9);
    static const int sw[][2] = {{0, 0}, {32, 1}, {64, 2}, {128, 3}};
    static const int l2[][2] = {{0, 0}, {64, 1}, {128, 2}, {256, 3}};
    for (int i = 0; i < 4; i++) {
        m.swizzle = sw[i][0];
        m.l2_promotion = l2[i][0];
        CHECK(tuner_tmap_cu_swizzle(&m) == sw[i][1] && tuner_tmap_cu_l2_promotion(&m) == l2[i][1]);
    }
    m.oob_fill = TUNER_TMAP_OOB_NAN;
    CHECK(tuner_tmap_cu_oob_fill(&m) == 1);
    m.oob_fill = TUNER_TMAP_OOB_ZERO;
    CHECK(tuner_tmap_cu_oob_fill(&m) == 0);
}

int main(void)
{
    test_check();
    test_json();
    test_packed();
    test_extent_and_enums();
    return check_finish("test_tmap");
}
