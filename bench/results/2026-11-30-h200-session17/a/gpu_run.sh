#!/usr/bin/env bash
# Session 17, call a (after bench/pack_gpu.sh and session16/next/prep.sh; carry [".gpu"]):
# session 16's prepared call (the two-speed kernel's variance, FP8 B [K,N] transposers with 1, 2
# and 4 blocks per step), then issue 40's whole `gaps` suite in what is left of 580 s.
set -u
cd "$(dirname "$0")/../../../.."
OUT=${OUT:-/tmp/out}
start=$(date +%s)
OUT=$OUT/next bash bench/results/2026-11-30-h200-session16/next/gpu_run.sh > /dev/null 2>&1
. bench/gpu_call.sh
t0=$start
{
cat $OUT/next/gpu.log
daemon a
left=$(( 580 - ($(date +%s) - t0) )); echo "=== gaps rows (limit $left s)"; s0=$(date +%s)
[ $left -gt 30 ] && PYTHONUNBUFFERED=1 timeout $left python3 bench/bench.py --socket "$sock" --out "$OUT/gaps" --suite gaps --arch sm_90a \
    --tune measure --budget-s 6 --alternate 2>&1 | filt | tail -30
echo "=== gaps $(el $s0)"
kill -TERM $dp; wait $dp
cp /tmp/hd-a/hidetd.log "$OUT/hidetd_a.log" 2>/dev/null
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
