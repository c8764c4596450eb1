/* proto/http_listen.c - the HTTP/1.1 server's listening side: Unix sockets (with the stale
 * socket check), TCP, sockets inherited from systemd, accepting connections and the cap on open
 * ones, and the server's life cycle (creation, limits, graceful close, statistics). See
 * proto/http.h; what happens on a connection is in proto/http.c.
 */
#include "proto/http.h"
#include "proto/http_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#include <netinet/in.h>

#define LISTEN_BACKLOG 511

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

/* Who the peer is: its printable address, its owner (for per-client limits and the scheduler's
 * quotas) and a key that says which connections belong to the same peer. */
static void conn_peer(conn *c)
{
    memset(c->peer_key, 0, sizeof(c->peer_key));
    c->peer_key[0] = (unsigned char)c->transport;
    c->local_addr[0] = '\0';
    if (c->transport == PROTO_TRANSPORT_UNIX) {
        snprintf(c->peer, sizeof(c->peer), "unix");
        snprintf(c->owner, sizeof(c->owner), "unix");
        c->is_local = true;
        uv_os_fd_t fd;
        struct ucred cred;
        socklen_t len = sizeof(cred);
        /* The socket's file mode decides who may connect; the uid decides whose share of the
         * slots and of the job queue a connection uses. */
        if (uv_fileno(&c->h.handle, &fd) == 0 &&
            getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
            snprintf(c->owner, sizeof(c->owner), "uid:%u", (unsigned)cred.uid);
            memcpy(c->peer_key + 1, &cred.uid, sizeof(cred.uid));
        }
        return;
    }
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    char ip[INET6_ADDRSTRLEN] = "?";
    snprintf(c->peer, sizeof(c->peer), "?");
    snprintf(c->owner, sizeof(c->owner), "ip:?");
    uv_tcp_nodelay(&c->h.tcp, 1);
    if (uv_tcp_getsockname(&c->h.tcp, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET)
            uv_ip4_name((const struct sockaddr_in *)&ss, c->local_addr, sizeof(c->local_addr));
        else if (ss.ss_family == AF_INET6)
            uv_ip6_name((const struct sockaddr_in6 *)&ss, c->local_addr, sizeof(c->local_addr));
    }
    len = sizeof(ss);
    if (uv_tcp_getpeername(&c->h.tcp, (struct sockaddr *)&ss, &len) < 0)
        return;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        uv_ip4_name(a, ip, sizeof(ip));
        snprintf(c->peer, sizeof(c->peer), "%s:%d", ip, ntohs(a->sin_port));
        c->is_local = (ntohl(a->sin_addr.s_addr) >> 24) == 127;
        memcpy(c->peer_key + 1, &a->sin_addr, sizeof(a->sin_addr));
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        const uint8_t *b = a->sin6_addr.s6_addr;
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        uv_ip6_name(a, ip, sizeof(ip));
        snprintf(c->peer, sizeof(c->peer), "[%s]:%d", ip, ntohs(a->sin6_port));
        c->is_local = IN6_IS_ADDR_LOOPBACK(&a->sin6_addr) ||
                      (memcmp(b, mapped, sizeof(mapped)) == 0 && b[12] == 127);
        memcpy(c->peer_key + 1, b, 16);
    } else {
        return;
    }
    snprintf(c->owner, sizeof(c->owner), "ip:%s", ip);
}

/* Open connections counted against the limits: those accepted, not those refused at the door
 * (they leave at once and must not crowd out anyone). */
uint64_t *proto__transport_count(proto_server *srv, proto_transport t)
{
    return t == PROTO_TRANSPORT_UNIX ? &srv->stats.connections_unix : &srv->stats.connections_tcp;
}

static int peer_count(const proto_server *srv, const conn *c)
{
    int n = 0;
    for (const conn *o = srv->conns; o; o = o->next)
        if (o->counted && memcmp(o->peer_key, c->peer_key, sizeof(c->peer_key)) == 0)
            n++;
    return n;
}

static void conn_refuse(conn *c, const char *message)
{
    c->srv->stats.connections_refused++;
    /* Nothing was read, so there is nothing to drain: close right after the answer. */
    c->no_linger = true;
    proto__reject(c, 503, "limit_exceeded", message);
}

/* ---------------------------------------------------------------------------------------------
 * The unauthenticated TCP budget: one list for every address, oldest first */

static void pool_add(conn *c)
{
    proto_server *srv = c->srv;
    c->in_pool = true;
    c->pool_next = NULL;
    c->pool_prev = srv->pool_tail;
    if (srv->pool_tail)
        srv->pool_tail->pool_next = c;
    else
        srv->pool_head = c;
    srv->pool_tail = c;
    srv->stats.connections_tcp_unauthenticated++;
}

void proto__pool_remove(conn *c)
{
    if (!c->in_pool)
        return;
    proto_server *srv = c->srv;
    if (c->pool_prev)
        c->pool_prev->pool_next = c->pool_next;
    else
        srv->pool_head = c->pool_next;
    if (c->pool_next)
        c->pool_next->pool_prev = c->pool_prev;
    else
        srv->pool_tail = c->pool_prev;
    c->pool_prev = c->pool_next = NULL;
    c->in_pool = false;
    srv->stats.connections_tcp_unauthenticated--;
}

/* The budget's size: never more than the TCP listener's own limit. */
static uint64_t pool_cap(const proto_server *srv)
{
    int n = srv->limits.max_unauthenticated_tcp, t = srv->limits.max_connections_tcp;
    if (t > 0 && (n <= 0 || n > t))
        n = t;
    return n > 0 ? (uint64_t)n : 1;
}

/* Makes room for one more TCP connection, in a full budget or on a full listener (cap, 0: none)
 * while tokenless connections take part of it. The oldest connection first gets what it already
 * sent read and parsed: a client that wrote its request right after connecting (a token holder's
 * fresh connection) is admitted now and leaves the budget by itself. Only one that is still
 * unauthenticated after that - slow, silent, refused, or idle after /healthz - is closed. A flood
 * of new connections thus evicts only connections that had their chance, however many arrive in
 * one burst, and never waits for a deadline to let anyone in. Each turn takes the head out of
 * the budget, so this ends. */
static void pool_make_room(proto_server *srv, int cap)
{
    while (srv->pool_head && (srv->stats.connections_tcp_unauthenticated >= pool_cap(srv) ||
                              (cap > 0 && srv->stats.connections_tcp >= (uint64_t)cap))) {
        conn *o = srv->pool_head;
        proto__conn_read_now(o);
        if (o->in_pool && o == srv->pool_head) {
            srv->stats.connections_evicted++;
            proto__conn_close(o); /* leaves the budget */
        }
    }
}

static void conn_start(conn *c)
{
    proto_server *srv = c->srv;
    conn_peer(c);
    int cap = c->transport == PROTO_TRANSPORT_UNIX ? c->limits.max_connections_unix
                                                   : c->limits.max_connections_tcp;
    uint64_t *count = proto__transport_count(srv, c->transport);
    if (c->transport == PROTO_TRANSPORT_TCP)
        pool_make_room(srv, cap);
    if (cap > 0 && *count >= (uint64_t)cap) {
        conn_refuse(c, c->transport == PROTO_TRANSPORT_UNIX
                           ? "too many open connections on the Unix socket; retry later"
                           : "too many open TCP connections; retry later");
        return;
    }
    /* On TCP the share goes by identity, once the client has shown one (a token): see
     * proto_request_authenticate(). Until then the connection is in the unauthenticated budget,
     * whatever its address. */
    if (c->transport == PROTO_TRANSPORT_UNIX && c->limits.max_connections_per_peer > 0 &&
        peer_count(srv, c) >= c->limits.max_connections_per_peer) {
        conn_refuse(c, "too many open connections from this client; retry later");
        return;
    }
    if (c->transport == PROTO_TRANSPORT_TCP)
        pool_add(c);
    c->counted = true;
    (*count)++;
    proto__timer_arm(c, T_WAIT, proto__header_deadline(c));
    proto__read_start(c);
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
        proto__conn_close(c);
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
        proto__conn_close(c);
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
    proto__maybe_finish(srv);
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

void proto_server_limits_get(const proto_server *srv, proto_limits *ret)
{
    if (!srv || !ret)
        return;
    *ret = srv->limits;
    ret->max_unauthenticated_tcp = (int)pool_cap(srv);
}

void proto_server_set_admit(proto_server *srv, proto_admit_fn fn, void *udata)
{
    if (!srv)
        return;
    srv->admit = fn;
    srv->admit_udata = udata;
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

void proto__maybe_finish(proto_server *srv)
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
            proto__conn_finish(c);
        else
            proto__conn_close(c);
    }
    proto__maybe_finish(srv);
}

void proto_server_stats_get(const proto_server *srv, proto_server_stats *ret)
{
    if (srv && ret)
        *ret = srv->stats;
}
