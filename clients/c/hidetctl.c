/* clients/c/hidetctl.c - hidetctl, the command-line tool for hidetd: the usage text, option
 * parsing, dispatch to a command, and the helpers every command shares (usage errors, formatting,
 * tables).
 *
 * Daemon commands (kernel, space, status, stats, jobs, cancel; hidetctl_daemon.c; warm;
 * hidetctl_warm.c) go through libhidet-client; cache commands (hidetctl_cache.c) open the kernel
 * database directly through kernel_cache/, so backups, restores and clean-ups work whether the
 * daemon runs (WAL lets both use the file) or not; they ask a running daemon only which file it
 * uses.
 * Output is for people by default and JSON with --json. Exit codes are part of the interface.
 */
#include "clients/c/hidetctl_internal.h"
#include "hidet/client.h"
#include "op/op.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cJSON.h>

#include "hidetd_config.h"

#define TRUST_DIR HIDETD_SYSCONFDIR "/hidetd/trusted.d"

static const char usage_text[] =
    "Usage: hidetctl [OPTIONS] COMMAND [ARGS]\n"
    "\n"
    "Talk to hidetd, the tuned GPU kernel daemon, and manage its kernel cache.\n"
    "\n"
    "Daemon commands:\n"
    "  kernel REQUEST.json   ask for a kernel set (REQUEST.json may be - for stdin)\n"
    "       [--arch A] [--tune none|model|measure] [--no-wait] [--ptx FILE] [--cubin FILE]\n"
    "  space REQUEST.json    list the ranked schedule candidates for a request\n"
    "       [--arch A] [--limit N]  (--limit: only the best N)\n"
    "  status                daemon version, GPU workers, queue and cache\n"
    "  stats                 hit rate, misses, jobs, candidates, cache size and limit\n"
    "  warm FILE...          send every request in FILEs (one JSON request, a JSON array,\n"
    "                        or one per line; - for stdin), --parallel N at once (default 4)\n"
    "       [--arch A] [--tune none|model|measure] [--parallel N]\n"
    "  jobs [ID] [--watch]   list jobs, or show one; --watch refreshes until done\n"
    "  cancel ID             cancel a job\n"
    "  graph GRAPH.json      send a model graph, print its launch plan (docs/graphs.md)\n"
    "       [--arch A] [--tune none|model|measure] [--no-wait]\n"
    "\n"
    "Cache commands (open the database file directly; work with the daemon running or not):\n"
    "  cache ls [--arch A] [--op OP]    list artifacts, most recently used first\n"
    "  cache show [--exact] KEY         one artifact (KEY may be a unique hex prefix;\n"
    "                                   --exact: KEY exactly as stored, any characters)\n"
    "  cache rm [--exact] KEY...        remove artifacts (and their quarantine rows)\n"
    "  cache prune [--older-than DUR] [--arch A] [--max-size SIZE]\n"
    "                                   remove artifacts unused for DUR (30d, 12h, 90m, 2w)\n"
    "                                   (of arch A only, with --arch), then least recently\n"
    "                                   used ones until at most SIZE (500M, 2G, 1.5GiB) is left\n"
    "  cache export FILE [--sign KEY]   write a self-checking backup of every artifact,\n"
    "                                   signed with the secret KEY file (see keygen)\n"
    "  cache import FILE [--trust PUB]... [--trust-dir DIR] [--trust-unsigned]\n"
    "                    [--replace-stronger]\n"
    "                                   check a backup completely, then store all of it;\n"
    "                                   it must be signed by a trusted key (--trust PUB, or\n"
    "                                   a *.pub in DIR, default " TRUST_DIR ")\n"
    "                                   unless --trust-unsigned (a backup you made yourself)\n"
    "  cache verify                     SQLite integrity check, every record read as the\n"
    "                                   daemon reads it, and the quarantine\n"
    "  cache vacuum                     give unused space back to the file system\n"
    "  cache retune [--exact] KEY [--tune T] [--no-wait]\n"
    "                                   ask the running daemon to tune KEY's op again; the\n"
    "                                   result replaces it (and the cluster's pinned entry)\n"
    "\n"
    "Keys:\n"
    "  keygen [--out PREFIX]            write a signing key pair: PREFIX.key (secret, mode\n"
    "                                   0600) and PREFIX.pub (default PREFIX: hidetd-sign)\n"
    "\n"
    "Options:\n"
    "  --socket PATH   daemon's Unix socket (default: $HIDETD_SOCKET, else\n"
    "                  $XDG_RUNTIME_DIR/hidetd.sock if it exists, else\n"
    "                  /run/hidetd/hidetd.sock if it exists, else where hidetd listens\n"
    "                  by default: $XDG_RUNTIME_DIR/hidetd.sock or\n"
    "                  ~/.cache/hidetd/hidetd.sock)\n"
    "  --url URL       talk HTTP to URL instead (http://host:port)\n"
    "  --token-file F  read the bearer token (TCP) from F's first line (default:\n"
    "                  $HIDETD_TOKEN_FILE, else $HIDETD_TOKEN)\n"
    "  --token T       the token itself (visible in ps: prefer --token-file)\n"
    "  --cache PATH    kernel database (default: $HIDETD_CACHE, else the running daemon's\n"
    "                  (from its /v1/status), else /var/lib/hidetd/kernels.db if it\n"
    "                  exists, else $XDG_CACHE_HOME/hidetd/kernels.db or\n"
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
    "  5  verify found a bad or quarantined record, or import found corruption\n"
    "  6  import refused an intact file: not signed by a trusted key, or it would replace\n"
    "     a stronger choice or different code\n"
    "\n"
    "Manual: man hidetctl (in a source tree: man -l clients/c/hidetctl.1).\n";

bool json_errors;

/* The error code a local failure gets in --json output, by its exit code. */
static const char *local_code(int rc)
{
    switch (rc) {
    case EXIT_USAGE: return "usage";
    case EXIT_CONNECT: return "cannot_connect";
    case EXIT_NOT_FOUND: return "not_found";
    case EXIT_CORRUPT: return "corrupt";
    case EXIT_REFUSED: return "refused";
    default: return "failed";
    }
}

void print_json_error(const char *code, const char *message, const char *field, int http_status)
{
    cJSON *j = cJSON_CreateObject(), *er = cJSON_AddObjectToObject(j, "error");
    cJSON_AddStringToObject(er, "code", code);
    cJSON_AddStringToObject(er, "message", message);
    cJSON_AddStringToObject(er, "field", field);
    cJSON_AddNumberToObject(er, "http_status", http_status);
    char *t = cJSON_PrintUnformatted(j);
    if (t)
        fprintf(stderr, "%s\n", t);
    cJSON_free(t);
    cJSON_Delete(j);
}

static void vreport(int rc, const char *hint, const char *fmt, va_list ap)
{
    char msg[2048];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (json_errors) {
        /* The shape of a daemon's error under --json, http_status 0: a script reads one kind of
         * error line whoever refused. */
        print_json_error(local_code(rc), msg, "", 0);
    } else {
        fprintf(stderr, "hidetctl: %s\n%s", msg, hint ? hint : "");
    }
}

int fail(int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(rc, NULL, fmt, ap);
    va_end(ap);
    return rc;
}

int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(EXIT_USAGE, "Try 'hidetctl --help'.\n", fmt, ap);
    va_end(ap);
    return EXIT_USAGE;
}

/* Refuses command options that mean nothing to this command: silently ignoring --ptx on a
 * command that never fetches PTX would surprise a script. */
int only_opts(const opts *o, unsigned allowed, const char *cmd)
{
    static const char *const names[] = {"--arch", "--tune", "--no-wait", "--ptx", "--cubin",
                                        "--watch", "--older-than", "--max-size", "--op",
                                        "--sign", "--trust", "--trust-dir", "--trust-unsigned",
                                        "--replace-stronger", "--exact", "--out", "--parallel",
                                        "--limit"};
    unsigned extra = o->seen & ~allowed;
    for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (extra & (1u << i))
            return usage_error("option %s does not apply to '%s'", names[i], cmd);
    return 0;
}

/* ---- formatting ----------------------------------------------------------------------------- */

void fmt_size(uint64_t b, char *out, size_t cap)
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

void fmt_age(int64_t t, char *out, size_t cap)
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

void fmt_time(int64_t t, char *out, size_t cap)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (t <= 0 || !gmtime_r(&tt, &tm) || !strftime(out, cap, "%Y-%m-%d %H:%M:%S UTC", &tm))
        snprintf(out, cap, "-");
}

void fmt_us(double us, char *out, size_t cap)
{
    if (us < 0)
        snprintf(out, cap, "-");
    else if (us >= 10000)
        snprintf(out, cap, "%.2f ms", us / 1000);
    else
        snprintf(out, cap, "%.1f us", us);
}

void progress_bar(int64_t done, int64_t total, char *out, size_t cap)
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

/* Length of the valid UTF-8 sequence at p that is not a C1 control (U+0080..U+009F), or 0. */
static size_t utf8_ok(const unsigned char *p)
{
    unsigned c = p[0];
    size_t n;
    unsigned cp;

    if (c >= 0xc2 && c <= 0xdf)
        n = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, cp = c & 0x07;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    /* Overlong forms, surrogates and code points past U+10FFFF are not UTF-8. */
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp <= 0x9f))
        return 0;
    return n;
}

char *safe_text(const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t len = strlen((const char *)p);
    char *out = malloc(4 * len + 1), *o = out;

    if (!out)
        return NULL;
    while (*p) {
        size_t n = *p >= 0x80 ? utf8_ok(p) : 0;
        if (n) {
            memcpy(o, p, n);
            o += n;
            p += n;
        } else if (*p == '\\') {
            *o++ = '\\';
            *o++ = '\\';
            p++;
        } else if (*p < 0x20 || *p >= 0x7f) {
            o += sprintf(o, "\\x%02x", *p);
            p++;
        } else {
            *o++ = (char)*p++;
        }
    }
    *o = '\0';
    return out;
}

bool text_is_safe(const char *s)
{
    char *t = safe_text(s);
    bool same = t && strcmp(t, s ? s : "") == 0;
    free(t);
    return same;
}

int table_row(table *t, ...)
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

void table_print(table *t, FILE *f)
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

void table_free(table *t)
{
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
}

void print_json(const cJSON *j)
{
    char *s = cJSON_Print(j);
    if (s) {
        puts(s);
        cJSON_free(s);
    }
}

/* ---- main ----------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    enum { O_SOCKET = 256, O_URL, O_TOKEN, O_TOKEN_FILE, O_CACHE, O_JSON, O_ARCH, O_TUNE, O_NO_WAIT, O_PTX,
           O_CUBIN, O_WATCH, O_OLDER, O_MAXSIZE, O_OP, O_VERSION, O_SIGN, O_TRUST, O_TRUST_DIR,
           O_TRUST_UNSIGNED, O_REPLACE_STRONGER, O_EXACT, O_OUT, O_PARALLEL, O_LIMIT };
    static const struct option longopts[] = {
        {"socket", required_argument, NULL, O_SOCKET},
        {"url", required_argument, NULL, O_URL},
        {"token", required_argument, NULL, O_TOKEN},
        {"token-file", required_argument, NULL, O_TOKEN_FILE},
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
        {"sign", required_argument, NULL, O_SIGN},
        {"trust", required_argument, NULL, O_TRUST},
        {"trust-dir", required_argument, NULL, O_TRUST_DIR},
        {"trust-unsigned", no_argument, NULL, O_TRUST_UNSIGNED},
        {"replace-stronger", no_argument, NULL, O_REPLACE_STRONGER},
        {"exact", no_argument, NULL, O_EXACT},
        {"out", required_argument, NULL, O_OUT},
        {"parallel", required_argument, NULL, O_PARALLEL},
        {"limit", required_argument, NULL, O_LIMIT},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, O_VERSION},
        {NULL, 0, NULL, 0},
    };
    opts o = {0};
    const char *token_file = NULL;
    char *file_token = NULL;
    int c, rc;

    /* --json decides how errors look, also those of the options before it. */
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--json") == 0)
            json_errors = true;
    opterr = 0;
    /* GNU getopt permutes: options may come before or after the command and its operands. */
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case O_SOCKET: o.socket = optarg; break;
        case O_URL: o.url = optarg; break;
        case O_TOKEN: o.token = optarg; break;
        case O_TOKEN_FILE: token_file = optarg; break;
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
        case O_SIGN: o.sign = optarg; o.seen |= OPT_SIGN; break;
        case O_TRUST:
            if (o.n_trust == MAX_TRUST)
                return usage_error("at most %d --trust options", MAX_TRUST);
            o.trust[o.n_trust++] = optarg;
            o.seen |= OPT_TRUST;
            break;
        case O_TRUST_DIR: o.trust_dir = optarg; o.seen |= OPT_TRUST_DIR; break;
        case O_TRUST_UNSIGNED: o.trust_unsigned = true; o.seen |= OPT_TRUST_UNSIGNED; break;
        case O_REPLACE_STRONGER:
            o.replace_stronger = true;
            o.seen |= OPT_REPLACE_STRONGER;
            break;
        case O_EXACT: o.exact = true; o.seen |= OPT_EXACT; break;
        case O_OUT: o.out = optarg; o.seen |= OPT_OUT; break;
        case O_PARALLEL: o.parallel = optarg; o.seen |= OPT_PARALLEL; break;
        case O_LIMIT: {
            char *end = NULL;
            errno = 0;
            o.limit = strtol(optarg, &end, 10);
            if (errno || end == optarg || *end || o.limit < 1)
                return usage_error("--limit takes a positive number of candidates, not '%s'",
                                   optarg);
            o.seen |= OPT_LIMIT;
            break;
        }
        case 'h': fputs(usage_text, stdout); return EXIT_OK;
        case O_VERSION: printf("hidetctl %s\n", HIDETD_VERSION); return EXIT_OK;
        case ':': return usage_error("option %s needs a value", argv[optind - 1]);
        default: return usage_error("unknown option %s", argv[optind - 1]);
        }
    }
    char **pos = argv + optind;
    int npos = argc - optind;
    if (o.url && o.socket)
        return usage_error("give --socket or --url, not both");
    /* The token rule every client shares (hidet/client.h, docs/api.md): --token-file, --token,
     * then $HIDETD_TOKEN_FILE and $HIDETD_TOKEN, which libhidet-client reads when o.token is
     * NULL. */
    if (token_file && o.token)
        return usage_error("give --token-file or --token, not both");
    if (token_file) {
        hidet_error e;
        int r = hidet_token_from_file(token_file, &file_token, &e);
        if (r < 0)
            return usage_error("--token-file: %s", e.message);
        o.token = file_token;
    }
    /* A filter naming nothing that exists would silently match nothing: say what exists. */
    tuner_op_kind op_kind;
    char known[160] = "";
    if (o.op && tuner_op_parse(o.op, &op_kind) < 0)
        return usage_error("--op %s: no such op (known ops: %s)", o.op,
                           tuner_op_names(known, sizeof(known)));
    /* "native" (docs/api.md: the exact target of the daemon's first GPU) is the daemon's to
     * resolve; the cache commands, which filter stored entries, say so themselves. */
    tuner_target arch;
    if (o.arch && strcmp(o.arch, "native") != 0 && tuner_target_parse(o.arch, &arch) < 0)
        return usage_error("--arch %s: no such arch (known archs: native, %s)", o.arch,
                           tuner_target_names(known, sizeof(known)));
    tuner_tune_mode tune;
    if (o.tune && tuner_tune_parse(o.tune, &tune) < 0)
        return usage_error("--tune must be none, model or measure");
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
    else if (strcmp(cmd, "stats") == 0)
        rc = cmd_stats(&o, cargc, cargv);
    else if (strcmp(cmd, "warm") == 0)
        rc = cmd_warm(&o, cargc, cargv);
    else if (strcmp(cmd, "graph") == 0)
        rc = cmd_graph(&o, cargc, cargv);
    else if (strcmp(cmd, "cache") == 0)
        rc = cmd_cache(&o, cargc, cargv);
    else if (strcmp(cmd, "keygen") == 0)
        rc = cmd_keygen(&o, cargc, cargv);
    else if (strcmp(cmd, "help") == 0) {
        fputs(usage_text, stdout);
        rc = EXIT_OK;
    } else
        rc = usage_error("unknown command '%s'", cmd);
    free(file_token);
    return rc;
}
