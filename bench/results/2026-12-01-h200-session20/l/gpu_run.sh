#!/usr/bin/env bash
# Session 20, call l: kbench --flush --dims 112 of .gpu/kbd (l/prep.sh) in two processes: steady state
# (us), one launch after a flush (fl_read) and the worker's new spans (fl_run), beside cuBLAS.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
for rep in 1 2; do
    timeout 200 python3 bench/kbench.py .gpu/kbd --alternate --flush --dims 112 --json $OUT/kbd_$rep.json > $OUT/kbd_$rep.log 2>&1
    echo "=== kbench process $rep exit=$?"; filt < $OUT/kbd_$rep.log | tail -6 | cut -c1-150
done
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
