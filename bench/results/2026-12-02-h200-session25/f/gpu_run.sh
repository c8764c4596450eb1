#!/usr/bin/env bash
# Session 25, call f (bash bench/pack_gpu.sh; carry [".gpu"]; about 9 minutes): the other long
# rows the heated final round (a common heater, ten finalists within 10%; calls d, e) now
# decides, under whole tunes on a fresh daemon: issue 41's FP8 8192^3 (fast and promoted
# accumulation), bias + GELU (and quantize) and per-block rows; issue 40's bare MLP GEMMs and
# transposed layouts.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active --format=csv,noheader -lms 100 > $OUT/smi.csv &
sp=$!
daemon f
s0=$(date +%s)
timeout 310 python3 bench/bench.py --socket $sock --arch sm_90a --suite fp8 \
    --match "fp8_gemm 8192x8192x8192 f8,promoted,fp8_bias,fp8_block" \
    --tune measure --alternate --out $OUT/fp8 > $OUT/bench_fp8.log 2>&1
echo "=== bench fp8 tune measure exit=$? $(el $s0)"; filt < $OUT/bench_fp8.log | grep -E "fp8_|case" | tail -8
s0=$(date +%s)
timeout $(left 560) python3 bench/bench.py --socket $sock --arch sm_90a --suite gaps --only gemm_mlp,gemm_trans_a,gemm_trans_b,gemm_trans_ab \
    --tune measure --alternate --out $OUT/gaps > $OUT/bench_gaps.log 2>&1
echo "=== bench gaps tune measure exit=$? $(el $s0)"; filt < $OUT/bench_gaps.log | grep -E "gemm_|case" | tail -8
curl -s --unix-socket $sock http://localhost/v1/jobs > $OUT/jobs.json
python3 - $OUT <<'PY'
import json, sys
for j in json.load(open(f"{sys.argv[1]}/jobs.json"))["jobs"]:
    print(j.get("id"), j.get("state"), j.get("best_us"), j.get("final_round"), j.get("candidates", {}).get("done"), j.get("elapsed_s"))
for f in ("fp8", "gaps"):
    try:
        for r in json.load(open(f"{sys.argv[1]}/{f}/results.json"))["rows"]:
            print(r["case"], r["shape"], r.get("params"))
    except OSError as e:
        print(f, e)
PY
trials $OUT/trials.tsv.gz
kill $dp
kill $sp; gzip -f $OUT/smi.csv
} > "$OUT/gpu_f.log" 2>&1
cat "$OUT/gpu_f.log"
echo "total $(( $(date +%s) - t0 )) s"
