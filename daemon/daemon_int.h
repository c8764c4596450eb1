/* daemon/daemon_int.h - state shared by daemon.c (lifecycle) and server.c (request handlers).
 * Internal to daemon/; loop-thread only. */
#ifndef HIDET_DAEMON_DAEMON_INT_H
#define HIDET_DAEMON_DAEMON_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "cluster/ct.h"
#include "daemon/config.h"
#include "daemon/loop_probe.h"
#include "daemon/metrics.h"
#include "daemon/routes.h"
#include "gpu_workers/gw.h"
#include "graph/service.h"
#include "kernel_cache/kc.h"
#include "proto/http.h"
#include "resolve/resolve.h"
#include "scheduler/sched.h"

/* Status classes counted per endpoint (index into hd_daemon.m_requests). */
#define HD_N_STATUS_SLOTS 18

typedef struct hd_daemon {
    uv_loop_t *loop;
    hd_cli cli;
    hd_config cfg;
    double start_wall_s;
    int exit_code;
    uint64_t nofile;    /* the descriptor limit (raised to the hard limit at start) */

    kc_db *db;
    gw_pool *pool;
    sched *sched;
    resolver *resolver; /* where kernels come from: memory, cache, (remote,) tuning */
    graph_service *graphs; /* POST /v1/graphs: plans, their kernels through the resolver */
    ct_tier *cluster;   /* the cluster tier (Redis), NULL when not configured */
    proto_server *http;
    bool pool_ready_seen; /* gw_pool_start's ready callback ran */
    bool ready;         /* serving */
    bool stopping;      /* SIGINT/SIGTERM seen (or start-up failed) */
    bool bound_socket;  /* we created cfg.socket (so we remove it on an immediate exit) */
    hd_listen_info listen; /* the TCP listeners serving: the auth checks judge these */
    bool warm_done;     /* the start-up warm-up ended (daemon.c); serving waits for it */
    bool serve_wanted;  /* start_serving() was asked before the warm-up ended */

    bool pruning;

        /* SIGINT, SIGTERM and SIGHUP are blocked in every thread and read from a signalfd (see
     * daemon.c: NVRTC installs its own handlers while it compiles). */
    int sig_fd;
    uv_poll_t sig_poll;
    uv_timer_t watchdog, maintenance;
    hd_loop_probe loop_probe; /* hidetd_loop_lag_seconds */
    uint64_t watchdog_usec;
    int handles_open;

    /* Metrics (owned by the registry; NULL when registration failed: updates are then no-ops). */
    hd_metrics *metrics;
    hd_metric_family *f_requests, *f_latency;
    hd_metric *m_requests[HD_ROUTE_COUNT + 1][HD_N_STATUS_SLOTS];
    hd_metric *m_latency[HD_ROUTE_COUNT + 1];
    hd_metric *m_hits, *m_misses, *m_cache_artifacts, *m_cache_bytes, *m_hitcache_entries;
    hd_metric *m_jobs_queued, *m_jobs_running, *m_jobs_done, *m_jobs_failed, *m_jobs_cancelled;
    hd_metric *m_cand_measured, *m_cand_failed, *m_cand_compiled;
    hd_metric *m_compile_s, *m_tuning_s, *m_gpus_usable, *m_conn_active, *m_reloads_ok,
        *m_reloads_failed, *m_restart_pending, *m_start_time, *m_log_dropped,
        *m_quarantined;
    hd_metric *m_loop_lag; /* fed by loop_probe */
    hd_metric *m_cl_up, *m_cl_hits, *m_cl_misses, *m_cl_publishes, *m_cl_pinned, *m_cl_dropped,
        *m_cl_timeouts, *m_cl_errors, *m_cl_connects, *m_cl_latency, *m_cl_leases,
        *m_cl_leases_held, *m_cl_lease_waits, *m_cl_lease_wait_hits, *m_cl_lease_takeovers,
        *m_cl_lease_wait_timeouts, *m_cl_sub_up, *m_cl_wakeups_message, *m_cl_wakeups_poll;
    hd_metric *m_cl_rejected[CT_REJECT_N];
    /* Connection budgets (proto_server_stats, proto_limits): TCP connections with and without a
     * token, evictions and refusals, and the limits in force. */
    hd_metric *m_conn_unauth, *m_conn_auth, *m_conn_evicted, *m_conn_refused, *m_limit_unix,
        *m_limit_tcp, *m_limit_unauth, *m_limit_per_client;
    hd_metric_family *f_restarts, *f_gpu_state, *f_gpu_busy;
    hd_metric_family *f_gpu_oos, *f_gpu_probes, *f_gpu_next_probe, *f_gpu_hung_kills,
        *f_gpu_loop_stalls, *f_gpu_log_dropped;
    hd_metric *m_graph_bytes, *m_graph_entries, *m_graph_evictions, *m_graph_works,
        *m_graph_refused;
} hd_daemon;

/* server.c: the proto handler and completion hook. */
void hd__handle(proto_request *req, void *udata);
void hd__on_complete(const proto_request *req, int status, size_t body_bytes, double duration_s,
                     void *udata);
/* server.c: the admission hook (Origin, Host, the token), run before a request's body is read. */
bool hd__admit(proto_request *req, void *udata, proto_refusal *ret);
/* Registers the metric families (failures leave NULL metrics, which are no-ops). */
void hd__metrics_setup(hd_daemon *d);

#endif
