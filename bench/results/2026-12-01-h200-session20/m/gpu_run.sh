#!/usr/bin/env bash
# Session 20, call m (after bench/pack_gpu.sh and l/prep.sh, carry [".gpu"]): a named M's tile
# coordinates without the batch division and with 32-bit and constant divisors
# (tuner/gemm/wgmma.c emit_tile_coords):
#  1. kbench --flush --dims 112 of .gpu/kbd (l/prep.sh's programs, rebuilt): the pair for a named
#     n against the one for 112 rows, each checked against the fp32 reference;
#  2. bench/dynamic.py's x4096 row at 7 and 100 (fresh daemon, tune measure).
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
timeout 100 python3 bench/kbench.py .gpu/kbd --alternate --flush --dims 112 --json $OUT/kbd.json > $OUT/kbd.log 2>&1
echo "=== kbench exit=$?"; filt < $OUT/kbd.log | tail -6 | cut -c1-150
daemon m
s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 150 python3 bench/dynamic.py --socket "$sock" --cases gemm4096 \
    --sizes 7,100 --out "$OUT/dyn" --wait-s 130 > $OUT/dyn.log 2>&1
echo "=== gemm4096 exit=$? $(el $s0)"; filt < $OUT/dyn.log | tail -4
trials $OUT/trials.tsv.gz
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
