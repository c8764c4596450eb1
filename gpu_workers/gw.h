/* gpu_workers/gw.h - the daemon's side of the GPU worker pool.
 *
 * hidetd never initialises CUDA. It starts one hidetd-worker process per GPU (discovered by a
 * short-lived probe run of the worker), talks to each over a socketpair with the framed protocol
 * of gpu_workers/wire.h, watches heartbeats, and kills and restarts a worker that dies or hangs.
 * A measurement is a self-contained request (cubin images, launches, buffer sizes): the worker
 * knows nothing of ops, only of buffers and launches, so it stays small and op-agnostic.
 *
 * All functions run on the loop thread. Callbacks are called on the loop thread, exactly once per
 * accepted request, also when the pool closes (status GW_CANCELLED).
 */
#ifndef HIDET_GPU_WORKERS_GW_H
#define HIDET_GPU_WORKERS_GW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "op/tmap.h"

#define GW_MAX_BUFFERS 24
#define GW_MAX_LAUNCHES 4
#define GW_MAX_ARGS 12
#define GW_MAX_MAPS TUNER_MAX_TMAPS
#define GW_MAX_DEVICES 16

typedef struct gw_pool gw_pool;
typedef struct gw_ticket gw_ticket;

typedef struct gw_config {
    const char *worker_path;   /* hidetd-worker (or the stand-in) */
    const char *const *worker_args; /* extra argv entries, NULL-terminated; may be NULL */
    int max_devices;           /* 0: all discovered */
    double launch_timeout_s;   /* one kernel launch (default 2 s) */
    double heartbeat_s;        /* worker heartbeat period (default 1 s); 3 missed = hung */
    int max_restarts;          /* consecutive failed starts/crashes before a GPU is out of service (default 5) */
    /* An out-of-service GPU is probed (a worker started; back in service when it says hello)
     * after probe_min_s, then after twice as long after each failed probe, at most probe_max_s
     * (defaults 5 s and 300 s). */
    double probe_min_s, probe_max_s;
    /* Optional: worker events for the daemon's log (starts, deaths, restarts, loop stalls, out of
     * service, probes, back in service), LOG lines and stderr lines of the workers (each line
     * at most GW_LOG_LINE_MAX bytes, rate-limited per worker). level is syslog-like (GW_LOG_*);
     * msg is only valid during the call. Called on the loop thread. */
    void (*log)(void *log_udata, int level, const char *msg);
    void *log_udata;
    /* Time a request gets beyond its launches' allowance (module load, buffers, inputs) before
     * its worker is killed (default 10 s). */
    double request_slack_s;
} gw_config;

enum { GW_LOG_ERR = 3, GW_LOG_WARNING = 4, GW_LOG_INFO = 6, GW_LOG_DEBUG = 7 };

/* A worker's stderr and LOG lines reach the log at most GW_LOG_LINE_MAX bytes each (the rest of
 * a longer line is cut and counted), GW_LOG_BURST lines at once and GW_LOG_RATE lines a second
 * after that; the lines over the rate are dropped and counted (gw_device_info.log_dropped). */
#define GW_LOG_LINE_MAX 512
#define GW_LOG_BURST 50
#define GW_LOG_RATE 10

typedef enum {
    GW_DEV_STARTING = 0,
    GW_DEV_READY,
    GW_DEV_BUSY,
    GW_DEV_RESTARTING,
    GW_DEV_OUT_OF_SERVICE,
} gw_device_state;

typedef struct gw_device_info {
    int index;
    char name[96];
    int sm;            /* 90 for sm_90 */
    int sm_count;
    uint64_t mem_bytes;
    int driver_version; /* cuDriverGetVersion, e.g. 13000 */
    gw_device_state state;
    int restarts;
    int pid;           /* the worker process now serving the device; 0 while none runs */
    uint64_t measured, failed; /* candidates */
    double busy_s;     /* time spent on requests (dispatched to answered), over every worker
                        * process of the device */
    char last_error[160];
    /* Out of service: why (the failure that took it out), since when and when the next probe
     * starts (Unix times; 0 while in service / while no probe is planned). */
    char oos_reason[160];
    double oos_since, next_probe;
    uint64_t oos_count;   /* times taken out of service */
    uint64_t probes;      /* probe workers started for it while out of service */
    uint64_t hung_kills;  /* workers killed because their heartbeats stopped */
    uint64_t loop_stalls; /* health checks that found the loop late and restarted their clock */
    uint64_t log_dropped; /* stderr/LOG lines of its workers dropped by the rate limit */
} gw_device_info;

const char *gw_device_state_name(gw_device_state s);

typedef enum {
    GW_BUF_INPUT = 0,  /* random inputs, uniform in [-1, 1] (integers: gw_measure_req.int_range), regenerated per input set */
    GW_BUF_OUTPUT,     /* candidate output: poisoned (NaN) before each checked run */
    GW_BUF_REF_OUTPUT, /* reference output, always F32 */
    GW_BUF_SCRATCH,    /* workspace; zeroed before each run */
} gw_buf_role;

/* Same values as tuner_dtype. The integer ones are inputs only (gather's index, a cast's input),
 * filled uniformly from the range their buffer names (tuner_int_fill_range); the FP8 ones (an FP8
 * matmul's operands, one byte each) are inputs only too, filled with finite values below 2 in
 * magnitude. */
typedef enum { GW_F16 = 0, GW_BF16 = 1, GW_F32 = 2, GW_I32 = 3, GW_I64 = 4, GW_F8E4M3 = 5, GW_F8E5M2 = 6 } gw_dtype;
#define GW_INT_RANGE_MAX 2147483648LL /* |int_lo|, |int_hi| at most 2^31: i32 holds them */

typedef struct gw_buffer {
    gw_buf_role role;
    gw_dtype dtype;
    uint64_t elems;
} gw_buffer;

/* gw_launch.args[a] of a scalar argument: values[a] passed by value as a `long long` (a dynamic
 * op's dim size). */
#define GW_ARG_I64 (-1)
/* A scalar's bound: JSON numbers carry integers exactly up to 2^53. */
#define GW_ARG_I64_MAX 9007199254740992LL

/* One launch: n_args arguments (buffer pointers and scalars), then n_maps tensor maps passed by
 * value (op/tmap.h), each encoded by the worker for its buffer's address. */
typedef struct gw_launch {
    char name[64];
    uint32_t grid[3], block[3];
    uint32_t shared_bytes;
    int n_args;
    int args[GW_MAX_ARGS]; /* indices into gw_measure_req.buffers, or GW_ARG_I64 */
    /* The value of each GW_ARG_I64 argument (|v| <= GW_ARG_I64_MAX); 0 for a buffer's. */
    int64_t values[GW_MAX_ARGS];
    int n_maps;
    tuner_tmap maps[GW_MAX_MAPS]; /* maps[i].buf: an index into gw_measure_req.buffers */
} gw_launch;

typedef struct gw_module {
    const uint8_t *image; /* cubin (or PTX text, NUL-terminated) */
    size_t image_len;
    int n_launches;
    gw_launch launches[GW_MAX_LAUNCHES];
} gw_module;

typedef struct gw_measure_req {
    uint64_t id;           /* caller's identifier, echoed in results and logs */
    gw_module candidate;
    gw_module reference;   /* may have n_launches == 0 when check is false */
    int n_buffers;
    gw_buffer buffers[GW_MAX_BUFFERS];
    /* Integer (GW_I32, GW_I64) input i is filled uniformly from [int_range[i][0], int_range[i][1])
     * (non-empty, within +-GW_INT_RANGE_MAX); all zero for every other buffer. */
    int64_t int_range[GW_MAX_BUFFERS][2];
    int output_buffer;     /* index of the candidate's GW_BUF_OUTPUT */
    int ref_output_buffer; /* index of the reference's GW_BUF_REF_OUTPUT */
    bool check;            /* verify against the reference before timing */
    double rtol, atol;     /* pass: |out - ref| <= atol * rms(ref) + rtol * |ref| elementwise, no NaN */
    int64_t row_len;       /* > 0: the output's rows (its innermost extent, dividing its elements):
                            * an element's rms is the larger of the whole reference's and its
                            * row's (gpu_workers/compare.h); 0: the whole reference's */
    int warmup;            /* launches before timing (default 3) */
    int min_reps, max_reps;
    double min_time_ms;    /* keep repeating until this much time was timed (bounded by max_reps) */
    double beat_us;        /* > 0: stop early once this candidate is clearly slower than beat_us */
    double heat_ms;        /* > 0: after the warm-up, run the heater (else the candidate) back
                            * to back this long, untimed, so that it is timed at the clock a power
                            * cap leaves a long stream of kernels (the scheduler's final round of
                            * long kernels) */
    gw_module heater;      /* heat_ms > 0 only, may have n_launches == 0: a module on the same
                            * buffers (another schedule of the op) run while heating and once
                            * before each timed span, so that every finalist of a round is timed
                            * at the clock one common neighbour leaves it, not at the clock its
                            * own power draw would hold */
} gw_measure_req;

typedef enum {
    GW_OK = 0,
    GW_WRONG,         /* verification failed */
    GW_FAULT,         /* launch error, illegal address, ... (worker restarted) */
    GW_TIMEOUT,       /* launch exceeded the timeout (worker killed and restarted) */
    GW_LOAD_ERROR,    /* cubin rejected by the driver (bad image, too much shared memory, ...) */
    GW_WORKER_DIED,   /* the worker crashed while measuring (restarted) */
    GW_CANCELLED,
    GW_NO_DEVICE,     /* no usable GPU */
} gw_status;

const char *gw_status_name(gw_status s);

typedef struct gw_measure_result {
    uint64_t id;
    gw_status status;
    int device;
    double median_us, min_us;
    int reps;
    bool early_stopped;  /* stopped because it could not beat beat_us */
    double max_abs_err, max_rel_err; /* max |out-ref| and max |out-ref| / max |ref| */
    char reason[256];
} gw_measure_result;

typedef void (*gw_measure_cb)(void *udata, const gw_measure_result *res);

/* Starts the pool: runs the probe, then one worker per device. Returns 0 even when no GPU is
 * found (the pool then has zero devices); -errno only for bad config or out of memory. `ready`
 * is called once every worker has said hello or given up (may be called before return). */
int gw_pool_start(uv_loop_t *loop, const gw_config *cfg, void (*ready)(void *udata), void *udata,
                  gw_pool **ret);

/* Snapshot of device states (pool-owned array, valid until the next call into the pool). */
size_t gw_pool_devices(gw_pool *pool, const gw_device_info **ret);
/* Number of devices that can take work now or soon (not out of service). */
int gw_pool_usable(gw_pool *pool);
/* The devices of compute capability `sm` (90 for sm_90 and sm_90a: a cubin runs only on its exact
 * sm) that can take work now or soon. Fills ret_idx (GW_MAX_DEVICES entries; may be NULL) with
 * their indices into gw_pool_devices() and returns how many there are; 0 for a NULL pool. */
int gw_pool_usable_for_sm(gw_pool *pool, int sm, int *ret_idx);
/* Why the probe found no device (driver error text, "cannot start ...", ...), or "" when it
 * found some or has not finished. Pool-owned string. */
const char *gw_pool_probe_error(gw_pool *pool);

/* Queues a measurement on `device` (-1: any usable device with the given sm, or any when sm is
 * 0). The request's memory (images included) is copied; the caller may free it on return.
 * Returns 0 and a ticket (valid until the callback), -ENODEV when nothing can run it. */
int gw_measure(gw_pool *pool, int device, int sm, const gw_measure_req *req, gw_measure_cb cb,
               void *udata, gw_ticket **ret_ticket);

/* Cancels a queued or running measurement: the callback runs with GW_CANCELLED (a running one is
 * abandoned; its worker is restarted if it does not answer quickly). */
void gw_cancel(gw_pool *pool, gw_ticket *t);

/* Stops every worker; callbacks of pending requests run with GW_CANCELLED; `done` runs once
 * every handle is closed, then the pool is freed. */
void gw_pool_close(gw_pool *pool, void (*done)(void *udata), void *udata);

#endif
