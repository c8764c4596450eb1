#!/usr/bin/env bash
# Session 20, call g (after bench/pack_gpu.sh, carry [".gpu"]): causal work items dealt in a snake
# (odd rounds backwards) by attention_wgmma:
#  1. tuner_gpu_attn_wgmma's causal cases, every candidate against fp64, the new one with 192-384
#     items over 132 blocks (a partial last round, odd or even);
#  2. issue 38's table on this tree (tune model, alternating with the peers).
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
s0=$(date +%s)
AW_ONLY=causal LD_LIBRARY_PATH=$G/lib timeout 240 $G/tests/tuner_gpu_attn_wgmma > $OUT/attn_wgmma_causal.log 2>&1
echo "=== tuner_gpu_attn_wgmma causal cases exit=$? $(el $s0)"; grep -E "candidates|WRONG|error|correct" $OUT/attn_wgmma_causal.log | head -20
daemon m
s0=$(date +%s)
mkdir -p $OUT/model
timeout 200 python3 bench/bench.py --socket $sock --arch sm_90a --suite attention --tune model \
    --alternate --out $OUT/model > $OUT/bench_attn_model.log 2>&1
echo "=== bench attention tune model exit=$? $(el $s0)"; filt < $OUT/bench_attn_model.log | tail -30
kill $dp
tar czf $OUT/extra.tgz -C $OUT model && rm -rf $OUT/model
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
