/* criu_itest.c: what the CRIU suites share; see criu_itest.h. */
#include "criu_itest.h"

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

#include "read_file.h"

extern char **environ;

char citest_criu_path[4096];

/* The suite's name, for the skip line. */
static const char *citest_suite = "integration.criu";

/* ---- running programs (no Check assertions: main() uses it too) ---------- */


static int pidfd_open_(pid_t pid)
{
        return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* The child of citest_run_bounded(): in a process group of its own, stdin
 * /dev/null, stdout and stderr into out, it execs argv. */
static _Noreturn void citest_exec_grouped(const char *const *argv, const char *const *env, int out, pid_t parent)
{
        setpgid(0, 0);
        int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (devnull >= 0)
                dup2(devnull, STDIN_FILENO);
        dup2(out, STDOUT_FILENO);
        dup2(out, STDERR_FILENO);
        /* In a group of its own, Check's kill of the test's group misses
         * it: go with the test instead. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
                _exit(127);
        execve(argv[0], (char *const *)argv, (char *const *)env);
        dprintf(STDERR_FILENO, "execve %s: %s\n", argv[0], strerror(errno));
        _exit(127);
}

/* Runs argv (argv[0] a path) with env, stdin /dev/null, stdout and stderr
 * into res->out, in a process group of its own: when it runs past
 * timeout_ms, the whole group (criu and the cuda-checkpoint it started) is
 * killed.  Returns 0, or -errno when it could not be started. */
int citest_run_bounded(const char *const *argv, const char *const *env, int timeout_ms, struct citest_run *res)
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
        if (pid == 0)
                citest_exec_grouped(argv, env, p[1], parent);
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
char *citest_slurp_raw(const char *path)
{
        char *b;
        ssize_t n = test_read_file(path, &b);
        ck_assert_msg(n != -ENOMEM, "reading %s: out of memory", path);
        return n < 0 ? NULL : b;
}

/* The same, owned by the harness. */
char *citest_slurp(const char *path)
{
        return itest_keep(citest_slurp_raw(path));
}

/* Whether text holds line as a whole line. */
bool citest_has_line(const char *text, const char *line)
{
        size_t n = strlen(line);
        for (const char *p = text; p && (p = strstr(p, line)); p++)
                if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
                        return true;
        return false;
}

void citest_print_log_tail(const char *what, const char *path)
{
        char *text = citest_slurp(path);
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
const char *citest_plugin_failure(const char *path)
{
        char *text = citest_slurp(path);
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


const char *citest_need_env(const char *name)
{
        const char *v = getenv(name);
        ck_assert_msg(v && *v, "%s is not set: run the integration tests through ctest", name);
        return v;
}

void citest_setup(struct citest_ctx *x)
{
        citest_setup_with(x, NULL);
}

void citest_setup_with(struct citest_ctx *x, const struct itest_daemon_opts *opts)
{
        memset(x, 0, sizeof(*x));
        /* Orphans come to us: the targets criu dump killed (so they can be
         * reaped and their pids free for the restore), the restored trees,
         * the cuda-checkpoint of a criu killed on timeout. */
        ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
        x->d = opts ? itest_daemon_start(opts) : itest_daemon_start_default();
        x->c = itest_client(x->d);

        x->bin = itest_strdupf("%s/bin", x->d->dir);
        x->img = itest_strdupf("%s/img", x->d->dir);
        x->result = itest_strdupf("%s/result", x->d->dir);
        ck_assert_int_eq(mkdir(x->bin, 0755), 0);
        ck_assert_int_eq(mkdir(x->img, 0700), 0);
        const char *ctl = citest_need_env("CUDACKPT_TEST_CTL");
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
size_t citest_start_target(struct citest_ctx *x, const char *mode, pid_t *pids, size_t max)
{
        return citest_start_target_env(x, mode, NULL, pids, max);
}

size_t citest_start_target_env(struct citest_ctx *x, const char *mode, const char *extra, pid_t *pids, size_t max)
{
        const char *exe = citest_need_env("CUDACKPT_TEST_CRIU_TARGET");
        const char *argv[] = { "criu_target", mode, itest_strdupf("%d", (int)getpid()), x->result, TARGET_MIB,
                               citest_need_env("CUDACKPT_TEST_SIM"), NULL };
        const char *env[] = { "CUDACKPT_SIM=1", SIM_STATE_SLOT, extra, NULL };
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
bool citest_proc_stat(pid_t pid, char *state, pid_t *ppid)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        char *text = citest_slurp_raw(path);
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
void citest_await_gone(pid_t pid, int timeout_ms)
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
                        citest_proc_stat(pid, &st, &ppid);
                        ck_abort_msg("pid %d still exists %d ms on (state %c, parent %d)", (int)pid, timeout_ms,
                                     st, (int)ppid);
                }
                /* A zombie of a dead parent is on its way to us. */
                poll(NULL, 0, 2);
        }
}

void citest_kill_all(const pid_t *pids, size_t n)
{
        for (size_t i = 0; i < n; i++)
                kill(pids[i], SIGKILL);
        for (size_t i = 0; i < n; i++)
                citest_await_gone(pids[i], AWAIT_MS);
}

/* Runs criu VERB ARGS... -D IMG -o LOG -v4; asserts exit status 0 within
 * CRIU_TIMEOUT_MS, else prints the log's tail and fails. */
void citest_await_audit(struct citest_ctx *x, const char *method, pid_t pid)
{
        const char *path = itest_strdupf("%s/daemon.log", x->d->dir);
        const char *want = itest_strdupf(" method=%s target_pid=%d result=ok ", method, (int)pid);
        double deadline = itest_now_ms() + AWAIT_MS;
        for (;;) {
                char *text = citest_slurp_raw(path);
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

void citest_assert_state(struct citest_ctx *x, pid_t pid, const char *state)
{
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        itest_assert_reply_state(cudackpt_get_state(x->c, pid, &r), &r, pid, state);
        cudackpt_reply_clear(&r);
}

/* Sends SIGUSR1 and awaits the target's "ok PID N" line. */
void citest_check_memory(struct citest_ctx *x, pid_t pid, unsigned long n)
{
        ck_assert_int_eq(kill(pid, SIGUSR1), 0);
        const char *want = itest_strdupf("ok %d %lu", (int)pid, n);
        const char *bad = itest_strdupf("mismatch %d %lu", (int)pid, n);
        double deadline = itest_now_ms() + AWAIT_MS;
        for (;;) {
                char *text = citest_slurp_raw(x->result);
                bool found = text && citest_has_line(text, want);
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

/* ---- main: find criu or skip --------------------------------------------- */

static int skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int skip(const char *fmt, ...)
{
        va_list ap;
        fprintf(stderr, "%s: skipped: ", citest_suite);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        return 77;
}

/* citest_criu_path from $CUDACKPT_CRIU, else PATH; false when none. */
static bool find_criu(void)
{
        const char *env = getenv("CUDACKPT_CRIU");
        if (env && *env) {
                snprintf(citest_criu_path, sizeof(citest_criu_path), "%s", env);
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
                int n = snprintf(citest_criu_path, sizeof(citest_criu_path), "%s/criu", *dir ? dir : ".");
                struct stat st;
                found = n > 0 && (size_t)n < sizeof(citest_criu_path) && stat(citest_criu_path, &st) == 0 &&
                        S_ISREG(st.st_mode) && access(citest_criu_path, X_OK) == 0;
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

int citest_probe(const char *suite)
{
        citest_suite = suite;

        if (!find_criu())
                return skip("no criu (set CUDACKPT_CRIU, or put criu on PATH)");
        static struct citest_run res;
        const char *version[] = { citest_criu_path, "--version", NULL };
        int r = citest_run_bounded(version, (const char *const *)environ, CRIU_PROBE_TIMEOUT_MS, &res);
        if (r < 0 || res.status != 0)
                return skip("%s --version failed (%s)", citest_criu_path,
                            r < 0 ? strerror(-r) : res.timed_out ? "timed out" : last_line(res.out));
        const char *v = strstr(res.out, "Version:");
        int major = 0, minor = 0;
        if (!v || sscanf(v, "Version: %d.%d", &major, &minor) < 1)
                return skip("%s --version does not say \"Version: N.M\": %s", citest_criu_path, last_line(res.out));
        if (major < 4)
                return skip("%s is CRIU %d.%d; the CUDA plugin needs 4 or newer", citest_criu_path, major, minor);
        if (geteuid() != 0)
                return skip("criu dump and restore need root");
        const char *check[] = { citest_criu_path, "check", NULL };
        r = citest_run_bounded(check, (const char *const *)environ, CRIU_PROBE_TIMEOUT_MS, &res);
        if (r < 0 || res.status != 0)
                return skip("%s check failed (%s)", citest_criu_path,
                            r < 0 ? strerror(-r) : res.timed_out ? "timed out" : last_line(res.out));

        return 0;
}

int citest_main(const char *name, double timeout_s, const TTest *const tests[])
{
        /* Static: citest_probe() keeps the name for its skip lines. */
        static char suite[128];
        snprintf(suite, sizeof(suite), "integration.%s", name);
        int skip_status = citest_probe(suite);

        return skip_status ? skip_status : itest_run(suite, name, timeout_s, tests);
}
