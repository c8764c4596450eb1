#!/usr/bin/env bash
# Session 10 GPU call E: BERT's dynamic row at the sizes call D found over 1.15 (and two that
# passed), after a name of a product (b in b*s) is cut finely below 16 in the dispatch tables.
set -u
cd "$(dirname "$0")/.."   # run from .gpu/ (copied there after bench/pack_gpu.sh)
G=$PWD/.gpu
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export HIDETD_WORKER=$G/bin/hidetd-worker
d=/tmp/hd-e; rm -rf "$d"; mkdir -p "$d"
LD_LIBRARY_PATH=$G/lib "$G/bin/hidetd" --socket "$d/s" --cache "$d/k.db" --workers "$G/bin/hidetd-worker" \
    --log-level warn > "$d/hidetd.log" 2>&1 &
dp=$!; sock=$d/s
for _ in $(seq 1 200); do [ -S "$sock" ] && curl -sf --unix-socket "$sock" http://localhost/healthz >/dev/null && break; sleep 0.1; done
t0=$(date +%s)
{
PYTHONUNBUFFERED=1 timeout 215 python3 bench/models_dynamic.py --socket "$sock" --out "$OUT/dyn" \
    --at 9x160,10x174,7x332,7x389,9x402,5x476,14x274,28x177,14x510,7x197 --settle-s 8 --iters 20 2>&1 \
    | grep -v 'Warning\|warn' | grep -v '^dynamic {' | tail -16
echo "=== $(( $(date +%s) - t0 )) s"
} > "$OUT/gpu.log" 2>&1
kill -TERM $dp; wait $dp
cat "$OUT/gpu.log"
