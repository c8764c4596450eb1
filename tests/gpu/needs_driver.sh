#!/bin/sh
# tests/gpu/needs_driver.sh PROGRAM [ARGS...] - runs a GPU test program that links the CUDA
# driver; exits 77 (skipped, for meson) with the reason when libcuda.so.1 cannot be loaded here.
if ldd "$1" 2>/dev/null | grep -q "libcuda.so.1 => not found"; then
    echo "no CUDA GPU/driver: skipped (libcuda.so.1 is not installed on this machine)"
    exit 77
fi
exec "$@"
