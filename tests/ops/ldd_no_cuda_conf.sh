#!/usr/bin/env bash
# tests/ops/ldd_no_cuda_conf.sh - `ldd BINARY` as a host without the CUDA toolkit's loader entry
# would see it: LD_LIBRARY_PATH unset and, inside a private mount namespace, /etc/ld.so.cache
# replaced by one built from /etc/ld.so.conf minus every ld.so.conf.d file naming cuda. Only the
# binary's own RUNPATH can then find libnvrtc. The machine's real loader configuration is never
# touched: the substitute cache is bind-mounted in a namespace that ends with this script.
#
#   ldd_no_cuda_conf.sh BINARY      prints ldd's output; exit 0, 1 (ldd failed) or 77 (cannot:
#                                   not root, or no unshare/ldconfig; the reason is printed)
#   ldd_no_cuda_conf.sh BINARY DIR  the check the install and package tests make: prints the
#                                   nvrtc lines and what is not found; exit 1 with a FAIL line
#                                   when ldd fails, a library is not found or libnvrtc does not
#                                   resolve into DIR (the RUNPATH), 77 as above
set -euo pipefail
[ $# -eq 1 ] || [ $# -eq 2 ] || { echo "usage: $0 BINARY [NVRTC_DIR]" >&2; exit 2; }
bin=$1
nvrtc_dir=${2:-}
if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null || ! command -v ldconfig >/dev/null; then
    echo "SKIP: hiding the toolkit's ld.so.conf entry needs root, unshare and ldconfig"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# /etc/ld.so.conf includes /etc/ld.so.conf.d/*.conf: list the same files, without CUDA's.
: > "$tmp/ld.so.conf"
for f in /etc/ld.so.conf.d/*.conf; do
    [ -e "$f" ] || continue
    if grep -qi cuda "$f" || [[ $(basename "$f") == *cuda* ]]; then
        echo "(hidden: $f)" >&2
        continue
    fi
    grep -v '^[[:space:]]*include' "$f" >> "$tmp/ld.so.conf" || true
done
ldconfig -X -C "$tmp/ld.so.cache" -f "$tmp/ld.so.conf"
# No CUDA directory may be left in the substitute cache, or the check below proves nothing.
if ldconfig -p -C "$tmp/ld.so.cache" 2>/dev/null | grep -q 'libnvrtc\.so'; then
    echo "FAIL: libnvrtc is still in the loader cache without the toolkit's entries" >&2
    exit 1
fi
ldd_hidden() {
    env -u LD_LIBRARY_PATH unshare -m bash -c \
        'mount --bind "$1" /etc/ld.so.cache && ldd "$2"' _ "$tmp/ld.so.cache" "$bin"
}
if [ -z "$nvrtc_dir" ]; then
    ldd_hidden
    exit
fi
out=$(ldd_hidden) || { echo "$out"; echo "FAIL: ldd $bin failed"; exit 1; }
echo "$out" | grep -E 'nvrtc|not found' || true
if echo "$out" | grep -q 'not found'; then
    echo "FAIL: $bin has unresolved libraries"
    exit 1
fi
if ! echo "$out" | grep -q "libnvrtc[^ ]* => $nvrtc_dir/"; then
    echo "FAIL: libnvrtc is not found through the RUNPATH $nvrtc_dir"
    exit 1
fi
