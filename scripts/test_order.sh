#!/usr/bin/env bash
# scripts/test_order.sh - meson test's --wrapper in scripts/test.sh's whole-suite run, which runs
# the normal build's and the sanitizer build's tests side by side with one compile cache
# (HIDETD_COMPILE_CACHE): it makes a sanitizer-build test start after the normal build's run of
# the same test has ended, so that it finds that run's kernels compiled (NVRTC is 1.6x slower
# under the sanitizers) instead of compiling them first itself.
#
#   test_order.sh mark BUILD_DIR ORDER_DIR CMD...   (normal build) runs CMD; when it ends, however
#                                                    it ends, marks it ended in ORDER_DIR/ended
#   test_order.sh wait BUILD_DIR ORDER_DIR CMD...   (sanitizer build) when ORDER_DIR/plan says
#                                                    so, waits for CMD's mark first; then runs it
#
# A test is known by its command line with BUILD_DIR (absolute, no symbolic links) written as
# @BUILD@: the same test of the two builds has the same key. ORDER_DIR/plan (scripts/test_order.py
# plan) has a line "KEY SECONDS NAME" for each test; SECONDS > 0 for the sanitizer build's tests
# that wait, and bounds the wait (the test's own timeout: meson's limit under test.sh is three
# times that, so a test that waited in vain still has two thirds of it). The wait also ends when
# ORDER_DIR/ended/ALL exists (test.sh writes it when the normal build's meson test has ended).
# What the test prints, its exit status and its signals are its own (mark: a test killed by a
# signal exits 128 + its number); the wrapper adds one line on stderr when it waited.
#
# With HIDET_TEST_CPU_LOG=FILE, each test's CPU seconds (user, sys: the test and every process it
# waited for; the wrapper then runs the test as its child in both modes) are appended to FILE: "KEY BUILD_DIR'S NAME USER SYS WALL WAITED"
# (test_order.py cpu reads it).
set -u
if [ $# -lt 4 ] || { [ "$1" != mark ] && [ "$1" != wait ]; }; then
    echo "usage: test_order.sh mark|wait BUILD_DIR ORDER_DIR CMD..." >&2
    exit 2
fi
mode=$1 root=$2 dir=$3
shift 3

key=$(for a in "$@"; do
          case $a in "$root" | "$root"/*) a="@BUILD@${a#"$root"}" ;; esac
          printf '%s\0' "$a"
      done | sha256sum)
key=${key%% *}
cpu_log=${HIDET_TEST_CPU_LOG:-}
t0=$EPOCHREALTIME
waited=0

if [ "$mode" = wait ]; then
    line=$(grep -m 1 "^$key " "$dir/plan" 2>/dev/null)
    read -r _ max name <<<"$line"
    if [ -n "$line" ] && ((max > 0)); then
        start=$SECONDS
        while [ ! -e "$dir/ended/$key" ] && [ ! -e "$dir/ended/ALL" ] && ((SECONDS - start < max)); do
            sleep 0.5
        done
        waited=$((SECONDS - start))
        if [ ! -e "$dir/ended/$key" ] && [ ! -e "$dir/ended/ALL" ]; then
            echo "test_order: $name: the normal build's run did not end in $max s; starting anyway" >&2
        elif ((waited > 0)); then
            echo "test_order: $name: started after the normal build's run ended ($waited s wait)" >&2
        fi
    fi
    [ -n "$cpu_log" ] || exec "$@"
else
    # The mark is written when the test ends, also when meson stops it (SIGTERM to the process
    # group, the test's included: bash runs the trap once the test has gone).
    mkdir -p "$dir/ended"
    trap 'touch "$dir/ended/$key"' EXIT
    trap 'exit 143' TERM
    trap 'exit 130' INT
fi

"$@"
rc=$?
if [ -n "$cpu_log" ]; then
    # The shell's children's CPU time (cutime, cstime: the test and what it waited for), in
    # clock ticks, from /proc ($$ is this shell also inside $(...)).
    stat=$(</proc/$$/stat)
    read -r -a f <<<"${stat##*)}"
    tck=$(getconf CLK_TCK)
    user=$(awk -v t="${f[13]}" -v h="$tck" 'BEGIN { printf "%.2f", t / h }')
    sys=$(awk -v t="${f[14]}" -v h="$tck" 'BEGIN { printf "%.2f", t / h }')
    wall=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }')
    echo "$key ${root##*/} $user $sys $wall $waited" >>"$cpu_log"
fi
exit $rc
