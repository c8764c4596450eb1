#!/usr/bin/env bash
# Session 10 GPU call B: the ids-only BERT graph on CUDA (graph_dump.py: where the static
# compile's full mask comes from); BERT's static and dynamic kernels at 25x404 and 7x197
# (models_dynamic --at --profile); issue 39's dynamic attention row, tune measure (bench/dynamic.py).
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
s0=$(date +%s)
timeout 80 python3 .gpu/graph_dump.py > $OUT/graph_dump.log 2>&1; echo "=== graph dump exit=$? $(el $s0)"
grep -n "===\|---\|sdpa\|scaled_dot\|softmax\|bmm\|where\|bitwise\|expand\|masked\|pad\|slice" $OUT/graph_dump.log | head -80
daemon prof
echo "=== bert 25x404, 7x197 profiled"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 150 python3 bench/models_dynamic.py --socket "$sock" --out "$OUT/prof" \
    --at 25x404,7x197 --settle-s 8 --iters 20 --profile 2>&1 | filt | tail -80
echo "=== profiled $(el $s0)"
kill -TERM $dp; wait $dp
daemon att
l=$(left 560); echo "=== dynamic attention, tune measure (limit $l s)"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/dynamic.py --socket "$sock" --cases attention --tune measure \
    --out "$OUT/attn" --wait-s 200 2>&1 | filt | tail -30
echo "=== dynamic attention $(el $s0)"
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
