/* proto/http_int.h - what the two halves of the HTTP server share, internal to proto/: the
 * connection and server structures and the few functions one half calls in the other.
 *
 * proto/http.c is the connection side (reading, http-parser callbacks, request objects, answers,
 * pipelining, keep-alive, timeouts); proto/http_listen.c is the listening side (Unix, TCP and
 * inherited sockets, accepting, the connection cap, the server's life cycle and statistics).
 * Everything runs on the loop thread.
 */
#ifndef HIDET_PROTO_HTTP_INT_H
#define HIDET_PROTO_HTTP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include <http_parser.h>

#include "proto/http.h"

#define READ_CHUNK 65536

typedef union stream_u {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
} stream_u;

typedef struct listener {
    stream_u h;
    proto_server *srv;
    proto_transport transport;
    char *unlink_path; /* a socket file we created */
    struct listener *next;
} listener;

typedef struct conn conn;

enum timer_mode { T_NONE = 0, T_WAIT, T_REQUEST, T_LINGER };

struct conn {
    stream_u h;
    uv_timer_t timer;
    uv_shutdown_t shutdown_req;
    proto_server *srv;
    conn *prev, *next;
    proto_transport transport;
    bool is_local;
    char peer[64];
    char owner[64];          /* proto_request.owner */
    char local_addr[48];     /* proto_request.local_addr */
    unsigned char peer_key[17]; /* transport + uid or address bytes: who counts as one peer */
    proto_limits limits;

    http_parser parser;
    char *in;                /* bytes read, not yet parsed: in[in_off..in_len) */
    size_t in_len, in_off, in_cap;
    size_t header_bytes;     /* of the message being parsed */
    bool headers_done;
    int reject_status;       /* set by a parser callback that refuses the message */
    proto_refusal refusal;   /* the admission hook's, when reject_status is -1 */
    const char *dup_header;  /* a header given twice ("Host", ...), when reject_status is 400 */

    proto_request *cur;      /* being parsed */
    proto_request *active;   /* dispatched, not answered */
    enum timer_mode tmode;
    bool served_one;         /* at least one answer sent (idle timeout applies) */
    bool reading, peer_eof, finishing, lingering, closing, in_process;
    bool counted;            /* counted against its transport's and peer's limits */
    bool authenticated;      /* TCP: proto_request_authenticate() was called (identity set) */
    bool in_pool;            /* TCP: in the unauthenticated budget (srv->pool_*) */
    conn *pool_prev, *pool_next; /* that budget's list, oldest first */
    char identity[64];       /* TCP, authenticated: whose share it counts against */
    bool no_linger;          /* close right after the last answer is written */
    int handles_open;
};

struct proto_server {
    uv_loop_t *loop;
    proto_limits limits;
    proto_handler_fn handler;
    void *udata;
    proto_complete_fn on_complete;
    void *complete_udata;
    proto_admit_fn admit;
    void *admit_udata;
    listener *listeners;
    int listeners_closing;
    conn *conns;
    conn *pool_head, *pool_tail; /* unauthenticated TCP connections, oldest first */
    proto_server_stats stats;
    uint64_t live_requests; /* allocated and not freed (includes detached ones) */
    uint64_t next_id;
    bool closing, finished;
    void (*close_done)(void *udata);
    void *close_udata;
    uv_timer_t finish_timer;
    char rbuf[READ_CHUNK];
};

/* Connection side (proto/http.c). */

/* Closes the connection at once; an unanswered dispatched request is detached (its abort
 * callback runs). */
void proto__conn_close(conn *c);
/* Ends the connection after the queued writes: shutdown, linger, close. */
void proto__conn_finish(conn *c);
/* Sets the connection's one timer to mode (T_NONE stops it), firing after ms. */
void proto__timer_arm(conn *c, enum timer_mode mode, uint64_t ms);
/* Starts reading unless the connection already reads, saw EOF or is closing. */
void proto__read_start(conn *c);
/* Reads, without waiting, what the client already sent and parses it (as the read callback
 * would), so that a connection about to be evicted gets its complete request admitted first.
 * Does nothing unless the connection is reading and idle or mid-headers. */
void proto__conn_read_now(conn *c);
/* Refuses the message being read (or the connection) with a JSON error, then finishes the
 * connection. */
void proto__reject(conn *c, int status, const char *code, const char *message);

/* Whether c is a TCP connection that has not authenticated (the short deadlines apply). */
static inline bool proto__unauthenticated(const conn *c)
{
    return c->transport == PROTO_TRANSPORT_TCP && !c->authenticated;
}

/* The header deadline: header_timeout_ms, never past the request timeout (0: that timeout);
 * for an unauthenticated TCP connection, unauthenticated_header_timeout_ms if shorter. */
static inline uint64_t proto__header_deadline(const conn *c)
{
    uint64_t h = c->limits.header_timeout_ms;
    h = h && h < c->limits.request_timeout_ms ? h : c->limits.request_timeout_ms;
    uint64_t u = c->limits.unauthenticated_header_timeout_ms;
    return proto__unauthenticated(c) && u && u < h ? u : h;
}

/* How long a connection may wait idle for its next request: idle_timeout_ms, or for an
 * unauthenticated TCP connection no longer than its header deadline (it holds a slot of the
 * small shared budget and has nothing in flight). */
static inline uint64_t proto__idle_deadline(const conn *c)
{
    uint64_t i = c->limits.idle_timeout_ms, h = proto__header_deadline(c);
    return proto__unauthenticated(c) && h < i ? h : i;
}

/* Listening side (proto/http_listen.c). */

/* The transport's count of open, counted connections (proto_server_stats). */
uint64_t *proto__transport_count(proto_server *srv, proto_transport t);
/* Frees a closing server once nothing is left (listeners, connections, live requests). */
void proto__maybe_finish(proto_server *srv);
/* Takes c out of the unauthenticated budget (no-op when it is not in it). */
void proto__pool_remove(conn *c);

#endif
