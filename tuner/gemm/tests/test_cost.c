/* tuner/gemm/tests/test_cost.c - unit tests of the GEMM cost model's ring (tuner/gemm/cost.c)
 * that need no compiler: a non-persistent block cannot keep more k tiles loading than its k loop
 * has, so a deeper ring is predicted no faster; and the model's pick for
 * examples/requests/matmul.json (K = 64: one or two k tiles) is not a 12-stage, 96 KiB ring. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/gemm/gemm.h"
#include "tuner/space.h"
#include "tuner/tests/common.h"

static void test_ring_depth(void)
{
    tuner_target t = {.sm = 90};
    const tuner_arch *a = tuner__arch(&t);
    CHECK(a != NULL);
    if (!a)
        return;
    tuner__gemm_ring r = {.ktiles = 32, .compute_us = 0.05, .stage_bytes = 8192, .dram_frac = 1.0,
                          .l2_penalty = 1.0, .sms = 32, .tile_ktiles = 1, .blocks = 1};
    /* One k tile per tile: 11 slots are worth one. */
    r.slots = 11;
    double deep = tuner__gemm_ring_us(a, &r);
    r.slots = 1;
    double shallow = tuner__gemm_ring_us(a, &r);
    CHECK(fabs(deep - shallow) < 1e-9 * shallow);
    /* Two resident blocks of 2 k tiles each keep at most 4 loading. */
    r.tile_ktiles = 2;
    r.blocks = 2;
    r.slots = 22;
    deep = tuner__gemm_ring_us(a, &r);
    r.slots = 4;
    CHECK(fabs(deep - tuner__gemm_ring_us(a, &r)) < 1e-9 * deep);
    /* A long k loop, or a persistent kernel (its producer runs into the next tile), still gains
     * from depth where latency bounds it. */
    r.tile_ktiles = 64;
    r.blocks = 1;
    r.slots = 11;
    deep = tuner__gemm_ring_us(a, &r);
    r.slots = 2;
    CHECK(deep < tuner__gemm_ring_us(a, &r));
    r.tile_ktiles = 0;
    r.slots = 11;
    deep = tuner__gemm_ring_us(a, &r);
    r.slots = 2;
    CHECK(deep < tuner__gemm_ring_us(a, &r));
}

static void test_short_k_pick(void)
{
    /* examples/requests/matmul.json: [128, 64] x [64, 256] f16 on sm_90. */
    tuner_op op = t_matmul(TUNER_F16, 1, 1, 128, 256, 64, false, false, 8);
    tuner_target t = {.sm = 90};
    tuner_space *sp = NULL;
    char *err = NULL;
    CHECK(tuner_space_build(&op, &t, &sp, &err) == 0 && sp && sp->n > 0);
    if (!sp || sp->n == 0) {
        free(err);
        return;
    }
    size_t *order = malloc(sp->n * sizeof(*order));
    double *pred = malloc(sp->n * sizeof(*pred));
    tuner_rank(&op, &t, sp, order, pred);
    const tuner_schedule *best = &sp->items[order[0]];
    int stages = tuner_schedule_param(best, "stages", 0);
    int bk = tuner_schedule_param(best, "block_k", 64);
    int ktiles = (64 + bk - 1) / bk;
    /* The template's smallest ring for small tiles is 3 deep; beyond k tiles + 1 a stage is
     * empty. */
    int most = ktiles + 1 > 3 ? ktiles + 1 : 3;
    if (stages > most)
        fprintf(stderr, "the pick for K=64 (block_k %d: %d k tiles) has %d stages\n", bk, ktiles,
                stages);
    CHECK(stages >= 2 && stages <= most);
    /* Where a deeper ring of the same tile is in the space, it is predicted no faster. */
    for (size_t i = 0; i < sp->n; i++) {
        const tuner_schedule *s = &sp->items[i];
        bool same = strcmp(s->template_name, best->template_name) == 0;
        for (int k = 0; k < s->n_params && same; k++)
            same = strcmp(s->params[k].name, "stages") == 0 ||
                   s->params[k].value == tuner_schedule_param(best, s->params[k].name, -1);
        if (same && tuner_schedule_param(s, "stages", 0) > stages)
            CHECK(pred[i] >= pred[order[0]]);
    }
    free(order);
    free(pred);
    tuner_space_free(sp);
}

/* A full-size epilogue operand read per fragment costs a tile more than one loaded by TMA beside
 * the main loop; a bias row, or no operand, costs nothing here (tuner__gemm_operand_us). */
static void test_operand_cost(void)
{
    tuner_target t = {.sm = 90, .arch_specific = true};
    const tuner_arch *a = tuner__arch(&t);
    tuner_op op = t_matmul(TUNER_F16, 0, 0, 4096, 11008, 4096, false, false, 16);
    long long bias[1] = {11008}, full[2] = {4096, 11008};
    t_add_epilogue(&op, TUNER_EW_ADD, 1, bias, TUNER_EW_RELU);
    tuner__gemm_problem p;
    CHECK(a && tuner__gemm_problem_init(&op, &p, NULL) == 0);
    if (!a)
        return;
    CHECK(tuner__gemm_operand_us(&p, a, 16384, 132, 0) == 0.0);
    t_add_epilogue(&op, TUNER_EW_MUL, 2, full, TUNER_EW_RELU);
    CHECK(tuner__gemm_problem_init(&op, &p, NULL) == 0);
    const double frag = tuner__gemm_operand_us(&p, a, 16384, 132, 0), tma = tuner__gemm_operand_us(&p, a, 16384, 132, 1);
    CHECK(frag > 4 * tma && tma > 0.0);
}

/* The branch-free epilogue pass over fragment pairs clamps coordinates into the output: with an
 * odd N the last pair starts at column N - 1 (its own column: the H200 found it given column
 * N - 2's bias), and the pair's second element reads its operand at most at N - 1. */
static void test_odd_n_clamp(void)
{
    tuner_op op = t_matmul(TUNER_F16, 0, 0, 333, 517, 201, false, false, 16);
    const long long bias[1] = {517};
    t_add_epilogue(&op, TUNER_EW_ADD, 1, bias, TUNER_EW_RELU);
    tuner__gemm_problem p;
    if (tuner__gemm_problem_init(&op, &p, NULL) < 0) {
        CHECK(false);
        return;
    }
    tuner_sb sb;
    tuner_sb_init(&sb);
    const char *pair[2] = {"v0", "v1"};
    tuner__gemm_emit_epilogue_pair(&sb, &p, "0", "m", "n", pair, true);
    char *src = tuner_sb_take(&sb);
    CHECK(src && strstr(src, "o_n = min((n), 516)") && strstr(src, "min(o_t1 + 1, 516LL)"));
    free(src);
}

int main(void)
{
    test_odd_n_clamp();
    test_operand_cost();
    test_ring_depth();
    test_short_k_pick();
    if (t_failures)
        fprintf(stderr, "%d check(s) failed\n", (int)t_failures);
    return t_failures ? 1 : 0;
}
