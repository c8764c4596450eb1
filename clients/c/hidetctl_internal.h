/* clients/c/hidetctl_internal.h - what hidetctl's source files share: exit codes, the parsed
 * options, the usage and output helpers (hidetctl.c) and the command entry points (daemon commands
 * in hidetctl_daemon.c and hidetctl_warm.c, cache commands in hidetctl_cache.c). Internal to the
 * hidetctl program.
 *
 * The names carry no module prefix: they are private to one executable (linked with kernel_cache,
 * whose symbols all start with kc_, and libhidet-client, which exports hidet_ only), and they are
 * the names the commands had while hidetctl was one file.
 *
 * Every command returns its exit code (the EXIT_* values, part of the interface).
 */
#ifndef HIDET_CLIENTS_C_HIDETCTL_INTERNAL_H
#define HIDET_CLIENTS_C_HIDETCTL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cJSON.h>

enum {
    EXIT_OK = 0,
    EXIT_DAEMON = 1,   /* the daemon answered an error (or another operation failed) */
    EXIT_USAGE = 2,
    EXIT_CONNECT = 3,
    EXIT_NOT_FOUND = 4,
    EXIT_CORRUPT = 5,  /* verify found a bad or quarantined record, or import corruption */
    EXIT_REFUSED = 6,  /* import refused a file that is intact: not signed by a trusted key, or
                        * it would replace a stronger choice or different code */
};

#define MAX_TRUST 16 /* --trust options */

typedef struct opts {
    const char *socket, *url, *token, *cache;
    bool json;
    const char *arch, *tune, *op, *ptx, *cubin, *older_than, *max_size;
    bool no_wait, watch;
    const char *sign, *trust_dir, *out, *parallel;
    long limit; /* space --limit N (0: all) */
    const char *trust[MAX_TRUST];
    int n_trust;
    bool trust_unsigned, replace_stronger, exact;
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
    OPT_SIGN = 1u << 9,
    OPT_TRUST = 1u << 10,
    OPT_TRUST_DIR = 1u << 11,
    OPT_TRUST_UNSIGNED = 1u << 12,
    OPT_REPLACE_STRONGER = 1u << 13,
    OPT_EXACT = 1u << 14,
    OPT_OUT = 1u << 15,
    OPT_PARALLEL = 1u << 16,
    OPT_LIMIT = 1u << 17,
};

/* --json was given: local errors, like the daemon's, are printed as one JSON object
 * {"error": {"code", "message", "field", "http_status": 0}} on stderr (set before any command). */
extern bool json_errors;
/* Prints "hidetctl: MESSAGE" and a hint at --help on stderr (with --json the JSON error, code
 * "usage"); returns EXIT_USAGE. */
int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "hidetctl: MESSAGE" on stderr (with --json the JSON error, its code named after rc:
 * "not_found", "corrupt", "refused", "failed", ...); returns rc, an EXIT_* code. */
int fail(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints {"error": {"code", "message", "field", "http_status"}} as one line on stderr: the shape
 * of every error under --json, the daemon's (http_status from its answer) and local ones (0). */
void print_json_error(const char *code, const char *message, const char *field, int http_status);
/* 0, or (with the usage error printed) EXIT_USAGE when o has a command option outside allowed
 * (OPT_* bits); cmd names the command in the message. */
int only_opts(const opts *o, unsigned allowed, const char *cmd);

/* Human-readable sizes ("1.5 MiB"), ages ("3h ago"), UTC times, microseconds ("12.3 us", "-" when
 * negative) and a progress bar, each written NUL-terminated into out (cap bytes). */
void fmt_size(uint64_t b, char *out, size_t cap);
void fmt_age(int64_t t, char *out, size_t cap);
void fmt_time(int64_t t, char *out, size_t cap);
void fmt_us(double us, char *out, size_t cap);
void progress_bar(int64_t done, int64_t total, char *out, size_t cap);
/* s made safe to print (malloc'd; NULL only when out of memory): control characters (C0, DEL,
 * C1) and bytes that are not valid UTF-8 become \xNN, a backslash becomes \\. For text read from
 * the database or a file, in table and JSON output alike, so that no stored byte reaches a
 * terminal as a control sequence. NULL prints as "". */
char *safe_text(const char *s);
/* True when safe_text(s) would be s itself. */
bool text_is_safe(const char *s);

/* A table of strings printed with aligned columns; align[i] is 'l' or 'r'. */
typedef struct table {
    size_t ncols, nrows, cap;
    const char *align;
    char **cells; /* nrows * ncols, row 0 is the header */
} table;

/* Appends a row of t->ncols strings (copied; NULL prints as empty). 0 or -ENOMEM. */
int table_row(table *t, ...);
void table_print(table *t, FILE *f);
/* Frees the cells (not t itself). */
void table_free(table *t);
/* Prints j indented, with a newline, on stdout. */
void print_json(const cJSON *j);

/* Daemon commands (hidetctl_daemon.c): argc/argv are the command's operands. */
int cmd_kernel(const opts *o, int argc, char **argv);
int cmd_space(const opts *o, int argc, char **argv);
int cmd_status(const opts *o, int argc, char **argv);
int cmd_jobs(const opts *o, int argc, char **argv);
int cmd_cancel(const opts *o, int argc, char **argv);
/* graph GRAPH.json: POST /v1/graphs, the plan as a table (steps, then buffers). */
int cmd_graph(const opts *o, int argc, char **argv);
/* stats: hit rate, jobs, candidates, cache size and limit, from /v1/status (like ccache -s). */
int cmd_stats(const opts *o, int argc, char **argv);
/* warm FILE...: many requests at once, with progress and a summary (hidetctl_warm.c). */
int cmd_warm(const opts *o, int argc, char **argv);

/* Reads a whole file (path "-": stdin) as NUL-terminated text into *ret (malloc'd); 0 or a
 * negative errno-style code. */
int read_text_file(const char *path, char **ret);
/* Applies --arch, and unless for_space also --tune and --no-wait, to a request object. */
void apply_opts(cJSON *j, const opts *o, bool for_space);
/* One error of libhidet-client as one line of text for people (the daemon's status, code,
 * message and field when it answered), into buf. */
struct hidet_error;
void describe_error(const struct hidet_error *e, char *buf, size_t len);
/* The exit code for a failed client call r (EXIT_CONNECT, EXIT_NOT_FOUND, EXIT_DAEMON). */
int client_exit(int r, const struct hidet_error *e);

struct hidet_client;
/* Opens a client for --url, else --socket, else the default address: 0, or the exit code
 * (EXIT_USAGE for a bad address) after printing why. */
int open_client(const opts *o, struct hidet_client **ret);
/* GET /v1/status from the daemon that --url/--socket (or the default address) names, limited to
 * timeout_ms: 0 and *ret (the answer, a JSON object the caller deletes), or a negative
 * errno-style code with *err filled as libhidet-client fills it. */
int daemon_status(const opts *o, long timeout_ms, cJSON **ret, struct hidet_error *err);

/* cache retune's daemon half (hidetctl_daemon.c). daemon_cache_path: the daemon's kernel
 * database (/v1/status cache.path) in *ret (malloc'd; NULL when it names none). daemon_retune:
 * sends request (an op request with "retune": true) and prints the answer or the job; key is the
 * artifact being re-tuned. Both return an exit code; an unreachable daemon is reported with the
 * address tried. */
int daemon_cache_path(const opts *o, char **ret);
int daemon_retune(const opts *o, const char *request, const char *key);

/* Cache commands (hidetctl_cache.c): argv[0] is the subcommand (ls, show, rm, ...). */
int cmd_cache(const opts *o, int argc, char **argv);
/* keygen [--out PREFIX]: a signing key pair for cache export --sign (hidetctl_cache.c). */
int cmd_keygen(const opts *o, int argc, char **argv);

#endif
