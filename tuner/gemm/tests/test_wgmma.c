/* tuner/gemm/tests/test_wgmma.c - the Hopper templates matmul_wgmma and conv2d_wgmma on the CPU
 * (suite tuner_gemm).
 *
 * The spaces exist on sm_90a only and only where TMA can address the operands (for a
 * convolution: NHWC, 16-byte channel chunks per group); the cost model ranks them above mma.sync
 * for large problems; every candidate of the space (or every few), for shapes that cover both
 * dtypes, every transpose, batches with a broadcast operand, groups, strides, edge tiles in M, N
 * and K and fused epilogues, is generated, compiled by NVRTC for sm_90a (which assembles it with
 * ptxas in-process; the toolkit's ptxas -arch=sm_90a checks each case's first candidate again),
 * and its PTX holds the instructions the template is built on.
 *
 * `test_tuner_wgmma --checks` runs the checks that compile nothing (spaces, defaults, ranking),
 * `--shard K/N` compiles the K-th of N interleaved shares of the candidates (meson runs both kinds
 * side by side: tuner_wgmma_checks and four shards; no argument: everything), and
 * HIDET_TEST_SAMPLE=S compiles one candidate of S per case and only generates and checks the
 * source of the others (the sanitizer build's registration): tuner/tests/common.h.
 *
 * TWG_CASES=<names> (comma-separated) compiles only those cases' candidates. With TWG_DUMP=<dir>
 * nothing is checked: the programs of a few cases (TWG_CASES, a
 * comma-separated list of case names; default all) are written there as <tag>.cubin and
 * <tag>.launch for running on a GPU elsewhere (bench/wgmma_probe.py).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tuner/gemm/gemm.h"
#include "tuner/template.h"
#include "tuner/tests/common.h"

/* Matmuls with 16-byte aligned operands, the rows TMA needs. */
static tuner_op mm(tuner_dtype dt, long long bt_a, long long bt_b, long long M, long long N, long long K, bool ta,
                   bool tb)
{
    return t_matmul(dt, bt_a, bt_b, M, N, K, ta, tb, 16);
}

static const tuner_target sm90a = {.sm = 90, .arch_specific = true};

/* Candidates of template tmpl in op's space (with ret_staged, how many stage their output),
 * stream-K ones, N pairs and swapped operands left out: whether those exist depends on the tile
 * counts and M (test_stream_k_space, test_pair_n_space, test_swap_space). */
static size_t count_staged(const tuner_op *op, const tuner_target *t, const char *tmpl, size_t *ret_staged)
{
    tuner_space *sp = NULL;
    char *err = NULL;
    size_t n = 0, staged = 0;
    if (tuner_space_build(op, t, &sp, &err) == 0) {
        for (size_t i = 0; i < sp->n; i++)
            if (strcmp(sp->items[i].template_name, tmpl) == 0 && !tuner_schedule_param(&sp->items[i], "stream_k", 0) &&
                tuner_schedule_param(&sp->items[i], "cluster_n", 1) == 1 && !tuner_schedule_param(&sp->items[i], "swap", 0)) {
                n++;
                staged += tuner_schedule_param(&sp->items[i], "stage_out", 0) != 0;
            }
        tuner_space_free(sp);
    }
    free(err);
    if (ret_staged)
        *ret_staged = staged;
    return n;
}

static size_t count(const tuner_op *op, const tuner_target *t, const char *tmpl)
{
    return count_staged(op, t, tmpl, NULL);
}

/* Candidates of template tmpl that stage their output in halves; every one of them has an even
 * number of output boxes and a ring the whole staged tile would not fit beside. */
static size_t count_halves(const tuner_op *op, const tuner_target *t, const char *tmpl)
{
    tuner_space *sp = NULL;
    size_t n = 0;
    if (tuner_space_build(op, t, &sp, NULL) < 0)
        return 0;
    for (size_t i = 0; i < sp->n; i++) {
        const tuner_schedule *s = &sp->items[i];
        if (strcmp(s->template_name, tmpl) || tuner_schedule_param(s, "stage_out", 0) != 2)
            continue;
        n++;
        const int bm = tuner_schedule_param(s, "block_m", 0), bn = tuner_schedule_param(s, "block_n", 0);
        const int st = tuner_schedule_param(s, "stages", 0), tiles = tuner_schedule_param(s, "pingpong", 0) ? 2 : 1;
        const int whole = st * (bm + bn) * 128 + 1024 + tiles * bm * bn * 2 + 16 * st;
        CHECK((bn / 64) % 2 == 0 && whole > 232448, "halves of %dx%d with %d stages", bm, bn, st);
    }
    tuner_space_free(sp);
    return n;
}

static void test_space(void)
{
    tuner_op op = mm(TUNER_F16, 0, 0, 4096, 4096, 4096, false, false);
    size_t n = count(&op, &sm90a, "matmul_wgmma");
    printf("space sm_90a f16 4096^3: matmul_wgmma %zu\n", n);
    CHECK(n >= 30 && n <= 300, "matmul_wgmma space size %zu on sm_90a", n);
    op = mm(TUNER_BF16, 0, 0, 4096, 4096, 4096, true, true);
    CHECK(count(&op, &sm90a, "matmul_wgmma") == n, "bf16 transposed space differs");
    for (int sm = 80; sm <= 90; sm += 10) {
        tuner_target t = {.sm = sm};
        op = mm(TUNER_F16, 0, 0, 4096, 4096, 4096, false, false);
        CHECK(count(&op, &t, "matmul_wgmma") == 0, "matmul_wgmma offered on sm_%d", sm);
    }
    /* fp32, a prologue: none (rows TMA cannot address: test_unaligned_space). */
    /* Odd M and N with K-major operands: offered, but output rows of 99 elements are no TMA
     * rows, so nothing is staged. */
    size_t staged = 0, n_odd;
    op = mm(TUNER_F16, 0, 0, 77, 99, 64, false, true);
    n_odd = count_staged(&op, &sm90a, "matmul_wgmma", &staged);
    CHECK(n_odd >= 30 && staged == 0, "77x99x64 nt: %zu candidates, %zu staged", n_odd, staged);
    op = mm(TUNER_F16, 0, 0, 4096, 4096, 4096, false, false);
    CHECK(count_staged(&op, &sm90a, "matmul_wgmma", &staged) == n && staged >= 20 && n - staged == n_odd,
          "4096^3: %zu staged of %zu", staged, n);
    /* 128x256 and 256x128 with 4-deep rings stage their output in halves. */
    const size_t halves = count_halves(&op, &sm90a, "matmul_wgmma");
    CHECK(halves >= 4, "4096^3: %zu candidates staged in halves", halves);
    op = mm(TUNER_F32, 0, 0, 256, 256, 256, false, false);
    CHECK(count(&op, &sm90a, "matmul_wgmma") == 0, "fp32 offered");
    op = mm(TUNER_F16, 0, 0, 256, 256, 256, false, false);
    long long ks[1] = {256};
    t_add_prologue(&op, TUNER_EW_MUL, 1, ks, TUNER_EW_RELU);
    CHECK(count(&op, &sm90a, "matmul_wgmma") == 0, "prologue offered");
}

/* Operands whose rows (or base) are not 16-byte aligned are gathered by the producer warpgroup:
 * offered in every layout, without CTA pairs or pingpong, with at most 8 gathered chunks per
 * producer thread beside two consumers (12 beside one); not for a convolution. */
static void test_unaligned_space(void)
{
    static const struct {
        long long M, N, K;
        bool ta, tb;
        int align;
    } shapes[] = {{64, 64, 100, false, false, 16},    {64, 100, 64, false, false, 16},  {2999, 4001, 1537, false, false, 16},
                  {4095, 4096, 4095, true, true, 16}, {1024, 1024, 1024, false, false, 2}};
    for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
        tuner_op op = t_matmul(TUNER_F16, 0, 0, shapes[k].M, shapes[k].N, shapes[k].K, shapes[k].ta, shapes[k].tb,
                               shapes[k].align);
        tuner_space *sp = NULL;
        CHECK(tuner_space_build(&op, &sm90a, &sp, NULL) == 0, "unaligned %lldx%lldx%lld: no space", shapes[k].M,
              shapes[k].N, shapes[k].K);
        size_t n = 0;
        for (size_t i = 0; sp && i < sp->n; i++) {
            const tuner_schedule *s = &sp->items[i];
            if (strcmp(s->template_name, "matmul_wgmma"))
                continue;
            n++;
            const int bm = tuner_schedule_param(s, "block_m", 0), bn = tuner_schedule_param(s, "block_n", 0);
            const int cons = tuner_schedule_param(s, "consumers", 0);
            /* Chunks per producer thread: 16-row slices of each gathered operand's tile. */
            const bool ga = shapes[k].ta ? shapes[k].M % 8 : shapes[k].K % 8 || shapes[k].align < 16;
            const bool gb = shapes[k].tb ? shapes[k].K % 8 : shapes[k].N % 8 || shapes[k].align < 16;
            const int chunks = (ga ? bm / 16 : 0) + (gb ? bn / 16 : 0);
            CHECK(!tuner_schedule_param(s, "pingpong", 0) && tuner_schedule_param(s, "cluster", 1) == 1 &&
                      tuner_schedule_param(s, "cluster_n", 1) == 1 && chunks <= (cons == 2 ? 8 : 12),
                  "unaligned %lldx%lldx%lld: %dx%d c%d (%d chunks) pingpong/pair offered", shapes[k].M, shapes[k].N,
                  shapes[k].K, bm, bn, cons, chunks);
            /* An odd N leaves no 16-byte output rows to stage. */
            if (shapes[k].N % 8)
                CHECK(!tuner_schedule_param(s, "stage_out", 0), "odd N staged");
        }
        printf("unaligned %lldx%lldx%lld%s%s align %d: matmul_wgmma %zu\n", shapes[k].M, shapes[k].N, shapes[k].K,
               shapes[k].ta ? " ta" : "", shapes[k].tb ? " tb" : "", shapes[k].align, n);
        CHECK(n >= 20, "unaligned %lldx%lldx%lld: %zu matmul_wgmma candidates", shapes[k].M, shapes[k].N, shapes[k].K, n);
        tuner_space_free(sp);
    }
    /* A convolution's channels must still allow 16-byte chunks. */
    tuner_op conv = t_conv_nhwc(TUNER_F16, 2, 9, 9, 36, 64, 3, 1, 1, 1);
    CHECK(count(&conv, &sm90a, "conv2d_wgmma") == 0, "conv2d with 36 channels offered");
}

/* conv2d_wgmma: offered on sm_90a for NHWC convolutions with 8-channel groups, nowhere else. */
static void test_conv_space(void)
{
    tuner_op op = t_conv_nhwc(TUNER_F16, 32, 56, 56, 64, 64, 3, 1, 1, 1);
    size_t n = count(&op, &sm90a, "conv2d_wgmma");
    printf("space sm_90a f16 conv 3x3 64->64 @56 N=32: conv2d_wgmma %zu\n", n);
    CHECK(n >= 30 && n <= 300, "conv2d_wgmma space size %zu on sm_90a", n);
    CHECK(count(&op, &sm90a, "matmul_wgmma") == 0, "matmul_wgmma offered for a conv");
    op = mm(TUNER_F16, 0, 0, 4096, 4096, 4096, false, false);
    CHECK(count(&op, &sm90a, "conv2d_wgmma") == 0, "conv2d_wgmma offered for a matmul");
    for (int sm = 80; sm <= 90; sm += 10) {
        const tuner_target t = {.sm = sm};
        op = t_conv_nhwc(TUNER_F16, 32, 56, 56, 64, 64, 3, 1, 1, 1);
        CHECK(count(&op, &t, "conv2d_wgmma") == 0, "conv2d_wgmma offered on sm_%d", sm);
    }
    op = t_conv_nhwc(TUNER_BF16, 3, 13, 11, 32, 48, 3, 2, 1, 2); /* 16 channels per group */
    CHECK(count(&op, &sm90a, "conv2d_wgmma") >= 30, "grouped conv (16 per group) not offered");
    op = t_conv_nhwc(TUNER_F16, 2, 28, 28, 96, 96, 3, 1, 1, 96); /* depthwise: conv2d_direct's */
    CHECK(count(&op, &sm90a, "conv2d_wgmma") == 0, "depthwise offered");
    op = t_conv_nhwc(TUNER_F16, 1, 17, 17, 12, 16, 3, 1, 1, 1); /* 24-byte pixels */
    CHECK(count(&op, &sm90a, "conv2d_wgmma") == 0, "C = 12 offered");
    op = t_conv_nhwc(TUNER_F16, 2, 28, 28, 64, 64, 3, 1, 1, 1);
    op.attrs.conv2d.nchw = true; /* the same conv as x [2,64,28,28], w [64,64,3,3] */
    const int64_t x_nchw[4] = {2, 64, 28, 28}, w_nchw[4] = {64, 64, 3, 3};
    memcpy(op.inputs[0].shape, x_nchw, sizeof(x_nchw));
    memcpy(op.inputs[1].shape, w_nchw, sizeof(w_nchw));
    memcpy(op.output.shape, x_nchw, sizeof(x_nchw));
    CHECK(count(&op, &sm90a, "conv2d_wgmma") == 0 && count(&op, &sm90a, "conv2d_mma") > 0, "NCHW offered");
}

/* The tune:"none" schedule of op's space for sm_90 or sm_90a (template NULL when the space
 * could not be built). Template and parameter names are static strings: the copy outlives the
 * space. */
static tuner_schedule default_schedule(const tuner_op *op, bool arch_specific)
{
    const tuner_target t = {.sm = 90, .arch_specific = arch_specific};
    tuner_schedule d = {.template_name = NULL};
    tuner_space *sp = NULL;
    CHECK(tuner_space_build(op, &t, &sp, NULL) == 0, "space");
    if (sp) {
        d = sp->items[tuner_default_index(op, &t, sp)];
        tuner_space_free(sp);
    }
    return d;
}

/* The template of the cost model's best candidate for op on sm_90a ("" when none), its
 * prediction in *us. */
static const char *model_best(const tuner_op *op, double *us)
{
    tuner_space *sp = NULL;
    char *err = NULL;
    const char *best = "";
    CHECK(tuner_space_build(op, &sm90a, &sp, &err) == 0, "space: %s", err ? err : "");
    free(err);
    size_t *order = sp ? calloc(sp->n, sizeof(*order)) : NULL;
    double *pred = sp ? calloc(sp->n, sizeof(*pred)) : NULL;
    if (order && pred) {
        tuner_rank(op, &sm90a, sp, order, pred);
        best = sp->items[order[0]].template_name;
        *us = pred[order[0]];
    }
    free(order);
    free(pred);
    tuner_space_free(sp);
    return best;
}

/* Large f16 GEMMs with an odd K or N (issue 40's class, none of its shapes): the model's
 * choices and tune:"none" for each, printed against matmul_mma's best. With one operand
 * gathered (odd K, B [K, N] aligned) the gather hides behind large tiles' wgmma: the default and
 * the model's best are matmul_wgmma, the default within 10% of the best, and so with an odd N
 * (B [K, N] gathered, the output stored from registers); with both gathered the gather shows
 * and tune:"none" keeps matmul_mma (wg_preferred_gathered). */
static void test_unaligned_default(void)
{
    static const struct {
        long long M, N, K;
        bool ta, tb, wgmma;
    } shapes[] = {{4096, 4096, 4095, false, false, true}, {3001, 4096, 2047, false, false, true},
                  {4096, 4095, 4096, false, false, true}, {2999, 4001, 1537, false, false, false},
                  {4095, 2048, 3071, true, true, false}};
    for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
        tuner_op op = t_matmul(TUNER_F16, 0, 0, shapes[k].M, shapes[k].N, shapes[k].K, shapes[k].ta, shapes[k].tb, 16);
        double us = 0;
        const char *best = model_best(&op, &us);
        tuner_schedule d = default_schedule(&op, true);
        double dus = tuner_predict_us(&op, &sm90a, &d), mma_us = 1e12;
        tuner_space *sp = NULL;
        if (tuner_space_build(&op, &sm90a, &sp, NULL) == 0) {
            for (size_t i = 0; i < sp->n; i++)
                if (!strcmp(sp->items[i].template_name, "matmul_mma")) {
                    const double m = tuner_predict_us(&op, &sm90a, &sp->items[i]);
                    mma_us = m < mma_us ? m : mma_us;
                }
            tuner_space_free(sp);
        }
        printf("unaligned %lldx%lldx%lld%s%s: model best %s %.1f us (matmul_mma %.1f), default %s %dx%d c%d %d stages "
               "%.1f us\n",
               shapes[k].M, shapes[k].N, shapes[k].K, shapes[k].ta ? " ta" : "", shapes[k].tb ? " tb" : "", best, us, mma_us,
               d.template_name ? d.template_name : "-", tuner_schedule_param(&d, "block_m", 0),
               tuner_schedule_param(&d, "block_n", 0), tuner_schedule_param(&d, "consumers", 0),
               tuner_schedule_param(&d, "stages", 0), dus);
        CHECK(d.template_name && !strcmp(d.template_name, shapes[k].wgmma ? "matmul_wgmma" : "matmul_mma"),
              "unaligned %lldx%lldx%lld: default %s", shapes[k].M, shapes[k].N, shapes[k].K,
              d.template_name ? d.template_name : "-");
        if (shapes[k].wgmma)
            CHECK(!strcmp(best, "matmul_wgmma") && dus <= 1.1 * us, "unaligned %lldx%lldx%lld: default %.1f us, model best %s %.1f",
                  shapes[k].M, shapes[k].N, shapes[k].K, dus, best, us);
    }
}

/* A convolution's default on sm_90a is conv2d_wgmma (conv2d_mma on sm_90), with block_n no
 * wider than the output channels, and so is the model's choice for the 3x3 layers (a 1x1 layer
 * is DRAM-bound: both templates predict the same floor). */
static void test_conv_default(void)
{
    static const long long layers[][5] = {
        /* c, k, hw, r, block_n wanted */
        {64, 64, 56, 3, 64}, {128, 128, 28, 3, 128}, {256, 256, 14, 3, 256}, {512, 512, 7, 3, 128}, {256, 64, 56, 1, 64},
    };
    for (size_t k = 0; k < sizeof(layers) / sizeof(layers[0]); k++) {
        tuner_op op = t_conv_nhwc(TUNER_F16, 32, layers[k][2], layers[k][2], layers[k][0], layers[k][1],
                                  (int)layers[k][3], 1, (int)layers[k][3] / 2, 1);
        tuner_schedule d = default_schedule(&op, false);
        CHECK(d.template_name && !strcmp(d.template_name, "conv2d_mma"), "sm_90 conv default %s",
              d.template_name ? d.template_name : "?");
        d = default_schedule(&op, true);
        CHECK(d.template_name && !strcmp(d.template_name, "conv2d_wgmma") &&
                  tuner_schedule_param(&d, "block_n", 0) == layers[k][4],
              "conv %lld->%lld @%lld: default %s block_n %d", layers[k][0], layers[k][1], layers[k][2],
              d.template_name ? d.template_name : "?", tuner_schedule_param(&d, "block_n", 0));
        if (layers[k][3] == 3) {
            double us = 0;
            const char *best = model_best(&op, &us);
            printf("conv %lld->%lld @%lld: model best %s %.1f us\n", layers[k][0], layers[k][1], layers[k][2], best,
                   us);
            CHECK(!strcmp(best, "conv2d_wgmma"), "conv model best %s", best);
        }
    }
}

/* tune:"none" on sm_90a is the wgmma template, by shape; sm_90 keeps mma.sync. */
static void test_default(void)
{
    static const struct {
        long long m, n, k;
        int bm, bn, st, cons, so;
    } want[] = {
        {4096, 4096, 4096, 128, 256, 4, 2, 2}, /* output staged in halves beside a 4-deep ring */
        {4096, 3072, 768, 128, 128, 4, 2, 1},
        {4096, 768, 3072, 128, 192, 4, 2, 1}, /* 128 tiles of 128x192 fill 132 SMs, 192 of 128x128 do not */
        {1000, 1000, 1000, 64, 128, 4, 1, 1},
        {1000, 1001, 1000, 64, 128, 4, 1, 0}, /* N = 1001 with B [N,K]: rows of no TMA store */
    };
    for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
        tuner_op op = mm(TUNER_F16, 0, 0, want[k].m, want[k].n, want[k].k, false, want[k].n % 8 != 0);
        tuner_schedule d = default_schedule(&op, false);
        CHECK(d.template_name && !strcmp(d.template_name, "matmul_mma"), "sm_90 default %s",
              d.template_name ? d.template_name : "?");
        d = default_schedule(&op, true);
        CHECK(d.template_name && !strcmp(d.template_name, "matmul_wgmma") &&
                  tuner_schedule_param(&d, "block_m", 0) == want[k].bm &&
                  tuner_schedule_param(&d, "block_n", 0) == want[k].bn &&
                  tuner_schedule_param(&d, "stages", 0) == want[k].st &&
                  tuner_schedule_param(&d, "consumers", 0) == want[k].cons &&
                  tuner_schedule_param(&d, "stage_out", -1) == want[k].so,
              "%lldx%lldx%lld: default %s %d x %d", want[k].m, want[k].n, want[k].k,
              d.template_name ? d.template_name : "?", tuner_schedule_param(&d, "block_m", 0),
              tuner_schedule_param(&d, "block_n", 0));
    }
}

/* The model ranks a wgmma candidate first for large GEMMs (tune:"model" picks it). */
static void test_rank(void)
{
    static const long long shapes[][3] = {{4096, 4096, 4096}, {8192, 8192, 8192}, {4096, 3072, 768}};
    for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
        tuner_op op = mm(TUNER_F16, 0, 0, shapes[k][0], shapes[k][1], shapes[k][2], false, false);
        double us = 0;
        const char *best = model_best(&op, &us);
        printf("%lldx%lldx%lld: model best %s %.1f us\n", shapes[k][0], shapes[k][1], shapes[k][2], best, us);
        CHECK(strcmp(best, "matmul_wgmma") == 0, "model best is %s", best);
    }
}

/* op's space on sm_90a with the cost model's order (*order[r]: the index of the r-th best;
 * NULL when it could not be ranked); NULL when the space could not be built. */
static tuner_space *ranked_space(const tuner_op *op, size_t **order)
{
    tuner_space *sp = NULL;
    *order = NULL;
    CHECK(tuner_space_build(op, &sm90a, &sp, NULL) == 0, "space");
    if (!sp)
        return NULL;
    double *pred = calloc(sp->n, sizeof(*pred));
    *order = calloc(sp->n, sizeof(**order));
    CHECK(pred && *order, "out of memory");
    if (pred && *order)
        tuner_rank(op, &sm90a, sp, *order, pred);
    free(pred);
    return sp;
}

/* Split-K clusters exist where a problem has too few tiles for the SMs: every one of them fits
 * the GPU at once (no more tiles than clusters of that size fit, tuner/arch.c), gives each slice at least two k tiles and combines with
 * neither pairs, pingpong nor staging; a large GEMM has none. Some rank within the daemon's
 * default measuring budget (128 candidates), so that tune:"measure" times them. */
static void test_split_space(void)
{
    static const long long shapes[][3] = {{64, 4096, 4096}, {1000, 1000, 1000}, {128, 4096, 4096}, {4096, 4096, 4096}};
    for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
        const long long M = shapes[k][0], N = shapes[k][1], K = shapes[k][2];
        tuner_op op = mm(TUNER_F16, 0, 0, M, N, K, false, true);
        size_t *order = NULL;
        tuner_space *sp = ranked_space(&op, &order);
        if (!sp)
            continue;
        size_t n_split = 0, best_rank = sp->n;
        for (size_t r = 0; order && r < sp->n; r++) {
            const tuner_schedule *s = &sp->items[order[r]];
            const int split = tuner_schedule_param(s, "split_k", 1);
            if (strcmp(s->template_name, "matmul_wgmma") || split == 1)
                continue;
            n_split++;
            best_rank = r < best_rank ? r : best_rank;
            const long long bm = tuner_schedule_param(s, "block_m", 0), bn = tuner_schedule_param(s, "block_n", 0);
            /* (swapped: block_m tiles N, block_n tiles M) */
            const bool swap = tuner_schedule_param(s, "swap", 0) == 1;
            const long long tiles = ((swap ? N : M) + bm - 1) / bm * (((swap ? M : N) + bn - 1) / bn);
            const long long ktiles = (K + 63) / 64, kper = (ktiles + split - 1) / split;
            CHECK(tiles <= tuner__arch_cluster_fit(tuner__arch(&sm90a), split) && tiles * split <= 132 && kper >= 2 && (split - 1) * kper < ktiles &&
                      tuner_schedule_param(s, "cluster", 0) == 1 && tuner_schedule_param(s, "pingpong", 1) == 0 &&
                      tuner_schedule_param(s, "stage_out", 1) == 0 && tuner_schedule_param(s, "swizzle", 0) == 8,
                  "%lldx%lldx%lld: split %d of %lldx%lld tiles", M, N, K, split, bm, bn);
        }
        printf("%lldx%lldx%lld: %zu split-K candidates, the first ranked %zu\n", M, N, K, n_split, best_rank);
        if (M == 4096)
            CHECK(n_split == 0, "4096^3: %zu split-K candidates", n_split);
        else
            CHECK(n_split >= 12 && best_rank < 128, "%lldx%lldx%lld: %zu split-K candidates, first at %zu", M, N, K,
                  n_split, best_rank);
        free(order);
        tuner_space_free(sp);
    }
}

/* Stream-K exists where the tiles leave the last wave part-empty and each block's share of the
 * rest is 4 k tiles or more: never paired, pingpong or split, always grouped raster. A large
 * GEMM whose 128x256 tiles fill 27.15 waves ranks it first; a single k tile (128x256x64) has
 * none; 4224x1024x4096 has it only for tiles that do not fill whole waves (132 of 128x256 and
 * 264 of 128x128 do). */
/* Pairs along N (cluster_n 2, A multicast) where every N tile re-reads the whole A panel (at most
 * two tiles along M, at least twice as many along N), never with pingpong or a gathered A,
 * never beside an M pair; the cost model ranks them below the same tiles unpaired (they ran
 * 2-3% slower on an H100). */
static void test_pair_n_space(void)
{
    static const long long shapes[][3] = {{64, 14336, 4096}, {128, 14336, 4096}, {4096, 4096, 4096}};
    for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
        const long long M = shapes[k][0], N = shapes[k][1], K = shapes[k][2];
        tuner_op op = mm(TUNER_F16, 0, 0, M, N, K, false, false);
        size_t *order = NULL;
        tuner_space *sp = ranked_space(&op, &order);
        if (!sp)
            continue;
        size_t n_pairs = 0, first = sp->n, first_unpaired = sp->n;
        for (size_t r = 0; order && r < sp->n; r++) {
            const tuner_schedule *s = &sp->items[order[r]];
            if (strcmp(s->template_name, "matmul_wgmma"))
                continue;
            if (tuner_schedule_param(s, "cluster_n", 1) != 2) {
                first_unpaired = r < first_unpaired ? r : first_unpaired;
                continue;
            }
            n_pairs++;
            first = r < first ? r : first;
            const long long bm = tuner_schedule_param(s, "block_m", 0), bn = tuner_schedule_param(s, "block_n", 0);
            CHECK((M + bm - 1) / bm <= 2 && (N + bn - 1) / bn >= 2 * ((M + bm - 1) / bm) &&
                      tuner_schedule_param(s, "cluster", 0) == 1 &&
                      tuner_schedule_param(s, "pingpong", 1) == 0 && tuner_schedule_param(s, "split_k", 0) == 1 &&
                      tuner_schedule_param(s, "stream_k", 1) == 0 && tuner_schedule_param(s, "swizzle", 0) == 8,
                  "%lldx%lldx%lld: an N pair of %lldx%lld tiles", M, N, K, bm, bn);
        }
        printf("%lldx%lldx%lld: %zu N-pair candidates, the first ranked %zu\n", M, N, K, n_pairs, first);
        if (M == 4096)
            CHECK(n_pairs == 0, "4096^3: %zu N-pair candidates", n_pairs);
        else
            CHECK(n_pairs >= 12 && first > first_unpaired, "%lldx%lldx%lld: %zu N pairs, first at %zu", M, N, K,
                  n_pairs, first);
        free(order);
        tuner_space_free(sp);
    }
    /* A convolution's A is a matrix only when dense: a 3x3 layer's space has no N pairs. */
    tuner_op conv = t_conv_nhwc(TUNER_F16, 1, 7, 7, 64, 1024, 3, 1, 1, 1);
    tuner_space *sp = NULL;
    CHECK(tuner_space_build(&conv, &sm90a, &sp, NULL) == 0);
    for (size_t i = 0; sp && i < sp->n; i++)
        CHECK(tuner_schedule_param(&sp->items[i], "cluster_n", 1) == 1, "a 3x3 convolution offers N pairs");
    tuner_space_free(sp);
}

static tuner_op named_m(tuner_op op);

/* The swapped candidates (swap 1) of op: how many, the block_n values they use (bits of
 * block_n / 8), how many stage their output, how many split K, how many are N pairs (g_swap_pairs),
 * and each one's invariants. */
static size_t g_swap_pairs;
static size_t swap_candidates(const tuner_op *op, unsigned long long *ret_bns, size_t *ret_staged, size_t *ret_split)
{
    if (ret_split)
        *ret_split = 0;
    g_swap_pairs = 0;
    tuner_space *sp = NULL;
    size_t n = 0, staged = 0;
    *ret_bns = 0;
    CHECK(tuner_space_build(op, &sm90a, &sp, NULL) == 0);
    for (size_t i = 0; sp && i < sp->n; i++) {
        const tuner_schedule *s = &sp->items[i];
        if (strcmp(s->template_name, "matmul_wgmma") || tuner_schedule_param(s, "swap", 0) != 1)
            continue;
        n++;
        const int bn = tuner_schedule_param(s, "block_n", 0);
        const int so = tuner_schedule_param(s, "stage_out", 0), split = tuner_schedule_param(s, "split_k", 0);
        const int pair = tuner_schedule_param(s, "cluster_n", 0);
        CHECK(bn % 8 == 0 && bn >= 8 && bn <= 256 && so <= 1 && tuner_schedule_param(s, "cluster", 0) == 1 &&
                  (pair == 1 || (pair == 2 && split == 1 && tuner_schedule_param(s, "pingpong", 1) == 0 &&
                                 tuner_schedule_param(s, "stages", 0) >= 8)) &&
                  split >= 1 && split <= 4 && (split == 1 || (so == 0 && tuner_schedule_param(s, "pingpong", 1) == 0)) &&
                  tuner_schedule_param(s, "stream_k", 1) == 0,
              "a swapped candidate with block_n %d, staged in halves, paired beside a split, pingpong or a short ring, "
              "or split %d beside staging or pingpong", bn, split);
        g_swap_pairs += pair == 2;
        staged += so == 1;
        if (ret_split)
            *ret_split += split > 1;
        *ret_bns |= 1ull << (bn / 8 - 1 > 63 ? 63 : bn / 8 - 1);
    }
    tuner_space_free(sp);
    if (ret_staged)
        *ret_staged = staged;
    return n;
}

/* Swapped operands: offered for 16-bit 2-D matmuls with a K-major A and M up to 3072, block_n
 * cutting M (both ends of a named M's range) into tiles without idle rows; the kernel's maps are
 * B's (block_m boxes) then A's (block_n rows, a named M marked on it), its stores transposed:
 * from registers, bounds-checked, or staged in block_n rows of M and written by TMA stores where
 * the output's rows allow; none for a transposed A, a batch, FP8 or a large M. */
static void test_swap_space(void)
{
    unsigned long long bns;
    size_t staged = 0;
    tuner_op op = mm(TUNER_F16, 0, 0, 100, 4096, 4096, false, false);
    size_t split = 0;
    size_t n = swap_candidates(&op, &bns, &staged, &split);
    printf("100x4096x4096: %zu swapped candidates, %zu staged, %zu split, %zu paired\n", n, staged, split, g_swap_pairs);
    /* M = 100: 104 (one tile), 56 (two), 40, 32, 24, 24, 16; 64 or 128 N tiles, too few for
     * the SMs: split-K clusters, and N pairs of the tiles that cut M in two or more. */
    CHECK(n >= 40 && staged >= 20 && split >= 12 && g_swap_pairs >= 12 && (bns & (1ull << 12)) &&
              (bns & (1ull << 6)) && (bns & (1ull << 4)),
          "100x4096x4096: %zu swapped, %zu staged, %zu split, %zu paired", n, staged, split, g_swap_pairs);
    op = mm(TUNER_BF16, 0, 0, 700, 4096, 4096, false, true);
    CHECK(swap_candidates(&op, &bns, NULL, NULL) > 0 && (bns & (1ull << 21)), "700x4096x4096 nt: no 176-row tiles"); /* 4 x 176 */
    /* An odd N: output rows TMA cannot write, nothing staged. */
    op = mm(TUNER_F16, 0, 0, 100, 4001, 512, false, true);
    CHECK(swap_candidates(&op, &bns, &staged, NULL) > 0 && staged == 0, "100x4001x512: %zu swapped staged", staged);
    static const struct {
        long long bt_a, M;
        bool ta;
    } none[] = {{0, 100, true}, {2, 100, false}, {0, 4096, false}};
    for (size_t k = 0; k < sizeof(none) / sizeof(none[0]); k++) {
        op = mm(TUNER_F16, none[k].bt_a, 0, none[k].M, 4096, 512, none[k].ta, false);
        CHECK(swap_candidates(&op, &bns, NULL, NULL) == 0, "swapped candidates for case %zu", k);
    }
    /* A named M in [641, 768]: 168 rows (641 in 4 tiles) from the range's bottom, 192 (768 in 4) from its top. */
    op = named_m(mm(TUNER_F16, 0, 0, 768, 4096, 4096, false, false));
    op.dims[0].min = 641;
    CHECK(swap_candidates(&op, &bns, NULL, NULL) > 0 && (bns & (1ull << 20)) && (bns & (1ull << 23)),
          "[641,768]: block_n 168 and 192 missing (%llx)", bns);
    tuner_schedule s = {.template_name = "matmul_wgmma"};
    static const char *const names[] = {"block_m", "block_n", "stages", "consumers", "swizzle", "pingpong", "stage_out",
                                        "cluster", "split_k", "stream_k", "cluster_n", "swap"};
    static const int values[] = {128, 176, 5, 2, 8, 0, 0, 1, 1, 0, 1, 1};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        tuner__gemm_param(&s, names[i], values[i]);
    tuner_program *pr = NULL;
    char *err = NULL;
    CHECK(tuner_generate(&op, &sm90a, &s, &pr, &err) == 0, "swapped 128x176: %s", err ? err : "");
    free(err);
    if (pr) {
        const tuner_launch *l = &pr->kernels[0];
        CHECK(l->n_maps == 2 && l->maps[0].buf == TUNER_BUF_INPUT0 + 1 && l->maps[0].box[1] == 64 &&
                  l->maps[1].buf == TUNER_BUF_INPUT0 && l->maps[1].box[1] == 176 && l->maps[1].sym[1] == 1 &&
                  l->maps[0].sym[1] == 0,
              "swapped maps");
        /* Grid: min(132, 32 N tiles x ceil(M / 176)), a rule over M. */
        CHECK(l->grid[0] == 132 && l->grid_rule[0].dims == 1 && l->grid_rule[0].div == 176 && l->grid_rule[0].mul == 32,
              "swapped grid rule");
        CHECK(strstr(pr->source, "(32LL * ((gm_M + 175) / 176))") && strstr(pr->source, "__shfl_xor_sync(0xffffffffu, wg_odd") &&
                  strstr(pr->source, "if (o_m < gm_M && o_n < 4096)"),
              "swapped source: tile count, lane trade, bounds");
        tuner_binary *b = NULL;
        const int rc = tuner_compile(pr->source, &sm90a, &b, &err);
        CHECK(rc == 0 && strstr(b->ptx, "wgmma.mma_async.sync.aligned.m64n176k16"), "swapped compile: %s", err ? err : "");
        free(err);
        tuner_binary_free(b);
        tuner_program_free(pr);
    }
    /* The same tile staged: a third map, the output's, in boxes of 64 columns x 176 rows of M
     * (a named M marked), two TMA stores per tile. */
    tuner_schedule staged_s = {.template_name = "matmul_wgmma"};
    static const int staged_values[] = {128, 176, 4, 2, 8, 0, 1, 1, 1, 0, 1, 1};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        tuner__gemm_param(&staged_s, names[i], staged_values[i]);
    pr = NULL;
    CHECK(tuner_generate(&op, &sm90a, &staged_s, &pr, &err) == 0, "swapped 128x176 staged: %s", err ? err : "");
    free(err);
    if (pr) {
        const tuner_launch *l = &pr->kernels[0];
        CHECK(l->n_maps == 3 && l->maps[2].buf == TUNER_BUF_OUTPUT && l->maps[2].dims[0] == 4096 &&
                  l->maps[2].box[0] == 64 && l->maps[2].box[1] == 176 && l->maps[2].sym[1] == 1,
              "swapped staged output map");
        /* (the tile's first row of M: the last tile moved back to end at M, emit_swapped_row0) */
        CHECK(strstr(pr->source, "const int gm_n0 = min(gm_tn * 176, max((int)gm_M - 176, 0));") &&
                  strstr(pr->source, "wg_tma_st2(wg_map_c, gm_tm * 128 + 64, gm_n0, wg_ostage + 22528);") &&
                  !strstr(pr->source, "if (o_m <"),
              "swapped staged source: its second box's store, no bounds check");
        tuner_program_free(pr);
    }
    /* 48 KiB of dynamic shared memory beside the static mbarriers (a 64x24 tile, 4 stages, staged:
     * the H200 refused it, "invalid argument", bench/results/2026-11-30-h200-session13/b): it asks
     * for more than 48 KiB, so that a launcher raises the limit; t_compile_check reads the static
     * bytes from the PTX and checks every compiled program alike. */
    tuner_schedule s48 = {.template_name = "matmul_wgmma"};
    static const int s48_values[] = {64, 24, 4, 1, 8, 0, 1, 1, 1, 0, 1, 1};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        tuner__gemm_param(&s48, names[i], s48_values[i]);
    tuner_op m2048 = named_m(mm(TUNER_BF16, 0, 0, 2048, 1024, 320, false, false));
    m2048.dims[0].min = 64;
    m2048.dims[0].multiple_of = 64;
    pr = NULL;
    CHECK(tuner_generate(&m2048, &sm90a, &s48, &pr, &err) == 0, "swapped 64x24: %s", err ? err : "");
    free(err);
    err = NULL;
    if (pr) {
        CHECK(pr->kernels[0].shared_bytes > 48 * 1024, "swapped 64x24: %u bytes", pr->kernels[0].shared_bytes);
        CHECK(t_compile_check("swapped 64x24 staged", pr->source, &sm90a, pr, NULL), "swapped 64x24: compile check");
        tuner_program_free(pr);
    }
    /* A fixed M that does not divide into tiles: the last tile row starts at M - block_n, its
     * rows all in the tensor (700 = 3 x 176 + 172: the fourth tile starts at 524, loads and
     * stores from there). */
    tuner_op m700 = mm(TUNER_F16, 0, 0, 700, 4096, 4096, false, false);
    pr = NULL;
    CHECK(tuner_generate(&m700, &sm90a, &staged_s, &pr, &err) == 0, "swapped 128x176 at 700: %s", err ? err : "");
    free(err);
    err = NULL;
    if (pr) {
        CHECK(strstr(pr->source, "const int gm_n0 = min(gm_tn * 176, 524);") &&
                  strstr(pr->source, "wg_map_b, kt * 64, gm_n0, wg_full);") &&
                  strstr(pr->source, "wg_tma_st2(wg_map_c, gm_tm * 128 + 0, gm_n0, wg_ostage + 0);"),
              "swapped 128x176 at 700: the last tile's origin");
        tuner_program_free(pr);
    }
    /* Split-K at M = 100: 64 N tiles of one 104-row M tile, a cluster of two CTAs per tile
     * (128 CTAs); the partials summed transposed, a pair of output columns (kernel rows r and
     * r + 1) per thread, every partial of a step's pairs loaded before the adds. A named M in
     * [65, 100]: the grid a rule, 2 x 64 CTAs per M tile. */
    tuner_schedule split_s = {.template_name = "matmul_wgmma"};
    static const int split_values[] = {64, 104, 8, 1, 8, 0, 0, 1, 2, 0, 1, 1};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        tuner__gemm_param(&split_s, names[i], split_values[i]);
    tuner_op m100 = mm(TUNER_F16, 0, 0, 100, 4096, 4096, false, false), m65 = named_m(m100);
    m65.dims[0].min = 65;
    for (int named = 0; named < 2; named++) {
        pr = NULL;
        CHECK(tuner_generate(named ? &m65 : &m100, &sm90a, &split_s, &pr, &err) == 0, "swapped split: %s",
              err ? err : "");
        free(err);
        err = NULL;
        if (!pr)
            continue;
        const tuner_launch *l = &pr->kernels[0];
        CHECK(l->grid[0] == 128 && (!named || (l->grid_rule[0].div == 104 && l->grid_rule[0].mul == 128 &&
                                               l->grid_rule[0].cap == 0)),
              "swapped split grid %u (rule div %lld mul %lld)", l->grid[0], (long long)l->grid_rule[0].div,
              (long long)l->grid_rule[0].mul);
        CHECK(strstr(pr->source, "__cluster_dims__(2, 1, 1)") &&
                  strstr(pr->source, named ? "const int gm_rows = min(104, (int)((long long)gm_M - (gm_n0)));"
                                           : "const int gm_rows = min(104, (int)(100LL - (gm_n0)));") &&
                  strstr(pr->source, named ? "const int gm_n0 = min(gm_tn * 104, max((int)gm_M - 104, 0));"
                                           : "const int gm_n0 = gm_tn * 104;") &&
                  strstr(pr->source, "gm_x[gm_u][gm_s][1] = gm_ldc_f1(gm_sa + 448, (unsigned)gm_s);") &&
                  strstr(pr->source, "const int em = gm_n0 + gm_q % gm_rows, en = gm_tm * 64 + (gm_q / gm_rows) * 2;"),
              "swapped split source (%s M)", named ? "named" : "fixed");
        if (!named) {
            tuner_binary *b = NULL;
            const int rc = tuner_compile(pr->source, &sm90a, &b, &err);
            CHECK(rc == 0 && strstr(b->ptx, "ld.shared::cluster.f32") && strstr(b->ptx, "m64n104k16"),
                  "swapped split compile: %s", err ? err : "");
            free(err);
            err = NULL;
            tuner_binary_free(b);
        }
        tuner_program_free(pr);
    }
    /* N pairs at M = 100: two 56-row tiles of M share B's 64-row tile, 64 pairs (128 CTAs in
     * clusters of two). B [K, N] is MN-major in the kernel's view, one 64-column box per k tile:
     * each CTA multicasts half of its k rows (a box of 64 x 32, at its half of the stage); B [N,
     * K] (trans_b) is K-major: half of its 64 rows. The second tile starts at 100 - 56 = 44
     * (overlapping the first); a named M in [97, 112] counts ceil(M / 112) pairs per B tile. */
    tuner_schedule pair_s = {.template_name = "matmul_wgmma"};
    static const int pair_values[] = {64, 56, 12, 1, 8, 0, 1, 1, 1, 0, 2, 1};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        tuner__gemm_param(&pair_s, names[i], pair_values[i]);
    tuner_op m97 = named_m(m100), m100t = mm(TUNER_F16, 0, 0, 100, 4096, 4096, false, true);
    m97.dims[0].min = 97;
    m97.dims[0].max = 112;
    m97.inputs[0].shape[0] = m97.output.shape[0] = 112;
    for (int k = 0; k < 3; k++) {
        const tuner_op *pop = k == 0 ? &m100 : k == 1 ? &m100t : &m97;
        pr = NULL;
        CHECK(tuner_generate(pop, &sm90a, &pair_s, &pr, &err) == 0, "swapped pair %d: %s", k, err ? err : "");
        free(err);
        err = NULL;
        if (!pr)
            continue;
        const tuner_launch *l = &pr->kernels[0];
        const tuner_tmap *b_map = &l->maps[0];
        CHECK(l->grid[0] == 128 && strstr(pr->source, "__cluster_dims__(2, 1, 1)") &&
                  strstr(pr->source, "const int gm_tn = 2 * gm_tp + (int)wg_rank;") && b_map->buf == TUNER_BUF_INPUT0 + 1 &&
                  (k == 2 ? l->grid_rule[0].div == 112 && l->grid_rule[0].mul == 128 && l->grid_rule[0].cap == 132 &&
                                strstr(pr->source, "const int gm_n0 = min(gm_tn * 56, max((int)gm_M - 56, 0));")
                          : strstr(pr->source, "const int gm_n0 = min(gm_tn * 56, 44);") != NULL),
              "swapped pair %d: grid %u, rule div %lld mul %lld cap %lld", k, l->grid[0], (long long)l->grid_rule[0].div,
              (long long)l->grid_rule[0].mul, (long long)l->grid_rule[0].cap);
        if (k == 1)
            CHECK(b_map->box[0] == 64 && b_map->box[1] == 32 &&
                      strstr(pr->source, "wg_tma2_mc(wg_st + 0 + wg_rank * 4096, wg_map_a, kt * 64, gm_tm * 64 + "
                                         "(int)wg_rank * 32, wg_full, (unsigned short)3);"),
                  "swapped pair, B [N, K]: half of B's rows each (box %u x %u)", b_map->box[0], b_map->box[1]);
        else
            CHECK(b_map->box[0] == 64 && b_map->box[1] == 32 &&
                      strstr(pr->source, "wg_tma2_mc(wg_st + 0 + wg_rank * 4096, wg_map_a, gm_tm * 64, kt * 64 + "
                                         "(int)wg_rank * 32, wg_full, (unsigned short)3);"),
                  "swapped pair %d, B [K, N]: half of the box's k rows each (box %u x %u)", k, b_map->box[0],
                  b_map->box[1]);
        tuner_binary *b = NULL;
        const int rc = tuner_compile(pr->source, &sm90a, &b, &err);
        CHECK(rc == 0 && strstr(b->ptx, "multicast::cluster") && strstr(b->ptx, "m64n56k16"), "swapped pair %d compile: %s",
              k, err ? err : "");
        free(err);
        err = NULL;
        tuner_binary_free(b);
        tuner_program_free(pr);
    }
}

static void test_stream_k_space(void)
{
    static const struct {
        long long M, N, K;
        bool some, first;
    } shapes[] = {{8192, 14336, 4096, true, true}, {4096, 4096, 4096, true, false}, {1000, 1000, 1000, true, false},
                  {128, 256, 64, false, false}, {4224, 1024, 4096, true, false}};
    for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
        const long long M = shapes[k].M, N = shapes[k].N, K = shapes[k].K;
        tuner_op op = mm(TUNER_F16, 0, 0, M, N, K, false, false);
        size_t *order = NULL;
        tuner_space *sp = ranked_space(&op, &order);
        if (!sp)
            continue;
        size_t n_sk = 0, best_rank = sp->n;
        for (size_t r = 0; order && r < sp->n; r++) {
            const tuner_schedule *s = &sp->items[order[r]];
            if (strcmp(s->template_name, "matmul_wgmma") || tuner_schedule_param(s, "stream_k", 0) != 1)
                continue;
            n_sk++;
            best_rank = r < best_rank ? r : best_rank;
            const long long bm = tuner_schedule_param(s, "block_m", 0), bn = tuner_schedule_param(s, "block_n", 0);
            const long long tiles = ((M + bm - 1) / bm) * ((N + bn - 1) / bn), ktiles = (K + 63) / 64;
            const long long shared = tiles < 132 ? tiles : tiles % 132 + (2 * (tiles % 132) < 132 ? 132 : 0);
            CHECK((tiles < 132 || tiles % 132) && shared * ktiles / 132 >= 4 && tuner_schedule_param(s, "cluster", 0) == 1 &&
                      tuner_schedule_param(s, "pingpong", 1) == 0 && tuner_schedule_param(s, "split_k", 0) == 1 &&
                      tuner_schedule_param(s, "swizzle", 0) == 8,
                  "%lldx%lldx%lld: stream-K with %lldx%lld tiles", M, N, K, bm, bn);
        }
        printf("%lldx%lldx%lld: %zu stream-K candidates, the first ranked %zu\n", M, N, K, n_sk, best_rank);
        CHECK(shapes[k].some ? n_sk >= 12 : n_sk == 0, "%lldx%lldx%lld: %zu stream-K candidates", M, N, K, n_sk);
        if (shapes[k].first)
            CHECK(best_rank == 0, "%lldx%lldx%lld: the first stream-K candidate ranks %zu", M, N, K, best_rank);
        free(order);
        tuner_space_free(sp);
    }
}

/* ---- cases compiled (or dumped) ---- */

typedef struct wcase {
    const char *name;
    tuner_op op;
} wcase;

static wcase cases[32];
static int n_cases;

static void add_case(const char *name, tuner_op op)
{
    cases[n_cases].name = name;
    cases[n_cases].op = op;
    n_cases++;
}

/* op with its M named: dim "n" in [1, M], axis 0 of A and of the output. */
static tuner_op named_m(tuner_op op)
{
    op.n_dims = 1;
    memset(&op.dims[0], 0, sizeof(op.dims[0]));
    snprintf(op.dims[0].name, sizeof(op.dims[0].name), "%s", "n");
    op.dims[0].min = 1;
    op.dims[0].max = op.inputs[0].shape[0];
    op.dims[0].multiple_of = 1;
    op.inputs[0].sym[0] = 1;
    op.output.sym[0] = 1;
    return op;
}

/* A grouped convolution read by im2col maps whose geometry differs across H and W (so that a
 * swapped corner, offset or stride shows): x [3, 13, 10, 128], w [80, 3, 5, 64] in two groups,
 * stride (2, 1), padding (1, 2), dilation (1, 2): a 7x6 output. */
static tuner_op asym_conv(void)
{
    tuner_op op = t_conv_nhwc(TUNER_BF16, 3, 13, 10, 128, 80, 3, 1, 1, 2);
    op.inputs[1].shape[2] = 5;
    op.attrs.conv2d.stride[0] = 2, op.attrs.conv2d.stride[1] = 1;
    op.attrs.conv2d.pad[0] = 1, op.attrs.conv2d.pad[1] = 2;
    op.attrs.conv2d.dilation[0] = 1, op.attrs.conv2d.dilation[1] = 2;
    op.output.shape[1] = (13 + 2 * 1 - 1 * (3 - 1) - 1) / 2 + 1;
    op.output.shape[2] = (10 + 2 * 2 - 2 * (5 - 1) - 1) / 1 + 1;
    return op;
}

static void make_cases(void)
{
    /* Every operand layout (A K- or M-major, B K- or N-major), both dtypes, batches with a
     * broadcast operand, edge tiles in M, N and K (M and N odd where their operand is K-major,
     * K not a multiple of 64) and a fused epilogue. */
    tuner_op op = mm(TUNER_F16, 0, 2, 333, 200, 200, false, false);
    long long bias[1] = {200};
    t_add_epilogue(&op, TUNER_EW_ADD, 1, bias, TUNER_EW_GELU_TANH);
    add_case("f16_nn_b2_biasgelu_333x200x200", op);
    add_case("bf16_tt_b3_200x136x264", mm(TUNER_BF16, 3, 3, 200, 136, 264, true, true));
    add_case("f16_nt_333x517x72", mm(TUNER_F16, 0, 0, 333, 517, 72, false, true));
    add_case("bf16_tn_b3_96x80x72", mm(TUNER_BF16, 3, 0, 96, 80, 72, true, false));
    /* Convolutions: groups (3-D weight and output maps) with a fused bias and relu, stride 2;
     * a K of 648 whose k tiles cross window positions, odd M, N = 40. */
    op = t_conv_nhwc(TUNER_F16, 3, 13, 11, 32, 48, 3, 2, 1, 2);
    long long cbias[1] = {48};
    t_add_epilogue(&op, TUNER_EW_ADD, 1, cbias, TUNER_EW_RELU);
    add_case("f16_conv_g2_s2_biasrelu", op);
    add_case("bf16_conv_2x9x7x72_k40", t_conv_nhwc(TUNER_BF16, 2, 9, 7, 72, 40, 3, 1, 1, 1));
    /* A read by im2col maps (64 channels per group): two groups, a 3x5 window, every geometry
     * attribute different across H and W, an odd M and 40 channels per group. */
    add_case("bf16_conv_im2col_g2_3x5_asym", asym_conv());
    op = mm(TUNER_F16, 0, 0, 4096, 4096, 4096, false, false);
    add_case("f16_nn_4096", op);
    op = mm(TUNER_BF16, 0, 0, 4096, 4096, 4096, false, false);
    add_case("bf16_nn_4096", op);
    op = mm(TUNER_F16, 0, 0, 8192, 8192, 8192, false, false);
    add_case("f16_nn_8192", op);
    op = mm(TUNER_F16, 0, 0, 2048, 4096, 4096, false, false);
    add_case("f16_nn_2048x4096x4096", op);
    op = mm(TUNER_F16, 0, 0, 4096, 3072, 768, false, false);
    add_case("f16_nn_4096x3072x768", op);
    op = mm(TUNER_F16, 0, 0, 1000, 1000, 1000, false, false);
    add_case("f16_nn_1000", op);
    /* Split-K clusters (their candidates only, see split_cases): a decode GEMM with [N, K]
     * weights, N off the tiles and bias + GELU; a batched one with A broadcast, M-major A and
     * M off the tiles; the ResNet-50 layer at 7x7 (A by im2col maps) and one like it with 520
     * channels, whose A is gathered. */
    op = mm(TUNER_F16, 0, 0, 1, 4000, 4096, false, true);
    long long dbias[1] = {4000};
    t_add_epilogue(&op, TUNER_EW_ADD, 1, dbias, TUNER_EW_GELU_TANH);
    add_case("f16_nt_decode_1x4000x4096_biasgelu", op);
    add_case("bf16_tn_b2_72x1000x1024", mm(TUNER_BF16, 0, 2, 72, 1000, 1024, true, false));
    add_case("f16_conv_512_7", t_conv_nhwc(TUNER_F16, 32, 7, 7, 512, 512, 3, 1, 1, 1));
    add_case("f16_conv_gather_8x7x7x520", t_conv_nhwc(TUNER_F16, 8, 7, 7, 520, 512, 3, 1, 1, 1));
    /* Stream-K (with the decode GEMM, 1000^3 and the 7x7 layers, see sk_cases): both operands
     * batched and transposed, edges in M and N. */
    add_case("bf16_tt_b2_304x1000x1024", mm(TUNER_BF16, 2, 2, 304, 1000, 1024, true, true));
    /* Operands TMA cannot address, gathered by the producer warpgroup (see unaligned_cases): an
     * odd K (A gathered, B by TMA, the output staged); an odd N (B gathered MN-major, the
     * output stored from registers); both odd, batched, bases only 2-byte aligned, with bias +
     * GELU; both transposed with odd strides (A gathered MN-major, B K-major); a named M with
     * an odd K. */
    add_case("f16_nn_oddk_200x136x333", t_matmul(TUNER_F16, 0, 0, 200, 136, 333, false, false, 16));
    add_case("f16_nn_oddn_200x517x264", t_matmul(TUNER_F16, 0, 0, 200, 517, 264, false, false, 16));
    /* (N even: an odd N with an epilogue operand is not gathered, wg_supported.) */
    op = t_matmul(TUNER_BF16, 2, 2, 333, 518, 201, false, false, 2);
    long long obias[1] = {518};
    t_add_epilogue(&op, TUNER_EW_ADD, 1, obias, TUNER_EW_GELU_TANH);
    add_case("bf16_nn_b2_odd_both_a2_333x518x201_biasgelu", op);
    add_case("f16_tt_b3_odd_201x136x333", t_matmul(TUNER_F16, 3, 3, 201, 136, 333, true, true, 16));
    add_case("f16_nn_named_m_oddk_1000x256x1001", named_m(t_matmul(TUNER_F16, 0, 0, 1000, 256, 1001, false, false, 16)));
    /* The gather under split-K clusters (a skinny GEMM with both operands gathered, [N, K]
     * weights) and stream-K (an odd K whose last wave is mostly empty). */
    add_case("f16_nt_odd_64x4000x2047", t_matmul(TUNER_F16, 0, 0, 64, 4000, 2047, false, true, 16));
    add_case("f16_nn_oddk_4096x2048x4095", t_matmul(TUNER_F16, 0, 0, 4096, 2048, 4095, false, false, 16));
}

/* The cases of unaligned operands, compiled every UNALIGNED_STRIDE-th candidate. */
static const char *const unaligned_cases[] = {"f16_nn_oddk_200x136x333", "f16_nn_oddn_200x517x264",
                                              "bf16_nn_b2_odd_both_a2_333x518x201_biasgelu",
                                              "f16_tt_b3_odd_201x136x333", "f16_nn_named_m_oddk_1000x256x1001"};
#define UNALIGNED_STRIDE 6

/* Whether operand `which` of a matmul has rows (or a base) TMA cannot address: the producer
 * gathers it (no tensor map). */
static bool gathered(const tuner_op *op, int which)
{
    if (op->kind != TUNER_OP_MATMUL)
        return false;
    const tuner_tensor *t = &op->inputs[which];
    const int align = t->align > 0 ? t->align : 16;
    return t->shape[t->rank - 1] % 8 != 0 || align < 16;
}

/* The cases compiled for their split-K candidates only, and which of those: every fourth (the
 * last: both operands gathered). */
static const char *const split_cases[] = {"f16_nt_decode_1x4000x4096_biasgelu", "bf16_tn_b2_72x1000x1024",
                                          "f16_conv_512_7", "f16_conv_gather_8x7x7x520", "f16_nt_odd_64x4000x2047"};
#define SPLIT_STRIDE 4

/* The cases compiled for their stream-K candidates only (every eighth): a square GEMM whose
 * tiles are fewer than the SMs (all shared out), the decode GEMM (bias + GELU after the
 * fixup), a batched transposed one, both 7x7 convolutions (im2col maps, gathered A) and an odd
 * K (A gathered by the producer's threads). */
static const char *const sk_cases[] = {"f16_nn_1000", "f16_nt_decode_1x4000x4096_biasgelu", "bf16_tt_b2_304x1000x1024",
                                       "f16_conv_512_7", "f16_conv_gather_8x7x7x520", "f16_nn_oddk_4096x2048x4095"};
#define SK_STRIDE 8

/* Candidates compiled by the test: every one for the fused case (all staged variants) and the
 * odd-N one, every second for the transposed batch, every fourth for the fourth layout, every
 * sixth of the two gathering convolutions, every fifth of the im2col one, none for the large
 * shapes (the dump's). About 8 minutes on two busy cores. */
static int compile_stride(int i)
{
    static const int stride[] = {1, 2, 1, 4, 6, 6, 5};
    return i < 7 ? stride[i] : 0;
}

typedef struct job {
    int c;
    size_t j;     /* the job's number within its case: what HIDET_TEST_SAMPLE picks by */
    size_t share; /* what --shard deals by: the job's number among the compiled jobs (or among the
                   * generated-only ones), so that a sample spreads over the shards too */
    tuner_schedule s;
} job;

static job *jobs;
static size_t n_jobs, next_job, n_to_compile, n_to_generate;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int n_compiled, n_generated_only;

/* Whether a convolution's A is read by an im2col map: 64 channels per group, not a dense 1x1. */
static bool im2col_conv(const tuner_op *op)
{
    const tuner_tensor *w = &op->inputs[1];
    return op->kind == TUNER_OP_CONV2D && w->shape[3] % 64 == 0 &&
           !(w->shape[1] == 1 && w->shape[2] == 1 && op->attrs.conv2d.groups == 1 && op->attrs.conv2d.stride[0] == 1 &&
             op->attrs.conv2d.stride[1] == 1 && op->attrs.conv2d.pad[0] == 0 && op->attrs.conv2d.pad[1] == 0);
}

/* A convolution's im2col map of its NHWC input: (C, W, H, N), the convolution's strides, corners
 * (-padding, padding - dilation * (window - 1)) per spatial dimension (W first), block_m pixels
 * of 64 channels per copy. */
static void check_im2col_map(const char *tag, const tuner_op *op, int block_m, const tuner_tmap *m)
{
    const int64_t *x = op->inputs[0].shape, *w = op->inputs[1].shape;
    const int *st = op->attrs.conv2d.stride, *pad = op->attrs.conv2d.pad, *dil = op->attrs.conv2d.dilation;
    const uint64_t pixel = (uint64_t)x[3] * (uint64_t)tuner_dtype_size(op->inputs[0].dtype);
    CHECK(m->mode == TUNER_TMAP_IM2COL && m->buf == TUNER_BUF_INPUT0 && m->rank == 4 && m->dims[0] == (uint64_t)x[3] &&
              m->dims[1] == (uint64_t)x[2] && m->dims[2] == (uint64_t)x[1] && m->dims[3] == (uint64_t)x[0] &&
              m->strides[0] == pixel && m->strides[1] == pixel * (uint64_t)x[2] &&
              m->strides[2] == pixel * (uint64_t)(x[2] * x[1]),
          "%s: im2col map extents", tag);
    CHECK(m->element_strides[1] == (uint32_t)st[1] && m->element_strides[2] == (uint32_t)st[0] &&
              m->lower_corner[0] == -pad[1] && m->lower_corner[1] == -pad[0] &&
              m->upper_corner[0] == pad[1] - dil[1] * (int)(w[2] - 1) &&
              m->upper_corner[1] == pad[0] - dil[0] * (int)(w[1] - 1) && m->channels_per_pixel == 64 &&
              m->pixels_per_column == (uint32_t)block_m,
          "%s: im2col map geometry (strides %u/%u, corners %d,%d / %d,%d, %u pixels)", tag, m->element_strides[1],
          m->element_strides[2], m->lower_corner[0], m->lower_corner[1], m->upper_corner[0], m->upper_corner[1],
          m->pixels_per_column);
}

/* The launch's tensor maps against the problem: A's (unless a convolution gathers it), B's and,
 * with stage_out, the output's, each with its buffer, element type, extents (contiguous
 * dimension first) and a 128-byte swizzle that the encoder accepts. */
static void check_maps(const char *tag, const wcase *wc, const tuner_schedule *s, const tuner_launch *l)
{
    const tuner_op *op = &wc->op;
    const bool conv = op->kind == TUNER_OP_CONV2D, staged = tuner_schedule_param(s, "stage_out", 0) > 0;
    const bool a_map = (!conv || im2col_conv(op)) && !gathered(op, 0), b_map = !gathered(op, 1);
    const int want = (a_map ? 1 : 0) + (b_map ? 1 : 0) + (staged ? 1 : 0);
    CHECK(l->n_maps == want, "%s: %d tensor maps, want %d", tag, l->n_maps, want);
    for (int i = 0; i < l->n_maps && i < want; i++) {
        const tuner_tmap *m = &l->maps[i];
        char why[128] = "", field[32] = "";
        CHECK(tuner_tmap_check(m, why, sizeof(why), field, sizeof(field)) == 0, "%s: map %d: %s: %s", tag, i, field,
              why);
        const uint32_t copy_row = m->mode == TUNER_TMAP_IM2COL ? m->channels_per_pixel : m->box[0];
        CHECK(m->swizzle == 128 && copy_row * (unsigned)tuner_dtype_size(m->dtype) == 128, "%s: map %d swizzle", tag, i);
        const int which = i + (a_map ? 0 : 1) + (i >= (a_map ? 1 : 0) && !b_map ? 1 : 0); /* 0 A, 1 B, 2 the output */
        if (which == 0 && conv) {
            check_im2col_map(tag, op, tuner_schedule_param(s, "block_m", 0), m);
            continue;
        }
        CHECK(m->mode == TUNER_TMAP_TILED, "%s: map %d is not tiled", tag, i);
        if (which == 2) {
            /* A grouped convolution's output rows hold (K/g, groups). */
            const uint64_t row = (uint64_t)op->output.shape[op->output.rank - 1];
            CHECK(m->buf == TUNER_BUF_OUTPUT && m->dtype == op->output.dtype &&
                      (m->dims[0] == row || (conv && m->rank == 3 && m->dims[0] * m->dims[1] == row)),
                  "%s: output map", tag);
            continue;
        }
        /* Swapped operands (swap 1): the kernel's operand 0 is B, tiled by block_m, and its
         * operand 1 is A, by block_n. */
        const bool swap = tuner_schedule_param(s, "swap", 0) == 1;
        const int in = swap ? 1 - which : which;
        CHECK(m->buf == TUNER_BUF_INPUT0 + in && m->dtype == op->inputs[in].dtype, "%s: map %d buffer", tag, i);
        const tuner_tensor *t = &op->inputs[in];
        /* A K-major operand shared by a pair (B along M, A along N) is loaded in halves of rows. */
        const bool shared = which == 0 ? tuner_schedule_param(s, "cluster_n", 1) == 2
                                       : tuner_schedule_param(s, "cluster", 1) == 2;
        const bool kmajor = in == 0 ? !wc->op.attrs.matmul.trans_a : wc->op.attrs.matmul.trans_b;
        const uint32_t rows = (uint32_t)tuner_schedule_param(s, which == 0 ? "block_m" : "block_n", 0);
        if (!conv && kmajor)
            CHECK(m->box[1] == (shared ? rows / 2 : rows), "%s: map %d box of %u rows", tag, i, m->box[1]);
        if (!conv) /* the operand's rows and columns as stored: contiguous first */
            CHECK(m->dims[0] == (uint64_t)t->shape[t->rank - 1] && m->dims[1] == (uint64_t)t->shape[t->rank - 2] &&
                      m->strides[0] == m->dims[0] * (uint64_t)tuner_dtype_size(t->dtype),
                  "%s: map %d extents %llu x %llu", tag, i, (unsigned long long)m->dims[0],
                  (unsigned long long)m->dims[1]);
    }
}

static void check_one(const job *j)
{
    const wcase *wc = &cases[j->c];
    tuner_program *pr = NULL;
    char *err = NULL;
    char tag[160];
    snprintf(tag, sizeof(tag), "%s_%d_%d_%d_%d_%d_k%d%s", wc->name, tuner_schedule_param(&j->s, "block_m", 0),
             tuner_schedule_param(&j->s, "block_n", 0), tuner_schedule_param(&j->s, "stages", 0),
             tuner_schedule_param(&j->s, "consumers", 0), tuner_schedule_param(&j->s, "swizzle", 0),
             tuner_schedule_param(&j->s, "split_k", 1), tuner_schedule_param(&j->s, "stream_k", 0) ? "_sk" : "");
    int rc = tuner_generate(&wc->op, &sm90a, &j->s, &pr, &err);
    CHECK(rc == 0, "%s: generate: %s", tag, err ? err : "");
    free(err);
    if (rc < 0)
        return;
    /* One launch, no workspace. Stream-K: first a one-block launch clearing a flag per block
     * (its parameters the workspace and a dynamic op's sizes), then one block per SM at every
     * size, with a flag and an fp32 partial tile each. */
    const bool sk = tuner_schedule_param(&j->s, "stream_k", 0) == 1;
    const tuner_launch *gemm = &pr->kernels[pr->n_kernels - 1];
    /* A dynamic op's launch takes its sizes after the pointers. */
    const int n_ptrs = wc->op.n_inputs + 1, n_dims = wc->op.n_dims;
    if (sk) {
        const size_t bm = (size_t)tuner_schedule_param(&j->s, "block_m", 0), bn = (size_t)tuner_schedule_param(&j->s, "block_n", 0);
        const size_t flags = (132 * 4 + 127) / 128 * 128;
        CHECK(pr->n_kernels == 2 && pr->kernels[0].grid[0] == 1 && pr->kernels[0].n_args == 1 + n_dims &&
                  pr->kernels[0].args[0] == TUNER_BUF_WORKSPACE && pr->kernels[0].n_maps == 0 &&
                  gemm->grid[0] == 132 && gemm->grid_rule[0].dims == 0 && gemm->n_args == n_ptrs + 1 + n_dims &&
                  gemm->args[n_ptrs] == TUNER_BUF_WORKSPACE && pr->workspace_bytes == flags + 132 * bm * bn * 4,
              "%s: stream-K launches (%d kernels, %zu workspace bytes)", tag, pr->n_kernels, pr->workspace_bytes);
    } else {
        CHECK(pr->n_kernels == 1 && pr->workspace_bytes == 0 && gemm->n_args == n_ptrs + n_dims, "%s: launches", tag);
    }
    check_maps(tag, wc, &j->s, gemm);
    /* What the source alone shows. Split-K: the slices of a tile are one cluster of split CTAs
     * (one per tile). Pairs: clusters of two CTAs. A staged tile is written out whole and the
     * TMA store clips it at the output's edge: its pairs go to shared memory as plain stores
     * with no bounds check (a fused chain applied on the way, at clamped coordinates). */
    const int split = tuner_schedule_param(&j->s, "split_k", 1);
    if (split > 1) {
        char dims[48];
        snprintf(dims, sizeof(dims), "__cluster_dims__(%d, 1, 1)", split);
        CHECK(strstr(pr->source, dims) && pr->kernels[0].grid[0] % split == 0 && pr->kernels[0].grid[0] <= 132,
              "%s: split %d: grid %u", tag, split, pr->kernels[0].grid[0]);
    }
    const bool pair = tuner_schedule_param(&j->s, "cluster", 1) == 2 || tuner_schedule_param(&j->s, "cluster_n", 1) == 2;
    if (pair)
        CHECK(strstr(pr->source, "__cluster_dims__(2, 1, 1)") && gemm->grid[0] % 2 == 0, "%s: pair without its cluster",
              tag);
    if (tuner_schedule_param(&j->s, "stage_out", 0) > 0)
        CHECK(strstr(pr->source, "*>(wg_oa) = ") && !strstr(pr->source, "if (o_m <"),
              "%s: staged stores through asm or behind a bounds check", tag);
    if (!t_in_sample(j->j)) {
        printf("generated only: %s\n", tag);
        n_generated_only++;
        tuner_program_free(pr);
        return;
    }
    tuner_binary *b = NULL;
    rc = tuner_compile(pr->source, &sm90a, &b, &err);
    CHECK(rc == 0 && b->cubin_len > 0, "%s: NVRTC sm_90a: %s", tag, err ? err : "");
    free(err);
    if (rc == 0) {
        for (int k = 0; k < pr->n_kernels; k++) {
            char entry[96];
            snprintf(entry, sizeof(entry), ".entry %s(", pr->kernels[k].name);
            CHECK(strstr(b->ptx, entry) != NULL, "%s: no entry %s", tag, pr->kernels[k].name);
        }
        /* The instructions the template is built on (a convolution's A is an im2col copy per
         * k tile, or gathered with cp.async completing on the stage's mbarrier). */
        if (im2col_conv(&wc->op))
            CHECK(strstr(b->ptx, "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes") &&
                      !strstr(b->ptx, "cp.async.cg.shared.global"),
                  "%s: PTX lacks the im2col copy (or still gathers)", tag);
        else if (wc->op.kind == TUNER_OP_CONV2D)
            CHECK(strstr(b->ptx, "cp.async.cg.shared.global") && strstr(b->ptx, "cp.async.mbarrier.arrive.noinc") &&
                      strstr(b->ptx, "fence.proxy.async.shared::cta"),
                  "%s: PTX lacks the im2col gather", tag);
        static const char *const want[] = {"wgmma.mma_async.sync.aligned.m64n", "wgmma.fence", "wgmma.commit_group",
                                           "wgmma.wait_group", "mbarrier.try_wait.parity", "cp.async.bulk.tensor",
                                           "mbarrier.arrive.expect_tx"};
        /* With both operands gathered nothing arms a barrier with bytes to expect, and with the
         * output stored from registers nothing is a TMA copy. */
        const bool g0 = gathered(&wc->op, 0), g1 = gathered(&wc->op, 1);
        const size_t n_want = !(g0 && g1) ? 7 : tuner_schedule_param(&j->s, "stage_out", 0) ? 6 : 5;
        for (size_t w = 0; w < n_want; w++)
            CHECK(strstr(b->ptx, want[w]) != NULL, "%s: PTX lacks %s", tag, want[w]);
        /* An unaligned operand: aligned 16-byte loads shifted into place by the producer's
         * threads, stored to the swizzled stage, made visible to wgmma (the async proxy), and
         * the threads' arrivals on the stage barrier. */
        if (g0 || g1)
            CHECK(strstr(b->ptx, "ld.global.nc.v4.u32") && strstr(b->ptx, "shfl.sync.down") &&
                      strstr(b->ptx, "shf.r.") && strstr(b->ptx, "st.shared.v4.u32") &&
                      strstr(b->ptx, "fence.proxy.async.shared::cta") && strstr(b->ptx, "mbarrier.arrive.shared::cta.b64"),
                  "%s: PTX lacks the unaligned gather", tag);
        if (g0 && g1)
            CHECK(!strstr(b->ptx, "cp.async.bulk.tensor.2d.shared::cluster.global") &&
                      !strstr(b->ptx, "cp.async.bulk.tensor.3d.shared::cluster.global"),
                  "%s: a gathered operand still loaded by TMA", tag);
        /* The maps are 128-byte parameters after the pointers, 64-byte aligned, as the
         * launchers pass them (the last map's parameter number is the launch's last). */
        char map_param[128];
        snprintf(map_param, sizeof(map_param), ".param .align 64 .b8 %s_param_%d[128]", gemm->name,
                 gemm->n_args + gemm->n_maps - 1);
        CHECK((gemm->n_maps == 0 || strstr(b->ptx, map_param) != NULL) && !strstr(b->ptx, "tensormap.replace"),
              "%s: PTX lacks %s (or still builds maps)", tag, map_param);
        if (tuner_schedule_param(&j->s, "consumers", 0) == 2)
            CHECK(strstr(b->ptx, "setmaxnreg.inc") && strstr(b->ptx, "setmaxnreg.dec"), "%s: no setmaxnreg", tag);
        /* Split-K slices sum their partials through distributed shared memory. */
        if (split > 1)
            CHECK(strstr(b->ptx, "barrier.cluster.arrive") && strstr(b->ptx, "mapa.shared::cluster") &&
                      strstr(b->ptx, "ld.shared::cluster"),
                  "%s: PTX lacks the cluster sum", tag);
        /* Pairs (along M sharing B, along N sharing A): each CTA multicasts half of the shared
         * tile and releases stages in both CTAs. */
        if (pair)
            CHECK(strstr(b->ptx, ".multicast::cluster") && strstr(b->ptx, "mbarrier.arrive.shared::cluster"),
                  "%s: pair without multicast or remote arrives", tag);
        /* Stream-K: partial tiles written and read at L2 (.cg), flags released and acquired at
         * GPU scope. */
        if (sk)
            CHECK(strstr(b->ptx, "st.global.cg.v4.f32") && strstr(b->ptx, "ld.global.cg.v4.f32") &&
                      strstr(b->ptx, "ld.acquire.gpu") && strstr(b->ptx, "fence.acq_rel.gpu"),
                  "%s: PTX lacks the stream-K fixup", tag);
        /* Pingpong consumers hand the tensor cores to each other through named barriers. */
        if (tuner_schedule_param(&j->s, "pingpong", 0) == 1)
            CHECK(strstr(b->ptx, "bar.arrive") && strstr(b->ptx, "bar.sync"), "%s: no turn barriers", tag);
        /* The cubin is ptxas's work: NVRTC assembles the PTX for sm_90a in-process and its log
         * carries ptxas's messages. setmaxnreg ignored (C7508) would make the two-consumer tiles
         * spill. */
        CHECK(!strstr(b->log, "C7508"), "%s: %s", tag, b->log);
        /* The toolkit's ptxas on the same PTX, once per case (its first job): it agrees with
         * NVRTC's (assembling every candidate twice cost a third of the test's CPU time). */
        if (j->j == 0) {
            char *out = NULL;
            int st = t_ptxas(b->ptx, "sm_90a", "", &out);
            CHECK(st == 0, "%s: ptxas -arch=sm_90a rejected the PTX:\n%s", tag, out ? out : "");
            /* setmaxnreg ignored (C7508) would make the two-consumer tiles spill. */
            CHECK(!out || !strstr(out, "C7508"), "%s: %s", tag, out);
            free(out);
        }
        tuner_binary_free(b);
    }
    tuner_program_free(pr);
    n_compiled++;
}

static void *worker(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&lock);
        size_t i = next_job < n_jobs ? next_job++ : n_jobs;
        pthread_mutex_unlock(&lock);
        if (i >= n_jobs)
            return NULL;
        if (t_in_shard(jobs[i].share))
            check_one(&jobs[i]);
    }
}

/* Queues every stride-th wgmma candidate of case c (with `only`, of those whose parameter of
 * that name is not `off`: split_k 1 or stream_k 0). */
static void queue_space(int c, int stride, const char *only, int off)
{
    /* TWG_CASES (a comma-separated list of case names) compiles those cases' candidates only. */
    const char *cases_only = getenv("TWG_CASES");
    if (cases_only && !strstr(cases_only, cases[c].name))
        return;
    tuner_space *sp = NULL;
    char *err = NULL;
    CHECK(tuner_space_build(&cases[c].op, &sm90a, &sp, &err) == 0, "%s: %s", cases[c].name, err ? err : "");
    free(err);
    size_t before = n_jobs, seen = 0;
    for (size_t i = 0; sp && i < sp->n; i++) {
        if (!strstr(sp->items[i].template_name, "_wgmma") ||
            (only && tuner_schedule_param(&sp->items[i], only, off) == off) || seen++ % (size_t)stride)
            continue;
        job *nj = realloc(jobs, (n_jobs + 1) * sizeof(*jobs));
        if (!nj)
            break;
        jobs = nj;
        jobs[n_jobs].c = c;
        jobs[n_jobs].j = n_jobs - before;
        jobs[n_jobs].share = t_in_sample(jobs[n_jobs].j) ? n_to_compile++ : n_to_generate++;
        jobs[n_jobs].s = sp->items[i];
        n_jobs++;
    }
    CHECK(seen >= (only ? 12 : 30), "%s: %zu wgmma candidates%s%s", cases[c].name, seen, only ? " with " : "",
          only ? only : "");
    tuner_space_free(sp);
}

/* ---- dump for a GPU elsewhere ---- */

static int write_bytes(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -errno;
    size_t w = fwrite(data, 1, len, f);
    return fclose(f) == 0 && w == len ? 0 : -EIO;
}

static void dump_program(const char *dir, const char *tag, const wcase *wc, const tuner_program *pr)
{
    tuner_binary *b = NULL;
    char *err = NULL;
    if (tuner_compile(pr->source, &sm90a, &b, &err) < 0) {
        fprintf(stderr, "%s: %s\n", tag, err ? err : "compile failed");
        free(err);
        t_failures++;
        return;
    }
    char path[512];
    snprintf(path, sizeof(path), "%s/%s.cubin", dir, tag);
    write_bytes(path, b->cubin, b->cubin_len);
    if (getenv("TWG_SOURCE")) {
        snprintf(path, sizeof(path), "%s/%s.cu", dir, tag);
        write_bytes(path, pr->source, strlen(pr->source));
        snprintf(path, sizeof(path), "%s/%s.ptx", dir, tag);
        write_bytes(path, b->ptx, b->ptx_len);
    }
    tuner_binary_free(b);
    snprintf(path, sizeof(path), "%s/%s.launch", dir, tag);
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    const tuner_op *op = &wc->op;
    fprintf(f, "case %s\ndtype %s\ntrans %d %d\nepilogue %d\nws %zu\n", wc->name, tuner_dtype_name(op->inputs[0].dtype),
            op->attrs.matmul.trans_a, op->attrs.matmul.trans_b, op->epilogue.n, pr->workspace_bytes);
    for (int i = 0; i <= op->n_inputs; i++) {
        const tuner_tensor *t = i < op->n_inputs ? &op->inputs[i] : &op->output;
        fprintf(f, "%s %d", i < op->n_inputs ? "input" : "output", t->rank);
        for (int d = 0; d < t->rank; d++)
            fprintf(f, " %lld", (long long)t->shape[d]);
        fputc('\n', f);
    }
    for (int k = 0; k < pr->n_kernels; k++) {
        const tuner_launch *l = &pr->kernels[k];
        fprintf(f, "kernel %s %u %u %u %u %u %u %u", l->name, l->grid[0], l->grid[1], l->grid[2], l->block[0],
                l->block[1], l->block[2], l->shared_bytes);
        for (int a = 0; a < l->n_args; a++)
            fprintf(f, " %d", l->args[a]);
        fputc('\n', f);
    }
    fclose(f);
}

/* TWG_DUMP: for each case, its first (preferred) candidate and, with TWG_ALL, every candidate. */
static int dump(const char *dir)
{
    const char *only = getenv("TWG_CASES");
    for (int c = 0; c < n_cases; c++) {
        if (only && !strstr(only, cases[c].name))
            continue;
        tuner_space *sp = NULL;
        if (tuner_space_build(&cases[c].op, &sm90a, &sp, NULL) < 0)
            continue;
        int k = 0;
        for (size_t i = 0; i < sp->n; i++) {
            if (!strstr(sp->items[i].template_name, "_wgmma"))
                continue;
            if (k > 0 && !getenv("TWG_ALL"))
                break;
            tuner_program *pr = NULL;
            if (tuner_generate(&cases[c].op, &sm90a, &sp->items[i], &pr, NULL) == 0) {
                char tag[200];
                snprintf(tag, sizeof(tag), "%s__%s", cases[c].name, pr->kernels[0].name);
                dump_program(dir, tag, &cases[c], pr);
                tuner_program_free(pr);
            }
            k++;
        }
        tuner_space_free(sp);
    }
    return t_failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    const bool checks_only = argc == 2 && !strcmp(argv[1], "--checks");
    if (t_subset_init(&argc, argv) < 0 || (argc > 1 && !checks_only)) {
        fprintf(stderr, "usage: %s [--checks | --shard K/N]   (HIDET_TEST_SAMPLE=S[+R]: see tuner/tests/common.h)\n",
                argv[0]);
        return 2;
    }
    make_cases();
    const char *dir = getenv("TWG_DUMP");
    if (dir)
        return dump(dir);
    if (t_sub.n_shards == 1) {
        test_space();
        test_unaligned_space();
        test_unaligned_default();
        test_conv_space();
        test_conv_default();
        test_default();
        test_rank();
        test_split_space();
        test_pair_n_space();
        test_stream_k_space();
        test_swap_space();
    }
    if (checks_only) {
        printf(t_failures ? "%d failure(s)\n" : "ok\n", (int)t_failures);
        return t_failures ? 1 : 0;
    }
    for (int c = 0; c < n_cases; c++)
        if (compile_stride(c))
            queue_space(c, compile_stride(c), NULL, 0);
    for (size_t k = 0; k < sizeof(split_cases) / sizeof(split_cases[0]); k++)
        for (int c = 0; c < n_cases; c++)
            if (!strcmp(cases[c].name, split_cases[k]))
                queue_space(c, SPLIT_STRIDE, "split_k", 1);
    for (size_t k = 0; k < sizeof(unaligned_cases) / sizeof(unaligned_cases[0]); k++)
        for (int c = 0; c < n_cases; c++)
            if (!strcmp(cases[c].name, unaligned_cases[k]))
                queue_space(c, UNALIGNED_STRIDE, NULL, 0);
    for (size_t k = 0; k < sizeof(sk_cases) / sizeof(sk_cases[0]); k++)
        for (int c = 0; c < n_cases; c++)
            if (!strcmp(cases[c].name, sk_cases[k]))
                queue_space(c, SK_STRIDE, "stream_k", 0);
    pthread_t th[2];
    int started = 0;
    for (int i = 0; i < 2; i++)
        started += pthread_create(&th[i], NULL, worker, NULL) == 0;
    if (!started)
        worker(NULL);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    free(jobs);
    printf("compiled %d wgmma programs, generated %d more without compiling them (of %zu jobs in all shards)\n",
           (int)n_compiled, (int)n_generated_only, n_jobs);
    if (t_failures) {
        fprintf(stderr, "%d failure(s)\n", (int)t_failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
