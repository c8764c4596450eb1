#!/usr/bin/env bash
# Prepared in session 16 for the next session (on the CPU machine from the repository root, after
# bench/pack_gpu.sh): .gpu/kbv holds [104,4096]x[4096,4096]'s swapped 64x56 (12 stages, register
# stores) and, as a control, swapped 64x104 (8 stages, staged), for next/gpu_run.sh; .gpu/kbt below.
set -eu
rm -rf .gpu/kbv && mkdir -p .gpu/kbv
P=swizzle=8,pingpong=0,cluster=1,split_k=1,stream_k=0,cluster_n=1
printf '{"op": "matmul", "inputs": [{"shape": [104, 4096], "dtype": "f16"}, {"shape": [4096, 4096], "dtype": "f16"}], "arch": "sm_90a"}\n' > /tmp/req_v104.json
build/bench/kgen --template matmul_wgmma -o .gpu/kbv/sw64x56 /tmp/req_v104.json block_m=64,block_n=56,stages=12,consumers=1,stage_out=0,swap=1,$P > /dev/null
build/bench/kgen --template matmul_wgmma -o .gpu/kbv/sw64x104 /tmp/req_v104.json block_m=64,block_n=104,stages=8,consumers=1,stage_out=1,swap=1,$P > /dev/null

# .gpu/kbt: issue 41's B [K,N] rows with the in-kernel transposers, as NVRTC builds them, as nvcc
# builds them, and with each transposing warp taking 2 or 4 blocks per step (next/tnsp_multi.py,
# checked on the CPU by the emulator: case 11's candidates 0 and 9, 128- and 256-wide B tiles,
# correct with 2 and 4, wrong with the blocks' stride broken): the 16x8192x8192 decode's pick
# (64x128, split 2, 4 stages) and 5 stages, and 4096^3's best in-kernel tile (256x128, 3 stages).
rm -rf .gpu/kbt && mkdir -p .gpu/kbt
NV="/usr/local/cuda/bin/nvcc -cubin -arch=sm_90a -std=c++17 --fmad=true --prec-div=true --prec-sqrt=true --ftz=false -w"
T=bench/results/2026-11-30-h200-session16/next/tnsp_multi.py
kn() {
    printf '{"op":"matmul","inputs":[{"shape":[%d,%d],"dtype":"f8e4m3"},{"shape":[%d,%d],"dtype":"f8e4m3"},{"shape":[1],"dtype":"f32"},{"shape":[1],"dtype":"f32"}],"attrs":{"trans_b":false,"out_dtype":"bf16","scale_a":"tensor","scale_b":"tensor","fast_accum":true},"arch":"sm_90a"}\n' \
        $1 $2 $2 $3 > /tmp/req_kn_$1.json
}
kn 16 8192 8192
kn 4096 4096 4096
gen() { # name M schedule
    local b=.gpu/kbt/$1
    build/bench/kgen --template matmul_wgmma -o $b /tmp/req_kn_$2.json $3,pretranspose=0 > /dev/null
    $NV $b.cu -o ${b}_nv.cubin && cp $b.json ${b}_nv.json && cp $b.ref.cubin ${b}_nv.ref.cubin
    for u in 2 4; do
        python3 $T $b.cu ${b}_u$u.cu $u && $NV ${b}_u$u.cu -o ${b}_u$u.cubin && cp $b.json ${b}_u$u.json &&
            cp $b.ref.cubin ${b}_u$u.ref.cubin
    done
}
Q=swizzle=8,pingpong=0,cluster=1,stream_k=0,cluster_n=1
gen dkn_s4 16 block_m=64,block_n=128,stages=4,consumers=1,stage_out=0,split_k=2,$Q
gen dkn_s5 16 block_m=64,block_n=128,stages=5,consumers=1,stage_out=0,split_k=2,$Q
gen kn4096 4096 block_m=256,block_n=128,stages=3,consumers=2,stage_out=2,split_k=1,$Q
