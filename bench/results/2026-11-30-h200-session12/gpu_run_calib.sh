#!/usr/bin/env bash
# Session 12, call f: the cost model against measured times where swapped operands compete
# (bench/calibrate.py: the model's first 300 schedules of each case measured, tune measure, 40 s
# each), for bench/model_check to fit swapped tiles against: [M,4096]x[4096,4096] at M = 100,
# 700, 2100 and [2100,4096]x[4096,14336], f16.
set -u
cd "$(dirname "$0")/.."
. bench/gpu_call.sh
{
daemon c
l=$(left 330); echo "=== calibrate gemm_mid (limit $l s)"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/calibrate.py --socket "$sock" --db "$db" --out "$OUT/calib" \
    --suite gemm --only gemm_mid --shapes 100x4096x4096,700x4096x4096,2100x4096x4096,2100x14336x4096 \
    --dtypes f16 --candidates 300 --budget-s 40 --arch sm_90a 2>&1 | filt | tail -8
echo "=== calibrate $(el $s0)"
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
