#!/usr/bin/env bash
# Session 23, call e (bash bench/pack_gpu.sh, then kgen programs into .gpu/k; carry [".gpu"];
# about 9 minutes): call d's ncu showed our pingpong 128x128 FP8 kernel (the best of ours) busy
# 93% of the elapsed cycles where cuBLASLt's is 97%, and each block zeroing its accumulators
# after its turn began. Now: a pingpong block walks tiles gridDim.x apart (the busiest block at
# most one tile more than another; units of two consecutive tiles left two) and zeroes before its
# turn. Checks: every pingpong matmul_wgmma candidate of the sweep (a new case of 544 tiles with
# the SwiGLU operand), the FP8 sample; then kbench of the new pingpong 128x128 beside cuBLASLt,
# and issue 41's row/col rows and issue 40's SwiGLU rows under a whole tune.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
export PATH=/usr/local/cuda/bin:$PATH
{
s0=$(date +%s)
LD_LIBRARY_PATH=$G/lib timeout 300 $G/tests/gpu_template_sweep --template matmul_wgmma --param pingpong=1 --max 1000 > $OUT/sweep_pp.log 2>&1
echo "=== sweep matmul_wgmma pingpong exit=$? $(el $s0)"; grep -vE "^ +[0-9]+ +ok" $OUT/sweep_pp.log | tail -40
s0=$(date +%s)
HIDET_VERIFY_ONLY=fp8 LD_LIBRARY_PATH=$G/lib timeout 150 $G/tests/tuner_gpu_verify > $OUT/verify_fp8.log 2>&1
echo "=== verify fp8 exit=$? $(el $s0)"; grep -E "fp8 .*cand" $OUT/verify_fp8.log | cut -c1-100; tail -1 $OUT/verify_fp8.log
s0=$(date +%s)
timeout 120 python3 bench/kbench.py $G/k --alternate --sustain 200 --json $OUT/kbench.json > $OUT/kbench.log 2>&1
echo "=== kbench exit=$? $(el $s0)"; filt < $OUT/kbench.log | grep -v '^{"name'
daemon f
s0=$(date +%s)
timeout 200 python3 bench/bench.py --socket $sock --arch sm_90a --suite fp8 --only fp8_gemm --match rowcol,8192x14336x4096 \
    --tune measure --alternate --out $OUT/fp8 > $OUT/bench_fp8.log 2>&1
echo "=== bench fp8_gemm tune measure exit=$? $(el $s0)"; filt < $OUT/bench_fp8.log | grep -E "fp8_|case" | tail -7
s0=$(date +%s)
timeout 150 python3 bench/bench.py --socket $sock --arch sm_90a --suite gaps --only gemm_swiglu \
    --tune measure --alternate --out $OUT/swiglu > $OUT/bench_swiglu.log 2>&1
echo "=== bench gemm_swiglu tune measure exit=$? $(el $s0)"; filt < $OUT/bench_swiglu.log | grep -E "gemm_|case" | tail -4
python3 - $OUT <<'PY'
import json, sys
for f in ("fp8", "swiglu"):
    try:
        for r in json.load(open(f"{sys.argv[1]}/{f}/results.json"))["rows"]:
            print(r["shape"], r.get("params"))
    except Exception as e:
        print(f, e)
PY
trials $OUT/trials.tsv.gz
kill $dp
} > "$OUT/gpu_e.log" 2>&1
cat "$OUT/gpu_e.log"
echo "total $(( $(date +%s) - t0 )) s"
cd $OUT && tar czf all.tgz --exclude=all.tgz --exclude=gpu_e.log * && ls | grep -v "^all.tgz$\|^gpu_e.log$" | xargs rm -rf
