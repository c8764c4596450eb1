/* gpu_workers/serve.c - the worker processes' protocol loop (see serve.h). */
#include "gpu_workers/serve.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu_workers/wire.h"

static struct {
    int fd;
    pthread_mutex_t write_lock;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool have_req;      /* slot holds a request not yet taken by the main thread */
    gw_wire_msg msg;    /* the slot's frame (owns the images) */
    gw_measure_req req;
    _Atomic uint64_t busy_id;
    atomic_bool cancel;
    atomic_bool hb_stopped;
    atomic_bool started;
    double heartbeat_s;
} S = {
    .fd = -1,
    .write_lock = PTHREAD_MUTEX_INITIALIZER,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .cond = PTHREAD_COND_INITIALIZER,
};

/* Writes one prepared frame; a dead daemon ends the worker. */
static void send_frame(uint8_t *buf, size_t len, int enc_err)
{
    if (enc_err < 0)
        return;
    pthread_mutex_lock(&S.write_lock);
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(S.fd, buf + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            _exit(0);
        off += (size_t)w;
    }
    pthread_mutex_unlock(&S.write_lock);
    free(buf);
}

void gw__serve_stop_heartbeats(void)
{
    atomic_store(&S.hb_stopped, true);
}

void gw__serve_log(const char *fmt, ...)
{
    char line[GW_WIRE_MAX_LOG];
    va_list ap;
    uint8_t *buf = NULL;
    size_t len = 0;

    if (!atomic_load(&S.started))
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    int r = gw_wire_encode_simple(GW_MSG_LOG, 0, line, &buf, &len);
    send_frame(buf, len, r);
}

static void *heartbeat_main(void *arg)
{
    (void)arg;
    struct timespec ts;
    ts.tv_sec = (time_t)S.heartbeat_s;
    ts.tv_nsec = (long)((S.heartbeat_s - (double)ts.tv_sec) * 1e9);
    for (;;) {
        nanosleep(&ts, NULL);
        if (atomic_load(&S.hb_stopped))
            continue;
        uint8_t *buf = NULL;
        size_t len = 0;
        int r = gw_wire_encode_simple(GW_MSG_HEARTBEAT, atomic_load(&S.busy_id), NULL, &buf, &len);
        send_frame(buf, len, r);
    }
    return NULL;
}

/* Reads every frame from the daemon. Measure requests go to the slot; a second request while
 * one is pending is a protocol error by the daemon (it sends one at a time) and ends the worker. */
static void *reader_main(void *arg)
{
    (void)arg;
    for (;;) {
        gw_wire_msg m = {0};
        int r = gw_wire_recv_fd(S.fd, &m);
        if (r == -EPIPE)
            _exit(0);
        if (r < 0) {
            fprintf(stderr, "hidetd-worker: bad frame from the daemon (%s)\n", strerror(-r));
            _exit(2);
        }
        switch (m.type) {
        case GW_MSG_MEASURE: {
            gw_measure_req q;
            if (gw_wire_decode_measure(&m, &q) < 0) {
                fprintf(stderr, "hidetd-worker: malformed measure request\n");
                _exit(2);
            }
            pthread_mutex_lock(&S.lock);
            if (S.have_req || atomic_load(&S.busy_id)) {
                pthread_mutex_unlock(&S.lock);
                fprintf(stderr, "hidetd-worker: measure request while busy\n");
                _exit(2);
            }
            S.msg = m;
            S.req = q;
            S.have_req = true;
            /* Marked busy here, not when the main thread wakes, so that a CANCEL that
             * follows at once is not lost. */
            atomic_store(&S.cancel, false);
            atomic_store(&S.busy_id, q.id ? q.id : UINT64_MAX);
            pthread_cond_signal(&S.cond);
            pthread_mutex_unlock(&S.lock);
            continue; /* the slot owns m now */
        }
        case GW_MSG_CANCEL: {
            uint64_t id = 0;
            if (gw_wire_decode_id(&m, &id) == 0 && id && id == atomic_load(&S.busy_id))
                atomic_store(&S.cancel, true);
            break;
        }
        case GW_MSG_SHUTDOWN:
            _exit(0);
        default:
            fprintf(stderr, "hidetd-worker: unexpected message type %u\n", m.type);
            _exit(2);
        }
        gw_wire_msg_clear(&m);
    }
    return NULL;
}

int gw__serve(int fd, const gw_device_info *dev, const char *error, double heartbeat_s,
              gw__measure_fn measure, void *ctx)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    pthread_t hb, rd;

    if (fd < 0 || (!dev && !error) || (dev && !measure))
        return 2;
    S.fd = fd;
    S.heartbeat_s = heartbeat_s > 0.001 ? heartbeat_s : 1.0;
    int r = gw_wire_encode_hello((int)getpid(), dev, dev ? NULL : error, &buf, &len);
    if (r < 0)
        return 2;
    atomic_store(&S.started, true);
    send_frame(buf, len, 0);
    if (!dev)
        return 1;
    if (pthread_create(&hb, NULL, heartbeat_main, NULL) != 0 ||
        pthread_create(&rd, NULL, reader_main, NULL) != 0)
        return 2;

    for (;;) {
        pthread_mutex_lock(&S.lock);
        while (!S.have_req)
            pthread_cond_wait(&S.cond, &S.lock);
        gw_wire_msg m = S.msg;
        gw_measure_req q = S.req;
        memset(&S.msg, 0, sizeof(S.msg));
        S.have_req = false;
        pthread_mutex_unlock(&S.lock);

        gw_measure_result res;
        bool fatal = false;
        memset(&res, 0, sizeof(res));
        res.id = q.id;
        res.device = dev->index;
        measure(ctx, &q, &S.cancel, &res, &fatal);
        gw_wire_msg_clear(&m);
        buf = NULL;
        r = gw_wire_encode_result(&res, fatal, &buf, &len);
        if (r < 0) {
            fprintf(stderr, "hidetd-worker: cannot encode a result (%s)\n", strerror(-r));
            _exit(2);
        }
        /* Not busy any more before the result leaves, so the next request is never refused. */
        atomic_store(&S.busy_id, 0);
        send_frame(buf, len, 0);
        if (fatal)
            _exit(3);
    }
    return 0;
}

static int parse_num(const char *s, double lo, double hi, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        return -EINVAL;
    *out = v;
    return 0;
}

int gw__parse_args(int argc, char **argv, gw__args *ret)
{
    gw__args a = {.device = -1, .fd = -1, .heartbeat_s = 1.0, .launch_timeout_s = 2.0};
    double v;

    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--probe")) {
            a.probe = true;
            continue;
        }
        if (i + 1 >= argc)
            goto usage;
        const char *val = argv[++i];
        if (!strcmp(o, "--device") && parse_num(val, 0, GW_MAX_DEVICES - 1, &v) == 0 &&
            v == (int)v)
            a.device = (int)v;
        else if (!strcmp(o, "--fd") && parse_num(val, 0, 1 << 20, &v) == 0 && v == (int)v)
            a.fd = (int)v;
        else if (!strcmp(o, "--heartbeat") && parse_num(val, 0.01, 3600, &v) == 0)
            a.heartbeat_s = v;
        else if (!strcmp(o, "--launch-timeout") && parse_num(val, 0.001, 3600, &v) == 0)
            a.launch_timeout_s = v;
        else
            goto usage;
    }
    if (!a.probe && (a.device < 0 || a.fd < 0))
        goto usage;
    *ret = a;
    return 0;
usage:
    fprintf(stderr, "usage: %s --probe\n"
                    "       %s --device N --fd FD [--heartbeat S] [--launch-timeout S]\n",
            argv[0], argv[0]);
    return -EINVAL;
}
