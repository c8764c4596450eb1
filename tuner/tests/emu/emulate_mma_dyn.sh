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
B=$(cd "$1" && pwd)
every=${2:-10}
work=${3:-$(mktemp -d)}
mkdir -p "$work"
work=$(cd "$work" && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
gcc -O1 -I"$root" -I"$B" -o "$work/gen" "$here/gen_mma_dyn.c" "$root/bench/slurp.c" "$root/tuner/gemm/tests/dyn_matmul.c" -Wl,--start-group \
    "$B/tuner/tests/libtuner_test_common.a" "$B/tuner/libtuner.a" "$B/op/libop.a" -lcjson -lm \
    "$cuda/lib64/libnvrtc.so" -pthread -lsodium -Wl,--end-group -Wl,-rpath,"$cuda/lib64" || exit 2
bad=0
n=0
for c in ${CASES:-0 1 2 3 4 5 6}; do
    for ((i = 0; ; i += every)); do
        d=$work/c$c-$i
        mkdir -p "$d"
        sched=$("$work/gen" "$d" $c $i); rc=$?
        [ $rc = 3 ] && break
        n=$((n + 1))
        [ $rc = 0 ] || { echo "case $c #$i: generation failed"; bad=1; continue; }
        g++ -O1 -std=c++17 -w -I"$root" -DKERN="\"$d/kern.cu\"" -DLAUNCH_H="\"$d/launch.h\"" -o "$d/emu" \
            "$here/emu_mma.cpp" || { echo "case $c #$i: host compile failed"; bad=1; continue; }
        stopped=""
        for s in "$d"/s*/; do
            "$d/emu" "$s" 2>"$s/emu.err" || stopped="$stopped ${s%/}: $(tail -1 "$s/emu.err")"
        done
        if [ -z "$stopped" ]; then
            res=$("$work/gen" "$d" $c check 2>&1) || bad=1
        else
            res="WRONG: the emulation stopped:$stopped"; bad=1
        fi
        echo "case $c #$i $sched: $(echo "$res" | tail -1)"
    done
done
echo "$n candidates x 4 size sets"
exit $bad
