/* resolve/resolve.h - the one place that decides where a kernel comes from.
 *
 * A kernel request (a validated op and its options) is answered by the first tier that holds a
 * kernel chosen at least as strongly as the request asks:
 *
 *   1. memory   the exact answer bytes of recent hits (kernel_cache/kc_mem.h), and a memo from
 *               request bodies seen before to their op keys, so a repeated body skips parsing;
 *   2. local    the node's SQLite cache: selection -> artifact;
 *   3. remote   a shared tier, when one is plugged in (resolve_remote below); a remote hit is
 *               stored locally first, so the next request is a local hit;
 *   4. tuning   a job of the scheduler (one per op key: identical requests share it).
 *
 * The rank policy: a kernel is chosen by the template default (tune "none"), the cost model
 * ("model") or measured on a GPU ("measure"); a stored kernel answers a request that asks for at
 * most as much. A "measure" request for an arch that no GPU worker can measure is answered by a
 * model-ranked kernel with a warning; when a GPU can measure, a model-ranked kernel is upgraded
 * (the request tunes).
 *
 * A stored record the resolver cannot use (its launch rows do not read back or describe no valid
 * launch, a blob fails its digest) is put in quarantine (kc_quarantine: its selections go) and
 * the request goes on as a miss, so it is tuned again: one damaged row never becomes a lasting
 * 500.
 *
 * The op key is computed once per request (scheduler/keys.c) and carried through every tier and
 * into the job. The memory tier follows the database: a job that ends drops its op's answer (it
 * may have stored or replaced that selection); a commit by another connection (SQLite's
 * data_version, looked at every data_version_ms at most: another process, or the scheduler's
 * store connection) ages every answer, and an aged one is served again only once its op's
 * selection still names the artifact and choice it was rendered from; entries the daemon
 * removes itself drop all (resolve_invalidate()).
 *
 * Results are plain data: an answer (the kernel-set JSON of docs/api.md), an accepted job
 * (wait:false), or an error with the HTTP status, code, message and field the API answers with.
 * daemon/ maps them onto HTTP and nothing more. Loop thread only.
 */
#ifndef HIDET_RESOLVE_RESOLVE_H
#define HIDET_RESOLVE_RESOLVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "gpu_workers/gw.h"
#include "kernel_cache/kc.h"
#include "scheduler/sched.h"
#include "op/op.h"
#include "proto/request.h"

typedef struct resolver resolver;
typedef struct resolve_wait resolve_wait;

/* Which tier answered. NONE: the request ended before any tier was asked (it did not parse). */
typedef enum {
    RESOLVE_ORIGIN_NONE = 0,
    RESOLVE_ORIGIN_MEMORY,
    RESOLVE_ORIGIN_LOCAL,
    RESOLVE_ORIGIN_REMOTE,
    RESOLVE_ORIGIN_TUNED, /* a job ran (or was asked to run) for it: a cache miss */
} resolve_origin;

/* True for the tiers that count as a cache hit. */
#define RESOLVE_ORIGIN_IS_HIT(o) ((o) == RESOLVE_ORIGIN_MEMORY || (o) == RESOLVE_ORIGIN_LOCAL || \
                                  (o) == RESOLVE_ORIGIN_REMOTE)

typedef enum {
    RESOLVE_ANSWERED = 0, /* body/len hold the kernel set */
    RESOLVE_ACCEPTED,     /* wait:false: job holds the accepted job */
    RESOLVE_WAITING,      /* the callback runs later with one of the other states */
    RESOLVE_FAILED,       /* error says why */
} resolve_state;

typedef struct resolve_error {
    int status;        /* the HTTP status the API answers with */
    char code[32];     /* "invalid_field", "queue_full", "no_gpu", ... (docs/api.md) */
    char message[512];
    char field[96];    /* the offending field's path, "" when none */
} resolve_error;

typedef struct resolve_result {
    resolve_state state;
    resolve_origin origin;
    char op_key[KC_KEY_LEN + 1]; /* "" when the request did not get that far */
    /* ANSWERED: the kernel-set JSON. Owned by the resolver: valid until the next call into it
     * (in a callback: until the callback returns). */
    const char *body;
    size_t len;
    /* ACCEPTED: the job (the answer's 202 body is made from it). */
    sched_job_info job;
    /* FAILED */
    resolve_error error;
} resolve_result;

typedef void (*resolve_cb)(void *udata, const resolve_result *res);

/* A kernel request: a validated op (proto_kernel_request_parse) and what the client asked for. */
typedef struct resolve_request {
    const tuner_op *op;
    tuner_target target;
    tuner_tune_mode mode;
    bool wait;
    int priority;          /* SCHED_PRIO_* */
    double budget_s;       /* 0: the scheduler's default */
    int budget_candidates; /* 0: the scheduler's default */
    bool retune;           /* tune again though a kernel is stored (every tier is skipped), and
                            * replace the remote tier's pinned kernel with the result */
    char peer[64];         /* the client (proto_request.owner) a new job is charged to for the
                            * scheduler's per-client quotas; "" for none. An array, not a
                            * pointer: a wait keeps a copy of the request. */
} resolve_request;

/* ---- the remote tier's slot ---------------------------------------------------------------- */

/* The answer of a remote lookup: an artifact with PTX and cubin (checked by the tier: signature
 * and digests) and how it was chosen (a->choice). The receiver owns `a`. NULL: a miss, an error
 * or a timeout; the request goes on to the next tier. */
typedef void (*resolve_remote_done)(void *arg, kc_artifact *a);

/* A shared tier between the local cache and tuning. Every function runs on the loop thread and
 * must never block it. */
typedef struct resolve_remote {
    void *self;
    /* Starts looking op_key up. Calls done exactly once, never inside this call, unless it
     * returns a negative errno (then never: the lookup is taken as a miss). */
    int (*lookup)(void *self, const char *op_key, resolve_remote_done done, void *arg);
    /* Offers a kernel this node just chose (fire and forget). May be NULL (a read-only tier). */
    void (*publish)(void *self, const kc_artifact *a);
    /* May be NULL (then a re-tuned kernel is offered to publish, which keeps what was there).
     * Offers a kernel a re-tune asked for ("retune": true): it replaces the pinned one. */
    void (*republish)(void *self, const kc_artifact *a);
    /* May be NULL (tune at once). Asked after a remote miss, before this node tunes op_key for a
     * request that waits (wait:true), so that a fleet tunes an op once: the tier may hold the
     * request while another node tunes it. Calls done exactly once, never inside this call,
     * unless it returns a negative errno (then this node tunes): with NULL (tune it here) or
     * with the artifact another node published meanwhile (checked as a lookup's). */
    int (*claim)(void *self, const char *op_key, resolve_remote_done done, void *arg);
    /* May be NULL. A job of this node for op_key ended, whatever its outcome (after publish). */
    void (*release)(void *self, const char *op_key);
} resolve_remote;

/* ---- the resolver --------------------------------------------------------------------------- */

typedef struct resolve_config {
    tuner_tune_mode default_mode; /* for a request that names no "tune" */
    /* For a request that names no "arch": the GPU's own target when default_arch_native and a
     * GPU worker is present, else default_target. */
    bool default_arch_native;
    tuner_target default_target;
    size_t memory_entries;        /* answers kept in memory (and request bodies memoised) */
    size_t memory_bytes;          /* bytes of answers kept in memory */
    unsigned data_version_ms;     /* how often at most the hit path asks SQLite whether another
                                   * process changed the database (0: on every request) */
    /* Told (once per record) when a stored record is put in quarantine; may be NULL. */
    void (*on_quarantine)(void *udata, const char *artifact_key, const char *reason);
    /* Told when a kernel could not be stored in the cache (disk full, an I/O error, a record the
     * cache refused): the op key it was for, where it came from ("tuning" - the job then failed
     * with cache_error - or "remote" - it was tuned here instead) and why. May be NULL. */
    void (*on_store_failed)(void *udata, const char *op_key, const char *origin,
                            const char *why);
    void *udata;
} resolve_config;

void resolve_config_defaults(resolve_config *c);

/* sched and pool may be NULL: every miss then fails with 503 shutting_down, and no GPU can
 * measure. The resolver installs the scheduler's job-end hook. Returns 0, -EINVAL or -ENOMEM. */
int resolve_new(uv_loop_t *loop, kc_db *db, sched *s, gw_pool *pool, const resolve_config *cfg,
                resolver **ret);
/* Frees the resolver. Outstanding waits get no callback: free it after the scheduler has
 * answered its waiters (sched_drain, sched_free) and the remote tier has answered or dropped its
 * lookups (unplug and close it first), or with none left. Accepts NULL. */
void resolve_free(resolver *r);

/* Plugs a remote tier in (copied; NULL unplugs it). */
void resolve_set_remote(resolver *r, const resolve_remote *remote);
/* New options on reload: a different default mode changes what a body means, so the memo goes. */
void resolve_reconfigure(resolver *r, const resolve_config *cfg);
/* A request's job options (proto_parse_job_options) completed with the daemon's defaults, in
 * place: a request without "tune" gets resolve_config.default_mode, and opt->target becomes the
 * target the request compiles for. "native" (arch_native) is the exact target of the daemon's
 * GPU: its compute capability, with the "a" suffix where op/ has that target (sm_90a on an H100
 * or H200), from the first GPU the worker pool probed; a request without "arch" gets the
 * configured default (native when a GPU is present, else default_target). 0, or -ENODEV with
 * *err filled (503 no_gpu) for "native" on a daemon without a GPU (then *opt is unchanged). */
int resolve_apply_defaults(const resolver *r, proto_job_options *opt, resolve_error *err);
/* The request for op under options completed by resolve_apply_defaults, charged to client peer
 * (NULL: none). */
resolve_request resolve_request_of(const tuner_op *op, const proto_job_options *opt, const char *peer);
/* New jobs are refused (503 shutting_down) from now on. */
void resolve_drain(resolver *r);
/* Drops every answer held in memory (the daemon removed entries itself: its own commits do not
 * move data_version). */
void resolve_invalidate(resolver *r);

/* Resolves a validated request. Fills *ret with the outcome; for RESOLVE_WAITING, cb(udata, res)
 * runs exactly once later (never inside this call) unless the wait is cancelled first, and
 * *ret_wait (may be NULL only when cb is) receives the handle to cancel it with. */
void resolve_kernel(resolver *r, const resolve_request *rq, resolve_cb cb, void *udata,
                    resolve_result *ret, resolve_wait **ret_wait);

/* A validated request (kr; rq made from it by resolve_request_of, after resolve_apply_defaults):
 * with named dimensions its dispatch table (docs/api.md, "Named dimensions": only the generic set
 * is waited for; kr->dyn's hints and sizes start range jobs), else as resolve_kernel. For
 * callers that hold parsed requests (graph/service.c, a graph's kernels). */
void resolve_kernel_request(resolver *r, const proto_kernel_request *kr, const resolve_request *rq, resolve_cb cb,
                            void *udata, resolve_result *ret, resolve_wait **ret_wait);

/* Resolves a POST /v1/kernels body: a body seen before goes straight to the memory tier by its
 * digest; otherwise it is parsed and validated (proto/request.h; errors come back as
 * RESOLVE_FAILED with the parser's status, code, message and field), the default mode applies
 * when it names no "tune", and it goes on as resolve_kernel(). peer (may be NULL) is the
 * client, as in resolve_request.peer. */
void resolve_kernel_body(resolver *r, const char *peer, const char *body, size_t len,
                         resolve_cb cb, void *udata, resolve_result *ret, resolve_wait **ret_wait);

/* The client went away: its callback will not run. The work goes on (others may wait, and its
 * result is stored for the next request). Never call it after or inside the callback. */
void resolve_wait_cancel(resolver *r, resolve_wait *w);

/* The kernel set of a stored artifact by its key (GET /v1/kernels/<key>): PTX and cubin are read
 * and their digests checked, so a damaged entry is refused here already. */
void resolve_by_key(resolver *r, const char *artifact_key, resolve_result *ret);

/* The API's error for a module's negative errno: -EBADMSG a stored kernel that failed its
 * integrity check (500 integrity_error), -ENOENT (404 not_found), anything else 500 internal;
 * the message starts with `what`. */
void resolve_error_from_errno(resolve_error *e, int r, const char *what);

/* Puts a stored record the caller found unusable in quarantine (e.g. its PTX failed its digest
 * on download): its ops are tuned again on their next request. */
void resolve_quarantine(resolver *r, const char *artifact_key, const char *reason);

/* Answers held in memory now, and records put in quarantine since the start (for /metrics). */
size_t resolve_memory_count(const resolver *r);
uint64_t resolve_quarantined_count(const resolver *r);

/* ---- the parts of the policy, pure functions (unit-tested on their own) --------------------- */

/* The answer's "origin" for a tier: "local" (the memory tier and the local cache: both are this
 * node's cache), "remote", "tuned"; NULL for RESOLVE_ORIGIN_NONE. */
const char *resolve_origin_name(resolve_origin o);

/* The kernel set of an artifact (docs/api.md; PTX and cubin need not be loaded). "origin"
 * (resolve_origin_name()) follows "cached", and is left out for RESOLVE_ORIGIN_NONE (answers of
 * daemons before it existed). `warning` (may be NULL or "") is included only when non-empty.
 * 0 and a malloc'd string in *ret, -EINVAL for a stored record that cannot be read, or -ENOMEM. */
int resolve_kernel_set_json(const kc_artifact *a, bool cached, resolve_origin origin,
                            const char *warning, char **ret);

/* How strongly a stored kernel was chosen: 0 the template default (tune "none"), 1 the cost
 * model's best, 2 measured on a GPU (its kc_choice). */
int resolve_artifact_rank(const kc_artifact *a);

/* Whether a stored kernel of `rank` answers a request for `want`: it does when it was chosen
 * at least as strongly. A measure request is also answered by a model-ranked kernel when no GPU
 * can measure (gpu_usable false); *ret_warn is then true (the answer carries a warning).
 * Otherwise the request re-tunes. */
bool resolve_rank_answers(int rank, tuner_tune_mode want, bool gpu_usable, bool *ret_warn);

/* The HTTP status for an error code ("no_gpu" -> 503, "compile_error" -> 500, ...). */
int resolve_error_status(const char *code);

#endif
