#!/usr/bin/env bash
# Prepared in session 18 for the next session (on the CPU machine from the repository root, after
# bench/pack_gpu.sh): .gpu/kba holds attention_wgmma kernels as NVRTC builds them (NAME), as nvcc
# builds them (NAME_nv, the control for the variants), and rewritten by next/hoist_mask.py: the
# wgmma fence after each stage's wait (NAME_f: ptxas then injects no warpgroup.arrive of its own,
# info C7519 - it does in every attention kernel now), the staged mask's loads before the Q.K^T
# wait (NAME_h), both (NAME_fh). Cases: BERT's [8,12,512,64] with its [8,1,1,512] mask and
# without, hd128 and hd64 at [8,16,2048,D], hd256 at [8,16,2048,256], at the model's picks.
set -eu
rm -rf .gpu/kba && mkdir -p .gpu/kba
NV="/usr/local/cuda/bin/nvcc -cubin -arch=sm_90a -std=c++17 --fmad=true --prec-div=true --prec-sqrt=true --ftz=false -w"
H=bench/results/2026-11-30-h200-session18/next/hoist_mask.py
req() { # file b h s d mask
    local m=""
    [ "$6" = 1 ] && m=$(printf ',{"shape":[%d,1,1,%d],"dtype":"f16"}' $2 $4)
    printf '{"op":"attention","inputs":[{"shape":[%d,%d,%d,%d],"dtype":"f16"},{"shape":[%d,%d,%d,%d],"dtype":"f16"},{"shape":[%d,%d,%d,%d],"dtype":"f16"}%s],"attrs":{"causal":false},"arch":"sm_90a"}\n' \
        $2 $3 $4 $5 $2 $3 $4 $5 $2 $3 $4 $5 "$m" > $1
}
variant() { # base suffix flags...
    local b=$1 v=$1_$2
    shift 2
    python3 $H $b.cu $v.cu "$@" > /dev/null && $NV $v.cu -o $v.cubin && cp $b.json $v.json && cp $b.ref.cubin $v.ref.cubin
}
gen() { # name request params masked
    local b=.gpu/kba/$1
    build/bench/kgen --template attention_wgmma -o $b $2 $3 > /dev/null 2>&1
    $NV $b.cu -o ${b}_nv.cubin && cp $b.json ${b}_nv.json && cp $b.ref.cubin ${b}_nv.ref.cubin
    variant $b f --fence --no-hoist
    if [ "$4" = 1 ]; then
        variant $b h
        variant $b fh --fence
    fi
}
req /tmp/a_bert.json 8 12 512 64 1
req /tmp/a_bertnm.json 8 12 512 64 0
req /tmp/a_hd128.json 8 16 2048 128 0
req /tmp/a_hd64.json 8 16 2048 64 0
req /tmp/a_hd256.json 8 16 2048 256 0
P=block_n=128,consumers=2,stages=3,overlap=1,pingpong=1
gen attn_bert /tmp/a_bert.json $P 1
gen attn_bertnm /tmp/a_bertnm.json $P 0
gen attn_hd128 /tmp/a_hd128.json $P 0
gen attn_hd64 /tmp/a_hd64.json $P 0
gen attn_hd256 /tmp/a_hd256.json block_n=64,consumers=2,stages=2,overlap=0,pingpong=0 0
ls .gpu/kba/*.json | wc -l
