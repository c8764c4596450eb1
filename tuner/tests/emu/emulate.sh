#!/bin/bash
# tuner/tests/emu/emulate.sh - conv2d_grouped candidates run on the CPU against a naive
# convolution (no GPU needed; minutes, not part of the suite).
#   tuner/tests/emu/emulate.sh BUILD_DIR [CASES_FILE] [WORK_DIR]
# CASES_FILE lines: NAME and gen_grouped's arguments after DIR (grouped_cases.txt: the ResNeXt and
# RegNet layers at small N, strides, dilation, 12 and 4 channels per group, kpg 6, partial group
# tiles, several tiles a block, the staged output tile, bias + relu, f32 output). Prints one line
# per candidate and copy mode; exits 1 when any is wrong.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
B=$(cd "$1" && pwd)
cases=${2:-$here/grouped_cases.txt}
work=${3:-$(mktemp -d)}
mkdir -p "$work"
cuda=${CUDA_HOME:-/usr/local/cuda}
gcc -O1 -I"$root" -I"$B" -I"$cuda/include" -o "$work/gen" "$here/gen_grouped.c" -Wl,--start-group \
    "$B/tuner/tests/libtuner_test_common.a" "$B/tuner/libtuner.a" "$B/op/libop.a" -lcjson -lm \
    "$cuda/lib64/libnvrtc.so" -pthread -lsodium -Wl,--end-group -Wl,-rpath,"$cuda/lib64" || exit 2
bad=0
while read -r name args; do
    [ -z "$name" ] && continue
    d=$work/$name
    mkdir -p "$d"
    # shellcheck disable=SC2086
    "$work/gen" "$d" $args > /dev/null || { echo "$name: generation failed"; bad=1; continue; }
    for k in "$d"/k*.cu; do
        b=${k%.cu}
        sed -n '1,/^\/\/ ---- end of prelude/p' "$k" > "$b.h"
        sed -n '/^\/\/ ---- end of prelude/,$p' "$k" > "$b.kern"
        g++ -O2 -std=c++17 -w -DDEFS="\"$b.h\"" -DKERNEL="\"$b.kern\"" -o "$b.bin" "$here/emu_kernel.cpp" ||
            { echo "$name $(head -1 "$b.h"): host compile failed"; bad=1; continue; }
        for eager in 1 0; do
            res=$("$b.bin" $eager 2>&1) || bad=1
            echo "$name $(head -1 "$b.h" | cut -c4-) copies $([ $eager = 1 ] && echo at-issue || echo at-wait): $(echo "$res" | tail -1)"
        done
    done
done < "$cases"
exit $bad
