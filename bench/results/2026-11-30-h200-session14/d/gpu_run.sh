#!/usr/bin/env bash
# Session 14, call d: why a kernel runs longer at fewer rows in the same grid (call c's trials of
# 1409..1536: swapped 128x192 two consumers 239 us at 1536 and 261 at 1471, every tile row in
# bounds there; unswapped 128x192 238 at 1536 and 272 at 1471). kbench (CUDA graphs, rotating
# inputs, kernels taking turns) of the exact-size programs at 1471, 1500, 1536 (prep.sh), and
# ncu of the swapped and unswapped 128x192 at 1471 and 1536.
set -u
cd "$(dirname "$0")/.."
. bench/gpu_call.sh
{
s0=$(date +%s)
timeout 150 python3 bench/kbench.py .gpu/kb --alternate > $OUT/kbench.log 2>&1
echo "=== kbench exit=$? $(el $s0)"; filt < $OUT/kbench.log
for p in m1471_sw128x192 m1536_sw128x192 m1471_un128x192 m1536_un128x192; do
    timeout 60 ncu --kernel-name regex:hd_matmul --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section WarpStateStats --section SchedulerStats --section LaunchStats \
        python3 bench/kbench.py .gpu/kb --only $p > $OUT/ncu_$p.log 2>&1
    echo "=== ncu $p exit=$?"
    grep -E "Duration|DRAM Throughput|L2 Hit|L1/TEX Hit|Memory Throughput|No Eligible|Grid Size|Waves" $OUT/ncu_$p.log | head -12
done
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
tar czf /tmp/all.tgz -C "$OUT" . && mv /tmp/all.tgz "$OUT/"
echo "total $(( $(date +%s) - t0 )) s"
