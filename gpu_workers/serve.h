/* gpu_workers/serve.h - the worker side of the protocol, shared by hidetd-worker and the stand-in
 * (internal to gpu_workers/).
 *
 * A worker process serves one device over one socket: it says hello, then handles one measure
 * request at a time on the calling thread while a reader thread takes CANCEL / SHUTDOWN frames
 * and a heartbeat thread reports liveness (also while a kernel runs, so the pool can tell a long
 * kernel from a dead process). End of stream or SHUTDOWN ends the process at once with _exit(0):
 * a hung kernel cannot be interrupted any other way, and the worker holds nothing worth saving.
 */
#ifndef HIDET_GPU_WORKERS_SERVE_H
#define HIDET_GPU_WORKERS_SERVE_H

#include <stdatomic.h>
#include <stdbool.h>

#include "gpu_workers/gw.h"

/* Runs one measurement and fills *res (id and device are pre-filled). Sets *fatal when the
 * process must exit after the result is sent (poisoned CUDA context). `cancel` becomes true when
 * the daemon cancels this request; the callee checks it between launches. */
typedef void (*gw__measure_fn)(void *ctx, const gw_measure_req *req, const atomic_bool *cancel,
                               gw_measure_result *res, bool *fatal);

/* Serves fd until the daemon goes away. dev == NULL: sends a HELLO carrying `error` and returns.
 * Returns the process exit code the caller should use (0 on orderly shutdown). */
int gw__serve(int fd, const gw_device_info *dev, const char *error, double heartbeat_s,
              gw__measure_fn measure, void *ctx);

/* Stops the heartbeat thread's messages (the stand-in's simulated hang). */
void gw__serve_stop_heartbeats(void);

/* Sends a LOG line to the daemon (thread-safe; ignored before gw__serve() starts). */
void gw__serve_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parses "--device N --fd FD [--heartbeat S] [--launch-timeout S]" or "--probe". Returns 0, or
 * -EINVAL with a usage message written to stderr. */
typedef struct gw__args {
    bool probe;
    int device, fd;
    double heartbeat_s, launch_timeout_s;
} gw__args;
int gw__parse_args(int argc, char **argv, gw__args *ret);

#endif
