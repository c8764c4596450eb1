#!/usr/bin/env bash
# Session 18, call k (`bash bench/results/2026-11-30-h200-session18/k/gpu_run.sh`, carry [".gpu"],
# after k/prep.sh): ncu of BERT's attention with the staged mask and without a mask: warp states,
# the top stall locations (source counters), pipe use.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
S="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section SchedulerStats --section ComputeWorkloadAnalysis"
for p in attn_bert_staged attn_bert_nomask; do
    timeout 80 ncu --kernel-name regex:hd_attention --launch-skip 1 --launch-count 1 $S \
        --print-details all python3 bench/kbench.py .gpu/kbn --only $p > $OUT/ncu_$p.log 2>&1
    echo "=== ncu $p exit=$?"; grep -E "Duration|Issued Warp|No Eligible|Warp Cycles Per Issued|Executed Ipc A" $OUT/ncu_$p.log | head -8
done
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
