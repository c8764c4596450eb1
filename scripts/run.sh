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
#
# A running daemon is never touched: while build/hidetd.pid names a live hidetd, a second
# --background start says where that one is (pid, socket, log) and how to stop it, and exits 1.
# A new daemon logs to a file of its own until it is ready; only then does it become
# build/hidetd.log and its pid build/hidetd.pid (a start that fails keeps its log as
# build/hidetd.failed.log).
#
# $HIDETD_BUILD_DIR (default build) is the build directory; HIDETD_RUN_NO_SETUP=1 skips
# scripts/setup.sh and runs what is built there (tests/ops/run_sh_test.sh does).
set -euo pipefail
cd "$(dirname "$0")/.."
background=0
if [ "${1:-}" = --background ]; then
    background=1
    shift
fi
build=${HIDETD_BUILD_DIR:-build}
# Only what running needs: the test-only tools (cuobjdump) are scripts/test.sh's business.
if [ -z "${HIDETD_RUN_NO_SETUP:-}" ]; then
    HIDETD_SETUP_NO_TEST_TOOLS=1 scripts/setup.sh "$build"
fi
if [ "$background" -eq 0 ]; then
    exec "$build/daemon/hidetd" "$@"
fi

log=$build/hidetd.log
pidfile=$build/hidetd.pid
# The daemon a previous --background start left running, if any: its pid file names a live
# process that is a hidetd (a stale file of a daemon long gone is simply replaced).
if [ -s "$pidfile" ]; then
    old=$(head -c 32 "$pidfile" | tr -cd 0-9)
    if [ -n "$old" ] && kill -0 "$old" 2>/dev/null \
            && tr '\0' ' ' < "/proc/$old/cmdline" 2>/dev/null | grep -q hidetd; then
        where=$(grep -m1 -o ' ready: serving on [^;]*' "$log" 2>/dev/null | sed 's/ ready: serving on //')
        echo "run.sh: hidetd is already running (pid $old, serving on ${where:-see $log}, log $log);" \
             "left as it is." >&2
        echo "run.sh: stop it with: kill $old   (or: kill \$(cat $pidfile))" >&2
        exit 1
    fi
fi

newlog=$(mktemp "$build/hidetd.log.XXXXXX")
"$build/daemon/hidetd" "$@" > "$newlog" 2>&1 &
pid=$!
limit=${HIDETD_READY_TIMEOUT:-60}
for ((i = 0; i < limit * 10; i++)); do
    if ready=$(grep -m1 ' ready: ' "$newlog"); then
        # The daemon keeps its open file: renaming it leaves the log where the README says.
        mv -f "$newlog" "$log"
        echo "$pid" > "$pidfile"
        echo "run.sh: hidetd (pid $pid) is ready: ${ready#* ready: }"
        echo "run.sh: log in $log; stop it with: kill \$(cat $pidfile)"
        exit 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
        wait "$pid" && rc=0 || rc=$?
        mv -f "$newlog" "$build/hidetd.failed.log"
        echo "run.sh: hidetd exited (status $rc) before it was ready; the end of" \
             "$build/hidetd.failed.log:" >&2
        tail -n 20 "$build/hidetd.failed.log" >&2
        exit 1
    fi
    sleep 0.1
done
mv -f "$newlog" "$log"
echo "$pid" > "$pidfile"
echo "run.sh: hidetd (pid $pid) was not ready within ${limit}s; it keeps running (stop it with:" \
     "kill $pid); the end of $log:" >&2
tail -n 20 "$log" >&2
exit 1
