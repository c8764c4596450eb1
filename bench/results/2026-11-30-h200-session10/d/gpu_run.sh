#!/usr/bin/env bash
# Session 10 GPU call D: issue 39's BERT row at the same 20 sizes as call A after the static
# graphs lost their constant mask (math_attention) and dynamic ops are ranked for their whole
# range (tuner_rank); the BERT-like dynamic attention row (bench/dynamic.py --cases bert, tune
# measure); the decode rows with tune measure.
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
filt() { grep -v '^  triton\|AUTOTUNE\|DeprecationWarning\|kern.bind\|^  f()\|fns\[r\|warnings.warn\|UserWarning\|return F.scaled'; }
t0=$(date +%s)
el() { echo "($(( $(date +%s) - $1 )) s)"; }
left() { echo $(( $1 - ($(date +%s) - t0) )); }
{
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
daemon dyn
l=$(left 380); echo "=== bert dynamic, 20 sizes, settled (limit $l s)"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/models_dynamic.py --socket "$sock" --out "$OUT/dyn" \
    --sizes 20 --settle-s 8 --iters 20 2>&1 | filt | grep -v '^dynamic {' | tail -28
echo "=== bert dynamic $(el $s0)"
kill -TERM $dp; wait $dp
daemon att
l=$(left 530); echo "=== dynamic attention bert, tune measure (limit $l s)"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/dynamic.py --socket "$sock" --cases bert --tune measure \
    --out "$OUT/attn_bert" --wait-s 150 2>&1 | filt | grep -v '^{' | tail -12
echo "=== dynamic attention bert $(el $s0)"
l=$(left 585); echo "=== decode bench, measure (limit $l s)"; s0=$(date +%s)
[ $l -gt 20 ] && timeout $l python3 bench/bench.py --socket "$sock" --suite attention --match attn_decode --arch sm_90a \
    --tune measure --alternate --out $OUT/decode_measure 2>&1 | filt | grep -v '^{' | tail -9
echo "=== decode bench $(el $s0)"
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
