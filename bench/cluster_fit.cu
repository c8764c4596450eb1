// bench/cluster_fit.cu - how many thread-block clusters of each size a GPU holds at once when
// every block takes one SM (about 200 KiB of shared memory, as the wgmma kernels' rings do).
// A cluster is placed within one GPC, so fewer than SMs / size fit; tuner/arch.c's cluster_fit
// holds these numbers for the H100, and matmul_wgmma's split-K clusters stay within them.
//
//   nvcc -arch=sm_90 -o cluster_fit bench/cluster_fit.cu && ./cluster_fit
#include <cstdio>
#include <cuda_runtime.h>

__global__ void one_sm_block(int *p)
{
    extern __shared__ int s[];
    if (p)
        p[0] = s[0];
}

int main()
{
    const int smem = 200 * 1024;
    cudaFuncSetAttribute(one_sm_block, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    cudaFuncSetAttribute(one_sm_block, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    for (int threads = 256; threads <= 384; threads += 128)
        for (int size = 1; size <= 16; size++) {
            cudaLaunchConfig_t cfg = {};
            cfg.gridDim = dim3(size * 64, 1, 1);
            cfg.blockDim = dim3(threads, 1, 1);
            cfg.dynamicSmemBytes = smem;
            cudaLaunchAttribute attr[1];
            attr[0].id = cudaLaunchAttributeClusterDimension;
            attr[0].val.clusterDim.x = size;
            attr[0].val.clusterDim.y = 1;
            attr[0].val.clusterDim.z = 1;
            cfg.attrs = attr;
            cfg.numAttrs = 1;
            int n = -1;
            cudaError_t e = cudaOccupancyMaxActiveClusters(&n, one_sm_block, &cfg);
            printf("threads %d cluster %2d: %3d clusters = %3d CTAs (%s)\n", threads, size, n, n * size,
                   cudaGetErrorString(e));
        }
    return 0;
}
