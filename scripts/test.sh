#!/usr/bin/env bash
# scripts/test.sh - sets everything up and runs the whole test suite twice: in the normal build and
# in an AddressSanitizer + UndefinedBehaviorSanitizer build. Tests that need a GPU (suite 'gpu')
# skip themselves with a message on machines without one; each run lists its skipped tests with
# that message. Ends with one line "N passed, N failed, N skipped" over both builds; exits non-zero
# if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."

# Each phase says what it is; ninja shows its progress; after each meson test run the skipped
# tests are listed with the reason they printed (exit status 77 alone says nothing).
echo "== [1/4] build: the normal build (build/)"
scripts/setup.sh build || exit 1
echo "== [2/4] build: the AddressSanitizer + UndefinedBehaviorSanitizer build (build-asan/)"
scripts/setup.sh build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug || exit 1

export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export PATH="$CUDA_HOME/bin:$PWD/.deps/cuobjdump/nvidia/cu13/bin:$PATH"
# NVRTC keeps a few process-lifetime allocations; they are not ours to free.
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

status=0
phase=3
for b in build build-asan; do
    echo "== [$phase/4] meson test in $b"
    meson test -C "$b" --print-errorlogs --num-processes 2 --timeout-multiplier 3 || status=1
    echo "== skipped in $b:"
    python3 scripts/testlog_report.py skips "$b/meson-logs/testlog.json"
    phase=$((phase + 1))
done

echo "== both builds:"
python3 scripts/testlog_report.py summary build/meson-logs/testlog.json build-asan/meson-logs/testlog.json
exit $status
