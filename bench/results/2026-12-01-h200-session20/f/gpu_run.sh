#!/usr/bin/env bash
# Session 20, call f (after bench/pack_gpu.sh, carry [".gpu"]): the row sums by wgmma
# (attention_wgmma's sum_mma, offered beside a staged mask) through the whole path:
#  1. tuner_gpu_attn_wgmma's masked cases: every candidate, sum_mma ones included, against fp64
#     (-inf keys, a batch entry all -inf, one all -FLT_MAX);
#  2. tests/gpu/masked_models.py: BERT and GPT-2 with a padded batch through torch.compile;
#  3. issue 38's BERT row (tune model, then tune measure on a fresh daemon).
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
s0=$(date +%s)
AW_ONLY=mask LD_LIBRARY_PATH=$G/lib timeout 240 $G/tests/tuner_gpu_attn_wgmma > $OUT/attn_wgmma_mask.log 2>&1
echo "=== tuner_gpu_attn_wgmma mask cases exit=$? $(el $s0)"; grep -E "candidates|WRONG|error" $OUT/attn_wgmma_mask.log | head -20
grep -c "sum_mma" $OUT/attn_wgmma_mask.log
daemon m
s0=$(date +%s)
timeout 150 python3 tests/gpu/masked_models.py --socket "$sock" > $OUT/masked_models.log 2>&1
echo "=== masked_models exit=$? $(el $s0)"; grep -E "error|FAILED|through" $OUT/masked_models.log | tail -26
for tune in model measure; do
    s0=$(date +%s)
    [ $tune = measure ] && { kill $dp; wait $dp; daemon t; }
    timeout 120 python3 bench/bench.py --socket $sock --arch sm_90a --suite attention --only attn_bert --tune $tune \
        --alternate --out $OUT > $OUT/bench_bert_$tune.log 2>&1
    echo "=== bench attn_bert tune $tune exit=$? $(el $s0)"; filt < $OUT/bench_bert_$tune.log | tail -3
done
kill $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
