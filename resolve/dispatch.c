/* resolve/dispatch.c - the answer to a request with named dimensions: a dispatch table
 * (docs/api.md, "Named dimensions").
 *
 * A dynamic op's range is cut into entries: per name, [min, 16] (in an op with several names, 1,
 * 2, ..., 8, [9, 10], ..., [15, 16]) and then four ranges per power of two ([17, 20], [21, 24],
 * ..., [29, 32], [33, 40], ...; where the table holds them, eight from 128: [129, 144], [145,
 * 160], ..., and sixteen from 2048 to 16384: [2049, 2176], ...), cut to [min, max] and to
 * multiples of multiple_of, and one entry per combination of the names' ranges. Each entry is an
 * ordinary op - the same op over its own range, tuned at that range's largest sizes - so it has
 * an op key of its own, and the cache, the scheduler's one-job-per-key, the cluster tier and
 * export/import treat it as any kernel. The generic set is the op over the whole range, at most
 * model-ranked: it is the one thing a request waits for (a compile the first time, a hit after),
 * so no range's tuning ever holds an answer. An entry is ready when a kernel chosen at least as
 * strongly as the request asks is stored for it, tuning while its job is queued or running,
 * untuned otherwise; the entries that hold the request's "sizes" or a hint get a job (wait:false)
 * when they have neither.
 *
 * Where the measurement says so the table is coarser: neighbouring entries (along a name, the
 * same ranges of every other name) that are ready with kernels chosen by measurement and run the
 * same code - the same PTX and cubin (their stored digests), schedule and launches - are
 * answered as one entry over the union of their ranges, which
 * lists the fine ranges it covers ("merged"), so the table's boundaries are where the measured
 * best kernel changes. Its kernel set is the one tuned at the union's largest sizes, its "dims"
 * widened to the union; the kernel is the one each fine entry would have run, so no size runs
 * slower than on the fine grid. Entries still tuning, untuned or ranked by the model stay fine.
 *
 * Where the measurement says one kernel does not fit a range, the table is finer: an entry whose
 * measured kernel loses more than DISPATCH_REFINE_WORST to the best candidate at some size of its
 * range (kc_launch range_worst, which its job stored) is answered as two halves, each an ordinary
 * op of its own, tuned once a size or hint lands in it and running the coarse range's kernel
 * until then ("coarse"); a half tuned itself may be cut again.
 *
 * The table is composed afresh for every request (its entries change as jobs end), from the
 * memory tier and the local cache: for a table of 77 entries (n in 1..8192) that is 77 key
 * hashes and 77 lookups (and, for the merge, a parse of each measured set and a read of its
 * code's digests), never a job or a compile.
 */
#include "resolve/resolve_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "op/sb.h"

/* Entries of one table at most; names with more ranges have neighbouring ranges merged. */
#define DISPATCH_MAX_ENTRIES 512
#define DISPATCH_MAX_RANGES 256 /* per name: 12 up to 16, four per power of two to 128, eight to 2048, sixteen
                                 * to 16384, eight up to 2^31: 240 */

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

/* How finely next_edge cuts: quarters only, eighths from 128, and sixteenths from 2048 too. */
enum { CUT_QUARTERS, CUT_EIGHTHS, CUT_SIXTEENTHS };

/* The next range's upper edge after `edge`: 16 first, then four steps per power of two (20, 24,
 * 28, 32, 40, ...): a kernel tuned for a range's largest size runs its smallest at most 1.25x
 * fewer rows than it was tuned for (above 16), where whole octaves left sizes just past a power
 * of two on a kernel tuned for twice their size (measured: 0.80x of the exact kernel at n = 700
 * and 2100 with octaves, bench/results/2026-11-29-h200-dynamic).
 *
 * From 128 a name takes eight steps per power of two (144, 160, ..., 256, 288, ...) when the
 * table of all the op's names still fits in DISPATCH_MAX_ENTRIES that way (always with one name):
 * there a range spans more rows than a GEMM tile, and one tile height cannot fit both ends of a
 * quarter octave. On the H200 the best measured kernels of [n,4096] x [4096,14336]'s quarter
 * octaves ran 1.24-1.28x the exact-size kernel at 200 (in 193..224; a 128x200 tile there) and
 * 1.07x at 2100 (in 2049..2560): the tile height that fits the top leaves much of a tile row
 * empty lower down, and the exact size's tile height does not fit the top
 * (bench/results/2026-11-30-h200-session14/b; with eighths 200 ran 0.98x, c). With several names
 * the table is their ranges' product: BERT's b in 1..32 and s in 16..512 take 16 x 29 = 464
 * entries with eighths (the model, tuner_predict_us, puts the FFN GEMMs' picks at 7 x 197 rows
 * 1.09 and 1.06x the exact size's best, from 1.13 and 1.11x with quarters), while a wider table
 * keeps quarters rather than have fit_table merge its neighbours below 128 too.
 *
 * From 2048 to 16384 a table that holds them takes sixteen steps (2176, 2304, ...; else eighths
 * there too, before quarters everywhere: compose): there an eighth spans more rows than the
 * tallest tile, and a range's kernel is tuned at its top. On the H200 the best kernels of
 * [n,4096] x [4096,4096] at 2100 are 176 rows tall (12 tile rows, 2112), and 176 takes 14 rows at
 * 2304: 2049..2304's best measured kernel (128x192, 11 rows of 2.67 waves at 2100) ran 0.91x the
 * exact-size kernel and cuBLAS at 2100, its worst ratio over the range 1.105
 * (bench/results/2026-11-30-h200-session15/c, 2026-11-30-h200-session16/d). With sixteenths
 * 2049..2176's ran 0.956x and 0.945x there (worst ratio 1.056), and the entries of 3000, 4500,
 * 6000 and 8000 rows (x4096) and of 2100, 3000 and 4500 (x14336) 0.97-1.01x
 * (2026-11-30-h200-session16/g). Beyond 16384 an eighth is a small part of the work again. */
static int64_t next_edge(int64_t edge, int cut)
{
    if (edge < 16)
        return 16;
    int64_t octave = 16;
    while (octave * 2 <= edge)
        octave *= 2;
    if (cut >= CUT_SIXTEENTHS && octave >= 2048 && octave < 16384)
        return edge + octave / 16;
    return edge + (cut >= CUT_EIGHTHS && octave >= 128 ? octave / 8 : octave / 4);
}

/* Below 16, a name of an op with several names is cut as finely, each range at most 1.25x wide:
 * 1, 2, ..., 8, then 10, 12, 14, 16. There the op's work is the product of the names' sizes (a
 * GEMM over "b*s" rows, attention over b x s query blocks), and as [min, 16] a range of the batch
 * spans up to 16x the work of the other name's range, tuned at the top: BERT at 9 x 160 and 10 x
 * 174 ran 1.24x the exact-size compile on the H200 (session 10 call D). An op with one name keeps
 * [min, 16] (16 rows are one tile of every GEMM: finer entries would only add jobs). */
static int64_t next_fine_edge(int64_t edge, int cut)
{
    if (edge >= 16)
        return next_edge(edge, cut);
    return edge < 8 ? edge + 1 : edge + 2;
}

static void ranges_of(const tuner_dim *d, bool fine, int cut, dim_ranges *out)
{
    out->n = 0;
    int64_t lo = d->min;
    for (int64_t edge = fine ? 1 : 16; lo <= d->max && out->n < DISPATCH_MAX_RANGES;
         edge = fine ? next_fine_edge(edge, cut) : next_edge(edge, cut)) {
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

/* Does the request ask for the entry over [lo, hi] per name to be tuned: its sizes, or any hint
 * of every name... A hint names one size of one name; with several names it asks for the entries
 * that hold it whatever the others' sizes are (a hint for the batch tunes each sequence range at
 * that batch only when a size or hint of the other name points there as well: the hints'
 * product). */
static bool entry_wanted(const proto_dynamic *dyn, int n_dims, const int64_t *lo, const int64_t *hi)
{
    bool holds = dyn->has_sizes;
    for (int k = 0; k < n_dims && holds; k++)
        holds = dyn->sizes[k] >= lo[k] && dyn->sizes[k] <= hi[k];
    if (holds)
        return true;
    for (int k = 0; k < n_dims; k++) {
        bool hinted = false;
        for (int h = 0; h < dyn->n_hints[k] && !hinted; h++)
            hinted = dyn->hints[k][h] >= lo[k] && dyn->hints[k][h] <= hi[k];
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

/* One entry of the table as composed: its ranges per name (a merged box: the union of the fine
 * entries it covers), what follows its "ranges" when it stands alone, and, for a ready entry whose
 * kernel was chosen by measurement, its kernel set and the signature of its code. */
typedef struct box {
    int64_t lo[TUNER_MAX_DIMS], hi[TUNER_MAX_DIMS];
    int64_t fine_lo[TUNER_MAX_DIMS], fine_hi[TUNER_MAX_DIMS]; /* its own ranges, as composed */
    long long next_fine;  /* the next fine entry a merged box covers (table order); -1 at the
                           * chain's end, and in a box that absorbed none (not merged) */
    long long last_fine;  /* the last of the chain this box heads */
    char *tail;       /* ",\"state\":...}" of a fine entry */
    char *set;        /* the ready kernel set's JSON (the box's largest corner's once merged) */
    size_t set_len;
    char *sig;        /* NULL: never merged (not ready, not measured, or running a coarser range's kernel) */
    uint64_t sig_hash;
    double workspace; /* the largest workspace_bytes of the sets it covers */
    bool dead;        /* merged into another box */
} box;

/* The table being composed: the request and the boxes so far, in the table's order. */
typedef struct table {
    resolver *r;
    const proto_kernel_request *kr;
    const resolve_request *rq;
    box *bx;
    long long n, cap;
} table;

static void boxes_free(box *bx, long long n)
{
    for (long long i = 0; bx && i < n; i++) {
        free(bx[i].tail);
        free(bx[i].set);
        free(bx[i].sig);
    }
    free(bx);
}

/* The signature of a measured kernel set's code: the stored digests of its PTX and cubin, and
 * everything of the set but what names the entry (key, op key, its range in "dims"), where the
 * answer came from, and the figures that depend on the range (workspace, latencies, prediction,
 * how well it fits its range). Two entries of one op with the same signature run the same
 * compiled code with the same schedule and launches, so either kernel is valid on both ranges.
 * The code is compared, not only the schedule: a schedule's source may depend on the range
 * (matmul_mma orders its blocks more simply where the range's largest M is one tile). NULL: not
 * measured, not in the local cache, or not a kernel set this can read (never merged). *workspace
 * and *range_worst (0 when the set has none) receive the set's. */
static char *code_signature(resolver *r, const char *json, size_t len, double *workspace, double *range_worst)
{
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root)
        return NULL;
    char *sig = NULL;
    const cJSON *ws = cJSON_GetObjectItemCaseSensitive(root, "workspace_bytes");
    const cJSON *worst = cJSON_GetObjectItemCaseSensitive(root, "range_worst");
    cJSON *kernels = cJSON_GetObjectItemCaseSensitive(root, "kernels");
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "measured")) && cJSON_IsNumber(ws) &&
        cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "dims")) &&
        cJSON_IsArray(kernels) && cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "schedule"))) {
        const cJSON *key = cJSON_GetObjectItemCaseSensitive(root, "key");
        char ptx[KC_KEY_LEN + 1], cubin[KC_KEY_LEN + 1];
        if (!cJSON_IsString(key) || kc_artifact_digests(resolve__db(r), key->valuestring, ptx, cubin) < 0 ||
            !cJSON_AddStringToObject(root, "ptx_sha256", ptx) ||
            !cJSON_AddStringToObject(root, "cubin_sha256", cubin)) {
            cJSON_Delete(root);
            return NULL;
        }
        *workspace = ws->valuedouble;
        *range_worst = cJSON_IsNumber(worst) ? worst->valuedouble : 0;
        static const char *const drop[] = {"key",       "op_key",         "cached",      "origin",
                                           "warning",   "dims",           "workspace_bytes", "latency_us",
                                           "predicted_us", "range_worst"};
        for (size_t i = 0; i < sizeof(drop) / sizeof(*drop); i++)
            cJSON_DeleteItemFromObjectCaseSensitive(root, drop[i]);
        cJSON *k;
        cJSON_ArrayForEach(k, kernels) {
            cJSON_DeleteItemFromObjectCaseSensitive(k, "ptx_url");
            cJSON_DeleteItemFromObjectCaseSensitive(k, "cubin_url");
            cJSON_DeleteItemFromObjectCaseSensitive(k, "latency_us");
        }
        sig = cJSON_PrintUnformatted(root);
    }
    cJSON_Delete(root);
    return sig;
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
    return h;
}

/* Merges, name by name (the last first), each box with its neighbour above along the name when
 * both run the same measured code and cover the same ranges of every other name. The boxes stay
 * disjoint, cover what they covered, and stay in the table's order (a box keeps its place and
 * absorbs the one above it). Ranges are cut to multiples of multiple_of, so the range above [lo,
 * hi] starts at hi + multiple_of. */
static void merge_boxes(box *bx, long long n, const tuner_op *op)
{
    for (int k = op->n_dims - 1; k >= 0; k--) {
        const int64_t step = op->dims[k].multiple_of;
        for (long long a = 0; a < n; a++) {
            if (bx[a].dead || !bx[a].sig)
                continue;
            for (bool grew = true; grew;) {
                grew = false;
                for (long long b = a + 1; b < n && !grew; b++) {
                    if (bx[b].dead || !bx[b].sig || bx[b].lo[k] != bx[a].hi[k] + step ||
                        bx[b].sig_hash != bx[a].sig_hash)
                        continue;
                    bool same = true;
                    for (int j = 0; j < op->n_dims && same; j++)
                        same = j == k || (bx[b].lo[j] == bx[a].lo[j] && bx[b].hi[j] == bx[a].hi[j]);
                    if (!same || strcmp(bx[a].sig, bx[b].sig) != 0)
                        continue;
                    /* b lies above a along k: its corner is the union's largest, its set the one
                     * tuned at the union's largest sizes. */
                    bx[a].hi[k] = bx[b].hi[k];
                    free(bx[a].set);
                    bx[a].set = bx[b].set;
                    bx[a].set_len = bx[b].set_len;
                    bx[b].set = NULL;
                    if (bx[b].workspace > bx[a].workspace)
                        bx[a].workspace = bx[b].workspace;
                    bx[bx[a].last_fine].next_fine = b;
                    bx[a].last_fine = bx[b].last_fine;
                    bx[b].dead = true;
                    grew = true;
                }
            }
        }
    }
}

/* A merged box's kernel set: its largest corner's, with "dims" widened to the box's ranges (the
 * ranges a client checks a launch's sizes against) and the largest workspace of the sets it
 * covers. NULL on OOM or a set this cannot read. */
static char *widened_set(const box *x, const tuner_op *op)
{
    cJSON *root = cJSON_ParseWithLength(x->set, x->set_len);
    cJSON *dims = root ? cJSON_GetObjectItemCaseSensitive(root, "dims") : NULL;
    char *out = NULL;
    if (!cJSON_IsObject(dims))
        goto done;
    for (int k = 0; k < op->n_dims; k++) {
        cJSON *d = cJSON_GetObjectItemCaseSensitive(dims, op->dims[k].name);
        if (!cJSON_IsObject(d) ||
            !cJSON_ReplaceItemInObjectCaseSensitive(d, "min", cJSON_CreateNumber((double)x->lo[k])) ||
            !cJSON_ReplaceItemInObjectCaseSensitive(d, "max", cJSON_CreateNumber((double)x->hi[k])))
            goto done;
    }
    if (!cJSON_ReplaceItemInObjectCaseSensitive(root, "workspace_bytes", cJSON_CreateNumber(x->workspace)))
        goto done;
    out = cJSON_PrintUnformatted(root);
done:
    cJSON_Delete(root);
    return out;
}

/* "{"n":[lo,hi],...}" of ranges lo..hi per name. */
static void put_ranges(tuner_sb *b, const tuner_op *op, const int64_t *lo, const int64_t *hi)
{
    tuner_sb_puts(b, "{");
    for (int k = 0; k < op->n_dims; k++)
        tuner_sb_printf(b, "%s\"%s\":[%lld,%lld]", k ? "," : "", op->dims[k].name, (long long)lo[k],
                        (long long)hi[k]);
    tuner_sb_puts(b, "}");
}

/* Writes the boxes as the table's "entries": a merged box lists the fine ranges it covers. */
static bool put_boxes(tuner_sb *b, const tuner_op *op, const box *bx, long long n)
{
    bool first = true;
    for (long long i = 0; i < n; i++) {
        const box *x = &bx[i];
        if (x->dead)
            continue;
        tuner_sb_puts(b, first ? "{\"ranges\":" : ",{\"ranges\":");
        first = false;
        put_ranges(b, op, x->lo, x->hi);
        if (x->next_fine < 0) { /* not merged */
            tuner_sb_puts(b, x->tail);
            continue;
        }
        char *set = widened_set(x, op);
        if (!set)
            return false;
        tuner_sb_puts(b, ",\"state\":\"ready\",\"merged\":[");
        /* every fine entry of the box, in the table's order (merging keeps it: the last name's
         * neighbours first, then whole rows of them along the names before) */
        for (long long f = i; f >= 0; f = bx[f].next_fine) {
            if (f != i)
                tuner_sb_puts(b, ",");
            put_ranges(b, op, bx[f].fine_lo, bx[f].fine_hi);
        }
        tuner_sb_puts(b, "],\"kernel_set\":");
        tuner_sb_puts(b, set);
        tuner_sb_puts(b, "}");
        free(set);
    }
    return true;
}

/* A range whose measured kernel runs some size of it more than this much slower than the best
 * candidate its job timed there (the set's "range_worst", kc_launch) is cut in two, each half
 * tuned as a range of its own once a size or hint lands in it: one kernel cannot fit both ends
 * of such a range. On the H200 [n,4096] x [4096,4096]'s 2049..2176 took a 128x184 tile whose
 * worst ratio was 1.056 in one job and 1.040 in another, and ran 2100 at 0.956x and 0.959x the
 * kernel tuned for 2100 exactly, whose 176-row tiles take 12 tile rows at 2100 and 13 at 2176
 * (bench/results/2026-11-30-h200-session16/g, 2026-11-30-h200-session17/b). Over 21 ranges of
 * that op in the two sessions, 11 picks came within 1.00-1.025 and the others at 1.04-1.14: 3%
 * parts the two, about twice the spread of one range's two jobs. */
#define DISPATCH_REFINE_WORST 1.03
/* ...when the name it is cut along spans at least this many sizes: a half of 32 rows is a tile
 * height of the smaller GEMM tiles, below which one tile row covers the range. */
#define DISPATCH_REFINE_SPAN 64

/* Where to cut a range whose kernel fits it badly: along the name whose range spans the largest
 * ratio hi / lo among those spanning DISPATCH_REFINE_SPAN sizes, at its middle (a multiple of its
 * multiple_of): [lo, *cut] and [*cut + multiple_of, hi]. false when no name qualifies. */
static bool refine_cut(const tuner_op *op, const int64_t *lo, const int64_t *hi, int *ret_k, int64_t *ret_cut)
{
    int best = -1;
    for (int k = 0; k < op->n_dims; k++) {
        const int64_t m = op->dims[k].multiple_of;
        if (hi[k] - lo[k] + 1 < DISPATCH_REFINE_SPAN || hi[k] - lo[k] < m)
            continue;
        if (best < 0 || (double)hi[k] / (double)lo[k] > (double)hi[best] / (double)lo[best])
            best = k;
    }
    if (best < 0)
        return false;
    const int64_t m = op->dims[best].multiple_of;
    int64_t cut = (lo[best] + (hi[best] - lo[best] + 1) / 2 - 1) / m * m;
    if (cut < lo[best])
        cut = lo[best];
    *ret_k = best;
    *ret_cut = cut;
    return true;
}

/* The range an entry was cut from (refine_cut) and its kernel set, which the entry runs until it
 * is tuned itself. */
typedef struct coarse {
    const int64_t *lo, *hi;
    const char *set;
}
coarse;

/* A new box at the table's end over [lo, hi]; NULL on OOM. */
static box *new_box(table *t, const int64_t *lo, const int64_t *hi)
{
    if (t->n == t->cap) {
        const long long cap = t->cap ? 2 * t->cap : 64;
        box *bx = realloc(t->bx, (size_t)cap * sizeof(*bx));
        if (!bx)
            return NULL;
        t->bx = bx;
        t->cap = cap;
    }
    box *x = &t->bx[t->n];
    memset(x, 0, sizeof(*x));
    const int n_dims = t->kr->op.n_dims;
    memcpy(x->lo, lo, sizeof(*lo) * (size_t)n_dims);
    memcpy(x->hi, hi, sizeof(*hi) * (size_t)n_dims);
    memcpy(x->fine_lo, lo, sizeof(*lo) * (size_t)n_dims);
    memcpy(x->fine_hi, hi, sizeof(*hi) * (size_t)n_dims);
    x->next_fine = -1;
    x->last_fine = t->n;
    t->n++;
    return x;
}

/* Adds the entry over [lo, hi] per name to the table: its kernel set when one is stored (cut in
 * two, recursively, where it fits its range badly), else its job (started here when the request
 * wants it) or, for an entry cut from a coarser range (`from`), that range's kernel. false on OOM. */
static bool add_entry(table *t, const int64_t *lo, const int64_t *hi, const coarse *from)
{
    const tuner_op *op = &t->kr->op;
    tuner_op eop;
    if (tuner_op_restrict(op, lo, hi, &eop) < 0) {
        /* cannot happen: the ranges are cut from the op's */
        box *x = new_box(t, lo, hi);
        return x && (x->tail = strdup(",\"state\":\"untuned\"}")) != NULL;
    }
    char *ejson = tuner_op_canonical_json(&eop);
    if (!ejson)
        return false;
    char ekey[KC_KEY_LEN + 1];
    sched_op_key(ejson, &t->rq->target, ekey);
    free(ejson);
    resolve_request erq = *t->rq;
    erq.op = &eop;
    erq.wait = false;
    /* "retune" applies to the entries the request points at (its sizes, its hints) */
    const bool wanted = entry_wanted(&t->kr->dyn, op->n_dims, lo, hi);
    erq.retune = t->rq->retune && wanted;
    resolve_result er;
    memset(&er, 0, sizeof(er));
    const char *ready = NULL;
    size_t ready_len = 0;
    uint64_t job = 0;
    char job_error[sizeof(er.error.code)] = ""; /* why a wanted entry got no job */
    if (!erq.retune && resolve__lookup(t->r, &erq, ekey, &er) && er.state == RESOLVE_ANSWERED) {
        ready = er.body;
        ready_len = er.len;
    } else {
        job = sched_job_active(resolve__sched(t->r), ekey);
        if ((!job || erq.retune) && wanted) {
            /* Its first size (or a hint) is here: tune it as an ordinary job, without waiting. */
            resolve_result jr;
            resolve_kernel(t->r, &erq, NULL, NULL, &jr, NULL);
            if (jr.state == RESOLVE_ACCEPTED) {
                job = jr.job.id;
            } else if (jr.state == RESOLVE_ANSWERED) {
                /* the remote tier had it, or it just became a hit */
                ready = jr.body;
                ready_len = jr.len;
            } else if (jr.state == RESOLVE_FAILED) {
                /* A full queue or a quota: the generic set (or the coarse kernel) answers; the
                 * next request asks again. */
                snprintf(job_error, sizeof(job_error), "%s", jr.error.code);
            }
        }
    }

    tuner_sb tail;
    tuner_sb_init(&tail);
    if (ready) {
        /* The body lives in the resolver's scratch, which the next lookup replaces. */
        while (ready_len && (ready[ready_len - 1] == '\n' || ready[ready_len - 1] == ' '))
            ready_len--;
        char *set = strndup(ready, ready_len);
        if (!set)
            return false;
        double workspace = 0, worst = 0;
        char *sig = code_signature(t->r, set, ready_len, &workspace, &worst);
        int k;
        int64_t cut;
        if (sig && worst > DISPATCH_REFINE_WORST && refine_cut(op, lo, hi, &k, &cut)) {
            /* Two halves, each running this kernel until it has its own. */
            int64_t half_lo[TUNER_MAX_DIMS], half_hi[TUNER_MAX_DIMS];
            memcpy(half_lo, lo, sizeof(half_lo));
            memcpy(half_hi, hi, sizeof(half_hi));
            const coarse self = {lo, hi, set};
            half_hi[k] = cut;
            bool ok = add_entry(t, half_lo, half_hi, &self);
            half_lo[k] = cut + op->dims[k].multiple_of;
            half_hi[k] = hi[k];
            ok = ok && add_entry(t, half_lo, half_hi, &self);
            free(sig);
            free(set);
            return ok;
        }
        box *x = new_box(t, lo, hi);
        if (!x) {
            free(sig);
            free(set);
            return false;
        }
        x->set = set;
        x->set_len = ready_len;
        x->sig = sig;
        x->sig_hash = sig ? fnv1a(sig) : 0;
        x->workspace = workspace;
        tuner_sb_puts(&tail, ",\"state\":\"ready\",\"kernel_set\":");
        put_raw(&tail, set, ready_len);
        tuner_sb_puts(&tail, "}");
    } else {
        box *x = new_box(t, lo, hi);
        if (!x)
            return false;
        if (from) {
            /* Ready with the kernel of the range it was cut from; never merged (its code is
             * that range's, not one measured here). */
            tuner_sb_puts(&tail, ",\"state\":\"ready\",\"coarse\":");
            put_ranges(&tail, op, from->lo, from->hi);
        } else {
            tuner_sb_puts(&tail, job ? ",\"state\":\"tuning\"" : ",\"state\":\"untuned\"");
        }
        if (job)
            tuner_sb_printf(&tail, ",\"job\":\"/v1/jobs/%llu\"", (unsigned long long)job);
        else if (job_error[0])
            tuner_sb_printf(&tail, ",\"error\":{\"code\":\"%s\"}", job_error);
        if (from) {
            tuner_sb_puts(&tail, ",\"kernel_set\":");
            tuner_sb_puts(&tail, from->set);
        }
        tuner_sb_puts(&tail, "}");
    }
    box *x = &t->bx[t->n - 1];
    x->tail = tuner_sb_take(&tail);
    return x->tail != NULL;
}

/* Composes the table into a string (malloc'd; NULL on OOM) around the generic set's JSON. */
static char *compose(resolver *r, const proto_kernel_request *kr, const resolve_request *rq, const char *generic,
                     size_t generic_len, const char *generic_key)
{
    const tuner_op *op = &kr->op;
    dim_ranges dr[TUNER_MAX_DIMS];
    /* The finest cut whose table holds (next_edge); quarters, else fit_table merges. */
    for (int cut = CUT_SIXTEENTHS; cut >= CUT_QUARTERS; cut--) {
        long long total = 1;
        for (int k = 0; k < op->n_dims; k++) {
            ranges_of(&op->dims[k], op->n_dims > 1, cut, &dr[k]);
            total *= dr[k].n;
        }
        if (total <= DISPATCH_MAX_ENTRIES)
            break;
    }
    fit_table(dr, op->n_dims);
    long long total = 1;
    for (int k = 0; k < op->n_dims; k++)
        total *= dr[k].n;

    /* One entry per combination of the names' ranges (the last name fastest), each perhaps cut
     * further where its kernel fits it badly. */
    table t = {.r = r, .kr = kr, .rq = rq};
    for (long long idx = 0; idx < total; idx++) {
        int64_t lo[TUNER_MAX_DIMS], hi[TUNER_MAX_DIMS];
        long long rest = idx;
        for (int k = op->n_dims - 1; k >= 0; k--) {
            const int i = (int)(rest % dr[k].n);
            rest /= dr[k].n;
            lo[k] = dr[k].lo[i];
            hi[k] = dr[k].hi[i];
        }
        if (!add_entry(&t, lo, hi, NULL))
            goto oom;
    }
    merge_boxes(t.bx, t.n, op);

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
    if (!put_boxes(&b, op, t.bx, t.n)) {
        tuner_sb_free(&b);
        goto oom;
    }
    tuner_sb_puts(&b, "]}}");
    boxes_free(t.bx, t.n);
    return tuner_sb_take(&b);
oom:
    boxes_free(t.bx, t.n);
    return NULL;
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
