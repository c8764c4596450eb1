/* resolve/tests/test_resolve.c - the resolver's tiers in order, against a real (temporary)
 * kernel cache, a real scheduler (no GPU: jobs rank with the cost model and compile with NVRTC)
 * and a scripted remote tier: the memory tier and the request memo, local hits and the rank
 * policy, a remote hit stored locally before it is served, remote answers that must not be
 * served (another op's kernel, a weaker choice), a remote miss going on to one tuning job, the
 * publication of a tuned kernel, a caller that leaves mid-lookup, wait:false, and parse errors.
 * Suite integration: it runs NVRTC. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/request.h"
#include "resolve/resolve.h"
#include "resolve/tests/fixture.h"
#include "tests/check.h"
#include "tuner/tuner.h"

static const char softmax_body[] =
    "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[8,1000],\"dtype\":\"f16\"}],\"arch\":\"sm_90\"}";
static const char reduce_body[] =
    "{\"op\":\"reduce\",\"inputs\":[{\"shape\":[64,512],\"dtype\":\"f32\"}],"
    "\"attrs\":{\"kind\":\"sum\",\"axis\":1},\"arch\":\"sm_80\"}";

/* ---- a scripted remote tier ------------------------------------------------------------------ */

typedef struct fake_remote {
    uv_loop_t *loop;
    uv_idle_t idle;
    kc_artifact *answer; /* what the next lookup returns (handed over), NULL: a miss */
    int lookups;
    resolve_remote_done done; /* the lookup in flight */
    void *arg;
    int published;
    char published_key[KC_KEY_LEN + 1];
    int published_rank;
} fake_remote;

/* A lookup answers from the loop, never inside the call, as a network tier would. */
static void remote_idle(uv_idle_t *h)
{
    fake_remote *f = h->data;
    uv_idle_stop(h);
    resolve_remote_done done = f->done;
    f->done = NULL;
    kc_artifact *a = f->answer;
    f->answer = NULL;
    done(f->arg, a);
}

static int remote_lookup(void *self, const char *op_key, resolve_remote_done done, void *arg)
{
    fake_remote *f = self;
    (void)op_key;
    f->lookups++;
    f->done = done;
    f->arg = arg;
    uv_idle_start(&f->idle, remote_idle);
    return 0;
}

static void remote_publish(void *self, const kc_artifact *a)
{
    fake_remote *f = self;
    f->published++;
    memcpy(f->published_key, a->key, sizeof(f->published_key));
    f->published_rank = (int)a->choice;
}

/* ---- helpers --------------------------------------------------------------------------------- */

typedef struct outcome {
    int calls;
    resolve_result res;
    char body[8192];
} outcome;

static void on_result(void *udata, const resolve_result *res)
{
    outcome *o = udata;
    o->calls++;
    o->res = *res;
    snprintf(o->body, sizeof(o->body), "%.*s", (int)res->len, res->body ? res->body : "");
    o->res.body = o->body;
}

/* Runs the loop until the outcome's callback ran (or 60 s passed: a hang fails the check). */
static void wait_for(uv_loop_t *loop, outcome *o)
{
    for (int i = 0; i < 60000 && o->calls == 0; i++) {
        uv_run(loop, UV_RUN_NOWAIT);
        if (o->calls == 0)
            usleep(1000);
    }
}

/* The op key and a stored artifact for a body, as a tuning job of `rank` would store it. */
static kc_artifact *make_artifact(const char *body, int rank, const char *tag)
{
    proto_kernel_request kr;
    proto_error err;
    CHECK(proto_kernel_request_parse(body, strlen(body), &kr, &err) == 0, "parse: %s", err.message);
    kc_artifact *a = calloc(1, sizeof(*a));
    char *op_json = tuner_op_canonical_json(&kr.op);
    sched_op_key(op_json, &kr.opt.target, a->op_key);
    char sched_json[96];
    snprintf(sched_json, sizeof(sched_json), "{\"template\":\"softmax_rows\",\"params\":{\"vec\":8},\"tag\":\"%s\"}", tag);
    sched_artifact_key(a->op_key, sched_json, a->key);
    snprintf(a->op, sizeof(a->op), "%s", tuner_op_name(kr.op.kind));
    tuner_target_name(&kr.opt.target, a->target, sizeof(a->target));
    a->op_json = op_json;
    a->schedule_json = strdup(sched_json);
    kc_kernel *k = &a->launch.kernels[a->launch.n_kernels++];
    snprintf(k->name, sizeof(k->name), "hd_softmax");
    k->grid[0] = 8;
    k->grid[1] = k->grid[2] = 1;
    k->block[0] = 128;
    k->block[1] = k->block[2] = 1;
    k->args[k->n_args++] = KC_BUF_INPUT0;
    k->args[k->n_args++] = KC_BUF_OUTPUT;
    a->ptx = strdup("// PTX of a remote kernel\n");
    a->ptx_len = strlen(a->ptx);
    a->cubin = (uint8_t *)strdup("\177ELFcode");
    a->cubin_len = 8;
    a->choice = (kc_choice)rank;
    a->latency_us = rank == 2 ? 3.5 : -1;
    a->predicted_us = 2.25;
    a->provenance_json = strdup("{\"host\":\"a remote tuner\"}");
    return a;
}

int main(void)
{
    resolve_fixture fx;
    if (resolve_fixture_open(&fx, "resolve") < 0)
        return 1;
    uv_loop_t *loop = &fx.loop;
    kc_db *db = fx.db;
    sched *s = fx.s;
    resolver *r = fx.r;

    fake_remote fr = { .loop = loop };
    uv_idle_init(loop, &fr.idle);
    fr.idle.data = &fr;
    resolve_remote remote = { .self = &fr, .lookup = remote_lookup, .publish = remote_publish };
    resolve_set_remote(r, &remote);

    /* Parse errors come back with the parser's status, code and field; no tier is asked. */
    resolve_result res;
    resolve_wait *w = NULL;
    outcome o = { 0 };
    const char bad[] = "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[8,0],\"dtype\":\"f16\"}]}";
    resolve_kernel_body(r, NULL, bad, strlen(bad), on_result, &o, &res, &w);
    CHECK(res.state == RESOLVE_FAILED && res.error.status == 422 && res.origin == RESOLVE_ORIGIN_NONE &&
          strstr(res.error.field, "inputs[0]") && !w && fr.lookups == 0,
          "bad body: %d %d %s %s", res.state, res.error.status, res.error.code, res.error.field);

    /* A remote hit: served as the remote's, stored locally first. */
    kc_artifact *remote_a = make_artifact(softmax_body, 1, "remote");
    char remote_key[KC_KEY_LEN + 1];
    memcpy(remote_key, remote_a->key, sizeof(remote_key));
    fr.answer = remote_a;
    resolve_kernel_body(r, NULL, softmax_body, strlen(softmax_body), on_result, &o, &res, &w);
    CHECK(res.state == RESOLVE_WAITING && w && fr.lookups == 1 && strlen(res.op_key) == KC_KEY_LEN,
          "remote lookup started: %d", res.state);
    char op_key[KC_KEY_LEN + 1];
    memcpy(op_key, res.op_key, sizeof(op_key));
    CHECK(o.calls == 0, "no callback inside the call");
    wait_for(loop, &o);
    CHECK(o.calls == 1 && o.res.state == RESOLVE_ANSWERED && o.res.origin == RESOLVE_ORIGIN_REMOTE &&
          strstr(o.body, remote_key) && strstr(o.body, "\"cached\":true,\"origin\":\"remote\""),
          "remote hit: %d %d %s", o.res.state, o.res.origin, o.body);
    char stored[KC_KEY_LEN + 1];
    kc_choice choice = KC_CHOSEN_MEASURED;
    CHECK(kc_selection_get(db, op_key, stored, &choice) == 0 && !strcmp(stored, remote_key) &&
              choice == KC_CHOSEN_MODEL,
          "the remote kernel is stored locally");
    /* The same body again: the memo and the memory tier, no lookup. */
    resolve_kernel_body(r, NULL, softmax_body, strlen(softmax_body), on_result, &o, &res, &w);
    CHECK(res.state == RESOLVE_ANSWERED && res.origin == RESOLVE_ORIGIN_MEMORY && fr.lookups == 1 &&
          !strcmp(res.op_key, op_key), "memory hit: %d %d", res.state, res.origin);
    CHECK(res.body && memmem(res.body, res.len, "\"origin\":\"local\"", strlen("\"origin\":\"local\"")),
          "a memory hit says local");
    /* With the memory dropped: the local cache. */
    resolve_invalidate(r);
    resolve_kernel_body(r, NULL, softmax_body, strlen(softmax_body), on_result, &o, &res, &w);
    CHECK(res.state == RESOLVE_ANSWERED && res.origin == RESOLVE_ORIGIN_LOCAL && fr.lookups == 1,
          "local hit: %d %d", res.state, res.origin);
    /* tune "none" is answered by the stored model choice; "measure" without a GPU too, with a
     * warning, and that answer is not kept in memory. */
    proto_kernel_request kr;
    proto_error perr;
    CHECK(proto_kernel_request_parse(softmax_body, strlen(softmax_body), &kr, &perr) == 0, "parse");
    resolve_request rq = { .op = &kr.op, .target = kr.opt.target, .mode = TUNER_TUNE_NONE, .wait = true,
                           .priority = SCHED_PRIO_NORMAL };
    resolve_kernel(r, &rq, on_result, &o, &res, &w);
    CHECK(res.state == RESOLVE_ANSWERED && RESOLVE_ORIGIN_IS_HIT(res.origin), "none: %d", res.state);
    resolve_invalidate(r);
    rq.mode = TUNER_TUNE_MEASURE;
    resolve_kernel(r, &rq, on_result, &o, &res, &w);
    CHECK(res.state == RESOLVE_ANSWERED && res.origin == RESOLVE_ORIGIN_LOCAL &&
          strstr(res.body, "\"warning\"") && resolve_memory_count(r) == 0,
          "measure without a GPU: %d %d", res.state, res.origin);

    /* A local hit is kept in memory, and stays there while another op's job ends (below). */
    resolve_kernel_body(r, NULL, softmax_body, strlen(softmax_body), on_result, &o, &res, &w);
    CHECK(res.state == RESOLVE_ANSWERED && res.origin == RESOLVE_ORIGIN_LOCAL &&
          resolve_memory_count(r) == 1, "softmax kept in memory: %d %d", res.state, res.origin);
    char softmax_key[KC_KEY_LEN + 1];
    memcpy(softmax_key, res.op_key, sizeof(softmax_key));

    /* Remote answers that must not be served: another op's kernel, and a weaker choice than
     * asked. Both go on to one tuning job (model ranking, NVRTC), which is then published. */
    proto_kernel_request kr2;
    CHECK(proto_kernel_request_parse(reduce_body, strlen(reduce_body), &kr2, &perr) == 0, "parse: %s",
          perr.message);
    fr.answer = make_artifact(softmax_body, 2, "wrong-op");
    memset(&o, 0, sizeof(o));
    rq = (resolve_request){ .op = &kr2.op, .target = kr2.opt.target, .mode = TUNER_TUNE_MODEL, .wait = true,
                            .priority = SCHED_PRIO_NORMAL };
    resolve_kernel(r, &rq, on_result, &o, &res, &w);
    CHECK(res.state == RESOLVE_WAITING && fr.lookups == 2, "lookup for the reduce: %d", res.state);
    memcpy(op_key, res.op_key, sizeof(op_key));
    /* A second identical request once the first went on to its job: the remote offers a weaker
     * choice (the template default) than asked, so it joins the same job. */
    for (int i = 0; i < 1000 && fr.done; i++)
        uv_run(loop, UV_RUN_NOWAIT);
    CHECK(o.calls == 0, "the first request waits for its job");
    fr.answer = make_artifact(reduce_body, 0, "weak");
    outcome o2 = { 0 };
    resolve_wait *w2 = NULL;
    resolve_result res2;
    resolve_kernel(r, &rq, on_result, &o2, &res2, &w2);
    CHECK(res2.state == RESOLVE_WAITING && fr.lookups == 3, "second lookup: %d", res2.state);
    wait_for(loop, &o);
    {
        /* The reduce's job stored its kernel through the scheduler's own connection, so the
         * loop's data_version moved: the softmax's answer is checked against its selection and
         * still served from memory (it used to be dropped with every answer). */
        outcome o3 = { 0 };
        resolve_result res3;
        resolve_wait *w3 = NULL;
        usleep(60 * 1000);
        uv_update_time(loop); /* past data_version_ms */
        resolve_kernel_body(r, NULL, softmax_body, strlen(softmax_body), on_result, &o3, &res3, &w3);
        CHECK(res3.state == RESOLVE_ANSWERED && res3.origin == RESOLVE_ORIGIN_MEMORY,
              "another op's job end kept the softmax in memory: %d %d", res3.state, res3.origin);
    }
    wait_for(loop, &o2);
    CHECK(o.calls == 1 && o.res.state == RESOLVE_ANSWERED && o.res.origin == RESOLVE_ORIGIN_TUNED &&
          strstr(o.body, "\"cached\":false") && !strstr(o.body, "wrong-op"),
          "another op's kernel was served: %d %d %s %s", o.res.state, o.res.origin, o.res.error.message,
          o.body);
    CHECK(o2.calls == 1 && o2.res.state == RESOLVE_ANSWERED && !strcmp(o2.body, o.body),
          "the joined request: %d %s", o2.res.state, o2.res.error.message);
    sched_stats st;
    sched_stats_get(s, &st);
    CHECK(st.jobs_done == 1, "one job for both requests: %llu", (unsigned long long)st.jobs_done);
    CHECK(fr.published == 1 && fr.published_rank == 1 && strstr(o.body, fr.published_key),
          "the tuned kernel is published: %d", fr.published);
    CHECK(kc_selection_get(db, op_key, stored, &choice) == 0 && strstr(o.body, stored) &&
          !strstr(o2.body, "weak"), "the tuned kernel is the stored one");

    /* wait:false: a remote miss gives an accepted job through the callback. */
    const char batch[] = "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4,333],\"dtype\":\"f32\"}],"
                         "\"arch\":\"sm_80\",\"wait\":false,\"tune\":\"none\"}";
    memset(&o, 0, sizeof(o));
    resolve_kernel_body(r, NULL, batch, strlen(batch), on_result, &o, &res, &w);
    CHECK(res.state == RESOLVE_WAITING, "wait:false looks up remotely first: %d", res.state);
    wait_for(loop, &o);
    CHECK(o.calls == 1 && o.res.state == RESOLVE_ACCEPTED && o.res.job.id > 0 &&
          o.res.origin == RESOLVE_ORIGIN_TUNED, "accepted: %d %s", o.res.state, o.res.error.message);
    /* Without a remote tier the same is answered at once. */
    resolve_set_remote(r, NULL);
    const char batch2[] = "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4,334],\"dtype\":\"f32\"}],"
                          "\"arch\":\"sm_80\",\"wait\":false,\"tune\":\"none\"}";
    resolve_kernel_body(r, NULL, batch2, strlen(batch2), NULL, NULL, &res, NULL);
    CHECK(res.state == RESOLVE_ACCEPTED && res.job.id > o.res.job.id, "accepted at once: %d", res.state);

    /* A caller that leaves while the remote tier looks: no callback, and the remote's kernel is
     * still stored for the next request. */
    resolve_set_remote(r, &remote);
    const char other[] = "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[16,1000],\"dtype\":\"f16\"}],\"arch\":\"sm_90\"}";
    fr.answer = make_artifact(other, 2, "left");
    memset(&o, 0, sizeof(o));
    resolve_kernel_body(r, NULL, other, strlen(other), on_result, &o, &res, &w);
    CHECK(res.state == RESOLVE_WAITING && w, "lookup: %d", res.state);
    memcpy(op_key, res.op_key, sizeof(op_key));
    resolve_wait_cancel(r, w);
    for (int i = 0; i < 100 && fr.done; i++)
        uv_run(loop, UV_RUN_NOWAIT);
    CHECK(o.calls == 0 && !fr.done, "no callback after cancel");
    CHECK(kc_selection_get(db, op_key, stored, &choice) == 0 && choice == KC_CHOSEN_MEASURED,
          "stored after the caller left");

    /* Draining: new jobs are refused, hits are still served. */
    resolve_set_remote(r, NULL);
    resolve_drain(r);
    const char fresh[] = "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[3,77],\"dtype\":\"f32\"}],\"arch\":\"sm_80\"}";
    resolve_kernel_body(r, NULL, fresh, strlen(fresh), on_result, &o, &res, &w);
    CHECK(res.state == RESOLVE_FAILED && res.error.status == 503 && !strcmp(res.error.code, "shutting_down") &&
          res.origin == RESOLVE_ORIGIN_TUNED, "draining: %d %d", res.state, res.error.status);
    resolve_kernel_body(r, NULL, softmax_body, strlen(softmax_body), on_result, &o, &res, &w);
    CHECK(res.state == RESOLVE_ANSWERED, "hit while draining: %d", res.state);
    {
        /* Another process removes the softmax's kernel: the next hit must not come from memory. */
        kc_db *peer_db = NULL;
        char *oerr = NULL;
        size_t removed = 0;
        CHECK(kc_open(fx.dbpath, &peer_db, &oerr) == 0, "second connection: %s", oerr ? oerr : "");
        free(oerr);
        char softmax_art[KC_KEY_LEN + 1] = "";
        CHECK(kc_selection_get(peer_db, softmax_key, softmax_art, NULL) == 0 &&
                  kc_remove_key(peer_db, softmax_art, &removed) == 0 && removed == 1,
              "removed by another connection: %zu", removed);
        kc_close(peer_db);
        usleep(60 * 1000);
        uv_update_time(loop);
        resolve_kernel_body(r, NULL, softmax_body, strlen(softmax_body), on_result, &o, &res, &w);
        CHECK(res.origin != RESOLVE_ORIGIN_MEMORY && res.origin != RESOLVE_ORIGIN_LOCAL,
              "a kernel removed by another process is not served: origin %d", res.origin);
    }

    uv_close((uv_handle_t *)&fr.idle, NULL);
    resolve_fixture_close(&fx);
    return check_finish("test_resolve");
}
