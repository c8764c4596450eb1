/* daemon/daemon.h - hidetd's lifecycle: configuration, cache, GPU worker pool, scheduler,
 * listeners, signals (SIGHUP reload, SIGINT/SIGTERM drain), readiness and watchdog.
 *
 * main.c only calls hd_daemon_run(); everything is in daemon_lib so tests link it.
 */
#ifndef HIDET_DAEMON_DAEMON_H
#define HIDET_DAEMON_DAEMON_H

/* Parses the command line, runs the daemon until it is stopped and returns the process exit
 * code: 0 after a clean stop (or --help/--version), 1 when start-up failed (the reason is logged),
 * 2 for a usage error. Blocks the calling thread on its own libuv loop. */
int hd_daemon_run(int argc, char **argv);

#endif
