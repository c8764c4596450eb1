#!/usr/bin/env bash
# Session 18, call h (`bash bench/results/2026-11-30-h200-session18/h/gpu_run.sh`, carry [".gpu"],
# after bench/pack_gpu.sh and bench/results/2026-11-30-h200-session17/next/prep.sh): the
# correctness part of session 17's prepared call, for what session 17 put in the spaces unverified
# on a GPU.
#  1. swapped N pairs (cluster_n 2, 16-bit): the template sweep's matmul cases with every
#     cluster_n 2 candidate, and tuner_gpu_gemm_dynamic's swapped pairs over named M; 0 wrong.
#  2. the FP8 transposing warpgroup (tnsp_wg 1): tuner_gpu_verify's FP8 cases; 0 wrong; and the
#     decode B [K,N] pick with and without it, timed (kbench).
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
s0=$(date +%s)
LD_LIBRARY_PATH=$G/lib timeout 150 $G/tests/gpu_template_sweep --template matmul_wgmma --param cluster_n=2 \
    --max 1000 --filter mm > $OUT/sweep_pairs.log 2>&1
echo "=== sweep cluster_n=2 exit=$? $(el $s0)"; grep -E "wrong|failed|^mm" $OUT/sweep_pairs.log | head -20
s0=$(date +%s)
HIDET_VERIFY_PARAM=cluster_n=2,swap=1 LD_LIBRARY_PATH=$G/lib timeout 100 $G/tests/tuner_gpu_gemm_dynamic \
    > $OUT/gemm_dynamic_pairs.log 2>&1
echo "=== gemm_dynamic pairs exit=$? $(el $s0)"; grep -E "wrong|failed|correct" $OUT/gemm_dynamic_pairs.log | head -12
s0=$(date +%s)
HIDET_VERIFY_ONLY=fp8 HIDET_VERIFY_PARAM=tnsp_wg=1 LD_LIBRARY_PATH=$G/lib timeout 120 $G/tests/tuner_gpu_verify \
    > $OUT/verify_tnsp_wg.log 2>&1
echo "=== verify tnsp_wg=1 exit=$? $(el $s0)"; grep -E "^fp8|wrong or failed" $OUT/verify_tnsp_wg.log | head -20
timeout 60 python3 bench/kbench.py .gpu/kbn --only dkn --json $OUT/kbn_dkn.json > $OUT/kbn_dkn.log 2>&1
echo "=== kbench dkn exit=$?"; filt < $OUT/kbn_dkn.log | tail -4
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
