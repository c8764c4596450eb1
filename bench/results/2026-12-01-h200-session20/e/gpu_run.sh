#!/usr/bin/env bash
# Session 20, call e: kbench of .gpu/kbs (e/prep.sh) in two processes: attention_wgmma with the
# row sums by wgmma (NAME) against fp32 sums (NAME_s0), the same schedule otherwise.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
for rep in 1 2; do
    timeout 200 python3 bench/kbench.py .gpu/kbs --json $OUT/kbs_$rep.json > $OUT/kbs_$rep.log 2>&1
    echo "=== kbench process $rep exit=$?"; filt < $OUT/kbs_$rep.log | tail -12 | cut -c1-100
done
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
