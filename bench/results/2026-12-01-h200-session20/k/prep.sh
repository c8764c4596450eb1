#!/usr/bin/env bash
# Session 20, call k's programs (on the CPU machine from the repository root, after
# bench/pack_gpu.sh): [M,4096] x [4096,4096] f16 at M = 97, 100, 104, 112 (the range 97..112's
# bottom, the row's size, its middle and top) into .gpu/kbr: the swapped 64x56 pair (what the
# static job at 100 picks), and the tiles the range job timed faster at its samples (64x64
# unswapped, 64x104 and 64x112 swapped).
set -eu
rm -rf .gpu/kbr && mkdir -p .gpu/kbr
B=swizzle=8,pingpong=0,cluster=1,stream_k=0,consumers=1,split_k=1,stage_out=1
for m in 97 100 104 112; do
    printf '{"op": "matmul", "inputs": [{"shape": [%d, 4096], "dtype": "f16"}, {"shape": [4096, 4096], "dtype": "f16"}], "arch": "sm_90a"}\n' $m > /tmp/r$m.json
    g() { build/bench/kgen --template matmul_wgmma -o .gpu/kbr/m${m}_$1 /tmp/r$m.json $2,$B > /dev/null; }
    g p56 block_m=64,block_n=56,stages=12,cluster_n=2,swap=1
    g u64 block_m=64,block_n=64,stages=8,cluster_n=1
    g u104 block_m=64,block_n=104,stages=8,cluster_n=1,swap=1
    g u112 block_m=64,block_n=112,stages=8,cluster_n=1,swap=1
done
ls .gpu/kbr/*.json | wc -l
