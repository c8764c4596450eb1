/* daemon/metrics.h - a small Prometheus metrics registry for GET /metrics.
 *
 * Families (a name, a help text, a type and up to two label names) are registered once at
 * startup; each family holds series (one per combination of label values). Callers keep the
 * hd_metric pointer of a series and update it in O(1) (a histogram observation is a binary search
 * over its fixed buckets), so feeding metrics costs nothing measurable on the request path.
 * hd_metrics_render() writes the text exposition format 0.0.4 (# HELP / # TYPE lines, escaped
 * label values, histogram _bucket{le=...} / _sum / _count with the +Inf bucket), families in
 * registration order, series in creation order, so the output is deterministic.
 *
 * Loop-thread only: there are no locks. Label values must never come unchecked from a client
 * (each family caps its series at HD_METRICS_MAX_SERIES so a mistake cannot grow memory without
 * bound). Serve the text as "text/plain; version=0.0.4; charset=utf-8" (HD_METRICS_CONTENT_TYPE).
 *
 * Returns: 0 or a negative errno-style code (-EINVAL bad name/argument, -EEXIST name already
 * registered, -E2BIG too many series, -ENOMEM). Output parameters ret_* are untouched on failure.
 * The registry owns every family and series; pointers stay valid until hd_metrics_free().
 */
#ifndef HIDET_DAEMON_METRICS_H
#define HIDET_DAEMON_METRICS_H

#include <stddef.h>

#define HD_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define HD_METRICS_MAX_LABELS 2
#define HD_METRICS_MAX_SERIES 1024
#define HD_METRICS_MAX_BUCKETS 64

typedef enum {
    HD_METRIC_COUNTER = 0,
    HD_METRIC_GAUGE,
    HD_METRIC_HISTOGRAM,
} hd_metric_type;

typedef struct hd_metrics hd_metrics;       /* the registry */
typedef struct hd_metric_family hd_metric_family;
typedef struct hd_metric hd_metric;         /* one series: a family plus its label values */

/* Creates an empty registry; the caller owns it. */
int hd_metrics_new(hd_metrics **ret);
/* Frees the registry, its families and series; accepts NULL; returns NULL. */
hd_metrics *hd_metrics_free(hd_metrics *m);

/* Registers a family. name matches [a-zA-Z_:][a-zA-Z0-9_:]*; help is any text (escaped on output);
 * label1/label2 are label names ([a-zA-Z_][a-zA-Z0-9_]*, not starting with "__", not "le" for a
 * histogram) or NULL (label2 only when label1 is given). For a histogram, buckets are the upper
 * bounds, finite and strictly increasing, 1..HD_METRICS_MAX_BUCKETS of them (+Inf is implicit);
 * for other types pass NULL, 0. Strings are copied. *ret_family is owned by the registry. */
int hd_metrics_family(hd_metrics *m, hd_metric_type type, const char *name, const char *help,
                      const char *label1, const char *label2, const double *buckets,
                      size_t n_buckets, hd_metric_family **ret_family);

/* The series of a family for these label values (as many as the family has label names; extra
 * ones must be NULL), created at zero on first use. Values are any UTF-8 text (copied). Linear in
 * the family's series: call it once and keep the pointer on hot paths. -E2BIG past
 * HD_METRICS_MAX_SERIES. */
int hd_metric_family_series(hd_metric_family *f, const char *value1, const char *value2,
                            hd_metric **ret);

/* Shorthands for families without labels: register and return the single series. */
int hd_metrics_counter(hd_metrics *m, const char *name, const char *help, hd_metric **ret);
int hd_metrics_gauge(hd_metrics *m, const char *name, const char *help, hd_metric **ret);
int hd_metrics_histogram(hd_metrics *m, const char *name, const char *help,
                         const double *buckets, size_t n_buckets, hd_metric **ret);

/* Updates; all accept NULL (a metric that failed to register is skipped, never a crash) and
 * ignore a call of the wrong type. Counters only go up: hd_counter_add() ignores negative and NaN
 * amounts. hd_counter_set() is for mirroring a monotonic count kept elsewhere (a module's stats);
 * a value below the current one is taken as a reset. */
void hd_counter_inc(hd_metric *c);
void hd_counter_add(hd_metric *c, double amount);
void hd_counter_set(hd_metric *c, double value);
void hd_gauge_set(hd_metric *g, double value);
void hd_gauge_add(hd_metric *g, double delta);
void hd_histogram_observe(hd_metric *h, double value);

/* Current value of a counter or gauge, the sum of observations of a histogram (for tests and the
 * daemon's own status); 0 for NULL. */
double hd_metric_value(const hd_metric *metric);
/* Number of observations of a histogram; 0 for other types and NULL. */
unsigned long long hd_metric_count(const hd_metric *metric);

/* Registers a function called at the start of every hd_metrics_render(), so the daemon can set
 * gauges that are cheaper to read at scrape time than to track (cache size, queue depth, worker
 * states). One callback; a later call replaces it; NULL removes it. */
void hd_metrics_on_collect(hd_metrics *m, void (*collect)(hd_metrics *m, void *userdata),
                           void *userdata);

/* Renders every family in the text exposition format 0.0.4. *ret_text is malloc'd,
 * NUL-terminated, owned by the caller; *ret_len (when not NULL) is its length. Families with no
 * series yet are rendered with their HELP/TYPE lines only (histograms and counters without labels
 * always have their single series). */
int hd_metrics_render(hd_metrics *m, char **ret_text, size_t *ret_len);

/* Standard bucket sets the daemon uses: request latency in seconds (50 us .. 10 s), the event
 * loop's lag in seconds (50 us .. 10 s, with 2 ms) and longer operations such as compile or
 * tuning in seconds (10 ms .. 10 min). Static storage. */
extern const double hd_metrics_latency_buckets[];
extern const size_t hd_metrics_latency_buckets_n;
extern const double hd_metrics_lag_buckets[];
extern const size_t hd_metrics_lag_buckets_n;
extern const double hd_metrics_duration_buckets[];
extern const size_t hd_metrics_duration_buckets_n;

#endif
