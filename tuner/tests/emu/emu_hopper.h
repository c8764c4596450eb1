// tuner/tests/emu/emu_hopper.h - host versions of tuner/hopper.h's device helpers (mbarriers,
// bulk tensor copies, wgmma) for emu_mma.cpp (-DEXTRA_HELPERS='"emu_hopper.h"'), so that
// matmul_wgmma's and attention_wgmma's candidates run on the CPU: emu_dyn.c rewrites a Hopper
// kernel's source for it (rewrite_for_emu: each wgmma wrapper becomes a call of emu_wgmma or
// emu_wgmma_rs, named barriers calls of emu_bar_sync / emu_bar_arrive, fences, register pins and
// reallocation nothing, the static barrier array a place in the emulated shared memory) and its
// launches pass each tensor map as an EmuMap built from the program's description (emu_tmap) at
// the launch's sizes.
//
// Semantics, as the PTX ISA gives them, executed at once by the issuing thread:
//  - mbarrier: a pending arrival count (init), a transaction byte count; arrive (with expect_tx
//    adding bytes) and a copy's complete_tx; the phase completes when both reach zero, then the
//    count is rearmed. try_wait.parity P is true once the phase of parity P has completed, i.e.
//    while the current phase's parity differs from P; the waiting thread spins (it yields to the
//    scheduler between tries, emu_mma.cpp's SPIN).
//  - a tiled bulk tensor copy moves its whole box: elements outside the tensor read as zeros, rows
//    of 128 bytes land 128-byte swizzled (16-byte chunk c of row r at c ^ (r % 8), by address
//    bits as the hardware does: the stage is 1024-byte aligned); then complete_tx of the box's
//    bytes on the barrier. A load lands only when a thread first tests its barrier (try_wait),
//    not at issue, so that a kernel reading a tile without waiting for its barrier reads what
//    the slot held before, as it could on the hardware, and the emulation shows it. A store
//    copies the box back at issue, elements outside the tensor dropped.
//  - wgmma m64nNk16 (f16/bf16, f32 accumulators), run per thread: thread t of the warpgroup
//    holds rows 16 (t / 32) + (t % 32) / 4 (+ 8) and columns 8 j + 2 (t % 4) (+ 1) of D, and
//    adds A x B over the 16 k of the step to them, A and B read through their descriptors
//    (start >> 4 in bits 0-13, LBO >> 4 in 16-29, SBO >> 4 in 32-45, the 128-byte swizzle):
//    K-major, element (row, k) at start + (row / 8) SBO + (row % 8) 128 + 2 k; MN-major (the
//    tnsp bit), element (k, mn) at start + (mn / 64) LBO + (k / 8) SBO + (k % 8) 128 + 2 (mn %
//    64); each then swizzled. Running it at issue is what a kernel that waits for its wgmma
//    before releasing their stages (wait_group) cannot tell from the hardware's. scale-d 0
//    overwrites D. With A from registers (attention's P V) a row's k lie in four lanes of its
//    warp, so that form is a warp collective (emu_wgmma_rs).
//  - bar.sync / bar.arrive id, n: n threads meet at barrier id (the arriving ones do not wait).
//  - stream-K's workspace: partial tiles stored and loaded four floats at a time, a block's flag
//    set (release) and read (acquire, emu_ld_acquire: a clear flag makes the thread spin). Blocks
//    run one after another in index order, and a block only waits for lower ones, so each flag it
//    reads is set by then; one never set shows as the emulator's deadlock.
// Clusters (pairs, split-K, multicast) are not emulated: such candidates are not generated.
#include <map>
#include <vector>

#define __grid_constant__
#define __align__(x)

// The prelude's pair unpacking (tuner/codegen.c), which the epilogue's operand tiles use.
static inline float hd_unpack_lo(hd_u32 v, half_t) { return f16_val((unsigned short)(v & 0xffffu)); }
static inline float hd_unpack_hi(hd_u32 v, half_t) { return f16_val((unsigned short)(v >> 16)); }
static inline float hd_unpack_lo(hd_u32 v, bf16_t) { return bf16_val((unsigned short)(v & 0xffffu)); }
static inline float hd_unpack_hi(hd_u32 v, bf16_t) { return bf16_val((unsigned short)(v >> 16)); }

struct EmuMap {
    unsigned char *base;
    int esz, rank, swizzle;
    long long dims[5], strides[5]; // strides[d]: bytes between consecutive elements of dim d + 1
    int box[5];
};
typedef EmuMap hd_tmap_t;

// A map as the launch passes it: the program's description, its named dims at the launch's
// sizes (dims[d] = coef x the product of the named sizes where sym[d] is set).
static EmuMap emu_tmap(const void *base, int esz, int rank, const long long *dims, const unsigned *sym,
                       const long long *coef, const long long *strides, const int *box, int swizzle) {
    EmuMap m = {};
    m.base = (unsigned char *)base; m.esz = esz; m.rank = rank; m.swizzle = swizzle;
    for (int d = 0; d < rank; d++) {
        long long v = dims[d];
        if (sym[d]) { v = coef[d]; for (int k = 0; k < 4; k++) if (sym[d] & (1u << k)) v *= g_dims[k]; }
        m.dims[d] = v; m.box[d] = box[d];
        if (d + 1 < rank) m.strides[d] = strides[d];
    }
    if (swizzle != 128 || box[0] * esz != 128) { fprintf(stderr, "tensor map: only 128-byte rows, 128-byte swizzle\n"); exit(3); }
    return m;
}

static inline hd_u32 emu_swz(hd_u32 a) { return a ^ (((a >> 7) & 7u) << 4); }

struct EmuBar { int count, pending, phase; long long tx; };
static std::map<hd_u32, EmuBar> emu_bars;
// Loads issued and not landed yet (emu_tma), in issue order.
struct EmuLoad { hd_u32 dst; EmuMap map; int c[4]; hd_u32 bar; };
static std::vector<EmuLoad> emu_loads;
static void emu_land(hd_u32 bar);
static void emu_bar_done(EmuBar &b) {
    if (b.pending == 0 && b.tx == 0) { b.phase ^= 1; b.pending = b.count; emu_events++; } }
static EmuBar &emu_bar(hd_u32 a) {
    auto it = emu_bars.find(a);
    if (it == emu_bars.end()) { fprintf(stderr, "mbarrier %u used before init\n", a); exit(3); }
    return it->second; }
static void wg_bar_init(hd_u32 a, int n) { emu_bars[a] = EmuBar{n, n, 0, 0}; emu_events++; }
static void wg_expect(hd_u32 a, int bytes) {
    EmuBar &b = emu_bar(a); b.tx += bytes; b.pending--; emu_events++; emu_bar_done(b); }
static void wg_arrive(hd_u32 a) { EmuBar &b = emu_bar(a); b.pending--; emu_events++; emu_bar_done(b); }
static void emu_complete_tx(hd_u32 a, long long bytes) {
    EmuBar &b = emu_bar(a); b.tx -= bytes; emu_events++; emu_bar_done(b); }
static hd_u32 wg_try(hd_u32 a, int parity) { emu_land(a); yield_(SPIN); return emu_bar(a).phase != parity; }
static void wg_wait(hd_u32 a, int parity) { while (!wg_try(a, parity)) { } }
// A stream-K flag (gpu-scope acquire): a thread that finds it clear yields as a spinning one.
static unsigned emu_ld_acquire(const unsigned *p) { if (!*(const volatile unsigned *)p) yield_(SPIN); return *(const volatile unsigned *)p; }

// Element (c0.., c3) of the box at (o0.., o3) -> (global address or null outside, shared offset).
static void emu_copy(bool load, hd_u32 s, const void *map, const int *c) {
    const EmuMap &m = *(const EmuMap *)map;
    const int b0 = m.box[0], b1 = m.rank > 1 ? m.box[1] : 1, b2 = m.rank > 2 ? m.box[2] : 1, b3 = m.rank > 3 ? m.box[3] : 1;
    if (s % 1024) { fprintf(stderr, "a swizzled box at %u: not 1024-byte aligned\n", s); exit(3); }
    for (int i3 = 0; i3 < b3; i3++) for (int i2 = 0; i2 < b2; i2++) for (int i1 = 0; i1 < b1; i1++) for (int i0 = 0; i0 < b0; i0++) {
        const long long g[4] = {c[0] + i0, c[1] + i1, c[2] + i2, c[3] + i3};
        bool in = true; long long off = g[0] * m.esz;
        for (int d = 0; d < m.rank; d++) in = in && g[d] >= 0 && g[d] < m.dims[d];
        for (int d = 1; d < m.rank; d++) off += g[d] * m.strides[d - 1];
        const hd_u32 sa = emu_swz(s + (hd_u32)((((i3 * b2 + i2) * b1 + i1) * b0 + i0) * m.esz));
        if (load) { if (in) memcpy(sm(sa, m.esz), m.base + off, m.esz); else memset(sm(sa, m.esz), 0, m.esz); }
        else if (in) memcpy(m.base + off, sm(sa, m.esz), m.esz);
    }
}
static long long emu_box_bytes(const void *map) {
    const EmuMap &m = *(const EmuMap *)map; long long n = m.esz;
    for (int d = 0; d < m.rank; d++) n *= m.box[d];
    return n; }
static void emu_tma(hd_u32 dst, const void *map, const int *c, hd_u32 bar) {
    emu_bar(bar); // initialised
    emu_loads.push_back(EmuLoad{dst, *(const EmuMap *)map, {c[0], c[1], c[2], c[3]}, bar}); emu_events++; }
// The loads pending on `bar` land, in issue order.
static void emu_land(hd_u32 bar) {
    for (size_t i = 0; i < emu_loads.size();) {
        if (emu_loads[i].bar != bar) { i++; continue; }
        const EmuLoad l = emu_loads[i];
        emu_loads.erase(emu_loads.begin() + (long)i);
        emu_copy(true, l.dst, &l.map, l.c); emu_complete_tx(bar, emu_box_bytes(&l.map));
    } }
static void wg_tma2(hd_u32 dst, const void *map, int c0, int c1, hd_u32 bar) { const int c[4] = {c0, c1, 0, 0}; emu_tma(dst, map, c, bar); }
static void wg_tma3(hd_u32 dst, const void *map, int c0, int c1, int c2, hd_u32 bar) { const int c[4] = {c0, c1, c2, 0}; emu_tma(dst, map, c, bar); }
static void wg_tma4(hd_u32 dst, const void *map, int c0, int c1, int c2, int c3, hd_u32 bar) { const int c[4] = {c0, c1, c2, c3}; emu_tma(dst, map, c, bar); }
// The evict-first forms (operand tiles of the epilogue): the same copies.
static void wg_tma2_ef(hd_u32 dst, const void *map, int c0, int c1, hd_u32 bar, hd_u64) { wg_tma2(dst, map, c0, c1, bar); }
static void wg_tma3_ef(hd_u32 dst, const void *map, int c0, int c1, int c2, hd_u32 bar, hd_u64) { wg_tma3(dst, map, c0, c1, c2, bar); }
static hd_u64 wg_evict_first() { return 0; }
static void wg_tma_st2(const void *map, int c0, int c1, hd_u32 src) { const int c[4] = {c0, c1, 0, 0}; emu_copy(false, src, map, c); }
static void wg_tma_st3(const void *map, int c0, int c1, int c2, hd_u32 src) { const int c[4] = {c0, c1, c2, 0}; emu_copy(false, src, map, c); }

static hd_u32 wg_desc_lo(hd_u32 saddr, hd_u32 lbo) { return ((saddr & 0x3ffffu) >> 4) | ((lbo >> 4) << 16); }
static hd_u64 wg_desc(hd_u32 lo) { return (hd_u64)lo | ((hd_u64)(64u | (1u << 30)) << 32); }
static void wg_fence() {}
static void wg_commit() {}
template <int N> static void wg_wait_group() {}

// One operand element through its descriptor (above): K-major (row, k) or MN-major (k, mn).
static float emu_desc_at(hd_u64 desc, bool mn_major, int row_or_mn, int k, bool bf16) {
    const hd_u32 start = (hd_u32)(desc & 0x3fffu) << 4, lbo = (hd_u32)((desc >> 16) & 0x3fffu) << 4,
                 sbo = (hd_u32)((desc >> 32) & 0x3fffu) << 4;
    if ((desc >> 62) != 1) { fprintf(stderr, "wgmma descriptor: not the 128-byte swizzle\n"); exit(3); }
    const hd_u32 a = mn_major ? start + (row_or_mn / 64) * lbo + (k / 8) * sbo + (k % 8) * 128 + 2 * (row_or_mn % 64)
                              : start + (row_or_mn / 8) * sbo + (row_or_mn % 8) * 128 + 2 * k;
    unsigned short v; memcpy(&v, sm(emu_swz(a), 2), 2);
    return bf16 ? bf16_val(v) : f16_val(v); }
// sd 0: D = A x B (the scale-d predicate false), else D += A x B.
static void emu_wgmma(float *d, hd_u64 da, hd_u64 db, int n, int ta, int tb, int bf16, int sd) {
    const int t = (int)(threadIdx.x % 128), w = t / 32, l = t % 32;
    for (int j = 0; j < n / 8; j++) for (int h = 0; h < 2; h++) for (int e = 0; e < 2; e++) {
        const int r = 16 * w + l / 4 + 8 * h, c = 8 * j + 2 * (l % 4) + e;
        float s = 0;
        for (int k = 0; k < 16; k++)
            s += emu_desc_at(da, ta, r, k, bf16) * emu_desc_at(db, tb, c, k, bf16);
        d[4 * j + 2 * h + e] = (sd ? d[4 * j + 2 * h + e] : 0.0f) + s;
    }
}
// A from registers (wgmma's RS form): warp w's lanes hold rows 16 w.. 16 w + 15 of A as mma.sync's
// A fragment (a0 = A[g][2t..], a1 = A[g + 8][2t..], a2 = A[g][8 + 2t..], a3 = A[g + 8][8 + 2t..]),
// so a row's 16 k lie in four lanes: a warp collective.
enum { OP_WGMMA_RS = OP_EXTRA };
static void emu_wgmma_rs(float *d, const hd_u32 *a, hd_u64 db, int n, int tb, int bf16, int sd) {
    for (int i = 0; i < 4; i++) cur->a[i] = a[i];
    cur->d = d; cur->db = db; cur->xarg[0] = n; cur->xarg[1] = tb; cur->xarg[2] = bf16; cur->xarg[3] = sd;
    cur->op = OP_WGMMA_RS; yield_(COLL); }
static bool emu_hopper_resolve(Fiber *lanes) {
    const int n = lanes[0].xarg[0], tb = lanes[0].xarg[1], bf = lanes[0].xarg[2], sd = lanes[0].xarg[3];
    float (*val)(unsigned short) = bf ? bf16_val : f16_val;
    float A[16][16];
    for (int l = 0; l < 32; l++) {
        const int g = l >> 2, t = l & 3; const Fiber &f = lanes[l];
        const int rows[4] = {g, g + 8, g, g + 8}, ks[4] = {2 * t, 2 * t, 8 + 2 * t, 8 + 2 * t};
        for (int q = 0; q < 4; q++) { A[rows[q]][ks[q]] = val((unsigned short)(f.a[q] & 0xffff)); A[rows[q]][ks[q] + 1] = val((unsigned short)(f.a[q] >> 16)); }
    }
    for (int l = 0; l < 32; l++) {
        Fiber &f = lanes[l];
        for (int j = 0; j < n / 8; j++) for (int h = 0; h < 2; h++) for (int e = 0; e < 2; e++) {
            const int r = l / 4 + 8 * h, c = 8 * j + 2 * (l % 4) + e;
            float s = 0;
            for (int k = 0; k < 16; k++) s += A[r][k] * emu_desc_at(lanes[0].db, tb, c, k, bf);
            f.d[4 * j + 2 * h + e] = (sd ? f.d[4 * j + 2 * h + e] : 0.0f) + s;
        }
        f.state = RUN;
    }
    return true;
}
static const bool emu_hopper_hooked = (emu_extra_resolve = emu_hopper_resolve, true);
// attention_wgmma's helpers (tuner/attn/wgmma.c) that are not wgmma: ex2.approx.
static inline float aw_exp2(float x) { return exp2f(x); }

// wgmma m64nNk32 with FP8 operands, both K-major: element (row, k) at start + (row / 8) SBO +
// (row % 8) 128 + k, swizzled; sd 0 overwrites D.
static void emu_wgmma8(float *d, hd_u64 da, hd_u64 db, int n, int a_e5m2, int b_e5m2, int sd) {
    const int t = (int)(threadIdx.x % 128), w = t / 32, l = t % 32;
    auto at = [](hd_u64 desc, int row, int k, bool e5) {
        const hd_u32 start = (hd_u32)(desc & 0x3fffu) << 4, sbo = (hd_u32)((desc >> 32) & 0x3fffu) << 4;
        return emu_fp8(*sm(emu_swz(start + (row / 8) * sbo + (row % 8) * 128 + k), 1), e5); };
    for (int j = 0; j < n / 8; j++) for (int h = 0; h < 2; h++) for (int e = 0; e < 2; e++) {
        const int r = 16 * w + l / 4 + 8 * h, c = 8 * j + 2 * (l % 4) + e;
        float s = 0;
        for (int k = 0; k < 32; k++) s += at(da, r, k, a_e5m2) * at(db, c, k, b_e5m2);
        d[4 * j + 2 * h + e] = (sd ? d[4 * j + 2 * h + e] : 0.0f) + s;
    }
}
// The FP8 transposer's shared accesses and byte permutes (tuner/gemm/wgmma.c wg_tnsp_helpers).
static hd_u32 wg_lds32(hd_u32 a) { hd_u32 v; memcpy(&v, sm(a, 4), 4); return v; }
static void wg_sts32(hd_u32 a, hd_u32 v) { memcpy(sm(a, 4), &v, 4); }
static hd_u32 __byte_perm(hd_u32 x, hd_u32 y, hd_u32 s) {
    const unsigned long long v = (unsigned long long)x | ((unsigned long long)y << 32);
    hd_u32 r = 0;
    for (int i = 0; i < 4; i++) r |= (hd_u32)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
    return r; }

// Named barriers 0-15: n threads meet; bar.arrive counts without waiting.
struct EmuNamed { int arrived; long long gen; };
static EmuNamed emu_named[16];
// A block starts with no mbarrier and its named barriers clear (emu_mma.cpp, per block).
#define EMU_BLOCK_RESET() (emu_bars.clear(), emu_loads.clear(), memset(emu_named, 0, sizeof emu_named))
static void emu_bar_arrive(int id, int n) {
    EmuNamed &b = emu_named[id & 15];
    if (++b.arrived == n) { b.arrived = 0; b.gen++; emu_events++; } }
static void emu_bar_sync(int id, int n) {
    const long long g = emu_named[id & 15].gen;
    emu_bar_arrive(id, n);
    while (emu_named[id & 15].gen == g) yield_(SPIN); }
