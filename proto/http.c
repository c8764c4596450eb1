/* proto/http.c - HTTP/1.1 server on libuv streams with http-parser. See proto/http.h. */
#include "proto/http.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <netinet/in.h>

#include <http_parser.h>

#include "proto/request.h"

#define LISTEN_BACKLOG 511
#define LINGER_MS 2000    /* how long a closing connection drains what the client still sends */
#define MAX_HEADERS 100   /* header lines per request (beyond: 431) */
#define READ_CHUNK 65536

/* ---------------------------------------------------------------------------------------------
 * Small growable buffer */

typedef struct gbuf {
    char *p;
    size_t len, cap;
} gbuf;

/* Appends n bytes and keeps the buffer NUL-terminated. */
static int gbuf_add(gbuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q)
            return -ENOMEM;
        b->p = q;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Types */

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

struct proto__req_priv {
    proto_server *srv;
    conn *conn;          /* NULL once detached (client gone) */
    gbuf method, url, path, query, body;
    gbuf *hname, *hval;  /* header pairs */
    int n_headers, cap_headers;
    bool last_was_value;
    gbuf extra;          /* answer headers added by the handler */
    proto_abort_fn abort_cb;
    void *abort_udata;
    bool answered, aborted, keep_alive, head, dispatched;
    uint64_t start_ns;
};

typedef struct req_full {
    proto_request pub;
    struct proto__req_priv priv;
} req_full;

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
    proto_limits limits;

    http_parser parser;
    char *in;                /* bytes read, not yet parsed: in[in_off..in_len) */
    size_t in_len, in_off, in_cap;
    size_t header_bytes;     /* of the message being parsed */
    bool headers_done;
    int reject_status;       /* set by a parser callback that refuses the message */

    proto_request *cur;      /* being parsed */
    proto_request *active;   /* dispatched, not answered */
    enum timer_mode tmode;
    bool served_one;         /* at least one answer sent (idle timeout applies) */
    bool reading, peer_eof, finishing, lingering, closing, in_process;
    int handles_open;
};

struct proto_server {
    uv_loop_t *loop;
    proto_limits limits;
    proto_handler_fn handler;
    void *udata;
    proto_complete_fn on_complete;
    void *complete_udata;
    listener *listeners;
    int listeners_closing;
    conn *conns;
    proto_server_stats stats;
    uint64_t live_requests; /* allocated and not freed (includes detached ones) */
    uint64_t next_id;
    bool closing, finished;
    void (*close_done)(void *udata);
    void *close_udata;
    uv_timer_t finish_timer;
    char rbuf[READ_CHUNK];
};

typedef struct wreq {
    uv_write_t w;
    conn *c;
    size_t len;
    char data[];
} wreq;

static void process(conn *c);
static void conn_close(conn *c);
static void conn_finish(conn *c);
static void maybe_finish(proto_server *srv);
static void timer_arm(conn *c, enum timer_mode mode, uint64_t ms);

/* ---------------------------------------------------------------------------------------------
 * Misc */

void proto_limits_defaults(proto_limits *ret)
{
    if (!ret)
        return;
    *ret = (proto_limits){
        .max_header_bytes = 16 * 1024,
        .max_body_bytes = 1024 * 1024,
        .max_connections = 1024,
        .request_timeout_ms = 10000,
        .idle_timeout_ms = 60000,
    };
}

const char *proto_status_text(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool has_ctl(const char *s)
{
    for (; *s; s++)
        if (*s == '\r' || *s == '\n')
            return true;
    return false;
}

/* ---------------------------------------------------------------------------------------------
 * Requests */

static proto_request *req_new(conn *c)
{
    req_full *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->pub.priv_ = &r->priv;
    r->priv.srv = c->srv;
    r->priv.conn = c;
    r->priv.start_ns = uv_hrtime();
    r->pub.method = r->pub.path = r->pub.query = r->pub.body = "";
    r->pub.peer = c->peer;
    r->pub.transport = c->transport;
    r->pub.is_local = c->is_local;
    r->pub.arrival_s = wall_now();
    r->pub.id = ++c->srv->next_id;
    c->srv->live_requests++;
    return &r->pub;
}

static void req_free(proto_request *req)
{
    if (!req)
        return;
    struct proto__req_priv *p = req->priv_;
    proto_server *srv = p->srv;
    free(p->method.p);
    free(p->url.p);
    free(p->path.p);
    free(p->query.p);
    free(p->body.p);
    for (int i = 0; i < p->n_headers; i++) {
        free(p->hname[i].p);
        free(p->hval[i].p);
    }
    free(p->hname);
    free(p->hval);
    free(p->extra.p);
    free((req_full *)(void *)req);
    srv->live_requests--;
    maybe_finish(srv);
}

/* Runs the completion hook; safe before req_free. */
static void req_complete(proto_request *req, int status, size_t body_bytes)
{
    proto_server *srv = req->priv_->srv;
    if (srv->on_complete) {
        double dur = (double)(uv_hrtime() - req->priv_->start_ns) / 1e9;
        srv->on_complete(req, status, body_bytes, dur, srv->complete_udata);
    }
}

/* The client went away before the answer: tell the handler once, keep the request until it
 * answers. */
static void req_detach(proto_request *req)
{
    struct proto__req_priv *p = req->priv_;
    p->conn = NULL;
    p->aborted = true;
    if (p->abort_cb) {
        proto_abort_fn cb = p->abort_cb;
        p->abort_cb = NULL;
        cb(req, p->abort_udata);
    }
}

const char *proto_request_header(const proto_request *req, const char *name)
{
    if (!req || !name)
        return NULL;
    const struct proto__req_priv *p = req->priv_;
    for (int i = 0; i < p->n_headers; i++)
        if (p->hname[i].p && strcasecmp(p->hname[i].p, name) == 0)
            return p->hval[i].p ? p->hval[i].p : "";
    return NULL;
}

void proto_request_on_abort(proto_request *req, proto_abort_fn cb, void *udata)
{
    if (!req)
        return;
    req->priv_->abort_cb = cb;
    req->priv_->abort_udata = udata;
}

bool proto_request_aborted(const proto_request *req)
{
    return req && req->priv_->aborted;
}

int proto_request_add_header(proto_request *req, const char *name, const char *value)
{
    static const char *const reserved[] = {"content-length", "content-type", "connection",
                                           "transfer-encoding"};
    if (!req || !name || !value || !name[0] || req->priv_->answered)
        return -EINVAL;
    if (has_ctl(name) || has_ctl(value) || strchr(name, ':') || strchr(name, ' '))
        return -EINVAL;
    for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
        if (strcasecmp(name, reserved[i]) == 0)
            return -EINVAL;
    gbuf *x = &req->priv_->extra;
    if (gbuf_add(x, name, strlen(name)) < 0 || gbuf_add(x, ": ", 2) < 0 ||
        gbuf_add(x, value, strlen(value)) < 0 || gbuf_add(x, "\r\n", 2) < 0)
        return -ENOMEM;
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Writing */

static void write_cb(uv_write_t *w, int status)
{
    wreq *wr = (wreq *)w;
    conn *c = wr->c;
    free(wr);
    if (c->closing)
        return;
    if (status < 0) {
        conn_close(c);
        return;
    }
    process(c);
}

static int conn_write(conn *c, const char *head, size_t hlen, const void *body, size_t blen)
{
    if (c->closing)
        return -EPIPE;
    wreq *wr = malloc(sizeof(*wr) + hlen + blen);
    if (!wr)
        return -ENOMEM;
    wr->c = c;
    wr->len = hlen + blen;
    memcpy(wr->data, head, hlen);
    if (blen)
        memcpy(wr->data + hlen, body, blen);
    uv_buf_t b = uv_buf_init(wr->data, (unsigned)wr->len);
    int r = uv_write(&wr->w, &c->h.stream, &b, 1, write_cb);
    if (r < 0) {
        free(wr);
        return r;
    }
    return 0;
}

/* Formats and queues one answer. */
static int write_answer(conn *c, int status, const char *ctype, const char *extra,
                        const void *body, size_t len, bool head_only, bool close)
{
    char head[512];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: %s\r\n",
                     status, proto_status_text(status), ctype, len, close ? "close" : "keep-alive");
    if (n < 0 || (size_t)n >= sizeof(head))
        return -EINVAL;
    gbuf h = {0};
    int r = gbuf_add(&h, head, (size_t)n);
    if (r == 0 && extra)
        r = gbuf_add(&h, extra, strlen(extra));
    if (r == 0)
        r = gbuf_add(&h, "\r\n", 2);
    if (r == 0)
        r = conn_write(c, h.p, h.len, body, head_only ? 0 : len);
    free(h.p);
    return r;
}

/* The server refuses the message being read (or the connection): a JSON error, then close. */
static void reject(conn *c, int status, const char *code, const char *message)
{
    proto_server *srv = c->srv;
    char *body = proto_error_json(status, code, message, "");
    size_t len = body ? strlen(body) : 0;
    proto_request *req = c->cur;
    c->cur = NULL;
    if (!req)
        req = req_new(c);
    srv->stats.rejected_total++;
    write_answer(c, status, "application/json", NULL, body, len, false, true);
    if (req) {
        req->priv_->answered = true;
        req_complete(req, status, len);
        req_free(req);
    }
    free(body);
    conn_finish(c);
}

int proto_respond(proto_request *req, int status, const char *content_type, const void *body,
                  size_t len)
{
    if (!req || req->priv_->answered || status < 200 || status > 599 || (!body && len > 0))
        return -EINVAL;
    struct proto__req_priv *p = req->priv_;
    proto_server *srv = p->srv;
    conn *c = p->conn;
    int r = 0;
    if (!content_type)
        content_type = "application/json";
    if (has_ctl(content_type))
        return -EINVAL;
    p->answered = true;
    if (p->dispatched)
        srv->stats.requests_active--;
    if (!c) {
        /* Detached: the client is gone; the answer is dropped. */
        req_complete(req, status, 0);
        req_free(req);
        return 0;
    }
    c->active = NULL;
    /* A half-closed client is answered what it already sent; the last answer closes. */
    bool more = c->in_off < c->in_len;
    bool close = !p->keep_alive || srv->closing || (c->peer_eof && !more);
    bool no_body = p->head || status == 204 || status == 304;
    if (status == 204 || status == 304)
        len = 0;
    r = write_answer(c, status, content_type, p->extra.p, body, len, p->head, close);
    if (r == -ENOMEM) {
        static const char oom[] = "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n"
                                  "Connection: close\r\n\r\n";
        conn_write(c, oom, sizeof(oom) - 1, NULL, 0);
        close = true;
        status = 500;
        len = 0;
    }
    req_complete(req, status, no_body ? 0 : len);
    req_free(req);
    if (r < 0 && r != -ENOMEM) {
        conn_close(c);
        return r;
    }
    /* With keep-alive, the write callback goes on with the next request; until then the idle
     * timeout also bounds a client that does not read its answer. */
    if (close)
        conn_finish(c);
    else if (!c->cur)
        timer_arm(c, T_WAIT, c->limits.idle_timeout_ms);
    return r == -ENOMEM ? -ENOMEM : 0;
}

int proto_respond_json(proto_request *req, int status, const char *json)
{
    if (!json)
        return -EINVAL;
    return proto_respond(req, status, "application/json", json, strlen(json));
}

int proto_respond_error(proto_request *req, int status, const char *code, const char *message,
                        const char *field)
{
    if (!req)
        return -EINVAL;
    char *body = proto_error_json(status, code, message, field);
    if (!body) {
        proto_respond(req, 500, "application/json", NULL, 0);
        return -ENOMEM;
    }
    int r = proto_respond_json(req, status, body);
    free(body);
    return r;
}

/* ---------------------------------------------------------------------------------------------
 * Connections */

static void on_timer(uv_timer_t *t);

static void timer_arm(conn *c, enum timer_mode mode, uint64_t ms)
{
    c->tmode = mode;
    if (mode == T_NONE) {
        uv_timer_stop(&c->timer);
        return;
    }
    uv_timer_start(&c->timer, on_timer, ms, 0);
}

static void on_timer(uv_timer_t *t)
{
    conn *c = t->data;
    enum timer_mode m = c->tmode;
    c->tmode = T_NONE;
    switch (m) {
    case T_REQUEST:
        if (c->cur) {
            reject(c, 408, "timeout", "the request was not received in time");
            return;
        }
        conn_close(c);
        return;
    case T_WAIT:
    case T_LINGER:
        conn_close(c);
        return;
    default:
        return;
    }
}

static void handle_closed(uv_handle_t *h)
{
    conn *c = h->data;
    if (--c->handles_open > 0)
        return;
    proto_server *srv = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    srv->stats.connections_active--;
    free(c->in);
    free(c);
    maybe_finish(srv);
}

/* Closes at once. An unanswered dispatched request is detached (its abort callback runs). */
static void conn_close(conn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    if (c->active) {
        proto_request *req = c->active;
        c->active = NULL;
        req_detach(req);
    }
    if (c->cur) {
        req_free(c->cur);
        c->cur = NULL;
    }
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, handle_closed);
    uv_close(&c->h.handle, handle_closed);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    conn *c = h->data;
    /* One buffer per server is enough: libuv calls on_read right after each on_alloc. */
    *buf = uv_buf_init(c->srv->rbuf, sizeof(c->srv->rbuf));
}

static void read_start(conn *c)
{
    if (c->reading || c->peer_eof || c->closing)
        return;
    if (uv_read_start(&c->h.stream, on_alloc, on_read) == 0)
        c->reading = true;
}

static void read_stop(conn *c)
{
    if (!c->reading)
        return;
    uv_read_stop(&c->h.stream);
    c->reading = false;
}

static void shutdown_cb(uv_shutdown_t *sr, int status)
{
    conn *c = sr->data;
    if (c->closing)
        return;
    if (status < 0 || c->peer_eof) {
        conn_close(c);
        return;
    }
    /* Drain what the client still sends for a moment, so that closing with unread input does
     * not reset the connection before the client has read the answer. */
    c->lingering = true;
    timer_arm(c, T_LINGER, LINGER_MS);
    read_start(c);
}

/* Ends the connection after the queued writes: shutdown, linger, close. */
static void conn_finish(conn *c)
{
    if (c->closing || c->finishing)
        return;
    c->finishing = true;
    /* The shutdown waits for queued writes; a client that never reads must not hold the
     * connection (and the answer's memory) forever. */
    timer_arm(c, T_LINGER, c->limits.idle_timeout_ms);
    c->shutdown_req.data = c;
    if (uv_shutdown(&c->shutdown_req, &c->h.stream, shutdown_cb) < 0)
        conn_close(c);
}

/* Whether a Unix peer hung up completely (not just shut down its writing side). */
static bool unix_peer_gone(conn *c)
{
    uv_os_fd_t fd;
    if (uv_fileno(&c->h.handle, &fd) < 0)
        return true;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    if (poll(&pfd, 1, 0) < 0)
        return false;
    return (pfd.revents & (POLLHUP | POLLERR)) != 0;
}

static int in_append(conn *c, const char *data, size_t n)
{
    if (c->in_off > 0 && c->in_off == c->in_len)
        c->in_off = c->in_len = 0;
    if (c->in_len + n > c->in_cap) {
        if (c->in_off > 0) {
            memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
            c->in_len -= c->in_off;
            c->in_off = 0;
        }
        if (c->in_len + n > c->in_cap) {
            size_t cap = c->in_cap ? c->in_cap : 4096;
            while (cap < c->in_len + n)
                cap *= 2;
            char *q = realloc(c->in, cap);
            if (!q)
                return -ENOMEM;
            c->in = q;
            c->in_cap = cap;
        }
    }
    memcpy(c->in + c->in_len, data, n);
    c->in_len += n;
    return 0;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    conn *c = s->data;
    if (c->closing)
        return;
    if (nread == 0)
        return;
    if (nread < 0) {
        c->reading = false;
        if (nread != UV_EOF || c->lingering) {
            conn_close(c);
            return;
        }
        c->peer_eof = true;
        if (c->active) {
            /* A half-closed client still gets its answer; one that hung up does not need it. */
            if (c->transport == PROTO_TRANSPORT_UNIX && unix_peer_gone(c))
                conn_close(c);
            return;
        }
        process(c);
        return;
    }
    /* A closing connection parses nothing more; what arrives is dropped, not buffered. */
    if (c->lingering || c->finishing)
        return;
    if (in_append(c, buf->base, (size_t)nread) < 0) {
        conn_close(c);
        return;
    }
    /* Back-pressure: while a request is being answered, buffer at most one more request's worth
     * of pipelined input. */
    if (c->active &&
        c->in_len - c->in_off > c->limits.max_header_bytes + c->limits.max_body_bytes + READ_CHUNK)
        read_stop(c);
    process(c);
}

/* ---------------------------------------------------------------------------------------------
 * Parsing */

static int cb_message_begin(http_parser *hp)
{
    conn *c = hp->data;
    if (c->cur) /* cannot happen: the parser pauses after each message */
        req_free(c->cur);
    c->cur = req_new(c);
    c->header_bytes = 0;
    c->headers_done = false;
    if (!c->cur) {
        c->reject_status = 500;
        return -1;
    }
    timer_arm(c, T_REQUEST, c->limits.request_timeout_ms);
    return 0;
}

static int count_header_bytes(conn *c, size_t n)
{
    c->header_bytes += n;
    if (c->header_bytes > c->limits.max_header_bytes) {
        c->reject_status = 431;
        return -1;
    }
    return 0;
}

static int add_or_fail(conn *c, gbuf *b, const char *at, size_t n)
{
    if (gbuf_add(b, at, n) < 0) {
        c->reject_status = 500;
        return -1;
    }
    return 0;
}

static int cb_url(http_parser *hp, const char *at, size_t n)
{
    conn *c = hp->data;
    if (count_header_bytes(c, n) < 0)
        return -1;
    return add_or_fail(c, &c->cur->priv_->url, at, n);
}

static int cb_header_field(http_parser *hp, const char *at, size_t n)
{
    conn *c = hp->data;
    struct proto__req_priv *p = c->cur->priv_;
    if (count_header_bytes(c, n) < 0)
        return -1;
    if (p->n_headers == 0 || p->last_was_value) {
        if (p->n_headers >= MAX_HEADERS) {
            c->reject_status = 431;
            return -1;
        }
        if (p->n_headers == p->cap_headers) {
            int cap = p->cap_headers ? p->cap_headers * 2 : 16;
            gbuf *nn = realloc(p->hname, sizeof(gbuf) * (size_t)cap);
            if (nn)
                p->hname = nn;
            gbuf *nv = nn ? realloc(p->hval, sizeof(gbuf) * (size_t)cap) : NULL;
            if (!nn || !nv) {
                c->reject_status = 500;
                return -1;
            }
            p->hval = nv;
            p->cap_headers = cap;
        }
        p->hname[p->n_headers] = (gbuf){0};
        p->hval[p->n_headers] = (gbuf){0};
        p->n_headers++;
        p->last_was_value = false;
        /* ": " and CRLF of the line count toward the limit too. */
        if (count_header_bytes(c, 4) < 0)
            return -1;
    }
    return add_or_fail(c, &p->hname[p->n_headers - 1], at, n);
}

static int cb_header_value(http_parser *hp, const char *at, size_t n)
{
    conn *c = hp->data;
    struct proto__req_priv *p = c->cur->priv_;
    if (count_header_bytes(c, n) < 0)
        return -1;
    p->last_was_value = true;
    if (p->n_headers == 0)
        return 0;
    return add_or_fail(c, &p->hval[p->n_headers - 1], at, n);
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Percent-decodes a path. A NUL byte or a broken escape makes the request malformed. */
static int decode_path(const char *s, size_t n, gbuf *out)
{
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '%') {
            if (i + 2 >= n)
                return -EINVAL;
            int hi = hexval(s[i + 1]), lo = hexval(s[i + 2]);
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
                return -EINVAL;
            ch = (char)(hi * 16 + lo);
            i += 2;
        }
        if (gbuf_add(out, &ch, 1) < 0)
            return -ENOMEM;
    }
    return 0;
}

static int cb_headers_complete(http_parser *hp)
{
    conn *c = hp->data;
    proto_request *req = c->cur;
    struct proto__req_priv *p = req->priv_;
    struct http_parser_url u;

    c->headers_done = true;
    if (hp->http_major != 1) {
        c->reject_status = 505;
        return -1;
    }
    const char *m = http_method_str((enum http_method)hp->method);
    if (gbuf_add(&p->method, m, strlen(m)) < 0 || gbuf_add(&p->path, "", 0) < 0 ||
        gbuf_add(&p->query, "", 0) < 0) {
        c->reject_status = 500;
        return -1;
    }
    http_parser_url_init(&u);
    if (!p->url.p || http_parser_parse_url(p->url.p, p->url.len, hp->method == HTTP_CONNECT, &u)) {
        c->reject_status = 400;
        return -1;
    }
    if (u.field_set & (1 << UF_PATH)) {
        int r = decode_path(p->url.p + u.field_data[UF_PATH].off, u.field_data[UF_PATH].len,
                            &p->path);
        if (r < 0) {
            c->reject_status = r == -ENOMEM ? 500 : 400;
            return -1;
        }
    }
    if (p->path.len == 0 && gbuf_add(&p->path, "/", 1) < 0) {
        c->reject_status = 500;
        return -1;
    }
    if ((u.field_set & (1 << UF_QUERY)) &&
        gbuf_add(&p->query, p->url.p + u.field_data[UF_QUERY].off,
                 u.field_data[UF_QUERY].len) < 0) {
        c->reject_status = 500;
        return -1;
    }
    if (hp->content_length != ULLONG_MAX && hp->content_length > c->limits.max_body_bytes) {
        c->reject_status = 413;
        return -1;
    }
    req->method = p->method.p;
    req->path = p->path.p;
    req->query = p->query.p;
    p->head = hp->method == HTTP_HEAD;

    const char *expect = proto_request_header(req, "Expect");
    if (expect && strcasecmp(expect, "100-continue") == 0 && hp->http_minor >= 1) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (conn_write(c, cont, sizeof(cont) - 1, NULL, 0) < 0) {
            c->reject_status = 500;
            return -1;
        }
    }
    return 0;
}

static int cb_body(http_parser *hp, const char *at, size_t n)
{
    conn *c = hp->data;
    struct proto__req_priv *p = c->cur->priv_;
    if (p->body.len + n > c->limits.max_body_bytes) {
        c->reject_status = 413;
        return -1;
    }
    return add_or_fail(c, &p->body, at, n);
}

static int cb_message_complete(http_parser *hp)
{
    conn *c = hp->data;
    proto_request *req = c->cur;
    struct proto__req_priv *p = req->priv_;
    if (gbuf_add(&p->body, "", 0) < 0) {
        c->reject_status = 500;
        return -1;
    }
    req->body = p->body.p;
    req->body_len = p->body.len;
    /* An upgrade (or CONNECT) is not served: answer it, then close instead of switching. */
    p->keep_alive = http_should_keep_alive(hp) && !hp->upgrade;
    /* Stop after this message: the next one is parsed only once this one is answered. */
    http_parser_pause(hp, 1);
    return 0;
}

static const http_parser_settings parser_settings = {
    .on_message_begin = cb_message_begin,
    .on_url = cb_url,
    .on_header_field = cb_header_field,
    .on_header_value = cb_header_value,
    .on_headers_complete = cb_headers_complete,
    .on_body = cb_body,
    .on_message_complete = cb_message_complete,
};

static void dispatch(conn *c)
{
    proto_server *srv = c->srv;
    proto_request *req = c->cur;
    c->cur = NULL;
    timer_arm(c, T_NONE, 0);
    c->active = req;
    c->served_one = true;
    req->priv_->dispatched = true;
    srv->stats.requests_total++;
    srv->stats.requests_active++;
    srv->handler(req, srv->udata);
}

static void reject_parse_error(conn *c, enum http_errno err)
{
    char msg[160];
    switch (c->reject_status) {
    case 413:
        snprintf(msg, sizeof(msg), "the request body exceeds %zu bytes", c->limits.max_body_bytes);
        reject(c, 413, "body_too_large", msg);
        return;
    case 431:
        snprintf(msg, sizeof(msg), "the request line and headers exceed %zu bytes",
                 c->limits.max_header_bytes);
        reject(c, 431, "limit_exceeded", msg);
        return;
    case 505:
        reject(c, 505, "invalid_field", "only HTTP/1.0 and HTTP/1.1 are served");
        return;
    case 500:
        reject(c, 500, "internal", "out of memory");
        return;
    case 400:
        reject(c, 400, "invalid_field", "malformed request target");
        return;
    default:
        snprintf(msg, sizeof(msg), "malformed HTTP request: %s", http_errno_description(err));
        reject(c, 400, "invalid_field", msg);
        return;
    }
}

/* Feeds buffered input to the parser and dispatches at most one request at a time. */
static void process(conn *c)
{
    proto_server *srv = c->srv;
    if (c->in_process)
        return;
    c->in_process = true;
    while (!c->closing && !c->finishing && !c->active) {
        if (srv->closing && !c->cur) {
            /* Shutting down: what was answered is sent, nothing new starts. */
            conn_finish(c);
            break;
        }
        if (c->in_off == c->in_len) {
            c->in_off = c->in_len = 0;
            if (c->peer_eof) {
                /* Half-closed: everything it sent was answered (or it gave up mid-request). */
                if (c->cur) {
                    req_free(c->cur);
                    c->cur = NULL;
                }
                conn_finish(c);
                break;
            }
            if (!c->cur && c->tmode != T_WAIT)
                timer_arm(c, T_WAIT,
                          c->served_one ? c->limits.idle_timeout_ms : c->limits.request_timeout_ms);
            read_start(c);
            break;
        }
        size_t avail = c->in_len - c->in_off;
        size_t n = http_parser_execute(&c->parser, &parser_settings, c->in + c->in_off, avail);
        c->in_off += n;
        enum http_errno err = HTTP_PARSER_ERRNO(&c->parser);
        if (err == HPE_PAUSED) {
            http_parser_pause(&c->parser, 0);
            dispatch(c);
            continue;
        }
        if (err != HPE_OK || n != avail) {
            reject_parse_error(c, err);
            break;
        }
    }
    c->in_process = false;
}

/* ---------------------------------------------------------------------------------------------
 * Accepting */

static conn *conn_new(proto_server *srv, proto_transport t)
{
    conn *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->srv = srv;
    c->transport = t;
    c->limits = srv->limits;
    int r = t == PROTO_TRANSPORT_UNIX ? uv_pipe_init(srv->loop, &c->h.pipe, 0)
                                      : uv_tcp_init(srv->loop, &c->h.tcp);
    if (r < 0) {
        free(c);
        return NULL;
    }
    uv_timer_init(srv->loop, &c->timer);
    c->h.handle.data = c;
    c->timer.data = c;
    c->handles_open = 2;
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    srv->stats.connections_active++;
    srv->stats.connections_total++;
    return c;
}

static void conn_peer(conn *c)
{
    if (c->transport == PROTO_TRANSPORT_UNIX) {
        snprintf(c->peer, sizeof(c->peer), "unix");
        c->is_local = true;
        return;
    }
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    char ip[INET6_ADDRSTRLEN] = "?";
    snprintf(c->peer, sizeof(c->peer), "?");
    uv_tcp_nodelay(&c->h.tcp, 1);
    if (uv_tcp_getpeername(&c->h.tcp, (struct sockaddr *)&ss, &len) < 0)
        return;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        uv_ip4_name(a, ip, sizeof(ip));
        snprintf(c->peer, sizeof(c->peer), "%s:%d", ip, ntohs(a->sin_port));
        c->is_local = (ntohl(a->sin_addr.s_addr) >> 24) == 127;
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        const uint8_t *b = a->sin6_addr.s6_addr;
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        uv_ip6_name(a, ip, sizeof(ip));
        snprintf(c->peer, sizeof(c->peer), "[%s]:%d", ip, ntohs(a->sin6_port));
        c->is_local = IN6_IS_ADDR_LOOPBACK(&a->sin6_addr) ||
                      (memcmp(b, mapped, sizeof(mapped)) == 0 && b[12] == 127);
    }
}

static void conn_start(conn *c)
{
    proto_server *srv = c->srv;
    conn_peer(c);
    if (srv->stats.connections_active > (uint64_t)(c->limits.max_connections > 0
                                                       ? c->limits.max_connections : 0)) {
        reject(c, 503, "limit_exceeded", "too many open connections; retry later");
        return;
    }
    timer_arm(c, T_WAIT, c->limits.request_timeout_ms);
    read_start(c);
}

static void on_connection(uv_stream_t *server, int status)
{
    listener *l = server->data;
    proto_server *srv = l->srv;
    if (status < 0 || srv->closing)
        return;
    conn *c = conn_new(srv, l->transport);
    if (!c)
        return;
    if (uv_accept(server, &c->h.stream) < 0) {
        conn_close(c);
        return;
    }
    conn_start(c);
}

int proto_server_adopt(proto_server *srv, int fd, proto_transport transport)
{
    if (!srv || fd < 0 || srv->closing)
        return -EINVAL;
    conn *c = conn_new(srv, transport);
    if (!c)
        return -ENOMEM;
    int r = transport == PROTO_TRANSPORT_UNIX ? uv_pipe_open(&c->h.pipe, fd)
                                              : uv_tcp_open(&c->h.tcp, fd);
    if (r < 0) {
        conn_close(c);
        return r;
    }
    conn_start(c);
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Listening */

static void listener_closed(uv_handle_t *h)
{
    listener *l = h->data;
    proto_server *srv = l->srv;
    free(l->unlink_path);
    free(l);
    srv->listeners_closing--;
    maybe_finish(srv);
}

static void listener_discard(listener *l)
{
    l->srv->listeners_closing++;
    uv_close(&l->h.handle, listener_closed);
}

static listener *listener_alloc(proto_server *srv, proto_transport t)
{
    listener *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->srv = srv;
    l->transport = t;
    l->h.handle.data = l;
    return l;
}

static int listener_start(listener *l)
{
    proto_server *srv = l->srv;
    l->h.handle.data = l;
    int r = uv_listen(&l->h.stream, LISTEN_BACKLOG, on_connection);
    if (r < 0)
        return r;
    l->next = srv->listeners;
    srv->listeners = l;
    return 0;
}

int proto_server_listen_unix(proto_server *srv, const char *path, int mode)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct stat st;
    listener *l = NULL;
    int fd = -1, r;
    bool bound = false;

    if (!srv || !path || !path[0] || srv->closing || mode < 0 || mode > 07777)
        return -EINVAL;
    if (strlen(path) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    if (mode == 0)
        mode = 0660;

    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return -EEXIST;
        /* Non-blocking: a busy server with a full backlog must not stall our start-up. */
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (probe < 0)
            return -errno;
        r = connect(probe, (struct sockaddr *)&sa, sizeof(sa));
        int err = errno;
        close(probe);
        if (r == 0 || err == EAGAIN)
            return -EADDRINUSE; /* another server answers there */
        if (err != ECONNREFUSED && err != ENOENT)
            return -err;
        /* Stale: the file of a server that died without removing it. */
        if (err == ECONNREFUSED && unlink(path) < 0 && errno != ENOENT)
            return -errno;
    }

    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        r = -errno;
        goto fail;
    }
    bound = true;
    /* Before listen() nobody can connect, so the mode is final before the first client. */
    if (chmod(path, (mode_t)mode) < 0) {
        r = -errno;
        goto fail;
    }
    l = listener_alloc(srv, PROTO_TRANSPORT_UNIX);
    if (!l) {
        r = -ENOMEM;
        goto fail;
    }
    l->unlink_path = strdup(path);
    if (!l->unlink_path || uv_pipe_init(srv->loop, &l->h.pipe, 0) < 0) {
        free(l->unlink_path);
        free(l);
        l = NULL;
        r = -ENOMEM;
        goto fail;
    }
    l->h.handle.data = l;
    if ((r = uv_pipe_open(&l->h.pipe, fd)) < 0) {
        listener_discard(l);
        l = NULL;
        goto fail;
    }
    fd = -1; /* owned by the handle now */
    if ((r = listener_start(l)) < 0) {
        listener_discard(l);
        l = NULL;
        unlink(path);
        return r;
    }
    return 0;
fail:
    if (fd >= 0)
        close(fd);
    if (bound)
        unlink(path);
    return r;
}

int proto_server_listen_tcp(proto_server *srv, const char *host, int port)
{
    struct sockaddr_storage ss;
    char h[INET6_ADDRSTRLEN + 16];
    int r;

    if (!srv || !host || port < 0 || port > 65535 || srv->closing)
        return -EINVAL;
    if (strcmp(host, "localhost") == 0)
        host = "127.0.0.1";
    size_t n = strlen(host);
    if (n >= sizeof(h))
        return -EINVAL;
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        memcpy(h, host + 1, n - 2);
        h[n - 2] = '\0';
    } else {
        memcpy(h, host, n + 1);
    }
    bool v6;
    if (uv_ip4_addr(h, port, (struct sockaddr_in *)&ss) == 0)
        v6 = false;
    else if (strchr(h, ':') && uv_ip6_addr(h, port, (struct sockaddr_in6 *)&ss) == 0)
        v6 = true;
    else
        return -EINVAL;

    listener *l = listener_alloc(srv, PROTO_TRANSPORT_TCP);
    if (!l)
        return -ENOMEM;
    if ((r = uv_tcp_init_ex(srv->loop, &l->h.tcp, v6 ? AF_INET6 : AF_INET)) < 0) {
        free(l);
        return r;
    }
    l->h.handle.data = l;
    if ((r = uv_tcp_bind(&l->h.tcp, (struct sockaddr *)&ss, v6 ? UV_TCP_IPV6ONLY : 0)) < 0 ||
        (r = listener_start(l)) < 0) {
        listener_discard(l);
        return r;
    }
    return 0;
}

int proto_server_listen_fd(proto_server *srv, int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    int r;
    if (!srv || fd < 0 || srv->closing)
        return -EINVAL;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        return -errno;
    proto_transport t;
    if (ss.ss_family == AF_UNIX)
        t = PROTO_TRANSPORT_UNIX;
    else if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6)
        t = PROTO_TRANSPORT_TCP;
    else
        return -EAFNOSUPPORT;
    listener *l = listener_alloc(srv, t);
    if (!l)
        return -ENOMEM;
    r = t == PROTO_TRANSPORT_UNIX ? uv_pipe_init(srv->loop, &l->h.pipe, 0)
                                  : uv_tcp_init(srv->loop, &l->h.tcp);
    if (r < 0) {
        free(l);
        return r;
    }
    l->h.handle.data = l;
    r = t == PROTO_TRANSPORT_UNIX ? uv_pipe_open(&l->h.pipe, fd) : uv_tcp_open(&l->h.tcp, fd);
    if (r < 0 || (r = listener_start(l)) < 0) {
        listener_discard(l);
        return r;
    }
    return 0;
}

int proto_server_tcp_port(const proto_server *srv)
{
    if (!srv)
        return -EINVAL;
    for (const listener *l = srv->listeners; l; l = l->next) {
        if (l->transport != PROTO_TRANSPORT_TCP)
            continue;
        struct sockaddr_storage ss;
        int len = sizeof(ss);
        if (uv_tcp_getsockname(&l->h.tcp, (struct sockaddr *)&ss, &len) < 0)
            continue;
        if (ss.ss_family == AF_INET)
            return ntohs(((struct sockaddr_in *)&ss)->sin_port);
        if (ss.ss_family == AF_INET6)
            return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    return -ENOENT;
}

/* ---------------------------------------------------------------------------------------------
 * Server lifecycle */

int proto_server_new(uv_loop_t *loop, const proto_limits *limits, proto_handler_fn handler,
                     void *udata, proto_server **ret)
{
    if (!loop || !handler || !ret)
        return -EINVAL;
    proto_server *srv = calloc(1, sizeof(*srv));
    if (!srv)
        return -ENOMEM;
    srv->loop = loop;
    if (limits)
        srv->limits = *limits;
    else
        proto_limits_defaults(&srv->limits);
    srv->handler = handler;
    srv->udata = udata;
    uv_timer_init(loop, &srv->finish_timer);
    srv->finish_timer.data = srv;
    *ret = srv;
    return 0;
}

void proto_server_set_limits(proto_server *srv, const proto_limits *limits)
{
    if (srv && limits)
        srv->limits = *limits;
}

void proto_server_set_on_complete(proto_server *srv, proto_complete_fn cb, void *udata)
{
    if (!srv)
        return;
    srv->on_complete = cb;
    srv->complete_udata = udata;
}

void proto_server_stop_accepting(proto_server *srv)
{
    if (!srv)
        return;
    while (srv->listeners) {
        listener *l = srv->listeners;
        srv->listeners = l->next;
        /* Remove the file now so a successor can bind while we drain. */
        if (l->unlink_path)
            unlink(l->unlink_path);
        listener_discard(l);
    }
}

static void finish_closed(uv_handle_t *h)
{
    proto_server *srv = h->data;
    void (*done)(void *) = srv->close_done;
    void *ud = srv->close_udata;
    free(srv);
    if (done)
        done(ud);
}

static void finish_timer_cb(uv_timer_t *t)
{
    uv_close((uv_handle_t *)t, finish_closed);
}

static void maybe_finish(proto_server *srv)
{
    if (!srv->closing || srv->finished)
        return;
    if (srv->listeners || srv->listeners_closing || srv->conns || srv->live_requests)
        return;
    srv->finished = true;
    /* Deferred to the loop so the caller (often deep in a callback) is never pulled out from
     * under itself. */
    uv_timer_start(&srv->finish_timer, finish_timer_cb, 0, 0);
}

void proto_server_close(proto_server *srv, void (*done)(void *udata), void *udata)
{
    if (!srv) {
        if (done)
            done(udata);
        return;
    }
    if (srv->closing)
        return;
    srv->closing = true;
    srv->close_done = done;
    srv->close_udata = udata;
    proto_server_stop_accepting(srv);
    for (conn *c = srv->conns; c; c = c->next) {
        if (c->active || c->closing || c->finishing)
            continue; /* an in-flight request closes its connection once answered */
        if (uv_stream_get_write_queue_size(&c->h.stream) > 0)
            conn_finish(c);
        else
            conn_close(c);
    }
    maybe_finish(srv);
}

void proto_server_stats_get(const proto_server *srv, proto_server_stats *ret)
{
    if (srv && ret)
        *ret = srv->stats;
}
