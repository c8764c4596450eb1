#!/usr/bin/env bash
# Prepared in session 21 for the next session (bash bench/pack_gpu.sh, then this with carry
# [".gpu"]; about 10 minutes):
#  1. tuner_gpu_attn_wgmma, every case: every candidate against fp64. New since session 20's
#     sweep: stages 1 (one K and one V slot with barriers of their own) and P packed into S's
#     registers in every no-overlap candidate. So far they ran on the CPU emulator (D = 64 cases)
#     and, at D = 256, the four programs of call d through kbench's reference check;
#  2. issue 38's table under tune model (hd256's pick is now 128 keys in one slot each, two
#     consumers in pingpong: kbench had it 5% ahead of 80 keys in two stages at both lengths);
#  3. the cold-tuning row (hd128 4k, tune measure, <= 20 s; 16.1 s when first measured): the
#     hd128 space grew from 106 to 116 candidates this session (no-overlap tiles that P in S's
#     registers lets fit).
# prep.sh's kbench programs (call d's) can be timed again with bench/kbench.py .gpu/kbs.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
s0=$(date +%s)
LD_LIBRARY_PATH=$G/lib timeout 300 $G/tests/tuner_gpu_attn_wgmma > $OUT/attn_wgmma.log 2>&1
echo "=== tuner_gpu_attn_wgmma exit=$? $(el $s0)"; grep -E "candidates|WRONG|error|correct" $OUT/attn_wgmma.log | head -24
daemon m
s0=$(date +%s)
mkdir -p $OUT/model
timeout 200 python3 bench/bench.py --socket $sock --arch sm_90a --suite attention --tune model \
    --alternate --out $OUT/model > $OUT/bench_attn_model.log 2>&1
echo "=== bench attention tune model exit=$? $(el $s0)"; filt < $OUT/bench_attn_model.log | tail -30
kill $dp
daemon c
s0=$(date +%s)
timeout 150 python3 bench/bench.py --socket $sock --arch sm_90a --suite attention --only attn_hd128 --match 4096 \
    --tune measure --out $OUT/cold > $OUT/bench_cold.log 2>&1
echo "=== cold tuning hd128 4k exit=$? $(el $s0)"; grep -o '"shape": "[^"]*"\|"tune_s": [0-9.]*' $OUT/cold/*.json | paste - - | head
kill $dp
tar czf $OUT/extra.tgz -C $OUT model cold && rm -rf $OUT/model $OUT/cold
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
