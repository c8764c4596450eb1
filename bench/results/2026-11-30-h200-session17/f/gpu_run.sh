#!/usr/bin/env bash
# Session 17, call f (after bench/pack_gpu.sh; carry [".gpu"]; about 8 minutes): issue 39's x4096
# row at its 12 sizes from 100 with this session's tree (ranges cut where their kernel's
# range_worst exceeds 1.03, split-K sums loading a step's partials at once), fresh daemon, tune
# measure; the jobs and trials kept.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
daemon f
s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 540 python3 bench/dynamic.py --socket "$sock" --cases gemm4096 \
    --sizes 100,200,300,480,700,1000,1500,2100,3000,4500,6000,8000 --out "$OUT/dyn" --wait-s 470 > $OUT/dyn.log 2>&1
echo "=== gemm4096 exit=$? $(el $s0)"; filt < $OUT/dyn.log | tail -13
curl -s --unix-socket "$sock" http://localhost/v1/jobs > $OUT/jobs.json
trials $OUT/trials.tsv.gz
kill -TERM $dp; wait $dp
cp /tmp/hd-f/hidetd.log "$OUT/hidetd_f.log" 2>/dev/null
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
