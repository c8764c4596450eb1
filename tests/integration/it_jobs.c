/* tests/integration/it_jobs.c - the tuning loop through the real daemon with stand-in workers (no
 * GPU needed): 50 concurrent identical requests make exactly one job and all get the same kernel;
 * a job with wait:false answers 202 and can be followed to the end; a worker that crashes or hangs
 * mid-job leaves a correct result with the failures recorded; a job can be cancelled. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "harness.h"

#define N_CLIENTS 50

#define REQ_FMT \
    "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[%d,256],\"dtype\":\"f16\"}," \
    "{\"shape\":[256,512],\"dtype\":\"f16\"}],\"arch\":\"sm_90\",\"tune\":\"measure\"," \
    "\"wait\":%s,\"budget\":{\"candidates\":%d}}"

static void concurrent_identical(const ht_daemon *d)
{
    char body[512];
    snprintf(body, sizeof(body), REQ_FMT, 96, "true", 6);
    CURLM *m = curl_multi_init();
    CURL *h[N_CLIENTS];
    ht_buf out[N_CLIENTS] = {0};
    for (int i = 0; i < N_CLIENTS; i++) {
        h[i] = curl_easy_init();
        curl_easy_setopt(h[i], CURLOPT_UNIX_SOCKET_PATH, d->socket);
        curl_easy_setopt(h[i], CURLOPT_URL, "http://localhost/v1/kernels");
        curl_easy_setopt(h[i], CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h[i], CURLOPT_WRITEFUNCTION, ht_curl_write);
        curl_easy_setopt(h[i], CURLOPT_WRITEDATA, &out[i]);
        curl_easy_setopt(h[i], CURLOPT_TIMEOUT, 180L);
        curl_multi_add_handle(m, h[i]);
    }
    int running = 1;
    while (running) {
        curl_multi_perform(m, &running);
        curl_multi_poll(m, NULL, 0, 200, NULL);
    }
    char first_key[80] = "";
    int ok = 0;
    for (int i = 0; i < N_CLIENTS; i++) {
        long status = 0;
        curl_easy_getinfo(h[i], CURLINFO_RESPONSE_CODE, &status);
        cJSON *j = out[i].buf ? cJSON_Parse(out[i].buf) : NULL;
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(j, "key");
        if (status == 200 && cJSON_IsString(k)) {
            if (!first_key[0])
                snprintf(first_key, sizeof(first_key), "%s", k->valuestring);
            CHECK(!strcmp(first_key, k->valuestring), "client %d got another kernel", i);
            CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "measured")),
                     "client %d: not measured: %.300s", i, out[i].buf);
            ok++;
        } else {
            CHECK(0, "client %d: status %ld %.300s", i, status, out[i].buf ? out[i].buf : "");
        }
        cJSON_Delete(j);
        free(out[i].buf);
        curl_multi_remove_handle(m, h[i]);
        curl_easy_cleanup(h[i]);
    }
    curl_multi_cleanup(m);
    printf("concurrent: %d/%d clients answered with one kernel\n", ok, N_CLIENTS);

    /* Exactly one job was made for them. */
    ht_resp r = ht_get(d, "/v1/jobs");
    const cJSON *jobs = cJSON_GetObjectItemCaseSensitive(r.json, "jobs");
    CHECK(cJSON_GetArraySize(jobs) == 1, "%d jobs for 50 identical requests: %.500s",
             cJSON_GetArraySize(jobs), r.body);
    ht_resp_free(&r);
}

static cJSON *job_of(const ht_resp *r)
{
    return cJSON_GetObjectItemCaseSensitive(r->json, "job");
}

static const char *str_of(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* Submits with wait:false and follows the job to its end; returns the final job JSON text. */
static char *follow_job(const ht_daemon *d, const char *body, char *ret_state, size_t state_len)
{
    ht_resp r = ht_post(d, "/v1/kernels", body);
    CHECK(r.status == 202, "wait:false answered %ld %.300s", r.status, r.body);
    char url[128];
    snprintf(url, sizeof(url), "%s", str_of(job_of(&r), "url"));
    ht_resp_free(&r);
    if (!url[0])
        return NULL;
    for (int i = 0; i < 1200; i++) {
        ht_resp j = ht_get(d, url);
        const char *state = str_of(job_of(&j), "state");
        if (strcmp(state, "queued") && strcmp(state, "running")) {
            snprintf(ret_state, state_len, "%s", state);
            char *text = strdup(j.body);
            ht_resp_free(&j);
            return text;
        }
        ht_resp_free(&j);
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
    CHECK(0, "job %s did not end within 120 s", url);
    return NULL;
}

static void faults(void)
{
    ht_daemon d;
    ht_init(&d);
    ht_use_standin(&d);
    setenv("HIDETD_STANDIN_FAULTS", "crash@2,hang@4,wrong@5", 1);
    ht_write_config(&d, "[workers]\nlaunch_timeout = 1s\nheartbeat = 200ms\n");
    if (ht_start(&d) != 0)
        return;

    char body[512], state[32] = "";
    snprintf(body, sizeof(body), REQ_FMT, 200, "false", 8);
    char *text = follow_job(&d, body, state, sizeof(state));
    CHECK(!strcmp(state, "done"), "job with faults ended '%s': %.500s", state, text ? text : "");
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    const cJSON *job = cJSON_GetObjectItemCaseSensitive(j, "job");
    const cJSON *cands = cJSON_GetObjectItemCaseSensitive(job, "candidates");
    const cJSON *failed = cJSON_GetObjectItemCaseSensitive(cands, "failed");
    CHECK(cJSON_IsNumber(failed) && failed->valueint >= 3,
             "crash, hang and wrong should be 3 failed candidates: %.500s", text ? text : "");
    const char *result = str_of(job, "result");
    CHECK(*result, "no result URL: %.300s", text ? text : "");
    if (*result) {
        ht_resp k = ht_get(&d, result);
        CHECK(k.status == 200 && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(k.json, "measured")),
                 "result after faults: %ld %.300s", k.status, k.body);
        ht_resp_free(&k);
    }
    cJSON_Delete(j);
    free(text);

    /* Workers were restarted and the daemon says so. */
    ht_resp st = ht_get(&d, "/v1/status");
    const cJSON *w0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(st.json, "workers"), 0);
    const cJSON *restarts = cJSON_GetObjectItemCaseSensitive(w0, "restarts");
    CHECK(cJSON_IsNumber(restarts) && restarts->valueint >= 2, "restarts: %.400s", st.body);
    ht_resp_free(&st);

    /* Cancel: a long job is cancelled while running. */
    unsetenv("HIDETD_STANDIN_FAULTS");
    snprintf(body, sizeof(body), REQ_FMT, 300, "false", 200);
    ht_resp r = ht_post(&d, "/v1/kernels", body);
    CHECK(r.status == 202, "submit: %ld", r.status);
    char url[128];
    snprintf(url, sizeof(url), "%s", str_of(job_of(&r), "url"));
    ht_resp_free(&r);
    ht_resp c = ht_request(&d, false, "DELETE", url, NULL, 0, NULL);
    CHECK(c.status == 200 && !strcmp(str_of(job_of(&c), "state"), "cancelled"),
             "cancel: %ld %.300s", c.status, c.body);
    ht_resp_free(&c);
    ht_resp g = ht_get(&d, url);
    CHECK(!strcmp(str_of(job_of(&g), "state"), "cancelled"), "after cancel: %.300s", g.body);
    ht_resp_free(&g);
    ht_resp h = ht_get(&d, "/healthz");
    CHECK(h.status == 200, "healthz after cancel");
    ht_resp_free(&h);

    CHECK(ht_stop(&d, SIGTERM) == 0, "SIGTERM exit status");
    ht_cleanup(&d);
}

int main(void)
{
    ht_daemon d;
    ht_init(&d);
    ht_use_standin(&d);
    if (ht_start(&d) != 0)
        return 1;
    concurrent_identical(&d);
    CHECK(ht_stop(&d, SIGTERM) == 0, "SIGTERM exit status");
    ht_cleanup(&d);

    faults();
    return ht_finish("it_jobs");
}
