/* proto/http.h - the daemon's HTTP/1.1 server: libuv streams + http-parser, one handler for every
 * transport (a Unix socket, TCP on IPv4/IPv6, or a listening fd inherited from systemd).
 *
 * The server owns connections and protocol details: keep-alive, pipelining (a connection's next
 * request is dispatched only after the previous one was answered, so answers leave in order),
 * 100-continue, limits (header bytes -> 431, body bytes -> 413, connections -> 503, a request
 * that arrives too slowly -> 408, an idle keep-alive connection is closed quietly), malformed
 * HTTP -> 400, a version other than HTTP/1.0 and 1.1 -> 505. Every refusal is a JSON error body
 * as in docs/api.md.
 *
 * Fair sharing: Unix and TCP connections are counted apart, each against its own limit, so a TCP
 * flood never takes the Unix socket's slots (which is what keeps /healthz and local clients
 * answering); and one peer - a Unix client's uid (SO_PEERCRED) - may hold only so many of its
 * listener's slots. On TCP an address says nothing (any local user can bind 127.0.0.2, .3, ...),
 * so slots go by identity: a TCP connection is *unauthenticated* until the admission hook calls
 * proto_request_authenticate() for one of its requests (a valid token), and all unauthenticated
 * connections, whatever their address, share one small budget (max_unauthenticated_tcp) with a
 * short header deadline; an authenticated one counts against its identity's share
 * (max_connections_per_peer). When the unauthenticated budget is full, a new connection is still
 * accepted: the oldest unauthenticated connection first has what it already sent read and parsed
 * (a client that sent its request at once - a token holder's fresh connection - is admitted and
 * leaves the budget), and is closed (evicted) only if it is still unauthenticated. The same is
 * done when the TCP listener itself is full while unauthenticated connections hold part of it.
 * So a flood of slow tokenless connections cycles through the budget while token holders get in.
 *
 * The handler gets a proto_request and may answer at once or later (a tuning job finishing
 * seconds later). The request stays valid until it is answered. If the client goes away first,
 * the request's abort callback runs; answering afterwards is still allowed (the answer is
 * discarded and the request freed). A Unix client that hangs up is noticed at once; over TCP a
 * client that closes normally cannot be told from one that only half-closed (shutdown(SHUT_WR))
 * until the answer is written, so there the abort callback runs on a reset or a read error.
 *
 * Everything runs on the loop thread; nothing here logs or blocks. The process must ignore
 * SIGPIPE (writes to a vanished peer would otherwise kill it).
 *
 * Returns: 0 or a negative errno-style code (libuv's UV_E* values are negative errnos on Unix).
 */
#ifndef HIDET_PROTO_HTTP_H
#define HIDET_PROTO_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

typedef struct proto_server proto_server;
typedef struct proto_request proto_request;

typedef enum {
    PROTO_TRANSPORT_UNIX = 0,
    PROTO_TRANSPORT_TCP = 1,
} proto_transport;

typedef struct proto_limits {
    size_t max_header_bytes;     /* request line + headers (default 16 KiB) -> 431 */
    size_t max_body_bytes;       /* default 1 MiB -> 413 (a chunk announcing more: at once) */
    int max_connections_unix;    /* open Unix-socket connections (default 1024) -> 503 */
    int max_connections_tcp;     /* open TCP connections (default 1024) -> 503 */
    int max_connections_per_peer; /* open connections of one peer on one transport (a uid on the
                                  * Unix socket, an authenticated identity on TCP); 0: no limit
                                  * (default) */
    int max_unauthenticated_tcp; /* TCP connections not (yet) authenticated, all addresses
                                  * together (default 64, at most max_connections_tcp); when full,
                                  * the oldest is evicted for a new one */
    uint64_t header_timeout_ms;  /* first byte to complete headers (default 5 s) -> 408; also how
                                  * long a new connection may stay silent (then closed quietly) */
    uint64_t unauthenticated_header_timeout_ms; /* the same for an unauthenticated TCP connection,
                                  * which is also closed after this long idle (default 2 s; 0:
                                  * header_timeout_ms) */
    uint64_t request_timeout_ms; /* first byte to complete body (default 10 s) -> 408 */
    uint64_t idle_timeout_ms;    /* keep-alive wait for the next request (default 60 s) */
} proto_limits;

/* Fills *ret with the defaults above. */
void proto_limits_defaults(proto_limits *ret);

/* A request. The public fields are read-only for the handler (except `data`) and stay valid until
 * the request is answered. Strings are NUL-terminated. */
struct proto_request {
    const char *method;     /* "GET", "POST", ... */
    const char *path;       /* percent-decoded, without the query string; "/" at least */
    const char *query;      /* raw query string without '?', "" when none */
    const char *body;       /* NUL-terminated for convenience; body_len excludes the NUL */
    size_t body_len;
    proto_transport transport;
    bool is_local;          /* Unix socket, or a loopback peer address */
    const char *peer;       /* "unix", "127.0.0.1:5000", "[::1]:5000" */
    const char *owner;      /* who the peer is, for per-client limits and quotas: "uid:1000" (Unix,
                             * SO_PEERCRED; "unix" if unknown), "ip:127.0.0.1", "ip:::1" */
    const char *local_addr; /* TCP: the address the client connected to ("127.0.0.1", "::1");
                             * "" on the Unix socket */
    double arrival_s;       /* wall-clock time (seconds since the epoch) of the first byte */
    uint64_t id;            /* per server, increasing; for logs */
    void *data;             /* free for the handler's use */
    struct proto__req_priv *priv_; /* private */
};

typedef void (*proto_handler_fn)(proto_request *req, void *udata);
/* Runs once per request the server answered or refused (also for protocol errors, where method
 * and path may be ""), when the answer has been handed to the socket or discarded. body_bytes is
 * the answer's body size; duration_s runs from the request's first byte. */
typedef void (*proto_complete_fn)(const proto_request *req, int status, size_t body_bytes,
                                  double duration_s, void *udata);
typedef void (*proto_abort_fn)(proto_request *req, void *udata);

/* What the admission hook refuses a request with (static strings). */
typedef struct proto_refusal {
    int status;          /* 4xx, or 503 (a limit) */
    const char *code;    /* "unauthorized", "forbidden_host", ... */
    const char *message;
} proto_refusal;
/* Runs once per request when its headers are complete: method, path, query, headers, transport,
 * peer and owner are set, the body is not read yet. Returns true to go on; false refuses the
 * request with *ret before any "100 Continue" is sent and before its body is read, and closes the
 * connection after the answer (headers added with proto_request_add_header(), such as
 * WWW-Authenticate, go with it). */
typedef bool (*proto_admit_fn)(proto_request *req, void *udata, proto_refusal *ret);

/* Called by the admission hook when req presented valid credentials: its connection leaves the
 * unauthenticated TCP budget and counts against identity's share instead (max_connections_per_peer;
 * identity is copied, at most 63 bytes are kept). A connection authenticated before stays so.
 * Nothing to do on the Unix socket (a uid is an identity). Returns 0; -EBUSY when identity
 * already holds its share (refuse the request, e.g. 503); -EINVAL on bad arguments. */
int proto_request_authenticate(proto_request *req, const char *identity);

/* Creates a server on loop. limits may be NULL (defaults). The handler runs for every complete,
 * well-formed request. *ret is released by proto_server_close(). */
int proto_server_new(uv_loop_t *loop, const proto_limits *limits, proto_handler_fn handler,
                     void *udata, proto_server **ret);
/* Applies new limits to connections accepted from now on (open ones keep theirs; the
 * unauthenticated budget and the per-identity share are the server's, so they apply at once). */
void proto_server_set_limits(proto_server *srv, const proto_limits *limits);
/* The limits in force (*ret; the unauthenticated budget as applied, at most the TCP limit). */
void proto_server_limits_get(const proto_server *srv, proto_limits *ret);
void proto_server_set_on_complete(proto_server *srv, proto_complete_fn cb, void *udata);
/* Installs the admission hook (NULL: every well-formed request is admitted). */
void proto_server_set_admit(proto_server *srv, proto_admit_fn fn, void *udata);

/* Listens on a Unix socket at path with the given file mode (0 means 0660). If path exists and
 * something answers on it, returns -EADDRINUSE (another hidetd is serving there); a stale socket
 * file from a crash is removed; a path that is not a socket is left alone (-EEXIST). The file is
 * created with its final mode before listen(), and removed when the server closes. */
int proto_server_listen_unix(proto_server *srv, const char *path, int mode);
/* Listens on host:port; host is an IPv4 or IPv6 literal (brackets allowed) or "localhost"
 * (127.0.0.1). port 0 picks a free port (see proto_server_tcp_port()). */
int proto_server_listen_tcp(proto_server *srv, const char *host, int port);
/* Serves an inherited listening socket (systemd socket activation); Unix or TCP is detected with
 * getsockname(). The server owns fd from now on (closes it); the socket file is not removed. */
int proto_server_listen_fd(proto_server *srv, int fd);
/* Serves one already-connected stream socket as a connection (tests, fuzzing, hand-over).
 * transport says how to treat the peer; the server owns fd from now on. */
int proto_server_adopt(proto_server *srv, int fd, proto_transport transport);
/* Port of the first TCP listener, or a negative errno when there is none. */
int proto_server_tcp_port(const proto_server *srv);

/* Stops accepting new connections (listeners close; open connections carry on). */
void proto_server_stop_accepting(proto_server *srv);
/* Graceful close: stops accepting, closes idle and half-read connections, lets in-flight requests
 * be answered (their connections close after the answer), then frees the server and calls
 * done(udata) from the loop. Requests that were aborted but are not yet answered are waited for
 * too. Accepts NULL (then done runs at once if given). */
void proto_server_close(proto_server *srv, void (*done)(void *udata), void *udata);

typedef struct proto_server_stats {
    uint64_t connections_active;
    uint64_t connections_total;
    uint64_t requests_active;    /* dispatched to the handler and not answered yet */
    uint64_t requests_total;     /* dispatched to the handler */
    uint64_t rejected_total;     /* refused by the server itself (400, 408, 413, 431, 503) or
                                  * by the admission hook */
    uint64_t connections_unix, connections_tcp; /* open now, by transport */
    uint64_t connections_refused; /* refused at accept: a transport's or a peer's limit (503) */
    uint64_t connections_tcp_unauthenticated; /* open TCP connections not authenticated (now) */
    uint64_t connections_evicted; /* unauthenticated TCP connections closed to make room */
} proto_server_stats;
void proto_server_stats_get(const proto_server *srv, proto_server_stats *ret);

/* Case-insensitive header lookup; the value of the first header of that name, or NULL. (A
 * request with two Host or two Authorization headers is refused with 400 before any hook.) */
const char *proto_request_header(const proto_request *req, const char *name);
/* Sets the callback run (once) if the client goes away before the request is answered. */
void proto_request_on_abort(proto_request *req, proto_abort_fn cb, void *udata);
/* true once the client went away (the answer will be discarded). */
bool proto_request_aborted(const proto_request *req);
/* Adds a header to the answer ("Allow", "Location", "WWW-Authenticate", ...). Names and values
 * with CR, LF or NUL are refused (-EINVAL); Content-Length, Content-Type and Connection are the
 * server's. Returns 0, -EINVAL or -ENOMEM. */
int proto_request_add_header(proto_request *req, const char *name, const char *value);

/* Answers: copies body (len bytes; may be NULL when len is 0). content_type NULL means
 * "application/json". The request must not be used afterwards (it is freed once written or
 * discarded). Returns 0, or -EINVAL (already answered, bad status), -ENOMEM (then a bare 500 is
 * sent instead). */
int proto_respond(proto_request *req, int status, const char *content_type, const void *body,
                  size_t len);
/* Same with a JSON string (NUL-terminated). */
int proto_respond_json(proto_request *req, int status, const char *json);
/* {"error":{"code","message","field"}} with status. message/field may be NULL. */
int proto_respond_error(proto_request *req, int status, const char *code, const char *message,
                        const char *field);

/* Reason phrase of a status ("Not Found"); "Unknown" for others. Never NULL. */
const char *proto_status_text(int status);

#endif
