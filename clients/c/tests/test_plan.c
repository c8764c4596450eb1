/* clients/c/tests/test_plan.c - unit tests of hidet_plan_* without a GPU (suite unit, client):
 * a plan shaped like the daemon's answer for examples/graphs/resnet_bottleneck.json (prepare
 * steps writing constants, steps reading them, arena buffers, a workspace) parsed, its tensors
 * and arena layout read back, bindings checked; damaged plans refused naming the field; calls
 * out of order refused; and hidet_plan_load() on a machine without the CUDA driver (forced with
 * $HIDETD_LIBCUDA) failing with -ELIBACC and dlopen's reason.
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
        {d_dtype, "outputs[0].dtype: expected f16, bf16, f32, i32 or i64"},
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

int main(void)
{
    /* Before any plan call: the driver is opened once, at the first hidet_plan_load(). */
    setenv("HIDETD_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
    test_parse();
    test_damaged();
    return check_finish("test_plan");
}
