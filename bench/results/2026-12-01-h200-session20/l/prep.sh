#!/usr/bin/env bash
# Session 20, call l's programs (on the CPU machine from the repository root, after
# bench/pack_gpu.sh): at [112,4096] x [4096,4096], the swapped 64x56 pair and the 64x112 tile
# the range 97..112 picked, each built for the fixed size (s_) and for the named n in 97..112
# (d_, the range job's kernels, run at n = 112 by kbench --dims 112), and the 64x64 tile built
# for the named n, into .gpu/kbd.
set -eu
rm -rf .gpu/kbd && mkdir -p .gpu/kbd
printf '{"op": "matmul", "inputs": [{"shape": [112, 4096], "dtype": "f16"}, {"shape": [4096, 4096], "dtype": "f16"}], "arch": "sm_90a"}\n' > /tmp/l_s.json
printf '{"op": "matmul", "inputs": [{"shape": ["n", 4096], "dtype": "f16"}, {"shape": [4096, 4096], "dtype": "f16"}], "dims": {"n": {"min": 97, "max": 112}}, "arch": "sm_90a"}\n' > /tmp/l_d.json
B=swizzle=8,pingpong=0,cluster=1,stream_k=0,consumers=1,split_k=1,stage_out=1
g() { build/bench/kgen --template matmul_wgmma -o .gpu/kbd/$1 $2 $3,$B > /dev/null; }
for k in s d; do
    g ${k}_p56 /tmp/l_$k.json block_m=64,block_n=56,stages=12,cluster_n=2,swap=1
    g ${k}_u112 /tmp/l_$k.json block_m=64,block_n=112,stages=8,cluster_n=1,swap=1
done
g d_u64 /tmp/l_d.json block_m=64,block_n=64,stages=8,cluster_n=1
ls .gpu/kbd/*.json | wc -l
