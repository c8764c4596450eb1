#!/usr/bin/env bash
# Session 18, call f (after bench/pack_gpu.sh; from the repository root): one Q tile against two at
# hd128 [8,16,2048,128] and causal, the schedules where two fit beside the ring (2 stages of 128
# keys, 3 of 64), and the model's pick (128 keys, 3 stages: two do not fit) for scale.
set -eu
printf '{"op":"attention","inputs":[{"shape":[8,16,2048,128],"dtype":"f16"},{"shape":[8,16,2048,128],"dtype":"f16"},{"shape":[8,16,2048,128],"dtype":"f16"}],"attrs":{"causal":false},"arch":"sm_90a"}\n' > /tmp/hd128.json
printf '{"op":"attention","inputs":[{"shape":[8,16,2048,128],"dtype":"f16"},{"shape":[8,16,2048,128],"dtype":"f16"},{"shape":[8,16,2048,128],"dtype":"f16"}],"attrs":{"causal":true},"arch":"sm_90a"}\n' > /tmp/hd128c.json
rm -rf .gpu/kbn && mkdir -p .gpu/kbn
gen() { build/bench/kgen --template attention_wgmma -o .gpu/kbn/$1 $2 $3 > /dev/null 2>&1; }
for c in hd128 hd128c; do
    gen attn_${c}_pick /tmp/$c.json block_n=128,consumers=2,stages=3,overlap=1,pingpong=0,q_bufs=1
    for qb in 1 2; do
        gen attn_${c}_128st2_q$qb /tmp/$c.json block_n=128,consumers=2,stages=2,overlap=1,pingpong=0,q_bufs=$qb
        gen attn_${c}_64st3_q$qb /tmp/$c.json block_n=64,consumers=2,stages=3,overlap=1,pingpong=1,q_bufs=$qb
    done
done
ls .gpu/kbn/*.json | wc -l
