#!/usr/bin/env bash
# Session 8 GPU call 5: after the reference fix - the epilogue-operand sweeps, FP8's epilogue
# cases, and the SwiGLU row (tune measure) - within the session's last device seconds.
set -u
cd "$(dirname "$0")/.."
G=$PWD/.gpu; T=$G/tests
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export HIDETD_WORKER=$G/bin/hidetd-worker
t0=$(date +%s)
( LD_LIBRARY_PATH=$G/lib timeout 25 $T/gpu_template_sweep --template matmul_wgmma --max 8 --jobs 14 --filter '*up'
  LD_LIBRARY_PATH=$G/lib timeout 25 $T/gpu_template_sweep --template matmul_wgmma --max 6 --jobs 14 --filter '+res'
  LD_LIBRARY_PATH=$G/lib timeout 20 $T/gpu_template_sweep --template conv2d_wgmma --max 6 --jobs 14 --filter 'relu,+res' ) > "$OUT/sweeps.log" 2>&1
grep -E "^total|wrong #" "$OUT/sweeps.log" | head -12
echo "=== fp8 epilogue cases ($(( $(date +%s) - t0 )) s)"
HIDET_VERIFY_ONLY="fp8" HIDET_VERIFY_FP8_MAX=3 LD_LIBRARY_PATH=$G/lib timeout 45 $T/tuner_gpu_verify > "$OUT/fp8_verify.log" 2>&1
grep -E "^fp8|gpu_verify:" "$OUT/fp8_verify.log" | head -14
d=/tmp/hd-h; rm -rf $d; mkdir -p $d
LD_LIBRARY_PATH=$G/lib $G/bin/hidetd --socket $d/s --cache $d/k.db --workers $G/bin/hidetd-worker --log-level warn > $d/log 2>&1 & dp=$!
for _ in $(seq 1 200); do [ -S $d/s ] && curl -sf --unix-socket $d/s http://localhost/healthz >/dev/null && break; sleep 0.1; done
left=$(( 150 - ($(date +%s) - t0) )); echo "=== swiglu (limit $left s)"
[ $left -gt 20 ] && timeout $left python3 bench/bench.py --socket $d/s --out "$OUT/gaps" --suite gaps --arch sm_90a \
    --tune measure --budget-s 8 --alternate --match 'gemm_swiglu 4096x11008' 2>&1 | grep -v '^{\|Deprecation\|kern.bind\|  f()\|fns\[' | tail -3
kill -TERM $dp; wait $dp
echo "total $(( $(date +%s) - t0 )) s"
