/* scheduler/sched.c - the job table: submit and join by op key, the priority queue, waiters,
 * cancellation, the ring of ended jobs, stats, drain and free. Running a job is tune.c's part.
 *
 * Everything here runs on the loop thread. Jobs leave the queue from a zero-delay timer ("pump")
 * rather than inside sched_submit, so a submit never calls back into its caller and several
 * submits made in one loop iteration are started in priority order. Within a priority, clients
 * take turns (fair queueing, below).
 */
#include "scheduler/sched_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *sched_state_name(sched_state s)
{
    switch (s) {
    case SCHED_QUEUED: return "queued";
    case SCHED_RUNNING: return "running";
    case SCHED_DONE: return "done";
    case SCHED_FAILED: return "failed";
    case SCHED_CANCELLED: return "cancelled";
    }
    return "unknown";
}

void sched_config_defaults(sched_config *c)
{
    memset(c, 0, sizeof(*c));
    c->budget_s = 60;
    c->budget_candidates = 128;
    c->fused_retime_top = 5;
    c->compile_ahead = 0; /* 0: automatic, see sched.h */
    c->compile_threads = 4;
    c->measure_requires_gpu = false;
    c->max_queued_jobs = 1024;
    c->max_running_jobs = 4;
    c->max_queued_per_peer = 0;   /* 0: half of max_queued_jobs */
    c->max_blocking_per_peer = 0; /* 0: a quarter of max_queued_jobs */
}

/* Zero or negative fields (a config written by hand, or an older caller) take the defaults. */
static void config_normalise(sched_config *c)
{
    sched_config d;
    sched_config_defaults(&d);
    if (!(c->budget_s > 0))
        c->budget_s = d.budget_s;
    if (c->budget_candidates <= 0)
        c->budget_candidates = d.budget_candidates;
    if (c->fused_retime_top <= 0)
        c->fused_retime_top = d.fused_retime_top;
    if (c->compile_ahead < 0)
        c->compile_ahead = 0;
    if (c->compile_threads <= 0)
        c->compile_threads = d.compile_threads;
    if (c->max_queued_jobs <= 0)
        c->max_queued_jobs = d.max_queued_jobs;
    if (c->max_running_jobs <= 0)
        c->max_running_jobs = d.max_running_jobs;
    if (c->max_queued_per_peer <= 0)
        c->max_queued_per_peer = c->max_queued_jobs / 2 > 0 ? c->max_queued_jobs / 2 : 1;
    if (c->max_blocking_per_peer <= 0)
        c->max_blocking_per_peer = c->max_queued_jobs / 4 > 0 ? c->max_queued_jobs / 4 : 1;
}

/* ---- Fair queueing ----------------------------------------------------------------------------
 *
 * Within a priority, clients (sched_request.peer; "" counts as one more client) take turns: each
 * priority's queue runs in rounds, and a client holds at most one job per round. A new job gets
 * its client's next round at its priority: one after the last round the client holds there (its
 * queued and running jobs), but never earlier than the round being served (round_now: that of
 * the job that started last at that priority). Queued jobs start in order of priority, then
 * round, then arrival. A client that floods the queue thus holds rounds far ahead, and a client
 * that comes with one op gets the round being served: at most one job of each other client is
 * ahead of it. A client with nothing queued or running there is forgotten: its next job goes to
 * the round being served. This is start-time fair queueing where every job costs one: clients
 * get the same number of starts, not the same GPU time (a job's length is bounded by budgets).
 *
 * Joining. A job runs in the turn of, and is charged for the quotas to, one client: its creator,
 * or a joiner that moved it forward. A joiner moves a queued job forward when it asks for a
 * stronger priority (the job goes to the joiner's next round at that priority), or when at the
 * job's priority the joiner's next round comes before the job's (so an op that sits deep in
 * another client's backlog makes its joiner wait no longer than an op of its own would). Moving
 * a job forward is charged like a new job: only where the joiner has room under its quotas
 * (max_queued_per_peer, and max_blocking_per_peer for priority blocking), the job itself not
 * counted; its former client gets that room back. Without room the raise is limited to what the
 * joiner's room allows (a blocking join without blocking room raises a background job to normal
 * at most), and without any the job stays where it is and the joiner waits for it there. So
 * joining never lifts a job past a cap its joiner would not have passed with a job of its own,
 * and a join is never refused. */

static bool same_peer(const sched_job *j, const char *peer)
{
    return strcmp(j->peer, peer ? peer : "") == 0;
}

/* Whether one more job at priority charged to peer would go past its share of the queue. A scan
 * of the active list (at most max_queued_jobs + max_running_jobs entries, like the key lookup
 * next to it) keeps the counts exact through every way a job leaves the queue. `except` (may be
 * NULL) is not counted: the job a joiner would take over. */
static bool over_quota(const sched *s, const char *peer, int priority, const sched_job *except)
{
    if (!peer || !*peer)
        return false;
    int queued = 0, blocking = 0;
    for (const sched_job *j = s->active; j; j = j->next) {
        if (j == except || j->running || !same_peer(j, peer))
            continue;
        queued++;
        if (j->info.priority == SCHED_PRIO_BLOCKING)
            blocking++;
    }
    if (queued >= s->cfg.max_queued_per_peer)
        return true;
    return priority == SCHED_PRIO_BLOCKING && blocking >= s->cfg.max_blocking_per_peer;
}

/* The round in which a job of peer at priority would run: one after the last round peer holds
 * there (queued or running jobs other than `except`), and not before the round being served. */
static int64_t next_round(const sched *s, const char *peer, int priority, const sched_job *except)
{
    int64_t r = s->round_now[priority];
    for (const sched_job *j = s->active; j; j = j->next) {
        if (j != except && j->info.priority == priority && same_peer(j, peer) && j->turn >= r)
            r = j->turn + 1;
    }
    return r;
}

/* A client joins the queued job j asking for priority: moves the job forward into the client's
 * turn when that is earlier and the client has room (see "Joining" above). */
static void join_queued(sched *s, sched_job *j, const char *peer, int priority)
{
    for (int p = priority; p <= j->info.priority; p++) {
        if (over_quota(s, peer, p, j))
            continue; /* no room at p: a weaker raise may still fit */
        int64_t r = next_round(s, peer, p, j);
        if (p == j->info.priority && r >= j->turn)
            return; /* not earlier than where it is */
        j->info.priority = p;
        j->turn = r;
        snprintf(j->peer, sizeof(j->peer), "%s", peer ? peer : "");
        return;
    }
}

double sched__now_s(void)
{
    return (double)uv_hrtime() / 1e9;
}

static void pump_cb(uv_timer_t *t);

static void handle_closed(uv_handle_t *h)
{
    sched *s = h->data;
    s->handles_open--;
    sched__after_outstanding(s);
}

int sched_new(uv_loop_t *loop, kc_db *db, gw_pool *pool, const sched_config *cfg, sched **ret)
{
    if (!loop || !db || !ret)
        return -EINVAL;
    sched *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->loop = loop;
    s->db = db;
    s->pool = pool;
    if (cfg)
        s->cfg = *cfg;
    else
        sched_config_defaults(&s->cfg);
    config_normalise(&s->cfg);
    if (kc_open_another(db, &s->store_db, NULL) < 0)
        s->store_db = NULL;
    s->next_id = 1;
    s->start_job = sched__job_start;
    uv_timer_init(loop, &s->pump);
    uv_timer_init(loop, &s->drain_timer);
    s->pump.data = s;
    s->drain_timer.data = s;
    s->handles_open = 2;
    /* The timers must not keep a loop alive that has nothing else to do. */
    uv_unref((uv_handle_t *)&s->drain_timer);
    *ret = s;
    return 0;
}

void sched_reconfigure(sched *s, const sched_config *cfg)
{
    if (!s || !cfg)
        return;
    s->cfg = *cfg;
    config_normalise(&s->cfg);
    if (!s->freeing)
        uv_timer_start(&s->pump, pump_cb, 0, 0); /* a larger running limit may start jobs */
}

static void kick(sched *s)
{
    if (!s->freeing)
        uv_timer_start(&s->pump, pump_cb, 0, 0);
}

void sched__job_ref(sched_job *j)
{
    j->refs++;
}

static void job_free(sched_job *j)
{
    sched__job_free_run(j);
    free(j->op_json);
    free(j);
}

void sched__job_unref(sched_job *j)
{
    if (--j->refs == 0)
        job_free(j);
}

static void fill_elapsed(const sched_job *j, sched_job_info *info)
{
    if (!j->ended)
        info->elapsed_s = (double)(uv_hrtime() - j->submit_ns) / 1e9;
}

static int count_waiters(const sched_job *j)
{
    int n = 0;
    for (const sched_waiter *w = j->waiters; w; w = w->next)
        n++;
    return n;
}

static void ring_push(sched *s, sched_job *j)
{
    if (s->n_ended == SCHED__ENDED_KEPT) {
        sched_job *old = s->ended[s->ended_head];
        s->ended[s->ended_head] = j;
        s->ended_head = (s->ended_head + 1) % SCHED__ENDED_KEPT;
        sched__job_unref(old);
    } else {
        s->ended[(s->ended_head + s->n_ended) % SCHED__ENDED_KEPT] = j;
        s->n_ended++;
    }
}

static void list_remove(sched *s, sched_job *j)
{
    for (sched_job **pp = &s->active; *pp; pp = &(*pp)->next) {
        if (*pp == j) {
            *pp = j->next;
            j->next = NULL;
            return;
        }
    }
}

void sched__job_end(sched_job *j, sched_state state, const char *code, const char *msg)
{
    if (j->ended)
        return;
    sched *s = j->s;
    /* Callbacks below may cancel or submit other jobs, which can push this one out of the ring;
     * hold it until we are done with it. */
    sched__job_ref(j);
    j->info.elapsed_s = (double)(uv_hrtime() - j->submit_ns) / 1e9;
    j->ended = true;
    /* While the job is still on the active list, so that a drain cannot complete in between: the
     * cancelled measurements' callbacks (maybe run right here) see j->ended and discard. */
    sched__job_cancel_measurements(j);
    sched__job_drop_binaries(j);
    j->info.state = state;
    if (code)
        snprintf(j->info.error_code, sizeof(j->info.error_code), "%s", code);
    if (msg)
        snprintf(j->info.error, sizeof(j->info.error), "%s", msg);
    if (j->running) {
        s->n_running--;
        s->stats.tuning_seconds_total += (double)(uv_hrtime() - j->start_ns) / 1e9;
    } else {
        s->n_queued--;
    }
    list_remove(s, j);
    switch (state) {
    case SCHED_DONE: s->stats.jobs_done++; break;
    case SCHED_FAILED: s->stats.jobs_failed++; break;
    default: s->stats.jobs_cancelled++; break;
    }
    ring_push(s, j); /* the active list's reference moves to the ring */
    if (s->job_end_hook) {
        sched_job_info info = j->info;
        info.waiters = count_waiters(j);
        s->job_end_hook(s->job_end_udata, &info);
    }

    /* Pop waiters one at a time: a callback may detach a waiter that has not been called yet. */
    sched_waiter *w;
    while ((w = j->waiters) != NULL) {
        j->waiters = w->next;
        j->info.waiters = count_waiters(j);
        sched_job_info info = j->info;
        sched_done_cb cb = w->cb;
        void *udata = w->udata;
        free(w);
        cb(udata, &info);
    }
    j->info.waiters = 0;
    kick(s);
    sched__job_unref(j);
    sched__after_outstanding(s);
}

static sched_job *find_active_key(sched *s, const char *op_key)
{
    for (sched_job *j = s->active; j; j = j->next)
        if (strcmp(j->info.op_key, op_key) == 0)
            return j;
    return NULL;
}

uint64_t sched_job_active(sched *s, const char *op_key)
{
    const sched_job *j = s && op_key ? find_active_key(s, op_key) : NULL;
    return j ? j->info.id : 0;
}

int sched_submit(sched *s, const sched_request *req, sched_done_cb cb, void *udata,
                 uint64_t *ret_job_id, sched_waiter **ret_waiter)
{
    if (!s || !req || !req->op)
        return -EINVAL;
    if ((int)req->mode < TUNER_TUNE_NONE || (int)req->mode > TUNER_TUNE_MEASURE)
        return -EINVAL;
    if (req->priority < SCHED_PRIO_BLOCKING || req->priority > SCHED_PRIO_BACKGROUND)
        return -EINVAL;
    if (req->target.sm <= 0 || (int)req->op->kind < 0 || (int)req->op->kind >= TUNER_OP_COUNT ||
        req->op->n_inputs < 1 || req->op->n_inputs > TUNER_MAX_INPUTS ||
        req->op->n_anchor_inputs < 1 || req->op->n_anchor_inputs > req->op->n_inputs)
        return -EINVAL;
    if (s->draining || s->freeing)
        return -ESHUTDOWN;

    int rc;
    char *own_json = NULL;
    sched_waiter *w = NULL;
    sched_job *j = NULL;
    const char *op_json = req->op_json;
    if (!op_json) {
        own_json = tuner_op_canonical_json(req->op);
        if (!own_json)
            return -ENOMEM;
        op_json = own_json;
    }
    char op_key[KC_KEY_LEN + 1];
    if (req->op_key && strlen(req->op_key) == KC_KEY_LEN)
        memcpy(op_key, req->op_key, sizeof(op_key));
    else
        sched_op_key(op_json, &req->target, op_key);

    tuner_tune_mode mode = req->mode;
    bool fell_back = false;
    if (mode == TUNER_TUNE_MEASURE) {
        int idx[GW_MAX_DEVICES];
        if (gw_pool_usable_for_sm(s->pool, req->target.sm, idx) == 0) {
            if (s->cfg.measure_requires_gpu) {
                rc = -ENODEV;
                goto cleanup;
            }
            mode = TUNER_TUNE_MODEL;
            fell_back = true;
        }
    }

    if (cb) {
        w = calloc(1, sizeof(*w));
        if (!w) {
            rc = -ENOMEM;
            goto cleanup;
        }
        w->cb = cb;
        w->udata = udata;
    }

    j = find_active_key(s, op_key);
    if (j) {
        if (!j->running) {
            /* Still queued: the strongest mode asked for decides how it runs; the priority and
             * turn move forward only within the joiner's own quotas. */
            join_queued(s, j, req->peer, req->priority);
            if (mode > j->info.mode) {
                j->info.mode = mode;
                j->info.warning[0] = '\0';
            }
        }
    } else {
        if (over_quota(s, req->peer, req->priority, NULL)) {
            rc = -EDQUOT;
            goto cleanup;
        }
        if (s->n_queued >= s->cfg.max_queued_jobs) {
            rc = -EAGAIN;
            goto cleanup;
        }
        j = calloc(1, sizeof(*j));
        if (!j) {
            rc = -ENOMEM;
            goto cleanup;
        }
        j->op_json = own_json ? own_json : strdup(op_json);
        if (!j->op_json) {
            free(j);
            j = NULL;
            rc = -ENOMEM;
            goto cleanup;
        }
        own_json = NULL;
        j->s = s;
        j->refs = 1;
        if (req->peer)
            snprintf(j->peer, sizeof(j->peer), "%s", req->peer);
        j->seq = s->next_seq++;
        j->turn = next_round(s, req->peer, req->priority, NULL);
        j->op = *req->op;
        j->target = req->target;
        j->budget_s = req->budget_s > 0 ? req->budget_s : 0;
        j->budget_candidates = req->budget_candidates > 0 ? req->budget_candidates : 0;
        j->submit_ns = uv_hrtime();
        j->info.id = s->next_id++;
        j->info.state = SCHED_QUEUED;
        memcpy(j->info.op_key, op_key, sizeof(op_key));
        snprintf(j->info.op, sizeof(j->info.op), "%s", tuner_op_name(req->op->kind));
        tuner_target_name(&req->target, j->info.target, sizeof(j->info.target));
        j->info.mode = mode;
        j->info.priority = req->priority;
        j->info.best_us = -1;
        j->info.best_mid_us = -1;
        j->info.range_worst = -1;
        j->info.final_device = -1;
        if (fell_back)
            snprintf(j->info.warning, sizeof(j->info.warning),
                     "no GPU worker for sm_%d: ranked by the cost model, not measured", req->target.sm);
        j->next = s->active;
        s->active = j;
        s->n_queued++;
        kick(s);
    }
    if (w) {
        w->job = j;
        w->next = j->waiters;
        j->waiters = w;
        j->info.waiters++;
    }
    if (ret_job_id)
        *ret_job_id = j->info.id;
    if (ret_waiter)
        *ret_waiter = w;
    w = NULL;
    rc = 0;
cleanup:
    free(w);
    free(own_json);
    return rc;
}

void sched_set_job_end_hook(sched *s, sched_done_cb hook, void *udata)
{
    if (!s)
        return;
    s->job_end_hook = hook;
    s->job_end_udata = udata;
}

void sched_waiter_detach(sched *s, sched_waiter *w)
{
    if (!s || !w)
        return;
    sched_job *j = w->job;
    for (sched_waiter **pp = &j->waiters; *pp; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            j->info.waiters--;
            free(w);
            return;
        }
    }
}

static void start_queued(sched *s)
{
    while (!s->draining && !s->freeing && s->n_running < s->cfg.max_running_jobs) {
        sched_job *best = NULL;
        for (sched_job *j = s->active; j; j = j->next) {
            if (j->running)
                continue;
            if (!best || j->info.priority < best->info.priority ||
                (j->info.priority == best->info.priority &&
                 (j->turn < best->turn || (j->turn == best->turn && j->seq < best->seq))))
                best = j;
        }
        if (!best)
            return;
        if (best->turn > s->round_now[best->info.priority])
            s->round_now[best->info.priority] = best->turn;
        best->running = true;
        best->start_ns = uv_hrtime();
        best->info.state = SCHED_RUNNING;
        s->n_queued--;
        s->n_running++;
        s->start_job(best); /* may end the job at once */
    }
}

static void pump_cb(uv_timer_t *t)
{
    sched *s = t->data;
    start_queued(s);
}

int sched_job_get(sched *s, uint64_t id, sched_job_info *ret)
{
    if (!s || !ret)
        return -EINVAL;
    for (sched_job *j = s->active; j; j = j->next) {
        if (j->info.id == id) {
            *ret = j->info;
            fill_elapsed(j, ret);
            return 0;
        }
    }
    for (size_t i = 0; i < s->n_ended; i++) {
        sched_job *j = s->ended[(s->ended_head + i) % SCHED__ENDED_KEPT];
        if (j->info.id == id) {
            *ret = j->info;
            return 0;
        }
    }
    return -ENOENT;
}

int sched_job_cancel(sched *s, uint64_t id)
{
    if (!s)
        return -EINVAL;
    for (sched_job *j = s->active; j; j = j->next) {
        if (j->info.id == id) {
            sched__job_end(j, SCHED_CANCELLED, "cancelled", "cancelled by request");
            return 0;
        }
    }
    return -ENOENT;
}

static int cmp_active(const void *a, const void *b)
{
    const sched_job_info *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

int sched_jobs_list(sched *s, sched_job_info **ret, size_t *ret_n)
{
    if (!s || !ret || !ret_n)
        return -EINVAL;
    size_t n_active = 0;
    for (sched_job *j = s->active; j; j = j->next)
        n_active++;
    size_t n = n_active + s->n_ended;
    sched_job_info *a = calloc(n ? n : 1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    size_t k = 0;
    for (sched_job *j = s->active; j; j = j->next) {
        a[k] = j->info;
        fill_elapsed(j, &a[k]);
        k++;
    }
    qsort(a, n_active, sizeof(*a), cmp_active);
    /* Ended jobs newest first. */
    for (size_t i = s->n_ended; i-- > 0;)
        a[k++] = s->ended[(s->ended_head + i) % SCHED__ENDED_KEPT]->info;
    *ret = a;
    *ret_n = n;
    return 0;
}

void sched_stats_get(sched *s, sched_stats *ret)
{
    if (!s || !ret)
        return;
    *ret = s->stats;
    ret->jobs_queued = (uint64_t)s->n_queued;
    ret->jobs_running = (uint64_t)s->n_running;
}

static void cancel_all(sched *s, bool queued_only)
{
    /* Ending a job edits the list (and its callbacks may submit nothing: we are draining), so
     * restart the scan after each end. */
    for (;;) {
        sched_job *victim = NULL;
        for (sched_job *j = s->active; j; j = j->next) {
            if (!queued_only || !j->running) {
                victim = j;
                break;
            }
        }
        if (!victim)
            return;
        sched__job_end(victim, SCHED_CANCELLED, "shutting_down", "the daemon is shutting down");
    }
}

static void really_free(sched *s)
{
    for (size_t i = 0; i < s->n_ended; i++)
        sched__job_unref(s->ended[(s->ended_head + i) % SCHED__ENDED_KEPT]);
    kc_close(s->store_db);
    free(s);
}

void sched__after_outstanding(sched *s)
{
    if (s->active || s->outstanding > 0)
        return;
    if (s->draining && !s->drain_fired && !s->freeing) {
        s->drain_fired = true;
        uv_timer_stop(&s->drain_timer);
        if (s->drain_done)
            s->drain_done(s->drain_udata);
        return;
    }
    if (s->freeing && s->handles_open == 0)
        really_free(s);
}

static void drain_timer_cb(uv_timer_t *t)
{
    sched *s = t->data;
    cancel_all(s, false);
    sched__after_outstanding(s);
}

void sched_drain(sched *s, double grace_s, void (*done)(void *udata), void *udata)
{
    if (!s || s->freeing)
        return;
    s->draining = true;
    s->drain_fired = false;
    s->drain_done = done;
    s->drain_udata = udata;
    cancel_all(s, true);
    if (s->active) {
        uint64_t ms = grace_s > 0 ? (uint64_t)(grace_s * 1000.0) : 0;
        uv_ref((uv_handle_t *)&s->drain_timer);
        uv_timer_start(&s->drain_timer, drain_timer_cb, ms, 0);
    }
    sched__after_outstanding(s);
}

void sched_free(sched *s)
{
    if (!s || s->freeing)
        return;
    cancel_all(s, false);
    s->freeing = true;
    uv_timer_stop(&s->pump);
    uv_timer_stop(&s->drain_timer);
    uv_close((uv_handle_t *)&s->pump, handle_closed);
    uv_close((uv_handle_t *)&s->drain_timer, handle_closed);
}
