/* tuner/nvrtc.c - CUDA C -> PTX + cubin with NVRTC, and the version strings of the cache key.
 *
 * One compile for the real target (--gpu-architecture=sm_XX, or sm_90a for the arch-specific
 * target) gives both the cubin and the PTX: NVRTC 12+/13 keeps the PTX of a real-arch compile
 * available through nvrtcGetPTX (checked by tests/test_nvrtc), so no second compile is needed.
 * NVRTC programs are independent objects, so concurrent calls from the thread pool are safe.
 */
#include "tuner/codegen.h"
#include "tuner/compile_cache.h"
#include "tuner/tuner.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nvrtc.h>

#include "tuner/codegen_version.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Concatenation of up to three strings (malloc'd; NULL on OOM). */
static char *cat3(const char *a, const char *b, const char *c)
{
    size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
    char *s = malloc(la + lb + lc + 1);
    if (s) {
        memcpy(s, a, la);
        memcpy(s + la, b, lb);
        memcpy(s + la + lb, c, lc + 1);
    }
    return s;
}

void tuner_binary_free(tuner_binary *b)
{
    if (!b)
        return;
    free(b->ptx);
    free(b->cubin);
    free(b->log);
    free(b);
}

int tuner_compile(const char *source, const tuner_target *t, tuner_binary **ret, char **ret_err)
{
    if (!source || !t || !ret)
        return -EINVAL;
    if (tuner_target_id_of(t) < 0)
        return -EINVAL;

    int r = -ENOMEM;
    nvrtcProgram prog = NULL;
    tuner_binary *b = NULL;
    char *err = NULL;
    char arch[48];
    snprintf(arch, sizeof(arch), "--gpu-architecture=sm_%d%s", t->sm, t->arch_specific ? "a" : "");

    /* The numerics flags are one string (it is part of the cache key); split it into options. */
    char flags[128];
    snprintf(flags, sizeof(flags), "%s", tuner_numerics_flags());
    const char *opts[16] = {arch, "-std=c++17", "-default-device"};
    int n_opts = 3;
    char *save = NULL;
    for (char *tok = strtok_r(flags, " ", &save); tok && n_opts < 16; tok = strtok_r(NULL, " ", &save))
        opts[n_opts++] = tok;

    double t0 = now_ms();
    /* With HIDETD_COMPILE_CACHE set, an identical compile done before (by any process) is
     * reused: compile_cache.h. */
    char key[65] = "";
    if (tuner__compile_cache_dir()) {
        tuner__compile_cache_key(source, opts, n_opts, key);
        r = tuner__compile_cache_get(key, &b);
        if (r == 1) {
            b->compile_ms = now_ms() - t0;
            *ret = b;
            return 0;
        }
        if (r < 0)
            goto out;
        r = -ENOMEM;
    }

    b = calloc(1, sizeof(*b));
    if (!b)
        goto out;
    nvrtcResult nr = nvrtcCreateProgram(&prog, source, "hidetd.cu", 0, NULL, NULL);
    if (nr != NVRTC_SUCCESS) {
        r = nr == NVRTC_ERROR_OUT_OF_MEMORY ? -ENOMEM : -EINVAL;
        err = cat3("nvrtc: ", nvrtcGetErrorString(nr), "");
        prog = NULL;
        goto out;
    }
    nvrtcResult cr = nvrtcCompileProgram(prog, n_opts, opts);
    b->compile_ms = now_ms() - t0;

    size_t log_len = 0;
    if (nvrtcGetProgramLogSize(prog, &log_len) != NVRTC_SUCCESS || log_len == 0)
        log_len = 1;
    b->log = calloc(1, log_len);
    if (!b->log)
        goto out;
    if (log_len > 1 && nvrtcGetProgramLog(prog, b->log) != NVRTC_SUCCESS)
        b->log[0] = '\0';

    if (cr != NVRTC_SUCCESS) {
        r = cr == NVRTC_ERROR_OUT_OF_MEMORY ? -ENOMEM : -EINVAL;
        err = cat3("nvrtc: ", nvrtcGetErrorString(cr), "\n");
        if (err) {
            char *full = cat3(err, b->log, "");
            free(err);
            err = full;
        }
        goto out;
    }

    size_t ptx_size = 0, cubin_size = 0;
    nr = nvrtcGetPTXSize(prog, &ptx_size);
    if (nr == NVRTC_SUCCESS && ptx_size > 0) {
        b->ptx = malloc(ptx_size);
        if (!b->ptx)
            goto out;
        nr = nvrtcGetPTX(prog, b->ptx);
    }
    if (nr != NVRTC_SUCCESS || ptx_size == 0) {
        r = -EIO;
        err = cat3("nvrtc: no PTX: ", nvrtcGetErrorString(nr), "");
        goto out;
    }
    b->ptx[ptx_size - 1] = '\0';
    b->ptx_len = strlen(b->ptx);

    nr = nvrtcGetCUBINSize(prog, &cubin_size);
    if (nr == NVRTC_SUCCESS && cubin_size > 0) {
        b->cubin = malloc(cubin_size);
        if (!b->cubin)
            goto out;
        nr = nvrtcGetCUBIN(prog, (char *)b->cubin);
    }
    if (nr != NVRTC_SUCCESS || cubin_size == 0) {
        r = -EIO;
        err = cat3("nvrtc: no cubin: ", nvrtcGetErrorString(nr), "");
        goto out;
    }
    b->cubin_len = cubin_size;
    if (key[0])
        tuner__compile_cache_put(key, b);

    *ret = b;
    b = NULL;
    r = 0;
out:
    if (prog)
        nvrtcDestroyProgram(&prog);
    tuner_binary_free(b);
    if (err && ret_err)
        *ret_err = err;
    else
        free(err);
    return r;
}

int tuner_warm_up(const tuner_target *t, char **ret_err)
{
    if (!t)
        return -EINVAL;
    tuner_sb sb;
    tuner_sb_init(&sb);
    tuner__prelude(&sb, t->sm);
    tuner_sb_puts(&sb, "extern \"C\" __global__ void hidetd_warm_up(float *p)\n"
                       "{\n    p[threadIdx.x] = 0.0f;\n}\n");
    char *source = tuner_sb_take(&sb);
    if (!source)
        return -ENOMEM;
    tuner_binary *b = NULL;
    int r = tuner_compile(source, t, &b, ret_err);
    tuner_binary_free(b);
    free(source);
    return r;
}

static pthread_once_t version_once = PTHREAD_ONCE_INIT;
static char version_buf[32];

static void version_init(void)
{
    int major = 0, minor = 0;
    if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS)
        snprintf(version_buf, sizeof(version_buf), "unknown");
    else
        snprintf(version_buf, sizeof(version_buf), "%d.%d", major, minor);
}

const char *tuner_nvrtc_version(void)
{
    pthread_once(&version_once, version_init);
    return version_buf;
}

const char *tuner_codegen_version(void)
{
    return TUNER_CODEGEN_VERSION;
}
