#!/usr/bin/env bash
# Session 22, call d (bash bench/pack_gpu.sh, then tuner_gpu_attn_decode built once more with
# decode.c's zeroing of V's rows past Skv disabled, as .gpu/tests/tuner_gpu_attn_decode_nozero;
# carry [".gpu"]; about 4 minutes):
#  1. tuner_gpu_attn_decode's dynamic ops with the new poison (V's key 0 of the group whose rows
#     a flattened map reads past Skv set to +inf): the real binary must pass, the mutant fail;
#  2. issue 38's two rows nearest 1.0 (causal 2k, hd256), tune measure, against cuDNN.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
for b in tuner_gpu_attn_decode tuner_gpu_attn_decode_nozero; do
s0=$(date +%s)
HIDET_DECODE_ONLY=dynamic LD_LIBRARY_PATH=$G/lib timeout 150 $G/tests/$b > $OUT/$b.log 2>&1
echo "=== $b (dynamic ops) exit=$? $(el $s0)"
grep -E "^dynamic|wrong" $OUT/$b.log | head; grep -c FAIL $OUT/$b.log; grep FAIL $OUT/$b.log | head -3
done
daemon m
s0=$(date +%s)
timeout 170 python3 bench/bench.py --socket $sock --arch sm_90a --suite attention --only attn_hd128,attn_hd256 --match s2048 \
    --tune measure --alternate --out $OUT/measure > $OUT/bench_measure.log 2>&1
echo "=== bench hd128/hd256 2k tune measure exit=$? $(el $s0)"; filt < $OUT/bench_measure.log | grep -E "attn_|case" | tail -8
kill $dp
gzip -9 $OUT/*.log
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
