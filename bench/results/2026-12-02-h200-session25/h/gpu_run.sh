#!/usr/bin/env bash
# Session 25, call h (bash bench/pack_gpu.sh; carry [".gpu"]; the last 4 minutes of device time):
# issue 40's grouped-convolution and unaligned-GEMM rows on this session's tree (last measured
# in 2026-11-29-h200-kernel-gaps), whole tunes on a fresh daemon.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
daemon h
s0=$(date +%s)
timeout 120 python3 bench/bench.py --socket $sock --arch sm_90a --suite gconv \
    --tune measure --alternate --out $OUT/gconv > $OUT/bench_gconv.log 2>&1
echo "=== bench gconv tune measure exit=$? $(el $s0)"; filt < $OUT/bench_gconv.log | grep -E "gconv|case" | tail -8
s0=$(date +%s)
timeout $(left 235) python3 bench/bench.py --socket $sock --arch sm_90a --suite gemm --only gemm_unaligned \
    --tune measure --alternate --out $OUT/unaligned > $OUT/bench_unaligned.log 2>&1
echo "=== bench gemm_unaligned tune measure exit=$? $(el $s0)"; filt < $OUT/bench_unaligned.log | grep -E "gemm_|case" | tail -5
kill $dp
} > "$OUT/gpu_h.log" 2>&1
cat "$OUT/gpu_h.log"
echo "total $(( $(date +%s) - t0 )) s"
