/* daemon/loop_probe.c - see loop_probe.h. */
#include "daemon/loop_probe.h"

#include <errno.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* xorshift64*: the jitter needs no quality, only no lock step with periodic work. */
static uint64_t next_rand(hd_loop_probe *p)
{
    uint64_t x = p->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    p->rng = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Arms the next sample at a uniformly random point of [period/2, 3*period/2) from now. */
static int arm(hd_loop_probe *p)
{
    uint64_t now = mono_ns();
    p->due_ns = now + p->period_ns / 2 + next_rand(p) % p->period_ns;
    struct itimerspec its;
    memset(&its, 0, sizeof(its));
    its.it_value.tv_sec = (time_t)(p->due_ns / 1000000000ULL);
    its.it_value.tv_nsec = (long)(p->due_ns % 1000000000ULL);
    return timerfd_settime(p->fd, TFD_TIMER_ABSTIME, &its, NULL) < 0 ? -errno : 0;
}

static void on_readable(uv_poll_t *h, int status, int events)
{
    hd_loop_probe *p = h->data;
    (void)events;
    if (status < 0)
        return;
    uint64_t now = mono_ns();
    uint64_t expirations;
    /* Nonblocking: a spurious wake-up reads EAGAIN and takes no sample. */
    if (read(p->fd, &expirations, sizeof(expirations)) != (ssize_t)sizeof(expirations))
        return;
    uint64_t lag = now > p->due_ns ? now - p->due_ns : 0;
    if (lag > p->max_ns)
        p->max_ns = lag;
    p->samples++;
    hd_histogram_observe(p->lag, (double)lag / 1e9);
    (void)arm(p);
}

int hd_loop_probe_start(uv_loop_t *loop, hd_loop_probe *p, uint64_t period_ns, hd_metric *lag)
{
    if (!loop || !p)
        return -EINVAL;
    memset(p, 0, sizeof(*p));
    p->fd = -1;
    p->period_ns = period_ns ? period_ns : HD_LOOP_PROBE_PERIOD_NS;
    p->lag = lag;
    p->rng = mono_ns() | 1;
    p->fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (p->fd < 0)
        return -errno;
    int r = uv_poll_init(loop, &p->poll, p->fd);
    if (r < 0) {
        close(p->fd);
        p->fd = -1;
        return r;
    }
    p->poll.data = p;
    r = arm(p);
    if (r == 0)
        r = uv_poll_start(&p->poll, UV_READABLE, on_readable);
    if (r < 0) {
        /* The handle exists: it must be closed before the fd and the struct go. */
        hd_loop_probe_close(p, NULL);
        return r;
    }
    uv_unref((uv_handle_t *)&p->poll);
    return 0;
}

static void closed(uv_handle_t *h)
{
    hd_loop_probe *p = h->data;
    if (p->fd >= 0)
        close(p->fd);
    p->fd = -1;
    if (p->on_closed)
        p->on_closed(p);
}

void hd_loop_probe_close(hd_loop_probe *p, void (*on_closed)(hd_loop_probe *p))
{
    if (!p || !p->poll.data || uv_is_closing((uv_handle_t *)&p->poll))
        return;
    p->on_closed = on_closed;
    uv_close((uv_handle_t *)&p->poll, closed);
}

bool hd_loop_probe_active(const hd_loop_probe *p)
{
    return p && p->poll.data && !uv_is_closing((const uv_handle_t *)&p->poll);
}
