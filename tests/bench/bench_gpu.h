/* bench_gpu.h: what the benchmarks of cudackpt-bench-gpu (bench_gpu.c: the
 * command line; bench_gpu_NAME.c: one benchmark each) share. */
#pragma once

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

/* Failed operations so far (bench_gpu_fail()): the exit status is 1 if any. */
extern int bench_gpu_failures;

/* bench_gpu_common.c */
void bench_gpu_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *bench_gpu_cu_name(const bench_gpu_driver *drv, CUresult r);
int bench_gpu_driver_load(const bench_gpu_cfg *cfg, bench_gpu_driver *ret_drv);
int bench_gpu_daemon_start_with(const bench_gpu_cfg *cfg, const char *config_path, bench_daemon *ret_daemon);
int bench_gpu_daemon_start(const bench_gpu_cfg *cfg, bench_daemon *ret_daemon);
int bench_gpu_await_index(const bench_daemon *d);
void bench_gpu_daemon_stop(bench_daemon *d);
int bench_gpu_targets_start(const bench_gpu_cfg *cfg, const char *tag, int n, long mib,
                            bench_gpu_target *t);
void bench_gpu_targets_stop(bench_gpu_target *t, int n);
int bench_gpu_target_check(const bench_gpu_target *t);
int bench_gpu_connect(const bench_daemon *d, cudackpt_client **ret_client);
int bench_gpu_reply_ok(const char *what, int pid, int r, const cudackpt_reply *reply, const char *want,
                       char *err, size_t errlen);
double bench_gpu_ms(uint64_t ns);
void bench_gpu_print_lat(const char *label, const char *key, bench_stats *st, long errors);
void bench_gpu_lat_header(void);

/* bench_gpu_getstate.c */
int bench_gpu_getstate(const bench_gpu_cfg *cfg);

/* bench_gpu_exec.c */
int bench_gpu_exec(const bench_gpu_cfg *cfg);

/* bench_gpu_workers.c */
int bench_gpu_direct_cycle(bench_gpu_worker *w);
int bench_gpu_daemon_cycle(cudackpt_client *c, int pid, double *ret_suspend_ms, double *ret_resume_ms,
                           char *err, size_t errlen);
void *bench_gpu_worker_main(void *arg);
void bench_gpu_start_workers(bench_gpu_worker *w, int n);
double bench_gpu_parallel(enum bench_gpu_mode mode, const bench_daemon *d, const bench_gpu_driver *drv,
                          bench_gpu_target *t, int n, bench_gpu_worker *w,
                          pthread_barrier_t *start);
int bench_gpu_all_running(const bench_gpu_driver *drv, const bench_gpu_target *t, int n);

/* bench_gpu_multi.c */
int bench_gpu_multi(const bench_gpu_cfg *cfg);

/* bench_gpu_contention.c */
int bench_gpu_contention(const bench_gpu_cfg *cfg);

/* bench_gpu_size.c */
int bench_gpu_size(const bench_gpu_cfg *cfg);

/* bench_gpu_group.c */
int bench_gpu_group(const bench_gpu_cfg *cfg);

/* bench_gpu_list.c */
int bench_gpu_list(const bench_gpu_cfg *cfg);

/* bench_gpu_watchers.c */
int bench_gpu_watchers(const bench_gpu_cfg *cfg);

