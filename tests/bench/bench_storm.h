/* bench_storm.h: a watcher storm, the "storm" part of cudackpt-bench-sim.
 *
 * One unprivileged uid (a child of the benchmark that drops to it) opens as
 * many Watch streams as the daemon lets it and never reads them, topping
 * them up as the daemon cuts them off, while it locks and unlocks its own
 * simulated CUDA processes in a loop, so that every watcher's events pile
 * up.  Meanwhile root (another uid) times GetState round trips on its own
 * process, and the daemon's resident memory is sampled.  The same GetState
 * calls are timed before the storm.  The report gives the other uid's
 * p50/p99/max with and without the storm, the daemon's RSS idle, at its peak
 * during the storm and after it (once the watchers have gone), and the bound
 * the configuration sets on what watchers may take, with whether the peak
 * stayed within it.  Needs root (to drop to another uid); timing never
 * fails it, a failed call does. */
#ifndef CUDACKPT_BENCH_STORM_H
#define CUDACKPT_BENCH_STORM_H

#include <sys/types.h>

typedef struct bench_storm_cfg {
        const char *socket_path;
        pid_t daemon_pid;
        int probe_pid;            /* root's GetState target */
        uid_t uid;                /* the storm's uid */
        long seconds;             /* how long the storm lasts */
        long calls;               /* GetState calls timed without the storm, at most */
        long targets;             /* the storm uid's processes */
        long max_watcher_bytes;   /* the daemon's settings, for the bound */
        long max_watch_bytes;
        long max_watchers_per_uid;
} bench_storm_cfg;

/* Runs the storm and prints the report and RESULT lines; 0, or -EIO when a
 * call failed or the storm could not start (an ERROR line says why). */
int bench_storm_run(const bench_storm_cfg *cfg);

#endif
