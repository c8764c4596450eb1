/* tests/gpu/seccomp_exec.c - runs a command under the system-call filter of deploy/hidetd.service,
 * for machines without systemd (the GPU machine): every call named in LIST is allowed, every other
 * one fails with EPERM (SystemCallErrorNumber=EPERM), and the filter is inherited by every child
 * (the workers). NoNewPrivileges is set first, as the unit does.
 *
 *   seccomp_exec LIST COMMAND [ARGS...]     (LIST: one system call name per line, from
 *                                            tests/gpu/syscall_filter.py)
 *
 * Names this machine's kernel or libseccomp does not know are skipped (counted on stderr). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <seccomp.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: seccomp_exec LIST COMMAND [ARGS...]\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        fprintf(stderr, "seccomp_exec: %s: %s\n", argv[1], strerror(errno));
        return 2;
    }
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
    if (!ctx) {
        fprintf(stderr, "seccomp_exec: seccomp_init failed\n");
        return 1;
    }
    char name[128];
    int allowed = 0, unknown = 0;
    while (fscanf(f, "%127s", name) == 1) {
        int nr = seccomp_syscall_resolve_name(name);
        if (nr == __NR_SCMP_ERROR || seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0) < 0) {
            unknown++;
            continue;
        }
        allowed++;
    }
    fclose(f);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || seccomp_load(ctx) < 0) {
        fprintf(stderr, "seccomp_exec: cannot load the filter: %s\n", strerror(errno));
        return 1;
    }
    seccomp_release(ctx);
    fprintf(stderr, "seccomp_exec: %d system calls allowed (%d names unknown here), others EPERM\n",
            allowed, unknown);
    execvp(argv[2], argv + 2);
    fprintf(stderr, "seccomp_exec: %s: %s\n", argv[2], strerror(errno));
    return 127;
}
