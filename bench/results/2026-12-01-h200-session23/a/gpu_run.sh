#!/usr/bin/env bash
# Session 23, call a (bash bench/pack_gpu.sh, carry [".gpu"]; about 6 minutes): session 22's
# next/gpu_run.sh (gpu_worker_selftest, one GEMM row under measure: the moved comparison's
# row_len 0 path; read_bw's 64 MiB rows beside the FP8 decode rows), then for issue 41: the
# power limit, cuBLASLt's kernels for the FP8 rows (peer_kernels.py), and the 8192x14336x4096
# rows both ways with the SM clock and power sampled every 100 ms.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
H=bench/results/2026-12-01-h200-session23/a
{
nvidia-smi -q -d POWER,CLOCK | grep -E "Power Limit|Power Draw|SM  |Max Clocks|Clocks Event|Power Cap|Thermal" | head -30
bash bench/results/2026-12-01-h200-session22/next/gpu_run.sh 2>&1 | grep -v "^total"
cp $OUT/gpu.log $OUT/gpu22.log 2>/dev/null
trials $OUT/trials_decode.tsv.gz 2>/dev/null || true
s0=$(date +%s)
timeout 120 python3 $H/peer_kernels.py > $OUT/peer_kernels.log 2>&1
echo "=== peer kernels exit=$? $(el $s0)"; filt < $OUT/peer_kernels.log
daemon g
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader -lms 100 > $OUT/smi.csv &
sp=$!
s0=$(date +%s)
timeout 300 python3 bench/bench.py --socket $sock --arch sm_90a --suite fp8 --only fp8_gemm --match 8192x14336 \
    --tune measure --alternate --out $OUT/fp8g > $OUT/bench_fp8_gemm.log 2>&1
echo "=== bench fp8_gemm 8192x14336x4096 tune measure exit=$? $(el $s0)"; filt < $OUT/bench_fp8_gemm.log | grep -E "fp8_|case" | tail -3
kill $sp; kill $dp
trials $OUT/trials_fp8g.tsv.gz
python3 - $OUT/smi.csv <<'PY'
import sys
rows = [l.split(", ") for l in open(sys.argv[1]) if l.count(",") >= 4]
busy = [r for r in rows if float(r[2].split()[0]) > 300]
if busy:
    ck = sorted(int(r[1].split()[0]) for r in busy); pw = sorted(float(r[2].split()[0]) for r in busy)
    print(f"smi: {len(busy)} samples over 300 W: SM clock median {ck[len(ck)//2]} MHz (min {ck[0]}), power median {pw[len(pw)//2]:.0f} W (max {pw[-1]:.0f})")
PY
gzip -f $OUT/smi.csv
} > "$OUT/gpu_a.log" 2>&1
cat "$OUT/gpu_a.log"
echo "total $(( $(date +%s) - t0 )) s"
# At most 8 files come back: everything but the log in one archive.
cd $OUT && tar czf all.tgz --exclude=all.tgz --exclude=gpu_a.log . && ls | grep -v "^all.tgz$\|^gpu_a.log$" | xargs rm -rf
