/* gpu_workers/pool.c - the daemon's GPU worker pool (see gw.h).
 *
 * Life of a worker: spawned with a socketpair on fd 3 (and its stderr piped to the log), it says
 * HELLO, then takes one MEASURE at a time from its device's FIFO queue. A single repeating timer
 * per worker watches everything time-bound: the hello deadline, heartbeats (3 missed = hung), the
 * in-flight request's deadline, a cancelled request that does not finish, and the backoff before
 * a restart. Whatever goes wrong, the answer is SIGKILL: the process's exit, the end of its
 * socket and of its stderr are the three handles whose closing marks the worker as down; only
 * then is the in-flight request completed (so a RESULT written just before exiting is still
 * read) and the restart planned.
 *
 * Health is judged by the worker, not by the loop's punctuality. The timer is a loop timer: when
 * the loop thread stalls (a long callback, a flood, the process stopped), it fires late, and in
 * libuv before the poll that would read what the workers wrote meanwhile. So (1) before a worker
 * is judged (hung, past a deadline), whatever waits in its socket is read and handled; (2) a tick
 * that comes more than a heartbeat period late means the loop stalled: the check restarts its
 * clock (last heard = now, every deadline moved by the stall) instead of judging.
 *
 * Failure accounting: a worker that crashes, hangs, breaks the protocol or fails to start counts
 * as a failure of its device; after max_restarts consecutive failures with no measurement in
 * between the device is out of service. A worker that reports a poisoned context (GW_FAULT or
 * GW_TIMEOUT result with "fatal") and exits is the candidate's fault, not the device's: it is
 * restarted at once and not counted.
 *
 * Out of service is not forever: after probe_min_s a probe worker is started; a probe that says
 * hello brings the device back, on probation (its next failure before a measurement succeeds
 * takes it out again); a probe that fails plans the next one twice as late, at most probe_max_s.
 * A measurement that succeeds ends the probation and resets the backoff.
 *
 * Every event is logged through cfg.log; the workers' stderr and LOG lines are relayed with
 * their GPU, cut at GW_LOG_LINE_MAX bytes and rate-limited per worker (GW_LOG_BURST, then
 * GW_LOG_RATE a second), the dropped lines counted and reported.
 */
#include "gpu_workers/gw.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "gpu_workers/wire.h"

#define HELLO_TIMEOUT_MS 30000
#define PROBE_TIMEOUT_MS 30000
#define EXIT_GRACE_MS 2000   /* a worker that announced its exit, or was killed, must be gone by then */
#define PROBE_MAX_OUTPUT (256u << 10)
#define DRAIN_MAX (4u << 20) /* bytes one drain reads at most: it must not hold the loop long */

typedef enum {
    KILL_NONE = 0,
    KILL_HUNG,     /* heartbeats stopped */
    KILL_DEADLINE, /* the request's deadline passed */
    KILL_PROTOCOL, /* garbage on the socket, or it closed early */
    KILL_DRAIN,    /* a cancelled request did not finish quickly */
    KILL_FATAL,    /* it announced its exit and did not go */
    KILL_HELLO,    /* no hello in time */
    KILL_CLOSE,    /* the pool is closing */
} kill_reason;

typedef struct linebuf {
    char buf[GW_LOG_LINE_MAX];
    size_t len;
    size_t cut; /* bytes of the current line past the buffer, dropped */
} linebuf;

/* A token bucket for log lines: GW_LOG_BURST at once, GW_LOG_RATE a second after that. */
typedef struct ratelim {
    bool primed;
    double tokens;
    uint64_t at_ms;   /* loop time of the last refill */
    uint64_t dropped; /* dropped since the last report */
} ratelim;

typedef enum { AT_NONE = 0, AT_PENDING, AT_QUEUED, AT_RUNNING } ticket_place;

typedef struct worker worker;

struct gw_ticket {
    gw_pool *pool;
    gw_ticket *prev, *next;
    ticket_place place;
    worker *w;
    int pin; /* device index asked for, -1 any */
    int sm;
    uint64_t id;
    int n_runs; /* launches the request may make, for its deadline */
    uint64_t ref_ms; /* the reference's allowance (see measure.c), also for the deadline */
    uint8_t *frame;
    size_t frame_len;
    gw_measure_cb cb;
    void *udata;
};

typedef struct tqueue {
    gw_ticket *head, *tail;
    int n;
} tqueue;

struct worker {
    gw_pool *pool;
    gw_device_info info;
    uv_process_t proc;
    uv_pipe_t chan, err;
    uv_timer_t timer;
    int live; /* proc/chan/err handles not yet closed */
    bool spawned, hello, settled, oos, chan_open, err_open, ever_started;
    gw_wire_reader rd;
    linebuf errbuf;
    ratelim logrl; /* stderr and LOG lines, over every process of the device */
    char last_stderr[160];
    char start_error[160]; /* HELLO's error or the spawn failure: why this start failed */
    int64_t exit_status;
    int term_signal;
    uint64_t eof_at, last_heard, hello_deadline, req_deadline, drain_deadline, exit_deadline, restart_at,
        exited_at;
    gw_ticket *running;
    uint64_t running_since; /* uv_hrtime() when `running` was dispatched */
    uint64_t busy_ns;       /* closed busy intervals, summed into info.busy_s by snapshots */
    bool draining, expect_exit, restart_planned;
    uint64_t drain_id;
    kill_reason kill;
    int fails;
    tqueue q;
    uint64_t tick_ms, last_tick; /* the timer's period; loop time of its last run */
    bool probing;                /* out of service, and a probe worker runs */
    uint64_t probe_at;           /* loop time of the next probe (out of service) */
    uint64_t probe_backoff_ms;   /* the last wait before a probe; 0 after a good measurement */
};

struct gw_pool {
    uv_loop_t *loop;
    gw_config cfg;
    char *worker_path;
    char **extra; /* copies of cfg.worker_args */
    int n_extra;
    void (*ready)(void *);
    void *ready_udata;
    bool ready_called;

    int n_workers;
    worker *workers;
    gw_device_info *snap;
    int unsettled;

    uv_process_t probe;
    uv_pipe_t probe_out, probe_err;
    uv_timer_t probe_timer;
    bool probe_spawned, probe_timer_open, probe_done, probe_killed;
    int probe_live;
    char *probe_text;
    size_t probe_len;
    linebuf probe_errbuf;
    ratelim probe_rl;
    uint64_t stall_logged_at;
    char probe_stderr[200];
    char probe_error[256];

    tqueue pending; /* accepted before the probe finished */
    bool closing;
    int open_handles;
    void (*done)(void *);
    void *done_udata;
};

/* ---- names ---- */

const char *gw_device_state_name(gw_device_state s)
{
    switch (s) {
    case GW_DEV_STARTING: return "starting";
    case GW_DEV_READY: return "ready";
    case GW_DEV_BUSY: return "busy";
    case GW_DEV_RESTARTING: return "restarting";
    case GW_DEV_OUT_OF_SERVICE: return "out_of_service";
    }
    return "unknown";
}

const char *gw_status_name(gw_status s)
{
    switch (s) {
    case GW_OK: return "ok";
    case GW_WRONG: return "wrong";
    case GW_FAULT: return "fault";
    case GW_TIMEOUT: return "timeout";
    case GW_LOAD_ERROR: return "load_error";
    case GW_WORKER_DIED: return "worker_died";
    case GW_CANCELLED: return "cancelled";
    case GW_NO_DEVICE: return "no_device";
    }
    return "unknown";
}

/* Copies a string, truncating it to fit (error texts are cut, never overflowed). */
static void set_str(char *dst, size_t n, const char *src)
{
    size_t l = strlen(src);
    if (l >= n)
        l = n - 1;
    memcpy(dst, src, l);
    dst[l] = 0;
}

/* ---- logging ---- */

static void plog(gw_pool *p, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void plog(gw_pool *p, int level, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    if (!p->cfg.log)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    p->cfg.log(p->cfg.log_udata, level, msg);
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Says once how many lines of a device's workers the rate limit dropped, when it dropped any. */
static void report_dropped(gw_pool *p, ratelim *r, int device)
{
    if (!r->dropped)
        return;
    if (device >= 0)
        plog(p, GW_LOG_WARNING,
             "gpu %d: %llu line(s) of the worker's output dropped (more than %d at once or %d a "
             "second)", device, (unsigned long long)r->dropped, GW_LOG_BURST, GW_LOG_RATE);
    else
        plog(p, GW_LOG_WARNING, "gpu probe: %llu line(s) of output dropped (rate limit)",
             (unsigned long long)r->dropped);
    r->dropped = 0;
}

/* Whether one more line may be logged now; when not, counts it (also in *total). */
static bool rl_take(gw_pool *p, ratelim *r, uint64_t *total)
{
    uint64_t now = uv_now(p->loop);
    if (!r->primed) {
        r->primed = true;
        r->tokens = GW_LOG_BURST;
        r->at_ms = now;
    }
    r->tokens += (double)(now - r->at_ms) * GW_LOG_RATE / 1000.0;
    if (r->tokens > GW_LOG_BURST)
        r->tokens = GW_LOG_BURST;
    r->at_ms = now;
    if (r->tokens < 1.0) {
        r->dropped++;
        if (total)
            (*total)++;
        return false;
    }
    r->tokens -= 1.0;
    return true;
}

/* Logs one line of a worker's output (stderr, or a LOG frame when `what` is NULL), cut at
 * GW_LOG_LINE_MAX bytes, through the device's rate limit. */
static void relay_line(gw_pool *p, ratelim *r, uint64_t *total, int device, int level,
                       const char *what, const char *text, size_t cut)
{
    char more[48] = "";
    size_t len = strlen(text);
    if (len >= GW_LOG_LINE_MAX) {
        cut += len - (GW_LOG_LINE_MAX - 1);
        len = GW_LOG_LINE_MAX - 1;
    }
    if (!rl_take(p, r, total))
        return;
    report_dropped(p, r, device);
    if (cut)
        snprintf(more, sizeof(more), " [%zu more bytes cut]", cut);
    if (device >= 0)
        plog(p, level, "gpu %d: %s%.*s%s", device, what ? what : "", (int)len, text, more);
    else
        plog(p, level, "gpu probe: %.*s%s", (int)len, text, more);
}

/* ---- queues and completion ---- */

static void q_push(tqueue *q, gw_ticket *t)
{
    t->prev = q->tail;
    t->next = NULL;
    if (q->tail)
        q->tail->next = t;
    else
        q->head = t;
    q->tail = t;
    q->n++;
}

static void q_remove(tqueue *q, gw_ticket *t)
{
    if (t->prev)
        t->prev->next = t->next;
    else
        q->head = t->next;
    if (t->next)
        t->next->prev = t->prev;
    else
        q->tail = t->prev;
    t->prev = t->next = NULL;
    q->n--;
}

static void unplace(gw_ticket *t)
{
    switch (t->place) {
    case AT_PENDING:
        q_remove(&t->pool->pending, t);
        break;
    case AT_QUEUED:
        q_remove(&t->w->q, t);
        break;
    case AT_RUNNING:
        t->w->running = NULL;
        t->w->busy_ns += uv_hrtime() - t->w->running_since;
        break;
    case AT_NONE:
        break;
    }
    t->place = AT_NONE;
}

/* Completes a ticket: unlinks and frees it, then calls its callback (which may call back into
 * the pool, even close it: callers touch nothing of t afterwards and re-check pool->closing). */
static void finish(gw_ticket *t, const gw_measure_result *res)
{
    gw_measure_result r = *res;
    gw_measure_cb cb = t->cb;
    void *ud = t->udata;

    r.id = t->id;
    if (t->w) {
        r.device = t->w->info.index;
        if (r.status == GW_OK)
            t->w->info.measured++;
        else if (r.status != GW_CANCELLED)
            t->w->info.failed++;
    } else if (r.status != GW_OK) {
        r.device = -1;
    }
    unplace(t);
    free(t->frame);
    free(t);
    cb(ud, &r);
}

static void finish_status(gw_ticket *t, gw_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void finish_status(gw_ticket *t, gw_status st, const char *fmt, ...)
{
    gw_measure_result r;
    va_list ap;
    memset(&r, 0, sizeof(r));
    r.status = st;
    r.device = -1;
    va_start(ap, fmt);
    vsnprintf(r.reason, sizeof(r.reason), fmt, ap);
    va_end(ap);
    finish(t, &r);
}

/* ---- handle bookkeeping ---- */

static void maybe_done(gw_pool *p)
{
    if (!p->closing || p->open_handles > 0)
        return;
    void (*done)(void *) = p->done;
    void *ud = p->done_udata;
    for (int i = 0; i < p->n_workers; i++)
        gw_wire_reader_clear(&p->workers[i].rd);
    for (int i = 0; i < p->n_extra; i++)
        free(p->extra[i]);
    free(p->extra);
    free(p->worker_path);
    free(p->workers);
    free(p->snap);
    free(p->probe_text);
    free(p);
    if (done)
        done(ud);
}

static void on_timer_closed(uv_handle_t *h)
{
    gw_pool *p = ((worker *)h->data)->pool;
    p->open_handles--;
    maybe_done(p);
}

static void worker_down(worker *w);

static void on_worker_handle_closed(uv_handle_t *h)
{
    worker *w = h->data;
    gw_pool *p = w->pool;
    p->open_handles--;
    if (--w->live == 0)
        worker_down(w);
    maybe_done(p);
}

static void close_chan(worker *w)
{
    if (w->chan_open) {
        w->chan_open = false;
        uv_close((uv_handle_t *)&w->chan, on_worker_handle_closed);
    }
}

static void close_err(worker *w)
{
    if (w->err_open) {
        w->err_open = false;
        uv_close((uv_handle_t *)&w->err, on_worker_handle_closed);
    }
}

static void kill_worker(worker *w, kill_reason why)
{
    if (w->kill == KILL_NONE)
        w->kill = why;
    if (w->spawned)
        uv_process_kill(&w->proc, SIGKILL);
    /* The socket's contents no longer matter after garbage; stop reading it now. */
    if (why == KILL_PROTOCOL)
        close_chan(w);
}

/* ---- sending ---- */

typedef struct wreq {
    uv_write_t req;
    uint8_t *buf;
} wreq;

static void on_written(uv_write_t *req, int status)
{
    wreq *r = (wreq *)req;
    (void)status; /* a failed write shows up as the worker's end of stream or exit */
    free(r->buf);
    free(r);
}

/* Queues buf (taken over) on the worker's socket. 0 or a libuv error. */
static int send_buf(worker *w, uint8_t *buf, size_t len)
{
    wreq *r = malloc(sizeof(*r));
    if (!r || !w->chan_open) {
        free(r);
        free(buf);
        return UV_EPIPE;
    }
    r->buf = buf;
    uv_buf_t b = uv_buf_init((char *)buf, (unsigned)len);
    int e = uv_write(&r->req, (uv_stream_t *)&w->chan, &b, 1, on_written);
    if (e < 0) {
        free(buf);
        free(r);
    }
    return e;
}

static void send_simple(worker *w, uint32_t type, uint64_t id)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    if (gw_wire_encode_simple(type, id, NULL, &buf, &len) == 0)
        send_buf(w, buf, len);
}

/* ---- dispatch ---- */

static bool worker_idle(const worker *w)
{
    return w->spawned && w->hello && !w->running && !w->draining && !w->expect_exit &&
           w->kill == KILL_NONE && w->chan_open && !w->oos;
}

static void dispatch(worker *w)
{
    gw_pool *p = w->pool;
    if (p->closing || !worker_idle(w) || !w->q.head)
        return;
    gw_ticket *t = w->q.head;
    q_remove(&w->q, t);
    t->place = AT_RUNNING;
    w->running = t;
    w->running_since = uv_hrtime();
    uint8_t *frame = t->frame;
    t->frame = NULL;
    uint64_t now = uv_now(p->loop);
    w->req_deadline = now + (uint64_t)(p->cfg.launch_timeout_s * 1000.0 * t->n_runs) +
                      t->ref_ms + (uint64_t)(p->cfg.request_slack_s * 1000.0);
    if (send_buf(w, frame, t->frame_len) < 0)
        kill_worker(w, KILL_PROTOCOL);
}

/* The device a request goes to: the pinned one, or the least loaded usable one with the sm. */
static worker *pick(gw_pool *p, int pin, int sm)
{
    worker *best = NULL;
    int best_load = 0;
    for (int i = 0; i < p->n_workers; i++) {
        worker *w = &p->workers[i];
        if (w->oos || (sm && w->info.sm != sm) || (pin >= 0 && w->info.index != pin))
            continue;
        int load = 2 * (w->q.n + (w->running || w->draining ? 1 : 0)) + (worker_idle(w) ? 0 : 1);
        if (!best || load < best_load) {
            best = w;
            best_load = load;
        }
    }
    return best;
}

static void enqueue(worker *w, gw_ticket *t)
{
    t->w = w;
    t->place = AT_QUEUED;
    q_push(&w->q, t);
    dispatch(w);
}

/* ---- worker messages ---- */

static void settle(worker *w)
{
    gw_pool *p = w->pool;
    if (w->settled)
        return;
    w->settled = true;
    if (--p->unsettled == 0 && !p->ready_called && !p->closing) {
        p->ready_called = true;
        if (p->ready)
            p->ready(p->ready_udata);
    }
}

static void back_in_service(worker *w);

static void handle_result(worker *w, const gw_wire_msg *m)
{
    gw_pool *p = w->pool;
    gw_measure_result res;
    bool fatal = false;

    if (gw_wire_decode_result(m, &res, &fatal) < 0) {
        kill_worker(w, KILL_PROTOCOL);
        return;
    }
    if (fatal) {
        w->expect_exit = true;
        w->exit_deadline = uv_now(p->loop) + EXIT_GRACE_MS;
    }
    if (w->draining && res.id == w->drain_id) {
        w->draining = false; /* the abandoned request; its caller already heard GW_CANCELLED */
        dispatch(w);
        return;
    }
    gw_ticket *t = w->running;
    if (!t || res.id != t->id) {
        kill_worker(w, KILL_PROTOCOL);
        return;
    }
    /* A measurement the worker could report proves the device works. */
    if (res.status == GW_OK || res.status == GW_WRONG || res.status == GW_LOAD_ERROR) {
        w->fails = 0;
        w->probe_backoff_ms = 0;
    }
    if (res.status == GW_FAULT || res.status == GW_TIMEOUT)
        set_str(w->info.last_error, sizeof(w->info.last_error), res.reason);
    finish(t, &res);
    if (!p->closing)
        dispatch(w);
}

static void handle_msg(worker *w, const gw_wire_msg *m)
{
    gw_pool *p = w->pool;
    char text[GW_WIRE_MAX_LOG];
    uint64_t id;

    w->last_heard = uv_now(p->loop);
    switch (m->type) {
    case GW_MSG_HELLO: {
        gw_device_info d;
        bool has = false;
        if (w->hello || gw_wire_decode_hello(m, &d, &has, text, sizeof(text)) < 0) {
            kill_worker(w, KILL_PROTOCOL);
            return;
        }
        if (!has) {
            set_str(w->start_error, sizeof(w->start_error), text);
            plog(p, GW_LOG_ERR, "gpu %d: worker cannot use the device: %s", w->info.index, text);
            kill_worker(w, KILL_HELLO);
            return;
        }
        if (d.index != w->info.index) {
            kill_worker(w, KILL_PROTOCOL);
            return;
        }
        w->hello = true;
        plog(p, GW_LOG_INFO, "gpu %d: worker %d ready (%s, sm_%d)", w->info.index, w->proc.pid,
             d.name, d.sm);
        if (w->oos)
            back_in_service(w);
        settle(w);
        if (!p->closing)
            dispatch(w);
        return;
    }
    case GW_MSG_HEARTBEAT:
        if (!w->hello || gw_wire_decode_id(m, &id) < 0)
            kill_worker(w, KILL_PROTOCOL);
        return;
    case GW_MSG_RESULT:
        if (!w->hello)
            kill_worker(w, KILL_PROTOCOL);
        else
            handle_result(w, m);
        return;
    case GW_MSG_LOG:
        if (gw_wire_decode_log(m, text, sizeof(text)) < 0)
            kill_worker(w, KILL_PROTOCOL);
        else
            relay_line(p, &w->logrl, &w->info.log_dropped, w->info.index, GW_LOG_INFO, NULL,
                       text, 0);
        return;
    default:
        kill_worker(w, KILL_PROTOCOL); /* daemon-to-worker types never come back */
        return;
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    buf->base = malloc(suggested);
    buf->len = buf->base ? suggested : 0;
}

/* End of the socket: the worker exited or is exiting (its exit is usually noticed just after).
 * One that stays alive without its socket broke the protocol; the timer kills it after a grace
 * period. */
static void chan_eof(worker *w)
{
    close_chan(w);
    w->eof_at = uv_now(w->pool->loop);
}

/* Bytes the worker wrote on its socket: the frames they complete are handled in order. */
static void chan_bytes(worker *w, const char *data, size_t n)
{
    gw_pool *p = w->pool;

    if (n > 0 && gw_wire_reader_feed(&w->rd, data, n) < 0) {
        kill_worker(w, KILL_PROTOCOL);
        return;
    }
    while (w->chan_open && !p->closing) {
        gw_wire_msg m = {0};
        int r = gw_wire_reader_next(&w->rd, &m);
        if (r == -EAGAIN)
            break;
        if (r < 0) {
            snprintf(w->info.last_error, sizeof(w->info.last_error),
                     "malformed frame from the worker (%s)", strerror(-r));
            kill_worker(w, KILL_PROTOCOL);
            break;
        }
        handle_msg(w, &m);
        gw_wire_msg_clear(&m);
    }
}

static void on_chan_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    worker *w = s->data;

    if (nread < 0)
        chan_eof(w);
    else
        chan_bytes(w, buf->base, (size_t)nread);
    free(buf->base);
}

/* Reads and handles what the worker wrote that the loop has not read yet: the timer runs before
 * the poll in a loop turn, so after a stall the heartbeats (or the result) the worker sent are
 * still in its socket. The socket is non-blocking (MSG_DONTWAIT besides); reading it here, on the
 * loop thread between two of libuv's reads, hands the same bytes in the same order to the same
 * frame reader. Returns true when anything was read. */
static bool drain_chan(worker *w)
{
    gw_pool *p = w->pool;
    uv_os_fd_t fd;
    char buf[16384];
    size_t total = 0;

    if (!w->chan_open || uv_fileno((const uv_handle_t *)&w->chan, &fd) < 0)
        return false;
    while (total < DRAIN_MAX && w->chan_open && !p->closing) {
        ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break; /* EAGAIN: nothing more; an error shows up in the loop's own read */
        if (n == 0) {
            chan_eof(w);
            break;
        }
        total += (size_t)n;
        chan_bytes(w, buf, (size_t)n);
    }
    return total > 0;
}

/* Splits a stderr stream into lines for the log (each cut at GW_LOG_LINE_MAX bytes, through the
 * rate limit r); the last line is kept for error messages, logged or not. */
static void feed_lines(gw_pool *p, linebuf *lb, const char *data, size_t n, int device,
                       ratelim *r, uint64_t *dropped, char *last, size_t lastlen)
{
    for (size_t i = 0; i < n; i++) {
        char c = data[i];
        if (c != '\n') {
            if (lb->len < sizeof(lb->buf) - 1)
                lb->buf[lb->len++] = c;
            else
                lb->cut++;
            continue;
        }
        lb->buf[lb->len] = 0;
        if (lb->len) {
            /* The probe's output (device < 0) is summed up by the probe's result, which the
             * daemon turns into one line ("no GPU driver found..."): its words are for debug. */
            relay_line(p, r, dropped, device, device < 0 ? GW_LOG_DEBUG : GW_LOG_WARNING,
                       "worker: ", lb->buf, lb->cut);
            if (last)
                set_str(last, lastlen, lb->buf);
        }
        lb->len = 0;
        lb->cut = 0;
    }
}

static void on_err_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    worker *w = s->data;
    if (nread < 0) {
        free(buf->base);
        feed_lines(w->pool, &w->errbuf, "\n", 1, w->info.index, &w->logrl, &w->info.log_dropped,
                   w->last_stderr, sizeof(w->last_stderr));
        close_err(w);
        return;
    }
    feed_lines(w->pool, &w->errbuf, buf->base, (size_t)nread, w->info.index, &w->logrl,
               &w->info.log_dropped, w->last_stderr, sizeof(w->last_stderr));
    free(buf->base);
}

static void on_worker_exit(uv_process_t *proc, int64_t status, int term_signal)
{
    worker *w = proc->data;
    w->spawned = false;
    w->exit_status = status;
    w->term_signal = term_signal;
    w->exited_at = uv_now(w->pool->loop);
    uv_close((uv_handle_t *)proc, on_worker_handle_closed);
    /* The socket and stderr are read to their end (a RESULT may still be in flight); the
     * timer closes them if that end does not come. A closing pool wants neither. */
    if (w->pool->closing) {
        close_chan(w);
        close_err(w);
    }
}

static void describe_death(const worker *w, char *buf, size_t len)
{
    const char *why = "";
    switch (w->kill) {
    case KILL_HUNG: why = "stopped sending heartbeats; killed"; break;
    case KILL_DEADLINE: why = "did not finish the request before its deadline; killed"; break;
    case KILL_PROTOCOL: why = "broke the protocol; killed"; break;
    case KILL_DRAIN: why = "did not stop a cancelled request; killed"; break;
    case KILL_FATAL: why = "did not exit after a fatal error; killed"; break;
    case KILL_HELLO: why = "could not start"; break;
    case KILL_CLOSE: why = "pool closing"; break;
    case KILL_NONE:
        why = w->term_signal ? "crashed" : "exited";
        break;
    }
    char st[48];
    if (w->term_signal)
        snprintf(st, sizeof(st), "signal %d (%s)", w->term_signal, strsignal(w->term_signal));
    else
        snprintf(st, sizeof(st), "status %lld", (long long)w->exit_status);
    snprintf(buf, len, "worker %s, %s", why, st);
    const char *words = w->start_error[0] ? w->start_error : w->last_stderr;
    if (words[0]) {
        size_t l = strlen(buf);
        if (l + 2 < len) {
            memcpy(buf + l, ": ", 3);
            set_str(buf + l + 2, len - l - 2, words);
        }
    }
}

/* Plans the next probe of an out-of-service device: probe_min_s after it went out of service
 * (or after a measurement had succeeded since the last time), else twice the last wait, at most
 * probe_max_s. */
static void plan_probe(worker *w)
{
    gw_pool *p = w->pool;
    uint64_t min = (uint64_t)(p->cfg.probe_min_s * 1000.0);
    uint64_t max = (uint64_t)(p->cfg.probe_max_s * 1000.0);
    if (!w->probe_backoff_ms)
        w->probe_backoff_ms = min;
    else
        w->probe_backoff_ms = w->probe_backoff_ms > max / 2 ? max : 2 * w->probe_backoff_ms;
    if (w->probe_backoff_ms < 1)
        w->probe_backoff_ms = 1;
    w->probe_at = uv_now(p->loop) + w->probe_backoff_ms;
    w->info.next_probe = wall_now() + (double)w->probe_backoff_ms / 1000.0;
}

static void go_out_of_service(worker *w)
{
    gw_pool *p = w->pool;
    w->oos = true;
    w->probing = false;
    w->info.oos_count++;
    w->info.oos_since = wall_now();
    set_str(w->info.oos_reason, sizeof(w->info.oos_reason), w->info.last_error);
    plan_probe(w);
    plog(p, GW_LOG_ERR,
         "gpu %d: out of service after %d consecutive failures (%s); next probe in %.1f s",
         w->info.index, w->fails, w->info.last_error, (double)w->probe_backoff_ms / 1000.0);
    settle(w);
    /* Queued requests move to another device that can run them, or fail. */
    while (w->q.head && !p->closing) {
        gw_ticket *t = w->q.head;
        q_remove(&w->q, t);
        t->place = AT_NONE;
        t->w = NULL;
        worker *other = t->pin >= 0 ? NULL : pick(p, -1, t->sm);
        if (other)
            enqueue(other, t);
        else
            finish_status(t, GW_NO_DEVICE, "gpu %d is out of service: %s", w->info.index,
                          w->info.last_error);
    }
}

/* All of a worker's process handles are closed: settle its in-flight request, count the failure
 * and plan the restart. */
static void worker_down(worker *w)
{
    gw_pool *p = w->pool;
    char why[256];

    gw_wire_reader_clear(&w->rd);
    if (p->closing)
        return;
    describe_death(w, why, sizeof(why));
    bool orderly = w->expect_exit || w->kill == KILL_DRAIN;
    if (!orderly || !w->info.last_error[0])
        set_str(w->info.last_error, sizeof(w->info.last_error), why);
    plog(p, orderly ? GW_LOG_INFO : GW_LOG_WARNING, "gpu %d: %s", w->info.index, why);

    report_dropped(p, &w->logrl, w->info.index);
    if (w->kill == KILL_HUNG)
        w->info.hung_kills++;

    if (w->running) {
        gw_status st = w->kill == KILL_HUNG || w->kill == KILL_DEADLINE ? GW_TIMEOUT
                                                                         : GW_WORKER_DIED;
        finish_status(w->running, st, "%s", why);
        if (p->closing)
            return;
    }
    w->draining = false;
    bool was_hello = w->hello;
    w->hello = false;
    w->expect_exit = false;
    w->kill = KILL_NONE;
    if (w->oos) {
        /* A probe that failed: the device stays out of service, probed again later. */
        w->probing = false;
        set_str(w->info.oos_reason, sizeof(w->info.oos_reason), why);
        plan_probe(w);
        plog(p, GW_LOG_WARNING,
             "gpu %d: probe %llu failed (%s); still out of service, next probe in %.1f s",
             w->info.index, (unsigned long long)w->info.probes, why,
             (double)w->probe_backoff_ms / 1000.0);
        return;
    }
    w->info.restarts++;
    uint64_t delay = 0;
    if (!orderly) {
        w->fails++;
        delay = 100;
        for (int i = 1; i < w->fails && delay < 5000; i++)
            delay *= 2;
        if (delay > 5000)
            delay = 5000;
    }
    if (!was_hello)
        settle(w); /* a failed first start counts as having given up, for `ready` */
    if (w->fails >= p->cfg.max_restarts) {
        go_out_of_service(w);
        return;
    }
    w->restart_planned = true;
    w->restart_at = uv_now(p->loop) + delay;
    plog(p, GW_LOG_INFO,
         "gpu %d: restarting its worker in %llu ms (failure %d of %d before out of service)",
         w->info.index, (unsigned long long)delay, w->fails, p->cfg.max_restarts);
}

/* The probe worker of an out-of-service device said hello: back in service, on probation (the
 * next failure before a measurement succeeds takes it out again, with a longer wait). */
static void back_in_service(worker *w)
{
    gw_pool *p = w->pool;
    double out = wall_now() - w->info.oos_since;
    w->oos = false;
    w->probing = false;
    w->fails = p->cfg.max_restarts > 0 ? p->cfg.max_restarts - 1 : 0;
    w->info.oos_since = 0;
    w->info.next_probe = 0;
    w->info.oos_reason[0] = 0;
    /* A warning, like going out: an operator filtering on warnings sees both ends. */
    plog(p, GW_LOG_WARNING,
         "gpu %d: back in service: worker %d answered probe %llu after %.1f s out of service",
         w->info.index, w->proc.pid, (unsigned long long)w->info.probes, out);
}

static void start_worker(worker *w)
{
    gw_pool *p = w->pool;
    char dev[16], fd[16], hb[32], lt[32];
    char *args[8 + 64];
    int n = 0, e;

    w->restart_planned = false;
    w->hello = false;
    w->kill = KILL_NONE;
    w->expect_exit = false;
    w->draining = false;
    w->last_stderr[0] = 0;
    w->start_error[0] = 0;
    w->errbuf.len = 0;
    w->term_signal = 0;
    w->exit_status = 0;
    gw_wire_reader_clear(&w->rd);
    snprintf(dev, sizeof(dev), "%d", w->info.index);
    snprintf(fd, sizeof(fd), "%d", 3);
    snprintf(hb, sizeof(hb), "%g", p->cfg.heartbeat_s);
    snprintf(lt, sizeof(lt), "%g", p->cfg.launch_timeout_s);
    args[n++] = p->worker_path;
    for (int i = 0; i < p->n_extra; i++)
        args[n++] = p->extra[i];
    args[n++] = "--device";
    args[n++] = dev;
    args[n++] = "--fd";
    args[n++] = fd;
    args[n++] = "--heartbeat";
    args[n++] = hb;
    args[n++] = "--launch-timeout";
    args[n++] = lt;
    args[n] = NULL;

    uv_pipe_init(p->loop, &w->chan, 0);
    uv_pipe_init(p->loop, &w->err, 0);
    w->chan.data = w->err.data = w->proc.data = w;
    w->chan_open = w->err_open = true;
    w->live = 3;
    p->open_handles += 3;

    uv_stdio_container_t stdio[4];
    stdio[0].flags = UV_IGNORE;
    stdio[1].flags = UV_IGNORE;
    stdio[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[2].data.stream = (uv_stream_t *)&w->err;
    stdio[3].flags = UV_CREATE_PIPE | UV_READABLE_PIPE | UV_WRITABLE_PIPE;
    stdio[3].data.stream = (uv_stream_t *)&w->chan;
    uv_process_options_t o;
    memset(&o, 0, sizeof(o));
    o.file = p->worker_path;
    o.args = args;
    o.env = NULL; /* inherit: the stand-in and CUDA read their settings from it */
    o.stdio_count = 4;
    o.stdio = stdio;
    o.exit_cb = on_worker_exit;

    uint64_t now = uv_now(p->loop);
    w->ever_started = true;
    e = uv_spawn(p->loop, &w->proc, &o);
    if (e < 0) {
        snprintf(w->info.last_error, sizeof(w->info.last_error), "cannot start %s: %s",
                 p->worker_path, uv_strerror(e));
        set_str(w->start_error, sizeof(w->start_error), uv_strerror(e));
        w->kill = KILL_HELLO;
        w->spawned = false;
        uv_close((uv_handle_t *)&w->proc, on_worker_handle_closed);
        close_chan(w);
        close_err(w);
        return;
    }
    w->spawned = true;
    w->hello_deadline = now + HELLO_TIMEOUT_MS;
    w->last_heard = now;
    uv_read_start((uv_stream_t *)&w->chan, on_alloc, on_chan_read);
    uv_read_start((uv_stream_t *)&w->err, on_alloc, on_err_read);
}

/* What the worker deserves now: KILL_NONE, or why it must be killed. */
static kill_reason judge(const worker *w, uint64_t now)
{
    uint64_t hb_ms = (uint64_t)(w->pool->cfg.heartbeat_s * 1000.0);
    if (w->kill != KILL_NONE)
        return w->kill; /* it ignores nothing, but be sure */
    if (!w->chan_open && now > w->eof_at + EXIT_GRACE_MS)
        return KILL_PROTOCOL;
    if (!w->hello && now > w->hello_deadline)
        return KILL_HELLO;
    if (w->expect_exit && now > w->exit_deadline)
        return KILL_FATAL;
    if (w->hello && now > w->last_heard + 3 * hb_ms)
        return KILL_HUNG;
    if (w->running && now > w->req_deadline)
        return KILL_DEADLINE;
    if (w->draining && now > w->drain_deadline)
        return KILL_DRAIN;
    return KILL_NONE;
}

/* The loop stalled for `late` ms (the tick came that much after its time): nothing the worker
 * did or failed to do in that time can be told from the loop's side, so its clock restarts: it is
 * heard now, and every deadline moves by the stall. */
static void restart_clock(worker *w, uint64_t now, uint64_t late)
{
    gw_pool *p = w->pool;
    w->info.loop_stalls++;
    w->last_heard = now;
    w->hello_deadline += late;
    w->req_deadline += late;
    w->drain_deadline += late;
    w->exit_deadline += late;
    w->eof_at += late;
    w->exited_at += late;
    if (!p->stall_logged_at || now >= p->stall_logged_at + 1000) {
        p->stall_logged_at = now;
        plog(p, GW_LOG_WARNING,
             "gpu workers: the event loop stalled for %.1f s; worker health checks restarted "
             "their clock (no worker is judged by the loop's lateness)", (double)late / 1000.0);
    }
}

static void on_tick(uv_timer_t *t)
{
    worker *w = t->data;
    gw_pool *p = w->pool;
    uint64_t now = uv_now(p->loop);

    if (p->closing)
        return;
    /* A tick more than a heartbeat period late: the loop stalled (uv_now is the loop's time,
     * taken just before the timers run). */
    uint64_t gap = now - w->last_tick, hb_ms = (uint64_t)(p->cfg.heartbeat_s * 1000.0);
    w->last_tick = now;
    if (gap > w->tick_ms + hb_ms)
        restart_clock(w, now, gap - w->tick_ms);
    if (w->logrl.dropped && now >= w->logrl.at_ms + 1000)
        report_dropped(p, &w->logrl, w->info.index); /* the flood is over: say what it cost */
    if (w->oos && !w->probing) {
        if (w->live == 0 && now >= w->probe_at) {
            w->probing = true;
            w->info.probes++;
            w->info.next_probe = 0;
            plog(p, GW_LOG_INFO, "gpu %d: out of service for %.1f s: probe %llu starts a worker",
                 w->info.index, wall_now() - w->info.oos_since, (unsigned long long)w->info.probes);
            start_worker(w);
        }
        return;
    }
    if (w->restart_planned && w->live == 0) {
        if (now >= w->restart_at)
            start_worker(w);
        return;
    }
    if (!w->spawned) {
        /* Exited: give its socket and stderr a moment to drain, then stop waiting for them. */
        if (w->live > 1 && now > w->exited_at + EXIT_GRACE_MS) {
            close_chan(w);
            close_err(w);
        }
        return;
    }
    kill_reason why = judge(w, now);
    if (why == KILL_NONE)
        return;
    /* Judge what the worker did, not what the loop has read: what it wrote first. Handling it
     * may complete requests whose callbacks close the pool. */
    if (why != w->kill && drain_chan(w)) {
        if (p->closing || !w->spawned)
            return;
        why = judge(w, uv_now(p->loop));
    }
    if (why != KILL_NONE)
        kill_worker(w, why);
}

/* ---- probe ---- */

static void probe_finished(gw_pool *p);

static void on_probe_handle_closed(uv_handle_t *h)
{
    gw_pool *p = h->data;
    p->open_handles--;
    if (--p->probe_live == 0 && !p->closing)
        probe_finished(p);
    maybe_done(p);
}

static void on_probe_exit(uv_process_t *proc, int64_t status, int term_signal)
{
    gw_pool *p = proc->data;
    p->probe_spawned = false;
    if (status != 0 || term_signal)
        snprintf(p->probe_error, sizeof(p->probe_error), "probe %s %s %d",
                 p->probe_killed ? "timed out and was killed," : "failed:",
                 term_signal ? "signal" : "exit status", term_signal ? term_signal : (int)status);
    /* Its last stderr line (the loader's or the driver's complaint) is appended once stderr
     * has been read to its end, in probe_finished(). */
    uv_close((uv_handle_t *)proc, on_probe_handle_closed);
}

static void on_probe_out(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    gw_pool *p = s->data;
    if (nread < 0) {
        free(buf->base);
        uv_close((uv_handle_t *)s, on_probe_handle_closed);
        return;
    }
    if (p->probe_len + (size_t)nread > PROBE_MAX_OUTPUT) {
        free(buf->base);
        if (p->probe_spawned) {
            p->probe_killed = true;
            uv_process_kill(&p->probe, SIGKILL);
        }
        snprintf(p->probe_error, sizeof(p->probe_error), "probe output too large");
        return;
    }
    char *nb = realloc(p->probe_text, p->probe_len + (size_t)nread + 1);
    if (nb) {
        p->probe_text = nb;
        memcpy(nb + p->probe_len, buf->base, (size_t)nread);
        p->probe_len += (size_t)nread;
        nb[p->probe_len] = 0;
    }
    free(buf->base);
}

static void on_probe_err(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    gw_pool *p = s->data;
    if (nread < 0) {
        free(buf->base);
        feed_lines(p, &p->probe_errbuf, "\n", 1, -1, &p->probe_rl, NULL, p->probe_stderr,
                   sizeof(p->probe_stderr));
        uv_close((uv_handle_t *)s, on_probe_handle_closed);
        return;
    }
    feed_lines(p, &p->probe_errbuf, buf->base, (size_t)nread, -1, &p->probe_rl, NULL,
               p->probe_stderr, sizeof(p->probe_stderr));
    free(buf->base);
}

static void on_probe_timer(uv_timer_t *t)
{
    gw_pool *p = t->data;
    if (p->probe_spawned) {
        p->probe_killed = true;
        uv_process_kill(&p->probe, SIGKILL);
    }
}

static void on_probe_timer_closed(uv_handle_t *h)
{
    gw_pool *p = h->data;
    p->open_handles--;
    maybe_done(p);
}

static void probe_finished(gw_pool *p)
{
    gw_device_info devs[GW_MAX_DEVICES];
    int n = 0;
    char err[256] = "";

    if (p->probe_done)
        return;
    p->probe_done = true;
    if (p->probe_timer_open) {
        p->probe_timer_open = false;
        uv_close((uv_handle_t *)&p->probe_timer, on_probe_timer_closed);
    }
    if (!p->probe_error[0]) {
        if (!p->probe_text ||
            gw_wire_parse_probe(p->probe_text, p->probe_len, devs, GW_MAX_DEVICES, &n, err,
                                sizeof(err)) < 0) {
            n = 0;
            snprintf(p->probe_error, sizeof(p->probe_error), "probe printed no device list");
        } else if (n == 0) {
            snprintf(p->probe_error, sizeof(p->probe_error), "%s",
                     err[0] ? err : "no devices");
        }
    }
    if (p->probe_error[0] && p->probe_stderr[0]) {
        size_t l = strlen(p->probe_error);
        if (l + 2 < sizeof(p->probe_error)) {
            memcpy(p->probe_error + l, ": ", 3);
            set_str(p->probe_error + l + 2, sizeof(p->probe_error) - l - 2, p->probe_stderr);
        }
    }
    free(p->probe_text);
    p->probe_text = NULL;
    if (p->cfg.max_devices > 0 && n > p->cfg.max_devices)
        n = p->cfg.max_devices;
    if (n > 0) {
        p->workers = calloc((size_t)n, sizeof(worker));
        p->snap = calloc((size_t)n, sizeof(gw_device_info));
        if (!p->workers || !p->snap) {
            free(p->workers);
            free(p->snap);
            p->workers = NULL;
            p->snap = NULL;
            n = 0;
            snprintf(p->probe_error, sizeof(p->probe_error), "out of memory");
        }
    }
    p->n_workers = n;
    plog(p, n ? GW_LOG_INFO : GW_LOG_DEBUG, "gpu workers: %d device(s)%s%s", n,
         n ? "" : ": ", n ? "" : p->probe_error);
    p->unsettled = n;
    for (int i = 0; i < n; i++) {
        worker *w = &p->workers[i];
        w->pool = p;
        w->info = devs[i];
        w->info.state = GW_DEV_STARTING;
        uv_timer_init(p->loop, &w->timer);
        w->timer.data = w;
        p->open_handles++;
        uint64_t tick = (uint64_t)(p->cfg.heartbeat_s * 1000.0 / 4);
        tick = tick < 5 ? 5 : tick > 250 ? 250 : tick;
        w->tick_ms = tick;
        w->last_tick = uv_now(p->loop);
        uv_timer_start(&w->timer, on_tick, tick, tick);
    }
    for (int i = 0; i < n; i++)
        start_worker(&p->workers[i]);
    /* Requests that arrived during the probe. */
    while (p->pending.head && !p->closing) {
        gw_ticket *t = p->pending.head;
        q_remove(&p->pending, t);
        t->place = AT_NONE;
        worker *w = pick(p, t->pin, t->sm);
        if (w)
            enqueue(w, t);
        else
            finish_status(t, GW_NO_DEVICE, "no usable GPU%s%s", p->probe_error[0] ? ": " : "",
                          p->probe_error);
    }
    if (n == 0 && !p->ready_called && !p->closing) {
        p->ready_called = true;
        if (p->ready)
            p->ready(p->ready_udata);
    }
}

static int start_probe(gw_pool *p)
{
    char *args[4 + 64];
    int n = 0;

    args[n++] = p->worker_path;
    for (int i = 0; i < p->n_extra; i++)
        args[n++] = p->extra[i];
    args[n++] = "--probe";
    args[n] = NULL;

    uv_timer_init(p->loop, &p->probe_timer);
    p->probe_timer.data = p;
    p->probe_timer_open = true;
    p->open_handles++;
    uv_pipe_init(p->loop, &p->probe_out, 0);
    uv_pipe_init(p->loop, &p->probe_err, 0);
    p->probe_out.data = p->probe_err.data = p->probe.data = p;
    p->probe_live = 3;
    p->open_handles += 3;

    uv_stdio_container_t stdio[3];
    stdio[0].flags = UV_IGNORE;
    stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[1].data.stream = (uv_stream_t *)&p->probe_out;
    stdio[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[2].data.stream = (uv_stream_t *)&p->probe_err;
    uv_process_options_t o;
    memset(&o, 0, sizeof(o));
    o.file = p->worker_path;
    o.args = args;
    o.stdio_count = 3;
    o.stdio = stdio;
    o.exit_cb = on_probe_exit;
    int e = uv_spawn(p->loop, &p->probe, &o);
    if (e < 0) {
        snprintf(p->probe_error, sizeof(p->probe_error), "cannot start %s: %s", p->worker_path,
                 uv_strerror(e));
        /* The handles close on the next loop turns; the last close finishes the probe (zero
         * devices), so `ready` never runs before gw_pool_start() returns. */
        uv_close((uv_handle_t *)&p->probe, on_probe_handle_closed);
        uv_close((uv_handle_t *)&p->probe_out, on_probe_handle_closed);
        uv_close((uv_handle_t *)&p->probe_err, on_probe_handle_closed);
        return 0;
    }
    p->probe_spawned = true;
    uv_read_start((uv_stream_t *)&p->probe_out, on_alloc, on_probe_out);
    uv_read_start((uv_stream_t *)&p->probe_err, on_alloc, on_probe_err);
    uv_timer_start(&p->probe_timer, on_probe_timer, PROBE_TIMEOUT_MS, 0);
    return 0;
}

/* ---- public ---- */

int gw_pool_start(uv_loop_t *loop, const gw_config *cfg, void (*ready)(void *udata), void *udata,
                  gw_pool **ret)
{
    gw_pool *p = NULL;

    if (!loop || !cfg || !ret || !cfg->worker_path || !cfg->worker_path[0] ||
        cfg->max_devices < 0 || cfg->launch_timeout_s < 0 || cfg->heartbeat_s < 0 ||
        cfg->max_restarts < 0 || cfg->request_slack_s < 0 || cfg->probe_min_s < 0 ||
        cfg->probe_max_s < 0)
        return -EINVAL;
    int n_extra = 0;
    while (cfg->worker_args && cfg->worker_args[n_extra])
        n_extra++;
    if (n_extra > 60)
        return -EINVAL;
    p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->loop = loop;
    p->cfg = *cfg;
    if (p->cfg.launch_timeout_s == 0)
        p->cfg.launch_timeout_s = 2.0;
    if (p->cfg.heartbeat_s == 0)
        p->cfg.heartbeat_s = 1.0;
    if (p->cfg.max_restarts == 0)
        p->cfg.max_restarts = 5;
    if (p->cfg.request_slack_s == 0)
        p->cfg.request_slack_s = 10.0;
    if (p->cfg.probe_min_s == 0)
        p->cfg.probe_min_s = 5.0;
    if (p->cfg.probe_max_s == 0)
        p->cfg.probe_max_s = 300.0;
    if (p->cfg.probe_max_s < p->cfg.probe_min_s)
        p->cfg.probe_max_s = p->cfg.probe_min_s;
    p->ready = ready;
    p->ready_udata = udata;
    p->worker_path = strdup(cfg->worker_path);
    p->extra = calloc((size_t)n_extra + 1, sizeof(char *));
    if (!p->worker_path || !p->extra)
        goto oom;
    for (int i = 0; i < n_extra; i++) {
        p->extra[i] = strdup(cfg->worker_args[i]);
        if (!p->extra[i])
            goto oom;
        p->n_extra = i + 1;
    }
    p->cfg.worker_path = NULL;
    p->cfg.worker_args = NULL;
    start_probe(p);
    *ret = p;
    return 0;
oom:
    for (int i = 0; i < p->n_extra; i++)
        free(p->extra[i]);
    free(p->extra);
    free(p->worker_path);
    free(p);
    return -ENOMEM;
}

static gw_device_state state_of(const worker *w)
{
    if (w->oos)
        return GW_DEV_OUT_OF_SERVICE;
    if (w->spawned && w->hello && w->kill == KILL_NONE && !w->expect_exit)
        return w->running || w->draining ? GW_DEV_BUSY : GW_DEV_READY;
    return w->info.restarts > 0 ? GW_DEV_RESTARTING : GW_DEV_STARTING;
}

size_t gw_pool_devices(gw_pool *pool, const gw_device_info **ret)
{
    if (!pool || !ret)
        return 0;
    uint64_t now = uv_hrtime();
    for (int i = 0; i < pool->n_workers; i++) {
        const worker *w = &pool->workers[i];
        gw_device_info *d = &pool->snap[i];
        *d = w->info;
        d->state = state_of(w);
        d->pid = w->spawned && !w->expect_exit ? w->proc.pid : 0;
        d->busy_s = (double)(w->busy_ns + (w->running ? now - w->running_since : 0)) / 1e9;
    }
    *ret = pool->snap;
    return (size_t)pool->n_workers;
}

int gw_pool_usable(gw_pool *pool)
{
    int n = 0;
    if (!pool || pool->closing)
        return 0;
    for (int i = 0; i < pool->n_workers; i++)
        n += !pool->workers[i].oos;
    return n;
}

int gw_pool_usable_for_sm(gw_pool *pool, int sm, int *ret_idx)
{
    if (!pool)
        return 0;
    int k = 0;
    for (int i = 0; i < pool->n_workers && k < GW_MAX_DEVICES; i++) {
        if (pool->workers[i].info.sm != sm || state_of(&pool->workers[i]) == GW_DEV_OUT_OF_SERVICE)
            continue;
        if (ret_idx)
            ret_idx[k] = i;
        k++;
    }
    return k;
}

const char *gw_pool_probe_error(gw_pool *pool)
{
    return pool ? pool->probe_error : "";
}

int gw_measure(gw_pool *pool, int device, int sm, const gw_measure_req *req, gw_measure_cb cb,
               void *udata, gw_ticket **ret_ticket)
{
    gw_ticket *t = NULL;
    worker *w = NULL;
    int r;

    if (!pool || !req || !cb || device < -1 || device >= GW_MAX_DEVICES || sm < 0)
        return -EINVAL;
    if (gw_wire_check_req(req) < 0)
        return -EINVAL;
    if (pool->closing)
        return -ENODEV;
    if (pool->probe_done) {
        w = pick(pool, device, sm);
        if (!w)
            return -ENODEV;
    }
    t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    r = gw_wire_encode_measure(req, &t->frame, &t->frame_len);
    if (r < 0) {
        free(t);
        return r == -EMSGSIZE ? -E2BIG : r;
    }
    t->pool = pool;
    t->pin = device;
    t->sm = sm;
    t->id = req->id;
    t->n_runs = req->warmup + req->max_reps + (req->check ? 2 : 0) + 1;
    t->n_runs *= req->candidate.n_launches > 0 ? req->candidate.n_launches : 1;
    if (req->check) {
        /* The worker allows the trusted reference max(10 x launch timeout, 20 s) a launch. */
        double per = 10 * pool->cfg.launch_timeout_s > 20 ? 10 * pool->cfg.launch_timeout_s : 20;
        t->ref_ms = (uint64_t)(per * 1000.0 * req->reference.n_launches);
    }
    t->cb = cb;
    t->udata = udata;
    if (ret_ticket)
        *ret_ticket = t;
    if (!w) {
        t->place = AT_PENDING;
        q_push(&pool->pending, t);
    } else {
        enqueue(w, t);
    }
    return 0;
}

void gw_cancel(gw_pool *pool, gw_ticket *t)
{
    if (!pool || !t || t->pool != pool)
        return;
    if (t->place == AT_RUNNING) {
        worker *w = t->w;
        /* The worker stops at its next check; its late result is dropped. A worker that does not
         * answer in time is killed and restarted (without counting against the device). */
        w->draining = true;
        w->drain_id = t->id;
        w->drain_deadline = uv_now(pool->loop) +
                            (uint64_t)(pool->cfg.launch_timeout_s * 1000.0) + 1000;
        send_simple(w, GW_MSG_CANCEL, t->id);
    }
    finish_status(t, GW_CANCELLED, "cancelled");
}

void gw_pool_close(gw_pool *pool, void (*done)(void *udata), void *udata)
{
    if (!pool || pool->closing)
        return;
    pool->closing = true;
    pool->done = done;
    pool->done_udata = udata;

    while (pool->pending.head)
        finish_status(pool->pending.head, GW_CANCELLED, "the worker pool is closing");
    for (int i = 0; i < pool->n_workers; i++) {
        worker *w = &pool->workers[i];
        if (w->running)
            finish_status(w->running, GW_CANCELLED, "the worker pool is closing");
        while (w->q.head)
            finish_status(w->q.head, GW_CANCELLED, "the worker pool is closing");
    }
    for (int i = 0; i < pool->n_workers; i++) {
        worker *w = &pool->workers[i];
        if (w->spawned)
            send_simple(w, GW_MSG_SHUTDOWN, 0);
        /* Workers hold nothing worth a grace period, and one stuck in a kernel would not take
         * it anyway. */
        kill_worker(w, KILL_CLOSE);
        if (!w->spawned) {
            close_chan(w);
            close_err(w);
        }
        uv_close((uv_handle_t *)&w->timer, on_timer_closed);
    }
    if (pool->probe_spawned) {
        pool->probe_killed = true;
        uv_process_kill(&pool->probe, SIGKILL);
    }
    if (pool->probe_timer_open) {
        pool->probe_timer_open = false;
        uv_close((uv_handle_t *)&pool->probe_timer, on_probe_timer_closed);
    }
    maybe_done(pool);
}
