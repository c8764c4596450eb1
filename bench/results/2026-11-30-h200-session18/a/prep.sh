#!/usr/bin/env bash
# Session 18, call a (after bench/pack_gpu.sh and session 17's next/prep.sh): attention programs
# for issue 38's missed rows in .gpu/kbn beside session 17's matmul ones. BERT's [8,12,512,64]
# with its [8,1,1,512] mask at the measured pick (128 keys, two consumers in pingpong, 3 stages),
# the same without the mask, and hd 256 at [8,16,2048,256]: the measured pick (80 keys, two
# consumers, 2 stages) and the cost model's 8k pick (64 keys, one consumer, 3 stages).
set -eu
printf '{"op":"attention","inputs":[{"shape":[8,12,512,64],"dtype":"f16"},{"shape":[8,12,512,64],"dtype":"f16"},{"shape":[8,12,512,64],"dtype":"f16"},{"shape":[8,1,1,512],"dtype":"f16"}],"attrs":{"causal":false},"arch":"sm_90a"}\n' > /tmp/bert.json
printf '{"op":"attention","inputs":[{"shape":[8,12,512,64],"dtype":"f16"},{"shape":[8,12,512,64],"dtype":"f16"},{"shape":[8,12,512,64],"dtype":"f16"}],"attrs":{"causal":false},"arch":"sm_90a"}\n' > /tmp/bertnm.json
printf '{"op":"attention","inputs":[{"shape":[8,16,2048,256],"dtype":"f16"},{"shape":[8,16,2048,256],"dtype":"f16"},{"shape":[8,16,2048,256],"dtype":"f16"}],"attrs":{"causal":false},"arch":"sm_90a"}\n' > /tmp/hd256.json
gen() { build/bench/kgen --template attention_wgmma -o .gpu/kbn/$1 $2 $3 > /dev/null; }
gen attn_bert /tmp/bert.json block_n=128,consumers=2,stages=3,overlap=1,pingpong=1
gen attn_bert_nomask /tmp/bertnm.json block_n=128,consumers=2,stages=3,overlap=1,pingpong=1
gen attn_bert_nopp /tmp/bert.json block_n=128,consumers=2,stages=3,overlap=1,pingpong=0
gen attn_hd256_c2 /tmp/hd256.json block_n=80,consumers=2,stages=2,overlap=0,pingpong=0
gen attn_hd256_c1 /tmp/hd256.json block_n=64,consumers=1,stages=3,overlap=1,pingpong=0
