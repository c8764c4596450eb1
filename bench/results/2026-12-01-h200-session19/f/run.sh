#!/usr/bin/env bash
# Session 19, call f (carry [".gpu"], after bench/pack_gpu.sh): f/dump_gpt2.py against a daemon.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
daemon f
PYTHONPATH=clients/python timeout 200 python3 bench/results/2026-12-01-h200-session19/f/dump_gpt2.py "$sock" > $OUT/dump.log 2>&1
echo "exit=$?"
kill $dp
grep -n "====\|attention\|bitwise_and\|efficient\|Tensor\]\|left\|PyTorch" $OUT/dump.log | head -60
