// tuner/tests/emu/emu_fp8_mma.cpp - runs one generated matmul_mma FP8 candidate on the CPU (a
// developer check for machines without a GPU; not part of the test suite: emulate_fp8_mma.sh
// drives it with gen_fp8_mma).
//
// The kernel's source after the gemm helpers is compiled as host C++ against host versions of the
// helpers it calls. Every CUDA thread of a block is a ucontext fiber; __syncthreads, ldmatrix and
// mma.sync are collective: a warp's ldmatrix.x4 / mma runs when its 32 lanes have arrived.
// ldmatrix: lane l gets, of matrix j, the 32-bit word l % 4 of the row whose address lane 8j + l / 4
// gave. mma.sync.m16n8k32 e4m3/e5m2 (PTX ISA fragment layout; g = l / 4, t = l % 4): a0 = A[g][4t..],
// a1 = A[g + 8][4t..], a2 = A[g][16 + 4t..], a3 = A[g + 8][16 + 4t..]; b0 = B[4t..][g], b1 =
// B[16 + 4t..][g]; bytes in little-endian order within a register; c0, c1 = C[g][2t, 2t + 1], c2, c3
// = C[g + 8][...]. cp.async copies happen at the wait that retires them (so a read before the
// wait sees stale bytes). Shared memory starts as 0x7f bytes (e4m3 NaN) so that a read of anything
// never written shows. The output goes to DIR/out.bin for gen_fp8_mma's check.
// Build: g++ -std=c++17 -I<repo> -DDIR='"..."' emu_fp8_mma.cpp (emulate_fp8_mma.sh does).
#include <ucontext.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <vector>
extern "C" {
#include "op/op.h"
}
typedef unsigned int hd_u32;
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
static inline float hd_f32(float v) { return v; }
static inline hd_u32 __float_as_uint(float f) { hd_u32 u; memcpy(&u, &f, 4); return u; }
template <typename T> static inline T __ldg(const T *p) { return *p; }
static inline unsigned short bf16_bits(float v) { hd_u32 u = __float_as_uint(v); u += 0x7fff + ((u >> 16) & 1); return (unsigned short)(u >> 16); }
static inline hd_u32 hd_pack_bf16x2(float lo, float hi) { return bf16_bits(lo) | ((hd_u32)bf16_bits(hi) << 16); }
template <typename T> T hd_from_f32(float v);
template <> float hd_from_f32<float>(float v) { return v; }
template <> bf16_t hd_from_f32<bf16_t>(float v) { return bf16_t{bf16_bits(v)}; }
template <> half_t hd_from_f32<half_t>(float v) { _Float16 f = (_Float16)v; half_t h; memcpy(&h.x, &f, 2); return h; }
static inline unsigned short gm_cvt_f8e4m3x2(float lo, float hi) { return tuner_f32_to_fp8(TUNER_F8E4M3, lo) | (tuner_f32_to_fp8(TUNER_F8E4M3, hi) << 8); }
static inline unsigned short gm_cvt_f8e5m2x2(float lo, float hi) { return tuner_f32_to_fp8(TUNER_F8E5M2, lo) | (tuner_f32_to_fp8(TUNER_F8E5M2, hi) << 8); }
static inline float hd_round_f8e4m3(float v) { return tuner_fp8_to_f32(TUNER_F8E4M3, tuner_f32_to_fp8(TUNER_F8E4M3, v)); }
static inline float hd_round_f8e5m2(float v) { return tuner_fp8_to_f32(TUNER_F8E5M2, tuner_f32_to_fp8(TUNER_F8E5M2, v)); }
alignas(128) unsigned char gm_smem[256 * 1024];
static size_t smem_limit;
static inline hd_u32 hd_smem_addr(const void *p) { return (hd_u32)((const unsigned char *)p - gm_smem); }
static unsigned char *sm(hd_u32 a, int bytes) {
    if (a % bytes || a + bytes > smem_limit) { fprintf(stderr, "shared access %u (+%d) out of the %zu bytes or misaligned\n", a, bytes, smem_limit); exit(3); }
    return gm_smem + a; }
static void hd_st8(void *p, hd_v2 v) { if ((uintptr_t)p % 8) { fprintf(stderr, "misaligned st8\n"); exit(3); } memcpy(p, &v, 8); }
static void hd_st16(void *p, hd_v4 v) { if ((uintptr_t)p % 16) { fprintf(stderr, "misaligned st16\n"); exit(3); } memcpy(p, &v, 16); }
static void gm_sts32(hd_u32 a, hd_u32 v) { memcpy(sm(a, 4), &v, 4); }
static void gm_sts16_(hd_u32 a, unsigned short v) { memcpy(sm(a, 2), &v, 2); }
static void gm_sts64(hd_u32 a, hd_v2 v) { memcpy(sm(a, 8), &v, 8); }
static hd_v4 gm_lds128(hd_u32 a) { hd_v4 v; memcpy(&v, sm(a, 16), 16); return v; }
struct dim3_ { unsigned x, y, z; };
enum { RUN, BAR, COLL, DONE };
enum { OP_LDSM, OP_MMA, OP_MMA_Z };
struct Copy { hd_u32 dst; const void *src; int bytes; };
struct Fiber {
    ucontext_t ctx; dim3_ tid; int state, op; std::vector<char> stack;
    hd_u32 addr, *r; float *d; hd_u32 a[4], b[2];
    std::deque<std::vector<Copy>> groups; std::vector<Copy> open;
};
static ucontext_t sched_ctx;
static Fiber *cur;
static dim3_ blockIdx_;
#define threadIdx (cur->tid)
#define blockIdx blockIdx_
static void yield_(int st) { cur->state = st; swapcontext(&cur->ctx, &sched_ctx); }
static void __syncthreads() { yield_(BAR); }
static void gm_cp16(hd_u32 dst, const void *src, int bytes) {
    if (dst % 16 || (bytes && (uintptr_t)src % 16)) { fprintf(stderr, "misaligned cp.async\n"); exit(3); }
    sm(dst, 16); cur->open.push_back(Copy{dst, src, bytes}); }
static void do_copy(const Copy &c) { memset(gm_smem + c.dst, 0, 16); if (c.bytes) memcpy(gm_smem + c.dst, c.src, c.bytes); }
static void hd_cp_async_commit() { cur->groups.push_back(cur->open); cur->open.clear(); }
template <int N> static void hd_cp_async_wait() { while ((int)cur->groups.size() > N) { for (auto &c : cur->groups.front()) do_copy(c); cur->groups.pop_front(); } }
static void hd_cp_async_wait_all() { hd_cp_async_wait<0>(); for (auto &c : cur->open) do_copy(c); cur->open.clear(); }
static void gm_ldsm4(hd_u32 *r, hd_u32 a) { cur->addr = a; cur->r = r; cur->op = OP_LDSM; yield_(COLL); }
static void mma_at(float *d, const hd_u32 *a, const hd_u32 *b, int op) {
    for (int i = 0; i < 4; i++) cur->a[i] = a[i];
    cur->b[0] = b[0]; cur->b[1] = b[1]; cur->d = d; cur->op = op; yield_(COLL); }
static void gm_mma_f8(float *d, const hd_u32 *a, const hd_u32 *b) { mma_at(d, a, b, OP_MMA); }
static void gm_mma_f8_z(float *d, const hd_u32 *a, const hd_u32 *b) { mma_at(d, a, b, OP_MMA_Z); }
static tuner_dtype DTA, DTB;
static float byte_of(tuner_dtype dt, hd_u32 w, int i) { return tuner_fp8_to_f32(dt, (uint8_t)(w >> (8 * i))); }
static bool resolve(Fiber *lanes) {
    const int op = lanes[0].op;
    for (int l = 1; l < 32; l++) if (lanes[l].op != op) { fprintf(stderr, "diverged collective\n"); exit(3); }
    if (op == OP_LDSM) {
        hd_u32 out[32][4];
        for (int l = 0; l < 32; l++) for (int j = 0; j < 4; j++) {
            const hd_u32 row = lanes[8 * j + l / 4].addr;
            if (row % 16) { fprintf(stderr, "misaligned ldmatrix row\n"); exit(3); }
            memcpy(&out[l][j], sm(row + 4 * (l % 4), 4), 4); }
        for (int l = 0; l < 32; l++) { memcpy(lanes[l].r, out[l], 16); lanes[l].state = RUN; }
        return true;
    }
    float A[16][32], B[32][8], C[16][8];
    for (int l = 0; l < 32; l++) {
        const int g = l >> 2, t = l & 3; Fiber &f = lanes[l];
        for (int i = 0; i < 4; i++) {
            A[g][4 * t + i] = byte_of(DTA, f.a[0], i); A[g + 8][4 * t + i] = byte_of(DTA, f.a[1], i);
            A[g][16 + 4 * t + i] = byte_of(DTA, f.a[2], i); A[g + 8][16 + 4 * t + i] = byte_of(DTA, f.a[3], i);
            B[4 * t + i][g] = byte_of(DTB, f.b[0], i); B[16 + 4 * t + i][g] = byte_of(DTB, f.b[1], i);
        }
        const bool z = op == OP_MMA_Z;
        C[g][2 * t] = z ? 0 : f.d[0]; C[g][2 * t + 1] = z ? 0 : f.d[1]; C[g + 8][2 * t] = z ? 0 : f.d[2]; C[g + 8][2 * t + 1] = z ? 0 : f.d[3];
    }
    for (int i = 0; i < 16; i++) for (int j = 0; j < 8; j++) { float s = C[i][j]; for (int k = 0; k < 32; k++) s += A[i][k] * B[k][j]; C[i][j] = s; }
    for (int l = 0; l < 32; l++) { const int g = l >> 2, t = l & 3; Fiber &f = lanes[l];
        f.d[0] = C[g][2 * t]; f.d[1] = C[g][2 * t + 1]; f.d[2] = C[g + 8][2 * t]; f.d[3] = C[g + 8][2 * t + 1]; f.state = RUN; }
    return true;
}
struct Launch { void (*call)(); unsigned grid[3], threads, smem; };
static void *g_in[16]; static unsigned char *g_out; static float *g_ws;
#include KERN
#include LAUNCH_H
static const Launch *cur_launch;
static void entry() { cur_launch->call(); cur->state = DONE; swapcontext(&cur->ctx, &sched_ctx); }
static void *slurp(const char *path) {
    FILE *f = fopen(path, "rb"); if (!f) { fprintf(stderr, "cannot read %s\n", path); exit(2); }
    fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
    void *b = aligned_alloc(16, (n + 15) / 16 * 16 + 16); if (fread(b, 1, n, f) != (size_t)n) exit(2); fclose(f); return b; }
int main(int argc, char **argv) {
    const char *dir = argv[1];
    DTA = (tuner_dtype)atoi(argv[2]); DTB = (tuner_dtype)atoi(argv[3]);
    char path[512];
    for (int i = 0; i < N_INPUTS; i++) { snprintf(path, sizeof path, "%s/in%d.bin", dir, i); g_in[i] = slurp(path); }
    g_out = (unsigned char *)aligned_alloc(16, (OUT_BYTES + 15) / 16 * 16);
    memset(g_out, 0xff, OUT_BYTES);
    g_ws = (float *)aligned_alloc(16, WS_BYTES + 16);
    for (int l = 0; l < N_LAUNCHES; l++) {
        const Launch &L = launches[l]; cur_launch = &L;
        smem_limit = L.smem;
        std::vector<Fiber> fib(L.threads);
        for (auto &f : fib) f.stack.resize(256 * 1024);
        for (unsigned bz = 0; bz < L.grid[2]; bz++) for (unsigned by = 0; by < L.grid[1]; by++) for (unsigned bx = 0; bx < L.grid[0]; bx++) {
            blockIdx_ = {bx, by, bz};
            memset(gm_smem, 0x7f, sizeof gm_smem);
            for (unsigned i = 0; i < L.threads; i++) { Fiber &f = fib[i]; f.tid = {i, 0, 0}; f.state = RUN; f.groups.clear(); f.open.clear();
                getcontext(&f.ctx); f.ctx.uc_stack.ss_sp = f.stack.data(); f.ctx.uc_stack.ss_size = f.stack.size(); f.ctx.uc_link = nullptr; makecontext(&f.ctx, entry, 0); }
            for (;;) {
                bool ran = false;
                for (unsigned i = 0; i < L.threads; i++) if (fib[i].state == RUN) { cur = &fib[i]; swapcontext(&sched_ctx, &fib[i].ctx); ran = true; }
                unsigned done = 0, bar = 0;
                for (auto &f : fib) { done += f.state == DONE; bar += f.state == BAR; }
                if (done == L.threads) break;
                bool progressed = false;
                // Every fiber has yielded: a warp with some lanes at a collective has all of them there.
                for (unsigned wp = 0; wp < L.threads / 32; wp++) { int c = 0; for (int l = 0; l < 32; l++) c += fib[wp * 32 + l].state == COLL;
                    if (c == 32) progressed |= resolve(&fib[wp * 32]); else if (c) { fprintf(stderr, "partial warp collective\n"); return 3; } }
                if (!progressed && bar + done == L.threads && bar) { for (auto &f : fib) if (f.state == BAR) f.state = RUN; progressed = true; }
                if (!progressed && !ran) { fprintf(stderr, "deadlock\n"); return 3; }
            }
        }
    }
    snprintf(path, sizeof path, "%s/out.bin", dir);
    FILE *f = fopen(path, "wb"); fwrite(g_out, 1, OUT_BYTES, f); fclose(f);
    return 0;
}
