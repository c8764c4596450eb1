#!/usr/bin/env bash
# Session 9 GPU call F: FP8 casts through torch.compile after the e4m3 probe (PyTorch's CUDA
# conversion gives NaN beyond 464: such casts are left to PyTorch, clamped ones lowered); the
# static BERT mask's cone on CUDA (mask_cone.py) for padding_masks.
set -u
cd "$(dirname "$0")/.."   # run from .gpu/ (copied there after bench/pack_gpu.sh)
G=$PWD/.gpu
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export HIDETD_WORKER=$G/bin/hidetd-worker
t0=$(date +%s)
{
timeout 60 python3 .gpu/mask_cone.py 2>&1 | grep -v "Warning\|warn" | head -70
echo "=== mask cone ($(( $(date +%s) - t0 )) s)"
timeout 90 python3 tests/gpu/fp8_torch.py $G/bin/hidetd --lib $G/lib --tune model > $OUT/fp8_torch.log 2>&1; echo "fp8_torch exit=$?"
grep -E "FAIL|^ok|^bench|fp8 through|PyTorch" $OUT/fp8_torch.log | head -50
} > "$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "total $(( $(date +%s) - t0 )) s"
