# bench/gpu_call.sh - helpers for one device call's script (bench/results/*/gpu_run.sh), which
# sources this file after `cd` to the repository root on the GPU machine, with the build packed
# into .gpu/ by bench/pack_gpu.sh:
#   daemon NAME   starts hidetd with the real worker on /tmp/hd-NAME; sets sock, db and dp (pid)
#   filt          drops PyTorch's and the benches' warning lines from a stream
#   el T0         "(N s)" since the epoch second T0
#   left LIMIT    seconds left of LIMIT since the script started (t0, set here)
#   trials FILE   writes the daemon's trials table ($db: each timed candidate, a range's middle
#                 under its own key) gzipped to FILE, to replay a job's choice on the CPU machine
# and exports HIDETD_WORKER and OUT (default /tmp/out, created).
G=$PWD/.gpu
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export HIDETD_WORKER=$G/bin/hidetd-worker
t0=$(date +%s)

daemon() {
    local d=/tmp/hd-$1
    rm -rf "$d"
    mkdir -p "$d"
    LD_LIBRARY_PATH=$G/lib "$G/bin/hidetd" --socket "$d/s" --cache "$d/k.db" \
        --workers "$G/bin/hidetd-worker" --log-level warn > "$d/hidetd.log" 2>&1 &
    dp=$!
    sock=$d/s
    db=$d/k.db
    for _ in $(seq 1 200); do
        [ -S "$sock" ] && curl -sf --unix-socket "$sock" http://localhost/healthz > /dev/null && break
        sleep 0.1
    done
}

filt() { grep -v 'Warning\|warn\|return F.scaled\|ExternalStream\|kern.bind\|^{\|^  f()\|fns\['; }
el() { echo "($(( $(date +%s) - $1 )) s)"; }
left() { echo $(( $1 - ($(date +%s) - t0) )); }

trials() {
    python3 - "$db" <<'PY' | gzip > "$1"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
for r in c.execute("SELECT tuning_key, candidate, status, latency_us, max_rel_err, measured_at, schedule_json "
                   "FROM trials ORDER BY tuning_key, candidate"):
    print("\t".join(str(x) for x in r))
PY
}
