#!/usr/bin/env bash
# Session 22, call b (bash bench/pack_gpu.sh, then this with carry [".gpu"]; about 8 minutes):
# attention_decode's K and V by TMA (load 1, new this session; call a's bench/read_bw.cu read a
# decode-shaped stream 1.06-1.13x faster by one bulk copy per tile than by the cp.async ring).
#  1. tuner_gpu_attn_decode: every candidate (load 1 and 0) against fp64 on its 11 shapes and
#     two dynamic ops, then every candidate of issue 38's six decode rows timed (L2 flushed);
#  2. issue 38's decode rows, tune model then tune measure, against PyTorch's best backend.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
s0=$(date +%s)
LD_LIBRARY_PATH=$G/lib timeout 330 $G/tests/tuner_gpu_attn_decode > $OUT/attn_decode.log 2>&1
echo "=== tuner_gpu_attn_decode exit=$? $(el $s0)"
grep -E "wrong|WRONG|FAIL|default|model|fastest|best" $OUT/attn_decode.log | grep -v " ok " | head -40
for m in model measure; do
daemon $m
s0=$(date +%s)
timeout 100 python3 bench/bench.py --socket $sock --arch sm_90a --suite attention --only attn_decode --tune $m \
    --alternate --out $OUT/$m > $OUT/bench_decode_$m.log 2>&1
echo "=== bench attn_decode tune $m exit=$? $(el $s0)"; filt < $OUT/bench_decode_$m.log | grep -E "attn_decode|case" | tail -8
kill $dp
done
tar czf $OUT/extra.tgz -C $OUT model measure && rm -rf $OUT/model $OUT/measure
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
