#!/usr/bin/env bash
# Session 13, call c: (1) the swapped matmul_wgmma candidates of the dynamic matmul cases again,
# after the fix of the launch that call b's run refused ("invalid argument": 49152 bytes of
# dynamic shared memory beside the static barriers, tuner__dynamic_shared); (2) BERT-like masked
# attention at n = 17 and 77 with --profile: the kernels' own GPU time beside the replays', for
# the entry's 1.17x at n = 17; (3) ncu of the FP8 decode row at M = 1 (issue 41: 0.84 of the
# copy bandwidth), what limits it.
set -u
cd "$(dirname "$0")/.."   # run from .gpu/ (copied there after bench/pack_gpu.sh)
. bench/gpu_call.sh
{
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
s0=$(date +%s)
HIDET_VERIFY_PARAM=swap=1 LD_LIBRARY_PATH=$G/lib timeout 140 $G/tests/tuner_gpu_gemm_dynamic > $OUT/dyn_swap.log 2>&1
echo "=== gemm_dynamic swap=1 exit=$? $(el $s0)"; grep -E "wrong [1-9]|failed [1-9]|invalid|error" $OUT/dyn_swap.log | head; grep -c "cand:" $OUT/dyn_swap.log
daemon c
s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 130 python3 bench/dynamic.py --socket "$sock" --cases bert --sizes 17,77 --profile \
    --arch sm_90a --tune measure --out "$OUT/attn" > $OUT/attn.log 2>&1
echo "=== attention bert 17,77 --profile exit=$? $(el $s0)"; filt < $OUT/attn.log | tail -6
python3 - "$OUT/attn/dynamic.json" <<'PY' 2>&1
import json, sys
for r in json.load(open(sys.argv[1])):
    print(r.get("n"), r.get("entry_us"), r.get("static_us"), r.get("entry_params"), r.get("static_params"))
    for k in ("entry_kernels", "static_kernels"):
        print("  ", k, r.get(k))
PY
l=$(left 330); s0=$(date +%s)
timeout $l ncu --kernel-name regex:hd_matmul --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section LaunchStats \
    python3 bench/bench.py --socket "$sock" --out /tmp/ncu-bench --suite fp8 --arch sm_90a --tune measure \
    --match "fp8_decode 1x8192x8192" > $OUT/ncu_decode.log 2>&1
echo "=== ncu fp8_decode M=1 exit=$? $(el $s0)"
grep -E "hd_matmul|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Eligible Warps|No Eligible|Registers Per|Block Size|Grid Size|Dynamic Shared|Stall|L2 Hit|Waves" $OUT/ncu_decode.log | head -40
kill -TERM $dp; wait $dp
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
