/* gpu_workers/standin_main.c - hidetd-worker-standin: a CUDA-free worker for tests and for
 * machines without a GPU. It speaks exactly the protocol of hidetd-worker (same arguments, same
 * frames) with fake devices, so the pool, the scheduler and the daemon can be exercised end to
 * end on any machine.
 *
 * Measuring returns a deterministic latency derived from a hash of the candidate image and its
 * launch configuration: different candidates get different numbers, the same candidate always
 * the same. Verification passes unless a fault says otherwise.
 *
 * Environment:
 *   HIDETD_STANDIN_DEVICES=n      fake devices (default 1, at most 16)
 *   HIDETD_STANDIN_SM=90          their compute capability as major*10+minor (default 90)
 *   HIDETD_STANDIN_FAULTS=list    comma-separated KIND@N[:MS]: the Nth measure request handled by
 *                                 all stand-in workers sharing the state dir (counted from 1,
 *                                 across restarts) does KIND:
 *                                   crash  abort() the process mid-measure
 *                                   hang   stop heartbeats and never answer
 *                                   stuck  keep the heartbeats, ignore cancels, never answer
 *                                          (a kernel that runs forever on a live worker)
 *                                   wrong  report GW_WRONG (verification failure)
 *                                   fault  report GW_FAULT (fatal: the worker exits after it)
 *                                   slow   sleep MS milliseconds first (cancellable)
 *                                   lucky  report a time MS percent (1-90) below the
 *                                          candidate's own: a run that came out fast by
 *                                          chance, as single timings on a GPU do
 *                                   heavy  report a time MS percent (1-1000) above the
 *                                          candidate's own: a kernel slow at this request's
 *                                          sizes only (a measured range's middle, say)
 *                                 e.g. "crash@3,hang@5,wrong@2,fault@4,slow@1:500,lucky@2:4";
 *                                 KIND@N-M does KIND on requests N to M ("crash@1-4": crash
 *                                 four times, then behave)
 *   HIDETD_STANDIN_START_FAULTS=list  the same for worker starts (counted in "start-count"):
 *                                   crash  abort() before saying hello
 *                                   refuse answer HELLO with an error and exit
 *                                 e.g. "crash@1-3": the first three starts crash, the fourth
 *                                 serves (a GPU that fails, then recovers)
 *   HIDETD_STANDIN_STDERR=n       write a line of 8000 bytes, then n numbered lines to stderr
 *                                 at start (a chatty worker, for the log relay's limits)
 *   HIDETD_STANDIN_STATE_DIR=dir  where the request counter lives (file "measure-count",
 *                                 incremented under flock); without it each process counts
 *                                 its own requests
 *   HIDETD_STANDIN_PROBE=fail     --probe prints garbage and exits 1 (probe-failure tests)
 *   HIDETD_STANDIN_REFUSE=list    "all" or comma-separated device indices: the workers of those
 *                                 devices answer HELLO with an error and exit (a device the
 *                                 probe lists but that cannot be opened)
 *   HIDETD_STANDIN_SKEW=list      comma-separated DEVICE:FACTOR: that device's latencies are
 *                                 multiplied by FACTOR (a GPU of the same model that runs
 *                                 slower: lower clocks, warmer, power-capped), e.g. "1:1.5"
 *   HIDETD_STANDIN_LATENCY=us     every candidate takes `us` plus less than 1% from its hash
 *                                 (before the skew) instead of the hash's wide range: none is
 *                                 clearly slower than another, so none is stopped early, and
 *                                 the best is still one candidate (tests that count trials)
 *
 * A request with heat_ms (a long kernel in the scheduler's final round) reports the candidate's
 * time under a power cap: its own time plus 0-10% from another hash of its image, as kernels that
 * differ in energy fall behind by different amounts, and says so in its reason (and whether a
 * heater ran).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "gpu_workers/inject.h"
#include "gpu_workers/serve.h"
#include "gpu_workers/wire.h"

static int env_int(const char *name, int dflt, int lo, int hi)
{
    const char *s = getenv(name);
    char *end = NULL;
    if (!s || !*s)
        return dflt;
    long v = strtol(s, &end, 10);
    if (*end || v < lo || v > hi)
        return dflt;
    return (int)v;
}

static void fake_device(int index, gw_device_info *d)
{
    memset(d, 0, sizeof(*d));
    d->index = index;
    snprintf(d->name, sizeof(d->name), "Stand-in GPU");
    d->sm = env_int("HIDETD_STANDIN_SM", 90, 10, 200);
    d->sm_count = 132;
    d->mem_bytes = UINT64_C(80) << 30;
    d->driver_version = 13000;
}

static uint64_t hash_module(uint64_t h, const gw_module *m)
{
    for (size_t i = 0; i < m->image_len; i++)
        h = (h ^ m->image[i]) * 0x100000001b3ULL;
    for (int i = 0; i < m->n_launches; i++) {
        const gw_launch *l = &m->launches[i];
        uint32_t cfg[7] = {l->grid[0], l->grid[1], l->grid[2], l->block[0],
                           l->block[1], l->block[2], l->shared_bytes};
        const uint8_t *p = (const uint8_t *)cfg;
        for (size_t k = 0; k < sizeof(cfg); k++)
            h = (h ^ p[k]) * 0x100000001b3ULL;
        for (const char *c = l->name; *c; c++)
            h = (h ^ (uint8_t)*c) * 0x100000001b3ULL;
        /* Scalars (a dynamic op's sizes): another size is another run. Buffers' places hold 0,
         * so a request without scalars hashes as before. */
        for (int a = 0; a < l->n_args; a++)
            if (l->args[a] == GW_ARG_I64)
                for (int b = 0; b < 8; b++)
                    h = (h ^ (uint8_t)((uint64_t)l->values[a] >> (8 * b))) * 0x100000001b3ULL;
    }
    return h;
}

/* The factor HIDETD_STANDIN_SKEW gives `device` (1 when it names none or cannot be read). */
static double skew_of(int device)
{
    const char *s = getenv("HIDETD_STANDIN_SKEW");
    while (s && *s) {
        char *end = NULL;
        long d = strtol(s, &end, 10);
        if (end == s || *end != ':')
            return 1.0;
        s = end + 1;
        double f = strtod(s, &end);
        if (end == s || f <= 0)
            return 1.0;
        if (d == device)
            return f;
        s = *end == ',' ? end + 1 : NULL;
    }
    return 1.0;
}

/* HIDETD_STANDIN_LATENCY in microseconds, or 0 when it is unset or not a positive number. */
static double flat_latency_us(void)
{
    const char *s = getenv("HIDETD_STANDIN_LATENCY");
    const double us = s ? atof(s) : 0.0;
    return us > 0 ? us : 0.0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void measure_cb(void *ctx, const gw_measure_req *req, const atomic_bool *cancel,
                       gw_measure_result *res, bool *fatal)
{
    const gw_device_info *dev = ctx;
    gw__planned plan;
    gw__inject_next("HIDETD_STANDIN_FAULTS", "HIDETD_STANDIN_STATE_DIR", &plan);
    const char *kind = plan.kind;
    long ms = plan.ms;

    if (!strcmp(kind, "crash")) {
        /* No core file: the crash is planned. */
        struct rlimit rl = {0, 0};
        setrlimit(RLIMIT_CORE, &rl);
        abort();
    }
    if (!strcmp(kind, "hang")) {
        gw__serve_stop_heartbeats();
        for (;;)
            sleep_ms(1000);
    }
    if (!strcmp(kind, "stuck")) {
        for (;;)
            sleep_ms(1000);
    }
    if (!strcmp(kind, "slow")) {
        for (long t = 0; t < ms; t += 10) {
            if (atomic_load(cancel)) {
                res->status = GW_CANCELLED;
                snprintf(res->reason, sizeof(res->reason), "cancelled");
                return;
            }
            sleep_ms(ms - t < 10 ? ms - t : 10);
        }
    }
    if (!strcmp(kind, "fault")) {
        res->status = GW_FAULT;
        snprintf(res->reason, sizeof(res->reason),
                 "candidate: an illegal memory access was encountered "
                 "(CUDA_ERROR_ILLEGAL_ADDRESS) [stand-in]");
        *fatal = true;
        return;
    }
    if (req->check && !strcmp(kind, "wrong")) {
        res->status = GW_WRONG;
        res->max_abs_err = 1.0;
        res->max_rel_err = 1.0;
        snprintf(res->reason, sizeof(res->reason), "1 of %llu elements out of tolerance [stand-in]",
                 (unsigned long long)req->buffers[req->output_buffer].elems);
        return;
    }
    uint64_t h = hash_module(0xcbf29ce484222325ULL, &req->candidate);
    const double flat = flat_latency_us();
    const double base = flat > 0 ? flat * (1.0 + (double)(h % 1000) / 1e5) : 2.0 + (double)(h % 100000) / 100.0;
    double us = base * skew_of(dev->index);
    if (!strcmp(kind, "lucky"))
        us *= 1.0 - (double)(ms < 1 ? 1 : ms > 90 ? 90 : ms) / 100.0;
    if (!strcmp(kind, "heavy"))
        us *= 1.0 + (double)(ms < 1 ? 1 : ms > 1000 ? 1000 : ms) / 100.0;
    if (req->heat_ms > 0) {
        us *= 1.0 + (double)((h >> 32) % 11) / 100.0;
        snprintf(res->reason, sizeof(res->reason), "timed after %.0f ms of back-to-back runs%s [stand-in]",
                 req->heat_ms, req->heater.n_launches ? " of the heater, each span after one more" : "");
    }
    res->status = GW_OK;
    res->median_us = us;
    res->min_us = us * 0.98;
    res->reps = req->min_reps;
    if (req->beat_us > 0 && us > 1.15 * req->beat_us) {
        res->early_stopped = true;
        res->reps = req->min_reps < 5 ? req->min_reps : 5;
        snprintf(res->reason, sizeof(res->reason),
                 "stopped early after %d runs: clearly slower than %.2f us", res->reps, req->beat_us);
    }
}

static bool refused(int device)
{
    const char *s = getenv("HIDETD_STANDIN_REFUSE");
    if (!s)
        return false;
    if (!strcmp(s, "all"))
        return true;
    while (*s) {
        char *end = NULL;
        long v = strtol(s, &end, 10);
        if (end == s)
            return false;
        if (v == device)
            return true;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return false;
    }
    return false;
}

int main(int argc, char **argv)
{
    gw__args a;
    gw_device_info devs[GW_MAX_DEVICES];

    if (gw__parse_args(argc, argv, &a) < 0)
        return 2;
    int n = env_int("HIDETD_STANDIN_DEVICES", 1, 0, GW_MAX_DEVICES);
    if (a.probe) {
        const char *p = getenv("HIDETD_STANDIN_PROBE");
        if (p && !strcmp(p, "fail")) {
            printf("{\"devices\": [garbage\n");
            return 1;
        }
        for (int i = 0; i < n; i++)
            fake_device(i, &devs[i]);
        char *s = gw_wire_probe_json(devs, n, n ? NULL : "HIDETD_STANDIN_DEVICES=0");
        if (!s)
            return 1;
        printf("%s\n", s);
        free(s);
        return 0;
    }
    const char *chatter = getenv("HIDETD_STANDIN_STDERR");
    if (chatter && *chatter) {
        long lines = strtol(chatter, NULL, 10);
        for (int i = 0; i < 8000; i++)
            fputc('x', stderr);
        fputc('\n', stderr);
        for (long i = 0; i < lines && i < 1000000; i++)
            fprintf(stderr, "stand-in stderr line %ld\n", i + 1);
        fflush(stderr);
    }
    gw__planned start;
    gw__inject_next_in("HIDETD_STANDIN_START_FAULTS", "HIDETD_STANDIN_STATE_DIR", "start-count",
                       &start);
    if (!strcmp(start.kind, "crash")) {
        struct rlimit rl = {0, 0};
        setrlimit(RLIMIT_CORE, &rl);
        fprintf(stderr, "hidetd-worker-standin: planned crash at start "
                        "(HIDETD_STANDIN_START_FAULTS)\n");
        fflush(stderr);
        abort();
    }
    if (!strcmp(start.kind, "refuse"))
        return gw__serve(a.fd, NULL, "device refused (HIDETD_STANDIN_START_FAULTS)",
                         a.heartbeat_s, NULL, NULL);
    if (refused(a.device))
        return gw__serve(a.fd, NULL, "device refused (HIDETD_STANDIN_REFUSE)", a.heartbeat_s,
                         NULL, NULL);
    if (a.device >= n) {
        char err[64];
        snprintf(err, sizeof(err), "no stand-in device %d", a.device);
        return gw__serve(a.fd, NULL, err, a.heartbeat_s, NULL, NULL);
    }
    fake_device(a.device, &devs[0]);
    return gw__serve(a.fd, &devs[0], NULL, a.heartbeat_s, measure_cb, &devs[0]);
}
