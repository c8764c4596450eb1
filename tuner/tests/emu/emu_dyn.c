/* tuner/tests/emu/emu_dyn.c - see emu_dyn.h. */
#include "tuner/tests/emu/emu_dyn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench/slurp.h"
#include "tuner/codegen.h"
#include "tuner/template.h"
#include "tuner/tests/common.h"
#include "tuner/tests/host_values.h"

void emu_shape_at(const tuner_tensor *x, const int64_t *sz, long long *shape)
{
    for (int d = 0; d < x->rank; d++)
        shape[d] = x->sym[d] ? tuner_dims_product(sz, x->sym[d]) : x->shape[d];
}

long long emu_numel_at(const tuner_tensor *x, const int64_t *sz)
{
    long long s[TUNER_MAX_RANK], n = 1;
    emu_shape_at(x, sz, s);
    for (int d = 0; d < x->rank; d++)
        n *= s[d];
    return n;
}

bool emu_set_load(const char *dir, const tuner_op *op, size_t out_bytes, emu_set *s)
{
    char path[600];
    size_t n = 0;
    bool ok = true;
    memset(s, 0, sizeof(*s));
    for (int i = 0; i < op->n_inputs; i++) {
        snprintf(path, sizeof(path), "%s/in%d.bin", dir, i);
        s->in[i] = slurp(path, &n);
        ok = ok && s->in[i];
    }
    snprintf(path, sizeof(path), "%s/out.bin", dir);
    s->out = (unsigned char *)slurp(path, &n);
    if (!ok || !s->out || n != out_bytes + EMU_MARGIN) {
        printf("WRONG: no output\n");
        for (int i = 0; i < op->n_inputs; i++)
            free(s->in[i]);
        free(s->out);
        return false;
    }
    for (size_t b = out_bytes; b < out_bytes + EMU_MARGIN; b++)
        s->margin += s->out[b] != 0xa5; /* emu_mma's poison */
    return true;
}

int emu_set_verdict(emu_set *s, const tuner_op *op, const char *what, long bad, long long total, double maxerr)
{
    const bool wrong = bad || s->margin;
    printf("%s %s: bad %ld of %lld, max rel err %.2e%s", wrong ? "WRONG" : "ok", what, bad, total, maxerr,
           s->margin ? "" : "; ");
    if (s->margin)
        printf(", %ld bytes written past the output; ", s->margin);
    for (int i = 0; i < op->n_inputs; i++)
        free(s->in[i]);
    free(s->out);
    return wrong ? 1 : 0;
}

/* The ')' that closes an operand's expression starting at e (its nested parentheses skipped), or
 * end. */
static const char *closing_paren(const char *e, const char *end)
{
    int d = 0;
    for (; e < end; e++) {
        if (*e == '(')
            d++;
        else if (*e == ')' && --d < 0)
            break;
    }
    return e;
}

/* The text of the statement `asm...(...);` starting at a (the index of its ';' in *end), or
 * NULL; *tmpl gets its template's first string literal, arg[0] and arg[1] the first two "r" or
 * "h" operands' expressions (what each "r"(...) / "h"(...) holds; empty where there is none). */
static const char *asm_stmt(const char *a, const char **end, char *tmpl, size_t tlen, char (*arg)[96])
{
    const char *p = strchr(a, '(');
    if (!p)
        return NULL;
    int depth = 0;
    bool str = false;
    const char *q = p;
    for (; *q; q++) {
        if (str) {
            if (*q == '\\')
                q++;
            else if (*q == '"')
                str = false;
        } else if (*q == '"') {
            str = true;
        } else if (*q == '(') {
            depth++;
        } else if (*q == ')' && --depth == 0) {
            break;
        }
    }
    if (!*q || q[1] != ';')
        return NULL;
    *end = q + 1;
    const char *t0 = strchr(p, '"'), *t1 = t0 ? strchr(t0 + 1, '"') : NULL;
    snprintf(tmpl, tlen, "%.*s", t0 && t1 ? (int)(t1 - t0 - 1) : 0, t0 ? t0 + 1 : "");
    const char *r = p;
    for (int i = 0; i < 2; i++) {
        arg[i][0] = '\0';
        const char *rr = strstr(r, "\"r\"("), *rh = strstr(r, "\"h\"(");
        r = rr && (!rh || rr < rh) ? rr : rh;
        if (!r || r >= q)
            break;
        const char *e = closing_paren(r + 4, q);
        snprintf(arg[i], sizeof(arg[i]), "%.*s", (int)(e - r - 4), r + 4);
        r = e;
    }
    return a;
}

/* The operands of the asm statement [a, end) whose template is one string literal, in order: each
 * constraint's expression ("=r"(x), "l"(p), "f"(v), ...: x, p, v) into ops; returns how many (at
 * most max). */
static int asm_operands(const char *a, const char *end, char (*ops)[96], int max)
{
    const char *t0 = strchr(a, '"'), *t1 = t0 ? strchr(t0 + 1, '"') : NULL;
    const char *q = t1 ? strchr(t1, ':') : NULL;
    int n = 0;
    while (q && q < end && n < max) {
        const char *c = strchr(q, '"');
        const char *c1 = c ? strchr(c + 1, '"') : NULL;
        /* "memory" and the other clobbers have no parenthesised expression: the operands end. */
        if (!c1 || c1 >= end || c1[1] != '(')
            break;
        const char *e = closing_paren(c1 + 2, end);
        snprintf(ops[n++], sizeof(ops[0]), "%.*s", (int)(e - c1 - 2), c1 + 2);
        q = e + 1;
    }
    return n;
}

/* Stream-K's workspace (tuner/gemm/wgmma.c, emit_sk_fixup) as host code: fp32 partials stored
 * and loaded four at a time at L2, a block's flag released and the lower blocks' acquired
 * (emu_ld_acquire spins, so a flag nobody sets shows as a deadlock); and attention_wgmma's
 * staged mask in shared memory. `code` takes the operands in
 * `order`; its first n_ops (printf ignores the rest). */
static const struct {
    const char *tmpl;
    int n_ops;
    const char *code;
    int order[5];
} emu_sk_asm[] = {
    {"st.global.cg.v4.f32 [%0], {%1, %2, %3, %4};", 5,
     "{ float *emu_p = (float *)(%s); emu_p[0] = %s; emu_p[1] = %s; emu_p[2] = %s; emu_p[3] = %s; }", {0, 1, 2, 3, 4}},
    {"ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];", 5,
     "{ const float *emu_p = (const float *)(%s); %s = emu_p[0]; %s = emu_p[1]; %s = emu_p[2]; %s = emu_p[3]; }",
     {4, 0, 1, 2, 3}},
    {"fence.acq_rel.gpu;\\nst.relaxed.gpu.global.u32 [%0], 1;", 1, "*(volatile unsigned *)(%s) = 1u;", {0, 1, 2, 3, 4}},
    {"ld.acquire.gpu.global.u32 %0, [%1];", 2, "%s = emu_ld_acquire((const unsigned *)(%s));",
     {0, 1, 2, 3, 4}},
    /* attention_wgmma's staged mask: a producer thread's fp32 store, a consumer's pair load */
    {"st.shared.f32 [%0], %1;", 2, "{ const float emu_v = %s; memcpy(sm(%s, 4), &emu_v, 4); }", {1, 0, 2, 3, 4}},
    {"ld.shared.v2.f32 {%0, %1}, [%2];", 3,
     "{ float emu_p[2]; memcpy(emu_p, sm(%s, 8), 8); %s = emu_p[0]; %s = emu_p[1]; }", {2, 0, 1, 3, 4}},
};

/* The row of emu_sk_asm whose template is tmpl, or -1. */
static int stream_k_asm(const char *tmpl)
{
    for (int i = 0; i < (int)(sizeof(emu_sk_asm) / sizeof(emu_sk_asm[0])); i++)
        if (!strcmp(tmpl, emu_sk_asm[i].tmpl))
            return i;
    return -1;
}

/* A kernel's source for the emulator (a Hopper kernel's, tuner/hopper.h helpers, for
 * emu_hopper.h): each wgmma wrapper becomes a
 * call of emu_wgmma (A from shared memory) or emu_wgmma_rs (A from registers) with its shape,
 * transposes, dtype and scale-d; empty asm statements (register pins) nothing; a 16-byte shared
 * store of one repeated word gm_sts128, a 2-byte one (matmul_mma's staged FP8 pair) gm_sts16;
 * `bar.sync` / `bar.arrive` statements
 * calls of emu_bar_sync / emu_bar_arrive; fences, register reallocation and bulk async-group
 * waits nothing (the emulator's copies are done when issued); the shared-memory declarations
 * places in its shared memory (the barrier array after the dynamic part's 227 KiB, an fp32 one -
 * attention_wgmma's staged mask - 1 KiB after it). Returns a
 * malloc'd copy; an asm statement it does not know stays, and the host compile fails on it. */
static char *rewrite_for_emu(const char *src)
{
    size_t cap = strlen(src) * 2 + 4096, n = 0;
    char *out = malloc(cap);
    const char *p = src;
    while (*p) {
        /* Room for the longest replacement below (a wrapper's signature and call: under 1 KiB). */
        if (n + 1024 >= cap) {
            cap *= 2;
            out = realloc(out, cap);
        }
        /* A wrapper's opening line ends with its brace; its body, the asm, ends at a line "}". */
        const char *nl = !strncmp(p, "HD_INLINE void ", 15) ? strchr(p, '\n') : NULL;
        const char *fin = nl && nl[-1] == '{' ? strstr(nl, "\n}\n") : NULL;
        const char *w = fin ? strstr(nl, "wgmma.mma_async.sync.aligned.m64n") : NULL;
        if (w && w < fin && strstr(w, "k32.f32.e")) {
            /* An FP8 wrapper: m64nNk32 with its two types, both K-major, scale-d a constant. */
            int nn = 0, sd = 1;
            char ta8[8] = "", tb8[8] = "";
            sscanf(w, "wgmma.mma_async.sync.aligned.m64n%dk32.f32.%7[a-z0-9].%7[a-z0-9]", &nn, ta8, tb8);
            const char *r = strstr(w, "\"r\"(");
            if (r && r < fin)
                sscanf(r, "\"r\"(%d)", &sd);
            const char *sig = p + 15, *sig_end = strstr(p, ") {");
            n += (size_t)snprintf(out + n, cap - n, "static void %.*s) { emu_wgmma8(d, da, db, %d, %d, %d, %d); }\n",
                                  (int)(sig_end - sig), sig, nn, !strcmp(ta8, "e5m2"), !strcmp(tb8, "e5m2"), sd);
            p = fin + 3;
            continue;
        }
        if (fin && !(w && w < fin)) {
            /* Another multi-line helper (the FP8 transposer's block): kept, as a host function. */
            n += (size_t)snprintf(out + n, cap - n, "static inline ");
            p += 10; /* past "HD_INLINE " */
            continue;
        }
        if (w && w < fin) {
            /* HD_INLINE void NAME(SIGNATURE) {\nasm volatile(...wgmma...);\n} */
            int nn = 0, ta = 0, tb = 0;
            char ty[8] = "";
            const char *sig = p + 15, *sig_end = strstr(p, ") {");
            const bool rs = strstr(p, "const hd_u32 *a") && strstr(p, "const hd_u32 *a") < sig_end;
            const bool sd = strstr(p, "int sd)") && strstr(p, "int sd)") < sig_end + 1;
            const char *tr = strstr(w, "p, 1, 1, ");
            sscanf(w, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.%7[a-z0-9]", &nn, ty);
            if (tr && rs)
                sscanf(tr, "p, 1, 1, %d", &tb);
            else if (tr)
                sscanf(tr, "p, 1, 1, %d, %d", &ta, &tb);
            n += (size_t)snprintf(out + n, cap - n, "static void %.*s) { ", (int)(sig_end - sig), sig);
            if (rs)
                n += (size_t)snprintf(out + n, cap - n, "emu_wgmma_rs(d, a, db, %d, %d, %d, %s); }\n", nn, tb,
                                      strcmp(ty, "bf16") == 0, sd ? "sd" : "1");
            else
                n += (size_t)snprintf(out + n, cap - n, "emu_wgmma(d, da, db, %d, %d, %d, %d, %s); }\n", nn, ta, tb,
                                      strcmp(ty, "bf16") == 0, sd ? "sd" : "1");
            p = fin + 3;
            continue;
        }
        char name[48];
        int nb = 0, used = 0;
        if (sscanf(p, "extern __shared__ __align__(1024) unsigned char %47[a-z_0-9][];%n", name, &used) == 1 && used > 0) {
            n += (size_t)snprintf(out + n, cap - n, "unsigned char *const %s = gm_smem;", name);
            p += used;
            continue;
        }
        if (sscanf(p, "__shared__ alignas(8) hd_u64 %47[a-z_0-9][%d];%n", name, &nb, &used) == 2 && used > 0) {
            n += (size_t)snprintf(out + n, cap - n, "hd_u64 *const %s = (hd_u64 *)(gm_smem + 232448);", name);
            p += used;
            continue;
        }
        if (sscanf(p, "__shared__ alignas(16) float %47[a-z_0-9][%d];%n", name, &nb, &used) == 2 && used > 0) {
            n += (size_t)snprintf(out + n, cap - n, "float *const %s = (float *)(gm_smem + 233472);", name);
            p += used;
            continue;
        }
        const char *end = NULL;
        char tmpl[160], args[2][96];
        const char *arg = args[0];
        if ((!strncmp(p, "asm volatile(", 13) || !strncmp(p, "asm(", 4)) &&
            asm_stmt(p, &end, tmpl, sizeof(tmpl), args)) {
            /* A staged FP8 pair (matmul_mma) */
            if (!strcmp(tmpl, "st.shared.u16 [%0], %1;")) {
                n += (size_t)snprintf(out + n, cap - n, "gm_sts16(%s, %s);", args[0], args[1]);
                p = end + 1;
                continue;
            }
            if (!strcmp(tmpl, "st.shared.v4.u32 [%0], {%1,%1,%1,%1};")) {
                n += (size_t)snprintf(out + n, cap - n, "gm_sts128(%s, hd_v4{%s, %s, %s, %s});", args[0], args[1], args[1],
                                      args[1], args[1]);
                p = end + 1;
                continue;
            }
            const int sk = stream_k_asm(tmpl);
            char ops[5][96];
            if (sk >= 0 && asm_operands(p, end, ops, 5) == emu_sk_asm[sk].n_ops) {
                const int *o = emu_sk_asm[sk].order;
                n += (size_t)snprintf(out + n, cap - n, emu_sk_asm[sk].code, ops[o[0]], ops[o[1]], ops[o[2]], ops[o[3]],
                                      ops[o[4]]);
                p = end + 1;
                continue;
            }
            int id = 0, cnt = 0;
            const bool arrive = !strncmp(tmpl, "bar.arrive", 10);
            if (!tmpl[0] || !strncmp(tmpl, "setmaxnreg", 10) || !strncmp(tmpl, "fence.", 6) ||
                !strncmp(tmpl, "cp.async.bulk.commit_group", 26) || !strncmp(tmpl, "cp.async.bulk.wait_group", 24)) {
                n += (size_t)snprintf(out + n, cap - n, "(void)0;");
                p = end + 1;
                continue;
            }
            if ((arrive || !strncmp(tmpl, "bar.sync", 8)) && strstr(tmpl, "%0") &&
                sscanf(strchr(tmpl, ',') + 1, "%d", &cnt) == 1) {
                n += (size_t)snprintf(out + n, cap - n, "emu_bar_%s(%s, %d);", arrive ? "arrive" : "sync", arg, cnt);
                p = end + 1;
                continue;
            }
            if ((arrive || !strncmp(tmpl, "bar.sync", 8)) && sscanf(tmpl + (arrive ? 10 : 8), "%d, %d", &id, &cnt) == 2) {
                n += (size_t)snprintf(out + n, cap - n, "emu_bar_%s(%d, %d);", arrive ? "arrive" : "sync", id, cnt);
                p = end + 1;
                continue;
            }
        }
        out[n++] = *p++;
    }
    out[n] = '\0';
    return out;
}

/* DIR/kern.cu: the source after the helpers, without the device helpers (the emulator's own). */
static void write_kernel(const char *dir, const tuner_program *pr, const char *helpers_end)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/kern.cu", dir);
    FILE *f = fopen(path, "w");
    const char *k = strstr(pr->source, helpers_end);
    k = k ? strchr(k, '\n') + 1 : pr->source;
    /* A Hopper kernel: past its helpers too. Then its asm rewritten (rewrite_for_emu). */
    const char *hop = strstr(k, "// ---- end of hopper helpers ----");
    char *rewritten = rewrite_for_emu(hop ? strchr(hop, '\n') + 1 : k);
    if (rewritten)
        k = rewritten;
    for (const char *line = k; *line;) {
        const char *nl = strchr(line, '\n');
        const size_t len = nl ? (size_t)(nl - line + 1) : strlen(line);
        if (strncmp(line, "HD_INLINE", 9) && strncmp(line, "__device__ __forceinline__", 26))
            fwrite(line, 1, len, f);
        line += len;
    }
    free(rewritten);
    fclose(f);
}

static void write_launches(const char *dir, const tuner_op *op, const tuner_program *pr)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/launch.h", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "#define N_INPUTS %d\n#define N_LAUNCHES %d\n", op->n_inputs, pr->n_kernels);
    /* An FP8 matmul's operand formats, for the emulator's FP8 mma.sync. */
    if (op->n_inputs >= 2 && tuner_dtype_is_fp8(op->inputs[0].dtype) && tuner_dtype_is_fp8(op->inputs[1].dtype))
        fprintf(f, "#define EMU_FP8_E5M2_A %d\n#define EMU_FP8_E5M2_B %d\n", op->inputs[0].dtype == TUNER_F8E5M2,
                op->inputs[1].dtype == TUNER_F8E5M2);
    for (int l = 0; l < pr->n_kernels; l++) {
        const tuner_launch *L = &pr->kernels[l];
        /* Tensor maps (after the pointers and dims): emu_hopper.h's emu_tmap of the description. */
        for (int k = 0; k < L->n_maps; k++) {
            const tuner_tmap *m = &L->maps[k];
            fprintf(f, "static const long long m%d_%d_dims[] = {", l, k);
            for (int d = 0; d < m->rank; d++)
                fprintf(f, "%s%llu", d ? ", " : "", (unsigned long long)m->dims[d]);
            fprintf(f, "}, m%d_%d_coef[] = {", l, k);
            for (int d = 0; d < m->rank; d++)
                fprintf(f, "%s%llu", d ? ", " : "", (unsigned long long)m->sym_coef[d]);
            fprintf(f, "}, m%d_%d_strides[] = {0", l, k);
            for (int d = 0; d + 1 < m->rank; d++)
                fprintf(f, ", %llu", (unsigned long long)m->strides[d]);
            fprintf(f, "};\nstatic const unsigned m%d_%d_sym[] = {", l, k);
            for (int d = 0; d < m->rank; d++)
                fprintf(f, "%s%u", d ? ", " : "", (unsigned)m->sym[d]);
            fprintf(f, "};\nstatic const int m%d_%d_box[] = {", l, k);
            for (int d = 0; d < m->rank; d++)
                fprintf(f, "%s%u", d ? ", " : "", (unsigned)m->box[d]);
            fprintf(f, "};\n");
        }
        fprintf(f, "static void call_%d() { %s(", l, L->name);
        for (int a = 0; a < L->n_args; a++) {
            const int b = L->args[a];
            if (b >= TUNER_ARG_DIM0)
                fprintf(f, "%sg_dims[%d]", a ? ", " : "", b - TUNER_ARG_DIM0);
            else if (b == TUNER_BUF_OUTPUT)
                fprintf(f, "%s(%s *)g_out", a ? ", " : "", tuner__ctype(op->output.dtype));
            else if (b == TUNER_BUF_WORKSPACE)
                fprintf(f, "%s(float *)g_ws", a ? ", " : "");
            else
                fprintf(f, "%s(const %s *)g_in[%d]", a ? ", " : "", tuner__ctype(op->inputs[b].dtype), b);
        }
        for (int k = 0; k < L->n_maps; k++) {
            const tuner_tmap *m = &L->maps[k];
            const int b = m->buf;
            char ptr[32];
            snprintf(ptr, sizeof(ptr), "%s", b == TUNER_BUF_OUTPUT ? "g_out" : b == TUNER_BUF_WORKSPACE ? "g_ws" : "");
            if (!ptr[0])
                snprintf(ptr, sizeof(ptr), "g_in[%d]", b);
            fprintf(f, "%semu_tmap(%s, %d, %d, m%d_%d_dims, m%d_%d_sym, m%d_%d_coef, m%d_%d_strides + 1, m%d_%d_box, %d)",
                    L->n_args || k ? ", " : "", ptr, tuner_dtype_size(m->dtype), m->rank, l, k, l, k, l, k, l, k, l, k,
                    m->swizzle);
        }
        fprintf(f, "); }\n");
        fprintf(f, "static const Launch launch_%d = {call_%d, %u, %u};\n", l, l, L->block[0], L->shared_bytes);
    }
    fprintf(f, "static const Launch launches[] = {launch_0%s};\n", pr->n_kernels > 1 ? ", launch_1" : "");
    fclose(f);
}

/* DIR/s<j>/: sizes.txt (dims, then per launch its grid, then the inputs' bytes, the output's,
 * the margin and the workspace's) and the inputs. */
static void write_set(const char *sd, const emu_dyn_gen *g, const tuner_op *op, const tuner_program *pr, int j,
                      const int64_t *sz)
{
    char path[600];
    mkdir(sd, 0755);
    snprintf(path, sizeof(path), "%s/sizes.txt", sd);
    FILE *f = fopen(path, "w");
    for (int d = 0; d < TUNER_MAX_DIMS; d++)
        fprintf(f, "%lld ", (long long)sz[d]);
    fprintf(f, "\n");
    for (int l = 0; l < pr->n_kernels; l++) {
        const tuner_launch *L = &pr->kernels[l];
        for (int d = 0; d < 3; d++)
            fprintf(f, "%lld ",
                    L->grid_rule[d].dims ? (long long)tuner_grid_rule_eval(&L->grid_rule[d], sz) : (long long)L->grid[d]);
        fprintf(f, "\n");
    }
    for (int i = 0; i < op->n_inputs; i++)
        fprintf(f, "%lld ", emu_numel_at(&op->inputs[i], sz) * tuner_dtype_size(op->inputs[i].dtype));
    fprintf(f, "\n%lld %d %zu\n", emu_numel_at(&op->output, sz) * tuner_dtype_size(op->output.dtype), EMU_MARGIN,
            pr->workspace_bytes);
    fclose(f);
    t_rng_state = 7 + (uint64_t)j;
    for (int i = 0; i < op->n_inputs; i++) {
        const tuner_tensor *x = &op->inputs[i];
        const long long n = emu_numel_at(x, sz);
        unsigned char *h = malloc((size_t)(n * tuner_dtype_size(x->dtype)) + 1);
        for (long long e = 0; e < n; e++)
            t_host_put(x->dtype, h, (size_t)e, g->input_value(i));
        snprintf(path, sizeof(path), "%s/in%d.bin", sd, i);
        FILE *o = fopen(path, "wb");
        fwrite(h, 1, (size_t)(n * tuner_dtype_size(x->dtype)), o);
        fclose(o);
        free(h);
    }
}

int emu_dyn_main(int argc, char **argv, const emu_dyn_gen *g)
{
    if (argc < 4)
        return 2;
    const char *dir = argv[1];
    const tuner_op op = g->case_op(atoi(argv[2]));
    const bool check = !strcmp(argv[3], "check");
    tuner_space *sp = NULL;
    tuner_program *pr = NULL;
    size_t idx = 0;
    if (!check) {
        char *err = NULL;
        if (tuner_space_build(&op, &g->target, &sp, &err) < 0) {
            fprintf(stderr, "space: %s\n", err);
            return 4;
        }
        idx = (size_t)atoll(argv[3]);
        if (g->template_name) {
            /* INDEX counts that template's candidates without clusters (matmul_wgmma's pairs and
             * split-K, matmul_mma's split_cluster), and with EMU_PARAM=name=value[,name=value...]
             * those with these parameter values. */
            const char *want = getenv("EMU_PARAM");
            size_t seen = 0, i = 0;
            for (; i < sp->n; i++) {
                const tuner_schedule *s = &sp->items[i];
                const bool wgmma = !strcmp(s->template_name, "matmul_wgmma");
                if (strcmp(s->template_name, g->template_name) || tuner_schedule_param(s, "cluster", 1) != 1 ||
                    tuner_schedule_param(s, "cluster_n", 1) != 1 ||
                    (wgmma && tuner_schedule_param(s, "split_k", 1) != 1) ||
                    tuner_schedule_param(s, "split_cluster", 0) != 0)
                    continue;
                if (!tuner_schedule_matches(s, want))
                    continue;
                if (seen++ == idx)
                    break;
            }
            idx = i;
        }
        if (idx >= sp->n)
            return 3;
        if (tuner_generate(&op, &g->target, &sp->items[idx], &pr, &err) < 0) {
            fprintf(stderr, "generate: %s\n", err);
            return 2;
        }
        write_kernel(dir, pr, g->helpers_end);
        write_launches(dir, &op, pr);
    }
    int rc = 0;
    for (int j = 0; j < (g->n_sets ? g->n_sets : EMU_N_SETS); j++) {
        int64_t sz[TUNER_MAX_DIMS];
        g->set_sizes(&op, j, sz);
        char sd[512];
        snprintf(sd, sizeof(sd), "%s/s%d", dir, j);
        if (check)
            rc |= g->check_set(sd, &op, sz);
        else
            write_set(sd, g, &op, pr, j, sz);
    }
    if (check) {
        printf("\n");
        return rc;
    }
    char *sj = tuner_schedule_json(&sp->items[idx]);
    printf("%s\n", sj);
    free(sj);
    tuner_program_free(pr);
    tuner_space_free(sp);
    return 0;
}
