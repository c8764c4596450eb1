#!/usr/bin/env bash
# Session 18, call f (`bash bench/results/2026-11-30-h200-session18/f/gpu_run.sh`, carry [".gpu"],
# after bench/pack_gpu.sh and f/prep.sh): kbench of e/prep.sh's programs, twice.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
for rep in 1 2; do
    timeout 200 python3 bench/kbench.py .gpu/kbn --only attn --json $OUT/kbn_$rep.json > $OUT/kbn_$rep.log 2>&1
    echo "=== kbench process $rep exit=$?"; filt < $OUT/kbn_$rep.log | tail -17
done
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
