/* graph/service.h - POST /v1/graphs: a graph's kernels resolved, its launch plan answered.
 *
 * A body is parsed and validated (graph.h), its partition looked up in the plan cache by the
 * graph's canonical text (partitioned once per graph), and every distinct kernel request of the
 * plan is resolved through the resolver like a POST /v1/kernels of its own - the memory and
 * local tiers, the cluster tier, a tuning job - so identical kernels within a graph, across
 * graphs and across clients are tuned once, by one job. When every kernel is in, the
 * intermediates are placed (the workspaces are known by then) and the plan is answered.
 * With "wait": false the answer is a graph job (202) whose progress sums its kernels' jobs
 * (GET /v1/graphs/jobs/ID); once it is done, the same POST answers the plan from the cache.
 * Loop thread only.
 */
#ifndef HIDET_GRAPH_SERVICE_H
#define HIDET_GRAPH_SERVICE_H

#include <stddef.h>
#include <stdint.h>

#include "resolve/resolve.h"

typedef struct graph_service graph_service;
typedef struct graph_wait graph_wait;

typedef struct graph_result {
    resolve_state state; /* ANSWERED, ACCEPTED, FAILED; WAITING: the callback follows */
    /* ANSWERED: the plan; ACCEPTED: the graph job. Owned by the service: valid until the
     * callback returns (or the next call into the service). */
    const char *body;
    size_t len;
    uint64_t job_id;     /* ACCEPTED */
    resolve_error error; /* FAILED */
    int kernels;         /* distinct kernels of the plan */
    int kernels_hit;     /* ... answered by a cache tier */
} graph_result;

typedef void (*graph_cb)(void *udata, const graph_result *res);

/* r and s are the daemon's (s may be NULL: graph jobs then report no progress). 0 or -ENOMEM. */
int graph_service_new(resolver *r, sched *s, graph_service **ret);
/* Outstanding waits get no callback (free it once the resolver has answered them, as
 * resolve_free says). Accepts NULL. */
void graph_service_free(graph_service *gs);

/* Resolves a POST /v1/graphs body. For RESOLVE_WAITING, cb runs once later (never inside this
 * call) unless the wait is cancelled first; *ret_wait receives the handle. peer as in
 * resolve_request.peer. */
void graph_resolve_body(graph_service *gs, const char *peer, const char *body, size_t len,
                        graph_cb cb, void *udata, graph_result *ret, graph_wait **ret_wait);
/* The client left: no callback. The kernels' jobs go on. */
void graph_wait_cancel(graph_service *gs, graph_wait *w);

/* GET /v1/graphs/jobs/ID: the job's JSON (state, kernels done, candidates measured, the
 * kernels' job ids) in *ret (malloc'd). 0, -ENOENT (unknown or forgotten) or -ENOMEM. */
int graph_job_json(graph_service *gs, uint64_t id, char **ret);

/* Plans held in the cache now (for /v1/status). */
size_t graph_service_plans(const graph_service *gs);

#endif
