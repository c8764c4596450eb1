#!/usr/bin/env bash
# Prepared in session 19 for the next session (`bash bench/results/2026-12-01-h200-session19/next/gpu_run_kbench.sh`,
# carry [".gpu"], after bench/pack_gpu.sh and next/prep_kbench.sh; about 2 minutes): kbench of
# .gpu/kbf in two processes, each kernel of this tree beside its session-18 build (_old). The
# folded scale (no mask) should cut the softmax's fp32 instructions by about a quarter at D = 64;
# a case whose new build is not ahead in both processes says the fold does not pay there.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
for rep in 1 2; do
    timeout 200 python3 bench/kbench.py .gpu/kbf --only attn --json $OUT/kbf_$rep.json > $OUT/kbf_$rep.log 2>&1
    echo "=== kbench process $rep exit=$?"; filt < $OUT/kbf_$rep.log | tail -10
done
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
