/* tests/ops/test_metrics.c - the Prometheus registry: exact rendering, escaping, number format,
 * histograms, argument checks and limits.
 *
 * `test_metrics --dump` prints a rendering with every feature instead of testing; metrics_parse.py
 * checks that output with a strict parser of the text format (the test 'metrics-parse'). */
#include "daemon/metrics.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"

/* Compares renderings and, on a difference, shows the first differing line of each. */
static void check_text(const char *got, const char *want, int line)
{
    size_t i = 0, ls = 0;

    if (strcmp(got, want) == 0)
        return;
    failures++;
    while (got[i] && got[i] == want[i]) {
        if (got[i] == '\n')
            ls = i + 1;
        i++;
    }
    fprintf(stderr, "%s:%d: rendering differs at byte %zu\n  got:  %.*s\n  want: %.*s\n", __FILE__,
            line, i, (int)strcspn(got + ls, "\n"), got + ls, (int)strcspn(want + ls, "\n"),
            want + ls);
}

static char *render(hd_metrics *m)
{
    char *text = NULL;
    size_t len = 0;
    int r = hd_metrics_render(m, &text, &len);

    CHECK_EQ_INT(r, 0);
    if (r < 0)
        return strdup("");
    CHECK_EQ_INT(len, strlen(text));
    return text;
}

static void test_empty(void)
{
    hd_metrics *m = NULL;
    char *t;

    CHECK_EQ_INT(hd_metrics_new(&m), 0);
    t = render(m);
    check_text(t, "", __LINE__);
    free(t);
    CHECK(hd_metrics_free(m) == NULL);
    CHECK(hd_metrics_free(NULL) == NULL);
}

static int collected;

static void collect(hd_metrics *m, void *userdata)
{
    (void)m;
    collected++;
    hd_gauge_set(userdata, 42);
}

static void test_exact(void)
{
    static const double b[] = {0.005, 0.5, 1};
    hd_metrics *m = NULL;
    hd_metric_family *req = NULL, *state = NULL, *lat = NULL, *empty = NULL;
    hd_metric *total = NULL, *s1 = NULL, *s2 = NULL, *s1again = NULL, *g = NULL, *h = NULL,
              *gpu0 = NULL, *gpu1 = NULL, *hl = NULL, *scraped = NULL;
    char *t;

    CHECK_EQ_INT(hd_metrics_new(&m), 0);
    CHECK_EQ_INT(hd_metrics_counter(m, "hidetd_up_total", "Starts \\ restarts\nof hidetd", &total),
                 0);
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_COUNTER, "hidetd_http_requests_total",
                                   "HTTP requests by \"endpoint\" and status", "endpoint", "code",
                                   NULL, 0, &req),
                 0);
    CHECK_EQ_INT(hd_metric_family_series(req, "/v1/kernels", "200", &s1), 0);
    CHECK_EQ_INT(hd_metric_family_series(req, "/metrics", "a\"b\\c\nd", &s2), 0);
    CHECK_EQ_INT(hd_metric_family_series(req, "/v1/kernels", "200", &s1again), 0);
    CHECK(s1 == s1again);
    CHECK_EQ_INT(hd_metrics_gauge(m, "hidetd_temperature", "A gauge.", &g), 0);
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_GAUGE, "hidetd_gpu_state", "GPU states", "gpu",
                                   NULL, NULL, 0, &state),
                 0);
    CHECK_EQ_INT(hd_metric_family_series(state, "0", NULL, &gpu0), 0);
    CHECK_EQ_INT(hd_metric_family_series(state, "1", NULL, &gpu1), 0);
    CHECK_EQ_INT(hd_metrics_histogram(m, "hidetd_latency_seconds", "Latency.", b, 3, &h), 0);
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_HISTOGRAM, "hidetd_compile_seconds", "Compile.",
                                   "arch", NULL, b, 2, &lat),
                 0);
    CHECK_EQ_INT(hd_metric_family_series(lat, "sm_90", NULL, &hl), 0);
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_COUNTER, "hidetd_never_total", "No series yet.",
                                   "x", NULL, NULL, 0, &empty),
                 0);
    CHECK_EQ_INT(hd_metrics_gauge(m, "hidetd_scraped", "Set by the collect callback.", &scraped),
                 0);
    hd_metrics_on_collect(m, collect, scraped);

    hd_counter_inc(total);
    hd_counter_add(s1, 2);
    hd_counter_inc(s1again);
    hd_counter_add(s2, 0.25);
    hd_counter_add(s2, -5);   /* ignored: counters only go up */
    hd_counter_add(s2, 0.0 / 0.0); /* ignored: NaN */
    hd_gauge_set(g, 2.5);
    hd_gauge_add(g, -4);
    hd_gauge_set(gpu0, 1.0 / 0.0);
    hd_gauge_set(gpu1, 0.0 / 0.0);
    hd_histogram_observe(h, 0.001);
    hd_histogram_observe(h, 0.005); /* le is inclusive */
    hd_histogram_observe(h, 0.7);
    hd_histogram_observe(h, 5);
    hd_histogram_observe(h, 0.0 / 0.0); /* ignored */
    hd_histogram_observe(hl, 1e-9);
    /* Wrong types are ignored, NULL is accepted. */
    hd_gauge_set(total, 100);
    hd_counter_inc(g);
    hd_histogram_observe(s1, 1);
    hd_counter_inc(NULL);
    hd_counter_add(NULL, 1);
    hd_counter_set(NULL, 1);
    hd_gauge_set(NULL, 1);
    hd_gauge_add(NULL, 1);
    hd_histogram_observe(NULL, 1);

    CHECK(hd_metric_value(s1) == 3);
    CHECK(hd_metric_value(g) == -1.5);
    CHECK_EQ_INT(hd_metric_count(h), 4);
    CHECK(hd_metric_value(h) == 0.001 + 0.005 + 0.7 + 5);
    CHECK_EQ_INT(hd_metric_count(s1), 0);
    CHECK(hd_metric_value(NULL) == 0);

    t = render(m);
    CHECK_EQ_INT(collected, 1);
    check_text(t,
               "# HELP hidetd_up_total Starts \\\\ restarts\\nof hidetd\n"
               "# TYPE hidetd_up_total counter\n"
               "hidetd_up_total 1\n"
               "# HELP hidetd_http_requests_total HTTP requests by \"endpoint\" and status\n"
               "# TYPE hidetd_http_requests_total counter\n"
               "hidetd_http_requests_total{endpoint=\"/v1/kernels\",code=\"200\"} 3\n"
               "hidetd_http_requests_total{endpoint=\"/metrics\",code=\"a\\\"b\\\\c\\nd\"} 0.25\n"
               "# HELP hidetd_temperature A gauge.\n"
               "# TYPE hidetd_temperature gauge\n"
               "hidetd_temperature -1.5\n"
               "# HELP hidetd_gpu_state GPU states\n"
               "# TYPE hidetd_gpu_state gauge\n"
               "hidetd_gpu_state{gpu=\"0\"} +Inf\n"
               "hidetd_gpu_state{gpu=\"1\"} NaN\n"
               "# HELP hidetd_latency_seconds Latency.\n"
               "# TYPE hidetd_latency_seconds histogram\n"
               "hidetd_latency_seconds_bucket{le=\"0.005\"} 2\n"
               "hidetd_latency_seconds_bucket{le=\"0.5\"} 2\n"
               "hidetd_latency_seconds_bucket{le=\"1\"} 3\n"
               "hidetd_latency_seconds_bucket{le=\"+Inf\"} 4\n"
               "hidetd_latency_seconds_sum 5.7059999999999995\n" /* shortest round-trip form */
               "hidetd_latency_seconds_count 4\n"
               "# HELP hidetd_compile_seconds Compile.\n"
               "# TYPE hidetd_compile_seconds histogram\n"
               "hidetd_compile_seconds_bucket{arch=\"sm_90\",le=\"0.005\"} 1\n"
               "hidetd_compile_seconds_bucket{arch=\"sm_90\",le=\"0.5\"} 1\n"
               "hidetd_compile_seconds_bucket{arch=\"sm_90\",le=\"+Inf\"} 1\n"
               "hidetd_compile_seconds_sum{arch=\"sm_90\"} 1e-09\n"
               "hidetd_compile_seconds_count{arch=\"sm_90\"} 1\n"
               "# HELP hidetd_never_total No series yet.\n"
               "# TYPE hidetd_never_total counter\n"
               "# HELP hidetd_scraped Set by the collect callback.\n"
               "# TYPE hidetd_scraped gauge\n"
               "hidetd_scraped 42\n",
               __LINE__);
    free(t);

    /* Rendering twice gives the same text (apart from what collect changes); counter_set. */
    hd_counter_set(total, 7);
    hd_counter_set(total, -1); /* ignored */
    CHECK(hd_metric_value(total) == 7);
    hd_counter_set(total, 3); /* a reset of the source */
    CHECK(hd_metric_value(total) == 3);
    t = render(m);
    CHECK_EQ_INT(collected, 2);
    CHECK(strstr(t, "\nhidetd_up_total 3\n") != NULL);
    free(t);

    hd_metrics_on_collect(m, NULL, NULL);
    t = render(m);
    CHECK_EQ_INT(collected, 2);
    free(t);
    hd_metrics_free(m);
}

static void test_numbers(void)
{
    static const struct {
        double v;
        const char *text;
    } cases[] = {
        {0, "0"},
        {-0.0, "0"},
        {1, "1"},
        {-3, "-3"},
        {0.1, "0.1"},
        {0.005, "0.005"},
        {1.0 / 3.0, "0.3333333333333333"},
        {1e20, "1e+20"},
        {123456789012, "123456789012"},
        {9007199254740992.0, "9007199254740992"},
        {2.5e-7, "2.5e-07"},
        {-1.0 / 0.0, "-Inf"},
    };
    hd_metrics *m = NULL;
    hd_metric *g = NULL;
    char *t, want[128];

    CHECK_EQ_INT(hd_metrics_new(&m), 0);
    CHECK_EQ_INT(hd_metrics_gauge(m, "g", "h", &g), 0);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        hd_gauge_set(g, cases[i].v);
        t = render(m);
        snprintf(want, sizeof(want), "# HELP g h\n# TYPE g gauge\ng %s\n", cases[i].text);
        check_text(t, want, __LINE__);
        free(t);
    }
    hd_metrics_free(m);
}

static void test_errors(void)
{
    static const double good[] = {1, 2};
    static const double flat[] = {1, 1};
    static const double down[] = {2, 1};
    double nan_b[] = {1, 0.0 / 0.0};
    double inf_b[] = {1, 1.0 / 0.0};
    double many[HD_METRICS_MAX_BUCKETS + 1];
    hd_metrics *m = NULL;
    hd_metric_family *f = NULL, *sentinel = (hd_metric_family *)&f;
    hd_metric *s = NULL, *ssentinel = (hd_metric *)&s;
    char name[32];
    int r = 0;

    for (size_t i = 0; i < HD_METRICS_MAX_BUCKETS + 1; i++)
        many[i] = (double)i;
    CHECK_EQ_INT(hd_metrics_new(NULL), -EINVAL);
    CHECK_EQ_INT(hd_metrics_new(&m), 0);

    f = sentinel;
    /* Names. */
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_COUNTER, "", "h", NULL, NULL, NULL, 0, &f), -EINVAL);
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_COUNTER, "1abc", "h", NULL, NULL, NULL, 0, &f),
                 -EINVAL);
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_COUNTER, "a-b", "h", NULL, NULL, NULL, 0, &f),
                 -EINVAL);
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_COUNTER, NULL, "h", NULL, NULL, NULL, 0, &f),
                 -EINVAL);
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_COUNTER, "a", NULL, NULL, NULL, NULL, 0, &f),
                 -EINVAL);
    CHECK_EQ_INT(hd_metrics_family(m, (hd_metric_type)7, "a", "h", NULL, NULL, NULL, 0, &f),
                 -EINVAL);
    /* Labels. */
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_COUNTER, "a", "h", "__x", NULL, NULL, 0, &f),
                 -EINVAL);
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_COUNTER, "a", "h", "a:b", NULL, NULL, 0, &f),
                 -EINVAL);
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_COUNTER, "a", "h", NULL, "x", NULL, 0, &f),
                 -EINVAL);
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_COUNTER, "a", "h", "x", "x", NULL, 0, &f),
                 -EINVAL);
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_HISTOGRAM, "a", "h", "le", NULL, good, 2, &f),
                 -EINVAL);
    /* Buckets. */
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_HISTOGRAM, "a", "h", NULL, NULL, NULL, 0, &f),
                 -EINVAL);
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_HISTOGRAM, "a", "h", NULL, NULL, flat, 2, &f),
                 -EINVAL);
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_HISTOGRAM, "a", "h", NULL, NULL, down, 2, &f),
                 -EINVAL);
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_HISTOGRAM, "a", "h", NULL, NULL, nan_b, 2, &f),
                 -EINVAL);
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_HISTOGRAM, "a", "h", NULL, NULL, inf_b, 2, &f),
                 -EINVAL);
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_HISTOGRAM, "a", "h", NULL, NULL, many,
                                   HD_METRICS_MAX_BUCKETS + 1, &f),
                 -EINVAL);
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_COUNTER, "a", "h", NULL, NULL, good, 2, &f),
                 -EINVAL);
    CHECK(f == sentinel); /* outputs untouched on failure */

    /* Duplicates and histogram sample-name clashes. */
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_HISTOGRAM, "lat", "h", NULL, NULL, many,
                                   HD_METRICS_MAX_BUCKETS, &f),
                 0);
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_GAUGE, "lat", "h", NULL, NULL, NULL, 0, &f), -EEXIST);
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_GAUGE, "lat_count", "h", NULL, NULL, NULL, 0, &f),
                 -EEXIST);
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_GAUGE, "lat_bucket", "h", NULL, NULL, NULL, 0, &f),
                 -EEXIST);
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_GAUGE, "lat_total", "h", NULL, NULL, NULL, 0, &f), 0);
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_GAUGE, "x_sum", "h", NULL, NULL, NULL, 0, &f), 0);
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_HISTOGRAM, "x", "h", NULL, NULL, good, 2, &f),
                 -EEXIST);

    /* Series: value count must match the family's labels. */
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_COUNTER, "two", "h", "a", "b", NULL, 0, &f), 0);
    s = ssentinel;
    CHECK_EQ_INT(hd_metric_family_series(f, "x", NULL, &s), -EINVAL);
    CHECK_EQ_INT(hd_metric_family_series(f, NULL, NULL, &s), -EINVAL);
    CHECK_EQ_INT(hd_metric_family_series(f, "x", "y", NULL), -EINVAL);
    CHECK_EQ_INT(hd_metric_family_series(NULL, "x", "y", &s), -EINVAL);
    CHECK(s == ssentinel);
    CHECK_EQ_INT(hd_metrics_family(m, HD_METRIC_COUNTER, "one", "h", "a", NULL, NULL, 0, &f), 0);
    CHECK_EQ_INT(hd_metric_family_series(f, "x", "y", &s), -EINVAL);
    /* The series cap. */
    for (int i = 0; i < HD_METRICS_MAX_SERIES && r == 0; i++) {
        snprintf(name, sizeof(name), "v%d", i);
        r = hd_metric_family_series(f, name, NULL, &s);
    }
    CHECK_EQ_INT(r, 0);
    s = ssentinel;
    CHECK_EQ_INT(hd_metric_family_series(f, "one-too-many", NULL, &s), -E2BIG);
    CHECK(s == ssentinel);
    /* An existing series is still found at the cap. */
    CHECK_EQ_INT(hd_metric_family_series(f, "v7", NULL, &s), 0);

    CHECK_EQ_INT(hd_metrics_render(NULL, NULL, NULL), -EINVAL);
    CHECK_EQ_INT(hd_metrics_counter(m, "c", "h", NULL), -EINVAL);
    hd_metrics_free(m);
}

/* A rendering that uses every feature, for the strict parser. */
static int dump(void)
{
    hd_metrics *m = NULL;
    hd_metric_family *f = NULL;
    hd_metric *s = NULL;
    char *t = NULL;

    if (hd_metrics_new(&m) < 0)
        return 1;
    hd_metrics_counter(m, "hidetd_requests_total", "All requests; with \\ and\nnewline.", &s);
    hd_counter_add(s, 12);
    hd_metrics_family(m, HD_METRIC_COUNTER, "hidetd_http_requests_total", "By endpoint \"and\" code",
                      "endpoint", "code", NULL, 0, &f);
    hd_metric_family_series(f, "/v1/kernels", "200", &s);
    hd_counter_add(s, 3);
    hd_metric_family_series(f, "weird \"quoted\" \\ value\n", "500", &s);
    hd_counter_inc(s);
    hd_metrics_gauge(m, "hidetd_inf", "inf", &s);
    hd_gauge_set(s, -1.0 / 0.0);
    hd_metrics_gauge(m, "hidetd_nan", "nan", &s);
    hd_gauge_set(s, 0.0 / 0.0);
    hd_metrics_histogram(m, "hidetd_request_duration_seconds", "Latency", hd_metrics_latency_buckets,
                         hd_metrics_latency_buckets_n, &s);
    for (int i = 0; i < 50; i++)
        hd_histogram_observe(s, 0.00003 * i * i);
    hd_metrics_family(m, HD_METRIC_HISTOGRAM, "hidetd_compile_seconds", "Compile", "arch", NULL,
                      hd_metrics_duration_buckets, hd_metrics_duration_buckets_n, &f);
    hd_metric_family_series(f, "sm_90", NULL, &s);
    hd_histogram_observe(s, 0.7);
    hd_metrics_family(m, HD_METRIC_GAUGE, "hidetd_empty", "no series", "a", NULL, NULL, 0, &f);
    if (hd_metrics_render(m, &t, NULL) < 0) {
        hd_metrics_free(m);
        return 1;
    }
    fputs(t, stdout);
    free(t);
    hd_metrics_free(m);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--dump") == 0)
        return dump();
    test_empty();
    test_exact();
    test_numbers();
    test_errors();
    if (failures) {
        fprintf(stderr, "test_metrics: %d check(s) failed\n", failures);
        return 1;
    }
    printf("test_metrics: ok\n");
    return 0;
}
