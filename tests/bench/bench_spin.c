/* bench_spin.c: GetState via the daemon vs GetInfo vs the simulator's direct
 * call, lane spinning off and on, clients sleeping and spinning for their
 * replies (see bench_spin.h). */
#include "bench_spin.h"

#include <cudackpt/client.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "cuda-api.h"

#define BENCH_SPIN_WARMUP 200
/* The spin of the spinning client (cudackpt_client_set_spin()). */
#define BENCH_SPIN_CLIENT_US 1000

/* The kinds of call timed for each setting, in the order printed. */
enum bench_spin_kind {
        BENCH_SPIN_DIRECT,            /* the simulator's call in this process */
        BENCH_SPIN_GETSTATE,          /* GetState, a client that sleeps for its reply */
        BENCH_SPIN_GETINFO,           /* GetInfo, the same client */
        BENCH_SPIN_GETSTATE_CLIENTSPIN, /* GetState, a client that spins for its reply */
        BENCH_SPIN_GETINFO_CLIENTSPIN,  /* GetInfo, that client */
        BENCH_SPIN_KINDS,
};

static const struct {
        const char *label, *path, *method;
} bench_spin_kinds[BENCH_SPIN_KINDS] = {
        [BENCH_SPIN_DIRECT] = { "direct call (sim)", "direct", NULL },
        [BENCH_SPIN_GETSTATE] = { "GetState via daemon", "daemon", "io.cudackpt.Process.GetState" },
        [BENCH_SPIN_GETINFO] = { "GetInfo via daemon", "getinfo", "org.varlink.service.GetInfo" },
        [BENCH_SPIN_GETSTATE_CLIENTSPIN] = { "GetState, client spins", "daemon-clientspin",
                                             "io.cudackpt.Process.GetState" },
        [BENCH_SPIN_GETINFO_CLIENTSPIN] = { "GetInfo, client spins", "getinfo-clientspin",
                                            "org.varlink.service.GetInfo" },
};

/* utime + stime of pid in microseconds, or -1. */
static double bench_spin_cpu_us(pid_t pid)
{
        char path[64], buf[1024];
        unsigned long ut, st;
        FILE *f;
        char *p;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        f = fopen(path, "re");
        if (!f)
                return -1;
        p = fgets(buf, sizeof(buf), f);
        fclose(f);
        if (!p || !(p = strrchr(buf, ')')))
                return -1;
        /* After the comm: state is field 3, utime 14 and stime 15. */
        if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
                return -1;
        return (double)(ut + st) * 1e6 / (double)sysconf(_SC_CLK_TCK);
}

typedef struct bench_spin_lat {
        double *v;
        long errors;
        bench_stats st;
} bench_spin_lat;

static void bench_spin_direct(cuda_cuCheckpointProcessGetState_fn *get_state, int pid, long calls,
                              bench_spin_lat *ret)
{
        for (long i = -BENCH_SPIN_WARMUP; i < calls; i++) {
                CUprocessState s = CU_PROCESS_STATE_FAILED;
                uint64_t t0 = bench_now_ns();
                CUresult r = get_state(pid, &s);
                uint64_t dt = bench_now_ns() - t0;
                if (r != CUDA_SUCCESS || s != CU_PROCESS_STATE_RUNNING)
                        ret->errors++;
                if (i >= 0)
                        ret->v[i] = (double)dt / 1e3;
        }
}

/* Back-to-back calls of method (GetState of pid when params is set). */
static void bench_spin_calls(cudackpt_client *c, const char *method, const char *params, long calls,
                             bench_spin_lat *ret)
{
        for (long i = -BENCH_SPIN_WARMUP; i < calls; i++) {
                cudackpt_reply reply;
                cudackpt_reply_init(&reply);
                uint64_t t0 = bench_now_ns();
                int r = cudackpt_call(c, method, params, &reply);
                uint64_t dt = bench_now_ns() - t0;
                if (r < 0 || reply.error)
                        ret->errors++;
                cudackpt_reply_clear(&reply);
                if (i >= 0)
                        ret->v[i] = (double)dt / 1e3;
        }
}

static void bench_spin_print(long spin_us, const char *label, const char *path, bench_spin_lat *l, long calls,
                             double cpu_per_call)
{
        bench_stats_compute(l->v, (size_t)calls, &l->st);
        printf("  %8ld %-22s %9.1f %9.1f %9.1f %9.1f", spin_us, label, l->st.p50, l->st.p90, l->st.p99, l->st.mean);
        if (cpu_per_call >= 0)
                printf(" %12.1f", cpu_per_call);
        printf("\n");
        printf("RESULT bench=spin spin_us=%ld path=%s n=%zu p50_us=%.2f p90_us=%.2f p99_us=%.2f mean_us=%.2f",
               spin_us, path, l->st.n, l->st.p50, l->st.p90, l->st.p99, l->st.mean);
        if (cpu_per_call >= 0)
                printf(" daemon_cpu_us_per_call=%.2f", cpu_per_call);
        printf(" errors=%ld\n", l->errors);
}

/* The calls through the daemon (process daemon_pid) of every kind but the
 * direct one, on c (sleeping) or cs (spinning): lat[kind], and the
 * daemon's CPU time per call in cpu[kind]. */
static void bench_spin_daemon_calls(const bench_spin_cfg *cfg, pid_t daemon_pid, cudackpt_client *c,
                                    cudackpt_client *cs, bench_spin_lat *lat, double *cpu)
{
        long n = cfg->calls + BENCH_SPIN_WARMUP;
        char params[64];

        snprintf(params, sizeof(params), "{\"pid\":%d}", cfg->pid);
        for (int k = BENCH_SPIN_GETSTATE; k < BENCH_SPIN_KINDS; k++) {
                int spins = k == BENCH_SPIN_GETSTATE_CLIENTSPIN || k == BENCH_SPIN_GETINFO_CLIENTSPIN;
                int with_pid = k == BENCH_SPIN_GETSTATE || k == BENCH_SPIN_GETSTATE_CLIENTSPIN;
                double cpu0 = bench_spin_cpu_us(daemon_pid);

                bench_spin_calls(spins ? cs : c, bench_spin_kinds[k].method, with_pid ? params : NULL, cfg->calls,
                                 &lat[k]);
                cpu[k] = (bench_spin_cpu_us(daemon_pid) - cpu0) / (double)n;
        }
}

/* Connects *c, which sleeps for its replies, and *cs, which spins. */
static int bench_spin_connect(const bench_daemon *d, cudackpt_client **c, cudackpt_client **cs)
{
        int r;

        if ((r = cudackpt_client_connect(d->socket_path, c)) < 0 ||
            (r = cudackpt_client_connect(d->socket_path, cs)) < 0) {
                printf("ERROR: cannot connect to %s\n", d->socket_path);
                return r;
        }
        /* $CUDACKPT_SPIN_US would make the sleeping one spin too. */
        r = cudackpt_client_set_spin(*c, 0);
        return r < 0 ? r : cudackpt_client_set_spin(*cs, BENCH_SPIN_CLIENT_US);
}

/* Writes {"lane_spin_us": spin_us} to workdir/config.json (its path in
 * path). */
static int bench_spin_config(const char *workdir, long spin_us, char *path, size_t size)
{
        FILE *f;

        snprintf(path, size, "%s/config.json", workdir);
        f = fopen(path, "we");
        if (!f)
                return -errno;
        fprintf(f, "{\"lane_spin_us\": %ld}\n", spin_us);
        fclose(f);
        return 0;
}

/* One daemon with lane_spin_us = spin_us: every kind of call, then the
 * idle daemon's CPU time. */
static int bench_spin_setting(const bench_spin_cfg *cfg, cuda_cuCheckpointProcessGetState_fn *get_state,
                              long spin_us, bench_spin_lat *lat)
{
        char *workdir = NULL, config_path[512];
        cudackpt_client *c = NULL, *cs = NULL;
        double cpu[BENCH_SPIN_KINDS] = { -1 };
        bench_daemon d;
        int r;

        if ((r = bench_make_workdir("cudackpt-bench-spin", &workdir)) < 0)
                return r;
        if ((r = bench_spin_config(workdir, spin_us, config_path, sizeof(config_path))) < 0)
                goto out;
        bench_daemon_opts o = {
                .daemon_path = cfg->daemon_path,
                .driver_path = cfg->sim_path,
                .config_path = config_path,
                .log_level = cfg->log_level,
                .workdir = workdir,
                .ready_timeout_ms = 30000,
        };
        if ((r = bench_daemon_start(&o, &d)) < 0) {
                printf("ERROR: cudackptd (lane_spin_us %ld) did not become ready: %s\n", spin_us, strerror(-r));
                goto out;
        }
        if ((r = bench_spin_connect(&d, &c, &cs)) < 0)
                goto out_daemon;
        bench_spin_direct(get_state, cfg->pid, cfg->calls, &lat[BENCH_SPIN_DIRECT]);
        bench_spin_daemon_calls(cfg, d.pid, c, cs, lat, cpu);
        double cpu_idle0 = bench_spin_cpu_us(d.pid);
        usleep((useconds_t)cfg->idle_ms * 1000);
        double idle_ms = (bench_spin_cpu_us(d.pid) - cpu_idle0) / 1e3;

        for (int k = 0; k < BENCH_SPIN_KINDS; k++) {
                bench_spin_print(spin_us, bench_spin_kinds[k].label, bench_spin_kinds[k].path, &lat[k], cfg->calls,
                                 cpu[k]);
                if (lat[k].errors)
                        r = -EIO;
        }
        double direct = lat[BENCH_SPIN_DIRECT].st.p50, daemon = lat[BENCH_SPIN_GETSTATE].st.p50;
        double clientspin = lat[BENCH_SPIN_GETSTATE_CLIENTSPIN].st.p50;
        printf("  %8ld daemon/direct at p50 x%.2f, client spinning x%.2f; idle daemon used %.1f ms of CPU in %ld ms\n",
               spin_us, direct > 0 ? daemon / direct : 0, direct > 0 ? clientspin / direct : 0, idle_ms, cfg->idle_ms);
        printf("RESULT bench=spin spin_us=%ld daemon_vs_direct_p50=%.3f clientspin_vs_direct_p50=%.3f"
               " idle_cpu_ms=%.1f idle_ms=%ld\n",
               spin_us, direct > 0 ? daemon / direct : 0, direct > 0 ? clientspin / direct : 0, idle_ms, cfg->idle_ms);
out_daemon:
        cudackpt_client_free(cs);
        cudackpt_client_free(c);
        if (bench_daemon_stop(&d, 10000) != 0 && r == 0)
                r = -EIO;
out:
        bench_remove_workdir(workdir);
        free(workdir);
        return r;
}

int bench_spin_run(const bench_spin_cfg *cfg)
{
        cuda_cuCheckpointProcessGetState_fn *get_state;
        cuda_cuInit_fn *init;
        bench_spin_lat lat[BENCH_SPIN_KINDS] = {{0}};
        void *h;
        int r = 0;

        printf("== 7. GetState via the daemon vs GetInfo vs the direct call, lane spinning off and on, clients"
               " sleeping and spinning %d us (%ld calls each, back to back) ==\n", BENCH_SPIN_CLIENT_US, cfg->calls);
        h = dlopen(cfg->sim_path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
                printf("ERROR: dlopen %s: %s\n", cfg->sim_path, dlerror());
                return -ENOENT;
        }
        /* POSIX dlsym returns void *; the casts to function pointers are what dlsym is for. */
        *(void **)(&get_state) = dlsym(h, "cuCheckpointProcessGetState");
        *(void **)(&init) = dlsym(h, "cuInit");
        if (!get_state || !init || init(0) != CUDA_SUCCESS) {
                printf("ERROR: %s: no usable cuCheckpointProcessGetState\n", cfg->sim_path);
                dlclose(h);
                return -ENOENT;
        }
        for (int k = 0; k < BENCH_SPIN_KINDS; k++)
                if (!(lat[k].v = calloc((size_t)cfg->calls, sizeof(double))))
                        r = -ENOMEM;
        if (r < 0)
                goto out;
        printf("  %8s %-22s %9s %9s %9s %9s %12s\n", "spin us", "", "p50 us", "p90 us", "p99 us", "mean us",
               "daemon CPU us/call");
        for (int i = 0; i < cfg->n_spin; i++) {
                for (int k = 0; k < BENCH_SPIN_KINDS; k++)
                        lat[k].errors = 0;
                int q = bench_spin_setting(cfg, get_state, cfg->spin_us[i], lat);
                if (q < 0)
                        r = q;
        }
out:
        for (int k = 0; k < BENCH_SPIN_KINDS; k++)
                free(lat[k].v);
        dlclose(h);
        return r;
}
