/* tests/integration/it_graph_dims.c - named dimensions in graphs through the real daemon
 * (docs/graphs.md, "Named dimensions"; tune none, no workers, so only the generic sets compile):
 * an MLP + layernorm block over x ["b", "s", 768] is planned once for every size in range - the
 * plan names its dims and shapes, its arena is the static graph's at the names' max, and every
 * step's kernel set is a dispatch table whose generic set takes the sizes as int parameters and
 * passes ptxas; a second request is the same plan; a graph job (wait:false) with names ends and
 * its plan is then answered, and the same graph with "sizes" keeps its key and starts the job of
 * the table entry holding them (only that one); graphs the names cannot express are refused at
 * their fields; static graphs are served as before. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static const cJSON *get(const cJSON *o, const char *k)
{
    return o ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}

static const char *json_str(const cJSON *o, const char *k)
{
    const cJSON *v = get(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* The MLP block: %s the top-level extras (dims, sizes), %s x's shape. */
#define MLP \
    "{%s\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":%s,\"dtype\":\"f16\"}],"                                          \
    "\"weights\":[{\"name\":\"g\",\"shape\":[768],\"dtype\":\"f16\"},{\"name\":\"be\",\"shape\":[768],\"dtype\":\"f16\"}," \
    "{\"name\":\"w1\",\"shape\":[768,3072],\"dtype\":\"f16\"},{\"name\":\"b1\",\"shape\":[3072],\"dtype\":\"f16\"},"       \
    "{\"name\":\"w2\",\"shape\":[3072,768],\"dtype\":\"f16\"},{\"name\":\"b2\",\"shape\":[768],\"dtype\":\"f16\"}],"       \
    "\"nodes\":["                                                                                                          \
    "{\"name\":\"ln\",\"op\":\"layernorm\",\"inputs\":[\"x\",\"g\",\"be\"],\"outputs\":[\"h\"]},"                          \
    "{\"name\":\"fc1\",\"op\":\"matmul\",\"inputs\":[\"h\",\"w1\"],\"outputs\":[\"u\"]},"                                  \
    "{\"name\":\"bias1\",\"op\":\"add\",\"inputs\":[\"u\",\"b1\"],\"outputs\":[\"u1\"]},"                                  \
    "{\"name\":\"act\",\"op\":\"gelu\",\"inputs\":[\"u1\"],\"outputs\":[\"a\"],\"attrs\":{\"approximate\":\"tanh\"}},"     \
    "{\"name\":\"fc2\",\"op\":\"matmul\",\"inputs\":[\"a\",\"w2\"],\"outputs\":[\"v\"]},"                                  \
    "{\"name\":\"bias2\",\"op\":\"add\",\"inputs\":[\"v\",\"b2\"],\"outputs\":[\"v1\"]},"                                  \
    "{\"name\":\"res\",\"op\":\"add\",\"inputs\":[\"v1\",\"x\"],\"outputs\":[\"y\"]}],"                                    \
    "\"outputs\":[\"y\"]},\"arch\":\"sm_90\",\"tune\":\"none\"}"

#define DIMS "\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":1,\"max\":512}},"

static char *mlp(const char *extra, const char *xshape)
{
    static char buf[4096];
    snprintf(buf, sizeof(buf), MLP, extra, xshape);
    return buf;
}

/* A generic set of a kernel with names: its kernels take b and s as int parameters, and ptxas
 * accepts its PTX. */
static void check_generic(const ht_daemon *d, const cJSON *set)
{
    CHECK(cJSON_IsObject(set), "no generic set");
    if (!cJSON_IsObject(set))
        return;
    int ints = 0;
    const cJSON *k, *p;
    cJSON_ArrayForEach(k, get(set, "kernels")) {
        cJSON_ArrayForEach(p, get(k, "params")) {
            if (strcmp(json_str(p, "type"), "int") != 0)
                continue;
            ints++;
            CHECK(!strcmp(json_str(p, "dim"), "b") || !strcmp(json_str(p, "dim"), "s"), "int param of dim '%s'",
                  json_str(p, "dim"));
        }
    }
    CHECK(ints >= 1, "a generic set takes no size");
    char path[160];
    snprintf(path, sizeof(path), "/v1/kernels/%s/ptx", json_str(set, "key"));
    ht_resp ptx = ht_get(d, path);
    CHECK(ptx.status == 200 && ht_ptxas(ptx.body, ptx.len, "sm_90") == 0, "ptxas rejects %s (%ld)",
          json_str(set, "key"), ptx.status);
    ht_resp_free(&ptx);
}

static void named_mlp(const ht_daemon *d)
{
    ht_resp r = ht_post(d, "/v1/graphs", mlp(DIMS, "[\"b\",\"s\",768]"));
    CHECK(r.status == 200, "%ld %.400s", r.status, r.body);
    if (r.status != 200) {
        ht_resp_free(&r);
        return;
    }
    const cJSON *dims = get(r.json, "dims");
    CHECK(get(get(dims, "b"), "max") && get(get(dims, "s"), "max")->valueint == 512, "plan dims %.300s", r.body);
    const cJSON *in = cJSON_GetArrayItem(get(cJSON_GetArrayItem(get(r.json, "inputs"), 0), "shape"), 1);
    CHECK(cJSON_IsString(in) && !strcmp(in->valuestring, "s"), "x's shape is not named in the plan");
    const cJSON *out = get(cJSON_GetArrayItem(get(r.json, "outputs"), 0), "shape");
    CHECK(cJSON_IsString(cJSON_GetArrayItem(out, 0)) && !strcmp(cJSON_GetArrayItem(out, 0)->valuestring, "b"),
          "y's shape is not named");
    /* The arena at the names' max: [8, 512, 3072] f16 of the MLP's hidden layer fits. */
    CHECK(get(r.json, "arena_bytes")->valuedouble >= 8.0 * 512 * 3072 * 2, "arena %.0f",
          get(r.json, "arena_bytes")->valuedouble);
    const cJSON *steps = get(r.json, "steps"), *s;
    CHECK(cJSON_GetArraySize(steps) == 3, "%d steps (ln; fc1+bias+gelu; fc2+bias+residual)", cJSON_GetArraySize(steps));
    cJSON_ArrayForEach(s, steps) {
        const cJSON *rq = get(s, "request"), *ks = get(s, "kernel_set");
        const cJSON *a0 = cJSON_GetArrayItem(get(cJSON_GetArrayItem(get(rq, "inputs"), 0), "shape"), 0);
        CHECK(cJSON_IsString(a0) && !strcmp(a0->valuestring, "b*s") && get(get(rq, "dims"), "s"),
              "a step's request is not over b*s: %.300s", cJSON_PrintUnformatted(rq));
        CHECK(cJSON_IsObject(get(ks, "dispatch")) && cJSON_IsArray(get(get(ks, "dispatch"), "entries")),
              "a step's kernel set is no dispatch table");
        check_generic(d, get(get(ks, "dispatch"), "generic"));
    }
    ht_resp r2 = ht_post(d, "/v1/graphs", mlp(DIMS, "[\"b\",\"s\",768]"));
    CHECK(r2.status == 200 && !strcmp(json_str(r2.json, "graph_key"), json_str(r.json, "graph_key")),
          "the second request is another plan");
    ht_resp_free(&r2);
    /* hidetctl graph shows the names' ranges and, for each step, its table's generic set. */
    const char *ctl = getenv("HIDETCTL_BIN");
    CHECK(ctl != NULL, "HIDETCTL_BIN");
    if (ctl) {
        char *txt = NULL;
        int st = ht_sh(&txt, "echo '%s' | '%s' --socket '%s' graph - 2>&1", mlp(DIMS, "[\"b\",\"s\",768]"), ctl,
                       d->socket);
        CHECK(st == 0 && txt && strstr(txt, "dims: b 1..8, s 1..512") && strstr(txt, "table: generic ") &&
                  strstr(txt, "ranges ready") && !strstr(txt, " ? "),
              "status %d:\n%s", st, txt ? txt : "");
        free(txt);
    }
    ht_resp_free(&r);
}

static void refused(const ht_daemon *d, const char *body, const char *field, const char *part)
{
    ht_resp r = ht_post(d, "/v1/graphs", body);
    const cJSON *err = get(r.json, "error");
    CHECK(r.status == 422 && !strcmp(json_str(err, "field"), field) && strstr(json_str(err, "message"), part),
          "want 422 at %s (%s), got %ld %.300s", field, part, r.status, r.body);
    ht_resp_free(&r);
}

static void bad_graphs(const ht_daemon *d)
{
    refused(d, mlp("", "[\"b\",\"s\",768]"), "graph.inputs[0].shape[0]", "no \"dims\"");
    refused(d, mlp(DIMS "\"sizes\":{\"b\":2,\"s\":9000},", "[\"b\",\"s\",768]"), "sizes.s",
            "s is 9000; its range is 1..512");
    refused(d, mlp("\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":1,\"max\":512},\"t\":{\"min\":1,\"max\":4}},",
                   "[\"b\",\"s\",768]"),
            "dims.t", "no graph input");
    /* A slice of a named axis past the name's smallest size. */
    refused(d,
            "{\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":1,\"max\":64}},\"graph\":{\"inputs\":["
            "{\"name\":\"x\",\"shape\":[\"b\",\"s\",64],\"dtype\":\"f16\"}],\"nodes\":["
            "{\"op\":\"slice\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"starts\":[0],\"ends\":[2],"
            "\"axes\":[1]}}],\"outputs\":[\"y\"]},\"arch\":\"sm_90\",\"tune\":\"none\"}",
            "nodes[0].attrs.ends", "smallest size");
}

/* Copies with names: a transpose moving a named axis and BERT's pooler [b, s, 64][:, 0] (then
 * tanh), each one copy kernel whose strides scale with s at launch; their generic sets pass
 * ptxas. */
static void named_copies(const ht_daemon *d)
{
    ht_resp r = ht_post(d, "/v1/graphs",
                        "{\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":1,\"max\":64}},\"graph\":{\"inputs\":["
                        "{\"name\":\"x\",\"shape\":[\"b\",\"s\",64],\"dtype\":\"f16\"}],\"nodes\":["
                        "{\"name\":\"t\",\"op\":\"transpose\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
                        "\"attrs\":{\"perm\":[1,0,2]}},"
                        "{\"name\":\"sel\",\"op\":\"slice\",\"inputs\":[\"x\"],\"outputs\":[\"x0\"],"
                        "\"attrs\":{\"starts\":[0],\"ends\":[1],\"axes\":[1]}},"
                        "{\"name\":\"sq\",\"op\":\"reshape\",\"inputs\":[\"x0\"],\"outputs\":[\"x1\"],"
                        "\"attrs\":{\"shape\":[\"b\",64]}},"
                        "{\"name\":\"act\",\"op\":\"tanh\",\"inputs\":[\"x1\"],\"outputs\":[\"p\"]}],"
                        "\"outputs\":[\"y\",\"p\"]},\"arch\":\"sm_90\",\"tune\":\"none\"}");
    CHECK(r.status == 200, "%ld %.400s", r.status, r.body);
    if (r.status != 200) {
        ht_resp_free(&r);
        return;
    }
    const cJSON *steps = get(r.json, "steps"), *st;
    int copies = 0;
    cJSON_ArrayForEach(st, steps) {
        const cJSON *rq = get(st, "request");
        CHECK(!strcmp(json_str(rq, "op"), "copy"), "a step is a %s", json_str(rq, "op"));
        const cJSON *s0 = cJSON_GetArrayItem(get(get(rq, "attrs"), "strides"), 0),
                    *s1 = cJSON_GetArrayItem(get(get(rq, "attrs"), "strides"), 1);
        CHECK((cJSON_IsString(s0) && !strcmp(s0->valuestring, "64*s")) ||
                  (cJSON_IsString(s1) && !strcmp(s1->valuestring, "64*s")),
              "no stride scales with s: %.300s", cJSON_PrintUnformatted(rq));
        check_generic(d, get(get(get(st, "kernel_set"), "dispatch"), "generic"));
        copies++;
    }
    CHECK(copies == 2, "%d copy steps", copies);
    ht_resp_free(&r);
}

/* A position embedding [s, 64] added to [b, s, 64]: one elementwise kernel over both names (an
 * inner named axis, its broadcast offset read from the sizes), whose generic set passes ptxas. */
static void position_embedding(const ht_daemon *d)
{
    ht_resp r = ht_post(d, "/v1/graphs",
                        "{\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":1,\"max\":64}},\"graph\":{\"inputs\":["
                        "{\"name\":\"x\",\"shape\":[\"b\",\"s\",64],\"dtype\":\"f16\"},"
                        "{\"name\":\"pe\",\"shape\":[\"s\",64],\"dtype\":\"f16\"}],\"nodes\":["
                        "{\"name\":\"pos\",\"op\":\"add\",\"inputs\":[\"x\",\"pe\"],\"outputs\":[\"y\"]}],"
                        "\"outputs\":[\"y\"]},\"arch\":\"sm_90\",\"tune\":\"none\"}");
    CHECK(r.status == 200, "%ld %.300s", r.status, r.body);
    const cJSON *steps = get(r.json, "steps");
    CHECK(cJSON_GetArraySize(steps) == 1, "%d steps", cJSON_GetArraySize(steps));
    const cJSON *st = cJSON_GetArrayItem(steps, 0);
    const cJSON *dims = get(get(st, "request"), "dims");
    CHECK(get(dims, "b") && get(dims, "s"), "the add's request does not take both names");
    check_generic(d, get(get(get(st, "kernel_set"), "dispatch"), "generic"));
    ht_resp_free(&r);
}

/* BERT's attention with names: q/k/v [b, s, 2, 64] permuted to [b, 2, s, 64] around the attention
 * node and back: one attention kernel in the bshd layout over b and s (the permutes folded, no
 * copy), its generic set passing ptxas; position ids [1, 64] sliced to [1, s] are a view of the
 * weight, and their gather is made of all 64 ids in the prepare phase and viewed (no copy kernel,
 * the only prepared step, a static request). */
static void named_attention(const ht_daemon *d)
{
#define PERM(T)                                                                                                   \
    "{\"name\":\"perm_" T "\",\"op\":\"transpose\",\"inputs\":[\"" T "\"],\"outputs\":[\"" T "2\"],"                \
    "\"attrs\":{\"perm\":[0,2,1,3]}},"
    ht_resp r = ht_post(
        d, "/v1/graphs",
        "{\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":1,\"max\":64}},\"graph\":{\"inputs\":["
        "{\"name\":\"q\",\"shape\":[\"b\",\"s\",2,64],\"dtype\":\"f16\"},{\"name\":\"k\",\"shape\":[\"b\",\"s\",2,64],"
        "\"dtype\":\"f16\"},{\"name\":\"v\",\"shape\":[\"b\",\"s\",2,64],\"dtype\":\"f16\"}],\"weights\":["
        "{\"name\":\"pos\",\"shape\":[1,64],\"dtype\":\"i64\"},{\"name\":\"table\",\"shape\":[64,128],\"dtype\":\"f16\"}],"
        "\"nodes\":[" PERM("q") PERM("k") PERM("v")
        "{\"name\":\"att\",\"op\":\"attention\",\"inputs\":[\"q2\",\"k2\",\"v2\"],\"outputs\":[\"o\"]},"
        "{\"name\":\"back\",\"op\":\"transpose\",\"inputs\":[\"o\"],\"outputs\":[\"o1\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
        "{\"name\":\"flat\",\"op\":\"reshape\",\"inputs\":[\"o1\"],\"outputs\":[\"o2\"],\"attrs\":{\"shape\":[\"b\",\"s\",128]}},"
        "{\"name\":\"ids\",\"op\":\"slice\",\"inputs\":[\"pos\"],\"outputs\":[\"ids\"],\"attrs\":{\"starts\":[0],"
        "\"ends\":[\"s\"],\"axes\":[1]}},"
        "{\"name\":\"emb\",\"op\":\"embedding\",\"inputs\":[\"table\",\"ids\"],\"outputs\":[\"pe\"]},"
        "{\"name\":\"add\",\"op\":\"add\",\"inputs\":[\"o2\",\"pe\"],\"outputs\":[\"y\"]}],"
        "\"outputs\":[\"y\"]},\"arch\":\"sm_90\",\"tune\":\"none\"}");
#undef PERM
    CHECK(r.status == 200, "%ld %.400s", r.status, r.body);
    if (r.status != 200) {
        ht_resp_free(&r);
        return;
    }
    const cJSON *steps = get(r.json, "steps"), *st;
    const cJSON *prep = get(r.json, "prepare");
    const cJSON *pg = get(cJSON_GetArrayItem(prep, 0), "request");
    CHECK(cJSON_GetArraySize(prep) == 1 && pg && !strcmp(json_str(pg, "op"), "gather") && !get(pg, "dims") &&
              cJSON_GetArrayItem(get(cJSON_GetArrayItem(get(pg, "inputs"), 1), "shape"), 1) &&
              cJSON_GetArrayItem(get(cJSON_GetArrayItem(get(pg, "inputs"), 1), "shape"), 1)->valueint == 64,
          "the prepare phase is not the gather of all 64 position ids");
    int att = 0, copies = 0;
    cJSON_ArrayForEach(st, steps) {
        const cJSON *rq = get(st, "request");
        const char *op = json_str(rq, "op");
        copies += strcmp(op, "copy") == 0;
        if (strcmp(op, "attention") != 0)
            continue;
        att++;
        const cJSON *q = get(cJSON_GetArrayItem(get(rq, "inputs"), 0), "shape");
        CHECK(!strcmp(json_str(get(rq, "attrs"), "layout"), "bshd") && cJSON_IsString(cJSON_GetArrayItem(q, 0)) &&
                  !strcmp(cJSON_GetArrayItem(q, 1)->valuestring ? cJSON_GetArrayItem(q, 1)->valuestring : "", "s"),
              "attention's request: %.300s", cJSON_PrintUnformatted(rq));
        check_generic(d, get(get(get(st, "kernel_set"), "dispatch"), "generic"));
    }
    CHECK(att == 1 && copies == 0, "%d attention kernels, %d copies in %d steps", att, copies,
          cJSON_GetArraySize(steps));
    ht_resp_free(&r);
}

/* A graph job with names: 202, the job ends, the plan is answered with its table. */
static void named_job(const ht_daemon *d)
{
    const char *g = "{\"dims\":{\"n\":{\"min\":1,\"max\":4096}},\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":"
                    "[\"n\",96],\"dtype\":\"f32\"}],\"nodes\":[{\"op\":\"softmax\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}],"
                    "\"outputs\":[\"y\"]},\"arch\":\"sm_90\",\"tune\":\"none\",\"wait\":false}";
    ht_resp r = ht_post(d, "/v1/graphs", g);
    CHECK(r.status == 202 || r.status == 200, "%ld %.300s", r.status, r.body);
    if (r.status == 202) {
        char path[96];
        snprintf(path, sizeof(path), "/v1/graphs/jobs/%s", json_str(get(r.json, "job"), "id"));
        bool done = false;
        for (int i = 0; i < 600 && !done; i++) {
            ht_resp j = ht_get(d, path);
            const char *st = json_str(get(j.json, "job"), "state");
            done = strcmp(st, "running") != 0;
            if (done)
                CHECK(!strcmp(st, "done"), "%.300s", j.body);
            ht_resp_free(&j);
            if (!done)
                usleep(100 * 1000);
        }
        CHECK(done, "the graph job did not end");
    }
    ht_resp_free(&r);
    r = ht_post(d, "/v1/graphs", g);
    const cJSON *ks = get(cJSON_GetArrayItem(get(r.json, "steps"), 0), "kernel_set");
    CHECK(r.status == 200 && cJSON_IsObject(get(get(ks, "dispatch"), "generic")), "%ld %.300s", r.status, r.body);
    const char *key = json_str(r.json, "graph_key");
    char first_key[65];
    snprintf(first_key, sizeof(first_key), "%s", key);
    ht_resp_free(&r);

    /* With "sizes" (the graph's key unchanged): the entry holding n = 300 gets its job, the one
     * holding 3000 stays untuned. */
    char body[1024];
    const char *at = strstr(g, "\"dims\"");
    snprintf(body, sizeof(body), "{\"sizes\":{\"n\":300},%s", at);
    char *w = strstr(body, ",\"wait\":false");
    if (w)
        memmove(w, w + strlen(",\"wait\":false"), strlen(w + strlen(",\"wait\":false")) + 1);
    r = ht_post(d, "/v1/graphs", body);
    CHECK(r.status == 200 && !strcmp(json_str(r.json, "graph_key"), first_key), "%ld %.300s", r.status, r.body);
    ks = get(cJSON_GetArrayItem(get(r.json, "steps"), 0), "kernel_set");
    const char *st300 = "", *st3000 = "";
    const cJSON *e;
    cJSON_ArrayForEach(e, get(get(ks, "dispatch"), "entries")) {
        const cJSON *rg = get(get(e, "ranges"), "n");
        const double lo = cJSON_GetArrayItem(rg, 0)->valuedouble, hi = cJSON_GetArrayItem(rg, 1)->valuedouble;
        if (lo <= 300 && 300 <= hi)
            st300 = json_str(e, "state");
        if (lo <= 3000 && 3000 <= hi)
            st3000 = json_str(e, "state");
    }
    CHECK((!strcmp(st300, "tuning") || !strcmp(st300, "ready")) && !strcmp(st3000, "untuned"),
          "entries for 300: '%s', 3000: '%s'", st300, st3000);
    ht_resp_free(&r);
}

/* A static graph beside them: a plan as before (no dims, a plain kernel set). */
static void static_graph(const ht_daemon *d)
{
    ht_resp r = ht_post(d, "/v1/graphs",
                        "{\"graph\":{\"inputs\":[{\"name\":\"x\",\"shape\":[64,96],\"dtype\":\"f32\"}],\"nodes\":["
                        "{\"op\":\"softmax\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]},"
                        "\"arch\":\"sm_90\",\"tune\":\"none\"}");
    const cJSON *ks = get(cJSON_GetArrayItem(get(r.json, "steps"), 0), "kernel_set");
    CHECK(r.status == 200 && !get(r.json, "dims") && cJSON_IsObject(ks) && !get(ks, "dispatch") &&
              strlen(json_str(ks, "key")) == 64,
          "%ld %.300s", r.status, r.body);
    ht_resp_free(&r);
}

int main(void)
{
    ht_daemon d;
    ht_init(&d);
    ht_arg(&d, "--workers");
    ht_arg(&d, "none");
    if (ht_start(&d) != 0) {
        fprintf(stderr, "hidetd did not start\n");
        return 1;
    }
    static_graph(&d);
    named_mlp(&d);
    bad_graphs(&d);
    position_embedding(&d);
    named_attention(&d);
    named_copies(&d);
    named_job(&d);
    static_graph(&d);
    CHECK(ht_stop(&d, SIGTERM) == 0, "clean exit");
    ht_cleanup(&d);
    return ht_finish("it_graph_dims");
}
