#!/usr/bin/env bash
# Prepared in session 22 for the next session (its device time ran out before it; bash
# bench/pack_gpu.sh, carry [".gpu"]; about 3 minutes): the worker's
# comparison moved to gpu_workers/compare.c: gpu_worker_selftest (right, wrong and poisoned
# outputs through the real pool) and one GEMM row under tune measure (row_len 0, the path every
# op but attention takes); then bench/read_bw.cu with its 64 MiB rows beside issue 41's FP8
# decode rows.
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
# 64 MiB read by each load mechanism (bench/read_bw.cu's Skv 1024 rows), beside issue 41's FP8
# decode rows (64 MiB of e4m3 weights; 1.03-1.06 of torch._scaled_mm against 1.1): how fast a
# stream of that size can be with a launch's start and end in it.
s0=$(date +%s)
PATH=/usr/local/cuda/bin:$PATH nvcc -gencode arch=compute_90a,code=sm_90a -O3 -o /tmp/read_bw bench/read_bw.cu > $OUT/read_bw.log 2>&1 && timeout 90 /tmp/read_bw >> $OUT/read_bw.log 2>&1
echo "=== read_bw exit=$? $(el $s0)"; grep -E "copy| 1024 " $OUT/read_bw.log
daemon f
s0=$(date +%s)
timeout 90 python3 bench/bench.py --socket $sock --arch sm_90a --suite fp8 --only fp8_decode --tune measure --alternate \
    --out $OUT/fp8 > $OUT/bench_fp8_decode.log 2>&1
echo "=== bench fp8_decode tune measure exit=$? $(el $s0)"; filt < $OUT/bench_fp8_decode.log | grep -E "fp8_|case" | tail -4
kill $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
