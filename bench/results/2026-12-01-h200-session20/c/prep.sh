#!/usr/bin/env bash
# Session 20, the programs of calls c and d (on the CPU machine from the repository root, after
# bench/pack_gpu.sh): [100,4096] x [4096,4096] f16 (B [K,N]) into .gpu/kbn, swapped tiles: the
# unpaired 64x56 the range entry holds, the 64x56 pair (cluster_n 2), and split-K clusters of
# 64x104 (2 slices, 6/8/10 stages), 128x56 (2 slices) and 128x104 (3 slices).
set -eu
printf '{"op": "matmul", "inputs": [{"shape": [100, 4096], "dtype": "f16"}, {"shape": [4096, 4096], "dtype": "f16"}], "arch": "sm_90a"}\n' > /tmp/h100.json
rm -rf .gpu/kbn && mkdir -p .gpu/kbn
B=swizzle=8,pingpong=0,cluster=1,stream_k=0,swap=1,consumers=1
g() { build/bench/kgen --template matmul_wgmma -o .gpu/kbn/$1 /tmp/h100.json $2,$B > /dev/null; }
g m100_u56 block_m=64,block_n=56,stages=12,stage_out=1,split_k=1,cluster_n=1
g m100_p56 block_m=64,block_n=56,stages=12,stage_out=1,split_k=1,cluster_n=2
g m100_k104s2_6 block_m=64,block_n=104,stages=6,stage_out=0,split_k=2,cluster_n=1
g m100_k104s2_8 block_m=64,block_n=104,stages=8,stage_out=0,split_k=2,cluster_n=1
g m100_k104s2_10 block_m=64,block_n=104,stages=10,stage_out=0,split_k=2,cluster_n=1
g m100_k56s2_6 block_m=128,block_n=56,stages=6,stage_out=0,split_k=2,cluster_n=1
g m100_k56s2_8 block_m=128,block_n=56,stages=8,stage_out=0,split_k=2,cluster_n=1
g m100_k104s3_6 block_m=128,block_n=104,stages=6,stage_out=0,split_k=3,cluster_n=1
