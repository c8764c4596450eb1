#!/usr/bin/env bash
# Session 17, call g (after bench/pack_gpu.sh and e/prep.sh; carry [".gpu"]; under a minute):
# which kernel cuBLAS runs for [100,4096] x [4096,4096] f16 (kbench's torch.matmul peer): its
# name, grid, block, cluster and speed of light.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
S="--section SpeedOfLight --section LaunchStats --section Occupancy"
timeout 80 ncu --kernel-name regex:'nvjet|gemm|cutlass|xmma|splitK|reduce' --launch-skip 2 --launch-count 2 $S \
    python3 bench/kbench.py .gpu/kbe --only sw104_s1 > $OUT/ncu_peer.log 2>&1
echo "=== ncu peer exit=$?"; grep -E "^  [a-zA-Z_]|Duration|DRAM Throughput|Grid Size|Block Size|Cluster Size|Registers|Shared Memory Config|Dynamic Shared" $OUT/ncu_peer.log | head -30
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
