#!/usr/bin/env bash
# bench/hits_tail.sh - the cache-hit latency tail, and what moves it: hidetd confined to two cores
# (taskset), hitbench and a background tuning load on two others. Variants:
#   fresh     the first run after start, on a cold machine as far as a user can make it one (below),
#             while a stream of distinct tune:"model" jobs compiles, access log at info
#   quiet     hits only, access log at info (to a file)
#   nolog     hits only, log level warn (no access log)
#   tuning    hits while a stream of distinct tune:"model" jobs compiles in the background
#   tuning-nolog
# Each variant runs a fresh daemon on a fresh cache: open loop at 20k req/s, then closed loop with
# 64 clients. Prints one hitbench line per run, prefixed with the variant, and records every run.
#
# "fresh", precisely: a throwaway daemon stores the hit's kernel in a new cache directory and
# stops; then every file the daemon reads - its binary, its shared libraries (libnvrtc and
# NVRTC's builtins library among them) and the cache file - is dropped from the page cache with
# posix_fadvise(POSIX_FADV_DONTNEED), which needs no privileges but leaves the pages other running
# processes map (libc, and libnvrtc when another hidetd runs); then the measured daemon starts and
# the hits and the compiles begin the moment it answers, with no warm-up run. What this cannot
# reproduce without root: a cold kernel (dentries, inodes, slab), a CPU that was idle (clocks,
# caches), the first-ever start on a machine (GPU driver state). Drop the whole page cache as root
# first (sync; echo 3 > /proc/sys/vm/drop_caches) for a colder start.
#
#   bench/hits_tail.sh BIN_DIR [SECONDS [VARIANT...]]   (BIN_DIR holds hidetd and hitbench;
#                                                       a variant named twice runs twice)
#   HITS_OUT=DIR   where the records go (default hits-tail-YYYYmmdd-HHMMSS in the current
#                  directory): N-VARIANT.txt per run (the host, the binary, hitbench's lines, the
#                  loop lag over the measurement from hidetd_loop_lag_seconds, jobs done, the log's
#                  non-access lines) and summary.txt, one line per hitbench run.
set -u
bin=$1
secs=${2:-8}
shift 2 2>/dev/null || shift $#
variants=${*:-fresh quiet nolog tuning tuning-nolog}
here=$(cd "$(dirname "$0")/.." && pwd)
req=$here/examples/requests/softmax.json
out=${HITS_OUT:-$PWD/hits-tail-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$out"
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

# Drops the files named on stdin from the page cache (where no process maps them).
evict() {
    python3 -c '
import os, sys
for path in sys.stdin.read().split():
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        continue
    try:
        os.fsync(fd)  # dirty pages are not dropped: write them first
    except OSError:
        pass
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
'
}

# The files the daemon reads: its binary, its libraries, NVRTC's builtins (dlopened), the cache.
daemon_files() {
    local libs
    libs=$(ldd "$bin/hidetd" | awk '/=> \//{print $3}')
    echo "$bin/hidetd"
    echo "$libs"
    for l in $libs; do
        case $l in */libnvrtc.so*) ls "$(dirname "$l")"/libnvrtc-builtins*.so* 2>/dev/null ;; esac
    done
    ls "$1"/k.db* 2>/dev/null
}

metrics() { curl -s --unix-socket "$1/s.sock" http://localhost/metrics; }

# The loop lag between two /metrics texts: samples, and the bucket each quantile falls in.
lag_between() {
    python3 - "$1" "$2" <<'PY'
import re, sys
def buckets(path):
    b = {}
    for line in open(path):
        m = re.match(r'hidetd_loop_lag_seconds_bucket\{le="([^"]+)"\} (\S+)', line)
        if m:
            b[m.group(1)] = float(m.group(2))
    return b
a, z = buckets(sys.argv[1]), buckets(sys.argv[2])
if not z:
    print("no hidetd_loop_lag_seconds in /metrics")
    sys.exit()
les = sorted(z, key=lambda k: float("inf") if k == "+Inf" else float(k))
d = [(le, z[le] - a.get(le, 0)) for le in les]
n = d[-1][1]
def q(p):
    for le, c in d:
        if c >= p * n:
            return le
parts = ", ".join("p%s <= %s s" % (s, q(p)) for s, p in (("50", .5), ("99", .99), ("99.9", .999)))
over = [(le, n - c) for le, c in d if le in ("0.0005", "0.002")]
print("loop lag: %d samples; %s; above 500 us: %d, above 2 ms: %d"
      % (n, parts, over[0][1] if over else -1, over[1][1] if len(over) > 1 else -1))
PY
}

run=0
for variant in $variants; do
    run=$((run + 1))
    rec="$out/$run-$variant.txt"
    d=$(mktemp -d /tmp/hidetd-tail.XXXXXX)
    level=info
    case $variant in *nolog) level=warn ;; esac
    {
        echo "# $variant, run $run: $(date -u +%FT%TZ) on $(uname -n) ($(nproc) CPUs, $(uname -r));"
        echo "# $bin/hidetd $(sha256sum "$bin/hidetd" | cut -c1-12); load average $(cut -d' ' -f1-3 /proc/loadavg)"
    } > "$rec"
    if [ "$variant" = fresh ]; then
        # The hit's kernel from a throwaway daemon, then the files it reads out of the page cache.
        $pin_daemon "$bin/hidetd" --socket "$d/s.sock" --cache "$d/k.db" --workers none \
            --log-level warn > "$d/prepare.log" 2>&1 &
        pid=$!
        for _ in $(seq 1 300); do [ -S "$d/s.sock" ] && break; sleep 0.1; done
        curl -s --unix-socket "$d/s.sock" http://localhost/v1/kernels -d @"$req" > /dev/null
        kill -TERM $pid
        wait $pid 2>/dev/null
        daemon_files "$d" | evict
        echo "# page cache dropped (POSIX_FADV_DONTNEED) for: $(daemon_files "$d" | tr '\n' ' ')" >> "$rec"
    fi
    t0=$(date +%s.%N)
    $pin_daemon "$bin/hidetd" --socket "$d/s.sock" --cache "$d/k.db" --workers none \
        --log-level $level > "$d/hidetd.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 300); do [ -S "$d/s.sock" ] && break; sleep 0.1; done
    echo "# socket after $(awk "BEGIN { printf \"%.2f\", $(date +%s.%N) - $t0 }") s" >> "$rec"
    [ "$variant" = fresh ] || curl -s --unix-socket "$d/s.sock" http://localhost/v1/kernels -d @"$req" > /dev/null
    bg=""
    case $variant in tuning* | fresh)
        $pin_bg bash -c "$(declare -f background); background '$d/s.sock' $((2 * secs + 4))" &
        bg=$!
        [ "$variant" = fresh ] || sleep 2 ;;
    esac
    metrics "$d" > "$d/m0"
    for args in "64 $secs 20000" "64 $secs 0"; do
        # shellcheck disable=SC2086
        line="$variant: $($pin_load "$bin/hitbench" "$d/s.sock" $args "$req")"
        echo "$line"
        echo "$line" >> "$rec"
        echo "$run $line" >> "$out/summary.txt"
    done
    metrics "$d" > "$d/m1"
    [ -n "$bg" ] && kill "$bg" 2>/dev/null
    lag="$variant: $(lag_between "$d/m0" "$d/m1")"
    echo "$lag"
    echo "$lag" >> "$rec"
    echo "$run $lag" >> "$out/summary.txt"
    jobs=$(grep -E '^hidetd_(jobs_done_total|candidates_compiled_total)' "$d/m1" | tr '\n' ' ')
    echo "$variant: $jobs" | tee -a "$rec"
    kill -TERM $pid
    wait $pid 2>/dev/null
    # What the daemon said besides the access log (warnings wait until written: worth knowing).
    echo "$variant: log lines by level: $(awk '{print $2}' "$d/hidetd.log" | sort | uniq -c | tr '\n' ' ')" | tee -a "$rec"
    grep -vE '^[^ ]+ info  (GET|POST|DELETE|HEAD) ' "$d/hidetd.log" | tail -n 8 | sed "s/^/$variant: | /" | tee -a "$rec"
    rm -rf "$d"
done
echo "records in $out"
