/* scheduler/sched.h - tuning jobs: one job per key, priorities, budgets, progress, cancellation.
 *
 * Every kernel request that misses the cache becomes (or joins) a job keyed by its op key, so
 * concurrent identical requests on any transport wait on the same work. A job builds the schedule
 * space, ranks it with the cost model, and then - by mode - picks the default, the model's best,
 * or measures candidates on GPU workers (compiling the next candidates on libuv's thread pool
 * while the current ones are timed), records every trial in the cache, stores the winner and
 * answers every waiter. Fused variants reuse the anchor's trials and re-time only its best few.
 * A dynamic op's range is measured at its top and its middle (tune.c, "Measured ranges").
 *
 * Runs on the loop thread; callbacks run on the loop thread.
 */
#ifndef HIDET_SCHEDULER_SCHED_H
#define HIDET_SCHEDULER_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "gpu_workers/gw.h"
#include "kernel_cache/kc.h"
#include "op/op.h"

typedef struct sched sched;
typedef struct sched_waiter sched_waiter;

typedef struct sched_config {
    double budget_s;          /* default wall-clock budget of a measured job (default 60) */
    int budget_candidates;    /* default cap on candidates measured (default 128) */
    int fused_retime_top;     /* fused variant with a tuned anchor: re-time this many (default 5) */
    int compile_ahead;        /* candidates a job compiles ahead of measurement; 0: automatic */
    int compile_threads;      /* threads of libuv's pool, where compiles run (0: 4) */
    bool measure_requires_gpu; /* true: tune:"measure" without a GPU is refused (503) */
    int max_queued_jobs;      /* beyond this, submit returns -EAGAIN (429) (default 1024) */
    /* Added by the scheduler: */
    int max_running_jobs;     /* jobs running at once; the rest wait in priority order (default 4) */
    /* Fair sharing: one client (sched_request.peer) may have at most this many queued jobs, and
     * at most max_blocking_per_peer of them at priority blocking; beyond, submit returns -EDQUOT
     * (429 quota_exceeded), and a join moves no job forward past them. 0: half (queued) or a
     * quarter (blocking) of max_queued_jobs. */
    int max_queued_per_peer;
    int max_blocking_per_peer;
} sched_config;

/* Fills c with the defaults above. compile_ahead defaults to 0, automatic: a running job keeps
 * its share of the compile threads busy (compile_threads - 1, one left for other work, divided
 * among the running jobs), and at least 2 candidates per GPU that measures it, so that GPUs are
 * fed even when compiling a candidate takes longer than timing it. */
void sched_config_defaults(sched_config *c);

/* Priorities: lower runs first. */
enum { SCHED_PRIO_BLOCKING = 0, SCHED_PRIO_NORMAL = 1, SCHED_PRIO_BACKGROUND = 2 };

typedef struct sched_request {
    const tuner_op *op;
    tuner_target target;
    tuner_tune_mode mode;
    int priority;
    double budget_s;          /* 0: config default */
    int budget_candidates;    /* 0: config default */
    const char *op_json;      /* canonical op JSON (tuner_op_canonical_json); NULL: made here */
    const char *op_key;       /* sched_op_key(op_json, &target), when the caller has it already;
                               * NULL: computed here */
    const char *peer;         /* who asks ("uid:1000", "token:3fa9...", "tcp:anonymous";
                               * copied): the client a new job is charged to for the per-client
                               * quotas and whose turn it runs in (fair queueing: within a
                               * priority, clients take turns). NULL: the anonymous client ""
                               * (turns, no quota). A join is charged only when it moves the
                               * job forward (see sched_submit). */
} sched_request;

typedef enum {
    SCHED_QUEUED = 0,
    SCHED_RUNNING,
    SCHED_DONE,
    SCHED_FAILED,
    SCHED_CANCELLED,
} sched_state;

const char *sched_state_name(sched_state s);

typedef struct sched_job_info {
    uint64_t id;
    sched_state state;
    char op_key[KC_KEY_LEN + 1];
    char op[24];
    char target[16];
    tuner_tune_mode mode;
    int priority;
    int candidates_total, candidates_done, candidates_failed;
    double best_us;            /* < 0 until one candidate passed; a measured range's: at its top */
    /* MEASURE: the GPUs (pool indices, bit i for device i) that timed this job's candidates, and
     * the final round: the best of each GPU when several timed the job, or on one GPU the few
     * that came within a margin of the best, are timed again one after another on one GPU
     * (final_device, -1 when there was no round) and the fastest there wins. */
    uint32_t measured_on;
    int final_device;
    int final_candidates;
    bool final_changed;        /* the round chose another candidate than the first timings */
    bool final_heated;         /* the round timed each after running it back to back first */
    char best_schedule[256];   /* JSON of the best so far, "" if none */
    /* A measured range (a dynamic op whose range holds more than one size; n_range_dims 0 for
     * every other job): the named dims, the sizes its candidates were timed at - the top (each
     * dim's max, verified) and the middle (unverified) - and the best's time at the middle (< 0
     * until one passed). */
    int n_range_dims;
    char range_dims[TUNER_MAX_DIMS][TUNER_DIM_NAME_LEN];
    int64_t range_top[TUNER_MAX_DIMS], range_mid[TUNER_MAX_DIMS];
    double best_mid_us;
    /* ... and how far the best is from the best candidate anywhere in the range: the worst of its
     * ratios to the least time at each of the range's samples (tuner_range_sample; the times of
     * every candidate timed at both sizes, carried there as the comparison carries them), 1 when
     * it is the best everywhere (< 0 until one passed). A range one kernel serves badly shows
     * here. */
    double range_worst;
    double elapsed_s;
    int waiters;
    /* When DONE: */
    char artifact_key[KC_KEY_LEN + 1];
    bool measured;
    char warning[160];         /* e.g. measured fell back to the cost model: no GPU */
    /* When FAILED: an error code ("compile_error", "no_valid_candidate", "no_gpu", ...) */
    char error_code[32];
    char error[512];
} sched_job_info;

typedef void (*sched_done_cb)(void *udata, const sched_job_info *info);

int sched_new(uv_loop_t *loop, kc_db *db, gw_pool *pool /* may be NULL */, const sched_config *cfg,
              sched **ret);
/* Applies a new config live (budgets, limits). */
void sched_reconfigure(sched *s, const sched_config *cfg);

/* Derives the op key of a request: canonical op JSON + target + codegen version + NVRTC version +
 * numerics flags (SCHED_NUMERICS_FLAGS and the tuner's NVRTC options) + schema version. */
void sched_op_key(const char *op_json, const tuner_target *t, char out[KC_KEY_LEN + 1]);

/* Submits (or joins the existing job for the same op key). `cb` runs exactly once, when the job
 * ends, unless the waiter is detached first. ret_job_id receives the job's id. Returns 0,
 * -EAGAIN (queue full), -EDQUOT (a new job would take req->peer past its share of the queue:
 * max_queued_per_peer queued jobs, or max_blocking_per_peer blocking ones), -ENODEV (measure
 * refused without a GPU), -EINVAL, -ENOMEM, -ESHUTDOWN (draining or freed).
 * Details: the callback never runs inside sched_submit. cb may be NULL (nobody waits; then no
 * waiter is made and *ret_waiter is set to NULL). A waiter is owned by the scheduler and valid
 * until its callback has started or it is detached; never detach it after (or inside) its
 * callback. Queued jobs start by priority, then in turns between clients (req->peer): a client's
 * new job goes to its next round, at the earliest the round being served, so one with a single
 * op waits for at most one job of each other client at its priority. Joining a QUEUED job raises
 * its mode to the strongest asked for; it moves the job forward (a stronger priority, or an
 * earlier turn: the joiner's next round) only within the joiner's own quotas, and the job is then
 * charged to the joiner and runs in its turn; without room the raise is limited or not made, and
 * the join still succeeds (sched.c, "Fair queueing"). Joining a RUNNING job keeps its mode (a
 * measure request joining a running model job gets measured:false and may submit again once it
 * ended). */
int sched_submit(sched *s, const sched_request *req, sched_done_cb cb, void *udata,
                 uint64_t *ret_job_id, sched_waiter **ret_waiter);
/* Stops waiting (the client went away); the job goes on. Accepts NULL. */
void sched_waiter_detach(sched *s, sched_waiter *w);
/* Calls hook(udata, info) once for every job that ends (done, failed or cancelled), before its
 * waiters are answered, whether anyone waits or not: the resolver drops in-memory answers the job
 * may have replaced there. One hook per scheduler; NULL removes it. The hook must not free the
 * scheduler. */
void sched_set_job_end_hook(sched *s, sched_done_cb hook, void *udata);

int sched_job_get(sched *s, uint64_t id, sched_job_info *ret);
/* The id of the queued or running job for op_key, or 0 when there is none (the dispatch table
 * lists such a range as "tuning"). */
uint64_t sched_job_active(sched *s, const char *op_key);
/* Cancels a job: its waiters get SCHED_CANCELLED (error_code "cancelled"), before this returns.
 * -ENOENT if unknown or already ended. */
int sched_job_cancel(sched *s, uint64_t id);
/* Snapshot of recent jobs (active first, then up to 64 ended ones); malloc'd array. */
int sched_jobs_list(sched *s, sched_job_info **ret, size_t *ret_n);

typedef struct sched_stats {
    uint64_t jobs_queued, jobs_running, jobs_done, jobs_failed, jobs_cancelled;
    uint64_t candidates_measured, candidates_failed, candidates_compiled;
    double compile_seconds_total, tuning_seconds_total;
} sched_stats;
void sched_stats_get(sched *s, sched_stats *ret);

/* Stops taking jobs; running ones may finish within grace_s, then are cancelled; `done` runs when
 * nothing is left. Queued jobs are cancelled at once. Jobs cancelled by the drain end as
 * SCHED_CANCELLED with error_code "shutting_down". `done` also waits for thread-pool work that was
 * already running, so uv_loop_close() succeeds afterwards. */
void sched_drain(sched *s, double grace_s, void (*done)(void *udata), void *udata);
/* Cancels whatever is left (waiters get CANCELLED, "shutting_down") and releases the scheduler.
 * Accepts NULL. Memory still used by thread-pool work that is running is released when that
 * work's completion runs on the loop, so keep running the loop (or drain first). Never call it
 * from a sched callback. */
void sched_free(sched *s);

/* Lowers the calling thread's CPU priority (nice 19) and, when the process may use two CPUs or
 * more, keeps it off the lowest of them (left to the loop thread), once per thread. Every piece
 * of CPU-heavy work that runs on libuv's thread pool (NVRTC compiles, code generation, space
 * builds, cache pruning) calls it first, and the daemon runs it on every pool thread before it
 * serves: the loop thread answers cache hits in microseconds only if it never waits for a core
 * behind a compile. */
void sched_thread_background(void);

/* ---- Keys and op helpers (added by the scheduler; pure functions, any thread) ---- */

/* Numeric policy that is part of every op key: fp32 accumulation, tf32 as the op says, and the
 * verification tolerances of this version. Bump it when any of them changes. */
#define SCHED_NUMERICS_FLAGS "accum=f32;tf32=per-op;verify=v1"

/* Artifact key = kc_key(op key, schedule JSON). */
void sched_artifact_key(const char *op_key, const char *schedule_json, char out[KC_KEY_LEN + 1]);

/* Tuning key: kc_key("hidetd-tuning", schema, the canonical JSON of op, target,
 * codegen version, NVRTC version, numerics flags, device name, SM count, driver major, space
 * hash). `dev` is the
 * device the trials are measured on. The op's JSON is tuner_op_canonical_json(), so a
 * fused op's anchor, which only exists as a struct, keys the same record as the same op
 * submitted on its own. Returns 0 or -ENOMEM/-EINVAL. */
int sched_tuning_key(const tuner_op *op, const tuner_target *t, const gw_device_info *dev,
                     const char *space_hash, char out[KC_KEY_LEN + 1]);

/* The key under which a measured range job (a dynamic op, see tune.c) records its candidates'
 * timings at the range's middle: kc_key("hidetd-tuning-mid", tuning_key, the middle sizes
 * "641,..."), so the top's record under tuning_key stays what it always was, and a middle moved
 * by a new rule keys a new record. */
void sched_mid_tuning_key(const char *tuning_key, const int64_t *sizes, int n_sizes,
                          char out[KC_KEY_LEN + 1]);

/* The fusion anchor whose trials a fused op may reuse: tuner_op_strip_fusion() of op. Returns
 * true when op had any fusion (and *anchor is then different from *op); ELEMENTWISE ops have no
 * anchor (false, *anchor = *op). */
bool sched_op_strip_fusion(const tuner_op *op, tuner_op *anchor);

#endif
