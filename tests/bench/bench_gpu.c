/* bench_gpu.c: cudackptd measured on a real GPU.
 *
 * Subcommands (each starts its own daemon on the real driver and its own
 * cudackpt-gpu-target processes, and prints a readable report plus
 * "RESULT key=value ..." lines):
 *   getstate    GetState through the daemon, by a client that sleeps for
 *               its reply and one that spins (cudackpt_client_set_spin()),
 *               vs the same driver call made directly in this process
 *               (dlopen of libcuda.so.1), the three interleaved, with the
 *               ratios; then the daemon again with lane_spin_us 0
 *   exec        a whole `cudackptctl state PID` process vs
 *               `cuda-checkpoint --get-state --pid PID`
 *   multi       suspend+resume of N processes: through the daemon at once,
 *               one after another, and direct driver calls from N threads
 *   contention  GetState latency of an idle process while N checkpoints run
 *   size        suspend/resume time and GB/s against GPU memory size
 *   group       suspend+resume of N processes three ways, side by side:
 *               one SuspendGroup+ResumeGroup, N single Suspend/Resume on N
 *               connections at once, direct driver calls from N threads
 *   list        ListProcesses with --processes processes on the machine (idle
 *               `sleep`s added up to that count, plus N CUDA targets) against
 *               a scan of /proc calling cuCheckpointProcessGetState on every
 *               pid from a pool of --pool threads
 *   watchers    GetState latency with --watchers Watch streams open against
 *               none, idle and with a Lock/Unlock loop on a second target
 *               (bench_watch.h; two --idle-mib targets)
 *   all         getstate exec multi contention size (not group, list, watchers)
 * --sim=PATH runs on the simulator instead (libcudackpt-sim.so as the driver of
 * the daemon and of the direct calls; --target a stand-in such as
 * cudackpt-gpu-standin, started with CUDACKPT_SIM=1, CUDACKPT_SIM_MEM_MIB and
 * LD_PRELOAD of the simulator), to dry-run group and list without a GPU.
 * Timing never makes it fail; a failed operation or corrupted target data
 * does (exit 1).  libcuda is loaded with dlopen, never linked. */
#include <cjson/cJSON.h>
#include "cuda-api.h"
#include <cudackpt/client.h>

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uv.h>

#include "bench_common.h"
#include "bench_watch.h"
#include "host/discover.h"

#define BENCH_GPU_MAX_PROCS 64
#define BENCH_GPU_MAX_SIZES 32
#define BENCH_GPU_CLIENT_TIMEOUT_MS (30 * 60 * 1000)

typedef struct bench_gpu_cfg {
        const char *daemon_path;
        const char *ctl_path;
        const char *target_path;
        const char *driver_path;
        const char *cuda_checkpoint_path; /* NULL: search PATH */
        const char *log_level;
        long calls;
        long exec_runs;
        long repeats;
        long procs;
        long proc_mib;
        long idle_mib;
        long interval_ms;
        long cycles;
        long sizes[BENCH_GPU_MAX_SIZES];
        int nsizes;
        const char *sim_path; /* --sim: the simulator stands in for the driver */
        long processes;       /* list: processes on the machine to measure with */
        long list_runs;       /* list: timed calls of each kind */
        long pool;            /* list: threads of the baseline */
        long warmup;          /* group: untimed cycles first */
        long watchers;        /* watchers: Watch connections */
        long watch_rounds;    /* watchers: rounds of the four blocks */
        long watch_rate;      /* watchers: Lock/Unlock cycles per second, 0 back to back */
        char *workdir;
} bench_gpu_cfg;

/* The driver entry points, typed from include-private/cuda-api.h. */
typedef struct bench_gpu_driver {
        void *handle;
        cuda_cuInit_fn *init;
        cuda_cuGetErrorName_fn *error_name;
        cuda_cuCheckpointProcessGetState_fn *get_state;
        cuda_cuCheckpointProcessLock_fn *lock;
        cuda_cuCheckpointProcessCheckpoint_fn *checkpoint;
        cuda_cuCheckpointProcessRestore_fn *restore;
        cuda_cuCheckpointProcessUnlock_fn *unlock;
} bench_gpu_driver;

typedef struct bench_gpu_target {
        pid_t pid;
        long mib;
        char status_path[320];
        char log_path[320];
} bench_gpu_target;

static int bench_gpu_failures;

static void bench_gpu_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void bench_gpu_fail(const char *fmt, ...)
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

static const char *bench_gpu_cu_name(const bench_gpu_driver *drv, CUresult r)
{
        const char *name = NULL;
        if (drv->error_name && drv->error_name(r, &name) == CUDA_SUCCESS && name)
                return name;
        return "CUDA_ERROR_?";
}

static int bench_gpu_driver_load(const bench_gpu_cfg *cfg, bench_gpu_driver *ret_drv)
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

static int bench_gpu_daemon_start_with(const bench_gpu_cfg *cfg, const char *config_path, bench_daemon *ret_daemon)
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

static int bench_gpu_daemon_start(const bench_gpu_cfg *cfg, bench_daemon *ret_daemon)
{
        return bench_gpu_daemon_start_with(cfg, NULL, ret_daemon);
}

/* Waits (5 s at most) for the daemon's process index, which it opens after
 * READY=1, through GetMetrics; says which: 1 with an index, 0 without. */
static int bench_gpu_await_index(const bench_daemon *d)
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

static void bench_gpu_daemon_stop(bench_daemon *d)
{
        if (d->pid <= 0)
                return; /* it never started */
        int status = bench_daemon_stop(d, 30000);
        if (status != 0)
                bench_gpu_fail("cudackptd exit status %d after SIGTERM (want 0)", status);
}

/* Starts n targets of mib MiB each and waits for every one's ready line. */
static int bench_gpu_targets_start(const bench_gpu_cfg *cfg, const char *tag, int n, long mib,
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

static void bench_gpu_targets_stop(bench_gpu_target *t, int n)
{
        for (int i = 0; i < n; i++) {
                bench_kill(t[i].pid);
                t[i].pid = 0;
        }
}

/* The target's own verdict on its data: 0 when every verification so far
 * found the pattern intact. */
static int bench_gpu_target_check(const bench_gpu_target *t)
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

static int bench_gpu_connect(const bench_daemon *d, cudackpt_client **ret_client)
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
static int bench_gpu_reply_ok(const char *what, int pid, int r, const cudackpt_reply *reply, const char *want,
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

static double bench_gpu_ms(uint64_t ns)
{
        return (double)ns / 1e6;
}

static void bench_gpu_print_lat(const char *label, const char *key, bench_stats *st, long errors)
{
        printf("  %-34s %9zu %9.1f %9.1f %9.1f %9.1f %9.1f\n", label, st->n, st->p50, st->p90, st->p99, st->max,
               st->mean);
        printf("RESULT %s n=%zu p50_us=%.2f p90_us=%.2f p99_us=%.2f max_us=%.2f mean_us=%.2f errors=%ld\n", key,
               st->n, st->p50, st->p90, st->p99, st->max, st->mean, errors);
}

static void bench_gpu_lat_header(void)
{
        printf("  %-34s %9s %9s %9s %9s %9s %9s\n", "", "n", "p50 us", "p90 us", "p99 us", "max us", "mean us");
}

/* ------------------------------------------------------------------------
 * 1. GetState: daemon round trip vs direct driver call
 * ------------------------------------------------------------------------ */
/* The same driver call handed to a libuv worker thread and its completion
 * back to a loop, as the daemon does: the cost of the two thread hand-offs
 * on this machine, with no socket, parsing or pinning. */
struct bench_gpu_hop {
        uv_work_t work;
        const bench_gpu_driver *drv;
        int pid;
        CUprocessState state;
        CUresult result;
        uint64_t call_ns; /* the driver call alone, on the worker */
};

static void bench_gpu_hop_work(uv_work_t *w)
{
        struct bench_gpu_hop *h = w->data;
        uint64_t t0 = bench_now_ns();

        h->result = h->drv->get_state(h->pid, &h->state);
        h->call_ns = bench_now_ns() - t0;
}

static void bench_gpu_hop_done(uv_work_t *w, int status)
{
        (void)w;
        (void)status;
}

/* The same with a thread that spins instead of sleeping between calls: the
 * floor of any hand-off, and the driver call on a thread that never idles. */
struct bench_gpu_spin {
        const bench_gpu_driver *drv;
        int pid;
        atomic_long seq, done; /* requests posted, requests finished */
        atomic_int stop;
        CUprocessState state;
        CUresult result;
        uint64_t call_ns;
};

static void *bench_gpu_spin_main(void *arg)
{
        struct bench_gpu_spin *sp = arg;
        long seen = 0;

        while (!atomic_load(&sp->stop)) {
                if (atomic_load(&sp->seq) == seen)
                        continue;
                seen++;
                uint64_t t0 = bench_now_ns();
                sp->result = sp->drv->get_state(sp->pid, &sp->state);
                sp->call_ns = bench_now_ns() - t0;
                atomic_store(&sp->done, seen);
        }
        return NULL;
}

static long bench_gpu_spins(const bench_gpu_driver *drv, int pid, long calls, double *lat, double *call)
{
        struct bench_gpu_spin sp = { .drv = drv, .pid = pid };
        pthread_t th;
        long errors = 0;

        if (pthread_create(&th, NULL, bench_gpu_spin_main, &sp) != 0)
                return calls;
        for (long i = -100; i < calls; i++) {
                uint64_t t0 = bench_now_ns();
                long want = atomic_fetch_add(&sp.seq, 1) + 1;
                while (atomic_load(&sp.done) != want)
                        ;
                uint64_t dt = bench_now_ns() - t0;
                if (sp.result != CUDA_SUCCESS || sp.state != CU_PROCESS_STATE_RUNNING)
                        errors++;
                if (i >= 0) {
                        lat[i] = (double)dt / 1e3;
                        call[i] = (double)sp.call_ns / 1e3;
                }
        }
        atomic_store(&sp.stop, 1);
        pthread_join(th, NULL);
        return errors;
}

static long bench_gpu_hops(const bench_gpu_driver *drv, int pid, long calls, double *lat, double *call)
{
        struct bench_gpu_hop h = { .drv = drv, .pid = pid };
        uv_loop_t loop;
        long errors = 0;

        if (uv_loop_init(&loop) < 0)
                return calls;
        h.work.data = &h;
        for (long i = -100; i < calls; i++) {
                uint64_t t0 = bench_now_ns();
                h.state = CU_PROCESS_STATE_FAILED;
                uv_queue_work(&loop, &h.work, bench_gpu_hop_work, bench_gpu_hop_done);
                uv_run(&loop, UV_RUN_DEFAULT);
                uint64_t dt = bench_now_ns() - t0;
                if (h.result != CUDA_SUCCESS || h.state != CU_PROCESS_STATE_RUNNING)
                        errors++;
                if (i >= 0) {
                        lat[i] = (double)dt / 1e3;
                        call[i] = (double)h.call_ns / 1e3;
                }
        }
        uv_loop_close(&loop);
        return errors;
}

/* The paths the getstate bench times, in the order it prints them. */
enum bench_gpu_gs_path {
        BENCH_GPU_GS_DIRECT,      /* the driver call in this process */
        BENCH_GPU_GS_DAEMON,      /* GetState, a client that sleeps for its reply */
        BENCH_GPU_GS_CLIENTSPIN,  /* GetState, a client that spins for its reply */
        BENCH_GPU_GS_NOSPIN,      /* GetState, a daemon with lane_spin_us 0 */
        BENCH_GPU_GS_INFO,        /* GetInfo: a round trip with no worker */
        BENCH_GPU_GS_INFOSPIN,    /* GetInfo, a client that spins */
        BENCH_GPU_GS_HOP,         /* the driver call through a uv worker */
        BENCH_GPU_GS_HOPCALL,     /* the call alone, on that worker */
        BENCH_GPU_GS_SPIN,        /* the driver call through a spinning thread */
        BENCH_GPU_GS_SPINCALL,    /* the call alone, on that thread */
        BENCH_GPU_GS_N,
};

static const struct {
        const char *label, *key;
} bench_gpu_gs_paths[BENCH_GPU_GS_N] = {
        [BENCH_GPU_GS_DIRECT] = { "direct driver call (in-process)", "bench=getstate path=direct" },
        [BENCH_GPU_GS_DAEMON] = { "daemon (client library, 1 conn)", "bench=getstate path=daemon" },
        [BENCH_GPU_GS_CLIENTSPIN] = { "daemon, client spins for reply", "bench=getstate path=daemon-clientspin" },
        [BENCH_GPU_GS_NOSPIN] = { "daemon, lane_spin_us 0", "bench=getstate path=daemon-nospin" },
        [BENCH_GPU_GS_INFO] = { "parts: GetInfo via daemon (no wkr)", "bench=getstate path=getinfo" },
        [BENCH_GPU_GS_INFOSPIN] = { "parts: GetInfo, client spins", "bench=getstate path=getinfo-clientspin" },
        [BENCH_GPU_GS_HOP] = { "parts: direct call via uv worker", "bench=getstate path=uvhop" },
        [BENCH_GPU_GS_HOPCALL] = { "parts: the call alone, on the worker", "bench=getstate path=uvhop-call" },
        [BENCH_GPU_GS_SPIN] = { "floor: via a spinning thread", "bench=getstate path=spin" },
        [BENCH_GPU_GS_SPINCALL] = { "floor: the call alone, spinning thread", "bench=getstate path=spin-call" },
};

/* The latencies of every path (calls entries each, in us) and the failed
 * calls of each. */
typedef struct bench_gpu_gs {
        double *lat[BENCH_GPU_GS_N];
        long errors[BENCH_GPU_GS_N];
        bench_stats st[BENCH_GPU_GS_N];
} bench_gpu_gs;

/* Calls of each path made untimed before the timed ones. */
#define BENCH_GPU_GS_WARMUP 100
/* The three GetState paths compared are timed in this many interleaved
 * rounds, so that a drift of a shared machine hits them alike: each of the
 * six orders twice, so that each path follows each other one as often. */
#define BENCH_GPU_GS_ROUNDS 12
/* Untimed calls at the start of each stretch: the path's threads awake
 * whatever ran before. */
#define BENCH_GPU_GS_STRETCH_WARMUP 20
/* The spin of the spinning client: more than a GetState takes on a GPU. */
#define BENCH_GPU_CLIENT_SPIN_US 1000

/* Back-to-back direct driver GetStates of pid (warmup untimed calls
 * first) into lat; returns the failed ones. */
static long bench_gpu_direct_getstates(const bench_gpu_driver *drv, int pid, long warmup, long calls, double *lat)
{
        long errors = 0;

        for (long i = -warmup; i < calls; i++) {
                CUprocessState st = CU_PROCESS_STATE_FAILED;
                uint64_t t0 = bench_now_ns();
                CUresult cr = drv->get_state(pid, &st);
                uint64_t dt = bench_now_ns() - t0;
                if ((cr != CUDA_SUCCESS || st != CU_PROCESS_STATE_RUNNING) && errors++ == 0)
                        bench_gpu_fail("direct cuCheckpointProcessGetState(%d): %s state %d", pid,
                                       bench_gpu_cu_name(drv, cr), (int)st);
                if (i >= 0)
                        lat[i] = (double)dt / 1e3;
        }
        return errors;
}

/* Back-to-back GetStates of pid through the daemon (warmup untimed calls
 * first); returns the failed ones. */
static long bench_gpu_daemon_getstates(cudackpt_client *c, int pid, long warmup, long calls, double *lat)
{
        long errors = 0;

        for (long i = -warmup; i < calls; i++) {
                cudackpt_reply reply;
                char err[512];
                cudackpt_reply_init(&reply);
                uint64_t t0 = bench_now_ns();
                int cr = cudackpt_get_state(c, pid, &reply);
                uint64_t dt = bench_now_ns() - t0;
                if (bench_gpu_reply_ok("GetState", pid, cr, &reply, CUDACKPT_STATE_RUNNING, err, sizeof(err)) < 0 &&
                    errors++ == 0)
                        bench_gpu_fail("%s", err);
                cudackpt_reply_clear(&reply);
                if (i >= 0)
                        lat[i] = (double)dt / 1e3;
        }
        return errors;
}

/* Back-to-back GetInfo calls (a round trip that needs no worker), with
 * BENCH_GPU_GS_WARMUP untimed ones first; returns the failed ones. */
static long bench_gpu_daemon_getinfos(cudackpt_client *c, long calls, double *lat)
{
        long errors = 0;

        for (long i = -BENCH_GPU_GS_WARMUP; i < calls; i++) {
                cudackpt_reply reply;
                cudackpt_reply_init(&reply);
                uint64_t t0 = bench_now_ns();
                int cr = cudackpt_call(c, "org.varlink.service.GetInfo", NULL, &reply);
                uint64_t dt = bench_now_ns() - t0;
                if (cr < 0 || reply.error)
                        errors++;
                cudackpt_reply_clear(&reply);
                if (i >= 0)
                        lat[i] = (double)dt / 1e3;
        }
        return errors;
}

/* The daemon d restarted with lane_spin_us 0 (d and *c are the new ones),
 * and its GetStates timed: the same path without the lane's spinning. */
static long bench_gpu_getstates_no_spin(const bench_gpu_cfg *cfg, bench_daemon *d, cudackpt_client **c, int pid,
                                        double *lat)
{
        char path[PATH_MAX];
        FILE *f;

        cudackpt_client_free(*c);
        *c = NULL;
        bench_gpu_daemon_stop(d);
        d->pid = 0; /* out_daemon stops only the new one, if it starts */
        snprintf(path, sizeof(path), "%s/no-spin.json", cfg->workdir);
        f = fopen(path, "we");
        if (!f)
                return cfg->calls;
        fprintf(f, "{\"lane_spin_us\": 0}\n");
        fclose(f);
        if (bench_gpu_daemon_start_with(cfg, path, d) < 0)
                return cfg->calls;
        if (bench_gpu_connect(d, c) < 0)
                return cfg->calls;
        return bench_gpu_daemon_getstates(*c, pid, BENCH_GPU_GS_WARMUP, cfg->calls, lat);
}

/* One stretch of n timed calls of one of the three compared paths, into
 * its array from entry off; warmup untimed calls first. */
static void bench_gpu_gs_stretch(bench_gpu_gs *gs, enum bench_gpu_gs_path path, const bench_gpu_driver *drv,
                                 cudackpt_client *c, cudackpt_client *cs, int pid, long warmup, long off, long n)
{
        double *lat = gs->lat[path] + off;

        if (path == BENCH_GPU_GS_DIRECT)
                gs->errors[path] += bench_gpu_direct_getstates(drv, pid, warmup, n, lat);
        else
                gs->errors[path] += bench_gpu_daemon_getstates(path == BENCH_GPU_GS_DAEMON ? c : cs, pid, warmup,
                                                               n, lat);
}

/* Direct calls, a client that sleeps (c) and one that spins (cs), timed in
 * BENCH_GPU_GS_ROUNDS rounds of calls/rounds calls each, the rounds going
 * through the six orders of the three. */
static void bench_gpu_gs_rounds(const bench_gpu_cfg *cfg, bench_gpu_gs *gs, const bench_gpu_driver *drv,
                                cudackpt_client *c, cudackpt_client *cs, int pid)
{
        static const enum bench_gpu_gs_path D = BENCH_GPU_GS_DIRECT, V = BENCH_GPU_GS_DAEMON,
                                            S = BENCH_GPU_GS_CLIENTSPIN;
        static const enum bench_gpu_gs_path orders[6][3] = { { D, V, S }, { V, S, D }, { S, D, V },
                                                             { D, S, V }, { S, V, D }, { V, D, S } };
        long rounds = cfg->calls < BENCH_GPU_GS_ROUNDS ? 1 : BENCH_GPU_GS_ROUNDS, per = cfg->calls / rounds;

        for (int k = 0; k < 3; k++)
                bench_gpu_gs_stretch(gs, orders[0][k], drv, c, cs, pid, BENCH_GPU_GS_WARMUP, 0, 0);
        for (long round = 0; round < rounds; round++) {
                long off = round * per, n = round == rounds - 1 ? cfg->calls - off : per;
                for (int k = 0; k < 3; k++)
                        bench_gpu_gs_stretch(gs, orders[round % 6][k], drv, c, cs, pid,
                                             BENCH_GPU_GS_STRETCH_WARMUP, off, n);
        }
}

static void bench_gpu_gs_print(bench_gpu_gs *gs, long calls)
{
        const bench_stats *sd = &gs->st[BENCH_GPU_GS_DIRECT], *sv = &gs->st[BENCH_GPU_GS_DAEMON];
        const bench_stats *sn = &gs->st[BENCH_GPU_GS_NOSPIN], *scs = &gs->st[BENCH_GPU_GS_CLIENTSPIN];
        const bench_stats *sh = &gs->st[BENCH_GPU_GS_HOP], *si = &gs->st[BENCH_GPU_GS_INFO];

        bench_gpu_lat_header();
        for (int k = 0; k < BENCH_GPU_GS_N; k++) {
                bench_stats_compute(gs->lat[k], (size_t)calls, &gs->st[k]);
                bench_gpu_print_lat(bench_gpu_gs_paths[k].label, bench_gpu_gs_paths[k].key, &gs->st[k],
                                    gs->errors[k]);
        }
        printf("  daemon overhead at p50: %+.1f us (x%.2f); with lane_spin_us 0: %+.1f us (x%.2f); client spinning:"
               " %+.1f us (x%.2f)\n",
               sv->p50 - sd->p50, sd->p50 > 0 ? sv->p50 / sd->p50 : 0, sn->p50 - sd->p50,
               sd->p50 > 0 ? sn->p50 / sd->p50 : 0, scs->p50 - sd->p50, sd->p50 > 0 ? scs->p50 / sd->p50 : 0);
        printf("RESULT bench=getstate daemon_vs_direct_p50=%.3f nospin_vs_direct_p50=%.3f"
               " clientspin_vs_direct_p50=%.3f\n",
               sd->p50 > 0 ? sv->p50 / sd->p50 : 0, sd->p50 > 0 ? sn->p50 / sd->p50 : 0,
               sd->p50 > 0 ? scs->p50 / sd->p50 : 0);
        printf("  of which thread hand-off %+.1f us, socket round trip %.1f us, the rest (pinning, queueing) %+.1f us\n",
               sh->p50 - sd->p50, si->p50, sv->p50 - sh->p50 - si->p50);
}

/* The parts of the daemon's path, each timed alone after the rounds: a
 * round trip that needs no worker (GetInfo, sleeping and spinning), the
 * driver call through a worker thread in-process, and through a spinning
 * thread. */
static void bench_gpu_gs_parts(const bench_gpu_cfg *cfg, bench_gpu_gs *gs, const bench_gpu_driver *drv,
                               cudackpt_client *c, cudackpt_client *cs, int pid)
{
        gs->errors[BENCH_GPU_GS_INFO] = bench_gpu_daemon_getinfos(c, cfg->calls, gs->lat[BENCH_GPU_GS_INFO]);
        gs->errors[BENCH_GPU_GS_INFOSPIN] =
                bench_gpu_daemon_getinfos(cs, cfg->calls, gs->lat[BENCH_GPU_GS_INFOSPIN]);
        gs->errors[BENCH_GPU_GS_HOP] = gs->errors[BENCH_GPU_GS_HOPCALL] =
                bench_gpu_hops(drv, pid, cfg->calls, gs->lat[BENCH_GPU_GS_HOP], gs->lat[BENCH_GPU_GS_HOPCALL]);
        gs->errors[BENCH_GPU_GS_SPIN] = gs->errors[BENCH_GPU_GS_SPINCALL] =
                bench_gpu_spins(drv, pid, cfg->calls, gs->lat[BENCH_GPU_GS_SPIN], gs->lat[BENCH_GPU_GS_SPINCALL]);
        if (gs->errors[BENCH_GPU_GS_HOP] || gs->errors[BENCH_GPU_GS_INFO] || gs->errors[BENCH_GPU_GS_INFOSPIN] ||
            gs->errors[BENCH_GPU_GS_SPIN])
                bench_gpu_fail("GetState parts: %ld failed through a uv worker, %ld through a spinning thread, "
                               "%ld failed GetInfo calls",
                               gs->errors[BENCH_GPU_GS_HOP], gs->errors[BENCH_GPU_GS_SPIN],
                               gs->errors[BENCH_GPU_GS_INFO] + gs->errors[BENCH_GPU_GS_INFOSPIN]);
}

/* The two clients of the getstate bench: *c sleeps for its replies, *cs
 * spins for BENCH_GPU_CLIENT_SPIN_US. */
static int bench_gpu_gs_connect(const bench_daemon *d, cudackpt_client **c, cudackpt_client **cs)
{
        int r;

        if ((r = bench_gpu_connect(d, c)) < 0 || (r = bench_gpu_connect(d, cs)) < 0)
                return r;
        /* $CUDACKPT_SPIN_US would make the sleeping one spin too. */
        r = cudackpt_client_set_spin(*c, 0);
        if (r == 0)
                r = cudackpt_client_set_spin(*cs, BENCH_GPU_CLIENT_SPIN_US);
        if (r < 0)
                bench_gpu_fail("cudackpt_client_set_spin: %s", strerror(-r));
        return r;
}

static int bench_gpu_getstate(const bench_gpu_cfg *cfg)
{
        bench_daemon d;
        bench_gpu_target t;
        bench_gpu_driver drv;
        cudackpt_client *c = NULL, *cs = NULL;
        bench_gpu_gs gs = { 0 };
        int r;

        printf("\n== 1. GetState round trip: daemon vs direct driver call (%ld calls, idle %ld MiB target;"
               " direct, daemon and daemon-clientspin interleaved in %d rounds) ==\n",
               cfg->calls, cfg->idle_mib, BENCH_GPU_GS_ROUNDS);
        if ((r = bench_gpu_driver_load(cfg, &drv)) < 0)
                return r;
        if ((r = bench_gpu_daemon_start(cfg, &d)) < 0)
                return r;
        if ((r = bench_gpu_targets_start(cfg, "getstate", 1, cfg->idle_mib, &t)) < 0)
                goto out_daemon;
        if ((r = bench_gpu_gs_connect(&d, &c, &cs)) < 0)
                goto out_client;
        for (int k = 0; k < BENCH_GPU_GS_N; k++)
                if (!(gs.lat[k] = calloc((size_t)cfg->calls, sizeof(double))))
                        r = -ENOMEM;
        if (r < 0)
                goto out_client;

        bench_gpu_gs_rounds(cfg, &gs, &drv, c, cs, t.pid);
        bench_gpu_gs_parts(cfg, &gs, &drv, c, cs, t.pid);
        cudackpt_client_free(cs);
        cs = NULL;
        gs.errors[BENCH_GPU_GS_NOSPIN] = bench_gpu_getstates_no_spin(cfg, &d, &c, t.pid, gs.lat[BENCH_GPU_GS_NOSPIN]);
        bench_gpu_gs_print(&gs, cfg->calls);
        for (int k = 0; k < BENCH_GPU_GS_N; k++)
                if (gs.errors[k])
                        r = -EIO;
out_client:
        for (int k = 0; k < BENCH_GPU_GS_N; k++)
                free(gs.lat[k]);
        cudackpt_client_free(cs);
        cudackpt_client_free(c);
        bench_gpu_targets_stop(&t, 1);
out_daemon:
        bench_gpu_daemon_stop(&d);
        return r;
}

/* ------------------------------------------------------------------------
 * 2. Whole processes: cudackptctl state vs cuda-checkpoint --get-state
 * ------------------------------------------------------------------------ */
/* The first name in PATH that is not the file `not` (cudackptctl, whose
 * compat symlink is also called cuda-checkpoint); NULL when none. */
static char *bench_gpu_find_in_path(const char *name, const char *not)
{
        const char *path = getenv("PATH");
        char *not_real = not ? realpath(not, NULL) : NULL;
        if (!path)
                return NULL;
        char *copy = strdup(path), *save = NULL;
        if (!copy)
                return NULL;
        for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
                char *full = NULL;
                if (asprintf(&full, "%s/%s", *dir ? dir : ".", name) < 0)
                        break;
                if (access(full, X_OK) == 0) {
                        char *real = realpath(full, NULL);
                        int same = real && not_real && strcmp(real, not_real) == 0;
                        free(real);
                        if (!same) {
                                free(copy);
                                free(not_real);
                                return full;
                        }
                }
                free(full);
        }
        free(copy);
        free(not_real);
        return NULL;
}

/* Times runs of argv; 0 when every run exited 0. */
static int bench_gpu_time_runs(const char *label, const char *key, char *const argv[], const char *const *env_add,
                               long runs)
{
        double *v = calloc((size_t)runs, sizeof(double));
        long errors = 0;
        int last = 0;
        if (!v)
                return -ENOMEM;
        for (long i = -3; i < runs; i++) { /* 3 warm-up runs */
                uint64_t ns = 0;
                int st = bench_run_timed(argv, env_add, &ns);
                if (st != 0) {
                        errors++;
                        last = st;
                }
                if (i >= 0)
                        v[i] = bench_gpu_ms(ns);
        }
        bench_stats s;
        bench_stats_compute(v, (size_t)runs, &s);
        printf("  %-44s %6zu %9.2f %9.2f %9.2f %9.2f\n", label, s.n, s.min, s.p50, s.p90, s.max);
        printf("RESULT %s runs=%zu min_ms=%.3f p50_ms=%.3f p90_ms=%.3f max_ms=%.3f errors=%ld\n", key, s.n, s.min,
               s.p50, s.p90, s.max, errors);
        free(v);
        if (errors) {
                bench_gpu_fail("%s: %ld of %ld runs failed (last exit status %d)", argv[0], errors, runs + 3, last);
                return -EIO;
        }
        return 0;
}

static int bench_gpu_exec(const bench_gpu_cfg *cfg)
{
        bench_daemon d;
        bench_gpu_target t;
        char pid_s[32], sock_arg[300];
        int r;

        printf("\n== 2. A whole process asking for the state (%ld runs each, medians) ==\n", cfg->exec_runs);
        if ((r = bench_gpu_daemon_start(cfg, &d)) < 0)
                return r;
        if ((r = bench_gpu_targets_start(cfg, "exec", 1, cfg->idle_mib, &t)) < 0)
                goto out_daemon;
        snprintf(pid_s, sizeof(pid_s), "%d", (int)t.pid);
        snprintf(sock_arg, sizeof(sock_arg), "--socket=%s", d.socket_path);
        printf("  %-44s %6s %9s %9s %9s %9s\n", "", "runs", "min ms", "p50 ms", "p90 ms", "max ms");

        char *true_argv[] = {"true", NULL};
        bench_gpu_time_runs("fork+exec of true (floor)", "bench=exec cmd=true", true_argv, NULL, cfg->exec_runs);
        char *ctl_argv[] = {(char *)cfg->ctl_path, sock_arg, "state", pid_s, NULL};
        if (bench_gpu_time_runs("cudackptctl state PID", "bench=exec cmd=cudackptctl", ctl_argv, NULL,
                                cfg->exec_runs) < 0)
                r = -EIO;

        /* cudackptctl's cuda-checkpoint mode (the symlink beside it), as CRIU would run it. */
        char *compat = NULL, sock_env[320];
        snprintf(sock_env, sizeof(sock_env), "CUDACKPT_SOCKET=%s", d.socket_path);
        const char *const compat_env[] = {sock_env, NULL};
        const char *slash = strrchr(cfg->ctl_path, '/');
        if (asprintf(&compat, "%.*scuda-checkpoint", slash ? (int)(slash - cfg->ctl_path + 1) : 0,
                     cfg->ctl_path) >= 0 &&
            access(compat, X_OK) == 0) {
                char *compat_argv[] = {compat, "--get-state", "--pid", pid_s, NULL};
                if (bench_gpu_time_runs("cudackptctl as cuda-checkpoint --get-state", "bench=exec cmd=ctl-compat",
                                        compat_argv, compat_env, cfg->exec_runs) < 0)
                        r = -EIO;
        }
        free(compat);

        char *cc = cfg->cuda_checkpoint_path ? strdup(cfg->cuda_checkpoint_path)
                                             : bench_gpu_find_in_path("cuda-checkpoint", cfg->ctl_path);
        if (cc && access(cc, X_OK) == 0) {
                char *cc_argv[] = {cc, "--get-state", "--pid", pid_s, NULL};
                /* Not ours: its failure is reported, not counted against cudackptd. */
                int before = bench_gpu_failures;
                printf("  (NVIDIA's utility: %s)\n", cc);
                bench_gpu_time_runs("cuda-checkpoint --get-state --pid PID", "bench=exec cmd=cuda-checkpoint",
                                    cc_argv, NULL, cfg->exec_runs);
                bench_gpu_failures = before;
        } else {
                printf("  %-44s not available; reference 16.7 ms median\n", "cuda-checkpoint --get-state --pid PID");
                printf("RESULT bench=exec cmd=cuda-checkpoint available=0 reference_p50_ms=16.7\n");
        }
        free(cc);
        bench_gpu_targets_stop(&t, 1);
out_daemon:
        bench_gpu_daemon_stop(&d);
        return r;
}

/* ------------------------------------------------------------------------
 * 3./4. N processes at once
 * ------------------------------------------------------------------------ */
enum bench_gpu_mode { BENCH_GPU_DAEMON, BENCH_GPU_DIRECT };

typedef struct bench_gpu_worker {
        pthread_t thread;
        enum bench_gpu_mode mode;
        const bench_gpu_driver *drv;
        cudackpt_client *client;
        pthread_barrier_t *start;
        atomic_int *done;
        int pid;
        long cycles;
        double suspend_ms, resume_ms; /* of the last cycle, client side */
        double ckpt_ms, restore_ms;   /* direct mode: the two long driver calls */
        int failed;
        char err[512];
} bench_gpu_worker;

static int bench_gpu_direct_cycle(bench_gpu_worker *w)
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

static int bench_gpu_daemon_cycle(cudackpt_client *c, int pid, double *ret_suspend_ms, double *ret_resume_ms,
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

static void *bench_gpu_worker_main(void *arg)
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
static void bench_gpu_start_workers(bench_gpu_worker *w, int n)
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
static double bench_gpu_parallel(enum bench_gpu_mode mode, const bench_daemon *d, const bench_gpu_driver *drv,
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

static int bench_gpu_all_running(const bench_gpu_driver *drv, const bench_gpu_target *t, int n)
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

static int bench_gpu_multi(const bench_gpu_cfg *cfg)
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

static int bench_gpu_contention(const bench_gpu_cfg *cfg)
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

        /* Baseline without load. */
        for (long i = -100; i < cfg->calls / 5 + 1; i++) {
                cudackpt_reply reply;
                char err[512];
                cudackpt_reply_init(&reply);
                uint64_t t0 = bench_now_ns();
                int cr = cudackpt_get_state(p.idle_c, p.idle_pid, &reply);
                uint64_t dt = bench_now_ns() - t0;
                if (bench_gpu_reply_ok("GetState", p.idle_pid, cr, &reply, CUDACKPT_STATE_RUNNING, err,
                                       sizeof(err)) < 0 &&
                    base_err++ == 0)
                        bench_gpu_fail("%s", err);
                cudackpt_reply_clear(&reply);
                if (i >= 0)
                        bench_samples_add(&base, (double)dt / 1e3);
        }

        atomic_init(&done, 0);
        p.start = &start;
        p.done = &done;
        p.nworkers = n;
        /* The prober waits at the same barrier as the workers and the clock. */
        memset(w, 0, sizeof(w));
        for (int i = 0; i < n; i++) {
                w[i].mode = BENCH_GPU_DAEMON;
                w[i].pid = t[i].pid;
                w[i].cycles = cfg->cycles;
                w[i].start = &start;
                w[i].done = &done;
                if (bench_gpu_connect(&d, &w[i].client) < 0) {
                        r = -EIO;
                        goto out_clients;
                }
        }
        if (pthread_barrier_init(&start, NULL, (unsigned)(n + 2)) != 0) {
                r = -ENOMEM;
                goto out_clients;
        }
        bench_gpu_start_workers(w, n);
        if (pthread_create(&p.thread, NULL, bench_gpu_prober_main, &p) != 0)
                abort();
        pthread_barrier_wait(&start);
        uint64_t t0 = bench_now_ns();
        for (int i = 0; i < n; i++)
                pthread_join(w[i].thread, NULL);
        uint64_t t1 = bench_now_ns();
        pthread_join(p.thread, NULL);
        pthread_barrier_destroy(&start);
        for (int i = 0; i < n; i++)
                if (w[i].failed) {
                        bench_gpu_fail("%s", w[i].err);
                        r = -EIO;
                }
        if (p.errors) {
                bench_gpu_fail("%ld GetState errors under load, last: %s", p.errors, p.err);
                r = -EIO;
        }

        bench_stats sb, si, sbusy;
        bench_stats_compute(base.v, base.n, &sb);
        bench_stats_compute(p.idle.v, p.idle.n, &si);
        bench_stats_compute(p.busy.v, p.busy.n, &sbusy);
        printf("  load: %d processes x %ld cycle(s) took %.2f s\n", n, cfg->cycles, bench_gpu_ms(t1 - t0) / 1e3);
        bench_gpu_lat_header();
        bench_gpu_print_lat("idle process, no load", "bench=contention series=idle-noload", &sb, base_err);
        bench_gpu_print_lat("idle process, during checkpoints", "bench=contention series=idle-load", &si, 0);
        bench_gpu_print_lat("process being checkpointed", "bench=contention series=busy-load", &sbusy, 0);
        printf("  answers naming an operation in flight for the busy process: %ld of %zu\n", p.in_flight_seen,
               p.busy.n);
        printf("RESULT bench=contention procs=%d mib=%ld load_s=%.3f busy_in_flight=%ld busy_n=%zu\n", n,
               cfg->proc_mib, bench_gpu_ms(t1 - t0) / 1e3, p.in_flight_seen, p.busy.n);
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

/* ------------------------------------------------------------------------
 * 5. Suspend/resume against GPU memory size
 * ------------------------------------------------------------------------ */
static int bench_gpu_size(const bench_gpu_cfg *cfg)
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
                for (long i = 0; ok && i < cfg->repeats; i++) {
                        cudackpt_reply reply;
                        char err[512];
                        cudackpt_reply_init(&reply);
                        uint64_t t0 = bench_now_ns();
                        int cr = cudackpt_suspend(c, t.pid, -1, &reply);
                        uint64_t t1 = bench_now_ns();
                        if (bench_gpu_reply_ok("Suspend", t.pid, cr, &reply, CUDACKPT_STATE_CHECKPOINTED, err,
                                               sizeof(err)) < 0) {
                                bench_gpu_fail("%s", err);
                                ok = 0;
                        }
                        dsus[i] = reply.duration_ms;
                        cudackpt_reply_clear(&reply);
                        if (!ok)
                                break;
                        cr = cudackpt_resume(c, t.pid, NULL, &reply);
                        uint64_t t2 = bench_now_ns();
                        if (bench_gpu_reply_ok("Resume", t.pid, cr, &reply, CUDACKPT_STATE_RUNNING, err,
                                               sizeof(err)) < 0) {
                                bench_gpu_fail("%s", err);
                                ok = 0;
                        }
                        dres[i] = reply.duration_ms;
                        cudackpt_reply_clear(&reply);
                        sus[i] = bench_gpu_ms(t1 - t0);
                        res[i] = bench_gpu_ms(t2 - t1);
                }
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

/* ------------------------------------------------------------------------
 * 6. A group of N: SuspendGroup+ResumeGroup vs N single calls vs direct
 * ------------------------------------------------------------------------ */
/* {"selector":{"pids":[{"pid":A},...]}}, malloc()ed. */
static char *bench_gpu_pids_selector(const bench_gpu_target *t, int n)
{
        cJSON *root = cJSON_CreateObject(), *sel = cJSON_AddObjectToObject(root, "selector");
        cJSON *pids = sel ? cJSON_AddArrayToObject(sel, "pids") : NULL;
        char *text = NULL;
        for (int i = 0; pids && i < n; i++) {
                cJSON *ref = cJSON_CreateObject();
                if (!ref || !cJSON_AddNumberToObject(ref, "pid", t[i].pid) || !cJSON_AddItemToArray(pids, ref)) {
                        cJSON_Delete(ref);
                        pids = NULL;
                }
        }
        if (pids)
                text = cJSON_PrintUnformatted(root);
        cJSON_Delete(root);
        return text;
}

/* One group call; 0 when it succeeded with n members, each in state want.
 * *ret_daemon_ms: the reply's duration_ms. */
static int bench_gpu_group_call(cudackpt_client *c, const char *method, const char *params, int n, const char *want,
                                double *ret_daemon_ms, char *err, size_t errlen)
{
        cudackpt_reply reply;
        cudackpt_reply_init(&reply);
        int r = cudackpt_call(c, method, params, &reply);
        if (r < 0) {
                snprintf(err, errlen, "%s: transport error %s", method, strerror(-r));
                return -EIO;
        }
        if (reply.error) {
                snprintf(err, errlen, "%s: %s %.400s", method, reply.error, reply.parameters_json);
                cudackpt_reply_clear(&reply);
                return -EIO;
        }
        cJSON *p = cJSON_Parse(reply.parameters_json);
        const cJSON *members = cJSON_GetObjectItemCaseSensitive(p, "members");
        const cJSON *dur = cJSON_GetObjectItemCaseSensitive(p, "duration_ms");
        const cJSON *m;
        int count = 0, bad = 0;
        cJSON_ArrayForEach(m, members)
        {
                const cJSON *st = cJSON_GetObjectItemCaseSensitive(m, "state");
                count++;
                if (!cJSON_IsString(st) || strcmp(st->valuestring, want) != 0)
                        bad++;
        }
        r = 0;
        if (count != n || bad) {
                snprintf(err, errlen, "%s: %d members, %d not %s: %.400s", method, count, bad, want,
                         reply.parameters_json);
                r = -EIO;
        }
        *ret_daemon_ms = cJSON_IsNumber(dur) ? dur->valuedouble : -1;
        cJSON_Delete(p);
        cudackpt_reply_clear(&reply);
        return r;
}

static void bench_gpu_minmed(double *v, size_t n, double *ret_min, double *ret_med)
{
        bench_stats st;
        bench_stats_compute(v, n, &st);
        *ret_min = st.min;
        *ret_med = st.p50;
}

static int bench_gpu_group(const bench_gpu_cfg *cfg)
{
        enum { M_GROUP, M_PARALLEL, M_DIRECT, M_COUNT };
        const char *names[M_COUNT] = {"SuspendGroup + ResumeGroup (1 call each)",
                                      "N x Suspend/Resume, N connections at once",
                                      "direct driver calls, N threads"};
        const char *keys[M_COUNT] = {"group", "single-parallel", "direct"};
        bench_daemon d;
        bench_gpu_driver drv;
        bench_gpu_target t[BENCH_GPU_MAX_PROCS];
        bench_gpu_worker w[BENCH_GPU_MAX_PROCS];
        pthread_barrier_t start;
        cudackpt_client *c = NULL;
        char *params = NULL;
        int n = (int)cfg->procs, r;
        long R = cfg->repeats;
        double *tot[M_COUNT], *sus[M_COUNT], *res[M_COUNT], *dsus, *dres;
        int ok = 1;

        printf("\n== 6. Suspend+resume of a group of %d x %ld MiB processes, three ways (%ld repeats,"
               " %ld warm-up) ==\n",
               n, cfg->proc_mib, R, cfg->warmup);
        if ((r = bench_gpu_driver_load(cfg, &drv)) < 0)
                return r;
        if ((r = bench_gpu_daemon_start(cfg, &d)) < 0)
                return r;
        uint64_t ts = bench_now_ns();
        if ((r = bench_gpu_targets_start(cfg, "group", n, cfg->proc_mib, t)) < 0)
                goto out_daemon;
        printf("  %d targets ready in %.1f s\n", n, bench_gpu_ms(bench_now_ns() - ts) / 1e3);
        for (int m = 0; m < M_COUNT; m++) {
                tot[m] = calloc((size_t)R, sizeof(double));
                sus[m] = calloc((size_t)R, sizeof(double));
                res[m] = calloc((size_t)R, sizeof(double));
                if (!tot[m] || !sus[m] || !res[m])
                        ok = 0;
        }
        dsus = calloc((size_t)R, sizeof(double));
        dres = calloc((size_t)R, sizeof(double));
        params = bench_gpu_pids_selector(t, n);
        if (!ok || !dsus || !dres || !params || bench_gpu_connect(&d, &c) < 0) {
                r = -ENOMEM;
                goto out_free;
        }

        /* Warm-up cycles (the first checkpoint of a process touches fresh
         * host memory), then the repeats; the methods take turns going first
         * so that drift hits all alike. */
        for (long rep = -cfg->warmup; rep < R && r == 0; rep++) {
                for (int k = 0; k < M_COUNT && r == 0; k++) {
                        int m = (int)((k + (rep < 0 ? 0 : rep)) % M_COUNT);
                        double total = 0, s_ms = 0, r_ms = 0, ds = -1, dr = -1;
                        char err[1024];
                        if (rep < 0 && m != M_GROUP)
                                continue; /* one warm-up is one group cycle */
                        if (m == M_GROUP) {
                                uint64_t t0 = bench_now_ns();
                                r = bench_gpu_group_call(c, CUDACKPT_METHOD_SUSPEND_GROUP, params, n,
                                                         CUDACKPT_STATE_CHECKPOINTED, &ds, err, sizeof(err));
                                uint64_t t1 = bench_now_ns();
                                if (r == 0)
                                        r = bench_gpu_group_call(c, CUDACKPT_METHOD_RESUME_GROUP, params, n,
                                                                 CUDACKPT_STATE_RUNNING, &dr, err, sizeof(err));
                                uint64_t t2 = bench_now_ns();
                                if (r < 0) {
                                        bench_gpu_fail("%s", err);
                                        break;
                                }
                                total = bench_gpu_ms(t2 - t0);
                                s_ms = bench_gpu_ms(t1 - t0);
                                r_ms = bench_gpu_ms(t2 - t1);
                        } else {
                                total = bench_gpu_parallel(m == M_PARALLEL ? BENCH_GPU_DAEMON : BENCH_GPU_DIRECT, &d,
                                                           &drv, t, n, w, &start);
                                if (total < 0) {
                                        r = -EIO;
                                        break;
                                }
                                /* The slowest process's halves. */
                                for (int i = 0; i < n; i++) {
                                        if (w[i].suspend_ms > s_ms)
                                                s_ms = w[i].suspend_ms;
                                        if (w[i].resume_ms > r_ms)
                                                r_ms = w[i].resume_ms;
                                }
                        }
                        if (bench_gpu_all_running(&drv, t, n) < 0) {
                                r = -EIO;
                                break;
                        }
                        if (rep < 0) {
                                printf("  warm-up: group cycle %.2f s\n", total / 1e3);
                                continue;
                        }
                        tot[m][rep] = total;
                        sus[m][rep] = s_ms;
                        res[m][rep] = r_ms;
                        if (m == M_GROUP) {
                                dsus[rep] = ds;
                                dres[rep] = dr;
                        }
                }
                if (rep >= 0 && r == 0)
                        printf("  repeat %ld: group %.2f s, %d single calls at once %.2f s, direct %.2f s\n", rep + 1,
                               tot[M_GROUP][rep] / 1e3, n, tot[M_PARALLEL][rep] / 1e3, tot[M_DIRECT][rep] / 1e3);
        }
        for (int i = 0; i < n; i++)
                if (bench_gpu_target_check(&t[i]) < 0)
                        r = -EIO;
        if (r == 0) {
                double mn[M_COUNT], md[M_COUNT];
                printf("  %-44s %9s %9s %13s %13s\n", "method (wall, all N)", "min s", "median s", "suspend s",
                       "resume s");
                for (int m = 0; m < M_COUNT; m++) {
                        double smin, smed, rmin, rmed;
                        bench_gpu_minmed(tot[m], (size_t)R, &mn[m], &md[m]);
                        bench_gpu_minmed(sus[m], (size_t)R, &smin, &smed);
                        bench_gpu_minmed(res[m], (size_t)R, &rmin, &rmed);
                        printf("  %-44s %9.3f %9.3f %13.3f %13.3f\n", names[m], mn[m] / 1e3, md[m] / 1e3, smed / 1e3,
                               rmed / 1e3);
                        printf("RESULT bench=group mode=%s procs=%d mib=%ld repeats=%ld min_s=%.3f median_s=%.3f "
                               "suspend_s=%.3f resume_s=%.3f\n",
                               keys[m], n, cfg->proc_mib, R, mn[m] / 1e3, md[m] / 1e3, smed / 1e3, rmed / 1e3);
                }
                double dmin, dmed, rmin, rmed;
                bench_gpu_minmed(dsus, (size_t)R, &dmin, &dmed);
                bench_gpu_minmed(dres, (size_t)R, &rmin, &rmed);
                printf("  (suspend/resume s: the slowest process for the per-process methods; the daemon's own"
                       " group duration_ms: suspend %.1f ms, resume %.1f ms, medians)\n",
                       dmed, rmed);
                double ratio = md[M_DIRECT] > 0 ? md[M_GROUP] / md[M_DIRECT] : 0;
                double ratio_min = mn[M_DIRECT] > 0 ? mn[M_GROUP] / mn[M_DIRECT] : 0;
                double ratio_par = md[M_DIRECT] > 0 ? md[M_PARALLEL] / md[M_DIRECT] : 0;
                printf("  group / direct: x%.3f at the median, x%.3f at the minimum (goal <= x1.1: %s);"
                       " single calls at once / direct: x%.3f\n",
                       ratio, ratio_min, ratio <= 1.1 ? "met" : "MISSED", ratio_par);
                printf("  data check: all %d targets verified their buffers intact\n", n);
                printf("RESULT bench=group ratio_group_direct=%.3f ratio_group_direct_min=%.3f "
                       "ratio_parallel_direct=%.3f daemon_suspend_ms=%.1f daemon_resume_ms=%.1f data_ok=1\n",
                       ratio, ratio_min, ratio_par, dmed, rmed);
                printf("SUMMARY | %d x %ld MiB suspend+resume: SuspendGroup+ResumeGroup | min %.2f s, median %.2f s |"
                       " |\n",
                       n, cfg->proc_mib, mn[M_GROUP] / 1e3, md[M_GROUP] / 1e3);
                printf("SUMMARY | the same: %d single Suspend/Resume on %d connections at once | min %.2f s, median"
                       " %.2f s (x%.3f of direct) | |\n",
                       n, n, mn[M_PARALLEL] / 1e3, md[M_PARALLEL] / 1e3, ratio_par);
                printf("SUMMARY | the same: direct driver calls from %d threads | min %.2f s, median %.2f s | |\n", n,
                       mn[M_DIRECT] / 1e3, md[M_DIRECT] / 1e3);
                printf("SUMMARY | group / direct | x%.3f (median), x%.3f (min) | <= x1.1: **%s** |\n", ratio,
                       ratio_min, ratio <= 1.1 ? "met" : "missed");
        }
out_free:
        cudackpt_client_free(c);
        free(params);
        for (int m = 0; m < M_COUNT; m++) {
                free(tot[m]);
                free(sus[m]);
                free(res[m]);
        }
        free(dsus);
        free(dres);
        bench_gpu_targets_stop(t, n);
out_daemon:
        bench_gpu_daemon_stop(&d);
        return r;
}

/* ------------------------------------------------------------------------
 * 7. ListProcesses vs a /proc scan with GetState on every pid
 * ------------------------------------------------------------------------ */
static long bench_gpu_count_procs(void)
{
        DIR *dir = opendir("/proc");
        struct dirent *de;
        long n = 0;
        if (!dir)
                return -errno;
        while ((de = readdir(dir)))
                if (de->d_name[0] >= '1' && de->d_name[0] <= '9')
                        n++;
        closedir(dir);
        return n;
}

/* The baseline's pool: each run, the main thread scans /proc into pids,
 * the workers take pids off a shared index and ask the driver for each
 * one's state, skipping stopped processes (the driver would wait for them
 * without end) and zombies. */
typedef struct bench_gpu_scan {
        const bench_gpu_driver *drv;
        pthread_barrier_t go, end;
        pid_t *pids;
        size_t npids, cap;
        atomic_size_t next;
        atomic_long found, skipped, calls;
        pid_t *cuda; /* found[i]: pids whose GetState succeeded (unordered) */
        /* Set: the workers run the daemon's own test (discover_maps_driver)
         * instead of state + GetState, for the breakdown of its time. */
        const struct discover_lib *maps;
        atomic_int quit;
} bench_gpu_scan;

/* The state letter of /proc/PID/stat, or 0. */
static char bench_gpu_proc_state(pid_t pid)
{
        char path[64], buf[512];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        ssize_t len = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (len <= 0)
                return 0;
        buf[len] = '\0';
        char *paren = strrchr(buf, ')');
        return paren && paren[1] == ' ' ? paren[2] : 0;
}

static void *bench_gpu_scan_main(void *arg)
{
        bench_gpu_scan *s = arg;
        for (;;) {
                pthread_barrier_wait(&s->go);
                if (atomic_load(&s->quit))
                        return NULL;
                for (;;) {
                        size_t i = atomic_fetch_add(&s->next, 1);
                        if (i >= s->npids)
                                break;
                        if (s->maps) {
                                if (discover_maps_driver(s->pids[i], s->maps) == 1)
                                        s->cuda[atomic_fetch_add(&s->found, 1)] = s->pids[i];
                                continue;
                        }
                        char st = bench_gpu_proc_state(s->pids[i]);
                        if (st == 0 || st == 'T' || st == 't' || st == 'Z' || st == 'X') {
                                atomic_fetch_add(&s->skipped, 1);
                                continue;
                        }
                        CUprocessState ps;
                        atomic_fetch_add(&s->calls, 1);
                        if (s->drv->get_state((int)s->pids[i], &ps) == CUDA_SUCCESS)
                                s->cuda[atomic_fetch_add(&s->found, 1)] = s->pids[i];
                }
                pthread_barrier_wait(&s->end);
        }
}

/* The /proc scan alone: every pid but this process's into s->pids. */
static int bench_gpu_scan_proc(bench_gpu_scan *s)
{
        DIR *dir = opendir("/proc");
        struct dirent *de;
        pid_t self = getpid();
        if (!dir)
                return -errno;
        s->npids = 0;
        while ((de = readdir(dir))) {
                char *end;
                long v = strtol(de->d_name, &end, 10);
                if (de->d_name[0] < '1' || de->d_name[0] > '9' || *end || v == self)
                        continue;
                if (s->npids == s->cap) {
                        size_t cap = s->cap ? s->cap * 2 : 4096;
                        pid_t *p = realloc(s->pids, cap * sizeof(*p)), *q = realloc(s->cuda, cap * sizeof(*q));
                        if (p)
                                s->pids = p;
                        if (q)
                                s->cuda = q;
                        if (!p || !q) {
                                closedir(dir);
                                return -ENOMEM;
                        }
                        s->cap = cap;
                }
                s->pids[s->npids++] = (pid_t)v;
        }
        closedir(dir);
        return 0;
}

/* The pool over the pids of the last scan. */
static void bench_gpu_scan_pool(bench_gpu_scan *s)
{
        atomic_store(&s->next, 0);
        atomic_store(&s->found, 0);
        atomic_store(&s->skipped, 0);
        atomic_store(&s->calls, 0);
        pthread_barrier_wait(&s->go);
        pthread_barrier_wait(&s->end);
}

/* One baseline run: scan, then the pool; 0 or -errno. */
static int bench_gpu_scan_run(bench_gpu_scan *s)
{
        int r = bench_gpu_scan_proc(s);

        if (r == 0)
                bench_gpu_scan_pool(s);
        return r;
}

/* Where ListProcesses's time goes, on the same machine: the /proc scan
 * alone, and the daemon's test of one process (open its maps, PROCMAP_QUERY
 * over its executable file mappings) over every pid from one thread and
 * from the pool; medians of runs. */
static void bench_gpu_list_parts(bench_gpu_scan *s, const struct discover_lib *lib, long runs, long pool)
{
        double *a = calloc((size_t)runs, sizeof(double)), *b = calloc((size_t)runs, sizeof(double)),
               *c = calloc((size_t)runs, sizeof(double));
        bench_stats sa, sb, sc;
        size_t n = 0;

        if (!a || !b || !c)
                goto out;
        s->maps = lib;
        for (long i = 0; i < runs; i++) {
                uint64_t t0 = bench_now_ns();
                if (bench_gpu_scan_proc(s) < 0)
                        goto out;
                uint64_t t1 = bench_now_ns();
                n = 0;
                for (size_t k = 0; k < s->npids; k++)
                        n += discover_maps_driver(s->pids[k], lib) == 1;
                uint64_t t2 = bench_now_ns();
                bench_gpu_scan_pool(s);
                uint64_t t3 = bench_now_ns();
                a[i] = bench_gpu_ms(t1 - t0);
                b[i] = bench_gpu_ms(t2 - t1);
                c[i] = bench_gpu_ms(t3 - t2);
        }
        bench_stats_compute(a, (size_t)runs, &sa);
        bench_stats_compute(b, (size_t)runs, &sb);
        bench_stats_compute(c, (size_t)runs, &sc);
        printf("  where ListProcesses's time goes (p50 of %ld runs, %zu processes, %zu map the driver):\n", runs,
               s->npids, n);
        printf("    /proc scan alone                                  %9.2f ms\n", sa.p50);
        printf("    maps test of every process, 1 thread              %9.2f ms (%.2f us a process)\n", sb.p50,
               s->npids ? sb.p50 * 1e3 / (double)s->npids : 0.0);
        printf("    maps test of every process, %2ld threads            %9.2f ms\n", pool, sc.p50);
        printf("RESULT bench=list-parts scan_ms=%.3f maps_1_ms=%.3f maps_pool_ms=%.3f pool=%ld processes=%zu\n",
               sa.p50, sb.p50, sc.p50, pool, s->npids);
out:
        s->maps = NULL;
        free(a);
        free(b);
        free(c);
}

/* 0 when every target pid is in pids[0..n). */
static int bench_gpu_has_targets(const pid_t *pids, size_t n, const bench_gpu_target *t, int nt, const char *who)
{
        for (int i = 0; i < nt; i++) {
                size_t j = 0;
                while (j < n && pids[j] != t[i].pid)
                        j++;
                if (j == n) {
                        bench_gpu_fail("%s did not find target %d", who, (int)t[i].pid);
                        return -ENOENT;
                }
        }
        return 0;
}

/* One ListProcesses call: the pids listed into *pids (grown as needed);
 * every target must be listed "running". */
static int bench_gpu_list_call(cudackpt_client *c, const bench_gpu_target *t, int nt, pid_t **pids, size_t *cap,
                               size_t *ret_n)
{
        cudackpt_reply reply;
        size_t n = 0;
        int r;
        cudackpt_reply_init(&reply);
        r = cudackpt_call(c, CUDACKPT_METHOD_LIST_PROCESSES, NULL, &reply);
        if (r < 0 || reply.error) {
                bench_gpu_fail("ListProcesses: %s %.400s", r < 0 ? strerror(-r) : reply.error,
                               r < 0 ? "" : reply.parameters_json);
                cudackpt_reply_clear(&reply);
                return -EIO;
        }
        cJSON *p = cJSON_Parse(reply.parameters_json);
        const cJSON *procs = cJSON_GetObjectItemCaseSensitive(p, "processes"), *x;
        r = cJSON_IsArray(procs) ? 0 : -EPROTO;
        cJSON_ArrayForEach(x, procs)
        {
                const cJSON *pid = cJSON_GetObjectItemCaseSensitive(x, "pid");
                const cJSON *st = cJSON_GetObjectItemCaseSensitive(x, "state");
                if (!cJSON_IsNumber(pid)) {
                        r = -EPROTO;
                        continue;
                }
                for (int i = 0; i < nt; i++)
                        if (t[i].pid == (pid_t)pid->valueint &&
                            (!cJSON_IsString(st) || strcmp(st->valuestring, CUDACKPT_STATE_RUNNING) != 0)) {
                                bench_gpu_fail("ListProcesses: target %d listed as %.200s", (int)t[i].pid,
                                               reply.parameters_json);
                                r = -EIO;
                        }
                if (n == *cap) {
                        size_t nc = *cap ? *cap * 2 : 64;
                        pid_t *np = realloc(*pids, nc * sizeof(*np));
                        if (!np) {
                                r = -ENOMEM;
                                break;
                        }
                        *pids = np;
                        *cap = nc;
                }
                (*pids)[n++] = (pid_t)pid->valueint;
        }
        if (r == -EPROTO)
                bench_gpu_fail("ListProcesses: unexpected reply %.400s", reply.parameters_json);
        cJSON_Delete(p);
        cudackpt_reply_clear(&reply);
        if (r == 0)
                r = bench_gpu_has_targets(*pids, n, t, nt, "ListProcesses");
        if (r == 0)
                *ret_n = n;
        return r;
}

/* Prints up to 8 pids of a[] that are not in b[], with their command names. */
static void bench_gpu_list_diff(const char *what, const pid_t *a, size_t na, const pid_t *b, size_t nb)
{
        int shown = 0;
        for (size_t i = 0; i < na; i++) {
                size_t j = 0;
                while (j < nb && b[j] != a[i])
                        j++;
                if (j < nb)
                        continue;
                char path[64], comm[64] = "?";
                snprintf(path, sizeof(path), "/proc/%d/comm", (int)a[i]);
                FILE *f = fopen(path, "re");
                if (f) {
                        if (fgets(comm, sizeof(comm), f))
                                comm[strcspn(comm, "\n")] = '\0';
                        fclose(f);
                }
                if (shown++ == 0)
                        printf("  %s:", what);
                if (shown <= 8)
                        printf(" %d (%s)", (int)a[i], comm);
        }
        if (shown)
                printf("%s\n", shown > 8 ? " ..." : "");
}

/* Times runs ListProcesses calls (after two untimed ones) into lat. */
static int bench_gpu_list_only(cudackpt_client *c, const bench_gpu_target *t, int nt, long runs, double *lat)
{
        pid_t *listed = NULL;
        size_t cap = 0, n = 0;
        int r = 0;
        for (long i = -2; i < runs && r == 0; i++) {
                uint64_t a = bench_now_ns();
                r = bench_gpu_list_call(c, t, nt, &listed, &cap, &n);
                if (i >= 0)
                        lat[i] = bench_gpu_ms(bench_now_ns() - a);
        }
        free(listed);
        return r;
}

static int bench_gpu_list(const bench_gpu_cfg *cfg)
{
        bench_daemon d;
        bench_gpu_driver drv;
        bench_gpu_target t[BENCH_GPU_MAX_PROCS];
        bench_gpu_scan scan;
        pthread_t *pool = NULL;
        pid_t *sleepers = NULL, *listed = NULL;
        size_t listed_cap = 0, listed_n = 0;
        long nsleep = 0, started = 0, before;
        int n = (int)cfg->procs, r = 0, threads = 0;
        long runs = cfg->list_runs;
        double *lat_list = NULL, *lat_scan = NULL, *lat_noindex = NULL;
        cudackpt_client *c = NULL;
        int have_index = 0;

        memset(&scan, 0, sizeof(scan));
        printf("\n== 7. ListProcesses with %ld processes on the machine (%d CUDA targets) vs a /proc scan with"
               " GetState from %ld threads (%ld runs each) ==\n",
               cfg->processes, n, cfg->pool, runs);
        /* The idle processes first: a fork of this process maps the driver
         * until it execs, once the driver is loaded here. */
        before = bench_gpu_count_procs();
        nsleep = cfg->processes - before - n;
        if (nsleep < 0)
                nsleep = 0;
        bench_raise_nofile(4096);
        sleepers = calloc((size_t)nsleep + 1, sizeof(*sleepers));
        if (!sleepers)
                return -ENOMEM;
        uint64_t t0 = bench_now_ns();
        for (long i = 0; i < nsleep; i++) {
                char *argv[] = {"sleep", "100000", NULL};
                int e = bench_spawn(argv, NULL, NULL, -1, &sleepers[i]);
                if (e < 0) {
                        bench_gpu_fail("cannot start idle process %ld of %ld: %s", i + 1, nsleep, strerror(-e));
                        r = e;
                        break;
                }
                started++;
        }
        printf("  %ld idle sleep processes started in %.1f s (%ld processes there before)\n", started,
               bench_gpu_ms(bench_now_ns() - t0) / 1e3, before);
        if (r < 0)
                goto out_sleepers;
        if ((r = bench_gpu_driver_load(cfg, &drv)) < 0)
                goto out_sleepers;
        {
                /* The index on kernels without BPF trampolines too (the
                 * tracepoint way), which the default leaves to /proc scans. */
                char path[PATH_MAX];
                FILE *f;
                snprintf(path, sizeof(path), "%s/index.json", cfg->workdir);
                if (!(f = fopen(path, "w")) || fputs("{\"process_index_tracepoint\": true}\n", f) < 0 ||
                    fclose(f) != 0) {
                        r = -EIO;
                        goto out_sleepers;
                }
                if ((r = bench_gpu_daemon_start_with(cfg, path, &d)) < 0)
                        goto out_sleepers;
        }
        have_index = bench_gpu_await_index(&d);
        if ((r = bench_gpu_targets_start(cfg, "list", n, cfg->idle_mib, t)) < 0)
                goto out_daemon;
        long total = bench_gpu_count_procs();
        printf("  processes in /proc now: %ld\n", total);
        lat_list = calloc((size_t)runs, sizeof(double));
        lat_scan = calloc((size_t)runs, sizeof(double));
        lat_noindex = calloc((size_t)runs, sizeof(double));
        scan.drv = &drv;
        if (!lat_list || !lat_scan || !lat_noindex || bench_gpu_connect(&d, &c) < 0 ||
            pthread_barrier_init(&scan.go, NULL, (unsigned)cfg->pool + 1) != 0) {
                r = -ENOMEM;
                goto out_targets;
        }
        pthread_barrier_init(&scan.end, NULL, (unsigned)cfg->pool + 1);
        pool = calloc((size_t)cfg->pool, sizeof(*pool));
        if (!pool)
                abort();
        for (; threads < cfg->pool; threads++)
                if (pthread_create(&pool[threads], NULL, bench_gpu_scan_main, &scan) != 0)
                        abort(); /* the barriers count every thread */

        /* Two untimed calls of each, then the two kinds take turns. */
        long found = 0, calls = 0, skipped = 0;
        for (long i = -2; i < runs && r == 0; i++) {
                uint64_t a = bench_now_ns();
                if ((r = bench_gpu_list_call(c, t, n, &listed, &listed_cap, &listed_n)) < 0)
                        break;
                uint64_t b = bench_now_ns();
                if ((r = bench_gpu_scan_run(&scan)) < 0) {
                        bench_gpu_fail("baseline scan: %s", strerror(-r));
                        break;
                }
                uint64_t e = bench_now_ns();
                found = atomic_load(&scan.found);
                calls = atomic_load(&scan.calls);
                skipped = atomic_load(&scan.skipped);
                if ((r = bench_gpu_has_targets(scan.cuda, (size_t)found, t, n, "the baseline")) < 0)
                        break;
                if (i >= 0) {
                        lat_list[i] = bench_gpu_ms(b - a);
                        lat_scan[i] = bench_gpu_ms(e - b);
                }
        }
        for (int i = 0; i < n; i++)
                if (bench_gpu_target_check(&t[i]) < 0)
                        r = -EIO;
        if (r == 0) {
                struct discover_lib lib;
                if (discover_lib_of(drv.get_state, &lib) == 0)
                        bench_gpu_list_parts(&scan, &lib, runs, cfg->pool);
        }
        /* The same daemon without its process index: every process in /proc. */
        if (r == 0) {
                char path[PATH_MAX];
                FILE *f;
                snprintf(path, sizeof(path), "%s/noindex.json", cfg->workdir);
                cudackpt_client_free(c);
                c = NULL;
                bench_gpu_daemon_stop(&d);
                if (!(f = fopen(path, "w")) || fputs("{\"process_index_max\": 0}\n", f) < 0 || fclose(f) != 0) {
                        r = -EIO;
                        goto out_targets;
                }
                if ((r = bench_gpu_daemon_start_with(cfg, path, &d)) < 0)
                        goto out_targets;
                if ((r = bench_gpu_connect(&d, &c)) == 0)
                        r = bench_gpu_list_only(c, t, n, runs, lat_noindex);
        }
        if (r == 0) {
                bench_stats sl, ss, sn;
                bench_stats_compute(lat_list, (size_t)runs, &sl);
                bench_stats_compute(lat_scan, (size_t)runs, &ss);
                bench_stats_compute(lat_noindex, (size_t)runs, &sn);
                double speed = sl.p50 > 0 ? ss.p50 / sl.p50 : 0;
                printf("  %-52s %9s %9s %9s %9s\n", "", "min ms", "p50 ms", "p90 ms", "max ms");
                printf("  %-52s %9.2f %9.2f %9.2f %9.2f\n",
                       have_index ? "ListProcesses through the daemon (process index)"
                                  : "ListProcesses through the daemon (no index)",
                       sl.min, sl.p50, sl.p90, sl.max);
                printf("  %-52s %9.2f %9.2f %9.2f %9.2f\n", "ListProcesses, process_index_max 0 (/proc)", sn.min,
                       sn.p50, sn.p90, sn.max);
                printf("  %-52s %9.2f %9.2f %9.2f %9.2f\n", "baseline: /proc scan + GetState per pid, pool", ss.min,
                       ss.p50, ss.p90, ss.max);
                printf("  ListProcesses listed %zu CUDA processes; the baseline found %ld (%ld driver calls, %ld"
                       " stopped/zombie/gone skipped) among %ld processes\n",
                       listed_n, found, calls, skipped, total);
                bench_gpu_list_diff("found by the baseline, not listed", scan.cuda, (size_t)found, listed, listed_n);
                bench_gpu_list_diff("listed, not found by the baseline", listed, listed_n, scan.cuda, (size_t)found);
                printf("  speed-up x%.1f at the median (goals: ListProcesses < 20 ms: %s; >= x5: %s)\n", speed,
                       sl.p50 < 20 ? "met" : "MISSED", speed >= 5 ? "met" : "MISSED");
                printf("RESULT bench=list processes=%ld cuda_listed=%zu cuda_baseline=%ld runs=%ld list_min_ms=%.3f "
                       "list_p50_ms=%.3f list_p90_ms=%.3f scan_min_ms=%.3f scan_p50_ms=%.3f scan_p90_ms=%.3f "
                       "pool=%ld speedup=%.2f index=%d noindex_min_ms=%.3f noindex_p50_ms=%.3f\n",
                       total, listed_n, found, runs, sl.min, sl.p50, sl.p90, ss.min, ss.p50, ss.p90, cfg->pool, speed,
                       have_index, sn.min, sn.p50);
                printf("SUMMARY | ListProcesses, %ld processes (%zu CUDA) | min %.2f ms, median %.2f ms | < 20 ms:"
                       " **%s** |\n",
                       total, listed_n, sl.min, sl.p50, sl.p50 < 20 ? "met" : "missed");
                printf("SUMMARY | baseline: /proc scan + cuCheckpointProcessGetState per pid, %ld threads | min %.2f"
                       " ms, median %.2f ms | |\n",
                       cfg->pool, ss.min, ss.p50);
                printf("SUMMARY | ListProcesses speed-up over the baseline | x%.1f (median) | >= x5: **%s** |\n",
                       speed, speed >= 5 ? "met" : "missed");
        }
        atomic_store(&scan.quit, 1);
        pthread_barrier_wait(&scan.go);
        for (int i = 0; i < threads; i++)
                pthread_join(pool[i], NULL);
        pthread_barrier_destroy(&scan.go);
        pthread_barrier_destroy(&scan.end);
out_targets:
        free(pool);
        free(scan.pids);
        free(scan.cuda);
        free(listed);
        free(lat_list);
        free(lat_scan);
        free(lat_noindex);
        cudackpt_client_free(c);
        bench_gpu_targets_stop(t, n);
out_daemon:
        bench_gpu_daemon_stop(&d);
out_sleepers:
        for (long i = 0; i < started; i++)
                kill(sleepers[i], SIGKILL);
        for (long i = 0; i < started; i++)
                while (waitpid(sleepers[i], NULL, 0) < 0 && errno == EINTR)
                        ;
        free(sleepers);
        return r;
}

/* ------------------------------------------------------------------------
 * 8. GetState with Watch streams open
 * ------------------------------------------------------------------------ */
static int bench_gpu_watchers(const bench_gpu_cfg *cfg)
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

/* ------------------------------------------------------------------------ */
static void bench_gpu_usage(FILE *f)
{
        fprintf(f,
                "usage: cudackpt-bench-gpu COMMAND [OPTIONS]\n"
                "commands: getstate | exec | multi | contention | size | group | list | watchers | all\n"
                "  --daemon=PATH           cudackptd (required)\n"
                "  --ctl=PATH              cudackptctl (exec)\n"
                "  --target=PATH           cudackpt-gpu-target (required)\n"
                "  --driver=PATH           libcuda for the daemon and the direct calls (libcuda.so.1)\n"
                "  --cuda-checkpoint=PATH  NVIDIA's utility (default: searched in PATH)\n"
                "  --calls=N               GetState calls (10000; watchers: per condition)\n"
                "  --runs=N                process runs for exec (50)\n"
                "  --repeats=N             repeats of multi and size (3)\n"
                "  --procs=N               processes for multi and contention (4)\n"
                "  --proc-mib=N            their GPU memory (4096)\n"
                "  --idle-mib=N            GPU memory of idle targets (64)\n"
                "  --cycles=N              suspend+resume cycles per process in contention (1)\n"
                "  --sizes=LIST            MiB sizes for size (1024,4096,16384,65536)\n"
                "  --interval-ms=N         targets' verification interval (1000)\n"
                "  --log-level=LEVEL       daemon log level (warning)\n"
                "  --warmup=N              group: untimed group cycles first (1)\n"
                "  --processes=N           list: processes on the machine, idle sleeps added (2000)\n"
                "  --list-runs=N           list: timed calls of each kind (20)\n"
                "  --pool=N                list: threads of the /proc+GetState baseline (16)\n"
                "  --watchers=N            watchers: Watch connections (100)\n"
                "  --watch-rounds=N        watchers: rounds of four alternating blocks (6)\n"
                "  --watch-rate=N          watchers: Lock/Unlock cycles per second, 0 back to back (100)\n"
                "  --sim=PATH              the simulator (libcudackpt-sim.so) instead of the driver;\n"
                "                          --target then names a stand-in (cudackpt-gpu-standin)\n");
}

int main(int argc, char **argv)
{
        bench_gpu_cfg cfg = {
                .driver_path = "libcuda.so.1",
                .log_level = "warning",
                .calls = 10000,
                .exec_runs = 50,
                .repeats = 3,
                .procs = 4,
                .proc_mib = 4096,
                .idle_mib = 64,
                .interval_ms = 1000,
                .cycles = 1,
                .sizes = {1024, 4096, 16384, 65536},
                .nsizes = 4,
                .processes = 2000,
                .list_runs = 20,
                .pool = 16,
                .warmup = 1,
                .watchers = 100,
                .watch_rounds = 6,
                .watch_rate = 100,
        };
        const char *cmd;
        int r = 0;

        if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
                bench_gpu_usage(argc < 2 ? stderr : stdout);
                return argc < 2 ? 2 : 0;
        }
        cmd = argv[1];
        for (int i = 2; i < argc; i++) {
                const char *a = argv[i];
                const char *v = strchr(a, '=');
                int bad = 0;
                if (!v) {
                        bad = 1;
                } else if (strncmp(a, "--daemon=", 9) == 0) {
                        cfg.daemon_path = v + 1;
                } else if (strncmp(a, "--ctl=", 6) == 0) {
                        cfg.ctl_path = v + 1;
                } else if (strncmp(a, "--target=", 9) == 0) {
                        cfg.target_path = v + 1;
                } else if (strncmp(a, "--driver=", 9) == 0) {
                        cfg.driver_path = v + 1;
                } else if (strncmp(a, "--cuda-checkpoint=", 18) == 0) {
                        cfg.cuda_checkpoint_path = v + 1;
                } else if (strncmp(a, "--log-level=", 12) == 0) {
                        cfg.log_level = v + 1;
                } else if (strncmp(a, "--calls=", 8) == 0) {
                        bad = bench_parse_long(v + 1, 1, 100000000, &cfg.calls) < 0;
                } else if (strncmp(a, "--runs=", 7) == 0) {
                        bad = bench_parse_long(v + 1, 1, 1000000, &cfg.exec_runs) < 0;
                } else if (strncmp(a, "--repeats=", 10) == 0) {
                        bad = bench_parse_long(v + 1, 1, 1000, &cfg.repeats) < 0;
                } else if (strncmp(a, "--procs=", 8) == 0) {
                        bad = bench_parse_long(v + 1, 1, BENCH_GPU_MAX_PROCS, &cfg.procs) < 0;
                } else if (strncmp(a, "--proc-mib=", 11) == 0) {
                        bad = bench_parse_long(v + 1, 1, 1L << 24, &cfg.proc_mib) < 0;
                } else if (strncmp(a, "--idle-mib=", 11) == 0) {
                        bad = bench_parse_long(v + 1, 1, 1L << 24, &cfg.idle_mib) < 0;
                } else if (strncmp(a, "--cycles=", 9) == 0) {
                        bad = bench_parse_long(v + 1, 1, 1000, &cfg.cycles) < 0;
                } else if (strncmp(a, "--interval-ms=", 14) == 0) {
                        bad = bench_parse_long(v + 1, 0, 3600000, &cfg.interval_ms) < 0;
                } else if (strncmp(a, "--sim=", 6) == 0) {
                        cfg.sim_path = v + 1;
                } else if (strncmp(a, "--processes=", 12) == 0) {
                        bad = bench_parse_long(v + 1, 1, 1000000, &cfg.processes) < 0;
                } else if (strncmp(a, "--list-runs=", 12) == 0) {
                        bad = bench_parse_long(v + 1, 1, 100000, &cfg.list_runs) < 0;
                } else if (strncmp(a, "--pool=", 7) == 0) {
                        bad = bench_parse_long(v + 1, 1, 1024, &cfg.pool) < 0;
                } else if (strncmp(a, "--warmup=", 9) == 0) {
                        bad = bench_parse_long(v + 1, 0, 100, &cfg.warmup) < 0;
                } else if (strncmp(a, "--watchers=", 11) == 0) {
                        bad = bench_parse_long(v + 1, 1, 100000, &cfg.watchers) < 0;
                } else if (strncmp(a, "--watch-rounds=", 15) == 0) {
                        bad = bench_parse_long(v + 1, 1, 1000, &cfg.watch_rounds) < 0;
                } else if (strncmp(a, "--watch-rate=", 13) == 0) {
                        bad = bench_parse_long(v + 1, 0, 1000000, &cfg.watch_rate) < 0;
                } else if (strncmp(a, "--sizes=", 8) == 0) {
                        cfg.nsizes = bench_parse_list(v + 1, cfg.sizes, BENCH_GPU_MAX_SIZES);
                        bad = cfg.nsizes < 0;
                } else {
                        bad = 1;
                }
                if (bad) {
                        fprintf(stderr, "cudackpt-bench-gpu: bad option %s\n", a);
                        bench_gpu_usage(stderr);
                        return 2;
                }
        }
        if (!cfg.daemon_path || !cfg.target_path || (!cfg.ctl_path && (!strcmp(cmd, "exec") || !strcmp(cmd, "all")))) {
                fprintf(stderr, "cudackpt-bench-gpu: --daemon, --target (and for exec --ctl) are required\n");
                return 2;
        }
        if (cfg.sim_path)
                cfg.driver_path = cfg.sim_path;
        setvbuf(stdout, NULL, _IOLBF, 0);
        signal(SIGPIPE, SIG_IGN);
        if ((r = bench_make_workdir("cudackpt-bench-gpu", &cfg.workdir)) < 0) {
                fprintf(stderr, "cudackpt-bench-gpu: work directory: %s\n", strerror(-r));
                return 1;
        }

        int all = strcmp(cmd, "all") == 0, known = all;
        if (all || strcmp(cmd, "getstate") == 0) {
                known = 1;
                bench_gpu_getstate(&cfg);
        }
        if (all || strcmp(cmd, "exec") == 0) {
                known = 1;
                bench_gpu_exec(&cfg);
        }
        if (all || strcmp(cmd, "multi") == 0) {
                known = 1;
                bench_gpu_multi(&cfg);
        }
        if (all || strcmp(cmd, "contention") == 0) {
                known = 1;
                bench_gpu_contention(&cfg);
        }
        if (all || strcmp(cmd, "size") == 0) {
                known = 1;
                bench_gpu_size(&cfg);
        }
        if (strcmp(cmd, "group") == 0) {
                known = 1;
                bench_gpu_group(&cfg);
        }
        if (strcmp(cmd, "list") == 0) {
                known = 1;
                bench_gpu_list(&cfg);
        }
        if (strcmp(cmd, "watchers") == 0) {
                known = 1;
                bench_gpu_watchers(&cfg);
        }
        if (!known) {
                fprintf(stderr, "cudackpt-bench-gpu: unknown command %s\n", cmd);
                bench_remove_workdir(cfg.workdir);
                free(cfg.workdir);
                return 2;
        }
        /* A debug run is for reading the daemon's log afterwards. */
        if (bench_gpu_failures == 0 && strcmp(cfg.log_level, "debug") != 0)
                bench_remove_workdir(cfg.workdir);
        else
                printf("work directory kept (logs): %s\n", cfg.workdir);
        free(cfg.workdir);
        return bench_gpu_failures ? 1 : 0;
}
