#!/usr/bin/env bash
# Prepared in session 22 for the next session (its device time ran out before it; bash
# bench/pack_gpu.sh, carry [".gpu"]; about 1 minute): the worker's
# comparison moved to gpu_workers/compare.c: gpu_worker_selftest (right, wrong and poisoned
# outputs through the real pool) and one GEMM row under tune measure (row_len 0, the path every
# op but attention takes).
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
s0=$(date +%s)
LD_LIBRARY_PATH=$G/lib timeout 60 $G/tests/gpu_worker_selftest > $OUT/selftest.log 2>&1
echo "=== gpu_worker_selftest exit=$? $(el $s0)"; tail -4 $OUT/selftest.log
daemon m
s0=$(date +%s)
timeout 60 python3 bench/bench.py --socket $sock --arch sm_90a --suite gaps --only gemm_mlp --match 1024x13824 \
    --tune measure --out $OUT/measure > $OUT/bench_measure.log 2>&1
echo "=== bench gemm_mlp 1024x13824x5120 tune measure exit=$? $(el $s0)"; filt < $OUT/bench_measure.log | grep -E "gemm_|case" | tail -3
kill $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
