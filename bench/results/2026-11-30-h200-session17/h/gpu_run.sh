#!/usr/bin/env bash
# Session 17, call h (after bench/pack_gpu.sh and h/prep.sh; carry [".gpu"]; about 2 minutes):
# kbench of swapped N pairs against the unpaired tiles (err against the reference kernel, cuBLAS
# beside each) in two processes; then issue 39's x4096 row at 100, fresh daemon, tune measure
# (the range 97..112 and the static 100 now have pairs to choose from).
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
for rep in 1 2; do
    timeout 60 python3 bench/kbench.py .gpu/kbh --alternate --json $OUT/kbh_$rep.json > $OUT/kbh_$rep.log 2>&1
    echo "=== kbh process $rep exit=$?"; filt < $OUT/kbh_$rep.log | tail -11
done
daemon h
s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 150 python3 bench/dynamic.py --socket "$sock" --cases gemm4096 \
    --sizes 100 --out "$OUT/dyn" --wait-s 120 > $OUT/dyn.log 2>&1
echo "=== gemm4096 exit=$? $(el $s0)"; filt < $OUT/dyn.log | tail -2
curl -s --unix-socket "$sock" http://localhost/v1/jobs > $OUT/jobs.json
trials $OUT/trials.tsv.gz
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
