/* gpu_workers/inject.h - planned faults for tests: "the Nth measure request does KIND".
 *
 * Both workers can be told, through the environment, to misbehave on chosen measure requests so
 * that the pool, the scheduler and the daemon can be shown to recover: the stand-in fakes the
 * misbehaviour (HIDETD_STANDIN_FAULTS), the real hidetd-worker runs a planted kernel that really
 * faults or hangs on the GPU (HIDETD_WORKER_PLANT). Requests are counted from 1 across every
 * worker process sharing a state directory, so a worker restarted after a fault goes on counting
 * where the dead one stopped. With no list in the environment nothing is counted or planted.
 */
#ifndef HIDET_GPU_WORKERS_INJECT_H
#define HIDET_GPU_WORKERS_INJECT_H

/* What to do with one request: kind is "" (nothing) or the name from the list ("crash", "hang",
 * "fault", ...); ms is the optional ":MS" argument (0 when absent). */
typedef struct gw__planned {
    char kind[16];
    long ms;
} gw__planned;

/* Reads the list in $list_env ("KIND@N[-M][:MS],...": request N, or requests N to M), takes
 * the next request number (shared through the file "measure-count" in $state_env under flock,
 * else counted by this process) and returns the plan for it. Returns 0 when the list is unset or
 * empty (nothing counted), else the request number. */
long gw__inject_next(const char *list_env, const char *state_env, gw__planned *ret);
/* The same for events other than measure requests (the stand-in's worker starts): counted in
 * the file `counter` of $state_env (a plain name, e.g. "start-count"). */
long gw__inject_next_in(const char *list_env, const char *state_env, const char *counter,
                        gw__planned *ret);

#endif
