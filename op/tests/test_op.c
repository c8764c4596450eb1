/* Unit tests of op/: every vocabulary prints and parses back (no enum value without a name, no
 * name for two values), the accepted dtype spellings, the list of targets, and a golden canonical
 * JSON with the string builder's out-of-memory rule. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "op/op.h"
#include "op/sb.h"

#include "tests/check.h"

/* name(v) is a real name for every v below count, parse gives v back, and out-of-range values
 * print as "unknown", which parses as nothing. */
#define CHECK_VOCABULARY(type, count, name_fn, parse_fn)                                      \
    do {                                                                                      \
        for (int v_ = 0; v_ < (count); v_++) {                                                \
            type got_;                                                                        \
            const char *n_ = name_fn((type)v_);                                               \
            CHECK(n_ && strcmp(n_, "unknown") != 0);                                          \
            CHECK(parse_fn(n_, &got_) == 0 && (int)got_ == v_);                               \
        }                                                                                     \
        type untouched_ = (type)0;                                                            \
        CHECK_STR(name_fn((type)(count)), "unknown");                                         \
        CHECK_STR(name_fn((type)-1), "unknown");                                              \
        CHECK(parse_fn("unknown", &untouched_) == -EINVAL && (int)untouched_ == 0);           \
        CHECK(parse_fn(NULL, &untouched_) == -EINVAL);                                        \
        CHECK(parse_fn("", &untouched_) == -EINVAL);                                          \
    } while (0)

static void test_vocabularies(void)
{
    CHECK_VOCABULARY(tuner_dtype, TUNER_DTYPE_COUNT, tuner_dtype_name, tuner_dtype_parse);
    CHECK_VOCABULARY(tuner_op_kind, TUNER_OP_COUNT, tuner_op_name, tuner_op_parse);
    CHECK_VOCABULARY(tuner_ew_kind, TUNER_EW_COUNT, tuner_ew_name, tuner_ew_parse);
    CHECK_VOCABULARY(tuner_reduce_kind, TUNER_REDUCE_COUNT, tuner_reduce_name, tuner_reduce_parse);
    CHECK_VOCABULARY(tuner_pool_kind, TUNER_POOL_COUNT, tuner_pool_name, tuner_pool_parse);
    CHECK_VOCABULARY(tuner_tune_mode, TUNER_TUNE_COUNT, tuner_tune_name, tuner_tune_parse);

    /* The names the wire format and the cache keys have always used. */
    CHECK_STR(tuner_dtype_name(TUNER_BF16), "bf16");
    CHECK_STR(tuner_op_name(TUNER_OP_ELEMENTWISE), "elementwise");
    CHECK_STR(tuner_ew_name(TUNER_EW_GELU_ERF), "gelu");
    CHECK_STR(tuner_ew_name(TUNER_EW_GELU_TANH), "gelu_tanh");
    CHECK_STR(tuner_reduce_name(TUNER_REDUCE_MEAN), "mean");
    CHECK_STR(tuner_tune_name(TUNER_TUNE_MEASURE), "measure");

    static const struct {
        const char *s;
        tuner_dtype d;
    } spellings[] = {
        {"f16", TUNER_F16},   {"float16", TUNER_F16},   {"half", TUNER_F16}, {"bf16", TUNER_BF16},
        {"bfloat16", TUNER_BF16}, {"f32", TUNER_F32}, {"float32", TUNER_F32},
        {"i32", TUNER_I32}, {"int32", TUNER_I32}, {"i64", TUNER_I64}, {"int64", TUNER_I64},
    };
    for (size_t i = 0; i < sizeof(spellings) / sizeof(spellings[0]); i++) {
        tuner_dtype d = TUNER_DTYPE_COUNT;
        CHECK(tuner_dtype_parse(spellings[i].s, &d) == 0 && d == spellings[i].d);
    }
    tuner_dtype d = TUNER_F16;
    CHECK(tuner_dtype_parse("F16", &d) == -EINVAL && d == TUNER_F16);
    CHECK(tuner_dtype_parse("float64", &d) == -EINVAL);
}

static void test_targets(void)
{
    static const char *const want[TUNER_TARGET_COUNT] = {"sm_80", "sm_86", "sm_89", "sm_90",
                                                         "sm_90a", "sm_100", "sm_120"};
    for (int i = 0; i < TUNER_TARGET_COUNT; i++) {
        tuner_target t = tuner_target_of((tuner_target_id)i), back = {0};
        char name[16];
        CHECK_STR(tuner_target_name(&t, name, sizeof(name)), want[i]);
        CHECK(tuner_target_parse(want[i], &back) == 0 && back.sm == t.sm &&
              back.arch_specific == t.arch_specific);
        CHECK_EQ_INT(tuner_target_id_of(&t), i);
    }
    tuner_target t = {.sm = 75}, untouched = {.sm = 1};
    char name[16];
    CHECK_EQ_INT(tuner_target_id_of(&t), -1);
    CHECK_STR(tuner_target_name(&t, name, sizeof(name)), "sm_75");
    t = (tuner_target){.sm = 80, .arch_specific = true};
    CHECK_EQ_INT(tuner_target_id_of(&t), -1);
    CHECK_EQ_INT(tuner_target_id_of(NULL), -1);
    CHECK(tuner_target_of(TUNER_TARGET_COUNT).sm == 0);
    CHECK(tuner_target_parse("sm_90b", &untouched) == -EINVAL && untouched.sm == 1);
    CHECK(tuner_target_parse("sm_75", &untouched) == -EINVAL);
    CHECK(tuner_target_parse(NULL, &untouched) == -EINVAL);
}

static void test_canonical(void)
{
    /* A fused matmul: bias then cast; the golden string is what every cache key was built on. */
    tuner_op op = {.kind = TUNER_OP_MATMUL, .n_inputs = 3, .n_anchor_inputs = 2};
    op.inputs[0] = (tuner_tensor){.rank = 2, .shape = {64, 32}, .dtype = TUNER_F16, .align = 16};
    op.inputs[1] = (tuner_tensor){.rank = 2, .shape = {32, 16}, .dtype = TUNER_F16, .align = 8};
    op.inputs[2] = (tuner_tensor){.rank = 1, .shape = {16}, .dtype = TUNER_F16, .align = 16};
    op.output = (tuner_tensor){.rank = 2, .shape = {64, 16}, .dtype = TUNER_F32, .align = 16};
    op.epilogue.n = 3;
    op.epilogue.steps[0] = (tuner_ew_step){.kind = TUNER_EW_ADD, .operand = 2};
    op.epilogue.steps[1] = (tuner_ew_step){.kind = TUNER_EW_SCALE, .operand = -1, .scalar = 0.5};
    op.epilogue.steps[2] = (tuner_ew_step){.kind = TUNER_EW_CAST, .operand = -1, .dtype = TUNER_F32};
    char *j = tuner_op_canonical_json(&op);
    CHECK_STR(j,
              "{\"attrs\":{\"allow_tf32\":false,\"trans_a\":false,\"trans_b\":false},"
              "\"epilogue\":[{\"op\":\"add\",\"operand\":2},{\"op\":\"scale\",\"value\":0.5},"
              "{\"dtype\":\"f32\",\"op\":\"cast\"}],"
              "\"inputs\":[{\"align\":16,\"dtype\":\"f16\",\"shape\":[64,32]},"
              "{\"align\":8,\"dtype\":\"f16\",\"shape\":[32,16]},"
              "{\"align\":16,\"dtype\":\"f16\",\"shape\":[16]}],"
              "\"n_anchor_inputs\":2,\"op\":\"matmul\","
              "\"output\":{\"align\":16,\"dtype\":\"f32\",\"shape\":[64,16]},\"prologue\":[[],[]]}");
    free(j);
    CHECK(tuner_op_canonical_json(NULL) == NULL);

    tuner_op anchor;
    tuner_op_strip_fusion(&op, &anchor);
    CHECK(anchor.n_inputs == 2 && anchor.epilogue.n == 0 && anchor.output.dtype == TUNER_F16);
    CHECK(anchor.inputs[2].rank == 0);
}

static void test_sb(void)
{
    tuner_sb b;
    tuner_sb_init(&b);
    char *empty = tuner_sb_take(&b);
    CHECK_STR(empty, ""); /* never NULL unless an allocation failed */
    free(empty);
    tuner_sb_printf(&b, "%d-%s", 7, "x");
    tuner_sb_puts(&b, "yz");
    char *s = tuner_sb_take(&b);
    CHECK_STR(s, "7-xyz");
    free(s);
    CHECK(b.buf == NULL && b.len == 0);
    b.oom = true; /* a failed allocation is sticky: the result is NULL, not a truncated string */
    tuner_sb_puts(&b, "lost");
    CHECK(tuner_sb_take(&b) == NULL);
    tuner_sb_free(&b);
}

/* The integer dtypes' sizes, and the row a gather id selects: negative ids from the end as in
 * PyTorch, ids outside [-n, n) none (-1: the kernels read nothing and write 0). */
static void test_int_dtypes_and_gather_row(void)
{
    CHECK(tuner_dtype_size(TUNER_I32) == 4 && tuner_dtype_size(TUNER_I64) == 8 && tuner_dtype_size(TUNER_F32) == 4 &&
          tuner_dtype_size(TUNER_F16) == 2 && tuner_dtype_size(TUNER_BF16) == 2);
    CHECK(tuner_dtype_is_int(TUNER_I32) && tuner_dtype_is_int(TUNER_I64) && !tuner_dtype_is_int(TUNER_F32) &&
          !tuner_dtype_is_int(TUNER_F16) && !tuner_dtype_is_int(TUNER_BF16));
    CHECK_STR(tuner_dtype_name(TUNER_I64), "i64");
    CHECK_STR(tuner_op_name(TUNER_OP_GATHER), "gather");
    static const struct {
        int64_t id, n, want;
    } t[] = {
        {0, 10, 0},   {9, 10, 9},  {-1, 10, 9},  {-10, 10, 0}, {10, 10, -1}, {-11, 10, -1},
        {1000000, 10, -1}, {INT64_MIN, 10, -1}, {INT64_MAX, 10, -1}, {0, 1, 0}, {-1, 1, 0}, {1, 1, -1},
        {-2147483648LL, 50257, -1}, {50256, 50257, 50256}, {-50257, 50257, 0},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        CHECK(tuner_gather_row(t[i].id, t[i].n) == t[i].want, "gather row %zu: id %lld n %lld -> %lld, want %lld", i,
              (long long)t[i].id, (long long)t[i].n, (long long)tuner_gather_row(t[i].id, t[i].n), (long long)t[i].want);
}

/* PyTorch's pooling_output_shape, against sizes worked out by hand from its formula and rule
 * (ceil mode drops a last window that would start in the right padding). */
static void test_pool_out_size(void)
{
    static const struct {
        int64_t in;
        int k, s, p, d;
        bool ceil;
        int64_t want;
    } t[] = {
        {112, 3, 2, 1, 1, false, 56}, /* ResNet's stem maxpool */
        {147, 3, 2, 0, 1, false, 73}, /* Inception-V3's */
        {7, 3, 2, 0, 1, true, 3},     /* (7-3+1)/2 = 2.5 -> 3, last start 4 < 7 */
        {6, 3, 2, 0, 1, false, 2},
        {6, 3, 2, 0, 1, true, 3},     /* starts 0, 2, 4: all inside */
        {5, 2, 2, 1, 1, false, 3},
        {5, 2, 2, 1, 1, true, 3},     /* a 4th window would start at 6 - 1 = 5 = in: dropped */
        {1, 2, 2, 1, 1, true, 1},     /* the 2nd would start at 2 - 1 = 1 = in: dropped */
        {3, 2, 2, 0, 1, false, 1},
        {3, 2, 2, 0, 1, true, 2},     /* the 2nd starts at 2 < 3: kept, one element wide */
        {4, 3, 3, 1, 1, true, 2},
        {10, 3, 1, 0, 2, false, 6},   /* dilated: effective window 5 */
        {10, 3, 3, 1, 2, true, 4},    /* (10+2-4-1+2)/3 + 1 = 4; the last starts at 9 - 1 = 8 */
        {2, 3, 1, 0, 1, false, 0},    /* window larger than the input: refused by callers */
        {1, 4, 2, 0, 1, false, -1},   /* floor division of a negative numerator */
        {14, 14, 14, 0, 1, false, 1}, /* a global window */
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        int64_t got = tuner_pool_out_size(t[i].in, t[i].k, t[i].s, t[i].p, t[i].d, t[i].ceil);
        CHECK(got == t[i].want, "pool out size %zu: in %lld k %d s %d p %d d %d ceil %d: %lld, want %lld", i,
              (long long)t[i].in, t[i].k, t[i].s, t[i].p, t[i].d, t[i].ceil, (long long)got, (long long)t[i].want);
    }
}

/* attention: the golden canonical JSON (every attribute, the scale at full precision, the
 * layout by name), the sizes in either layout, the supported head dims. */
static void test_attention(void)
{
    CHECK_STR(tuner_op_name(TUNER_OP_ATTENTION), "attention");
    /* bshd, GQA 8/2, a [S, Skv] f32 mask, an epilogue cast */
    tuner_op op = {.kind = TUNER_OP_ATTENTION, .n_inputs = 4, .n_anchor_inputs = 4};
    op.inputs[0] = (tuner_tensor){.rank = 4, .shape = {2, 16, 8, 64}, .dtype = TUNER_BF16, .align = 16};
    op.inputs[1] = (tuner_tensor){.rank = 4, .shape = {2, 48, 2, 64}, .dtype = TUNER_BF16, .align = 16};
    op.inputs[2] = op.inputs[1];
    op.inputs[3] = (tuner_tensor){.rank = 2, .shape = {16, 48}, .dtype = TUNER_F32, .align = 16};
    op.output = op.inputs[0];
    op.output.dtype = TUNER_F32;
    op.attrs.attention.causal = true;
    op.attrs.attention.scale = 0.125;
    op.attrs.attention.bshd = true;
    op.epilogue.n = 1;
    op.epilogue.steps[0] = (tuner_ew_step){.kind = TUNER_EW_CAST, .operand = -1, .dtype = TUNER_F32};
    char *j = tuner_op_canonical_json(&op);
    CHECK_STR(j,
              "{\"attrs\":{\"causal\":true,\"layout\":\"bshd\",\"scale\":0.125},"
              "\"epilogue\":[{\"dtype\":\"f32\",\"op\":\"cast\"}],"
              "\"inputs\":[{\"align\":16,\"dtype\":\"bf16\",\"shape\":[2,16,8,64]},"
              "{\"align\":16,\"dtype\":\"bf16\",\"shape\":[2,48,2,64]},"
              "{\"align\":16,\"dtype\":\"bf16\",\"shape\":[2,48,2,64]},"
              "{\"align\":16,\"dtype\":\"f32\",\"shape\":[16,48]}],"
              "\"n_anchor_inputs\":4,\"op\":\"attention\","
              "\"output\":{\"align\":16,\"dtype\":\"f32\",\"shape\":[2,16,8,64]},\"prologue\":[[],[],[],[]]}");
    free(j);
    tuner_attention_dims d = tuner_attention_dims_of(&op);
    CHECK(d.b == 2 && d.hq == 8 && d.hkv == 2 && d.s == 16 && d.skv == 48 && d.d == 64 && d.group == 4 && d.has_mask,
          "bshd dims %lld %lld %lld %lld %lld %lld", (long long)d.b, (long long)d.hq, (long long)d.hkv, (long long)d.s,
          (long long)d.skv, (long long)d.d);

    /* the same tensors read as bhsd, no mask, defaults (an irrational scale prints exactly) */
    op.n_inputs = op.n_anchor_inputs = 3;
    op.attrs.attention.causal = false;
    op.attrs.attention.bshd = false;
    op.attrs.attention.scale = 0.088388347648318447; /* 1/sqrt(128) */
    op.epilogue.n = 0;
    op.output.dtype = TUNER_BF16;
    j = tuner_op_canonical_json(&op);
    CHECK(j && strstr(j, "{\"attrs\":{\"causal\":false,\"layout\":\"bhsd\",\"scale\":0.088388347648318447},") == j &&
              strstr(j, "\"n_anchor_inputs\":3,") && strstr(j, "\"prologue\":[[],[],[]]}"),
          "%s", j ? j : "(null)");
    free(j);
    d = tuner_attention_dims_of(&op);
    CHECK(d.b == 2 && d.hq == 16 && d.hkv == 48 && d.s == 8 && d.skv == 2 && d.d == 64 && !d.has_mask);

    static const int ok[] = {64, 80, 96, 128, 256}, no[] = {0, 32, 63, 72, 112, 160, 192, 512};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        CHECK(tuner_attention_head_dim_ok(ok[i]), "head dim %d", ok[i]);
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        CHECK(!tuner_attention_head_dim_ok(no[i]), "head dim %d", no[i]);
}

int main(void)
{
    test_attention();
    test_vocabularies();
    test_pool_out_size();
    test_int_dtypes_and_gather_row();
    test_targets();
    test_canonical();
    test_sb();
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
