/* tuner/core.h - internals shared by the core (non-gemm) templates: softmax, layernorm, rmsnorm,
 * reduce and elementwise, their references and cost-model helpers. */
#ifndef HIDET_TUNER_CORE_H
#define HIDET_TUNER_CORE_H

#include "tuner/codegen.h"
#include "tuner/mapping.h"
#include "tuner/template.h"

extern const tuner_template tuner__softmax_rows;
extern const tuner_template tuner__layernorm_rows;
extern const tuner_template tuner__rmsnorm_rows;
extern const tuner_template tuner__reduce_rows;
extern const tuner_template tuner__reduce_cols;
extern const tuner_template tuner__elementwise;
extern const tuner_template tuner__copy;
extern const tuner_template tuner__concat;
extern const tuner_template tuner__conv2d_direct;
extern const tuner_template tuner__conv2d_grouped;
extern const tuner_template tuner__pool2d;
extern const tuner_template tuner__gather;

/* A C expression (malloc'd; NULL on OOM) for the element offset in `in` of the output element
 * whose flattened leading index (all dims of `out` but the last) is `row` and whose last-dim
 * index is `col`, following numpy broadcasting (`in` right-aligned against `out`; dims of size 1
 * contribute nothing). Fixed sizes are baked in as constants; a named axis of a dynamic op (its
 * tensors name a dim on one axis at most) reads its size from the hd_dim parameters, so a static
 * op's offsets, and those of names on axis 0 only, print as before. The result is a long long. */
char *tuner__bcast_offset(const tuner_tensor *in, const tuner_tensor *out, const char *row, const char *col);

/* A copy's element offset in x of the output coordinate (o0, o1, ...): a long long C expression
 * (malloc'd; NULL on OOM), its strides and offset read from the hd_dim parameters where they
 * scale with names (tuner/layout.c). */
char *tuner__copy_offset(const tuner_op *op);

/* Operand loads of a fused chain (a tuner_operand_load_fn for tuner__emit_chain) in a kernel that
 * names the output element by (row, col) as above: input i is read as in<i>[offset]. */
typedef struct tuner__bcast_ctx {
    const tuner_op *op;
    const char *row, *col;
} tuner__bcast_ctx;
char *tuner__bcast_load(void *bcast_ctx, int input);

/* true when in, broadcast to out, advances by one element per step of out's last dim (its last
 * dim equals out's and is not broadcast); false when it is constant along out's last dim. */
bool tuner__bcast_last_contiguous(const tuner_tensor *in, const tuner_tensor *out);

/* Shared cost model of a memory-bound kernel: `bytes` moved from DRAM by `blocks` blocks of
 * `threads` threads, each thread keeping `inflight_bytes` of loads in flight, `regs` registers per
 * thread and `smem` bytes of shared memory per block; `eff` is the access efficiency (1.0 for
 * 16-byte accesses); `instr` the kernel's total thread-instructions (issue time matters when few
 * SMs or warps do heavy math). Returns microseconds including one launch overhead. */
double tuner__mem_cost_us(const tuner_arch *a, double bytes, double blocks, int threads, double inflight_bytes,
                          int regs, int smem, double eff, double instr);

/* Approximate thread-instructions one element spends in `chain` (transcendentals ~20-30). */
double tuner__chain_instr(const tuner_ew_chain *chain);

/* Appends the kernel parameter list "const T0 *__restrict__ in0, ..., OT *__restrict__ out"
 * for every op input and the output (the argument order of TUNER_BUF_INPUT0 + i, then OUTPUT). */
void tuner__emit_params(tuner_sb *sb, const tuner_op *op, tuner_dtype out_dtype);
/* Sets the launch arguments to match tuner__emit_params (inputs, then output). */
void tuner__launch_args(tuner_launch *l, const tuner_op *op);
/* The dynamic shared memory to ask for, for a kernel that uses `dynamic_bytes` of it beside
 * `static_bytes` of __shared__ variables. The launch contract (docs/api.md, `shared_bytes`) has
 * a launcher raise the function's dynamic limit only above 48 KiB; below it the driver allows
 * 48 KiB less the static bytes, so a kernel whose two together pass 48 KiB fails to launch
 * ("invalid argument") in a launcher that follows the contract. Such a kernel asks for just over
 * 48 KiB instead: the launcher then raises the limit, and the few bytes more cost nothing (these
 * kernels run one block per SM). */
unsigned tuner__dynamic_shared(unsigned dynamic_bytes, unsigned static_bytes);
/* Makes kernel `name` p's only launch: a 1-D grid of `blocks` blocks of `threads` threads, no
 * dynamic shared memory, the arguments of tuner__emit_params. */
void tuner__one_launch(tuner_program *p, const tuner_op *op, const char *name, unsigned blocks,
                       unsigned threads);

/* The frame of a kernel that walks `n` items (elements or vectors) in tiles of block * ipt, as
 * elementwise and the layout templates do: the kernel `name` with op's parameters, a tile per
 * block (or, with grid_stride, a loop over `tiles` tiles), repeat(ipt) * spatial(block) over
 * threadIdx.x so consecutive threads take consecutive items, and `vi` the item, inside
 * `if (vi < n) {`. tuner__emit_tiles_end closes all of it. */
void tuner__emit_tiles_begin(tuner_sb *sb, const tuner_op *op, int sm, const char *name, int block, int ipt,
                             bool grid_stride, long long tiles, long long n, tuner_mapping *ret_m);
void tuner__emit_tiles_end(tuner_sb *sb, const tuner_mapping *m);
/* The same frame for a dynamic op (named dims): the dims' parameters follow op's, and the item
 * count is the C expression n_expr (a long long of hd_dim0, ..., e.g. "1000LL * (hd_dim0) / 8"),
 * evaluated once as hd_n; the grid-stride loop's tile count (hd_tiles) follows from it. The
 * launch's grid is the caller's tuner__grid_rule. */
void tuner__emit_tiles_begin_dyn(tuner_sb *sb, const tuner_op *op, int sm, const char *name, int block, int ipt,
                                 bool grid_stride, const char *n_expr, tuner_mapping *ret_m);

/* ---- dynamic ops (named dims; tuner/codegen.h has the rule) ---- */

/* The named axes of t: the union of its sym bit sets (0 for a fixed tensor). */
unsigned tuner__sym_mask(const tuner_tensor *t);
/* Whether `in`, right-aligned against `like`, names exactly the axes `like` names there, each
 * with the same names, and every other axis of `in` facing a named axis is a fixed 1 (numpy
 * broadcasting where a name meets only itself or 1: what proto/dims.c lets through). */
bool tuner__names_line_up(const tuner_tensor *in, const tuner_tensor *like);
/* Whether a core template can take dynamic op: true for a static op; else no tensor names a dim
 * on two axes, every input with names lines up with the output or with input 0 (right-aligned, a
 * named axis against the same names, any other axis facing a name a fixed 1), so that
 * tuner__bcast_offset can index it from the launch's sizes; and the buffers, a workspace and the
 * dims fit TUNER_MAX_ARGS arguments. The templates add their own conditions (a fixed row length,
 * no name on a reduced axis, ...). */
bool tuner__dyn_supported(const tuner_op *op);
/* "coef * (hd_dim0 * ...)" for the dims in mask: a long long C expression, into buf; the
 * literal "coefLL" for mask 0 (the form static code prints its constants in). */
char *tuner__scaled_dims_expr(long long coef, unsigned mask, char *buf, size_t len);

/* true when op carries no prologue. */
bool tuner__no_prologue(const tuner_op *op);

/* An NHWC conv2d's geometry as the direct templates read it (conv_direct.c, conv_grouped.c):
 * x [N, H, W, C], w [K, R, S, C / groups], the output [N, P, Q, K]; channels per group in (cpg)
 * and out (kpg); the output's element bytes and alignment. */
typedef struct tuner__conv_geo {
    long long N, H, W, C, K, R, S, P, Q;
    int groups, cpg, kpg;
    int sh, sw, ph, pw, dh, dw;
    int osz, oalign;
} tuner__conv_geo;
tuner__conv_geo tuner__conv_geo_of(const tuner_op *op);

/* true when no input but input 0 carries a prologue: what the row and column templates fuse
 * (their parameter inputs, gamma and beta, take none). */
bool tuner__prologue_input0_only(const tuner_op *op);

/* Emits, inside a kernel body, `auto hd_pro0 = [&](float v, long long idx) -> float {...};`:
 * input 0's prologue applied to its element idx (the row-major linear index in input 0), the
 * chain's operands broadcast to input 0's shape. Emits nothing when input 0 has no prologue;
 * callers then skip hd_pro0. */
void tuner__emit_input0_prologue(tuner_sb *sb, const tuner_op *op);

/* Smallest power of two >= v (v >= 1). */
long tuner__pow2ceil(long v);

#endif
