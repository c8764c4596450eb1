#!/usr/bin/env bash
# Session 18, call e (after bench/pack_gpu.sh; from the repository root): one Q tile against two
# (schedule q_bufs) at hd64 [8,16,2048,64], where call d's two tiles ran 12% slower at 192 keys
# (372 against 332 us), and at BERT's [8,12,512,64] with and without its [8,1,1,512] mask.
set -eu
printf '{"op":"attention","inputs":[{"shape":[8,12,512,64],"dtype":"f16"},{"shape":[8,12,512,64],"dtype":"f16"},{"shape":[8,12,512,64],"dtype":"f16"},{"shape":[8,1,1,512],"dtype":"f16"}],"attrs":{"causal":false},"arch":"sm_90a"}\n' > /tmp/bert.json
printf '{"op":"attention","inputs":[{"shape":[8,12,512,64],"dtype":"f16"},{"shape":[8,12,512,64],"dtype":"f16"},{"shape":[8,12,512,64],"dtype":"f16"}],"attrs":{"causal":false},"arch":"sm_90a"}\n' > /tmp/bertnm.json
printf '{"op":"attention","inputs":[{"shape":[8,16,2048,64],"dtype":"f16"},{"shape":[8,16,2048,64],"dtype":"f16"},{"shape":[8,16,2048,64],"dtype":"f16"}],"attrs":{"causal":false},"arch":"sm_90a"}\n' > /tmp/hd64.json
rm -rf .gpu/kbn && mkdir -p .gpu/kbn
gen() { build/bench/kgen --template attention_wgmma -o .gpu/kbn/$1 $2 $3 > /dev/null 2>&1; }
for bn in 128 176 192; do
    for qb in 1 2; do
        gen attn_hd64_${bn}_q$qb /tmp/hd64.json block_n=$bn,consumers=2,stages=3,overlap=1,pingpong=1,q_bufs=$qb
        gen attn_bert_${bn}_q$qb /tmp/bert.json block_n=$bn,consumers=2,stages=3,overlap=1,pingpong=1,q_bufs=$qb
    done
done
for qb in 1 2; do
    gen attn_bertnm_128_q$qb /tmp/bertnm.json block_n=128,consumers=2,stages=3,overlap=1,pingpong=1,q_bufs=$qb
    gen attn_bertnm_192_q$qb /tmp/bertnm.json block_n=192,consumers=2,stages=3,overlap=1,pingpong=1,q_bufs=$qb
done
ls .gpu/kbn/*.json | wc -l
