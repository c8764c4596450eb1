#!/usr/bin/env bash
# Session 8 GPU call 4 (issues 41 and 40): FP8 matmul_wgmma checked against the exact reference
# (tuner_gpu_verify's fp8 cases), the full-size epilogue operands (template sweep), the gather
# after its restriction (sweep); then the rows: SwiGLU gate and its bare GEMM, FP8 against
# torch._scaled_mm - tune measure, alternating.
set -u
cd "$(dirname "$0")/.."
G=$PWD/.gpu
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export HIDETD_WORKER=$G/bin/hidetd-worker
daemon() {  # daemon NAME -> sets sock, dp
    local d=/tmp/hd-$1; rm -rf "$d"; mkdir -p "$d"
    LD_LIBRARY_PATH=$G/lib "$G/bin/hidetd" --socket "$d/s" --cache "$d/k.db" \
        --workers "$G/bin/hidetd-worker" --log-level warn > "$d/hidetd.log" 2>&1 &
    dp=$!; sock=$d/s
    for _ in $(seq 1 200); do [ -S "$sock" ] && curl -sf --unix-socket "$sock" http://localhost/healthz >/dev/null && break; sleep 0.1; done
}
filt() { grep -v '^{"num_choices\|^  triton\|AUTOTUNE\|DeprecationWarning\|kern.bind\|^  f()\|fns\[r\|warnings.warn\|^{'; }
t0=$(date +%s)
el() { echo "($(( $(date +%s) - $1 )) s)"; }
T=$G/tests
{
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
echo "=== fp8 verify"; s0=$(date +%s)
HIDET_VERIFY_ONLY=fp8 HIDET_VERIFY_FP8_MAX=5 LD_LIBRARY_PATH=$G/lib timeout 110 $T/tuner_gpu_verify > "$OUT/fp8_verify.log" 2>&1
echo "exit=$? $(el $s0)"; grep -E "^fp8|WRONG|failed|wrong" "$OUT/fp8_verify.log" | head -30
echo "=== sweep: epilogue operands"; s0=$(date +%s)
( LD_LIBRARY_PATH=$G/lib timeout 50 $T/gpu_template_sweep --template matmul_wgmma --max 16 --jobs 14 --filter '*up'
  LD_LIBRARY_PATH=$G/lib timeout 40 $T/gpu_template_sweep --template matmul_wgmma --max 12 --jobs 14 --filter '+res'
  LD_LIBRARY_PATH=$G/lib timeout 35 $T/gpu_template_sweep --template conv2d_wgmma --max 12 --jobs 14 --filter 'relu,+res'
  LD_LIBRARY_PATH=$G/lib timeout 30 $T/gpu_template_sweep --filter "mm unal" --template matmul_wgmma --max 10 --jobs 14 ) > "$OUT/sweeps.log" 2>&1
echo "$(el $s0)"; grep -E "^total|wrong #|mm unal b2" "$OUT/sweeps.log" | head -20
daemon g
left=$(( 400 - ($(date +%s) - t0) )); echo "=== gaps: SwiGLU + bare, residual (limit $left s)"; s0=$(date +%s)
[ $left -gt 40 ] && timeout $left python3 bench/bench.py --socket "$sock" --out "$OUT/gaps" --suite gaps --arch sm_90a \
    --tune measure --budget-s 10 --alternate --match 'gemm_swiglu 4096,gemm_mlp 4096,gemm_swiglu 1024,gemm_mlp 1024,4096x3072x768' 2>&1 | filt | tail -8
echo "=== gaps $(el $s0)"
left=$(( 555 - ($(date +%s) - t0) )); echo "=== fp8 rows (limit $left s)"; s0=$(date +%s)
[ $left -gt 30 ] && timeout $left python3 bench/bench.py --socket "$sock" --out "$OUT/fp8" --suite fp8 --arch sm_90a \
    --tune measure --budget-s 5 --alternate --match "fp8_gemm 8192x8192x8192,fp8_gemm 4096x4096x4096,fp8_decode,fp8_bias_gelu_q 4096,fp8_block,fp8_gemm 8192x14336" 2>&1 | filt | tail -14
echo "=== fp8 $(el $s0)"
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
