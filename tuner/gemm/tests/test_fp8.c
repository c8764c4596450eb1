/* tuner/gemm/tests/test_fp8.c - FP8 matmuls (issue 41) on the CPU (suite tuner_gemm, unit).
 *
 * The FP8 decoders against every byte of both formats; the spaces: matmul_wgmma on sm_90a (beside
 * matmul_mma's mma.sync candidates: test_fp8_mma.c has those), refusals naming the reason on the
 * targets without FP8 tensor cores and the layouts 8-bit fragments cannot read; the cost model (FP8 at twice the
 * fp16 tensor rate); and a few candidates of several FP8 problems (pairs of formats, scales,
 * epilogues, batches, edge tiles, decode shapes; a default, the model's best and the first of
 * each schedule feature) plus the reference, generated and compiled by NVRTC for sm_90a (ptxas
 * in-process, the toolkit's ptxas again for the first), the PTX holding the FP8 wgmma; B given
 * [K,N] transposed in the kernel (test_mn_major) or by a launch before it (test_pretranspose). Few
 * compiles on purpose: the suite's budget is nearly spent. TFP8_DUMP=<case name> prints the sources
 * of that case's candidates.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tuner/gemm/gemm.h"
#include "tuner/template.h"
#include "tuner/tests/common.h"
#include "tuner/tests/host_values.h"

static const tuner_target sm90a = {.sm = 90, .arch_specific = true};

/* An independent decoder: sign, exponent and mantissa by the formats' definitions, in double. */
static double decode_slow(tuner_dtype dt, unsigned b)
{
    const int eb = dt == TUNER_F8E4M3 ? 4 : 5, mb = 7 - eb, bias = dt == TUNER_F8E4M3 ? 7 : 15;
    const int e = (int)(b >> mb) & ((1 << eb) - 1), m = (int)b & ((1 << mb) - 1);
    const double sign = b & 0x80 ? -1.0 : 1.0;
    if (dt == TUNER_F8E4M3 && e == 15 && m == 7)
        return NAN;
    if (dt == TUNER_F8E5M2 && e == 31)
        return m ? NAN : sign * INFINITY;
    if (e == 0)
        return sign * ldexp((double)m / (1 << mb), 1 - bias);
    return sign * ldexp(1.0 + (double)m / (1 << mb), e - bias);
}

static void test_decode(void)
{
    for (int d = 0; d < 2; d++) {
        const tuner_dtype dt = d ? TUNER_F8E5M2 : TUNER_F8E4M3;
        int nans = 0;
        for (unsigned b = 0; b < 256; b++) {
            const float f = tuner_fp8_to_f32(dt, (uint8_t)b);
            const double want = decode_slow(dt, b);
            if (isnan(want)) {
                nans++;
                CHECK(isnan(f));
                continue;
            }
            if ((double)f != want || !signbit(f) != !signbit(want)) {
                fprintf(stderr, "%s byte 0x%02x: %.9g, want %.9g\n", tuner_dtype_name(dt), b, (double)f, want);
                t_failures++;
            }
        }
        CHECK(nans == (d ? 6 : 2));
    }
    CHECK(tuner_fp8_to_f32(TUNER_F8E4M3, 0x7e) == 448.0f && tuner_fp8_to_f32(TUNER_F8E4M3, 0x01) == 0x1p-9f);
    CHECK(tuner_fp8_to_f32(TUNER_F8E4M3, 0xb8) == -1.0f && tuner_fp8_to_f32(TUNER_F8E4M3, 0x80) == 0.0f);
    CHECK(tuner_fp8_to_f32(TUNER_F8E5M2, 0x7b) == 57344.0f && tuner_fp8_to_f32(TUNER_F8E5M2, 0x01) == 0x1p-16f);
    CHECK(isinf(tuner_fp8_to_f32(TUNER_F8E5M2, 0xfc)) && tuner_fp8_to_f32(TUNER_F8E5M2, 0x3c) == 1.0f);
}

/* The encoder (nearest, ties to even, saturating) against a search over every code: each code's
 * value, the midpoints between neighbours (ties: the even code), just off them, random floats
 * over every binade, beyond the largest value, zeros, infinities and NaN. */
static uint8_t encode_slow(tuner_dtype dt, float f)
{
    if (f != f)
        return 0x7f;
    const double max = dt == TUNER_F8E4M3 ? 448.0 : 57344.0;
    const double a = fabs((double)f);
    const uint8_t sign = signbit(f) ? 0x80 : 0;
    if (a >= max)
        return sign | (dt == TUNER_F8E4M3 ? 0x7e : 0x7b);
    int best = 0;
    double bd = INFINITY;
    for (int c = 0; c < 0x80; c++) {
        const double v = decode_slow(dt, (unsigned)c);
        if (isnan(v) || isinf(v))
            continue;
        const double d = fabs(v - a);
        if (d < bd || (d == bd && !(c & 1))) {
            bd = d;
            best = c;
        }
    }
    return (uint8_t)(sign | best);
}

static void test_encode(void)
{
    for (int d = 0; d < 2; d++) {
        const tuner_dtype dt = d ? TUNER_F8E5M2 : TUNER_F8E4M3;
        float probes[4096];
        int n = 0;
        for (unsigned c = 0; c < 0x7f && n < 4000; c++) {
            const double v = decode_slow(dt, c), w = decode_slow(dt, c + 1);
            if (isnan(v) || isinf(v))
                continue;
            probes[n++] = (float)v;
            if (!isnan(w) && !isinf(w)) {
                const float mid = (float)((v + w) / 2);
                probes[n++] = mid;
                probes[n++] = nextafterf(mid, 0.0f);
                probes[n++] = nextafterf(mid, INFINITY);
            }
        }
        for (int i = 0; i < 3000 && n < 4090; i++)
            probes[n++] = ldexpf((float)(t_rnd_int(0, 1 << 20)) / (float)(1 << 20), t_rnd_int(-20, 17));
        probes[n++] = 1e30f;
        probes[n++] = INFINITY;
        probes[n++] = 0.0f;
        int bad = 0;
        for (int i = 0; i < n; i++)
            for (int sg = 0; sg < 2; sg++) {
                const float f = sg ? -probes[i] : probes[i];
                const uint8_t got = tuner_f32_to_fp8(dt, f), want = encode_slow(dt, f);
                if (got != want && bad++ < 5)
                    fprintf(stderr, "%s encode %.9g: 0x%02x, want 0x%02x\n", tuner_dtype_name(dt), (double)f, got, want);
            }
        CHECK(bad == 0);
        CHECK((tuner_f32_to_fp8(dt, NAN) & 0x7f) == 0x7f && isnan(tuner_fp8_to_f32(dt, tuner_f32_to_fp8(dt, NAN))));
    }
}

static void test_spaces(void)
{
    tuner_op op = t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, 4096, 4096, 4096, TUNER_SCALE_TENSOR,
                         TUNER_SCALE_TENSOR, false);
    tuner_space *sp = NULL;
    char *err = NULL;
    CHECK(tuner_space_build(&op, &sm90a, &sp, &err) == 0 && sp && sp->n > 20);
    size_t pingpong = 0, staged = 0, pairs = 0;
    for (size_t i = 0; sp && i < sp->n; i++) {
        CHECK(strcmp(sp->items[i].template_name, "matmul_wgmma") == 0 ||
              strcmp(sp->items[i].template_name, "matmul_mma") == 0);
        pingpong += tuner_schedule_param(&sp->items[i], "pingpong", 0) == 1;
        staged += tuner_schedule_param(&sp->items[i], "stage_out", 0) != 0;
        pairs += tuner_schedule_param(&sp->items[i], "cluster", 1) == 2;
    }
    CHECK(pingpong > 0 && staged > 0 && pairs > 0);
    tuner_space_free(sp);
    free(err);

    /* Targets without FP8 tensor cores refuse by name, and so do MN-major operands where only
     * mma.sync runs (sm_89, sm_90: 8-bit fragments are read K-major); sm_90a's matmul_wgmma
     * transposes them in the kernel (test_mn_major), so there only a row length that is not
     * 16 bytes is refused. */
    static const struct {
        tuner_target t;
        bool ta, tb;
        const char *says;
    } no[] = {
        {{80, false}, false, true, "fp8 needs sm_89 mma.sync or sm_90a wgmma"},
        {{86, false}, false, true, "arch sm_86 has no FP8 tensor cores"},
        {{89, false}, false, false, "trans_b true"},
        {{90, false}, true, true, "trans_a false"},
    };
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        tuner_op o = op;
        o.attrs.matmul.trans_a = no[i].ta;
        o.attrs.matmul.trans_b = no[i].tb;
        if (no[i].ta) {
            o.inputs[0].shape[0] = 4096; /* [K, M] */
        }
        sp = NULL;
        err = NULL;
        CHECK(tuner_space_build(&o, &no[i].t, &sp, &err) < 0 && err && strstr(err, no[i].says));
        if (err && !strstr(err, no[i].says))
            fprintf(stderr, "refusal %zu: %s\n", i, err);
        tuner_space_free(sp);
        free(err);
    }
    /* The SIMT template never takes FP8 operands; matmul_mma does on sm_90a too (mma.sync
     * m16n8k32), ranked with matmul_wgmma's candidates. */
    const tuner_template *mma = tuner__template_find("matmul_mma"), *simt = tuner__template_find("matmul_simt");
    CHECK(mma && simt && mma->applies(&op, &sm90a) && !simt->applies(&op, &sm90a));
}

/* How many of op's candidates on sm_90a have every "name=value" of spec. */
static size_t count_with(const tuner_op *op, const char *spec)
{
    tuner_space *sp = NULL;
    size_t n = 0;
    if (tuner_space_build(op, &sm90a, &sp, NULL) == 0)
        for (size_t i = 0; i < sp->n; i++)
            n += tuner_schedule_matches(&sp->items[i], spec);
    tuner_space_free(sp);
    return n;
}

/* A matmul_wgmma schedule: v, the values of block_m, block_n, stages, consumers, swizzle,
 * pingpong, stage_out, cluster, split_k, stream_k and cluster_n, then `extra` set to extra_v. */
static tuner_schedule wg_schedule(const int v[11], const char *extra, int extra_v)
{
    static const char *const names[11] = {"block_m", "block_n",   "stages",  "consumers", "swizzle", "pingpong",
                                          "stage_out", "cluster", "split_k", "stream_k",  "cluster_n"};
    tuner_schedule s = {.template_name = "matmul_wgmma"};
    for (int i = 0; i < 11; i++)
        tuner__gemm_param(&s, names[i], v[i]);
    tuner__gemm_param(&s, extra, extra_v);
    return s;
}

/* Swapped operands (C^T = B^T A^T: a decode batch's few rows on wgmma's N side, in tiles of any
 * multiple of 8) for FP8 with both operands K-major and the scales applied at the output's
 * coordinates; none where the kernel would transpose an operand (B [K,N] is swapped only once
 * transposed before the GEMM: test_pretranspose), where k tiles are promoted
 * (per-block scales, slow accumulation: their scales follow the kernel's rows), or for an FP8
 * output. */
static void test_swap(void)
{
    const tuner_op decode = t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, 16, 8192, 8192, TUNER_SCALE_TENSOR,
                                         TUNER_SCALE_TENSOR, false);
    const size_t n = count_with(&decode, "swap=1");
    CHECK(n >= 20, "16x8192x8192 e4m3: %zu swapped candidates", n);
    const tuner_op rowcol = t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E5M2, TUNER_F16, 0, 100, 1024, 512, TUNER_SCALE_ROW,
                                         TUNER_SCALE_COL, true);
    CHECK(count_with(&rowcol, "swap=1") > 0, "rows and columns scaled: no swapped candidate");
    /* No swapped pairs (16-bit only: FP8 ones have not run on a GPU), where M holds the two
     * tiles that 16-bit operands would pair; a schedule asking for one is refused. */
    CHECK(count_with(&rowcol, "swap=1,cluster_n=2") == 0, "FP8 swapped pairs offered");
    static const int pv[11] = {64, 56, 8, 1, 8, 0, 0, 1, 1, 0, 2};
    const tuner_schedule pair = wg_schedule(pv, "swap", 1);
    tuner_program *pr = NULL;
    char *err = NULL;
    CHECK(tuner_generate(&rowcol, &sm90a, &pair, &pr, &err) != 0, "an FP8 swapped pair generated");
    tuner_program_free(pr);
    free(err);
    const tuner_op none[] = {
        t_fp8_mn(decode, true, false),
        t_fp8_promoted(decode),
        t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, 16, 1024, 1024, TUNER_SCALE_BLOCK, TUNER_SCALE_BLOCK,
                     false),
        t_fp8_quantized(t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, 16, 1024, 1024, TUNER_SCALE_TENSOR,
                                     TUNER_SCALE_TENSOR, false)),
    };
    for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
        CHECK(count_with(&none[i], "swap=1") == 0, "case %zu: swapped candidates", i);
}

/* FP8 at twice fp16's tensor rate, half its operand bytes: a compute-bound GEMM's best predicted
 * time about halves; a decode GEMM's (weights streamed) too, by the bytes. */
static void test_cost(void)
{
    const struct {
        long long m, n, k;
    } shapes[] = {{8192, 8192, 8192}, {16, 8192, 8192}};
    for (size_t i = 0; i < 2; i++) {
        tuner_op f8 = t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, shapes[i].m, shapes[i].n, shapes[i].k,
                             TUNER_SCALE_TENSOR, TUNER_SCALE_TENSOR, false);
        tuner_op f16 = t_matmul(TUNER_BF16, 0, 0, shapes[i].m, shapes[i].n, shapes[i].k, false, true, 16);
        double best[2] = {1e30, 1e30};
        const tuner_op *ops[2] = {&f8, &f16};
        for (int k = 0; k < 2; k++) {
            tuner_space *sp = NULL;
            char *err = NULL;
            if (tuner_space_build(ops[k], &sm90a, &sp, &err) == 0) {
                const tuner_template *tp = tuner__template_find("matmul_wgmma");
                for (size_t j = 0; j < sp->n; j++)
                    if (strcmp(sp->items[j].template_name, "matmul_wgmma") == 0) {
                        const double us = tp->predict_us(ops[k], &sm90a, &sp->items[j]);
                        best[k] = us < best[k] ? us : best[k];
                    }
            }
            tuner_space_free(sp);
            free(err);
        }
        const double r = best[0] / best[1];
        if (!(r > 0.4 && r < 0.65)) {
            fprintf(stderr, "cost %lldx%lldx%lld: fp8 %.1f us, bf16 %.1f us (ratio %.2f)\n", shapes[i].m, shapes[i].n,
                    shapes[i].k, best[0], best[1], r);
            t_failures++;
        }
    }
}

/* A quantize step with an amax (tuner_ew_step.amax): every store path keeps the largest |value|
 * the cast receives, in range only, before the cast; the consumers publish it with an atomic
 * max on its input. Without one, nothing of it. */
static void check_amax(const tuner_op *op, const char *src)
{
    const int in = tuner_fp8_amax_input(op);
    char want[96];
    snprintf(want, sizeof(want), "atomicMax(reinterpret_cast<int *>(const_cast<float *>(in%d))", in);
    if (in < 0) {
        CHECK(!strstr(src, "gm_amax_v") && !strstr(src, "atomicMax("));
        return;
    }
    const char *upd = strstr(src, "gm_amax_v = fmaxf(gm_amax_v, o_ok0 ? fabsf(o_v0) : 0.0f);");
    CHECK(upd && strstr(upd, "hd_round_f8e4m3(") && strstr(src, "__reduce_max_sync(") && strstr(src, want));
}

/* Compiles program pr of case `what` and checks its PTX for the FP8 wgmma of formats ta x tb. */
static void compile_fp8(const char *what, const tuner_program *pr, const char *ta, const char *tb)
{
    char want[64];
    snprintf(want, sizeof(want), ".f32.%s.%s", ta, tb);
    tuner_binary *b = NULL;
    char *err = NULL;
    CHECK(t_compile_check(what, pr->source, &sm90a, pr, NULL));
    if (tuner_compile(pr->source, &sm90a, &b, &err) == 0) {
        const char *w = strstr(b->ptx, "wgmma.mma_async.sync.aligned.m64n");
        CHECK(w && strstr(w, "k32") && strstr(b->ptx, want));
        if (!w || !strstr(b->ptx, want))
            fprintf(stderr, "%s: no FP8 wgmma (%s) in the PTX\n", what, want);
    }
    tuner_binary_free(b);
    free(err);
}

static void test_compile(void)
{
    const struct {
        const char *name;
        tuner_op op;
        const char *ta, *tb;
    } cases[] = {
        {"e4m3_tensor_4096", t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, 4096, 4096, 4096, TUNER_SCALE_TENSOR,
                                    TUNER_SCALE_TENSOR, false), "e4m3", "e4m3"},
        {"e4m3_e5m2_rowcol_bias_gelu_decode", t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E5M2, TUNER_F16, 0, 16, 8192, 8192,
                                                     TUNER_SCALE_ROW, TUNER_SCALE_COL, true), "e4m3", "e5m2"},
        {"e5m2_e4m3_b2_edges_f32", t_fp8_matmul(TUNER_F8E5M2, TUNER_F8E4M3, TUNER_F32, 2, 200, 328, 1040, TUNER_SCALE_NONE,
                                          TUNER_SCALE_COL, false), "e5m2", "e4m3"},
        {"e4m3_quantize_e4m3", t_fp8_quantized(t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, 512, 1024, 2048,
                                                TUNER_SCALE_TENSOR, TUNER_SCALE_TENSOR, true)), "e4m3", "e4m3"},
        {"e4m3_quantize_amax_edges", t_fp8_quantized_amax(t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, 1000,
                                                                      1000, 2048, TUNER_SCALE_ROW, TUNER_SCALE_COL, true)),
         "e4m3", "e4m3"},
        {"e4m3_promoted_f32", t_fp8_promoted(t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E5M2, TUNER_F32, 0, 300, 520, 8192,
                                                  TUNER_SCALE_TENSOR, TUNER_SCALE_NONE, false)), "e4m3", "e5m2"},
        {"e4m3_block_scales_edges", t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, 1000, 704, 1040, TUNER_SCALE_BLOCK,
                                           TUNER_SCALE_BLOCK, true), "e4m3", "e4m3"},
    };
    /* Per case: the model's best, then the first schedule with each feature not compiled yet. */
    static const char *const features[] = {"pingpong", "stage_out", "cluster", "cluster_n", "split_k", "stream_k", "swap"};
    bool seen[7] = {false};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const tuner_op *op = &cases[c].op;
        tuner_space *sp = NULL;
        char *err = NULL;
        if (tuner_space_build(op, &sm90a, &sp, &err) < 0) {
            fprintf(stderr, "%s: no space: %s\n", cases[c].name, err ? err : "?");
            t_failures++;
            free(err);
            continue;
        }
        size_t *order = calloc(sp->n, sizeof(*order));
        tuner_rank(op, &sm90a, sp, order, NULL);
        size_t pick[8];
        int np = 0;
        /* The model's best matmul_wgmma candidate (matmul_mma's share the space: test_fp8_mma.c). */
        for (size_t j = 0; j < sp->n && np == 0; j++)
            if (strcmp(sp->items[order[j]].template_name, "matmul_wgmma") == 0)
                pick[np++] = order[j];
        /* (The features the model's best has count as compiled.) */
        for (int f = 0; np > 0 && f < 7; f++)
            seen[f] = seen[f] || tuner_schedule_param(&sp->items[pick[0]], features[f], f == 2 || f == 3 || f == 4 ? 1 : 0) !=
                                     (f == 2 || f == 3 || f == 4 ? 1 : 0);
        for (size_t j = 0; j < sp->n && np < 3; j++)
            for (int f = 0; f < 7 && strcmp(sp->items[j].template_name, "matmul_wgmma") == 0; f++) {
                const int v = tuner_schedule_param(&sp->items[j], features[f], f == 2 || f == 3 || f == 4 ? 1 : 0);
                if (!seen[f] && v != (f == 2 || f == 3 || f == 4 ? 1 : 0)) {
                    seen[f] = true;
                    pick[np++] = j;
                    break;
                }
            }
        /* A quantizing epilogue: one staged and one register-stored candidate for sure. */
        for (int so = 0; so < 2 && tuner_dtype_is_fp8(op->output.dtype); so++) {
            bool have = false;
            for (int k = 0; k < np; k++)
                have |= (tuner_schedule_param(&sp->items[pick[k]], "stage_out", 0) != 0) == (so == 1);
            for (size_t j = 0; j < sp->n && !have; j++)
                if (strcmp(sp->items[j].template_name, "matmul_wgmma") == 0 &&
                    (tuner_schedule_param(&sp->items[j], "stage_out", 0) != 0) == (so == 1)) {
                    pick[np++] = j;
                    have = true;
                }
        }
        for (int k = 0; k < np; k++) {
            tuner_program *pr = NULL;
            char what[160];
            snprintf(what, sizeof(what), "%s #%zu", cases[c].name, pick[k]);
            if (tuner_generate(op, &sm90a, &sp->items[pick[k]], &pr, &err) < 0) {
                fprintf(stderr, "%s: generate failed: %s\n", what, err ? err : "?");
                t_failures++;
                free(err);
                err = NULL;
                continue;
            }
            /* A and B arrive in boxes of 128 one-byte k elements (one 128-byte swizzle row). */
            int fp8_maps = 0;
            for (int l = 0; l < pr->n_kernels; l++)
                for (int m = 0; m < pr->kernels[l].n_maps; m++) {
                    const tuner_tmap *tm = &pr->kernels[l].maps[m];
                    if (tm->buf != TUNER_BUF_INPUT0 && tm->buf != TUNER_BUF_INPUT0 + 1)
                        continue;
                    fp8_maps++;
                    CHECK(tm->dtype == op->inputs[tm->buf - TUNER_BUF_INPUT0].dtype && tm->box[0] == 128 &&
                          tm->swizzle == 128 && tuner_tmap_cu_dtype(tm) == 0);
                }
            CHECK(fp8_maps >= 2);
            /* Without fast accumulation: each k tile's own accumulators, added to the tile's. */
            if (!op->attrs.matmul.fast_accum)
                CHECK(strstr(pr->source, "wg_mma_z(wg_t[i]") != NULL &&
                      (op->attrs.matmul.scale_a == TUNER_SCALE_BLOCK || strstr(pr->source, "acc[i][j] += wg_t[i][j];")));
            /* Per-block scales: promoted scaled; tiles within a 128-wide n block. */
            if (op->attrs.matmul.scale_a == TUNER_SCALE_BLOCK)
                CHECK(strstr(pr->source, "wg_mma_z(wg_t[i]") && strstr(pr->source, "wg_bs[i][h] = ") &&
                      128 % tuner_schedule_param(&sp->items[pick[k]], "block_n", 0) == 0);
            /* A quantizing epilogue stores FP8 through the saturating conversion, staged (a
             * 1-byte output map) or straight from registers. */
            if (tuner_dtype_is_fp8(op->output.dtype)) {
                CHECK(strstr(pr->source, "gm_cvt_f8e4m3x2(o_v0, o_v1)") && strstr(pr->source, "hd_round_f8e4m3("));
                if (tuner_schedule_param(&sp->items[pick[k]], "stage_out", 0)) {
                    /* whole 128-byte boxes: every column of the tile goes out */
                    CHECK(tuner_schedule_param(&sp->items[pick[k]], "block_n", 0) % 128 == 0 &&
                          strstr(pr->source, "wg_tma_st2(wg_map_c"));
                }
                if (tuner_schedule_param(&sp->items[pick[k]], "stage_out", 0))
                    for (int m = 0; m < pr->kernels[0].n_maps; m++)
                        if (pr->kernels[0].maps[m].buf == TUNER_BUF_OUTPUT)
                            CHECK(pr->kernels[0].maps[m].dtype == TUNER_F8E4M3 && pr->kernels[0].maps[m].box[0] == 128);
            }
            check_amax(op, pr->source);
            if (getenv("TFP8_DUMP") && strstr(what, getenv("TFP8_DUMP"))) /* TFP8_DUMP=<case name>: its sources */
                fprintf(stderr, "==== %s\n%s\n", what, pr->source);
            /* Swapped operands: the kernel's wgmma takes B's format first. */
            const bool sw = tuner_schedule_param(&sp->items[pick[k]], "swap", 0) == 1;
            if (k % t_sub.every == t_sub.rest) /* the sanitizer build's sample (t_subset_init) */
                compile_fp8(what, pr, sw ? cases[c].tb : cases[c].ta, sw ? cases[c].ta : cases[c].tb);
            tuner_program_free(pr);
        }
        /* The verification reference of the case (its FP8 decoders and scales). */
        tuner_program *ref = NULL;
        if (tuner_reference(op, &sm90a, &ref, &err) == 0) {
            CHECK(strstr(ref->source, "gm_f8") != NULL);
            CHECK((tuner_fp8_amax_input(op) >= 0) == (strstr(ref->source, "atomicMax(") != NULL));
            CHECK(t_compile_check(cases[c].name, ref->source, &sm90a, ref, NULL));
        } else {
            fprintf(stderr, "%s: no reference: %s\n", cases[c].name, err ? err : "?");
            t_failures++;
        }
        tuner_program_free(ref);
        free(order);
        free(err);
        tuner_space_free(sp);
    }
    for (int f = 0; f < 7; f++)
        if (!seen[f] && f != 3) /* N pairs need M tiles <= 2 and twice the N tiles: case 2 has them */
            fprintf(stderr, "note: no FP8 schedule with %s was compiled\n", features[f]);
}

/* A named M (decode batches of any size up to the max) with per-tensor scales: the dynamic
 * kernels take FP8 operands too; one candidate compiled, its A map's M marked for the launch. */
static void test_dynamic(void)
{
    tuner_op op = t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, 256, 4096, 4096, TUNER_SCALE_TENSOR,
                         TUNER_SCALE_TENSOR, false);
    op.n_dims = 1;
    snprintf(op.dims[0].name, sizeof(op.dims[0].name), "m");
    op.dims[0].min = 1;
    op.dims[0].max = 256;
    op.dims[0].multiple_of = 1;
    op.inputs[0].sym[0] = 1;
    op.output.sym[0] = 1;
    tuner_space *sp = NULL;
    char *err = NULL;
    if (tuner_space_build(&op, &sm90a, &sp, &err) < 0 || !sp || sp->n == 0) {
        fprintf(stderr, "fp8 dynamic: no space: %s\n", err ? err : "?");
        t_failures++;
    } else {
        tuner_program *pr = NULL;
        const size_t d = tuner_default_index(&op, &sm90a, sp);
        if (tuner_generate(&op, &sm90a, &sp->items[d], &pr, &err) == 0) {
            bool marked = false;
            for (int m = 0; m < pr->kernels[0].n_maps; m++)
                marked |= pr->kernels[0].maps[m].buf == TUNER_BUF_INPUT0 && pr->kernels[0].maps[m].sym[1] == 1;
            CHECK(marked);
            compile_fp8("e4m3 dynamic m", pr, "e4m3", "e4m3");
        } else {
            fprintf(stderr, "fp8 dynamic: generate failed: %s\n", err ? err : "?");
            t_failures++;
        }
        tuner_program_free(pr);
    }
    tuner_space_free(sp);
    free(err);
}

/* A warpgroup of transposing warps more (tnsp_wg 1): offered for an MN-major FP8 operand beside
 * one consumer warpgroup with at most 64 accumulators (the decode's 64x128 tiles), never where
 * nothing is transposed or beside two consumers; the kernel has a fourth warpgroup that deals the
 * 4x4 blocks with the producer's three warps (seven in all, seven arrivals on `ready`), meets a
 * split-K cluster's barriers, and compiles through NVRTC and ptxas (384 threads). */
static void test_tnsp_wg(void)
{
    const tuner_op decode = t_fp8_mn(t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, 16, 8192, 8192,
                                                  TUNER_SCALE_TENSOR, TUNER_SCALE_TENSOR, false),
                                     false, true);
    tuner_space *sp = NULL;
    CHECK(tuner_space_build(&decode, &sm90a, &sp, NULL) == 0 && sp);
    size_t n = 0;
    for (size_t i = 0; sp && i < sp->n; i++) {
        const tuner_schedule *s = &sp->items[i];
        if (tuner_schedule_param(s, "tnsp_wg", 0) != 1)
            continue;
        n++;
        CHECK(tuner_schedule_param(s, "consumers", 0) == 1 && tuner_schedule_param(s, "pretranspose", 0) == 0 &&
                  tuner_schedule_param(s, "block_m", 0) * tuner_schedule_param(s, "block_n", 0) <= 64 * 128,
              "a transposing warpgroup beside two consumers, a pretransposed B or more than 64 accumulators");
    }
    tuner_space_free(sp);
    CHECK(n >= 8, "16x8192x8192 B [K,N]: %zu schedules with a transposing warpgroup", n);
    /* The H200 ran the decode's 64x128 split-2 tiles in 24.3 us with the warpgroup and 30.3
     * without (session 18): the cost model ranks the in-kernel transposition with it first. */
    sp = NULL;
    CHECK(tuner_space_build(&decode, &sm90a, &sp, NULL) == 0 && sp);
    double best_with = 1e30, best_without = 1e30;
    for (size_t i = 0; sp && i < sp->n; i++) {
        const tuner_schedule *s = &sp->items[i];
        if (strcmp(s->template_name, "matmul_wgmma") || tuner_schedule_param(s, "pretranspose", 0))
            continue;
        const double us = tuner_predict_us(&decode, &sm90a, s);
        double *best = tuner_schedule_param(s, "tnsp_wg", 0) ? &best_with : &best_without;
        if (us < *best)
            *best = us;
    }
    tuner_space_free(sp);
    CHECK(best_with < best_without, "16x8192x8192 B [K,N]: with a transposing warpgroup %.1f us, without %.1f",
          best_with, best_without);
    const tuner_op kmajor = t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, 16, 8192, 8192,
                                         TUNER_SCALE_TENSOR, TUNER_SCALE_TENSOR, false);
    CHECK(count_with(&kmajor, "tnsp_wg=1") == 0, "K-major operands: a transposing warpgroup offered");

    static const int values[2][11] = {{64, 128, 4, 1, 8, 0, 0, 1, 2, 0, 1}, {128, 128, 4, 2, 8, 0, 0, 1, 1, 0, 1}};
    for (int k = 0; k < 2; k++) {
        const tuner_schedule s = wg_schedule(values[k], "tnsp_wg", 1);
        tuner_program *pr = NULL;
        char *err = NULL;
        const int rc = tuner_generate(&decode, &sm90a, &s, &pr, &err);
        if (k == 1) {
            CHECK(rc != 0, "a transposing warpgroup beside two consumers generated");
        } else if (rc == 0 && pr) {
            const tuner_launch *l = &pr->kernels[pr->n_kernels - 1];
            CHECK(l->block[0] == 384 && strstr(pr->source, "} else if (wg_g == 2) {") &&
                      strstr(pr->source, "const int wg_tw = 3 + ((threadIdx.x >> 5) & 3)") &&
                      strstr(pr->source, "wg_q += 7)") && strstr(pr->source, "wg_bar_init(wg_bar0 + 8 * (8 + s), 7);") &&
                      strstr(pr->source, "gm_cluster_sync();\ngm_cluster_sync();\n} else {"),
                  "the transposing warpgroup's source (block %u)", l->block[0]);
            compile_fp8("tnsp_wg decode split 2", pr, "e4m3", "e4m3");
        } else {
            fprintf(stderr, "tnsp_wg: generate failed: %s\n", err ? err : "?");
            t_failures++;
        }
        tuner_program_free(pr);
        free(err);
    }
}

/* MN-major FP8 operands on sm_90a (issue 41): matmul_wgmma takes B as [K, N] and A as [K, M],
 * its copies landing them in a raw area of each stage in boxes of 128 mn x 128 k and the
 * producer warpgroup's spare warps transposing them into the K-major tiles wgmma reads, on
 * `ready` barriers of their own; matmul_mma has no candidate; the space keeps tiles of whole
 * 128-wide boxes along the transposed operand and no CTA pairs; the cost model charges the
 * transposition (slower than the same problem K-major, not by more than half); a row length
 * that is not 16 bytes is refused by name; candidates of four problems (each scale kind, both
 * operands transposed, a batch, edges, a quantizing epilogue, fast accumulation off, split-K,
 * stream-K, pingpong) compile through NVRTC and ptxas for sm_90a, and the reference reads the
 * transposed layouts. */
static void test_mn_major(void)
{
    const struct {
        const char *name;
        tuner_op op;
        const char *ta, *tb;
    } cases[] = {
        {"mn_b_kn_tensor_4096", t_fp8_mn(t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, 4096, 4096, 4096,
                                                      TUNER_SCALE_TENSOR, TUNER_SCALE_TENSOR, false), false, true),
         "e4m3", "e4m3"},
        {"mn_a_km_rowcol_bias_gelu_edges", t_fp8_mn(t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E5M2, TUNER_F16, 0, 400, 336, 1040,
                                                                 TUNER_SCALE_ROW, TUNER_SCALE_COL, true), true, false),
         "e4m3", "e5m2"},
        {"mn_both_b2_quantize_amax", t_fp8_mn(t_fp8_quantized_amax(t_fp8_matmul(TUNER_F8E5M2, TUNER_F8E4M3, TUNER_BF16, 2, 512, 1024,
                                                                      2048, TUNER_SCALE_TENSOR, TUNER_SCALE_TENSOR, false)),
                                          true, true),
         "e5m2", "e4m3"},
        {"mn_b_block_scales_promoted", t_fp8_mn(t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_F32, 0, 1000, 768, 1040,
                                                             TUNER_SCALE_BLOCK, TUNER_SCALE_BLOCK, false), false, true),
         "e4m3", "e4m3"},
    };
    static const char *const features[] = {"pingpong", "stage_out", "split_k", "stream_k"};
    static const int plain[] = {0, 0, 1, 0};
    bool seen[4] = {false};
    const tuner_template *wg = tuner__template_find("matmul_wgmma"), *mma = tuner__template_find("matmul_mma");
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const tuner_op *op = &cases[c].op;
        const bool ta = op->attrs.matmul.trans_a, tb_mn = !op->attrs.matmul.trans_b;
        CHECK(wg && mma && wg->applies(op, &sm90a) && !mma->applies(op, &sm90a));
        tuner_space *sp = NULL;
        char *err = NULL;
        if (tuner_space_build(op, &sm90a, &sp, &err) < 0 || !sp || sp->n == 0) {
            fprintf(stderr, "%s: no space: %s\n", cases[c].name, err ? err : "?");
            t_failures++;
            free(err);
            tuner_space_free(sp);
            continue;
        }
        /* The schedules that transpose in the kernel (test_pretranspose has the others). */
        for (size_t j = 0; j < sp->n; j++) {
            const tuner_schedule *it = &sp->items[j];
            CHECK(strcmp(it->template_name, "matmul_wgmma") == 0);
            if (tuner_schedule_param(it, "pretranspose", 0))
                continue;
            CHECK(tuner_schedule_param(it, "cluster", 1) == 1 && tuner_schedule_param(it, "cluster_n", 1) == 1);
            CHECK(!ta || tuner_schedule_param(it, "block_m", 0) % 128 == 0);
            CHECK(!tb_mn || tuner_schedule_param(it, "block_n", 0) % 128 == 0);
        }
        size_t *order = calloc(sp->n, sizeof(*order));
        tuner_rank(op, &sm90a, sp, order, NULL);
        size_t pick[6];
        int np = 0;
        for (size_t j = 0; j < sp->n && np == 0; j++)
            if (!tuner_schedule_param(&sp->items[order[j]], "pretranspose", 0))
                pick[np++] = order[j];
        for (size_t j = 0; j < sp->n && np < 3; j++)
            for (int f = 0; f < 4 && !tuner_schedule_param(&sp->items[j], "pretranspose", 0); f++)
                if (!seen[f] && tuner_schedule_param(&sp->items[j], features[f], plain[f]) != plain[f]) {
                    seen[f] = true;
                    pick[np++] = j;
                    break;
                }
        for (int k = 0; k < np; k++) {
            tuner_program *pr = NULL;
            char what[160];
            snprintf(what, sizeof(what), "%s #%zu", cases[c].name, pick[k]);
            if (tuner_generate(op, &sm90a, &sp->items[pick[k]], &pr, &err) < 0) {
                fprintf(stderr, "%s: generate failed: %s\n", what, err ? err : "?");
                t_failures++;
                free(err);
                err = NULL;
                continue;
            }
            /* The transposed operand's boxes: 128 mn x 128 k; the K-major one's 128 k x rows. */
            const tuner_launch *l = &pr->kernels[pr->n_kernels - 1];
            int maps = 0;
            for (int m = 0; m < l->n_maps; m++) {
                const tuner_tmap *tm = &l->maps[m];
                if (tm->buf != TUNER_BUF_INPUT0 && tm->buf != TUNER_BUF_INPUT0 + 1)
                    continue;
                const bool mn = tm->buf == TUNER_BUF_INPUT0 ? ta : tb_mn;
                const long long rows = op->inputs[tm->buf - TUNER_BUF_INPUT0].shape[op->inputs[tm->buf - TUNER_BUF_INPUT0].rank - 1];
                maps++;
                CHECK(tm->box[0] == 128 && tm->swizzle == 128 && (uint64_t)rows == tm->dims[0]);
                CHECK(!mn || tm->box[1] == 128);
            }
            CHECK(maps == 2);
            CHECK(strstr(pr->source, "wg_tnsp_block(wg_st + ") && strstr(pr->source, "__byte_perm(") &&
                  strstr(pr->source, "fence.proxy.async.shared::cta"));
            check_amax(op, pr->source);
            if (getenv("TFP8_DUMP") && strstr(what, getenv("TFP8_DUMP")))
                fprintf(stderr, "==== %s\n%s\n", what, pr->source);
            if (k % t_sub.every == t_sub.rest)
                compile_fp8(what, pr, cases[c].ta, cases[c].tb);
            tuner_program_free(pr);
        }
        tuner_program *ref = NULL;
        if (tuner_reference(op, &sm90a, &ref, &err) == 0)
            CHECK(t_compile_check(cases[c].name, ref->source, &sm90a, ref, NULL));
        else {
            fprintf(stderr, "%s: no reference: %s\n", cases[c].name, err ? err : "?");
            t_failures++;
        }
        tuner_program_free(ref);
        free(order);
        free(err);
        tuner_space_free(sp);
    }
    for (int f = 0; f < 4; f++)
        if (!seen[f])
            fprintf(stderr, "note: no MN-major FP8 schedule with %s was compiled\n", features[f]);

    /* The cost of the transposition: the best K-major and MN-major predictions at 8192^3 (in the
     * kernel or before it). */
    const tuner_op km = t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, 8192, 8192, 8192, TUNER_SCALE_TENSOR,
                                     TUNER_SCALE_TENSOR, false);
    const tuner_op mn = t_fp8_mn(km, false, true);
    double best[2] = {1e30, 1e30};
    const tuner_op *ops[2] = {&km, &mn};
    for (int k = 0; k < 2; k++) {
        tuner_space *sp = NULL;
        char *err = NULL;
        if (tuner_space_build(ops[k], &sm90a, &sp, &err) == 0)
            for (size_t j = 0; j < sp->n; j++)
                if (strcmp(sp->items[j].template_name, "matmul_wgmma") == 0) {
                    const double us = wg->predict_us(ops[k], &sm90a, &sp->items[j]);
                    best[k] = us < best[k] ? us : best[k];
                }
        tuner_space_free(sp);
        free(err);
    }
    if (!(best[1] > best[0] * 1.01 && best[1] < best[0] * 1.5)) {
        fprintf(stderr, "mn-major cost 8192^3: k-major %.1f us, mn-major %.1f us\n", best[0], best[1]);
        t_failures++;
    }

    /* A named M (decode batches) with B [K,N]: the transposers walk the launch's tiles too. */
    {
        tuner_op dyn = t_fp8_mn(t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, 256, 4096, 4096,
                                             TUNER_SCALE_TENSOR, TUNER_SCALE_TENSOR, false),
                                false, true);
        dyn.n_dims = 1;
        snprintf(dyn.dims[0].name, sizeof(dyn.dims[0].name), "m");
        dyn.dims[0].min = 1;
        dyn.dims[0].max = 256;
        dyn.dims[0].multiple_of = 1;
        dyn.inputs[0].sym[0] = 1;
        dyn.output.sym[0] = 1;
        tuner_space *sp = NULL;
        tuner_program *pr = NULL;
        char *err = NULL;
        size_t in_kernel = 0;
        if (tuner_space_build(&dyn, &sm90a, &sp, &err) == 0)
            while (in_kernel < sp->n && tuner_schedule_param(&sp->items[in_kernel], "pretranspose", 0))
                in_kernel++;
        if (sp && in_kernel < sp->n && tuner_generate(&dyn, &sm90a, &sp->items[in_kernel], &pr, &err) == 0) {
            CHECK(strstr(pr->source, "wg_tnsp_block(") && strstr(pr->source, "gm_M"));
            compile_fp8("e4m3 dynamic m, B [K,N]", pr, "e4m3", "e4m3");
        } else {
            fprintf(stderr, "mn-major dynamic: %s\n", err ? err : "no space");
            t_failures++;
        }
        tuner_program_free(pr);
        tuner_space_free(sp);
        free(err);
    }

    /* Row lengths the copy engine cannot take (not 16 bytes) are refused by name. */
    tuner_op odd = t_fp8_mn(t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, 256, 1000, 512, TUNER_SCALE_NONE,
                                         TUNER_SCALE_NONE, false), false, true);
    odd.inputs[1].shape[1] = 1004;
    odd.output.shape[1] = 1004;
    char why[320];
    CHECK(tuner_fp8_unsupported(&odd, &sm90a, why, sizeof(why)) && strstr(why, "N a multiple of 16"));
    odd = t_fp8_mn(t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, 1000, 256, 512, TUNER_SCALE_NONE,
                                TUNER_SCALE_NONE, false), true, false);
    odd.inputs[0].shape[1] = 1004;
    odd.output.shape[0] = 1004;
    CHECK(tuner_fp8_unsupported(&odd, &sm90a, why, sizeof(why)) && strstr(why, "M a multiple of 16"));
}

/* The best prediction of op's schedules with pretranspose `pre`. */
static double best_pre(const tuner_op *op, int pre)
{
    const tuner_template *wg = tuner__template_find("matmul_wgmma");
    tuner_space *sp = NULL;
    double best = 1e30;
    if (tuner_space_build(op, &sm90a, &sp, NULL) == 0)
        for (size_t i = 0; i < sp->n; i++)
            if (tuner_schedule_param(&sp->items[i], "pretranspose", 0) == pre) {
                const double us = wg->predict_us(op, &sm90a, &sp->items[i]);
                best = us < best ? us : best;
            }
    tuner_space_free(sp);
    return best;
}

/* The first pretransposed schedule of op, swapped or not, generated, checked and compiled. */
static void check_pretransposed(const char *what, const tuner_op *op, int swap)
{
    tuner_space *sp = NULL;
    char *err = NULL;
    size_t at = 0;
    if (tuner_space_build(op, &sm90a, &sp, &err) == 0)
        while (at < sp->n && !(tuner_schedule_param(&sp->items[at], "pretranspose", 0) == 1 &&
                               tuner_schedule_param(&sp->items[at], "swap", 0) == swap))
            at++;
    tuner_program *pr = NULL;
    if (!sp || at == sp->n || tuner_generate(op, &sm90a, &sp->items[at], &pr, &err) < 0) {
        fprintf(stderr, "%s: no program: %s\n", what, err ? err : "no such schedule");
        t_failures++;
    } else {
        const long long K = op->inputs[1].shape[0], N = op->inputs[1].shape[1];
        const tuner_launch *bt = &pr->kernels[0], *gemm = &pr->kernels[1];
        CHECK(pr->n_kernels == 2 && pr->workspace_bytes == (size_t)(N * K), "%s: %d kernels, workspace %zu", what,
              pr->n_kernels, pr->workspace_bytes);
        CHECK(strstr(bt->name, "_bt") && bt->n_args >= 2 && bt->args[0] == TUNER_BUF_INPUT0 + 1 &&
              bt->args[1] == TUNER_BUF_WORKSPACE && bt->grid[0] == (unsigned)((N + 127) / 128) &&
              bt->grid[1] == (unsigned)((K + 127) / 128) && bt->block[0] == 256 && bt->n_maps == 0,
              "%s: the transposing launch", what);
        int on_ws = 0;
        for (int m = 0; m < gemm->n_maps; m++) {
            const tuner_tmap *tm = &gemm->maps[m];
            CHECK(tm->buf != TUNER_BUF_INPUT0 + 1, "%s: a map still reads B as given", what);
            if (tm->buf == TUNER_BUF_WORKSPACE) {
                on_ws++;
                CHECK(tm->dims[0] == (uint64_t)K && tm->dims[1] == (uint64_t)N && tm->strides[0] == (uint64_t)K &&
                      tm->box[0] == 128, "%s: B^T's map", what);
            }
        }
        CHECK(on_ws == 1, "%s: %d maps on the workspace", what, on_ws);
        CHECK(!strstr(pr->source, "wg_tnsp_block(wg_st + "), "%s: transposers in the GEMM", what);
        compile_fp8(what, pr, "e4m3", "e4m3");
    }
    tuner_program_free(pr);
    tuner_space_free(sp);
    free(err);
}

/* FP8 B given [K,N] transposed by a launch of its own before a K-major GEMM (matmul_wgmma's
 * pretranspose): offered beside the in-kernel transposers where A is K-major and B one matrix,
 * swapped tiles too (the GEMM's operands are then both K-major); a launch that writes B^T [N,K]
 * into the workspace, the GEMM's B map on it; priced with the copy, so that it wins a
 * compute-bound GEMM and loses a decode one (whose weights it would copy every call). */
static void test_pretranspose(void)
{
    const tuner_op gemm = t_fp8_mn(t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, 4096, 4096, 4096,
                                                TUNER_SCALE_TENSOR, TUNER_SCALE_TENSOR, false), false, true);
    const tuner_op decode = t_fp8_mn(t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, 16, 8192, 8192,
                                                  TUNER_SCALE_TENSOR, TUNER_SCALE_TENSOR, false), false, true);
    const tuner_op edges = t_fp8_mn(t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_F16, 0, 400, 336, 1040,
                                                 TUNER_SCALE_ROW, TUNER_SCALE_COL, true), false, true);
    const size_t pre = count_with(&gemm, "pretranspose=1");
    CHECK(pre >= 100, "4096^3 B [K,N]: %zu pretransposed", pre);
    /* Both parameters kept (a schedule holds at most TUNER_MAX_PARAMS). */
    const size_t swapped = count_with(&decode, "swap=1");
    CHECK(swapped >= 20 && count_with(&decode, "swap=1,pretranspose=1") == swapped, "16x8192x8192 B [K,N]: %zu swapped",
          swapped);
    CHECK(count_with(&gemm, "pretranspose=1,stream_k=1") == 0);
    const tuner_op none[] = {
        t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, 4096, 4096, 4096, TUNER_SCALE_TENSOR, TUNER_SCALE_TENSOR,
                     false),
        t_fp8_mn(t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, 4096, 4096, 4096, TUNER_SCALE_TENSOR,
                              TUNER_SCALE_TENSOR, false), true, true),
        t_fp8_mn(t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E4M3, TUNER_BF16, 0, 4096, 4096, 4096, TUNER_SCALE_TENSOR,
                              TUNER_SCALE_TENSOR, false), true, false),
    };
    for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
        CHECK(count_with(&none[i], "pretranspose=1") == 0, "case %zu: pretransposed schedules", i);
    const double g0 = best_pre(&gemm, 0), g1 = best_pre(&gemm, 1), d0 = best_pre(&decode, 0), d1 = best_pre(&decode, 1);
    CHECK(g1 < g0 && d1 > d0, "best predictions: 4096^3 %.1f in the kernel, %.1f before; decode %.1f, %.1f", g0, g1,
          d0, d1);
    check_pretransposed("pretranspose 400x336x1040 rowcol bias gelu", &edges, 0);
    check_pretransposed("pretranspose swapped 16x8192x8192", &decode, 1);
}

/* The verification reference on the CPU against a hand-computed case: the reference kernel's code
 * after the prelude (plain C++ but for CUDA's qualifiers and a few intrinsics, shimmed here with
 * one thread at a time) compiled by the host's c++ and run over its grid. A [2,16] e4m3 (rows
 * 1,1,1,1,0.. and 2,2,0..), B given [K,N] = [16,3] e5m2 (MN-major: k rows (1, .5, -1), (2, .5, -1),
 * then (1, .5, -1) twice, zeros), row scales (1, .5), a tensor scale 2, / 2^-6, quantized to e4m3
 * with an amax: sums (5, 2, -4; 6, 2, -4), scaled (10, 4, -8; 6, 2, -4), divided (640, 256, -512;
 * 384, 128, -256), saturated at +-448 by the cast, and the amax 640, what the cast received. Skipped
 * (with a note) where no host c++ runs. */
static void test_reference_host(void)
{
    tuner_op op = t_fp8_mn(t_fp8_quantized_amax(t_fp8_matmul(TUNER_F8E4M3, TUNER_F8E5M2, TUNER_BF16, 0, 2, 3, 16,
                                                             TUNER_SCALE_ROW, TUNER_SCALE_TENSOR, false)),
                           false, true);
    tuner_program *ref = NULL;
    char *err = NULL;
    if (tuner_reference(&op, &sm90a, &ref, &err) < 0) {
        fprintf(stderr, "reference host: %s\n", err ? err : "?");
        t_failures++;
        free(err);
        return;
    }
    const char *body = strstr(ref->source, "// ---- end of prelude ----");
    CHECK(body != NULL && ref->kernels[0].grid[0] == 1 && ref->kernels[0].block[0] == 256);
    char dir[] = "/tmp/hd-fp8-ref-XXXXXX";
    if (!body || !mkdtemp(dir)) {
        tuner_program_free(ref);
        return;
    }
    char src[96], exe[96], cmd[512];
    snprintf(src, sizeof(src), "%s/ref.cpp", dir);
    snprintf(exe, sizeof(exe), "%s/ref", dir);
    FILE *f = fopen(src, "w");
    if (!f) {
        tuner_program_free(ref);
        return;
    }
    fputs("#include <cmath>\n#include <cstdio>\n#include <cstring>\n"
          "#define __device__\n#define __forceinline__ inline\n#define __global__\n#define __launch_bounds__(x)\n"
          "#define __restrict__\n"
          "struct hd_idx { unsigned x, y, z; };\nstatic hd_idx blockIdx, threadIdx;\n"
          "static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }\n"
          "static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }\n"
          "static inline int __float_as_int(float f) { int u; memcpy(&u, &f, 4); return u; }\n"
          "static inline float hd_f32(float v) { return v; }\n"
          /* one thread at a time: a warp of one */
          "static inline unsigned __activemask() { return 1u << (threadIdx.x & 31); }\n"
          "static inline int __reduce_max_sync(unsigned, int v) { return v; }\n"
          "static inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }\n"
          "static inline int atomicMax(int *p, int v) { const int o = *p; if (v > o) *p = v; return o; }\n",
          f);
    fputs(body, f);
    fputs("int main() {\n"
          "unsigned char a[32] = {0x38, 0x38, 0x38, 0x38, 0,0,0,0,0,0,0,0,0,0,0,0, 0x40, 0x40};\n"
          "unsigned char b[48] = {0x3c, 0x38, 0xbc, 0x40, 0x38, 0xbc, 0x3c, 0x38, 0xbc, 0x3c, 0x38, 0xbc};\n"
          "float sa[2] = {1.0f, 0.5f}, sb[1] = {2.0f}, s[1] = {0.015625f}, amax[1] = {0.0f}, out[6];\n"
          "for (unsigned t = 0; t < 256; t++) { threadIdx.x = t; hd_ref_matmul(a, b, sa, sb, s, amax, out); }\n"
          "for (int i = 0; i < 6; i++) printf(\"%g \", out[i]);\nprintf(\"%g\\n\", amax[0]);\nreturn 0;\n}\n",
          f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "c++ -std=c++17 -O0 -w -o %s %s 2>&1 && %s", exe, src, exe);
    FILE *pp = popen(cmd, "r");
    char line[512] = "";
    const bool got = pp && fgets(line, sizeof(line), pp);
    const int rc = pp ? pclose(pp) : -1;
    double v[7] = {0};
    if (!got || rc != 0) {
        /* No host compiler (sh's 127) is no failure of the reference; anything else is. */
        if (WIFEXITED(rc) && WEXITSTATUS(rc) == 127)
            fprintf(stderr, "note: no host c++: the FP8 reference was not run on the CPU\n");
        else {
            fprintf(stderr, "reference host: %s (exit %d)\n", line, rc);
            t_failures++;
        }
    } else if (sscanf(line, "%lf %lf %lf %lf %lf %lf %lf", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]) != 7 ||
               v[0] != 448 || v[1] != 256 || v[2] != -448 || v[3] != 384 || v[4] != 128 || v[5] != -256 ||
               v[6] != 640) {
        fprintf(stderr, "reference host: got %s  want 448 256 -448 384 128 -256 640\n", line);
        t_failures++;
    }
    remove(src);
    remove(exe);
    rmdir(dir);
    tuner_program_free(ref);
}

/* The GEMM reference applies the epilogue after the scales: a 16-bit matmul with bias + relu reads
 * the bias (in2) in its reference, and an FP8 one whose epilogue quantizes rounds through FP8 in
 * software. (The FP8 change once dropped the epilogue from every GEMM reference: every candidate
 * with a step then failed verification on the GPU.) */
static void test_reference_epilogue(void)
{
    tuner_op op = t_matmul(TUNER_F16, 0, 0, 128, 256, 64, false, false, 16);
    const long long bias[1] = {256};
    t_add_epilogue(&op, TUNER_EW_ADD, 1, bias, TUNER_EW_RELU);
    tuner_program *ref = NULL;
    char *err = NULL;
    CHECK(tuner_reference(&op, &sm90a, &ref, &err) == 0 && ref && strstr(ref->source, "in2[") != NULL);
    tuner_program_free(ref);
    free(err);
}

int main(int argc, char **argv)
{
    if (t_subset_init(&argc, argv) < 0)
        return 2;
    test_reference_epilogue();
    test_decode();
    test_swap();
    test_encode();
    test_spaces();
    test_cost();
    test_compile();
    test_dynamic();
    test_mn_major();
    test_tnsp_wg();
    test_pretranspose();
    test_reference_host();
    if (t_failures) {
        fprintf(stderr, "test_fp8: %d failure(s)\n", (int)t_failures);
        return 1;
    }
    printf("test_fp8: all passed\n");
    return 0;
}
