/* bench_gpu_common.c: the pieces every benchmark of cudackpt-bench-gpu shares: failures, the
 * driver loaded by dlopen, the daemon and the targets started and stopped,
 * a client, the report lines. */
#include "bench_gpu.h"

int bench_gpu_failures;

void bench_gpu_fail(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fputs("ERROR: ", stdout);
        vprintf(fmt, ap);
        fputc('\n', stdout);
        va_end(ap);
        fflush(stdout);
        bench_gpu_failures++;
}

const char *bench_gpu_cu_name(const bench_gpu_driver *drv, CUresult r)
{
        const char *name = NULL;
        if (drv->error_name && drv->error_name(r, &name) == CUDA_SUCCESS && name)
                return name;
        return "CUDA_ERROR_?";
}

int bench_gpu_driver_load(const bench_gpu_cfg *cfg, bench_gpu_driver *ret_drv)
{
        bench_gpu_driver d;
        memset(&d, 0, sizeof(d));
        d.handle = dlopen(cfg->driver_path, RTLD_NOW | RTLD_LOCAL);
        if (!d.handle) {
                bench_gpu_fail("dlopen %s: %s", cfg->driver_path, dlerror());
                return -ENOENT;
        }
        /* POSIX dlsym returns void *; the casts to function pointers are what dlsym is for. */
#define BENCH_GPU_SYM(field, name)                                                   \
        do {                                                                         \
                *(void **)(&d.field) = dlsym(d.handle, name);                        \
                if (!d.field) {                                                      \
                        bench_gpu_fail("%s: no symbol %s", cfg->driver_path, name);  \
                        dlclose(d.handle);                                           \
                        return -ENOENT;                                              \
                }                                                                    \
        } while (0)
        BENCH_GPU_SYM(init, "cuInit");
        BENCH_GPU_SYM(error_name, "cuGetErrorName");
        BENCH_GPU_SYM(get_state, "cuCheckpointProcessGetState");
        BENCH_GPU_SYM(lock, "cuCheckpointProcessLock");
        BENCH_GPU_SYM(checkpoint, "cuCheckpointProcessCheckpoint");
        BENCH_GPU_SYM(restore, "cuCheckpointProcessRestore");
        BENCH_GPU_SYM(unlock, "cuCheckpointProcessUnlock");
#undef BENCH_GPU_SYM
        /* Restore needs a caller that called cuInit (or persistence mode). */
        CUresult r = d.init(0);
        if (r != CUDA_SUCCESS) {
                bench_gpu_fail("cuInit: %s", bench_gpu_cu_name(&d, r));
                dlclose(d.handle);
                return -EIO;
        }
        *ret_drv = d;
        return 0;
}

int bench_gpu_daemon_start_with(const bench_gpu_cfg *cfg, const char *config_path, bench_daemon *ret_daemon)
{
        bench_daemon_opts o = {
                .daemon_path = cfg->daemon_path,
                .driver_path = cfg->driver_path,
                .config_path = config_path,
                .log_level = cfg->log_level,
                .workdir = cfg->workdir,
                .ready_timeout_ms = 60000,
        };
        int r = bench_daemon_start(&o, ret_daemon);
        if (r < 0)
                bench_gpu_fail("cudackptd did not become ready (%s); log in %s/cudackptd.log", strerror(-r),
                               cfg->workdir);
        return r;
}

int bench_gpu_daemon_start(const bench_gpu_cfg *cfg, bench_daemon *ret_daemon)
{
        return bench_gpu_daemon_start_with(cfg, NULL, ret_daemon);
}

/* Waits (5 s at most) for the daemon's process index, which it opens after
 * READY=1, through GetMetrics; says which: 1 with an index, 0 without. */
int bench_gpu_await_index(const bench_daemon *d)
{
        cudackpt_client *c = NULL;
        int have = 0;
        if (cudackpt_client_connect(d->socket_path, &c) < 0)
                return 0;
        for (int i = 0; i < 500 && !have; i++) {
                cudackpt_reply r;
                cudackpt_reply_init(&r);
                if (cudackpt_call(c, "io.cudackpt.Process.GetMetrics", NULL, &r) == 0 && !r.error &&
                    strstr(r.parameters_json, "cudackpt_process_index 1"))
                        have = 1;
                cudackpt_reply_clear(&r);
                if (!have)
                        usleep(10000);
        }
        cudackpt_client_free(c);
        printf("  daemon: %s\n", have ? "process index ready" : "no process index within 5 s: /proc scans");
        return have;
}

void bench_gpu_daemon_stop(bench_daemon *d)
{
        if (d->pid <= 0)
                return; /* it never started */
        int status = bench_daemon_stop(d, 30000);
        if (status != 0)
                bench_gpu_fail("cudackptd exit status %d after SIGTERM (want 0)", status);
}

/* Starts n targets of mib MiB each and waits for every one's ready line. */
int bench_gpu_targets_start(const bench_gpu_cfg *cfg, const char *tag, int n, long mib,
                            bench_gpu_target *t)
{
        int fds[BENCH_GPU_MAX_PROCS];
        int r = 0, started = 0;
        for (int i = 0; i < n; i++) {
                int p[2];
                char mib_arg[64], interval_arg[64], status_arg[400];
                memset(&t[i], 0, sizeof(t[i]));
                t[i].mib = mib;
                snprintf(t[i].status_path, sizeof(t[i].status_path), "%s/%s%d.status", cfg->workdir, tag, i);
                snprintf(t[i].log_path, sizeof(t[i].log_path), "%s/%s%d.log", cfg->workdir, tag, i);
                snprintf(mib_arg, sizeof(mib_arg), "--mib=%ld", mib);
                snprintf(interval_arg, sizeof(interval_arg), "--interval-ms=%ld", cfg->interval_ms);
                snprintf(status_arg, sizeof(status_arg), "--status=%s", t[i].status_path);
                char *argv[] = {(char *)cfg->target_path, mib_arg, interval_arg, status_arg,
                                "--ready-fd=3", "--quiet", NULL};
                /* On the simulator: a CUDA process of mib MiB that maps "the driver". */
                char sim_mem[64], sim_preload[PATH_MAX + 16];
                snprintf(sim_mem, sizeof(sim_mem), "CUDACKPT_SIM_MEM_MIB=%ld", mib);
                snprintf(sim_preload, sizeof(sim_preload), "LD_PRELOAD=%s", cfg->sim_path ? cfg->sim_path : "");
                const char *const sim_env[] = {"CUDACKPT_SIM=1", sim_mem, sim_preload, NULL};
                if (pipe2(p, O_CLOEXEC) < 0) {
                        r = -errno;
                        break;
                }
                r = bench_spawn(argv, cfg->sim_path ? sim_env : NULL, t[i].log_path, p[1], &t[i].pid);
                close(p[1]);
                if (r < 0) {
                        close(p[0]);
                        bench_gpu_fail("cannot start %s: %s", cfg->target_path, strerror(-r));
                        break;
                }
                fds[i] = p[0];
                started++;
        }
        /* Filling and verifying the buffer takes a moment per GiB. */
        int timeout_ms = 120000 + (int)(mib / 1024) * 3000;
        for (int i = 0; i < started; i++) {
                char line[256];
                int w = bench_wait_ready(fds[i], timeout_ms, line, sizeof(line));
                if (w < 0 && r == 0) {
                        bench_gpu_fail("target %d (%ld MiB) not ready: %s; log %s", (int)t[i].pid, mib,
                                       strerror(-w), t[i].log_path);
                        r = w;
                }
        }
        if (r < 0) {
                for (int i = 0; i < started; i++)
                        bench_kill(t[i].pid);
        }
        return r;
}

void bench_gpu_targets_stop(bench_gpu_target *t, int n)
{
        for (int i = 0; i < n; i++) {
                bench_kill(t[i].pid);
                t[i].pid = 0;
        }
}

/* The target's own verdict on its data: 0 when every verification so far
 * found the pattern intact. */
int bench_gpu_target_check(const bench_gpu_target *t)
{
        char line[512];
        FILE *f = fopen(t->status_path, "re");
        if (!f) {
                bench_gpu_fail("target %d: no status file %s", (int)t->pid, t->status_path);
                return -ENOENT;
        }
        if (!fgets(line, sizeof(line), f))
                line[0] = '\0';
        fclose(f);
        if (!strstr(line, " total_mismatches=0 ") || !strstr(line, " error=none")) {
                bench_gpu_fail("target %d: data check failed: %s", (int)t->pid, line);
                return -EIO;
        }
        return 0;
}

int bench_gpu_connect(const bench_daemon *d, cudackpt_client **ret_client)
{
        cudackpt_client *c = NULL;
        int r = cudackpt_client_connect(d->socket_path, &c);
        if (r < 0) {
                bench_gpu_fail("connect %s: %s", d->socket_path, strerror(-r));
                return r;
        }
        cudackpt_client_set_timeout(c, BENCH_GPU_CLIENT_TIMEOUT_MS);
        *ret_client = c;
        return 0;
}

/* 0 when the call reached the daemon and it answered with state want. */
int bench_gpu_reply_ok(const char *what, int pid, int r, const cudackpt_reply *reply, const char *want,
                       char *err, size_t errlen)
{
        if (r < 0)
                snprintf(err, errlen, "%s %d: transport error %s", what, pid, strerror(-r));
        else if (reply->error)
                snprintf(err, errlen, "%s %d: %s %s", what, pid, reply->error,
                         reply->parameters_json ? reply->parameters_json : "");
        else if (!reply->state || strcmp(reply->state, want) != 0)
                snprintf(err, errlen, "%s %d: state %s (want %s)", what, pid,
                         reply->state ? reply->state : "(none)", want);
        else
                return 0;
        return -EIO;
}

double bench_gpu_ms(uint64_t ns)
{
        return (double)ns / 1e6;
}

void bench_gpu_print_lat(const char *label, const char *key, bench_stats *st, long errors)
{
        printf("  %-34s %9zu %9.1f %9.1f %9.1f %9.1f %9.1f\n", label, st->n, st->p50, st->p90, st->p99, st->max,
               st->mean);
        printf("RESULT %s n=%zu p50_us=%.2f p90_us=%.2f p99_us=%.2f max_us=%.2f mean_us=%.2f errors=%ld\n", key,
               st->n, st->p50, st->p90, st->p99, st->max, st->mean, errors);
}

void bench_gpu_lat_header(void)
{
        printf("  %-34s %9s %9s %9s %9s %9s %9s\n", "", "n", "p50 us", "p90 us", "p99 us", "max us", "mean us");
}
