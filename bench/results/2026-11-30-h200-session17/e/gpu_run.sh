#!/usr/bin/env bash
# Session 17, call e (after bench/pack_gpu.sh and e/prep.sh; carry [".gpu"]; about 2 minutes):
# kbench (err against the reference kernel, cuBLAS beside each) of split-K clusters whose sum now
# loads every partial of a step before adding, in two processes; ncu of the swapped 64x104 split 2.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
for rep in 1 2; do
    timeout 90 python3 bench/kbench.py .gpu/kbe --alternate --json $OUT/kbe_$rep.json > $OUT/kbe_$rep.log 2>&1
    echo "=== kbe process $rep exit=$?"; filt < $OUT/kbe_$rep.log | tail -11
done
S="--section SpeedOfLight --section WarpStateStats"
timeout 60 ncu --kernel-name regex:hd_ --launch-skip 2 --launch-count 1 $S \
    python3 bench/kbench.py .gpu/kbe --only sw104_s2_8 > $OUT/ncu_sw104_s2_8.log 2>&1
echo "=== ncu exit=$?"; grep -E "Duration|DRAM Throughput|Warp Cycles Per Issued|stalled" $OUT/ncu_sw104_s2_8.log | head -8
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
