#!/usr/bin/env bash
# Session 12, call h: the GEMM rows of issue 39 again after measured ranges scale a candidate's
# time by its model ratio below the top over its ratio at the top (a fresh daemon, tune measure).
set -u
cd "$(dirname "$0")/.."
. bench/gpu_call.sh
{
daemon r
l=$(left 150); echo "=== gemm4096 100,700,2100 (limit $l s)"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/dynamic.py --socket "$sock" --cases gemm4096 --sizes 100,700,2100 \
    --out "$OUT/dyn_gemm" --wait-s 100 2>&1 | filt | tail -5
echo "=== gemm4096 $(el $s0)"
l=$(left 280); echo "=== gemm14336 100,700 (limit $l s)"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/dynamic.py --socket "$sock" --cases gemm14336 --sizes 100,700 \
    --out "$OUT/dyn_gemm14336" --wait-s 150 2>&1 | filt | tail -4
echo "=== gemm14336 $(el $s0)"
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
