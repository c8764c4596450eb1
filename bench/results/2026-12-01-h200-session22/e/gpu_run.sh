#!/usr/bin/env bash
# Session 22, call e (bash bench/pack_gpu.sh, carry [".gpu"]; about 8 minutes): issue 38's
# attention_wgmma rows (hd128 2k-16k plain and causal, hd64, hd256, BERT) under tune measure, with
# the daemon's trials table (every timed candidate) brought back: call d's measured picks at 2k
# (hd128: 256 keys in one slot, 2.5% ahead of the model's pick; causal: 96 keys over three
# consumers, 6% ahead) sit 20th and 30th in the cost model's ranking, which these timings refit.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
daemon m
s0=$(date +%s)
timeout 470 python3 bench/bench.py --socket $sock --arch sm_90a --suite attention --only attn_hd128,attn_hd64,attn_hd256,attn_bert \
    --tune measure --alternate --out $OUT/measure > $OUT/bench_measure.log 2>&1
echo "=== bench attention tune measure exit=$? $(el $s0)"; filt < $OUT/bench_measure.log | grep -E "attn_|case" | tail -24
trials $OUT/trials_attn.tsv.gz
kill $dp
gzip -9 $OUT/bench_measure.log
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
