/* bench_sim.h: what the parts of cudackpt-bench-sim share: its
 * configuration (bench_sim.c: the command line) and the load parts
 * (bench_sim_load.c). */
#ifndef CUDACKPT_BENCH_SIM_H
#define CUDACKPT_BENCH_SIM_H

#include <sys/types.h>

#include <cudackpt/client.h>

#include "bench_common.h"

#define BENCH_SIM_MAX_LEVELS 16
#define BENCH_SIM_MAX_TARGETS 1024

typedef struct bench_sim_cfg {
        const char *daemon_path;
        const char *sim_path;
        const char *log_level;
        long levels[BENCH_SIM_MAX_LEVELS];
        int nlevels;
        long seconds_ms;
        long max_requests;
        long targets;
        long idle_conns;
        long client_threads; /* 0: a thread per client; N: N threads multiplexing them */
        const char *config_extra; /* more "key": value pairs for the daemon's configuration */
        int run_getstate, run_rss, run_watchers, run_storm, run_syscall, run_spin; /* --only */
        long spin_calls;     /* spin: timed calls of each kind per setting */
        long syscall_calls;  /* syscall: getppid() calls per block */
        long syscall_rounds; /* syscall: blocks of each condition */
        long storm_seconds;  /* storm: how long */
        long storm_uid;      /* storm: its uid */
        long watchers;       /* watchers: Watch connections */
        long watch_calls;    /* watchers: timed GetState calls per condition */
        long watch_rounds;   /* watchers: rounds of the four blocks */
        long watch_rate;     /* watchers: Lock/Unlock cycles per second, 0 back to back */
} bench_sim_cfg;

/* GetState from nclients concurrent clients on pids for cfg->seconds_ms
 * (at most cfg->max_requests), reported as one line and a RESULT. */
int bench_sim_level(const bench_sim_cfg *cfg, const bench_daemon *d, const pid_t *pids, long nclients);

/* The daemon's resident memory with cfg->idle_conns connections open,
 * each of which made one call, against rss_idle. */
int bench_sim_idle_conns(const bench_sim_cfg *cfg, const bench_daemon *d, const pid_t *pids, long rss_idle);

#endif
