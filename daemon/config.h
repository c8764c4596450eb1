/* daemon/config.h - hidetd's configuration: defaults, the INI-style file, command-line flags.
 *
 * Precedence: built-in defaults < the config file (--config FILE) < the environment
 * (HIDETD_TOKEN_FILE: the token file) < command-line flags. SIGHUP
 * re-reads the file (flags still win) and applies what can change live; the rest is logged as
 * needing a restart and ignored (the checks run on the values in effect). A file with any error
 * is rejected as a whole (file:line: message), and so is an empty file, and a path that is not
 * a regular file (a FIFO would block the reader; config and token files alike).
 *
 * File format: `[section]` headers, `key = value` lines, `#` or `;` comment lines, and ` #`
 * trailing comments outside quotes. Values may be "double quoted" (\" and \\ escapes) to keep
 * spaces or '#'. Every key belongs to a section; unknown sections, unknown keys, keys given twice
 * and bad values are errors.
 *   sizes:     an integer or decimal with an optional unit: B, KiB/MiB/GiB/TiB (x1024; K/M/G/T
 *              mean the same), KB/MB/GB/TB (x1000). "1MiB", "512K", "1.5GiB", "65536".
 *   durations: a number with a unit ms, s, m (min), h, d; bare numbers are seconds; parts may be
 *              chained: "30s", "1m30s", "250ms", "2h".
 *   booleans:  true/false, yes/no, on/off, 1/0.
 *
 * Keys (live = applied on SIGHUP; restart = logged as needing a restart):
 * | section    | key                  | type     | default                                  | on reload |
 * |------------|----------------------|----------|------------------------------------------|-----------|
 * | [server]   | socket               | path     | $HIDETD_SOCKET, else $XDG_RUNTIME_DIR/hidetd.sock, else ~/.cache/hidetd/hidetd.sock | restart |
 * | [server]   | socket_mode          | octal    | 0660                                     | restart   |
 * | [server]   | http                 | [HOST:]PORT or "off" | off (PORT alone binds 127.0.0.1) | restart |
 * | [server]   | tcp_auth             | token|none | token (none: loopback binds only)      | live      |
 * | [server]   | token                | string   | (none) required when http is on          | live      |
 * | [server]   | token_file           | path     | (none) first line is the token           | live      |
 * | [server]   | allowed_hosts        | names    | (none) Host names TCP clients may use besides loopback and the bound address | live |
 * | [server]   | max_body             | size     | 1MiB                                     | live      |
 * | [server]   | max_connections      | integer  | 1024 (each of Unix and TCP, apart)       | live      |
 * | [server]   | unix_max_connections | integer  | 0 (max_connections)                      | live      |
 * | [server]   | tcp_max_connections  | integer  | 0 (max_connections)                      | live      |
 * | [server]   | max_connections_per_client | integer | 0 (half of the larger listener limit) | live   |
 * | [server]   | tcp_unauthenticated_connections | integer | 64 (TCP connections without a valid token yet, all addresses together) | live |
 * | [server]   | tcp_unauthenticated_header_timeout | duration | 2s (their header deadline and idle limit) | live |
 * | [server]   | header_timeout       | duration | 5s (request line and headers)            | live      |
 * | [server]   | request_timeout      | duration | 10s (headers+body of one request)        | live      |
 * | [server]   | idle_timeout         | duration | 60s (idle keep-alive connection)         | live      |
 * | [cache]    | path                 | path     | $XDG_CACHE_HOME/hidetd/kernels.db, else ~/.cache/hidetd/kernels.db | restart |
 * | [cache]    | max_size             | size     | 10GiB (0: unlimited; LRU-pruned hourly)  | live      |
 * | [graphs]   | cache_bytes          | size     | 256MiB (graph partitions and plans kept in memory) | restart |
 * | [graphs]   | max_running          | integer  | 2 (graph threads: graphs planned at once) | restart |
 * | [graphs]   | max_queued           | integer  | 32 (more waiting: 429 graph_queue_full)  | restart   |
 * | [tuning]   | default_mode         | none|model|measure | model (when a request has no "tune") | live |
 * | [tuning]   | default_arch         | native|sm_XX[a] | native (the GPU's exact target; sm_90 without a GPU) | live |
 * | [tuning]   | budget_seconds       | duration | 60s                                      | live      |
 * | [tuning]   | budget_candidates    | integer  | 128                                      | live      |
 * | [tuning]   | fused_retime_top     | integer  | 5                                        | live      |
 * | [tuning]   | measure_requires_gpu | boolean  | false (false: fall back to the model)    | live      |
 * | [tuning]   | max_queued_jobs      | integer  | 1024                                     | live      |
 * | [tuning]   | max_running_jobs     | integer  | 4                                        | live      |
 * | [tuning]   | max_queued_jobs_per_client | integer | 0 (half of max_queued_jobs)       | live      |
 * | [tuning]   | max_blocking_jobs_per_client | integer | 0 (a quarter of max_queued_jobs) | live      |
 * | [workers]  | mode                 | auto|none|standin|path | auto                       | restart   |
 * | [workers]  | path                 | path     | (none) the worker binary when mode=path  | restart   |
 * | [workers]  | launch_timeout       | duration | 2s                                       | restart   |
 * | [workers]  | heartbeat            | duration | 1s                                       | restart   |
 * | [workers]  | max_restarts         | integer  | 5                                        | restart   |
 * | [log]      | level                | debug|info|warn|error | info                        | live      |
 * | [shutdown] | grace                | duration | 30s (running jobs may finish, then cancelled) | live |
 * | [cluster]  | url                  | URL      | (none: no cluster tier) redis://[USER:PASSWORD@]HOST[:PORT][/DB] or unix://PATH | restart |
 * | [cluster]  | prefix               | string   | hidetd (Redis key prefix)                | restart   |
 * | [cluster]  | ttl                  | duration | 30d (entries expire; 0: never)           | restart   |
 * | [cluster]  | timeout              | duration | 1s (connect and every command)           | restart   |
 * | [cluster]  | backoff_max          | duration | 30s (longest wait between reconnects)    | restart   |
 * | [cluster]  | lease                | duration | 30s (a tuning lease lives this long unless renewed) | restart |
 * | [cluster]  | lease_wait           | duration | 10m (longest wait for another node's tuning) | restart |
 * | [cluster]  | lease_poll           | duration | 1s (a waiting node's fallback poll while subscribed) | restart |
 * | [cluster]  | sign_key             | path     | (none: a read-only node, never publishes) | restart  |
 * | [cluster]  | trusted_keys         | paths    | (none: every entry is rejected) *.pub directories or files | restart |
 *
 * Flags: --socket PATH, --cache PATH, --http [HOST:]PORT|off, --http-no-auth, --config FILE,
 * --log-level LEVEL, --workers auto|none|standin|PATH, --token-file FILE, --token TOKEN,
 * --redis URL ([cluster] url; "off" turns the tier off)
 * (visible to every local user in ps: the daemon warns), --version, --help.
 *
 * Nothing here logs or touches the loop; functions return 0 or a negative errno and report
 * problems in a malloc'd *ret_err (caller frees); outputs are untouched on failure.
 */
#ifndef HIDET_DAEMON_CONFIG_H
#define HIDET_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/log.h"
#include "op/op.h"

/* [cache] max_size when the configuration says nothing: 10 GiB. */
#define HD_DEFAULT_CACHE_MAX_SIZE (10ULL * 1024 * 1024 * 1024)

typedef enum {
    HD_WORKERS_AUTO = 0, /* hidetd-worker next to hidetd, or in HIDETD_LIBEXECDIR; none if absent */
    HD_WORKERS_NONE,     /* no GPU pool */
    HD_WORKERS_STANDIN,  /* hidetd-worker-standin (tests, machines without a GPU) */
    HD_WORKERS_PATH,     /* an explicit binary: workers_path */
} hd_workers_mode;

/* [tuning] default_arch: "native" (the GPU worker's exact target when one is present, else
 * sm_90) or a target. */
typedef struct hd_arch_choice {
    bool native;
    tuner_target target; /* when !native; also the fallback of native without a GPU */
} hd_arch_choice;

typedef struct hd_config {
    /* [server] */
    char *socket;           /* never NULL after hd_config_init */
    unsigned socket_mode;
    char *http;             /* NULL: TCP off; else "[HOST:]PORT" as given */
    char *token;            /* NULL: none */
    char *token_file;       /* NULL: none; read by hd_config_finish() into token */
    bool tcp_auth;          /* true (default): every TCP request needs the token */
    char *allowed_hosts;    /* NULL: none; names separated by spaces or commas */
    uint64_t max_body;
    int max_connections;
    int unix_max_connections, tcp_max_connections; /* 0: max_connections */
    int max_connections_per_client;                /* 0: half of the listener's limit */
    int tcp_unauthenticated_connections;           /* TCP connections without a token yet */
    double tcp_unauthenticated_header_timeout;     /* seconds; their header deadline */
    double header_timeout, request_timeout, idle_timeout; /* seconds */
    /* [cache] */
    char *cache_path;
    uint64_t cache_max_size; /* 0: unlimited; default HD_DEFAULT_CACHE_MAX_SIZE */
    /* [graphs] (graph/service.h) */
    uint64_t graph_cache_bytes;
    int graph_max_running, graph_max_queued;
    /* [tuning] */
    tuner_tune_mode default_mode;
    hd_arch_choice default_arch;
    double budget_seconds;
    int budget_candidates;
    int fused_retime_top;
    bool measure_requires_gpu;
    int max_queued_jobs;
    int max_running_jobs;
    int max_queued_jobs_per_client;   /* 0: half of max_queued_jobs */
    int max_blocking_jobs_per_client; /* 0: a quarter of max_queued_jobs */
    /* [workers] */
    hd_workers_mode workers;
    char *workers_path;
    double launch_timeout, heartbeat;
    int max_restarts;
    /* [log] */
    hd_log_level log_level;
    /* [shutdown] */
    double grace;
    /* [cluster] (docs/cluster.md) */
    char *cluster_url;          /* NULL: no cluster tier */
    char *cluster_prefix;       /* NULL: "hidetd" */
    double cluster_ttl;         /* seconds; 0: never expire */
    double cluster_timeout;     /* seconds */
    double cluster_backoff_max; /* seconds */
    double cluster_lease;       /* seconds */
    double cluster_lease_wait;  /* seconds */
    double cluster_lease_poll;  /* seconds: a waiting node's fallback poll (subscriber up) */
    char *cluster_sign_key;     /* NULL: read-only node */
    char *cluster_trusted_keys; /* NULL: none */
} hd_config;

/* Fills c with the built-in defaults (the socket and cache paths from the environment).
 * Returns 0 or -ENOMEM. Release with hd_config_clear(). */
int hd_config_init(hd_config *c);
/* Frees the strings of c and zeroes it; accepts NULL. */
void hd_config_clear(hd_config *c);
/* Deep copy into *ret (which must not hold strings). Returns 0 or -ENOMEM. */
int hd_config_copy(const hd_config *src, hd_config *ret);

/* Applies the keys of an INI text to c. `name` is used in messages ("hidetd.conf:12: ...").
 * All or nothing: on error c is unchanged and *ret_err says "name:line: what". */
int hd_config_load_string(hd_config *c, const char *text, const char *name, char **ret_err);
/* Reads the file and applies it as above; -errno with a message when it cannot be read, is not
 * a regular file (opened without blocking, checked on the descriptor) or is empty (nothing but
 * white space: most often a file caught while it is written; a file of comments only is read). */
int hd_config_load_file(hd_config *c, const char *path, char **ret_err);

/* Command-line flags (values point into argv). */
typedef struct hd_cli {
    const char *socket, *cache, *http, *config, *log_level, *workers, *token, *token_file, *redis;
    bool http_no_auth;
    bool help, version;
} hd_cli;

/* Parses argv. Returns 0, or -EINVAL with a message for an unknown flag, a missing value, a
 * stray argument or a bad value (log level, http address). */
int hd_cli_parse(int argc, char *const *argv, hd_cli *ret, char **ret_err);
/* Usage text (static). */
const char *hd_cli_usage(void);

/* Overrides c with the flags that were given. Returns 0 or -EINVAL/-ENOMEM with a message. */
int hd_config_apply_cli(hd_config *c, const hd_cli *cli, char **ret_err);

/* Cross-key checks and derived values: reads token_file, requires a token when http is on (unless
 * tcp_auth = none, which only a loopback bind may use), requires workers path for mode=path.
 * Returns 0 or -EINVAL with a message. */
int hd_config_finish(hd_config *c, char **ret_err);

/* The whole sequence: defaults, the --config file (if any), flags, finish. */
int hd_config_build(const hd_cli *cli, hd_config *ret, char **ret_err);

/* The configuration a reload would run with: defaults, the --config file, flags, checked by
 * hd_config_finish() as a start would check them; then every key that needs a restart taken
 * from `running` (what is actually bound and running) and the checks run again on the result -
 * so they judge the sockets in use, not an address the file names. The restart keys the file changed are written (space-separated,
 * "server.http ...") into `restart` (may be NULL) and counted in *ret_n_restart (may be NULL):
 * reported, never applied. Returns 0 or a negative errno with a message (running untouched). */
int hd_config_build_reload(const hd_cli *cli, const hd_config *running, hd_config *ret,
                           char *restart, size_t restart_len, int *ret_n_restart, char **ret_err);

/* The TCP listeners a daemon actually serves on (its own and those passed by systemd). */
typedef struct hd_listen_info {
    int n_tcp;            /* TCP listeners */
    bool tcp_public;      /* one of them is bound to an address other than loopback */
    char public_addr[80]; /* the first such, "0.0.0.0:8080", for messages */
} hd_listen_info;

/* The checks that depend on what is bound rather than on what the file says: tcp_auth = none
 * only while every TCP listener is on loopback. Run at start once the listeners exist (a socket
 * passed by systemd is bound by someone else) and on every reload. Returns 0 or -EINVAL with a
 * message. */
int hd_config_check_listeners(const hd_config *c, const hd_listen_info *l, char **ret_err);

/* Compares two configurations key by key. Writes the changed keys ("server.max_body ...",
 * space-separated) that apply live into `live` and those that need a restart into `restart`
 * (either may be NULL). Returns the number of changed keys. */
int hd_config_diff(const hd_config *a, const hd_config *b, char *live, size_t live_len,
                   char *restart, size_t restart_len);

/* Copies every key that needs a restart (socket, cache path, http, workers, ...) from `running`
 * into c, so that after a reload c describes what actually runs. Returns 0 or -ENOMEM (then c
 * may hold a mix; clear it). */
int hd_config_keep_restart_keys(hd_config *c, const hd_config *running);

/* Parsers shared with the tests. Each returns 0 or -EINVAL (ret untouched on failure). */
int hd_parse_size(const char *s, uint64_t *ret);
int hd_parse_duration(const char *s, double *ret_seconds);
int hd_parse_bool(const char *s, bool *ret);

/* Splits "[HOST:]PORT" ("8080", "0.0.0.0:8080", "[::1]:8080", "localhost:8080"); a bare port
 * binds 127.0.0.1. Returns 0 or -EINVAL. host gets the host without brackets. */
int hd_parse_http_addr(const char *s, char *host, size_t host_len, int *ret_port);
/* Whether a host (as returned above) is a loopback address or "localhost". */
bool hd_host_is_loopback(const char *host);

/* The limits as applied: a listener's own limit, else max_connections; the per-client limit,
 * else half of the larger listener limit (at least 1). */
int hd_config_unix_max_connections(const hd_config *c);
int hd_config_tcp_max_connections(const hd_config *c);
int hd_config_max_connections_per_client(const hd_config *c);
/* The job quotas as applied: the configured value, else half (queued) or a quarter (blocking) of
 * max_queued_jobs, at least 1. */
int hd_config_max_queued_jobs_per_client(const hd_config *c);
int hd_config_max_blocking_jobs_per_client(const hd_config *c);

/* Static name of a workers mode ("auto", "none", "standin", "path"; "?" out of range). */
const char *hd_workers_mode_name(hd_workers_mode m);

#endif
