#!/usr/bin/env bash
# Session 13, call f: why [641,768] x 14336's range entry is swapped 128x96 with two consumers
# (call e: 170.7 us at 700 against the exact kernel's 129.0): kbench of that tile, the exact
# pick (swapped 64x176) and 128x256 at M = 700 and 768; then the range job again on a fresh
# daemon, its cache (trials: every candidate's time) copied out.
set -u
cd "$(dirname "$0")/.."
. bench/gpu_call.sh
{
s0=$(date +%s)
timeout 60 python3 bench/kbench.py .gpu/kb2 > $OUT/kbench.log 2>&1
echo "=== kbench exit=$? $(el $s0)"; filt < $OUT/kbench.log | tail -7
daemon f
l=$(left 170); s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/dynamic.py --socket "$sock" --cases gemm14336 --sizes 700 \
    --out "$OUT/dyn_gemm14336" --wait-s 80 > $OUT/dyn_gemm14336.log 2>&1
echo "=== gemm14336 700 exit=$? $(el $s0)"; filt < $OUT/dyn_gemm14336.log | tail -2
curl -s --unix-socket "$sock" http://localhost/v1/jobs > $OUT/jobs.json
kill -TERM $dp; wait $dp
cp "$db" $OUT/k.db
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
tar czf /tmp/f.tgz -C $OUT . && mv /tmp/f.tgz $OUT/
echo "total $(( $(date +%s) - t0 )) s"
