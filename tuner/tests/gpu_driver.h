/* tuner/tests/gpu_driver.h - the CUDA driver for the tuner's GPU check programs (tuner_gpu_verify,
 * tuner_gpu_attn_mma, tuner_gpu_attn_decode, tuner_gpu_attn_wgmma): the driver entry points they
 * call, as d_<name> pointers, the CK() check, the start of main (driver, device 0) and the launch
 * of a generated program.
 *
 * The driver is opened at run time with dlopen("libcuda.so.1") rather than linked: these programs
 * are built on every machine (with CUDA's headers and NVRTC, without a GPU or driver) and run
 * there as tests that must load and skip with exit 77, which a link against libcuda would prevent.
 * Each entry point is looked up by the versioned symbol cuda.h maps its plain name to.
 */
#ifndef HIDET_TUNER_TESTS_GPU_DRIVER_H
#define HIDET_TUNER_TESTS_GPU_DRIVER_H

#include <cuda.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "op/tmap.h"
#include "tuner/tuner.h"

/* X(name, versioned symbol, parameter list): every entry point the programs use. */
#define GPU_DRIVER_ENTRY_POINTS(X)                                                                 \
    X(cuInit, "cuInit", (unsigned))                                                                \
    X(cuDeviceGetCount, "cuDeviceGetCount", (int *))                                               \
    X(cuDeviceGet, "cuDeviceGet", (CUdevice *, int))                                               \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute", (int *, CUdevice_attribute, CUdevice))         \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext *, CUdevice))               \
    X(cuCtxSetCurrent, "cuCtxSetCurrent", (CUcontext))                                             \
    X(cuGetErrorString, "cuGetErrorString", (CUresult, const char **))                             \
    X(cuMemAlloc, "cuMemAlloc_v2", (CUdeviceptr *, size_t))                                        \
    X(cuMemFree, "cuMemFree_v2", (CUdeviceptr))                                                    \
    X(cuMemcpyHtoD, "cuMemcpyHtoD_v2", (CUdeviceptr, const void *, size_t))                        \
    X(cuMemcpyDtoH, "cuMemcpyDtoH_v2", (void *, CUdeviceptr, size_t))                              \
    X(cuMemsetD8, "cuMemsetD8_v2", (CUdeviceptr, unsigned char, size_t))                           \
    X(cuMemsetD8Async, "cuMemsetD8Async", (CUdeviceptr, unsigned char, size_t, CUstream))          \
    X(cuModuleLoadData, "cuModuleLoadData", (CUmodule *, const void *))                            \
    X(cuModuleUnload, "cuModuleUnload", (CUmodule))                                                \
    X(cuModuleGetFunction, "cuModuleGetFunction", (CUfunction *, CUmodule, const char *))          \
    X(cuFuncSetAttribute, "cuFuncSetAttribute", (CUfunction, CUfunction_attribute, int))           \
    X(cuLaunchKernel, "cuLaunchKernel",                                                            \
      (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, \
       void **, void **))                                                                          \
    X(cuStreamCreate, "cuStreamCreate", (CUstream *, unsigned))                                    \
    X(cuStreamSynchronize, "cuStreamSynchronize", (CUstream))                                      \
    X(cuStreamDestroy, "cuStreamDestroy_v2", (CUstream))                                           \
    X(cuEventCreate, "cuEventCreate", (CUevent *, unsigned))                                       \
    X(cuEventRecord, "cuEventRecord", (CUevent, CUstream))                                         \
    X(cuEventSynchronize, "cuEventSynchronize", (CUevent))                                         \
    X(cuEventElapsedTime, "cuEventElapsedTime_v2", (float *, CUevent, CUevent))                    \
    X(cuEventDestroy, "cuEventDestroy_v2", (CUevent))

#define GPU_DRIVER_DECLARE(name, sym, args) extern CUresult(*d_##name) args;
GPU_DRIVER_ENTRY_POINTS(GPU_DRIVER_DECLARE)
#undef GPU_DRIVER_DECLARE

/* The tensor-map encoders, as op/tmap.h calls them (enums as ints); both NULL until opened, and
 * after an open that did not need them where the driver has none (before CUDA 12). */
extern tuner_tmap_encoders d_encoders;

/* Opens libcuda.so.1 and looks up every entry point above, and the tensor-map encoders. Returns
 * false when the library or an entry point is missing, or, with need_tmaps, an encoder (the
 * programs that launch TMA kernels need both). Nothing is printed. */
bool gpu_driver_open(bool need_tmaps);

/* The start of every program's main: opens the driver (gpu_driver_open(need_tmaps)), cuInit and
 * the device count; on success *ret_dev is device 0 and *ret_major, *ret_minor its compute
 * capability, and returns true. Without a driver or device prints the skip line ("no CUDA
 * GPU/driver: skipped" or "no CUDA GPU: skipped") and returns false: the caller returns 77.
 * Driver errors after the count exit 2 (CK). The caller makes the device current
 * (gpu_driver_use) when it keeps it. */
bool gpu_driver_first_device(bool need_tmaps, CUdevice *ret_dev, int *ret_major, int *ret_minor);

/* Makes dev's primary context current on this thread (exit 2 on a driver error). */
void gpu_driver_use(CUdevice dev);

/* Launches every kernel of p on st, in order: its arguments are bufs[l->args[a]] (bufs indexed by
 * TUNER_BUF_*), then its TMA tensor maps encoded for bufs[map.buf] with d_encoders, as the worker
 * passes them; a kernel with more than 48 KiB of dynamic shared memory is allowed it first. Exits
 * 2 on a driver error. */
void gpu_launch(CUmodule mod, const tuner_program *p, const CUdeviceptr *bufs, CUstream st);

/* The same for a dynamic op's program at sizes[0..n_dims) of its named dims: a TUNER_ARG_DIM0 + k
 * argument passes sizes[k] (a long long by value), each grid dimension with a rule
 * (tuner_launch.grid_rule) is the rule's value at sizes, and a tensor map whose dimensions follow
 * the sizes is encoded for them (tuner_tmap_bind), as a client launches it. */
void gpu_launch_sizes(CUmodule mod, const tuner_program *p, const CUdeviceptr *bufs, const int64_t *sizes,
                      CUstream st);

/* Checks a driver call: on an error prints file, line, the call and the driver's message to
 * stderr and exits 2 (a failed check is a broken run, not a wrong candidate). */
#define CK(x)                                                                                      \
    do {                                                                                           \
        CUresult e_ = (x);                                                                         \
        if (e_ != CUDA_SUCCESS) {                                                                  \
            const char *s_ = NULL;                                                                 \
            d_cuGetErrorString(e_, &s_);                                                           \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, s_ ? s_ : "?");            \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

#endif
