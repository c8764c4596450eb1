#!/usr/bin/env bash
# Session 23, call f (bash bench/pack_gpu.sh; carry [".gpu"]; about 4 minutes): with FP8
# pingpong tiles priced as fast as cooperative ones (call d's ncu), issue 41's GEMM rows under a
# whole tune: does the tune now time the pingpong 128x128 tile, and pick it?
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
daemon f
s0=$(date +%s)
timeout 300 python3 bench/bench.py --socket $sock --arch sm_90a --suite fp8 --only fp8_gemm --match rowcol,x4096 \
    --tune measure --alternate --out $OUT/fp8 > $OUT/bench_fp8.log 2>&1
echo "=== bench fp8_gemm tune measure exit=$? $(el $s0)"; filt < $OUT/bench_fp8.log | grep -E "fp8_|case" | tail -9
python3 - $OUT <<'PY'
import json, sys
for r in json.load(open(f"{sys.argv[1]}/fp8/results.json"))["rows"]:
    print(r["shape"], r.get("params"))
PY
trials $OUT/trials.tsv.gz
kill $dp
} > "$OUT/gpu_f.log" 2>&1
cat "$OUT/gpu_f.log"
echo "total $(( $(date +%s) - t0 )) s"
