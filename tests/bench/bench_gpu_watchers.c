/* bench_gpu_watchers.c: the watchers benchmark (see bench_gpu.c). */
#include "bench_gpu.h"

/* ------------------------------------------------------------------------
 * 8. GetState with Watch streams open
 * ------------------------------------------------------------------------ */
int bench_gpu_watchers(const bench_gpu_cfg *cfg)
{
        bench_daemon d;
        bench_gpu_target t[2];
        int r;

        /* Both ends of every watcher live in this process tree (the daemon
         * inherits the limit); the default max_connections_per_uid is 1024. */
        long nofile = bench_raise_nofile(2 * cfg->watchers + 1024);
        if (nofile < cfg->watchers + 256)
                printf("warning: RLIMIT_NOFILE is %ld; %ld watchers may not fit\n", nofile, cfg->watchers);
        if ((r = bench_gpu_daemon_start(cfg, &d)) < 0)
                return r;
        if ((r = bench_gpu_targets_start(cfg, "watch", 2, cfg->idle_mib, t)) < 0)
                goto out_daemon;
        bench_watch_cfg wc = {
                .socket_path = d.socket_path,
                .tag = "gpu",
                .probe_pid = (int)t[0].pid,
                .load_pid = (int)t[1].pid,
                .watchers = cfg->watchers,
                .calls = cfg->calls,
                .rounds = cfg->watch_rounds,
                .warmup = 200,
                .load_rate = cfg->watch_rate,
        };
        if (bench_watch_run(&wc) < 0) {
                bench_gpu_failures++; /* its ERROR lines are printed */
                r = -EIO;
        }
        for (int i = 0; i < 2; i++)
                if (bench_gpu_target_check(&t[i]) < 0)
                        r = -EIO;
        bench_gpu_targets_stop(t, 2);
out_daemon:
        bench_gpu_daemon_stop(&d);
        return r;
}
