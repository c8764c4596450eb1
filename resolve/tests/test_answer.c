/* resolve/tests/test_answer.c - the exact JSON of kernel sets built from stored artifacts (as
 * agreed in the wire formats), the rank policy and the error statuses. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "resolve/resolve.h"
#include "tests/check.h"

static const char key[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
static const char opkey[] = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

static void fill(kc_artifact *a, const char *launch)
{
    memset(a, 0, sizeof(*a));
    memcpy(a->key, key, sizeof(key));
    memcpy(a->op_key, opkey, sizeof(opkey));
    strcpy(a->op, "matmul");
    strcpy(a->target, "sm_90");
    a->op_json = (char *)"{\"op\":\"matmul\",\"output\":{\"align\":16,\"dtype\":\"f16\",\"shape\":[128,256]}}";
    a->schedule_json = (char *)"{\"template\":\"matmul_mma\",\"params\":{\"block_m\":128}}";
    a->launch_json = (char *)launch;
    a->measured = true;
    a->latency_us = 12.5;
    a->predicted_us = 10.25;
}

static void kernel_set_exact(void)
{
    kc_artifact a;
    /* Arguments by buffer index (TUNER_BUF_*): inputs 0 and 2, output. */
    fill(&a, "{\"kernels\":[{\"name\":\"hidet_matmul_x\",\"grid\":[2,4,1],\"block\":[128,1,1],"
             "\"shared_bytes\":32768,\"args\":[0,2,8]}],\"workspace_bytes\":0}");
    char *json = NULL;
    CHECK(resolve_kernel_set_json(&a, true, NULL, &json) == 0 && json, "build");
    char want[2048];
    snprintf(want, sizeof(want),
             "{\"key\":\"%s\",\"op_key\":\"%s\",\"cached\":true,\"measured\":true,"
             "\"op\":\"matmul\",\"arch\":\"sm_90\",\"output\":{\"shape\":[128,256],\"dtype\":\"f16\"},"
             "\"workspace_bytes\":0,\"kernels\":[{\"name\":\"hidet_matmul_x\",\"arch\":\"sm_90\","
             "\"grid\":[2,4,1],\"block\":[128,1,1],\"shared_bytes\":32768,\"params\":["
             "{\"index\":0,\"buffer\":\"input0\",\"type\":\"pointer\"},"
             "{\"index\":1,\"buffer\":\"input2\",\"type\":\"pointer\"},"
             "{\"index\":2,\"buffer\":\"output\",\"type\":\"pointer\"}],"
             "\"ptx_url\":\"/v1/kernels/%s/ptx\",\"cubin_url\":\"/v1/kernels/%s/cubin\","
             "\"latency_us\":12.5}],\"latency_us\":12.5,\"predicted_us\":10.25,"
             "\"schedule\":{\"template\":\"matmul_mma\",\"params\":{\"block_m\":128}}}",
             key, opkey, key, key);
    CHECK_STR(json, want);
    free(json);
}

static void kernel_set_variants(void)
{
    kc_artifact a;
    /* Arguments by name, the output in the launch description, two kernels with a workspace,
     * not measured, with a warning. */
    fill(&a, "{\"kernels\":[{\"name\":\"k1\",\"grid\":[1,1,1],\"block\":[256,1,1],\"shared_bytes\":0,"
             "\"args\":[\"input0\",\"workspace\"]},{\"name\":\"k2\",\"grid\":[8,1,1],"
             "\"block\":[32,1,1],\"shared_bytes\":0,\"args\":[\"workspace\",\"output\"]}],"
             "\"workspace_bytes\":4096,\"output\":{\"shape\":[7],\"dtype\":\"f32\"}}");
    a.measured = false;
    a.latency_us = -1;
    char *json = NULL;
    CHECK(resolve_kernel_set_json(&a, false, "not measured: no GPU", &json) == 0 && json, "build");
    cJSON *j = cJSON_Parse(json);
    CHECK(j != NULL, "parses");
    CHECK(cJSON_IsFalse(cJSON_GetObjectItem(j, "cached")) && cJSON_IsFalse(cJSON_GetObjectItem(j, "measured")),
          "flags");
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(j, "warning")), "not measured: no GPU");
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(j, "latency_us")), "latency null when not measured");
    CHECK(cJSON_GetObjectItem(j, "workspace_bytes")->valuedouble == 4096, "workspace");
    const cJSON *out = cJSON_GetObjectItem(j, "output");
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(out, "dtype")), "f32");
    const cJSON *ks = cJSON_GetObjectItem(j, "kernels");
    CHECK(cJSON_GetArraySize(ks) == 2, "two kernels");
    const cJSON *k2 = cJSON_GetArrayItem(ks, 1);
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(k2, "name")), "k2");
    const cJSON *p0 = cJSON_GetArrayItem(cJSON_GetObjectItem(k2, "params"), 0);
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(p0, "buffer")), "workspace");
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(k2, "latency_us")), "per-kernel latency null");
    /* The key order of the agreed format: warning right after measured. */
    CHECK(strstr(json, "\"measured\":false,\"warning\":") != NULL, "order: %s", json);
    cJSON_Delete(j);
    free(json);

    /* An empty warning is omitted. */
    CHECK(resolve_kernel_set_json(&a, false, "", &json) == 0 && !strstr(json, "warning"), "no warning");
    free(json);

    /* Corrupt stored launch descriptions are refused, not half-answered. */
    static const char *const bad[] = {
        "not json",
        "{\"kernels\":{}}",
        "{\"kernels\":[{\"grid\":[1,1,1],\"block\":[1,1,1],\"args\":[0]}]}",
        "{\"kernels\":[{\"name\":\"k\",\"grid\":[1,1],\"block\":[1,1,1],\"args\":[0]}]}",
        "{\"kernels\":[{\"name\":\"k\",\"grid\":[1,1,1],\"block\":[0,1,1],\"args\":[0]}]}",
        "{\"kernels\":[{\"name\":\"k\",\"grid\":[1,1,1],\"block\":[1,1,1],\"args\":[42]}]}",
        "{\"kernels\":[{\"name\":\"k\",\"grid\":[1,1,1],\"block\":[1,1,1],\"args\":[\"input9\"]}]}",
        "{\"kernels\":[{\"name\":\"k\",\"grid\":[1,1,1],\"block\":[1,1,1],\"args\":[\"stack\"]}]}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        fill(&a, bad[i]);
        json = NULL;
        CHECK(resolve_kernel_set_json(&a, true, NULL, &json) < 0 && !json, "bad launch %zu accepted", i);
    }
}

static void ranks(void)
{
    kc_artifact a;
    fill(&a, "{}");
    CHECK(resolve_artifact_rank(&a) == 2, "measured");
    a.measured = false;
    a.provenance_json = (char *)"{\"mode\":\"model\"}";
    CHECK(resolve_artifact_rank(&a) == 1, "model");
    a.provenance_json = (char *)"{\"daemon\":\"0.1.0\",\"mode\":\"none\"}";
    CHECK(resolve_artifact_rank(&a) == 0, "none");
    a.provenance_json = (char *)"not json";
    CHECK(resolve_artifact_rank(&a) == 1, "unreadable provenance counts as model");
    a.provenance_json = NULL;
    CHECK(resolve_artifact_rank(&a) == 1, "no provenance");

    bool warn = true;
    /* A stronger or equal stored choice answers. */
    CHECK(resolve_rank_answers(1, TUNER_TUNE_NONE, false, &warn) && !warn, "model answers none");
    CHECK(resolve_rank_answers(2, TUNER_TUNE_MODEL, true, &warn) && !warn, "measured answers model");
    CHECK(resolve_rank_answers(2, TUNER_TUNE_MEASURE, true, &warn) && !warn, "measured answers measure");
    CHECK(resolve_rank_answers(0, TUNER_TUNE_NONE, true, &warn) && !warn, "none answers none");
    /* A weaker one re-tunes... */
    CHECK(!resolve_rank_answers(0, TUNER_TUNE_MODEL, false, &warn), "none does not answer model");
    CHECK(!resolve_rank_answers(1, TUNER_TUNE_MEASURE, true, &warn), "model does not answer measure with a GPU");
    /* ...unless measuring is impossible: then the model's choice answers, with a warning. */
    CHECK(resolve_rank_answers(1, TUNER_TUNE_MEASURE, false, &warn) && warn, "model answers measure without a GPU");
    CHECK(!resolve_rank_answers(0, TUNER_TUNE_MEASURE, false, &warn), "the default is not a measured stand-in");
}

static void error_statuses(void)
{
    CHECK(resolve_error_status("no_gpu") == 503 && resolve_error_status("compile_error") == 500 &&
          resolve_error_status("queue_full") == 429 && resolve_error_status("shape_mismatch") == 422 &&
          resolve_error_status("never_heard_of") == 500 && resolve_error_status(NULL) == 500,
          "error statuses");
    resolve_error e;
    resolve_error_from_errno(&e, -EBADMSG, "kernel");
    CHECK(e.status == 500 && !strcmp(e.code, "integrity_error"), "EBADMSG");
    resolve_error_from_errno(&e, -ENOENT, "kernel");
    CHECK(e.status == 404 && !strcmp(e.code, "not_found") && !strcmp(e.message, "kernel: not found"),
          "ENOENT: %s", e.message);
    resolve_error_from_errno(&e, -EIO, "kernel");
    CHECK(e.status == 500 && !strcmp(e.code, "internal"), "EIO");
}

int main(void)
{
    ranks();
    kernel_set_exact();
    kernel_set_variants();
    error_statuses();
    return check_finish("test_answer");
}
