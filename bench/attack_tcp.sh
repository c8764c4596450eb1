#!/usr/bin/env bash
# bench/attack_tcp.sh - the full-size slow-connection attack of issue 35, item 5: 3,000 slow,
# tokenless TCP connections from 127.0.0.2, .3 and .4 (each sends a partial request, then a byte
# every 0.5 s, and connects again whenever hidetd closes it) while a token holder sends requests,
# each on a fresh connection from 127.0.0.1. hidetd runs with its default limits (--workers
# none). Prints the figures as JSON and exits 0 when >= 99% of the token holder's requests were
# served.
#
#   bench/attack_tcp.sh [BUILD_DIR [OUT.json [CONNS [REQUESTS [PROCS]]]]]
#                                          (defaults: build, -, 3000, 1000, 1 attacker process)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:--}
conns=${3:-3000}
requests=${4:-1000}
procs=${5:-1}
# The attacker's sockets and hidetd's together need more than the usual 1024 descriptors.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $((conns + 512)) ]; then
    echo "attack_tcp: ulimit -n $(ulimit -n) is below $((conns + 512)); raise the hard limit" >&2
    exit 1
fi
args=("$PWD/$build/daemon/hidetd" bench --conns "$conns" --requests "$requests" --procs "$procs")
[ "$out" = - ] || args+=(--out "$out")
exec python3 tests/integration/attack_tcp.py "${args[@]}"
