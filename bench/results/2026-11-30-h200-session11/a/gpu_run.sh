#!/usr/bin/env bash
# Prepared in session 10 for the next session's first GPU call (not run: the session's device
# time was spent). Checks what session 10 built after its last device call:
#  - BERT's dynamic row at the 20 sizes of calls A/D after every name of a several-name op is cut
#    finely below 16 (attention's b too; call E covered only product names);
#  - matmul with named N and K (tuner_gpu_gemm_dynamic: every sampled candidate at min, an odd
#    size and max against the static reference);
#  - attention_decode's recalibrated cost model: the decode rows with tune model (its first pick).
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
filt() { grep -v 'Warning\|warn\|return F.scaled'; }
t0=$(date +%s)
el() { echo "($(( $(date +%s) - $1 )) s)"; }
left() { echo $(( $1 - ($(date +%s) - t0) )); }
{
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
s0=$(date +%s)
LD_LIBRARY_PATH=$G/lib timeout 150 $G/tests/tuner_gpu_gemm_dynamic > $OUT/gemm_dynamic.log 2>&1; echo "=== gemm dynamic exit=$? $(el $s0)"
grep -E "wrong|failed|bad|named|ok" $OUT/gemm_dynamic.log | tail -20
daemon dyn
l=$(left 500); echo "=== bert dynamic, 20 sizes (limit $l s)"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/models_dynamic.py --socket "$sock" --out "$OUT/dyn" \
    --sizes 20 --settle-s 8 --iters 20 2>&1 | filt | grep -v '^dynamic {\|^{' | tail -26
echo "=== bert dynamic $(el $s0)"
l=$(left 585); echo "=== decode bench, model (limit $l s)"; s0=$(date +%s)
[ $l -gt 20 ] && timeout $l python3 bench/bench.py --socket "$sock" --suite attention --match attn_decode --arch sm_90a \
    --tune model --alternate --out $OUT/decode_model 2>&1 | filt | grep -v '^{' | tail -9
echo "=== decode bench $(el $s0)"
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
