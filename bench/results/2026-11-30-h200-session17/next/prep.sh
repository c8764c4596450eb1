#!/usr/bin/env bash
# Prepared in session 17 for the next session (on the CPU machine from the repository root, after
# bench/pack_gpu.sh): .gpu/kbn holds [100,4096] x [4096,4096]'s swapped 64x56 pair (12 stages,
# staged and register stores), the unpaired 64x56 and 64x104 beside it, and the FP8 decode's
# B [K,N] pick (16x8192x8192 e4m3, 64x128 split 2, 4 stages: its cluster sum now loads a step's
# partials at once; session 16 timed it at 30.6-31.1 us), and with a transposing warpgroup more.
set -eu
printf '{"op": "matmul", "inputs": [{"shape": [100, 4096], "dtype": "f16"}, {"shape": [4096, 4096], "dtype": "f16"}], "arch": "sm_90a"}\n' > /tmp/n100.json
printf '{"op":"matmul","inputs":[{"shape":[16,8192],"dtype":"f8e4m3"},{"shape":[8192,8192],"dtype":"f8e4m3"},{"shape":[1],"dtype":"f32"},{"shape":[1],"dtype":"f32"}],"attrs":{"trans_b":false,"out_dtype":"bf16","scale_a":"tensor","scale_b":"tensor","fast_accum":true},"arch":"sm_90a"}\n' > /tmp/n16kn.json
rm -rf .gpu/kbn && mkdir -p .gpu/kbn
P=swizzle=8,pingpong=0,cluster=1,stream_k=0,split_k=1,swap=1,consumers=1,block_m=64
gen() { # name request params
    build/bench/kgen --template matmul_wgmma -o .gpu/kbn/$1 $2 $3 > /dev/null
}
gen pair56 /tmp/n100.json block_n=56,stages=12,stage_out=1,cluster_n=2,$P
gen pair56r /tmp/n100.json block_n=56,stages=12,stage_out=0,cluster_n=2,$P
gen sw56 /tmp/n100.json block_n=56,stages=12,stage_out=1,cluster_n=1,$P
gen sw104 /tmp/n100.json block_n=104,stages=8,stage_out=1,cluster_n=1,$P
Q=block_m=64,block_n=128,consumers=1,stage_out=0,split_k=2,swizzle=8,pingpong=0,cluster=1,stream_k=0,cluster_n=1,pretranspose=0
gen dkn_s4 /tmp/n16kn.json stages=4,$Q
# the same with a warpgroup of transposing warps more (tnsp_wg, session 17: seven warps, not timed)
gen dkn_s4_tw /tmp/n16kn.json stages=4,tnsp_wg=1,$Q
gen dkn_s5_tw /tmp/n16kn.json stages=5,tnsp_wg=1,$Q
