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
 *
 * No request holds the loop thread: parsing, canonicalising and partitioning a new body, and
 * rendering a plan, run on the service's own max_running threads at nice 19 (not libuv's pool:
 * libuv 1.44 completes a uv_queue_work through uv_async_send, whose spin made the loop wait for
 * preempted nice-19 workers; see service.c), with up to max_queued more waiting for a turn
 * (beyond that: 429 graph_queue_full). The kernels are
 * asked of the resolver on the loop, RESOLVE_BATCH per loop turn for all graphs together, so a
 * graph of thousands of kernels takes many short turns. What a pool work reads (the body's
 * copy, a new entry, an entry's plan, the kernel sets) is not touched by the loop meanwhile;
 * the cache, the resolver and the scheduler stay on the loop. The partitions and the plans
 * rendered last are cached together within cache_bytes (each entry's heap bytes counted,
 * least recently used evicted first).
 * Every function: loop thread only.
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

typedef struct graph_service_config {
    uint64_t cache_bytes; /* partitions and rendered plans kept, all entries together */
    int max_running;      /* graph threads: works at once (>= 1) */
    int max_queued;       /* requests waiting for a turn beyond those (>= 0) */
} graph_service_config;

#define GRAPH_CACHE_BYTES_DEFAULT (256ull << 20)
#define GRAPH_MAX_RUNNING_DEFAULT 2
#define GRAPH_MAX_QUEUED_DEFAULT 32

void graph_service_config_defaults(graph_service_config *c);

typedef struct graph_service_stats {
    size_t entries;       /* partitions cached */
    uint64_t bytes;       /* their heap bytes, rendered plans included */
    uint64_t evictions;   /* entries evicted to stay within cache_bytes, since the start */
    int running, queued;  /* graph works on the graph threads now, and waiting for a turn */
    uint64_t refused;     /* requests answered 429 graph_queue_full, since the start */
} graph_service_stats;

/* loop is the daemon's (the graph threads' results come back through a poll handle on it); r and s are the daemon's (s may be NULL: graph jobs then report no
 * progress); cfg may be NULL (the defaults). 0 or -ENOMEM. */
int graph_service_new(uv_loop_t *loop, resolver *r, sched *s, const graph_service_config *cfg,
                      graph_service **ret);
/* Outstanding waits get no callback (free it once the resolver has answered them, as
 * resolve_free says); works on the graph threads are skipped when not started, else dropped
 * when they end: the threads are joined and the service's memory goes once the last has come
 * back, so the loop must run on until then (uv_run does: a poll handle keeps it alive).
 * Accepts NULL. */
void graph_service_free(graph_service *gs);

void graph_service_stats_get(const graph_service *gs, graph_service_stats *ret);

/* Resolves a POST /v1/graphs body. For RESOLVE_WAITING, cb runs once later (never inside this
 * call) unless the wait is cancelled first; *ret_wait receives the handle. peer as in
 * resolve_request.peer. */
void graph_resolve_body(graph_service *gs, const char *peer, const char *body, size_t len,
                        graph_cb cb, void *udata, graph_result *ret, graph_wait **ret_wait);
/* The client left: no callback. The kernels' jobs go on; a graph work in progress is skipped
 * when it has not started, else its result is dropped when it ends. */
void graph_wait_cancel(graph_service *gs, graph_wait *w);

/* GET /v1/graphs/jobs/ID: the job's JSON (state, kernels done, candidates measured, the
 * kernels' job ids) in *ret (malloc'd). 0, -ENOENT (unknown or forgotten) or -ENOMEM. */
int graph_job_json(graph_service *gs, uint64_t id, char **ret);

#endif
