/* bench_gpu_exec.c: the exec benchmark (see bench_gpu.c). */
#include "bench_gpu.h"

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

int bench_gpu_exec(const bench_gpu_cfg *cfg)
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
