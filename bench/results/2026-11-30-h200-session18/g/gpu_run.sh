#!/usr/bin/env bash
# Session 18, call g (`bash bench/results/2026-11-30-h200-session18/g/gpu_run.sh`, carry [".gpu"],
# after bench/pack_gpu.sh): the final tree's attention.
#  1. tuner_gpu_attn_wgmma, every case, every candidate against fp64 (the key-padding cases with
#     the staged mask among them); 0 wrong is the bar.
#  2. issue 38's whole table with the cost model's picks (tune model).
#  3. the BERT and hd64 rows with tune measure, as the issue's table takes them.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
s0=$(date +%s)
LD_LIBRARY_PATH=$G/lib timeout 240 $G/tests/tuner_gpu_attn_wgmma > $OUT/attn_wgmma.log 2>&1
echo "=== tuner_gpu_attn_wgmma exit=$? $(el $s0)"; grep -E "candidates|WRONG|error|failure|all cand" $OUT/attn_wgmma.log | head -24
daemon g
s0=$(date +%s)
mkdir -p $OUT/model $OUT/measure
timeout 200 python3 bench/bench.py --socket $sock --arch sm_90a --suite attention --tune model \
    --alternate --out $OUT/model > $OUT/bench_attn_model.log 2>&1
echo "=== bench attention tune model exit=$? $(el $s0)"; filt < $OUT/bench_attn_model.log | tail -30
s0=$(date +%s)
timeout 150 python3 bench/bench.py --socket $sock --arch sm_90a --suite attention --match attn_bert,attn_hd64 \
    --alternate --out $OUT/measure > $OUT/bench_attn_measure.log 2>&1
echo "=== bench attention tune measure exit=$? $(el $s0)"; filt < $OUT/bench_attn_measure.log | tail -4
kill $dp
tar czf $OUT/tables.tgz -C $OUT model measure
rm -rf $OUT/model $OUT/measure
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
