#!/usr/bin/env bash
# Prepared in session 12 for a later call of the next session: swapped matmul_wgmma tiles with the
# staged epilogue (added after session 12's device time was spent; right on the CPU emulator),
# checked on the GPU - every swapped candidate of the template sweep's matmul cases (up to 60 per
# case) and of the dynamic matmul cases (min, odd and max) - then bench.py's gemm_mid rows (M
# 100/700/2100 against N 4096 and 14336), tune measure, alternating with cuBLAS.
set -u
cd "$(dirname "$0")/.."   # run from .gpu/ (copied there after bench/pack_gpu.sh)
. bench/gpu_call.sh
{
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
s0=$(date +%s)
LD_LIBRARY_PATH=$G/lib timeout 150 $G/tests/gpu_template_sweep --template matmul_wgmma --param swap=1 --max 60 \
    --filter "mm " > $OUT/sweep_swap.log 2>&1
echo "=== sweep swap=1 exit=$? $(el $s0)"; grep -E "total|WRONG|wrong:" $OUT/sweep_swap.log | tail -4
s0=$(date +%s)
HIDET_VERIFY_PARAM=swap=1 LD_LIBRARY_PATH=$G/lib timeout 150 $G/tests/tuner_gpu_gemm_dynamic > $OUT/dyn_swap.log 2>&1
echo "=== gemm_dynamic swap=1 exit=$? $(el $s0)"; grep -E "wrong [1-9]|failed [1-9]" $OUT/dyn_swap.log | head; grep -c "cand:" $OUT/dyn_swap.log
daemon m
l=$(left 580); echo "=== gemm_mid rows (limit $l s)"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/bench.py --socket "$sock" --suite gemm --match gemm_mid --arch sm_90a \
    --tune measure --alternate --out "$OUT/gemm_mid" > $OUT/gemm_mid.log 2>&1; filt < $OUT/gemm_mid.log | tail -8
echo "=== gemm_mid $(el $s0)"
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
