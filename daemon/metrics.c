/* daemon/metrics.c - Prometheus registry and text exposition format 0.0.4 (see metrics.h). */
#include "daemon/metrics.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hd_metric {
    hd_metric_family *family;
    char *values[HD_METRICS_MAX_LABELS];
    double value;               /* counter/gauge value; histogram sum of observations */
    unsigned long long count;   /* histogram observations */
    unsigned long long *bucket; /* histogram: per-bucket (not cumulative) counts, n_bounds long;
                                 * observations above the last bound are count - sum(bucket) */
};

struct hd_metric_family {
    hd_metric_type type;
    char *name;
    char *help;
    char *labels[HD_METRICS_MAX_LABELS];
    size_t n_labels;
    double *bounds;
    size_t n_bounds;
    hd_metric **series;
    size_t n_series, cap_series;
};

struct hd_metrics {
    hd_metric_family **families;
    size_t n_families, cap_families;
    void (*collect)(hd_metrics *m, void *userdata);
    void *collect_userdata;
};

/* Request latency, seconds: fine steps below a millisecond where cache hits live. */
const double hd_metrics_latency_buckets[] = {
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1, 2.5, 5, 10,
};
const size_t hd_metrics_latency_buckets_n =
    sizeof(hd_metrics_latency_buckets) / sizeof(hd_metrics_latency_buckets[0]);

/* The loop thread's lag, seconds: from the 50 us a wake-up costs to the seconds of a loop that
 * is stuck; 2 ms is the hit benchmark's p99.9 bound. */
const double hd_metrics_lag_buckets[] = {
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1, 2.5, 5, 10,
};
const size_t hd_metrics_lag_buckets_n =
    sizeof(hd_metrics_lag_buckets) / sizeof(hd_metrics_lag_buckets[0]);

/* Compile and tuning durations, seconds: NVRTC takes ~0.1-2 s, a measured search up to minutes. */
const double hd_metrics_duration_buckets[] = {
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600,
};
const size_t hd_metrics_duration_buckets_n =
    sizeof(hd_metrics_duration_buckets) / sizeof(hd_metrics_duration_buckets[0]);

static bool valid_name(const char *s, bool colon_ok)
{
    if (!s || !*s)
        return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                     (colon_ok && c == ':');
        bool digit = c >= '0' && c <= '9';
        if (!alpha && !(digit && p != s))
            return false;
    }
    return true;
}

static bool valid_label_name(const char *s)
{
    /* Names starting with "__" are reserved for Prometheus itself. */
    return valid_name(s, false) && strncmp(s, "__", 2) != 0;
}

static void series_free(hd_metric *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < HD_METRICS_MAX_LABELS; i++)
        free(s->values[i]);
    free(s->bucket);
    free(s);
}

static void family_free(hd_metric_family *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n_series; i++)
        series_free(f->series[i]);
    free(f->series);
    free(f->name);
    free(f->help);
    for (size_t i = 0; i < HD_METRICS_MAX_LABELS; i++)
        free(f->labels[i]);
    free(f->bounds);
    free(f);
}

int hd_metrics_new(hd_metrics **ret)
{
    hd_metrics *m;

    if (!ret)
        return -EINVAL;
    m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    *ret = m;
    return 0;
}

hd_metrics *hd_metrics_free(hd_metrics *m)
{
    if (!m)
        return NULL;
    for (size_t i = 0; i < m->n_families; i++)
        family_free(m->families[i]);
    free(m->families);
    free(m);
    return NULL;
}

/* Whether `name` equals `base` followed by `suffix`. */
static bool is_suffixed(const char *name, const char *base, const char *suffix)
{
    size_t bl = strlen(base);
    return strncmp(name, base, bl) == 0 && strcmp(name + bl, suffix) == 0;
}

/* A histogram named x also owns x_bucket, x_sum and x_count in the output; two families whose
 * sample names collide would make the exposition ambiguous, so refuse them. */
static bool name_clashes(const hd_metrics *m, const char *name, hd_metric_type type)
{
    static const char *const sfx[] = {"_bucket", "_sum", "_count"};

    for (size_t i = 0; i < m->n_families; i++) {
        const hd_metric_family *f = m->families[i];
        if (strcmp(f->name, name) == 0)
            return true;
        for (size_t k = 0; k < 3; k++) {
            if (f->type == HD_METRIC_HISTOGRAM && is_suffixed(name, f->name, sfx[k]))
                return true;
            if (type == HD_METRIC_HISTOGRAM && is_suffixed(f->name, name, sfx[k]))
                return true;
        }
    }
    return false;
}

int hd_metrics_family(hd_metrics *m, hd_metric_type type, const char *name, const char *help,
                      const char *label1, const char *label2, const double *buckets,
                      size_t n_buckets, hd_metric_family **ret_family)
{
    hd_metric_family *f = NULL;
    const char *labels[HD_METRICS_MAX_LABELS] = {label1, label2};
    int r;

    if (!m || !name || !help || !ret_family)
        return -EINVAL;
    if (type != HD_METRIC_COUNTER && type != HD_METRIC_GAUGE && type != HD_METRIC_HISTOGRAM)
        return -EINVAL;
    if (!valid_name(name, true))
        return -EINVAL;
    if (!label1 && label2)
        return -EINVAL;
    for (size_t i = 0; i < HD_METRICS_MAX_LABELS; i++) {
        if (!labels[i])
            continue;
        if (!valid_label_name(labels[i]))
            return -EINVAL;
        if (type == HD_METRIC_HISTOGRAM && strcmp(labels[i], "le") == 0)
            return -EINVAL;
    }
    if (label1 && label2 && strcmp(label1, label2) == 0)
        return -EINVAL;
    if (type == HD_METRIC_HISTOGRAM) {
        if (!buckets || n_buckets == 0 || n_buckets > HD_METRICS_MAX_BUCKETS)
            return -EINVAL;
        for (size_t i = 0; i < n_buckets; i++) {
            /* x - x != 0 catches both infinities and NaN without libm. */
            if (buckets[i] != buckets[i] || buckets[i] - buckets[i] != 0)
                return -EINVAL;
            if (i > 0 && !(buckets[i] > buckets[i - 1]))
                return -EINVAL;
        }
    } else if (buckets || n_buckets) {
        return -EINVAL;
    }
    if (name_clashes(m, name, type))
        return -EEXIST;

    if (m->n_families == m->cap_families) {
        size_t cap = m->cap_families ? m->cap_families * 2 : 16;
        hd_metric_family **v = realloc(m->families, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        m->families = v;
        m->cap_families = cap;
    }

    r = -ENOMEM;
    f = calloc(1, sizeof(*f));
    if (!f)
        goto fail;
    f->type = type;
    f->name = strdup(name);
    f->help = strdup(help);
    if (!f->name || !f->help)
        goto fail;
    for (size_t i = 0; i < HD_METRICS_MAX_LABELS && labels[i]; i++) {
        f->labels[i] = strdup(labels[i]);
        if (!f->labels[i])
            goto fail;
        f->n_labels++;
    }
    if (type == HD_METRIC_HISTOGRAM) {
        f->bounds = malloc(n_buckets * sizeof(*f->bounds));
        if (!f->bounds)
            goto fail;
        memcpy(f->bounds, buckets, n_buckets * sizeof(*f->bounds));
        f->n_bounds = n_buckets;
    }
    m->families[m->n_families++] = f;
    *ret_family = f;
    return 0;
fail:
    family_free(f);
    return r;
}

static bool value_eq(const char *a, const char *b)
{
    if (!a || !b)
        return a == b;
    return strcmp(a, b) == 0;
}

int hd_metric_family_series(hd_metric_family *f, const char *value1, const char *value2,
                            hd_metric **ret)
{
    const char *values[HD_METRICS_MAX_LABELS] = {value1, value2};
    hd_metric *s = NULL;

    if (!f || !ret)
        return -EINVAL;
    for (size_t i = 0; i < HD_METRICS_MAX_LABELS; i++) {
        bool wanted = i < f->n_labels;
        if (wanted != (values[i] != NULL))
            return -EINVAL;
    }
    for (size_t i = 0; i < f->n_series; i++) {
        hd_metric *c = f->series[i];
        if (value_eq(c->values[0], value1) && value_eq(c->values[1], value2)) {
            *ret = c;
            return 0;
        }
    }
    if (f->n_series >= HD_METRICS_MAX_SERIES)
        return -E2BIG;
    if (f->n_series == f->cap_series) {
        size_t cap = f->cap_series ? f->cap_series * 2 : 8;
        hd_metric **v = realloc(f->series, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        f->series = v;
        f->cap_series = cap;
    }
    s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->family = f;
    for (size_t i = 0; i < f->n_labels; i++) {
        s->values[i] = strdup(values[i]);
        if (!s->values[i])
            goto fail;
    }
    if (f->type == HD_METRIC_HISTOGRAM) {
        s->bucket = calloc(f->n_bounds, sizeof(*s->bucket));
        if (!s->bucket)
            goto fail;
    }
    f->series[f->n_series++] = s;
    *ret = s;
    return 0;
fail:
    series_free(s);
    return -ENOMEM;
}

static int single(hd_metrics *m, hd_metric_type type, const char *name, const char *help,
                  const double *buckets, size_t n_buckets, hd_metric **ret)
{
    hd_metric_family *f;
    hd_metric *s;
    int r;

    if (!ret)
        return -EINVAL;
    r = hd_metrics_family(m, type, name, help, NULL, NULL, buckets, n_buckets, &f);
    if (r < 0)
        return r;
    /* Cannot fail for want of labels; only for memory. The family stays registered (it renders
     * with HELP/TYPE only), which is harmless and keeps the registry simple. */
    r = hd_metric_family_series(f, NULL, NULL, &s);
    if (r < 0)
        return r;
    *ret = s;
    return 0;
}

int hd_metrics_counter(hd_metrics *m, const char *name, const char *help, hd_metric **ret)
{
    return single(m, HD_METRIC_COUNTER, name, help, NULL, 0, ret);
}

int hd_metrics_gauge(hd_metrics *m, const char *name, const char *help, hd_metric **ret)
{
    return single(m, HD_METRIC_GAUGE, name, help, NULL, 0, ret);
}

int hd_metrics_histogram(hd_metrics *m, const char *name, const char *help,
                         const double *buckets, size_t n_buckets, hd_metric **ret)
{
    return single(m, HD_METRIC_HISTOGRAM, name, help, buckets, n_buckets, ret);
}

void hd_counter_inc(hd_metric *c)
{
    hd_counter_add(c, 1.0);
}

void hd_counter_add(hd_metric *c, double amount)
{
    if (!c || c->family->type != HD_METRIC_COUNTER)
        return;
    if (!(amount >= 0)) /* also rejects NaN */
        return;
    c->value += amount;
}

void hd_counter_set(hd_metric *c, double value)
{
    if (!c || c->family->type != HD_METRIC_COUNTER)
        return;
    if (!(value >= 0))
        return;
    /* A lower value is a reset of the source (a restarted worker, say); Prometheus' rate()
     * handles counter resets, so pass it through. */
    c->value = value;
}

void hd_gauge_set(hd_metric *g, double value)
{
    if (!g || g->family->type != HD_METRIC_GAUGE)
        return;
    g->value = value;
}

void hd_gauge_add(hd_metric *g, double delta)
{
    if (!g || g->family->type != HD_METRIC_GAUGE)
        return;
    g->value += delta;
}

void hd_histogram_observe(hd_metric *h, double value)
{
    const hd_metric_family *f;
    size_t lo, hi;

    if (!h || h->family->type != HD_METRIC_HISTOGRAM)
        return;
    if (value != value) /* NaN would poison the sum forever */
        return;
    f = h->family;
    /* First bound >= value (le is inclusive). */
    lo = 0;
    hi = f->n_bounds;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (value <= f->bounds[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    if (lo < f->n_bounds)
        h->bucket[lo]++;
    h->count++;
    h->value += value;
}

double hd_metric_value(const hd_metric *metric)
{
    return metric ? metric->value : 0;
}

unsigned long long hd_metric_count(const hd_metric *metric)
{
    if (!metric || metric->family->type != HD_METRIC_HISTOGRAM)
        return 0;
    return metric->count;
}

void hd_metrics_on_collect(hd_metrics *m, void (*collect)(hd_metrics *m, void *userdata),
                           void *userdata)
{
    if (!m)
        return;
    m->collect = collect;
    m->collect_userdata = collect ? userdata : NULL;
}

/* Rendering. */

typedef struct {
    char *p;
    size_t len, cap;
    bool oom;
} buf;

static void buf_grow(buf *b, size_t more)
{
    size_t cap;
    char *p;

    if (b->oom || b->len + more + 1 <= b->cap)
        return;
    cap = b->cap ? b->cap : 1024;
    while (cap < b->len + more + 1)
        cap *= 2;
    p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return;
    }
    b->p = p;
    b->cap = cap;
}

static void buf_put(buf *b, const char *s, size_t n)
{
    buf_grow(b, n);
    if (b->oom)
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void buf_str(buf *b, const char *s)
{
    buf_put(b, s, strlen(s));
}

/* Escapes for HELP text (backslash, newline) or, with quote, label values (also '"'). */
static void buf_escaped(buf *b, const char *s, bool quote)
{
    const char *run = s;

    for (const char *p = s;; p++) {
        const char *esc = NULL;
        if (*p == '\\')
            esc = "\\\\";
        else if (*p == '\n')
            esc = "\\n";
        else if (quote && *p == '"')
            esc = "\\\"";
        if (esc || !*p) {
            buf_put(b, run, (size_t)(p - run));
            if (!*p)
                break;
            buf_str(b, esc);
            run = p + 1;
        }
    }
}

/* Prometheus float text: NaN, +Inf, -Inf, integers without exponent or fraction while they are
 * exact, otherwise the shortest %g form that reads back to the same double (so "0.005" and not
 * "0.0050000000000000001"). */
static void format_value(double v, char out[40])
{
    if (v != v) {
        strcpy(out, "NaN");
        return;
    }
    if (v - v != 0) {
        strcpy(out, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    if (v > -9007199254740992.0 && v < 9007199254740992.0 && v == (double)(int64_t)v) {
        snprintf(out, 40, "%lld", (long long)(int64_t)v);
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(out, 40, "%.*g", prec, v);
        if (prec == 17 || strtod(out, NULL) == v)
            return;
    }
}

static void buf_value(buf *b, double v)
{
    char tmp[40];

    format_value(v, tmp);
    buf_str(b, tmp);
}

/* name{l1="v1",l2="v2"[,le="x"]}; le is NULL for non-bucket samples. */
static void buf_sample_name(buf *b, const hd_metric_family *f, const char *suffix,
                            const hd_metric *s, const char *le)
{
    bool any = f->n_labels > 0 || le;

    buf_str(b, f->name);
    if (suffix)
        buf_str(b, suffix);
    if (!any)
        return;
    buf_str(b, "{");
    for (size_t i = 0; i < f->n_labels; i++) {
        if (i)
            buf_str(b, ",");
        buf_str(b, f->labels[i]);
        buf_str(b, "=\"");
        buf_escaped(b, s->values[i], true);
        buf_str(b, "\"");
    }
    if (le) {
        if (f->n_labels)
            buf_str(b, ",");
        buf_str(b, "le=\"");
        buf_str(b, le);
        buf_str(b, "\"");
    }
    buf_str(b, "}");
}

static void render_family(buf *b, const hd_metric_family *f)
{
    static const char *const type_names[] = {"counter", "gauge", "histogram"};

    buf_str(b, "# HELP ");
    buf_str(b, f->name);
    buf_str(b, " ");
    buf_escaped(b, f->help, false);
    buf_str(b, "\n# TYPE ");
    buf_str(b, f->name);
    buf_str(b, " ");
    buf_str(b, type_names[f->type]);
    buf_str(b, "\n");

    for (size_t i = 0; i < f->n_series; i++) {
        const hd_metric *s = f->series[i];
        if (f->type != HD_METRIC_HISTOGRAM) {
            buf_sample_name(b, f, NULL, s, NULL);
            buf_str(b, " ");
            buf_value(b, s->value);
            buf_str(b, "\n");
            continue;
        }
        unsigned long long cum = 0;
        char le[40];
        for (size_t k = 0; k < f->n_bounds; k++) {
            cum += s->bucket[k];
            format_value(f->bounds[k], le);
            buf_sample_name(b, f, "_bucket", s, le);
            buf_str(b, " ");
            buf_value(b, (double)cum);
            buf_str(b, "\n");
        }
        buf_sample_name(b, f, "_bucket", s, "+Inf");
        buf_str(b, " ");
        buf_value(b, (double)s->count);
        buf_str(b, "\n");
        buf_sample_name(b, f, "_sum", s, NULL);
        buf_str(b, " ");
        buf_value(b, s->value);
        buf_str(b, "\n");
        buf_sample_name(b, f, "_count", s, NULL);
        buf_str(b, " ");
        buf_value(b, (double)s->count);
        buf_str(b, "\n");
    }
}

int hd_metrics_render(hd_metrics *m, char **ret_text, size_t *ret_len)
{
    buf b = {0};

    if (!m || !ret_text)
        return -EINVAL;
    if (m->collect)
        m->collect(m, m->collect_userdata);
    buf_grow(&b, 0);
    if (!b.oom)
        b.p[0] = '\0';
    for (size_t i = 0; i < m->n_families; i++)
        render_family(&b, m->families[i]);
    if (b.oom) {
        free(b.p);
        return -ENOMEM;
    }
    *ret_text = b.p;
    if (ret_len)
        *ret_len = b.len;
    return 0;
}
