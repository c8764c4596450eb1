#!/usr/bin/env bash
# Session 20, call k: kbench --flush of .gpu/kbr (k/prep.sh) in two processes: steady state
# (us), one launch after a flush (fl_read) and the worker's new spans (fl_run), beside cuBLAS.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
for rep in 1 2; do
    timeout 200 python3 bench/kbench.py .gpu/kbr --alternate --flush --json $OUT/kbr_$rep.json > $OUT/kbr_$rep.log 2>&1
    echo "=== kbench process $rep exit=$?"; filt < $OUT/kbr_$rep.log | tail -17 | cut -c1-150
done
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
