#!/usr/bin/env bash
# Session 9 GPU call E: BERT through the backend after padding_masks (the static compile's mask
# [b,1,1,s]): correctness against eager and its latency; BERT with dynamic sizes timed once the
# tables are tuned (settle); matmul_mma's FP8 candidates for sm_89 (compute_89 PTX JIT-compiled
# for the H200) and sm_90a; FP8 elementwise casts (sweep) and FP8 through torch.compile.
set -u
cd "$(dirname "$0")/.."   # run from .gpu/ (copied there after bench/pack_gpu.sh)
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
filt() { grep -v '^{\|^  triton\|AUTOTUNE\|DeprecationWarning\|kern.bind\|^  f()\|fns\[r\|warnings.warn'; }
t0=$(date +%s)
el() { echo "($(( $(date +%s) - $1 )) s)"; }
left() { echo $(( $1 - ($(date +%s) - t0) )); }
{
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
daemon bert
echo "=== BERT correctness (tests/gpu/models.py)"; s0=$(date +%s)
timeout 100 python3 tests/gpu/models.py --socket "$sock" --cases bert-b8-s128,bert-b1-s512 2>&1 | filt | tail -6
echo "=== $(el $s0)"; s0=$(date +%s)
timeout 70 python3 bench/models.py --socket "$sock" --out "$OUT/bert" --cases bert-b8-s512 --no-inductor --iters 20 2>&1 | filt | grep "^| bert" 
echo "=== bert-b8-s512 latency $(el $s0)"
kill -TERM $dp; wait $dp
daemon dyn
echo "=== bert dynamic, settled (limit $(left 300) s)"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $(left 300) python3 bench/models_dynamic.py --socket "$sock" --out "$OUT/dyn" \
    --sizes 3 --settle-s 10 --profile 2>&1 | filt | tail -70
echo "=== bert dynamic $(el $s0)"
kill -TERM $dp; wait $dp
export LD_LIBRARY_PATH=$G/lib
v() { t=$1; lim=$2; shift 2; s0=$(date +%s); env "$@" HIDET_VERIFY_ONLY=fp8 HIDET_VERIFY_TIMES=1 timeout $lim "$G/tests/tuner_gpu_verify" > "$OUT/fp8_$t.log" 2>&1
      echo "=== $t exit=$? ($(( $(date +%s) - s0 )) s)"; grep -E "cand:|WRONG|compile failed|error|^fp8" "$OUT/fp8_$t.log" | head -24; }
v sm89 100 HIDET_VERIFY_ARCH=sm_89 HIDET_VERIFY_FP8_MAX=4
v sm90a 50 HIDET_VERIFY_FP8_MAX=8
echo "=== ew fp8 sweep"; s0=$(date +%s)
timeout 60 $G/tests/gpu_template_sweep --filter "ew fp8" --max 12 --jobs 8 > $OUT/fp8_sweep.log 2>&1; echo "sweep exit=$? $(el $s0)"; tail -12 $OUT/fp8_sweep.log
l=$(left 560); echo "=== fp8_torch (limit $l s)"; s0=$(date +%s)
[ $l -gt 30 ] && timeout $l python3 tests/gpu/fp8_torch.py $G/bin/hidetd --lib $G/lib --tune model > $OUT/fp8_torch.log 2>&1; echo "fp8_torch exit=$? $(el $s0)"; grep -E "FAIL|^bench|fp8 through|ok|error" $OUT/fp8_torch.log | head -30
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
