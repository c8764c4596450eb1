#!/usr/bin/env bash
# Session 19, call d's kernels (on the CPU machine after bench/pack_gpu.sh, from the repository
# root; KBA names a copy of session 18's next/prep.sh output .gpu/kba built before the change,
# since bench/pack_gpu.sh wipes .gpu):
# .gpu/kbd holds attention_wgmma kernels with the lazy rescale (NAME, NVRTC; NAME_nv, nvcc),
# the same source with the vote replaced by true (NAME_al, nvcc: every tile rescales, as before)
# and session 18's NVRTC builds from $KBA (NAME_old).
set -eu
kba=$KBA
rm -rf .gpu/kbd && mkdir -p .gpu/kbd
NV="/usr/local/cuda/bin/nvcc -cubin -arch=sm_90a -std=c++17 --fmad=true --prec-div=true --prec-sqrt=true --ftz=false -w"
gen() { # name request params [old]
    local b=.gpu/kbd/$1
    build/bench/kgen --template attention_wgmma -o $b $2 $3 > /dev/null 2>&1
    $NV $b.cu -o ${b}_nv.cubin && cp $b.json ${b}_nv.json && cp $b.ref.cubin ${b}_nv.ref.cubin
    sed 's/aw_up = __any_sync([^;]*;/aw_up = true;/' $b.cu > ${b}_al.cu
    grep -q "aw_up = true;" ${b}_al.cu
    $NV ${b}_al.cu -o ${b}_al.cubin && cp $b.json ${b}_al.json && cp $b.ref.cubin ${b}_al.ref.cubin
    rm -f ${b}_al.cu
    if [ -n "${4:-}" ]; then
        for x in cubin json ref.cubin; do cp $kba/$4.$x ${b}_old.$x; done
    fi
}
gen attn_hd256 /tmp/a_hd256.json block_n=64,consumers=2,stages=2,overlap=0,pingpong=0 attn_hd256
gen attn_hd256_80 /tmp/a_hd256.json block_n=80,consumers=2,stages=2,overlap=0,pingpong=0
gen attn_hd256_80o /tmp/a_hd256.json block_n=80,consumers=2,stages=2,overlap=1,pingpong=1
gen attn_hd256_64o /tmp/a_hd256.json block_n=64,consumers=2,stages=2,overlap=1,pingpong=0
P=block_n=128,consumers=2,stages=3,overlap=1,pingpong=1
gen attn_hd128 /tmp/a_hd128.json $P attn_hd128
gen attn_hd64 /tmp/a_hd64.json $P attn_hd64
gen attn_bert /tmp/a_bert.json $P attn_bert
ls .gpu/kbd/*.json | wc -l
