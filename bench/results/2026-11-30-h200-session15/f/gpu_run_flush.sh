#!/usr/bin/env bash
# Session 15, call g (the programs of call f in .gpu/kb; `bash .gpu/gpu_run_g.sh`, carry [".gpu"]):
# the same kbench with --flush, beside the replays over rotated sets: single launches after an L2
# flush (a memset, and a read), medians of many.
set -u
cd "$(dirname "$0")/.."
. bench/gpu_call.sh
timeout 120 python3 bench/kbench.py .gpu/kb --alternate --flush > $OUT/kbench_flush.log 2>&1
echo "=== kbench --flush exit=$?"; filt < $OUT/kbench_flush.log | tail -8
