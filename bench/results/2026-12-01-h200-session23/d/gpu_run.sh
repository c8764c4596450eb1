#!/usr/bin/env bash
# Session 23, call d (kgen programs in .gpu/k; carry [".gpu"]; about 2 minutes): call c's ncu
# put cuBLASLt's row/col FP8 kernel (128x128 tiles in CTA pairs, 2x1, not cooperative) at 705.5
# us and ours at 766-780 at the same 1.30 GHz clock: 97% against 88-89% of the tensor cores'
# rate there. ncu's full set on our pingpong 128x128 (pp128_s6_c1), cooperative 128x192
# (co192_g08) and 128x128 pairs (co128c2_g08), and cuBLASLt's: where do ours lose it?
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
export PATH=/usr/local/cuda/bin:$PATH
{
for p in pp128_s6_c1 co192_g08 co128c2_g08; do
  s0=$(date +%s)
  timeout 90 ncu --set full -k "regex:hd_matmul" -c 1 python3 bench/kbench.py $G/k --only $p > $OUT/ncu_$p.log 2>&1
  echo "=== ncu $p exit=$? $(el $s0)"
done
s0=$(date +%s)
timeout 90 ncu --set full -k "regex:nvjet" -c 2 python3 bench/results/2026-12-01-h200-session23/c/peers_once.py > $OUT/ncu_peers.log 2>&1
echo "=== ncu peers exit=$? $(el $s0)"
for f in $OUT/ncu_*.log; do echo "--- $f"; grep -E "^  [a-z_]+.*Context|Duration|SM Frequency|Compute \(SM\) Throughput|L2 Cache Throughput|DRAM Throughput|Memory Throughput|Executed Ipc A|Issue Slots Busy|No Eligible|Registers Per|Achieved Occupancy|L1/TEX Hit|L2 Hit" $f | head -40; done
} > "$OUT/gpu_d.log" 2>&1
cat "$OUT/gpu_d.log"
echo "total $(( $(date +%s) - t0 )) s"
cd $OUT && tar czf ncu.tgz ncu_*.log && rm -f ncu_*.log
