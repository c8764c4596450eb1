#!/usr/bin/env bash
# Session 13, call e: issue 39's GEMM rows after wg_predict stopped pricing two-consumer swapped
# tiles of block_n 64-128 by the one-consumer measurements (call d: [641,768] x 14336 took such a
# tile, 1.37x the exact kernel): gemm14336 at 100 and 700, then gemm4096 at all 16 of
# dynamic.py's sizes (the issue's row), fresh daemon, tune measure. Outputs in one tarball.
set -u
cd "$(dirname "$0")/.."
. bench/gpu_call.sh
{
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
daemon e
l=$(left 110); s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/dynamic.py --socket "$sock" --cases gemm14336 --sizes 100,700 \
    --out "$OUT/dyn_gemm14336" --wait-s 80 > $OUT/dyn_gemm14336.log 2>&1
echo "=== gemm14336 exit=$? $(el $s0)"; filt < $OUT/dyn_gemm14336.log | tail -3
l=$(left 500); s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/dynamic.py --socket "$sock" --cases gemm4096 \
    --out "$OUT/dyn_gemm" --wait-s 200 > $OUT/dyn_gemm.log 2>&1
echo "=== gemm4096 16 sizes exit=$? $(el $s0)"; filt < $OUT/dyn_gemm.log | tail -18
kill -TERM $dp; wait $dp
cp /tmp/hd-e/hidetd.log $OUT/ 2>/dev/null
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
tar czf $OUT/e.tgz -C $OUT --exclude e.tgz . 2>/dev/null
echo "total $(( $(date +%s) - t0 )) s"
