#!/usr/bin/env bash
# Prepared in session 16 for the next session (after bench/pack_gpu.sh and next/prep.sh;
# `bash bench/results/2026-11-30-h200-session16/next/gpu_run.sh`, carry [".gpu"]; about 3
# minutes): what gives the swapped 64x56 tile its two speeds - its module load, its buffers or its
# CUDA graph (next/variance.py, six trials of each, in two processes; the 64x104 tile as the
# control). If one of them does, ncu of a fast and a slow instance (the next call) can say why;
# a kernel whose speed is a lottery should not be handed out on its lucky timing. Then kbench of
# .gpu/kbt in two processes: FP8 B [K,N] kernels whose transposing warps take 1 (NVRTC's and
# nvcc's builds), 2 or 4 blocks per step (next/tnsp_multi.py); if 2 or 4 wins, emit_transposer
# should do the same (the err column must stay at the others' level).
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
V=bench/results/2026-11-30-h200-session16/next/variance.py
{
for rep in 1 2; do
    for p in sw64x56 sw64x104; do
        timeout 120 python3 $V .gpu/kbv/$p.json 6 > $OUT/var_${p}_$rep.log 2>&1
        echo "=== $p process $rep exit=$?"; grep -v "^{" $OUT/var_${p}_$rep.log | filt | tail -3
    done
done
for rep in 1 2; do
    timeout 120 python3 bench/kbench.py .gpu/kbt --json $OUT/kbt_$rep.json > $OUT/kbt_$rep.log 2>&1
    echo "=== kbt process $rep exit=$?"; filt < $OUT/kbt_$rep.log | tail -13
done
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
tar czf /tmp/all.tgz -C "$OUT" . && mv /tmp/all.tgz "$OUT/"
echo "total $(( $(date +%s) - t0 )) s"
