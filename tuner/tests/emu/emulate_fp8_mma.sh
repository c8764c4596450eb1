#!/bin/bash
# tuner/tests/emu/emulate_fp8_mma.sh - matmul_mma's FP8 candidates (sm_89) run on the CPU against
# the op computed in double (no GPU needed; minutes, not part of the suite).
#   tuner/tests/emu/emulate_fp8_mma.sh BUILD_DIR [EVERY] [WORK_DIR]
# Every EVERY-th candidate (default 10, from the first: the default schedule) of five cases
# (gen_fp8_mma.c: e4m3 x e5m2 with row/col scales and f32 out, the same promoted, per-block scales
# with bf16 out, a quantizing cast to e4m3, a decode shape; edges in M, N and K; CASES="0 3" picks
# some) is generated, compiled as host
# C++ with emu_fp8_mma.cpp and run; prints one line per candidate, exits 1 when any is wrong.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
B=$(cd "$1" && pwd)
every=${2:-10}
work=${3:-$(mktemp -d)}
mkdir -p "$work"
cuda=${CUDA_HOME:-/usr/local/cuda}
gcc -O1 -I"$root" -I"$B" -o "$work/gen" "$here/gen_fp8_mma.c" "$root/bench/slurp.c" -Wl,--start-group \
    "$B/tuner/tests/libtuner_test_common.a" "$B/tuner/libtuner.a" "$B/op/libop.a" -lcjson -lm \
    "$cuda/lib64/libnvrtc.so" -pthread -lsodium -Wl,--end-group -Wl,-rpath,"$cuda/lib64" || exit 2
# The cases' A and B formats (op/op.h's tuner_dtype: 5 e4m3, 6 e5m2).
fmt=("5 6" "5 6" "5 5" "5 5" "6 5")
bad=0
for c in ${CASES:-0 1 2 3 4}; do
    for ((i = 0; ; i += every)); do
        d=$work/c$c-$i
        mkdir -p "$d"
        sched=$("$work/gen" "$d" $c $i); rc=$?
        [ $rc = 3 ] && break
        [ $rc = 0 ] || { echo "case $c #$i: generation failed"; bad=1; continue; }
        g++ -O1 -std=c++17 -w -I"$root" -DKERN="\"$d/kern.cu\"" -DLAUNCH_H="\"$d/launch.h\"" -o "$d/emu" \
            "$here/emu_fp8_mma.cpp" "$B/op/libop.a" || { echo "case $c #$i: host compile failed"; bad=1; continue; }
        # shellcheck disable=SC2086
        if "$d/emu" "$d" ${fmt[$c]}; then
            res=$("$work/gen" "$d" $c check 2>&1) || bad=1
        else
            res="WRONG: the emulation stopped"; bad=1
        fi
        echo "case $c #$i $sched: $(echo "$res" | tail -1)"
    done
done
exit $bad
