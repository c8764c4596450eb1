#!/usr/bin/env bash
# Session 10 GPU call A: the static BERT mask on CUDA after padding_masks (mask_cone.py), FP8
# casts through torch.compile after the e4m3 probe (fp8_torch), and issue 39's BERT row at 20
# random sizes (bench/models_dynamic.py, settled), whose static side is also the odd-length
# static attention the pad/slice rewrite is meant to speed up.
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
filt() { grep -v '^  triton\|AUTOTUNE\|DeprecationWarning\|kern.bind\|^  f()\|fns\[r\|warnings.warn'; }
t0=$(date +%s)
el() { echo "($(( $(date +%s) - $1 )) s)"; }
left() { echo $(( $1 - ($(date +%s) - t0) )); }
{
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
echo "=== mask cone"; s0=$(date +%s)
timeout 60 python3 .gpu/mask_cone.py 2>&1 | grep -v "Warning\|warn" | head -70
echo "=== mask cone $(el $s0)"; s0=$(date +%s)
timeout 90 python3 tests/gpu/fp8_torch.py $G/bin/hidetd --lib $G/lib --tune model > $OUT/fp8_torch.log 2>&1; echo "fp8_torch exit=$? $(el $s0)"
grep -E "FAIL|^bench|fp8 through|ok|error" $OUT/fp8_torch.log | head -30
daemon dyn
l=$(left 570); echo "=== bert dynamic, 20 sizes, settled (limit $l s)"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/models_dynamic.py --socket "$sock" --out "$OUT/dyn" \
    --sizes 20 --settle-s 8 --iters 20 2>&1 | filt | tail -60
echo "=== bert dynamic $(el $s0)"
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
