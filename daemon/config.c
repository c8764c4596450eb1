/* daemon/config.c - see config.h. */
#include "daemon/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hidetd_config.h"

/* ---- small helpers --------------------------------------------------------------------- */

static char *fmt_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *fmt_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

static void set_err(char **ret_err, char *msg)
{
    if (ret_err)
        *ret_err = msg;
    else
        free(msg);
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

static int replace_str(char **slot, const char *value)
{
    char *d = NULL;
    if (value) {
        d = strdup(value);
        if (!d)
            return -ENOMEM;
    }
    free(*slot);
    *slot = d;
    return 0;
}

/* ---- value parsers ---------------------------------------------------------------------- */

int hd_parse_bool(const char *s, bool *ret)
{
    static const char *const yes[] = { "true", "yes", "on", "1" };
    static const char *const no[] = { "false", "no", "off", "0" };
    if (!s || !ret)
        return -EINVAL;
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *ret = true;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *ret = false;
            return 0;
        }
    }
    return -EINVAL;
}

/* A non-negative decimal number ("12", "1.5"); no sign, no exponent, no hex (strtod accepts
 * too much: "inf", "0x10", " 1"). Returns the end or NULL. */
static const char *parse_number(const char *s, double *ret)
{
    const char *p = s;
    if (!isdigit((unsigned char)*p))
        return NULL;
    while (isdigit((unsigned char)*p))
        p++;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p))
            return NULL;
        while (isdigit((unsigned char)*p))
            p++;
    }
    char buf[64];
    size_t n = (size_t)(p - s);
    if (n >= sizeof(buf))
        return NULL;
    memcpy(buf, s, n);
    buf[n] = '\0';
    *ret = strtod(buf, NULL);
    return p;
}

int hd_parse_size(const char *s, uint64_t *ret)
{
    static const struct {
        const char *unit;
        double mult;
    } units[] = {
        { "", 1 },          { "B", 1 },
        { "K", 1024.0 },    { "KiB", 1024.0 },  { "KB", 1e3 },
        { "M", 1048576.0 }, { "MiB", 1048576.0 }, { "MB", 1e6 },
        { "G", 1073741824.0 }, { "GiB", 1073741824.0 }, { "GB", 1e9 },
        { "T", 1099511627776.0 }, { "TiB", 1099511627776.0 }, { "TB", 1e12 },
    };
    if (!s || !ret)
        return -EINVAL;
    double v;
    const char *p = parse_number(s, &v);
    if (!p)
        return -EINVAL;
    while (*p == ' ')
        p++;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(p, units[i].unit) == 0) {
            double b = v * units[i].mult;
            /* Fractions of a byte make no sense; sizes beyond 2^62 neither. */
            if (b != floor(b) || b > 4611686018427387904.0)
                return -EINVAL;
            *ret = (uint64_t)b;
            return 0;
        }
    }
    return -EINVAL;
}

int hd_parse_duration(const char *s, double *ret_seconds)
{
    static const struct {
        const char *unit;
        double mult;
    } units[] = {
        /* Longest first so "ms" is not read as "m" followed by garbage. */
        { "min", 60 }, { "ms", 1e-3 }, { "s", 1 }, { "m", 60 }, { "h", 3600 }, { "d", 86400 },
    };
    if (!s || !ret_seconds || !*s)
        return -EINVAL;
    double total = 0;
    const char *p = s;
    int parts = 0;
    while (*p) {
        double v;
        const char *q = parse_number(p, &v);
        if (!q)
            return -EINVAL;
        p = q;
        parts++;
        if (*p == '\0') {
            /* A bare number is seconds, but only on its own: "1m30" is ambiguous. */
            if (parts > 1)
                return -EINVAL;
            total += v;
            break;
        }
        size_t i;
        for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
            size_t ul = strlen(units[i].unit);
            if (strncmp(p, units[i].unit, ul) == 0 &&
                (p[ul] == '\0' || isdigit((unsigned char)p[ul]))) {
                total += v * units[i].mult;
                p += ul;
                break;
            }
        }
        if (i == sizeof(units) / sizeof(units[0]))
            return -EINVAL;
    }
    if (!isfinite(total) || total > 1e9)
        return -EINVAL;
    *ret_seconds = total;
    return 0;
}

static int parse_int(const char *s, long min, long max, int *ret)
{
    if (!s || !*s)
        return -EINVAL;
    const char *p = s;
    if (*p == '-')
        p++;
    if (!isdigit((unsigned char)*p))
        return -EINVAL;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -EINVAL;
    *ret = (int)v;
    return 0;
}

static int parse_mode(const char *s, unsigned *ret)
{
    if (!s || !*s || strlen(s) > 4)
        return -EINVAL;
    unsigned v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '7')
            return -EINVAL;
        v = v * 8 + (unsigned)(*p - '0');
    }
    if (v > 0777)
        return -EINVAL;
    *ret = v;
    return 0;
}

static int parse_workers_mode(const char *s, hd_workers_mode *ret)
{
    static const char *const names[] = { "auto", "none", "standin", "path" };
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, names[i]) == 0) {
            *ret = (hd_workers_mode)i;
            return 0;
        }
    }
    return -EINVAL;
}

const char *hd_workers_mode_name(hd_workers_mode m)
{
    static const char *const names[] = { "auto", "none", "standin", "path" };
    return (unsigned)m < 4 ? names[m] : "?";
}

bool hd_host_is_loopback(const char *host)
{
    if (!host)
        return false;
    if (strcasecmp(host, "localhost") == 0)
        return true;
    struct in_addr a4;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    struct in6_addr a6;
    if (inet_pton(AF_INET6, host, &a6) == 1) {
        static const unsigned char lo[16] = { [15] = 1 };
        if (memcmp(a6.s6_addr, lo, 16) == 0)
            return true;
        /* ::ffff:127.x.y.z */
        static const unsigned char mapped[12] = { [10] = 0xff, [11] = 0xff };
        return memcmp(a6.s6_addr, mapped, 12) == 0 && a6.s6_addr[12] == 127;
    }
    return false;
}

int hd_parse_http_addr(const char *s, char *host, size_t host_len, int *ret_port)
{
    if (!s || !*s || !host || host_len < 2 || !ret_port)
        return -EINVAL;
    char h[256];
    const char *port_s;
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':' || (size_t)(close - s - 1) >= sizeof(h) || close == s + 1)
            return -EINVAL;
        memcpy(h, s + 1, (size_t)(close - s - 1));
        h[close - s - 1] = '\0';
        struct in6_addr a6;
        if (inet_pton(AF_INET6, h, &a6) != 1)
            return -EINVAL;
        port_s = close + 2;
    } else {
        const char *colon = strrchr(s, ':');
        if (!colon) {
            snprintf(h, sizeof(h), "127.0.0.1");
            port_s = s;
        } else {
            if (colon == s || (size_t)(colon - s) >= sizeof(h) || memchr(s, ':', (size_t)(colon - s)))
                return -EINVAL; /* IPv6 literals need brackets */
            memcpy(h, s, (size_t)(colon - s));
            h[colon - s] = '\0';
            for (const char *p = h; *p; p++)
                if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-')
                    return -EINVAL;
            port_s = colon + 1;
        }
    }
    int port;
    if (parse_int(port_s, 0, 65535, &port) < 0 || port_s[0] == '-')
        return -EINVAL;
    if (strlen(h) >= host_len)
        return -EINVAL;
    strcpy(host, h);
    *ret_port = port;
    return 0;
}

/* ---- defaults --------------------------------------------------------------------------- */

/* The socket hidetd listens on without --socket or [server] socket: rule 1 and 4 of
 * libhidet-client's hidet_default_address() (clients/c/include/hidet/client.h), so that a client
 * given no address finds a daemon given none. Rules 2 and 3 (a socket that already exists) are
 * the clients' alone: the system service gets its socket from hidetd.socket. $HIDETD_SOCKET
 * may be "unix:PATH"; a URL in it is for clients and is ignored here. */
static char *default_socket(void)
{
    const char *e = getenv("HIDETD_SOCKET");
    const char *rt = getenv("XDG_RUNTIME_DIR"), *xc = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    char *s = NULL;

    if (e && *e && !strstr(e, "://"))
        return strdup(strncmp(e, "unix:", 5) == 0 ? e + 5 : e);
    if (rt && rt[0] == '/')
        return asprintf(&s, "%s/hidetd.sock", rt) < 0 ? NULL : s;
    if (xc && xc[0] == '/')
        return asprintf(&s, "%s/hidetd/hidetd.sock", xc) < 0 ? NULL : s;
    if (home && home[0] == '/')
        return asprintf(&s, "%s/.cache/hidetd/hidetd.sock", home) < 0 ? NULL : s;
    return strdup("./hidetd.sock");
}

int hd_config_init(hd_config *c)
{
    if (!c)
        return -EINVAL;
    memset(c, 0, sizeof(*c));
    char *sock = default_socket(), *cache = NULL;
    const char *xc = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (xc && xc[0] == '/') {
        if (asprintf(&cache, "%s/hidetd/kernels.db", xc) < 0)
            cache = NULL;
    } else if (home && home[0] == '/') {
        if (asprintf(&cache, "%s/.cache/hidetd/kernels.db", home) < 0)
            cache = NULL;
    } else {
        /* No home at all (a bare service account): keep the cache beside the working dir. */
        cache = strdup("./kernels.db");
    }
    if (!sock || !cache) {
        free(sock);
        free(cache);
        return -ENOMEM;
    }
    c->socket = sock;
    c->socket_mode = 0660;
    c->tcp_auth = true;
    c->max_body = 1024 * 1024;
    c->max_connections = 1024;
    c->header_timeout = 5;
    c->tcp_unauthenticated_connections = 64;
    c->tcp_unauthenticated_header_timeout = 2;
    c->request_timeout = 10;
    c->idle_timeout = 60;
    c->cache_path = cache;
    /* A cache without a bound grows until the disk is full; 10 GiB holds hundreds of thousands
     * of kernels (a few tens of KiB each) and is pruned least recently used first. */
    c->cache_max_size = HD_DEFAULT_CACHE_MAX_SIZE;
    /* Graph partitions and plans kept in memory, and the graph threads: the defaults of
     * graph/service.h. */
    c->graph_cache_bytes = 256ull << 20;
    c->graph_max_running = 2;
    c->graph_max_queued = 32;
    c->default_mode = TUNER_TUNE_MODEL;
    c->default_arch = (hd_arch_choice){.native = true, .target = tuner_target_of(TUNER_TARGET_SM90)};
    c->budget_seconds = 60;
    c->budget_candidates = 128;
    c->fused_retime_top = 5;
    c->measure_requires_gpu = false;
    c->max_queued_jobs = 1024;
    c->max_running_jobs = 4;
    c->workers = HD_WORKERS_AUTO;
    c->launch_timeout = 2;
    c->heartbeat = 1;
    c->max_restarts = 5;
    c->log_level = HD_LOG_INFO;
    c->grace = 30;
    /* Entries live a month: long enough that a fleet tunes each op about once, short enough
     * that kernels of retired toolchains (their op keys change) leave Redis by themselves. */
    c->cluster_ttl = 30 * 86400;
    c->cluster_timeout = 1;
    c->cluster_backoff_max = 30;
    /* A node that dies holding a lease delays the others at most this long. */
    c->cluster_lease = 30;
    c->cluster_lease_wait = 600;
    c->cluster_lease_poll = 1;
    return 0;
}

void hd_config_clear(hd_config *c)
{
    if (!c)
        return;
    free(c->socket);
    free(c->http);
    free(c->token);
    free(c->token_file);
    free(c->allowed_hosts);
    free(c->cache_path);
    free(c->workers_path);
    free(c->cluster_url);
    free(c->cluster_prefix);
    free(c->cluster_sign_key);
    free(c->cluster_trusted_keys);
    memset(c, 0, sizeof(*c));
}

int hd_config_copy(const hd_config *src, hd_config *ret)
{
    if (!src || !ret)
        return -EINVAL;
    hd_config c = *src;
    c.socket = dup_or_null(src->socket);
    c.http = dup_or_null(src->http);
    c.token = dup_or_null(src->token);
    c.token_file = dup_or_null(src->token_file);
    c.allowed_hosts = dup_or_null(src->allowed_hosts);
    c.cache_path = dup_or_null(src->cache_path);
    c.workers_path = dup_or_null(src->workers_path);
    c.cluster_url = dup_or_null(src->cluster_url);
    c.cluster_prefix = dup_or_null(src->cluster_prefix);
    c.cluster_sign_key = dup_or_null(src->cluster_sign_key);
    c.cluster_trusted_keys = dup_or_null(src->cluster_trusted_keys);
    if ((src->socket && !c.socket) || (src->http && !c.http) || (src->token && !c.token) ||
        (src->token_file && !c.token_file) || (src->allowed_hosts && !c.allowed_hosts) ||
        (src->cache_path && !c.cache_path) ||
        (src->workers_path && !c.workers_path) || (src->cluster_url && !c.cluster_url) ||
        (src->cluster_prefix && !c.cluster_prefix) ||
        (src->cluster_sign_key && !c.cluster_sign_key) ||
        (src->cluster_trusted_keys && !c.cluster_trusted_keys)) {
        hd_config_clear(&c);
        return -ENOMEM;
    }
    *ret = c;
    return 0;
}

/* ---- the key table ---------------------------------------------------------------------- */

typedef enum {
    K_STR,      /* string, may be empty (-> NULL) */
    K_PATH,     /* non-empty string */
    K_HTTP,     /* "[HOST:]PORT" or "off"/"" (-> NULL) */
    K_MODE,
    K_SIZE,
    K_DUR,
    K_INT,
    K_BOOL,
    K_LEVEL,
    K_TUNE,
    K_ARCH,     /* "native" or a target name */
    K_WORKERS,
    K_AUTH,     /* "token" (true) or "none" (false) */
} key_type;

typedef struct key_def {
    const char *section, *key;
    key_type type;
    size_t off;
    bool live;
    double min, max; /* K_DUR, K_INT (inclusive); K_DUR min is exclusive when min_open */
    bool min_open;
    const char *hint; /* what a good value looks like */
} key_def;

#define O(f) offsetof(hd_config, f)
static const key_def keys[] = {
    { "server", "socket", K_PATH, O(socket), false, 0, 0, false, "a socket path" },
    { "server", "socket_mode", K_MODE, O(socket_mode), false, 0, 0, false, "octal, e.g. 0660" },
    { "server", "http", K_HTTP, O(http), false, 0, 0, false, "[HOST:]PORT or off" },
    { "server", "tcp_auth", K_AUTH, O(tcp_auth), true, 0, 0, false, "token or none" },
    { "server", "token", K_STR, O(token), true, 0, 0, false, "a bearer token" },
    { "server", "token_file", K_STR, O(token_file), true, 0, 0, false, "a file path" },
    { "server", "allowed_hosts", K_STR, O(allowed_hosts), true, 0, 0, false, "host names separated by spaces or commas" },
    { "server", "max_body", K_SIZE, O(max_body), true, 1, 1073741824.0, false, "a size, e.g. 1MiB (at most 1GiB)" },
    { "server", "max_connections", K_INT, O(max_connections), true, 1, 1000000, false, "an integer 1..1000000" },
    { "server", "unix_max_connections", K_INT, O(unix_max_connections), true, 0, 1000000, false, "an integer 0..1000000 (0: max_connections)" },
    { "server", "tcp_max_connections", K_INT, O(tcp_max_connections), true, 0, 1000000, false, "an integer 0..1000000 (0: max_connections)" },
    { "server", "max_connections_per_client", K_INT, O(max_connections_per_client), true, 0, 1000000, false, "an integer 0..1000000 (0: half of the listener limit)" },
    { "server", "tcp_unauthenticated_connections", K_INT, O(tcp_unauthenticated_connections), true, 1, 1000000, false, "an integer 1..1000000" },
    { "server", "tcp_unauthenticated_header_timeout", K_DUR, O(tcp_unauthenticated_header_timeout), true, 0, 86400, true, "a duration > 0, e.g. 2s" },
    { "server", "header_timeout", K_DUR, O(header_timeout), true, 0, 86400, true, "a duration > 0, e.g. 5s" },
    { "server", "request_timeout", K_DUR, O(request_timeout), true, 0, 86400, true, "a duration > 0, e.g. 10s" },
    { "server", "idle_timeout", K_DUR, O(idle_timeout), true, 0, 86400, true, "a duration > 0, e.g. 60s" },
    { "cache", "path", K_PATH, O(cache_path), false, 0, 0, false, "a database path" },
    { "cache", "max_size", K_SIZE, O(cache_max_size), true, 0, 4611686018427387904.0, false, "a size, e.g. 10GiB (0: unlimited)" },
    { "graphs", "cache_bytes", K_SIZE, O(graph_cache_bytes), false, 1048576.0, 4611686018427387904.0, false, "a size of at least 1MiB, e.g. 256MiB" },
    { "graphs", "max_running", K_INT, O(graph_max_running), false, 1, 1024, false, "an integer 1..1024" },
    { "graphs", "max_queued", K_INT, O(graph_max_queued), false, 0, 100000, false, "an integer 0..100000" },
    { "tuning", "default_mode", K_TUNE, O(default_mode), true, 0, 0, false, "none, model or measure" },
    { "tuning", "default_arch", K_ARCH, O(default_arch), true, 0, 0, false, "native or an arch such as sm_90" },
    { "tuning", "budget_seconds", K_DUR, O(budget_seconds), true, 0, 86400, true, "a duration > 0, e.g. 60s" },
    { "tuning", "budget_candidates", K_INT, O(budget_candidates), true, 1, 100000, false, "an integer 1..100000" },
    { "tuning", "fused_retime_top", K_INT, O(fused_retime_top), true, 0, 1000, false, "an integer 0..1000" },
    { "tuning", "measure_requires_gpu", K_BOOL, O(measure_requires_gpu), true, 0, 0, false, "true or false" },
    { "tuning", "max_queued_jobs", K_INT, O(max_queued_jobs), true, 1, 10000000, false, "an integer 1..10000000" },
    { "tuning", "max_running_jobs", K_INT, O(max_running_jobs), true, 1, 1024, false, "an integer 1..1024" },
    { "tuning", "max_queued_jobs_per_client", K_INT, O(max_queued_jobs_per_client), true, 0, 10000000, false, "an integer 0..10000000 (0: half of max_queued_jobs)" },
    { "tuning", "max_blocking_jobs_per_client", K_INT, O(max_blocking_jobs_per_client), true, 0, 10000000, false, "an integer 0..10000000 (0: a quarter of max_queued_jobs)" },
    { "workers", "mode", K_WORKERS, O(workers), false, 0, 0, false, "auto, none, standin or path" },
    { "workers", "path", K_PATH, O(workers_path), false, 0, 0, false, "the worker binary's path" },
    { "workers", "launch_timeout", K_DUR, O(launch_timeout), false, 0, 3600, true, "a duration > 0, e.g. 2s" },
    { "workers", "heartbeat", K_DUR, O(heartbeat), false, 0, 3600, true, "a duration > 0, e.g. 1s" },
    { "workers", "max_restarts", K_INT, O(max_restarts), false, 0, 1000, false, "an integer 0..1000" },
    { "log", "level", K_LEVEL, O(log_level), true, 0, 0, false, "debug, info, warn or error" },
    { "shutdown", "grace", K_DUR, O(grace), true, 0, 86400, false, "a duration >= 0, e.g. 30s" },
    { "cluster", "url", K_STR, O(cluster_url), false, 0, 0, false, "redis://[USER:PASSWORD@]HOST[:PORT][/DB], unix://PATH or empty (off)" },
    { "cluster", "prefix", K_STR, O(cluster_prefix), false, 0, 0, false, "a key prefix, e.g. hidetd" },
    { "cluster", "ttl", K_DUR, O(cluster_ttl), false, 0, 3153600000.0, false, "a duration >= 0, e.g. 30d (0: never expire)" },
    { "cluster", "timeout", K_DUR, O(cluster_timeout), false, 0, 3600, true, "a duration > 0, e.g. 1s" },
    { "cluster", "backoff_max", K_DUR, O(cluster_backoff_max), false, 0, 86400, true, "a duration > 0, e.g. 30s" },
    { "cluster", "lease", K_DUR, O(cluster_lease), false, 0, 86400, true, "a duration > 0, e.g. 30s" },
    { "cluster", "lease_wait", K_DUR, O(cluster_lease_wait), false, 0, 86400, true, "a duration > 0, e.g. 10m" },
    { "cluster", "lease_poll", K_DUR, O(cluster_lease_poll), false, 0, 3600, true, "a duration > 0, e.g. 1s" },
    { "cluster", "sign_key", K_STR, O(cluster_sign_key), false, 0, 0, false, "a secret key file from hidetctl keygen (empty: read-only node)" },
    { "cluster", "trusted_keys", K_STR, O(cluster_trusted_keys), false, 0, 0, false, "directories of *.pub files or .pub files, separated by spaces or commas" },
};
#undef O
#define N_KEYS (sizeof(keys) / sizeof(keys[0]))

static const key_def *key_find(const char *section, const char *key)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (strcmp(keys[i].section, section) == 0 && strcmp(keys[i].key, key) == 0)
            return &keys[i];
    return NULL;
}

static bool section_known(const char *section)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (strcmp(keys[i].section, section) == 0)
            return true;
    return false;
}

/* Applies one value to c. Returns 0, -EINVAL (bad value) or -ENOMEM. */
static int key_apply(hd_config *c, const key_def *k, const char *v)
{
    char *base = (char *)c;
    void *slot = base + k->off;
    switch (k->type) {
    case K_STR:
        return replace_str((char **)slot, *v ? v : NULL);
    case K_PATH:
        if (!*v)
            return -EINVAL;
        return replace_str((char **)slot, v);
    case K_HTTP: {
        if (!*v || strcmp(v, "off") == 0)
            return replace_str((char **)slot, NULL);
        char host[256];
        int port;
        if (hd_parse_http_addr(v, host, sizeof(host), &port) < 0)
            return -EINVAL;
        return replace_str((char **)slot, v);
    }
    case K_MODE:
        return parse_mode(v, (unsigned *)slot);
    case K_SIZE: {
        uint64_t s;
        if (hd_parse_size(v, &s) < 0 || (double)s < k->min || (double)s > k->max)
            return -EINVAL;
        *(uint64_t *)slot = s;
        return 0;
    }
    case K_DUR: {
        double d;
        if (hd_parse_duration(v, &d) < 0 || d > k->max || (k->min_open ? d <= k->min : d < k->min))
            return -EINVAL;
        *(double *)slot = d;
        return 0;
    }
    case K_INT:
        return parse_int(v, (long)k->min, (long)k->max, (int *)slot);
    case K_BOOL:
        return hd_parse_bool(v, (bool *)slot);
    case K_LEVEL:
        return hd_log_level_parse(v, (hd_log_level *)slot);
    case K_TUNE:
        return tuner_tune_parse(v, (tuner_tune_mode *)slot);
    case K_ARCH: {
        hd_arch_choice *a = slot;
        if (strcmp(v, "native") == 0) {
            a->native = true;
            a->target = tuner_target_of(TUNER_TARGET_SM90);
            return 0;
        }
        if (tuner_target_parse(v, &a->target) < 0)
            return -EINVAL;
        a->native = false;
        return 0;
    }
    case K_WORKERS:
        return parse_workers_mode(v, (hd_workers_mode *)slot);
    case K_AUTH:
        if (strcmp(v, "token") == 0 || strcmp(v, "none") == 0) {
            *(bool *)slot = strcmp(v, "token") == 0;
            return 0;
        }
        return -EINVAL;
    }
    return -EINVAL;
}

static bool key_equal(const hd_config *a, const hd_config *b, const key_def *k)
{
    const char *pa = (const char *)a + k->off, *pb = (const char *)b + k->off;
    switch (k->type) {
    case K_STR:
    case K_PATH:
    case K_HTTP: {
        const char *sa = *(char *const *)pa, *sb = *(char *const *)pb;
        if (!sa || !sb)
            return sa == sb;
        return strcmp(sa, sb) == 0;
    }
    case K_MODE:
        return *(const unsigned *)pa == *(const unsigned *)pb;
    case K_SIZE:
        return *(const uint64_t *)pa == *(const uint64_t *)pb;
    case K_DUR:
        return *(const double *)pa == *(const double *)pb;
    case K_INT:
        return *(const int *)pa == *(const int *)pb;
    case K_BOOL:
    case K_AUTH:
        return *(const bool *)pa == *(const bool *)pb;
    case K_LEVEL:
        return *(const hd_log_level *)pa == *(const hd_log_level *)pb;
    case K_TUNE:
        return *(const tuner_tune_mode *)pa == *(const tuner_tune_mode *)pb;
    case K_ARCH: {
        const hd_arch_choice *x = (const void *)pa, *y = (const void *)pb;
        return x->native == y->native && x->target.sm == y->target.sm &&
               x->target.arch_specific == y->target.arch_specific;
    }
    case K_WORKERS:
        return *(const hd_workers_mode *)pa == *(const hd_workers_mode *)pb;
    }
    return false;
}

static void append_word(char *buf, size_t len, const char *section, const char *key)
{
    if (!buf || !len)
        return;
    size_t n = strlen(buf);
    snprintf(buf + n, len - n, "%s%s.%s", n ? " " : "", section, key);
}

int hd_config_diff(const hd_config *a, const hd_config *b, char *live, size_t live_len,
                   char *restart, size_t restart_len)
{
    if (live && live_len)
        live[0] = '\0';
    if (restart && restart_len)
        restart[0] = '\0';
    if (!a || !b)
        return 0;
    int changed = 0;
    for (size_t i = 0; i < N_KEYS; i++) {
        if (key_equal(a, b, &keys[i]))
            continue;
        changed++;
        if (keys[i].live)
            append_word(live, live_len, keys[i].section, keys[i].key);
        else
            append_word(restart, restart_len, keys[i].section, keys[i].key);
    }
    return changed;
}

int hd_config_keep_restart_keys(hd_config *c, const hd_config *running)
{
    if (!c || !running)
        return -EINVAL;
    for (size_t i = 0; i < N_KEYS; i++) {
        const key_def *k = &keys[i];
        if (k->live || key_equal(c, running, k))
            continue;
        char *dst = (char *)c + k->off;
        const char *src = (const char *)running + k->off;
        switch (k->type) {
        case K_STR:
        case K_PATH:
        case K_HTTP:
            if (replace_str((char **)dst, *(char *const *)src) < 0)
                return -ENOMEM;
            break;
        case K_MODE:
            memcpy(dst, src, sizeof(unsigned));
            break;
        case K_SIZE:
            memcpy(dst, src, sizeof(uint64_t));
            break;
        case K_DUR:
            memcpy(dst, src, sizeof(double));
            break;
        case K_INT:
            memcpy(dst, src, sizeof(int));
            break;
        case K_BOOL:
        case K_AUTH:
            memcpy(dst, src, sizeof(bool));
            break;
        case K_LEVEL:
            memcpy(dst, src, sizeof(hd_log_level));
            break;
        case K_TUNE:
            memcpy(dst, src, sizeof(tuner_tune_mode));
            break;
        case K_ARCH:
            memcpy(dst, src, sizeof(hd_arch_choice));
            break;
        case K_WORKERS:
            memcpy(dst, src, sizeof(hd_workers_mode));
            break;
        }
    }
    return 0;
}

/* ---- the INI reader --------------------------------------------------------------------- */

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

static bool is_ident(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-')
            return false;
    return true;
}

/* Turns the raw text after '=' into the value in place: strips a trailing comment, unquotes.
 * Returns NULL with *why set on a syntax error. */
static char *read_value(char *raw, const char **why)
{
    char *v = trim(raw);
    if (*v == '"') {
        char *out = v, *p = v + 1;
        for (;;) {
            if (*p == '\0') {
                *why = "unterminated quoted value";
                return NULL;
            }
            if (*p == '\\') {
                if (p[1] != '"' && p[1] != '\\') {
                    *why = "unknown escape in quoted value (only \\\" and \\\\)";
                    return NULL;
                }
                *out++ = p[1];
                p += 2;
                continue;
            }
            if (*p == '"')
                break;
            *out++ = *p++;
        }
        char *rest = trim(p + 1);
        if (*rest && *rest != '#' && *rest != ';') {
            *why = "text after the closing quote";
            return NULL;
        }
        *out = '\0';
        return v;
    }
    /* Unquoted: a comment starts at a '#' preceded by whitespace. */
    for (char *p = v; *p; p++) {
        if (*p == '#' && (p == v || p[-1] == ' ' || p[-1] == '\t')) {
            *p = '\0';
            break;
        }
    }
    return trim(v);
}

int hd_config_load_string(hd_config *c, const char *text, const char *name, char **ret_err)
{
    if (!c || !text)
        return -EINVAL;
    if (!name)
        name = "<config>";
    int r = 0;
    char *msg = NULL;
    char *copy = strdup(text);
    hd_config work;
    bool have_work = false;
    bool seen[N_KEYS] = { false };
    if (!copy) {
        r = -ENOMEM;
        goto out;
    }
    /* Apply to a copy so that a bad file leaves c untouched (all or nothing). */
    r = hd_config_copy(c, &work);
    if (r < 0)
        goto out;
    have_work = true;

    char section[64] = "";
    int lineno = 0;
    char *line = copy;
    /* strtok_r would skip empty lines and lose the line count; split by hand. */
    while (line) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        lineno++;
        char *s = trim(line);
        if (*s == '\0' || *s == '#' || *s == ';')
            goto next;
        if (*s == '[') {
            char *close = strchr(s, ']');
            if (!close) {
                msg = fmt_err("%s:%d: section header without ']'", name, lineno);
                r = -EINVAL;
                goto out;
            }
            char *rest = trim(close + 1);
            if (*rest && *rest != '#' && *rest != ';') {
                msg = fmt_err("%s:%d: text after the section header", name, lineno);
                r = -EINVAL;
                goto out;
            }
            *close = '\0';
            char *sec = trim(s + 1);
            if (!section_known(sec)) {
                msg = fmt_err("%s:%d: unknown section [%s] (known: server, cache, graphs, "
                              "tuning, workers, log, shutdown, cluster)", name, lineno, sec);
                r = -EINVAL;
                goto out;
            }
            snprintf(section, sizeof(section), "%s", sec);
            goto next;
        }
        char *eq = strchr(s, '=');
        if (!eq) {
            msg = fmt_err("%s:%d: expected 'key = value', '[section]' or a comment", name, lineno);
            r = -EINVAL;
            goto out;
        }
        *eq = '\0';
        char *key = trim(s);
        if (!is_ident(key)) {
            msg = fmt_err("%s:%d: bad key name", name, lineno);
            r = -EINVAL;
            goto out;
        }
        if (!section[0]) {
            msg = fmt_err("%s:%d: key '%s' outside any [section]", name, lineno, key);
            r = -EINVAL;
            goto out;
        }
        const key_def *k = key_find(section, key);
        if (!k) {
            msg = fmt_err("%s:%d: unknown key '%s' in [%s]", name, lineno, key, section);
            r = -EINVAL;
            goto out;
        }
        size_t ki = (size_t)(k - keys);
        if (seen[ki]) {
            msg = fmt_err("%s:%d: [%s] %s given twice", name, lineno, section, key);
            r = -EINVAL;
            goto out;
        }
        seen[ki] = true;
        const char *why = NULL;
        char *value = read_value(eq + 1, &why);
        if (!value) {
            msg = fmt_err("%s:%d: [%s] %s: %s", name, lineno, section, key, why);
            r = -EINVAL;
            goto out;
        }
        r = key_apply(&work, k, value);
        if (r == -ENOMEM)
            goto out;
        if (r < 0) {
            msg = fmt_err("%s:%d: [%s] %s: bad value \"%s\" (expected %s)", name, lineno, section,
                          key, value, k->hint);
            goto out;
        }
    next:
        line = nl ? nl + 1 : NULL;
    }
    /* Setting a worker path without a mode means that path. */
    if (seen[(size_t)(key_find("workers", "path") - keys)] &&
        !seen[(size_t)(key_find("workers", "mode") - keys)])
        work.workers = HD_WORKERS_PATH;

    hd_config_clear(c);
    *c = work;
    have_work = false;
    r = 0;
out:
    if (have_work)
        hd_config_clear(&work);
    free(copy);
    if (r < 0) {
        if (!msg)
            msg = fmt_err("%s: %s", name, strerror(-r));
        set_err(ret_err, msg);
    }
    return r;
}

/* Reads a whole small file. Only a regular file is read: a FIFO (or a terminal, a device) could
 * block the caller for ever, and the caller is the loop thread on SIGHUP, which would then take
 * no signal, SIGTERM included. It is opened without blocking and checked on the descriptor, so
 * a path swapped between a check and the open changes nothing. */
static int read_small_file(const char *path, size_t max, char **ret, char **ret_err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        set_err(ret_err, fmt_err("%s: cannot open: %s", path, strerror(e)));
        return -e;
    }
    size_t cap = 4096, n = 0;
    char *buf = NULL;
    int r = 0;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        r = -errno;
        set_err(ret_err, fmt_err("%s: cannot stat: %s", path, strerror(-r)));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        set_err(ret_err, fmt_err("%s: not a regular file (%s): refused, since reading it could "
                                 "block", path, S_ISFIFO(st.st_mode) ? "a FIFO"
                                 : S_ISDIR(st.st_mode) ? "a directory"
                                 : S_ISSOCK(st.st_mode) ? "a socket" : "a device"));
        r = -EINVAL;
        goto out;
    }
    buf = malloc(cap);
    if (!buf) {
        r = -ENOMEM;
        goto out;
    }
    for (;;) {
        if (n + 1 >= cap) {
            if (cap >= max) {
                set_err(ret_err, fmt_err("%s: larger than %zu bytes", path, max));
                r = -EFBIG;
                goto out;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                r = -ENOMEM;
                goto out;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t got = read(fd, buf + n, cap - n - 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            r = -errno;
            set_err(ret_err, fmt_err("%s: read error: %s", path, strerror(-r)));
            goto out;
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    buf[n] = '\0';
    if (memchr(buf, '\0', n)) {
        set_err(ret_err, fmt_err("%s: contains a NUL byte", path));
        r = -EINVAL;
        goto out;
    }
    *ret = buf;
    buf = NULL;
out:
    free(buf);
    close(fd);
    return r;
}

int hd_config_load_file(hd_config *c, const char *path, char **ret_err)
{
    if (!c || !path)
        return -EINVAL;
    char *text = NULL;
    int r = read_small_file(path, 1 << 20, &text, ret_err);
    if (r < 0)
        return r;
    /* A file with nothing in it is refused: it is most often one caught while it is written
     * (an editor or `>` truncates first), and taken as it is it would put every key back to its
     * default - the token and tcp_auth among them. A file of comments only is fine. */
    if (text[strspn(text, " \t\r\n")] == '\0') {
        free(text);
        set_err(ret_err, fmt_err("%s: the file is empty: refused (a file meant to set nothing "
                                 "holds at least a comment)", path));
        return -EINVAL;
    }
    r = hd_config_load_string(c, text, path, ret_err);
    free(text);
    return r;
}

/* ---- command line ----------------------------------------------------------------------- */

const char *hd_cli_usage(void)
{
    return "Usage: hidetd [OPTIONS]\n"
           "Serve tuned, fused GPU kernels over a Unix socket (and optionally HTTP).\n"
           "\n"
           "  --socket PATH        Unix socket to serve on (default $HIDETD_SOCKET, else\n"
           "                       $XDG_RUNTIME_DIR/hidetd.sock, else\n"
           "                       ~/.cache/hidetd/hidetd.sock: where hidetctl looks)\n"
           "  --cache PATH         kernel cache database\n"
           "                       (default $XDG_CACHE_HOME/hidetd/kernels.db, else\n"
           "                        ~/.cache/hidetd/kernels.db)\n"
           "  --http [HOST:]PORT   also serve HTTP on TCP (PORT alone binds 127.0.0.1);\n"
           "                       every TCP request needs the token; 'off' disables\n"
           "  --http-no-auth       TCP without a token (tcp_auth = none; loopback binds only)\n"
           "  --config FILE        read settings from FILE (flags win; SIGHUP re-reads it)\n"
           "  --log-level LEVEL    debug, info, warn or error (default info)\n"
           "  --workers MODE       auto, none, standin or the path of a worker binary\n"
           "  --token-file FILE    file whose first line is the bearer token TCP clients send\n"
           "                       (also $HIDETD_TOKEN_FILE)\n"
           "  --token TOKEN        the token itself (visible to every local user in ps:\n"
           "                       prefer --token-file)\n"
           "  --redis URL          share tuned kernels through Redis (the cluster tier):\n"
           "                       redis://[USER:PASSWORD@]HOST[:PORT][/DB] or unix://PATH;\n"
           "                       'off' disables ([cluster] in the config; docs/cluster.md)\n"
           "  --version            print the version and exit\n"
           "  --help               print this help and exit\n";
}

int hd_cli_parse(int argc, char *const *argv, hd_cli *ret, char **ret_err)
{
    enum { O_SOCKET = 256, O_CACHE, O_HTTP, O_CONFIG, O_LOG, O_WORKERS, O_TOKEN, O_TOKEN_FILE,
           O_REDIS,
           O_NO_AUTH, O_VERSION, O_HELP };
    static const struct option opts[] = {
        { "socket", required_argument, NULL, O_SOCKET },
        { "cache", required_argument, NULL, O_CACHE },
        { "http", required_argument, NULL, O_HTTP },
        { "config", required_argument, NULL, O_CONFIG },
        { "log-level", required_argument, NULL, O_LOG },
        { "workers", required_argument, NULL, O_WORKERS },
        { "token", required_argument, NULL, O_TOKEN },
        { "token-file", required_argument, NULL, O_TOKEN_FILE },
        { "redis", required_argument, NULL, O_REDIS },
        { "http-no-auth", no_argument, NULL, O_NO_AUTH },
        { "version", no_argument, NULL, O_VERSION },
        { "help", no_argument, NULL, O_HELP },
        { NULL, 0, NULL, 0 },
    };
    if (!ret || argc < 1 || !argv)
        return -EINVAL;
    hd_cli cli;
    memset(&cli, 0, sizeof(cli));
    /* Re-entrant use (tests parse several command lines): optind = 0 makes glibc start over. */
    optind = 0;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "+hV", opts, NULL)) != -1) {
        switch (ch) {
        case O_SOCKET:
            cli.socket = optarg;
            break;
        case O_CACHE:
            cli.cache = optarg;
            break;
        case O_HTTP:
            cli.http = optarg;
            break;
        case O_CONFIG:
            cli.config = optarg;
            break;
        case O_LOG:
            cli.log_level = optarg;
            break;
        case O_WORKERS:
            cli.workers = optarg;
            break;
        case O_TOKEN:
            cli.token = optarg;
            break;
        case O_REDIS:
            cli.redis = optarg;
            break;
        case O_TOKEN_FILE:
            cli.token_file = optarg;
            break;
        case O_NO_AUTH:
            cli.http_no_auth = true;
            break;
        case 'V':
        case O_VERSION:
            cli.version = true;
            break;
        case 'h':
        case O_HELP:
            cli.help = true;
            break;
        case ':':
        case '?':
        default: {
            const char *bad = argv[optind - 1 >= 0 ? optind - 1 : 0];
            if (optopt && optopt < 256)
                set_err(ret_err, fmt_err("unknown option '-%c' (see --help)", optopt));
            else if (optopt >= O_SOCKET)
                set_err(ret_err, fmt_err("option '%s' needs a value", bad));
            else
                set_err(ret_err, fmt_err("unknown option '%s' (see --help)", bad));
            return -EINVAL;
        }
        }
    }
    if (optind < argc) {
        set_err(ret_err, fmt_err("unexpected argument '%s' (see --help)", argv[optind]));
        return -EINVAL;
    }
    const struct {
        const char *name, *value;
    } need[] = { { "--socket", cli.socket }, { "--cache", cli.cache }, { "--config", cli.config },
                 { "--workers", cli.workers }, { "--token", cli.token },
                 { "--token-file", cli.token_file } };
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
        if (need[i].value && !need[i].value[0]) {
            set_err(ret_err, fmt_err("%s needs a non-empty value", need[i].name));
            return -EINVAL;
        }
    }
    if (cli.log_level) {
        hd_log_level l;
        if (hd_log_level_parse(cli.log_level, &l) < 0) {
            set_err(ret_err, fmt_err("--log-level: bad level '%s' (debug, info, warn, error)",
                                     cli.log_level));
            return -EINVAL;
        }
    }
    if (cli.http && strcmp(cli.http, "off") != 0) {
        char host[256];
        int port;
        if (hd_parse_http_addr(cli.http, host, sizeof(host), &port) < 0) {
            set_err(ret_err, fmt_err("--http: bad address '%s' (expected [HOST:]PORT, e.g. 8080, "
                                     "127.0.0.1:8080 or [::1]:8080)", cli.http));
            return -EINVAL;
        }
    }
    *ret = cli;
    return 0;
}

int hd_config_apply_cli(hd_config *c, const hd_cli *cli, char **ret_err)
{
    if (!c || !cli)
        return -EINVAL;
    hd_config work;
    int r = hd_config_copy(c, &work);
    if (r < 0)
        return r;
    if (cli->socket && (r = replace_str(&work.socket, cli->socket)) < 0)
        goto fail;
    if (cli->redis && (r = replace_str(&work.cluster_url, strcmp(cli->redis, "off") == 0 ||
                                                          !*cli->redis ? NULL : cli->redis)) < 0)
        goto fail;
    if (cli->cache && (r = replace_str(&work.cache_path, cli->cache)) < 0)
        goto fail;
    if (cli->http &&
        (r = replace_str(&work.http, strcmp(cli->http, "off") == 0 ? NULL : cli->http)) < 0)
        goto fail;
    /* The token's sources, weakest first: the config file, $HIDETD_TOKEN_FILE (systemd's
     * LoadCredential= puts a file in $CREDENTIALS_DIRECTORY), --token-file, --token. Each one
     * given replaces what came before, token and token file alike. */
    const char *env_file = getenv("HIDETD_TOKEN_FILE");
    const char *file = cli->token_file ? cli->token_file : env_file && *env_file ? env_file : NULL;
    if (file || cli->token) {
        if ((r = replace_str(&work.token, cli->token)) < 0 ||
            (r = replace_str(&work.token_file, cli->token ? NULL : file)) < 0)
            goto fail;
    }
    if (cli->http_no_auth)
        work.tcp_auth = false;
    if (cli->log_level && hd_log_level_parse(cli->log_level, &work.log_level) < 0) {
        set_err(ret_err, fmt_err("--log-level: bad level '%s'", cli->log_level));
        r = -EINVAL;
        goto fail;
    }
    if (cli->workers) {
        hd_workers_mode m;
        if (parse_workers_mode(cli->workers, &m) == 0 && m != HD_WORKERS_PATH) {
            work.workers = m;
        } else {
            work.workers = HD_WORKERS_PATH;
            if ((r = replace_str(&work.workers_path, cli->workers)) < 0)
                goto fail;
        }
    }
    hd_config_clear(c);
    *c = work;
    return 0;
fail:
    hd_config_clear(&work);
    return r;
}

int hd_config_finish(hd_config *c, char **ret_err)
{
    if (!c)
        return -EINVAL;
    if (c->token_file && !c->token) {
        char *text = NULL;
        int r = read_small_file(c->token_file, 4096, &text, ret_err);
        if (r < 0)
            return r;
        char *nl = strpbrk(text, "\r\n");
        if (nl)
            *nl = '\0';
        if (!text[0]) {
            free(text);
            set_err(ret_err, fmt_err("%s: the token file is empty", c->token_file));
            return -EINVAL;
        }
        c->token = text;
    }
    if (c->token) {
        for (const char *p = c->token; *p; p++) {
            if ((unsigned char)*p <= 0x20 || *p == 0x7f) {
                set_err(ret_err, fmt_err("the token must not contain spaces or control characters"));
                return -EINVAL;
            }
        }
    }
    if (c->http) {
        char host[256];
        int port;
        if (hd_parse_http_addr(c->http, host, sizeof(host), &port) < 0) {
            set_err(ret_err, fmt_err("bad http address '%s'", c->http));
            return -EINVAL;
        }
        if (!c->tcp_auth && !hd_host_is_loopback(host)) {
            set_err(ret_err, fmt_err("refusing to serve HTTP without a token on the non-loopback "
                                     "address %s: tcp_auth = none (--http-no-auth) is for "
                                     "loopback binds only", c->http));
            return -EINVAL;
        }
        /* Loopback is no boundary: every local user reaches 127.0.0.1, including those the
         * Unix socket's mode keeps out. */
        if (c->tcp_auth && !c->token) {
            set_err(ret_err, fmt_err("refusing to serve HTTP on %s without a token: set "
                                     "--token-file, $HIDETD_TOKEN_FILE or [server] token_file "
                                     "(or tcp_auth = none on a loopback bind)", c->http));
            return -EINVAL;
        }
    }
    if (c->workers == HD_WORKERS_PATH && (!c->workers_path || !c->workers_path[0])) {
        set_err(ret_err, fmt_err("[workers] mode = path needs [workers] path"));
        return -EINVAL;
    }
    return 0;
}

int hd_config_unix_max_connections(const hd_config *c)
{
    return c->unix_max_connections > 0 ? c->unix_max_connections : c->max_connections;
}

int hd_config_tcp_max_connections(const hd_config *c)
{
    return c->tcp_max_connections > 0 ? c->tcp_max_connections : c->max_connections;
}

int hd_config_max_connections_per_client(const hd_config *c)
{
    if (c->max_connections_per_client > 0)
        return c->max_connections_per_client;
    int u = hd_config_unix_max_connections(c), t = hd_config_tcp_max_connections(c);
    int half = (u > t ? u : t) / 2;
    return half > 0 ? half : 1;
}

int hd_config_max_queued_jobs_per_client(const hd_config *c)
{
    if (c->max_queued_jobs_per_client > 0)
        return c->max_queued_jobs_per_client;
    return c->max_queued_jobs / 2 > 0 ? c->max_queued_jobs / 2 : 1;
}

int hd_config_max_blocking_jobs_per_client(const hd_config *c)
{
    if (c->max_blocking_jobs_per_client > 0)
        return c->max_blocking_jobs_per_client;
    return c->max_queued_jobs / 4 > 0 ? c->max_queued_jobs / 4 : 1;
}

int hd_config_build(const hd_cli *cli, hd_config *ret, char **ret_err)
{
    if (!cli || !ret)
        return -EINVAL;
    hd_config c;
    int r = hd_config_init(&c);
    if (r < 0)
        return r;
    if (cli->config && (r = hd_config_load_file(&c, cli->config, ret_err)) < 0)
        goto fail;
    if ((r = hd_config_apply_cli(&c, cli, ret_err)) < 0)
        goto fail;
    if ((r = hd_config_finish(&c, ret_err)) < 0)
        goto fail;
    *ret = c;
    return 0;
fail:
    hd_config_clear(&c);
    return r;
}

int hd_config_build_reload(const hd_cli *cli, const hd_config *running, hd_config *ret,
                           char *restart, size_t restart_len, int *ret_n_restart, char **ret_err)
{
    if (!running)
        return -EINVAL;
    /* Twice checked. As written (hd_config_build): a file that would not start the daemon is
     * refused now, not found out at the next restart. Then with the restart keys in effect (the
     * running ones): a check must see the socket actually bound, not an address the file names
     * and nothing listens on - a loopback `http` in the file beside tcp_auth = none once took
     * the token off a 0.0.0.0 listener. */
    hd_config c;
    int r = hd_config_build(cli, &c, ret_err);
    if (r < 0)
        return r;
    char changed[2048];
    hd_config_diff(running, &c, NULL, 0, changed, sizeof(changed));
    if ((r = hd_config_keep_restart_keys(&c, running)) < 0)
        goto fail;
    if ((r = hd_config_finish(&c, ret_err)) < 0)
        goto fail;
    if (restart && restart_len)
        snprintf(restart, restart_len, "%s", changed);
    if (ret_n_restart) {
        int n = 0;
        for (const char *p = changed; *p; p += strcspn(p, " "), p += strspn(p, " "))
            n++;
        *ret_n_restart = n;
    }
    *ret = c;
    return 0;
fail:
    hd_config_clear(&c);
    return r;
}

int hd_config_check_listeners(const hd_config *c, const hd_listen_info *l, char **ret_err)
{
    if (!c || !l)
        return -EINVAL;
    if (l->n_tcp > 0 && !c->tcp_auth && l->tcp_public) {
        set_err(ret_err, fmt_err("refusing to serve HTTP without a token on %s, which is not a "
                                 "loopback address: tcp_auth = none (--http-no-auth) is for "
                                 "loopback listeners only", l->public_addr));
        return -EINVAL;
    }
    return 0;
}
