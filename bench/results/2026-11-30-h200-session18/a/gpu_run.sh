#!/usr/bin/env bash
# Session 18, call a (`bash bench/results/2026-11-30-h200-session18/a/gpu_run.sh`, carry
# [".gpu"], after a/prep.sh): issue 38's BERT and hd 256 rows as kernels alone.
#  1. kbench of a/prep.sh's programs: correctness against the fp32 reference and time.
#  2. ncu of BERT's pick with and without its mask: warp states, where the stalls sit (source
#     counters), pipe utilisation.
#  3. bench.py's BERT and hd 256 rows through the daemon (tune measure) against PyTorch's SDPA.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
for rep in 1 2; do
    timeout 120 python3 bench/kbench.py .gpu/kbn --only attn --json $OUT/kbn_attn_$rep.json > $OUT/kbn_attn_$rep.log 2>&1
    echo "=== kbench attn process $rep exit=$?"; filt < $OUT/kbn_attn_$rep.log | tail -6
done
S="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section SchedulerStats --section ComputeWorkloadAnalysis --section Occupancy"
for p in attn_bert attn_bert_nomask attn_hd256_c2; do
    timeout 90 ncu --kernel-name regex:hd_attention --launch-skip 1 --launch-count 1 $S \
        python3 bench/kbench.py .gpu/kbn --only $p > $OUT/ncu_$p.log 2>&1
    echo "=== ncu $p exit=$?"; grep -E "Duration|Issued Warp|No Eligible|Eligible Warps|Warp Cycles Per Issued|Pipe|Stall" $OUT/ncu_$p.log | head -14
done
daemon a
s0=$(date +%s)
timeout 200 python3 bench/bench.py --socket $sock --arch sm_90a --suite attention --match attn_bert,"attn_hd256 b8" \
    --alternate --out $OUT > $OUT/bench_attn.log 2>&1
echo "=== bench attention exit=$? $(el $s0)"; filt < $OUT/bench_attn.log | tail -6
kill $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
