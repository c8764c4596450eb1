/* bench/model_check.c - the cost model as built now, against times measured on a GPU.
 *
 * `tune: "model"` runs the cost model's first schedule unmeasured, so the model's order is what
 * most clients get. bench/calibrate.py records, per bench case, the request and the measured
 * time of a few hundred schedules (calibration.json). This tool rebuilds each case's space here,
 * ranks it with the current model and reports, per case:
 *
 *   first  the measured time of the first schedule in the model's order that was measured, over
 *          the best measured time (1.00: the model's pick is the best of those measured)
 *   at     that schedule's position in the model's order (0: the model's own first pick was
 *          measured; larger: the pick is a schedule the calibration run did not time)
 *   top3   the best of the first three measured schedules in the model's order, over the best
 *
 * and the geometric means of `first` and `top3` over the cases. No GPU and no daemon needed:
 *
 *   model_check [--arch sm_90a] [--fail-above G] [--show N] [--table] [--only SUBSTR] CALIBRATION.json...
 *
 * --show N lists, under each case, the model's first N measured schedules with their predicted
 * and measured times, then the N fastest measured ones with their positions in the model's
 * order; --only keeps the cases whose shape contains SUBSTR. --table adds, under each case,
 * every measured schedule, one tab-separated line each (shape, position in the model's order,
 * predicted us, measured us, predicted over measured, the schedule), for studying where the
 * model is off by kind of tile.
 *
 * With --fail-above it exits 3 when the geometric mean of `first` exceeds G: the tuner's test
 * suite runs it on the committed calibrations of bench/results/2026-11-25-h100-model-ring and
 * 2026-11-25-h100-calibration-2 (H100), 2026-11-28-h200-l2-flush and 2026-11-30-h200-session12/f
 * (H200; bench/meson.build), so a change to the cost model that ranks those cases worse fails
 * there, without a GPU.
 *
 * Schedules are matched by template and parameters (not by index), so a space that gained or
 * lost schedules since the calibration run still compares. Exit codes: 0 ok, 1 unreadable
 * input, 2 usage, 3 above --fail-above.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "bench/slurp.h"
#include "proto/request.h"
#include "tuner/tuner.h"

/* The measured time of space item `s`, or a negative number when the calibration run did not
 * time it (or it failed). */
static double measured_us(const cJSON *rows, const tuner_schedule *s)
{
    char *json = tuner_schedule_json(s);
    cJSON *mine = json ? cJSON_Parse(json) : NULL;
    free(json);
    double us = -1;
    const cJSON *tmpl = cJSON_GetObjectItemCaseSensitive(mine, "template");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(mine, "params");
    const cJSON *row;
    cJSON_ArrayForEach(row, rows) {
        const cJSON *ok = cJSON_GetObjectItemCaseSensitive(row, "ok");
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(row, "template");
        const cJSON *lat = cJSON_GetObjectItemCaseSensitive(row, "latency_us");
        if (!cJSON_IsTrue(ok) || !cJSON_IsString(t) || !cJSON_IsNumber(lat) || !cJSON_IsString(tmpl) ||
            strcmp(t->valuestring, tmpl->valuestring) != 0)
            continue;
        if (cJSON_Compare(cJSON_GetObjectItemCaseSensitive(row, "params"), params, true)) {
            us = lat->valuedouble;
            break;
        }
    }
    cJSON_Delete(mine);
    return us;
}

typedef struct totals {
    double log_first, log_top3;
    int cases;
} totals;

typedef struct check_opts {
    const char *arch;
    const char *only; /* substring of the shapes to check, or NULL */
    int show;         /* schedules listed per case */
    bool table;       /* every measured schedule, one line each */
} check_opts;

/* Under a case: the model's first `show` measured schedules, then the `show` fastest. us[i] is
 * the measured time of the model's i-th schedule (negative: not measured). */
static void show_schedules(const tuner_space *space, const size_t *order, const double *pred, const double *us,
                           int show)
{
    size_t n = 0, *timed = calloc(space->n, sizeof(*timed)); /* positions in the order, measured */
    if (!timed)
        return;
    for (size_t i = 0; i < space->n; i++)
        if (us[i] >= 0)
            timed[n++] = i;
    for (int pass = 0; pass < 2; pass++) {
        printf("  %s\n", pass == 0 ? "the model's first measured:" : "the fastest measured:");
        for (size_t k = 0; k < (size_t)show && k < n; k++) {
            if (pass == 1) { /* selection sort of timed[] by time, k entries deep: n is a few hundred */
                size_t j = k;
                for (size_t m = k + 1; m < n; m++)
                    if (us[timed[m]] < us[timed[j]])
                        j = m;
                const size_t swap = timed[k];
                timed[k] = timed[j];
                timed[j] = swap;
            }
            const size_t at = timed[k];
            char *js = tuner_schedule_json(&space->items[order[at]]);
            printf("    at %4zu  predicted %8.2f  measured %8.2f  %s\n", at, pred[order[at]], us[at], js ? js : "?");
            free(js);
        }
    }
    free(timed);
}

static void check_case(const cJSON *c, const check_opts *opts, totals *tot)
{
    const cJSON *summary = cJSON_GetObjectItemCaseSensitive(c, "summary");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(summary, "case");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(summary, "shape");
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(c, "rows");
    cJSON *req_json = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(c, "request"), true);
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(summary, "dtype");
    const char *label_case = cJSON_IsString(name) ? name->valuestring : "?";
    /* The shape, with the dtype where it is not f16 (older files record f16 cases only). */
    const char *dt = cJSON_IsString(dtype) && strcmp(dtype->valuestring, "f16") != 0 ? dtype->valuestring : NULL;
    char label_shape[64];
    snprintf(label_shape, sizeof(label_shape), "%s%s%s", cJSON_IsString(shape) ? shape->valuestring : "?",
             dt ? " " : "", dt ? dt : "");
    if (opts->only && !strstr(label_shape, opts->only)) {
        cJSON_Delete(req_json);
        return;
    }
    if (!req_json || !cJSON_IsArray(rows)) {
        printf("%-16s %-24s no request or rows (calibrated before requests were recorded)\n", label_case, label_shape);
        cJSON_Delete(req_json);
        return;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(req_json, "arch");
    cJSON_AddStringToObject(req_json, "arch", opts->arch);
    char *body = cJSON_PrintUnformatted(req_json);
    cJSON_Delete(req_json);
    proto_kernel_request req;
    proto_error perr;
    if (!body) {
        printf("%-16s %-24s out of memory\n", label_case, label_shape);
        return;
    }
    int rc = proto_kernel_request_parse(body, strlen(body), &req, &perr);
    free(body);
    if (rc < 0) {
        printf("%-16s %-24s request refused: %s\n", label_case, label_shape, perr.message);
        return;
    }
    tuner_space *space = NULL;
    char *err = NULL;
    if (tuner_space_build(&req.op, &req.opt.target, &space, &err) < 0 || space->n == 0) {
        printf("%-16s %-24s no space: %s\n", label_case, label_shape, err ? err : "empty");
        free(err);
        tuner_space_free(space);
        return;
    }
    size_t *order = calloc(space->n, sizeof(*order));
    double *pred = calloc(space->n, sizeof(*pred));
    double *measured = calloc(space->n, sizeof(*measured)); /* by position in the model's order */
    if (!order || !pred || !measured) {
        free(order);
        free(pred);
        free(measured);
        tuner_space_free(space);
        return;
    }
    tuner_rank(&req.op, &req.opt.target, space, order, pred);
    double best = -1, first = -1, top3 = -1;
    size_t first_at = 0;
    int seen = 0;
    char *pick = NULL;
    for (size_t i = 0; i < space->n; i++) {
        const double us = measured[i] = measured_us(rows, &space->items[order[i]]);
        if (us < 0)
            continue;
        if (best < 0 || us < best)
            best = us;
        if (seen == 0) {
            first = us;
            first_at = i;
            pick = tuner_schedule_json(&space->items[order[i]]);
        }
        if (seen < 3 && (top3 < 0 || us < top3))
            top3 = us;
        seen++;
    }
    if (seen == 0) {
        printf("%-16s %-24s no measured schedule in this space\n", label_case, label_shape);
    } else {
        printf("%-16s %-24s %5zu %6d %6.2f %5zu %6.2f  %s\n", label_case, label_shape, space->n, seen, first / best,
               first_at, top3 / best, pick ? pick : "?");
        tot->log_first += log(first / best);
        tot->log_top3 += log(top3 / best);
        tot->cases++;
        if (opts->show > 0)
            show_schedules(space, order, pred, measured, opts->show);
        if (opts->table)
            for (size_t i = 0; i < space->n; i++) {
                if (measured[i] < 0)
                    continue;
                char *js = tuner_schedule_json(&space->items[order[i]]);
                printf("%s\t%zu\t%.3f\t%.3f\t%.3f\t%s\n", label_shape, i, pred[order[i]], measured[i],
                       pred[order[i]] / measured[i], js ? js : "?");
                free(js);
            }
    }
    free(pick);
    free(measured);
    free(pred);
    free(order);
    tuner_space_free(space);
}

int main(int argc, char **argv)
{
    check_opts opts = {.arch = "sm_90a"};
    double fail_above = 0;
    int ai = 1;
    while (ai < argc && argv[ai][0] == '-') {
        if (!strcmp(argv[ai], "--table")) {
            opts.table = true;
            ai++;
            continue;
        }
        if (ai + 1 >= argc)
            break;
        if (!strcmp(argv[ai], "--arch"))
            opts.arch = argv[ai + 1];
        else if (!strcmp(argv[ai], "--show"))
            opts.show = atoi(argv[ai + 1]);
        else if (!strcmp(argv[ai], "--only"))
            opts.only = argv[ai + 1];
        else if (!strcmp(argv[ai], "--fail-above"))
            fail_above = atof(argv[ai + 1]);
        else
            break;
        ai += 2;
    }
    if (ai >= argc || argv[ai][0] == '-') {
        fprintf(stderr, "usage: model_check [--arch ARCH] [--fail-above G] [--show N] [--table] [--only SUBSTR] "
                        "CALIBRATION.json...\n");
        return 2;
    }
    printf("%-16s %-24s %5s %6s %6s %5s %6s  %s\n", "case", "shape", "space", "timed", "first", "at", "top3",
           "the model's first measured schedule");
    totals tot = {0};
    for (; ai < argc; ai++) {
        size_t len = 0;
        char *text = slurp(argv[ai], &len);
        cJSON *doc = text ? cJSON_ParseWithLength(text, len) : NULL;
        free(text);
        if (!doc) {
            fprintf(stderr, "model_check: %s: not readable JSON\n", argv[ai]);
            return 1;
        }
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(doc, "cases")) check_case(c, &opts, &tot);
        cJSON_Delete(doc);
    }
    if (tot.cases == 0) {
        fprintf(stderr, "model_check: no case could be compared\n");
        return fail_above > 0 ? 3 : 0;
    }
    const double first = exp(tot.log_first / tot.cases);
    printf("geometric mean over %d cases: first %.3f, top3 %.3f\n", tot.cases, first, exp(tot.log_top3 / tot.cases));
    if (fail_above > 0 && first > fail_above) {
        fprintf(stderr, "model_check: the model's picks run %.3f of the best on average, above %.3f\n", first, fail_above);
        return 3;
    }
    return 0;
}
