#!/usr/bin/env bash
# Session 18, call i (`bash bench/results/2026-11-30-h200-session18/i/gpu_run.sh`, carry [".gpu"],
# after bench/pack_gpu.sh and i/prep.sh):
#  1. kbench of every hd 256 attention candidate at both of issue 38's hd256 shapes.
#  2. issue 41's FP8 B [K,N] rows through the daemon, tune model and tune measure: the cost model
#     now prices the transposing warps' latency (the decode pick takes tnsp_wg).
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
s0=$(date +%s)
timeout 200 python3 bench/kbench.py .gpu/kbn --only attn_hd256 --json $OUT/kbn_hd256.json > $OUT/kbn_hd256.log 2>&1
echo "=== kbench hd256 exit=$? $(el $s0)"; filt < $OUT/kbn_hd256.log | grep -v "^attn" | tail -2; filt < $OUT/kbn_hd256.log | grep "^attn" | sort -k2 -n | head -50
daemon i
for tune in model measure; do
    s0=$(date +%s)
    mkdir -p $OUT/fp8_$tune
    timeout 120 python3 bench/bench.py --socket $sock --arch sm_90a --suite fp8 --match fp8_decode_kn,fp8_gemm_kn \
        --tune $tune --alternate --out $OUT/fp8_$tune > $OUT/bench_fp8_$tune.log 2>&1
    echo "=== bench fp8 kn tune $tune exit=$? $(el $s0)"; filt < $OUT/bench_fp8_$tune.log | tail -3
done
kill $dp
tar czf $OUT/fp8.tgz -C $OUT fp8_model fp8_measure
rm -rf $OUT/fp8_model $OUT/fp8_measure
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
