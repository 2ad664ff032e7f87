/* bench_gpu_contention.c: the contention benchmark (see bench_gpu.c). */
#include "bench_gpu.h"

/* ------------------------------------------------------------------------
 * 4. GetState while N long checkpoints run
 * ------------------------------------------------------------------------ */
typedef struct bench_gpu_prober {
        pthread_t thread;
        cudackpt_client *idle_c, *busy_c;
        int idle_pid, busy_pid;
        pthread_barrier_t *start;
        atomic_int *done;
        int nworkers;
        bench_samples idle, busy;
        long in_flight_seen, errors;
        char err[512];
} bench_gpu_prober;

static void *bench_gpu_prober_main(void *arg)
{
        bench_gpu_prober *p = arg;
        pthread_barrier_wait(p->start);
        while (atomic_load(p->done) < p->nworkers) {
                cudackpt_reply reply;
                uint64_t t0, t1;
                int r;
                cudackpt_reply_init(&reply);
                t0 = bench_now_ns();
                r = cudackpt_get_state(p->idle_c, p->idle_pid, &reply);
                t1 = bench_now_ns();
                if (bench_gpu_reply_ok("GetState(idle)", p->idle_pid, r, &reply, CUDACKPT_STATE_RUNNING, p->err,
                                       sizeof(p->err)) < 0)
                        p->errors++;
                cudackpt_reply_clear(&reply);
                if (bench_samples_add(&p->idle, (double)(t1 - t0) / 1e3) < 0)
                        break;

                t0 = bench_now_ns();
                r = cudackpt_get_state(p->busy_c, p->busy_pid, &reply);
                t1 = bench_now_ns();
                if (r < 0 || reply.error) {
                        snprintf(p->err, sizeof(p->err), "GetState(busy) %d: %s", p->busy_pid,
                                 r < 0 ? strerror(-r) : reply.error);
                        p->errors++;
                } else if (reply.in_flight) {
                        p->in_flight_seen++;
                }
                cudackpt_reply_clear(&reply);
                if (bench_samples_add(&p->busy, (double)(t1 - t0) / 1e3) < 0)
                        break;
        }
        return NULL;
}

/* GetState of the idle process without load: cfg->calls / 5 timed calls
 * (after 100 untimed) into base.  Returns the calls that failed. */
static long bench_gpu_contention_baseline(const bench_gpu_cfg *cfg, bench_gpu_prober *p, bench_samples *base)
{
        long errors = 0;
        for (long i = -100; i < cfg->calls / 5 + 1; i++) {
                cudackpt_reply reply;
                char err[512];
                cudackpt_reply_init(&reply);
                uint64_t t0 = bench_now_ns();
                int cr = cudackpt_get_state(p->idle_c, p->idle_pid, &reply);
                uint64_t dt = bench_now_ns() - t0;
                if (bench_gpu_reply_ok("GetState", p->idle_pid, cr, &reply, CUDACKPT_STATE_RUNNING, err,
                                       sizeof(err)) < 0 &&
                    errors++ == 0)
                        bench_gpu_fail("%s", err);
                cudackpt_reply_clear(&reply);
                if (i >= 0)
                        bench_samples_add(base, (double)dt / 1e3);
        }
        return errors;
}

/* The n workers of the load, each with a client of its own, set to run
 * cfg->cycles daemon cycles on its target once start lets them go. */
static int bench_gpu_contention_workers(const bench_gpu_cfg *cfg, const bench_daemon *d, const bench_gpu_target *t,
                                        int n, bench_gpu_worker *w, pthread_barrier_t *start, atomic_int *done)
{
        memset(w, 0, sizeof(*w) * (size_t)n);
        for (int i = 0; i < n; i++) {
                w[i].mode = BENCH_GPU_DAEMON;
                w[i].pid = t[i].pid;
                w[i].cycles = cfg->cycles;
                w[i].start = start;
                w[i].done = done;
                if (bench_gpu_connect(d, &w[i].client) < 0)
                        return -EIO;
        }
        return 0;
}

/* Runs the load: the n workers and the prober let go at once by start,
 * the clock from then until the last worker is done (*ret_load_ns).
 * -ENOMEM if the barrier cannot be made, -EIO if a call failed. */
static int bench_gpu_contention_load(bench_gpu_worker *w, int n, bench_gpu_prober *p, pthread_barrier_t *start,
                                     uint64_t *ret_load_ns)
{
        int r = 0;
        if (pthread_barrier_init(start, NULL, (unsigned)(n + 2)) != 0)
                return -ENOMEM;
        bench_gpu_start_workers(w, n);
        if (pthread_create(&p->thread, NULL, bench_gpu_prober_main, p) != 0)
                abort();
        pthread_barrier_wait(start);
        uint64_t t0 = bench_now_ns();
        for (int i = 0; i < n; i++)
                pthread_join(w[i].thread, NULL);
        *ret_load_ns = bench_now_ns() - t0;
        pthread_join(p->thread, NULL);
        pthread_barrier_destroy(start);
        for (int i = 0; i < n; i++)
                if (w[i].failed) {
                        bench_gpu_fail("%s", w[i].err);
                        r = -EIO;
                }
        if (p->errors) {
                bench_gpu_fail("%ld GetState errors under load, last: %s", p->errors, p->err);
                r = -EIO;
        }
        return r;
}

/* The latencies without load (base), of the idle and the busy process
 * under it (p), and how long the load took (load_ns). */
static void bench_gpu_contention_report(const bench_gpu_cfg *cfg, bench_samples *base, long base_err,
                                        bench_gpu_prober *p, uint64_t load_ns)
{
        int n = (int)cfg->procs;
        bench_stats sb, si, sbusy;
        bench_stats_compute(base->v, base->n, &sb);
        bench_stats_compute(p->idle.v, p->idle.n, &si);
        bench_stats_compute(p->busy.v, p->busy.n, &sbusy);
        printf("  load: %d processes x %ld cycle(s) took %.2f s\n", n, cfg->cycles, bench_gpu_ms(load_ns) / 1e3);
        bench_gpu_lat_header();
        bench_gpu_print_lat("idle process, no load", "bench=contention series=idle-noload", &sb, base_err);
        bench_gpu_print_lat("idle process, during checkpoints", "bench=contention series=idle-load", &si, 0);
        bench_gpu_print_lat("process being checkpointed", "bench=contention series=busy-load", &sbusy, 0);
        printf("  answers naming an operation in flight for the busy process: %ld of %zu\n", p->in_flight_seen,
               p->busy.n);
        printf("RESULT bench=contention procs=%d mib=%ld load_s=%.3f busy_in_flight=%ld busy_n=%zu\n", n,
               cfg->proc_mib, bench_gpu_ms(load_ns) / 1e3, p->in_flight_seen, p->busy.n);
}

int bench_gpu_contention(const bench_gpu_cfg *cfg)
{
        bench_daemon d;
        bench_gpu_driver drv;
        bench_gpu_target t[BENCH_GPU_MAX_PROCS + 1];
        bench_gpu_worker w[BENCH_GPU_MAX_PROCS];
        bench_gpu_prober p;
        pthread_barrier_t start;
        atomic_int done;
        bench_samples base = {0};
        long base_err = 0;
        int n = (int)cfg->procs, r;

        printf("\n== 4. GetState of an idle process while %d x %ld MiB suspend+resume cycles run ==\n", n,
               cfg->proc_mib);
        memset(&p, 0, sizeof(p));
        if ((r = bench_gpu_driver_load(cfg, &drv)) < 0)
                return r;
        if ((r = bench_gpu_daemon_start(cfg, &d)) < 0)
                return r;
        if ((r = bench_gpu_targets_start(cfg, "busy", n, cfg->proc_mib, t)) < 0)
                goto out_daemon;
        if ((r = bench_gpu_targets_start(cfg, "idle", 1, cfg->idle_mib, &t[n])) < 0)
                goto out_busy;
        if (bench_gpu_connect(&d, &p.idle_c) < 0 || bench_gpu_connect(&d, &p.busy_c) < 0) {
                r = -EIO;
                goto out_idle;
        }
        p.idle_pid = t[n].pid;
        p.busy_pid = t[0].pid;

        base_err = bench_gpu_contention_baseline(cfg, &p, &base);

        atomic_init(&done, 0);
        p.start = &start;
        p.done = &done;
        p.nworkers = n;
        /* The prober waits at the same barrier as the workers and the clock. */
        if (bench_gpu_contention_workers(cfg, &d, t, n, w, &start, &done) < 0) {
                r = -EIO;
                goto out_clients;
        }
        uint64_t load_ns = 0;
        r = bench_gpu_contention_load(w, n, &p, &start, &load_ns);
        if (r == -ENOMEM)
                goto out_clients;
        bench_gpu_contention_report(cfg, &base, base_err, &p, load_ns);
        for (int i = 0; i <= n; i++)
                if (bench_gpu_target_check(&t[i]) < 0)
                        r = -EIO;
out_clients:
        for (int i = 0; i < n; i++)
                cudackpt_client_free(w[i].client);
out_idle:
        bench_samples_free(&base);
        bench_samples_free(&p.idle);
        bench_samples_free(&p.busy);
        cudackpt_client_free(p.idle_c);
        cudackpt_client_free(p.busy_c);
        bench_gpu_targets_stop(&t[n], 1);
out_busy:
        bench_gpu_targets_stop(t, n);
out_daemon:
        bench_gpu_daemon_stop(&d);
        return r;
}
