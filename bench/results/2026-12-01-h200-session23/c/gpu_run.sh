#!/usr/bin/env bash
# Session 23, call c (bash bench/pack_gpu.sh, then kgen programs into .gpu/k; carry [".gpu"];
# about 5 minutes): call b found FP8 row/col at 0.87-0.94 of cuBLASLt at every one of the model's
# 25 best schedules, under the 700 W cap. Energy per GEMM is what sets the speed there. One
# energy cost a schedule sets is DRAM traffic: a group of `swizzle` M tiles walks all of N, so B
# is read from DRAM about M / (block_m * swizzle) times. The same schedules with swizzle 1-64
# (rc192_* 128x192, rc128c2_* 128x128 in CTA pairs, rc256_* 128x256, tn192_* tensor scales;
# f16 mlp_* and sw_* at 2048x14336x4096 bare and SwiGLU), timed alternating with the peer and
# sustained with NVML's energy per call; then ncu's DRAM and L2 bytes of a few, and of cuBLASLt.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
export PATH=/usr/local/cuda/bin:$PATH
python3 -c "import pynvml; pynvml.nvmlInit(); print('pynvml ok')" 2>&1 | tail -1
s0=$(date +%s)
timeout 330 python3 bench/kbench.py $G/k --alternate --sustain 200 --json $OUT/kbench.json > $OUT/kbench.log 2>&1
echo "=== kbench exit=$? $(el $s0)"; filt < $OUT/kbench.log | grep -v '^{"name'
M=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second
for p in rc192_g08 rc192_g64 rc128c2_g08 mlp_g08 mlp_g16; do
  s0=$(date +%s)
  timeout 60 ncu --metrics $M -k "regex:hd_matmul" -c 1 python3 bench/kbench.py $G/k --only $p > $OUT/ncu_$p.log 2>&1
  echo "=== ncu $p exit=$? $(el $s0)"; grep -E "hd_matmul|dram__|lts__t|gpu__time|sm__cycles" $OUT/ncu_$p.log | grep -v "^==PROF" | head -8
done
s0=$(date +%s)
timeout 60 ncu --metrics $M python3 bench/results/2026-12-01-h200-session23/c/peers_once.py > $OUT/ncu_peers.log 2>&1
echo "=== ncu peers exit=$? $(el $s0)"; grep -E "nvjet|sm90|gemm|dram__|lts__t|gpu__time|sm__cycles" $OUT/ncu_peers.log | grep -v "^==PROF" | head -40
} > "$OUT/gpu_c.log" 2>&1
cat "$OUT/gpu_c.log"
echo "total $(( $(date +%s) - t0 )) s"
cd $OUT && tar czf ncu.tgz ncu_*.log && rm -f ncu_*.log
