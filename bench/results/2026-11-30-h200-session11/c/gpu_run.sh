#!/usr/bin/env bash
# Session 11, call C: BERT dynamic at call A's 20 sizes after the range ranking prefers schedules
# the cost model picks somewhere in the range (tuner/space.c rank_over_range, RANGE_UNPICKED);
# then the GEMM probe of call B (it failed there on a profiler attribute): do schedules of the
# space reach cuBLAS at [n,4096]x[4096,4096], n = 100, 700, 2100?
set -u
cd "$(dirname "$0")/.."   # run from .gpu/
G=$PWD/.gpu
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export HIDETD_WORKER=$G/bin/hidetd-worker
daemon() {  # daemon NAME -> sets sock, dp, db
    local d=/tmp/hd-$1; rm -rf "$d"; mkdir -p "$d"
    LD_LIBRARY_PATH=$G/lib "$G/bin/hidetd" --socket "$d/s" --cache "$d/k.db" \
        --workers "$G/bin/hidetd-worker" --log-level warn > "$d/hidetd.log" 2>&1 &
    dp=$!; sock=$d/s; db=$d/k.db
    for _ in $(seq 1 200); do [ -S "$sock" ] && curl -sf --unix-socket "$sock" http://localhost/healthz >/dev/null && break; sleep 0.1; done
}
filt() { grep -v 'Warning\|warn\|return F.scaled\|ExternalStream\|kern.bind\|^  f()\|fns\['; }
t0=$(date +%s)
el() { echo "($(( $(date +%s) - $1 )) s)"; }
left() { echo $(( $1 - ($(date +%s) - t0) )); }
{
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
daemon m
l=$(left 340); echo "=== bert dynamic, 20 sizes (limit $l s)"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/models_dynamic.py --socket "$sock" --out "$OUT/dyn" \
    --sizes 20 --settle-s 8 --iters 20 2>&1 | filt | grep -v '^dynamic {\|^{' | tail -26
echo "=== bert dynamic $(el $s0)"
l=$(left 560); echo "=== gemm probe (limit $l s)"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/results/2026-11-30-h200-session11/b/gemm_probe.py --socket "$sock" \
    --db "$db" --out "$OUT" --candidates 160 --budget-s 35 2>&1 | filt
echo "=== gemm probe $(el $s0)"
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
