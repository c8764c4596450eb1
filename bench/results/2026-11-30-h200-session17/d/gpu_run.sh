#!/usr/bin/env bash
# Session 17, call d (carry [".gpu"], .gpu/kbs from d/prep.sh; about 3 minutes): why [100,4096] x
# [4096,4096] runs 13.5 us where cuBLAS runs 12: kbench (cuBLAS beside each) of the range's swapped
# 64x104 (64 CTAs), the same split over K in clusters of 2 (128 CTAs; measured 17.3 us in
# session 16's tuning), the two-speed swapped 64x56 (128 CTAs) and an unswapped 128x64 split 2;
# then ncu's speed-of-light, memory and warp-state sections of each and of cuBLAS's kernel.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
for rep in 1 2; do
    timeout 60 python3 bench/kbench.py .gpu/kbs --alternate --json $OUT/kbs_$rep.json > $OUT/kbs_$rep.log 2>&1
    echo "=== kbs process $rep exit=$?"; filt < $OUT/kbs_$rep.log | tail -5
done
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats --section Occupancy"
for p in sw104_s1 sw104_s2 sw56_s1 un128x64_s2; do
    timeout 60 ncu --kernel-name regex:hd_ --launch-skip 2 --launch-count 1 $S \
        python3 bench/kbench.py .gpu/kbs --only $p > $OUT/ncu_$p.log 2>&1
    echo "=== ncu $p exit=$?"; grep -E "Duration|DRAM Throughput|L2 Cache Throughput|Memory Throughput|Compute \(SM\)|Grid Size|Cluster|Stall|Warp Cycles Per Issued" $OUT/ncu_$p.log | head -14
done
timeout 60 ncu --kernel-name regex:'^(?!hd_)' --launch-skip 3 --launch-count 1 $S \
    python3 bench/kbench.py .gpu/kbs --only sw104_s1 > $OUT/ncu_peer.log 2>&1
echo "=== ncu peer exit=$?"; grep -E "^  [a-zA-Z_]|Duration|DRAM Throughput|L2 Cache Throughput|Grid Size|Block Size|Cluster" $OUT/ncu_peer.log | head -14
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
