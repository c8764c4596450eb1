#!/usr/bin/env bash
# Prepared in session 18 for the next session (`bash bench/results/2026-11-30-h200-session18/next/gpu_run.sh`,
# carry [".gpu"], after bench/pack_gpu.sh and next/prep.sh; about 2 minutes): kbench of
# next/prep.sh's variants in two processes. A variant is worth putting in tuner/attn/wgmma.c where
# it beats its _nv control in both; _f touches every attention_wgmma kernel, _h only staged masks.
# BERT's row needs 24.4 us or less against PyTorch's 31.7 (1.3x), at 24.3-24.7 this session.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
for rep in 1 2; do
    timeout 200 python3 bench/kbench.py .gpu/kba --only attn --json $OUT/kba_$rep.json > $OUT/kba_$rep.log 2>&1
    echo "=== kbench variants process $rep exit=$?"; filt < $OUT/kba_$rep.log | tail -19
done
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
