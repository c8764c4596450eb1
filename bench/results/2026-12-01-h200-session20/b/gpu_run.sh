#!/usr/bin/env bash
# Session 20, call b: session 19's prepared kbench script (carry [".gpu"], after
# bench/pack_gpu.sh); after its next/prep_kbench.sh.
exec bash "$(dirname "$0")/../../2026-12-01-h200-session19/next/gpu_run_kbench.sh"
