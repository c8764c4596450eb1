/* clients/c/hidetctl_warm.c - hidetctl warm FILE... : sends many kernel requests, as a framework's
 * startup manifest would, so that later requests are cache hits.
 *
 * A file holds one request (a JSON object, however laid out), a JSON array of requests, or one
 * request per line (JSON Lines; blank lines are skipped); "-" is standard input. Every request is
 * sent with "wait":true (the point is to have the kernel) and --arch/--tune applied, by a few
 * threads at once (--parallel, default 4: enough to keep the daemon's compile pool busy without
 * using up this client's share of its job queue). Each failure is reported as it happens with
 * where it came from (FILE:LINE or FILE[INDEX]) and the daemon's own error; a progress bar is
 * drawn only when stderr is a terminal; a summary (hits, tuned, failed, time) ends the run.
 */
#include "clients/c/hidetctl_internal.h"

#include "hidet/client.h"
#include "op/op.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>

enum { W_PENDING = 0, W_HIT, W_TUNED, W_FAILED };

typedef struct warm_item {
    char where[320]; /* "FILE:LINE", "FILE[INDEX]" or "FILE" */
    char *json;      /* the request to send; NULL when the input could not be read as one */
    char *error;     /* why it failed, once it has */
    int outcome;
} warm_item;

typedef struct warm_run {
    const opts *o;
    warm_item *items;
    size_t n, cap;
    pthread_mutex_t lock;
    size_t next;            /* the next item to send */
    size_t done, hits, tuned, failed;
    size_t warned;          /* answers with a warning (tune measure answered by the model) */
    char warning[256];      /* the first such warning */
    bool connect_failed;    /* the daemon is not there: send nothing more */
    int connect_rc;
    bool tty;
} warm_run;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Appends an item; json (taken) or error (copied) says whether it can be sent. */
static int add_item(warm_run *w, const char *where, char *json, const char *error)
{
    if (w->n == w->cap) {
        size_t nc = w->cap ? 2 * w->cap : 64;
        warm_item *v = realloc(w->items, nc * sizeof(*v));
        if (!v) {
            free(json);
            return -ENOMEM;
        }
        w->items = v;
        w->cap = nc;
    }
    warm_item *it = &w->items[w->n++];
    memset(it, 0, sizeof(*it));
    snprintf(it->where, sizeof(it->where), "%s", where);
    it->json = json;
    if (error) {
        it->error = strdup(error);
        it->outcome = W_FAILED;
    }
    return 0;
}

/* A request object, made ready to send: options applied, waiting for the kernel. */
static int add_request(warm_run *w, const char *where, cJSON *req)
{
    if (!cJSON_IsObject(req))
        return add_item(w, where, NULL, "not a JSON object (a request is {\"op\": ...})");
    /* A model graph is a request of another route, with a plan for an answer. */
    if (cJSON_GetObjectItemCaseSensitive(req, "graph") && !cJSON_GetObjectItemCaseSensitive(req, "op"))
        return add_item(w, where, NULL,
                        "a graph request: warm sends kernel requests ({\"op\": ...}); send a graph "
                        "with 'hidetctl graph FILE', which resolves (and tunes) each of its kernels");
    apply_opts(req, w->o, false);
    cJSON_DeleteItemFromObjectCaseSensitive(req, "wait");
    cJSON_AddBoolToObject(req, "wait", true);
    char *s = cJSON_PrintUnformatted(req);
    return s ? add_item(w, where, s, NULL) : -ENOMEM;
}

/* Line number (from 1) of offset off in text. */
static int line_of(const char *text, size_t off)
{
    int line = 1;
    for (size_t i = 0; i < off && text[i]; i++)
        line += text[i] == '\n';
    return line;
}

/* Splits one input file into items: an array, one object, or JSON Lines. */
static int read_manifest(warm_run *w, const char *path, const char *text)
{
    const char *name = strcmp(path, "-") == 0 ? "<stdin>" : path;
    const char *p = text, *end = NULL;
    char where[320];
    int r = 0;

    while (isspace((unsigned char)*p))
        p++;
    if (!*p)
        return 0;
    cJSON *all = cJSON_ParseWithOpts(p, &end, true);
    /* Where the whole-document parse stopped, read before another parse replaces it. */
    const char *stop = all ? NULL : cJSON_GetErrorPtr();
    if (cJSON_IsArray(all)) {
        int i = 0;
        for (cJSON *e = all->child; e && r == 0; e = e->next, i++) {
            snprintf(where, sizeof(where), "%s[%d]", name, i);
            r = add_request(w, where, e);
        }
        cJSON_Delete(all);
        return r;
    }
    if (all) {
        r = add_request(w, name, all);
        cJSON_Delete(all);
        return r;
    }
    /* Not one JSON value: one request per line, if the first line is one on its own; else a
     * single broken document, reported once rather than line by line. */
    char *copy = strdup(p);
    if (!copy)
        return -ENOMEM;
    int first_line = line_of(text, (size_t)(p - text));
    bool lines = false;
    {
        char *nl = strchr(copy, '\n');
        if (nl) {
            *nl = '\0';
            cJSON *first = cJSON_Parse(copy);
            lines = cJSON_IsObject(first);
            cJSON_Delete(first);
            *nl = '\n';
        }
    }
    if (!lines) {
        int line = stop && stop >= p && stop <= p + strlen(p) ? line_of(text, (size_t)(stop - text))
                                                              : first_line;
        snprintf(where, sizeof(where), "%s:%d", name, line);
        free(copy);
        return add_item(w, where, NULL,
                        "not JSON (a file holds one request, a JSON array of requests, or one "
                        "request per line)");
    }
    int line = first_line;
    for (char *s = copy;; line++) {
        char *nl = strchr(s, '\n');
        if (nl)
            *nl = '\0';
        const char *q = s;
        while (isspace((unsigned char)*q))
            q++;
        if (*q) {
            snprintf(where, sizeof(where), "%s:%d", name, line);
            cJSON *req = cJSON_Parse(q);
            r = req ? add_request(w, where, req) : add_item(w, where, NULL, "not JSON");
            cJSON_Delete(req);
            if (r < 0)
                break;
        }
        if (!nl)
            break;
        s = nl + 1;
    }
    free(copy);
    return r;
}

/* Redraws the progress line (stderr is a terminal; the lock is held). */
static void draw(const warm_run *w)
{
    char bar[64];
    progress_bar((int64_t)w->done, (int64_t)w->n, bar, sizeof(bar));
    fprintf(stderr, "\r\033[K%s  %zu hits, %zu tuned, %zu failed", bar, w->hits, w->tuned,
            w->failed);
    fflush(stderr);
}

/* Records an outcome (lock held) and, for a failure sent or not, prints it now. */
static void finish_item(warm_run *w, warm_item *it, int outcome, const char *error)
{
    it->outcome = outcome;
    w->done++;
    if (outcome == W_HIT)
        w->hits++;
    else if (outcome == W_TUNED)
        w->tuned++;
    else
        w->failed++;
    if (outcome == W_FAILED) {
        if (!it->error)
            it->error = strdup(error ? error : "failed");
        if (!w->o->json) {
            char *t = safe_text(it->error);
            fprintf(stderr, "%shidetctl: warm: %s: %s\n", w->tty ? "\r\033[K" : "", it->where,
                    t ? t : "");
            free(t);
        }
    }
    if (w->tty && !w->o->json)
        draw(w);
}

/* One sending thread and its own client (a client is not for concurrent use). */
typedef struct warm_worker {
    warm_run *w;
    hidet_client *c;
    pthread_t thread;
} warm_worker;

static void *worker(void *arg)
{
    warm_run *w = ((warm_worker *)arg)->w;
    hidet_client *c = ((warm_worker *)arg)->c;
    hidet_error e;

    for (;;) {
        pthread_mutex_lock(&w->lock);
        while (w->next < w->n && w->items[w->next].outcome != W_PENDING)
            w->next++;
        if (w->next >= w->n || w->connect_failed) {
            pthread_mutex_unlock(&w->lock);
            break;
        }
        warm_item *it = &w->items[w->next++];
        pthread_mutex_unlock(&w->lock);

        hidet_kernel_set *set = NULL;
        hidet_job *job = NULL;
        hidet_dispatch *table = NULL;
        int r;
        /* A request with named dims is answered with a dispatch table: warming it compiles its
         * generic set (and has the daemon tune its hints' ranges, as jobs). */
        cJSON *req = cJSON_Parse(it->json);
        const bool dynamic = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(req, "dims"));
        cJSON_Delete(req);
        if (dynamic) {
            r = hidet_request_dispatch(c, it->json, &table, &e);
            if (r == 0)
                set = table->generic;
        } else {
            r = hidet_request_kernels(c, it->json, &set, &job, &e);
        }
        char msg[1024];
        int outcome = W_FAILED;
        if (r == 0 && set && set->warning) {
            pthread_mutex_lock(&w->lock);
            if (!w->warned++)
                snprintf(w->warning, sizeof(w->warning), "%s", set->warning);
            pthread_mutex_unlock(&w->lock);
        }
        if (r == 0 && set)
            outcome = set->cached || strcmp(set->origin, "local") == 0 ||
                              strcmp(set->origin, "remote") == 0
                          ? W_HIT
                          : W_TUNED;
        else if (r == 0)
            snprintf(msg, sizeof(msg), "the daemon queued job %s instead of answering",
                     job ? job->id : "?");
        else
            describe_error(&e, msg, sizeof(msg));
        if (table)
            hidet_dispatch_free(table); /* its generic set with it */
        else
            hidet_kernel_set_free(set);
        hidet_job_free(job);

        pthread_mutex_lock(&w->lock);
        if (r == -ECONNREFUSED && !w->connect_failed) {
            /* Nothing more can be sent; the one message says why, once. */
            w->connect_failed = true;
            w->connect_rc = client_exit(r, &e);
            if (w->tty && !w->o->json)
                fputs("\r\033[K", stderr);
            fail(EXIT_CONNECT, "%s", msg); /* the item stays pending: not sent */
        } else if (r != -ECONNREFUSED) {
            finish_item(w, it, outcome, msg);
        }
        pthread_mutex_unlock(&w->lock);
    }
    return NULL;
}

int cmd_warm(const opts *o, int argc, char **argv)
{
    warm_run w = {.o = o};
    int rc;
    long parallel = 4;

    if ((rc = only_opts(o, OPT_ARCH | OPT_TUNE | OPT_PARALLEL, "warm")))
        return rc;
    if (argc < 1)
        return usage_error("'warm' takes one or more FILEs of requests (- for stdin)");
    if (o->parallel) {
        char *end = NULL;
        parallel = strtol(o->parallel, &end, 10);
        if (!end || *end || parallel < 1 || parallel > 64)
            return usage_error("--parallel must be a number from 1 to 64");
    }
    for (int i = 0; i < argc; i++) {
        char *text = NULL;
        int r = read_text_file(argv[i], &text);
        if (r < 0) {
            rc = usage_error("cannot read %s: %s", argv[i], strerror(-r));
            goto out;
        }
        r = read_manifest(&w, argv[i], text);
        free(text);
        if (r < 0) {
            fail(EXIT_DAEMON, "out of memory");
            rc = EXIT_DAEMON;
            goto out;
        }
    }
    if (w.n == 0) {
        rc = usage_error("no requests in %s%s", argv[0], argc > 1 ? " ..." : "");
        goto out;
    }
    w.tty = isatty(STDERR_FILENO);
    pthread_mutex_init(&w.lock, NULL);
    /* Input that could not be read is reported first, before anything is sent. */
    for (size_t i = 0; i < w.n; i++) {
        if (w.items[i].outcome == W_FAILED) {
            w.items[i].outcome = W_PENDING;
            finish_item(&w, &w.items[i], W_FAILED, NULL);
        }
    }
    /* The clients are made here, before any thread runs: the first one initialises libcurl,
     * which must not happen on several threads at once. A bad --url fails here, once. */
    size_t nthreads = (size_t)parallel < w.n ? (size_t)parallel : w.n;
    warm_worker ws[64] = {0};
    for (size_t i = 0; i < nthreads; i++) {
        ws[i].w = &w;
        if ((rc = open_client(o, &ws[i].c))) {
            for (size_t k = 0; k < i; k++)
                hidet_client_free(ws[k].c);
            pthread_mutex_destroy(&w.lock);
            goto out;
        }
    }
    double t0 = now_s();
    size_t started = 0;
    for (; started < nthreads; started++)
        if (pthread_create(&ws[started].thread, NULL, worker, &ws[started]) != 0)
            break;
    if (started == 0)
        worker(&ws[0]);
    for (size_t i = 0; i < started; i++)
        pthread_join(ws[i].thread, NULL);
    double secs = now_s() - t0;
    for (size_t i = 0; i < nthreads; i++)
        hidet_client_free(ws[i].c);
    pthread_mutex_destroy(&w.lock);
    if (w.tty && !o->json)
        fputs("\r\033[K", stderr);
    size_t unsent = w.n - w.done;

    if (o->json) {
        cJSON *j = cJSON_CreateObject(), *errs;
        cJSON_AddNumberToObject(j, "requests", (double)w.n);
        cJSON_AddNumberToObject(j, "hits", (double)w.hits);
        cJSON_AddNumberToObject(j, "tuned", (double)w.tuned);
        cJSON_AddNumberToObject(j, "failed", (double)w.failed);
        cJSON_AddNumberToObject(j, "not_sent", (double)unsent);
        cJSON_AddNumberToObject(j, "warned", (double)w.warned);
        cJSON_AddNumberToObject(j, "seconds", secs);
        errs = cJSON_AddArrayToObject(j, "errors");
        for (size_t i = 0; i < w.n; i++) {
            if (w.items[i].outcome != W_FAILED)
                continue;
            cJSON *e = cJSON_CreateObject();
            char *t = safe_text(w.items[i].where), *m = safe_text(w.items[i].error);
            cJSON_AddStringToObject(e, "where", t ? t : "");
            cJSON_AddStringToObject(e, "message", m ? m : "");
            free(t);
            free(m);
            cJSON_AddItemToArray(errs, e);
        }
        print_json(j);
        cJSON_Delete(j);
    } else {
        printf("warm: %zu request%s in %.1f s: %zu hit%s, %zu tuned, %zu failed", w.n,
               w.n == 1 ? "" : "s", secs, w.hits, w.hits == 1 ? "" : "s", w.tuned, w.failed);
        if (unsent)
            printf(", %zu not sent", unsent);
        printf("\n");
        if (w.warned) {
            /* As kernel and graph print it: e.g. tune measure answered by the cost model. */
            char *t = safe_text(w.warning);
            printf("warning: %zu answer%s: %s\n", w.warned, w.warned == 1 ? "" : "s",
                   t ? t : "?");
            free(t);
        }
    }
    rc = w.connect_failed ? w.connect_rc : w.failed ? EXIT_DAEMON : EXIT_OK;
out:
    for (size_t i = 0; i < w.n; i++) {
        free(w.items[i].json);
        free(w.items[i].error);
    }
    free(w.items);
    return rc;
}
