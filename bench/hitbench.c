/* bench/hitbench.c - cache-hit load on a running hidetd over its Unix socket.
 *
 *   hitbench SOCKET [CLIENTS=64] [SECONDS=10] [RATE=0] [REQUEST.json]
 *
 * CLIENTS keep-alive connections each send the same POST /v1/kernels (which must be a cache hit:
 * a warm-up checks "cached":true) one request at a time. RATE = 0 runs closed-loop (each client
 * sends again as soon as its answer arrives: the saturation throughput). RATE > 0 offers that
 * many requests per second in total, spread evenly over the clients; a request's latency is
 * counted from the moment it was due, not when it could be sent, so a server that falls behind
 * is charged for the wait (no coordinated omission).
 *
 * One thread drives every connection through epoll, so the generator takes as little of the
 * machine's CPU as it can: on a 2-core machine it shares the cores with the daemon. */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

typedef struct conn {
    int fd;
    double due;      /* when the current (or next) request is due */
    bool in_flight;
    size_t sent;     /* bytes of the request written */
    char buf[16384]; /* the answer so far */
    size_t got;
} conn;

static char request[8192];
static size_t request_len;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int connect_daemon(const char *path, bool nonblocking)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | (nonblocking ? SOCK_NONBLOCK : 0), 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* Length of a complete answer at the start of buf, or 0 while incomplete. */
static size_t answer_len(const char *buf, size_t got)
{
    const char *end = memmem(buf, got, "\r\n\r\n", 4);
    if (!end)
        return 0;
    const char *cl = strcasestr(buf, "content-length:");
    size_t body = cl && cl < end ? strtoul(cl + 15, NULL, 10) : 0;
    size_t total = (size_t)(end + 4 - buf) + body;
    return got >= total ? total : 0;
}

/* One blocking round trip (warm-up); returns the status, the answer in buf. */
static int roundtrip(const char *path, char *buf, size_t cap)
{
    int fd = connect_daemon(path, false);
    if (fd < 0)
        return -1;
    size_t got = 0;
    if (write(fd, request, request_len) != (ssize_t)request_len) {
        close(fd);
        return -1;
    }
    while (!answer_len(buf, got)) {
        ssize_t r = read(fd, buf + got, cap - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
        buf[got] = 0;
    }
    close(fd);
    return got > 12 ? atoi(buf + 9) : -1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static bool try_send(conn *c)
{
    while (c->sent < request_len) {
        ssize_t w = write(c->fd, request + c->sent, request_len - c->sent);
        if (w < 0)
            return errno == EAGAIN;
        c->sent += (size_t)w;
    }
    return true;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: hitbench SOCKET [CLIENTS] [SECONDS] [RATE] [REQUEST.json]\n");
        return 2;
    }
    const char *path = argv[1];
    int n = argc > 2 ? atoi(argv[2]) : 64;
    double seconds = argc > 3 ? atof(argv[3]) : 10;
    double rate = argc > 4 ? atof(argv[4]) : 0;
    char body[4096] = "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,64],\"dtype\":\"f16\"},"
                      "{\"shape\":[64,256],\"dtype\":\"f16\"}],\"arch\":\"sm_90\",\"tune\":\"model\"}";
    if (argc > 5) {
        FILE *f = fopen(argv[5], "r");
        size_t len = f ? fread(body, 1, sizeof(body) - 1, f) : 0;
        body[len] = 0;
        if (f)
            fclose(f);
    }
    if (n < 1 || n > 4096 || seconds <= 0) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    request_len = (size_t)snprintf(request, sizeof(request),
                                   "POST /v1/kernels HTTP/1.1\r\nHost: localhost\r\n"
                                   "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                                   strlen(body), body);

    static char buf[65536];
    for (int i = 0; i < 2; i++) {
        int st = roundtrip(path, buf, sizeof(buf));
        if (st != 200) {
            fprintf(stderr, "warm-up request failed (status %d): %.300s\n", st, buf);
            return 1;
        }
    }
    if (!strstr(buf, "\"cached\":true")) {
        fprintf(stderr, "the request is not answered from the cache\n");
        return 1;
    }

    int ep = epoll_create1(0);
    conn *cs = calloc((size_t)n, sizeof(conn));
    double t0 = now_s(), stop = t0 + seconds;
    double interval = rate > 0 ? (double)n / rate : 0; /* per client */
    for (int i = 0; i < n; i++) {
        cs[i].fd = connect_daemon(path, true);
        if (cs[i].fd < 0) {
            fprintf(stderr, "connect %d: %s\n", i, strerror(errno));
            return 1;
        }
        cs[i].due = t0 + (rate > 0 ? interval * i / n : 0);
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = &cs[i]};
        epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &ev);
    }

    size_t cap = 1 << 20, total = 0;
    double *lat = malloc(cap * sizeof(double));
    unsigned long errors = 0;
    struct epoll_event evs[256];
    for (;;) {
        double now = now_s();
        if (now >= stop)
            break;
        /* Start every request that is due. */
        double next_due = stop;
        for (int i = 0; i < n; i++) {
            conn *c = &cs[i];
            if (c->in_flight)
                continue;
            if (c->due <= now) {
                c->in_flight = true;
                c->sent = 0;
                c->got = 0;
                if (!try_send(c))
                    errors++;
            } else if (c->due < next_due) {
                next_due = c->due;
            }
        }
        /* Under a millisecond to the next due request the generator polls instead of sleeping:
         * a sleeping generator wakes late and charges its own lag to the daemon. */
        int timeout_ms = rate > 0 ? (int)((next_due - now) * 1000) : 100;
        int k = epoll_wait(ep, evs, 256, timeout_ms < 0 ? 0 : timeout_ms);
        now = now_s();
        for (int e = 0; e < k; e++) {
            conn *c = evs[e].data.ptr;
            if (!c->in_flight)
                continue;
            if (c->sent < request_len)
                try_send(c);
            for (;;) {
                ssize_t r = read(c->fd, c->buf + c->got, sizeof(c->buf) - 1 - c->got);
                if (r <= 0)
                    break;
                c->got += (size_t)r;
            }
            c->buf[c->got] = 0;
            if (!answer_len(c->buf, c->got))
                continue;
            if (atoi(c->buf + 9) != 200)
                errors++;
            if (total == cap) {
                cap *= 2;
                lat = realloc(lat, cap * sizeof(double));
            }
            lat[total++] = now - c->due;
            c->in_flight = false;
            c->due = rate > 0 ? c->due + interval : now;
        }
    }
    double elapsed = now_s() - t0;
    qsort(lat, total, sizeof(double), cmp_double);
#define PCT(p) (total ? lat[(size_t)((double)(total - 1) * (p))] * 1e6 : 0)
    printf("clients %d, %s %.0f req/s offered, %.1f s: %zu answers, %lu errors, %.0f req/s; "
           "latency us p50 %.0f p90 %.0f p99 %.0f p99.9 %.0f max %.0f\n",
           n, rate > 0 ? "open loop," : "closed loop", rate, elapsed, total, errors,
           (double)total / elapsed, PCT(0.5), PCT(0.9), PCT(0.99), PCT(0.999), PCT(1.0));
    for (int i = 0; i < n; i++)
        close(cs[i].fd);
    free(cs);
    free(lat);
    close(ep);
    return errors ? 1 : 0;
}
