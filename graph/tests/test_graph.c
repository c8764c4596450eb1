/* graph/tests/test_graph.c - parsing, validation, partitioning and placement of graphs, in
 * process: the examples' kernels, every kind of bad graph, fusion that falls back instead of
 * going wrong, transposes folded into matmuls, outputs that own their memory, arena sharing. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "graph/graph.h"
#include "tests/check.h"
#include "tests/slurp.h"

static char *example(const char *name)
{
    const char *src = getenv("HIDETD_SRC");
    char path[512];
    snprintf(path, sizeof(path), "%s/examples/graphs/%s", src ? src : ".", name);
    char *s = test_slurp(path, NULL);
    if (!s)
        fprintf(stderr, "cannot read %s\n", path);
    return s;
}

static char *render_plain(graph_request *rq, graph_plan *p);

/* Parses and partitions body; 0 or the error. With HIDETD_PLAN_DUMP set, every plan made (its
 * rendering, kernel requests included) is appended to that file: a partitioner change that
 * must leave plans as they were is checked by comparing the files before and after. */
static int plan_of(const char *body, graph_request *rq, graph_plan *p, proto_error *e)
{
    int r = graph_request_parse(body, strlen(body), rq, e);
    if (r < 0)
        return r;
    r = graph_partition(&rq->g, &rq->opt.target, p, e);
    if (r < 0) {
        graph_request_free(rq);
        return r;
    }
    const char *dump = getenv("HIDETD_PLAN_DUMP");
    FILE *f = dump ? fopen(dump, "a") : NULL;
    if (f) {
        char *json = render_plain(rq, p);
        fprintf(f, "%s\n", json ? json : "(no rendering)");
        for (int k = 0; k < p->n_kernels; k++)
            fprintf(f, "  %s\n", p->kernels[k].request);
        free(json);
        fclose(f);
    }
    return r;
}

static int forward_steps(const graph_plan *p)
{
    return p->n_kernels - p->n_prepare;
}

static const graph_kernel *step(const graph_plan *p, int s)
{
    return &p->kernels[p->order[p->n_prepare + s]];
}

static void test_mlp(void)
{
    char *body = example("mlp_block.json");
    graph_request rq;
    graph_plan p;
    proto_error e;
    CHECK(body && plan_of(body, &rq, &p, &e) == 0, "%s %s", e.field, e.message);
    free(body);
    if (failures)
        return;
    CHECK(forward_steps(&p) == 3 && p.n_prepare == 0, "%d steps", forward_steps(&p));
    const graph_kernel *k0 = step(&p, 0), *k1 = step(&p, 1), *k2 = step(&p, 2);
    CHECK(k0->op->kind == TUNER_OP_MATMUL && k0->op->epilogue.n == 2 &&
          k0->op->epilogue.steps[0].kind == TUNER_EW_ADD &&
          k0->op->epilogue.steps[1].kind == TUNER_EW_GELU_ERF);
    CHECK(k1->op->kind == TUNER_OP_MATMUL && k1->op->epilogue.n == 2 && k1->op->n_inputs == 4,
          "fc2 + bias + residual: %d steps, %d inputs", k1->op->epilogue.n, k1->op->n_inputs);
    CHECK(k2->op->kind == TUNER_OP_LAYERNORM && k2->n_in == 3);
    CHECK(strstr(k0->request, "\"op\":\"gelu\"") != NULL, "%s", k0->request);
    /* Both intermediates (h3: 2048x3072 f16, h6: 2048x768 f16) are alive at step 1. */
    uint64_t none[8] = {0};
    CHECK(graph_plan_place(&p, none) == 0);
    CHECK(p.arena_bytes == 2048ull * 3072 * 2 + 2048ull * 768 * 2, "%llu",
          (unsigned long long)p.arena_bytes);
    cJSON *ws0 = cJSON_Parse("{\"workspace_bytes\":0}");
    const cJSON *sets[3] = {ws0, ws0, NULL};
    char *json = NULL;
    CHECK(graph_plan_render(&rq, &p, sets, "k", &json) == 0);
    cJSON_Delete(ws0);
    cJSON *o = json ? cJSON_Parse(json) : NULL;
    cJSON *steps = cJSON_GetObjectItem(o, "steps");
    CHECK(cJSON_GetArraySize(steps) == 3);
    cJSON *b0 = cJSON_GetObjectItem(cJSON_GetArrayItem(steps, 0), "bindings");
    CHECK(b0 && strcmp(cJSON_GetObjectItem(b0, "input0")->valuestring, "x") == 0 &&
          strcmp(cJSON_GetObjectItem(b0, "input1")->valuestring, "w1") == 0 &&
          strcmp(cJSON_GetObjectItem(b0, "output")->valuestring, "h3") == 0, "%s", json);
    cJSON *b2 = cJSON_GetObjectItem(cJSON_GetArrayItem(steps, 2), "bindings");
    CHECK(b2 && strcmp(cJSON_GetObjectItem(b2, "output")->valuestring, "y") == 0);
    cJSON_Delete(o);
    free(json);
    graph_plan_free(&p);
    graph_request_free(&rq);
}

static void test_bottleneck(void)
{
    char *body = example("resnet_bottleneck.json");
    graph_request rq;
    graph_plan p;
    proto_error e;
    CHECK(body && plan_of(body, &rq, &p, &e) == 0, "%s %s", e.field, e.message);
    free(body);
    if (failures)
        return;
    CHECK(forward_steps(&p) == 3, "%d forward steps", forward_steps(&p));
    CHECK(p.n_prepare == 6, "%d prepare kernels (scale and shift of three batchnorms)", p.n_prepare);
    for (int s = 0; s < forward_steps(&p); s++)
        CHECK(step(&p, s)->op->kind == TUNER_OP_CONV2D);
    /* conv3: bn (mul, add), the residual add, relu. */
    const graph_kernel *k2 = step(&p, 2);
    CHECK(k2->op->epilogue.n == 4 && k2->op->epilogue.steps[3].kind == TUNER_EW_RELU,
          "%d", k2->op->epilogue.n);
    for (int s = 0; s < p.n_prepare; s++)
        CHECK(p.kernels[p.order[s]].op->kind == TUNER_OP_ELEMENTWISE &&
              p.kernels[p.order[s]].op->output.dtype == TUNER_F32);
    uint64_t none[16] = {0};
    CHECK(graph_plan_place(&p, none) == 0);
    CHECK(p.constants_bytes == 6 * 256 + 0 || p.constants_bytes >= 6 * 256, "%llu",
          (unsigned long long)p.constants_bytes);
    /* r1 and r2 ([32,56,56,64] f16 each) overlap at step 1; r1 is free again at step 2. */
    uint64_t r = 32ull * 56 * 56 * 64 * 2;
    CHECK(p.arena_bytes == 2 * r, "%llu", (unsigned long long)p.arena_bytes);
    graph_plan_free(&p);
    graph_request_free(&rq);
}

/* A bad graph is answered with the status, the code and the node's field. */
static void expect_error(const char *body, int status, const char *field, const char *message_part)
{
    graph_request rq;
    graph_plan p;
    proto_error e;
    memset(&e, 0, sizeof(e));
    int r = plan_of(body, &rq, &p, &e);
    CHECK(r == -EINVAL, "accepted: %s", body);
    if (r == 0) {
        graph_plan_free(&p);
        graph_request_free(&rq);
        return;
    }
    CHECK(e.status == status && strcmp(e.field, field) == 0 &&
          (!message_part || strstr(e.message, message_part)),
          "got %d %s %s (%s)", e.status, e.field, e.message, e.code);
}

#define X_768 "{\"name\":\"x\",\"shape\":[4,768],\"dtype\":\"f16\"}"
#define W_768 "{\"name\":\"w\",\"shape\":[768,64],\"dtype\":\"f16\"}"

static void test_errors(void)
{
    expect_error("{\"graph\":{\"inputs\":[" X_768 "],\"nodes\":["
                 "{\"op\":\"relu\",\"inputs\":[\"b\"],\"outputs\":[\"a\"]},"
                 "{\"op\":\"relu\",\"inputs\":[\"a\"],\"outputs\":[\"b\"]}],\"outputs\":[\"b\"]}}",
                 422, "nodes[0].inputs[0]", "cycle");
    expect_error("{\"graph\":{\"inputs\":[" X_768 "],\"nodes\":["
                 "{\"op\":\"relu\",\"inputs\":[\"x\"],\"outputs\":[\"a\"]},"
                 "{\"op\":\"add\",\"inputs\":[\"a\",\"nowhere\"],\"outputs\":[\"b\"]}],"
                 "\"outputs\":[\"b\"]}}",
                 422, "nodes[1].inputs[1]", "nowhere");
    expect_error("{\"graph\":{\"inputs\":[" X_768 "],\"weights\":[" W_768 "],\"nodes\":["
                 "{\"op\":\"relu\",\"inputs\":[\"x\"],\"outputs\":[\"a\"]},"
                 "{\"name\":\"mm\",\"op\":\"matmul\",\"inputs\":[\"w\",\"a\"],\"outputs\":[\"b\"]}],"
                 "\"outputs\":[\"b\"]}}",
                 422, "nodes[1].inputs[1]", "mm");
    expect_error("{\"graph\":{\"inputs\":[" X_768 "],\"nodes\":["
                 "{\"op\":\"relu\",\"inputs\":[\"x\"],\"outputs\":[\"a\"]},"
                 "{\"op\":\"frobnicate\",\"inputs\":[\"a\"],\"outputs\":[\"b\"]}],"
                 "\"outputs\":[\"b\"]}}",
                 422, "nodes[1].op", "matmul");
    expect_error("{\"graph\":{\"inputs\":[" X_768 "],\"nodes\":["
                 "{\"op\":\"relu\",\"inputs\":[\"x\"],\"outputs\":[\"a\"]},"
                 "{\"op\":\"neg\",\"inputs\":[\"x\"],\"outputs\":[\"a\"]}],\"outputs\":[\"a\"]}}",
                 422, "nodes[1].outputs[0]", "twice");
    expect_error("{\"graph\":{\"inputs\":[" X_768 "],\"nodes\":["
                 "{\"op\":\"add\",\"inputs\":[\"x\",\"y\"],\"outputs\":[\"a\"]}],"
                 "\"outputs\":[\"a\"]},\"extra\":1}",
                 400, "extra", "unknown field");
    expect_error("{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[-1,8],\"dtype\":\"f16\"}],"
                 "\"nodes\":[{\"op\":\"relu\",\"inputs\":[\"x\"],\"outputs\":[\"a\"]}],"
                 "\"outputs\":[\"a\"]}}",
                 422, "graph.inputs[0].shape[0]", "dynamic");
    expect_error("{\"graph\":{\"inputs\":[" X_768 ",{\"name\":\"y\",\"shape\":[4,5],\"dtype\":\"f16\"}],"
                 "\"nodes\":[{\"op\":\"add\",\"inputs\":[\"x\",\"y\"],\"outputs\":[\"a\"]}],"
                 "\"outputs\":[\"a\"]}}",
                 422, "nodes[0].inputs[1]", "broadcast");
    expect_error("{\"graph\":{\"inputs\":[" X_768 "],\"nodes\":["
                 "{\"op\":\"relu\",\"inputs\":[\"x\"],\"outputs\":[\"a\"]}],\"outputs\":[\"zz\"]}}",
                 422, "graph.outputs[0]", "zz");
    expect_error("{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[4,8],\"dtype\":\"f8e4m3\"}],"
                 "\"nodes\":[{\"op\":\"softmax\",\"inputs\":[\"x\"],\"outputs\":[\"a\"]}],\"outputs\":[\"a\"]}}",
                 422, "nodes[0].inputs[0]", "FP8 tensor");
    expect_error("{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[4,8],\"dtype\":\"f8e4m3\"}],"
                 "\"nodes\":[{\"op\":\"transpose\",\"inputs\":[\"x\"],\"outputs\":[\"a\"]}],\"outputs\":[\"a\"]}}",
                 422, "nodes[0]", "FP8 tensor");
    expect_error("{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[4,8],\"dtype\":\"f8e4m3\"}],"
                 "\"nodes\":[{\"op\":\"cast\",\"inputs\":[\"x\"],\"outputs\":[\"a\"],\"attrs\":{\"dtype\":\"f4\"}}],"
                 "\"outputs\":[\"a\"]}}",
                 422, "nodes[0].attrs.dtype", "f8e4m3");
    expect_error("{\"graph\":{\"inputs\":[" X_768 "],\"nodes\":["
                 "{\"op\":\"reshape\",\"inputs\":[\"x\"],\"outputs\":[\"a\"],\"attrs\":{\"shape\":[7,-1]}}],"
                 "\"outputs\":[\"a\"]}}",
                 422, "nodes[0].attrs.shape", NULL);
    expect_error("{\"graph\":{\"inputs\":[" X_768 "],\"nodes\":["
                 "{\"op\":\"concat\",\"inputs\":[\"x\",\"x\"],\"outputs\":[\"a\"],\"attrs\":{\"axis\":2}}],"
                 "\"outputs\":[\"a\"]}}",
                 422, "nodes[0].attrs.axis", "out of range");
    expect_error("{\"graph\":{\"inputs\":[" X_768 "],\"nodes\":["
                 "{\"op\":\"transpose\",\"inputs\":[\"x\"],\"outputs\":[\"a\"],\"attrs\":{\"perm\":[0,0]}}],"
                 "\"outputs\":[\"a\"]}}",
                 422, "nodes[0].attrs.perm", "permutation");
    expect_error("{\"graph\":{\"inputs\":[" X_768 "],\"nodes\":["
                 "{\"op\":\"relu\",\"inputs\":[\"x\"],\"outputs\":[\"a\"],\"attrs\":{\"alpha\":1}}],"
                 "\"outputs\":[\"a\"]}}",
                 400, "nodes[0].attrs.alpha", NULL);
    expect_error("not json", 400, "", "malformed");
    /* Slips of the keyboard get a suggestion. */
    expect_error("{\"graph\":{\"inputs\":[" X_768 "],\"nodes\":["
                 "{\"op\":\"transpos\",\"inputs\":[\"x\"],\"outputs\":[\"a\"]}],\"outputs\":[\"a\"]}}",
                 422, "nodes[0].op", "did you mean \"transpose\"");
    expect_error("{\"graph\":{\"inputs\":[" X_768 "],\"nodes\":["
                 "{\"op\":\"scale\",\"inputs\":[\"x\"],\"outputs\":[\"a\"],\"attrs\":{\"valeu\":2}}],"
                 "\"outputs\":[\"a\"]}}",
                 400, "nodes[0].attrs.valeu", "did you mean \"value\"");
    expect_error("{\"graph\":{\"inputs\":[" X_768 "],\"nodes\":["
                 "{\"op\":\"relu\",\"inputs\":[\"x\"],\"output\":[\"a\"]}],\"outputs\":[\"a\"]}}",
                 400, "nodes[0].output", "did you mean \"outputs\"");
    /* An unknown attribute of a kernel op's node is 400 as in /v1/kernels (docs/api.md). */
    expect_error("{\"graph\":{\"inputs\":[" X_768 "],\"weights\":[{\"name\":\"w\",\"shape\":[768,64],"
                 "\"dtype\":\"f16\"}],\"nodes\":[{\"op\":\"matmul\",\"inputs\":[\"x\",\"w\"],"
                 "\"outputs\":[\"a\"],\"attrs\":{\"transpose_b\":true}}],\"outputs\":[\"a\"]}}",
                 400, "nodes[0].attrs.transpose_b", "did you mean \"trans_b\"");
}

/* Job options are checked as a kernel request's: each bad one gets the status, code and field a
 * kernel request gets for it (graph/parse.c once had its own copy, whose budget errors had
 * drifted to other codes); good ones land in the request. */
/* PyTorch's activations as nodes: relu6 (a preset clamp) fuses into a depthwise conv's epilogue
 * as MobileNetV2's blocks need, a chain of hardswish, leaky_relu, pow and erf fuses into a
 * matmul, hardtanh's bounds and clamp's one-sided form reach the kernel, and bad parameters are
 * refused with the node's field. */
static void test_activations(void)
{
    const char *body =
        "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[1,16,16,32],\"dtype\":\"f16\"},"
        "{\"name\":\"a\",\"shape\":[64,128],\"dtype\":\"f16\"}],"
        "\"weights\":[{\"name\":\"w\",\"shape\":[32,3,3,1],\"dtype\":\"f16\"},"
        "{\"name\":\"b\",\"shape\":[128,256],\"dtype\":\"f16\"}],\"nodes\":["
        "{\"op\":\"conv2d\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"c\"],"
        "\"attrs\":{\"padding\":1,\"groups\":32}},"
        "{\"op\":\"relu6\",\"inputs\":[\"c\"],\"outputs\":[\"y\"]},"
        "{\"op\":\"matmul\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"m\"]},"
        "{\"op\":\"hardswish\",\"inputs\":[\"m\"],\"outputs\":[\"m1\"]},"
        "{\"op\":\"leaky_relu\",\"inputs\":[\"m1\"],\"outputs\":[\"m2\"],\"attrs\":{\"negative_slope\":0.2}},"
        "{\"op\":\"pow\",\"inputs\":[\"m2\"],\"outputs\":[\"m3\"],\"attrs\":{\"exponent\":3}},"
        "{\"op\":\"erf\",\"inputs\":[\"m3\"],\"outputs\":[\"m4\"]},"
        "{\"op\":\"hardtanh\",\"inputs\":[\"m4\"],\"outputs\":[\"m5\"],\"attrs\":{\"min\":-0.5}},"
        "{\"op\":\"clamp\",\"inputs\":[\"m5\"],\"outputs\":[\"m6\"],\"attrs\":{\"max\":0.25}},"
        "{\"op\":\"hardsigmoid\",\"inputs\":[\"m6\"],\"outputs\":[\"z\"]}],"
        "\"outputs\":[\"y\",\"z\"]}}";
    graph_request rq;
    graph_plan p;
    proto_error e;
    CHECK(plan_of(body, &rq, &p, &e) == 0, "%s %s", e.field, e.message);
    if (failures)
        return;
    CHECK(p.n_kernels == 2, "%d kernels", p.n_kernels);
    for (int k = 0; k < p.n_kernels; k++) {
        const tuner_op *op = p.kernels[k].op;
        if (op->kind == TUNER_OP_CONV2D) {
            CHECK(op->epilogue.n == 1 && op->epilogue.steps[0].kind == TUNER_EW_CLAMP &&
                  op->epilogue.steps[0].scalar == 0 && op->epilogue.steps[0].scalar2 == 6, "relu6 fused");
            CHECK(strstr(p.kernels[k].request, "{\"op\":\"clamp\",\"min\":0,\"max\":6}") != NULL, "%s",
                  p.kernels[k].request);
        } else {
            static const tuner_ew_kind want[] = {TUNER_EW_HARDSWISH, TUNER_EW_LEAKY_RELU, TUNER_EW_POW,
                                                 TUNER_EW_ERF, TUNER_EW_CLAMP, TUNER_EW_CLAMP,
                                                 TUNER_EW_HARDSIGMOID};
            CHECK(op->kind == TUNER_OP_MATMUL && op->epilogue.n == 7, "%d steps", op->epilogue.n);
            for (int i = 0; i < 7 && i < op->epilogue.n; i++)
                CHECK(op->epilogue.steps[i].kind == want[i], "step %d", i);
            CHECK(op->epilogue.steps[1].scalar == 0.2 && op->epilogue.steps[2].scalar == 3);
            CHECK(op->epilogue.steps[4].scalar == -0.5 && op->epilogue.steps[4].scalar2 == 1, "hardtanh(min=-0.5)");
            CHECK(isinf(op->epilogue.steps[5].scalar) && op->epilogue.steps[5].scalar2 == 0.25, "clamp(max=0.25)");
        }
    }
    graph_plan_free(&p);
    graph_request_free(&rq);

    /* One node, its attrs as given: the error names the attribute. */
    static const struct {
        const char *node;
        int status;
        const char *field, *part;
    } bad[] = {
        {"{\"op\":\"clamp\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}", 400, "nodes[0].attrs.min", "min, max or both"},
        {"{\"op\":\"pow\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}", 400, "nodes[0].attrs.exponent", "needs"},
        {"{\"op\":\"pow\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"exponent\":\"2\"}}", 400,
         "nodes[0].attrs.exponent", "finite number"},
        {"{\"op\":\"relu6\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"max\":5}}", 400, "nodes[0].attrs.max",
         ""},
        {"{\"op\":\"leaky_relu\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"value\":0.1}}", 400,
         "nodes[0].attrs.value", ""},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char g[1024];
        snprintf(g, sizeof(g),
                 "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[4,8],\"dtype\":\"f32\"}],\"nodes\":[%s],"
                 "\"outputs\":[\"y\"]}}",
                 bad[i].node);
        expect_error(g, bad[i].status, bad[i].field, bad[i].part);
    }
}

/* A ResNet-style network in NHWC, as the torch.compile backend will send it: conv 7x7 s2 ->
 * batchnorm -> relu -> maxpool 3x3 s2 p1 -> conv 3x3 -> relu -> global average pool -> flatten
 * -> matmul + bias. Shapes are inferred through the pools; the batchnorms and relus fuse into
 * the convolutions' epilogues, the pools are kernels of their own, the flatten is a view and
 * the bias fuses into the matmul. */
static void test_resnet_stem(void)
{
    const char *body =
        "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[2,224,224,3],\"dtype\":\"f16\"}],"
        "\"weights\":[{\"name\":\"w1\",\"shape\":[64,7,7,3],\"dtype\":\"f16\"},"
        "{\"name\":\"g\",\"shape\":[64],\"dtype\":\"f16\"},{\"name\":\"b\",\"shape\":[64],\"dtype\":\"f16\"},"
        "{\"name\":\"m\",\"shape\":[64],\"dtype\":\"f16\"},{\"name\":\"v\",\"shape\":[64],\"dtype\":\"f16\"},"
        "{\"name\":\"w2\",\"shape\":[128,3,3,64],\"dtype\":\"f16\"},"
        "{\"name\":\"fw\",\"shape\":[128,1000],\"dtype\":\"f16\"},{\"name\":\"fb\",\"shape\":[1000],\"dtype\":\"f16\"}],"
        "\"nodes\":["
        "{\"op\":\"conv2d\",\"inputs\":[\"x\",\"w1\"],\"outputs\":[\"c1\"],\"attrs\":{\"stride\":2,\"padding\":3}},"
        "{\"op\":\"batchnorm\",\"inputs\":[\"c1\",\"g\",\"b\",\"m\",\"v\"],\"outputs\":[\"n1\"],\"attrs\":{\"axis\":3}},"
        "{\"op\":\"relu\",\"inputs\":[\"n1\"],\"outputs\":[\"r1\"]},"
        "{\"op\":\"pool2d\",\"inputs\":[\"r1\"],\"outputs\":[\"p1\"],"
        "\"attrs\":{\"kind\":\"max\",\"kernel_size\":3,\"stride\":2,\"padding\":1}},"
        "{\"op\":\"conv2d\",\"inputs\":[\"p1\",\"w2\"],\"outputs\":[\"c2\"],\"attrs\":{\"padding\":1}},"
        "{\"op\":\"relu\",\"inputs\":[\"c2\"],\"outputs\":[\"r2\"]},"
        "{\"op\":\"pool2d\",\"inputs\":[\"r2\"],\"outputs\":[\"gp\"],\"attrs\":{\"kind\":\"adaptive_avg\",\"output_size\":1}},"
        "{\"op\":\"reshape\",\"inputs\":[\"gp\"],\"outputs\":[\"f\"],\"attrs\":{\"shape\":[2,-1]}},"
        "{\"op\":\"matmul\",\"inputs\":[\"f\",\"fw\"],\"outputs\":[\"mm\"]},"
        "{\"op\":\"add\",\"inputs\":[\"mm\",\"fb\"],\"outputs\":[\"y\"]}],"
        "\"outputs\":[\"y\"]}}";
    graph_request rq;
    graph_plan p;
    proto_error e;
    CHECK(plan_of(body, &rq, &p, &e) == 0, "%s %s", e.field, e.message);
    if (failures)
        return;
    /* Forward: conv1 (+bn, relu), maxpool, conv2 (+relu), global pool, matmul (+bias). */
    CHECK(forward_steps(&p) == 5, "%d forward steps", forward_steps(&p));
    static const tuner_op_kind want[] = {TUNER_OP_CONV2D, TUNER_OP_POOL2D, TUNER_OP_CONV2D, TUNER_OP_POOL2D,
                                         TUNER_OP_MATMUL};
    for (int s = 0; s < forward_steps(&p) && s < 5; s++)
        CHECK(step(&p, s)->op->kind == want[s], "step %d is %s", s, tuner_op_name(step(&p, s)->op->kind));
    if (forward_steps(&p) == 5) {
        const tuner_op *c1 = step(&p, 0)->op, *mp = step(&p, 1)->op, *c2 = step(&p, 2)->op, *gp = step(&p, 3)->op,
                       *mm = step(&p, 4)->op;
        CHECK(c1->output.shape[1] == 112 && c1->epilogue.n == 3 && c1->epilogue.steps[2].kind == TUNER_EW_RELU,
              "conv1: %lld rows, %d steps", (long long)c1->output.shape[1], c1->epilogue.n);
        CHECK(mp->attrs.pool2d.kind == TUNER_POOL_MAX && mp->output.shape[1] == 56 && mp->output.shape[2] == 56 &&
                  mp->output.shape[3] == 64,
              "maxpool [%lld,%lld,%lld,%lld]", (long long)mp->output.shape[0], (long long)mp->output.shape[1],
              (long long)mp->output.shape[2], (long long)mp->output.shape[3]);
        CHECK(c2->epilogue.n == 1 && c2->epilogue.steps[0].kind == TUNER_EW_RELU);
        CHECK(gp->attrs.pool2d.kind == TUNER_POOL_ADAPTIVE_AVG && gp->output.shape[1] == 1 && gp->output.shape[2] == 1);
        CHECK(mm->epilogue.n == 1 && mm->epilogue.steps[0].kind == TUNER_EW_ADD && mm->inputs[0].rank == 2 &&
              mm->inputs[0].shape[1] == 128);
        CHECK(strstr(step(&p, 1)->request, "\"kind\":\"max\"") && strstr(step(&p, 3)->request, "\"output_size\":[1,1]"),
              "%s", step(&p, 3)->request);
    }
    uint64_t none[16] = {0};
    CHECK(graph_plan_place(&p, none) == 0);
    graph_plan_free(&p);
    graph_request_free(&rq);

    /* With no anchor before it, the relu fuses into the pool as input 0's prologue, and what
     * follows (a bias, relu6) into its epilogue: one kernel. */
    const char *solo =
        "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[2,16,33,33],\"dtype\":\"bf16\"}],"
        "\"weights\":[{\"name\":\"b\",\"shape\":[17],\"dtype\":\"bf16\"}],\"nodes\":["
        "{\"op\":\"relu\",\"inputs\":[\"x\"],\"outputs\":[\"r\"]},"
        "{\"op\":\"pool2d\",\"inputs\":[\"r\"],\"outputs\":[\"p\"],\"attrs\":{\"kind\":\"avg\",\"kernel_size\":3,"
        "\"stride\":2,\"padding\":1,\"ceil_mode\":true,\"count_include_pad\":false,\"layout\":\"nchw\"}},"
        "{\"op\":\"add\",\"inputs\":[\"p\",\"b\"],\"outputs\":[\"q\"]},"
        "{\"op\":\"relu6\",\"inputs\":[\"q\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}}";
    CHECK(plan_of(solo, &rq, &p, &e) == 0, "%s %s", e.field, e.message);
    if (failures)
        return;
    CHECK(p.n_kernels == 1, "%d kernels", p.n_kernels);
    const tuner_op *po = p.kernels[0].op;
    CHECK(po->kind == TUNER_OP_POOL2D && po->prologue[0].n == 1 && po->prologue[0].steps[0].kind == TUNER_EW_RELU &&
              po->epilogue.n == 2 && po->epilogue.steps[1].kind == TUNER_EW_CLAMP && po->output.shape[2] == 17 &&
              po->attrs.pool2d.nchw && po->attrs.pool2d.ceil_mode && !po->attrs.pool2d.count_include_pad,
          "pool: %d prologue, %d epilogue steps, %lld rows", po->prologue[0].n, po->epilogue.n,
          (long long)po->output.shape[2]);
    graph_plan_free(&p);
    graph_request_free(&rq);

    /* An unknown op's message lists the known ones that fit, pool2d among them, whole names. */
    expect_error("{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[4],\"dtype\":\"f16\"}],\"nodes\":["
                 "{\"op\":\"qqqqqqqqqqqqqqqq\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}}",
                 422, "nodes[0].op", "pool2d, add, sub");
    expect_error("{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[4],\"dtype\":\"f16\"}],\"nodes\":["
                 "{\"op\":\"qqqqqqqqqqqqqqqq\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}}",
                 422, "nodes[0].op", "where, masked_fill"); /* proto_error.message, 512 bytes, holds them all */

    /* A pool node's refusal is the kernel validator's, at the node's field. */
    expect_error("{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[1,8,8,4],\"dtype\":\"f16\"}],\"nodes\":["
                 "{\"op\":\"pool2d\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
                 "\"attrs\":{\"kind\":\"max\",\"kernel_size\":3,\"padding\":2}}],\"outputs\":[\"y\"]}}",
                 422, "nodes[0].attrs.padding[0]", "half the kernel");
    expect_error("{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[1,2,8,4],\"dtype\":\"f16\"}],\"nodes\":["
                 "{\"op\":\"pool2d\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
                 "\"attrs\":{\"kind\":\"avg\",\"kernel_size\":3,\"stride\":1}}],\"outputs\":[\"y\"]}}",
                 422, "nodes[0].attrs.kernel_size[0]", "larger than the padded input");
}

/* The kernel of plan p that computes graph node `name`, or NULL. */
static const graph_kernel *kernel_of(const graph_plan *p, const char *name)
{
    for (int k = 0; k < p->n_kernels; k++)
        for (int j = 0; j < p->kernels[k].n_nodes; j++)
            if (strcmp(p->node_names[p->kernels[k].nodes[j]], name) == 0)
                return &p->kernels[k];
    return NULL;
}

/* Masks as graph nodes: an attention block's matmul -> scale -> masked_fill(mask, -inf) ->
 * softmax -> matmul is three kernels, the scale and the masked_fill in the first matmul's
 * epilogue (its request spells -inf as "-inf"); a masked_fill before a softmax of an input is
 * the softmax's prologue; comparisons fuse as steps, swapped when the running value is on the
 * right; where fuses when the running value is its `a` and is a kernel of its own (reading a
 * as its value) when it is b or the condition; broadcasting works both ways; and bad nodes are
 * refused at their field. */
static void test_masks(void)
{
    const char *attn =
        "{\"graph\":{\"inputs\":[{\"name\":\"q\",\"shape\":[8,64,32],\"dtype\":\"f16\"},"
        "{\"name\":\"k\",\"shape\":[8,64,32],\"dtype\":\"f16\"},{\"name\":\"v\",\"shape\":[8,64,32],\"dtype\":\"f16\"},"
        "{\"name\":\"causal\",\"shape\":[64,64],\"dtype\":\"f16\"}],\"nodes\":["
        "{\"name\":\"kt\",\"op\":\"transpose\",\"inputs\":[\"k\"],\"outputs\":[\"kt\"],\"attrs\":{\"perm\":[0,2,1]}},"
        "{\"name\":\"qk\",\"op\":\"matmul\",\"inputs\":[\"q\",\"kt\"],\"outputs\":[\"s\"]},"
        "{\"name\":\"scale\",\"op\":\"scale\",\"inputs\":[\"s\"],\"outputs\":[\"s1\"],\"attrs\":{\"value\":0.17677669529663687}},"
        "{\"name\":\"mask\",\"op\":\"masked_fill\",\"inputs\":[\"s1\",\"causal\"],\"outputs\":[\"s2\"],\"attrs\":{\"value\":\"-inf\"}},"
        "{\"name\":\"softmax\",\"op\":\"softmax\",\"inputs\":[\"s2\"],\"outputs\":[\"pr\"]},"
        "{\"name\":\"pv\",\"op\":\"matmul\",\"inputs\":[\"pr\",\"v\"],\"outputs\":[\"o\"]}],"
        "\"outputs\":[\"o\"]}}";
    graph_request rq;
    graph_plan p;
    proto_error e;
    CHECK(plan_of(attn, &rq, &p, &e) == 0, "%s %s", e.field, e.message);
    if (failures)
        return;
    CHECK(p.n_kernels == 3, "%d kernels", p.n_kernels);
    const graph_kernel *qk = kernel_of(&p, "qk"), *sm = kernel_of(&p, "softmax"), *pv = kernel_of(&p, "pv");
    CHECK(qk && kernel_of(&p, "mask") == qk && kernel_of(&p, "scale") == qk && sm && pv && sm != qk && pv != sm);
    if (qk && sm && pv) {
        const tuner_op *op = qk->op;
        CHECK(op->kind == TUNER_OP_MATMUL && op->attrs.matmul.trans_b && op->epilogue.n == 2 && op->n_inputs == 3,
              "%s", qk->request);
        CHECK(op->epilogue.steps[0].kind == TUNER_EW_SCALE && op->epilogue.steps[1].kind == TUNER_EW_MASKED_FILL &&
              op->epilogue.steps[1].operand == 2 && isinf(op->epilogue.steps[1].scalar) && op->epilogue.steps[1].scalar < 0);
        CHECK(strstr(qk->request, "{\"op\":\"masked_fill\",\"input\":2,\"value\":\"-inf\"}") != NULL, "%s", qk->request);
        CHECK(strcmp(p.tensors[qk->in[2]].name, "causal") == 0);
        CHECK(sm->op->kind == TUNER_OP_SOFTMAX && sm->op->prologue[0].n == 0 && sm->op->epilogue.n == 0);
        CHECK(pv->op->kind == TUNER_OP_MATMUL && pv->op->epilogue.n == 0);
    }
    graph_plan_free(&p);
    graph_request_free(&rq);

    /* Scores that are an input: the masked_fill (and a where) become the softmax's prologue. */
    const char *pro =
        "{\"graph\":{\"inputs\":[{\"name\":\"s\",\"shape\":[4,16,16],\"dtype\":\"f32\"},"
        "{\"name\":\"m\",\"shape\":[16,16],\"dtype\":\"f32\"},{\"name\":\"c\",\"shape\":[4,1,16],\"dtype\":\"bf16\"},"
        "{\"name\":\"alt\",\"shape\":[16],\"dtype\":\"f32\"}],\"nodes\":["
        "{\"name\":\"w\",\"op\":\"where\",\"inputs\":[\"c\",\"s\",\"alt\"],\"outputs\":[\"s0\"]},"
        "{\"name\":\"mf\",\"op\":\"masked_fill\",\"inputs\":[\"s0\",\"m\"],\"outputs\":[\"s1\"],\"attrs\":{\"value\":-3.4028234663852886e+38}},"
        "{\"name\":\"sm\",\"op\":\"softmax\",\"inputs\":[\"s1\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}}";
    CHECK(plan_of(pro, &rq, &p, &e) == 0, "%s %s", e.field, e.message);
    if (failures)
        return;
    CHECK(p.n_kernels == 1 && p.kernels[0].op->kind == TUNER_OP_SOFTMAX, "%d kernels", p.n_kernels);
    if (p.n_kernels == 1) {
        const tuner_ew_chain *ch = &p.kernels[0].op->prologue[0];
        CHECK(ch->n == 2 && ch->steps[0].kind == TUNER_EW_WHERE && ch->steps[1].kind == TUNER_EW_MASKED_FILL,
              "%s", p.kernels[0].request);
        CHECK(ch->steps[1].scalar == -3.4028234663852886e38 && p.kernels[0].op->n_inputs == 4);
        CHECK(strstr(p.kernels[0].request, "\"op\":\"where\",\"operand\":") != NULL &&
                  strstr(p.kernels[0].request, "\"other\":") != NULL,
              "%s", p.kernels[0].request);
        /* where reads c and alt, masked_fill m: bound to the graph's tensors. */
        const graph_kernel *gk = &p.kernels[0];
        CHECK(strcmp(p.tensors[gk->in[ch->steps[0].operand]].name, "c") == 0 &&
              strcmp(p.tensors[gk->in[ch->steps[0].operand2]].name, "alt") == 0 &&
              strcmp(p.tensors[gk->in[ch->steps[1].operand]].name, "m") == 0);
    }
    graph_plan_free(&p);
    graph_request_free(&rq);

    /* Comparisons and where around elementwise chains. */
    const char *cmp =
        "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[4,8],\"dtype\":\"f16\"},"
        "{\"name\":\"a\",\"shape\":[8],\"dtype\":\"f16\"},{\"name\":\"c\",\"shape\":[4,1],\"dtype\":\"f32\"},"
        "{\"name\":\"z\",\"shape\":[4,8],\"dtype\":\"f16\"},{\"name\":\"x2\",\"shape\":[4,8],\"dtype\":\"f16\"}],\"nodes\":["
        /* relu(x) then a < r: r is on the right, so the step is gt(a); then where(c, ., z) and log. */
        "{\"name\":\"r\",\"op\":\"relu\",\"inputs\":[\"x\"],\"outputs\":[\"r\"]},"
        "{\"name\":\"lt\",\"op\":\"lt\",\"inputs\":[\"a\",\"r\"],\"outputs\":[\"m\"]},"
        "{\"name\":\"w1\",\"op\":\"where\",\"inputs\":[\"c\",\"m\",\"z\"],\"outputs\":[\"y1\"]},"
        "{\"name\":\"ge\",\"op\":\"ge\",\"inputs\":[\"y1\"],\"outputs\":[\"y2\"],\"attrs\":{\"value\":0.5}},"
        "{\"name\":\"log\",\"op\":\"log\",\"inputs\":[\"y2\"],\"outputs\":[\"y3\"]},"
        /* where(c, z, exp(x2)): the running value is b: where is a kernel of its own, reading z. */
        "{\"name\":\"e\",\"op\":\"exp\",\"inputs\":[\"x2\"],\"outputs\":[\"e\"]},"
        "{\"name\":\"w2\",\"op\":\"where\",\"inputs\":[\"c\",\"z\",\"e\"],\"outputs\":[\"y4\"]},"
        /* where(e2 > 0 as the condition): the condition is the running value: separate too. */
        "{\"name\":\"gt\",\"op\":\"gt\",\"inputs\":[\"x2\"],\"outputs\":[\"g\"],\"attrs\":{\"value\":0}},"
        "{\"name\":\"w3\",\"op\":\"where\",\"inputs\":[\"g\",\"x\",\"z\"],\"outputs\":[\"y5\"]}],"
        "\"outputs\":[\"y3\",\"y4\",\"y5\"]}}";
    CHECK(plan_of(cmp, &rq, &p, &e) == 0, "%s %s", e.field, e.message);
    if (failures)
        return;
    CHECK(p.n_kernels == 5, "%d kernels", p.n_kernels);
    const graph_kernel *k1 = kernel_of(&p, "r"), *ke = kernel_of(&p, "e"), *kw2 = kernel_of(&p, "w2"),
                       *kg = kernel_of(&p, "gt"), *kw3 = kernel_of(&p, "w3");
    CHECK(k1 && kernel_of(&p, "lt") == k1 && kernel_of(&p, "w1") == k1 && kernel_of(&p, "ge") == k1 &&
          kernel_of(&p, "log") == k1);
    if (k1) {
        const tuner_ew_chain *ch = &k1->op->epilogue;
        CHECK(ch->n == 5 && ch->steps[0].kind == TUNER_EW_RELU && ch->steps[1].kind == TUNER_EW_GT &&
                  ch->steps[2].kind == TUNER_EW_WHERE && ch->steps[3].kind == TUNER_EW_GE &&
                  ch->steps[3].operand == -1 && ch->steps[3].scalar == 0.5 && ch->steps[4].kind == TUNER_EW_LOG,
              "%s", k1->request);
        CHECK(strcmp(p.tensors[k1->in[ch->steps[1].operand]].name, "a") == 0 &&
              strcmp(p.tensors[k1->in[ch->steps[2].operand]].name, "c") == 0 &&
              strcmp(p.tensors[k1->in[ch->steps[2].operand2]].name, "z") == 0);
        CHECK(strstr(k1->request, "{\"op\":\"ge\",\"value\":0.5}") && strstr(k1->request, "{\"op\":\"log\"}"), "%s",
              k1->request);
    }
    CHECK(ke && kw2 && ke != kw2 && ke->op->epilogue.n == 1, "exp alone");
    if (kw2) {
        const tuner_ew_step *w = &kw2->op->epilogue.steps[0];
        CHECK(kw2->op->kind == TUNER_OP_ELEMENTWISE && kw2->op->epilogue.n == 1 && w->kind == TUNER_EW_WHERE &&
                  strcmp(p.tensors[kw2->in[0]].name, "z") == 0 && strcmp(p.tensors[kw2->in[w->operand]].name, "c") == 0 &&
                  strcmp(p.tensors[kw2->in[w->operand2]].name, "e") == 0,
              "%s", kw2->request);
    }
    CHECK(kg && kw3 && kg != kw3 && kg->op->epilogue.n == 1 && kw3->op->epilogue.n == 1 &&
          strcmp(p.tensors[kw3->in[0]].name, "x") == 0);
    graph_plan_free(&p);
    graph_request_free(&rq);

    /* Broadcasting both ways: where([4,1], [1,8], [4,8]) and eq([3,1], [1,5]) as kernels of their own. */
    const char *bc =
        "{\"graph\":{\"inputs\":[{\"name\":\"c\",\"shape\":[4,1],\"dtype\":\"f16\"},"
        "{\"name\":\"a\",\"shape\":[1,8],\"dtype\":\"f32\"},{\"name\":\"b\",\"shape\":[4,8],\"dtype\":\"f32\"},"
        "{\"name\":\"u\",\"shape\":[3,1],\"dtype\":\"bf16\"},{\"name\":\"t\",\"shape\":[1,5],\"dtype\":\"bf16\"}],\"nodes\":["
        "{\"name\":\"w\",\"op\":\"where\",\"inputs\":[\"c\",\"a\",\"b\"],\"outputs\":[\"y\"]},"
        "{\"name\":\"eq\",\"op\":\"eq\",\"inputs\":[\"u\",\"t\"],\"outputs\":[\"q\"]},"
        "{\"name\":\"mf\",\"op\":\"masked_fill\",\"inputs\":[\"a\",\"c\"],\"outputs\":[\"f\"],\"attrs\":{\"value\":\"inf\"}}],"
        "\"outputs\":[\"y\",\"q\",\"f\"]}}";
    CHECK(plan_of(bc, &rq, &p, &e) == 0, "%s %s", e.field, e.message);
    if (failures)
        return;
    CHECK(p.n_kernels == 3, "%d kernels", p.n_kernels);
    for (int k = 0; k < p.n_kernels; k++) {
        const tuner_tensor *o = &p.kernels[k].op->output;
        const char *name = p.node_names[p.kernels[k].nodes[0]];
        const int64_t want0 = !strcmp(name, "eq") ? 3 : 4, want1 = !strcmp(name, "eq") ? 5 : 8;
        CHECK(o->rank == 2 && o->shape[0] == want0 && o->shape[1] == want1 &&
                  o->dtype == (!strcmp(name, "eq") ? TUNER_BF16 : TUNER_F32),
              "%s: %s", name, p.kernels[k].request);
    }
    const graph_kernel *kf = kernel_of(&p, "mf");
    CHECK(kf && strstr(kf->request, "\"value\":\"inf\"") != NULL, "%s", kf ? kf->request : "");
    graph_plan_free(&p);
    graph_request_free(&rq);

    /* The input limit holds: a matmul (2 inputs) takes three wheres (2 operands each: 8
     * inputs); the fourth would need a 9th and 10th and becomes an elementwise kernel. */
    char lim[4096];
    int at = snprintf(lim, sizeof(lim),
                      "{\"graph\":{\"inputs\":[{\"name\":\"a\",\"shape\":[16,32],\"dtype\":\"f16\"},"
                      "{\"name\":\"b\",\"shape\":[32,64],\"dtype\":\"f16\"}");
    for (int i = 0; i < 4; i++)
        at += snprintf(lim + at, sizeof(lim) - (size_t)at,
                       ",{\"name\":\"c%d\",\"shape\":[16,1],\"dtype\":\"f16\"},"
                       "{\"name\":\"o%d\",\"shape\":[64],\"dtype\":\"f16\"}",
                       i, i);
    at += snprintf(lim + at, sizeof(lim) - (size_t)at,
                   "],\"nodes\":[{\"name\":\"mm\",\"op\":\"matmul\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"w0\"]}");
    for (int i = 0; i < 4; i++)
        at += snprintf(lim + at, sizeof(lim) - (size_t)at,
                       ",{\"name\":\"where%d\",\"op\":\"where\",\"inputs\":[\"c%d\",\"w%d\",\"o%d\"],\"outputs\":[\"w%d\"]}",
                       i, i, i, i, i + 1);
    snprintf(lim + at, sizeof(lim) - (size_t)at, "],\"outputs\":[\"w4\"]}}");
    CHECK(plan_of(lim, &rq, &p, &e) == 0, "%s %s", e.field, e.message);
    if (failures)
        return;
    const graph_kernel *kmm = kernel_of(&p, "mm"), *kw = kernel_of(&p, "where3");
    CHECK(p.n_kernels == 2 && kmm && kw && kmm != kw && kernel_of(&p, "where2") == kmm, "%d kernels", p.n_kernels);
    if (kmm && kw) {
        CHECK(kmm->op->n_inputs == TUNER_MAX_INPUTS && kmm->op->epilogue.n == 3, "%s", kmm->request);
        CHECK(kw->op->kind == TUNER_OP_ELEMENTWISE && kw->op->n_inputs == 3 && kw->op->epilogue.n == 1, "%s",
              kw->request);
    }
    graph_plan_free(&p);
    graph_request_free(&rq);

    /* The graph's canonical text (its partition cache key) tells -inf from inf. */
#define GI "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[4,8],\"dtype\":\"f16\"}," \
           "{\"name\":\"m\",\"shape\":[8],\"dtype\":\"f16\"}],\"nodes\":[{\"op\":\"masked_fill\"," \
           "\"inputs\":[\"x\",\"m\"],\"outputs\":[\"y\"],\"attrs\":{\"value\":\"%s\"}}],\"outputs\":[\"y\"]}}"
    char b1[512], b2[512];
    snprintf(b1, sizeof(b1), GI, "-inf");
    snprintf(b2, sizeof(b2), GI, "inf");
#undef GI
    graph_request r1, r2;
    CHECK(graph_request_parse(b1, strlen(b1), &r1, &e) == 0 && graph_request_parse(b2, strlen(b2), &r2, &e) == 0, "%s",
          e.message);
    if (failures)
        return;
    char *c1 = graph_canonical(&r1.g), *c2 = graph_canonical(&r2.g);
    CHECK(c1 && c2 && strcmp(c1, c2) != 0, "%s", c1 ? c1 : "");
    free(c1);
    free(c2);
    graph_request_free(&r1);
    graph_request_free(&r2);

    /* One node, its inputs and attrs as given: the error names the field. */
    static const struct {
        const char *node;
        int status;
        const char *field, *part;
    } bad[] = {
        {"{\"op\":\"masked_fill\",\"inputs\":[\"x\",\"m\"],\"outputs\":[\"y\"]}", 400, "nodes[0].attrs.value", "needs"},
        {"{\"op\":\"masked_fill\",\"inputs\":[\"x\",\"m\"],\"outputs\":[\"y\"],\"attrs\":{\"value\":\"-Infinity\"}}", 400,
         "nodes[0].attrs.value", "\"-inf\""},
        {"{\"op\":\"masked_fill\",\"inputs\":[\"x\",\"m\"],\"outputs\":[\"y\"],\"attrs\":{\"fill\":0}}", 400,
         "nodes[0].attrs.fill", "unknown attribute"},
        {"{\"op\":\"masked_fill\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"value\":0}}", 422, "nodes[0].inputs",
         "takes 2 inputs"},
        {"{\"op\":\"masked_fill\",\"inputs\":[\"x\",\"b\"],\"outputs\":[\"y\"],\"attrs\":{\"value\":0}}", 422,
         "nodes[0].inputs[1]", "do not broadcast"},
        {"{\"op\":\"where\",\"inputs\":[\"m\",\"x\"],\"outputs\":[\"y\"]}", 422, "nodes[0].inputs", "takes 3 inputs"},
        {"{\"op\":\"where\",\"inputs\":[\"m\",\"x\",\"h\"],\"outputs\":[\"y\"]}", 422, "nodes[0].inputs[2]", "dtype"},
        {"{\"op\":\"where\",\"inputs\":[\"b\",\"x\",\"x\"],\"outputs\":[\"y\"]}", 422, "nodes[0].inputs[0]",
         "do not broadcast"},
        {"{\"op\":\"where\",\"inputs\":[\"m\",\"x\",\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"value\":0}}", 400,
         "nodes[0].attrs.value", "unknown attribute"},
        {"{\"op\":\"lt\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}", 400, "nodes[0].attrs.value", "needs"},
        {"{\"op\":\"lt\",\"inputs\":[\"x\",\"m\"],\"outputs\":[\"y\"],\"attrs\":{\"value\":1}}", 400,
         "nodes[0].attrs.value", "not both"},
        {"{\"op\":\"ge\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"value\":\"-inf\"}}", 400,
         "nodes[0].attrs.value", "finite number"},
        {"{\"op\":\"eq\",\"inputs\":[\"x\",\"h\"],\"outputs\":[\"y\"]}", 422, "nodes[0].inputs[1]", "dtype"},
        {"{\"op\":\"ne\",\"inputs\":[\"x\",\"b\"],\"outputs\":[\"y\"]}", 422, "nodes[0].inputs[1]", "do not broadcast"},
        {"{\"op\":\"gt\",\"inputs\":[\"x\",\"m\",\"m\"],\"outputs\":[\"y\"]}", 422, "nodes[0].inputs", "1 to 2 inputs"},
        {"{\"op\":\"log\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"value\":1}}", 400, "nodes[0].attrs.value",
         ""},
        {"{\"op\":\"where\",\"inputs\":[\"m\",\"x\",\"q\"],\"outputs\":[\"y\"]}", 422, "nodes[0].inputs[2]", ""},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char g[1024];
        snprintf(g, sizeof(g),
                 "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[4,8],\"dtype\":\"f32\"},"
                 "{\"name\":\"m\",\"shape\":[8],\"dtype\":\"f16\"},{\"name\":\"b\",\"shape\":[3,8],\"dtype\":\"f32\"},"
                 "{\"name\":\"h\",\"shape\":[4,8],\"dtype\":\"f16\"}],\"nodes\":[%s],\"outputs\":[\"y\"]}}",
                 bad[i].node);
        expect_error(g, bad[i].status, bad[i].field, bad[i].part);
    }
}

static void test_options(void)
{
    static const char *const bad[] = {
        "\"budget\":{\"seconds\":1e9}", "\"budget\":{\"seconds\":0}", "\"budget\":{\"candidates\":0}",
        "\"budget\":{\"candidates\":1000000000}", "\"budget\":{\"minutes\":1}", "\"budget\":3",
        "\"priority\":\"urgent\"", "\"priority\":1", "\"wait\":1", "\"tune\":\"fast\"",
        "\"arch\":\"sm_10\"", "\"arch\":90",
    };
    char gbody[512], kbody[512];
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(gbody, sizeof(gbody),
                 "{\"graph\":{\"inputs\":[" X_768 "],\"nodes\":[{\"op\":\"relu\",\"inputs\":[\"x\"],"
                 "\"outputs\":[\"a\"]}],\"outputs\":[\"a\"]},%s}",
                 bad[i]);
        snprintf(kbody, sizeof(kbody),
                 "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[4,768],\"dtype\":\"f16\"},"
                 "{\"shape\":[768,64],\"dtype\":\"f16\"}],%s}",
                 bad[i]);
        graph_request rq;
        proto_kernel_request kr;
        proto_error ge, ke;
        memset(&ge, 0, sizeof(ge));
        memset(&ke, 0, sizeof(ke));
        int gr = graph_request_parse(gbody, strlen(gbody), &rq, &ge);
        int kr_r = proto_kernel_request_parse(kbody, strlen(kbody), &kr, &ke);
        CHECK(gr == -EINVAL && kr_r == -EINVAL, "%s: graph %d, kernel %d", bad[i], gr, kr_r);
        if (gr == 0)
            graph_request_free(&rq);
        CHECK(ge.status == ke.status && !strcmp(ge.code, ke.code) && !strcmp(ge.field, ke.field),
              "%s: graph %d %s %s, kernel %d %s %s", bad[i], ge.status, ge.code, ge.field, ke.status, ke.code,
              ke.field);
    }
    const char *good = "{\"graph\":{\"inputs\":[" X_768 "],\"nodes\":[{\"op\":\"relu\",\"inputs\":[\"x\"],"
                       "\"outputs\":[\"a\"]}],\"outputs\":[\"a\"]},\"arch\":\"sm_80\",\"tune\":\"none\","
                       "\"wait\":false,\"priority\":\"background\",\"budget\":{\"seconds\":5,\"candidates\":7}}";
    graph_request rq;
    proto_error e;
    CHECK(graph_request_parse(good, strlen(good), &rq, &e) == 0, "options refused: %s", e.message);
    const proto_job_options *o = &rq.opt;
    CHECK(o->arch_given && !o->arch_native && o->target.sm == 80 && o->tune == TUNER_TUNE_NONE && o->tune_given &&
              !o->wait && o->priority == PROTO_PRIO_BACKGROUND && o->budget_s == 5 && o->budget_candidates == 7 &&
              !o->retune,
          "options not kept");
    graph_request_free(&rq);
}

/* matmul(x, transpose(w)) reads w with trans_b: one kernel, no transpose. A reshape is a view. */
static void test_folds(void)
{
    const char *body =
        "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[2,64,768],\"dtype\":\"f16\"}],"
        "\"weights\":[{\"name\":\"w\",\"shape\":[256,768],\"dtype\":\"f16\"}],\"nodes\":["
        "{\"op\":\"transpose\",\"inputs\":[\"w\"],\"outputs\":[\"wt\"],\"attrs\":{\"perm\":[1,0]}},"
        "{\"op\":\"reshape\",\"inputs\":[\"x\"],\"outputs\":[\"x2\"],\"attrs\":{\"shape\":[128,-1]}},"
        "{\"op\":\"matmul\",\"inputs\":[\"x2\",\"wt\"],\"outputs\":[\"h\"]},"
        "{\"op\":\"silu\",\"inputs\":[\"h\"],\"outputs\":[\"h2\"]},"
        "{\"op\":\"reshape\",\"inputs\":[\"h2\"],\"outputs\":[\"y\"],\"attrs\":{\"shape\":[2,64,256]}}],"
        "\"outputs\":[\"y\"]}}";
    graph_request rq;
    graph_plan p;
    proto_error e;
    CHECK(plan_of(body, &rq, &p, &e) == 0, "%s %s", e.field, e.message);
    if (failures)
        return;
    CHECK(p.n_kernels == 1 && p.kernels[0].op->attrs.matmul.trans_b &&
          p.kernels[0].op->epilogue.n == 1, "%d kernels", p.n_kernels);
    uint64_t none[4] = {0};
    CHECK(graph_plan_place(&p, none) == 0 && p.arena_bytes == 0, "the result goes straight into y");
    cJSON *empty = cJSON_CreateObject();
    const cJSON *sets[1] = {empty};
    char *json = NULL;
    CHECK(graph_plan_render(&rq, &p, sets, "k", &json) == 0 && json &&
          strstr(json, "\"input0\":\"x\",\"input1\":\"w\",\"output\":\"y\""), "%s", json);
    cJSON_Delete(empty);
    free(json);
    graph_plan_free(&p);
    graph_request_free(&rq);
}

/* Fusion stops where the request language cannot follow, and the rest runs as separate kernels:
 * w / (x @ w2) has the matmul's result as a divisor (no step divides an operand by the value);
 * 20 steps do not fit one chain of 16. */
static void test_fallbacks(void)
{
    const char *body =
        "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[64,128],\"dtype\":\"f16\"},"
        "{\"name\":\"d\",\"shape\":[64,32],\"dtype\":\"f16\"}],"
        "\"weights\":[{\"name\":\"w\",\"shape\":[128,32],\"dtype\":\"f16\"}],\"nodes\":["
        "{\"op\":\"matmul\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"h\"]},"
        "{\"op\":\"div\",\"inputs\":[\"d\",\"h\"],\"outputs\":[\"q\"]},"
        "{\"op\":\"sub\",\"inputs\":[\"d\",\"q\"],\"outputs\":[\"y\"]}],"
        "\"outputs\":[\"y\"]}}";
    graph_request rq;
    graph_plan p;
    proto_error e;
    CHECK(plan_of(body, &rq, &p, &e) == 0, "%s %s", e.field, e.message);
    if (!failures) {
        CHECK(p.n_kernels == 2, "%d", p.n_kernels);
        /* d - q: q is the running value, so it is written (-q) + d. */
        const graph_kernel *ew = &p.kernels[1];
        CHECK(ew->op->kind == TUNER_OP_ELEMENTWISE && ew->op->epilogue.n == 3 &&
              ew->op->epilogue.steps[1].kind == TUNER_EW_NEG, "%s", ew->request);
        graph_plan_free(&p);
        graph_request_free(&rq);
    }

    char big[8192];
    int n = snprintf(big, sizeof(big),
                     "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[1000],\"dtype\":\"f32\"}],"
                     "\"nodes\":[");
    for (int i = 0; i < 20; i++)
        n += snprintf(big + n, sizeof(big) - (size_t)n,
                      "%s{\"op\":\"scale\",\"inputs\":[\"%s%d\"],\"outputs\":[\"t%d\"],"
                      "\"attrs\":{\"value\":1.5}}",
                      i ? "," : "", i ? "t" : "x", i ? i - 1 : 0, i);
    snprintf(big + n, sizeof(big) - (size_t)n, "],\"outputs\":[\"t19\"]}}");
    big[strlen(big) - 1] = '}';
    /* the first input is "x0": name it so */
    char *x0 = strstr(big, "\"x0\"");
    if (x0)
        memcpy(x0, "\"x\" ", 4);
    CHECK(plan_of(big, &rq, &p, &e) == 0, "%s %s", e.field, e.message);
    if (!failures) {
        CHECK(p.n_kernels == 2 && p.kernels[0].op->epilogue.n == 16, "%d kernels", p.n_kernels);
        graph_plan_free(&p);
        graph_request_free(&rq);
    }
}

/* A chain whose intermediates each feed two later kernels: buffers that are dead by the time a
 * later one is made share memory. And a graph of 200 nodes partitions well within its bound. */
static void test_arena_and_size(void)
{
    char *body = malloc(1 << 17);
    int n = snprintf(body, 1 << 17,
                     "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[256,256],\"dtype\":\"f16\"}],"
                     "\"weights\":[{\"name\":\"w\",\"shape\":[256,256],\"dtype\":\"f16\"}],\"nodes\":[");
    /* a_i = matmul(a_{i-1}, w); b_i = relu(a_i) + a_i ... 40 blocks of 5 nodes */
    const char *prev = "x";
    char prevbuf[32];
    for (int i = 0; i < 40; i++) {
        n += snprintf(body + n, (size_t)(1 << 17) - (size_t)n,
                      "%s{\"op\":\"matmul\",\"inputs\":[\"%s\",\"w\"],\"outputs\":[\"m%d\"]},"
                      "{\"op\":\"relu\",\"inputs\":[\"m%d\"],\"outputs\":[\"r%d\"]},"
                      "{\"op\":\"add\",\"inputs\":[\"r%d\",\"%s\"],\"outputs\":[\"s%d\"]},"
                      "{\"op\":\"scale\",\"inputs\":[\"s%d\"],\"outputs\":[\"c%d\"],\"attrs\":{\"value\":0.5}},"
                      "{\"op\":\"layernorm\",\"inputs\":[\"c%d\"],\"outputs\":[\"l%d\"]}",
                      i ? "," : "", prev, i, i, i, i, prev, i, i, i, i, i);
        snprintf(prevbuf, sizeof(prevbuf), "l%d", i);
        prev = prevbuf;
    }
    snprintf(body + n, (size_t)(1 << 17) - (size_t)n, "],\"outputs\":[\"%s\"]},\"tune\":\"none\"}", prev);
    graph_request rq;
    graph_plan p;
    proto_error e;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int r = plan_of(body, &rq, &p, &e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK(r == 0, "%s %s", e.field, e.message);
    free(body);
    if (r < 0)
        return;
    /* Per block: matmul (+relu +add +scale) and layernorm. */
    CHECK(p.n_kernels == 80, "%d kernels", p.n_kernels);
    uint64_t *ws = calloc((size_t)p.n_kernels, sizeof(uint64_t));
    CHECK(graph_plan_place(&p, ws) == 0);
    /* At most the input of a block's matmul (read again by its add) and its result live at
     * once: two [256,256] f16 buffers, whatever the depth. */
    CHECK(p.arena_bytes <= 2 * 256 * 256 * 2, "%llu", (unsigned long long)p.arena_bytes);
    printf("200 nodes: %d kernels, arena %llu bytes, parsed and partitioned in %.1f ms\n",
           p.n_kernels, (unsigned long long)p.arena_bytes,
           (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    free(ws);
    graph_plan_free(&p);
    graph_request_free(&rq);
}

/* Layout ops that fold nowhere become kernels of their own: a transpose (with the relu after it
 * as its epilogue), a slice, a concat; their parameters are the strided reads they stand for. */
static void test_layout(void)
{
    const char *body =
        "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[4,6,8],\"dtype\":\"f16\"},"
        "{\"name\":\"y\",\"shape\":[4,4,2],\"dtype\":\"f16\"}],\"nodes\":["
        "{\"op\":\"transpose\",\"inputs\":[\"x\"],\"outputs\":[\"t\"],\"attrs\":{\"perm\":[2,0,1]}},"
        "{\"op\":\"relu\",\"inputs\":[\"t\"],\"outputs\":[\"tr\"]},"
        "{\"op\":\"slice\",\"inputs\":[\"tr\"],\"outputs\":[\"s\"],"
        "\"attrs\":{\"starts\":[1,-3],\"ends\":[100,6],\"axes\":[0,2],\"steps\":[2,1]}},"
        "{\"op\":\"concat\",\"inputs\":[\"s\",\"y\"],\"outputs\":[\"c\"],\"attrs\":{\"axis\":-1}}],"
        "\"outputs\":[\"c\"]}}";
    graph_request rq;
    graph_plan p;
    proto_error e;
    CHECK(plan_of(body, &rq, &p, &e) == 0, "%s %s", e.field, e.message);
    if (failures)
        return;
    CHECK(p.n_kernels == 3, "%d kernels", p.n_kernels);
    if (p.n_kernels == 3) {
        const graph_kernel *t = &p.kernels[0], *sl = &p.kernels[1], *cc = &p.kernels[2];
        /* x [4,6,8] strides (48, 8, 1); t = x.permute(2,0,1): [8,4,6] reading strides (1, 48, 8). */
        CHECK(t->op->kind == TUNER_OP_COPY && t->op->attrs.copy.strides[0] == 1 &&
              t->op->attrs.copy.strides[1] == 48 && t->op->attrs.copy.strides[2] == 8 &&
              t->op->epilogue.n == 1 && t->op->epilogue.steps[0].kind == TUNER_EW_RELU, "%s", t->request);
        /* tr [8,4,6] strides (24, 6, 1): rows 1,3,5,7 and columns 3..5: offset 24 + 3. */
        CHECK(sl->op->kind == TUNER_OP_COPY && sl->op->attrs.copy.offset == 27 &&
              sl->op->attrs.copy.strides[0] == 48 && sl->op->output.shape[0] == 4 &&
              sl->op->output.shape[2] == 3, "%s", sl->request);
        CHECK(cc->op->kind == TUNER_OP_CONCAT && cc->op->attrs.concat.axis == 2 &&
              cc->op->output.shape[2] == 5, "%s", cc->request);
    }
    graph_plan_free(&p);
    graph_request_free(&rq);
}

/* Bodies that mean the same graph give the same canonical text; a changed attribute another. */
static void test_canonical(void)
{
    const char *a = "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[4,8],\"dtype\":\"half\"}],"
                    "\"nodes\":[{\"op\":\"scale\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
                    "\"attrs\":{\"value\":2}}],\"outputs\":[\"y\"]}}";
    const char *b = "{\"graph\":{\"outputs\":[\"y\"],\"nodes\":[{\"outputs\":[\"y\"],\"attrs\":"
                    "{\"value\":2.0},\"inputs\":[\"x\"],\"op\":\"scale\"}],\"inputs\":[{\"dtype\":"
                    "\"f16\",\"shape\":[4,8],\"name\":\"x\"}]}}";
    const char *c = "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[4,8],\"dtype\":\"f16\"}],"
                    "\"nodes\":[{\"op\":\"scale\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
                    "\"attrs\":{\"value\":3}}],\"outputs\":[\"y\"]}}";
    graph_request ra, rb, rc;
    proto_error e;
    CHECK(graph_request_parse(a, strlen(a), &ra, &e) == 0 && graph_request_parse(b, strlen(b), &rb, &e) == 0 &&
          graph_request_parse(c, strlen(c), &rc, &e) == 0, "%s", e.message);
    if (failures)
        return;
    char *ca = graph_canonical(&ra.g), *cb = graph_canonical(&rb.g), *cc = graph_canonical(&rc.g);
    CHECK(ca && cb && cc && strcmp(ca, cb) == 0 && strcmp(ca, cc) != 0);
    free(ca);
    free(cb);
    free(cc);
    graph_request_free(&ra);
    graph_request_free(&rb);
    graph_request_free(&rc);
}

/* A graph of one input x (shape, dtype f16), its nodes and outputs; parsed and partitioned. */
#define G1(shape, nodes, outs) \
    "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":" shape ",\"dtype\":\"f16\"}],\"nodes\":[" nodes \
    "],\"outputs\":[" outs "]}}"

static bool plan_ok(const char *body, graph_request *rq, graph_plan *p)
{
    proto_error e;
    int r = plan_of(body, rq, p, &e);
    CHECK(r == 0, "%s: %s %s", body, e.field, e.message);
    return r == 0;
}

static void plan_done(graph_request *rq, graph_plan *p)
{
    graph_plan_free(p);
    graph_request_free(rq);
}

/* issue 37's shape nodes: expand (folded into a broadcasting step, or a zero-stride copy), pad
 * (a padded copy, negative pads crop), reduce over several axes (one kernel for a range, a chain
 * summing in fp32 otherwise), softmax/log_softmax on any axis (transposes around the row kernel,
 * or a view), and the QKV split + permute a transformer's attention needs (slices and a
 * transpose). */
static void test_shape_nodes(void)
{
    graph_request rq;
    graph_plan p;
    /* expand read only by a broadcasting add: no kernel of its own, the add reads x [4,1,8]. */
    const char *fold =
        "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[4,1,8],\"dtype\":\"f16\"},"
        "{\"name\":\"b\",\"shape\":[4,6,8],\"dtype\":\"f16\"}],\"nodes\":["
        "{\"op\":\"expand\",\"inputs\":[\"x\"],\"outputs\":[\"e\"],\"attrs\":{\"shape\":[-1,6,-1]}},"
        "{\"op\":\"add\",\"inputs\":[\"e\",\"b\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}}";
    if (plan_ok(fold, &rq, &p)) {
        CHECK(p.n_kernels == 1 && p.kernels[0].op->kind == TUNER_OP_ELEMENTWISE &&
              p.kernels[0].op->inputs[0].shape[1] == 1 && p.kernels[0].op->output.shape[1] == 6,
              "%d kernels: %s", p.n_kernels, p.kernels[0].request);
        plan_done(&rq, &p);
    }
    /* expand read by a unary step (and with a new leading axis): a copy with zero strides that
     * takes the relu as its epilogue. */
    if (plan_ok(G1("[1,8]", "{\"op\":\"expand\",\"inputs\":[\"x\"],\"outputs\":[\"e\"],\"attrs\":{\"shape\":[3,4,-1]}},"
                            "{\"op\":\"relu\",\"inputs\":[\"e\"],\"outputs\":[\"y\"]}", "\"y\""), &rq, &p)) {
        const tuner_op *op = p.kernels[0].op;
        CHECK(p.n_kernels == 1 && op->kind == TUNER_OP_COPY && op->output.rank == 3 && op->output.shape[0] == 3 &&
              op->output.shape[1] == 4 && op->attrs.copy.strides[0] == 0 && op->attrs.copy.strides[1] == 0 &&
              op->attrs.copy.strides[2] == 1 && op->epilogue.n == 1, "%s", p.kernels[0].request);
        plan_done(&rq, &p);
    }
    /* F.pad(x, (1, 1, 2, 0), value=-1) on NCHW, then relu: one padded copy. */
    if (plan_ok(G1("[2,3,5,5]", "{\"op\":\"pad\",\"inputs\":[\"x\"],\"outputs\":[\"q\"],"
                                "\"attrs\":{\"pads\":[1,1,2,0],\"value\":-1}},"
                                "{\"op\":\"relu\",\"inputs\":[\"q\"],\"outputs\":[\"y\"]}", "\"y\""), &rq, &p)) {
        const tuner_op *op = p.kernels[0].op;
        CHECK(p.n_kernels == 1 && op->kind == TUNER_OP_COPY && op->attrs.copy.padded &&
              op->output.shape[2] == 7 && op->output.shape[3] == 7 && op->attrs.copy.pad_lower[2] == 2 &&
              op->attrs.copy.pad_upper[2] == 0 && op->attrs.copy.pad_lower[3] == 1 &&
              op->attrs.copy.pad_upper[3] == 1 && op->attrs.copy.pad_value == -1 && op->attrs.copy.offset == 0 &&
              op->epilogue.n == 1, "%s", p.kernels[0].request);
        plan_done(&rq, &p);
    }
    /* A negative pad crops: (-1, 2) on [4,6]'s last axis reads from column 1, pads 2 after. */
    if (plan_ok(G1("[4,6]", "{\"op\":\"pad\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"pads\":[-1,2]}}", "\"y\""),
                &rq, &p)) {
        const tuner_op *op = p.kernels[0].op;
        CHECK(op->kind == TUNER_OP_COPY && op->output.shape[1] == 7 && op->attrs.copy.offset == 1 &&
              op->attrs.copy.pad_lower[1] == 0 && op->attrs.copy.pad_upper[1] == 2 && op->attrs.copy.pad_value == 0,
              "%s", p.kernels[0].request);
        plan_done(&rq, &p);
    }
    /* NHWC global mean over [1,2]: one reduce kernel of both axes. */
    if (plan_ok(G1("[2,7,7,64]", "{\"op\":\"reduce\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
                                 "\"attrs\":{\"kind\":\"mean\",\"axes\":[1,2]}}", "\"y\""), &rq, &p)) {
        const tuner_op *op = p.kernels[0].op;
        CHECK(p.n_kernels == 1 && op->kind == TUNER_OP_REDUCE && op->attrs.reduce.axis == 1 &&
              op->attrs.reduce.naxes == 2 && op->output.rank == 2, "%s", p.kernels[0].request);
        plan_done(&rq, &p);
    }
    /* mean over [1,3] of [2,3,4,5]: axis 3 first (sum, kept in f32), then axis 1 (sum, / 15, back
     * to f16); with keepdim the result is [2,1,4,1]. */
    if (plan_ok(G1("[2,3,4,5]", "{\"op\":\"reduce\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
                                "\"attrs\":{\"kind\":\"mean\",\"axes\":[3,1],\"keepdim\":true}}", "\"y\""), &rq, &p)) {
        CHECK(p.n_kernels == 2, "%d kernels", p.n_kernels);
        if (p.n_kernels == 2) {
            const tuner_op *a = step(&p, 0)->op, *b = step(&p, 1)->op;
            CHECK(a->kind == TUNER_OP_REDUCE && a->attrs.reduce.axis == 3 && a->attrs.reduce.kind == TUNER_REDUCE_SUM &&
                  a->output.dtype == TUNER_F32 && a->output.rank == 4 && a->output.shape[3] == 1,
                  "%s", step(&p, 0)->request);
            CHECK(b->kind == TUNER_OP_REDUCE && b->attrs.reduce.axis == 1 && b->attrs.reduce.kind == TUNER_REDUCE_SUM &&
                  b->inputs[0].dtype == TUNER_F32 && b->output.dtype == TUNER_F16 && b->epilogue.n == 2 &&
                  b->epilogue.steps[0].kind == TUNER_EW_SCALE && fabs(b->epilogue.steps[0].scalar - 1.0 / 15) < 1e-15 &&
                  b->output.shape[1] == 1 && b->output.shape[2] == 4, "%s", step(&p, 1)->request);
        }
        CHECK(rq.g.tensors[rq.g.outputs[0]].t.rank == 4);
        plan_done(&rq, &p);
    }
    /* max over [0,2] without keepdim: two max kernels, no casts; [2,3,4,5] -> [3,5]. */
    if (plan_ok(G1("[2,3,4,5]", "{\"op\":\"reduce\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
                                "\"attrs\":{\"kind\":\"max\",\"axes\":[0,-2]}}", "\"y\""), &rq, &p)) {
        CHECK(p.n_kernels == 2 && step(&p, 0)->op->attrs.reduce.axis == 2 && step(&p, 1)->op->attrs.reduce.axis == 0 &&
              step(&p, 0)->op->output.dtype == TUNER_F16 && step(&p, 1)->op->epilogue.n == 0 &&
              step(&p, 1)->op->output.rank == 2 && step(&p, 1)->op->output.shape[0] == 3, "%d kernels", p.n_kernels);
        plan_done(&rq, &p);
    }
    /* log_softmax over the last axis: one softmax kernel with the log flag. */
    if (plan_ok(G1("[4,10]", "{\"op\":\"log_softmax\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"axis\":-1}}", "\"y\""),
                &rq, &p)) {
        CHECK(p.n_kernels == 1 && p.kernels[0].op->kind == TUNER_OP_SOFTMAX && p.kernels[0].op->attrs.softmax.log &&
                  strstr(p.kernels[0].request, "\"log\":true"),
              "%s", p.kernels[0].request);
        plan_done(&rq, &p);
    }
    /* softmax over axis 1 of [2,3,4]: the axis moved last ([2,4,3]), the row kernel, moved back;
     * a following scale fuses into the second copy. */
    if (plan_ok(G1("[2,3,4]", "{\"op\":\"softmax\",\"inputs\":[\"x\"],\"outputs\":[\"s\"],\"attrs\":{\"axis\":1}},"
                              "{\"op\":\"scale\",\"inputs\":[\"s\"],\"outputs\":[\"y\"],\"attrs\":{\"value\":2}}", "\"y\""),
                &rq, &p)) {
        CHECK(p.n_kernels == 3, "%d kernels", p.n_kernels);
        if (p.n_kernels == 3) {
            const tuner_op *t1 = step(&p, 0)->op, *sm = step(&p, 1)->op, *t2 = step(&p, 2)->op;
            CHECK(t1->kind == TUNER_OP_COPY && t1->output.shape[1] == 4 && t1->output.shape[2] == 3 &&
                  t1->attrs.copy.strides[1] == 1 && t1->attrs.copy.strides[2] == 4, "%s", step(&p, 0)->request);
            CHECK(sm->kind == TUNER_OP_SOFTMAX && !sm->attrs.softmax.log && sm->inputs[0].shape[2] == 3);
            CHECK(t2->kind == TUNER_OP_COPY && t2->output.shape[1] == 3 && t2->output.shape[2] == 4 &&
                  t2->attrs.copy.strides[1] == 1 && t2->attrs.copy.strides[2] == 3 && t2->epilogue.n == 1,
                  "%s", step(&p, 2)->request);
        }
        plan_done(&rq, &p);
    }
    /* log_softmax over the channels of [8,10,1,1]: a view [8,10], one kernel, no copies. */
    if (plan_ok(G1("[8,10,1,1]", "{\"op\":\"log_softmax\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"axis\":1}}",
                   "\"y\""), &rq, &p)) {
        CHECK(p.n_kernels == 1 && p.kernels[0].op->kind == TUNER_OP_SOFTMAX && p.kernels[0].op->attrs.softmax.log &&
                  p.kernels[0].op->inputs[0].rank == 2,
              "%d kernels: %s", p.n_kernels, p.kernels[0].request);
        plan_done(&rq, &p);
    }
    /* torch.split of a fused QKV projection [B,S,3*H*D] into three slices, each viewed as
     * [B,S,H,D] and permuted to [B,H,S,D]: nothing new is needed (slice, reshape, transpose). */
    const char *qkv =
        "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[2,16,96],\"dtype\":\"f16\"}],\"nodes\":["
        "{\"op\":\"slice\",\"inputs\":[\"x\"],\"outputs\":[\"q\"],\"attrs\":{\"starts\":[0],\"ends\":[32],\"axes\":[2]}},"
        "{\"op\":\"slice\",\"inputs\":[\"x\"],\"outputs\":[\"k\"],\"attrs\":{\"starts\":[32],\"ends\":[64],\"axes\":[2]}},"
        "{\"op\":\"slice\",\"inputs\":[\"x\"],\"outputs\":[\"v\"],\"attrs\":{\"starts\":[64],\"ends\":[96],\"axes\":[2]}},"
        "{\"op\":\"reshape\",\"inputs\":[\"q\"],\"outputs\":[\"q4\"],\"attrs\":{\"shape\":[2,16,4,8]}},"
        "{\"op\":\"reshape\",\"inputs\":[\"k\"],\"outputs\":[\"k4\"],\"attrs\":{\"shape\":[2,16,4,8]}},"
        "{\"op\":\"reshape\",\"inputs\":[\"v\"],\"outputs\":[\"v4\"],\"attrs\":{\"shape\":[2,16,4,8]}},"
        "{\"op\":\"transpose\",\"inputs\":[\"q4\"],\"outputs\":[\"qh\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
        "{\"op\":\"transpose\",\"inputs\":[\"k4\"],\"outputs\":[\"kh\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
        "{\"op\":\"transpose\",\"inputs\":[\"v4\"],\"outputs\":[\"vh\"],\"attrs\":{\"perm\":[0,2,1,3]}}],"
        "\"outputs\":[\"qh\",\"kh\",\"vh\"]}}";
    if (plan_ok(qkv, &rq, &p)) {
        CHECK(p.n_kernels == 6, "%d kernels", p.n_kernels);
        int perms = 0;
        for (int k = 0; k < p.n_kernels; k++) {
            const tuner_op *op = p.kernels[k].op;
            CHECK(op->kind == TUNER_OP_COPY);
            /* [2,16,4,8] dense strides (512, 32, 8, 1) read as [2,4,16,8]: (512, 8, 32, 1). */
            if (op->output.rank == 4 && op->output.shape[1] == 4 && op->output.shape[2] == 16)
                perms += op->attrs.copy.strides[1] == 8 && op->attrs.copy.strides[2] == 32;
        }
        CHECK(perms == 3, "%d permutes", perms);
        for (int k = 0; k < 3; k++) {
            const graph_tensor *o = &rq.g.tensors[rq.g.outputs[k]];
            CHECK(o->t.rank == 4 && o->t.shape[1] == 4 && o->t.shape[2] == 16 && o->t.shape[3] == 8);
        }
        plan_done(&rq, &p);
    }

    /* Refusals, each at its field. */
    expect_error(G1("[4,3]", "{\"op\":\"expand\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"shape\":[4,6]}}", "\"y\""),
                 422, "nodes[0].attrs.shape", "only a size-1 axis grows");
    expect_error(G1("[4,3]", "{\"op\":\"expand\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"shape\":[3]}}", "\"y\""),
                 422, "nodes[0].attrs.shape", "fewer");
    expect_error(G1("[4,3]", "{\"op\":\"expand\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"shape\":[-1,4,3]}}", "\"y\""),
                 422, "nodes[0].attrs.shape", "leading");
    expect_error(G1("[4,3]", "{\"op\":\"expand\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}", "\"y\""), 400,
                 "nodes[0].attrs.shape", NULL);
    expect_error(G1("[4,3]", "{\"op\":\"pad\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"pads\":[1,1,1]}}", "\"y\""),
                 422, "nodes[0].attrs.pads", "pairs");
    expect_error(G1("[4,3]", "{\"op\":\"pad\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"pads\":[1,1,1,1,1,1]}}",
                    "\"y\""), 422, "nodes[0].attrs.pads", "pairs");
    expect_error(G1("[4,3]", "{\"op\":\"pad\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"pads\":[-2,-1]}}", "\"y\""),
                 422, "nodes[0].attrs.pads", "leave nothing");
    expect_error(G1("[4,3]", "{\"op\":\"pad\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
                             "\"attrs\":{\"pads\":[1,1],\"mode\":\"reflect\"}}", "\"y\""),
                 422, "nodes[0].attrs.mode", "constant");
    expect_error(G1("[4,3]", "{\"op\":\"pad\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"pads\":[1,1],\"value\":\"a\"}}",
                    "\"y\""), 400, "nodes[0].attrs.value", NULL);
    expect_error(G1("[4,3,2]", "{\"op\":\"reduce\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"axes\":[0,-3]}}", "\"y\""),
                 422, "nodes[0].attrs.axes", "twice");
    expect_error(G1("[4,3,2]", "{\"op\":\"reduce\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
                               "\"attrs\":{\"axes\":[0,2],\"axis\":1}}", "\"y\""),
                 422, "nodes[0].attrs.axes", "not both");
    expect_error(G1("[4,3,2]", "{\"op\":\"reduce\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
                               "\"attrs\":{\"axes\":[0,2],\"kind\":\"min\"}}", "\"y\""),
                 422, "nodes[0].attrs.kind", NULL);
    expect_error(G1("[4,3,2]", "{\"op\":\"reduce\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
                               "\"attrs\":{\"axes\":[0,2],\"keepdim\":1}}", "\"y\""),
                 400, "nodes[0].attrs.keepdim", NULL);
    /* A range goes through the kernel validator: its errors are the node's too. */
    expect_error(G1("[4,3,2]", "{\"op\":\"reduce\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
                               "\"attrs\":{\"axes\":[0,1],\"kind\":\"min\"}}", "\"y\""),
                 422, "nodes[0].attrs.kind", NULL);
    expect_error(G1("[4,3]", "{\"op\":\"softmax\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"axis\":2}}", "\"y\""),
                 422, "nodes[0].attrs.axis", "out of range");
    expect_error(G1("[4,3]", "{\"op\":\"log_softmax\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"log\":true}}", "\"y\""),
                 400, "nodes[0].attrs.log", "unknown attribute");
    expect_error(G1("[4,3]", "{\"op\":\"softmax\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
                             "\"attrs\":{\"axis\":0,\"log\":\"yes\"}}", "\"y\""),
                 400, "nodes[0].attrs.log", NULL);

    /* The canonical text tells pads, values, axes and the log flag apart. */
    const char *bodies[] = {
        G1("[4,3]", "{\"op\":\"pad\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"pads\":[1,0]}}", "\"y\""),
        G1("[4,3]", "{\"op\":\"pad\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"pads\":[0,1]}}", "\"y\""),
        G1("[4,3]", "{\"op\":\"pad\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"pads\":[0,1],\"value\":2}}", "\"y\""),
        G1("[4,3,2]", "{\"op\":\"reduce\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"axes\":[0,2]}}", "\"y\""),
        G1("[4,3,2]", "{\"op\":\"reduce\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"axes\":[0,2],\"kind\":\"max\"}}",
           "\"y\""),
        G1("[4,3,2]", "{\"op\":\"softmax\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"axis\":0}}", "\"y\""),
        G1("[4,3,2]", "{\"op\":\"log_softmax\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"axis\":0}}", "\"y\""),
        G1("[4,3,2]", "{\"op\":\"softmax\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}", "\"y\""),
        G1("[4,3,2]", "{\"op\":\"log_softmax\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}", "\"y\""),
    };
    enum { NB = sizeof(bodies) / sizeof(bodies[0]) };
    char *texts[NB] = {NULL};
    for (int k = 0; k < NB; k++) {
        proto_error e;
        CHECK(graph_request_parse(bodies[k], strlen(bodies[k]), &rq, &e) == 0, "%s: %s", bodies[k], e.message);
        if (failures)
            break;
        texts[k] = graph_canonical(&rq.g);
        graph_request_free(&rq);
        for (int j = 0; j < k; j++)
            CHECK(texts[j] && texts[k] && strcmp(texts[j], texts[k]) != 0, "bodies %d and %d: one text", j, k);
    }
    for (int k = 0; k < NB; k++)
        free(texts[k]);
}

/* BERT's embeddings: word and token-type lookups by i64 ids, the position embeddings of constant
 * ids (weights: a gather in the prepare phase), two adds and a layernorm. Each gather is an
 * anchor whose epilogue takes the adds; the layernorm is an anchor of its own. The attention
 * mask (i64) becomes one elementwise kernel that casts first. Then every refusal of an integer
 * tensor, at its node. */
static void test_embeddings(void)
{
    const char *body =
        "{\"graph\":{\"inputs\":[{\"name\":\"ids\",\"shape\":[2,128],\"dtype\":\"i64\"},"
        "{\"name\":\"types\",\"shape\":[2,128],\"dtype\":\"int64\"},{\"name\":\"mask\",\"shape\":[2,128],\"dtype\":\"i64\"}],"
        "\"weights\":[{\"name\":\"wemb\",\"shape\":[30522,768],\"dtype\":\"f16\"},"
        "{\"name\":\"temb\",\"shape\":[2,768],\"dtype\":\"f16\"},{\"name\":\"pemb\",\"shape\":[512,768],\"dtype\":\"f16\"},"
        "{\"name\":\"pos\",\"shape\":[1,128],\"dtype\":\"i64\"},"
        "{\"name\":\"g\",\"shape\":[768],\"dtype\":\"f16\"},{\"name\":\"b\",\"shape\":[768],\"dtype\":\"f16\"}],"
        "\"nodes\":["
        "{\"op\":\"embedding\",\"inputs\":[\"wemb\",\"ids\"],\"outputs\":[\"e1\"]},"
        "{\"op\":\"embedding\",\"inputs\":[\"temb\",\"types\"],\"outputs\":[\"e2\"]},"
        "{\"op\":\"add\",\"inputs\":[\"e1\",\"e2\"],\"outputs\":[\"e3\"]},"
        "{\"op\":\"index_select\",\"inputs\":[\"pemb\",\"p1\"],\"outputs\":[\"e4\"],\"attrs\":{\"axis\":0}},"
        "{\"op\":\"reshape\",\"inputs\":[\"pos\"],\"outputs\":[\"p1\"],\"attrs\":{\"shape\":[128]}},"
        "{\"op\":\"add\",\"inputs\":[\"e3\",\"e4\"],\"outputs\":[\"e5\"]},"
        "{\"op\":\"layernorm\",\"inputs\":[\"e5\",\"g\",\"b\"],\"outputs\":[\"y\"],\"attrs\":{\"eps\":1e-12}},"
        "{\"op\":\"cast\",\"inputs\":[\"mask\"],\"outputs\":[\"m1\"],\"attrs\":{\"dtype\":\"f32\"}},"
        "{\"op\":\"neg\",\"inputs\":[\"m1\"],\"outputs\":[\"m2\"]},"
        "{\"op\":\"shift\",\"inputs\":[\"m2\"],\"outputs\":[\"m3\"],\"attrs\":{\"value\":1}},"
        "{\"op\":\"scale\",\"inputs\":[\"m3\"],\"outputs\":[\"ext\"],\"attrs\":{\"value\":-10000}}],"
        "\"outputs\":[\"y\",\"ext\"]}}";
    graph_request rq;
    graph_plan p;
    proto_error e;
    CHECK(plan_of(body, &rq, &p, &e) == 0, "%s %s", e.field, e.message);
    if (failures)
        return;
    /* Prepare: the position rows (weights only). Forward: the token-type gather, the word gather
     * with both adds, the layernorm, the mask. */
    CHECK(p.n_prepare == 1, "%d prepare kernels", p.n_prepare);
    if (p.n_prepare == 1) {
        const tuner_op *pg = p.kernels[p.order[0]].op;
        CHECK(pg->kind == TUNER_OP_GATHER && pg->inputs[0].shape[0] == 512 && pg->inputs[1].rank == 1 &&
                  pg->output.rank == 2 && pg->output.shape[0] == 128 && pg->epilogue.n == 0,
              "prepare: %s", p.kernels[p.order[0]].request);
    }
    CHECK(forward_steps(&p) == 4, "%d forward steps", forward_steps(&p));
    int gathers = 0, with_adds = -1, ln = -1, mask = -1;
    for (int s = 0; s < forward_steps(&p); s++) {
        const tuner_op *op = step(&p, s)->op;
        if (op->kind == TUNER_OP_GATHER) {
            gathers++;
            CHECK(op->inputs[1].dtype == TUNER_I64 && op->attrs.gather.axis == 0 && op->output.rank == 3 &&
                  op->output.shape[2] == 768);
            if (op->epilogue.n == 2)
                with_adds = s;
        } else if (op->kind == TUNER_OP_LAYERNORM) {
            ln = s;
        } else if (op->kind == TUNER_OP_ELEMENTWISE) {
            mask = s;
        }
    }
    CHECK(gathers == 2 && with_adds >= 0 && ln > with_adds && mask >= 0, "gathers %d, adds at %d, layernorm at %d",
          gathers, with_adds, ln);
    if (with_adds >= 0) {
        const graph_kernel *k = step(&p, with_adds);
        CHECK(k->op->inputs[0].shape[0] == 30522 && k->op->n_inputs == 4 &&
                  k->op->epilogue.steps[0].kind == TUNER_EW_ADD && k->op->epilogue.steps[1].kind == TUNER_EW_ADD,
              "%s", k->request);
        /* The request says gather with its axis, whatever the node called it. */
        CHECK(strstr(k->request, "\"op\":\"gather\"") && strstr(k->request, "\"axis\":0") &&
                  strstr(k->request, "\"dtype\":\"i64\""), "%s", k->request);
        /* The token-type gather it reads runs before it. */
        bool before = false;
        for (int s = 0; s < with_adds; s++)
            before = before || (step(&p, s)->op->kind == TUNER_OP_GATHER && step(&p, s)->op->inputs[0].shape[0] == 2);
        CHECK(before, "the token-type gather runs after its reader");
    }
    if (mask >= 0) {
        const tuner_op *m = step(&p, mask)->op;
        CHECK(m->inputs[0].dtype == TUNER_I64 && m->output.dtype == TUNER_F32 && m->epilogue.n == 4 &&
                  m->epilogue.steps[0].kind == TUNER_EW_CAST, "mask: %s", step(&p, mask)->request);
    }
    uint64_t none[16] = {0};
    CHECK(graph_plan_place(&p, none) == 0);
    graph_plan_free(&p);
    graph_request_free(&rq);

#define EMB_G(ids_dtype, nodes, outs)                                                                          \
    "{\"graph\":{\"inputs\":[{\"name\":\"ids\",\"shape\":[2,8],\"dtype\":\"" ids_dtype "\"}],"                    \
    "\"weights\":[{\"name\":\"w\",\"shape\":[100,16],\"dtype\":\"f16\"},{\"name\":\"k\",\"shape\":[8,8],\"dtype\":\"i64\"}],"   \
    "\"nodes\":[" nodes "],\"outputs\":[" outs "]}}"
    /* gather by its own name, any axis; index_select on the last axis */
    CHECK(plan_of(EMB_G("i32", "{\"op\":\"gather\",\"inputs\":[\"w\",\"ids\"],\"outputs\":[\"y\"],\"attrs\":{\"axis\":-1}}",
                        "\"y\""), &rq, &p, &e) == 0, "%s %s", e.field, e.message);
    if (!failures) {
        CHECK(p.n_kernels == 1 && p.kernels[0].op->attrs.gather.axis == 1 && p.kernels[0].op->output.rank == 3 &&
              p.kernels[0].op->output.shape[0] == 100 && !p.kernels[0].prepare);
        graph_plan_free(&p);
        graph_request_free(&rq);
    }
    /* A graph input may be an integer, and an integer table is refused as gather's x. */
    expect_error(EMB_G("i64", "{\"op\":\"embedding\",\"inputs\":[\"k\",\"ids\"],\"outputs\":[\"y\"]}", "\"y\""), 422,
                 "nodes[0].inputs[0]", "must be f16, bf16 or f32");
    expect_error(EMB_G("i64", "{\"op\":\"embedding\",\"inputs\":[\"w\",\"ids\"],\"outputs\":[\"y\"],"
                              "\"attrs\":{\"padding_idx\":0}}", "\"y\""), 400, "nodes[0].attrs.padding_idx", NULL);
    expect_error(EMB_G("i64", "{\"op\":\"embedding\",\"inputs\":[\"w\"],\"outputs\":[\"y\"]}", "\"y\""), 422,
                 "nodes[0].inputs", "takes 2 inputs");
    expect_error(EMB_G("f16", "{\"op\":\"embedding\",\"inputs\":[\"w\",\"ids\"],\"outputs\":[\"y\"]}", "\"y\""), 422,
                 "nodes[0].inputs[1]", "i32 or i64");
    expect_error(EMB_G("i64", "{\"op\":\"index_select\",\"inputs\":[\"w\",\"ids\"],\"outputs\":[\"y\"],"
                              "\"attrs\":{\"axis\":0}}", "\"y\""), 422, "nodes[0].inputs[1]", "1-D");
    expect_error(EMB_G("i64", "{\"op\":\"reshape\",\"inputs\":[\"ids\"],\"outputs\":[\"i\"],\"attrs\":{\"shape\":[16]}},"
                              "{\"op\":\"index_select\",\"inputs\":[\"w\",\"i\"],\"outputs\":[\"y\"]}", "\"y\""),
                 400, "nodes[1].attrs.axis", "needs");
    expect_error(EMB_G("i64", "{\"op\":\"reshape\",\"inputs\":[\"ids\"],\"outputs\":[\"i\"],\"attrs\":{\"shape\":[16]}},"
                              "{\"op\":\"index_select\",\"inputs\":[\"w\",\"i\"],\"outputs\":[\"y\"],\"attrs\":{\"axis\":2}}",
                        "\"y\""), 422, "nodes[1].attrs.axis", "out of range");
    /* integers into anything else: the node's input */
    expect_error(EMB_G("i64", "{\"op\":\"matmul\",\"inputs\":[\"k\",\"k\"],\"outputs\":[\"y\"]}", "\"y\""), 422,
                 "nodes[0].inputs[0]", "integer");
    expect_error(EMB_G("i64", "{\"op\":\"relu\",\"inputs\":[\"ids\"],\"outputs\":[\"y\"]}", "\"y\""), 422,
                 "nodes[0].inputs[0]", "cast node");
    expect_error(EMB_G("i64", "{\"op\":\"embedding\",\"inputs\":[\"w\",\"ids\"],\"outputs\":[\"e\"]},"
                              "{\"op\":\"add\",\"inputs\":[\"e\",\"ids\"],\"outputs\":[\"y\"]}", "\"y\""), 422,
                 "nodes[1].inputs[1]", "integer");
    expect_error(EMB_G("i64", "{\"op\":\"transpose\",\"inputs\":[\"ids\"],\"outputs\":[\"y\"]}", "\"y\""), 422,
                 "nodes[0].inputs[0]", "integer");
    expect_error(EMB_G("i64", "{\"op\":\"slice\",\"inputs\":[\"k\"],\"outputs\":[\"y\"],\"attrs\":{\"starts\":[0],\"ends\":[2]}}",
                        "\"y\""), 422, "nodes[0].inputs[0]", "integer");
    expect_error(EMB_G("i64", "{\"op\":\"cast\",\"inputs\":[\"ids\"],\"outputs\":[\"y\"],\"attrs\":{\"dtype\":\"i32\"}}",
                        "\"y\""), 422, "nodes[0].attrs.dtype", "f16, bf16, f32, f8e4m3 or f8e5m2");
    /* an integer output: nothing writes one */
    expect_error(EMB_G("i64", "{\"op\":\"reshape\",\"inputs\":[\"ids\"],\"outputs\":[\"y\"],\"attrs\":{\"shape\":[16]}}",
                        "\"y\""), 422, "graph.outputs[0]", "integer");
    expect_error(EMB_G("u8", "{\"op\":\"relu\",\"inputs\":[\"w\"],\"outputs\":[\"y\"]}", "\"y\""), 422,
                 "graph.inputs[0].dtype", "i64");
#undef EMB_G
}

/* GELU spelled out, as PyTorch records GPT-2's gelu_new ((x * 0.5) * (1 + tanh(sqrt(2/pi) * (x +
 * 0.044715 * x^3)))) and the erf form ((x * 0.5) * (1 + erf(x * 0.7071...))): rewritten into the
 * one GELU step, which then fuses into the matmul's epilogue - one kernel computing all nine (or
 * six) nodes. Not rewritten (and still a correct plan of several kernels): another constant, an
 * intermediate that is also an output, x*x*x for the cube. */
static char *gelu_graph(const char *form, double c3, bool tanh_out)
{
    char *b = NULL;
    const char *head =
        "{\"graph\":{\"inputs\":[{\"name\":\"a\",\"shape\":[64,128],\"dtype\":\"f16\"}],"
        "\"weights\":[{\"name\":\"w\",\"shape\":[128,256],\"dtype\":\"f16\"}],\"nodes\":["
        "{\"name\":\"mm\",\"op\":\"matmul\",\"inputs\":[\"a\",\"w\"],\"outputs\":[\"x\"]},"
        "{\"name\":\"half\",\"op\":\"scale\",\"inputs\":[\"x\"],\"outputs\":[\"h\"],\"attrs\":{\"value\":0.5}},";
    int n;
    if (strcmp(form, "tanh") == 0)
        n = asprintf(&b,
                     "%s{\"name\":\"cube\",\"op\":\"pow\",\"inputs\":[\"x\"],\"outputs\":[\"x3\"],\"attrs\":{\"exponent\":3}},"
                     "{\"name\":\"c3\",\"op\":\"scale\",\"inputs\":[\"x3\"],\"outputs\":[\"t3\"],\"attrs\":{\"value\":%.17g}},"
                     "{\"name\":\"inner\",\"op\":\"add\",\"inputs\":[\"t3\",\"x\"],\"outputs\":[\"t4\"]},"
                     "{\"name\":\"c1\",\"op\":\"scale\",\"inputs\":[\"t4\"],\"outputs\":[\"t5\"],"
                     "\"attrs\":{\"value\":0.7978845608028654}},"
                     "{\"name\":\"th\",\"op\":\"tanh\",\"inputs\":[\"t5\"],\"outputs\":[\"t6\"]},"
                     "{\"name\":\"one\",\"op\":\"shift\",\"inputs\":[\"t6\"],\"outputs\":[\"t7\"],\"attrs\":{\"value\":1}},"
                     "{\"name\":\"gelu\",\"op\":\"mul\",\"inputs\":[\"h\",\"t7\"],\"outputs\":[\"y\"]}],"
                     "\"outputs\":[\"y\"%s]}}",
                     head, c3, tanh_out ? ",\"t6\"" : "");
    else if (strcmp(form, "erf") == 0)
        n = asprintf(&b,
                     "%s{\"name\":\"rs2\",\"op\":\"scale\",\"inputs\":[\"x\"],\"outputs\":[\"s\"],"
                     "\"attrs\":{\"value\":0.70710678118654752}},"
                     "{\"name\":\"erf\",\"op\":\"erf\",\"inputs\":[\"s\"],\"outputs\":[\"e\"]},"
                     "{\"name\":\"one\",\"op\":\"shift\",\"inputs\":[\"e\"],\"outputs\":[\"o\"],\"attrs\":{\"value\":1}},"
                     "{\"name\":\"gelu\",\"op\":\"mul\",\"inputs\":[\"o\",\"h\"],\"outputs\":[\"y\"]}],"
                     "\"outputs\":[\"y\"]}}",
                     head);
    else /* the cube as x * x * x */
        n = asprintf(&b,
                     "%s{\"name\":\"sq\",\"op\":\"mul\",\"inputs\":[\"x\",\"x\"],\"outputs\":[\"x2\"]},"
                     "{\"name\":\"cube\",\"op\":\"mul\",\"inputs\":[\"x2\",\"x\"],\"outputs\":[\"x3\"]},"
                     "{\"name\":\"c3\",\"op\":\"scale\",\"inputs\":[\"x3\"],\"outputs\":[\"t3\"],\"attrs\":{\"value\":0.044715}},"
                     "{\"name\":\"inner\",\"op\":\"add\",\"inputs\":[\"x\",\"t3\"],\"outputs\":[\"t4\"]},"
                     "{\"name\":\"c1\",\"op\":\"scale\",\"inputs\":[\"t4\"],\"outputs\":[\"t5\"],"
                     "\"attrs\":{\"value\":0.7978845608028654}},"
                     "{\"name\":\"th\",\"op\":\"tanh\",\"inputs\":[\"t5\"],\"outputs\":[\"t6\"]},"
                     "{\"name\":\"one\",\"op\":\"shift\",\"inputs\":[\"t6\"],\"outputs\":[\"t7\"],\"attrs\":{\"value\":1}},"
                     "{\"name\":\"gelu\",\"op\":\"mul\",\"inputs\":[\"h\",\"t7\"],\"outputs\":[\"y\"]}],"
                     "\"outputs\":[\"y\"]}}",
                     head);
    return n < 0 ? NULL : b;
}

static void test_gelu(void)
{
    static const struct {
        const char *form;
        double c3;
        bool tanh_out;
        tuner_ew_kind want; /* TUNER_EW_COUNT: not rewritten */
        int nodes;
    } cases[] = {
        {"tanh", 0.044715, false, TUNER_EW_GELU_TANH, 9},
        {"erf", 0, false, TUNER_EW_GELU_ERF, 6},
        {"tanh", 0.044, false, TUNER_EW_COUNT, 0},
        {"tanh", 0.044715, true, TUNER_EW_COUNT, 0},
        {"cubed", 0, false, TUNER_EW_COUNT, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *body = gelu_graph(cases[i].form, cases[i].c3, cases[i].tanh_out);
        graph_request rq;
        graph_plan p;
        proto_error e;
        CHECK(body && plan_of(body, &rq, &p, &e) == 0, "case %zu: %s %s", i, e.field, e.message);
        free(body);
        if (failures)
            return;
        const graph_kernel *mm = kernel_of(&p, "mm");
        if (cases[i].want != TUNER_EW_COUNT) {
            CHECK(p.n_kernels == 1 && mm && mm->op->epilogue.n == 1 && mm->op->epilogue.steps[0].kind == cases[i].want &&
                      mm->n_nodes == cases[i].nodes && kernel_of(&p, "half") == mm && kernel_of(&p, "one") == mm &&
                      kernel_of(&p, "gelu") == mm,
                  "case %zu (%s): %d kernels, %d nodes in the matmul's: %s", i, cases[i].form, p.n_kernels,
                  mm ? mm->n_nodes : 0, mm ? mm->request : "");
        } else {
            bool any = false;
            for (int k = 0; k < p.n_kernels; k++)
                for (int j = 0; j < p.kernels[k].op->epilogue.n; j++)
                    any = any || p.kernels[k].op->epilogue.steps[j].kind == TUNER_EW_GELU_TANH;
            CHECK(p.n_kernels > 1 && !any, "case %zu (%s, c3 %g, tanh out %d): not rewritten, %d kernels", i,
                  cases[i].form, cases[i].c3, cases[i].tanh_out, p.n_kernels);
        }
        graph_plan_free(&p);
        graph_request_free(&rq);
    }
}

/* A linear layer as PyTorch records it - rows through a matmul, viewed back to [B, S, N] - then a
 * GELU and a residual add of a [B, S, N] tensor: the views move below the steps, which join the
 * matmul's epilogue (the residual read through a view of the rows' shape). One kernel; the result
 * a view of its output. A residual that broadcasts ([N]) stays where it is, as does a view whose
 * result is also an output. */
static void test_views_below_steps(void)
{
    static const struct {
        const char *residual_shape, *outputs;
        int kernels, steps;
    } cases[] = {
        {"[2,32,256]", "[\"y\"]", 1, 2},
        {"[256]", "[\"y\"]", 2, 1},
        {"[2,32,256]", "[\"y\",\"m3\"]", 2, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *body = NULL;
        CHECK(asprintf(&body,
                       "{\"graph\":{\"inputs\":[{\"name\":\"a\",\"shape\":[64,128],\"dtype\":\"f16\"},"
                       "{\"name\":\"r\",\"shape\":%s,\"dtype\":\"f16\"}],"
                       "\"weights\":[{\"name\":\"w\",\"shape\":[128,256],\"dtype\":\"f16\"}],\"nodes\":["
                       "{\"name\":\"mm\",\"op\":\"matmul\",\"inputs\":[\"a\",\"w\"],\"outputs\":[\"m\"]},"
                       "{\"name\":\"view\",\"op\":\"reshape\",\"inputs\":[\"m\"],\"outputs\":[\"m3\"],"
                       "\"attrs\":{\"shape\":[2,32,256]}},"
                       "{\"name\":\"act\",\"op\":\"gelu\",\"inputs\":[\"m3\"],\"outputs\":[\"g\"]},"
                       "{\"name\":\"res\",\"op\":\"add\",\"inputs\":[\"r\",\"g\"],\"outputs\":[\"y\"]}],"
                       "\"outputs\":%s}}",
                       cases[i].residual_shape, cases[i].outputs) > 0);
        graph_request rq;
        graph_plan p;
        proto_error e;
        CHECK(body && plan_of(body, &rq, &p, &e) == 0, "case %zu: %s %s", i, e.field, e.message);
        free(body);
        if (failures)
            return;
        const graph_kernel *mm = kernel_of(&p, "mm");
        CHECK(p.n_kernels == cases[i].kernels && mm && mm->op->epilogue.n == cases[i].steps,
              "case %zu: %d kernels, the matmul's epilogue %d steps: %s", i, p.n_kernels, mm ? mm->op->epilogue.n : -1,
              mm ? mm->request : "");
        if (cases[i].kernels == 1)
            CHECK(kernel_of(&p, "act") == mm && kernel_of(&p, "res") == mm && mm->op->inputs[mm->op->n_inputs - 1].rank == 2,
                  "the GELU and the residual (read as [64,256]) in the matmul's kernel: %s", mm->request);
        graph_plan_free(&p);
        graph_request_free(&rq);
    }
}

/* Attention: a node of its own (bshd, GQA, causal), and attention spelled out - matmul with k
 * transposed, scale, an additive mask, softmax, matmul - rewritten into one attention kernel,
 * through 3-D matmuls and 4-D views of the scores as PyTorch's decompositions make them; a head
 * dim the op does not take, or scores that are also an output, stay three kernels. */
static void test_attention(void)
{
    graph_request rq;
    graph_plan p;
    proto_error e;
    const char *node =
        "{\"graph\":{\"inputs\":[{\"name\":\"q\",\"shape\":[2,100,8,128],\"dtype\":\"bf16\"},"
        "{\"name\":\"k\",\"shape\":[2,300,2,128],\"dtype\":\"bf16\"},{\"name\":\"v\",\"shape\":[2,300,2,128],\"dtype\":\"bf16\"}],"
        "\"nodes\":[{\"name\":\"att\",\"op\":\"attention\",\"inputs\":[\"q\",\"k\",\"v\"],\"outputs\":[\"o\"],"
        "\"attrs\":{\"causal\":true,\"layout\":\"bshd\"}},"
        "{\"name\":\"act\",\"op\":\"relu\",\"inputs\":[\"o\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}}";
    CHECK(plan_of(node, &rq, &p, &e) == 0, "%s %s", e.field, e.message);
    if (failures)
        return;
    CHECK(p.n_kernels == 1, "%d kernels", p.n_kernels);
    if (p.n_kernels == 1) {
        const tuner_op *op = p.kernels[0].op;
        CHECK(op->kind == TUNER_OP_ATTENTION && op->attrs.attention.causal && op->attrs.attention.bshd &&
                  fabs(op->attrs.attention.scale - 1.0 / sqrt(128.0)) < 1e-15 && op->epilogue.n == 1 &&
                  op->output.shape[1] == 100 && op->output.shape[2] == 8,
              "%s", p.kernels[0].request);
    }
    graph_plan_free(&p);
    graph_request_free(&rq);

    /* Spelled out over [B*H, S, D] with the mask added to a [B, H, S, Skv] view of the scores. */
    const char *spelled =
        "{\"graph\":{\"inputs\":[{\"name\":\"q\",\"shape\":[2,4,77,64],\"dtype\":\"f16\"},"
        "{\"name\":\"k\",\"shape\":[2,4,333,64],\"dtype\":\"f16\"},{\"name\":\"v\",\"shape\":[2,4,333,64],\"dtype\":\"f16\"},"
        "{\"name\":\"m\",\"shape\":[2,1,1,333],\"dtype\":\"f16\"}],\"nodes\":["
        "{\"name\":\"q3\",\"op\":\"reshape\",\"inputs\":[\"q\"],\"outputs\":[\"q3\"],\"attrs\":{\"shape\":[8,77,64]}},"
        "{\"name\":\"k3\",\"op\":\"reshape\",\"inputs\":[\"k\"],\"outputs\":[\"k3\"],\"attrs\":{\"shape\":[8,333,64]}},"
        "{\"name\":\"v3\",\"op\":\"reshape\",\"inputs\":[\"v\"],\"outputs\":[\"v3\"],\"attrs\":{\"shape\":[8,333,64]}},"
        "{\"name\":\"kt\",\"op\":\"transpose\",\"inputs\":[\"k3\"],\"outputs\":[\"kt\"],\"attrs\":{\"perm\":[0,2,1]}},"
        "{\"name\":\"qk\",\"op\":\"matmul\",\"inputs\":[\"q3\",\"kt\"],\"outputs\":[\"s\"]},"
        "{\"name\":\"sc\",\"op\":\"scale\",\"inputs\":[\"s\"],\"outputs\":[\"s1\"],\"attrs\":{\"value\":0.125}},"
        "{\"name\":\"s4\",\"op\":\"reshape\",\"inputs\":[\"s1\"],\"outputs\":[\"s4\"],\"attrs\":{\"shape\":[2,4,77,333]}},"
        "{\"name\":\"mask\",\"op\":\"add\",\"inputs\":[\"s4\",\"m\"],\"outputs\":[\"s5\"]},"
        "{\"name\":\"softmax\",\"op\":\"softmax\",\"inputs\":[\"s5\"],\"outputs\":[\"pr\"]},"
        "{\"name\":\"p3\",\"op\":\"reshape\",\"inputs\":[\"pr\"],\"outputs\":[\"p3\"],\"attrs\":{\"shape\":[8,77,333]}},"
        "{\"name\":\"pv\",\"op\":\"matmul\",\"inputs\":[\"p3\",\"v3\"],\"outputs\":[\"o3\"]},"
        "{\"name\":\"o\",\"op\":\"reshape\",\"inputs\":[\"o3\"],\"outputs\":[\"o\"],\"attrs\":{\"shape\":[2,4,77,64]}}],"
        "\"outputs\":[\"o\"]}}";
    CHECK(plan_of(spelled, &rq, &p, &e) == 0, "%s %s", e.field, e.message);
    if (failures)
        return;
    CHECK(p.n_kernels == 1, "%d kernels: %s | %s", p.n_kernels, p.kernels[0].request, p.n_kernels > 1 ? p.kernels[1].request : "");
    if (p.n_kernels == 1) {
        const graph_kernel *k = &p.kernels[0];
        const tuner_op *op = k->op;
        CHECK(op->kind == TUNER_OP_ATTENTION && !op->attrs.attention.causal && op->attrs.attention.scale == 0.125 &&
                  op->n_inputs == 4 && op->inputs[0].shape[0] == 2 && op->inputs[0].shape[1] == 4 &&
                  op->inputs[1].shape[2] == 333 && op->inputs[3].shape[0] == 2 && op->inputs[3].shape[1] == 1 &&
                  op->inputs[3].shape[3] == 333,
              "%s", k->request);
        CHECK(kernel_of(&p, "qk") == k && kernel_of(&p, "softmax") == k && kernel_of(&p, "pv") == k, "nodes %d: %s %s", k->n_nodes, k->n_nodes ? p.node_names[k->nodes[0]] : "", k->n_nodes > 1 ? p.node_names[k->nodes[1]] : "");
        CHECK(strcmp(p.tensors[k->in[3]].name, "m") == 0 || p.tensors[k->in[3]].view_of >= 0);
    }
    graph_plan_free(&p);
    graph_request_free(&rq);

    /* The scores read twice (also an output): nothing is rewritten. */
    char *twice = malloc(strlen(spelled) + 16); /* room for the longer outputs list */
    if (twice)
        strcpy(twice, spelled);
    char *outs = twice ? strstr(twice, "\"outputs\":[\"o\"]}}") : NULL;
    CHECK(outs != NULL);
    if (outs) {
        memcpy(outs, "\"outputs\":[\"o\",\"pr\"]}}", strlen("\"outputs\":[\"o\",\"pr\"]}}") + 1);
        CHECK(plan_of(twice, &rq, &p, &e) == 0, "%s %s", e.field, e.message);
        if (!failures) {
            bool any = false;
            for (int k = 0; k < p.n_kernels; k++)
                any = any || p.kernels[k].op->kind == TUNER_OP_ATTENTION;
            CHECK(!any && p.n_kernels >= 3, "%d kernels", p.n_kernels);
            graph_plan_free(&p);
            graph_request_free(&rq);
        }
    }
    free(twice);

    /* PyTorch's math backend as the backend lowers it: q and the transposed k each scaled by
     * sqrt(scale), 4-D matmuls through 3-D views, the mask added, _safe_softmax (softmax, a
     * row max, lt -FLT_MAX, masked_fill 0): one attention kernel, scale the product. */
    const char *math =
        "{\"graph\":{\"inputs\":[{\"name\":\"q\",\"shape\":[2,4,77,64],\"dtype\":\"f16\"},"
        "{\"name\":\"k\",\"shape\":[2,4,333,64],\"dtype\":\"f16\"},{\"name\":\"v\",\"shape\":[2,4,333,64],\"dtype\":\"f16\"},"
        "{\"name\":\"m\",\"shape\":[2,1,1,333],\"dtype\":\"f16\"}],\"nodes\":["
        "{\"name\":\"qs\",\"op\":\"scale\",\"inputs\":[\"q\"],\"outputs\":[\"qs\"],\"attrs\":{\"value\":0.5}},"
        "{\"name\":\"kt\",\"op\":\"transpose\",\"inputs\":[\"k\"],\"outputs\":[\"kt\"],\"attrs\":{\"perm\":[0,1,3,2]}},"
        "{\"name\":\"ks\",\"op\":\"scale\",\"inputs\":[\"kt\"],\"outputs\":[\"ks\"],\"attrs\":{\"value\":0.25}},"
        "{\"name\":\"q3\",\"op\":\"reshape\",\"inputs\":[\"qs\"],\"outputs\":[\"q3\"],\"attrs\":{\"shape\":[8,77,64]}},"
        "{\"name\":\"k3\",\"op\":\"reshape\",\"inputs\":[\"ks\"],\"outputs\":[\"k3\"],\"attrs\":{\"shape\":[8,64,333]}},"
        "{\"name\":\"qk\",\"op\":\"matmul\",\"inputs\":[\"q3\",\"k3\"],\"outputs\":[\"s\"]},"
        "{\"name\":\"s4\",\"op\":\"reshape\",\"inputs\":[\"s\"],\"outputs\":[\"s4\"],\"attrs\":{\"shape\":[2,4,77,333]}},"
        "{\"name\":\"mask\",\"op\":\"add\",\"inputs\":[\"s4\",\"m\"],\"outputs\":[\"x\"]},"
        "{\"name\":\"softmax\",\"op\":\"softmax\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]},"
        "{\"name\":\"mx\",\"op\":\"reduce\",\"inputs\":[\"x\"],\"outputs\":[\"mx\"],\"attrs\":{\"kind\":\"max\",\"axis\":3,\"keepdim\":true}},"
        "{\"name\":\"dead\",\"op\":\"lt\",\"inputs\":[\"mx\"],\"outputs\":[\"dead\"],\"attrs\":{\"value\":-3.4028234663852886e38}},"
        "{\"name\":\"safe\",\"op\":\"masked_fill\",\"inputs\":[\"y\",\"dead\"],\"outputs\":[\"pr\"],\"attrs\":{\"value\":0}},"
        "{\"name\":\"p3\",\"op\":\"reshape\",\"inputs\":[\"pr\"],\"outputs\":[\"p3\"],\"attrs\":{\"shape\":[8,77,333]}},"
        "{\"name\":\"v3\",\"op\":\"reshape\",\"inputs\":[\"v\"],\"outputs\":[\"v3\"],\"attrs\":{\"shape\":[8,333,64]}},"
        "{\"name\":\"pv\",\"op\":\"matmul\",\"inputs\":[\"p3\",\"v3\"],\"outputs\":[\"o3\"]},"
        "{\"name\":\"o\",\"op\":\"reshape\",\"inputs\":[\"o3\"],\"outputs\":[\"o\"],\"attrs\":{\"shape\":[2,4,77,64]}}],"
        "\"outputs\":[\"o\"]}}";
    CHECK(plan_of(math, &rq, &p, &e) == 0, "%s %s", e.field, e.message);
    if (failures)
        return;
    CHECK(p.n_kernels == 1 && p.kernels[0].op->kind == TUNER_OP_ATTENTION && p.kernels[0].op->attrs.attention.scale == 0.125 &&
              p.kernels[0].op->n_inputs == 4 && p.kernels[0].op->inputs[1].shape[2] == 333 &&
              kernel_of(&p, "safe") == &p.kernels[0] && kernel_of(&p, "mx") == &p.kernels[0],
          "%d kernels: %s", p.n_kernels, p.n_kernels ? p.kernels[0].request : "");
    graph_plan_free(&p);
    graph_request_free(&rq);

    /* The same in f32 from f16 q, k, v (the math backend's upcasts), cast back after: the
     * attention reads the f16 tensors and writes the cast's result. */
    {
        char *up = malloc(strlen(math) + 1024);
        CHECK(up != NULL);
        if (up) {
            strcpy(up, math);
            char *at = strstr(up, "{\"name\":\"qs\"");
            const char *casts =
                "{\"name\":\"qf\",\"op\":\"cast\",\"inputs\":[\"q\"],\"outputs\":[\"qf\"],\"attrs\":{\"dtype\":\"f32\"}},"
                "{\"name\":\"kf\",\"op\":\"cast\",\"inputs\":[\"k\"],\"outputs\":[\"kf\"],\"attrs\":{\"dtype\":\"f32\"}},"
                "{\"name\":\"vf\",\"op\":\"cast\",\"inputs\":[\"v\"],\"outputs\":[\"vf\"],\"attrs\":{\"dtype\":\"f32\"}},"
                "{\"name\":\"mf\",\"op\":\"cast\",\"inputs\":[\"m\"],\"outputs\":[\"mf\"],\"attrs\":{\"dtype\":\"f32\"}},";
            memmove(at + strlen(casts), at, strlen(at) + 1);
            memcpy(at, casts, strlen(casts));
            /* The f32 values in place of the inputs, and a cast back at the end. */
            const char *from[] = {"\"inputs\":[\"q\"],\"outputs\":[\"qs\"]", "\"inputs\":[\"k\"],\"outputs\":[\"kt\"]",
                                  "\"inputs\":[\"v\"],\"outputs\":[\"v3\"]", "\"inputs\":[\"s4\",\"m\"]",
                                  "\"outputs\":[\"o\"],\"attrs\":{\"shape\":[2,4,77,64]}}],"},
                       *to[] = {"\"inputs\":[\"qf\"],\"outputs\":[\"qs\"]", "\"inputs\":[\"kf\"],\"outputs\":[\"kt\"]",
                                "\"inputs\":[\"vf\"],\"outputs\":[\"v3\"]", "\"inputs\":[\"s4\",\"mf\"]",
                                "\"outputs\":[\"o32\"],\"attrs\":{\"shape\":[2,4,77,64]}},"
                                "{\"name\":\"back\",\"op\":\"cast\",\"inputs\":[\"o32\"],\"outputs\":[\"o\"],\"attrs\":{\"dtype\":\"f16\"}}],"};
            for (int i = 0; i < 5; i++) {
                char *f = strstr(up, from[i]);
                CHECK(f != NULL, "edit %d", i);
                if (!f)
                    continue;
                memmove(f + strlen(to[i]), f + strlen(from[i]), strlen(f + strlen(from[i])) + 1);
                memcpy(f, to[i], strlen(to[i]));
            }
            CHECK(plan_of(up, &rq, &p, &e) == 0, "%s %s", e.field, e.message);
            if (!failures) {
                const graph_kernel *att = NULL;
                for (int k = 0; k < p.n_kernels; k++)
                    if (p.kernels[k].op->kind == TUNER_OP_ATTENTION)
                        att = &p.kernels[k];
                CHECK(att && att->op->inputs[0].dtype == TUNER_F16 && att->op->output.dtype == TUNER_F16 &&
                          att->op->attrs.attention.scale == 0.125 && kernel_of(&p, "back") == att,
                      "%d kernels: %s", p.n_kernels, att ? att->request : "no attention");
                graph_plan_free(&p);
                graph_request_free(&rq);
            }
            free(up);
        }
    }

    /* Between the permutes of a QKV projection ([B,S,H,D] -> [B,H,S,D] and back): the bshd
     * layout, the four transposes gone; one of them read twice keeps everything as it was. */
    const char *perm =
        "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[2,77,768],\"dtype\":\"f16\"},"
        "{\"name\":\"y\",\"shape\":[2,77,768],\"dtype\":\"f16\"},{\"name\":\"z\",\"shape\":[2,77,768],\"dtype\":\"f16\"}],"
        "\"nodes\":["
        "{\"name\":\"q4\",\"op\":\"reshape\",\"inputs\":[\"x\"],\"outputs\":[\"q4\"],\"attrs\":{\"shape\":[2,77,12,64]}},"
        "{\"name\":\"k4\",\"op\":\"reshape\",\"inputs\":[\"y\"],\"outputs\":[\"k4\"],\"attrs\":{\"shape\":[2,77,12,64]}},"
        "{\"name\":\"v4\",\"op\":\"reshape\",\"inputs\":[\"z\"],\"outputs\":[\"v4\"],\"attrs\":{\"shape\":[2,77,12,64]}},"
        "{\"name\":\"qt\",\"op\":\"transpose\",\"inputs\":[\"q4\"],\"outputs\":[\"qt\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
        "{\"name\":\"kt\",\"op\":\"transpose\",\"inputs\":[\"k4\"],\"outputs\":[\"kt\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
        "{\"name\":\"vt\",\"op\":\"transpose\",\"inputs\":[\"v4\"],\"outputs\":[\"vt\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
        "{\"name\":\"att\",\"op\":\"attention\",\"inputs\":[\"qt\",\"kt\",\"vt\"],\"outputs\":[\"o\"]},"
        "{\"name\":\"ot\",\"op\":\"transpose\",\"inputs\":[\"o\"],\"outputs\":[\"ot\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
        "{\"name\":\"out\",\"op\":\"reshape\",\"inputs\":[\"ot\"],\"outputs\":[\"out\"],\"attrs\":{\"shape\":[2,77,768]}}],"
        "\"outputs\":[\"out\"]}}";
    CHECK(plan_of(perm, &rq, &p, &e) == 0, "%s %s", e.field, e.message);
    if (failures)
        return;
    CHECK(p.n_kernels == 1 && p.kernels[0].op->kind == TUNER_OP_ATTENTION && p.kernels[0].op->attrs.attention.bshd &&
              p.kernels[0].op->inputs[0].shape[1] == 77 && p.kernels[0].op->inputs[0].shape[2] == 12,
          "%d kernels: %s", p.n_kernels, p.n_kernels ? p.kernels[0].request : "");
    CHECK(strcmp(p.tensors[p.kernels[0].in[0]].name, "q4") == 0, "q read from %s", p.tensors[p.kernels[0].in[0]].name);
    graph_plan_free(&p);
    graph_request_free(&rq);
    /* q reaches the attention through a 3-D view and back (as the attention rewrite of BERT's
     * math-backend form leaves it): the same. */
    {
        char *viewed = NULL;
        const char *at = strstr(perm, "{\"name\":\"att\"");
        CHECK(at && asprintf(&viewed, "%.*s%s%s", (int)(at - perm), perm,
                             "{\"name\":\"q3\",\"op\":\"reshape\",\"inputs\":[\"qt\"],\"outputs\":[\"q3\"],"
                             "\"attrs\":{\"shape\":[24,77,64]}},"
                             "{\"name\":\"q4b\",\"op\":\"reshape\",\"inputs\":[\"q3\"],\"outputs\":[\"q4b\"],"
                             "\"attrs\":{\"shape\":[2,12,77,64]}},"
                             "{\"name\":\"att\",\"op\":\"attention\",\"inputs\":[\"q4b\",",
                             at + strlen("{\"name\":\"att\",\"op\":\"attention\",\"inputs\":[\"qt\",")) > 0);
        CHECK(viewed && plan_of(viewed, &rq, &p, &e) == 0, "%s %s", e.field, e.message);
        free(viewed);
        if (failures)
            return;
        CHECK(p.n_kernels == 1 && p.kernels[0].op->kind == TUNER_OP_ATTENTION && p.kernels[0].op->attrs.attention.bshd &&
                  strcmp(p.tensors[p.kernels[0].in[0]].name, "q4") == 0,
              "through views: %d kernels: %s", p.n_kernels, p.n_kernels ? p.kernels[0].request : "");
        graph_plan_free(&p);
        graph_request_free(&rq);
    }
    char *twice2 = malloc(strlen(perm) + 16);
    if (twice2) {
        strcpy(twice2, perm);
        char *o2 = strstr(twice2, "\"outputs\":[\"out\"]}}");
        if (o2)
            strcpy(o2, "\"outputs\":[\"out\",\"kt\"]}}");
        CHECK(plan_of(twice2, &rq, &p, &e) == 0, "%s %s", e.field, e.message);
        if (!failures) {
            bool bshd = false;
            for (int k = 0; k < p.n_kernels; k++)
                bshd = bshd || (p.kernels[k].op->kind == TUNER_OP_ATTENTION && p.kernels[k].op->attrs.attention.bshd);
            CHECK(!bshd && p.n_kernels == 5, "%d kernels", p.n_kernels);
            graph_plan_free(&p);
            graph_request_free(&rq);
        }
        free(twice2);
    }

    /* Rank-3 scores and a [S, Skv] mask, no scale: the mask is right-aligned, scale 1. */
    const char *plain =
        "{\"graph\":{\"inputs\":[{\"name\":\"q\",\"shape\":[6,16,96],\"dtype\":\"f16\"},"
        "{\"name\":\"k\",\"shape\":[6,16,96],\"dtype\":\"f16\"},{\"name\":\"v\",\"shape\":[6,16,96],\"dtype\":\"f16\"},"
        "{\"name\":\"m\",\"shape\":[16,16],\"dtype\":\"f16\"}],\"nodes\":["
        "{\"name\":\"kt\",\"op\":\"transpose\",\"inputs\":[\"k\"],\"outputs\":[\"kt\"],\"attrs\":{\"perm\":[0,2,1]}},"
        "{\"name\":\"qk\",\"op\":\"matmul\",\"inputs\":[\"q\",\"kt\"],\"outputs\":[\"s\"]},"
        "{\"name\":\"mask\",\"op\":\"add\",\"inputs\":[\"m\",\"s\"],\"outputs\":[\"s1\"]},"
        "{\"name\":\"softmax\",\"op\":\"softmax\",\"inputs\":[\"s1\"],\"outputs\":[\"pr\"]},"
        "{\"name\":\"pv\",\"op\":\"matmul\",\"inputs\":[\"pr\",\"v\"],\"outputs\":[\"o\"]}],\"outputs\":[\"o\"]}}";
    CHECK(plan_of(plain, &rq, &p, &e) == 0, "%s %s", e.field, e.message);
    if (failures)
        return;
    CHECK(p.n_kernels == 1 && p.kernels[0].op->kind == TUNER_OP_ATTENTION && p.kernels[0].op->attrs.attention.scale == 1.0 &&
              p.kernels[0].op->inputs[3].dtype == TUNER_F16 && p.kernels[0].op->inputs[0].shape[0] == 6,
          "%d kernels: %s", p.n_kernels, p.n_kernels ? p.kernels[0].request : "");
    graph_plan_free(&p);
    graph_request_free(&rq);
}

/* A GPT-2 block's attention: c_attn (matmul + bias) [B,S,3*H*D], split into three slices of the
 * last axis, each viewed as [B,S,H,D] and permuted, attention with a causal and a padding mask,
 * permuted back: the attention reads c_attn's output itself in the bshd_packed layout - two
 * kernels, no copy. GQA's split_with_sizes the same (kv_heads 2). A slice also read elsewhere,
 * slices out of order, or a gap in the columns keep the copies. */
#define GPT2_ATTN(hq, hkv, width, q0, q1, k0, k1, v0, v1, ow, outputs)                                                     \
    "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[2,77,768],\"dtype\":\"f16\"},"                                 \
    "{\"name\":\"am\",\"shape\":[2,1,1,77],\"dtype\":\"f16\"}],"                                                       \
    "\"weights\":[{\"name\":\"w\",\"shape\":[768," #width "],\"dtype\":\"f16\"},"                                     \
    "{\"name\":\"b\",\"shape\":[" #width "],\"dtype\":\"f16\"}],\"nodes\":["                                           \
    "{\"name\":\"c_attn\",\"op\":\"matmul\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"m\"]},"                         \
    "{\"name\":\"bias\",\"op\":\"add\",\"inputs\":[\"m\",\"b\"],\"outputs\":[\"qkv\"]},"                            \
    "{\"name\":\"sq\",\"op\":\"slice\",\"inputs\":[\"qkv\"],\"outputs\":[\"q\"],\"attrs\":{\"starts\":[" #q0        \
    "],\"ends\":[" #q1 "],\"axes\":[2]}},"                                                                             \
    "{\"name\":\"sk\",\"op\":\"slice\",\"inputs\":[\"qkv\"],\"outputs\":[\"k\"],\"attrs\":{\"starts\":[" #k0        \
    "],\"ends\":[" #k1 "],\"axes\":[2]}},"                                                                             \
    "{\"name\":\"sv\",\"op\":\"slice\",\"inputs\":[\"qkv\"],\"outputs\":[\"v\"],\"attrs\":{\"starts\":[" #v0        \
    "],\"ends\":[" #v1 "],\"axes\":[-1]}},"                                                                            \
    "{\"op\":\"reshape\",\"inputs\":[\"q\"],\"outputs\":[\"q4\"],\"attrs\":{\"shape\":[2,77," #hq ",64]}},"          \
    "{\"op\":\"reshape\",\"inputs\":[\"k\"],\"outputs\":[\"k4\"],\"attrs\":{\"shape\":[2,77," #hkv ",64]}},"         \
    "{\"op\":\"reshape\",\"inputs\":[\"v\"],\"outputs\":[\"v4\"],\"attrs\":{\"shape\":[2,77," #hkv ",64]}},"         \
    "{\"op\":\"transpose\",\"inputs\":[\"q4\"],\"outputs\":[\"qh\"],\"attrs\":{\"perm\":[0,2,1,3]}},"                 \
    "{\"op\":\"transpose\",\"inputs\":[\"k4\"],\"outputs\":[\"kh\"],\"attrs\":{\"perm\":[0,2,1,3]}},"                 \
    "{\"op\":\"transpose\",\"inputs\":[\"v4\"],\"outputs\":[\"vh\"],\"attrs\":{\"perm\":[0,2,1,3]}},"                 \
    "{\"name\":\"att\",\"op\":\"attention\",\"inputs\":[\"qh\",\"kh\",\"vh\",\"am\"],\"outputs\":[\"o\"],"         \
    "\"attrs\":{\"causal\":true}},"                                                                                  \
    "{\"op\":\"transpose\",\"inputs\":[\"o\"],\"outputs\":[\"ot\"],\"attrs\":{\"perm\":[0,2,1,3]}},"                   \
    "{\"op\":\"reshape\",\"inputs\":[\"ot\"],\"outputs\":[\"out\"],\"attrs\":{\"shape\":[2,77," #ow "]}}],"         \
    "\"outputs\":" outputs "}}"

static int count_kind(const graph_plan *p, tuner_op_kind kind)
{
    int n = 0;
    for (int k = 0; k < p->n_kernels; k++)
        n += p->kernels[k].op->kind == kind;
    return n;
}

static void test_attention_packed(void)
{
    graph_request rq;
    graph_plan p;
    proto_error e;
    static const struct {
        const char *what, *body;
        bool packed;
        int kv_heads, kernels;
    } cases[] = {
        {"gpt2", GPT2_ATTN(12, 12, 2304, 0, 768, 768, 1536, 1536, 2304, 768, "[\"out\"]"), true, 12, 2},
        {"gqa 8/2", GPT2_ATTN(8, 2, 768, 0, 512, 512, 640, 640, 768, 512, "[\"out\"]"), true, 2, 2},
        /* k's slice is also an output: three slices stay (the bshd layout still applies) */
        {"k also an output", GPT2_ATTN(12, 12, 2304, 0, 768, 768, 1536, 1536, 2304, 768, "[\"out\",\"k\"]"), false, 0, 5},
        /* k and v swapped in the columns: not q, k, v in order */
        {"k after v", GPT2_ATTN(12, 12, 2304, 0, 768, 1536, 2304, 768, 1536, 768, "[\"out\"]"), false, 0, 5},
        /* columns 2304..2367 read by none: not the whole axis */
        {"a gap", GPT2_ATTN(12, 12, 2368, 0, 768, 768, 1536, 1536, 2304, 768, "[\"out\"]"), false, 0, 5},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        CHECK(plan_of(cases[i].body, &rq, &p, &e) == 0, "%s: %s %s", cases[i].what, e.field, e.message);
        if (failures)
            return;
        const graph_kernel *att = kernel_of(&p, "att");
        CHECK(att && att->op->kind == TUNER_OP_ATTENTION && att->op->attrs.attention.bshd &&
                  att->op->attrs.attention.packed == cases[i].packed && p.n_kernels == cases[i].kernels,
              "%s: %d kernels, attention %s", cases[i].what, p.n_kernels, att ? att->request : "none");
        if (att && cases[i].packed) {
            const tuner_op *op = att->op;
            const int64_t h3 = op->inputs[0].shape[2];
            CHECK(op->attrs.attention.kv_heads == cases[i].kv_heads && op->n_inputs == 2 && op->n_anchor_inputs == 2 &&
                      op->inputs[0].rank == 4 && op->inputs[0].shape[0] == 2 && op->inputs[0].shape[1] == 77 &&
                      h3 == 12 * (cases[i].kv_heads == 2 ? 1 : 3) && op->inputs[1].shape[3] == 77 &&
                      op->attrs.attention.causal && strstr(att->request, "\"layout\":\"bshd_packed\""),
                  "%s: %s", cases[i].what, att->request);
            /* no copy kernel: the matmul (with its bias) and the attention, which reads the
             * matmul's result (a view of it) */
            const graph_kernel *mm = kernel_of(&p, "c_attn");
            CHECK(count_kind(&p, TUNER_OP_COPY) == 0 && mm && kernel_of(&p, "bias") == mm && kernel_of(&p, "sk") == att,
                  "%s: copies", cases[i].what);
            int t = att->in[0];
            while (t >= 0 && p.tensors[t].view_of >= 0)
                t = p.tensors[t].view_of;
            CHECK(mm && t == mm->out, "%s: qkv is %s", cases[i].what, t >= 0 ? p.tensors[t].name : "?");
            /* the projection's result lives until the attention has read it */
            uint64_t no_ws[8] = {0};
            CHECK(graph_plan_place(&p, no_ws) == 0, "%s: place", cases[i].what);
            int o = att->out;
            while (o >= 0 && p.tensors[o].view_of >= 0)
                o = p.tensors[o].view_of;
            int att_step = -1;
            for (int st = 0; st < p.n_kernels; st++)
                if (p.order[st] == (int)(att - p.kernels))
                    att_step = st;
            if (t >= 0 && o >= 0) {
                const graph_plan_tensor *xt = &p.tensors[t], *ot = &p.tensors[o];
                CHECK(xt->region == GRAPH_REGION_ARENA && att_step >= 0 && xt->last == att_step &&
                          (ot->region != GRAPH_REGION_ARENA || xt->offset + xt->bytes <= ot->offset ||
                           ot->offset + ot->bytes <= xt->offset),
                      "%s: qkv [%d, %d] at %llu, the attention's result [%d, %d] at %llu (region %d)", cases[i].what,
                      xt->first, xt->last, (unsigned long long)xt->offset, ot->first, ot->last,
                      (unsigned long long)ot->offset, ot->region);
            }
        } else {
            CHECK(count_kind(&p, TUNER_OP_COPY) == 3, "%s: %d copies", cases[i].what, count_kind(&p, TUNER_OP_COPY));
        }
        graph_plan_free(&p);
        graph_request_free(&rq);
    }
    /* GPT-2's eager attention, spelled out over [B*H, S, D] views (as PyTorch decomposes it):
     * the attention rewrite, the bshd fold and this one compose - c_attn and one attention. */
    const char *eager =
        "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[2,77,768],\"dtype\":\"f16\"},"
        "{\"name\":\"am\",\"shape\":[2,1,1,77],\"dtype\":\"f16\"}],"
        "\"weights\":[{\"name\":\"w\",\"shape\":[768,2304],\"dtype\":\"f16\"},"
        "{\"name\":\"b\",\"shape\":[2304],\"dtype\":\"f16\"}],\"nodes\":["
        "{\"name\":\"x2\",\"op\":\"reshape\",\"inputs\":[\"x\"],\"outputs\":[\"x2\"],\"attrs\":{\"shape\":[154,768]}},"
        "{\"name\":\"c_attn\",\"op\":\"matmul\",\"inputs\":[\"x2\",\"w\"],\"outputs\":[\"m\"]},"
        "{\"name\":\"bias\",\"op\":\"add\",\"inputs\":[\"m\",\"b\"],\"outputs\":[\"m2\"]},"
        "{\"name\":\"m3\",\"op\":\"reshape\",\"inputs\":[\"m2\"],\"outputs\":[\"qkv\"],\"attrs\":{\"shape\":[2,77,2304]}},"
        "{\"name\":\"sq\",\"op\":\"slice\",\"inputs\":[\"qkv\"],\"outputs\":[\"q\"],\"attrs\":{\"starts\":[0],\"ends\":[768],\"axes\":[2],\"steps\":[1]}},"
        "{\"name\":\"sk\",\"op\":\"slice\",\"inputs\":[\"qkv\"],\"outputs\":[\"k\"],\"attrs\":{\"starts\":[768],\"ends\":[1536],\"axes\":[2],\"steps\":[1]}},"
        "{\"name\":\"sv\",\"op\":\"slice\",\"inputs\":[\"qkv\"],\"outputs\":[\"v\"],\"attrs\":{\"starts\":[1536],\"ends\":[2304],\"axes\":[2],\"steps\":[1]}},"
        "{\"op\":\"reshape\",\"inputs\":[\"q\"],\"outputs\":[\"q4\"],\"attrs\":{\"shape\":[2,77,12,64]}},"
        "{\"op\":\"reshape\",\"inputs\":[\"k\"],\"outputs\":[\"k4\"],\"attrs\":{\"shape\":[2,77,12,64]}},"
        "{\"op\":\"reshape\",\"inputs\":[\"v\"],\"outputs\":[\"v4\"],\"attrs\":{\"shape\":[2,77,12,64]}},"
        "{\"op\":\"transpose\",\"inputs\":[\"q4\"],\"outputs\":[\"qh\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
        "{\"op\":\"transpose\",\"inputs\":[\"k4\"],\"outputs\":[\"kh\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
        "{\"op\":\"transpose\",\"inputs\":[\"v4\"],\"outputs\":[\"vh\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
        "{\"op\":\"reshape\",\"inputs\":[\"qh\"],\"outputs\":[\"q3\"],\"attrs\":{\"shape\":[24,77,64]}},"
        "{\"op\":\"reshape\",\"inputs\":[\"kh\"],\"outputs\":[\"k3\"],\"attrs\":{\"shape\":[24,77,64]}},"
        "{\"op\":\"reshape\",\"inputs\":[\"vh\"],\"outputs\":[\"v3\"],\"attrs\":{\"shape\":[24,77,64]}},"
        "{\"name\":\"kt\",\"op\":\"transpose\",\"inputs\":[\"k3\"],\"outputs\":[\"kt\"],\"attrs\":{\"perm\":[0,2,1]}},"
        "{\"name\":\"qk\",\"op\":\"matmul\",\"inputs\":[\"q3\",\"kt\"],\"outputs\":[\"s\"]},"
        "{\"name\":\"sc\",\"op\":\"scale\",\"inputs\":[\"s\"],\"outputs\":[\"s1\"],\"attrs\":{\"value\":0.125}},"
        "{\"name\":\"s4\",\"op\":\"reshape\",\"inputs\":[\"s1\"],\"outputs\":[\"s4\"],\"attrs\":{\"shape\":[2,12,77,77]}},"
        "{\"name\":\"mask\",\"op\":\"add\",\"inputs\":[\"s4\",\"am\"],\"outputs\":[\"s5\"]},"
        "{\"name\":\"softmax\",\"op\":\"softmax\",\"inputs\":[\"s5\"],\"outputs\":[\"pr\"]},"
        "{\"name\":\"p3\",\"op\":\"reshape\",\"inputs\":[\"pr\"],\"outputs\":[\"p3\"],\"attrs\":{\"shape\":[24,77,77]}},"
        "{\"name\":\"pv\",\"op\":\"matmul\",\"inputs\":[\"p3\",\"v3\"],\"outputs\":[\"o3\"]},"
        "{\"op\":\"reshape\",\"inputs\":[\"o3\"],\"outputs\":[\"o4\"],\"attrs\":{\"shape\":[2,12,77,64]}},"
        "{\"op\":\"transpose\",\"inputs\":[\"o4\"],\"outputs\":[\"ot\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
        "{\"op\":\"reshape\",\"inputs\":[\"ot\"],\"outputs\":[\"out\"],\"attrs\":{\"shape\":[2,77,768]}}],"
        "\"outputs\":[\"out\"]}}";
    CHECK(plan_of(eager, &rq, &p, &e) == 0, "eager: %s %s", e.field, e.message);
    if (failures)
        return;
    {
        const graph_kernel *att = kernel_of(&p, "softmax");
        CHECK(p.n_kernels == 2 && count_kind(&p, TUNER_OP_COPY) == 0 && att && att->op->kind == TUNER_OP_ATTENTION &&
                  att->op->attrs.attention.packed && att->op->attrs.attention.kv_heads == 12 &&
                  att->op->attrs.attention.scale == 0.125 && att->op->n_inputs == 2 &&
                  att->op->inputs[0].shape[2] == 36 && kernel_of(&p, "sv") == att,
              "eager: %d kernels: %s", p.n_kernels, att ? att->request : "none");
    }
    graph_plan_free(&p);
    graph_request_free(&rq);

    /* The layout as a node's attribute: one qkv input, kv_heads, the mask second; the node's
     * fields are the request's (kv_heads that leave no query head refused at the node). */
#define PACKED_NODE(kvh)                                                                                   \
        "{\"graph\":{\"inputs\":[{\"name\":\"qkv\",\"shape\":[2,77,36,64],\"dtype\":\"f16\"},"                                   \
        "{\"name\":\"am\",\"shape\":[2,1,1,77],\"dtype\":\"f16\"}],\"nodes\":["                                  \
        "{\"name\":\"att\",\"op\":\"attention\",\"inputs\":[\"qkv\",\"am\"],\"outputs\":[\"o\"],"                   \
        "\"attrs\":{\"layout\":\"bshd_packed\",\"kv_heads\":" #kvh "}},"                                               \
        "{\"name\":\"act\",\"op\":\"relu\",\"inputs\":[\"o\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}}"
    CHECK(plan_of(PACKED_NODE(4), &rq, &p, &e) == 0, "node: %s %s", e.field, e.message);
    if (failures)
        return;
    CHECK(p.n_kernels == 1 && p.kernels[0].op->attrs.attention.packed && p.kernels[0].op->attrs.attention.kv_heads == 4 &&
              p.kernels[0].op->output.shape[2] == 28 && p.kernels[0].op->epilogue.n == 1,
          "node: %d kernels: %s", p.n_kernels, p.n_kernels ? p.kernels[0].request : "");
    graph_plan_free(&p);
    graph_request_free(&rq);
    CHECK(plan_of(PACKED_NODE(18), &rq, &p, &e) < 0 && strstr(e.field, "nodes[0].attrs.kv_heads"), "node kv_heads 18: %s", e.field);
}


/* ---- named dimensions -------------------------------------------------------------------------- */

/* A transformer MLP block with layernorm over x [XSHAPE], dims DIMS (a printf format: %s, %s). */
#define MLP_NAMED \
    "{%s\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":%s,\"dtype\":\"f16\"}],"                                          \
    "\"weights\":[{\"name\":\"g\",\"shape\":[768],\"dtype\":\"f16\"},{\"name\":\"be\",\"shape\":[768],\"dtype\":\"f16\"}," \
    "{\"name\":\"w1\",\"shape\":[768,3072],\"dtype\":\"f16\"},{\"name\":\"b1\",\"shape\":[3072],\"dtype\":\"f16\"},"       \
    "{\"name\":\"w2\",\"shape\":[3072,768],\"dtype\":\"f16\"},{\"name\":\"b2\",\"shape\":[768],\"dtype\":\"f16\"}],"       \
    "\"nodes\":["                                                                                                          \
    "{\"name\":\"ln\",\"op\":\"layernorm\",\"inputs\":[\"x\",\"g\",\"be\"],\"outputs\":[\"h\"]},"                          \
    "{\"name\":\"fc1\",\"op\":\"matmul\",\"inputs\":[\"h\",\"w1\"],\"outputs\":[\"u\"]},"                                  \
    "{\"name\":\"bias1\",\"op\":\"add\",\"inputs\":[\"u\",\"b1\"],\"outputs\":[\"u1\"]},"                                  \
    "{\"name\":\"act\",\"op\":\"gelu\",\"inputs\":[\"u1\"],\"outputs\":[\"a\"]},"                                          \
    "{\"name\":\"fc2\",\"op\":\"matmul\",\"inputs\":[\"a\",\"w2\"],\"outputs\":[\"v\"]},"                                  \
    "{\"name\":\"bias2\",\"op\":\"add\",\"inputs\":[\"v\",\"b2\"],\"outputs\":[\"v1\"]},"                                  \
    "{\"name\":\"res\",\"op\":\"add\",\"inputs\":[\"v1\",\"x\"],\"outputs\":[\"y\"]},"                                     \
    "{\"name\":\"flat\",\"op\":\"reshape\",\"inputs\":[\"y\"],\"outputs\":[\"yf\"],\"attrs\":{\"shape\":[-1,768]}},"       \
    "{\"name\":\"sm\",\"op\":\"softmax\",\"inputs\":[\"yf\"],\"outputs\":[\"p\"]}],"                                       \
    "\"outputs\":[\"p\",\"y\"]}}"

#define DIMS_BS "\"dims\":{\"s\":{\"min\":1,\"max\":512,\"hints\":[128]},\"b\":{\"min\":1,\"max\":8}},"

static char *mlp_named(const char *dims, const char *xshape)
{
    static char buf[4096];
    snprintf(buf, sizeof(buf), MLP_NAMED, dims, xshape);
    return buf;
}

/* The plan's JSON with no kernel sets (workspaces 0). */
static char *render_plain(graph_request *rq, graph_plan *p)
{
    uint64_t *ws = calloc((size_t)p->n_kernels + 1, sizeof(uint64_t));
    const cJSON **sets = calloc((size_t)p->n_kernels + 1, sizeof(*sets));
    char *out = NULL;
    if (ws && sets && graph_plan_place(p, ws) == 0)
        graph_plan_render(rq, p, (const cJSON *const *)sets, "k", &out);
    free(ws);
    free(sets);
    return out;
}

static void test_dims_plan(void)
{
    graph_request rq;
    graph_plan p;
    proto_error e;
    int r = plan_of(mlp_named(DIMS_BS, "[\"b\",\"s\",768]"), &rq, &p, &e);
    CHECK(r == 0, "named MLP refused: %s %s", e.field, e.message);
    if (r)
        return;
    /* The dims sorted by name, the input's axes named, the values carrying the names. */
    CHECK(rq.g.n_dims == 2 && strcmp(rq.g.dims[0].name, "b") == 0 && strcmp(rq.g.dims[1].name, "s") == 0,
          "dims not sorted");
    CHECK(rq.g.dyn.n_hints[1] == 1 && rq.g.dyn.hints[1][0] == 128, "hints lost");
    const graph_tensor *x = &rq.g.tensors[0];
    CHECK(x->t.sym[0] == 1 && x->t.sym[1] == 2 && x->t.sym[2] == 0 && x->t.shape[0] == 8 && x->t.shape[1] == 512,
          "x's names or max sizes wrong");
    /* ln; fc1+bias+gelu; fc2+bias+residual; softmax over the reshaped [b*s, 768] */
    CHECK(forward_steps(&p) == 4, "%d steps, want 4", forward_steps(&p));
    for (int s = 0; s < forward_steps(&p); s++) {
        const graph_kernel *k = step(&p, s);
        CHECK(strstr(k->request, "\"b*s\"") && strstr(k->request, "\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":"
                                                                  "{\"min\":1,\"max\":512,\"hints\":[128]}}"),
              "step %d's request: %s", s, k->request);
        /* The kernel's op is its request's: its own dims, axis 0 named b*s (both bits). */
        CHECK(k->op->n_dims == 2 && k->op->inputs[0].sym[0] == 3 && k->op->inputs[0].rank == 2 && k->dyn &&
                  k->dyn->n_hints[1] == 1,
              "step %d's op is not the merged named one", s);
    }
    CHECK(step(&p, 1)->op->kind == TUNER_OP_MATMUL && step(&p, 1)->op->epilogue.n == 2, "fc1 fused with bias+gelu");
    CHECK(step(&p, 2)->op->epilogue.n == 2, "fc2 fused with bias+residual");
    /* Outputs: y keeps [b, s, 768], the reshape's -1 became b*s. */
    for (int o = 0; o < rq.g.n_outputs; o++) {
        const graph_tensor *t = &rq.g.tensors[rq.g.outputs[o]];
        if (strcmp(t->name, "p") == 0)
            CHECK(t->t.rank == 2 && t->t.sym[0] == 3 && t->t.shape[0] == 4096, "p is not [b*s, 768]");
        else
            CHECK(t->t.rank == 3 && t->t.sym[0] == 1 && t->t.sym[1] == 2, "y is not [b, s, 768]");
    }
    char *json = render_plain(&rq, &p);
    CHECK(json && strstr(json, "\"tune\":\"model\",\"dims\":{\"b\":{\"min\":1,\"max\":8,\"multiple_of\":1},\"s\":"
                                "{\"min\":1,\"max\":512,\"multiple_of\":1}},\"inputs\":[{\"name\":\"x\",\"shape\":"
                                "[\"b\",\"s\",768]"),
          "plan's dims or named input: %.400s", json ? json : "(null)");
    CHECK(json && strstr(json, "{\"name\":\"a\",\"region\":\"arena\"") && strstr(json, "\"shape\":[\"b\",\"s\",3072]"),
          "buffer a not named");
    /* One arena at max: the same as the static graph at b=8, s=512. */
    graph_request rs;
    graph_plan ps;
    r = plan_of(mlp_named("", "[8,512,768]"), &rs, &ps, &e);
    CHECK(r == 0, "static MLP refused: %s", e.message);
    if (r == 0) {
        char *sj = render_plain(&rs, &ps);
        CHECK(ps.arena_bytes == p.arena_bytes && p.arena_bytes >= 8ull * 512 * 3072 * 2,
              "arena %llu, static at max %llu", (unsigned long long)p.arena_bytes, (unsigned long long)ps.arena_bytes);
        CHECK(sj && !strstr(sj, "\"dims\"") && !strstr(sj, "b*s"), "a static plan names something");
        free(sj);
        graph_plan_free(&ps);
        graph_request_free(&rs);
    }
    free(json);
    graph_plan_free(&p);
    graph_request_free(&rq);

    /* Names on every axis of an input; a product on the input itself. */
    r = plan_of(mlp_named("\"dims\":{\"t\":{\"min\":1,\"max\":4096}},", "[\"t\",768]"), &rq, &p, &e);
    CHECK(r == 0, "[t, 768] refused: %s", e.message);
    if (r == 0) {
        CHECK(strstr(step(&p, 1)->request, "[\"t\",768]") != NULL, "no merge needed: %s", step(&p, 1)->request);
        graph_plan_free(&p);
        graph_request_free(&rq);
    }
    r = plan_of(mlp_named(DIMS_BS, "[\"b*s\",768]"), &rq, &p, &e);
    CHECK(r == 0, "[b*s, 768] refused: %s", e.message);
    if (r == 0) {
        graph_plan_free(&p);
        graph_request_free(&rq);
    }
}

/* Shape inference on names, node by node (reshape, transpose, broadcasting). */
static void test_dims_inference(void)
{
    graph_request rq;
    proto_error e;
    const char *body =
        "{\"dims\":{\"b\":{\"min\":1,\"max\":4},\"s\":{\"min\":2,\"max\":64,\"multiple_of\":2}},\"graph\":{"
        "\"inputs\":[{\"name\":\"x\",\"shape\":[\"b\",\"s\",12,64],\"dtype\":\"f32\"},"
        "{\"name\":\"m\",\"shape\":[\"b\",1,1,64],\"dtype\":\"f32\"}],\"nodes\":["
        "{\"op\":\"reshape\",\"inputs\":[\"x\"],\"outputs\":[\"r1\"],\"attrs\":{\"shape\":[-1,768]}},"
        "{\"op\":\"reshape\",\"inputs\":[\"r1\"],\"outputs\":[\"r2\"],\"attrs\":{\"shape\":[\"b\",\"s\",-1]}},"
        "{\"op\":\"reshape\",\"inputs\":[\"r2\"],\"outputs\":[\"r3\"],\"attrs\":{\"shape\":[\"s\",\"b\",768]}},"
        "{\"op\":\"transpose\",\"inputs\":[\"x\"],\"outputs\":[\"t1\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
        "{\"op\":\"mul\",\"inputs\":[\"x\",\"m\"],\"outputs\":[\"y\"]},"
        "{\"op\":\"reduce\",\"inputs\":[\"x\"],\"outputs\":[\"red\"],\"attrs\":{\"kind\":\"sum\",\"axis\":-1}}],"
        "\"outputs\":[\"r3\",\"t1\",\"y\",\"red\"]}}";
    int r = graph_request_parse(body, strlen(body), &rq, &e);
    CHECK(r == 0, "refused: %s %s", e.field, e.message);
    if (r)
        return;
    const graph *g = &rq.g;
    char buf[64];
    for (int t = 0; t < g->n_tensors; t++) {
        const tuner_tensor *tt = &g->tensors[t].t;
        const char *n = g->tensors[t].name;
        if (strcmp(n, "r1") == 0)
            CHECK(tt->rank == 2 && tt->sym[0] == 3 && tt->shape[0] == 256 && tt->shape[1] == 768,
                  "r1 is not [b*s, 768]");
        if (strcmp(n, "r2") == 0)
            CHECK(tt->rank == 3 && tt->sym[0] == 1 && tt->sym[1] == 2 && tt->sym[2] == 0 && tt->shape[2] == 768,
                  "r2 is not [b, s, 768]");
        if (strcmp(n, "r3") == 0)
            CHECK(tt->sym[0] == 2 && tt->sym[1] == 1, "r3 is not [s, b, 768]");
        if (strcmp(n, "t1") == 0)
            CHECK(tt->sym[0] == 1 && tt->sym[1] == 0 && tt->sym[2] == 2 && tt->shape[1] == 12, "t1 is not [b, 12, s, 64]");
        if (strcmp(n, "y") == 0)
            CHECK(tt->sym[0] == 1 && tt->sym[1] == 2 && tt->shape[1] == 64, "y is not [b, s, 12, 64]");
        if (strcmp(n, "red") == 0)
            CHECK(tt->rank == 3 && tt->sym[0] == 1 && tt->sym[1] == 2, "red is not [b, s, 12]");
    }
    CHECK(strcmp(graph_sym_text(g, 3, buf, sizeof(buf)), "b*s") == 0, "sym text %s", buf);
    /* The canonical text keys the ranges: another max, another multiple_of, other hints differ. */
    char *c1 = graph_canonical(g);
    graph_request_free(&rq);
    static const char *const others[] = {"\"max\":64,\"multiple_of\":2}", "\"max\":128,\"multiple_of\":2}",
                                         "\"max\":64,\"multiple_of\":1}", "\"max\":64,\"multiple_of\":2,\"hints\":[8]}"};
    for (int k = 0; k < 4; k++) {
        char other[4096];
        const char *at = strstr(body, others[0]);
        snprintf(other, sizeof(other), "%.*s%s%s", (int)(at - body), body, others[k], at + strlen(others[0]));
        r = graph_request_parse(other, strlen(other), &rq, &e);
        CHECK(r == 0, "variant %d refused: %s", k, e.message);
        if (r)
            continue;
        char *c2 = graph_canonical(&rq.g);
        CHECK(c1 && c2 && (strcmp(c1, c2) == 0) == (k == 0), "variant %d: canonical texts %s", k,
              k ? "equal" : "differ");
        free(c2);
        graph_request_free(&rq);
    }
    free(c1);
}

static void test_dims_errors(void)
{
#define G(DIMS, INPUTS, NODES, OUTS)                                                                              \
    "{" DIMS "\"graph\":{\"inputs\":[" INPUTS "],\"nodes\":[" NODES "],\"outputs\":[" OUTS "]}}"
#define XN "{\"name\":\"x\",\"shape\":[\"n\",768],\"dtype\":\"f16\"}"
#define DN "\"dims\":{\"n\":{\"min\":1,\"max\":64}},"
#define RELU "{\"op\":\"relu\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}"
    /* the declarations */
    expect_error(G("", XN, RELU, "\"y\""), 422, "graph.inputs[0].shape[0]", "has no \"dims\"");
    expect_error(G("\"dims\":{\"m\":{\"min\":1,\"max\":64}},", XN, RELU, "\"y\""), 422, "graph.inputs[0].shape[0]",
                 "does not declare");
    expect_error(G("\"dims\":{\"n\":{\"min\":1,\"max\":64},\"t\":{\"min\":1,\"max\":8}},", XN, RELU, "\"y\""), 422,
                 "dims.t", "no graph input");
    expect_error(G("\"dims\":{\"n\":{\"min\":8,\"max\":4}},", XN, RELU, "\"y\""), 422, "dims.n.max", "below min");
    expect_error(G(DN "\"sizes\":{\"n\":100},", XN, RELU, "\"y\""), 422, "sizes.n", "n is 100; its range is 1..64");
    expect_error(G(DN, XN "],\"weights\":[{\"name\":\"w\",\"shape\":[\"n\",4],\"dtype\":\"f16\"}", RELU, "\"y\""),
                 422, "graph.weights[0].shape[0]", "weight");
    /* broadcasting: a name meets the same name or 1 */
    expect_error(G("\"dims\":{\"n\":{\"min\":1,\"max\":64},\"m\":{\"min\":1,\"max\":64}},",
                   XN ",{\"name\":\"z\",\"shape\":[\"m\",768],\"dtype\":\"f16\"}",
                   "{\"op\":\"add\",\"inputs\":[\"x\",\"z\"],\"outputs\":[\"y\"]}", "\"y\""),
                 422, "nodes[0].inputs[1]", "[n, 768] and [m, 768] do not broadcast");
    expect_error(G(DN, XN ",{\"name\":\"z\",\"shape\":[64,768],\"dtype\":\"f16\"}",
                   "{\"op\":\"add\",\"inputs\":[\"x\",\"z\"],\"outputs\":[\"y\"]}", "\"y\""),
                 422, "nodes[0].inputs[1]", "do not broadcast");
    /* reshapes the names cannot say */
    expect_error(G(DN, XN, "{\"op\":\"reshape\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"shape\":[-1]}}",
                   "\"y\""),
                 422, "nodes[0].attrs.shape", "not a size nor a product of names");
    expect_error(G(DN, XN,
                   "{\"op\":\"reshape\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"shape\":[\"n\",24,24]}}",
                   "\"y\""),
                 422, "nodes[0].attrs.shape", "cannot be reshaped");
    expect_error(G(DN, XN,
                   "{\"op\":\"reshape\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"shape\":[64,768]}}",
                   "\"y\""),
                 422, "nodes[0].attrs.shape", "cannot be reshaped");
    expect_error(G(DN, XN,
                   "{\"op\":\"reshape\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"shape\":[\"q\",768]}}",
                   "\"y\""),
                 422, "nodes[0].attrs.shape[0]", "does not declare");
    /* what the kernels cannot take where the names stand */
    expect_error(G(DN, XN, "{\"op\":\"slice\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"starts\":[1],"
                           "\"ends\":[9]}}",
                   "\"y\""),
                 422, "nodes[0].attrs.ends", "ends within the name's smallest size");
    expect_error(G(DN, XN,
                   "{\"op\":\"reduce\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"kind\":\"sum\",\"axis\":0}}",
                   "\"y\""),
                 422, "nodes[0].inputs[0]", "reduced axis may not be named");
    /* (a 2-D w [768, n] @ x [n, 768] names K, which the kernels take: a batched one does not) */
    expect_error(G(DN, XN ",{\"name\":\"w\",\"shape\":[4,768,\"n\"],\"dtype\":\"f16\"}",
                   "{\"op\":\"matmul\",\"inputs\":[\"w\",\"x\"],\"outputs\":[\"y\"]}", "\"y\""),
                 422, "nodes[0]", "it may not be named");
    /* a slice whose offset sums starts along axes scaling with different names (s*64 and 64) */
    expect_error(G("\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":4,\"max\":64}},",
                   "{\"name\":\"x\",\"shape\":[\"b\",3,\"s\",64],\"dtype\":\"f16\"}",
                   "{\"op\":\"slice\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"starts\":[1,1],"
                   "\"ends\":[2,3],\"axes\":[1,2]}}", "\"y\""),
                 422, "nodes[0]", "an offset summing starts");
    /* What the kernels take: an output viewing an input is copied, by one kernel, whether the
     * view keeps the name on axis 0 ([n, 24, 32]) or moves it last ([768, n]: an elementwise
     * copy splitting its named last axis at launch); a position embedding [s, 768] added to
     * [b, s, 768] is one kernel over both names (s an inner axis, its offset read from the sizes). */
    const char *ok[] = {
        G(DN, XN, "{\"op\":\"reshape\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"shape\":[\"n\",24,32]}}",
          "\"y\""),
        G(DN, XN, "{\"op\":\"reshape\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"shape\":[768,-1]}}",
          "\"y\""),
        G("\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":1,\"max\":64}},",
          "{\"name\":\"x\",\"shape\":[\"b\",\"s\",768],\"dtype\":\"f16\"},"
          "{\"name\":\"pe\",\"shape\":[\"s\",768],\"dtype\":\"f16\"}",
          "{\"name\":\"pos\",\"op\":\"add\",\"inputs\":[\"x\",\"pe\"],\"outputs\":[\"y\"]}", "\"y\""),
        /* copies with names (strides that scale with the sizes): a transpose moving a name, BERT's
         * pooler [b, s, 768][:, 0] squeezed to [b, 768] (its tanh fused), a slice of a fixed axis
         * of a named tensor (a QKV projection's k) */
        G("\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":1,\"max\":64}},",
          "{\"name\":\"x\",\"shape\":[\"b\",\"s\",768],\"dtype\":\"f16\"}",
          "{\"op\":\"transpose\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"perm\":[1,0,2]}}", "\"y\""),
        G("\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":1,\"max\":64}},",
          "{\"name\":\"x\",\"shape\":[\"b\",\"s\",768],\"dtype\":\"f16\"}",
          "{\"name\":\"sel\",\"op\":\"slice\",\"inputs\":[\"x\"],\"outputs\":[\"x0\"],\"attrs\":{\"starts\":[0],"
          "\"ends\":[1],\"axes\":[1]}},{\"name\":\"sq\",\"op\":\"reshape\",\"inputs\":[\"x0\"],\"outputs\":[\"x1\"],"
          "\"attrs\":{\"shape\":[\"b\",768]}},{\"name\":\"act\",\"op\":\"tanh\",\"inputs\":[\"x1\"],\"outputs\":[\"y\"]}",
          "\"y\""),
        G("\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":1,\"max\":64}},",
          "{\"name\":\"x\",\"shape\":[\"b\",\"s\",2304],\"dtype\":\"f16\"}",
          "{\"name\":\"sl\",\"op\":\"slice\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"starts\":[768],"
          "\"ends\":[1536],\"axes\":[2]}}", "\"y\""),
        /* scores of a custom attention, q [b, s, 64] @ k^T with k [s, 64] (issue 39): one matmul
         * over [b*s, 64] rows whose N is s (k's rows, trans_b) */
        G("\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":1,\"max\":64}},",
          "{\"name\":\"q\",\"shape\":[\"b\",\"s\",64],\"dtype\":\"f16\"},"
          "{\"name\":\"k\",\"shape\":[\"s\",64],\"dtype\":\"f16\"}",
          "{\"name\":\"kt\",\"op\":\"transpose\",\"inputs\":[\"k\"],\"outputs\":[\"k1\"],\"attrs\":{\"perm\":[1,0]}},"
          "{\"name\":\"qk\",\"op\":\"matmul\",\"inputs\":[\"q\",\"k1\"],\"outputs\":[\"y\"]}", "\"y\""),
    };
    const char *want[] = {"[\"n\",24,32]", "[768,\"n\"]", "[\"s\",768]",
                          "\"attrs\":{\"shape\":[\"s\",\"b\",768],\"strides\":[768,\"768*s\",1],\"offset\":0}",
                          "\"attrs\":{\"shape\":[\"b\",1,768],\"strides\":[\"768*s\",768,1],\"offset\":0},\"prologue\":[],"
                          "\"epilogue\":[{\"op\":\"tanh\"}]",
                          "\"attrs\":{\"shape\":[\"b\",\"s\",768],\"strides\":[\"2304*s\",2304,1],\"offset\":768}",
                          "[{\"shape\":[\"b*s\",64],\"dtype\":\"f16\"},{\"shape\":[\"s\",64],\"dtype\":\"f16\"}]"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        graph_request rq;
        graph_plan p;
        proto_error e;
        int r = plan_of(ok[i], &rq, &p, &e);
        CHECK(r == 0 && p.n_kernels == 1 && strstr(p.kernels[0].request, want[i]), "case %zu: %s", i,
              r ? e.message : (p.n_kernels ? p.kernels[0].request : "no kernel"));
        if (r == 0) {
            graph_plan_free(&p);
            graph_request_free(&rq);
        }
    }
#undef G
#undef XN
#undef DN
#undef RELU
}

/* A BERT-like attention over [b, s, 768] with names: the q/k/v permutes [b,s,h,d] -> [b,h,s,d]
 * around the attention node and the permute back fold into the bshd layout as in a static graph
 * (no copy kernel), the kernel request naming B and S; a QKV projection sliced three ways folds
 * into bshd_packed; a single-head attention spelled out over [b, s, 64] becomes the attention op
 * over 4-D views that carry the names. */
static void test_dims_attention(void)
{
    graph_request rq;
    graph_plan p;
    proto_error e;
    static const char *const node =
        "{\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":1,\"max\":512}},\"graph\":{\"inputs\":[{\"name"
        "\":\"x\",\"shape\":[\"b\",\"s\",768],\"dtype\":\"f16\"},{\"name\":\"m\",\"shape\":[\"b\",1,1,\"s\"],"
        "\"dtype\":\"f16\"}],\"weights\":[{\"name\":\"wq\",\"shape\":[768,768],\"dtype\":\"f16\"},{\"name\":"
        "\"wk\",\"shape\":[768,768],\"dtype\":\"f16\"},{\"name\":\"wv\",\"shape\":[768,768],\"dtype\":\"f16\""
        "},{\"name\":\"wo\",\"shape\":[768,768],\"dtype\":\"f16\"}],\"nodes\":[{\"name\":\"proj_q\",\"op\":\""
        "matmul\",\"inputs\":[\"x\",\"wq\"],\"outputs\":[\"q0\"]},{\"name\":\"proj_k\",\"op\":\"matmul\",\"in"
        "puts\":[\"x\",\"wk\"],\"outputs\":[\"k0\"]},{\"name\":\"proj_v\",\"op\":\"matmul\",\"inputs\":[\"x\""
        ",\"wv\"],\"outputs\":[\"v0\"]},{\"name\":\"view_q\",\"op\":\"reshape\",\"inputs\":[\"q0\"],\"outputs"
        "\":[\"q1\"],\"attrs\":{\"shape\":[\"b\",\"s\",12,64]}},{\"name\":\"perm_q\",\"op\":\"transpose\",\"i"
        "nputs\":[\"q1\"],\"outputs\":[\"q2\"],\"attrs\":{\"perm\":[0,2,1,3]}},{\"name\":\"view_k\",\"op\":\""
        "reshape\",\"inputs\":[\"k0\"],\"outputs\":[\"k1\"],\"attrs\":{\"shape\":[\"b\",\"s\",12,64]}},{\"nam"
        "e\":\"perm_k\",\"op\":\"transpose\",\"inputs\":[\"k1\"],\"outputs\":[\"k2\"],\"attrs\":{\"perm\":[0,"
        "2,1,3]}},{\"name\":\"view_v\",\"op\":\"reshape\",\"inputs\":[\"v0\"],\"outputs\":[\"v1\"],\"attrs\":"
        "{\"shape\":[\"b\",\"s\",12,64]}},{\"name\":\"perm_v\",\"op\":\"transpose\",\"inputs\":[\"v1\"],\"out"
        "puts\":[\"v2\"],\"attrs\":{\"perm\":[0,2,1,3]}},{\"name\":\"att\",\"op\":\"attention\",\"inputs\":["
        "\"q2\",\"k2\",\"v2\",\"m\"],\"outputs\":[\"o\"]},{\"name\":\"perm_o\",\"op\":\"transpose\",\"inputs"
        "\":[\"o\"],\"outputs\":[\"o1\"],\"attrs\":{\"perm\":[0,2,1,3]}},{\"name\":\"view_o\",\"op\":\"reshap"
        "e\",\"inputs\":[\"o1\"],\"outputs\":[\"o2\"],\"attrs\":{\"shape\":[\"b\",\"s\",768]}},{\"name\":\"pr"
        "oj_o\",\"op\":\"matmul\",\"inputs\":[\"o2\",\"wo\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}}";
    static const char *const packed =
        "{\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":1,\"max\":512}},\"graph\":{\"inputs\":[{\"name"
        "\":\"x\",\"shape\":[\"b\",\"s\",768],\"dtype\":\"f16\"},{\"name\":\"m\",\"shape\":[\"b\",1,1,\"s\"],"
        "\"dtype\":\"f16\"}],\"weights\":[{\"name\":\"wqkv\",\"shape\":[768,2304],\"dtype\":\"f16\"},{\"name"
        "\":\"wo\",\"shape\":[768,768],\"dtype\":\"f16\"}],\"nodes\":[{\"name\":\"qkv\",\"op\":\"matmul\",\"i"
        "nputs\":[\"x\",\"wqkv\"],\"outputs\":[\"qkv\"]},{\"name\":\"sl_q\",\"op\":\"slice\",\"inputs\":[\"qk"
        "v\"],\"outputs\":[\"q0\"],\"attrs\":{\"starts\":[0],\"ends\":[768],\"axes\":[2]}},{\"name\":\"sl_k\""
        ",\"op\":\"slice\",\"inputs\":[\"qkv\"],\"outputs\":[\"k0\"],\"attrs\":{\"starts\":[768],\"ends\":[15"
        "36],\"axes\":[2]}},{\"name\":\"sl_v\",\"op\":\"slice\",\"inputs\":[\"qkv\"],\"outputs\":[\"v0\"],\"a"
        "ttrs\":{\"starts\":[1536],\"ends\":[2304],\"axes\":[2]}},{\"name\":\"view_q\",\"op\":\"reshape\",\"i"
        "nputs\":[\"q0\"],\"outputs\":[\"q1\"],\"attrs\":{\"shape\":[\"b\",\"s\",12,64]}},{\"name\":\"perm_q"
        "\",\"op\":\"transpose\",\"inputs\":[\"q1\"],\"outputs\":[\"q2\"],\"attrs\":{\"perm\":[0,2,1,3]}},{\""
        "name\":\"view_k\",\"op\":\"reshape\",\"inputs\":[\"k0\"],\"outputs\":[\"k1\"],\"attrs\":{\"shape\":["
        "\"b\",\"s\",12,64]}},{\"name\":\"perm_k\",\"op\":\"transpose\",\"inputs\":[\"k1\"],\"outputs\":[\"k2"
        "\"],\"attrs\":{\"perm\":[0,2,1,3]}},{\"name\":\"view_v\",\"op\":\"reshape\",\"inputs\":[\"v0\"],\"ou"
        "tputs\":[\"v1\"],\"attrs\":{\"shape\":[\"b\",\"s\",12,64]}},{\"name\":\"perm_v\",\"op\":\"transpose"
        "\",\"inputs\":[\"v1\"],\"outputs\":[\"v2\"],\"attrs\":{\"perm\":[0,2,1,3]}},{\"name\":\"att\",\"op\""
        ":\"attention\",\"inputs\":[\"q2\",\"k2\",\"v2\",\"m\"],\"outputs\":[\"o\"]},{\"name\":\"perm_o\",\"o"
        "p\":\"transpose\",\"inputs\":[\"o\"],\"outputs\":[\"o1\"],\"attrs\":{\"perm\":[0,2,1,3]}},{\"name\":"
        "\"view_o\",\"op\":\"reshape\",\"inputs\":[\"o1\"],\"outputs\":[\"o2\"],\"attrs\":{\"shape\":[\"b\","
        "\"s\",768]}},{\"name\":\"proj_o\",\"op\":\"matmul\",\"inputs\":[\"o2\",\"wo\"],\"outputs\":[\"y\"]}]"
        ",\"outputs\":[\"y\"]}}";
    static const char *const spelled =
        "{\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":1,\"max\":512}},\"graph\":{\"inputs\":[{\"name"
        "\":\"q\",\"shape\":[\"b\",\"s\",64],\"dtype\":\"f16\"},{\"name\":\"k\",\"shape\":[\"b\",\"s\",64],\""
        "dtype\":\"f16\"},{\"name\":\"v\",\"shape\":[\"b\",\"s\",64],\"dtype\":\"f16\"},{\"name\":\"m\",\"sha"
        "pe\":[\"b\",1,\"s\"],\"dtype\":\"f16\"}],\"nodes\":[{\"name\":\"kt\",\"op\":\"transpose\",\"inputs\""
        ":[\"k\"],\"outputs\":[\"kt\"],\"attrs\":{\"perm\":[0,2,1]}},{\"name\":\"qk\",\"op\":\"matmul\",\"inp"
        "uts\":[\"q\",\"kt\"],\"outputs\":[\"sc\"]},{\"name\":\"scale\",\"op\":\"scale\",\"inputs\":[\"sc\"],"
        "\"outputs\":[\"sc1\"],\"attrs\":{\"value\":0.125}},{\"name\":\"madd\",\"op\":\"add\",\"inputs\":[\"s"
        "c1\",\"m\"],\"outputs\":[\"sc2\"]},{\"name\":\"softmax\",\"op\":\"softmax\",\"inputs\":[\"sc2\"],\"o"
        "utputs\":[\"pr\"]},{\"name\":\"pv\",\"op\":\"matmul\",\"inputs\":[\"pr\",\"v\"],\"outputs\":[\"o\"]}"
        ",{\"name\":\"act\",\"op\":\"relu\",\"inputs\":[\"o\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}}";
    const char *const bodies[] = {node, packed, spelled};
    const char *const want[] = {
        "{\"op\":\"attention\",\"inputs\":[{\"shape\":[\"b\",\"s\",12,64],\"dtype\":\"f16\"},{\"shape\":[\"b\",\"s\",12,64]",
        "{\"op\":\"attention\",\"inputs\":[{\"shape\":[\"b\",\"s\",36,64],\"dtype\":\"f16\"},{\"shape\":[\"b\",1,1,\"s\"]",
        "{\"op\":\"attention\",\"inputs\":[{\"shape\":[\"b\",1,\"s\",64],\"dtype\":\"f16\"},{\"shape\":[\"b\",1,\"s\",64]"};
    const char *const layout[] = {"\"layout\":\"bshd\"", "\"layout\":\"bshd_packed\"", "\"layout\":\"bhsd\""};
    const int kernels[] = {5, 3, 2};
    for (int i = 0; i < 3; i++) {
        int r = plan_of(bodies[i], &rq, &p, &e);
        CHECK(r == 0, "case %d refused: %s %s", i, e.field, e.message);
        if (r)
            continue;
        int att = -1, copies = 0;
        for (int k = 0; k < p.n_kernels; k++) {
            if (p.kernels[k].op->kind == TUNER_OP_ATTENTION)
                att = k;
            copies += p.kernels[k].op->kind == TUNER_OP_COPY;
        }
        CHECK(p.n_kernels == kernels[i] && copies == 0 && att >= 0, "case %d: %d kernels, %d copies", i, p.n_kernels,
              copies);
        if (att >= 0) {
            const graph_kernel *k = &p.kernels[att];
            CHECK(strncmp(k->request, want[i], strlen(want[i])) == 0 && strstr(k->request, layout[i]) &&
                      strstr(k->request, "\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":1,\"max\":512}}"),
                  "case %d: %s", i, k->request);
            /* The kernel's op is its request's: B and S named by the kernel's own dims. */
            CHECK(k->op->n_dims == 2 && k->op->inputs[0].sym[0] == 1 && k->op->output.sym[0] == 1 &&
                      (i == 2 ? k->op->inputs[0].sym[2] : k->op->inputs[0].sym[1]) == 2,
                  "case %d: the attention op's names", i);
            CHECK(i == 2 || kernel_of(&p, "att") == k, "case %d: the attention node's kernel", i);
        }
        graph_plan_free(&p);
        graph_request_free(&rq);
    }
    /* The heads' permute also an output: the bshd fold is not made (its transposes stay). */
    char *twice = malloc(strlen(node) + 16);
    if (twice) {
        strcpy(twice, node);
        char *o = strstr(twice, "\"outputs\":[\"y\"]}}");
        CHECK(o != NULL);
        if (o)
            strcpy(o, "\"outputs\":[\"y\",\"q2\"]}}");
        int r = plan_of(twice, &rq, &p, &e);
        if (r == 0) {
            bool bshd = false;
            for (int k = 0; k < p.n_kernels; k++)
                bshd = bshd || (p.kernels[k].op->kind == TUNER_OP_ATTENTION && p.kernels[k].op->attrs.attention.bshd);
            CHECK(!bshd, "a permute shown as an output was folded away");
            graph_plan_free(&p);
            graph_request_free(&rq);
        } else {
            CHECK(strstr(e.message, "strides depend"), "q2 shown: %s", e.message);
        }
        free(twice);
    }
}

/* Slices to a name: position ids [1, 512] (a weight) sliced to [1, s] are a view of the weight's
 * first s ids; their gather is the prepared gather of all the ids, viewed (a value with names is
 * never a constant of the prepare phase, the whole one is);
 * the refusals (a name past the axis, an undeclared name, a named start, a named axis). */
static void test_dims_slice_names(void)
{
#define SG(WSHAPE, SLICE, REST, OUTS)                                                                            \
    "{\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":1,\"max\":512}},\"graph\":{\"inputs\":[{\"name\":\"x\","  \
    "\"shape\":[\"b\",\"s\",768],\"dtype\":\"f16\"}],\"weights\":[{\"name\":\"pos\",\"shape\":" WSHAPE               \
    ",\"dtype\":\"i64\"},{\"name\":\"table\",\"shape\":[512,768],\"dtype\":\"f16\"}],\"nodes\":[{\"name\":\"ids\","   \
    "\"op\":\"slice\",\"inputs\":[\"pos\"],\"outputs\":[\"ids\"],\"attrs\":" SLICE "}" REST "],\"outputs\":[" OUTS "]}}"
#define EMB ",{\"name\":\"emb\",\"op\":\"embedding\",\"inputs\":[\"table\",\"ids\"],\"outputs\":[\"pe\"]}," \
            "{\"name\":\"add\",\"op\":\"add\",\"inputs\":[\"x\",\"pe\"],\"outputs\":[\"y\"]}"
    graph_request rq;
    graph_plan p;
    proto_error e;
    int r = plan_of(SG("[1,512]", "{\"starts\":[0],\"ends\":[\"s\"],\"axes\":[1]}", EMB, "\"y\""), &rq, &p, &e);
    CHECK(r == 0, "position ids refused: %s %s", e.field, e.message);
    if (r == 0) {
        /* The gather of the cut ids is the prepared gather of all 512 and a view of its first s
         * rows (view_prepared_prefixes); the add reads the view. */
        const graph_kernel *g = kernel_of(&p, "emb");
        CHECK(p.n_kernels == 2 && p.n_prepare == 1 && g && g->prepare && g->op->kind == TUNER_OP_GATHER &&
                  strstr(g->request, "{\"shape\":[1,512],\"dtype\":\"i64\"}") && kernel_of(&p, "ids") == NULL,
              "%d kernels (%d prepared): %s", p.n_kernels, p.n_prepare, g ? g->request : "no gather");
        for (int t = 0; t < p.n_tensors; t++) {
            if (strcmp(p.tensors[t].name, "ids") == 0)
                CHECK(p.tensors[t].view_of >= 0 && strcmp(p.tensors[p.tensors[t].view_of].name, "pos") == 0 &&
                          p.tensors[t].t.sym[1] == 2 && p.tensors[t].t.shape[1] == 512,
                      "ids is not a view of pos named [1, s]");
            if (strcmp(p.tensors[t].name, "pe") == 0)
                CHECK(p.tensors[t].view_of >= 0 && strcmp(p.tensors[p.tensors[t].view_of].name, "emb#whole") == 0 &&
                          p.tensors[t].t.sym[1] == 2,
                      "pe is not a view of the whole gather");
        }
        graph_plan_free(&p);
        graph_request_free(&rq);
    }
    /* A prepared table (a value: the relu of every position, run once) cut to [1, s, 64]: its
     * first elements, a view of the prepared value read by the add (view_prepared_prefixes). */
    {
        const char *prep =
            "{\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":2,\"max\":512}},\"graph\":{\"inputs\":["
            "{\"name\":\"x\",\"shape\":[\"b\",\"s\",64],\"dtype\":\"f16\"}],\"weights\":[{\"name\":\"w\","
            "\"shape\":[1,512,64],\"dtype\":\"f16\"}],\"nodes\":[{\"name\":\"r\",\"op\":\"relu\",\"inputs\":[\"w\"],"
            "\"outputs\":[\"rw\"]},{\"name\":\"cut\",\"op\":\"slice\",\"inputs\":[\"rw\"],\"outputs\":[\"pe\"],"
            "\"attrs\":{\"starts\":[0],\"ends\":[\"s\"],\"axes\":[1]}},{\"name\":\"add\",\"op\":\"add\","
            "\"inputs\":[\"x\",\"pe\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}}";
        r = plan_of(prep, &rq, &p, &e);
        CHECK(r == 0, "a prepared table cut to s refused: %s %s", e.field, e.message);
        if (r == 0) {
            const graph_kernel *add = kernel_of(&p, "add");
            CHECK(p.n_kernels == 2 && p.n_prepare == 1 && kernel_of(&p, "cut") == NULL && add &&
                      strstr(add->request, "{\"shape\":[1,\"s\",64],\"dtype\":\"f16\"}"),
                  "%d kernels (%d prepared): %s", p.n_kernels, p.n_prepare, add ? add->request : "no add");
            for (int t = 0; t < p.n_tensors; t++)
                if (strcmp(p.tensors[t].name, "pe") == 0)
                    CHECK(p.tensors[t].view_of >= 0 && strcmp(p.tensors[p.tensors[t].view_of].name, "rw") == 0,
                          "pe is not a view of the prepared rw");
            graph_plan_free(&p);
            graph_request_free(&rq);
        }
        /* The same table computed in every run (w an input): its producer writes a value of the
         * run, which the cut stays a copy of. */
        const char *run =
            "{\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":2,\"max\":512}},\"graph\":{\"inputs\":["
            "{\"name\":\"x\",\"shape\":[\"b\",\"s\",64],\"dtype\":\"f16\"},{\"name\":\"w\",\"shape\":[1,512,64],"
            "\"dtype\":\"f16\"}],\"nodes\":[{\"name\":\"r\",\"op\":\"relu\",\"inputs\":[\"w\"],\"outputs\":[\"rw\"]},"
            "{\"name\":\"cut\",\"op\":\"slice\",\"inputs\":[\"rw\"],\"outputs\":[\"pe\"],\"attrs\":{\"starts\":[0],"
            "\"ends\":[\"s\"],\"axes\":[1]}},{\"name\":\"add\",\"op\":\"add\",\"inputs\":[\"x\",\"pe\"],"
            "\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}}";
        r = plan_of(run, &rq, &p, &e);
        CHECK(r == 0, "a run's table cut to s refused: %s %s", e.field, e.message);
        if (r == 0) {
            const graph_kernel *cut = kernel_of(&p, "cut");
            CHECK(p.n_prepare == 0 && cut && cut->op->kind == TUNER_OP_COPY, "%d kernels (%d prepared)", p.n_kernels,
                  p.n_prepare);
            graph_plan_free(&p);
            graph_request_free(&rq);
        }
    }
    /* GPT-2's position ids: arange(0, 512) cut to [s] and viewed as [1, s] - the first s ids
     * still, so their gather is the prepared gather of all 512, viewed as [1, s, 64]. */
    {
        const char *gpt2 =
            "{\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":1,\"max\":512}},\"graph\":{\"inputs\":["
            "{\"name\":\"x\",\"shape\":[\"b\",\"s\",64],\"dtype\":\"f16\"}],\"weights\":[{\"name\":\"pos\","
            "\"shape\":[512],\"dtype\":\"i64\"},{\"name\":\"wpe\",\"shape\":[1024,64],\"dtype\":\"f16\"}],"
            "\"nodes\":[{\"name\":\"ids\",\"op\":\"slice\",\"inputs\":[\"pos\"],\"outputs\":[\"ids\"],\"attrs\":"
            "{\"starts\":[0],\"ends\":[\"s\"]}},{\"name\":\"row\",\"op\":\"reshape\",\"inputs\":[\"ids\"],"
            "\"outputs\":[\"ids1\"],\"attrs\":{\"shape\":[1,\"s\"]}},{\"name\":\"emb\",\"op\":\"embedding\","
            "\"inputs\":[\"wpe\",\"ids1\"],\"outputs\":[\"pe\"]},{\"name\":\"add\",\"op\":\"add\",\"inputs\":"
            "[\"x\",\"pe\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}}";
        r = plan_of(gpt2, &rq, &p, &e);
        CHECK(r == 0, "GPT-2's position ids refused: %s %s", e.field, e.message);
        if (r == 0) {
            const graph_kernel *g = kernel_of(&p, "emb");
            CHECK(p.n_kernels == 2 && p.n_prepare == 1 && g && g->prepare &&
                      strstr(g->request, "{\"shape\":[512],\"dtype\":\"i64\"}"),
                  "%d kernels (%d prepared): %s", p.n_kernels, p.n_prepare, g ? g->request : "no gather");
            graph_plan_free(&p);
            graph_request_free(&rq);
        }
    }
    /* The same with a product and the slice written without axes: [0, s) of axis 0 of [512, 768]. */
    const char *rows =
        "{\"dims\":{\"s\":{\"min\":1,\"max\":512}},\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[\"s\",768],"
        "\"dtype\":\"f16\"}],\"weights\":[{\"name\":\"pe\",\"shape\":[512,768],\"dtype\":\"f16\"}],\"nodes\":["
        "{\"name\":\"cut\",\"op\":\"slice\",\"inputs\":[\"pe\"],\"outputs\":[\"p\"],\"attrs\":{\"starts\":[0],"
        "\"ends\":[\"s\"]}},{\"name\":\"add\",\"op\":\"add\",\"inputs\":[\"x\",\"p\"],\"outputs\":[\"y\"]}],"
        "\"outputs\":[\"y\"]}}";
    r = plan_of(rows, &rq, &p, &e);
    CHECK(r == 0 && p.n_kernels == 1 && p.n_prepare == 0 && strstr(p.kernels[0].request, "[\"s\",768]"),
          "rows of pe: %s", r ? e.message : p.kernels[0].request);
    if (r == 0) {
        graph_plan_free(&p);
        graph_request_free(&rq);
    }
    expect_error(SG("[1,256]", "{\"starts\":[0],\"ends\":[\"s\"],\"axes\":[1]}", EMB, "\"y\""), 422,
                 "nodes[0].attrs.ends[0]", "s's max is 512, past axis 1's 256 items");
    expect_error(SG("[1,512]", "{\"starts\":[0],\"ends\":[\"t\"],\"axes\":[1]}", EMB, "\"y\""), 422,
                 "nodes[0].attrs.ends[0]", "does not declare");
    expect_error(SG("[1,512]", "{\"starts\":[\"s\"],\"ends\":[512],\"axes\":[1]}", EMB, "\"y\""), 422,
                 "nodes[0].attrs.starts[0]", "a named start");
    expect_error(SG("[1,512]", "{\"starts\":[1],\"ends\":[\"s\"],\"axes\":[1]}", EMB, "\"y\""), 422,
                 "nodes[0].attrs.ends[0]", "[0, name) with step 1");
    expect_error("{\"dims\":{\"s\":{\"min\":1,\"max\":64}},\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[\"s\",768],"
                 "\"dtype\":\"f16\"}],\"nodes\":[{\"name\":\"cut\",\"op\":\"slice\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
                 "\"attrs\":{\"starts\":[0],\"ends\":[\"s\"]}}],\"outputs\":[\"y\"]}}",
                 422, "nodes[0].attrs.ends[0]", "only a fixed axis can be sliced to a name");
    /* Integer ids that are not a prefix of their memory ([2, 512] cut along axis 1) stay refused. */
    expect_error(SG("[2,512]", "{\"starts\":[0],\"ends\":[\"s\"],\"axes\":[1]}", EMB, "\"y\""), 422,
                 "nodes[0].inputs[0]", "an integer tensor");
    /* A static graph: names in a slice are not sizes. */
    expect_error("{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[4,768],\"dtype\":\"f16\"}],\"nodes\":[{\"name\":"
                 "\"cut\",\"op\":\"slice\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"starts\":[0],\"ends\":[\"s\"]}}],"
                 "\"outputs\":[\"y\"]}}",
                 400, "nodes[0].attrs.ends", "must hold integers");
#undef SG
#undef EMB
}

/* A BERT layer with its embeddings - token, position and token-type embeddings read through
 * ids cut to the sequence, layernorms, q/k/v projections with biases viewed into heads around
 * an attention node, the output projection with its residual, the GELU MLP - in a graph whose
 * batch and sequence are names, and the same graph at one size: the same steps. The cut
 * position table and the token-type embedding of the cut ids are prepared whole and viewed
 * (view_prepared_prefixes), as the static graph prepares them at its size. */
static char *bert_layer(bool named)
{
    static char buf[8192];
    const char *dims = named ? "\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":1,\"max\":512}}," : "";
    const char *b = named ? "\"b\"" : "2", *s = named ? "\"s\"" : "64";
    /* The ids buffers: [1, 512] cut to s, or (as PyTorch traces them at one size) [1, 64] as they are. */
    const char *cut = named ? "{\"starts\":[0],\"ends\":[\"s\"],\"axes\":[1]}" : "{\"shape\":[1,64]}";
#define BL_W(N, SHAPE) "{\"name\":\"" N "\",\"shape\":" SHAPE ",\"dtype\":\"f16\"},"
#define BL_N(N, OP, IN, OUT) "{\"name\":\"" N "\",\"op\":\"" OP "\",\"inputs\":[" IN "],\"outputs\":[\"" OUT "\"]},"
#define BL_PROJ(X, W, BIAS)                                                                                      \
    BL_N(X, "matmul", "\"h\",\"" W "\"", X "0") BL_N(X "b", "add", "\"" X "0\",\"" BIAS "\"", X "1")              \
    "{\"name\":\"" X "r\",\"op\":\"reshape\",\"inputs\":[\"" X "1\"],\"outputs\":[\"" X "2\"],\"attrs\":{\"shape\":[%2$s,%3$s,2,64]}}," \
    "{\"name\":\"" X "t\",\"op\":\"transpose\",\"inputs\":[\"" X "2\"],\"outputs\":[\"" X "3\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
    snprintf(buf, sizeof(buf),
             "{%1$s\"graph\":{\"inputs\":[{\"name\":\"ids\",\"shape\":[%2$s,%3$s],\"dtype\":\"i64\"}],\"weights\":["
             "{\"name\":\"pos\",\"shape\":[1,%4$s],\"dtype\":\"i64\"},{\"name\":\"tt\",\"shape\":[1,%4$s],\"dtype\":\"i64\"},"
             BL_W("wemb", "[1000,128]") BL_W("pemb", "[512,128]") BL_W("temb", "[2,128]") BL_W("g0", "[128]")
             BL_W("c0", "[128]") BL_W("wq", "[128,128]") BL_W("wk", "[128,128]") BL_W("wv", "[128,128]")
             BL_W("wo", "[128,128]") BL_W("bq", "[128]") BL_W("bk", "[128]") BL_W("bv", "[128]") BL_W("bo", "[128]")
             BL_W("g1", "[128]") BL_W("c1", "[128]") BL_W("w1", "[128,512]") BL_W("d1", "[512]")
             BL_W("w2", "[512,128]") BL_W("d2", "[128]") BL_W("g2", "[128]")
             "{\"name\":\"c2\",\"shape\":[128],\"dtype\":\"f16\"}],\"nodes\":["
             "{\"name\":\"posc\",\"op\":%5$s,\"inputs\":[\"pos\"],\"outputs\":[\"posc\"],\"attrs\":%6$s},"
             "{\"name\":\"ttc\",\"op\":%5$s,\"inputs\":[\"tt\"],\"outputs\":[\"ttc\"],\"attrs\":%6$s},"
             BL_N("we", "embedding", "\"wemb\",\"ids\"", "e0") BL_N("pe", "embedding", "\"pemb\",\"posc\"", "e1")
             BL_N("te", "embedding", "\"temb\",\"ttc\"", "e2") BL_N("a0", "add", "\"e0\",\"e2\"", "e3")
             BL_N("a1", "add", "\"e3\",\"e1\"", "e4") BL_N("ln0", "layernorm", "\"e4\",\"g0\",\"c0\"", "h")
             BL_PROJ("q", "wq", "bq") BL_PROJ("k", "wk", "bk") BL_PROJ("v", "wv", "bv")
             BL_N("att", "attention", "\"q3\",\"k3\",\"v3\"", "o")
             "{\"name\":\"to\",\"op\":\"transpose\",\"inputs\":[\"o\"],\"outputs\":[\"o1\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
             "{\"name\":\"ro\",\"op\":\"reshape\",\"inputs\":[\"o1\"],\"outputs\":[\"o2\"],\"attrs\":{\"shape\":[%2$s,%3$s,128]}},"
             BL_N("proj", "matmul", "\"o2\",\"wo\"", "p0") BL_N("pb", "add", "\"p0\",\"bo\"", "p1")
             BL_N("res1", "add", "\"p1\",\"h\"", "r1") BL_N("ln1", "layernorm", "\"r1\",\"g1\",\"c1\"", "h1")
             BL_N("fc1", "matmul", "\"h1\",\"w1\"", "f0") BL_N("fb1", "add", "\"f0\",\"d1\"", "f1")
             BL_N("act", "gelu", "\"f1\"", "f2") BL_N("fc2", "matmul", "\"f2\",\"w2\"", "f3")
             BL_N("fb2", "add", "\"f3\",\"d2\"", "f4") BL_N("res2", "add", "\"f4\",\"h1\"", "r2")
             "{\"name\":\"ln2\",\"op\":\"layernorm\",\"inputs\":[\"r2\",\"g2\",\"c2\"],\"outputs\":[\"y\"]}],"
             "\"outputs\":[\"y\"]}}",
             dims, b, s, named ? "512" : "64", named ? "\"slice\"" : "\"reshape\"", cut);
#undef BL_W
#undef BL_N
#undef BL_PROJ
    return buf;
}

static void test_dims_bert_layer(void)
{
    graph_request rq;
    graph_plan p;
    proto_error e;
    int steps[2] = {-1, -1}, prepared[2] = {-1, -1};
    for (int named = 0; named < 2; named++) {
        int r = plan_of(bert_layer(named), &rq, &p, &e);
        CHECK(r == 0, "the %s BERT layer refused: %s %s", named ? "named" : "fixed", e.field, e.message);
        if (r)
            continue;
        steps[named] = forward_steps(&p);
        prepared[named] = p.n_prepare;
        int copies = 0;
        for (int k = 0; k < p.n_kernels; k++)
            copies += p.kernels[k].op->kind == TUNER_OP_COPY;
        /* gather + adds, 3 layernorms, q, k, v, attention, the projection with its residual, fc1
         * with GELU, fc2 with its residual; the position and token-type gathers prepared. */
        CHECK(steps[named] == 11 && prepared[named] == 2 && copies == 0 && count_kind(&p, TUNER_OP_ATTENTION) == 1,
              "%s: %d steps, %d prepared, %d copies", named ? "named" : "fixed", steps[named], prepared[named], copies);
        graph_plan_free(&p);
        graph_request_free(&rq);
    }
    CHECK(steps[0] == steps[1] && prepared[0] == prepared[1], "fixed %d+%d kernels, named %d+%d", steps[0],
          prepared[0], steps[1], prepared[1]);
}

/* Dynamic FP8 quantization as torchao's float8 recipes trace it (issue 41): amax = max |x| over
 * the whole tensor in f32, scale = 448 / amax (clamped away from 0), x * scale clamped to the
 * format's range and cast to f8e4m3; and the way back, an FP8 input cast to bf16 and scaled.
 * The plan reads x twice as bf16 and writes FP8 bytes, nothing else of its size: one reduce of x
 * (abs its prologue; the cast to f32 and the clamp its epilogue: reduce_through_upcast), the
 * scale's tiny kernel and one elementwise kernel that multiplies by the scale, clamps and casts,
 * reading x itself as a bf16 operand (split_upcasts), not an f32 copy. */
static void test_fp8_quantize(void)
{
    graph_request rq;
    graph_plan p;
    const char *q =
        "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[64,256],\"dtype\":\"bf16\"}],"
        "\"weights\":[{\"name\":\"fmax\",\"shape\":[1],\"dtype\":\"f32\"}],\"nodes\":["
        "{\"op\":\"cast\",\"inputs\":[\"x\"],\"outputs\":[\"xf\"],\"attrs\":{\"dtype\":\"f32\"}},"
        "{\"op\":\"abs\",\"inputs\":[\"xf\"],\"outputs\":[\"a\"]},"
        "{\"op\":\"reduce\",\"inputs\":[\"a\"],\"outputs\":[\"m\"],\"attrs\":{\"kind\":\"max\",\"axes\":[0,1]}},"
        "{\"op\":\"clamp\",\"inputs\":[\"m\"],\"outputs\":[\"mc\"],\"attrs\":{\"min\":1e-12}},"
        "{\"op\":\"div\",\"inputs\":[\"fmax\",\"mc\"],\"outputs\":[\"s\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"xf\",\"s\"],\"outputs\":[\"y\"]},"
        "{\"op\":\"clamp\",\"inputs\":[\"y\"],\"outputs\":[\"yc\"],\"attrs\":{\"min\":-448,\"max\":448}},"
        "{\"op\":\"cast\",\"inputs\":[\"yc\"],\"outputs\":[\"q\"],\"attrs\":{\"dtype\":\"f8e4m3\"}}],"
        "\"outputs\":[\"q\",\"s\"]}}";
    if (plan_ok(q, &rq, &p)) {
        int reduces = 0, quantizers = 0;
        for (int k = 0; k < p.n_kernels; k++) {
            const tuner_op *op = p.kernels[k].op;
            reduces += op->kind == TUNER_OP_REDUCE && op->attrs.reduce.kind == TUNER_REDUCE_MAX &&
                       op->inputs[0].dtype == TUNER_BF16 && op->output.dtype == TUNER_F32;
            if (op->kind == TUNER_OP_ELEMENTWISE && op->output.dtype == TUNER_F8E4M3) {
                quantizers++;
                CHECK(op->n_inputs == 2 && op->inputs[1].dtype == TUNER_BF16 && op->epilogue.n == 3 &&
                          op->epilogue.steps[op->epilogue.n - 1].kind == TUNER_EW_CAST,
                      "the quantizing kernel: %s", p.kernels[k].request);
            }
        }
        CHECK(reduces == 1 && quantizers == 1 && p.n_kernels == 3,
              "%d kernels, %d max reductions, %d quantizers",
              p.n_kernels, reduces, quantizers);
        plan_done(&rq, &p);
    }
    /* Dequantize: an f8e5m2 input and its f32 scale, to bf16; an FP8 tensor may be reshaped. */
    const char *d =
        "{\"graph\":{\"inputs\":[{\"name\":\"q\",\"shape\":[64,256],\"dtype\":\"f8e5m2\"},"
        "{\"name\":\"s\",\"shape\":[64,1],\"dtype\":\"f32\"}],\"nodes\":["
        "{\"op\":\"reshape\",\"inputs\":[\"q\"],\"outputs\":[\"qr\"],\"attrs\":{\"shape\":[64,256]}},"
        "{\"op\":\"cast\",\"inputs\":[\"qr\"],\"outputs\":[\"qf\"],\"attrs\":{\"dtype\":\"f32\"}},"
        "{\"op\":\"div\",\"inputs\":[\"qf\",\"s\"],\"outputs\":[\"xf\"]},"
        "{\"op\":\"cast\",\"inputs\":[\"xf\"],\"outputs\":[\"x\"],\"attrs\":{\"dtype\":\"bf16\"}}],"
        "\"outputs\":[\"x\"]}}";
    if (plan_ok(d, &rq, &p)) {
        const tuner_op *op = p.kernels[0].op;
        CHECK(p.n_kernels >= 1 && op->kind == TUNER_OP_ELEMENTWISE && op->inputs[0].dtype == TUNER_F8E5M2 &&
                  p.kernels[p.n_kernels - 1].op->output.dtype == TUNER_BF16,
              "%d kernels: %s", p.n_kernels, p.kernels[0].request);
        plan_done(&rq, &p);
    }
}

/* An FP8 linear layer as torch._scaled_mm runs it (issue 41): x quantized per row (amax over the
 * row, scale = 448 / amax), a weight [N, K] in f8e4m3 with a tensor scale, transposed (B column-
 * major, which folds into trans_b), the matmul with row and tensor scales writing bf16, and a bias
 * that fuses into its epilogue. For sm_90a; other targets are refused at the matmul node with the
 * reason, and an FP8 matmul node with a non-FP8 operand or a scale the wrong shape at its own. */
static void test_fp8_linear(void)
{
#define FP8_LINEAR(ARCH, WDT, SB)                                                                                       \
    "{\"arch\":\"" ARCH "\",\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[64,256],\"dtype\":\"bf16\"}],"             \
    "\"weights\":[{\"name\":\"w\",\"shape\":[128,256],\"dtype\":\"" WDT "\"},"                                       \
    "{\"name\":\"sw\",\"shape\":" SB ",\"dtype\":\"f32\"},{\"name\":\"fmax\",\"shape\":[1],\"dtype\":\"f32\"},"         \
    "{\"name\":\"bias\",\"shape\":[128],\"dtype\":\"bf16\"}],\"nodes\":["                                           \
    "{\"op\":\"cast\",\"inputs\":[\"x\"],\"outputs\":[\"xf\"],\"attrs\":{\"dtype\":\"f32\"}},"                          \
    "{\"op\":\"abs\",\"inputs\":[\"xf\"],\"outputs\":[\"a\"]},"                                                     \
    "{\"op\":\"reduce\",\"inputs\":[\"a\"],\"outputs\":[\"m\"],\"attrs\":{\"kind\":\"max\",\"axis\":1,\"keepdim\":true}},"  \
    "{\"op\":\"clamp\",\"inputs\":[\"m\"],\"outputs\":[\"mc\"],\"attrs\":{\"min\":1e-12}},"                         \
    "{\"op\":\"div\",\"inputs\":[\"fmax\",\"mc\"],\"outputs\":[\"s\"]},"                                            \
    "{\"op\":\"div\",\"inputs\":[\"mc\",\"fmax\"],\"outputs\":[\"sinv\"]},"                                         \
    "{\"op\":\"mul\",\"inputs\":[\"xf\",\"s\"],\"outputs\":[\"y\"]},"                                               \
    "{\"op\":\"clamp\",\"inputs\":[\"y\"],\"outputs\":[\"yc\"],\"attrs\":{\"min\":-448,\"max\":448}},"              \
    "{\"op\":\"cast\",\"inputs\":[\"yc\"],\"outputs\":[\"q\"],\"attrs\":{\"dtype\":\"f8e4m3\"}},"                      \
    "{\"op\":\"transpose\",\"inputs\":[\"w\"],\"outputs\":[\"wt\"],\"attrs\":{\"perm\":[1,0]}},"                      \
    "{\"op\":\"matmul\",\"inputs\":[\"q\",\"wt\",\"sinv\",\"sw\"],\"outputs\":[\"o\"],"                                \
    "\"attrs\":{\"scale_a\":\"row\",\"scale_b\":\"tensor\",\"out_dtype\":\"bf16\",\"fast_accum\":false}},"               \
    "{\"op\":\"add\",\"inputs\":[\"o\",\"bias\"],\"outputs\":[\"out\"]}],\"outputs\":[\"out\"]}}"
    graph_request rq;
    graph_plan p;
    if (plan_ok(FP8_LINEAR("sm_90a", "f8e4m3", "[1]"), &rq, &p)) {
        const tuner_op *mm = NULL;
        for (int k = 0; k < p.n_kernels; k++)
            if (p.kernels[k].op->kind == TUNER_OP_MATMUL)
                mm = p.kernels[k].op;
        CHECK(mm && mm->inputs[0].dtype == TUNER_F8E4M3 && mm->inputs[1].dtype == TUNER_F8E4M3 &&
                  mm->attrs.matmul.trans_b && !mm->attrs.matmul.trans_a && mm->inputs[1].shape[0] == 128 &&
                  mm->attrs.matmul.scale_a == TUNER_SCALE_ROW && mm->attrs.matmul.scale_b == TUNER_SCALE_TENSOR &&
                  !mm->attrs.matmul.fast_accum && mm->output.dtype == TUNER_BF16 && mm->epilogue.n == 1 &&
                  mm->n_inputs == 5,
              "the FP8 matmul: %s", mm ? "see the plan" : "none");
        for (int k = 0; mm && k < p.n_kernels; k++)
            if (p.kernels[k].op->kind == TUNER_OP_MATMUL)
                CHECK(strstr(p.kernels[k].request, "\"scale_a\":\"row\"") && strstr(p.kernels[k].request, "\"arch\":\"sm_90a\""),
                      "%s", p.kernels[k].request);
        plan_done(&rq, &p);
    }
    expect_error(FP8_LINEAR("sm_80", "f8e4m3", "[1]"), 422, "nodes[10]", "fp8 needs");
    expect_error(FP8_LINEAR("sm_90a", "bf16", "[1]"), 422, "nodes[10].inputs[1]", "same dtype");
    expect_error(FP8_LINEAR("sm_90a", "f8e4m3", "[2]"), 422, "nodes[10].inputs[3]", "one value");
    /* e4m3 x e5m2 is served. */
    if (plan_ok(FP8_LINEAR("sm_90a", "f8e5m2", "[1]"), &rq, &p))
        plan_done(&rq, &p);
#undef FP8_LINEAR
    /* Quantizing the matmul's output for the next layer: a cast to e4m3 ends its epilogue (both
     * saturate), one to e5m2 is an elementwise kernel's (torch's e5m2 gives inf, the epilogue's
     * cvt.rn.satfinite would not). */
#define FP8_OUT(DT)                                                                                                    \
    "{\"arch\":\"sm_90a\",\"graph\":{\"inputs\":[{\"name\":\"a\",\"shape\":[64,256],\"dtype\":\"f8e4m3\"}],"           \
    "\"weights\":[{\"name\":\"b\",\"shape\":[128,256],\"dtype\":\"f8e4m3\"}],\"nodes\":["                             \
    "{\"op\":\"transpose\",\"inputs\":[\"b\"],\"outputs\":[\"bt\"]},"                                                \
    "{\"op\":\"matmul\",\"inputs\":[\"a\",\"bt\"],\"outputs\":[\"o\"],\"attrs\":{\"out_dtype\":\"f16\"}},"              \
    "{\"op\":\"cast\",\"inputs\":[\"o\"],\"outputs\":[\"q\"],\"attrs\":{\"dtype\":\"" DT "\"}}],\"outputs\":[\"q\"]}}"
    if (plan_ok(FP8_OUT("f8e4m3"), &rq, &p)) {
        CHECK(p.n_kernels == 1 && p.kernels[0].op->output.dtype == TUNER_F8E4M3, "%d kernels", p.n_kernels);
        plan_done(&rq, &p);
    }
    if (plan_ok(FP8_OUT("f8e5m2"), &rq, &p)) {
        CHECK(p.n_kernels == 2 && p.kernels[0].op->kind == TUNER_OP_MATMUL &&
                  p.kernels[0].op->output.dtype == TUNER_F16 && p.kernels[1].op->kind == TUNER_OP_ELEMENTWISE &&
                  p.kernels[1].op->output.dtype == TUNER_F8E5M2,
              "%d kernels", p.n_kernels);
        plan_done(&rq, &p);
    }
#undef FP8_OUT
}

int main(void)
{
    test_mlp();
    test_bottleneck();
    test_errors();
    test_activations();
    test_resnet_stem();
    test_masks();
    test_options();
    test_folds();
    test_fallbacks();
    test_arena_and_size();
    test_layout();
    test_canonical();
    test_shape_nodes();
    test_embeddings();
    test_attention();
    test_attention_packed();
    test_gelu();
    test_views_below_steps();
    test_dims_plan();
    test_dims_inference();
    test_dims_errors();
    test_dims_attention();
    test_dims_slice_names();
    test_dims_bert_layer();
    test_fp8_quantize();
    test_fp8_linear();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("graph: all checks passed\n");
    return 0;
}
