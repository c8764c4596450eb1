#!/usr/bin/env bash
# Prepared in session 13 (its device time was spent): the two range entries that missed in call
# e, after the cost model prices the load latency of every edge tile's rows past M or N:
# [n,4096]x[4096,14336] at 700 and [n,4096]x[4096,4096] at 300, fresh daemon, tune measure.
set -u
cd "$(dirname "$0")/.."
. bench/gpu_call.sh
{
daemon g
s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 80 python3 bench/dynamic.py --socket "$sock" --cases gemm14336 --sizes 700 \
    --out "$OUT/dyn_gemm14336" --wait-s 60 > $OUT/dyn_gemm14336.log 2>&1
echo "=== gemm14336 700 exit=$? $(el $s0)"; filt < $OUT/dyn_gemm14336.log | tail -2
l=$(left 135); s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/dynamic.py --socket "$sock" --cases gemm4096 --sizes 300 \
    --out "$OUT/dyn_gemm" --wait-s 40 > $OUT/dyn_gemm.log 2>&1
echo "=== gemm4096 300 exit=$? $(el $s0)"; filt < $OUT/dyn_gemm.log | tail -2
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
# Every result in one file: the device tool brings back a limited number of files.
tar czf /tmp/all.tgz -C "$OUT" . && mv /tmp/all.tgz "$OUT/"
echo "total $(( $(date +%s) - t0 )) s"
