#!/usr/bin/env bash
# Session 25, call e (bash bench/pack_gpu.sh; carry [".gpu"]; about 6 minutes): call d's heater
# put pingpong 128x128 first on FP8 row/col 8192x14336x4096 (0.97), but on row/col 8192^3 the
# six finalists (within 5% at the top clock) were all 128x192-256 tiles. A heated round now
# takes up to ten within 10%. Issue 41's seven fp8_gemm rows and issue 40's SwiGLU rows under
# whole tunes on a fresh daemon, the clock traced.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
s0=$(date +%s)
LD_LIBRARY_PATH=$G/lib timeout 90 $G/tests/gpu_worker_selftest > $OUT/selftest.log 2>&1
echo "=== gpu_worker_selftest exit=$? $(el $s0)"; grep -E "back-to-back|heater|FAIL|selftest" $OUT/selftest.log | tail -6
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active --format=csv,noheader -lms 50 > $OUT/smi.csv &
sp=$!
daemon e
s0=$(date +%s)
timeout 330 python3 bench/bench.py --socket $sock --arch sm_90a --suite fp8 --only fp8_gemm --match rowcol,x4096 \
    --tune measure --alternate --out $OUT/fp8 > $OUT/bench_fp8.log 2>&1
echo "=== bench fp8_gemm tune measure exit=$? $(el $s0)"; filt < $OUT/bench_fp8.log | grep -E "fp8_|case" | tail -9
s0=$(date +%s)
timeout 150 python3 bench/bench.py --socket $sock --arch sm_90a --suite gaps --only gemm_swiglu \
    --tune measure --alternate --out $OUT/swiglu > $OUT/bench_swiglu.log 2>&1
echo "=== bench gemm_swiglu tune measure exit=$? $(el $s0)"; filt < $OUT/bench_swiglu.log | grep -E "gemm_|case" | tail -4
curl -s --unix-socket $sock http://localhost/v1/jobs > $OUT/jobs.json
python3 - $OUT <<'PY'
import json, sys
for j in json.load(open(f"{sys.argv[1]}/jobs.json"))["jobs"]:
    print(j.get("id"), j.get("state"), j.get("best_us"), j.get("final_round"), j.get("candidates", {}).get("done"), j.get("elapsed_s"))
for f in ("fp8", "swiglu"):
    for r in json.load(open(f"{sys.argv[1]}/{f}/results.json"))["rows"]:
        print(r["shape"], r.get("params"))
PY
python3 - "$db" <<'PY' | gzip > $OUT/trials.tsv.gz
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
for r in c.execute("SELECT * FROM trials ORDER BY tuning_key, candidate"):
    print("\t".join(str(x) for x in r))
PY
zcat $OUT/trials.tsv.gz | awk -F'\t' '$8 ~ /back-to-back/ {print substr($1,1,8), $2, $6, $8}'
kill $dp
kill $sp; gzip -f $OUT/smi.csv
} > "$OUT/gpu_e.log" 2>&1
cat "$OUT/gpu_e.log"
echo "total $(( $(date +%s) - t0 )) s"
