#!/usr/bin/env bash
# Session 16, call d (after bench/pack_gpu.sh and c/prep.sh; `bash
# bench/results/2026-11-30-h200-session16/d/gpu_run.sh`, carry [".gpu"]; about 4 minutes): the
# pretransposed FP8 GEMMs with the transposing launch's 128 x 128 tiles (call c's were 64 x 64 and
# moved 16 MiB in 13.4 us), and the final round's new rule (each finalist held to the worse of its
# two loads) on issue 39's x4096 row at n = 100 and 2100.
#  1. tuner_gpu_verify's FP8 cases, pretransposed candidates only; 0 wrong is the bar.
#  2. bench.py's B [K,N] rows, tune measure, alternating with torch._scaled_mm.
#  3. kbench of .gpu/kb3 and ncu of the transposing launch.
#  4. dynamic.py gemm4096 at 100 and 2100 (fresh daemon, tune measure), with the jobs and trials.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
s0=$(date +%s)
HIDET_VERIFY_ONLY=fp8 HIDET_VERIFY_PARAM=pretranspose=1 LD_LIBRARY_PATH=$G/lib timeout 200 $G/tests/tuner_gpu_verify \
    > $OUT/fp8_pre_verify.log 2>&1
echo "=== verify fp8 pretranspose=1 exit=$? $(el $s0)"; grep -E "^fp8 mn|wrong or failed" $OUT/fp8_pre_verify.log | head -8
daemon m
s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 200 python3 bench/bench.py --socket "$sock" --suite fp8 --arch sm_90a \
    --match fp8_gemm_kn,fp8_decode_kn --tune measure --alternate --out "$OUT/fp8kn" > $OUT/fp8kn.log 2>&1
echo "=== fp8 kn rows exit=$? $(el $s0)"; filt < $OUT/fp8kn.log | tail -3
curl -s --unix-socket "$sock" http://localhost/v1/jobs > $OUT/jobs_fp8.json
kill -TERM $dp; wait $dp
timeout 60 python3 bench/kbench.py .gpu/kb3 --alternate --json $OUT/kb3.json > $OUT/kb3.log 2>&1
echo "=== kb3 exit=$?"; filt < $OUT/kb3.log | tail -3
timeout 90 ncu --kernel-name regex:_bt --launch-count 2 \
    --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum \
    python3 bench/kbench.py .gpu/kb3 --only pre128x256 > $OUT/ncu_bt.log 2>&1
echo "=== ncu bt exit=$?"; grep -E "gpu__time|dram__" $OUT/ncu_bt.log | head -8
daemon g
s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 300 python3 bench/dynamic.py --socket "$sock" --cases gemm4096 --sizes 100,2100 \
    --out "$OUT/dyn" --wait-s 250 > $OUT/dyn.log 2>&1
echo "=== gemm4096 100,2100 exit=$? $(el $s0)"; filt < $OUT/dyn.log | tail -6
curl -s --unix-socket "$sock" http://localhost/v1/jobs > $OUT/jobs_dyn.json
trials $OUT/trials.tsv.gz
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
tar czf /tmp/all.tgz -C "$OUT" . && mv /tmp/all.tgz "$OUT/"
echo "total $(( $(date +%s) - t0 )) s"
