#!/usr/bin/env bash
# Session 19, the kbench after call e (on the CPU machine from the repository root, after
# bench/pack_gpu.sh; on the GPU: `python3 bench/kbench.py .gpu/kbe --only g`, then ncu of g1_w):
# GPT-2's attention alone, [b, 12, s, 64] f16 at the sizes where the model's profile put it at
# 97-110 us a launch: g1 13 x 231 causal with a [b, 1, 1, s] mask, g2 the same without the mask,
# g3 not causal, g4 bshd, g5 12 x 314; _w the model's attention_wgmma pick, _m attention_mma,
# g5_w80 the dynamic table's entry at 12 x 314.
set -eu
rm -rf .gpu/kbe && mkdir -p .gpu/kbe
req() { # file b s causal mask layout
    local m="" q
    [ "$5" = 1 ] && m=$(printf ',{"shape":[%d,1,1,%d],"dtype":"f16"}' $2 $3)
    if [ "$6" = bshd ]; then q=$(printf '{"shape":[%d,%d,12,64],"dtype":"f16"}' $2 $3)
    else q=$(printf '{"shape":[%d,12,%d,64],"dtype":"f16"}' $2 $3); fi
    printf '{"op":"attention","inputs":[%s,%s,%s%s],"attrs":{"causal":%s,"layout":"%s"},"arch":"sm_90a"}\n' \
        "$q" "$q" "$q" "$m" $4 $6 > $1
}
req /tmp/g1.json 13 231 true 1 bhsd
req /tmp/g2.json 13 231 true 0 bhsd
req /tmp/g3.json 13 231 false 1 bhsd
req /tmp/g4.json 13 231 true 1 bshd
req /tmp/g5.json 12 314 true 1 bhsd
W=block_n=128,consumers=2,stages=3,overlap=1,pingpong=1
M=block_m=64,block_n=64,warps=4,stages=3,q_regs=1
for i in 1 2 3 4 5; do
    build/bench/kgen --template attention_wgmma -o .gpu/kbe/g${i}_w /tmp/g$i.json $W > /dev/null
    build/bench/kgen --template attention_mma -o .gpu/kbe/g${i}_m /tmp/g$i.json $M > /dev/null
done
build/bench/kgen --template attention_wgmma -o .gpu/kbe/g5_w80 /tmp/g5.json \
    block_n=80,consumers=3,stages=3,overlap=1,pingpong=0 > /dev/null
