# tuner/tests/emu/emu_dyn.sh - the driver both emulate_mma_dyn.sh and emulate_attn_dyn.sh run
# (sourced): builds a generator (emu_dyn.h's command line) and, for every EVERY-th candidate of
# each case, has it write the candidate, compiles that as host C++ with emu_mma.cpp, runs it at
# every size set and has the generator check the outputs; one line per candidate, then the count.
#   emu_dyn_run BUILD_DIR EVERY WORK_DIR "CASES" "GEN_SOURCES" "EMU_FLAGS"
# GEN_SOURCES: the generator's C files beside emu_dyn.c; EMU_FLAGS: g++ flags of the emulator
# (e.g. -DEXTRA_HELPERS). EMU_MUTATE, a sed script, is applied to each candidate's kernel before it
# is compiled (the emulation's own check: a broken kernel must come out wrong). Returns 1 when any
# candidate is wrong, 2 when the generator does not build.
emu_dyn_run() {
    local here root B every work cases gen_src emu_flags cuda
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    root=$(cd "$here/../../.." && pwd)
    B=$(cd "$1" && pwd)
    every=$2
    mkdir -p "$3"
    work=$(cd "$3" && pwd)
    cases=$4
    read -r -a gen_src <<< "$5"
    read -r -a emu_flags <<< "$6"
    cuda=${CUDA_HOME:-/usr/local/cuda}
    gcc -O1 -I"$root" -I"$B" -o "$work/gen" "${gen_src[@]}" "$here/emu_dyn.c" "$root/bench/slurp.c" \
        -Wl,--start-group "$B/tuner/tests/libtuner_test_common.a" "$B/tuner/libtuner.a" "$B/op/libop.a" -lcjson -lm \
        "$cuda/lib64/libnvrtc.so" -pthread -lsodium -Wl,--end-group -Wl,-rpath,"$cuda/lib64" || return 2
    local bad=0 n=0 c i d sched rc s stopped res
    for c in $cases; do
        for ((i = 0; ; i += every)); do
            d=$work/c$c-$i
            mkdir -p "$d"
            sched=$("$work/gen" "$d" "$c" "$i"); rc=$?
            [ $rc = 3 ] && break
            # No space for the target (e.g. FP8 on sm_80): every index would fail alike.
            [ $rc = 4 ] && { echo "case $c: no space for the target"; bad=1; break; }
            n=$((n + 1))
            [ $rc = 0 ] || { echo "case $c #$i: generation failed"; bad=1; continue; }
            [ -n "${EMU_MUTATE:-}" ] && sed -i -e "$EMU_MUTATE" "$d/kern.cu"
            g++ -O1 -std=c++17 -w -I"$root" -DKERN="\"$d/kern.cu\"" -DLAUNCH_H="\"$d/launch.h\"" "${emu_flags[@]}" \
                -o "$d/emu" "$here/emu_mma.cpp" || { echo "case $c #$i: host compile failed"; bad=1; continue; }
            stopped=""
            for s in "$d"/s*/; do
                "$d/emu" "$s" 2> "$s/emu.err" || stopped="$stopped ${s%/}: $(tail -1 "$s/emu.err")"
            done
            if [ -z "$stopped" ]; then
                res=$("$work/gen" "$d" "$c" check 2>&1) || bad=1
            else
                res="WRONG: the emulation stopped:$stopped"; bad=1
            fi
            echo "case $c #$i $sched: $(echo "$res" | tail -1)"
        done
    done
    echo "$n candidates"
    return $bad
}
