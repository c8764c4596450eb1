#!/usr/bin/env bash
# Session 15, call f (copy to .gpu/ with the kgen programs in .gpu/kb; `bash .gpu/gpu_run_f.sh`,
# carry [".gpu"]; about 4 minutes): is a range job's time at its middle biased? In call e the
# range 97..112 of [n,4096]x[4096,4096] timed swapped 64x56 (12 stages, registers out) at 13.66
# us at its top (112) and 16.83 at its middle (104), the same grid, where the exact-size job timed
# the same schedule at 100 in 12.64.
#  1. kbench of the static programs of that schedule and of unswapped 64x64 at 100, 104, 112.
#  2. dynamic.py at 104 and 112 (--any-sizes): the range 97..112 and the two exact sizes tuned in
#     one daemon; its trials give each candidate's time at the range's top and middle and at the
#     exact sizes 104 and 112 under the exact jobs, and dynamic.py times the range's entry at
#     both sizes outside the worker.
set -u
cd "$(dirname "$0")/.."
. bench/gpu_call.sh
{
s0=$(date +%s)
timeout 80 python3 bench/kbench.py .gpu/kb --alternate > $OUT/kbench.log 2>&1
echo "=== kbench exit=$? $(el $s0)"; filt < $OUT/kbench.log | tail -8
daemon g
s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 150 python3 bench/dynamic.py --socket "$sock" --cases gemm4096 --sizes 104,112 --any-sizes \
    --out "$OUT/dyn" --wait-s 100 > $OUT/dyn.log 2>&1
echo "=== dynamic exit=$? $(el $s0)"; filt < $OUT/dyn.log | tail -4
curl -s --unix-socket "$sock" http://localhost/v1/jobs > $OUT/jobs.json
trials $OUT/trials.tsv.gz
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
tar czf /tmp/all.tgz -C "$OUT" . && mv /tmp/all.tgz "$OUT/"
echo "total $(( $(date +%s) - t0 )) s"
