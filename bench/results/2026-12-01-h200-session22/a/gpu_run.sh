#!/usr/bin/env bash
# Session 22, call a (bash bench/pack_gpu.sh, then this with carry [".gpu"]; about 9 minutes):
#  0. bench/read_bw.cu: how fast a decode-shaped stream of K and V reads by load mechanism
#     (decode's cp.async ring, bulk copies per row or per tile, plain loads), against the copy;
#  1-3. session 21's next/gpu_run.sh: every attention_wgmma candidate against fp64 (stages 1 and
#     P in S's registers never swept on a GPU), issue 38's table under tune model (hd256's new
#     pick), and the cold-tuning row (hd128 4k, <= 20 s).
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
s0=$(date +%s)
PATH=/usr/local/cuda/bin:$PATH nvcc -gencode arch=compute_90a,code=sm_90a -O3 -o /tmp/read_bw bench/read_bw.cu > $OUT/read_bw.log 2>&1 && timeout 60 /tmp/read_bw >> $OUT/read_bw.log 2>&1
echo "=== read_bw exit=$? $(el $s0)"; cat $OUT/read_bw.log | grep -v warning
s0=$(date +%s)
LD_LIBRARY_PATH=$G/lib timeout 270 $G/tests/tuner_gpu_attn_wgmma > $OUT/attn_wgmma.log 2>&1
echo "=== tuner_gpu_attn_wgmma exit=$? $(el $s0)"; grep -E "candidates|WRONG|error|correct" $OUT/attn_wgmma.log | head -24
daemon m
s0=$(date +%s)
mkdir -p $OUT/model
timeout 150 python3 bench/bench.py --socket $sock --arch sm_90a --suite attention --tune model \
    --alternate --out $OUT/model > $OUT/bench_attn_model.log 2>&1
echo "=== bench attention tune model exit=$? $(el $s0)"; filt < $OUT/bench_attn_model.log | tail -30
kill $dp
daemon c
s0=$(date +%s)
timeout 90 python3 bench/bench.py --socket $sock --arch sm_90a --suite attention --only attn_hd128 --match 4096 \
    --tune measure --out $OUT/cold > $OUT/bench_cold.log 2>&1
echo "=== cold tuning hd128 4k exit=$? $(el $s0)"; grep -o '"shape": "[^"]*"\|"tune_s": [0-9.]*' $OUT/cold/*.json | paste - - | head
kill $dp
tar czf $OUT/extra.tgz -C $OUT model cold && rm -rf $OUT/model $OUT/cold
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
