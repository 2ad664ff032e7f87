/* test_criu.c: CRIU's CUDA plugin, routed through cudackptd.
 *
 * CRIU (4.x) with its CUDA plugin runs "cuda-checkpoint" from $PATH for
 * every process it dumps or restores.  Here that is a symlink to cudackptctl
 * (its drop-in mode, client/compat.c) in a directory put first on criu's
 * PATH, talking to the test's daemon on the simulator through
 * CUDACKPT_SOCKET; CRIU_FAULT=138 turns the plugin on without a GPU.  The
 * targets are criu_target processes (see there) that CRIU really dumps,
 * kills and restores: same pids, new start times, memory checked on
 * SIGUSR1.  The daemon's audit lines (its log) must show the plugin's
 * Lock, Checkpoint, Restore and Unlock, so a criu that used some other
 * cuda-checkpoint, or none, fails.
 *
 * The plugin asks for the restore thread id while every thread of the
 * target is ptrace-stopped, as the real driver's callers do; an operation
 * that waits for the target there hangs the dump.  Every criu run is
 * bounded (CRIU_TIMEOUT_MS): past it criu and its children are killed and
 * the test fails with criu's log, before Check's own timeout.
 *
 * Skips (exit 77, one line) without a criu >= 4 ($CUDACKPT_CRIU, else
 * criu on PATH), when not root, or when `criu check` fails.
 *
 * The test process is a child subreaper: it reaps what criu dump killed,
 * and criu restore -d leaves the restored tree with it. */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Bound on one criu run; a dump or restore on the simulator takes well
 * under a second. */
#define CRIU_TIMEOUT_MS 60000
/* Bound on the version and check runs in main(). */
#define CRIU_PROBE_TIMEOUT_MS 30000
/* Bound on the target's start, its end after a dump, a result line, ... */
#define AWAIT_MS 10000
/* Lines of a criu log shown with a failure. */
#define LOG_TAIL_LINES 60
/* The targets' pattern buffer. */
#define TARGET_MIB "4"
/* The simulator's per-process state slot: a one-character variable the sim
 * rewrites in the target's memory, so that a restored process (same pid,
 * new start time) is still known to be checkpointed. */
#define SIM_STATE_SLOT "CUDACKPT_SIM_STATE=r"

/* The criu to run, found by main() before the runner forks. */
static char criu_path[4096];

/* ---- running programs (no Check assertions: main() uses it too) ---------- */

struct run_result {
        int status;                  /* exit status, 128+N for signal N, -1: not run */
        bool timed_out;              /* killed after timeout_ms */
        char out[16384];             /* stdout and stderr together (the start of it) */
};

static int pidfd_open_(pid_t pid)
{
        return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* Runs argv (argv[0] a path) with env, stdin /dev/null, stdout and stderr
 * into res->out, in a process group of its own: when it runs past
 * timeout_ms, the whole group (criu and the cuda-checkpoint it started) is
 * killed.  Returns 0, or -errno when it could not be started. */
static int run_bounded(const char *const *argv, const char *const *env, int timeout_ms, struct run_result *res)
{
        int p[2];
        memset(res, 0, sizeof(*res));
        res->status = -1;
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        pid_t parent = getpid();
        pid_t pid = fork();
        if (pid < 0) {
                int e = errno;
                close(p[0]);
                close(p[1]);
                return -e;
        }
        if (pid == 0) {
                setpgid(0, 0);
                int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (devnull >= 0)
                        dup2(devnull, STDIN_FILENO);
                dup2(p[1], STDOUT_FILENO);
                dup2(p[1], STDERR_FILENO);
                /* In a group of its own, Check's kill of the test's group
                 * misses it: go with the test instead. */
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(127);
                execve(argv[0], (char *const *)argv, (char *const *)env);
                dprintf(STDERR_FILENO, "execve %s: %s\n", argv[0], strerror(errno));
                _exit(127);
        }
        close(p[1]);
        setpgid(pid, pid);
        int pidfd = pidfd_open_(pid);
        double deadline = itest_now_ms() + timeout_ms;
        size_t len = 0;
        bool pipe_open = true, exited = false;
        while (!exited) {
                struct pollfd pf[2] = { { .fd = pipe_open ? p[0] : -1, .events = POLLIN },
                                        { .fd = pidfd, .events = POLLIN } };
                double left = deadline - itest_now_ms();
                if (left <= 0)
                        break;
                int r = poll(pf, 2, (int)left + 1);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        break;
                if (pf[0].revents) {
                        char scratch[4096];
                        size_t room = sizeof(res->out) - 1 - len;
                        ssize_t k = read(p[0], room ? res->out + len : scratch, room ? room : sizeof(scratch));
                        if (k <= 0)
                                pipe_open = false;
                        else if (room)
                                len += (size_t)k;
                }
                if (pf[1].revents)
                        exited = true;
        }
        /* What it wrote before it exited.  Not to EOF: something it started
         * may still hold the pipe. */
        if (pipe_open && fcntl(p[0], F_SETFL, O_NONBLOCK) == 0) {
                ssize_t k;
                while (len < sizeof(res->out) - 1 && (k = read(p[0], res->out + len, sizeof(res->out) - 1 - len)) > 0)
                        len += (size_t)k;
        }
        res->out[len] = '\0';
        close(p[0]);
        if (pidfd >= 0)
                close(pidfd);
        if (!exited) {
                res->timed_out = true;
                kill(-pid, SIGKILL);
                kill(pid, SIGKILL);
        }
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        res->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return 0;
}

/* ---- files --------------------------------------------------------------- */

/* The whole file, NUL-terminated, to free(); NULL when it cannot be read. */
static char *slurp_raw(const char *path)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        size_t len = 0, cap = 65536;
        char *b = malloc(cap);
        ck_assert(b);
        for (;;) {
                if (cap - len < 4096) {
                        cap *= 2;
                        b = realloc(b, cap);
                        ck_assert(b);
                }
                ssize_t n = read(fd, b + len, cap - len - 1);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t)n;
        }
        close(fd);
        b[len] = '\0';
        return b;
}

/* The same, owned by the harness. */
static char *slurp(const char *path)
{
        return itest_keep(slurp_raw(path));
}

/* Whether text holds line as a whole line. */
static bool has_line(const char *text, const char *line)
{
        size_t n = strlen(line);
        for (const char *p = text; p && (p = strstr(p, line)); p++)
                if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
                        return true;
        return false;
}

static void print_log_tail(const char *what, const char *path)
{
        char *text = slurp(path);
        fprintf(stderr, "----- %s (%s), last %d lines -----\n", what, path, LOG_TAIL_LINES);
        if (!text) {
                fprintf(stderr, "(cannot read it: %s)\n", strerror(errno));
        } else {
                size_t len = strlen(text);
                const char *start = text + len;
                for (int lines = 0; start > text; start--)
                        if (start[-1] == '\n' && start != text + len && ++lines == LOG_TAIL_LINES)
                                break;
                fputs(start, stderr);
        }
        fprintf(stderr, "----- end of %s -----\n", what);
}

/* The first line of a criu log that says the CUDA plugin failed (criu
 * restore exits 0 even then), or NULL. */
static const char *plugin_failure(const char *path)
{
        char *text = slurp(path);
        ck_assert_msg(text, "cannot read %s: %s", path, strerror(errno));
        for (char *line = text; *line;) {
                char *nl = strchr(line, '\n');
                if (nl)
                        *nl = '\0';
                bool bad = (strstr(line, "RESUME_DEVICES") && strstr(line, "fail")) ||
                           (strstr(line, "cuda_plugin") && strstr(line, "Error")) ||
                           strstr(line, "hook for external plugin failed");
                if (bad)
                        return line;
                if (!nl)
                        break;
                line = nl + 1;
        }
        return NULL;
}

/* ---- the setup ----------------------------------------------------------- */

struct criu_ctx {
        struct itest_daemon *d;
        cudackpt_client *c;
        const char *bin;             /* DIR/bin, holding cuda-checkpoint */
        const char *img;             /* DIR/img, the images */
        const char *result;          /* DIR/result, the targets' reports */
        const char *env[16];         /* criu's environment */
};

static const char *need_env(const char *name)
{
        const char *v = getenv(name);
        ck_assert_msg(v && *v, "%s is not set: run the integration tests through ctest", name);
        return v;
}

static void criu_setup(struct criu_ctx *x)
{
        memset(x, 0, sizeof(*x));
        /* Orphans come to us: the targets criu dump killed (so they can be
         * reaped and their pids free for the restore), the restored trees,
         * the cuda-checkpoint of a criu killed on timeout. */
        ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
        x->d = itest_daemon_start_default();
        x->c = itest_client(x->d);

        x->bin = itest_strdupf("%s/bin", x->d->dir);
        x->img = itest_strdupf("%s/img", x->d->dir);
        x->result = itest_strdupf("%s/result", x->d->dir);
        ck_assert_int_eq(mkdir(x->bin, 0755), 0);
        ck_assert_int_eq(mkdir(x->img, 0700), 0);
        const char *ctl = need_env("CUDACKPT_TEST_CTL");
        const char *link = itest_strdupf("%s/cuda-checkpoint", x->bin);
        ck_assert_msg(symlink(ctl, link) == 0, "symlink %s: %s", link, strerror(errno));

        size_t n = 0;
        const char *path = getenv("PATH");
        x->env[n++] = itest_strdupf("PATH=%s:%s", x->bin, path && *path ? path : "/usr/sbin:/usr/bin:/sbin:/bin");
        x->env[n++] = itest_strdupf("%s=%s", CUDACKPT_SOCKET_ENV, x->d->sock);
        x->env[n++] = "CRIU_FAULT=138";
        static const char *const keep[] = { "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS", NULL };
        for (size_t i = 0; keep[i]; i++)
                if (getenv(keep[i]))
                        x->env[n++] = itest_strdupf("%s=%s", keep[i], getenv(keep[i]));
        x->env[n] = NULL;

        /* The drop-in answers as the plugin's probe wants it to. */
        const char *argv[] = { link, "-h", NULL };
        struct itest_proc_result *r = itest_keep(calloc(1, sizeof(*r)));
        ck_assert(r);
        itest_run_proc((uid_t)-1, argv, x->env, AWAIT_MS, r);
        ck_assert_msg(r->status == 0 && strstr(r->out, "--action"),
                      "%s -h: exit status %d, no --action in its output (stdout \"%s\", stderr \"%s\")", link,
                      r->status, r->out, r->err);
}

/* Starts criu_target MODE in a session of its own, with /dev/null on fds
 * 0-2 and nothing else open but the ready pipe, and reads the pids its
 * processes report (pids[0] the one started).  Returns how many. */
static size_t start_target(struct criu_ctx *x, const char *mode, pid_t *pids, size_t max)
{
        const char *exe = need_env("CUDACKPT_TEST_CRIU_TARGET");
        const char *argv[] = { "criu_target", mode, itest_strdupf("%d", (int)getpid()), x->result, TARGET_MIB,
                               NULL };
        const char *env[] = { "CUDACKPT_SIM=1", SIM_STATE_SLOT, NULL };
        int p[2];
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid_t pid = fork();
        ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
                if (setsid() < 0)
                        _exit(126);
                int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(devnull, 1) < 0 || dup2(devnull, 2) < 0 ||
                    chdir("/") < 0)
                        _exit(126);
                /* fd 3 without close-on-exec (dup2 onto itself keeps it). */
                if (p[1] == 3 ? fcntl(3, F_SETFD, 0) < 0 : dup2(p[1], 3) < 0)
                        _exit(126);
                /* Nothing of the test's (Check's files, say) for criu to dump. */
                close_range(4, ~0u, 0);
                execve(exe, (char *const *)argv, (char *const *)env);
                _exit(127);
        }
        close(p[1]);
        /* Each process writes "PID\n" and closes fd 3: EOF comes once all
         * have, and none holds the pipe any more. */
        char buf[256];
        size_t len = 0;
        double deadline = itest_now_ms() + AWAIT_MS;
        for (;;) {
                struct pollfd pf = { .fd = p[0], .events = POLLIN };
                double left = deadline - itest_now_ms();
                int r = left > 0 ? poll(&pf, 1, (int)left + 1) : 0;
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0) {
                        kill(pid, SIGKILL);
                        ck_abort_msg("criu_target %s did not report ready within %d ms (got \"%.*s\")", mode,
                                     AWAIT_MS, (int)len, buf);
                }
                ssize_t n = read(p[0], buf + len, sizeof(buf) - 1 - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t)n;
                ck_assert(len < sizeof(buf) - 1);
        }
        close(p[0]);
        buf[len] = '\0';
        size_t count = 1;
        pids[0] = pid;
        bool saw_root = false;
        for (char *save = NULL, *tok = strtok_r(buf, "\n", &save); tok; tok = strtok_r(NULL, "\n", &save)) {
                pid_t q = (pid_t)atoi(tok);
                ck_assert_msg(q > 0, "criu_target reported \"%s\"", tok);
                if (q == pid) {
                        saw_root = true;
                        continue;
                }
                ck_assert(count < max);
                pids[count++] = q;
        }
        ck_assert_msg(saw_root, "criu_target %d did not start (exec failed?): reports \"%s\"", (int)pid, buf);
        return count;
}

/* Field 3 (state) and field 4 (ppid) of /proc/PID/stat; false when gone. */
static bool proc_stat(pid_t pid, char *state, pid_t *ppid)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        char *text = slurp_raw(path);
        if (!text)
                return false;
        char *p = strrchr(text, ')');
        int pp = 0;
        bool ok = p && sscanf(p + 1, " %c %d", state, &pp) == 2;
        free(text);
        *ppid = (pid_t)pp;
        return ok;
}

/* Waits until no process has pid any more, reaping it when it is (or
 * becomes, once its parent is gone) our child. */
static void await_gone(pid_t pid, int timeout_ms)
{
        double deadline = itest_now_ms() + timeout_ms;
        for (;;) {
                int status;
                pid_t r = waitpid(pid, &status, WNOHANG);
                if (r == pid)
                        return;
                if (r < 0 && errno == ECHILD && kill(pid, 0) < 0 && errno == ESRCH)
                        return;
                if (itest_now_ms() >= deadline) {
                        char st = '?';
                        pid_t ppid = 0;
                        proc_stat(pid, &st, &ppid);
                        ck_abort_msg("pid %d still exists %d ms on (state %c, parent %d)", (int)pid, timeout_ms,
                                     st, (int)ppid);
                }
                /* A zombie of a dead parent is on its way to us. */
                poll(NULL, 0, 2);
        }
}

static void kill_all(const pid_t *pids, size_t n)
{
        for (size_t i = 0; i < n; i++)
                kill(pids[i], SIGKILL);
        for (size_t i = 0; i < n; i++)
                await_gone(pids[i], AWAIT_MS);
}

/* Runs criu VERB ARGS... -D IMG -o LOG -v4; asserts exit status 0 within
 * CRIU_TIMEOUT_MS, else prints the log's tail and fails. */
static void run_criu(struct criu_ctx *x, const char *log, const char *verb, ...)
{
        const char *argv[32];
        size_t n = 0;
        argv[n++] = criu_path;
        argv[n++] = verb;
        va_list ap;
        va_start(ap, verb);
        for (const char *a = va_arg(ap, const char *); a && n < 24; a = va_arg(ap, const char *))
                argv[n++] = a;
        va_end(ap);
        argv[n++] = "-D";
        argv[n++] = x->img;
        argv[n++] = "-o";
        argv[n++] = log;
        argv[n++] = "-v4";
        argv[n] = NULL;
        struct run_result *res = itest_keep(calloc(1, sizeof(*res)));
        ck_assert(res);
        double t0 = itest_now_ms();
        int r = run_bounded(argv, x->env, CRIU_TIMEOUT_MS, res);
        ck_assert_msg(r == 0, "cannot run %s: %s", criu_path, strerror(-r));
        if (res->timed_out || res->status != 0) {
                const char *path = itest_strdupf("%s/%s", x->img, log);
                fprintf(stderr, "criu %s output: %s\n", verb, res->out);
                print_log_tail(itest_strdupf("criu %s log", verb), path);
                ck_assert_msg(!res->timed_out,
                              "criu %s did not finish within %d ms (killed; a cuda-checkpoint call hanging? "
                              "see the log above)",
                              verb, CRIU_TIMEOUT_MS);
                ck_abort_msg("criu %s failed with exit status %d after %.0f ms (see the log above)", verb,
                             res->status, itest_now_ms() - t0);
        }
}

static void assert_no_plugin_failure(struct criu_ctx *x, const char *log)
{
        const char *path = itest_strdupf("%s/%s", x->img, log);
        const char *bad = plugin_failure(path);
        if (bad)
                print_log_tail(log, path);
        ck_assert_msg(!bad, "criu exited 0 but its CUDA plugin failed: %s", bad);
}

/* Asserts that the daemon audited method on pid as done ("result=ok"):
 * the call came through our cuda-checkpoint and was carried out. */
static void await_audit(struct criu_ctx *x, const char *method, pid_t pid)
{
        const char *path = itest_strdupf("%s/daemon.log", x->d->dir);
        const char *want = itest_strdupf(" method=%s target_pid=%d result=ok ", method, (int)pid);
        double deadline = itest_now_ms() + AWAIT_MS;
        for (;;) {
                char *text = slurp_raw(path);
                bool found = text && strstr(text, want);
                free(text);
                if (found)
                        return;
                if (itest_now_ms() >= deadline) {
                        itest_daemon_print_log(x->d);
                        ck_abort_msg("the daemon's log has no audit line \"%s\": the plugin's call did not "
                                     "go through cudackptd",
                                     want);
                }
                poll(NULL, 0, 5);
        }
}

static void assert_state(struct criu_ctx *x, pid_t pid, const char *state)
{
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        itest_assert_reply_state(cudackpt_get_state(x->c, pid, &r), &r, pid, state);
        cudackpt_reply_clear(&r);
}

/* Sends SIGUSR1 and awaits the target's "ok PID N" line. */
static void check_memory(struct criu_ctx *x, pid_t pid, unsigned long n)
{
        ck_assert_int_eq(kill(pid, SIGUSR1), 0);
        const char *want = itest_strdupf("ok %d %lu", (int)pid, n);
        const char *bad = itest_strdupf("mismatch %d %lu", (int)pid, n);
        double deadline = itest_now_ms() + AWAIT_MS;
        for (;;) {
                char *text = slurp_raw(x->result);
                bool found = text && has_line(text, want);
                bool mismatch = text && strstr(text, bad);
                bool late = itest_now_ms() >= deadline;
                if (found || mismatch || late)
                        itest_keep(text);
                else
                        free(text);
                if (found)
                        return;
                ck_assert_msg(!mismatch, "target %d: memory changed: %s", (int)pid, text);
                ck_assert_msg(!late, "no \"%s\" in %s within %d ms (it holds: %s)", want, x->result, AWAIT_MS,
                              text ? text : "nothing");
                poll(NULL, 0, 5);
        }
}

/* Before a dump: the daemon sees a running CUDA process, whose restore
 * thread is one of its threads, and the drop-in says the same. */
static void check_before(struct criu_ctx *x, pid_t pid)
{
        assert_state(x, pid, "running");
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        itest_assert_reply_ok(cudackpt_get_restore_thread_id(x->c, pid, &r), &r);
        char task[64];
        snprintf(task, sizeof(task), "/proc/%d/task/%d", (int)pid, r.restore_thread_id);
        ck_assert_msg(r.restore_thread_id > 0 && access(task, F_OK) == 0,
                      "restore thread id %d of %d is not one of its threads", r.restore_thread_id, (int)pid);
        cudackpt_reply_clear(&r);

        const char *argv[] = { itest_strdupf("%s/cuda-checkpoint", x->bin), "--get-state", "--pid",
                               itest_strdupf("%d", (int)pid), NULL };
        struct itest_proc_result *pr = itest_keep(calloc(1, sizeof(*pr)));
        ck_assert(pr);
        itest_run_proc((uid_t)-1, argv, x->env, AWAIT_MS, pr);
        ck_assert_msg(pr->status == 0 && strcmp(pr->out, "running\n") == 0,
                      "cuda-checkpoint --get-state --pid %d: exit status %d, stdout \"%s\", stderr \"%s\"",
                      (int)pid, pr->status, pr->out, pr->err);
}

/* After a restore: the same pid, a new process, ours to reap (the root,
 * reparented to us; the others the root's children), running for the
 * daemon, which did Restore and Unlock for the plugin. */
static void check_restored(struct criu_ctx *x, pid_t pid, uint64_t old_start, pid_t want_ppid)
{
        char st = 0;
        pid_t ppid = 0;
        ck_assert_msg(proc_stat(pid, &st, &ppid), "pid %d did not come back", (int)pid);
        ck_assert_msg(st != 'Z' && st != 'X', "restored pid %d is dead (state %c)", (int)pid, st);
        ck_assert_msg(ppid == want_ppid, "restored pid %d has parent %d, expected %d", (int)pid, (int)ppid,
                      (int)want_ppid);
        uint64_t start = itest_start_time(pid);
        ck_assert_msg(start != old_start, "pid %d still has start time %llu: not a restored process", (int)pid,
                      (unsigned long long)start);
        await_audit(x, "Restore", pid);
        await_audit(x, "Unlock", pid);
        assert_state(x, pid, "running");
}

/* ---- the tests ----------------------------------------------------------- */

START_TEST(criu_dump_restore)
{
        struct criu_ctx x;
        criu_setup(&x);
        pid_t pids[1];
        ck_assert_int_eq(start_target(&x, "single", pids, 1), 1);
        pid_t pid = pids[0];
        check_before(&x, pid);
        check_memory(&x, pid, 1);
        uint64_t start = itest_start_time(pid);

        run_criu(&x, "dump.log", "dump", "-t", itest_strdupf("%d", (int)pid), NULL);
        await_gone(pid, AWAIT_MS);
        await_audit(&x, "Lock", pid);
        await_audit(&x, "Checkpoint", pid);

        run_criu(&x, "restore.log", "restore", "-d", NULL);
        assert_no_plugin_failure(&x, "restore.log");
        check_restored(&x, pid, start, getpid());
        /* The check counter came back with the memory. */
        check_memory(&x, pid, 2);
        kill_all(pids, 1);
}
END_TEST

START_TEST(criu_tree)
{
        struct criu_ctx x;
        criu_setup(&x);
        pid_t pids[3];
        ck_assert_int_eq(start_target(&x, "tree", pids, 3), 3);
        uint64_t start[3];
        for (int i = 0; i < 3; i++) {
                check_before(&x, pids[i]);
                start[i] = itest_start_time(pids[i]);
                char st;
                pid_t ppid;
                ck_assert(proc_stat(pids[i], &st, &ppid));
                ck_assert_int_eq(ppid, i == 0 ? getpid() : pids[0]);
        }

        run_criu(&x, "dump.log", "dump", "-t", itest_strdupf("%d", (int)pids[0]), NULL);
        for (int i = 0; i < 3; i++)
                await_gone(pids[i], AWAIT_MS);
        for (int i = 0; i < 3; i++) {
                await_audit(&x, "Lock", pids[i]);
                await_audit(&x, "Checkpoint", pids[i]);
        }

        run_criu(&x, "restore.log", "restore", "-d", NULL);
        assert_no_plugin_failure(&x, "restore.log");
        for (int i = 0; i < 3; i++)
                check_restored(&x, pids[i], start[i], i == 0 ? getpid() : pids[0]);
        for (int i = 0; i < 3; i++)
                check_memory(&x, pids[i], 1);
        kill_all(pids, 3);
}
END_TEST

START_TEST(criu_leave_running)
{
        struct criu_ctx x;
        criu_setup(&x);
        pid_t pids[1];
        ck_assert_int_eq(start_target(&x, "single", pids, 1), 1);
        pid_t pid = pids[0];
        check_before(&x, pid);
        uint64_t start = itest_start_time(pid);

        run_criu(&x, "dump.log", "dump", "--leave-running", "-t", itest_strdupf("%d", (int)pid), NULL);
        assert_no_plugin_failure(&x, "dump.log");
        /* The same process, never stopped for good: the plugin restored and
         * unlocked it after the dump. */
        char st = 0;
        pid_t ppid = 0;
        ck_assert_msg(proc_stat(pid, &st, &ppid) && st != 'Z', "pid %d did not survive --leave-running", (int)pid);
        ck_assert_int_eq(waitpid(pid, NULL, WNOHANG), 0);
        ck_assert_msg(itest_start_time(pid) == start, "pid %d is another process", (int)pid);
        await_audit(&x, "Lock", pid);
        await_audit(&x, "Checkpoint", pid);
        await_audit(&x, "Restore", pid);
        await_audit(&x, "Unlock", pid);
        assert_state(&x, pid, "running");
        check_memory(&x, pid, 1);
        kill_all(pids, 1);
}
END_TEST

/* ---- main: find criu or skip --------------------------------------------- */

static int skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int skip(const char *fmt, ...)
{
        va_list ap;
        fprintf(stderr, "integration.criu: skipped: ");
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        return 77;
}

/* criu_path from $CUDACKPT_CRIU, else PATH; false when none. */
static bool find_criu(void)
{
        const char *env = getenv("CUDACKPT_CRIU");
        if (env && *env) {
                snprintf(criu_path, sizeof(criu_path), "%s", env);
                return true;
        }
        const char *path = getenv("PATH");
        if (!path || !*path)
                return false;
        char *dirs = strdup(path);
        if (!dirs)
                return false;
        bool found = false;
        for (char *save = NULL, *dir = strtok_r(dirs, ":", &save); dir && !found; dir = strtok_r(NULL, ":", &save)) {
                int n = snprintf(criu_path, sizeof(criu_path), "%s/criu", *dir ? dir : ".");
                struct stat st;
                found = n > 0 && (size_t)n < sizeof(criu_path) && stat(criu_path, &st) == 0 &&
                        S_ISREG(st.st_mode) && access(criu_path, X_OK) == 0;
        }
        free(dirs);
        return found;
}

/* The last non-empty line of text, for a one-line reason. */
static const char *last_line(char *text)
{
        size_t len = strlen(text);
        while (len && (text[len - 1] == '\n' || text[len - 1] == ' '))
                text[--len] = '\0';
        char *nl = strrchr(text, '\n');
        return nl ? nl + 1 : text;
}

int main(void)
{
        if (!find_criu())
                return skip("no criu (set CUDACKPT_CRIU, or put criu on PATH)");
        static struct run_result res;
        const char *version[] = { criu_path, "--version", NULL };
        int r = run_bounded(version, (const char *const *)environ, CRIU_PROBE_TIMEOUT_MS, &res);
        if (r < 0 || res.status != 0)
                return skip("%s --version failed (%s)", criu_path,
                            r < 0 ? strerror(-r) : res.timed_out ? "timed out" : last_line(res.out));
        const char *v = strstr(res.out, "Version:");
        int major = 0, minor = 0;
        if (!v || sscanf(v, "Version: %d.%d", &major, &minor) < 1)
                return skip("%s --version does not say \"Version: N.M\": %s", criu_path, last_line(res.out));
        if (major < 4)
                return skip("%s is CRIU %d.%d; the CUDA plugin needs 4 or newer", criu_path, major, minor);
        if (geteuid() != 0)
                return skip("criu dump and restore need root");
        const char *check[] = { criu_path, "check", NULL };
        r = run_bounded(check, (const char *const *)environ, CRIU_PROBE_TIMEOUT_MS, &res);
        if (r < 0 || res.status != 0)
                return skip("%s check failed (%s)", criu_path,
                            r < 0 ? strerror(-r) : res.timed_out ? "timed out" : last_line(res.out));

        Suite *s = suite_create("integration.criu");
        /* Two criu runs at most, each bounded by CRIU_TIMEOUT_MS. */
        TCase *tc = itest_tcase(s, "criu", 3.0 * CRIU_TIMEOUT_MS / 1000);
        tcase_add_test(tc, criu_dump_restore);
        tcase_add_test(tc, criu_tree);
        tcase_add_test(tc, criu_leave_running);
        return itest_main(s);
}
