#!/usr/bin/env bash
# Session 20, call i (after bench/pack_gpu.sh, carry [".gpu"]): with the worker's timed spans,
# the rows of small kernels where clusters and split-K compete, tune measure on a fresh daemon:
# FP8 decode (M = 1, 16, 64 against 8192x8192 e4m3; and B [K,N]), attention decode and BERT.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
daemon i
s0=$(date +%s)
timeout 260 python3 bench/bench.py --socket $sock --arch sm_90a --suite fp8 --only fp8_decode,fp8_decode_kn \
    --tune measure --alternate --out $OUT/fp8 > $OUT/bench_fp8_decode.log 2>&1
echo "=== bench fp8 decode tune measure exit=$? $(el $s0)"; filt < $OUT/bench_fp8_decode.log | tail -6
s0=$(date +%s)
timeout 200 python3 bench/bench.py --socket $sock --arch sm_90a --suite attention --only attn_decode,attn_bert \
    --tune measure --alternate --out $OUT/attn > $OUT/bench_attn_decode.log 2>&1
echo "=== bench attention decode tune measure exit=$? $(el $s0)"; filt < $OUT/bench_attn_decode.log | tail -9
kill $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
