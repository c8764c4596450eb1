#!/usr/bin/env bash
# scripts/run.sh - sets everything up (scripts/setup.sh) and runs hidetd in the foreground with its
# embedded defaults: socket $HIDETD_SOCKET, else $XDG_RUNTIME_DIR/hidetd.sock, else
# ~/.cache/hidetd/hidetd.sock (where hidetctl and the client libraries look without options),
# cache $XDG_CACHE_HOME/hidetd/kernels.db, TCP off. Extra arguments go to hidetd (hidetd --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
exec build/daemon/hidetd "$@"
