#!/usr/bin/env bash
# Session 18, call i (after bench/pack_gpu.sh; from the repository root): every attention_wgmma
# candidate of hd 256 at [8,16,2048,256] and [2,16,8192,256] (issue 38's two hd256 rows), to see
# where the cost model's pick (64 keys, one consumer, 3 stages: 0.79-0.82 of cuDNN) stands.
set -eu
rm -rf .gpu/kbn && mkdir -p .gpu/kbn
for s in 2048 8192; do
    b=$((16384 / s))
    printf '{"op":"attention","inputs":[{"shape":[%d,16,%d,256],"dtype":"f16"},{"shape":[%d,16,%d,256],"dtype":"f16"},{"shape":[%d,16,%d,256],"dtype":"f16"}],"attrs":{"causal":false},"arch":"sm_90a"}\n' $b $s $b $s $b $s > /tmp/hd256_$s.json
    build/bench/kgen --rank 100 /tmp/hd256_$s.json 2>/dev/null | grep attention_wgmma | grep -o '"params":{[^}]*}' | sed 's/"params":{//; s/}//; s/"//g; s/:/=/g' |
    while read -r params; do
        name=attn_hd256_${s}_$(echo "$params" | sed 's/block_n=//; s/,consumers=/_c/; s/,stages=/_s/; s/,overlap=/_o/; s/,pingpong=/_p/')
        build/bench/kgen --template attention_wgmma -o .gpu/kbn/$name /tmp/hd256_$s.json "$params" > /dev/null 2>&1
    done
done
ls .gpu/kbn/*.json | wc -l
