#!/usr/bin/env bash
# Prepared in session 11 for a later call of the next session: issue 41's MN-major FP8 rows (B
# stored [K,N], transposed in the kernel; bench.py's fp8_gemm_kn and fp8_decode_kn, added this
# session and never run) and the FP8 decode rows, tune measure, alternating with the peer; then
# the decode cost model checked against every timed candidate of tuner_gpu_attn_decode
# (HIDET_DECODE_TIMES=1, bench/decode_fit.py; session 10 refitted it on 440 timings).
set -u
cd "$(dirname "$0")/.."   # run from .gpu/ (copied there after bench/pack_gpu.sh)
. bench/gpu_call.sh
{
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
daemon m
l=$(left 330); echo "=== fp8 MN-major and decode rows, measure (limit $l s)"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/bench.py --socket "$sock" --suite fp8 \
    --match fp8_gemm_kn,fp8_decode --tune measure --alternate --out "$OUT/fp8" 2>&1 | filt | tail -12
echo "=== fp8 $(el $s0)"
kill -TERM $dp; wait $dp
l=$(left 560); echo "=== decode timings (limit $l s)"; s0=$(date +%s)
HIDET_DECODE_TIMES=1 LD_LIBRARY_PATH=$G/lib timeout $l $G/tests/tuner_gpu_attn_decode > "$OUT/decode.log" 2>&1
echo "=== decode exit=$? $(el $s0)"
python3 bench/decode_fit.py "$OUT/decode.log" 2>&1 | tail -15
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
