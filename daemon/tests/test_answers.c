/* daemon/tests/test_answers.c - the exact JSON of jobs, spaces and status, as agreed in the wire
 * formats (kernel sets: resolve/tests/test_answer.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tests/check.h"
#include "daemon/answers.h"

static const char key[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

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
    info.measured_on = 1u << 0 | 1u << 2;
    info.final_device = -1;
    char *json = NULL;
    CHECK(hd_job_json(&info, &json) == 0, "job");
    CHECK_STR(json, "{\"job\":{\"id\":\"17\",\"url\":\"/v1/jobs/17\",\"state\":\"running\","
                    "\"op\":\"matmul\",\"arch\":\"sm_90\",\"tune\":\"measure\",\"priority\":\"normal\","
                    "\"candidates\":{\"total\":64,\"done\":10,\"failed\":1},\"best_us\":12.5,"
                    "\"best_schedule\":{\"template\":\"matmul_mma\",\"params\":{\"block_m\":64}},"
                    "\"measured_on\":[0,2],\"final_round\":null,"
                    "\"elapsed_s\":1.2,\"waiters\":3}}");
    free(json);

    /* The final round of a job measured on several GPUs. */
    info.final_device = 2;
    info.final_candidates = 4;
    info.final_changed = true;
    info.final_heated = true;
    CHECK(hd_job_json(&info, &json) == 0, "job with a final round");
    CHECK(strstr(json, "\"final_round\":{\"device\":2,\"candidates\":4,\"changed\":true,\"heated\":true}") !=
              NULL,
          "final round: %s", json);
    CHECK(strstr(json, "timed_at") == NULL && strstr(json, "best_middle_us") == NULL &&
              strstr(json, "range_worst") == NULL,
          "a static job: %s", json);
    free(json);

    /* A measured range: the sizes its candidates were timed at, the best's time at the middle. */
    info.n_range_dims = 2;
    strcpy(info.range_dims[0], "b");
    strcpy(info.range_dims[1], "s");
    info.range_top[0] = 16;
    info.range_top[1] = 512;
    info.range_mid[0] = 8;
    info.range_mid[1] = 362;
    info.best_mid_us = 7.25;
    info.range_worst = 1.14473;
    CHECK(hd_job_json(&info, &json) == 0, "range job");
    CHECK(strstr(json, "\"timed_at\":{\"top\":{\"b\":16,\"s\":512},\"middle\":{\"b\":8,\"s\":362}},"
                       "\"best_middle_us\":7.25,\"range_worst\":1.145") != NULL,
          "range job: %s", json);
    free(json);
    info.best_mid_us = -1;
    info.range_worst = -1;
    CHECK(hd_job_json(&info, &json) == 0, "range job, none passed");
    CHECK(strstr(json, "\"best_middle_us\":null,\"range_worst\":null") != NULL, "range job, none passed: %s",
          json);
    free(json);
    info.n_range_dims = 0;

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
    CHECK(strstr(json, "measured_on") == NULL && strstr(json, "final_round") == NULL,
          "no GPU fields without measuring: %s", json);
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
    dev.pid = 4242;
    dev.busy_s = 1.5;
    dev.measured = 10;
    dev.failed = 3;
    dev.oos_count = 1;
    dev.probes = 2;
    dev.hung_kills = 3;
    dev.loop_stalls = 4;
    dev.log_dropped = 5;
    hd_status_view v = {
        .version = "0.1.0", .uptime_s = 12.7, .gpu_available = true, .devices = &dev,
        .n_devices = 1, .jobs_queued = 1, .jobs_running = 2, .jobs_done = 3, .jobs_failed = 4,
        .have_cache_stats = true, .cache = { 5, 6, 7, 8 }, .cache_path = "/var/lib/hidetd/kernels.db",
        .cache_hits = 9, .cache_misses = 10, .cache_max_bytes = 11, .jobs_cancelled = 12,
        .candidates_compiled = 13, .candidates_measured = 14, .candidates_failed = 15,
    };
    char *json = NULL;
    CHECK(hd_status_json(&v, &json) == 0, "status");
    char want[1024];
    snprintf(want, sizeof(want),
             "{\"version\":\"0.1.0\",\"uptime_s\":12,\"gpu_available\":true,\"workers\":[{\"index\":0,"
             "\"name\":\"Stand-in GPU\",\"arch\":\"sm_90\",\"sm_count\":132,\"memory_bytes\":%llu,"
             "\"driver_version\":13000,\"state\":\"%s\",\"restarts\":2,\"pid\":4242,\"busy_s\":1.5,\"measured\":10,\"failed\":3,"
             "\"last_error\":\"\",\"out_of_service\":null,\"out_of_service_count\":1,\"probes\":2,"
             "\"hung_kills\":3,\"loop_stalls\":4,\"log_lines_dropped\":5}],\"jobs\":{\"queued\":1,\"running\":2,\"done\":3,\"failed\":4,"
             "\"cancelled\":12},\"candidates\":{\"compiled\":13,\"measured\":14,\"failed\":15},"
             "\"cache\":{\"artifacts\":5,\"selections\":6,\"trials\":7,\"bytes\":8,"
             "\"path\":\"/var/lib/hidetd/kernels.db\",\"max_bytes\":11,\"hits\":9,\"misses\":10}}",
             80ULL << 30, gw_device_state_name(GW_DEV_READY));
    CHECK_STR(json, want);
    free(json);

    /* Out of service: why, since when, the next probe (null while one runs). */
    dev.state = GW_DEV_OUT_OF_SERVICE;
    snprintf(dev.oos_reason, sizeof(dev.oos_reason), "worker crashed, signal 6 (Aborted)");
    dev.oos_since = 1764000000.5;
    dev.next_probe = 1764000010.25;
    CHECK(hd_status_json(&v, &json) == 0, "status out of service");
    CHECK(strstr(json, "\"state\":\"out_of_service\"") != NULL, "%s", json);
    CHECK(strstr(json, "\"out_of_service\":{\"reason\":\"worker crashed, signal 6 (Aborted)\","
                       "\"since\":1764000000.5,\"next_probe\":1764000010.25}") != NULL, "%s", json);
    free(json);
    dev.next_probe = 0;
    CHECK(hd_status_json(&v, &json) == 0, "status probing");
    CHECK(strstr(json, "\"next_probe\":null}") != NULL, "%s", json);
    free(json);
}

int main(void)
{
    jobs();
    spaces();
    status();
    return check_finish("test_answers");
}
