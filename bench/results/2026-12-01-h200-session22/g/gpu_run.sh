#!/usr/bin/env bash
# Session 22, call g (bash bench/pack_gpu.sh, carry [".gpu"]; about 2 minutes): issue 38's
# causal hd128 rows under tune model after the cost model's causal_three (three consumers, 96
# keys: the default and the model's pick from 2k queries).
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
daemon m
s0=$(date +%s)
timeout 150 python3 bench/bench.py --socket $sock --arch sm_90a --suite attention --only attn_hd128 --match causal \
    --tune model --alternate --out $OUT/model > $OUT/bench_model.log 2>&1
echo "=== bench causal tune model exit=$? $(el $s0)"; filt < $OUT/bench_model.log | grep -E "attn_|case" | tail -9
kill $dp
gzip -9 $OUT/bench_model.log
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
