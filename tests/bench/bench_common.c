/* bench_common.c: helpers shared by the cudackptd benchmarks (see
 * bench_common.h): statistics, daemon start with sd_notify, spawning and
 * timing child processes, resident memory. */
#include "bench_common.h"
#include "sim_daemon.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

uint64_t bench_now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int bench_cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted v. */
static double bench_rank(const double *v, size_t n, double p)
{
        size_t k = (size_t)(p / 100.0 * (double)n + 0.999999);
        if (k < 1)
                k = 1;
        if (k > n)
                k = n;
        return v[k - 1];
}

void bench_stats_compute(double *samples, size_t n, bench_stats *ret_stats)
{
        bench_stats st;
        memset(&st, 0, sizeof(st));
        if (n > 0) {
                double sum = 0;
                qsort(samples, n, sizeof(*samples), bench_cmp_double);
                for (size_t i = 0; i < n; i++)
                        sum += samples[i];
                st.n = n;
                st.min = samples[0];
                st.max = samples[n - 1];
                st.mean = sum / (double)n;
                st.p50 = n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
                st.p90 = bench_rank(samples, n, 90);
                st.p99 = bench_rank(samples, n, 99);
        }
        *ret_stats = st;
}

double bench_median(double *v, size_t n)
{
        bench_stats st;
        bench_stats_compute(v, n, &st);
        return st.p50;
}

int bench_samples_add(bench_samples *s, double x)
{
        if (s->n == s->cap) {
                size_t cap = s->cap ? s->cap * 2 : 1024;
                double *v = realloc(s->v, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                s->v = v;
                s->cap = cap;
        }
        s->v[s->n++] = x;
        return 0;
}

void bench_samples_free(bench_samples *s)
{
        free(s->v);
        s->v = NULL;
        s->n = s->cap = 0;
}

int bench_make_workdir(const char *prefix, char **ret_path)
{
        const char *tmp = getenv("TMPDIR");
        char *path = NULL;
        if (!tmp || !*tmp)
                tmp = "/tmp";
        if (asprintf(&path, "%s/%s.XXXXXX", tmp, prefix) < 0)
                return -ENOMEM;
        if (!mkdtemp(path)) {
                int r = -errno;
                free(path);
                return r;
        }
        /* Sockets inside must be reachable by the uid the test may drop to. */
        if (chmod(path, 0755) < 0) {
                int r = -errno;
                rmdir(path);
                free(path);
                return r;
        }
        *ret_path = path;
        return 0;
}

int bench_begin(const char *prog, char **ret_workdir)
{
        int r;

        setvbuf(stdout, NULL, _IOLBF, 0);
        signal(SIGPIPE, SIG_IGN);
        r = bench_make_workdir(prog, ret_workdir);
        if (r < 0)
                fprintf(stderr, "%s: work directory: %s\n", prog, strerror(-r));
        return r;
}

void bench_remove_workdir(const char *path)
{
        DIR *d = opendir(path);
        if (d) {
                struct dirent *e;
                while ((e = readdir(d))) {
                        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                                continue;
                        unlinkat(dirfd(d), e->d_name, 0);
                }
                closedir(d);
        }
        rmdir(path);
}

/* environ plus env_add (which wins), built before fork so that the child
 * only calls async-signal-safe functions. */
static char **bench_build_env(const char *const *env_add)
{
        size_t n = 0, m = 0, k = 0;
        while (environ[n])
                n++;
        while (env_add && env_add[m])
                m++;
        char **env = calloc(n + m + 1, sizeof(*env));
        if (!env)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                int overridden = 0;
                for (size_t j = 0; j < m; j++) {
                        const char *eq = strchr(env_add[j], '=');
                        size_t len = eq ? (size_t)(eq - env_add[j]) + 1 : strlen(env_add[j]);
                        if (strncmp(environ[i], env_add[j], len) == 0)
                                overridden = 1;
                }
                if (!overridden)
                        env[k++] = environ[i];
        }
        for (size_t j = 0; j < m; j++)
                env[k++] = (char *)env_add[j];
        env[k] = NULL;
        return env;
}

int bench_spawn(char *const argv[], const char *const *env_add, const char *out_path, int ready_fd,
                pid_t *ret_pid)
{
        char **env = bench_build_env(env_add);
        if (!env)
                return -ENOMEM;
        int out = open(out_path ? out_path : "/dev/null", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (out < 0) {
                int r = -errno;
                free(env);
                return r;
        }
        /* The child holds the write end of a close-on-exec pipe: EOF means
         * it has exec'd (so /proc/PID/environ is the new one), an int
         * before EOF is exec's errno. */
        int sync[2];
        if (pipe2(sync, O_CLOEXEC) < 0) {
                int r = -errno;
                close(out);
                free(env);
                return r;
        }
        pid_t parent = getpid();
        pid_t pid = fork();
        if (pid < 0) {
                int r = -errno;
                close(sync[0]);
                close(sync[1]);
                close(out);
                free(env);
                return r;
        }
        if (pid == 0) {
                /* Targets hold GPU memory: they must not outlive a crashed benchmark. */
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(127);
                int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (devnull >= 0)
                        dup2(devnull, STDIN_FILENO);
                dup2(out, STDOUT_FILENO);
                dup2(out, STDERR_FILENO);
                int sync_w = sync[1];
                /* fd 3 is about to become ready_fd: keep the sync pipe elsewhere. */
                if (ready_fd >= 0 && sync_w == 3)
                        sync_w = fcntl(sync_w, F_DUPFD_CLOEXEC, 4);
                if (ready_fd >= 0) {
                        if (ready_fd == 3)
                                fcntl(3, F_SETFD, 0);
                        else
                                dup2(ready_fd, 3);
                }
                signal(SIGPIPE, SIG_DFL);
                execvpe(argv[0], argv, env);
                int e = errno;
                if (write(sync_w, &e, sizeof(e)) < 0)
                        _exit(126);
                _exit(127);
        }
        close(sync[1]);
        close(out);
        free(env);
        int child_errno = 0;
        ssize_t got;
        while ((got = read(sync[0], &child_errno, sizeof(child_errno))) < 0 && errno == EINTR)
                ;
        close(sync[0]);
        if (got == (ssize_t)sizeof(child_errno)) {
                while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                return child_errno > 0 ? -child_errno : -ENOEXEC;
        }
        *ret_pid = pid;
        return 0;
}

int bench_wait_ready(int fd, int timeout_ms, char *buf, size_t len)
{
        size_t used = 0;
        uint64_t deadline = bench_now_ns() + (uint64_t)timeout_ms * 1000000ULL;
        int r = -ETIMEDOUT;
        if (len == 0) {
                close(fd);
                return -EINVAL;
        }
        buf[0] = '\0';
        for (;;) {
                uint64_t now = bench_now_ns();
                if (now >= deadline)
                        break;
                struct pollfd p = {.fd = fd, .events = POLLIN};
                int n = poll(&p, 1, (int)((deadline - now) / 1000000ULL) + 1);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                ssize_t got = read(fd, buf + used, len - 1 - used);
                if (got < 0 && errno == EINTR)
                        continue;
                if (got <= 0) {
                        r = -ECHILD; /* EOF: the child exited (or closed fd 3) without "ready" */
                        break;
                }
                used += (size_t)got;
                buf[used] = '\0';
                if (strchr(buf, '\n') || used == len - 1) {
                        r = strncmp(buf, "ready", 5) == 0 ? 0 : -EPROTO;
                        break;
                }
        }
        close(fd);
        return r;
}

void bench_kill(pid_t pid)
{
        if (pid <= 0)
                return;
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
}

int bench_run_timed(char *const argv[], const char *const *env_add, uint64_t *ret_ns)
{
        int status;
        pid_t pid;
        uint64_t t0 = bench_now_ns();
        int r = bench_spawn(argv, env_add, NULL, -1, &pid);
        if (r < 0)
                return r;
        while (waitpid(pid, &status, 0) < 0) {
                if (errno != EINTR)
                        return -errno;
        }
        *ret_ns = bench_now_ns() - t0;
        if (WIFEXITED(status))
                return WEXITSTATUS(status);
        return 128 + WTERMSIG(status);
}

static int bench_pidfd_open(pid_t pid)
{
        return (int)syscall(SYS_pidfd_open, pid, 0);
}

int bench_daemon_start(const bench_daemon_opts *o, bench_daemon *ret_daemon)
{
        bench_daemon d;
        char notify_path[256], notify_env[300];
        const char *env_add[34];
        struct test_daemon_argv argv;
        int r, nfd, pidfd;
        size_t k = 0;

        memset(&d, 0, sizeof(d));
        if (snprintf(d.socket_path, sizeof(d.socket_path), "%s/cudackptd.sock", o->workdir) >=
                    (int)sizeof(d.socket_path) ||
            snprintf(notify_path, sizeof(notify_path), "%s/notify.sock", o->workdir) >=
                    (int)sizeof(notify_path) ||
            snprintf(d.log_path, sizeof(d.log_path), "%s/cudackptd.log", o->workdir) >=
                    (int)sizeof(d.log_path))
                return -ENAMETOOLONG;
        r = test_daemon_argv(&(struct test_daemon_cmd){ .daemon = o->daemon_path,
                                                        .socket = d.socket_path,
                                                        .driver = o->driver_path,
                                                        .config = o->config_path,
                                                        .log_level = o->log_level },
                             &argv);
        if (r < 0)
                return r;

        /* The daemon tells us it is ready on a datagram socket we own. */
        nfd = test_daemon_notify_open(notify_path);
        if (nfd < 0)
                return nfd;
        snprintf(notify_env, sizeof(notify_env), "NOTIFY_SOCKET=%s", notify_path);
        env_add[k++] = notify_env;
        for (size_t i = 0; o->env_add && o->env_add[i] && k < 33; i++)
                env_add[k++] = o->env_add[i];
        env_add[k] = NULL;

        r = bench_spawn(argv.argv, env_add, d.log_path, -1, &d.pid);
        if (r < 0) {
                close(nfd);
                return r;
        }
        pidfd = bench_pidfd_open(d.pid);
        r = test_daemon_await_ready(nfd, pidfd, o->ready_timeout_ms);
        if (pidfd >= 0)
                close(pidfd);
        close(nfd);
        unlink(notify_path);
        if (r < 0) {
                bench_kill(d.pid);
                return r;
        }
        *ret_daemon = d;
        return 0;
}

int bench_daemon_stop(bench_daemon *d, int timeout_ms)
{
        int status = 0;
        if (d->pid <= 0)
                return -ESRCH;
        int pidfd = bench_pidfd_open(d->pid);
        kill(d->pid, SIGTERM);
        if (pidfd >= 0) {
                struct pollfd p = {.fd = pidfd, .events = POLLIN};
                int n;
                while ((n = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
                        ;
                if (n == 0)
                        kill(d->pid, SIGKILL);
                close(pidfd);
        }
        while (waitpid(d->pid, &status, 0) < 0) {
                if (errno != EINTR)
                        return -errno;
        }
        d->pid = 0;
        return status;
}

long bench_vmrss_kib(pid_t pid)
{
        char path[64], line[256];
        long kib = -ENOENT;
        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        while (fgets(line, sizeof(line), f)) {
                if (strncmp(line, "VmRSS:", 6) == 0) {
                        kib = strtol(line + 6, NULL, 10);
                        break;
                }
        }
        fclose(f);
        return kib;
}

long bench_raise_nofile(long want)
{
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return -errno;
        rlim_t target = (rlim_t)want;
        if (rl.rlim_max != RLIM_INFINITY && target > rl.rlim_max)
                target = rl.rlim_max;
        if (rl.rlim_cur < target) {
                rl.rlim_cur = target;
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                        return -errno;
        }
        return (long)rl.rlim_cur;
}

int bench_parse_opt(const char *a, const bench_opt *opts, size_t n, void *cfg)
{
        for (size_t k = 0; k < n; k++) {
                size_t len = strlen(opts[k].prefix);
                if (strncmp(a, opts[k].prefix, len) != 0)
                        continue;
                if (!opts[k].number) {
                        *(const char **)((char *)cfg + opts[k].field) = a + len;
                        return 0;
                }
                return bench_parse_long(a + len, opts[k].min, opts[k].max, (long *)((char *)cfg + opts[k].field));
        }
        return -ENOENT;
}

int bench_parse_long(const char *s, long min, long max, long *ret)
{
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || end == s || *end != '\0' || v < min || v > max)
                return -EINVAL;
        *ret = v;
        return 0;
}

int bench_parse_list(const char *s, long *out, int max)
{
        int n = 0;
        const char *p = s;
        while (*p) {
                char *end;
                errno = 0;
                long v = strtol(p, &end, 10);
                if (errno || end == p || v <= 0 || n >= max)
                        return -EINVAL;
                out[n++] = v;
                if (*end == ',' || *end == ' ')
                        end++;
                else if (*end != '\0')
                        return -EINVAL;
                p = end;
        }
        return n > 0 ? n : -EINVAL;
}
