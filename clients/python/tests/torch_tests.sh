#!/usr/bin/env bash
# clients/python/tests/torch_tests.sh SRC_DIR MODULE... - runs tests of the torch.compile backend
# (test_backend, test_models) with the Python of the PyTorch virtual environment that
# scripts/setup.sh makes (.deps/torch-venv, or $HIDETD_TORCH_VENV). Skips (exit 77) without it.
set -uo pipefail
src=$1
shift
[ $# -gt 0 ] || { echo "usage: $0 SRC_DIR MODULE..." >&2; exit 2; }
venv=${HIDETD_TORCH_VENV:-$src/../../.deps/torch-venv}
# On a new clone scripts/test.sh starts the tests while setup.sh's PyTorch install still runs
# beside them (HIDETD_TORCH_INSTALL: its log; setup.sh writes LOG.pid at the start and LOG.status,
# the exit status, at the end): these tests wait for it, the others do not.
install=${HIDETD_TORCH_INSTALL:-}
if [ -n "$install" ] && [ -e "$install.pid" ]; then
    if [ ! -e "$install.status" ]; then
        echo "waiting for the PyTorch install (log: $install)"
        while [ ! -e "$install.status" ] && kill -0 "$(cat "$install.pid")" 2>/dev/null; do
            sleep 1
        done
    fi
    if [ "$(cat "$install.status" 2>/dev/null)" != 0 ]; then
        tail -n 20 "$install"
        echo "FAIL: the PyTorch install failed (log: $install; HIDETD_SETUP_NO_TORCH=1 goes on without it, and these tests skip)"
        exit 1
    fi
fi
skip="SKIP: no PyTorch environment at $venv (scripts/setup.sh makes it; HIDETD_SETUP_NO_TORCH=1 left it out)"
if [ ! -x "$venv/bin/python" ]; then
    echo "$skip"
    exit 77
fi
cd "$src/tests" || exit 1
# One thread each: the suite's other tests run beside these on a 2-core machine.
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 TORCHINDUCTOR_COMPILE_THREADS=1
# The backend's compile cache starts empty on every run (the tests exercise the lowering; a cache
# left by the last run would answer it), and nothing is written to the user's ~/.cache.
cache=$(mktemp -d "${TMPDIR:-/tmp}/hidetd-backend-cache.XXXXXX") || exit 1
trap 'rm -rf "$cache"' EXIT
export HIDETD_BACKEND_CACHE=$cache
# The environment is checked by importing torch, torchvision and transformers in the process
# that then runs the tests (python -m unittest -v MODULE...): a separate check would import them
# a second time, about 11 CPU-seconds and 18 s on the 2-core machine, per test. (Not exec'd: the
# trap above removes the cache when Python ends.)
"$venv/bin/python" -c '
import sys
try:
    import torch, torchvision, transformers
except Exception as e:
    print(sys.argv[1], "(%s: %s)" % (type(e).__name__, e))
    sys.exit(77)
import unittest
unittest.main(module=None, argv=["python -m unittest", "-v"] + sys.argv[2:])
' "$skip" "$@"
