/* clients/c/tests/test_plan.c - unit tests of hidet_plan_* without a GPU (suite unit, client):
 * a plan shaped like the daemon's answer for examples/graphs/resnet_bottleneck.json (prepare
 * steps writing constants, steps reading them, arena buffers, a workspace) parsed, its tensors
 * and arena layout read back, bindings checked; damaged plans refused naming the field; calls
 * out of order refused; and hidet_plan_load() on a machine without the CUDA driver (forced with
 * $HIDETD_LIBCUDA) failing with -ELIBACC and dlopen's reason. A plan with named dims (a dispatch
 * table step, a set whose tensor map follows b*s) at several sizes: the kernel set each step
 * chooses, its grid and parameters, output shapes, and sizes refused in the daemon's words.
 */
#include "hidet/client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "tests/check.h"

#define K1 "1111111111111111111111111111111111111111111111111111111111111111"
#define K2 "2222222222222222222222222222222222222222222222222222222222222222"
#define K3 "3333333333333333333333333333333333333333333333333333333333333333"

/* kernel set JSON with one kernel whose params are the given buffers, in order. */
static cJSON *kset(const char *key, const char *out_shape, const char *dtype, int ws,
                   const char *const *bufs, int n)
{
    char text[2048];
    int len = snprintf(text, sizeof(text),
                       "{\"key\":\"%s\",\"op\":\"x\",\"arch\":\"sm_90\",\"output\":{\"shape\":%s,"
                       "\"dtype\":\"%s\"},\"workspace_bytes\":%d,\"kernels\":[{\"name\":\"k_%.4s\","
                       "\"arch\":\"sm_90\",\"grid\":[4,1,1],\"block\":[128,1,1],\"shared_bytes\":"
                       "65536,\"params\":[",
                       key, out_shape, dtype, ws, key);
    for (int i = 0; i < n; i++)
        len += snprintf(text + len, sizeof(text) - (size_t)len,
                        "%s{\"index\":%d,\"buffer\":\"%s\",\"type\":\"pointer\"}", i ? "," : "", i,
                        bufs[i]);
    snprintf(text + len, sizeof(text) - (size_t)len, "]}]}");
    return cJSON_Parse(text);
}

static const char *base_plan =
    "{\"graph_key\":\"" K1 "\",\"arch\":\"sm_90\",\"tune\":\"model\","
    "\"inputs\":[{\"name\":\"x\",\"shape\":[8,16],\"dtype\":\"f16\"}],"
    "\"weights\":[{\"name\":\"w\",\"shape\":[16,16],\"dtype\":\"f16\"},"
    "{\"name\":\"var\",\"shape\":[16],\"dtype\":\"f32\"}],"
    "\"outputs\":[{\"name\":\"y\",\"shape\":[8,16],\"dtype\":\"f16\"}],"
    "\"arena_bytes\":1024,\"constants_bytes\":256,"
    "\"buffers\":[{\"name\":\"h\",\"region\":\"arena\",\"offset\":0,\"bytes\":256,\"shape\":[8,16],"
    "\"dtype\":\"f16\"},{\"name\":\"#workspace0\",\"region\":\"arena\",\"offset\":512,\"bytes\":512},"
    "{\"name\":\"s#scale\",\"region\":\"constants\",\"offset\":0,\"bytes\":64,\"shape\":[16],"
    "\"dtype\":\"f32\"}],"
    "\"prepare\":[],\"steps\":[]}";

/* The base plan with its prepare step and two steps added. */
static cJSON *plan_json(void)
{
    cJSON *p = cJSON_Parse(base_plan);
    const char *pb[] = {"input0", "output"};
    const char *s1[] = {"input0", "input1", "input2", "workspace", "output"};
    const char *s2[] = {"input0", "output"};
    cJSON *st;

    st = cJSON_CreateObject();
    cJSON_AddItemToObject(st, "nodes", cJSON_Parse("[\"bn\"]"));
    cJSON_AddItemToObject(st, "bindings", cJSON_Parse("{\"input0\":\"var\",\"output\":\"s#scale\"}"));
    cJSON_AddItemToObject(st, "request", cJSON_Parse(
        "{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[16],\"dtype\":\"f32\"}]}"));
    cJSON_AddItemToObject(st, "kernel_set", kset(K1, "[16]", "f32", 0, pb, 2));
    cJSON_AddItemToArray(cJSON_GetObjectItem(p, "prepare"), st);

    st = cJSON_CreateObject();
    cJSON_AddItemToObject(st, "bindings", cJSON_Parse(
        "{\"input0\":\"x\",\"input1\":\"w\",\"input2\":\"s#scale\",\"workspace\":\"#workspace0\","
        "\"output\":\"h\"}"));
    cJSON_AddItemToObject(st, "request", cJSON_Parse(
        "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[8,16],\"dtype\":\"f16\"},{\"shape\":[16,16],"
        "\"dtype\":\"f16\"},{\"shape\":[16],\"dtype\":\"f32\"}]}"));
    cJSON_AddItemToObject(st, "kernel_set", kset(K2, "[8,16]", "f16", 512, s1, 5));
    cJSON_AddItemToArray(cJSON_GetObjectItem(p, "steps"), st);

    st = cJSON_CreateObject();
    cJSON_AddItemToObject(st, "bindings", cJSON_Parse("{\"input0\":\"h\",\"output\":\"y\"}"));
    cJSON_AddItemToObject(st, "request", cJSON_Parse(
        "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[8,16],\"dtype\":\"f16\"}]}"));
    cJSON_AddItemToObject(st, "kernel_set", kset(K3, "[8,16]", "f16", 0, s2, 2));
    cJSON_AddItemToArray(cJSON_GetObjectItem(p, "steps"), st);
    return p;
}

static int parse_obj(cJSON *o, hidet_plan **ret, hidet_error *err)
{
    char *text = cJSON_PrintUnformatted(o);
    int r = hidet_plan_parse(text, strlen(text), ret, err);
    free(text);
    cJSON_Delete(o);
    return r;
}

static void test_parse(void)
{
    hidet_plan *p = NULL;
    hidet_error err;
    bool c;
    uint64_t off, bytes;

    CHECK(parse_obj(plan_json(), &p, &err) == 0, "%s", err.message);
    if (!p)
        return;
    CHECK(hidet_plan_count(p, HIDET_PLAN_INPUT) == 1);
    CHECK(hidet_plan_count(p, HIDET_PLAN_WEIGHT) == 2);
    CHECK(hidet_plan_count(p, HIDET_PLAN_OUTPUT) == 1);
    const hidet_plan_tensor *t = hidet_plan_tensor_at(p, HIDET_PLAN_WEIGHT, 1);
    CHECK(t && strcmp(t->name, "var") == 0 && t->rank == 1 && t->shape[0] == 16 &&
          strcmp(t->dtype, "f32") == 0 && t->bytes == 64);
    CHECK(hidet_plan_tensor_at(p, HIDET_PLAN_WEIGHT, 2) == NULL);
    t = hidet_plan_tensor_at(p, HIDET_PLAN_OUTPUT, 0);
    CHECK(t && strcmp(t->name, "y") == 0 && t->bytes == 8 * 16 * 2);
    CHECK(hidet_plan_arena_bytes(p) == 1024 && hidet_plan_constants_bytes(p) == 256);
    hidet_plan_free(p);
    p = NULL;

    /* Integer inputs (token ids): i64 elements are 8 bytes, i32 4. */
    cJSON *pi = plan_json();
    cJSON_ReplaceItemInObject(cJSON_GetArrayItem(cJSON_GetObjectItem(pi, "inputs"), 0), "dtype", cJSON_CreateString("i64"));
    cJSON_ReplaceItemInObject(cJSON_GetArrayItem(cJSON_GetObjectItem(pi, "weights"), 1), "dtype", cJSON_CreateString("i32"));
    CHECK(parse_obj(pi, &p, &err) == 0, "%s", err.message);
    if (!p)
        return;
    t = hidet_plan_tensor_at(p, HIDET_PLAN_INPUT, 0);
    CHECK(t && strcmp(t->dtype, "i64") == 0 && t->bytes == 8 * 16 * 8);
    t = hidet_plan_tensor_at(p, HIDET_PLAN_WEIGHT, 1);
    CHECK(t && strcmp(t->dtype, "i32") == 0 && t->bytes == 16 * 4);
    hidet_plan_free(p);
    p = NULL;
    CHECK(parse_obj(plan_json(), &p, &err) == 0, "%s", err.message);
    if (!p)
        return;
    CHECK(hidet_plan_steps(p, false) == 2 && hidet_plan_steps(p, true) == 1);
    CHECK(hidet_plan_buffer(p, "#workspace0", &c, &off, &bytes) == 0 && !c && off == 512 &&
          bytes == 512);
    CHECK(hidet_plan_buffer(p, "s#scale", &c, &off, &bytes) == 0 && c && off == 0 && bytes == 64);
    CHECK(hidet_plan_buffer(p, "x", &c, &off, &bytes) == -ENOENT);

    /* Binding: by name, size and alignment checked. */
    CHECK(hidet_plan_bind(p, "x", 0x10000, 256, &err) == 0, "%s", err.message);
    CHECK(hidet_plan_bind(p, "x", 0x10000, 255, &err) == -EINVAL && strstr(err.message, "needs 256"),
          "%s", err.message);
    CHECK(hidet_plan_bind(p, "x", 0x10008, 256, &err) == -EINVAL &&
          strstr(err.message, "aligned"), "%s", err.message);
    CHECK(hidet_plan_bind(p, "x", 0, 256, &err) == -EINVAL);
    CHECK(hidet_plan_bind(p, "h", 0x10000, 256, &err) == -ENOENT &&
          strstr(err.message, "no input, weight or output 'h'") &&
          strstr(err.message, "x, w, var, y"), "%s", err.message);

    /* Out of order: nothing runs before hidet_plan_load(). */
    CHECK(hidet_plan_prepare(p, NULL, &err) == -EALREADY && strstr(err.message, "hidet_plan_load"));
    CHECK(hidet_plan_launch(p, NULL, &err) == -EALREADY);
    CHECK(hidet_plan_set_memory(p, 0x1000, 0x2010, &err) == -EINVAL);
    CHECK(hidet_plan_set_memory(p, 0x1000, 0, &err) == -EINVAL);
    CHECK(hidet_plan_set_memory(p, 0x1000, 0x2000, &err) == 0);

    /* No driver here (forced by main()): the reason, before any request is made. */
    hidet_client *cl = NULL;
    CHECK(hidet_client_open("/nonexistent/hidetd.sock", NULL, &cl, &err) == 0);
    CHECK(hidet_plan_load(p, cl, &err) == -ELIBACC, "%s", err.message);
    CHECK(strstr(err.message, "the CUDA driver (/nonexistent/libcuda.so.1) cannot be loaded") &&
          strstr(err.message, "NVIDIA GPU"), "%s", err.message);
    hidet_client_free(cl);
    hidet_plan_free(p);
}

typedef void (*damage_fn)(cJSON *p);

static cJSON *step(cJSON *p, const char *list, int i)
{
    return cJSON_GetArrayItem(cJSON_GetObjectItem(p, list), i);
}

static void d_unknown_name(cJSON *p)
{
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(step(p, "steps", 0), "bindings"), "input1",
                              cJSON_CreateString("w9"));
}
static void d_unbound(cJSON *p)
{
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(step(p, "steps", 1), "bindings"), "input0");
}
static void d_outside(cJSON *p)
{
    cJSON_ReplaceItemInObject(cJSON_GetArrayItem(cJSON_GetObjectItem(p, "buffers"), 1), "offset",
                              cJSON_CreateNumber(768));
}
static void d_misaligned(cJSON *p)
{
    cJSON_ReplaceItemInObject(cJSON_GetArrayItem(cJSON_GetObjectItem(p, "buffers"), 0), "offset",
                              cJSON_CreateNumber(8));
}
static void d_small(cJSON *p)
{
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(step(p, "steps", 0), "bindings"), "input2",
                              cJSON_CreateString("var"));
    /* The request's input2 is [16] f32 (64 bytes) and var is 64 bytes: make it need more. */
    cJSON *in2 = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(step(p, "steps", 0),
                                                                            "request"), "inputs"), 2);
    cJSON_ReplaceItemInObject(in2, "shape", cJSON_Parse("[32]"));
}
static void d_writes_input(cJSON *p)
{
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(step(p, "steps", 1), "bindings"), "output",
                              cJSON_CreateString("x"));
}
static void d_prepare_reads_input(cJSON *p)
{
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(step(p, "prepare", 0), "bindings"), "input0",
                              cJSON_CreateString("x"));
}
static void d_param(cJSON *p)
{
    cJSON *k = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(step(p, "steps", 1),
                                                                          "kernel_set"), "kernels"), 0);
    cJSON_ReplaceItemInObject(cJSON_GetArrayItem(cJSON_GetObjectItem(k, "params"), 0), "buffer",
                              cJSON_CreateString("input5"));
}
/* Step 1's weight parameter (w: 16x16 f16, 512 bytes) as a tensor map of this description. */
static void set_map_param(cJSON *p, const char *tensor_map)
{
    cJSON *k = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(step(p, "steps", 0),
                                                                          "kernel_set"), "kernels"), 0);
    cJSON *par = cJSON_GetArrayItem(cJSON_GetObjectItem(k, "params"), 1);
    cJSON_ReplaceItemInObject(par, "type", cJSON_CreateString("tensor_map"));
    cJSON_AddItemToObject(par, "tensor_map", cJSON_Parse(tensor_map));
}
/* ... a tiled map of `rows` rows. */
static void map_param(cJSON *p, int rows)
{
    char tm[256];
    snprintf(tm, sizeof(tm), "{\"dtype\":\"f16\",\"dims\":[16,%d],\"strides\":[32],\"box\":[16,8],"
             "\"element_strides\":[1,1],\"swizzle\":32,\"l2_promotion\":0,\"oob_fill\":\"zero\"}", rows);
    set_map_param(p, tm);
}
static void d_map_reach(cJSON *p) { map_param(p, 32); }
/* ... the input of a convolution read by an im2col map: `images` images of 4x4 pixels of 16
 * channels (512 bytes each), a 3x3 window with padding 1. */
static void im2col_param(cJSON *p, int images)
{
    char tm[384];
    snprintf(tm, sizeof(tm), "{\"mode\":\"im2col\",\"dtype\":\"f16\",\"dims\":[16,4,4,%d],"
             "\"strides\":[32,128,512],\"element_strides\":[1,1,1,1],\"lower_corner\":[-1,-1],"
             "\"upper_corner\":[-1,-1],\"channels_per_pixel\":16,\"pixels_per_column\":16,\"swizzle\":32,"
             "\"l2_promotion\":0,\"oob_fill\":\"zero\"}", images);
    set_map_param(p, tm);
}
static void d_im2col_reach(cJSON *p) { im2col_param(p, 2); }
/* ... a map whose rows follow a dynamic op's size: nothing in a plan gives it. */
static void d_sym_map(cJSON *p)
{
    set_map_param(p, "{\"dtype\":\"f16\",\"dims\":[16,{\"dims\":[\"n\"],\"coef\":1}],\"strides\":[32],"
                     "\"box\":[16,8],\"element_strides\":[1,1],\"swizzle\":32,\"l2_promotion\":0,"
                     "\"oob_fill\":\"zero\"}");
    cJSON_AddItemToObject(cJSON_GetObjectItem(step(p, "steps", 0), "kernel_set"), "dims",
                          cJSON_Parse("{\"n\":{\"min\":1,\"max\":16}}"));
}
static void d_param_type(cJSON *p)
{
    cJSON *k = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(step(p, "steps", 0),
                                                                          "kernel_set"), "kernels"), 0);
    cJSON_ReplaceItemInObject(cJSON_GetArrayItem(cJSON_GetObjectItem(k, "params"), 2), "type",
                              cJSON_CreateString("texture"));
}
/* A dynamic op's set in a plan: its size parameter has nothing to take it from. */
static void d_size_param(cJSON *p)
{
    cJSON *ks = cJSON_GetObjectItem(step(p, "steps", 0), "kernel_set");
    cJSON *k = cJSON_GetArrayItem(cJSON_GetObjectItem(ks, "kernels"), 0);
    cJSON_AddItemToObject(ks, "dims", cJSON_Parse("{\"n\":{\"min\":1,\"max\":8}}"));
    cJSON_AddItemToArray(cJSON_GetObjectItem(k, "params"),
                         cJSON_Parse("{\"index\":5,\"type\":\"int\",\"dim\":\"n\"}"));
}
static void d_dtype(cJSON *p)
{
    cJSON_ReplaceItemInObject(cJSON_GetArrayItem(cJSON_GetObjectItem(p, "outputs"), 0), "dtype",
                              cJSON_CreateString("f64"));
}
static void d_no_steps(cJSON *p) { cJSON_ReplaceItemInObject(p, "steps", cJSON_CreateArray()); }

static void test_damaged(void)
{
    static const struct {
        damage_fn f;
        const char *msg;
    } cases[] = {
        {d_unknown_name, "steps[0].bindings.input1: 'w9' names no input, weight, output or buffer"},
        {d_unbound, "steps[1].bindings.input0: the kernel reads input0, but the step binds nothing"},
        {d_outside, "buffers[1]: [768, 1280) lies outside the arena (1024 bytes)"},
        {d_misaligned, "buffers[0].offset: 8 is not a multiple of 256"},
        {d_small, "steps[0].bindings.input2: 'var' has 64 bytes, too few for input2 (128 bytes)"},
        {d_writes_input, "steps[1].bindings.output: the step writes 'x', a caller's input"},
        {d_prepare_reads_input, "prepare[0].bindings.input0: a prepare step may read weights"},
        {d_param, "steps[1].kernel_set.kernels[0].params[0].buffer: 'input5' is not input<i>"},
        {d_dtype, "outputs[0].dtype: expected f16, bf16, f32, i32, i64, f8e4m3 or f8e5m2"},
        {d_map_reach, "steps[0].bindings.input1: 'w' has 512 bytes, too few for the tensor map of input1 (1024 bytes)"},
        {d_im2col_reach,
         "steps[0].bindings.input1: 'w' has 512 bytes, too few for the tensor map of input1 (1024 bytes)"},
        {d_param_type, "steps[0].kernel_set.kernels[0].params[2].type: 'texture' is not a parameter kind"},
        {d_no_steps, "steps: expected a non-empty list"},
        {d_size_param, "steps[0].kernel_set.kernels[0].params[5].type: an \"int\" parameter (a "
                       "dynamic op's size) in a plan, whose shapes are fixed"},
        {d_sym_map, ".tensor_map.dims[1]: a dimension that follows a dynamic op's sizes in a plan, "
                    "whose shapes are fixed"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cJSON *p = plan_json();
        hidet_plan *plan = (hidet_plan *)0x1;
        hidet_error err;
        cases[i].f(p);
        CHECK(parse_obj(p, &plan, &err) == -EPROTO, "case %zu", i);
        CHECK(plan == (hidet_plan *)0x1, "case %zu: output set on failure", i);
        CHECK(strstr(err.message, cases[i].msg) != NULL, "case %zu: %s", i, err.message);
    }
    /* A tensor map that stays inside its buffer is a plan like any other. */
    cJSON *ok = plan_json();
    map_param(ok, 16);
    hidet_plan *plan = NULL;
    hidet_error err;
    CHECK(parse_obj(ok, &plan, &err) == 0, "%s", err.message);
    plan = hidet_plan_free(plan);
    ok = plan_json();
    im2col_param(ok, 1);
    CHECK(parse_obj(ok, &plan, &err) == 0, "%s", err.message);
    plan = hidet_plan_free(plan);
    CHECK(hidet_plan_parse("[1]", 3, &plan, &err) == -EPROTO);
    CHECK(hidet_plan_parse("{", 1, &plan, &err) == -EPROTO);
    CHECK(hidet_plan_free(NULL) == NULL);
}

/* ---- plans with named dims ---------------------------------------------------------------- */

#define K4 "4444444444444444444444444444444444444444444444444444444444444444"
#define DIMS_BS "\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":1,\"max\":4}}"
/* A set over b and s: grid x ceil(b*s / 2), the sizes of b and s as "int" parameters. */
#define BS_SET(key)                                                                                \
    "{\"key\":\"" key "\",\"op\":\"x\",\"arch\":\"sm_90\",\"output\":{\"shape\":[\"b*s\",16],"     \
    "\"dtype\":\"f16\"},\"workspace_bytes\":0,\"kernels\":[{\"name\":\"k_" key "\",\"grid\":["     \
    "{\"dims\":[\"b\",\"s\"],\"coef\":1,\"div\":2,\"mul\":1,\"cap\":0},1,1],\"block\":[128,1,1],"  \
    "\"shared_bytes\":0,\"params\":[{\"index\":0,\"buffer\":\"input0\",\"type\":\"pointer\"},"     \
    "{\"index\":1,\"buffer\":\"output\",\"type\":\"pointer\"},"                                     \
    "{\"index\":2,\"type\":\"int\",\"dim\":\"b\"},{\"index\":3,\"type\":\"int\",\"dim\":\"s\"}]}]}"

/* The plan of a graph over x [b, s, 16] and ids [b]: step 0 a dispatch table (b 1..4 ready,
 * 5..8 tuning), step 1 a set whose input map follows b*s, reading ids, writing y [b*s, 16]. The
 * arena holds h [b*s, 16] f16 at the max (1024 bytes). */
static const char *dyn_plan =
    "{\"graph_key\":\"" K1 "\",\"arch\":\"sm_90\",\"tune\":\"model\"," DIMS_BS ","
    "\"inputs\":[{\"name\":\"x\",\"shape\":[\"b\",\"s\",16],\"dtype\":\"f16\"},"
    "{\"name\":\"ids\",\"shape\":[\"b\"],\"dtype\":\"i32\"}],"
    "\"outputs\":[{\"name\":\"y\",\"shape\":[\"b*s\",16],\"dtype\":\"f16\"}],"
    "\"arena_bytes\":1024,\"constants_bytes\":0,"
    "\"buffers\":[{\"name\":\"h\",\"region\":\"arena\",\"offset\":0,\"bytes\":1024,"
    "\"shape\":[\"b*s\",16],\"dtype\":\"f16\"}],\"prepare\":[],\"steps\":["
    "{\"nodes\":[\"mm\"],\"bindings\":{\"input0\":\"x\",\"output\":\"h\"},"
    "\"request\":{\"op\":\"x\"," DIMS_BS ",\"inputs\":[{\"shape\":[\"b\",\"s\",16],\"dtype\":\"f16\"}]},"
    "\"kernel_set\":{\"op\":\"x\",\"arch\":\"sm_90\",\"op_key\":\"" K3 "\"," DIMS_BS ","
    "\"output\":{\"shape\":[\"b*s\",16],\"dtype\":\"f16\"},\"dispatch\":{\"generic\":" BS_SET(K1) ","
    "\"entries\":[{\"ranges\":{\"b\":[1,4],\"s\":[1,4]},\"state\":\"ready\",\"kernel_set\":"
    BS_SET(K2) "},{\"ranges\":{\"b\":[5,8],\"s\":[1,4]},\"state\":\"tuning\","
    "\"job\":\"/v1/jobs/3\"}]}}},"
    "{\"nodes\":[\"ln\"],\"bindings\":{\"input0\":\"h\",\"input1\":\"ids\",\"output\":\"y\"},"
    "\"request\":{\"op\":\"x\"," DIMS_BS ",\"inputs\":[{\"shape\":[\"b*s\",16],\"dtype\":\"f16\"},"
    "{\"shape\":[\"b\"],\"dtype\":\"i32\"}]},"
    "\"kernel_set\":{\"key\":\"" K4 "\",\"op\":\"x\",\"arch\":\"sm_90\"," DIMS_BS ","
    "\"output\":{\"shape\":[\"b*s\",16],\"dtype\":\"f16\"},\"workspace_bytes\":0,"
    "\"kernels\":[{\"name\":\"k_ln\",\"grid\":[4,1,1],\"block\":[128,1,1],\"shared_bytes\":0,"
    "\"params\":[{\"index\":0,\"buffer\":\"input0\",\"type\":\"tensor_map\",\"tensor_map\":"
    "{\"dtype\":\"f16\",\"dims\":[16,{\"dims\":[\"b\",\"s\"],\"coef\":1}],\"strides\":[32],"
    "\"box\":[16,8],\"element_strides\":[1,1],\"swizzle\":32,\"l2_promotion\":0,"
    "\"oob_fill\":\"zero\"}},{\"index\":1,\"buffer\":\"input1\",\"type\":\"pointer\"},"
    "{\"index\":2,\"buffer\":\"output\",\"type\":\"pointer\"},"
    "{\"index\":3,\"type\":\"int\",\"dim\":\"s\"}]}]}}]}";

static int shapes(hidet_plan *p, int64_t b, int64_t s, int64_t inner, int64_t ids,
                  hidet_error *err)
{
    const int64_t x[] = {b, s, inner}, i[] = {ids};
    int r = hidet_plan_set_shape(p, "x", x, 3, err);
    return r < 0 ? r : hidet_plan_set_shape(p, "ids", i, 1, err);
}

static void test_dims(void)
{
    hidet_plan *p = NULL;
    hidet_error err;
    char key[HIDET_KEY_LEN + 1];
    uint32_t grid[3];
    uint64_t args[8];
    int64_t shape[HIDET_MAX_RANK], v;
    size_t n_params;
    long entry;
    int rank;
    uint64_t bytes;

    CHECK(hidet_plan_parse(dyn_plan, strlen(dyn_plan), &p, &err) == 0, "%s", err.message);
    if (!p)
        return;
    CHECK(hidet_plan_n_dims(p) == 2 && strcmp(hidet_plan_dim_at(p, 0)->name, "b") == 0 &&
          hidet_plan_dim_at(p, 0)->max == 8 && strcmp(hidet_plan_dim_at(p, 1)->name, "s") == 0 &&
          hidet_plan_dim_at(p, 2) == NULL);
    const hidet_plan_tensor *x = hidet_plan_tensor_at(p, HIDET_PLAN_INPUT, 0);
    CHECK(x && x->shape[0] == 8 && x->shape[1] == 4 && x->bytes == 1024, "at the max");
    CHECK(hidet_plan_arena_bytes(p) == 1024);
    CHECK(hidet_plan_shape(p, "y", shape, &rank, &bytes, &err) == -EALREADY);
    CHECK(hidet_plan_size(p, "b", &v) == -EALREADY && hidet_plan_size(p, "q", &v) == -ENOENT);
    /* Nothing says b yet. */
    CHECK(hidet_plan_apply_sizes(p, &err) == -EINVAL &&
          strstr(err.message, "the size of b is not known") != NULL, "%s", err.message);
    CHECK(hidet_plan_bind(p, "x", 0x10000, 96, &err) == 0, "%s", err.message); /* 3*2*16 f16 */

    /* b = 3, s = 2: step 0 runs its ready entry, step 1 its only set. */
    CHECK(shapes(p, 3, 2, 16, 3, &err) == 0 && hidet_plan_apply_sizes(p, &err) == 0, "%s",
          err.message);
    CHECK(hidet_plan_size(p, "b", &v) == 0 && v == 3);
    CHECK(hidet_plan_step_kernel(p, 0, 0, &entry, key, grid, args, 8, &n_params, &err) == 0,
          "%s", err.message);
    CHECK(entry == 0 && strcmp(key, K2) == 0 && grid[0] == 3 && n_params == 4, "entry %ld grid %u",
          entry, grid[0]);
    CHECK(args[0] == 0x10000 && args[1] == 0 && args[2] == 3 && args[3] == 2,
          "args %llx %llx %llu %llu", (unsigned long long)args[0], (unsigned long long)args[1],
          (unsigned long long)args[2], (unsigned long long)args[3]);
    CHECK(hidet_plan_step_kernel(p, 1, 0, &entry, key, grid, args, 8, NULL, &err) == 0);
    CHECK(entry == -1 && strcmp(key, K4) == 0 && grid[0] == 4 && args[3] == 2);
    CHECK(hidet_plan_shape(p, "y", shape, &rank, &bytes, &err) == 0 && rank == 2 &&
          shape[0] == 6 && shape[1] == 16 && bytes == 192, "%s", err.message);

    /* b = 6, s = 4: the entry holding them is tuning: the generic set, grid ceil(24 / 2). */
    CHECK(shapes(p, 6, 4, 16, 6, &err) == 0 && hidet_plan_apply_sizes(p, &err) == 0, "%s",
          err.message);
    CHECK(hidet_plan_step_kernel(p, 0, 0, &entry, key, grid, args, 8, NULL, &err) == 0);
    CHECK(entry == 1 && strcmp(key, K1) == 0 && grid[0] == 12 && args[2] == 6 && args[3] == 4,
          "entry %ld key %.4s grid %u", entry, key, grid[0]);
    /* And back: the ready entry again. */
    CHECK(shapes(p, 2, 1, 16, 2, &err) == 0 && hidet_plan_apply_sizes(p, &err) == 0);
    CHECK(hidet_plan_step_kernel(p, 0, 0, &entry, key, grid, NULL, 0, NULL, &err) == 0 &&
          entry == 0 && strcmp(key, K2) == 0 && grid[0] == 1);

    /* Refusals, in the daemon's words where it has them. */
    CHECK(shapes(p, 9, 2, 16, 9, &err) == 0 && hidet_plan_apply_sizes(p, &err) == -ERANGE &&
          strcmp(err.message, "b is 9; its range is 1..8") == 0 &&
          strcmp(err.field, "sizes.b") == 0, "%s (%s)", err.message, err.field);
    CHECK(shapes(p, 3, 2, 16, 5, &err) == 0 && hidet_plan_apply_sizes(p, &err) == -EINVAL &&
          strstr(err.message, "input 'ids' shape[0]: b is 5 here, but 3 from input 'x' "
                              "shape[0]") != NULL && strcmp(err.field, "ids.shape[0]") == 0,
          "%s", err.message);
    CHECK(shapes(p, 3, 2, 15, 3, &err) == 0 && hidet_plan_apply_sizes(p, &err) == -EINVAL &&
          strstr(err.message, "input 'x' shape[2] is 15, the plan's is 16") != NULL, "%s",
          err.message);
    const int64_t bad_rank[] = {3, 2};
    CHECK(hidet_plan_set_shape(p, "x", bad_rank, 2, &err) == -EINVAL &&
          strstr(err.message, "rank 2, the plan's has rank 3") != NULL);
    CHECK(hidet_plan_set_shape(p, "y", bad_rank, 2, &err) == -ENOENT);
    /* An explicit size wins, and the shapes must agree with it. */
    const char *s_name[] = {"s"}, *q_name[] = {"q"};
    const int64_t s3[] = {3};
    CHECK(hidet_plan_set_sizes(p, q_name, s3, 1, &err) == -EINVAL);
    CHECK(hidet_plan_set_sizes(p, s_name, s3, 1, &err) == 0);
    CHECK(shapes(p, 3, 2, 16, 3, &err) == 0 && hidet_plan_apply_sizes(p, &err) == -EINVAL &&
          strstr(err.message, "input 'x' shape[1]: s is 2 here, but 3 from "
                              "hidet_plan_set_sizes()") != NULL, "%s", err.message);
    CHECK(shapes(p, 3, 3, 16, 3, &err) == 0 && hidet_plan_apply_sizes(p, &err) == 0 &&
          hidet_plan_size(p, "s", &v) == 0 && v == 3, "%s", err.message);
    CHECK(hidet_plan_set_sizes(p, NULL, NULL, 0, &err) == 0);
    /* Bound bytes of a named tensor are checked at the launch, at the sizes. */
    CHECK(hidet_plan_bind(p, "x", 0x10000, 8, &err) == 0);
    hidet_plan_free(p);

    /* Damaged plans. */
    static const struct {
        const char *from, *to, *msg;
    } cases[] = {
        {"{\"name\":\"x\",\"shape\":[\"b\"", "{\"name\":\"x\",\"shape\":[\"q\"",
         "inputs[0].shape[0]: 'q' is not a dim"},
        {"\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":1,\"max\":4}},\"inputs\"",
         "\"inputs\"", "inputs[0].shape[0]: 'b' is a name, but the plan declares no \"dims\""},
        {"\"op_key\":\"" K3 "\",\"dims\":{\"b\":{\"min\":1,\"max\":8}",
         "\"op_key\":\"" K3 "\",\"dims\":{\"b\":{\"min\":1,\"max\":16}",
         "steps[0].kernel_set.dims.b: 1..16 (multiple of 1), but the plan's is 1..8"},
        {"\"buffers\":[{\"name\":\"h\",\"region\":\"arena\",\"offset\":0,\"bytes\":1024",
         "\"buffers\":[{\"name\":\"h\",\"region\":\"arena\",\"offset\":0,\"bytes\":512",
         "steps[0].bindings.output: 'h' has 512 bytes, too few for its output (1024 bytes)"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *at = strstr(dyn_plan, cases[i].from);
        CHECK(at != NULL, "case %zu: not in the plan", i);
        if (!at)
            continue;
        size_t n = strlen(dyn_plan) - strlen(cases[i].from) + strlen(cases[i].to) + 1;
        char *bad = malloc(n);
        snprintf(bad, n, "%.*s%s%s", (int)(at - dyn_plan), dyn_plan, cases[i].to,
                 at + strlen(cases[i].from));
        p = NULL;
        CHECK(hidet_plan_parse(bad, strlen(bad), &p, &err) == -EPROTO && !p, "case %zu", i);
        CHECK(strstr(err.message, cases[i].msg) != NULL, "case %zu: %s", i, err.message);
        free(bad);
        hidet_plan_free(p);
    }
}

int main(void)
{
    /* Before any plan call: the driver is opened once, at the first hidet_plan_load(). */
    setenv("HIDETD_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
    test_parse();
    test_damaged();
    test_dims();
    return check_finish("test_plan");
}
