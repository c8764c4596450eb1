#!/usr/bin/env bash
# Session 10 GPU call C: attention_decode in one launch (every candidate, CUDA-graph replays,
# dynamic B/Skv, the issue's rows timed; then the decode bench rows against PyTorch), FP8
# matmul_wgmma with MN-major operands transposed in the kernel and the quantize step's amax
# (tuner_gpu_verify), and the models after math_attention runs on static graphs (tests/gpu/models.py).
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
export LD_LIBRARY_PATH=$G/lib
s0=$(date +%s)
HIDET_DECODE_TIMES=1 timeout 230 $G/tests/tuner_gpu_attn_decode > $OUT/decode.log 2>&1; echo "=== decode exit=$? $(el $s0)"
grep -E "^ok|bad [1-9]|WRONG|wrong|failed|default|model|best|gpu_attn_decode|device" $OUT/decode.log | grep -v "^  " | head -60
s0=$(date +%s)
HIDET_VERIFY_ONLY=fp8 timeout 120 $G/tests/tuner_gpu_verify > $OUT/fp8.log 2>&1; echo "=== fp8 verify exit=$? $(el $s0)"
grep -E "cand:|WRONG|compile failed|error|^fp8|gpu_verify" $OUT/fp8.log | head -40
s0=$(date +%s)
HIDET_VERIFY_ONLY="fp8 mn" HIDET_VERIFY_FP8_MAX=40 timeout $(left 400) $G/tests/tuner_gpu_verify > $OUT/fp8_mn.log 2>&1; echo "=== fp8 mn exit=$? $(el $s0)"
grep -E "cand:|WRONG|compile failed|error|^fp8|gpu_verify" $OUT/fp8_mn.log | head -20
unset LD_LIBRARY_PATH
daemon m
l=$(left 500); echo "=== models (limit $l s)"; s0=$(date +%s)
timeout $l python3 tests/gpu/models.py --socket "$sock" --cases bert-b8-s128,bert-b3-s100,bert-b2-s404,gpt2-b1-s128 2>&1 | filt | tail -8
echo "=== models $(el $s0)"
l=$(left 585); echo "=== decode bench (limit $l s)"; s0=$(date +%s)
[ $l -gt 20 ] && timeout $l python3 bench/bench.py --socket "$sock" --suite attention --match attn_decode --arch sm_90a \
    --tune model --alternate --out $OUT/decode_bench 2>&1 | filt | tail -16
echo "=== decode bench $(el $s0)"
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
