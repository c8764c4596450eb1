// Experiment: weight-streaming GEMV y[1,N] = a[1,K] @ B[K,N] (B row-major), fp16 in/out, fp32 sums.
// Block (strip, slice): COLS columns x K/KS rows; the KS slices of a strip form one cluster and
// are summed through distributed shared memory by rank 0 in rank order.
#include <cuda_fp16.h>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

template <int N, int K, int COLS, int KS, int THREADS, int U>
__device__ __forceinline__ void gemv_body(const __half *__restrict__ a, const __half *__restrict__ B,
                                          __half *__restrict__ y)
{
    constexpr int LPR = COLS / 8;          // lanes per row
    constexpr int RP = THREADS / LPR;      // rows per pass
    constexpr int KR = K / KS;             // rows per slice
    static_assert(KR % (RP * U) == 0, "rows");
    __shared__ float part[RP][COLS];
    __shared__ float strip[COLS];
    const int tid = threadIdx.x, c8 = tid % LPR, r0 = tid / LPR;
    const int n0 = blockIdx.x * COLS + c8 * 8;
    const int k0 = blockIdx.y * KR;
    float acc[8];
#pragma unroll
    for (int c = 0; c < 8; c++) acc[c] = 0.f;
    const uint4 *bp = reinterpret_cast<const uint4 *>(B + (size_t)(k0 + r0) * N + n0);
    for (int it = 0; it < KR / (RP * U); it++) {
        uint4 v[U];
        float av[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                         : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                         : "l"(bp + (size_t)(it * RP * U + u * RP) * (N / 8)));
            av[u] = __half2float(a[k0 + r0 + it * RP * U + u * RP]);
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const __half2 *h = reinterpret_cast<const __half2 *>(&v[u]);
#pragma unroll
            for (int c = 0; c < 4; c++) {
                float2 f = __half22float2(h[c]);
                acc[2 * c] = fmaf(av[u], f.x, acc[2 * c]);
                acc[2 * c + 1] = fmaf(av[u], f.y, acc[2 * c + 1]);
            }
        }
    }
#pragma unroll
    for (int c = 0; c < 8; c++) part[r0][c8 * 8 + c] = acc[c];
    __syncthreads();
    for (int c = tid; c < COLS; c += THREADS) {
        float s = 0.f;
#pragma unroll
        for (int r = 0; r < RP; r++) s += part[r][c];
        strip[c] = s;
    }
    if constexpr (KS == 1) {
        __syncthreads();
        for (int c = tid; c < COLS; c += THREADS) y[blockIdx.x * COLS + c] = __float2half_rn(strip[c]);
    } else {
        cg::cluster_group cl = cg::this_cluster();
        cl.sync();
        if (cl.block_rank() == 0) {
            for (int c = tid; c < COLS; c += THREADS) {
                float s = 0.f;
#pragma unroll
                for (int r = 0; r < KS; r++) s += cl.map_shared_rank(strip, r)[c];
                y[blockIdx.x * COLS + c] = __float2half_rn(s);
            }
        }
        cl.sync();
    }
}

#define GEMV(NAME, N, K, COLS, KS, THREADS, U)                                                          \
    extern "C" __global__ void __cluster_dims__(1, KS, 1) __launch_bounds__(THREADS)                   \
        NAME(const __half *a, const __half *B, __half *y) { gemv_body<N, K, COLS, KS, THREADS, U>(a, B, y); }

GEMV(gv4k_256_8_512_4, 4096, 4096, 256, 8, 512, 4)
GEMV(gv4k_256_8_512_8, 4096, 4096, 256, 8, 512, 8)
GEMV(gv4k_256_8_256_8, 4096, 4096, 256, 8, 256, 8)
GEMV(gv4k_128_4_512_8, 4096, 4096, 128, 4, 512, 8)
GEMV(gv4k_128_8_512_4, 4096, 4096, 128, 8, 512, 4)
GEMV(gv4k_128_8_256_8, 4096, 4096, 128, 8, 256, 8)
GEMV(gv4k_64_4_256_8, 4096, 4096, 64, 4, 256, 8)
GEMV(gv4k_64_8_256_4, 4096, 4096, 64, 8, 256, 4)
GEMV(gv4k_512_8_512_8, 4096, 4096, 512, 8, 512, 8)
GEMV(gv14k_256_4_512_8, 14336, 4096, 256, 4, 512, 8)
GEMV(gv14k_256_8_256_8, 14336, 4096, 256, 8, 256, 8)
GEMV(gv14k_128_4_256_8, 14336, 4096, 128, 4, 256, 8)
GEMV(gv14k_256_2_512_8, 14336, 4096, 256, 2, 512, 8)
