#!/usr/bin/env bash
# Prepared in session 19 for the next session (`bash bench/results/2026-12-01-h200-session19/next/gpu_run.sh`,
# carry [".gpu"], after bench/pack_gpu.sh; about 8 minutes):
#  1. tuner_gpu_verify's new softmax cases with runs of -inf (the streaming softmax's NaN fix of
#     session 19, never run on a GPU); 0 wrong is the bar;
#  2. tests/gpu/masked_models.py: session 19's call j had f32 BERT and GPT-2 at fixed sizes NaN
#     under tune model (right under tune none);
#  3. where that NaN comes from, if it is still there: next/bisect_f32.py (which step's
#     tune-model kernel, swapping in tune none's one step at a time), then the f32 BERT run alone
#     under compute-sanitizer's initcheck (a kernel reading device memory nothing wrote: a workspace,
#     the arena) and memcheck (reads past a buffer: a K edge of the 32x64 tf32 tiles at K = 37);
#  4. issue 38's table on the final tree (session 19's call d ran it with the lazy rescale, since
#     taken out).
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
s0=$(date +%s)
HIDET_VERIFY_ONLY="-inf runs" LD_LIBRARY_PATH=$G/lib timeout 90 $G/tests/tuner_gpu_verify > $OUT/verify_ninf.log 2>&1
echo "=== verify -inf runs exit=$? $(el $s0)"; grep -E "inf runs|WRONG|wrong" $OUT/verify_ninf.log | head -12
daemon m
s0=$(date +%s)
timeout 150 python3 tests/gpu/masked_models.py --socket "$sock" > $OUT/masked_models.log 2>&1
rc=$?
echo "=== masked_models exit=$rc $(el $s0)"; grep -E "error|ops on|FAILED|through" $OUT/masked_models.log | tail -26
if [ $rc -ne 0 ]; then
    # The step whose tune-model kernel makes the NaN: a daemon with an empty cache, so that its
    # tune none answers are the defaults (next/bisect_f32.py swaps one step at a time).
    kill $dp; wait $dp
    daemon b
    s0=$(date +%s)
    PYTHONPATH=clients/python timeout 200 python3 bench/results/2026-12-01-h200-session19/next/bisect_f32.py "$sock" \
        > $OUT/bisect_f32.log 2>&1
    echo "=== bisect_f32 exit=$? $(el $s0)"; cut -c1-260 $OUT/bisect_f32.log | grep -v Warn | tail -24
    for tool in initcheck memcheck; do
        s0=$(date +%s)
        timeout 150 compute-sanitizer --tool $tool --print-limit 20 python3 tests/gpu/masked_models.py \
            --socket "$sock" --only "bert f32 fixed" > $OUT/sanitizer_$tool.log 2>&1
        echo "=== compute-sanitizer $tool exit=$? $(el $s0)"
        grep -E "=========|error|Invalid|Uninitialized|at 0x|in hd_|WRONG" $OUT/sanitizer_$tool.log | head -24
    done
fi
s0=$(date +%s)
mkdir -p $OUT/model
timeout 150 python3 bench/bench.py --socket $sock --arch sm_90a --suite attention --tune model \
    --alternate --out $OUT/model > $OUT/bench_attn_model.log 2>&1
echo "=== bench attention tune model exit=$? $(el $s0)"; filt < $OUT/bench_attn_model.log | tail -30
kill $dp
tar czf $OUT/extra.tgz -C $OUT model && rm -rf $OUT/model
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
