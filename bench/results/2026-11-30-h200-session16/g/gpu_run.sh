#!/usr/bin/env bash
# Session 16, call g (after bench/pack_gpu.sh; `bash bench/results/2026-11-30-h200-session16/g/gpu_run.sh`,
# carry [".gpu"]; about 7 minutes): issue 39's GEMM rows at the sizes whose ranges sixteenths
# from 2048 change (x4096 at 2100, 3000, 4500, 6000, 8000; x14336 at 2100, 3000, 4500), fresh
# daemon, tune measure, with the jobs and trials for replays.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
daemon g
s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 200 python3 bench/dynamic.py --socket "$sock" --cases gemm4096 --sizes 2100,3000,4500,6000,8000 \
    --out "$OUT/dyn4096" --wait-s 180 > $OUT/dyn4096.log 2>&1
echo "=== gemm4096 exit=$? $(el $s0)"; filt < $OUT/dyn4096.log | tail -6
s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout $(left 540) python3 bench/dynamic.py --socket "$sock" --cases gemm14336 --sizes 2100,3000,4500 \
    --out "$OUT/dyn14336" --wait-s 300 > $OUT/dyn14336.log 2>&1
echo "=== gemm14336 exit=$? $(el $s0)"; filt < $OUT/dyn14336.log | tail -4
curl -s --unix-socket "$sock" http://localhost/v1/jobs > $OUT/jobs.json
trials $OUT/trials.tsv.gz
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
tar czf /tmp/all.tgz -C "$OUT" . && mv /tmp/all.tgz "$OUT/"
echo "total $(( $(date +%s) - t0 )) s"
