#!/usr/bin/env bash
# Session 20, call j (after bench/pack_gpu.sh, carry [".gpu"]): causal work items of fixed-size
# ops dealt by a table (longest first to the least loaded block; the snake stays for named sizes):
#  1. tuner_gpu_attn_wgmma's causal cases, every candidate against fp64;
#  2. issue 38's causal rows (tune model, alternating with cuDNN).
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
s0=$(date +%s)
AW_ONLY=causal LD_LIBRARY_PATH=$G/lib timeout 200 $G/tests/tuner_gpu_attn_wgmma > $OUT/attn_wgmma_causal.log 2>&1
echo "=== tuner_gpu_attn_wgmma causal cases exit=$? $(el $s0)"; grep -E "candidates|WRONG|error|correct" $OUT/attn_wgmma_causal.log | head -20
daemon m
s0=$(date +%s)
timeout 150 python3 bench/bench.py --socket $sock --arch sm_90a --suite attention --only attn_hd128 --match causal \
    --tune model --alternate --out $OUT/model > $OUT/bench_causal.log 2>&1
echo "=== bench causal rows tune model exit=$? $(el $s0)"; filt < $OUT/bench_causal.log | tail -10
kill $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
