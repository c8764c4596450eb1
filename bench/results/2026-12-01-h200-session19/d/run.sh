#!/usr/bin/env bash
# Session 19, call d (carry [".gpu"], after bench/pack_gpu.sh and KBA=... d/prep.sh): attention
# with the lazy rescale (O rescaled only when a row's max outgrew the reference by 2^8).
#  1. kbench of .gpu/kbd in two processes: NAME (NVRTC) against NAME_old (the same schedule before
#     the change), NAME_nv against NAME_al (nvcc, with and without the vote);
#  2. tuner_gpu_attn_wgmma, every case and candidate against fp64 (masks now on a ramp that makes
#     rows outgrow their reference max mid-row); 0 wrong is the bar;
#  3. issue 38's table with the cost model's picks.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
for rep in 1 2; do
    timeout 150 python3 bench/kbench.py .gpu/kbd --only attn --json $OUT/kbd_$rep.json > $OUT/kbd_$rep.log 2>&1
    echo "=== kbench process $rep exit=$?"; filt < $OUT/kbd_$rep.log | tail -26
done
s0=$(date +%s)
LD_LIBRARY_PATH=$G/lib timeout 240 $G/tests/tuner_gpu_attn_wgmma > $OUT/attn_wgmma.log 2>&1
echo "=== tuner_gpu_attn_wgmma exit=$? $(el $s0)"; grep -E "candidates|WRONG|error|failure|all cand" $OUT/attn_wgmma.log | head -24
daemon d
s0=$(date +%s)
mkdir -p $OUT/model
timeout 150 python3 bench/bench.py --socket $sock --arch sm_90a --suite attention --tune model \
    --alternate --out $OUT/model > $OUT/bench_attn_model.log 2>&1
echo "=== bench attention tune model exit=$? $(el $s0)"; filt < $OUT/bench_attn_model.log | tail -30
kill $dp
tar czf $OUT/extra.tgz -C $OUT model kbd_1.json kbd_2.json kbd_1.log kbd_2.log
rm -rf $OUT/model $OUT/kbd_*
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
