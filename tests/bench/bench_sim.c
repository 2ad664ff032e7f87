/* bench_sim.c: cudackptd's own cost, measured on any machine.
 *
 * Starts the daemon with the simulated driver (--driver=libcudackpt-sim.so)
 * and `env CUDACKPT_SIM=1 sleep ...` targets, then measures GetState
 * requests per second and p50/p99 latency with 1, 16 and 256 concurrent
 * clients (one connection and one thread each, bounded in count and time),
 * and the daemon's resident memory (VmRSS) idle and with 1000 open
 * connections.  The driver costs nothing here, so the numbers are the
 * daemon's: parsing, queueing, the pidfd/procfs checks and the reply.
 * Then GetState latency on one connection with --watchers Watch streams open
 * against none, with and without a Lock/Unlock loop on another target
 * (bench_watch.h), and a watcher storm by another uid against root's GetState
 * and the daemon's memory (bench_storm.h).  First, before the daemon of the
 * other parts starts, what daemons cost the system calls of processes they
 * do not serve (bench_syscall.h).  Last, GetState via the daemon against
 * GetInfo and the simulator's direct call with the lane's spinning off and
 * on, each on a daemon of its own, through a client that sleeps for its
 * replies and one that spins (bench_spin.h).  --only= picks the parts:
 * syscall, getstate (the levels), rss (the open connections), watchers,
 * storm, spin.
 * Prints a report and "RESULT key=value ..." lines; timing never fails it,
 * a failed request does (exit 1). */
#include "bench_sim.h"

#include <stddef.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "bench_spin.h"
#include "bench_storm.h"
#include "bench_syscall.h"
#include "bench_watch.h"

static void bench_sim_usage(FILE *f)
{
        fprintf(f, "usage: cudackpt-bench-sim --daemon=PATH --sim=PATH [--clients=1,16,256] [--seconds-ms=2000]\n"
                   "                          [--max-requests=1000000] [--targets=16] [--idle-conns=1000]\n"
                   "                          [--client-threads=1] [--config-extra=TEXT] [--log-level=warning]\n"
                   "                          [--only=syscall,getstate,rss,watchers,storm,spin] [--watchers=100]\n"
                   "                          [--watch-calls=12000] [--watch-rounds=6] [--watch-rate=100]\n"
                   "                          [--storm-seconds=5] [--storm-uid=4243] [--syscall-calls=1000000]\n"
                   "                          [--syscall-rounds=7] [--spin-calls=5000]\n"
                   "  --clients=LIST     concurrency levels: connections, each with one request in flight\n"
                   "  --config-extra=TEXT more \"key\": value pairs for the daemon's configuration\n"
                   "  --client-threads=N threads driving them through epoll (default 1); 0: one thread\n"
                   "                     per client, each calling the client library\n"
                   "  --seconds-ms=N     duration of each level\n"
                   "  --max-requests=N   bound on the requests of each level (shared by its clients)\n"
                   "  --targets=N        simulated CUDA processes the clients spread over\n"
                   "  --idle-conns=N     connections held open for the memory measurement\n"
                   "  --only=LIST        parts to run: syscall (getppid with no daemon, a default one and\n"
                   "                     one with process_index_tracepoint), getstate (the levels), rss (idle connections),\n"
                   "                     watchers (GetState with Watch streams open), storm (another\n"
                   "                     uid's unread watchers, root's GetState), spin (GetState, GetInfo\n"
                   "                     and the direct call, lane_spin_us 0 and 200, clients sleeping\n"
                   "                     and spinning); default all\n"
                   "  --watchers=N       Watch connections of the watchers part\n"
                   "  --watch-calls=N    its timed GetState calls per condition (over all rounds)\n"
                   "  --watch-rounds=N   its rounds, each of four alternating blocks\n"
                   "  --watch-rate=N     its Lock/Unlock loop's cycles per second (0: back to back)\n"
                   "  --storm-seconds=N  how long the storm lasts\n"
                   "  --storm-uid=N      the storm's uid (needs root)\n"
                   "  --syscall-calls=N  getppid() calls per timed block of the syscall part\n"
                   "  --syscall-rounds=N its blocks of each condition (the median is reported)\n"
                   "  --spin-calls=N     timed calls of each kind per setting of the spin part\n");
}

/* The syscall part, before the daemon of the other parts starts. */
static int bench_sim_syscall(const bench_sim_cfg *cfg, const char *workdir)
{
        bench_syscall_cfg sc = {
                .daemon_path = cfg->daemon_path,
                .sim_path = cfg->sim_path,
                .workdir = workdir,
                .calls = cfg->syscall_calls,
                .rounds = cfg->syscall_rounds,
        };
        char log[600];
        int r = bench_syscall_run(&sc);

        /* Its daemons' log, not to be read as the daemon's of the other
         * parts (kept after a failure, which it explains). */
        snprintf(log, sizeof(log), "%s/cudackptd.log", workdir);
        if (r == 0)
                (void)unlink(log);
        return r;
}

/* Keeps or removes the work directory; the exit status. */
static int bench_sim_finish(const bench_sim_cfg *cfg, char *workdir, int failed)
{
        /* A debug run is for reading the daemon's log afterwards. */
        if (failed || strcmp(cfg->log_level, "debug") == 0)
                printf("work directory kept (daemon log): %s\n", workdir);
        else
                bench_remove_workdir(workdir);
        free(workdir);
        return failed ? 1 : 0;
}

/* The options, where each goes and the bounds of the numbers (--only and
 * --clients apart). */
#define STR(name, field) { name, offsetof(bench_sim_cfg, field), false, 0, 0 }
#define NUM(name, field, min, max) { name, offsetof(bench_sim_cfg, field), true, min, max }
static const bench_opt bench_sim_opts[] = {
        STR("--daemon=", daemon_path),
        STR("--sim=", sim_path),
        STR("--log-level=", log_level),
        STR("--config-extra=", config_extra),
        NUM("--seconds-ms=", seconds_ms, 1, 3600000),
        NUM("--max-requests=", max_requests, 1, 100000000),
        NUM("--targets=", targets, 1, BENCH_SIM_MAX_TARGETS),
        NUM("--client-threads=", client_threads, 0, 64),
        NUM("--idle-conns=", idle_conns, 0, 100000),
        NUM("--watchers=", watchers, 1, 100000),
        NUM("--watch-calls=", watch_calls, 1, 100000000),
        NUM("--watch-rounds=", watch_rounds, 1, 1000),
        NUM("--storm-seconds=", storm_seconds, 1, 3600),
        NUM("--storm-uid=", storm_uid, 1, 4294967294L),
        NUM("--syscall-calls=", syscall_calls, 1000, 1000000000),
        NUM("--syscall-rounds=", syscall_rounds, 1, 100),
        NUM("--spin-calls=", spin_calls, 1, 10000000),
        NUM("--watch-rate=", watch_rate, 0, 1000000),
};
#undef STR
#undef NUM

/* --only=LIST: the parts to run; -EINVAL for a part it does not know or
 * none. */
static int bench_sim_only(const char *list_in, bench_sim_cfg *cfg)
{
        static const struct {
                const char *name;
                size_t field;
        } parts[] = {
                { "getstate", offsetof(bench_sim_cfg, run_getstate) }, { "rss", offsetof(bench_sim_cfg, run_rss) },
                { "watchers", offsetof(bench_sim_cfg, run_watchers) }, { "storm", offsetof(bench_sim_cfg, run_storm) },
                { "syscall", offsetof(bench_sim_cfg, run_syscall) },   { "spin", offsetof(bench_sim_cfg, run_spin) },
        };
        char list[256], *save = NULL;
        int any = 0;
        for (size_t k = 0; k < sizeof(parts) / sizeof(parts[0]); k++)
                *(int *)((char *)cfg + parts[k].field) = 0;
        snprintf(list, sizeof(list), "%s", list_in);
        for (char *w = strtok_r(list, ", ", &save); w; w = strtok_r(NULL, ", ", &save)) {
                size_t k = 0;
                while (k < sizeof(parts) / sizeof(parts[0]) && strcmp(w, parts[k].name) != 0)
                        k++;
                if (k == sizeof(parts) / sizeof(parts[0]))
                        return -EINVAL;
                *(int *)((char *)cfg + parts[k].field) = 1;
                any = 1;
        }
        return any ? 0 : -EINVAL;
}

/* Sets the option a (--NAME=VALUE) in cfg; -EINVAL if it is none or its
 * value is bad. */
static int bench_sim_option(const char *a, bench_sim_cfg *cfg)
{
        if (strncmp(a, "--only=", 7) == 0)
                return bench_sim_only(a + 7, cfg);
        if (strncmp(a, "--clients=", 10) == 0) {
                cfg->nlevels = bench_parse_list(a + 10, cfg->levels, BENCH_SIM_MAX_LEVELS);
                for (int k = 0; k < cfg->nlevels; k++)
                        if (cfg->levels[k] > 4096)
                                return -EINVAL;
                return cfg->nlevels < 0 ? -EINVAL : 0;
        }
        return bench_parse_opt(a, bench_sim_opts, sizeof(bench_sim_opts) / sizeof(bench_sim_opts[0]), cfg) < 0
                       ? -EINVAL
                       : 0;
}

/* The most connections open at once: the file descriptor limit is
 * raised for them (both ends of every connection live in this process
 * tree; the daemon inherits the limit). */
static long bench_sim_max_conns(const bench_sim_cfg *cfg)
{
        long maxc = 0;
        for (int k = 0; k < cfg->nlevels; k++)
                if (cfg->levels[k] > maxc)
                        maxc = cfg->levels[k];
        if (cfg->idle_conns > maxc)
                maxc = cfg->idle_conns;
        if (cfg->run_watchers && cfg->watchers + 2 > maxc)
                maxc = cfg->watchers + 2;
        long nofile = bench_raise_nofile(2 * maxc + 1024);
        if (nofile < maxc + 256)
                printf("warning: RLIMIT_NOFILE is %ld; %ld connections may not fit\n", nofile, maxc);
        return maxc;
}

/* The daemon's configuration at path: limits high enough (maxc
 * connections) that the benchmark measures, not the limits. */
static int bench_sim_write_config(const bench_sim_cfg *cfg, const char *path, long maxc)
{
        FILE *f = fopen(path, "we");
        if (!f) {
                fprintf(stderr, "cudackpt-bench-sim: %s: %s\n", path, strerror(errno));
                return -errno;
        }
        fprintf(f,
                "{\"max_connections\": %ld, \"max_connections_per_uid\": %ld, \"idle_timeout_ms\": 600000,\n"
                " \"max_queue_per_pid\": 4096, \"max_queue_total\": 65536%s%s}\n",
                maxc + 1024, maxc + 1024, cfg->config_extra ? ", " : "", cfg->config_extra ? cfg->config_extra : "");
        fclose(f);
        return 0;
}

/* cfg->targets simulated CUDA processes into pids (*ret_started of them
 * started), each checked running through the daemon. */
static int bench_sim_targets(const bench_sim_cfg *cfg, const bench_daemon *d, pid_t *pids, long *ret_started)
{
        static const char *const target_env[] = { "CUDACKPT_SIM=1", NULL };
        cudackpt_client *c = NULL;
        cudackpt_reply reply;
        int r;

        *ret_started = 0;
        for (long i = 0; i < cfg->targets; i++) {
                char *targv[] = { "sleep", "100000", NULL };
                if ((r = bench_spawn(targv, target_env, NULL, -1, &pids[i])) < 0) {
                        printf("ERROR: cannot start sleep: %s\n", strerror(-r));
                        return r;
                }
                (*ret_started)++;
        }
        cudackpt_reply_init(&reply);
        if (cudackpt_client_connect(d->socket_path, &c) < 0) {
                printf("ERROR: cannot connect to %s\n", d->socket_path);
                return -EIO;
        }
        /* bench_spawn returned after the exec, so the sim sees CUDACKPT_SIM=1. */
        r = 0;
        for (long i = 0; r == 0 && i < *ret_started; i++) {
                int cr = cudackpt_get_state(c, (int)pids[i], &reply);
                if (cr < 0 || reply.error || !reply.state || strcmp(reply.state, "running") != 0) {
                        printf("ERROR: GetState of simulated target %d: %s %s\n", (int)pids[i],
                               cr < 0 ? strerror(-cr) : (reply.error ? reply.error : reply.state),
                               reply.parameters_json ? reply.parameters_json : "");
                        r = -EIO;
                }
                cudackpt_reply_clear(&reply);
        }
        cudackpt_client_free(c);
        return r;
}

/* The getstate part: every level of clients. */
static int bench_sim_getstate(const bench_sim_cfg *cfg, const bench_daemon *d, const pid_t *pids)
{
        int r = 0;
        printf("== 6. GetState through cudackptd on the simulated driver (%ld targets, %ld ms per level,"
               " at most %ld requests; %s) ==\n",
               cfg->targets, cfg->seconds_ms, cfg->max_requests,
               cfg->client_threads ? "clients multiplexed by epoll" : "a thread per client");
        if (cfg->client_threads)
                printf("  client threads: %ld\n", cfg->client_threads);
        printf("  %8s %10s %8s %12s %9s %9s %9s %9s %10s\n", "clients", "requests", "seconds", "req/s", "p50 us",
               "p90 us", "p99 us", "max us", "RSS KiB");
        for (int k = 0; k < cfg->nlevels; k++)
                if (bench_sim_level(cfg, d, pids, cfg->levels[k]) < 0)
                        r = -EIO;
        return r;
}

/* The watchers part: the Lock/Unlock loop gets a target of its own. */
static int bench_sim_watchers(const bench_sim_cfg *cfg, const bench_daemon *d, const pid_t *pids)
{
        static const char *const target_env[] = { "CUDACKPT_SIM=1", NULL };
        char *targv[] = { "sleep", "100000", NULL };
        pid_t load_pid = 0;
        int r = bench_spawn(targv, target_env, NULL, -1, &load_pid);
        if (r < 0) {
                printf("ERROR: cannot start sleep: %s\n", strerror(-r));
                return r;
        }
        bench_watch_cfg wc = {
                .socket_path = d->socket_path,
                .tag = "sim",
                .probe_pid = (int)pids[0],
                .load_pid = (int)load_pid,
                .watchers = cfg->watchers,
                .calls = cfg->watch_calls,
                .rounds = cfg->watch_rounds,
                .warmup = 200,
                .load_rate = cfg->watch_rate,
        };
        r = bench_watch_run(&wc);
        bench_kill(load_pid);
        return r;
}

/* The storm part, with the daemon's default watcher limits: the storm
 * meets them.  The storm's uid reaches the socket in workdir. */
static int bench_sim_storm(const bench_sim_cfg *cfg, const bench_daemon *d, const pid_t *pids, const char *workdir)
{
        bench_storm_cfg sc = {
                .socket_path = d->socket_path,
                .daemon_pid = d->pid,
                .probe_pid = (int)pids[0],
                .uid = (uid_t)cfg->storm_uid,
                .seconds = cfg->storm_seconds,
                .calls = 5000,
                .targets = 4,
                .max_watcher_bytes = 256 * 1024,
                .max_watch_bytes = 32L * 1024 * 1024,
                .max_watchers_per_uid = 16,
        };
        chmod(workdir, 0755);
        return bench_storm_run(&sc);
}

/* The spin part, on daemons of its own. */
static int bench_sim_spin(const bench_sim_cfg *cfg, const pid_t *pids)
{
        bench_spin_cfg pc = {
                .daemon_path = cfg->daemon_path,
                .sim_path = cfg->sim_path,
                .log_level = cfg->log_level,
                .pid = (int)pids[0],
                .calls = cfg->spin_calls,
                .idle_ms = 3000,
                .spin_us = { 0, 200 },
                .n_spin = 2,
        };
        return bench_spin_run(&pc);
}

/* The parts on the daemon d, each whatever the parts before found; true
 * if one failed. */
static int bench_sim_parts(const bench_sim_cfg *cfg, const bench_daemon *d, const pid_t *pids, long rss_idle,
                           const char *workdir)
{
        int failed = 0;
        if (cfg->run_getstate && bench_sim_getstate(cfg, d, pids) < 0)
                failed = 1;
        if (cfg->run_rss && cfg->idle_conns > 0 && bench_sim_idle_conns(cfg, d, pids, rss_idle) < 0)
                failed = 1;
        if (cfg->run_watchers && bench_sim_watchers(cfg, d, pids) < 0)
                failed = 1;
        if (cfg->run_storm && bench_sim_storm(cfg, d, pids, workdir) < 0)
                failed = 1;
        if (cfg->run_spin && bench_sim_spin(cfg, pids) < 0)
                failed = 1;
        return failed;
}

/* What runs without options. */
static const bench_sim_cfg bench_sim_defaults = {
        .log_level = "warning",
        .levels = {1, 16, 256},
        .nlevels = 3,
        .seconds_ms = 2000,
        .max_requests = 1000000,
        .targets = 16,
        .idle_conns = 1000,
        .client_threads = 1,
        .run_getstate = 1,
        .run_rss = 1,
        .run_watchers = 1,
        .run_storm = 1,
        .run_syscall = 1,
        .run_spin = 1,
        .spin_calls = 5000,
        .syscall_calls = 1000000,
        .syscall_rounds = 7,
        .storm_seconds = 5,
        .storm_uid = 4243,
        .watchers = 100,
        .watch_calls = 12000,
        .watch_rounds = 6,
        .watch_rate = 100,
};

int main(int argc, char **argv)
{
        bench_sim_cfg cfg = bench_sim_defaults;
        char *workdir = NULL, config_path[512];
        pid_t pids[BENCH_SIM_MAX_TARGETS];
        long started = 0;
        bench_daemon d;
        int r, failed = 0;

        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
                        bench_sim_usage(stdout);
                        return 0;
                }
                if (bench_sim_option(argv[i], &cfg) < 0) {
                        fprintf(stderr, "cudackpt-bench-sim: bad option %s\n", argv[i]);
                        bench_sim_usage(stderr);
                        return 2;
                }
        }
        if (!cfg.daemon_path || !cfg.sim_path) {
                bench_sim_usage(stderr);
                return 2;
        }
        if (bench_begin("cudackpt-bench-sim", &workdir) < 0)
                return 1;
        long maxc = bench_sim_max_conns(&cfg);
        snprintf(config_path, sizeof(config_path), "%s/config.json", workdir);
        if (bench_sim_write_config(&cfg, config_path, maxc) < 0)
                return 1;
        if (cfg.run_syscall && bench_sim_syscall(&cfg, workdir) < 0)
                failed = 1;
        if (!(cfg.run_getstate || cfg.run_rss || cfg.run_watchers || cfg.run_storm || cfg.run_spin))
                return bench_sim_finish(&cfg, workdir, failed);
        bench_daemon_opts o = {
                .daemon_path = cfg.daemon_path,
                .driver_path = cfg.sim_path,
                .config_path = config_path,
                .log_level = cfg.log_level,
                .workdir = workdir,
                .ready_timeout_ms = 30000,
        };
        if ((r = bench_daemon_start(&o, &d)) < 0) {
                printf("ERROR: cudackptd did not become ready (%s); log: %s/cudackptd.log\n", strerror(-r), workdir);
                return 1;
        }
        long rss_idle = bench_vmrss_kib(d.pid);
        /* Each part runs when the set-up worked. */
        if (bench_sim_targets(&cfg, &d, pids, &started) < 0)
                failed = 1;
        else if (bench_sim_parts(&cfg, &d, pids, rss_idle, workdir))
                failed = 1;
        for (long i = 0; i < started; i++)
                bench_kill(pids[i]);
        int status = bench_daemon_stop(&d, 10000);
        if (status != 0) {
                printf("ERROR: cudackptd exit status %d after SIGTERM (want 0)\n", status);
                failed = 1;
        }
        return bench_sim_finish(&cfg, workdir, failed);
}
