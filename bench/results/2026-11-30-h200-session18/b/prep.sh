#!/usr/bin/env bash
# Session 18, call b (after bench/pack_gpu.sh; from the repository root): BERT's masked attention
# [8,12,512,64] + [8,1,1,512] with the mask staged in shared memory by the producer's spare warps
# (this tree), at the schedules near the model's pick, into .gpu/kbn; call a's program (the mask
# read from global memory by every consumer thread, 77 us) is carried beside them as attn_bert_old.
set -eu
printf '{"op":"attention","inputs":[{"shape":[8,12,512,64],"dtype":"f16"},{"shape":[8,12,512,64],"dtype":"f16"},{"shape":[8,12,512,64],"dtype":"f16"},{"shape":[8,1,1,512],"dtype":"f16"}],"attrs":{"causal":false},"arch":"sm_90a"}\n' > /tmp/bert.json
printf '{"op":"attention","inputs":[{"shape":[8,12,512,64],"dtype":"f16"},{"shape":[8,12,512,64],"dtype":"f16"},{"shape":[8,12,512,64],"dtype":"f16"}],"attrs":{"causal":false},"arch":"sm_90a"}\n' > /tmp/bertnm.json
mkdir -p .gpu/kbn
gen() { build/bench/kgen --template attention_wgmma -o .gpu/kbn/$1 $2 $3 > /dev/null 2>&1; }
for bn in 64 128 176 192; do
    for pp in 0 1; do
        gen attn_bert_s_${bn}_p$pp /tmp/bert.json block_n=$bn,consumers=2,stages=3,overlap=1,pingpong=$pp
    done
done
gen attn_bert_s_128_p1_st2 /tmp/bert.json block_n=128,consumers=2,stages=2,overlap=1,pingpong=1
gen attn_bert_s_128_p1_st4 /tmp/bert.json block_n=128,consumers=2,stages=4,overlap=1,pingpong=1
gen attn_bert_s_128_c1 /tmp/bert.json block_n=128,consumers=1,stages=3,overlap=1,pingpong=0
gen attn_bert_nomask_128 /tmp/bertnm.json block_n=128,consumers=2,stages=3,overlap=1,pingpong=1
gen attn_bert_nomask_192 /tmp/bertnm.json block_n=192,consumers=2,stages=3,overlap=1,pingpong=1
ls .gpu/kbn/attn_bert*.json | wc -l
