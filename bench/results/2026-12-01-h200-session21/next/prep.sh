#!/usr/bin/env bash
# Session 21, call d's programs (on the CPU machine from the repository root, after
# bench/pack_gpu.sh; again next session if wanted): attention_wgmma at D = 256 with one K and one V slot (stages 1, 128 keys:
# cuDNN's tile there) against the model's pick (80 keys in two stages), into .gpu/kbs. Cases
# [8,16,2048,256] and [2,16,8192,256] f16, and BERT's [8,12,512,64] with its [8,1,1,512] mask,
# where one slot each lets the mask warp write only after P.V (is that on the critical path?).
set -eu
rm -rf .gpu/kbs && mkdir -p .gpu/kbs
req() { # file b h s d [mask]
    local m=""
    [ $# -gt 5 ] && m=$(printf ',{"shape":[%d,1,1,%d],"dtype":"f16"}' $2 $4)
    printf '{"op":"attention","inputs":[{"shape":[%d,%d,%d,%d],"dtype":"f16"},{"shape":[%d,%d,%d,%d],"dtype":"f16"},{"shape":[%d,%d,%d,%d],"dtype":"f16"}%s],"attrs":{"causal":false},"arch":"sm_90a"}\n' \
        $2 $3 $4 $5 $2 $3 $4 $5 $2 $3 $4 $5 "$m" > $1
}
req /tmp/n_hd256.json 8 16 2048 256
req /tmp/n_hd256l.json 2 16 8192 256
req /tmp/n_bertm.json 8 12 512 64 mask
gen() { build/bench/kgen --template attention_wgmma -o .gpu/kbs/$1 $2 $3 > /dev/null; }
for c in hd256 hd256l; do
    gen attn_${c}_80s2 /tmp/n_$c.json block_n=80,consumers=2,stages=2,overlap=0,pingpong=0
    gen attn_${c}_128s1 /tmp/n_$c.json block_n=128,consumers=2,stages=1,overlap=0,pingpong=0
    gen attn_${c}_128s1pp /tmp/n_$c.json block_n=128,consumers=2,stages=1,overlap=0,pingpong=1
    gen attn_${c}_96s1 /tmp/n_$c.json block_n=96,consumers=2,stages=1,overlap=0,pingpong=0
done
gen attn_bertm_pick /tmp/n_bertm.json block_n=128,consumers=2,stages=3,overlap=1,pingpong=1,sum_mma=1
gen attn_bertm_128s1 /tmp/n_bertm.json block_n=128,consumers=2,stages=1,overlap=0,pingpong=1,sum_mma=1
ls .gpu/kbs/*.json | wc -l
