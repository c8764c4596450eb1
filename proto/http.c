/* proto/http.c - the HTTP/1.1 server's connection side, on libuv streams with http-parser:
 * reading and parsing, request objects, answers, pipelining, keep-alive and timeouts. See
 * proto/http.h; sockets, accepting and the server's life cycle are in proto/http_listen.c.
 */
#include "proto/http.h"
#include "proto/http_int.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include <http_parser.h>

#include "proto/request.h"

#define LINGER_MS 2000    /* how long a closing connection drains what the client still sends */
#define MAX_HEADERS 100   /* header lines per request (beyond: 431) */

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
    uint64_t start_ms;   /* loop time of the first byte (for the request deadline) */
};

typedef struct req_full {
    proto_request pub;
    struct proto__req_priv priv;
} req_full;

typedef struct wreq {
    uv_write_t w;
    conn *c;
    size_t len;
    char data[];
} wreq;

static void process(conn *c);

/* ---------------------------------------------------------------------------------------------
 * Misc */

void proto_limits_defaults(proto_limits *ret)
{
    if (!ret)
        return;
    *ret = (proto_limits){
        .max_header_bytes = 16 * 1024,
        .max_body_bytes = 1024 * 1024,
        .max_connections_unix = 1024,
        .max_connections_tcp = 1024,
        .max_connections_per_peer = 0,
        .max_unauthenticated_tcp = 64,
        .header_timeout_ms = 5000,
        .unauthenticated_header_timeout_ms = 2000,
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
    r->pub.owner = c->owner;
    r->pub.local_addr = c->local_addr;
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
    proto__maybe_finish(srv);
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

int proto_request_authenticate(proto_request *req, const char *identity)
{
    if (!req || !identity)
        return -EINVAL;
    conn *c = req->priv_->conn;
    if (!c)
        return -EINVAL;
    if (c->transport != PROTO_TRANSPORT_TCP || c->authenticated)
        return 0;
    proto_server *srv = c->srv;
    int cap = srv->limits.max_connections_per_peer;
    if (cap > 0) {
        int n = 0;
        for (const conn *o = srv->conns; o; o = o->next)
            if (o->counted && o->authenticated && strncmp(o->identity, identity,
                                                          sizeof(o->identity) - 1) == 0)
                n++;
        if (n >= cap)
            return -EBUSY;
    }
    snprintf(c->identity, sizeof(c->identity), "%s", identity);
    c->authenticated = true;
    proto__pool_remove(c);
    return 0;
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
        proto__conn_close(c);
        return;
    }
    process(c);
}

/* Queues HEAD, then BODY, then TAIL (a few bytes the answer adds after the caller's body). */
static int conn_write_tail(conn *c, const char *head, size_t hlen, const void *body, size_t blen,
                           const char *tail, size_t tlen)
{
    if (c->closing)
        return -EPIPE;
    wreq *wr = malloc(sizeof(*wr) + hlen + blen + tlen);
    if (!wr)
        return -ENOMEM;
    wr->c = c;
    wr->len = hlen + blen + tlen;
    memcpy(wr->data, head, hlen);
    if (blen)
        memcpy(wr->data + hlen, body, blen);
    if (tlen)
        memcpy(wr->data + hlen + blen, tail, tlen);
    uv_buf_t b = uv_buf_init(wr->data, (unsigned)wr->len);
    int r = uv_write(&wr->w, &c->h.stream, &b, 1, write_cb);
    if (r < 0) {
        free(wr);
        return r;
    }
    return 0;
}

static int conn_write(conn *c, const char *head, size_t hlen, const void *body, size_t blen)
{
    return conn_write_tail(c, head, hlen, body, blen, NULL, 0);
}

/* Formats and queues one answer. A JSON body gets a final newline when it lacks one: every JSON
 * answer is then a complete line, so `curl` at a shell prompt and line-based tools (jq -c, grep,
 * log collectors) see one record per line. Callers keep passing cJSON's unterminated text. */
static int write_answer(conn *c, int status, const char *ctype, const char *extra,
                        const void *body, size_t len, bool head_only, bool close)
{
    size_t nl = len > 0 && strcmp(ctype, "application/json") == 0 &&
                ((const char *)body)[len - 1] != '\n';
    len += nl;
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
        r = conn_write_tail(c, h.p, h.len, body, head_only ? 0 : len - nl, "\n", head_only ? 0 : nl);
    free(h.p);
    return r;
}

/* The server refuses the message being read (or the connection): a JSON error naming field
 * ("" when none), then close. */
static void reject_field(conn *c, int status, const char *code, const char *message,
                         const char *field)
{
    proto_server *srv = c->srv;
    char *body = proto_error_json(status, code, message, field);
    size_t len = body ? strlen(body) : 0;
    proto_request *req = c->cur;
    c->cur = NULL;
    if (!req)
        req = req_new(c);
    srv->stats.rejected_total++;
    write_answer(c, status, "application/json", req ? req->priv_->extra.p : NULL, body, len, false,
                 true);
    if (req) {
        req->priv_->answered = true;
        req_complete(req, status, len);
        req_free(req);
    }
    free(body);
    proto__conn_finish(c);
}

void proto__reject(conn *c, int status, const char *code, const char *message)
{
    reject_field(c, status, code, message, "");
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
        proto__conn_close(c);
        return r;
    }
    /* With keep-alive, the write callback goes on with the next request; until then the idle
     * timeout also bounds a client that does not read its answer. */
    if (close)
        proto__conn_finish(c);
    else if (!c->cur)
        proto__timer_arm(c, T_WAIT, proto__idle_deadline(c));
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

void proto__timer_arm(conn *c, enum timer_mode mode, uint64_t ms)
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
            proto__reject(c, 408, "timeout", "the request was not received in time");
            return;
        }
        proto__conn_close(c);
        return;
    case T_WAIT:
    case T_LINGER:
        proto__conn_close(c);
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
    proto__maybe_finish(srv);
}

/* Closes at once. An unanswered dispatched request is detached (its abort callback runs). */
void proto__conn_close(conn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    /* uv_close() closes the descriptor at once (only the handle's memory waits for the
     * callback), so the slot is given back now: a burst of evictions must not count against
     * the listener's limit until the loop gets round to the close callbacks. */
    proto__pool_remove(c);
    if (c->counted) {
        (*proto__transport_count(c->srv, c->transport))--;
        c->counted = false;
    }
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

void proto__read_start(conn *c)
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
    if (status < 0 || c->peer_eof || c->no_linger) {
        proto__conn_close(c);
        return;
    }
    /* Drain what the client still sends for a moment, so that closing with unread input does
     * not reset the connection before the client has read the answer. */
    c->lingering = true;
    proto__timer_arm(c, T_LINGER, LINGER_MS);
    proto__read_start(c);
}

/* Ends the connection after the queued writes: shutdown, linger, close. */
void proto__conn_finish(conn *c)
{
    if (c->closing || c->finishing)
        return;
    c->finishing = true;
    /* The shutdown waits for queued writes; a client that never reads must not hold the
     * connection (and the answer's memory) forever. */
    proto__timer_arm(c, T_LINGER, c->limits.idle_timeout_ms);
    c->shutdown_req.data = c;
    if (uv_shutdown(&c->shutdown_req, &c->h.stream, shutdown_cb) < 0)
        proto__conn_close(c);
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

/* What the read callback does with nread bytes at data (or an error / UV_EOF). */
static void conn_input(conn *c, ssize_t nread, const char *data)
{
    if (c->closing)
        return;
    if (nread == 0)
        return;
    if (nread < 0) {
        c->reading = false;
        if (nread != UV_EOF || c->lingering) {
            proto__conn_close(c);
            return;
        }
        c->peer_eof = true;
        if (c->active) {
            /* A half-closed client still gets its answer; one that hung up does not need it. */
            if (c->transport == PROTO_TRANSPORT_UNIX && unix_peer_gone(c))
                proto__conn_close(c);
            return;
        }
        process(c);
        return;
    }
    /* A closing connection parses nothing more; what arrives is dropped, not buffered. */
    if (c->lingering || c->finishing)
        return;
    if (in_append(c, data, (size_t)nread) < 0) {
        proto__conn_close(c);
        return;
    }
    /* Back-pressure: while a request is being answered, buffer at most one more request's worth
     * of pipelined input. */
    if (c->active &&
        c->in_len - c->in_off > c->limits.max_header_bytes + c->limits.max_body_bytes + READ_CHUNK)
        read_stop(c);
    process(c);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    conn_input(s->data, nread, buf->base);
}

void proto__conn_read_now(conn *c)
{
    uv_os_fd_t fd;
    if (!c->reading || c->closing || c->finishing || c->lingering || c->active || c->in_process ||
        uv_fileno(&c->h.handle, &fd) < 0)
        return;
    /* Reading the descriptor behind libuv's back is safe: libuv polls level-triggered and takes
     * EAGAIN on its next read as "nothing yet". The server's read buffer is free here: this runs
     * from the accept callback, never inside a read callback. At most the header limit is read,
     * which is all a request needs to be admitted. */
    size_t total = 0;
    while (!c->closing && !c->finishing && !c->active && total <= c->limits.max_header_bytes) {
        ssize_t n = recv(fd, c->srv->rbuf, sizeof(c->srv->rbuf), MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                proto__conn_close(c);
            return;
        }
        if (n == 0) {
            /* Libuv must not report this end of file a second time. */
            read_stop(c);
            conn_input(c, UV_EOF, NULL);
            return;
        }
        total += (size_t)n;
        conn_input(c, n, c->srv->rbuf);
        if ((size_t)n < sizeof(c->srv->rbuf))
            return;
    }
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
    c->dup_header = NULL;
    if (!c->cur) {
        c->reject_status = 500;
        return -1;
    }
    /* The header deadline first: a client that is refused (or never admitted) gives its slot
     * back that soon. The rest of the request timeout applies once the headers are in. */
    c->cur->priv_->start_ms = uv_now(c->srv->loop);
    proto__timer_arm(c, T_REQUEST, proto__header_deadline(c));
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

/* The first header that a request may carry only once and carries more often, or NULL. Two Host
 * headers (RFC 9112: 400) or two Authorization headers let different readers see different
 * values - the admission hook the first, a proxy in front the last - so both are refused. */
static const char *duplicate_header(const struct proto__req_priv *p)
{
    static const char *const once[] = {"Host", "Authorization"};
    for (size_t k = 0; k < sizeof(once) / sizeof(once[0]); k++) {
        int n = 0;
        for (int i = 0; i < p->n_headers; i++)
            if (p->hname[i].p && strcasecmp(p->hname[i].p, once[k]) == 0 && ++n > 1)
                return once[k];
    }
    return NULL;
}

static int cb_headers_complete(http_parser *hp)
{
    conn *c = hp->data;
    proto_request *req = c->cur;
    struct proto__req_priv *p = req->priv_;
    struct http_parser_url u;

    c->headers_done = true;
    /* http-parser takes any single-digit version; only 1.0 and 1.1 are HTTP/1.x as served. */
    if (hp->http_major != 1 || hp->http_minor > 1) {
        c->reject_status = 505;
        return -1;
    }
    if ((c->dup_header = duplicate_header(p))) {
        c->reject_status = 400;
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

    /* Before anything invites the body ("100 Continue") or waits for it. */
    proto_server *srv = c->srv;
    if (srv->admit) {
        proto_refusal ref = {0};
        if (!srv->admit(req, srv->admit_udata, &ref)) {
            c->refusal = ref;
            c->reject_status = -1;
            return -1;
        }
    }
    /* The headers made it in time: the body gets what is left of the request timeout. */
    uint64_t spent = uv_now(srv->loop) - p->start_ms;
    uint64_t total = c->limits.request_timeout_ms;
    if (c->tmode == T_REQUEST && total > proto__header_deadline(c))
        proto__timer_arm(c, T_REQUEST, spent < total ? total - spent : 1);

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

/* A chunk announces its size before its data: one past the body limit is refused now, not after
 * the client was made to send (and we to buffer) what cannot be accepted. */
static int cb_chunk_header(http_parser *hp)
{
    conn *c = hp->data;
    const struct proto__req_priv *p = c->cur->priv_;
    if (hp->content_length > c->limits.max_body_bytes - p->body.len) {
        c->reject_status = 413;
        return -1;
    }
    return 0;
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
    .on_chunk_header = cb_chunk_header,
    .on_message_complete = cb_message_complete,
};

static void dispatch(conn *c)
{
    proto_server *srv = c->srv;
    proto_request *req = c->cur;
    c->cur = NULL;
    proto__timer_arm(c, T_NONE, 0);
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
    case -1: {
        const proto_refusal *f = &c->refusal;
        int st = (f->status >= 400 && f->status <= 499) || f->status == 503 ? f->status : 403;
        proto__reject(c, st, f->code ? f->code : "forbidden",
                      f->message ? f->message : "this request is not allowed");
        return;
    }
    case 413:
        snprintf(msg, sizeof(msg), "the request body exceeds %zu bytes", c->limits.max_body_bytes);
        proto__reject(c, 413, "body_too_large", msg);
        return;
    case 431:
        snprintf(msg, sizeof(msg), "the request line and headers exceed %zu bytes",
                 c->limits.max_header_bytes);
        proto__reject(c, 431, "limit_exceeded", msg);
        return;
    case 505:
        proto__reject(c, 505, "invalid_field", "only HTTP/1.0 and HTTP/1.1 are served");
        return;
    case 500:
        proto__reject(c, 500, "internal", "out of memory");
        return;
    case 400:
        if (c->dup_header) {
            snprintf(msg, sizeof(msg), "the %s header appears more than once", c->dup_header);
            reject_field(c, 400, "invalid_field", msg, c->dup_header);
            return;
        }
        proto__reject(c, 400, "invalid_field", "malformed request target");
        return;
    default:
        snprintf(msg, sizeof(msg), "malformed HTTP request: %s", http_errno_description(err));
        proto__reject(c, 400, "invalid_field", msg);
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
            proto__conn_finish(c);
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
                proto__conn_finish(c);
                break;
            }
            if (!c->cur && c->tmode != T_WAIT)
                proto__timer_arm(c, T_WAIT,
                          c->served_one ? proto__idle_deadline(c) : proto__header_deadline(c));
            proto__read_start(c);
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
