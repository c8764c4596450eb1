#!/usr/bin/env bash
# Session 17, call d's programs (on the CPU machine from the repository root, after
# bench/pack_gpu.sh): [100,4096] x [4096,4096] f16 as four schedules, into .gpu/kbs.
set -eu
printf '{"op": "matmul", "inputs": [{"shape": [100, 4096], "dtype": "f16"}, {"shape": [4096, 4096], "dtype": "f16"}], "arch": "sm_90a"}\n' > /tmp/r100.json
rm -rf .gpu/kbs && mkdir -p .gpu/kbs
P=swizzle=8,pingpong=0,cluster=1,stream_k=0,cluster_n=1
for spec in "sw104_s1:block_m=64,block_n=104,stages=8,consumers=1,stage_out=1,split_k=1,swap=1" \
            "sw104_s2:block_m=64,block_n=104,stages=6,consumers=1,stage_out=0,split_k=2,swap=1" \
            "sw56_s1:block_m=64,block_n=56,stages=12,consumers=1,stage_out=1,split_k=1,swap=1" \
            "un128x64_s2:block_m=128,block_n=64,stages=6,consumers=2,stage_out=0,split_k=2"; do
    build/bench/kgen --template matmul_wgmma -o .gpu/kbs/${spec%%:*} /tmp/r100.json ${spec#*:},$P > /dev/null
done
