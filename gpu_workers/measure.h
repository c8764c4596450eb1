/* gpu_workers/measure.h - the measurement core of hidetd-worker: loads a candidate cubin, checks
 * it against the reference on random inputs and times it with CUDA events.
 *
 * This is the only code in hidetd that touches the CUDA driver. It lives in its own library so
 * that tests/gpu/ can drive it directly, without a worker process in between. Not thread-safe:
 * one gw_measurer per thread, one per device.
 */
#ifndef HIDET_GPU_WORKERS_MEASURE_H
#define HIDET_GPU_WORKERS_MEASURE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "gpu_workers/gw.h"

typedef struct gw_measurer gw_measurer;

/* Lists the CUDA devices (index, name, sm, sm_count, memory, driver version). Returns 0 with
 * *ret_n devices (at most max; 0 when cuInit fails, with the driver's reason in err). */
int gw_probe_devices(gw_device_info *devs, int max, int *ret_n, char *err, size_t errlen);

/* Initialises CUDA and a context on `device`. launch_timeout_s bounds each launch (a kernel that
 * runs longer is reported as GW_TIMEOUT). Returns 0, or -ENODEV / -EIO with the driver's text in
 * err. *ret is freed with gw_measurer_free(). */
int gw_measurer_new(int device, double launch_timeout_s, gw_measurer **ret, char *err,
                    size_t errlen);

/* The device the measurer runs on. */
const gw_device_info *gw_measurer_device(const gw_measurer *m);

/* Runs one request (see gw_measure_req) and fills *res. *ret_fatal becomes true when the CUDA
 * context is unusable afterwards (fault, timeout): the caller reports the result and exits.
 * cancel may be NULL; when it becomes true the run stops between launches with GW_CANCELLED. */
void gw_measurer_run(gw_measurer *m, const gw_measure_req *req, const atomic_bool *cancel,
                     gw_measure_result *res, bool *ret_fatal);

/* Frees everything (device memory, modules, the context). Accepts NULL; returns NULL. */
gw_measurer *gw_measurer_free(gw_measurer *m);

#endif
