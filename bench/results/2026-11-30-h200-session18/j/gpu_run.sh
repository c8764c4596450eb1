#!/usr/bin/env bash
# Session 18, call j (`bash bench/results/2026-11-30-h200-session18/j/gpu_run.sh`, carry [".gpu"],
# after bench/pack_gpu.sh): the final tree's issue 38 table with the cost model's picks (hd256
# now two consumers without the overlap, hd64 128 keys), and the hd256 rows with tune measure.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
daemon j
s0=$(date +%s)
mkdir -p $OUT/model $OUT/measure
timeout 200 python3 bench/bench.py --socket $sock --arch sm_90a --suite attention --tune model \
    --alternate --out $OUT/model > $OUT/bench_attn_model.log 2>&1
echo "=== bench attention tune model exit=$? $(el $s0)"; filt < $OUT/bench_attn_model.log | tail -30
s0=$(date +%s)
timeout 100 python3 bench/bench.py --socket $sock --arch sm_90a --suite attention --match attn_hd256 \
    --alternate --out $OUT/measure > $OUT/bench_attn_measure.log 2>&1
echo "=== bench attention hd256 tune measure exit=$? $(el $s0)"; filt < $OUT/bench_attn_measure.log | tail -3
kill $dp
tar czf $OUT/tables.tgz -C $OUT model measure
rm -rf $OUT/model $OUT/measure
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
