#!/usr/bin/env bash
# Prepared in session 17 for the next session (after bench/pack_gpu.sh and next/prep.sh;
# `bash bench/results/2026-11-30-h200-session17/next/gpu_run.sh`, carry [".gpu"]; about 6
# minutes):
#  1. swapped N pairs (new, 16-bit) verified more widely than session 17's 7 programs: the
#     template sweep's matmul cases with every cluster_n 2 candidate (pairs of both kinds), and
#     tuner_gpu_gemm_dynamic's swapped pairs over named M (min, an odd size, max); 0 wrong is the bar.
#  2. next/../../2026-11-30-h200-session16/next/variance.py on the pair: does a fresh allocation
#     still move it, as it moves the unpaired 64x56 (12.0-14.9 us)?
#  3. ncu (caches flushed before each kernel, clocks locked) of the pair, the unpaired 64x56 and
#     64x104, and cuBLAS's nvjet_sm90_hsh_64x56 kernel: where the pair loses 5-6% to cuBLAS when
#     the weights stream from DRAM (13.07 against 12.36 us in session 17's call h).
#  4. The FP8 decode's B [K,N] (0.62 of cuBLAS): tuner_gpu_verify's FP8 cases with the new
#     transposing warpgroup (tnsp_wg 1, emulated only so far; 0 wrong is the bar); kbench of the
#     pick with the new cluster sum (session 16: 30.6-31.1 us) beside the same with 4 and 5
#     stages and seven transposing warps; ncu's warp states of both (are three warps
#     latency-bound? two or four 4x4 blocks per lane per step ran slower, session 17's call a).
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
V=bench/results/2026-11-30-h200-session16/next/variance.py
{
s0=$(date +%s)
LD_LIBRARY_PATH=$G/lib timeout 200 $G/tests/gpu_template_sweep --template matmul_wgmma --param cluster_n=2 \
    --max 1000 --filter mm > $OUT/sweep_pairs.log 2>&1
echo "=== sweep cluster_n=2 exit=$? $(el $s0)"; grep -E "wrong|failed|^mm" $OUT/sweep_pairs.log | head -20
s0=$(date +%s)
HIDET_VERIFY_PARAM=cluster_n=2,swap=1 LD_LIBRARY_PATH=$G/lib timeout 120 $G/tests/tuner_gpu_gemm_dynamic \
    > $OUT/gemm_dynamic_pairs.log 2>&1
echo "=== gemm_dynamic pairs exit=$? $(el $s0)"; grep -E "wrong|failed|correct" $OUT/gemm_dynamic_pairs.log | head -12
for rep in 1 2; do
    timeout 90 python3 $V .gpu/kbn/pair56.json 6 > $OUT/var_pair56_$rep.log 2>&1
    echo "=== variance pair56 process $rep exit=$?"; grep -v "^{" $OUT/var_pair56_$rep.log | filt | tail -3
done
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats"
for p in pair56 pair56r sw56 sw104; do
    timeout 60 ncu --kernel-name regex:hd_ --launch-skip 2 --launch-count 1 $S \
        python3 bench/kbench.py .gpu/kbn --only $p > $OUT/ncu_$p.log 2>&1
    echo "=== ncu $p exit=$?"; grep -E "Duration|DRAM Throughput|L2 Cache Throughput|Compute \(SM\)|Warp Cycles Per Issued" $OUT/ncu_$p.log | head -6
done
timeout 60 ncu --kernel-name regex:nvjet --launch-skip 2 --launch-count 1 $S \
    python3 bench/kbench.py .gpu/kbn --only sw104 > $OUT/ncu_cublas.log 2>&1
echo "=== ncu cublas exit=$?"; grep -E "^  [a-z]|Duration|DRAM Throughput|L2 Cache Throughput|Compute \(SM\)|Warp Cycles Per Issued" $OUT/ncu_cublas.log | head -7
s0=$(date +%s)
HIDET_VERIFY_ONLY=fp8 HIDET_VERIFY_PARAM=tnsp_wg=1 LD_LIBRARY_PATH=$G/lib timeout 150 $G/tests/tuner_gpu_verify \
    > $OUT/verify_tnsp_wg.log 2>&1
echo "=== verify tnsp_wg=1 exit=$? $(el $s0)"; grep -E "^fp8|wrong or failed" $OUT/verify_tnsp_wg.log | head -20
for rep in 1 2; do
    timeout 60 python3 bench/kbench.py .gpu/kbn --only dkn --json $OUT/kbn_dkn_$rep.json > $OUT/kbn_dkn_$rep.log 2>&1
    echo "=== kbench dkn process $rep exit=$?"; filt < $OUT/kbn_dkn_$rep.log | tail -4
done
timeout 90 ncu --kernel-name regex:hd_ --launch-skip 2 --launch-count 4 --section SpeedOfLight --section WarpStateStats \
    --section SourceCounters --section SchedulerStats python3 bench/kbench.py .gpu/kbn --only dkn_s4 > $OUT/ncu_dkn.log 2>&1
echo "=== ncu dkn_s4 and dkn_s4_tw exit=$?"; grep -E "Duration|DRAM Throughput|Warp Cycles Per Issued|Issued Warp|stalled|Eligible" $OUT/ncu_dkn.log | head -16
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
