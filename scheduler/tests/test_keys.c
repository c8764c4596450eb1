/* scheduler/tests/test_keys.c - op, tuning and artifact keys; canonical op JSON; fusion anchor. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/sched.h"

#include "tests/check.h"

static tuner_tensor tensor2(int64_t a, int64_t b, tuner_dtype d)
{
    tuner_tensor t;
    memset(&t, 0, sizeof(t));
    t.rank = 2;
    t.shape[0] = a;
    t.shape[1] = b;
    t.dtype = d;
    t.align = 16;
    return t;
}

static tuner_op matmul(int m, int n, int k)
{
    tuner_op op;
    memset(&op, 0, sizeof(op));
    op.kind = TUNER_OP_MATMUL;
    op.n_inputs = op.n_anchor_inputs = 2;
    op.inputs[0] = tensor2(m, k, TUNER_F16);
    op.inputs[1] = tensor2(k, n, TUNER_F16);
    op.output = tensor2(m, n, TUNER_F16);
    op.attrs.matmul.allow_tf32 = true;
    return op;
}

/* matmul + bias[N] + relu, cast to f32 */
static tuner_op fused_matmul(int m, int n, int k)
{
    tuner_op op = matmul(m, n, k);
    op.n_inputs = 3;
    op.inputs[2].rank = 1;
    op.inputs[2].shape[0] = n;
    op.inputs[2].dtype = TUNER_F16;
    op.inputs[2].align = 16;
    op.epilogue.n = 3;
    op.epilogue.steps[0] = (tuner_ew_step){.kind = TUNER_EW_ADD, .operand = 2, .scalar = 0, .dtype = TUNER_F16};
    op.epilogue.steps[1] = (tuner_ew_step){.kind = TUNER_EW_RELU, .operand = -1, .scalar = 0, .dtype = TUNER_F16};
    op.epilogue.steps[2] = (tuner_ew_step){.kind = TUNER_EW_CAST, .operand = -1, .scalar = 0, .dtype = TUNER_F32};
    op.output.dtype = TUNER_F32;
    return op;
}

static void test_op_key(void)
{
    char a[KC_KEY_LEN + 1], b[KC_KEY_LEN + 1], c[KC_KEY_LEN + 1], d[KC_KEY_LEN + 1];
    tuner_target t90 = {90, false}, t90a = {90, true};
    sched_op_key("{\"op\":\"matmul\"}", &t90, a);
    sched_op_key("{\"op\":\"matmul\"}", &t90, b);
    sched_op_key("{\"op\":\"matmul\"}", &t90a, c);
    sched_op_key("{\"op\":\"softmax\"}", &t90, d);
    CHECK(strlen(a) == KC_KEY_LEN);
    CHECK(strcmp(a, b) == 0);
    CHECK(strcmp(a, c) != 0); /* sm_90a is a different target */
    CHECK(strcmp(a, d) != 0);

    char x[KC_KEY_LEN + 1], y[KC_KEY_LEN + 1];
    sched_artifact_key(a, "{\"template\":\"t\",\"params\":{\"bm\":64}}", x);
    sched_artifact_key(a, "{\"template\":\"t\",\"params\":{\"bm\":128}}", y);
    CHECK(strcmp(x, y) != 0);
    CHECK(strcmp(x, a) != 0);
    sched_artifact_key(c, "{\"template\":\"t\",\"params\":{\"bm\":64}}", y);
    CHECK(strcmp(x, y) != 0);

    /* kernel_cache re-derives artifact keys to check records it did not write (import, verify):
     * its derivation must be the scheduler's, for any op key and schedule. */
    const char *ops[] = {a, c, d, "", "not-hex"};
    const char *scheds[] = {"{\"template\":\"t\",\"params\":{\"bm\":64}}", "{}", "", NULL};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        for (size_t j = 0; j < sizeof(scheds) / sizeof(scheds[0]); j++) {
            sched_artifact_key(ops[i], scheds[j], x);
            kc_artifact_key(ops[i], scheds[j], y);
            CHECK(strcmp(x, y) == 0);
        }
}

static void test_canonical_json(void)
{
    tuner_op m = matmul(64, 32, 16);
    char *j1 = tuner_op_canonical_json(&m);
    char *j2 = tuner_op_canonical_json(&m);
    CHECK(j1 && j2 && strcmp(j1, j2) == 0);
    CHECK(j1 && strstr(j1, "\"op\":\"matmul\""));
    CHECK(j1 && strstr(j1, "\"shape\":[64,16]"));
    CHECK(j1 && strstr(j1, "\"allow_tf32\":true"));
    tuner_op m2 = m;
    m2.attrs.matmul.trans_b = true;
    char *j3 = tuner_op_canonical_json(&m2);
    CHECK(j3 && strcmp(j1, j3) != 0);
    tuner_op m3 = m;
    m3.inputs[0].align = 2; /* alignment facts change the kernel */
    char *j4 = tuner_op_canonical_json(&m3);
    CHECK(j4 && strcmp(j1, j4) != 0);

    tuner_op f = fused_matmul(64, 32, 16);
    char *jf = tuner_op_canonical_json(&f);
    CHECK(jf && strstr(jf, "\"op\":\"relu\""));
    CHECK(jf && strcmp(jf, j1) != 0);
    free(j1);
    free(j2);
    free(j3);
    free(j4);
    free(jf);
}

static void test_strip_fusion(void)
{
    tuner_op plain = matmul(64, 32, 16), anchor;
    CHECK(!sched_op_strip_fusion(&plain, &anchor));
    CHECK(memcmp(&plain, &anchor, sizeof(plain)) == 0);

    tuner_op f = fused_matmul(64, 32, 16);
    CHECK(sched_op_strip_fusion(&f, &anchor));
    CHECK(anchor.n_inputs == 2);
    CHECK(anchor.epilogue.n == 0);
    CHECK(anchor.output.dtype == TUNER_F16);
    char *ja = tuner_op_canonical_json(&anchor), *jp = tuner_op_canonical_json(&plain);
    /* The anchor keys exactly like the same op submitted on its own. */
    CHECK(ja && jp && strcmp(ja, jp) == 0);
    free(ja);
    free(jp);

    tuner_op pro = matmul(64, 32, 16);
    pro.prologue[0].n = 1;
    pro.prologue[0].steps[0] = (tuner_ew_step){.kind = TUNER_EW_SCALE, .operand = -1, .scalar = 0.5, .dtype = TUNER_F16};
    CHECK(sched_op_strip_fusion(&pro, &anchor));
    CHECK(anchor.prologue[0].n == 0);

    tuner_op ew;
    memset(&ew, 0, sizeof(ew));
    ew.kind = TUNER_OP_ELEMENTWISE;
    ew.n_inputs = ew.n_anchor_inputs = 1;
    ew.inputs[0] = tensor2(4, 4, TUNER_F32);
    ew.output = ew.inputs[0];
    ew.epilogue.n = 1;
    ew.epilogue.steps[0] = (tuner_ew_step){.kind = TUNER_EW_RELU, .operand = -1, .scalar = 0, .dtype = TUNER_F32};
    CHECK(!sched_op_strip_fusion(&ew, &anchor)); /* the chain is the op */
}

static void test_tuning_key(void)
{
    tuner_op m = matmul(64, 32, 16);
    tuner_target t = {90, false};
    gw_device_info dev;
    memset(&dev, 0, sizeof(dev));
    snprintf(dev.name, sizeof(dev.name), "NVIDIA H100 80GB HBM3");
    dev.sm = 90;
    dev.sm_count = 132;
    dev.driver_version = 13000;
    char k0[KC_KEY_LEN + 1], k[KC_KEY_LEN + 1];
    CHECK(sched_tuning_key(&m, &t, &dev, "0123456789abcdef", k0) == 0);
    CHECK(strlen(k0) == KC_KEY_LEN);

    gw_device_info d2 = dev;
    d2.driver_version = 13010; /* same major: same record */
    CHECK(sched_tuning_key(&m, &t, &d2, "0123456789abcdef", k) == 0 && strcmp(k, k0) == 0);
    d2.driver_version = 12080;
    CHECK(sched_tuning_key(&m, &t, &d2, "0123456789abcdef", k) == 0 && strcmp(k, k0) != 0);
    d2 = dev;
    d2.sm_count = 114;
    CHECK(sched_tuning_key(&m, &t, &d2, "0123456789abcdef", k) == 0 && strcmp(k, k0) != 0);
    d2 = dev;
    snprintf(d2.name, sizeof(d2.name), "NVIDIA H100 PCIe");
    CHECK(sched_tuning_key(&m, &t, &d2, "0123456789abcdef", k) == 0 && strcmp(k, k0) != 0);
    CHECK(sched_tuning_key(&m, &t, &dev, "fedcba9876543210", k) == 0 && strcmp(k, k0) != 0);
    tuner_target ta = {90, true};
    CHECK(sched_tuning_key(&m, &ta, &dev, "0123456789abcdef", k) == 0 && strcmp(k, k0) != 0);

    /* A tuning key is never an op key of the same JSON. */
    char *j = tuner_op_canonical_json(&m);
    char ok[KC_KEY_LEN + 1];
    sched_op_key(j, &t, ok);
    CHECK(strcmp(ok, k0) != 0);
    free(j);
    CHECK(sched_tuning_key(NULL, &t, &dev, "x", k) == -EINVAL);
}

/* An attention score's masked_fill: -inf, +inf, finfo.min and a finite value are four op keys
 * (the canonical JSON spells the infinities as strings, so they neither collide nor break the
 * JSON), and the same value gives the same key every time; where's two inputs and a
 * comparison's constant key apart the same way. */
static void test_mask_keys(void)
{
    tuner_target t = {90, false};
    tuner_op op = matmul(64, 64, 32);
    op.n_inputs = 3;
    op.inputs[2] = tensor2(64, 64, TUNER_F16);
    op.epilogue.n = 1;
    static const double fills[] = {-HUGE_VAL, HUGE_VAL, -3.4028234663852886e38, -1e4};
    char keys[4][KC_KEY_LEN + 1];
    for (int i = 0; i < 4; i++) {
        op.epilogue.steps[0] = (tuner_ew_step){.kind = TUNER_EW_MASKED_FILL, .operand = 2, .scalar = fills[i]};
        char *j = tuner_op_canonical_json(&op), *j2 = tuner_op_canonical_json(&op);
        CHECK(j && j2 && strcmp(j, j2) == 0);
        CHECK(j && strstr(j, i == 0 ? "\"value\":\"-inf\"}" : i == 1 ? "\"value\":\"inf\"}" : "\"value\":-"));
        sched_op_key(j, &t, keys[i]);
        for (int k = 0; k < i; k++)
            CHECK(strcmp(keys[i], keys[k]) != 0);
        free(j);
        free(j2);
    }
    op.epilogue.steps[0] = (tuner_ew_step){.kind = TUNER_EW_WHERE, .operand = 2, .operand2 = 1};
    char *a = tuner_op_canonical_json(&op);
    op.epilogue.steps[0].operand2 = 0;
    char *b = tuner_op_canonical_json(&op);
    op.epilogue.steps[0] = (tuner_ew_step){.kind = TUNER_EW_LT, .operand = -1, .scalar = 0.5};
    char *c = tuner_op_canonical_json(&op);
    op.epilogue.steps[0].kind = TUNER_EW_LE;
    char *d = tuner_op_canonical_json(&op);
    CHECK(a && b && c && d && strcmp(a, b) != 0 && strcmp(c, d) != 0);
    CHECK(a && strstr(a, "{\"op\":\"where\",\"operand\":2,\"other\":1}"));
    CHECK(c && strstr(c, "{\"op\":\"lt\",\"value\":0.5}"));
    free(a);
    free(b);
    free(c);
    free(d);
}

int main(void)
{
    test_op_key();
    test_canonical_json();
    test_strip_fusion();
    test_tuning_key();
    test_mask_keys();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("scheduler keys: ok\n");
    return 0;
}
