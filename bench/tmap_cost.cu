// bench/tmap_cost.cu - what a wgmma kernel's tensor maps cost at launch, measured apart from
// everything else. matmul_wgmma's blocks build their TMA descriptors themselves (warp 0:
// tensormap.replace on a zeroed shared object per map, tensormap.cp_fenceproxy to the block's
// workspace slot, an acquire before the first copy), so that kernel parameters stay plain
// pointers. Small GEMMs (1000^3: ~10 us) and decode GEMMs pay that on their critical path. This
// program times the same short kernel (132 blocks of 384 threads; thread 0 streams `tiles`
// 128x64 fp16 boxes through a 4-deep mbarrier ring, a consumer warp releases them) with its
// maps coming from:
//   param   - a __grid_constant__ CUtensorMap built by the host (what cuBLAS and CUTLASS do; it
//             would need a new kernel-parameter kind in hidetd's launch contract)
//   build   - built by one thread as hidetd does today (three maps: A, B, staged output)
//   build3  - the same, one lane per map
//   cached  - the slot kept from the previous launch of the same kernel with the same pointers:
//             warp 0 reads the maps, a tag (kernel identity and pointers) and a checksum, and
//             builds only on a mismatch; the first copy still acquires (fence.proxy.tensormap)
//   cached0 - cached without the acquire (not a candidate: measured only to see its share)
//   -pf / -np: with / without prefetch.tensormap of the map before the first copy
// Boxes come from DRAM (every box another part of a 64 MiB tensor) or from L2 (64 boxes of 1 MiB
// in all). Per launch: median over repetitions of a CUDA graph of 20 launches, variants
// alternating. Results: bench/results/2026-11-24-h100-tmap-cost-dw-rows.
//
//   nvcc -gencode arch=compute_90a,code=sm_90a -O3 -o tmap_cost bench/tmap_cost.cu -lcuda && ./tmap_cost
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <vector>

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

enum { V_PARAM, V_PARAM_NOPF, V_BUILD, V_BUILD_PF, V_BUILD3, V_CACHED, V_CACHED_PF, V_CACHED0, V_COUNT };
static const char *vname[V_COUNT] = {"param", "param-np", "build", "build-pf", "build3", "cached", "cached-pf", "cached0"};

constexpr int ROWS = 8192, COLS = 4096;     // A: 64 MiB of fp16, more than L2 holds
constexpr int BOX_R = 128, BOX_C = 64;      // one 16 KiB box per stage
constexpr int STAGES = 4, SLOT = 448;       // slot: 3 maps, tag (magic, 3 pointers), checksum
constexpr unsigned long long MAGIC = 0x68696465746d6170ull;

__device__ __forceinline__ unsigned smem_u32(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

// One 2-D map of A (dims COLS x ROWS, box BOX_C x BOX_R, 128-byte swizzle) in shared memory.
__device__ __forceinline__ void build_map(unsigned tm, const void *g)
{
    asm volatile("tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%0], %1;" ::"r"(tm), "l"(g) : "memory");
    asm volatile("tensormap.replace.tile.rank.shared::cta.b1024.b32 [%0], 1;" ::"r"(tm) : "memory");
    asm volatile("tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], 0, %1;" ::"r"(tm), "n"(COLS) : "memory");
    asm volatile("tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], 1, %1;" ::"r"(tm), "n"(ROWS) : "memory");
    asm volatile("tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%0], 0, %1;" ::"r"(tm), "n"(BOX_C) : "memory");
    asm volatile("tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%0], 1, %1;" ::"r"(tm), "n"(BOX_R) : "memory");
    asm volatile("tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%0], 0, 1;" ::"r"(tm) : "memory");
    asm volatile("tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%0], 1, 1;" ::"r"(tm) : "memory");
    asm volatile("tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%0], 0, %1;" ::"r"(tm), "n"(COLS * 2) : "memory");
    asm volatile("tensormap.replace.tile.elemtype.shared::cta.b1024.b32 [%0], 6;" ::"r"(tm) : "memory");
    asm volatile("tensormap.replace.tile.interleave_layout.shared::cta.b1024.b32 [%0], 0;" ::"r"(tm) : "memory");
    asm volatile("tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [%0], 3;" ::"r"(tm) : "memory");
    asm volatile("tensormap.replace.tile.fill_mode.shared::cta.b1024.b32 [%0], 0;" ::"r"(tm) : "memory");
}

__device__ __forceinline__ unsigned long long mix(unsigned long long lo, unsigned long long hi, int lane)
{
    unsigned long long h = (lo ^ (0x9e3779b97f4a7c15ull * (unsigned long long)(lane + 1))) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
    h = (h + hi) * 0x94d049bb133111ebull;
    return h ^ (h >> 29);
}

// The slot's tag, 16 bytes per lane at lanes 24 and 25: the magic and the three pointers (all A
// in this benchmark).
__device__ __forceinline__ ulonglong2 tag_word(int lane, const void *a)
{
    return make_ulonglong2(lane == 24 ? MAGIC : (unsigned long long)a, (unsigned long long)a);
}

// Warp 0: the checksum of the slot's first 26 16-byte words, lane i holding word i.
__device__ unsigned long long slot_sum(ulonglong2 word)
{
    const int lane = threadIdx.x & 31;
    unsigned long long h = lane < 26 ? mix(word.x, word.y, lane) : 0ull;
    for (int o = 16; o; o >>= 1)
        h ^= __shfl_xor_sync(0xffffffffu, h, o);
    return h;
}

// Warp 0: the three maps (all of A here) into the block's slot; `lanes` 1 or 3 build them.
__device__ void build_slot(char *slot, const void *a, unsigned *tm_s, int lanes, bool tag)
{
    const int lane = threadIdx.x & 31;
    tm_s[lane] = 0u;
    tm_s[lane + 32] = 0u;
    tm_s[lane + 64] = 0u;
    __syncwarp();
    const unsigned s = smem_u32(tm_s);
    if (lanes == 1 && lane == 0)
        for (int m = 0; m < 3; m++)
            build_map(s + 128 * m, a);
    if (lanes == 3 && lane < 3)
        build_map(s + 128 * lane, a);
    __syncwarp();
    for (int m = 0; m < 3; m++)
        asm volatile("tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned "
                     "[%0], [%1], 128;" ::"l"(slot + 128 * m),
                     "r"(s + 128 * m)
                     : "memory");
    if (tag) {
        // The checksum covers what the next launch reads: maps (from shared), magic, pointers.
        const ulonglong2 word = lane < 24 ? reinterpret_cast<const ulonglong2 *>(tm_s)[lane] : tag_word(lane, a);
        const unsigned long long h = slot_sum(word);
        ulonglong2 *w = reinterpret_cast<ulonglong2 *>(slot);
        if (lane == 24 || lane == 25)
            w[lane] = word;
        if (lane == 26)
            w[lane] = make_ulonglong2(h, 0ull);
    }
}

// Warp 0: whether the slot holds this kernel's maps for these pointers, intact.
__device__ bool slot_valid(const char *slot, const void *a)
{
    const int lane = threadIdx.x & 31;
    const ulonglong2 word = lane < 27 ? reinterpret_cast<const ulonglong2 *>(slot)[lane] : make_ulonglong2(0, 0);
    const unsigned long long h = slot_sum(word);
    bool ok = true;
    if (lane == 24 || lane == 25) {
        const ulonglong2 want = tag_word(lane, a);
        ok = word.x == want.x && word.y == want.y;
    }
    if (lane == 26)
        ok = word.x == h;
    return __all_sync(0xffffffffu, ok);
}

template <int V>
__global__ void __launch_bounds__(384, 1) stream(const __grid_constant__ CUtensorMap pmap, const __half *a, char *ws,
                                                 int tiles, int dram, int *sink)
{
    extern __shared__ __align__(1024) unsigned char dyn[];
    __shared__ alignas(128) unsigned tm_s[96];
    __shared__ alignas(8) unsigned long long bars[2 * STAGES];
    char *slot = ws + (size_t)blockIdx.x * SLOT;
    const unsigned ring = (smem_u32(dyn) + 1023u) & ~1023u, bar0 = smem_u32(bars);
    if (threadIdx.x < 32) {
        if (V == V_BUILD || V == V_BUILD_PF)
            build_slot(slot, a, tm_s, 1, false);
        if (V == V_BUILD3)
            build_slot(slot, a, tm_s, 3, false);
        if ((V == V_CACHED || V == V_CACHED_PF || V == V_CACHED0) && !slot_valid(slot, a))
            build_slot(slot, a, tm_s, 3, true);
    }
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar0 + 8 * s));
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar0 + 8 * (STAGES + s)));
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    const void *map = V == V_PARAM || V == V_PARAM_NOPF ? (const void *)&pmap : (const void *)slot;
    if (threadIdx.x == 0) {
        if (V != V_PARAM && V != V_PARAM_NOPF && V != V_CACHED0)
            asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(map) : "memory");
        if (V == V_PARAM || V == V_BUILD_PF || V == V_CACHED_PF)
            asm volatile("prefetch.tensormap [%0];" ::"l"(map) : "memory");
        for (int t = 0, s = 0, ph = 0; t < tiles; t++) {
            unsigned ok = 0;
            while (!ok)
                asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                             : "=r"(ok)
                             : "r"(bar0 + 8 * (STAGES + s)), "r"(ph ^ 1)
                             : "memory");
            const unsigned full = bar0 + 8 * s;
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(full), "n"(BOX_R * BOX_C * 2)
                         : "memory");
            // L2: 64 boxes of 1 MiB in all; DRAM: every box another one of the 64 MiB.
            const long long box = (long long)blockIdx.x * tiles + t;
            const int row = (int)(box * BOX_R % ROWS), col = dram ? (int)(box / (ROWS / BOX_R) % (COLS / BOX_C)) * BOX_C : 0;
            asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                         ::"r"(ring + s * BOX_R * BOX_C * 2), "l"(map), "r"(col), "r"(row), "r"(full)
                         : "memory");
            if (++s == STAGES) {
                s = 0;
                ph ^= 1;
            }
        }
    } else if (threadIdx.x == 128) {
        // The consumer: waits for each stage and hands it back; sums one word so nothing is dead.
        unsigned acc = 0;
        for (int t = 0, s = 0, ph = 0; t < tiles; t++) {
            unsigned ok = 0;
            while (!ok)
                asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                             : "=r"(ok)
                             : "r"(bar0 + 8 * s), "r"(ph)
                             : "memory");
            unsigned v;
            asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(ring + s * BOX_R * BOX_C * 2) : "memory");
            acc += v;
            asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar0 + 8 * (STAGES + s)) : "memory");
            if (++s == STAGES) {
                s = 0;
                ph ^= 1;
            }
        }
        if (acc == 0x12345678u)
            sink[0] = 1;
    }
}

typedef void (*kern_t)(const CUtensorMap, const __half *, char *, int, int, int *);
static kern_t kernels[V_COUNT] = {stream<V_PARAM>,  stream<V_PARAM_NOPF>, stream<V_BUILD>,     stream<V_BUILD_PF>,
                                  stream<V_BUILD3>, stream<V_CACHED>,     stream<V_CACHED_PF>, stream<V_CACHED0>};

int main()
{
    const int blocks = 132, threads = 384, smem = STAGES * BOX_R * BOX_C * 2 + 1024, reps = 25, per_graph = 20;
    __half *a;
    char *ws;
    int *sink;
    CK(cudaMalloc(&a, (size_t)ROWS * COLS * 2));
    CK(cudaMemset(a, 0, (size_t)ROWS * COLS * 2));
    CK(cudaMalloc(&ws, (size_t)blocks * SLOT));
    CK(cudaMemset(ws, 0, (size_t)blocks * SLOT));
    CK(cudaMalloc(&sink, 4));
    CUtensorMap pmap;
    cuuint64_t dims[2] = {COLS, ROWS}, strides[1] = {COLS * 2};
    cuuint32_t box[2] = {BOX_C, BOX_R}, es[2] = {1, 1};
    if (cuTensorMapEncodeTiled(&pmap, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, a, dims, strides, box, es,
                               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                               CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
        fprintf(stderr, "cuTensorMapEncodeTiled failed\n");
        return 1;
    }
    for (int v = 0; v < V_COUNT; v++)
        CK(cudaFuncSetAttribute(kernels[v], cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    printf("variant    data  tiles  us/launch (median of %d graphs of %d launches)  min\n", reps, per_graph);
    for (int dram = 0; dram < 2; dram++)
    for (int tiles : {1, 4, 16}) {
        cudaGraphExec_t exec[V_COUNT];
        for (int v = 0; v < V_COUNT; v++) {
            cudaGraph_t g;
            CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
            for (int i = 0; i < per_graph; i++)
                kernels[v]<<<blocks, threads, smem, st>>>(pmap, a, ws, tiles, dram, sink);
            CK(cudaStreamEndCapture(st, &g));
            CK(cudaGraphInstantiate(&exec[v], g, 0));
            CK(cudaGraphDestroy(g));
            CK(cudaGraphLaunch(exec[v], st)); // warm-up (and, for cached, the first build)
        }
        CK(cudaStreamSynchronize(st));
        std::vector<float> t[V_COUNT];
        for (int r = 0; r < reps; r++)
            for (int v = 0; v < V_COUNT; v++) {
                // Another variant ran between: the cached ones must find their own tag again.
                if (v == V_CACHED || v == V_CACHED_PF || v == V_CACHED0) {
                    CK(cudaMemsetAsync(ws, 0, (size_t)blocks * SLOT, st));
                    CK(cudaGraphLaunch(exec[v], st));
                }
                CK(cudaEventRecord(e0, st));
                CK(cudaGraphLaunch(exec[v], st));
                CK(cudaEventRecord(e1, st));
                CK(cudaEventSynchronize(e1));
                float ms;
                CK(cudaEventElapsedTime(&ms, e0, e1));
                t[v].push_back(ms * 1000.0f / per_graph);
            }
        for (int v = 0; v < V_COUNT; v++) {
            std::sort(t[v].begin(), t[v].end());
            printf("%-9s %5s %5d  %8.2f  %8.2f\n", vname[v], dram ? "dram" : "l2", tiles, t[v][reps / 2], t[v][0]);
        }
        for (int v = 0; v < V_COUNT; v++)
            CK(cudaGraphExecDestroy(exec[v]));
    }
    CK(cudaGetLastError());
    return 0;
}
