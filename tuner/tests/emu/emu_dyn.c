/* tuner/tests/emu/emu_dyn.c - see emu_dyn.h. */
#include "tuner/tests/emu/emu_dyn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tuner/codegen.h"
#include "tuner/template.h"
#include "tuner/tests/common.h"
#include "tuner/tests/host_values.h"

void emu_shape_at(const tuner_tensor *x, const int64_t *sz, long long *shape)
{
    for (int d = 0; d < x->rank; d++)
        shape[d] = x->sym[d] ? tuner_dims_product(sz, x->sym[d]) : x->shape[d];
}

long long emu_numel_at(const tuner_tensor *x, const int64_t *sz)
{
    long long s[TUNER_MAX_RANK], n = 1;
    emu_shape_at(x, sz, s);
    for (int d = 0; d < x->rank; d++)
        n *= s[d];
    return n;
}

/* DIR/kern.cu: the source after the helpers, without the device helpers (the emulator's own). */
static void write_kernel(const char *dir, const tuner_program *pr, const char *helpers_end)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/kern.cu", dir);
    FILE *f = fopen(path, "w");
    const char *k = strstr(pr->source, helpers_end);
    k = k ? strchr(k, '\n') + 1 : pr->source;
    for (const char *line = k; *line;) {
        const char *nl = strchr(line, '\n');
        const size_t len = nl ? (size_t)(nl - line + 1) : strlen(line);
        if (strncmp(line, "HD_INLINE", 9) && strncmp(line, "__device__ __forceinline__", 26))
            fwrite(line, 1, len, f);
        line += len;
    }
    fclose(f);
}

static void write_launches(const char *dir, const tuner_op *op, const tuner_program *pr)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/launch.h", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "#define N_INPUTS %d\n#define N_LAUNCHES %d\n", op->n_inputs, pr->n_kernels);
    for (int l = 0; l < pr->n_kernels; l++) {
        const tuner_launch *L = &pr->kernels[l];
        fprintf(f, "static void call_%d() { %s(", l, L->name);
        for (int a = 0; a < L->n_args; a++) {
            const int b = L->args[a];
            if (b >= TUNER_ARG_DIM0)
                fprintf(f, "%sg_dims[%d]", a ? ", " : "", b - TUNER_ARG_DIM0);
            else if (b == TUNER_BUF_OUTPUT)
                fprintf(f, "%s(%s *)g_out", a ? ", " : "", tuner__ctype(op->output.dtype));
            else if (b == TUNER_BUF_WORKSPACE)
                fprintf(f, "%s(float *)g_ws", a ? ", " : "");
            else
                fprintf(f, "%s(const %s *)g_in[%d]", a ? ", " : "", tuner__ctype(op->inputs[b].dtype), b);
        }
        fprintf(f, "); }\n");
        fprintf(f, "static const Launch launch_%d = {call_%d, %u, %u};\n", l, l, L->block[0], L->shared_bytes);
    }
    fprintf(f, "static const Launch launches[] = {launch_0%s};\n", pr->n_kernels > 1 ? ", launch_1" : "");
    fclose(f);
}

/* DIR/s<j>/: sizes.txt (dims, then per launch its grid, then the inputs' bytes, the output's,
 * the margin and the workspace's) and the inputs. */
static void write_set(const char *sd, const emu_dyn_gen *g, const tuner_op *op, const tuner_program *pr, int j,
                      const int64_t *sz)
{
    char path[600];
    mkdir(sd, 0755);
    snprintf(path, sizeof(path), "%s/sizes.txt", sd);
    FILE *f = fopen(path, "w");
    for (int d = 0; d < TUNER_MAX_DIMS; d++)
        fprintf(f, "%lld ", (long long)sz[d]);
    fprintf(f, "\n");
    for (int l = 0; l < pr->n_kernels; l++) {
        const tuner_launch *L = &pr->kernels[l];
        for (int d = 0; d < 3; d++)
            fprintf(f, "%lld ",
                    L->grid_rule[d].dims ? (long long)tuner_grid_rule_eval(&L->grid_rule[d], sz) : (long long)L->grid[d]);
        fprintf(f, "\n");
    }
    for (int i = 0; i < op->n_inputs; i++)
        fprintf(f, "%lld ", emu_numel_at(&op->inputs[i], sz) * tuner_dtype_size(op->inputs[i].dtype));
    fprintf(f, "\n%lld %d %zu\n", emu_numel_at(&op->output, sz) * tuner_dtype_size(op->output.dtype), EMU_MARGIN,
            pr->workspace_bytes);
    fclose(f);
    t_rng_state = 7 + (uint64_t)j;
    for (int i = 0; i < op->n_inputs; i++) {
        const tuner_tensor *x = &op->inputs[i];
        const long long n = emu_numel_at(x, sz);
        unsigned char *h = malloc((size_t)(n * tuner_dtype_size(x->dtype)) + 1);
        for (long long e = 0; e < n; e++)
            t_host_put(x->dtype, h, (size_t)e, g->input_value(i));
        snprintf(path, sizeof(path), "%s/in%d.bin", sd, i);
        FILE *o = fopen(path, "wb");
        fwrite(h, 1, (size_t)(n * tuner_dtype_size(x->dtype)), o);
        fclose(o);
        free(h);
    }
}

int emu_dyn_main(int argc, char **argv, const emu_dyn_gen *g)
{
    if (argc < 4)
        return 2;
    const char *dir = argv[1];
    const tuner_op op = g->case_op(atoi(argv[2]));
    const bool check = !strcmp(argv[3], "check");
    tuner_space *sp = NULL;
    tuner_program *pr = NULL;
    size_t idx = 0;
    if (!check) {
        char *err = NULL;
        if (tuner_space_build(&op, &g->target, &sp, &err) < 0) {
            fprintf(stderr, "space: %s\n", err);
            return 2;
        }
        idx = (size_t)atoll(argv[3]);
        if (idx >= sp->n)
            return 3;
        if (tuner_generate(&op, &g->target, &sp->items[idx], &pr, &err) < 0) {
            fprintf(stderr, "generate: %s\n", err);
            return 2;
        }
        write_kernel(dir, pr, g->helpers_end);
        write_launches(dir, &op, pr);
    }
    int rc = 0;
    for (int j = 0; j < EMU_N_SETS; j++) {
        int64_t sz[TUNER_MAX_DIMS];
        g->set_sizes(&op, j, sz);
        char sd[512];
        snprintf(sd, sizeof(sd), "%s/s%d", dir, j);
        if (check)
            rc |= g->check_set(sd, &op, sz);
        else
            write_set(sd, g, &op, pr, j, sz);
    }
    if (check) {
        printf("\n");
        return rc;
    }
    char *sj = tuner_schedule_json(&sp->items[idx]);
    printf("%s\n", sj);
    free(sj);
    tuner_program_free(pr);
    tuner_space_free(sp);
    return 0;
}
