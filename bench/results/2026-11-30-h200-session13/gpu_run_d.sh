#!/usr/bin/env bash
# Session 13, call d: swapped matmul_wgmma tiles that split K over clusters (new, not run on a GPU
# before; the CPU emulator has no clusters) checked by the template sweep and the dynamic matmul
# cases; kbench of the M = 100 tiles with and without split; then issue 39's GEMM rows with the
# cost model's new round trip (cost.c) and the split tiles in the space: bench.py's gemm_mid
# (static, tune measure) and dynamic.py's range entries.
set -u
cd "$(dirname "$0")/.."   # run from .gpu/ (copied there after bench/pack_gpu.sh, kgen programs in .gpu/kb)
. bench/gpu_call.sh
{
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
for sp in 2 3 4; do
    s0=$(date +%s)
    LD_LIBRARY_PATH=$G/lib timeout 50 $G/tests/gpu_template_sweep --template matmul_wgmma --param swap=1,split_k=$sp \
        --max 40 --filter "mm " > $OUT/sweep_split$sp.log 2>&1
    echo "=== sweep swap=1,split_k=$sp exit=$? $(el $s0)"; grep -E "total|WRONG|wrong:" $OUT/sweep_split$sp.log | tail -3
done
s0=$(date +%s)
HIDET_VERIFY_PARAM=swap=1,split_k=2 LD_LIBRARY_PATH=$G/lib timeout 80 $G/tests/tuner_gpu_gemm_dynamic > $OUT/dyn_split.log 2>&1
echo "=== gemm_dynamic swap=1,split_k=2 exit=$? $(el $s0)"; grep -E "wrong +[1-9]|failed +[1-9]|invalid|error" $OUT/dyn_split.log | head; grep -c "cand:" $OUT/dyn_split.log
s0=$(date +%s)
timeout 70 python3 bench/kbench.py .gpu/kb --alternate > $OUT/kbench.log 2>&1
echo "=== kbench exit=$? $(el $s0)"; filt < $OUT/kbench.log | tail -9
daemon d
l=$(left 330); s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/bench.py --socket "$sock" --suite gemm --match gemm_mid --arch sm_90a \
    --tune measure --alternate --out "$OUT/gemm_mid" > $OUT/gemm_mid.log 2>&1
echo "=== gemm_mid exit=$? $(el $s0)"; filt < $OUT/gemm_mid.log | tail -7
l=$(left 440); s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/dynamic.py --socket "$sock" --cases gemm4096 --sizes 100,700,2100 \
    --out "$OUT/dyn_gemm" --wait-s 100 > $OUT/dyn_gemm.log 2>&1
echo "=== gemm4096 exit=$? $(el $s0)"; filt < $OUT/dyn_gemm.log | tail -4
l=$(left 560); s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/dynamic.py --socket "$sock" --cases gemm14336 --sizes 100,700 \
    --out "$OUT/dyn_gemm14336" --wait-s 100 > $OUT/dyn_gemm14336.log 2>&1
echo "=== gemm14336 exit=$? $(el $s0)"; filt < $OUT/dyn_gemm14336.log | tail -3
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
