/* daemon/tests/test_loop_probe.c - the loop-lag probe (hidetd_loop_lag_seconds): a loop that is
 * kept busy 40 ms shows a lag of about that much in the histogram (and renders above the 10 ms
 * bucket), samples keep coming while the loop is free, the handle never keeps the loop alive,
 * and closing it closes its timerfd and calls back once. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uv.h>

#include "tests/check.h"
#include "daemon/loop_probe.h"
#include "daemon/metrics.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static hd_loop_probe probe;
static uv_timer_t busy, end;
static int closed_calls;
static int fd_at_close = -1;

static void on_probe_closed(hd_loop_probe *p)
{
    (void)p;
    closed_calls++;
}

/* Blocks the loop thread 40 ms, as a long callback (or a loop thread without a CPU) would. */
static void busy_cb(uv_timer_t *t)
{
    (void)t;
    double until = now_s() + 0.040;
    while (now_s() < until)
        ;
}

static void end_cb(uv_timer_t *t)
{
    (void)t;
    fd_at_close = probe.fd;
    hd_loop_probe_close(&probe, on_probe_closed);
    uv_close((uv_handle_t *)&busy, NULL);
    uv_close((uv_handle_t *)&end, NULL);
}

/* The cumulative count of the bucket `le` in rendered text, -1 when absent. */
static long bucket(const char *text, const char *le)
{
    char key[96];
    snprintf(key, sizeof(key), "hidetd_loop_lag_seconds_bucket{le=\"%s\"} ", le);
    const char *p = strstr(text, key);
    return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

int main(void)
{
    hd_metrics *m = NULL;
    hd_metric *lag = NULL;
    CHECK(hd_metrics_new(&m) == 0, "registry");
    CHECK(hd_metrics_histogram(m, "hidetd_loop_lag_seconds", "lag", hd_metrics_lag_buckets,
                               hd_metrics_lag_buckets_n, &lag) == 0, "the lag buckets register");
    CHECK(hd_loop_probe_start(NULL, &probe, 0, lag) == -EINVAL, "no loop");

    uv_loop_t loop;
    CHECK(uv_loop_init(&loop) == 0, "loop");
    CHECK(hd_loop_probe_start(&loop, &probe, 2 * 1000 * 1000, lag) == 0, "start");
    CHECK(hd_loop_probe_active(&probe), "active");
    CHECK(probe.fd >= 0 && fcntl(probe.fd, F_GETFD) >= 0, "a timerfd");

    /* Alone the probe keeps nothing running: the loop returns at once. */
    CHECK(uv_run(&loop, UV_RUN_NOWAIT) == 0, "the probe keeps the loop alive");

    uv_timer_init(&loop, &busy);
    uv_timer_init(&loop, &end);
    uv_timer_start(&busy, busy_cb, 30, 0);
    uv_timer_start(&end, end_cb, 150, 0);
    uv_run(&loop, UV_RUN_DEFAULT);

    CHECK(closed_calls == 1, "closed callback ran %d times", closed_calls);
    CHECK(probe.fd == -1 && fd_at_close >= 0 && fcntl(fd_at_close, F_GETFD) < 0 && errno == EBADF,
          "the timerfd is still open");
    CHECK(!hd_loop_probe_active(&probe), "still active after close");
    /* 150 ms at ~1 sample per 2 ms, less the 40 ms the loop was held. */
    CHECK(probe.samples >= 20, "only %llu samples", (unsigned long long)probe.samples);
    CHECK(hd_metric_count(lag) == probe.samples, "histogram count %llu, samples %llu",
          hd_metric_count(lag), (unsigned long long)probe.samples);
    /* A sample fell due while the loop was held: it waited for the rest of the 40 ms. */
    CHECK(probe.max_ns >= 25 * 1000 * 1000ULL, "largest lag %.1f ms", probe.max_ns / 1e6);
    CHECK(hd_metric_value(lag) >= 0.025, "lag sum %.4f s", hd_metric_value(lag));

    char *text = NULL;
    CHECK(hd_metrics_render(m, &text, NULL) == 0, "render");
    long le10ms = bucket(text, "0.01"), le2ms = bucket(text, "0.002"), inf = bucket(text, "+Inf");
    CHECK(inf == (long)probe.samples, "+Inf bucket %ld", inf);
    CHECK(le10ms >= 0 && le10ms < inf, "no observation above 10 ms (le 0.01: %ld of %ld)", le10ms,
          inf);
    CHECK(le2ms >= 0 && le2ms <= le10ms, "buckets not cumulative");
    free(text);

    /* Closing twice is harmless. */
    hd_loop_probe_close(&probe, on_probe_closed);
    uv_run(&loop, UV_RUN_NOWAIT);
    CHECK(closed_calls == 1, "second close called back");
    CHECK(uv_loop_close(&loop) == 0, "handles left open");
    hd_metrics_free(m);
    return check_finish("test_loop_probe");
}
