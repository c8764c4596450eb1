#!/bin/sh
# tests/fuzz/check_no_nvrtc.sh BINARY... - fails when any BINARY needs NVRTC.
#
# The request parser and its fuzzers depend on op/ only, so they build and run where the CUDA
# toolkit's runtime libraries are absent and fuzz without loading a compiler. A dependency on
# tuner/ would bring NVRTC back silently; this catches it. readelf shows what a binary names
# itself, ldd what the loader pulls in through other libraries.
set -u
command -v readelf >/dev/null 2>&1 || { echo "readelf not found: skipped"; exit 77; }
status=0
for bin in "$@"; do
    if readelf -d "$bin" | grep -i 'NEEDED.*nvrtc'; then
        echo "FAIL: $bin names NVRTC as a needed library"
        status=1
    fi
    if command -v ldd >/dev/null 2>&1 && ldd "$bin" | grep -i nvrtc; then
        echo "FAIL: $bin loads NVRTC (directly or through another library)"
        status=1
    fi
    [ "$status" -eq 0 ] && echo "ok: $bin"
done
exit "$status"
