/* Fuzz target: the HTTP request path. Each input is written as raw bytes into one connection of
 * a real proto_server (over a socketpair), the client half-closes, and the loop runs until the
 * server has answered and closed it. The handler validates POST /v1/kernels bodies, so requests
 * travel the whole way from bytes to a validated op. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <uv.h>

#include "proto/http.h"
#include "proto/request.h"
#include "tests/fuzz/fuzz.h"

static uv_loop_t loop;
static proto_server *srv;

static void handler(proto_request *req, void *udata)
{
    if (strcmp(req->path, "/v1/kernels") == 0 && strcmp(req->method, "POST") == 0) {
        proto_kernel_request kr;
        proto_error err;
        if (proto_kernel_request_parse(req->body, req->body_len, &kr, &err) < 0) {
            proto_respond_error(req, err.status, err.code, err.message, err.field);
            return;
        }
        char *canon = tuner_op_canonical_json(&kr.op);
        proto_respond_json(req, 200, canon ? canon : "{}");
        free(canon);
        return;
    }
    if (strcmp(req->path, "/healthz") == 0) {
        proto_respond_json(req, 200, "{\"status\":\"ok\"}");
        return;
    }
    if (proto_request_header(req, "x-allow"))
        proto_request_add_header(req, "Allow", proto_request_header(req, "x-allow"));
    proto_respond_error(req, 404, "not_found", req->path, "");
}

static void setup(void)
{
    proto_limits lim;
    signal(SIGPIPE, SIG_IGN);
    proto_limits_defaults(&lim);
    lim.max_body_bytes = 64 * 1024;
    lim.max_header_bytes = 8 * 1024;
    uv_loop_init(&loop);
    if (proto_server_new(&loop, &lim, handler, NULL, &srv) < 0)
        abort();
}

static void drain(int fd)
{
    char buf[65536];
    while (read(fd, buf, sizeof(buf)) > 0)
        ;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int sv[2];
    proto_server_stats st;

    if (!srv)
        setup();
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        abort();
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    if (proto_server_adopt(srv, sv[1], PROTO_TRANSPORT_UNIX) < 0)
        abort();
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(sv[0], data + off, size - off);
        if (w > 0)
            off += (size_t)w;
        else if (w < 0 && errno != EAGAIN)
            break; /* the server closed early (e.g. 413) */
        uv_run(&loop, UV_RUN_NOWAIT);
        drain(sv[0]);
    }
    shutdown(sv[0], SHUT_WR);
    /* The server must end the connection by itself: answered, refused or given up. */
    for (long i = 0;; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        drain(sv[0]);
        proto_server_stats_get(srv, &st);
        if (st.connections_active == 0 && st.requests_active == 0)
            break;
        if (i > 2000000) {
            fprintf(stderr, "fuzz_http: connection never closed\n");
            abort();
        }
    }
    close(sv[0]);
    return 0;
}
