/* tests/ops/test_notify.c - the sd_notify protocol, watchdog and socket-activation parsing.
 *
 * Built twice by tests/ops/meson.build: against libsystemd (when found) and with
 * HD_NOTIFY_NO_LIBSYSTEMD (this module's own protocol implementation), so both paths of
 * daemon/notify.c are held to the same expectations. A datagram socket stands in for systemd. */
#include "daemon/notify.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/check.h"

/* A stand-in for systemd's notify socket: a bound datagram socket. */
typedef struct {
    int fd;
    char addr[108]; /* what goes into $NOTIFY_SOCKET */
} listener;

static int listener_open(listener *l, const char *dir, bool abstract)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    socklen_t len;

    l->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (l->fd < 0)
        return -errno;
    if (abstract) {
        snprintf(l->addr, sizeof(l->addr), "@hidetd-test-notify-%ld", (long)getpid());
        memcpy(sa.sun_path + 1, l->addr + 1, strlen(l->addr) - 1);
        len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(l->addr));
    } else {
        snprintf(l->addr, sizeof(l->addr), "%s/notify", dir);
        strcpy(sa.sun_path, l->addr);
        len = (socklen_t)sizeof(sa);
    }
    if (bind(l->fd, (struct sockaddr *)&sa, len) < 0)
        return -errno;
    return 0;
}

/* Receives one datagram without blocking forever: it must already be queued, since every send in
 * these tests completes before we read. */
static char *listener_recv(listener *l, char *buf, size_t size)
{
    ssize_t n = recv(l->fd, buf, size - 1, MSG_DONTWAIT);

    if (n < 0)
        return NULL;
    buf[n] = '\0';
    return buf;
}

static void test_send(const char *dir)
{
    listener path = {.fd = -1}, abs = {.fd = -1};
    char buf[512], bogus[160];

    CHECK_EQ_INT(listener_open(&path, dir, false), 0);
    CHECK_EQ_INT(listener_open(&abs, dir, true), 0);

    CHECK_EQ_INT(hd__notify_send(path.addr, "READY=1"), 1);
    CHECK_STR(listener_recv(&path, buf, sizeof(buf)), "READY=1");
    CHECK_EQ_INT(hd__notify_send(abs.addr, "STATUS=abstract"), 1);
    CHECK_STR(listener_recv(&abs, buf, sizeof(buf)), "STATUS=abstract");

    CHECK_EQ_INT(hd__notify_send("relative/path", "READY=1"), -EINVAL);
    CHECK_EQ_INT(hd__notify_send("@", "READY=1"), -EINVAL);
    CHECK_EQ_INT(hd__notify_send(path.addr, ""), -EINVAL);
    CHECK_EQ_INT(hd__notify_send(NULL, "READY=1"), -EINVAL);
    memset(bogus, 'x', sizeof(bogus) - 1);
    bogus[0] = '/';
    bogus[sizeof(bogus) - 1] = '\0';
    CHECK_EQ_INT(hd__notify_send(bogus, "READY=1"), -EINVAL); /* longer than sun_path */
    snprintf(buf, sizeof(buf), "%s/nobody-listens", dir);
    CHECK_EQ_INT(hd__notify_send(buf, "READY=1"), -ENOENT);

    close(path.fd);
    close(abs.fd);
    unlink(path.addr);
}

static void test_public(const char *dir, bool abstract)
{
    listener l = {.fd = -1};
    char buf[8192], big[5000];
    const char *p;

    unsetenv("NOTIFY_SOCKET");
    CHECK_EQ_INT(hd_notify("READY=1"), 0);
    CHECK_EQ_INT(hd_notify_ready("x"), 0);
    CHECK_EQ_INT(hd_notify_watchdog(), 0);
    CHECK_EQ_INT(hd_notify(""), -EINVAL);
    CHECK_EQ_INT(hd_notify(NULL), -EINVAL);

    CHECK_EQ_INT(listener_open(&l, dir, abstract), 0);
    setenv("NOTIFY_SOCKET", l.addr, 1);

    CHECK(hd_notify_ready("serving\n2 GPUs") > 0);
    CHECK_STR(listener_recv(&l, buf, sizeof(buf)), "READY=1\nSTATUS=serving 2 GPUs");
    CHECK(hd_notify_ready(NULL) > 0);
    CHECK_STR(listener_recv(&l, buf, sizeof(buf)), "READY=1");
    CHECK(hd_notify_status("draining 3 jobs") > 0);
    CHECK_STR(listener_recv(&l, buf, sizeof(buf)), "STATUS=draining 3 jobs");
    CHECK_EQ_INT(hd_notify_status(NULL), -EINVAL);
    CHECK(hd_notify_stopping(NULL) > 0);
    CHECK_STR(listener_recv(&l, buf, sizeof(buf)), "STOPPING=1");
    CHECK(hd_notify_stopping("bye") > 0);
    CHECK_STR(listener_recv(&l, buf, sizeof(buf)), "STOPPING=1\nSTATUS=bye");
    CHECK(hd_notify_watchdog() > 0);
    CHECK_STR(listener_recv(&l, buf, sizeof(buf)), "WATCHDOG=1");
    CHECK(hd_notify_mainpid(1234) > 0);
    CHECK_STR(listener_recv(&l, buf, sizeof(buf)), "MAINPID=1234");
    CHECK_EQ_INT(hd_notify_mainpid(0), -EINVAL);
    CHECK(hd_notify_extend_timeout(5000000) > 0);
    CHECK_STR(listener_recv(&l, buf, sizeof(buf)), "EXTEND_TIMEOUT_USEC=5000000");
    CHECK(hd_notifyf("STATUS=%d candidates", 64) > 0);
    CHECK_STR(listener_recv(&l, buf, sizeof(buf)), "STATUS=64 candidates");

    CHECK(hd_notify_reloading() > 0);
    p = listener_recv(&l, buf, sizeof(buf));
    CHECK(p && strncmp(p, "RELOADING=1\nMONOTONIC_USEC=", 27) == 0);
    if (p && strlen(p) > 27)
        CHECK(strspn(p + 27, "0123456789") == strlen(p + 27));

    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    CHECK_EQ_INT(hd_notifyf("STATUS=%s", big), -E2BIG);
    /* Nothing else was sent. */
    CHECK(listener_recv(&l, buf, sizeof(buf)) == NULL);

    close(l.fd);
    if (!abstract)
        unlink(l.addr);
    /* A socket that nobody listens on is an error, not silence. */
    CHECK(hd_notify("READY=1") < 0);
    unsetenv("NOTIFY_SOCKET");
}

static void test_watchdog(void)
{
    char self[32], other[32];
    uint64_t usec = 7;

    snprintf(self, sizeof(self), "%ld", (long)getpid());
    snprintf(other, sizeof(other), "%ld", (long)getpid() + 1);

    CHECK_EQ_INT(hd__watchdog_parse(NULL, NULL, getpid(), &usec), 0);
    CHECK_EQ_INT(hd__watchdog_parse("30000000", NULL, getpid(), &usec), 1);
    CHECK_EQ_INT(usec, 30000000);
    usec = 7;
    CHECK_EQ_INT(hd__watchdog_parse("20000000", self, getpid(), &usec), 1);
    CHECK_EQ_INT(usec, 20000000);
    usec = 7;
    CHECK_EQ_INT(hd__watchdog_parse("20000000", other, getpid(), &usec), 0);
    CHECK_EQ_INT(hd__watchdog_parse("0", NULL, getpid(), &usec), -EINVAL);
    CHECK_EQ_INT(hd__watchdog_parse("-5", NULL, getpid(), &usec), -EINVAL);
    CHECK_EQ_INT(hd__watchdog_parse("12x", NULL, getpid(), &usec), -EINVAL);
    CHECK_EQ_INT(hd__watchdog_parse("", NULL, getpid(), &usec), -EINVAL);
    CHECK_EQ_INT(hd__watchdog_parse("99999999999999999999999", NULL, getpid(), &usec), -EINVAL);
    CHECK_EQ_INT(hd__watchdog_parse("1000", "pid", getpid(), &usec), -EINVAL);
    CHECK_EQ_INT(usec, 7); /* untouched on failure and on 0 */

    /* Through the environment, as the daemon calls it. */
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    CHECK_EQ_INT(hd_watchdog_interval(&usec), 0);
    setenv("WATCHDOG_USEC", "2000000", 1);
    setenv("WATCHDOG_PID", self, 1);
    CHECK_EQ_INT(hd_watchdog_interval(&usec), 1);
    CHECK_EQ_INT(usec, 2000000);
    setenv("WATCHDOG_PID", other, 1);
    usec = 7;
    CHECK_EQ_INT(hd_watchdog_interval(&usec), 0);
    CHECK_EQ_INT(usec, 7);
    unsetenv("WATCHDOG_PID");
    CHECK_EQ_INT(hd_watchdog_interval(&usec), 1);
    setenv("WATCHDOG_USEC", "soon", 1);
    CHECK(hd_watchdog_interval(&usec) < 0);
    /* hd_watchdog_interval() does not consume the variables. */
    CHECK(getenv("WATCHDOG_USEC") != NULL);
    unsetenv("WATCHDOG_USEC");
}

static void test_listen_parse(void)
{
    pid_t self = getpid();
    char pid[32], other[32];
    char **names = NULL;

    snprintf(pid, sizeof(pid), "%ld", (long)self);
    snprintf(other, sizeof(other), "%ld", (long)self + 1);

    CHECK_EQ_INT(hd__listen_fds_parse(NULL, NULL, NULL, self, &names), 0);
    CHECK_EQ_INT(hd__listen_fds_parse("2", NULL, NULL, self, &names), 0);
    CHECK_EQ_INT(hd__listen_fds_parse("2", other, "a:b", self, &names), 0);
    CHECK_EQ_INT(hd__listen_fds_parse("0", pid, NULL, self, &names), 0);
    CHECK(names == NULL);

    CHECK_EQ_INT(hd__listen_fds_parse("2", pid, "api:http", self, &names), 2);
    if (names) {
        CHECK_STR(names[0], "api");
        CHECK_STR(names[1], "http");
        CHECK(names[2] == NULL);
        names = hd_strv_free(names);
    }
    CHECK_EQ_INT(hd__listen_fds_parse("2", pid, NULL, self, &names), 2);
    if (names) {
        CHECK_STR(names[0], "unknown");
        CHECK_STR(names[1], "unknown");
        names = hd_strv_free(names);
    }
    CHECK_EQ_INT(hd__listen_fds_parse("2", pid, "a:", self, &names), 2);
    if (names) {
        CHECK_STR(names[1], "");
        names = hd_strv_free(names);
    }
    CHECK_EQ_INT(hd__listen_fds_parse("1", pid, "only", self, NULL), 1);
    CHECK_EQ_INT(hd__listen_fds_parse("2", pid, "a", self, &names), -EINVAL);
    CHECK_EQ_INT(hd__listen_fds_parse("2", pid, "a:b:c", self, &names), -EINVAL);
    CHECK_EQ_INT(hd__listen_fds_parse("x", pid, NULL, self, &names), -EINVAL);
    CHECK_EQ_INT(hd__listen_fds_parse("-1", pid, NULL, self, &names), -EINVAL);
    CHECK_EQ_INT(hd__listen_fds_parse("1", "0", NULL, self, &names), -EINVAL);
    CHECK_EQ_INT(hd__listen_fds_parse("1", "abc", NULL, self, &names), -EINVAL);
    CHECK(names == NULL);
    CHECK(hd_strv_free(NULL) == NULL);
}

/* The real hd_listen_fds() moves descriptors to 3 and 4, so it runs in a child process that owns
 * its descriptor table. Returns the number of failed checks in the child (its exit status). */
static int child_listen(const char *dir)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int u, t, *fds = NULL, pipefd[2];
    char **names = NULL, pid[32];
    bool listening = false, stream = false;

    u = socket(AF_UNIX, SOCK_STREAM, 0);
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/api.sock", dir);
    CHECK(u >= 0 && bind(u, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(u, 4) == 0);
    t = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(t >= 0 && bind(t, (struct sockaddr *)&in, sizeof(in)) == 0 && listen(t, 4) == 0);
    /* Move them to 3 and 4 without close-on-exec, as a service manager passes them. */
    CHECK(dup2(u, 100) == 100 && dup2(t, 101) == 101);
    close(u);
    close(t);
    CHECK(dup2(100, 3) == 3 && dup2(101, 4) == 4);
    close(100);
    close(101);
    CHECK((fcntl(3, F_GETFD) & FD_CLOEXEC) == 0);

    snprintf(pid, sizeof(pid), "%ld", (long)getpid());
    setenv("LISTEN_FDS", "2", 1);
    setenv("LISTEN_PID", pid, 1);
    setenv("LISTEN_FDNAMES", "api:http", 1);
    CHECK_EQ_INT(hd_listen_fds(&fds, &names), 2);
    if (fds && names) {
        CHECK_EQ_INT(fds[0], 3);
        CHECK_EQ_INT(fds[1], 4);
        CHECK_STR(names[0], "api");
        CHECK_STR(names[1], "http");
        CHECK(names[2] == NULL);
    }
    free(fds);
    hd_strv_free(names);
    CHECK(fcntl(3, F_GETFD) & FD_CLOEXEC);
    CHECK(fcntl(4, F_GETFD) & FD_CLOEXEC);
    CHECK(getenv("LISTEN_FDS") == NULL);
    CHECK(getenv("LISTEN_PID") == NULL);
    CHECK(getenv("LISTEN_FDNAMES") == NULL);

    CHECK_EQ_INT(hd_socket_info(3, &listening, &stream), AF_UNIX);
    CHECK(listening && stream);
    CHECK_EQ_INT(hd_socket_info(4, NULL, NULL), AF_INET);
    CHECK(pipe(pipefd) == 0);
    CHECK_EQ_INT(hd_socket_info(pipefd[0], NULL, NULL), -ENOTSOCK);
    CHECK_EQ_INT(hd_socket_info(-1, NULL, NULL), -EBADF);

    /* The variables are consumed: a second call finds nothing. */
    fds = (int *)&u;
    CHECK_EQ_INT(hd_listen_fds(&fds, NULL), 0);
    CHECK(fds == NULL);

    /* Meant for another process: nothing taken, variables still removed. */
    snprintf(pid, sizeof(pid), "%ld", (long)getpid() + 1);
    setenv("LISTEN_FDS", "1", 1);
    setenv("LISTEN_PID", pid, 1);
    CHECK_EQ_INT(hd_listen_fds(NULL, NULL), 0);
    CHECK(getenv("LISTEN_FDS") == NULL);

    /* Malformed: an error, and the variables are removed all the same. */
    snprintf(pid, sizeof(pid), "%ld", (long)getpid());
    setenv("LISTEN_FDS", "1", 1);
    setenv("LISTEN_PID", pid, 1);
    setenv("LISTEN_FDNAMES", "a:b", 1);
    CHECK_EQ_INT(hd_listen_fds(&fds, &names), -EINVAL);
    CHECK(getenv("LISTEN_FDS") == NULL && getenv("LISTEN_FDNAMES") == NULL);

    unlink(sa.sun_path);
    return failures;
}

static void test_listen_fds(const char *dir)
{
    int status = 0;
    pid_t pid;

    fflush(stderr);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0)
        _exit(child_listen(dir) ? 1 : 0);
    if (pid < 0)
        return;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void)
{
    char dir[] = "/tmp/hidetd-test-notify-XXXXXX";

    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_send(dir);
    test_public(dir, false);
    test_public(dir, true);
    test_watchdog();
    test_listen_parse();
    test_listen_fds(dir);
    rmdir(dir);
    if (failures) {
        fprintf(stderr, "test_notify: %d check(s) failed\n", failures);
        return 1;
    }
    printf("test_notify: ok\n");
    return 0;
}
