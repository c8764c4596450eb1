#!/usr/bin/env bash
# Session 11, call B: where issue 39's last misses come from.
#  - BERT dynamic at the three sizes over 1.15 (call A), each op's kernels, dynamic and static;
#  - the GEMM [n,4096]x[4096,4096] rows under 0.95x cuBLAS (n = 100, 700, 2100): 300 candidates
#    of each space measured (gemm_probe.py), then dynamic.py's entry/static/cuBLAS at those n;
#  - BERT-like attention [8,12,n,64] + mask at n = 17 and 77 (entry vs static), with schedules.
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
l=$(left 170); echo "=== bert profiled (limit $l s)"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/models_dynamic.py --socket "$sock" --out "$OUT/bert" \
    --at 14x274,9x402,7x389 --profile --settle-s 8 --iters 20 2>&1 | filt | grep -v '^{' | tail -80
echo "=== bert $(el $s0)"
l=$(left 400); echo "=== gemm probe (limit $l s)"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/results/2026-11-30-h200-session11/b/gemm_probe.py --socket "$sock" \
    --db "$db" --out "$OUT" 2>&1 | filt
echo "=== gemm probe $(el $s0)"
l=$(left 490); echo "=== dynamic gemm4096 at 100,700,2100 (limit $l s)"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/dynamic.py --socket "$sock" --cases gemm4096 --sizes 100,700,2100 \
    --out "$OUT/dyn_gemm" --wait-s 120 2>&1 | filt | grep -v '^{' | tail -6
python3 -c "import json;[print(r.get('n'),r.get('range'),r.get('entry_params'),'|',r.get('static_params')) for r in json.load(open('$OUT/dyn_gemm/dynamic.json'))]"
echo "=== dynamic gemm $(el $s0)"
l=$(left 580); echo "=== dynamic bert attention at 17,77 (limit $l s)"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/dynamic.py --socket "$sock" --cases bert --sizes 17,77 \
    --out "$OUT/dyn_attn" --wait-s 60 2>&1 | filt | grep -v '^{' | tail -4
python3 -c "import json;[print(r.get('n'),r.get('range'),r.get('entry_params'),'|',r.get('static_params')) for r in json.load(open('$OUT/dyn_attn/dynamic.json'))]"
echo "=== dynamic attention $(el $s0)"
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
