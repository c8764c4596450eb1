/* tests/integration/it_dynamic_merge.c - a dispatch table's boundaries from measurement, through
 * the real daemon with the stand-in worker (docs/api.md, "Named dimensions"; issue 39): a softmax
 * over n in 1..64 with every range hinted and "tune": "measure" (one candidate each: the model's
 * best, timed by the stand-in, so the entries are measured without many compiles). Once every
 * range is tuned the table covers every n exactly once, every entry is ready with a measured set,
 * a merged entry lists fine ranges that tile it and its set's dims are its range, and two
 * neighbouring entries left apart run different code (another schedule or another PTX); at least
 * one merge happens (the same softmax schedule is the model's best at neighbouring row counts).
 * Each measured set carries its job's range_worst (1: one candidate). The same table with "tune":
 * "model" on a fresh daemon (no measurement) merges nothing, and its sets carry none. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define SOFTMAX(tune)                                                                                    \
    "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"n\",1024],\"dtype\":\"f16\"}],"                      \
    "\"dims\":{\"n\":{\"min\":1,\"max\":64,\"hints\":[8,18,22,26,30,36,44,52,60]}},"                    \
    "\"arch\":\"sm_90\",\"tune\":\"" tune "\",\"budget\":{\"candidates\":1}}"

static const cJSON *get(const cJSON *o, const char *k)
{
    return o ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = get(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static int lo_of(const cJSON *e)
{
    return cJSON_GetArrayItem(get(get(e, "ranges"), "n"), 0)->valueint;
}

static int hi_of(const cJSON *e)
{
    return cJSON_GetArrayItem(get(get(e, "ranges"), "n"), 1)->valueint;
}

/* The PTX of a kernel set (malloc'd, NUL-terminated; NULL when it cannot be read). */
static char *ptx_of(const ht_daemon *d, const cJSON *set)
{
    char path[160];
    snprintf(path, sizeof(path), "/v1/kernels/%s/ptx", str(set, "key"));
    ht_resp r = ht_get(d, path);
    char *out = r.status == 200 ? strndup(r.body, r.len) : NULL;
    ht_resp_free(&r);
    return out;
}

/* The entries tile 1..64 in order; returns how many are merged (-1 when they do not tile). */
static int check_tiling(const cJSON *entries)
{
    int next = 1, merged = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, entries) {
        CHECK(lo_of(e) == next, "an entry starts at %d, want %d", lo_of(e), next);
        if (lo_of(e) != next)
            return -1;
        next = hi_of(e) + 1;
        const cJSON *m = get(e, "merged");
        if (!m)
            continue;
        merged++;
        /* its fine ranges tile it */
        int at = lo_of(e);
        const cJSON *f;
        CHECK(cJSON_GetArraySize(m) >= 2, "a merged entry of %d fine ranges", cJSON_GetArraySize(m));
        cJSON_ArrayForEach(f, m) {
            const cJSON *rg = get(f, "n");
            CHECK(cJSON_GetArrayItem(rg, 0)->valueint == at, "a fine range starts at %d, want %d",
                  cJSON_GetArrayItem(rg, 0)->valueint, at);
            at = cJSON_GetArrayItem(rg, 1)->valueint + 1;
        }
        CHECK(at == hi_of(e) + 1, "the fine ranges end at %d, the entry at %d", at - 1, hi_of(e));
    }
    CHECK(next == 65, "the entries end at %d", next - 1);
    return next == 65 ? merged : -1;
}

int main(void)
{
    ht_daemon d;
    ht_init(&d);
    ht_use_standin(&d);
    if (ht_start(&d) != 0)
        return 1;

    /* The first request starts a job for every range (each is hinted). */
    ht_resp r = ht_post(&d, "/v1/kernels", SOFTMAX("measure"));
    CHECK(r.status == 200, "status %ld %.500s", r.status, r.body);
    CHECK(cJSON_GetArraySize(get(get(r.json, "dispatch"), "entries")) == 9, "9 fine entries at first, got %d",
          cJSON_GetArraySize(get(get(r.json, "dispatch"), "entries")));
    ht_resp_free(&r);

    /* Until no entry is tuning. */
    bool done = false;
    for (int i = 0; i < 1200 && !done; i++) {
        r = ht_post(&d, "/v1/kernels", SOFTMAX("measure"));
        done = r.status == 200;
        const cJSON *e;
        cJSON_ArrayForEach(e, get(get(r.json, "dispatch"), "entries"))
            done = done && !strcmp(str(e, "state"), "ready");
        if (!done) {
            ht_resp_free(&r);
            usleep(100 * 1000);
        }
    }
    CHECK(done, "the ranges were never all tuned");
    if (!done)
        return ht_finish("it_dynamic_merge");
    const cJSON *entries = get(get(r.json, "dispatch"), "entries");
    const int merged = check_tiling(entries);
    CHECK(merged >= 1, "no entry merged: %.2000s", r.body);
    const cJSON *prev = NULL, *e;
    cJSON_ArrayForEach(e, entries) {
        const cJSON *set = get(e, "kernel_set");
        CHECK(cJSON_IsTrue(get(set, "measured")), "[%d,%d] is not measured", lo_of(e), hi_of(e));
        /* Its job's fit to its range, stored with it: one candidate is the best at every size (1),
         * so nothing is cut. */
        CHECK(cJSON_IsNumber(get(set, "range_worst")) && get(set, "range_worst")->valuedouble == 1.0 &&
                  !get(e, "coarse"),
              "[%d,%d]: range_worst %g%s", lo_of(e), hi_of(e),
              get(set, "range_worst") ? get(set, "range_worst")->valuedouble : -1.0, get(e, "coarse") ? ", coarse" : "");
        const cJSON *dn = get(get(set, "dims"), "n");
        CHECK(get(dn, "min") && get(dn, "min")->valueint == lo_of(e) && get(dn, "max")->valueint == hi_of(e),
              "[%d,%d]'s set has dims %d..%d", lo_of(e), hi_of(e), get(dn, "min") ? get(dn, "min")->valueint : -1,
              get(dn, "max") ? get(dn, "max")->valueint : -1);
        if (prev) {
            /* left apart: other code */
            char *a = cJSON_PrintUnformatted(get(get(prev, "kernel_set"), "schedule"));
            char *b = cJSON_PrintUnformatted(get(set, "schedule"));
            char *pa = ptx_of(&d, get(prev, "kernel_set")), *pb = ptx_of(&d, set);
            CHECK(pa && pb, "the PTX of [%d,%d] and [%d,%d]", lo_of(prev), hi_of(prev), lo_of(e), hi_of(e));
            CHECK(!a || !b || strcmp(a, b) || !pa || !pb || strcmp(pa, pb),
                  "[%d,%d] and [%d,%d] run the same code (%s) but were not merged", lo_of(prev), hi_of(prev),
                  lo_of(e), hi_of(e), a ? a : "?");
            free(a);
            free(b);
            free(pa);
            free(pb);
        }
        prev = e;
    }
    printf("it_dynamic_merge: %d entries, %d merged:", cJSON_GetArraySize(entries), merged);
    cJSON_ArrayForEach(e, entries)
        printf(" [%d,%d]%s", lo_of(e), hi_of(e), get(e, "merged") ? "*" : "");
    printf("\n");
    ht_resp_free(&r);
    CHECK(ht_stop(&d, SIGTERM) == 0, "SIGTERM exit status");

    /* Ranked by the model only (a daemon without workers, its own cache): nothing merges. */
    ht_daemon m;
    ht_init(&m);
    ht_arg(&m, "--workers");
    ht_arg(&m, "none");
    if (ht_start(&m) != 0)
        return 1;
    done = false;
    for (int i = 0; i < 1200 && !done; i++) {
        r = ht_post(&m, "/v1/kernels", SOFTMAX("model"));
        done = r.status == 200;
        const cJSON *x;
        cJSON_ArrayForEach(x, get(get(r.json, "dispatch"), "entries"))
            done = done && !strcmp(str(x, "state"), "ready");
        if (!done) {
            ht_resp_free(&r);
            usleep(100 * 1000);
        }
    }
    CHECK(done, "the model's ranges were never all ready");
    if (done) {
        CHECK(check_tiling(get(get(r.json, "dispatch"), "entries")) == 0 &&
                  cJSON_GetArraySize(get(get(r.json, "dispatch"), "entries")) == 9,
              "model-ranked entries merged: %.1000s", r.body);
        const cJSON *x;
        cJSON_ArrayForEach(x, get(get(r.json, "dispatch"), "entries"))
            CHECK(!get(get(x, "kernel_set"), "range_worst"), "a model-ranked set with a range_worst");
        ht_resp_free(&r);
    }
    CHECK(ht_stop(&m, SIGTERM) == 0, "SIGTERM exit status");
    ht_cleanup(&m);
    ht_cleanup(&d);
    return ht_finish("it_dynamic_merge");
}
