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

/* Authorisation of one request. Local peers (the Unix socket, loopback TCP) are always allowed:
 * the socket's mode and the host's own users guard them. Other TCP peers must send
 * "Authorization: Bearer <token>" matching `token` (compared in constant time with respect to
 * the token's content); with no token configured they are refused (fail closed).
 * `authorization` is the header value or NULL. */
bool hd_auth_allowed(bool peer_local, const char *authorization, const char *token);

#endif
