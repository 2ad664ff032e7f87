/* bench_gpu_multi.c: the multi benchmark (see bench_gpu.c). */
#include "bench_gpu.h"

int bench_gpu_multi(const bench_gpu_cfg *cfg)
{
        bench_daemon d;
        bench_gpu_driver drv;
        bench_gpu_target t[BENCH_GPU_MAX_PROCS];
        bench_gpu_worker w[BENCH_GPU_MAX_PROCS];
        pthread_barrier_t start;
        int n = (int)cfg->procs, r;
        long R = cfg->repeats;
        double *tot[3], *sus[3], *res[3], *ck, *rs;
        const char *names[3] = {"daemon, all at once (N clients)", "daemon, one after another",
                                "driver direct, N threads at once"};
        const char *keys[3] = {"daemon-parallel", "daemon-sequential", "direct-parallel"};

        printf("\n== 3. Suspend+resume of %d x %ld MiB processes (%ld repeats, medians) ==\n", n, cfg->proc_mib, R);
        if ((r = bench_gpu_driver_load(cfg, &drv)) < 0)
                return r;
        if ((r = bench_gpu_daemon_start(cfg, &d)) < 0)
                return r;
        if ((r = bench_gpu_targets_start(cfg, "multi", n, cfg->proc_mib, t)) < 0)
                goto out_daemon;
        for (int m = 0; m < 3; m++) {
                tot[m] = calloc((size_t)R, sizeof(double));
                sus[m] = calloc((size_t)(R * n), sizeof(double));
                res[m] = calloc((size_t)(R * n), sizeof(double));
        }
        ck = calloc((size_t)(R * n), sizeof(double));
        rs = calloc((size_t)(R * n), sizeof(double));
        for (int m = 0; m < 3; m++)
                if (!tot[m] || !sus[m] || !res[m])
                        r = -ENOMEM;
        if (!ck || !rs)
                r = -ENOMEM;

        for (long rep = 0; rep < R && r == 0; rep++) {
                /* The three modes alternate so that drift hits all alike. */
                double ms = bench_gpu_parallel(BENCH_GPU_DAEMON, &d, &drv, t, n, w, &start);
                if (ms < 0 || bench_gpu_all_running(&drv, t, n) < 0) {
                        r = -EIO;
                        break;
                }
                tot[0][rep] = ms;
                for (int i = 0; i < n; i++) {
                        sus[0][rep * n + i] = w[i].suspend_ms;
                        res[0][rep * n + i] = w[i].resume_ms;
                }

                cudackpt_client *c = NULL;
                if (bench_gpu_connect(&d, &c) < 0) {
                        r = -EIO;
                        break;
                }
                uint64_t t0 = bench_now_ns();
                for (int i = 0; i < n && r == 0; i++) {
                        char err[512];
                        if (bench_gpu_daemon_cycle(c, t[i].pid, &sus[1][rep * n + i], &res[1][rep * n + i], err,
                                                   sizeof(err)) < 0) {
                                bench_gpu_fail("%s", err);
                                r = -EIO;
                        }
                }
                tot[1][rep] = bench_gpu_ms(bench_now_ns() - t0);
                cudackpt_client_free(c);
                if (r < 0 || bench_gpu_all_running(&drv, t, n) < 0) {
                        r = -EIO;
                        break;
                }

                ms = bench_gpu_parallel(BENCH_GPU_DIRECT, &d, &drv, t, n, w, &start);
                if (ms < 0 || bench_gpu_all_running(&drv, t, n) < 0) {
                        r = -EIO;
                        break;
                }
                tot[2][rep] = ms;
                for (int i = 0; i < n; i++) {
                        sus[2][rep * n + i] = w[i].suspend_ms;
                        res[2][rep * n + i] = w[i].resume_ms;
                        ck[rep * n + i] = w[i].ckpt_ms;
                        rs[rep * n + i] = w[i].restore_ms;
                }
                printf("  repeat %ld: at once %.2f s, one after another %.2f s, direct %.2f s\n", rep + 1,
                       tot[0][rep] / 1e3, tot[1][rep] / 1e3, tot[2][rep] / 1e3);
                fflush(stdout);
        }
        for (int i = 0; i < n; i++)
                if (bench_gpu_target_check(&t[i]) < 0)
                        r = -EIO;
        if (r == 0) {
                double med[3];
                printf("  %-36s %10s %18s %18s\n", "mode", "total s", "suspend s/proc", "resume s/proc");
                for (int m = 0; m < 3; m++) {
                        med[m] = bench_median(tot[m], (size_t)R);
                        double ms_ = bench_median(sus[m], (size_t)(R * n));
                        double mr = bench_median(res[m], (size_t)(R * n));
                        printf("  %-36s %10.2f %18.2f %18.2f\n", names[m], med[m] / 1e3, ms_ / 1e3, mr / 1e3);
                        printf("RESULT bench=multi mode=%s procs=%d mib=%ld repeats=%ld total_s=%.3f "
                               "suspend_s=%.3f resume_s=%.3f\n",
                               keys[m], n, cfg->proc_mib, R, med[m] / 1e3, ms_ / 1e3, mr / 1e3);
                }
                printf("  direct driver: checkpoint %.2f s, restore %.2f s per process (median)\n",
                       bench_median(ck, (size_t)(R * n)) / 1e3, bench_median(rs, (size_t)(R * n)) / 1e3);
                printf("  at once vs one after another: x%.2f faster; daemon at once vs direct: %+.1f%%\n",
                       med[0] > 0 ? med[1] / med[0] : 0, med[2] > 0 ? (med[0] / med[2] - 1) * 100 : 0);
                printf("  data check: all %d targets verified their buffers intact\n", n);
                printf("RESULT bench=multi speedup_parallel=%.3f daemon_vs_direct_pct=%.2f data_ok=1\n",
                       med[0] > 0 ? med[1] / med[0] : 0, med[2] > 0 ? (med[0] / med[2] - 1) * 100 : 0);
        }
        for (int m = 0; m < 3; m++) {
                free(tot[m]);
                free(sus[m]);
                free(res[m]);
        }
        free(ck);
        free(rs);
        bench_gpu_targets_stop(t, n);
out_daemon:
        bench_gpu_daemon_stop(&d);
        return r;
}
