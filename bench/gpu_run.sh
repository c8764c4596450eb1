#!/usr/bin/env bash
# bench/gpu_run.sh - what one call on the GPU machine does: GPU tests (template sweep, worker
# fault injection), then hidetd with real workers and the benchmark against the peers.
#   bench/gpu_run.sh [tests|bench|hits|all] [bench.py args...]
#   bench/gpu_run.sh graphs [bench/graphs.py args...]   (launch plans through clients/python)
#   bench/gpu_run.sh calibrate [bench/calibrate.py args...]   (the cost model against measurement)
#   bench/gpu_run.sh multi [tests/gpu/multi_gpu.py args...]   (the pool on several GPUs)
#   bench/gpu_run.sh attn [bench.py args...]   (attention checks; ATTN_BENCH=1: its bench rows)
#   bench/gpu_run.sh models [tests/gpu/models.py args...]   (real models through torch.compile)
#   bench/gpu_run.sh modelbench [bench/models.py args...]  (their latency against Inductor)
#   bench/gpu_run.sh dynamic [bench/dynamic.py args...]  (named dimensions: range kernels against exact ones)
# Logs and results go to $OUT (at most 8 files come back).
set -u
cd "$(dirname "$0")/.."
what=${1:-all}
shift || true
OUT=${OUT:-/tmp/hidetd-out}
mkdir -p "$OUT"
G=$PWD/.gpu
ours() { LD_LIBRARY_PATH="$G/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }
# For daemons started in the background: exported, so that `cmd &` is the daemon itself and $!
# its pid (`ours cmd &` would be a subshell: a SIGTERM to it leaves the daemon running, holding
# this script's stdout open).
ourlib="$G/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export HIDETD_WORKER=$G/bin/hidetd-worker
# SWEEP_ARGS: arguments for gpu_template_sweep (e.g. "--max 12 --jobs 8"); TEST_TIMEOUT per program.
sweep_args=${SWEEP_ARGS:---jobs 8}
test_timeout=${TEST_TIMEOUT:-420}

# Starts hidetd with the real worker on /tmp/hidetd-NAME (socket, cache), its log in
# $OUT/hidetd.log; waits until it serves, saves /v1/status. Sets d (the folder) and pid.
start_daemon() {
    d=/tmp/hidetd-$1
    rm -rf "$d" && mkdir -p "$d"
    LD_LIBRARY_PATH=$ourlib "$G/bin/hidetd" --socket "$d/hidetd.sock" --cache "$d/kernels.db" \
        --workers "$G/bin/hidetd-worker" --log-level info > "$OUT/hidetd.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 200); do
        [ -S "$d/hidetd.sock" ] && curl -sf --unix-socket "$d/hidetd.sock" http://localhost/healthz >/dev/null && break
        sleep 0.1
    done
    curl -s --unix-socket "$d/hidetd.sock" http://localhost/v1/status > "$OUT/status.json"
}

{ nvidia-smi; nvidia-smi -q -d CLOCK | head -40; } > "$OUT/gpu.txt" 2>&1

if [ "$what" = tests ] || [ "$what" = all ]; then
    for t in "$G"/tests/*; do
        [ -x "$t" ] || continue
        case "$t" in */tuner_gpu_*) continue ;; esac  # the tuner's checks: `attn` below
        echo "=== $(basename "$t")"
        start=$(date +%s)
        args=""
        case "$t" in *template_sweep) args=$sweep_args ;; esac
        # shellcheck disable=SC2086
        ours timeout "$test_timeout" "$t" $args
        echo "=== $(basename "$t") exit=$? ($(( $(date +%s) - start )) s)"
    done > "$OUT/gpu_tests.log" 2>&1
    {
        # Planted fault and hang through the real daemon, then the same under the unit's
        # system-call filter (the driver and NVRTC must work with it).
        for wrap in "" "--seccomp $G/bin/seccomp_exec $G/syscalls.list"; do
            echo "=== daemon_faults $wrap"
            # shellcheck disable=SC2086
            timeout 240 python3 tests/gpu/daemon_faults.py "$G/bin/hidetd" "$G/bin/hidetd-worker" \
                --lib "$G/lib" $wrap
            echo "=== daemon_faults exit=$?"
        done
    } >> "$OUT/gpu_tests.log" 2>&1
    grep -E "^=== .* exit=" "$OUT/gpu_tests.log"
    tail -n 30 "$OUT/gpu_tests.log"
fi

if [ "$what" = bench ] || [ "$what" = all ]; then
    start_daemon bench
    PYTHONUNBUFFERED=1 python3 bench/bench.py --socket "$d/hidetd.sock" --out "$OUT" "$@" \
        > "$OUT/bench.log" 2>&1
    echo "bench exit=$?"
    # What each tuning job did (GPUs, final round, best schedule), kept with the results.
    curl -s --unix-socket "$d/hidetd.sock" http://localhost/v1/jobs > "$OUT/jobs.json"
    curl -s --unix-socket "$d/hidetd.sock" http://localhost/metrics | grep -E "^hidetd_(jobs|candidates|worker)" | head -30
    kill -TERM $pid
    wait $pid
    echo "hidetd exit=$?"
    tail -n 40 "$OUT/bench.log"
fi

if [ "$what" = hits ] || [ "$what" = all ]; then
    # Cache hits with hidetd confined to 2 cores and the load generator on two others, so the
    # generator does not take the daemon's CPU (on a 2-core machine it has to share).
    d=/tmp/hidetd-hits
    rm -rf "$d" && mkdir -p "$d"
    LD_LIBRARY_PATH=$ourlib taskset -c 0,1 "$G/bin/hidetd" --socket "$d/hidetd.sock" --cache "$d/kernels.db" \
        --workers none --log-level info > "$d/hidetd.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do [ -S "$d/hidetd.sock" ] && break; sleep 0.1; done
    sleep 0.5
    {
        for args in "64 10" "64 10 20000" "64 10 50000"; do
            # shellcheck disable=SC2086
            taskset -c 2,3 "$G/bin/hitbench" "$d/hidetd.sock" $args
        done
    } > "$OUT/hits.txt" 2>&1
    kill -TERM $pid
    wait $pid
    cat "$OUT/hits.txt"
fi

if [ "$what" = attn ]; then
    # The attention templates: every candidate against each check's fp64 host reference, the
    # verification reference against the host, the template sweep's attention cases through the
    # measurement core; then (ATTN_BENCH=1) the attention rows of bench.py.
    {
        for t in "$G"/tests/tuner_gpu_attn_*; do
            echo "=== $(basename "$t")"
            ours timeout "${TEST_TIMEOUT:-300}" "$t"
            echo "=== $(basename "$t") exit=$?"
        done
        echo "=== tuner_gpu_verify (attention reference)"
        HIDET_VERIFY_ONLY=attention ours timeout 120 "$G/tests/tuner_gpu_verify"
        echo "=== tuner_gpu_verify exit=$?"
        echo "=== gpu_template_sweep attn"
        ours timeout "${TEST_TIMEOUT:-300}" "$G/tests/gpu_template_sweep" --filter attn --max "${SWEEP_MAX:-12}" --jobs 4
        echo "=== gpu_template_sweep exit=$?"
    } > "$OUT/attn_tests.log" 2>&1
    grep -E "^=== .* exit=|FAIL|WRONG|wrong" "$OUT/attn_tests.log" | head -60
    if [ "${ATTN_BENCH:-0}" = 1 ]; then
        start_daemon attn
        PYTHONUNBUFFERED=1 timeout "${BENCH_TIMEOUT:-400}" python3 bench/bench.py --socket "$d/hidetd.sock" \
            --out "$OUT" --suite attention --arch sm_90a --alternate "$@" > "$OUT/bench.log" 2>&1
        echo "bench exit=$?"
        tail -n 40 "$OUT/bench.log"
        kill -TERM $pid
        wait $pid
    fi
fi

if [ "$what" = models ] || [ "$what" = modelbench ]; then
    start_daemon models
    if [ "$what" = models ]; then
        PYTHONUNBUFFERED=1 timeout "${MODELS_TIMEOUT:-540}" python3 tests/gpu/models.py \
            --socket "$d/hidetd.sock" "$@" > "$OUT/models.log" 2>&1
        echo "models exit=$?"
        tail -n 40 "$OUT/models.log"
    else
        PYTHONUNBUFFERED=1 timeout "${MODELS_TIMEOUT:-540}" python3 bench/models.py \
            --socket "$d/hidetd.sock" --out "$OUT" "$@" > "$OUT/modelbench.log" 2>&1
        echo "modelbench exit=$?"
        tail -n 40 "$OUT/modelbench.log"
    fi
    kill -TERM $pid
    wait $pid
fi

if [ "$what" = dynamic ]; then
    start_daemon dynamic
    PYTHONUNBUFFERED=1 timeout "${DYNAMIC_TIMEOUT:-540}" python3 bench/dynamic.py \
        --socket "$d/hidetd.sock" --out "$OUT" "$@" > "$OUT/dynamic.log" 2>&1
    echo "dynamic exit=$?"
    tail -n 60 "$OUT/dynamic.log"
    kill -TERM $pid
    wait $pid
fi

if [ "$what" = multi ]; then
    # The worker pool on every GPU of the machine against one GPU, and a fault on one GPU's
    # worker (tests/gpu/multi_gpu.py; it skips with fewer than two GPUs).
    PYTHONUNBUFFERED=1 timeout "${MULTI_TIMEOUT:-900}" python3 tests/gpu/multi_gpu.py \
        "$G/bin/hidetd" "$G/bin/hidetd-worker" --lib "$G/lib" --out "$OUT/multi_gpu.json" \
        --logs "$OUT" "$@" > "$OUT/multi_gpu.log" 2>&1
    echo "multi_gpu exit=$?"
    tail -n 60 "$OUT/multi_gpu.log"
fi

if [ "$what" = calibrate ]; then
    # The cost model's order against measured times (bench/calibrate.py): many candidates per
    # case, so a cap on the whole call (CALIBRATE_TIMEOUT) keeps what was measured so far.
    start_daemon calibrate
    PYTHONUNBUFFERED=1 timeout "${CALIBRATE_TIMEOUT:-480}" python3 bench/calibrate.py \
        --socket "$d/hidetd.sock" --db "$d/kernels.db" --out "$OUT" "$@" > "$OUT/calibrate.log" 2>&1
    echo "calibrate exit=$?"
    kill -TERM $pid
    wait $pid
    echo "hidetd exit=$?"
    tail -n 30 "$OUT/calibrate.log"
fi

if [ "$what" = graphs ]; then
    # The example graphs through the Python runtime: correctness against PyTorch eager
    # (tests/gpu/graph_examples.py), then the side-by-side benchmark (bench/graphs.py), both
    # against one hidetd with a real GPU worker, so the benchmark's plans are measured.
    start_daemon graphs
    PYTHONUNBUFFERED=1 timeout "${GRAPHS_TEST_TIMEOUT:-150}" python3 tests/gpu/graph_examples.py \
        --socket "$d/hidetd.sock" > "$OUT/graph_examples.log" 2>&1
    echo "graph_examples exit=$?"
    PYTHONUNBUFFERED=1 timeout 150 python3 tests/gpu/embeddings_torch.py --socket "$d/hidetd.sock" \
        --tune none --tune measure >> "$OUT/graph_examples.log" 2>&1
    echo "embeddings_torch exit=$?"
    PYTHONUNBUFFERED=1 timeout "${GRAPHS_BENCH_TIMEOUT:-240}" python3 bench/graphs.py \
        --socket "$d/hidetd.sock" --out "$OUT" "$@" > "$OUT/graphs.log" 2>&1
    echo "graphs exit=$?"
    kill -TERM $pid
    wait $pid
    echo "hidetd exit=$?"
    cat "$OUT/graph_examples.log"
    tail -n 30 "$OUT/graphs.log"
fi
