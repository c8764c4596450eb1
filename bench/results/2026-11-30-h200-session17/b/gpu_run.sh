#!/usr/bin/env bash
# Session 17, call b (after bench/pack_gpu.sh; carry [".gpu"]; about 8 minutes): issue 39's x4096
# row at the sizes whose ranges' kernels fit worst in session 16 (480, 2100, 3000, 4500, 6000),
# with ranges cut in two where the measured kernel's range_worst exceeds 1.04 (each half tuned
# once its size lands in it), fresh daemon, tune measure; the jobs and trials kept.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
daemon b
s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 520 python3 bench/dynamic.py --socket "$sock" --cases gemm4096 \
    --sizes 480,2100,3000,4500,6000 --out "$OUT/dyn" --wait-s 460 > $OUT/dyn.log 2>&1
echo "=== gemm4096 exit=$? $(el $s0)"; filt < $OUT/dyn.log | tail -8
curl -s --unix-socket "$sock" http://localhost/v1/jobs > $OUT/jobs.json
trials $OUT/trials.tsv.gz
kill -TERM $dp; wait $dp
cp /tmp/hd-b/hidetd.log "$OUT/hidetd_b.log" 2>/dev/null
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
