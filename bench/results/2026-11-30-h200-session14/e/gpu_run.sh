#!/usr/bin/env bash
# Session 14, call e: the [n,4096] GEMM rows after a measured range's candidates are compared by
# their worst ratio to the model's best at the range's top, middle and bottom (scheduler/tune.c
# range_score) instead of (top + middle) x factor; gpu_sched first (ranged jobs on the GPU).
set -u
cd "$(dirname "$0")/.."
. bench/gpu_call.sh
{
HIDETD_WORKER=$G/bin/hidetd-worker LD_LIBRARY_PATH=$G/lib timeout 100 $G/tests/gpu_sched > $OUT/gpu_sched.log 2>&1
echo "=== gpu_sched exit=$?"; grep -E "middle|^ok|FAIL|failed" $OUT/gpu_sched.log | head -4
daemon g
s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 250 python3 bench/dynamic.py --socket "$sock" --cases gemm14336 --sizes 300,700,1500,2100 \
    --out "$OUT/dyn_gemm14336" --wait-s 180 > $OUT/dyn_gemm14336.log 2>&1
echo "=== gemm14336 exit=$? $(el $s0)"; filt < $OUT/dyn_gemm14336.log | tail -4
l=$(left 380); s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/dynamic.py --socket "$sock" --cases gemm4096 --sizes 100,700,1000,2100 \
    --out "$OUT/dyn_gemm" --wait-s 90 > $OUT/dyn_gemm.log 2>&1
echo "=== gemm4096 exit=$? $(el $s0)"; filt < $OUT/dyn_gemm.log | tail -4
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
