/* tests/integration/it_cluster.c - the cluster tier against a real redis-server started here on
 * a free loopback port (skipped with a message when redis-server is not installed;
 * scripts/setup.sh installs it). Two daemons with their own SQLite files share it: the second
 * gets the first's kernel as a verified remote hit without tuning; an entry with a flipped byte,
 * one re-signed by an untrusted key and one without a signature are each rejected (counted in
 * /metrics by reason) and tuned locally; a read-only node publishes nothing; 20 concurrent
 * identical requests spread over both daemons tune once in the fleet (leases), and a claim that
 * reaches Redis after the op was published answers from its entry; a lease left by a
 * node that died delays the op at most the lease time, then is taken over; Redis full (maxmemory)
 * drops the publish and nothing else; Redis not answering (CLIENT PAUSE) costs a request the
 * 500 ms timeout, not the pause; redis-server killed mid-run leaves both serving their caches and
 * tuning locally, and restarted, the tier comes back and publishes again. The completion channel:
 * a node's tuning publishes "entry" then "released" on the op's channel; with the fallback poll
 * set to 20 s, a node waiting on another node's lease is answered by that node's kernel as soon
 * as its message comes (counted via="message"), a lease released by a message is taken over at
 * once, and after redis-server was killed and restarted the subscriber is back and wakes waits
 * again. */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <sodium.h>

#include "harness.h"

/* A matmul whose N makes each op distinct (tune "none": the template default, no GPU needed). */
static char *req(int n)
{
    char *b = NULL;
    if (asprintf(&b, "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[64,64],\"dtype\":\"f16\"},"
                     "{\"shape\":[64,%d],\"dtype\":\"f16\"}],\"arch\":\"sm_90\",\"tune\":\"none\"}",
                 n) < 0)
        exit(1);
    return b;
}

static int redis_port;
static pid_t redis_pid = -1;
static char redis_dir[256];

static redisContext *redis_conn(void)
{
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", redis_port, tv);
    if (c && c->err) {
        redisFree(c);
        return NULL;
    }
    if (c)
        redisSetTimeout(c, tv);
    return c;
}

static int redis_start(void)
{
    char port[16], logf[300];
    snprintf(port, sizeof(port), "%d", redis_port);
    snprintf(logf, sizeof(logf), "%s/redis.log", redis_dir);
    redis_pid = fork();
    if (redis_pid == 0) {
        if (!freopen(logf, "a", stdout) || !freopen(logf, "a", stderr))
            _exit(127);
        execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1",
               "--save", "", "--appendonly", "no", "--dir", redis_dir, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 200; i++) {
        redisContext *c = redis_conn();
        if (c) {
            redisReply *r = redisCommand(c, "PING");
            bool ok = r && r->type == REDIS_REPLY_STATUS;
            freeReplyObject(r);
            redisFree(c);
            if (ok)
                return 0;
        }
        usleep(50 * 1000);
    }
    fprintf(stderr, "redis-server did not start\n");
    return -1;
}

static void redis_kill(void)
{
    if (redis_pid > 0) {
        kill(redis_pid, SIGKILL);
        waitpid(redis_pid, NULL, 0);
        redis_pid = -1;
    }
}

/* GET of an op's entry (malloc'd; *len) or NULL. */
static char *entry_get(const char *op_key, size_t *len)
{
    redisContext *c = redis_conn();
    char *v = NULL;
    if (!c)
        return NULL;
    redisReply *r = redisCommand(c, "GET hidetd:{%s}:entry", op_key);
    if (r && r->type == REDIS_REPLY_STRING) {
        v = malloc(r->len + 1);
        memcpy(v, r->str, r->len);
        v[r->len] = '\0';
        *len = r->len;
    }
    freeReplyObject(r);
    redisFree(c);
    return v;
}

static void entry_set(const char *op_key, const char *v, size_t len)
{
    redisContext *c = redis_conn();
    redisReply *r = c ? redisCommand(c, "SET hidetd:{%s}:entry %b", op_key, v, len) : NULL;
    CHECK(r && r->type == REDIS_REPLY_STATUS, "SET");
    freeReplyObject(r);
    if (c)
        redisFree(c);
}

static const cJSON *jpath(const cJSON *j, const char *a, const char *b)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, a);
    return b ? cJSON_GetObjectItemCaseSensitive(x, b) : x;
}

/* A number from /v1/status: cluster.<name> (or jobs.<name> when in_jobs). */
static double status_num(const ht_daemon *d, const char *obj, const char *name)
{
    ht_resp r = ht_get(d, "/v1/status");
    const cJSON *v = r.json ? jpath(r.json, obj, name) : NULL;
    double x = cJSON_IsNumber(v) ? v->valuedouble : -1;
    ht_resp_free(&r);
    return x;
}

static bool cluster_state_is(const ht_daemon *d, const char *state)
{
    ht_resp r = ht_get(d, "/v1/status");
    const cJSON *v = r.json ? jpath(r.json, "cluster", "state") : NULL;
    bool ok = cJSON_IsString(v) && strcmp(v->valuestring, state) == 0;
    ht_resp_free(&r);
    return ok;
}

static bool wait_for(const ht_daemon *d, const char *obj, const char *name, double want, double s)
{
    for (int i = 0; i < (int)(s * 20); i++) {
        if (status_num(d, obj, name) >= want)
            return true;
        usleep(50 * 1000);
    }
    return false;
}

static bool wait_state(const ht_daemon *d, const char *state, double s)
{
    for (int i = 0; i < (int)(s * 20); i++) {
        if (cluster_state_is(d, state))
            return true;
        usleep(50 * 1000);
    }
    return false;
}

/* The answer's "origin" of the last kernel() call. */
static char last_origin[16];

/* Posts a kernel request; 200 expected. *op_key (65 bytes) and *key get the answer's keys,
 * last_origin its "origin". */
static bool kernel(const ht_daemon *d, int n, char op_key[65], char key[65])
{
    char *b = req(n);
    ht_resp r = ht_post(d, "/v1/kernels", b);
    free(b);
    bool ok = r.status == 200 && r.json;
    CHECK(ok, "POST n=%d: %ld %s", n, r.status, r.body ? r.body : "");
    if (ok) {
        const cJSON *ok_ = jpath(r.json, "op_key", NULL), *k = jpath(r.json, "key", NULL);
        snprintf(op_key, 65, "%s", cJSON_IsString(ok_) ? ok_->valuestring : "");
        snprintf(key, 65, "%s", cJSON_IsString(k) ? k->valuestring : "");
        const cJSON *o = jpath(r.json, "origin", NULL);
        snprintf(last_origin, sizeof(last_origin), "%s", cJSON_IsString(o) ? o->valuestring : "");
    }
    ht_resp_free(&r);
    return ok;
}

/* The value of the sample line starting with line_prefix (not its # HELP line). */
static double metric(const ht_daemon *d, const char *line_prefix)
{
    ht_resp r = ht_get(d, "/metrics");
    double v = -1;
    char needle[256];
    snprintf(needle, sizeof(needle), "\n%s", line_prefix);
    const char *p = r.body ? strstr(r.body, needle) : NULL;
    if (p)
        v = strtod(p + strlen(needle), NULL);
    ht_resp_free(&r);
    return v;
}

/* Re-signs an entry's record with the secret key in keyfile (as an outsider with a key of its
 * own would): the signature is valid, the signer is not trusted. */
static char *resign(const char *v, size_t len, const char *keyfile, size_t *ret_len)
{
    char *text = NULL;
    if (ht_sh(&text, "cat '%s'", keyfile) != 0 || !text)
        return NULL;
    char id[17];
    char b64[200];
    if (sscanf(text, "hidetd-ed25519-secret %16s %199s", id, b64) != 2)
        return NULL;
    free(text);
    unsigned char sk[64];
    size_t skl = 0;
    if (sodium_base642bin(sk, sizeof(sk), b64, strlen(b64), NULL, &skl, NULL,
                          sodium_base64_VARIANT_ORIGINAL) != 0 || skl != 64)
        return NULL;
    const char *rec = strchr(strchr(v, '\n') + 1, '\n') + 1;
    size_t rl = len - (size_t)(rec - v);
    const char *ctx = "hidetd-cluster-entry 1";
    size_t ml = strlen(ctx) + 1 + rl;
    unsigned char *m = malloc(ml);
    memcpy(m, ctx, strlen(ctx) + 1);
    memcpy(m + strlen(ctx) + 1, rec, rl);
    unsigned char sig[64];
    crypto_sign_detached(sig, NULL, m, ml, sk);
    free(m);
    char sb[100];
    sodium_bin2base64(sb, sizeof(sb), sig, 64, sodium_base64_VARIANT_ORIGINAL);
    char *out = NULL;
    int n = asprintf(&out, "hidetd-cluster-entry 1\ned25519 %s %s\n%.*s", id, sb, (int)rl, rec);
    *ret_len = (size_t)n;
    return out;
}

/* One of 20 concurrent identical requests (tune once per fleet). */
typedef struct {
    const ht_daemon *d;
    long status;
    char key[65];
} burst_req;

static void *burst_one(void *arg)
{
    burst_req *q = arg;
    char *b = req(768);
    ht_resp r = ht_post(q->d, "/v1/kernels", b);
    free(b);
    q->status = r.status;
    const cJSON *k = r.json ? jpath(r.json, "key", NULL) : NULL;
    snprintf(q->key, sizeof(q->key), "%s", cJSON_IsString(k) ? k->valuestring : "");
    ht_resp_free(&r);
    return NULL;
}

/* One command on a fresh connection; true when Redis answered OK. */
static bool redis_ok(const char *cmd)
{
    redisContext *c = redis_conn();
    redisReply *r = c ? redisCommand(c, cmd) : NULL;
    bool ok = r && r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    if (c)
        redisFree(c);
    return ok;
}

static void plant_lease(const char *op_key, int ms)
{
    redisContext *c = redis_conn();
    redisReply *r = c ? redisCommand(c, "SET hidetd:{%s}:lease deadnode PX %d", op_key, ms) : NULL;
    CHECK(r && r->type == REDIS_REPLY_STATUS, "plant lease");
    freeReplyObject(r);
    if (c)
        redisFree(c);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A command on a fresh connection whose reply is an integer (DEL, PUBLISH); -1 otherwise. */
static long long redis_int(const char *fmt, const char *arg)
{
    redisContext *c = redis_conn();
    redisReply *r = c ? redisCommand(c, fmt, arg) : NULL;
    long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    if (c)
        redisFree(c);
    return v;
}

static double wakeups(const ht_daemon *d, const char *via)
{
    char line[96];
    snprintf(line, sizeof(line), "hidetd_cluster_lease_wakeups_total{via=\"%s\"} ", via);
    return metric(d, line);
}

static bool subscriber_is(const ht_daemon *d, const char *state)
{
    ht_resp r = ht_get(d, "/v1/status");
    const cJSON *v = r.json ? jpath(r.json, "cluster", "subscriber") : NULL;
    bool ok = cJSON_IsString(v) && strcmp(v->valuestring, state) == 0;
    ht_resp_free(&r);
    return ok;
}

static bool wait_subscriber(const ht_daemon *d, const char *state, double s)
{
    for (int i = 0; i < (int)(s * 20); i++) {
        if (subscriber_is(d, state))
            return true;
        usleep(50 * 1000);
    }
    return false;
}

/* A request waiting in its own thread: the op of req(n), or its re-tune. */
typedef struct {
    const ht_daemon *d;
    int n;
    long status;
    char key[65], origin[16];
} wait_req;

static void *wait_one(void *arg)
{
    wait_req *q = arg;
    char *b = req(q->n);
    ht_resp r = ht_post(q->d, "/v1/kernels", b);
    free(b);
    q->status = r.status;
    const cJSON *k = r.json ? jpath(r.json, "key", NULL) : NULL;
    const cJSON *o = r.json ? jpath(r.json, "origin", NULL) : NULL;
    snprintf(q->key, sizeof(q->key), "%s", cJSON_IsString(k) ? k->valuestring : "");
    snprintf(q->origin, sizeof(q->origin), "%s", cJSON_IsString(o) ? o->valuestring : "");
    ht_resp_free(&r);
    return NULL;
}

/* Re-tunes req(n) on d ("retune": true); the answer's key in key. */
static bool retune(const ht_daemon *d, int n, char key[65])
{
    char *b = req(n);
    char *body = NULL;
    CHECK(asprintf(&body, "%.*s,\"retune\":true}", (int)strlen(b) - 1, b) > 0);
    free(b);
    ht_resp r = ht_post(d, "/v1/kernels", body);
    free(body);
    const cJSON *k = r.json ? jpath(r.json, "key", NULL) : NULL;
    bool ok = r.status == 200 && cJSON_IsString(k);
    CHECK(ok, "retune n=%d: %ld %s", n, r.status, r.body ? r.body : "");
    snprintf(key, 65, "%s", ok ? k->valuestring : "");
    ht_resp_free(&r);
    return ok;
}

/* The completion channel, end to end: B waits on the op of req(n) whose lease another node
 * holds (planted, 30 s); A re-tunes the op and publishes it with its message. B must be answered
 * with A's kernel by the message, long before its 20 s fallback poll or the lease's expiry. The
 * read-only node (which publishes nothing) gives the op key. */
static void message_wait(ht_daemon *a, ht_daemon *b, ht_daemon *ro, int n, const char *when)
{
    char op[65], k[65], ka[65];
    kernel(ro, n, op, k);
    plant_lease(op, 30000);
    double msg0 = wakeups(b, "message"), poll0 = wakeups(b, "poll");
    double waits0 = status_num(b, "cluster", "lease_waits");
    double hits0 = status_num(b, "cluster", "lease_wait_hits");
    wait_req q = {.d = b, .n = n};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, wait_one, &q) == 0);
    CHECK(wait_for(b, "cluster", "lease_waits", waits0 + 1, 10), "%s: B waits on the lease", when);
    double t0 = now_s();
    retune(a, n, ka);
    pthread_join(th, NULL);
    double took = now_s() - t0;
    printf("%s: the waiting node was answered %.3f s after the other node's re-tune began\n",
           when, took);
    CHECK(q.status == 200 && strcmp(q.origin, "remote") == 0 && strcmp(q.key, ka) == 0,
          "%s: B answered with A's kernel: %ld %s", when, q.status, q.origin);
    /* The counters below say how it was woken; the time only has to be short of the poll
     * (a loaded 2-core machine running the sanitizer build took 6.8 s). */
    CHECK(took < 15, "%s: woken in %.2f s, not by the 20 s poll", when, took);
    CHECK(wakeups(b, "message") > msg0, "%s: woken via a message", when);
    CHECK(wakeups(b, "poll") == poll0, "%s: no poll fired", when);
    CHECK(status_num(b, "cluster", "lease_wait_hits") == hits0 + 1, "%s: a lease-wait hit", when);

    /* A lease released without a kernel: its release message lets B take it over at once. */
    char op2[65], k2[65];
    kernel(ro, n + 8, op2, k2);
    plant_lease(op2, 30000);
    double tk0 = status_num(b, "cluster", "lease_takeovers");
    msg0 = wakeups(b, "message");
    waits0 = status_num(b, "cluster", "lease_waits");
    wait_req q2 = {.d = b, .n = n + 8};
    CHECK(pthread_create(&th, NULL, wait_one, &q2) == 0);
    CHECK(wait_for(b, "cluster", "lease_waits", waits0 + 1, 10), "%s: B waits again", when);
    char chan[128];
    snprintf(chan, sizeof(chan), "hidetd:{%s}:lease", op2);
    CHECK(redis_int("DEL %s", chan) == 1, "lease deleted");
    snprintf(chan, sizeof(chan), "hidetd:{%s}:done", op2);
    t0 = now_s();
    CHECK(redis_int("PUBLISH %s released", chan) >= 2, "%s: a and b subscribed", when);
    pthread_join(th, NULL);
    took = now_s() - t0;
    CHECK(q2.status == 200 && strcmp(q2.origin, "tuned") == 0, "%s: B took over: %ld %s", when,
          q2.status, q2.origin);
    /* As above, the message counter says how B woke; the time (which includes B's own tuning:
     * 7.1 s in the sanitizer build on a loaded 2-core machine) only has to be short of the 20 s
     * poll and the lease's 30 s. */
    CHECK(took < 15 && status_num(b, "cluster", "lease_takeovers") == tk0 + 1,
          "%s: taken over in %.2f s", when, took);
    CHECK(wakeups(b, "message") > msg0, "%s: takeover woken via a message", when);
}

/* One argument of a MONITOR line: the quoted text at *p (sdscatrepr's escapes undone), *p moved
 * past it. NULL at the end of the line. */
static char *monitor_arg(const char **p)
{
    const char *q = strchr(*p, '"');
    if (!q)
        return NULL;
    char *out = malloc(strlen(q) + 1), *o = out;
    if (!out)
        return NULL;
    for (q++; *q && *q != '"'; q++) {
        if (*q != '\\' || !q[1]) {
            *o++ = *q;
            continue;
        }
        q++;
        unsigned v = 0;
        if (*q == 'x' && sscanf(q + 1, "%2x", &v) == 1) {
            *o++ = (char)v;
            q += 2;
        } else {
            *o++ = *q == 'n' ? '\n' : *q == 'r' ? '\r' : *q == 't' ? '\t' : *q;
        }
    }
    *o = 0;
    *p = *q ? q + 1 : q;
    return out;
}

/* A claim that reaches Redis after another node published the op's entry and released its
 * lease (its GET missed just before) must answer from that entry, not take the free lease and
 * tune the op a second time. The race cannot be timed from outside, so its second half is
 * replayed: MONITOR captures the claim script node A sends for a new op; once A has tuned and
 * published it, the same EVAL, sent again, must return the entry and leave no lease. */
static void claim_after_publish(const ht_daemon *a)
{
    redisContext *mon = redis_conn();
    redisReply *r = mon ? redisCommand(mon, "MONITOR") : NULL;
    CHECK(r && r->type == REDIS_REPLY_STATUS, "monitor");
    freeReplyObject(r);
    char op[65], key[65];
    kernel(a, 1216, op, key);
    CHECK(strcmp(last_origin, "tuned") == 0, "claim replay: A tuned the op (%s)", last_origin);
    /* The claim's EVAL names the op's lease key. */
    char lease[128];
    snprintf(lease, sizeof(lease), "hidetd:{%s}:lease", op);
    char *argv[16];
    size_t lens[16];
    int argc = 0;
    for (int i = 0; mon && i < 200 && argc == 0; i++) {
        void *rep = NULL;
        if (redisGetReply(mon, &rep) != REDIS_OK || !rep)
            break;
        redisReply *m = rep;
        if (m->type == REDIS_REPLY_STATUS && strstr(m->str, "\"EVAL\"") && strstr(m->str, lease) &&
            strstr(m->str, "'set'")) {
            const char *p = strstr(m->str, "\"EVAL\"");
            char *arg;
            while (argc < 16 && (arg = monitor_arg(&p)) != NULL) {
                lens[argc] = strlen(arg);
                argv[argc++] = arg;
            }
        }
        freeReplyObject(m);
    }
    if (mon)
        redisFree(mon);
    CHECK(argc >= 5, "claim replay: the claim's EVAL seen (%d arguments)", argc);
    redisContext *c = redis_conn();
    bool released = false;
    for (int i = 0; i < 100 && !released; i++) {
        released = redis_int("EXISTS %s", lease) == 0;
        if (!released)
            usleep(100 * 1000);
    }
    CHECK(c && released, "claim replay: A released its lease");
    r = c && argc >= 5 ? redisCommandArgv(c, argc, (const char **)argv, lens) : NULL;
    CHECK(r && r->type == REDIS_REPLY_STRING, "claim replay: the claim answered the published entry (reply type %d%s%s)",
          r ? r->type : -1, r && r->type == REDIS_REPLY_STATUS ? ": " : "", r && r->type == REDIS_REPLY_STATUS ? r->str : "");
    freeReplyObject(r);
    CHECK(redis_int("EXISTS %s", lease) == 0, "claim replay: no lease taken for a published op");
    for (int i = 0; i < argc; i++)
        free(argv[i]);
    if (c)
        redisFree(c);
}

static void daemon_conf(ht_daemon *d, const char *dir, bool sign)
{
    char conf[2048];
    snprintf(conf, sizeof(conf),
             "[cluster]\nurl = redis://127.0.0.1:%d/0\ntimeout = 500ms\nbackoff_max = 500ms\n"
             "lease = 1500ms\nlease_wait = 60s\nlease_poll = 20s\n"
             "trusted_keys = %s/trusted\n%s%s%s\n",
             redis_port, dir, sign ? "sign_key = " : "", sign ? dir : "", sign ? "/a.key" : "");
    ht_write_config(d, conf);
    ht_arg(d, "--workers");
    ht_arg(d, "none");
}

int main(void)
{
    char *out = NULL;
    if (ht_sh(&out, "command -v redis-server") != 0) {
        printf("SKIP: redis-server is not installed (scripts/setup.sh installs it)\n");
        return 77;
    }
    free(out);
    if (sodium_init() < 0)
        return 1;
    snprintf(redis_dir, sizeof(redis_dir), "/tmp/it_cluster.XXXXXX");
    if (!mkdtemp(redis_dir))
        return 1;
    redis_port = ht_free_port();
    if (redis_start() < 0)
        return 1;
    const char *ctl = getenv("HIDETCTL_BIN");
    int rc = ht_sh(&out, "mkdir -p '%s/trusted' && '%s' keygen --out '%s/a' && "
                         "'%s' keygen --out '%s/b' && cp '%s/a.pub' '%s/trusted/'",
                   redis_dir, ctl, redis_dir, ctl, redis_dir, redis_dir, redis_dir);
    CHECK(rc == 0, "keygen: %s", out ? out : "");
    free(out);

    ht_daemon a, b, ro;
    ht_init(&a);
    ht_init(&b);
    ht_init(&ro);
    daemon_conf(&a, redis_dir, true);
    daemon_conf(&b, redis_dir, true);
    daemon_conf(&ro, redis_dir, false);
    if (ht_start(&a) != 0 || ht_start(&b) != 0 || ht_start(&ro) != 0) {
        redis_kill();
        return ht_finish("it_cluster");
    }
    CHECK(wait_state(&a, "up", 10) && wait_state(&b, "up", 10) && wait_state(&ro, "up", 10),
          "tier up");

    CHECK(wait_subscriber(&a, "up", 10) && wait_subscriber(&b, "up", 10), "subscribers up");
    CHECK(subscriber_is(&ro, "off"), "a read-only node has no subscriber");
    CHECK(metric(&a, "hidetd_cluster_subscriber_up ") == 1, "metrics: subscriber up");

    /* 1. A tunes and publishes; B gets A's kernel as a verified remote hit, without a job. A's
     * tuning sends "entry" (after the SET) then "released" (after the DEL of its lease) on the
     * op's completion channel. */
    redisContext *sub = redis_conn();
    redisReply *sr = sub ? redisCommand(sub, "PSUBSCRIBE hidetd:{*}:done") : NULL;
    CHECK(sr && sr->type == REDIS_REPLY_ARRAY, "test subscriber");
    freeReplyObject(sr);
    char op1[65], k1a[65], k1b[65];
    kernel(&a, 128, op1, k1a);
    {
        const char *want[2] = {"entry", "released"};
        char chan[128];
        snprintf(chan, sizeof(chan), "hidetd:{%s}:done", op1);
        for (int i = 0; sub && i < 2; i++) {
            void *rp = NULL;
            bool ok = redisGetReply(sub, &rp) == REDIS_OK && rp;
            redisReply *m = rp;
            ok = ok && m->type == REDIS_REPLY_ARRAY && m->elements == 4 &&
                 strcmp(m->element[2]->str, chan) == 0 && strcmp(m->element[3]->str, want[i]) == 0;
            CHECK(ok, "message %d on %s: %s", i, chan,
                  m && m->type == REDIS_REPLY_ARRAY && m->elements == 4 ? m->element[3]->str : "?");
            freeReplyObject(rp);
        }
        if (sub)
            redisFree(sub);
    }
    CHECK(strcmp(last_origin, "tuned") == 0, "A: origin %s", last_origin);
    CHECK(wait_for(&a, "cluster", "publishes", 1, 10), "A published");
    size_t len = 0;
    char *v = entry_get(op1, &len);
    CHECK(v && strncmp(v, "hidetd-cluster-entry 1\ned25519 ", 31) == 0, "entry in Redis");
    free(v);
    kernel(&b, 128, op1, k1b);
    CHECK(strcmp(k1a, k1b) == 0, "B serves A's kernel");
    CHECK(strcmp(last_origin, "remote") == 0, "B: origin %s", last_origin);
    CHECK(status_num(&b, "cluster", "hits") == 1, "B: one remote hit");
    CHECK(status_num(&b, "jobs", "done") == 0, "B tuned nothing");
    /* Now local on B: served again without asking Redis. */
    kernel(&b, 128, op1, k1b);
    CHECK(status_num(&b, "cluster", "hits") == 1, "B: second request local");
    CHECK(strcmp(last_origin, "local") == 0, "B again: origin %s", last_origin);
    CHECK(metric(&b, "hidetd_cluster_hits_total ") == 1, "metrics hits");

    /* 1b. "retune": true on B: tuned again though stored, and the pinned entry is replaced. */
    {
        double jobs = status_num(&b, "jobs", "done"), pubs = status_num(&b, "cluster", "publishes");
        char *body = NULL;
        CHECK(asprintf(&body, "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[64,64],\"dtype\":"
                              "\"f16\"},{\"shape\":[64,128],\"dtype\":\"f16\"}],\"arch\":\"sm_90\","
                              "\"tune\":\"none\",\"retune\":true}") > 0);
        ht_resp r = ht_post(&b, "/v1/kernels", body);
        const cJSON *o = r.json ? jpath(r.json, "origin", NULL) : NULL;
        CHECK(r.status == 200 && cJSON_IsString(o) && strcmp(o->valuestring, "tuned") == 0,
              "retune: %ld %s", r.status, r.body ? r.body : "");
        ht_resp_free(&r);
        free(body);
        CHECK(status_num(&b, "jobs", "done") == jobs + 1, "retune ran a job");
        CHECK(wait_for(&b, "cluster", "publishes", pubs + 1, 10), "retune replaced the entry");
        CHECK(status_num(&b, "cluster", "publish_pinned") == 0, "not refused as pinned");
    }

    /* 2. Rejections: each entry A published is damaged in Redis before B asks. */
    struct {
        int n;
        const char *reason;
    } bad[] = {{256, "bad_signature"}, {320, "untrusted"}, {384, "unsigned"}};
    double jobs_b = status_num(&b, "jobs", "done");
    for (size_t i = 0; i < 3; i++) {
        char op[65], ka[65], kb[65];
        double pubs = status_num(&a, "cluster", "publishes");
        kernel(&a, bad[i].n, op, ka);
        CHECK(wait_for(&a, "cluster", "publishes", pubs + 1, 10), "A published %d", bad[i].n);
        v = entry_get(op, &len);
        CHECK(v != NULL, "entry %d", bad[i].n);
        if (!v)
            continue;
        char *nv = NULL;
        size_t nl = len;
        if (i == 0) {
            v[len - 40] ^= 0x01; /* one flipped byte inside the record */
            nv = v;
            v = NULL;
        } else if (i == 1) {
            char kf[300];
            snprintf(kf, sizeof(kf), "%s/b.key", redis_dir);
            nv = resign(v, len, kf, &nl);
        } else {
            const char *rec = strchr(strchr(v, '\n') + 1, '\n') + 1;
            nl = (size_t)asprintf(&nv, "hidetd-cluster-entry 1\n%s", rec);
        }
        CHECK(nv != NULL, "forged %d", bad[i].n);
        if (nv)
            entry_set(op, nv, nl);
        free(nv);
        free(v);
        kernel(&b, bad[i].n, op, kb);
        CHECK(strcmp(last_origin, "tuned") == 0, "%s: origin %s", bad[i].reason, last_origin);
        char line[128];
        snprintf(line, sizeof(line), "hidetd_cluster_rejected_total{reason=\"%s\"} ",
                 bad[i].reason);
        CHECK(metric(&b, line) == 1, "%s counted", bad[i].reason);
        CHECK(wait_for(&b, "jobs", "done", jobs_b + 1, 10), "%s: B tuned it", bad[i].reason);
        jobs_b = status_num(&b, "jobs", "done");
        CHECK(ht_log_contains(&b, bad[i].reason), "%s logged", bad[i].reason);
    }
    CHECK(status_num(&b, "cluster", "hits") == 1, "no rejected entry was a hit");

    /* 3. A read-only node tunes and publishes nothing. */
    char op5[65], k5[65];
    kernel(&ro, 448, op5, k5);
    CHECK(wait_for(&ro, "jobs", "done", 1, 10), "read-only node tuned");
    usleep(300 * 1000);
    v = entry_get(op5, &len);
    CHECK(v == NULL, "read-only node published nothing");
    free(v);
    CHECK(status_num(&ro, "cluster", "publishes") == 0, "read-only: no publishes");
    /* ...but reads: A's first kernel is a remote hit there too. */
    char kro[65], opx[65];
    kernel(&ro, 128, opx, kro);
    CHECK(strcmp(kro, k1a) == 0 && status_num(&ro, "cluster", "hits") == 1, "read-only reads");

    /* 4. Tune once per fleet: 20 concurrent identical requests over both daemons, one job. */
    double jobs0 = status_num(&a, "jobs", "done") + status_num(&b, "jobs", "done");
    double hits0 = status_num(&a, "cluster", "hits") + status_num(&b, "cluster", "hits");
    burst_req burst[20];
    pthread_t th[20];
    for (int i = 0; i < 20; i++) {
        burst[i].d = i % 2 ? &b : &a;
        burst[i].status = 0;
        CHECK(pthread_create(&th[i], NULL, burst_one, &burst[i]) == 0);
    }
    for (int i = 0; i < 20; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 20; i++)
        CHECK(burst[i].status == 200 && strcmp(burst[i].key, burst[0].key) == 0,
              "burst %d: %ld", i, burst[i].status);
    double jobs1 = status_num(&a, "jobs", "done") + status_num(&b, "jobs", "done");
    CHECK(jobs1 == jobs0 + 1, "tuned once in the fleet: %g jobs", jobs1 - jobs0);
    /* The node without the lease waited on it, or (when its requests came late) found the
     * published kernel at once: either way it answered from Redis. */
    double hits1 = status_num(&a, "cluster", "hits") + status_num(&b, "cluster", "hits");
    CHECK(hits1 >= hits0 + 1, "the other node took the kernel from Redis");
    CHECK(metric(&a, "hidetd_cluster_leases_held ") == 0 && metric(&b, "hidetd_cluster_leases_held ") == 0,
          "leases released");

    /* 4b. The completion channel wakes a waiting node. */
    message_wait(&a, &b, &ro, 1088, "channel");

    /* 4c. A claim after the op was published answers from the entry (the burst's race). */
    claim_after_publish(&a);

    /* 5. A lease left by a node that died: the op waits at most the lease time (1.5 s), then
     * the lease is taken over and the op tuned here. The read-only node gives the op key. */
    char op8[65], k8[65];
    kernel(&ro, 832, op8, k8);
    plant_lease(op8, 1500);
    double t0 = now_s(), tk = status_num(&a, "cluster", "lease_takeovers");
    kernel(&a, 832, op8, k8);
    double waited = now_s() - t0;
    CHECK(strcmp(last_origin, "tuned") == 0, "taken over and tuned: %s", last_origin);
    CHECK(waited >= 1.0 && waited < 20, "waited %.2f s for the dead node's lease", waited);
    CHECK(status_num(&a, "cluster", "lease_takeovers") == tk + 1, "takeover counted");

    /* 6. Redis full: the publish fails (OOM), is counted, and the node serves and tunes on. */
    CHECK(redis_ok("CONFIG SET maxmemory 1"), "maxmemory");
    double dropped = status_num(&a, "cluster", "publish_dropped");
    char op9[65], k9[65];
    kernel(&a, 896, op9, k9);
    CHECK(strcmp(last_origin, "tuned") == 0, "tuned with Redis full");
    CHECK(wait_for(&a, "cluster", "publish_dropped", dropped + 1, 10), "publish dropped (OOM)");
    CHECK(redis_ok("CONFIG SET maxmemory 0"), "maxmemory back");

    /* 7. Redis stops answering (CLIENT PAUSE): the lookup times out after 500 ms, the request is
     * tuned here without waiting for Redis, and the tier reconnects once Redis answers again. */
    double timeouts = status_num(&a, "cluster", "timeouts");
    /* Paused well beyond a loaded machine's tuning time (5.9 s once, in the sanitizer build under
     * the whole suite), so an answer before the pause ends was not waiting for Redis. */
    CHECK(redis_ok("CLIENT PAUSE 12000 ALL"), "pause");
    t0 = now_s();
    kernel(&a, 960, op9, k9);
    double took = now_s() - t0;
    CHECK(strcmp(last_origin, "tuned") == 0 && took < 11, "answered in %.2f s while Redis hung",
          took);
    printf("answered in %.2f s while Redis did not answer for 12 s\n", took);
    CHECK(status_num(&a, "cluster", "timeouts") >= timeouts + 1, "timeout counted");
    CHECK(wait_state(&a, "up", 25), "tier back after the pause");

    /* 8. redis-server killed: both serve their caches and tune locally. */
    redis_kill();
    char opk[65], kk[65];
    kernel(&b, 128, opk, kk);
    CHECK(strcmp(kk, k1a) == 0 && strcmp(last_origin, "local") == 0,
          "B serves its cache with Redis down");
    double jobs_a = status_num(&a, "jobs", "done");
    kernel(&a, 512, opk, kk);
    CHECK(status_num(&a, "jobs", "done") == jobs_a + 1, "A tunes locally with Redis down");
    kernel(&b, 576, opk, kk);
    CHECK(wait_state(&a, "down", 5) || wait_state(&a, "connecting", 1), "A sees the tier down");
    CHECK(metric(&a, "hidetd_cluster_up ") == 0, "metrics: down");
    CHECK(metric(&a, "hidetd_cluster_subscriber_up ") == 0, "metrics: subscriber down");

    /* 9. redis-server back (empty): the tier reconnects and publishes again. */
    CHECK(redis_start() == 0, "redis restarted");
    CHECK(wait_state(&a, "up", 10) && wait_state(&b, "up", 10), "tier back");
    double pubs = status_num(&a, "cluster", "publishes");
    char op7[65], k7a[65], k7b[65];
    kernel(&a, 640, op7, k7a);
    CHECK(wait_for(&a, "cluster", "publishes", pubs + 1, 10), "A publishes after the restart");
    double hits_b = status_num(&b, "cluster", "hits");
    kernel(&b, 640, op7, k7b);
    CHECK(strcmp(k7a, k7b) == 0 && strcmp(last_origin, "remote") == 0 &&
          status_num(&b, "cluster", "hits") == hits_b + 1, "B: remote hit after the restart");

    /* 9b. The subscribers are back too, and a wait is woken by a message again. */
    CHECK(wait_subscriber(&a, "up", 10) && wait_subscriber(&b, "up", 10), "subscribers back");
    CHECK(metric(&b, "hidetd_cluster_subscriber_up ") == 1, "metrics: subscriber back up");
    CHECK(status_num(&b, "cluster", "subscriber_connects") >= 2, "B resubscribed");
    message_wait(&a, &b, &ro, 1152, "after the restart");

    /* 10. hidetctl cache retune KEY (a prefix of the key, as cache ls shows it) on A: the daemon
     * tunes the op again and replaces the fleet's pinned entry (a stale value planted here: a SET
     * NX would have kept it). Without --cache, hidetctl looks KEY up in the daemon's own cache
     * file (/v1/status cache.path). */
    {
        char op10[65], k10[65], k10b[65];
        pubs = status_num(&a, "cluster", "publishes");
        kernel(&a, 1280, op10, k10);
        CHECK(wait_for(&a, "cluster", "publishes", pubs + 1, 10), "A published 1280");
        entry_set(op10, "stale", 5);
        double jobs = status_num(&a, "jobs", "done");
        pubs = status_num(&a, "cluster", "publishes");
        rc = ht_sh(&out, "'%s' --socket '%s' --json cache retune %.12s 2>&1", ctl, a.socket, k10);
        cJSON *ans = out ? cJSON_Parse(out) : NULL;
        const cJSON *ak = jpath(ans, "key", NULL), *ao = jpath(ans, "origin", NULL);
        CHECK(rc == 0 && cJSON_IsString(ak) && strcmp(ak->valuestring, k10) == 0 &&
                  cJSON_IsString(ao) && strcmp(ao->valuestring, "tuned") == 0,
              "cache retune: rc %d: %s", rc, out ? out : "");
        cJSON_Delete(ans);
        free(out);
        CHECK(status_num(&a, "jobs", "done") == jobs + 1, "cache retune ran a job");
        CHECK(wait_for(&a, "cluster", "publishes", pubs + 1, 10), "cache retune published");
        v = entry_get(op10, &len);
        CHECK(v && strncmp(v, "hidetd-cluster-entry 1\ned25519 ", 31) == 0,
              "the pinned entry was replaced: %.20s", v ? v : "(none)");
        free(v);
        char path[128];
        snprintf(path, sizeof(path), "/v1/kernels/%s", k10);
        ht_resp kr = ht_get(&a, path);
        CHECK(kr.status == 200, "the re-tuned artifact is served: %ld", kr.status);
        ht_resp_free(&kr);
        /* B takes the replaced entry from Redis. */
        kernel(&b, 1280, op10, k10b);
        CHECK(strcmp(k10b, k10) == 0 && strcmp(last_origin, "remote") == 0,
              "B reads the re-tuned entry: %s", last_origin);

        /* --no-wait: answered with the job at once; the job runs on. */
        jobs = status_num(&a, "jobs", "done");
        rc = ht_sh(&out, "'%s' --socket '%s' cache retune --no-wait %s 2>&1", ctl, a.socket, k10);
        CHECK(rc == 0 && out && strstr(out, "as job"), "retune --no-wait: rc %d: %s", rc,
              out ? out : "");
        free(out);
        CHECK(wait_for(&a, "jobs", "done", jobs + 1, 10), "the --no-wait retune ran");

        /* A fused op (prologue with an operand, bias, gelu tanh, cast): the request hidetctl
         * rebuilds from the stored canonical op is the same op (the daemon answers the same key). */
        const char *fused =
            "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[64,64],\"dtype\":\"f16\"},"
            "{\"shape\":[64,96],\"dtype\":\"f16\"},{\"shape\":[64,64],\"dtype\":\"f16\"},"
            "{\"shape\":[96],\"dtype\":\"f16\"}],\"prologue\":[{\"input\":0,\"op\":\"mul\","
            "\"operand\":2},{\"input\":1,\"op\":\"neg\"}],\"epilogue\":[{\"op\":\"bias\","
            "\"input\":3},{\"op\":\"gelu\",\"approximate\":\"tanh\"},{\"op\":\"cast\","
            "\"dtype\":\"f32\"}],\"arch\":\"sm_90\",\"tune\":\"none\"}";
        ht_resp fr = ht_post(&a, "/v1/kernels", fused);
        const cJSON *fk = fr.json ? jpath(fr.json, "key", NULL) : NULL;
        char kf[65] = "";
        snprintf(kf, sizeof(kf), "%s", cJSON_IsString(fk) ? fk->valuestring : "");
        CHECK(fr.status == 200 && kf[0], "fused: %ld %s", fr.status, fr.body ? fr.body : "");
        ht_resp_free(&fr);
        jobs = status_num(&a, "jobs", "done");
        rc = ht_sh(&out, "'%s' --socket '%s' cache retune %s 2>&1", ctl, a.socket, kf);
        CHECK(rc == 0 && out && strstr(out, "re-tuned") && strstr(out, kf) && !strstr(out, "note"),
              "fused retune: rc %d: %s", rc, out ? out : "");
        free(out);
        CHECK(status_num(&a, "jobs", "done") == jobs + 1, "the fused retune ran a job");

        /* An unknown key: a clear message, exit 4 (not found). */
        rc = ht_sh(&out, "'%s' --socket '%s' cache retune 0123abcd 2>&1", ctl, a.socket);
        CHECK(rc == 4 && out && strstr(out, "no artifact 0123abcd"), "unknown key: rc %d: %s", rc,
              out ? out : "");
        free(out);
        /* No daemon at the address: the message names it, exit 3. */
        rc = ht_sh(&out, "'%s' --socket '%s/none.sock' cache retune %s 2>&1", ctl, redis_dir, k10);
        CHECK(rc == 3 && out && strstr(out, "none.sock"), "no daemon: rc %d: %s", rc,
              out ? out : "");
        free(out);
    }

    ht_stop(&a, SIGTERM);
    ht_stop(&b, SIGTERM);
    ht_stop(&ro, SIGTERM);
    ht_cleanup(&a);
    ht_cleanup(&b);
    ht_cleanup(&ro);
    redis_kill();
    ht_sh(NULL, "rm -rf '%s'", redis_dir);
    return ht_finish("it_cluster");
}
