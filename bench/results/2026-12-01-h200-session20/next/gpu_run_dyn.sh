#!/usr/bin/env bash
# Prepared in session 20 for the next session (after next/gpu_run.sh, carry [".gpu"]; run twice:
# CASES=attention, about 5 minutes, then CASES=gemm4096, about 6): issue 39's rows on the final
# tree, fresh daemon, tune measure (bench/dynamic.py: each size against the kernel tuned for it,
# and cuBLAS for the GEMM). If every row holds (attention and the GEMM within 1.10 of the exact
# kernel, the GEMM >= 0.95 of cuBLAS at all 16 sizes), issue 39 can be resolved.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
CASES=${CASES:-attention}
{
daemon d
s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 540 python3 bench/dynamic.py --socket "$sock" --cases "$CASES" --out "$OUT/dyn" \
    --wait-s 500 > $OUT/dyn_$CASES.log 2>&1
echo "=== dynamic.py $CASES exit=$? $(el $s0)"; filt < $OUT/dyn_$CASES.log | tail -30
trials $OUT/trials_$CASES.tsv.gz
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
