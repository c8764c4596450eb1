/* bench/kgen.c - prints what the tuner generates for one request and one schedule, without a
 * daemon or a GPU: the CUDA source, the launches, and (with -o) the PTX and cubin NVRTC makes of
 * it. For reading a template's output, its register report (ptxas -v on the PTX) and its SASS
 * (cuobjdump -sass on the cubin) while tuning a template.
 *
 *   kgen REQUEST.json                       the tune:"none" default schedule
 *   kgen REQUEST.json block_m=128,stages=4  that schedule: the default's template, with those
 *                                           parameters set (the template rejects what it lacks)
 *   kgen --rank N REQUEST.json              the cost model's N best schedules, with predictions
 *   kgen --carry REQUEST.json               for a request with named dimensions: the sizes a
 *                                           measured range job compares its candidates at, then
 *                                           per schedule (by its index, as trials record it) the
 *                                           model's carry to each (tuner_range_prices), tab-
 *                                           separated, for bench/replay_range.py
 *   kgen --template NAME REQUEST.json ...   the first (preferred) schedule of that template
 *                                           instead of the default's, overrides applied to it
 *   kgen -o PREFIX ...                      also writes PREFIX.cu, PREFIX.ptx, PREFIX.cubin,
 *                                           PREFIX.ref.cubin (the verification reference) and
 *                                           PREFIX.json (buffers and launches of both), which
 *                                           bench/kbench.py runs, checks and times on a GPU
 *
 * Exit codes: 0 ok, 1 the request, schedule or compile failed, 2 usage.
 */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "bench/slurp.h"
#include "proto/request.h"
#include "tuner/tuner.h"

/* Applies "name=value,name=value" to s; every name must already be a parameter of s. */
static int apply_overrides(tuner_schedule *s, const char *spec)
{
    char *copy = strdup(spec);
    if (!copy)
        return -1;
    int rc = 0;
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) {
            fprintf(stderr, "kgen: '%s' is not name=value\n", tok);
            rc = -1;
            break;
        }
        *eq = '\0';
        int i = 0;
        while (i < s->n_params && strcmp(s->params[i].name, tok))
            i++;
        if (i == s->n_params) {
            /* A parameter the default does not list (one with a default, such as persist):
             * added, and the template decides whether the schedule is valid. */
            if (i == TUNER_MAX_PARAMS || !(s->params[i].name = strdup(tok))) {
                rc = -1;
                break;
            }
            s->n_params++;
        }
        s->params[i].value = atoi(eq + 1);
    }
    free(copy);
    return rc;
}

static int write_file(const char *prefix, const char *ext, const void *data, size_t len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s%s", prefix, ext);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        return -1;
    }
    return 0;
}

static void json_launches(FILE *f, const tuner_program *prog)
{
    fputs("[", f);
    for (int k = 0; k < prog->n_kernels; k++) {
        const tuner_launch *l = &prog->kernels[k];
        fprintf(f, "%s{\"name\": \"%s\", \"grid\": [%u, %u, %u], \"block\": [%u, %u, %u], \"shared\": %u, \"args\": [",
                k ? ", " : "", l->name, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2],
                l->shared_bytes);
        for (int a = 0; a < l->n_args; a++)
            fprintf(f, "%s%d", a ? ", " : "", l->args[a]);
        fputs("]", f);
        /* Tensor maps after the pointers: op/tmap.h's JSON members and "buf", a buffer id as in
         * "args"; kbench encodes them for its buffers. */
        if (l->n_maps) {
            fputs(", \"maps\": [", f);
            for (int m = 0; m < l->n_maps; m++) {
                cJSON *j = tuner_tmap_to_json(&l->maps[m]);
                char *text = j && cJSON_AddNumberToObject(j, "buf", l->maps[m].buf) ? cJSON_PrintUnformatted(j) : NULL;
                fprintf(f, "%s%s", m ? ", " : "", text ? text : "null");
                free(text);
                cJSON_Delete(j);
            }
            fputs("]", f);
        }
        fputs("}", f);
    }
    fputs("]", f);
}

static void json_tensor(FILE *f, const tuner_tensor *t)
{
    fputs("{\"shape\": [", f);
    for (int d = 0; d < t->rank; d++)
        fprintf(f, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    fprintf(f, "], \"dtype\": \"%s\"}", tuner_dtype_name(t->dtype));
}

/* Buffers and launches of the candidate and of the reference; argument i of a launch names
 * buffer args[i]: inputs 0..n-1, output = TUNER_BUF_OUTPUT, workspace = TUNER_BUF_WORKSPACE. */
static int write_meta(const char *prefix, const tuner_op *op, const char *schedule, const tuner_program *prog,
                      const tuner_program *ref, double predicted_us)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s.json", prefix);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return -1;
    }
    fprintf(f, "{\"op\": %d, \"schedule\": %s, \"predicted_us\": %.3f, \"buf_output\": %d, \"buf_workspace\": %d,\n",
            (int)op->kind, schedule, predicted_us, TUNER_BUF_OUTPUT, TUNER_BUF_WORKSPACE);
    fputs(" \"inputs\": [", f);
    for (int i = 0; i < op->n_inputs; i++) {
        fputs(i ? ", " : "", f);
        json_tensor(f, &op->inputs[i]);
    }
    fputs("],\n \"output\": ", f);
    json_tensor(f, &op->output);
    fprintf(f, ",\n \"workspace_bytes\": %zu, \"kernels\": ", prog->workspace_bytes);
    json_launches(f, prog);
    fprintf(f, ",\n \"ref_workspace_bytes\": %zu, \"ref_kernels\": ", ref->workspace_bytes);
    json_launches(f, ref);
    fputs("}\n", f);
    return fclose(f) == 0 ? 0 : -1;
}

/* --carry: the range's samples (one line: "samples" and each sample's sizes, names joined by
 * "x"), then a line per schedule: its index, its JSON and its carry to each sample. */
static int print_carry(const tuner_op *op, const tuner_target *t, tuner_space *space)
{
    size_t *order = calloc(space->n, sizeof(*order));
    double *c = calloc(space->n * TUNER_RANGE_SAMPLES, sizeof(*c));
    tuner_range_prices prices = {.carry = c};
    if (!order || !c) {
        free(order);
        free(c);
        return 1;
    }
    tuner_rank_ranged(op, t, space, order, NULL, &prices);
    const int rc = prices.ranged ? 0 : 1;
    if (!prices.ranged) {
        fprintf(stderr, "kgen: --carry needs a request whose named dimensions span more than one size\n");
    } else {
        fputs("samples", stdout);
        for (int k = 0; k < TUNER_RANGE_SAMPLES; k++) {
            int64_t sizes[TUNER_MAX_DIMS];
            tuner_range_sample(op, k, sizes);
            for (int n = 0; n < op->n_dims; n++)
                printf("%s%lld", n ? "x" : "\t", (long long)sizes[n]);
        }
        putchar('\n');
        for (size_t i = 0; i < space->n; i++) {
            char *j = tuner_schedule_json(&space->items[i]);
            printf("%zu\t%s", i, j ? j : "?");
            for (int k = 0; k < TUNER_RANGE_SAMPLES; k++)
                printf("\t%.6f", c[i * TUNER_RANGE_SAMPLES + k]);
            putchar('\n');
            free(j);
        }
    }
    free(order);
    free(c);
    tuner_space_free(space);
    return rc;
}

int main(int argc, char **argv)
{
    const char *out = NULL, *tmpl = NULL;
    int ai = 1, rank = 0;
    bool carry = false;
    if (ai + 1 < argc && !strcmp(argv[ai], "--carry")) {
        carry = true;
        ai++;
    }
    if (ai + 1 < argc && !strcmp(argv[ai], "--template")) {
        tmpl = argv[ai + 1];
        ai += 2;
    }
    if (ai + 1 < argc && !strcmp(argv[ai], "--rank")) {
        rank = atoi(argv[ai + 1]);
        ai += 2;
    }
    if (ai + 1 < argc && !strcmp(argv[ai], "-o")) {
        out = argv[ai + 1];
        ai += 2;
    }
    if (ai >= argc || argc - ai > 2) {
        fprintf(stderr, "usage: kgen [--carry] [--template NAME] [--rank N] [-o PREFIX] REQUEST.json [name=value,...]\n");
        return 2;
    }
    if (out) {
        /* PREFIX.json is written: it must not be the request itself. */
        char meta[4096], *a = NULL, *b = NULL;
        snprintf(meta, sizeof(meta), "%s.json", out);
        bool same = (a = realpath(argv[ai], NULL)) && (b = realpath(meta, NULL)) && !strcmp(a, b);
        free(a);
        free(b);
        if (same) {
            fprintf(stderr, "kgen: -o %s would overwrite the request %s\n", out, argv[ai]);
            return 2;
        }
    }
    size_t len = 0;
    char *body = slurp(argv[ai], &len);
    if (!body) {
        perror(argv[ai]);
        return 1;
    }
    proto_kernel_request req;
    proto_error perr;
    int rc = proto_kernel_request_parse(body, len, &req, &perr);
    free(body);
    if (rc < 0) {
        fprintf(stderr, "kgen: %s (%s): %s\n", perr.code, perr.field, perr.message);
        return 1;
    }
    tuner_space *space = NULL;
    char *err = NULL;
    if (tuner_space_build(&req.op, &req.opt.target, &space, &err) < 0 || space->n == 0) {
        fprintf(stderr, "kgen: no schedule space: %s\n", err ? err : "empty");
        return 1;
    }
    if (carry)
        return print_carry(&req.op, &req.opt.target, space);
    if (rank > 0) {
        size_t *order = calloc(space->n, sizeof(*order));
        double *pred = calloc(space->n, sizeof(*pred));
        if (!order || !pred)
            return 1;
        tuner_rank(&req.op, &req.opt.target, space, order, pred);
        printf("%zu candidates\n", space->n);
        for (size_t i = 0; i < space->n && i < (size_t)rank; i++) {
            char *j = tuner_schedule_json(&space->items[order[i]]);
            printf("%3zu %9.1f us  %s\n", i, pred[order[i]], j ? j : "?");
            free(j);
        }
        free(order);
        free(pred);
        tuner_space_free(space);
        return 0;
    }
    size_t pick = tuner_default_index(&req.op, &req.opt.target, space);
    if (tmpl) {
        pick = space->n;
        for (size_t i = 0; i < space->n && pick == space->n; i++)
            if (!strcmp(space->items[i].template_name, tmpl))
                pick = i;
        if (pick == space->n) {
            fprintf(stderr, "kgen: no %s schedule in this space\n", tmpl);
            return 1;
        }
    }
    tuner_schedule s = space->items[pick];
    if (ai + 1 < argc && apply_overrides(&s, argv[ai + 1]) < 0)
        return 1;
    char *sj = tuner_schedule_json(&s);
    tuner_program *prog = NULL;
    if (tuner_generate(&req.op, &req.opt.target, &s, &prog, &err) < 0) {
        fprintf(stderr, "kgen: %s: %s\n", sj ? sj : "schedule", err ? err : "cannot generate");
        return 1;
    }
    printf("// schedule %s\n// predicted %.1f us\n", sj ? sj : "?", tuner_predict_us(&req.op, &req.opt.target, &s));
    for (int k = 0; k < prog->n_kernels; k++) {
        const tuner_launch *l = &prog->kernels[k];
        printf("// launch %s grid (%u,%u,%u) block (%u,%u,%u) shared %u\n", l->name, l->grid[0], l->grid[1],
               l->grid[2], l->block[0], l->block[1], l->block[2], l->shared_bytes);
    }
    fputs(prog->source, stdout);
    int status = 0;
    if (out) {
        tuner_binary *bin = NULL;
        if (tuner_compile(prog->source, &req.opt.target, &bin, &err) < 0) {
            fprintf(stderr, "kgen: %s\n", err ? err : "compile failed");
            status = 1;
        } else {
            fprintf(stderr, "kgen: compiled in %.0f ms\n", bin->compile_ms);
            if (write_file(out, ".cu", prog->source, strlen(prog->source)) < 0 ||
                write_file(out, ".ptx", bin->ptx, bin->ptx_len) < 0 ||
                write_file(out, ".cubin", bin->cubin, bin->cubin_len) < 0)
                status = 1;
            tuner_binary_free(bin);
        }
        tuner_program *ref = NULL;
        tuner_binary *rbin = NULL;
        if (status == 0 && (tuner_reference(&req.op, &req.opt.target, &ref, &err) < 0 ||
                            tuner_compile(ref->source, &req.opt.target, &rbin, &err) < 0)) {
            fprintf(stderr, "kgen: reference: %s\n", err ? err : "failed");
            status = 1;
        }
        if (status == 0 && (write_file(out, ".ref.cubin", rbin->cubin, rbin->cubin_len) < 0 ||
                            write_meta(out, &req.op, sj ? sj : "null", prog, ref,
                                       tuner_predict_us(&req.op, &req.opt.target, &s)) < 0))
            status = 1;
        tuner_binary_free(rbin);
        tuner_program_free(ref);
    }
    free(sj);
    free(err);
    tuner_program_free(prog);
    tuner_space_free(space);
    return status;
}
