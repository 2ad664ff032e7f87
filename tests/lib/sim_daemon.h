/* sim_daemon.h: cudackptd started the one way the C test programs start it
 * (the integration harness, the benchmarks): its command line, the
 * NOTIFY_SOCKET it tells its readiness on, and the wait for READY=1.  The
 * caller forks and execs (each keeps its own log and environment) and
 * turns these -errno returns into its own failure. */
#ifndef CUDACKPT_TEST_SIM_DAEMON_H
#define CUDACKPT_TEST_SIM_DAEMON_H

#include <limits.h>

/* What the daemon is started with; config and log_level may be NULL (the
 * daemon's defaults). */
struct test_daemon_cmd {
        const char *daemon;    /* the cudackptd binary */
        const char *socket;    /* --socket= */
        const char *driver;    /* --driver=: the simulator, or a driver */
        const char *config;    /* --config= */
        const char *log_level; /* --log-level= */
};

/* The argv of a cmd: argv[] points into buf, so it lives as long as the
 * struct does. */
struct test_daemon_argv {
        char *argv[6];
        char buf[4][PATH_MAX + 16];
};

/* Fills ret_argv from cmd; -ENAMETOOLONG if a path does not fit. */
int test_daemon_argv(const struct test_daemon_cmd *cmd, struct test_daemon_argv *ret_argv);

/* A datagram socket bound at path (unlinked first), for the daemon's
 * NOTIFY_SOCKET; close-on-exec, nonblocking.  The fd, or -errno. */
int test_daemon_notify_open(const char *path);

/* Waits up to timeout_ms for a datagram on nfd with a line READY=1 while
 * pidfd (the daemon's; -1: not watched) shows it alive.  0 once it came,
 * -ECHILD if the daemon exited first (not reaped), -ETIMEDOUT, or -errno
 * of poll().  Leaves nfd open. */
int test_daemon_await_ready(int nfd, int pidfd, int timeout_ms);

#endif
