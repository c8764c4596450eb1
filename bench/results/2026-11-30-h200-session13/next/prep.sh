#!/usr/bin/env bash
# Run on the CPU machine from the repository root, after bench/pack_gpu.sh: writes the kgen
# programs gpu_run.sh profiles into .gpu/kb (swapped 128x96 two-consumer tiles of
# [M,4096]x[4096,14336] at M = 700 and 768, and swapped 64x176 ones; session 13 call f).
set -eu
mkdir -p .gpu/kb
for m in 700 768; do
    printf '{"op": "matmul", "inputs": [{"shape": [%d, 4096], "dtype": "f16"}, {"shape": [4096, 14336], "dtype": "f16"}], "arch": "sm_90a"}\n' $m > /tmp/req_$m.json
    build/bench/kgen --template matmul_wgmma -o .gpu/kb/m${m}_sw128x96c2 /tmp/req_$m.json \
        block_m=128,block_n=96,stages=6,consumers=2,swizzle=8,pingpong=0,stage_out=1,cluster=1,split_k=1,stream_k=0,cluster_n=1,swap=1 > /dev/null
    build/bench/kgen --template matmul_wgmma -o .gpu/kb/m${m}_sw128x96c2reg /tmp/req_$m.json \
        block_m=128,block_n=96,stages=6,consumers=2,swizzle=8,pingpong=0,stage_out=0,cluster=1,split_k=1,stream_k=0,cluster_n=1,swap=1 > /dev/null
    build/bench/kgen --template matmul_wgmma -o .gpu/kb/m${m}_sw64x176 /tmp/req_$m.json \
        block_m=64,block_n=176,stages=6,consumers=1,swizzle=8,pingpong=0,stage_out=1,cluster=1,split_k=1,stream_k=0,cluster_n=1,swap=1 > /dev/null
done
cp bench/results/2026-11-30-h200-session13/next/gpu_run.sh .gpu/
