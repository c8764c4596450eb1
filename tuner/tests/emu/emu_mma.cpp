// tuner/tests/emu/emu_mma.cpp - runs one generated f16/bf16 matmul_mma candidate (m16n8k16) of a
// dynamic op on the CPU at one size of its dims, an FP8 one (m16n8k32), or (with emu_hopper.h) a
// matmul_wgmma or attention_wgmma one (a developer check for machines without a GPU;
// emulate_mma_dyn.sh, emulate_fp8_mma.sh and emulate_wgmma.sh drive it with gen_mma_dyn and
// gen_fp8_mma, the suite's tuner_emulated a sample: emulate_sample.sh).
//
// The kernel's source after the gemm helpers is compiled as host C++ against host versions of
// the helpers it calls; every CUDA thread of a block is a
// ucontext fiber; __syncthreads, ldmatrix and mma.sync are collective (a warp's op runs when its
// 32 lanes have arrived). ldmatrix.x4 (b16): lane l gets, of matrix j, the 32-bit word l % 4 of
// the row whose address lane 8j + l / 4 gave; with .trans, the elements (2 (l % 4), l / 4) and
// (2 (l % 4) + 1, l / 4) of that matrix (row, column), low half first. mma.sync.m16n8k16 (PTX ISA
// fragment layout; g = l / 4, t = l % 4; two 16-bit elements per register, the lower column / k
// in the low half): a0 = A[g][2t..], a1 = A[g + 8][2t..], a2 = A[g][8 + 2t..], a3 = A[g + 8][8 +
// 2t..]; b0 = B[2t..][g], b1 = B[8 + 2t..][g]; c0, c1 = C[g][2t, 2t + 1], c2, c3 = C[g + 8][...].
// cp.async of 16, 8 or 4 bytes copies its src-size bytes and zero-fills the rest at the wait that
// retires it. Shared memory starts as 0xff bytes (NaN in f16, bf16, e4m3 and e5m2) so a read of anything
// never written shows; each input ends at a page followed by an unmapped one (its padding is NaN
// bytes), so a read past it stops the run; the output is followed by a margin of 0xa5 bytes
// that the generators' checks require untouched. Full-warp __shfl_xor_sync, __shfl_sync (an int
// from one lane) and __syncwarp are collectives too, and EXTRA_HELPERS (a header) may add another
// template's helpers before the kernel (emu_attn.h; emu_hopper.h, whose mbarrier and named-barrier
// waits spin: a SPIN fiber stays runnable, and a block where only spinning fibers run while
// nothing they wait for changes (emu_events) is a deadlock; EMU_BLOCK_RESET, if it defines it,
// runs before each block).
//   emu_mma SIZEDIR     reads SIZEDIR/sizes.txt and in<i>.bin, writes SIZEDIR/out.bin
// Build: g++ -std=c++17 -I<repo> -DKERN='"kern.cu"' -DLAUNCH_H='"launch.h"' emu_mma.cpp
// (emulate_mma_dyn.sh does).
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <vector>
typedef unsigned int hd_u32;
typedef unsigned long long hd_u64;
struct hd_v2 { hd_u32 x, y; };
struct hd_v4 { hd_u32 x, y, z, w; };
struct half_t { unsigned short x; };
struct bf16_t { unsigned short x; };
#define HD_INLINE static inline
#define __global__
#define __launch_bounds__(...)
#define __shared__
#define __restrict__
#define __attribute__(x)
using std::min;
using std::max;
static inline float f16_val(unsigned short b) { _Float16 f; memcpy(&f, &b, 2); return (float)f; }
static inline float bf16_val(unsigned short b) { hd_u32 u = (hd_u32)b << 16; float f; memcpy(&f, &u, 4); return f; }
static inline unsigned short f16_bits(float v) { _Float16 f = (_Float16)v; unsigned short b; memcpy(&b, &f, 2); return b; }
static inline unsigned short bf16_bits(float v) {
    hd_u32 u; memcpy(&u, &v, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);
    u += 0x7fff + ((u >> 16) & 1); return (unsigned short)(u >> 16); }
static inline float hd_f32(float v) { return v; }
static inline float hd_f32(half_t v) { return f16_val(v.x); }
static inline float hd_f32(bf16_t v) { return bf16_val(v.x); }
static inline float hd_gelu_tanh(float x) { return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x))); }
static inline hd_u32 hd_pack_f16x2(float lo, float hi) { return f16_bits(lo) | ((hd_u32)f16_bits(hi) << 16); }
static inline hd_u32 hd_pack_bf16x2(float lo, float hi) { return bf16_bits(lo) | ((hd_u32)bf16_bits(hi) << 16); }
// The prelude's bit casts and pair packing (tuner/codegen.c), which the attention templates use.
static inline float __uint_as_float(hd_u32 u) { float f; memcpy(&f, &u, 4); return f; }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
template <typename T> static inline hd_u32 hd_pack2(float lo, float hi);
template <> inline hd_u32 hd_pack2<half_t>(float lo, float hi) { return hd_pack_f16x2(lo, hi); }
template <> inline hd_u32 hd_pack2<bf16_t>(float lo, float hi) { return hd_pack_bf16x2(lo, hi); }
#define HD_INF __int_as_float(0x7f800000)
template <typename T> T hd_from_f32(float v);
template <> float hd_from_f32<float>(float v) { return v; }
template <> bf16_t hd_from_f32<bf16_t>(float v) { return bf16_t{bf16_bits(v)}; }
template <> half_t hd_from_f32<half_t>(float v) { return half_t{f16_bits(v)}; }
alignas(128) unsigned char gm_smem[256 * 1024];
static size_t smem_limit;
static inline hd_u32 hd_smem_addr(const void *p) { return (hd_u32)((const unsigned char *)p - gm_smem); }
// A kernel's static fp32 array (attention_wgmma's staged mask: emu_dyn.c places it here, 1 KiB
// past the barriers at the dynamic part's 227 KiB), up to 4 KiB.
static const hd_u32 emu_static_at = 233472, emu_static_bytes = 4096;
static unsigned char *sm(hd_u32 a, int bytes) {
    const bool in_static = a >= emu_static_at && a + bytes <= emu_static_at + emu_static_bytes;
    if (a % bytes || (a + bytes > smem_limit && !in_static)) { fprintf(stderr, "shared access %u (+%d) out of the %zu bytes or misaligned\n", a, bytes, smem_limit); exit(3); }
    return gm_smem + a; }
static void gm_sts16(hd_u32 a, unsigned short v) { memcpy(sm(a, 2), &v, 2); }
static void gm_sts32(hd_u32 a, hd_u32 v) { memcpy(sm(a, 4), &v, 4); }
static void gm_sts64(hd_u32 a, hd_v2 v) { memcpy(sm(a, 8), &v, 8); }
static void gm_sts128(hd_u32 a, hd_v4 v) { memcpy(sm(a, 16), &v, 16); }
static hd_v4 gm_lds128(hd_u32 a) { hd_v4 v; memcpy(&v, sm(a, 16), 16); return v; }
// Global stores of 8 and 16 bytes (the FP8 epilogues' pairs and staged rows), alignment checked.
static void hd_st8(void *p, hd_v2 v) { if ((uintptr_t)p % 8) { fprintf(stderr, "misaligned st8\n"); exit(3); } memcpy(p, &v, 8); }
static void hd_st16(void *p, hd_v4 v) { if ((uintptr_t)p % 16) { fprintf(stderr, "misaligned st16\n"); exit(3); } memcpy(p, &v, 16); }
template <typename T> static inline T __ldg(const T *p) { return *p; }
static inline hd_u32 __float_as_uint(float f) { hd_u32 u; memcpy(&u, &f, 4); return u; }
// FP8 (OCP e4m3: bias 7, no infinities, S.1111.111 NaN; e5m2: bias 15, IEEE-like) to float.
static float emu_fp8(unsigned char v, bool e5m2) {
    const int eb = e5m2 ? 5 : 4, mb = 7 - eb, bias = e5m2 ? 15 : 7;
    const int sgn = v >> 7, e = (v >> mb) & ((1 << eb) - 1), m = v & ((1 << mb) - 1);
    float x;
    if (e == 0) x = ldexpf((float)m, 1 - bias - mb);
    else if (e5m2 && e == 31) x = m ? NAN : INFINITY;
    else if (!e5m2 && e == 15 && m == 7) x = NAN;
    else x = ldexpf((float)(m | (1 << mb)), e - bias - mb);
    return sgn ? -x : x; }
// Float to FP8 as cvt.rn.satfinite does: the nearest finite value of v's sign, ties to the even
// code, past the largest the largest; NaN to NaN.
static unsigned char emu_to_fp8(float v, bool e5m2) {
    if (v != v) return 0x7f;
    const unsigned char sgn = std::signbit(v) ? 0x80 : 0;
    const float a = fabsf(v);
    int best = 0; float bd = INFINITY;
    for (int c = 0; c < 128; c++) {
        const float f = emu_fp8((unsigned char)c, e5m2);
        if (!std::isfinite(f)) continue;
        const float d = fabsf(f - a);
        if (d < bd || (d == bd && !(c & 1))) { bd = d; best = c; } }
    return (unsigned char)(sgn | best); }
static unsigned short gm_cvt_f8e4m3x2(float lo, float hi) { return emu_to_fp8(lo, false) | (emu_to_fp8(hi, false) << 8); }
static unsigned short gm_cvt_f8e5m2x2(float lo, float hi) { return emu_to_fp8(lo, true) | (emu_to_fp8(hi, true) << 8); }
static inline float hd_round_f8e4m3(float v) { return emu_fp8(emu_to_fp8(v, false), false); }
static inline float hd_round_f8e5m2(float v) { return emu_fp8(emu_to_fp8(v, true), true); }
struct dim3_ { unsigned x, y, z; };
// SPIN: yielded inside a wait loop (emu_hopper.h's mbarriers and named barriers), still runnable.
enum { RUN, BAR, COLL, DONE, SPIN };
enum { OP_LDSM, OP_LDSMT, OP_MMA_F16, OP_MMA_BF16, OP_MMA_F8, OP_MMA_F8_Z, OP_SHFL_XOR, OP_SHFL_IDX, OP_SYNCWARP, OP_EXTRA };
struct Copy { hd_u32 dst; const void *src; int size, bytes; };
struct Fiber {
    ucontext_t ctx; dim3_ tid; int state, op; std::vector<char> stack;
    hd_u32 addr, *r; float *d; hd_u32 a[4], b[2]; float sv; int iv, slane;
    hd_u64 db; int xarg[4]; // an EXTRA_HELPERS collective's operands
    std::deque<std::vector<Copy>> groups; std::vector<Copy> open;
};
static ucontext_t sched_ctx;
static long long emu_events; // state changes: what tells a spinning block from a deadlocked one
static Fiber *cur;
static dim3_ blockIdx_, gridDim_;
#define threadIdx (cur->tid)
#define blockIdx blockIdx_
#define gridDim gridDim_
static void yield_(int st) { cur->state = st; swapcontext(&cur->ctx, &sched_ctx); }
static void __syncthreads() { yield_(BAR); }
static void cp_async(hd_u32 dst, const void *src, int bytes, int size) {
    if (dst % size || (bytes && (uintptr_t)src % size) || bytes < 0 || bytes > size) { fprintf(stderr, "misaligned cp.async (%d of %d bytes)\n", bytes, size); exit(3); }
    sm(dst, size); cur->open.push_back(Copy{dst, src, size, bytes}); }
static void gm_cp16(hd_u32 dst, const void *src, int bytes) { cp_async(dst, src, bytes, 16); }
static void gm_cp8(hd_u32 dst, const void *src, int bytes) { cp_async(dst, src, bytes, 8); }
static void gm_cp4(hd_u32 dst, const void *src, int bytes) { cp_async(dst, src, bytes, 4); }
static void do_copy(const Copy &c) { memset(gm_smem + c.dst, 0, c.size); if (c.bytes) memcpy(gm_smem + c.dst, c.src, c.bytes); }
static void hd_cp_async_commit() { cur->groups.push_back(cur->open); cur->open.clear(); }
template <int N> static void hd_cp_async_wait() { while ((int)cur->groups.size() > N) { for (auto &c : cur->groups.front()) do_copy(c); cur->groups.pop_front(); } }
static void hd_cp_async_wait_all() { hd_cp_async_wait<0>(); for (auto &c : cur->open) do_copy(c); cur->open.clear(); }
static void gm_ldsm4(hd_u32 *r, hd_u32 a) { cur->addr = a; cur->r = r; cur->op = OP_LDSM; yield_(COLL); }
static void gm_ldsm4t(hd_u32 *r, hd_u32 a) { cur->addr = a; cur->r = r; cur->op = OP_LDSMT; yield_(COLL); }
static void mma_at(float *d, const hd_u32 *a, const hd_u32 *b, int op) {
    for (int i = 0; i < 4; i++) cur->a[i] = a[i];
    cur->b[0] = b[0]; cur->b[1] = b[1]; cur->d = d; cur->op = op; yield_(COLL); }
static void hd_mma_f16_16816(float *d, const hd_u32 *a, const hd_u32 *b) { mma_at(d, a, b, OP_MMA_F16); }
static void hd_mma_bf16_16816(float *d, const hd_u32 *a, const hd_u32 *b) { mma_at(d, a, b, OP_MMA_BF16); }
// FP8 mma.sync.m16n8k32 (d += A B; _z: d = A B), its operands' formats those of the op's inputs 0
// and 1 (launch.h's EMU_FP8_E5M2_A and _B, set in main).
static bool emu_f8_e5m2[2];
static void gm_mma_f8(float *d, const hd_u32 *a, const hd_u32 *b) { mma_at(d, a, b, OP_MMA_F8); }
static void gm_mma_f8_z(float *d, const hd_u32 *a, const hd_u32 *b) { mma_at(d, a, b, OP_MMA_F8_Z); }
// __shfl_xor_sync over the full warp (the only form the templates use): collective.
static float __shfl_xor_sync(unsigned mask, float v, int lane_mask) {
    if (mask != 0xffffffffu) { fprintf(stderr, "partial-warp shuffle\n"); exit(3); }
    cur->sv = v; cur->slane = lane_mask; cur->op = OP_SHFL_XOR; yield_(COLL); return cur->sv; }
// __syncwarp: the warp's lanes meet (fibers of one warp drift apart by rounds at the barriers
// emu_hopper.h spins on), a collective that moves nothing.
static void __syncwarp() { cur->op = OP_SYNCWARP; yield_(COLL); }
// __shfl_sync of an int from one lane over the full warp: collective.
static int __shfl_sync(unsigned mask, int v, int src) {
    if (mask != 0xffffffffu) { fprintf(stderr, "partial-warp shuffle\n"); exit(3); }
    cur->iv = v; cur->slane = src; cur->op = OP_SHFL_IDX; yield_(COLL); return cur->iv; }
// A collective of EXTRA_HELPERS (op OP_EXTRA and up), resolved by its header's function.
static bool (*emu_extra_resolve)(Fiber *lanes);
static bool resolve(Fiber *lanes) {
    const int op = lanes[0].op;
    for (int l = 1; l < 32; l++) if (lanes[l].op != op) { fprintf(stderr, "diverged collective\n"); exit(3); }
    emu_events++;
    if (op >= OP_EXTRA) {
        if (!emu_extra_resolve) { fprintf(stderr, "unknown collective\n"); exit(3); }
        return emu_extra_resolve(lanes);
    }
    if (op == OP_SYNCWARP) {
        for (int l = 0; l < 32; l++) lanes[l].state = RUN;
        return true;
    }
    if (op == OP_SHFL_IDX) {
        int in[32];
        for (int l = 0; l < 32; l++) in[l] = lanes[l].iv;
        for (int l = 0; l < 32; l++) { lanes[l].iv = in[lanes[l].slane & 31]; lanes[l].state = RUN; }
        return true;
    }
    if (op == OP_SHFL_XOR) {
        float in[32];
        for (int l = 0; l < 32; l++) in[l] = lanes[l].sv;
        for (int l = 0; l < 32; l++) { lanes[l].sv = in[(l ^ lanes[l].slane) & 31]; lanes[l].state = RUN; }
        return true;
    }
    if (op == OP_LDSM || op == OP_LDSMT) {
        hd_u32 out[32][4];
        for (int l = 0; l < 32; l++) if (lanes[l].addr % 16) { fprintf(stderr, "misaligned ldmatrix row\n"); exit(3); }
        for (int l = 0; l < 32; l++) for (int j = 0; j < 4; j++) {
            if (op == OP_LDSM) { memcpy(&out[l][j], sm(lanes[8 * j + l / 4].addr + 4 * (l % 4), 4), 4); continue; }
            unsigned short lo, hi;
            memcpy(&lo, sm(lanes[8 * j + 2 * (l % 4)].addr + 2 * (l / 4), 2), 2);
            memcpy(&hi, sm(lanes[8 * j + 2 * (l % 4) + 1].addr + 2 * (l / 4), 2), 2);
            out[l][j] = lo | ((hd_u32)hi << 16); }
        for (int l = 0; l < 32; l++) { memcpy(lanes[l].r, out[l], 16); lanes[l].state = RUN; }
        return true;
    }
    if (op == OP_MMA_F8 || op == OP_MMA_F8_Z) {
        // (g = l / 4, t = l % 4; bytes little-endian within a register) a0 = A[g][4t..], a1 =
        // A[g + 8][4t..], a2 = A[g][16 + 4t..], a3 = A[g + 8][16 + 4t..]; b0 = B[4t..][g], b1 =
        // B[16 + 4t..][g]; c as for 16-bit.
        auto byte = [](hd_u32 w, int i, bool e5) { return emu_fp8((unsigned char)(w >> (8 * i)), e5); };
        const bool ea = emu_f8_e5m2[0], eb = emu_f8_e5m2[1];
        float A[16][32], B[32][8], C[16][8];
        for (int l = 0; l < 32; l++) {
            const int g = l >> 2, t = l & 3; Fiber &f = lanes[l];
            for (int i = 0; i < 4; i++) {
                A[g][4 * t + i] = byte(f.a[0], i, ea); A[g + 8][4 * t + i] = byte(f.a[1], i, ea);
                A[g][16 + 4 * t + i] = byte(f.a[2], i, ea); A[g + 8][16 + 4 * t + i] = byte(f.a[3], i, ea);
                B[4 * t + i][g] = byte(f.b[0], i, eb); B[16 + 4 * t + i][g] = byte(f.b[1], i, eb); }
            const bool z = op == OP_MMA_F8_Z;
            C[g][2 * t] = z ? 0 : f.d[0]; C[g][2 * t + 1] = z ? 0 : f.d[1]; C[g + 8][2 * t] = z ? 0 : f.d[2]; C[g + 8][2 * t + 1] = z ? 0 : f.d[3];
        }
        for (int i = 0; i < 16; i++) for (int j = 0; j < 8; j++) { float s = C[i][j]; for (int k = 0; k < 32; k++) s += A[i][k] * B[k][j]; C[i][j] = s; }
        for (int l = 0; l < 32; l++) { const int g = l >> 2, t = l & 3; Fiber &f = lanes[l];
            f.d[0] = C[g][2 * t]; f.d[1] = C[g][2 * t + 1]; f.d[2] = C[g + 8][2 * t]; f.d[3] = C[g + 8][2 * t + 1]; f.state = RUN; }
        return true;
    }
    float (*val)(unsigned short) = op == OP_MMA_F16 ? f16_val : bf16_val;
    auto lo = [&](hd_u32 w) { return val((unsigned short)(w & 0xffff)); };
    auto hi = [&](hd_u32 w) { return val((unsigned short)(w >> 16)); };
    float A[16][16], B[16][8], C[16][8];
    for (int l = 0; l < 32; l++) {
        const int g = l >> 2, t = l & 3; Fiber &f = lanes[l];
        A[g][2 * t] = lo(f.a[0]); A[g][2 * t + 1] = hi(f.a[0]); A[g + 8][2 * t] = lo(f.a[1]); A[g + 8][2 * t + 1] = hi(f.a[1]);
        A[g][8 + 2 * t] = lo(f.a[2]); A[g][9 + 2 * t] = hi(f.a[2]); A[g + 8][8 + 2 * t] = lo(f.a[3]); A[g + 8][9 + 2 * t] = hi(f.a[3]);
        B[2 * t][g] = lo(f.b[0]); B[2 * t + 1][g] = hi(f.b[0]); B[8 + 2 * t][g] = lo(f.b[1]); B[9 + 2 * t][g] = hi(f.b[1]);
        C[g][2 * t] = f.d[0]; C[g][2 * t + 1] = f.d[1]; C[g + 8][2 * t] = f.d[2]; C[g + 8][2 * t + 1] = f.d[3];
    }
    for (int i = 0; i < 16; i++) for (int j = 0; j < 8; j++) { float s = C[i][j]; for (int k = 0; k < 16; k++) s += A[i][k] * B[k][j]; C[i][j] = s; }
    for (int l = 0; l < 32; l++) { const int g = l >> 2, t = l & 3; Fiber &f = lanes[l];
        f.d[0] = C[g][2 * t]; f.d[1] = C[g][2 * t + 1]; f.d[2] = C[g + 8][2 * t]; f.d[3] = C[g + 8][2 * t + 1]; f.state = RUN; }
    return true;
}
struct Launch { void (*call)(); unsigned threads, smem; };
static void *g_in[16]; static unsigned char *g_out; static float *g_ws; static long long g_dims[4];
#ifdef EXTRA_HELPERS
#include EXTRA_HELPERS
#endif
#include KERN
#include LAUNCH_H
static const Launch *cur_launch;
static void entry() { cur_launch->call(); cur->state = DONE; swapcontext(&cur->ctx, &sched_ctx); }
// n bytes ending 16-aligned right before an unmapped page; the bytes before them in their pages
// (and the padding up to the 16-byte end) are fill.
static unsigned char *guarded(size_t n, int fill) {
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE), body = (n + 15) / 16 * 16, len = (body + pg - 1) / pg * pg;
    unsigned char *p = (unsigned char *)mmap(nullptr, len + pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) exit(2);
    mprotect(p + len, pg, PROT_NONE);
    memset(p, fill, len);
    return p + len - body;
}
static void on_segv(int) { static const char m[] = "a global access past a buffer\n"; if (write(2, m, sizeof m - 1)) {} _exit(3); }
int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *dir = argv[1];
#ifdef EMU_FP8_E5M2_A
    emu_f8_e5m2[0] = EMU_FP8_E5M2_A;
    emu_f8_e5m2[1] = EMU_FP8_E5M2_B;
#endif
    char path[512];
    snprintf(path, sizeof path, "%s/sizes.txt", dir);
    FILE *sf = fopen(path, "r"); if (!sf) { fprintf(stderr, "cannot read %s\n", path); return 2; }
    for (int d = 0; d < 4; d++) if (fscanf(sf, "%lld", &g_dims[d]) != 1) return 2;
    unsigned grid[N_LAUNCHES][3];
    for (int l = 0; l < N_LAUNCHES; l++) for (int d = 0; d < 3; d++) if (fscanf(sf, "%u", &grid[l][d]) != 1) return 2;
    long long in_bytes[N_INPUTS], out_bytes, margin; size_t ws_bytes;
    for (int i = 0; i < N_INPUTS; i++) if (fscanf(sf, "%lld", &in_bytes[i]) != 1) return 2;
    if (fscanf(sf, "%lld %lld %zu", &out_bytes, &margin, &ws_bytes) != 3) return 2;
    fclose(sf);
    for (int i = 0; i < N_INPUTS; i++) {
        snprintf(path, sizeof path, "%s/in%d.bin", dir, i);
        FILE *f = fopen(path, "rb"); if (!f) { fprintf(stderr, "cannot read %s\n", path); return 2; }
        unsigned char *b = guarded((size_t)in_bytes[i], 0xff);
        if (fread(b, 1, (size_t)in_bytes[i], f) != (size_t)in_bytes[i]) return 2;
        fclose(f); g_in[i] = b; }
    // The output starts as NaN bytes (an element never written fails the check), its margin as
    // 0xa5 (not 0xff: a NaN read from an input's padding and stored past the output shows).
    g_out = guarded((size_t)(out_bytes + margin), 0xa5);
    memset(g_out, 0xff, (size_t)out_bytes);
    g_ws = (float *)guarded(ws_bytes + 16, 0xff);
    signal(SIGSEGV, on_segv);
    for (int l = 0; l < N_LAUNCHES; l++) {
        const Launch &L = launches[l]; cur_launch = &L;
        smem_limit = L.smem;
        std::vector<Fiber> fib(L.threads);
        for (auto &f : fib) f.stack.resize(256 * 1024);
        for (unsigned bz = 0; bz < grid[l][2]; bz++) for (unsigned by = 0; by < grid[l][1]; by++) for (unsigned bx = 0; bx < grid[l][0]; bx++) {
            blockIdx_ = {bx, by, bz};
            gridDim_ = {grid[l][0], grid[l][1], grid[l][2]};
            memset(gm_smem, 0xff, sizeof gm_smem);
#ifdef EMU_BLOCK_RESET
            EMU_BLOCK_RESET();
#endif
            for (unsigned i = 0; i < L.threads; i++) { Fiber &f = fib[i]; f.tid = {i, 0, 0}; f.state = RUN; f.groups.clear(); f.open.clear();
                getcontext(&f.ctx); f.ctx.uc_stack.ss_sp = f.stack.data(); f.ctx.uc_stack.ss_size = f.stack.size(); f.ctx.uc_link = nullptr; makecontext(&f.ctx, entry, 0); }
            long long idle_rounds = 0;
            for (;;) {
                bool ran = false, moved = false;
                const long long events = emu_events;
                for (unsigned i = 0; i < L.threads; i++) if (fib[i].state == RUN || fib[i].state == SPIN) {
                    cur = &fib[i]; swapcontext(&sched_ctx, &fib[i].ctx); ran = true; moved |= fib[i].state != SPIN; }
                unsigned done = 0, bar = 0, spin = 0;
                for (auto &f : fib) { done += f.state == DONE; bar += f.state == BAR; spin += f.state == SPIN; }
                if (done == L.threads) break;
                bool progressed = false;
                // Every fiber has yielded: a warp whose lanes are all at a collective runs it (lanes
                // still spinning arrive at it in a later round: a barrier releases them one round
                // after the lane that completed it).
                for (unsigned wp = 0; wp < L.threads / 32; wp++) { int c = 0, s = 0; for (int q = 0; q < 32; q++) { c += fib[wp * 32 + q].state == COLL; s += fib[wp * 32 + q].state == SPIN; }
                    if (c == 32) progressed |= resolve(&fib[wp * 32]); else if (c && !s) { fprintf(stderr, "partial warp collective\n"); return 3; } }
                if (!progressed && bar + done == L.threads && bar) { for (auto &f : fib) if (f.state == BAR) f.state = RUN; progressed = true; }
                if (!progressed && !ran) { fprintf(stderr, "deadlock\n"); return 3; }
                // Only spinning threads, and nothing they wait for changed: a deadlock too.
                idle_rounds = progressed || moved || emu_events != events ? 0 : idle_rounds + 1;
                if (spin && idle_rounds > 1000) { fprintf(stderr, "deadlock (%u threads spinning)\n", spin); return 3; }
            }
        }
    }
    snprintf(path, sizeof path, "%s/out.bin", dir);
    FILE *f = fopen(path, "wb"); fwrite(g_out, 1, (size_t)(out_bytes + margin), f); fclose(f);
    return 0;
}
