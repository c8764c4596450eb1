/* resolve/dispatch.c - the answer to a request with named dimensions: a dispatch table
 * (docs/api.md, "Named dimensions").
 *
 * A dynamic op's range is cut into entries: per name, [min, 16] and then four ranges per power
 * of two ([17, 20], [21, 24], ..., [29, 32], [33, 40], ... cut to [min, max] and to multiples of
 * multiple_of), and one entry per combination of the names' ranges. Each entry is an ordinary op - the same op over its own
 * range, tuned at that range's largest sizes - so it has an op key of its own, and the cache,
 * the scheduler's one-job-per-key, the cluster tier and export/import treat it as any kernel.
 * The generic set is the op over the whole range, at most model-ranked: it is the one thing a
 * request waits for (a compile the first time, a hit after), so no range's tuning ever holds an
 * answer. An entry is ready when a kernel chosen at least as strongly as the request asks is
 * stored for it, tuning while its job is queued or running, untuned otherwise; the entries that
 * hold the request's "sizes" or a hint get a job (wait:false) when they have neither.
 *
 * The table is composed afresh for every request (its entries change as jobs end), from the
 * memory tier and the local cache: for a table of 37 entries (n in 1..8192) that is 37 key
 * hashes and 37 lookups, never a job or a compile.
 */
#include "resolve/resolve_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op/sb.h"

/* Entries of one table at most; names with more ranges have neighbouring ranges merged. */
#define DISPATCH_MAX_ENTRIES 256
#define DISPATCH_MAX_RANGES 128 /* per name: four per power of two up to 2^31 */

typedef struct dim_ranges {
    int n;
    int64_t lo[DISPATCH_MAX_RANGES], hi[DISPATCH_MAX_RANGES];
} dim_ranges;

/* A request waiting for its generic set: what composing the table needs afterwards. */
typedef struct dispatch_wait {
    resolver *r;
    resolve_cb cb;
    void *udata;
    proto_kernel_request kr;
    resolve_request rq;
} dispatch_wait;

/* The multiples of m in [lo, hi] as [*a, *b]; false when there is none. */
static bool aligned(int64_t lo, int64_t hi, int64_t m, int64_t *a, int64_t *b)
{
    *a = (lo + m - 1) / m * m;
    *b = hi / m * m;
    return *a <= *b;
}

/* The next range's upper edge after `edge`: 16 first, then four steps per power of two (20, 24,
 * 28, 32, 40, ...): a kernel tuned for a range's largest size runs its smallest at most 1.25x
 * fewer rows than it was tuned for (above 16), where whole octaves left sizes just past a power
 * of two on a kernel tuned for twice their size (measured: 0.80x of the exact kernel at n = 700
 * and 2100 with octaves, bench/results/2026-11-29-h200-dynamic). */
static int64_t next_edge(int64_t edge)
{
    if (edge < 16)
        return 16;
    int64_t octave = 16;
    while (octave * 2 <= edge)
        octave *= 2;
    return edge + octave / 4;
}

static void ranges_of(const tuner_dim *d, dim_ranges *out)
{
    out->n = 0;
    int64_t lo = d->min;
    for (int64_t edge = 16; lo <= d->max && out->n < DISPATCH_MAX_RANGES; edge = next_edge(edge)) {
        const int64_t hi = edge < d->max ? edge : d->max;
        int64_t a, b;
        if (hi >= lo && aligned(lo, hi, d->multiple_of, &a, &b)) {
            out->lo[out->n] = a;
            out->hi[out->n] = b;
            out->n++;
        }
        if (hi >= lo)
            lo = hi + 1;
    }
}

/* Merges neighbouring ranges of the name with the most until the table fits. */
static void fit_table(dim_ranges *dr, int n_dims)
{
    for (;;) {
        long long total = 1;
        int widest = 0;
        for (int k = 0; k < n_dims; k++) {
            total *= dr[k].n;
            if (dr[k].n > dr[widest].n)
                widest = k;
        }
        if (total <= DISPATCH_MAX_ENTRIES || dr[widest].n <= 1)
            return;
        dim_ranges *d = &dr[widest];
        int n = 0;
        for (int i = 0; i < d->n; i += 2, n++) {
            d->lo[n] = d->lo[i];
            d->hi[n] = i + 1 < d->n ? d->hi[i + 1] : d->hi[i];
        }
        d->n = n;
    }
}

/* Index of the range holding v, or -1. */
static int range_of(const dim_ranges *d, int64_t v)
{
    for (int i = 0; i < d->n; i++)
        if (v >= d->lo[i] && v <= d->hi[i])
            return i;
    return -1;
}

/* true when entry `idx` (mixed radix over the names' ranges) holds the sizes. */
static bool entry_holds(const dim_ranges *dr, int n_dims, long long idx, const int64_t *sizes)
{
    for (int k = n_dims - 1; k >= 0; k--) {
        const int i = (int)(idx % dr[k].n);
        idx /= dr[k].n;
        if (sizes[k] < dr[k].lo[i] || sizes[k] > dr[k].hi[i])
            return false;
    }
    return true;
}

/* Does the request ask for this entry to be tuned: its sizes, or any hint of every name... A
 * hint names one size of one name; with several names it asks for the entries that hold it
 * whatever the others' sizes are (a hint for the batch tunes each sequence range at that batch
 * only when a size or hint of the other name points there as well: the hints' product). */
static bool entry_wanted(const proto_dynamic *dyn, const dim_ranges *dr, int n_dims, long long idx)
{
    if (dyn->has_sizes && entry_holds(dr, n_dims, idx, dyn->sizes))
        return true;
    long long rest = idx;
    for (int k = n_dims - 1; k >= 0; k--) {
        const int i = (int)(rest % dr[k].n);
        rest /= dr[k].n;
        bool hinted = false;
        for (int h = 0; h < dyn->n_hints[k] && !hinted; h++)
            hinted = range_of(&dr[k], dyn->hints[k][h]) == i;
        if (!hinted)
            return false;
    }
    return true;
}

/* "["n",4096]": a shape with its named axes by name. */
static void put_shape(tuner_sb *b, const tuner_op *op, const tuner_tensor *t)
{
    tuner_sb_puts(b, "[");
    for (int i = 0; i < t->rank; i++) {
        char name[TUNER_MAX_DIMS * TUNER_DIM_NAME_LEN];
        if (t->sym[i])
            tuner_sb_printf(b, "%s\"%s\"", i ? "," : "", tuner_sym_text(op, t->sym[i], name, sizeof(name)));
        else
            tuner_sb_printf(b, "%s%lld", i ? "," : "", (long long)t->shape[i]);
    }
    tuner_sb_puts(b, "]");
}

/* A kernel set's JSON as the member of the table: answers are objects the resolver built, so
 * this is a byte splice, never a re-parse. */
static void put_raw(tuner_sb *b, const char *json, size_t len)
{
    while (len && (json[len - 1] == '\n' || json[len - 1] == ' '))
        len--;
    tuner_sb_printf(b, "%.*s", (int)len, json);
}

/* Composes the table into a string (malloc'd; NULL on OOM) around the generic set's JSON. */
static char *compose(resolver *r, const proto_kernel_request *kr, const resolve_request *rq, const char *generic,
                     size_t generic_len, const char *generic_key)
{
    const tuner_op *op = &kr->op;
    dim_ranges dr[TUNER_MAX_DIMS];
    long long total = 1;
    for (int k = 0; k < op->n_dims; k++)
        ranges_of(&op->dims[k], &dr[k]);
    fit_table(dr, op->n_dims);
    for (int k = 0; k < op->n_dims; k++)
        total *= dr[k].n;

    char arch[16];
    tuner_target_name(&rq->target, arch, sizeof(arch));
    tuner_sb b;
    tuner_sb_init(&b);
    tuner_sb_printf(&b, "{\"op\":\"%s\",\"arch\":\"%s\",\"op_key\":\"%s\",\"tune\":\"%s\",\"dims\":{",
                    tuner_op_name(op->kind), arch, generic_key, tuner_tune_name(rq->mode));
    for (int k = 0; k < op->n_dims; k++)
        tuner_sb_printf(&b, "%s\"%s\":{\"min\":%lld,\"max\":%lld,\"multiple_of\":%lld}", k ? "," : "",
                        op->dims[k].name, (long long)op->dims[k].min, (long long)op->dims[k].max,
                        (long long)op->dims[k].multiple_of);
    tuner_sb_puts(&b, "},\"output\":{\"shape\":");
    put_shape(&b, op, &op->output);
    tuner_sb_printf(&b, ",\"dtype\":\"%s\"},\"dispatch\":{\"generic\":", tuner_dtype_name(op->output.dtype));
    put_raw(&b, generic, generic_len);
    tuner_sb_puts(&b, ",\"entries\":[");

    for (long long idx = 0; idx < total; idx++) {
        int64_t lo[TUNER_MAX_DIMS], hi[TUNER_MAX_DIMS];
        long long rest = idx;
        for (int k = op->n_dims - 1; k >= 0; k--) {
            const int i = (int)(rest % dr[k].n);
            rest /= dr[k].n;
            lo[k] = dr[k].lo[i];
            hi[k] = dr[k].hi[i];
        }
        tuner_op eop;
        if (tuner_op_restrict(op, lo, hi, &eop) < 0)
            continue; /* cannot happen: the ranges are cut from the op's */
        tuner_sb_printf(&b, "%s{\"ranges\":{", idx ? "," : "");
        for (int k = 0; k < op->n_dims; k++)
            tuner_sb_printf(&b, "%s\"%s\":[%lld,%lld]", k ? "," : "", op->dims[k].name, (long long)lo[k],
                            (long long)hi[k]);
        tuner_sb_puts(&b, "}");

        char *ejson = tuner_op_canonical_json(&eop);
        if (!ejson) {
            tuner_sb_free(&b);
            return NULL;
        }
        char ekey[KC_KEY_LEN + 1];
        sched_op_key(ejson, &rq->target, ekey);
        free(ejson);
        resolve_request erq = *rq;
        erq.op = &eop;
        erq.wait = false;
        /* "retune" applies to the entries the request points at (its sizes, its hints) */
        const bool wanted = entry_wanted(&kr->dyn, dr, op->n_dims, idx);
        erq.retune = rq->retune && wanted;
        resolve_result er;
        memset(&er, 0, sizeof(er));
        if (!erq.retune && resolve__lookup(r, &erq, ekey, &er) && er.state == RESOLVE_ANSWERED) {
            tuner_sb_puts(&b, ",\"state\":\"ready\",\"kernel_set\":");
            put_raw(&b, er.body, er.len);
            tuner_sb_puts(&b, "}");
            continue;
        }
        uint64_t job = sched_job_active(resolve__sched(r), ekey);
        if ((!job || erq.retune) && wanted) {
            /* Its first size (or a hint) is here: tune it as an ordinary job, without waiting. */
            resolve_result jr;
            resolve_kernel(r, &erq, NULL, NULL, &jr, NULL);
            if (jr.state == RESOLVE_ACCEPTED) {
                job = jr.job.id;
            } else if (jr.state == RESOLVE_ANSWERED) {
                /* the remote tier had it, or it just became a hit */
                tuner_sb_puts(&b, ",\"state\":\"ready\",\"kernel_set\":");
                put_raw(&b, jr.body, jr.len);
                tuner_sb_puts(&b, "}");
                continue;
            } else if (jr.state == RESOLVE_FAILED) {
                /* A full queue or a quota: the generic set answers; the next request asks again. */
                tuner_sb_printf(&b, ",\"state\":\"untuned\",\"error\":{\"code\":\"%s\"}}", jr.error.code);
                continue;
            }
        }
        if (job)
            tuner_sb_printf(&b, ",\"state\":\"tuning\",\"job\":\"/v1/jobs/%llu\"}", (unsigned long long)job);
        else
            tuner_sb_puts(&b, ",\"state\":\"untuned\"}");
    }
    tuner_sb_puts(&b, "]}}");
    return tuner_sb_take(&b);
}

/* The generic set's request: the whole range, at most model-ranked (never waiting for a GPU).
 * With "wait": false a generic set not yet stored answers 202 with its job, as a kernel does. */
static resolve_request generic_request(const resolve_request *rq)
{
    resolve_request g = *rq;
    if (g.mode > TUNER_TUNE_MODEL)
        g.mode = TUNER_TUNE_MODEL;
    g.retune = false;
    return g;
}

/* Turns the generic set's outcome into the table's, in res (the resolver owns the body). */
static void finish(resolver *r, const proto_kernel_request *kr, const resolve_request *rq, resolve_result *res)
{
    if (res->state != RESOLVE_ANSWERED)
        return; /* FAILED passes through as is */
    /* The generic answer lives in the resolver's scratch, which the entries' lookups replace. */
    char *generic = malloc(res->len + 1);
    if (!generic) {
        resolve__fail(res, 500, "internal", "out of memory", NULL);
        return;
    }
    memcpy(generic, res->body, res->len);
    generic[res->len] = '\0';
    const size_t glen = res->len;
    const resolve_origin origin = res->origin;
    char key[KC_KEY_LEN + 1];
    memcpy(key, res->op_key, sizeof(key));
    char *table = compose(r, kr, rq, generic, glen, key);
    free(generic);
    if (!table) {
        resolve__fail(res, 500, "internal", "out of memory", NULL);
        return;
    }
    resolve__answer_owned(r, res, table, origin);
    memcpy(res->op_key, key, sizeof(key));
}

static void generic_done(void *udata, const resolve_result *res)
{
    dispatch_wait *dw = udata;
    resolve_result out = *res;
    finish(dw->r, &dw->kr, &dw->rq, &out);
    resolve_cb cb = dw->cb;
    void *cb_udata = dw->udata;
    free(dw);
    cb(cb_udata, &out);
}

void resolve__dispatch(resolver *r, const proto_kernel_request *kr, const resolve_request *rq, resolve_cb cb,
                       void *udata, resolve_result *ret, resolve_wait **ret_wait)
{
    resolve_request g = generic_request(rq);
    g.op = &kr->op;
    dispatch_wait *dw = NULL;
    if (cb) {
        dw = calloc(1, sizeof(*dw));
        if (!dw) {
            memset(ret, 0, sizeof(*ret));
            resolve__fail(ret, 500, "internal", "out of memory", NULL);
            return;
        }
        dw->r = r;
        dw->cb = cb;
        dw->udata = udata;
        dw->kr = *kr;
        dw->rq = *rq;
        dw->rq.op = &dw->kr.op;
    }
    resolve_wait *w = NULL;
    resolve_kernel(r, &g, dw ? generic_done : NULL, dw, ret, dw ? &w : NULL);
    if (ret->state == RESOLVE_WAITING) {
        resolve__wait_set_cleanup(w, free);
        if (ret_wait)
            *ret_wait = w;
        return;
    }
    free(dw);
    finish(r, kr, rq, ret); /* ACCEPTED and FAILED pass through */
}

void resolve_kernel_request(resolver *r, const proto_kernel_request *kr, const resolve_request *rq, resolve_cb cb,
                            void *udata, resolve_result *ret, resolve_wait **ret_wait)
{
    if (tuner_op_is_dynamic(&kr->op)) {
        resolve__dispatch(r, kr, rq, cb, udata, ret, ret_wait);
        return;
    }
    resolve_kernel(r, rq, cb, udata, ret, ret_wait);
}
