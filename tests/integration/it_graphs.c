/* tests/integration/it_graphs.c - POST /v1/graphs against the real daemon: the examples come
 * back as at most 3 (the MLP block) and 4 (the ResNet bottleneck) forward steps whose PTX ptxas
 * accepts; a second request is answered from the caches; identical kernels of one graph are one
 * kernel; bad graphs are answered 422 naming the node; a graph job (wait:false) ends and its
 * plan is then answered at once; the routes' methods and ids; hidetctl graph's table; a
 * repeated graph is answered from the plan rendered last time only while its kernels are the
 * same ones. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static const cJSON *get(const cJSON *o, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

/* Every kernel of every step: its PTX fetched and checked by ptxas. Returns the forward steps. */
static int check_plan(const ht_daemon *d, const ht_resp *r, const char *arch, bool want_cached)
{
    const cJSON *steps = get(r->json, "steps"), *prep = get(r->json, "prepare");
    CHECK(cJSON_IsArray(steps) && cJSON_IsArray(prep) && cJSON_IsNumber(get(r->json, "arena_bytes")),
          "%.300s", r->body);
    const cJSON *phases[2] = {prep, steps};
    for (int ph = 0; ph < 2; ph++) {
        const cJSON *s;
        cJSON_ArrayForEach(s, phases[ph]) {
            const cJSON *ks = get(s, "kernel_set"), *b = get(s, "bindings");
            CHECK(cJSON_IsObject(ks) && cJSON_IsObject(b) && cJSON_IsString(get(b, "output")));
            if (!cJSON_IsObject(ks))
                continue;
            const cJSON *origin = get(ks, "origin");
            if (want_cached)
                CHECK(cJSON_IsString(origin) && strcmp(origin->valuestring, "local") == 0,
                      "origin %s", cJSON_IsString(origin) ? origin->valuestring : "?");
            const cJSON *k = get(ks, "key");
            if (!cJSON_IsString(k))
                continue;
            char path[128];
            snprintf(path, sizeof(path), "/v1/kernels/%s/ptx", k->valuestring);
            ht_resp p = ht_get(d, path);
            CHECK(p.status == 200 && ht_ptxas(p.body, strlen(p.body), arch) == 0, "ptx of %s",
                  k->valuestring);
            ht_resp_free(&p);
        }
    }
    return cJSON_GetArraySize(steps);
}

static void examples(const ht_daemon *d)
{
    char *mlp = ht_read_src("examples/graphs/mlp_block.json");
    char *res = ht_read_src("examples/graphs/resnet_bottleneck.json");
    CHECK(mlp && res);
    if (!mlp || !res) {
        free(mlp);
        free(res);
        return;
    }
    ht_resp r = ht_post(d, "/v1/graphs", mlp);
    CHECK(r.status == 200, "%ld %.300s", r.status, r.body);
    if (r.status == 200) {
        int n = check_plan(d, &r, "sm_90", false);
        CHECK(n >= 1 && n <= 3, "the MLP block has %d steps", n);
    }
    ht_resp_free(&r);
    r = ht_post(d, "/v1/graphs", res);
    CHECK(r.status == 200, "%ld %.300s", r.status, r.body);
    if (r.status == 200) {
        int n = check_plan(d, &r, "sm_90", false);
        CHECK(n >= 1 && n <= 4, "the bottleneck has %d steps", n);
        CHECK(cJSON_GetArraySize(get(r.json, "prepare")) == 6, "batchnorm scale and shift");
    }
    ht_resp_free(&r);
    /* Again: every kernel from the caches. */
    r = ht_post(d, "/v1/graphs", mlp);
    CHECK(r.status == 200 && check_plan(d, &r, "sm_90", true) <= 3);
    ht_resp_free(&r);

    /* The same graph for sm_80: other kernels, still accepted by ptxas for sm_80. */
    char *at = strstr(mlp, "\"sm_90\"");
    if (at) {
        memcpy(at, "\"sm_80\"", 7);
        r = ht_post(d, "/v1/graphs", mlp);
        CHECK(r.status == 200 && check_plan(d, &r, "sm_80", false) <= 3, "%.300s", r.body);
        ht_resp_free(&r);
    }
    free(mlp);
    free(res);
}

/* Layout ops that fold nowhere run as copy and concat kernels whose PTX ptxas accepts. */
static void layout_graph(const ht_daemon *d)
{
    const char *g =
        "{\"graph\":{\"inputs\":[{\"name\":\"q\",\"shape\":[2,64,8,32],\"dtype\":\"f16\"},"
        "{\"name\":\"k\",\"shape\":[2,64,8,32],\"dtype\":\"f16\"}],\"nodes\":["
        "{\"op\":\"transpose\",\"inputs\":[\"q\"],\"outputs\":[\"qt\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
        "{\"op\":\"scale\",\"inputs\":[\"qt\"],\"outputs\":[\"qs\"],\"attrs\":{\"value\":0.125}},"
        "{\"op\":\"slice\",\"inputs\":[\"k\"],\"outputs\":[\"ks\"],\"attrs\":{\"starts\":[16],\"ends\":[48],\"axes\":[1]}},"
        "{\"op\":\"transpose\",\"inputs\":[\"ks\"],\"outputs\":[\"kt\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
        "{\"op\":\"concat\",\"inputs\":[\"qs\",\"kt\"],\"outputs\":[\"y\"],\"attrs\":{\"axis\":2}}],"
        "\"outputs\":[\"y\"]},\"tune\":\"model\"}";
    ht_resp r = ht_post(d, "/v1/graphs", g);
    CHECK(r.status == 200, "%ld %.300s", r.status, r.body);
    if (r.status == 200) {
        int n = check_plan(d, &r, "sm_90", false);
        CHECK(n == 4, "transpose+scale, slice, transpose, concat: %d steps", n);
        const cJSON *y = cJSON_GetArrayItem(get(r.json, "outputs"), 0);
        const cJSON *shape = get(y, "shape");
        CHECK(cJSON_GetArraySize(shape) == 4 && cJSON_GetArrayItem(shape, 2)->valueint == 96);
    }
    ht_resp_free(&r);
}

/* BERT's embeddings with i64 ids as a graph input (tune none): the prepare phase gathers the
 * position rows, the forward steps are the token-type gather, the word gather with both adds,
 * and the layernorm; the plan names the ids' dtype, and every kernel's PTX passes ptxas. */
static void embedding_graph(const ht_daemon *d)
{
    const char *g =
        "{\"graph\":{\"inputs\":[{\"name\":\"ids\",\"shape\":[2,16],\"dtype\":\"i64\"},"
        "{\"name\":\"types\",\"shape\":[2,16],\"dtype\":\"i64\"}],"
        "\"weights\":[{\"name\":\"wemb\",\"shape\":[1000,256],\"dtype\":\"f16\"},"
        "{\"name\":\"temb\",\"shape\":[2,256],\"dtype\":\"f16\"},{\"name\":\"pemb\",\"shape\":[64,256],\"dtype\":\"f16\"},"
        "{\"name\":\"pos\",\"shape\":[16],\"dtype\":\"i32\"},"
        "{\"name\":\"g\",\"shape\":[256],\"dtype\":\"f16\"},{\"name\":\"b\",\"shape\":[256],\"dtype\":\"f16\"}],"
        "\"nodes\":["
        "{\"op\":\"embedding\",\"inputs\":[\"wemb\",\"ids\"],\"outputs\":[\"e1\"]},"
        "{\"op\":\"embedding\",\"inputs\":[\"temb\",\"types\"],\"outputs\":[\"e2\"]},"
        "{\"op\":\"add\",\"inputs\":[\"e1\",\"e2\"],\"outputs\":[\"e3\"]},"
        "{\"op\":\"index_select\",\"inputs\":[\"pemb\",\"pos\"],\"outputs\":[\"e4\"],\"attrs\":{\"axis\":0}},"
        "{\"op\":\"add\",\"inputs\":[\"e3\",\"e4\"],\"outputs\":[\"e5\"]},"
        "{\"op\":\"layernorm\",\"inputs\":[\"e5\",\"g\",\"b\"],\"outputs\":[\"y\"]}],"
        "\"outputs\":[\"y\"]},\"tune\":\"none\"}";
    ht_resp r = ht_post(d, "/v1/graphs", g);
    CHECK(r.status == 200, "%ld %.300s", r.status, r.body);
    if (r.status == 200) {
        int n = check_plan(d, &r, "sm_90", false);
        CHECK(n == 3, "token-type gather, word gather + adds, layernorm: %d steps", n);
        CHECK(cJSON_GetArraySize(get(r.json, "prepare")) == 1, "one prepare step (the position rows)");
        const cJSON *in = cJSON_GetArrayItem(get(r.json, "inputs"), 0);
        CHECK(in && cJSON_IsString(get(in, "dtype")) && !strcmp(get(in, "dtype")->valuestring, "i64"), "%.300s", r.body);
        CHECK(strstr(r.body, "\"op\":\"gather\"") != NULL, "no gather request in the plan");
    }
    ht_resp_free(&r);
    /* An integer tensor into a step is refused at the node. */
    r = ht_post(d, "/v1/graphs",
                "{\"graph\":{\"inputs\":[{\"name\":\"ids\",\"shape\":[2,16],\"dtype\":\"i64\"}],\"nodes\":["
                "{\"op\":\"relu\",\"inputs\":[\"ids\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}}");
    const cJSON *field = get(get(r.json, "error"), "field");
    CHECK(r.status == 422 && cJSON_IsString(field) && !strcmp(field->valuestring, "nodes[0].inputs[0]"), "%ld %.300s",
          r.status, r.body);
    ht_resp_free(&r);
}

/* issue 37's shape nodes through the real daemon (tune none): a pad with a relu, a mean over
 * [2,3] (one kernel), a sum over [1,3] (a chain of two), log_softmax, a softmax over the
 * channels (transposes around the row kernel), an expand that the add reads as a broadcast
 * (no kernel) and one a relu needs (a zero-stride copy), and a QKV split + permute. Every
 * kernel's PTX passes ptxas; a reflect pad is refused at its field. */
static void shape_nodes_graph(const ht_daemon *d)
{
    const char *g =
        "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[2,8,6,6],\"dtype\":\"f16\"},"
        "{\"name\":\"h\",\"shape\":[2,16,96],\"dtype\":\"f16\"}],\"nodes\":["
        "{\"op\":\"pad\",\"inputs\":[\"x\"],\"outputs\":[\"xp\"],\"attrs\":{\"pads\":[1,1,1,1],\"value\":0}},"
        "{\"op\":\"relu\",\"inputs\":[\"xp\"],\"outputs\":[\"xr\"]},"
        "{\"op\":\"reduce\",\"inputs\":[\"xr\"],\"outputs\":[\"m\"],\"attrs\":{\"kind\":\"mean\",\"axes\":[2,3]}},"
        "{\"op\":\"reduce\",\"inputs\":[\"xr\"],\"outputs\":[\"s\"],"
        "\"attrs\":{\"kind\":\"sum\",\"axes\":[1,3],\"keepdim\":true}},"
        "{\"op\":\"log_softmax\",\"inputs\":[\"m\"],\"outputs\":[\"lm\"],\"attrs\":{\"axis\":-1}},"
        "{\"op\":\"softmax\",\"inputs\":[\"xr\"],\"outputs\":[\"sx\"],\"attrs\":{\"axis\":1}},"
        "{\"op\":\"reshape\",\"inputs\":[\"lm\"],\"outputs\":[\"l4\"],\"attrs\":{\"shape\":[2,8,1,1]}},"
        "{\"op\":\"expand\",\"inputs\":[\"l4\"],\"outputs\":[\"le\"],\"attrs\":{\"shape\":[-1,-1,8,8]}},"
        "{\"op\":\"add\",\"inputs\":[\"sx\",\"le\"],\"outputs\":[\"y\"]},"
        "{\"op\":\"expand\",\"inputs\":[\"l4\"],\"outputs\":[\"l3\"],\"attrs\":{\"shape\":[2,8,3,3]}},"
        "{\"op\":\"relu\",\"inputs\":[\"l3\"],\"outputs\":[\"ex\"]},"
        "{\"op\":\"slice\",\"inputs\":[\"h\"],\"outputs\":[\"k\"],\"attrs\":{\"starts\":[32],\"ends\":[64],\"axes\":[2]}},"
        "{\"op\":\"reshape\",\"inputs\":[\"k\"],\"outputs\":[\"k4\"],\"attrs\":{\"shape\":[2,16,4,8]}},"
        "{\"op\":\"transpose\",\"inputs\":[\"k4\"],\"outputs\":[\"kh\"],\"attrs\":{\"perm\":[0,2,1,3]}}],"
        "\"outputs\":[\"y\",\"s\",\"ex\",\"kh\"]},\"arch\":\"sm_90\",\"tune\":\"none\"}";
    ht_resp r = ht_post(d, "/v1/graphs", g);
    CHECK(r.status == 200, "%ld %.300s", r.status, r.body);
    if (r.status == 200) {
        int n = check_plan(d, &r, "sm_90", false);
        /* pad+relu, mean, sum x2, log_softmax, transpose + softmax + transpose(+add), expand+relu,
         * slice, transpose */
        CHECK(n == 11, "%d steps", n);
        const cJSON *outs = get(r.json, "outputs");
        const cJSON *sh = get(cJSON_GetArrayItem(outs, 1), "shape");
        CHECK(cJSON_GetArraySize(sh) == 4 && cJSON_GetArrayItem(sh, 1)->valueint == 1 &&
              cJSON_GetArrayItem(sh, 2)->valueint == 8 && cJSON_GetArrayItem(sh, 3)->valueint == 1,
              "sum keepdim shape");
        sh = get(cJSON_GetArrayItem(outs, 3), "shape");
        CHECK(cJSON_GetArraySize(sh) == 4 && cJSON_GetArrayItem(sh, 1)->valueint == 4 &&
              cJSON_GetArrayItem(sh, 2)->valueint == 16, "permuted head shape");
    }
    ht_resp_free(&r);
    r = ht_post(d, "/v1/graphs",
                "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[2,8],\"dtype\":\"f16\"}],\"nodes\":["
                "{\"op\":\"pad\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"pads\":[1,1],\"mode\":\"reflect\"}}],"
                "\"outputs\":[\"y\"]},\"tune\":\"none\"}");
    const cJSON *err = get(r.json, "error");
    CHECK(r.status == 422 && cJSON_IsString(get(err, "field")) &&
              strcmp(get(err, "field")->valuestring, "nodes[0].attrs.mode") == 0,
          "%ld %.300s", r.status, r.body);
    ht_resp_free(&r);
}

/* Two identical blocks in one graph resolve one kernel; the steps still run twice. */
static void shared_kernels(const ht_daemon *d)
{
    const char *g =
        "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[128,256],\"dtype\":\"f16\"}],"
        "\"weights\":[{\"name\":\"w\",\"shape\":[256,256],\"dtype\":\"f16\"}],\"nodes\":["
        "{\"op\":\"matmul\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"a\"]},"
        "{\"op\":\"relu\",\"inputs\":[\"a\"],\"outputs\":[\"b\"]},"
        "{\"op\":\"matmul\",\"inputs\":[\"b\",\"w\"],\"outputs\":[\"c\"]},"
        "{\"op\":\"relu\",\"inputs\":[\"c\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]},"
        "\"tune\":\"none\"}";
    ht_resp r = ht_post(d, "/v1/graphs", g);
    CHECK(r.status == 200, "%ld %.300s", r.status, r.body);
    const cJSON *steps = get(r.json, "steps");
    CHECK(cJSON_GetArraySize(steps) == 2);
    if (cJSON_GetArraySize(steps) == 2) {
        const cJSON *k0 = get(get(cJSON_GetArrayItem(steps, 0), "kernel_set"), "key");
        const cJSON *k1 = get(get(cJSON_GetArrayItem(steps, 1), "kernel_set"), "key");
        CHECK(cJSON_IsString(k0) && cJSON_IsString(k1) && !strcmp(k0->valuestring, k1->valuestring));
    }
    ht_resp_free(&r);
}

/* A chain of diamonds on weights, t_i = t_{i-1} + t_{i-1}, 48 deep: the partitioner once walked
 * every path back to the weights (2^48 steps on the daemon's loop thread, a hang any client
 * could cause); it must plan it at once and go on serving. */
static void diamond_chain(const ht_daemon *d)
{
    enum { DEPTH = 48 };
    char *g = malloc(16384);
    if (!g)
        return;
    int n = snprintf(g, 16384,
                     "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[64],\"dtype\":\"f16\"}],"
                     "\"weights\":[{\"name\":\"t0\",\"shape\":[64],\"dtype\":\"f16\"}],\"nodes\":[");
    for (int i = 1; i <= DEPTH; i++)
        n += snprintf(g + n, 16384 - (size_t)n,
                      "{\"op\":\"add\",\"inputs\":[\"t%d\",\"t%d\"],\"outputs\":[\"t%d\"]},", i - 1, i - 1, i);
    snprintf(g + n, 16384 - (size_t)n,
             "{\"op\":\"add\",\"inputs\":[\"x\",\"t%d\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]},"
             "\"tune\":\"none\"}",
             DEPTH);
    ht_resp r = ht_post(d, "/v1/graphs", g);
    CHECK(r.status == 200, "diamond chain: %ld %.300s", r.status, r.body);
    ht_resp_free(&r);
    ht_resp h = ht_get(d, "/healthz");
    CHECK(h.status == 200, "healthz after the diamond chain: %ld", h.status);
    ht_resp_free(&h);
    free(g);
}

static void bad_graphs(const ht_daemon *d)
{
    static const struct {
        const char *body, *code, *field;
    } cases[] = {
        {"{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[8],\"dtype\":\"f32\"}],\"nodes\":["
         "{\"op\":\"relu\",\"inputs\":[\"b\"],\"outputs\":[\"a\"]},"
         "{\"op\":\"relu\",\"inputs\":[\"a\"],\"outputs\":[\"b\"]}],\"outputs\":[\"b\"]}}",
         "invalid_graph", "nodes[0].inputs[0]"},
        {"{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[8],\"dtype\":\"f32\"}],\"nodes\":["
         "{\"op\":\"add\",\"inputs\":[\"x\",\"ghost\"],\"outputs\":[\"a\"]}],\"outputs\":[\"a\"]}}",
         "invalid_graph", "nodes[0].inputs[1]"},
        {"{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[8,16],\"dtype\":\"f16\"},"
         "{\"name\":\"w\",\"shape\":[8,16],\"dtype\":\"f16\"}],\"nodes\":["
         "{\"op\":\"relu\",\"inputs\":[\"x\"],\"outputs\":[\"a\"]},"
         "{\"op\":\"matmul\",\"inputs\":[\"a\",\"w\"],\"outputs\":[\"b\"]}],\"outputs\":[\"b\"]}}",
         NULL, "nodes[1].inputs[1]"},
        {"{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[8],\"dtype\":\"f32\"}],\"nodes\":["
         "{\"op\":\"relu\",\"inputs\":[\"x\"],\"outputs\":[\"a\"]},"
         "{\"op\":\"convolve\",\"inputs\":[\"a\"],\"outputs\":[\"b\"]}],\"outputs\":[\"b\"]}}",
         "unknown_op", "nodes[1].op"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ht_resp r = ht_post(d, "/v1/graphs", cases[i].body);
        const cJSON *err = get(r.json, "error");
        const cJSON *field = get(err, "field");
        CHECK(r.status == 422 && cJSON_IsString(field) && !strcmp(field->valuestring, cases[i].field) &&
                  (!cases[i].code || !strcmp(ht_error_code(&r), cases[i].code)),
              "case %zu: %ld %.300s", i, r.status, r.body);
        ht_resp_free(&r);
    }
    ht_resp r = ht_post(d, "/v1/graphs", "{\"graph\": [");
    CHECK(r.status == 400 && !strcmp(ht_error_code(&r), "invalid_json"), "%ld", r.status);
    ht_resp_free(&r);
    /* An escaped NUL is refused as in /v1/kernels: cJSON would read "relu\u0000junk" as relu. */
    r = ht_post(d, "/v1/graphs",
                "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[8],\"dtype\":\"f32\"}],\"nodes\":["
                "{\"op\":\"relu\\u0000junk\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]},"
                "\"tune\":\"none\"}");
    CHECK(r.status == 400 && !strcmp(ht_error_code(&r), "invalid_json"), "\\u0000 in an op: %ld %.300s", r.status,
          r.body);
    ht_resp_free(&r);
    /* The daemon still serves. */
    r = ht_get(d, "/healthz");
    CHECK(r.status == 200);
    ht_resp_free(&r);
}

/* Masks through the real daemon (tune none): an attention block, matmul -> scale ->
 * masked_fill(causal, -inf) -> softmax -> matmul, is three kernels for sm_90 and for sm_80;
 * comparisons, where and log fuse into a chain; every kernel's PTX passes ptxas; and a kernel
 * request with the same steps, -inf spelt as a string, is answered too. */
static void mask_graph(const ht_daemon *d)
{
    const char *g =
        "{\"graph\":{\"inputs\":[{\"name\":\"q\",\"shape\":[8,128,64],\"dtype\":\"f16\"},"
        "{\"name\":\"k\",\"shape\":[8,128,64],\"dtype\":\"f16\"},{\"name\":\"v\",\"shape\":[8,128,64],\"dtype\":\"f16\"},"
        "{\"name\":\"causal\",\"shape\":[128,128],\"dtype\":\"f16\"},{\"name\":\"x\",\"shape\":[8,128,64],\"dtype\":\"f16\"},"
        "{\"name\":\"c\",\"shape\":[128,1],\"dtype\":\"f32\"}],\"nodes\":["
        "{\"op\":\"transpose\",\"inputs\":[\"k\"],\"outputs\":[\"kt\"],\"attrs\":{\"perm\":[0,2,1]}},"
        "{\"op\":\"matmul\",\"inputs\":[\"q\",\"kt\"],\"outputs\":[\"s\"]},"
        "{\"op\":\"scale\",\"inputs\":[\"s\"],\"outputs\":[\"s1\"],\"attrs\":{\"value\":0.125}},"
        "{\"op\":\"masked_fill\",\"inputs\":[\"s1\",\"causal\"],\"outputs\":[\"s2\"],\"attrs\":{\"value\":\"-inf\"}},"
        "{\"op\":\"softmax\",\"inputs\":[\"s2\"],\"outputs\":[\"p\"]},"
        "{\"op\":\"matmul\",\"inputs\":[\"p\",\"v\"],\"outputs\":[\"o\"]},"
        "{\"op\":\"gt\",\"inputs\":[\"o\",\"x\"],\"outputs\":[\"m\"]},"
        "{\"op\":\"where\",\"inputs\":[\"c\",\"m\",\"x\"],\"outputs\":[\"w\"]},"
        "{\"op\":\"ne\",\"inputs\":[\"w\"],\"outputs\":[\"n\"],\"attrs\":{\"value\":0}},"
        "{\"op\":\"log\",\"inputs\":[\"n\"],\"outputs\":[\"y\"]}],"
        "\"outputs\":[\"y\"]},\"tune\":\"none\",\"arch\":\"sm_90\"}";
    for (int a = 0; a < 2; a++) {
        char *body = strdup(g);
        char *at = body ? strstr(body, "\"sm_90\"") : NULL;
        if (a == 1 && at)
            memcpy(at, "\"sm_80\"", 7);
        ht_resp r = ht_post(d, "/v1/graphs", body);
        CHECK(r.status == 200, "%ld %.400s", r.status, r.body);
        if (r.status == 200) {
            int n = check_plan(d, &r, a ? "sm_80" : "sm_90", false);
            /* qk with scale and masked_fill; softmax; pv with gt, where, ne and log. */
            CHECK(n == 3, "the masked attention block has %d steps", n);
        }
        ht_resp_free(&r);
        free(body);
    }
    ht_resp r = ht_post(d, "/v1/kernels",
                        "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[64,128],\"dtype\":\"bf16\"},"
                        "{\"shape\":[128],\"dtype\":\"bf16\"}],\"prologue\":[{\"op\":\"masked_fill\",\"input\":0,"
                        "\"operand\":1,\"value\":\"-inf\"}],\"tune\":\"none\",\"arch\":\"sm_90\"}");
    CHECK(r.status == 200, "%ld %.300s", r.status, r.body);
    ht_resp_free(&r);
    r = ht_post(d, "/v1/graphs",
                "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[4,8],\"dtype\":\"f16\"},"
                "{\"name\":\"m\",\"shape\":[8],\"dtype\":\"f16\"}],\"nodes\":[{\"op\":\"masked_fill\","
                "\"inputs\":[\"x\",\"m\"],\"outputs\":[\"y\"],\"attrs\":{\"value\":\"-infinity\"}}],\"outputs\":[\"y\"]},"
                "\"tune\":\"none\"}");
    const cJSON *field = get(get(r.json, "error"), "field");
    CHECK(r.status == 400 && cJSON_IsString(field) && !strcmp(field->valuestring, "nodes[0].attrs.value"), "%ld %.300s",
          r.status, r.body);
    ht_resp_free(&r);
}

/* hidetctl graph prints the plan as a table. */
static void hidetctl_graph(const ht_daemon *d)
{
    const char *ctl = getenv("HIDETCTL_BIN");
    const char *src = getenv("HIDETD_SRC");
    CHECK(ctl && src, "HIDETCTL_BIN and HIDETD_SRC");
    if (!ctl || !src)
        return;
    char *out = NULL;
    int st = ht_sh(&out, "'%s' --socket '%s' graph '%s/examples/graphs/resnet_bottleneck.json' 2>&1",
                   ctl, d->socket, src);
    CHECK(st == 0 && out && strstr(out, "3 steps, 6 prepare steps") &&
              strstr(out, "conv3, bn3, residual, relu3") && strstr(out, "r2, w3, bn3#scale, bn3#shift, x -> y"),
          "status %d:\n%s", st, out ? out : "");
    free(out);
    st = ht_sh(&out, "echo '{\"graph\":{}}' | '%s' --socket '%s' graph - 2>&1", ctl, d->socket);
    CHECK(st == 1 && out && strstr(out, "422") == NULL && strstr(out, "graph.nodes"), "status %d:\n%s", st,
          out ? out : "");
    free(out);
    /* tune measure for an arch no GPU worker here can time (none at all, or not sm_80) is
     * answered by the cost model, and hidetctl graph says so as hidetctl kernel does. */
    st = ht_sh(&out, "echo '{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[64,96],\"dtype\":"
                     "\"f32\"}],\"nodes\":[{\"op\":\"relu\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}],"
                     "\"outputs\":[\"y\"]}}' | '%s' --socket '%s' graph - --tune measure --arch sm_80 2>&1",
               ctl, d->socket);
    CHECK(st == 0 && out && strstr(out, "\nwarning: ") && strstr(out, "cost model"), "status %d:\n%s", st,
          out ? out : "");
    free(out);
    /* ... and so does warm, once in its summary. */
    st = ht_sh(&out, "echo '{\"op\":\"softmax\",\"inputs\":[{\"shape\":[64,96],\"dtype\":\"f32\"}]}' | "
                     "'%s' --socket '%s' warm - --tune measure --arch sm_80 2>&1", ctl, d->socket);
    CHECK(st == 0 && out && strstr(out, "warning: 1 answer: ") && strstr(out, "cost model"), "status %d:\n%s",
          st, out ? out : "");
    free(out);
}

static void jobs_and_routes(const ht_daemon *d)
{
    const char *g = "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[333,77],\"dtype\":\"f32\"}],"
                    "\"nodes\":[{\"op\":\"softmax\",\"inputs\":[\"x\"],\"outputs\":[\"s\"]},"
                    "{\"op\":\"scale\",\"inputs\":[\"s\"],\"outputs\":[\"y\"],\"attrs\":{\"value\":3}}],"
                    "\"outputs\":[\"y\"]},\"tune\":\"model\",\"wait\":false}";
    ht_resp r = ht_post(d, "/v1/graphs", g);
    CHECK(r.status == 202 || r.status == 200, "%ld %.300s", r.status, r.body);
    if (r.status == 202) {
        /* A graph job reads like a kernel job: {"job": {...}}, ids as strings. */
        const cJSON *job = get(r.json, "job"), *id = get(job, "id"), *kj = get(job, "jobs");
        CHECK(cJSON_IsString(id) && cJSON_IsString(get(job, "state")), "%.300s", r.body);
        CHECK(cJSON_IsArray(kj) && (cJSON_GetArraySize(kj) == 0 ||
                                    cJSON_IsString(cJSON_GetArrayItem(kj, 0))), "%.300s", r.body);
        char path[64];
        snprintf(path, sizeof(path), "/v1/graphs/jobs/%s", cJSON_IsString(id) ? id->valuestring : "0");
        CHECK(cJSON_IsString(get(job, "url")) && !strcmp(get(job, "url")->valuestring, path),
              "%.300s", r.body);
        bool done = false;
        for (int i = 0; i < 600 && !done; i++) {
            ht_resp j = ht_get(d, path);
            const cJSON *st = get(get(j.json, "job"), "state");
            CHECK(j.status == 200 && cJSON_IsString(st), "%ld %.200s", j.status, j.body);
            done = !cJSON_IsString(st) || strcmp(st->valuestring, "running") != 0;
            if (done)
                CHECK(!strcmp(st->valuestring, "done") &&
                      get(get(j.json, "job"), "kernels_done")->valueint == 1,
                      "%.300s", j.body);
            ht_resp_free(&j);
            if (!done)
                usleep(100 * 1000);
        }
        CHECK(done, "the graph job did not end");
    }
    ht_resp_free(&r);
    r = ht_post(d, "/v1/graphs", g);
    CHECK(r.status == 200 && cJSON_GetArraySize(get(r.json, "steps")) == 1, "%ld %.200s", r.status,
          r.body);
    ht_resp_free(&r);

    r = ht_get(d, "/v1/graphs/jobs/987654");
    CHECK(r.status == 404, "%ld", r.status);
    ht_resp_free(&r);
    r = ht_get(d, "/v1/graphs/jobs/x1");
    CHECK(r.status == 400, "%ld", r.status);
    ht_resp_free(&r);
    r = ht_get(d, "/v1/graphs");
    CHECK(r.status == 405, "%ld", r.status);
    ht_resp_free(&r);
}

/* The kernel set of a one-step graph's step (borrowed from r). */
static const cJSON *only_set(const ht_resp *r)
{
    return get(cJSON_GetArrayItem(get(r->json, "steps"), 0), "kernel_set");
}

/* The daemon answers a graph it planned before with the plan it rendered then, skipping the
 * parse (same bytes) or the rendering (same kernel sets, target and tune mode): the answer must
 * still be what a fresh rendering would be. Another target, and a kernel re-tuned in between,
 * must show in the next answer. Its own daemon, with the stand-in worker (the re-tune
 * measures). */
static void repeated_graph(void)
{
    ht_daemon dd;
    ht_init(&dd);
    ht_arg(&dd, "--workers");
    ht_arg(&dd, "standin");
    if (ht_start(&dd) != 0) {
        CHECK(false, "hidetd with the stand-in worker did not start");
        return;
    }
    const ht_daemon *d = &dd;
    const char *g = "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[333,77],\"dtype\":\"f32\"}],"
                    "\"nodes\":[{\"op\":\"softmax\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}],"
                    "\"outputs\":[\"y\"]},\"tune\":\"model\",\"arch\":\"sm_90\"}";
    /* The same graph in other bytes. */
    const char *g_spaced = "{ \"arch\": \"sm_90\", \"tune\": \"model\", \"graph\": { \"inputs\": [ { \"name\": \"x\", "
                           "\"shape\": [ 333, 77 ], \"dtype\": \"f32\" } ], \"nodes\": [ { \"op\": \"softmax\", "
                           "\"inputs\": [ \"x\" ], \"outputs\": [ \"y\" ] } ], \"outputs\": [ \"y\" ] } }";
    ht_resp first = ht_post(d, "/v1/graphs", g); /* tuned now (cached: false) or earlier */
    ht_resp a = ht_post(d, "/v1/graphs", g), b = ht_post(d, "/v1/graphs", g), c = ht_post(d, "/v1/graphs", g_spaced);
    CHECK(first.status == 200 && a.status == 200 && b.status == 200 && c.status == 200, "%ld %ld %ld %ld",
          first.status, a.status, b.status, c.status);
    const cJSON *ks = only_set(&a);
    CHECK(cJSON_IsTrue(get(ks, "cached")) && !strcmp(get(ks, "origin")->valuestring, "local"), "%.300s", a.body);
    CHECK(a.body && b.body && c.body && !strcmp(a.body, b.body) && !strcmp(a.body, c.body),
          "the same graph answered differently:\n%.300s\n%.300s", a.body, c.body);

    /* Another target: its own kernels and arch. */
    char *g80 = strdup(g);
    memcpy(strstr(g80, "sm_90"), "sm_80", 5);
    ht_resp e = ht_post(d, "/v1/graphs", g80);
    CHECK(e.status == 200 && !strcmp(get(e.json, "arch")->valuestring, "sm_80") &&
              !strcmp(get(only_set(&e), "arch")->valuestring, "sm_80"),
          "%ld %.300s", e.status, e.body);
    free(g80);

    /* The graph's kernel re-tuned with measurements: the next answer embeds the new kernel set
     * (an answer kept from before would still name the old one). */
    ht_resp k = ht_post(d, "/v1/kernels", "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[333,77],\"dtype\":\"f32\"}],"
                                          "\"arch\":\"sm_90\",\"tune\":\"measure\"}");
    CHECK(k.status == 200 && cJSON_IsTrue(get(k.json, "measured")), "%ld %.300s", k.status, k.body);
    ht_resp f = ht_post(d, "/v1/graphs", g);
    const cJSON *kk = get(k.json, "key"), *fk = get(only_set(&f), "key");
    CHECK(f.status == 200 && cJSON_IsString(kk) && cJSON_IsString(fk) && !strcmp(kk->valuestring, fk->valuestring) &&
              cJSON_IsTrue(get(only_set(&f), "measured")),
          "after the re-tune the graph still answers %.300s", f.body);
    ht_resp *all[] = {&first, &a, &b, &c, &e, &k, &f};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        ht_resp_free(all[i]);
    CHECK(ht_stop(&dd, SIGTERM) == 0, "clean exit");
    ht_cleanup(&dd);
}

int main(void)
{
    ht_daemon d;
    ht_init(&d);
    if (ht_start(&d) != 0) {
        fprintf(stderr, "hidetd did not start\n");
        return 1;
    }
    examples(&d);
    layout_graph(&d);
    shape_nodes_graph(&d);
    embedding_graph(&d);
    shared_kernels(&d);
    diamond_chain(&d);
    bad_graphs(&d);
    mask_graph(&d);
    hidetctl_graph(&d);
    jobs_and_routes(&d);
    CHECK(ht_stop(&d, SIGTERM) == 0, "clean exit");
    ht_cleanup(&d);
    repeated_graph();
    return ht_finish("it_graphs");
}
