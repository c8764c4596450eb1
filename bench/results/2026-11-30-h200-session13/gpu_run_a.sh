#!/usr/bin/env bash
# Prepared in session 12 for the next session's first GPU call (its device time was spent):
#  - BERT-base through the backend at session 11's 20 random sizes (tune model): swapped
#    matmul_wgmma tiles joined the space of every GEMM with M <= 3072, so the row met in session
#    11 (worst 1.148 against 1.15) must be measured again;
#  - the dynamic matmul cases session 12's regression call did not reach in its 300 s (every
#    candidate at min, an odd size and max): the 14336-column case, the batched one, the gathered
#    odd K and the named N/K cases.
set -u
cd "$(dirname "$0")/.."   # run from .gpu/ (copied there after bench/pack_gpu.sh)
. bench/gpu_call.sh
{
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
daemon m
l=$(left 340); echo "=== bert dynamic, 20 sizes (limit $l s)"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/models_dynamic.py --socket "$sock" --out "$OUT/dyn" \
    --sizes 20 --settle-s 8 --iters 20 2>&1 | filt | grep -v '^dynamic {' | tail -26
echo "=== bert dynamic $(el $s0)"
kill -TERM $dp; wait $dp
for only in "14336" "b<=16,200" "odd K" "named" "q@k" "p@v"; do
    l=$(left 560); [ "$l" -lt 20 ] && break
    s0=$(date +%s)
    HIDET_VERIFY_ONLY="$only" LD_LIBRARY_PATH=$G/lib timeout $l $G/tests/tuner_gpu_gemm_dynamic >> $OUT/dyn_rest.log 2>&1
    echo "=== gemm_dynamic '$only' exit=$? $(el $s0)"
done
grep -E "wrong [1-9]|failed [1-9]" $OUT/dyn_rest.log | head; grep -c "cand:" $OUT/dyn_rest.log
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
