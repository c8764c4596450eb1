#!/usr/bin/env bash
# scripts/run.sh - sets everything up (scripts/setup.sh) and runs hidetd in the foreground with its
# embedded defaults: socket $XDG_RUNTIME_DIR/hidetd.sock (else ./hidetd.sock), cache
# $XDG_CACHE_HOME/hidetd/kernels.db, TCP off. Extra arguments go to hidetd (see hidetd --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
exec build/daemon/hidetd "$@"
