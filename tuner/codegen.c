/* tuner/codegen.c - the prelude every generated translation unit starts with, dtype names, and
 * the emitter for fused prologue/epilogue chains.
 *
 * The prelude is deliberately small: NVRTC compile time of a candidate is dominated by how much
 * source it parses, and no CUDA header (cuda_fp16.h alone is ~200 KiB of templates) is included.
 * Everything that touches a special instruction is one line of inline PTX.
 */
#include "tuner/codegen.h"
#include "tuner/tuner.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HD_STR_(x) #x
#define HD_STR(x) HD_STR_(x)

/* Kept as one string literal per concern so that a reader can find a helper by its name; all
 * names start with hd_ so that template code cannot collide with them. */
static const char prelude_types[] =
    "// ---- hidetd prelude ----\n"
    "typedef unsigned int hd_u32;\n"
    "typedef unsigned long long hd_u64;\n"
    "struct alignas(2) half_t { unsigned short x; };\n"
    "struct alignas(2) bf16_t { unsigned short x; };\n"
    "struct alignas(16) hd_v4 { hd_u32 x, y, z, w; };\n"
    "struct alignas(8) hd_v2 { hd_u32 x, y; };\n"
    "#define HD_INLINE __device__ __forceinline__\n"
    "#define HD_INF __int_as_float(0x7f800000)\n"
    /* Conversions to float: f16 by cvt, bf16 is exactly the high half of an f32. */
    "HD_INLINE float hd_f32(float v) { return v; }\n"
    "HD_INLINE float hd_f32(half_t v) { float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(v.x)); "
    "return f; }\n"
    "HD_INLINE float hd_f32(bf16_t v) { float f; asm(\"mov.b32 %0, {0, %1};\" : \"=f\"(f) : \"h\"(v.x)); "
    "return f; }\n"
    /* Integer inputs (i32, i64: token ids, masks) are read as integers (gather's index) or
     * converted to float, rounded to nearest, where an elementwise chain casts them. */
    "HD_INLINE float hd_f32(int v) { return (float)v; }\n"
    "HD_INLINE float hd_f32(long long v) { return (float)v; }\n"
    "template <typename T> struct hd_is_int { static constexpr bool value = false; };\n"
    "template <> struct hd_is_int<int> { static constexpr bool value = true; };\n"
    "template <> struct hd_is_int<long long> { static constexpr bool value = true; };\n"
    /* Round-to-nearest-even conversions from float (cvt.rn.bf16.f32 needs sm_80). */
    "template <typename T> HD_INLINE T hd_from_f32(float v);\n"
    "template <> HD_INLINE float hd_from_f32<float>(float v) { return v; }\n"
    "template <> HD_INLINE half_t hd_from_f32<half_t>(float v) { half_t h; "
    "asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h.x) : \"f\"(v)); return h; }\n"
    "template <> HD_INLINE bf16_t hd_from_f32<bf16_t>(float v) { bf16_t h; "
    "asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(h.x) : \"f\"(v)); return h; }\n"
    /* Value rounded through a narrower type (TUNER_EW_CAST). */
    "HD_INLINE float hd_round_f16(float v) { return hd_f32(hd_from_f32<half_t>(v)); }\n"
    "HD_INLINE float hd_round_bf16(float v) { return hd_f32(hd_from_f32<bf16_t>(v)); }\n"
    /* Two floats packed into one 32-bit register, lo in the low half (mma operand layout). */
    "HD_INLINE hd_u32 hd_pack_f16x2(float lo, float hi) { hd_u32 r; "
    "asm(\"cvt.rn.f16x2.f32 %0, %1, %2;\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo)); return r; }\n"
    "HD_INLINE hd_u32 hd_pack_bf16x2(float lo, float hi) { hd_u32 r; "
    "asm(\"cvt.rn.bf16x2.f32 %0, %1, %2;\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo)); return r; }\n"
    "HD_INLINE float hd_unpack_lo(hd_u32 v, half_t) { half_t h; h.x = (unsigned short)(v & 0xffffu); "
    "return hd_f32(h); }\n"
    "HD_INLINE float hd_unpack_hi(hd_u32 v, half_t) { half_t h; h.x = (unsigned short)(v >> 16); "
    "return hd_f32(h); }\n"
    "HD_INLINE float hd_unpack_lo(hd_u32 v, bf16_t) { return __uint_as_float(v << 16); }\n"
    "HD_INLINE float hd_unpack_hi(hd_u32 v, bf16_t) { return __uint_as_float(v & 0xffff0000u); }\n"
    /* tf32 operand: fp32 rounded to 10 mantissa bits, nearest, ties away (what cuBLAS does). */
    "HD_INLINE hd_u32 hd_to_tf32(float v) { hd_u32 r; asm(\"cvt.rna.tf32.f32 %0, %1;\" : \"=r\"(r) : "
    "\"f\"(v)); return r; }\n";

/* FP8 elements of the core kernels (elementwise: tuner__value_ctype), one byte each, converted
 * as PyTorch's .to(torch.float8_e4m3fn / float8_e5m2) does (measured on torch 2.15, CPU): nearest,
 * ties to even; float8_e4m3fn saturates (past 448 and +-inf give +-448, as cvt.rn.satfinite) and
 * keeps NaN (S.1111.111, the input's sign); float8_e5m2 does not saturate (from 61440, what
 * rounds past 57344, and at +-inf it gives +-inf; NaN S.11111.11). sm_89+ candidates convert with
 * cvt.rn.satfinite and put back what it changes (NaN's sign; e5m2's infinities); references
 * (HD_EXACT_MATH) and older targets use c10's integer algorithm (c10/util/Float8_e4m3fn.h with
 * the saturation; Float8_e5m2.h as is), so a wrong fix-up cannot hide in both. From FP8 is exact. */
static const char prelude_fp8[] =
    "struct alignas(1) hd_f8e4m3_t { unsigned char x; };\n"
    "struct alignas(1) hd_f8e5m2_t { unsigned char x; };\n"
    "HD_INLINE hd_u32 hd_e4m3_from_f32_sw(float f) { hd_u32 u = __float_as_uint(f); const hd_u32 s = u & 0x80000000u; "
    "u ^= s; hd_u32 r;\n"
    "  if (u > 0x7f800000u) r = 0x7fu;\n"
    "  else if (u > 0x43e80000u) r = 0x7eu; /* past 464, all that rounds to 448 */\n"
    "  else if (u < (121u << 23)) r = __float_as_uint(__uint_as_float(u) + __uint_as_float(141u << 23)) - (141u << 23);\n"
    "  else { u += 0xc4000000u + 0x7ffffu + ((u >> 20) & 1u); r = u >> 20; }\n"
    "  return (r & 0xffu) | (s >> 24); }\n"
    "HD_INLINE hd_u32 hd_e5m2_from_f32_sw(float f) { hd_u32 u = __float_as_uint(f); const hd_u32 s = u & 0x80000000u; "
    "u ^= s; hd_u32 r;\n"
    "  if (u >= (143u << 23)) r = u > 0x7f800000u ? 0x7fu : 0x7cu;\n"
    "  else if (u < (113u << 23)) r = __float_as_uint(__uint_as_float(u) + __uint_as_float(134u << 23)) - (134u << 23);\n"
    "  else { u += 0xc8000000u + 0xfffffu + ((u >> 21) & 1u); r = u >> 21; }\n"
    "  return (r & 0xffu) | (s >> 24); }\n"
    "HD_INLINE float hd_e4m3_to_f32_sw(hd_u32 b) { const hd_u32 s = (b & 0x80u) << 24, em = b & 0x7fu;\n"
    "  if (em == 0x7fu) return __uint_as_float(s | 0x7fc00000u);\n"
    "  if (em < 8u) return __uint_as_float(s | __float_as_uint((float)em * 0.001953125f));\n"
    "  return __uint_as_float(s | ((em + (120u << 3)) << 20)); }\n"
    "HD_INLINE float hd_e5m2_to_f32_sw(hd_u32 b) { half_t h; h.x = (unsigned short)(b << 8); return hd_f32(h); }\n"
    /* Two floats to two bytes (lo in the low byte), two bytes to two floats. */
    "#if HD_SM >= 89 && !defined(HD_EXACT_MATH)\n"
    "HD_INLINE hd_u32 hd_f8x2_from_f32(float lo, float hi, hd_f8e4m3_t) { unsigned short q; "
    "asm(\"cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\" : \"=h\"(q) : \"f\"(hi), \"f\"(lo)); hd_u32 r = q;\n"
    "  if (lo != lo) r = (r & 0xff00u) | 0x7fu | ((__float_as_uint(lo) >> 24) & 0x80u);\n"
    "  if (hi != hi) r = (r & 0x00ffu) | 0x7f00u | ((__float_as_uint(hi) >> 16) & 0x8000u);\n"
    "  return r; }\n"
    "HD_INLINE hd_u32 hd_f8x2_from_f32(float lo, float hi, hd_f8e5m2_t) { unsigned short q; "
    "asm(\"cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;\" : \"=h\"(q) : \"f\"(hi), \"f\"(lo)); hd_u32 r = q;\n"
    "  if (!(fabsf(lo) < 61440.0f)) r = (r & 0xff00u) | (lo != lo ? 0x7fu : 0x7cu) | ((__float_as_uint(lo) >> 24) & 0x80u);\n"
    "  if (!(fabsf(hi) < 61440.0f)) r = (r & 0x00ffu) | (hi != hi ? 0x7f00u : 0x7c00u) | "
    "((__float_as_uint(hi) >> 16) & 0x8000u);\n"
    "  return r; }\n"
    "HD_INLINE void hd_f8x2_to_f32(hd_u32 q, hd_f8e4m3_t, float *o) { hd_u32 h; "
    "asm(\"cvt.rn.f16x2.e4m3x2 %0, %1;\" : \"=r\"(h) : \"h\"((unsigned short)q)); o[0] = hd_unpack_lo(h, half_t()); "
    "o[1] = hd_unpack_hi(h, half_t()); }\n"
    "HD_INLINE void hd_f8x2_to_f32(hd_u32 q, hd_f8e5m2_t, float *o) { hd_u32 h; "
    "asm(\"cvt.rn.f16x2.e5m2x2 %0, %1;\" : \"=r\"(h) : \"h\"((unsigned short)q)); o[0] = hd_unpack_lo(h, half_t()); "
    "o[1] = hd_unpack_hi(h, half_t()); }\n"
    "#else\n"
    "HD_INLINE hd_u32 hd_f8x2_from_f32(float lo, float hi, hd_f8e4m3_t) { "
    "return hd_e4m3_from_f32_sw(lo) | (hd_e4m3_from_f32_sw(hi) << 8); }\n"
    "HD_INLINE hd_u32 hd_f8x2_from_f32(float lo, float hi, hd_f8e5m2_t) { "
    "return hd_e5m2_from_f32_sw(lo) | (hd_e5m2_from_f32_sw(hi) << 8); }\n"
    "HD_INLINE void hd_f8x2_to_f32(hd_u32 q, hd_f8e4m3_t, float *o) { o[0] = hd_e4m3_to_f32_sw(q & 0xffu); "
    "o[1] = hd_e4m3_to_f32_sw((q >> 8) & 0xffu); }\n"
    "HD_INLINE void hd_f8x2_to_f32(hd_u32 q, hd_f8e5m2_t, float *o) { o[0] = hd_e5m2_to_f32_sw(q & 0xffu); "
    "o[1] = hd_e5m2_to_f32_sw((q >> 8) & 0xffu); }\n"
    "#endif\n"
    "HD_INLINE float hd_f32(hd_f8e4m3_t v) { float o[2]; hd_f8x2_to_f32(v.x, v, o); return o[0]; }\n"
    "HD_INLINE float hd_f32(hd_f8e5m2_t v) { float o[2]; hd_f8x2_to_f32(v.x, v, o); return o[0]; }\n"
    "template <> HD_INLINE hd_f8e4m3_t hd_from_f32<hd_f8e4m3_t>(float v) { hd_f8e4m3_t b; "
    "b.x = (unsigned char)hd_f8x2_from_f32(v, 0.0f, b); return b; }\n"
    "template <> HD_INLINE hd_f8e5m2_t hd_from_f32<hd_f8e5m2_t>(float v) { hd_f8e5m2_t b; "
    "b.x = (unsigned char)hd_f8x2_from_f32(v, 0.0f, b); return b; }\n"
    /* Value rounded through FP8 (an elementwise chain's TUNER_EW_CAST; an FP8 matmul's epilogue
     * has its own, saturating hd_round_f8*). */
    "HD_INLINE float hd_cast_f8e4m3(float v) { return hd_f32(hd_from_f32<hd_f8e4m3_t>(v)); }\n"
    "HD_INLINE float hd_cast_f8e5m2(float v) { return hd_f32(hd_from_f32<hd_f8e5m2_t>(v)); }\n"
    /* Four bytes of one 32-bit word <-> four floats (byte 0 first). */
    "template <typename T> HD_INLINE void hd_f8x4_to_f32(hd_u32 w, float *o) { "
    "hd_f8x2_to_f32(w & 0xffffu, T(), o); hd_f8x2_to_f32(w >> 16, T(), o + 2); }\n"
    "template <typename T> HD_INLINE hd_u32 hd_f8x4_from_f32(const float *v) { "
    "return hd_f8x2_from_f32(v[0], v[1], T()) | (hd_f8x2_from_f32(v[2], v[3], T()) << 16); }\n";

static const char prelude_math[] =
    /* exp via ex2.approx (2 ulp); used where the result feeds a normalisation (softmax). */
    "HD_INLINE float hd_fast_exp(float x) { float y; "
    "asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(y) : \"f\"(x * 1.4426950408889634f)); return y; }\n"
    "HD_INLINE float hd_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }\n"
    "HD_INLINE float hd_silu(float x) { return x / (1.0f + expf(-x)); }\n"
    /* GELU (erf form): the fit of codegen.h in candidates, erff in references. */
    "#ifdef HD_EXACT_MATH\n"
    "HD_INLINE float hd_gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }\n"
    "#else\n"
    "HD_INLINE float hd_gelu_erf(float x) {\n"
    "  const float a = fminf(fabsf(x), " HD_STR(TUNER_GELU_XMAX) ");\n"
    "  float q = " HD_STR(TUNER_GELU_D6) ";\n"
    "  q = fmaf(q, a, " HD_STR(TUNER_GELU_D5) ");\n"
    "  q = fmaf(q, a, " HD_STR(TUNER_GELU_D4) "); q = fmaf(q, a, " HD_STR(TUNER_GELU_D3) ");\n"
    "  q = fmaf(q, a, " HD_STR(TUNER_GELU_D2) "); q = fmaf(q, a, " HD_STR(TUNER_GELU_D1) ");\n"
    "  q = fmaf(q, a, " HD_STR(TUNER_GELU_D0) ");\n"
    "  float h; asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(h) : \"f\"(q)); /* Phi(-|x|); q > -27: never subnormal */\n"
    /* x - x h for x >= 0 and x h below, as one FMA on a ReLU: no compare and select. */
    "  return fmaf(-fabsf(x), h, fmaxf(x, 0.0f));\n}\n"
    "#endif\n"
    "HD_INLINE float hd_gelu_tanh(float x) { "
    "return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x))); }\n"
    "HD_INLINE float hd_relu(float x) { return x > 0.0f ? x : 0.0f; }\n"
    /* PyTorch's activations, as its kernels compute them: a NaN stays NaN (its std::min/max keep
     * it where fmaxf/fminf alone would drop it: clamp, hardsigmoid). */
    "HD_INLINE float hd_clamp(float x, float lo, float hi) { return x != x ? x : fminf(fmaxf(x, lo), hi); }\n"
    "HD_INLINE float hd_hardsigmoid(float x) { return x != x ? x : fminf(fmaxf(x + 3.0f, 0.0f), 6.0f) / 6.0f; }\n"
    "HD_INLINE float hd_hardswish(float x) { return x * fminf(fmaxf(x + 3.0f, 0.0f), 6.0f) / 6.0f; }\n"
    "HD_INLINE float hd_leaky_relu(float x, float s) { return x > 0.0f ? x : x * s; }\n"
    /* x ** p for a constant p without a fast path: powf in references; in candidates
     * 2^(p log2|x|), negative for a negative base under an odd integer exponent and NaN for a
     * finite negative base under a non-integer one (what powf gives); +-0 and +-inf bases
     * follow from log2's -inf and +inf, their sign from the exponent's parity. */
    "#ifdef HD_EXACT_MATH\n"
    "HD_INLINE float hd_pow(float x, float p) { return powf(x, p); }\n"
    "#else\n"
    "HD_INLINE float hd_pow(float x, float p) {\n"
    "  const float r = exp2f(p * log2f(fabsf(x)));\n"
    "  if (!signbit(x) || x != x) return r;\n"
    "  if (truncf(p) != p) return x == 0.0f || isinf(x) ? r : __int_as_float(0x7fc00000);\n"
    "  return fmodf(p, 2.0f) != 0.0f ? -r : r; }\n"
    "#endif\n"
    /* Butterfly reductions over groups of W consecutive lanes (W a power of two <= 32). Every lane
     * of the warp must execute them (full mask); each lane ends with its group's result. */
    "template <int W> HD_INLINE float hd_warp_sum(float v) {\n"
    "#pragma unroll\n"
    "  for (int o = W / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n"
    "  return v; }\n"
    "template <int W> HD_INLINE float hd_warp_max(float v) {\n"
    "#pragma unroll\n"
    "  for (int o = W / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));\n"
    "  return v; }\n"
    "HD_INLINE float hd_shfl(float v, int src) { return __shfl_sync(0xffffffffu, v, src); }\n";

static const char prelude_memory[] =
    /* 16/8-byte vector access; the caller guarantees the alignment. */
    "HD_INLINE hd_v4 hd_ld16(const void *p) { return *reinterpret_cast<const hd_v4 *>(p); }\n"
    /* Global vector stores in inline PTX: NVRTC may split a struct store into 4-byte ones. */
    "HD_INLINE void hd_st16(void *p, hd_v4 v) { asm volatile(\"st.global.v4.u32 [%0], {%1,%2,%3,%4};\" :: "
    "\"l\"(p), \"r\"(v.x), \"r\"(v.y), \"r\"(v.z), \"r\"(v.w) : \"memory\"); }\n"
    "HD_INLINE hd_v2 hd_ld8(const void *p) { return *reinterpret_cast<const hd_v2 *>(p); }\n"
    "HD_INLINE void hd_st8(void *p, hd_v2 v) { asm volatile(\"st.global.v2.u32 [%0], {%1,%2};\" :: "
    "\"l\"(p), \"r\"(v.x), \"r\"(v.y) : \"memory\"); }\n"
    /* Read-only, no-L1-allocate 16-byte load for streamed data. */
    "HD_INLINE hd_v4 hd_ld16_nc(const void *p) { hd_v4 v; "
    "asm volatile(\"ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\" : \"=r\"(v.x), \"=r\"(v.y), "
    "\"=r\"(v.z), \"=r\"(v.w) : \"l\"(p)); return v; }\n"
    "HD_INLINE hd_u32 hd_smem_addr(const void *p) { hd_u32 a; "
    "asm(\"{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }\" : \"=r\"(a) : \"l\"(p)); return a; }\n"
    /* cp.async: when pred is false nothing is read (src-size 0) and the 16 bytes are zero-filled;
     * gmem should still be a valid address (pass the tensor base) to stay within the rules. */
    "HD_INLINE void hd_cp_async16(void *smem, const void *gmem, bool pred) { "
    "asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\" :: \"r\"(hd_smem_addr(smem)), "
    "\"l\"(gmem), \"r\"(pred ? 16 : 0) : \"memory\"); }\n"
    /* 4/8-byte variants (.ca: .cg only exists for 16 bytes) for misaligned fallbacks. */
    "HD_INLINE void hd_cp_async8(void *smem, const void *gmem, bool pred) { "
    "asm volatile(\"cp.async.ca.shared.global [%0], [%1], 8, %2;\" :: \"r\"(hd_smem_addr(smem)), "
    "\"l\"(gmem), \"r\"(pred ? 8 : 0) : \"memory\"); }\n"
    "HD_INLINE void hd_cp_async4(void *smem, const void *gmem, bool pred) { "
    "asm volatile(\"cp.async.ca.shared.global [%0], [%1], 4, %2;\" :: \"r\"(hd_smem_addr(smem)), "
    "\"l\"(gmem), \"r\"(pred ? 4 : 0) : \"memory\"); }\n"
    /* N elements of T <-> floats, with the widest accesses N * sizeof(T) allows (16 or 8 bytes);
     * the caller guarantees p is aligned to min(16, N * sizeof(T)). */
    "template <typename T, int N> HD_INLINE void hd_ldn_f32(const T *p, float *o) {\n"
    "  if constexpr (hd_is_int<T>::value && sizeof(T) == 4 && N % 4 == 0) {\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < N / 4; i++) { hd_v4 r = hd_ld16(p + 4 * i); o[4 * i] = (float)(int)r.x; "
    "o[4 * i + 1] = (float)(int)r.y; o[4 * i + 2] = (float)(int)r.z; o[4 * i + 3] = (float)(int)r.w; }\n"
    "  } else if constexpr (hd_is_int<T>::value) {\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < N; i++) o[i] = (float)p[i];\n"
    "  } else if constexpr (sizeof(T) == 4 && N % 4 == 0) {\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < N / 4; i++) { hd_v4 r = hd_ld16(p + 4 * i); o[4 * i] = __uint_as_float(r.x); "
    "o[4 * i + 1] = __uint_as_float(r.y); o[4 * i + 2] = __uint_as_float(r.z); o[4 * i + 3] = __uint_as_float(r.w); }\n"
    "  } else if constexpr (sizeof(T) == 2 && N % 8 == 0) {\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < N / 8; i++) { hd_v4 r = hd_ld16(p + 8 * i); const hd_u32 w[4] = {r.x, r.y, r.z, r.w};\n"
    "#pragma unroll\n"
    "      for (int k = 0; k < 4; k++) { o[8 * i + 2 * k] = hd_unpack_lo(w[k], T()); "
    "o[8 * i + 2 * k + 1] = hd_unpack_hi(w[k], T()); } }\n"
    "  } else if constexpr (sizeof(T) == 1 && N % 16 == 0) {\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < N / 16; i++) { hd_v4 r = hd_ld16(p + 16 * i); hd_f8x4_to_f32<T>(r.x, o + 16 * i); "
    "hd_f8x4_to_f32<T>(r.y, o + 16 * i + 4); hd_f8x4_to_f32<T>(r.z, o + 16 * i + 8); "
    "hd_f8x4_to_f32<T>(r.w, o + 16 * i + 12); }\n"
    "  } else if constexpr (sizeof(T) == 1 && N % 4 == 0) {\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < N / 4; i++) hd_f8x4_to_f32<T>(*reinterpret_cast<const hd_u32 *>(p + 4 * i), o + 4 * i);\n"
    "  } else if constexpr (sizeof(T) == 2 && N == 4) {\n"
    "    hd_v2 r = hd_ld8(p); o[0] = hd_unpack_lo(r.x, T()); o[1] = hd_unpack_hi(r.x, T()); "
    "o[2] = hd_unpack_lo(r.y, T()); o[3] = hd_unpack_hi(r.y, T());\n"
    "  } else {\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < N; i++) o[i] = hd_f32(p[i]);\n"
    "  } }\n"
    "template <typename T> HD_INLINE hd_u32 hd_pack2(float lo, float hi);\n"
    "template <> HD_INLINE hd_u32 hd_pack2<half_t>(float lo, float hi) { return hd_pack_f16x2(lo, hi); }\n"
    "template <> HD_INLINE hd_u32 hd_pack2<bf16_t>(float lo, float hi) { return hd_pack_bf16x2(lo, hi); }\n"
    "template <typename T, int N> HD_INLINE void hd_stn_f32(T *p, const float *v) {\n"
    "  if constexpr (sizeof(T) == 4 && N % 4 == 0) {\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < N / 4; i++) { hd_v4 r; r.x = __float_as_uint(v[4 * i]); r.y = __float_as_uint(v[4 * i + 1]); "
    "r.z = __float_as_uint(v[4 * i + 2]); r.w = __float_as_uint(v[4 * i + 3]); hd_st16(p + 4 * i, r); }\n"
    "  } else if constexpr (sizeof(T) == 2 && N % 8 == 0) {\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < N / 8; i++) { hd_v4 r; r.x = hd_pack2<T>(v[8 * i], v[8 * i + 1]); "
    "r.y = hd_pack2<T>(v[8 * i + 2], v[8 * i + 3]); r.z = hd_pack2<T>(v[8 * i + 4], v[8 * i + 5]); "
    "r.w = hd_pack2<T>(v[8 * i + 6], v[8 * i + 7]); hd_st16(p + 8 * i, r); }\n"
    "  } else if constexpr (sizeof(T) == 1 && N % 16 == 0) {\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < N / 16; i++) { hd_v4 r; r.x = hd_f8x4_from_f32<T>(v + 16 * i); "
    "r.y = hd_f8x4_from_f32<T>(v + 16 * i + 4); r.z = hd_f8x4_from_f32<T>(v + 16 * i + 8); "
    "r.w = hd_f8x4_from_f32<T>(v + 16 * i + 12); hd_st16(p + 16 * i, r); }\n"
    "  } else if constexpr (sizeof(T) == 1 && N % 4 == 0) {\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < N / 4; i++) asm volatile(\"st.global.u32 [%0], %1;\" :: \"l\"(p + 4 * i), "
    "\"r\"(hd_f8x4_from_f32<T>(v + 4 * i)) : \"memory\");\n"
    "  } else if constexpr (sizeof(T) == 2 && N == 4) {\n"
    "    hd_v2 r; r.x = hd_pack2<T>(v[0], v[1]); r.y = hd_pack2<T>(v[2], v[3]); hd_st8(p, r);\n"
    "  } else {\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < N; i++) p[i] = hd_from_f32<T>(v[i]);\n"
    "  } }\n"
    "HD_INLINE void hd_cp_async_commit() { asm volatile(\"cp.async.commit_group;\" ::: \"memory\"); }\n"
    "template <int N> HD_INLINE void hd_cp_async_wait() { "
    "asm volatile(\"cp.async.wait_group %0;\" :: \"n\"(N) : \"memory\"); }\n"
    "HD_INLINE void hd_cp_async_wait_all() { asm volatile(\"cp.async.wait_all;\" ::: \"memory\"); }\n";

static const char prelude_mma[] =
    /* ldmatrix: each lane passes the shared address of one 16-byte row (lanes 0-7 matrix 0,
     * 8-15 matrix 1, ...; x2 uses lanes 0-15). */
    "HD_INLINE void hd_ldmatrix_x4(hd_u32 *r, const void *smem) { "
    "asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\" : \"=r\"(r[0]), "
    "\"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(hd_smem_addr(smem))); }\n"
    "HD_INLINE void hd_ldmatrix_x4_trans(hd_u32 *r, const void *smem) { "
    "asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\" : \"=r\"(r[0]), "
    "\"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(hd_smem_addr(smem))); }\n"
    "HD_INLINE void hd_ldmatrix_x2(hd_u32 *r, const void *smem) { "
    "asm volatile(\"ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\" : \"=r\"(r[0]), "
    "\"=r\"(r[1]) : \"r\"(hd_smem_addr(smem))); }\n"
    "HD_INLINE void hd_ldmatrix_x2_trans(hd_u32 *r, const void *smem) { "
    "asm volatile(\"ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\" : \"=r\"(r[0]), "
    "\"=r\"(r[1]) : \"r\"(hd_smem_addr(smem))); }\n"
    /* d += a * b, m16n8k16, A row-major (4 regs), B column-major (2 regs), fp32 accumulators. */
    "HD_INLINE void hd_mma_f16_16816(float *d, const hd_u32 *a, const hd_u32 *b) { "
    "asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
    "{%8,%9}, {%0,%1,%2,%3};\" : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3]) : \"r\"(a[0]), "
    "\"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1])); }\n"
    "HD_INLINE void hd_mma_bf16_16816(float *d, const hd_u32 *a, const hd_u32 *b) { "
    "asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
    "{%8,%9}, {%0,%1,%2,%3};\" : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3]) : \"r\"(a[0]), "
    "\"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1])); }\n"
    /* m16n8k8 tf32: A 4 regs, B 2 regs, each holding a tf32 (see hd_to_tf32). */
    "HD_INLINE void hd_mma_tf32_1688(float *d, const hd_u32 *a, const hd_u32 *b) { "
    "asm volatile(\"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
    "{%8,%9}, {%0,%1,%2,%3};\" : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3]) : \"r\"(a[0]), "
    "\"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1])); }\n"
    "// ---- end of prelude ----\n";

void tuner__prelude_reference(tuner_sb *sb, int sm)
{
    tuner_sb_puts(sb, "#define HD_EXACT_MATH 1\n");
    tuner__prelude(sb, sm);
}

void tuner__prelude(tuner_sb *sb, int sm)
{
    /* Every supported target (sm_80+) has cp.async, ldmatrix, bf16 cvt and mma.sync, so the
     * prelude is the same text for all of them; the macro lets templates test the arch. */
    tuner_sb_printf(sb, "#define HD_SM %d\n", sm);
    tuner_sb_puts(sb, prelude_types);
    tuner_sb_puts(sb, prelude_fp8);
    tuner_sb_puts(sb, prelude_math);
    tuner_sb_puts(sb, prelude_memory);
    tuner_sb_puts(sb, prelude_mma);
}

const char *tuner__ctype(tuner_dtype d)
{
    switch (d) {
    case TUNER_F16:
        return "half_t";
    case TUNER_BF16:
        return "bf16_t";
    case TUNER_I32:
        return "int";
    case TUNER_I64:
        return "long long";
    case TUNER_F8E4M3:
    case TUNER_F8E5M2:
        return "unsigned char"; /* FP8 operands are bytes that only TMA and wgmma read */
    default:
        return "float";
    }
}

const char *tuner__value_ctype(tuner_dtype d)
{
    if (d == TUNER_F8E4M3)
        return "hd_f8e4m3_t";
    if (d == TUNER_F8E5M2)
        return "hd_f8e5m2_t";
    return tuner__ctype(d);
}

const char *tuner_numerics_flags(void)
{
    /* IEEE division and square root, no flush-to-zero, FMA contraction allowed (NVRTC's defaults,
     * spelled out so that a change of defaults cannot silently change cached numerics). */
    return "--fmad=true --prec-div=true --prec-sqrt=true --ftz=false";
}

void tuner__emit_float(tuner_sb *sb, double v)
{
    /* The exact bits of the float the value rounds to: no locale, no printf rounding, and
     * infinities or NaN stay representable. */
    float f = (float)v;
    uint32_t bits;
    memcpy(&bits, &f, sizeof(bits));
    tuner_sb_printf(sb, "__uint_as_float(0x%08xu)", bits);
}

/* var = var ** p (p rounded to f32): the short forms PyTorch's own pow kernel takes for 0, 1, 2,
 * 3, 0.5, -0.5 and -1 (products, sqrt, rsqrt, a reciprocal; the reference takes them too), and
 * hd_pow otherwise, which the reference prelude maps to powf. */
static void emit_pow(tuner_sb *sb, const char *var, double p)
{
    const float f = (float)p;
    if (f == 1.0f)
        return;
    if (f == 0.0f)
        tuner_sb_printf(sb, "%s = 1.0f;\n", var);
    else if (f == 2.0f)
        tuner_sb_printf(sb, "%s = %s * %s;\n", var, var, var);
    else if (f == 3.0f)
        tuner_sb_printf(sb, "%s = %s * %s * %s;\n", var, var, var, var);
    else if (f == 0.5f)
        tuner_sb_printf(sb, "%s = sqrtf(%s);\n", var, var);
    else if (f == -1.0f)
        tuner_sb_printf(sb, "%s = 1.0f / %s;\n", var, var);
    else if (f == -0.5f)
        tuner_sb_printf(sb, "%s = rsqrtf(%s);\n", var, var);
    else {
        tuner_sb_printf(sb, "%s = hd_pow(%s, ", var, var);
        tuner__emit_float(sb, p);
        tuner_sb_puts(sb, ");\n");
    }
}

/* The element of inputs[input] that lines up with the value, as a float expression; NULL when
 * the op has no such input (only an invalid op). */
static char *operand_expr(const tuner_op *op, int input, tuner_operand_load_fn load, void *ctx)
{
    if (!load || !op || input < 0 || input >= op->n_inputs)
        return NULL;
    return load(ctx, input);
}

/* A mask step (op/op.h): comparisons give 1 or 0; where and masked_fill select (a NaN condition
 * is nonzero, hence true), so an infinity or NaN on the side not taken never reaches var. */
static void emit_mask_step(tuner_sb *sb, const tuner_op *op, const tuner_ew_step *st, const char *var,
                           tuner_operand_load_fn load, void *ctx)
{
    static const char *const cmp[] = {[TUNER_EW_EQ] = "==", [TUNER_EW_NE] = "!=", [TUNER_EW_LT] = "<",
                                      [TUNER_EW_LE] = "<=", [TUNER_EW_GT] = ">",  [TUNER_EW_GE] = ">="};
    int ops[2];
    const int n = tuner_ew_operands(st, ops);
    char *e[2] = {NULL, NULL};
    for (int j = 0; j < n; j++) {
        if (!(e[j] = operand_expr(op, ops[j], load, ctx))) {
            free(e[0]);
            tuner_sb_puts(sb, "#error \"hidetd: chain operand unavailable\"\n");
            return;
        }
    }
    if (tuner_ew_is_compare(st->kind)) {
        if (n == 1) {
            tuner_sb_printf(sb, "{ const float hd_o = hd_f32(%s); %s = %s %s hd_o ? 1.0f : 0.0f; }\n", e[0], var, var,
                            cmp[st->kind]);
        } else {
            tuner_sb_printf(sb, "%s = %s %s ", var, var, cmp[st->kind]);
            tuner__emit_float(sb, st->scalar);
            tuner_sb_puts(sb, " ? 1.0f : 0.0f;\n");
        }
    } else if (st->kind == TUNER_EW_WHERE) {
        tuner_sb_printf(sb, "{ const float hd_c = hd_f32(%s); const float hd_o = hd_f32(%s); %s = hd_c != 0.0f ? %s : hd_o; }\n",
                        e[0], e[1], var, var);
    } else { /* TUNER_EW_MASKED_FILL */
        tuner_sb_printf(sb, "{ const float hd_c = hd_f32(%s); %s = hd_c != 0.0f ? ", e[0], var);
        tuner__emit_float(sb, st->scalar);
        tuner_sb_printf(sb, " : %s; }\n", var);
    }
    free(e[0]);
    free(e[1]);
}

void tuner__emit_chain(tuner_sb *sb, const tuner_op *op, const tuner_ew_chain *chain, const char *var,
                       tuner_operand_load_fn load, void *ctx)
{
    if (!chain)
        return;
    for (int i = 0; i < chain->n && i < TUNER_MAX_STEPS; i++) {
        const tuner_ew_step *st = &chain->steps[i];
        if (tuner_ew_is_mask(st->kind)) {
            emit_mask_step(sb, op, st, var, load, ctx);
            continue;
        }
        if (TUNER_EW_IS_BINARY(st->kind)) {
            char *e = NULL;
            if (load && op && st->operand >= 0 && st->operand < op->n_inputs)
                e = load(ctx, st->operand);
            if (!e) {
                /* Only reachable with an invalid op: make the failure loud at compile time rather
                 * than computing something else. */
                tuner_sb_puts(sb, "#error \"hidetd: chain operand unavailable\"\n");
                continue;
            }
            tuner_sb_printf(sb, "{ const float hd_o = hd_f32(%s); ", e);
            free(e);
            switch (st->kind) {
            case TUNER_EW_ADD:
                tuner_sb_printf(sb, "%s = %s + hd_o; }\n", var, var);
                break;
            case TUNER_EW_SUB:
                tuner_sb_printf(sb, "%s = %s - hd_o; }\n", var, var);
                break;
            case TUNER_EW_MUL:
                tuner_sb_printf(sb, "%s = %s * hd_o; }\n", var, var);
                break;
            case TUNER_EW_DIV:
                tuner_sb_printf(sb, "%s = %s / hd_o; }\n", var, var);
                break;
            case TUNER_EW_MAX:
                tuner_sb_printf(sb, "%s = fmaxf(%s, hd_o); }\n", var, var);
                break;
            default: /* TUNER_EW_MIN */
                tuner_sb_printf(sb, "%s = fminf(%s, hd_o); }\n", var, var);
                break;
            }
            continue;
        }
        switch (st->kind) {
        case TUNER_EW_RELU:
            tuner_sb_printf(sb, "%s = hd_relu(%s);\n", var, var);
            break;
        case TUNER_EW_GELU_ERF:
            tuner_sb_printf(sb, "%s = hd_gelu_erf(%s);\n", var, var);
            break;
        case TUNER_EW_GELU_TANH:
            tuner_sb_printf(sb, "%s = hd_gelu_tanh(%s);\n", var, var);
            break;
        case TUNER_EW_SILU:
            tuner_sb_printf(sb, "%s = hd_silu(%s);\n", var, var);
            break;
        case TUNER_EW_SIGMOID:
            tuner_sb_printf(sb, "%s = hd_sigmoid(%s);\n", var, var);
            break;
        case TUNER_EW_TANH:
            tuner_sb_printf(sb, "%s = tanhf(%s);\n", var, var);
            break;
        case TUNER_EW_EXP:
            tuner_sb_printf(sb, "%s = expf(%s);\n", var, var);
            break;
        case TUNER_EW_NEG:
            tuner_sb_printf(sb, "%s = -%s;\n", var, var);
            break;
        case TUNER_EW_ABS:
            tuner_sb_printf(sb, "%s = fabsf(%s);\n", var, var);
            break;
        case TUNER_EW_SQUARE:
            tuner_sb_printf(sb, "%s = %s * %s;\n", var, var, var);
            break;
        case TUNER_EW_SCALE:
            tuner_sb_printf(sb, "%s = %s * ", var, var);
            tuner__emit_float(sb, st->scalar);
            tuner_sb_puts(sb, ";\n");
            break;
        case TUNER_EW_SQRT:
            tuner_sb_printf(sb, "%s = sqrtf(%s);\n", var, var);
            break;
        case TUNER_EW_RSQRT:
            tuner_sb_printf(sb, "%s = rsqrtf(%s);\n", var, var);
            break;
        case TUNER_EW_SHIFT:
            tuner_sb_printf(sb, "%s = %s + ", var, var);
            tuner__emit_float(sb, st->scalar);
            tuner_sb_puts(sb, ";\n");
            break;
        case TUNER_EW_CLAMP:
            tuner_sb_printf(sb, "%s = hd_clamp(%s, ", var, var);
            tuner__emit_float(sb, st->scalar);
            tuner_sb_puts(sb, ", ");
            tuner__emit_float(sb, st->scalar2);
            tuner_sb_puts(sb, ");\n");
            break;
        case TUNER_EW_HARDSWISH:
            tuner_sb_printf(sb, "%s = hd_hardswish(%s);\n", var, var);
            break;
        case TUNER_EW_HARDSIGMOID:
            tuner_sb_printf(sb, "%s = hd_hardsigmoid(%s);\n", var, var);
            break;
        case TUNER_EW_LEAKY_RELU:
            tuner_sb_printf(sb, "%s = hd_leaky_relu(%s, ", var, var);
            tuner__emit_float(sb, st->scalar);
            tuner_sb_puts(sb, ");\n");
            break;
        case TUNER_EW_ERF:
            tuner_sb_printf(sb, "%s = erff(%s);\n", var, var);
            break;
        case TUNER_EW_POW:
            emit_pow(sb, var, st->scalar);
            break;
        case TUNER_EW_LOG:
            tuner_sb_printf(sb, "%s = logf(%s);\n", var, var);
            break;
        case TUNER_EW_CAST:
            if (st->dtype == TUNER_F16)
                tuner_sb_printf(sb, "%s = hd_round_f16(%s);\n", var, var);
            else if (st->dtype == TUNER_BF16)
                tuner_sb_printf(sb, "%s = hd_round_bf16(%s);\n", var, var);
            else if (tuner_dtype_is_fp8(st->dtype) && op && op->kind == TUNER_OP_MATMUL)
                /* a quantizing FP8 matmul's (saturating): its template defines it */
                tuner_sb_printf(sb, "%s = hd_round_%s(%s);\n", var, tuner_dtype_name(st->dtype), var);
            else if (tuner_dtype_is_fp8(st->dtype)) /* PyTorch's .to(float8_*): the prelude's */
                tuner_sb_printf(sb, "%s = hd_cast_%s(%s);\n", var, tuner_dtype_name(st->dtype), var);
            /* a cast to f32 leaves a float unchanged */
            break;
        default:
            tuner_sb_puts(sb, "#error \"hidetd: unknown chain step\"\n");
            break;
        }
    }
}

/* ---- dynamic ops ---- */

void tuner__emit_dim_params(tuner_sb *sb, const tuner_op *op)
{
    for (int k = 0; k < op->n_dims && k < TUNER_MAX_DIMS; k++)
        tuner_sb_printf(sb, ", long long hd_dim%d", k);
}

int tuner__launch_dim_args(tuner_launch *l, const tuner_op *op)
{
    if (l->n_args + op->n_dims > TUNER_MAX_ARGS)
        return -E2BIG;
    for (int k = 0; k < op->n_dims && k < TUNER_MAX_DIMS; k++)
        l->args[l->n_args++] = TUNER_ARG_DIM0 + k;
    return 0;
}

/* "(hd_dim0 * hd_dim1)" for the dims in mask, appended at buf + *at. */
static void sym_product(unsigned mask, char *buf, size_t len, size_t *at)
{
    bool first = true;
    for (int k = 0; k < TUNER_MAX_DIMS; k++) {
        if (!(mask & (1u << k)))
            continue;
        int w = snprintf(buf + *at, len - *at, "%shd_dim%d", first ? "(" : " * ", k);
        if (w < 0 || (size_t)w >= len - *at)
            return;
        *at += (size_t)w;
        first = false;
    }
    int w = snprintf(buf + *at, len - *at, ")");
    if (w > 0 && (size_t)w < len - *at)
        *at += (size_t)w;
}

char *tuner__axis_expr(const tuner_tensor *t, int axis, char *buf, size_t len)
{
    size_t at = 0;
    if (!len)
        return buf;
    buf[0] = '\0';
    if (t->sym[axis])
        sym_product(t->sym[axis], buf, len, &at);
    else
        snprintf(buf, len, "%lldLL", (long long)t->shape[axis]);
    return buf;
}

int tuner__grid_rule(tuner_launch *l, int d, const tuner_op *op, unsigned mask, long long coef, long long div,
                     long long mul, long long cap)
{
    int64_t max_sizes[TUNER_MAX_DIMS] = {1, 1, 1, 1};
    for (int k = 0; k < op->n_dims && k < TUNER_MAX_DIMS; k++)
        max_sizes[k] = op->dims[k].max;
    tuner_grid_rule r = {.dims = (uint8_t)mask, .coef = coef, .div = div, .mul = mul, .cap = cap};
    if (coef < 1 || div < 1 || mul < 1 || cap < 0)
        return -EINVAL;
    int64_t g = tuner_grid_rule_eval(&r, max_sizes);
    if (g < 1 || g > 2147483647LL || (d > 0 && g > 65535))
        return -ERANGE;
    l->grid[d] = (unsigned)g;
    l->grid_rule[d] = mask ? r : (tuner_grid_rule){0};
    return 0;
}
