/* tests/integration/it_kernels.c - the foundation's end-to-end path: a matmul request over the Unix
 * socket compiles to PTX that ptxas accepts and a cubin that cuobjdump reads; the same request is
 * then a cache hit, also after a restart and after kill -9; the kernel set's URLs serve the code.
 * Also the newer ops' requests: pool2d, gather, attention (refusals by field; kernels where the
 * target has attention templates). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define MATMUL_REQ                                                                                 \
    "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[%d,64],\"dtype\":\"f16\"},"               \
    "{\"shape\":[64,256],\"dtype\":\"f16\"}],\"arch\":\"%s\",\"tune\":\"%s\"}"

static bool json_bool(const cJSON *o, const char *k)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, k));
}

static const char *json_str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* Checks one kernel set answer; returns its key (malloc'd) or NULL. */
static char *check_kernel_set(const ht_resp *r, const char *arch, bool want_cached)
{
    CHECK(r->status == 200, "status %ld body %.500s", r->status, r->body);
    if (r->status != 200 || !r->json)
        return NULL;
    const cJSON *j = r->json;
    const char *key = json_str(j, "key");
    CHECK(strlen(key) == 64, "key '%s'", key);
    CHECK(json_bool(j, "cached") == want_cached, "cached should be %d: %.300s", want_cached, r->body);
    CHECK(cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(j, "measured")), "measured missing");
    const cJSON *ks = cJSON_GetObjectItemCaseSensitive(j, "kernels");
    CHECK(cJSON_IsArray(ks) && cJSON_GetArraySize(ks) >= 1, "kernels missing");
    const cJSON *k;
    cJSON_ArrayForEach(k, ks) {
        CHECK(*json_str(k, "name"), "kernel name missing");
        CHECK(!strcmp(json_str(k, "arch"), arch), "kernel arch '%s'", json_str(k, "arch"));
        const cJSON *grid = cJSON_GetObjectItemCaseSensitive(k, "grid");
        const cJSON *block = cJSON_GetObjectItemCaseSensitive(k, "block");
        CHECK(cJSON_GetArraySize(grid) == 3 && cJSON_GetArraySize(block) == 3, "grid/block");
        int threads = 1;
        const cJSON *b;
        cJSON_ArrayForEach(b, block) threads *= b->valueint;
        CHECK(threads >= 32 && threads <= 1024, "block threads %d", threads);
        CHECK(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(k, "shared_bytes")), "shared_bytes");
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(k, "params");
        CHECK(cJSON_GetArraySize(params) >= 3, "params (A, B, C at least)");
        char url[128];
        snprintf(url, sizeof(url), "/v1/kernels/%s/ptx", key);
        CHECK(!strcmp(json_str(k, "ptx_url"), url), "ptx_url '%s'", json_str(k, "ptx_url"));
        snprintf(url, sizeof(url), "/v1/kernels/%s/cubin", key);
        CHECK(!strcmp(json_str(k, "cubin_url"), url), "cubin_url '%s'", json_str(k, "cubin_url"));
    }
    CHECK(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(j, "schedule")), "schedule");
    return strdup(key);
}

static void check_code(const ht_daemon *d, const char *key, const char *arch, int sm)
{
    char path[160];
    snprintf(path, sizeof(path), "/v1/kernels/%s/ptx", key);
    ht_resp ptx = ht_get(d, path);
    CHECK(ptx.status == 200 && ptx.len > 100, "ptx status %ld len %zu", ptx.status, ptx.len);
    CHECK(strstr(ptx.body, ".target") != NULL, "no .target in PTX");
    CHECK(ht_ptxas(ptx.body, ptx.len, arch) == 0, "ptxas -arch=%s rejects the PTX", arch);

    snprintf(path, sizeof(path), "/v1/kernels/%s/cubin", key);
    ht_resp cubin = ht_get(d, path);
    CHECK(cubin.status == 200 && cubin.len > 64, "cubin status %ld", cubin.status);
    CHECK(strstr(cubin.content_type, "octet-stream"), "cubin content type '%s'", cubin.content_type);
    CHECK(cubin.len > 4 && !memcmp(cubin.body, "\177ELF", 4), "cubin is not an ELF image");
    int rc = ht_cuobjdump(cubin.body, cubin.len, sm);
    if (rc == 1)
        printf("note: cuobjdump not installed; cubin checked as ELF only\n");
    else
        CHECK(rc == 0, "cuobjdump cannot read the cubin");
    ht_resp_free(&ptx);
    ht_resp_free(&cubin);
}

/* attention through the real daemon. Refusals, each with its status (422: the request language
 * accepts the JSON, the shapes do not fit) and field, after which the daemon still serves: a head
 * dim of k other than q's, Hq not a multiple of Hkv, a mask that does not broadcast to
 * [B,Hq,S,Skv], a prologue, scale 0, an integer mask, and the packed layout's kv_heads. */
#define ATT_QKV(q, kv)                                                                             \
    "{\"op\":\"attention\",\"inputs\":[{\"shape\":" q ",\"dtype\":\"f16\"},{\"shape\":" kv               \
    ",\"dtype\":\"f16\"},{\"shape\":" kv ",\"dtype\":\"f16\"}"
static void check_attention_refusals(const ht_daemon *d)
{
    static const struct {
        const char *body, *code, *field;
    } refused[] = {
        {"{\"op\":\"attention\",\"inputs\":[{\"shape\":[1,8,128,64],\"dtype\":\"f16\"},"
         "{\"shape\":[1,8,128,128],\"dtype\":\"f16\"},{\"shape\":[1,8,128,64],\"dtype\":\"f16\"}],\"arch\":\"sm_90a\"}",
         "shape_mismatch", "inputs[1].shape"},
        {ATT_QKV("[1,12,128,64]", "[1,8,128,64]") "],\"arch\":\"sm_90\"}", "shape_mismatch", "inputs[1].shape"},
        {ATT_QKV("[1,64,12,64]", "[1,64,8,64]") "],\"attrs\":{\"layout\":\"bshd\"}}", "shape_mismatch",
         "inputs[1].shape"},
        {ATT_QKV("[1,8,128,64]", "[1,8,128,64]") ",{\"shape\":[1,8,64,128],\"dtype\":\"f32\"}]}", "shape_mismatch",
         "inputs[3].shape"},
        {ATT_QKV("[1,8,128,64]", "[1,8,128,64]") "],\"prologue\":[{\"op\":\"scale\",\"value\":0.5,\"input\":0}]}",
         "invalid_field", "prologue"},
        {ATT_QKV("[1,8,128,64]", "[1,8,128,64]") "],\"attrs\":{\"scale\":0}}", "invalid_field", "attrs.scale"},
        {ATT_QKV("[1,8,128,64]", "[1,8,128,64]") ",{\"shape\":[1,1,1,128],\"dtype\":\"i64\"}]}", "invalid_field",
         "inputs[3].dtype"},
        {ATT_QKV("[1,8,128,100]", "[1,8,128,100]") "]}", "invalid_field", "inputs[0].shape"},
        /* bshd_packed: kv_heads leaving no query head; kv_heads in another layout; qkv's heads
         * not three equal parts without kv_heads */
        {"{\"op\":\"attention\",\"inputs\":[{\"shape\":[1,128,36,64],\"dtype\":\"f16\"}],"
         "\"attrs\":{\"layout\":\"bshd_packed\",\"kv_heads\":18}}", "shape_mismatch", "attrs.kv_heads"},
        {ATT_QKV("[1,128,8,64]", "[1,128,8,64]") "],\"attrs\":{\"layout\":\"bshd\",\"kv_heads\":8}}", "invalid_field",
         "attrs.kv_heads"},
        {"{\"op\":\"attention\",\"inputs\":[{\"shape\":[1,128,35,64],\"dtype\":\"f16\"}],"
         "\"attrs\":{\"layout\":\"bshd_packed\"}}", "shape_mismatch", "inputs[0].shape"},
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        ht_resp bad = ht_post(d, "/v1/kernels", refused[i].body);
        const cJSON *err = bad.json ? cJSON_GetObjectItemCaseSensitive(bad.json, "error") : NULL;
        CHECK(bad.status == 422 && err && !strcmp(json_str(err, "code"), refused[i].code) &&
                  !strcmp(json_str(err, "field"), refused[i].field) && *json_str(err, "message"),
              "attention refusal %zu: want 422 %s at %s, got %ld %.300s", i, refused[i].code, refused[i].field,
              bad.status, bad.body);
        ht_resp_free(&bad);
        /* /v1/spaces validates the same way */
        bad = ht_post(d, "/v1/spaces", refused[i].body);
        err = bad.json ? cJSON_GetObjectItemCaseSensitive(bad.json, "error") : NULL;
        CHECK(bad.status == 422 && err && !strcmp(json_str(err, "field"), refused[i].field),
              "attention refusal %zu on /v1/spaces: %ld %.300s", i, bad.status, bad.body);
        ht_resp_free(&bad);
    }
}

/* attention requests the daemon answers, tune "none": the examples' shapes (bshd causal prefill
 * on sm_90a: attention_wgmma, whose PTX has wgmma and bulk tensor copies and whose SASS has
 * HGMMA; GQA decode with a padding mask: attention_decode) and a bhsd one with a residual add and
 * a cast on sm_80 (attention_mma). Each space (POST /v1/spaces) holds tens of candidates, the
 * PTX passes ptxas and the output has q's shape and the epilogue's dtype. */
static void check_attention_kernels(const ht_daemon *d)
{
    static const struct {
        const char *body, *arch;
        int sm;
        const char *out_shape, *out_dtype, *template_name;
        int min_space;
    } cases[] = {
        {ATT_QKV("[2,2048,32,128]", "[2,2048,32,128]") "],\"attrs\":{\"layout\":\"bshd\",\"causal\":true},"
         "\"arch\":\"sm_90a\",\"tune\":\"none\"}", "sm_90a", 90, "[2,2048,32,128]", "f16", "attention_wgmma", 40},
        {ATT_QKV("[4,32,1,128]", "[4,8,4096,128]") ",{\"shape\":[4,1,1,4096],\"dtype\":\"f16\"}],"
         "\"arch\":\"sm_90a\",\"tune\":\"none\"}", "sm_90a", 90, "[4,32,1,128]", "f16", "attention_decode", 20},
        {ATT_QKV("[2,8,333,64]", "[2,8,333,64]") ",{\"shape\":[2,8,333,64],\"dtype\":\"f16\"}],"
         "\"attrs\":{\"causal\":true},\"epilogue\":[{\"op\":\"add\",\"input\":3},{\"op\":\"cast\",\"dtype\":\"f32\"}],"
         "\"arch\":\"sm_80\",\"tune\":\"none\"}", "sm_80", 80, "[2,8,333,64]", "f32", "attention_mma", 20},
        /* bshd_packed: GPT-2's c_attn output [8,512,3*12*64] as [8,512,36,64], causal, on sm_90a
         * (one TMA map over qkv); GQA 8/2 with a padding mask (inputs[1]) on sm_80 */
        {"{\"op\":\"attention\",\"inputs\":[{\"shape\":[8,512,36,64],\"dtype\":\"f16\"}],"
         "\"attrs\":{\"layout\":\"bshd_packed\",\"causal\":true},\"arch\":\"sm_90a\",\"tune\":\"none\"}", "sm_90a",
         90, "[8,512,12,64]", "f16", "attention_wgmma", 40},
        {"{\"op\":\"attention\",\"inputs\":[{\"shape\":[2,300,12,128],\"dtype\":\"bf16\"},"
         "{\"shape\":[2,1,1,300],\"dtype\":\"f32\"}],\"attrs\":{\"layout\":\"bshd_packed\",\"kv_heads\":2},"
         "\"arch\":\"sm_80\",\"tune\":\"none\"}", "sm_80", 80, "[2,300,8,128]", "bf16", "attention_mma", 10},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ht_resp sp = ht_post(d, "/v1/spaces", cases[i].body);
        const cJSON *c = sp.json ? cJSON_GetObjectItemCaseSensitive(sp.json, "count") : NULL;
        CHECK(sp.status == 200 && cJSON_IsNumber(c) && c->valueint >= cases[i].min_space,
              "attention case %zu on %s: POST /v1/spaces %ld, count %d (want >= %d)", i, cases[i].arch, sp.status,
              cJSON_IsNumber(c) ? c->valueint : -1, cases[i].min_space);
        ht_resp_free(&sp);
        ht_resp r = ht_post(d, "/v1/kernels", cases[i].body);
        char *key = check_kernel_set(&r, cases[i].arch, false);
        if (key)
            check_code(d, key, cases[i].arch, cases[i].sm);
        const cJSON *sch = r.json ? cJSON_GetObjectItemCaseSensitive(r.json, "schedule") : NULL;
        CHECK(sch && !strcmp(json_str(sch, "template"), cases[i].template_name), "attention case %zu: template %s", i,
              sch ? json_str(sch, "template") : "?");
        const cJSON *out = r.json ? cJSON_GetObjectItemCaseSensitive(r.json, "output") : NULL;
        char *shape = out ? cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(out, "shape")) : NULL;
        CHECK(shape && !strcmp(shape, cases[i].out_shape) && !strcmp(json_str(out, "dtype"), cases[i].out_dtype),
              "attention case %zu output %s %s", i, shape ? shape : "?", out ? json_str(out, "dtype") : "?");
        free(shape);
        if (key && !strcmp(cases[i].template_name, "attention_wgmma")) {
            char path[160];
            snprintf(path, sizeof(path), "/v1/kernels/%s/ptx", key);
            ht_resp ptx = ht_get(d, path);
            CHECK(ptx.body && strstr(ptx.body, "wgmma.mma_async") && strstr(ptx.body, "cp.async.bulk.tensor"),
                  "attention_wgmma's PTX has no wgmma or bulk tensor copy");
            ht_resp_free(&ptx);
            snprintf(path, sizeof(path), "/v1/kernels/%s/cubin", key);
            ht_resp cubin = ht_get(d, path);
            const int n = cubin.status == 200 ? ht_sass_count(cubin.body, cubin.len, "HGMMA") : -1;
            if (n == -2)
                printf("note: cuobjdump or nvdisasm not installed; attention_wgmma's SASS not read\n");
            else
                CHECK(n > 0, "attention_wgmma's SASS has %d HGMMA instructions", n);
            ht_resp_free(&cubin);
        }
        free(key);
        ht_resp_free(&r);
    }
}

int main(void)
{
    ht_daemon d;
    ht_init(&d);
    ht_arg(&d, "--workers");
    ht_arg(&d, "none");
    if (ht_start(&d) != 0)
        return 1;

    char body[512];
    struct { const char *arch; int sm; const char *tune; int m; } cases[] = {
        {"sm_90", 90, "model", 128}, {"sm_80", 80, "model", 128}, {"sm_90", 90, "none", 192},
        {"sm_90a", 90, "model", 128},
        /* Blackwell through the mma.sync path: NVRTC compiles, ptxas accepts, cuobjdump reads. */
        {"sm_100", 100, "model", 128}, {"sm_120", 120, "model", 128},
    };
    enum { N_CASES = sizeof(cases) / sizeof(cases[0]) };
    char *keys[N_CASES] = {0};
    for (int i = 0; i < N_CASES; i++) {
        snprintf(body, sizeof(body), MATMUL_REQ, cases[i].m, cases[i].arch, cases[i].tune);
        ht_resp r = ht_post(&d, "/v1/kernels", body);
        keys[i] = check_kernel_set(&r, cases[i].arch, false);
        if (keys[i])
            check_code(&d, keys[i], cases[i].arch, cases[i].sm);
        ht_resp_free(&r);

        /* The same request again is a hit, answered without compiling. */
        r = ht_post(&d, "/v1/kernels", body);
        char *again = check_kernel_set(&r, cases[i].arch, true);
        CHECK(again && keys[i] && !strcmp(again, keys[i]), "hit returned another key");
        free(again);
        ht_resp_free(&r);
    }
    CHECK(keys[0] && keys[1] && strcmp(keys[0], keys[1]), "sm_80 and sm_90 share a key");
    CHECK(keys[0] && keys[3] && strcmp(keys[0], keys[3]), "sm_90a and sm_90 share a key");
    CHECK(keys[4] && keys[5] && strcmp(keys[4], keys[5]) && strcmp(keys[0], keys[4]),
          "sm_100, sm_120 and sm_90 share a key");

    /* The same op spelled differently (aliases, key order, explicit defaults) is the same entry. */
    ht_resp r = ht_post(&d, "/v1/kernels",
                        "{\"tune\":\"model\",\"arch\":\"sm_90\",\"attrs\":{\"trans_a\":false},"
                        "\"inputs\":[{\"dtype\":\"float16\",\"shape\":[128,64]},"
                        "{\"shape\":[64,256],\"dtype\":\"half\"}],\"op\":\"matmul\"}");
    char *alias = check_kernel_set(&r, "sm_90", true);
    CHECK(alias && keys[0] && !strcmp(alias, keys[0]), "canonical form differs");
    free(alias);
    ht_resp_free(&r);

    /* GET by key answers the same set. */
    if (keys[0]) {
        char path[128];
        snprintf(path, sizeof(path), "/v1/kernels/%s", keys[0]);
        r = ht_get(&d, path);
        free(check_kernel_set(&r, "sm_90", true));
        ht_resp_free(&r);
    }

    /* The pooling op and the new activations end to end (tune "none"): ResNet's stem maxpool
     * (NHWC, + bias, relu6) for sm_80, a global average pool (NCHW, * scale, hardswish) and a
     * matmul with leaky_relu, pow, erf and clamp for sm_90a; each compiles, ptxas accepts it and
     * cuobjdump reads it. A bad pool is refused with its field. */
    {
        static const struct {
            const char *body, *arch;
            int sm;
        } pools[] = {
            {"{\"op\":\"pool2d\",\"inputs\":[{\"shape\":[2,112,112,64],\"dtype\":\"f16\"},"
             "{\"shape\":[64],\"dtype\":\"f16\"}],\"attrs\":{\"kind\":\"max\",\"kernel_size\":3,\"stride\":2,"
             "\"padding\":1},\"epilogue\":[{\"op\":\"bias\",\"input\":1},{\"op\":\"relu6\"}],"
             "\"arch\":\"sm_80\",\"tune\":\"none\"}",
             "sm_80", 80},
            {"{\"op\":\"pool2d\",\"inputs\":[{\"shape\":[4,2048,7,7],\"dtype\":\"bf16\"},"
             "{\"shape\":[1],\"dtype\":\"bf16\"}],\"attrs\":{\"kind\":\"adaptive_avg\",\"output_size\":1,"
             "\"layout\":\"nchw\"},\"epilogue\":[{\"op\":\"mul\",\"input\":1},{\"op\":\"hardswish\"}],"
             "\"arch\":\"sm_90a\",\"tune\":\"none\"}",
             "sm_90a", 90},
            {"{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,64],\"dtype\":\"f16\"},"
             "{\"shape\":[64,256],\"dtype\":\"f16\"}],\"epilogue\":[{\"op\":\"leaky_relu\",\"negative_slope\":0.1},"
             "{\"op\":\"pow\",\"exponent\":1.5},{\"op\":\"erf\"},{\"op\":\"clamp\",\"max\":0.5},"
             "{\"op\":\"hardsigmoid\"}],\"arch\":\"sm_90a\",\"tune\":\"none\"}",
             "sm_90a", 90},
        };
        for (size_t i = 0; i < sizeof(pools) / sizeof(pools[0]); i++) {
            ht_resp pr = ht_post(&d, "/v1/kernels", pools[i].body);
            char *key = check_kernel_set(&pr, pools[i].arch, false);
            if (key)
                check_code(&d, key, pools[i].arch, pools[i].sm);
            free(key);
            ht_resp_free(&pr);
        }
        ht_resp bad = ht_post(&d, "/v1/kernels",
                              "{\"op\":\"pool2d\",\"inputs\":[{\"shape\":[1,8,8,4],\"dtype\":\"f16\"}],"
                              "\"attrs\":{\"kind\":\"max\",\"kernel_size\":3,\"padding\":2}}");
        const cJSON *err = bad.json ? cJSON_GetObjectItemCaseSensitive(bad.json, "error") : NULL;
        CHECK(bad.status == 422 && err && !strcmp(json_str(err, "field"), "attrs.padding[0]"), "status %ld %.300s",
              bad.status, bad.body);
        ht_resp_free(&bad);
    }

    /* FP8 (issue 41) end to end (tune "none"): an e4m3 x e5m2 matmul with row and column scales,
     * bias and GELU for sm_90a answers a bf16 kernel whose PTX holds the FP8 wgmma and passes
     * ptxas; for sm_89 (Ada) one whose PTX holds matmul_mma's FP8 mma.sync m16n8k32; the same
     * request for sm_80 is refused with its field, and the daemon still serves. */
    {
#define FP8_REQ(arch)                                                                                           \
    "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[256,512],\"dtype\":\"f8e4m3\"},{\"shape\":[384,512],"          \
    "\"dtype\":\"float8_e5m2\"},{\"shape\":[256,1],\"dtype\":\"f32\"},{\"shape\":[1,384],\"dtype\":\"f32\"},"     \
    "{\"shape\":[384],\"dtype\":\"bf16\"}],\"attrs\":{\"trans_b\":true,\"scale_a\":\"row\",\"scale_b\":\"col\"},"    \
    "\"epilogue\":[{\"op\":\"bias\",\"input\":4},{\"op\":\"gelu\"}],\"arch\":\"" arch "\",\"tune\":\"none\"}"
        ht_resp fr = ht_post(&d, "/v1/kernels", FP8_REQ("sm_90a"));
        char *key = check_kernel_set(&fr, "sm_90a", false);
        const cJSON *out = fr.json ? cJSON_GetObjectItemCaseSensitive(fr.json, "output") : NULL;
        CHECK(out && !strcmp(json_str(out, "dtype"), "bf16"), "fp8 output %.300s", fr.body);
        if (key) {
            check_code(&d, key, "sm_90a", 90);
            char path[160];
            snprintf(path, sizeof(path), "/v1/kernels/%s/ptx", key);
            ht_resp ptx = ht_get(&d, path);
            CHECK(ptx.status == 200 && ptx.body && strstr(ptx.body, "k32.f32.e4m3.e5m2"), "no FP8 wgmma in the PTX");
            ht_resp_free(&ptx);
        }
        free(key);
        ht_resp_free(&fr);
        ht_resp ar = ht_post(&d, "/v1/kernels", FP8_REQ("sm_89"));
        char *akey = check_kernel_set(&ar, "sm_89", false);
        if (akey) {
            check_code(&d, akey, "sm_89", 89);
            char path[160];
            snprintf(path, sizeof(path), "/v1/kernels/%s/ptx", akey);
            ht_resp ptx = ht_get(&d, path);
            CHECK(ptx.status == 200 && ptx.body && strstr(ptx.body, "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32"),
                  "no FP8 mma.sync in the sm_89 PTX");
            ht_resp_free(&ptx);
        }
        free(akey);
        ht_resp_free(&ar);
        /* Quantized for the next layer: divided by its scale, cast to e4m3 (an FP8 answer). */
        ht_resp qr = ht_post(&d, "/v1/kernels",
                             "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[256,512],\"dtype\":\"f8e4m3\"},{\"shape\":[384,512],"
                             "\"dtype\":\"f8e4m3\"},{\"shape\":[1],\"dtype\":\"f32\"}],\"attrs\":{\"trans_b\":true,"
                             "\"fast_accum\":false},\"epilogue\":[{\"op\":\"gelu\"},{\"op\":\"div\",\"input\":2},{\"op\":\"cast\","
                             "\"dtype\":\"f8e4m3\"}],\"arch\":\"sm_90a\",\"tune\":\"none\"}");
        char *qkey = check_kernel_set(&qr, "sm_90a", false);
        const cJSON *qout = qr.json ? cJSON_GetObjectItemCaseSensitive(qr.json, "output") : NULL;
        CHECK(qout && !strcmp(json_str(qout, "dtype"), "f8e4m3"), "quantized output %.300s", qr.body);
        if (qkey) {
            check_code(&d, qkey, "sm_90a", 90);
            char path[160];
            snprintf(path, sizeof(path), "/v1/kernels/%s/ptx", qkey);
            ht_resp ptx = ht_get(&d, path);
            CHECK(ptx.status == 200 && ptx.body && strstr(ptx.body, "cvt.rn.satfinite.e4m3x2.f32"),
                  "no FP8 conversion in the PTX");
            ht_resp_free(&ptx);
        }
        free(qkey);
        ht_resp_free(&qr);
        ht_resp bad = ht_post(&d, "/v1/kernels", FP8_REQ("sm_80"));
        const cJSON *err = bad.json ? cJSON_GetObjectItemCaseSensitive(bad.json, "error") : NULL;
        CHECK(bad.status == 422 && err && !strcmp(json_str(err, "code"), "unsupported") &&
                  !strcmp(json_str(err, "field"), "arch") &&
                  strstr(json_str(err, "message"), "fp8 needs sm_89 mma.sync or sm_90a wgmma"),
              "status %ld %.300s", bad.status, bad.body);
        ht_resp_free(&bad);
#undef FP8_REQ
        /* FP8 in elementwise kernels: a quantize (x * scale, cast to e4m3) for sm_90 converts
         * with cvt.rn.satfinite; a dequantize (e5m2 -> f32, * scale, -> bf16) for sm_80, which has
         * no FP8 conversion, with c10's integer algorithm. Each compiles, ptxas accepts it and
         * cuobjdump reads it; the answers' outputs are e4m3 and bf16. */
        static const struct {
            const char *body, *arch, *out_dtype, *in_ptx;
            int sm;
        } ews[] = {
            {"{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[64,1024],\"dtype\":\"bf16\"},{\"shape\":[64,1],"
             "\"dtype\":\"f32\"}],\"attrs\":{\"ops\":[{\"op\":\"mul\",\"input\":1},{\"op\":\"clamp\",\"min\":-448,"
             "\"max\":448},{\"op\":\"cast\",\"dtype\":\"f8e4m3\"}]},\"arch\":\"sm_90\",\"tune\":\"none\"}",
             "sm_90", "f8e4m3", "cvt.rn.satfinite.e4m3x2.f32", 90},
            {"{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[64,1024],\"dtype\":\"float8_e5m2\"},{\"shape\":[1],"
             "\"dtype\":\"f32\"}],\"attrs\":{\"ops\":[{\"op\":\"cast\",\"dtype\":\"f32\"},{\"op\":\"mul\",\"input\":1},"
             "{\"op\":\"cast\",\"dtype\":\"bf16\"}]},\"arch\":\"sm_80\",\"tune\":\"none\"}",
             "sm_80", "bf16", NULL, 80},
        };
        for (size_t i = 0; i < sizeof(ews) / sizeof(ews[0]); i++) {
            ht_resp er = ht_post(&d, "/v1/kernels", ews[i].body);
            char *ekey = check_kernel_set(&er, ews[i].arch, false);
            const cJSON *eout = er.json ? cJSON_GetObjectItemCaseSensitive(er.json, "output") : NULL;
            CHECK(eout && !strcmp(json_str(eout, "dtype"), ews[i].out_dtype), "fp8 elementwise output %.300s", er.body);
            if (ekey) {
                check_code(&d, ekey, ews[i].arch, ews[i].sm);
                if (ews[i].in_ptx) {
                    char path[160];
                    snprintf(path, sizeof(path), "/v1/kernels/%s/ptx", ekey);
                    ht_resp ptx = ht_get(&d, path);
                    CHECK(ptx.status == 200 && ptx.body && strstr(ptx.body, ews[i].in_ptx), "no %s in the PTX",
                          ews[i].in_ptx);
                    ht_resp_free(&ptx);
                }
            }
            free(ekey);
            ht_resp_free(&er);
        }
    }

    /* gather end to end (tune "none"): BERT's word embeddings with i64 ids plus the position
     * embeddings for sm_90a, an index_select along the last axis with i32 ids for sm_80, and an
     * i64 mask converted to f32 by an elementwise cast (plus a bias); each compiles, ptxas accepts it and
     * cuobjdump reads it, and the answer's output is the gathered shape in x's dtype. An i64
     * matmul and a float index are refused with their fields. */
    {
        static const struct {
            const char *body, *arch;
            int sm;
            const char *out_shape, *out_dtype;
        } gathers[] = {
            {"{\"op\":\"gather\",\"inputs\":[{\"shape\":[30522,768],\"dtype\":\"f16\"},"
             "{\"shape\":[2,128],\"dtype\":\"i64\"},{\"shape\":[128,768],\"dtype\":\"f16\"}],"
             "\"epilogue\":[{\"op\":\"add\",\"input\":2}],\"arch\":\"sm_90a\",\"tune\":\"none\"}",
             "sm_90a", 90, "[2,128,768]", "f16"},
            {"{\"op\":\"gather\",\"inputs\":[{\"shape\":[4,10,37],\"dtype\":\"bf16\"},"
             "{\"shape\":[5],\"dtype\":\"int32\"}],\"attrs\":{\"axis\":-1},\"arch\":\"sm_80\",\"tune\":\"none\"}",
             "sm_80", 80, "[4,10,5]", "bf16"},
            {"{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[2,1,1,128],\"dtype\":\"i64\"},"
             "{\"shape\":[128],\"dtype\":\"f32\"}],"
             "\"epilogue\":[{\"op\":\"cast\",\"dtype\":\"f32\"},{\"op\":\"neg\"},{\"op\":\"shift\",\"value\":1},"
             "{\"op\":\"scale\",\"value\":-10000},{\"op\":\"add\",\"input\":1}],\"arch\":\"sm_90a\",\"tune\":\"none\"}",
             "sm_90a", 90, "[2,1,1,128]", "f32"},
        };
        for (size_t i = 0; i < sizeof(gathers) / sizeof(gathers[0]); i++) {
            ht_resp gr = ht_post(&d, "/v1/kernels", gathers[i].body);
            char *key = check_kernel_set(&gr, gathers[i].arch, false);
            if (key)
                check_code(&d, key, gathers[i].arch, gathers[i].sm);
            free(key);
            const cJSON *out = gr.json ? cJSON_GetObjectItemCaseSensitive(gr.json, "output") : NULL;
            char *shape = out ? cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(out, "shape")) : NULL;
            CHECK(shape && !strcmp(shape, gathers[i].out_shape) && !strcmp(json_str(out, "dtype"), gathers[i].out_dtype),
                  "output %s %s", shape ? shape : "?", out ? json_str(out, "dtype") : "?");
            free(shape);
            ht_resp_free(&gr);
        }
        static const struct {
            const char *body, *field;
        } refused[] = {
            {"{\"op\":\"matmul\",\"inputs\":[{\"shape\":[8,8],\"dtype\":\"i64\"},{\"shape\":[8,8],\"dtype\":\"i64\"}]}",
             "inputs[0].dtype"},
            {"{\"op\":\"gather\",\"inputs\":[{\"shape\":[50,8],\"dtype\":\"f16\"},{\"shape\":[4],\"dtype\":\"f32\"}]}",
             "inputs[1].dtype"},
        };
        for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
            ht_resp bad = ht_post(&d, "/v1/kernels", refused[i].body);
            const cJSON *err = bad.json ? cJSON_GetObjectItemCaseSensitive(bad.json, "error") : NULL;
            CHECK(bad.status == 422 && err && !strcmp(json_str(err, "field"), refused[i].field), "status %ld %.300s",
                  bad.status, bad.body);
            ht_resp_free(&bad);
        }
    }

    check_attention_refusals(&d);
    check_attention_kernels(&d);
    /* ... and the daemon still serves: the first matmul is a hit. */
    snprintf(body, sizeof(body), MATMUL_REQ, 128, "sm_90", "model");
    r = ht_post(&d, "/v1/kernels", body);
    char *still = check_kernel_set(&r, "sm_90", true);
    CHECK(still && keys[0] && !strcmp(still, keys[0]), "the daemon answers another key after the attention requests");
    free(still);
    ht_resp_free(&r);

    /* A clean restart keeps everything. */
    CHECK(ht_stop(&d, SIGTERM) == 0, "SIGTERM exit status");
    CHECK(access(d.socket, F_OK) != 0, "socket file left behind after SIGTERM");
    if (ht_start(&d) != 0)
        return 1;
    snprintf(body, sizeof(body), MATMUL_REQ, 128, "sm_90", "model");
    r = ht_post(&d, "/v1/kernels", body);
    char *after = check_kernel_set(&r, "sm_90", true);
    CHECK(after && keys[0] && !strcmp(after, keys[0]), "key changed across restart");
    free(after);
    ht_resp_free(&r);
    if (keys[0])
        check_code(&d, keys[0], "sm_90", 90);

    /* kill -9 right after a store: the entry is durable and the database still opens. */
    snprintf(body, sizeof(body),
             "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[256,128],\"dtype\":\"bf16\"},"
             "{\"shape\":[128,512],\"dtype\":\"bf16\"}],\"arch\":\"sm_90\",\"tune\":\"model\"}");
    r = ht_post(&d, "/v1/kernels", body);
    char *bf = check_kernel_set(&r, "sm_90", false);
    ht_resp_free(&r);
    ht_stop(&d, SIGKILL);
    /* The crashed daemon's socket file is stale now; a new daemon must start anyway. */
    if (ht_start(&d) != 0)
        return 1;
    r = ht_post(&d, "/v1/kernels", body);
    char *bf2 = check_kernel_set(&r, "sm_90", true);
    CHECK(bf && bf2 && !strcmp(bf, bf2), "entry lost across kill -9");
    free(bf);
    free(bf2);
    ht_resp_free(&r);

    CHECK(ht_stop(&d, SIGTERM) == 0, "SIGTERM exit status");
    for (int i = 0; i < N_CASES; i++)
        free(keys[i]);
    ht_cleanup(&d);
    return ht_finish("it_kernels");
}
