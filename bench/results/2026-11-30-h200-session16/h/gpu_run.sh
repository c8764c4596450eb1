#!/usr/bin/env bash
# Session 16, call h (after bench/pack_gpu.sh; `bash bench/results/2026-11-30-h200-session16/h/gpu_run.sh`,
# carry [".gpu"]; about 5 minutes): issue 39's whole [n,4096]x[4096,4096] row at dynamic.py's 16
# sizes under this session's final tree (sixteenths from 2048, the final round's slower load),
# fresh daemon, tune measure, with the jobs and trials.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
daemon g
s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 330 python3 bench/dynamic.py --socket "$sock" --cases gemm4096 \
    --out "$OUT/dyn" --wait-s 300 > $OUT/dyn.log 2>&1
echo "=== gemm4096 exit=$? $(el $s0)"; filt < $OUT/dyn.log | tail -17
curl -s --unix-socket "$sock" http://localhost/v1/jobs > $OUT/jobs.json
trials $OUT/trials.tsv.gz
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
tar czf /tmp/all.tgz -C "$OUT" . && mv /tmp/all.tgz "$OUT/"
echo "total $(( $(date +%s) - t0 )) s"
