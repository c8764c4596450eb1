#!/usr/bin/env bash
# Prepared in session 16 for the next session (on the CPU machine from the repository root, after
# bench/pack_gpu.sh): .gpu/kbv holds [104,4096]x[4096,4096]'s swapped 64x56 (12 stages, register
# stores) and, as a control, swapped 64x104 (8 stages, staged), for next/gpu_run.sh.
set -eu
rm -rf .gpu/kbv && mkdir -p .gpu/kbv
P=swizzle=8,pingpong=0,cluster=1,split_k=1,stream_k=0,cluster_n=1
printf '{"op": "matmul", "inputs": [{"shape": [104, 4096], "dtype": "f16"}, {"shape": [4096, 4096], "dtype": "f16"}], "arch": "sm_90a"}\n' > /tmp/req_v104.json
build/bench/kgen --template matmul_wgmma -o .gpu/kbv/sw64x56 /tmp/req_v104.json block_m=64,block_n=56,stages=12,consumers=1,stage_out=0,swap=1,$P > /dev/null
build/bench/kgen --template matmul_wgmma -o .gpu/kbv/sw64x104 /tmp/req_v104.json block_m=64,block_n=104,stages=8,consumers=1,stage_out=1,swap=1,$P > /dev/null
