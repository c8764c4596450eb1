/* clients/c/hidetctl_daemon.c - hidetctl's daemon commands: kernel, space, status, stats, jobs
 * and cancel, each one or more requests to hidetd through libhidet-client (Unix socket or --url),
 * printed for people or as the daemon's JSON with --json; and the helpers the other command files
 * share for talking to the daemon (the status query, error lines, request files).
 */
#include "clients/c/hidetctl_internal.h"

#include "hidet/client.h"
#include "op/op.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>

int client_exit(int r, const hidet_error *e)
{
    if (r == -ECONNREFUSED)
        return EXIT_CONNECT;
    if (e->http_status == 404 || (r == -ENOENT && e->http_status == 0))
        return EXIT_NOT_FOUND;
    return EXIT_DAEMON;
}

static int report(int r, const hidet_error *e, const opts *o)
{
    /* No answer (cannot connect, a broken connection): a local error like any other. */
    if (e->http_status == 0)
        return fail(client_exit(r, e), "%s", e->message[0] ? e->message : strerror(-r));
    if (o->json) {
        print_json_error(e->code[0] ? e->code : "client", e->message, e->field, e->http_status);
    } else {
        char line[1024];
        describe_error(e, line, sizeof(line));
        fprintf(stderr, "hidetctl: %s\n", line[0] ? line : strerror(-r));
    }
    return client_exit(r, e);
}

void describe_error(const hidet_error *e, char *buf, size_t len)
{
    if (e->http_status)
        snprintf(buf, len, "hidetd answered %d%s%s: %s%s%s%s", e->http_status,
                 e->code[0] ? " " : "", e->code, e->message, e->field[0] ? " (field " : "",
                 e->field, e->field[0] ? ")" : "");
    else
        snprintf(buf, len, "%s", e->message);
}

/* --url, else --socket, else libhidet-client's default address (hidet_default_address(): the
 * rule every client shares, so hidetctl finds the daemon that the library and the Python helper
 * find). */
int open_client(const opts *o, hidet_client **ret)
{
    hidet_error e;
    int r = hidet_client_open(o->url ? o->url : o->socket, o->token, ret, &e);

    if (r < 0)
        return fail(r == -EINVAL ? EXIT_USAGE : EXIT_DAEMON, "%s", e.message);
    return 0;
}

int daemon_status(const opts *o, long timeout_ms, cJSON **ret, hidet_error *err)
{
    hidet_client *c = NULL;
    char *body = NULL;
    cJSON *j = NULL;
    int r = hidet_client_open(o->url ? o->url : o->socket, o->token, &c, err);

    if (r == 0) {
        hidet_client_set_timeout(c, timeout_ms);
        r = hidet_get(c, "/v1/status", &body, NULL, err);
    }
    if (r == 0) {
        j = cJSON_Parse(body);
        if (!cJSON_IsObject(j)) {
            memset(err, 0, sizeof(*err));
            snprintf(err->message, sizeof(err->message), "the status answer is not JSON");
            r = -EPROTO;
        }
    }
    free(body);
    hidet_client_free(c);
    if (r < 0) {
        cJSON_Delete(j);
        return r;
    }
    *ret = j;
    return 0;
}

int read_text_file(const char *path, char **ret)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0;

    if (!f)
        return -errno;
    for (;;) {
        if (cap - len < 4096) {
            size_t nc = cap ? cap * 2 : 8192;
            char *nb = realloc(buf, nc);
            if (!nb) {
                free(buf);
                if (f != stdin)
                    fclose(f);
                return -ENOMEM;
            }
            buf = nb;
            cap = nc;
        }
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0)
            break;
    }
    int bad = ferror(f);
    if (f != stdin)
        fclose(f);
    if (bad) {
        free(buf);
        return -EIO;
    }
    buf[len] = '\0';
    *ret = buf;
    return 0;
}

static int write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -errno;
    size_t n = fwrite(data, 1, len, f);
    int r = fclose(f);
    return n == len && r == 0 ? 0 : -EIO;
}

/* Reads a request file and applies --arch/--tune/--no-wait; *ret is the JSON text. */
static int load_request(const char *path, const opts *o, bool for_space, char **ret)
{
    char *text = NULL;
    cJSON *j;
    int r = read_text_file(path, &text);

    if (r < 0) {
        return fail(EXIT_USAGE, "cannot read %s: %s", path, strerror(-r));
    }
    j = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return fail(EXIT_USAGE, "%s is not a JSON object", path);
    }
    apply_opts(j, o, for_space);
    *ret = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return *ret ? 0 : EXIT_DAEMON;
}

void apply_opts(cJSON *j, const opts *o, bool for_space)
{
    if (o->arch) {
        cJSON_DeleteItemFromObjectCaseSensitive(j, "arch");
        cJSON_AddStringToObject(j, "arch", o->arch);
    }
    if (!for_space && o->tune) {
        cJSON_DeleteItemFromObjectCaseSensitive(j, "tune");
        cJSON_AddStringToObject(j, "tune", o->tune);
    }
    if (!for_space && o->no_wait) {
        cJSON_DeleteItemFromObjectCaseSensitive(j, "wait");
        cJSON_AddBoolToObject(j, "wait", false);
    }
}

/* "n=2304" for a job's timed_at.top or .middle object (names and sizes), into out. */
static void fmt_sizes(const cJSON *at, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = '\0';
    const cJSON *d;
    cJSON_ArrayForEach(d, at) {
        if (cJSON_IsNumber(d) && d->string && o < cap)
            o += (size_t)snprintf(out + o, cap - o, "%s%s=%lld", o ? "," : "", d->string, (long long)d->valuedouble);
    }
}

/* A measured range job's line (docs/api.md, GET /v1/jobs): where its candidates were timed, the
 * best's times there, and how far from the best candidate anywhere in the range it runs. */
static void print_job_range(const hidet_job *j)
{
    cJSON *root = j->json ? cJSON_Parse(j->json) : NULL;
    const cJSON *at = cJSON_GetObjectItemCaseSensitive(root, "timed_at");
    if (cJSON_IsObject(at)) {
        char top[96], mid[96], best[32], best_mid[32];
        fmt_sizes(cJSON_GetObjectItemCaseSensitive(at, "top"), top, sizeof(top));
        fmt_sizes(cJSON_GetObjectItemCaseSensitive(at, "middle"), mid, sizeof(mid));
        const cJSON *bm = cJSON_GetObjectItemCaseSensitive(root, "best_middle_us");
        const cJSON *rw = cJSON_GetObjectItemCaseSensitive(root, "range_worst");
        fmt_us(j->best_us, best, sizeof(best));
        fmt_us(cJSON_IsNumber(bm) ? bm->valuedouble : -1, best_mid, sizeof(best_mid));
        printf("  a range: timed at %s (top) and %s (middle), the best %s and %s there", top, mid, best, best_mid);
        if (cJSON_IsNumber(rw))
            printf("; at worst %.3fx the best candidate at a size of the range", rw->valuedouble);
        printf("\n");
    }
    cJSON_Delete(root);
}

static void print_job_human(const hidet_job *j)
{
    char bar[64], best[32];
    progress_bar(j->done, j->total, bar, sizeof(bar));
    fmt_us(j->best_us, best, sizeof(best));
    printf("job %s: %s  %s %s tune=%s priority=%s\n", j->id, hidet_job_state_name(j->state),
           j->op, j->arch, j->tune, j->priority);
    printf("  candidates %s", bar);
    if (j->failed)
        printf(" (%lld failed)", (long long)j->failed);
    printf("\n  best so far %s, elapsed %.1f s, %lld waiting\n", best, j->elapsed_s,
           (long long)j->waiters);
    print_job_range(j);
    if (j->result)
        printf("  result %s%s\n", j->result, j->measured ? " (measured)" : "");
    if (j->warning)
        printf("  warning: %s\n", j->warning);
    if (j->error_message)
        printf("  error %s: %s\n", j->error_code, j->error_message);
}

static bool request_says_no_wait(const char *req)
{
    cJSON *j = cJSON_Parse(req);
    bool no_wait = cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "wait"));
    cJSON_Delete(j);
    return no_wait;
}

static char *with_wait_false(const char *req)
{
    cJSON *j = cJSON_Parse(req);
    char *s = NULL;
    if (cJSON_IsObject(j)) {
        cJSON_DeleteItemFromObjectCaseSensitive(j, "wait");
        cJSON_AddBoolToObject(j, "wait", false);
        s = cJSON_PrintUnformatted(j);
    }
    cJSON_Delete(j);
    return s;
}

/* Polls a job (twice a second) with a progress line on stderr until it ends; on success *ret
 * is its kernel set. Returns an exit code, the failure reported. */
static int follow_job(hidet_client *c, const hidet_job *first, hidet_kernel_set **ret,
                      const opts *o)
{
    hidet_job *j = NULL;
    hidet_error e;
    char id[32];
    int r, rc;

    snprintf(id, sizeof(id), "%s", first->id);
    for (;;) {
        r = hidet_job_get(c, id, &j, &e);
        if (r < 0) {
            fputs("\r\033[K", stderr);
            return report(r, &e, o);
        }
        if (j->state != HIDET_JOB_QUEUED && j->state != HIDET_JOB_RUNNING)
            break;
        char bar[64], best[32];
        progress_bar(j->done, j->total, bar, sizeof(bar));
        fmt_us(j->best_us, best, sizeof(best));
        fprintf(stderr, "\r\033[Kjob %s %s: candidates %s, best %s, %.1f s", j->id,
                hidet_job_state_name(j->state), bar, best, j->elapsed_s);
        fflush(stderr);
        hidet_job_free(j);
        j = NULL;
        struct timespec ts = {0, 500000000L};
        nanosleep(&ts, NULL);
    }
    fputs("\r\033[K", stderr);
    if (j->state == HIDET_JOB_DONE && j->result_key[0]) {
        fprintf(stderr, "job %s done: %lld candidates in %.1f s\n", j->id, (long long)j->total,
                j->elapsed_s);
        r = hidet_kernel_set_get(c, j->result_key, ret, &e);
        rc = r < 0 ? report(r, &e, o) : EXIT_OK;
        if (r == 0) {
            /* Fetched by key it reads as stored; for this request it was built just now. */
            (*ret)->cached = false;
            snprintf((*ret)->origin, sizeof((*ret)->origin), "tuned");
        }
    } else {
        fail(EXIT_DAEMON, "job %s %s%s%s%s%s", j->id, hidet_job_state_name(j->state),
             j->error_code[0] ? ": " : "", j->error_code, j->error_message ? ": " : "",
             j->error_message ? j->error_message : "");
        rc = EXIT_DAEMON;
    }
    hidet_job_free(j);
    return rc;
}

/* A grid dimension: its number, or its rule as a formula ("112*ceil(n/128)", "min(40,
 * ceil(3*b*s/64))"). */
static void fmt_grid_dim(const hidet_kernel_set *set, size_t k, int d, char *buf, size_t len)
{
    const hidet_grid_rule *r = set->kernel_dims ? &set->kernel_dims[k].grid[d] : NULL;
    char names[HIDET_MAX_DIMS * HIDET_DIM_NAME_LEN] = "", coef[32] = "", mul[32] = "", f[160];
    if (!r || !r->dims) {
        snprintf(buf, len, "%u", set->kernels[k].grid[d]);
        return;
    }
    for (int j = 0; j < set->n_dims; j++)
        if (r->dims & (1u << j))
            snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
                     names[0] ? "*" : "", set->dims[j].name);
    if (r->coef != 1)
        snprintf(coef, sizeof(coef), "%lld*", (long long)r->coef);
    if (r->mul != 1)
        snprintf(mul, sizeof(mul), "%lld*", (long long)r->mul);
    if (r->div != 1)
        snprintf(f, sizeof(f), "%sceil(%s%s/%lld)", mul, coef, names, (long long)r->div);
    else
        snprintf(f, sizeof(f), "%s%s%s", mul, coef, names);
    if (r->cap > 0)
        snprintf(buf, len, "min(%lld,%s)", (long long)r->cap, f);
    else
        snprintf(buf, len, "%s", f);
}

/* "n 1..8192, b 1..8 (multiple of 8)" */
static void print_dims(const hidet_dim *dims, int n)
{
    printf("dims       ");
    for (int k = 0; k < n; k++) {
        printf("%s%s %lld..%lld", k ? ", " : "", dims[k].name, (long long)dims[k].min,
               (long long)dims[k].max);
        if (dims[k].multiple_of > 1)
            printf(" (multiple of %lld)", (long long)dims[k].multiple_of);
    }
    printf("\n");
}

/* "[n,14336] f16", a named axis by its name(s). */
static void print_shape(const char *label, const hidet_dim *dims, int n_dims, int rank,
                        const int64_t *shape, const unsigned *sym, const char *dtype)
{
    printf("%s[", label);
    for (int i = 0; i < rank; i++) {
        printf("%s", i ? "," : "");
        if (!sym[i]) {
            printf("%lld", (long long)shape[i]);
            continue;
        }
        bool first = true;
        for (int k = 0; k < n_dims; k++)
            if (sym[i] & (1u << k)) {
                printf("%s%s", first ? "" : "*", dims[k].name);
                first = false;
            }
    }
    printf("] %s\n", dtype);
}

static void print_kernel_set(const hidet_kernel_set *set)
{
    char lat[32], pred[32];
    fmt_us(set->latency_us, lat, sizeof(lat));
    fmt_us(set->predicted_us, pred, sizeof(pred));
    printf("key        %s\n", set->key);
    printf("op         %s on %s, %s%s\n", set->op, set->arch,
           !strcmp(set->origin, "remote") ? "from the cluster tier"
           : set->cached                  ? "from the cache"
                                          : "newly built",
           set->measured ? ", measured" : ", ranked by the cost model");
    printf("latency    %s (predicted %s)\n", lat, pred);
    if (set->n_dims > 0)
        print_dims(set->dims, set->n_dims);
    if (set->output_rank > 0)
        print_shape("output     ", set->dims, set->n_dims, set->output_rank, set->output_shape,
                    set->output_dims, set->output_dtype);
    printf("workspace  %llu bytes\n", (unsigned long long)set->workspace_bytes);
    if (set->warning)
        printf("warning    %s\n", set->warning);
    table t = {.ncols = 6, .align = "lrrrrl"};
    table_row(&t, "KERNEL", "GRID", "BLOCK", "SHARED", "LATENCY", "PARAMS");
    for (size_t i = 0; i < set->n_kernels; i++) {
        const hidet_kernel *k = &set->kernels[i];
        char g[620], b[64], sh[32], kl[32], params[512] = "";
        char gd[3][200];
        for (int d = 0; d < 3; d++)
            fmt_grid_dim(set, i, d, gd[d], sizeof(gd[d]));
        snprintf(g, sizeof(g), "%s,%s,%s", gd[0], gd[1], gd[2]);
        snprintf(b, sizeof(b), "%u,%u,%u", k->block[0], k->block[1], k->block[2]);
        fmt_size(k->shared_bytes, sh, sizeof(sh));
        fmt_us(k->latency_us, kl, sizeof(kl));
        for (size_t p = 0; p < k->n_params; p++) {
            size_t used = strlen(params);
            /* A size parameter by its dim: "n:int". */
            const int dim = set->kernel_dims && set->kernel_dims[i].param_dim
                                ? set->kernel_dims[i].param_dim[p] : -1;
            snprintf(params + used, sizeof(params) - used, "%s%s%s", p ? " " : "",
                     dim >= 0 ? set->dims[dim].name : k->params[p].buffer, dim >= 0 ? ":int" : "");
        }
        table_row(&t, k->name, g, b, sh, kl, params);
    }
    printf("\n");
    table_print(&t, stdout);
    table_free(&t);
}

/* A dispatch table: the table's dims and output, each entry's range and state, and the generic
 * set that serves every size whose entry is not ready. */
static void print_dispatch(const hidet_dispatch *d)
{
    printf("op         %s on %s, a dispatch table of %zu entries\n", d->op, d->arch, d->n_entries);
    print_dims(d->dims, d->n_dims);
    if (d->output_rank > 0)
        print_shape("output     ", d->dims, d->n_dims, d->output_rank, d->output_shape,
                    d->output_dims, d->output_dtype);
    table t = {.ncols = 3, .align = "lll"};
    table_row(&t, "RANGES", "STATE", "KERNEL SET / JOB");
    for (size_t i = 0; i < d->n_entries; i++) {
        const hidet_dispatch_entry *e = &d->entries[i];
        char ranges[160] = "";
        for (int k = 0; k < d->n_dims; k++)
            snprintf(ranges + strlen(ranges), sizeof(ranges) - strlen(ranges), "%s%s %lld..%lld",
                     k ? ", " : "", d->dims[k].name, (long long)e->lo[k], (long long)e->hi[k]);
        table_row(&t, ranges, e->state_name,
                  e->kernel_set ? e->kernel_set->key : e->job ? e->job : "-");
    }
    printf("\n");
    table_print(&t, stdout);
    table_free(&t);
    printf("\ngeneric (every size whose entry is not ready):\n");
    print_kernel_set(d->generic);
}

static bool request_names_dims(const char *req)
{
    cJSON *j = cJSON_Parse(req);
    bool dims = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(j, "dims"));
    cJSON_Delete(j);
    return dims;
}

/* 'kernel' for a request that names dims: the dispatch table printed (the generic set's PTX and
 * cubin written where asked). The answer waits only for the generic set, so nothing is followed. */
static int kernel_dispatch(const opts *o, hidet_client *c, const char *req)
{
    hidet_dispatch *d = NULL;
    hidet_error e;
    int r = hidet_request_dispatch(c, req, &d, &e);
    if (r < 0)
        return report(r, &e, o);
    const char *what[2] = {o->ptx, o->cubin};
    for (int i = 0; i < 2; i++) {
        void *data = NULL;
        size_t len = 0;
        if (!what[i])
            continue;
        r = i == 0 ? hidet_fetch_ptx(c, d->generic->key, (char **)&data, &len, &e)
                   : hidet_fetch_cubin(c, d->generic->key, &data, &len, &e);
        if (r < 0) {
            hidet_dispatch_free(d);
            return report(r, &e, o);
        }
        r = write_file(what[i], data, len);
        free(data);
        if (r < 0) {
            fail(EXIT_DAEMON, "cannot write %s: %s", what[i], strerror(-r));
            hidet_dispatch_free(d);
            return EXIT_DAEMON;
        }
    }
    if (o->json)
        puts(d->json);
    else
        print_dispatch(d);
    hidet_dispatch_free(d);
    return EXIT_OK;
}

int cmd_kernel(const opts *o, int argc, char **argv)
{
    hidet_client *c = NULL;
    hidet_kernel_set *set = NULL;
    hidet_job *job = NULL;
    hidet_error e;
    char *req = NULL;
    int rc, r;

    if ((rc = only_opts(o, OPT_ARCH | OPT_TUNE | OPT_NO_WAIT | OPT_PTX | OPT_CUBIN, "kernel")))
        return rc;
    if (argc != 1)
        return usage_error("'kernel' takes one REQUEST.json");
    if (o->no_wait && (o->ptx || o->cubin))
        return usage_error("--ptx and --cubin need the kernel now; drop --no-wait");
    if ((rc = load_request(argv[0], o, false, &req)))
        return rc;
    if ((rc = open_client(o, &c))) {
        free(req);
        return rc;
    }
    if (request_names_dims(req)) {
        rc = kernel_dispatch(o, c, req);
        free(req);
        hidet_client_free(c);
        return rc;
    }
    /* On a terminal a blocking request is sent as a job and followed, so that a tuning run of
     * minutes shows its progress instead of a silent wait; the answer is the same. */
    bool follow = !o->json && !o->no_wait && isatty(STDERR_FILENO) && !request_says_no_wait(req);
    if (follow) {
        char *nr = with_wait_false(req);
        if (nr) {
            free(req);
            req = nr;
        } else {
            follow = false;
        }
    }
    r = hidet_request_kernels(c, req, &set, &job, &e);
    free(req);
    if (r < 0) {
        rc = report(r, &e, o);
        goto out;
    }
    if (job && follow) {
        rc = follow_job(c, job, &set, o);
        hidet_job_free(job);
        job = NULL;
        if (rc != EXIT_OK)
            goto out;
    }
    if (job) {
        if (o->json) {
            cJSON *j = cJSON_Parse(job->json), *w = cJSON_CreateObject();
            cJSON_AddItemToObject(w, "job", j);
            print_json(w);
            cJSON_Delete(w);
        } else {
            printf("queued as job %s; follow it with: hidetctl jobs %s --watch\n", job->id,
                   job->id);
        }
        rc = EXIT_OK;
        goto out;
    }
    if (o->ptx || o->cubin) {
        const char *what[2] = {o->ptx, o->cubin};
        for (int i = 0; i < 2; i++) {
            void *data = NULL;
            size_t len = 0;
            if (!what[i])
                continue;
            r = i == 0 ? hidet_fetch_ptx(c, set->key, (char **)&data, &len, &e)
                       : hidet_fetch_cubin(c, set->key, &data, &len, &e);
            if (r < 0) {
                rc = report(r, &e, o);
                goto out;
            }
            r = write_file(what[i], data, len);
            free(data);
            if (r < 0) {
                fail(EXIT_DAEMON, "cannot write %s: %s", what[i], strerror(-r));
                rc = EXIT_DAEMON;
                goto out;
            }
        }
    }
    if (o->json) {
        puts(set->json);
    } else {
        print_kernel_set(set);
        if (o->ptx)
            printf("\nPTX written to %s\n", o->ptx);
        if (o->cubin)
            printf("%scubin written to %s\n", o->ptx ? "" : "\n", o->cubin);
    }
    rc = EXIT_OK;
out:
    hidet_kernel_set_free(set);
    hidet_job_free(job);
    hidet_client_free(c);
    return rc;
}

/* Loads FILE as a request (the options applied as load_request does), POSTs it to path and
 * gives back the answer's body (and its HTTP status when ret_status is not NULL): EXIT_OK, or the
 * exit code once the failure is reported. */
static int post_request_file(const opts *o, const char *file, bool for_space, const char *path,
                             int *ret_status, char **ret_body)
{
    hidet_client *c = NULL;
    hidet_error e;
    char *req = NULL;
    int rc;

    if ((rc = load_request(file, o, for_space, &req)))
        return rc;
    if ((rc = open_client(o, &c))) {
        free(req);
        return rc;
    }
    int r = hidet_post_json(c, path, req, ret_status, ret_body, NULL, &e);
    rc = r < 0 ? report(r, &e, o) : EXIT_OK;
    free(req);
    hidet_client_free(c);
    return rc;
}

int cmd_space(const opts *o, int argc, char **argv)
{
    char *body = NULL;
    cJSON *j = NULL;
    int rc;

    if ((rc = only_opts(o, OPT_ARCH | OPT_LIMIT, "space")))
        return rc;
    if (argc != 1)
        return usage_error("'space' takes one REQUEST.json");
    if ((rc = post_request_file(o, argv[0], true, "/v1/spaces", NULL, &body)))
        return rc;
    j = cJSON_Parse(body);
    cJSON *cands = cJSON_GetObjectItemCaseSensitive(j, "candidates");
    if (!cJSON_IsArray(cands)) {
        fail(EXIT_DAEMON, "the answer has no candidate list");
        rc = EXIT_DAEMON;
        goto out;
    }
    /* The answer is in rank order: --limit keeps its head (in --json too). */
    const int total = cJSON_GetArraySize(cands);
    while (o->limit > 0 && cJSON_GetArraySize(cands) > o->limit)
        cJSON_DeleteItemFromArray(cands, cJSON_GetArraySize(cands) - 1);
    if (o->json) {
        if (o->limit > 0)
            print_json(j);
        else
            puts(body);
        rc = EXIT_OK;
        goto out;
    }
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(j, "op");
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(j, "arch");
    const cJSON *hash = cJSON_GetObjectItemCaseSensitive(j, "space_hash");
    printf("%s on %s: %d candidates (space %s)", cJSON_IsString(op) ? op->valuestring : "?",
           cJSON_IsString(arch) ? arch->valuestring : "?", total,
           cJSON_IsString(hash) ? hash->valuestring : "?");
    if (cJSON_GetArraySize(cands) < total)
        printf(", the best %d", cJSON_GetArraySize(cands));
    printf("\n\n");
    table t = {.ncols = 5, .align = "rrlrl"};
    table_row(&t, "RANK", "INDEX", "TEMPLATE", "PREDICTED", "PARAMS");
    int rank = 0;
    for (const cJSON *cd = cands->child; cd; cd = cd->next) {
        char rk[16], idx[16], pred[32];
        const cJSON *ix = cJSON_GetObjectItemCaseSensitive(cd, "index");
        const cJSON *tp = cJSON_GetObjectItemCaseSensitive(cd, "template");
        const cJSON *pr = cJSON_GetObjectItemCaseSensitive(cd, "predicted_us");
        char *params = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(cd, "params"));
        snprintf(rk, sizeof(rk), "%d", ++rank);
        snprintf(idx, sizeof(idx), "%d", cJSON_IsNumber(ix) ? ix->valueint : -1);
        fmt_us(cJSON_IsNumber(pr) ? pr->valuedouble : -1, pred, sizeof(pred));
        table_row(&t, rk, idx, cJSON_IsString(tp) ? tp->valuestring : "?", pred,
                  params ? params : "");
        cJSON_free(params);
    }
    table_print(&t, stdout);
    table_free(&t);
    rc = EXIT_OK;
out:
    cJSON_Delete(j);
    free(body);
    return rc;
}

static const char *jstr_or(const cJSON *o, const char *name, const char *dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) ? v->valuestring : dflt;
}

static double jnum_or(const cJSON *o, const char *name, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

/* The first line of `status` and `stats`: version, uptime, whether a GPU serves. */
static void print_status_header(const cJSON *j)
{
    printf("hidetd %s, up %.0f s, GPU %s\n", jstr_or(j, "version", "?"), jnum_or(j, "uptime_s", 0),
           cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "gpu_available")) ? "available" : "not available");
}

int cmd_status(const opts *o, int argc, char **argv)
{
    hidet_client *c = NULL;
    hidet_error e;
    char *body = NULL;
    cJSON *j = NULL;
    int rc, r;

    (void)argv;
    if ((rc = only_opts(o, 0, "status")))
        return rc;
    if (argc != 0)
        return usage_error("'status' takes no arguments");
    if ((rc = open_client(o, &c)))
        return rc;
    r = hidet_get(c, "/v1/status", &body, NULL, &e);
    if (r < 0) {
        rc = report(r, &e, o);
        goto out;
    }
    if (o->json) {
        puts(body);
        rc = EXIT_OK;
        goto out;
    }
    j = cJSON_Parse(body);
    if (!cJSON_IsObject(j)) {
        fail(EXIT_DAEMON, "the status answer is not JSON");
        rc = EXIT_DAEMON;
        goto out;
    }
    print_status_header(j);
    const cJSON *jobs = cJSON_GetObjectItemCaseSensitive(j, "jobs");
    printf("jobs: %.0f queued, %.0f running, %.0f done, %.0f failed\n", jnum_or(jobs, "queued", 0),
           jnum_or(jobs, "running", 0), jnum_or(jobs, "done", 0), jnum_or(jobs, "failed", 0));
    const cJSON *cache = cJSON_GetObjectItemCaseSensitive(j, "cache");
    char sz[32];
    fmt_size((uint64_t)jnum_or(cache, "bytes", 0), sz, sizeof(sz));
    printf("cache: %.0f artifacts, %.0f selections, %.0f trials, %s (%s)\n",
           jnum_or(cache, "artifacts", 0), jnum_or(cache, "selections", 0),
           jnum_or(cache, "trials", 0), sz, jstr_or(cache, "path", "?"));
    const cJSON *workers = cJSON_GetObjectItemCaseSensitive(j, "workers");
    if (cJSON_IsArray(workers) && cJSON_GetArraySize(workers) > 0) {
        table t = {.ncols = 8, .align = "rllrrlrr"};
        table_row(&t, "GPU", "NAME", "ARCH", "SMS", "MEMORY", "STATE", "MEASURED", "RESTARTS");
        for (const cJSON *w = workers->child; w; w = w->next) {
            char idx[16], sms[16], mem[32], meas[32], rest[16];
            snprintf(idx, sizeof(idx), "%.0f", jnum_or(w, "index", -1));
            snprintf(sms, sizeof(sms), "%.0f", jnum_or(w, "sm_count", 0));
            fmt_size((uint64_t)jnum_or(w, "memory_bytes", 0), mem, sizeof(mem));
            snprintf(meas, sizeof(meas), "%.0f (%.0f failed)", jnum_or(w, "measured", 0),
                     jnum_or(w, "failed", 0));
            snprintf(rest, sizeof(rest), "%.0f", jnum_or(w, "restarts", 0));
            table_row(&t, idx, jstr_or(w, "name", "?"), jstr_or(w, "arch", "?"), sms, mem,
                      jstr_or(w, "state", "?"), meas, rest);
        }
        printf("\n");
        table_print(&t, stdout);
        table_free(&t);
        for (const cJSON *w = workers->child; w; w = w->next) {
            const char *le = jstr_or(w, "last_error", NULL);
            if (le && *le)
                printf("GPU %.0f last error: %s\n", jnum_or(w, "index", -1), le);
        }
    } else {
        printf("no GPU workers\n");
    }
    rc = EXIT_OK;
out:
    cJSON_Delete(j);
    free(body);
    hidet_client_free(c);
    return rc;
}

static bool job_active(const hidet_job *j)
{
    return j->state == HIDET_JOB_QUEUED || j->state == HIDET_JOB_RUNNING;
}

static void print_jobs_table(hidet_job **v, size_t n)
{
    table t = {.ncols = 8, .align = "rllllrrl"};
    table_row(&t, "ID", "STATE", "OP", "ARCH", "TUNE", "BEST", "ELAPSED", "PROGRESS");
    for (size_t i = 0; i < n; i++) {
        char best[32], el[32], bar[64];
        fmt_us(v[i]->best_us, best, sizeof(best));
        snprintf(el, sizeof(el), "%.1f s", v[i]->elapsed_s);
        progress_bar(v[i]->done, v[i]->total, bar, sizeof(bar));
        table_row(&t, v[i]->id, hidet_job_state_name(v[i]->state), v[i]->op, v[i]->arch,
                  v[i]->tune, best, el, bar);
    }
    table_print(&t, stdout);
    table_free(&t);
    if (n == 0)
        printf("(no jobs)\n");
}

/* Job ids are positive decimal numbers (docs/api.md): anything else is a usage error (exit 2),
 * not a question for the daemon. */
static bool job_id_ok(const char *s)
{
    size_t n = strspn(s, "0123456789");
    return n > 0 && n <= 19 && !s[n] && s[0] != '0';
}

int cmd_jobs(const opts *o, int argc, char **argv)
{
    hidet_client *c = NULL;
    hidet_error e;
    int rc, r;
    bool tty = isatty(STDOUT_FILENO);

    if ((rc = only_opts(o, OPT_WATCH, "jobs")))
        return rc;
    if (argc > 1)
        return usage_error("'jobs' takes at most one job ID");
    if (argc == 1 && !job_id_ok(argv[0]))
        return usage_error("'%s' is not a job ID (a positive number, as 'hidetctl jobs' lists)",
                           argv[0]);
    if ((rc = open_client(o, &c)))
        return rc;
    for (bool first = true;; first = false) {
        bool active = false;
        if (!first) {
            struct timespec ts = {1, 0};
            nanosleep(&ts, NULL);
        }
        if (argc == 1) {
            hidet_job *j = NULL;
            r = hidet_job_get(c, argv[0], &j, &e);
            if (r < 0) {
                rc = report(r, &e, o);
                goto out;
            }
            active = job_active(j);
            if (o->json) {
                if (!o->watch || !active) {
                    cJSON *w = cJSON_CreateObject();
                    cJSON_AddItemToObject(w, "job", cJSON_Parse(j->json));
                    print_json(w);
                    cJSON_Delete(w);
                }
            } else {
                if (o->watch && tty)
                    fputs("\033[H\033[2J", stdout);
                print_job_human(j);
            }
            hidet_job_free(j);
        } else {
            hidet_job **v = NULL;
            size_t n = 0;
            r = hidet_jobs_list(c, &v, &n, &e);
            if (r < 0) {
                rc = report(r, &e, o);
                goto out;
            }
            for (size_t i = 0; i < n; i++)
                active = active || job_active(v[i]);
            if (o->json) {
                if (!o->watch || !active) {
                    cJSON *w = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(w, "jobs");
                    for (size_t i = 0; i < n; i++)
                        cJSON_AddItemToArray(a, cJSON_Parse(v[i]->json));
                    print_json(w);
                    cJSON_Delete(w);
                }
            } else {
                if (o->watch && tty)
                    fputs("\033[H\033[2J", stdout);
                else if (!first)
                    putchar('\n');
                print_jobs_table(v, n);
            }
            hidet_jobs_free(v, n);
        }
        fflush(stdout);
        if (!o->watch || !active)
            break;
    }
    rc = EXIT_OK;
out:
    hidet_client_free(c);
    return rc;
}

int cmd_cancel(const opts *o, int argc, char **argv)
{
    hidet_client *c = NULL;
    hidet_job *j = NULL;
    hidet_error e;
    int rc, r;

    if ((rc = only_opts(o, 0, "cancel")))
        return rc;
    if (argc != 1)
        return usage_error("'cancel' takes one job ID");
    if (!job_id_ok(argv[0]))
        return usage_error("'%s' is not a job ID (a positive number, as 'hidetctl jobs' lists)",
                           argv[0]);
    if ((rc = open_client(o, &c)))
        return rc;
    r = hidet_job_cancel(c, argv[0], &j, &e);
    if (r < 0) {
        rc = report(r, &e, o);
        goto out;
    }
    if (o->json) {
        cJSON *w = cJSON_CreateObject();
        cJSON_AddItemToObject(w, "job", cJSON_Parse(j->json));
        print_json(w);
        cJSON_Delete(w);
    } else {
        printf("job %s: %s\n", j->id, hidet_job_state_name(j->state));
    }
    rc = EXIT_OK;
out:
    hidet_job_free(j);
    hidet_client_free(c);
    return rc;
}

/* One "  Label:   value" line of stats, the numbers aligned like ccache -s. */
static void stat_line(const char *label, const char *value, const char *extra)
{
    printf("  %-16s %12s%s%s\n", label, value, extra && *extra ? "  " : "", extra ? extra : "");
}

static void stat_num(const char *label, double v, const char *extra)
{
    char s[32];
    snprintf(s, sizeof(s), "%.0f", v);
    stat_line(label, s, extra);
}

int cmd_stats(const opts *o, int argc, char **argv)
{
    hidet_error e;
    cJSON *j = NULL;
    int rc, r;

    (void)argv;
    if ((rc = only_opts(o, 0, "stats")))
        return rc;
    if (argc != 0)
        return usage_error("'stats' takes no arguments");
    r = daemon_status(o, 0, &j, &e);
    if (r < 0)
        return report(r, &e, o);
    const cJSON *jobs = cJSON_GetObjectItemCaseSensitive(j, "jobs");
    const cJSON *cand = cJSON_GetObjectItemCaseSensitive(j, "candidates");
    const cJSON *cache = cJSON_GetObjectItemCaseSensitive(j, "cache");
    double hits = jnum_or(cache, "hits", 0), misses = jnum_or(cache, "misses", 0);
    double requests = hits + misses, bytes = jnum_or(cache, "bytes", 0);
    double max = jnum_or(cache, "max_bytes", 0);
    if (o->json) {
        cJSON *s = cJSON_CreateObject();
        cJSON_AddNumberToObject(s, "requests", requests);
        cJSON_AddNumberToObject(s, "hits", hits);
        cJSON_AddNumberToObject(s, "misses", misses);
        if (requests > 0)
            cJSON_AddNumberToObject(s, "hit_rate", hits / requests);
        else
            cJSON_AddNullToObject(s, "hit_rate");
        cJSON_AddItemToObject(s, "jobs", cJSON_Duplicate(jobs, true));
        cJSON_AddItemToObject(s, "candidates", cJSON_Duplicate(cand, true));
        cJSON_AddItemToObject(s, "cache", cJSON_Duplicate(cache, true));
        cJSON_AddNumberToObject(s, "uptime_s", jnum_or(j, "uptime_s", 0));
        print_json(s);
        cJSON_Delete(s);
        cJSON_Delete(j);
        return EXIT_OK;
    }
    char pct[32] = "", sz[32], mx[32], line[96];
    print_status_header(j);
    printf("Kernel requests since start:\n");
    stat_num("requests", requests, NULL);
    if (requests > 0)
        snprintf(pct, sizeof(pct), "%6.2f %%", 100.0 * hits / requests);
    stat_num("hits", hits, pct);
    if (requests > 0)
        snprintf(pct, sizeof(pct), "%6.2f %%", 100.0 * misses / requests);
    stat_num("misses (tuned)", misses, pct);
    printf("Tuning jobs:\n");
    stat_num("queued", jnum_or(jobs, "queued", 0), NULL);
    stat_num("running", jnum_or(jobs, "running", 0), NULL);
    stat_num("done", jnum_or(jobs, "done", 0), NULL);
    stat_num("failed", jnum_or(jobs, "failed", 0), NULL);
    stat_num("cancelled", jnum_or(jobs, "cancelled", 0), NULL);
    printf("Candidates:\n");
    stat_num("compiled", jnum_or(cand, "compiled", 0), NULL);
    stat_num("measured", jnum_or(cand, "measured", 0), NULL);
    stat_num("failed", jnum_or(cand, "failed", 0), NULL);
    printf("Cache %s:\n", jstr_or(cache, "path", "?"));
    stat_num("artifacts", jnum_or(cache, "artifacts", 0), NULL);
    fmt_size((uint64_t)bytes, sz, sizeof(sz));
    if (max > 0) {
        fmt_size((uint64_t)max, mx, sizeof(mx));
        snprintf(line, sizeof(line), "of %s (%.1f %%)", mx, 100.0 * bytes / max);
    } else {
        snprintf(line, sizeof(line), "(no limit)");
    }
    stat_line("size", sz, line);
    cJSON_Delete(j);
    return EXIT_OK;
}

/* "x, w1, b1 -> h3": a step's bindings in parameter order, then its output. */
static void bindings_text(const cJSON *b, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; i < 8 && n < cap; i++) {
        char key[16];
        snprintf(key, sizeof(key), "input%d", i);
        const char *name = jstr_or(b, key, NULL);
        if (!name)
            break;
        char *s = safe_text(name);
        n += (size_t)snprintf(out + n, cap - n, "%s%s", i ? ", " : "", s ? s : "?");
        free(s);
    }
    char *s = safe_text(jstr_or(b, "output", "?"));
    if (n < cap)
        n += (size_t)snprintf(out + n, cap - n, " -> %s", s ? s : "?");
    free(s);
    const char *ws = jstr_or(b, "workspace", NULL);
    if (ws && n < cap)
        snprintf(out + n, cap - n, " (+%s)", ws);
}

static void graph_steps(table *t, const cJSON *steps, const char *phase, int *number)
{
    for (const cJSON *s = steps ? steps->child : NULL; s; s = s->next) {
        char idx[24], nodes[256] = "", binds[512], kernels[256] = "";
        size_t n = 0;
        const cJSON *nd;
        cJSON_ArrayForEach(nd, cJSON_GetObjectItemCaseSensitive(s, "nodes")) {
            char *name = safe_text(cJSON_IsString(nd) ? nd->valuestring : "?");
            if (n < sizeof(nodes))
                n += (size_t)snprintf(nodes + n, sizeof(nodes) - n, "%s%s", n ? ", " : "",
                                      name ? name : "?");
            free(name);
        }
        const cJSON *ks = cJSON_GetObjectItemCaseSensitive(s, "kernel_set");
        /* A step over names holds its kernel's dispatch table: its generic set is what runs at
         * a size whose range is not tuned yet, so that set is shown, with the table's count. */
        const cJSON *table_of = cJSON_GetObjectItemCaseSensitive(ks, "dispatch");
        char origin[96];
        if (cJSON_IsObject(table_of)) {
            const cJSON *e;
            int entries = 0, ready = 0;
            cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(table_of, "entries")) {
                entries++;
                ready += strcmp(jstr_or(e, "state", ""), "ready") == 0;
            }
            ks = cJSON_GetObjectItemCaseSensitive(table_of, "generic");
            snprintf(origin, sizeof(origin), "table: generic %s, %d of %d ranges ready",
                     jstr_or(ks, "origin", "-"), ready, entries);
        } else {
            snprintf(origin, sizeof(origin), "%s", jstr_or(ks, "origin", "-"));
        }
        const cJSON *sched = cJSON_GetObjectItemCaseSensitive(ks, "schedule");
        const cJSON *k;
        n = 0;
        cJSON_ArrayForEach(k, cJSON_GetObjectItemCaseSensitive(ks, "kernels")) {
            if (n < sizeof(kernels))
                n += (size_t)snprintf(kernels + n, sizeof(kernels) - n, "%s%s", n ? " + " : "",
                                      jstr_or(k, "name", "?"));
        }
        bindings_text(cJSON_GetObjectItemCaseSensitive(s, "bindings"), binds, sizeof(binds));
        snprintf(idx, sizeof(idx), "%s%d", phase, ++*number);
        table_row(t, idx, nodes, jstr_or(sched, "template", "?"), kernels, origin, binds);
    }
}

int cmd_graph(const opts *o, int argc, char **argv)
{
    char *body = NULL;
    cJSON *j = NULL;
    int rc, status = 0;

    if ((rc = only_opts(o, OPT_ARCH | OPT_TUNE | OPT_NO_WAIT, "graph")))
        return rc;
    if (argc != 1)
        return usage_error("'graph' takes one GRAPH.json");
    if ((rc = post_request_file(o, argv[0], false, "/v1/graphs", &status, &body)))
        return rc;
    if (o->json) {
        puts(body);
        rc = EXIT_OK;
        goto out;
    }
    j = cJSON_Parse(body);
    if (status == 202) {
        const cJSON *gj = cJSON_GetObjectItemCaseSensitive(j, "job");
        printf("graph job %s: %s, %.0f of %.0f kernels done; follow it with\n"
               "  curl --unix-socket SOCKET http://localhost%s\n"
               "then send the graph again for its plan\n",
               jstr_or(gj, "id", "?"), jstr_or(gj, "state", "?"), jnum_or(gj, "kernels_done", 0),
               jnum_or(gj, "kernels", 0), jstr_or(gj, "url", "/v1/graphs/jobs/?"));
        rc = EXIT_OK;
        goto out;
    }
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(j, "steps");
    const cJSON *prep = cJSON_GetObjectItemCaseSensitive(j, "prepare");
    if (!cJSON_IsArray(steps)) {
        fail(EXIT_DAEMON, "the answer has no steps");
        rc = EXIT_DAEMON;
        goto out;
    }
    char arena[32], consts[32];
    fmt_size((uint64_t)jnum_or(j, "arena_bytes", 0), arena, sizeof(arena));
    fmt_size((uint64_t)jnum_or(j, "constants_bytes", 0), consts, sizeof(consts));
    printf("graph %.12s on %s (tune %s): %d steps, %d prepare steps; arena %s, constants %s\n\n",
           jstr_or(j, "graph_key", "?"), jstr_or(j, "arch", "?"), jstr_or(j, "tune", "?"),
           cJSON_GetArraySize(steps), cJSON_GetArraySize(prep), arena, consts);
    /* A plan over names: their ranges first; the arena above is laid out at every max. */
    const cJSON *dims = cJSON_GetObjectItemCaseSensitive(j, "dims"), *dm;
    if (cJSON_IsObject(dims)) {
        printf("dims:");
        cJSON_ArrayForEach(dm, dims) {
            char *name = safe_text(dm->string);
            printf("%s %s %.0f..%.0f", dm == dims->child ? "" : ",", name ? name : "?", jnum_or(dm, "min", 0),
                   jnum_or(dm, "max", 0));
            if (jnum_or(dm, "multiple_of", 1) > 1)
                printf(" (multiple of %.0f)", jnum_or(dm, "multiple_of", 1));
            free(name);
        }
        printf("\n\n");
    }
    table t = {.ncols = 6, .align = "llllll"};
    table_row(&t, "STEP", "NODES", "TEMPLATE", "KERNELS", "ORIGIN", "BINDINGS");
    int number = 0;
    graph_steps(&t, prep, "p", &number);
    number = 0;
    graph_steps(&t, steps, "", &number);
    table_print(&t, stdout);
    table_free(&t);

    const cJSON *bufs = cJSON_GetObjectItemCaseSensitive(j, "buffers");
    if (cJSON_GetArraySize(bufs) > 0) {
        printf("\n");
        table b = {.ncols = 5, .align = "llrrl"};
        table_row(&b, "BUFFER", "REGION", "OFFSET", "SIZE", "SHAPE");
        const cJSON *bf;
        cJSON_ArrayForEach(bf, bufs) {
            char off[32], size[32];
            snprintf(off, sizeof(off), "%.0f", jnum_or(bf, "offset", 0));
            fmt_size((uint64_t)jnum_or(bf, "bytes", 0), size, sizeof(size));
            char *shape = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(bf, "shape"));
            char *name = safe_text(jstr_or(bf, "name", "?"));
            char desc[160];
            snprintf(desc, sizeof(desc), "%s %s", shape ? shape : "", jstr_or(bf, "dtype", ""));
            table_row(&b, name, jstr_or(bf, "region", "?"), off, size, desc);
            free(name);
            cJSON_free(shape);
        }
        table_print(&b, stdout);
        table_free(&b);
    }
    /* What `kernel` prints for one kernel set, once per distinct text for the plan's kernels:
     * e.g. tune measure answered by the cost model because no GPU could time it. */
    const cJSON *phases[] = {prep, steps}, *st;
    cJSON *seen = cJSON_CreateObject();
    for (int p = 0; p < 2; p++)
        cJSON_ArrayForEach(st, phases[p]) {
            const char *w = jstr_or(cJSON_GetObjectItemCaseSensitive(st, "kernel_set"),
                                    "warning", NULL);
            if (!w || !seen || cJSON_GetObjectItemCaseSensitive(seen, w))
                continue;
            cJSON_AddTrueToObject(seen, w);
            char *wt = safe_text(w);
            printf("\nwarning: %s\n", wt ? wt : "?");
            free(wt);
        }
    cJSON_Delete(seen);
    rc = EXIT_OK;
out:
    cJSON_Delete(j);
    free(body);
    return rc;
}

/* ---- cache retune: the daemon's half ------------------------------------------------------ */

/* Where open_client() goes, for messages: the --url, or the socket path. */
static char *client_address(const opts *o)
{
    if (o->url)
        return strdup(o->url);
    if (o->socket)
        return strdup(o->socket);
    char *addr = NULL;
    return hidet_default_address(&addr) == 0 ? addr : NULL;
}

/* The daemon could not be reached: say where it was looked for. */
static int report_unreachable(int r, const hidet_error *e, const opts *o)
{
    char *addr = client_address(o);
    fail(EXIT_CONNECT, "cannot reach hidetd at %s: %s (is it running? --socket or --url name "
                       "another address)",
         addr ? addr : "?", e->message[0] ? e->message : strerror(-r));
    free(addr);
    return EXIT_CONNECT;
}

int daemon_cache_path(const opts *o, char **ret)
{
    hidet_client *c = NULL;
    hidet_error e;
    char *body = NULL;
    int rc, r;

    *ret = NULL;
    if ((rc = open_client(o, &c)))
        return rc;
    r = hidet_get(c, "/v1/status", &body, NULL, &e);
    hidet_client_free(c);
    if (r == -ECONNREFUSED)
        return report_unreachable(r, &e, o);
    if (r < 0)
        return report(r, &e, o);
    cJSON *j = cJSON_Parse(body);
    free(body);
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "cache"),
                                                      "path");
    if (cJSON_IsString(p) && p->valuestring[0])
        *ret = strdup(p->valuestring);
    cJSON_Delete(j);
    return EXIT_OK;
}

int daemon_retune(const opts *o, const char *request, const char *key)
{
    hidet_client *c = NULL;
    hidet_kernel_set *set = NULL;
    hidet_job *job = NULL;
    hidet_error e;
    int rc, r;

    if ((rc = open_client(o, &c)))
        return rc;
    r = hidet_request_kernels(c, request, &set, &job, &e);
    if (r == -ECONNREFUSED) {
        rc = report_unreachable(r, &e, o);
        goto out;
    }
    if (r < 0) {
        rc = report(r, &e, o);
        goto out;
    }
    rc = EXIT_OK;
    if (job) {
        if (o->json) {
            cJSON *w = cJSON_CreateObject();
            cJSON_AddItemToObject(w, "job", cJSON_Parse(job->json));
            print_json(w);
            cJSON_Delete(w);
        } else {
            printf("re-tuning %s as job %s; follow it with: hidetctl jobs %s --watch\n", key,
                   job->id, job->id);
        }
        goto out;
    }
    if (o->json) {
        puts(set->json);
    } else {
        printf("re-tuned %s: %s on %s, %s%s\n", set->key, set->op, set->arch,
               strcmp(set->origin, "tuned") == 0 ? "newly built" : set->origin,
               set->measured ? ", measured" : "");
        if (set->warning)
            printf("warning: %s\n", set->warning);
    }
    /* The daemon keys the request itself: another key means its toolchain or code generator
     * changed since KEY was stored, so the old entry is left as it was. */
    if (strcmp(set->key, key) != 0)
        fprintf(stderr, "hidetctl: note: the daemon answered with key %s, not %s (its toolchain "
                        "or code generator changed since %s was stored; remove the old one with "
                        "hidetctl cache rm %s)\n",
                set->key, key, key, key);
out:
    hidet_kernel_set_free(set);
    hidet_job_free(job);
    hidet_client_free(c);
    return rc;
}
