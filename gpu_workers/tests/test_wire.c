/* gpu_workers/tests/test_wire.c - the worker protocol: round trips, every truncation, oversize
 * frames, garbage, and the strict field checks. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gpu_workers/wire.h"

#include "tests/check.h"

static const uint8_t cand_img[] = "\177ELF fake cubin bytes \x01\x02\x03";
static const char ref_img[] = ".version 8.0\n.target sm_90\n";
static const uint8_t heater_img[] = "\177ELF another schedule";

static void make_req(gw_measure_req *q)
{
    memset(q, 0, sizeof(*q));
    q->id = UINT64_C(18446744073709551557); /* above 2^53: must survive JSON */
    q->n_buffers = 4;
    q->buffers[0] = (gw_buffer){GW_BUF_INPUT, GW_F16, 77 * 333};
    q->buffers[1] = (gw_buffer){GW_BUF_INPUT, GW_BF16, 333 * 1000};
    q->buffers[2] = (gw_buffer){GW_BUF_OUTPUT, GW_F16, 77 * 1000};
    q->buffers[3] = (gw_buffer){GW_BUF_REF_OUTPUT, GW_F32, 77 * 1000};
    q->candidate.image = cand_img;
    q->candidate.image_len = sizeof(cand_img) - 1;
    q->candidate.n_launches = 2;
    q->candidate.launches[0] = (gw_launch){.name = "mm_main", .grid = {8, 3, 1}, .block = {128, 1, 1}, .shared_bytes = 98304, .n_args = 3, .args = {0, 1, 2}};
    /* The main launch also takes tensor maps after its pointers: a tiled one of buffer 1 and an
     * im2col one of buffer 0 (seen as a 1x333x1000 input of 1000 channels). */
    q->candidate.launches[0].n_maps = 2;
    q->candidate.launches[0].maps[0] = (tuner_tmap){.buf = 1, .dtype = TUNER_F16, .rank = 2, .dims = {1000, 333},
                                                    .strides = {2000}, .box = {64, 256}, .element_strides = {1, 1},
                                                    .swizzle = 128};
    q->candidate.launches[0].maps[1] = (tuner_tmap){.buf = 0, .mode = TUNER_TMAP_IM2COL, .dtype = TUNER_F16, .rank = 3,
                                                    .dims = {1000, 333, 1}, .strides = {2000, 666000},
                                                    .element_strides = {1, 2, 1}, .lower_corner = {-300},
                                                    .upper_corner = {-2}, .channels_per_pixel = 64,
                                                    .pixels_per_column = 100, .swizzle = 128};
    /* The second launch also takes a scalar after its pointer: a dynamic op's size (a long long). */
    q->candidate.launches[1] = (gw_launch){.name = "mm_reduce", .grid = {100, 1, 1}, .block = {256, 1, 1}, .shared_bytes = 0,
                                           .n_args = 2, .args = {2, GW_ARG_I64}, .values = {0, 8192}};
    q->reference.image = (const uint8_t *)ref_img;
    q->reference.image_len = sizeof(ref_img); /* PTX with its NUL */
    q->reference.n_launches = 1;
    q->reference.launches[0] = (gw_launch){.name = "ref", .grid = {77, 1, 1}, .block = {256, 1, 1}, .shared_bytes = 0, .n_args = 3, .args = {0, 1, 3}};
    q->output_buffer = 2;
    q->ref_output_buffer = 3;
    q->check = true;
    q->rtol = 1e-2;
    q->atol = 2e-3;
    q->row_len = 1000; /* the output's rows */
    q->warmup = 3;
    q->min_reps = 10;
    q->max_reps = 200;
    q->min_time_ms = 25.5;
    q->beat_us = 12.25;
    q->heat_ms = 200; /* a long kernel in a final round */
    /* Heated by another schedule of the op, on the candidate's buffers. */
    q->heater.image = heater_img;
    q->heater.image_len = sizeof(heater_img) - 1;
    q->heater.n_launches = 1;
    q->heater.launches[0] = (gw_launch){.name = "mm_other", .grid = {4, 6, 1}, .block = {384, 1, 1}, .shared_bytes = 200000, .n_args = 3, .args = {0, 1, 2}};
}

static bool same_module(const gw_module *a, const gw_module *b)
{
    if (a->n_launches != b->n_launches || a->image_len != b->image_len ||
        (a->image_len && memcmp(a->image, b->image, a->image_len)))
        return false;
    for (int i = 0; i < a->n_launches; i++) {
        const gw_launch *x = &a->launches[i], *y = &b->launches[i];
        if (strcmp(x->name, y->name) || memcmp(x->grid, y->grid, sizeof(x->grid)) ||
            memcmp(x->block, y->block, sizeof(x->block)) || x->shared_bytes != y->shared_bytes ||
            x->n_args != y->n_args || memcmp(x->args, y->args, sizeof(int) * (size_t)x->n_args) ||
            memcmp(x->values, y->values, sizeof(x->values[0]) * (size_t)x->n_args) ||
            x->n_maps != y->n_maps)
            return false;
        for (int k = 0; k < x->n_maps; k++)
            if (x->maps[k].buf != y->maps[k].buf || !tuner_tmap_equal(&x->maps[k], &y->maps[k]))
                return false;
    }
    return true;
}

static void test_measure_roundtrip(void)
{
    gw_measure_req q, d;
    uint8_t *buf = NULL;
    size_t len = 0, used = 0;
    gw_wire_msg m = {0};

    make_req(&q);
    CHECK(gw_wire_check_req(&q) == 0);
    CHECK(gw_wire_encode_measure(&q, &buf, &len) == 0);
    CHECK(gw_wire_parse(buf, len, &m, &used) == 0);
    CHECK(used == len);
    CHECK(m.type == GW_MSG_MEASURE);
    CHECK(gw_wire_decode_measure(&m, &d) == 0);
    CHECK(d.id == q.id);
    CHECK(d.n_buffers == q.n_buffers);
    CHECK(!memcmp(d.buffers, q.buffers, sizeof(gw_buffer) * 4));
    CHECK(same_module(&d.candidate, &q.candidate));
    CHECK(same_module(&d.reference, &q.reference));
    CHECK(same_module(&d.heater, &q.heater));
    CHECK(d.output_buffer == 2 && d.ref_output_buffer == 3 && d.check);
    CHECK(d.rtol == q.rtol && d.atol == q.atol && d.row_len == 1000 && d.warmup == 3 && d.min_reps == 10 &&
          d.max_reps == 200 && d.min_time_ms == 25.5 && d.beat_us == 12.25 && d.heat_ms == 200);

    /* Every truncation of a valid frame is "incomplete", never a frame or a crash. */
    for (size_t cut = 0; cut < len; cut++) {
        gw_wire_msg t = {0};
        size_t u = 0;
        uint8_t *copy = malloc(cut ? cut : 1); /* exact size: ASan sees any over-read */
        memcpy(copy, buf, cut);
        int r = gw_wire_parse(copy, cut, &t, &u);
        if (r != -EAGAIN) {
            fprintf(stderr, "truncation at %zu: %d\n", cut, r);
            failures++;
        }
        free(copy);
    }
    /* The same through the stream reader, one byte at a time. */
    gw_wire_reader rd = {0};
    int frames = 0;
    for (size_t i = 0; i < len; i++) {
        gw_wire_msg t = {0};
        CHECK(gw_wire_reader_feed(&rd, buf + i, 1) == 0);
        int r = gw_wire_reader_next(&rd, &t);
        if (r == 0) {
            frames++;
            CHECK(i == len - 1);
            gw_measure_req x;
            CHECK(gw_wire_decode_measure(&t, &x) == 0 && x.id == q.id);
            gw_wire_msg_clear(&t);
        } else {
            CHECK(r == -EAGAIN);
        }
    }
    CHECK(frames == 1 && rd.len == 0);
    gw_wire_reader_clear(&rd);

    /* Every single-byte corruption either decodes to a valid request or is rejected cleanly. */
    for (size_t i = 0; i < len; i++) {
        uint8_t *copy = malloc(len);
        memcpy(copy, buf, len);
        copy[i] ^= 0x5a;
        gw_wire_msg t = {0};
        size_t u = 0;
        int r = gw_wire_parse(copy, len, &t, &u);
        if (r == 0) {
            gw_measure_req x;
            if (gw_wire_decode_measure(&t, &x) == 0)
                CHECK(gw_wire_check_req(&x) == 0);
            gw_wire_msg_clear(&t);
        } else {
            CHECK(r == -EAGAIN || r == -EBADMSG || r == -EMSGSIZE);
        }
        free(copy);
    }
    gw_wire_msg_clear(&m);
    free(buf);
}

/* A dynamic op's tensor map (rows following a named dim, here at its max 333) travels as the
 * static map it is at the dims' max: the worker measures there and encodes dims[] as they are. */
static void test_symbolic_map(void)
{
    gw_measure_req q, d;
    uint8_t *buf = NULL;
    size_t len = 0, used = 0;
    gw_wire_msg m = {0};

    make_req(&q);
    tuner_tmap *t = &q.candidate.launches[0].maps[0];
    t->sym[1] = 1, t->sym_coef[1] = 1;
    CHECK(gw_wire_check_req(&q) == 0);
    CHECK(gw_wire_encode_measure(&q, &buf, &len) == 0);
    CHECK(gw_wire_parse(buf, len, &m, &used) == 0 && gw_wire_decode_measure(&m, &d) == 0);
    const tuner_tmap *b = &d.candidate.launches[0].maps[0];
    CHECK(!tuner_tmap_is_symbolic(b) && b->dims[1] == 333 && b->buf == 1);
    tuner_tmap plain = *t;
    plain.sym[1] = 0, plain.sym_coef[1] = 0;
    CHECK(tuner_tmap_equal(b, &plain) && !tuner_tmap_equal(b, t));
    gw_wire_msg_clear(&m);
    free(buf);
}

/* Re-encodes a request after `mutate` changed its JSON header; returns decode's verdict. */
static int decode_mutated(void (*mutate)(cJSON *j))
{
    gw_measure_req q, d;
    uint8_t *buf = NULL, *buf2 = NULL;
    size_t len = 0, len2 = 0, used = 0;
    gw_wire_msg m = {0}, m2 = {0};
    int r;

    make_req(&q);
    gw_wire_encode_measure(&q, &buf, &len);
    gw_wire_parse(buf, len, &m, &used);
    mutate(m.json);
    const uint8_t *blobs[3] = {m.blobs[0], m.blobs[1], m.blobs[2]};
    r = gw_wire_encode(GW_MSG_MEASURE, m.json, 3, blobs, m.blob_len, &buf2, &len2);
    if (r == 0)
        r = gw_wire_parse(buf2, len2, &m2, &used);
    if (r == 0)
        r = gw_wire_decode_measure(&m2, &d);
    gw_wire_msg_clear(&m);
    gw_wire_msg_clear(&m2);
    free(buf);
    free(buf2);
    return r;
}

static void mut_arg_oob(cJSON *j)
{
    cJSON *l = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "candidate"), "launches"), 0);
    cJSON_ReplaceItemInObject(l, "args", cJSON_CreateIntArray((int[]){0, 1, 9}, 3));
}
static void mut_block_big(cJSON *j)
{
    cJSON *l = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "candidate"), "launches"), 0);
    cJSON_ReplaceItemInObject(l, "block", cJSON_CreateIntArray((int[]){64, 32, 1}, 3));
}
static void mut_bad_name(cJSON *j)
{
    cJSON *l = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "candidate"), "launches"), 0);
    cJSON_ReplaceItemInObject(l, "name", cJSON_CreateString("evil\"; rm"));
}
static void mut_output_role(cJSON *j)
{
    cJSON_ReplaceItemInObject(j, "output", cJSON_CreateNumber(0));
}
static void mut_reps(cJSON *j)
{
    cJSON_ReplaceItemInObject(j, "max_reps", cJSON_CreateNumber(5)); /* < min_reps */
}
static void mut_id(cJSON *j)
{
    cJSON_ReplaceItemInObject(j, "id", cJSON_CreateString("12x"));
}
static void mut_elems(cJSON *j)
{
    cJSON *b = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "buffers"), 0);
    cJSON_ReplaceItemInArray(b, 2, cJSON_CreateNumber(1e12 * 1e6));
}
static void mut_rtol_type(cJSON *j)
{
    cJSON_ReplaceItemInObject(j, "rtol", cJSON_CreateString("0.1"));
}
static void mut_row_len_uneven(cJSON *j)
{
    cJSON_ReplaceItemInObject(j, "row_len", cJSON_CreateNumber(333)); /* does not divide 77 * 1000 */
}
static void mut_row_len_negative(cJSON *j)
{
    cJSON_ReplaceItemInObject(j, "row_len", cJSON_CreateNumber(-1000));
}
static void mut_row_len_missing(cJSON *j)
{
    cJSON_DeleteItemFromObject(j, "row_len");
}
static void mut_heat_negative(cJSON *j)
{
    cJSON_ReplaceItemInObject(j, "heat_ms", cJSON_CreateNumber(-1));
}
static void mut_heat_long(cJSON *j)
{
    cJSON_ReplaceItemInObject(j, "heat_ms", cJSON_CreateNumber(GW_WIRE_MAX_HEAT_MS + 1)); /* a worker held for minutes */
}
static void mut_heat_missing(cJSON *j)
{
    cJSON_DeleteItemFromObject(j, "heat_ms");
}
static void mut_heat_zero(cJSON *j)
{
    cJSON_ReplaceItemInObject(j, "heat_ms", cJSON_CreateNumber(0)); /* a heater that never heats */
}
static void mut_heater_missing(cJSON *j)
{
    cJSON_DeleteItemFromObject(j, "heater");
}
static void mut_heater_arg_oob(cJSON *j)
{
    cJSON *l = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "heater"), "launches"), 0);
    cJSON_ReplaceItemInObject(l, "args", cJSON_CreateIntArray((int[]){0, 1, 4}, 3)); /* 4 buffers */
}
static cJSON *first_map(cJSON *j)
{
    cJSON *l = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "candidate"), "launches"), 0);
    return cJSON_GetArrayItem(cJSON_GetObjectItem(l, "maps"), 0);
}
static void mut_map_buf_oob(cJSON *j)
{
    cJSON_ReplaceItemInObject(first_map(j), "buf", cJSON_CreateNumber(4)); /* 4 buffers */
}
static void mut_map_box(cJSON *j)
{
    cJSON_ReplaceItemInObject(first_map(j), "box", cJSON_CreateIntArray((int[]){128, 256}, 2)); /* > swizzle */
}
static void mut_map_member(cJSON *j)
{
    cJSON_AddNumberToObject(first_map(j), "address", 4096);
}
static cJSON *second_launch(cJSON *j)
{
    return cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "candidate"), "launches"), 1);
}
static void mut_values_missing(cJSON *j)
{
    cJSON_DeleteItemFromObject(second_launch(j), "values");
}
static void mut_values_on_buffer(cJSON *j)
{
    cJSON_ReplaceItemInObject(second_launch(j), "values", cJSON_CreateIntArray((int[]){5, 8192}, 2));
}
static void mut_values_short(cJSON *j)
{
    cJSON_ReplaceItemInObject(second_launch(j), "values", cJSON_CreateIntArray((int[]){8192}, 1));
}
static void mut_values_fraction(cJSON *j)
{
    cJSON_ReplaceItemInObject(second_launch(j), "values", cJSON_CreateDoubleArray((double[]){0, 1.5}, 2));
}
static void mut_values_huge(cJSON *j)
{
    cJSON_ReplaceItemInObject(second_launch(j), "values", cJSON_CreateDoubleArray((double[]){0, 1e17}, 2));
}
static void mut_values_string(cJSON *j)
{
    cJSON *v = cJSON_CreateArray();
    cJSON_AddItemToArray(v, cJSON_CreateNumber(0));
    cJSON_AddItemToArray(v, cJSON_CreateString("8192"));
    cJSON_ReplaceItemInObject(second_launch(j), "values", v);
}
static void mut_values_without_scalar(cJSON *j)
{
    cJSON *l = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "candidate"), "launches"), 0);
    cJSON_AddItemToObject(l, "values", cJSON_CreateIntArray((int[]){0, 0, 0}, 3));
}
static void mut_arg_negative(cJSON *j)
{
    cJSON_ReplaceItemInObject(second_launch(j), "args", cJSON_CreateIntArray((int[]){2, -2}, 2));
}
static void mut_nothing(cJSON *j)
{
    (void)j;
}

static void test_measure_strict(void)
{
    CHECK(decode_mutated(mut_nothing) == 0);
    CHECK(decode_mutated(mut_arg_oob) == -EBADMSG);
    CHECK(decode_mutated(mut_block_big) == -EBADMSG);
    CHECK(decode_mutated(mut_bad_name) == -EBADMSG);
    CHECK(decode_mutated(mut_output_role) == -EBADMSG);
    CHECK(decode_mutated(mut_reps) == -EBADMSG);
    CHECK(decode_mutated(mut_id) == -EBADMSG);
    CHECK(decode_mutated(mut_elems) == -EBADMSG);
    CHECK(decode_mutated(mut_rtol_type) == -EBADMSG);
    /* Rows (row_len): a whole number of them in the output, never negative, always sent. */
    CHECK(decode_mutated(mut_row_len_uneven) == -EBADMSG);
    CHECK(decode_mutated(mut_row_len_negative) == -EBADMSG);
    CHECK(decode_mutated(mut_row_len_missing) == -EBADMSG);
    /* Heating (heat_ms): never negative, at most GW_WIRE_MAX_HEAT_MS, always sent. */
    CHECK(decode_mutated(mut_heat_negative) == -EBADMSG);
    CHECK(decode_mutated(mut_heat_long) == -EBADMSG);
    CHECK(decode_mutated(mut_heat_missing) == -EBADMSG);
    /* The heater: always sent (perhaps without launches), only with heating, on the buffers. */
    CHECK(decode_mutated(mut_heat_zero) == -EBADMSG);
    CHECK(decode_mutated(mut_heater_missing) == -EBADMSG);
    CHECK(decode_mutated(mut_heater_arg_oob) == -EBADMSG);
    CHECK(decode_mutated(mut_map_buf_oob) == -EBADMSG);
    CHECK(decode_mutated(mut_map_box) == -EBADMSG);
    CHECK(decode_mutated(mut_map_member) == -EBADMSG);
    /* Scalar arguments: "values" exactly when one is passed, an integer per argument, 0 at a
     * buffer's place, within 2^53. */
    CHECK(decode_mutated(mut_values_missing) == -EBADMSG);
    CHECK(decode_mutated(mut_values_on_buffer) == -EBADMSG);
    CHECK(decode_mutated(mut_values_short) == -EBADMSG);
    CHECK(decode_mutated(mut_values_fraction) == -EBADMSG);
    CHECK(decode_mutated(mut_values_huge) == -EBADMSG);
    CHECK(decode_mutated(mut_values_string) == -EBADMSG);
    CHECK(decode_mutated(mut_values_without_scalar) == -EBADMSG);
    CHECK(decode_mutated(mut_arg_negative) == -EBADMSG);

    gw_measure_req q;
    uint8_t *buf = NULL;
    size_t len;
    make_req(&q);
    q.candidate.n_launches = 0;
    CHECK(gw_wire_encode_measure(&q, &buf, &len) == -EINVAL);
    make_req(&q);
    q.buffers[3].dtype = GW_F16; /* the reference output is always F32 */
    CHECK(gw_wire_check_req(&q) == -EINVAL);
    make_req(&q);
    q.heat_ms = NAN; /* the sender checks heating as the decoder does */
    CHECK(gw_wire_check_req(&q) == -EINVAL);
    q.heat_ms = GW_WIRE_MAX_HEAT_MS;
    CHECK(gw_wire_check_req(&q) == 0);
    q.heater.image_len = 0; /* launches without an image */
    CHECK(gw_wire_check_req(&q) == -EINVAL);
    q.heater.image = NULL;
    q.heater.n_launches = 0; /* no heater: the candidate heats itself */
    CHECK(gw_wire_check_req(&q) == 0);
    q.heat_ms = 0;
    CHECK(gw_wire_check_req(&q) == 0);
    make_req(&q);
    q.candidate.launches[1].values[1] = GW_ARG_I64_MAX + 1;
    CHECK(gw_wire_check_req(&q) == -EINVAL);
    q.candidate.launches[1].values[1] = -GW_ARG_I64_MAX; /* any long long the wire carries */
    CHECK(gw_wire_check_req(&q) == 0);
    q.candidate.launches[1].values[0] = 1; /* a value beside a buffer */
    CHECK(gw_wire_check_req(&q) == -EINVAL);
    make_req(&q);
    q.candidate.launches[1].args[1] = -2;
    CHECK(gw_wire_check_req(&q) == -EINVAL);
    /* Integer inputs (gather's ids) travel and come back; a dtype past i64 is refused. */
    make_req(&q);
    q.buffers[0].dtype = GW_I64;
    q.buffers[1].dtype = GW_I32;
    CHECK(gw_wire_check_req(&q) == -EINVAL); /* an integer input needs its fill range */
    q.int_range[0][0] = -30522;
    q.int_range[0][1] = 32431;
    q.int_range[1][0] = 0;
    q.int_range[1][1] = 2;
    CHECK(gw_wire_check_req(&q) == 0);
    if (gw_wire_encode_measure(&q, &buf, &len) == 0) {
        gw_wire_msg im = {0};
        size_t iused;
        gw_measure_req id;
        CHECK(gw_wire_parse(buf, len, &im, &iused) == 0 && gw_wire_decode_measure(&im, &id) == 0 &&
              id.buffers[0].dtype == GW_I64 && id.buffers[1].dtype == GW_I32 && id.int_range[0][0] == -30522 &&
              id.int_range[0][1] == 32431 && id.int_range[1][0] == 0 && id.int_range[1][1] == 2 &&
              id.int_range[2][0] == 0 && id.int_range[2][1] == 0);
        gw_wire_msg_clear(&im);
        free(buf);
        buf = NULL;
    } else {
        CHECK(0, "an i64 input does not encode");
    }
    q.int_range[1][1] = 0; /* an empty range */
    CHECK(gw_wire_check_req(&q) == -EINVAL);
    q.int_range[1][1] = 2;
    q.int_range[2][1] = 5; /* a float buffer carries none */
    CHECK(gw_wire_check_req(&q) == -EINVAL);
    q.int_range[2][1] = 0;
    q.buffers[0].dtype = (gw_dtype)(GW_I64 + 1);
    CHECK(gw_wire_check_req(&q) == -EINVAL);
    make_req(&q);
    q.check = false;
    q.reference.n_launches = 0;
    q.reference.image = NULL;
    q.reference.image_len = 0;
    CHECK(gw_wire_check_req(&q) == 0);
    CHECK(gw_wire_encode_measure(&q, &buf, &len) == 0);
    gw_wire_msg m = {0};
    size_t used;
    gw_measure_req d;
    CHECK(gw_wire_parse(buf, len, &m, &used) == 0 && gw_wire_decode_measure(&m, &d) == 0);
    CHECK(!d.check && d.reference.n_launches == 0 && d.reference.image == NULL);
    gw_wire_msg_clear(&m);
    free(buf);
}

static void test_result_and_small(void)
{
    gw_measure_result r, d;
    uint8_t *buf = NULL;
    size_t len = 0, used = 0;
    gw_wire_msg m = {0};
    bool fatal = false;

    memset(&r, 0, sizeof(r));
    r.id = 42;
    r.status = GW_WRONG;
    r.device = 3;
    r.median_us = 10.5;
    r.min_us = 9.75;
    r.reps = 17;
    r.early_stopped = true;
    r.max_abs_err = INFINITY; /* NaN outputs: travels as null */
    r.max_rel_err = 0.125;
    memset(r.reason, 'x', sizeof(r.reason) - 1);
    CHECK(gw_wire_encode_result(&r, true, &buf, &len) == 0);
    CHECK(gw_wire_parse(buf, len, &m, &used) == 0);
    CHECK(gw_wire_decode_result(&m, &d, &fatal) == 0);
    CHECK(fatal && d.id == 42 && d.status == GW_WRONG && d.device == 3 && d.median_us == 10.5 &&
          d.min_us == 9.75 && d.reps == 17 && d.early_stopped && isinf(d.max_abs_err) &&
          d.max_rel_err == 0.125 && strlen(d.reason) == sizeof(r.reason) - 1);
    gw_wire_msg_clear(&m);
    free(buf);

    /* A result whose status is out of range is rejected. */
    cJSON *j = cJSON_Parse("{\"id\":\"1\",\"status\":99,\"device\":0,\"median_us\":1,\"min_us\":1,"
                           "\"reps\":1,\"early_stopped\":false,\"max_abs_err\":0,\"max_rel_err\":0,"
                           "\"reason\":\"\",\"fatal\":false}");
    CHECK(gw_wire_encode(GW_MSG_RESULT, j, 0, NULL, NULL, &buf, &len) == 0);
    CHECK(gw_wire_parse(buf, len, &m, &used) == 0);
    CHECK(gw_wire_decode_result(&m, &d, &fatal) == -EBADMSG);
    gw_wire_msg_clear(&m);
    free(buf);
    cJSON_Delete(j);

    /* HELLO with a device and with an error. */
    gw_device_info dev = {.index = 1, .sm = 90, .sm_count = 132, .mem_bytes = UINT64_C(85) << 30,
                          .driver_version = 13000};
    snprintf(dev.name, sizeof(dev.name), "NVIDIA H100 80GB HBM3");
    gw_device_info dd;
    bool has = false;
    char err[64];
    CHECK(gw_wire_encode_hello(77, &dev, NULL, &buf, &len) == 0);
    CHECK(gw_wire_parse(buf, len, &m, &used) == 0);
    CHECK(gw_wire_decode_hello(&m, &dd, &has, err, sizeof(err)) == 0);
    CHECK(has && dd.index == 1 && dd.sm == 90 && dd.sm_count == 132 && dd.mem_bytes == dev.mem_bytes &&
          !strcmp(dd.name, dev.name));
    gw_wire_msg_clear(&m);
    free(buf);
    CHECK(gw_wire_encode_hello(77, NULL, "cuInit: no CUDA-capable device is detected", &buf, &len) == 0);
    CHECK(gw_wire_parse(buf, len, &m, &used) == 0);
    CHECK(gw_wire_decode_hello(&m, &dd, &has, err, sizeof(err)) == 0);
    CHECK(!has && !strcmp(err, "cuInit: no CUDA-capable device is detected"));
    gw_wire_msg_clear(&m);
    free(buf);

    /* HEARTBEAT / CANCEL / LOG. */
    uint64_t id = 0;
    char text[32];
    CHECK(gw_wire_encode_simple(GW_MSG_CANCEL, 9007199254740993ULL, NULL, &buf, &len) == 0);
    CHECK(gw_wire_parse(buf, len, &m, &used) == 0 && gw_wire_decode_id(&m, &id) == 0 &&
          id == 9007199254740993ULL);
    gw_wire_msg_clear(&m);
    free(buf);
    CHECK(gw_wire_encode_simple(GW_MSG_HEARTBEAT, 0, NULL, &buf, &len) == 0);
    CHECK(gw_wire_parse(buf, len, &m, &used) == 0 && gw_wire_decode_id(&m, &id) == 0 && id == 0);
    gw_wire_msg_clear(&m);
    free(buf);
    CHECK(gw_wire_encode_simple(GW_MSG_LOG, 0, "loaded 12 kernels and then some", &buf, &len) == 0);
    CHECK(gw_wire_parse(buf, len, &m, &used) == 0 && gw_wire_decode_log(&m, text, sizeof(text)) == 0 &&
          !strcmp(text, "loaded 12 kernels and then some"));
    char small[8];
    CHECK(gw_wire_decode_log(&m, small, sizeof(small)) == 0 && !strcmp(small, "loaded ")); /* truncated */
    CHECK(gw_wire_decode_id(&m, &id) == -EBADMSG); /* wrong type */
    gw_wire_msg_clear(&m);
    free(buf);
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static void test_garbage(void)
{
    gw_wire_msg m = {0};
    size_t used = 0;
    uint8_t f[64];

    /* Oversize length: refused before waiting for (or allocating) the body. */
    put32(f, GW_WIRE_MAX_FRAME + 1);
    CHECK(gw_wire_parse(f, 4, &m, &used) == -EMSGSIZE);
    put32(f, 0xffffffffu);
    CHECK(gw_wire_parse(f, 4, &m, &used) == -EMSGSIZE);
    /* Too short to hold type + json_len + n_blobs. */
    put32(f, 8);
    CHECK(gw_wire_parse(f, 12, &m, &used) == -EBADMSG);
    /* Unknown type. */
    put32(f, 14);
    put32(f + 4, 99);
    put32(f + 8, 2);
    memcpy(f + 12, "{}", 2);
    put32(f + 14, 0);
    CHECK(gw_wire_parse(f, 18, &m, &used) == -EBADMSG);
    /* Valid skeleton, then variations. */
    put32(f + 4, GW_MSG_SHUTDOWN);
    CHECK(gw_wire_parse(f, 18, &m, &used) == 0 && used == 18);
    gw_wire_msg_clear(&m);
    /* JSON that is not an object / not JSON / has trailing bytes. */
    memcpy(f + 12, "[]", 2);
    CHECK(gw_wire_parse(f, 18, &m, &used) == -EBADMSG);
    memcpy(f + 12, "{x", 2);
    CHECK(gw_wire_parse(f, 18, &m, &used) == -EBADMSG);
    put32(f, 15);
    put32(f + 8, 3);
    memcpy(f + 12, "{}x", 3);
    put32(f + 15, 0);
    CHECK(gw_wire_parse(f, 19, &m, &used) == -EBADMSG);
    /* json_len beyond the frame. */
    put32(f, 14);
    put32(f + 8, 200);
    CHECK(gw_wire_parse(f, 18, &m, &used) == -EBADMSG);
    /* Blob count too large; blob length beyond the frame; bytes after the last blob. */
    put32(f + 8, 2);
    memcpy(f + 12, "{}", 2);
    put32(f + 14, GW_WIRE_MAX_BLOBS + 1);
    CHECK(gw_wire_parse(f, 18, &m, &used) == -EBADMSG);
    put32(f, 18);
    put32(f + 14, 1);
    put32(f + 18, 100);
    CHECK(gw_wire_parse(f, 22, &m, &used) == -EBADMSG);
    put32(f, 20);
    put32(f + 14, 1);
    put32(f + 18, 0);
    f[22] = 1;
    f[23] = 2;
    CHECK(gw_wire_parse(f, 24, &m, &used) == -EBADMSG);
    /* The reader's errors are sticky. */
    gw_wire_reader rd = {0};
    put32(f, 0xfffffff0u);
    CHECK(gw_wire_reader_feed(&rd, f, 8) == 0);
    CHECK(gw_wire_reader_next(&rd, &m) == -EMSGSIZE);
    CHECK(gw_wire_reader_feed(&rd, f, 8) == -EMSGSIZE);
    gw_wire_reader_clear(&rd);

    /* Random garbage never crashes, and never decodes into an invalid request. */
    uint64_t s = 12345;
    for (int iter = 0; iter < 20000; iter++) {
        uint8_t g[96];
        size_t n = 1 + (size_t)(iter % 96);
        for (size_t i = 0; i < n; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            g[i] = (uint8_t)(s >> 56);
        }
        if (iter & 1)
            put32(g, (uint32_t)(n >= 4 ? n - 4 : 0));
        int r = gw_wire_parse(g, n, &m, &used);
        CHECK(r == 0 || r == -EAGAIN || r == -EBADMSG || r == -EMSGSIZE);
        if (r == 0)
            gw_wire_msg_clear(&m);
    }
}

static void test_probe_json(void)
{
    gw_device_info devs[3] = {{.index = 0, .sm = 90, .sm_count = 132, .driver_version = 13000},
                              {.index = 1, .sm = 80, .sm_count = 108, .driver_version = 13000}};
    snprintf(devs[0].name, sizeof(devs[0].name), "A");
    snprintf(devs[1].name, sizeof(devs[1].name), "B");
    char *s = gw_wire_probe_json(devs, 2, NULL);
    gw_device_info out[4];
    int n = -1;
    char err[64];
    CHECK(s && gw_wire_parse_probe(s, strlen(s), out, 4, &n, err, sizeof(err)) == 0);
    CHECK(n == 2 && out[1].sm == 80 && !strcmp(out[1].name, "B") && err[0] == 0);
    CHECK(gw_wire_parse_probe(s, strlen(s), out, 1, &n, err, sizeof(err)) == 0 && n == 1);
    free(s);
    s = gw_wire_probe_json(NULL, 0, "cuInit: CUDA driver version is insufficient");
    CHECK(s && gw_wire_parse_probe(s, strlen(s), out, 4, &n, err, sizeof(err)) == 0 && n == 0 &&
          !strcmp(err, "cuInit: CUDA driver version is insufficient"));
    free(s);
    const char *bad[] = {"", "{", "[]", "{\"devices\": 3}", "{\"devices\": [{\"index\": 0}]}",
                         "{\"devices\": [{\"index\":0,\"name\":\"a\",\"sm\":90,\"sm_count\":1,"
                         "\"mem_bytes\":1,\"driver_version\":1},{\"index\":0,\"name\":\"b\",\"sm\":"
                         "90,\"sm_count\":1,\"mem_bytes\":1,\"driver_version\":1}]}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(gw_wire_parse_probe(bad[i], strlen(bad[i]), out, 4, &n, err, sizeof(err)) == -EBADMSG);
}

static void test_fd_helpers(void)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    const uint8_t blob[5] = {1, 2, 3, 4, 5};
    const uint8_t *blobs[1] = {blob};
    size_t lens[1] = {5};
    cJSON *j = cJSON_Parse("{\"id\": \"7\"}");
    CHECK(gw_wire_send_fd(sv[0], GW_MSG_CANCEL, j, 1, blobs, lens) == 0);
    gw_wire_msg m = {0};
    CHECK(gw_wire_recv_fd(sv[1], &m) == 0);
    CHECK(m.type == GW_MSG_CANCEL && m.n_blobs == 1 && m.blob_len[0] == 5 && !memcmp(m.blobs[0], blob, 5));
    gw_wire_msg_clear(&m);
    cJSON_Delete(j);
    /* A half frame then end of stream. */
    uint8_t half[6] = {20, 0, 0, 0, 1, 0};
    CHECK(write(sv[0], half, sizeof(half)) == (ssize_t)sizeof(half));
    close(sv[0]);
    CHECK(gw_wire_recv_fd(sv[1], &m) == -EPIPE);
    CHECK(gw_wire_recv_fd(sv[1], &m) == -EPIPE);
    close(sv[1]);
}

int main(void)
{
    test_measure_roundtrip();
    test_symbolic_map();
    test_measure_strict();
    test_result_and_small();
    test_garbage();
    test_probe_json();
    test_fd_helpers();
    if (failures) {
        fprintf(stderr, "test_wire: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_wire: ok\n");
    return 0;
}
