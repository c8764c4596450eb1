/* daemon/tests/test_answers.c - the exact JSON of kernel sets (from stored artifacts), jobs,
 * spaces and status, as agreed in the wire formats. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "daemon/answers.h"

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
    CHECK(hd_kernel_set_json(&a, true, NULL, &json) == 0 && json, "build");
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
    CHECK(hd_kernel_set_json(&a, false, "not measured: no GPU", &json) == 0 && json, "build");
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
    CHECK(hd_kernel_set_json(&a, false, "", &json) == 0 && !strstr(json, "warning"), "no warning");
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
        CHECK(hd_kernel_set_json(&a, true, NULL, &json) < 0 && !json, "bad launch %zu accepted", i);
    }
}

static void jobs(void)
{
    sched_job_info info;
    memset(&info, 0, sizeof(info));
    info.id = 17;
    info.state = SCHED_RUNNING;
    strcpy(info.op, "matmul");
    strcpy(info.target, "sm_90");
    info.mode = TUNER_TUNE_MEASURE;
    info.priority = SCHED_PRIO_NORMAL;
    info.candidates_total = 64;
    info.candidates_done = 10;
    info.candidates_failed = 1;
    info.best_us = 12.5;
    strcpy(info.best_schedule, "{\"template\":\"matmul_mma\",\"params\":{\"block_m\":64}}");
    info.elapsed_s = 1.2;
    info.waiters = 3;
    char *json = NULL;
    CHECK(hd_job_json(&info, &json) == 0, "job");
    CHECK_STR(json, "{\"job\":{\"id\":\"17\",\"url\":\"/v1/jobs/17\",\"state\":\"running\","
                    "\"op\":\"matmul\",\"arch\":\"sm_90\",\"tune\":\"measure\",\"priority\":\"normal\","
                    "\"candidates\":{\"total\":64,\"done\":10,\"failed\":1},\"best_us\":12.5,"
                    "\"best_schedule\":{\"template\":\"matmul_mma\",\"params\":{\"block_m\":64}},"
                    "\"elapsed_s\":1.2,\"waiters\":3}}");
    free(json);

    info.state = SCHED_DONE;
    memcpy(info.artifact_key, key, sizeof(key));
    info.measured = true;
    strcpy(info.warning, "w");
    CHECK(hd_job_json(&info, &json) == 0, "done job");
    char want[256];
    snprintf(want, sizeof(want), "\"result\":\"/v1/kernels/%s\",\"measured\":true,\"warning\":\"w\"}}", key);
    CHECK(strstr(json, want) != NULL, "done fields: %s", json);
    free(json);

    memset(&info, 0, sizeof(info));
    info.id = 3;
    info.state = SCHED_FAILED;
    info.best_us = -1;
    info.priority = SCHED_PRIO_BACKGROUND;
    info.mode = TUNER_TUNE_NONE;
    strcpy(info.error_code, "compile_error");
    strcpy(info.error, "nvrtc: boom");
    CHECK(hd_job_json(&info, &json) == 0, "failed job");
    CHECK(strstr(json, "\"best_us\":null,\"best_schedule\":null") != NULL, "nulls: %s", json);
    CHECK(strstr(json, "\"priority\":\"background\"") && strstr(json, "\"tune\":\"none\""), "names: %s", json);
    CHECK(strstr(json, "\"error\":{\"code\":\"compile_error\",\"message\":\"nvrtc: boom\"}") != NULL,
          "error: %s", json);
    CHECK(!strstr(json, "result"), "no result when failed");
    free(json);

    sched_job_info two[2];
    memset(two, 0, sizeof(two));
    two[0].id = 1;
    two[1].id = 2;
    two[0].best_us = two[1].best_us = -1;
    CHECK(hd_jobs_json(two, 2, &json) == 0, "list");
    cJSON *j = cJSON_Parse(json);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(j, "jobs")) == 2, "two jobs: %s", json);
    cJSON_Delete(j);
    free(json);
    CHECK(hd_jobs_json(NULL, 0, &json) == 0, "empty list");
    CHECK_STR(json, "{\"jobs\":[]}");
    free(json);
}

static void spaces(void)
{
    tuner_schedule items[2] = {
        { .template_name = "softmax_rows", .n_params = 2,
          .params = { { "threads_per_row", 32 }, { "vec", 8 } } },
        { .template_name = "softmax_rows", .n_params = 1, .params = { { "threads_per_row", 64 } } },
    };
    tuner_space sp = { .n = 2, .items = items, .hash = "0123456789abcdef" };
    tuner_op op;
    memset(&op, 0, sizeof(op));
    op.kind = TUNER_OP_SOFTMAX;
    tuner_target t = { .sm = 90, .arch_specific = true };
    size_t order[2] = { 1, 0 };
    double pred[2] = { 20.5, 10.25 };
    char *json = NULL;
    CHECK(hd_space_json(&op, &t, &sp, order, pred, &json) == 0, "space");
    CHECK_STR(json, "{\"op\":\"softmax\",\"arch\":\"sm_90a\",\"space_hash\":\"0123456789abcdef\","
                    "\"count\":2,\"candidates\":[{\"index\":1,\"template\":\"softmax_rows\","
                    "\"params\":{\"threads_per_row\":64},\"predicted_us\":10.25},{\"index\":0,"
                    "\"template\":\"softmax_rows\",\"params\":{\"threads_per_row\":32,\"vec\":8},"
                    "\"predicted_us\":20.5}]}");
    free(json);
    size_t bad_order[2] = { 0, 5 };
    json = NULL;
    CHECK(hd_space_json(&op, &t, &sp, bad_order, pred, &json) < 0 && !json, "bad order refused");
}

static void status(void)
{
    gw_device_info dev;
    memset(&dev, 0, sizeof(dev));
    strcpy(dev.name, "Stand-in GPU");
    dev.sm = 90;
    dev.sm_count = 132;
    dev.mem_bytes = 80ULL << 30;
    dev.driver_version = 13000;
    dev.state = GW_DEV_READY;
    dev.restarts = 2;
    dev.measured = 10;
    dev.failed = 3;
    hd_status_view v = {
        .version = "0.1.0", .uptime_s = 12.7, .gpu_available = true, .devices = &dev,
        .n_devices = 1, .jobs_queued = 1, .jobs_running = 2, .jobs_done = 3, .jobs_failed = 4,
        .have_cache_stats = true, .cache = { 5, 6, 7, 8 }, .cache_path = "/var/lib/hidetd/kernels.db",
    };
    char *json = NULL;
    CHECK(hd_status_json(&v, &json) == 0, "status");
    char want[1024];
    snprintf(want, sizeof(want),
             "{\"version\":\"0.1.0\",\"uptime_s\":12,\"gpu_available\":true,\"workers\":[{\"index\":0,"
             "\"name\":\"Stand-in GPU\",\"arch\":\"sm_90\",\"sm_count\":132,\"memory_bytes\":%llu,"
             "\"driver_version\":13000,\"state\":\"%s\",\"restarts\":2,\"measured\":10,\"failed\":3,"
             "\"last_error\":\"\"}],\"jobs\":{\"queued\":1,\"running\":2,\"done\":3,\"failed\":4},"
             "\"cache\":{\"artifacts\":5,\"selections\":6,\"trials\":7,\"bytes\":8,"
             "\"path\":\"/var/lib/hidetd/kernels.db\"}}",
             80ULL << 30, gw_device_state_name(GW_DEV_READY));
    CHECK_STR(json, want);
    free(json);

    CHECK(hd_job_error_status("no_gpu") == 503 && hd_job_error_status("compile_error") == 500 &&
          hd_job_error_status("queue_full") == 429 && hd_job_error_status("shape_mismatch") == 422 &&
          hd_job_error_status("never_heard_of") == 500 && hd_job_error_status(NULL) == 500,
          "error statuses");
}

static void ranks(void)
{
    kc_artifact a;
    fill(&a, "{}");
    CHECK(hd_artifact_rank(&a) == 2, "measured");
    a.measured = false;
    a.provenance_json = (char *)"{\"mode\":\"model\"}";
    CHECK(hd_artifact_rank(&a) == 1, "model");
    a.provenance_json = (char *)"{\"daemon\":\"0.1.0\",\"mode\":\"none\"}";
    CHECK(hd_artifact_rank(&a) == 0, "none");
    a.provenance_json = (char *)"not json";
    CHECK(hd_artifact_rank(&a) == 1, "unreadable provenance counts as model");
    a.provenance_json = NULL;
    CHECK(hd_artifact_rank(&a) == 1, "no provenance");

    bool warn = true;
    /* A stronger or equal stored choice answers. */
    CHECK(hd_rank_answers(1, TUNER_TUNE_NONE, false, &warn) && !warn, "model answers none");
    CHECK(hd_rank_answers(2, TUNER_TUNE_MODEL, true, &warn) && !warn, "measured answers model");
    CHECK(hd_rank_answers(2, TUNER_TUNE_MEASURE, true, &warn) && !warn, "measured answers measure");
    CHECK(hd_rank_answers(0, TUNER_TUNE_NONE, true, &warn) && !warn, "none answers none");
    /* A weaker one re-tunes... */
    CHECK(!hd_rank_answers(0, TUNER_TUNE_MODEL, false, &warn), "none does not answer model");
    CHECK(!hd_rank_answers(1, TUNER_TUNE_MEASURE, true, &warn), "model does not answer measure with a GPU");
    /* ...unless measuring is impossible: then the model's choice answers, with a warning. */
    CHECK(hd_rank_answers(1, TUNER_TUNE_MEASURE, false, &warn) && warn, "model answers measure without a GPU");
    CHECK(!hd_rank_answers(0, TUNER_TUNE_MEASURE, false, &warn), "the default is not a measured stand-in");
}

int main(void)
{
    ranks();
    kernel_set_exact();
    kernel_set_variants();
    jobs();
    spaces();
    status();
    return check_finish("test_answers");
}
