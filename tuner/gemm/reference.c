/* tuner/gemm/reference.c - verification references for matmul and conv2d.
 *
 * One thread per output element, fp32 accumulation in plain k order, written from the op's
 * tensor definitions (strides, transposes, padding, dilation, groups) rather than from the
 * templates' implicit-GEMM addressing, so that an addressing bug in the templates cannot hide in
 * the reference too. Prologue results are rounded to the input dtype (what a candidate keeps in
 * shared memory) and the epilogue is applied before an fp32 store.
 *
 * FP8 operands are decoded bit by bit (gm_f8e4m3, gm_f8e5m2: the same arithmetic as op/op.h's
 * tuner_fp8_to_f32, which the CPU tests check against every byte), multiplied and summed in fp32,
 * and the sum scaled by the scales before the epilogue, as the kernels do.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/gemm/gemm.h"

static void emit_round(tuner_sb *sb, tuner_dtype dt, const char *var)
{
    if (dt == TUNER_F16)
        tuner_sb_printf(sb, "%s = hd_round_f16(%s);\n", var, var);
    else if (dt == TUNER_BF16)
        tuner_sb_printf(sb, "%s = hd_round_bf16(%s);\n", var, var);
}

/* Loads inputs[which] at offset expression `off` into float `var`, applying its prologue at the
 * coordinates <pfx>_t*. */
/* Device decoders of the FP8 formats (OCP FP8: e4m3 "fn", no infinity, S.1111.111 NaN; e5m2
 * IEEE-like), exact in fp32: a normal number's exponent and mantissa move into a float's fields;
 * a subnormal one is its mantissa times the smallest subnormal's power of two. */
static const char fp8_decoders[] =
    "__device__ __forceinline__ float gm_f8e4m3(unsigned char b) {\n"
    "const unsigned s = (unsigned)(b & 0x80u) << 24, e = (b >> 3) & 15u, m = b & 7u;\n"
    "if (e == 15u && m == 7u) return __uint_as_float(0x7fc00000u);\n"
    "const float v = e ? __uint_as_float(((e + 120u) << 23) | (m << 20)) : (float)m * 0.001953125f;\n"
    "return __uint_as_float(__float_as_uint(v) | s);\n}\n"
    "__device__ __forceinline__ float gm_f8e5m2(unsigned char b) {\n"
    "const unsigned s = (unsigned)(b & 0x80u) << 24, e = (b >> 2) & 31u, m = b & 3u;\n"
    "if (e == 31u) return __uint_as_float(s | (m ? 0x7fc00000u : 0x7f800000u));\n"
    "const float v = e ? __uint_as_float(((e + 112u) << 23) | (m << 21)) : (float)m * 1.52587890625e-05f;\n"
    "return __uint_as_float(__float_as_uint(v) | s);\n}\n";

/* A float rounded through FP8 (a quantizing cast step), in software: op/op.h's tuner_f32_to_fp8
 * (nearest, ties to even, saturating; the CPU tests check it against every code) then the
 * decoder above, not the kernels' cvt.rn.satfinite, so a wrong conversion cannot hide in both. */
static const char fp8_encoders[] =
    "__device__ __forceinline__ unsigned gm_enc_f8(float f, int e4) {\n"
    "const int mb = e4 ? 3 : 2, bias = e4 ? 7 : 15;\n"
    "const unsigned top = e4 ? 0x7eu : 0x7bu;\n"
    "unsigned u = __float_as_uint(f);\n"
    "const unsigned sign = (u >> 31) << 7;\n"
    "u &= 0x7fffffffu;\n"
    "if (u > 0x7f800000u) return sign | 0x7fu;\n"
    "const float a = __uint_as_float(u);\n"
    "if (a >= (e4 ? 448.0f : 57344.0f)) return sign | top;\n"
    "const int fe = (int)(u >> 23) - 127, e = fe < 1 - bias ? 1 - bias : fe;\n"
    "const float q = a * __uint_as_float((unsigned)(127 + mb - e) << 23);\n"
    "unsigned r = (unsigned)q;\n"
    "const float frac = q - (float)r;\n"
    "if (frac > 0.5f || (frac == 0.5f && (r & 1u))) r++;\n"
    "unsigned code;\n"
    "if (e == 1 - bias && r < (1u << mb)) code = r;\n"
    "else if (r == (1u << (mb + 1))) code = (unsigned)(e + bias + 1) << mb;\n"
    "else code = ((unsigned)(e + bias) << mb) | (r - (1u << mb));\n"
    "return sign | (code > top ? top : code);\n}\n"
    "__device__ __forceinline__ float hd_round_f8e4m3(float v) { return gm_f8e4m3((unsigned char)gm_enc_f8(v, 1)); }\n"
    "__device__ __forceinline__ float hd_round_f8e5m2(float v) { return gm_f8e5m2((unsigned char)gm_enc_f8(v, 0)); }\n";

static void emit_load(tuner_sb *sb, const tuner__gemm_problem *p, int which, const char *pfx, const char *off,
                      const char *var)
{
    const tuner_dtype dt = which == 1 ? p->dt_b : p->dt;
    if (tuner_dtype_is_fp8(dt)) {
        tuner_sb_printf(sb, "float %s = gm_%s(in%d[%s]);\n", var, tuner_dtype_name(dt), which, off);
        return; /* an FP8 matmul has no prologue */
    }
    tuner_sb_printf(sb, "float %s = hd_f32(in%d[%s]);\n", var, which, off);
    if (p->prologue[which]) {
        tuner__gemm_emit_chain_at(sb, p, &p->op->prologue[which], &p->op->inputs[which], pfx, var);
        emit_round(sb, p->dt, var);
    }
}

static void emit_matmul(tuner_sb *sb, const tuner__gemm_problem *p)
{
    const tuner_tensor *a = &p->op->inputs[0], *b = &p->op->inputs[1];
    tuner_sb_printf(sb, "const long long n = idx %% %lld, m = (idx / %lld) %% %lld, bt = idx / %lld;\n", p->N, p->N,
                    p->M, p->M * p->N);
    if (p->op->output.rank == 3)
        tuner_sb_puts(sb, "const long long o_t0 = bt, o_t1 = m, o_t2 = n;\n");
    else
        tuner_sb_puts(sb, "const long long o_t0 = m, o_t1 = n;\n");
    /* Per-block scales: each 128-k block's sum, scaled by its A row's and B n block's scales,
     * is added to acc in block order (the kernels' promotion). */
    if (p->block_scales)
        tuner_sb_printf(sb, "float acc = 0.0f, blk = 0.0f;\nfor (long long k = 0; k < %lld; k++) {\n", p->K);
    else
        tuner_sb_printf(sb, "float acc = 0.0f;\nfor (long long k = 0; k < %lld; k++) {\n", p->K);
    /* A: [bt?][M][K] or transposed [bt?][K][M]. */
    const char *ar = p->trans_a ? "k" : "m", *ac = p->trans_a ? "m" : "k";
    if (p->a_batched)
        tuner_sb_printf(sb, "const long long a_t0 = bt, a_t1 = %s, a_t2 = %s;\n"
                            "const long long a_off = (a_t0 * %lld + a_t1) * %lld + a_t2;\n",
                        ar, ac, (long long)a->shape[1], (long long)a->shape[2]);
    else
        tuner_sb_printf(sb, "const long long a_t0 = %s, a_t1 = %s;\nconst long long a_off = a_t0 * %lld + a_t1;\n", ar,
                        ac, (long long)a->shape[1]);
    emit_load(sb, p, 0, "a", "a_off", "av");
    const char *br = p->trans_b ? "n" : "k", *bc = p->trans_b ? "k" : "n";
    if (p->b_batched)
        tuner_sb_printf(sb, "const long long b_t0 = bt, b_t1 = %s, b_t2 = %s;\n"
                            "const long long b_off = (b_t0 * %lld + b_t1) * %lld + b_t2;\n",
                        br, bc, (long long)b->shape[1], (long long)b->shape[2]);
    else
        tuner_sb_printf(sb, "const long long b_t0 = %s, b_t1 = %s;\nconst long long b_off = b_t0 * %lld + b_t1;\n", br,
                        bc, (long long)b->shape[1]);
    emit_load(sb, p, 1, "b", "b_off", "bv");
    if (p->block_scales) {
        const long long kb = tuner__gemm_cdiv(p->K, 128);
        tuner_sb_printf(sb,
                        "blk = fmaf(av, bv, blk);\n"
                        "if ((k & 127) == 127 || k == %lld) {\n"
                        "acc = fmaf(blk, in%d[m * %lldLL + (k >> 7)] * in%d[(n >> 7) * %lldLL + (k >> 7)], acc);\n"
                        "blk = 0.0f;\n}\n}\n",
                        p->K - 1, p->bsa_in, kb, p->bsb_in, kb);
        return;
    }
    tuner_sb_puts(sb, "acc = fmaf(av, bv, acc);\n}\n");
}

static void emit_conv(tuner_sb *sb, const tuner__gemm_problem *p)
{
    const long long C = p->cc, H = p->ch, W = p->cw, K = p->ck, R = p->cr, S = p->cs, P = p->cp, Q = p->cq;
    if (p->nchw)
        tuner_sb_printf(sb, "const long long q = idx %% %lld, pp = (idx / %lld) %% %lld, ko = (idx / %lld) %% %lld, "
                            "nb = idx / %lld;\nconst long long o_t0 = nb, o_t1 = ko, o_t2 = pp, o_t3 = q;\n",
                        Q, Q, P, P * Q, K, K * P * Q);
    else
        tuner_sb_printf(sb, "const long long ko = idx %% %lld, q = (idx / %lld) %% %lld, pp = (idx / %lld) %% %lld, "
                            "nb = idx / %lld;\nconst long long o_t0 = nb, o_t1 = pp, o_t2 = q, o_t3 = ko;\n",
                        K, K, Q, K * Q, P, K * P * Q);
    tuner_sb_printf(sb, "const long long g = ko / %lld;\nfloat acc = 0.0f;\n", p->cgk);
    tuner_sb_printf(sb, "for (long long c = 0; c < %lld; c++)\nfor (long long r = 0; r < %lld; r++)\n"
                        "for (long long s = 0; s < %lld; s++) {\n",
                    p->cgc, R, S);
    tuner_sb_printf(sb, "const long long h = pp * %d - %d + r * %d, w = q * %d - %d + s * %d;\n"
                        "if (h < 0 || h >= %lld || w < 0 || w >= %lld) continue;\n",
                    p->sh, p->ph, p->dh, p->sw, p->pw, p->dw, H, W);
    tuner_sb_printf(sb, "const long long ci = g * %lld + c;\n", p->cgc);
    if (p->nchw) {
        tuner_sb_printf(sb, "const long long x_t0 = nb, x_t1 = ci, x_t2 = h, x_t3 = w;\n"
                            "const long long x_off = ((nb * %lld + ci) * %lld + h) * %lld + w;\n"
                            "const long long w_t0 = ko, w_t1 = c, w_t2 = r, w_t3 = s;\n"
                            "const long long w_off = ((ko * %lld + c) * %lld + r) * %lld + s;\n",
                        C, H, W, p->cgc, R, S);
    } else {
        tuner_sb_printf(sb, "const long long x_t0 = nb, x_t1 = h, x_t2 = w, x_t3 = ci;\n"
                            "const long long x_off = ((nb * %lld + h) * %lld + w) * %lld + ci;\n"
                            "const long long w_t0 = ko, w_t1 = r, w_t2 = s, w_t3 = c;\n"
                            "const long long w_off = ((ko * %lld + r) * %lld + s) * %lld + c;\n",
                        H, W, C, R, S, p->cgc);
    }
    emit_load(sb, p, 0, "x", "x_off", "av");
    emit_load(sb, p, 1, "w", "w_off", "bv");
    tuner_sb_puts(sb, "acc = fmaf(av, bv, acc);\n}\n");
}

int tuner__gemm_reference(const tuner_op *op, const tuner_target *t, tuner_program *prog, char **err)
{
    if (!op || !t || !prog)
        return -EINVAL;
    tuner__gemm_problem p;
    int rc = tuner__gemm_problem_init_fp8(op, &p, err);
    if (rc < 0)
        return rc;
    if (!tuner__arch(t)) {
        if (err)
            *err = strdup("unsupported target");
        return -EINVAL;
    }
    const char *name = p.conv ? "hd_ref_conv2d" : "hd_ref_matmul";
    const long long total = tuner_tensor_numel(&op->output);
    tuner_sb sb;
    tuner_sb_init(&sb);
    tuner__prelude_reference(&sb, t->sm);
    if (p.fp8) {
        tuner_sb_puts(&sb, fp8_decoders);
        tuner_sb_puts(&sb, fp8_encoders);
    }
    tuner_sb_printf(&sb, "extern \"C\" __global__ void __launch_bounds__(256) %s(", name);
    for (int i = 0; i < op->n_inputs; i++)
        tuner_sb_printf(&sb, "const %s *__restrict__ in%d, ", tuner__ctype(op->inputs[i].dtype), i);
    tuner_sb_printf(&sb, "float *__restrict__ out)\n{\n"
                         "const long long idx = (long long)blockIdx.x * 256 + threadIdx.x;\n"
                         "if (idx >= %lldLL) return;\n",
                    total);
    if (p.conv)
        emit_conv(&sb, &p);
    else
        emit_matmul(&sb, &p);
    /* An FP8 matmul's scales, then the steps (the kernels' order, tuner/gemm/common.c). */
    if (p.scale_a_in >= 0 || p.scale_b_in >= 0) {
        char sa[48] = "1.0f", sbv[48] = "1.0f";
        if (p.scale_a_in >= 0)
            snprintf(sa, sizeof(sa), "in%d[%s]", p.scale_a_in, p.scale_a == TUNER_SCALE_ROW ? "m" : "0");
        if (p.scale_b_in >= 0)
            snprintf(sbv, sizeof(sbv), "in%d[%s]", p.scale_b_in, p.scale_b == TUNER_SCALE_COL ? "n" : "0");
        tuner_sb_printf(&sb, "acc = acc * (%s * %s);\n", sa, sbv);
    }
    if (p.amax_in >= 0) {
        /* The quantize step's amax: of the value the cast receives (the kernels' rule,
         * tuner/gemm/common.c), this thread's one element. */
        tuner_ew_chain head = op->epilogue, last = {.n = 1};
        last.steps[0] = head.steps[--head.n];
        tuner__gemm_emit_chain_at(&sb, &p, &head, &op->output, "o", "acc");
        tuner_sb_puts(&sb, "float gm_amax_v = fmaxf(0.0f, fabsf(acc));\n"); /* NaN counts 0, as in the kernels */
        tuner__gemm_emit_amax_flush(&sb, &p);
        tuner__gemm_emit_chain_at(&sb, &p, &last, &op->output, "o", "acc");
    } else {
        tuner__gemm_emit_chain_at(&sb, &p, &op->epilogue, &op->output, "o", "acc");
    }
    tuner_sb_puts(&sb, "out[idx] = acc;\n}\n");
    char *src = tuner_sb_take(&sb);
    if (!src)
        return -ENOMEM;
    prog->source = src;
    prog->output_dtype = TUNER_F32;
    prog->workspace_bytes = 0;
    prog->n_kernels = 1;
    tuner_launch *l = &prog->kernels[0];
    memset(l, 0, sizeof(*l));
    snprintf(l->name, sizeof(l->name), "%s", name);
    l->grid[0] = (unsigned)((total + 255) / 256);
    l->grid[1] = l->grid[2] = 1;
    l->block[0] = 256;
    l->block[1] = l->block[2] = 1;
    l->n_args = 0;
    for (int i = 0; i < op->n_inputs; i++)
        l->args[l->n_args++] = TUNER_BUF_INPUT0 + i;
    l->args[l->n_args++] = TUNER_BUF_OUTPUT;
    return 0;
}
