/* bench_gpu_workers.c: suspend+resume cycles of N processes from N threads, through the daemon
 * or by direct driver calls: what multi, contention and group share. */
#include "bench_gpu.h"

/* ------------------------------------------------------------------------
 * 3./4. N processes at once
 * ------------------------------------------------------------------------ */
int bench_gpu_direct_cycle(bench_gpu_worker *w)
{
        const bench_gpu_driver *drv = w->drv;
        CUresult cr;
        uint64_t t0 = bench_now_ns();
        CUcheckpointLockArgs la;
        memset(&la, 0, sizeof(la));
        if ((cr = drv->lock(w->pid, &la)) != CUDA_SUCCESS)
                goto fail_lock;
        uint64_t t1 = bench_now_ns();
        if ((cr = drv->checkpoint(w->pid, NULL)) != CUDA_SUCCESS)
                goto fail_ckpt;
        uint64_t t2 = bench_now_ns();
        if ((cr = drv->restore(w->pid, NULL)) != CUDA_SUCCESS)
                goto fail_restore;
        uint64_t t3 = bench_now_ns();
        if ((cr = drv->unlock(w->pid, NULL)) != CUDA_SUCCESS)
                goto fail_unlock;
        uint64_t t4 = bench_now_ns();
        w->suspend_ms = bench_gpu_ms(t2 - t0);
        w->resume_ms = bench_gpu_ms(t4 - t2);
        w->ckpt_ms = bench_gpu_ms(t2 - t1);
        w->restore_ms = bench_gpu_ms(t3 - t2);
        return 0;
fail_lock:
        snprintf(w->err, sizeof(w->err), "direct lock %d: %s", w->pid, bench_gpu_cu_name(drv, cr));
        return -EIO;
fail_ckpt:
        snprintf(w->err, sizeof(w->err), "direct checkpoint %d: %s", w->pid, bench_gpu_cu_name(drv, cr));
        return -EIO;
fail_restore:
        snprintf(w->err, sizeof(w->err), "direct restore %d: %s", w->pid, bench_gpu_cu_name(drv, cr));
        return -EIO;
fail_unlock:
        snprintf(w->err, sizeof(w->err), "direct unlock %d: %s", w->pid, bench_gpu_cu_name(drv, cr));
        return -EIO;
}

int bench_gpu_daemon_cycle(cudackpt_client *c, int pid, double *ret_suspend_ms, double *ret_resume_ms,
                           char *err, size_t errlen)
{
        cudackpt_reply reply;
        int r;
        cudackpt_reply_init(&reply);
        uint64_t t0 = bench_now_ns();
        r = cudackpt_suspend(c, pid, -1, &reply);
        uint64_t t1 = bench_now_ns();
        r = bench_gpu_reply_ok("Suspend", pid, r, &reply, CUDACKPT_STATE_CHECKPOINTED, err, errlen);
        cudackpt_reply_clear(&reply);
        if (r < 0)
                return r;
        r = cudackpt_resume(c, pid, NULL, &reply);
        uint64_t t2 = bench_now_ns();
        r = bench_gpu_reply_ok("Resume", pid, r, &reply, CUDACKPT_STATE_RUNNING, err, errlen);
        cudackpt_reply_clear(&reply);
        if (r < 0)
                return r;
        *ret_suspend_ms = bench_gpu_ms(t1 - t0);
        *ret_resume_ms = bench_gpu_ms(t2 - t1);
        return 0;
}

void *bench_gpu_worker_main(void *arg)
{
        bench_gpu_worker *w = arg;
        pthread_barrier_wait(w->start);
        for (long i = 0; i < w->cycles && !w->failed; i++) {
                int r;
                if (w->mode == BENCH_GPU_DIRECT)
                        r = bench_gpu_direct_cycle(w);
                else
                        r = bench_gpu_daemon_cycle(w->client, w->pid, &w->suspend_ms, &w->resume_ms, w->err,
                                                   sizeof(w->err));
                if (r < 0)
                        w->failed = 1;
        }
        if (w->done)
                atomic_fetch_add(w->done, 1);
        return NULL;
}

/* Threads wait at a barrier that counts them: one that cannot be created
 * would leave the others waiting for ever, so that is fatal. */
void bench_gpu_start_workers(bench_gpu_worker *w, int n)
{
        for (int i = 0; i < n; i++) {
                int e = pthread_create(&w[i].thread, NULL, bench_gpu_worker_main, &w[i]);
                if (e != 0) {
                        fprintf(stderr, "cudackpt-bench-gpu: pthread_create: %s\n", strerror(e));
                        abort();
                }
        }
}

/* Runs one cycle per target in n threads; returns the wall time in ms
 * (barrier release to the last thread's end), or a negative errno. */
double bench_gpu_parallel(enum bench_gpu_mode mode, const bench_daemon *d, const bench_gpu_driver *drv,
                          bench_gpu_target *t, int n, bench_gpu_worker *w,
                          pthread_barrier_t *start)
{
        int r = 0;
        memset(w, 0, sizeof(*w) * (size_t)n);
        for (int i = 0; i < n; i++) {
                w[i].mode = mode;
                w[i].drv = drv;
                w[i].pid = t[i].pid;
                w[i].cycles = 1;
                w[i].start = start;
                if (mode == BENCH_GPU_DAEMON && bench_gpu_connect(d, &w[i].client) < 0) {
                        for (int j = 0; j < i; j++)
                                cudackpt_client_free(w[j].client);
                        return -EIO;
                }
        }
        if (pthread_barrier_init(start, NULL, (unsigned)(n + 1)) != 0)
                return -ENOMEM;
        bench_gpu_start_workers(w, n);
        pthread_barrier_wait(start);
        uint64_t t0 = bench_now_ns();
        for (int i = 0; i < n; i++)
                pthread_join(w[i].thread, NULL);
        uint64_t t1 = bench_now_ns();
        pthread_barrier_destroy(start);
        for (int i = 0; i < n; i++) {
                cudackpt_client_free(w[i].client);
                w[i].client = NULL;
                if (w[i].failed) {
                        bench_gpu_fail("%s", w[i].err);
                        r = -EIO;
                }
        }
        return r < 0 ? r : bench_gpu_ms(t1 - t0);
}

int bench_gpu_all_running(const bench_gpu_driver *drv, const bench_gpu_target *t, int n)
{
        int r = 0;
        for (int i = 0; i < n; i++) {
                CUprocessState st = CU_PROCESS_STATE_FAILED;
                CUresult cr = drv->get_state(t[i].pid, &st);
                if (cr != CUDA_SUCCESS || st != CU_PROCESS_STATE_RUNNING) {
                        bench_gpu_fail("target %d not running after the cycle: %s state %d", (int)t[i].pid,
                                       bench_gpu_cu_name(drv, cr), (int)st);
                        r = -EIO;
                }
        }
        return r;
}
