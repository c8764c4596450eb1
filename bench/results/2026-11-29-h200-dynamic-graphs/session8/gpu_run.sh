#!/usr/bin/env bash
# Session 8 GPU call 2 (issues 39 and 38): the poisoned-v check of dynamic attention_wgmma,
# with the fix and without it (the binary built from the commit before the fix); BERT-base's
# plans traced on CUDA with the arena row (static at 32 x 512 against the dynamic plans); BERT
# with dynamic sizes through the backend against exact-size compiles; the attention rows whose
# model pick changed (hd64, hd256, BERT), tune model.
set -u
cd "$(dirname "$0")/.."
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
filt() { grep -v '^{"num_choices\|^  triton\|AUTOTUNE\|DeprecationWarning\|kern.bind\|^  f()\|fns\[r\|warnings.warn'; }
t0=$(date +%s)
el() { echo "($(( $(date +%s) - $1 )) s)"; }
{
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
echo "=== verify_dyn attention, with the fix"; s0=$(date +%s)
HIDET_VERIFY_ONLY=attention LD_LIBRARY_PATH=$G/lib timeout 150 "$G/tests/tuner_gpu_verify_dyn" > "$OUT/verify_dyn_attention.log" 2>&1
echo "=== exit=$? $(el $s0)"; grep -v " ok \|^ *$" "$OUT/verify_dyn_attention.log" | grep -v "^  WRONG" | tail -40
echo "=== verify_dyn attention, the commit before the fix"; s0=$(date +%s)
HIDET_VERIFY_ONLY=attention LD_LIBRARY_PATH=$G/lib timeout 150 "$G/tests/tuner_gpu_verify_dyn_nofix" > "$OUT/verify_dyn_attention_nofix.log" 2>&1
echo "=== exit=$? $(el $s0)"; grep "v+inf\|gpu_verify_dyn:" "$OUT/verify_dyn_attention_nofix.log" | tail -30; grep -m3 "WRONG" "$OUT/verify_dyn_attention_nofix.log"
echo "=== BERT-base plans on CUDA, arena row"; s0=$(date +%s)
LD_LIBRARY_PATH=$G/lib timeout 170 python3 graph/tests/bert_plans.py --daemon "$G/bin/hidetd" --arena > "$OUT/bert_plans.log" 2>&1
echo "=== bert_plans exit=$? $(el $s0)"; filt < "$OUT/bert_plans.log" | grep -v "^  " | tail -30
daemon attn
echo "=== attention rows, tune model (the cost model's new picks)"; s0=$(date +%s)
timeout 120 python3 bench/bench.py --socket "$sock" --out "$OUT/attn" --suite attention --arch sm_90a --tune model \
    --alternate --match "attn_hd64,attn_hd256,attn_bert" 2>&1 | filt | grep -v '^{' | tail -8
echo "=== attention $(el $s0)"
kill -TERM $dp; wait $dp
daemon dyn
left=$(( 570 - ($(date +%s) - t0) ))
echo "=== bert dynamic (limit $left s)"; s0=$(date +%s)
[ $left -gt 90 ] && PYTHONUNBUFFERED=1 timeout $left python3 bench/models_dynamic.py --socket "$sock" --out "$OUT" \
    --sizes 3 --settle-s 10 2>&1 | filt | tail -12
echo "=== bert dynamic $(el $s0)"
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
