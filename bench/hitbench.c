/* bench/hitbench.c - cache-hit load on a running hidetd: N clients on its Unix socket, each with
 * one keep-alive connection, send the same POST /v1/kernels back to back for D seconds. Prints
 * requests/s and latency percentiles. The request must already be cached (one warm-up request is
 * sent first and must answer "cached": true on the second try).
 *
 *   hitbench SOCKET [CLIENTS=64] [SECONDS=10] [REQUEST.json]
 *
 * Plain blocking sockets and one thread per client keep the generator simple; on a 2-core machine
 * it competes with the daemon for the CPU, which is the situation the target describes. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static const char *sock_path;
static char request[8192];
static size_t request_len;
static double stop_at;

typedef struct {
    double *lat;
    size_t n, cap;
    unsigned long errors;
} client_stats;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int connect_daemon(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock_path);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* Sends one request and reads one whole answer (Content-Length framed). Returns the status. */
static int roundtrip(int fd, char *buf, size_t cap)
{
    size_t off = 0;
    while (off < request_len) {
        ssize_t w = write(fd, request + off, request_len - off);
        if (w <= 0)
            return -1;
        off += (size_t)w;
    }
    size_t got = 0;
    for (;;) {
        ssize_t r = read(fd, buf + got, cap - 1 - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
        buf[got] = 0;
        char *end = strstr(buf, "\r\n\r\n");
        if (!end)
            continue;
        char *cl = strcasestr(buf, "content-length:");
        size_t body = cl ? strtoul(cl + 15, NULL, 10) : 0;
        if (got >= (size_t)(end + 4 - buf) + body)
            break;
    }
    return atoi(buf + 9);
}

static void *client(void *arg)
{
    client_stats *s = arg;
    char buf[65536];
    int fd = connect_daemon();
    while (fd >= 0 && now_s() < stop_at) {
        double t0 = now_s();
        int st = roundtrip(fd, buf, sizeof(buf));
        double dt = now_s() - t0;
        if (st != 200) {
            s->errors++;
            close(fd);
            fd = connect_daemon();
            continue;
        }
        if (s->n == s->cap) {
            s->cap = s->cap ? 2 * s->cap : 4096;
            s->lat = realloc(s->lat, s->cap * sizeof(double));
        }
        s->lat[s->n++] = dt;
    }
    if (fd >= 0)
        close(fd);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: hitbench SOCKET [CLIENTS] [SECONDS] [REQUEST.json]\n");
        return 2;
    }
    sock_path = argv[1];
    int clients = argc > 2 ? atoi(argv[2]) : 64;
    double seconds = argc > 3 ? atof(argv[3]) : 10;
    char body[4096] = "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,64],\"dtype\":\"f16\"},"
                      "{\"shape\":[64,256],\"dtype\":\"f16\"}],\"arch\":\"sm_90\",\"tune\":\"model\"}";
    if (argc > 4) {
        FILE *f = fopen(argv[4], "r");
        size_t n = f ? fread(body, 1, sizeof(body) - 1, f) : 0;
        body[n] = 0;
        if (f)
            fclose(f);
    }
    request_len = (size_t)snprintf(request, sizeof(request),
                                   "POST /v1/kernels HTTP/1.1\r\nHost: localhost\r\n"
                                   "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                                   strlen(body), body);

    /* Warm up: make sure it is cached. */
    char buf[65536];
    for (int i = 0; i < 2; i++) {
        int fd = connect_daemon();
        if (fd < 0) {
            fprintf(stderr, "cannot connect to %s: %s\n", sock_path, strerror(errno));
            return 1;
        }
        int st = roundtrip(fd, buf, sizeof(buf));
        close(fd);
        if (st != 200) {
            fprintf(stderr, "warm-up request failed with status %d\n", st);
            return 1;
        }
    }
    if (!strstr(buf, "\"cached\":true")) {
        fprintf(stderr, "the request is not answered from the cache\n");
        return 1;
    }

    pthread_t *th = calloc((size_t)clients, sizeof(*th));
    client_stats *st = calloc((size_t)clients, sizeof(*st));
    double t0 = now_s();
    stop_at = t0 + seconds;
    for (int i = 0; i < clients; i++)
        pthread_create(&th[i], NULL, client, &st[i]);
    size_t total = 0;
    unsigned long errors = 0;
    for (int i = 0; i < clients; i++) {
        pthread_join(th[i], NULL);
        total += st[i].n;
        errors += st[i].errors;
    }
    double elapsed = now_s() - t0;
    double *all = malloc((total ? total : 1) * sizeof(double));
    size_t k = 0;
    for (int i = 0; i < clients; i++) {
        memcpy(all + k, st[i].lat, st[i].n * sizeof(double));
        k += st[i].n;
        free(st[i].lat);
    }
    qsort(all, total, sizeof(double), cmp_double);
#define PCT(p) (total ? all[(size_t)((double)(total - 1) * (p))] * 1e6 : 0)
    printf("clients %d, %.1f s: %zu requests, %lu errors, %.0f req/s; latency us p50 %.0f p90 %.0f "
           "p99 %.0f p99.9 %.0f max %.0f\n",
           clients, elapsed, total, errors, (double)total / elapsed, PCT(0.5), PCT(0.9), PCT(0.99),
           PCT(0.999), PCT(1.0));
    free(all);
    free(st);
    free(th);
    return errors ? 1 : 0;
}
