#!/usr/bin/env bash
# Session 15, call b (copy to .gpu/; `bash .gpu/gpu_run.sh`, carry [".gpu"]; about 3 minutes):
# stream-K in dynamic matmuls (the shared k tiles cut from the tile count at launch, every tile
# whole where there is nothing to share). tuner_gpu_gemm_dynamic with only the stream-K
# candidates (and each case's default), every one at its case's three sizes against the static
# reference; then tuner_gpu_verify's stream-K candidates (static ops: the same kernels' code,
# now with the division computed in the kernel from the literal tile count).
set -u
cd "$(dirname "$0")/.."
. bench/gpu_call.sh
{
s0=$(date +%s)
HIDET_VERIFY_PARAM=stream_k=1 LD_LIBRARY_PATH=$G/lib timeout 240 $G/tests/tuner_gpu_gemm_dynamic > $OUT/sk_dyn.log 2>&1
echo "=== gemm_dynamic stream_k=1 exit=$? $(el $s0)"
grep -E "cand:|WRONG|error" $OUT/sk_dyn.log | head -60
s0=$(date +%s)
HIDET_VERIFY_PARAM=stream_k=1 LD_LIBRARY_PATH=$G/lib timeout 150 $G/tests/tuner_gpu_verify > $OUT/sk_static.log 2>&1
echo "=== verify stream_k=1 exit=$? $(el $s0)"
tail -25 $OUT/sk_static.log
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
