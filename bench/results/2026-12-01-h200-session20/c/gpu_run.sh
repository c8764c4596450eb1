#!/usr/bin/env bash
# Session 20, call c: [100,4096] x [4096,4096] (issue 39's one row under 0.95 of cuBLAS), the tile
# the range entry holds (64x56 unpaired), the swapped pair, and split-K clusters the model ranks
# 50th and lower (64x104 split 2: 656 KB per SM from L2 against 970 for the unpaired tile), kbench
# with rotated inputs beside torch.matmul alternating, and single launches after an L2 flush, in
# two processes. Programs: .gpu/kbn (kgen, see README.md).
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
for rep in 1 2; do
    timeout 200 python3 bench/kbench.py .gpu/kbn --alternate --flush --json $OUT/kbn_$rep.json > $OUT/kbn_$rep.log 2>&1
    echo "=== kbench process $rep exit=$?"; filt < $OUT/kbn_$rep.log | tail -9
done
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
