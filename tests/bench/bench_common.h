/* bench_common.h: small helpers shared by the cudackptd benchmarks.
 *
 * Statistics over latency samples, a monotonic clock, starting the daemon
 * and waiting for its sd_notify READY=1 (no polling), spawning target
 * processes (optionally waiting for a "ready" line on a pipe), reading a
 * process's resident memory, and the "RESULT key=value ..." lines the
 * benchmarks print for machines beside their human-readable report. */
#ifndef CUDACKPT_BENCH_COMMON_H
#define CUDACKPT_BENCH_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Nanoseconds on CLOCK_MONOTONIC. */
uint64_t bench_now_ns(void);

typedef struct bench_stats {
        size_t n;
        double min, p50, p90, p99, max, mean;
} bench_stats;

/* Sorts samples[0..n) in place and summarises them (all zero when n == 0). */
void bench_stats_compute(double *samples, size_t n, bench_stats *ret_stats);
/* Median of v[0..n), sorting v in place; 0 when n == 0. */
double bench_median(double *v, size_t n);

/* A growable array of samples. */
typedef struct bench_samples {
        double *v;
        size_t n, cap;
} bench_samples;
int bench_samples_add(bench_samples *s, double x);
void bench_samples_free(bench_samples *s);

/* mkdtemp under $TMPDIR (default /tmp); the caller frees *ret_path. */
int bench_make_workdir(const char *prefix, char **ret_path);
/* What a benchmark program does first: stdout line-buffered, SIGPIPE
 * ignored, its work directory made (prog names it, and the error said on
 * stderr, as "prog: work directory: ..."); 0 or -errno. */
int bench_begin(const char *prog, char **ret_workdir);
/* rm -rf of a work directory made by bench_make_workdir (one level deep). */
void bench_remove_workdir(const char *path);

typedef struct bench_daemon {
        pid_t pid;
        char socket_path[256];
        char log_path[256];
} bench_daemon;

typedef struct bench_daemon_opts {
        const char *daemon_path;    /* cudackptd */
        const char *driver_path;    /* --driver= */
        const char *config_path;    /* --config=, or NULL */
        const char *log_level;      /* --log-level=, or NULL */
        const char *workdir;        /* socket, notify socket and log go here */
        const char *const *env_add; /* "K=V" strings added to its environment, NULL-terminated, or NULL */
        int ready_timeout_ms;
} bench_daemon_opts;

/* Starts cudackptd and returns once it sent READY=1 (or fails: -ETIMEDOUT,
 * -ECHILD when it exited first; its log then says why). */
int bench_daemon_start(const bench_daemon_opts *o, bench_daemon *ret_daemon);
/* SIGTERM, then SIGKILL after timeout_ms; returns its wait status or -errno. */
int bench_daemon_stop(bench_daemon *d, int timeout_ms);

/* fork+exec argv[0] (searched in PATH) with env_add added to the
 * environment, stdout and stderr to out_path (NULL: /dev/null).  When
 * ready_fd >= 0 it becomes fd 3 of the child.  The child gets SIGKILL when
 * this process dies (fork only from the main thread). */
int bench_spawn(char *const argv[], const char *const *env_add, const char *out_path, int ready_fd,
                pid_t *ret_pid);
/* Reads from fd until a newline or EOF, at most timeout_ms; closes fd.
 * 0 when a line starting with "ready" arrived. */
int bench_wait_ready(int fd, int timeout_ms, char *buf, size_t len);
/* SIGKILL and reap. */
void bench_kill(pid_t pid);
/* Runs argv (stdout/stderr to /dev/null, env_add as for bench_spawn) and
 * returns its exit status (or -errno); *ret_ns is the fork-to-reap time. */
int bench_run_timed(char *const argv[], const char *const *env_add, uint64_t *ret_ns);

/* VmRSS of pid in KiB, or -errno. */
long bench_vmrss_kib(pid_t pid);
/* Raises RLIMIT_NOFILE's soft limit to min(hard, want); returns the new soft limit. */
long bench_raise_nofile(long want);

/* Parses a positive integer option value; 0 or -EINVAL. */
int bench_parse_long(const char *s, long min, long max, long *ret);
/* Parses "1,16,256" into at most max values; returns the count or -EINVAL. */
int bench_parse_list(const char *s, long *out, int max);

/* Options of a benchmark's command line, --NAME=VALUE, each stored at the
 * offset field of its configuration struct: a string (const char *), or
 * a number (long) within [min, max]. */
typedef struct bench_opt {
        const char *prefix; /* "--NAME=" */
        size_t field;
        bool number;
        long min, max;
} bench_opt;

/* Sets the option a in cfg if it is one of opts[n]: 0, -EINVAL for a bad
 * number, -ENOENT if it is none of them. */
int bench_parse_opt(const char *a, const bench_opt *opts, size_t n, void *cfg);

#endif
