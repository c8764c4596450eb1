#!/usr/bin/env bash
# Session 15, call e (copy to .gpu/ with the kgen programs in .gpu/kb; `bash .gpu/gpu_run_e.sh`,
# carry [".gpu"]; about 6 minutes): stream-K over swapped tiles (the C^T = B^T A^T kernels).
#  1. tuner_gpu_gemm_dynamic, HIDET_VERIFY_PARAM=swap=1,stream_k=1: the swapped stream-K
#     candidates of the dynamic cases at their three sizes against the static reference.
#  2. gpu_template_sweep --template matmul_wgmma --param swap=1,stream_k=1: static ones.
#  3. kbench of hand-picked programs at [100,4096]x[4096,4096] and [2100,4096]x[4096,4096]: the
#     exact-size picks of call c (swapped 64x104 and 128x176) against the same tiles with
#     stream-K, and swapped 128x192 with and without it (the tile that covers 2049..2304 in 12
#     rows).
#  4. dynamic.py's x4096 case at 100 and 2100 (ranges 97..112 and 2049..2304, and the exact
#     sizes), tuned with the swapped stream-K candidates in the spaces.
set -u
cd "$(dirname "$0")/.."
. bench/gpu_call.sh
{
s0=$(date +%s)
HIDET_VERIFY_PARAM=swap=1,stream_k=1 LD_LIBRARY_PATH=$G/lib timeout 100 $G/tests/tuner_gpu_gemm_dynamic > $OUT/sk_dyn.log 2>&1
echo "=== gemm_dynamic swap=1,stream_k=1 exit=$? $(el $s0)"
grep -E "cand:|WRONG|error" $OUT/sk_dyn.log | grep -v " 0 cand" | head -40
s0=$(date +%s)
LD_LIBRARY_PATH=$G/lib timeout 90 $G/tests/gpu_template_sweep --template matmul_wgmma --param swap=1,stream_k=1 --max 24 \
    > $OUT/sk_sweep.log 2>&1
echo "=== sweep swap=1,stream_k=1 exit=$? $(el $s0)"
grep -E "wrong|WRONG|failed|total|cand" $OUT/sk_sweep.log | tail -25
s0=$(date +%s)
timeout 100 python3 bench/kbench.py .gpu/kb --alternate > $OUT/kbench.log 2>&1
echo "=== kbench exit=$? $(el $s0)"; filt < $OUT/kbench.log | tail -30
daemon g
s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 170 python3 bench/dynamic.py --socket "$sock" --cases gemm4096 --sizes 100,2100 --any-sizes \
    --out "$OUT/dyn" --wait-s 120 > $OUT/dyn.log 2>&1
echo "=== dynamic exit=$? $(el $s0)"; filt < $OUT/dyn.log | tail -5
curl -s --unix-socket "$sock" http://localhost/v1/jobs > $OUT/jobs.json
trials $OUT/trials.tsv.gz
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
tar czf /tmp/all.tgz -C "$OUT" . && mv /tmp/all.tgz "$OUT/"
echo "total $(( $(date +%s) - t0 )) s"
