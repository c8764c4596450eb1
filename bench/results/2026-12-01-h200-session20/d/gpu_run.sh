#!/usr/bin/env bash
# Session 20, call d: call c again with kbench's new fl_run column (after a read flush, one launch per
# rotated input set back to back in a CUDA graph: the tuning worker's single launch without its
# launch-setup cost) and the same for torch.matmul (peer_run). Programs: .gpu/kbn (as call c).
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
for rep in 1 2; do
    timeout 200 python3 bench/kbench.py .gpu/kbn --alternate --flush --json $OUT/kbn_$rep.json > $OUT/kbn_$rep.log 2>&1
    echo "=== kbench process $rep exit=$?"; filt < $OUT/kbn_$rep.log | tail -9 | cut -c1-140
done
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
