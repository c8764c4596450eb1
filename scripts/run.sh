#!/usr/bin/env bash
# scripts/run.sh - sets everything up (scripts/setup.sh) and runs hidetd with its embedded
# defaults: socket $HIDETD_SOCKET, else $XDG_RUNTIME_DIR/hidetd.sock, else
# ~/.cache/hidetd/hidetd.sock (where hidetctl and the client libraries look without options),
# cache $XDG_CACHE_HOME/hidetd/kernels.db, TCP off. Extra arguments go to hidetd (hidetd --help).
#
#   scripts/run.sh [--background] [HIDETD_ARGS...]
#
# In the foreground hidetd runs until Ctrl-C. With --background this script returns only once
# hidetd serves (its "ready" log line, which names the socket), so a command pasted after it finds
# the daemon; hidetd's log goes to build/hidetd.log and its pid to build/hidetd.pid. It fails with
# the log's tail if hidetd exits first or is not ready within $HIDETD_READY_TIMEOUT seconds (60).
set -euo pipefail
cd "$(dirname "$0")/.."
background=0
if [ "${1:-}" = --background ]; then
    background=1
    shift
fi
# Only what running needs: the test-only tools (cuobjdump) are scripts/test.sh's business.
HIDETD_SETUP_NO_TEST_TOOLS=1 scripts/setup.sh build
if [ "$background" -eq 0 ]; then
    exec build/daemon/hidetd "$@"
fi

log=build/hidetd.log
build/daemon/hidetd "$@" > "$log" 2>&1 &
pid=$!
echo "$pid" > build/hidetd.pid
limit=${HIDETD_READY_TIMEOUT:-60}
for ((i = 0; i < limit * 10; i++)); do
    if ready=$(grep -m1 ' ready: ' "$log"); then
        echo "run.sh: hidetd (pid $pid) is ready: ${ready#* ready: }"
        echo "run.sh: log in $log; stop it with: kill \$(cat build/hidetd.pid)"
        exit 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
        wait "$pid" && rc=0 || rc=$?
        echo "run.sh: hidetd exited (status $rc) before it was ready; the end of $log:" >&2
        tail -n 20 "$log" >&2
        exit 1
    fi
    sleep 0.1
done
echo "run.sh: hidetd (pid $pid) was not ready within ${limit}s; it keeps running; the end of $log:" >&2
tail -n 20 "$log" >&2
exit 1
