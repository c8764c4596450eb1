#!/usr/bin/env bash
# Session 24, call b (bash bench/pack_gpu.sh, then kgen programs into .gpu/k: five schedules of
# FP8 8192x14336x4096 row/col, named rcTRIAL_* after their candidate numbers in call a; carry
# [".gpu"]; about 5 minutes). Call a's tunes picked candidate 13 (128x256 stream-K) in two jobs
# whose trials table holds faster times for others: did the heated final round run, what did
# each finalist time (the trials' reasons), and what does the job say (GET /v1/jobs)? Then the
# five programs alternating with torch._scaled_mm and after 300 ms back to back.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active --format=csv,noheader -lms 50 > $OUT/smi.csv &
sp=$!
daemon b
s0=$(date +%s)
timeout 200 python3 bench/bench.py --socket $sock --arch sm_90a --suite fp8 --only fp8_gemm \
    --match "8192x14336x4096 f8,8192x14336x4096 rowcol,8192x8192x8192 rowcol" \
    --tune measure --alternate --out $OUT/fp8 > $OUT/bench_fp8.log 2>&1
echo "=== bench fp8_gemm tune measure exit=$? $(el $s0)"; filt < $OUT/bench_fp8.log | grep -E "fp8_|case" | tail -4
curl -s --unix-socket $sock http://localhost/v1/jobs > $OUT/jobs.json
python3 - $OUT/jobs.json <<'PY'
import json, sys
for j in json.load(open(sys.argv[1]))["jobs"]:
    print(j.get("id"), j.get("state"), j.get("best_us"), j.get("final_round"), j.get("candidates"), j.get("elapsed_s"))
PY
python3 - "$db" <<'PY' | gzip > $OUT/trials.tsv.gz
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
for r in c.execute("SELECT * FROM trials ORDER BY tuning_key, candidate"):
    print("\t".join(str(x) for x in r))
PY
zcat $OUT/trials.tsv.gz | awk -F'\t' '$8 != "None" && $8 != "" {print substr($1,1,8), $2, $6, $8}' | head -40
kill $dp
s0=$(date +%s)
timeout 240 python3 bench/kbench.py $G/k --alternate --sustain 300 --json $OUT/kbench.json > $OUT/kbench.log 2>&1
echo "=== kbench exit=$? $(el $s0)"; filt < $OUT/kbench.log | grep -v '^{"name'
kill $sp; gzip -f $OUT/smi.csv
} > "$OUT/gpu_b.log" 2>&1
cat "$OUT/gpu_b.log"
echo "total $(( $(date +%s) - t0 )) s"
