#!/usr/bin/env bash
# Session 18, call c (after bench/pack_gpu.sh; from the repository root): as call b's prep, with
# the mask's key tiles dealt round-robin to the producer's three spare warps (each loads its
# tile's values before it waits for the stage), at the schedules near the model's pick.
set -eu
printf '{"op":"attention","inputs":[{"shape":[8,12,512,64],"dtype":"f16"},{"shape":[8,12,512,64],"dtype":"f16"},{"shape":[8,12,512,64],"dtype":"f16"},{"shape":[8,1,1,512],"dtype":"f16"}],"attrs":{"causal":false},"arch":"sm_90a"}\n' > /tmp/bert.json
printf '{"op":"attention","inputs":[{"shape":[8,12,512,64],"dtype":"f16"},{"shape":[8,12,512,64],"dtype":"f16"},{"shape":[8,12,512,64],"dtype":"f16"}],"attrs":{"causal":false},"arch":"sm_90a"}\n' > /tmp/bertnm.json
mkdir -p .gpu/kbn
gen() { build/bench/kgen --template attention_wgmma -o .gpu/kbn/$1 $2 $3 > /dev/null 2>&1; }
for bn in 128 176 192; do
    for pp in 0 1; do
        gen attn_bert_s_${bn}_p$pp /tmp/bert.json block_n=$bn,consumers=2,stages=3,overlap=1,pingpong=$pp
    done
done
gen attn_bert_s_128_p1_st2 /tmp/bert.json block_n=128,consumers=2,stages=2,overlap=1,pingpong=1
gen attn_bert_s_128_p1_st4 /tmp/bert.json block_n=128,consumers=2,stages=4,overlap=1,pingpong=1
gen attn_bert_s_176_p1_st4 /tmp/bert.json block_n=176,consumers=2,stages=4,overlap=1,pingpong=1
gen attn_bert_nomask_128 /tmp/bertnm.json block_n=128,consumers=2,stages=3,overlap=1,pingpong=1
ls .gpu/kbn/attn_bert*.json | wc -l
