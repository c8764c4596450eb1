#!/usr/bin/env bash
# Session 22, call c: session 21's next/gpu_run_gaps.sh (bash bench/pack_gpu.sh, then this with carry
# [".gpu"]; about 5 minutes): issue 40's SwiGLU rows under a whole tune. Session 17's table
# (1.07 / 1.20 / 1.10 against 1.3) tuned with --budget-s 6, so its picks were the model's first
# few: 4096x11008x4096 took 128x128 in CTA pairs at 658.6 us, where the kernel-gaps session had
# timed 592.5 us (1.22) with the operand tile by TMA. Here: the default 20 s budget, stop 20's
# timing of back-to-back spans, and the bare GEMMs beside them; the trials table comes back to
# see which schedules were timed.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
daemon g
s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 280 python3 bench/bench.py --socket "$sock" --out "$OUT/gaps" --suite gaps --arch sm_90a \
    --only gemm_swiglu,gemm_mlp --tune measure --alternate 2>&1 | filt | tail -12
echo "=== swiglu rows $(el $s0)"
trials $OUT/trials_gaps.tsv.gz
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
