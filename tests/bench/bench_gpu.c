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
