/* bench_gpu_multi.c: the multi benchmark (see bench_gpu.c): suspend+resume
 * of N processes through the daemon at once, one after another, and by
 * direct driver calls from N threads. */
#include "bench_gpu.h"

/* The three modes, in the order each repeat runs them. */
enum { MULTI_PARALLEL, MULTI_SEQUENTIAL, MULTI_DIRECT, MULTI_MODES };

/* What the repeats measure: each mode's total per repeat and its suspend
 * and resume per process and repeat; the direct driver's checkpoint and
 * restore per process and repeat. */
typedef struct bench_gpu_multi_samples {
        double *tot[MULTI_MODES], *sus[MULTI_MODES], *res[MULTI_MODES], *ck, *rs;
} bench_gpu_multi_samples;

static int bench_gpu_multi_alloc(bench_gpu_multi_samples *s, long R, int n)
{
        int r = 0;
        for (int m = 0; m < MULTI_MODES; m++) {
                s->tot[m] = calloc((size_t)R, sizeof(double));
                s->sus[m] = calloc((size_t)(R * n), sizeof(double));
                s->res[m] = calloc((size_t)(R * n), sizeof(double));
                if (!s->tot[m] || !s->sus[m] || !s->res[m])
                        r = -ENOMEM;
        }
        s->ck = calloc((size_t)(R * n), sizeof(double));
        s->rs = calloc((size_t)(R * n), sizeof(double));
        return s->ck && s->rs ? r : -ENOMEM;
}

static void bench_gpu_multi_free(bench_gpu_multi_samples *s)
{
        for (int m = 0; m < MULTI_MODES; m++) {
                free(s->tot[m]);
                free(s->sus[m]);
                free(s->res[m]);
        }
        free(s->ck);
        free(s->rs);
}

/* One after another through one client: each process's suspend and
 * resume into sus[i] and res[i], the whole into *ret_total_ms. */
static int bench_gpu_multi_sequential(const bench_daemon *d, const bench_gpu_target *t, int n, double *sus,
                                      double *res, double *ret_total_ms)
{
        cudackpt_client *c = NULL;
        int r = 0;
        if (bench_gpu_connect(d, &c) < 0)
                return -EIO;
        uint64_t t0 = bench_now_ns();
        for (int i = 0; i < n && r == 0; i++) {
                char err[512];
                if (bench_gpu_daemon_cycle(c, t[i].pid, &sus[i], &res[i], err, sizeof(err)) < 0) {
                        bench_gpu_fail("%s", err);
                        r = -EIO;
                }
        }
        *ret_total_ms = bench_gpu_ms(bench_now_ns() - t0);
        cudackpt_client_free(c);
        return r;
}

/* Repeat rep of the three modes, alternating so that drift hits all alike. */
static int bench_gpu_multi_repeat(const bench_daemon *d, const bench_gpu_driver *drv, bench_gpu_target *t, int n,
                                  bench_gpu_multi_samples *s, long rep)
{
        bench_gpu_worker w[BENCH_GPU_MAX_PROCS];
        pthread_barrier_t start;
        double ms = bench_gpu_parallel(BENCH_GPU_DAEMON, d, drv, t, n, w, &start);
        if (ms < 0 || bench_gpu_all_running(drv, t, n) < 0)
                return -EIO;
        s->tot[MULTI_PARALLEL][rep] = ms;
        for (int i = 0; i < n; i++) {
                s->sus[MULTI_PARALLEL][rep * n + i] = w[i].suspend_ms;
                s->res[MULTI_PARALLEL][rep * n + i] = w[i].resume_ms;
        }
        if (bench_gpu_multi_sequential(d, t, n, &s->sus[MULTI_SEQUENTIAL][rep * n],
                                       &s->res[MULTI_SEQUENTIAL][rep * n], &s->tot[MULTI_SEQUENTIAL][rep]) < 0 ||
            bench_gpu_all_running(drv, t, n) < 0)
                return -EIO;
        ms = bench_gpu_parallel(BENCH_GPU_DIRECT, d, drv, t, n, w, &start);
        if (ms < 0 || bench_gpu_all_running(drv, t, n) < 0)
                return -EIO;
        s->tot[MULTI_DIRECT][rep] = ms;
        for (int i = 0; i < n; i++) {
                s->sus[MULTI_DIRECT][rep * n + i] = w[i].suspend_ms;
                s->res[MULTI_DIRECT][rep * n + i] = w[i].resume_ms;
                s->ck[rep * n + i] = w[i].ckpt_ms;
                s->rs[rep * n + i] = w[i].restore_ms;
        }
        printf("  repeat %ld: at once %.2f s, one after another %.2f s, direct %.2f s\n", rep + 1,
               s->tot[MULTI_PARALLEL][rep] / 1e3, s->tot[MULTI_SEQUENTIAL][rep] / 1e3,
               s->tot[MULTI_DIRECT][rep] / 1e3);
        fflush(stdout);
        return 0;
}

static void bench_gpu_multi_report(const bench_gpu_cfg *cfg, bench_gpu_multi_samples *s, int n)
{
        static const char *const names[MULTI_MODES] = { "daemon, all at once (N clients)", "daemon, one after another",
                                                        "driver direct, N threads at once" };
        static const char *const keys[MULTI_MODES] = { "daemon-parallel", "daemon-sequential", "direct-parallel" };
        long R = cfg->repeats;
        double med[MULTI_MODES];

        printf("  %-36s %10s %18s %18s\n", "mode", "total s", "suspend s/proc", "resume s/proc");
        for (int m = 0; m < MULTI_MODES; m++) {
                med[m] = bench_median(s->tot[m], (size_t)R);
                double ms_ = bench_median(s->sus[m], (size_t)(R * n));
                double mr = bench_median(s->res[m], (size_t)(R * n));
                printf("  %-36s %10.2f %18.2f %18.2f\n", names[m], med[m] / 1e3, ms_ / 1e3, mr / 1e3);
                printf("RESULT bench=multi mode=%s procs=%d mib=%ld repeats=%ld total_s=%.3f "
                       "suspend_s=%.3f resume_s=%.3f\n",
                       keys[m], n, cfg->proc_mib, R, med[m] / 1e3, ms_ / 1e3, mr / 1e3);
        }
        printf("  direct driver: checkpoint %.2f s, restore %.2f s per process (median)\n",
               bench_median(s->ck, (size_t)(R * n)) / 1e3, bench_median(s->rs, (size_t)(R * n)) / 1e3);
        double speedup = med[0] > 0 ? med[1] / med[0] : 0;
        double vs_direct = med[2] > 0 ? (med[0] / med[2] - 1) * 100 : 0;
        printf("  at once vs one after another: x%.2f faster; daemon at once vs direct: %+.1f%%\n", speedup,
               vs_direct);
        printf("  data check: all %d targets verified their buffers intact\n", n);
        printf("RESULT bench=multi speedup_parallel=%.3f daemon_vs_direct_pct=%.2f data_ok=1\n", speedup,
               vs_direct);
}

int bench_gpu_multi(const bench_gpu_cfg *cfg)
{
        bench_daemon d;
        bench_gpu_driver drv;
        bench_gpu_target t[BENCH_GPU_MAX_PROCS];
        bench_gpu_multi_samples s = { 0 };
        int n = (int)cfg->procs, r;

        printf("\n== 3. Suspend+resume of %d x %ld MiB processes (%ld repeats, medians) ==\n", n, cfg->proc_mib,
               cfg->repeats);
        if ((r = bench_gpu_driver_load(cfg, &drv)) < 0)
                return r;
        if ((r = bench_gpu_daemon_start(cfg, &d)) < 0)
                return r;
        if ((r = bench_gpu_targets_start(cfg, "multi", n, cfg->proc_mib, t)) < 0)
                goto out_daemon;
        r = bench_gpu_multi_alloc(&s, cfg->repeats, n);
        for (long rep = 0; rep < cfg->repeats && r == 0; rep++)
                r = bench_gpu_multi_repeat(&d, &drv, t, n, &s, rep);
        for (int i = 0; i < n; i++)
                if (bench_gpu_target_check(&t[i]) < 0)
                        r = -EIO;
        if (r == 0)
                bench_gpu_multi_report(cfg, &s, n);
        bench_gpu_multi_free(&s);
        bench_gpu_targets_stop(t, n);
out_daemon:
        bench_gpu_daemon_stop(&d);
        return r;
}
