#!/bin/bash
# tuner/tests/emu/emulate_attn_dyn.sh - attention_mma's candidates (sm_80: m16n8k16, ldmatrix,
# cp.async, quad shuffles) for dynamic BERT-like and causal self-attention (issue 39) run on the
# CPU at four sizes of their dims and compared with attention computed in double (no GPU needed;
# a minute or two; the suite's tuner_emulated runs a sample, emulate_sample.sh).
#   tuner/tests/emu/emulate_attn_dyn.sh BUILD_DIR [EVERY] [WORK_DIR]
# Every EVERY-th candidate (default 4, from the first: the default schedule) of four cases
# (gen_attn_dyn.c: a key mask and s in 17..20 or 65..80, where the key-tile count is compiled in,
# or in 1..150; causal, s in 1..150; CASES="0 1" picks some) is generated once, compiled as host
# C++ with emu_mma.cpp and emu_attn.h, and run at every size set; a read past an input stops the
# run, and the check also requires the poisoned margin past the output untouched. Prints one line
# per candidate and exits 1 when any is wrong.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/emu_dyn.sh"
emu_dyn_run "$1" "${2:-4}" "${3:-$(mktemp -d)}" "${CASES:-0 1 2 3}" "$here/gen_attn_dyn.c" "-DEXTRA_HELPERS=\"$here/emu_attn.h\""
