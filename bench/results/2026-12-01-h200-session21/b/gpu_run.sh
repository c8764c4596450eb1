#!/usr/bin/env bash
# Session 21, call b (after bench/pack_gpu.sh, carry [".gpu"]): issue 39's rows on the final tree,
# each from a fresh daemon with tune measure (bench/dynamic.py: the GEMM against the kernel tuned
# for each size and cuBLAS; attention against the exact kernel), then the matmul_wgmma cases of
# tuner_gpu_gemm_dynamic that call a's 200 s limit cut off, one process per case.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
for cases in gemm4096 attention; do
    daemon $cases
    s0=$(date +%s)
    PYTHONUNBUFFERED=1 timeout 240 python3 bench/dynamic.py --socket "$sock" --cases $cases --out "$OUT/dyn_$cases" \
        --wait-s 220 > $OUT/dyn_$cases.log 2>&1
    echo "=== dynamic.py $cases exit=$? $(el $s0)"; filt < $OUT/dyn_$cases.log | tail -24
    trials $OUT/trials_$cases.tsv.gz
    kill -TERM $dp; wait $dp
done
for only in "[n<=8192,4096]" "[n<=1000,4096]x[4096,14336]" "[b<=16,200,128]" "odd K"; do
    lim=$(left 570)
    [ "$lim" -lt 20 ] && { echo "=== gemm dynamic '$only': no time left"; continue; }
    s0=$(date +%s)
    HIDET_VERIFY_ONLY="$only" LD_LIBRARY_PATH=$G/lib timeout $lim $G/tests/tuner_gpu_gemm_dynamic >> $OUT/gemm_dynamic_wgmma.log 2>&1
    echo "=== gemm dynamic '$only' exit=$? $(el $s0)"
done
grep -E "cand:" $OUT/gemm_dynamic_wgmma.log
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
