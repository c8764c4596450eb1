#!/usr/bin/env bash
# Session 8 GPU call 3 (issue 40): the gathered operands of matmul_wgmma (unaligned rows) and
# conv2d_grouped checked against references, then their bench rows against cuBLAS / cuDNN -
# tune measure, alternating; the unaligned rows also with tune model (what the default picks).
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
echo "=== sweep: mm unal (matmul_wgmma)"; s0=$(date +%s)
LD_LIBRARY_PATH=$G/lib timeout 80 $T/gpu_template_sweep --filter "mm unal" --template matmul_wgmma --max 10 --jobs 8 > "$OUT/unal_sweep.log" 2>&1
echo "exit=$? $(el $s0)"; grep -iE "wrong|fail|mm unal" "$OUT/unal_sweep.log" | tail -12
echo "=== gemm_dynamic odd K"; s0=$(date +%s)
HIDET_VERIFY_ONLY="odd K" HIDET_VERIFY_MAX=12 LD_LIBRARY_PATH=$G/lib timeout 50 $T/tuner_gpu_gemm_dynamic > "$OUT/unal_dyn.log" 2>&1
echo "exit=$? $(el $s0)"; grep -iE "wrong|fail|odd K" "$OUT/unal_dyn.log" | tail -8
echo "=== sweep: gconv (conv2d_grouped)"; s0=$(date +%s)
LD_LIBRARY_PATH=$G/lib timeout 110 $T/gpu_template_sweep --template conv2d_grouped --filter gconv --max 8 --jobs 8 > "$OUT/gconv_sweep.log" 2>&1
echo "exit=$? $(el $s0)"; grep -iE "wrong|fail|gconv" "$OUT/gconv_sweep.log" | tail -14
daemon b
left=$(( 420 - ($(date +%s) - t0) )); echo "=== gconv rows, tune measure (limit $left s)"; s0=$(date +%s)
[ $left -gt 40 ] && timeout $left python3 bench/bench.py --socket "$sock" --out "$OUT/gconv" --suite gconv --arch sm_90a \
    --tune measure --budget-s 8 --alternate 2>&1 | filt | tail -9
echo "=== gconv $(el $s0)"
left=$(( 540 - ($(date +%s) - t0) )); echo "=== unaligned rows, tune measure (limit $left s)"; s0=$(date +%s)
[ $left -gt 30 ] && timeout $left python3 bench/bench.py --socket "$sock" --out "$OUT/unal" --suite gemm --arch sm_90a \
    --tune measure --budget-s 8 --alternate --only gemm_unaligned 2>&1 | filt | tail -6
left=$(( 585 - ($(date +%s) - t0) )); echo "=== unaligned rows, tune model (limit $left s)"
[ $left -gt 15 ] && timeout $left python3 bench/bench.py --socket "$sock" --out "$OUT/unal_model" --suite gemm --arch sm_90a \
    --tune model --alternate --only gemm_unaligned 2>&1 | filt | tail -6
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
