#!/bin/bash
# tuner/tests/emu/emulate_wgmma.sh - matmul_wgmma's candidates (sm_90a: TMA loads, mbarrier rings,
# wgmma in 16 and 8 bits, swapped operands, staged or register stores, pingpong) run on the CPU (emu_hopper.h) at
# several sizes and compared with the op computed in double (no GPU needed; not part of the suite).
#   tuner/tests/emu/emulate_wgmma.sh BUILD_DIR [EVERY] [WORK_DIR]
# Every EVERY-th matmul_wgmma candidate without CTA clusters (default 25, from the first) of
# gen_mma_dyn.c's cases 7-11 (CASES picks others): f16 [m,k]x[k,n], m <= 200 named, + bias +
# residual + GELU; bf16 [m,k]x[n,k]^T, m <= 196 named; f16 77x72x64 fixed, + bias + residual +
# GELU; e4m3 x e4m3 -> f16 96x256x256 with B [N,K], and with B [K,N] (the kernel's transposer).
# Case 12 (CASES=12 EMU_PARAM=stream_k=1): f16 [m,2048]x[2048,1024], m <= 1280 named, for stream-K's
# division made at launch (tiles whole, all shared, whole waves then shared; about 4 minutes a
# candidate). Case 13 (CASES=13 EMU_PARAM=swap=1): e4m3 x e5m2 -> bf16 96x256x256 with row and
# column scales, for FP8 with swapped operands; case 14 the same over a named M (n <= 96). Case 15
# (CASES=15 EMU_PARAM=pretranspose=1): e4m3 -> bf16 96x208x144 with B [K,N] transposed by a launch
# of its own before the GEMM (case 11 with the same EMU_PARAM: 96x256x256); case 16 the same
# over a named M (n <= 96). Case 17 (CASES=17 EMU_PARAM=pingpong=1): f16 2176x1024x64, more tiles
# than two per block of the 132 (pingpong's walk past a block's first two; about 20 s a candidate).
# EMU_PARAM=name=value[,...] keeps the candidates
# with those parameters (e.g. swap=1). The size
# sets, the check and the driver are emulate_mma_dyn.sh's (emu_dyn.sh).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
. "$here/emu_dyn.sh"
EMU_SM=90a EMU_TEMPLATE=matmul_wgmma emu_dyn_run "$1" "${2:-25}" "${3:-$(mktemp -d)}" "${CASES:-7 8 9 10 11}" \
    "$here/gen_mma_dyn.c $root/tuner/gemm/tests/dyn_matmul.c" "-DEXTRA_HELPERS=\"emu_hopper.h\""
