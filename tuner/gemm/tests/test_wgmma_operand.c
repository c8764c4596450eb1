/* tuner/gemm/tests/test_wgmma_operand.c - the wgmma templates' full-size epilogue operands loaded
 * by TMA into shared memory (wg_plan_x in tuner/gemm/wgmma.c), on the CPU (suite tuner_gemm).
 *
 * For ops whose epilogue reads an [M, N] operand (the SwiGLU gate silu(x.W) * up with edge tiles
 * in M and N; a batched bias + relu + residual add; a named M; stream-K; two operands; a
 * convolution's residual), every candidate of the space is
 * generated and its launch checked: each candidate whose operand tiles fit beside its ring and
 * staged output takes one more tensor map (the operand's, with the output's box and swizzle, a
 * named M marked as the output's), the rest keep today's global reads; split-K clusters never
 * take one. Operands that are not [M, N] tiles of the output's dtype with 16-byte rows (a bias
 * row, an f32 operand beside an f16 output, 200-byte rows, a gathered or grouped convolution's)
 * take none. A few candidates of each
 * kind (cooperative and pingpong; stage_out 0, 1 and 2; a cluster pair; stream-K) go through
 * NVRTC for sm_90a and ptxas. At an LLM size, the cost model's pick and tune:"none"'s default for
 * the SwiGLU gate load the operand tile.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/gemm/gemm.h"
#include "tuner/space.h"
#include "tuner/template.h"
#include "tuner/tests/common.h"

static const tuner_target sm90a = {.sm = 90, .arch_specific = true};

/* x [bt,] M x K . w [K, N] (f16/bf16, 16-byte aligned), then the SwiGLU gate's silu and a mul by
 * an operand of `rank` dims, shape (bt,) M x N, of dtype odt. */
static tuner_op swiglu(tuner_dtype dt, long long bt, long long M, long long N, long long K, tuner_dtype odt)
{
    tuner_op op = t_matmul(dt, bt, 0, M, N, K, false, false, 16);
    const int idx = op.n_inputs++;
    long long shape[3] = {bt, M, N};
    op.inputs[idx] = bt ? t_tensor(odt, 3, shape, 16) : t_tensor(odt, 2, shape + 1, 16);
    op.epilogue.steps[op.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_SILU, .operand = -1};
    op.epilogue.steps[op.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_MUL, .operand = idx};
    return op;
}

/* + bias [N], relu, + residual [bt, M, N] (or [M, N] with bt 0); A stored [K, M] with ta. */
static tuner_op bias_relu_residual(tuner_dtype dt, long long bt, long long M, long long N, long long K, bool ta)
{
    tuner_op op = t_matmul(dt, bt, 0, M, N, K, ta, false, 16);
    long long bias[1] = {N};
    t_add_epilogue(&op, TUNER_EW_ADD, 1, bias, TUNER_EW_RELU);
    const int idx = op.n_inputs++;
    long long shape[3] = {bt, M, N};
    op.inputs[idx] = bt ? t_tensor(dt, 3, shape, 16) : t_tensor(dt, 2, shape + 1, 16);
    op.epilogue.steps[op.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_ADD, .operand = idx};
    return op;
}

/* An NHWC convolution x [n, h, w, c] * w [k, r, r, c / groups] (stride 1, padding r / 2), then +
 * bias [k], relu, + a residual of the output's shape. */
static tuner_op conv_residual(tuner_dtype dt, long long n, long long hw, long long c, long long k, int r, int groups)
{
    tuner_op op = t_conv_nhwc(dt, n, hw, hw, c, k, r, 1, r / 2, groups);
    long long bias[1] = {k};
    t_add_epilogue(&op, TUNER_EW_ADD, 1, bias, TUNER_EW_RELU);
    const int idx = op.n_inputs++;
    op.inputs[idx] = op.output;
    op.inputs[idx].align = 16;
    op.epilogue.steps[op.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_ADD, .operand = idx};
    return op;
}

/* The SwiGLU gate with a named M: a [n, K], up and the output [n, N], n in [1, max]. */
static tuner_op swiglu_named(long long max, long long N, long long K)
{
    tuner_op op = swiglu(TUNER_F16, 0, max, N, K, TUNER_F16);
    memset(&op.dims[0], 0, sizeof(op.dims[0]));
    snprintf(op.dims[0].name, sizeof(op.dims[0].name), "%s", "n");
    op.dims[0].min = 1;
    op.dims[0].max = max;
    op.dims[0].multiple_of = 1;
    op.n_dims = 1;
    op.inputs[0].sym[0] = 1;
    op.inputs[2].sym[0] = 1;
    op.output.sym[0] = 1;
    return op;
}

typedef struct ocase {
    const char *name;
    tuner_op op;
    int input;       /* the operand expected in shared memory, or -1 for none */
    bool batched;    /* ... with a batch dimension in its map */
    int compile;     /* candidates compiled: the first of each of this many kinds (is_kind) */
    int first_kind;  /* ... from this one */
} ocase;

/* A's (unless a convolution gathers it), B's and, staged, the output's. */
static int maps_without_x(const tuner_schedule *s, const tuner_program *pr)
{
    return 1 + (strstr(pr->source, "wg_map_a") != NULL) + (tuner_schedule_param(s, "stage_out", 0) > 0);
}

/* The kinds of candidate compiled, in turn from a case's first_kind: pingpong with staged
 * output, pingpong storing from registers, cooperative staged in halves, cooperative from
 * registers, a cluster pair, stream-K, pingpong in halves, cooperative staged whole, the
 * operand loaded into the staged output tile (its storer frees the slot after its store). */
#define N_KINDS 9
static const char in_out_free[] = "asm volatile(\"cp.async.bulk.wait_group.read 0;\" ::: \"memory\");\nwg_arrive(";
static bool is_kind(const tuner_schedule *s, const char *src, int k)
{
    if (k == 8)
        return strstr(src, in_out_free) != NULL;
    const int pp = tuner_schedule_param(s, "pingpong", 0), so = tuner_schedule_param(s, "stage_out", 0);
    const bool pair = tuner_schedule_param(s, "cluster", 1) == 2, sk = tuner_schedule_param(s, "stream_k", 0) == 1;
    if (pair || sk)
        return (k == 4 && pair) || (k == 5 && sk);
    static const int want_pp[N_KINDS] = {1, 1, 0, 0, -1, -1, 1, 0, -1}, want_so[N_KINDS] = {1, 0, 2, 0, -1, -1, 2, 1, -1};
    return want_pp[k] == pp && want_so[k] == so;
}

static void run_case(const ocase *oc)
{
    tuner_space *sp = NULL;
    char *err = NULL;
    CHECK(tuner_space_build(&oc->op, &sm90a, &sp, &err) == 0 && sp, "%s: space: %s", oc->name, err ? err : "");
    free(err);
    if (!sp)
        return;
    int n = 0, with_x = 0, split = 0, swapped = 0, compiled = 0, two = 0;
    bool done[N_KINDS] = {false};
    for (size_t i = 0; i < sp->n; i++) {
        const tuner_schedule *s = &sp->items[i];
        if (!strstr(s->template_name, "_wgmma"))
            continue;
        n++;
        /* Swapped tiles read operands per element (their tile is the output's transpose). */
        swapped += tuner_schedule_param(s, "swap", 0) == 1;
        tuner_program *pr = NULL;
        err = NULL;
        const int rc = tuner_generate(&oc->op, &sm90a, s, &pr, &err);
        CHECK(rc == 0, "%s: generate: %s", oc->name, err ? err : "");
        free(err);
        if (rc < 0)
            continue;
        const tuner_launch *l = &pr->kernels[pr->n_kernels - 1];
        const int base = maps_without_x(s, pr);
        const bool x = l->n_maps > base;
        CHECK(l->n_maps == base || l->n_maps == base + 1 || (l->n_maps == base + 2 && base == 2), "%s: %d maps for %d",
              oc->name, l->n_maps, base);
        if (l->n_maps == base + 2) {
            two++;
            CHECK(strstr(pr->source, "wg_map_x1") && l->maps[base + 1].buf == TUNER_BUF_INPUT0 + oc->input + 1,
                  "%s: the second operand tile's map", oc->name);
        }
        CHECK(x == (strstr(pr->source, "wg_map_x0") != NULL), "%s: map and source disagree", oc->name);
        if (tuner_schedule_param(s, "split_k", 1) > 1) {
            split++;
            CHECK(!x, "%s: a split-K cluster loads an operand tile", oc->name);
        }
        if (x) {
            with_x++;
            CHECK(oc->input >= 0, "%s: an operand tile where none applies", oc->name);
            const tuner_tmap *m = &l->maps[base];
            const tuner_tensor *t = &oc->op.inputs[oc->input], *o = &oc->op.output;
            char why[128] = "", field[32] = "";
            CHECK(tuner_tmap_check(m, why, sizeof(why), field, sizeof(field)) == 0, "%s: operand map: %s: %s",
                  oc->name, field, why);
            const int bm = tuner_schedule_param(s, "block_m", 0);
            const bool conv = oc->op.kind == TUNER_OP_CONV2D;
            CHECK(m->buf == TUNER_BUF_INPUT0 + oc->input && m->dtype == t->dtype && m->swizzle == 128 &&
                      m->mode == TUNER_TMAP_TILED && m->rank == (oc->batched ? 3 : 2) &&
                      m->dims[0] == (uint64_t)o->shape[o->rank - 1] &&
                      m->dims[1] == (uint64_t)(conv ? o->shape[0] * o->shape[1] * o->shape[2] : o->shape[o->rank - 2]) &&
                      m->box[0] * (uint32_t)tuner_dtype_size(t->dtype) == 128 && m->box[1] == (uint32_t)bm,
                  "%s: operand map (rank %d, dims %llu x %llu, box %u x %u)", oc->name, m->rank,
                  (unsigned long long)m->dims[0], (unsigned long long)m->dims[1], m->box[0], m->box[1]);
            /* A named M: the operand's rows follow it, as the output's do. */
            if (oc->op.n_dims)
                CHECK(m->sym[1] == 1 && m->sym_coef[1] == 1 && l->maps[0].sym[1] == 1,
                      "%s: the operand map's M is not the launch's", oc->name);
            /* The epilogue reads it from shared memory, not global memory. */
            char glob[16];
            snprintf(glob, sizeof(glob), "in%d[", oc->input);
            CHECK(!strstr(pr->source, glob), "%s: the operand is still read from global memory", oc->name);
            CHECK(l->shared_bytes <= 232448 - 16 * 14, "%s: %u bytes of shared memory", oc->name, l->shared_bytes);
        }
        int k = -1;
        for (int q = 0; q < oc->compile && k < 0; q++)
            if (!done[(oc->first_kind + q) % N_KINDS] && is_kind(s, pr->source, (oc->first_kind + q) % N_KINDS))
                k = (oc->first_kind + q) % N_KINDS;
        if (k >= 0 && (x || oc->input < 0)) {
            done[k] = true;
            compiled++;
            char what[200];
            snprintf(what, sizeof(what), "%s %s", oc->name, l->name);
            CHECK(t_compile_check(what, pr->source, &sm90a, pr, NULL), "%s: does not compile", what);
            /* TWO_SRC=<dir>: the compiled sources, for reading. */
            const char *dir = getenv("TWO_SRC");
            if (dir) {
                char path[512];
                snprintf(path, sizeof(path), "%s/%s__%s.cu", dir, oc->name, l->name);
                FILE *f = fopen(path, "w");
                if (f) {
                    fputs(pr->source, f);
                    fclose(f);
                }
            }
        }
        tuner_program_free(pr);
    }
    printf("%s: %d wgmma candidates, %d with the operand tile, %d split-K, %d swapped, %d compiled\n", oc->name, n,
           with_x, split, swapped, compiled);
    CHECK(n >= 20, "%s: %d candidates", oc->name, n);
    if (oc->input >= 0)
        CHECK(with_x * 2 >= n - split - swapped, "%s: only %d of %d candidates load the operand tile", oc->name, with_x,
              n - split - swapped);
    /* Two operand tiles where the op has two full-size operands and no output map is staged. */
    const bool two_ops = oc->input >= 0 && oc->input + 1 < oc->op.n_inputs;
    CHECK(two_ops ? two > 0 : two == 0, "%s: %d candidates with two operand tiles", oc->name, two);
    tuner_space_free(sp);
}

/* At LLM sizes the model ranks first a schedule that loads the gate's operand by TMA. */
static void test_rank(void)
{
    tuner_op op = swiglu(TUNER_F16, 0, 4096, 11008, 4096, TUNER_F16);
    tuner_space *sp = NULL;
    CHECK(tuner_space_build(&op, &sm90a, &sp, NULL) == 0 && sp && sp->n > 0, "swiglu space");
    if (!sp)
        return;
    size_t *order = malloc(sp->n * sizeof(*order));
    double *pred = malloc(sp->n * sizeof(*pred));
    tuner_rank(&op, &sm90a, sp, order, pred);
    for (size_t r = 0; r < 6 && r < sp->n; r++) {
        char name[96];
        tuner__gemm_kernel_name(name, sizeof(name), sp->items[order[r]].template_name, &sp->items[order[r]]);
        printf("  #%zu %s %.1f us\n", r, name, pred[order[r]]);
    }
    for (size_t r = 0; r < sp->n; r++)
        if (tuner_schedule_param(&sp->items[order[r]], "block_n", 0) == 256) {
            char name[96];
            tuner__gemm_kernel_name(name, sizeof(name), sp->items[order[r]].template_name, &sp->items[order[r]]);
            printf("  the first 128x256: #%zu %s %.1f us\n", r, name, pred[order[r]]);
            break;
        }
    const tuner_schedule *best = &sp->items[order[0]];
    tuner_program *pr = NULL;
    CHECK(tuner_generate(&op, &sm90a, best, &pr, NULL) == 0, "generate the pick");
    if (pr) {
        const tuner_launch *l = &pr->kernels[pr->n_kernels - 1];
        printf("swiglu 4096x11008x4096: the pick %s (%.1f us predicted), %d maps\n", l->name, pred[order[0]], l->n_maps);
        CHECK(!strcmp(best->template_name, "matmul_wgmma") && l->n_maps == maps_without_x(best, pr) + 1,
              "the pick %s does not load the operand tile", l->name);
        tuner_program_free(pr);
    }
    /* So does tune:"none"'s default. */
    const tuner_schedule *def = &sp->items[tuner_default_index(&op, &sm90a, sp)];
    pr = NULL;
    CHECK(tuner_generate(&op, &sm90a, def, &pr, NULL) == 0, "generate the default");
    if (pr) {
        const tuner_launch *l = &pr->kernels[pr->n_kernels - 1];
        printf("swiglu 4096x11008x4096: the default %s, %d maps\n", l->name, l->n_maps);
        CHECK(!strcmp(def->template_name, "matmul_wgmma") && l->n_maps == maps_without_x(def, pr) + 1,
              "the default %s does not load the operand tile", l->name);
        tuner_program_free(pr);
    }
    free(order);
    free(pred);
    tuner_space_free(sp);
}

int main(void)
{
    ocase cases[] = {
        /* Edge tiles in M and N (333 x 200), a short K. */
        {"f16_swiglu_333x200x136", swiglu(TUNER_F16, 0, 333, 200, 136, TUNER_F16), 2, false, 4, 0},
        /* A batched output and residual, after a bias row and relu. */
        {"bf16_b2_bias_relu_residual_200x264x768", bias_relu_residual(TUNER_BF16, 2, 200, 264, 768, false), 3, true, 1, 4},
        /* One operand for every batch entry: a 2-D map. */
        {"f16_b3_swiglu_shared_up_136x128x64", swiglu(TUNER_F16, 3, 136, 128, 64, TUNER_F16), 2, false, 1, 8},
        /* A named M. */
        {"f16_named_swiglu_n300x256x128", swiglu_named(300, 256, 128), 2, false, 1, 6},
        /* Keep the global path: an f32 operand beside an f16 output; 200-byte rows. */
        {"f16_swiglu_f32_up", swiglu(TUNER_F16, 0, 256, 256, 128, TUNER_F32), -1, false, 0, 0},
        {"f16_nt_swiglu_n100", swiglu(TUNER_F16, 0, 256, 100, 128, TUNER_F16), -1, false, 0, 0},
        /* An fp32 output read with an fp32 [M, N] operand. */
        {"f16_f32out_swiglu_f32_up", swiglu(TUNER_F16, 0, 200, 96, 128, TUNER_F32), 2, false, 1, 0},
        /* Stream-K (its tiles fewer than the SMs): M-major A, a batch, edges in M and N. */
        {"f16_ta_b2_residual_304x1000x1024", bias_relu_residual(TUNER_F16, 2, 304, 1000, 1024, true), 3, true, 1, 5},
        /* A ResNet block's 3x3 convolution with its residual (A by im2col maps), a 1x1 one (A
         * dense); none where the producer warpgroup gathers A (32 channels) or with groups. */
        {"f16_conv3x3_residual_2x14x14x64", conv_residual(TUNER_F16, 2, 14, 64, 64, 3, 1), 3, false, 1, 0},
        {"bf16_conv1x1_residual_2x7x7x128_k256", conv_residual(TUNER_BF16, 2, 7, 128, 256, 1, 1), 3, false, 1, 7},
        {"f16_conv3x3_gather_residual_c32", conv_residual(TUNER_F16, 2, 14, 32, 64, 3, 1), -1, false, 0, 0},
        {"f16_gconv3x3_residual_g2", conv_residual(TUNER_F16, 2, 14, 128, 128, 3, 2), -1, false, 0, 0},
        /* The SwiGLU gate, then + a residual: two operand tiles. */
        {"bf16_swiglu_res_256x192x128", swiglu(TUNER_BF16, 0, 256, 192, 128, TUNER_BF16), 2, false, 1, 1},
    };
    /* An fp32 output and operand (f16 inputs). */
    cases[6].op.output.dtype = TUNER_F32;
    /* Two full-size operands: both in shared memory where no output map takes the fourth
     * tensor-map slot (stage_out 0). */
    {
        tuner_op *two = &cases[sizeof(cases) / sizeof(cases[0]) - 1].op; /* the last case */
        const int idx = two->n_inputs++;
        two->inputs[idx] = t_tensor(TUNER_BF16, 2, (long long[]){256, 192}, 16);
        two->epilogue.steps[two->epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_ADD, .operand = idx};
    }
    /* The shared operand: [M, N] beside a [3, M, N] output. */
    cases[2].op.inputs[2] = t_tensor(TUNER_F16, 2, (long long[]){136, 128}, 16);
    /* N = 100 with B [N, K] (K-major: TMA-addressable), whose output rows are 200 bytes. */
    cases[5].op.attrs.matmul.trans_b = true;
    cases[5].op.inputs[1] = t_tensor(TUNER_F16, 2, (long long[]){100, 128}, 16);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        run_case(&cases[i]);
    test_rank();
    if (t_failures) {
        fprintf(stderr, "%d failure(s)\n", (int)t_failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
