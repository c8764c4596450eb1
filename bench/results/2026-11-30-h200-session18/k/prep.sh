#!/usr/bin/env bash
# Session 18, call k (after bench/pack_gpu.sh): BERT's attention [8,12,512,64] at the model's pick
# (128 keys, two consumers in pingpong, 3 stages) with its [8,1,1,512] mask staged and without a
# mask, for ncu: where the staged mask's 2 us (24.4 against 22.3) go.
set -eu
printf '{"op":"attention","inputs":[{"shape":[8,12,512,64],"dtype":"f16"},{"shape":[8,12,512,64],"dtype":"f16"},{"shape":[8,12,512,64],"dtype":"f16"},{"shape":[8,1,1,512],"dtype":"f16"}],"attrs":{"causal":false},"arch":"sm_90a"}\n' > /tmp/bert.json
printf '{"op":"attention","inputs":[{"shape":[8,12,512,64],"dtype":"f16"},{"shape":[8,12,512,64],"dtype":"f16"},{"shape":[8,12,512,64],"dtype":"f16"}],"attrs":{"causal":false},"arch":"sm_90a"}\n' > /tmp/bertnm.json
rm -rf .gpu/kbn && mkdir -p .gpu/kbn
P=block_n=128,consumers=2,stages=3,overlap=1,pingpong=1
build/bench/kgen --template attention_wgmma -o .gpu/kbn/attn_bert_staged /tmp/bert.json $P > /dev/null 2>&1
build/bench/kgen --template attention_wgmma -o .gpu/kbn/attn_bert_nomask /tmp/bertnm.json $P > /dev/null 2>&1
ls .gpu/kbn/*.json | wc -l
