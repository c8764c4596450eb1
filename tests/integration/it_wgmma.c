/* tests/integration/it_wgmma.c - the Hopper path through the daemon: a 4096^3 fp16 matmul for
 * sm_90a with tune:"model" comes back as the wgmma + TMA kernel set (one persistent kernel,
 * no workspace, whose operands' tensor maps are "tensor_map" parameters after the pointers,
 * described so that a client can encode them) whose PTX ptxas accepts for sm_90a; POST /v1/spaces offers matmul_wgmma candidates on sm_90a only. A
 * ResNet-style 3x3
 * NHWC convolution with a fused bias and relu comes back for sm_90a as conv2d_wgmma, whose PTX
 * gathers A with cp.async completing on mbarriers beside the weights' bulk tensor copies, and
 * ptxas accepts it; sm_90 keeps conv2d_mma. A matmul with an odd K (A's rows 4094 bytes) comes back
 * for sm_90a with tune:"none" as matmul_wgmma whose producer gathers A (aligned 16-byte loads
 * shifted into place) beside B's one tensor map, and ptxas accepts it. A ResNeXt-style grouped
 * convolution (8 channels per group) comes back as conv2d_grouped on sm_90a and sm_80. The SwiGLU
 * gate's full-size epilogue operand comes with a tensor map of its own (loaded into shared memory
 * by the copy engine). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define REQ                                                                                        \
    "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[4096,4096],\"dtype\":\"f16\"},"                   \
    "{\"shape\":[4096,4096],\"dtype\":\"f16\"}],\"arch\":\"%s\",\"tune\":\"%s\"}"

#define ODD_K_REQ                                                                                  \
    "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[3001,2047],\"dtype\":\"f16\"},"                   \
    "{\"shape\":[2047,4096],\"dtype\":\"f16\"}],\"arch\":\"sm_90a\",\"tune\":\"none\"}"

#define CONV_REQ                                                                                   \
    "{\"op\":\"conv2d\",\"inputs\":[{\"shape\":[32,28,28,128],\"dtype\":\"f16\"},"                 \
    "{\"shape\":[128,3,3,128],\"dtype\":\"f16\"},{\"shape\":[128],\"dtype\":\"f16\"}],"              \
    "\"attrs\":{\"stride\":1,\"padding\":1,\"layout\":\"nhwc\"},"                                   \
    "\"epilogue\":[{\"op\":\"bias\",\"input\":2},{\"op\":\"relu\"}],\"arch\":\"%s\",\"tune\":\"model\"}"

static int count_template(const cJSON *cands, const char *name)
{
    int n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, cands) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(it, "template");
        n += cJSON_IsString(t) && !strcmp(t->valuestring, name);
    }
    return n;
}

int main(void)
{
    ht_daemon d;
    ht_init(&d);
    ht_arg(&d, "--workers");
    ht_arg(&d, "none");
    if (ht_start(&d) != 0)
        return 1;
    char body[768];

    static const char *const archs[] = {"sm_90a", "sm_90", "sm_80"};
    for (int a = 0; a < 3; a++) {
        snprintf(body, sizeof(body), REQ, archs[a], "model");
        ht_resp r = ht_post(&d, "/v1/spaces", body);
        CHECK(r.status == 200, "spaces %s: %ld %.300s", archs[a], r.status, r.body);
        int n = count_template(cJSON_GetObjectItemCaseSensitive(r.json, "candidates"), "matmul_wgmma");
        printf("%s: %d matmul_wgmma candidates\n", archs[a], n);
        if (a == 0)
            CHECK(n >= 30, "sm_90a lists %d matmul_wgmma candidates", n);
        else
            CHECK(n == 0, "%s lists %d matmul_wgmma candidates", archs[a], n);
        ht_resp_free(&r);
    }

    snprintf(body, sizeof(body), REQ, "sm_90a", "model");
    ht_resp r = ht_post(&d, "/v1/kernels", body);
    CHECK(r.status == 200, "kernels: %ld %.500s", r.status, r.body);
    const cJSON *sched = cJSON_GetObjectItemCaseSensitive(r.json, "schedule");
    const cJSON *tmpl = cJSON_GetObjectItemCaseSensitive(sched, "template");
    CHECK(cJSON_IsString(tmpl) && !strcmp(tmpl->valuestring, "matmul_wgmma"), "model picked %s",
          cJSON_IsString(tmpl) ? tmpl->valuestring : "?");
    const cJSON *ks = cJSON_GetObjectItemCaseSensitive(r.json, "kernels");
    /* One persistent launch, no workspace: three pointers (A, B, the output), then the maps of
     * A and B, [K, M] and [K, N] row-major as the operands lie, boxes of 64 k (128 swizzled
     * bytes). */
    const cJSON *k0 = cJSON_GetArrayItem(ks, 0), *params = cJSON_GetObjectItemCaseSensitive(k0, "params");
    const cJSON *wsb = cJSON_GetObjectItemCaseSensitive(r.json, "workspace_bytes");
    CHECK(cJSON_GetArraySize(ks) == 1 && cJSON_IsNumber(wsb) && wsb->valuedouble == 0 &&
              cJSON_GetArraySize(params) >= 5,
          "%d kernels: %.500s", cJSON_GetArraySize(ks), r.body);
    static const char *const want_buf[] = {"input0", "input1", "output", "input0", "input1"};
    for (int i = 0; i < 5; i++) {
        const cJSON *p = cJSON_GetArrayItem(params, i);
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "type"));
        const char *buf = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "buffer"));
        const cJSON *index = cJSON_GetObjectItemCaseSensitive(p, "index");
        CHECK(type && buf && cJSON_IsNumber(index) && index->valueint == i && !strcmp(buf, want_buf[i]) &&
                  !strcmp(type, i < 3 ? "pointer" : "tensor_map"),
              "params[%d]: %.300s", i, r.body);
        if (i < 3)
            continue;
        const cJSON *tm = cJSON_GetObjectItemCaseSensitive(p, "tensor_map");
        const cJSON *dims = cJSON_GetObjectItemCaseSensitive(tm, "dims");
        const cJSON *box = cJSON_GetObjectItemCaseSensitive(tm, "box");
        const cJSON *sw = cJSON_GetObjectItemCaseSensitive(tm, "swizzle");
        CHECK(cJSON_GetArraySize(dims) == 2 && cJSON_GetArrayItem(dims, 0)->valuedouble == 4096 &&
                  cJSON_GetArrayItem(box, 0)->valuedouble == 64 && cJSON_IsNumber(sw) && sw->valuedouble == 128 &&
                  !strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(tm, "dtype")), "f16"),
              "params[%d].tensor_map: %.300s", i, r.body);
    }
    const cJSON *key = cJSON_GetObjectItemCaseSensitive(r.json, "key");
    if (cJSON_IsString(key)) {
        char path[160];
        snprintf(path, sizeof(path), "/v1/kernels/%s/ptx", key->valuestring);
        ht_resp ptx = ht_get(&d, path);
        CHECK(ptx.status == 200 && ptx.body, "ptx: %ld", ptx.status);
        if (ptx.body) {
            CHECK(strstr(ptx.body, "wgmma.mma_async") != NULL, "PTX without wgmma.mma_async");
            CHECK(strstr(ptx.body, "cp.async.bulk.tensor") != NULL, "PTX without cp.async.bulk.tensor");
            /* The maps are 128-byte parameters, nothing builds them in the kernel. */
            CHECK(strstr(ptx.body, ".param .align 64 .b8") != NULL && !strstr(ptx.body, "tensormap.replace"),
                  "PTX without tensor-map parameters");
            CHECK(ht_ptxas(ptx.body, ptx.len, "sm_90a") == 0, "ptxas -arch=sm_90a rejects the PTX");
        }
        ht_resp_free(&ptx);
    }
    ht_resp_free(&r);

    /* An odd K: A gathered by the producer's threads, B by TMA (its one map after the pointers). */
    r = ht_post(&d, "/v1/kernels", ODD_K_REQ);
    CHECK(r.status == 200, "odd K kernels: %ld %.500s", r.status, r.body);
    sched = cJSON_GetObjectItemCaseSensitive(r.json, "schedule");
    tmpl = cJSON_GetObjectItemCaseSensitive(sched, "template");
    CHECK(cJSON_IsString(tmpl) && !strcmp(tmpl->valuestring, "matmul_wgmma"), "odd K: tune none picked %s",
          cJSON_IsString(tmpl) ? tmpl->valuestring : "?");
    ks = cJSON_GetObjectItemCaseSensitive(r.json, "kernels");
    params = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(ks, 0), "params");
    int n_maps = 0;
    const cJSON *pp;
    cJSON_ArrayForEach(pp, params) {
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(pp, "type"));
        const char *buf = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(pp, "buffer"));
        if (type && !strcmp(type, "tensor_map")) {
            n_maps++;
            CHECK(buf && strcmp(buf, "input0") != 0, "odd K: a tensor map of A: %.300s", r.body);
        }
    }
    CHECK(n_maps >= 1, "odd K: no tensor map of B: %.500s", r.body);
    key = cJSON_GetObjectItemCaseSensitive(r.json, "key");
    if (cJSON_IsString(key)) {
        char path[160];
        snprintf(path, sizeof(path), "/v1/kernels/%s/ptx", key->valuestring);
        ht_resp ptx = ht_get(&d, path);
        CHECK(ptx.status == 200 && ptx.body, "odd K ptx: %ld", ptx.status);
        if (ptx.body) {
            CHECK(strstr(ptx.body, "wgmma.mma_async") && strstr(ptx.body, "ld.global.nc.v4.u32") &&
                      strstr(ptx.body, "shfl.sync.down") && strstr(ptx.body, "fence.proxy.async.shared::cta"),
                  "odd K: PTX without the gather");
            CHECK(ht_ptxas(ptx.body, ptx.len, "sm_90a") == 0, "odd K: ptxas -arch=sm_90a rejects the PTX");
        }
        ht_resp_free(&ptx);
    }
    ht_resp_free(&r);

    /* The convolution: conv2d_wgmma on sm_90a (spaces and the model's pick), conv2d_mma on sm_90. */
    for (int a = 0; a < 2; a++) {
        snprintf(body, sizeof(body), CONV_REQ, archs[a]);
        ht_resp sp = ht_post(&d, "/v1/spaces", body);
        const int n = count_template(cJSON_GetObjectItemCaseSensitive(sp.json, "candidates"), "conv2d_wgmma");
        printf("%s: %d conv2d_wgmma candidates\n", archs[a], n);
        CHECK(sp.status == 200 && (a == 0 ? n >= 30 : n == 0), "conv spaces %s: %ld, %d conv2d_wgmma", archs[a],
              sp.status, n);
        ht_resp_free(&sp);
        ht_resp k = ht_post(&d, "/v1/kernels", body);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(k.json, "schedule"),
                                                          "template");
        const char *want = a == 0 ? "conv2d_wgmma" : "conv2d_mma";
        CHECK(k.status == 200 && cJSON_IsString(t) && !strcmp(t->valuestring, want), "conv %s picked %s (%ld)",
              archs[a], cJSON_IsString(t) ? t->valuestring : "?", k.status);
        /* On sm_90a the input (128 channels) is read through an im2col map: its 4th parameter,
         * after the three pointers (input, weight, bias) and the output. */
        if (a == 0) {
            const cJSON *kp = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(k.json, "kernels"), 0), "params");
            const cJSON *p4 = cJSON_GetArrayItem(kp, 4);
            const cJSON *tm = cJSON_GetObjectItemCaseSensitive(p4, "tensor_map");
            const cJSON *lower = cJSON_GetObjectItemCaseSensitive(tm, "lower_corner");
            const cJSON *dims = cJSON_GetObjectItemCaseSensitive(tm, "dims");
            CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p4, "buffer")) ?: "", "input0") &&
                      !strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(tm, "mode")) ?: "", "im2col") &&
                      cJSON_GetArraySize(dims) == 4 && cJSON_GetArrayItem(dims, 0)->valuedouble == 128 &&
                      cJSON_GetArrayItem(dims, 3)->valuedouble == 32 && cJSON_GetArraySize(lower) == 2 &&
                      cJSON_GetArrayItem(lower, 0)->valuedouble == -1 &&
                      cJSON_GetObjectItemCaseSensitive(tm, "box") == NULL,
                  "conv params[4]: %.600s", k.body);
        }
        const cJSON *ck = cJSON_GetObjectItemCaseSensitive(k.json, "key");
        if (a == 0 && cJSON_IsString(ck)) {
            char path[160];
            snprintf(path, sizeof(path), "/v1/kernels/%s/ptx", ck->valuestring);
            ht_resp ptx = ht_get(&d, path);
            CHECK(ptx.status == 200 && ptx.body, "conv ptx: %ld", ptx.status);
            if (ptx.body) {
                static const char *const need[] = {"wgmma.mma_async", "cp.async.bulk.tensor.2d",
                                                   "cp.async.bulk.tensor.4d.shared::cluster.global.im2col"};
                for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
                    CHECK(strstr(ptx.body, need[i]) != NULL, "conv PTX without %s", need[i]);
                CHECK(ht_ptxas(ptx.body, ptx.len, "sm_90a") == 0, "ptxas -arch=sm_90a rejects the conv PTX");
            }
            ht_resp_free(&ptx);
        }
        ht_resp_free(&k);
    }

    /* A ResNeXt-style grouped convolution (32 groups of 8 channels) with a bias and relu comes
     * back as conv2d_grouped (tune "none" and "model") on sm_90a and sm_80: mma.sync on an input
     * tile copied with cp.async, PTX that ptxas accepts. */
    for (int a = 0; a < 3; a += 2) {
        for (int m = 0; m < 2; m++) {
            snprintf(body, sizeof(body),
                     "{\"op\":\"conv2d\",\"inputs\":[{\"shape\":[32,28,28,256],\"dtype\":\"f16\"},"
                     "{\"shape\":[256,3,3,8],\"dtype\":\"f16\"},{\"shape\":[256],\"dtype\":\"f16\"}],"
                     "\"attrs\":{\"stride\":1,\"padding\":1,\"groups\":32,\"layout\":\"nhwc\"},"
                     "\"epilogue\":[{\"op\":\"bias\",\"input\":2},{\"op\":\"relu\"}],\"arch\":\"%s\","
                     "\"tune\":\"%s\"}",
                     archs[a], m ? "model" : "none");
            ht_resp k = ht_post(&d, "/v1/kernels", body);
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(k.json, "schedule"),
                                                              "template");
            CHECK(k.status == 200 && cJSON_IsString(t) && !strcmp(t->valuestring, "conv2d_grouped"),
                  "grouped conv %s tune %s picked %s (%ld %.300s)", archs[a], m ? "model" : "none",
                  cJSON_IsString(t) ? t->valuestring : "?", k.status, k.body);
            const cJSON *ck = cJSON_GetObjectItemCaseSensitive(k.json, "key");
            if (m == 1 && cJSON_IsString(ck)) {
                char path[160];
                snprintf(path, sizeof(path), "/v1/kernels/%s/ptx", ck->valuestring);
                ht_resp ptx = ht_get(&d, path);
                CHECK(ptx.status == 200 && ptx.body, "grouped conv ptx: %ld", ptx.status);
                if (ptx.body) {
                    CHECK(strstr(ptx.body, "mma.sync.aligned.m16n8k16") && strstr(ptx.body, "cp.async.cg.shared.global"),
                          "grouped conv PTX without mma.sync or cp.async");
                    CHECK(ht_ptxas(ptx.body, ptx.len, archs[a]) == 0, "ptxas -arch=%s rejects the grouped conv PTX",
                          archs[a]);
                }
                ht_resp_free(&ptx);
            }
            ht_resp_free(&k);
        }
    }
    /* The SwiGLU gate, silu(x.W) * up with up [M, N] like the output: the copy engine loads up's
     * tile into shared memory beside the main loop, through one more map (the launch's last
     * parameter: up's [N, M] as it lies, boxes of 64 columns x block_m rows, 128-byte swizzle),
     * instead of per-fragment global reads in the epilogue. */
    snprintf(body, sizeof(body),
             "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[512,256],\"dtype\":\"f16\"},"
             "{\"shape\":[256,384],\"dtype\":\"f16\"},{\"shape\":[512,384],\"dtype\":\"f16\"}],"
             "\"epilogue\":[{\"op\":\"silu\"},{\"op\":\"mul\",\"input\":2}],\"arch\":\"sm_90a\",\"tune\":\"none\"}");
    r = ht_post(&d, "/v1/kernels", body);
    tmpl = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r.json, "schedule"), "template");
    CHECK(r.status == 200 && cJSON_IsString(tmpl) && !strcmp(tmpl->valuestring, "matmul_wgmma"), "swiglu: %ld %.300s",
          r.status, r.body);
    {
        const cJSON *kp = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r.json, "kernels"), 0), "params");
        const cJSON *last = cJSON_GetArrayItem(kp, cJSON_GetArraySize(kp) - 1);
        const cJSON *tm = cJSON_GetObjectItemCaseSensitive(last, "tensor_map");
        const cJSON *dims = cJSON_GetObjectItemCaseSensitive(tm, "dims"), *box = cJSON_GetObjectItemCaseSensitive(tm, "box");
        const cJSON *sw = cJSON_GetObjectItemCaseSensitive(tm, "swizzle");
        CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(last, "type")) ?: "", "tensor_map") &&
                  !strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(last, "buffer")) ?: "", "input2") &&
                  cJSON_GetArraySize(dims) == 2 && cJSON_GetArrayItem(dims, 0)->valuedouble == 384 &&
                  cJSON_GetArrayItem(dims, 1)->valuedouble == 512 && cJSON_GetArrayItem(box, 0)->valuedouble == 64 &&
                  cJSON_IsNumber(sw) && sw->valuedouble == 128,
              "swiglu: the operand's map: %.800s", r.body);
        const cJSON *skey = cJSON_GetObjectItemCaseSensitive(r.json, "key");
        if (cJSON_IsString(skey)) {
            char path[160];
            snprintf(path, sizeof(path), "/v1/kernels/%s/ptx", skey->valuestring);
            ht_resp ptx = ht_get(&d, path);
            CHECK(ptx.status == 200 && ptx.body && ht_ptxas(ptx.body, ptx.len, "sm_90a") == 0,
                  "swiglu: ptx %ld, or ptxas -arch=sm_90a rejects it", ptx.status);
            ht_resp_free(&ptx);
        }
    }
    ht_resp_free(&r);

    /* sm_90 (no arch-specific instructions) keeps mma.sync. */
    snprintf(body, sizeof(body), REQ, "sm_90", "model");
    r = ht_post(&d, "/v1/kernels", body);
    sched = cJSON_GetObjectItemCaseSensitive(r.json, "schedule");
    tmpl = cJSON_GetObjectItemCaseSensitive(sched, "template");
    CHECK(r.status == 200 && cJSON_IsString(tmpl) && !strcmp(tmpl->valuestring, "matmul_mma"), "sm_90 picked %s",
          cJSON_IsString(tmpl) ? tmpl->valuestring : "?");
    ht_resp_free(&r);

    CHECK(ht_stop(&d, SIGTERM) == 0, "SIGTERM exit status");
    ht_cleanup(&d);
    return ht_finish("it_wgmma");
}
