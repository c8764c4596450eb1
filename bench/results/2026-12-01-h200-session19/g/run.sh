#!/usr/bin/env bash
# Session 19, call g (carry [".gpu"], after bench/pack_gpu.sh): the cuDNN SDPA form in
# aten.causal_padding_masks (call f: PyTorch 2.11 on the H200 traces GPT-2's masked call as
# _scaled_dot_product_cudnn_attention, which the pass did not take).
#  1. g/sdpa_forms.py: do the CUDA forms take a bias and is_causal together, at which shapes;
#  2. f/dump_gpt2.py again: the split, and each attention causal with a [b, 1, 1, s] mask;
#  3. GPT-2 with a padded batch's attention_mask at 8 dynamic sizes (call c: worst 1.475).
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
R=bench/results/2026-12-01-h200-session19
{
timeout 60 python3 $R/g/sdpa_forms.py 2>&1 | filt
daemon g
PYTHONPATH=clients/python timeout 120 python3 $R/f/dump_gpt2.py "$sock" > $OUT/dump.log 2>&1
echo "=== dump exit=$?"; grep -n "==== causal\|==== dyn\|ops:\|^attention" $OUT/dump.log | cut -c1-400
echo "=== gpt2 dynamic, padded, 8 sizes"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 280 python3 bench/models_dynamic.py --socket "$sock" --out "$OUT/gpt2" \
    --model gpt2 --padded --sizes 8 --batch 1,16 --seq 16,384 --settle-s 8 --iters 20 2>&1 | filt | tail -13
echo "=== gpt2 $(el $s0)"
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
