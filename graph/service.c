/* graph/service.c - resolving a graph's kernels and answering its plan (graph/service.h). */
#include "graph/service.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <sodium.h>

#include "graph/graph.h"
#include "graph/graph_int.h"
#include "scheduler/sched.h"

#define GRAPH_JOBS_KEPT 256
#define SET_DIGEST_BYTES 16
/* Kernels asked of the resolver per loop turn, all graphs together: each costs a canonical op
 * text, a SHA-256 and a memory lookup (microseconds), so a turn stays well under a millisecond. */
#define RESOLVE_BATCH 64

/* A partitioned graph, shared by the requests that use it (refcounted: an entry evicted while a
 * request still resolves its kernels lives until that request ends). Immutable once made,
 * except for the fields the loop alone touches (refs, used, in_cache, the rendered plan and the
 * body memo), so a render on a graph thread may read its graph and plan while the loop serves. */
typedef struct plan_entry {
    char key[65];        /* hex BLAKE2b-256 of the canonical graph */
    graph_request graph; /* compacted (graph_compact): tensors and outputs */
    graph_plan plan;     /* ops kept for each distinct request's first kernel only */
    int n_unique;        /* distinct kernel requests */
    int *unique_of;      /* kernel -> distinct request */
    int *first_kernel;   /* distinct request -> its first kernel */
    size_t bytes;        /* heap bytes of all the above (the rendered plan apart) */
    int refs;
    uint64_t used;       /* LRU tick */
    bool in_cache;       /* not evicted yet: only cached entries keep a rendered plan */
    /* The plan last rendered from this entry and what it was rendered from: the target, the
     * tune mode and a digest of each distinct kernel's set. A request that resolves to the same
     * sets is answered with it, without reading the sets or rendering the plan again. */
    char *rendered;
    size_t rendered_len;
    tuner_target rendered_target;
    tuner_tune_mode rendered_tune;
    unsigned char (*rendered_sets)[SET_DIGEST_BYTES];
    /* The last request body that led here (BLAKE2b-256) and its options as parsed: the same
     * bytes again are neither parsed nor canonicalised. */
    bool has_body;
    unsigned char body_digest[32];
    proto_job_options body_opts;
    bool body_has_sizes; /* and its "sizes" (a graph with names) */
    int64_t body_sizes[TUNER_MAX_DIMS];
} plan_entry;

typedef struct graph_job {
    uint64_t id;
    char graph_key[65];
    int kernels, answered; /* distinct kernels; those answered at once (no job) */
    int n_jobs;
    uint64_t *jobs;
} graph_job;

typedef enum {
    W_NEW = 0,   /* being set up by graph_resolve_body */
    W_QUEUED,    /* waiting for a turn on the graph threads (gs->queue) */
    W_POOL,      /* its work is with the graph threads (gs->pool list) */
    W_RESOLVING, /* asking the resolver for its kernels, or waiting for their answers */
} wait_state;

typedef enum { WORK_PLAN = 0, WORK_RENDER, WORK_FREE } work_kind;

struct graph_service {
    uv_loop_t *loop;
    resolver *r;
    sched *s;
    graph_service_config cfg;
    plan_entry **cache;
    int n_cache, cap_cache;
    uint64_t cache_bytes, evictions, refused;
    uint64_t tick;
    graph_job jobs[GRAPH_JOBS_KEPT]; /* a ring: job id % GRAPH_JOBS_KEPT */
    uint64_t next_job;
    char *answer; /* the last answer's body (the result points at it); NULL when it was */
    plan_entry *answer_entry; /* this entry's rendered plan (a reference) */
    /* Waits by state: a FIFO for a turn, those with the graph threads, those asking the resolver. */
    graph_wait *queue, *queue_tail, *pool, *asking, *asking_tail;
    int queued, running;
    uv_idle_t idle; /* runs the resolver batches while some wait has kernels left to ask */
    bool closing, idle_closed, poll_closed;
    /* The graph threads (cfg.max_running, nice 19). Works go to them as graph_wait pointers
     * through submit_fd and come back through done_fd, which the loop polls: no lock is shared
     * with the loop, and no uv_async_t. (libuv 1.44's uv_async_send, which completes every
     * uv_queue_work, makes the loop spin and sched_yield() while the sending worker is between
     * its two atomic steps; a nice-19 worker preempted there held the loop 15-176 ms at a time
     * in perf traces of this bench.) */
    int submit_fd[2], done_fd[2];
    pthread_t *threads;
    int n_threads;
    int in_threads; /* items written to submit_fd and not yet read back from done_fd */
    uv_poll_t done_poll;
};

typedef struct unique_state {
    graph_wait *w;
    int index;
    resolve_wait *rw;
    char *body;     /* the kernel set once answered */
    size_t len;
    unsigned char digest[SET_DIGEST_BYTES]; /* BLAKE2b of body */
    uint64_t job;   /* an accepted job (wait:false) */
    bool hit;
} unique_state;

struct graph_wait {
    graph_service *gs;
    wait_state state;
    graph_wait *prev, *next; /* in the list of its state */
    work_kind kind;
    int skip;                /* (atomic) set by the loop: a graph thread skips the work */
    bool cancelled;          /* the client left or the service closed while with the graph threads */
    bool in_asking;          /* in gs->asking: kernels left to ask the resolver for */
    /* WORK_PLAN: the body's copy in, the parsed request and a new entry (or an error) out. */
    char *body;
    size_t len;
    unsigned char digest[32];
    graph_request rq;
    int r;
    proto_error perr;
    char key[65];
    plan_entry *fresh;
    /* Resolving. */
    plan_entry *pe;
    proto_job_options opts; /* target, tune, wait, priority, budget (the graph is pe's) */
    bool has_sizes;         /* the body's "sizes" (over the graph's dims): range jobs for them */
    int64_t sizes[TUNER_MAX_DIMS];
    char peer[64];
    unique_state *u;
    int next_ask;           /* distinct kernels asked of the resolver so far */
    int pending;
    bool failed;
    resolve_error error;
    int error_kernel;
    /* WORK_RENDER: the plan's JSON, or an error. */
    char *json;
    graph_cb cb;
    void *udata;
};

static void set_answer(graph_service *gs, char *json, plan_entry *pe);
static void pump(graph_service *gs);
static void work_finished(graph_service *gs, graph_wait *w);
static bool submit(graph_service *gs, graph_wait *w);

/* ---- entries and the byte-bounded cache ---------------------------------------------------- */

/* What pe's rendered plan of len bytes takes in the cache's bound: the text and the digests of
 * the sets it was rendered from (keep_rendered's two blocks). */
static size_t rendered_bytes(const plan_entry *pe, size_t len)
{
    return graph__chunk(len + 1) + graph__chunk((size_t)pe->n_unique * SET_DIGEST_BYTES + 1);
}

static size_t rendered_cost(const plan_entry *pe)
{
    return pe->rendered ? rendered_bytes(pe, pe->rendered_len) : 0;
}

static void entry_free(plan_entry *pe)
{
    if (!pe)
        return;
    free(pe->rendered);
    free(pe->rendered_sets);
    graph_plan_free(&pe->plan);
    graph_request_free(&pe->graph);
    free(pe->unique_of);
    free(pe->first_kernel);
    free(pe);
}

/* Memory a graph thread allocated is freed on a graph thread too (a WORK_FREE item). glibc's
 * free() of a chunk from another thread's arena takes that arena's lock; were the loop to free an
 * entry's thousands of chunks, it could wait for a nice-19 thread preempted while holding it. */
static void discard(graph_service *gs, plan_entry *pe, char *json)
{
    if (!pe && !json)
        return;
    graph_wait *t = gs && !gs->closing && gs->n_threads > 0 ? calloc(1, sizeof(*t)) : NULL;
    if (t) {
        t->kind = WORK_FREE;
        t->fresh = pe;
        t->json = json;
        if (submit(gs, t))
            return;
        free(t);
    }
    entry_free(pe);
    free(json);
}

static void entry_unref(graph_service *gs, plan_entry *pe)
{
    if (!pe || --pe->refs > 0)
        return;
    discard(gs, pe, NULL);
}

static void drop_rendered(graph_service *gs, plan_entry *pe)
{
    if (pe->in_cache)
        gs->cache_bytes -= rendered_cost(pe);
    free(pe->rendered);
    free(pe->rendered_sets);
    pe->rendered = NULL;
    pe->rendered_sets = NULL;
}

static void evict_at(graph_service *gs, int i)
{
    plan_entry *pe = gs->cache[i];
    drop_rendered(gs, pe);
    gs->cache_bytes -= pe->bytes;
    pe->in_cache = false;
    gs->cache[i] = gs->cache[--gs->n_cache];
    gs->evictions++;
    entry_unref(gs, pe);
}

/* Evicts least recently used entries other than keep until `more` bytes fit. Whether they do. */
static bool make_room(graph_service *gs, size_t more, const plan_entry *keep)
{
    while (gs->cache_bytes + more > gs->cfg.cache_bytes) {
        int lru = -1;
        for (int i = 0; i < gs->n_cache; i++)
            if (gs->cache[i] != keep && (lru < 0 || gs->cache[i]->used < gs->cache[lru]->used))
                lru = i;
        if (lru < 0)
            return false;
        evict_at(gs, lru);
    }
    return true;
}

/* Caches a new entry (the cache takes a reference) when it fits the bound at all. */
static void cache_insert(graph_service *gs, plan_entry *pe)
{
    pe->used = ++gs->tick;
    if (pe->bytes > gs->cfg.cache_bytes || !make_room(gs, pe->bytes, NULL))
        return; /* used by this request only */
    if (gs->n_cache == gs->cap_cache) {
        int cap = gs->cap_cache ? 2 * gs->cap_cache : 16;
        plan_entry **c = realloc(gs->cache, sizeof(*c) * (size_t)cap);
        if (!c)
            return;
        gs->cache = c;
        gs->cap_cache = cap;
    }
    gs->cache[gs->n_cache++] = pe;
    pe->refs++;
    pe->in_cache = true;
    gs->cache_bytes += pe->bytes;
}

static plan_entry *cache_find(graph_service *gs, const char *key)
{
    for (int i = 0; i < gs->n_cache; i++)
        if (strcmp(gs->cache[i]->key, key) == 0) {
            gs->cache[i]->used = ++gs->tick;
            return gs->cache[i];
        }
    return NULL;
}

/* The cached entry a request body with this digest led to last, or NULL. */
static plan_entry *entry_of_body(graph_service *gs, const unsigned char digest[32])
{
    for (int i = 0; i < gs->n_cache; i++) {
        plan_entry *pe = gs->cache[i];
        if (pe->has_body && memcmp(pe->body_digest, digest, 32) == 0) {
            pe->used = ++gs->tick;
            return pe;
        }
    }
    return NULL;
}

void graph_service_config_defaults(graph_service_config *c)
{
    c->cache_bytes = GRAPH_CACHE_BYTES_DEFAULT;
    c->max_running = GRAPH_MAX_RUNNING_DEFAULT;
    c->max_queued = GRAPH_MAX_QUEUED_DEFAULT;
}

static void *graph_thread(void *arg);
static void done_cb(uv_poll_t *h, int status, int events);

int graph_service_new(uv_loop_t *loop, resolver *r, sched *s, const graph_service_config *cfg,
                      graph_service **ret)
{
    graph_service *gs = calloc(1, sizeof(*gs));
    if (!gs)
        return -ENOMEM;
    gs->loop = loop;
    gs->r = r;
    gs->s = s;
    graph_service_config_defaults(&gs->cfg);
    if (cfg)
        gs->cfg = *cfg;
    if (gs->cfg.max_running < 1)
        gs->cfg.max_running = 1;
    if (gs->cfg.max_queued < 0)
        gs->cfg.max_queued = 0;
    gs->next_job = 1;
    gs->submit_fd[0] = gs->submit_fd[1] = gs->done_fd[0] = gs->done_fd[1] = -1;
    int rc = 0;
    /* The loop never blocks on either pipe: it writes at most max_running works (and the
     * entries to free) into 64 KiB, and reads what is there. */
    if (pipe2(gs->submit_fd, O_CLOEXEC) < 0 || pipe2(gs->done_fd, O_CLOEXEC) < 0 ||
        fcntl(gs->submit_fd[1], F_SETFL, O_NONBLOCK) < 0 || fcntl(gs->done_fd[0], F_SETFL, O_NONBLOCK) < 0) {
        rc = -errno;
        goto fail;
    }
    gs->threads = calloc((size_t)gs->cfg.max_running, sizeof(pthread_t));
    if (!gs->threads) {
        rc = -ENOMEM;
        goto fail;
    }
    rc = uv_poll_init(loop, &gs->done_poll, gs->done_fd[0]);
    if (rc < 0)
        goto fail;
    gs->done_poll.data = gs;
    rc = uv_idle_init(loop, &gs->idle);
    if (rc < 0) {
        /* The poll handle is closed through the loop: its memory is gs. Stop the rest. */
        gs->idle_closed = true;
        graph_service_free(gs);
        return rc;
    }
    gs->idle.data = gs;
    uv_poll_start(&gs->done_poll, UV_READABLE, done_cb);
    for (int i = 0; i < gs->cfg.max_running; i++) {
        if (pthread_create(&gs->threads[i], NULL, graph_thread, gs) != 0)
            break;
        gs->n_threads++;
    }
    if (gs->n_threads == 0) {
        graph_service_free(gs);
        return -EAGAIN;
    }
    *ret = gs;
    return 0;
fail:
    for (int i = 0; i < 2; i++) {
        if (gs->submit_fd[i] >= 0)
            close(gs->submit_fd[i]);
        if (gs->done_fd[i] >= 0)
            close(gs->done_fd[i]);
    }
    free(gs->threads);
    free(gs);
    return rc;
}

void graph_service_stats_get(const graph_service *gs, graph_service_stats *ret)
{
    memset(ret, 0, sizeof(*ret));
    if (!gs)
        return;
    ret->entries = (size_t)gs->n_cache;
    ret->bytes = gs->cache_bytes;
    ret->evictions = gs->evictions;
    ret->running = gs->running;
    ret->queued = gs->queued;
    ret->refused = gs->refused;
}

/* ---- waits ------------------------------------------------------------------------------- */

static void list_push(graph_wait **head, graph_wait **tail, graph_wait *w)
{
    w->next = NULL;
    w->prev = tail ? *tail : NULL;
    if (tail) {
        if (*tail)
            (*tail)->next = w;
        else
            *head = w;
        *tail = w;
    } else {
        w->next = *head;
        if (*head)
            (*head)->prev = w;
        *head = w;
    }
}

static void list_remove(graph_wait **head, graph_wait **tail, graph_wait *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        *head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    else if (tail)
        *tail = w->prev;
    w->prev = w->next = NULL;
}

/* Takes w out of the list of its state (not off the graph threads: a work there ends on its own). */
static void unlist(graph_service *gs, graph_wait *w)
{
    if (w->state == W_QUEUED) {
        list_remove(&gs->queue, &gs->queue_tail, w);
        gs->queued--;
    } else if (w->state == W_RESOLVING && w->in_asking) {
        list_remove(&gs->asking, &gs->asking_tail, w);
        w->in_asking = false;
    }
}

static void wait_free(graph_wait *w)
{
    if (!w)
        return;
    for (int i = 0; w->u && w->pe && i < w->pe->n_unique; i++)
        free(w->u[i].body);
    free(w->u);
    entry_unref(w->gs, w->pe);
    entry_unref(w->gs, w->fresh);
    graph_request_free(&w->rq);
    free(w->body);
    discard(w->gs, NULL, w->json);
    free(w);
}

/* Stops asking and waiting: the outstanding kernels' waits are cancelled (their jobs go on). */
static void stop_resolving(graph_service *gs, graph_wait *w)
{
    unlist(gs, w);
    for (int i = 0; w->u && w->pe && i < w->pe->n_unique; i++)
        if (w->u[i].rw) {
            resolve_wait_cancel(gs->r, w->u[i].rw);
            w->u[i].rw = NULL;
        }
}

static void fail_from_proto(graph_result *res, const proto_error *e)
{
    res->state = RESOLVE_FAILED;
    res->error.status = e->status;
    snprintf(res->error.code, sizeof(res->error.code), "%s", e->code);
    snprintf(res->error.message, sizeof(res->error.message), "%s", e->message);
    snprintf(res->error.field, sizeof(res->error.field), "%s", e->field);
}

static uint64_t set_workspace(const cJSON *set)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(set, "workspace_bytes");
    return cJSON_IsNumber(v) && v->valuedouble > 0 ? (uint64_t)v->valuedouble : 0;
}

/* A kernel set's workspace; a dispatch table's (a kernel with names) is the largest of its
 * generic set's and its ready entries' sets: the arena serves whichever a run picks. */
static uint64_t workspace_of(const cJSON *set)
{
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(set, "dispatch");
    if (!cJSON_IsObject(d))
        return set_workspace(set);
    uint64_t w = set_workspace(cJSON_GetObjectItemCaseSensitive(d, "generic"));
    const cJSON *entries = cJSON_GetObjectItemCaseSensitive(d, "entries");
    const cJSON *e;
    cJSON_ArrayForEach(e, entries)
    {
        const uint64_t x = set_workspace(cJSON_GetObjectItemCaseSensitive(e, "kernel_set"));
        w = x > w ? x : w;
    }
    return w;
}

/* The first node of kernel k, as the client numbered it, for an error's field. */
static void kernel_field(const plan_entry *pe, int k, char *buf, size_t len)
{
    const graph_kernel *gk = &pe->plan.kernels[k];
    snprintf(buf, len, "nodes[%d]", gk->n_nodes ? gk->nodes[0] : 0);
}

/* The body the next result points at: json (owned from now on), or an entry's rendered plan
 * (pe, held until the next answer). */
static void set_answer(graph_service *gs, char *json, plan_entry *pe)
{
    if (pe)
        pe->refs++;
    free(gs->answer);
    entry_unref(gs, gs->answer_entry);
    gs->answer = json;
    gs->answer_entry = pe;
}

/* Keeps json, rendered from pe's sets (w's digests) for w's target and tune, as pe's rendered
 * plan, making room within the cache's bound by evicting the least recently used entries. */
static void keep_rendered(graph_service *gs, plan_entry *pe, const graph_wait *w, const char *json, size_t len)
{
    drop_rendered(gs, pe);
    if (!pe->in_cache)
        return;
    const size_t cost = rendered_bytes(pe, len);
    if (pe->bytes + cost > gs->cfg.cache_bytes || !make_room(gs, cost, pe))
        return;
    char *copy = malloc(len + 1);
    unsigned char(*sets)[SET_DIGEST_BYTES] = malloc((size_t)pe->n_unique * SET_DIGEST_BYTES + 1);
    if (!copy || !sets) {
        free(copy);
        free(sets);
        return;
    }
    memcpy(copy, json, len + 1);
    pe->rendered = copy;
    pe->rendered_sets = sets;
    pe->rendered_len = len;
    for (int i = 0; i < pe->n_unique; i++)
        memcpy(pe->rendered_sets[i], w->u[i].digest, SET_DIGEST_BYTES);
    pe->rendered_target = w->opts.target;
    pe->rendered_tune = w->opts.tune;
    gs->cache_bytes += cost;
}

/* Whether pe's rendered plan is what w would render: the same target, tune mode and sets. */
static bool rendered_matches(const plan_entry *pe, const graph_wait *w)
{
    if (!pe->rendered || pe->rendered_tune != w->opts.tune || pe->rendered_target.sm != w->opts.target.sm ||
        pe->rendered_target.arch_specific != w->opts.target.arch_specific)
        return false;
    for (int i = 0; i < pe->n_unique; i++)
        if (memcmp(pe->rendered_sets[i], w->u[i].digest, SET_DIGEST_BYTES) != 0)
            return false;
    return true;
}

static void new_job(graph_service *gs, graph_wait *w, graph_result *res)
{
    graph_job *j = &gs->jobs[gs->next_job % GRAPH_JOBS_KEPT];
    free(j->jobs);
    memset(j, 0, sizeof(*j));
    j->id = gs->next_job++;
    memcpy(j->graph_key, w->pe->key, sizeof(j->graph_key));
    j->kernels = w->pe->n_unique;
    j->jobs = calloc((size_t)w->pe->n_unique + 1, sizeof(uint64_t));
    for (int i = 0; i < w->pe->n_unique; i++) {
        if (w->u[i].job && j->jobs)
            j->jobs[j->n_jobs++] = w->u[i].job;
        else if (w->u[i].body)
            j->answered++;
    }
    char *json = NULL;
    if (graph_job_json(gs, j->id, &json) < 0) {
        res->state = RESOLVE_FAILED;
        resolve_error_from_errno(&res->error, -ENOMEM, "making the graph job");
        return;
    }
    set_answer(gs, json, NULL);
    res->state = RESOLVE_ACCEPTED;
    res->job_id = j->id;
    res->body = json;
    res->len = strlen(json);
}

/* Every kernel is in: the error, the job, or the plan rendered last time. Returns false (res
 * untouched but its counts) when the plan must be rendered (on a graph thread). */
static bool conclude(graph_wait *w, graph_result *res)
{
    graph_service *gs = w->gs;
    plan_entry *pe = w->pe;
    memset(res, 0, sizeof(*res));
    res->kernels = pe->n_unique;
    bool accepted = false;
    for (int i = 0; i < pe->n_unique; i++) {
        res->kernels_hit += w->u[i].hit;
        accepted = accepted || w->u[i].job;
    }
    if (w->failed) {
        res->state = RESOLVE_FAILED;
        res->error = w->error;
        const graph_kernel *gk = &pe->plan.kernels[w->error_kernel];
        char nodes[160] = "";
        size_t n = 0;
        for (int j = 0; j < gk->n_nodes && n < sizeof(nodes); j++) {
            int ci = gk->nodes[j];
            const char *name = ci >= 0 && ci < pe->plan.n_node_names ? pe->plan.node_names[ci] : "?";
            n += (size_t)snprintf(nodes + n, sizeof(nodes) - n, "%s%s", j ? ", " : "", name);
        }
        snprintf(res->error.message, sizeof(res->error.message), "the kernel of nodes %.160s: %.300s",
                 nodes, w->error.message);
        kernel_field(pe, w->error_kernel, res->error.field, sizeof(res->error.field));
        return true;
    }
    if (accepted) {
        new_job(gs, w, res);
        return true;
    }
    if (rendered_matches(pe, w)) {
        set_answer(gs, NULL, pe);
        res->state = RESOLVE_ANSWERED;
        res->body = pe->rendered;
        res->len = pe->rendered_len;
        return true;
    }
    return false;
}

/* Hands a wait to the graph threads (its turn comes in order). */
static void enqueue(graph_service *gs, graph_wait *w, work_kind kind)
{
    w->kind = kind;
    w->state = W_QUEUED;
    list_push(&gs->queue, &gs->queue_tail, w);
    gs->queued++;
}

/* A wait whose kernels are all in, outside graph_resolve_body: answered through its callback,
 * or sent to the graph threads to render its plan. */
static void complete(graph_wait *w)
{
    graph_service *gs = w->gs;
    stop_resolving(gs, w);
    graph_result out;
    if (!conclude(w, &out)) {
        enqueue(gs, w, WORK_RENDER);
        pump(gs);
        return;
    }
    w->cb(w->udata, &out);
    wait_free(w);
}

/* One distinct kernel's resolution ended (now or later). */
static void take(unique_state *u, const resolve_result *res)
{
    graph_wait *w = u->w;
    switch (res->state) {
    case RESOLVE_ANSWERED:
        u->body = malloc(res->len + 1);
        if (!u->body) {
            w->failed = true;
            resolve_error_from_errno(&w->error, -ENOMEM, "reading a kernel set");
            w->error_kernel = w->pe->first_kernel[u->index];
            break;
        }
        memcpy(u->body, res->body, res->len);
        u->body[res->len] = '\0';
        u->len = res->len;
        crypto_generichash(u->digest, sizeof(u->digest), (const unsigned char *)u->body, u->len, NULL, 0);
        u->hit = RESOLVE_ORIGIN_IS_HIT(res->origin);
        break;
    case RESOLVE_ACCEPTED:
        u->job = res->job.id;
        break;
    case RESOLVE_FAILED:
        if (!w->failed) {
            w->failed = true;
            w->error = res->error;
            w->error_kernel = w->pe->first_kernel[u->index];
        }
        break;
    case RESOLVE_WAITING:
        break;
    }
}

static bool all_asked(const graph_wait *w)
{
    return w->failed || w->next_ask >= w->pe->n_unique;
}

static void kernel_done(void *udata, const resolve_result *res)
{
    unique_state *u = udata;
    graph_wait *w = u->w;
    u->rw = NULL;
    take(u, res);
    w->pending--;
    /* Done, or failed: the client hears of the failure now; the other kernels' jobs go on. */
    if (w->state == W_RESOLVING && all_asked(w) && (w->pending == 0 || w->failed))
        complete(w);
}

/* A kernel with names: its dispatch table, as /v1/kernels answers its request (the graph's
 * "sizes", by name, start the range jobs that hold them, beside the hints). */
static void resolve_named(graph_wait *w, const graph_kernel *gk, const resolve_request *rq, unique_state *u,
                          resolve_result *res)
{
    proto_kernel_request *kr = malloc(sizeof(*kr));
    if (!kr) {
        memset(res, 0, sizeof(*res));
        res->state = RESOLVE_FAILED;
        resolve_error_from_errno(&res->error, -ENOMEM, "resolving a kernel");
        return;
    }
    kr->op = *gk->op;
    kr->opt = w->opts;
    kr->dyn = *gk->dyn;
    kr->dyn.has_sizes = false;
    if (w->has_sizes) {
        const graph *g = &w->pe->graph.g;
        kr->dyn.has_sizes = true;
        for (int k = 0; k < kr->op.n_dims; k++)
            for (int j = 0; j < g->n_dims; j++)
                if (strcmp(kr->op.dims[k].name, g->dims[j].name) == 0)
                    kr->dyn.sizes[k] = w->sizes[j];
    }
    resolve_request r = *rq;
    r.op = &kr->op;
    resolve_kernel_request(w->gs->r, kr, &r, kernel_done, u, res, &u->rw);
    free(kr); /* a waiting table keeps its own copy (resolve/dispatch.c) */
}

/* Asks the resolver for up to n more of w's kernels. Returns how many it asked. */
static int ask_some(graph_wait *w, int n)
{
    graph_service *gs = w->gs;
    plan_entry *pe = w->pe;
    int asked = 0;
    while (asked < n && !all_asked(w)) {
        unique_state *u = &w->u[w->next_ask];
        u->w = w;
        u->index = w->next_ask++;
        const graph_kernel *gk = &pe->plan.kernels[pe->first_kernel[u->index]];
        resolve_request kr = resolve_request_of(gk->op, &w->opts, w->peer);
        resolve_result res;
        w->pending++;
        if (gk->dyn)
            resolve_named(w, gk, &kr, u, &res);
        else
            resolve_kernel(gs->r, &kr, kernel_done, u, &res, &u->rw);
        if (res.state != RESOLVE_WAITING) {
            w->pending--;
            take(u, &res);
        }
        asked++;
    }
    return asked;
}

static void asking_append(graph_service *gs, graph_wait *w)
{
    list_push(&gs->asking, &gs->asking_tail, w);
    w->in_asking = true;
}

/* A batch of kernels per loop turn, shared by the waits in turn. */
static void idle_cb(uv_idle_t *h)
{
    graph_service *gs = h->data;
    int budget = RESOLVE_BATCH;
    while (budget > 0 && gs->asking) {
        /* Round robin: the head asks its share and goes to the back. */
        graph_wait *w = gs->asking;
        list_remove(&gs->asking, &gs->asking_tail, w);
        w->in_asking = false;
        budget -= ask_some(w, budget < 16 ? budget : 16);
        if (!all_asked(w))
            asking_append(gs, w);
        else if (w->pending == 0 || w->failed)
            complete(w);
    }
    if (!gs->asking)
        uv_idle_stop(&gs->idle);
}

/* Starts resolving w's kernels with pe: the first batch now, the rest on later loop turns. */
static int begin_resolving(graph_wait *w)
{
    graph_service *gs = w->gs;
    w->u = calloc((size_t)w->pe->n_unique + 1, sizeof(unique_state));
    if (!w->u)
        return -ENOMEM;
    w->state = W_RESOLVING;
    ask_some(w, RESOLVE_BATCH);
    if (!all_asked(w)) {
        asking_append(gs, w);
        uv_idle_start(&gs->idle, idle_cb);
    }
    return 0;
}

/* ---- the graph threads' works---------------------------------------------------------------- */

/* Distinct requests in order of first use: kernels sorted by their request text. */
typedef struct req_ref {
    const char *request;
    int k;
} req_ref;

static int by_request(const void *a, const void *b)
{
    const req_ref *x = a, *y = b;
    int c = strcmp(x->request, y->request);
    return c ? c : x->k - y->k;
}

static int find_unique(plan_entry *pe)
{
    int n = pe->plan.n_kernels;
    pe->unique_of = malloc(sizeof(int) * ((size_t)n + 1));
    pe->first_kernel = malloc(sizeof(int) * ((size_t)n + 1));
    req_ref *refs = malloc(sizeof(*refs) * ((size_t)n + 1));
    int *leader = malloc(sizeof(int) * ((size_t)n + 1));
    if (!pe->unique_of || !pe->first_kernel || !refs || !leader) {
        free(refs);
        free(leader);
        return -ENOMEM;
    }
    for (int k = 0; k < n; k++)
        refs[k] = (req_ref){pe->plan.kernels[k].request, k};
    qsort(refs, (size_t)n, sizeof(*refs), by_request);
    for (int i = 0; i < n; i++)
        leader[refs[i].k] = i > 0 && strcmp(refs[i].request, refs[i - 1].request) == 0 ? leader[refs[i - 1].k] : refs[i].k;
    pe->n_unique = 0;
    for (int k = 0; k < n; k++) {
        if (leader[k] == k) {
            pe->first_kernel[pe->n_unique] = k;
            pe->unique_of[k] = pe->n_unique++;
        } else {
            pe->unique_of[k] = pe->unique_of[leader[k]];
        }
    }
    free(refs);
    free(leader);
    /* Only the first kernel of each request is resolved: the others' ops go (4 KB each). */
    for (int k = 0; k < n; k++)
        if (pe->first_kernel[pe->unique_of[k]] != k) {
            free(pe->plan.kernels[k].op);
            pe->plan.kernels[k].op = NULL;
            free(pe->plan.kernels[k].dyn);
            pe->plan.kernels[k].dyn = NULL;
        }
    return 0;
}

static void oom(proto_error *e)
{
    e->status = 500;
    snprintf(e->code, sizeof(e->code), "internal");
    snprintf(e->message, sizeof(e->message), "out of memory");
    e->field[0] = '\0';
}

/* WORK_PLAN, on a graph thread: the body parsed and canonicalised, and a new entry partitioned
 * (used only when no cached entry has the key by the time the loop looks). */
static void plan_work(graph_wait *w)
{
    /* The body's copy is the loop's memory: freed there (plan_done), never here (see discard). */
    w->r = graph_request_parse(w->body, w->len, &w->rq, &w->perr);
    if (w->r < 0)
        return;
    char *canon = graph_canonical(&w->rq.g);
    if (!canon) {
        w->r = -ENOMEM;
        oom(&w->perr);
        return;
    }
    unsigned char h[32];
    crypto_generichash(h, sizeof(h), (const unsigned char *)canon, strlen(canon), NULL, 0);
    free(canon);
    sodium_bin2hex(w->key, sizeof(w->key), h, sizeof(h));
    plan_entry *pe = calloc(1, sizeof(*pe));
    if (!pe) {
        w->r = -ENOMEM;
        oom(&w->perr);
        return;
    }
    pe->refs = 1;
    w->fresh = pe;
    memcpy(pe->key, w->key, sizeof(w->key));
    w->r = graph_partition(&w->rq.g, &w->rq.opt.target, &pe->plan, &w->perr);
    if (w->r < 0)
        return;
    if (find_unique(pe) < 0) {
        w->r = -ENOMEM;
        oom(&w->perr);
        return;
    }
    graph_compact(&w->rq.g);
    pe->graph.g = w->rq.g;
    memset(&w->rq.g, 0, sizeof(w->rq.g)); /* the entry owns the graph now */
    pe->bytes = graph__chunk(sizeof(*pe)) + graph_bytes(&pe->graph.g) + graph_plan_bytes(&pe->plan) +
                2 * graph__chunk(sizeof(int) * ((size_t)pe->plan.n_kernels + 1));
}

/* WORK_RENDER, on a graph thread: the sets parsed, the plan placed for their workspaces (in a copy of
 * the entry's tensors: other requests may render the same entry at the same time) and
 * rendered. */
static void render_work(graph_wait *w)
{
    const plan_entry *pe = w->pe;
    int nk = pe->plan.n_kernels;
    uint64_t *ws = calloc((size_t)nk + 1, sizeof(uint64_t));
    const cJSON **sets = calloc((size_t)nk + 1, sizeof(*sets));
    cJSON **parsed = calloc((size_t)pe->n_unique + 1, sizeof(*parsed));
    graph_plan view = pe->plan;
    view.cap_tensors = pe->plan.n_tensors + nk + 1; /* room for every workspace */
    view.tensors = malloc(sizeof(*view.tensors) * (size_t)view.cap_tensors);
    int r = ws && sets && parsed && view.tensors ? 0 : -ENOMEM;
    if (view.tensors)
        memcpy(view.tensors, pe->plan.tensors, sizeof(*view.tensors) * (size_t)pe->plan.n_tensors);
    /* Each distinct set parsed once (the plan copies it into every step that runs it). */
    for (int i = 0; r == 0 && i < pe->n_unique; i++) {
        parsed[i] = cJSON_ParseWithLength(w->u[i].body, w->u[i].len);
        r = parsed[i] ? 0 : -ENOMEM;
    }
    for (int k = 0; r == 0 && k < nk; k++) {
        sets[k] = parsed[pe->unique_of[k]];
        ws[k] = workspace_of(sets[k]);
    }
    const graph_request rq = {.g = pe->graph.g, .opt = w->opts};
    if (r == 0)
        r = graph_plan_place(&view, ws);
    if (r == 0)
        r = graph_plan_render(&rq, &view, sets, pe->key, &w->json);
    for (int i = 0; parsed && i < pe->n_unique; i++)
        cJSON_Delete(parsed[i]);
    free(parsed);
    free(view.tensors);
    free(ws);
    free(sets);
    w->r = r;
}

/* A graph thread: works in, at nice 19, until a NULL item. */
static void *graph_thread(void *arg)
{
    graph_service *gs = arg;
    sched_thread_background();
    for (;;) {
        graph_wait *w = NULL;
        ssize_t n = read(gs->submit_fd[0], &w, sizeof(w));
        if (n < 0 && errno == EINTR)
            continue;
        if (n != (ssize_t)sizeof(w) || !w)
            break;
        if (w->kind == WORK_FREE) {
            entry_free(w->fresh);
            free(w->json);
            w->fresh = NULL;
            w->json = NULL;
        } else if (!__atomic_load_n(&w->skip, __ATOMIC_ACQUIRE)) {
            if (w->kind == WORK_PLAN) {
                plan_work(w);
                /* A graph that failed (partition, memory) goes here, not on the loop. */
                if (w->r < 0)
                    graph_request_free(&w->rq);
            } else {
                render_work(w);
            }
        }
        while (write(gs->done_fd[1], &w, sizeof(w)) < 0 && errno == EINTR)
            ;
    }
    return NULL;
}

/* Hands an item to the graph threads. False when the pipe is full (the loop never waits). */
static bool submit(graph_service *gs, graph_wait *w)
{
    if (gs->n_threads == 0 || write(gs->submit_fd[1], &w, sizeof(w)) != (ssize_t)sizeof(w))
        return false;
    gs->in_threads++;
    return true;
}

static void service_release(graph_service *gs);

/* Gives the queue's head its turn while fewer than max_running works are on the threads. */
static void pump(graph_service *gs)
{
    while (!gs->closing && gs->queue && gs->running < gs->cfg.max_running) {
        graph_wait *w = gs->queue;
        if (!submit(gs, w))
            return; /* the pipe is full: the next completion pumps again */
        list_remove(&gs->queue, &gs->queue_tail, w);
        gs->queued--;
        w->state = W_POOL;
        list_push(&gs->pool, NULL, w);
        gs->running++;
    }
}

/* WORK_PLAN ended: the entry by its key (cached, or the new one), then the kernels. */
static void plan_done(graph_service *gs, graph_wait *w)
{
    graph_result res;
    memset(&res, 0, sizeof(res));
    free(w->body);
    w->body = NULL;
    if (w->r < 0) {
        fail_from_proto(&res, &w->perr);
        goto answer;
    }
    const proto_job_options parsed = w->rq.opt; /* before defaults and arch "native" */
    w->opts = w->rq.opt;
    if (resolve_apply_defaults(gs->r, &w->opts, &res.error) < 0) {
        res.state = RESOLVE_FAILED;
        goto answer;
    }
    plan_entry *pe = cache_find(gs, w->key);
    if (pe) {
        pe->refs++;
    } else {
        pe = w->fresh;
        w->fresh = NULL;
        cache_insert(gs, pe);
    }
    w->has_sizes = w->rq.has_sizes;
    memcpy(w->sizes, w->rq.sizes, sizeof(w->sizes));
    if (pe->in_cache) { /* the last body that led here */
        pe->has_body = true;
        memcpy(pe->body_digest, w->digest, sizeof(w->digest));
        pe->body_opts = parsed;
        pe->body_has_sizes = w->has_sizes;
        memcpy(pe->body_sizes, w->sizes, sizeof(pe->body_sizes));
    }
    w->pe = pe;
    entry_unref(gs, w->fresh); /* partitioned for nothing: another request cached the key first */
    w->fresh = NULL;
    graph_request_free(&w->rq);
    if (begin_resolving(w) < 0) {
        resolve_error_from_errno(&res.error, -ENOMEM, "starting the graph");
        res.state = RESOLVE_FAILED;
        goto answer;
    }
    if (all_asked(w) && (w->pending == 0 || w->failed))
        complete(w);
    return;
answer:
    w->cb(w->udata, &res);
    wait_free(w);
}

/* WORK_RENDER ended: the plan kept for the next request and answered. */
static void render_done(graph_service *gs, graph_wait *w)
{
    graph_result res;
    memset(&res, 0, sizeof(res));
    res.kernels = w->pe->n_unique;
    for (int i = 0; i < w->pe->n_unique; i++)
        res.kernels_hit += w->u[i].hit;
    if (w->r < 0) {
        res.state = RESOLVE_FAILED;
        resolve_error_from_errno(&res.error, w->r, "rendering the plan");
    } else {
        /* Answered from loop memory (the entry's copy, or one made now); the thread's text goes
         * back to a graph thread with the wait. */
        const size_t len = strlen(w->json);
        keep_rendered(gs, w->pe, w, w->json, len);
        if (w->pe->rendered && w->pe->rendered_len == len) {
            set_answer(gs, NULL, w->pe);
            res.body = w->pe->rendered;
        } else {
            char *copy = malloc(len + 1);
            if (copy)
                memcpy(copy, w->json, len + 1);
            set_answer(gs, copy, NULL);
            res.body = copy;
        }
        res.state = res.body ? RESOLVE_ANSWERED : RESOLVE_FAILED;
        if (!res.body)
            resolve_error_from_errno(&res.error, -ENOMEM, "answering the plan");
        res.len = len;
    }
    w->cb(w->udata, &res);
    wait_free(w);
}

static void work_finished(graph_service *gs, graph_wait *w)
{
    list_remove(&gs->pool, NULL, w);
    gs->running--;
    if (gs->closing || w->cancelled) {
        wait_free(w);
        return;
    }
    if (w->kind == WORK_PLAN)
        plan_done(gs, w);
    else
        render_done(gs, w);
}

/* The graph threads' results, on the loop. */
static void done_cb(uv_poll_t *h, int status, int events)
{
    graph_service *gs = h->data;
    (void)status;
    (void)events;
    graph_wait *w;
    while (read(gs->done_fd[0], &w, sizeof(w)) == (ssize_t)sizeof(w)) {
        gs->in_threads--;
        if (w->kind == WORK_FREE)
            free(w);
        else
            work_finished(gs, w);
    }
    if (gs->closing)
        service_release(gs);
    else
        pump(gs);
}

/* ---- the API ------------------------------------------------------------------------------ */

void graph_resolve_body(graph_service *gs, const char *peer, const char *body, size_t len,
                        graph_cb cb, void *udata, graph_result *ret, graph_wait **ret_wait)
{
    memset(ret, 0, sizeof(*ret));
    if (ret_wait)
        *ret_wait = NULL;
    unsigned char digest[32];
    crypto_generichash(digest, sizeof(digest), (const unsigned char *)body, len, NULL, 0);
    plan_entry *known = entry_of_body(gs, digest);
    if (!known && gs->queued >= gs->cfg.max_queued && gs->running >= gs->cfg.max_running) {
        gs->refused++;
        ret->state = RESOLVE_FAILED;
        ret->error.status = 429;
        snprintf(ret->error.code, sizeof(ret->error.code), "graph_queue_full");
        snprintf(ret->error.message, sizeof(ret->error.message),
                 "too many graphs are being planned (%d at a time, %d waiting); retry later",
                 gs->cfg.max_running, gs->cfg.max_queued);
        return;
    }
    graph_wait *w = calloc(1, sizeof(*w));
    if (!w) {
        resolve_error_from_errno(&ret->error, -ENOMEM, "starting the graph");
        ret->state = RESOLVE_FAILED;
        return;
    }
    w->gs = gs;
    w->state = W_NEW;
    w->cb = cb;
    w->udata = udata;
    snprintf(w->peer, sizeof(w->peer), "%s", peer ? peer : "");
    if (!known) {
        /* New bytes: parsed and partitioned on a graph thread, from a copy (the client may leave). */
        w->body = malloc(len + 1);
        if (!w->body) {
            wait_free(w);
            resolve_error_from_errno(&ret->error, -ENOMEM, "starting the graph");
            ret->state = RESOLVE_FAILED;
            return;
        }
        memcpy(w->body, body, len);
        w->body[len] = '\0';
        w->len = len;
        memcpy(w->digest, digest, sizeof(digest));
        enqueue(gs, w, WORK_PLAN);
        pump(gs);
        ret->state = RESOLVE_WAITING;
        *ret_wait = w;
        return;
    }
    w->opts = known->body_opts;
    w->has_sizes = known->body_has_sizes;
    memcpy(w->sizes, known->body_sizes, sizeof(w->sizes));
    if (resolve_apply_defaults(gs->r, &w->opts, &ret->error) < 0) {
        ret->state = RESOLVE_FAILED;
        wait_free(w);
        return;
    }
    known->refs++;
    w->pe = known;
    if (begin_resolving(w) < 0) {
        resolve_error_from_errno(&ret->error, -ENOMEM, "starting the graph");
        ret->state = RESOLVE_FAILED;
        wait_free(w);
        return;
    }
    if (!all_asked(w) || (w->pending > 0 && !w->failed)) {
        ret->state = RESOLVE_WAITING;
        *ret_wait = w;
        return;
    }
    /* Every kernel answered at once (or one failed: the others go on, their results are
     * stored for the next request). */
    stop_resolving(gs, w);
    if (conclude(w, ret)) {
        wait_free(w);
        return;
    }
    enqueue(gs, w, WORK_RENDER);
    pump(gs);
    ret->state = RESOLVE_WAITING;
    *ret_wait = w;
}

void graph_wait_cancel(graph_service *gs, graph_wait *w)
{
    if (!w)
        return;
    if (w->state == W_POOL) {
        /* Not stoppable once started: skipped by its thread when not started yet, and dropped
         * when it comes back (work_finished). */
        w->cancelled = true;
        __atomic_store_n(&w->skip, 1, __ATOMIC_RELEASE);
        return;
    }
    stop_resolving(gs, w);
    wait_free(w);
}

static void handle_closed(uv_handle_t *h)
{
    graph_service *gs = h->data;
    if (h == (uv_handle_t *)&gs->idle)
        gs->idle_closed = true;
    else
        gs->poll_closed = true;
    service_release(gs);
}

/* After graph_service_free: once every item is back from the threads, the poll handle closes,
 * the threads (told to stop) are joined, and the service's memory goes. */
static void service_release(graph_service *gs)
{
    if (gs->in_threads > 0)
        return;
    if (!uv_is_closing((uv_handle_t *)&gs->done_poll)) {
        uv_close((uv_handle_t *)&gs->done_poll, handle_closed);
        return;
    }
    if (!gs->poll_closed || !gs->idle_closed)
        return;
    for (int i = 0; i < gs->n_threads; i++)
        pthread_join(gs->threads[i], NULL);
    for (int i = 0; i < 2; i++) {
        close(gs->submit_fd[i]);
        close(gs->done_fd[i]);
    }
    free(gs->threads);
    free(gs);
}

void graph_service_free(graph_service *gs)
{
    if (!gs)
        return;
    gs->closing = true;
    while (gs->queue) {
        graph_wait *w = gs->queue;
        unlist(gs, w);
        wait_free(w);
    }
    while (gs->asking) {
        graph_wait *w = gs->asking;
        stop_resolving(gs, w);
        wait_free(w);
    }
    uv_idle_stop(&gs->idle);
    for (graph_wait *w = gs->pool; w; w = w->next) {
        w->cancelled = true;
        __atomic_store_n(&w->skip, 1, __ATOMIC_RELEASE);
    }
    while (gs->n_cache > 0) {
        plan_entry *pe = gs->cache[--gs->n_cache];
        pe->in_cache = false;
        entry_unref(gs, pe);
    }
    free(gs->cache);
    gs->cache = NULL;
    for (int i = 0; i < GRAPH_JOBS_KEPT; i++) {
        free(gs->jobs[i].jobs);
        gs->jobs[i].jobs = NULL;
    }
    set_answer(gs, NULL, NULL);
    /* A NULL item stops each thread once it has done what is before it. */
    const graph_wait *stop = NULL;
    for (int i = 0; i < gs->n_threads; i++)
        if (write(gs->submit_fd[1], &stop, sizeof(stop)) != (ssize_t)sizeof(stop)) {
            /* Full (cannot be: at most max_running works and a few frees are in it): wait. */
            int fl = fcntl(gs->submit_fd[1], F_GETFL);
            (void)fcntl(gs->submit_fd[1], F_SETFL, fl & ~O_NONBLOCK);
            i--;
        }
    if (!gs->idle_closed)
        uv_close((uv_handle_t *)&gs->idle, handle_closed);
    service_release(gs);
}

int graph_job_json(graph_service *gs, uint64_t id, char **ret)
{
    graph_job *j = &gs->jobs[id % GRAPH_JOBS_KEPT];
    if (id == 0 || j->id != id)
        return -ENOENT;
    int done = j->answered, failed = 0, running = 0, total = 0, measured = 0;
    for (int i = 0; i < j->n_jobs; i++) {
        sched_job_info info;
        if (!gs->s || sched_job_get(gs->s, j->jobs[i], &info) < 0) {
            done++; /* forgotten by the scheduler: it ended long ago */
            continue;
        }
        total += info.candidates_total;
        measured += info.candidates_done;
        if (info.state == SCHED_DONE)
            done++;
        else if (info.state == SCHED_FAILED || info.state == SCHED_CANCELLED)
            failed++;
        else
            running++;
    }
    const char *state = failed ? "failed" : running ? "running" : "done";
    /* The shape of a kernel job (GET /v1/jobs/ID): in a "job" envelope, ids as decimal
     * strings, so that a client reads both kinds of job alike. */
    cJSON *root = cJSON_CreateObject(), *o = cJSON_AddObjectToObject(root, "job");
    if (!o) {
        cJSON_Delete(root);
        return -ENOMEM;
    }
    char num[24], url[48];
    snprintf(num, sizeof(num), "%llu", (unsigned long long)j->id);
    snprintf(url, sizeof(url), "/v1/graphs/jobs/%s", num);
    cJSON_AddStringToObject(o, "id", num);
    cJSON_AddStringToObject(o, "url", url);
    cJSON_AddStringToObject(o, "state", state);
    cJSON_AddStringToObject(o, "graph_key", j->graph_key);
    cJSON_AddNumberToObject(o, "kernels", j->kernels);
    cJSON_AddNumberToObject(o, "kernels_done", done);
    cJSON_AddNumberToObject(o, "kernels_failed", failed);
    cJSON_AddNumberToObject(o, "candidates_total", total);
    cJSON_AddNumberToObject(o, "candidates_done", measured);
    cJSON_AddNumberToObject(o, "progress", j->kernels ? (double)(done + failed) / j->kernels : 1.0);
    cJSON *jobs = cJSON_AddArrayToObject(o, "jobs");
    for (int i = 0; i < j->n_jobs; i++) {
        snprintf(num, sizeof(num), "%llu", (unsigned long long)j->jobs[i]);
        cJSON_AddItemToArray(jobs, cJSON_CreateString(num));
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!s)
        return -ENOMEM;
    *ret = s;
    return 0;
}
