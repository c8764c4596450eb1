/* Unit tests of proto/http.c: a server on a temporary Unix socket and a loopback TCP port, run on
 * its own loop thread, driven with raw blocking sockets from the main thread. Timeouts in the
 * client only guard against hangs; no result depends on timing. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <uv.h>

#include "proto/http.h"
#include "tests/check.h"


/* ---------------------------------------------------------------------------------------------
 * Server side (loop thread) */

static uv_loop_t loop;
static proto_server *srv;
static uv_async_t wake;
static char sock_path[256];
static int tcp_port;
static atomic_int n_aborts, n_completed, n_closed_done, close_requested, n_held, stats_asked;
static atomic_long stats_conns = -1;
static proto_request *held_on_close; /* answered when the server starts closing */

typedef struct later {
    uv_timer_t t;
    proto_request *req;
} later;

static void later_closed(uv_handle_t *h)
{
    free(h->data);
}

static void later_fire(uv_timer_t *t)
{
    later *l = t->data;
    proto_respond(l->req, 200, "text/plain", "async", 5);
    uv_close((uv_handle_t *)t, later_closed);
}

static void answer_later(proto_request *req, uint64_t ms)
{
    later *l = calloc(1, sizeof(*l));
    l->req = req;
    uv_timer_init(&loop, &l->t);
    l->t.data = l;
    uv_timer_start(&l->t, later_fire, ms, 0);
}

static void on_abort(proto_request *req, void *udata)
{
    atomic_fetch_add(&n_aborts, 1);
    /* Answering after the client left is allowed; the answer is discarded. */
    answer_later(req, 5);
}

/* Like the daemon: answer from inside the abort callback. */
static void on_abort_sync(proto_request *req, void *udata)
{
    atomic_fetch_add(&n_aborts, 1);
    CHECK(proto_request_aborted(req));
    CHECK(proto_respond(req, 499, NULL, NULL, 0) == 0);
}

static void handler(proto_request *req, void *udata)
{
    if (strcmp(req->path, "/hold-sync") == 0) {
        proto_request_on_abort(req, on_abort_sync, NULL);
        atomic_fetch_add(&n_held, 1);
        return;
    }
    if (strcmp(req->path, "/async") == 0) {
        answer_later(req, 20);
        return;
    }
    if (strcmp(req->path, "/hold") == 0) {
        proto_request_on_abort(req, on_abort, NULL);
        atomic_fetch_add(&n_held, 1);
        return;
    }
    if (strcmp(req->path, "/hold-until-close") == 0) {
        held_on_close = req;
        atomic_fetch_add(&n_held, 1);
        return;
    }
    if (strcmp(req->path, "/405") == 0) {
        CHECK(proto_request_add_header(req, "Allow", "GET, POST") == 0);
        CHECK(proto_request_add_header(req, "Bad", "a\r\nInjected: 1") == -EINVAL);
        CHECK(proto_request_add_header(req, "Content-Length", "3") == -EINVAL);
        proto_respond_error(req, 405, "method_not_allowed", "use GET or POST", "");
        return;
    }
    if (strcmp(req->path, "/big") == 0) {
        size_t n = 300000;
        char *b = malloc(n);
        memset(b, 'x', n);
        proto_respond(req, 200, "application/octet-stream", b, n);
        free(b);
        return;
    }
    const char *x = proto_request_header(req, "x-TEST");
    char body[512];
    snprintf(body, sizeof(body),
             "{\"method\":\"%s\",\"path\":\"%s\",\"query\":\"%s\",\"len\":%zu,\"x\":\"%s\","
             "\"local\":%s,\"transport\":\"%s\",\"peer\":\"%s\"}",
             req->method, req->path, req->query, req->body_len, x ? x : "",
             req->is_local ? "true" : "false",
             req->transport == PROTO_TRANSPORT_UNIX ? "unix" : "tcp", req->peer);
    CHECK(req->body[req->body_len] == '\0');
    proto_respond_json(req, 200, body);
}

static void on_complete(const proto_request *req, int status, size_t body_bytes, double dur,
                        void *udata)
{
    atomic_fetch_add(&n_completed, 1);
}

static void closed_done(void *udata)
{
    atomic_fetch_add(&n_closed_done, 1);
    uv_close((uv_handle_t *)&wake, NULL);
}

static void on_wake(uv_async_t *a)
{
    if (atomic_load(&stats_asked) && srv) {
        proto_server_stats st;
        proto_server_stats_get(srv, &st);
        atomic_store(&stats_conns, (long)st.connections_active);
        atomic_store(&stats_asked, 0);
    }
    if (atomic_load(&close_requested) && srv) {
        proto_server *s = srv;
        srv = NULL;
        proto_server_close(s, closed_done, NULL);
        if (held_on_close) {
            proto_respond(held_on_close, 200, "text/plain", "bye", 3);
            held_on_close = NULL;
        }
    }
}

static void *loop_thread(void *arg)
{
    uv_run(&loop, UV_RUN_DEFAULT);
    return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Client side (main thread, blocking sockets) */

typedef struct client {
    int fd;
    char buf[1 << 20];
    size_t len;
} client;

static void set_timeouts(int fd)
{
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static client *connect_unix(const char *path)
{
    client *c = calloc(1, sizeof(*c));
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%.100s", path);
    c->fd = socket(AF_UNIX, SOCK_STREAM, 0);
    set_timeouts(c->fd);
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        fprintf(stderr, "connect %s: %s\n", path, strerror(errno));
        failures++;
    }
    return c;
}

static client *connect_tcp(int port)
{
    client *c = calloc(1, sizeof(*c));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    set_timeouts(c->fd);
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        fprintf(stderr, "connect tcp %d: %s\n", port, strerror(errno));
        failures++;
    }
    return c;
}

static void client_close(client *c)
{
    if (!c)
        return;
    close(c->fd);
    free(c);
}

static void send_str(client *c, const char *s)
{
    size_t n = strlen(s), off = 0;
    while (off < n) {
        ssize_t w = send(c->fd, s + off, n - off, MSG_NOSIGNAL);
        if (w <= 0) {
            fprintf(stderr, "send: %s\n", strerror(errno));
            failures++;
            return;
        }
        off += (size_t)w;
    }
}

/* Reads more bytes; returns bytes read, 0 on EOF, -1 on error/timeout. */
static ssize_t fill(client *c)
{
    if (c->len >= sizeof(c->buf) - 1)
        return -1;
    ssize_t r = recv(c->fd, c->buf + c->len, sizeof(c->buf) - 1 - c->len, 0);
    if (r > 0) {
        c->len += (size_t)r;
        c->buf[c->len] = '\0';
    }
    return r;
}

typedef struct response {
    int status;
    char headers[4096];
    char *body;
    size_t body_len;
} response;

/* Reads one response (Content-Length framed) from c; leftover bytes stay buffered. 0 or -1.
 * head: the answer to HEAD (no body follows its headers). */
static int read_response_opt(client *c, response *r, bool head)
{
    memset(r, 0, sizeof(*r));
    char *end;
    for (;;) {
        c->buf[c->len] = '\0';
        end = strstr(c->buf, "\r\n\r\n");
        if (end)
            break;
        if (fill(c) <= 0)
            return -1;
    }
    size_t hlen = (size_t)(end - c->buf) + 4;
    snprintf(r->headers, sizeof(r->headers), "%.*s", (int)hlen, c->buf);
    if (sscanf(c->buf, "HTTP/1.1 %d", &r->status) != 1)
        return -1;
    const char *cl = strcasestr(r->headers, "\r\ncontent-length:");
    size_t blen = cl ? strtoul(cl + 17, NULL, 10) : 0;
    if (r->status == 100 || head)
        blen = 0;
    while (c->len < hlen + blen)
        if (fill(c) <= 0)
            return -1;
    r->body = malloc(blen + 1);
    memcpy(r->body, c->buf + hlen, blen);
    r->body[blen] = '\0';
    r->body_len = blen;
    memmove(c->buf, c->buf + hlen + blen, c->len - hlen - blen);
    c->len -= hlen + blen;
    return 0;
}

static int read_response(client *c, response *r)
{
    return read_response_opt(c, r, false);
}

static bool at_eof(client *c)
{
    return c->len == 0 && fill(c) == 0;
}

static bool has_header(const response *r, const char *line)
{
    return strcasestr(r->headers, line) != NULL;
}

/* One request/answer on c; returns the status (or -1) and keeps the body in *ret_body. */
static int roundtrip(client *c, const char *request, response *r)
{
    send_str(c, request);
    if (read_response(c, r) < 0) {
        fprintf(stderr, "no response to: %.60s\n", request);
        failures++;
        return -1;
    }
    return r->status;
}

static void wait_for(atomic_int *v, int want)
{
    for (int i = 0; i < 1000 && atomic_load(v) < want; i++)
        usleep(10000);
}

/* ---------------------------------------------------------------------------------------------
 * Tests */

static void test_keepalive_and_basics(void)
{
    response r;
    client *c = connect_unix(sock_path);
    CHECK(roundtrip(c, "GET /echo%20x?a=1&b=2 HTTP/1.1\r\nHost: x\r\nX-Test: hello\r\n\r\n", &r) ==
          200);
    CHECK(strstr(r.body, "\"method\":\"GET\""));
    CHECK(strstr(r.body, "\"path\":\"/echo x\""));
    CHECK(strstr(r.body, "\"query\":\"a=1&b=2\""));
    CHECK(strstr(r.body, "\"x\":\"hello\""));
    CHECK(strstr(r.body, "\"local\":true,\"transport\":\"unix\""));
    /* A JSON answer is one complete line; the Content-Length counts the newline. */
    CHECK(r.body_len >= 2 && r.body[r.body_len - 2] == '}' && r.body[r.body_len - 1] == '\n');
    CHECK(has_header(&r, "Connection: keep-alive"));
    CHECK(has_header(&r, "Content-Type: application/json"));
    free(r.body);
    CHECK(roundtrip(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", &r) ==
          200);
    CHECK(strstr(r.body, "\"method\":\"POST\"") && strstr(r.body, "\"len\":5"));
    free(r.body);
    /* Chunked body. */
    CHECK(roundtrip(c, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n", &r) == 200);
    CHECK(strstr(r.body, "\"len\":7"));
    free(r.body);
    /* 405 with an Allow header added by the handler. */
    CHECK(roundtrip(c, "DELETE /405 HTTP/1.1\r\nHost: x\r\n\r\n", &r) == 405);
    CHECK(has_header(&r, "\r\nAllow: GET, POST\r\n"));
    CHECK(!has_header(&r, "Injected"));
    CHECK(strstr(r.body, "\"code\":\"method_not_allowed\""));
    CHECK(r.body_len >= 2 && r.body[r.body_len - 2] == '}' && r.body[r.body_len - 1] == '\n');
    free(r.body);
    /* HEAD: length announced, no body sent. */
    send_str(c, "HEAD /echo HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(read_response_opt(c, &r, true) == 0 && r.status == 200);
    CHECK(!has_header(&r, "Content-Length: 0\r\n"));
    free(r.body);
    CHECK(roundtrip(c, "GET /echo?after-head HTTP/1.1\r\nHost: x\r\n\r\n", &r) == 200);
    CHECK(strstr(r.body, "after-head"));
    free(r.body);
    client_close(c);

    /* A large answer arrives whole. */
    c = connect_unix(sock_path);
    CHECK(roundtrip(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n", &r) == 200);
    CHECK(r.body_len == 300000 && r.body[299999] == 'x');
    free(r.body);
    /* HTTP/1.0 without keep-alive: answered, then closed. */
    CHECK(roundtrip(c, "GET /echo HTTP/1.0\r\n\r\n", &r) == 200);
    CHECK(has_header(&r, "Connection: close"));
    free(r.body);
    CHECK(at_eof(c));
    client_close(c);
}

static void test_pipelining(void)
{
    response r;
    client *c = connect_unix(sock_path);
    /* The first is answered later (timer), the second at once: answers must keep order. */
    send_str(c, "GET /async HTTP/1.1\r\nHost: x\r\n\r\nGET /echo?second HTTP/1.1\r\nHost: x\r\n\r\n"
                "GET /echo?third HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(read_response(c, &r) == 0 && r.status == 200 && strcmp(r.body, "async") == 0);
    free(r.body);
    CHECK(read_response(c, &r) == 0 && r.status == 200 && strstr(r.body, "\"query\":\"second\""));
    free(r.body);
    CHECK(read_response(c, &r) == 0 && r.status == 200 && strstr(r.body, "\"query\":\"third\""));
    free(r.body);
    client_close(c);
}

static void test_limits(void)
{
    response r;
    client *c;

    /* Body over the limit (4096 in this test's limits): 413 and close, before the body. */
    c = connect_unix(sock_path);
    CHECK(roundtrip(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n", &r) ==
          413);
    CHECK(strstr(r.body, "\"code\":\"body_too_large\"") && has_header(&r, "Connection: close"));
    free(r.body);
    CHECK(at_eof(c));
    client_close(c);

    /* Chunked body growing past the limit. */
    c = connect_unix(sock_path);
    send_str(c, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    char chunk[3000];
    int cn = snprintf(chunk, sizeof(chunk), "800\r\n");
    memset(chunk + cn, 'a', 2048);
    memcpy(chunk + cn + 2048, "\r\n", 3);
    for (int i = 0; i < 3; i++)
        send_str(c, chunk);
    CHECK(read_response(c, &r) == 0 && r.status == 413);
    free(r.body);
    client_close(c);

    /* Headers over the limit: 431. */
    c = connect_unix(sock_path);
    static char big[24000];
    int n = snprintf(big, sizeof(big), "GET /echo HTTP/1.1\r\nX-Big: ");
    memset(big + n, 'h', 17000);
    memcpy(big + n + 17000, "\r\n\r\n", 5);
    CHECK(roundtrip(c, big, &r) == 431);
    CHECK(strstr(r.body, "\"code\":\"limit_exceeded\""));
    free(r.body);
    client_close(c);

    /* Malformed request line: 400 JSON, then close. */
    c = connect_unix(sock_path);
    CHECK(roundtrip(c, "GARBAGE\r\n\r\n", &r) == 400);
    CHECK(strstr(r.body, "{\"error\":{\"code\":\"") && has_header(&r, "Connection: close"));
    free(r.body);
    CHECK(at_eof(c));
    client_close(c);
    c = connect_unix(sock_path);
    CHECK(roundtrip(c, "GET /a%zz HTTP/1.1\r\nHost: x\r\n\r\n", &r) == 400);
    free(r.body);
    client_close(c);
    c = connect_unix(sock_path);
    CHECK(roundtrip(c, "GET /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2"
                       "\r\n\r\nab", &r) == 400);
    free(r.body);
    client_close(c);

    /* A slow client: part of a request, then nothing. 408 after the (short) request timeout. */
    c = connect_unix(sock_path);
    send_str(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc");
    CHECK(read_response(c, &r) == 0 && r.status == 408);
    CHECK(r.body && strstr(r.body, "\"code\":\"timeout\""));
    free(r.body);
    CHECK(at_eof(c));
    client_close(c);

    /* A connection that never sends anything is closed quietly. */
    c = connect_unix(sock_path);
    CHECK(at_eof(c));
    client_close(c);
}

static void test_half_close(void)
{
    response r;
    client *c = connect_unix(sock_path);
    send_str(c, "GET /async HTTP/1.1\r\nHost: x\r\n\r\nGET /echo?2 HTTP/1.1\r\nHost: x\r\n\r\n");
    shutdown(c->fd, SHUT_WR);
    CHECK(read_response(c, &r) == 0 && r.status == 200 && strcmp(r.body, "async") == 0);
    free(r.body);
    CHECK(read_response(c, &r) == 0 && r.status == 200 && strstr(r.body, "\"query\":\"2\""));
    CHECK(has_header(&r, "Connection: close"));
    free(r.body);
    CHECK(at_eof(c));
    client_close(c);

    /* Same over TCP. */
    c = connect_tcp(tcp_port);
    send_str(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi");
    shutdown(c->fd, SHUT_WR);
    CHECK(read_response(c, &r) == 0 && r.status == 200 && strstr(r.body, "\"len\":2"));
    free(r.body);
    CHECK(at_eof(c));
    client_close(c);
}

static void test_abort(void)
{
    int before = atomic_load(&n_aborts);
    client *c = connect_unix(sock_path);
    int held = atomic_load(&n_held);
    send_str(c, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n");
    /* Hang up only once the handler holds the request. */
    wait_for(&n_held, held + 1);
    client_close(c);
    wait_for(&n_aborts, before + 1);
    CHECK(atomic_load(&n_aborts) == before + 1);

    held = atomic_load(&n_held);
    c = connect_unix(sock_path);
    send_str(c, "GET /hold-sync HTTP/1.1\r\nHost: x\r\n\r\n");
    wait_for(&n_held, held + 1);
    client_close(c);
    wait_for(&n_aborts, before + 2);
    CHECK(atomic_load(&n_aborts) == before + 2);
    /* Over TCP a reset (not a plain close: see http.h) aborts too. */
    held = atomic_load(&n_held);
    c = connect_tcp(tcp_port);
    send_str(c, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n");
    wait_for(&n_held, held + 1);
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    client_close(c);
    wait_for(&n_aborts, before + 3);
    CHECK(atomic_load(&n_aborts) == before + 3);
}

static void test_tcp(void)
{
    response r;
    client *c = connect_tcp(tcp_port);
    CHECK(roundtrip(c, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n", &r) == 200);
    CHECK(strstr(r.body, "\"local\":true,\"transport\":\"tcp\",\"peer\":\"127.0.0.1:"));
    free(r.body);
    /* Expect: 100-continue gets an interim answer before the body is sent. */
    send_str(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
    CHECK(read_response(c, &r) == 0 && r.status == 100);
    free(r.body);
    send_str(c, "body");
    CHECK(read_response(c, &r) == 0 && r.status == 200 && strstr(r.body, "\"len\":4"));
    free(r.body);
    client_close(c);
}

static void test_many(void)
{
    response r;
    client *c = connect_tcp(tcp_port);
    int ok = 0;
    for (int i = 0; i < 1000; i++) {
        char req[128];
        snprintf(req, sizeof(req), "GET /echo?%d HTTP/1.1\r\nHost: x\r\n\r\n", i);
        char want[32];
        snprintf(want, sizeof(want), "\"query\":\"%d\"", i);
        if (roundtrip(c, req, &r) == 200 && strstr(r.body, want))
            ok++;
        free(r.body);
    }
    CHECK(ok == 1000);
    client_close(c);
}

/* Open connections as the loop thread sees them. */
static long server_conns(void)
{
    atomic_store(&stats_conns, -1);
    atomic_store(&stats_asked, 1);
    uv_async_send(&wake);
    for (int i = 0; i < 1000 && atomic_load(&stats_conns) < 0; i++)
        usleep(1000);
    return atomic_load(&stats_conns);
}

static void test_max_connections(void)
{
    /* Earlier clients hung up; wait until the server has closed their connections. */
    for (int i = 0; i < 1000 && server_conns() != 0; i++)
        usleep(10000);
    CHECK(server_conns() == 0);
    /* This server allows 6 connections: open 6 idle ones, the 7th is refused with 503. */
    client *idle[6];
    response r;
    for (int i = 0; i < 6; i++)
        idle[i] = connect_unix(sock_path);
    /* Make sure all six were accepted before the seventh connects. */
    for (int i = 0; i < 6; i++) {
        CHECK(roundtrip(idle[i], "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n", &r) == 200);
        free(r.body);
    }
    client *c = connect_unix(sock_path);
    CHECK(read_response(c, &r) == 0 && r.status == 503);
    free(r.body);
    CHECK(at_eof(c));
    client_close(c);
    for (int i = 0; i < 6; i++)
        client_close(idle[i]);
}

static int listen_on_fresh_server(const char *path)
{
    uv_loop_t l2;
    proto_server *s2;
    uv_loop_init(&l2);
    CHECK(proto_server_new(&l2, NULL, handler, NULL, &s2) == 0);
    int r = proto_server_listen_unix(s2, path, 0600);
    proto_server_close(s2, NULL, NULL);
    uv_run(&l2, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&l2) == 0);
    return r;
}

static void test_socket_files(const char *dir)
{
    char path[300];
    /* A live socket is refused. */
    CHECK(listen_on_fresh_server(sock_path) == -EADDRINUSE);
    /* A stale socket file (bound, never listening, never removed) is reused. */
    snprintf(path, sizeof(path), "%s/stale.sock", dir);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%.100s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    close(fd);
    struct stat st;
    CHECK(stat(path, &st) == 0 && S_ISSOCK(st.st_mode));
    CHECK(listen_on_fresh_server(path) == 0);
    /* ... and removed again when that server closed. */
    CHECK(stat(path, &st) < 0 && errno == ENOENT);
    /* A regular file is never removed. */
    snprintf(path, sizeof(path), "%s/regular", dir);
    FILE *f = fopen(path, "w");
    fclose(f);
    CHECK(listen_on_fresh_server(path) == -EEXIST);
    CHECK(stat(path, &st) == 0);
    unlink(path);
    /* The live socket has the requested mode. */
    CHECK(stat(sock_path, &st) == 0 && (st.st_mode & 0777) == 0660);
}

/* Runs l until c has one complete answer buffered, then parses it (single-threaded use). */
static int pump_response(uv_loop_t *l, client *c, response *r)
{
    for (int i = 0; i < 200000; i++) {
        uv_run(l, UV_RUN_NOWAIT);
        ssize_t n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - 1 - c->len, MSG_DONTWAIT);
        if (n > 0) {
            c->len += (size_t)n;
            c->buf[c->len] = '\0';
        }
        const char *end = strstr(c->buf, "\r\n\r\n");
        if (!end)
            continue;
        const char *cl = strcasestr(c->buf, "\r\ncontent-length:");
        size_t blen = cl && cl < end ? strtoul(cl + 17, NULL, 10) : 0;
        if (c->len >= (size_t)(end - c->buf) + 4 + blen)
            return read_response(c, r);
        usleep(100);
    }
    return -1;
}

/* Socket activation: a listening fd made elsewhere, Unix or TCP told apart by getsockname(). */
static void test_listen_fd(const char *dir)
{
    uv_loop_t l2;
    proto_server *s2;
    response r;
    char path[300];

    uv_loop_init(&l2);
    CHECK(proto_server_new(&l2, NULL, handler, NULL, &s2) == 0);

    int tfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof(sin);
    CHECK(bind(tfd, (struct sockaddr *)&sin, sizeof(sin)) == 0 && listen(tfd, 16) == 0);
    CHECK(getsockname(tfd, (struct sockaddr *)&sin, &sl) == 0);
    CHECK(proto_server_listen_fd(s2, tfd) == 0);
    CHECK(proto_server_tcp_port(s2) == ntohs(sin.sin_port));

    snprintf(path, sizeof(path), "%s/activated.sock", dir);
    int ufd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%.100s", path);
    CHECK(bind(ufd, (struct sockaddr *)&sun, sizeof(sun)) == 0 && listen(ufd, 16) == 0);
    CHECK(proto_server_listen_fd(s2, ufd) == 0);

    client *c = connect_tcp(ntohs(sin.sin_port));
    send_str(c, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(pump_response(&l2, c, &r) == 0 && r.status == 200);
    CHECK(r.body && strstr(r.body, "\"transport\":\"tcp\""));
    free(r.body);
    client_close(c);
    c = connect_unix(path);
    send_str(c, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(pump_response(&l2, c, &r) == 0 && r.status == 200);
    CHECK(r.body && strstr(r.body, "\"transport\":\"unix\""));
    free(r.body);
    client_close(c);

    proto_server_close(s2, NULL, NULL);
    uv_run(&l2, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&l2) == 0);
    /* An inherited socket's file belongs to whoever made it (systemd): it is not removed. */
    struct stat st;
    CHECK(stat(path, &st) == 0);
    unlink(path);
}

/* A client that asks for a large answer and never reads it is dropped after the idle timeout,
 * with keep-alive and with Connection: close. */
static void test_slow_reader(void)
{
    uv_loop_t l3;
    proto_server *s3;
    proto_limits lim;
    int sv[2];

    proto_limits_defaults(&lim);
    lim.idle_timeout_ms = 100;
    uv_loop_init(&l3);
    CHECK(proto_server_new(&l3, &lim, handler, NULL, &s3) == 0);
    for (int k = 0; k < 2; k++) {
        CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        int small = 4096;
        setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
        CHECK(proto_server_adopt(s3, sv[1], PROTO_TRANSPORT_UNIX) == 0);
        const char *req = k ? "GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                            : "GET /big HTTP/1.1\r\nHost: x\r\n\r\n";
        CHECK(write(sv[0], req, strlen(req)) == (ssize_t)strlen(req));
        proto_server_stats st = {0};
        for (int i = 0; i < 100000; i++) {
            uv_run(&l3, UV_RUN_ONCE);
            proto_server_stats_get(s3, &st);
            if (st.connections_active == 0)
                break;
        }
        CHECK(st.connections_active == 0);
        close(sv[0]);
    }
    proto_server_close(s3, NULL, NULL);
    uv_run(&l3, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&l3) == 0);
}

/* The unauthenticated TCP budget, on a server of its own driven step by step from this thread:
 * connections that never authenticate share it whatever their address and the oldest is evicted
 * for a new one; a client that sent its request at once is read and admitted when its turn to be
 * evicted comes, even when a burst of connections arrives before the loop ever read it. */
static bool budget_admit(proto_request *req, void *udata, proto_refusal *ret)
{
    const char *tok = proto_request_header(req, "X-Token");
    if (!tok)
        return true;
    if (strcmp(tok, "ok") != 0 && strcmp(tok, "ok2") != 0) {
        *ret = (proto_refusal){401, "unauthorized", "bad token"};
        return false;
    }
    if (proto_request_authenticate(req, tok) == -EBUSY) {
        *ret = (proto_refusal){503, "limit_exceeded", "too many for this token"};
        return false;
    }
    return true;
}

static int tcp_connect_nb(int port, const char *src)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (src) {
        struct sockaddr_in me = {.sin_family = AF_INET};
        inet_pton(AF_INET, src, &me.sin_addr);
        CHECK(bind(fd, (struct sockaddr *)&me, sizeof(me)) == 0);
    }
    CHECK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0); /* loopback: done at once */
    return fd;
}

/* Runs the loop until fd has an answer (or EOF); returns what was read (static buffer). */
static const char *pump_answer(uv_loop_t *l, int fd)
{
    static char buf[4096];
    size_t len = 0;
    for (int i = 0; i < 200000; i++) {
        uv_run(l, UV_RUN_NOWAIT);
        ssize_t n = recv(fd, buf + len, sizeof(buf) - 1 - len, MSG_DONTWAIT);
        if (n == 0)
            break;
        if (n > 0) {
            len += (size_t)n;
            buf[len] = '\0';
            const char *end = strstr(buf, "\r\n\r\n");
            const char *cl = strcasestr(buf, "content-length:");
            if (end && cl && len >= (size_t)(end + 4 - buf) + strtoul(cl + 15, NULL, 10))
                break;
        }
        if (i % 64 == 63)
            usleep(100);
    }
    buf[len] = '\0';
    return buf;
}

static void pump_stats(uv_loop_t *l, proto_server *s, proto_server_stats *st, int turns)
{
    for (int i = 0; i < turns; i++)
        uv_run(l, UV_RUN_NOWAIT);
    proto_server_stats_get(s, st);
}

static void test_unauthenticated_budget(void)
{
    uv_loop_t l4;
    proto_server *s4;
    proto_limits lim;
    proto_server_stats st;
    int silent[8], ns = 0;

    proto_limits_defaults(&lim);
    lim.max_connections_tcp = 5;
    lim.max_unauthenticated_tcp = 3;
    lim.max_connections_per_peer = 2;
    uv_loop_init(&l4);
    CHECK(proto_server_new(&l4, &lim, handler, NULL, &s4) == 0);
    proto_server_set_admit(s4, budget_admit, NULL);
    CHECK(proto_server_listen_tcp(s4, "127.0.0.1", 0) == 0);
    int port = proto_server_tcp_port(s4);

    /* Three silent connections from three loopback addresses fill the budget... */
    const char *src[] = {"127.0.0.2", "127.0.0.3", "127.0.0.4"};
    for (int i = 0; i < 3; i++)
        silent[ns++] = tcp_connect_nb(port, src[i]);
    pump_stats(&l4, s4, &st, 50);
    CHECK(st.connections_tcp == 3 && st.connections_tcp_unauthenticated == 3);
    /* ...a fourth evicts the oldest (closed without an answer) instead of being refused. */
    silent[ns++] = tcp_connect_nb(port, "127.0.0.2");
    pump_stats(&l4, s4, &st, 50);
    CHECK(st.connections_evicted == 1 && st.connections_refused == 0);
    CHECK(st.connections_tcp_unauthenticated == 3);
    char b;
    CHECK(recv(silent[0], &b, 1, MSG_DONTWAIT) == 0);

    /* A token holder's fresh connection, then a burst of four more silent ones, all accepted
     * before the loop reads anything: its turn to be evicted comes, it is read first and
     * admitted instead. */
    int t = tcp_connect_nb(port, NULL);
    const char *req = "GET /echo HTTP/1.1\r\nHost: x\r\nX-Token: ok\r\n\r\n";
    CHECK(send(t, req, strlen(req), 0) == (ssize_t)strlen(req));
    for (int i = 0; i < 4; i++)
        silent[ns++] = tcp_connect_nb(port, src[i % 3]);
    const char *ans = pump_answer(&l4, t);
    CHECK(strncmp(ans, "HTTP/1.1 200 ", 13) == 0);
    proto_server_stats_get(s4, &st);
    CHECK(st.connections_tcp_unauthenticated == 3);
    CHECK(st.connections_tcp - st.connections_tcp_unauthenticated == 1);
    /* Evicted: the first silent one; then, of the burst, the three ahead of t and one after t
     * left the budget. */
    CHECK(st.connections_evicted == 1 + 4, "%llu", (unsigned long long)st.connections_evicted);

    /* A token's share (2): a second connection is admitted (evicting a tokenless one from the
     * full budget), another token's too; then the listener (5) is full, but tokenless
     * connections are in it: one makes room, and the token's third connection reaches the hook,
     * which refuses it for the token's share (not for the listener's limit). */
    int t2 = tcp_connect_nb(port, NULL);
    CHECK(send(t2, req, strlen(req), 0) == (ssize_t)strlen(req));
    CHECK(strncmp(pump_answer(&l4, t2), "HTTP/1.1 200 ", 13) == 0);
    int t4 = tcp_connect_nb(port, NULL);
    const char *req2 = "GET /echo HTTP/1.1\r\nHost: x\r\nX-Token: ok2\r\n\r\n";
    CHECK(send(t4, req2, strlen(req2), 0) == (ssize_t)strlen(req2));
    CHECK(strncmp(pump_answer(&l4, t4), "HTTP/1.1 200 ", 13) == 0);
    proto_server_stats_get(s4, &st);
    CHECK(st.connections_tcp == 5 && st.connections_tcp_unauthenticated == 2);
    CHECK(st.connections_evicted == 6, "%llu", (unsigned long long)st.connections_evicted);
    int t3 = tcp_connect_nb(port, NULL);
    CHECK(send(t3, req, strlen(req), 0) == (ssize_t)strlen(req));
    ans = pump_answer(&l4, t3);
    CHECK(strncmp(ans, "HTTP/1.1 503 ", 13) == 0 && strstr(ans, "too many for this token"));
    proto_server_stats_get(s4, &st);
    CHECK(st.connections_refused == 0 && st.connections_evicted == 7);

    /* Two Host headers, or two Authorization headers: 400 naming the header. */
    int d = tcp_connect_nb(port, NULL);
    const char *dup = "GET /echo HTTP/1.1\r\nHost: x\r\nhost: y\r\n\r\n";
    CHECK(send(d, dup, strlen(dup), 0) == (ssize_t)strlen(dup));
    ans = pump_answer(&l4, d);
    CHECK(strncmp(ans, "HTTP/1.1 400 ", 13) == 0 && strstr(ans, "\"field\":\"Host\""));
    close(d);
    d = tcp_connect_nb(port, NULL);
    dup = "GET /echo HTTP/1.1\r\nHost: x\r\nAuthorization: a\r\nAUTHORIZATION: b\r\n\r\n";
    CHECK(send(d, dup, strlen(dup), 0) == (ssize_t)strlen(dup));
    ans = pump_answer(&l4, d);
    CHECK(strncmp(ans, "HTTP/1.1 400 ", 13) == 0 &&
          strstr(ans, "\"field\":\"Authorization\""));
    close(d);

    close(t);
    close(t2);
    close(t3);
    close(t4);
    for (int i = 0; i < ns; i++)
        close(silent[i]);
    proto_server_close(s4, NULL, NULL);
    uv_run(&l4, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&l4) == 0);
}

static void test_graceful_close(void)
{
    response r;
    client *held = connect_unix(sock_path);
    client *idle = connect_unix(sock_path);
    CHECK(roundtrip(idle, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n", &r) == 200);
    free(r.body);
    int n = atomic_load(&n_held);
    send_str(held, "GET /hold-until-close HTTP/1.1\r\nHost: x\r\n\r\n");
    wait_for(&n_held, n + 1);
    atomic_store(&close_requested, 1);
    uv_async_send(&wake);
    /* The idle connection is closed; the held request is answered with Connection: close. */
    CHECK(at_eof(idle));
    if (read_response(held, &r) == 0) {
        CHECK(r.status == 200 && strcmp(r.body, "bye") == 0);
        CHECK(has_header(&r, "Connection: close"));
        free(r.body);
    } else {
        fprintf(stderr, "held request not answered\n");
        failures++;
    }
    client_close(held);
    client_close(idle);
    wait_for(&n_closed_done, 1);
    CHECK(atomic_load(&n_closed_done) == 1);
    struct stat st;
    CHECK(stat(sock_path, &st) < 0); /* the socket file is gone */
}

int main(void)
{
    char dir[] = "/tmp/proto-http-XXXXXX";
    pthread_t th;

    signal(SIGPIPE, SIG_IGN);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(sock_path, sizeof(sock_path), "%s/hidetd.sock", dir);

    proto_limits lim;
    proto_limits_defaults(&lim);
    CHECK(lim.max_header_bytes == 16384 && lim.max_body_bytes == 1048576);
    CHECK(lim.request_timeout_ms == 10000 && lim.idle_timeout_ms == 60000);
    lim.max_body_bytes = 4096;
    /* Generous: a loaded CI machine must not turn a fast request into a 408. */
    lim.request_timeout_ms = 3000;
    lim.max_connections_unix = 6;
    lim.max_connections_tcp = 6;

    uv_loop_init(&loop);
    uv_async_init(&loop, &wake, on_wake);
    CHECK(proto_server_new(&loop, &lim, handler, NULL, &srv) == 0);
    proto_server_set_on_complete(srv, on_complete, NULL);
    CHECK(proto_server_listen_unix(srv, sock_path, 0) == 0);
    CHECK(proto_server_listen_tcp(srv, "127.0.0.1", 0) == 0);
    tcp_port = proto_server_tcp_port(srv);
    CHECK(tcp_port > 0);
    CHECK(proto_server_listen_tcp(srv, "not-an-address", 0) == -EINVAL);
    /* IPv6 loopback where the machine has it. */
    int r6 = proto_server_listen_tcp(srv, "[::1]", 0);
    CHECK(r6 == 0 || r6 == UV_EADDRNOTAVAIL || r6 == UV_EAFNOSUPPORT);

    pthread_create(&th, NULL, loop_thread, NULL);

    test_keepalive_and_basics();
    test_pipelining();
    test_limits();
    test_half_close();
    test_abort();
    test_tcp();
    test_many();
    test_max_connections();
    test_socket_files(dir);
    test_listen_fd(dir);
    test_slow_reader();
    test_unauthenticated_budget();
    test_graceful_close();

    pthread_join(th, NULL);
    CHECK(uv_loop_close(&loop) == 0);
    CHECK(atomic_load(&n_completed) > 1000);
    rmdir(dir);
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("test_http: all passed\n");
    return 0;
}
