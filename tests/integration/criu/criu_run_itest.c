/* criu_run_itest.c: the helpers of the suites of jobs started with
 * cudackptctl run (test_criu_run.c, test_criu_move.c): see
 * criu_run_itest.h. */
#include "criu_run_itest.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cJSON.h>

/* cudackptctl's environment for x with the names kept in x's directory. */
const char *const *crun_env(struct citest_ctx *x)
{
        const char *const *base = cjob_env(x, NULL);
        const char **env = itest_keep(calloc(32, sizeof(char *)));
        size_t n = 0;
        ck_assert(env);
        for (; base[n]; n++)
                env[n] = base[n];
        env[n++] = itest_strdupf("CUDACKPT_RUN_DIR=%s/runs", x->d->dir);
        env[n] = NULL;
        return env;
}

const char *const *crun_env_plus(struct citest_ctx *x, const char *extra)
{
        const char *const *base = crun_env(x);
        const char **env = itest_keep(calloc(40, sizeof(char *)));
        size_t n = 0;
        ck_assert(env);
        for (; base[n] && n < 38; n++)
                env[n] = base[n];
        env[n++] = extra;
        return env;
}

const char *crun_cgroup2(struct citest_ctx *x, const char *what)
{
        char *mnt = itest_strdupf("%s/cg2", x->d->dir);
        ck_assert_int_eq(mkdir(mnt, 0755), 0);
        if (mount("none", mnt, "cgroup2", 0, NULL) == 0)
                return mnt;
        fprintf(stderr, "%s skipped: cannot mount cgroup2: %s\n", what, strerror(errno));
        return NULL;
}

/* `cudackptctl run ARGS` started with env, fd 3 the write end of pipe_w,
 * its output into out; its pid. */
pid_t crun_start(const char *const *env, const char *out, int pipe_w, const char *const *args)
{
        const char *argv[24];
        cjob_argv(argv, 24, "run", args);
        pid_t c = fork();
        ck_assert_int_ge(c, 0);
        if (c == 0) {
                int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
                int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                if (setsid() < 0 || devnull < 0 || fd < 0 || dup2(devnull, 0) < 0 || dup2(fd, 1) < 0 ||
                    dup2(fd, 2) < 0 || chdir("/") < 0 || (pipe_w >= 0 && dup2(pipe_w, 3) < 0))
                        _exit(127);
                close_range(pipe_w >= 0 ? 4 : 3, ~0u, 0);
                execve(argv[0], (char *const *)argv, (char *const *)env);
                _exit(127);
        }
        return c;
}

static void note_init(pid_t pid);

pid_t crun_spawn_fds(const char *const *env, const char *out, const char *verb, const char *const *args,
                     const int *fds, size_t n)
{
        const char *argv[32];
        cjob_argv(argv, 32, verb, args);
        pid_t c = fork();
        ck_assert_int_ge(c, 0);
        if (c == 0) {
                int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
                int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600), high[8];
                if (n > 8 || setsid() < 0 || devnull < 0 || fd < 0 || dup2(devnull, 0) < 0 || dup2(fd, 1) < 0 ||
                    dup2(fd, 2) < 0 || chdir("/") < 0)
                        _exit(127);
                /* Out of the way first: a target may be another's source. */
                for (size_t i = 0; i < n; i++)
                        if ((high[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 100)) < 0)
                                _exit(127);
                for (size_t i = 0; i < n; i++)
                        if (dup2(high[i], 3 + (int)i) < 0)
                                _exit(127);
                close_range(3 + (unsigned)n, ~0u, 0);
                execve(argv[0], (char *const *)argv, (char *const *)env);
                _exit(127);
        }
        return c;
}

const char *crun_read_all(int fd)
{
        char buf[4096];
        size_t len = 0;
        double deadline = itest_now_ms() + AWAIT_MS;
        for (;;) {
                struct pollfd pf = { .fd = fd, .events = POLLIN };
                int left = (int)(deadline - itest_now_ms());
                ck_assert_msg(left > 0 && poll(&pf, 1, left) == 1, "no EOF on fd %d within %d ms (so far: %.*s)", fd,
                              AWAIT_MS, (int)len, buf);
                ssize_t k = read(fd, buf + len, sizeof(buf) - 1 - len);
                ck_assert_int_ge(k, 0);
                if (k == 0)
                        break;
                len += (size_t)k;
                ck_assert(len < sizeof(buf) - 1);
        }
        buf[len] = '\0';
        return itest_strdupf("%s", buf);
}

pid_t crun_ready_pid(const char *line, const char *name, uint64_t *ret_start)
{
        size_t len = strlen(line);
        ck_assert_msg(len > 0 && line[len - 1] == '\n' && !strchr(line, '\n')[1], "not one line: \"%s\"", line);
        cJSON *o = itest_keep_json(cJSON_Parse(line));
        ck_assert_msg(o, "the ready line is not JSON: %s", line);
        const cJSON *n = cJSON_GetObjectItem(o, "name"), *pid = cJSON_GetObjectItem(o, "pid"),
                    *st = cJSON_GetObjectItem(o, "start_time");
        ck_assert_msg(cJSON_IsString(n) && strcmp(n->valuestring, name) == 0 && cJSON_IsNumber(pid) &&
                      cJSON_IsNumber(st) && cJSON_GetArraySize(o) == 3, "the ready line: %s", line);
        note_init((pid_t)pid->valueint);
        /* Field 22 of /proc/PID/stat, after the command's ')'. */
        char *stat = citest_slurp(itest_strdupf("/proc/%d/stat", pid->valueint)), *p = stat ? strrchr(stat, ')') : NULL;
        ck_assert_msg(p, "the ready line's pid %d is not running", pid->valueint);
        for (int field = 2; p && field < 22; field++)
                p = strchr(p + 1, ' ');
        ck_assert(p);
        uint64_t start = strtoull(p + 1, NULL, 10);
        ck_assert_msg(start == (uint64_t)st->valuedouble, "pid %d started at %llu, the ready line says %.0f",
                      pid->valueint, (unsigned long long)start, st->valuedouble);
        if (ret_start)
                *ret_start = start;
        return (pid_t)pid->valueint;
}

/* The log of a user's job NAME in x's directory (DIR/logs, made: a
 * directory of root's that only root may write, as --output wants). */
const char *crun_log(struct citest_ctx *x, const char *name)
{
        const char *dir = itest_strdupf("%s/logs", x->d->dir);
        ck_assert(mkdir(dir, 0755) == 0 || errno == EEXIST);
        return itest_strdupf("%s/%s.log", dir, name);
}

/* Every init this test saw (a pidfd), ended when it exits (a failed
 * check too): a job's processes watch its init, not the test. */
static int seen_inits[16];
static size_t n_seen_inits;

static void end_inits(void)
{
        for (size_t i = 0; i < n_seen_inits; i++)
                syscall(SYS_pidfd_send_signal, seen_inits[i], SIGKILL, NULL, 0);
}

static void note_init(pid_t pid)
{
        int fd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (n_seen_inits == 0)
                atexit(end_inits);
        if (fd >= 0 && n_seen_inits < sizeof(seen_inits) / sizeof(seen_inits[0]))
                seen_inits[n_seen_inits++] = fd;
        else if (fd >= 0)
                close(fd);
}

/* The job's init as its name's record says (pid and start time). */
pid_t crun_init_of(struct citest_ctx *x, const char *name, uint64_t *ret_start)
{
        const char *path = itest_strdupf("%s/runs/%s", x->d->dir, name);
        double deadline = itest_now_ms() + AWAIT_MS;
        char *text;
        while (!(text = citest_slurp(path))) {
                ck_assert_msg(itest_now_ms() < deadline, "no record %s within %d ms", path, AWAIT_MS);
                poll(NULL, 0, 5);
        }
        cJSON *o = itest_keep_json(cJSON_Parse(text));
        ck_assert_msg(o, "the record is not JSON: %s", text);
        const cJSON *pid = cJSON_GetObjectItem(o, "init_pid"), *st = cJSON_GetObjectItem(o, "init_start_time");
        ck_assert(cJSON_IsNumber(pid) && cJSON_IsNumber(st));
        if (ret_start)
                *ret_start = (uint64_t)st->valuedouble;
        note_init((pid_t)pid->valueint);
        return (pid_t)pid->valueint;
}

/* pid's pids from our namespace down (NSpid); how many. */
int crun_ns_pids(pid_t pid, int *v, int max)
{
        char *text = citest_slurp(itest_strdupf("/proc/%d/status", (int)pid));
        ck_assert_msg(text, "pid %d is gone", (int)pid);
        char *p = strstr(text, "\nNSpid:");
        ck_assert(p);
        p += 7;
        int n = 0;
        for (char *end; n < max; p = end) {
                long x = strtol(p, &end, 10);
                if (end == p)
                        break;
                v[n++] = (int)x;
        }
        return n;
}

/* The host pids of init and every descendant (init first), by parent. */
size_t crun_job_pids(pid_t init, pid_t *out, size_t max)
{
        size_t n = 0;
        out[n++] = init;
        for (size_t i = 0; i < n; i++) {
                char *text = citest_slurp(itest_strdupf("/proc/%d/task/%d/children", (int)out[i], (int)out[i]));
                for (char *p = text, *end; p && n < max; p = end) {
                        long x = strtol(p, &end, 10);
                        if (end == p)
                                break;
                        out[n++] = (pid_t)x;
                }
        }
        return n;
}

/* The target whose pid in the namespace is ns saw its own process as
 * /proc/<ns> at its N-th check ("proc NS N own" in x's result, awaited;
 * "other" fails at once). */
void crun_check_proc_ns(struct citest_ctx *x, int ns, unsigned long n)
{
        const char *want = itest_strdupf("proc %d %lu own", ns, n), *bad = itest_strdupf("proc %d %lu other", ns, n);
        double deadline = itest_now_ms() + AWAIT_MS;
        for (;;) {
                char *text = citest_slurp_raw(x->result);
                bool found = text && citest_has_line(text, want), other = text && citest_has_line(text, bad);
                free(text);
                ck_assert_msg(!other, "the job's process %d (in its namespace) sees another process as /proc/%d "
                              "(the node's /proc) at check %lu", ns, ns, n);
                if (found)
                        return;
                ck_assert_msg(itest_now_ms() < deadline, "no \"%s\" in %s within %d ms", want, x->result,
                              AWAIT_MS);
                poll(NULL, 0, 5);
        }
}

/* The target whose pid in the namespace is ns: SIGUSR1 to host, and its
 * "ok NS N" awaited. */
void crun_check_memory_ns(struct citest_ctx *x, pid_t host, int ns, unsigned long n)
{
        ck_assert_int_eq(kill(host, SIGUSR1), 0);
        const char *want = itest_strdupf("ok %d %lu", ns, n);
        double deadline = itest_now_ms() + AWAIT_MS;
        for (;;) {
                char *text = citest_slurp_raw(x->result);
                bool found = text && citest_has_line(text, want);
                free(text);
                if (found)
                        return;
                ck_assert_msg(itest_now_ms() < deadline, "no \"%s\" in %s within %d ms", want, x->result,
                              AWAIT_MS);
                poll(NULL, 0, 5);
        }
}

/* A process that holds pid (clone3 with set_tid) and waits to be killed. */
pid_t crun_hold_pid(pid_t pid)
{
        struct clone_args ca = { .exit_signal = SIGCHLD, .set_tid = (uint64_t)(uintptr_t)&pid, .set_tid_size = 1 };
        long c = syscall(SYS_clone3, &ca, sizeof(ca));
        ck_assert_msg(c >= 0, "clone3 with pid %d: %s", (int)pid, strerror(errno));
        if (c == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                for (;;)
                        pause();
        }
        ck_assert_int_eq(c, pid);
        return (pid_t)c;
}

/* What the job reported on p (lines of its targets' pids; a pipe it
 * closes) or, with log, in that file: its text once every target has. */
static const char *await_reports(int p, const char *log)
{
        static char buf[128];
        size_t len = 0, lines = 0;
        struct pollfd pf = { .fd = p, .events = POLLIN };
        double deadline = itest_now_ms() + AWAIT_MS;
        while (log && lines < JOB_PROCS - 1) {
                ck_assert_msg(itest_now_ms() < deadline, "the job did not report ready in %s within %d ms", log,
                              AWAIT_MS);
                poll(NULL, 0, 5);
                char *text = citest_slurp_raw(log);
                lines = 0;
                for (char *c = text; c && *c; c++)
                        lines += *c == '\n';
                snprintf(buf, sizeof(buf), "%s", text ? text : "");
                free(text);
        }
        for (ssize_t k = 1; !log && k > 0 && lines < JOB_PROCS - 1 && len < sizeof(buf) - 1;) {
                ck_assert_msg(poll(&pf, 1, AWAIT_MS) == 1, "the job did not report ready within %d ms", AWAIT_MS);
                k = read(p, buf + len, sizeof(buf) - 1 - len);
                for (ssize_t i = 0; i < k; i++)
                        lines += buf[len + (size_t)i] == '\n';
                len += k > 0 ? (size_t)k : 0;
        }
        if (!log)
                buf[len] = '\0';
        return buf;
}

/* Starts the job NAME (criu_target tree) with cgroup (run's --no-cgroup
 * or --cgroup-parent=DIR) and user (--user=..., or NULL: root, the target
 * and the simulator run from the build tree); its run command in *ret_run,
 * the host pids (init first) in pids, each one's pid in the namespace in
 * ns; sim_env one more "K=V" of the targets' (NULL: none).  A user's job
 * has no fd 3 of the run command's: it is given the log crun_log() names
 * (--output), and its targets report there (sh's 3>&1). */
void crun_start_job(struct citest_ctx *x, const char *const *env, const char *name, const char *cgroup,
                    const char *user, const char *sim_env, pid_t *ret_run, pid_t *pids, int *ns)
{
        int p[2];
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        /* Copies another uid may run: the build tree may be closed to it. */
        const char *target = citest_need_env("CUDACKPT_TEST_CRIU_TARGET"), *sim = citest_need_env("CUDACKPT_TEST_SIM");
        const char *args[24], *log = user ? crun_log(x, name) : NULL;
        size_t n = 0;
        if (user) {
                target = itest_stage_exe(x->d, target, NULL);
                sim = itest_stage_exe(x->d, sim, NULL);
        }
        args[n++] = "--name";
        args[n++] = name;
        args[n++] = cgroup;
        if (user) {
                args[n++] = user;
                args[n++] = itest_strdupf("--output=%s", log);
        }
        args[n++] = "--";
        if (user) {
                args[n++] = "/bin/sh";
                args[n++] = "-c";
                args[n++] = "exec \"$@\" 3>&1";
                args[n++] = "sh";
        }
        const char *const tail[] = { "/usr/bin/env", "CUDACKPT_SIM=1", SIM_STATE_SLOT, sim_env, target, "tree", "1",
                                     x->result, TARGET_MIB, sim };
        for (size_t i = 0; i < sizeof(tail) / sizeof(tail[0]); i++)
                if (tail[i])
                        args[n++] = tail[i];
        args[n] = NULL;
        *ret_run = crun_start(env, itest_strdupf("%s/run-%s.out", x->d->dir, name), p[1], args);
        close(p[1]);
        /* Every target writes its pid and closes fd 3 (which the run
         * command holds too: three lines, not EOF). */
        const char *buf = await_reports(p[0], log);
        close(p[0]);
        pid_t init = crun_init_of(x, name, NULL);
        ck_assert_int_eq(crun_job_pids(init, pids, JOB_PROCS + 1), JOB_PROCS);
        for (int i = 0; i < JOB_PROCS; i++) {
                int v[4];
                ck_assert_int_eq(crun_ns_pids(pids[i], v, 4), 2);
                ns[i] = v[1];
                /* Each target's own report names it as the namespace knows it. */
                ck_assert_msg(i == 0 ? ns[i] == 1 : strstr(buf, itest_strdupf("%d\n", ns[i])) != NULL,
                              "pid %d is %d in the namespace; the job said \"%s\"", (int)pids[i], ns[i], buf);
        }
}

/* path's text holds line, awaited. */
void crun_await_text(const char *path, const char *line)
{
        double deadline = itest_now_ms() + AWAIT_MS;
        for (;;) {
                char *text = citest_slurp_raw(path);
                bool found = text && strstr(text, line);
                free(text);
                if (found)
                        return;
                ck_assert_msg(itest_now_ms() < deadline, "no \"%s\" in %s within %d ms", line, path, AWAIT_MS);
                poll(NULL, 0, 5);
        }
}
