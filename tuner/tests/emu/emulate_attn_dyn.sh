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
root=$(cd "$here/../../.." && pwd)
B=$(cd "$1" && pwd)
every=${2:-4}
work=${3:-$(mktemp -d)}
mkdir -p "$work"
work=$(cd "$work" && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
gcc -O1 -I"$root" -I"$B" -o "$work/gen" "$here/gen_attn_dyn.c" "$root/bench/slurp.c" -Wl,--start-group \
    "$B/tuner/tests/libtuner_test_common.a" "$B/tuner/libtuner.a" "$B/op/libop.a" -lcjson -lm \
    "$cuda/lib64/libnvrtc.so" -pthread -lsodium -Wl,--end-group -Wl,-rpath,"$cuda/lib64" || exit 2
bad=0
n=0
for c in ${CASES:-0 1 2 3}; do
    for ((i = 0; ; i += every)); do
        d=$work/c$c-$i
        mkdir -p "$d"
        sched=$("$work/gen" "$d" $c $i); rc=$?
        [ $rc = 3 ] && break
        n=$((n + 1))
        [ $rc = 0 ] || { echo "case $c #$i: generation failed"; bad=1; continue; }
        g++ -O1 -std=c++17 -w -I"$root" -DKERN="\"$d/kern.cu\"" -DLAUNCH_H="\"$d/launch.h\"" \
            -DEXTRA_HELPERS="\"$here/emu_attn.h\"" -o "$d/emu" "$here/emu_mma.cpp" \
            || { echo "case $c #$i: host compile failed"; bad=1; continue; }
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
