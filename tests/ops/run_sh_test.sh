#!/usr/bin/env bash
# tests/ops/run_sh_test.sh - scripts/run.sh --background twice against a scratch build folder:
# the second start must leave the first daemon as it is (its pid file, its log, its socket) and
# say where it is and how to stop it, exiting 1; a pid file of a daemon that is gone is replaced.
#
#   run_sh_test.sh SRC_ROOT BUILD_ROOT
#
# The scratch folder stands for the build folder (HIDETD_BUILD_DIR, its daemon/ linked to the real
# one, HIDETD_RUN_NO_SETUP=1: nothing is built), HOME and XDG_* point into it: nothing outside it
# is written.
set -euo pipefail
src=$(cd "$1" && pwd)
bld=$(cd "$2" && pwd)
if [ ! -x "$bld/daemon/hidetd" ]; then
    echo "SKIP: $bld/daemon/hidetd is not built"
    exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/run_sh_test.XXXXXX")
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$tmp/build" "$tmp/home" "$tmp/run"
ln -s "$bld/daemon" "$tmp/build/daemon"
export HIDETD_BUILD_DIR=$tmp/build HIDETD_RUN_NO_SETUP=1 HOME=$tmp/home XDG_RUNTIME_DIR=$tmp/run \
       XDG_CACHE_HOME=$tmp/home/.cache HIDETD_READY_TIMEOUT=30
unset HIDETD_SOCKET
fail() { echo "FAIL: $*" >&2; exit 1; }

"$src/scripts/run.sh" --background --workers none > "$tmp/out1" 2>&1 || { cat "$tmp/out1"; fail "first start"; }
pid1=$(cat "$tmp/build/hidetd.pid")
pids+=("$pid1")
kill -0 "$pid1" || fail "first daemon not running"
grep -q "is ready: serving on unix:$tmp/run/hidetd.sock" "$tmp/out1" || { cat "$tmp/out1"; fail "ready line"; }
cp "$tmp/build/hidetd.log" "$tmp/log1"

# The second start: refused, and the first daemon untouched.
rc=0
"$src/scripts/run.sh" --background --workers none > "$tmp/out2" 2>&1 || rc=$?
cat "$tmp/out2"
[ "$rc" -eq 1 ] || fail "the second start exited $rc, wanted 1"
grep -q "already running (pid $pid1, serving on unix:$tmp/run/hidetd.sock, log $tmp/build/hidetd.log)" "$tmp/out2" \
    || fail "the second start does not say where the first daemon is"
grep -q "stop it with: kill $pid1" "$tmp/out2" || fail "no way to stop it given"
[ "$(cat "$tmp/build/hidetd.pid")" = "$pid1" ] || fail "the pid file changed"
cmp -s "$tmp/log1" <(head -c "$(stat -c %s "$tmp/log1")" "$tmp/build/hidetd.log") \
    || fail "the first daemon's log was changed"
if tr -d '\n' < "$tmp/build/hidetd.log" | grep -qaP '\x00'; then fail "NUL bytes in the log"; fi
kill -0 "$pid1" || fail "the first daemon died"
curl -sS --fail --unix-socket "$tmp/run/hidetd.sock" http://localhost/healthz > /dev/null \
    || fail "the first daemon does not answer"
ls "$tmp/build" | grep -q '^hidetd\.log\.' && fail "a temporary log was left behind"

# A pid file of a daemon that is gone does not stop a new start.
kill "$pid1"
for _ in $(seq 100); do kill -0 "$pid1" 2>/dev/null || break; sleep 0.1; done
"$src/scripts/run.sh" --background --workers none > "$tmp/out3" 2>&1 || { cat "$tmp/out3"; fail "start after a stale pid file"; }
pid3=$(cat "$tmp/build/hidetd.pid")
pids+=("$pid3")
[ "$pid3" != "$pid1" ] && kill -0 "$pid3" || fail "the third start's pid file"
echo "ok: a second run.sh --background left the first daemon alone and named it"
