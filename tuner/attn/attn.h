/* tuner/attn/attn.h - shared pieces of the attention templates (internal to tuner/attn/).
 *
 * Every template here computes the ATTENTION op of op/op.h: per (batch, query head) a block of
 * query rows against every key row, online softmax in fp32. tuner__attn_problem holds the op's
 * sizes and element strides in either layout, so the templates address q, k, v, the mask and the
 * output the same way; the emitters below read the mask and store output elements through the
 * fused epilogue, so every template (and the reference) applies exactly the same function.
 *
 *   attention_mma    (mma.c)    FlashAttention-2's scheme: mma.sync and cp.async, sm_80 and up
 *   attention_wgmma  (wgmma.c)  Hopper: TMA ring, producer and consumer warpgroups, wgmma; sm_90a
 *   attention_decode (decode.c) few query rows against many keys: the keys split over blocks,
 *                               partial softmaxes combined in one launch or a second kernel
 *                               (flash-decoding); K and V by TMA on sm_90a, cp.async elsewhere
 *
 * The two that read with the copy engine share the tensor maps of q, k and v and their tile
 * loads (tuner__attn_tmap, tuner__attn_emit_tile_load below).
 */
#ifndef HIDET_TUNER_ATTN_ATTN_H
#define HIDET_TUNER_ATTN_ATTN_H

#include <stdbool.h>
#include <stdint.h>

#include "op/tmap.h"
#include "tuner/codegen.h"
#include "tuner/template.h"

typedef struct tuner__attn_problem {
    const tuner_op *op;
    tuner_attention_dims d;
    tuner_dtype dt;     /* q, k and v */
    tuner_dtype out_dt; /* op->output.dtype (q's) */
    bool bshd, causal;
    double scale;
    /* Element strides of q (and the output, which has q's shape) and of k and v, per batch
     * entry, head and row; the head dimension is contiguous. */
    long long q_sb, q_sh, q_ss;
    long long kv_sb, kv_sh, kv_ss;
    /* ... and of the output, [B,Hq,S,D] or [B,S,Hq,D]: q's, except in the packed layout. */
    long long o_sb, o_sh, o_ss;
    /* The layout bshd_packed (bshd set too): q, k and v are head ranges of one input, qkv
     * [B,S,Hq+2Hkv,D], whose element offsets k_head0 * D and v_head0 * D start k and v. */
    bool packed;
    long long k_head0, v_head0;
    /* C expressions of the kernel's pointers to q, k and v element 0: in0, in1, in2, or in0 and
     * in0 plus k's or v's first head. */
    char q_ptr[48], k_ptr[48], v_ptr[48];
    int mask_in; /* the mask's input index: 3, or 1 when packed */
    /* The mask (d.has_mask): its dtype and element strides along (b, h, i, j) of its view
     * broadcast to [B, Hq, S, Skv]; 0 along a broadcast dimension. */
    tuner_dtype mask_dt;
    long long m_st[4];
    /* Causal: query i keeps key j while j <= i + causal_off (Skv - S). */
    long long causal_off;
    /* A dynamic op (named dims, tuner/codegen.h): the dims named on B, S and Skv (0: fixed), and
     * for each stride above the dims whose sizes multiply it at launch (its value there is at
     * the dims' max). A stride between rows (q_ss, kv_ss, o_ss) never has one: names stand on B,
     * S and Skv only (tuner__attn_dyn_ok). All 0 for a static op. The mask's strides may hold a
     * dim twice (a [b, 1, s, s] mask of self-attention, S and Skv both s): m_st_sq, a subset of
     * m_st_m, has the dims whose sizes enter squared. */
    unsigned b_sym, s_sym, skv_sym;
    unsigned q_sb_m, q_sh_m, kv_sb_m, kv_sh_m, o_sb_m, o_sh_m;
    unsigned m_st_m[4], m_st_sq[4];
} tuner__attn_problem;

/* Whether a template with dynamic_dims can take op: true for a static op; else names stand only
 * on B (q's, k's and v's alike), S and Skv, each tensor but the mask names a dim on one axis at
 * most (the mask's S and Skv axes may share S's and Skv's one name), the mask's and the epilogue
 * operands' names line up with what they apply to, and the buffers and the dims fit a launch's
 * arguments. */
bool tuner__attn_dyn_ok(const tuner_op *op);

/* The C expression of a stride of p whose value at the dims' max is v and whose named part is
 * the dims in m (the q_sb_m, ... fields): "vLL" when m is 0, else "(fixedLL * (hd_dim1))". */
const char *tuner__attn_stride_expr(const tuner__attn_problem *p, long long v, unsigned m, char *buf, size_t len);

/* A long long C expression for S, Skv or B of p: the literal ("128LL") of a fixed one, else the
 * product of its dims' parameters ("(hd_dim1)"), into buf. */
char *tuner__attn_size_expr(const tuner__attn_problem *p, char which, char *buf, size_t len);

/* ceil(a / b) for b > 0. */
static inline long long tuner__attn_cdiv(long long a, long long b) { return (a + b - 1) / b; }

/* Fills p from a validated attention op. Returns 0, or -EINVAL with a message in *err (malloc'd)
 * when the op is not one these templates handle (a prologue, a dtype or head dim they are not
 * written for). */
int tuner__attn_problem_init(const tuner_op *op, tuner__attn_problem *p, char **err);

/* Whether the templates apply: f16/bf16, a supported head dim, no prologue. */
bool tuner__attn_supported(const tuner_op *op);

/* The (query, key) pairs that are computed: S * Skv, or the causal triangle's. Per (b, h). */
double tuner__attn_pairs(const tuner__attn_problem *p);
/* Floating-point operations of the whole op: 4 * B * Hq * pairs * D (two GEMMs). */
double tuner__attn_flops(const tuner__attn_problem *p);
/* Bytes the op must move at least: q, k, v, the mask and the output once. */
double tuner__attn_min_bytes(const tuner__attn_problem *p);

/* C expressions (malloc'd; NULL on OOM) for the element offsets of q[b, h, i, c] from p->q_ptr
 * and of k/v[b, hk, j, c] from p->k_ptr / p->v_ptr; b, h, hk, i, j, c are C expressions. */
char *tuner__attn_q_offset(const tuner__attn_problem *p, const char *b, const char *h, const char *i,
                           const char *c);
char *tuner__attn_kv_offset(const tuner__attn_problem *p, const char *b, const char *hk, const char *j,
                            const char *c);

/* ... and of the output element [b, h, i, c]. */
char *tuner__attn_out_offset(const tuner__attn_problem *p, const char *b, const char *h, const char *i,
                             const char *c);

/* A C expression (malloc'd) for the mask's value, as a float, at (b, h, i, j) of the broadcast
 * view: hd_f32(in3[...]) (in1 when packed). Only when p->d.has_mask. */
char *tuner__attn_mask_value(const tuner__attn_problem *p, const char *b, const char *h, const char *i,
                             const char *j);

/* A C expression (malloc'd) for the mask's value at (b, h, i, j) in the log2 domain, for the
 * templates that keep scores as scale * log2(e) * q.k: the value times log2(e), -inf kept -inf,
 * and a finite value below about -FLT_MAX / log2(e) (PyTorch's finfo(f32).min masks) clamped there, so
 * that it stays finite as it does in PyTorch's natural units: a row whose every key is masked so
 * averages its keys as PyTorch's softmax does, where an overflow to -inf would give 0. */
char *tuner__attn_mask_log2(const tuner__attn_problem *p, const char *b, const char *h, const char *i,
                            const char *j);

/* Emits statements that store nv (1..8) consecutive output elements (b, h, i, c .. c + nv - 1),
 * the float variables vars[0..nv), after the fused epilogue: one vector store when nv elements
 * of the output's dtype make 2, 4, 8 or 16 bytes (c must then be a multiple of nv; D is). No
 * bounds check: the caller stores only rows i < S. */
void tuner__attn_emit_store(tuner_sb *sb, const tuner__attn_problem *p, const char *b, const char *h,
                            const char *i, const char *c, const char *const *vars, int nv);

/* The kernel parameters "const T *__restrict__ in0, ..., OT *__restrict__ out" in op order
 * (TUNER_BUF_INPUT0 + i, then TUNER_BUF_OUTPUT), without parentheses. */
void tuner__attn_emit_params(tuner_sb *sb, const tuner__attn_problem *p);

/* ---- TMA maps of q, k and v, shared by the templates that read them with the copy engine
 * (attention_wgmma; attention_decode's load 1): 128-byte-swizzled boxes of 64 columns (of D;
 * columns past it zero) by a tile's rows, every box 1 KiB-aligned in shared memory. */

/* The named dims map `which`'s rows follow (q, which 0: S's; k and v, 1 and 2: Skv's; 0 for
 * fixed rows). */
unsigned tuner__attn_rows_sym(const tuner__attn_problem *p, int which);
/* Whether map `which` is flattened (a dynamic op whose rows are named): its rows and the
 * dimensions above them one map dimension - bshd (D, heads, B * rows), bhsd (D, B * heads *
 * rows) - so that no stride depends on a size. A box past the rows of its (batch entry, head)
 * then reads the next one's rows, not zeros: only past the tensor's end are they zero. */
bool tuner__attn_map_flat(const tuner__attn_problem *p, int which);
/* The tensor map of q (which 0), k (1) or v (2) with boxes of 64 columns x box_rows rows: bhsd
 * (D, rows, heads, B), bshd (D, heads, rows, B), packed the whole qkv (D, Hq + 2 Hkv, S, B);
 * zero past the rows, so a static op's last tile reads zeros past S or Skv. A named B alone is
 * the outermost dimension at the launch's B; named rows flatten the map (above). */
tuner_tmap tuner__attn_tmap(const tuner__attn_problem *p, int which, uint32_t box_rows);
/* Emits the `boxes` TMA loads (wg_tma2/3/4 of tuner/hopper.h) of a tile of `rows` rows from map
 * `map` (which as above) at row `r0` of head `h` (packed: k's and v's heads counted after q's)
 * and batch entry `bi`, int C expressions, into the boxes at the shared address `dst` (box x at
 * dst + x * rows * 128), completing on barrier `bar`. A flattened map takes the row as bi's
 * rows at the launch's sequence length `seq` (an int expression) and, bhsd, the heads before. */
void tuner__attn_emit_tile_load(tuner_sb *sb, const tuner__attn_problem *p, int which, int boxes, const char *dst,
                                const char *map, const char *r0, const char *h, const char *bi, const char *seq, int rows,
                                const char *bar);

extern const tuner_template tuner__attn_mma;
extern const tuner_template tuner__attn_wgmma;
extern const tuner_template tuner__attn_decode;

/* The verification reference (tuner/attn/reference.c): one warp per query row, exact expf,
 * fp32 everything, an F32 output. */
int tuner__attn_reference(const tuner_op *op, const tuner_target *t, tuner_program *p, char **err);

#endif
