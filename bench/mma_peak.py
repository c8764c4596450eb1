#!/usr/bin/env python3
"""bench/mma_peak.py - the ceilings an mma.sync GEMM on this GPU works under.

Two microkernels, each timed for several warps per SM:
  - "mma": every warp issues independent mma.sync.m16n8k16 (fp16 in, fp32 accumulate) on
    registers only: the tensor-core rate reachable through mma.sync;
  - "ldsm+mma": per k16 step every warp loads a 64x64 warp tile's fragments with ldmatrix.x4
    (4 A + 4 B, conflict-free addresses) and issues the 32 mma of that tile: the rate when the
    fragments come from shared memory, as in the matmul_mma template's main loop.
Prints TFLOP/s per variant; the GEMM templates cannot beat the second number.
"""
import cupy

SRC = r"""
extern "C" __global__ void __launch_bounds__(256) mma_regs(float *out, int iters)
{
    unsigned a[4], b[2];
    float acc[16][4];
    for (int i = 0; i < 4; i++) a[i] = 0x3c003c00u ^ (threadIdx.x * (i + 1));
    for (int i = 0; i < 2; i++) b[i] = 0x3c003c00u ^ (threadIdx.x * (i + 7));
    for (int t = 0; t < 16; t++) for (int e = 0; e < 4; e++) acc[t][e] = 0.f;
    for (int it = 0; it < iters; it++) {
#pragma unroll
        for (int t = 0; t < 16; t++)
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+f"(acc[t][0]), "+f"(acc[t][1]), "+f"(acc[t][2]), "+f"(acc[t][3])
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
    float s = 0.f;
    for (int t = 0; t < 16; t++) for (int e = 0; e < 4; e++) s += acc[t][e];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

/* One 64x64 warp tile per warp over a 2-deep ring of k16 fragments read from a shared tile
 * (A 64 rows x 16 k, B 64 rows x 16 k, 16-byte chunks swizzled by row: conflict-free ldmatrix). */
extern "C" __global__ void __launch_bounds__(256) mma_ldsm(float *out, int iters)
{
    extern __shared__ __attribute__((aligned(128))) unsigned char smem[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    unsigned char *tile = smem + warp * 4096;
    for (int i = lane; i < 4096 / 4; i += 32) ((unsigned *)tile)[i] = 0x3c003c00u ^ i;
    __syncwarp();
    const unsigned base = (unsigned)__cvta_generic_to_shared(tile);
    float acc[4][8][4];
    for (int i = 0; i < 4; i++) for (int j = 0; j < 8; j++) for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;
    const int r = lane & 15, c = lane >> 4;
    unsigned fa[2][4][4], fb[2][4][4];
    /* Fragments of the next k16 step are loaded while this step's mma run (as in the template). */
    auto load = [&](int buf) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int row = i * 16 + r;
            const unsigned addr = base + row * 32 + ((c ^ ((row >> 2) & 1)) << 4);
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                         : "=r"(fa[buf][i][0]), "=r"(fa[buf][i][1]), "=r"(fa[buf][i][2]), "=r"(fa[buf][i][3]) : "r"(addr));
        }
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int row = j * 16 + r;
            const unsigned addr = base + 2048 + row * 32 + ((c ^ ((row >> 2) & 1)) << 4);
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                         : "=r"(fb[buf][j][0]), "=r"(fb[buf][j][1]), "=r"(fb[buf][j][2]), "=r"(fb[buf][j][3]) : "r"(addr));
        }
    };
    auto mma = [&](int buf) {
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 8; j++)
                asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                             : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
                             : "r"(fa[buf][i][0]), "r"(fa[buf][i][1]), "r"(fa[buf][i][2]), "r"(fa[buf][i][3]),
                               "r"(fb[buf][j >> 1][(j & 1) * 2]), "r"(fb[buf][j >> 1][(j & 1) * 2 + 1]));
    };
    load(0);
    for (int it = 0; it < iters; it += 2) {
        load(1);
        mma(0);
        load(0);
        mma(1);
    }
    float s = 0.f;
    for (int i = 0; i < 4; i++) for (int j = 0; j < 8; j++) for (int e = 0; e < 4; e++) s += acc[i][j][e];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
"""


def main():
    mod = cupy.RawModule(code=SRC, options=("-arch=sm_90",))
    sms = cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    out = cupy.zeros(sms * 1024 * 4, dtype=cupy.float32)
    rows = []
    for kind, fn_name, mmas_per_iter in (("mma", "mma_regs", 16), ("ldsm+mma", "mma_ldsm", 32)):
        fn = mod.get_function(fn_name)
        for warps in (4, 8, 16):
            threads = 128 if warps <= 8 else 256
            blocks = sms * warps * 32 // threads
            smem = threads // 32 * 4096 if kind != "mma" else 0
            if smem > 48 * 1024:
                fn.max_dynamic_shared_size_bytes = smem
            iters = 4096
            args = (out, cupy.int32(iters))
            fn((blocks,), (threads,), args, shared_mem=smem)
            cupy.cuda.Device().synchronize()
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            best = None
            for _ in range(5):
                start.record()
                fn((blocks,), (threads,), args, shared_mem=smem)
                stop.record()
                stop.synchronize()
                ms = cupy.cuda.get_elapsed_time(start, stop)
                best = ms if best is None else min(best, ms)
            flops = 2.0 * 16 * 8 * 16 * mmas_per_iter * iters * blocks * threads / 32
            rows.append((kind, warps, flops / best / 1e9))
    for kind, warps, tf in rows:
        print(f"mma_peak {kind:9s} {warps:2d} warps/SM {tf:7.1f} TFLOP/s")


if __name__ == "__main__":
    main()
