/* tests/integration/it_dynamic.c - named dimensions through the real daemon (docs/api.md,
 * "Named dimensions"): a matmul over n in 1..8192 and a layernorm over b*s answer dispatch
 * tables whose generic set and entries pass ptxas, whose kernels take the sizes as int
 * parameters and size their grids by rules; the entry holding the request's "sizes" (and a
 * hint's) is tuned as a job and listed ready on a later request, while the others stay untuned;
 * names on inner axes (layernorm [b, s, 768], causal attention [b, s, 8, 64]) answer tables too;
 * sizes out of range, -1 and names where an op takes none are refused with their fields; the
 * daemon keeps serving static requests throughout. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define MATMUL_DYN(extra)                                                                                \
    "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[\"n\",4096],\"dtype\":\"f16\"},"                       \
    "{\"shape\":[4096,1024],\"dtype\":\"f16\"},{\"shape\":[1024],\"dtype\":\"f16\"}],"                  \
    "\"epilogue\":[{\"op\":\"bias\",\"input\":2},{\"op\":\"gelu\",\"approximate\":\"tanh\"}],"           \
    "\"dims\":{\"n\":{\"min\":1,\"max\":8192,\"hints\":[8]}},\"arch\":\"sm_80\",\"tune\":\"model\"" extra "}"

static const char *json_str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static const cJSON *get(const cJSON *o, const char *k)
{
    return o ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}

/* A kernel set of a dynamic op: every kernel takes the size of each name as an int parameter,
 * some grid dimension is a rule over the names, and the code passes ptxas. */
static void check_dynamic_set(const ht_daemon *d, const cJSON *set, const char *arch, const char *names)
{
    CHECK(cJSON_IsObject(set), "no kernel set");
    if (!cJSON_IsObject(set))
        return;
    const char *key = json_str(set, "key");
    CHECK(strlen(key) == 64, "key '%s'", key);
    const cJSON *k;
    int rules = 0;
    cJSON_ArrayForEach(k, get(set, "kernels")) {
        int ints = 0;
        const cJSON *p;
        cJSON_ArrayForEach(p, get(k, "params")) {
            if (!strcmp(json_str(p, "type"), "int")) {
                ints++;
                CHECK(strstr(names, json_str(p, "dim")) != NULL, "int param of dim '%s'", json_str(p, "dim"));
            }
        }
        CHECK(ints >= 1, "a kernel of a dynamic set takes no size: %.300s", cJSON_PrintUnformatted(k));
        const cJSON *g;
        cJSON_ArrayForEach(g, get(k, "grid")) {
            if (cJSON_IsObject(g)) {
                rules++;
                CHECK(cJSON_IsArray(get(g, "dims")) && cJSON_IsNumber(get(g, "div")) && cJSON_IsNumber(get(g, "mul")),
                      "grid rule %.200s", cJSON_PrintUnformatted(g));
            }
        }
    }
    CHECK(rules >= 1, "no grid rule in a dynamic set");
    char path[160];
    snprintf(path, sizeof(path), "/v1/kernels/%s/ptx", key);
    ht_resp ptx = ht_get(d, path);
    CHECK(ptx.status == 200 && ht_ptxas(ptx.body, ptx.len, arch) == 0, "ptxas -arch=%s rejects the PTX (%ld)", arch,
          ptx.status);
    ht_resp_free(&ptx);
}

/* The entry whose range holds v (one name). */
static const cJSON *entry_at(const cJSON *table, const char *name, long long v)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, get(get(table, "dispatch"), "entries")) {
        const cJSON *r = get(get(e, "ranges"), name);
        if (cJSON_GetArraySize(r) == 2 && v >= cJSON_GetArrayItem(r, 0)->valuedouble &&
            v <= cJSON_GetArrayItem(r, 1)->valuedouble)
            return e;
    }
    return NULL;
}

static void check_refused(const ht_daemon *d, const char *body, const char *code, const char *field)
{
    ht_resp bad = ht_post(d, "/v1/kernels", body);
    const cJSON *err = get(bad.json, "error");
    CHECK(bad.status == 422 && err && !strcmp(json_str(err, "code"), code) && !strcmp(json_str(err, "field"), field),
          "want 422 %s at %s, got %ld %.300s", code, field, bad.status, bad.body);
    ht_resp_free(&bad);
}

int main(void)
{
    ht_daemon d;
    ht_init(&d);
    ht_arg(&d, "--workers");
    ht_arg(&d, "none");
    if (ht_start(&d) != 0)
        return 1;

    /* The first request: the generic set is compiled (the one thing waited for), the entry that
     * holds n = 300 and the hint's (n = 8) get jobs, the others none. */
    ht_resp r = ht_post(&d, "/v1/kernels", MATMUL_DYN(",\"sizes\":{\"n\":300}"));
    CHECK(r.status == 200, "status %ld %.500s", r.status, r.body);
    const cJSON *dims = get(get(r.json, "dims"), "n");
    CHECK(dims && get(dims, "min")->valueint == 1 && get(dims, "max")->valueint == 8192, "dims %.300s", r.body);
    char *shape = cJSON_PrintUnformatted(get(get(r.json, "output"), "shape"));
    CHECK(shape && !strcmp(shape, "[\"n\",1024]"), "output shape %s", shape ? shape : "?");
    free(shape);
    check_dynamic_set(&d, get(get(r.json, "dispatch"), "generic"), "sm_80", "n");
    const cJSON *entries = get(get(r.json, "dispatch"), "entries");
    /* one name: [1,16], then four ranges per power of two to 128, eight to 2048, sixteen from
     * there */
    CHECK(cJSON_GetArraySize(entries) == 77,
          "%d entries; want [1,16], [17,20], [21,24] ... [113,128], [129,144] ... [1921,2048], [2049,2176] ... "
          "[7937,8192]",
          cJSON_GetArraySize(entries));
    const cJSON *e300 = entry_at(r.json, "n", 300), *e8 = entry_at(r.json, "n", 8), *e5000 = entry_at(r.json, "n", 5000);
    CHECK(e300 && e8 && e5000, "entries for 300, 8 and 5000");
    if (e300 && e8 && e5000) {
        CHECK(cJSON_GetArrayItem(get(get(e300, "ranges"), "n"), 0)->valueint == 289, "300's range starts at 289");
        CHECK(cJSON_GetArrayItem(get(get(e5000, "ranges"), "n"), 0)->valueint == 4865 &&
                  cJSON_GetArrayItem(get(get(e5000, "ranges"), "n"), 1)->valueint == 5120,
              "5000's range is 4865..5120");
        CHECK(strcmp(json_str(e300, "state"), "untuned") && strcmp(json_str(e8, "state"), "untuned"),
              "the sizes' and the hint's entries were not tuned: %s, %s", json_str(e300, "state"), json_str(e8, "state"));
        CHECK(!strcmp(json_str(e5000, "state"), "untuned"), "an entry nobody asked for is %s", json_str(e5000, "state"));
    }
    ht_resp_free(&r);

    /* Later requests (without sizes) list the tuned entry ready, with a kernel set of its own. */
    bool ready = false;
    for (int i = 0; i < 600 && !ready; i++) {
        r = ht_post(&d, "/v1/kernels", MATMUL_DYN(""));
        CHECK(r.status == 200, "status %ld", r.status);
        const cJSON *e = entry_at(r.json, "n", 300);
        if (e && !strcmp(json_str(e, "state"), "ready")) {
            ready = true;
            const cJSON *set = get(e, "kernel_set");
            check_dynamic_set(&d, set, "sm_80", "n");
            CHECK(strcmp(json_str(set, "op_key"), json_str(r.json, "op_key")), "the entry has the generic op key");
        }
        ht_resp_free(&r);
        if (!ready)
            usleep(100 * 1000);
    }
    CHECK(ready, "the entry of n = 300 never became ready");

    /* A product of names on axis 0: layernorm over [b*s, 768]. */
    r = ht_post(&d, "/v1/kernels",
                "{\"op\":\"layernorm\",\"inputs\":[{\"shape\":[\"b*s\",768],\"dtype\":\"bf16\"},"
                "{\"shape\":[768],\"dtype\":\"bf16\"},{\"shape\":[768],\"dtype\":\"bf16\"}],"
                "\"dims\":{\"b\":{\"min\":1,\"max\":32},\"s\":{\"min\":16,\"max\":512,\"multiple_of\":16}},"
                "\"arch\":\"sm_90a\",\"tune\":\"none\"}");
    CHECK(r.status == 200, "layernorm status %ld %.500s", r.status, r.body);
    check_dynamic_set(&d, get(get(r.json, "dispatch"), "generic"), "sm_90a", "b s");
    /* b, a name of a product: 1, 2, ..., 8, [9,10] ... [15,16], [17,20] ... [29,32]; s (multiples
     * of 16), eighths from 128 (the table holds them): [16,16] [32,32] ... [128,128] [144,144]
     * ... [256,256] [272,288] ... [496,512] */
    CHECK(cJSON_GetArraySize(get(get(r.json, "dispatch"), "entries")) == 16 * 24, "%d entries",
          cJSON_GetArraySize(get(get(r.json, "dispatch"), "entries")));
    ht_resp_free(&r);

    /* Names on inner axes: layernorm over [b, s, 768] with a position term [s, 768], and causal
     * self-attention [b, s, 8, 64] (layout bshd, S and Skv both s: on sm_90a attention_wgmma's,
     * its tensor maps' named dimensions written with the names). */
    r = ht_post(&d, "/v1/kernels",
                "{\"op\":\"layernorm\",\"inputs\":[{\"shape\":[\"b\",\"s\",768],\"dtype\":\"f16\"},"
                "{\"shape\":[768],\"dtype\":\"f16\"},{\"shape\":[768],\"dtype\":\"f16\"},"
                "{\"shape\":[\"s\",768],\"dtype\":\"f16\"}],\"epilogue\":[{\"op\":\"add\",\"input\":3}],"
                "\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":1,\"max\":512}},"
                "\"arch\":\"sm_80\",\"tune\":\"none\"}");
    CHECK(r.status == 200, "layernorm [b,s,768] status %ld %.500s", r.status, r.body);
    shape = cJSON_PrintUnformatted(get(get(r.json, "output"), "shape"));
    CHECK(shape && !strcmp(shape, "[\"b\",\"s\",768]"), "output shape %s", shape ? shape : "?");
    free(shape);
    check_dynamic_set(&d, get(get(r.json, "dispatch"), "generic"), "sm_80", "b s");
    ht_resp_free(&r);
    r = ht_post(&d, "/v1/kernels",
                "{\"op\":\"attention\",\"inputs\":[{\"shape\":[\"b\",\"s\",8,64],\"dtype\":\"f16\"},"
                "{\"shape\":[\"b\",\"s\",8,64],\"dtype\":\"f16\"},{\"shape\":[\"b\",\"s\",8,64],\"dtype\":\"f16\"}],"
                "\"attrs\":{\"layout\":\"bshd\",\"causal\":true},"
                "\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":1,\"max\":2048}},"
                "\"arch\":\"sm_90a\",\"tune\":\"none\"}");
    CHECK(r.status == 200, "attention [b,s,8,64] status %ld %.500s", r.status, r.body);
    shape = cJSON_PrintUnformatted(get(get(r.json, "output"), "shape"));
    CHECK(shape && !strcmp(shape, "[\"b\",\"s\",8,64]"), "output shape %s", shape ? shape : "?");
    free(shape);
    check_dynamic_set(&d, get(get(r.json, "dispatch"), "generic"), "sm_90a", "b s");
    {
        const cJSON *k0 = cJSON_GetArrayItem(get(get(get(r.json, "dispatch"), "generic"), "kernels"), 0);
        char *maps = cJSON_PrintUnformatted(get(k0, "params")); /* the tensor_map params among them */
        CHECK(!strncmp(json_str(k0, "name"), "hd_attention_wgmma_", 19), "attention [b,s,8,64] on sm_90a runs %s",
              json_str(k0, "name"));
        CHECK(maps && strstr(maps, "{\"dims\":[\"b\",\"s\"],\"coef\":1}"), "attention's maps over b * s rows: %s",
              maps ? maps : "none");
        free(maps);
    }
    ht_resp_free(&r);

    /* Three names of a product, 36 ranges each (12 up to 16), would be 46656 entries: the widest
     * name's neighbouring ranges merge until the table holds at most 512 (5 x 9 x 9 = 405), and
     * the entries still cover every size exactly once. */
    r = ht_post(&d, "/v1/kernels",
                "{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[\"a*b*c\"],\"dtype\":\"f32\"}],"
                "\"attrs\":{\"fn\":\"relu\"},\"dims\":{\"a\":{\"min\":1,\"max\":1024},"
                "\"b\":{\"min\":1,\"max\":1024},\"c\":{\"min\":1,\"max\":1024}},\"arch\":\"sm_80\",\"tune\":\"none\"}");
    CHECK(r.status == 200, "elementwise status %ld %.300s", r.status, r.body);
    const cJSON *all = get(get(r.json, "dispatch"), "entries");
    CHECK(cJSON_GetArraySize(all) == 405, "%d entries for three names", cJSON_GetArraySize(all));
    static const char *const abc[] = {"a", "b", "c"};
    for (int k = 0; k < 3; k++) {
        /* every size of the name in exactly 405 / (its ranges) entries: count the entries holding 1, 17, 700, 1024 */
        static const long long probe[] = {1, 17, 700, 1024};
        for (int p = 0; p < 4; p++) {
            int holding = 0;
            const cJSON *e;
            cJSON_ArrayForEach(e, all) {
                const cJSON *rg = get(get(e, "ranges"), abc[k]);
                holding += probe[p] >= cJSON_GetArrayItem(rg, 0)->valuedouble && probe[p] <= cJSON_GetArrayItem(rg, 1)->valuedouble;
            }
            CHECK(holding == (k == 0 ? 81 : 45), "%s = %lld is held by %d entries", abc[k], probe[p], holding);
        }
    }
    ht_resp_free(&r);

    /* Refusals with their fields, through the daemon. */
    check_refused(&d, MATMUL_DYN(",\"sizes\":{\"n\":9000}"), "out_of_range", "sizes.n");
    check_refused(&d,
                  "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[-1,64],\"dtype\":\"f16\"}]}", "invalid_field",
                  "inputs[0].shape[0]");
    check_refused(&d,
                  "{\"op\":\"pool2d\",\"inputs\":[{\"shape\":[\"n\",8,8,4],\"dtype\":\"f16\"}],"
                  "\"attrs\":{\"kind\":\"max\",\"kernel_size\":2},\"dims\":{\"n\":{\"min\":1,\"max\":64}}}",
                  "invalid_field", "inputs[0].shape[0]");
    check_refused(&d,
                  "{\"op\":\"attention\",\"inputs\":[{\"shape\":[2,\"s\",\"h\",64],\"dtype\":\"f16\"},"
                  "{\"shape\":[2,\"s\",\"h\",64],\"dtype\":\"f16\"},{\"shape\":[2,\"s\",\"h\",64],\"dtype\":\"f16\"}],"
                  "\"attrs\":{\"layout\":\"bshd\"},\"dims\":{\"s\":{\"min\":1,\"max\":64},\"h\":{\"min\":1,\"max\":8}}}",
                  "invalid_field", "inputs[0].shape[2]");
    check_refused(&d,
                  "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[64,\"k\"],\"dtype\":\"f16\"},"
                  "{\"shape\":[64,64],\"dtype\":\"f16\"}],\"dims\":{\"k\":{\"min\":1,\"max\":64}}}",
                  "shape_mismatch", "inputs[1].shape[0]");
    /* (K named on a and b alike is taken, and N: issue 39; a batched b's N is not) */
    check_refused(&d,
                  "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[4,8,64],\"dtype\":\"f16\"},"
                  "{\"shape\":[4,64,\"n\"],\"dtype\":\"f16\"}],\"dims\":{\"n\":{\"min\":1,\"max\":64}}}",
                  "invalid_field", "inputs[1].shape[2]");

    r = ht_post(&d, "/v1/kernels",
                "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[96,\"k\"],\"dtype\":\"f16\"},"
                "{\"shape\":[\"k\",\"n\"],\"dtype\":\"f16\"}],\"dims\":{\"k\":{\"min\":1,\"max\":256},"
                "\"n\":{\"min\":1,\"max\":200}},\"arch\":\"sm_80\",\"tune\":\"none\"}");
    CHECK(r.status == 200, "named N and K: %ld", r.status);
    ht_resp_free(&r);

    /* ... and static requests are served as before. */
    r = ht_post(&d, "/v1/kernels",
                "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,64],\"dtype\":\"f16\"},"
                "{\"shape\":[64,256],\"dtype\":\"f16\"}],\"arch\":\"sm_80\",\"tune\":\"none\"}");
    CHECK(r.status == 200 && strlen(json_str(r.json, "key")) == 64, "static matmul %ld", r.status);
    ht_resp_free(&r);

    CHECK(ht_stop(&d, SIGTERM) == 0, "SIGTERM exit status");
    ht_cleanup(&d);
    return ht_finish("it_dynamic");
}
