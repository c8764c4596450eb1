/* resolve/resolve.c - see resolve.h. The tiers in the order a request meets them: the request
 * memo and the memory tier, the local cache, the remote tier's slot, a tuning job. */
#include "resolve/resolve.h"
#include "resolve/resolve_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "kernel_cache/kc_mem.h"
#include "proto/request.h"
#include "tuner/tuner.h"

/* A request's priority goes to the scheduler as it was parsed (resolve_request.priority,
 * then sched_request.priority). */
_Static_assert((int)PROTO_PRIO_BLOCKING == (int)SCHED_PRIO_BLOCKING &&
                   (int)PROTO_PRIO_NORMAL == (int)SCHED_PRIO_NORMAL &&
                   (int)PROTO_PRIO_BACKGROUND == (int)SCHED_PRIO_BACKGROUND,
               "proto/request.h's PROTO_PRIO_* must equal scheduler/sched.h's SCHED_PRIO_*");

#define RESOLVE_MEMORY_ENTRIES 4096
#define RESOLVE_MEMORY_BYTES (64u << 20)
#define RESOLVE_DATA_VERSION_MS 50

static const char no_gpu_warning[] =
    "tune \"measure\" asked, but no GPU worker for this arch is available: this kernel was "
    "ranked by the cost model, not measured";

struct resolve_wait {
    resolver *r;
    resolve_wait *prev, *next;
    resolve_cb cb; /* NULL once the caller cancelled */
    void *udata;
    /* The request, kept for the tiers after an asynchronous one. */
    tuner_op op;
    resolve_request rq;
    char op_key[KC_KEY_LEN + 1];
    char *op_json;
    bool remote_pending; /* a remote lookup (or claim) will call back */
    bool claimed;        /* the remote tier's claim was asked already */
    sched_waiter *job;   /* waiting on a tuning job */
    void (*udata_free)(void *udata); /* resolve__wait_set_cleanup */
};

struct resolver {
    uv_loop_t *loop;
    kc_db *db;
    sched *sched;
    gw_pool *pool;
    resolve_config cfg;
    kc_mem *answers; /* op key -> kernel-set bytes (rank: how the kernel was chosen) */
    kc_mem *memo;    /* BLAKE2b of a request body -> its op key (rank: the tune mode) */
    int64_t data_version;
    uint64_t data_version_checked_ms;
    bool draining;
    bool has_remote;
    resolve_remote remote;
    char (*retune)[KC_KEY_LEN + 1]; /* op keys whose job was asked to replace the pinned kernel */
    size_t n_retune, cap_retune;
    char *scratch;   /* the last answer built for a synchronous result */
    resolve_wait *waits;
    uint64_t quarantined;
    /* The records quarantined last, so each is told once even when asked for again by key. */
    char told[16][KC_KEY_LEN + 1];
    unsigned told_next;
};

void resolve_config_defaults(resolve_config *c)
{
    memset(c, 0, sizeof(*c));
    c->default_mode = TUNER_TUNE_MODEL;
    c->default_target = tuner_target_of(TUNER_TARGET_SM90);
    c->memory_entries = RESOLVE_MEMORY_ENTRIES;
    c->memory_bytes = RESOLVE_MEMORY_BYTES;
    c->data_version_ms = RESOLVE_DATA_VERSION_MS;
}

/* ---- results ----------------------------------------------------------------------------- */

static void result_init(resolve_result *res)
{
    memset(res, 0, sizeof(*res));
    res->state = RESOLVE_FAILED;
}

static void fail(resolve_result *res, int status, const char *code, const char *message,
                 const char *field)
{
    res->state = RESOLVE_FAILED;
    res->error.status = status;
    snprintf(res->error.code, sizeof(res->error.code), "%s", code);
    snprintf(res->error.message, sizeof(res->error.message), "%s", message);
    snprintf(res->error.field, sizeof(res->error.field), "%s", field ? field : "");
}

void resolve_error_from_errno(resolve_error *e, int r, const char *what)
{
    memset(e, 0, sizeof(*e));
    if (r == -EBADMSG) {
        e->status = 500;
        snprintf(e->code, sizeof(e->code), "integrity_error");
        snprintf(e->message, sizeof(e->message), "%s: the stored kernel failed its integrity check",
                 what);
    } else if (r == -ENOENT) {
        e->status = 404;
        snprintf(e->code, sizeof(e->code), "not_found");
        snprintf(e->message, sizeof(e->message), "%s: not found", what);
    } else {
        e->status = 500;
        snprintf(e->code, sizeof(e->code), "internal");
        snprintf(e->message, sizeof(e->message), "%s: %s", what, strerror(-r));
    }
}

static void fail_errno(resolve_result *res, int r, const char *what)
{
    res->state = RESOLVE_FAILED;
    resolve_error_from_errno(&res->error, r, what);
}

static void fail_submit(resolve_result *res, int r)
{
    switch (r) {
    case -EAGAIN:
        fail(res, 429, "queue_full", "too many tuning jobs are queued; retry later", NULL);
        break;
    case -EDQUOT:
        fail(res, 429, "quota_exceeded",
             "this client already has its share of the tuning queue ([tuning] "
             "max_queued_jobs_per_client queued jobs, max_blocking_jobs_per_client of them at "
             "priority blocking); retry when some have run", NULL);
        break;
    case -ENODEV:
        fail(res, 503, "no_gpu",
             "tune \"measure\" needs a GPU worker for this arch and none is available", "tune");
        break;
    case -ESHUTDOWN:
        fail(res, 503, "shutting_down", "hidetd is shutting down", NULL);
        break;
    case -EINVAL:
        fail(res, 422, "invalid_field", "the scheduler refused this request", NULL);
        break;
    default:
        fail_errno(res, r, "submitting the tuning job");
    }
}

/* Hands a freshly built answer to res: the resolver keeps it until its next call. */
static void answer_owned(resolver *r, resolve_result *res, char *json, resolve_origin origin)
{
    free(r->scratch);
    r->scratch = json;
    res->state = RESOLVE_ANSWERED;
    res->origin = origin;
    res->body = json;
    res->len = strlen(json);
}

void resolve__fail(resolve_result *res, int status, const char *code, const char *message, const char *field)
{
    fail(res, status, code, message, field);
}

void resolve__answer_owned(resolver *r, resolve_result *res, char *json, resolve_origin origin)
{
    answer_owned(r, res, json, origin);
}

sched *resolve__sched(resolver *r)
{
    return r->sched;
}

kc_db *resolve__db(resolver *r)
{
    return r->db;
}

void resolve__wait_set_cleanup(resolve_wait *w, void (*udata_free)(void *udata))
{
    if (w)
        w->udata_free = udata_free;
}

/* ---- the memory tier ----------------------------------------------------------------------- */

/* Ages the answers in memory when the database may have changed under them: another connection
 * committed (data_version moved) - another process, or this daemon's scheduler storing through
 * its own connection. An aged answer is checked against its op's selection at its next hit
 * (answer_from_memory), so one commit costs each key one selection read, not a rebuild. A job
 * that ends drops its own op's answer through the scheduler's hook. */
static void memory_revalidate(resolver *r)
{
    /* PRAGMA data_version opens a read transaction (file locks): at tens of thousands of requests
     * a second that is most of the hit path, so another process's commit is noticed within
     * data_version_ms instead (it can only have removed or re-pointed entries; every kernel it
     * could leave here is still a correct one for its key). uv_now() costs no syscall. */
    uint64_t now = uv_now(r->loop);
    if (r->cfg.data_version_ms == 0 || now - r->data_version_checked_ms >= r->cfg.data_version_ms ||
        now < r->data_version_checked_ms) {
        r->data_version_checked_ms = now;
        int64_t dv;
        if (kc_data_version(r->db, &dv) == 0 && dv != r->data_version) {
            r->data_version = dv;
            kc_mem_age(r->answers);
        }
    }
}

static bool answer_from_memory(resolver *r, const char *op_key, int want, resolve_result *res)
{
    kc_mem_hit hit;
    memory_revalidate(r);
    if (!kc_mem_get(r->answers, op_key, &hit) || hit.rank < want)
        return false;
    if (hit.stale) {
        /* Still selected to the artifact it was rendered from, chosen the same way? Then the
         * bytes are what SQLite would give; else (removed, replaced, re-chosen) rebuild. */
        char akey[KC_KEY_LEN + 1];
        kc_choice choice;
        if (kc_selection_get(r->db, op_key, akey, &choice) != 0 || strcmp(akey, hit.tag) != 0 ||
            (int)choice != hit.rank) {
            kc_mem_remove(r->answers, op_key);
            return false;
        }
        kc_mem_confirm(r->answers, op_key);
    }
    res->state = RESOLVE_ANSWERED;
    res->origin = RESOLVE_ORIGIN_MEMORY;
    res->body = hit.body;
    res->len = hit.len;
    return true;
}

static void body_digest(const char *body, size_t len, char out[KC_KEY_LEN + 1])
{
    unsigned char h[32];
    crypto_generichash(h, sizeof(h), (const unsigned char *)body, len, NULL, 0);
    sodium_bin2hex(out, KC_KEY_LEN + 1, h, sizeof(h));
}

/* ---- quarantine ---------------------------------------------------------------------------- */

void resolve_quarantine(resolver *r, const char *artifact_key, const char *reason)
{
    if (!r || !artifact_key)
        return;
    (void)kc_quarantine(r->db, artifact_key, reason);
    /* The memory tier may hold the record's answer under its op key. */
    kc_mem_clear(r->answers);
    for (unsigned i = 0; i < sizeof(r->told) / sizeof(r->told[0]); i++)
        if (strncmp(r->told[i], artifact_key, KC_KEY_LEN) == 0 && r->told[i][0])
            return;
    r->quarantined++;
    snprintf(r->told[r->told_next], sizeof(r->told[0]), "%s", artifact_key);
    r->told_next = (r->told_next + 1) % (sizeof(r->told) / sizeof(r->told[0]));
    if (r->cfg.on_quarantine)
        r->cfg.on_quarantine(r->cfg.udata, artifact_key, reason);
}

uint64_t resolve_quarantined_count(const resolver *r)
{
    return r ? r->quarantined : 0;
}

/* ---- the local cache ----------------------------------------------------------------------- */

static bool gpu_can_measure(resolver *r, const resolve_request *rq)
{
    return rq->mode == TUNER_TUNE_MEASURE && gw_pool_usable_for_sm(r->pool, rq->target.sm, NULL) > 0;
}

/* Answers from the database (selection -> artifact). Returns true when res is final (answered
 * or failed), false when the request goes on to the next tier. */
static bool answer_from_local(resolver *r, const resolve_request *rq, const char *op_key,
                              resolve_result *res)
{
    bool gpu_usable = gpu_can_measure(r, rq);
    char akey[KC_KEY_LEN + 1];
    kc_choice choice = KC_CHOSEN_DEFAULT;
    int rc = kc_selection_get(r->db, op_key, akey, &choice);
    if (rc == -ENOENT)
        return false;
    if (rc < 0) {
        fail_errno(res, rc, "reading the kernel cache");
        return true;
    }
    if (rq->mode == TUNER_TUNE_MEASURE && choice != KC_CHOSEN_MEASURED && gpu_usable)
        return false; /* a measured answer can be had: tune it */
    kc_artifact *a = NULL;
    rc = kc_artifact_get_meta(r->db, akey, &a);
    if (rc == -ENOENT)
        return false; /* a selection left dangling by a concurrent removal: rebuild */
    if (rc == -EBADMSG) {
        resolve_quarantine(r, akey, "its launch description does not read back");
        return false;
    }
    if (rc < 0) {
        fail_errno(res, rc, "reading the cached kernel");
        return true;
    }
    int rank = resolve_artifact_rank(a);
    bool warn;
    if (!resolve_rank_answers(rank, rq->mode, gpu_usable, &warn)) {
        kc_artifact_free(a);
        return false;
    }
    char *json = NULL;
    rc = resolve_kernel_set_json(a, true, RESOLVE_ORIGIN_LOCAL, warn ? no_gpu_warning : NULL,
                                 &json);
    kc_artifact_free(a);
    if (rc == -EINVAL) {
        resolve_quarantine(r, akey, "its launch description is not a valid launch");
        return false;
    }
    res->origin = RESOLVE_ORIGIN_LOCAL;
    if (rc < 0) {
        fail_errno(res, rc, "building the kernel set");
        return true;
    }
    /* The memory tier holds the general (warning-free) answer only. */
    if (!warn)
        kc_mem_put(r->answers, op_key, json, strlen(json), rank, akey);
    answer_owned(r, res, json, RESOLVE_ORIGIN_LOCAL);
    return true;
}

bool resolve__lookup(resolver *r, const resolve_request *rq, const char *op_key, resolve_result *res)
{
    return answer_from_memory(r, op_key, (int)rq->mode, res) || answer_from_local(r, rq, op_key, res);
}

/* ---- waits --------------------------------------------------------------------------------- */

static resolve_wait *wait_new(resolver *r, const resolve_request *rq, const char *op_key,
                              const char *op_json, resolve_cb cb, void *udata)
{
    resolve_wait *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->op_json = strdup(op_json);
    if (!w->op_json) {
        free(w);
        return NULL;
    }
    w->r = r;
    w->cb = cb;
    w->udata = udata;
    w->op = *rq->op;
    w->rq = *rq;
    w->rq.op = &w->op;
    memcpy(w->op_key, op_key, sizeof(w->op_key));
    w->next = r->waits;
    if (r->waits)
        r->waits->prev = w;
    r->waits = w;
    return w;
}

static void wait_free(resolve_wait *w)
{
    resolver *r = w->r;
    if (w->prev)
        w->prev->next = w->next;
    else
        r->waits = w->next;
    if (w->next)
        w->next->prev = w->prev;
    free(w->op_json);
    free(w);
}

/* Ends a wait: the caller (if still there) gets res. */
static void wait_finish(resolve_wait *w, resolve_result *res)
{
    resolve_cb cb = w->cb;
    void *udata = w->udata;
    memcpy(res->op_key, w->op_key, sizeof(res->op_key));
    wait_free(w);
    if (cb)
        cb(udata, res);
}

/* ---- tuning -------------------------------------------------------------------------------- */

/* The answer for a job that ended (its artifact's kernel set, or the job's error). */
static void job_result(resolver *r, const sched_job_info *info, resolve_result *res, char **owned)
{
    res->origin = RESOLVE_ORIGIN_TUNED;
    if (info->state == SCHED_DONE) {
        kc_artifact *a = NULL;
        int rc = kc_artifact_get_meta(r->db, info->artifact_key, &a);
        if (rc < 0) {
            fail_errno(res, rc, "reading the tuned kernel");
            return;
        }
        char *json = NULL;
        rc = resolve_kernel_set_json(a, false, RESOLVE_ORIGIN_TUNED, info->warning, &json);
        kc_artifact_free(a);
        if (rc < 0) {
            fail_errno(res, rc, "building the kernel set");
            return;
        }
        *owned = json;
        res->state = RESOLVE_ANSWERED;
        res->body = json;
        res->len = strlen(json);
        return;
    }
    if (info->state == SCHED_CANCELLED) {
        if (strcmp(info->error_code, "shutting_down") == 0 || r->draining)
            fail(res, 503, "shutting_down", "hidetd is shutting down; the job was cancelled", NULL);
        else
            fail(res, 409, "cancelled", "the job was cancelled before it finished", NULL);
        return;
    }
    const char *code = info->error_code[0] ? info->error_code : "internal";
    fail(res, resolve_error_status(code), code,
         info->error[0] ? info->error : "the tuning job failed", NULL);
}

static void job_done(void *udata, const sched_job_info *info)
{
    resolve_wait *w = udata;
    resolve_result res;
    result_init(&res);
    char *owned = NULL;
    w->job = NULL;
    job_result(w->r, info, &res, &owned);
    wait_finish(w, &res);
    free(owned);
}

/* Submits the job (or joins the one for the same op key). w is the wait to answer when the job
 * ends (wait:true), or NULL when the caller does not wait for it. Fills res: ACCEPTED, WAITING
 * or FAILED. */
static void submit(resolver *r, const resolve_request *rq, const char *op_key, const char *op_json,
                   resolve_wait *w, resolve_result *res)
{
    res->origin = RESOLVE_ORIGIN_TUNED;
    if (r->draining || !r->sched) {
        fail(res, 503, "shutting_down", "hidetd is shutting down", NULL);
        return;
    }
    sched_request sr = {
        .op = rq->op,
        .target = rq->target,
        .mode = rq->mode,
        .priority = rq->priority,
        .budget_s = rq->budget_s,
        .budget_candidates = rq->budget_candidates,
        .op_json = op_json,
        .op_key = op_key,
        .peer = rq->peer[0] ? rq->peer : NULL,
    };
    uint64_t job_id = 0;
    if (!w) {
        sched_waiter *none = NULL;
        int rc = sched_submit(r->sched, &sr, NULL, NULL, &job_id, &none);
        if (rc == 0)
            rc = sched_job_get(r->sched, job_id, &res->job);
        if (rc < 0) {
            fail_submit(res, rc);
            return;
        }
        res->state = RESOLVE_ACCEPTED;
        return;
    }
    int rc = sched_submit(r->sched, &sr, job_done, w, &job_id, &w->job);
    if (rc < 0) {
        fail_submit(res, rc);
        return;
    }
    res->state = RESOLVE_WAITING;
    res->job.id = job_id;
}

/* ---- the remote tier ----------------------------------------------------------------------- */

/* Op keys a re-tune was asked for, until their job ends (a few at a time: a linear list). */
static void retune_mark(resolver *r, const char *op_key)
{
    for (size_t i = 0; i < r->n_retune; i++)
        if (strcmp(r->retune[i], op_key) == 0)
            return;
    if (r->n_retune == r->cap_retune) {
        size_t cap = r->cap_retune ? r->cap_retune * 2 : 4;
        void *p = realloc(r->retune, cap * sizeof(*r->retune));
        if (!p)
            return; /* the result is then published without replacing: the pinned one stays */
        r->retune = p;
        r->cap_retune = cap;
    }
    memcpy(r->retune[r->n_retune++], op_key, KC_KEY_LEN + 1);
}

static bool retune_take(resolver *r, const char *op_key)
{
    for (size_t i = 0; i < r->n_retune; i++) {
        if (strcmp(r->retune[i], op_key) == 0) {
            memmove(r->retune[i], r->retune[i + 1], (r->n_retune - i - 1) * sizeof(*r->retune));
            r->n_retune--;
            return true;
        }
    }
    return false;
}

static void remote_done(void *arg, kc_artifact *a)
{
    resolve_wait *w = arg;
    resolver *r = w->r;
    w->remote_pending = false;
    resolve_result res;
    result_init(&res);
    char *owned = NULL;
    bool warn = false;
    int rank = resolve_artifact_rank(a);
    bool usable = a && strcmp(a->op_key, w->op_key) == 0 &&
                  resolve_rank_answers(rank, w->rq.mode, gpu_can_measure(r, &w->rq), &warn);
    int put = usable ? kc_artifact_put(r->db, a) : 0;
    if (put < 0) {
        usable = false; /* not stored: tune it here rather than serve what we cannot keep */
        if (r->cfg.on_store_failed)
            r->cfg.on_store_failed(r->cfg.udata, w->op_key, "remote",
                                   put == -EIO ? kc_errmsg(r->db) : strerror(-put));
    }
    if (usable && resolve_kernel_set_json(a, true, RESOLVE_ORIGIN_REMOTE,
                                          warn ? no_gpu_warning : NULL, &owned) == 0) {
        /* This answer says "remote"; the next one comes from this node's cache ("local"). */
        char *mem = NULL;
        if (!warn && resolve_kernel_set_json(a, true, RESOLVE_ORIGIN_LOCAL, NULL, &mem) == 0)
            kc_mem_put(r->answers, w->op_key, mem, strlen(mem), rank, a->key);
        free(mem);
        res.state = RESOLVE_ANSWERED;
        res.origin = RESOLVE_ORIGIN_REMOTE;
        res.body = owned;
        res.len = strlen(owned);
    } else if (w->cb && !w->claimed && w->rq.wait && r->has_remote && r->remote.claim &&
               r->remote.claim(r->remote.self, w->op_key, remote_done, w) == 0) {
        /* A miss, and the tier may have another node tuning the op: it answers later with that
         * node's kernel, or tells us to tune. */
        w->claimed = true;
        w->remote_pending = true;
        kc_artifact_free(a);
        return;
    } else if (w->cb) {
        /* A miss: on to tuning. A caller that left does not start a job. */
        submit(r, &w->rq, w->op_key, w->op_json, w->rq.wait ? w : NULL, &res);
    } else {
        res.state = RESOLVE_FAILED;
    }
    /* A lease the claim gave this node goes back at once when no job took the op on (the caller
     * left, the queue was full): nothing would end it otherwise, and others would wait for a
     * kernel that never comes. A job's end gives back the others. */
    if (w->claimed && res.state != RESOLVE_WAITING && r->has_remote && r->remote.release)
        r->remote.release(r->remote.self, w->op_key);
    kc_artifact_free(a);
    if (res.state != RESOLVE_WAITING)
        wait_finish(w, &res);
    free(owned);
}

/* ---- resolving ----------------------------------------------------------------------------- */

/* The tiers after the memory: local, remote, tuning. */
static void resolve_tiers(resolver *r, const resolve_request *rq, const char *op_key,
                          const char *op_json, resolve_cb cb, void *udata, resolve_result *res,
                          resolve_wait **ret_wait)
{
    if (rq->retune) {
        /* Asked to tune again: no stored kernel answers, and the result replaces the remote
         * tier's pinned one when the job ends (job_ended). */
        retune_mark(r, op_key);
    } else {
        if (answer_from_memory(r, op_key, (int)rq->mode, res))
            return;
        if (answer_from_local(r, rq, op_key, res))
            return;
    }
    resolve_wait *w = NULL;
    if (cb && (r->has_remote || rq->wait)) {
        w = wait_new(r, rq, op_key, op_json, cb, udata);
        if (!w) {
            fail(res, 500, "internal", "out of memory", NULL);
            return;
        }
    }
    if (w && !rq->retune && r->has_remote &&
        r->remote.lookup(r->remote.self, op_key, remote_done, w) == 0) {
        w->remote_pending = true;
        res->state = RESOLVE_WAITING;
        res->origin = RESOLVE_ORIGIN_REMOTE;
        *ret_wait = w;
        return;
    }
    submit(r, rq, op_key, op_json, rq->wait ? w : NULL, res);
    if (rq->retune && res->state != RESOLVE_WAITING && res->state != RESOLVE_ACCEPTED)
        retune_take(r, op_key); /* no job took it on */
    if (res->state == RESOLVE_WAITING) {
        *ret_wait = w;
    } else if (w) {
        w->cb = NULL;
        wait_free(w);
    }
}

void resolve_kernel(resolver *r, const resolve_request *rq, resolve_cb cb, void *udata,
                    resolve_result *ret, resolve_wait **ret_wait)
{
    result_init(ret);
    if (ret_wait)
        *ret_wait = NULL;
    if (!r || !rq || !rq->op || (cb && !ret_wait)) {
        fail(ret, 500, "internal", "resolve_kernel: bad arguments", NULL);
        return;
    }
    char *op_json = tuner_op_canonical_json(rq->op);
    if (!op_json) {
        fail(ret, 500, "internal", "out of memory", NULL);
        return;
    }
    sched_op_key(op_json, &rq->target, ret->op_key);
    resolve_wait *w = NULL;
    resolve_tiers(r, rq, ret->op_key, op_json, cb, udata, ret, &w);
    free(op_json);
    if (ret_wait)
        *ret_wait = w;
}

void resolve_kernel_body(resolver *r, const char *peer, const char *body, size_t len,
                         resolve_cb cb, void *udata, resolve_result *ret, resolve_wait **ret_wait)
{
    result_init(ret);
    if (ret_wait)
        *ret_wait = NULL;
    if (!r || (!body && len) || (cb && !ret_wait)) {
        fail(ret, 500, "internal", "resolve_kernel_body: bad arguments", NULL);
        return;
    }
    /* The request memo: clients send the same bytes again and again (every framework start-up),
     * and identical bytes always parse to the same request, so a repeat skips validation,
     * canonical JSON and the key hash, and goes straight to the memory tier. */
    char digest[KC_KEY_LEN + 1];
    body_digest(body ? body : "", len, digest);
    kc_mem_hit memo;
    if (kc_mem_get(r->memo, digest, &memo) && memo.len == KC_KEY_LEN) {
        char op_key[KC_KEY_LEN + 1];
        memcpy(op_key, memo.body, sizeof(op_key));
        if (answer_from_memory(r, op_key, memo.rank, ret)) {
            memcpy(ret->op_key, op_key, sizeof(ret->op_key));
            return;
        }
    }

    proto_kernel_request kr;
    proto_error perr;
    if (proto_kernel_request_parse(body ? body : "", len, &kr, &perr) < 0) {
        fail(ret, perr.status ? perr.status : 500, perr.code[0] ? perr.code : "internal",
             perr.message, perr.field);
        return;
    }
    if (resolve_apply_defaults(r, &kr.opt, &ret->error) < 0) {
        ret->state = RESOLVE_FAILED;
        return;
    }
    resolve_request rq = resolve_request_of(&kr.op, &kr.opt, peer);
    if (tuner_op_is_dynamic(&kr.op)) {
        /* A table's entries change as their jobs end: never memoised, always composed. */
        resolve__dispatch(r, &kr, &rq, cb, udata, ret, ret_wait);
        return;
    }
    char *op_json = tuner_op_canonical_json(&kr.op);
    if (!op_json) {
        fail(ret, 500, "internal", "out of memory", NULL);
        return;
    }
    sched_op_key(op_json, &rq.target, ret->op_key);
    /* A re-tune is never memoised: the memo leads to the memory tier, which a re-tune skips. */
    if (!rq.retune)
        kc_mem_put(r->memo, digest, ret->op_key, KC_KEY_LEN, (int)rq.mode, NULL);
    resolve_wait *w = NULL;
    resolve_tiers(r, &rq, ret->op_key, op_json, cb, udata, ret, &w);
    free(op_json);
    if (ret_wait)
        *ret_wait = w;
}

void resolve_wait_cancel(resolver *r, resolve_wait *w)
{
    if (!r || !w)
        return;
    w->cb = NULL;
    if (w->udata_free) {
        w->udata_free(w->udata);
        w->udata_free = NULL;
    }
    if (w->remote_pending)
        return; /* freed when the lookup calls back: its result is still stored locally */
    if (w->job)
        sched_waiter_detach(r->sched, w->job);
    wait_free(w);
}

void resolve_by_key(resolver *r, const char *artifact_key, resolve_result *ret)
{
    result_init(ret);
    if (!r || !artifact_key) {
        fail(ret, 500, "internal", "resolve_by_key: bad arguments", NULL);
        return;
    }
    /* Not the hot path: read the code too, so a corrupt entry is refused here already. */
    kc_artifact *a = NULL;
    int rc = kc_artifact_get(r->db, artifact_key, &a);
    if (rc == -EBADMSG)
        resolve_quarantine(r, artifact_key, "a stored blob or its launch rows failed their check");
    if (rc < 0) {
        fail_errno(ret, rc, "kernel");
        return;
    }
    char *json = NULL;
    rc = resolve_kernel_set_json(a, true, RESOLVE_ORIGIN_LOCAL, NULL, &json);
    kc_artifact_free(a);
    if (rc == -EINVAL)
        resolve_quarantine(r, artifact_key, "its launch description is not a valid launch");
    if (rc < 0) {
        fail_errno(ret, rc, "building the kernel set");
        return;
    }
    answer_owned(r, ret, json, RESOLVE_ORIGIN_LOCAL);
}

/* ---- the resolver's life ------------------------------------------------------------------- */

/* Every job that ends may have stored or replaced a selection through our own connection, which
 * data_version does not report: the answers in memory go. A new kernel is offered to the remote
 * tier. */
static void job_ended(void *udata, const sched_job_info *info)
{
    resolver *r = udata;
    /* A job stores the selection of its own op and no other: only that answer is stale. */
    kc_mem_remove(r->answers, info->op_key);
    /* The scheduler fails a job with cache_error when its kernel could not be stored. */
    if (info->state == SCHED_FAILED && strcmp(info->error_code, "cache_error") == 0 &&
        r->cfg.on_store_failed)
        r->cfg.on_store_failed(r->cfg.udata, info->op_key, "tuning", info->error);
    if (!r->has_remote)
        return;
    bool retune = retune_take(r, info->op_key);
    void (*offer)(void *, const kc_artifact *) =
        retune && r->remote.republish ? r->remote.republish : r->remote.publish;
    kc_artifact *a = NULL;
    if (info->state == SCHED_DONE && offer && kc_artifact_get(r->db, info->artifact_key, &a) == 0)
        offer(r->remote.self, a);
    kc_artifact_free(a);
    /* After the publish: a node waiting for this op finds the kernel before the lease is gone. */
    if (r->remote.release)
        r->remote.release(r->remote.self, info->op_key);
}

int resolve_new(uv_loop_t *loop, kc_db *db, sched *s, gw_pool *pool, const resolve_config *cfg,
                resolver **ret)
{
    if (!loop || !db || !ret)
        return -EINVAL;
    resolver *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->loop = loop;
    r->db = db;
    r->sched = s;
    r->pool = pool;
    if (cfg)
        r->cfg = *cfg;
    else
        resolve_config_defaults(&r->cfg);
    if (r->cfg.memory_entries == 0 || r->cfg.memory_bytes == 0 ||
        kc_mem_new(r->cfg.memory_entries, r->cfg.memory_bytes, &r->answers) < 0 ||
        kc_mem_new(r->cfg.memory_entries, r->cfg.memory_entries * (KC_KEY_LEN + 1), &r->memo) < 0) {
        resolve_free(r);
        return -ENOMEM;
    }
    kc_data_version(db, &r->data_version);
    r->data_version_checked_ms = uv_now(loop);
    if (s)
        sched_set_job_end_hook(s, job_ended, r);
    *ret = r;
    return 0;
}

void resolve_free(resolver *r)
{
    if (!r)
        return;
    if (r->sched)
        sched_set_job_end_hook(r->sched, NULL, NULL);
    while (r->waits) {
        r->waits->cb = NULL;
        if (r->waits->udata_free)
            r->waits->udata_free(r->waits->udata);
        if (r->waits->job)
            sched_waiter_detach(r->sched, r->waits->job);
        wait_free(r->waits);
    }
    kc_mem_free(r->answers);
    kc_mem_free(r->memo);
    free(r->scratch);
    free(r->retune);
    free(r);
}

void resolve_set_remote(resolver *r, const resolve_remote *remote)
{
    if (!r)
        return;
    r->has_remote = remote && remote->lookup;
    if (r->has_remote)
        r->remote = *remote;
    else
        memset(&r->remote, 0, sizeof(r->remote));
}

void resolve_reconfigure(resolver *r, const resolve_config *cfg)
{
    if (!r || !cfg)
        return;
    r->cfg.default_mode = cfg->default_mode;
    r->cfg.default_arch_native = cfg->default_arch_native;
    r->cfg.default_target = cfg->default_target;
    r->cfg.data_version_ms = cfg->data_version_ms;
    r->cfg.on_quarantine = cfg->on_quarantine;
    r->cfg.on_store_failed = cfg->on_store_failed;
    r->cfg.udata = cfg->udata;
    kc_mem_clear(r->memo);
}

/* The exact target of the first probed GPU; -ENODEV without one. The probe's list does not
 * change while the daemon runs (a GPU out of service stays in it), so neither does this, and
 * a memoised body keeps meaning the same target. */
static int native_target(const resolver *r, tuner_target *ret)
{
    const gw_device_info *devs = NULL;
    size_t n = r->pool ? gw_pool_devices(r->pool, &devs) : 0;
    if (n == 0 || !devs || devs[0].sm <= 0)
        return -ENODEV;
    tuner_target t = {.sm = devs[0].sm, .arch_specific = true};
    if (tuner_target_id_of(&t) < 0)
        t.arch_specific = false; /* no "a" target for it (sm_80, sm_86, sm_89) */
    if (tuner_target_id_of(&t) < 0)
        return -ENODEV;          /* a GPU newer than op/'s list of targets */
    *ret = t;
    return 0;
}

/* The target of a request's options (resolve_apply_defaults). */
static int pick_target(const resolver *r, const proto_job_options *opt, tuner_target *ret, resolve_error *err)
{
    if (opt->arch_given && !opt->arch_native) {
        *ret = opt->target;
        return 0;
    }
    if (native_target(r, ret) == 0)
        if (opt->arch_native || r->cfg.default_arch_native)
            return 0;
    if (!opt->arch_native) {
        *ret = r->cfg.default_target;
        return 0;
    }
    memset(err, 0, sizeof(*err));
    err->status = 503;
    snprintf(err->code, sizeof(err->code), "no_gpu");
    snprintf(err->message, sizeof(err->message),
             "arch \"native\" is the target of this daemon's GPU, and it has no GPU worker (or a "
             "GPU no target supports); name an arch such as sm_90");
    snprintf(err->field, sizeof(err->field), "arch");
    return -ENODEV;
}

int resolve_apply_defaults(const resolver *r, proto_job_options *opt, resolve_error *err)
{
    tuner_target t;
    if (pick_target(r, opt, &t, err) < 0)
        return -ENODEV;
    opt->target = t;
    if (!opt->tune_given)
        opt->tune = r->cfg.default_mode;
    return 0;
}

resolve_request resolve_request_of(const tuner_op *op, const proto_job_options *opt, const char *peer)
{
    resolve_request rq = {
        .op = op,
        .target = opt->target,
        .mode = opt->tune,
        .wait = opt->wait,
        .priority = opt->priority,
        .budget_s = opt->budget_s,
        .budget_candidates = opt->budget_candidates,
        .retune = opt->retune,
    };
    snprintf(rq.peer, sizeof(rq.peer), "%s", peer ? peer : "");
    return rq;
}

void resolve_drain(resolver *r)
{
    if (r)
        r->draining = true;
}

void resolve_invalidate(resolver *r)
{
    if (r)
        kc_mem_clear(r->answers);
}

size_t resolve_memory_count(const resolver *r)
{
    return r ? kc_mem_count(r->answers) : 0;
}
