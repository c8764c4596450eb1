/* scheduler/sched_int.h - what sched.c (queue, waiters, lifecycle) and tune.c (running one job:
 * spaces, compilation on the thread pool, measurement, artifacts) share. Internal.
 *
 * Ownership: the scheduler owns every job through reference counts. The active list holds one
 * reference per queued or running job, the ring of ended jobs one per entry, and every piece of
 * asynchronous work (thread-pool compile, worker measurement) one while it is outstanding, so a
 * completion that arrives after its job ended (cancelled, drained) finds the job still in memory,
 * sees job->ended and discards its result.
 */
#ifndef HIDET_SCHEDULER_SCHED_INT_H
#define HIDET_SCHEDULER_SCHED_INT_H

#include "scheduler/sched.h"
#include "tuner/tuner.h"

#define SCHED__ENDED_KEPT 64
#define SCHED__N_TRIAL_STATUS 8
/* The final round (tune.c). A job measured on several GPUs times the FINAL_PER_GPU fastest of
 * each GPU again on one GPU: GPUs of one model differ by a few percent (clocks, temperature,
 * power). A job measured on one GPU times again its FINAL_ONE_GPU fastest that came within
 * FINAL_MARGIN of its best: one run each could have ordered them either way (single timings of
 * wgmma kernels moved by 1-3% between runs on an H200), and the luckiest run would win. */
#define SCHED__FINAL_PER_GPU 1
#define SCHED__FINAL_ONE_GPU 3
#define SCHED__FINAL_MARGIN 0.05
/* A job whose best first-round time is HEAT_MIN_US or more times its finalists in the final round
 * after HEAT_MS of running the first round's best back to back (gw_measure_req.heat_ms, .heater),
 * and takes up to FINAL_HEATED of them on one GPU, within HEAT_MARGIN of the best: long kernels
 * run at the clock a power cap leaves them, which the first round's short timings do not see,
 * and which reorders tiles by several percent (H200, FP8 8192x14336x4096: the tune timed a
 * pingpong 128x128 tile 1.4% behind the best, sixth; under the cap it ran 5-6% ahead,
 * bench/results/2026-12-01-h200-session23, f; FP8 row/col 8192^3: 128x128 tiles 4-7% behind
 * the six 128x192-256 finalists at the top clock, which all ran 7-8% behind pingpong 128x128
 * under the cap at 8192x14336x4096, stayed out of a round of six within 5%,
 * bench/results/2026-12-02-h200-session25, d). */
#define SCHED__HEAT_MIN_US 200.0
#define SCHED__HEAT_MS 200.0
#define SCHED__FINAL_HEATED 10
#define SCHED__HEAT_MARGIN 0.10

typedef struct sched_job sched_job;
typedef struct sched_work sched_work;

struct sched_waiter {
    sched_waiter *next;
    sched_job *job;
    sched_done_cb cb;
    void *udata;
};

typedef enum {
    SCHED__CAND_PENDING = 0,
    SCHED__CAND_COMPILING,
    SCHED__CAND_READY,     /* compiled, waiting for a GPU */
    SCHED__CAND_MEASURING,
    SCHED__CAND_DONE,
} sched__cand_state;

/* One candidate of a measured job. Allocated one by one: gw callbacks hold pointers to them. */
typedef struct sched_cand {
    sched_job *job;
    size_t item;           /* index into job->space->items */
    char *schedule_json;
    sched__cand_state st;
    bool has_result;       /* a trial exists (measured now or reused) */
    bool reused;           /* the result came from the cache's trials */
    kc_trial_status status;
    double latency_us;
    tuner_program *prog;   /* kept while READY/MEASURING, and for the best so far */
    tuner_binary *bin;
    gw_ticket *ticket;
    int dev_slot;          /* index into job->devs while measuring */
    int measured_slot;     /* the job's device slot that timed it in this job; -1: none */
    bool in_final;         /* being timed again in the job's final round */
    double final_us;       /* its time in the final round; < 0: none */
    /* A measured range job (job->has_mid) times each candidate twice: at the top, then at the
     * middle (tune.c, "Measured ranges"). */
    bool at_mid;           /* the request in flight is the one at the middle */
    double top_us;         /* the top's time while the middle is timed */
    double top_rel_err;
    char top_reason[160];  /* the top's reason in the final round (heated, behind a heater) */
    double mid_us;         /* its time at the middle; < 0: none */
    double final_mid_us;   /* at the middle in the final round; < 0: none */
} sched_cand;

struct sched_job {
    sched *s;
    sched_job *next; /* active list */
    int refs;
    uint64_t seq;    /* FIFO order within a turn */
    /* Fair queueing: the round of its priority's queue in which the job takes its client's turn
     * (see sched.c, "Fair queueing"). Queued jobs start in order of (priority, turn, seq). */
    int64_t turn;
    bool ended;
    bool running;
    sched_job_info info;

    char peer[64];     /* the client charged for the job and whose turn it runs in: its creator,
                        * or a joiner that moved it forward ("" when none) */
    tuner_op op;       /* immutable after submit: read by thread-pool work */
    tuner_target target;
    char *op_json;
    double budget_s;
    int budget_candidates;
    uint64_t submit_ns, start_ns;
    sched_waiter *waiters;
    sched_work *works; /* thread-pool work in flight (cancelled at the end if not started) */

    /* Running state. */
    tuner_space *space;
    size_t *order;     /* ranked item indices */
    double *pred;      /* predicted_us by item */
    tuner_range_prices prices; /* a dynamic op's (tuner_rank_ranged; carry owned): what carries a
                                  candidate's times to its range's samples */
    double range_best[TUNER_RANGE_SAMPLES]; /* a measured range job's least first-round time at each
                                               of its samples (tune.c, consider_best) */
    size_t attempt;    /* NONE/MODEL: position in order[] (or the default first) being compiled */
    char *first_err;   /* NONE/MODEL: the first compile error, for the failure message */

    /* MEASURE */
    sched_cand **cands;
    size_t n_cands, cap_cands;
    size_t next_compile;
    int n_compiling, n_ready, n_measuring;
    bool stop;         /* budget reached or no GPU left: issue nothing new */
    bool stopped_by_budget, no_gpu_left;
    bool retime;       /* fused op re-timing its anchor's best schedules */
    bool ref_compiling;
    tuner_program *ref_prog;
    tuner_binary *ref_bin;
    char tuning_key[KC_KEY_LEN + 1];
    char device_name[96];
    int devs[GW_MAX_DEVICES];
    bool dev_busy[GW_MAX_DEVICES];
    bool dev_gone[GW_MAX_DEVICES];
    int n_devs;
    int home;          /* the slot of the GPU the job measures on; others only while idle */
    sched_cand *best;  /* fastest correct so far (measured now or reused) */
    kc_trial *trials;  /* recorded earlier under tuning_key (reused, never re-measured) */
    size_t n_trials;
    bool final_round_done;
    int n_final_pending; /* final-round measurements not answered yet */
    int final_slot;      /* the job's device slot the final round times on */
    int fail_counts[SCHED__N_TRIAL_STATUS];
    int cancelled_measurements;
    /* Measured ranges: whether candidates are timed a second time, at mid_sizes (the range's
     * middle, sched__mid_sizes), and the trials recorded there under mid_key. */
    bool has_mid;
    int64_t mid_sizes[TUNER_MAX_DIMS];
    char mid_key[KC_KEY_LEN + 1];
    kc_trial *mid_trials;
    size_t n_mid_trials;
};

struct sched {
    uv_loop_t *loop;
    kc_db *db;
    /* A second connection to db's file for the thread pool: storing a kernel (hundreds of KB of
     * PTX and cubin, and now and then a WAL checkpoint) must not hold the loop thread, nor db's
     * handle lock that the loop's cache hits take. NULL when it could not be opened (an
     * in-memory database): kernels are then stored on the loop thread. */
    kc_db *store_db;
    gw_pool *pool;
    sched_config cfg;
    uint64_t next_id, next_seq;
    /* Fair queueing: by priority, the turn (round) of the job that started last there. */
    int64_t round_now[SCHED_PRIO_BACKGROUND + 1];
    /* How a job that leaves the queue starts: sched__job_start; unit tests of the queue order put
     * their own here (one that records the order and leaves the job running). */
    void (*start_job)(sched_job *j);
    sched_job *active; /* queued and running */
    sched_job *ended[SCHED__ENDED_KEPT];
    size_t ended_head, n_ended;
    int n_queued, n_running;
    sched_stats stats;
    uv_timer_t pump;
    uv_timer_t drain_timer;
    int handles_open;
    int outstanding;   /* thread-pool work and measurements in flight, all jobs */
    bool draining, freeing, drain_fired;
    void (*drain_done)(void *udata);
    void *drain_udata;
    sched_done_cb job_end_hook;
    void *job_end_udata;
};

/* sched.c */
void sched__job_ref(sched_job *j);
void sched__job_unref(sched_job *j);
/* Ends a job (idempotent): cancels its measurements, answers and releases its waiters, moves it
 * to the ended ring. code/msg only for FAILED/CANCELLED (may be NULL). */
void sched__job_end(sched_job *j, sched_state state, const char *code, const char *msg);
/* Called after an outstanding piece of work completed (s->outstanding already decremented and
 * the job unref'd): finishes a pending drain or free. */
void sched__after_outstanding(sched *s);
double sched__now_s(void);

/* tune.c */
/* Starts a job that just left the queue (loop thread). May end it at once. */
void sched__job_start(sched_job *j);
/* Frees the binaries a job holds (when it ends: nothing will be measured or stored any more). */
void sched__job_drop_binaries(sched_job *j);
/* Frees all of a job's running state (when its last reference goes). */
void sched__job_free_run(sched_job *j);
/* Cancels the job's outstanding measurements (their callbacks discard the results). */
void sched__job_cancel_measurements(sched_job *j);
/* The launch description stored with a program's artifact: its launches (size arguments and
 * grid rules of a dynamic op included), workspace, output (named axes) and the op's dims. */
void sched__fill_launch(const tuner_op *op, const tuner_program *p, kc_launch *l);
/* A program's launches as the worker runs them: buffer arguments through bufmap (TUNER_BUF_* ->
 * request buffer index, -1: none), a dynamic op's sizes as GW_ARG_I64 scalars at each dim's
 * max (the tuning sizes the request's buffers are allocated for). */
void sched__map_launches(const tuner_op *op, const tuner_program *p, gw_module *m,
                         const int *bufmap);
/* sched__map_launches at other sizes of a dynamic op's dims (sizes[k]: dim k's, within its
 * range; NULL: the max, as sched__map_launches): the size arguments hold them, each grid
 * dimension with a rule is the rule's value there (tuner_grid_rule_eval), the others keep
 * grid[], and every tensor map is bound to them (tuner_tmap_bind). The buffers stay those of
 * the tuning sizes, which hold every smaller size. 0, or -EINVAL when a map does not bind. */
int sched__map_launches_at(const tuner_op *op, const tuner_program *p, gw_module *m,
                           const int *bufmap, const int64_t *sizes);
/* The second size a measured range job times its candidates at: each named dim at the
 * geometric middle of its range, sqrt(min * max) rounded down to its multiple_of and clamped
 * into [min, max] (below the top for every dim whose range holds two sizes). Fills sizes[0..op->n_dims) and
 * returns true, or false when the op has no dims or its range holds one size. */
bool sched__mid_sizes(const tuner_op *op, int64_t sizes[TUNER_MAX_DIMS]);

#endif
