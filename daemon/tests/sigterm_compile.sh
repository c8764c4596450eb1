#!/bin/sh
# daemon/tests/sigterm_compile.sh HIDETD - SIGTERM while NVRTC compiles on the thread pool must
# still drain and stop cleanly: exit 0, "stopped" in the log, the socket file removed.
# (NVRTC installs SIGINT/SIGTERM handlers that exit(0) during a compile; the daemon blocks those
# signals in every thread and reads them from a signalfd.) Whether a compile is in flight at the
# moment of the signal varies; the checks hold either way, so the test never depends on timing.
set -u
BIN=$1
DIR=$(mktemp -d /tmp/hidetd-sig-XXXXXX)
trap 'rm -rf "$DIR"' EXIT
"$BIN" --socket "$DIR/s.sock" --cache "$DIR/c.db" --workers none --log-level debug >"$DIR/log" 2>&1 &
PID=$!
i=0
until curl -s --unix-socket "$DIR/s.sock" http://localhost/healthz >/dev/null 2>&1; do
    i=$((i + 1))
    if [ $i -gt 400 ]; then echo "hidetd did not start"; cat "$DIR/log"; kill -9 $PID; exit 1; fi
    sleep 0.05
done
for m in 96 160 224 288; do
    curl -s --unix-socket "$DIR/s.sock" http://localhost/v1/kernels -o /dev/null -d \
      "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[$m,256],\"dtype\":\"f16\"},{\"shape\":[256,512],\"dtype\":\"f16\"}],\"tune\":\"model\",\"wait\":false}"
done
kill -TERM $PID
wait $PID
st=$?
fail=0
if [ $st -ne 0 ]; then echo "exit status $st (want 0)"; fail=1; fi
if ! grep -q "shutting down" "$DIR/log"; then echo "no drain logged"; fail=1; fi
if ! grep -q "stopped" "$DIR/log"; then echo "no 'stopped' in the log"; fail=1; fi
if [ -e "$DIR/s.sock" ]; then echo "socket file left behind"; fail=1; fi
if grep -q -e "Sanitizer" -e "runtime error:" "$DIR/log"; then echo "sanitizer report"; fail=1; fi
if [ $fail -ne 0 ]; then cat "$DIR/log"; exit 1; fi
echo "sigterm during compile: drained and stopped"
