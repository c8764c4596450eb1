/* tuner/attn/common.c - the attention problem and the emitters every attention template shares,
 * and the TMA maps and tile loads of the two that read with the copy engine (see
 * tuner/attn/attn.h). */
#include "tuner/attn/attn.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/core.h"
#include "tuner/hopper.h"

bool tuner__attn_supported(const tuner_op *op)
{
    if (op->kind != TUNER_OP_ATTENTION || op->n_anchor_inputs < (op->attrs.attention.packed ? 1 : 3))
        return false;
    const tuner_dtype dt = op->inputs[0].dtype;
    if (dt != TUNER_F16 && dt != TUNER_BF16)
        return false;
    if (!tuner_attention_head_dim_ok(op->inputs[0].shape[3]))
        return false;
    return tuner__no_prologue(op);
}

int tuner__attn_problem_init(const tuner_op *op, tuner__attn_problem *p, char **err)
{
    if (!tuner__attn_supported(op)) {
        if (err)
            *err = strdup("attention: the templates take f16/bf16 q, k, v of head dim 64, 80, 96, 128 or 256 "
                          "without a prologue");
        return -EINVAL;
    }
    memset(p, 0, sizeof(*p));
    p->op = op;
    p->d = tuner_attention_dims_of(op);
    p->dt = op->inputs[0].dtype;
    p->out_dt = op->output.dtype;
    p->bshd = op->attrs.attention.bshd;
    p->causal = op->attrs.attention.causal;
    p->scale = op->attrs.attention.scale;
    const tuner_attention_dims *d = &p->d;
    p->packed = op->attrs.attention.packed;
    p->mask_in = tuner_attention_mask_input(op);
    snprintf(p->q_ptr, sizeof(p->q_ptr), "in0");
    snprintf(p->k_ptr, sizeof(p->k_ptr), "in1");
    snprintf(p->v_ptr, sizeof(p->v_ptr), "in2");
    if (p->packed) {
        /* qkv [B, S, Hq + 2 Hkv, D]: q, k and v share its strides, k and v start at heads Hq and
         * Hq + Hkv; the output is a plain [B, S, Hq, D]. */
        const long long h3 = d->hq + 2 * d->hkv;
        p->q_ss = p->kv_ss = h3 * d->d;
        p->q_sh = p->kv_sh = d->d;
        p->q_sb = p->kv_sb = d->s * h3 * d->d;
        p->k_head0 = d->hq;
        p->v_head0 = d->hq + d->hkv;
        snprintf(p->k_ptr, sizeof(p->k_ptr), "(in0 + %lldLL)", p->k_head0 * d->d);
        snprintf(p->v_ptr, sizeof(p->v_ptr), "(in0 + %lldLL)", p->v_head0 * d->d);
        p->o_ss = d->hq * d->d;
        p->o_sh = d->d;
        p->o_sb = d->s * p->o_ss;
    } else if (p->bshd) {
        /* [B, S, H, D] */
        p->q_ss = d->hq * d->d;
        p->q_sh = d->d;
        p->q_sb = d->s * p->q_ss;
        p->kv_ss = d->hkv * d->d;
        p->kv_sh = d->d;
        p->kv_sb = d->skv * p->kv_ss;
    } else {
        /* [B, H, S, D] */
        p->q_ss = d->d;
        p->q_sh = d->s * d->d;
        p->q_sb = d->hq * p->q_sh;
        p->kv_ss = d->d;
        p->kv_sh = d->skv * d->d;
        p->kv_sb = d->hkv * p->kv_sh;
    }
    if (!p->packed) {
        p->o_sb = p->q_sb;
        p->o_sh = p->q_sh;
        p->o_ss = p->q_ss;
    }
    if (d->has_mask) {
        /* Right-aligned against [B, Hq, S, Skv]; a size-1 (or missing) dimension is broadcast. */
        const tuner_tensor *m = &op->inputs[p->mask_in];
        p->mask_dt = m->dtype;
        long long stride = 1;
        for (int k = 3; k >= 0; k--) {
            const int dm = m->rank - (4 - k);
            if (dm < 0) {
                p->m_st[k] = 0;
                continue;
            }
            p->m_st[k] = m->shape[dm] == 1 ? 0 : stride;
            stride *= m->shape[dm];
        }
    }
    p->causal_off = d->skv - d->s;
    if (tuner_op_is_dynamic(op)) {
        const tuner_tensor *q = &op->inputs[0], *k = &op->inputs[p->packed ? 0 : 1];
        const int seq = p->bshd ? 1 : 2;
        p->b_sym = q->sym[0];
        p->s_sym = q->sym[seq];
        p->skv_sym = k->sym[seq];
        /* bhsd: a batch entry holds H heads of S rows, a head S rows; bshd: a batch entry holds S
         * rows of H heads */
        p->q_sb_m = p->o_sb_m = p->s_sym;
        p->kv_sb_m = p->skv_sym;
        if (!p->bshd) {
            p->q_sh_m = p->o_sh_m = p->s_sym;
            p->kv_sh_m = p->skv_sym;
        }
        if (d->has_mask) {
            const tuner_tensor *m = &op->inputs[p->mask_in];
            unsigned run = 0, sq = 0;
            for (int ax = 3; ax >= 0; ax--) {
                const int dm = m->rank - (4 - ax);
                if (dm < 0)
                    continue;
                p->m_st_m[ax] = p->m_st[ax] ? run : 0;
                p->m_st_sq[ax] = p->m_st[ax] ? sq : 0;
                sq |= run & m->sym[dm];
                run |= m->sym[dm];
            }
        }
    }
    return 0;
}

bool tuner__attn_dyn_ok(const tuner_op *op)
{
    if (!tuner_op_is_dynamic(op))
        return true;
    if (op->n_inputs + 2 + op->n_dims > TUNER_MAX_ARGS || op->inputs[0].rank != 4)
        return false;
    const bool packed = op->attrs.attention.packed, bshd = op->attrs.attention.bshd || packed;
    const int seq = bshd ? 1 : 2, n_qkv = packed ? 1 : 3;
    const tuner_tensor *q = &op->inputs[0];
    const int mi = tuner_attention_mask_input(op);
    for (int i = -1; i < op->n_inputs; i++) {
        const tuner_tensor *t = i < 0 ? &op->output : &op->inputs[i];
        unsigned seen = 0;
        if (i == mi && op->n_anchor_inputs > mi)
            continue; /* tuner__names_line_up below: its names are [B, Hq, S, Skv]'s */
        for (int d = 0; d < t->rank; d++) {
            if (seen & t->sym[d])
                return false;
            seen |= t->sym[d];
        }
    }
    for (int i = 0; i < n_qkv; i++) {
        const tuner_tensor *t = &op->inputs[i];
        if (t->rank != 4 || t->sym[0] != q->sym[0] || t->sym[1 + (seq == 1)] || t->sym[3])
            return false;
        if (i == 2 && t->sym[seq] != op->inputs[1].sym[seq])
            return false;
    }
    for (int d = 0; d < 4; d++)
        if (op->output.sym[d] != q->sym[d])
            return false;
    if (op->n_anchor_inputs > mi) {
        tuner_tensor full = {.rank = 4};
        full.sym[0] = q->sym[0];
        full.sym[2] = q->sym[seq];
        full.sym[3] = op->inputs[packed ? 0 : 1].sym[seq];
        if (!tuner__names_line_up(&op->inputs[mi], &full))
            return false;
    }
    for (int i = op->n_anchor_inputs; i < op->n_inputs; i++)
        if (!tuner__names_line_up(&op->inputs[i], &op->output))
            return false;
    return true;
}

char *tuner__attn_size_expr(const tuner__attn_problem *p, char which, char *buf, size_t len)
{
    const unsigned m = which == 'b' ? p->b_sym : which == 's' ? p->s_sym : p->skv_sym;
    const long long v = which == 'b' ? p->d.b : which == 's' ? p->d.s : p->d.skv;
    if (m)
        return tuner__scaled_dims_expr(1, m, buf, len);
    snprintf(buf, len, "%lldLL", v);
    return buf;
}

double tuner__attn_pairs(const tuner__attn_problem *p)
{
    const double s = (double)p->d.s, skv = (double)p->d.skv;
    if (!p->causal)
        return s * skv;
    /* Row i keeps min(Skv, max(0, i + off + 1)) keys. */
    double n = 0;
    const long long off = p->causal_off;
    if (s <= 4096) {
        for (long long i = 0; i < p->d.s; i++) {
            long long k = i + off + 1;
            n += (double)(k < 0 ? 0 : k > p->d.skv ? p->d.skv : k);
        }
        return n;
    }
    /* Closed form for long sequences (off >= 0 there is the common case; clamp otherwise). */
    const double first = (double)off + 1, last = (double)(p->d.s - 1 + off + 1);
    if (first >= 0 && last <= skv)
        return s * (first + last) / 2;
    for (long long i = 0; i < p->d.s; i++) {
        long long k = i + off + 1;
        n += (double)(k < 0 ? 0 : k > p->d.skv ? p->d.skv : k);
    }
    return n;
}

double tuner__attn_flops(const tuner__attn_problem *p)
{
    return 4.0 * (double)p->d.b * (double)p->d.hq * tuner__attn_pairs(p) * (double)p->d.d;
}

double tuner__attn_min_bytes(const tuner__attn_problem *p)
{
    const tuner_op *op = p->op;
    double bytes = 0;
    for (int i = 0; i < op->n_inputs; i++)
        bytes += (double)tuner_tensor_numel(&op->inputs[i]) * tuner_dtype_size(op->inputs[i].dtype);
    return bytes + (double)tuner_tensor_numel(&op->output) * tuner_dtype_size(p->out_dt);
}

/* The mask's stride along axis k (b, h, i, j): like tuner__attn_stride_expr, with the dims in
 * m_st_sq[k] entering squared. */
static const char *mask_stride_expr(const tuner__attn_problem *p, int k, char *buf, size_t len)
{
    const unsigned m = p->m_st_m[k], sq = p->m_st_sq[k];
    if (!sq)
        return tuner__attn_stride_expr(p, p->m_st[k], m, buf, len);
    long long named = 1;
    for (int d = 0; d < p->op->n_dims && d < TUNER_MAX_DIMS; d++)
        named *= (m & (1u << d) ? p->op->dims[d].max : 1) * (sq & (1u << d) ? p->op->dims[d].max : 1);
    size_t at = (size_t)snprintf(buf, len, "(%lldLL * (", p->m_st[k] / named);
    bool first = true;
    for (int d = 0; d < TUNER_MAX_DIMS && at < len; d++)
        for (int rep = 0; rep < ((m & (1u << d)) ? 1 : 0) + ((sq & (1u << d)) ? 1 : 0) && at < len; rep++) {
            at += (size_t)snprintf(buf + at, len - at, "%shd_dim%d", first ? "" : " * ", d);
            first = false;
        }
    if (at < len)
        snprintf(buf + at, len - at, "))");
    return buf;
}

const char *tuner__attn_stride_expr(const tuner__attn_problem *p, long long v, unsigned m, char *buf, size_t len)
{
    if (!m) {
        snprintf(buf, len, "%lldLL", v);
        return buf;
    }
    long long named = 1;
    for (int k = 0; k < p->op->n_dims && k < TUNER_MAX_DIMS; k++)
        if (m & (1u << k))
            named *= p->op->dims[k].max;
    return tuner__scaled_dims_expr(v / named, m, buf, len);
}

/* "((b) * sb + (h) * sh + (i) * ss + (c))" as a long long expression (malloc'd; NULL on OOM). */
static char *offset_expr(const tuner__attn_problem *p, const char *b, long long sb, unsigned sbm, const char *h,
                         long long sh, unsigned shm, const char *i, long long ss, const char *c)
{
    char eb[96], eh[96];
    tuner_sb e;
    tuner_sb_init(&e);
    tuner_sb_printf(&e, "((long long)(%s) * %s + (long long)(%s) * %s + (long long)(%s) * %lldLL + (%s))", b,
                    tuner__attn_stride_expr(p, sb, sbm, eb, sizeof(eb)), h, tuner__attn_stride_expr(p, sh, shm, eh, sizeof(eh)), i, ss, c);
    return tuner_sb_take(&e);
}

char *tuner__attn_q_offset(const tuner__attn_problem *p, const char *b, const char *h, const char *i, const char *c)
{
    return offset_expr(p, b, p->q_sb, p->q_sb_m, h, p->q_sh, p->q_sh_m, i, p->q_ss, c);
}

char *tuner__attn_kv_offset(const tuner__attn_problem *p, const char *b, const char *hk, const char *j,
                            const char *c)
{
    return offset_expr(p, b, p->kv_sb, p->kv_sb_m, hk, p->kv_sh, p->kv_sh_m, j, p->kv_ss, c);
}

char *tuner__attn_out_offset(const tuner__attn_problem *p, const char *b, const char *h, const char *i, const char *c)
{
    return offset_expr(p, b, p->o_sb, p->o_sb_m, h, p->o_sh, p->o_sh_m, i, p->o_ss, c);
}

char *tuner__attn_mask_value(const tuner__attn_problem *p, const char *b, const char *h, const char *i, const char *j)
{
    tuner_sb sb;
    tuner_sb_init(&sb);
    tuner_sb_printf(&sb, "hd_f32(in%d[0LL", p->mask_in);
    const char *coord[4] = {b, h, i, j};
    char st[96];
    for (int k = 0; k < 4; k++)
        if (p->m_st[k])
            tuner_sb_printf(&sb, " + (long long)(%s) * %s", coord[k], mask_stride_expr(p, k, st, sizeof(st)));
    tuner_sb_puts(&sb, "])");
    return tuner_sb_take(&sb);
}

char *tuner__attn_mask_log2(const tuner__attn_problem *p, const char *b, const char *h, const char *i, const char *j)
{
    char *mv = tuner__attn_mask_value(p, b, h, i, j);
    if (!mv)
        return NULL;
    tuner_sb e;
    tuner_sb_init(&e);
    /* -FLT_MAX / log2(e) is -2.35865e38; -2.358e38 keeps the product (-3.4019e38) a little inside
     * the range, so that its rounding cannot overflow either. */
    tuner_sb_printf(&e, "(%s == -HD_INF ? -HD_INF : 1.4426950408889634f * fmaxf(%s, -2.358e38f))", mv, mv);
    free(mv);
    return tuner_sb_take(&e);
}

void tuner__attn_emit_params(tuner_sb *sb, const tuner__attn_problem *p)
{
    tuner__emit_params(sb, p->op, p->out_dt);
}

void tuner__attn_emit_store(tuner_sb *sb, const tuner__attn_problem *p, const char *b, const char *h, const char *i,
                            const char *c, const char *const *vars, int nv)
{
    const tuner_op *op = p->op;
    char *off = tuner__attn_out_offset(p, b, h, i, c);
    tuner_sb_printf(sb, "{\nfloat hd_sv[%d] = {", nv);
    for (int k = 0; k < nv; k++)
        tuner_sb_printf(sb, "%s%s", k ? ", " : "", vars[k]);
    tuner_sb_puts(sb, "};\n");
    if (op->epilogue.n > 0) {
        /* The output's leading index, as tuner__bcast_offset names an element: (b, h, i) in the
         * bhsd order, (b, i, h) in the bshd one. */
        char se[96];
        tuner__attn_size_expr(p, 's', se, sizeof(se));
        if (p->bshd)
            tuner_sb_printf(sb, "const long long hd_sr = ((long long)(%s) * %s + (%s)) * %lldLL + (%s);\n", b, se, i,
                            (long long)p->d.hq, h);
        else
            tuner_sb_printf(sb, "const long long hd_sr = ((long long)(%s) * %lldLL + (%s)) * %s + (%s);\n", b,
                            (long long)p->d.hq, h, se, i);
        for (int k = 0; k < nv; k++) {
            char col[160], var[32];
            snprintf(col, sizeof(col), "(%s) + %d", c, k);
            snprintf(var, sizeof(var), "hd_sv[%d]", k);
            tuner__bcast_ctx bc = {.op = op, .row = "hd_sr", .col = col};
            tuner_sb_puts(sb, "{\n");
            tuner__emit_chain(sb, op, &op->epilogue, var, tuner__bcast_load, &bc);
            tuner_sb_puts(sb, "}\n");
        }
    }
    /* hd_stn_f32 vectorises 4 and 8 16-bit elements (8 and 16 bytes) and 4 floats; a pair is
     * written here as one 4- or 8-byte store, which it would split into two. */
    const int esz = tuner_dtype_size(p->out_dt);
    if (nv == 2 && esz == 2)
        tuner_sb_printf(sb, "*reinterpret_cast<hd_u32 *>(out + %s) = hd_pack2<%s>(hd_sv[0], hd_sv[1]);\n}\n", off,
                        tuner__ctype(p->out_dt));
    else if (nv == 2 && esz == 4)
        tuner_sb_printf(sb, "{\nhd_v2 hd_pk;\nhd_pk.x = __float_as_uint(hd_sv[0]);\nhd_pk.y = __float_as_uint(hd_sv[1]);\n"
                            "hd_st8(out + %s, hd_pk);\n}\n}\n",
                        off);
    else
        tuner_sb_printf(sb, "hd_stn_f32<%s, %d>(out + %s, hd_sv);\n}\n", tuner__ctype(p->out_dt), nv, off);
    free(off);
}

/* ---- the Hopper templates' K/V (and Q) tensor maps ---------------------------------------- */

unsigned tuner__attn_rows_sym(const tuner__attn_problem *p, int which)
{
    return which == 0 ? p->s_sym : p->skv_sym;
}

bool tuner__attn_map_flat(const tuner__attn_problem *p, int which)
{
    return tuner__attn_rows_sym(p, which) != 0;
}

tuner_tmap tuner__attn_tmap(const tuner__attn_problem *p, int which, uint32_t box_rows)
{
    const tuner_attention_dims *d = &p->d;
    const uint64_t esz = 2, rows = which == 0 ? (uint64_t)d->s : (uint64_t)d->skv;
    /* Packed: the three maps are one map of the whole qkv (its real strides, its own extent),
     * the loads of k and v offset by their first head (tuner__attn_emit_tile_load's callers). */
    const uint64_t heads = p->packed ? (uint64_t)(d->hq + 2 * d->hkv) : which == 0 ? (uint64_t)d->hq : (uint64_t)d->hkv;
    uint64_t dims[4], strides[3];
    uint32_t box[4];
    const uint64_t row = (uint64_t)d->d * esz;
    dims[0] = (uint64_t)d->d;
    dims[3] = (uint64_t)d->b;
    box[0] = 64;
    box[3] = 1;
    if (p->bshd) {
        dims[1] = heads;
        dims[2] = rows;
        strides[0] = row;
        strides[1] = row * heads;
        box[1] = 1;
        box[2] = box_rows;
    } else {
        dims[1] = rows;
        dims[2] = heads;
        strides[0] = row;
        strides[1] = row * rows;
        box[1] = box_rows;
        box[2] = 1;
    }
    strides[2] = row * rows * heads;
    const int buf = TUNER_BUF_INPUT0 + (p->packed ? 0 : which);
    if (!tuner__attn_map_flat(p, which)) {
        tuner_tmap m = tuner__hopper_tmap_tiled(buf, p->dt, 4, dims, strides, box);
        if (p->b_sym) { /* a named batch alone: the outermost dimension, at the launch's B */
            m.sym[3] = (uint8_t)p->b_sym;
            m.sym_coef[3] = 1;
        }
        return m;
    }
    /* Named rows: bshd's (D, heads, B * rows), bhsd's (D, B * heads * rows), encoded at the
     * launch's B and rows times the fixed factors (B's, when it has no name). */
    const unsigned sym = p->b_sym | tuner__attn_rows_sym(p, which);
    const uint64_t fixed_b = p->b_sym ? 1 : (uint64_t)d->b;
    tuner_tmap m;
    if (p->bshd) {
        dims[2] = rows * (uint64_t)d->b;
        m = tuner__hopper_tmap_tiled(buf, p->dt, 3, dims, strides, box);
        m.sym[2] = (uint8_t)sym;
        m.sym_coef[2] = fixed_b;
    } else {
        dims[1] = rows * heads * (uint64_t)d->b;
        m = tuner__hopper_tmap_tiled(buf, p->dt, 2, dims, strides, box);
        m.sym[1] = (uint8_t)sym;
        m.sym_coef[1] = heads * fixed_b;
    }
    return m;
}

void tuner__attn_emit_tile_load(tuner_sb *sb, const tuner__attn_problem *p, int which, int boxes, const char *dst,
                                const char *map, const char *r0, const char *h, const char *bi, const char *seq, int rows,
                                const char *bar)
{
    const long long heads = which == 0 ? p->d.hq : p->d.hkv;
    for (int x = 0; x < boxes; x++) {
        if (tuner__attn_map_flat(p, which) && p->bshd)
            tuner_sb_printf(sb, "wg_tma3(%s + %d, %s, %d, %s, %s * %s + %s, %s);\n", dst, x * rows * 128, map, 64 * x, h,
                            bi, seq, r0, bar);
        else if (tuner__attn_map_flat(p, which))
            tuner_sb_printf(sb, "wg_tma2(%s + %d, %s, %d, (%s * %lld + %s) * %s + %s, %s);\n", dst, x * rows * 128, map,
                            64 * x, bi, heads, h, seq, r0, bar);
        else if (p->bshd)
            tuner_sb_printf(sb, "wg_tma4(%s + %d, %s, %d, %s, %s, %s, %s);\n", dst, x * rows * 128, map, 64 * x, h, r0,
                            bi, bar);
        else
            tuner_sb_printf(sb, "wg_tma4(%s + %d, %s, %d, %s, %s, %s, %s);\n", dst, x * rows * 128, map, 64 * x, r0, h,
                            bi, bar);
    }
}
