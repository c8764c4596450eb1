/* tuner/tests/emu/gen_fp8_mma.c - writes one matmul_mma FP8 candidate for emu_fp8_mma.cpp (a
 * developer check without a GPU; emulate_fp8_mma.sh drives both), and checks what it computed.
 *   gen_fp8_mma DIR CASE INDEX    writes DIR/kern.cu (the kernel source after the prelude and the
 *                                 gemm helpers), DIR/launch.h (the launches) and DIR/in<i>.bin;
 *                                 prints the schedule (exit 3: INDEX past the space)
 *   gen_fp8_mma DIR CASE check    compares DIR/out.bin with the op's value, computed here in
 *                                 double from the decoded inputs (scales, per-block scales,
 *                                 the div + cast epilogue of a quantizing case)
 * CASE: 0 e4m3 x e5m2, row/col scales, f32 out, 40x72x272; 1 the same, fast_accum false; 2 per-block
 * scales, bf16 out, 150x136x400; 3 tensor scales / s, quantized to e4m3, 64x64x160; 4 a decode shape,
 * e5m2 x e4m3, tensor and column scales, 9x136x512 (16-row tiles, split-K, deep rings). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/template.h"
#include "bench/slurp.h"
#include "tuner/codegen.h"
#include "tuner/tests/common.h"
#include "tuner/tests/host_values.h"

static tuner_op case_op(int c)
{
    const tuner_dtype E4 = TUNER_F8E4M3, E5 = TUNER_F8E5M2;
    switch (c) {
    case 0:
        return t_fp8_matmul(E4, E5, TUNER_F32, 0, 40, 72, 272, TUNER_SCALE_ROW, TUNER_SCALE_COL, false);
    case 1:
        return t_fp8_promoted(t_fp8_matmul(E4, E5, TUNER_F32, 0, 40, 72, 272, TUNER_SCALE_ROW, TUNER_SCALE_COL, false));
    case 2:
        return t_fp8_matmul(E4, E4, TUNER_BF16, 0, 150, 136, 400, TUNER_SCALE_BLOCK, TUNER_SCALE_BLOCK, false);
    case 4:
        return t_fp8_matmul(E5, E4, TUNER_BF16, 0, 9, 136, 512, TUNER_SCALE_TENSOR, TUNER_SCALE_COL, false);
    default:
        return t_fp8_quantized(
            t_fp8_matmul(E4, E4, TUNER_BF16, 0, 64, 64, 160, TUNER_SCALE_TENSOR, TUNER_SCALE_TENSOR, false));
    }
}

static const tuner_target sm89 = {.sm = 89};

static float in_f32(const tuner_tensor *t, const unsigned char *b, long long k)
{
    if (tuner_dtype_is_fp8(t->dtype))
        return tuner_fp8_to_f32(t->dtype, b[k]);
    float v;
    memcpy(&v, b + 4 * k, 4);
    return v;
}

static int check(const char *dir, const tuner_op *op)
{
    char path[512];
    unsigned char *in[TUNER_MAX_INPUTS] = {NULL};
    for (int i = 0; i < op->n_inputs; i++) {
        size_t n;
        snprintf(path, sizeof(path), "%s/in%d.bin", dir, i);
        in[i] = (unsigned char *)slurp(path, &n);
    }
    size_t on;
    snprintf(path, sizeof(path), "%s/out.bin", dir);
    unsigned char *out = (unsigned char *)slurp(path, &on);
    if (!out)
        return 2;
    const long long M = op->output.shape[0], N = op->output.shape[1], K = op->inputs[0].shape[1], KB = (K + 127) / 128;
    const tuner_scale_kind sa = op->attrs.matmul.scale_a, sb = op->attrs.matmul.scale_b;
    long bad = 0;
    double maxerr = 0;
    for (long long m = 0; m < M; m++)
        for (long long n = 0; n < N; n++) {
            double acc = 0;
            for (long long kb = 0; kb < KB; kb++) {
                double s = 0;
                for (long long k = kb * 128; k < K && k < kb * 128 + 128; k++)
                    s += (double)in_f32(&op->inputs[0], in[0], m * K + k) * in_f32(&op->inputs[1], in[1], n * K + k);
                if (sa == TUNER_SCALE_BLOCK)
                    s *= (double)in_f32(&op->inputs[2], in[2], m * KB + kb) *
                         in_f32(&op->inputs[3], in[3], (n / 128) * KB + kb);
                acc += s;
            }
            if (sa == TUNER_SCALE_ROW || sa == TUNER_SCALE_TENSOR)
                acc *= (double)in_f32(&op->inputs[2], in[2], sa == TUNER_SCALE_ROW ? m : 0);
            if (sb == TUNER_SCALE_COL || sb == TUNER_SCALE_TENSOR)
                acc *= (double)in_f32(&op->inputs[3], in[3], sb == TUNER_SCALE_COL ? n : 0);
            double got;
            if (tuner_dtype_is_fp8(op->output.dtype)) {
                acc /= (double)in_f32(&op->inputs[4], in[4], 0);
                got = tuner_fp8_to_f32(op->output.dtype, out[m * N + n]);
            } else if (op->output.dtype == TUNER_BF16) {
                uint16_t h;
                memcpy(&h, out + 2 * (m * N + n), 2);
                got = t_bf16_to_f32(h);
            } else {
                float v;
                memcpy(&v, out + 4 * (m * N + n), 4);
                got = v;
            }
            const double tol = tuner_dtype_is_fp8(op->output.dtype) ? 0.13 : op->output.dtype == TUNER_BF16 ? 1e-2 : 1e-4;
            const double e = fabs(got - acc) / (1.0 + fabs(acc));
            if (!(e <= tol)) {
                if (bad < 5)
                    fprintf(stderr, "m %lld n %lld: got %g want %g\n", m, n, got, acc);
                bad++;
            }
            if (e > maxerr || e != e)
                maxerr = e;
        }
    printf("%s: bad %ld of %lld, max rel err %.2e\n", bad ? "WRONG" : "ok", bad, M * N, maxerr);
    return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    const char *dir = argv[1];
    const tuner_op op = case_op(atoi(argv[2]));
    if (!strcmp(argv[3], "check"))
        return check(dir, &op);
    tuner_space *sp = NULL;
    char *err = NULL;
    if (tuner_space_build(&op, &sm89, &sp, &err) < 0) {
        fprintf(stderr, "space: %s\n", err);
        return 2;
    }
    const size_t idx = (size_t)atoll(argv[3]);
    if (idx >= sp->n)
        return 3;
    tuner_program *pr = NULL;
    if (tuner_generate(&op, &sm89, &sp->items[idx], &pr, &err) < 0) {
        fprintf(stderr, "generate: %s\n", err);
        return 2;
    }
    char path[512];
    snprintf(path, sizeof(path), "%s/kern.cu", dir);
    FILE *f = fopen(path, "w");
    const char *k = strstr(pr->source, "// ---- end of tuner/gemm helpers ----");
    k = k ? strchr(k, '\n') + 1 : pr->source;
    /* The fp8 helpers (asm) are the harness's own. */
    for (const char *line = k; *line;) {
        const char *nl = strchr(line, '\n');
        const size_t len = nl ? (size_t)(nl - line + 1) : strlen(line);
        /* A staged FP8 pair's inline st.shared.u16 becomes a call of the harness's gm_sts16_. */
        static const char st16[] = "asm volatile(\"st.shared.u16 [%0], %1;\" :: \"r\"(";
        const char *h = strstr(line, "), \"h\"(");
        if (!strncmp(line, st16, sizeof(st16) - 1) && h && h < line + len) {
            const char *end = strstr(h, ") : \"memory\");");
            fprintf(f, "gm_sts16_(%.*s, %.*s);\n", (int)(h - line - (sizeof(st16) - 1)), line + sizeof(st16) - 1,
                    (int)(end - h - 7), h + 7);
        } else if (strncmp(line, "HD_INLINE", 9) && strncmp(line, "__device__ __forceinline__", 26))
            fwrite(line, 1, len, f);
        line += len;
    }
    fclose(f);
    snprintf(path, sizeof(path), "%s/launch.h", dir);
    f = fopen(path, "w");
    fprintf(f, "#define N_INPUTS %d\n#define OUT_BYTES %lld\n#define WS_BYTES %zu\n#define N_LAUNCHES %d\n", op.n_inputs,
            (long long)(tuner_tensor_numel(&op.output) * tuner_dtype_size(op.output.dtype)), pr->workspace_bytes,
            pr->n_kernels);
    for (int l = 0; l < pr->n_kernels; l++) {
        const tuner_launch *L = &pr->kernels[l];
        fprintf(f, "static void call_%d() { %s(", l, L->name);
        for (int a = 0; a < L->n_args; a++) {
            const int b = L->args[a];
            if (b == TUNER_BUF_OUTPUT)
                fprintf(f, "%s(%s *)g_out", a ? ", " : "", tuner__ctype(op.output.dtype));
            else if (b == TUNER_BUF_WORKSPACE)
                fprintf(f, "%s(float *)g_ws", a ? ", " : "");
            else
                fprintf(f, "%s(const %s *)g_in[%d]", a ? ", " : "", tuner__ctype(op.inputs[b].dtype), b);
        }
        fprintf(f, "); }\n");
        fprintf(f, "static const Launch launch_%d = {call_%d, {%u, %u, %u}, %u, %u};\n", l, l, L->grid[0], L->grid[1],
                L->grid[2], L->block[0], L->shared_bytes);
    }
    fprintf(f, "static const Launch launches[] = {launch_0%s};\n", pr->n_kernels > 1 ? ", launch_1" : "");
    fclose(f);
    /* Inputs: FP8 bytes of magnitude <= 2, scales in [0.5, 1.5]. */
    t_rng_state = 7;
    for (int i = 0; i < op.n_inputs; i++) {
        const tuner_tensor *x = &op.inputs[i];
        const long long n = tuner_tensor_numel(x);
        const int es = tuner_dtype_size(x->dtype);
        unsigned char *h = malloc((size_t)(n * es));
        for (long long e = 0; e < n; e++) {
            if (tuner_dtype_is_fp8(x->dtype)) {
                uint8_t b;
                do
                    b = (uint8_t)t_rnd_int(0, 255);
                while (!(fabsf(tuner_fp8_to_f32(x->dtype, b)) <= 2.0f));
                h[e] = b;
            } else {
                const float v = 0.5f + (float)t_rnd_int(0, 1024) / 1024.0f;
                memcpy(h + 4 * e, &v, 4);
            }
        }
        snprintf(path, sizeof(path), "%s/in%d.bin", dir, i);
        f = fopen(path, "wb");
        fwrite(h, 1, (size_t)(n * es), f);
        fclose(f);
        free(h);
    }
    char *sj = tuner_schedule_json(&sp->items[idx]);
    printf("%s\n", sj);
    free(sj);
    tuner_program_free(pr);
    tuner_space_free(sp);
    return 0;
}
