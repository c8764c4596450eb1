/* daemon/notify.c - sd_notify, watchdog and socket activation (see notify.h).
 *
 * With libsystemd the public functions call sd_notify(), sd_watchdog_enabled() and
 * sd_listen_fds_with_names(). Without it (or when built with HD_NOTIFY_NO_LIBSYSTEMD, which the
 * tests use to exercise this path on machines that have libsystemd) they use the hd__ functions
 * below, which implement the documented protocol (sd_notify(3), sd_listen_fds(3)).
 */
#include "daemon/notify.h"

#include "hidetd_config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#if HIDETD_HAVE_SYSTEMD && !defined(HD_NOTIFY_NO_LIBSYSTEMD)
#define HD_USE_LIBSYSTEMD 1
#include <systemd/sd-daemon.h>
#else
#define HD_USE_LIBSYSTEMD 0
#endif

/* Longest state string we format; systemd's own limit for a notification is far larger, but
 * nothing the daemon says comes close to this. */
#define HD_NOTIFY_MAX 4096

/* Parses a decimal unsigned integer that fills the whole string (no sign, no spaces). */
static int parse_u64(const char *s, uint64_t *ret)
{
    uint64_t v = 0;

    if (!s || !*s)
        return -EINVAL;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -EINVAL;
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -ERANGE;
        v = v * 10 + d;
    }
    *ret = v;
    return 0;
}

static int parse_pid(const char *s, pid_t *ret)
{
    uint64_t v;
    int r = parse_u64(s, &v);

    if (r < 0)
        return -EINVAL;
    if (v == 0 || v > INT_MAX)
        return -EINVAL;
    *ret = (pid_t)v;
    return 0;
}

char **hd_strv_free(char **strv)
{
    if (!strv)
        return NULL;
    for (char **p = strv; *p; p++)
        free(*p);
    free(strv);
    return NULL;
}

int hd__notify_send(const char *socket_path, const char *state)
{
    struct sockaddr_un sa;
    socklen_t salen;
    size_t plen, slen;
    ssize_t n;
    int fd = -1, r;

    if (!socket_path || !state)
        return -EINVAL;
    slen = strlen(state);
    plen = strlen(socket_path);
    if (slen == 0 || plen < 2)
        return -EINVAL;
    /* Only absolute paths and abstract names are valid notify addresses. */
    if (socket_path[0] != '/' && socket_path[0] != '@')
        return -EINVAL;
    if (plen >= sizeof(sa.sun_path))
        return -EINVAL;

    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, socket_path, plen);
    if (sa.sun_path[0] == '@') {
        /* Abstract namespace: a leading NUL, and the length counts exactly the name's bytes. */
        sa.sun_path[0] = '\0';
        salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + plen);
    } else {
        salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + plen + 1);
    }

    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        r = -errno;
        goto out;
    }
    /* The kernel attaches our credentials when the receiver asked for them (systemd sets
     * SO_PASSCRED), which is what NotifyAccess=main checks; no SCM_CREDENTIALS needed. */
    do {
        n = sendto(fd, state, slen, MSG_NOSIGNAL, (const struct sockaddr *)&sa, salen);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        r = -errno;
        goto out;
    }
    r = (size_t)n == slen ? 1 : -EMSGSIZE;
out:
    if (fd >= 0)
        close(fd);
    return r;
}

int hd_notify(const char *state)
{
    if (!state || !*state)
        return -EINVAL;
#if HD_USE_LIBSYSTEMD
    return sd_notify(0, state);
#else
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !*path)
        return 0;
    return hd__notify_send(path, state);
#endif
}

static int notify_vf(const char *fmt, va_list ap)
{
    char buf[HD_NOTIFY_MAX];
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);

    if (n < 0)
        return -EINVAL;
    if ((size_t)n >= sizeof(buf))
        return -E2BIG;
    return hd_notify(buf);
}

int hd_notifyf(const char *fmt, ...)
{
    va_list ap;
    int r;

    if (!fmt)
        return -EINVAL;
    va_start(ap, fmt);
    r = notify_vf(fmt, ap);
    va_end(ap);
    return r;
}

/* Copies a status text into buf as one line: a newline would end the STATUS= assignment and start
 * a new (bogus) one, so newlines become spaces. Truncates silently: status is informational. */
static void status_line(char *buf, size_t size, const char *status)
{
    size_t i = 0;

    for (; status[i] && i + 1 < size; i++)
        buf[i] = (status[i] == '\n' || status[i] == '\r') ? ' ' : status[i];
    buf[i] = '\0';
}

static int notify_with_status(const char *head, const char *status)
{
    char line[1024];

    if (!status)
        return hd_notify(head);
    status_line(line, sizeof(line), status);
    return hd_notifyf("%s\nSTATUS=%s", head, line);
}

int hd_notify_ready(const char *status)
{
    return notify_with_status("READY=1", status);
}

int hd_notify_status(const char *status)
{
    char line[1024];

    if (!status)
        return -EINVAL;
    status_line(line, sizeof(line), status);
    return hd_notifyf("STATUS=%s", line);
}

int hd_notify_stopping(const char *status)
{
    return notify_with_status("STOPPING=1", status);
}

int hd_notify_reloading(void)
{
    struct timespec ts;
    uint64_t usec;

    if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
        return -errno;
    usec = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
    return hd_notifyf("RELOADING=1\nMONOTONIC_USEC=%llu", (unsigned long long)usec);
}

int hd_notify_watchdog(void)
{
    return hd_notify("WATCHDOG=1");
}

int hd_notify_mainpid(pid_t pid)
{
    if (pid <= 0)
        return -EINVAL;
    return hd_notifyf("MAINPID=%ld", (long)pid);
}

int hd_notify_extend_timeout(uint64_t usec)
{
    return hd_notifyf("EXTEND_TIMEOUT_USEC=%llu", (unsigned long long)usec);
}

int hd__watchdog_parse(const char *usec, const char *pid, pid_t self, uint64_t *ret_usec)
{
    uint64_t v;
    pid_t p;

    if (!usec)
        return 0;
    if (parse_u64(usec, &v) < 0 || v == 0)
        return -EINVAL;
    if (pid) {
        if (parse_pid(pid, &p) < 0)
            return -EINVAL;
        /* The pings are meant for another process (our parent, say): not for us. */
        if (p != self)
            return 0;
    }
    if (ret_usec)
        *ret_usec = v;
    return 1;
}

int hd_watchdog_interval(uint64_t *ret_usec)
{
#if HD_USE_LIBSYSTEMD
    uint64_t v = 0;
    int r = sd_watchdog_enabled(0, &v);
    if (r > 0 && ret_usec)
        *ret_usec = v;
    return r;
#else
    return hd__watchdog_parse(getenv("WATCHDOG_USEC"), getenv("WATCHDOG_PID"), getpid(), ret_usec);
#endif
}

/* Splits names at ':' into a NULL-terminated array of exactly n entries. */
static int split_names(const char *names, int n, char ***ret)
{
    char **v = calloc((size_t)n + 1, sizeof(*v));
    const char *p = names;
    int i = 0, r;

    if (!v)
        return -ENOMEM;
    if (!names) {
        /* No FileDescriptorName=: systemd's convention is "unknown". */
        for (i = 0; i < n; i++) {
            v[i] = strdup("unknown");
            if (!v[i]) {
                r = -ENOMEM;
                goto fail;
            }
        }
        *ret = v;
        return 0;
    }
    for (;;) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (i >= n) {
            r = -EINVAL;
            goto fail;
        }
        v[i] = strndup(p, len);
        if (!v[i]) {
            r = -ENOMEM;
            goto fail;
        }
        i++;
        if (!end)
            break;
        p = end + 1;
    }
    if (i != n) {
        r = -EINVAL;
        goto fail;
    }
    *ret = v;
    return 0;
fail:
    hd_strv_free(v);
    return r;
}

int hd__listen_fds_parse(const char *fds, const char *pid, const char *names, pid_t self,
                         char ***ret_names)
{
    uint64_t n;
    pid_t p;
    char **v = NULL;
    int r;

    if (!fds || !pid)
        return 0;
    if (parse_pid(pid, &p) < 0)
        return -EINVAL;
    if (p != self)
        return 0;
    if (parse_u64(fds, &n) < 0)
        return -EINVAL;
    if (n > (uint64_t)(INT_MAX - HD_LISTEN_FDS_START))
        return -EINVAL;
    if (n == 0)
        return 0;
    r = split_names(names, (int)n, &v);
    if (r < 0)
        return r;
    if (ret_names)
        *ret_names = v;
    else
        hd_strv_free(v);
    return (int)n;
}

int hd_listen_fds(int **ret_fds, char ***ret_names)
{
    char **names = NULL;
    int *fds = NULL;
    int n, r;

#if HD_USE_LIBSYSTEMD
    /* unset_environment=1: the variables are removed whatever the outcome. sd_listen_fds sets
     * FD_CLOEXEC on every passed descriptor itself. */
    n = sd_listen_fds_with_names(1, &names);
    if (n < 0)
        return n;
#else
    n = hd__listen_fds_parse(getenv("LISTEN_FDS"), getenv("LISTEN_PID"), getenv("LISTEN_FDNAMES"),
                             getpid(), &names);
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDNAMES");
    if (n < 0)
        return n;
    for (int i = 0; i < n; i++) {
        int fd = HD_LISTEN_FDS_START + i;
        int flags = fcntl(fd, F_GETFD);
        if (flags < 0 || fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0) {
            r = -errno;
            goto fail;
        }
    }
#endif
    if (n == 0) {
        names = hd_strv_free(names);
        if (ret_fds)
            *ret_fds = NULL;
        if (ret_names)
            *ret_names = NULL;
        return 0;
    }
    fds = malloc((size_t)n * sizeof(*fds));
    if (!fds) {
        r = -ENOMEM;
        goto fail;
    }
    for (int i = 0; i < n; i++)
        fds[i] = HD_LISTEN_FDS_START + i;
    if (ret_fds)
        *ret_fds = fds;
    else
        free(fds);
    if (ret_names)
        *ret_names = names;
    else
        hd_strv_free(names);
    return n;
fail:
    free(fds);
    hd_strv_free(names);
    return r;
}

int hd_socket_info(int fd, bool *ret_listening, bool *ret_stream)
{
    int domain = 0, type = 0, acc = 0;
    socklen_t len;

    if (fd < 0)
        return -EBADF;
    len = sizeof(domain);
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0)
        return -errno;
    len = sizeof(type);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0)
        return -errno;
    len = sizeof(acc);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &len) < 0)
        return -errno;
    if (ret_listening)
        *ret_listening = acc != 0;
    if (ret_stream)
        *ret_stream = type == SOCK_STREAM;
    return domain > 0 ? domain : -EAFNOSUPPORT;
}
