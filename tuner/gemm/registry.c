/* tuner/gemm/registry.c - matmul and conv2d templates (warpgroup and warp tensor cores, SIMT). */
#include "tuner/gemm/gemm.h"

const tuner_template *const tuner__gemm_templates[] = {
    /* Before matmul_mma: equal default ranks pick in this order (tuner/template.h), so an
     * sm_90a matmul that TMA can address defaults to wgmma (verified on an H100:
     * bench/results/2026-11-24-h100-wgmma). */
    &tuner__gemm_matmul_wgmma,
    &tuner__gemm_matmul_mma,
    &tuner__gemm_conv2d_wgmma, /* likewise before conv2d_mma */
    &tuner__gemm_conv2d_mma,
    &tuner__gemm_matmul_tf32,
    &tuner__gemm_matmul_simt,
    &tuner__gemm_conv2d_simt,
    NULL,
};
