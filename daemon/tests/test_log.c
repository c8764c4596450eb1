/* daemon/tests/test_log.c - log line formats (plain with timestamp, journal with <N> priority),
 * level parsing and filtering, neutralised control characters, and buffered mode: lines in
 * order, warnings written before they return, and a stuck sink costing dropped info lines (said
 * in a note) rather than a blocked caller. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/check.h"
#include "daemon/log.h"

static char *read_all(int fd)
{
    static char buf[8192];
    lseek(fd, 0, SEEK_SET);
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

/* Reads a pipe until told to stop, keeping the last bytes seen. */
typedef struct drain {
    int fd;
    atomic_bool stop;
    char text[1 << 16];
    size_t len;
} drain;

static void *drain_main(void *arg)
{
    drain *d = arg;
    char buf[4096];
    for (;;) {
        ssize_t n = read(d->fd, buf, sizeof(buf));
        if (n > 0) {
            if (d->len + (size_t)n >= sizeof(d->text)) {
                /* Keep the tail: the note comes after the dropped lines. */
                size_t keep = sizeof(d->text) / 2;
                memmove(d->text, d->text + d->len - keep, keep);
                d->len = keep;
            }
            memcpy(d->text + d->len, buf, (size_t)n);
            d->len += (size_t)n;
            d->text[d->len] = '\0';
        } else if (atomic_load(&d->stop)) {
            break;
        } else {
            usleep(1000);
        }
    }
    return NULL;
}

static void buffered(void)
{
    int p[2];
    CHECK(pipe(p) == 0, "pipe");
    CHECK(fcntl(p[0], F_SETFL, O_NONBLOCK) == 0, "nonblocking read end");
    hd_log_set_journal(true);
    hd_log_set_level(HD_LOG_INFO);
    hd_log_set_fd(p[1]);
    hd_log_set_buffered(true);
    hd_log_info("first");
    hd_log_warn("second"); /* returns once written, with everything before it */
    char buf[256];
    ssize_t n = read(p[0], buf, sizeof(buf) - 1);
    buf[n > 0 ? n : 0] = '\0';
    CHECK_STR(buf, "<6>first\n<4>second\n");

    /* Nobody reads: the writer blocks in write(2) once the pipe is full, the buffers fill, and
     * further info lines are dropped instead of blocking this thread. */
    uint64_t before = hd_log_dropped();
    char pad[200];
    memset(pad, 'x', sizeof(pad) - 1);
    pad[sizeof(pad) - 1] = '\0';
    for (int i = 0; i < 20000; i++)
        hd_log_info("line %d %s", i, pad);
    CHECK(hd_log_dropped() > before, "nothing dropped behind a stuck sink");

    /* The sink comes back: everything still buffered is written, with a note of the drops. */
    static drain d;
    d.fd = p[0];
    pthread_t t;
    CHECK(pthread_create(&t, NULL, drain_main, &d) == 0, "drain thread");
    hd_log_warn("after"); /* waits for room, so the note and this line are both written */
    hd_log_set_buffered(false);
    atomic_store(&d.stop, true);
    pthread_join(t, NULL);
    CHECK(strstr(d.text, "log lines dropped") != NULL, "no note of the dropped lines");
    char *note = strstr(d.text, "log lines dropped");
    CHECK(note && strstr(note, "<4>after\n") != NULL, "the note does not come before the last line");
    hd_log_set_fd(-1);
    close(p[0]);
    close(p[1]);
}

int main(void)
{
    buffered();

    hd_log_level l = HD_LOG_ERROR;
    CHECK(hd_log_level_parse("debug", &l) == 0 && l == HD_LOG_DEBUG, "debug");
    CHECK(hd_log_level_parse("WARNING", &l) == 0 && l == HD_LOG_WARN, "warning");
    CHECK(hd_log_level_parse("loud", &l) == -EINVAL && l == HD_LOG_WARN, "loud");
    CHECK_STR(hd_log_level_name(HD_LOG_ERROR), "error");

    char buf[256];
    hd__log_format(buf, sizeof(buf), HD_LOG_WARN, true, true, "disk full");
    CHECK_STR(buf, "<4>disk full\n");
    hd__log_format(buf, sizeof(buf), HD_LOG_DEBUG, true, true, "x");
    CHECK_STR(buf, "<7>x\n");
    hd__log_format(buf, sizeof(buf), HD_LOG_ERROR, true, true, "x");
    CHECK_STR(buf, "<3>x\n");
    hd__log_format(buf, sizeof(buf), HD_LOG_INFO, false, false, "GET /a\nFAKE line\r\x1b[31m\tend");
    CHECK_STR(buf, "info  GET /a?FAKE line??[31m end\n");
    int n = hd__log_format(buf, sizeof(buf), HD_LOG_INFO, false, true, "hello");
    /* 2026-01-01T00:00:00.000Z info  hello\n */
    CHECK(n == 37 && buf[4] == '-' && buf[10] == 'T' && buf[23] == 'Z' && !strcmp(buf + 24, " info  hello\n"),
          "timestamped line '%s'", buf);
    /* Truncation keeps the newline and the terminator. */
    char small[8];
    hd__log_format(small, sizeof(small), HD_LOG_INFO, true, false, "abcdefghijkl");
    CHECK(strlen(small) == 7 && small[6] == '\n', "truncated '%s'", small);

    char path[] = "/tmp/hidetd-log-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    unlink(path);
    hd_log_set_fd(fd);
    hd_log_set_journal(true);
    hd_log_set_level(HD_LOG_WARN);
    CHECK(!hd_log_enabled(HD_LOG_INFO) && hd_log_enabled(HD_LOG_ERROR), "enabled");
    hd_log_info("dropped %d", 1);
    hd_log_warn("kept %d", 2);
    hd_log_error("also %s", "kept");
    CHECK_STR(read_all(fd), "<4>kept 2\n<3>also kept\n");
    hd_log_set_level((hd_log_level)42); /* ignored */
    CHECK(hd_log_get_level() == HD_LOG_WARN, "bad level ignored");

    /* Outside systemd (JOURNAL_STREAM unset or naming another stream) the plain format is used. */
    setenv("JOURNAL_STREAM", "1:2", 1);
    hd_log_init(HD_LOG_INFO);
    CHECK(ftruncate(fd, 0) == 0, "ftruncate");
    lseek(fd, 0, SEEK_SET);
    hd_log_info("plain");
    const char *out = read_all(fd);
    CHECK(out[0] == '2' && strstr(out, " info  plain\n"), "plain line '%s'", out);
    hd_log_set_fd(-1);
    close(fd);
    return check_finish("test_log");
}
