#!/usr/bin/env bash
# Session 21, call c (after bench/pack_gpu.sh, carry [".gpu"]): the matmul_wgmma cases of
# tuner_gpu_gemm_dynamic that calls a and b did not reach (every sampled dynamic candidate at min,
# an odd size and max against the static reference), one process per case, 500 s in all.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
for only in "[n<=8192,4096]" "[n<=1000,4096]x[4096,14336]" "[b<=16,200,128]" "odd K"; do
    lim=$(left 500)
    [ "$lim" -lt 20 ] && { echo "=== gemm dynamic '$only': no time left"; continue; }
    s0=$(date +%s)
    HIDET_VERIFY_ONLY="$only" LD_LIBRARY_PATH=$G/lib timeout $lim $G/tests/tuner_gpu_gemm_dynamic >> $OUT/gemm_dynamic_wgmma.log 2>&1
    echo "=== gemm dynamic '$only' exit=$? $(el $s0)"
done
grep -E "cand:|wrong [1-9]|FAILED" $OUT/gemm_dynamic_wgmma.log
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
