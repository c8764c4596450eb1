#!/usr/bin/env bash
# Prepared in session 13 for the next session's first GPU call (bench/pack_gpu.sh, then
# next/prep.sh, then `bash .gpu/gpu_run.sh` with carry [".gpu"]):
#  - gpu_sched first: measured range jobs now time every candidate a second time, unchecked, at
#    the range's middle (sizes, grids and tensor maps bound there); never run on a GPU yet. Its
#    two ranged cases print "middle n=701: N trials, 0 ok at the top without a passing middle, 0
#    failed at the middle" and the run ends with "ok";
#  - why a swapped tile row mostly past M cost about 2.9 full rows (session 13 call f): since then
#    the last tile row of a swapped kernel is moved back to end at M (emit_swapped_row0), so
#    kbench of 128x96 c2 (staged and register stores) at M = 700 and 768 should now show both
#    alike (call f: 169.5 against 138.2 us); ncu of the staged one at both sizes says why if not;
#  - BERT-base through the backend at the 20 sizes (tune model; the cost model changed in session
#    13), its rows kept in the log this time;
#  - issue 39's [n,4096]x[4096,14336] row at dynamic.py's 16 sizes (tune measure).
set -u
cd "$(dirname "$0")/.."
. bench/gpu_call.sh
{
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
s0=$(date +%s)
HIDETD_WORKER=$G/bin/hidetd-worker LD_LIBRARY_PATH=$G/lib timeout 150 $G/tests/gpu_sched > $OUT/gpu_sched.log 2>&1
echo "=== gpu_sched exit=$? $(el $s0)"; grep -E "middle|^ok|FAIL|failed" $OUT/gpu_sched.log | head -8
s0=$(date +%s)
timeout 60 python3 bench/kbench.py .gpu/kb --alternate > $OUT/kbench.log 2>&1
echo "=== kbench exit=$? $(el $s0)"; filt < $OUT/kbench.log | tail -7
for m in 700 768; do
    timeout 60 ncu --kernel-name regex:hd_matmul --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section WarpStateStats --section SchedulerStats \
        python3 bench/kbench.py .gpu/kb --only m${m}_sw128x96c2 > $OUT/ncu_m$m.log 2>&1
    echo "=== ncu m$m exit=$?"
    grep -E "Duration|DRAM Throughput|L2 Hit|Memory Throughput|Stall|No Eligible" $OUT/ncu_m$m.log | head -12
done
daemon m
l=$(left 400); echo "=== bert dynamic, 20 sizes (limit $l s)"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/models_dynamic.py --socket "$sock" --out "$OUT/dyn" \
    --sizes 20 --settle-s 8 --iters 20 > $OUT/bert.log 2>&1
echo "=== bert dynamic exit=$? $(el $s0)"; grep -E "^\{|rows done|compilation" $OUT/bert.log | tail -24
l=$(left 580); s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $l python3 bench/dynamic.py --socket "$sock" --cases gemm14336 \
    --out "$OUT/dyn_gemm14336" --wait-s 150 > $OUT/dyn_gemm14336.log 2>&1
echo "=== gemm14336 16 sizes exit=$? $(el $s0)"; filt < $OUT/dyn_gemm14336.log | tail -18
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
# Every result in one file: the device tool brings back a limited number of files.
tar czf /tmp/all.tgz -C "$OUT" . && mv /tmp/all.tgz "$OUT/"
echo "total $(( $(date +%s) - t0 )) s"
