/* tests/integration/harness.h - drives the real hidetd binary for end-to-end tests.
 *
 * A test starts hidetd on a temporary socket and database (ht_start), waits until /healthz answers,
 * talks to it with libcurl over the Unix socket or TCP, and stops it at the end. ht_stop() scans
 * the daemon's stderr for sanitizer reports, so a leak or UB in the daemon fails the test that
 * provoked it. Checks count failures instead of aborting, so one run reports every broken case.
 *
 * The binaries come from the environment meson sets: HIDETD_BIN, HIDETCTL_BIN, STANDIN_BIN,
 * and HIDETD_SRC (the source root, for examples/).
 */
#ifndef HIDET_TESTS_HARNESS_H
#define HIDET_TESTS_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

/* One failure count for the test and the harness (tests/check.h's CHECK counts into it). */
extern _Atomic int ht_failures;
#define CHECK_FAILURES ht_failures
#include "tests/check.h"

typedef struct ht_daemon {
    pid_t pid;
    char dir[256];       /* temporary directory holding everything below */
    char socket[300];
    char cache[300];
    char log[300];       /* the daemon's stderr */
    char config[300];    /* "" unless ht_write_config() was called */
    int http_port;       /* 0: TCP off */
    char token_file[300]; /* written by ht_enable_http(): TCP requests send HT_TOKEN */
    const char *extra[16];
    int n_extra;
} ht_daemon;

typedef struct ht_resp {
    long status;
    char *body;          /* NUL-terminated */
    size_t len;
    char content_type[128];
    cJSON *json;         /* parsed body when it is JSON, else NULL */
} ht_resp;

/* Prepares a daemon in a fresh temporary directory (not started). */
void ht_init(ht_daemon *d);
/* Adds one command-line argument (static or long-lived string). */
void ht_arg(ht_daemon *d, const char *arg);
/* Has the daemon use the stand-in worker (--workers standin) with its request counter in a
 * fresh folder under the daemon's (HIDETD_STANDIN_STATE_DIR, so that fault plans count from 1)
 * and no planned faults (HIDETD_STANDIN_FAULTS unset): the environment of this process. */
void ht_use_standin(ht_daemon *d);
/* Writes `text` as the daemon's config file and passes --config. */
void ht_write_config(ht_daemon *d, const char *text);
/* The bearer token ht_enable_http() gives the daemon (in a token file) and ht_request() sends
 * over TCP. */
#define HT_TOKEN "ht-test-token"
/* Enables TCP on a free loopback port, with HT_TOKEN as the token. */
void ht_enable_http(ht_daemon *d);
/* A loopback TCP port that was free a moment ago (exits the test when none can be had). */
int ht_free_port(void);
/* Starts hidetd and waits until /healthz answers (20 s). Returns 0, or -1 (its log is printed). */
int ht_start(ht_daemon *d);
/* Starts hidetd and waits for it to exit within timeout_s; returns its exit status or -1. */
int ht_run_expect_exit(ht_daemon *d, double timeout_s);
/* Sends sig and waits (20 s). Returns the exit status (128+signal if killed), -1 on timeout.
 * With SIGKILL no sanitizer scan is made. */
int ht_stop(ht_daemon *d, int sig);
/* Removes the temporary directory. */
void ht_cleanup(ht_daemon *d);
/* True when the daemon's log holds needle; waits up to 2 s for it (the log is written in
 * batches), so a check that it is absent costs those 2 s. */
bool ht_log_contains(const ht_daemon *d, const char *needle);

/* A growing, NUL-terminated buffer and the libcurl write callback that fills it (for tests that
 * drive curl handles themselves, e.g. many at once with curl_multi). */
typedef struct ht_buf {
    char *buf;
    size_t len;
} ht_buf;
size_t ht_curl_write(char *p, size_t sz, size_t n, void *ud);

/* One HTTP request over the daemon's Unix socket (tcp=false) or TCP. body may be NULL.
 * headers: NULL-terminated "Name: value" strings or NULL. */
ht_resp ht_request(const ht_daemon *d, bool tcp, const char *method, const char *path,
                   const char *body, size_t body_len, const char *const *headers);
ht_resp ht_get(const ht_daemon *d, const char *path);
ht_resp ht_post(const ht_daemon *d, const char *path, const char *body);
void ht_resp_free(ht_resp *r);

/* The error code string of a JSON error answer, or "" */
const char *ht_error_code(const ht_resp *r);

/* Reads a file from the source tree (relative to HIDETD_SRC); malloc'd, NUL-terminated. */
char *ht_read_src(const char *relpath);
/* Writes bytes to path; 0 on success. */
int ht_write_file(const char *path, const void *data, size_t len);
/* Runs a shell command; returns its exit status (or -1). Output goes to out (malloc'd) if non-NULL. */
int ht_sh(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Checks PTX with ptxas for arch ("sm_90"): 0 when accepted; the log is printed otherwise. */
int ht_ptxas(const char *ptx, size_t len, const char *arch);
/* Reads a cubin with cuobjdump -elf; 0 when readable and built for `sm` (90), 1 when cuobjdump is
 * not installed (the caller reports a skip), -1 on failure. */
int ht_cuobjdump(const void *cubin, size_t len, int sm);

/* Disassembles a cubin (cuobjdump -sass) and counts the lines holding `opcode` ("HGMMA"): the
 * count (>= 0), -2 when cuobjdump or the nvdisasm it runs is not installed, -1 when it fails. */
int ht_sass_count(const void *cubin, size_t len, const char *opcode);

/* Test exit: prints a summary, returns the process exit code. */
int ht_finish(const char *name);

#endif
