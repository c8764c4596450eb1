/* tuner/tests/test_attn_reference.c - the attention op's verification reference (tuner/attn/
 * reference.c) on the CPU: for both layouts, every head dim, causal and not, masks of every rank
 * and dtype, GQA and decode shapes and a fused epilogue, tuner_reference() gives one launch of
 * one warp per query row over every input and the F32 output, and its source compiles with NVRTC
 * and is accepted by ptxas for sm_80, sm_86, sm_90 and sm_90a. An op the reference does not take
 * (a prologue, an unsupported head dim) is refused with a message. Whether the numbers are right
 * is tuner/tests/gpu_verify.c's check against the host (it needs a GPU).
 */
#include "common.h"

#include <stdlib.h>
#include <string.h>

#include "tuner/attn/tests/ops.h"

static void check_reference(const char *name, const tuner_op *op, const tuner_target *t)
{
    char what[160];
    snprintf(what, sizeof(what), "%s sm_%d%s", name, t->sm, t->arch_specific ? "a" : "");
    tuner_program *p = NULL;
    char *err = NULL;
    int r = tuner_reference(op, t, &p, &err);
    CHECK(r == 0, "%s: reference: %s", what, err ? err : "?");
    free(err);
    if (r < 0)
        return;
    const tuner_attention_dims d = tuner_attention_dims_of(op);
    const long long rows = d.b * d.hq * d.s;
    const tuner_launch *l = &p->kernels[0];
    CHECK(p->output_dtype == TUNER_F32 && p->n_kernels == 1 && p->workspace_bytes == 0, "%s: program", what);
    CHECK(l->block[0] == 128 && l->block[1] == 1 && l->block[2] == 1 && l->grid[0] == (unsigned)((rows + 3) / 4) &&
              l->grid[1] == 1 && l->grid[2] == 1,
          "%s: launch %u x %u for %lld rows", what, l->grid[0], l->block[0], rows);
    CHECK(l->n_args == op->n_inputs + 1 && l->args[l->n_args - 1] == TUNER_BUF_OUTPUT, "%s: args", what);
    for (int i = 0; i < op->n_inputs && i < l->n_args; i++)
        CHECK(l->args[i] == TUNER_BUF_INPUT0 + i, "%s: arg %d", what, i);
    /* exact math, the row's two passes, the causal bound only when causal, the mask only with one */
    CHECK(strstr(p->source, "#define HD_EXACT_MATH 1") && strstr(p->source, "expf(s - mx)") &&
              strstr(p->source, "__shfl_sync") && strstr(p->source, "float *__restrict__ out"),
          "%s: source", what);
    CHECK(!strstr(p->source, "jend = i +") == !op->attrs.attention.causal, "%s: causal bound", what);
    char mask_read[32];
    snprintf(mask_read, sizeof(mask_read), "s += hd_f32(in%d[", tuner_attention_mask_input(op));
    CHECK(!strstr(p->source, mask_read) == !d.has_mask, "%s: mask", what);
    /* packed: q, k and v read from qkv (in0) at their first heads, nothing from in2 */
    if (op->attrs.attention.packed) {
        char kp[64], vp[64];
        snprintf(kp, sizeof(kp), "hd_f32((in0 + %lldLL)[", (long long)(d.hq * d.d));
        snprintf(vp, sizeof(vp), "hd_f32((in0 + %lldLL)[", (long long)((d.hq + d.hkv) * d.d));
        CHECK(strstr(p->source, "hd_f32(in0[") && strstr(p->source, kp) && strstr(p->source, vp) &&
                  (op->n_inputs > 2 || !strstr(p->source, "in2")), "%s: packed addressing", what);
    }
    CHECK(t_compile_check(what, p->source, t, p, NULL), "%s: compile", what);
    tuner_program_free(p);
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    const tuner_target sm80 = {80, false}, sm86 = {86, false}, sm90 = {90, false}, sm90a = {90, true};
    tuner_op op;

    /* bhsd f16 D 64, GQA 4/2, causal with Skv > S, an f32 [S,Skv] mask; odd sizes */
    const long long m2[2] = {33, 77};
    op = ta_attention_of(TUNER_F16, false, true, 2, 4, 2, 33, 77, 64, 2, m2, TUNER_F32);
    check_reference("attention bhsd f16 d64 gqa causal mask[S,Skv]", &op, &sm80);
    check_reference("attention bhsd f16 d64 gqa causal mask[S,Skv]", &op, &sm90a);

    /* decode: bshd bf16 D 128, S 1, GQA 32/8, Skv 4096, a [B,1,1,Skv] f16 padding mask, a
     * residual add and a cast in the epilogue */
    const long long m4[4] = {2, 1, 1, 4096}, res[4] = {2, 1, 32, 128};
    op = ta_attention_of(TUNER_BF16, true, false, 2, 32, 8, 1, 4096, 128, 4, m4, TUNER_F16);
    t_add_epilogue(&op, TUNER_EW_ADD, 4, res, TUNER_EW_SCALE);
    check_reference("attention bshd bf16 d128 decode mask+add", &op, &sm90a);
    check_reference("attention bshd bf16 d128 decode mask+add", &op, &sm86);

    /* D 80 without a mask, a bias epilogue; D 96 bshd causal with S > Skv (rows with no key);
     * D 256 with a bf16 rank-1 mask; MQA */
    const long long bias[1] = {80};
    op = ta_attention_of(TUNER_F16, false, false, 1, 8, 8, 100, 100, 80, 0, NULL, TUNER_F32);
    t_add_epilogue(&op, TUNER_EW_ADD, 1, bias, TUNER_EW_RELU);
    check_reference("attention bhsd f16 d80 +bias", &op, &sm90);
    op = ta_attention_of(TUNER_BF16, true, true, 3, 6, 2, 40, 16, 96, 0, NULL, TUNER_F32);
    check_reference("attention bshd bf16 d96 causal S>Skv", &op, &sm80);
    const long long m1[1] = {50};
    op = ta_attention_of(TUNER_F16, false, false, 1, 4, 1, 17, 50, 256, 1, m1, TUNER_BF16);
    check_reference("attention bhsd f16 d256 mqa mask[Skv]", &op, &sm90a);

    /* bshd_packed: GPT-2's qkv [B,S,3H,D] causal; GQA 8/2 with a [B,1,1,S] mask (inputs[1]) and
     * a bias epilogue (inputs[2]) */
    ta_shape ps = {.dt = TUNER_F16, .b = 2, .hq = 12, .hkv = 12, .s = 77, .skv = 77, .d = 64, .packed = true,
                   .causal = true};
    op = ta_attention(&ps);
    check_reference("attention packed f16 d64 gpt2 causal", &op, &sm80);
    check_reference("attention packed f16 d64 gpt2 causal", &op, &sm90a);
    ps = (ta_shape){.dt = TUNER_BF16, .b = 2, .hq = 8, .hkv = 2, .s = 40, .skv = 40, .d = 128, .packed = true,
                    .mask_rank = 4, .mask_shape = {2, 1, 1, 40}, .mask_dt = TUNER_F32};
    op = ta_attention(&ps);
    const long long pbias[1] = {128};
    t_add_epilogue(&op, TUNER_EW_ADD, 1, pbias, TUNER_EW_RELU);
    check_reference("attention packed bf16 d128 gqa mask +bias", &op, &sm86);

    /* refusals: a prologue, a head dim the templates are not written for */
    op = ta_attention_of(TUNER_F16, false, false, 1, 4, 4, 16, 16, 64, 0, NULL, TUNER_F32);
    op.prologue[0].steps[op.prologue[0].n++] = (tuner_ew_step){.kind = TUNER_EW_RELU, .operand = -1};
    tuner_program *p = NULL;
    char *err = NULL;
    CHECK(tuner_reference(&op, &sm90, &p, &err) < 0 && err && strstr(err, "prologue"), "prologue: %s",
          err ? err : "accepted");
    free(err);
    err = NULL;
    op = ta_attention_of(TUNER_F16, false, false, 1, 4, 4, 16, 16, 72, 0, NULL, TUNER_F32);
    CHECK(tuner_reference(&op, &sm90, &p, &err) < 0 && err && strstr(err, "head dim"), "d72: %s",
          err ? err : "accepted");
    free(err);

    if (t_failures)
        fprintf(stderr, "%d check(s) failed\n", (int)t_failures);
    else
        printf("test_attn_reference: all passed\n");
    return t_failures ? 1 : 0;
}
