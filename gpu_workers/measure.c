/* gpu_workers/measure.c - verify and time one candidate on one GPU (see measure.h).
 *
 * Inputs and the reference's output are cached per input set (the inputs' dtypes and sizes, and
 * the reference output's size: one job's op), several sets at once (least recently used out, the
 * device memory they hold bounded), so that the jobs a GPU measures in turns each pay for their
 * random inputs and their reference run once, not at every switch. Inputs are generated on the
 * host from a seed derived from their descriptor (deterministic per job) and uploaded once.
 * Outputs and workspaces hold nothing across runs: one allocation of each serves every set,
 * grown to the largest asked for. Between timed runs the L2 is flushed by reading a buffer twice
 * its size (l2_flush.h: a read leaves clean lines, so no write-back of the flush falls into the
 * timed run) when the working set would otherwise stay resident; only the kernels sit between
 * the two timing events. Such a timed run is then GW_TIMED_RUNS runs of the candidate back to
 * back, each on its own copy of the inputs (cold after the flush) and of the scratch, and counts
 * their mean (see phase_time).
 */
#include "gpu_workers/measure.h"

#include "gpu_workers/compare.h"
#include "gpu_workers/l2_flush.h"
#include "op/op.h" /* tuner_fp8_to_f32: an FP8 output's values */

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

/* Threads a measurer may use for host work (see run_parts). */
#define GW_MAX_THREADS 8

/* Runs of the candidate in one timed span when the L2 is flushed before it (phase_time), and the
 * share of the sets' budget their copies of the inputs and scratch may take. */
#define GW_TIMED_RUNS 4
#define GW_TIMED_COPIES_SHARE 0.25

/* A heated request's timed spans are enqueued this many at a time, each between its own pair of
 * events, and waited on together; and its heating runs are enqueued in batches of up to
 * GW_HEAT_BATCH, one batch queued behind the one waited on (see phase_time). */
#define GW_HEATED_SPANS 128
#define GW_HEAT_BATCH 16

/* Input sets kept at once, and the share of the device's memory they may hold. */
#define GW_SETS 8
#define GW_SETS_MEMORY_SHARE 0.4
/* Host memory for the sets' reference outputs (F32, one per output element). */
#define GW_SETS_HOST_BYTES ((size_t)4 << 30)

/* The inputs of one op on the device and its reference output on the host. */
typedef struct gw_set {
    uint64_t key;      /* see set_key_of; 0: the slot is free */
    uint64_t used;     /* when it last served a request (the measurer's clock) */
    int n_inputs;
    CUdeviceptr in[GW_MAX_BUFFERS];
    CUdeviceptr ref_out;
    size_t device_bytes;

    /* The reference output (F32, on the host) for this set and a reference module. */
    uint64_t ref_key;
    float *ref_host;
    size_t ref_elems;
    double ref_rms, ref_maxabs; /* over the reference's finite elements */
    bool ref_finite;            /* some element is finite (all NaN/Inf checks nothing) */
} gw_set;

/* Device memory whose contents do not outlive a request (outputs, workspaces), grown on demand. */
typedef struct gw_spare {
    CUdeviceptr ptr;
    size_t cap;
} gw_spare;

struct gw_measurer {
    CUdevice dev;
    CUcontext ctx;
    CUstream stream;
    CUevent ev_start[GW_HEATED_SPANS], ev_end[GW_HEATED_SPANS]; /* a span's; [0] unless heated */
    CUevent ev_sync[2];                                          /* no timing: what is done */
    gw_device_info info;
    double launch_timeout_s;
    size_t l2_bytes;
    CUdeviceptr flush;          /* zero-filled, read by flush_fn */
    size_t flush_bytes;
    CUmodule flush_mod;
    CUfunction flush_fn;
    int threads;                /* for host work: this GPU's share of the CPUs, at most 8 */

    gw_set sets[GW_SETS];
    uint64_t clock;
    size_t sets_budget;         /* device bytes the sets may hold */
    gw_set *cur;                /* the set of the request being run */
    gw_spare spare[GW_MAX_BUFFERS]; /* by ordinal among the request's outputs and workspaces */

    /* The request's buffers as the launches see them (indices of gw_measure_req.buffers). */
    int n_buffers;
    gw_buffer bufs[GW_MAX_BUFFERS];
    CUdeviceptr ptr[GW_MAX_BUFFERS];
    size_t bytes[GW_MAX_BUFFERS];
    size_t set_bytes;           /* the request's working set */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *cu_text(CUresult r)
{
    const char *s = NULL;
    if (cuGetErrorString(r, &s) != CUDA_SUCCESS || !s)
        return "unknown CUDA error";
    return s;
}

static const char *cu_name(CUresult r)
{
    const char *s = NULL;
    if (cuGetErrorName(r, &s) != CUDA_SUCCESS || !s)
        return "CUDA_ERROR_UNKNOWN";
    return s;
}

static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

#define FNV0 0xcbf29ce484222325ULL

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* ---- host work split over threads ----
 *
 * Checking a candidate converts and compares its whole output with the reference on the host,
 * and a new input set is generated there: tens of millions of elements for a large GEMM, which
 * on one core took several times longer than timing the candidate. Such loops are split into
 * contiguous parts run on the measurer's threads (part 0 on the calling thread). */
typedef void (*part_fn)(void *ctx, int part, size_t begin, size_t end);

typedef struct part_job {
    part_fn fn;
    void *ctx;
    int part;
    size_t begin, end;
} part_job;

static void *part_main(void *arg)
{
    part_job *j = arg;
    j->fn(j->ctx, j->part, j->begin, j->end);
    return NULL;
}

/* Runs fn over [0, n) in at most `parts` parts of at least 64 Ki elements; returns how many. */
static int run_parts(int parts, size_t n, part_fn fn, void *ctx)
{
    enum { MIN_PART = 1 << 16 };
    if ((size_t)parts > n / MIN_PART)
        parts = (int)(n / MIN_PART);
    parts = parts < 1 ? 1 : parts > GW_MAX_THREADS ? GW_MAX_THREADS : parts;
    pthread_t th[GW_MAX_THREADS];
    part_job jobs[GW_MAX_THREADS];
    bool started[GW_MAX_THREADS] = {false};
    for (int i = 0; i < parts; i++) {
        jobs[i] = (part_job){fn, ctx, i, n / (size_t)parts * (size_t)i,
                             i == parts - 1 ? n : n / (size_t)parts * (size_t)(i + 1)};
        if (i > 0)
            started[i] = pthread_create(&th[i], NULL, part_main, &jobs[i]) == 0;
    }
    part_main(&jobs[0]);
    for (int i = 1; i < parts; i++) {
        if (started[i])
            pthread_join(th[i], NULL);
        else
            part_main(&jobs[i]); /* no thread to be had: done here */
    }
    return parts;
}

/* This GPU's share of the CPUs this process may run on. */
static int host_threads(int n_devices)
{
    cpu_set_t set;
    long cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set)
                                                            : sysconf(_SC_NPROCESSORS_ONLN);
    long t = cpus / (n_devices > 0 ? n_devices : 1);
    return t < 1 ? 1 : t > GW_MAX_THREADS ? GW_MAX_THREADS : (int)t;
}

static uint16_t f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, e8 = (x >> 23) & 0xff, mant = x & 0x7fffff;
    if (e8 == 0xff)
        return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
    int32_t e = (int32_t)e8 - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00);
    if (e <= 0) {
        if (e < -10)
            return (uint16_t)sign;
        mant |= 0x800000;
        uint32_t shift = (uint32_t)(14 - e), h = mant >> shift, rem = mant & ((1u << shift) - 1),
                 half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (mant >> 13), rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
        h++; /* a carry into the exponent is the correct rounding */
    return (uint16_t)(sign | h);
}

static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, mant = h & 0x3ff, x;
    if (e == 0) {
        if (!mant) {
            x = sign;
        } else {
            e = 127 - 15 + 1;
            while (!(mant & 0x400)) {
                mant <<= 1;
                e--;
            }
            x = sign | (e << 23) | ((mant & 0x3ff) << 13);
        }
    } else if (e == 31) {
        x = sign | 0x7f800000 | (mant << 13);
    } else {
        x = sign | ((e - 15 + 127) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

static float bf16_to_f32(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static size_t dsize(gw_dtype d)
{
    return d == GW_I64 ? 8 : d == GW_F32 || d == GW_I32 ? 4 : d == GW_F8E4M3 || d == GW_F8E5M2 ? 1 : 2;
}

int gw_probe_devices(gw_device_info *devs, int max, int *ret_n, char *err, size_t errlen)
{
    int count = 0, drv = 0, n = 0;
    CUresult r;

    if (!ret_n || max < 0 || (max && !devs))
        return -EINVAL;
    if (err && errlen)
        err[0] = 0;
    r = cuInit(0);
    if (r != CUDA_SUCCESS) {
        /* The stub cannot even name its own errors; say what it means. */
        if (err && errlen && r == CUDA_ERROR_STUB_LIBRARY)
            snprintf(err, errlen, "cuInit: the CUDA driver stub library was loaded, no NVIDIA "
                                  "driver is installed (CUDA_ERROR_STUB_LIBRARY)");
        else if (err && errlen)
            snprintf(err, errlen, "cuInit: %s (%s, code %d)", cu_text(r), cu_name(r), (int)r);
        *ret_n = 0;
        return 0;
    }
    cuDriverGetVersion(&drv);
    r = cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS) {
        if (err && errlen)
            snprintf(err, errlen, "cuDeviceGetCount: %s", cu_text(r));
        *ret_n = 0;
        return 0;
    }
    if (count == 0 && err && errlen)
        snprintf(err, errlen, "the CUDA driver reports no devices");
    for (int i = 0; i < count && n < max && n < GW_MAX_DEVICES; i++) {
        CUdevice d;
        int maj = 0, min = 0, sms = 0;
        size_t mem = 0;
        gw_device_info *o = &devs[n];
        if (cuDeviceGet(&d, i) != CUDA_SUCCESS)
            continue;
        memset(o, 0, sizeof(*o));
        o->index = i;
        if (cuDeviceGetName(o->name, (int)sizeof(o->name) - 1, d) != CUDA_SUCCESS)
            snprintf(o->name, sizeof(o->name), "CUDA device %d", i);
        cuDeviceGetAttribute(&maj, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d);
        cuDeviceGetAttribute(&min, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d);
        cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d);
        cuDeviceTotalMem(&mem, d);
        o->sm = maj * 10 + min;
        o->sm_count = sms > 0 ? sms : 1;
        o->mem_bytes = mem;
        o->driver_version = drv;
        n++;
    }
    *ret_n = n;
    return 0;
}

/* JITs the L2 flush kernel for this device (once per worker: milliseconds). */
static int load_flush_kernel(gw_measurer *m, char *err, size_t errlen)
{
    char log[1024] = "";
    CUjit_option opt[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *val[2] = {log, (void *)(uintptr_t)sizeof(log)};
    CUresult r = cuModuleLoadDataEx(&m->flush_mod, gw_l2_flush_ptx, 2, opt, val);
    if (r == CUDA_SUCCESS)
        r = cuModuleGetFunction(&m->flush_fn, m->flush_mod, GW_L2_FLUSH_KERNEL);
    if (r != CUDA_SUCCESS) {
        snprintf(err, errlen, "device %d: the L2 flush kernel: %s (%s)%s%.200s", m->info.index,
                 cu_text(r), cu_name(r), log[0] ? ": " : "", log);
        return -EIO;
    }
    return 0;
}

/* Reads the whole flush buffer: eight blocks of 256 threads per SM keep enough loads in flight
 * to stream it at DRAM speed. */
static CUresult flush_l2(gw_measurer *m)
{
    unsigned long long words = m->flush_bytes / 16;
    void *args[] = {&m->flush, &words};
    return cuLaunchKernel(m->flush_fn, (unsigned)m->info.sm_count * 8, 1, 1, 256, 1, 1, 0, m->stream,
                          args, NULL);
}

int gw_measurer_new(int device, double launch_timeout_s, gw_measurer **ret, char *err,
                    size_t errlen)
{
    gw_device_info devs[GW_MAX_DEVICES];
    int n = 0, l2 = 0, r;
    gw_measurer *m = NULL;
    CUresult cr;
    char perr[160];

    if (!ret || device < 0 || !(launch_timeout_s > 0))
        return -EINVAL;
    gw_probe_devices(devs, GW_MAX_DEVICES, &n, perr, sizeof(perr));
    int found = -1;
    for (int i = 0; i < n; i++)
        if (devs[i].index == device)
            found = i;
    if (found < 0) {
        snprintf(err, errlen, "no CUDA device %d%s%s", device, perr[0] ? ": " : "", perr);
        return -ENODEV;
    }
    m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    m->info = devs[found];
    m->launch_timeout_s = launch_timeout_s;
    m->threads = host_threads(n);
    if ((cr = cuDeviceGet(&m->dev, device)) != CUDA_SUCCESS ||
        (cr = cuDevicePrimaryCtxRetain(&m->ctx, m->dev)) != CUDA_SUCCESS)
        goto cuda_fail;
    if ((cr = cuCtxSetCurrent(m->ctx)) != CUDA_SUCCESS ||
        (cr = cuStreamCreate(&m->stream, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS ||
        (cr = cuEventCreate(&m->ev_sync[0], CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS ||
        (cr = cuEventCreate(&m->ev_sync[1], CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS)
        goto cuda_fail;
    for (int i = 0; i < GW_HEATED_SPANS; i++)
        if ((cr = cuEventCreate(&m->ev_start[i], CU_EVENT_DEFAULT)) != CUDA_SUCCESS ||
            (cr = cuEventCreate(&m->ev_end[i], CU_EVENT_DEFAULT)) != CUDA_SUCCESS)
            goto cuda_fail;
    cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, m->dev);
    m->l2_bytes = l2 > 0 ? (size_t)l2 : (size_t)(50u << 20);
    m->flush_bytes = 2 * m->l2_bytes;
    m->sets_budget = (size_t)((double)m->info.mem_bytes * GW_SETS_MEMORY_SHARE);
    if ((cr = cuMemAlloc(&m->flush, m->flush_bytes)) != CUDA_SUCCESS ||
        (cr = cuMemsetD8(m->flush, 0, m->flush_bytes)) != CUDA_SUCCESS)
        goto cuda_fail;
    if (load_flush_kernel(m, err, errlen) < 0) {
        gw_measurer_free(m);
        return -EIO;
    }
    *ret = m;
    return 0;
cuda_fail:
    snprintf(err, errlen, "device %d: %s (%s)", device, cu_text(cr), cu_name(cr));
    r = -EIO;
    gw_measurer_free(m);
    return r;
}

const gw_device_info *gw_measurer_device(const gw_measurer *m)
{
    return m ? &m->info : NULL;
}

static void drop_set(gw_measurer *m, gw_set *s)
{
    for (int i = 0; i < s->n_inputs; i++)
        if (s->in[i])
            cuMemFree(s->in[i]);
    if (s->ref_out)
        cuMemFree(s->ref_out);
    free(s->ref_host);
    if (m->cur == s)
        m->cur = NULL;
    memset(s, 0, sizeof(*s));
}

static void free_buffers(gw_measurer *m)
{
    for (int i = 0; i < GW_SETS; i++)
        drop_set(m, &m->sets[i]);
    for (int i = 0; i < GW_MAX_BUFFERS; i++)
        if (m->spare[i].ptr)
            cuMemFree(m->spare[i].ptr);
    memset(m->spare, 0, sizeof(m->spare));
    m->n_buffers = 0;
    m->set_bytes = 0;
}

gw_measurer *gw_measurer_free(gw_measurer *m)
{
    if (!m)
        return NULL;
    if (m->ctx) {
        cuCtxSetCurrent(m->ctx);
        free_buffers(m);
        if (m->flush)
            cuMemFree(m->flush);
        if (m->flush_mod)
            cuModuleUnload(m->flush_mod);
        for (int i = 0; i < GW_HEATED_SPANS; i++) {
            if (m->ev_start[i])
                cuEventDestroy(m->ev_start[i]);
            if (m->ev_end[i])
                cuEventDestroy(m->ev_end[i]);
        }
        for (int i = 0; i < 2; i++)
            if (m->ev_sync[i])
                cuEventDestroy(m->ev_sync[i]);
        if (m->stream)
            cuStreamDestroy(m->stream);
        cuDevicePrimaryCtxRelease(m->dev);
    }
    free(m);
    return NULL;
}

/* Identifies the data a reference sees: every input, in order (inputs are a pure function of
 * their descriptor and position, see fill_input), and the size of the reference's output. Outputs
 * and workspaces, which differ between candidates of one op, are left out. */
static uint64_t set_key_of(const gw_measure_req *req)
{
    uint64_t h = FNV0;
    for (int i = 0; i < req->n_buffers; i++) {
        const gw_buffer *b = &req->buffers[i];
        if (b->role == GW_BUF_OUTPUT || b->role == GW_BUF_SCRATCH)
            continue;
        uint32_t t[2] = {b->role, b->dtype};
        h = fnv(h, t, sizeof(t));
        h = fnv(h, &b->elems, sizeof(b->elems));
        h = fnv(h, req->int_range[i], sizeof(req->int_range[i]));
    }
    return h ? h : 1;
}

static uint64_t module_key(uint64_t h, const gw_module *mod)
{
    h = fnv(h, mod->image, mod->image_len);
    for (int i = 0; i < mod->n_launches; i++) {
        const gw_launch *l = &mod->launches[i];
        h = fnv(h, l->name, strlen(l->name));
        h = fnv(h, l->grid, sizeof(l->grid));
        h = fnv(h, l->block, sizeof(l->block));
        h = fnv(h, &l->shared_bytes, sizeof(l->shared_bytes));
        h = fnv(h, l->args, sizeof(int) * (size_t)l->n_args);
        h = fnv(h, l->values, sizeof(l->values[0]) * (size_t)l->n_args);
        for (int k = 0; k < l->n_maps; k++) {
            uint8_t rec[TUNER_TMAP_PACKED];
            tuner_tmap_pack(&l->maps[k], rec);
            h = fnv(h, rec, sizeof(rec));
        }
    }
    return h ? h : 1;
}

typedef struct fill_ctx {
    const gw_buffer *b;
    uint8_t *host;
    uint64_t seed, first; /* the element host[0] holds */
    int64_t lo, hi;       /* integer buffers: the values' range */
} fill_ctx;

static void fill_part(void *arg, int part, size_t begin, size_t end)
{
    (void)part;
    const fill_ctx *f = arg;
    /* splitmix's state after n values is seed + n * its increment, so a part starts anywhere. */
    uint64_t s = f->seed + (f->first + begin) * 0x9e3779b97f4a7c15ULL;
    for (size_t k = begin; k < end; k++) {
        const uint64_t bits = splitmix(&s);
        if (f->b->dtype == GW_I32 || f->b->dtype == GW_I64) {
            const int64_t iv = f->lo + (int64_t)(bits % (uint64_t)(f->hi - f->lo));
            if (f->b->dtype == GW_I64)
                memcpy(f->host + 8 * k, &iv, 8);
            else {
                const int32_t i32 = (int32_t)iv;
                memcpy(f->host + 4 * k, &i32, 4);
            }
            continue;
        }
        if (f->b->dtype == GW_F8E4M3 || f->b->dtype == GW_F8E5M2) {
            /* A random byte whose exponent's top bit is cleared: every sign, mantissa and
             * subnormal, magnitudes below 2, never NaN or inf (e4m3's S.1111.111, e5m2's
             * exponent 31). */
            const unsigned e = f->b->dtype == GW_F8E4M3 ? (bits >> 3) & 15u : (bits >> 2) & 31u;
            const unsigned top = f->b->dtype == GW_F8E4M3 ? 8u : 16u;
            f->host[k] = (uint8_t)((bits & 0xffu) ^ (e >= top ? 0x40u : 0u));
            continue;
        }
        float v = (float)((double)(bits >> 11) * (2.0 / 9007199254740992.0) - 1.0);
        if (f->b->dtype == GW_F32)
            memcpy(f->host + 4 * k, &v, 4);
        else {
            uint16_t h = f->b->dtype == GW_F16 ? f32_to_f16(v) : f32_to_bf16(v);
            memcpy(f->host + 2 * k, &h, 2);
        }
    }
}

/* Fills the `pos`-th input (descriptor b) with uniform values in [-1, 1] (integers in
 * [range[0], range[1])), in chunks. The seed
 * depends on the descriptor and the position only, so the same input always holds the same
 * values (on every GPU, and after its set was dropped and made again). */
static CUresult fill_input(const gw_measurer *m, const gw_buffer *b, const int64_t *range, int pos,
                           CUdeviceptr dst)
{
    enum { CHUNK = 1 << 24 };
    size_t es = dsize(b->dtype);
    size_t chunk = b->elems < CHUNK ? (size_t)b->elems : CHUNK;
    uint8_t *host = malloc((chunk ? chunk : 1) * es);
    CUresult r = CUDA_SUCCESS;
    if (!host)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fill_ctx f = {b, host, fnv(FNV0, b, sizeof(*b)) ^ (0x51ed2701ULL * (uint64_t)(pos + 1)), 0, range[0], range[1]};
    for (uint64_t off = 0; off < b->elems && r == CUDA_SUCCESS; off += CHUNK) {
        size_t n = b->elems - off < CHUNK ? (size_t)(b->elems - off) : CHUNK;
        f.first = off;
        run_parts(m->threads, n, fill_part, &f);
        r = cuMemcpyHtoD(dst + off * es, host, n * es);
    }
    free(host);
    return r;
}

/* Drops the least recently used set other than `keep`; false when there is none. */
static bool drop_oldest(gw_measurer *m, const gw_set *keep)
{
    gw_set *old = NULL;
    for (int i = 0; i < GW_SETS; i++) {
        gw_set *s = &m->sets[i];
        if (s->key && s != keep && (!old || s->used < old->used))
            old = s;
    }
    if (old)
        drop_set(m, old);
    return old != NULL;
}

static size_t sets_device_bytes(const gw_measurer *m)
{
    size_t n = 0;
    for (int i = 0; i < GW_SETS; i++)
        n += m->sets[i].device_bytes;
    return n;
}

static size_t sets_host_bytes(const gw_measurer *m)
{
    size_t n = 0;
    for (int i = 0; i < GW_SETS; i++)
        n += m->sets[i].ref_host ? m->sets[i].ref_elems * sizeof(float) : 0;
    return n;
}

/* cuMemAlloc that makes room by dropping other sets (least recently used first) when the device
 * is out of memory. */
static CUresult alloc_evicting(gw_measurer *m, CUdeviceptr *p, size_t bytes, const gw_set *keep)
{
    CUresult r;
    while ((r = cuMemAlloc(p, bytes ? bytes : 1)) == CUDA_ERROR_OUT_OF_MEMORY && drop_oldest(m, keep))
        ;
    if (r != CUDA_SUCCESS)
        *p = 0;
    return r;
}

/* The set of the request's inputs: the cached one, or a new one (inputs generated and uploaded,
 * the reference not yet run), made after dropping old sets past the slots or the budget. */
static CUresult find_set(gw_measurer *m, const gw_measure_req *req, gw_set **ret)
{
    uint64_t key = set_key_of(req);
    for (int i = 0; i < GW_SETS; i++)
        if (m->sets[i].key == key) {
            *ret = &m->sets[i];
            return CUDA_SUCCESS;
        }
    size_t need = 0;
    for (int i = 0; i < req->n_buffers; i++) {
        const gw_buffer *b = &req->buffers[i];
        if (b->role == GW_BUF_INPUT || b->role == GW_BUF_REF_OUTPUT)
            need += (size_t)b->elems * dsize(b->dtype);
    }
    gw_set *s = NULL;
    for (;;) {
        s = NULL;
        for (int i = 0; i < GW_SETS && !s; i++)
            if (!m->sets[i].key)
                s = &m->sets[i];
        if (s && sets_device_bytes(m) + need <= m->sets_budget)
            break;
        if (!drop_oldest(m, NULL))
            break; /* alone past the budget: tried anyway, the device may have the room */
    }
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY; /* not reached: a full table always has a set to drop */
    s->key = key;
    CUresult r = CUDA_SUCCESS;
    for (int i = 0; i < req->n_buffers && r == CUDA_SUCCESS; i++) {
        const gw_buffer *b = &req->buffers[i];
        size_t bytes = (size_t)b->elems * dsize(b->dtype);
        if (b->role == GW_BUF_INPUT) {
            int pos = s->n_inputs++;
            if ((r = alloc_evicting(m, &s->in[pos], bytes, s)) == CUDA_SUCCESS)
                r = fill_input(m, b, req->int_range[i], i, s->in[pos]);
            s->device_bytes += bytes;
        } else if (b->role == GW_BUF_REF_OUTPUT && !s->ref_out) {
            r = alloc_evicting(m, &s->ref_out, bytes, s);
            s->device_bytes += bytes;
        }
    }
    if (r != CUDA_SUCCESS) {
        drop_set(m, s);
        return r;
    }
    *ret = s;
    return CUDA_SUCCESS;
}

/* Lays the request's buffers out: inputs and the reference output from its set (made if new),
 * outputs and workspaces from the spare allocations, grown when too small. */
static CUresult prepare_set(gw_measurer *m, const gw_measure_req *req)
{
    gw_set *s = NULL;
    CUresult r = find_set(m, req, &s);
    if (r != CUDA_SUCCESS)
        return r;
    s->used = ++m->clock;
    m->cur = s;
    int n_in = 0, n_spare = 0;
    m->set_bytes = 0;
    for (int i = 0; i < req->n_buffers; i++) {
        const gw_buffer *b = &req->buffers[i];
        size_t bytes = (size_t)b->elems * dsize(b->dtype);
        CUdeviceptr p = 0;
        if (b->role == GW_BUF_INPUT) {
            p = s->in[n_in++];
        } else if (b->role == GW_BUF_REF_OUTPUT) {
            p = s->ref_out;
        } else {
            gw_spare *sp = &m->spare[n_spare++];
            if (sp->cap < bytes || !sp->ptr) {
                if (sp->ptr)
                    cuMemFree(sp->ptr);
                sp->cap = 0;
                if ((r = alloc_evicting(m, &sp->ptr, bytes, s)) != CUDA_SUCCESS)
                    return r;
                sp->cap = bytes;
            }
            p = sp->ptr;
        }
        m->bufs[i] = *b;
        m->ptr[i] = p;
        m->bytes[i] = bytes;
        m->set_bytes += bytes;
    }
    m->n_buffers = req->n_buffers;
    return CUDA_SUCCESS;
}

/* Waits for an event recorded on the stream, for at most budget_s. 0, -ETIMEDOUT, or -EIO with
 * the driver's error in *ret_err. Polling (not cuEventSynchronize) is what lets us give up; its
 * sleeps double up to 1 ms, so the GPU idles up to that long after a lone kernel ends (heating
 * keeps work queued behind the event waited on: phase_time). */
static int wait_event(CUevent ev, double budget_s, CUresult *ret_err)
{
    CUresult r;
    double deadline = now_s() + budget_s;
    long sleep_ns = 2000;
    for (;;) {
        r = cuEventQuery(ev);
        if (r == CUDA_SUCCESS)
            return 0;
        if (r != CUDA_ERROR_NOT_READY) {
            *ret_err = r;
            return -EIO;
        }
        if (now_s() > deadline)
            return -ETIMEDOUT;
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        if (sleep_ns < 1000000)
            sleep_ns *= 2;
    }
}

/* Waits for everything queued on the stream, for at most budget_s (see wait_event). */
static int wait_stream(gw_measurer *m, double budget_s, CUresult *ret_err)
{
    CUresult r = cuEventRecord(m->ev_sync[0], m->stream);
    if (r != CUDA_SUCCESS) {
        *ret_err = r;
        return -EIO;
    }
    return wait_event(m->ev_sync[0], budget_s, ret_err);
}

/* A module, its functions and their tensor-map parameters, encoded for this set's buffers. */
typedef struct loaded {
    CUmodule mod;
    CUfunction fn[GW_MAX_LAUNCHES];
    CUtensorMap maps[GW_MAX_LAUNCHES][GW_MAX_MAPS];
} loaded;

/* The driver's encoders with op/tmap.h's signatures (its enums passed as ints). */
static int encode_tiled(void *map, int dtype, uint32_t rank, void *addr, const uint64_t *dims, const uint64_t *strides,
                        const uint32_t *box, const uint32_t *element_strides, int interleave, int swizzle, int l2,
                        int oob)
{
    return cuTensorMapEncodeTiled((CUtensorMap *)map, (CUtensorMapDataType)dtype, rank, addr, dims, strides, box,
                                  element_strides, (CUtensorMapInterleave)interleave, (CUtensorMapSwizzle)swizzle,
                                  (CUtensorMapL2promotion)l2, (CUtensorMapFloatOOBfill)oob);
}

static int encode_im2col(void *map, int dtype, uint32_t rank, void *addr, const uint64_t *dims, const uint64_t *strides,
                         const int *lower, const int *upper, uint32_t channels, uint32_t pixels,
                         const uint32_t *element_strides, int interleave, int swizzle, int l2, int oob)
{
    return cuTensorMapEncodeIm2col((CUtensorMap *)map, (CUtensorMapDataType)dtype, rank, addr, dims, strides, lower,
                                   upper, channels, pixels, element_strides, (CUtensorMapInterleave)interleave,
                                   (CUtensorMapSwizzle)swizzle, (CUtensorMapL2promotion)l2,
                                   (CUtensorMapFloatOOBfill)oob);
}

static const tuner_tmap_encoders encoders = {encode_tiled, encode_im2col};

/* Loads the module and encodes its launches' tensor maps for the buffers of m's current set
 * (prepare_set ran), once, so that no encoding falls between the timed launches. */
static int load_module(const gw_measurer *m, const gw_module *mod, loaded *ret, char *why, size_t whylen)
{
    char log[2048] = "";
    CUjit_option opt[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *val[2] = {log, (void *)(uintptr_t)sizeof(log)};
    CUresult r;

    memset(ret, 0, sizeof(*ret));
    /* The driver reads a cubin by its ELF header and a PTX image as NUL-terminated text; a
     * buffer without either would make it read past the end, so check first. */
    bool elf = mod->image_len >= 4 && !memcmp(mod->image, "\177ELF", 4);
    if (!elf && !memchr(mod->image, 0, mod->image_len)) {
        snprintf(why, whylen, "image is neither a cubin nor NUL-terminated PTX");
        return -EINVAL;
    }
    r = cuModuleLoadDataEx(&ret->mod, mod->image, 2, opt, val);
    if (r != CUDA_SUCCESS) {
        snprintf(why, whylen, "cuModuleLoadDataEx: %s%s%.180s", cu_text(r), log[0] ? ": " : "",
                 log);
        ret->mod = NULL;
        return -EINVAL;
    }
    for (int i = 0; i < mod->n_launches; i++) {
        const gw_launch *l = &mod->launches[i];
        r = cuModuleGetFunction(&ret->fn[i], ret->mod, l->name);
        if (r != CUDA_SUCCESS) {
            snprintf(why, whylen, "kernel %s: %s", l->name, cu_text(r));
            goto fail;
        }
        for (int k = 0; k < l->n_maps; k++) {
            const tuner_tmap *t = &l->maps[k];
            if ((r = (CUresult)tuner_tmap_encode(t, m->ptr[t->buf], &ret->maps[i][k], &encoders)) != CUDA_SUCCESS) {
                snprintf(why, whylen, "kernel %s: tensor map %d: %s: %s", l->name, k, tuner_tmap_encoder_name(t),
                         cu_text(r));
                goto fail;
            }
        }
        if (l->shared_bytes > 48 * 1024) {
            r = cuFuncSetAttribute(ret->fn[i], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                   (int)l->shared_bytes);
            if (r != CUDA_SUCCESS) {
                snprintf(why, whylen, "kernel %s: %u bytes of shared memory: %s", l->name,
                         l->shared_bytes, cu_text(r));
                goto fail;
            }
        }
    }
    return 0;
fail:
    cuModuleUnload(ret->mod);
    ret->mod = NULL;
    return -EINVAL;
}

/* Launches a module's kernels on the buffers ptr (indices of the request's buffers) with the maps
 * encoded on them. */
static CUresult launch_on(gw_measurer *m, const gw_module *mod, const loaded *ld, const CUdeviceptr *ptr,
                          const CUtensorMap (*maps)[GW_MAX_MAPS])
{
    for (int i = 0; i < mod->n_launches; i++) {
        const gw_launch *l = &mod->launches[i];
        CUdeviceptr vals[GW_MAX_ARGS];
        long long scalars[GW_MAX_ARGS];
        void *params[GW_MAX_ARGS + GW_MAX_MAPS];
        for (int a = 0; a < l->n_args; a++) {
            /* A scalar (a dim's size) is a long long by value, as the kernel declares it. */
            if (l->args[a] == GW_ARG_I64) {
                scalars[a] = (long long)l->values[a];
                params[a] = &scalars[a];
                continue;
            }
            vals[a] = ptr[l->args[a]];
            params[a] = &vals[a];
        }
        /* The maps follow the pointers, passed by value (the driver copies 128 bytes each). */
        for (int k = 0; k < l->n_maps; k++)
            params[l->n_args + k] = (void *)&maps[i][k];
        CUresult r = cuLaunchKernel(ld->fn[i], l->grid[0], l->grid[1], l->grid[2], l->block[0],
                                    l->block[1], l->block[2], l->shared_bytes, m->stream,
                                    l->n_args + l->n_maps ? params : NULL, NULL);
        if (r != CUDA_SUCCESS)
            return r;
    }
    return CUDA_SUCCESS;
}

/* The module on the request's buffers (m's current set). */
static CUresult launch_module(gw_measurer *m, const gw_module *mod, const loaded *ld)
{
    return launch_on(m, mod, ld, m->ptr, (const CUtensorMap (*)[GW_MAX_MAPS])ld->maps);
}

/* Zeroes the scratch buffers among ptr (the request's buffers, or a timed span's copy of them). */
static CUresult zero_scratch_on(gw_measurer *m, const CUdeviceptr *ptr)
{
    for (int i = 0; i < m->n_buffers; i++)
        if (m->bufs[i].role == GW_BUF_SCRATCH) {
            CUresult r = cuMemsetD8Async(ptr[i], 0, m->bytes[i], m->stream);
            if (r != CUDA_SUCCESS)
                return r;
        }
    return CUDA_SUCCESS;
}

static CUresult zero_scratch(gw_measurer *m)
{
    return zero_scratch_on(m, m->ptr);
}

/* Outcome of one run step, so the callers share one error path. */
typedef enum { STEP_OK, STEP_FAULT, STEP_TIMEOUT, STEP_CANCELLED } step;

static step fail_step(gw_measurer *m, CUresult r, const char *what, gw_measure_result *res,
                      bool *fatal)
{
    snprintf(res->reason, sizeof(res->reason), "%s: %s (%s)", what, cu_text(r), cu_name(r));
    /* A launch can fail without poisoning the context (too many resources, bad config); the
     * context is unusable only when the error is sticky, which a synchronisation reports. */
    *fatal = cuCtxSynchronize() != CUDA_SUCCESS;
    res->status = GW_FAULT;
    return STEP_FAULT;
}

/* The step a wait (wait_event's w and r) ended: a timeout (per_launch_s each) is fatal. */
static step waited(gw_measurer *m, int w, CUresult r, const char *what, double per_launch_s,
                   gw_measure_result *res, bool *fatal)
{
    if (w == -ETIMEDOUT) {
        snprintf(res->reason, sizeof(res->reason), "%s: a launch ran longer than %.3g s", what,
                 per_launch_s);
        res->status = GW_TIMEOUT;
        *fatal = true;
        return STEP_TIMEOUT;
    }
    return w < 0 ? fail_step(m, r, what, res, fatal) : STEP_OK;
}

/* Queues one run of a module on the request's buffers: scratch zeroed, then its launches. */
static CUresult enqueue_run(gw_measurer *m, const gw_module *mod, const loaded *ld)
{
    CUresult r = zero_scratch(m);
    return r == CUDA_SUCCESS ? launch_module(m, mod, ld) : r;
}

/* Runs a module once (scratch zeroed first) and waits at most per_launch_s per launch. */
static step run_once(gw_measurer *m, const gw_module *mod, const loaded *ld, const char *what,
                     double per_launch_s, gw_measure_result *res, bool *fatal)
{
    CUresult r = enqueue_run(m, mod, ld);
    if (r != CUDA_SUCCESS)
        return fail_step(m, r, what, res, fatal);
    int w = wait_stream(m, per_launch_s * mod->n_launches, &r);
    return waited(m, w, r, what, per_launch_s, res, fatal);
}

typedef struct widen_ctx {
    const uint16_t *in;
    float *out;
    bool f16; /* else bf16 */
} widen_ctx;

static void widen_part(void *arg, int part, size_t begin, size_t end)
{
    (void)part;
    const widen_ctx *w = arg;
    for (size_t i = begin; i < end; i++)
        w->out[i] = w->f16 ? f16_to_f32(w->in[i]) : bf16_to_f32(w->in[i]);
}

static CUresult download_f32(gw_measurer *m, int idx, float *out)
{
    size_t n = (size_t)m->bufs[idx].elems;
    if (m->bufs[idx].dtype == GW_F32)
        return cuMemcpyDtoH(out, m->ptr[idx], n * 4);
    if (m->bufs[idx].dtype == GW_F8E4M3 || m->bufs[idx].dtype == GW_F8E5M2) {
        /* An FP8 output (a quantizing epilogue): one byte each, decoded exactly. */
        uint8_t *b = malloc(n ? n : 1);
        if (!b)
            return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r = cuMemcpyDtoH(b, m->ptr[idx], n);
        const tuner_dtype dt = m->bufs[idx].dtype == GW_F8E4M3 ? TUNER_F8E4M3 : TUNER_F8E5M2;
        for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++)
            out[i] = tuner_fp8_to_f32(dt, b[i]);
        free(b);
        return r;
    }
    uint16_t *tmp = malloc(n * 2);
    if (!tmp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = cuMemcpyDtoH(tmp, m->ptr[idx], n * 2);
    if (r == CUDA_SUCCESS) {
        widen_ctx w = {tmp, out, m->bufs[idx].dtype == GW_F16};
        run_parts(m->threads, n, widen_part, &w);
    }
    free(tmp);
    return r;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static bool cancelled(const atomic_bool *c)
{
    return c && atomic_load(c);
}

/* The state a run carries from one phase to the next. */
typedef struct run_state {
    gw_measurer *m;
    const gw_measure_req *req;
    const atomic_bool *cancel;
    gw_measure_result *res;
    loaded cand, ref;  /* unloaded by gw_measurer_run, after the last phase */
    loaded heater;     /* the request's heater, when it has one and it loaded (else .mod NULL) */
    char heater_why[160]; /* why a heater given was not used, for the result's reason */
    bool fatal;        /* the context is unusable (see fail_step, run_once) */
} run_state;

/* How a phase ended: passed (go on to the next phase), stopped the run (res says why), or saw the
 * cancel flag (gw_measurer_run reports GW_CANCELLED). */
typedef enum { PHASE_OK, PHASE_STOP, PHASE_CANCEL } phase;

/* Sum of squares, largest magnitude and count of the reference's finite elements, by part. */
typedef struct ref_stats_ctx {
    const float *ref;
    struct {
        double ss, mx;
        size_t n_finite;
    } part[GW_MAX_THREADS];
} ref_stats_ctx;

static void ref_stats_part(void *arg, int part, size_t begin, size_t end)
{
    ref_stats_ctx *c = arg;
    double ss = 0, mx = 0;
    size_t n_finite = 0;
    for (size_t i = begin; i < end; i++) {
        double v = c->ref[i];
        if (!isfinite(v))
            continue;
        n_finite++;
        ss += v * v;
        if (fabs(v) > mx)
            mx = fabs(v);
    }
    c->part[part].ss = ss;
    c->part[part].mx = mx;
    c->part[part].n_finite = n_finite;
}

/* Reference: makes sure the reference's output for this buffer set and reference module is on the
 * host (run once per set, see the file comment) and usable. */
static phase phase_reference(run_state *rs)
{
    gw_measurer *m = rs->m;
    const gw_measure_req *req = rs->req;
    gw_measure_result *res = rs->res;
    gw_set *set = m->cur;
    CUresult r;
    step st;

    uint64_t rk = module_key(set->key, &req->reference);
    if (rk != set->ref_key || !set->ref_host) {
        char why[200];
        free(set->ref_host);
        set->ref_host = NULL;
        set->ref_key = 0;
        if (load_module(m, &req->reference, &rs->ref, why, sizeof(why)) < 0) {
            snprintf(res->reason, sizeof(res->reason), "reference: %s", why);
            return PHASE_STOP;
        }
        int ro = req->ref_output_buffer;
        if ((r = cuMemsetD8Async(m->ptr[ro], 0xff, m->bytes[ro], m->stream)) != CUDA_SUCCESS) {
            fail_step(m, r, "reference", res, &rs->fatal);
            return PHASE_STOP;
        }
        /* The reference is simple rather than fast (a naive loop nest on a large shape can
         * take seconds), and it is trusted: it gets a longer leash than candidates. */
        double ref_s = 10 * m->launch_timeout_s > 20 ? 10 * m->launch_timeout_s : 20;
        if ((st = run_once(m, &req->reference, &rs->ref, "reference", ref_s, res, &rs->fatal)) !=
            STEP_OK)
            return PHASE_STOP;
        size_t n = (size_t)m->bufs[ro].elems;
        while (sets_host_bytes(m) + n * sizeof(float) > GW_SETS_HOST_BYTES && drop_oldest(m, set))
            ;
        set->ref_host = malloc(n * sizeof(float));
        if (!set->ref_host || (r = download_f32(m, ro, set->ref_host)) != CUDA_SUCCESS) {
            free(set->ref_host);
            set->ref_host = NULL;
            snprintf(res->reason, sizeof(res->reason), "reference output: out of memory");
            return PHASE_STOP;
        }
        /* An op may be undefined on part of the random inputs (sqrt or rsqrt of a negative,
         * as in a batchnorm's prepared scale): those elements are NaN or Inf in the reference
         * too, and phase_check holds the candidate to the same non-finite value there. The
         * tolerance is scaled by the finite elements only. */
        ref_stats_ctx rsc;
        memset(&rsc, 0, sizeof(rsc));
        rsc.ref = set->ref_host;
        int parts = run_parts(m->threads, n, ref_stats_part, &rsc);
        double ss = 0, mx = 0;
        size_t n_finite = 0;
        for (int p = 0; p < parts; p++) {
            ss += rsc.part[p].ss;
            mx = rsc.part[p].mx > mx ? rsc.part[p].mx : mx;
            n_finite += rsc.part[p].n_finite;
        }
        set->ref_elems = n;
        set->ref_rms = n_finite ? sqrt(ss / (double)n_finite) : 0;
        set->ref_maxabs = mx;
        set->ref_finite = n_finite > 0;
        set->ref_key = rk;
    }
    if (!set->ref_finite) {
        res->status = GW_WRONG;
        snprintf(res->reason, sizeof(res->reason), "the reference produced only NaN/Inf");
        return PHASE_STOP;
    }
    return PHASE_OK;
}

/* The comparison of a candidate's output with the reference (compare.h), by part: parts of
 * elements, or of whole rows when the request has them. */
typedef struct compare_ctx {
    const float *ref, *out;
    gw_tolerance tol;
    gw_compare_result part[GW_MAX_THREADS];
} compare_ctx;

static void compare_part(void *arg, int part, size_t begin, size_t end)
{
    compare_ctx *c = arg;
    const size_t unit = c->tol.row_len > 0 ? (size_t)c->tol.row_len : 1;
    gw_compare_range(c->ref, c->out, begin * unit, end * unit, &c->tol, &c->part[part]);
}

/* Check: runs the candidate once and compares its output with the reference's, element by
 * element; GW_WRONG when any element is out of tolerance. */
static phase phase_check(run_state *rs)
{
    gw_measurer *m = rs->m;
    const gw_measure_req *req = rs->req;
    gw_measure_result *res = rs->res;
    float *out = NULL;
    phase ph = PHASE_STOP;
    const gw_set *set = m->cur;
    CUresult r;
    step st;

    if (cancelled(rs->cancel))
        return PHASE_CANCEL;

    /* The checked run: poisoned output, so an element the candidate never writes is NaN. */
    int o = req->output_buffer;
    if ((r = cuMemsetD8Async(m->ptr[o], 0xff, m->bytes[o], m->stream)) != CUDA_SUCCESS) {
        fail_step(m, r, "candidate", res, &rs->fatal);
        goto out;
    }
    if ((st = run_once(m, &req->candidate, &rs->cand, "candidate", m->launch_timeout_s, res,
                        &rs->fatal)) != STEP_OK)
        goto out;
    size_t n = set->ref_elems;
    out = malloc(n * sizeof(float));
    if (!out || (r = download_f32(m, o, out)) != CUDA_SUCCESS) {
        snprintf(res->reason, sizeof(res->reason), "candidate output: cannot read back");
        goto out;
    }
    compare_ctx cmp;
    memset(&cmp, 0, sizeof(cmp));
    cmp.ref = set->ref_host;
    cmp.out = out;
    cmp.tol = (gw_tolerance){.atol = req->atol, .rtol = req->rtol, .rms = set->ref_rms, .row_len = req->row_len};
    int parts = run_parts(m->threads, req->row_len > 0 ? n / (size_t)req->row_len : n, compare_part, &cmp);
    double maxerr = 0;
    size_t bad = 0, first_bad = 0;
    for (int p = 0; p < parts; p++) {
        if (cmp.part[p].maxerr > maxerr)
            maxerr = cmp.part[p].maxerr;
        if (cmp.part[p].bad && !bad)
            first_bad = cmp.part[p].first_bad;
        bad += cmp.part[p].bad;
    }
    res->max_abs_err = maxerr;
    res->max_rel_err = set->ref_maxabs > 0 ? maxerr / set->ref_maxabs : (maxerr > 0 ? INFINITY : 0);
    if (bad) {
        res->status = GW_WRONG;
        snprintf(res->reason, sizeof(res->reason),
                 "%zu of %zu elements out of tolerance (first at %zu: %g vs %g)", bad, n,
                 first_bad, (double)out[first_bad], (double)set->ref_host[first_bad]);
        goto out;
    }
    ph = PHASE_OK;
out:
    free(out);
    return ph;
}

/* One more run of a timed span: its own inputs (copies of the set's) and scratch, the other
 * buffers (outputs, the reference output) shared; the candidate's maps encoded on them. */
typedef struct run_copy {
    CUdeviceptr ptr[GW_MAX_BUFFERS];
    bool owned[GW_MAX_BUFFERS]; /* allocated here: freed by free_copies */
    CUtensorMap maps[GW_MAX_LAUNCHES][GW_MAX_MAPS];
} run_copy;

static bool copied(const gw_buffer *b)
{
    return b->role == GW_BUF_INPUT || b->role == GW_BUF_SCRATCH;
}

static void free_copies(run_copy *copies, int n)
{
    for (int c = 0; c < n; c++)
        for (int i = 0; i < GW_MAX_BUFFERS; i++)
            if (copies[c].owned[i])
                cuMemFree(copies[c].ptr[i]);
}

/* Makes up to want - 1 copies for a timed span beside the request's own buffers; returns the
 * runs a span holds (1 + the copies made). Fewer when the copies would take more than their
 * share of the sets' budget or an allocation, copy or encoding fails: a span of one run is the
 * single launch after a flush that every candidate got before spans. */
static int make_copies(gw_measurer *m, const gw_module *mod, run_copy *copies, int want)
{
    size_t per_copy = 0;
    for (int i = 0; i < m->n_buffers; i++)
        if (copied(&m->bufs[i]))
            per_copy += m->bytes[i];
    const double room = (double)m->sets_budget * GW_TIMED_COPIES_SHARE;
    int made = 0;
    while (made < want - 1 && (double)per_copy * (made + 1) <= room) {
        run_copy *c = &copies[made];
        memset(c, 0, sizeof(*c));
        bool ok = true;
        for (int i = 0; i < m->n_buffers && ok; i++) {
            if (!copied(&m->bufs[i])) {
                c->ptr[i] = m->ptr[i];
                continue;
            }
            ok = cuMemAlloc(&c->ptr[i], m->bytes[i] ? m->bytes[i] : 1) == CUDA_SUCCESS;
            c->owned[i] = ok;
            if (ok && m->bufs[i].role == GW_BUF_INPUT && m->bytes[i])
                ok = cuMemcpyDtoDAsync(c->ptr[i], m->ptr[i], m->bytes[i], m->stream) == CUDA_SUCCESS;
        }
        for (int l = 0; l < mod->n_launches && ok; l++)
            for (int k = 0; k < mod->launches[l].n_maps && ok; k++) {
                const tuner_tmap *t = &mod->launches[l].maps[k];
                ok = tuner_tmap_encode(t, c->ptr[t->buf], &c->maps[l][k], &encoders) == 0;
            }
        if (!ok) {
            free_copies(c, 1);
            break;
        }
        made++;
    }
    return 1 + made;
}

/* Runs a module back to back for heat_ms (scratch zeroed before each run), *ret_runs counting
 * the runs. They are enqueued in batches of 1, 2, 4 ... GW_HEAT_BATCH runs, each batch queued
 * before the one ahead of it is waited on, so the GPU never waits on the host: waited on one at
 * a time (run_once), a 700 us GEMM left it idle about 30% of the time (wait_event's sleeps), its
 * draw below the power cap and its clock near the top, and 200 ms of it timed FP8
 * 8192x14336x4096 tiles at 667-689 us where a stream of them ran 740-800 (H200,
 * bench/results/2026-12-01-h200-session24, b). */
static step heat(gw_measurer *m, const gw_module *mod, const loaded *ld, double heat_ms,
                 const atomic_bool *cancel, gw_measure_result *res, bool *fatal, long *ret_runs)
{
    const double until = now_s() + heat_ms / 1000.0;
    const double per_launch_s = m->launch_timeout_s;
    int batch = 1, ahead = 0, cur = 0; /* ahead: runs in the batch queued before this one */
    CUresult r = CUDA_SUCCESS;
    step st = STEP_OK;
    *ret_runs = 0;
    do {
        if (cancelled(cancel)) {
            st = STEP_CANCELLED;
            break;
        }
        for (int i = 0; i < batch && r == CUDA_SUCCESS; i++)
            r = enqueue_run(m, mod, ld);
        if (r == CUDA_SUCCESS)
            r = cuEventRecord(m->ev_sync[cur], m->stream);
        if (r != CUDA_SUCCESS)
            return fail_step(m, r, "heating", res, fatal);
        *ret_runs += batch;
        if (ahead) {
            /* Both batches' time: the one waited on may have started only now. */
            const double budget_s = per_launch_s * mod->n_launches * (ahead + batch);
            int w = wait_event(m->ev_sync[cur ^ 1], budget_s, &r);
            if ((st = waited(m, w, r, "heating", per_launch_s, res, fatal)) != STEP_OK)
                return st;
        }
        ahead = batch;
        cur ^= 1;
        if (batch < GW_HEAT_BATCH)
            batch *= 2;
    } while (now_s() < until);
    if (ahead == 0)
        return st;
    /* The last batch, also when cancelled: nothing of it may run into the next request's work. */
    int w = wait_event(m->ev_sync[cur ^ 1], per_launch_s * mod->n_launches * ahead, &r);
    step last = waited(m, w, r, "heating", per_launch_s, res, fatal);
    return last != STEP_OK ? last : st;
}

/* Time: warm-up runs, then timed runs until max_reps, or min_reps and min_time_ms are both
 * reached, or the candidate clearly loses; GW_OK with the minimum and the median.
 *
 * Where the working set would stay in the L2, each timed run is a span after an L2 flush:
 * GW_TIMED_RUNS runs back to back, each on its own copy of the inputs, so that every run reads
 * them from DRAM, and the span's mean counts. A single launch after the flush, as before spans,
 * charged each launch its setup, which a stream of kernels overlaps with the kernel before:
 * 1.2-2 us more for kernels in clusters, none for the others, so that the tuner ranked a
 * swapped 64x56 pair at [100,4096] x [4096,4096] behind an unpaired tile that ran slower in a
 * stream (H200, session 20, kbench: the pair 13.6-13.8 us alone, 12.3-12.6 back to back, as fast
 * as cuBLAS; the unpaired tile 12.8-23.4 alone, 13.9-15.2 back to back). */
static phase phase_time(run_state *rs)
{
    gw_measurer *m = rs->m;
    const gw_measure_req *req = rs->req;
    const atomic_bool *cancel = rs->cancel;
    gw_measure_result *res = rs->res;
    double *times = NULL;
    run_copy *copies = NULL;
    int runs = 1;
    phase ph = PHASE_STOP;
    CUresult r;
    step st;

    for (int w = 0; w < req->warmup; w++) {
        if (cancelled(cancel))
            goto cancel;
        if ((st = run_once(m, &req->candidate, &rs->cand, "warmup", m->launch_timeout_s, res,
                            &rs->fatal)) != STEP_OK)
            goto out;
    }
    /* Heat (heat_ms): the heater (else the candidate) back to back, untimed, until the GPU's
     * power controller has answered its draw. On an H200 a large FP8 GEMM pulls the board to its
     * 700 W cap within about 100 ms and the SM clock falls from 1980 MHz to 1150-1500; timed in
     * short bursts near the top clock, tiles that differ in energy rank otherwise than in a
     * stream of them (bench/results/2026-12-01-h200-session23, f). Heated by itself, though, a
     * tile that draws less holds a higher clock than it gets among other kernels: the heater
     * also runs once before each timed span, so that a round's finalists all run at the clock
     * one common neighbour sets (bench/results/2026-12-02-h200-session25, d). */
    const bool heater = rs->heater.mod != NULL;
    const gw_module *heat_mod = heater ? &req->heater : &req->candidate;
    const loaded *heat_ld = heater ? &rs->heater : &rs->cand;
    long heat_runs = 0;
    double run_ms = 0; /* a run's time at the heating's pace */
    if (req->heat_ms > 0) {
        const double t_heat = now_s();
        st = heat(m, heat_mod, heat_ld, req->heat_ms, cancel, res, &rs->fatal, &heat_runs);
        if (st == STEP_CANCELLED)
            goto cancel;
        if (st != STEP_OK)
            goto out;
        run_ms = (now_s() - t_heat) * 1000.0 / (double)heat_runs;
    }
    times = malloc(sizeof(double) * (size_t)req->max_reps);
    if (!times) {
        snprintf(res->reason, sizeof(res->reason), "out of memory");
        goto out;
    }
    bool flush = m->set_bytes < m->flush_bytes;
    if (flush) {
        copies = calloc(GW_TIMED_RUNS - 1, sizeof(*copies));
        if (copies)
            runs = make_copies(m, &req->candidate, copies, GW_TIMED_RUNS);
    }
    double total_ms = 0, sum = 0, sumsq = 0;
    int reps = 0;
    while (!res->early_stopped && reps < req->max_reps &&
           (reps < req->min_reps || total_ms < req->min_time_ms)) {
        if (cancelled(cancel))
            goto cancel;
        /* Spans waited on together: one, or after heating as many as the reps and the time
         * still wanted take at the heating's pace (up to GW_HEATED_SPANS), queued back to back
         * so that the clock stays where the heating brought it. */
        int k = 1;
        if (heat_runs) {
            /* The heater's pace stands for the candidate's: the same op, a rival schedule. */
            const double left_ms = req->min_time_ms - total_ms;
            double want = run_ms > 0 && left_ms > 0 ? ceil(left_ms / (run_ms * runs)) : 1;
            if (want < req->min_reps - reps)
                want = req->min_reps - reps;
            k = (int)fmin(fmin(want, GW_HEATED_SPANS), req->max_reps - reps);
        }
        r = CUDA_SUCCESS;
        for (int i = 0; i < k && r == CUDA_SUCCESS; i++) {
            if (heater)
                r = enqueue_run(m, &req->heater, &rs->heater);
            if (r == CUDA_SUCCESS)
                r = zero_scratch(m);
            for (int c = 0; c < runs - 1 && r == CUDA_SUCCESS; c++)
                r = zero_scratch_on(m, copies[c].ptr);
            if (r == CUDA_SUCCESS && flush)
                r = flush_l2(m);
            if (r == CUDA_SUCCESS)
                r = cuEventRecord(m->ev_start[i], m->stream);
            if (r == CUDA_SUCCESS)
                r = launch_module(m, &req->candidate, &rs->cand);
            for (int c = 0; c < runs - 1 && r == CUDA_SUCCESS; c++)
                r = launch_on(m, &req->candidate, &rs->cand, copies[c].ptr,
                              (const CUtensorMap (*)[GW_MAX_MAPS])copies[c].maps);
            if (r == CUDA_SUCCESS)
                r = cuEventRecord(m->ev_end[i], m->stream);
        }
        if (r != CUDA_SUCCESS) {
            fail_step(m, r, "timed run", res, &rs->fatal);
            goto out;
        }
        const int launches = req->candidate.n_launches * runs + (heater ? req->heater.n_launches : 0);
        int w = wait_stream(m, m->launch_timeout_s * (launches + 1) * k, &r);
        if (waited(m, w, r, "timed run", m->launch_timeout_s, res, &rs->fatal) != STEP_OK)
            goto out;
        for (int i = 0; i < k && !res->early_stopped; i++) {
            float ms = 0;
            if ((r = cuEventElapsedTime(&ms, m->ev_start[i], m->ev_end[i])) != CUDA_SUCCESS) {
                fail_step(m, r, "event timing", res, &rs->fatal);
                goto out;
            }
            double us = (double)ms * 1000.0 / runs;
            times[reps++] = us;
            total_ms += ms;
            sum += us;
            sumsq += us * us;
            /* Early stop (Hidet-style): once a few runs give a confident lower bound on the mean
             * (mean - 2 standard errors) that is 15% above the time to beat, more runs only
             * confirm that this candidate loses. */
            if (req->beat_us > 0 && reps >= 5) {
                double mean = sum / reps, var = sumsq / reps - mean * mean;
                double lb = mean - 2.0 * sqrt(var > 0 ? var : 0) / sqrt((double)reps);
                res->early_stopped = lb > 1.15 * req->beat_us;
            }
        }
    }
    qsort(times, (size_t)reps, sizeof(double), cmp_double);
    res->reps = reps;
    res->min_us = times[0];
    res->median_us = reps % 2 ? times[reps / 2] : 0.5 * (times[reps / 2 - 1] + times[reps / 2]);
    res->status = GW_OK;
    if (res->early_stopped)
        snprintf(res->reason, sizeof(res->reason),
                 "stopped early after %d runs: clearly slower than %.2f us", reps, req->beat_us);
    else if (heat_runs)
        snprintf(res->reason, sizeof(res->reason), "timed after %d ms of back-to-back runs (%ld)%s%.100s",
                 (int)req->heat_ms, heat_runs, heater ? " of the heater, each span after one more" : "",
                 rs->heater_why);
    ph = PHASE_OK;
    goto out;

cancel:
    ph = PHASE_CANCEL;
out:
    /* After a fatal error (a launch that never ended, a poisoned context) the worker exits and
     * the memory goes with it: freeing would wait on the hung kernel. */
    if (copies && !rs->fatal) {
        cuStreamSynchronize(m->stream);
        free_copies(copies, runs - 1);
    }
    free(copies);
    free(times);
    return ph;
}

void gw_measurer_run(gw_measurer *m, const gw_measure_req *req, const atomic_bool *cancel,
                     gw_measure_result *res, bool *ret_fatal)
{
    run_state rs = {.m = m, .req = req, .cancel = cancel, .res = res};
    phase ph;
    CUresult r;

    if (!m || !req || !res || !ret_fatal)
        return;
    uint64_t id = req->id;
    memset(res, 0, sizeof(*res));
    res->id = id;
    res->device = m->info.index;
    res->status = GW_LOAD_ERROR;
    cuCtxSetCurrent(m->ctx);

    if ((r = prepare_set(m, req)) != CUDA_SUCCESS) {
        snprintf(res->reason, sizeof(res->reason), "buffers: %s", cu_text(r));
        goto out;
    }
    if (load_module(m, &req->candidate, &rs.cand, res->reason, sizeof(res->reason)) < 0)
        goto out;
    /* A heater that does not load (it loaded for its own timing: rare) leaves the candidate to
     * heat itself, said in the reason; it is not the candidate's fault. */
    if (req->heat_ms > 0 && req->heater.n_launches > 0) {
        char why[100];
        if (load_module(m, &req->heater, &rs.heater, why, sizeof(why)) < 0)
            snprintf(rs.heater_why, sizeof(rs.heater_why), "; the heater did not load (%s)", why);
    }

    /* Each phase runs only when the one before passed; without a check the candidate is timed
     * unverified. */
    ph = PHASE_OK;
    if (req->check)
        ph = phase_reference(&rs);
    if (req->check && ph == PHASE_OK)
        ph = phase_check(&rs);
    if (ph == PHASE_OK)
        ph = phase_time(&rs);
    if (ph == PHASE_CANCEL) {
        res->status = GW_CANCELLED;
        snprintf(res->reason, sizeof(res->reason), "cancelled");
    }
out:
    /* Unloading after a fault would fail anyway; the process exits then. */
    if (!rs.fatal) {
        if (rs.cand.mod)
            cuModuleUnload(rs.cand.mod);
        if (rs.ref.mod)
            cuModuleUnload(rs.ref.mod);
        if (rs.heater.mod)
            cuModuleUnload(rs.heater.mod);
    }
    res->id = id;
    res->device = m->info.index;
    *ret_fatal = rs.fatal;
}
