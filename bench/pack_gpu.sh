#!/usr/bin/env bash
# bench/pack_gpu.sh - builds a release tree here and packs what the GPU machine needs into .gpu/
# (binaries, GPU test programs, and the shared libraries that machine lacks: it has CUDA and
# Python but no libuv, cJSON, http-parser, ...). The device tool carries .gpu/ with the call.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build-gpu -Dbuildtype=release >/dev/null
rm -rf .gpu && mkdir -p .gpu/bin .gpu/lib .gpu/tests
cp build-gpu/daemon/hidetd build-gpu/gpu_workers/hidetd-worker build-gpu/clients/c/hidetctl \
   build-gpu/bench/hitbench .gpu/bin/
cp -P build-gpu/clients/c/lib/libhidet-client.so* .gpu/lib/ 2>/dev/null || true
# The tuner's own GPU checks (every candidate against a reference): tuner_gpu_verify, the
# attention templates' tuner_gpu_attn_*, and the dynamic ops' checks at several sizes.
for t in build-gpu/tests/gpu/* build-gpu/scheduler/gpu_sched build-gpu/tuner/tests/tuner_gpu_verify \
         build-gpu/tuner/tests/tuner_gpu_verify_dyn build-gpu/tuner/gemm/tests/tuner_gpu_gemm_dynamic \
         build-gpu/tuner/attn/tests/tuner_gpu_attn_*; do
    case "$t" in *seccomp_exec) continue ;; esac
    [ -f "$t" ] && [ -x "$t" ] && cp "$t" .gpu/tests/
done
# The unit's system-call filter, applied without systemd on the GPU machine.
cp build-gpu/tests/gpu/seccomp_exec .gpu/bin/
python3 tests/gpu/syscall_filter.py > .gpu/syscalls.list
# Shared libraries: everything the binaries load except glibc itself and the CUDA libraries,
# which the GPU machine's driver and toolkit provide.
for b in .gpu/bin/* .gpu/tests/*; do
    ldd "$b" 2>/dev/null | awk '/=> \//{print $3}'
done | sort -u | grep -vE '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*|libcuda|libnvrtc[^/]*)\.so' \
    | while read -r lib; do cp -L "$lib" .gpu/lib/; done
du -sh .gpu
