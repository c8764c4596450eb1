#!/usr/bin/env bash
# Session 16, call f (`bash bench/results/2026-11-30-h200-session16/f/gpu_run.sh`, carry [".gpu"],
# with .gpu/kb4 made from f/burst.py as the README says (section f); about 2 minutes): issue 41's decode rows stream 64 MiB
# of e4m3 weights at 0.83-0.87 of the copy bandwidth (call b). Does the producer issuing its TMA
# copies in bursts (waiting for 2 or 4 free stages, then copying 256 or 512 contiguous bytes of
# each weight row at once, f/burst.py on the generated source) or a deeper ring, or the maps'
# 256-byte L2 promotion, move them? kbench of .gpu/kb4 in two processes (the picks of call b at
# M = 1 and 16 and the 12-stage rings, each as NVRTC built it, as nvcc builds it, and with bursts
# of 2 and 4), then bench.py's decode rows for torch._scaled_mm's times beside them.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
for rep in 1 2; do
    timeout 90 python3 bench/kbench.py .gpu/kb4 --json $OUT/kb4_$rep.json > $OUT/kb4_$rep.log 2>&1
    echo "=== kb4 process $rep exit=$?"; filt < $OUT/kb4_$rep.log | tail -19
done
daemon m
s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 200 python3 bench/bench.py --socket "$sock" --suite fp8 --arch sm_90a \
    --match fp8_decode --tune measure --alternate --out "$OUT/fp8dec" > $OUT/fp8dec.log 2>&1
echo "=== fp8 decode rows exit=$? $(el $s0)"; filt < $OUT/fp8dec.log | tail -6
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
tar czf /tmp/all.tgz -C "$OUT" . && mv /tmp/all.tgz "$OUT/"
echo "total $(( $(date +%s) - t0 )) s"
