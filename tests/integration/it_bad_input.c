/* tests/integration/it_bad_input.c - every kind of bad input gets its status and a JSON error
 * (code, message, field), and harms nothing: /healthz keeps answering and what was stored stays
 * served. Covers malformed JSON, wrong types, unknown ops and dtypes, bad and absurd shapes,
 * oversized bodies, deep nesting, unknown endpoints and methods, slow and half-closed clients. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"

static const char *good =
    "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[64,32],\"dtype\":\"f16\"},"
    "{\"shape\":[32,128],\"dtype\":\"f16\"}],\"arch\":\"sm_90\",\"tune\":\"none\"}";

static void expect_error(const ht_daemon *d, const char *method, const char *path, const char *body,
                         size_t len, long status, const char *code, const char *field)
{
    ht_resp r = ht_request(d, false, method, path, body, len, NULL);
    CHECK(r.status == status, "%s %s: status %ld, want %ld: %.300s", method, path, r.status,
             status, r.body);
    CHECK(r.json != NULL, "%s %s: answer is not JSON: %.200s", method, path, r.body);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(r.json, "error");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(e, "message");
    const cJSON *fld = cJSON_GetObjectItemCaseSensitive(e, "field");
    CHECK(cJSON_IsString(msg) && strlen(msg->valuestring) > 5, "%s %s: no message", method, path);
    CHECK(cJSON_IsString(fld), "%s %s: no field member", method, path);
    if (code)
        CHECK(!strcmp(ht_error_code(&r), code), "%s %s: code '%s', want '%s' (%.200s)", method, path,
                 ht_error_code(&r), code, r.body);
    if (field && cJSON_IsString(fld))
        CHECK(!strcmp(fld->valuestring, field), "%s %s: field '%s', want '%s'", method, path,
                 fld->valuestring, field);
    ht_resp_free(&r);

    ht_resp h = ht_get(d, "/healthz");
    CHECK(h.status == 200, "healthz after %s %s: %ld", method, path, h.status);
    ht_resp_free(&h);
}

static void bad_kernel(const ht_daemon *d, const char *body, long status, const char *code,
                       const char *field)
{
    expect_error(d, "POST", "/v1/kernels", body, strlen(body), status, code, field);
}

static int connect_unix(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads until EOF or timeout; returns bytes read into buf (NUL-terminated). */
static size_t read_all(int fd, char *buf, size_t cap, int timeout_ms)
{
    size_t n = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, timeout_ms) <= 0)
            break;
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
        if (n + 1 >= cap)
            break;
    }
    buf[n] = 0;
    return n;
}

int main(void)
{
    ht_daemon d;
    ht_init(&d);
    ht_write_config(&d, "[server]\nrequest_timeout = 1s\nmax_body = 64KiB\n");
    ht_arg(&d, "--workers");
    ht_arg(&d, "none");
    if (ht_start(&d) != 0)
        return 1;

    ht_resp stored = ht_post(&d, "/v1/kernels", good);
    CHECK(stored.status == 200, "good request: %ld %.300s", stored.status, stored.body);
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(stored.json, "key");
    char key[80] = "";
    if (cJSON_IsString(k))
        snprintf(key, sizeof(key), "%s", k->valuestring);

    bad_kernel(&d, "{\"op\":", 400, "invalid_json", NULL);
    bad_kernel(&d, "", 400, "invalid_json", NULL);
    bad_kernel(&d, "[1,2,3]", 400, NULL, NULL);
    bad_kernel(&d, "\x01\x02garbage\xff", 400, "invalid_json", NULL);
    bad_kernel(&d, "{\"op\":\"matmul\",\"inputs\":\"x\"}", 400, "invalid_field", "inputs");
    bad_kernel(&d, "{\"op\":7,\"inputs\":[]}", 400, "invalid_field", "op");
    bad_kernel(&d,
               "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[64,\"32\"],\"dtype\":\"f16\"},"
               "{\"shape\":[32,128],\"dtype\":\"f16\"}]}",
               400, "invalid_field", "inputs[0].shape[1]");
    bad_kernel(&d, "{\"op\":\"frobnicate\",\"inputs\":[{\"shape\":[4],\"dtype\":\"f16\"}]}", 422,
               "unknown_op", "op");
    bad_kernel(&d,
               "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[64,32],\"dtype\":\"f8\"},"
               "{\"shape\":[32,128],\"dtype\":\"f16\"}]}",
               422, "unknown_dtype", "inputs[0].dtype");
    bad_kernel(&d,
               "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[-64,32],\"dtype\":\"f16\"},"
               "{\"shape\":[32,128],\"dtype\":\"f16\"}]}",
               422, NULL, "inputs[0].shape[0]");
    bad_kernel(&d,
               "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[0,32],\"dtype\":\"f16\"},"
               "{\"shape\":[32,128],\"dtype\":\"f16\"}]}",
               422, NULL, "inputs[0].shape[0]");
    bad_kernel(&d,
               "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[1099511627776,1099511627776],\"dtype\":\"f16\"},"
               "{\"shape\":[1099511627776,128],\"dtype\":\"f16\"}]}",
               422, "limit_exceeded", NULL);
    bad_kernel(&d,
               "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[2000000,2000000],\"dtype\":\"f16\"},"
               "{\"shape\":[2000000,128],\"dtype\":\"f16\"}]}",
               422, "limit_exceeded", NULL);
    bad_kernel(&d,
               "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[1,2,3,4,5,6,7],\"dtype\":\"f16\"}]}",
               422, NULL, "inputs[0].shape");
    bad_kernel(&d,
               "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[64,32],\"dtype\":\"f16\"},"
               "{\"shape\":[33,128],\"dtype\":\"f16\"}]}",
               422, "shape_mismatch", NULL);
    bad_kernel(&d,
               "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[64,32],\"dtype\":\"f16\"},"
               "{\"shape\":[32,128],\"dtype\":\"f16\"}],\"arch\":\"sm_12\"}",
               422, NULL, "arch");
    bad_kernel(&d,
               "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[64,32],\"dtype\":\"f16\"},"
               "{\"shape\":[32,128],\"dtype\":\"f16\"}],\"epilogue\":[{\"op\":\"launch_missiles\"}]}",
               422, NULL, "epilogue[0].op");
    bad_kernel(&d,
               "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[64,32],\"dtype\":\"f16\"},"
               "{\"shape\":[32,128],\"dtype\":\"f16\"}],\"epilogue\":[{\"op\":\"bias\",\"input\":5}]}",
               422, NULL, "epilogue[0].input");
    bad_kernel(&d,
               "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[64,32],\"dtype\":\"f16\"},"
               "{\"shape\":[32,128],\"dtype\":\"f16\"}],\"tune\":\"maybe\"}",
               422, NULL, "tune");

    /* Deep nesting. */
    char deep[2048];
    size_t n = 0;
    n += (size_t)snprintf(deep + n, sizeof(deep) - n, "{\"op\":\"matmul\",\"attrs\":{\"x\":");
    for (int i = 0; i < 200; i++)
        deep[n++] = '[';
    for (int i = 0; i < 200; i++)
        deep[n++] = ']';
    n += (size_t)snprintf(deep + n, sizeof(deep) - n, "}}");
    bad_kernel(&d, deep, 400, "limit_exceeded", NULL);

    /* A body over the configured limit (64 KiB here). */
    size_t big_len = 200 * 1024;
    char *big = malloc(big_len);
    memset(big, ' ', big_len);
    big[0] = '{';
    big[big_len - 1] = '}';
    expect_error(&d, "POST", "/v1/kernels", big, big_len, 413, "body_too_large", NULL);
    free(big);

    /* Endpoints and methods. */
    expect_error(&d, "GET", "/v1/nope", NULL, 0, 404, "not_found", NULL);
    expect_error(&d, "GET", "/", NULL, 0, 404, "not_found", NULL);
    expect_error(&d, "PUT", "/v1/kernels", good, strlen(good), 405, "method_not_allowed", NULL);
    expect_error(&d, "DELETE", "/healthz", NULL, 0, 405, "method_not_allowed", NULL);
    expect_error(&d, "GET", "/v1/kernels/zz-not-a-key", NULL, 0, 400, NULL, NULL);
    expect_error(&d, "GET",
                 "/v1/kernels/0000000000000000000000000000000000000000000000000000000000000000",
                 NULL, 0, 404, "not_found", NULL);
    expect_error(&d, "GET",
                 "/v1/kernels/0000000000000000000000000000000000000000000000000000000000000000/ptx",
                 NULL, 0, 404, "not_found", NULL);
    expect_error(&d, "GET", "/v1/jobs/987654321", NULL, 0, 404, "not_found", NULL);
    expect_error(&d, "DELETE", "/v1/jobs/987654321", NULL, 0, 404, "not_found", NULL);

    /* A slow client that never finishes its headers is cut off, and others are served meanwhile. */
    int slow = connect_unix(d.socket);
    CHECK(slow >= 0, "connect: %s", strerror(errno));
    const char *partial = "POST /v1/kernels HTTP/1.1\r\nHost: x\r\nContent-Le";
    CHECK(write(slow, partial, strlen(partial)) > 0, "write");
    ht_resp h = ht_get(&d, "/healthz");
    CHECK(h.status == 200, "healthz while a slow client hangs: %ld", h.status);
    ht_resp_free(&h);
    char buf[4096];
    read_all(slow, buf, sizeof(buf), 5000); /* the daemon must close (or answer 408) by itself */
    CHECK(buf[0] == 0 || strstr(buf, " 408 "), "slow client got: %.200s", buf);
    struct pollfd p = {.fd = slow, .events = POLLIN};
    CHECK(poll(&p, 1, 100) == 1, "slow connection still open after the timeout");
    close(slow);

    /* A client that sends a whole request and half-closes still gets the answer. */
    int half = connect_unix(d.socket);
    const char *req = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    CHECK(write(half, req, strlen(req)) == (ssize_t)strlen(req), "write");
    shutdown(half, SHUT_WR);
    read_all(half, buf, sizeof(buf), 3000);
    CHECK(strstr(buf, "HTTP/1.1 200") != NULL, "half-closed client got: %.200s", buf);
    close(half);

    /* Pipelining: two requests in one write, two answers in order. */
    int pipe_fd = connect_unix(d.socket);
    const char *two = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/nope HTTP/1.1\r\nHost: x\r\n"
                      "Connection: close\r\n\r\n";
    CHECK(write(pipe_fd, two, strlen(two)) == (ssize_t)strlen(two), "write");
    read_all(pipe_fd, buf, sizeof(buf), 3000);
    char *first = strstr(buf, "HTTP/1.1 200"), *second = strstr(buf, "HTTP/1.1 404");
    CHECK(first && second && first < second, "pipelined answers: %.300s", buf);
    close(pipe_fd);

    /* Malformed HTTP. */
    int junk = connect_unix(d.socket);
    const char *garbage = "HELLO THERE\r\n\r\n";
    CHECK(write(junk, garbage, strlen(garbage)) > 0, "write");
    read_all(junk, buf, sizeof(buf), 3000);
    CHECK(buf[0] == 0 || strstr(buf, " 400 "), "malformed request line got: %.200s", buf);
    close(junk);

    /* Nothing stored was harmed. */
    ht_resp again = ht_post(&d, "/v1/kernels", good);
    CHECK(again.status == 200, "good request after abuse: %ld", again.status);
    CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(again.json, "cached")), "not cached");
    const cJSON *k2 = cJSON_GetObjectItemCaseSensitive(again.json, "key");
    CHECK(cJSON_IsString(k2) && !strcmp(k2->valuestring, key), "stored key changed");
    ht_resp_free(&again);
    if (key[0]) {
        char path[128];
        snprintf(path, sizeof(path), "/v1/kernels/%s/cubin", key);
        ht_resp c = ht_get(&d, path);
        CHECK(c.status == 200, "cubin after abuse: %ld", c.status);
        ht_resp_free(&c);
    }
    ht_resp_free(&stored);

    CHECK(ht_stop(&d, SIGTERM) == 0, "SIGTERM exit status");
    ht_cleanup(&d);
    return ht_finish("it_bad_input");
}
