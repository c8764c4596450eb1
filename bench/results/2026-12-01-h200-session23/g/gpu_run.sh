#!/usr/bin/env bash
# Session 23, call g (bash bench/pack_gpu.sh; carry [".gpu"]; about 3 minutes): pingpong's new
# walk over a named M, where the grid is a rule at launch: tuner_gpu_gemm_dynamic's two cases
# with more tiles than two per block at their max (f16 [n<=8192,4096]x[4096,4096] +bias at 1,
# 4097 and 8192; bf16 [n<=1000,4096]x[4096,14336] at 1, 97 and 999), an evenly spread 150 of
# each case's candidates (every template; matmul_wgmma's pingpong ones among them).
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
for c in "[n<=8192,4096]" "[n<=1000,4096]"; do
  s0=$(date +%s)
  HIDET_VERIFY_ONLY="$c" HIDET_VERIFY_MAX=150 LD_LIBRARY_PATH=$G/lib timeout 100 $G/tests/tuner_gpu_gemm_dynamic > $OUT/dyn.log 2>&1
  echo "=== gemm_dynamic $c exit=$? $(el $s0)"; tail -5 $OUT/dyn.log
done
} > "$OUT/gpu_g.log" 2>&1
cat "$OUT/gpu_g.log"
echo "total $(( $(date +%s) - t0 )) s"
