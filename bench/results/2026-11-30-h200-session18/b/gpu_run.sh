#!/usr/bin/env bash
# Session 18, call b (`bash bench/results/2026-11-30-h200-session18/b/gpu_run.sh`, carry [".gpu"],
# after bench/pack_gpu.sh and b/prep.sh): the staged key mask.
#  1. tuner_gpu_attn_wgmma's masked cases (AW_ONLY=mask): every candidate against fp64, the new
#     key-padding cases ([B,1,1,Skv] with -inf keys, an entry all -inf, one all -FLT_MAX) beside
#     the [S,Skv] ones; 0 wrong is the bar.
#  2. kbench of BERT's attention with the staged mask at several schedules, the old program and
#     the same without a mask.
#  3. bench.py's BERT row through the daemon (tune measure) against PyTorch's SDPA backends.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
s0=$(date +%s)
AW_ONLY=mask LD_LIBRARY_PATH=$G/lib timeout 240 $G/tests/tuner_gpu_attn_wgmma > $OUT/attn_wgmma_mask.log 2>&1
echo "=== tuner_gpu_attn_wgmma mask cases exit=$? $(el $s0)"; grep -E "candidates|WRONG|error" $OUT/attn_wgmma_mask.log | head -20
for rep in 1 2; do
    timeout 150 python3 bench/kbench.py .gpu/kbn --only attn_bert --json $OUT/kbn_bert_$rep.json > $OUT/kbn_bert_$rep.log 2>&1
    echo "=== kbench attn_bert process $rep exit=$?"; filt < $OUT/kbn_bert_$rep.log | tail -16
done
daemon b
s0=$(date +%s)
timeout 150 python3 bench/bench.py --socket $sock --arch sm_90a --suite attention --match attn_bert \
    --alternate --out $OUT > $OUT/bench_bert.log 2>&1
echo "=== bench attn_bert exit=$? $(el $s0)"; filt < $OUT/bench_bert.log | tail -3
trials $OUT/trials_b.tsv.gz
kill $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
