#!/usr/bin/env bash
# Session 19, call a (carry [".gpu"], after bench/pack_gpu.sh and both prep scripts below):
#  1. session 18's next/gpu_run.sh: kbench of attention_wgmma variants (fence after the stage
#     wait, staged-mask loads hoisted) against their nvcc control, two processes;
#  2. session 17's next/gpu_run.sh steps 2-3: variance of the swapped 64x56 pair at n = 100 across
#     fresh allocations, and ncu of the pair, its register-store twin, the unpaired 64x56/64x104
#     and cuBLAS's kernel.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
OUT=$OUT bash bench/results/2026-11-30-h200-session18/next/gpu_run.sh > /dev/null 2>&1
mv $OUT/gpu.log $OUT/attn_variants.log
V=bench/results/2026-11-30-h200-session16/next/variance.py
{
cat $OUT/attn_variants.log
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
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
