#!/usr/bin/env bash
# Session 23, call b (bash bench/pack_gpu.sh, then kgen programs into .gpu/k: the cost model's
# 25 best schedules of FP8 8192x14336x4096 row/col (rc_*) and 12 of it with tensor scales (tn_*),
# 12 of the f16 2048x14336x4096 GEMM bare (mlp_*) and with the SwiGLU epilogue (sw_*); carry
# [".gpu"]; about 4 minutes): call a found both FP8 rows' timing run at the 700 W cap, the SM
# clock at 1150-1500 MHz, where the tuner timed its candidates at 1980. kbench times each program
# and its peer as bench.py does (alternating), then each again after 300 ms of running back to
# back (--sustain): does the power cap rank the tiles differently?
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader -lms 100 > $OUT/smi.csv &
sp=$!
s0=$(date +%s)
timeout 500 python3 bench/kbench.py $G/k --alternate --sustain 300 --json $OUT/kbench.json > $OUT/kbench.log 2>&1
echo "=== kbench exit=$? $(el $s0)"; filt < $OUT/kbench.log | grep -v '^{"name'
kill $sp; gzip -f $OUT/smi.csv
} > "$OUT/gpu_b.log" 2>&1
cat "$OUT/gpu_b.log"
echo "total $(( $(date +%s) - t0 )) s"
