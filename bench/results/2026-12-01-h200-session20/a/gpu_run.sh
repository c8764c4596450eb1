#!/usr/bin/env bash
# Session 20, call a: session 19's prepared script, run as it is (carry [".gpu"], after
# bench/pack_gpu.sh); calls b likewise ran ../2026-12-01-h200-session19/next/gpu_run_kbench.sh after
# next/prep_kbench.sh.
exec bash "$(dirname "$0")/../../2026-12-01-h200-session19/next/gpu_run.sh"
