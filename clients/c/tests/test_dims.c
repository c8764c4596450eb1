/* clients/c/tests/test_dims.c - unit tests of libhidet-client's named dimensions (suite unit,
 * client): kernel sets of dynamic ops ("int" parameters, grid rules, named output axes, "dims")
 * and dispatch tables parsed from hand-written answers that follow docs/api.md "Named
 * dimensions", damaged ones refused naming the field, the choice of the kernel set at the edges
 * of ranges (a merged entry's - measured neighbours running one kernel - at both of its edges
 * too), sizes out of range refused with the daemon's wording, grid rules evaluated, and the
 * request builder's dims, sizes and named shapes.
 */
#include "hidet/client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "tests/check.h"

#define KEY1 "1111111111111111111111111111111111111111111111111111111111111111"
#define KEY2 "2222222222222222222222222222222222222222222222222222222222222222"
#define KEY3 "3333333333333333333333333333333333333333333333333333333333333333"
#define KEY4 "4444444444444444444444444444444444444444444444444444444444444444"

/* A rows-over-n kernel set: pointers, then the size of n; grid x = 112 * ceil(n / 128) capped
 * at 0 (none), grid y a rule over n with a cap, z fixed. */
#define SET_BODY(key, extra)                                                                       \
    "{\"key\":\"" key "\",\"op\":\"matmul\",\"arch\":\"sm_90a\"," extra                           \
    "\"output\":{\"shape\":[\"n\",14336],\"dtype\":\"f16\"},\"workspace_bytes\":0,"                \
    "\"kernels\":[{\"name\":\"hd_mm\",\"grid\":[{\"dims\":[\"n\"],\"coef\":1,\"div\":128,"         \
    "\"mul\":112,\"cap\":0},{\"dims\":[\"n\"],\"coef\":3,\"div\":64,\"mul\":1,\"cap\":40},1],"     \
    "\"block\":[128,1,1],\"shared_bytes\":0,\"params\":["                                          \
    "{\"index\":0,\"buffer\":\"input0\",\"type\":\"pointer\"},"                                   \
    "{\"index\":1,\"buffer\":\"input1\",\"type\":\"pointer\"},"                                   \
    "{\"index\":2,\"buffer\":\"output\",\"type\":\"pointer\"},"                                   \
    "{\"index\":3,\"type\":\"int\",\"dim\":\"n\"}]}]}"

#define DIMS_N "\"dims\":{\"n\":{\"min\":1,\"max\":8192,\"multiple_of\":1}},"

static const char *const N[] = {"n"};

static char *replace(const char *s, const char *from, const char *to)
{
    const char *at = strstr(s, from);
    if (!at)
        return NULL;
    size_t n = strlen(s) - strlen(from) + strlen(to) + 1;
    char *r = malloc(n);
    if (!r)
        return NULL;
    snprintf(r, n, "%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
    return r;
}

/* The set with `from` replaced by `to` is refused (-EPROTO) with a message holding `want`. */
static void refused_set(const char *set, const char *from, const char *to, const char *want)
{
    char *bad = replace(set, from, to);
    hidet_kernel_set *s = NULL;
    hidet_error e;
    CHECK(bad != NULL, "'%s' is not in the set", from);
    if (!bad)
        return;
    int r = hidet_kernel_set_parse(bad, strlen(bad), &s, &e);
    CHECK(r == -EPROTO && !s, "%s -> %s: %d", from, to, r);
    CHECK(r != -EPROTO || strstr(e.message, want), "got '%s', want '%s'", e.message, want);
    hidet_kernel_set_free(s);
    free(bad);
}

/* SET_BODY with a fifth parameter: input0, [n][4096] f16, read through a tensor map whose rows
 * follow n. */
#define MAP_PARAM                                                                                  \
    "{\"index\":3,\"type\":\"int\",\"dim\":\"n\"},{\"index\":4,\"buffer\":\"input0\","          \
    "\"type\":\"tensor_map\",\"tensor_map\":{\"dtype\":\"f16\",\"dims\":[4096,{\"dims\":[\"n\"],"   \
    "\"coef\":1}],\"strides\":[8192],\"box\":[64,128],\"element_strides\":[1,1],"              \
    "\"swizzle\":128,\"l2_promotion\":256,\"oob_fill\":\"zero\"}}"

/* A tensor map whose dims follow n (docs/api.md, "Named dimensions"): parsed by name, its value
 * at max in tensor_map.dims, bound at sizes, and refused where the names are wrong. */
static void test_set_map(void)
{
    char *json = replace(SET_BODY(KEY1, DIMS_N), "{\"index\":3,\"type\":\"int\",\"dim\":\"n\"}", MAP_PARAM);
    hidet_kernel_set *s = NULL;
    hidet_error e;
    hidet_tensor_map m;

    CHECK(json && hidet_kernel_set_parse(json, strlen(json), &s, &e) == 0, "%s", e.message);
    if (!s) {
        free(json);
        return;
    }
    const hidet_param *p = &s->kernels[0].params[4];
    const hidet_kernel_dims *kd = s->kernel_dims ? &s->kernel_dims[0] : NULL;
    CHECK(p->is_tensor_map && p->tensor_map.rank == 2 && p->tensor_map.dims[0] == 4096 &&
          p->tensor_map.dims[1] == 8192);
    CHECK(kd && kd->map_dims && kd->map_dims[4].dims[1] == 1 && kd->map_dims[4].coef[1] == 1 &&
          kd->map_dims[4].dims[0] == 0 && kd->map_dims[0].dims[1] == 0);
    const int64_t at300[] = {300}, at9000[] = {9000};
    CHECK(hidet_kernel_set_bind_map(s, 0, 4, N, at300, 1, &m, &e) == 0, "%s", e.message);
    CHECK(m.dims[0] == 4096 && m.dims[1] == 300 && m.strides[0] == 8192 && m.box[1] == 128);
    CHECK(hidet_kernel_set_bind_map(s, 0, 4, N, at9000, 1, &m, &e) == -ERANGE &&
          strcmp(e.field, "sizes.n") == 0);
    CHECK(hidet_kernel_set_bind_map(s, 0, 0, N, at300, 1, &m, &e) == -EINVAL); /* a pointer */
    CHECK(hidet_kernel_set_bind_map(s, 0, 5, N, at300, 1, &m, &e) == -EINVAL);
    hidet_kernel_set_free(s);
    s = NULL;

    /* A static map binds to itself; a static set keeps kernel_dims NULL. */
    char *st = replace(json, "{\"dims\":[\"n\"],\"coef\":1}", "8192");
    CHECK(st && hidet_kernel_set_parse(st, strlen(st), &s, &e) == 0, "%s", e.message);
    CHECK(s && s->kernel_dims && !s->kernel_dims[0].map_dims); /* dynamic by its int and rules */
    CHECK(s && hidet_kernel_set_bind_map(s, 0, 4, N, at300, 1, &m, &e) == 0 && m.dims[1] == 8192);
    hidet_kernel_set_free(s);
    free(st);

    refused_set(json, "[4096,{\"dims\":[\"n\"],\"coef\":1}]", "[4096,{\"dims\":[\"m\"],\"coef\":1}]",
                "tensor_map.dims[1]");
    refused_set(json, "[4096,{\"dims\":[\"n\"],\"coef\":1}]", "[4096,{\"dims\":[\"n\"],\"coef\":0}]",
                "tensor_map.dims[1]");
    refused_set(json, "[4096,{\"dims\":[\"n\"],\"coef\":1}]", "[4096,{\"dims\":[\"n\"],\"coef\":1,\"div\":2}]",
                "tensor_map.dims[1]");
    refused_set(json, "[4096,{\"dims\":[\"n\"],\"coef\":1}]", "[4096,{\"dims\":[\"n\"],\"coef\":1048576}]",
                "beyond 2^32"); /* 2^20 * 8192 */
    free(json);
}

static void test_set(void)
{
    const char *json = SET_BODY(KEY1, DIMS_N);
    hidet_kernel_set *s = NULL;
    hidet_error e;
    uint32_t grid[3];
    long long ints[4] = {-1, -1, -1, -1};

    CHECK(hidet_kernel_set_parse(json, strlen(json), &s, &e) == 0, "%s", e.message);
    if (!s)
        return;
    CHECK(s->n_dims == 1 && strcmp(s->dims[0].name, "n") == 0 && s->dims[0].min == 1 &&
          s->dims[0].max == 8192 && s->dims[0].multiple_of == 1);
    CHECK(s->output_rank == 2 && s->output_dims[0] == 1 && s->output_dims[1] == 0);
    CHECK(s->output_shape[0] == 8192 && s->output_shape[1] == 14336);
    CHECK(s->kernel_dims != NULL);
    const hidet_kernel *k = &s->kernels[0];
    const hidet_kernel_dims *kd = &s->kernel_dims[0];
    CHECK(k->n_params == 4 && k->params[3].kind == HIDET_BUFFER_SIZE &&
          strcmp(k->params[3].type, "int") == 0 && k->params[3].buffer[0] == '\0');
    CHECK(kd->param_dim[0] == -1 && kd->param_dim[3] == 0);
    CHECK(kd->grid[0].dims == 1 && kd->grid[0].div == 128 && kd->grid[0].mul == 112 &&
          kd->grid[0].cap == 0 && kd->grid[2].dims == 0);
    /* The rules' values at max: 112 * 64, min(40, ceil(3 * 8192 / 64)). */
    CHECK(k->grid[0] == 7168 && k->grid[1] == 40 && k->grid[2] == 1, "%u %u %u", k->grid[0],
          k->grid[1], k->grid[2]);

    /* Binding: the edges of the range and of the rules' steps. */
    int64_t n = 1;
    CHECK(hidet_kernel_set_bind(s, 0, N, &n, 1, grid, ints, &e) == 0, "%s", e.message);
    CHECK(grid[0] == 112 && grid[1] == 1 && grid[2] == 1 && ints[3] == 1 && ints[0] == -1);
    n = 128;
    CHECK(hidet_kernel_set_bind(s, 0, N, &n, 1, grid, ints, &e) == 0);
    CHECK(grid[0] == 112 && grid[1] == 6 && ints[3] == 128, "%u %u", grid[0], grid[1]);
    n = 129;
    CHECK(hidet_kernel_set_bind(s, 0, N, &n, 1, grid, ints, &e) == 0);
    CHECK(grid[0] == 224 && grid[1] == 7 && ints[3] == 129, "%u %u", grid[0], grid[1]);
    n = 8192;
    CHECK(hidet_kernel_set_bind(s, 0, N, &n, 1, grid, ints, &e) == 0);
    CHECK(grid[0] == 7168 && grid[1] == 40 && ints[3] == 8192);
    int64_t out = 0;
    n = 300;
    CHECK(hidet_kernel_set_output_dim(s, 0, N, &n, 1, &out, &e) == 0 && out == 300);
    CHECK(hidet_kernel_set_output_dim(s, 1, N, &n, 1, &out, &e) == 0 && out == 14336);

    /* Out of range: the daemon's words, the dim named; nothing written. */
    grid[0] = 77;
    ints[3] = 77;
    n = 9000;
    CHECK(hidet_kernel_set_bind(s, 0, N, &n, 1, grid, ints, &e) == -ERANGE);
    CHECK(strcmp(e.message, "n is 9000; its range is 1..8192") == 0, "%s", e.message);
    CHECK(strcmp(e.field, "sizes.n") == 0, "%s", e.field);
    CHECK(grid[0] == 77 && ints[3] == 77);
    n = 0;
    CHECK(hidet_kernel_set_bind(s, 0, N, &n, 1, grid, ints, &e) == -ERANGE);
    CHECK(strcmp(e.message, "n is 0; its range is 1..8192") == 0, "%s", e.message);
    /* Names: missing, unknown, twice. */
    CHECK(hidet_kernel_set_bind(s, 0, NULL, NULL, 0, grid, ints, &e) == -EINVAL &&
          strstr(e.message, "no size given for n"));
    const char *const MN[] = {"m"}, *const NN[] = {"n", "n"};
    int64_t two[2] = {4, 4};
    CHECK(hidet_kernel_set_bind(s, 0, MN, two, 1, grid, ints, &e) == -EINVAL &&
          strstr(e.message, "'m' is not a dim of the kernel (n)"), "%s", e.message);
    CHECK(hidet_kernel_set_bind(s, 0, NN, two, 2, grid, ints, &e) == -EINVAL &&
          strstr(e.message, "twice"));
    /* A kernel that takes sizes needs somewhere to put them; no such kernel 1. */
    n = 4;
    CHECK(hidet_kernel_set_bind(s, 0, N, &n, 1, grid, NULL, &e) == -EINVAL);
    CHECK(hidet_kernel_set_bind(s, 1, N, &n, 1, grid, ints, &e) == -EINVAL);
    hidet_kernel_set_free(s);

    /* multiple_of: min and max multiples of it, sizes too. */
    const char *m8 = SET_BODY(KEY1, "\"dims\":{\"n\":{\"min\":8,\"max\":8192,\"multiple_of\":8}},");
    s = NULL;
    CHECK(hidet_kernel_set_parse(m8, strlen(m8), &s, &e) == 0, "%s", e.message);
    if (s) {
        n = 12;
        CHECK(hidet_kernel_set_bind(s, 0, N, &n, 1, grid, ints, &e) == -ERANGE);
        CHECK(strcmp(e.message, "n is 12; its range is 8..8192, a multiple of 8") == 0, "%s",
              e.message);
        n = 16;
        CHECK(hidet_kernel_set_bind(s, 0, N, &n, 1, grid, ints, &e) == 0 && ints[3] == 16);
        hidet_kernel_set_free(s);
    }

    /* A static set binds with no sizes and keeps kernel_dims NULL. */
    const char *st = "{\"key\":\"" KEY2 "\",\"output\":{\"shape\":[4,4],\"dtype\":\"f32\"},"
                     "\"kernels\":[{\"name\":\"k\",\"grid\":[3,2,1],\"block\":[32,1,1],"
                     "\"params\":[{\"index\":0,\"buffer\":\"output\",\"type\":\"pointer\"}]}]}";
    s = NULL;
    CHECK(hidet_kernel_set_parse(st, strlen(st), &s, &e) == 0);
    if (s) {
        CHECK(s->n_dims == 0 && s->kernel_dims == NULL);
        CHECK(hidet_kernel_set_bind(s, 0, NULL, NULL, 0, grid, NULL, &e) == 0 && grid[0] == 3 &&
              grid[1] == 2);
        CHECK(hidet_kernel_set_bind(s, 0, N, &n, 1, grid, NULL, &e) == -EINVAL &&
              strstr(e.message, "it has none"));
        hidet_kernel_set_free(s);
    }

    /* A product axis and two dims; the rule multiplies both sizes. */
    const char *bs =
        "{\"key\":\"" KEY3 "\",\"dims\":{\"s\":{\"min\":1,\"max\":512},\"b\":{\"min\":1,\"max\":8}},"
        "\"output\":{\"shape\":[\"b*s\",768],\"dtype\":\"f16\"},"
        "\"kernels\":[{\"name\":\"ln\",\"grid\":[{\"dims\":[\"b\",\"s\"],\"coef\":1,\"div\":4,"
        "\"mul\":1,\"cap\":0},1,1],\"block\":[128,1,1],\"params\":["
        "{\"index\":0,\"buffer\":\"input0\",\"type\":\"pointer\"},"
        "{\"index\":1,\"buffer\":\"output\",\"type\":\"pointer\"},"
        "{\"index\":2,\"type\":\"int\",\"dim\":\"b\"},{\"index\":3,\"type\":\"int\",\"dim\":\"s\"}]}]}";
    s = NULL;
    CHECK(hidet_kernel_set_parse(bs, strlen(bs), &s, &e) == 0, "%s", e.message);
    if (s) {
        /* Sorted by name: b is dims[0]. */
        CHECK(s->n_dims == 2 && strcmp(s->dims[0].name, "b") == 0 && s->output_dims[0] == 3);
        CHECK(s->output_shape[0] == 8 * 512 && s->kernels[0].grid[0] == 1024);
        const char *const SB[] = {"s", "b"};
        int64_t v[2] = {300, 3};
        CHECK(hidet_kernel_set_bind(s, 0, SB, v, 2, grid, ints, &e) == 0, "%s", e.message);
        CHECK(grid[0] == 225 && ints[2] == 3 && ints[3] == 300, "%u", grid[0]);
        CHECK(hidet_kernel_set_output_dim(s, 0, SB, v, 2, &out, &e) == 0 && out == 900);
        v[0] = 513;
        CHECK(hidet_kernel_set_bind(s, 0, SB, v, 2, grid, ints, &e) == -ERANGE &&
              strcmp(e.message, "s is 513; its range is 1..512") == 0 &&
              strcmp(e.field, "sizes.s") == 0, "%s", e.message);
        hidet_kernel_set_free(s);
    }

    /* Refused: what a client must not launch, named. */
    refused_set(json, "\"dim\":\"n\"", "\"dim\":\"m\"", "params[3]: dim: 'm' is not a dim");
    refused_set(json, ",\"dim\":\"n\"", "", "params[3]: dim: an \"int\" parameter names");
    refused_set(json, DIMS_N, "", "it declares no \"dims\"");
    refused_set(json, "\"cap\":0}", "\"cap\":0,\"offset\":1}", "grid[0].offset: not a member");
    refused_set(json, "\"div\":128,", "", "grid[0].div: expected a whole number");
    refused_set(json, "\"div\":128", "\"div\":0", "grid[0].div");
    refused_set(json, "\"coef\":1,\"div\":128", "\"coef\":-1,\"div\":128", "grid[0].coef");
    refused_set(json, "\"dims\":[\"n\"],\"coef\":1,\"div\":128", "\"dims\":[],\"coef\":1,\"div\":128",
                "grid[0].dims: expected a non-empty list");
    refused_set(json, "\"dims\":[\"n\"],\"coef\":1,\"div\":128", "\"dims\":[\"q\"],\"coef\":1,\"div\":128",
                "grid[0].dims: 'q' is not a dim");
    refused_set(json, "\"mul\":1,\"cap\":40},1]", "\"mul\":1,\"cap\":40},\"x\"]",
                "grid[2]: expected a number or a rule");
    /* At max the rule must fit CUDA's limit (grid y at most 65535). */
    refused_set(json, "\"coef\":3,\"div\":64,\"mul\":1,\"cap\":40", "\"coef\":9,\"div\":1,\"mul\":1,\"cap\":0",
                "grid[1]: the rule gives 73728 blocks at the dims' max, beyond CUDA's limit");
    refused_set(json, "[\"n\",14336]", "[\"m\",14336]", "output.shape[0]: 'm' is not a dim");
    refused_set(json, "[\"n\",14336]", "[\"n*n\",14336]", "names n twice");
    refused_set(json, "[\"n\",14336]", "[\"N\",14336]", "is not a name");
    refused_set(json, "\"max\":8192", "\"max\":0", "dims.n: expected whole min and max");
    refused_set(json, "\"multiple_of\":1", "\"multiple_of\":3", "dims.n.multiple_of");
    refused_set(json, "{\"n\":{", "{\"N\":{", "a name is [a-z_][a-z0-9_]*");
    refused_set(json, "{\"n\":{", "{\"a_name_far_too_long\":{", "a name is");
    refused_set(json, "{\"n\":{", "{\"a\":{\"min\":1,\"max\":2},\"b\":{\"min\":1,\"max\":2},"
                "\"c\":{\"min\":1,\"max\":2},\"d\":{\"min\":1,\"max\":2},\"n\":{", "more than 4 dims");

    /* An unknown parameter type still parses (a buffer named) but is never bound. */
    char *unk = replace(json, "\"type\":\"int\",\"dim\":\"n\"", "\"buffer\":\"output\",\"type\":\"fancy\"");
    s = NULL;
    CHECK(unk && hidet_kernel_set_parse(unk, strlen(unk), &s, &e) == 0);
    if (s) {
        n = 4;
        CHECK(hidet_kernel_set_bind(s, 0, N, &n, 1, grid, ints, &e) == -EPROTO &&
              strstr(e.message, "'fancy' is not a parameter kind this client can pass"),
              "%s", e.message);
        hidet_kernel_set_free(s);
    }
    free(unk);
}

/* The answer of docs/api.md's example, with a ready, a tuning and an untuned entry; the ready
 * entry's set leaves its dims out (they are its ranges), the generic's too (the table's). */
static const char *table =
    "{\"op\":\"matmul\",\"arch\":\"sm_90a\",\"op_key\":\"" KEY3 "\"," DIMS_N
    "\"output\":{\"shape\":[\"n\",14336],\"dtype\":\"f16\"},"
    "\"dispatch\":{\"generic\":" SET_BODY(KEY1, "") ","
    "\"entries\":[{\"ranges\":{\"n\":[1,16]},\"state\":\"ready\",\"kernel_set\":" SET_BODY(KEY2, "") "},"
    "{\"ranges\":{\"n\":[17,32]},\"state\":\"tuning\",\"job\":\"/v1/jobs/12\"},"
    "{\"ranges\":{\"n\":[33,64]},\"state\":\"untuned\"},"
    "{\"ranges\":{\"n\":[65,128]},\"state\":\"evicted\"}]}}";

static void refused_table(const char *from, const char *to, const char *want)
{
    char *bad = replace(table, from, to);
    hidet_dispatch *d = NULL;
    hidet_error e;
    CHECK(bad != NULL, "'%s' is not in the table", from);
    if (!bad)
        return;
    int r = hidet_dispatch_parse(bad, strlen(bad), &d, &e);
    CHECK(r == -EPROTO && !d, "%s -> %s: %d", from, to, r);
    CHECK(r != -EPROTO || strstr(e.message, want), "got '%s', want '%s'", e.message, want);
    hidet_dispatch_free(d);
    free(bad);
}

static void test_dispatch(void)
{
    hidet_dispatch *d = NULL;
    hidet_error e;
    const hidet_kernel_set *s = NULL;
    long entry = 99;
    int64_t n;

    CHECK(hidet_is_dispatch(table, strlen(table)));
    CHECK(!hidet_is_dispatch("{\"key\":\"x\"}", 11));
    CHECK(hidet_dispatch_parse(table, strlen(table), &d, &e) == 0, "%s", e.message);
    if (!d)
        return;
    CHECK(strcmp(d->op, "matmul") == 0 && strcmp(d->arch, "sm_90a") == 0 &&
          strcmp(d->op_key, KEY3) == 0);
    CHECK(d->n_dims == 1 && d->dims[0].max == 8192 && d->output_dims[0] == 1 &&
          d->output_shape[1] == 14336 && strcmp(d->output_dtype, "f16") == 0);
    CHECK(d->generic && strcmp(d->generic->key, KEY1) == 0 && d->generic->n_dims == 1 &&
          d->generic->dims[0].max == 8192);
    CHECK(d->n_entries == 4);
    CHECK(d->entries[0].state == HIDET_ENTRY_READY && d->entries[0].kernel_set &&
          strcmp(d->entries[0].kernel_set->key, KEY2) == 0);
    /* The ready set's dims are its range. */
    CHECK(d->entries[0].kernel_set->dims[0].min == 1 && d->entries[0].kernel_set->dims[0].max == 16);
    CHECK(d->entries[1].state == HIDET_ENTRY_TUNING && d->entries[1].job &&
          strcmp(d->entries[1].job, "/v1/jobs/12") == 0 && !d->entries[1].kernel_set);
    CHECK(d->entries[2].state == HIDET_ENTRY_UNTUNED && d->entries[2].lo[0] == 33 &&
          d->entries[2].hi[0] == 64);
    CHECK(d->entries[3].state == HIDET_ENTRY_UNKNOWN &&
          strcmp(d->entries[3].state_name, "evicted") == 0);

    /* Selection at the edges. */
    struct { int64_t n; const char *key; long entry; } cases[] = {
        {1, KEY2, 0},    {16, KEY2, 0},   {17, KEY1, 1},    {32, KEY1, 1}, {33, KEY1, 2},
        {64, KEY1, 2},   {65, KEY1, 3},   {129, KEY1, -1}, {8192, KEY1, -1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        n = cases[i].n;
        s = NULL;
        CHECK(hidet_dispatch_select(d, N, &n, 1, &s, &entry, &e) == 0, "%s", e.message);
        CHECK(s && strcmp(s->key, cases[i].key) == 0 && entry == cases[i].entry,
              "n %lld: got %s, entry %ld", (long long)n, s ? s->key : "none", entry);
    }
    /* The chosen ready set binds; the generic one too, at any size of the table. */
    uint32_t grid[3];
    long long ints[4];
    n = 16;
    CHECK(hidet_dispatch_select(d, N, &n, 1, &s, NULL, &e) == 0 &&
          hidet_kernel_set_bind(s, 0, N, &n, 1, grid, ints, &e) == 0 && ints[3] == 16 &&
          grid[0] == 112);
    n = 17;
    CHECK(hidet_kernel_set_bind(d->entries[0].kernel_set, 0, N, &n, 1, grid, ints, &e) == -ERANGE &&
          strcmp(e.message, "n is 17; its range is 1..16") == 0, "%s", e.message);
    /* Out of the table's range. */
    n = 9000;
    s = NULL;
    CHECK(hidet_dispatch_select(d, N, &n, 1, &s, &entry, &e) == -ERANGE && !s);
    CHECK(strcmp(e.message, "n is 9000; its range is 1..8192") == 0 &&
          strcmp(e.field, "sizes.n") == 0, "%s", e.message);
    hidet_dispatch_free(d);

    refused_table("\"dispatch\":{", "\"dispatchx\":{", "not a dispatch table");
    refused_table(DIMS_N, "", "dims: missing");
    refused_table(DIMS_N, "\"dims\":{},", "dims: missing, or names no dim");
    refused_table("\"n\":[17,32]", "\"n\":[17,9000]", "entries[1].ranges.n: expected [lo, hi]");
    refused_table("\"n\":[17,32]", "\"n\":[32,17]", "entries[1].ranges.n");
    refused_table("\"n\":[17,32]", "\"m\":[17,32]", "entries[1].ranges.m: not a dim");
    refused_table("{\"n\":[17,32]}", "{}", "entries[1].ranges: no range of n");
    refused_table(",\"state\":\"untuned\"", "", "entries[2].state: missing");
    refused_table("\"state\":\"ready\",\"kernel_set\":" SET_BODY(KEY2, ""), "\"state\":\"ready\"",
                  "entries[0].kernel_set: the kernel set is not a JSON object");
    refused_table("\"generic\":" SET_BODY(KEY1, ""), "\"generic\":{}", "dispatch.generic:");
    refused_table("\"entries\":[", "\"entriez\":[", "dispatch.entries: expected a list");
}

/* A table whose first entry merges four measured ranges (docs/api.md: "merged" lists them, its
 * set's dims are the union's) beside a ready entry of its own and an untuned one. */
static const char *merged_table =
    "{\"op\":\"matmul\",\"arch\":\"sm_90a\",\"op_key\":\"" KEY3 "\"," DIMS_N
    "\"output\":{\"shape\":[\"n\",14336],\"dtype\":\"f16\"},"
    "\"dispatch\":{\"generic\":" SET_BODY(KEY1, "") ","
    "\"entries\":[{\"ranges\":{\"n\":[1,28]},\"state\":\"ready\",\"merged\":[{\"n\":[1,16]},"
    "{\"n\":[17,20]},{\"n\":[21,24]},{\"n\":[25,28]}],\"kernel_set\":"
    SET_BODY(KEY2, "\"measured\":true,\"dims\":{\"n\":{\"min\":1,\"max\":28,\"multiple_of\":1}},") "},"
    "{\"ranges\":{\"n\":[29,32]},\"state\":\"ready\",\"kernel_set\":"
    SET_BODY(KEY4, "\"measured\":true,\"dims\":{\"n\":{\"min\":29,\"max\":32,\"multiple_of\":1}},") "},"
    "{\"ranges\":{\"n\":[33,8192]},\"state\":\"untuned\"}]}}";

static void test_dispatch_merged(void)
{
    hidet_dispatch *d = NULL;
    hidet_error e;
    CHECK(hidet_dispatch_parse(merged_table, strlen(merged_table), &d, &e) == 0, "%s", e.message);
    if (!d)
        return;
    CHECK(d->n_entries == 3 && d->entries[0].lo[0] == 1 && d->entries[0].hi[0] == 28 &&
          d->entries[0].kernel_set && d->entries[0].kernel_set->dims[0].max == 28);
    /* Both edges of the merged range, and the neighbours' edges, choose as the ranges say. */
    struct { int64_t n; const char *key; long entry; } cases[] = {
        {1, KEY2, 0}, {17, KEY2, 0}, {28, KEY2, 0}, {29, KEY4, 1}, {32, KEY4, 1}, {33, KEY1, 2}, {8192, KEY1, 2},
    };
    uint32_t grid[3];
    long long ints[4];
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        int64_t n = cases[i].n;
        const hidet_kernel_set *s = NULL;
        long entry = 99;
        CHECK(hidet_dispatch_select(d, N, &n, 1, &s, &entry, &e) == 0, "%s", e.message);
        CHECK(s && strcmp(s->key, cases[i].key) == 0 && entry == cases[i].entry, "n %lld: got %s, entry %ld",
              (long long)n, s ? s->key : "none", entry);
        /* what was chosen binds at that size: the merged set at 1 and at 28 alike */
        CHECK(s && hidet_kernel_set_bind(s, 0, N, &n, 1, grid, ints, &e) == 0 && ints[3] == n, "bind at %lld: %s",
              (long long)n, e.message);
    }
    int64_t n = 29;
    CHECK(hidet_kernel_set_bind(d->entries[0].kernel_set, 0, N, &n, 1, grid, ints, &e) == -ERANGE &&
          strcmp(e.message, "n is 29; its range is 1..28") == 0, "%s", e.message);
    hidet_dispatch_free(d);
}

/* A range cut in two because one kernel fit it badly (docs/api.md, "coarse"): both halves are
 * ready with the coarse range's set (its dims 17..32), flagged coarse, the lower one with the job
 * of its own tuning; a launch in either binds that set. */
static const char *coarse_table =
    "{\"op\":\"matmul\",\"arch\":\"sm_90a\",\"op_key\":\"" KEY3 "\"," DIMS_N
    "\"output\":{\"shape\":[\"n\",14336],\"dtype\":\"f16\"},"
    "\"dispatch\":{\"generic\":" SET_BODY(KEY1, "") ","
    "\"entries\":[{\"ranges\":{\"n\":[1,16]},\"state\":\"ready\",\"kernel_set\":" SET_BODY(KEY2, "") "},"
    "{\"ranges\":{\"n\":[17,24]},\"state\":\"ready\",\"coarse\":{\"n\":[17,32]},\"job\":\"/v1/jobs/7\","
    "\"kernel_set\":"
    SET_BODY(KEY4, "\"measured\":true,\"dims\":{\"n\":{\"min\":17,\"max\":32,\"multiple_of\":1}},") "},"
    "{\"ranges\":{\"n\":[25,32]},\"state\":\"ready\",\"coarse\":{\"n\":[17,32]},\"kernel_set\":"
    SET_BODY(KEY4, "\"measured\":true,\"dims\":{\"n\":{\"min\":17,\"max\":32,\"multiple_of\":1}},") "}]}}";

static void test_dispatch_coarse(void)
{
    hidet_dispatch *d = NULL;
    hidet_error e;
    CHECK(hidet_dispatch_parse(coarse_table, strlen(coarse_table), &d, &e) == 0, "%s", e.message);
    if (!d)
        return;
    CHECK(d->n_entries == 3 && !d->entries[0].coarse && d->entries[1].coarse && d->entries[2].coarse &&
          d->entries[1].state == HIDET_ENTRY_READY && d->entries[1].job &&
          strcmp(d->entries[1].job, "/v1/jobs/7") == 0 && !d->entries[2].job);
    uint32_t grid[3];
    long long ints[4];
    for (int64_t n = 17; n <= 32; n += 15) {
        const hidet_kernel_set *s = NULL;
        long entry = 99;
        CHECK(hidet_dispatch_select(d, N, &n, 1, &s, &entry, &e) == 0, "%s", e.message);
        CHECK(s && strcmp(s->key, KEY4) == 0 && entry == (n <= 24 ? 1 : 2) &&
                  hidet_kernel_set_bind(s, 0, N, &n, 1, grid, ints, &e) == 0 && ints[3] == n,
              "n %lld: %s, entry %ld", (long long)n, s ? s->key : "none", entry);
    }
    hidet_dispatch_free(d);
}

static void test_builder(void)
{
    hidet_request *r = NULL;
    char *json = NULL;
    const char *const a_dims[] = {"n", NULL};
    const int64_t a_shape[] = {0, 4096}, b_shape[] = {4096, 14336};

    CHECK(hidet_request_new("matmul", &r) == 0);
    CHECK(hidet_request_add_input_named(r, a_dims, a_shape, 2, "f16") == 0);
    CHECK(hidet_request_add_input_named(r, NULL, b_shape, 2, "f16") == 0);
    CHECK(hidet_request_dim_hint(r, "n", 64) == -ENOENT);
    CHECK(hidet_request_dim(r, "n", 1, 4096, 1) == 0);
    CHECK(hidet_request_dim(r, "n", 1, 8192, 1) == 0); /* replaces */
    CHECK(hidet_request_dim_hint(r, "n", 1) == 0 && hidet_request_dim_hint(r, "n", 64) == 0);
    CHECK(hidet_request_size(r, "n", 300) == 0);
    CHECK(hidet_request_size(r, "n", 301) == 0); /* replaces */
    CHECK(hidet_request_dim(r, "m", 8, 64, 8) == 0);
    CHECK(hidet_request_add_input_named(r, a_dims, NULL, 2, "f16") == -EINVAL);
    CHECK(hidet_request_json(r, &json) == 0);
    const char *want = "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[\"n\",4096],\"dtype\":\"f16\"},"
                       "{\"shape\":[4096,14336],\"dtype\":\"f16\"}],"
                       "\"dims\":{\"n\":{\"min\":1,\"max\":8192,\"hints\":[1,64]},"
                       "\"m\":{\"min\":8,\"max\":64,\"multiple_of\":8}},\"sizes\":{\"n\":301}}";
    CHECK(json && strcmp(json, want) == 0, "%s", json ? json : "(null)");
    free(json);
    hidet_request_free(r);
}

int main(void)
{
    test_set_map();
    test_set();
    test_dispatch();
    test_dispatch_merged();
    test_dispatch_coarse();
    test_builder();
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    else
        printf("all dims tests passed\n");
    return failures ? 1 : 0;
}
