#!/usr/bin/env bash
# Prepared in session 20 for the next session (after bench/pack_gpu.sh, carry [".gpu"]; about 8
# minutes): the GPU sweeps session 20's last changes did not get (issue 39 waits on them):
#  1. tuner_gpu_attn_wgmma's causal cases: every candidate against fp64. Fixed sizes deal their
#     items by a table (call j ran it); the snake for named sizes changed after the device time
#     and ran only on the CPU emulator;
#  2. tuner_gpu_verify_dyn: every dynamic op's candidates at min, an odd size and max against the
#     static reference (matmul_wgmma's cheaper tile coordinates over a named M; attention_wgmma's
#     snake over named B and S);
#  3. tuner_gpu_gemm_dynamic: every sampled dynamic matmul candidate at min, an odd size and max.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
s0=$(date +%s)
AW_ONLY=causal LD_LIBRARY_PATH=$G/lib timeout 150 $G/tests/tuner_gpu_attn_wgmma > $OUT/attn_wgmma_causal.log 2>&1
echo "=== tuner_gpu_attn_wgmma causal exit=$? $(el $s0)"; grep -E "candidates|WRONG|error|correct" $OUT/attn_wgmma_causal.log | head -12
s0=$(date +%s)
LD_LIBRARY_PATH=$G/lib timeout 170 $G/tests/tuner_gpu_verify_dyn > $OUT/verify_dyn.log 2>&1
echo "=== verify_dyn exit=$? $(el $s0)"; grep -E "wrong|WRONG|failed|bad [1-9]" $OUT/verify_dyn.log | head -12; tail -2 $OUT/verify_dyn.log
s0=$(date +%s)
LD_LIBRARY_PATH=$G/lib timeout 200 $G/tests/tuner_gpu_gemm_dynamic > $OUT/gemm_dynamic.log 2>&1
echo "=== gemm dynamic exit=$? $(el $s0)"; grep -E "wrong|WRONG|failed" $OUT/gemm_dynamic.log | head -12; tail -2 $OUT/gemm_dynamic.log
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
