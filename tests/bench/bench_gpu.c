/* bench_gpu.c: cudackptd measured on a real GPU: the command line of
 * cudackpt-bench-gpu.  Each benchmark is bench_gpu_NAME.c, what they share
 * bench_gpu_common.c and bench_gpu_workers.c (bench_gpu.h).
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
#include "bench_gpu.h"

#include <stdbool.h>
#include <stddef.h>

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

/* The options, where each goes and the bounds of the numbers. */
#define STR(name, field) { name, offsetof(bench_gpu_cfg, field), false, 0, 0 }
#define NUM(name, field, min, max) { name, offsetof(bench_gpu_cfg, field), true, min, max }
static const bench_opt bench_gpu_opts[] = {
        STR("--daemon=", daemon_path),
        STR("--ctl=", ctl_path),
        STR("--target=", target_path),
        STR("--driver=", driver_path),
        STR("--cuda-checkpoint=", cuda_checkpoint_path),
        STR("--log-level=", log_level),
        STR("--sim=", sim_path),
        NUM("--calls=", calls, 1, 100000000),
        NUM("--runs=", exec_runs, 1, 1000000),
        NUM("--repeats=", repeats, 1, 1000),
        NUM("--procs=", procs, 1, BENCH_GPU_MAX_PROCS),
        NUM("--proc-mib=", proc_mib, 1, 1L << 24),
        NUM("--idle-mib=", idle_mib, 1, 1L << 24),
        NUM("--cycles=", cycles, 1, 1000),
        NUM("--interval-ms=", interval_ms, 0, 3600000),
        NUM("--processes=", processes, 1, 1000000),
        NUM("--list-runs=", list_runs, 1, 100000),
        NUM("--pool=", pool, 1, 1024),
        NUM("--warmup=", warmup, 0, 100),
        NUM("--watchers=", watchers, 1, 100000),
        NUM("--watch-rounds=", watch_rounds, 1, 1000),
        NUM("--watch-rate=", watch_rate, 0, 1000000),
};
#undef STR
#undef NUM

/* The benchmarks, in the order "all" runs those it runs. */
static const struct {
        const char *name;
        int (*run)(const bench_gpu_cfg *cfg);
        bool in_all;
} bench_gpu_benches[] = {
        { "getstate", bench_gpu_getstate, true },     { "exec", bench_gpu_exec, true },
        { "multi", bench_gpu_multi, true },           { "contention", bench_gpu_contention, true },
        { "size", bench_gpu_size, true },             { "group", bench_gpu_group, false },
        { "list", bench_gpu_list, false },            { "watchers", bench_gpu_watchers, false },
};

/* Sets the option a (--NAME=VALUE) in cfg; -EINVAL if it is none or its
 * value is bad. */
static int bench_gpu_option(const char *a, bench_gpu_cfg *cfg)
{
        if (strncmp(a, "--sizes=", 8) == 0) {
                cfg->nsizes = bench_parse_list(a + 8, cfg->sizes, BENCH_GPU_MAX_SIZES);
                return cfg->nsizes < 0 ? -EINVAL : 0;
        }
        return bench_parse_opt(a, bench_gpu_opts, sizeof(bench_gpu_opts) / sizeof(bench_gpu_opts[0]), cfg) < 0
                       ? -EINVAL
                       : 0;
}

/* Runs cmd (a benchmark's name or "all"); -ENOENT if it names none. */
static int bench_gpu_run(const char *cmd, const bench_gpu_cfg *cfg)
{
        bool all = strcmp(cmd, "all") == 0, known = all;
        for (size_t k = 0; k < sizeof(bench_gpu_benches) / sizeof(bench_gpu_benches[0]); k++)
                if ((all && bench_gpu_benches[k].in_all) || strcmp(cmd, bench_gpu_benches[k].name) == 0) {
                        known = true;
                        bench_gpu_benches[k].run(cfg);
                }
        return known ? 0 : -ENOENT;
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

        if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
                bench_gpu_usage(argc < 2 ? stderr : stdout);
                return argc < 2 ? 2 : 0;
        }
        cmd = argv[1];
        for (int i = 2; i < argc; i++) {
                if (bench_gpu_option(argv[i], &cfg) < 0) {
                        fprintf(stderr, "cudackpt-bench-gpu: bad option %s\n", argv[i]);
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
        if (bench_begin("cudackpt-bench-gpu", &cfg.workdir) < 0)
                return 1;
        if (bench_gpu_run(cmd, &cfg) < 0) {
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
