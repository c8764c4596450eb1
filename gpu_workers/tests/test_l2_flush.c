/* gpu_workers/tests/test_l2_flush.c - the measurer's L2 flush kernel (gpu_workers/l2_flush.h)
 * is PTX the toolchain accepts for every arch the daemon targets, with the entry point the
 * measurer looks up, and it only reads: a store would leave dirty lines in the L2, the very
 * thing the kernel exists to avoid. The driver JITs the same text on the GPU machine; there the
 * GPU tests run it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_workers/l2_flush.h"
#include "tests/check.h"

#ifndef GW_PTXAS
#error "GW_PTXAS (the toolkit's ptxas) must be defined by the build"
#endif

/* Runs ptxas -v for arch on the PTX in path; returns its exit status and its report in out. */
static int ptxas(const char *path, const char *arch, char *out, size_t outlen)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "'%s' -v -arch=%s '%s' -o /dev/null 2>&1", GW_PTXAS, arch, path);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, outlen - 1, p);
    out[n] = '\0';
    return pclose(p);
}

int main(void)
{
    const char *ptx = gw_l2_flush_ptx;
    char needle[96];
    snprintf(needle, sizeof(needle), ".entry %s(", GW_L2_FLUSH_KERNEL);
    CHECK(strstr(ptx, needle) != NULL, "no entry point %s", GW_L2_FLUSH_KERNEL);
    CHECK(strstr(ptx, "ld.global.v4") != NULL);
    /* One store, the guarded sink; no other write of any kind. */
    const char *st = strstr(ptx, "st.global");
    CHECK(st != NULL && !strstr(st + 1, "st.global"));
    CHECK(!strstr(ptx, "red.") && !strstr(ptx, "atom."));

    char path[] = "/tmp/hidetd-flushXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return 1;
    FILE *f = fdopen(fd, "w");
    fputs(ptx, f);
    fclose(f);
    static const char *const archs[] = {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_120"};
    for (size_t i = 0; i < sizeof(archs) / sizeof(archs[0]); i++) {
        char report[4096];
        int rc = ptxas(path, archs[i], report, sizeof(report));
        CHECK(rc == 0, "ptxas -arch=%s: exit %d: %s", archs[i], rc, report);
        /* ptxas -v names each function it compiled: the kernel was not empty or renamed. */
        CHECK(strstr(report, GW_L2_FLUSH_KERNEL) != NULL, "%s: %s", archs[i], report);
    }
    unlink(path);
    return check_finish("test_l2_flush");
}
