#!/bin/bash
# tuner/tests/emu/emulate_sample.sh - the suite's sample of the CPU emulation (test
# tuner_emulated): candidates executed on the CPU at four size sets each against the op in
# double, so that CI (no GPU) runs kernels and not only compiles them. Every 9th attention_mma
# candidate of emulate_attn_dyn.sh's four cases; every 45th matmul_mma candidate of four of
# emulate_mma_dyn.sh's (all axes named with an epilogue, p @ v, 8- and 4-byte cp.async); every
# 60th matmul_wgmma candidate of emulate_wgmma.sh's five (TMA rings, wgmma, staged, pingpong and
# swapped tiles, FP8 with the in-kernel transposer); every 40th attention_wgmma candidate of three
# of emulate_attn_wgmma.sh's (a key mask and causal, lengths at launch; P V with P from
# registers; head dim 256 with a key mask, whose first candidate, the preferred one, holds K and V
# in one slot each): about 57 candidates, about a minute. Then the emulation's own check: that
# candidate again with its wait for V's barrier deleted must come out wrong (a TMA load lands
# only when its barrier is first tested). The full runs are the scripts themselves (minutes).
#   tuner/tests/emu/emulate_sample.sh BUILD_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v g++ > /dev/null; then
    echo "skipped: no g++ (the emulator compiles each kernel as host C++; scripts/setup.sh installs it)"
    exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rc=0
"$here/emulate_attn_dyn.sh" "$1" 9 "$work/attn" || rc=1
CASES="0 2 5 6" "$here/emulate_mma_dyn.sh" "$1" 45 "$work/mma" || rc=1
"$here/emulate_wgmma.sh" "$1" 60 "$work/wgmma" || rc=1
CASES="2 3 5" "$here/emulate_attn_wgmma.sh" "$1" 40 "$work/attn_wgmma" || rc=1
mutant=$(CASES=5 EMU_MUTATE='s/wg_wait(wg_bar0 + 16, wg_ph);//' "$here/emulate_attn_wgmma.sh" "$1" 1000 "$work/mutant")
if [ $? = 1 ] && grep -q "WRONG" <<< "$mutant"; then
    echo "the emulation's own check: without its wait for V, case 5 #0 came out wrong, as it must"
else
    echo "the emulation's own check FAILED: case 5 #0 without its wait for V was not found wrong:"
    echo "$mutant"
    rc=1
fi
exit $rc
