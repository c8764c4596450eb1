#!/usr/bin/env bash
# Prepared in session 18 for the next session (`bash bench/results/2026-11-30-h200-session18/next/gpu_run_models.sh`,
# carry [".gpu"], after bench/pack_gpu.sh; up to 9 minutes): BERT and GPT-2 with a padded batch's
# attention_mask at dynamic sizes (bench/models_dynamic.py --padded), against the same models
# compiled per size. New in session 18 and never run on a GPU: on the CPU both went wholly to
# PyTorch before (the [b,1,s,s] mask named s twice); now BERT's attention reads the [b,1,1,s]
# padding part (staged in shared memory by attention_wgmma) and GPT-2's is causal with it. Each
# row's error against eager is in the table; the dynamic / static ratio's target is 1.15.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
daemon padded
for model in bert gpt2; do
    l=$(left 540); [ "$l" -lt 60 ] && break
    echo "=== $model dynamic, padded, 8 sizes (limit $((l / 2)) s)"; s0=$(date +%s)
    PYTHONUNBUFFERED=1 timeout $((l / 2)) python3 bench/models_dynamic.py --socket "$sock" --out "$OUT/$model" \
        --model $model --padded --sizes 8 --batch 1,16 --seq 16,384 --settle-s 8 --iters 20 2>&1 | filt | tail -14
    echo "=== $model $(el $s0)"
done
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
