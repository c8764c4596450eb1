/* daemon/loop_probe.h - how long an event waits for the loop thread (hidetd_loop_lag_seconds).
 *
 * A cache hit is answered in tens of microseconds once the loop thread reads it; what it can
 * wait for is everything before that: the loop busy with other callbacks, the loop thread
 * runnable but without a CPU (a compile on its core, a slice it must wait out), the loop thread
 * blocked (a lock, a page fault, a write). The probe measures exactly that for a synthetic event:
 * a timerfd armed for an absolute time, watched by the loop like any socket; when its callback
 * runs, now - the armed time is the wait an event arriving then would have had. The next one is
 * armed at a random point of the next period (jittered, so that it never locks step with a
 * periodic stall and misses it), so the samples are the lag of events arriving at random times,
 * which is what open-loop clients see.
 *
 * A libuv timer would not do: its deadlines are whole milliseconds of the loop's cached clock
 * and epoll's timeout is in milliseconds, so a timer's expected time is only known to +-1 ms.
 * Per-iteration busy time (uv_prepare/uv_check) misses the wait that matters most here, a
 * runnable loop thread without a CPU, and cannot separate I/O callbacks from the sleep in
 * epoll_wait without an extra epoll_wait per iteration.
 *
 * Cost: one wake-up, one read(2) and one timerfd_settime(2) per sample (HD_LOOP_PROBE_PERIOD_NS
 * on average: 100 a second when idle). Loop thread only. The caller owns the struct; its memory
 * must stay valid until the close callback ran.
 */
#ifndef HIDET_DAEMON_LOOP_PROBE_H
#define HIDET_DAEMON_LOOP_PROBE_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "daemon/metrics.h"

#define HD_LOOP_PROBE_PERIOD_NS (10 * 1000 * 1000ULL)

typedef struct hd_loop_probe {
    uv_poll_t poll;
    int fd;           /* the timerfd; closed with the handle */
    uint64_t period_ns;
    uint64_t due_ns;  /* CLOCK_MONOTONIC time the armed sample is due */
    uint64_t rng;
    hd_metric *lag;   /* histogram, seconds; may be NULL (then the probe only keeps max_ns) */
    uint64_t max_ns;  /* the largest lag seen */
    uint64_t samples;
    void (*on_closed)(struct hd_loop_probe *p);
    void *data;       /* the caller's */
} hd_loop_probe;

/* Creates the timerfd and starts sampling every period_ns on average (0: the default), each lag
 * observed into lag. The handle is unref'd: it never keeps the loop alive. Returns 0 or a
 * negative errno (the probe is then not running and need not be closed). */
int hd_loop_probe_start(uv_loop_t *loop, hd_loop_probe *p, uint64_t period_ns, hd_metric *lag);

/* Stops the probe; on_closed (may be NULL) runs once the handle is closed and the timerfd with
 * it. Safe on a probe that failed to start only if it was zeroed before. */
void hd_loop_probe_close(hd_loop_probe *p, void (*on_closed)(hd_loop_probe *p));

/* Whether the probe runs (started and not closing). */
bool hd_loop_probe_active(const hd_loop_probe *p);

#endif
