#!/usr/bin/env bash
# Prepared in session 14 (copy to .gpu/ beside gpu_run.sh; `bash .gpu/gpu_run_mid.sh`, carry
# [".gpu"]; about 5 minutes): is the tuner's time at a range's middle biased? In calls c, e and f
# it timed 128x192 tiles 10-15% slower at the middle than at the top, where kbench of exact-size
# kernels and the entry at 1500 show none. x14336's ranges 1409..1536 and 2049..2304 are tuned
# and their entries timed by bench/dynamic.py at the middles (1471, 2172) and the tops; the
# trials table keeps what the jobs timed there. Compare each entry's dynamic.py time at the
# middle and the top with its trial's (bench/replay_range.py prints the trials' times).
set -u
cd "$(dirname "$0")/.."
. bench/gpu_call.sh
{
daemon g
s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 280 python3 bench/dynamic.py --socket "$sock" --cases gemm14336 \
    --sizes 1471,1536,2172,2304 --any-sizes --out "$OUT/dyn" --wait-s 150 > $OUT/dyn.log 2>&1
echo "=== middles exit=$? $(el $s0)"; filt < $OUT/dyn.log | tail -5
curl -s --unix-socket "$sock" http://localhost/v1/jobs > $OUT/jobs.json
trials $OUT/trials.tsv.gz
kill -TERM $dp; wait $dp
cp /tmp/hd-g/hidetd.log $OUT/
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
tar czf /tmp/all.tgz -C "$OUT" . && mv /tmp/all.tgz "$OUT/"
echo "total $(( $(date +%s) - t0 )) s"
