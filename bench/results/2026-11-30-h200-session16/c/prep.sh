#!/usr/bin/env bash
# Session 16, call c's programs (run on the CPU machine from the repository root, after
# bench/pack_gpu.sh): .gpu/kb2 holds [104,4096]x[4096,4096]'s swapped 64x56 (12 stages, register
# stores) six times and swapped 64x104 (8 stages, staged) twice, the same cubins loaded as separate
# programs with their own buffers in one process (is call a's 11.9-or-14.7 us a property of the
# load?); .gpu/kb3 4096^3 e4m3 with B [K,N]: 128x256 pretransposed, and the in-kernel transposers'
# best (256x128, 3 stages), each alone, for kbench and ncu.
set -eu
rm -rf .gpu/kb2 .gpu/kb3 && mkdir -p .gpu/kb2 .gpu/kb3
P=swizzle=8,pingpong=0,cluster=1,split_k=1,stream_k=0,cluster_n=1
printf '{"op": "matmul", "inputs": [{"shape": [104, 4096], "dtype": "f16"}, {"shape": [4096, 4096], "dtype": "f16"}], "arch": "sm_90a"}\n' > /tmp/req_c104.json
build/bench/kgen --template matmul_wgmma -o .gpu/kb2/sw64x56_1 /tmp/req_c104.json block_m=64,block_n=56,stages=12,consumers=1,stage_out=0,swap=1,$P > /dev/null
build/bench/kgen --template matmul_wgmma -o .gpu/kb2/sw64x104_1 /tmp/req_c104.json block_m=64,block_n=104,stages=8,consumers=1,stage_out=1,swap=1,$P > /dev/null
for i in 2 3 4 5 6; do for e in json cubin ref.cubin; do cp .gpu/kb2/sw64x56_1.$e .gpu/kb2/sw64x56_$i.$e; done; done
for e in json cubin ref.cubin; do cp .gpu/kb2/sw64x104_1.$e .gpu/kb2/sw64x104_2.$e; done
printf '{"op":"matmul","inputs":[{"shape":[4096,4096],"dtype":"f8e4m3"},{"shape":[4096,4096],"dtype":"f8e4m3"},{"shape":[1],"dtype":"f32"},{"shape":[1],"dtype":"f32"}],"attrs":{"trans_b":false,"out_dtype":"bf16","scale_a":"tensor","scale_b":"tensor","fast_accum":true},"arch":"sm_90a"}\n' > /tmp/req_ckn.json
build/bench/kgen --template matmul_wgmma -o .gpu/kb3/pre128x256 /tmp/req_ckn.json block_m=128,block_n=256,stages=4,consumers=2,stage_out=2,pretranspose=1,$P > /dev/null
build/bench/kgen --template matmul_wgmma -o .gpu/kb3/tnsp256x128 /tmp/req_ckn.json block_m=256,block_n=128,stages=3,consumers=2,stage_out=2,pretranspose=0,$P > /dev/null
