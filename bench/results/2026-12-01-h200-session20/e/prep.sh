#!/usr/bin/env bash
# Session 20, call e's programs (on the CPU machine from the repository root, after
# bench/pack_gpu.sh): attention_wgmma with the row sums by wgmma (sum_mma 1: P times a block of
# ones beside P.V) against the same schedule summing in fp32 (_s0), into .gpu/kbs. Cases:
# [8,16,2048,D] at D = 64 and 128 (128 keys, two consumers in pingpong, 3 stages), 256 (80
# keys, two consumers, 2 stages), D = 128 causal, and BERT's [8,12,512,64] with its [8,1,1,512]
# mask and without.
set -eu
rm -rf .gpu/kbs && mkdir -p .gpu/kbs
req() { # file b h s d causal [mask]
    local m=""
    [ $# -gt 6 ] && m=$(printf ',{"shape":[%d,1,1,%d],"dtype":"f16"}' $2 $4)
    printf '{"op":"attention","inputs":[{"shape":[%d,%d,%d,%d],"dtype":"f16"},{"shape":[%d,%d,%d,%d],"dtype":"f16"},{"shape":[%d,%d,%d,%d],"dtype":"f16"}%s],"attrs":{"causal":%s},"arch":"sm_90a"}\n' \
        $2 $3 $4 $5 $2 $3 $4 $5 $2 $3 $4 $5 "$m" $6 > $1
}
req /tmp/e_hd64.json 8 16 2048 64 false
req /tmp/e_hd128.json 8 16 2048 128 false
req /tmp/e_hd128c.json 8 16 2048 128 true
req /tmp/e_hd256.json 8 16 2048 256 false
req /tmp/e_bertnm.json 8 12 512 64 false
req /tmp/e_bertm.json 8 12 512 64 false mask
P=block_n=128,consumers=2,stages=3,overlap=1,pingpong=1
gen() { # name request params
    for sm in 0 1; do
        local n=$1; [ $sm = 0 ] && n=${1}_s0
        build/bench/kgen --template attention_wgmma -o .gpu/kbs/$n $2 $3,sum_mma=$sm > /dev/null
    done
}
gen attn_hd64 /tmp/e_hd64.json $P
gen attn_hd128 /tmp/e_hd128.json $P
gen attn_hd128c /tmp/e_hd128c.json $P
gen attn_bertnm /tmp/e_bertnm.json $P
gen attn_bertm /tmp/e_bertm.json $P
gen attn_hd256 /tmp/e_hd256.json block_n=80,consumers=2,stages=2,overlap=0,pingpong=0
ls .gpu/kbs/*.json | wc -l
