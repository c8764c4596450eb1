#!/usr/bin/env bash
# Session 9 GPU call C (issues 37, 39): the startup rows with hidetd.save / hidetd.load now that
# they need no aot_compile (bytecode of site-packages compiled first, as a pip install leaves it);
# BERT with dynamic sizes given 60 s for its ranges' tuning (call B gave 10 s).
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
{
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
export PYTHONPYCACHEPREFIX=/tmp/pyc
site=$(python3 -c 'import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))')
s0=$(date +%s)
python3 -m compileall -q -j 16 "$site" /usr/lib/python3.12 clients/python bench tests/gpu > /dev/null 2>&1
echo "=== bytecode compiled into $PYTHONPYCACHEPREFIX $(el $s0)"
daemon startup
echo "=== startup with hidetd.save / hidetd.load"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 260 python3 bench/models.py --socket "$sock" --out "$OUT/startup" \
    --startup --cases resnet50-b1 --no-inductor --iters 20 2>&1 | filt | grep -i "^startup\|error\|Traceback\|^| resnet" | head -20
grep "^startup" "$OUT/startup/models.md"
echo "=== startup $(el $s0)"
kill -TERM $dp; wait $dp
unset PYTHONPYCACHEPREFIX
daemon dyn
left=$(( 400 - ($(date +%s) - t0) ))
echo "=== bert dynamic, 60 s to settle (limit $left s)"; s0=$(date +%s)
[ $left -gt 120 ] && PYTHONUNBUFFERED=1 timeout $left python3 bench/models_dynamic.py --socket "$sock" --out "$OUT/dyn" \
    --sizes 3 --settle-s 60 2>&1 | filt | tail -8
echo "=== bert dynamic $(el $s0)"
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
