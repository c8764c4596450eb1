#!/usr/bin/env bash
# Session 14, call b: why range entries of the [n,4096] GEMM rows pick tiles slower than the exact
# kernel (call a: x14336 at 200 0.78, 1000 0.89, 2100 0.94; session 13: x4096 at 100, 300, 700).
# Runs those rows and keeps every timed candidate (the cache's trials table, top and middle keys)
# and every job (/v1/jobs), so the ranking can be replayed on the CPU machine.
set -u
cd "$(dirname "$0")/.."
. bench/gpu_call.sh
{
daemon g
s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 170 python3 bench/dynamic.py --socket "$sock" --cases gemm14336 --sizes 200,1000,2100 \
    --out "$OUT/dyn_gemm14336" --wait-s 120 > $OUT/dyn_gemm14336.log 2>&1
echo "=== gemm14336 exit=$? $(el $s0)"; filt < $OUT/dyn_gemm14336.log | tail -3
l=$(left 330); s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/dynamic.py --socket "$sock" --cases gemm4096 --sizes 100,300,700 \
    --out "$OUT/dyn_gemm" --wait-s 90 > $OUT/dyn_gemm.log 2>&1
echo "=== gemm4096 exit=$? $(el $s0)"; filt < $OUT/dyn_gemm.log | tail -3
curl -s --unix-socket "$sock" http://localhost/v1/jobs > $OUT/jobs.json
python3 - "$db" > $OUT/trials.tsv <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
for r in c.execute("SELECT tuning_key, candidate, status, latency_us, max_rel_err, measured_at, schedule_json FROM trials ORDER BY tuning_key, candidate"):
    print("\t".join(str(x) for x in r))
PY
kill -TERM $dp; wait $dp
cp /tmp/hd-g/hidetd.log $OUT/
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
tar czf /tmp/all.tgz -C "$OUT" . && mv /tmp/all.tgz "$OUT/"
echo "total $(( $(date +%s) - t0 )) s"
