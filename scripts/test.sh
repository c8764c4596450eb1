#!/usr/bin/env bash
# scripts/test.sh - sets everything up and runs the test suite: the whole of it in the normal build
# and in an AddressSanitizer + UndefinedBehaviorSanitizer build (the two builds' tests side by
# side), or with --quick the unit and integration suites of the normal build. `--help` says how
# long each takes. Tests that need a GPU (suite 'gpu') skip themselves with a message on machines
# without one; each run lists its skipped tests with that message. Ends with one line
# "N passed, N failed, N skipped" over the builds it ran; exits non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."

usage() {
    cat <<'EOF'
usage: scripts/test.sh [--quick | --help]

  (none)    builds build/ and build-asan/ (-Db_sanitize=address,undefined) and runs the whole
            suite in both, the two builds' tests at the same time (each line of their output
            starts with [build] or [build-asan]). The tuner's compile checks compile a
            deterministic sample (tuner/tests/common.h): 1 in 8 candidates in the normal
            build (1 in 16 for matmul_wgmma), 1 in 16 in the sanitizer build. The run's identical compiles share one
            cache (HIDETD_COMPILE_CACHE, tuner/compile_cache.h), and a sanitizer-build test
            that compiles starts after the normal build's run of it (scripts/test_order.sh;
            HIDET_TEST_ORDER=off: no waits). Suite one-build (the .debs, the backend's small
            modules) runs in the sanitizer build only. HIDET_TEST_CPU_LOG=FILE: each test's
            CPU seconds, listed at the end.
            About 11.5 minutes on a 2-core machine once both builds are made, 14 from
            a new clone (README.md, "Tests").
  --quick   the normal build only: suites unit and integration, with the tuner's compile checks
            sampled as in the sanitizer build. About 2.5 minutes.
  --help    this text; runs nothing.

One suite or test alone: meson test -C build --suite unit | meson test -C build NAME
(meson test -C build --list). Ends with "N passed, N failed, N skipped"; exit status 1 if
anything failed.
EOF
}

quick=0
case "${1:-}" in
    "") ;;
    --quick) quick=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "scripts/test.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "scripts/test.sh: one argument at most" >&2; usage >&2; exit 2; }

if ((quick)); then
    builds=(build)
    total=2
else
    builds=(build build-asan)
    total=3
fi

# Each phase says what it is; ninja shows its progress; after the tests the skipped ones are
# listed with the reason they printed (exit status 77 alone says nothing).
# A PyTorch install that setup.sh starts (a new clone) runs beside both builds and the tests:
# setup.sh leaves its pid in the .pid file next to its log, and it writes its exit status to the
# .status file when it ends; the tests that need it wait for it, and its status is checked at the
# end.
torch_log=$PWD/.deps/torch-venv-install.log
rm -f "$torch_log.pid" "$torch_log.status"
echo "== [1/$total] build: the normal build (build/)"
HIDETD_SETUP_TORCH_NOWAIT=1 scripts/setup.sh build || exit 1
if ((!quick)); then
    echo "== [2/$total] build: the AddressSanitizer + UndefinedBehaviorSanitizer build (build-asan/)"
    HIDETD_SETUP_NO_TORCH=1 scripts/setup.sh build-asan -Db_sanitize=address,undefined -Db_lundef=false \
        -Dbuildtype=debug || exit 1
fi
if [ -e "$torch_log.pid" ]; then
    # Only the torch.compile backend's tests need it: they wait for it (torch_tests.sh), the
    # others start now. Checked again after the tests.
    echo "== the PyTorch install goes on beside the tests; the torch.compile tests wait for it"
    export HIDETD_TORCH_INSTALL=$torch_log
fi

export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export PATH="$CUDA_HOME/bin:$PWD/.deps/cuobjdump/nvidia/cu13/bin:$PATH"
# One compile cache for this run (tuner/compile_cache.h): every daemon a test starts has an empty
# kernel cache, and both builds compile the same sources; an identical compile is done once.
# Fresh each run, so no result of an older toolkit or tree is reused; removed at the end.
HIDETD_COMPILE_CACHE=$(mktemp -d "${TMPDIR:-/tmp}/hidetd-test-compile.XXXXXX") || exit 1
export HIDETD_COMPILE_CACHE
trap 'rm -rf "$HIDETD_COMPILE_CACHE"' EXIT
# NVRTC keeps a few process-lifetime allocations; they are not ours to free.
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

# meson test in one build dir; --no-rebuild: setup.sh has just built everything (meson would run
# ninja again). Three tests at a time per build (TESTS_AT_ONCE), four in the normal build of the
# whole suite: seven processes on two cores. Measured with two: the cores sat idle a third of the
# time, integration tests waiting on daemons, sockets and timers, and the serial tests
# (is_parallel: false) alone. The normal build has the fourth: since the sanitizer build's tests
# that compile wait for its runs (below), it is the longer of the two, and some 200 s of its tests'
# wall time is waiting on timers (gw_pool, attack-pool-*, it_cluster, it_native, it_lifecycle).
TESTS_AT_ONCE=3
run_tests() {
    local b=$1
    shift
    meson test -C "$b" --no-rebuild --print-errorlogs --num-processes "$TESTS_AT_ONCE" --timeout-multiplier 3 "$@"
}

# The whole suite: a sanitizer-build test that the sanitizer build runs late (a negative priority:
# the daemon-driven tests, the tuner's compile checks, the serial tests) starts after the normal
# build's run of the same test has ended (scripts/test_order.sh, meson test's --wrapper in both
# builds; its plan from scripts/test_order.py), so it finds that run's kernels in the compile cache
# instead of compiling them first at the sanitizers' 1.6x; the normal build runs those tests early
# (meson.build: daemon_test_priority).
order=$HIDETD_COMPILE_CACHE/.order
run_build() { # BUILD mark|wait [MESON-TEST-ARGS...]
    local b=$1 mode=$2 rc ext
    shift 2
    # Three at a time in each build. Four in the normal build ended it some 27 s earlier under
    # load, but the sanitizer build's it_cluster then failed once in four idle runs (its burst
    # tuned twice in the fleet: a 1.5 s lease not renewed in time with seven test processes on
    # two cores).
    local at_once=3
    TESTS_AT_ONCE=$at_once run_tests "$b" \
        --wrapper "$(printf '%q ' "$PWD/scripts/test_order.sh" "$mode" "$(cd "$b" && pwd -P)" "$order")" "$@"
    rc=$?
    # meson names the logs of a run with a wrapper after it: the usual names back.
    for ext in json txt junit.xml; do
        if [ -e "$b/meson-logs/testlog-test_order.sh.$ext" ]; then
            mv -f "$b/meson-logs/testlog-test_order.sh.$ext" "$b/meson-logs/testlog.$ext"
        fi
    done
    # The normal build is done: nothing waits for it any more.
    [ "$mode" = mark ] && touch "$order/ended/ALL"
    return $rc
}

status=0
start=$(date +%s)
if ((quick)); then
    echo "== [2/2] meson test in build: suites unit and integration, tuner compile checks sampled"
    HIDET_TEST_SAMPLE=16 run_tests build --suite unit --suite integration || status=1
else
    echo "== [3/3] meson test in build and build-asan, side by side"
    mkdir -p "$order/ended"
    # HIDET_TEST_CPU_LOG=FILE: this run's CPU seconds per test (test_order.sh); FILE starts empty.
    if [ -n "${HIDET_TEST_CPU_LOG:-}" ]; then
        : > "$HIDET_TEST_CPU_LOG" || exit 1
    fi
    # Suite one-build (meson.build) runs once, in the sanitizer build: .debs from source and the
    # backend's small modules, which even out the two builds' CPU work.
    # HIDET_TEST_ORDER=off: no test waits (the plan's bounds all 0), to measure what the order
    # saves.
    if [ "${HIDET_TEST_ORDER:-}" = off ]; then
        python3 scripts/test_order.py plan build build-asan --no-suite one-build 2>/dev/null |
            awk '{ print $1, 0, $3 }' > "$order/plan"
    elif ! python3 scripts/test_order.py plan build build-asan --no-suite one-build > "$order/plan"; then
        echo "scripts/test.sh: no test order (scripts/test_order.py plan failed): the builds' tests run as they come" >&2
        : > "$order/plan"
    fi
    # Each build's lines carry its name; sed -u passes them on as they come.
    pids=()
    for b in "${builds[@]}"; do
        rm -f "$b/meson-logs/test-status" "$b"/meson-logs/testlog-test_order.sh.*
        args=(wait)
        [ "$b" = build ] && args=(mark --no-suite one-build)
        { run_build "$b" "${args[@]}" 2>&1; echo "$?" > "$b/meson-logs/test-status"; } | sed -u "s/^/[$b] /" &
        pids+=($!)
    done
    wait "${pids[@]}"
    for b in "${builds[@]}"; do
        [ "$(cat "$b/meson-logs/test-status" 2>/dev/null)" = 0 ] || status=1
    done
fi
echo "== tests took $(( $(date +%s) - start )) s"
if [ -e "$torch_log.pid" ]; then
    while [ ! -e "$torch_log.status" ] && kill -0 "$(cat "$torch_log.pid")" 2>/dev/null; do
        sleep 1
    done
    if [ "$(cat "$torch_log.status" 2>/dev/null)" != 0 ]; then
        tail -n 20 "$torch_log" >&2
        echo "scripts/test.sh: could not install PyTorch (log: $torch_log; HIDETD_SETUP_NO_TORCH=1 goes on without it; the backend's tests then skip)" >&2
        status=1
    fi
fi

logs=()
for b in "${builds[@]}"; do
    echo "== skipped in $b:"
    python3 scripts/testlog_report.py skips "$b/meson-logs/testlog.json"
    logs+=("$b/meson-logs/testlog.json")
done
# The slowest tests, as meson timed them: where the next minute of the suite's time would come from.
echo "== slowest tests:"
python3 scripts/testlog_report.py slowest 8 "${logs[@]}"
# HIDET_TEST_CPU_LOG=FILE: CPU seconds per test and build.
if ((!quick)) && [ -n "${HIDET_TEST_CPU_LOG:-}" ] && [ -s "$order/plan" ]; then
    echo "== CPU seconds per test (user + sys; $HIDET_TEST_CPU_LOG):"
    python3 scripts/test_order.py cpu "$order/plan" "$HIDET_TEST_CPU_LOG"
fi
echo "== ${#builds[@]} build(s):"
python3 scripts/testlog_report.py summary "${logs[@]}"
exit $status
