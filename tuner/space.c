/* tuner/space.c - schedule spaces: building them from the registries, dispatching generation and
 * prediction to the named template, ranking, the tune:"none" default, JSON, references. */
#include "tuner/space.h"

#include <errno.h>
#include <malloc.h> /* malloc_usable_size */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tuner/attn/attn.h" /* tuner__attn_reference */

uint64_t tuner__fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t fnv_str(uint64_t h, const char *s)
{
    /* The NUL is hashed too, so that "ab","c" and "a","bc" differ. */
    return tuner__fnv1a(h, s, strlen(s) + 1);
}

static uint64_t fnv_int(uint64_t h, long long v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%lld", v);
    return fnv_str(h, buf);
}

void tuner__schedule_params(tuner_schedule *s, int n, const char *const *param_names, const int *values)
{
    s->n_params = n;
    for (int i = 0; i < n; i++) {
        s->params[i].name = param_names[i];
        s->params[i].value = values[i];
    }
}

int tuner__space_push(tuner_schedule **items, size_t *n, const char *name, int n_params,
                      const char *const *param_names, const int *values)
{
    if (n_params > TUNER_MAX_PARAMS)
        return -EINVAL;
    /* The array grows by half at a time, not by one element: a realloc per push copies the
     * space so far every time, and under AddressSanitizer (every block over 128 KiB its own
     * mapping) the sanitizer build's tuner_core_conv_grouped spent 10 s of system time in 30,000
     * mmap/munmap pairs doing it. The block's room comes from malloc_usable_size, so appenders
     * that grow the same array by exact sizes (tuner__gemm_push, the attention templates') can
     * come before or after this one. */
    tuner_schedule *p = *items;
    if (!p || malloc_usable_size(p) < (*n + 1) * sizeof(**items)) {
        p = realloc(*items, (*n + *n / 2 + 16) * sizeof(**items));
        if (!p)
            return -ENOMEM;
        *items = p;
    }
    tuner_schedule *s = &p[*n];
    memset(s, 0, sizeof(*s));
    s->template_name = name;
    tuner__schedule_params(s, n_params, param_names, values);
    (*n)++;
    return 0;
}

int tuner_schedule_param(const tuner_schedule *s, const char *name, int dflt)
{
    if (!s || !name)
        return dflt;
    for (int i = 0; i < s->n_params && i < TUNER_MAX_PARAMS; i++)
        if (s->params[i].name && strcmp(s->params[i].name, name) == 0)
            return s->params[i].value;
    return dflt;
}

bool tuner_schedule_matches(const tuner_schedule *s, const char *spec)
{
    for (const char *q = spec; q && *q;) {
        const char *eq = strchr(q, '='), *end = strchr(q, ',');
        if (!end)
            end = q + strlen(q);
        char name[64];
        if (!eq || eq > end || (size_t)(eq - q) >= sizeof(name))
            return false;
        memcpy(name, q, (size_t)(eq - q));
        name[eq - q] = '\0';
        const long want = strtol(eq + 1, NULL, 10);
        if (tuner_schedule_param(s, name, -1) != want)
            return false;
        q = *end ? end + 1 : end;
    }
    return true;
}

/* Concatenation of three strings (malloc'd; NULL on OOM): error messages. */
static char *msg(const char *a, const char *b, const char *c)
{
    size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
    char *m = malloc(la + lb + lc + 1);
    if (m) {
        memcpy(m, a, la);
        memcpy(m + la, b, lb);
        memcpy(m + la + lb, c, lc + 1);
    }
    return m;
}

void tuner_space_free(tuner_space *s)
{
    if (!s)
        return;
    free(s->items);
    free(s);
}

int tuner_space_build(const tuner_op *op, const tuner_target *t, tuner_space **ret, char **ret_err)
{
    if (!op || !t || !ret)
        return -EINVAL;
    char tname[16];
    tuner_target_name(t, tname, sizeof(tname));
    if (!tuner__arch(t)) {
        if (ret_err)
            *ret_err = msg("unsupported target ", tname, "");
        return -EINVAL;
    }

    char fp8_why[320];
    if (tuner_fp8_unsupported(op, t, fp8_why, sizeof(fp8_why))) {
        if (ret_err)
            *ret_err = msg(fp8_why, "", "");
        return -EINVAL;
    }

    int r = -ENOMEM;
    tuner_space *sp = calloc(1, sizeof(*sp));
    if (!sp)
        goto fail;

    /* The hash names everything that decides the space: op kind, dtype and alignment classes,
     * the target, each applicable template's signature, and (to be safe against validity rules
     * that depend on sizes) the resulting candidate list itself. */
    uint64_t h = TUNER_FNV_OFFSET;
    h = fnv_str(h, "hidetd-space-v1");
    h = fnv_str(h, tuner_op_name(op->kind));
    for (int i = 0; i < op->n_inputs && i < TUNER_MAX_INPUTS; i++) {
        h = fnv_str(h, tuner_dtype_name(op->inputs[i].dtype));
        h = fnv_int(h, op->inputs[i].align >= 16 ? 16 : op->inputs[i].align);
    }
    h = fnv_str(h, tuner_dtype_name(op->output.dtype));
    h = fnv_str(h, tname);

    for (int reg = 0; tuner__registries[reg]; reg++) {
        for (int i = 0; tuner__registries[reg][i]; i++) {
            const tuner_template *tp = tuner__registries[reg][i];
            if (!tp->applies || !tp->applies(op, t) || (tuner_op_is_dynamic(op) && !tp->dynamic_dims))
                continue;
            h = fnv_str(h, tp->name);
            h = fnv_str(h, tp->space_signature ? tp->space_signature : "");
            size_t before = sp->n;
            r = tp->enumerate(op, t, &sp->items, &sp->n);
            if (r < 0)
                goto fail;
            h = fnv_int(h, (long long)(sp->n - before));
        }
    }
    for (size_t i = 0; i < sp->n; i++) {
        const tuner_schedule *s = &sp->items[i];
        h = fnv_str(h, s->template_name);
        for (int p = 0; p < s->n_params; p++) {
            h = fnv_str(h, s->params[p].name);
            h = fnv_int(h, s->params[p].value);
        }
    }
    if (sp->n == 0) {
        r = -EINVAL;
        if (ret_err)
            *ret_err = msg(tuner_op_name(op->kind),
                           tuner_op_is_dynamic(op) ? " with named dimensions: no schedule template supports it on "
                                                   : ": no schedule template supports it on ",
                           tname);
        goto fail;
    }
    snprintf(sp->hash, sizeof(sp->hash), "%016llx", (unsigned long long)h);
    *ret = sp;
    return 0;
fail:
    tuner_space_free(sp);
    return r;
}

void tuner_program_free(tuner_program *p)
{
    if (!p)
        return;
    free(p->source);
    free(p);
}


int tuner_generate(const tuner_op *op, const tuner_target *t, const tuner_schedule *s, tuner_program **ret,
                   char **ret_err)
{
    if (!op || !t || !s || !ret)
        return -EINVAL;
    const tuner_template *tp = tuner__template_find(s->template_name);
    if (!tp || !tuner__arch(t)) {
        if (ret_err)
            *ret_err = msg("unknown template ", s->template_name ? s->template_name : "(null)", " or unsupported target");
        return -EINVAL;
    }
    if (!tp->applies(op, t) || (tuner_op_is_dynamic(op) && !tp->dynamic_dims)) {
        if (ret_err)
            *ret_err = msg(tp->name, " does not apply to this ", tuner_op_name(op->kind));
        return -EINVAL;
    }
    tuner_program *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->output_dtype = op->output.dtype;
    char *err = NULL;
    int r = tp->generate(op, t, s, p, &err);
    if (r == 0 && !p->source)
        r = -ENOMEM;
    if (r < 0) {
        tuner_program_free(p);
        if (ret_err)
            *ret_err = err ? err : msg("generation failed for ", tp->name, "");
        else
            free(err);
        return r;
    }
    free(err);
    *ret = p;
    return 0;
}

int tuner_reference(const tuner_op *op, const tuner_target *t, tuner_program **ret, char **ret_err)
{
    if (!op || !t || !ret)
        return -EINVAL;
    if (!tuner__arch(t)) {
        if (ret_err)
            *ret_err = msg("unsupported target", "", "");
        return -EINVAL;
    }
    /* A dynamic op is verified at its tuning sizes (the dims' max, the sizes its shapes hold):
     * its reference is the static op it is there. */
    tuner_op bound;
    if (tuner_op_is_dynamic(op)) {
        int64_t sizes[TUNER_MAX_DIMS];
        for (int k = 0; k < op->n_dims; k++)
            sizes[k] = op->dims[k].max;
        if (tuner_op_bind(op, sizes, &bound) < 0) {
            if (ret_err)
                *ret_err = msg("the op's named dimensions are out of range", "", "");
            return -EINVAL;
        }
        op = &bound;
    }
    tuner_program *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->output_dtype = TUNER_F32;
    char *err = NULL;
    int r;
    if (op->kind == TUNER_OP_MATMUL || op->kind == TUNER_OP_CONV2D)
        r = tuner__gemm_reference(op, t, p, &err);
    else if (op->kind == TUNER_OP_ATTENTION)
        r = tuner__attn_reference(op, t, p, &err);
    else
        r = tuner__core_reference(op, t, p, &err);
    if (r == 0 && !p->source)
        r = -ENOMEM;
    if (r < 0) {
        tuner_program_free(p);
        if (ret_err)
            *ret_err = err ? err : msg("reference generation failed for ", tuner_op_name(op->kind), "");
        else
            free(err);
        return r;
    }
    free(err);
    /* The reference's output buffer is always F32, whatever a template wrote. */
    p->output_dtype = TUNER_F32;
    *ret = p;
    return 0;
}

double tuner_predict_us(const tuner_op *op, const tuner_target *t, const tuner_schedule *s)
{
    const tuner_template *tp = s ? tuner__template_find(s->template_name) : NULL;
    if (!op || !t || !tp || !tp->predict_us || !tuner__arch(t))
        return 1e12;
    double us = tp->predict_us(op, t, s);
    if (!(us >= 0.0)) /* NaN or negative: rank it last rather than first */
        return 1e12;
    return us;
}

typedef struct rank_item {
    size_t index;
    double score; /* what the rank follows: us, or for a dynamic op the worst ratio to the best */
    double us;    /* at the op's tuning sizes (the dims' max) */
} rank_item;

static int rank_cmp(const void *a, const void *b)
{
    const rank_item *x = a, *y = b;
    if (x->score < y->score)
        return -1;
    if (x->score > y->score)
        return 1;
    if (x->us < y->us)
        return -1;
    if (x->us > y->us)
        return 1;
    /* equal predictions keep space order: qsort is not stable by itself */
    return x->index < y->index ? -1 : x->index > y->index;
}

/* A dynamic op's candidates serve every size of its range, not only the largest it is tuned at.
 * Each is priced at three sizes - the range's bottom, its geometric middle and its top (each
 * name's size in its range alike) - and scored by its worst ratio to the best prediction there,
 * so a schedule that is best at the top but poor lower down (a tile count just past a wave
 * there) loses to one that is good throughout. On the H200, BERT's GEMMs at 7 x 197 = 1379 rows
 * ran the 128x192 tile the model picks for the range's top, 1536, at 1.5x the time of the
 * exact-size pick (bench/results/2026-11-30-h200-session10/b).
 *
 * A candidate that is the model's first choice (within 1%) at none of the three sizes has its
 * score raised by RANGE_UNPICKED: a schedule the model only ever ranks as nearly best is priced
 * where the model is least checked, since measurement has mostly checked its first choices.
 * Without it, the worst ratio chose 64x128 tiles for BERT's [b*s, 768] x [768, 768] at b in
 * 13..14, s in 257..320 (predicted 1.06-1.10x the best in the range) where 128x192 and 128x128
 * each win somewhere; on the H200 those 64x128 tiles ran 1.33x the time of the exact-size pick
 * at 14 x 274 (bench/results/2026-11-30-h200-session11/b): the model was 1.2x optimistic about
 * them, hence the factor. Ties and static ops: the prediction at the tuning sizes. A candidate
 * the model cannot price at a size is left out of that size's ratio. */
#define RANGE_UNPICKED 1.20
#define RANGE_TIE 1.01

/* floor(sqrt(a)) for a >= 0, exact where the double's root lands one off either way. */
static int64_t isqrt(double a)
{
    int64_t v = (int64_t)sqrt(a);
    while (v > 0 && (double)v * (double)v > a)
        v--;
    while ((double)(v + 1) * (double)(v + 1) <= a)
        v++;
    return v;
}

bool tuner_range_spans(const tuner_op *op)
{
    for (int n = 0; n < op->n_dims && n < TUNER_MAX_DIMS; n++)
        if (op->dims[n].min != op->dims[n].max)
            return true;
    return false;
}

void tuner_range_sample(const tuner_op *op, int k, int64_t sizes[TUNER_MAX_DIMS])
{
    for (int n = 0; n < op->n_dims && n < TUNER_MAX_DIMS; n++) {
        const tuner_dim *d = &op->dims[n];
        const int64_t step = d->multiple_of > 1 ? d->multiple_of : 1;
        int64_t mid = isqrt((double)d->min * (double)d->max) / step * step;
        mid = mid < d->min ? d->min : mid > d->max ? d->max : mid;
        int64_t v;
        if (k <= 0)
            v = d->min;
        else if (k >= TUNER_RANGE_TOP)
            v = d->max;
        else if (k == TUNER_RANGE_MIDDLE)
            v = mid;
        else if (k < TUNER_RANGE_MIDDLE)
            v = (int64_t)((double)d->min * pow((double)mid / (double)d->min, (double)k / TUNER_RANGE_MIDDLE));
        else
            v = (int64_t)((double)mid * pow((double)d->max / (double)mid,
                                            (double)(k - TUNER_RANGE_MIDDLE) / (TUNER_RANGE_TOP - TUNER_RANGE_MIDDLE)));
        if (k > 0 && k < TUNER_RANGE_TOP && k != TUNER_RANGE_MIDDLE)
            v = v / step * step;
        sizes[n] = v < d->min ? d->min : v > d->max ? d->max : v;
    }
}

/* Each item's prediction at samples ks[0..n_ks) of a dynamic op's range (tuner_range_sample),
 * sample-major: us[p * space->n + i] (malloc'd). NULL for a static op or a range of one size, or
 * out of memory. */
static double *predict_at_samples(const tuner_op *op, const tuner_target *t, const tuner_space *space, const int *ks,
                                  int n_ks)
{
    if (!tuner_op_is_dynamic(op) || !tuner_range_spans(op))
        return NULL;
    tuner_op *at = malloc((size_t)n_ks * sizeof(*at));
    double *us = malloc((size_t)n_ks * space->n * sizeof(*us));
    bool ok = at && us;
    for (int p = 0; ok && p < n_ks; p++) {
        int64_t sizes[TUNER_MAX_DIMS];
        tuner_range_sample(op, ks[p], sizes);
        ok = tuner_op_bind(op, sizes, &at[p]) == 0;
    }
    for (int p = 0; ok && p < n_ks; p++)
        for (size_t i = 0; i < space->n; i++)
            us[(size_t)p * space->n + i] = tuner_predict_us(&at[p], t, &space->items[i]);
    free(at);
    if (!ok) {
        free(us);
        return NULL;
    }
    return us;
}

/* Below a dynamic op's tuning sizes: from each item's predictions at the range's bottom (lo) and
 * its geometric middle (mid), its worst ratio to the best prediction there into below[i] (1 where
 * the model cannot price the item), and whether it is the model's first choice (within RANGE_TIE)
 * at either into picked[i]. */
static void ratios_below_top(const tuner_space *space, const double *lo, const double *mid, double *below,
                             bool *picked)
{
    const double *us[2] = {lo, mid};
    double best[2] = {1e12, 1e12};
    for (int p = 0; p < 2; p++)
        for (size_t i = 0; i < space->n; i++)
            best[p] = us[p][i] < best[p] ? us[p][i] : best[p];
    for (size_t i = 0; i < space->n; i++) {
        below[i] = 1.0;
        picked[i] = false;
        for (int p = 0; p < 2; p++) {
            const double u = us[p][i];
            if (u >= 1e12 || best[p] >= 1e12)
                continue;
            below[i] = u / best[p] > below[i] ? u / best[p] : below[i];
            picked[i] = picked[i] || u <= RANGE_TIE * best[p];
        }
    }
}

/* tuner_range_prices.carry from each item's predictions at every sample (us: sample-major). */
static void range_carry(const tuner_space *space, const double *us, double *carry)
{
    for (size_t i = 0; i < space->n; i++)
        for (int k = 0; k < TUNER_RANGE_SAMPLES; k++) {
            const double u = us[(size_t)k * space->n + i];
            const double from = us[(size_t)(k <= TUNER_RANGE_MIDDLE ? TUNER_RANGE_MIDDLE : TUNER_RANGE_TOP) * space->n + i];
            carry[i * TUNER_RANGE_SAMPLES + k] = u < 1e12 && from < 1e12 && from > 0 ? u / from : 1.0;
        }
}

/* Scores a dynamic op's items for its range (above), and fills prices (may be NULL). The
 * predictions at the range's samples serve both: every sample where a carry is asked for, the
 * bottom and the middle alone where not. */
static void rank_over_range(const tuner_op *op, const tuner_target *t, const tuner_space *space, rank_item *it,
                            tuner_range_prices *prices)
{
    if (prices) {
        for (size_t i = 0; prices->carry && i < space->n * TUNER_RANGE_SAMPLES; i++)
            prices->carry[i] = 1.0;
        prices->ranged = false;
    }
    int ks[TUNER_RANGE_SAMPLES] = {0, TUNER_RANGE_MIDDLE}, n_ks = 2, mid_row = 1;
    if (prices && prices->carry) {
        for (int k = 0; k < TUNER_RANGE_SAMPLES; k++)
            ks[k] = k;
        n_ks = TUNER_RANGE_SAMPLES;
        mid_row = TUNER_RANGE_MIDDLE;
    }
    double *us = predict_at_samples(op, t, space, ks, n_ks);
    if (prices && us) {
        if (prices->carry)
            range_carry(space, us, prices->carry);
        prices->ranged = true;
    }
    double *below = us ? malloc(space->n * sizeof(*below)) : NULL;
    bool *picked = us ? malloc(space->n * sizeof(*picked)) : NULL;
    const bool ranged = below && picked;
    if (ranged)
        ratios_below_top(space, us, us + (size_t)mid_row * space->n, below, picked);
    double best_top = 1e12;
    for (size_t i = 0; ranged && i < space->n; i++)
        best_top = it[i].us < best_top ? it[i].us : best_top;
    for (size_t i = 0; ranged && best_top < 1e12 && i < space->n; i++) {
        if (it[i].us >= 1e12) {
            it[i].score = 1e12;
            continue;
        }
        const double top = it[i].us / best_top;
        const double worst = top > below[i] ? top : below[i];
        it[i].score = picked[i] || top <= RANGE_TIE ? worst : worst * RANGE_UNPICKED;
    }
    free(below);
    free(picked);
    free(us);
}

void tuner_rank_ranged(const tuner_op *op, const tuner_target *t, const tuner_space *space, size_t *order,
                       double *predicted_us, tuner_range_prices *prices)
{
    if (!space || !order || space->n == 0)
        return;
    rank_item *it = malloc(space->n * sizeof(*it));
    if (!it) {
        /* Out of memory: the identity order is still a valid answer (and no range prices: a
         * measured job then compares its candidates' times alone). */
        for (size_t i = 0; i < space->n; i++) {
            order[i] = i;
            if (predicted_us)
                predicted_us[i] = tuner_predict_us(op, t, &space->items[i]);
        }
        if (prices)
            prices->ranged = false;
        return;
    }
    for (size_t i = 0; i < space->n; i++) {
        it[i].index = i;
        it[i].us = it[i].score = tuner_predict_us(op, t, &space->items[i]);
        if (predicted_us)
            predicted_us[i] = it[i].us;
    }
    rank_over_range(op, t, space, it, prices);
    qsort(it, space->n, sizeof(*it), rank_cmp);
    for (size_t i = 0; i < space->n; i++)
        order[i] = it[i].index;
    free(it);
}

void tuner_rank(const tuner_op *op, const tuner_target *t, const tuner_space *space, size_t *order,
                double *predicted_us)
{
    tuner_rank_ranged(op, t, space, order, predicted_us, NULL);
}

int tuner__model_first(const tuner_template *tp, const tuner_op *op, const tuner_target *t, tuner_schedule *ret)
{
    tuner_schedule *items = NULL;
    size_t n = 0;
    int r = tp->enumerate(op, t, &items, &n);
    if (r < 0 || n == 0) {
        free(items);
        return r < 0 ? r : -ENOENT;
    }
    size_t best = 0;
    double best_us = 1e300;
    for (size_t i = 0; i < n; i++) {
        const double us = tp->predict_us(op, t, &items[i]);
        if (us < best_us) {
            best_us = us;
            best = i;
        }
    }
    *ret = items[best];
    free(items);
    return 0;
}

static double param_distance(const tuner_schedule *s, const tuner_schedule *pref)
{
    double d = 0.0;
    for (int i = 0; i < pref->n_params; i++) {
        int v = tuner_schedule_param(s, pref->params[i].name, -1), p = pref->params[i].value;
        if (v == -1)
            continue;
        if (v > 0 && p > 0)
            d += fabs(log2((double)v) - log2((double)p));
        else
            d += v != p;
    }
    return d;
}

/* The index of the schedule of tp in space nearest to tp's preference for op, or -1 when tp has
 * none for op. */
static long preferred_index(const tuner_op *op, const tuner_target *t, const tuner_space *space,
                            const tuner_template *tp, size_t first)
{
    /* A template without the hook enumerates its preferred schedule first. */
    if (!tp->preferred)
        return (long)first;
    tuner_schedule pref;
    memset(&pref, 0, sizeof(pref));
    if (tp->preferred(op, t, &pref) != 0)
        return -1;
    pref.template_name = tp->name;
    size_t best = first;
    double best_d = INFINITY;
    for (size_t j = first; j < space->n; j++) {
        if (strcmp(space->items[j].template_name, tp->name) != 0)
            continue;
        double d = param_distance(&space->items[j], &pref);
        if (d < best_d) {
            best_d = d;
            best = j;
        }
    }
    return (long)best;
}

size_t tuner_default_index(const tuner_op *op, const tuner_target *t, const tuner_space *space)
{
    if (!space || space->n == 0)
        return 0;
    /* The templates that fill the space, each with its first schedule, in space order. The
     * registries hold a dozen templates; more than fit here would be a registry bug, and the
     * ones beyond are then never asked. */
    enum { MAX_TEMPLATES = 64 };
    const tuner_template *tps[MAX_TEMPLATES];
    size_t firsts[MAX_TEMPLATES];
    bool asked[MAX_TEMPLATES] = {false};
    int n = 0;
    for (size_t i = 0; i < space->n && n < MAX_TEMPLATES; i++) {
        const char *name = space->items[i].template_name;
        bool seen = false;
        for (int k = 0; k < n && !seen; k++)
            seen = strcmp(tps[k]->name, name) == 0;
        const tuner_template *tp = seen ? NULL : tuner__template_find(name);
        if (tp) {
            tps[n] = tp;
            firsts[n++] = i;
        }
    }
    /* Each template is asked in rank order (equal ranks: space order) until one has a preference
     * for op. */
    for (;;) {
        int pick = -1;
        for (int k = 0; k < n; k++)
            if (!asked[k] && (pick < 0 || tps[k]->default_rank < tps[pick]->default_rank))
                pick = k;
        if (pick < 0)
            return 0;
        asked[pick] = true;
        long idx = preferred_index(op, t, space, tps[pick], firsts[pick]);
        if (idx >= 0)
            return (size_t)idx;
    }
}

char *tuner_schedule_json(const tuner_schedule *s)
{
    if (!s || !s->template_name)
        return NULL;
    char *out = NULL;
    cJSON *root = cJSON_CreateObject();
    cJSON *params = cJSON_CreateObject();
    if (!root || !params) {
        cJSON_Delete(params);
        goto out;
    }
    if (!cJSON_AddStringToObject(root, "template", s->template_name)) {
        cJSON_Delete(params);
        goto out;
    }
    cJSON_AddItemToObject(root, "params", params);
    for (int i = 0; i < s->n_params && i < TUNER_MAX_PARAMS; i++)
        if (!s->params[i].name || !cJSON_AddNumberToObject(params, s->params[i].name, s->params[i].value))
            goto out;
    out = cJSON_PrintUnformatted(root);
out:
    cJSON_Delete(root);
    return out;
}
