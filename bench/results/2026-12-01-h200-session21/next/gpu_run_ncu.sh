#!/usr/bin/env bash
# Prepared in session 21 for the next session (bash bench/pack_gpu.sh, then next/prep.sh, then
# this with carry [".gpu"]; about 4 minutes): where hd256's new tile (128 keys in one K and one V
# slot, pingpong; call d: 950 us at [8,16,2048,256]) loses its last ~5% to cuDNN's kernel (905 us
# when issue 38's table was first taken). ncu --set full of both, with the SASS stall samples:
#  - the tensor pipe's busy share (stop 19: 66% against cuDNN's 77%, at 80 keys);
#  - L2 and DRAM throughput: a 128-row block reads 128 KiB of K and V from the L2 per 128-key tile
#    (4.3 GB over the run, about 4.5 TB/s at 950 us): if that is the bound, CTA pairs multicasting
#    K and V (matmul_wgmma's `cluster`) would halve it;
#  - the consumers' waits on the K and V barriers against their waits on their own wgmma.
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
mkdir -p $OUT/ncu
for n in attn_hd256_128s1pp attn_hd256_80s2; do
    s0=$(date +%s)
    timeout 120 ncu -o $OUT/ncu/$n --kernel-name regex:hd_attention --launch-skip 2 --launch-count 1 --set full \
        --import-source no python3 bench/kbench.py .gpu/kbs --only $n > $OUT/ncu/$n.run.log 2>&1
    echo "=== ncu $n exit=$? $(el $s0)"
    ncu --import $OUT/ncu/$n.ncu-rep --page source --csv --print-source sass > $OUT/ncu/${n}_sass.csv 2>&1
    ncu --import $OUT/ncu/$n.ncu-rep --page details > $OUT/ncu/${n}_details.txt 2>&1
    grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|DRAM Throughput|Issue Slots Busy|No Eligible|Warp Cycles Per Issued" $OUT/ncu/${n}_details.txt | head -12
done
cat > /tmp/peer.py <<'PY'
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
q, k, v = (torch.randn(8, 16, 2048, 256, device="cuda", dtype=torch.float16) for _ in range(3))
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    for _ in range(4):
        F.scaled_dot_product_attention(q, k, v)
torch.cuda.synchronize()
PY
timeout 90 ncu -o $OUT/ncu/cudnn_hd256 --kernel-name regex:"sdpa|fprop|flash|fmha|attn" --launch-skip 1 --launch-count 1 \
    --set full python3 /tmp/peer.py > $OUT/ncu/cudnn_hd256.run.log 2>&1
echo "=== ncu cudnn hd256 exit=$?"
ncu --import $OUT/ncu/cudnn_hd256.ncu-rep --page details > $OUT/ncu/cudnn_hd256_details.txt 2>&1
grep -E "^  [a-zA-Z_]|Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|DRAM Throughput|Issue Slots Busy|Block Size|Grid Size|Dynamic Shared" $OUT/ncu/cudnn_hd256_details.txt | head -14
cd $OUT && tar czf ncu.tgz ncu && rm -rf ncu
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
