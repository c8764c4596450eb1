/* cluster/ct_redis.c - the cluster tier's Redis connections and its resolve_remote functions
 * (ct.h): hiredis' asynchronous API on the daemon's libuv loop (hiredis' own libuv adapter),
 * timeouts on connecting and on every command, reconnects with backoff. Two connections, each
 * with its own connect, timeouts and backoff: the command connection, and the subscriber that
 * carries the completion messages waiting nodes are woken by. */
#include "cluster/ct.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <sodium.h>

typedef enum { CT__CALL_SETUP = 0, CT__CALL_GET, CT__CALL_SET, CT__CALL_LEASE } ct__call_kind;

typedef struct ct__claim ct__claim;
typedef struct ct__conn ct__conn;

/* One command sent to Redis. hiredis calls its callback exactly once (with a NULL reply when
 * the connection goes first), and that callback frees it. Pending calls are kept oldest first:
 * Redis answers in order, so the oldest is the one a timeout looks at. */
typedef struct ct__call {
    ct_tier *t;
    ct__conn *conn;
    struct ct__call *prev, *next;
    ct__call_kind kind;
    bool last_setup;        /* the reply that makes the tier "up" */
    char op_key[KC_KEY_LEN + 1];
    resolve_remote_done done;
    void *arg;
    ct__claim *claim;       /* a claim's command: its reply moves the claim on */
    uint64_t sent_ns;
} ct__call;

/* A request waiting to learn whether to tune an op (ct.h: tune once per fleet). Its timer paces
 * the polls; the claim is freed when the timer has closed. */
struct ct__claim {
    ct_tier *t;
    struct ct__claim *prev, *next;
    char op_key[KC_KEY_LEN + 1];
    resolve_remote_done done;
    void *arg;
    uv_timer_t timer;
    uint64_t deadline_ns;
    bool waited;
    bool in_flight; /* a command of the claim waits for its reply (else: its timer runs) */
    bool woken;     /* a completion message came while in flight: look again at once */
    bool entry_bad; /* the op's entry in Redis was rejected: claim the lease alone (this node
                       tunes the op for the fleet; the pinned bad entry stays until a retune) */
};

/* One connection to Redis. The command connection and the subscriber connect, time out and
 * back off each on its own: a subscriber that cannot subscribe never stops lookups, and the
 * reverse. */
struct ct__conn {
    ct_tier *t;
    bool sub;               /* the subscriber: PSUBSCRIBE, then nothing but messages */
    const char *what;       /* how messages name it */
    redisAsyncContext *ac;  /* NULL while down */
    ct_state state;
    uint64_t connect_started_ns;
    double backoff_s;
    uv_timer_t retry;       /* the next connect attempt */
    uv_getaddrinfo_t gai;
    bool gai_active;
    ct__call *head, *tail;  /* commands waiting for their reply, oldest first */
};

struct ct_tier {
    uv_loop_t *loop;
    ct_url url;
    char prefix[64];
    double ttl_s, timeout_s, backoff_min_s, backoff_max_s;
    bool has_sign;
    kc_sign_secret sign;
    kc_sign_public *trusted;
    size_t n_trusted;
    void (*on_event)(void *udata, ct_event ev, const char *msg);
    void (*on_latency)(void *udata, double seconds);
    void *udata;

    bool closed;
    ct__conn cmd;           /* every command */
    ct__conn sub;           /* completion messages (publishing nodes only: they alone wait) */
    char pattern[160];      /* the subscriber's PSUBSCRIBE pattern */
    uv_timer_t watchdog;    /* timeouts of the connects and of the oldest pending commands */
    ct__claim *claims;      /* claims waiting (on a command or their timer) */
    double lease_s, lease_wait_s;
    uint64_t lease_poll_ms; /* the fallback poll of a waiting claim while the subscriber is up */
    uv_timer_t renew;       /* renews the leases held */
    char (*held)[KC_KEY_LEN + 1]; /* op keys this node holds a lease on */
    size_t n_held, cap_held;
    int refs;               /* open handles and requests in flight; freed at 0 once closed */
    ct_stats st;
};

static void conn_connect(ct__conn *cn);
static void claims_on_subscriber(ct_tier *t, bool up);

const char *ct_state_name(ct_state s)
{
    static const char *const names[] = {"connecting", "up", "down", "closed"};
    return (unsigned)s < 4 ? names[s] : "unknown";
}

static void tier_event(ct_tier *t, ct_event ev, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void tier_event(ct_tier *t, ct_event ev, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (ev == CT_EVENT_DOWN || ev == CT_EVENT_ERROR)
        snprintf(t->st.last_error, sizeof(t->st.last_error), "%.255s", msg);
    if (t->on_event)
        t->on_event(t->udata, ev, msg);
}

static void tier_unref(ct_tier *t)
{
    if (--t->refs > 0)
        return;
    free(t->trusted);
    free(t->held);
    kc_sign_secret_wipe(&t->sign);
    sodium_memzero(t->url.password, sizeof(t->url.password));
    free(t);
}

static void handle_closed(uv_handle_t *h)
{
    tier_unref(h->data);
}

/* A connection's retry timer points at its connection, not at the tier. */
static void retry_closed(uv_handle_t *h)
{
    ct__conn *cn = h->data;
    tier_unref(cn->t);
}

static void call_link(ct__conn *cn, ct__call *c)
{
    c->prev = cn->tail;
    c->next = NULL;
    if (cn->tail)
        cn->tail->next = c;
    else
        cn->head = c;
    cn->tail = c;
}

static void call_unlink(ct__call *c)
{
    ct__conn *cn = c->conn;
    if (c->prev)
        c->prev->next = c->next;
    else
        cn->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        cn->tail = c->prev;
    c->prev = c->next = NULL;
}

/* Sends a command built by hiredis from argv on cn; c is linked and owned by the reply callback
 * from then on. Returns 0 or -EIO (c not sent: the caller still owns it). */
static int conn_send(ct__conn *cn, ct__call *c, redisCallbackFn *fn, int argc, const char **argv,
                     const size_t *argvlen)
{
    c->t = cn->t;
    c->conn = cn;
    c->sent_ns = uv_hrtime();
    if (!cn->ac || redisAsyncCommandArgv(cn->ac, fn, c, argc, argv, argvlen) != REDIS_OK)
        return -EIO;
    call_link(cn, c);
    return 0;
}

/* A command on the command connection. */
static int call_send(ct_tier *t, ct__call *c, redisCallbackFn *fn, int argc, const char **argv,
                     const size_t *argvlen)
{
    return conn_send(&t->cmd, c, fn, argc, argv, argvlen);
}

static void on_retry(uv_timer_t *h)
{
    conn_connect(h->data);
}

/* The connection is gone (or never came): try again after the backoff. A subscriber going down
 * puts waiting claims back on the short poll (their messages may be lost now). */
static void schedule_reconnect(ct__conn *cn)
{
    ct_tier *t = cn->t;
    if (t->closed)
        return;
    bool was_up = cn->state == CT_STATE_UP;
    cn->state = CT_STATE_DOWN;
    /* +-20% jitter so that a fleet that lost Redis together does not come back in lock step. */
    double d = cn->backoff_s * (0.8 + 0.4 * (double)randombytes_uniform(1001) / 1000.0);
    uv_timer_start(&cn->retry, on_retry, (uint64_t)(d * 1000.0) + 1, 0);
    cn->backoff_s = cn->backoff_s * 2 > t->backoff_max_s ? t->backoff_max_s : cn->backoff_s * 2;
    if (cn->sub && was_up)
        claims_on_subscriber(t, false);
}

/* Drops the connection now: hiredis answers every pending command with a NULL reply (their
 * callers get a miss) before this returns. Never call it inside a hiredis callback (there,
 * redisAsyncDisconnect). */
static void drop_connection(ct__conn *cn, const char *why)
{
    ct_tier *t = cn->t;
    redisAsyncContext *ac = cn->ac;
    if (!ac)
        return;
    cn->ac = NULL;
    t->st.errors++;
    tier_event(t, CT_EVENT_DOWN, "%s %s: %s; reconnecting with backoff", cn->what, t->st.url,
               why);
    redisAsyncFree(ac);
    schedule_reconnect(cn);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    ct__conn *cn = ac->data;
    if (!cn || cn->ac != ac)
        return; /* dropped by us already */
    ct_tier *t = cn->t;
    cn->ac = NULL;
    if (t->closed)
        return;
    t->st.errors++;
    tier_event(t, CT_EVENT_DOWN, "%s %s: connection lost%s%s; reconnecting with backoff",
               cn->what, t->st.url, status == REDIS_OK ? "" : ": ",
               status == REDIS_OK ? "" : ac->errstr);
    schedule_reconnect(cn);
}

static void observe(ct_tier *t, const ct__call *c)
{
    if (t->on_latency)
        t->on_latency(t->udata, (double)(uv_hrtime() - c->sent_ns) / 1e9);
}

/* The connection is ready: the command connection's PING, or the subscriber's PSUBSCRIBE, was
 * answered. */
static void conn_up(ct__conn *cn)
{
    ct_tier *t = cn->t;
    cn->state = CT_STATE_UP;
    cn->backoff_s = t->backoff_min_s;
    t->st.last_error[0] = '\0';
    if (cn->sub) {
        t->st.sub_connects++;
        tier_event(t, CT_EVENT_CONNECTED, "%s %s: subscribed to %s", cn->what, t->st.url,
                   t->pattern);
        claims_on_subscriber(t, true);
    } else {
        t->st.connects++;
        tier_event(t, CT_EVENT_CONNECTED, "%s %s: connected", cn->what, t->st.url);
    }
}

static void on_setup_reply(redisAsyncContext *ac, void *r, void *priv)
{
    ct__call *c = priv;
    ct__conn *cn = c->conn;
    ct_tier *t = c->t;
    redisReply *reply = r;
    call_unlink(c);
    bool last = c->last_setup;
    free(c);
    if (!reply || t->closed || ac != cn->ac)
        return;
    if (reply->type == REDIS_REPLY_ERROR) {
        /* AUTH or SELECT refused: the server is there but will not serve us; retry later (the
         * operator may be fixing its ACL). */
        t->st.errors++;
        tier_event(t, CT_EVENT_ERROR, "%s %s: setup refused: %.200s", cn->what, t->st.url,
                   reply->str);
        redisAsyncDisconnect(ac);
        return;
    }
    if (last)
        conn_up(cn);
}

static int send_setup(ct__conn *cn, int argc, const char **argv, bool last)
{
    ct__call *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->kind = CT__CALL_SETUP;
    c->last_setup = last;
    int r = conn_send(cn, c, on_setup_reply, argc, argv, NULL);
    if (r < 0)
        free(c);
    return r;
}

static void on_sub_message(redisAsyncContext *ac, void *r, void *priv);

static void on_connect(const redisAsyncContext *cac, int status)
{
    redisAsyncContext *ac = (redisAsyncContext *)cac;
    ct__conn *cn = ac->data;
    if (!cn || cn->ac != ac)
        return;
    ct_tier *t = cn->t;
    if (status != REDIS_OK) {
        /* hiredis frees the context after this callback. */
        cn->ac = NULL;
        t->st.errors++;
        tier_event(t, CT_EVENT_DOWN, "%s %s: cannot connect: %s; retrying with backoff",
                   cn->what, t->st.url, ac->errstr);
        schedule_reconnect(cn);
        return;
    }
    /* Authenticate and select the database before anything else goes out (hiredis sends in
     * order), then a PING whose answer marks the connection up; the subscriber subscribes
     * instead, and the confirmation marks it up (on_sub_message). */
    char db[16];
    snprintf(db, sizeof(db), "%d", t->url.db);
    int r = 0;
    if (t->url.password[0] && t->url.user[0])
        r = send_setup(cn, 3, (const char *[]){"AUTH", t->url.user, t->url.password}, false);
    else if (t->url.password[0])
        r = send_setup(cn, 2, (const char *[]){"AUTH", t->url.password}, false);
    if (r == 0 && t->url.db)
        r = send_setup(cn, 2, (const char *[]){"SELECT", db}, false);
    if (r == 0 && !cn->sub)
        r = send_setup(cn, 1, (const char *[]){"PING"}, true);
    if (r == 0 && cn->sub &&
        redisAsyncCommandArgv(ac, on_sub_message, cn, 2,
                              (const char *[]){"PSUBSCRIBE", t->pattern}, NULL) != REDIS_OK)
        r = -EIO;
    if (r < 0)
        redisAsyncDisconnect(ac);
}

static void start_context(ct__conn *cn, redisAsyncContext *ac)
{
    ct_tier *t = cn->t;
    if (!ac || ac->err || redisLibuvAttach(ac, t->loop) != REDIS_OK) {
        t->st.errors++;
        tier_event(t, CT_EVENT_DOWN, "%s %s: cannot connect: %s; retrying with backoff",
                   cn->what, t->st.url, ac && ac->err ? ac->errstr : "out of memory");
        if (ac)
            redisAsyncFree(ac);
        schedule_reconnect(cn);
        return;
    }
    /* The subscriber sends nothing after subscribing, so no command timeout notices a peer
     * that vanished without closing: TCP keepalive does (the fallback poll covers the gap). */
    if (cn->sub && !t->url.unix_socket)
        (void)redisEnableKeepAlive(&ac->c);
    ac->data = cn;
    cn->ac = ac;
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    ct__conn *cn = req->data;
    ct_tier *t = cn->t;
    cn->gai_active = false;
    if (t->closed) {
        uv_freeaddrinfo(res);
        tier_unref(t);
        return;
    }
    tier_unref(t);
    char ip[64] = "";
    if (status == 0 && res) {
        if (res->ai_family == AF_INET6)
            uv_ip6_name((const struct sockaddr_in6 *)res->ai_addr, ip, sizeof(ip));
        else
            uv_ip4_name((const struct sockaddr_in *)res->ai_addr, ip, sizeof(ip));
    }
    uv_freeaddrinfo(res);
    if (!ip[0]) {
        t->st.errors++;
        tier_event(t, CT_EVENT_DOWN, "%s %s: cannot resolve %s: %s; retrying with backoff",
                   cn->what, t->st.url, t->url.host, status ? uv_strerror(status) : "no address");
        schedule_reconnect(cn);
        return;
    }
    /* A numeric address: hiredis' connect does not wait on a resolver then. */
    start_context(cn, redisAsyncConnect(ip, t->url.port));
}

static void conn_connect(ct__conn *cn)
{
    ct_tier *t = cn->t;
    if (t->closed || cn->ac || cn->gai_active)
        return;
    cn->state = CT_STATE_CONNECTING;
    cn->connect_started_ns = uv_hrtime();
    if (t->url.unix_socket) {
        start_context(cn, redisAsyncConnectUnix(t->url.path));
        return;
    }
    /* hiredis would resolve the name with a blocking getaddrinfo() on the loop: resolve it on
     * libuv's thread pool first. */
    struct addrinfo hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    cn->gai.data = cn;
    int r = uv_getaddrinfo(t->loop, &cn->gai, on_resolved, t->url.host, NULL, &hints);
    if (r < 0) {
        t->st.errors++;
        tier_event(t, CT_EVENT_DOWN, "%s %s: cannot resolve %s: %s", cn->what, t->st.url,
                   t->url.host, uv_strerror(r));
        schedule_reconnect(cn);
        return;
    }
    cn->gai_active = true;
    t->refs++;
}

/* A connect (for the subscriber: up to the subscription's confirmation) or a command older than
 * the timeout drops the connection (Redis that stopped answering is as good as down; its callers
 * get their miss now). */
static void conn_watch(ct__conn *cn, uint64_t limit, uint64_t now)
{
    if (!cn->ac)
        return;
    if (cn->state == CT_STATE_CONNECTING && now - cn->connect_started_ns > limit) {
        cn->t->st.timeouts++;
        drop_connection(cn, "connect timed out");
    } else if (cn->head && now - cn->head->sent_ns > limit) {
        cn->t->st.timeouts++;
        drop_connection(cn, "a command timed out");
    }
}

/* Runs every quarter of the timeout. */
static void on_watchdog(uv_timer_t *h)
{
    ct_tier *t = h->data;
    uint64_t limit = (uint64_t)(t->timeout_s * 1e9);
    uint64_t now = uv_hrtime();
    conn_watch(&t->cmd, limit, now);
    conn_watch(&t->sub, limit, now);
}

/* ---- the resolver's slot -------------------------------------------------------------------- */

static void entry_key(const ct_tier *t, const char *op_key, char *out, size_t len)
{
    /* {op_key} is a Redis Cluster hash tag: every key of one op lands in the same slot. */
    snprintf(out, len, "%s:{%s}:entry", t->prefix, op_key);
}

/* The op's completion channel. It carries the op's hash tag like its keys: in Redis Cluster the
 * channel hashes to the op's slot, so the scripts that publish on it stay single-slot, and
 * sharded pub/sub (SPUBLISH) would route it to the shard that holds the op. */
static void done_channel(const ct_tier *t, const char *op_key, char *out, size_t len)
{
    snprintf(out, len, "%s:{%s}:done", t->prefix, op_key);
}

static void on_get_reply(redisAsyncContext *ac, void *r, void *priv)
{
    ct__call *c = priv;
    ct_tier *t = c->t;
    redisReply *reply = r;
    kc_artifact *a = NULL;
    call_unlink(c);
    if (reply)
        observe(t, c);
    if (reply && reply->type == REDIS_REPLY_STRING) {
        ct_reject why = CT_REJECT_MALFORMED;
        char signer[KC_SIGN_ID_LEN + 1];
        int rc = ct_entry_verify(reply->str, reply->len, c->op_key, t->trusted, t->n_trusted, &a,
                                 signer, &why);
        if (rc == -EBADMSG) {
            t->st.rejected[why]++;
            tier_event(t, CT_EVENT_REJECTED, "Redis entry for op %s rejected (%s): tuning it here",
                       c->op_key, ct_reject_name(why));
        } else if (rc < 0) {
            t->st.errors++;
        }
    } else if (reply && reply->type == REDIS_REPLY_ERROR) {
        t->st.errors++;
        tier_event(t, CT_EVENT_ERROR, "Redis GET: %.200s", reply->str);
    }
    if (a)
        t->st.hits++;
    else
        t->st.misses++;
    (void)ac;
    resolve_remote_done done = c->done;
    void *arg = c->arg;
    free(c);
    done(arg, a);
}

static int tier_lookup(void *self, const char *op_key, resolve_remote_done done, void *arg)
{
    ct_tier *t = self;
    if (!done || !kc_key_is_hex(op_key))
        return -EINVAL;
    if (t->cmd.state != CT_STATE_UP || !t->cmd.ac) {
        t->st.misses++;
        return -ENOTCONN;
    }
    ct__call *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->kind = CT__CALL_GET;
    memcpy(c->op_key, op_key, sizeof(c->op_key));
    c->done = done;
    c->arg = arg;
    char key[sizeof(t->prefix) + KC_KEY_LEN + 16];
    entry_key(t, op_key, key, sizeof(key));
    int r = call_send(t, c, on_get_reply, 2, (const char *[]){"GET", key}, NULL);
    if (r < 0) {
        free(c);
        t->st.misses++;
    }
    return r;
}

static void on_set_reply(redisAsyncContext *ac, void *r, void *priv)
{
    ct__call *c = priv;
    ct_tier *t = c->t;
    redisReply *reply = r;
    call_unlink(c);
    (void)ac;
    if (reply)
        observe(t, c);
    if (!reply) {
        t->st.publish_dropped++;
    } else if (reply->type == REDIS_REPLY_STATUS) {
        t->st.publishes++;
    } else if (reply->type == REDIS_REPLY_NIL) {
        t->st.publish_pinned++; /* NX: an entry was there first, and stays */
    } else {
        t->st.publish_dropped++;
        t->st.errors++;
        if (reply->type == REDIS_REPLY_ERROR)
            tier_event(t, CT_EVENT_ERROR, "Redis SET of op %s: %.200s", c->op_key, reply->str);
    }
    free(c);
}

/* SET of the entry, then a wake-up on the op's completion channel for the nodes waiting on this
 * node's lease. One script: Redis runs it whole, so the message never comes before the entry it
 * announces, and a SET that fails (OOM) raises before anything is published. The message is sent
 * for a pinned entry too (one was there first: the waiters may take it). Its text is only a
 * hint; a woken node reads and verifies the entry itself. The SET's reply (OK, or nil: pinned)
 * is the script's. ARGV: value, channel, then SET's options. */
static const char ct__publish_lua[] =
    "local r = redis.call('set', KEYS[1], ARGV[1], unpack(ARGV, 3)) "
    "redis.call('publish', ARGV[2], 'entry') return r";

/* SET of a signed entry: NX (the first winner is pinned) unless a re-tune asked to replace it. */
static void publish_entry(ct_tier *t, const kc_artifact *a, bool replace)
{
    if (!a || !t->has_sign)
        return;
    if (t->cmd.state != CT_STATE_UP || !t->cmd.ac) {
        t->st.publish_dropped++;
        return;
    }
    char *value = NULL;
    size_t len = 0;
    ct__call *c = calloc(1, sizeof(*c));
    if (!c || ct_entry_encode(a, &t->sign, &value, &len) < 0) {
        free(c);
        t->st.publish_dropped++;
        return;
    }
    c->kind = CT__CALL_SET;
    memcpy(c->op_key, a->op_key, sizeof(c->op_key));
    char key[sizeof(t->prefix) + KC_KEY_LEN + 16], chan[sizeof(t->prefix) + KC_KEY_LEN + 16];
    entry_key(t, a->op_key, key, sizeof(key));
    done_channel(t, a->op_key, chan, sizeof(chan));
    char ms[32];
    snprintf(ms, sizeof(ms), "%.0f", t->ttl_s * 1000.0);
    /* NX: the first winner published is pinned; a node replaces an entry only when a re-tune
     * asked for it. The script SETs, then PUBLISHes the wake-up (ct__publish_lua). */
    const char *argv[10] = {"EVAL", ct__publish_lua, "1", key, value, chan};
    size_t lens[10] = {4, strlen(ct__publish_lua), 1, strlen(key), len, strlen(chan)};
    int argc = 6;
    if (!replace) {
        argv[argc] = "NX";
        lens[argc++] = 2;
    }
    if (t->ttl_s > 0) {
        argv[argc] = "PX";
        lens[argc++] = 2;
        argv[argc] = ms;
        lens[argc++] = strlen(ms);
    }
    if (call_send(t, c, on_set_reply, argc, argv, lens) < 0) {
        free(c);
        t->st.publish_dropped++;
    }
    free(value);
}

static void tier_publish(void *self, const kc_artifact *a)
{
    publish_entry(self, a, false);
}

static void tier_republish(void *self, const kc_artifact *a)
{
    publish_entry(self, a, true);
}

/* ---- leases: tune once per fleet ------------------------------------------------------------ */

/* Compare-and-renew and compare-and-delete: a lease is only ever touched by the node whose id it
 * holds (one that expired and was taken over belongs to another node now). A release publishes a
 * wake-up after the DEL, so that nodes waiting on the lease take it at once when the job ended
 * without a kernel. It does so after a kernel too: the release follows the entry's script on the
 * same connection, the waiters found the entry already and ignore it, and one more small message
 * per tuned op is cheaper than knowing here whether the entry's SET succeeded (when it failed,
 * the waiters must take the lease). ARGV: node id, lease ms, channel. */
static const char ct__renew_lua[] =
    "if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('pexpire',KEYS[1],ARGV[2]) "
    "else return 0 end";
static const char ct__release_lua[] =
    "if redis.call('get',KEYS[1])==ARGV[1] then redis.call('del',KEYS[1]) "
    "redis.call('publish',ARGV[3],'released') return 1 else return 0 end";
/* The entry if there is one now (a bulk string); else take the lease if it is free (OK); else
 * the time it has left (PTTL, ms; -1: no expiry): a waiting node looks again when it expires,
 * not only at its next poll. The entry is read in the same script because a node whose GET
 * missed just before another node published and released would otherwise take the free lease
 * and tune the op a second time (a burst of identical requests over two nodes did, under load).
 * KEYS[1] the lease, KEYS[2] the entry: one hash tag, one slot. */
static const char ct__claim_lua[] =
    "local e = redis.call('get',KEYS[2]) if e then return e end "
    "local r = redis.call('set',KEYS[1],ARGV[1],'NX','PX',ARGV[2]) if r then return r end "
    "return redis.call('pttl',KEYS[1])";
/* The same without the entry: for an op whose entry this node rejected. */
static const char ct__lease_lua[] =
    "local r = redis.call('set',KEYS[1],ARGV[1],'NX','PX',ARGV[2]) if r then return r end "
    "return redis.call('pttl',KEYS[1])";

static void lease_key(const ct_tier *t, const char *op_key, char *out, size_t len)
{
    snprintf(out, len, "%s:{%s}:lease", t->prefix, op_key);
}

static ssize_t held_find(const ct_tier *t, const char *op_key)
{
    for (size_t i = 0; i < t->n_held; i++)
        if (strcmp(t->held[i], op_key) == 0)
            return (ssize_t)i;
    return -1;
}

static void held_add(ct_tier *t, const char *op_key)
{
    if (held_find(t, op_key) >= 0)
        return;
    if (t->n_held == t->cap_held) {
        size_t cap = t->cap_held ? t->cap_held * 2 : 8;
        void *p = realloc(t->held, cap * sizeof(*t->held));
        if (!p)
            return; /* not renewed: it expires while the job runs, and someone else may tune */
        t->held = p;
        t->cap_held = cap;
    }
    memcpy(t->held[t->n_held++], op_key, KC_KEY_LEN + 1);
    t->st.leases_held = t->n_held;
}

static void on_plain_reply(redisAsyncContext *ac, void *r, void *priv)
{
    ct__call *c = priv;
    ct_tier *t = c->t;
    redisReply *reply = r;
    (void)ac;
    call_unlink(c);
    if (reply)
        observe(t, c);
    if (reply && reply->type == REDIS_REPLY_ERROR) {
        t->st.errors++;
        tier_event(t, CT_EVENT_ERROR, "Redis lease command for op %s: %.200s", c->op_key,
                   reply->str);
    }
    free(c);
}

/* EVAL of a compare-and-* script on an op's lease (fire and forget). */
static void lease_script(ct_tier *t, const char *script, const char *op_key)
{
    if (t->cmd.state != CT_STATE_UP || !t->cmd.ac)
        return;
    ct__call *c = calloc(1, sizeof(*c));
    if (!c)
        return;
    c->kind = CT__CALL_LEASE;
    memcpy(c->op_key, op_key, sizeof(c->op_key));
    char key[sizeof(t->prefix) + KC_KEY_LEN + 16], ms[32];
    char chan[sizeof(t->prefix) + KC_KEY_LEN + 16];
    lease_key(t, op_key, key, sizeof(key));
    done_channel(t, op_key, chan, sizeof(chan));
    snprintf(ms, sizeof(ms), "%.0f", t->lease_s * 1000.0);
    if (call_send(t, c, on_plain_reply, 7,
                  (const char *[]){"EVAL", script, "1", key, t->st.node_id, ms, chan}, NULL) < 0)
        free(c);
}

static void on_renew(uv_timer_t *h)
{
    ct_tier *t = h->data;
    for (size_t i = 0; i < t->n_held; i++)
        lease_script(t, ct__renew_lua, t->held[i]);
}

static void tier_release(void *self, const char *op_key)
{
    ct_tier *t = self;
    ssize_t i = held_find(t, op_key);
    if (i < 0)
        return;
    memmove(t->held[i], t->held[i + 1], (t->n_held - (size_t)i - 1) * sizeof(*t->held));
    t->n_held--;
    t->st.leases_held = t->n_held;
    lease_script(t, ct__release_lua, op_key);
}

static void claim_closed(uv_handle_t *h)
{
    ct__claim *cl = h->data;
    ct_tier *t = cl->t;
    free(cl);
    tier_unref(t);
}

/* Answers the claim (NULL: tune it here) and frees it once its timer has closed. */
static void claim_finish(ct__claim *cl, kc_artifact *a)
{
    ct_tier *t = cl->t;
    if (cl->prev)
        cl->prev->next = cl->next;
    else
        t->claims = cl->next;
    if (cl->next)
        cl->next->prev = cl->prev;
    uv_close((uv_handle_t *)&cl->timer, claim_closed);
    cl->done(cl->arg, a);
}

static int claim_send(ct__claim *cl, bool get);
static void on_claim_timer(uv_timer_t *h);

/* How long a claim that found another node's lease waits before it looks again: the fallback
 * poll (long while the subscriber is up, since a message wakes it; CT_POLL_MS while it is down),
 * but never past the lease's expiry (pttl_ms, < 0 unknown) nor past the claim's deadline. */
static uint64_t claim_delay_ms(const ct__claim *cl, long long pttl_ms)
{
    const ct_tier *t = cl->t;
    uint64_t ms = t->sub.state == CT_STATE_UP ? t->lease_poll_ms : CT_POLL_MS;
    if (pttl_ms >= 0 && (uint64_t)pttl_ms + 1 < ms)
        ms = (uint64_t)pttl_ms + 1;
    uint64_t now = uv_hrtime();
    uint64_t left = cl->deadline_ns > now ? (cl->deadline_ns - now) / 1000000 + 1 : 0;
    return left < ms ? left : ms;
}

/* Looks again now: reads the entry (then, without one, tries the lease). */
static void claim_look(ct__claim *cl)
{
    if (claim_send(cl, true) < 0)
        claim_finish(cl, NULL);
}

static void on_claim_reply(redisAsyncContext *ac, void *r, void *priv)
{
    ct__call *c = priv;
    ct_tier *t = c->t;
    ct__claim *cl = c->claim;
    redisReply *reply = r;
    bool was_get = c->kind == CT__CALL_GET;
    (void)ac;
    call_unlink(c);
    cl->in_flight = false;
    if (reply)
        observe(t, c);
    free(c);
    if (!reply || reply->type == REDIS_REPLY_ERROR || t->closed) {
        if (reply && reply->type == REDIS_REPLY_ERROR) {
            t->st.errors++;
            tier_event(t, CT_EVENT_ERROR, "Redis lease for op %s: %.200s", cl->op_key, reply->str);
        }
        claim_finish(cl, NULL); /* the tier cannot tell: tune here */
        return;
    }
    /* An entry, from the GET or from the claim script (published since the lookup missed). */
    if (reply->type == REDIS_REPLY_STRING) {
        kc_artifact *a = NULL;
        ct_reject why = CT_REJECT_MALFORMED;
        int rc = ct_entry_verify(reply->str, reply->len, cl->op_key, t->trusted, t->n_trusted,
                                 &a, NULL, &why);
        /* A claim's first command follows the lookup that read (and counted) the same entry. */
        const bool first = !was_get && !cl->waited;
        if (rc == -EBADMSG && !first) {
            t->st.rejected[why]++;
            tier_event(t, CT_EVENT_REJECTED,
                       "Redis entry for op %s rejected (%s): tuning it here", cl->op_key,
                       ct_reject_name(why));
        }
        if (a) {
            t->st.hits++;
            if (cl->waited)
                t->st.lease_wait_hits++;
            claim_finish(cl, a);
            return;
        }
        if (!was_get && !cl->entry_bad) {
            /* Rejected: claim the lease without it, so the fleet still tunes the op once. */
            cl->entry_bad = true;
            if (claim_send(cl, false) < 0)
                claim_finish(cl, NULL);
            return;
        }
        claim_finish(cl, NULL);
        return;
    }
    if (was_get) {
        /* No entry yet: try the lease (free again when its holder ended or died). */
        if (claim_send(cl, false) < 0)
            claim_finish(cl, NULL);
        return;
    }
    if (reply->type == REDIS_REPLY_STATUS) {
        /* Ours: this node tunes it for the fleet. */
        held_add(t, cl->op_key);
        t->st.leases++;
        if (cl->waited)
            t->st.lease_takeovers++;
        claim_finish(cl, NULL);
        return;
    }
    /* Held by this node: another claim of ours got it first (replies come in order, so its
     * answer was read before this one). The request joins that job. */
    if (held_find(t, cl->op_key) >= 0) {
        claim_finish(cl, NULL);
        return;
    }
    /* Another node holds it: wait for its kernel. */
    if (!cl->waited) {
        cl->waited = true;
        t->st.lease_waits++;
    }
    if (uv_hrtime() > cl->deadline_ns) {
        t->st.lease_wait_timeouts++;
        claim_finish(cl, NULL);
        return;
    }
    if (cl->woken) {
        /* The op's completion message came while this claim's commands were in flight (the
         * channel and the commands are two connections: either may be read first). */
        cl->woken = false;
        t->st.lease_wakeups_message++;
        claim_look(cl);
        return;
    }
    long long pttl = reply->type == REDIS_REPLY_INTEGER ? reply->integer : -1;
    uv_timer_start(&cl->timer, on_claim_timer, claim_delay_ms(cl, pttl), 0);
}

/* get: GET of the entry; else the claim script on the lease. 0, or a negative errno (nothing
 * sent). */
static int claim_send(ct__claim *cl, bool get)
{
    ct_tier *t = cl->t;
    if (t->cmd.state != CT_STATE_UP || !t->cmd.ac)
        return -ENOTCONN;
    ct__call *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->kind = get ? CT__CALL_GET : CT__CALL_LEASE;
    c->claim = cl;
    memcpy(c->op_key, cl->op_key, sizeof(c->op_key));
    char key[sizeof(t->prefix) + KC_KEY_LEN + 16], ms[32];
    int r;
    if (get) {
        entry_key(t, cl->op_key, key, sizeof(key));
        r = call_send(t, c, on_claim_reply, 2, (const char *[]){"GET", key}, NULL);
    } else {
        char ekey[sizeof(key)];
        lease_key(t, cl->op_key, key, sizeof(key));
        entry_key(t, cl->op_key, ekey, sizeof(ekey));
        snprintf(ms, sizeof(ms), "%.0f", t->lease_s * 1000.0);
        if (cl->entry_bad)
            r = call_send(t, c, on_claim_reply, 6,
                          (const char *[]){"EVAL", ct__lease_lua, "1", key, t->st.node_id, ms}, NULL);
        else
            r = call_send(t, c, on_claim_reply, 7,
                          (const char *[]){"EVAL", ct__claim_lua, "2", key, ekey, t->st.node_id, ms}, NULL);
    }
    if (r < 0)
        free(c);
    else
        cl->in_flight = true;
    return r;
}

static void on_claim_timer(uv_timer_t *h)
{
    ct__claim *cl = h->data;
    cl->t->st.lease_wakeups_poll++;
    cl->woken = false;
    claim_look(cl);
}

/* A completion message for op_key: every claim waiting on it looks again now (one whose command
 * is in flight does when its reply says it would wait). */
static void claims_wake(ct_tier *t, const char *op_key)
{
    ct__claim *cl = t->claims;
    while (cl) {
        ct__claim *next = cl->next;
        if (strcmp(cl->op_key, op_key) == 0) {
            if (cl->in_flight) {
                cl->woken = true;
            } else {
                uv_timer_stop(&cl->timer);
                t->st.lease_wakeups_message++;
                claim_look(cl);
            }
        }
        cl = next;
    }
}

/* The subscriber came up or went down. Down: messages may be lost from now on, so the waiting
 * claims go back to the short poll. Up: messages sent while it was down are lost, so every
 * waiting claim looks once now, then waits on messages and the long poll. */
static void claims_on_subscriber(ct_tier *t, bool up)
{
    for (ct__claim *cl = t->claims; cl; cl = cl->next)
        if (!cl->in_flight)
            uv_timer_start(&cl->timer, on_claim_timer, up ? 0 : CT_POLL_MS, 0);
}

/* The subscriber's callback: hiredis calls it for the PSUBSCRIBE confirmation, for every message
 * of the pattern, and with NULL when the connection goes. */
static void on_sub_message(redisAsyncContext *ac, void *r, void *priv)
{
    ct__conn *cn = priv;
    ct_tier *t = cn->t;
    redisReply *reply = r;
    if (!reply || t->closed || cn->ac != ac || reply->type != REDIS_REPLY_ARRAY ||
        reply->elements < 3 || reply->element[0]->type != REDIS_REPLY_STRING)
        return;
    const char *kind = reply->element[0]->str;
    if (strcasecmp(kind, "psubscribe") == 0) {
        if (cn->state != CT_STATE_UP)
            conn_up(cn);
        return;
    }
    if (strcasecmp(kind, "pmessage") != 0 || reply->elements != 4 ||
        reply->element[2]->type != REDIS_REPLY_STRING)
        return;
    /* The channel says which op; the message's text is not trusted (nor needed). */
    char op_key[KC_KEY_LEN + 1];
    if (ct_channel_op_key(t->prefix, reply->element[2]->str, reply->element[2]->len, op_key) == 0)
        claims_wake(t, op_key);
}

static int tier_claim(void *self, const char *op_key, resolve_remote_done done, void *arg)
{
    ct_tier *t = self;
    if (!done || !kc_key_is_hex(op_key))
        return -EINVAL;
    if (t->cmd.state != CT_STATE_UP || !t->cmd.ac)
        return -ENOTCONN;
    /* This node tunes it already: the request joins that job. */
    if (held_find(t, op_key) >= 0)
        return -EALREADY;
    ct__claim *cl = calloc(1, sizeof(*cl));
    if (!cl)
        return -ENOMEM;
    cl->t = t;
    memcpy(cl->op_key, op_key, sizeof(cl->op_key));
    cl->done = done;
    cl->arg = arg;
    cl->deadline_ns = uv_hrtime() + (uint64_t)(t->lease_wait_s * 1e9);
    int r = claim_send(cl, false);
    if (r < 0) {
        free(cl);
        return r;
    }
    uv_timer_init(t->loop, &cl->timer);
    cl->timer.data = cl;
    t->refs++;
    cl->next = t->claims;
    if (t->claims)
        t->claims->prev = cl;
    t->claims = cl;
    return 0;
}

void ct_remote(ct_tier *t, resolve_remote *ret)
{
    memset(ret, 0, sizeof(*ret));
    ret->self = t;
    ret->lookup = tier_lookup;
    /* A read-only node never publishes, so it must not hold a lease others would wait on; it
     * does not wait on theirs either (it tunes at once, as without the tier). */
    if (t->has_sign) {
        ret->publish = tier_publish;
        ret->republish = tier_republish;
        ret->claim = tier_claim;
        ret->release = tier_release;
    }
}


/* ---- life ------------------------------------------------------------------------------------ */

int ct_new(uv_loop_t *loop, const ct_config *cfg, ct_tier **ret, char **ret_err)
{
    if (!loop || !cfg || !ret)
        return -EINVAL;
    ct_url u;
    int r = ct_url_parse(cfg->url, &u, ret_err);
    if (r < 0)
        return r;
    const char *prefix = cfg->prefix ? cfg->prefix : "hidetd";
    if (!*prefix || strlen(prefix) >= sizeof(((ct_tier *)0)->prefix) ||
        strpbrk(prefix, "{} \t\r\n")) {
        if (ret_err)
            *ret_err = strdup("the Redis key prefix must be 1..63 characters without braces or "
                              "spaces");
        return -EINVAL;
    }
    if (sodium_init() < 0)
        return -ENOMEM;
    ct_tier *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    if (cfg->n_trusted) {
        t->trusted = calloc(cfg->n_trusted, sizeof(*t->trusted));
        if (!t->trusted) {
            free(t);
            return -ENOMEM;
        }
        memcpy(t->trusted, cfg->trusted, cfg->n_trusted * sizeof(*t->trusted));
        t->n_trusted = cfg->n_trusted;
    }
    t->loop = loop;
    t->url = u;
    snprintf(t->prefix, sizeof(t->prefix), "%s", prefix);
    t->ttl_s = cfg->ttl_s > 0 ? cfg->ttl_s : 0;
    t->timeout_s = cfg->timeout_s > 0 ? cfg->timeout_s : 1.0;
    t->backoff_min_s = cfg->backoff_min_s > 0 ? cfg->backoff_min_s : 0.1;
    t->backoff_max_s = cfg->backoff_max_s > 0 ? cfg->backoff_max_s : 30.0;
    if (t->backoff_max_s < t->backoff_min_s)
        t->backoff_max_s = t->backoff_min_s;
    t->lease_s = cfg->lease_s > 0 ? cfg->lease_s : 30.0;
    t->lease_wait_s = cfg->lease_wait_s > 0 ? cfg->lease_wait_s : 600.0;
    t->lease_poll_ms = (uint64_t)((cfg->lease_poll_s > 0 ? cfg->lease_poll_s : 1.0) * 1000.0);
    if (t->lease_poll_ms < 1)
        t->lease_poll_ms = 1;
    t->st.lease_poll_s = (double)t->lease_poll_ms / 1000.0;
    if (ct_channel_pattern(t->prefix, t->pattern, sizeof(t->pattern)) < 0) {
        free(t->trusted);
        free(t);
        return -ENOMEM;
    }
    unsigned char id[8];
    randombytes_buf(id, sizeof(id));
    sodium_bin2hex(t->st.node_id, sizeof(t->st.node_id), id, sizeof(id));
    if (cfg->sign) {
        t->sign = *cfg->sign;
        t->has_sign = true;
    }
    t->on_event = cfg->on_event;
    t->on_latency = cfg->on_latency;
    t->udata = cfg->udata;
    t->st.read_only = !t->has_sign;
    ct_url_redacted(&u, t->st.url, sizeof(t->st.url));
    snprintf(t->st.prefix, sizeof(t->st.prefix), "%s", t->prefix);
    sodium_memzero(&u, sizeof(u));

    ct__conn *conns[2] = {&t->cmd, &t->sub};
    for (int i = 0; i < 2; i++) {
        conns[i]->t = t;
        conns[i]->sub = i == 1;
        conns[i]->what = i == 1 ? "Redis subscriber" : "Redis";
        conns[i]->backoff_s = t->backoff_min_s;
        conns[i]->state = CT_STATE_CLOSED;
        uv_timer_init(loop, &conns[i]->retry);
        conns[i]->retry.data = conns[i];
        /* No timer keeps the loop alive: they serve the tier, not any request. */
        uv_unref((uv_handle_t *)&conns[i]->retry);
    }
    uv_timer_init(loop, &t->watchdog);
    uv_timer_init(loop, &t->renew);
    t->watchdog.data = t->renew.data = t;
    t->refs = 4;
    uv_unref((uv_handle_t *)&t->watchdog);
    uv_unref((uv_handle_t *)&t->renew);
    uint64_t renew_ms = (uint64_t)(t->lease_s * 1000.0 / 3.0);
    uv_timer_start(&t->renew, on_renew, renew_ms ? renew_ms : 1, renew_ms ? renew_ms : 1);
    uint64_t tick = (uint64_t)(t->timeout_s * 250.0);
    if (tick < 10)
        tick = 10;
    if (tick > 250)
        tick = 250;
    uv_timer_start(&t->watchdog, on_watchdog, tick, tick);
    conn_connect(&t->cmd);
    /* Only a publishing node claims leases, so only it waits and needs the messages. */
    if (t->has_sign)
        conn_connect(&t->sub);
    *ret = t;
    return 0;
}

void ct_stats_get(const ct_tier *t, ct_stats *ret)
{
    *ret = t->st;
    ret->state = t->closed ? CT_STATE_CLOSED : t->cmd.state;
    ret->sub_state = t->closed ? CT_STATE_CLOSED : t->sub.state;
}

void ct_close(ct_tier *t)
{
    if (!t || t->closed)
        return;
    t->closed = true;
    /* Claims still waiting on their timer: this node tunes (the resolver is going away). Their
     * commands in flight are answered (NULL) when the connection is freed below. */
    ct__conn *conns[2] = {&t->cmd, &t->sub};
    for (int i = 0; i < 2; i++) {
        ct__conn *cn = conns[i];
        redisAsyncContext *ac = cn->ac;
        cn->ac = NULL;
        if (ac)
            redisAsyncFree(ac); /* answers every pending command (lookups: a miss) */
        if (cn->gai_active)
            uv_cancel((uv_req_t *)&cn->gai);
        uv_close((uv_handle_t *)&cn->retry, retry_closed);
    }
    while (t->claims)
        claim_finish(t->claims, NULL);
    uv_close((uv_handle_t *)&t->watchdog, handle_closed);
    uv_close((uv_handle_t *)&t->renew, handle_closed);
}
