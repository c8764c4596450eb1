/* tuner/tests/emu/gen_attn_dyn.c - writes one attention_mma candidate of a dynamic op (named B and
 * S = Skv, issue 39) for emu_mma.cpp with emu_attn.h, with inputs at a few sizes of its dims, and
 * checks what the emulation computed (a developer check without a GPU; emulate_attn_dyn.sh drives
 * both, as emulate_mma_dyn.sh does gen_mma_dyn).
 *   gen_attn_dyn DIR CASE INDEX   writes DIR/kern.cu (the kernel source after the attention
 *                                 helpers), DIR/launch.h and, per size set j, DIR/s<j>/ with
 *                                 sizes.txt and in<i>.bin; prints the schedule (exit 3: INDEX
 *                                 past the space)
 *   gen_attn_dyn DIR CASE check   compares DIR/s<j>/out.bin, for every j, with attention computed
 *                                 here in double, and that the poisoned margin is untouched
 * CASE (sm_80): BERT-like self-attention bhsd [b,2,s,64] with an additive key mask [b,1,1,s], b in
 * 1..2: 0 f16, s in 17..20 (one key tile whatever block_n: the count and Skv's max compiled in,
 * tuner/attn/mma.c fixed_nt); 1 bf16, s in 65..80 (one 128-key tile, three of 32); 2 f16, s in
 * 1..150 (counts at launch); 3 f16 causal self-attention without a mask, s in 1..150 (the key
 * count per query block at launch). Size sets: every dim at its min, odd sizes, the max, and b's
 * max with s one past a multiple of 64 (clamped to the range). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench/slurp.h"
#include "tuner/attn/tests/ops.h"
#include "tuner/codegen.h"
#include "tuner/template.h"
#include "tuner/tests/common.h"
#include "tuner/tests/host_values.h"

#define N_SETS 4
#define MARGIN 256 /* poisoned bytes past the output */
#define HEADS 2
#define D 64

static tuner_op case_op(int c)
{
    static const long long lo[4] = {17, 65, 1, 1}, hi[4] = {20, 80, 150, 150};
    const tuner_dtype dt = c == 1 ? TUNER_BF16 : TUNER_F16;
    const bool causal = c == 3;
    const long long ms[4] = {2, 1, 1, hi[c]};
    tuner_op op = ta_attention_of(dt, false, causal, 2, HEADS, HEADS, hi[c], hi[c], D, causal ? 0 : 4, ms, dt);
    /* dims sorted by name: b (bit 0), s (bit 1) */
    op.n_dims = 2;
    snprintf(op.dims[0].name, sizeof(op.dims[0].name), "b");
    op.dims[0].min = 1, op.dims[0].max = 2, op.dims[0].multiple_of = 1;
    snprintf(op.dims[1].name, sizeof(op.dims[1].name), "s");
    op.dims[1].min = lo[c], op.dims[1].max = hi[c], op.dims[1].multiple_of = 1;
    for (int i = 0; i < 3; i++) {
        op.inputs[i].sym[0] = 1;
        op.inputs[i].sym[2] = 2;
    }
    op.output.sym[0] = 1;
    op.output.sym[2] = 2;
    if (!causal) {
        op.inputs[3].sym[0] = 1;
        op.inputs[3].sym[3] = 2;
    }
    return op;
}

static void set_sizes(const tuner_op *op, int j, int64_t *sz)
{
    for (int k = 0; k < TUNER_MAX_DIMS; k++)
        sz[k] = 1;
    for (int k = 0; k < op->n_dims; k++) {
        const tuner_dim *d = &op->dims[k];
        long long v = j == 0 ? d->min : j == 2 ? d->max : j == 3 ? (k == 0 ? d->max : (d->max - 1) / 64 * 64 + 1)
                                                               : (d->min + (d->max - d->min) * 3 / 5) | 1;
        sz[k] = v < d->min ? d->min : v > d->max ? d->max : v;
    }
}

static long long numel_at(const tuner_tensor *x, const int64_t *sz)
{
    long long n = 1;
    for (int d = 0; d < x->rank; d++)
        n *= x->sym[d] ? tuner_dims_product(sz, x->sym[d]) : x->shape[d];
    return n;
}

static int check_set(const char *dir, const tuner_op *op, const int64_t *sz)
{
    char path[600];
    void *in[4] = {NULL};
    size_t n;
    const bool mask = op->n_inputs > 3, causal = op->attrs.attention.causal;
    for (int i = 0; i < op->n_inputs; i++) {
        snprintf(path, sizeof(path), "%s/in%d.bin", dir, i);
        in[i] = slurp(path, &n);
    }
    snprintf(path, sizeof(path), "%s/out.bin", dir);
    unsigned char *out = (unsigned char *)slurp(path, &n);
    const long long B = sz[0], S = sz[1];
    const tuner_dtype dt = op->output.dtype;
    const size_t ob = (size_t)(B * HEADS * S * D * tuner_dtype_size(dt));
    if (!out || n != ob + MARGIN || !in[0] || !in[1] || !in[2] || (mask && !in[3])) {
        printf("WRONG: no output\n");
        return 1;
    }
    long margin = 0;
    for (size_t b = ob; b < ob + MARGIN; b++)
        margin += out[b] != 0xa5; /* emu_mma's poison */
    const double scale = op->attrs.attention.scale;
    long bad = 0;
    double maxerr = 0;
    double *p = malloc((size_t)S * sizeof(*p));
    for (long long b = 0; b < B; b++)
        for (long long h = 0; h < HEADS; h++)
            for (long long i = 0; i < S; i++) {
                const size_t qrow = (size_t)(((b * HEADS + h) * S + i) * D);
                double mx = -INFINITY, sum = 0;
                /* causal, S = Skv: key j <= i */
                const long long nk = causal ? i + 1 : S;
                for (long long j = 0; j < nk; j++) {
                    const size_t krow = (size_t)(((b * HEADS + h) * S + j) * D);
                    double dot = 0;
                    for (int e = 0; e < D; e++)
                        dot += (double)t_host_get(dt, in[0], qrow + (size_t)e) * t_host_get(dt, in[1], krow + (size_t)e);
                    p[j] = dot * scale + (mask ? t_host_get(dt, in[3], (size_t)(b * S + j)) : 0.0);
                    mx = p[j] > mx ? p[j] : mx;
                }
                for (long long j = 0; j < nk; j++)
                    sum += (p[j] = exp(p[j] - mx));
                for (int e = 0; e < D; e++) {
                    double acc = 0;
                    for (long long j = 0; j < nk; j++)
                        acc += p[j] / sum * t_host_get(dt, in[2], (size_t)(((b * HEADS + h) * S + j) * D + e));
                    const double got = t_host_get(dt, out, qrow + (size_t)e);
                    const double err = fabs(got - acc) / (1.0 + fabs(acc));
                    if (!(err <= (dt == TUNER_BF16 ? 2e-2 : 4e-3))) {
                        if (bad < 5)
                            fprintf(stderr, "b %lld h %lld i %lld e %d: got %g want %g\n", b, h, i, e, got, acc);
                        bad++;
                    }
                    if (err > maxerr || err != err)
                        maxerr = err;
                }
            }
    free(p);
    printf("%s [b %lld s %lld]: bad %ld of %lld, max rel err %.2e%s", bad || margin ? "WRONG" : "ok", B, S, bad,
           B * HEADS * S * D, maxerr, margin ? "" : "; ");
    if (margin)
        printf(", %ld bytes written past the output; ", margin);
    for (int i = 0; i < op->n_inputs; i++)
        free(in[i]);
    free(out);
    return bad || margin ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    const char *dir = argv[1];
    const tuner_op op = case_op(atoi(argv[2]));
    char path[600];
    if (!strcmp(argv[3], "check")) {
        int rc = 0;
        for (int j = 0; j < N_SETS; j++) {
            int64_t sz[TUNER_MAX_DIMS];
            set_sizes(&op, j, sz);
            char sd[512];
            snprintf(sd, sizeof(sd), "%s/s%d", dir, j);
            rc |= check_set(sd, &op, sz);
        }
        printf("\n");
        return rc;
    }
    const tuner_target tgt = {.sm = 80};
    tuner_space *sp = NULL;
    char *err = NULL;
    if (tuner_space_build(&op, &tgt, &sp, &err) < 0) {
        fprintf(stderr, "space: %s\n", err);
        return 2;
    }
    const size_t idx = (size_t)atoll(argv[3]);
    if (idx >= sp->n)
        return 3;
    tuner_program *pr = NULL;
    if (tuner_generate(&op, &tgt, &sp->items[idx], &pr, &err) < 0) {
        fprintf(stderr, "generate: %s\n", err);
        return 2;
    }
    snprintf(path, sizeof(path), "%s/kern.cu", dir);
    FILE *f = fopen(path, "w");
    const char *k = strstr(pr->source, "// ---- end of tuner/attn/mma helpers ----");
    k = k ? strchr(k, '\n') + 1 : pr->source;
    fputs(k, f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/launch.h", dir);
    f = fopen(path, "w");
    fprintf(f, "#define N_INPUTS %d\n#define N_LAUNCHES %d\n", op.n_inputs, pr->n_kernels);
    for (int l = 0; l < pr->n_kernels; l++) {
        const tuner_launch *L = &pr->kernels[l];
        fprintf(f, "static void call_%d() { %s(", l, L->name);
        for (int a = 0; a < L->n_args; a++) {
            const int b = L->args[a];
            if (b >= TUNER_ARG_DIM0)
                fprintf(f, "%sg_dims[%d]", a ? ", " : "", b - TUNER_ARG_DIM0);
            else if (b == TUNER_BUF_OUTPUT)
                fprintf(f, "%s(%s *)g_out", a ? ", " : "", tuner__ctype(op.output.dtype));
            else if (b == TUNER_BUF_WORKSPACE)
                fprintf(f, "%s(float *)g_ws", a ? ", " : "");
            else
                fprintf(f, "%s(const %s *)g_in[%d]", a ? ", " : "", tuner__ctype(op.inputs[b].dtype), b);
        }
        fprintf(f, "); }\n");
        fprintf(f, "static const Launch launch_%d = {call_%d, %u, %u};\n", l, l, L->block[0], L->shared_bytes);
    }
    fprintf(f, "static const Launch launches[] = {launch_0%s};\n", pr->n_kernels > 1 ? ", launch_1" : "");
    fclose(f);
    for (int j = 0; j < N_SETS; j++) {
        int64_t sz[TUNER_MAX_DIMS];
        set_sizes(&op, j, sz);
        char sd[512];
        snprintf(sd, sizeof(sd), "%s/s%d", dir, j);
        mkdir(sd, 0755);
        snprintf(path, sizeof(path), "%s/sizes.txt", sd);
        f = fopen(path, "w");
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
        for (int i = 0; i < op.n_inputs; i++)
            fprintf(f, "%lld ", numel_at(&op.inputs[i], sz) * tuner_dtype_size(op.inputs[i].dtype));
        fprintf(f, "\n%lld %d %zu\n", numel_at(&op.output, sz) * tuner_dtype_size(op.output.dtype), MARGIN,
                pr->workspace_bytes);
        fclose(f);
        /* q, k, v: small integers / 16 (exact in f16 and bf16); the mask: 0 or -2..-0.5. */
        t_rng_state = 7 + (uint64_t)j;
        for (int i = 0; i < op.n_inputs; i++) {
            const tuner_tensor *x = &op.inputs[i];
            const long long n = numel_at(x, sz);
            unsigned char *h = malloc((size_t)(n * tuner_dtype_size(x->dtype)) + 1);
            for (long long e = 0; e < n; e++)
                t_host_put(x->dtype, h, (size_t)e,
                           i < 3 ? (float)t_rnd_int(-16, 16) / 16.0f : (float)(t_rnd_int(0, 1) ? 0 : -t_rnd_int(2, 8)) / 4.0f);
            snprintf(path, sizeof(path), "%s/in%d.bin", sd, i);
            FILE *g = fopen(path, "wb");
            fwrite(h, 1, (size_t)(n * tuner_dtype_size(x->dtype)), g);
            fclose(g);
            free(h);
        }
    }
    char *sj = tuner_schedule_json(&sp->items[idx]);
    printf("%s\n", sj);
    free(sj);
    tuner_program_free(pr);
    tuner_space_free(sp);
    return 0;
}
