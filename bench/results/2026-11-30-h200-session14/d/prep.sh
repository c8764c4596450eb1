#!/usr/bin/env bash
# Run on the CPU machine from the repository root, after bench/pack_gpu.sh: the kgen programs
# call d times (exact-size kernels of [M,4096]x[4096,14336] at M = 1471, 1500 and 1536, the
# middle, a sampled size and the top of the range 1409..1536 in call c).
set -eu
rm -rf .gpu/kb && mkdir -p .gpu/kb
P=stages=4,consumers=2,swizzle=8,pingpong=0,cluster=1,split_k=1,stream_k=0,cluster_n=1
for m in 1471 1500 1536; do
    printf '{"op": "matmul", "inputs": [{"shape": [%d, 4096], "dtype": "f16"}, {"shape": [4096, 14336], "dtype": "f16"}], "arch": "sm_90a"}\n' $m > /tmp/req_$m.json
    k() { build/bench/kgen --template matmul_wgmma -o .gpu/kb/m${m}_$1 /tmp/req_$m.json $2 > /dev/null; }
    k sw128x192 block_m=128,block_n=192,stage_out=1,swap=1,$P
    k sw128x192reg block_m=128,block_n=192,stage_out=0,swap=1,$P
    k un128x192 block_m=128,block_n=192,stage_out=1,swap=0,$P
    k sw128x184 block_m=128,block_n=184,stage_out=1,swap=1,$P
    k sw64x192 block_m=64,block_n=192,stages=6,consumers=1,swizzle=8,pingpong=0,stage_out=1,cluster=1,split_k=1,stream_k=0,cluster_n=1,swap=1
done
cp bench/results/2026-11-30-h200-session14/d/gpu_run.sh .gpu/gpu_run_d.sh
