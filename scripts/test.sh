#!/usr/bin/env bash
# scripts/test.sh - sets everything up and runs the whole test suite twice: in the normal build and
# in an AddressSanitizer + UndefinedBehaviorSanitizer build. Tests that need a GPU (suite 'gpu')
# skip themselves with a message on machines without one. Ends with one line
# "N passed, N failed, N skipped" over both builds; exits non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh build || exit 1
scripts/setup.sh build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug || exit 1

export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export PATH="$CUDA_HOME/bin:$PWD/.deps/cuobjdump/nvidia/cu13/bin:$PATH"
# NVRTC keeps a few process-lifetime allocations; they are not ours to free.
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

status=0
for b in build build-asan; do
    echo "== meson test in $b"
    meson test -C "$b" --print-errorlogs --num-processes 2 --timeout-multiplier 3 || status=1
done

python3 - build/meson-logs/testlog.json build-asan/meson-logs/testlog.json <<'PY'
import json, sys
passed = failed = skipped = 0
for path in sys.argv[1:]:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        failed += 1
        continue
    for line in lines:
        r = json.loads(line)["result"]
        if r in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif r == "SKIP":
            skipped += 1
        else:
            failed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
PY
exit $status
