/* tests/integration/it_native.c - "arch": "native" and [tuning] default_arch against the real
 * daemon: with a worker whose device is sm_90 (the stand-in), native and the default resolve
 * to sm_90a and the answer says so (kernels, spaces and graphs alike); an sm_86 device has no
 * "a" target, so native is sm_86; a configured default_arch wins over the GPU; a daemon without
 * workers refuses native with 503 no_gpu and defaults to sm_90. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define SOFTMAX "\"op\":\"softmax\",\"inputs\":[{\"shape\":[8,100],\"dtype\":\"f16\"}],\"tune\":\"none\""

static const char *arch_of(const ht_resp *r)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(r->json, "arch");
    return cJSON_IsString(a) ? a->valuestring : "?";
}

static void expect_arch(const ht_daemon *d, const char *body, const char *want)
{
    ht_resp r = ht_post(d, "/v1/kernels", body);
    CHECK(r.status == 200 && strcmp(arch_of(&r), want) == 0, "%s: %ld arch %s, want %s (%.200s)",
          body, r.status, arch_of(&r), want, r.body);
    ht_resp_free(&r);
}

/* A daemon with stand-in workers of compute capability sm (as "90"); config text or NULL. */
static int start(ht_daemon *d, const char *sm, const char *config)
{
    ht_init(d);
    if (sm) {
        setenv("HIDETD_STANDIN_SM", sm, 1);
        ht_arg(d, "--workers");
        ht_arg(d, "standin");
    } else {
        ht_arg(d, "--workers");
        ht_arg(d, "none");
    }
    if (config)
        ht_write_config(d, config);
    return ht_start(d);
}

static void stop(ht_daemon *d)
{
    CHECK(ht_stop(d, SIGTERM) == 0, "clean exit");
    ht_cleanup(d);
}

static void hopper(void)
{
    ht_daemon d;
    if (start(&d, "90", NULL) != 0) {
        CHECK(false, "hidetd did not start");
        return;
    }
    expect_arch(&d, "{" SOFTMAX "}", "sm_90a");
    expect_arch(&d, "{" SOFTMAX ",\"arch\":\"native\"}", "sm_90a");
    expect_arch(&d, "{" SOFTMAX ",\"arch\":\"sm_90\"}", "sm_90");
    /* Both keys exist: native's kernel is another one than sm_90's. */
    ht_resp a = ht_post(&d, "/v1/kernels", "{" SOFTMAX ",\"arch\":\"native\"}");
    ht_resp b = ht_post(&d, "/v1/kernels", "{" SOFTMAX ",\"arch\":\"sm_90\"}");
    const cJSON *ka = cJSON_GetObjectItemCaseSensitive(a.json, "op_key");
    const cJSON *kb = cJSON_GetObjectItemCaseSensitive(b.json, "op_key");
    CHECK(cJSON_IsString(ka) && cJSON_IsString(kb) && strcmp(ka->valuestring, kb->valuestring) != 0);
    ht_resp_free(&a);
    ht_resp_free(&b);

    ht_resp s = ht_post(&d, "/v1/spaces", "{" SOFTMAX ",\"arch\":\"native\"}");
    CHECK(s.status == 200 && strcmp(arch_of(&s), "sm_90a") == 0, "spaces: %ld %s", s.status, arch_of(&s));
    ht_resp_free(&s);
    ht_resp g = ht_post(&d, "/v1/graphs",
                        "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[8,100],\"dtype\":\"f16\"}],"
                        "\"nodes\":[{\"op\":\"relu\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}],"
                        "\"outputs\":[\"y\"]},\"arch\":\"native\",\"tune\":\"none\"}");
    CHECK(g.status == 200 && strcmp(arch_of(&g), "sm_90a") == 0, "graphs: %ld %s", g.status, arch_of(&g));
    ht_resp_free(&g);
    stop(&d);
}

static void ampere_and_config(void)
{
    ht_daemon d;
    if (start(&d, "86", NULL) == 0) {
        expect_arch(&d, "{" SOFTMAX ",\"arch\":\"native\"}", "sm_86");
        expect_arch(&d, "{" SOFTMAX "}", "sm_86");
        stop(&d);
    } else {
        CHECK(false, "hidetd did not start");
    }
    if (start(&d, "90", "[tuning]\ndefault_arch = sm_80\n") == 0) {
        expect_arch(&d, "{" SOFTMAX "}", "sm_80");
        expect_arch(&d, "{" SOFTMAX ",\"arch\":\"native\"}", "sm_90a");
        stop(&d);
    } else {
        CHECK(false, "hidetd did not start");
    }
}

static void no_gpu(void)
{
    ht_daemon d;
    if (start(&d, NULL, NULL) != 0) {
        CHECK(false, "hidetd did not start");
        return;
    }
    expect_arch(&d, "{" SOFTMAX "}", "sm_90");
    ht_resp r = ht_post(&d, "/v1/kernels", "{" SOFTMAX ",\"arch\":\"native\"}");
    const cJSON *field = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r.json, "error"), "field");
    CHECK(r.status == 503 && strcmp(ht_error_code(&r), "no_gpu") == 0 && cJSON_IsString(field) &&
              strcmp(field->valuestring, "arch") == 0,
          "%ld %.200s", r.status, r.body);
    ht_resp_free(&r);
    r = ht_post(&d, "/v1/kernels", "{" SOFTMAX ",\"arch\":\"sm_91\"}");
    CHECK(r.status == 422 && strstr(r.body, "native"), "%ld %.200s", r.status, r.body);
    ht_resp_free(&r);
    stop(&d);
}

int main(void)
{
    hopper();
    ampere_and_config();
    no_gpu();
    return ht_finish("it_native");
}
