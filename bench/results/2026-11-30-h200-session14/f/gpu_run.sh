#!/usr/bin/env bash
# Session 14, call f: the two rows call e still missed (x14336 at 1500 and 2100), and x4096 at
# 2100, after a measured range's candidates are compared by their worst ratio to the best
# candidate's time at the top, middle and bottom (not to the model's predictions), with no early
# stopping; gpu_sched first. The device time left was about 5 minutes.
set -u
cd "$(dirname "$0")/.."
. bench/gpu_call.sh
{
HIDETD_WORKER=$G/bin/hidetd-worker LD_LIBRARY_PATH=$G/lib timeout 40 $G/tests/gpu_sched > $OUT/gpu_sched.log 2>&1
echo "=== gpu_sched exit=$?"; grep -E "middle|^ok|FAIL|failed" $OUT/gpu_sched.log | head -4
daemon g
s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 165 python3 bench/dynamic.py --socket "$sock" --cases gemm14336 --sizes 1500,2100 \
    --out "$OUT/dyn_gemm14336" --wait-s 180 > $OUT/dyn_gemm14336.log 2>&1
echo "=== gemm14336 exit=$? $(el $s0)"; filt < $OUT/dyn_gemm14336.log | tail -4
l=$(left 230); s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/dynamic.py --socket "$sock" --cases gemm4096 --sizes 2100 \
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
