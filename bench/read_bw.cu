// bench/read_bw.cu - how fast a decode-shaped stream can read on this GPU, by load mechanism.
// attention_decode (tuner/attn/decode.c) reads K and V at 1.02 of the device-to-device copy
// bandwidth on issue 38's largest rows; PyTorch's best backend reads the same bytes at 1.13. This
// program reads the same bytes with nothing else to do, so that the load path's own ceiling is
// known before the kernel is changed:
//   cpasync S T B - decode's ring: B threads issue 16-byte cp.async.cg of T keys of K and V into
//                   padded rows (D + 8 elements), S slots, wait_group + __syncthreads per tile
//   bulkrow S T   - a producer warp issues one cp.async.bulk (the copy engine, no tensor map)
//                   per 256-byte row into the same padded rows, an mbarrier ring of S slots,
//                   four consumer warps
//   bulktile S T  - the same with one bulk copy per tile of K and one of V (contiguous in the
//                   bhsd layout; rows unpadded)
//   ldg U         - no shared memory: each thread keeps U 16-byte loads in flight
// Consumers read every byte of a slot from shared memory once (as the mma fragments would) and
// fold it into a value that is stored, so nothing is optimised away. Shapes: issue 38's decode
// rows, K and V [heads, Skv, 128] f16 for heads = 16 x 8 and Skv 4096 / 32768 (and 1024: 64 MiB,
// the size of issue 41's FP8 decode weights), cut into `split` chunks per head as
// attention_decode's grid does. Per variant: the median of 15 launches after
// 3, TB/s of K and V read, and that over the copy bandwidth (bytes read + written per second of a
// 1 GiB cudaMemcpy, bench.py's convention).
//
//   nvcc -gencode arch=compute_90a,code=sm_90a -O3 -o read_bw bench/read_bw.cu && ./read_bw
#include <algorithm>
#include <cstdio>
#include <cstdlib>
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

constexpr int D = 128;             // head dim, f16
constexpr int ROWB = D * 2;        // bytes of one key's row
constexpr int PROWB = ROWB + 16;   // a padded shared row (decode's D + 8 elements)

struct chunk_t {
    long long k0, k1;
};

__device__ __forceinline__ chunk_t chunk_of(long long skv, int split, int tile)
{
    long long ch = (skv + split - 1) / split;
    ch = (ch + tile - 1) / tile * tile;
    chunk_t c;
    c.k0 = (long long)blockIdx.x * ch;
    c.k1 = c.k0 + ch < skv ? c.k0 + ch : skv;
    return c;
}

__device__ __forceinline__ unsigned saddr(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ unsigned fold16(const void *s)
{
    const uint4 v = *reinterpret_cast<const uint4 *>(s);
    return v.x ^ v.y ^ v.z ^ v.w;
}

// ---- decode's cp.async ring ----------------------------------------------------------------------
template <int S, int T, int B>
__global__ void __launch_bounds__(B) rd_cpasync(const char *K, const char *V, long long skv, int split, unsigned *out)
{
    extern __shared__ __align__(16) unsigned char sm[];
    const chunk_t c = chunk_of(skv, split, T);
    const int nt = c.k1 > c.k0 ? (int)((c.k1 - c.k0 + T - 1) / T) : 0;
    const char *kb = K + (long long)blockIdx.y * skv * ROWB, *vb = V + (long long)blockIdx.y * skv * ROWB;
    auto load = [&](int t) {
        unsigned char *sk = sm + (t % S) * 2 * T * PROWB, *sv = sk + T * PROWB;
        for (int i = threadIdx.x; i < T * (ROWB / 16); i += B) {
            const int r = i / (ROWB / 16), cc = (i % (ROWB / 16)) * 16;
            const long long j = c.k0 + (long long)t * T + r;
            const bool ok = j < c.k1;
            const long long off = (ok ? j : 0) * ROWB + cc;
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(saddr(sk + r * PROWB + cc)),
                         "l"(kb + off), "r"(ok ? 16 : 0) : "memory");
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(saddr(sv + r * PROWB + cc)),
                         "l"(vb + off), "r"(ok ? 16 : 0) : "memory");
        }
    };
    for (int t = 0; t < S - 1; t++) {
        if (t < nt)
            load(t);
        asm volatile("cp.async.commit_group;" ::: "memory");
    }
    unsigned acc = 0;
    for (int t = 0; t < nt; t++) {
        asm volatile("cp.async.wait_group %0;" ::"n"(S - 2) : "memory");
        __syncthreads();
        if (t + S - 1 < nt)
            load(t + S - 1);
        asm volatile("cp.async.commit_group;" ::: "memory");
        const unsigned char *sk = sm + (t % S) * 2 * T * PROWB;
        for (int i = threadIdx.x; i < 2 * T * (ROWB / 16); i += B)
            acc += fold16(sk + (i / (ROWB / 16)) * PROWB + (i % (ROWB / 16)) * 16);
    }
    if (acc == 0x9e3779b9u)
        out[blockIdx.y * gridDim.x + blockIdx.x] = acc;
}

// ---- the copy engine: mbarrier ring, a producer warp, four consumer warps --------------------------
__device__ __forceinline__ void mb_init(unsigned long long *b, unsigned n)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(saddr(b)), "r"(n) : "memory");
}
__device__ __forceinline__ void mb_wait(unsigned long long *b, unsigned parity)
{
    asm volatile("{\n.reg .pred p;\nW: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n@!p bra W;\n}\n" ::"r"(
                     saddr(b)),
                 "r"(parity)
                 : "memory");
}
__device__ __forceinline__ void mb_expect(unsigned long long *b, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(saddr(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mb_arrive(unsigned long long *b)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(saddr(b)) : "memory");
}
__device__ __forceinline__ void bulk(void *dst, const void *src, unsigned bytes, unsigned long long *b)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     saddr(dst)),
                 "l"(src), "r"(bytes), "r"(saddr(b))
                 : "memory");
}

// ROWS: one copy per row (padded rows) or one per tile of K and of V (unpadded).
template <int S, int T, bool ROWS>
__global__ void __launch_bounds__(160) rd_bulk(const char *K, const char *V, long long skv, int split, unsigned *out)
{
    extern __shared__ __align__(16) unsigned char sm[];
    constexpr int RS = ROWS ? PROWB : ROWB;
    unsigned long long *full = reinterpret_cast<unsigned long long *>(sm + S * 2 * T * RS);
    unsigned long long *empty = full + S;
    const chunk_t c = chunk_of(skv, split, T);
    const int nt = c.k1 > c.k0 ? (int)((c.k1 - c.k0 + T - 1) / T) : 0;
    const char *kb = K + (long long)blockIdx.y * skv * ROWB, *vb = V + (long long)blockIdx.y * skv * ROWB;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (threadIdx.x == 0) {
        for (int s = 0; s < S; s++) {
            mb_init(&full[s], 1);
            mb_init(&empty[s], 128);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (warp == 4) {
        for (int t = 0; t < nt; t++) {
            const int s = t % S;
            if (t >= S)
                mb_wait(&empty[s], ((t / S) - 1) & 1);
            const long long j0 = c.k0 + (long long)t * T;
            const int rows = (int)(c.k1 - j0 < T ? c.k1 - j0 : T);
            unsigned char *sk = sm + s * 2 * T * RS, *sv = sk + T * RS;
            if (lane == 0)
                mb_expect(&full[s], 2u * rows * ROWB);
            __syncwarp();
            if (ROWS) {
                for (int r = lane; r < rows; r += 32) {
                    bulk(sk + r * RS, kb + (j0 + r) * ROWB, ROWB, &full[s]);
                    bulk(sv + r * RS, vb + (j0 + r) * ROWB, ROWB, &full[s]);
                }
            } else if (lane == 0) {
                bulk(sk, kb + j0 * ROWB, rows * ROWB, &full[s]);
                bulk(sv, vb + j0 * ROWB, rows * ROWB, &full[s]);
            }
        }
        return;
    }
    unsigned acc = 0;
    for (int t = 0; t < nt; t++) {
        const int s = t % S;
        mb_wait(&full[s], (t / S) & 1);
        const unsigned char *sk = sm + s * 2 * T * RS;
        for (int i = threadIdx.x; i < 2 * T * (ROWB / 16); i += 128)
            acc += fold16(sk + (i / (ROWB / 16)) * RS + (i % (ROWB / 16)) * 16);
        mb_arrive(&empty[s]);
    }
    if (acc == 0x9e3779b9u)
        out[blockIdx.y * gridDim.x + blockIdx.x] = acc;
}

// ---- straight to registers --------------------------------------------------------------------
template <int U>
__global__ void __launch_bounds__(128) rd_ldg(const char *K, const char *V, long long skv, int split, unsigned *out)
{
    const chunk_t c = chunk_of(skv, split, 1);
    unsigned acc = 0;
    for (int w = 0; w < 2; w++) {
        const uint4 *p = reinterpret_cast<const uint4 *>((w ? V : K) + ((long long)blockIdx.y * skv + c.k0) * ROWB);
        const long long n = (c.k1 - c.k0) * (ROWB / 16);
        long long i = threadIdx.x;
        for (; i + (U - 1) * 128 < n; i += U * 128) {
            uint4 v[U];
#pragma unroll
            for (int u = 0; u < U; u++)
                asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                             : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                             : "l"(p + i + u * 128));
#pragma unroll
            for (int u = 0; u < U; u++)
                acc += v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
        }
        for (; i < n; i += 128)
            acc += fold16(p + i);
    }
    if (acc == 0x9e3779b9u)
        out[blockIdx.y * gridDim.x + blockIdx.x] = acc;
}

// ---- driver ----------------------------------------------------------------------------------
typedef void (*kern_t)(const char *, const char *, long long, int, unsigned *);

struct variant {
    const char *name;
    kern_t k;
    int threads;
    size_t smem;
};

static float time_one(const variant &v, const char *K, const char *V, long long skv, int heads, int split, unsigned *out)
{
    dim3 grid(split, heads);
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> ts;
    for (int r = 0; r < 18; r++) {
        CK(cudaEventRecord(e0));
        v.k<<<grid, v.threads, v.smem>>>(K, V, skv, split, out);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 3)
            ts.push_back(ms * 1e3f);
    }
    CK(cudaGetLastError());
    std::sort(ts.begin(), ts.end());
    return ts[ts.size() / 2];
}

template <int S, int T, int B>
static variant cpasync(const char *name)
{
    variant v{name, rd_cpasync<S, T, B>, B, (size_t)S * 2 * T * PROWB};
    CK(cudaFuncSetAttribute(v.k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)v.smem));
    return v;
}

template <int S, int T, bool ROWS>
static variant bulkv(const char *name)
{
    variant v{name, rd_bulk<S, T, ROWS>, 160, (size_t)S * 2 * T * (ROWS ? PROWB : ROWB) + 16 * S};
    CK(cudaFuncSetAttribute(v.k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)v.smem));
    return v;
}

int main()
{
    const long long big = 128LL * 32768 * ROWB; // K (or V) of the largest row: 1 GiB
    char *K, *V;
    unsigned *out;
    CK(cudaMalloc(&K, big));
    CK(cudaMalloc(&V, big));
    CK(cudaMalloc(&out, 1 << 20));
    CK(cudaMemset(K, 1, big));
    CK(cudaMemset(V, 2, big));

    // The copy bandwidth: 1 GiB device to device (read + written bytes per second).
    float copy_us;
    {
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        std::vector<float> ts;
        for (int r = 0; r < 8; r++) {
            CK(cudaEventRecord(e0));
            CK(cudaMemcpyAsync(V, K, big, cudaMemcpyDeviceToDevice));
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            ts.push_back(ms * 1e3f);
        }
        std::sort(ts.begin(), ts.end());
        copy_us = ts[ts.size() / 2];
    }
    const double copy_tbps = 2.0 * big / copy_us / 1e6;
    printf("copy 1 GiB: %.1f us, %.3f TB/s (read + write)\n", copy_us, copy_tbps);

    std::vector<variant> vs = {
        cpasync<4, 64, 128>("cpasync s4 t64 b128"), cpasync<2, 64, 128>("cpasync s2 t64 b128"),
        cpasync<6, 32, 128>("cpasync s6 t32 b128"), cpasync<3, 128, 256>("cpasync s3 t128 b256"),
        cpasync<8, 32, 256>("cpasync s8 t32 b256"),
        bulkv<4, 64, true>("bulkrow s4 t64"),       bulkv<8, 32, true>("bulkrow s8 t32"),
        bulkv<3, 32, true>("bulkrow s3 t32"),       bulkv<6, 16, true>("bulkrow s6 t16"),
        bulkv<4, 64, false>("bulktile s4 t64"),     bulkv<8, 32, false>("bulktile s8 t32"),
        bulkv<3, 32, false>("bulktile s3 t32"),
        {"ldg u4", rd_ldg<4>, 128, 0},              {"ldg u8", rd_ldg<8>, 128, 0},
        {"ldg u16", rd_ldg<16>, 128, 0},
    };
    // Skv 1024: 64 MiB in all, the bytes of issue 41's FP8 decode weights (8192 x 8192), where a
    // launch's start and end weigh most.
    const long long skvs[3] = {1024, 4096, 32768};
    const int splits[5] = {1, 2, 4, 8, 16};
    printf("%-22s %6s %5s %10s %8s %8s\n", "variant", "skv", "split", "us", "TB/s", "of copy");
    for (long long skv : skvs)
        for (const variant &v : vs)
            for (int split : splits) {
                if (skv / split < 64)
                    continue;
                const float us = time_one(v, K, V, skv, 128, split, out);
                const double tbps = 2.0 * 128 * skv * ROWB / us / 1e6;
                printf("%-22s %6lld %5d %10.1f %8.3f %8.3f\n", v.name, skv, split, us, tbps, tbps / copy_tbps);
            }
    return 0;
}
