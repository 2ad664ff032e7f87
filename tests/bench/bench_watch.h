/* bench_watch.h: GetState latency with Watch streams open, the "watchers"
 * part of cudackpt-bench-sim and cudackpt-bench-gpu.
 *
 * On a running daemon, GetState round trips on one connection to a running
 * target (the probe) are timed in four conditions:
 *   idle/0    no watcher connected, nothing else going on;
 *   idle/N    N connections each in a Watch stream (no selector: every
 *             process), drained by a reader thread (poll on all of them,
 *             read and discard) so that none is cut off as a slow reader;
 *   load/0    another connection runs a Lock/Unlock loop on a second target;
 *   load/N    the same loop with the N watchers open, so that its events
 *             (started, state, finished for each call) flow to all of them.
 * A round runs the four as blocks, in the order above and reversed in every
 * other round, so that drift of the machine's speed falls on all alike;
 * watchers are opened for their blocks and closed after.  The report gives
 * p50/p90/p99/max/mean per condition over all rounds, the per-round
 * medians, the ratios with/without watchers and whether the goal "within
 * 10 % of none" (at the median, without load) is met.  Timing never fails
 * it; a failed call, a watcher that did not start or was cut off does. */
#ifndef CUDACKPT_BENCH_WATCH_H
#define CUDACKPT_BENCH_WATCH_H

typedef struct bench_watch_cfg {
        const char *socket_path;
        const char *tag;  /* RESULT lines say bench=TAG-watchers */
        int probe_pid;    /* GetState target, left running */
        int load_pid;     /* the Lock/Unlock loop's target */
        long watchers;    /* Watch connections in the "with" blocks */
        long calls;       /* timed GetState round trips per condition, over all rounds */
        long rounds;      /* rounds of the four blocks */
        long warmup;      /* untimed GetState calls at the start of each block */
        long load_rate;   /* Lock/Unlock cycles per second; 0: back to back */
} bench_watch_cfg;

/* Runs the measurement and prints the report and RESULT lines; 0, or -EIO
 * when a call failed or a watcher did not start or was cut off (an ERROR
 * line says which). */
int bench_watch_run(const bench_watch_cfg *cfg);

#endif
