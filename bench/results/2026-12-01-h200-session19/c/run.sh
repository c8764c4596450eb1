#!/usr/bin/env bash
# Session 19, call c (carry [".gpu"]; .gpu/kbc holds session 18's prep.sh kernels attn_hd256,
# attn_hd64 and attn_hd128 at the model's picks, [8,16,2048,D]):
#  1. GPT-2 with a padded batch's attention_mask at dynamic sizes (models_dynamic.py --padded;
#     call b's run passed the mask by position, into GPT-2's past_key_values);
#  2. ncu --set full of the hd256, hd64 and hd128 kernels with their SASS-level stall samples,
#     and of cuDNN's SDPA kernels at hd256 and hd64 (which tile, how busy the tensor pipe is).
set -u
cd "$(dirname "$0")/../../../.."
. bench/gpu_call.sh
{
daemon padded
echo "=== gpt2 dynamic, padded, 8 sizes"; s0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 250 python3 bench/models_dynamic.py --socket "$sock" --out "$OUT/gpt2" \
    --model gpt2 --padded --sizes 8 --batch 1,16 --seq 16,384 --settle-s 8 --iters 20 2>&1 | filt | tail -16
echo "=== gpt2 $(el $s0)"
kill -TERM $dp; wait $dp
mkdir -p $OUT/ncu
for n in hd256 hd64 hd128; do
    s0=$(date +%s)
    timeout 120 ncu -o $OUT/ncu/$n --kernel-name regex:hd_attention --launch-skip 2 --launch-count 1 --set full \
        --import-source no python3 bench/kbench.py .gpu/kbc --only $n > $OUT/ncu/$n.run.log 2>&1
    echo "=== ncu $n exit=$? $(el $s0)"
    ncu --import $OUT/ncu/$n.ncu-rep --page source --csv --print-source sass > $OUT/ncu/${n}_sass.csv 2>&1
    ncu --import $OUT/ncu/$n.ncu-rep --page details > $OUT/ncu/${n}_details.txt 2>&1
    grep -E "Duration|Compute \(SM\) Throughput|Issue Slots Busy|No Eligible|Eligible Warps|Warp Cycles Per Issued|Registers Per|Achieved Occupancy" $OUT/ncu/${n}_details.txt | head -10
done
cat > /tmp/peer.py <<'PY'
import sys, torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
d = int(sys.argv[1])
q, k, v = (torch.randn(8, 16, 2048, d, device="cuda", dtype=torch.float16) for _ in range(3))
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    for _ in range(4):
        F.scaled_dot_product_attention(q, k, v)
torch.cuda.synchronize()
PY
for d in 256 64; do
    timeout 90 ncu --kernel-name regex:"sdpa|fprop|flash|fmha|attn" --launch-skip 1 --launch-count 1 --set full python3 /tmp/peer.py $d > $OUT/ncu/cudnn_hd$d.txt 2>&1
    echo "=== ncu cudnn hd$d exit=$?"
    grep -E "^  [a-zA-Z_]|Duration|Compute \(SM\) Throughput|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Registers Per|Block Size|Grid Size|Shared Memory Configuration Size|Dynamic Shared" $OUT/ncu/cudnn_hd$d.txt | head -14
done
cd $OUT && tar czf ncu.tgz ncu gpt2 && rm -rf ncu gpt2
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
