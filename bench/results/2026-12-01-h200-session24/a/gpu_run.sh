#!/usr/bin/env bash
# Prepared in session 23 for the next session (its device time was spent before the heated final
# round was built; bash bench/pack_gpu.sh, carry [".gpu"]; about 7 minutes): the heated final
# round's first GPU run. gpu_worker_selftest (its heating case: 100 ms back to back, the runs
# counted), then issue 41's GEMM rows and issue 40's SwiGLU rows under whole tunes on a fresh
# daemon: final_round.heated in each job, six finalists, and do the row/col rows take the
# pingpong tile now (call f: 0.90 with 128x256 stream-K, pingpong 5-6% faster under the cap)?
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
s0=$(date +%s)
LD_LIBRARY_PATH=$G/lib timeout 90 $G/tests/gpu_worker_selftest > $OUT/selftest.log 2>&1
echo "=== gpu_worker_selftest exit=$? $(el $s0)"; grep -E "heated|ok|FAIL|check" $OUT/selftest.log | tail -4
daemon h
s0=$(date +%s)
timeout 300 python3 bench/bench.py --socket $sock --arch sm_90a --suite fp8 --only fp8_gemm --match rowcol,x4096 \
    --tune measure --alternate --out $OUT/fp8 > $OUT/bench_fp8.log 2>&1
echo "=== bench fp8_gemm tune measure exit=$? $(el $s0)"; filt < $OUT/bench_fp8.log | grep -E "fp8_|case" | tail -9
s0=$(date +%s)
timeout 150 python3 bench/bench.py --socket $sock --arch sm_90a --suite gaps --only gemm_swiglu \
    --tune measure --alternate --out $OUT/swiglu > $OUT/bench_swiglu.log 2>&1
echo "=== bench gemm_swiglu tune measure exit=$? $(el $s0)"; filt < $OUT/bench_swiglu.log | grep -E "gemm_|case" | tail -4
python3 - $OUT <<'PY'
import json, sys
for f in ("fp8", "swiglu"):
    for r in json.load(open(f"{sys.argv[1]}/{f}/results.json"))["rows"]:
        print(r["shape"], r.get("params"))
PY
trials $OUT/trials.tsv.gz
kill $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
