#!/usr/bin/env bash
# Prepared in session 14 for the next session (bench/pack_gpu.sh, copy this to .gpu/, then
# `bash .gpu/gpu_run.sh gemm14336` and, in a second call, `bash .gpu/gpu_run.sh gemm4096`, carry
# [".gpu"]): issue 39's whole GEMM row of one case at dynamic.py's 16 sizes under this session's
# two changes (one name cut into eighths of an octave from 128; a range's candidates compared by
# their worst ratio to the best candidate's time at its top, middle and bottom, nothing stopped
# early). Session 14 measured only the sizes that had missed. Keeps every timed candidate (the
# trials table) and the jobs, so a miss can be replayed on the CPU machine (README, call b).
set -u
case_name=${1:-gemm14336}
cd "$(dirname "$0")/.."
. bench/gpu_call.sh
{
daemon g
s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 520 python3 bench/dynamic.py --socket "$sock" --cases "$case_name" \
    --out "$OUT/dyn" --wait-s 400 > $OUT/dyn.log 2>&1
echo "=== $case_name exit=$? $(el $s0)"; filt < $OUT/dyn.log | tail -17
curl -s --unix-socket "$sock" http://localhost/v1/jobs > $OUT/jobs.json
trials $OUT/trials.tsv.gz
kill -TERM $dp; wait $dp
cp /tmp/hd-g/hidetd.log $OUT/
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
# Every result in one file: the device tool brings back a limited number of files.
tar czf /tmp/all.tgz -C "$OUT" . && mv /tmp/all.tgz "$OUT/"
echo "total $(( $(date +%s) - t0 )) s"
