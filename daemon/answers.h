/* daemon/answers.h - the JSON bodies hidetd answers with (docs/api.md, "Agreed wire formats").
 *
 * Pure functions from the modules' structs (kc_artifact, sched_job_info, tuner_space,
 * gw_device_info, ...) to JSON text, so the exact wire format is unit-tested without sockets.
 * Every function returns 0 and a malloc'd NUL-terminated string in *ret (caller frees), or a
 * negative errno (-EINVAL for a stored record that cannot be read, -ENOMEM); *ret is untouched
 * on failure. Nothing here logs or touches the loop.
 */
#ifndef HIDET_DAEMON_ANSWERS_H
#define HIDET_DAEMON_ANSWERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu_workers/gw.h"
#include "kernel_cache/kc.h"
#include "scheduler/sched.h"
#include "tuner/tuner.h"

/* The kernel set of an artifact (PTX and cubin need not be loaded: kc_artifact_get_meta()),
 * rendered from its typed launch (-EINVAL when kc_launch_check() refuses it).
 * `warning` (may be NULL or "") is included only when non-empty. */
int hd_kernel_set_json(const kc_artifact *a, bool cached, const char *warning, char **ret);

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
} hd_status_view;
int hd_status_json(const hd_status_view *v, char **ret);

/* How strongly a stored kernel was chosen: 0 the template default (tune "none"), 1 the cost
 * model's best, 2 measured on a GPU: the artifact's kc_choice, which is ordered that way. */
int hd_artifact_rank(const kc_artifact *a);

/* Whether a stored kernel of `rank` answers a request for `want`: it does when it was chosen
 * at least as strongly. A measure request is also answered by a model-ranked kernel when no GPU
 * can measure (gpu_usable false); *ret_warn is then true (the answer carries a warning).
 * Otherwise the request re-tunes. */
bool hd_rank_answers(int rank, tuner_tune_mode want, bool gpu_usable, bool *ret_warn);

/* The HTTP status for a failed job's error code ("no_gpu" -> 503, "compile_error" -> 500, ...). */
int hd_job_error_status(const char *code);

#endif
