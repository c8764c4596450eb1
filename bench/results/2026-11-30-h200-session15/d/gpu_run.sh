#!/usr/bin/env bash
# Prepared in session 14 (copy to .gpu/ beside gpu_run.sh; `bash .gpu/gpu_run_bert.sh`, carry
# [".gpu"]; about 5 minutes): BERT-base through the backend at 20 random sizes (tune model), as
# call a ran it (worst 1.152 at 7 x 197), after session 14 gave ops with several names eighths
# of an octave from 128 where their table fits (BERT's s: 129..144, 145..160, ...).
set -u
cd "$(dirname "$0")/.."
. bench/gpu_call.sh
{
daemon m
l=$(left 400); echo "=== bert dynamic, 20 sizes (limit $l s)"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/models_dynamic.py --socket "$sock" --out "$OUT/dyn" \
    --sizes 20 --settle-s 8 --iters 20 > $OUT/bert.log 2>&1
echo "=== bert dynamic exit=$? $(el $s0)"; grep -E "^\{|rows done|compilation" $OUT/bert.log | tail -24
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
tar czf /tmp/all.tgz -C "$OUT" . && mv /tmp/all.tgz "$OUT/"
echo "total $(( $(date +%s) - t0 )) s"
