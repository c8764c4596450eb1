/* gpu_workers/inject.c - see inject.h. */
#include "gpu_workers/inject.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

/* The 1-based number of this event across all workers sharing the state directory (counted in
 * the file `counter` there), or counted by this process without one. */
static long next_number(const char *state_env, const char *counter, long *local)
{
    const char *dir = getenv(state_env);
    char path[4096], buf[32] = "";
    if (!dir || !*dir)
        return ++*local;
    snprintf(path, sizeof(path), "%s/%s", dir, counter);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return ++*local;
    flock(fd, LOCK_EX);
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    long v = n > 0 ? strtol(buf, NULL, 10) : 0;
    v++;
    int len = snprintf(buf, sizeof(buf), "%ld\n", v);
    /* Best effort: a lost count only shifts the planned faults. */
    if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, (size_t)len, 0) != len)
        fprintf(stderr, "hidetd worker: cannot update %s\n", path);
    flock(fd, LOCK_UN);
    close(fd);
    return v;
}

/* Finds the plan for request number n in a "KIND@N[-M][:MS],..." list. */
static void planned_for(const char *s, long n, gw__planned *ret)
{
    while (s && *s) {
        char k[16];
        long at = 0, arg = 0;
        int used = 0;
        if (sscanf(s, "%15[a-z]@%ld%n", k, &at, &used) == 2) {
            const char *p = s + used;
            long last = at;
            if (*p == '-') {
                char *end = NULL;
                last = strtol(p + 1, &end, 10);
                p = end;
            }
            if (*p == ':') {
                char *end = NULL;
                arg = strtol(p + 1, &end, 10);
                p = end;
            }
            if (n >= at && n <= last) {
                snprintf(ret->kind, sizeof(ret->kind), "%s", k);
                ret->ms = arg;
                return;
            }
            s = p;
        }
        const char *c = strchr(s, ',');
        if (!c)
            return;
        s = c + 1;
    }
}

long gw__inject_next_in(const char *list_env, const char *state_env, const char *counter,
                        gw__planned *ret)
{
    static long local_measure, local_other;
    memset(ret, 0, sizeof(*ret));
    const char *list = getenv(list_env);
    if (!list || !*list)
        return 0;
    long n = next_number(state_env, counter,
                         strcmp(counter, "measure-count") ? &local_other : &local_measure);
    planned_for(list, n, ret);
    return n;
}

long gw__inject_next(const char *list_env, const char *state_env, gw__planned *ret)
{
    return gw__inject_next_in(list_env, state_env, "measure-count", ret);
}
