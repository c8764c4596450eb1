#!/usr/bin/env bash
# Session 20, call h (after bench/pack_gpu.sh, carry [".gpu"]): the worker's timed spans (a run
# after an L2 flush is GW_TIMED_RUNS runs back to back on copies of the inputs, gpu_workers/
# measure.c phase_time):
#  1. gpu_worker_selftest, with its new candidate that needs zeroed scratch on every run;
#  2. issue 39's x4096 row (bench/dynamic.py, fresh daemon, tune measure) at eight sizes whose
#     working set fits in the L2 (the spans apply), 100 among them.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
s0=$(date +%s)
LD_LIBRARY_PATH=$G/lib timeout 120 $G/tests/gpu_worker_selftest > $OUT/worker_selftest.log 2>&1
echo "=== gpu_worker_selftest exit=$? $(el $s0)"; grep -E "median|FAIL|fail|restarts" $OUT/worker_selftest.log | head -24
daemon h
s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 420 python3 bench/dynamic.py --socket "$sock" --cases gemm4096 \
    --sizes 7,57,100,200,480,1000,2100,3000 --out "$OUT/dyn" --wait-s 380 > $OUT/dyn.log 2>&1
echo "=== gemm4096 exit=$? $(el $s0)"; filt < $OUT/dyn.log | tail -10
curl -s --unix-socket "$sock" http://localhost/v1/jobs > $OUT/jobs.json
trials $OUT/trials.tsv.gz
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
