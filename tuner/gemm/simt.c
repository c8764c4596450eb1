/* tuner/gemm/simt.c - matmul_simt / conv2d_simt (fp32 FMA on CUDA cores, any dtype, any
 * alignment) and matmul_tf32 (mma.sync m16n8k8 tf32 for fp32 inputs when allow_tf32).
 *
 * Both share one register-staged, double-buffered loader: each thread fetches its elements of
 * the next A/B tiles (repeat(iters) * spatial(threads) over the tile, consecutive threads on the
 * contiguous global dimension) into registers while the current tile is consumed, then converts
 * them to fp32 (prologue applied, rounded to the input dtype like every other template) into
 * shared tiles stored k-major ([block_k][block_m + pad]). Element loads make these templates
 * valid for every shape and alignment: they are the fallback where tensor-core paths are not.
 *  - SIMT: spatial(block_m / thread_m, block_n / thread_n) threads, each a strided
 *    thread_m x thread_n register tile (rows ty + i * block_m / thread_m), so a warp reads
 *    B with consecutive addresses and A as broadcasts, and stores coalesce.
 *  - tf32: spatial(warps_m, warps_n) warps of m16n8k8 tiles; fragments read with scalar shared
 *    loads (pad 8 makes the 8x4 fragment pattern hit 32 distinct banks) and rounded with
 *    cvt.rna.tf32.f32.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/gemm/gemm.h"
#include "tuner/mapping.h"

typedef struct f_cfg {
    bool tf32;
    int bm, bn, bk, tm, tn; /* tf32: tm/tn are warp_m/warp_n */
    int split, group;
    int threads, pad, smem, regs;
} f_cfg;

static int f_iters(const f_cfg *c, int which)
{
    return tuner__gemm_cdiv((long long)(which == 0 ? c->bm : c->bn) * c->bk, c->threads);
}

static int f_cfg_from(bool tf32, const tuner_schedule *s, f_cfg *c)
{
    memset(c, 0, sizeof(*c));
    c->tf32 = tf32;
    c->bm = tuner_schedule_param(s, "block_m", 0);
    c->bn = tuner_schedule_param(s, "block_n", 0);
    c->bk = tuner_schedule_param(s, "block_k", 0);
    c->tm = tuner_schedule_param(s, tf32 ? "warp_m" : "thread_m", 0);
    c->tn = tuner_schedule_param(s, tf32 ? "warp_n" : "thread_n", 0);
    c->split = tuner_schedule_param(s, "split_k", 1);
    c->group = tuner_schedule_param(s, "swizzle", 1);
    if (c->bm < 1 || c->bn < 1 || c->bk < 1 || c->tm < 1 || c->tn < 1 || c->split < 1 || c->group < 1)
        return -EINVAL;
    if (c->bm % c->tm || c->bn % c->tn)
        return -EINVAL;
    if (tf32) {
        if (c->tm % 16 || c->tn % 8 || c->bk % 8)
            return -EINVAL;
        c->threads = 32 * (c->bm / c->tm) * (c->bn / c->tn);
        c->pad = 8;
        c->regs = (c->tm / 16) * (c->tn / 8) * 4 + (c->tm / 16) * 4 + (c->tn / 8) * 2 + 40;
    } else {
        c->threads = (c->bm / c->tm) * (c->bn / c->tn);
        c->pad = 1;
        c->regs = c->tm * c->tn + c->tm + c->tn + 36;
    }
    c->regs += f_iters(c, 0) + f_iters(c, 1);
    c->smem = 2 * c->bk * (c->bm + c->bn + 2 * c->pad) * 4;
    return 0;
}

static bool f_valid(const tuner__gemm_problem *p, const tuner_arch *a, const f_cfg *c)
{
    if (c->threads < 64 || c->threads > 256)
        return false;
    if (c->smem > a->max_smem_per_block || c->regs > a->max_regs_per_thread ||
        (long)c->regs * c->threads > a->regs_per_sm)
        return false;
    if (p->batch * c->split > 65535)
        return false;
    if ((long long)tuner__gemm_cdiv(p->M, c->bm) * tuner__gemm_cdiv(p->N, c->bn) > 0x7fffffffLL)
        return false;
    /* A named N's tile columns are the grid's y (tuner__gemm_emit_raster). */
    if (p->n_sym && tuner__gemm_cdiv(p->N, c->bn) > 65535)
        return false;
    /* M and N named alike (q @ k^T): the split-K reduction's grid would be a square of the
     * size, which a grid rule does not express. */
    if (c->split > 1 && (p->m_sym & p->n_sym))
        return false;
    return true;
}

/* Element (gm_row, gm_col) of unit q of operand `which`'s tile, in GEMM coordinates. */
static void f_unit(tuner_sb *sb, const tuner__gemm_problem *p, const f_cfg *c, int which)
{
    const int mnt = which == 0 ? c->bm : c->bn;
    const char *mn0 = which == 0 ? "gm_m0" : "gm_n0";
    /* Consecutive units walk the dimension that is contiguous in global memory. */
    if (p->kmajor[which])
        tuner_sb_printf(sb, "const int gm_kk = gm_q %% %d, gm_mm = gm_q / %d;\n", c->bk, c->bk);
    else
        tuner_sb_printf(sb, "const int gm_mm = gm_q %% %d, gm_kk = gm_q / %d;\n", mnt, mnt);
    char mn[48];
    snprintf(mn, sizeof(mn), "%s + gm_mm", mn0);
    tuner__gemm_emit_operand(sb, p, which, "g", "gm_zb", mn, "gm_kb + gm_kk", "gm_kend");
}

static void f_loader(tuner_sb *sb, const tuner__gemm_problem *p, const f_cfg *c, int which, bool store)
{
    const int mnt = which == 0 ? c->bm : c->bn, iters = f_iters(c, which), total = mnt * c->bk;
    const char *X = which == 0 ? "a" : "b";
    char tmp[16];
    snprintf(tmp, sizeof(tmp), "fl%s%d", X, store ? 1 : 0);
    tuner_mapping m = tuner_map_compose(tuner_map_repeat(1, iters, 1, 1), tuner_map_spatial(1, c->threads, 1, 1));
    const char *names[TUNER_MAP_MAX_RANK] = {"gm_q", NULL, NULL};
    tuner_sb_puts(sb, "{\nint gm_it = 0;\n");
    tuner_map_emit_begin(sb, &m, "threadIdx.x", tmp, names);
    tuner_sb_printf(sb, "if (gm_q < %d) {\n", total);
    f_unit(sb, p, c, which);
    if (!store) {
        tuner_sb_printf(sb, "gm_r%s[gm_it] = g_ok ? in%d[g_off] : %s{};\n", X, which, tuner__ctype(p->dt));
    } else {
        tuner_sb_printf(sb, "float gm_v = hd_f32(gm_r%s[gm_it]);\n", X);
        if (p->prologue[which]) {
            tuner_sb_puts(sb, "if (g_ok) {\n");
            tuner__gemm_emit_prologue(sb, p, which, "g", "gm_v");
            if (p->dt == TUNER_F16)
                tuner_sb_puts(sb, "gm_v = hd_round_f16(gm_v);\n");
            else if (p->dt == TUNER_BF16)
                tuner_sb_puts(sb, "gm_v = hd_round_bf16(gm_v);\n");
            tuner_sb_puts(sb, "}\n");
        }
        tuner_sb_printf(sb, "gm_s%s[gm_kk * %d + gm_mm] = gm_v;\n", X, mnt + c->pad);
    }
    tuner_sb_puts(sb, "}\ngm_it++;\n");
    tuner_map_emit_end(sb, &m);
    tuner_sb_puts(sb, "}\n");
}

static void f_store_acc(tuner_sb *sb, const tuner__gemm_problem *p, const f_cfg *c, const char *m, const char *n,
                        const char *v)
{
    if (c->split > 1) {
        tuner_sb_printf(sb,
                        "{ const int wm_ = %s, wn_ = %s; if (wm_ < %s && wn_ < %s) "
                        "ws[(((long long)gm_zs * %s + gm_zb) * %s + wm_) * %s%s%s + wn_] = %s; }\n",
                        m, n, tuner__gemm_M(p, 0).s, tuner__gemm_N(p, 0).s, tuner__gemm_B(p).s, tuner__gemm_M(p, 0).s,
                        p->n_sym ? "(long long)" : "", tuner__gemm_N(p, 0).s, p->n_sym ? "" : "LL", v);
        return;
    }
    const char *vv[1] = {v};
    tuner__gemm_emit_store(sb, p, "gm_zb", m, n, vv, 1);
}

static int f_emit(const tuner__gemm_problem *p, const tuner_target *t, const tuner_schedule *s, bool tf32,
                  const char *tmpl, tuner_program *prog, char **err)
{
    const tuner_arch *a = tuner__arch(t);
    f_cfg c;
    if (!a || f_cfg_from(tf32, s, &c) < 0 || !f_valid(p, a, &c) || (tf32 && p->dt != TUNER_F32)) {
        if (err)
            *err = strdup("invalid schedule for this op and target");
        return -EINVAL;
    }
    const int tiles_m = tuner__gemm_cdiv(p->M, c.bm);
    const long long kps = tuner__gemm_k_per_split(p->K, c.split, c.bk);
    const int la = c.bm + c.pad, lb = c.bn + c.pad;
    const int stage_floats = c.bk * (la + lb);
    char name[56], rname[64];
    tuner__gemm_kernel_name(name, sizeof(name), tmpl, s);
    snprintf(rname, sizeof(rname), "%s_red", name);

    tuner_sb sb;
    tuner_sb_init(&sb);
    tuner__gemm_emit_head(&sb, t);
    tuner__gemm_emit_signature(&sb, p, name, c.threads, c.split > 1, 1);
    tuner_sb_puts(&sb, "extern __shared__ __attribute__((aligned(16))) float gm_fsmem[];\n"
                       "const int lane = threadIdx.x & 31;\n");
    tuner__gemm_emit_raster(&sb, p, tiles_m, c.bm, c.bn, c.group);
    tuner_sb_printf(&sb,
                    "const int gm_zb = blockIdx.z / %d, gm_zs = blockIdx.z %% %d;\n"
                    "const int gm_m0 = gm_tm * %d, gm_n0 = gm_tn * %d;\n",
                    c.split, c.split, c.bm, c.bn);
    if (p->k_sym)
        /* A named K: the slices are cut from the launch's K as tuner__gemm_k_per_split cuts a
         * fixed one (whole block_k tiles; the last slices may be empty). */
        tuner_sb_printf(&sb,
                        "const int gm_kps = ((gm_K + %d) / %d + %d) / %d * %d;\n"
                        "const int gm_kbeg = gm_zs * gm_kps;\n"
                        "const int gm_kend = min(gm_K, gm_kbeg + gm_kps);\n",
                        c.split - 1, c.split, c.bk - 1, c.bk, c.bk);
    else
        tuner_sb_printf(&sb,
                        "const int gm_kbeg = gm_zs * %lld;\n"
                        "const int gm_kend = (int)min(%lldLL, (long long)gm_kbeg + %lldLL);\n",
                        kps, p->K, kps);
    tuner_sb_printf(&sb, "const int gm_ktiles = gm_kend > gm_kbeg ? (gm_kend - gm_kbeg + %d) / %d : 0;\n", c.bk - 1,
                    c.bk);
    tuner_sb_printf(&sb, "%s gm_ra[%d];\n%s gm_rb[%d];\n", tuner__ctype(p->dt), f_iters(&c, 0), tuner__ctype(p->dt),
                    f_iters(&c, 1));
    tuner_sb_printf(&sb, "auto gm_gload = [&](int gm_kt) {\nconst int gm_kb = gm_kbeg + gm_kt * %d;\n", c.bk);
    f_loader(&sb, p, &c, 0, false);
    f_loader(&sb, p, &c, 1, false);
    tuner_sb_puts(&sb, "};\n");
    tuner_sb_printf(&sb,
                    "auto gm_sstore = [&](float *gm_sa, int gm_kt) {\nconst int gm_kb = gm_kbeg + gm_kt * %d;\n"
                    "float *gm_sb = gm_sa + %d;\n",
                    c.bk, c.bk * la);
    f_loader(&sb, p, &c, 0, true);
    f_loader(&sb, p, &c, 1, true);
    tuner_sb_puts(&sb, "};\n");

    tuner_mapping tmap;
    const char *tnames[TUNER_MAP_MAX_RANK] = {NULL, NULL, NULL};
    if (tf32) {
        const int mi = c.tm / 16, ni = c.tn / 8;
        tmap = tuner_map_spatial(2, c.bm / c.tm, c.bn / c.tn, 1);
        tnames[0] = "gm_wm";
        tnames[1] = "gm_wn";
        tuner_map_emit_begin(&sb, &tmap, "threadIdx.x >> 5", "gw", tnames);
        tuner_sb_printf(&sb, "float acc[%d][%d][4];\n#pragma unroll\nfor (int i = 0; i < %d; i++)\n#pragma unroll\n"
                             "for (int j = 0; j < %d; j++)\n#pragma unroll\nfor (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;\n",
                        mi, ni, mi, ni);
        /* m16n8k8 tf32 fragments: A (g, t) (g + 8, t) (g, t + 4) (g + 8, t + 4); B (t, g) (t + 4, g);
         * g = lane / 4, t = lane % 4; rows of A/B tiles here are k. */
        tuner_sb_printf(&sb,
                        "auto gm_compute = [&](const float *gm_sa) {\nconst float *gm_sb = gm_sa + %d;\n"
                        "const int fg = lane >> 2, ft = lane & 3;\n"
                        "#pragma unroll\nfor (int ks = 0; ks < %d; ks += 8) {\n"
                        "hd_u32 fa[%d][4], fb[%d][2];\n"
                        "#pragma unroll\nfor (int i = 0; i < %d; i++) {\n"
                        "const float *pa = gm_sa + (ks + ft) * %d + gm_wm * %d + i * 16 + fg;\n"
                        "fa[i][0] = hd_to_tf32(pa[0]); fa[i][1] = hd_to_tf32(pa[8]);\n"
                        "fa[i][2] = hd_to_tf32(pa[4 * %d]); fa[i][3] = hd_to_tf32(pa[4 * %d + 8]);\n}\n"
                        "#pragma unroll\nfor (int j = 0; j < %d; j++) {\n"
                        "const float *pb = gm_sb + (ks + ft) * %d + gm_wn * %d + j * 8 + fg;\n"
                        "fb[j][0] = hd_to_tf32(pb[0]); fb[j][1] = hd_to_tf32(pb[4 * %d]);\n}\n"
                        "#pragma unroll\nfor (int i = 0; i < %d; i++)\n#pragma unroll\nfor (int j = 0; j < %d; j++)\n"
                        "hd_mma_tf32_1688(acc[i][j], fa[i], fb[j]);\n}\n};\n",
                        c.bk * la, c.bk, mi, ni, mi, la, c.tm, la, la, ni, lb, c.tn, lb, mi, ni);
    } else {
        const int rm = c.bm / c.tm, rn = c.bn / c.tn;
        tmap = tuner_map_spatial(2, rm, rn, 1);
        tnames[0] = "gm_ty";
        tnames[1] = "gm_tx";
        tuner_map_emit_begin(&sb, &tmap, "threadIdx.x", "gt", tnames);
        tuner_sb_printf(&sb, "float acc[%d][%d];\n#pragma unroll\nfor (int i = 0; i < %d; i++)\n#pragma unroll\n"
                             "for (int j = 0; j < %d; j++) acc[i][j] = 0.0f;\n",
                        c.tm, c.tn, c.tm, c.tn);
        tuner_sb_printf(&sb,
                        "auto gm_compute = [&](const float *gm_sa) {\nconst float *gm_sb = gm_sa + %d;\n"
                        "#pragma unroll\nfor (int k = 0; k < %d; k++) {\nfloat fa[%d], fb[%d];\n"
                        "#pragma unroll\nfor (int i = 0; i < %d; i++) fa[i] = gm_sa[k * %d + gm_ty + i * %d];\n"
                        "#pragma unroll\nfor (int j = 0; j < %d; j++) fb[j] = gm_sb[k * %d + gm_tx + j * %d];\n"
                        "#pragma unroll\nfor (int i = 0; i < %d; i++)\n#pragma unroll\nfor (int j = 0; j < %d; j++) "
                        "acc[i][j] = fmaf(fa[i], fb[j], acc[i][j]);\n}\n};\n",
                        c.bk * la, c.bk, c.tm, c.tn, c.tm, la, rm, c.tn, lb, rn, c.tm, c.tn);
    }
    /* Two shared buffers, one barrier per tile (see the register-staged path in mma.c). */
    tuner_sb_printf(&sb,
                    "if (gm_ktiles > 0) {\ngm_gload(0);\ngm_sstore(gm_fsmem, 0);\n__syncthreads();\n}\n"
                    "for (int kt = 0; kt < gm_ktiles; kt++) {\n"
                    "float *gm_cur = gm_fsmem + (kt & 1) * %d, *gm_nxt = gm_fsmem + ((kt + 1) & 1) * %d;\n"
                    "if (kt + 1 < gm_ktiles) gm_gload(kt + 1);\n"
                    "gm_compute(gm_cur);\n"
                    "if (kt + 1 < gm_ktiles) gm_sstore(gm_nxt, kt + 1);\n"
                    "__syncthreads();\n}\n",
                    stage_floats, stage_floats);
    if (tf32) {
        tuner_sb_printf(&sb,
                        "#pragma unroll\nfor (int i = 0; i < %d; i++)\n#pragma unroll\nfor (int j = 0; j < %d; j++)\n"
                        "#pragma unroll\nfor (int e = 0; e < 4; e++) {\n"
                        "const int em = gm_m0 + gm_wm * %d + i * 16 + (lane >> 2) + (e >> 1) * 8;\n"
                        "const int en = gm_n0 + gm_wn * %d + j * 8 + (lane & 3) * 2 + (e & 1);\n",
                        c.tm / 16, c.tn / 8, c.tm, c.tn);
        f_store_acc(&sb, p, &c, "em", "en", "acc[i][j][e]");
        tuner_sb_puts(&sb, "}\n");
    } else {
        tuner_sb_printf(&sb,
                        "#pragma unroll\nfor (int i = 0; i < %d; i++)\n#pragma unroll\nfor (int j = 0; j < %d; j++) {\n"
                        "const int em = gm_m0 + gm_ty + i * %d, en = gm_n0 + gm_tx + j * %d;\n",
                        c.tm, c.tn, c.bm / c.tm, c.bn / c.tn);
        f_store_acc(&sb, p, &c, "em", "en", "acc[i][j]");
        tuner_sb_puts(&sb, "}\n");
    }
    tuner_map_emit_end(&sb, &tmap);
    tuner_sb_puts(&sb, "}\n");
    return tuner__gemm_finish(&sb, p, prog, name, rname, c.bm, c.bn, c.split, false,
                              (unsigned)c.threads, (unsigned)c.smem);
}

/* ---- spaces ---- */

#define SIMT_SIG                                                                                        \
    "simt v2: bm,bn{32,64,128} bk8 tm,tn{2,4,8} threads 64..256 tm*tn>=8 split{1,4} swz8; "             \
    "fp32, or 16-bit where mma does not apply; register-staged element loads, fp32 smem pad 1"
#define TF32_SIG                                                                                        \
    "tf32 m16n8k8 v2: bm,bn{32,64,128} bk{16,32} wm{32,64} wn{32,64} threads 64..256 split{1,4} swz8; "      \
    "register-staged element loads, fp32 smem pad 8"

static bool same_params(const tuner_schedule *x, const tuner_schedule *y)
{
    if (x->n_params != y->n_params)
        return false;
    for (int i = 0; i < x->n_params; i++)
        if (x->params[i].value != y->params[i].value)
            return false;
    return true;
}

static int f_enumerate(const tuner_op *op, const tuner_target *t, tuner_schedule **items, size_t *n, bool tf32)
{
    tuner__gemm_problem p;
    const tuner_arch *a = tuner__arch(t);
    if (!a || tuner__gemm_problem_init(op, &p, NULL) < 0)
        return 0;
    const char *tmpl = tf32 ? "matmul_tf32" : p.conv ? "conv2d_simt" : "matmul_simt";
    /* The preferred schedule (tune:"none") first: 128x128 tiles, 8 warps (tf32: 64x32 warp
     * tiles, block_k 16; SIMT: 8x8 thread tiles, block_k 8: few staged elements per thread, no
     * spills), no split. */
    tuner_schedule pref = {.template_name = tmpl};
    tuner__gemm_param(&pref, "block_m", 128);
    tuner__gemm_param(&pref, "block_n", 128);
    tuner__gemm_param(&pref, "block_k", tf32 ? 16 : 8);
    tuner__gemm_param(&pref, tf32 ? "warp_m" : "thread_m", tf32 ? 64 : 8);
    tuner__gemm_param(&pref, tf32 ? "warp_n" : "thread_n", tf32 ? 32 : 8);
    tuner__gemm_param(&pref, "split_k", 1);
    tuner__gemm_param(&pref, "swizzle", 8);
    f_cfg pc;
    const bool have_pref = f_cfg_from(tf32, &pref, &pc) == 0 && f_valid(&p, a, &pc);
    if (have_pref) {
        int rc = tuner__gemm_push(items, n, &pref);
        if (rc < 0)
            return rc;
    }
    static const int mns[] = {32, 64, 128};
    static const int tts[] = {2, 4, 8};
    /* tf32 warp tiles of 32 or 64 (m16n8k8 needs the reuse): {16, 32, 64}[1..2]. */
    static const int wts[] = {16, 32, 64};
    for (int im = 0; im < 3; im++)
        for (int in = 0; in < 3; in++)
            for (int bk = tf32 ? 16 : 8; bk <= (tf32 ? 32 : 8); bk *= 2)
                for (int x = tf32 ? 1 : 0; x < 3; x++)
                    for (int y = tf32 ? 1 : 0; y < 3; y++)
                        for (int sp = 1; sp <= 4; sp *= 4) {
                            tuner_schedule s = {.template_name = tmpl};
                            tuner__gemm_param(&s, "block_m", mns[im]);
                            tuner__gemm_param(&s, "block_n", mns[in]);
                            tuner__gemm_param(&s, "block_k", bk);
                            tuner__gemm_param(&s, tf32 ? "warp_m" : "thread_m", tf32 ? wts[x] : tts[x]);
                            tuner__gemm_param(&s, tf32 ? "warp_n" : "thread_n", tf32 ? wts[y] : tts[y]);
                            tuner__gemm_param(&s, "split_k", sp);
                            tuner__gemm_param(&s, "swizzle", 8);
                            f_cfg c;
                            if (f_cfg_from(tf32, &s, &c) < 0 || !f_valid(&p, a, &c))
                                continue;
                            if (!tf32 && c.tm * c.tn < 8)
                                continue;
                            if (have_pref && same_params(&s, &pref))
                                continue;
                            int rc = tuner__gemm_push(items, n, &s);
                            if (rc < 0)
                                return rc;
                        }
    return 0;
}

static int simt_enumerate(const tuner_op *op, const tuner_target *t, tuner_schedule **items, size_t *n)
{
    return f_enumerate(op, t, items, n, false);
}

static int tf32_enumerate(const tuner_op *op, const tuner_target *t, tuner_schedule **items, size_t *n)
{
    return f_enumerate(op, t, items, n, true);
}

/* SIMT is the fp32 template, and the fallback for 16-bit dtypes only where the tensor-core
 * template does not apply (it has a register-staged path for every alignment), so that a 16-bit
 * space stays within a few hundred candidates. */
static bool simt_applies_kind(const tuner_op *op, const tuner_target *t, tuner_op_kind k)
{
    tuner__gemm_problem p;
    if (!op || op->kind != k || !tuner__arch(t) || tuner__gemm_problem_init(op, &p, NULL) != 0)
        return false;
    if (p.dt == TUNER_F32)
        return true;
    const tuner_template *mma = k == TUNER_OP_MATMUL ? &tuner__gemm_matmul_mma : &tuner__gemm_conv2d_mma;
    return !mma->applies(op, t);
}

static bool matmul_simt_applies(const tuner_op *op, const tuner_target *t)
{
    return simt_applies_kind(op, t, TUNER_OP_MATMUL);
}

static bool conv_simt_applies(const tuner_op *op, const tuner_target *t)
{
    return simt_applies_kind(op, t, TUNER_OP_CONV2D);
}

static bool tf32_applies(const tuner_op *op, const tuner_target *t)
{
    return simt_applies_kind(op, t, TUNER_OP_MATMUL) && op->inputs[0].dtype == TUNER_F32 &&
           op->attrs.matmul.allow_tf32;
}

static int simt_generate(const tuner_op *op, const tuner_target *t, const tuner_schedule *s, tuner_program *prog,
                         char **err)
{
    tuner__gemm_problem p;
    int rc = tuner__gemm_problem_init(op, &p, err);
    if (rc < 0)
        return rc;
    return f_emit(&p, t, s, false, p.conv ? "conv2d_simt" : "matmul_simt", prog, err);
}

static int tf32_generate(const tuner_op *op, const tuner_target *t, const tuner_schedule *s, tuner_program *prog,
                         char **err)
{
    tuner__gemm_problem p;
    int rc = tuner__gemm_problem_init(op, &p, err);
    if (rc < 0)
        return rc;
    if (p.conv || !op->attrs.matmul.allow_tf32) {
        if (err)
            *err = strdup("matmul_tf32 needs an fp32 matmul with allow_tf32");
        return -EINVAL;
    }
    return f_emit(&p, t, s, true, "matmul_tf32", prog, err);
}

static double f_predict(const tuner_op *op, const tuner_target *t, const tuner_schedule *s, bool tf32)
{
    tuner__gemm_problem p;
    const tuner_arch *a = tuner__arch(t);
    f_cfg c;
    if (!a || tuner__gemm_problem_init(op, &p, NULL) < 0 || f_cfg_from(tf32, s, &c) < 0)
        return 1e12;
    tuner__gemm_cost_in in = {
        .block_m = c.bm, .block_n = c.bn, .block_k = c.bk, .threads = c.threads, .warp_m = c.tm, .warp_n = c.tn,
        .split_k = c.split, .stages = 2, .smem_bytes = c.smem, .regs_per_thread = c.regs,
        .tensor_core = tf32, .tf32 = tf32, .async_copy = false, .vec_a = 1, .vec_b = 1,
    };
    return tuner__gemm_cost(&p, a, &in);
}

static double simt_predict(const tuner_op *op, const tuner_target *t, const tuner_schedule *s)
{
    return f_predict(op, t, s, false);
}

static double tf32_predict(const tuner_op *op, const tuner_target *t, const tuner_schedule *s)
{
    return f_predict(op, t, s, true);
}

const tuner_template tuner__gemm_matmul_simt = {
    .name = "matmul_simt",
    .space_signature = SIMT_SIG,
    .applies = matmul_simt_applies,
    .enumerate = simt_enumerate,
    .generate = simt_generate,
    .predict_us = simt_predict,
    .preferred = NULL, /* enumerates its preferred schedule first */
    .default_rank = TUNER_RANK_CUDA_CORE,
    /* Named M, N, K or batch: bounds, strides, raster, K slices and workspace planes from the
     * hd_dim parameters, grids by rules (tuner__gemm_finish); every schedule is valid at every
     * size (element loads). */
    .dynamic_dims = true,
};

/* Static only (docs/api.md: no names on conv2d). */
const tuner_template tuner__gemm_conv2d_simt = {
    .name = "conv2d_simt",
    .space_signature = SIMT_SIG " implicit-gemm nhwc(rsc)/nchw(crs)",
    .applies = conv_simt_applies,
    .enumerate = simt_enumerate,
    .generate = simt_generate,
    .predict_us = simt_predict,
    .preferred = NULL, /* enumerates its preferred schedule first */
    .default_rank = TUNER_RANK_CUDA_CORE,
};

const tuner_template tuner__gemm_matmul_tf32 = {
    .name = "matmul_tf32",
    .space_signature = TF32_SIG,
    .applies = tf32_applies,
    .enumerate = tf32_enumerate,
    .generate = tf32_generate,
    .predict_us = tf32_predict,
    .preferred = NULL, /* enumerates its preferred schedule first */
    .default_rank = TUNER_RANK_TF32,
    .dynamic_dims = true, /* f_emit, as matmul_simt */
};
