/* bench_syscall.c: getppid() with and without the daemon (bench_syscall.h). */
#include "bench_syscall.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"

#define BENCH_SYSCALL_MAX_ROUNDS 100

enum { COND_STOPPED, COND_DEFAULT, COND_TRACEPOINT, N_COND };
static const char *const cond_name[N_COND] = { "stopped", "default", "tracepoint" };
/* The daemon's configuration in each condition (none: no daemon). */
static const char *const cond_config[N_COND] = {
        NULL,
        "{}\n",
        "{\"process_index_tracepoint\": true}\n",
};

/* Nanoseconds per getppid() over one block of calls. */
static double bench_syscall_block(long calls)
{
        uint64_t t0 = bench_now_ns();
        for (long i = 0; i < calls; i++)
                (void)syscall(SYS_getppid);
        return (double)(bench_now_ns() - t0) / (double)calls;
}

/* How the daemon's index sees mmaps, from its log line: "fentry",
 * "tracepoint", "none" (no index), or NULL before it has said. */
static const char *bench_syscall_hook(const char *log_path)
{
        char line[1024];
        const char *hook = NULL;
        FILE *f = fopen(log_path, "re");

        if (!f)
                return NULL;
        while (!hook && fgets(line, sizeof(line), f)) {
                if (strstr(line, "No process index"))
                        hook = "none";
                else if (strstr(line, "mmaps seen by fentry"))
                        hook = "fentry";
                else if (strstr(line, "mmaps seen by tracepoint"))
                        hook = "tracepoint";
        }
        fclose(f);
        return hook;
}

/* Starts the daemon of condition c and waits (10 s at most) until it has
 * opened its index or given up on it. */
static int bench_syscall_start(const bench_syscall_cfg *cfg, int c, bench_daemon *d, const char **ret_hook)
{
        char config[512], log[512];
        FILE *f;
        int r;

        snprintf(config, sizeof(config), "%s/syscall-%s.json", cfg->workdir, cond_name[c]);
        snprintf(log, sizeof(log), "%s/cudackptd.log", cfg->workdir);
        if (!(f = fopen(config, "we")) || fputs(cond_config[c], f) < 0 || fclose(f) != 0) {
                printf("ERROR: cannot write %s\n", config);
                return -EIO;
        }
        (void)unlink(log); /* the daemon appends: one start's log only */
        bench_daemon_opts o = {
                .daemon_path = cfg->daemon_path,
                .driver_path = cfg->sim_path,
                .config_path = config,
                .log_level = "info",
                .workdir = cfg->workdir,
                .ready_timeout_ms = 30000,
        };
        if ((r = bench_daemon_start(&o, d)) < 0) {
                printf("ERROR: cudackptd (%s) did not become ready: %s\n", cond_name[c], strerror(-r));
                return -EIO;
        }
        for (uint64_t t0 = bench_now_ns(); bench_now_ns() - t0 < 10000000000ull;) {
                if ((*ret_hook = bench_syscall_hook(d->log_path)))
                        return 0;
                nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
        }
        printf("ERROR: cudackptd (%s) said nothing of its process index within 10 s (log %s)\n", cond_name[c],
               d->log_path);
        (void)bench_daemon_stop(d, 10000);
        return -EIO;
}

/* One block of condition c: the daemon started, the calls, the daemon stopped. */
static int bench_syscall_one(const bench_syscall_cfg *cfg, int c, double *ret_ns, const char **ret_hook)
{
        bench_daemon d;
        int status;

        *ret_hook = "-";
        if (c == COND_STOPPED) {
                *ret_ns = bench_syscall_block(cfg->calls);
                return 0;
        }
        if (bench_syscall_start(cfg, c, &d, ret_hook) < 0)
                return -EIO;
        *ret_ns = bench_syscall_block(cfg->calls);
        status = bench_daemon_stop(&d, 10000);
        if (status != 0) {
                printf("ERROR: cudackptd (%s) exit status %d after SIGTERM (want 0)\n", cond_name[c], status);
                return -EIO;
        }
        return 0;
}

int bench_syscall_run(const bench_syscall_cfg *cfg)
{
        double ns[N_COND][BENCH_SYSCALL_MAX_ROUNDS], med[N_COND], best[N_COND];
        const char *hook[N_COND] = { "-", "-", "-" };
        long rounds = cfg->rounds < BENCH_SYSCALL_MAX_ROUNDS ? cfg->rounds : BENCH_SYSCALL_MAX_ROUNDS;

        printf("== System calls of a process the daemon does not serve: getppid(), %ld rounds of %ld calls ==\n",
               rounds, cfg->calls);
        (void)bench_syscall_block(cfg->calls); /* warm up */
        for (long k = 0; k < rounds; k++) {
                for (int c = 0; c < N_COND; c++) {
                        const char *h;
                        if (bench_syscall_one(cfg, c, &ns[c][k], &h) < 0)
                                return -EIO;
                        if (k > 0 && strcmp(h, hook[c]) != 0) {
                                printf("ERROR: cudackptd (%s) saw mmaps by %s, before by %s\n", cond_name[c], h,
                                       hook[c]);
                                return -EIO;
                        }
                        hook[c] = h;
                }
        }
        printf("  %-12s %-12s %10s %10s %12s\n", "daemon", "index hook", "median ns", "best ns", "vs stopped");
        for (int c = 0; c < N_COND; c++) {
                best[c] = ns[c][0];
                for (long k = 1; k < rounds; k++)
                        if (ns[c][k] < best[c])
                                best[c] = ns[c][k];
                med[c] = bench_median(ns[c], (size_t)rounds);
        }
        for (int c = 0; c < N_COND; c++) {
                printf("  %-12s %-12s %10.1f %10.1f %+11.1f\n", c == COND_STOPPED ? "stopped" : cond_name[c],
                       hook[c], med[c], best[c], med[c] - med[COND_STOPPED]);
                printf("RESULT bench=sim-syscall cond=%s hook=%s calls=%ld rounds=%ld median_ns=%.1f best_ns=%.1f "
                       "delta_ns=%.1f\n",
                       cond_name[c], hook[c], cfg->calls, rounds, med[c], best[c], med[c] - med[COND_STOPPED]);
        }
        return 0;
}
