#!/bin/sh
# clients/python/tests/pip_install.sh SRC - installs the Python package from a copy of SRC (as a
# fresh clone has it) with pip into a new virtual environment, then runs the package's tests
# against the installed copy. Exits 77 (skipped) only when venv itself is unavailable.
set -eu
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! python3 -m venv --system-site-packages "$tmp/venv" >"$tmp/venv.log" 2>&1; then
    echo "python3 -m venv is unavailable here: skipped ($(tail -n 1 "$tmp/venv.log"))"
    exit 77
fi
mkdir "$tmp/src"
# Only what git would check out: no build/ or *.egg-info of an earlier in-tree install.
(cd "$src" && tar cf - --exclude=build --exclude='*.egg-info' --exclude=__pycache__ .) | (cd "$tmp/src" && tar xf -)
"$tmp/venv/bin/python" -m pip install --no-cache-dir -q "$tmp/src"
cd "$tmp"
"$tmp/venv/bin/python" -c 'import hidetd, sys; print("installed", hidetd.__version__, "at", hidetd.__file__)'
# The tests import the installed package (support.py checks that it is not the source tree's).
HIDETD_EXAMPLES=$(cd "$src/../../examples/graphs" && pwd) HIDETD_TEST_INSTALLED=1 "$tmp/venv/bin/python" -m unittest discover -s "$tmp/src/tests" -t "$tmp/src/tests"
