/* gpu_workers/tests/test_worker_probe.c - the real hidetd-worker's --probe on this machine, and
 * through the pool. On a machine without a GPU it must report zero devices cleanly (with the
 * driver's reason); with a GPU, a well-formed device list. Skipped (exit 77) when the binary
 * cannot even be loaded because libcuda.so.1 is absent: then there is no driver to ask. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_workers/gw.h"
#include "gpu_workers/wire.h"

#ifndef GW_CUDA_STUB
#error "GW_CUDA_STUB must be defined by the build"
#endif
#ifndef GW_WORKER_PATH
#error "GW_WORKER_PATH must be defined by the build"
#endif

#include "tests/check.h"

static bool ready_flag, closed_flag;
static void on_ready(void *u) { (void)u; ready_flag = true; }
static void on_closed(void *u) { (void)u; closed_flag = true; }

/* Runs the probe; returns its exit code and fills out. */
static int run_probe(char *out, size_t cap, size_t *ret_len)
{
    size_t len = 0, n;
    FILE *f = popen(GW_WORKER_PATH " --probe 2>&1", "r");
    if (!f)
        return -1;
    while ((n = fread(out + len, 1, cap - 1 - len, f)) > 0)
        len += n;
    out[len] = 0;
    int st = pclose(f);
    *ret_len = len;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(void)
{
    static char out[1 << 16];
    size_t len = 0;
    char stubdir[] = "/tmp/gw-stub-XXXXXX", link[64] = "";

    int code = run_probe(out, sizeof(out), &len);
    if (code == 127 && strstr(out, "libcuda.so")) {
        /* No driver installed. The toolkit's stub library stands in for libcuda.so.1: its
         * cuInit fails the way a driverless machine's would, which is exactly the path to test. */
        printf("libcuda.so.1 is not installed; using the toolkit's stub %s as libcuda.so.1\n",
               GW_CUDA_STUB);
        if (access(GW_CUDA_STUB, R_OK) == 0 && mkdtemp(stubdir)) {
            snprintf(link, sizeof(link), "%s/libcuda.so.1", stubdir);
            if (symlink(GW_CUDA_STUB, link) == 0) {
                setenv("LD_LIBRARY_PATH", stubdir, 1);
                code = run_probe(out, sizeof(out), &len);
            }
        }
    }
    if (code == 127 && strstr(out, "libcuda.so")) {
        printf("SKIP: hidetd-worker cannot load the CUDA driver library (libcuda.so.1 is not "
               "installed here, and no stub could stand in): %s", out);
        return 77;
    }
    CHECK(code == 0);
    gw_device_info devs[GW_MAX_DEVICES];
    int ndev = -1;
    char err[256];
    CHECK(gw_wire_parse_probe(out, len, devs, GW_MAX_DEVICES, &ndev, err, sizeof(err)) == 0);
    printf("hidetd-worker --probe: %d device(s)%s%s\n", ndev, ndev ? "" : ", reason: ", ndev ? "" : err);
    if (ndev == 0)
        CHECK(err[0] != 0); /* zero devices always come with the driver's reason */
    for (int i = 0; i < ndev; i++)
        CHECK(devs[i].sm >= 50 && devs[i].sm_count > 0 && devs[i].name[0]);

    /* The pool agrees with the probe. */
    uv_loop_t loop;
    uv_loop_init(&loop);
    gw_config c;
    memset(&c, 0, sizeof(c));
    c.worker_path = GW_WORKER_PATH;
    gw_pool *pool = NULL;
    CHECK(gw_pool_start(&loop, &c, on_ready, NULL, &pool) == 0);
    while (!ready_flag && uv_run(&loop, UV_RUN_ONCE))
        ;
    CHECK(ready_flag);
    const gw_device_info *d = NULL;
    CHECK((int)gw_pool_devices(pool, &d) == ndev);
    if (ndev == 0)
        CHECK(gw_pool_probe_error(pool)[0] != 0);
    gw_pool_close(pool, on_closed, NULL);
    while (!closed_flag && uv_run(&loop, UV_RUN_ONCE))
        ;
    CHECK(closed_flag);
    CHECK(uv_loop_close(&loop) == 0);
    if (link[0]) {
        unlink(link);
        rmdir(stubdir);
    }
    return failures ? 1 : 0;
}
