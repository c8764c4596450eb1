#!/usr/bin/env bash
# Session 19, call e (carry [".gpu"], after bench/pack_gpu.sh): where GPT-2's padded dynamic row
# at batch 12 x 314 (call c: 2.859 ms against 1.939 compiled for the size, 1.475) loses its time:
# the row again beside 13 x 231 (1.047), with the profiler's kernel table of the dynamic and the
# static compile at each.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
daemon e
s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 300 python3 bench/models_dynamic.py --socket "$sock" --out "$OUT/gpt2" \
    --model gpt2 --padded --at 12x314,13x231 --batch 1,16 --seq 16,384 --settle-s 8 --iters 20 --profile 2>&1 \
    | filt > $OUT/gpt2_profile.log
echo "=== gpt2 profile $(el $s0)"; tail -80 $OUT/gpt2_profile.log
kill -TERM $dp; wait $dp
trials $OUT/trials.gz
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
