/* graph/service.c - resolving a graph's kernels and answering its plan (graph/service.h). */
#include "graph/service.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <sodium.h>

#include "graph/graph.h"

#define PLAN_CACHE_ENTRIES 64
#define GRAPH_JOBS_KEPT 256
/* Rendered plans kept for repeated requests, in all entries together (the least recently used
 * entries drop theirs first). */
#define RENDERED_BYTES_MAX (64u << 20)
#define SET_DIGEST_BYTES 16

/* A partitioned graph, shared by the requests that use it (refcounted: an entry evicted while a
 * request still resolves its kernels lives until that request ends). */
typedef struct plan_entry {
    char key[65];       /* hex BLAKE2b-256 of the canonical graph */
    graph_request graph; /* the parsed graph (its options are the first request's) */
    graph_plan plan;
    int n_unique;       /* distinct kernel requests */
    int *unique_of;     /* kernel -> distinct request */
    int *first_kernel;  /* distinct request -> its first kernel */
    int refs;
    uint64_t used;      /* LRU tick */
    bool in_cache;      /* not evicted yet: only cached entries keep a rendered plan */
    /* The plan last rendered from this entry and what it was rendered from: the target, the
     * tune mode and a digest of each distinct kernel's set. A request that resolves to the same
     * sets is answered with it, without reading the sets or rendering the plan again (a hit on
     * a 4000-node graph spent most of its time there). */
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
} plan_entry;

typedef struct graph_job {
    uint64_t id;
    char graph_key[65];
    int kernels, answered; /* distinct kernels; those answered at once (no job) */
    int n_jobs;
    uint64_t *jobs;
} graph_job;

struct graph_service {
    resolver *r;
    sched *s;
    plan_entry *cache[PLAN_CACHE_ENTRIES];
    uint64_t tick;
    graph_job jobs[GRAPH_JOBS_KEPT]; /* a ring: job id % GRAPH_JOBS_KEPT */
    uint64_t next_job;
    char *answer; /* the last answer's body (the result points at it); NULL when it was */
    plan_entry *answer_entry; /* this entry's rendered plan (a reference) */
    size_t rendered_bytes;    /* of all entries' rendered plans */
};

typedef struct unique_state {
    graph_wait *w;
    int index;
    resolve_wait *rw;
    char *body;     /* the kernel set once answered */
    size_t len;
    unsigned char digest[SET_DIGEST_BYTES]; /* BLAKE2b of body */
    cJSON *set;     /* body parsed, once, where the plan is rendered again */
    uint64_t job;   /* an accepted job (wait:false) */
    bool hit;
} unique_state;

struct graph_wait {
    graph_service *gs;
    plan_entry *pe;
    proto_job_options opts; /* target, tune, wait, priority, budget (the graph is pe's) */
    char peer[64];
    unique_state *u;
    int pending;
    bool failed;
    resolve_error error;
    int error_kernel;
    bool in_call; /* graph_resolve_body has not returned yet */
    graph_cb cb;
    void *udata;
};

static void set_answer(graph_service *gs, char *json, plan_entry *pe);

static void drop_rendered(graph_service *gs, plan_entry *pe)
{
    gs->rendered_bytes -= pe->rendered ? pe->rendered_len : 0;
    free(pe->rendered);
    free(pe->rendered_sets);
    pe->rendered = NULL;
    pe->rendered_sets = NULL;
}

static void entry_unref(plan_entry *pe)
{
    if (!pe || --pe->refs > 0)
        return;
    free(pe->rendered);
    free(pe->rendered_sets);
    graph_plan_free(&pe->plan);
    graph_request_free(&pe->graph);
    free(pe->unique_of);
    free(pe->first_kernel);
    free(pe);
}

int graph_service_new(resolver *r, sched *s, graph_service **ret)
{
    graph_service *gs = calloc(1, sizeof(*gs));
    if (!gs)
        return -ENOMEM;
    gs->r = r;
    gs->s = s;
    gs->next_job = 1;
    *ret = gs;
    return 0;
}

void graph_service_free(graph_service *gs)
{
    if (!gs)
        return;
    for (int i = 0; i < PLAN_CACHE_ENTRIES; i++)
        entry_unref(gs->cache[i]);
    for (int i = 0; i < GRAPH_JOBS_KEPT; i++)
        free(gs->jobs[i].jobs);
    set_answer(gs, NULL, NULL);
    free(gs);
}

size_t graph_service_plans(const graph_service *gs)
{
    size_t n = 0;
    for (int i = 0; gs && i < PLAN_CACHE_ENTRIES; i++)
        n += gs->cache[i] != NULL;
    return n;
}

static void fail_from_proto(graph_result *res, const proto_error *e)
{
    res->state = RESOLVE_FAILED;
    res->error.status = e->status;
    snprintf(res->error.code, sizeof(res->error.code), "%s", e->code);
    snprintf(res->error.message, sizeof(res->error.message), "%s", e->message);
    snprintf(res->error.field, sizeof(res->error.field), "%s", e->field);
}

/* The plan of a parsed graph: from the cache, or partitioned now and cached. Takes ownership of
 * rq's graph when it makes a new entry. Returns a referenced entry, or NULL with *e filled. */
static plan_entry *plan_for(graph_service *gs, graph_request *rq, proto_error *e)
{
    char *canon = graph_canonical(&rq->g);
    if (!canon) {
        snprintf(e->code, sizeof(e->code), "internal");
        e->status = 500;
        snprintf(e->message, sizeof(e->message), "out of memory");
        e->field[0] = '\0';
        return NULL;
    }
    unsigned char h[32];
    char key[65];
    crypto_generichash(h, sizeof(h), (const unsigned char *)canon, strlen(canon), NULL, 0);
    free(canon);
    sodium_bin2hex(key, sizeof(key), h, sizeof(h));
    int lru = 0;
    for (int i = 0; i < PLAN_CACHE_ENTRIES; i++) {
        plan_entry *pe = gs->cache[i];
        if (pe && strcmp(pe->key, key) == 0) {
            pe->used = ++gs->tick;
            pe->refs++;
            return pe;
        }
        if (!pe || (gs->cache[lru] && pe->used < gs->cache[lru]->used))
            lru = i;
    }
    plan_entry *pe = calloc(1, sizeof(*pe));
    if (!pe)
        goto oom;
    memcpy(pe->key, key, sizeof(key));
    if (graph_partition(&rq->g, &rq->opt.target, &pe->plan, e) < 0) {
        free(pe);
        return NULL;
    }
    int n = pe->plan.n_kernels;
    pe->unique_of = malloc(sizeof(int) * ((size_t)n + 1));
    pe->first_kernel = malloc(sizeof(int) * ((size_t)n + 1));
    if (!pe->unique_of || !pe->first_kernel) {
        graph_plan_free(&pe->plan);
        free(pe->unique_of);
        free(pe->first_kernel);
        free(pe);
        goto oom;
    }
    for (int k = 0; k < n; k++) {
        int u = 0;
        while (u < pe->n_unique &&
               strcmp(pe->plan.kernels[pe->first_kernel[u]].request, pe->plan.kernels[k].request))
            u++;
        if (u == pe->n_unique)
            pe->first_kernel[pe->n_unique++] = k;
        pe->unique_of[k] = u;
    }
    pe->graph = *rq;
    memset(&rq->g, 0, sizeof(rq->g)); /* the entry owns the graph now */
    pe->refs = 2;                       /* the cache's and the caller's */
    pe->used = ++gs->tick;
    if (gs->cache[lru]) {
        drop_rendered(gs, gs->cache[lru]);
        gs->cache[lru]->in_cache = false;
    }
    entry_unref(gs->cache[lru]);
    gs->cache[lru] = pe;
    pe->in_cache = true;
    return pe;
oom:
    e->status = 500;
    snprintf(e->code, sizeof(e->code), "internal");
    snprintf(e->message, sizeof(e->message), "out of memory");
    e->field[0] = '\0';
    return NULL;
}

/* The cached entry a request body with this digest led to last, referenced, or NULL. */
static plan_entry *entry_of_body(graph_service *gs, const unsigned char digest[32])
{
    for (int i = 0; i < PLAN_CACHE_ENTRIES; i++) {
        plan_entry *pe = gs->cache[i];
        if (pe && pe->has_body && memcmp(pe->body_digest, digest, 32) == 0) {
            pe->used = ++gs->tick;
            pe->refs++;
            return pe;
        }
    }
    return NULL;
}

static void wait_free(graph_wait *w)
{
    if (!w)
        return;
    for (int i = 0; w->u && i < w->pe->n_unique; i++) {
        free(w->u[i].body);
        cJSON_Delete(w->u[i].set);
    }
    free(w->u);
    entry_unref(w->pe);
    free(w);
}

static uint64_t workspace_of(const cJSON *set)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(set, "workspace_bytes");
    return cJSON_IsNumber(v) && v->valuedouble > 0 ? (uint64_t)v->valuedouble : 0;
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
    entry_unref(gs->answer_entry);
    gs->answer = json;
    gs->answer_entry = pe;
}

/* Keeps json, rendered from pe's sets (w's digests) for w's target and tune, as pe's rendered
 * plan, making room in RENDERED_BYTES_MAX from the least recently used entries. */
static void keep_rendered(graph_service *gs, plan_entry *pe, const graph_wait *w, const char *json, size_t len)
{
    drop_rendered(gs, pe);
    if (!pe->in_cache || len > RENDERED_BYTES_MAX)
        return;
    while (gs->rendered_bytes + len > RENDERED_BYTES_MAX) {
        plan_entry *lru = NULL;
        for (int i = 0; i < PLAN_CACHE_ENTRIES; i++) {
            plan_entry *c = gs->cache[i];
            if (c && c != pe && c->rendered && (!lru || c->used < lru->used))
                lru = c;
        }
        if (!lru)
            return;
        drop_rendered(gs, lru);
    }
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
    gs->rendered_bytes += len;
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

/* Every kernel is in: the plan, the job, or the first error. */
static void finish(graph_wait *w, graph_result *res)
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
            int ci = gk->nodes[j], si = 0;
            while (si < pe->graph.g.n_nodes && pe->graph.g.node_index[si] != ci)
                si++;
            n += (size_t)snprintf(nodes + n, sizeof(nodes) - n, "%s%s", j ? ", " : "",
                                  si < pe->graph.g.n_nodes ? pe->graph.g.nodes[si].name : "?");
        }
        snprintf(res->error.message, sizeof(res->error.message), "the kernel of nodes %.160s: %.300s",
                 nodes, w->error.message);
        kernel_field(pe, w->error_kernel, res->error.field, sizeof(res->error.field));
        return;
    }
    if (accepted) {
        new_job(gs, w, res);
        return;
    }
    if (rendered_matches(pe, w)) {
        set_answer(gs, NULL, pe);
        res->state = RESOLVE_ANSWERED;
        res->body = pe->rendered;
        res->len = pe->rendered_len;
        return;
    }
    int nk = pe->plan.n_kernels;
    uint64_t *ws = calloc((size_t)nk + 1, sizeof(uint64_t));
    const cJSON **sets = calloc((size_t)nk + 1, sizeof(*sets));
    char *json = NULL;
    int r = ws && sets ? 0 : -ENOMEM;
    /* Each distinct set parsed once (the plan copies it into every step that runs it). */
    for (int i = 0; r == 0 && i < pe->n_unique; i++) {
        unique_state *u = &w->u[i];
        u->set = cJSON_ParseWithLength(u->body, u->len);
        r = u->set ? 0 : -ENOMEM;
    }
    for (int k = 0; r == 0 && k < nk; k++) {
        sets[k] = w->u[pe->unique_of[k]].set;
        ws[k] = workspace_of(sets[k]);
    }
    /* The plan is placed again for these kernels' workspaces (a re-tuned kernel may need
     * another), on the loop thread, so no other request sees it half placed. */
    const graph_request view = {.g = pe->graph.g, .opt = w->opts};
    if (r == 0)
        r = graph_plan_place(&pe->plan, ws);
    if (r == 0)
        r = graph_plan_render(&view, &pe->plan, sets, pe->key, &json);
    free(ws);
    free(sets);
    if (r < 0) {
        res->state = RESOLVE_FAILED;
        resolve_error_from_errno(&res->error, r, "rendering the plan");
        return;
    }
    const size_t len = strlen(json);
    keep_rendered(gs, pe, w, json, len);
    set_answer(gs, json, NULL);
    res->state = RESOLVE_ANSWERED;
    res->body = json;
    res->len = len;
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

static void kernel_done(void *udata, const resolve_result *res)
{
    unique_state *u = udata;
    graph_wait *w = u->w;
    u->rw = NULL;
    take(u, res);
    w->pending--;
    if (w->in_call)
        return;
    if (w->pending > 0 && !w->failed)
        return;
    /* Done, or failed: the client hears of the failure now; the other kernels' jobs go on. */
    for (int i = 0; i < w->pe->n_unique; i++)
        if (w->u[i].rw) {
            resolve_wait_cancel(w->gs->r, w->u[i].rw);
            w->u[i].rw = NULL;
        }
    graph_result out;
    finish(w, &out);
    w->cb(w->udata, &out);
    wait_free(w);
}

void graph_resolve_body(graph_service *gs, const char *peer, const char *body, size_t len,
                        graph_cb cb, void *udata, graph_result *ret, graph_wait **ret_wait)
{
    memset(ret, 0, sizeof(*ret));
    if (ret_wait)
        *ret_wait = NULL;
    graph_request rq;
    proto_error pe;
    unsigned char digest[32];
    crypto_generichash(digest, sizeof(digest), (const unsigned char *)body, len, NULL, 0);
    plan_entry *known = entry_of_body(gs, digest);
    if (known) {
        rq = (graph_request){.opt = known->body_opts};
    } else {
        int r = graph_request_parse(body, len, &rq, &pe);
        if (r < 0) {
            fail_from_proto(ret, &pe);
            return;
        }
    }
    const proto_job_options parsed = rq.opt; /* as the body gave them, before defaults and arch
                                              * "native" */
    if (resolve_apply_defaults(gs->r, &rq.opt, &ret->error) < 0) {
        ret->state = RESOLVE_FAILED;
        graph_request_free(&rq);
        entry_unref(known);
        return;
    }
    graph_wait *w = calloc(1, sizeof(*w));
    if (!w) {
        resolve_error_from_errno(&ret->error, -ENOMEM, "starting the graph");
        ret->state = RESOLVE_FAILED;
        graph_request_free(&rq);
        entry_unref(known);
        return;
    }
    plan_entry *entry = known ? known : plan_for(gs, &rq, &pe);
    if (!entry) {
        fail_from_proto(ret, &pe);
        graph_request_free(&rq);
        free(w);
        return;
    }
    if (!known) {
        entry->has_body = true;
        memcpy(entry->body_digest, digest, sizeof(digest));
        entry->body_opts = parsed;
    }
    w->gs = gs;
    w->pe = entry;
    w->opts = rq.opt;
    graph_request_free(&rq);
    snprintf(w->peer, sizeof(w->peer), "%s", peer ? peer : "");
    w->cb = cb;
    w->udata = udata;
    w->u = calloc((size_t)entry->n_unique + 1, sizeof(unique_state));
    if (!w->u) {
        resolve_error_from_errno(&ret->error, -ENOMEM, "starting the graph");
        ret->state = RESOLVE_FAILED;
        wait_free(w);
        return;
    }
    w->in_call = true;
    for (int i = 0; i < entry->n_unique && !w->failed; i++) {
        unique_state *u = &w->u[i];
        u->w = w;
        u->index = i;
        resolve_request kr = resolve_request_of(&entry->plan.kernels[entry->first_kernel[i]].op, &w->opts, w->peer);
        resolve_result res;
        w->pending++;
        resolve_kernel(gs->r, &kr, kernel_done, u, &res, &u->rw);
        if (res.state != RESOLVE_WAITING) {
            w->pending--;
            take(u, &res);
        }
    }
    w->in_call = false;
    if (w->pending > 0 && !w->failed) {
        ret->state = RESOLVE_WAITING;
        *ret_wait = w;
        return;
    }
    if (w->pending > 0) {
        /* A kernel failed while others still resolve: answer now, let them go on (their
         * results are stored for the next request). */
        for (int i = 0; i < entry->n_unique; i++)
            if (w->u[i].rw)
                resolve_wait_cancel(gs->r, w->u[i].rw);
    }
    finish(w, ret);
    wait_free(w);
}

void graph_wait_cancel(graph_service *gs, graph_wait *w)
{
    if (!w)
        return;
    for (int i = 0; i < w->pe->n_unique; i++)
        if (w->u[i].rw)
            resolve_wait_cancel(gs->r, w->u[i].rw);
    wait_free(w);
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
