/* daemon/answers.h - the JSON bodies hidetd answers with (docs/api.md, "Agreed wire formats").
 *
 * Pure functions from the modules' structs (sched_job_info, tuner_space, gw_device_info, ...) to
 * JSON text, so the exact wire format is unit-tested without sockets. The kernel set itself is
 * rendered by the resolve layer (resolve_kernel_set_json()). Every function returns 0 and a
 * malloc'd NUL-terminated string in *ret (caller frees), or a negative errno (-EINVAL, -ENOMEM);
 * *ret is untouched on failure. Nothing here logs or touches the loop.
 */
#ifndef HIDET_DAEMON_ANSWERS_H
#define HIDET_DAEMON_ANSWERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/ct.h"
#include "gpu_workers/gw.h"
#include "scheduler/sched.h"
#include "tuner/tuner.h"

/* The job object {"job":{...}} of one job. */
int hd_job_json(const sched_job_info *info, char **ret);
/* {"jobs":[<job object>...]} */
int hd_jobs_json(const sched_job_info *infos, size_t n, char **ret);

/* The POST /v1/spaces answer: candidates in `order` (ranked, best first) with their
 * predictions (indexed by item index). */
int hd_space_json(const tuner_op *op, const tuner_target *t, const tuner_space *space,
                  const size_t *order, const double *predicted_us, char **ret);

/* Everything GET /v1/status shows. */
typedef struct hd_status_view {
    const char *version;
    double uptime_s;
    bool gpu_available;
    const gw_device_info *devices;
    size_t n_devices;
    uint64_t jobs_queued, jobs_running, jobs_done, jobs_failed;
    bool have_cache_stats;
    kc_stats cache;
    const char *cache_path;
    /* Added for hidetctl stats, after the fields above so older initialisers keep meaning: kernel
     * requests answered from a cache (hits) or tuned (misses) since start, the cache's size cap
     * (0: none), cancelled jobs, and candidates compiled, measured and failed by the jobs. */
    uint64_t cache_hits, cache_misses, cache_max_bytes, jobs_cancelled;
    uint64_t candidates_compiled, candidates_measured, candidates_failed;
    const ct_stats *cluster; /* NULL: no cluster tier (the answer has no "cluster" then) */
} hd_status_view;
int hd_status_json(const hd_status_view *v, char **ret);

#endif
