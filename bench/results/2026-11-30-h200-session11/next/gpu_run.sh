#!/usr/bin/env bash
# Prepared in session 11 for the next session's first GPU call (not run: the session's device
# time was spent). Checks what session 11 built after its last device call:
#  - attention_mma with a constant key-tile count (a dynamic range of short sequences): every
#    sampled candidate of the "s 17..20" case (and the other dynamic cases) right at min, odd and
#    max (tuner_gpu_verify_dyn), and the BERT-like entry against the static kernel at n = 17, 77;
#  - measured ranges compared by time x range factor: GEMM [n,4096]x[4096,4096] at n = 100, 700,
#    2100 (entry / static / cuBLAS), and x[4096,14336] at four sizes (never measured yet).
set -u
cd "$(dirname "$0")/.."   # run from .gpu/ (copied there after bench/pack_gpu.sh)
. bench/gpu_call.sh
{
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
s0=$(date +%s)
HIDET_VERIFY_ONLY=attention LD_LIBRARY_PATH=$G/lib timeout 150 $G/tests/tuner_gpu_verify_dyn > $OUT/verify_dyn.log 2>&1
echo "=== verify_dyn attention exit=$? $(el $s0)"; grep -E "17\.\.20|wrong|failed|bad" $OUT/verify_dyn.log | tail -12
daemon m
l=$(left 260); echo "=== attention bert 17,77 (limit $l s)"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/dynamic.py --socket "$sock" --cases bert --sizes 17,77 \
    --out "$OUT/dyn_attn" --wait-s 60 2>&1 | filt | tail -4
echo "=== attention $(el $s0)"
l=$(left 380); echo "=== gemm4096 100,700,2100 (limit $l s)"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/dynamic.py --socket "$sock" --cases gemm4096 --sizes 100,700,2100 \
    --out "$OUT/dyn_gemm" --wait-s 100 2>&1 | filt | tail -5
echo "=== gemm4096 $(el $s0)"
l=$(left 580); echo "=== gemm14336 100,700,2100,4500 (limit $l s)"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/dynamic.py --socket "$sock" --cases gemm14336 --sizes 100,700,2100,4500 \
    --out "$OUT/dyn_gemm14336" --wait-s 150 2>&1 | filt | tail -6
echo "=== gemm14336 $(el $s0)"
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
