/* daemon/log.h - the daemon's log: one line per event on stderr.
 *
 * Library modules never log; the daemon does, through this. A line is written with a single
 * write(2) so lines from the loop thread and from thread-pool callbacks never interleave. On a
 * terminal or a plain file each line starts with a UTC timestamp and the level; under systemd
 * (stderr is the journal stream named by $JOURNAL_STREAM) the line starts with the syslog
 * priority prefix "<N>" instead, so journald stores the right priority and adds its own time.
 *
 * Client-supplied text (paths, messages) can reach a log line, so control characters in a line
 * are replaced by '?' before it is written: a request can never forge a second log line.
 */
#ifndef HIDET_DAEMON_LOG_H
#define HIDET_DAEMON_LOG_H

#include <stdbool.h>
#include <stdint.h>

typedef enum {
    HD_LOG_DEBUG = 0,
    HD_LOG_INFO,
    HD_LOG_WARN,
    HD_LOG_ERROR,
} hd_log_level;

/* Decides once between journal and plain format (from $JOURNAL_STREAM and stderr's identity)
 * and sets the threshold. Safe to call again (after a reload, or in tests). */
void hd_log_init(hd_log_level level);

/* Changes the threshold; lines below it are dropped cheaply. Thread-safe (atomic). */
void hd_log_set_level(hd_log_level level);
hd_log_level hd_log_get_level(void);
/* Whether a line at this level would be written (to skip building expensive arguments). */
bool hd_log_enabled(hd_log_level level);

/* Forces the journal format on or off (tests; and when stderr is known to be the journal). */
void hd_log_set_journal(bool journal);
/* Redirects output to fd instead of stderr (tests). fd stays owned by the caller. */
void hd_log_set_fd(int fd);

/* Buffered mode (the daemon's loop): lines are collected in memory and written by a writer
 * thread, which the first line of a batch wakes and which then collects for 10 ms (a warning,
 * hd_log_flush() or half the buffer waiting cut that short), so the loop never waits on the log
 * sink and a busy server makes at most about 100 write(2)s and writer wake-ups a second.
 * Warnings and errors return only once written. When the writer falls a
 * whole buffer behind, debug and info lines are dropped and counted (hd_log_dropped()); the next
 * line that fits says how many. Turning it off writes what is left and ends the writer. Turn it on
 * after signals are blocked (the writer inherits the mask). Thread-safe. */
void hd_log_set_buffered(bool buffered);
/* Has the writer write the lines buffered so far now (never blocks on the sink). */
void hd_log_flush(void);
/* Lines dropped in buffered mode since the start. */
uint64_t hd_log_dropped(void);

/* Parses "debug" | "info" | "warn" ("warning") | "error"; returns 0 or -EINVAL (*ret untouched). */
int hd_log_level_parse(const char *s, hd_log_level *ret);
/* Static name of a level ("info"). */
const char *hd_log_level_name(hd_log_level level);

/* Writes one line (a trailing newline is added; the message is cut at 4 KiB). */
void hd_log(hd_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define hd_log_debug(...) hd_log(HD_LOG_DEBUG, __VA_ARGS__)
#define hd_log_info(...) hd_log(HD_LOG_INFO, __VA_ARGS__)
#define hd_log_warn(...) hd_log(HD_LOG_WARN, __VA_ARGS__)
#define hd_log_error(...) hd_log(HD_LOG_ERROR, __VA_ARGS__)

/* Internal, for tests: formats a line exactly as hd_log() would write it (without the timestamp
 * when journal is false and with_time is false) into buf; returns its length. */
int hd__log_format(char *buf, int len, hd_log_level level, bool journal, bool with_time,
                   const char *msg);

#endif
