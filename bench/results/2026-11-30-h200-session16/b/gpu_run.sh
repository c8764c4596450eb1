#!/usr/bin/env bash
# Prepared in session 15 (copy to .gpu/ after bench/pack_gpu.sh: `bash .gpu/gpu_run_fp8.sh`, carry
# [".gpu"]; about 6 minutes): FP8 with swapped operands (C^T = B^T A^T), new at session 15 and
# never run on a GPU. Issue 41's decode rows (M = 1, 16, 64 against 8192x8192 e4m3 weights) ran at
# 0.65 waves and 12% occupancy with matmul_mma's 16x64 tiles (session 13); swapped wgmma tiles put
# the batch on wgmma's N side (8 or 16 rows), the weights on its M side, 64 or 128 rows a CTA,
# with 8-12 stages of TMA copies in flight.
#  1. tuner_gpu_verify's FP8 cases with only their swapped candidates (and each default): e4m3 and
#     e5m2 mixes, tensor and row/column scales, a decode shape; 0 wrong is the bar.
#  2. bench.py's FP8 decode rows and the 4096^3 row, tune measure, alternating with
#     torch._scaled_mm; the picks and the weights' share of copy bandwidth.
set -u
cd "$(dirname "$0")/.."
. bench/gpu_call.sh
{
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
s0=$(date +%s)
HIDET_VERIFY_ONLY=fp8 HIDET_VERIFY_PARAM=swap=1 LD_LIBRARY_PATH=$G/lib timeout 150 $G/tests/tuner_gpu_verify \
    > $OUT/fp8_swap_verify.log 2>&1
echo "=== verify fp8 swap=1 exit=$? $(el $s0)"; grep -E "^fp8|wrong or failed" $OUT/fp8_swap_verify.log | head -24
daemon m
l=$(left 540); s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/bench.py --socket "$sock" --suite fp8 --arch sm_90a \
    --match fp8_decode,fp8_gemm --tune measure --alternate --out "$OUT/fp8" > $OUT/fp8.log 2>&1
echo "=== fp8 rows exit=$? $(el $s0)"; filt < $OUT/fp8.log | tail -14
curl -s --unix-socket "$sock" http://localhost/v1/jobs > $OUT/jobs.json
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
tar czf /tmp/all.tgz -C "$OUT" . && mv /tmp/all.tgz "$OUT/"
echo "total $(( $(date +%s) - t0 )) s"
