#!/usr/bin/env bash
# Prepared in session 15 (after next/prep.sh: `bash .gpu/gpu_run_v.sh`, carry [".gpu"]; about 3
# minutes): why do our small weight-streaming kernels' times move by a fifth between processes
# (session 15, calls f and g: swapped 64x56 at [104,4096]x[4096,4096] ran 11.69 us in one process
# and 14.65 in the next, while cuBLAS repeated to 1%)? kbench of the same 27 programs (three
# schedules at M = 100, 104, 112, each with L2 promotion 0, 128 and 256 bytes) in three separate
# processes; then ncu of the swapped 64x56 at 104 (promotion 0) in two more processes, with DRAM
# throughput and the L2's sector reads, to set the run beside the replay's time.
set -u
cd "$(dirname "$0")/.."
. bench/gpu_call.sh
{
for rep in 1 2 3; do
    s0=$(date +%s)
    timeout 100 python3 bench/kbench.py .gpu/kb --alternate --json $OUT/kb_$rep.json > $OUT/kbench_$rep.log 2>&1
    echo "=== kbench process $rep exit=$? $(el $s0)"; filt < $OUT/kbench_$rep.log | tail -28
done
for rep in 1 2; do
    timeout 60 ncu --kernel-name regex:hd_matmul --launch-count 3 \
        --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum \
        python3 bench/kbench.py .gpu/kb --only m104_sw64x56 > $OUT/ncu_$rep.log 2>&1
    echo "=== ncu process $rep exit=$?"; grep -E "gpu__time|dram__|lts__" $OUT/ncu_$rep.log | head -12
done
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
tar czf /tmp/all.tgz -C "$OUT" . && mv /tmp/all.tgz "$OUT/"
echo "total $(( $(date +%s) - t0 )) s"
