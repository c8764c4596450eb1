#!/usr/bin/env bash
# Session 18, call d (`bash bench/results/2026-11-30-h200-session18/d/gpu_run.sh`, carry [".gpu"],
# after bench/pack_gpu.sh and d/prep.sh): the staged key mask dealt to three warps by stage; two
# Q tiles where they fit (every attention_wgmma kernel changed: the whole GPU check).
#  1. tuner_gpu_attn_wgmma, every case: every candidate against fp64, the new key-padding cases
#     ([B,1,1,Skv] with -inf keys, an entry all -inf, one all -FLT_MAX) among them; 0 wrong.
#  2. kbench of BERT's attention with the staged mask at several schedules, the old program and
#     the same without a mask.
#  3. bench.py's BERT row through the daemon (tune measure) against PyTorch's SDPA backends.
#  4. issue 38's whole table with the cost model's picks (tune model): where every row stands.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
s0=$(date +%s)
AW_TIME_ALL=1 LD_LIBRARY_PATH=$G/lib timeout 300 $G/tests/tuner_gpu_attn_wgmma > $OUT/attn_wgmma.log 2>&1
echo "=== tuner_gpu_attn_wgmma exit=$? $(el $s0)"; grep -E "candidates|WRONG|error|failure|all cand" $OUT/attn_wgmma.log | head -24
for rep in 1 2; do
    timeout 150 python3 bench/kbench.py .gpu/kbn --only attn_bert --json $OUT/kbn_bert_$rep.json > $OUT/kbn_bert_$rep.log 2>&1
    echo "=== kbench attn_bert process $rep exit=$?"; filt < $OUT/kbn_bert_$rep.log | tail -16
done
daemon d
s0=$(date +%s)
timeout 150 python3 bench/bench.py --socket $sock --arch sm_90a --suite attention --match attn_bert \
    --alternate --out $OUT > $OUT/bench_bert.log 2>&1
echo "=== bench attn_bert exit=$? $(el $s0)"; filt < $OUT/bench_bert.log | tail -3
trials $OUT/trials_d.tsv.gz
s0=$(date +%s)
mkdir -p $OUT/model
timeout 300 python3 bench/bench.py --socket $sock --arch sm_90a --suite attention --tune model \
    --alternate --out $OUT/model > $OUT/bench_attn_model.log 2>&1
echo "=== bench attention tune model exit=$? $(el $s0)"; filt < $OUT/bench_attn_model.log | tail -32
kill $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
