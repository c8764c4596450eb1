/* tuner/tests/gpu_driver.c - the CUDA driver opened at run time for the tuner's GPU check programs
 * (gpu_driver.h says why dlopen). */
#include "gpu_driver.h"

#include <dlfcn.h>

#define GPU_DRIVER_DEFINE(name, sym, args) CUresult(*d_##name) args;
GPU_DRIVER_ENTRY_POINTS(GPU_DRIVER_DEFINE)
#undef GPU_DRIVER_DEFINE

tuner_tmap_encoders d_encoders;

bool gpu_driver_open(bool need_tmaps)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return false;
#define GPU_DRIVER_LOAD(name, sym, args)                                                           \
    *(void **)(&d_##name) = dlsym(h, sym);                                                         \
    if (!d_##name)                                                                                 \
        return false;
    GPU_DRIVER_ENTRY_POINTS(GPU_DRIVER_LOAD)
#undef GPU_DRIVER_LOAD
    *(void **)&d_encoders.tiled = dlsym(h, "cuTensorMapEncodeTiled");
    *(void **)&d_encoders.im2col = dlsym(h, "cuTensorMapEncodeIm2col");
    return !need_tmaps || (d_encoders.tiled && d_encoders.im2col);
}

bool gpu_driver_first_device(bool need_tmaps, CUdevice *ret_dev, int *ret_major, int *ret_minor)
{
    if (!gpu_driver_open(need_tmaps) || d_cuInit(0) != CUDA_SUCCESS) {
        printf("no CUDA GPU/driver: skipped\n");
        return false;
    }
    int count = 0;
    if (d_cuDeviceGetCount(&count) != CUDA_SUCCESS || count < 1) {
        printf("no CUDA GPU: skipped\n");
        return false;
    }
    CUdevice dev;
    CK(d_cuDeviceGet(&dev, 0));
    int major = 0, minor = 0;
    CK(d_cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    CK(d_cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    *ret_dev = dev;
    *ret_major = major;
    *ret_minor = minor;
    return true;
}

void gpu_driver_use(CUdevice dev)
{
    CUcontext ctx;
    CK(d_cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(d_cuCtxSetCurrent(ctx));
}

void gpu_launch(CUmodule mod, const tuner_program *p, const CUdeviceptr *bufs, CUstream st)
{
    gpu_launch_sizes(mod, p, bufs, NULL, st);
}

void gpu_launch_sizes(CUmodule mod, const tuner_program *p, const CUdeviceptr *bufs, const int64_t *sizes,
                      CUstream st)
{
    for (int k = 0; k < p->n_kernels; k++) {
        const tuner_launch *l = &p->kernels[k];
        CUfunction f;
        CK(d_cuModuleGetFunction(&f, mod, l->name));
        if (l->shared_bytes > 48 * 1024)
            CK(d_cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)l->shared_bytes));
        void *args[TUNER_MAX_ARGS + TUNER_MAX_TMAPS];
        CUdeviceptr ptrs[TUNER_MAX_ARGS];
        long long dims[TUNER_MAX_ARGS];
        CUtensorMap maps[TUNER_MAX_TMAPS];
        for (int a = 0; a < l->n_args; a++) {
            if (l->args[a] >= TUNER_ARG_DIM0) {
                dims[a] = sizes ? (long long)sizes[l->args[a] - TUNER_ARG_DIM0] : 0;
                args[a] = &dims[a];
            } else {
                ptrs[a] = bufs[l->args[a]];
                args[a] = &ptrs[a];
            }
        }
        for (int m = 0; m < l->n_maps; m++) {
            /* a map whose dimensions follow the sizes is encoded for these sizes */
            tuner_tmap t = l->maps[m];
            if (sizes && tuner_tmap_bind(&l->maps[m], sizes, &t) != 0) {
                fprintf(stderr, "%s: map %d does not bind at these sizes\n", l->name, m);
                exit(2);
            }
            CK((CUresult)tuner_tmap_encode(&t, bufs[t.buf], &maps[m], &d_encoders));
            args[l->n_args + m] = &maps[m];
        }
        unsigned grid[3];
        for (int d = 0; d < 3; d++)
            grid[d] = sizes && l->grid_rule[d].dims ? (unsigned)tuner_grid_rule_eval(&l->grid_rule[d], sizes)
                                                    : l->grid[d];
        CK(d_cuLaunchKernel(f, grid[0], grid[1], grid[2], l->block[0], l->block[1], l->block[2], l->shared_bytes, st,
                            args, NULL));
    }
}
