/* tuner/codegen.h - helpers every template uses to write CUDA C (internal).
 *
 * Programs are written with tuner_sb (op/sb.h); tuner__prelude() emits the small self-contained
 * definitions generated kernels rely on (half/bf16 types and conversions, cp.async, ldmatrix and
 * mma.sync wrappers as inline PTX, fast math), so no heavy CUDA header is ever included and a
 * candidate compiles quickly. tuner__emit_chain() inlines a fused prologue/epilogue chain: the
 * expression is re-emitted from the enum-only IR in op/op.h, never from client text.
 */
#ifndef HIDET_TUNER_CODEGEN_H
#define HIDET_TUNER_CODEGEN_H

#include "tuner/tuner.h"
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "op/op.h"
#include "op/sb.h"

/* Appends the common prelude (types, conversions, inline-PTX wrappers) for target sm. */
void tuner__prelude(tuner_sb *sb, int sm);
/* The same for verification references: HD_EXACT_MATH is defined, so fused functions that
 * candidates evaluate with a fast approximation (hd_gelu_erf) use libdevice's exact form there,
 * and verification compares the approximation against it. */
void tuner__prelude_reference(tuner_sb *sb, int sm);

/* GELU (erf form) in candidates: gelu(x) = x * Phi(x) = x - x * h for x >= 0 and x * h for x < 0,
 * that is max(x, 0) - |x| * h, where h = Phi(-|x|) = 2^Q(min(|x|, TUNER_GELU_XMAX)) and Q is the
 * degree-6 polynomial below (coefficients d0..d6: a least-squares fit of log2(Phi(-a)) on
 * [0, 5.5437] weighted towards GELU's absolute and relative error; Phi(-a) is below 1.5e-8 beyond
 * the clamp). One ex2, seven FMAs and two min/max per element, against erff's two evaluated
 * branches; absolute error under 5e-7 and relative error under 2.5e-4 wherever |gelu(x)| is an
 * fp16 normal (tuner/tests/test_codegen.c checks a dense grid). */
#define TUNER_GELU_XMAX 5.54371738f
#define TUNER_GELU_D0 -1.000018954e+00f
#define TUNER_GELU_D1 -1.151005268e+00f
#define TUNER_GELU_D2 -4.592315853e-01f
#define TUNER_GELU_D3 -5.295230821e-02f
#define TUNER_GELU_D4 7.868842222e-03f
#define TUNER_GELU_D5 -7.265558233e-04f
#define TUNER_GELU_D6 3.027898856e-05f

/* C type name of a dtype in generated code ("half_t", "bf16_t", "float"). */
const char *tuner__ctype(tuner_dtype d);
/* The same, but FP8 as the prelude's element types hd_f8e4m3_t / hd_f8e5m2_t (hd_f32,
 * hd_from_f32, hd_ldn_f32 and hd_stn_f32 convert them as PyTorch does) where tuner__ctype has raw
 * bytes (unsigned char, what TMA and the tensor cores read): the core kernels' parameters. */
const char *tuner__value_ctype(tuner_dtype d);

/* Emits statements that apply `chain` to the float variable named `var` (updated in place).
 * Operands of binary steps are read as `operand_expr(i)`: the caller supplies, through `load`,
 * a C expression for element of inputs[i] that lines up with the current output element
 * (broadcast already resolved), e.g. "bias_ptr[col]". `load` returns a malloc'd string. */
/* The expression `load` returns is the raw element (half_t, bf16_t or float); the emitted code
 * converts it with hd_f32(). Unary steps are emitted in fp32; TUNER_EW_CAST rounds the float through
 * the named dtype (hd_round_f16 / hd_round_bf16) and keeps it a float. */
typedef char *(*tuner_operand_load_fn)(void *ctx, int input_index);
void tuner__emit_chain(tuner_sb *sb, const tuner_op *op, const tuner_ew_chain *chain, const char *var,
                       tuner_operand_load_fn load, void *ctx);

/* Appends a float literal for v (rounded to float) as its exact bits: __uint_as_float(0x...u). */
void tuner__emit_float(tuner_sb *sb, double v);

/* ---- dynamic ops (named dims) ----
 * A named axis reaches generated code as the product of `long long` kernel parameters hd_dim0,
 * hd_dim1, ... (one per op.dims entry, in that order, after the buffer pointers). A name on axis
 * 0 changes only a template's bounds (rows, elements, M tiles) and its grid: every stride stays
 * a constant, and constants derived from the named axis elsewhere (a `% size` of the leading
 * coordinate) may keep its tuning size, max. The core templates also take names on inner axes
 * (proto/dims.c says where): the strides and row products a named size enters are then read from
 * the parameters (tuner__bcast_offset), each dim named on one axis of a tensor at most. */

/* Appends ", long long hd_dim0, ..." for every dim of op (nothing for a static op). */
void tuner__emit_dim_params(tuner_sb *sb, const tuner_op *op);
/* Appends the matching TUNER_ARG_DIM0 + k arguments to l. -E2BIG when they do not fit. */
int tuner__launch_dim_args(tuner_launch *l, const tuner_op *op);
/* A C expression of type long long for axis `axis` of t: its size as a literal ("4096LL"), or
 * for a named axis the product of its dims ("(hd_dim0)", "(hd_dim0 * hd_dim1)"), into buf. */
char *tuner__axis_expr(const tuner_tensor *t, int axis, char *buf, size_t len);
/* Sets l's grid dimension d to the rule mul * ceil(coef * product(dims in `mask`) / div) capped
 * at cap (0: none), and l->grid[d] to its value at op's tuning sizes (the dims' max). -ERANGE
 * when that value is not within 1 .. 2^31-1. mask 0 sets the fixed grid value
 * min(cap, mul * ceil(coef / div)) and no rule. */
int tuner__grid_rule(tuner_launch *l, int d, const tuner_op *op, unsigned mask, long long coef, long long div,
                     long long mul, long long cap);

/* tuner_numerics_flags() (the NVRTC numerics options) is declared in tuner/tuner.h. */

/* Prelude names generated code may use (all defined by tuner__prelude):
 *   types: half_t, bf16_t (struct {unsigned short x;}), hd_u32, hd_v4 (16 B), hd_v2 (8 B); HD_INF
 *   hd_f32(x) for float/half_t/bf16_t; hd_from_f32<T>(float) round-to-nearest-even;
 *   hd_round_f16/bf16(float); hd_pack_f16x2/bf16x2(lo, hi); hd_unpack_lo/hi(u32, T()); hd_to_tf32
 *   hd_fast_exp, hd_sigmoid, hd_silu, hd_gelu_erf, hd_gelu_tanh, hd_relu
 *   hd_warp_sum<W>(v), hd_warp_max<W>(v) (butterfly over W-lane groups, full-warp mask), hd_shfl
 *   hd_ld16/hd_st16, hd_ld8/hd_st8, hd_ld16_nc, hd_smem_addr
 *   hd_ldn_f32<T, N>(const T *p, float *o), hd_stn_f32<T, N>(T *p, const float *v): N elements with
 *   16/8-byte accesses where N * sizeof(T) allows (p aligned to min(16, N * sizeof(T))); hd_pack2<T>
 *   hd_cp_async16(smem, gmem, pred) (.cg, zero-fill when !pred), hd_cp_async8/4 (.ca),
 *   hd_cp_async_commit(), hd_cp_async_wait<N>(), hd_cp_async_wait_all()
 *   hd_ldmatrix_x4/_x4_trans/_x2/_x2_trans(hd_u32 *r, const void *smem)
 *   hd_mma_f16_16816 / hd_mma_bf16_16816 (float d[4], const hd_u32 a[4], const hd_u32 b[2])
 *   hd_mma_tf32_1688 (float d[4], const hd_u32 a[4], const hd_u32 b[2]) */

#endif
