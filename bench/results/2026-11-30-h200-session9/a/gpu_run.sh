#!/usr/bin/env bash
# Session 9 GPU call A (issues 40, 41): the unaligned-matmul sweep with odd N + an epilogue
# operand gathered again (the clamp fix), then the rows not measured last session: FP8 block
# scales against the Triton peer, FP8 + bias + GELU + quantize, the other SwiGLU shapes and the
# short-K epilogue-cost rows, tune measure.
set -u
cd "$(dirname "$0")/.."
G=$PWD/.gpu; T=$G/tests
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export HIDETD_WORKER=$G/bin/hidetd-worker
daemon() {  # daemon NAME -> sets sock, dp
    local d=/tmp/hd-$1; rm -rf "$d"; mkdir -p "$d"
    LD_LIBRARY_PATH=$G/lib "$G/bin/hidetd" --socket "$d/s" --cache "$d/k.db" \
        --workers "$G/bin/hidetd-worker" --log-level warn > "$d/hidetd.log" 2>&1 &
    dp=$!; sock=$d/s
    for _ in $(seq 1 200); do [ -S "$sock" ] && curl -sf --unix-socket "$sock" http://localhost/healthz >/dev/null && break; sleep 0.1; done
}
filt() { grep -v '^{\|^  triton\|AUTOTUNE\|DeprecationWarning\|kern.bind\|^  f()\|fns\[r\|warnings.warn'; }
t0=$(date +%s)
el() { echo "($(( $(date +%s) - $1 )) s)"; }
{
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
echo "=== mm unal sweep, matmul_wgmma"; s0=$(date +%s)
LD_LIBRARY_PATH=$G/lib timeout 90 $T/gpu_template_sweep --template matmul_wgmma --max 12 --jobs 14 --filter 'mm unal' > "$OUT/unal_sweep.log" 2>&1
echo "=== exit=$? $(el $s0)"; grep -E "^total|wrong|WRONG|^mm unal" "$OUT/unal_sweep.log" | head -30
daemon a
echo "=== fp8 rows"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 200 python3 bench/bench.py --socket "$sock" --out "$OUT/fp8" --suite fp8 --arch sm_90a \
    --tune measure --budget-s 8 --alternate --match 'fp8_block,fp8_bias_gelu_q' 2>&1 | filt | tail -12
echo "=== fp8 $(el $s0)"
left=$(( 560 - ($(date +%s) - t0) )); echo "=== gaps rows (limit $left s)"; s0=$(date +%s)
[ $left -gt 30 ] && PYTHONUNBUFFERED=1 timeout $left python3 bench/bench.py --socket "$sock" --out "$OUT/gaps" --suite gaps --arch sm_90a \
    --tune measure --budget-s 6 --alternate --match 'gemm_swiglu 2048,gemm_mlp 2048,gemm_bias_relu_res,gemm_short_k,gemm_swiglu 1024,gemm_mlp 1024' 2>&1 | filt | tail -12
echo "=== gaps $(el $s0)"
kill -TERM $dp; wait $dp
cp /tmp/hd-a/hidetd.log "$OUT/hidetd_a.log" 2>/dev/null
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
