/* Unit tests of op/tmap.c: the encoders' limits as tuner_tmap_check states them (each refusal
 * naming its field), the JSON form (round trip, strictness), the packed form (round trip, refused
 * damage), the extent a launcher checks its buffer against, the driver's enum values, and the
 * arguments tuner_tmap_encode hands each encoder; for tiled and im2col maps. */
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

/* A convolution's input as conv2d_wgmma describes it: NHWC f16, 32 images of 56x56x64, a 3x3
 * window with padding 1 (corners -1, 1 - 2), 128 pixels of 64 channels per copy. */
static tuner_tmap sample_im2col(void)
{
    return (tuner_tmap){.buf = 0, .mode = TUNER_TMAP_IM2COL, .dtype = TUNER_F16, .rank = 4,
                        .dims = {64, 56, 56, 32}, .strides = {128, 128 * 56, 128 * 56 * 56},
                        .element_strides = {1, 1, 1, 1}, .lower_corner = {-1, -1}, .upper_corner = {-1, -1},
                        .channels_per_pixel = 64, .pixels_per_column = 128, .swizzle = 128};
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
    m = sample(), m.mode = (tuner_tmap_mode)2, refused(&m, "mode");
    /* A tiled map has no im2col fields. */
    m = sample(), m.lower_corner[0] = -1, refused(&m, "lower_corner");
    m = sample(), m.pixels_per_column = 64, refused(&m, "channels_per_pixel");
}

static void test_check_im2col(void)
{
    tuner_tmap m = sample_im2col();
    CHECK(tuner_tmap_check(&m, NULL, 0, NULL, 0) == 0);
    m = sample_im2col(), m.rank = 2, refused(&m, "dims");
    m = sample_im2col(), m.box[0] = 64, refused(&m, "box");
    /* Rank 4: corners of 8 bits. */
    m = sample_im2col(), m.lower_corner[1] = -129, refused(&m, "lower_corner[1]");
    m = sample_im2col(), m.upper_corner[0] = 128, refused(&m, "upper_corner[0]");
    m = sample_im2col(), m.lower_corner[0] = -128, m.upper_corner[0] = 127;
    CHECK(tuner_tmap_check(&m, NULL, 0, NULL, 0) == 0);
    /* Rank 5: 5 bits; rank 3: 16 bits. */
    m = sample_im2col(), m.rank = 5, m.dims[4] = 2, m.strides[3] = m.strides[2] * 32, m.element_strides[4] = 1;
    CHECK(tuner_tmap_check(&m, NULL, 0, NULL, 0) == 0);
    m.lower_corner[2] = -17, refused(&m, "lower_corner[2]");
    m = sample_im2col(), m.rank = 3, m.lower_corner[1] = 0, m.upper_corner[1] = 0, m.lower_corner[0] = -32768;
    CHECK(tuner_tmap_check(&m, NULL, 0, NULL, 0) == 0);
    /* A corner past the rank, a bounding box without a pixel: 56 - 1 - 60 < -4. */
    m = sample_im2col(), m.lower_corner[2] = 1, refused(&m, "lower_corner");
    m = sample_im2col(), m.lower_corner[1] = -4, m.upper_corner[1] = -60, refused(&m, "upper_corner[1]");
    m = sample_im2col(), m.lower_corner[1] = -4, m.upper_corner[1] = -59;
    CHECK(tuner_tmap_check(&m, NULL, 0, NULL, 0) == 0);
    m = sample_im2col(), m.channels_per_pixel = 0, refused(&m, "channels_per_pixel");
    m = sample_im2col(), m.channels_per_pixel = 60, refused(&m, "channels_per_pixel"); /* 120 bytes */
    m = sample_im2col(), m.channels_per_pixel = 128, refused(&m, "channels_per_pixel"); /* > the swizzle */
    m = sample_im2col(), m.swizzle = 0, m.channels_per_pixel = 256;
    CHECK(tuner_tmap_check(&m, NULL, 0, NULL, 0) == 0);
    m = sample_im2col(), m.pixels_per_column = 1025, refused(&m, "pixels_per_column");
    m = sample_im2col(), m.element_strides[2] = 9, refused(&m, "element_strides[2]");
}

/* tuner_tmap_from_json refuses json, naming want_field, and leaves its result (a map from make)
 * as it was. */
static void json_refused(const char *json, const char *want_field, tuner_tmap (*make)(void))
{
    cJSON *b = cJSON_Parse(json);
    tuner_tmap untouched = make();
    char why[128] = "", field[32] = "";
    CHECK(b && tuner_tmap_from_json(b, NULL, &untouched, why, sizeof(why), field, sizeof(field)) == -EINVAL && why[0],
          "accepted %s", json);
    CHECK(!strcmp(field, want_field), "%s: field %s, want %s", json, field, want_field);
    const tuner_tmap s = make();
    CHECK(tuner_tmap_equal(&untouched, &s));
    cJSON_Delete(b);
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
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        json_refused(bad[i].json, bad[i].field, sample);
}

static void test_json_im2col(void)
{
    const tuner_tmap m = sample_im2col();
    cJSON *j = tuner_tmap_to_json(&m);
    char *text = cJSON_PrintUnformatted(j);
    CHECK_STR(text, "{\"mode\":\"im2col\",\"dtype\":\"f16\",\"dims\":[64,56,56,32],"
                    "\"strides\":[128,7168,401408],\"element_strides\":[1,1,1,1],\"lower_corner\":[-1,-1],"
                    "\"upper_corner\":[-1,-1],\"channels_per_pixel\":64,\"pixels_per_column\":128,"
                    "\"swizzle\":128,\"l2_promotion\":0,\"oob_fill\":\"zero\"}");
    tuner_tmap back = {.buf = 0};
    CHECK(tuner_tmap_from_json(j, NULL, &back, NULL, 0, NULL, 0) == 0 && tuner_tmap_equal(&back, &m) &&
          back.mode == TUNER_TMAP_IM2COL && back.lower_corner[1] == -1);
    free(text);
    cJSON_Delete(j);

    /* "mode": "tiled" may be spelt out. */
    const tuner_tmap t = sample();
    j = tuner_tmap_to_json(&t);
    cJSON_AddStringToObject(j, "mode", "tiled");
    back.buf = t.buf;
    CHECK(tuner_tmap_from_json(j, NULL, &back, NULL, 0, NULL, 0) == 0 && tuner_tmap_equal(&back, &t));
    cJSON_Delete(j);

#define I2C_DIMS "\"dtype\":\"f16\",\"dims\":[64,56,56,32],\"strides\":[128,7168,401408],\"element_strides\":[1,1,1,1]"
#define I2C_TAIL "\"swizzle\":128,\"l2_promotion\":0,\"oob_fill\":\"zero\""
    static const struct {
        const char *json, *field;
    } bad[] = {
        /* a box beside im2col fields, corners in a tiled map, an unknown mode */
        {"{\"mode\":\"im2col\"," I2C_DIMS ",\"box\":[64,1,1,1],\"lower_corner\":[-1,-1],\"upper_corner\":[-1,-1],"
         "\"channels_per_pixel\":64,\"pixels_per_column\":128," I2C_TAIL "}", "box"},
        {"{" I2C_DIMS ",\"box\":[64,1,1,1],\"lower_corner\":[-1,-1]," I2C_TAIL "}", "lower_corner"},
        {"{\"mode\":\"im2cols\"," I2C_DIMS ",\"box\":[64,1,1,1]," I2C_TAIL "}", "mode"},
        {"{\"mode\":1," I2C_DIMS ",\"box\":[64,1,1,1]," I2C_TAIL "}", "mode"},
        /* missing, miscounted, out of range */
        {"{\"mode\":\"im2col\"," I2C_DIMS ",\"lower_corner\":[-1,-1],\"upper_corner\":[-1,-1],"
         "\"channels_per_pixel\":64," I2C_TAIL "}", "pixels_per_column"},
        {"{\"mode\":\"im2col\"," I2C_DIMS ",\"lower_corner\":[-1],\"upper_corner\":[-1,-1],"
         "\"channels_per_pixel\":64,\"pixels_per_column\":128," I2C_TAIL "}", "lower_corner"},
        {"{\"mode\":\"im2col\"," I2C_DIMS ",\"lower_corner\":[-1,-1.5],\"upper_corner\":[-1,-1],"
         "\"channels_per_pixel\":64,\"pixels_per_column\":128," I2C_TAIL "}", "lower_corner[1]"},
        {"{\"mode\":\"im2col\"," I2C_DIMS ",\"lower_corner\":[-1,-1],\"upper_corner\":[-1,200],"
         "\"channels_per_pixel\":64,\"pixels_per_column\":128," I2C_TAIL "}", "upper_corner[1]"},
        {"{\"mode\":\"im2col\"," I2C_DIMS ",\"lower_corner\":[-1,-1],\"upper_corner\":[-1,-1],"
         "\"channels_per_pixel\":64,\"pixels_per_column\":2048," I2C_TAIL "}", "pixels_per_column"},
        {"{\"mode\":\"im2col\",\"dtype\":\"f16\",\"dims\":[64,56],\"strides\":[128],\"element_strides\":[1,1],"
         "\"lower_corner\":[],\"upper_corner\":[],\"channels_per_pixel\":64,\"pixels_per_column\":128," I2C_TAIL "}",
         "dims"},
    };
#undef I2C_DIMS
#undef I2C_TAIL
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        json_refused(bad[i].json, bad[i].field, sample_im2col);
}

static cJSON *buf_as_number(int buf)
{
    return cJSON_CreateNumber(buf);
}

/* A launch's maps as one "maps" member, each with its buffer in the caller's vocabulary. */
static void test_maps_json(void)
{
    const tuner_tmap maps[2] = {sample(), sample_im2col()};
    cJSON *o = cJSON_CreateObject();
    CHECK(tuner_tmaps_add_json(o, maps, 0, "buf", buf_as_number) && !cJSON_GetObjectItem(o, "maps"));
    CHECK(tuner_tmaps_add_json(o, maps, 2, "buf", buf_as_number));
    const cJSON *arr = cJSON_GetObjectItem(o, "maps");
    CHECK(cJSON_GetArraySize(arr) == 2);
    for (int i = 0; i < 2 && i < cJSON_GetArraySize(arr); i++) {
        const cJSON *mj = cJSON_GetArrayItem(arr, i);
        tuner_tmap back = {.buf = maps[i].buf};
        CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(mj, "buf")) == maps[i].buf);
        CHECK(tuner_tmap_from_json(mj, "buf", &back, NULL, 0, NULL, 0) == 0 && tuner_tmap_equal(&back, &maps[i]));
    }
    cJSON_Delete(o);
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
    rec[7] = 1;
    CHECK(tuner_tmap_unpack(rec, 9, &back) == -EINVAL);
    tuner_tmap_pack(&m, rec);
    rec[6] = 2; /* no such mode */
    CHECK(tuner_tmap_unpack(rec, 9, &back) == -EINVAL);
    tuner_tmap_pack(&m, rec);
    rec[3] = 5; /* an 80-byte swizzle */
    CHECK(tuner_tmap_unpack(rec, 9, &back) == -EINVAL);
    memset(rec, 0, sizeof(rec));
    CHECK(tuner_tmap_unpack(rec, 9, &back) == -EINVAL);
}

static void test_packed_im2col(void)
{
    /* Every corner of a rank-5 map, and the widest of rank 3, survive with their signs. */
    tuner_tmap m = sample_im2col();
    m.rank = 5, m.dims[4] = 3, m.strides[3] = m.strides[2] * 32, m.element_strides[4] = 1;
    m.element_strides[1] = 2, m.element_strides[3] = 8;
    m.lower_corner[0] = -16, m.lower_corner[1] = 15, m.lower_corner[2] = -3;
    m.upper_corner[0] = 7, m.upper_corner[1] = -5, m.upper_corner[2] = 0;
    m.pixels_per_column = 1024, m.channels_per_pixel = 8, m.l2_promotion = 128, m.oob_fill = TUNER_TMAP_OOB_NAN;
    uint8_t rec[TUNER_TMAP_PACKED];
    tuner_tmap_pack(&m, rec);
    tuner_tmap back;
    CHECK(tuner_tmap_unpack(rec, 9, &back) == 0 && tuner_tmap_equal(&back, &m));
    CHECK(back.mode == TUNER_TMAP_IM2COL && back.lower_corner[0] == -16 && back.upper_corner[1] == -5 &&
          back.pixels_per_column == 1024 && back.box[0] == 0);
    m = sample_im2col();
    m.rank = 3, m.lower_corner[1] = m.upper_corner[1] = 0, m.lower_corner[0] = -32768, m.upper_corner[0] = 32767;
    tuner_tmap_pack(&m, rec);
    CHECK(tuner_tmap_unpack(rec, 9, &back) == 0 && back.lower_corner[0] == -32768 && back.upper_corner[0] == 32767);
    /* Read as a tiled map, an im2col record's box is not a box the encoder takes. */
    tuner_tmap_pack(&m, rec);
    rec[6] = 0;
    CHECK(tuner_tmap_unpack(rec, 9, &back) == -EINVAL);
    /* A tiled map's record does not move: its box where it always was. */
    const tuner_tmap t = sample();
    tuner_tmap_pack(&t, rec);
    CHECK(rec[6] == 0 && rec[80] == 64 && rec[84] == 128 && rec[88] == 1);
}

/* What tuner_tmap_encode hands the encoders. */
static struct {
    int calls;
    void *out, *addr;
    int dtype, swizzle, l2, oob, interleave;
    uint32_t rank, channels, pixels;
    uint64_t dims[5], strides[4];
    uint32_t box[5], es[5];
    int lower[3], upper[3];
} seen;

static int fake_tiled(void *map, int dtype, uint32_t rank, void *addr, const uint64_t *dims, const uint64_t *strides,
                      const uint32_t *box, const uint32_t *es, int interleave, int swizzle, int l2, int oob)
{
    seen.calls++, seen.out = map, seen.addr = addr, seen.dtype = dtype, seen.rank = rank;
    memcpy(seen.dims, dims, rank * 8);
    memcpy(seen.strides, strides, (rank - 1) * 8);
    memcpy(seen.box, box, rank * 4);
    memcpy(seen.es, es, rank * 4);
    seen.interleave = interleave, seen.swizzle = swizzle, seen.l2 = l2, seen.oob = oob;
    return 0;
}

static int fake_im2col(void *map, int dtype, uint32_t rank, void *addr, const uint64_t *dims,
                       const uint64_t *strides, const int *lower, const int *upper, uint32_t channels,
                       uint32_t pixels, const uint32_t *es, int interleave, int swizzle, int l2, int oob)
{
    seen.calls += 10, seen.out = map, seen.addr = addr, seen.dtype = dtype, seen.rank = rank;
    memcpy(seen.dims, dims, rank * 8);
    memcpy(seen.strides, strides, (rank - 1) * 8);
    memcpy(seen.lower, lower, (rank - 2) * sizeof(int));
    memcpy(seen.upper, upper, (rank - 2) * sizeof(int));
    memcpy(seen.es, es, rank * 4);
    seen.channels = channels, seen.pixels = pixels;
    seen.interleave = interleave, seen.swizzle = swizzle, seen.l2 = l2, seen.oob = oob;
    return 701; /* a CUresult, handed back as it is */
}

static void test_encode(void)
{
    _Alignas(64) unsigned char slot[TUNER_TMAP_BYTES];
    const tuner_tmap_encoders both = {fake_tiled, fake_im2col}, tiled_only = {fake_tiled, NULL};
    const tuner_tmap t = sample(), i = sample_im2col();
    memset(&seen, 0, sizeof(seen));
    CHECK(tuner_tmap_encode(&t, 0x7f0000001000ull, slot, &both) == 0 && seen.calls == 1);
    CHECK(seen.out == slot && seen.addr == (void *)0x7f0000001000ull && seen.dtype == 9 && seen.rank == 3);
    CHECK(seen.dims[2] == 3 && seen.strides[1] == 2016 * 77 && seen.box[1] == 128 && seen.es[2] == 1);
    CHECK(seen.interleave == 0 && seen.swizzle == 3 && seen.l2 == 3 && seen.oob == 0);
    CHECK_STR(tuner_tmap_encoder_name(&t), "cuTensorMapEncodeTiled");

    memset(&seen, 0, sizeof(seen));
    CHECK(tuner_tmap_encode(&i, 0x1000, slot, &both) == 701 && seen.calls == 10);
    CHECK(seen.dtype == 6 && seen.rank == 4 && seen.dims[3] == 32 && seen.strides[2] == 128 * 56 * 56);
    CHECK(seen.lower[0] == -1 && seen.lower[1] == -1 && seen.upper[1] == -1);
    CHECK(seen.channels == 64 && seen.pixels == 128 && seen.swizzle == 3 && seen.l2 == 0);
    CHECK_STR(tuner_tmap_encoder_name(&i), "cuTensorMapEncodeIm2col");
    /* A driver without the encoder a map needs. */
    CHECK(tuner_tmap_encode(&i, 0x1000, slot, &tiled_only) == -ENOSYS);
    CHECK(tuner_tmap_encode(&t, 0x1000, slot, &tiled_only) == 0);
    CHECK(!tuner_tmap_can_encode(&i, &tiled_only) && tuner_tmap_can_encode(&t, &tiled_only));
    CHECK(tuner_tmap_can_encode(&i, &both) && tuner_tmap_can_encode(&t, &both));
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

/* The batched operand of a dynamic matmul: its rows follow dim 0 ("m", max 768) and its batch
 * twice dim 1 ("b", max 4): the values at max are in dims. */
static tuner_tmap sample_sym(void)
{
    tuner_tmap m = sample();
    m.dims[1] = 768, m.sym[1] = 1, m.sym_coef[1] = 1;
    m.dims[2] = 8, m.sym[2] = 2, m.sym_coef[2] = 2;
    m.strides[1] = 2016ull * 768;
    return m;
}

static const char *const sym_names[] = {"m", "b"};
static const int64_t sym_max[] = {768, 4};
static const char *sym_name(const void *ctx, int k)
{
    (void)ctx;
    return sym_names[k];
}

static void test_symbolic(void)
{
    char why[160] = "", field[32] = "";
    tuner_tmap m = sample_sym(), s = sample(), back;
    CHECK(tuner_tmap_check(&m, why, sizeof(why), field, sizeof(field)) == 0, "%s", why);
    CHECK(tuner_tmap_is_symbolic(&m) && !tuner_tmap_is_symbolic(&s));
    tuner_tmap t = m;
    t.sym_coef[2] = 3, refused(&t, "dims[2]"); /* does not divide 8 */
    t = m, t.sym_coef[1] = 0, refused(&t, "dims[1]");
    t = m, t.sym[1] = 1u << TUNER_MAX_DIMS, refused(&t, "dims[1]");
    t = s, t.sym_coef[0] = 1, refused(&t, "dims[0]"); /* a coefficient without dims */
    t = s, t.sym[3] = 1, t.sym_coef[3] = 1, refused(&t, "dims[3]"); /* past the rank */
    t = sample_im2col(), t.sym[3] = 1, t.sym_coef[3] = 1, refused(&t, "dims[3]");
    /* Symbolic dims differ: not equal, though the packed records are. */
    t = m, t.sym_coef[2] = 1, t.sym[2] = 3;
    CHECK(!tuner_tmap_equal(&t, &m) && tuner_tmap_equal(&m, &m));
    t = m, memset(t.sym, 0, sizeof(t.sym)), memset(t.sym_coef, 0, sizeof(t.sym_coef));
    CHECK(!tuner_tmap_equal(&t, &m));

    /* JSON by name and by index; a static map's JSON does not change with dims given. */
    const tuner_tmap_dims named = {2, sym_max, sym_name, NULL}, indexed = {2, sym_max, NULL, NULL};
    cJSON *j = tuner_tmap_to_json_dims(&m, &named);
    char *txt = cJSON_PrintUnformatted(cJSON_GetObjectItem(j, "dims"));
    CHECK_STR(txt, "[1000,{\"dims\":[\"m\"],\"coef\":1},{\"dims\":[\"b\"],\"coef\":2}]");
    free(txt);
    back = sample_im2col(), back.buf = m.buf; /* from_json keeps the buffer */
    CHECK(tuner_tmap_from_json_dims(j, NULL, &named, &back, why, sizeof(why), NULL, 0) == 0, "%s", why);
    CHECK(tuner_tmap_equal(&back, &m));
    back.buf = 7;
    CHECK(tuner_tmap_from_json(j, NULL, &back, why, sizeof(why), field, sizeof(field)) == -EINVAL &&
          back.buf == 7);
    CHECK_STR(field, "dims[1]");
    CHECK(tuner_tmap_from_json_dims(j, NULL, &indexed, &back, NULL, 0, field, sizeof(field)) == -EINVAL);
    cJSON_Delete(j);
    j = tuner_tmap_to_json_dims(&m, &indexed);
    txt = cJSON_PrintUnformatted(cJSON_GetObjectItem(j, "dims"));
    CHECK_STR(txt, "[1000,{\"dims\":[0],\"coef\":1},{\"dims\":[1],\"coef\":2}]");
    free(txt);
    back.buf = m.buf;
    CHECK(tuner_tmap_from_json_dims(j, NULL, &indexed, &back, NULL, 0, NULL, 0) == 0 && tuner_tmap_equal(&back, &m));
    cJSON_Delete(j);
    char *a = cJSON_PrintUnformatted(j = tuner_tmap_to_json(&s));
    cJSON_Delete(j);
    char *b = cJSON_PrintUnformatted(j = tuner_tmap_to_json_dims(&s, &named));
    cJSON_Delete(j);
    CHECK_STR(a, b);
    free(a), free(b);

    /* Refusals, each naming the dimension. */
    static const char *const bad[] = {
        "{\"dims\":[\"n\"],\"coef\":1}",        /* unknown name */
        "{\"dims\":[\"m\",\"m\"],\"coef\":1}", /* twice */
        "{\"dims\":[],\"coef\":1}",
        "{\"dims\":[\"m\"],\"coef\":0}",
        "{\"dims\":[\"m\"]}",
        "{\"dims\":[\"m\"],\"coef\":1,\"x\":1}",
        "{\"dims\":[\"m\",\"b\"],\"coef\":2000000}", /* beyond 2^32 at max */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char text[400];
        snprintf(text, sizeof(text),
                 "{\"dtype\":\"bf16\",\"dims\":[1000,%s,3],\"strides\":[2016,1548288],\"box\":[64,128,1],"
                 "\"element_strides\":[1,1,1],\"swizzle\":128,\"l2_promotion\":256,\"oob_fill\":\"zero\"}",
                 bad[i]);
        j = cJSON_Parse(text);
        field[0] = 0;
        CHECK(j && tuner_tmap_from_json_dims(j, NULL, &named, &back, why, sizeof(why), field, sizeof(field)) ==
                       -EINVAL,
              "accepted %s", bad[i]);
        CHECK_STR(field, "dims[1]");
        cJSON_Delete(j);
    }

    /* Bound at sizes: m = 100, b = 3. */
    const int64_t sizes[TUNER_MAX_DIMS] = {100, 3, 0, 0};
    CHECK(tuner_tmap_bind(&m, sizes, &back) == 0 && back.dims[0] == 1000 && back.dims[1] == 100 &&
          back.dims[2] == 6 && !tuner_tmap_is_symbolic(&back) && back.sym_coef[1] == 0 &&
          back.strides[1] == m.strides[1] && back.box[1] == 128);
    CHECK(tuner_tmap_bind(&s, sizes, &back) == 0 && tuner_tmap_equal(&back, &s));
    const int64_t zero[TUNER_MAX_DIMS] = {0, 3, 0, 0}, huge[TUNER_MAX_DIMS] = {INT64_C(1) << 40, 1, 0, 0};
    back = s;
    CHECK(tuner_tmap_bind(&m, zero, &back) == -EINVAL && tuner_tmap_bind(&m, huge, &back) == -EINVAL &&
          tuner_tmap_equal(&back, &s));
}

/* FP8 operands (matmul_wgmma's): 128 one-byte k elements per 128-byte swizzled box row, UINT8
 * for the driver (its maps have no FP8 type), the JSON and packed forms round trip, and a box
 * row past 128 bytes is refused as for every type. */
static void test_fp8(void)
{
    for (int d = 0; d < 2; d++) {
        tuner_tmap m = {.buf = 0, .dtype = d ? TUNER_F8E5M2 : TUNER_F8E4M3, .rank = 2, .dims = {4096, 8192},
                        .strides = {4096}, .box = {128, 128}, .element_strides = {1, 1}, .swizzle = 128};
        CHECK(tuner_tmap_check(&m, NULL, 0, NULL, 0) == 0);
        CHECK(tuner_tmap_cu_dtype(&m) == 0);
        cJSON *j = tuner_tmap_to_json(&m);
        tuner_tmap back = {.buf = 0}; /* from_json keeps the caller's buffer */
        CHECK(j && tuner_tmap_from_json(j, NULL, &back, NULL, 0, NULL, 0) == 0 && tuner_tmap_equal(&back, &m));
        cJSON_Delete(j);
        uint8_t packed[TUNER_TMAP_PACKED];
        tuner_tmap_pack(&m, packed);
        CHECK(tuner_tmap_unpack(packed, 8, &back) == 0 && tuner_tmap_equal(&back, &m));
        m.box[0] = 144;
        refused(&m, "box[0]");
    }
}

int main(void)
{
    test_fp8();
    test_symbolic();
    test_check();
    test_check_im2col();
    test_json();
    test_json_im2col();
    test_maps_json();
    test_packed();
    test_packed_im2col();
    test_encode();
    test_extent_and_enums();
    return check_finish("test_tmap");
}
