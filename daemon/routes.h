/* daemon/routes.h - the v1 route table, request authorisation and path argument checks.
 *
 * Pure functions (no loop, no I/O) so method/path matching and the bearer-token check are unit
 * tested on their own; daemon/server.c dispatches on the result.
 */
#ifndef HIDET_DAEMON_ROUTES_H
#define HIDET_DAEMON_ROUTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    HD_ROUTE_HEALTHZ = 0,   /* GET /healthz */
    HD_ROUTE_STATUS,        /* GET /v1/status */
    HD_ROUTE_METRICS,       /* GET /metrics */
    HD_ROUTE_KERNELS,       /* POST /v1/kernels */
    HD_ROUTE_KERNEL,        /* GET /v1/kernels/KEY */
    HD_ROUTE_KERNEL_PTX,    /* GET /v1/kernels/KEY/ptx */
    HD_ROUTE_KERNEL_CUBIN,  /* GET /v1/kernels/KEY/cubin */
    HD_ROUTE_SPACES,        /* POST /v1/spaces */
    HD_ROUTE_JOBS,          /* GET /v1/jobs */
    HD_ROUTE_JOB_GET,       /* GET /v1/jobs/ID */
    HD_ROUTE_JOB_DELETE,    /* DELETE /v1/jobs/ID */
    HD_ROUTE_GRAPHS,        /* POST /v1/graphs */
    HD_ROUTE_GRAPH_JOB,     /* GET /v1/graphs/jobs/ID */
    HD_ROUTE_COUNT,
    HD_ROUTE_NONE = -1,
} hd_route_id;

typedef struct hd_route_match {
    int status;          /* 200: matched; 404: no such path; 405: path known, method not */
    hd_route_id id;      /* when status is 200 */
    const char *allow;   /* when status is 405: the Allow header value ("GET, DELETE") */
    const char *arg;     /* KEY or ID (points into path; arg_len bytes) or NULL */
    size_t arg_len;
} hd_route_match;

/* Matches a method ("GET") and a decoded path without query ("/v1/jobs/17"). Always fills *ret.
 * The path segment of a KEY or ID route matches anything without '/'; check it with
 * hd_valid_key() / hd_parse_job_id() (malformed -> 400, not 404). */
void hd_route_find(const char *method, const char *path, hd_route_match *ret);

/* Metric/log label of a route ("/v1/kernels/{key}"), or "other" for HD_ROUTE_NONE. */
const char *hd_route_label(hd_route_id id);

/* Whether s (len bytes) is a well-formed artifact/op key: 64 lowercase hex digits. */
bool hd_valid_key(const char *s, size_t len);
/* Parses a job id (decimal, 1..2^63); returns 0 or -EINVAL. */
int hd_parse_job_id(const char *s, size_t len, uint64_t *ret);

/* Authorisation of one request. When `required` is false (the Unix socket, whose file mode
 * decides who connects; or TCP with tcp_auth = none) every request is allowed. Otherwise the
 * peer must send "Authorization: Bearer <token>" matching `token` (digests compared with
 * sodium_memcmp: the time taken depends neither on the token's content nor its length); with no
 * token configured it is refused (fail closed). Loopback TCP is not trusted: every local user,
 * including those the socket's mode keeps out, reaches 127.0.0.1. `authorization` is the header
 * value or NULL. */
bool hd_auth_allowed(bool required, const char *authorization, const char *token);

/* Who a request comes from, for the tuning queue (sched_request.peer: per-client quotas and fair
 * turns). On the Unix socket (tcp false) its owner as proto_request.owner says ("uid:1000").
 * On TCP the token it authenticated with, as "token:" and 16 hex digits of a digest of the token
 * (never the token itself): every connection with one token, from any address or port, is one
 * client. A TCP request without the configured token (tcp_auth = none) is "tcp:anonymous":
 * every local user reaches loopback and may bind 127.0.0.2 and beyond, so an address names
 * nobody. `authorization` is the header value or NULL, `token` the configured one or NULL.
 * Writes a NUL-terminated string of at most n bytes (64 is enough) to out. */
void hd_client_identity(bool tcp, const char *owner, const char *authorization, const char *token,
                        char *out, size_t n);

/* Whether a TCP request's Host header names this listener, so that a name an attacker controls
 * (DNS rebinding: evil.example resolving to 127.0.0.1 in a browser) is refused. Allowed: no Host
 * at all (HTTP/1.0 tools; browsers always send one), "localhost", a loopback address, the
 * address the client connected to (`local_addr`, as the server printed it), and the names in
 * `allowed` (separated by spaces or commas; may be NULL). A port after the name is ignored;
 * names compare case-insensitively, IPv6 addresses in brackets. */
bool hd_host_allowed(const char *host, const char *local_addr, const char *allowed);

#endif
