#!/usr/bin/env bash
# Session 17, call e's programs (on the CPU machine from the repository root, after
# bench/pack_gpu.sh): split-K clusters whose sum loads every partial of a step before adding
# (tuner__gemm_emit_cluster_sum), beside call d's unsplit picks, into .gpu/kbe:
# [100,4096] x [4096,4096]: swapped 64x104 split 1 and 2, swapped 128x104 split 3 (c1, c2),
# unswapped 128x64 split 2, matmul_mma 64x128 split 4, swapped 64x56 unsplit;
# [16,8192] x [8192,8192]: matmul_mma 16x128 split 2 and swapped 128x16 split 2 (c2).
set -eu
printf '{"op": "matmul", "inputs": [{"shape": [100, 4096], "dtype": "f16"}, {"shape": [4096, 4096], "dtype": "f16"}], "arch": "sm_90a"}\n' > /tmp/r100.json
printf '{"op": "matmul", "inputs": [{"shape": [16, 8192], "dtype": "f16"}, {"shape": [8192, 8192], "dtype": "f16"}], "arch": "sm_90a"}\n' > /tmp/r16.json
rm -rf .gpu/kbe && mkdir -p .gpu/kbe
P=swizzle=8,pingpong=0,cluster=1,stream_k=0,cluster_n=1
gen() { # name request template params
    build/bench/kgen --template $3 -o .gpu/kbe/$1 $2 $4 > /dev/null
}
gen sw104_s1 /tmp/r100.json matmul_wgmma block_m=64,block_n=104,stages=8,consumers=1,stage_out=1,split_k=1,swap=1,$P
gen sw104_s2 /tmp/r100.json matmul_wgmma block_m=64,block_n=104,stages=6,consumers=1,stage_out=0,split_k=2,swap=1,$P
gen sw104_s2_8 /tmp/r100.json matmul_wgmma block_m=64,block_n=104,stages=8,consumers=1,stage_out=0,split_k=2,swap=1,$P
gen sw128x104_s3 /tmp/r100.json matmul_wgmma block_m=128,block_n=104,stages=6,consumers=2,stage_out=0,split_k=3,swap=1,$P
gen sw128x104_s3c1 /tmp/r100.json matmul_wgmma block_m=128,block_n=104,stages=6,consumers=1,stage_out=0,split_k=3,swap=1,$P
gen sw56_s1 /tmp/r100.json matmul_wgmma block_m=64,block_n=56,stages=12,consumers=1,stage_out=1,split_k=1,swap=1,$P
gen un128x64_s2 /tmp/r100.json matmul_wgmma block_m=128,block_n=64,stages=6,consumers=2,stage_out=0,split_k=2,$P
gen mma64x128_s4 /tmp/r100.json matmul_mma block_m=64,block_n=128,block_k=64,warp_m=32,warp_n=64,stages=3,split_k=4,split_cluster=1,swizzle=1,stage_out=0
gen d16_mma_s2 /tmp/r16.json matmul_mma block_m=16,block_n=128,block_k=64,warp_m=16,warp_n=32,stages=6,split_k=2,split_cluster=1,swizzle=1,stage_out=0
gen d16_sw128x16_s2 /tmp/r16.json matmul_wgmma block_m=128,block_n=16,stages=12,consumers=2,stage_out=0,split_k=2,swap=1,$P
