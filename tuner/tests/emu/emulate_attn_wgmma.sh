#!/bin/bash
# tuner/tests/emu/emulate_attn_wgmma.sh - attention_wgmma's candidates (sm_90a: TMA rings, Q K^T
# wgmma from shared memory, P V wgmma with P from registers, online softmax) for the dynamic
# attention cases of gen_attn_dyn.c, run on the CPU (emu_mma.cpp with emu_hopper.h) at four size
# sets each and compared with attention in double (no GPU needed; not part of the suite).
#   tuner/tests/emu/emulate_attn_wgmma.sh BUILD_DIR [EVERY] [WORK_DIR]
# Every EVERY-th candidate (default 2); CASES picks gen_attn_dyn.c's cases (default 0-3; case 4,
# causal with more items than sm_90a's 132 blocks, takes about 30 s a candidate; 5 and 6, head dim
# 256, hold the tiles in one K and one V slot).
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/emu_dyn.sh"
EMU_SM=90a EMU_TEMPLATE=attention_wgmma emu_dyn_run "$1" "${2:-2}" "${3:-$(mktemp -d)}" "${CASES:-0 1 2 3}" \
    "$here/gen_attn_dyn.c" "-DEXTRA_HELPERS=\"emu_hopper.h\""
