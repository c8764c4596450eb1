#!/usr/bin/env bash
# Prepared in session 19 for the next session (on the CPU machine from the repository root, after
# bench/pack_gpu.sh): .gpu/kbf holds attention_wgmma kernels of this tree (NAME, NVRTC) beside
# the same schedules built by session 18's final tree (NAME_old, next/kold: NVRTC builds from
# the start of session 19, before it folded the softmax scale into exp2's FMA where there is no
# mask). Cases: [8,16,2048,D] at D = 64, 128 (128 keys, two consumers in pingpong, 3 stages), 256
# (64 keys, two consumers, 2 stages; and _80: 80 keys, the model's pick since session 19), and
# BERT's [8,12,512,64] without a mask; attention_mma at D = 64 (attn_mma_hd64). Then
# next/gpu_run_kbench.sh.
set -eu
rm -rf .gpu/kbf && mkdir -p .gpu/kbf
cp bench/results/2026-12-01-h200-session19/next/kold/* .gpu/kbf/
req() { # file b h s d
    printf '{"op":"attention","inputs":[{"shape":[%d,%d,%d,%d],"dtype":"f16"},{"shape":[%d,%d,%d,%d],"dtype":"f16"},{"shape":[%d,%d,%d,%d],"dtype":"f16"}],"attrs":{"causal":false},"arch":"sm_90a"}\n' \
        $2 $3 $4 $5 $2 $3 $4 $5 $2 $3 $4 $5 > $1
}
req /tmp/f_hd64.json 8 16 2048 64
req /tmp/f_hd128.json 8 16 2048 128
req /tmp/f_hd256.json 8 16 2048 256
req /tmp/f_bertnm.json 8 12 512 64
P=block_n=128,consumers=2,stages=3,overlap=1,pingpong=1
gen() { build/bench/kgen --template attention_wgmma -o .gpu/kbf/$1 $2 $3 > /dev/null; }
gen attn_hd64 /tmp/f_hd64.json $P
gen attn_hd128 /tmp/f_hd128.json $P
gen attn_bertnm /tmp/f_bertnm.json $P
gen attn_hd256 /tmp/f_hd256.json block_n=64,consumers=2,stages=2,overlap=0,pingpong=0
gen attn_hd256_80 /tmp/f_hd256.json block_n=80,consumers=2,stages=2,overlap=0,pingpong=0
# attention_mma (the portable template) folded the same way: 128x128 tiles, 8 warps, 3 stages
build/bench/kgen --template attention_mma -o .gpu/kbf/attn_mma_hd64 /tmp/f_hd64.json \
    block_m=128,block_n=128,warps=8,stages=3,q_regs=1 > /dev/null
ls .gpu/kbf/*.json | wc -l
