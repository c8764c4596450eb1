// tuner/tests/emu/emu_kernel.cpp - runs one generated conv2d_grouped kernel on the CPU (a developer
// check for machines without a GPU; not part of the test suite: emulate.sh drives it).
//
// The kernel's source after the prelude is compiled as host C++ against host versions of the
// prelude helpers it uses. Every CUDA thread of a block is a ucontext fiber; __syncthreads and
// mma.sync are collective: a warp's mma runs when its 32 lanes have arrived, their fragments
// combined as the PTX ISA lays out m16n8k16 (A: a0 rows gid, k 2*tig..+1; a1 rows gid+8; a2/a3
// k + 8; B: b0 k 2*tig..+1, col gid; b1 k + 8; C/D: c0,c1 row gid, c2,c3 row gid+8). cp.async
// copies happen at issue (argument 1: catches a buffer overwritten while others still read it)
// or at the wait that retires them (argument 0: catches reads before the wait). Shared memory
// starts as 0xff bytes (f16 NaN) so that a read of anything never written shows. The output is
// compared with a naive convolution in double (relative error 5e-3 of 1 + |ref|).
// Build: g++ -std=c++17 -DDEFS='"kN.h"' -DKERNEL='"kN.kern"' (emulate.sh writes both).
#include <ucontext.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
#include <deque>
#include <cstdint>
typedef unsigned int hd_u32;
struct half_t { unsigned short x; };
struct bf16_t { unsigned short x; };
static inline float hd_f32(float v) { return v; }
static inline float hd_f32(half_t v) { _Float16 f; memcpy(&f, &v.x, 2); return (float)f; }
template <typename T> T hd_from_f32(float v);
template <> float hd_from_f32<float>(float v) { return v; }
template <> half_t hd_from_f32<half_t>(float v) { _Float16 f = (_Float16)v; half_t h; memcpy(&h.x, &f, 2); return h; }
template <typename T> hd_u32 hd_pack2(float lo, float hi);
template <> hd_u32 hd_pack2<half_t>(float lo, float hi) { return hd_from_f32<half_t>(lo).x | ((hd_u32)hd_from_f32<half_t>(hi).x << 16); }
struct hd_v4 { hd_u32 x, y, z, w; };
static hd_v4 hd_ld16(const void *p) { if ((uintptr_t)p % 16) { fprintf(stderr, "misaligned ld16\n"); exit(3); } hd_v4 v; memcpy(&v, p, 16); return v; }
static void hd_st16(void *p, hd_v4 v) { if ((uintptr_t)p % 16) { fprintf(stderr, "misaligned st16\n"); exit(3); } memcpy(p, &v, 16); }
static inline float hd_relu(float x) { return x > 0.0f ? x : 0.0f; }
#define __global__
#define __launch_bounds__(...)
#define __shared__
#define __align__(x)
#define __restrict__
struct dim3_ { unsigned x, y, z; };
enum { RUN, BAR, MMA, DONE };
struct Copy { void *dst; const void *src; bool pred; };
struct Fiber {
    ucontext_t ctx; dim3_ tid; int state; std::vector<char> stack;
    float *d; hd_u32 a[4], b[2];
    std::deque<std::vector<Copy>> groups; std::vector<Copy> open;
};
static ucontext_t sched_ctx;
static Fiber *cur;
static dim3_ blockIdx_;
#define threadIdx (cur->tid)
#define blockIdx blockIdx_
static int EAGER = 1;
static void yield_(int st) { cur->state = st; swapcontext(&cur->ctx, &sched_ctx); }
static void __syncthreads() { yield_(BAR); }
static void do_copy(const Copy &c) { if (c.pred) memcpy(c.dst, c.src, 16); else memset(c.dst, 0, 16); }
static void hd_cp_async16(void *dst, const void *src, bool pred) {
    if ((uintptr_t)dst % 16 || (pred && (uintptr_t)src % 16)) { fprintf(stderr, "misaligned cp.async\n"); exit(3); }
    Copy c{dst, src, pred}; if (EAGER) do_copy(c); else cur->open.push_back(c); }
static void hd_cp_async_commit() { cur->groups.push_back(cur->open); cur->open.clear(); }
template <int N> static void hd_cp_async_wait() { while ((int)cur->groups.size() > N) { for (auto &c : cur->groups.front()) do_copy(c); cur->groups.pop_front(); } }
static void hd_mma_f16_16816(float *d, const hd_u32 *a, const hd_u32 *b) {
    for (int i = 0; i < 4; i++) cur->a[i] = a[i];
    cur->b[0] = b[0]; cur->b[1] = b[1]; cur->d = d; yield_(MMA); }
static void hd_mma_bf16_16816(float *d, const hd_u32 *a, const hd_u32 *b) { hd_mma_f16_16816(d, a, b); }
static float lo16(hd_u32 v) { half_t h{(unsigned short)(v & 0xffff)}; return hd_f32(h); }
static float hi16(hd_u32 v) { half_t h{(unsigned short)(v >> 16)}; return hd_f32(h); }
static void resolve_mma(Fiber *lanes) {
    float A[16][16], B[16][8], Cm[16][8];
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, t = l & 3; Fiber &f = lanes[l];
        A[g][2*t] = lo16(f.a[0]); A[g][2*t+1] = hi16(f.a[0]);
        A[g+8][2*t] = lo16(f.a[1]); A[g+8][2*t+1] = hi16(f.a[1]);
        A[g][2*t+8] = lo16(f.a[2]); A[g][2*t+9] = hi16(f.a[2]);
        A[g+8][2*t+8] = lo16(f.a[3]); A[g+8][2*t+9] = hi16(f.a[3]);
        B[2*t][g] = lo16(f.b[0]); B[2*t+1][g] = hi16(f.b[0]);
        B[2*t+8][g] = lo16(f.b[1]); B[2*t+9][g] = hi16(f.b[1]);
        Cm[g][2*t] = f.d[0]; Cm[g][2*t+1] = f.d[1]; Cm[g+8][2*t] = f.d[2]; Cm[g+8][2*t+1] = f.d[3];
    }
    for (int i = 0; i < 16; i++) for (int j = 0; j < 8; j++) { float s = Cm[i][j]; for (int k = 0; k < 16; k++) s += A[i][k] * B[k][j]; Cm[i][j] = s; }
    for (int l = 0; l < 32; l++) { int g = l >> 2, t = l & 3; Fiber &f = lanes[l];
        f.d[0] = Cm[g][2*t]; f.d[1] = Cm[g][2*t+1]; f.d[2] = Cm[g+8][2*t]; f.d[3] = Cm[g+8][2*t+1]; f.state = RUN; }
}
#include DEFS
alignas(16) unsigned char hd_smem[256 * 1024];
#if F32OUT
typedef float OUT_T;
#else
typedef half_t OUT_T;
#endif
#include KERNEL
static const half_t *g_in0, *g_in1, *g_in2; static OUT_T *g_out;
static void entry() {
#if BIAS
    hd_conv2d_grouped(g_in0, g_in1, g_in2, g_out);
#else
    hd_conv2d_grouped(g_in0, g_in1, g_out);
#endif
    cur->state = DONE; swapcontext(&cur->ctx, &sched_ctx);
}
int main(int argc, char **argv) {
    EAGER = argc > 1 ? atoi(argv[1]) : 1;
    const int cpg = C_ / G_, kpg = K_ / G_;
    std::vector<half_t> x(N_ * H_ * W_ * C_), w(K_ * R_ * S_ * cpg), bias(K_);
    srand(7);
    auto rnd = [] { return hd_from_f32<half_t>((rand() % 2001 - 1000) / 1000.0f); };
    for (auto &v : x) v = rnd(); for (auto &v : w) v = rnd(); for (auto &v : bias) v = rnd();
    std::vector<OUT_T> out(N_ * P_ * Q_ * K_);
    for (auto &v : out) v = hd_from_f32<OUT_T>(12345.0f);
    g_in0 = x.data(); g_in1 = w.data(); g_in2 = bias.data(); g_out = out.data();
    std::vector<Fiber> fib(THREADS);
    for (auto &f : fib) f.stack.resize(256 * 1024);
    memset(hd_smem, 0x7f, sizeof hd_smem); // garbage (f16 NaN-ish) to catch unwritten reads
    for (unsigned by = 0; by < GY; by++) for (unsigned bx = 0; bx < GX; bx++) {
        blockIdx_ = {bx, by, 0};
        memset(hd_smem, 0xff, SMEM);
        for (int i = 0; i < THREADS; i++) { Fiber &f = fib[i]; f.tid = {(unsigned)i, 0, 0}; f.state = RUN; f.groups.clear(); f.open.clear();
            getcontext(&f.ctx); f.ctx.uc_stack.ss_sp = f.stack.data(); f.ctx.uc_stack.ss_size = f.stack.size(); f.ctx.uc_link = nullptr; makecontext(&f.ctx, entry, 0); }
        for (;;) {
            bool ran = false;
            for (int i = 0; i < THREADS; i++) if (fib[i].state == RUN) { cur = &fib[i]; swapcontext(&sched_ctx, &fib[i].ctx); ran = true; }
            int done = 0, bar = 0, mma = 0;
            for (auto &f : fib) { done += f.state == DONE; bar += f.state == BAR; mma += f.state == MMA; }
            if (done == THREADS) break;
            bool progressed = false;
            for (int wp = 0; wp < THREADS / 32; wp++) { int m = 0, d = 0; for (int l = 0; l < 32; l++) { m += fib[wp*32+l].state == MMA; d += fib[wp*32+l].state == DONE; }
                if (m == 32) { resolve_mma(&fib[wp * 32]); progressed = true; } else if (m && m + d == 32) { fprintf(stderr, "partial warp mma\n"); return 3; } }
            if (!progressed && bar + done == THREADS && bar) { if (done) { fprintf(stderr, "barrier with exited threads\n"); } for (auto &f : fib) if (f.state == BAR) f.state = RUN; progressed = true; }
            if (!progressed && !ran) { fprintf(stderr, "deadlock: bar %d mma %d done %d\n", bar, mma, done); return 3; }
        }
    }
    // reference
    double maxerr = 0; long bad = 0;
    for (long n = 0; n < N_; n++) for (long p = 0; p < P_; p++) for (long q = 0; q < Q_; q++) for (long k = 0; k < K_; k++) {
        long g = k / kpg; double s = 0;
        for (int r = 0; r < R_; r++) for (int t = 0; t < S_; t++) { long h = p * SH - PH + r * DH, ww = q * SW - PW + t * DW;
            if (h < 0 || h >= H_ || ww < 0 || ww >= W_) continue;
            for (int ci = 0; ci < cpg; ci++) s += (double)hd_f32(x[((n * H_ + h) * W_ + ww) * C_ + g * cpg + ci]) * hd_f32(w[((k * R_ + r) * S_ + t) * cpg + ci]); }
#if BIAS
        s += hd_f32(bias[k]); if (s < 0) s = 0;
#endif
        double got = hd_f32(out[((n * P_ + p) * Q_ + q) * K_ + k]);
        double e = fabs(got - s) / (1.0 + fabs(s));
        if (!(e <= 5e-3)) { if (bad < 5) fprintf(stderr, "n%ld p%ld q%ld k%ld got %g want %g\n", n, p, q, k, got, s); bad++; }
        if (e > maxerr || e != e) maxerr = e;
    }
    printf("%s: bad %ld of %ld, max rel err %.2e\n", bad ? "WRONG" : "ok", bad, (long)out.size(), maxerr);
    return bad ? 1 : 0;
}
