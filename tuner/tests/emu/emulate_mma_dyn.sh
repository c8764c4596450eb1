#!/bin/bash
# tuner/tests/emu/emulate_mma_dyn.sh - matmul_mma's f16/bf16 candidates (m16n8k16, sm_80) for
# dynamic ops with named M, N and K (issue 39) run on the CPU at several sizes of their dims and
# compared with the op computed in double (no GPU needed; minutes, not part of the suite).
#   tuner/tests/emu/emulate_mma_dyn.sh BUILD_DIR [EVERY] [WORK_DIR]
# Every EVERY-th candidate (default 10, from the first: the default schedule) of seven cases
# (gen_mma_dyn.c: every axis named with odd sizes + bias + residual + GELU; q @ k^T [s,64] x
# [s,64]^T; p @ v [s,s] x [s,64] in bf16; multiples of 8 in bf16; a long named K; multiples
# of 4 and of 2, whose loads narrow to 8- and 4-byte cp.async; CASES="1 2" picks some) is
# generated once, compiled as host C++ with emu_mma.cpp, and run at four size sets (every dim
# at its min, odd sizes, the max, one step past a multiple of 64: the dims arguments of the
# launch, the grid by the launch's grid rules); the check also requires the poisoned margin past
# the output untouched, and a read past an input stops the run. Prints one line per candidate (its sizes, bad elements,
# max relative error) and exits 1 when any is wrong. EMU_SM=90 generates for sm_90 (matmul_mma
# there, not wgmma: named N and K; its deeper rings for M <= 128).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
. "$here/emu_dyn.sh"
emu_dyn_run "$1" "${2:-10}" "${3:-$(mktemp -d)}" "${CASES:-0 1 2 3 4 5 6}" "$here/gen_mma_dyn.c $root/tuner/gemm/tests/dyn_matmul.c" ""
