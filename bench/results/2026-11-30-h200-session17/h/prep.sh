#!/usr/bin/env bash
# Session 17, call h's programs (on the CPU machine from the repository root, after
# bench/pack_gpu.sh): swapped N pairs (cluster_n 2 with swap: two tiles of M sharing the B tile,
# multicast in halves), beside the unpaired tiles, into .gpu/kbh: [100,4096] x [4096,4096] with
# B [K,N] (halves of the box's k rows) and B [N,K] (halves of its rows); 168 rows (three 56-row
# tiles: the second pair's second tile is the last again); 57 rows (two 32-row tiles).
set -eu
rq() { # file M trans_b
    printf '{"op": "matmul", "inputs": [{"shape": [%d, 4096], "dtype": "f16"}, {"shape": [4096, 4096], "dtype": "f16"}], "attrs": {"trans_b": %s}, "arch": "sm_90a"}\n' $2 $3 > $1
}
rq /tmp/h100.json 100 false
rq /tmp/h100t.json 100 true
rq /tmp/h168.json 168 false
rq /tmp/h57.json 57 false
rm -rf .gpu/kbh && mkdir -p .gpu/kbh
P=swizzle=8,pingpong=0,cluster=1,stream_k=0,split_k=1,swap=1
gen() { # name request params
    build/bench/kgen --template matmul_wgmma -o .gpu/kbh/$1 $2 $3,$P > /dev/null
}
gen m100_56 /tmp/h100.json block_m=64,block_n=56,stages=12,consumers=1,stage_out=1,cluster_n=1
gen m100_56p /tmp/h100.json block_m=64,block_n=56,stages=12,consumers=1,stage_out=1,cluster_n=2
gen m100_56p8 /tmp/h100.json block_m=64,block_n=56,stages=8,consumers=1,stage_out=1,cluster_n=2
gen m100_56p_r /tmp/h100.json block_m=64,block_n=56,stages=12,consumers=1,stage_out=0,cluster_n=2
gen m100_104 /tmp/h100.json block_m=64,block_n=104,stages=8,consumers=1,stage_out=1,cluster_n=1
gen m100_128x56p /tmp/h100.json block_m=128,block_n=56,stages=8,consumers=2,stage_out=1,cluster_n=2
gen m100t_56 /tmp/h100t.json block_m=64,block_n=56,stages=12,consumers=1,stage_out=1,cluster_n=1
gen m100t_56p /tmp/h100t.json block_m=64,block_n=56,stages=12,consumers=1,stage_out=1,cluster_n=2
gen m168_56p /tmp/h168.json block_m=64,block_n=56,stages=12,consumers=1,stage_out=1,cluster_n=2
gen m57_32p /tmp/h57.json block_m=64,block_n=32,stages=12,consumers=1,stage_out=1,cluster_n=2
