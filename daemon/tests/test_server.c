/* daemon/tests/test_server.c - the request handlers in-process, over socketpairs adopted by a
 * real proto server, against a real (temporary) kernel cache: routing answers (404, 405 with
 * Allow, 400 for a malformed key), the cache-hit path (database -> answer cache -> request memo,
 * the tune-strength rule, the no-GPU warning), kernels by key (PTX, cubin), invalidation when
 * another process changes the database, bearer-token auth for non-local TCP peers, /metrics and
 * /v1/status. No scheduler and no GPU: a miss answers 503 here, which the tests use. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <sodium.h>

#include "tests/check.h"
#include "daemon/daemon_int.h"
#include "proto/request.h"

typedef struct resp {
    int status;
    char head[4096];
    char *body;
    size_t len;
    cJSON *json;
} resp;

static void resp_free(resp *r)
{
    free(r->body);
    cJSON_Delete(r->json);
    memset(r, 0, sizeof(*r));
}

/* Sends one request on fd and runs the loop until its whole answer has arrived (30 s guard
 * against a hang; never a pass/fail criterion). */
static resp request(uv_loop_t *loop, int fd, const char *method, const char *path,
                    const char *body, const char *extra_header)
{
    resp r = { 0 };
    char head[1024];
    size_t blen = body ? strlen(body) : 0;
    int n = snprintf(head, sizeof(head), "%s %s HTTP/1.1\r\nHost: t\r\n%s%sContent-Length: %zu\r\n\r\n",
                     method, path, extra_header ? extra_header : "", extra_header ? "\r\n" : "", blen);
    if (write(fd, head, (size_t)n) != n || (blen && write(fd, body, blen) != (ssize_t)blen)) {
        r.status = -1;
        return r;
    }
    char buf[1 << 16];
    size_t got = 0;
    for (int spins = 0; spins < 3000; spins++) {
        uv_run(loop, UV_RUN_NOWAIT);
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, 10) > 0) {
            ssize_t k = read(fd, buf + got, sizeof(buf) - 1 - got);
            if (k <= 0)
                break;
            got += (size_t)k;
            buf[got] = '\0';
        }
        char *end = strstr(buf, "\r\n\r\n");
        if (!end || got == 0)
            continue;
        size_t hlen = (size_t)(end + 4 - buf);
        const char *cl = strcasestr(buf, "Content-Length:");
        size_t clen = cl ? strtoul(cl + 15, NULL, 10) : 0;
        if (got < hlen + clen)
            continue;
        r.status = atoi(buf + 9);
        snprintf(r.head, sizeof(r.head), "%.*s", (int)hlen, buf);
        r.body = malloc(clen + 1);
        memcpy(r.body, end + 4, clen);
        r.body[clen] = '\0';
        r.len = clen;
        if (strcasestr(r.head, "application/json"))
            r.json = cJSON_Parse(r.body);
        return r;
    }
    r.status = -1;
    return r;
}

static const char *code_of(const resp *r)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(r->json, "error");
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "code"));
}

static const char softmax_body[] =
    "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[8,1000],\"dtype\":\"f16\"}],\"arch\":\"sm_90\"}";

/* Stores an artifact for softmax_body as the scheduler would. Returns its key (static). */
static const char *store_artifact(kc_db *db, kc_choice choice)
{
    static char key[KC_KEY_LEN + 1];
    proto_kernel_request kr;
    proto_error err;
    CHECK(proto_kernel_request_parse(softmax_body, strlen(softmax_body), &kr, &err) == 0, "parse: %s",
          err.message);
    char *op_json = tuner_op_canonical_json(&kr.op);
    kc_artifact a;
    memset(&a, 0, sizeof(a));
    sched_op_key(op_json, &kr.opt.target, a.op_key);
    const char *sched_json = "{\"template\":\"softmax_rows\",\"params\":{\"vec\":8}}";
    sched_artifact_key(a.op_key, sched_json, a.key);
    strcpy(a.op, "softmax");
    strcpy(a.target, "sm_90");
    a.op_json = op_json;
    a.schedule_json = (char *)sched_json;
    a.launch = (kc_launch){
        .n_kernels = 1,
        .kernels = {{.name = "hd_softmax", .grid = {8, 1, 1}, .block = {128, 1, 1},
                     .n_args = 2, .args = {KC_BUF_INPUT0, KC_BUF_OUTPUT}}},
        .has_output = true};
    for (int i = 0; i < kr.op.output.rank; i++)
        a.launch.output_shape[a.launch.output_rank++] = kr.op.output.shape[i];
    snprintf(a.launch.output_dtype, sizeof(a.launch.output_dtype), "%s",
             tuner_dtype_name(kr.op.output.dtype));
    a.ptx = (char *)"// PTX of the test kernel\n";
    a.ptx_len = strlen(a.ptx);
    static uint8_t cubin[] = { 0x7f, 'E', 'L', 'F', 1, 2, 3, 4 };
    a.cubin = cubin;
    a.cubin_len = sizeof(cubin);
    a.choice = choice;
    a.latency_us = choice == KC_CHOSEN_MEASURED ? 3.5 : -1;
    a.predicted_us = 2.25;
    a.provenance_json = (char *)"{\"daemon\":\"test\"}";
    CHECK(kc_artifact_put(db, &a) == 0, "put: %s", kc_errmsg(db));
    memcpy(key, a.key, sizeof(key));
    free(op_json);
    return key;
}

static int adopt(hd_daemon *d, proto_transport t)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
        return -1;
    CHECK(proto_server_adopt(d->http, sv[0], t) == 0, "adopt");
    return sv[1];
}

static void server_closed(void *udata) { *(bool *)udata = true; }

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    char dir[] = "/tmp/hidetd-srv-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char dbpath[256];
    snprintf(dbpath, sizeof(dbpath), "%s/kernels.db", dir);

    uv_loop_t loop;
    uv_loop_init(&loop);
    hd_daemon d;
    memset(&d, 0, sizeof(d));
    d.loop = &loop;
    d.sig_fd = -1;
    hd_config_init(&d.cfg);
    d.cfg.token = strdup("t0ken");
    char *err = NULL;
    CHECK(kc_open(dbpath, &d.db, &err) == 0, "kc_open: %s", err ? err : "");
    free(err);
    resolve_config rc;
    resolve_config_defaults(&rc);
    rc.memory_entries = 64;
    rc.memory_bytes = 1 << 20;
    rc.data_version_ms = 60000; /* only when the test says (below) */
    CHECK(resolve_new(&loop, d.db, NULL, NULL, &rc, &d.resolver) == 0, "resolver");
    hd__metrics_setup(&d);
    CHECK(proto_server_new(&loop, NULL, hd__handle, &d, &d.http) == 0, "server");
    proto_server_set_on_complete(d.http, hd__on_complete, &d);
    proto_server_set_admit(d.http, hd__admit, &d);
    d.cfg.allowed_hosts = strdup("t"); /* the Host the requests below send */
    hd_log_set_level(HD_LOG_ERROR); /* keep the access log out of the test output */

    int fd = adopt(&d, PROTO_TRANSPORT_UNIX);

    /* Routing. */
    resp r = request(&loop, fd, "GET", "/healthz", NULL, NULL);
    CHECK(r.status == 200 && r.body && !strcmp(r.body, "{\"status\":\"ok\"}\n"), "healthz %d", r.status);
    resp_free(&r);
    r = request(&loop, fd, "GET", "/nope", NULL, NULL);
    CHECK(r.status == 404 && code_of(&r) && !strcmp(code_of(&r), "not_found"), "404: %d", r.status);
    resp_free(&r);
    r = request(&loop, fd, "PUT", "/v1/jobs/1", NULL, NULL);
    CHECK(r.status == 405 && strcasestr(r.head, "Allow: GET, DELETE"), "405: %d %s", r.status, r.head);
    CHECK(code_of(&r) && !strcmp(code_of(&r), "method_not_allowed"), "405 code");
    resp_free(&r);
    r = request(&loop, fd, "GET", "/v1/kernels/xyz", NULL, NULL);
    CHECK(r.status == 400 && !strcmp(code_of(&r), "invalid_field"), "bad key: %d", r.status);
    resp_free(&r);
    r = request(&loop, fd, "GET", "/v1/jobs/0", NULL, NULL);
    CHECK(r.status == 400, "bad job id: %d", r.status);
    resp_free(&r);
    r = request(&loop, fd, "POST", "/v1/kernels", "{\"op\":", NULL);
    CHECK(r.status == 400 && !strcmp(code_of(&r), "invalid_json"), "bad json: %d", r.status);
    resp_free(&r);

    /* A miss: no scheduler in this test, so the daemon says it cannot take jobs. */
    r = request(&loop, fd, "POST", "/v1/kernels", softmax_body, NULL);
    CHECK(r.status == 503 && !strcmp(code_of(&r), "shutting_down"), "miss: %d %s", r.status, r.body);
    resp_free(&r);
    CHECK(hd_metric_value(d.m_misses) == 1, "miss counted");

    /* The scheduler stored a model-ranked kernel meanwhile (here: directly). */
    const char *key = store_artifact(d.db, KC_CHOSEN_MODEL);
    r = request(&loop, fd, "POST", "/v1/kernels", softmax_body, NULL);
    CHECK(r.status == 200 && r.json, "hit from db: %d %s", r.status, r.body);
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(r.json, "cached")), "cached");
    CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(r.json, "key")), key), "key");
    char *first = strdup(r.body);
    resp_free(&r);
    /* Again: from the request memo and the answer cache, byte for byte the same. */
    r = request(&loop, fd, "POST", "/v1/kernels", softmax_body, NULL);
    CHECK(r.status == 200 && !strcmp(r.body, first), "memo hit differs");
    resp_free(&r);
    CHECK(resolve_memory_count(d.resolver) == 1, "memory tier filled");
    /* The same op spelled differently is the same entry (a new memo entry, the same answer). */
    r = request(&loop, fd, "POST", "/v1/kernels",
                "{\"inputs\":[{\"dtype\":\"float16\",\"shape\":[8,1000]}],\"op\":\"softmax\",\"tune\":\"model\"}",
                NULL);
    CHECK(r.status == 200 && !strcmp(r.body, first), "alias differs: %s", r.body);
    resp_free(&r);
    /* tune none is answered by the model's choice (stronger), measure without a GPU too, but
     * with a warning. */
    r = request(&loop, fd, "POST", "/v1/kernels",
                "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[8,1000],\"dtype\":\"f16\"}],\"tune\":\"none\"}", NULL);
    CHECK(r.status == 200 && !strcmp(r.body, first), "none: %d", r.status);
    resp_free(&r);
    r = request(&loop, fd, "POST", "/v1/kernels",
                "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[8,1000],\"dtype\":\"f16\"}],\"tune\":\"measure\"}", NULL);
    CHECK(r.status == 200 && cJSON_GetObjectItem(r.json, "warning") &&
          cJSON_IsFalse(cJSON_GetObjectItem(r.json, "measured")), "measure w/o GPU: %d %s", r.status, r.body);
    resp_free(&r);
    CHECK(hd_metric_value(d.m_hits) == 5, "hits counted: %g", hd_metric_value(d.m_hits));

    /* Kernels by key. */
    char path[160];
    snprintf(path, sizeof(path), "/v1/kernels/%s", key);
    r = request(&loop, fd, "GET", path, NULL, NULL);
    CHECK(r.status == 200 && cJSON_IsTrue(cJSON_GetObjectItem(r.json, "cached")), "GET key: %d", r.status);
    resp_free(&r);
    snprintf(path, sizeof(path), "/v1/kernels/%s/ptx", key);
    r = request(&loop, fd, "GET", path, NULL, NULL);
    CHECK(r.status == 200 && r.body && !strcmp(r.body, "// PTX of the test kernel\n") &&
          strcasestr(r.head, "text/plain"), "ptx: %d", r.status);
    resp_free(&r);
    snprintf(path, sizeof(path), "/v1/kernels/%s/cubin", key);
    r = request(&loop, fd, "GET", path, NULL, NULL);
    CHECK(r.status == 200 && r.len == 8 && !memcmp(r.body, "\177ELF", 4) &&
          strcasestr(r.head, "application/octet-stream"), "cubin: %d", r.status);
    resp_free(&r);
    char other[KC_KEY_LEN + 1];
    memset(other, 'e', KC_KEY_LEN);
    other[KC_KEY_LEN] = '\0';
    snprintf(path, sizeof(path), "/v1/kernels/%s/ptx", other);
    r = request(&loop, fd, "GET", path, NULL, NULL);
    CHECK(r.status == 404, "unknown key: %d", r.status);
    resp_free(&r);

    /* Another process removes the kernel: the in-memory answers must go with it. */
    kc_db *db2 = NULL;
    CHECK(kc_open(dbpath, &db2, NULL) == 0, "second handle");
    kc_filter f = { .key_prefix = key };
    size_t removed = 0;
    CHECK(kc_remove(db2, &f, &removed) == 0 && removed == 1, "remove");
    kc_close(db2);
    rc.data_version_ms = 0; /* the next request looks at data_version now */
    resolve_reconfigure(d.resolver, &rc);
    r = request(&loop, fd, "POST", "/v1/kernels", softmax_body, NULL);
    CHECK(r.status == 503, "served a removed kernel from memory: %d", r.status);
    resp_free(&r);

    /* A measured kernel answers a measure request without a warning. */
    key = store_artifact(d.db, KC_CHOSEN_MEASURED);
    resolve_invalidate(d.resolver); /* as the end of the job that stored it does */
    r = request(&loop, fd, "POST", "/v1/kernels",
                "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[8,1000],\"dtype\":\"f16\"}],\"tune\":\"measure\"}", NULL);
    CHECK(r.status == 200 && cJSON_IsTrue(cJSON_GetObjectItem(r.json, "measured")) &&
          !cJSON_GetObjectItem(r.json, "warning"), "measured: %d %s", r.status, r.body);
    resp_free(&r);

    /* Status, jobs and metrics. */
    r = request(&loop, fd, "GET", "/v1/status", NULL, NULL);
    CHECK(r.status == 200 && cJSON_IsFalse(cJSON_GetObjectItem(r.json, "gpu_available")), "status");
    resp_free(&r);
    r = request(&loop, fd, "GET", "/v1/jobs", NULL, NULL);
    CHECK(r.status == 200 && r.body && !strcmp(r.body, "{\"jobs\":[]}\n"), "jobs: %s", r.body);
    resp_free(&r);
    r = request(&loop, fd, "GET", "/metrics", NULL, NULL);
    CHECK(r.status == 200 && strcasestr(r.head, "version=0.0.4"), "metrics: %d", r.status);
    CHECK(r.body && strstr(r.body, "hidetd_requests_total{endpoint=\"/healthz\",status=\"200\"} 1"),
          "request counter missing");
    CHECK(r.body && strstr(r.body, "hidetd_cache_artifacts 1"), "cache gauge missing");
    resp_free(&r);
    close(fd);

    /* Every TCP request needs the token (loopback is no boundary); a refusal closes the
     * connection, so each one below gets its own. /healthz is answered without it. */
    const struct {
        const char *method, *path, *header;
        int status;
        const char *code;
    } tcp[] = {
        { "GET", "/v1/status", NULL, 401, "unauthorized" },
        { "DELETE", "/v1/jobs/1", NULL, 401, "unauthorized" },
        { "GET", "/v1/status", "Authorization: Bearer wrong", 401, "unauthorized" },
        { "GET", "/v1/status", "Authorization: Bearer t0ken", 200, NULL },
        { "GET", "/healthz", NULL, 200, NULL },
        { "GET", "/v1/status", "Authorization: Bearer t0ken\r\nOrigin: http://t", 403,
          "forbidden_origin" },
    };
    for (size_t i = 0; i < sizeof(tcp) / sizeof(tcp[0]); i++) {
        fd = adopt(&d, PROTO_TRANSPORT_TCP);
        r = request(&loop, fd, tcp[i].method, tcp[i].path, NULL, tcp[i].header);
        CHECK(r.status == tcp[i].status && (!tcp[i].code || !strcmp(code_of(&r), tcp[i].code)),
              "TCP %s %s (%s): %d %s", tcp[i].method, tcp[i].path,
              tcp[i].header ? tcp[i].header : "-", r.status, r.body ? r.body : "");
        if (tcp[i].status == 401)
            CHECK(strcasestr(r.head, "WWW-Authenticate: Bearer") != NULL, "no WWW-Authenticate");
        resp_free(&r);
        close(fd);
    }
    /* A Host the listener does not answer to (DNS rebinding) is refused too. */
    free(d.cfg.allowed_hosts);
    d.cfg.allowed_hosts = strdup("other");
    fd = adopt(&d, PROTO_TRANSPORT_TCP);
    r = request(&loop, fd, "GET", "/healthz", NULL, NULL);
    CHECK(r.status == 403 && !strcmp(code_of(&r), "forbidden_host"), "foreign Host: %d", r.status);
    resp_free(&r);
    close(fd);
    /* An Origin is refused on the Unix socket as well. */
    fd = adopt(&d, PROTO_TRANSPORT_UNIX);
    r = request(&loop, fd, "GET", "/healthz", NULL, "Origin: http://evil.example");
    CHECK(r.status == 403 && !strcmp(code_of(&r), "forbidden_origin"), "Origin: %d", r.status);
    resp_free(&r);
    close(fd);

    bool closed = false;
    proto_server_close(d.http, server_closed, &closed);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(closed, "server closed");
    CHECK(uv_loop_close(&loop) == 0, "loop closed");
    free(first);
    hd_metrics_free(d.metrics);
    resolve_free(d.resolver);
    kc_close(d.db);
    hd_config_clear(&d.cfg);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_finish("test_server");
}
