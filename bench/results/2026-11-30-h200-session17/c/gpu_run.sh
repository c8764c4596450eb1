#!/usr/bin/env bash
# Session 17, call c (after bench/pack_gpu.sh; carry [".gpu"]; about 5 minutes): ranges cut where
# their kernel's range_worst exceeds 1.03 - issue 39's x4096 row at 2100 (its range measured
# 1.040 in call b, uncut at the 1.04 of then) and the x14336 row at 2100, 3000 and 4500, fresh
# daemon, tune measure; the jobs and trials kept.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
daemon c
s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 200 python3 bench/dynamic.py --socket "$sock" --cases gemm4096 \
    --sizes 2100 --out "$OUT/dyn4096" --wait-s 170 > $OUT/dyn4096.log 2>&1
echo "=== gemm4096 exit=$? $(el $s0)"; filt < $OUT/dyn4096.log | tail -3
left=$(( 560 - ($(date +%s) - t0) )); s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $left python3 bench/dynamic.py --socket "$sock" --cases gemm14336 \
    --sizes 2100,3000,4500 --out "$OUT/dyn14336" --wait-s $(( left - 40 )) > $OUT/dyn14336.log 2>&1
echo "=== gemm14336 exit=$? $(el $s0)"; filt < $OUT/dyn14336.log | tail -5
curl -s --unix-socket "$sock" http://localhost/v1/jobs > $OUT/jobs.json
trials $OUT/trials.tsv.gz
kill -TERM $dp; wait $dp
cp /tmp/hd-c/hidetd.log "$OUT/hidetd_c.log" 2>/dev/null
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
