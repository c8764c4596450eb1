#!/usr/bin/env bash
# Session 21, call d (after bench/pack_gpu.sh and next/prep.sh, carry [".gpu"]; the session's
# last 4 minutes of device time): kbench of next/prep.sh's programs in two processes: D = 256 with
# 128 keys in one K and one V slot against the model's pick (80 keys, two stages), and BERT's
# masked case. kbench checks each program's output against its reference kernel.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
for rep in 1 2; do
    PYTHONUNBUFFERED=1 timeout 75 python3 bench/kbench.py .gpu/kbs --json $OUT/kbs_$rep.json > $OUT/kbs_$rep.log 2>&1
    echo "=== kbench process $rep exit=$?"; filt < $OUT/kbs_$rep.log | tail -12 | cut -c1-110
done
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
