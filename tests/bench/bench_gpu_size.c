/* bench_gpu_size.c: the size benchmark (see bench_gpu.c). */
#include "bench_gpu.h"

/* ------------------------------------------------------------------------
 * 5. Suspend/resume against GPU memory size
 * ------------------------------------------------------------------------ */
/* One timed Suspend and Resume of pid: the client's times in ret_sus and
 * ret_res, the daemon's in ret_dsus and ret_dres.  0, or -1 after
 * bench_gpu_fail(). */
static int bench_gpu_size_cycle(cudackpt_client *c, int pid, double *ret_sus, double *ret_res, double *ret_dsus,
                                double *ret_dres)
{
        cudackpt_reply reply;
        char err[512];
        cudackpt_reply_init(&reply);
        uint64_t t0 = bench_now_ns();
        int cr = cudackpt_suspend(c, pid, -1, &reply);
        uint64_t t1 = bench_now_ns();
        int r = bench_gpu_reply_ok("Suspend", pid, cr, &reply, CUDACKPT_STATE_CHECKPOINTED, err, sizeof(err));
        *ret_dsus = reply.duration_ms;
        cudackpt_reply_clear(&reply);
        if (r < 0) {
                bench_gpu_fail("%s", err);
                return -1;
        }
        cr = cudackpt_resume(c, pid, NULL, &reply);
        uint64_t t2 = bench_now_ns();
        r = bench_gpu_reply_ok("Resume", pid, cr, &reply, CUDACKPT_STATE_RUNNING, err, sizeof(err));
        *ret_dres = reply.duration_ms;
        cudackpt_reply_clear(&reply);
        *ret_sus = bench_gpu_ms(t1 - t0);
        *ret_res = bench_gpu_ms(t2 - t1);
        if (r < 0) {
                bench_gpu_fail("%s", err);
                return -1;
        }
        return 0;
}

int bench_gpu_size(const bench_gpu_cfg *cfg)
{
        bench_daemon d;
        cudackpt_client *c = NULL;
        int r, rc = 0;

        printf("\n== 5. Suspend/resume through the daemon against GPU memory size (%ld repeats, medians;"
               " GB = 1e9 bytes) ==\n",
               cfg->repeats);
        if ((r = bench_gpu_daemon_start(cfg, &d)) < 0)
                return r;
        if ((r = bench_gpu_connect(&d, &c)) < 0)
                goto out_daemon;
        printf("  %10s %12s %10s %12s %10s %14s %14s\n", "size MiB", "suspend s", "GB/s", "resume s", "GB/s",
               "daemon ckpt", "daemon rest.");
        for (int k = 0; k < cfg->nsizes; k++) {
                bench_gpu_target t;
                long mib = cfg->sizes[k];
                char tag[32];
                snprintf(tag, sizeof(tag), "size%ld-", mib);
                if (bench_gpu_targets_start(cfg, tag, 1, mib, &t) < 0) {
                        printf("  %10ld  target did not start (not enough GPU memory?)\n", mib);
                        rc = -EIO;
                        continue;
                }
                double *sus = calloc((size_t)cfg->repeats, sizeof(double));
                double *res = calloc((size_t)cfg->repeats, sizeof(double));
                double *dsus = calloc((size_t)cfg->repeats, sizeof(double));
                double *dres = calloc((size_t)cfg->repeats, sizeof(double));
                int ok = sus && res && dsus && dres;
                for (long i = 0; ok && i < cfg->repeats; i++)
                        ok = bench_gpu_size_cycle(c, t.pid, &sus[i], &res[i], &dsus[i], &dres[i]) == 0;
                if (ok && bench_gpu_target_check(&t) < 0)
                        ok = 0;
                if (ok) {
                        double bytes = (double)mib * 1048576.0;
                        double ms = bench_median(sus, (size_t)cfg->repeats);
                        double mr = bench_median(res, (size_t)cfg->repeats);
                        double mds = bench_median(dsus, (size_t)cfg->repeats);
                        double mdr = bench_median(dres, (size_t)cfg->repeats);
                        printf("  %10ld %12.3f %10.2f %12.3f %10.2f %12.1fms %12.1fms\n", mib, ms / 1e3,
                               bytes / 1e9 / (ms / 1e3), mr / 1e3, bytes / 1e9 / (mr / 1e3), mds, mdr);
                        printf("RESULT bench=size mib=%ld bytes=%.0f repeats=%ld suspend_s=%.3f suspend_gbps=%.3f "
                               "resume_s=%.3f resume_gbps=%.3f daemon_suspend_ms=%.1f daemon_resume_ms=%.1f\n",
                               mib, bytes, cfg->repeats, ms / 1e3, bytes / 1e9 / (ms / 1e3), mr / 1e3,
                               bytes / 1e9 / (mr / 1e3), mds, mdr);
                } else {
                        rc = -EIO;
                }
                fflush(stdout);
                free(sus);
                free(res);
                free(dsus);
                free(dres);
                bench_gpu_targets_stop(&t, 1);
        }
        r = rc;
        cudackpt_client_free(c);
out_daemon:
        bench_gpu_daemon_stop(&d);
        return r;
}
