#!/usr/bin/env bash
# Session 12, call e: after swapped operands touched matmul_wgmma's shared tile loop, raster and
# grid rule: every candidate of the dynamic matmul cases at min, odd and max (all templates), and
# 24 sampled candidates per case of the template sweep's matmul cases (matmul_wgmma only).
set -u
cd "$(dirname "$0")/.."
. bench/gpu_call.sh
{
s0=$(date +%s)
LD_LIBRARY_PATH=$G/lib timeout 300 $G/tests/tuner_gpu_gemm_dynamic > $OUT/dyn_all.log 2>&1
echo "=== gemm_dynamic all exit=$? $(el $s0)"; grep -E "wrong [1-9]|failed [1-9]|total|candidate launches" $OUT/dyn_all.log | tail -8
s0=$(date +%s)
LD_LIBRARY_PATH=$G/lib timeout 200 $G/tests/gpu_template_sweep --template matmul_wgmma --max 24 --filter "mm " > $OUT/sweep_wgmma.log 2>&1
echo "=== sweep matmul_wgmma exit=$? $(el $s0)"; grep -E "total|wrong:|WRONG" $OUT/sweep_wgmma.log | tail -6
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
