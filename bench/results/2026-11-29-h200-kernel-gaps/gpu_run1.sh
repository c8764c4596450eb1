#!/usr/bin/env bash
# Session 8 GPU call 1: issue 40's SwiGLU-gate and transposed-layout rows measured (tune
# measure, alternating with the peers), the bare GEMMs beside them, cuBLASLt's epilogue costs at
# short K, and ncu of the fused and bare kernels and of trans_a.
set -u
cd "$(dirname "$0")/.."
G=$PWD/.gpu
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export HIDETD_WORKER=$G/bin/hidetd-worker
daemon() {  # daemon NAME -> sets sock, dp
    local d=/tmp/hd-$1; rm -rf "$d"; mkdir -p "$d"
    LD_LIBRARY_PATH=$G/lib "$G/bin/hidetd" --socket "$d/s" --cache "$d/k.db" \
        --workers "$G/bin/hidetd-worker" --log-level warn > "$d/hidetd.log" 2>&1 &
    dp=$!; sock=$d/s
    for _ in $(seq 1 200); do [ -S "$sock" ] && curl -sf --unix-socket "$sock" http://localhost/healthz >/dev/null && break; sleep 0.1; done
}
t0=$(date +%s)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
daemon gaps
echo "=== gaps suite, tune measure"
timeout 300 python3 bench/bench.py --socket "$sock" --out "$OUT" --suite gaps --arch sm_90a --tune measure \
    --alternate 2>&1 | grep -v '^{' | tail -30
echo "=== cuBLASLt epilogue costs ($(( $(date +%s) - t0 )) s)"
timeout 60 python3 bench/peer_epilogue.py --shapes 4096x3072x768,4096x4096x1024,2048x14336x4096 --dtypes f16 2>&1 | tail -12
echo "=== ncu ($(( $(date +%s) - t0 )) s)"
for m in "gemm_swiglu 4096x11008x4096" "gemm_mlp 4096x11008x4096" "gemm_trans_a 2048x4096x11008"; do
    left=$(( 560 - ($(date +%s) - t0) ))
    [ $left -gt 40 ] || { echo "no time left for $m"; break; }
    echo "=== ncu: $m" | tee -a "$OUT/ncu_gaps.log"
    timeout $left ncu --kernel-name regex:hd_matmul --launch-count 1 \
        --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats \
        --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section LaunchStats \
        python3 bench/bench.py --socket "$sock" --out /tmp/ncu-bench --suite gaps --arch sm_90a --tune measure \
        --match "$m" 2>&1 | grep -v "^==PROF== Profiling\|^\s*$" >> "$OUT/ncu_gaps.log"
    echo "exit ${PIPESTATUS[0]}"
done
kill -TERM $dp; wait $dp
grep -E "^===|Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L1/TEX Hit|L2 Hit|Achieved Occupancy|Eligible Warps|No Eligible|Registers Per|Block Size|Grid Size|Dynamic Shared|hd_matmul|Stall|Issue Slots" "$OUT/ncu_gaps.log" | head -150
echo "total $(( $(date +%s) - t0 )) s"
