#!/usr/bin/env bash
# Session 19, call h (carry [".gpu"], after bench/pack_gpu.sh): h/f32_masked.py against a daemon.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
daemon h
PYTHONPATH=clients/python timeout 200 python3 bench/results/2026-12-01-h200-session19/h/f32_masked.py "$sock" 2>&1 | filt > $OUT/f32.log
echo "exit=$?"
kill $dp
cat $OUT/f32.log
