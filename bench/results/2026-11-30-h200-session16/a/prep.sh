#!/usr/bin/env bash
# Prepared in session 15 for the next session. Run on the CPU machine from the repository root,
# after bench/pack_gpu.sh: writes .gpu/kb (kgen programs at [M,4096]x[4096,4096], M = 100, 104,
# 112: swapped 64x56 with 12 stages and register stores, swapped 64x104 with 8 and a staged tile,
# unswapped 64x64 with 8 and a staged tile; each also with its tensor maps' L2 promotion at 128
# and 256 bytes, the JSON edited, the cubin the same) and copies gpu_run.sh to .gpu/gpu_run_v.sh.
set -eu
rm -rf .gpu/kb && mkdir -p .gpu/kb
P=swizzle=8,pingpong=0,cluster=1,split_k=1,stream_k=0,cluster_n=1
for m in 100 104 112; do
    printf '{"op": "matmul", "inputs": [{"shape": [%d, 4096], "dtype": "f16"}, {"shape": [4096, 4096], "dtype": "f16"}], "arch": "sm_90a"}\n' $m > /tmp/req_v$m.json
    k() { build/bench/kgen --template matmul_wgmma -o .gpu/kb/m${m}_$1 /tmp/req_v$m.json $2 > /dev/null; }
    k sw64x56 block_m=64,block_n=56,stages=12,consumers=1,stage_out=0,swap=1,$P
    k sw64x104 block_m=64,block_n=104,stages=8,consumers=1,stage_out=1,swap=1,$P
    k un64x64 block_m=64,block_n=64,stages=8,consumers=1,stage_out=1,swap=0,$P
done
python3 - <<'PY'
import glob, json, shutil
for path in sorted(glob.glob(".gpu/kb/*.json")):
    base = path[:-5]
    for prom in (128, 256):
        j = json.load(open(path))
        for k in j["kernels"]:
            for m in k.get("maps", []):
                m["l2_promotion"] = prom
        json.dump(j, open(f"{base}_p{prom}.json", "w"))
        for ext in (".cubin", ".ref.cubin"):
            shutil.copy(base + ext, f"{base}_p{prom}{ext}")
PY
cp bench/results/2026-11-30-h200-session15/next/gpu_run.sh .gpu/gpu_run_v.sh
