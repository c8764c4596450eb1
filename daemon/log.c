/* daemon/log.c - see log.h. */
#include "daemon/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static _Atomic int log_level = HD_LOG_INFO;
static _Atomic bool log_journal = false;
static _Atomic int log_fd = STDERR_FILENO;

/* Buffered mode: the loop thread (and thread-pool callbacks) append lines to the filling
 * buffer; a writer thread writes them out, so a slow log sink (a journal that lags, a file under
 * writeback) never holds up a request. Two buffers: one fills while the other is written. When
 * the writer falls a whole buffer behind, debug and info lines are dropped and counted (the next
 * line that fits says how many); warnings and errors wait for room and then until they are
 * written, so a crash right after cannot swallow them. Everything below is guarded by buf_lock. */
#define LOG_BUF_SIZE (256 * 1024)
/* How long the writer collects lines before it writes them: one write(2), and one wake-up of the
 * writer thread, per 10 ms at most instead of one per loop iteration (at 20k hits a second with
 * the access log on, thousands of wake-ups a second, each a thread that takes a CPU the loop
 * thread may be waiting for). Warnings and a half-full buffer cut it short. */
#define LOG_BATCH_NS (10 * 1000 * 1000L)
static pthread_mutex_t buf_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t buf_wake = PTHREAD_COND_INITIALIZER;    /* the writer: work or stop */
static pthread_cond_t buf_written = PTHREAD_COND_INITIALIZER; /* waiters: a batch was written */
static bool buf_on, writer_stop;
static bool writer_idle;          /* the writer waits for a first line (not collecting) */
static bool write_now;            /* a warning waits, or half the buffer is full */
static pthread_t writer;
static char buf_data[2][LOG_BUF_SIZE];
static int buf_fill;              /* the buffer lines are appended to */
static size_t buf_len;            /* bytes in it */
static uint64_t lines_appended;   /* lines handed to the writer (or being filled) */
static uint64_t lines_written;    /* of those, written */
static uint64_t lines_dropped_unsaid; /* dropped since the last note */
static _Atomic uint64_t lines_dropped;

static const char *const level_names[] = { "debug", "info", "warn", "error" };
/* syslog priorities: debug 7, info 6, warning 4, err 3. */
static const int level_prio[] = { 7, 6, 4, 3 };

/* systemd sets JOURNAL_STREAM=<dev>:<inode> of the stream it connected to stderr; it is only
 * ours when stderr still is that stream (a child of a unit that redirected stderr inherits the
 * variable but not the stream). */
static bool stderr_is_journal(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    if (!js || !*js)
        return false;
    unsigned long long dev = 0, ino = 0;
    if (sscanf(js, "%llu:%llu", &dev, &ino) != 2)
        return false;
    struct stat st;
    if (fstat(STDERR_FILENO, &st) < 0)
        return false;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void hd_log_init(hd_log_level level)
{
    atomic_store(&log_journal, stderr_is_journal());
    hd_log_set_level(level);
}

void hd_log_set_level(hd_log_level level)
{
    if ((int)level < HD_LOG_DEBUG || level > HD_LOG_ERROR)
        return;
    atomic_store(&log_level, (int)level);
}

hd_log_level hd_log_get_level(void) { return (hd_log_level)atomic_load(&log_level); }

bool hd_log_enabled(hd_log_level level) { return (int)level >= atomic_load(&log_level); }

void hd_log_set_journal(bool journal) { atomic_store(&log_journal, journal); }

void hd_log_set_fd(int fd) { atomic_store(&log_fd, fd < 0 ? STDERR_FILENO : fd); }

int hd_log_level_parse(const char *s, hd_log_level *ret)
{
    if (!s || !ret)
        return -EINVAL;
    for (int i = 0; i <= HD_LOG_ERROR; i++) {
        if (strcasecmp(s, level_names[i]) == 0) {
            *ret = (hd_log_level)i;
            return 0;
        }
    }
    if (strcasecmp(s, "warning") == 0) {
        *ret = HD_LOG_WARN;
        return 0;
    }
    return -EINVAL;
}

const char *hd_log_level_name(hd_log_level level)
{
    if ((int)level < HD_LOG_DEBUG || level > HD_LOG_ERROR)
        return "?";
    return level_names[level];
}

int hd__log_format(char *buf, int len, hd_log_level level, bool journal, bool with_time,
                   const char *msg)
{
    if (!buf || len < 2)
        return 0;
    if ((int)level < HD_LOG_DEBUG || level > HD_LOG_ERROR)
        level = HD_LOG_ERROR;
    int n;
    if (journal) {
        n = snprintf(buf, (size_t)len, "<%d>", level_prio[level]);
    } else if (with_time) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        n = snprintf(buf, (size_t)len, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, level_names[level]);
    } else {
        n = snprintf(buf, (size_t)len, "%-5s ", level_names[level]);
    }
    if (n < 0)
        n = 0;
    if (n > len - 2)
        n = len - 2;
    /* Copy the message, neutralising control characters (a client's path must not be able to
     * start a new, forged line). Tabs are kept readable as spaces. */
    for (const unsigned char *p = (const unsigned char *)msg; p && *p && n < len - 2; p++) {
        unsigned char c = *p;
        if (c == '\t')
            c = ' ';
        else if (c < 0x20 || c == 0x7f)
            c = '?';
        buf[n++] = (char)c;
    }
    buf[n++] = '\n';
    buf[n] = '\0';
    return n;
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return; /* nowhere to report a failing log */
        }
        p += w;
        n -= (size_t)w;
    }
}

static void *writer_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&buf_lock);
    for (;;) {
        writer_idle = true;
        while (!writer_stop && buf_len == 0)
            pthread_cond_wait(&buf_wake, &buf_lock);
        writer_idle = false;
        if (buf_len == 0)
            break; /* stopping, and everything is out */
        /* Collect for LOG_BATCH_NS (CLOCK_MONOTONIC: buf_wake is created with it). */
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += LOG_BATCH_NS;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        while (!writer_stop && !write_now)
            if (pthread_cond_timedwait(&buf_wake, &buf_lock, &until) == ETIMEDOUT)
                break;
        write_now = false;
        int idx = buf_fill;
        size_t n = buf_len;
        uint64_t upto = lines_appended;
        buf_fill ^= 1;
        buf_len = 0;
        pthread_mutex_unlock(&buf_lock);
        write_all(atomic_load(&log_fd), buf_data[idx], n);
        pthread_mutex_lock(&buf_lock);
        lines_written = upto;
        pthread_cond_broadcast(&buf_written);
    }
    pthread_mutex_unlock(&buf_lock);
    return NULL;
}

/* Caller holds buf_lock and buf_on is set. Appends a line, or drops it (debug, info) when the
 * writer is a whole buffer behind. Returns the line's number, 0 when dropped. */
/* Formats the note that says how many lines were dropped into note; returns its length. */
static size_t dropped_note(char *note, int cap, uint64_t dropped)
{
    char msg[96];
    snprintf(msg, sizeof(msg), "%llu log lines dropped: the log could not be written fast enough",
             (unsigned long long)dropped);
    return (size_t)hd__log_format(note, cap, HD_LOG_WARN, atomic_load(&log_journal), true, msg);
}

static uint64_t append_locked(const char *line, size_t n, hd_log_level level)
{
    /* Dropped lines are owed a note, written right before the next line that fits with it. */
    char note[192];
    size_t k = lines_dropped_unsaid ? dropped_note(note, (int)sizeof(note), lines_dropped_unsaid)
                                    : 0;
    while (buf_len + k + n > LOG_BUF_SIZE) {
        if (level < HD_LOG_WARN) {
            lines_dropped_unsaid++;
            atomic_fetch_add(&lines_dropped, 1);
            return 0;
        }
        write_now = true;
        pthread_cond_signal(&buf_wake);
        pthread_cond_wait(&buf_written, &buf_lock);
    }
    if (k) {
        memcpy(buf_data[buf_fill] + buf_len, note, k);
        buf_len += k;
        lines_dropped_unsaid = 0;
    }
    memcpy(buf_data[buf_fill] + buf_len, line, n);
    buf_len += n;
    /* The first line of a batch wakes the writer, which then collects for LOG_BATCH_NS; half a
     * buffer waiting cuts that short. */
    if (buf_len > LOG_BUF_SIZE / 2) {
        write_now = true;
        pthread_cond_signal(&buf_wake);
    } else if (writer_idle) {
        writer_idle = false; /* one signal per batch */
        pthread_cond_signal(&buf_wake);
    }
    return ++lines_appended;
}

void hd_log_flush(void)
{
    pthread_mutex_lock(&buf_lock);
    if (buf_on && buf_len) {
        write_now = true;
        pthread_cond_signal(&buf_wake);
    }
    pthread_mutex_unlock(&buf_lock);
}

uint64_t hd_log_dropped(void)
{
    return atomic_load(&lines_dropped);
}

void hd_log_set_buffered(bool buffered)
{
    pthread_mutex_lock(&buf_lock);
    if (buffered == buf_on) {
        pthread_mutex_unlock(&buf_lock);
        return;
    }
    if (buffered) {
        static bool cond_init;
        if (!cond_init) {
            /* The writer's batching deadline is on the monotonic clock: a wall-clock step must
             * not hold lines back (or write every line at once). */
            pthread_condattr_t ca;
            pthread_condattr_init(&ca);
            pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
            pthread_cond_destroy(&buf_wake);
            pthread_cond_init(&buf_wake, &ca);
            pthread_condattr_destroy(&ca);
            cond_init = true;
        }
        writer_stop = false;
        write_now = false;
        buf_on = pthread_create(&writer, NULL, writer_main, NULL) == 0;
        pthread_mutex_unlock(&buf_lock);
        return;
    }
    /* The writer writes what is left, then ends. */
    writer_stop = true;
    pthread_cond_signal(&buf_wake);
    pthread_mutex_unlock(&buf_lock);
    pthread_join(writer, NULL);
    pthread_mutex_lock(&buf_lock);
    buf_on = false;
    /* Drops that no later line reported are said now: they are never silent. */
    if (lines_dropped_unsaid) {
        char note[192];
        write_all(atomic_load(&log_fd), note, dropped_note(note, (int)sizeof(note),
                                                           lines_dropped_unsaid));
        lines_dropped_unsaid = 0;
    }
    pthread_mutex_unlock(&buf_lock);
}

void hd_log(hd_log_level level, const char *fmt, ...)
{
    if (!hd_log_enabled(level))
        return;
    int saved_errno = errno;
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    char line[4096 + 64];
    int n = hd__log_format(line, (int)sizeof(line), level, atomic_load(&log_journal), true, msg);
    pthread_mutex_lock(&buf_lock);
    if (buf_on && !writer_stop) {
        uint64_t mine = append_locked(line, (size_t)n, level);
        /* Problems are written at once, so a crash right after cannot swallow them. */
        if (mine && level >= HD_LOG_WARN) {
            write_now = true;
            pthread_cond_signal(&buf_wake);
            while (lines_written < mine)
                pthread_cond_wait(&buf_written, &buf_lock);
        }
    } else {
        write_all(atomic_load(&log_fd), line, (size_t)n);
    }
    pthread_mutex_unlock(&buf_lock);
    errno = saved_errno;
}
