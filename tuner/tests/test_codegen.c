/* tuner/tests/test_codegen.c - the prelude, chain emission for every step kind, NVRTC (PTX and
 * cubin from one compile, error log, sm_90a), version strings, schedule helpers, space hashing.
 */
#include "common.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "tuner/codegen.h"
#include "tuner/template.h"

static char *load_operand(void *ctx, int i)
{
    (void)ctx;
    char *s = malloc(32);
    if (s)
        snprintf(s, 32, "in%d[col]", i);
    return s;
}

static void test_chain_every_kind(const tuner_target *t)
{
    tuner_op op;
    memset(&op, 0, sizeof(op));
    op.kind = TUNER_OP_ELEMENTWISE;
    op.n_inputs = 3;
    long long s[1] = {64};
    op.inputs[0] = t_tensor(TUNER_F16, 1, s, 16);
    op.inputs[1] = t_tensor(TUNER_BF16, 1, s, 16);
    op.inputs[2] = t_tensor(TUNER_F32, 1, s, 16);
    tuner_ew_chain ch;
    memset(&ch, 0, sizeof(ch));
    for (int k = 0; k < TUNER_EW_COUNT && ch.n < TUNER_MAX_STEPS; k++) {
        tuner_ew_step *st = &ch.steps[ch.n++];
        st->kind = (tuner_ew_kind)k;
        st->operand = TUNER_EW_IS_BINARY(k) ? 1 + (k % 2) : -1;
        st->scalar = 0.1; /* not exactly representable: must round to the float nearest */
        st->dtype = TUNER_BF16;
    }
    /* The remaining kinds (and a second CAST to f16) in a second chain. */
    tuner_ew_chain ch2;
    memset(&ch2, 0, sizeof(ch2));
    for (int k = ch.n; k < TUNER_EW_LOG; k++) {
        tuner_ew_step *st = &ch2.steps[ch2.n++];
        st->kind = (tuner_ew_kind)k;
        st->operand = -1;
        st->scalar = 0.1;
        st->scalar2 = 0.1;
        st->dtype = TUNER_BF16;
    }
    tuner_ew_step *st = &ch2.steps[ch2.n++];
    st->kind = TUNER_EW_CAST;
    st->dtype = TUNER_F16;
    st->operand = -1;
    /* log and the mask steps in a third: each comparison against an input and eq against a
     * constant too, where with two inputs, masked_fill with -inf. */
    tuner_ew_chain ch3;
    memset(&ch3, 0, sizeof(ch3));
    for (int k = TUNER_EW_LOG; k < TUNER_EW_COUNT; k++)
        ch3.steps[ch3.n++] = (tuner_ew_step){.kind = (tuner_ew_kind)k, .operand = k == TUNER_EW_LOG ? -1 : 1 + (k % 2),
                                             .scalar = -INFINITY, .operand2 = 1};
    ch3.steps[ch3.n++] = (tuner_ew_step){.kind = TUNER_EW_EQ, .operand = -1, .scalar = 0.1};

    tuner_sb sb;
    tuner_sb_init(&sb);
    tuner__prelude(&sb, t->sm);
    tuner_sb_puts(&sb, "extern \"C\" __global__ void chain_test(const half_t *in0, const bf16_t *in1, const float *in2, "
                       "float *out)\n{\nconst int col = threadIdx.x;\nfloat v = hd_f32(in0[col]);\n");
    tuner__emit_chain(&sb, &op, &ch, "v", load_operand, NULL);
    tuner__emit_chain(&sb, &op, &ch2, "v", load_operand, NULL);
    tuner__emit_chain(&sb, &op, &ch3, "v", load_operand, NULL);
    tuner_sb_puts(&sb, "out[col] = v;\n}\n");
    char *src = tuner_sb_take(&sb);
    CHECK(src != NULL, "source");
    if (!src)
        return;
    /* Every kind left its mark, in the chain's order. */
    static const char *const marks[] = {
        "v + hd_o", "v - hd_o", "v * hd_o", "v / hd_o", "fmaxf(v, hd_o)", "fminf(v, hd_o)", "hd_relu(v)",
        "hd_gelu_erf(v)", "hd_gelu_tanh(v)", "hd_silu(v)", "hd_sigmoid(v)", "tanhf(v)", "expf(v)", "v = -v",
        "fabsf(v)", "v * v", "v * __uint_as_float(0x3dcccccdu)", "hd_round_bf16(v)", "sqrtf(v)", "rsqrtf(v)",
        "v + __uint_as_float(0x3dcccccdu)", "hd_clamp(v, __uint_as_float(0x3dcccccdu), __uint_as_float(0x3dcccccdu))",
        "hd_hardswish(v)", "hd_hardsigmoid(v)", "hd_leaky_relu(v, __uint_as_float(0x3dcccccdu))", "erff(v)",
        "hd_pow(v, __uint_as_float(0x3dcccccdu))", "logf(v)", "v = v == hd_o ? 1.0f : 0.0f;",
        "v = v != hd_o ? 1.0f : 0.0f;", "v = v < hd_o ? 1.0f : 0.0f;", "v = v <= hd_o ? 1.0f : 0.0f;",
        "v = v > hd_o ? 1.0f : 0.0f;", "v = v >= hd_o ? 1.0f : 0.0f;",
        "const float hd_c = hd_f32(in1[col]); const float hd_o = hd_f32(in1[col]); v = hd_c != 0.0f ? v : hd_o;",
        "const float hd_c = hd_f32(in2[col]); v = hd_c != 0.0f ? __uint_as_float(0xff800000u) : v;",
        "v = v == __uint_as_float(0x3dcccccdu) ? 1.0f : 0.0f;",
    };
    const char *pos = src;
    for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++) {
        const char *p = strstr(pos, marks[i]);
        CHECK(p != NULL, "chain: step %zu (%s) missing or out of order", i, marks[i]);
        if (p)
            pos = p;
    }
    CHECK(strstr(src, "hd_f32(in1[col])") && strstr(src, "hd_f32(in2[col])"), "operands through the callback");
    CHECK(strstr(src, "hd_round_f16(v)") != NULL, "cast to f16");
    CHECK(!strstr(src, "#error"), "no #error in a valid chain");
    char tn[16];
    tuner_target_name(t, tn, sizeof(tn));
    char what[64];
    snprintf(what, sizeof(what), "chain of every kind (%s)", tn);
    CHECK(t_compile_check(what, src, t, NULL, NULL), "%s", what);
    free(src);

    /* An operand the callback cannot provide becomes a compile error, never silent garbage. */
    tuner_ew_chain bad;
    memset(&bad, 0, sizeof(bad));
    bad.n = 1;
    bad.steps[0].kind = TUNER_EW_ADD;
    bad.steps[0].operand = 7;
    tuner_sb_init(&sb);
    tuner__emit_chain(&sb, &op, &bad, "v", load_operand, NULL);
    src = tuner_sb_take(&sb);
    CHECK(src && strstr(src, "#error"), "bad operand must emit #error");
    free(src);
}

/* pow's short forms (PyTorch's) and the general path; clamp's open bounds as infinities. Every
 * form compiles (NVRTC and ptxas) with the candidate and the reference prelude. */
static void test_pow_clamp(const tuner_target *t)
{
    static const struct {
        double p;
        const char *mark;
    } forms[] = {
        {2, "v = v * v;"},         {3, "v = v * v * v;"},        {0.5, "v = sqrtf(v);"},
        {-1, "v = 1.0f / v;"},     {-0.5, "v = rsqrtf(v);"},     {0, "v = 1.0f;"},
        {2.5, "v = hd_pow(v, __uint_as_float(0x40200000u));"},
        {-3, "v = hd_pow(v, __uint_as_float(0xc0400000u));"},
    };
    for (int ref = 0; ref < 2; ref++) {
        tuner_sb sb;
        tuner_sb_init(&sb);
        if (ref)
            tuner__prelude_reference(&sb, t->sm);
        else
            tuner__prelude(&sb, t->sm);
        tuner_sb_puts(&sb, "extern \"C\" __global__ void pow_test(const float *in0, float *out)\n{\n");
        for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
            tuner_ew_chain ch = {.n = 1};
            ch.steps[0] = (tuner_ew_step){.kind = TUNER_EW_POW, .operand = -1, .scalar = forms[i].p};
            size_t at = sb.len;
            tuner_sb_printf(&sb, "{ float v = in0[%zu];\n", i);
            tuner__emit_chain(&sb, NULL, &ch, "v", NULL, NULL);
            tuner_sb_printf(&sb, "out[%zu] = v; }\n", i);
            CHECK(sb.buf && strstr(sb.buf + at, forms[i].mark), "pow %g: %s", forms[i].p, forms[i].mark);
        }
        /* pow 1 emits nothing; clamp with an open lower bound passes -inf. */
        tuner_ew_chain ch = {.n = 2};
        ch.steps[0] = (tuner_ew_step){.kind = TUNER_EW_POW, .operand = -1, .scalar = 1};
        ch.steps[1] = (tuner_ew_step){.kind = TUNER_EW_CLAMP, .operand = -1, .scalar = -INFINITY, .scalar2 = 6};
        size_t at = sb.len;
        tuner_sb_puts(&sb, "{ float v = in0[0];\n");
        tuner__emit_chain(&sb, NULL, &ch, "v", NULL, NULL);
        tuner_sb_puts(&sb, "out[0] = v; }\n}\n");
        CHECK(sb.buf && !strstr(sb.buf + at, "hd_pow") &&
                  strstr(sb.buf + at, "hd_clamp(v, __uint_as_float(0xff800000u), __uint_as_float(0x40c00000u))"),
              "pow 1 and clamp(max=6)");
        char *src = tuner_sb_take(&sb);
        char tn[16], what[64];
        tuner_target_name(t, tn, sizeof(tn));
        snprintf(what, sizeof(what), "pow and clamp, %s prelude (%s)", ref ? "reference" : "candidate", tn);
        CHECK(src && t_compile_check(what, src, t, NULL, NULL), "%s", what);
        free(src);
    }
}

/* The activations' device formulas, run on the host: the candidate prelude's text from hd_clamp
 * to hd_pow's fast form is compiled by the C compiler with host shims for the two CUDA
 * intrinsics it uses and compared with PyTorch's definitions written out here (and pow with
 * libm's powf, whose special cases torch.pow follows): NaN kept by clamp, min > max giving
 * max, hardswish/hardsigmoid's corners, leaky_relu's slope, and pow's signs, NaNs, zeros and
 * infinities for integer, even, odd, fractional and negative exponents. The GPU sweep checks the
 * device's own exp2f/log2f accuracy; this checks the logic without a GPU. */
static const char host_harness[] =
    "#include <math.h>\n#include <stdio.h>\n#include <string.h>\n"
    "#define HD_INLINE static inline\n"
    "static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }\n"
    "%s\n"
    "static int bad;\n"
    /* signed: a zero's sign must match too (pow's -0 results); clamp's zeros may be either. */
    "static void check(const char *what, float got, float want, int sign) {\n"
    "  if (isnan(want) ? isnan(got) : isinf(want) ? got == want : (fabsf(got - want) <= 1e-5f * fabsf(want) + 1e-30f && (!sign || signbit(got) == signbit(want)))) return;\n"
    "  printf(\"%%s: got %%.9g want %%.9g\\n\", what, got, want); bad++; }\n"
    "static void same(const char *what, float got, float want) { check(what, got, want, 0); }\n"
    "int main(void) {\n"
    "  const float xs[] = {-INFINITY, -1e30f, -7.5f, -3.0f, -2.0f, -1.0f, -0.5f, -1e-20f, -0.0f, 0.0f, 1e-20f, 0.5f, 1.0f, 2.0f, 3.0f, 7.5f, 1e30f, INFINITY, NAN};\n"
    "  const float ps[] = {2.5f, -2.5f, 4.0f, -4.0f, 5.0f, -5.0f, 0.3f, -1.5f, 7.0f, 10.0f, -3.0f, 1.5f, 1e10f, -1e10f};\n"
    "  char w[96];\n"
    "  for (unsigned i = 0; i < sizeof(xs) / sizeof(xs[0]); i++) {\n"
    "    const float x = xs[i];\n"
    "    for (unsigned j = 0; j < sizeof(ps) / sizeof(ps[0]); j++) {\n"
    "      snprintf(w, sizeof(w), \"pow(%%g, %%g)\", x, ps[j]); check(w, hd_pow(x, ps[j]), powf(x, ps[j]), 1); }\n"
    "    snprintf(w, sizeof(w), \"clamp(%%g, -1, 2)\", x); same(w, hd_clamp(x, -1.0f, 2.0f), isnan(x) ? x : x < -1.0f ? -1.0f : x > 2.0f ? 2.0f : x);\n"
    "    snprintf(w, sizeof(w), \"clamp(%%g, 3, 1)\", x); same(w, hd_clamp(x, 3.0f, 1.0f), isnan(x) ? x : 1.0f);\n"
    "    snprintf(w, sizeof(w), \"clamp(%%g, -inf, 0)\", x); same(w, hd_clamp(x, -INFINITY, 0.0f), isnan(x) ? x : x > 0.0f ? 0.0f : x);\n"
    "    const float r6 = fminf(fmaxf(x + 3.0f, 0.0f), 6.0f);\n"
    "    if (!isinf(x)) { snprintf(w, sizeof(w), \"hardswish(%%g)\", x); same(w, hd_hardswish(x), x <= -3.0f ? 0.0f * x : x >= 3.0f ? x : x * r6 / 6.0f); }\n"
    "    snprintf(w, sizeof(w), \"hardsigmoid(%%g)\", x); same(w, hd_hardsigmoid(x), isnan(x) ? x : x <= -3.0f ? 0.0f : x >= 3.0f ? 1.0f : (x + 3.0f) / 6.0f);\n"
    "    snprintf(w, sizeof(w), \"leaky_relu(%%g, 0.1)\", x); same(w, hd_leaky_relu(x, 0.1f), x > 0.0f ? x : x * 0.1f);\n"
    "  }\n"
    "  printf(\"host activations: %%d bad\\n\", bad);\n"
    "  return bad != 0; }\n";

static void test_activations_on_host(void)
{
    tuner_sb sb;
    tuner_sb_init(&sb);
    tuner__prelude(&sb, 80);
    char *pre = tuner_sb_take(&sb);
    const char *from = pre ? strstr(pre, "HD_INLINE float hd_clamp(") : NULL;
    const char *fast = from ? strstr(from, "#else\n") : NULL;
    const char *to = fast ? strstr(fast, "#endif\n") : NULL;
    CHECK(from && fast && to, "prelude: hd_clamp .. hd_pow found");
    if (!to) {
        free(pre);
        return;
    }
    /* Only the fast forms: drop hd_pow's reference branch (#ifdef .. #else). */
    const char *ifdef = strstr(from, "#ifdef HD_EXACT_MATH\n");
    CHECK(ifdef && ifdef < fast, "pow's two forms");
    char *funcs = malloc((size_t)(to - from) + 1);
    size_t n = 0;
    memcpy(funcs, from, (size_t)(ifdef - from));
    n = (size_t)(ifdef - from);
    fast += strlen("#else\n");
    memcpy(funcs + n, fast, (size_t)(to - fast));
    n += (size_t)(to - fast);
    funcs[n] = '\0';
    char dir[] = "/tmp/hidet-hostXXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char src[96], bin[96], cmd[512];
    snprintf(src, sizeof(src), "%s/act.c", dir);
    snprintf(bin, sizeof(bin), "%s/act", dir);
    FILE *f = fopen(src, "w");
    CHECK(f != NULL, "write %s", src);
    if (f) {
        fprintf(f, host_harness, funcs);
        fclose(f);
        const char *cc = getenv("CC") ? getenv("CC") : "cc";
        snprintf(cmd, sizeof(cmd), "%s -O1 -fno-fast-math -o %s %s -lm && %s", cc, bin, src, bin);
        CHECK(system(cmd) == 0, "host check of the activations failed (%s)", cmd);
    }
    unlink(src);
    unlink(bin);
    rmdir(dir);
    free(funcs);
    free(pre);
}

/* log and the mask steps, their emitted code run on the host: each case's chain, as
 * tuner__emit_chain writes it (operands through the "in<i>[col]" callback), is compiled by the C
 * compiler with host shims for hd_f32 and __uint_as_float, run over eight values and compared
 * with what PyTorch gives, written out: comparisons against NaN, infinities and signed zeros,
 * where and masked_fill selecting (a NaN condition is true, an infinity or NaN on the side not
 * taken never leaks, a -0.0 kept), masked_fill with -inf, +inf and finfo(f32).min, log's NaN and
 * -inf, and an attention-style scale, masked_fill(-inf), exp giving exact zeros. The same chains
 * then compile with NVRTC and ptxas in a kernel, with both preludes. */
#define MASK_N 8
typedef struct mask_case {
    const char *name;
    int n;
    tuner_ew_step steps[3];
    float in1[MASK_N], in2[MASK_N], want[MASK_N];
    bool approx; /* finite results within 1e-6 relative (libm's logf/expf) */
} mask_case;

static void sb_float_lit(tuner_sb *sb, float f)
{
    if (isnan(f))
        tuner_sb_puts(sb, "NAN");
    else if (isinf(f))
        tuner_sb_puts(sb, f < 0 ? "-INFINITY" : "INFINITY");
    else
        tuner_sb_printf(sb, "%.9ef", (double)f);
}

static void sb_floats(tuner_sb *sb, const float *v)
{
    tuner_sb_puts(sb, "{");
    for (int i = 0; i < MASK_N; i++) {
        tuner_sb_puts(sb, i ? ", " : "");
        sb_float_lit(sb, v[i]);
    }
    tuner_sb_puts(sb, "}");
}

static void test_masks(const tuner_target *t80, const tuner_target *t90a)
{
    const float I = INFINITY, N = NAN, FMIN = -3.4028234663852886e38f;
    static const float xs[MASK_N] = {-INFINITY, -1.0f, 0.5f, 1.0f, INFINITY, NAN, -0.0f, 0.0f};
    const float cond[MASK_N] = {1, 0, N, -0.0f, 2, 0, -1, I};
    const float cmp_in[MASK_N] = {-I, 2, 0.5f, N, I, N, 0.0f, -0.0f};
#define STEP1(k, v) {{.kind = (k), .operand = -1, .scalar = (v)}}
#define STEPI(k) {{.kind = (k), .operand = 1}}
    const mask_case cases[] = {
        {"lt 0.5", 1, STEP1(TUNER_EW_LT, 0.5), {0}, {0}, {1, 1, 0, 0, 0, 0, 1, 1}, false},
        {"le 0.5", 1, STEP1(TUNER_EW_LE, 0.5), {0}, {0}, {1, 1, 1, 0, 0, 0, 1, 1}, false},
        {"gt 0.5", 1, STEP1(TUNER_EW_GT, 0.5), {0}, {0}, {0, 0, 0, 1, 1, 0, 0, 0}, false},
        {"ge 0.5", 1, STEP1(TUNER_EW_GE, 0.5), {0}, {0}, {0, 0, 1, 1, 1, 0, 0, 0}, false},
        {"eq 0.5", 1, STEP1(TUNER_EW_EQ, 0.5), {0}, {0}, {0, 0, 1, 0, 0, 0, 0, 0}, false},
        {"ne 0.5", 1, STEP1(TUNER_EW_NE, 0.5), {0}, {0}, {1, 1, 0, 1, 1, 1, 1, 1}, false},
        {"eq 0", 1, STEP1(TUNER_EW_EQ, 0), {0}, {0}, {0, 0, 0, 0, 0, 0, 1, 1}, false},
        {"eq input", 1, STEPI(TUNER_EW_EQ), {0}, {0}, {1, 0, 1, 0, 1, 0, 1, 1}, false},
        {"ne input", 1, STEPI(TUNER_EW_NE), {0}, {0}, {0, 1, 0, 1, 0, 1, 0, 0}, false},
        {"lt input", 1, STEPI(TUNER_EW_LT), {0}, {0}, {0, 1, 0, 0, 0, 0, 0, 0}, false},
        {"le input", 1, STEPI(TUNER_EW_LE), {0}, {0}, {1, 1, 1, 0, 1, 0, 1, 1}, false},
        {"gt input", 1, STEPI(TUNER_EW_GT), {0}, {0}, {0, 0, 0, 0, 0, 0, 0, 0}, false},
        {"ge input", 1, STEPI(TUNER_EW_GE), {0}, {0}, {1, 0, 1, 0, 1, 0, 1, 1}, false},
        {"where", 1, {{.kind = TUNER_EW_WHERE, .operand = 1, .operand2 = 2}}, {0}, {7, N, -I, 5, I, -I, 3, 9},
         {-I, N, 0.5f, 5, I, -I, -0.0f, 0.0f}, false},
        {"masked_fill -inf", 1, {{.kind = TUNER_EW_MASKED_FILL, .operand = 1, .scalar = -INFINITY}}, {0}, {0},
         {-I, -1, -I, 1, -I, N, -I, -I}, false},
        {"masked_fill inf", 1, {{.kind = TUNER_EW_MASKED_FILL, .operand = 1, .scalar = INFINITY}}, {0}, {0},
         {I, -1, I, 1, I, N, I, I}, false},
        {"masked_fill finfo.min", 1, {{.kind = TUNER_EW_MASKED_FILL, .operand = 1, .scalar = -3.4028234663852886e38}},
         {0}, {0}, {FMIN, -1, FMIN, 1, FMIN, N, FMIN, FMIN}, false},
        {"log", 1, STEP1(TUNER_EW_LOG, 0), {0}, {0}, {N, N, -0.693147182f, 0, I, N, -I, -I}, true},
        {"scale, masked_fill -inf, exp", 3,
         {{.kind = TUNER_EW_SCALE, .operand = -1, .scalar = 0.5},
          {.kind = TUNER_EW_MASKED_FILL, .operand = 1, .scalar = -INFINITY},
          {.kind = TUNER_EW_EXP, .operand = -1}},
         {0}, {0}, {0, 0.606530666f, 0, 1.64872122f, 0, N, 0, 0}, true},
        /* where after a comparison: the running 0/1 where the condition holds, in2 elsewhere. */
        {"gt input, where", 2,
         {{.kind = TUNER_EW_GT, .operand = 2}, {.kind = TUNER_EW_WHERE, .operand = 1, .operand2 = 2}}, {0},
         {-2, 2, 0, 0, 0, 0, 0, 0}, {0, 2, 1, 0, 1, 0, 0, 0}, false},
    };
#undef STEP1
#undef STEPI
    const size_t n_cases = sizeof(cases) / sizeof(cases[0]);
    tuner_sb host, dev;
    tuner_sb_init(&host);
    tuner_sb_init(&dev);
    tuner_sb_puts(&host, "#include <math.h>\n#include <stdio.h>\n#include <string.h>\n"
                         "static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }\n"
                         "static inline float hd_f32(float v) { return v; }\n");
    tuner_op op;
    memset(&op, 0, sizeof(op));
    op.kind = TUNER_OP_ELEMENTWISE;
    op.n_inputs = 3;
    for (size_t i = 0; i < n_cases; i++) {
        tuner_ew_chain ch = {.n = cases[i].n};
        memcpy(ch.steps, cases[i].steps, sizeof(cases[i].steps));
        tuner_sb_printf(&host, "static float f%zu(float v, const float *in1, const float *in2, int col) {\n"
                               "(void)in1; (void)in2; (void)col;\n", i);
        tuner__emit_chain(&host, &op, &ch, "v", load_operand, NULL);
        tuner_sb_puts(&host, "return v; }\n");
        tuner_sb_printf(&dev, "{ float v = hd_f32(in0[col]);\n");
        tuner__emit_chain(&dev, &op, &ch, "v", load_operand, NULL);
        tuner_sb_printf(&dev, "out[%zu * blockDim.x + col] = v; }\n", i);
    }
    tuner_sb_puts(&host, "static int bad;\n"
                         "static void check(const char *what, int i, float got, float want, int approx) {\n"
                         "  int ok = isnan(want) ? isnan(got) : (!approx || isinf(want) || want == 0.0f)\n"
                         "    ? memcmp(&got, &want, 4) == 0 : fabsf(got - want) <= 1e-6f * fabsf(want);\n"
                         "  if (!ok) { printf(\"%s [%d]: got %.9g want %.9g\\n\", what, i, got, want); bad++; } }\n"
                         "int main(void) {\n  const float x[8] = ");
    sb_floats(&host, xs);
    tuner_sb_puts(&host, ";\n");
    for (size_t i = 0; i < n_cases; i++) {
        const mask_case *c = &cases[i];
        /* Comparisons read cmp_in, where and masked_fill the condition, unless the case says. */
        const bool cmp = tuner_ew_is_compare(c->steps[0].kind) && c->steps[0].operand == 1;
        const bool own1 = c->in1[0] != 0 || c->in1[1] != 0;
        tuner_sb_printf(&host, "  { const float in1[8] = ");
        sb_floats(&host, own1 ? c->in1 : cmp ? cmp_in : cond);
        tuner_sb_puts(&host, ", in2[8] = ");
        sb_floats(&host, c->in2);
        tuner_sb_puts(&host, ", want[8] = ");
        sb_floats(&host, c->want);
        tuner_sb_printf(&host, ";\n    for (int i = 0; i < 8; i++) check(\"%s\", i, f%zu(x[i], in1, in2, i), want[i], %d); }\n",
                        c->name, i, c->approx);
    }
    tuner_sb_puts(&host, "  printf(\"host masks: %d bad\\n\", bad);\n  return bad != 0; }\n");
    char *hsrc = tuner_sb_take(&host);
    char dir[] = "/tmp/hidet-maskXXXXXX";
    CHECK(hsrc && mkdtemp(dir) != NULL, "mkdtemp");
    char src[96], bin[96], cmd[512];
    snprintf(src, sizeof(src), "%s/mask.c", dir);
    snprintf(bin, sizeof(bin), "%s/mask", dir);
    FILE *f = hsrc ? fopen(src, "w") : NULL;
    CHECK(f != NULL, "write %s", src);
    if (f) {
        fputs(hsrc, f);
        fclose(f);
        const char *cc = getenv("CC") ? getenv("CC") : "cc";
        snprintf(cmd, sizeof(cmd), "%s -O1 -fno-fast-math -o %s %s -lm && %s", cc, bin, src, bin);
        CHECK(system(cmd) == 0, "host check of the mask steps failed (%s)", cmd);
    }
    unlink(src);
    unlink(bin);
    rmdir(dir);
    free(hsrc);

    char *body = tuner_sb_take(&dev);
    const tuner_target *ts[2] = {t80, t90a};
    for (int ti = 0; ti < 2 && body; ti++) {
        for (int ref = 0; ref < 2; ref++) {
            tuner_sb sb;
            tuner_sb_init(&sb);
            if (ref)
                tuner__prelude_reference(&sb, ts[ti]->sm);
            else
                tuner__prelude(&sb, ts[ti]->sm);
            tuner_sb_puts(&sb, "extern \"C\" __global__ void mask_test(const float *in0, const half_t *in1, "
                               "const bf16_t *in2, float *out)\n{\nconst int col = threadIdx.x;\n");
            tuner_sb_puts(&sb, body);
            tuner_sb_puts(&sb, "}\n");
            char *k = tuner_sb_take(&sb);
            char tn[16], what[96];
            tuner_target_name(ts[ti], tn, sizeof(tn));
            snprintf(what, sizeof(what), "log and mask steps, %s prelude (%s)", ref ? "reference" : "candidate", tn);
            CHECK(k && !strstr(k, "#error") && t_compile_check(what, k, ts[ti], NULL, NULL), "%s", what);
            free(k);
        }
    }
    free(body);

    /* A where whose other input is missing is a compile error, never a silent value. */
    tuner_ew_chain badc = {.n = 1};
    badc.steps[0] = (tuner_ew_step){.kind = TUNER_EW_WHERE, .operand = 1, .operand2 = 5};
    tuner_sb sb;
    tuner_sb_init(&sb);
    tuner__emit_chain(&sb, &op, &badc, "v", load_operand, NULL);
    char *bs = tuner_sb_take(&sb);
    CHECK(bs && strstr(bs, "#error"), "where with a bad other input must emit #error");
    free(bs);
}

static void test_emit_float(void)
{
    tuner_sb sb;
    tuner_sb_init(&sb);
    tuner__emit_float(&sb, 1.0);
    tuner__emit_float(&sb, -0.5);
    tuner__emit_float(&sb, INFINITY);
    char *s = tuner_sb_take(&sb);
    CHECK(s && strcmp(s, "__uint_as_float(0x3f800000u)__uint_as_float(0xbf000000u)__uint_as_float(0x7f800000u)") == 0,
          "emit_float: %s", s ? s : "(null)");
    free(s);
}

/* The fitted GELU of the epilogue (codegen.h), evaluated in fp32 exactly as the prelude does
 * (fmaf Horner; exp2f stands in for ex2.approx, both within 2 ulp), against GELU through libm's
 * erf in double on a dense grid through the clamp and far beyond it. Also checks that the
 * prelude text uses these coefficients and that references keep erff. */
static float gelu_fit(float x)
{
    const float a = fminf(fabsf(x), TUNER_GELU_XMAX);
    float q = TUNER_GELU_D6;
    q = fmaf(q, a, TUNER_GELU_D5);
    q = fmaf(q, a, TUNER_GELU_D4);
    q = fmaf(q, a, TUNER_GELU_D3);
    q = fmaf(q, a, TUNER_GELU_D2);
    q = fmaf(q, a, TUNER_GELU_D1);
    q = fmaf(q, a, TUNER_GELU_D0);
    return fmaf(-fabsf(x), exp2f(q), fmaxf(x, 0.0f));
}

static void test_gelu_fit(void)
{
    double worst = 0, at = 0, worst_rel = 0, at_rel = 0;
    for (int i = -1200000; i <= 1200000; i++) {
        const float x = (float)i * 1e-5f;
        const double want = 0.5 * (double)x * (1.0 + erf((double)x * 0.70710678118654752));
        const double e = fabs((double)gelu_fit(x) - want);
        if (e > worst) {
            worst = e;
            at = x;
        }
        /* Relative error wherever the result is an fp16 normal (|g| >= 2^-14). */
        if (fabs(want) >= 6.103515625e-05 && e / fabs(want) > worst_rel) {
            worst_rel = e / fabs(want);
            at_rel = x;
        }
    }
    CHECK(worst < 5e-7, "gelu fit: max abs error %.3g at x = %.5f", worst, at);
    CHECK(worst_rel < 2.5e-4, "gelu fit: max relative error %.3g at x = %.5f", worst_rel, at_rel);
    CHECK(gelu_fit(0.0f) == 0.0f && gelu_fit(50.0f) == 50.0f && gelu_fit(-50.0f) <= 0.0f &&
              gelu_fit(-50.0f) > -1e-6f,
          "gelu fit limits: %g %g %g", gelu_fit(0.0f), gelu_fit(50.0f), gelu_fit(-50.0f));

    tuner_sb sb;
    tuner_sb_init(&sb);
    tuner__prelude(&sb, 90);
    char *cand = tuner_sb_take(&sb);
    tuner__prelude_reference(&sb, 90);
    char *ref = tuner_sb_take(&sb);
    CHECK(cand && strstr(cand, "-1.151005268e+00f") && strstr(cand, "return fmaf(-fabsf(x), h, fmaxf(x, 0.0f));") &&
              !strstr(cand, "#define HD_EXACT_MATH"),
          "candidate prelude uses the fitted GELU");
    CHECK(ref && strncmp(ref, "#define HD_EXACT_MATH 1\n", 24) == 0, "reference prelude selects erff");
    free(cand);
    free(ref);
}

static void test_nvrtc(void)
{
    tuner_target t90 = {90, false}, t90a = {90, true}, t80 = {80, false}, t75 = {75, false};
    tuner_sb sb;
    tuner_sb_init(&sb);
    tuner__prelude(&sb, 90);
    tuner_sb_puts(&sb, "extern \"C\" __global__ void k(float *o) { o[threadIdx.x] = hd_gelu_tanh((float)threadIdx.x); }\n");
    char *src = tuner_sb_take(&sb);
    tuner_binary *b = NULL;
    char *err = NULL;
    CHECK(tuner_compile(src, &t90, &b, &err) == 0, "compile sm_90: %s", err ? err : "");
    if (b) {
        /* One compile gives both: PTX text for the exact target and an ELF cubin. */
        CHECK(strstr(b->ptx, ".target sm_90") != NULL, "PTX target");
        CHECK(b->cubin_len > 4 && memcmp(b->cubin, "\x7f" "ELF", 4) == 0, "cubin is ELF");
        CHECK(b->log != NULL && b->compile_ms > 0, "log and time");
        CHECK(strlen(b->ptx) == b->ptx_len, "ptx_len");
    }
    tuner_binary_free(b);
    b = NULL;
    CHECK(tuner_compile(src, &t90a, &b, &err) == 0, "compile sm_90a");
    if (b)
        CHECK(strstr(b->ptx, ".target sm_90a") != NULL, "PTX target sm_90a");
    tuner_binary_free(b);
    b = NULL;
    CHECK(tuner_compile(src, &t80, &b, &err) == 0, "compile sm_80");
    tuner_binary_free(b);
    b = NULL;
    CHECK(tuner_compile(src, &t75, &b, &err) == -EINVAL && b == NULL, "sm_75 refused");
    free(src);

    /* A compile error returns NVRTC's log, outputs untouched. */
    err = NULL;
    b = NULL;
    int r = tuner_compile("extern \"C\" __global__ void k() { this is not cuda; }\n", &t90, &b, &err);
    CHECK(r == -EINVAL && b == NULL && err && strncmp(err, "nvrtc: ", 7) == 0 && strstr(err, "error"),
          "compile error: %d %s", r, err ? err : "(null)");
    free(err);

    CHECK(strcmp(tuner_nvrtc_version(), "unknown") != 0 && strchr(tuner_nvrtc_version(), '.'), "nvrtc version %s",
          tuner_nvrtc_version());
    const char *cv = tuner_codegen_version();
    CHECK(strlen(cv) == 16 && strspn(cv, "0123456789abcdef") == 16, "codegen version %s", cv);
    CHECK(strstr(tuner_numerics_flags(), "--ftz=false") != NULL, "numerics flags");
    printf("nvrtc %s, codegen %s, flags \"%s\"\n", tuner_nvrtc_version(), cv, tuner_numerics_flags());
}

static void test_space_helpers(void)
{
    tuner_target t90 = {90, false}, t80 = {80, false}, t70 = {70, false};
    tuner_op op = t_softmax(TUNER_F16, 128, 1024, 16);
    tuner_space *a = NULL, *b = NULL, *c = NULL;
    char *err = NULL;
    CHECK(tuner_space_build(&op, &t90, &a, &err) == 0, "space");
    CHECK(tuner_space_build(&op, &t90, &b, &err) == 0, "space again");
    CHECK(tuner_space_build(&op, &t80, &c, &err) == 0, "space sm_80");
    if (a && b && c) {
        CHECK(strlen(a->hash) == 16 && strcmp(a->hash, b->hash) == 0, "hash is deterministic");
        CHECK(strcmp(a->hash, c->hash) != 0, "hash depends on the target");
        CHECK(a->n >= 8, "softmax space >= 8 on sm_90 (%zu)", a->n);
        char *j = tuner_schedule_json(&a->items[0]);
        cJSON *root = j ? cJSON_Parse(j) : NULL;
        CHECK(root && cJSON_IsString(cJSON_GetObjectItem(root, "template")) &&
                  cJSON_IsObject(cJSON_GetObjectItem(root, "params")),
              "schedule json: %s", j ? j : "(null)");
        cJSON_Delete(root);
        free(j);
        CHECK(tuner_schedule_param(&a->items[0], "threads_per_row", -1) > 0, "param lookup");
        CHECK(tuner_schedule_param(&a->items[0], "nonexistent", -7) == -7, "param default");
        CHECK(tuner__template_find("softmax_rows") != NULL && tuner__template_find("nope") == NULL, "find");
        tuner_op al2 = t_softmax(TUNER_F16, 128, 1024, 2);
        tuner_space *d = NULL;
        CHECK(tuner_space_build(&al2, &t90, &d, &err) == 0, "space align2");
        if (d)
            CHECK(strcmp(a->hash, d->hash) != 0, "hash depends on alignment");
        tuner_space_free(d);
    }
    tuner_space_free(a);
    tuner_space_free(b);
    tuner_space_free(c);
    tuner_space *e = NULL;
    err = NULL;
    CHECK(tuner_space_build(&op, &t70, &e, &err) == -EINVAL && e == NULL && err, "sm_70 refused");
    free(err);
    /* Unknown template names are refused by generate and ranked last by the model. */
    tuner_schedule s;
    memset(&s, 0, sizeof(s));
    s.template_name = "no_such_template";
    tuner_program *p = NULL;
    err = NULL;
    CHECK(tuner_generate(&op, &t90, &s, &p, &err) == -EINVAL && p == NULL && err, "unknown template");
    free(err);
    CHECK(tuner_predict_us(&op, &t90, &s) >= 1e11, "unknown template predicts +huge");
    /* A prologue on x fuses into the row templates; one on a parameter input (gamma, beta) has no
     * template. */
    op.prologue[0].n = 1;
    op.prologue[0].steps[0].kind = TUNER_EW_RELU;
    err = NULL;
    CHECK(tuner_space_build(&op, &t90, &e, &err) == 0 && e && e->n > 0, "prologue on softmax's input");
    free(err);
    tuner_space_free(e);
    e = NULL;
    op.prologue[1] = op.prologue[0];
    err = NULL;
    CHECK(tuner_space_build(&op, &t90, &e, &err) == -EINVAL && e == NULL, "prologue on a second input refused");
    free(err);
    op.prologue[0].n = op.prologue[1].n = 0;
    /* Arch tables. */
    const int sms[4] = {80, 86, 89, 90};
    for (int i = 0; i < 4; i++) {
        tuner_target t = {sms[i], false};
        const tuner_arch *ar = tuner__arch(&t);
        CHECK(ar && ar->sm == sms[i] && ar->sm_count > 0 && ar->dram_gbps > 0 && !ar->has_wgmma, "arch sm_%d", sms[i]);
    }
    tuner_target t90a = {90, true}, t80a = {80, true};
    CHECK(tuner__arch(&t90a) && tuner__arch(&t90a)->has_wgmma && tuner__arch(&t90a)->sm_count == 132, "sm_90a");
    CHECK(tuner__arch(&t80a) == NULL, "sm_80a does not exist");
    char buf[16];
    CHECK(strcmp(tuner_target_name(&t90a, buf, sizeof(buf)), "sm_90a") == 0, "target name");
    CHECK(strcmp(tuner_dtype_name(TUNER_BF16), "bf16") == 0 && strcmp(tuner_op_name(TUNER_OP_RMSNORM), "rmsnorm") == 0 &&
              strcmp(tuner_ew_name(TUNER_EW_GELU_TANH), "gelu_tanh") == 0 && strcmp(tuner_ew_name(TUNER_EW_COUNT), "unknown") == 0,
          "names");
}

/* tuner_compile runs on libuv's thread pool: concurrent compiles of different sources must each
 * get their own, correct result. */
typedef struct par_job {
    char src[512];
    char name[32];
    int rc;
    bool found;
} par_job;

static void *par_compile(void *arg)
{
    par_job *j = arg;
    tuner_target t = {90, false};
    tuner_binary *b = NULL;
    char *err = NULL;
    j->rc = tuner_compile(j->src, &t, &b, &err);
    if (b) {
        char needle[64];
        snprintf(needle, sizeof(needle), ".entry %s(", j->name);
        j->found = strstr(b->ptx, needle) != NULL;
    }
    tuner_binary_free(b);
    free(err);
    return NULL;
}

static void test_concurrent_compile(void)
{
    enum { N = 4 };
    par_job jobs[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        snprintf(jobs[i].name, sizeof(jobs[i].name), "kern_%d", i);
        snprintf(jobs[i].src, sizeof(jobs[i].src),
                 "extern \"C\" __global__ void kern_%d(float *o) { o[threadIdx.x] = %d.0f * threadIdx.x; }\n", i, i);
        jobs[i].rc = -1;
        jobs[i].found = false;
        pthread_create(&th[i], NULL, par_compile, &jobs[i]);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        CHECK(jobs[i].rc == 0 && jobs[i].found, "concurrent compile %d: rc %d", i, jobs[i].rc);
    }
}

/* The other targets: the default candidate of a row op and of an elementwise op compiles and
 * passes ptxas on sm_86, sm_89 and sm_90a too. */
static void test_other_targets(void)
{
    const tuner_target ts[3] = {{86, false}, {89, false}, {90, true}};
    for (int i = 0; i < 3; i++) {
        tuner_op ops[2] = {t_layernorm(TUNER_BF16, 300, 1024, 16, true), t_elementwise(TUNER_F16, 33, 4096, 16)};
        for (int k = 0; k < 2; k++) {
            tuner_space *sp = NULL;
            char *err = NULL;
            CHECK(tuner_space_build(&ops[k], &ts[i], &sp, &err) == 0, "space sm_%d: %s", ts[i].sm, err ? err : "");
            free(err);
            if (!sp)
                continue;
            tuner_program *p = NULL;
            err = NULL;
            size_t d = tuner_default_index(&ops[k], &ts[i], sp);
            CHECK(tuner_generate(&ops[k], &ts[i], &sp->items[d], &p, &err) == 0, "generate: %s", err ? err : "");
            free(err);
            if (p) {
                char what[64], tn[16];
                snprintf(what, sizeof(what), "default %s on %s", sp->items[d].template_name,
                         tuner_target_name(&ts[i], tn, sizeof(tn)));
                CHECK(t_compile_check(what, p->source, &ts[i], p, NULL), "%s", what);
            }
            tuner_program_free(p);
            tuner_space_free(sp);
        }
    }
}

int main(void)
{
    const tuner_target t80 = {80, false}, t90 = {90, false};
    test_emit_float();
    test_gelu_fit();
    test_chain_every_kind(&t80);
    test_chain_every_kind(&t90);
    const tuner_target t90a = {90, true};
    test_activations_on_host();
    test_pow_clamp(&t80);
    test_pow_clamp(&t90a);
    test_masks(&t80, &t90a);
    test_nvrtc();
    test_concurrent_compile();
    test_space_helpers();
    test_other_targets();
    printf("codegen: %d failures\n", t_failures);
    return t_failures ? 1 : 0;
}
