/* clients/c/hidetctl.c - hidetctl, the command-line tool for hidetd.
 *
 * Daemon commands (kernel, space, status, jobs, cancel) go through libhidet-client; cache
 * commands open the kernel database directly through kernel_cache/, so backups, restores and
 * clean-ups work whether the daemon runs (WAL lets both use the file) or not.
 * Output is for people by default and JSON with --json. Exit codes are part of the interface.
 */
#include "hidet/client.h"
#include "kernel_cache/kc.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>

#include "hidetd_config.h"

enum {
    EXIT_OK = 0,
    EXIT_DAEMON = 1,   /* the daemon answered an error (or another operation failed) */
    EXIT_USAGE = 2,
    EXIT_CONNECT = 3,
    EXIT_NOT_FOUND = 4,
    EXIT_CORRUPT = 5,  /* verify or import found corruption */
};

static const char usage_text[] =
    "Usage: hidetctl [OPTIONS] COMMAND [ARGS]\n"
    "\n"
    "Talk to hidetd, the tuned GPU kernel daemon, and manage its kernel cache.\n"
    "\n"
    "Daemon commands:\n"
    "  kernel REQUEST.json   ask for a kernel set (REQUEST.json may be - for stdin)\n"
    "       [--arch A] [--tune none|model|measure] [--no-wait] [--ptx FILE] [--cubin FILE]\n"
    "  space REQUEST.json    list the ranked schedule candidates for a request [--arch A]\n"
    "  status                daemon version, GPU workers, queue and cache\n"
    "  jobs [ID] [--watch]   list jobs, or show one; --watch refreshes until done\n"
    "  cancel ID             cancel a job\n"
    "\n"
    "Cache commands (open the database file directly; work with the daemon running or not):\n"
    "  cache ls [--arch A] [--op OP]    list artifacts, most recently used first\n"
    "  cache show KEY                   one artifact (KEY may be a unique prefix)\n"
    "  cache rm KEY...                  remove artifacts\n"
    "  cache prune [--older-than DUR] [--arch A] [--max-size SIZE]\n"
    "                                   remove artifacts unused for DUR (30d, 12h, 90m, 2w)\n"
    "                                   (of arch A only, with --arch), then least recently\n"
    "                                   used ones until at most SIZE (500M, 2G, 1.5GiB) is left\n"
    "  cache export FILE                write a self-checking backup of every artifact\n"
    "  cache import FILE                check a backup completely, then store all of it\n"
    "  cache verify                     SQLite integrity check and every blob's digest\n"
    "  cache vacuum                     give unused space back to the file system\n"
    "\n"
    "Options:\n"
    "  --socket PATH   daemon's Unix socket (default: $HIDETD_SOCKET, else\n"
    "                  $XDG_RUNTIME_DIR/hidetd.sock, else ./hidetd.sock)\n"
    "  --url URL       talk HTTP to URL instead (http://host:port)\n"
    "  --token T       bearer token (default: $HIDETD_TOKEN)\n"
    "  --cache PATH    kernel database (default: $XDG_CACHE_HOME/hidetd/kernels.db, else\n"
    "                  ~/.cache/hidetd/kernels.db)\n"
    "  --json          machine-readable output\n"
    "  -h, --help      this text;  --version  the version\n"
    "\n"
    "Exit status:\n"
    "  0  success\n"
    "  1  the daemon answered an error (or a local operation failed)\n"
    "  2  usage error (bad command, option or argument)\n"
    "  3  cannot connect to the daemon\n"
    "  4  not found (kernel, job, cache entry, database)\n"
    "  5  verify or import found corruption\n";

typedef struct opts {
    const char *socket, *url, *token, *cache;
    bool json;
    const char *arch, *tune, *op, *ptx, *cubin, *older_than, *max_size;
    bool no_wait, watch;
    unsigned seen; /* OPT_* bits of command options given */
} opts;

enum {
    OPT_ARCH = 1u << 0,
    OPT_TUNE = 1u << 1,
    OPT_NO_WAIT = 1u << 2,
    OPT_PTX = 1u << 3,
    OPT_CUBIN = 1u << 4,
    OPT_WATCH = 1u << 5,
    OPT_OLDER = 1u << 6,
    OPT_MAXSIZE = 1u << 7,
    OPT_OP = 1u << 8,
};

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    fputs("hidetctl: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nTry 'hidetctl --help'.\n", stderr);
    return EXIT_USAGE;
}

/* Refuses command options that mean nothing to this command: silently ignoring --ptx on a
 * command that never fetches PTX would surprise a script. */
static int only_opts(const opts *o, unsigned allowed, const char *cmd)
{
    static const char *const names[] = {"--arch", "--tune", "--no-wait", "--ptx", "--cubin",
                                        "--watch", "--older-than", "--max-size", "--op"};
    unsigned extra = o->seen & ~allowed;
    for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (extra & (1u << i))
            return usage_error("option %s does not apply to '%s'", names[i], cmd);
    return 0;
}

/* ---- formatting ----------------------------------------------------------------------------- */

static void fmt_size(uint64_t b, char *out, size_t cap)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(out, cap, "%llu B", (unsigned long long)b);
    else
        snprintf(out, cap, "%.1f %s", v, units[u]);
}

static void fmt_age(int64_t t, char *out, size_t cap)
{
    int64_t d = (int64_t)time(NULL) - t;
    if (t <= 0)
        snprintf(out, cap, "never");
    else if (d < 60)
        snprintf(out, cap, "just now");
    else if (d < 3600)
        snprintf(out, cap, "%lldm ago", (long long)(d / 60));
    else if (d < 86400)
        snprintf(out, cap, "%lldh ago", (long long)(d / 3600));
    else
        snprintf(out, cap, "%lldd ago", (long long)(d / 86400));
}

static void fmt_time(int64_t t, char *out, size_t cap)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (t <= 0 || !gmtime_r(&tt, &tm) || !strftime(out, cap, "%Y-%m-%d %H:%M:%S UTC", &tm))
        snprintf(out, cap, "-");
}

static void fmt_us(double us, char *out, size_t cap)
{
    if (us < 0)
        snprintf(out, cap, "-");
    else if (us >= 10000)
        snprintf(out, cap, "%.2f ms", us / 1000);
    else
        snprintf(out, cap, "%.1f us", us);
}

static void progress_bar(int64_t done, int64_t total, char *out, size_t cap)
{
    char bar[21];
    int filled = total > 0 ? (int)(20 * (done > total ? total : done) / total) : 0;
    for (int i = 0; i < 20; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[20] = '\0';
    if (total > 0)
        snprintf(out, cap, "[%s] %3d%% %lld/%lld", bar, (int)(100 * done / total),
                 (long long)done, (long long)total);
    else
        snprintf(out, cap, "[%s]   -", bar);
}

/* A table of strings printed with aligned columns; align[i] is 'l' or 'r'. */
typedef struct table {
    size_t ncols, nrows, cap;
    const char *align;
    char **cells; /* nrows * ncols, row 0 is the header */
} table;

static int table_row(table *t, ...)
{
    va_list ap;
    if (t->nrows == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 16;
        char **c = realloc(t->cells, nc * t->ncols * sizeof(*c));
        if (!c)
            return -ENOMEM;
        t->cells = c;
        t->cap = nc;
    }
    va_start(ap, t);
    for (size_t i = 0; i < t->ncols; i++) {
        const char *s = va_arg(ap, const char *);
        t->cells[t->nrows * t->ncols + i] = strdup(s ? s : "");
    }
    va_end(ap);
    t->nrows++;
    return 0;
}

static void table_print(table *t, FILE *f)
{
    size_t w[16] = {0};
    for (size_t r = 0; r < t->nrows; r++)
        for (size_t c = 0; c < t->ncols && c < 16; c++) {
            const char *s = t->cells[r * t->ncols + c];
            size_t n = s ? strlen(s) : 0;
            if (n > w[c])
                w[c] = n;
        }
    for (size_t r = 0; r < t->nrows; r++) {
        for (size_t c = 0; c < t->ncols && c < 16; c++) {
            const char *s = t->cells[r * t->ncols + c];
            bool last = c + 1 == t->ncols;
            /* No trailing blanks: the last column, if left-aligned, is not padded. */
            if (t->align[c] == 'r')
                fprintf(f, "%*s", (int)w[c], s ? s : "");
            else if (last)
                fputs(s ? s : "", f);
            else
                fprintf(f, "%-*s", (int)w[c], s ? s : "");
            fputs(last ? "\n" : "  ", f);
        }
    }
}

static void table_free(table *t)
{
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
}

static void print_json(const cJSON *j)
{
    char *s = cJSON_Print(j);
    if (s) {
        puts(s);
        cJSON_free(s);
    }
}

/* ---- parsing of arguments ------------------------------------------------------------------- */

/* "30d", "12h", "90m", "45s", "2w", "600" (seconds). */
static int parse_duration(const char *s, int64_t *ret)
{
    char *end = NULL;
    double v;
    int64_t mul = 1;

    if (!s || !*s)
        return -EINVAL;
    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || !(v >= 0) || !isfinite(v))
        return -EINVAL;
    if (*end) {
        switch (*end) {
        case 's': mul = 1; break;
        case 'm': mul = 60; break;
        case 'h': mul = 3600; break;
        case 'd': mul = 86400; break;
        case 'w': mul = 7 * 86400; break;
        default: return -EINVAL;
        }
        if (end[1] != '\0')
            return -EINVAL;
    }
    if (v * (double)mul > 1e12)
        return -EINVAL;
    *ret = (int64_t)(v * (double)mul);
    return 0;
}

/* "1048576", "500K", "500M", "2G", "1.5GiB", "10MB" (K, M, G, T are powers of 1024). */
static int parse_size(const char *s, uint64_t *ret)
{
    char *end = NULL;
    double v, mul = 1;

    if (!s || !*s)
        return -EINVAL;
    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || !(v >= 0) || !isfinite(v))
        return -EINVAL;
    if (*end) {
        switch (*end) {
        case 'B': mul = 1; break;
        case 'K': case 'k': mul = 1024.0; break;
        case 'M': mul = 1024.0 * 1024; break;
        case 'G': mul = 1024.0 * 1024 * 1024; break;
        case 'T': mul = 1024.0 * 1024 * 1024 * 1024; break;
        default: return -EINVAL;
        }
        const char *rest = end + 1;
        if (*end != 'B' && strcmp(rest, "") != 0 && strcmp(rest, "B") != 0 &&
            strcmp(rest, "iB") != 0)
            return -EINVAL;
        if (*end == 'B' && *rest)
            return -EINVAL;
    }
    if (v * mul > 1.8e19)
        return -EINVAL;
    *ret = (uint64_t)(v * mul);
    return 0;
}

static char *default_socket(void)
{
    const char *e = getenv("HIDETD_SOCKET");
    char *s = NULL;
    if (e && *e)
        return strdup(e);
    e = getenv("XDG_RUNTIME_DIR");
    if (e && *e) {
        if (asprintf(&s, "%s/hidetd.sock", e) < 0)
            return NULL;
        return s;
    }
    return strdup("./hidetd.sock");
}

static char *default_cache(void)
{
    const char *e = getenv("XDG_CACHE_HOME");
    char *s = NULL;
    if (e && *e) {
        if (asprintf(&s, "%s/hidetd/kernels.db", e) < 0)
            return NULL;
        return s;
    }
    e = getenv("HOME");
    if (asprintf(&s, "%s/.cache/hidetd/kernels.db", e && *e ? e : ".") < 0)
        return NULL;
    return s;
}

/* ---- daemon commands ------------------------------------------------------------------------ */

static int client_exit(int r, const hidet_error *e)
{
    if (r == -ECONNREFUSED)
        return EXIT_CONNECT;
    if (e->http_status == 404 || (r == -ENOENT && e->http_status == 0))
        return EXIT_NOT_FOUND;
    return EXIT_DAEMON;
}

static int report(int r, const hidet_error *e, const opts *o)
{
    if (o->json) {
        cJSON *j = cJSON_CreateObject(), *er = cJSON_AddObjectToObject(j, "error");
        cJSON_AddStringToObject(er, "code", e->code[0] ? e->code : "client");
        cJSON_AddStringToObject(er, "message", e->message);
        cJSON_AddStringToObject(er, "field", e->field);
        cJSON_AddNumberToObject(er, "http_status", e->http_status);
        char *s = cJSON_PrintUnformatted(j);
        if (s)
            fprintf(stderr, "%s\n", s);
        cJSON_free(s);
        cJSON_Delete(j);
    } else if (e->http_status) {
        fprintf(stderr, "hidetctl: hidetd answered %d%s%s: %s%s%s%s\n", e->http_status,
                e->code[0] ? " " : "", e->code, e->message, e->field[0] ? " (field " : "",
                e->field, e->field[0] ? ")" : "");
    } else {
        fprintf(stderr, "hidetctl: %s\n", e->message[0] ? e->message : strerror(-r));
    }
    return client_exit(r, e);
}

static int open_client(const opts *o, hidet_client **ret)
{
    hidet_error e;
    char *sock = NULL;
    const char *addr = o->url;
    int r;

    if (!addr) {
        sock = o->socket ? strdup(o->socket) : default_socket();
        if (!sock)
            return EXIT_DAEMON;
        /* A bare relative name given by the user ("hidetd.sock") still means a file. */
        if (sock[0] != '/' && strncmp(sock, "./", 2) != 0 && strncmp(sock, "../", 3) != 0 &&
            strncmp(sock, "unix:", 5) != 0) {
            char *s2 = NULL;
            if (asprintf(&s2, "./%s", sock) < 0) {
                free(sock);
                return EXIT_DAEMON;
            }
            free(sock);
            sock = s2;
        }
        addr = sock;
    }
    r = hidet_client_open(addr, o->token, ret, &e);
    free(sock);
    if (r < 0) {
        fprintf(stderr, "hidetctl: %s\n", e.message);
        return r == -EINVAL ? EXIT_USAGE : EXIT_DAEMON;
    }
    return 0;
}

static int read_text_file(const char *path, char **ret)
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
        fprintf(stderr, "hidetctl: cannot read %s: %s\n", path, strerror(-r));
        return EXIT_USAGE;
    }
    j = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        fprintf(stderr, "hidetctl: %s is not a JSON object\n", path);
        return EXIT_USAGE;
    }
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
    *ret = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return *ret ? 0 : EXIT_DAEMON;
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
    if (j->result)
        printf("  result %s%s\n", j->result, j->measured ? " (measured)" : "");
    if (j->warning)
        printf("  warning: %s\n", j->warning);
    if (j->error_message)
        printf("  error %s: %s\n", j->error_code, j->error_message);
}

static int cmd_kernel(const opts *o, int argc, char **argv)
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
    if (o->tune && strcmp(o->tune, "none") && strcmp(o->tune, "model") && strcmp(o->tune, "measure"))
        return usage_error("--tune must be none, model or measure");
    if ((rc = load_request(argv[0], o, false, &req)))
        return rc;
    if ((rc = open_client(o, &c))) {
        free(req);
        return rc;
    }
    r = hidet_request_kernels(c, req, &set, &job, &e);
    free(req);
    if (r < 0) {
        rc = report(r, &e, o);
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
                fprintf(stderr, "hidetctl: cannot write %s: %s\n", what[i], strerror(-r));
                rc = EXIT_DAEMON;
                goto out;
            }
        }
    }
    if (o->json) {
        puts(set->json);
    } else {
        char lat[32], pred[32];
        fmt_us(set->latency_us, lat, sizeof(lat));
        fmt_us(set->predicted_us, pred, sizeof(pred));
        printf("key        %s\n", set->key);
        printf("op         %s on %s, %s%s\n", set->op, set->arch,
               set->cached ? "from the cache" : "newly built",
               set->measured ? ", measured" : ", ranked by the cost model");
        printf("latency    %s (predicted %s)\n", lat, pred);
        if (set->output_rank > 0) {
            printf("output     [");
            for (int i = 0; i < set->output_rank; i++)
                printf("%s%lld", i ? "," : "", (long long)set->output_shape[i]);
            printf("] %s\n", set->output_dtype);
        }
        printf("workspace  %llu bytes\n", (unsigned long long)set->workspace_bytes);
        if (set->warning)
            printf("warning    %s\n", set->warning);
        table t = {.ncols = 6, .align = "lrrrrl"};
        table_row(&t, "KERNEL", "GRID", "BLOCK", "SHARED", "LATENCY", "PARAMS");
        for (size_t i = 0; i < set->n_kernels; i++) {
            const hidet_kernel *k = &set->kernels[i];
            char g[64], b[64], sh[32], kl[32], params[512] = "";
            snprintf(g, sizeof(g), "%u,%u,%u", k->grid[0], k->grid[1], k->grid[2]);
            snprintf(b, sizeof(b), "%u,%u,%u", k->block[0], k->block[1], k->block[2]);
            fmt_size(k->shared_bytes, sh, sizeof(sh));
            fmt_us(k->latency_us, kl, sizeof(kl));
            for (size_t p = 0; p < k->n_params; p++) {
                size_t used = strlen(params);
                snprintf(params + used, sizeof(params) - used, "%s%s", p ? " " : "",
                         k->params[p].buffer);
            }
            table_row(&t, k->name, g, b, sh, kl, params);
        }
        printf("\n");
        table_print(&t, stdout);
        table_free(&t);
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

static int cmd_space(const opts *o, int argc, char **argv)
{
    hidet_client *c = NULL;
    hidet_error e;
    char *req = NULL, *body = NULL;
    cJSON *j = NULL;
    int rc, r;

    if ((rc = only_opts(o, OPT_ARCH, "space")))
        return rc;
    if (argc != 1)
        return usage_error("'space' takes one REQUEST.json");
    if ((rc = load_request(argv[0], o, true, &req)))
        return rc;
    if ((rc = open_client(o, &c))) {
        free(req);
        return rc;
    }
    r = hidet_post_json(c, "/v1/spaces", req, NULL, &body, NULL, &e);
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
    const cJSON *cands = cJSON_GetObjectItemCaseSensitive(j, "candidates");
    if (!cJSON_IsArray(cands)) {
        fprintf(stderr, "hidetctl: the answer has no candidate list\n");
        rc = EXIT_DAEMON;
        goto out;
    }
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(j, "op");
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(j, "arch");
    const cJSON *hash = cJSON_GetObjectItemCaseSensitive(j, "space_hash");
    printf("%s on %s: %d candidates (space %s)\n\n", cJSON_IsString(op) ? op->valuestring : "?",
           cJSON_IsString(arch) ? arch->valuestring : "?", cJSON_GetArraySize(cands),
           cJSON_IsString(hash) ? hash->valuestring : "?");
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
    free(req);
    free(body);
    hidet_client_free(c);
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

static int cmd_status(const opts *o, int argc, char **argv)
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
        fprintf(stderr, "hidetctl: the status answer is not JSON\n");
        rc = EXIT_DAEMON;
        goto out;
    }
    printf("hidetd %s, up %.0f s, GPU %s\n", jstr_or(j, "version", "?"), jnum_or(j, "uptime_s", 0),
           cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "gpu_available")) ? "available"
                                                                              : "not available");
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

static int cmd_jobs(const opts *o, int argc, char **argv)
{
    hidet_client *c = NULL;
    hidet_error e;
    int rc, r;
    bool tty = isatty(STDOUT_FILENO);

    if ((rc = only_opts(o, OPT_WATCH, "jobs")))
        return rc;
    if (argc > 1)
        return usage_error("'jobs' takes at most one job ID");
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

static int cmd_cancel(const opts *o, int argc, char **argv)
{
    hidet_client *c = NULL;
    hidet_job *j = NULL;
    hidet_error e;
    int rc, r;

    if ((rc = only_opts(o, 0, "cancel")))
        return rc;
    if (argc != 1)
        return usage_error("'cancel' takes one job ID");
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

/* ---- cache commands ------------------------------------------------------------------------- */

static int kc_exit(int r)
{
    if (r == -ENOENT)
        return EXIT_NOT_FOUND;
    if (r == -EBADMSG)
        return EXIT_CORRUPT;
    return EXIT_DAEMON;
}

static int open_cache(const opts *o, bool create, kc_db **ret)
{
    char *path = o->cache ? strdup(o->cache) : default_cache();
    char *err = NULL;
    int r;

    if (!path)
        return EXIT_DAEMON;
    if (!create && access(path, F_OK) != 0) {
        fprintf(stderr, "hidetctl: no kernel cache at %s\n", path);
        free(path);
        return EXIT_NOT_FOUND;
    }
    r = kc_open(path, ret, &err);
    if (r < 0) {
        fprintf(stderr, "hidetctl: %s\n", err ? err : strerror(-r));
        free(err);
        free(path);
        return r == -EBADMSG ? EXIT_CORRUPT : EXIT_DAEMON;
    }
    free(path);
    return 0;
}

static cJSON *summary_json(const kc_summary *s)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "key", s->key);
    cJSON_AddStringToObject(j, "op", s->op);
    cJSON_AddStringToObject(j, "arch", s->target);
    cJSON_AddBoolToObject(j, "measured", s->choice == KC_CHOSEN_MEASURED);
    if (s->latency_us >= 0)
        cJSON_AddNumberToObject(j, "latency_us", s->latency_us);
    else
        cJSON_AddNullToObject(j, "latency_us");
    cJSON_AddNumberToObject(j, "bytes", (double)s->bytes);
    cJSON_AddNumberToObject(j, "created_at", (double)s->created_at);
    cJSON_AddNumberToObject(j, "last_used_at", (double)s->last_used_at);
    return j;
}

static int cache_ls(const opts *o, kc_db *db, int argc)
{
    kc_filter f = {.target = o->arch, .op = o->op};
    kc_summary *v = NULL;
    size_t n = 0;
    uint64_t total = 0;
    int r;

    if (argc != 0)
        return usage_error("'cache ls' takes no arguments");
    r = kc_list(db, &f, &v, &n);
    if (r < 0) {
        fprintf(stderr, "hidetctl: %s\n", kc_errmsg(db));
        return kc_exit(r);
    }
    if (o->json) {
        cJSON *w = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(w, "artifacts");
        for (size_t i = 0; i < n; i++)
            cJSON_AddItemToArray(a, summary_json(&v[i]));
        print_json(w);
        cJSON_Delete(w);
    } else {
        table t = {.ncols = 7, .align = "lllrrrl"};
        table_row(&t, "KEY", "OP", "ARCH", "MEASURED", "LATENCY", "SIZE", "LAST USED");
        for (size_t i = 0; i < n; i++) {
            char key[17], lat[32], sz[32], age[32];
            snprintf(key, sizeof(key), "%.16s", v[i].key);
            fmt_us(v[i].latency_us, lat, sizeof(lat));
            fmt_size(v[i].bytes, sz, sizeof(sz));
            fmt_age(v[i].last_used_at, age, sizeof(age));
            table_row(&t, key, v[i].op, v[i].target,
                      v[i].choice == KC_CHOSEN_MEASURED ? "yes" : "no", lat, sz, age);
            total += v[i].bytes;
        }
        table_print(&t, stdout);
        table_free(&t);
        char sz[32];
        fmt_size(total, sz, sizeof(sz));
        printf("%zu artifact%s, %s\n", n, n == 1 ? "" : "s", sz);
    }
    free(v);
    return EXIT_OK;
}

/* Resolves a key or unique key prefix to a full key. */
static int resolve_key(kc_db *db, const char *prefix, char out[KC_KEY_LEN + 1])
{
    kc_filter f = {.key_prefix = prefix, .limit = 2};
    kc_summary *v = NULL;
    size_t n = 0;
    int r;

    for (const char *p = prefix; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return usage_error("'%s' is not a key (lowercase hex)", prefix);
    if (!*prefix || strlen(prefix) > KC_KEY_LEN)
        return usage_error("'%s' is not a key", prefix);
    r = kc_list(db, &f, &v, &n);
    if (r < 0) {
        fprintf(stderr, "hidetctl: %s\n", kc_errmsg(db));
        return kc_exit(r);
    }
    if (n == 0) {
        free(v);
        fprintf(stderr, "hidetctl: no artifact %s in the cache\n", prefix);
        return EXIT_NOT_FOUND;
    }
    if (n > 1) {
        free(v);
        return usage_error("key prefix '%s' is ambiguous; give more characters", prefix);
    }
    memcpy(out, v[0].key, KC_KEY_LEN + 1);
    free(v);
    return 0;
}

static int cache_show(const opts *o, kc_db *db, int argc, char **argv)
{
    char key[KC_KEY_LEN + 1];
    kc_artifact *a = NULL;
    int rc, r;

    if (argc != 1)
        return usage_error("'cache show' takes one KEY");
    if ((rc = resolve_key(db, argv[0], key)))
        return rc;
    /* The full, verifying read (show says so when a blob is damaged), not counted as a use. */
    r = kc_artifact_peek(db, key, &a);
    if (r < 0) {
        fprintf(stderr, "hidetctl: %s\n", kc_errmsg(db));
        return kc_exit(r);
    }
    /* The launch as the export file writes it: the same text schema 1 stored. */
    char *launch = NULL;
    if (kc_launch_json(&a->launch, &launch) < 0) {
        fprintf(stderr, "hidetctl: %s: cannot render the launch description\n", key);
        kc_artifact_free(a);
        return EXIT_DAEMON;
    }
    if (o->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "key", a->key);
        cJSON_AddStringToObject(j, "op_key", a->op_key);
        cJSON_AddStringToObject(j, "op", a->op);
        cJSON_AddStringToObject(j, "arch", a->target);
        cJSON_AddBoolToObject(j, "measured", a->choice == KC_CHOSEN_MEASURED);
        if (a->latency_us >= 0)
            cJSON_AddNumberToObject(j, "latency_us", a->latency_us);
        else
            cJSON_AddNullToObject(j, "latency_us");
        cJSON_AddNumberToObject(j, "predicted_us", a->predicted_us);
        cJSON_AddNumberToObject(j, "ptx_bytes", (double)a->ptx_len);
        cJSON_AddNumberToObject(j, "cubin_bytes", (double)a->cubin_len);
        cJSON_AddNumberToObject(j, "created_at", (double)a->created_at);
        cJSON_AddNumberToObject(j, "last_used_at", (double)a->last_used_at);
        /* The stored JSON documents are embedded as JSON, or as text if they do not parse. */
        const char *names[] = {"op_json", "schedule", "launch", "provenance"};
        const char *vals[] = {a->op_json, a->schedule_json, launch, a->provenance_json};
        for (int i = 0; i < 4; i++) {
            cJSON *p = cJSON_Parse(vals[i] ? vals[i] : "");
            cJSON_AddItemToObject(j, i == 0 ? "op_request" : names[i],
                                  p ? p : cJSON_CreateString(vals[i] ? vals[i] : ""));
        }
        print_json(j);
        cJSON_Delete(j);
    } else {
        char lat[32], pred[32], ps[32], cs[32], ct[64], lu[64];
        fmt_us(a->latency_us, lat, sizeof(lat));
        fmt_us(a->predicted_us, pred, sizeof(pred));
        fmt_size(a->ptx_len, ps, sizeof(ps));
        fmt_size(a->cubin_len, cs, sizeof(cs));
        fmt_time(a->created_at, ct, sizeof(ct));
        fmt_time(a->last_used_at, lu, sizeof(lu));
        printf("key          %s\n", a->key);
        printf("op key       %s\n", a->op_key);
        printf("op           %s on %s\n", a->op, a->target);
        printf("measured     %s\n", a->choice == KC_CHOSEN_MEASURED ? "yes"
                                 : a->choice == KC_CHOSEN_MODEL ? "no (ranked by the cost model)"
                                                                : "no (the template's default)");
        printf("latency      %s (predicted %s)\n", lat, pred);
        printf("ptx / cubin  %s / %s (digests verified)\n", ps, cs);
        printf("created      %s\n", ct);
        printf("last used    %s\n", lu);
        printf("request      %s\n", a->op_json);
        printf("schedule     %s\n", a->schedule_json);
        printf("launch       %s\n", launch);
        printf("provenance   %s\n", a->provenance_json);
    }
    free(launch);
    kc_artifact_free(a);
    return EXIT_OK;
}

static int cache_rm(const opts *o, kc_db *db, int argc, char **argv)
{
    int rc = EXIT_OK;
    cJSON *removed = o->json ? cJSON_CreateArray() : NULL;

    if (argc < 1)
        return usage_error("'cache rm' takes one or more KEYs");
    for (int i = 0; i < argc; i++) {
        char key[KC_KEY_LEN + 1];
        size_t n = 0;
        int r = resolve_key(db, argv[i], key);
        if (r) {
            /* Keep going; report the most serious problem at the end. */
            if (r != EXIT_NOT_FOUND || rc == EXIT_OK)
                rc = r;
            continue;
        }
        kc_filter f = {.key_prefix = key};
        r = kc_remove(db, &f, &n);
        if (r < 0) {
            fprintf(stderr, "hidetctl: %s\n", kc_errmsg(db));
            rc = kc_exit(r);
            continue;
        }
        if (removed)
            cJSON_AddItemToArray(removed, cJSON_CreateString(key));
        else
            printf("removed %s\n", key);
    }
    if (removed) {
        cJSON *w = cJSON_CreateObject();
        cJSON_AddItemToObject(w, "removed", removed);
        print_json(w);
        cJSON_Delete(w);
    }
    return rc;
}

static int cache_prune(const opts *o, kc_db *db, int argc)
{
    int64_t older = 0;
    uint64_t max = 0;
    size_t by_filter = 0, by_size = 0;
    kc_stats before, after;
    int r;

    if (argc != 0)
        return usage_error("'cache prune' takes options only");
    if (!o->older_than && !o->max_size && !o->arch)
        return usage_error("'cache prune' needs --older-than, --max-size or --arch");
    if (o->older_than && parse_duration(o->older_than, &older) < 0)
        return usage_error("bad duration '%s' (try 30d, 12h, 90m)", o->older_than);
    if (o->max_size && parse_size(o->max_size, &max) < 0)
        return usage_error("bad size '%s' (try 500M, 2G)", o->max_size);
    r = kc_stats_get(db, &before);
    if (r == 0 && (o->older_than || o->arch)) {
        kc_filter f = {.target = o->arch, .older_than = o->older_than ? time(NULL) - older : 0};
        /* older_than 0 means "any age"; a zero-length duration means "everything until now". */
        if (o->older_than && f.older_than <= 0)
            f.older_than = 1;
        r = kc_remove(db, &f, &by_filter);
    }
    if (r == 0 && o->max_size)
        r = kc_prune_to_size(db, max, &by_size);
    if (r == 0)
        r = kc_stats_get(db, &after);
    if (r < 0) {
        fprintf(stderr, "hidetctl: %s\n", kc_errmsg(db));
        return kc_exit(r);
    }
    if (o->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "removed", (double)(by_filter + by_size));
        cJSON_AddNumberToObject(j, "bytes_before", (double)before.bytes);
        cJSON_AddNumberToObject(j, "bytes_after", (double)after.bytes);
        cJSON_AddNumberToObject(j, "artifacts", (double)after.artifacts);
        print_json(j);
        cJSON_Delete(j);
    } else {
        char b[32], a[32];
        fmt_size(before.bytes, b, sizeof(b));
        fmt_size(after.bytes, a, sizeof(a));
        printf("removed %zu artifact%s; %s -> %s, %llu left\n", by_filter + by_size,
               by_filter + by_size == 1 ? "" : "s", b, a, (unsigned long long)after.artifacts);
    }
    return EXIT_OK;
}

static int cache_export(const opts *o, kc_db *db, int argc, char **argv)
{
    char *err = NULL;
    size_t n = 0;
    int r;

    if (argc != 1)
        return usage_error("'cache export' takes one FILE");
    r = kc_export(db, NULL, argv[0], &n, &err);
    if (r < 0) {
        fprintf(stderr, "hidetctl: export failed: %s\n", err ? err : strerror(-r));
        free(err);
        return r == -EBADMSG ? EXIT_CORRUPT : EXIT_DAEMON;
    }
    free(err);
    if (o->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "exported", (double)n);
        cJSON_AddStringToObject(j, "file", argv[0]);
        print_json(j);
        cJSON_Delete(j);
    }
    else
        printf("exported %zu artifact%s to %s\n", n, n == 1 ? "" : "s", argv[0]);
    return EXIT_OK;
}

static int cache_import(const opts *o, kc_db *db, int argc, char **argv)
{
    char *err = NULL;
    size_t n = 0;
    int r;

    if (argc != 1)
        return usage_error("'cache import' takes one FILE");
    r = kc_import(db, argv[0], &n, &err);
    if (r < 0) {
        fprintf(stderr, "hidetctl: import refused, nothing stored: %s\n",
                err ? err : strerror(-r));
        free(err);
        if (r == -EBADMSG)
            return EXIT_CORRUPT;
        return r == -ENOENT ? EXIT_NOT_FOUND : EXIT_DAEMON;
    }
    free(err);
    if (o->json)
        printf("{\"imported\":%zu}\n", n);
    else
        printf("imported %zu artifact%s from %s\n", n, n == 1 ? "" : "s", argv[0]);
    return EXIT_OK;
}

static int cache_verify(const opts *o, kc_db *db, int argc)
{
    size_t checked = 0, nbad = 0;
    char **bad = NULL;
    int r;

    if (argc != 0)
        return usage_error("'cache verify' takes no arguments");
    r = kc_verify(db, &checked, &nbad, &bad);
    if (r < 0) {
        fprintf(stderr, "hidetctl: verify failed: %s\n", kc_errmsg(db));
        return r == -EBADMSG ? EXIT_CORRUPT : EXIT_DAEMON;
    }
    if (o->json) {
        cJSON *j = cJSON_CreateObject(), *a;
        cJSON_AddNumberToObject(j, "checked", (double)checked);
        cJSON_AddBoolToObject(j, "ok", nbad == 0);
        a = cJSON_AddArrayToObject(j, "bad");
        for (size_t i = 0; i < nbad; i++)
            cJSON_AddItemToArray(a, cJSON_CreateString(bad[i]));
        print_json(j);
        cJSON_Delete(j);
    } else {
        for (size_t i = 0; i < nbad; i++)
            printf("BAD  %s (a stored blob does not match its digest)\n", bad[i]);
        printf("checked %zu artifact%s: %s\n", checked, checked == 1 ? "" : "s",
               nbad ? "corruption found" : "all good");
    }
    for (size_t i = 0; i < nbad; i++)
        free(bad[i]);
    free(bad);
    return nbad ? EXIT_CORRUPT : EXIT_OK;
}

static int cache_vacuum(const opts *o, kc_db *db, int argc)
{
    int r;

    if (argc != 0)
        return usage_error("'cache vacuum' takes no arguments");
    r = kc_vacuum(db);
    if (r < 0) {
        fprintf(stderr, "hidetctl: vacuum failed: %s\n", kc_errmsg(db));
        return kc_exit(r);
    }
    if (o->json)
        puts("{\"vacuumed\":true}");
    else
        printf("vacuumed\n");
    return EXIT_OK;
}

static int cmd_cache(const opts *o, int argc, char **argv)
{
    static const struct {
        const char *name;
        unsigned allowed;
        int min_args, max_args;
    } subs[] = {
        {"ls", OPT_ARCH | OPT_OP, 0, 0},
        {"show", 0, 1, 1},
        {"rm", 0, 1, 1 << 20},
        {"prune", OPT_OLDER | OPT_MAXSIZE | OPT_ARCH, 0, 0},
        {"export", 0, 1, 1},
        {"import", 0, 1, 1},
        {"verify", 0, 0, 0},
        {"vacuum", 0, 0, 0},
    };
    kc_db *db = NULL;
    const char *sub;
    int rc, i, n = (int)(sizeof(subs) / sizeof(subs[0]));

    if (argc < 1)
        return usage_error("'cache' needs a subcommand: ls, show, rm, prune, export, import, "
                           "verify, vacuum");
    sub = argv[0];
    for (i = 0; i < n; i++)
        if (strcmp(sub, subs[i].name) == 0)
            break;
    if (i == n)
        return usage_error("unknown cache subcommand '%s'", sub);
    char what[32];
    snprintf(what, sizeof(what), "cache %s", sub);
    if ((rc = only_opts(o, subs[i].allowed, what)))
        return rc;
    /* Usage errors first, before touching any file. */
    if (argc - 1 < subs[i].min_args || argc - 1 > subs[i].max_args)
        return usage_error("wrong number of arguments for '%s' (see --help)", what);
    if (strcmp(sub, "prune") == 0) {
        int64_t d;
        uint64_t sz;
        if (!o->older_than && !o->max_size && !o->arch)
            return usage_error("'cache prune' needs --older-than, --max-size or --arch");
        if (o->older_than && parse_duration(o->older_than, &d) < 0)
            return usage_error("bad duration '%s' (try 30d, 12h, 90m)", o->older_than);
        if (o->max_size && parse_size(o->max_size, &sz) < 0)
            return usage_error("bad size '%s' (try 500M, 2G)", o->max_size);
    }
    if (strcmp(sub, "import") == 0 && argc == 2 && access(argv[1], R_OK) != 0) {
        fprintf(stderr, "hidetctl: cannot read %s: %s\n", argv[1], strerror(errno));
        return errno == ENOENT ? EXIT_NOT_FOUND : EXIT_DAEMON;
    }
    /* Only import may create the database: a typo in --cache must not look like an empty cache. */
    if ((rc = open_cache(o, strcmp(sub, "import") == 0, &db)))
        return rc;
    argc--;
    argv++;
    if (strcmp(sub, "ls") == 0)
        rc = cache_ls(o, db, argc);
    else if (strcmp(sub, "show") == 0)
        rc = cache_show(o, db, argc, argv);
    else if (strcmp(sub, "rm") == 0)
        rc = cache_rm(o, db, argc, argv);
    else if (strcmp(sub, "prune") == 0)
        rc = cache_prune(o, db, argc);
    else if (strcmp(sub, "export") == 0)
        rc = cache_export(o, db, argc, argv);
    else if (strcmp(sub, "import") == 0)
        rc = cache_import(o, db, argc, argv);
    else if (strcmp(sub, "verify") == 0)
        rc = cache_verify(o, db, argc);
    else
        rc = cache_vacuum(o, db, argc);
    kc_close(db);
    return rc;
}

/* ---- main ----------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    enum { O_SOCKET = 256, O_URL, O_TOKEN, O_CACHE, O_JSON, O_ARCH, O_TUNE, O_NO_WAIT, O_PTX,
           O_CUBIN, O_WATCH, O_OLDER, O_MAXSIZE, O_OP, O_VERSION };
    static const struct option longopts[] = {
        {"socket", required_argument, NULL, O_SOCKET},
        {"url", required_argument, NULL, O_URL},
        {"token", required_argument, NULL, O_TOKEN},
        {"cache", required_argument, NULL, O_CACHE},
        {"json", no_argument, NULL, O_JSON},
        {"arch", required_argument, NULL, O_ARCH},
        {"tune", required_argument, NULL, O_TUNE},
        {"no-wait", no_argument, NULL, O_NO_WAIT},
        {"ptx", required_argument, NULL, O_PTX},
        {"cubin", required_argument, NULL, O_CUBIN},
        {"watch", no_argument, NULL, O_WATCH},
        {"older-than", required_argument, NULL, O_OLDER},
        {"max-size", required_argument, NULL, O_MAXSIZE},
        {"op", required_argument, NULL, O_OP},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, O_VERSION},
        {NULL, 0, NULL, 0},
    };
    opts o = {0};
    int c, rc;

    opterr = 0;
    /* GNU getopt permutes: options may come before or after the command and its operands. */
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case O_SOCKET: o.socket = optarg; break;
        case O_URL: o.url = optarg; break;
        case O_TOKEN: o.token = optarg; break;
        case O_CACHE: o.cache = optarg; break;
        case O_JSON: o.json = true; break;
        case O_ARCH: o.arch = optarg; o.seen |= OPT_ARCH; break;
        case O_TUNE: o.tune = optarg; o.seen |= OPT_TUNE; break;
        case O_NO_WAIT: o.no_wait = true; o.seen |= OPT_NO_WAIT; break;
        case O_PTX: o.ptx = optarg; o.seen |= OPT_PTX; break;
        case O_CUBIN: o.cubin = optarg; o.seen |= OPT_CUBIN; break;
        case O_WATCH: o.watch = true; o.seen |= OPT_WATCH; break;
        case O_OLDER: o.older_than = optarg; o.seen |= OPT_OLDER; break;
        case O_MAXSIZE: o.max_size = optarg; o.seen |= OPT_MAXSIZE; break;
        case O_OP: o.op = optarg; o.seen |= OPT_OP; break;
        case 'h': fputs(usage_text, stdout); return EXIT_OK;
        case O_VERSION: printf("hidetctl %s\n", HIDETD_VERSION); return EXIT_OK;
        case ':': return usage_error("option %s needs a value", argv[optind - 1]);
        default: return usage_error("unknown option %s", argv[optind - 1]);
        }
    }
    char **pos = argv + optind;
    int npos = argc - optind;
    if (!o.token) {
        const char *t = getenv("HIDETD_TOKEN");
        o.token = t && *t ? t : NULL;
    }
    if (o.url && o.socket)
        return usage_error("give --socket or --url, not both");
    if (npos == 0)
        return usage_error("no command given");
    const char *cmd = pos[0];
    int cargc = npos - 1;
    char **cargv = pos + 1;
    if (strcmp(cmd, "kernel") == 0)
        rc = cmd_kernel(&o, cargc, cargv);
    else if (strcmp(cmd, "space") == 0)
        rc = cmd_space(&o, cargc, cargv);
    else if (strcmp(cmd, "status") == 0)
        rc = cmd_status(&o, cargc, cargv);
    else if (strcmp(cmd, "jobs") == 0)
        rc = cmd_jobs(&o, cargc, cargv);
    else if (strcmp(cmd, "cancel") == 0)
        rc = cmd_cancel(&o, cargc, cargv);
    else if (strcmp(cmd, "cache") == 0)
        rc = cmd_cache(&o, cargc, cargv);
    else if (strcmp(cmd, "help") == 0) {
        fputs(usage_text, stdout);
        rc = EXIT_OK;
    } else
        rc = usage_error("unknown command '%s'", cmd);
    return rc;
}
