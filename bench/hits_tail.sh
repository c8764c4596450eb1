#!/usr/bin/env bash
# bench/hits_tail.sh - the cache-hit latency tail, and what moves it: hidetd confined to two cores
# (taskset), hitbench and a background tuning load on two others. Variants:
#   quiet     hits only, access log at info (to a file)
#   nolog     hits only, log level warn (no access log)
#   tuning    hits while a stream of distinct tune:"model" jobs compiles in the background
#   tuning-nolog
# Each variant runs a fresh daemon on a fresh cache: open loop at 20k req/s, then closed loop with
# 64 clients. Prints one hitbench line per run, prefixed with the variant.
#   bench/hits_tail.sh BIN_DIR [SECONDS [VARIANT...]]   (BIN_DIR holds hidetd and hitbench;
#                                                       a variant named twice runs twice)
set -u
bin=$1
secs=${2:-8}
shift 2 2>/dev/null || shift $#
variants=${*:-quiet nolog tuning tuning-nolog}
here=$(cd "$(dirname "$0")/.." && pwd)
req=$here/examples/requests/softmax.json
# Where each part runs; on a machine with fewer than five CPUs nothing is pinned.
pin_daemon="taskset -c 0,1" pin_load="taskset -c 2,3" pin_bg="taskset -c 4"
if [ "$(nproc)" -lt 5 ]; then pin_daemon="" pin_load="" pin_bg=""; fi

# Distinct matmuls, one every 100 ms, wait:false: each is a job that builds and ranks a space and
# compiles one candidate with NVRTC on hidetd's thread pool.
background() {
    python3 - "$1" "$2" <<'PY'
import json, socket, sys, time
sock, until = sys.argv[1], time.time() + float(sys.argv[2])
i = 0
while time.time() < until:
    i += 1
    m = 64 * (i % 512 + 1)
    body = json.dumps({"op": "matmul", "inputs": [{"shape": [m, 1024], "dtype": "f16"},
                       {"shape": [1024, 512 + i], "dtype": "f16"}],
                       "arch": "sm_90", "tune": "model", "wait": False, "priority": "background"})
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(sock)
        s.sendall(("POST /v1/kernels HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                   "Content-Length: %d\r\n\r\n%s" % (len(body), body)).encode())
        while s.recv(65536):
            pass
        s.close()
    except OSError:
        break  # the daemon is gone: the variant is over
    time.sleep(0.1)
PY
}

for variant in $variants; do
    d=$(mktemp -d /tmp/hidetd-tail.XXXXXX)
    level=info
    case $variant in *nolog) level=warn ;; esac
    $pin_daemon "$bin/hidetd" --socket "$d/s.sock" --cache "$d/k.db" --workers none \
        --log-level $level > "$d/hidetd.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do [ -S "$d/s.sock" ] && break; sleep 0.1; done
    curl -s --unix-socket "$d/s.sock" http://localhost/v1/kernels -d @"$req" > /dev/null
    bg=""
    case $variant in tuning*)
        $pin_bg bash -c "$(declare -f background); background '$d/s.sock' $((2 * secs + 4))" &
        bg=$!
        sleep 2 ;;
    esac
    for args in "64 $secs 20000" "64 $secs 0"; do
        # shellcheck disable=SC2086
        echo "$variant: $($pin_load "$bin/hitbench" "$d/s.sock" $args "$req")"
    done
    [ -n "$bg" ] && kill "$bg" 2>/dev/null
    jobs=$(curl -s --unix-socket "$d/s.sock" http://localhost/metrics | grep -E '^hidetd_jobs_done_total' | tr '\n' ' ')
    echo "$variant: $jobs"
    kill -TERM $pid
    wait $pid 2>/dev/null
    # What the daemon said besides the access log (warnings wait until written: worth knowing).
    echo "$variant: log lines by level: $(awk '{print $2}' "$d/hidetd.log" | sort | uniq -c | tr '\n' ' ')"
    grep -vE '^[^ ]+ info  (GET|POST|DELETE|HEAD) ' "$d/hidetd.log" | tail -n 5 | sed "s/^/$variant: | /"
    rm -rf "$d"
done
