#!/usr/bin/env bash
# Session 19, call k (carry [".gpu"], after bench/pack_gpu.sh): the streaming softmax's -inf fix.
#  1. tuner_gpu_verify's new cases, softmax rows with runs of -inf (every candidate, 3 dtypes);
#  2. tests/gpu/masked_models.py (call j: f32 BERT and GPT-2 at fixed sizes gave NaN).
set -u
cd "$(dirname "$0")/../../../.."
G=$PWD/.gpu
OUT=${OUT:-/tmp/out}
HIDET_VERIFY_ONLY="-inf runs" LD_LIBRARY_PATH=$G/lib timeout 70 $G/tests/tuner_gpu_verify > $OUT/verify_ninf.log 2>&1
echo "verify exit=$?"; grep -E "inf runs|wrong|WRONG" $OUT/verify_ninf.log | head -12
timeout 100 python3 tests/gpu/masked_models.py $G/bin/hidetd --lib $G/lib > $OUT/masked_models.log 2>&1
echo "masked_models exit=$?"; grep -E "error|ops on|FAILED|through" $OUT/masked_models.log | tail -26
