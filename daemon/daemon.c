/* daemon/daemon.c - hidetd's lifecycle (see daemon.h).
 *
 * Start: flags and config -> log -> thread-pool size -> kernel cache -> GPU worker pool (ready
 * once every worker said hello or gave up; zero devices is fine) -> scheduler -> listeners
 * (socket-activation fds, else bind) -> READY=1.
 * Stop (SIGINT/SIGTERM): stop accepting, STOPPING=1, drain the scheduler within [shutdown] grace
 * (waiting clients of cancelled jobs get 503 shutting_down), close the HTTP server once in-flight
 * requests are answered, free the scheduler, close the pool, close the database; the Unix socket
 * file is removed by the server. A second SIGINT exits at once.
 * SIGHUP: re-read the config file; apply what can change live; keep the old one if it is bad.
 */
#include "daemon/daemon.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <netinet/in.h>
#include <pthread.h>
#include <limits.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "daemon/daemon_int.h"
#include "daemon/log.h"
#include "daemon/notify.h"
#include "tuner/tuner.h"
#include "hidetd_config.h"

#define PRUNE_FIRST_MS (10 * 1000)
#define PRUNE_EVERY_MS (3600 * 1000)

static void begin_stop(hd_daemon *d);

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- configuration mapped onto the modules ---------------------------------------------- */

/* The size of libuv's thread pool, where compiles run: UV_THREADPOOL_SIZE as libuv reads it
 * (set_threadpool_size fills it in before the first work is queued), else libuv's 4. */
static int threadpool_size(void)
{
    const char *v = getenv("UV_THREADPOOL_SIZE");
    long n = v && *v ? strtol(v, NULL, 10) : 4;
    return n < 1 ? 1 : n > 1024 ? 1024 : (int)n;
}

static void sched_config_from(const hd_config *c, sched_config *ret)
{
    sched_config_defaults(ret);
    ret->compile_threads = threadpool_size();
    ret->budget_s = c->budget_seconds;
    ret->budget_candidates = c->budget_candidates;
    ret->fused_retime_top = c->fused_retime_top;
    ret->measure_requires_gpu = c->measure_requires_gpu;
    ret->max_queued_jobs = c->max_queued_jobs;
    ret->max_running_jobs = c->max_running_jobs;
    ret->max_queued_per_peer = hd_config_max_queued_jobs_per_client(c);
    ret->max_blocking_per_peer = hd_config_max_blocking_jobs_per_client(c);
}

static void on_quarantine(void *udata, const char *artifact_key, const char *reason)
{
    (void)udata;
    hd_log_warn("kernel %s put in quarantine: %s; its op is tuned again on the next request "
                "(hidetctl cache verify lists it, cache rm removes it)", artifact_key, reason);
}

/* The library does not log: a kernel the cache could not take (disk full, an I/O error) is
 * said here, with the op it was for. */
static void on_store_failed(void *udata, const char *op_key, const char *origin, const char *why)
{
    (void)udata;
    if (strcmp(origin, "remote") == 0)
        hd_log_warn("op %s: storing the kernel from the cluster tier failed: %s; it is tuned "
                    "here instead", op_key, why);
    else
        hd_log_warn("op %s: %s; its job failed (cache_error) and the op is tuned again on the "
                    "next request", op_key, why);
}

static void resolve_config_from(const hd_config *c, resolve_config *ret)
{
    resolve_config_defaults(ret);
    ret->default_mode = c->default_mode;
    ret->default_arch_native = c->default_arch.native;
    ret->default_target = c->default_arch.target;
    ret->on_quarantine = on_quarantine;
    ret->on_store_failed = on_store_failed;
}

/* ---- the cluster tier ---------------------------------------------------------------------- */

static void cluster_event(void *udata, ct_event ev, const char *msg)
{
    (void)udata;
    if (ev == CT_EVENT_CONNECTED)
        hd_log_info("cluster tier: %s", msg);
    else
        hd_log_warn("cluster tier: %s", msg);
}

static void cluster_latency(void *udata, double seconds)
{
    hd_daemon *d = udata;
    hd_histogram_observe(d->m_cl_latency, seconds);
}

/* [cluster] trusted_keys: directories of *.pub files and .pub files, separated by spaces or
 * commas. Every key named is loaded (several at once: that is how keys are rotated). */
static int cluster_load_trusted(const char *list, kc_sign_public **keys, size_t *n)
{
    char *copy = strdup(list ? list : "");
    if (!copy)
        return -ENOMEM;
    int r = 0;
    char *save = NULL;
    for (char *p = strtok_r(copy, " ,\t", &save); p; p = strtok_r(NULL, " ,\t", &save)) {
        struct stat sb;
        char *err = NULL;
        if (stat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            r = kc_sign_load_dir(p, keys, n, &err);
        } else {
            kc_sign_public k;
            r = kc_sign_load_public(p, &k, &err);
            if (r == 0) {
                kc_sign_public *nk = realloc(*keys, (*n + 1) * sizeof(*nk));
                if (!nk) {
                    r = -ENOMEM;
                } else {
                    nk[(*n)++] = k;
                    *keys = nk;
                }
            }
        }
        if (r < 0) {
            hd_log_error("[cluster] trusted_keys: %s: %s", p, err ? err : strerror(-r));
            free(err);
            break;
        }
    }
    free(copy);
    return r;
}

/* Creates the cluster tier when [cluster] url is set and plugs it into the resolver. A key that
 * does not load or a bad URL stops the start: a node must not run with a trust setting other
 * than the one configured. */
static int cluster_start(hd_daemon *d)
{
    const hd_config *c = &d->cfg;
    if (!c->cluster_url)
        return 0;
    kc_sign_public *trusted = NULL;
    size_t n_trusted = 0;
    kc_sign_secret sec;
    bool has_sec = false;
    char *err = NULL;
    int r = cluster_load_trusted(c->cluster_trusted_keys, &trusted, &n_trusted);
    if (r < 0)
        goto out;
    if (c->cluster_sign_key) {
        r = kc_sign_load_secret(c->cluster_sign_key, &sec, &err);
        if (r < 0) {
            hd_log_error("[cluster] sign_key: %s", err ? err : strerror(-r));
            goto out;
        }
        has_sec = true;
    }
    ct_config cc = {
        .url = c->cluster_url,
        .prefix = c->cluster_prefix,
        .ttl_s = c->cluster_ttl,
        .timeout_s = c->cluster_timeout,
        .backoff_max_s = c->cluster_backoff_max,
        .lease_s = c->cluster_lease,
        .lease_wait_s = c->cluster_lease_wait,
        .lease_poll_s = c->cluster_lease_poll,
        .sign = has_sec ? &sec : NULL,
        .trusted = trusted,
        .n_trusted = n_trusted,
        .on_event = cluster_event,
        .on_latency = cluster_latency,
        .udata = d,
    };
    r = ct_new(d->loop, &cc, &d->cluster, &err);
    if (r < 0) {
        hd_log_error("[cluster] url: %s", err ? err : strerror(-r));
        goto out;
    }
    resolve_remote rr;
    ct_remote(d->cluster, &rr);
    resolve_set_remote(d->resolver, &rr);
    ct_stats st;
    ct_stats_get(d->cluster, &st);
    if (n_trusted == 0)
        hd_log_warn("cluster tier: no trusted keys: every entry read from Redis is rejected");
    hd_log_info("cluster tier: %s, prefix %s, %s node (%s), %zu trusted key(s)", st.url, st.prefix,
                has_sec ? "publishing" : "read-only", has_sec ? sec.id : "no sign_key",
                n_trusted);
out:
    if (has_sec)
        kc_sign_secret_wipe(&sec);
    free(trusted);
    free(err);
    return r;
}

/* Descriptors kept for everything but client connections: the database and its WAL, worker
 * pipes, listeners, signalfd, log, files the thread pool opens. */
#define FD_RESERVE 256

/* Raises the soft descriptor limit to the hard one: the connection limits are meant to be
 * reached before the process runs out of descriptors, not after. Returns the soft limit now. */
static uint64_t raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return 1024;
    if (rl.rlim_cur < rl.rlim_max) {
        struct rlimit want = rl;
        want.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &want) == 0)
            rl = want;
    }
    return rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
}

/* The connection limits must fit the descriptors the process has, or a TCP flood would take the
 * descriptors the Unix socket needs and it could not accept any more: the Unix socket is served
 * first, TCP gets what is left. Logs what it lowered. */
static void limits_fit_nofile(proto_limits *l, uint64_t nofile)
{
    uint64_t avail = nofile > FD_RESERVE + 2 ? nofile - FD_RESERVE : 2;
    uint64_t u = (uint64_t)l->max_connections_unix, t = (uint64_t)l->max_connections_tcp;
    if (u + t <= avail)
        return;
    if (u > avail / 2 && u + 1 > avail)
        u = avail / 2;
    t = avail - u;
    if (t < 1)
        t = 1;
    hd_log_warn("%llu file descriptors allow %llu connections: limits lowered to %llu on the Unix "
                "socket and %llu on TCP (was %d and %d); raise LimitNOFILE= to keep them",
                (unsigned long long)nofile, (unsigned long long)avail, (unsigned long long)u,
                (unsigned long long)t, l->max_connections_unix, l->max_connections_tcp);
    l->max_connections_unix = (int)u;
    l->max_connections_tcp = (int)t;
}

static void limits_from(const hd_config *c, proto_limits *ret)
{
    proto_limits_defaults(ret);
    ret->max_body_bytes = (size_t)c->max_body;
    ret->max_connections_unix = hd_config_unix_max_connections(c);
    ret->max_connections_tcp = hd_config_tcp_max_connections(c);
    ret->max_connections_per_peer = hd_config_max_connections_per_client(c);
    ret->header_timeout_ms = (uint64_t)(c->header_timeout * 1000.0 + 0.5);
    ret->max_unauthenticated_tcp = c->tcp_unauthenticated_connections;
    ret->unauthenticated_header_timeout_ms =
        (uint64_t)(c->tcp_unauthenticated_header_timeout * 1000.0 + 0.5);
    ret->request_timeout_ms = (uint64_t)(c->request_timeout * 1000.0 + 0.5);
    ret->idle_timeout_ms = (uint64_t)(c->idle_timeout * 1000.0 + 0.5);
}

/* ---- worker binary ------------------------------------------------------------------------ */

/* Finds `name` next to the hidetd binary (installed side by side, or the build tree's
 * ../gpu_workers/), then in HIDETD_LIBEXECDIR. Returns a malloc'd path or NULL. */
static char *find_worker(const char *name)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    char *found = NULL;
    if (n > 0) {
        exe[n] = '\0';
        const char *dir = dirname(exe);
        for (int i = 0; i < 2 && !found; i++) {
            char *p = NULL;
            int r = i == 0 ? asprintf(&p, "%s/../gpu_workers/%s", dir, name)
                           : asprintf(&p, "%s/%s", dir, name);
            if (r < 0)
                return NULL;
            /* Named without "..": the path is logged and shows in errors. */
            char *real = access(p, X_OK) == 0 ? realpath(p, NULL) : NULL;
            free(p);
            found = real;
        }
    }
    if (!found) {
        char *p = NULL;
        if (asprintf(&p, "%s/%s", HIDETD_LIBEXECDIR, name) < 0)
            return NULL;
        if (access(p, X_OK) == 0)
            found = p;
        else
            free(p);
    }
    return found;
}

/* Resolves the configured worker mode into a binary. *ret_path is NULL for "no pool".
 * Returns 0, or -ENOENT when an explicitly asked-for worker is missing (logged). */
static int resolve_worker(const hd_config *c, char **ret_path)
{
    char *path = NULL;
    switch (c->workers) {
    case HD_WORKERS_NONE:
        break;
    case HD_WORKERS_AUTO:
        path = find_worker("hidetd-worker");
        if (!path)
            hd_log_warn("no hidetd-worker next to hidetd or in %s: serving without GPU workers "
                        "(tune \"measure\" falls back to the cost model)", HIDETD_LIBEXECDIR);
        break;
    case HD_WORKERS_STANDIN:
        path = find_worker("hidetd-worker-standin");
        if (!path) {
            hd_log_error("--workers standin: hidetd-worker-standin not found next to hidetd or "
                         "in %s", HIDETD_LIBEXECDIR);
            return -ENOENT;
        }
        break;
    case HD_WORKERS_PATH:
        if (access(c->workers_path, X_OK) != 0) {
            hd_log_error("worker binary %s: %s", c->workers_path, strerror(errno));
            return -ENOENT;
        }
        path = strdup(c->workers_path);
        if (!path)
            return -ENOMEM;
        break;
    }
    *ret_path = path;
    return 0;
}

/* ---- serving ------------------------------------------------------------------------------ */

/* Appends to a description of what we listen on, never past its end. */
static void desc_add(char *desc, size_t len, size_t *dl, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void desc_add(char *desc, size_t len, size_t *dl, const char *fmt, ...)
{
    if (*dl + 1 >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(desc + *dl, len - *dl, fmt, ap);
    va_end(ap);
    if (n > 0)
        *dl = *dl + (size_t)n < len ? *dl + (size_t)n : len - 1;
}

/* true when dir is the directory of the default socket without a runtime directory,
 * $XDG_CACHE_HOME/hidetd or ~/.cache/hidetd (daemon/config.c's default_socket()). */
static bool default_socket_dir(const char *dir)
{
    const char *xc = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char *want = NULL;
    bool same = false;
    if (xc && xc[0] == '/' ? asprintf(&want, "%s/hidetd", xc) >= 0
        : home && home[0] == '/' && asprintf(&want, "%s/.cache/hidetd", home) >= 0)
        same = strcmp(dir, want) == 0;
    free(want);
    return same;
}

/* Creates the socket's directory (0700, parents too) when it is missing and it is the default
 * one: ~/.cache/hidetd/ (used without a runtime directory) may not exist yet on a first start.
 * A --socket or [server] socket in a missing directory is not created (a typo must not make
 * directories, as root perhaps): the bind then fails and says so. An existing directory is left
 * as it is. */
static void make_socket_dir(const char *path)
{
    char *dir = strdup(path);
    struct stat st;
    char *slash = dir ? strrchr(dir, '/') : NULL;

    if (slash && slash != dir) {
        *slash = '\0';
        if (stat(dir, &st) < 0 && errno == ENOENT && default_socket_dir(dir)) {
            for (char *p = dir + 1; *p; p++) {
                if (*p != '/')
                    continue;
                *p = '\0';
                (void)mkdir(dir, 0700);
                *p = '/';
            }
            if (mkdir(dir, 0700) == 0)
                hd_log_info("created %s for the socket", dir);
        }
    }
    free(dir);
}

/* Records a TCP listener in d->listen: the auth checks judge the addresses actually bound. */
static void note_tcp(hd_daemon *d, const char *host, int port)
{
    d->listen.n_tcp++;
    if (d->listen.tcp_public || hd_host_is_loopback(host))
        return;
    d->listen.tcp_public = true;
    snprintf(d->listen.public_addr, sizeof(d->listen.public_addr),
             strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
}

/* A TCP socket passed by systemd: its address as bound. One that cannot be read counts as not
 * loopback, so that it is never served without a token by mistake. */
static void note_passed_tcp(hd_daemon *d, int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET) {
            const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
            port = ntohs(a->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
            port = ntohs(a->sin6_port);
        }
    }
    note_tcp(d, host, port);
}

static int listen_all(hd_daemon *d, char *desc, size_t desc_len)
{
    int *fds = NULL;
    char **names = NULL;
    bool have_tcp = false;
    size_t dl = 0;
    desc[0] = '\0';
    int n = hd_listen_fds(&fds, &names);
    if (n < 0) {
        hd_log_error("socket activation: malformed LISTEN_FDS/LISTEN_PID/LISTEN_FDNAMES (%s)",
                     strerror(-n));
        return n;
    }
    for (int i = 0; i < n; i++) {
        int fam = hd_socket_info(fds[i], NULL, NULL);
        if (fam == AF_INET || fam == AF_INET6)
            note_passed_tcp(d, fds[i]);
        int r = proto_server_listen_fd(d->http, fds[i]);
        if (r < 0) {
            hd_log_error("socket activation: cannot serve fd %d (%s): %s", fds[i],
                         names && names[i] ? names[i] : "?", strerror(-r));
            /* The server did not take it; the remaining ones are closed below. */
            close(fds[i]);
            for (int j = i + 1; j < n; j++)
                close(fds[j]);
            free(fds);
            hd_strv_free(names);
            return r;
        }
        if (fam == AF_INET || fam == AF_INET6)
            have_tcp = true;
        desc_add(desc, desc_len, &dl, "%sfd:%d(%s)", dl ? ", " : "", fds[i],
                 fam == AF_UNIX ? "unix" : "tcp");
    }
    free(fds);
    hd_strv_free(names);
    if (have_tcp && d->cfg.tcp_auth && !d->cfg.token)
        hd_log_warn("a TCP socket was passed in but no token is set: every TCP request but "
                    "/healthz is refused with 401 (set [server] token_file, or tcp_auth = none "
                    "for a loopback socket)");

    if (n == 0) {
        make_socket_dir(d->cfg.socket);
        int r = proto_server_listen_unix(d->http, d->cfg.socket, (int)d->cfg.socket_mode);
        if (r == -EADDRINUSE) {
            hd_log_error("another hidetd is already serving on %s; refusing to start",
                         d->cfg.socket);
            return r;
        }
        if (r == -EEXIST) {
            hd_log_error("%s exists and is not a socket; refusing to replace it", d->cfg.socket);
            return r;
        }
        if (r < 0) {
            hd_log_error("cannot listen on %s: %s%s", d->cfg.socket, strerror(-r),
                         r == -ENOENT ? " (its directory does not exist; hidetd creates only "
                                        "the default socket's)"
                                      : "");
            return r;
        }
        d->bound_socket = true;
        desc_add(desc, desc_len, &dl, "unix:%s", d->cfg.socket);
    }
    if (d->cfg.http && !have_tcp) {
        char host[256];
        int port = 0;
        int r = hd_parse_http_addr(d->cfg.http, host, sizeof(host), &port);
        if (r == 0)
            r = proto_server_listen_tcp(d->http, host, port);
        if (r < 0) {
            hd_log_error("cannot listen for HTTP on %s: %s", d->cfg.http, strerror(-r));
            return r;
        }
        /* With port 0 the kernel picked one: say which. */
        int bound = proto_server_tcp_port(d->http);
        desc_add(desc, desc_len, &dl, "%shttp:%s:%d", dl ? ", " : "", host,
                 bound > 0 ? bound : port);
        /* proto binds exactly this literal ("localhost" is 127.0.0.1 there too). */
        note_tcp(d, host, bound > 0 ? bound : port);
    }
    return 0;
}

static void prune_work(uv_work_t *w);
static void prune_after(uv_work_t *w, int status);

typedef struct prune_job {
    uv_work_t work;
    hd_daemon *d;
    uint64_t max;
    size_t removed;
    int r;
    char err[160];
} prune_job;

static void prune_work(uv_work_t *w)
{
    sched_thread_background();
    prune_job *p = w->data;
    p->r = kc_prune_to_size(p->d->db, p->max, &p->removed);
    if (p->r < 0)
        snprintf(p->err, sizeof(p->err), "%s", p->r == -EIO ? kc_errmsg(p->d->db) : strerror(-p->r));
}

static void prune_after(uv_work_t *w, int status)
{
    prune_job *p = w->data;
    hd_daemon *d = p->d;
    d->pruning = false;
    if (status == 0 && p->r < 0)
        hd_log_warn("cache prune to %llu bytes failed: %s", (unsigned long long)p->max, p->err);
    if (p->removed > 0) {
        /* Our own deletes do not move data_version: drop the in-memory answers here. */
        resolve_invalidate(d->resolver);
        hd_log_info("cache pruned to %llu bytes: %zu least recently used kernels removed",
                    (unsigned long long)p->max, p->removed);
    }
    free(p);
}

static void maintenance_cb(uv_timer_t *t)
{
    hd_daemon *d = t->data;
    if (d->stopping || d->pruning || d->cfg.cache_max_size == 0)
        return;
    prune_job *p = calloc(1, sizeof(*p));
    if (!p)
        return;
    p->d = d;
    p->max = d->cfg.cache_max_size;
    p->work.data = p;
    /* Pruning may delete many rows: keep it off the loop (the handle serialises access). */
    if (uv_queue_work(d->loop, &p->work, prune_work, prune_after) == 0)
        d->pruning = true;
    else
        free(p);
}

/* ---- start-up warm-up ---------------------------------------------------------------------- */

/* What the first requests would otherwise pay, paid before READY (while the GPU workers start,
 * so on a GPU host it costs no start-up time): every thread of libuv's pool started and lowered
 * to background priority and CPUs (sched_thread_background: a pool thread only lowered itself
 * when its first work ran, so the first compiles on a fresh daemon could run at the loop's own
 * priority and on its core), NVRTC's one-time costs (tuner_warm_up: its builtins library loaded,
 * its code faulted in - read from disk on a freshly booted node -, its front end set up), and
 * the hit path's SQLite statements prepared. The kernel cache's file is read ahead too, so that
 * the first hits of a freshly booted node do not read it from disk on the loop thread, but
 * before the cache is opened (warm_readahead says why). */
#define WARM_READAHEAD_MAX (256ULL << 20) /* a bigger cache is read as it is used */
#define WARM_MEET_S 2.0 /* how long pool threads wait for each other (more than libuv may start) */

typedef struct warm_work {
    uv_work_t work;
    struct warmup *w;
    int index;
} warm_work;

typedef struct warmup {
    hd_daemon *d;
    int n, left;           /* works queued; not done yet (loop thread) */
    pthread_mutex_t lock;  /* guards arrived */
    pthread_cond_t all_in;
    int arrived;
    tuner_target target;
    int compile_rc;
    char *compile_err;
    double compile_ms, t0;
    warm_work works[];
} warmup;

static double mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Asks the kernel to read the cache file ahead. It runs before kc_open() and must stay there:
 * closing any descriptor of a database file drops every POSIX lock the process holds on it, so
 * an open and close while SQLite has the file open would silently release the daemon's locks,
 * and another process (hidetctl, a second daemon) could then run WAL recovery under it - in the
 * warm-up, on a pool thread, it made hidetctl miss kernels the daemon had committed (it_cluster's
 * fused retune). */
static void warm_readahead(const char *path)
{
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    struct stat st;
    if (fd < 0)
        return;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size <= WARM_READAHEAD_MAX)
        (void)posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
    close(fd);
}

static void warm_run(uv_work_t *req)
{
    warm_work *ww = req->data;
    warmup *w = ww->w;
    sched_thread_background();
    /* Each work holds its thread until all have arrived, so that every pool thread runs one
     * (a thread that finished would take the next). libuv may start fewer threads than asked
     * (an UV_THREADPOOL_SIZE above its own cap): then the wait ends at the deadline. */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)WARM_MEET_S;
    pthread_mutex_lock(&w->lock);
    if (++w->arrived >= w->n)
        pthread_cond_broadcast(&w->all_in);
    while (w->arrived < w->n)
        if (pthread_cond_timedwait(&w->all_in, &w->lock, &until) != 0)
            break;
    pthread_mutex_unlock(&w->lock);
    if (ww->index != 0)
        return;
    double t0 = mono_ms();
    w->compile_rc = tuner_warm_up(&w->target, &w->compile_err);
    w->compile_ms = mono_ms() - t0;
}

static void start_serving(hd_daemon *d);

/* The hit path's statements on the loop's connection are prepared at their first use: look up a
 * key that cannot exist, so that the first hit does not prepare them (nor read the tables' first
 * pages). Loop thread. */
static void warm_hit_path(hd_daemon *d)
{
    char none[KC_KEY_LEN + 1], akey[KC_KEY_LEN + 1];
    memset(none, '0', KC_KEY_LEN);
    none[KC_KEY_LEN] = '\0';
    kc_choice choice;
    kc_artifact *a = NULL;
    int64_t dv;
    (void)kc_selection_get(d->db, none, akey, &choice);
    if (kc_artifact_get_meta(d->db, none, &a) == 0)
        kc_artifact_free(a);
    (void)kc_data_version(d->db, &dv);
}

static void warm_after(uv_work_t *req, int status)
{
    warm_work *ww = req->data;
    warmup *w = ww->w;
    (void)status;
    if (--w->left > 0)
        return;
    hd_daemon *d = w->d;
    if (w->compile_rc < 0)
        hd_log_warn("start-up: NVRTC warm-up compile failed (the first job pays NVRTC's first "
                    "use): %s", w->compile_err ? w->compile_err : strerror(-w->compile_rc));
    hd_log_info("start-up warm-up: %d pool thread(s) lowered, NVRTC warmed in %.0f ms, %.0f ms "
                "in all", w->arrived, w->compile_ms, mono_ms() - w->t0);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->all_in);
    free(w->compile_err);
    free(w);
    warm_hit_path(d);
    d->warm_done = true;
    if (d->serve_wanted)
        start_serving(d);
}

/* Queues the warm-up on every pool thread; start_serving() waits for it. */
static void warm_up(hd_daemon *d, int n)
{
    warmup *w = calloc(1, sizeof(*w) + (size_t)n * sizeof(warm_work));
    if (!w || pthread_mutex_init(&w->lock, NULL) != 0) {
        free(w);
        d->warm_done = true;
        return;
    }
    pthread_cond_init(&w->all_in, NULL);
    w->d = d;
    w->n = n;
    w->t0 = mono_ms();
    w->target = d->cfg.default_arch.native || d->cfg.default_arch.target.sm == 0
                    ? (tuner_target){ .sm = 90 }
                    : d->cfg.default_arch.target;
    for (int i = 0; i < n; i++) {
        warm_work *ww = &w->works[i];
        ww->work.data = ww;
        ww->w = w;
        ww->index = i;
        if (uv_queue_work(d->loop, &ww->work, warm_run, warm_after) != 0)
            break;
        w->left++;
    }
    if (w->left == 0) {
        pthread_mutex_destroy(&w->lock);
        pthread_cond_destroy(&w->all_in);
        free(w);
        d->warm_done = true;
        return;
    }
    /* Fewer queued than planned: the others do not wait for works that never come. */
    pthread_mutex_lock(&w->lock);
    w->n = w->left;
    pthread_cond_broadcast(&w->all_in);
    pthread_mutex_unlock(&w->lock);
}

static void start_serving(hd_daemon *d)
{
    if (d->stopping || d->ready)
        return;
    if (!d->warm_done) {
        d->serve_wanted = true; /* warm_after() calls again */
        return;
    }
    sched_config sc;
    sched_config_from(&d->cfg, &sc);
    int r = sched_new(d->loop, d->db, d->pool, &sc, &d->sched);
    if (r < 0) {
        hd_log_error("cannot create the scheduler: %s", strerror(-r));
        goto fail;
    }
    resolve_config rc;
    resolve_config_from(&d->cfg, &rc);
    r = resolve_new(d->loop, d->db, d->sched, d->pool, &rc, &d->resolver);
    if (r < 0) {
        hd_log_error("cannot create the resolver: %s", strerror(-r));
        goto fail;
    }
    /* Blocks of 256 KiB and more are mapped and unmapped on their own. glibc raises this
     * threshold to the largest block freed (up to 32 MiB), after which the tens of MiB a graph
     * takes while the pool parses and partitions it stay in each pool thread's arena once freed:
     * 4 threads streaming 4096-node graphs kept about 230 MiB of RSS for a 64 MiB graph cache. */
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    graph_service_config gc = {.cache_bytes = d->cfg.graph_cache_bytes,
                               .max_running = d->cfg.graph_max_running,
                               .max_queued = d->cfg.graph_max_queued};
    r = graph_service_new(d->loop, d->resolver, d->sched, &gc, &d->graphs);
    if (r < 0) {
        hd_log_error("cannot create the graph service: %s", strerror(-r));
        goto fail;
    }
    if (cluster_start(d) < 0)
        goto fail;
    proto_limits lim;
    limits_from(&d->cfg, &lim);
    limits_fit_nofile(&lim, d->nofile);
    r = proto_server_new(d->loop, &lim, hd__handle, d, &d->http);
    if (r < 0) {
        hd_log_error("cannot create the HTTP server: %s", strerror(-r));
        goto fail;
    }
    proto_server_set_on_complete(d->http, hd__on_complete, d);
    proto_server_set_admit(d->http, hd__admit, d);
    char desc[512];
    if (listen_all(d, desc, sizeof(desc)) < 0)
        goto fail;
    char *err = NULL;
    if (hd_config_check_listeners(&d->cfg, &d->listen, &err) < 0) {
        hd_log_error("configuration: %s", err ? err : "refused");
        free(err);
        goto fail;
    }

    int gpus = 0;
    if (d->pool) {
        const gw_device_info *devs = NULL;
        size_t n = gw_pool_devices(d->pool, &devs);
        for (size_t i = 0; i < n; i++)
            hd_log_info("GPU %d: %s (sm_%d, %d SMs), worker %s", devs[i].index, devs[i].name,
                        devs[i].sm, devs[i].sm_count, gw_device_state_name(devs[i].state));
        if (n == 0) {
            /* One line that says what serving without a GPU means; the probe's own words (a
             * loader error for a missing libcuda.so.1, the driver's cuInit error) go to debug. */
            const char *why = gw_pool_probe_error(d->pool);
            bool no_driver = why && (strstr(why, "libcuda") || strstr(why, "exit status 127") ||
                                     strstr(why, "INSUFFICIENT_DRIVER"));
            hd_log_info("%s: serving; tune measure %s", no_driver ? "no GPU driver found"
                        : "no usable GPU found",
                        d->cfg.measure_requires_gpu ? "answers 503 no_gpu (measure_requires_gpu)"
                                                    : "answers from the cost model");
            if (why && *why)
                hd_log_debug("the GPU probe: %s", why);
        }
        gpus = gw_pool_usable(d->pool);
    }
    d->ready = true;
    hd_log_info("hidetd %s ready: serving on %s; cache %s; %d GPU worker(s) usable", HIDETD_VERSION,
                desc, d->cfg.cache_path, gpus);
    char status[640];
    snprintf(status, sizeof(status), "serving on %s, %d GPU(s)", desc, gpus);
    hd_notify_ready(status);
    uv_timer_start(&d->maintenance, maintenance_cb, PRUNE_FIRST_MS, PRUNE_EVERY_MS);
    return;
fail:
    d->exit_code = 1;
    begin_stop(d);
}

/* The pool's events (worker starts, deaths, restarts, loop stalls, out of service, probes) and
 * its workers' stderr and LOG lines, already cut and rate-limited by the pool, into our log. */
static void pool_log(void *udata, int level, const char *msg)
{
    (void)udata;
    hd_log(level <= GW_LOG_ERR ? HD_LOG_ERROR : level == GW_LOG_WARNING ? HD_LOG_WARN
           : level == GW_LOG_INFO ? HD_LOG_INFO : HD_LOG_DEBUG, "%s", msg);
}

static void pool_ready(void *udata)
{
    hd_daemon *d = udata;
    /* gw_pool_start may call this before it returns: then d->pool is not set yet, and the caller
     * starts serving once it is. */
    d->pool_ready_seen = true;
    if (!d->pool)
        return;
    start_serving(d);
}

/* ---- stopping ----------------------------------------------------------------------------- */

static void handle_closed(uv_handle_t *h)
{
    hd_daemon *d = h->data;
    d->handles_open--;
}

static void probe_closed(hd_loop_probe *p)
{
    hd_daemon *d = p->data;
    d->handles_open--;
}

static void close_handles(hd_daemon *d)
{
    uv_handle_t *hs[] = { (uv_handle_t *)&d->sig_poll, (uv_handle_t *)&d->watchdog,
                          (uv_handle_t *)&d->maintenance };
    for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++)
        if (hs[i]->data && !uv_is_closing(hs[i]))
            uv_close(hs[i], handle_closed);
    if (hd_loop_probe_active(&d->loop_probe))
        hd_loop_probe_close(&d->loop_probe, probe_closed);
}

static void pool_closed(void *udata)
{
    hd_daemon *d = udata;
    d->pool = NULL;
    close_handles(d);
}

static void http_closed(void *udata)
{
    hd_daemon *d = udata;
    d->http = NULL;
    /* The cluster tier answers its pending lookups (misses) as it closes, while the scheduler
     * can still take what they go on to; then the scheduler answers its waiters as it goes,
     * the resolver's among them. */
    if (d->cluster) {
        resolve_set_remote(d->resolver, NULL);
        ct_close(d->cluster);
        d->cluster = NULL;
    }
    sched_free(d->sched);
    d->sched = NULL;
    /* The scheduler answered the resolver's waiters, and through them the graph service's. */
    graph_service_free(d->graphs);
    d->graphs = NULL;
    resolve_free(d->resolver);
    d->resolver = NULL;
    if (d->pool)
        gw_pool_close(d->pool, pool_closed, d);
    else
        pool_closed(d);
}

static void drained(void *udata)
{
    hd_daemon *d = udata;
    if (d->http)
        proto_server_close(d->http, http_closed, d);
    else
        http_closed(d);
}

static void begin_stop(hd_daemon *d)
{
    if (d->stopping)
        return;
    d->stopping = true;
    hd_notify_stopping("draining");
    /* The drain may take the whole grace period: ask the service manager for that much. */
    hd_notify_extend_timeout((uint64_t)((d->cfg.grace + 10.0) * 1e6));
    uv_timer_stop(&d->maintenance);
    if (d->http)
        proto_server_stop_accepting(d->http);
    if (d->sched) {
        resolve_drain(d->resolver);
        sched_drain(d->sched, d->cfg.grace, drained, d);
    } else {
        drained(d);
    }
}

/* ---- reload ------------------------------------------------------------------------------- */

/* A reload that is refused: logged, counted, and said to systemd; the running configuration
 * stays as it is. */
static void reload_refused(hd_daemon *d, const char *why)
{
    hd_log_error("reload rejected, keeping the running configuration: %s", why);
    hd_counter_inc(d->m_reloads_failed);
    hd_notify_ready("serving (reload rejected: the running configuration stays; see the log)");
}

static void reload(hd_daemon *d)
{
    hd_notify_reloading();
    hd_config nc;
    char *err = NULL;
    char restart[2048], live[1024];
    int n_restart = 0;
    /* The file is read on the loop thread: read_small_file refuses anything but a regular file,
     * so that a FIFO at the config path cannot stop the loop (and with it SIGTERM). */
    int r = hd_config_build_reload(&d->cli, &d->cfg, &nc, restart, sizeof(restart), &n_restart,
                                   &err);
    if (r < 0) {
        reload_refused(d, err ? err : strerror(-r));
        free(err);
        return;
    }
    /* Against the listeners actually serving, those passed by systemd included. */
    r = hd_config_check_listeners(&nc, &d->listen, &err);
    if (r == 0 && d->listen.n_tcp > 0 && nc.tcp_auth && !nc.token && d->cfg.token) {
        err = strdup("it leaves TCP without a token (every TCP request would be refused): set "
                     "[server] token or token_file");
        r = -EINVAL;
    }
    if (r < 0) {
        hd_config_clear(&nc);
        reload_refused(d, err ? err : strerror(-r));
        free(err);
        return;
    }
    hd_config_diff(&d->cfg, &nc, live, sizeof(live), NULL, 0);
    bool prune = nc.cache_max_size && nc.cache_max_size != d->cfg.cache_max_size;
    hd_config_clear(&d->cfg);
    d->cfg = nc;

    hd_log_set_level(d->cfg.log_level);
    resolve_config rc;
    resolve_config_from(&d->cfg, &rc);
    resolve_reconfigure(d->resolver, &rc);
    if (d->http) {
        proto_limits lim;
        limits_from(&d->cfg, &lim);
        limits_fit_nofile(&lim, d->nofile);
        proto_server_set_limits(d->http, &lim);
    }
    if (d->sched) {
        sched_config sc;
        sched_config_from(&d->cfg, &sc);
        sched_reconfigure(d->sched, &sc);
    }
    hd_counter_inc(d->m_reloads_ok);
    hd_gauge_set(d->m_restart_pending, n_restart);
    hd_log_info("configuration reloaded; applied: %s", live[0] ? live : "(no changes)");
    if (restart[0])
        hd_log_warn("configuration reload: %s changed in the file but need%s a restart; ignored "
                    "until then (the running values stay in effect)", restart,
                    n_restart > 1 ? "" : "s");
    if (prune && d->ready)
        maintenance_cb(&d->maintenance);
    if (restart[0]) {
        char status[2200];
        snprintf(status, sizeof(status), "serving (reloaded; ignored until a restart: %s)",
                 restart);
        hd_notify_ready(status);
    } else {
        hd_notify_ready("serving (reloaded)");
    }
}

/* ---- signals and watchdog ----------------------------------------------------------------- */

static void on_signal(hd_daemon *d, int signum)
{
    if (signum == SIGHUP) {
        if (!d->stopping)
            reload(d);
        return;
    }
    if (d->stopping) {
        if (signum == SIGINT) {
            hd_log_warn("second SIGINT: exiting now without draining");
            if (d->bound_socket)
                unlink(d->cfg.socket);
            hd_log_flush();
            _exit(130);
        }
        hd_log_info("%s: already shutting down", strsignal(signum));
        return;
    }
    hd_log_info("%s: shutting down (running jobs get up to %gs, waiting clients are answered)",
                strsignal(signum), d->cfg.grace);
    begin_stop(d);
}

static void sig_readable(uv_poll_t *h, int status, int events)
{
    hd_daemon *d = h->data;
    (void)events;
    if (status < 0)
        return;
    struct signalfd_siginfo si;
    for (;;) {
        ssize_t n = read(d->sig_fd, &si, sizeof(si));
        if (n != (ssize_t)sizeof(si))
            break; /* EAGAIN: all taken */
        on_signal(d, (int)si.ssi_signo);
    }
}

/* The signals the daemon handles are blocked in every thread and taken from a signalfd on the
 * loop. A handler would not do: NVRTC installs its own SIGINT/SIGTERM handlers (which exit(0))
 * while it compiles on the thread pool and restores the previous ones afterwards, so a SIGTERM
 * during a compile would skip the drain, and two compiles racing their save/restore can leave
 * NVRTC's handler installed for good. A blocked signal never reaches any handler. Must run
 * before any thread exists so that every thread inherits the mask; uv_spawn() gives children
 * an empty mask again. Returns the descriptor or a negative errno. */
static int signals_block(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    int r = pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (r != 0)
        return -r;
    int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

static void signals_unblock(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

static void watchdog_cb(uv_timer_t *t)
{
    (void)t;
    hd_notify_watchdog();
}

/* ---- run -------------------------------------------------------------------------------- */

static void set_threadpool_size(void)
{
    /* NVRTC compiles run on libuv's pool; its size is read once, at the first queued work. An
     * operator's explicit setting wins. Otherwise one thread per CPU this process may run on
     * (its affinity: a unit's CPUAffinity= or taskset, not the machine's count), at least four. */
    if (getenv("UV_THREADPOOL_SIZE"))
        return;
    cpu_set_t set;
    long n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set)
                                                         : sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 4)
        n = 4;
    if (n > 1024)
        n = 1024;
    char buf[16];
    snprintf(buf, sizeof(buf), "%ld", n);
    setenv("UV_THREADPOOL_SIZE", buf, 1);
}

static int init_handle(hd_daemon *d, uv_handle_t *h)
{
    h->data = d;
    d->handles_open++;
    return 0;
}

int hd_daemon_run(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    hd_daemon *d = calloc(1, sizeof(*d));
    if (!d) {
        fprintf(stderr, "hidetd: out of memory\n");
        return 1;
    }
    d->sig_fd = -1;
    int code = 1;
    char *err = NULL;
    char *worker = NULL;
    bool loop_ok = false;
    uv_loop_t loop;

    int r = hd_cli_parse(argc, argv, &d->cli, &err);
    if (r < 0) {
        fprintf(stderr, "hidetd: %s\n", err ? err : strerror(-r));
        code = 2;
        goto out;
    }
    if (d->cli.help) {
        fputs(hd_cli_usage(), stdout);
        code = 0;
        goto out;
    }
    if (d->cli.version) {
        printf("hidetd %s\n", HIDETD_VERSION);
        code = 0;
        goto out;
    }
    hd_log_init(HD_LOG_INFO);
    r = hd_config_build(&d->cli, &d->cfg, &err);
    if (r < 0) {
        hd_log_error("configuration: %s", err ? err : strerror(-r));
        goto out;
    }
    hd_log_set_level(d->cfg.log_level);
    if (d->cli.token)
        hd_log_warn("--token shows the token to every local user (ps, /proc/PID/cmdline): use "
                    "--token-file, $HIDETD_TOKEN_FILE or [server] token_file");
    d->nofile = raise_nofile();
    set_threadpool_size();
    d->sig_fd = signals_block();
    if (d->sig_fd < 0) {
        hd_log_error("cannot set up signal handling: %s", strerror(-d->sig_fd));
        goto out;
    }
    if (sodium_init() < 0) {
        hd_log_error("libsodium failed to initialise");
        goto out;
    }
    d->start_wall_s = wall_now();

    warm_readahead(d->cfg.cache_path);
    r = kc_open(d->cfg.cache_path, &d->db, &err);
    if (r < 0) {
        hd_log_error("cannot open the kernel cache %s: %s", d->cfg.cache_path,
                     err ? err : strerror(-r));
        goto out;
    }
    if (resolve_worker(&d->cfg, &worker) < 0)
        goto out;

    r = uv_loop_init(&loop);
    if (r < 0) {
        hd_log_error("cannot create the event loop: %s", uv_strerror(r));
        goto out;
    }
    loop_ok = true;
    d->loop = &loop;
    hd__metrics_setup(d);
    r = hd_loop_probe_start(&loop, &d->loop_probe, 0, d->m_loop_lag);
    if (r == 0) {
        d->loop_probe.data = d;
        d->handles_open++;
    } else {
        hd_log_warn("no loop-lag probe (hidetd_loop_lag_seconds stays empty): %s", strerror(-r));
    }

    r = uv_poll_init(&loop, &d->sig_poll, d->sig_fd);
    if (r < 0) {
        hd_log_error("cannot watch signals: %s", uv_strerror(r));
        goto out;
    }
    init_handle(d, (uv_handle_t *)&d->sig_poll);
    uv_timer_init(&loop, &d->watchdog);
    init_handle(d, (uv_handle_t *)&d->watchdog);
    uv_timer_init(&loop, &d->maintenance);
    init_handle(d, (uv_handle_t *)&d->maintenance);
    /* Log lines leave through the writer thread, which wakes at a batch's first line. */
    hd_log_set_buffered(true);
    uv_poll_start(&d->sig_poll, UV_READABLE, sig_readable);
    if (hd_watchdog_interval(&d->watchdog_usec) == 1 && d->watchdog_usec >= 2000) {
        uint64_t ms = d->watchdog_usec / 2000;
        uv_timer_start(&d->watchdog, watchdog_cb, ms, ms);
    }

    hd_log_info("hidetd %s starting: cache %s, workers %s%s%s", HIDETD_VERSION, d->cfg.cache_path,
                hd_workers_mode_name(d->cfg.workers), worker ? " " : "", worker ? worker : "");
    warm_up(d, threadpool_size());
    if (worker) {
        gw_config gc = {
            .worker_path = worker,
            .launch_timeout_s = d->cfg.launch_timeout,
            .heartbeat_s = d->cfg.heartbeat,
            .max_restarts = d->cfg.max_restarts,
            .log = pool_log,
            .log_udata = d,
        };
        gw_pool *pool = NULL;
        r = gw_pool_start(&loop, &gc, pool_ready, d, &pool);
        if (r < 0) {
            hd_log_error("cannot start the GPU worker pool (%s): %s", worker, strerror(-r));
            d->exit_code = 1;
            begin_stop(d);
        } else {
            d->pool = pool;
            /* Ready may already have been reported, before d->pool was set. */
            if (d->pool_ready_seen)
                start_serving(d);
        }
    } else {
        start_serving(d);
    }

    uv_run(&loop, UV_RUN_DEFAULT);
    code = d->exit_code;
    if (code == 0)
        hd_log_info("stopped");

out:
    hd_log_set_buffered(false);
    if (loop_ok) {
        /* Everything was closed by the stop sequence; run once more for stragglers. */
        uv_run(&loop, UV_RUN_NOWAIT);
        if (uv_loop_close(&loop) != 0)
            hd_log_warn("event loop closed with handles still open");
    }
    if (d->sig_fd >= 0) {
        close(d->sig_fd);
        signals_unblock();
    }
    hd_metrics_free(d->metrics);
    kc_close(d->db);
    hd_config_clear(&d->cfg);
    free(worker);
    free(err);
    free(d);
    return code;
}
