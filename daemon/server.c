/* daemon/server.c - the v1 request handlers: routing, authorisation, the cache-hit fast path,
 * tuning jobs, kernels by key, jobs, spaces, status, metrics; the access log and request metrics.
 *
 * Everything runs on the loop thread (the space build of POST /v1/spaces goes to the thread
 * pool). The hit path of POST /v1/kernels: a body seen before maps (by its digest) straight to
 * its op key; a new one is parsed and validated (proto), turned into canonical op JSON and an op
 * key. Then a check that the database did not change under the in-memory answer cache, and a
 * hash lookup that hands the stored answer bytes to the socket. Misses read SQLite (selection ->
 * artifact); a miss there becomes (or joins) a tuning job. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <sodium.h>

#include "daemon/answers.h"
#include "daemon/daemon_int.h"
#include "daemon/log.h"
#include "hidetd_config.h"
#include "proto/request.h"
#include "resolve/resolve.h"
#include "tuner/tuner.h"

#define HD_CONTENT_PTX "text/plain; charset=utf-8"
#define HD_CONTENT_CUBIN "application/octet-stream"
/* Status used (for the log and metrics only) when an answer is dropped because the client left. */
#define HD_STATUS_CLIENT_GONE 499

/* What the access log line says beyond method, path, status and time. */
typedef struct req_ctx {
    hd_daemon *d;
    hd_route_id route;
    const char *cache; /* "hit", "miss" or NULL */
    char key[KC_KEY_LEN + 1];
    /* Which key `key` is, as the log line names it: "op_key" (POST /v1/kernels, the op's cache
     * key) or "key" (the artifact key a kernel set answer gives and GET /v1/kernels/KEY takes). */
    const char *key_name;
    resolve_wait *wait; /* while the resolver works on a POST /v1/kernels */
    graph_wait *graph_wait; /* while the graph service works on a POST /v1/graphs */
} req_ctx;

/* ---- small answer helpers --------------------------------------------------------------- */

static void respond_error(proto_request *req, int status, const char *code, const char *message,
                          const char *field)
{
    proto_respond_error(req, status, code, message, field ? field : "");
}

static void respond_owned_json(proto_request *req, int status, char *json)
{
    if (!json) {
        respond_error(req, 500, "internal", "out of memory building the answer", NULL);
        return;
    }
    proto_respond_json(req, status, json);
    free(json);
}

static void respond_errno(proto_request *req, int r, const char *what)
{
    resolve_error e;
    resolve_error_from_errno(&e, r, what);
    respond_error(req, e.status, e.code, e.message, e.field);
}

/* A resolver's (or the graph service's) error as the API's answer; a status or code left unset
 * is an internal error. */
static void respond_resolve_error(proto_request *req, const resolve_error *e)
{
    respond_error(req, e->status ? e->status : 500, e->code[0] ? e->code : "internal", e->message,
                  e->field);
}

/* ---- POST /v1/kernels: the resolve layer decides, this maps its result onto HTTP ---------- */

/* Counts a request as a cache hit or miss once, when the resolver first says which it was. */
static void note_origin(hd_daemon *d, req_ctx *ctx, const resolve_result *res)
{
    if (res->op_key[0]) {
        memcpy(ctx->key, res->op_key, sizeof(ctx->key));
        ctx->key_name = "op_key";
    }
    if (ctx->cache || res->state == RESOLVE_WAITING)
        return;
    if (RESOLVE_ORIGIN_IS_HIT(res->origin)) {
        ctx->cache = "hit";
        hd_counter_inc(d->m_hits);
    } else if (res->origin == RESOLVE_ORIGIN_TUNED) {
        ctx->cache = "miss";
        hd_counter_inc(d->m_misses);
    }
}

static void respond_result(proto_request *req, const resolve_result *res)
{
    switch (res->state) {
    case RESOLVE_ANSWERED:
        proto_respond(req, 200, NULL, res->body, res->len);
        return;
    case RESOLVE_ACCEPTED: {
        char *json = NULL;
        int r = hd_job_json(&res->job, &json);
        if (r < 0) {
            respond_errno(req, r, "reading the new job");
            return;
        }
        char loc[64];
        snprintf(loc, sizeof(loc), "/v1/jobs/%llu", (unsigned long long)res->job.id);
        proto_request_add_header(req, "Location", loc);
        respond_owned_json(req, 202, json);
        return;
    }
    case RESOLVE_FAILED:
        respond_resolve_error(req, &res->error);
        return;
    case RESOLVE_WAITING:
        break;
    }
    respond_error(req, 500, "internal", "the resolver left the request waiting", NULL);
}

static void pending_done(void *udata, const resolve_result *res)
{
    proto_request *req = udata;
    req_ctx *ctx = req->data;
    ctx->wait = NULL;
    /* The access log must say hit or miss before the answer (the completion hook runs inside
     * proto_respond and frees ctx). */
    note_origin(ctx->d, ctx, res);
    proto_request_on_abort(req, NULL, NULL);
    respond_result(req, res);
}

static void pending_abort(proto_request *req, void *udata)
{
    req_ctx *ctx = udata;
    /* The client left: stop waiting, the work goes on (others may wait, and its result is
     * stored for the next request). The answer is dropped by proto. */
    resolve_wait_cancel(ctx->d->resolver, ctx->wait);
    ctx->wait = NULL;
    proto_respond(req, HD_STATUS_CLIENT_GONE, NULL, NULL, 0);
}

/* The client a request's tuning jobs are charged to and take turns as (hd_client_identity):
 * the uid on the Unix socket, the token on TCP. Written into out (64 bytes); returns out. */
static const char *queue_client(const hd_daemon *d, const proto_request *req, char out[64])
{
    hd_client_identity(req->transport == PROTO_TRANSPORT_TCP, req->owner,
                       proto_request_header(req, "Authorization"), d->cfg.token, out, 64);
    return out;
}

static void handle_kernels(proto_request *req, hd_daemon *d, req_ctx *ctx)
{
    resolve_result res;
    char client[64];
    resolve_kernel_body(d->resolver, queue_client(d, req, client), req->body, req->body_len,
                        pending_done, req, &res, &ctx->wait);
    note_origin(d, ctx, &res);
    if (res.state == RESOLVE_WAITING) {
        /* The callback never runs inside the resolver's call. */
        proto_request_on_abort(req, pending_abort, ctx);
        return;
    }
    respond_result(req, &res);
}

/* ---- POST /v1/graphs, GET /v1/graphs/jobs/ID ---------------------------------------------- */

static void respond_graph(proto_request *req, req_ctx *ctx, const graph_result *res)
{
    /* The log says hit when every kernel came from a cache tier. */
    if (res->state == RESOLVE_ANSWERED || res->state == RESOLVE_ACCEPTED)
        ctx->cache = res->kernels_hit == res->kernels ? "hit" : "miss";
    switch (res->state) {
    case RESOLVE_ANSWERED:
        proto_respond(req, 200, NULL, res->body, res->len);
        return;
    case RESOLVE_ACCEPTED: {
        char loc[64];
        snprintf(loc, sizeof(loc), "/v1/graphs/jobs/%llu", (unsigned long long)res->job_id);
        proto_request_add_header(req, "Location", loc);
        proto_respond(req, 202, NULL, res->body, res->len);
        return;
    }
    case RESOLVE_FAILED:
        respond_resolve_error(req, &res->error);
        return;
    case RESOLVE_WAITING:
        break;
    }
    respond_error(req, 500, "internal", "the graph service left the request waiting", NULL);
}

static void graph_pending_done(void *udata, const graph_result *res)
{
    proto_request *req = udata;
    req_ctx *ctx = req->data;
    ctx->graph_wait = NULL;
    proto_request_on_abort(req, NULL, NULL);
    respond_graph(req, ctx, res);
}

static void graph_pending_abort(proto_request *req, void *udata)
{
    req_ctx *ctx = udata;
    graph_wait_cancel(ctx->d->graphs, ctx->graph_wait);
    ctx->graph_wait = NULL;
    proto_respond(req, HD_STATUS_CLIENT_GONE, NULL, NULL, 0);
}

static void handle_graphs(proto_request *req, hd_daemon *d, req_ctx *ctx)
{
    graph_result res;
    char client[64];
    graph_resolve_body(d->graphs, queue_client(d, req, client), req->body, req->body_len,
                       graph_pending_done, req, &res, &ctx->graph_wait);
    if (res.state == RESOLVE_WAITING) {
        proto_request_on_abort(req, graph_pending_abort, ctx);
        return;
    }
    respond_graph(req, ctx, &res);
}

static void handle_graph_job(proto_request *req, hd_daemon *d, const hd_route_match *m)
{
    uint64_t id;
    if (hd_parse_job_id(m->arg, m->arg_len, &id) < 0) {
        respond_error(req, 400, "invalid_field", "a graph job id is a positive decimal number",
                      "id");
        return;
    }
    char *json = NULL;
    int r = graph_job_json(d->graphs, id, &json);
    if (r == -ENOENT) {
        respond_error(req, 404, "not_found", "no such graph job (the daemon keeps the last 256)",
                      NULL);
        return;
    }
    if (r < 0) {
        respond_errno(req, r, "reading the graph job");
        return;
    }
    respond_owned_json(req, 200, json);
}

/* ---- POST /v1/spaces -------------------------------------------------------------------- */

/* Building and ranking a space takes milliseconds (hundreds of candidates through the cost
 * model), so it runs on the thread pool; the tuner's space functions are thread-safe. */
typedef struct space_work {
    uv_work_t work;
    proto_request *req;
    proto_kernel_request kr;
    int r;
    char *err;  /* the tuner's message (-EINVAL) */
    char *json; /* the answer */
} space_work;

static void space_run(uv_work_t *w)
{
    sched_thread_background();
    space_work *sw = w->data;
    tuner_space *space = NULL;
    size_t *order = NULL;
    double *pred = NULL;
    sw->r = tuner_space_build(&sw->kr.op, &sw->kr.opt.target, &space, &sw->err);
    if (sw->r < 0)
        return;
    order = malloc((space->n ? space->n : 1) * sizeof(*order));
    pred = malloc((space->n ? space->n : 1) * sizeof(*pred));
    if (!order || !pred) {
        sw->r = -ENOMEM;
    } else {
        tuner_rank(&sw->kr.op, &sw->kr.opt.target, space, order, pred);
        sw->r = hd_space_json(&sw->kr.op, &sw->kr.opt.target, space, order, pred, &sw->json);
    }
    free(order);
    free(pred);
    tuner_space_free(space);
}

static void space_done(uv_work_t *w, int status)
{
    space_work *sw = w->data;
    proto_request *req = sw->req;
    /* If the client left meanwhile, proto drops the answer. */
    if (status < 0)
        respond_error(req, 503, "shutting_down", "hidetd is shutting down", NULL);
    else if (sw->r == -EINVAL)
        respond_error(req, 422, "invalid_field",
                      sw->err ? sw->err : "this op is not supported on this arch", "arch");
    else if (sw->r < 0)
        respond_errno(req, sw->r, "building the schedule space");
    else
        proto_respond_json(req, 200, sw->json);
    free(sw->err);
    free(sw->json);
    free(sw);
}

static void handle_spaces(proto_request *req, hd_daemon *d)
{
    space_work *sw = calloc(1, sizeof(*sw));
    if (!sw) {
        respond_error(req, 500, "internal", "out of memory", NULL);
        return;
    }
    proto_error perr;
    int r = proto_kernel_request_parse(req->body, req->body_len, &sw->kr, &perr);
    if (r < 0) {
        free(sw);
        respond_error(req, perr.status ? perr.status : 500, perr.code[0] ? perr.code : "internal",
                      perr.message, perr.field);
        return;
    }
    resolve_error rerr;
    if (resolve_apply_defaults(d->resolver, &sw->kr.opt, &rerr) < 0) {
        free(sw);
        respond_resolve_error(req, &rerr);
        return;
    }
    sw->req = req;
    sw->work.data = sw;
    r = uv_queue_work(d->loop, &sw->work, space_run, space_done);
    if (r < 0) {
        free(sw);
        respond_errno(req, r, "queueing the space build");
    }
}

/* ---- GET /v1/kernels/KEY[/ptx|/cubin] ---------------------------------------------------- */

static void handle_kernel_get(proto_request *req, hd_daemon *d, const hd_route_match *m,
                              req_ctx *ctx)
{
    if (!hd_valid_key(m->arg, m->arg_len)) {
        respond_error(req, 400, "invalid_field", "a kernel key is 64 lowercase hex digits", "key");
        return;
    }
    memcpy(ctx->key, m->arg, KC_KEY_LEN);
    ctx->key[KC_KEY_LEN] = '\0';
    ctx->key_name = "key";
    if (m->id == HD_ROUTE_KERNEL) {
        resolve_result res;
        resolve_by_key(d->resolver, ctx->key, &res);
        respond_result(req, &res);
        return;
    }
    /* Code is only handed out after both digests were checked (kc_artifact_get fails closed). */
    kc_artifact *a = NULL;
    int r = kc_artifact_get(d->db, ctx->key, &a);
    if (r == -EBADMSG)
        resolve_quarantine(d->resolver, ctx->key, "a stored blob failed its digest");
    if (r < 0) {
        respond_errno(req, r, "kernel");
        return;
    }
    if (m->id == HD_ROUTE_KERNEL_PTX)
        proto_respond(req, 200, HD_CONTENT_PTX, a->ptx, a->ptx_len);
    else
        proto_respond(req, 200, HD_CONTENT_CUBIN, a->cubin, a->cubin_len);
    kc_artifact_free(a);
}

/* ---- jobs --------------------------------------------------------------------------------- */

static void handle_jobs(proto_request *req, hd_daemon *d)
{
    sched_job_info *infos = NULL;
    size_t n = 0;
    char *json = NULL;
    int r = d->sched ? sched_jobs_list(d->sched, &infos, &n) : 0;
    if (r == 0)
        r = hd_jobs_json(infos, n, &json);
    free(infos);
    if (r < 0) {
        respond_errno(req, r, "listing jobs");
        return;
    }
    respond_owned_json(req, 200, json);
}

static void handle_job(proto_request *req, hd_daemon *d, const hd_route_match *m)
{
    uint64_t id;
    if (hd_parse_job_id(m->arg, m->arg_len, &id) < 0) {
        respond_error(req, 400, "invalid_field", "a job id is a positive decimal number", "id");
        return;
    }
    if (!d->sched) {
        respond_error(req, 404, "not_found", "no such job", NULL);
        return;
    }
    if (m->id == HD_ROUTE_JOB_DELETE) {
        /* An ended job cannot be cancelled any more; it is answered as it is (idempotent). */
        int r = sched_job_cancel(d->sched, id);
        if (r < 0 && r != -ENOENT) {
            respond_errno(req, r, "cancelling the job");
            return;
        }
    }
    sched_job_info info;
    int r = sched_job_get(d->sched, id, &info);
    if (r == -ENOENT) {
        respond_error(req, 404, "not_found", "no such job", NULL);
        return;
    }
    char *json = NULL;
    if (r == 0)
        r = hd_job_json(&info, &json);
    if (r < 0) {
        respond_errno(req, r, "reading the job");
        return;
    }
    respond_owned_json(req, 200, json);
}

/* ---- status and metrics ------------------------------------------------------------------ */

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void handle_status(proto_request *req, hd_daemon *d)
{
    hd_status_view v = {
        .version = HIDETD_VERSION,
        .uptime_s = wall_now() - d->start_wall_s,
        .cache_path = d->cfg.cache_path,
        .cache_max_bytes = d->cfg.cache_max_size,
        .cache_hits = (uint64_t)hd_metric_value(d->m_hits),
        .cache_misses = (uint64_t)hd_metric_value(d->m_misses),
    };
    if (d->pool) {
        v.n_devices = gw_pool_devices(d->pool, &v.devices);
        v.gpu_available = gw_pool_usable(d->pool) > 0;
    }
    if (d->sched) {
        sched_stats st;
        sched_stats_get(d->sched, &st);
        v.jobs_queued = st.jobs_queued;
        v.jobs_running = st.jobs_running;
        v.jobs_done = st.jobs_done;
        v.jobs_failed = st.jobs_failed;
        v.jobs_cancelled = st.jobs_cancelled;
        v.candidates_compiled = st.candidates_compiled;
        v.candidates_measured = st.candidates_measured;
        v.candidates_failed = st.candidates_failed;
    }
    v.have_cache_stats = kc_stats_get(d->db, &v.cache) == 0;
    ct_stats cs;
    if (d->cluster) {
        ct_stats_get(d->cluster, &cs);
        v.cluster = &cs;
    }
    char *json = NULL;
    int r = hd_status_json(&v, &json);
    if (r < 0) {
        respond_errno(req, r, "status");
        return;
    }
    respond_owned_json(req, 200, json);
}

static void handle_metrics(proto_request *req, hd_daemon *d)
{
    char *text = NULL;
    size_t len = 0;
    int r = d->metrics ? hd_metrics_render(d->metrics, &text, &len) : -ENOMEM;
    if (r < 0) {
        respond_errno(req, r, "rendering metrics");
        return;
    }
    proto_respond(req, 200, HD_METRICS_CONTENT_TYPE, text, len);
    free(text);
}

/* ---- dispatch ----------------------------------------------------------------------------- */

void hd__handle(proto_request *req, void *udata)
{
    hd_daemon *d = udata;
    req_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) {
        respond_error(req, 500, "internal", "out of memory", NULL);
        return;
    }
    ctx->d = d;
    ctx->route = HD_ROUTE_NONE;
    req->data = ctx;

    hd_route_match m;
    hd_route_find(req->method, req->path, &m);
    if (m.status == 404) {
        respond_error(req, 404, "not_found", "no such endpoint", NULL);
        return;
    }
    if (m.status == 405) {
        proto_request_add_header(req, "Allow", m.allow);
        char msg[96];
        snprintf(msg, sizeof(msg), "this endpoint allows %s", m.allow);
        respond_error(req, 405, "method_not_allowed", msg, NULL);
        return;
    }
    ctx->route = m.id;
    switch (m.id) {
    case HD_ROUTE_HEALTHZ:
        /* While draining, a keep-alive connection still reaches us: tell load balancers. */
        if (d->stopping)
            proto_respond_json(req, 503, "{\"status\":\"stopping\"}");
        else
            proto_respond_json(req, 200, "{\"status\":\"ok\"}");
        break;
    case HD_ROUTE_STATUS:
        handle_status(req, d);
        break;
    case HD_ROUTE_METRICS:
        handle_metrics(req, d);
        break;
    case HD_ROUTE_KERNELS:
        handle_kernels(req, d, ctx);
        break;
    case HD_ROUTE_KERNEL:
    case HD_ROUTE_KERNEL_PTX:
    case HD_ROUTE_KERNEL_CUBIN:
        handle_kernel_get(req, d, &m, ctx);
        break;
    case HD_ROUTE_SPACES:
        handle_spaces(req, d);
        break;
    case HD_ROUTE_JOBS:
        handle_jobs(req, d);
        break;
    case HD_ROUTE_JOB_GET:
    case HD_ROUTE_JOB_DELETE:
        handle_job(req, d, &m);
        break;
    case HD_ROUTE_GRAPHS:
        handle_graphs(req, d, ctx);
        break;
    case HD_ROUTE_GRAPH_JOB:
        handle_graph_job(req, d, &m);
        break;
    default:
        respond_error(req, 404, "not_found", "no such endpoint", NULL);
    }
}

/* ---- admission: before the body is read and before 100 Continue ------------------------- */

bool hd__admit(proto_request *req, void *udata, proto_refusal *ret)
{
    hd_daemon *d = udata;
    /* A browser page may send requests anywhere; no client of this API is a browser page. */
    if (proto_request_header(req, "Origin")) {
        *ret = (proto_refusal){ 403, "forbidden_origin",
                                "requests from web pages (with an Origin header) are refused" };
        return false;
    }
    if (req->transport != PROTO_TRANSPORT_TCP)
        return true;
    if (!hd_host_allowed(proto_request_header(req, "Host"), req->local_addr,
                         d->cfg.allowed_hosts)) {
        *ret = (proto_refusal){ 403, "forbidden_host",
                                "the Host header does not name this server (see [server] "
                                "allowed_hosts)" };
        return false;
    }
    /* Health checks carry no secret and reveal nothing but "ok": load balancers may probe
     * without the token. */
    bool healthz = strcmp(req->path, "/healthz") == 0 &&
                   (strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0);
    bool authed = hd_auth_allowed(d->cfg.tcp_auth, proto_request_header(req, "Authorization"),
                                  d->cfg.token);
    if (!healthz && !authed) {
        proto_request_add_header(req, "WWW-Authenticate", "Bearer realm=\"hidetd\"");
        *ret = (proto_refusal){ 401, "unauthorized",
                                "TCP requests need \"Authorization: Bearer <token>\"" };
        return false;
    }
    /* A valid token moves the connection out of the small budget that tokenless connections
     * share (whatever their address) into the token's own share. There is one token, so one
     * identity; with tcp_auth = none (loopback binds only) nothing proves who a client is, and
     * the address stands in for it as before. A /healthz probe without the token stays in the
     * tokenless budget. */
    if (authed && proto_request_authenticate(req, d->cfg.tcp_auth ? "token" : req->owner) ==
                      -EBUSY) {
        *ret = (proto_refusal){ 503, "limit_exceeded",
                                "too many open connections from this client; retry later" };
        return false;
    }
    return true;
}

/* ---- completion: access log and request metrics ----------------------------------------- */

static int status_slot(int status)
{
    static const int known[HD_N_STATUS_SLOTS - 1] = { 200, 202, 400, 401, 403, 404, 405, 408,
                                                     409, 413, 422, 429, 431, 499, 500, 503,
                                                     505 };
    for (int i = 0; i < HD_N_STATUS_SLOTS - 1; i++)
        if (known[i] == status)
            return i;
    return HD_N_STATUS_SLOTS - 1;
}

void hd__on_complete(const proto_request *req, int status, size_t body_bytes, double duration_s,
                     void *udata)
{
    hd_daemon *d = udata;
    req_ctx *ctx = req->data;
    hd_route_id route = ctx ? ctx->route : HD_ROUTE_NONE;
    int ri = route == HD_ROUTE_NONE ? HD_ROUTE_COUNT : (int)route;
    int si = status_slot(status);
    if (d->f_requests) {
        hd_metric **slot = &d->m_requests[ri][si];
        if (!*slot) {
            char st[8];
            if (si == HD_N_STATUS_SLOTS - 1)
                snprintf(st, sizeof(st), "other");
            else
                snprintf(st, sizeof(st), "%d", status);
            hd_metric_family_series(d->f_requests, hd_route_label(route), st, slot);
        }
        hd_counter_inc(*slot);
    }
    if (d->f_latency) {
        hd_metric **slot = &d->m_latency[ri];
        if (!*slot)
            hd_metric_family_series(d->f_latency, hd_route_label(route), NULL, slot);
        hd_histogram_observe(*slot, duration_s);
    }
    if (hd_log_enabled(HD_LOG_INFO)) {
        const char *q = req->query && req->query[0] ? "?" : "";
        bool key = ctx && ctx->key[0];
        hd_log_info("%s %s%s%s %d %zuB %.3fms peer=%s%s%s%s%s%s%s", req->method[0] ? req->method : "-",
                    req->path[0] ? req->path : "-", q, q[0] ? req->query : "", status, body_bytes,
                    duration_s * 1000.0, req->peer ? req->peer : "-",
                    ctx && ctx->cache ? " cache=" : "", ctx && ctx->cache ? ctx->cache : "",
                    key ? " " : "", key && ctx->key_name ? ctx->key_name : (key ? "key" : ""),
                    key ? "=" : "", key ? ctx->key : "");
    }
    free(ctx);
}

/* ---- metrics registration and scrape-time gauges ---------------------------------------- */

static void collect(hd_metrics *m, void *udata)
{
    hd_daemon *d = udata;
    (void)m;
    kc_stats ks;
    if (d->db && kc_stats_get(d->db, &ks) == 0) {
        hd_gauge_set(d->m_cache_artifacts, (double)ks.artifacts);
        hd_gauge_set(d->m_cache_bytes, (double)ks.bytes);
    }
    hd_gauge_set(d->m_hitcache_entries, (double)resolve_memory_count(d->resolver));
    if (d->sched) {
        sched_stats st;
        sched_stats_get(d->sched, &st);
        hd_gauge_set(d->m_jobs_queued, (double)st.jobs_queued);
        hd_gauge_set(d->m_jobs_running, (double)st.jobs_running);
        hd_counter_set(d->m_jobs_done, (double)st.jobs_done);
        hd_counter_set(d->m_jobs_failed, (double)st.jobs_failed);
        hd_counter_set(d->m_jobs_cancelled, (double)st.jobs_cancelled);
        hd_counter_set(d->m_cand_measured, (double)st.candidates_measured);
        hd_counter_set(d->m_cand_failed, (double)st.candidates_failed);
        hd_counter_set(d->m_cand_compiled, (double)st.candidates_compiled);
        hd_counter_set(d->m_compile_s, st.compile_seconds_total);
        hd_counter_set(d->m_tuning_s, st.tuning_seconds_total);
    }
    if (d->http) {
        proto_server_stats ps;
        proto_server_stats_get(d->http, &ps);
        hd_gauge_set(d->m_conn_active, (double)ps.connections_active);
        hd_gauge_set(d->m_conn_unauth, (double)ps.connections_tcp_unauthenticated);
        hd_gauge_set(d->m_conn_auth,
                     (double)(ps.connections_tcp - ps.connections_tcp_unauthenticated));
        hd_counter_set(d->m_conn_evicted, (double)ps.connections_evicted);
        hd_counter_set(d->m_conn_refused, (double)ps.connections_refused);
        proto_limits pl;
        proto_server_limits_get(d->http, &pl);
        hd_gauge_set(d->m_limit_unix, pl.max_connections_unix);
        hd_gauge_set(d->m_limit_tcp, pl.max_connections_tcp);
        hd_gauge_set(d->m_limit_unauth, pl.max_unauthenticated_tcp);
        hd_gauge_set(d->m_limit_per_client, pl.max_connections_per_peer);
    }
    hd_gauge_set(d->m_gpus_usable, d->pool ? gw_pool_usable(d->pool) : 0);
    hd_counter_set(d->m_log_dropped, (double)hd_log_dropped());
    hd_counter_set(d->m_quarantined, (double)resolve_quarantined_count(d->resolver));
    graph_service_stats gst;
    graph_service_stats_get(d->graphs, &gst);
    hd_gauge_set(d->m_graph_bytes, (double)gst.bytes);
    hd_gauge_set(d->m_graph_entries, (double)gst.entries);
    hd_counter_set(d->m_graph_evictions, (double)gst.evictions);
    hd_gauge_set(d->m_graph_works, (double)(gst.running + gst.queued));
    hd_counter_set(d->m_graph_refused, (double)gst.refused);
    if (d->cluster) {
        ct_stats cs;
        ct_stats_get(d->cluster, &cs);
        hd_gauge_set(d->m_cl_up, cs.state == CT_STATE_UP ? 1 : 0);
        hd_counter_set(d->m_cl_hits, (double)cs.hits);
        hd_counter_set(d->m_cl_misses, (double)cs.misses);
        hd_counter_set(d->m_cl_publishes, (double)cs.publishes);
        hd_counter_set(d->m_cl_pinned, (double)cs.publish_pinned);
        hd_counter_set(d->m_cl_dropped, (double)cs.publish_dropped);
        hd_counter_set(d->m_cl_timeouts, (double)cs.timeouts);
        hd_counter_set(d->m_cl_errors, (double)cs.errors);
        hd_counter_set(d->m_cl_connects, (double)cs.connects);
        hd_counter_set(d->m_cl_leases, (double)cs.leases);
        hd_gauge_set(d->m_cl_leases_held, (double)cs.leases_held);
        hd_counter_set(d->m_cl_lease_waits, (double)cs.lease_waits);
        hd_counter_set(d->m_cl_lease_wait_hits, (double)cs.lease_wait_hits);
        hd_counter_set(d->m_cl_lease_takeovers, (double)cs.lease_takeovers);
        hd_counter_set(d->m_cl_lease_wait_timeouts, (double)cs.lease_wait_timeouts);
        hd_gauge_set(d->m_cl_sub_up, cs.sub_state == CT_STATE_UP ? 1 : 0);
        hd_counter_set(d->m_cl_wakeups_message, (double)cs.lease_wakeups_message);
        hd_counter_set(d->m_cl_wakeups_poll, (double)cs.lease_wakeups_poll);
        for (int i = 0; i < CT_REJECT_N; i++)
            hd_counter_set(d->m_cl_rejected[i], (double)cs.rejected[i]);
    }
    if (d->pool) {
        const gw_device_info *devs = NULL;
        size_t n = gw_pool_devices(d->pool, &devs);
        for (size_t i = 0; i < n && i < GW_MAX_DEVICES; i++) {
            char dev[16];
            snprintf(dev, sizeof(dev), "%d", devs[i].index);
            hd_metric *r = NULL;
            if (d->f_restarts && hd_metric_family_series(d->f_restarts, dev, NULL, &r) == 0)
                hd_counter_set(r, devs[i].restarts);
            if (d->f_gpu_busy && hd_metric_family_series(d->f_gpu_busy, dev, NULL, &r) == 0)
                hd_counter_set(r, devs[i].busy_s);
            const struct {
                hd_metric_family *f;
                double v;
            } per_gpu[] = { /* counters, but the next probe's time (a gauge) */
                {d->f_gpu_oos, (double)devs[i].oos_count},
                {d->f_gpu_probes, (double)devs[i].probes},
                {d->f_gpu_next_probe, devs[i].next_probe},
                {d->f_gpu_hung_kills, (double)devs[i].hung_kills},
                {d->f_gpu_loop_stalls, (double)devs[i].loop_stalls},
                {d->f_gpu_log_dropped, (double)devs[i].log_dropped},
            };
            for (size_t k = 0; k < sizeof(per_gpu) / sizeof(per_gpu[0]); k++)
                if (per_gpu[k].f && hd_metric_family_series(per_gpu[k].f, dev, NULL, &r) == 0) {
                    hd_counter_set(r, per_gpu[k].v); /* each ignores the other's type */
                    hd_gauge_set(r, per_gpu[k].v);
                }
            for (int s = GW_DEV_STARTING; s <= GW_DEV_OUT_OF_SERVICE; s++) {
                hd_metric *g = NULL;
                if (d->f_gpu_state &&
                    hd_metric_family_series(d->f_gpu_state, dev,
                                            gw_device_state_name((gw_device_state)s), &g) == 0)
                    hd_gauge_set(g, devs[i].state == (gw_device_state)s ? 1 : 0);
            }
        }
    }
}

void hd__metrics_setup(hd_daemon *d)
{
    if (hd_metrics_new(&d->metrics) < 0)
        return;
    hd_metrics *m = d->metrics;
    hd_metrics_family(m, HD_METRIC_COUNTER, "hidetd_requests_total",
                      "HTTP requests answered, by endpoint and status.", "endpoint", "status", NULL,
                      0, &d->f_requests);
    hd_metrics_family(m, HD_METRIC_HISTOGRAM, "hidetd_request_duration_seconds",
                      "Time from a request's first byte to its answer, by endpoint.", "endpoint",
                      NULL, hd_metrics_latency_buckets, hd_metrics_latency_buckets_n,
                      &d->f_latency);
    hd_metrics_counter(m, "hidetd_cache_hits_total",
                       "Kernel requests answered from the cache.", &d->m_hits);
    hd_metrics_counter(m, "hidetd_cache_misses_total",
                       "Kernel requests that needed a tuning job.", &d->m_misses);
    hd_metrics_gauge(m, "hidetd_cache_artifacts", "Artifacts stored in the kernel cache.",
                     &d->m_cache_artifacts);
    hd_metrics_gauge(m, "hidetd_cache_bytes", "Bytes of PTX and cubin stored in the kernel cache.",
                     &d->m_cache_bytes);
    hd_metrics_gauge(m, "hidetd_answer_cache_entries",
                     "Kernel-set answers held in memory for the hit path.", &d->m_hitcache_entries);
    hd_metrics_gauge(m, "hidetd_jobs_queued", "Tuning jobs waiting to run.", &d->m_jobs_queued);
    hd_metrics_gauge(m, "hidetd_jobs_running", "Tuning jobs running.", &d->m_jobs_running);
    hd_metrics_counter(m, "hidetd_jobs_done_total", "Tuning jobs that ended with a kernel.",
                       &d->m_jobs_done);
    hd_metrics_counter(m, "hidetd_jobs_failed_total", "Tuning jobs that failed.",
                       &d->m_jobs_failed);
    hd_metrics_counter(m, "hidetd_jobs_cancelled_total", "Tuning jobs cancelled.",
                       &d->m_jobs_cancelled);
    hd_metrics_counter(m, "hidetd_candidates_measured_total",
                       "Schedule candidates measured on a GPU worker.", &d->m_cand_measured);
    hd_metrics_counter(m, "hidetd_candidates_failed_total",
                       "Schedule candidates that failed (wrong, fault, timeout, compile error).",
                       &d->m_cand_failed);
    hd_metrics_counter(m, "hidetd_candidates_compiled_total",
                       "Schedule candidates compiled with NVRTC.", &d->m_cand_compiled);
    hd_metrics_counter(m, "hidetd_compile_seconds_total", "Seconds spent in NVRTC compiles.",
                       &d->m_compile_s);
    hd_metrics_counter(m, "hidetd_tuning_seconds_total", "Wall-clock seconds of tuning jobs.",
                       &d->m_tuning_s);
    hd_metrics_gauge(m, "hidetd_gpus_usable", "GPU workers that can take work now or soon.",
                     &d->m_gpus_usable);
    hd_metrics_family(m, HD_METRIC_COUNTER, "hidetd_worker_restarts_total",
                      "Restarts of a GPU's worker process.", "device", NULL, NULL, 0,
                      &d->f_restarts);
    hd_metrics_family(m, HD_METRIC_GAUGE, "hidetd_gpu_state",
                      "1 for the current state of each GPU's worker.", "device", "state", NULL, 0,
                      &d->f_gpu_state);
    hd_metrics_family(m, HD_METRIC_COUNTER, "hidetd_gpu_busy_seconds_total",
                      "Seconds each GPU's worker spent on measurement requests.", "device", NULL,
                      NULL, 0, &d->f_gpu_busy);
    hd_metrics_family(m, HD_METRIC_COUNTER, "hidetd_gpu_out_of_service_total",
                      "Times a GPU was taken out of service.", "device", NULL, NULL, 0,
                      &d->f_gpu_oos);
    hd_metrics_family(m, HD_METRIC_COUNTER, "hidetd_gpu_probes_total",
                      "Probe workers started for an out-of-service GPU.", "device", NULL, NULL, 0,
                      &d->f_gpu_probes);
    hd_metrics_family(m, HD_METRIC_GAUGE, "hidetd_gpu_next_probe_timestamp_seconds",
                      "Unix time of an out-of-service GPU's next probe (0: none planned).",
                      "device", NULL, NULL, 0, &d->f_gpu_next_probe);
    hd_metrics_family(m, HD_METRIC_COUNTER, "hidetd_worker_hung_kills_total",
                      "GPU workers killed because their heartbeats stopped.", "device", NULL,
                      NULL, 0, &d->f_gpu_hung_kills);
    hd_metrics_family(m, HD_METRIC_COUNTER, "hidetd_worker_loop_stalls_total",
                      "Worker health checks that found the event loop stalled and restarted "
                      "their clock.", "device", NULL, NULL, 0, &d->f_gpu_loop_stalls);
    hd_metrics_family(m, HD_METRIC_COUNTER, "hidetd_worker_log_lines_dropped_total",
                      "Lines of a GPU worker's output dropped by the log rate limit.", "device",
                      NULL, NULL, 0, &d->f_gpu_log_dropped);
    hd_metrics_gauge(m, "hidetd_http_connections", "Open client connections.", &d->m_conn_active);
    hd_metric_family *tc = NULL, *lim = NULL;
    hd_metrics_family(m, HD_METRIC_GAUGE, "hidetd_http_tcp_connections",
                      "Open TCP connections, by whether they presented a valid token yet.",
                      "auth", NULL, NULL, 0, &tc);
    if (tc) {
        hd_metric_family_series(tc, "unauthenticated", NULL, &d->m_conn_unauth);
        hd_metric_family_series(tc, "authenticated", NULL, &d->m_conn_auth);
    }
    hd_metrics_family(m, HD_METRIC_GAUGE, "hidetd_http_connection_limit",
                      "Connection budgets in force: per listener, the tokenless TCP budget, and "
                      "one client's share (a uid, a token).", "budget", NULL, NULL, 0, &lim);
    if (lim) {
        hd_metric_family_series(lim, "unix", NULL, &d->m_limit_unix);
        hd_metric_family_series(lim, "tcp", NULL, &d->m_limit_tcp);
        hd_metric_family_series(lim, "tcp_unauthenticated", NULL, &d->m_limit_unauth);
        hd_metric_family_series(lim, "per_client", NULL, &d->m_limit_per_client);
    }
    hd_metrics_counter(m, "hidetd_http_connections_evicted_total",
                       "Tokenless TCP connections closed to make room in their full budget.",
                       &d->m_conn_evicted);
    hd_metrics_counter(m, "hidetd_http_connections_refused_total",
                       "Connections refused with 503 at accept (a listener's or a client's limit).",
                       &d->m_conn_refused);
    hd_metrics_counter(m, "hidetd_config_reloads_total", "Configuration reloads applied.",
                       &d->m_reloads_ok);
    hd_metrics_counter(m, "hidetd_config_reload_failures_total",
                       "Configuration reloads rejected (the old configuration was kept).",
                       &d->m_reloads_failed);
    hd_metrics_gauge(m, "hidetd_config_restart_pending",
                     "Keys the configuration file changed that need a restart (ignored until "
                     "then), as of the last reload applied.", &d->m_restart_pending);
    /* The cluster tier's families exist on every daemon (all zero without a tier), so dashboards
     * and alerts need not know which nodes have one. */
    {
        hd_metrics_gauge(m, "hidetd_cluster_up", "1 when the cluster tier's Redis is connected.",
                         &d->m_cl_up);
        hd_metrics_counter(m, "hidetd_cluster_hits_total",
                           "Verified kernels the cluster tier handed to this node.", &d->m_cl_hits);
        hd_metrics_counter(m, "hidetd_cluster_misses_total",
                           "Cluster lookups without a usable entry (none, tier down, timeout, "
                           "rejected).", &d->m_cl_misses);
        hd_metrics_counter(m, "hidetd_cluster_publishes_total",
                           "Signed entries this node wrote to the cluster tier.",
                           &d->m_cl_publishes);
        hd_metrics_counter(m, "hidetd_cluster_publish_pinned_total",
                           "Publishes not written because an entry was there first (pinned).",
                           &d->m_cl_pinned);
        hd_metrics_counter(m, "hidetd_cluster_publish_dropped_total",
                           "Publishes dropped: the tier was down or the write failed.",
                           &d->m_cl_dropped);
        hd_metric_family *rej = NULL;
        hd_metrics_family(m, HD_METRIC_COUNTER, "hidetd_cluster_rejected_total",
                          "Cluster entries rejected by verification (the op is tuned here).",
                          "reason", NULL, NULL, 0, &rej);
        for (int i = 0; rej && i < CT_REJECT_N; i++)
            hd_metric_family_series(rej, ct_reject_name((ct_reject)i), NULL, &d->m_cl_rejected[i]);
        hd_metrics_counter(m, "hidetd_cluster_timeouts_total",
                           "Redis connects and commands that timed out (the connection is "
                           "dropped and made again).", &d->m_cl_timeouts);
        hd_metrics_counter(m, "hidetd_cluster_errors_total",
                           "Redis connection failures, lost connections and error replies.",
                           &d->m_cl_errors);
        hd_metrics_counter(m, "hidetd_cluster_connects_total",
                           "Connections to Redis made (the first and every reconnect).",
                           &d->m_cl_connects);
        hd_metrics_counter(m, "hidetd_cluster_leases_total",
                           "Tuning leases this node took (it tuned the op for the fleet).",
                           &d->m_cl_leases);
        hd_metrics_gauge(m, "hidetd_cluster_leases_held", "Tuning leases this node holds now.",
                         &d->m_cl_leases_held);
        hd_metrics_counter(m, "hidetd_cluster_lease_waits_total",
                           "Requests that waited for another node's tuning lease.",
                           &d->m_cl_lease_waits);
        hd_metrics_counter(m, "hidetd_cluster_lease_wait_hits_total",
                           "Lease waits answered by the other node's published kernel.",
                           &d->m_cl_lease_wait_hits);
        hd_metrics_counter(m, "hidetd_cluster_lease_takeovers_total",
                           "Leases taken after waiting: the holder ended without a kernel or "
                           "died and its lease expired.", &d->m_cl_lease_takeovers);
        hd_metrics_counter(m, "hidetd_cluster_lease_wait_timeouts_total",
                           "Lease waits that gave up after lease_wait and tuned here.",
                           &d->m_cl_lease_wait_timeouts);
        hd_metrics_gauge(m, "hidetd_cluster_subscriber_up",
                         "1 when the cluster tier's completion-channel subscriber is subscribed.",
                         &d->m_cl_sub_up);
        hd_metric_family *wk = NULL;
        hd_metrics_family(m, HD_METRIC_COUNTER, "hidetd_cluster_lease_wakeups_total",
                          "Lease waits that looked again, by what woke them (a completion "
                          "message or the fallback poll).", "via", NULL, NULL, 0, &wk);
        if (wk) {
            hd_metric_family_series(wk, "message", NULL, &d->m_cl_wakeups_message);
            hd_metric_family_series(wk, "poll", NULL, &d->m_cl_wakeups_poll);
        }
        hd_metrics_histogram(m, "hidetd_cluster_request_duration_seconds",
                             "Round-trip time of Redis commands the cluster tier sent.",
                             hd_metrics_latency_buckets, hd_metrics_latency_buckets_n,
                             &d->m_cl_latency);
    }
    hd_metrics_counter(m, "hidetd_cache_quarantined_total",
                       "Stored kernels put in quarantine because they could not be used (their "
                       "ops are tuned again).", &d->m_quarantined);
    hd_metrics_gauge(m, "hidetd_graph_cache_bytes",
                     "Heap bytes of the graph partitions and plans held in memory ([graphs] "
                     "cache_bytes bounds it).", &d->m_graph_bytes);
    hd_metrics_gauge(m, "hidetd_graph_cache_entries", "Graph partitions held in memory.",
                     &d->m_graph_entries);
    hd_metrics_counter(m, "hidetd_graph_cache_evictions_total",
                       "Graph partitions evicted to stay within [graphs] cache_bytes.",
                       &d->m_graph_evictions);
    hd_metrics_gauge(m, "hidetd_graph_works",
                     "Graphs being parsed, partitioned or rendered on the graph threads, or "
                     "waiting for a turn.", &d->m_graph_works);
    hd_metrics_counter(m, "hidetd_graph_refused_total",
                       "Graph requests refused with 429 graph_queue_full.", &d->m_graph_refused);
    hd_metrics_counter(m, "hidetd_log_lines_dropped_total",
                       "Log lines dropped because the log sink could not keep up.",
                       &d->m_log_dropped);
    hd_metrics_histogram(m, "hidetd_loop_lag_seconds",
                         "How late the event loop ran an event that was due: the wait of a "
                         "request arriving at a random moment before the loop reads it.",
                         hd_metrics_lag_buckets, hd_metrics_lag_buckets_n, &d->m_loop_lag);
    hd_metrics_gauge(m, "hidetd_start_time_seconds", "Unix time hidetd started.",
                     &d->m_start_time);
    hd_gauge_set(d->m_start_time, d->start_wall_s);
    hd_metrics_on_collect(m, collect, d);
}
