#!/usr/bin/env bash
# Session 22, call f (bash bench/pack_gpu.sh, carry [".gpu"]; about 3 minutes): call e's two
# failed rows - causal bf16 attention at 8K and 16K tokens, "no candidate passed (116
# candidates, 116 wrong)" under tune measure - with the verification's rows (row_len, an
# attention op's D: gpu_workers/compare.h). All four causal bf16 rows, fresh daemon, tune measure.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
daemon m
s0=$(date +%s)
timeout 200 python3 bench/bench.py --socket $sock --arch sm_90a --suite attention --only attn_hd128 --match "causal bf16" \
    --tune measure --alternate --out $OUT/measure > $OUT/bench_measure.log 2>&1
echo "=== bench causal bf16 tune measure exit=$? $(el $s0)"; filt < $OUT/bench_measure.log | grep -E "attn_|case" | tail -6
trials $OUT/trials_causal_bf16.tsv.gz
kill $dp
gzip -9 $OUT/bench_measure.log
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
