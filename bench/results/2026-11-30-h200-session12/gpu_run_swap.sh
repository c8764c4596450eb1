#!/usr/bin/env bash
# Session 12, call d: matmul_wgmma with swapped operands (C^T = B^T A^T, the matmul's M on
# wgmma's N side in tiles of 8-row steps). First correctness: every swapped candidate of the
# template sweep's matmul cases (up to 40 per case) and of the dynamic matmul cases (at min, an
# odd size and max); then the issue-39 GEMM rows at n = 100, 700, 2100 (entry / static /
# cuBLAS, tune measure), [n,4096]x[4096,4096] and [n,4096]x[4096,14336].
set -u
cd "$(dirname "$0")/.."   # run from .gpu/ (copied there after bench/pack_gpu.sh)
. bench/gpu_call.sh
{
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
s0=$(date +%s)
LD_LIBRARY_PATH=$G/lib timeout 150 $G/tests/gpu_template_sweep --template matmul_wgmma --param swap=1 --max 40 \
    --filter "mm " > $OUT/sweep_swap.log 2>&1
echo "=== sweep swap=1 exit=$? $(el $s0)"; grep -v "^  ok\|^$" $OUT/sweep_swap.log | tail -24
s0=$(date +%s)
HIDET_VERIFY_PARAM=swap=1 LD_LIBRARY_PATH=$G/lib timeout 150 $G/tests/tuner_gpu_gemm_dynamic > $OUT/dyn_swap.log 2>&1
echo "=== gemm_dynamic swap=1 exit=$? $(el $s0)"; grep -E "ok|wrong|failed" $OUT/dyn_swap.log | head -20
daemon m
l=$(left 420); echo "=== gemm4096 100,700,2100 (limit $l s)"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/dynamic.py --socket "$sock" --cases gemm4096 --sizes 100,700,2100 \
    --out "$OUT/dyn_gemm" --wait-s 100 2>&1 | filt | tail -5
echo "=== gemm4096 $(el $s0)"
l=$(left 590); echo "=== gemm14336 100,700,2100 (limit $l s)"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/dynamic.py --socket "$sock" --cases gemm14336 --sizes 100,700,2100 \
    --out "$OUT/dyn_gemm14336" --wait-s 150 2>&1 | filt | tail -5
echo "=== gemm14336 $(el $s0)"
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
