/* tuner/gemm/tests/test_fp8_mma.c - FP8 matmuls on matmul_mma (mma.sync m16n8k32, sm_89 and later;
 * issue 41) on the CPU (suite tuner_gemm, unit).
 *
 * The spaces: matmul_mma alone on sm_89, sm_90, sm_100 and sm_120, beside matmul_wgmma on sm_90a;
 * refusals naming the reason on sm_80 and sm_86 and for the layouts 8-bit fragments cannot read;
 * block_k of 64 or 128 FP8 elements (128 with promotion), per-block scales' warp columns in one
 * n block. The cost model: FP8 on sm_89 at twice the bf16 rate on half the bytes. And a few
 * candidates of several problems (format pairs, every scale kind, the quantizing cast staged and
 * direct, promotion, split-K through the workspace and in a cluster, edges, a batch, a decode
 * shape) plus the reference, generated and compiled by NVRTC for sm_89 (sm_90 for the cluster
 * sums; ptxas in-process, the toolkit's ptxas again for the first of each target), the PTX
 * holding the m16n8k32 FP8 mma.sync of the case's formats. Few compiles on purpose: the suite's
 * budget is nearly spent. TFP8MMA_DUMP=<case name> prints the sources of that case's candidates.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/template.h"
#include "tuner/tests/common.h"

static const tuner_target sm89 = {.sm = 89}, sm90 = {.sm = 90}, sm90a = {.sm = 90, .arch_specific = true};

static tuner_op e4m3_4096(void)
{
    return t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, 4096, 4096, 4096, TUNER_SCALE_TENSOR,
                        TUNER_SCALE_TENSOR, false);
}

static void test_spaces(void)
{
    const tuner_op op = e4m3_4096();
    static const tuner_target mma_only[] = {{89, false}, {90, false}, {100, false}, {120, false}};
    for (size_t t = 0; t < sizeof(mma_only) / sizeof(mma_only[0]); t++) {
        tuner_space *sp = NULL;
        char *err = NULL;
        CHECK(tuner_space_build(&op, &mma_only[t], &sp, &err) == 0 && sp && sp->n > 50);
        if (err)
            fprintf(stderr, "sm_%d: %s\n", mma_only[t].sm, err);
        for (size_t i = 0; sp && i < sp->n; i++) {
            const int bk = tuner_schedule_param(&sp->items[i], "block_k", 0);
            CHECK(strcmp(sp->items[i].template_name, "matmul_mma") == 0 && (bk == 64 || bk == 128));
        }
        /* tune:"none": 128x128 tiles, 128-byte k tiles (128 FP8 elements). */
        if (sp && sp->n) {
            const tuner_schedule *d = &sp->items[tuner_default_index(&op, &mma_only[t], sp)];
            CHECK(tuner_schedule_param(d, "block_m", 0) == 128 && tuner_schedule_param(d, "block_n", 0) == 128 &&
                  tuner_schedule_param(d, "block_k", 0) == 128);
        }
        tuner_space_free(sp);
        free(err);
    }
    /* sm_90a: both templates, ranked together. */
    {
        tuner_space *sp = NULL;
        char *err = NULL;
        size_t n_mma = 0, n_wg = 0;
        CHECK(tuner_space_build(&op, &sm90a, &sp, &err) == 0);
        for (size_t i = 0; sp && i < sp->n; i++) {
            n_mma += strcmp(sp->items[i].template_name, "matmul_mma") == 0;
            n_wg += strcmp(sp->items[i].template_name, "matmul_wgmma") == 0;
        }
        CHECK(n_mma > 50 && n_wg > 20);
        /* At 4096^3 wgmma's peak (1.5x mma.sync's) decides: tune:"none" and the model's best are
         * matmul_wgmma. */
        if (sp && sp->n) {
            size_t *order = calloc(sp->n, sizeof(*order));
            tuner_rank(&op, &sm90a, sp, order, NULL);
            CHECK(strcmp(sp->items[order[0]].template_name, "matmul_wgmma") == 0 &&
                  strcmp(sp->items[tuner_default_index(&op, &sm90a, sp)].template_name, "matmul_wgmma") == 0);
            free(order);
        }
        tuner_space_free(sp);
        free(err);
    }
    /* No FP8 tensor cores before sm_89; 8-bit fragments read A and B K-major only. */
    static const struct {
        tuner_target t;
        bool ta, tb;
        const char *says;
    } no[] = {
        {{80, false}, false, true, "fp8 needs sm_89 mma.sync or sm_90a wgmma: arch sm_80 has no FP8 tensor cores"},
        {{86, false}, false, true, "arch sm_86 has no FP8 tensor cores"},
        {{89, false}, false, false, "trans_b true"},
        {{89, false}, true, true, "trans_a false"},
    };
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        tuner_op o = op;
        o.attrs.matmul.trans_a = no[i].ta;
        o.attrs.matmul.trans_b = no[i].tb;
        tuner_space *sp = NULL;
        char *err = NULL;
        CHECK(tuner_space_build(&o, &no[i].t, &sp, &err) < 0 && err && strstr(err, no[i].says));
        if (err && !strstr(err, no[i].says))
            fprintf(stderr, "refusal %zu: %s\n", i, err);
        tuner_space_free(sp);
        free(err);
    }
    /* The template itself never takes FP8 where the target has no FP8 mma.sync, nor e5m2 x e5m2,
     * nor an unaligned operand (a space builder that did not ask tuner_fp8_unsupported). */
    const tuner_template *mma = tuner__template_find("matmul_mma");
    tuner_op bad = op;
    bad.inputs[1].dtype = TUNER_F8E5M2;
    bad.inputs[0].dtype = TUNER_F8E5M2;
    tuner_op unal = op;
    unal.inputs[1].align = 8;
    CHECK(mma && mma->applies(&op, &sm89) && !mma->applies(&op, &(tuner_target){.sm = 86}) &&
          !mma->applies(&bad, &sm89) && !mma->applies(&unal, &sm89));

    /* Promotion (fast_accum false, per-block scales): every candidate's k tile is one 128-k
     * block; per-block scales: each warp's columns in one 128-wide n block. */
    const tuner_op pro[2] = {
        t_fp8_promoted(e4m3_4096()),
        t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, 4096, 7168, 7168, TUNER_SCALE_BLOCK, TUNER_SCALE_BLOCK,
                     false),
    };
    for (int k = 0; k < 2; k++) {
        tuner_space *sp = NULL;
        char *err = NULL;
        CHECK(tuner_space_build(&pro[k], &sm89, &sp, &err) == 0 && sp && sp->n > 10);
        for (size_t i = 0; sp && i < sp->n; i++) {
            const tuner_schedule *s = &sp->items[i];
            const int bn = tuner_schedule_param(s, "block_n", 0), wn = tuner_schedule_param(s, "warp_n", 0);
            CHECK(tuner_schedule_param(s, "block_k", 0) == 128);
            if (k == 1)
                CHECK((bn % 128 == 0 || 128 % bn == 0) && 128 % wn == 0);
        }
        /* tune:"none": 128x128 tiles of 64x32 warp tiles (64x64 ones would need 256 registers). */
        if (sp && sp->n) {
            const tuner_schedule *d = &sp->items[tuner_default_index(&pro[k], &sm89, sp)];
            CHECK(tuner_schedule_param(d, "block_m", 0) == 128 && tuner_schedule_param(d, "block_n", 0) == 128 &&
                  tuner_schedule_param(d, "warp_n", 0) == 32 && tuner_schedule_param(d, "stages", 0) == 3);
        }
        tuner_space_free(sp);
        free(err);
    }
}

/* The best predicted time of op's matmul_mma candidates on t. */
static double best_mma_us(const tuner_op *op, const tuner_target *t)
{
    double best = 1e30;
    tuner_space *sp = NULL;
    char *err = NULL;
    const tuner_template *tp = tuner__template_find("matmul_mma");
    if (tuner_space_build(op, t, &sp, &err) == 0)
        for (size_t j = 0; j < sp->n; j++)
            if (strcmp(sp->items[j].template_name, "matmul_mma") == 0) {
                const double us = tp->predict_us(op, t, &sp->items[j]);
                best = us < best ? us : best;
            }
    tuner_space_free(sp);
    free(err);
    return best;
}

/* Ada's FP8 mma.sync at twice the bf16 rate: a compute-bound GEMM's best predicted time about
 * halves; a decode GEMM's (weights streamed) too, by the bytes. Promotion costs something: its
 * own k tile of accumulators leaves no registers for 64x64 warp tiles (128 + 128 floats), so
 * its best tiles have 64x32 ones (4096^3: about 1.35x the fast accumulation's time). */
static void test_cost(void)
{
    const struct {
        long long m, n, k;
    } shapes[] = {{8192, 8192, 8192}, {16, 8192, 8192}};
    for (size_t i = 0; i < 2; i++) {
        tuner_op f8 = t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, shapes[i].m, shapes[i].n, shapes[i].k,
                                   TUNER_SCALE_TENSOR, TUNER_SCALE_TENSOR, false);
        tuner_op f16 = t_matmul(TUNER_BF16, 0, 0, shapes[i].m, shapes[i].n, shapes[i].k, false, true, 16);
        const double a = best_mma_us(&f8, &sm89), b = best_mma_us(&f16, &sm89);
        const double r = a / b;
        if (!(r > 0.4 && r < 0.7)) {
            fprintf(stderr, "cost %lldx%lldx%lld on sm_89: fp8 %.1f us, bf16 %.1f us (ratio %.2f)\n", shapes[i].m,
                    shapes[i].n, shapes[i].k, a, b, r);
            t_failures++;
        }
    }
    tuner_op fast = e4m3_4096(), slow = t_fp8_promoted(e4m3_4096());
    const double tf = best_mma_us(&fast, &sm89), ts = best_mma_us(&slow, &sm89);
    CHECK(ts > tf && ts < 1.5 * tf);
    if (!(ts > tf && ts < 1.5 * tf))
        fprintf(stderr, "promoted 4096^3 on sm_89: %.1f us, fast accumulation %.1f us\n", ts, tf);
}

/* Compiles program pr of case `what` for t (NVRTC, then ptxas in-process for the cubin; the first
 * program of each target through t_compile_check, which also runs the toolkit's ptxas) and checks
 * its PTX for the m16n8k32 FP8 mma of formats ta x tb and an entry per launch. */
static void compile_fp8(const char *what, const tuner_program *pr, const tuner_target *t, const char *ta,
                        const char *tb)
{
    static bool checked[256];
    const int id = tuner_target_id_of(t) & 255;
    if (!checked[id]) {
        checked[id] = true;
        CHECK(t_compile_check(what, pr->source, t, pr, NULL));
    }
    char want[96];
    snprintf(want, sizeof(want), "mma.sync.aligned.m16n8k32.row.col.f32.%s.%s.f32", ta, tb);
    tuner_binary *b = NULL;
    char *err = NULL;
    if (tuner_compile(pr->source, t, &b, &err) == 0) {
        CHECK(b->cubin_len > 0 && strstr(b->ptx, want) != NULL);
        if (!strstr(b->ptx, want))
            fprintf(stderr, "%s: no %s in the PTX\n", what, want);
        for (int k = 0; k < pr->n_kernels; k++) {
            char needle[96];
            snprintf(needle, sizeof(needle), ".entry %s(", pr->kernels[k].name);
            CHECK(strstr(b->ptx, needle) != NULL);
        }
    } else {
        fprintf(stderr, "%s: tuner_compile failed: %s\n", what, err ? err : "?");
        if (getenv("HIDET_TEST_DUMP"))
            fprintf(stderr, "%s\n", pr->source);
        t_failures++;
    }
    tuner_binary_free(b);
    free(err);
}

/* The first candidate of sp for which want() holds, or sp->n. */
static size_t first_where(const tuner_space *sp, bool (*want)(const tuner_schedule *))
{
    for (size_t j = 0; j < sp->n; j++)
        if (want(&sp->items[j]))
            return j;
    return sp->n;
}

static bool is_split_ws(const tuner_schedule *s)
{
    return tuner_schedule_param(s, "split_k", 1) > 1 && !tuner_schedule_param(s, "split_cluster", 0);
}
static bool is_split_cluster(const tuner_schedule *s)
{
    return tuner_schedule_param(s, "split_k", 1) > 1 && tuner_schedule_param(s, "split_cluster", 0);
}
static bool is_staged(const tuner_schedule *s)
{
    return tuner_schedule_param(s, "stage_out", 0) == 1;
}
static bool is_direct(const tuner_schedule *s)
{
    return tuner_schedule_param(s, "stage_out", 0) == 0 && tuner_schedule_param(s, "split_k", 1) == 1;
}
static bool is_big_256(const tuner_schedule *s)
{
    return tuner_schedule_param(s, "block_n", 0) == 256;
}

static void test_compile(void)
{
    const struct {
        const char *name;
        tuner_op op;
        const tuner_target *t;
        const char *ta, *tb;
        bool (*also)(const tuner_schedule *); /* a second candidate besides the model's best */
    } cases[] = {
        {"e4m3_tensor_4096", e4m3_4096(), &sm89, "e4m3", "e4m3", is_staged},
        {"e4m3_e5m2_rowcol_bias_gelu_decode",
         t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E5M2, TUNER_F16, 0, 16, 8192, 8192, TUNER_SCALE_ROW, TUNER_SCALE_COL, true),
         &sm89, "e4m3", "e5m2", is_split_ws},
        {"e5m2_e4m3_b2_edges_f32",
         t_fp8_matmul(TUNER_F8E5M2, TUNER_F8E4M3, TUNER_F32, 2, 200, 328, 1040, TUNER_SCALE_NONE, TUNER_SCALE_COL, false),
         &sm89, "e5m2", "e4m3", NULL},
        {"e4m3_quantize_e4m3",
         t_fp8_quantized(t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, 512, 1024, 2048, TUNER_SCALE_TENSOR,
                                      TUNER_SCALE_TENSOR, true)),
         &sm89, "e4m3", "e4m3", is_direct},
        {"e4m3_promoted_f32_split_cluster",
         t_fp8_promoted(t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E5M2, TUNER_F32, 0, 64, 520, 8192, TUNER_SCALE_TENSOR,
                                     TUNER_SCALE_NONE, false)),
         &sm90, "e4m3", "e5m2", is_split_cluster},
        {"e4m3_block_scales_edges",
         t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, 1000, 704, 1040, TUNER_SCALE_BLOCK, TUNER_SCALE_BLOCK,
                      true),
         &sm89, "e4m3", "e4m3", is_big_256},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const tuner_op *op = &cases[c].op;
        const tuner_target *t = cases[c].t;
        tuner_space *sp = NULL;
        char *err = NULL;
        if (tuner_space_build(op, t, &sp, &err) < 0) {
            fprintf(stderr, "%s: no space: %s\n", cases[c].name, err ? err : "?");
            t_failures++;
            free(err);
            continue;
        }
        size_t *order = calloc(sp->n, sizeof(*order));
        tuner_rank(op, t, sp, order, NULL);
        size_t pick[2] = {order[0], sp->n};
        if (cases[c].also) {
            pick[1] = first_where(sp, cases[c].also);
            if (pick[1] == sp->n) {
                fprintf(stderr, "%s: no candidate of the wanted kind\n", cases[c].name);
                t_failures++;
            }
        }
        for (int k = 0; k < 2 && pick[k] < sp->n; k++) {
            const tuner_schedule *s = &sp->items[pick[k]];
            tuner_program *pr = NULL;
            char what[160];
            snprintf(what, sizeof(what), "%s #%zu", cases[c].name, pick[k]);
            CHECK(strcmp(s->template_name, "matmul_mma") == 0);
            if (tuner_generate(op, t, s, &pr, &err) < 0) {
                fprintf(stderr, "%s: generate failed: %s\n", what, err ? err : "?");
                t_failures++;
                free(err);
                err = NULL;
                continue;
            }
            /* 16-byte copies of the byte rows; promotion's own k tile and, per block, its
             * scales; split-K: the workspace's reduction kernel, or the cluster's sums. */
            CHECK(strstr(pr->source, "gm_cp16(") != NULL);
            if (!op->attrs.matmul.fast_accum)
                CHECK(strstr(pr->source, "gm_mma_f8_z(gm_t[i][j]") && strstr(pr->source, "gm_t[i][j][e]"));
            else
                CHECK(strstr(pr->source, "gm_mma_f8(acc[i][j]") && !strstr(pr->source, "gm_t["));
            if (op->attrs.matmul.scale_a == TUNER_SCALE_BLOCK)
                CHECK(strstr(pr->source, "gm_bs[i][h] = __ldg(in2 +") && strstr(pr->source, "fmaf(gm_t[i][j][e], gm_bs"));
            if (is_split_ws(s))
                CHECK(pr->n_kernels == 2 && pr->workspace_bytes > 0);
            if (is_split_cluster(s))
                CHECK(pr->n_kernels == 1 && strstr(pr->source, "__cluster_dims__"));
            /* Scales multiply the accumulators in the epilogue; a quantizing cast stores bytes. */
            if (op->attrs.matmul.scale_a == TUNER_SCALE_ROW && op->attrs.matmul.scale_b == TUNER_SCALE_COL)
                CHECK(strstr(pr->source, "= o_v0 * (o_sa * __ldg(in3 + o_n));") != NULL);
            if (tuner_dtype_is_fp8(op->output.dtype))
                CHECK(strstr(pr->source, "gm_cvt_f8e4m3x2(o_v0, o_v1)") && strstr(pr->source, "hd_round_f8e4m3("));
            if (getenv("TFP8MMA_DUMP") && strstr(what, getenv("TFP8MMA_DUMP")))
                fprintf(stderr, "==== %s\n%s\n", what, pr->source);
            if (k % t_sub.every == t_sub.rest) /* the sanitizer build's sample (t_subset_init) */
                compile_fp8(what, pr, t, cases[c].ta, cases[c].tb);
            tuner_program_free(pr);
        }
        free(order);
        tuner_space_free(sp);
    }
    /* Blackwell's targets keep the sm_89 instruction (no .kind qualifier needed): a small op's
     * default through NVRTC and ptxas for sm_100 and sm_120. */
    static const tuner_target blackwell[] = {{100, false}, {120, false}};
    for (int b = 0; b < 2; b++) {
        const tuner_op small = t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E5M2, TUNER_BF16, 0, 256, 256, 256, TUNER_SCALE_TENSOR,
                                            TUNER_SCALE_TENSOR, false);
        tuner_space *sp = NULL;
        tuner_program *pr = NULL;
        char *e = NULL;
        if (tuner_space_build(&small, &blackwell[b], &sp, &e) == 0 &&
            tuner_generate(&small, &blackwell[b], &sp->items[tuner_default_index(&small, &blackwell[b], sp)], &pr, &e) == 0)
            compile_fp8(b ? "default sm_120" : "default sm_100", pr, &blackwell[b], "e4m3", "e5m2");
        else {
            fprintf(stderr, "sm_%d: %s\n", blackwell[b].sm, e ? e : "?");
            t_failures++;
        }
        tuner_program_free(pr);
        tuner_space_free(sp);
        free(e);
    }
    /* The verification reference of an FP8 op compiles for sm_89 (its decoders are software). */
    tuner_op op = t_fp8_quantized(t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E5M2, TUNER_BF16, 0, 100, 96, 256,
                                               TUNER_SCALE_ROW, TUNER_SCALE_COL, false));
    tuner_program *ref = NULL;
    char *err = NULL;
    CHECK(tuner_reference(&op, &sm89, &ref, &err) == 0 && ref && strstr(ref->source, "gm_f8"));
    if (ref)
        CHECK(t_compile_check("reference sm_89", ref->source, &sm89, ref, NULL));
    tuner_program_free(ref);
    free(err);
}

int main(int argc, char **argv)
{
    if (t_subset_init(&argc, argv) < 0)
        return 2;
    test_spaces();
    test_cost();
    test_compile();
    if (t_failures) {
        fprintf(stderr, "test_fp8_mma: %d failure(s)\n", (int)t_failures);
        return 1;
    }
    printf("test_fp8_mma: all passed\n");
    return 0;
}
