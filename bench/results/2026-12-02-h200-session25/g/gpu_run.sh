#!/usr/bin/env bash
# Session 25, call g (bash bench/pack_gpu.sh; carry [".gpu"]; about 3 minutes): gpu_sched with
# its new heated range case ([3585,4096]x8192x8192 f16, sm_90a): the final round's heater bound
# to the middle's sizes on a real worker, and every case as before.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
s0=$(date +%s)
HIDETD_WORKER=$G/bin/hidetd-worker LD_LIBRARY_PATH=$G/lib timeout 280 $G/tests/gpu_sched > $OUT/gpu_sched.log 2>&1
echo "=== gpu_sched exit=$? $(el $s0)"; cat $OUT/gpu_sched.log | tail -40
} > "$OUT/gpu_g.log" 2>&1
cat "$OUT/gpu_g.log"
echo "total $(( $(date +%s) - t0 )) s"
