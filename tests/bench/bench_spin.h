/* bench_spin.h: GetState through the daemon against the simulator's direct
 * call and GetInfo, with the lane's spinning off and on and with clients
 * that sleep or spin for their replies (bench_sim's part "spin").
 *
 * For each lane_spin_us value a daemon of its own starts on the simulated
 * driver; one connection then times back-to-back GetState and GetInfo
 * calls, a second one whose client spins for its replies
 * (cudackpt_client_set_spin()) the same, and this process times the
 * simulator's cuCheckpointProcessGetState directly (dlopen).  It reports
 * p50/p90/p99 of the five side by side, the daemon's CPU time per call
 * while calls run, and its CPU time over a few idle seconds afterwards
 * (utime + stime of /proc/PID/stat), which must stay near zero whether it
 * spins or not. */
#ifndef CUDACKPT_BENCH_SPIN_H
#define CUDACKPT_BENCH_SPIN_H

#define BENCH_SPIN_MAX_SETTINGS 4

typedef struct bench_spin_cfg {
        const char *daemon_path;
        const char *sim_path;
        const char *log_level;
        int pid;              /* a simulated target (CUDACKPT_SIM=1), running */
        long calls;           /* timed calls of each kind, per setting */
        long idle_ms;         /* how long the idle daemon is watched */
        long spin_us[BENCH_SPIN_MAX_SETTINGS]; /* the lane_spin_us values compared */
        int n_spin;
} bench_spin_cfg;

/* 0, or -errno when a daemon did not start or a call failed. */
int bench_spin_run(const bench_spin_cfg *cfg);

#endif
