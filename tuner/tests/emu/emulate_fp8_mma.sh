#!/bin/bash
# tuner/tests/emu/emulate_fp8_mma.sh - matmul_mma's FP8 candidates (sm_89) run on the CPU against
# the op computed in double (no GPU needed; minutes, not part of the suite).
#   tuner/tests/emu/emulate_fp8_mma.sh BUILD_DIR [EVERY] [WORK_DIR]
# Every EVERY-th candidate (default 10, from the first: the default schedule; none split in a
# cluster, which the emulator lacks) of five cases (gen_fp8_mma.c: e4m3 x e5m2 with row/col scales
# and f32 out, the same promoted, per-block scales with bf16 out, a quantizing cast to e4m3, a
# decode shape; edges in M, N and K; CASES="0 3" picks some) is generated, compiled as host C++
# with emu_mma.cpp (its FP8 mma.sync) and run once; prints one line per candidate, exits 1 when
# any is wrong.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/emu_dyn.sh"
emu_dyn_run "$1" "${2:-10}" "${3:-$(mktemp -d)}" "${CASES:-0 1 2 3 4}" "$here/gen_fp8_mma.c" ""
