#!/usr/bin/env bash
# Session 16, call c (after c/prep.sh; `bash bench/results/2026-11-30-h200-session16/c/gpu_run.sh`,
# carry [".gpu"]; about 3 minutes):
#  1. FP8 B [K,N] transposed before the GEMM (pretranspose, new): tuner_gpu_verify's FP8 cases with
#     only those candidates; 0 wrong is the bar.
#  2. bench.py's B [K,N] rows (4096^3 and the 16x8192x8192 decode), tune measure, alternating with
#     torch._scaled_mm on the column-major copy.
#  3. kbench of .gpu/kb3 (the pretransposed 128x256 against the in-kernel 256x128) and ncu of the
#     transposing launch alone.
#  4. kbench of .gpu/kb2 in two processes: the same swapped 64x56 loaded six times per process.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
s0=$(date +%s)
HIDET_VERIFY_ONLY=fp8 HIDET_VERIFY_PARAM=pretranspose=1 LD_LIBRARY_PATH=$G/lib timeout 200 $G/tests/tuner_gpu_verify \
    > $OUT/fp8_pre_verify.log 2>&1
echo "=== verify fp8 pretranspose=1 exit=$? $(el $s0)"; grep -E "^fp8|wrong or failed" $OUT/fp8_pre_verify.log | head -24
daemon m
s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 200 python3 bench/bench.py --socket "$sock" --suite fp8 --arch sm_90a \
    --match fp8_gemm_kn,fp8_decode_kn --tune measure --alternate --out "$OUT/fp8kn" > $OUT/fp8kn.log 2>&1
echo "=== fp8 kn rows exit=$? $(el $s0)"; filt < $OUT/fp8kn.log | tail -6
curl -s --unix-socket "$sock" http://localhost/v1/jobs > $OUT/jobs.json
kill -TERM $dp; wait $dp
timeout 60 python3 bench/kbench.py .gpu/kb3 --alternate --json $OUT/kb3.json > $OUT/kb3.log 2>&1
echo "=== kb3 exit=$?"; filt < $OUT/kb3.log | tail -4
timeout 90 ncu --kernel-name regex:_bt --launch-count 2 \
    --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum \
    python3 bench/kbench.py .gpu/kb3 --only pre128x256 > $OUT/ncu_bt.log 2>&1
echo "=== ncu bt exit=$?"; grep -E "gpu__time|dram__" $OUT/ncu_bt.log | head -8
for rep in 1 2; do
    timeout 60 python3 bench/kbench.py .gpu/kb2 --alternate --json $OUT/kb2_$rep.json > $OUT/kb2_$rep.log 2>&1
    echo "=== kb2 process $rep exit=$?"; filt < $OUT/kb2_$rep.log | tail -9
done
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
tar czf /tmp/all.tgz -C "$OUT" . && mv /tmp/all.tgz "$OUT/"
echo "total $(( $(date +%s) - t0 )) s"
