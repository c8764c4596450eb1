/* tuner/arch.c - limits and rates of the supported targets (typical parts), for validity checks
 * and the cost model.
 *
 * Bandwidths are what a streaming kernel achieves, not the datasheet (A100 80GB ~1.6 TB/s of
 * 2.0, H100 SXM ~3.0 TB/s of 3.35); tensor rates are mma.sync with fp32 accumulation, which on
 * Hopper reaches roughly two thirds of the wgmma peak.
 *
 * FP8 (tc_fp8_tflops): mma.sync.m16n8k32 with e4m3/e5m2 operands and fp32 accumulation exists from
 * sm_89 (PTX ISA 8.4). Ada's datasheets give it twice the fp16-with-fp32-accumulate rate (L40S
 * 733 against 362 TFLOP/s dense, RTX 4090 330 against 165, L40 362 against 181), and so does
 * Hopper's wgmma (1979 against 989); the rates below take mma.sync FP8 at twice each part's
 * fp16 mma.sync rate, which is measured nowhere yet for Hopper and Blackwell (there the FP8
 * matmul of choice is matmul_wgmma on sm_90a; sm_90, sm_100 and sm_120 get matmul_mma's).
 */
#include "tuner/template.h"

/* H100 SXM. sm_90 and sm_90a are the same part; sm_90a adds the arch-specific instructions
 * (wgmma). */
#define ARCH_H100_SXM                                                                            \
    .sm = 90, .sm_count = 132, .max_threads_per_block = 1024, .max_threads_per_sm = 2048,        \
    .max_smem_per_block = 232448, .max_smem_per_sm = 233472, .regs_per_sm = 65536,               \
    .max_regs_per_thread = 255, .dram_gbps = 3000.0, .l2_bytes = 50.0 * 1024 * 1024,             \
    .tc_f16_tflops = 660.0, .tc_fp8_tflops = 1320.0, .fma_f32_tflops = 67.0, .has_cp_async = true,  \
    .has_bf16_mma = true,                                                                        \
    /* cudaOccupancyMaxActiveClusters on an H100 80GB HBM3 (200 KiB of shared memory per block; \
     * bench/results/2026-11-24-h100-wgmma-split/clusters.txt) */                                \
    .cluster_fit = {0, 132, 66, 39, 30, 22, 17, 15, 15}

/* Indexed by op/'s list of supported targets, so there is one list of archs; the size check
 * below and tuner/tests/test_template.c (every entry filled, matching its target) keep the two
 * in step. */
static const tuner_arch arch_table[] = {
    [TUNER_TARGET_SM80] = {
        /* A100 SXM */
        .sm = 80, .sm_count = 108, .max_threads_per_block = 1024, .max_threads_per_sm = 2048,
        .max_smem_per_block = 166912, .max_smem_per_sm = 167936, .regs_per_sm = 65536,
        .max_regs_per_thread = 255, .dram_gbps = 1600.0, .l2_bytes = 40.0 * 1024 * 1024,
        .tc_f16_tflops = 312.0, .fma_f32_tflops = 19.5,
        .has_cp_async = true, .has_bf16_mma = true, .has_wgmma = false,
    },
    [TUNER_TARGET_SM86] = {
        /* A10 / RTX 3090 class (GA102): 72-84 SMs */
        .sm = 86, .sm_count = 84, .max_threads_per_block = 1024, .max_threads_per_sm = 1536,
        .max_smem_per_block = 101376, .max_smem_per_sm = 102400, .regs_per_sm = 65536,
        .max_regs_per_thread = 255, .dram_gbps = 800.0, .l2_bytes = 6.0 * 1024 * 1024,
        .tc_f16_tflops = 71.0, .fma_f32_tflops = 35.6,
        .has_cp_async = true, .has_bf16_mma = true, .has_wgmma = false,
    },
    [TUNER_TARGET_SM89] = {
        /* L40 / RTX 4090 class (AD102) */
        .sm = 89, .sm_count = 128, .max_threads_per_block = 1024, .max_threads_per_sm = 1536,
        .max_smem_per_block = 101376, .max_smem_per_sm = 102400, .regs_per_sm = 65536,
        .max_regs_per_thread = 255, .dram_gbps = 900.0, .l2_bytes = 72.0 * 1024 * 1024,
        .tc_f16_tflops = 165.0, .tc_fp8_tflops = 330.0, .fma_f32_tflops = 82.6,
        .has_cp_async = true, .has_bf16_mma = true, .has_wgmma = false,
    },
    [TUNER_TARGET_SM90] = {ARCH_H100_SXM, .has_wgmma = false},
    [TUNER_TARGET_SM90A] = {ARCH_H100_SXM, .has_wgmma = true},
    /* Blackwell. The limits per compute capability are from the CUDA C++ Programming Guide,
     * "Compute Capabilities", Technical Specifications table (CUDA 12.8 and later): 10.0 has
     * 2048 threads and 228 KB of shared memory per SM, 227 KB per block; 12.0 has 1536 threads
     * and 100 KB of shared memory per SM (of a 128 KB L1), 99 KB per block; both 64 K 32-bit
     * registers per SM and 255 per thread. The templates use mma.sync, cp.async and ldmatrix,
     * which both keep (NVRTC and ptxas of CUDA 13.0 accept the code for sm_100 and sm_120: see
     * tests/integration/it_kernels.c); wgmma is sm_90a only and tcgen05 is not used, so
     * has_wgmma is false and the tensor rates are mma.sync's, estimates well below the parts'
     * tcgen05 peaks. */
    [TUNER_TARGET_SM100] = {
        /* B200: 148 SMs, HBM3e 8 TB/s (about 6.5 achieved), 126 MB L2 */
        .sm = 100, .sm_count = 148, .max_threads_per_block = 1024, .max_threads_per_sm = 2048,
        .max_smem_per_block = 232448, .max_smem_per_sm = 233472, .regs_per_sm = 65536,
        .max_regs_per_thread = 255, .dram_gbps = 6500.0, .l2_bytes = 126.0 * 1024 * 1024,
        .tc_f16_tflops = 660.0, .tc_fp8_tflops = 1320.0, .fma_f32_tflops = 80.0,
        .has_cp_async = true, .has_bf16_mma = true, .has_wgmma = false,
    },
    [TUNER_TARGET_SM120] = {
        /* RTX 5090 class (GB202): 170 SMs, GDDR7 1.79 TB/s (about 1.5 achieved), 96 MB L2;
         * f16 tensor math with f32 accumulation at half the f16-accumulate rate */
        .sm = 120, .sm_count = 170, .max_threads_per_block = 1024, .max_threads_per_sm = 1536,
        .max_smem_per_block = 101376, .max_smem_per_sm = 102400, .regs_per_sm = 65536,
        .max_regs_per_thread = 255, .dram_gbps = 1500.0, .l2_bytes = 96.0 * 1024 * 1024,
        .tc_f16_tflops = 209.0, .tc_fp8_tflops = 418.0, .fma_f32_tflops = 104.8,
        .has_cp_async = true, .has_bf16_mma = true, .has_wgmma = false,
    },
};
_Static_assert(sizeof(arch_table) / sizeof(arch_table[0]) == TUNER_TARGET_COUNT,
               "tuner/arch.c needs limits for every target op/op.h lists, and no others");

const tuner_arch *tuner__arch(const tuner_target *t)
{
    int id = tuner_target_id_of(t);
    return id < 0 ? NULL : &arch_table[id];
}

int tuner__arch_cluster_fit(const tuner_arch *a, int n)
{
    if (n < 1)
        return 0;
    if (n <= 8 && a->cluster_fit[n] > 0)
        return a->cluster_fit[n];
    return a->sm_count / n;
}
