#!/usr/bin/env bash
# Session 16, call e (after bench/pack_gpu.sh; `bash bench/results/2026-11-30-h200-session16/e/gpu_run.sh`,
# carry [".gpu"]; about 3 minutes): issue 41's rows calls b and d did not run - GEMM + bias + GELU
# (+ quantize to e4m3) against torch._scaled_mm and PyTorch's ops, and the per-block 1x128/128x128
# scales against the Triton peer - under this session's tree, tune measure, alternating.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
daemon m
s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 400 python3 bench/bench.py --socket "$sock" --suite fp8 --arch sm_90a \
    --match fp8_bias_gelu,fp8_block --tune measure --alternate --out "$OUT/fp8e" > $OUT/fp8e.log 2>&1
echo "=== fp8 epilogue and block rows exit=$? $(el $s0)"; filt < $OUT/fp8e.log | tail -7
curl -s --unix-socket "$sock" http://localhost/v1/jobs > $OUT/jobs.json
kill -TERM $dp; wait $dp
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
tar czf /tmp/all.tgz -C "$OUT" . && mv /tmp/all.tgz "$OUT/"
echo "total $(( $(date +%s) - t0 )) s"
