/* tuner/gemm/common.c - the implicit-GEMM view of matmul/conv2d ops and the emitters every
 * template (and the reference) shares: operand addressing, fused prologue/epilogue, split-K
 * reduction, tile rasterisation and launch descriptions.
 */
#include "tuner/gemm/gemm.h"

#include <errno.h>
#include <malloc.h> /* malloc_usable_size */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(char **err, const char *fmt, ...)
{
    if (err) {
        char buf[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        *err = strdup(buf);
    }
    return -EINVAL;
}

static int align_of(const tuner_tensor *t)
{
    /* 0 means "not stated": device allocations are at least 256-byte aligned (op/op.h). */
    return t->align > 0 ? t->align : 16;
}

/* Widest power-of-two vector (<= 16 bytes) along a contiguous dimension of length len. */
static int vec_for(long long len, int align, int esz)
{
    int v = 16 / esz;
    while (v > 1 && (len % v != 0 || align < v * esz))
        v /= 2;
    return v;
}

#define DIM_LIMIT (1LL << 30)

static int dynamic_init(const tuner_op *op, tuner__gemm_problem *p, char **err);

static int problem_init(const tuner_op *op, tuner__gemm_problem *p, bool fp8_ok, char **err);

int tuner__gemm_problem_init(const tuner_op *op, tuner__gemm_problem *p, char **err)
{
    return problem_init(op, p, false, err);
}

int tuner__gemm_problem_init_fp8(const tuner_op *op, tuner__gemm_problem *p, char **err)
{
    return problem_init(op, p, true, err);
}

static int problem_init(const tuner_op *op, tuner__gemm_problem *p, bool fp8_ok, char **err)
{
    if (!op || !p)
        return -EINVAL;
    memset(p, 0, sizeof(*p));
    p->op = op;
    p->scale_a_in = p->scale_b_in = -1;
    p->amax_in = -1;
    const bool fp8 = op->n_inputs >= 2 && op->kind == TUNER_OP_MATMUL && tuner_dtype_is_fp8(op->inputs[0].dtype);
    if (fp8 && !fp8_ok)
        return fail(err, "FP8 operands are read only by matmul_wgmma and matmul_mma");
    const int n_anchor = 2 + (fp8 ? tuner_matmul_n_scales(op) : 0);
    if (op->n_anchor_inputs != n_anchor || op->n_inputs < n_anchor || op->n_inputs > TUNER_MAX_INPUTS)
        return fail(err, "%s needs exactly %d anchor inputs", tuner_op_name(op->kind), n_anchor);
    const tuner_tensor *x = &op->inputs[0], *w = &op->inputs[1];
    if (x->dtype != w->dtype && !(fp8 && tuner_dtype_is_fp8(w->dtype)))
        return fail(err, "%s inputs must share a dtype", tuner_op_name(op->kind));
    p->dt = x->dtype;
    p->dt_b = w->dtype;
    p->out_dt = op->output.dtype;
    if (fp8) {
        p->fp8 = true;
        p->scale_a = op->attrs.matmul.scale_a;
        p->scale_b = op->attrs.matmul.scale_b;
        p->block_scales = p->scale_a == TUNER_SCALE_BLOCK;
        p->promote = p->block_scales || !op->attrs.matmul.fast_accum;
        p->amax_in = tuner_fp8_amax_input(op);
        if (p->block_scales != (p->scale_b == TUNER_SCALE_BLOCK))
            return fail(err, "per-block FP8 scales are given for both operands or neither");
        if (p->block_scales) {
            p->bsa_in = 2;
            p->bsb_in = 3;
        } else {
            int next = 2;
            if (p->scale_a != TUNER_SCALE_NONE)
                p->scale_a_in = next++;
            if (p->scale_b != TUNER_SCALE_NONE)
                p->scale_b_in = next++;
        }
    }
    const int esz = tuner_dtype_size(p->dt);

    if (op->kind == TUNER_OP_MATMUL) {
        if (x->rank < 2 || x->rank > 3 || w->rank < 2 || w->rank > 3)
            return fail(err, "matmul operands must have rank 2 or 3");
        p->trans_a = op->attrs.matmul.trans_a;
        p->trans_b = op->attrs.matmul.trans_b;
        p->a_batched = x->rank == 3;
        p->b_batched = w->rank == 3;
        const int64_t *as = x->shape + (x->rank - 2), *bs = w->shape + (w->rank - 2);
        p->M = p->trans_a ? as[1] : as[0];
        p->K = p->trans_a ? as[0] : as[1];
        long long kb = p->trans_b ? bs[1] : bs[0];
        p->N = p->trans_b ? bs[0] : bs[1];
        if (kb != p->K)
            return fail(err, "matmul inner dimensions differ (%lld vs %lld)", (long long)p->K, kb);
        p->batch = 1;
        if (p->a_batched)
            p->batch = x->shape[0];
        if (p->b_batched) {
            if (p->a_batched && w->shape[0] != x->shape[0])
                return fail(err, "matmul batch sizes differ");
            p->batch = w->shape[0];
        }
        const bool batched = p->a_batched || p->b_batched;
        const tuner_tensor *o = &op->output;
        if (o->rank != (batched ? 3 : 2) || o->shape[o->rank - 2] != p->M || o->shape[o->rank - 1] != p->N ||
            (batched && o->shape[0] != p->batch))
            return fail(err, "matmul output shape does not match its inputs");
        p->kmajor[0] = !p->trans_a;
        p->kmajor[1] = p->trans_b;
        p->vec[0] = vec_for(p->kmajor[0] ? p->K : p->M, align_of(x), esz);
        p->vec[1] = vec_for(p->kmajor[1] ? p->K : p->N, align_of(w), esz);
        p->out_vec = (p->N % 2 == 0 && align_of(o) >= 2 * tuner_dtype_size(p->out_dt)) ? 2 : 1;
        const int chunk = 16 / tuner_dtype_size(p->out_dt);
        p->out_chunk = vec_for(p->N, align_of(o), tuner_dtype_size(p->out_dt)) == chunk ? chunk : 0;
    } else if (op->kind == TUNER_OP_CONV2D) {
        if (x->rank != 4 || w->rank != 4)
            return fail(err, "conv2d input and weight must have rank 4");
        p->conv = true;
        p->nchw = op->attrs.conv2d.nchw;
        int g = op->attrs.conv2d.groups;
        if (g < 1)
            return fail(err, "conv2d groups must be >= 1");
        p->cn = x->shape[0];
        p->ch = p->nchw ? x->shape[2] : x->shape[1];
        p->cw = p->nchw ? x->shape[3] : x->shape[2];
        p->cc = p->nchw ? x->shape[1] : x->shape[3];
        p->ck = w->shape[0];
        p->cr = p->nchw ? w->shape[2] : w->shape[1];
        p->cs = p->nchw ? w->shape[3] : w->shape[2];
        long long wc = p->nchw ? w->shape[1] : w->shape[3];
        if (p->cc % g != 0 || p->ck % g != 0 || wc != p->cc / g)
            return fail(err, "conv2d channels do not match groups");
        p->cgc = wc;
        p->cgk = p->ck / g;
        p->sh = op->attrs.conv2d.stride[0];
        p->sw = op->attrs.conv2d.stride[1];
        p->ph = op->attrs.conv2d.pad[0];
        p->pw = op->attrs.conv2d.pad[1];
        p->dh = op->attrs.conv2d.dilation[0];
        p->dw = op->attrs.conv2d.dilation[1];
        if (p->sh < 1 || p->sw < 1 || p->dh < 1 || p->dw < 1 || p->ph < 0 || p->pw < 0)
            return fail(err, "conv2d stride/dilation must be >= 1 and padding >= 0");
        long long ph = p->ch + 2LL * p->ph - (long long)p->dh * (p->cr - 1) - 1;
        long long pw = p->cw + 2LL * p->pw - (long long)p->dw * (p->cs - 1) - 1;
        if (ph < 0 || pw < 0)
            return fail(err, "conv2d window larger than the padded input");
        p->cp = ph / p->sh + 1;
        p->cq = pw / p->sw + 1;
        const tuner_tensor *o = &op->output;
        long long want[4] = {p->cn, p->cp, p->cq, p->ck};
        if (p->nchw) {
            want[1] = p->ck;
            want[2] = p->cp;
            want[3] = p->cq;
        }
        if (o->rank != 4 || o->shape[0] != want[0] || o->shape[1] != want[1] || o->shape[2] != want[2] ||
            o->shape[3] != want[3])
            return fail(err, "conv2d output shape does not match its inputs");
        p->batch = g;
        p->M = p->cn * p->cp * p->cq;
        p->N = p->cgk;
        p->K = p->cr * p->cs * p->cgc;
        /* NHWC: channels are contiguous, so an A vector never leaves one (r, s) window position.
         * NCHW: no dimension of the im2col matrix is contiguous: element loads. Weights are
         * contiguous along k in both layouts (k enumerates them in memory order). */
        p->kmajor[0] = true;
        p->kmajor[1] = true;
        p->vec[0] = p->nchw ? 1 : vec_for(p->cgc, align_of(x), esz);
        p->vec[1] = vec_for(p->K, align_of(w), esz);
        p->out_vec = (!p->nchw && p->cgk % 2 == 0 && align_of(o) >= 2 * tuner_dtype_size(p->out_dt)) ? 2 : 1;
        /* NHWC rows are K channels long and group g starts at channel g * K/groups. */
        const int chunk = 16 / tuner_dtype_size(p->out_dt);
        p->out_chunk = !p->nchw && p->ck % chunk == 0 &&
                               vec_for(p->cgk, align_of(o), tuner_dtype_size(p->out_dt)) == chunk
                           ? chunk
                           : 0;
    } else {
        return fail(err, "%s is not a GEMM-like op", tuner_op_name(op->kind));
    }
    if (p->M < 1 || p->N < 1 || p->K < 1 || p->batch < 1)
        return fail(err, "empty GEMM dimension");
    if (p->M >= DIM_LIMIT || p->N >= DIM_LIMIT || p->K >= DIM_LIMIT || p->batch >= 65536)
        return fail(err, "GEMM dimension too large for 32-bit tile indexing");
    p->prologue[0] = op->prologue[0].n > 0;
    p->prologue[1] = op->prologue[1].n > 0;
    if (tuner_op_is_dynamic(op))
        return dynamic_init(op, p, err);
    return 0;
}

/* Whether tensor t names no axis but (possibly) axis 0. */
static bool names_only_axis0(const tuner_tensor *t)
{
    for (int d = 1; d < t->rank && d < TUNER_MAX_RANK; d++)
        if (t->sym[d])
            return false;
    return true;
}

/* The product of the multiple_of of the dims in mask. */
static long long dims_multiple(const tuner_op *op, unsigned mask)
{
    long long m = 1;
    for (int k = 0; k < op->n_dims; k++)
        if (mask & (1u << k))
            m *= op->dims[k].multiple_of > 0 ? op->dims[k].multiple_of : 1;
    return m;
}

/* A vector width (a power of two) halved until it divides multiple. */
static int cut_vec(int vec, long long multiple)
{
    while (vec > 1 && multiple % vec)
        vec /= 2;
    return vec;
}

/* Whether the names of fused operand t stand where the value it is read against (right-aligned,
 * numpy broadcast) has the same names: a broadcast axis (extent 1) is never named, and an axis
 * that lines up with a named one carries that name. */
static bool names_follow(const tuner_tensor *t, const tuner_tensor *v)
{
    for (int d = 0; d < t->rank && d < TUNER_MAX_RANK; d++) {
        const int vd = v->rank - (t->rank - d);
        const unsigned vs = vd >= 0 ? v->sym[vd] : 0;
        if (t->sym[d] ? t->sym[d] != vs : vs != 0 && t->shape[d] != 1)
            return false;
    }
    return true;
}

/* The named extents of a dynamic matmul (docs/api.md "Named dimensions"): a 2-D `a` [M, K]
 * (not transposed) with a 2-D `b` may name M (a's axis 0), K (a's axis 1, and b's K axis with
 * the same name) and N (b's N axis: 1, or 0 with trans_b); the output [M, N] carries M's and
 * N's names. A rank-3 `a` [batch, M, K] names only the batch (a rank-3 `b` then names it too, a
 * 2-D `b` nothing). A fused operand names what the value it is read against names at its
 * aligned axes (names_follow). Anything else is refused here, which keeps these templates out of
 * the op's space. */
static int dynamic_init(const tuner_op *op, tuner__gemm_problem *p, char **err)
{
    const tuner_tensor *x = &op->inputs[0], *w = &op->inputs[1], *o = &op->output;
    if (p->conv)
        return fail(err, "conv2d with named dimensions is not supported");
    if (op->n_dims > TUNER_MAX_DIMS)
        return fail(err, "too many named dimensions");
    /* Pointers (inputs, output, workspace), then one size per dim. */
    if (op->n_inputs + 2 + op->n_dims > TUNER_MAX_ARGS)
        return fail(err, "too many kernel arguments with named dimensions");
    for (int i = -1; i < op->n_inputs; i++) {
        const tuner_tensor *t = i < 0 ? o : &op->inputs[i];
        for (int d = 0; d < t->rank && d < TUNER_MAX_RANK; d++)
            if (t->sym[d] >> op->n_dims)
                return fail(err, "a named axis refers to an undeclared dimension");
    }
    if (x->rank == 3) {
        const unsigned name = x->sym[0];
        if (!name || !names_only_axis0(x) || !names_only_axis0(w) || !names_only_axis0(o) || o->sym[0] != name)
            return fail(err, "a batched matmul names only the batch (axis 0 of a, and the output's with it)");
        if (w->rank == 3 ? w->sym[0] != name : w->sym[0] != 0)
            return fail(err, "a rank-3 b must name its batch as a does");
        p->batch_sym = name;
    } else {
        if (w->rank != 2 || o->rank != 2)
            return fail(err, "a 2-D a with a batched b may not be named (the output's axes are not a's)");
        if (p->trans_a && (x->sym[0] || x->sym[1]))
            return fail(err, "a transposed a may not be named");
        const int wk = p->trans_b ? 1 : 0;
        if (w->sym[wk] != x->sym[1])
            return fail(err, "b's K axis must be named as a's axis 1 (K), or both fixed");
        if (o->sym[0] != x->sym[0] || o->sym[1] != w->sym[1 - wk])
            return fail(err, "the output's axes must carry M's and N's names");
        p->m_sym = x->sym[0];
        p->k_sym = x->sym[1];
        p->n_sym = w->sym[1 - wk];
        if (!p->m_sym && !p->k_sym && !p->n_sym)
            return fail(err, "a dynamic matmul must name M, N, K or the batch");
    }
    for (int i = 2; i < op->n_inputs; i++) {
        const tuner_tensor *t = &op->inputs[i];
        const bool epi = tuner_ew_chain_reads(&op->epilogue, i);
        const bool pro_a = tuner_ew_chain_reads(&op->prologue[0], i), pro_b = tuner_ew_chain_reads(&op->prologue[1], i);
        if ((epi && !names_follow(t, o)) || (pro_a && !names_follow(t, x)) || (pro_b && !names_follow(t, w)) ||
            (!epi && !pro_a && !pro_b && !names_only_axis0(t)))
            return fail(err, "a fused operand's names must be those of the value it is read against, at its aligned "
                             "axes (M, N or K as the output, a or b name them)");
    }
    p->dynamic = true;
    p->m_multiple = p->m_sym ? dims_multiple(op, p->m_sym) : p->M;
    p->n_multiple = p->n_sym ? dims_multiple(op, p->n_sym) : p->N;
    p->k_multiple = p->k_sym ? dims_multiple(op, p->k_sym) : p->K;
    /* A vector along a named row (a's K, b's K with trans_b, b's N) or a row stride that is one
     * must fit every size: cut the widths to what the dims' multiple_of guarantees. */
    if (p->k_sym && p->kmajor[0])
        p->vec[0] = cut_vec(p->vec[0], p->k_multiple);
    if (p->kmajor[1] ? p->k_sym : p->n_sym)
        p->vec[1] = cut_vec(p->vec[1], p->kmajor[1] ? p->k_multiple : p->n_multiple);
    if (p->n_sym) {
        p->out_vec = cut_vec(p->out_vec, p->n_multiple);
        if (p->out_chunk && p->n_multiple % p->out_chunk)
            p->out_chunk = 0;
    }
    return 0;
}

static tuner__gemm_x gemm_x(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static tuner__gemm_x gemm_x(const char *fmt, ...)
{
    tuner__gemm_x x;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x.s, sizeof(x.s), fmt, ap);
    va_end(ap);
    return x;
}

tuner__gemm_x tuner__gemm_M(const tuner__gemm_problem *p, long long add)
{
    if (!p->dynamic)
        return gemm_x("%lld", p->M + add);
    if (add == 0)
        return gemm_x("gm_M");
    return gemm_x("(gm_M %c %lld)", add < 0 ? '-' : '+', add < 0 ? -add : add);
}

tuner__gemm_x tuner__gemm_M_ll(const tuner__gemm_problem *p)
{
    return p->dynamic ? gemm_x("(long long)gm_M") : gemm_x("%lldLL", p->M);
}

tuner__gemm_x tuner__gemm_B(const tuner__gemm_problem *p)
{
    return p->dynamic ? gemm_x("gm_B") : gemm_x("%lld", p->batch);
}

/* "v + add" for a named extent (the int variable var), the literal value + add for a fixed one. */
static tuner__gemm_x named_plus(bool named, const char *var, long long value, long long add)
{
    if (!named)
        return gemm_x("%lld", value + add);
    if (add == 0)
        return gemm_x("%s", var);
    return gemm_x("(%s %c %lld)", var, add < 0 ? '-' : '+', add < 0 ? -add : add);
}

tuner__gemm_x tuner__gemm_N(const tuner__gemm_problem *p, long long add)
{
    return named_plus(p->n_sym != 0, "gm_N", p->N, add);
}

tuner__gemm_x tuner__gemm_K(const tuner__gemm_problem *p, long long add)
{
    return named_plus(p->k_sym != 0, "gm_K", p->K, add);
}

bool tuner__gemm_m_divides(const tuner__gemm_problem *p, int block_m)
{
    if (p->m_sym)
        return p->m_multiple % block_m == 0;
    return p->M % block_m == 0;
}

bool tuner__gemm_n_divides(const tuner__gemm_problem *p, int block_n)
{
    return (p->n_sym ? p->n_multiple : p->N) % block_n == 0;
}

static const char gm_helpers[] =
    "// ---- tuner/gemm helpers ----\n"
    /* Shared-window addresses are 32-bit; taking them once and adding offsets avoids a cvta per
     * access in the inner loops. */
    "HD_INLINE void gm_cp16(hd_u32 dst, const void *src, int bytes) { "
    "asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\" :: \"r\"(dst), \"l\"(src), \"r\"(bytes) "
    ": \"memory\"); }\n"
    "HD_INLINE void gm_cp8(hd_u32 dst, const void *src, int bytes) { "
    "asm volatile(\"cp.async.ca.shared.global [%0], [%1], 8, %2;\" :: \"r\"(dst), \"l\"(src), \"r\"(bytes) "
    ": \"memory\"); }\n"
    "HD_INLINE void gm_cp4(hd_u32 dst, const void *src, int bytes) { "
    "asm volatile(\"cp.async.ca.shared.global [%0], [%1], 4, %2;\" :: \"r\"(dst), \"l\"(src), \"r\"(bytes) "
    ": \"memory\"); }\n"
    "HD_INLINE void gm_ldsm4(hd_u32 *r, hd_u32 a) { "
    "asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\" : \"=r\"(r[0]), "
    "\"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(a)); }\n"
    "HD_INLINE void gm_ldsm4t(hd_u32 *r, hd_u32 a) { "
    "asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\" : \"=r\"(r[0]), "
    "\"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(a)); }\n"
    "HD_INLINE void gm_sts16(hd_u32 a, unsigned short v) { "
    "asm volatile(\"st.shared.u16 [%0], %1;\" :: \"r\"(a), \"h\"(v) : \"memory\"); }\n"
    "HD_INLINE void gm_sts32(hd_u32 a, hd_u32 v) { "
    "asm volatile(\"st.shared.u32 [%0], %1;\" :: \"r\"(a), \"r\"(v) : \"memory\"); }\n"
    "HD_INLINE void gm_sts64(hd_u32 a, hd_v2 v) { "
    "asm volatile(\"st.shared.v2.u32 [%0], {%1,%2};\" :: \"r\"(a), \"r\"(v.x), \"r\"(v.y) : \"memory\"); }\n"
    "HD_INLINE void gm_sts128(hd_u32 a, hd_v4 v) { "
    "asm volatile(\"st.shared.v4.u32 [%0], {%1,%2,%3,%4};\" :: \"r\"(a), \"r\"(v.x), \"r\"(v.y), "
    "\"r\"(v.z), \"r\"(v.w) : \"memory\"); }\n"
    "HD_INLINE hd_v4 gm_lds128(hd_u32 a) { hd_v4 v; "
    "asm volatile(\"ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\" : \"=r\"(v.x), \"=r\"(v.y), \"=r\"(v.z), "
    "\"=r\"(v.w) : \"r\"(a) : \"memory\"); return v; }\n"
    /* 16-bit element bits <-> float for the register-staged (prologue / misaligned) path. */
    "HD_INLINE float gm_f16_bits(unsigned v) { half_t h; h.x = (unsigned short)v; return hd_f32(h); }\n"
    "HD_INLINE float gm_bf16_bits(unsigned v) { bf16_t h; h.x = (unsigned short)v; return hd_f32(h); }\n"
    "HD_INLINE unsigned gm_bits_f16(float v) { return hd_from_f32<half_t>(v).x; }\n"
    "HD_INLINE unsigned gm_bits_bf16(float v) { return hd_from_f32<bf16_t>(v).x; }\n"
    "// ---- end of tuner/gemm helpers ----\n";

void tuner__gemm_emit_head(tuner_sb *sb, const tuner_target *t)
{
    tuner__prelude(sb, t->sm);
    /* Coordinates are declared for every element whether or not a fused chain reads them. */
    tuner_sb_puts(sb, "#pragma nv_diag_suppress 177\n");
    tuner_sb_puts(sb, gm_helpers);
}

void tuner__gemm_emit_signature(tuner_sb *sb, const tuner__gemm_problem *p, const char *name, int threads,
                                bool ws, int cluster_z)
{
    const tuner_op *op = p->op;
    tuner_sb_printf(sb, "extern \"C\" __global__ void __launch_bounds__(%d) ", threads);
    if (cluster_z > 1)
        tuner_sb_printf(sb, "__cluster_dims__(1, 1, %d) ", cluster_z);
    tuner_sb_printf(sb, "%s(", name);
    for (int i = 0; i < op->n_inputs; i++)
        tuner_sb_printf(sb, "const %s *__restrict__ in%d, ", tuner__ctype(op->inputs[i].dtype), i);
    tuner_sb_printf(sb, "%s *__restrict__ out%s", tuner__ctype(p->out_dt), ws ? ", float *__restrict__ ws" : "");
    tuner__emit_dim_params(sb, op);
    tuner_sb_puts(sb, ")\n{\n");
    tuner__gemm_emit_dims_decl(sb, p);
}

void tuner__gemm_emit_dims_decl(tuner_sb *sb, const tuner__gemm_problem *p)
{
    const tuner_op *op = p->op;
    if (p->dynamic) {
        /* Sizes below 2^30 (tuner__gemm_problem_init checks their max): ints, as tile
         * coordinates are. */
        char m[96], b[96];
        if (p->m_sym)
            tuner__axis_expr(&op->inputs[0], 0, m, sizeof(m));
        else
            snprintf(m, sizeof(m), "%lld", p->M);
        if (p->batch_sym)
            tuner__axis_expr(&op->inputs[0], 0, b, sizeof(b));
        else
            snprintf(b, sizeof(b), "%lld", p->batch);
        tuner_sb_printf(sb, "const int gm_M = (int)%s, gm_B = (int)%s;\n", m, b);
        if (tuner__gemm_names_nk(p)) {
            /* Only for ops that name them, so that the kernels of the others keep their text. */
            char n[96], k[96];
            const int wk = p->trans_b ? 1 : 0;
            tuner__axis_expr(&op->inputs[1], 1 - wk, n, sizeof(n));
            tuner__axis_expr(&op->inputs[0], 1, k, sizeof(k));
            tuner_sb_printf(sb, "const int gm_N = (int)%s, gm_K = (int)%s;\n", n, k);
        }
    }
}

void tuner__gemm_emit_operand(tuner_sb *sb, const tuner__gemm_problem *p, int which, const char *pfx,
                              const char *b, const char *mn, const char *k, const char *kend)
{
    tuner_sb_printf(sb, "const int %s_mn = (%s); const int %s_k = (%s);\n", pfx, mn, pfx, k);
    if (!p->conv) {
        const tuner_tensor *t = &p->op->inputs[which];
        const bool batched = which == 0 ? p->a_batched : p->b_batched;
        const bool trans = which == 0 ? p->trans_a : p->trans_b;
        /* A is [M,K] (trans: [K,M]); B is [K,N] (trans: [N,K]). */
        const bool mn_is_row = which == 0 ? !trans : trans;
        const tuner__gemm_x lim = which == 0 ? tuner__gemm_M(p, 0) : tuner__gemm_N(p, 0);
        int d = 0;
        if (batched)
            tuner_sb_printf(sb, "const long long %s_t%d = (%s);\n", pfx, d++, b);
        tuner_sb_printf(sb, "const long long %s_t%d = %s_%s;\n", pfx, d++, pfx, mn_is_row ? "mn" : "k");
        tuner_sb_printf(sb, "const long long %s_t%d = %s_%s;\n", pfx, d++, pfx, mn_is_row ? "k" : "mn");
        tuner_sb_printf(sb, "const bool %s_ok = %s_mn < %s && %s_k < (%s);\n", pfx, pfx, lim.s, pfx, kend);
        long long rows = t->shape[t->rank - 2];
        /* The row length: K for a [M, K] and b [N, K], N for b [K, N] (named: gm_K, gm_N). */
        const bool named_k = (which == 0) != trans, named = named_k ? p->k_sym : which == 1 && p->n_sym;
        const tuner__gemm_x cols = named ? gemm_x("(long long)%s", named_k ? "gm_K" : "gm_N")
                                         : gemm_x("%lldLL", (long long)t->shape[t->rank - 1]);
        if (batched)
            tuner_sb_printf(sb, "const long long %s_off = (%s_t0 * %lldLL + %s_t1) * %s + %s_t2;\n", pfx, pfx, rows,
                            pfx, cols.s, pfx);
        else
            tuner_sb_printf(sb, "const long long %s_off = %s_t0 * %s + %s_t1;\n", pfx, pfx, cols.s, pfx);
        return;
    }
    /* Convolution. k enumerates (r, s, c) with c fastest for NHWC and (c, r, s) with s fastest
     * for NCHW: both are the weight's memory order, so B is a plain [K/g][R*S*C/g] matrix. */
    if (p->nchw)
        tuner_sb_printf(sb,
                        "const int %s_c = %s_k / %lld; const int %s_r = (%s_k / %lld) %% %lld; "
                        "const int %s_s = %s_k %% %lld;\n",
                        pfx, pfx, p->cr * p->cs, pfx, pfx, p->cs, p->cr, pfx, pfx, p->cs);
    else
        tuner_sb_printf(sb,
                        "const int %s_c = %s_k %% %lld; const int %s_r = (%s_k / %lld) / %lld; "
                        "const int %s_s = (%s_k / %lld) %% %lld;\n",
                        pfx, pfx, p->cgc, pfx, pfx, p->cgc, p->cs, pfx, pfx, p->cgc, p->cs);
    if (which == 1) {
        tuner_sb_printf(sb, "const long long %s_t0 = (long long)(%s) * %lld + %s_mn;\n", pfx, b, p->cgk, pfx);
        if (p->nchw)
            tuner_sb_printf(sb, "const long long %s_t1 = %s_c, %s_t2 = %s_r, %s_t3 = %s_s;\n", pfx, pfx, pfx, pfx,
                            pfx, pfx);
        else
            tuner_sb_printf(sb, "const long long %s_t1 = %s_r, %s_t2 = %s_s, %s_t3 = %s_c;\n", pfx, pfx, pfx, pfx,
                            pfx, pfx);
        tuner_sb_printf(sb, "const bool %s_ok = %s_mn < %lld && %s_k < (%s);\n", pfx, pfx, p->N, pfx, kend);
        tuner_sb_printf(sb, "const long long %s_off = %s_t0 * %lldLL + %s_k;\n", pfx, pfx, p->K, pfx);
        return;
    }
    tuner_sb_printf(sb,
                    "const int %s_nb = %s_mn / %lld; const int %s_p = (%s_mn / %lld) %% %lld; "
                    "const int %s_q = %s_mn %% %lld;\n",
                    pfx, pfx, p->cp * p->cq, pfx, pfx, p->cq, p->cp, pfx, pfx, p->cq);
    tuner_sb_printf(sb, "const int %s_h = %s_p * %d - %d + %s_r * %d; const int %s_w = %s_q * %d - %d + %s_s * %d;\n",
                    pfx, pfx, p->sh, p->ph, pfx, p->dh, pfx, pfx, p->sw, p->pw, pfx, p->dw);
    tuner_sb_printf(sb,
                    "const bool %s_ok = %s_mn < %lld && %s_k < (%s) && (unsigned)%s_h < %lldu && "
                    "(unsigned)%s_w < %lldu;\n",
                    pfx, pfx, p->M, pfx, kend, pfx, p->ch, pfx, p->cw);
    tuner_sb_printf(sb, "const long long %s_cg = (long long)(%s) * %lld + %s_c;\n", pfx, b, p->cgc, pfx);
    if (p->nchw) {
        tuner_sb_printf(sb, "const long long %s_t0 = %s_nb, %s_t1 = %s_cg, %s_t2 = %s_h, %s_t3 = %s_w;\n", pfx, pfx,
                        pfx, pfx, pfx, pfx, pfx, pfx);
        tuner_sb_printf(sb, "const long long %s_off = ((%s_t0 * %lld + %s_t1) * %lld + %s_t2) * %lld + %s_t3;\n",
                        pfx, pfx, p->cc, pfx, p->ch, pfx, p->cw, pfx);
    } else {
        tuner_sb_printf(sb, "const long long %s_t0 = %s_nb, %s_t1 = %s_h, %s_t2 = %s_w, %s_t3 = %s_cg;\n", pfx, pfx,
                        pfx, pfx, pfx, pfx, pfx, pfx);
        tuner_sb_printf(sb, "const long long %s_off = ((%s_t0 * %lld + %s_t1) * %lld + %s_t2) * %lld + %s_t3;\n",
                        pfx, pfx, p->ch, pfx, p->cw, pfx, p->cc, pfx);
    }
}

/* Operand loads for fused chains: the element of inputs[i] that lines up (numpy broadcast,
 * right-aligned) with the value at tensor coordinates names[0..rank) of `value`. */
typedef struct chain_ctx {
    const tuner_op *op;
    const tuner_tensor *value;
    const char *pfx; /* coordinates are <pfx>_t<d> */
    int extra_last;  /* added to the last coordinate (second element of a pair) */
    /* NULL, or per input: non-NULL where the pair's two elements were read from a shared-memory
     * tile into the register o_x<input> (emit_out_values): a 16-bit pair in one 32-bit word, an
     * fp32 pair in an hd_v2. */
    const char *const *smem_at;
} chain_ctx;

static char *chain_load(void *vctx, int input)
{
    chain_ctx *c = vctx;
    const tuner_tensor *o = &c->op->inputs[input];
    tuner_sb sb;
    tuner_sb_init(&sb);
    if (c->smem_at && c->smem_at[input]) {
        if (o->dtype == TUNER_F32)
            tuner_sb_printf(&sb, "__uint_as_float(o_x%d.%c)", input, c->extra_last ? 'y' : 'x');
        else
            tuner_sb_printf(&sb, "hd_unpack_%s(o_x%d, %s())", c->extra_last ? "hi" : "lo", input,
                            tuner__ctype(o->dtype));
        return tuner_sb_take(&sb);
    }
    tuner_sb_printf(&sb, "in%d[0", input);
    /* The stride of axis d: the product of the later axes' extents, a literal while they are
     * fixed; a named axis (named N or K: an operand named as the value, names_follow) multiplies
     * in its size expression. */
    long long stride = 1;
    char dyn[256] = "";
    for (int d = o->rank - 1; d >= 0; d--) {
        int vd = c->value->rank - (o->rank - d);
        char st[300];
        if (dyn[0])
            snprintf(st, sizeof(st), "(%s * %lldLL)", dyn, stride);
        else
            snprintf(st, sizeof(st), "%lldLL", stride);
        if (vd >= 0 && o->shape[d] != 1) {
            if (vd == c->value->rank - 1 && c->extra_last && c->value->sym[vd]) {
                char last[96];
                tuner__axis_expr(c->value, vd, last, sizeof(last));
                /* A named last axis may be odd at launch: keep the pair's second read inside. */
                tuner_sb_printf(&sb, " + min(%s_t%d + %d, (long long)(%s) - 1) * %s", c->pfx, vd, c->extra_last, last,
                                st);
            } else if (vd == c->value->rank - 1 && c->extra_last && c->value->shape[vd] % 2)
                /* An odd last axis: the pair at its last element has no second one; its read
                 * stays inside the operand (the value is never stored). */
                tuner_sb_printf(&sb, " + min(%s_t%d + %d, %lldLL) * %s", c->pfx, vd, c->extra_last,
                                (long long)c->value->shape[vd] - 1, st);
            else if (vd == c->value->rank - 1 && c->extra_last)
                tuner_sb_printf(&sb, " + (%s_t%d + %d) * %s", c->pfx, vd, c->extra_last, st);
            else
                tuner_sb_printf(&sb, " + %s_t%d * %s", c->pfx, vd, st);
        }
        if (o->sym[d] && d > 0) {
            char ax[96], nd[256];
            tuner__axis_expr(o, d, ax, sizeof(ax));
            snprintf(nd, sizeof(nd), dyn[0] ? "%s * (long long)(%s)" : "%s(long long)(%s)", dyn, ax);
            snprintf(dyn, sizeof(dyn), "%s", nd);
        } else {
            stride *= o->shape[d];
        }
    }
    tuner_sb_puts(&sb, "]");
    return tuner_sb_take(&sb);
}

void tuner__gemm_emit_chain_at(tuner_sb *sb, const tuner__gemm_problem *p, const tuner_ew_chain *chain,
                               const tuner_tensor *value, const char *pfx, const char *var)
{
    chain_ctx c = {.op = p->op, .value = value, .pfx = pfx, .extra_last = 0};
    tuner__emit_chain(sb, p->op, chain, var, chain_load, &c);
}

void tuner__gemm_emit_prologue(tuner_sb *sb, const tuner__gemm_problem *p, int which, const char *pfx,
                               const char *var)
{
    chain_ctx c = {.op = p->op, .value = &p->op->inputs[which], .pfx = pfx, .extra_last = 0};
    tuner__emit_chain(sb, p->op, &p->op->prologue[which], var, chain_load, &c);
}

void tuner__gemm_emit_store(tuner_sb *sb, const tuner__gemm_problem *p, const char *b, const char *m,
                            const char *n, const char *const *vars, int nv)
{
    tuner__gemm_emit_store_at(sb, p, b, m, n, vars, nv, NULL);
}

void tuner__gemm_emit_store_pair(tuner_sb *sb, const tuner__gemm_problem *p, const char *b, const char *m,
                                 const char *n, const char *x0, const char *x1, bool applied)
{
    void (*store)(tuner_sb *, const tuner__gemm_problem *, const char *, const char *, const char *,
                  const char *const *, int) = applied ? tuner__gemm_emit_store_applied : tuner__gemm_emit_store;
    if (p->out_vec == 2) {
        const char *v2[2] = {x0, x1};
        store(sb, p, b, m, n, v2, 2);
        return;
    }
    char n1[96];
    snprintf(n1, sizeof(n1), "%s + 1", n);
    const char *v0[1] = {x0}, *v1[1] = {x1};
    store(sb, p, b, m, n, v0, 1);
    store(sb, p, b, m, n1, v1, 1);
}

int tuner__gemm_partial_row_bytes(int block_n)
{
    return block_n * 4 + 32;
}

const char tuner__gemm_cluster_helpers[] =
    "HD_INLINE void gm_sts_f2(hd_u32 a, float x, float y) { asm volatile(\"st.shared.v2.f32 [%0], {%1, %2};\" "
    ":: \"r\"(a), \"f\"(x), \"f\"(y) : \"memory\"); }\n"
    "HD_INLINE float2 gm_ldc_f2(hd_u32 a, unsigned rank) { float2 v; asm volatile(\"{ .reg .b32 ra; "
    "mapa.shared::cluster.u32 ra, %2, %3; ld.shared::cluster.v2.f32 {%0, %1}, [ra]; }\" "
    ": \"=f\"(v.x), \"=f\"(v.y) : \"r\"(a), \"r\"(rank) : \"memory\"); return v; }\n"
    "HD_INLINE float gm_ldc_f1(hd_u32 a, unsigned rank) { float v; asm volatile(\"{ .reg .b32 ra; "
    "mapa.shared::cluster.u32 ra, %1, %2; ld.shared::cluster.f32 %0, [ra]; }\" "
    ": \"=f\"(v) : \"r\"(a), \"r\"(rank) : \"memory\"); return v; }\n"
    "HD_INLINE void gm_cluster_sync() { asm volatile(\"barrier.cluster.arrive.release.aligned;\\n"
    "barrier.cluster.wait.acquire.aligned;\" ::: \"memory\"); }\n";

/* Output pairs a summing thread takes per step of tuner__gemm_emit_cluster_sum: every partial
 * of all of them is loaded before the first is added, so that the step waits for one round trip
 * through distributed shared memory rather than one per load (the loads are volatile asm, which
 * the compiler keeps in order, and each add waited for its load). On the H200 an unswapped
 * 128x64 tile of [100,4096] x [4096,4096] split over two CTAs went from 18.1 to 16.0-16.2 us;
 * a swapped 64x104 one stayed at 15.0-15.7 (its warps wait at the barriers instead), where the
 * unsplit tile runs 13.2-13.6 (bench/results/2026-11-30-h200-session17/d, e). At most 8
 * partial loads (16 in the transposed sum) per step. */
static int cluster_sum_unroll(int split)
{
    return split <= 2 ? 4 : split <= 4 ? 2 : 1;
}

void tuner__gemm_emit_cluster_sum(tuner_sb *sb, const tuner__gemm_problem *p, const tuner__gemm_cluster_sum *s)
{
    const int u = cluster_sum_unroll(s->split);
    /* The pairs of the tile, split evenly over the cluster's CTAs; a step takes u pairs,
     * `threads` apart, of this CTA's share (gm_q0 + gm_u * threads). */
    if (s->transposed)
        /* The partial's rows r are the output's columns n0 + r, its columns c the output's rows
         * m0 + c. A thread sums rows r and r + 1 (an output pair) at one column; neighbouring
         * threads take neighbouring columns, so that their 4-byte cluster loads of a partial row
         * fall in distinct banks. Rows past N are summed too (zeros: the copy engine filled
         * the operand's rows past N with them) and the paired store leaves them out. */
        tuner_sb_printf(sb,
                        "{\nunsigned gm_rank;\nasm(\"mov.u32 %%0, %%%%cluster_ctarank;\" : \"=r\"(gm_rank));\n"
                        "const int gm_rows = min(%d, (int)(%s - (%s)));\n"
                        "const int gm_pairs = gm_rows * %d;\n",
                        s->block_n, tuner__gemm_M_ll(p).s, s->m0, s->block_m / 2);
    else
        tuner_sb_printf(sb,
                        "{\nunsigned gm_rank;\nasm(\"mov.u32 %%0, %%%%cluster_ctarank;\" : \"=r\"(gm_rank));\n"
                        "const int gm_pairs = min(%d, (int)(%s - (%s))) * %d;\n",
                        s->block_m, tuner__gemm_M_ll(p).s, s->m0, s->block_n / 2);
    tuner_sb_printf(sb,
                    "const int gm_per = (gm_pairs + %d) / %d;\n"
                    "const int gm_q1 = min(gm_pairs, (int)(gm_rank + 1) * gm_per);\n"
                    "for (int gm_q0 = (int)gm_rank * gm_per + (%s); gm_q0 < gm_q1; gm_q0 += %d) {\n"
                    "float gm_x[%d][%d][2];\n"
                    "#pragma unroll\nfor (int gm_u = 0; gm_u < %d; gm_u++) {\n"
                    /* past the share's end: the last pair's partials again (loaded, never stored) */
                    "const int gm_q = min(gm_q0 + gm_u * %d, gm_q1 - 1);\n",
                    s->split - 1, s->split, s->tid, u * s->threads, u, s->split, u, s->threads);
    const int half = s->block_n / 2;
    if (s->transposed)
        tuner_sb_printf(sb,
                        "const hd_u32 gm_sa = %s + (gm_q / gm_rows) * 2 * %d + (gm_q %% gm_rows) * 4;\n"
                        "#pragma unroll\nfor (int gm_s = 0; gm_s < %d; gm_s++) {\n"
                        "gm_x[gm_u][gm_s][0] = gm_ldc_f1(gm_sa, (unsigned)gm_s);\n"
                        "gm_x[gm_u][gm_s][1] = gm_ldc_f1(gm_sa + %d, (unsigned)gm_s);\n}\n}\n",
                        s->base, s->row_bytes, s->split, s->row_bytes);
    else
        tuner_sb_printf(sb,
                        "const hd_u32 gm_sa = %s + (gm_q / %d) * %d + (gm_q %% %d) * 8;\n"
                        "#pragma unroll\nfor (int gm_s = 0; gm_s < %d; gm_s++) {\n"
                        "const float2 gm_t = gm_ldc_f2(gm_sa, (unsigned)gm_s);\n"
                        "gm_x[gm_u][gm_s][0] = gm_t.x;\ngm_x[gm_u][gm_s][1] = gm_t.y;\n}\n}\n",
                        s->base, half, s->row_bytes, half, s->split);
    /* The sums in slice order, as one load per add summed them, then each pair's store. */
    tuner_sb_printf(sb,
                    "#pragma unroll\nfor (int gm_u = 0; gm_u < %d; gm_u++) {\n"
                    "const int gm_q = gm_q0 + gm_u * %d;\n"
                    "if (gm_q < gm_q1) {\n"
                    "float gm_v0 = 0.0f, gm_v1 = 0.0f;\n"
                    "#pragma unroll\nfor (int gm_s = 0; gm_s < %d; gm_s++) {\n"
                    "gm_v0 += gm_x[gm_u][gm_s][0];\ngm_v1 += gm_x[gm_u][gm_s][1];\n}\n",
                    u, s->threads, s->split);
    if (s->transposed)
        tuner_sb_printf(sb, "const int em = %s + gm_q %% gm_rows, en = %s + (gm_q / gm_rows) * 2;\n", s->m0, s->n0);
    else
        tuner_sb_printf(sb, "const int em = %s + gm_q / %d, en = %s + (gm_q %% %d) * 2;\n", s->m0, half, s->n0, half);
    tuner__gemm_emit_store_pair(sb, p, s->b, "em", "en", "gm_v0", "gm_v1", false);
    tuner_sb_puts(sb, "}\n}\n}\n}\n");
}

/* How emit_out_coords treats elements outside the output. */
enum { OUT_IN_RANGE, OUT_CHECKED, OUT_CLAMPED };

/* Opens the block shared by the store and epilogue emitters: `o_b, o_m, o_n` and the output
 * element's tensor coordinates o_t<d> and offset o_off: inside a bounds check (OUT_CHECKED), or
 * with m and n clamped to the last row and the last pair (OUT_CLAMPED: no branch, in-range
 * operand reads; an odd N's last pair starts at its last column), or as given (OUT_IN_RANGE). The caller closes both braces. */
static void emit_out_coords(tuner_sb *sb, const tuner__gemm_problem *p, const char *b, const char *m, const char *n,
                            int mode)
{
    if (mode == OUT_CLAMPED)
        /* The last pair: N - 2 for an even N; an odd N's last element is a pair's first (even
         * columns), which keeps its own column (chain_load keeps the second's read in range). */
    {
        /* (N - 1) & ~1 is N - 1 for an odd N and N - 2 for an even one. */
        char nl[80];
        if (p->n_sym)
            snprintf(nl, sizeof(nl), "((gm_N - 1) & ~1)");
        else
            snprintf(nl, sizeof(nl), "%lld", p->N % 2 ? p->N - 1 : p->N - 2);
        tuner_sb_printf(sb, "{\nconst int o_b = (%s), o_m = min((%s), %s), o_n = min((%s), %s);\n{\n", b, m,
                        tuner__gemm_M(p, -1).s, n, nl);
    }
    else
        tuner_sb_printf(sb, "{\nconst int o_b = (%s), o_m = (%s), o_n = (%s);\n", b, m, n);
    const tuner__gemm_x N = tuner__gemm_N(p, 0);
    if (mode == OUT_CHECKED)
        tuner_sb_printf(sb, "if (o_m < %s && o_n < %s) {\n", tuner__gemm_M(p, 0).s, N.s);
    else if (mode == OUT_IN_RANGE)
        tuner_sb_puts(sb, "{\n");
    /* The quantize step's amax counts only elements of the output: a clamped pair's are
     * computed from another element's operands, and a pair's second may lie past N. */
    if (p->amax_in >= 0) {
        if (mode == OUT_CLAMPED)
            tuner_sb_printf(sb, "const bool o_ok0 = (%s) < %s && (%s) < %s, o_ok1 = (%s) < %s && (%s) + 1 < %s;\n", m,
                            tuner__gemm_M(p, 0).s, n, N.s, m, tuner__gemm_M(p, 0).s, n, N.s);
        else
            tuner_sb_printf(sb, "const bool o_ok0 = true, o_ok1 = o_n + 1 < %s;\n", N.s);
    }
    const tuner_tensor *o = &p->op->output;
    if (!p->conv) {
        int d = 0;
        if (o->rank == 3)
            tuner_sb_printf(sb, "const long long o_t%d = o_b;\n", d++);
        tuner_sb_printf(sb, "const long long o_t%d = o_m;\nconst long long o_t%d = o_n;\n", d, d + 1);
        tuner_sb_printf(sb, "const long long o_off = ((long long)o_b * %s + o_m) * %s + o_n;\n",
                        tuner__gemm_M(p, 0).s, p->n_sym ? "(long long)gm_N" : gemm_x("%lldLL", p->N).s);
    } else {
        tuner_sb_printf(sb, "const int o_nb = o_m / %lld, o_p = (o_m / %lld) %% %lld, o_q = o_m %% %lld;\n",
                        p->cp * p->cq, p->cq, p->cp, p->cq);
        tuner_sb_printf(sb, "const long long o_k = (long long)o_b * %lld + o_n;\n", p->cgk);
        if (p->nchw) {
            tuner_sb_puts(sb, "const long long o_t0 = o_nb, o_t1 = o_k, o_t2 = o_p, o_t3 = o_q;\n");
            tuner_sb_printf(sb, "const long long o_off = ((long long)o_nb * %lld + o_k) * %lldLL + (o_m %% %lld);\n",
                            p->ck, p->cp * p->cq, p->cp * p->cq);
        } else {
            tuner_sb_puts(sb, "const long long o_t0 = o_nb, o_t1 = o_p, o_t2 = o_q, o_t3 = o_k;\n");
            tuner_sb_printf(sb, "const long long o_off = (long long)o_m * %lldLL + o_k;\n", p->ck);
        }
    }
}

/* Declares float o_v<j> = vars[j] and, with `chain`, applies the epilogue to each: first an FP8
 * matmul's scales (out = acc * sa * sb, one float product per element as torch._scaled_mm's
 * epilogue computes it: acc * (sa * sb) for two tensor scales), then the steps. smem_at (NULL,
 * or per input) names the pair's place in a shared-memory tile of the operands read from there
 * (a pair: nv is 2): both elements are loaded at once into o_x<input> first. */
static void emit_out_values(tuner_sb *sb, const tuner__gemm_problem *p, const char *const *vars, int nv, bool chain,
                            const char *const *smem_at)
{
    for (int i = 0; chain && smem_at && i < p->op->n_inputs; i++)
        if (smem_at[i])
            tuner_sb_printf(sb, "const %s o_x%d = *reinterpret_cast<const %s *>(%s);\n",
                            p->op->inputs[i].dtype == TUNER_F32 ? "hd_v2" : "hd_u32", i,
                            p->op->inputs[i].dtype == TUNER_F32 ? "hd_v2" : "hd_u32", smem_at[i]);
    const bool scaled = chain && (p->scale_a_in >= 0 || p->scale_b_in >= 0);
    /* o_m and o_n are in range here: checked, clamped or known (emit_out_coords). */
    if (scaled && p->scale_a_in >= 0)
        tuner_sb_printf(sb, "const float o_sa = __ldg(in%d + %s);\n", p->scale_a_in,
                        p->scale_a == TUNER_SCALE_ROW ? "o_m" : "0");
    for (int j = 0; j < nv; j++) {
        tuner_sb_printf(sb, "float o_v%d = %s;\n", j, vars[j]);
        if (scaled) {
            char sbv[64];
            if (p->scale_b_in >= 0)
                snprintf(sbv, sizeof(sbv), "__ldg(in%d + %s)", p->scale_b_in,
                         p->scale_b == TUNER_SCALE_COL ? (j ? "o_n + 1" : "o_n") : "0");
            tuner_sb_printf(sb, "o_v%d = o_v%d * (%s * %s);\n", j, j, p->scale_a_in >= 0 ? "o_sa" : "1.0f",
                            p->scale_b_in >= 0 ? sbv : "1.0f");
        }
        if (!chain)
            continue;
        char var[16];
        snprintf(var, sizeof(var), "o_v%d", j);
        chain_ctx c = {.op = p->op, .value = &p->op->output, .pfx = "o", .extra_last = j, .smem_at = smem_at};
        if (p->amax_in < 0) {
            tuner__emit_chain(sb, p->op, &p->op->epilogue, var, chain_load, &c);
            continue;
        }
        /* The steps before the quantize step, the value it receives into the amax, the step. */
        tuner_ew_chain head = p->op->epilogue, last = {.n = 1};
        last.steps[0] = head.steps[--head.n];
        tuner__emit_chain(sb, p->op, &head, var, chain_load, &c);
        tuner_sb_printf(sb, "gm_amax_v = fmaxf(gm_amax_v, o_ok%d ? fabsf(o_v%d) : 0.0f);\n", j, j);
        tuner__emit_chain(sb, p->op, &last, var, chain_load, &c);
    }
}

void tuner__gemm_emit_amax_decl(tuner_sb *sb, const tuner__gemm_problem *p)
{
    if (p->amax_in >= 0)
        tuner_sb_puts(sb, "float gm_amax_v = 0.0f;\n");
}

void tuner__gemm_emit_amax_flush(tuner_sb *sb, const tuner__gemm_problem *p)
{
    if (p->amax_in < 0)
        return;
    tuner_sb_printf(sb,
                    "{\nconst unsigned gm_am_mask = __activemask();\n"
                    "const int gm_am = __reduce_max_sync(gm_am_mask, __float_as_int(gm_amax_v));\n"
                    "if ((threadIdx.x & 31) == __ffs(gm_am_mask) - 1 && gm_am > 0) "
                    "atomicMax(reinterpret_cast<int *>(const_cast<float *>(in%d)), gm_am);\n}\n",
                    p->amax_in);
}

/* Where the store emitters put a value: global memory (a pointer expression, by default
 * out + o_off), a 32-bit shared-memory address stored through asm, or a shared-memory pointer
 * (`unsigned char *`) stored as plain C++. */
typedef enum { STORE_GLOBAL, STORE_SHARED_ADDR, STORE_SHARED_PTR } store_to;

/* The body of the store emitters: the values' coordinates as `mode` has them (emit_out_coords),
 * the epilogue applied on the way with `chain`, then the store at `at`. Shared memory holds
 * whole pairs (a 16-byte output chunk implies paired stores). */
static void emit_store_impl(tuner_sb *sb, const tuner__gemm_problem *p, const char *b, const char *m, const char *n,
                            const char *const *vars, int nv, const char *at, store_to to, int mode, bool chain,
                            const char *const *smem_at)
{
    emit_out_coords(sb, p, b, m, n, mode);
    emit_out_values(sb, p, vars, nv, chain, smem_at);
    if (!at)
        at = "out + o_off";
    if (tuner_dtype_is_fp8(p->out_dt)) {
        /* FP8 (a quantizing epilogue's cast, already rounded): a pair is 2 bytes, n in the low. */
        const char *cvt = p->out_dt == TUNER_F8E4M3 ? "gm_cvt_f8e4m3x2" : "gm_cvt_f8e5m2x2";
        if (to == STORE_SHARED_ADDR)
            tuner_sb_printf(sb, "asm volatile(\"st.shared.u16 [%%0], %%1;\" :: \"r\"(%s), \"h\"(%s(o_v0, o_v1)) : \"memory\");\n",
                            at, cvt);
        else if (to != STORE_GLOBAL || nv == 2)
            tuner_sb_printf(sb, "*reinterpret_cast<unsigned short *>(%s) = %s(o_v0, o_v1);\n", at, cvt);
        else
            tuner_sb_printf(sb, "*(%s) = (unsigned char)(%s(o_v0, 0.0f) & 0xffu);\n", at, cvt);
        tuner_sb_puts(sb, "}\n}\n");
        return;
    }
    if (to != STORE_GLOBAL || nv == 2) {
        if (p->out_dt == TUNER_F32) {
            tuner_sb_puts(sb, "{ hd_v2 o_pk; o_pk.x = __float_as_uint(o_v0); o_pk.y = __float_as_uint(o_v1); ");
            if (to == STORE_SHARED_PTR)
                tuner_sb_printf(sb, "*reinterpret_cast<hd_v2 *>(%s) = o_pk; }\n", at);
            else
                tuner_sb_printf(sb, "%s(%s, o_pk); }\n", to == STORE_SHARED_ADDR ? "gm_sts64" : "hd_st8", at);
        } else {
            tuner_sb_printf(sb, to == STORE_SHARED_ADDR ? "gm_sts32(%s, hd_pack_%s(o_v0, o_v1));\n"
                                                        : "*reinterpret_cast<hd_u32 *>(%s) = hd_pack_%s(o_v0, o_v1);\n",
                            at, p->out_dt == TUNER_F16 ? "f16x2" : "bf16x2");
        }
    } else {
        tuner_sb_printf(sb, "*(%s) = hd_from_f32<%s>(o_v0);\n", at, tuner__ctype(p->out_dt));
    }
    tuner_sb_puts(sb, "}\n}\n");
}

void tuner__gemm_emit_store_at(tuner_sb *sb, const tuner__gemm_problem *p, const char *b, const char *m,
                               const char *n, const char *const *vars, int nv, const char *dst)
{
    emit_store_impl(sb, p, b, m, n, vars, nv, dst, STORE_GLOBAL, dst ? OUT_IN_RANGE : OUT_CHECKED, true, NULL);
}

const char tuner__gemm_fp8_out_helpers[] =
    /* cvt.rn.satfinite (sm_89+): two floats to two FP8 bytes, lo in the low byte; and a float
     * rounded through FP8 (what a cast step to it computes) by the same conversion and back. */
    "__device__ __forceinline__ unsigned short gm_cvt_f8e4m3x2(float lo, float hi) { unsigned short r; "
    "asm(\"cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\" : \"=h\"(r) : \"f\"(hi), \"f\"(lo)); return r; }\n"
    "__device__ __forceinline__ unsigned short gm_cvt_f8e5m2x2(float lo, float hi) { unsigned short r; "
    "asm(\"cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;\" : \"=h\"(r) : \"f\"(hi), \"f\"(lo)); return r; }\n"
    "__device__ __forceinline__ float gm_f8x2_lo(unsigned short q, int e4) { unsigned int h; "
    "if (e4) asm(\"cvt.rn.f16x2.e4m3x2 %0, %1;\" : \"=r\"(h) : \"h\"(q)); "
    "else asm(\"cvt.rn.f16x2.e5m2x2 %0, %1;\" : \"=r\"(h) : \"h\"(q)); "
    "float r; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(r) : \"h\"((unsigned short)(h & 0xffffu))); return r; }\n"
    "__device__ __forceinline__ float hd_round_f8e4m3(float v) { return gm_f8x2_lo(gm_cvt_f8e4m3x2(v, 0.0f), 1); }\n"
    "__device__ __forceinline__ float hd_round_f8e5m2(float v) { return gm_f8x2_lo(gm_cvt_f8e5m2x2(v, 0.0f), 0); }\n";

bool tuner__gemm_has_epilogue(const tuner__gemm_problem *p)
{
    return p->op->epilogue.n > 0 || p->scale_a_in >= 0 || p->scale_b_in >= 0;
}

void tuner__gemm_emit_epilogue_pair_x(tuner_sb *sb, const tuner__gemm_problem *p, const char *b, const char *m,
                                      const char *n, const char *const *pair, bool clamped,
                                      const char *const *smem_at)
{
    emit_out_coords(sb, p, b, m, n, clamped ? OUT_CLAMPED : OUT_IN_RANGE);
    emit_out_values(sb, p, pair, 2, true, smem_at);
    tuner_sb_printf(sb, "%s = o_v0;\n%s = o_v1;\n}\n}\n", pair[0], pair[1]);
}

void tuner__gemm_emit_epilogue_pair(tuner_sb *sb, const tuner__gemm_problem *p, const char *b, const char *m,
                                    const char *n, const char *const *pair, bool clamped)
{
    tuner__gemm_emit_epilogue_pair_x(sb, p, b, m, n, pair, clamped, NULL);
}

void tuner__gemm_emit_store_smem(tuner_sb *sb, const tuner__gemm_problem *p, const char *b, const char *m,
                                 const char *n, const char *const *pair, const char *saddr, bool checked)
{
    emit_store_impl(sb, p, b, m, n, pair, 2, saddr, STORE_SHARED_ADDR, checked ? OUT_CHECKED : OUT_IN_RANGE, false,
                    NULL);
}

void tuner__gemm_emit_staged_pair_x(tuner_sb *sb, const tuner__gemm_problem *p, const char *b, const char *m,
                                    const char *n, const char *const *pair, const char *sptr,
                                    const char *const *smem_at)
{
    const bool chain = tuner__gemm_has_epilogue(p);
    emit_store_impl(sb, p, b, m, n, pair, 2, sptr, STORE_SHARED_PTR, chain ? OUT_CLAMPED : OUT_IN_RANGE, chain,
                    smem_at);
}

void tuner__gemm_emit_staged_pair(tuner_sb *sb, const tuner__gemm_problem *p, const char *b, const char *m,
                                  const char *n, const char *const *pair, const char *sptr)
{
    tuner__gemm_emit_staged_pair_x(sb, p, b, m, n, pair, sptr, NULL);
}

void tuner__gemm_emit_store_applied(tuner_sb *sb, const tuner__gemm_problem *p, const char *b, const char *m,
                                    const char *n, const char *const *vars, int nv)
{
    emit_store_impl(sb, p, b, m, n, vars, nv, NULL, STORE_GLOBAL, OUT_CHECKED, false, NULL);
}

/* Whether input i is read by a step of the epilogue (and by no prologue). */
static bool epilogue_only_operand(const tuner_op *op, int i)
{
    return tuner_ew_chain_reads(&op->epilogue, i) && !tuner_ew_chain_reads(&op->prologue[0], i) &&
           !tuner_ew_chain_reads(&op->prologue[1], i);
}

bool tuner__gemm_tile_operand(const tuner__gemm_problem *p, int i, bool *batched)
{
    const tuner_op *op = p->op;
    if (i < op->n_anchor_inputs || i >= op->n_inputs || !epilogue_only_operand(op, i))
        return false;
    const tuner_tensor *t = &op->inputs[i], *o = &op->output;
    const int esz = tuner_dtype_size(t->dtype);
    if (p->conv) {
        /* An ungrouped NHWC convolution's output is an [N*P*Q, K] matrix; so is an operand of its
         * shape (a residual). */
        if (p->nchw || p->batch != 1 || t->dtype != p->out_dt || t->rank != 4 || (p->N * esz) % 16 != 0 ||
            align_of(t) < 16)
            return false;
        for (int d = 0; d < 4; d++)
            if (t->shape[d] != o->shape[d])
                return false;
        if (batched)
            *batched = false;
        return true;
    }
    /* (a named N's row stride is the launch's: such a tile is not staged) */
    if (p->n_sym)
        return false;
    if (t->dtype != p->out_dt || t->rank < 2 || t->rank > o->rank || t->shape[t->rank - 1] != p->N ||
        t->shape[t->rank - 2] != p->M || (p->N * esz) % 16 != 0 || align_of(t) < 16)
        return false;
    /* A named M stands on a rank-2 operand's axis 0 as on the output's; a rank-3 operand is one
     * [M, N] matrix per batch entry (named as the output's batch, or its full count) or one for
     * all of them (a leading 1). */
    const bool per_batch = t->rank == 3 && !(t->shape[0] == 1 && p->batch > 1 && !t->sym[0]);
    if (t->rank == 3 && per_batch && (t->shape[0] != p->batch || (t->sym[0] && t->sym[0] != p->batch_sym)))
        return false;
    if (t->rank == 2 && t->sym[0] && t->sym[0] != p->m_sym)
        return false;
    if (batched)
        *batched = per_batch;
    return true;
}

void tuner__gemm_emit_splitk_reduce(tuner_sb *sb, const tuner__gemm_problem *p, const char *name, int split)
{
    tuner__gemm_emit_signature(sb, p, name, 256, true, 1);
    /* A plane is one slice's partial output; a dynamic op's planes are as large as the launch's
     * output (the main kernel writes them with the same runtime M and batch). */
    char plane[96], mn[96];
    const tuner__gemm_x N = tuner__gemm_N(p, 0);
    const tuner__gemm_x Nll = p->n_sym ? gemm_x("(long long)gm_N") : gemm_x("%lldLL", p->N);
    if (p->dynamic) {
        tuner_sb_printf(sb, "const long long gm_plane = (long long)gm_B * gm_M * %s;\n", Nll.s);
        snprintf(plane, sizeof(plane), "gm_plane");
        snprintf(mn, sizeof(mn), "((long long)gm_M * %s)", Nll.s);
    } else {
        snprintf(plane, sizeof(plane), "%lldLL", p->batch * p->M * p->N);
        snprintf(mn, sizeof(mn), "%lldLL", p->M * p->N);
    }
    tuner_sb_printf(sb, "const long long idx = (long long)blockIdx.x * 256 + threadIdx.x;\n"
                        "if (idx >= %s) return;\n",
                    plane);
    tuner_sb_printf(sb, "const int b = (int)(idx / %s); const int m = (int)((idx / %s) %% %s); "
                        "const int n = (int)(idx %% %s);\n",
                    mn, N.s, tuner__gemm_M(p, 0).s, N.s);
    /* Slices are summed in a fixed order: the result does not depend on scheduling. */
    tuner_sb_puts(sb, "float acc = 0.0f;\n");
    tuner_sb_printf(sb, "#pragma unroll\nfor (int s = 0; s < %d; s++) acc += ws[s * %s + idx];\n", split, plane);
    const char *v[1] = {"acc"};
    tuner__gemm_emit_store(sb, p, "b", "m", "n", v, 1);
    tuner_sb_puts(sb, "}\n");
}

void tuner__gemm_emit_raster(tuner_sb *sb, const tuner__gemm_problem *p, long long tiles_m, int block_m, int block_n,
                             int group)
{
    const long long tiles_n = tuner__gemm_cdiv(p->N, block_n);
    if (p->n_sym && p->m_sym) {
        tuner_sb_puts(sb, "const int gm_tm = (int)blockIdx.x, gm_tn = (int)blockIdx.y;\n");
        return;
    }
    /* The count of tile columns: a literal, or from a named N at launch. */
    char tn[64];
    if (p->n_sym)
        snprintf(tn, sizeof(tn), "((gm_N + %d) / %d)", block_n - 1, block_n);
    else
        snprintf(tn, sizeof(tn), "%lld", tiles_n);
    /* One tile row at the largest M is one at every M: row-major order is the grouped one. */
    if (group <= 1 || tiles_m <= 1) {
        if (p->n_sym)
            tuner_sb_printf(sb, "const int gm_tm = (int)blockIdx.x / %s, gm_tn = (int)blockIdx.x %% %s;\n", tn, tn);
        else
            tuner_sb_printf(sb, "const int gm_tm = (int)(blockIdx.x / %lldu), gm_tn = (int)(blockIdx.x %% %lldu);\n",
                            tiles_n, tiles_n);
        return;
    }
    char tm[64];
    if (p->m_sym)
        snprintf(tm, sizeof(tm), "((gm_M + %d) / %d)", block_m - 1, block_m);
    else
        snprintf(tm, sizeof(tm), "%lld", tiles_m);
    /* Blocks launched close together share A rows (a group of tile rows) and sweep B columns,
     * so their operands stay in L2. */
    tuner_sb_printf(sb,
                    "const int gm_pid = (int)blockIdx.x;\n"
                    "const int gm_width = %d * %s;\n"
                    "const int gm_first = (gm_pid / gm_width) * %d;\n"
                    "const int gm_gsz = min(%s - gm_first, %d);\n"
                    "const int gm_tm = gm_first + (gm_pid %% gm_width) %% gm_gsz;\n"
                    "const int gm_tn = (gm_pid %% gm_width) / gm_gsz;\n",
                    group, tn, group, tm, group);
}

long long tuner__gemm_k_per_split(long long K, int split, int block_k)
{
    if (split < 1)
        split = 1;
    long long per = (K + split - 1) / split;
    return (per + block_k - 1) / block_k * block_k;
}

const char tuner__gemm_bytes_4x4_fn[] =
    "HD_INLINE void hd_bytes_4x4(const hd_u32 *w, hd_u32 *o) {\n"
    "const hd_u32 t0 = __byte_perm(w[0], w[1], 0x5140), t1 = __byte_perm(w[0], w[1], 0x7362);\n"
    "const hd_u32 t2 = __byte_perm(w[2], w[3], 0x5140), t3 = __byte_perm(w[2], w[3], 0x7362);\n"
    "o[0] = __byte_perm(t0, t2, 0x5410); o[1] = __byte_perm(t0, t2, 0x7632);\n"
    "o[2] = __byte_perm(t1, t3, 0x5410); o[3] = __byte_perm(t1, t3, 0x7632);\n"
    "}\n";

void tuner__gemm_emit_byte_transpose(tuner_sb *sb, const tuner_op *op, const char *name, long long rows, long long cols)
{
    /* Three steps through one padded tile of dynamic shared memory (33 words a row): each thread
     * loads four 16-byte vectors along source rows, all in flight at once; transposes four 4 x 4
     * blocks of bytes with byte permutes (lanes along the source's columns, so the reads are
     * conflict-free; the writes meet four lanes a bank) and writes them back transposed; stores
     * four 16-byte vectors along destination rows. dst is the workspace, typed as every
     * workspace parameter is. On an H200 (ncu) it moves 16 MiB in 11.0-11.3 us, 32% of DRAM's
     * peak, where 64 x 64 tiles with one vector a thread took 13.2-13.6 (too few bytes in flight);
     * 4096^3 e4m3 with B [K,N], this launch and the GEMM, 101.8 us against the in-kernel
     * transposers' 152.2 (bench/results/2026-11-30-h200-session16, c and d). */
    tuner_sb_puts(sb, tuner__gemm_bytes_4x4_fn);
    tuner_sb_printf(sb, "extern \"C\" __global__ void __launch_bounds__(256) %s(const unsigned char *__restrict__ src, "
                        "float *__restrict__ ws",
                    name);
    tuner__emit_dim_params(sb, op);
    tuner_sb_printf(sb,
                    ")\n{\n"
                    "extern __shared__ __align__(1024) unsigned char bt_smem[];\n"
                    "hd_u32 (*const t)[33] = reinterpret_cast<hd_u32 (*)[33]>(bt_smem);\n"
                    "unsigned char *const dst = reinterpret_cast<unsigned char *>(ws);\n"
                    "const long long r0 = 128LL * blockIdx.y, c0 = 128LL * blockIdx.x;\n"
                    "hd_v4 x[4];\n"
                    "#pragma unroll\nfor (int i = 0; i < 4; i++) {\n"
                    "const int e = threadIdx.x + 256 * i, r = e >> 3, v = e & 7;\n"
                    "x[i] = hd_v4{0u, 0u, 0u, 0u};\n"
                    "if (r0 + r < %lldLL && c0 + 16 * v < %lldLL)\n"
                    "x[i] = *reinterpret_cast<const hd_v4 *>(src + (r0 + r) * %lldLL + c0 + 16 * v);\n"
                    "}\n"
                    "#pragma unroll\nfor (int i = 0; i < 4; i++) {\n"
                    "const int e = threadIdx.x + 256 * i, r = e >> 3, v = e & 7;\n"
                    "t[r][4 * v] = x[i].x; t[r][4 * v + 1] = x[i].y; t[r][4 * v + 2] = x[i].z; t[r][4 * v + 3] = x[i].w;\n"
                    "}\n"
                    "__syncthreads();\n"
                    /* byte j of w[i] is (row 4 kb + i, column 4 nb + j); byte i of o[.][j] is then it */
                    "hd_u32 o[4][4];\n"
                    "#pragma unroll\nfor (int i = 0; i < 4; i++) {\n"
                    "const int b = threadIdx.x + 256 * i, nb = b & 31, kb = b >> 5;\n"
                    "const hd_u32 w[4] = {t[4 * kb][nb], t[4 * kb + 1][nb], t[4 * kb + 2][nb], t[4 * kb + 3][nb]};\n"
                    "hd_bytes_4x4(w, o[i]);\n"
                    "}\n"
                    "__syncthreads();\n"
                    "#pragma unroll\nfor (int i = 0; i < 4; i++) {\n"
                    "const int b = threadIdx.x + 256 * i, nb = b & 31, kb = b >> 5;\n"
                    "t[4 * nb][kb] = o[i][0]; t[4 * nb + 1][kb] = o[i][1]; t[4 * nb + 2][kb] = o[i][2]; t[4 * nb + 3][kb] = o[i][3];\n"
                    "}\n"
                    "__syncthreads();\n"
                    "#pragma unroll\nfor (int i = 0; i < 4; i++) {\n"
                    "const int e = threadIdx.x + 256 * i, r = e >> 3, v = e & 7;\n"
                    "if (c0 + r < %lldLL && r0 + 16 * v < %lldLL)\n"
                    "*reinterpret_cast<hd_v4 *>(dst + (c0 + r) * %lldLL + r0 + 16 * v) = "
                    "hd_v4{t[r][4 * v], t[r][4 * v + 1], t[r][4 * v + 2], t[r][4 * v + 3]};\n"
                    "}\n}\n",
                    rows, cols, cols, cols, rows, rows);
}

void tuner__gemm_set_launch(tuner_launch *l, const tuner__gemm_problem *p, const char *name, unsigned gx,
                            unsigned gy, unsigned gz, unsigned threads, unsigned smem, bool ws)
{
    memset(l, 0, sizeof(*l));
    snprintf(l->name, sizeof(l->name), "%s", name);
    l->grid[0] = gx;
    l->grid[1] = gy;
    l->grid[2] = gz;
    l->block[0] = threads;
    l->block[1] = 1;
    l->block[2] = 1;
    l->shared_bytes = smem;
    int n = 0;
    for (int i = 0; i < p->op->n_inputs; i++)
        l->args[n++] = TUNER_BUF_INPUT0 + i;
    l->args[n++] = TUNER_BUF_OUTPUT;
    if (ws)
        l->args[n++] = TUNER_BUF_WORKSPACE;
    l->n_args = n;
    /* A dynamic op's sizes follow the pointers (tuner__gemm_emit_signature); nothing for a
     * static one. They fit: tuner__gemm_problem_init refuses an op whose would not. */
    (void)tuner__launch_dim_args(l, p->op);
}

int tuner__gemm_finish(tuner_sb *sb, const tuner__gemm_problem *p, tuner_program *prog,
                       const char *name, const char *rname, int block_m, int block_n, int split,
                       bool split_in_cluster, unsigned threads, unsigned smem)
{
    const long long tiles_n = tuner__gemm_cdiv(p->N, block_n);
    const bool ws = split > 1 && !split_in_cluster;
    if (ws)
        tuner__gemm_emit_splitk_reduce(sb, p, rname, split);
    char *src = tuner_sb_take(sb);
    if (!src)
        return -ENOMEM;
    prog->source = src;
    prog->output_dtype = p->out_dt;
    const long long tiles = tuner__gemm_cdiv(p->M, block_m) * tiles_n;
    if (p->n_sym && p->m_sym)
        tuner__gemm_set_launch(&prog->kernels[0], p, name, (unsigned)tuner__gemm_cdiv(p->M, block_m),
                               (unsigned)tiles_n, (unsigned)(p->batch * split), threads, smem, ws);
    else
        tuner__gemm_set_launch(&prog->kernels[0], p, name, (unsigned)tiles, 1,
                               (unsigned)(p->batch * split), threads, smem, ws);
    prog->n_kernels = 1;
    const tuner_op *op = p->op;
    int rc = 0;
    /* A dynamic op's grids follow M (x: ceil(M / block_m) tile rows of tiles_n tiles) or the
     * batch (z: batch entries of `split` slices); their values at max are the ones above. */
    if (p->m_sym && rc == 0)
        rc = tuner__grid_rule(&prog->kernels[0], 0, op, p->m_sym, 1, block_m, p->n_sym ? 1 : tiles_n, 0);
    /* A named N: ceil(N / block_n) tile columns, times the fixed tile rows in x, or in y when M
     * is named too (a rule holds one ceiling). */
    if (p->n_sym && rc == 0)
        rc = p->m_sym ? tuner__grid_rule(&prog->kernels[0], 1, op, p->n_sym, 1, block_n, 1, 0)
                      : tuner__grid_rule(&prog->kernels[0], 0, op, p->n_sym, 1, block_n,
                                         tuner__gemm_cdiv(p->M, block_m), 0);
    if (p->batch_sym && rc == 0)
        rc = tuner__grid_rule(&prog->kernels[0], 2, op, p->batch_sym, 1, 1, split, 0);
    if (ws) {
        long long total = p->batch * p->M * p->N;
        tuner__gemm_set_launch(&prog->kernels[1], p, rname, (unsigned)((total + 255) / 256), 1, 1,
                               256, 0, true);
        prog->n_kernels = 2;
        prog->workspace_bytes = (size_t)split * (size_t)total * sizeof(float);
        /* One thread per output element: ceil(batch * M * N / 256), the fixed extents in coef. */
        if (p->dynamic && rc == 0)
            rc = tuner__grid_rule(&prog->kernels[1], 0, op, p->m_sym | p->batch_sym | p->n_sym,
                                  (p->m_sym ? 1 : p->M) * (p->batch_sym ? 1 : p->batch) * (p->n_sym ? 1 : p->N), 256,
                                  1, 0);
    }
    return rc;
}

void tuner__gemm_param(tuner_schedule *s, const char *name, int value)
{
    if (s->n_params >= TUNER_MAX_PARAMS)
        return;
    s->params[s->n_params].name = name;
    s->params[s->n_params].value = value;
    s->n_params++;
}

int tuner__gemm_push(tuner_schedule **items, size_t *n, const tuner_schedule *s)
{
    /* Grows by half, as tuner__space_push does (tuner/space.c says why: a realloc per push copies
     * the space every time, and maps a new block each time under AddressSanitizer); the room
     * left comes from malloc_usable_size, so either may append to an array the other grew. */
    tuner_schedule *p = *items;
    if (!p || malloc_usable_size(p) < (*n + 1) * sizeof(**items)) {
        p = realloc(*items, (*n + *n / 2 + 16) * sizeof(**items));
        if (!p)
            return -ENOMEM;
        *items = p;
    }
    p[*n] = *s;
    (*n)++;
    return 0;
}

void tuner__gemm_kernel_name(char *buf, size_t len, const char *tmpl, const tuner_schedule *s)
{
    size_t o = (size_t)snprintf(buf, len, "hd_%s", tmpl);
    for (int i = 0; i < s->n_params && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "_%d", s->params[i].value);
}
