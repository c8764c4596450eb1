/* daemon/notify.h - systemd integration: readiness and status notifications, the watchdog, and
 * socket activation.
 *
 * The daemon tells its service manager when it is ready (READY=1), what it is doing (STATUS=),
 * that it reloads (RELOADING=1) or stops (STOPPING=1), and that it is alive (WATCHDOG=1). With
 * libsystemd (HIDETD_HAVE_SYSTEMD in hidetd_config.h) the calls go through sd_notify() and
 * friends; without it this module speaks the same protocol itself: one AF_UNIX datagram to
 * $NOTIFY_SOCKET (a path, or an abstract name written with a leading '@'). Both paths behave the
 * same for the daemon: when there is no $NOTIFY_SOCKET (not run by systemd) every call is a
 * cheap no-op that returns 0, so the daemon calls them unconditionally.
 *
 * Watchdog: hd_watchdog_interval() reads WATCHDOG_USEC (and WATCHDOG_PID, which must name this
 * process); the daemon pings with hd_notify_watchdog() from a libuv timer at half that interval,
 * on the loop thread, so a wedged loop stops the pings and systemd restarts the service.
 *
 * Socket activation: hd_listen_fds() takes the descriptors passed by systemd (or
 * systemd-socket-activate) through LISTEN_FDS / LISTEN_PID / LISTEN_FDNAMES, marks them
 * close-on-exec (so worker processes never inherit the listening socket) and unsets those
 * variables (so children do not believe they were activated).
 *
 * All functions are meant for the loop thread (or startup); none log. Returns: as documented per
 * function, negative errno-style codes on failure. Output parameters ret_* are untouched on
 * failure.
 */
#ifndef HIDET_DAEMON_NOTIFY_H
#define HIDET_DAEMON_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The first descriptor systemd passes (SD_LISTEN_FDS_START). */
#define HD_LISTEN_FDS_START 3

/* Sends a raw state string ("READY=1\nSTATUS=serving") to the service manager.
 * Returns 1 when sent, 0 when there is no $NOTIFY_SOCKET (nothing to do), or a negative errno
 * (-EINVAL for an empty state or a malformed socket address, or the send's error). */
int hd_notify(const char *state);

/* printf-style hd_notify(); the formatted text must stay under 4 KiB (-E2BIG otherwise). */
int hd_notifyf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* READY=1, with STATUS=<status> in the same datagram when status is not NULL. Also used after a
 * reload, to end the RELOADING=1 state. Returns as hd_notify(). */
int hd_notify_ready(const char *status);

/* STATUS=<status> (a single line: newlines are replaced by spaces). Returns as hd_notify(). */
int hd_notify_status(const char *status);

/* STOPPING=1 (with STATUS= when status is not NULL): the daemon is draining. */
int hd_notify_stopping(const char *status);

/* RELOADING=1 plus MONOTONIC_USEC=<now> (systemd >= 253 wants the timestamp for Type=notify-reload;
 * older versions ignore it). Send hd_notify_ready() when the reload is done, also when it failed
 * and the old configuration was kept. */
int hd_notify_reloading(void);

/* WATCHDOG=1: the keep-alive ping. */
int hd_notify_watchdog(void);

/* MAINPID=<pid>: tells the manager which process is the service's main process. */
int hd_notify_mainpid(pid_t pid);

/* EXTEND_TIMEOUT_USEC=<usec>: asks for more time during a slow start (a large cache migration)
 * or stop (a long drain). */
int hd_notify_extend_timeout(uint64_t usec);

/* Whether the manager wants watchdog pings. Returns 1 and sets *ret_usec to WATCHDOG_USEC when it
 * does (and WATCHDOG_PID, if set, is this process), 0 when it does not, -EINVAL when the variables
 * are malformed. The daemon should ping every *ret_usec / 2. Does not unset the variables. */
int hd_watchdog_interval(uint64_t *ret_usec);

/* Takes the sockets passed by socket activation. Returns the number n >= 0 of descriptors; on
 * n > 0, *ret_fds is a malloc'd array of n descriptors (3, 4, ...) and *ret_names a malloc'd
 * NULL-terminated array of n malloc'd names (FileDescriptorName=, "unknown" when none was given);
 * the caller owns both (free(fds), hd_strv_free(names)) and the descriptors. On n == 0 both are set
 * to NULL. Either output may be NULL when not wanted (the descriptors are still returned/marked).
 * The descriptors are marked FD_CLOEXEC; LISTEN_FDS, LISTEN_PID and LISTEN_FDNAMES are unset
 * (also on failure). Returns 0 when LISTEN_PID names another process; -EINVAL when the variables
 * are malformed (or LISTEN_FDNAMES has a different count). */
int hd_listen_fds(int **ret_fds, char ***ret_names);

/* Which address family a passed socket has: AF_UNIX, AF_INET, AF_INET6 (>0), or a negative errno
 * (-ENOTSOCK for a non-socket). When ret_listening is not NULL it says whether listen() was called
 * on it (SO_ACCEPTCONN) and ret_stream (when not NULL) whether it is SOCK_STREAM. */
int hd_socket_info(int fd, bool *ret_listening, bool *ret_stream);

/* Frees a NULL-terminated array of strings and the strings; accepts NULL; returns NULL. */
char **hd_strv_free(char **strv);

/* Internal, exposed for the unit tests (tests/ops): the protocol implementations used when
 * libsystemd is absent; they are always compiled so both paths are tested on every machine. */

/* Sends state as one datagram to socket_path ("/run/..." or "@abstract"). Returns 1 or -errno. */
int hd__notify_send(const char *socket_path, const char *state);
/* Parses WATCHDOG_USEC / WATCHDOG_PID values (either may be NULL) for the process self.
 * Returns 1 (*ret_usec set), 0 (no watchdog for us) or -EINVAL. */
int hd__watchdog_parse(const char *usec, const char *pid, pid_t self, uint64_t *ret_usec);
/* Parses LISTEN_FDS / LISTEN_PID / LISTEN_FDNAMES values (any may be NULL) for the process self.
 * Returns n >= 0 (count of descriptors starting at HD_LISTEN_FDS_START) and, when n > 0 and
 * ret_names is not NULL, *ret_names as in hd_listen_fds(); -EINVAL when malformed. Touches no
 * descriptor and no environment variable. */
int hd__listen_fds_parse(const char *fds, const char *pid, const char *names, pid_t self,
                         char ***ret_names);

#endif
