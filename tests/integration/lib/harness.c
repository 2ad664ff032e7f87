/* harness.c: the integration tests' harness (see harness.h for how a
 * test's life goes): what it keeps until teardown, the daemon, the
 * fixtures and the runner; targets are harness_targets.c's, connections
 * and replies harness_varlink.c's, feature helpers harness_features.c's.
 *
 * Everything waits with poll() and a deadline: on the notify socket for
 * READY=1, on a pidfd for a process's exit, on a socket for a reply.  No
 * helper sleeps to give something time to happen. */
#include "harness_internal.h"
#include "sim_daemon.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ITEST_STOP_TIMEOUT_MS 10000

/* The per-run directory every test's own dir is made in; set by
 * itest_main() before the runner forks, so the test children inherit it. */
static char itest_root[64];

/* State of the current test (one per forked child). */
static struct itest_daemon itest_the_daemon;
static bool itest_daemon_running;

/* Things to free at teardown, so that sanitizer builds see no leaks. */
struct itest_kept {
        void *p;
        void (*free_fn)(void *p);
};
static struct itest_kept *itest_kept;
static size_t itest_n_kept, itest_cap_kept;

void itest_keep_with(void *p, void (*free_fn)(void *p))
{
        if (!p)
                return;
        if (itest_n_kept == itest_cap_kept) {
                size_t cap = itest_cap_kept ? itest_cap_kept * 2 : 64;
                struct itest_kept *k = realloc(itest_kept, cap * sizeof(*k));
                ck_assert_msg(k, "out of memory");
                itest_kept = k;
                itest_cap_kept = cap;
        }
        itest_kept[itest_n_kept++] = (struct itest_kept){ p, free_fn };
}

void *itest_keep(void *p)
{
        itest_keep_with(p, free);
        return p;
}

void itest_free_json(void *p)
{
        cJSON_Delete(p);
}

cJSON *itest_keep_json(cJSON *j)
{
        itest_keep_with(j, itest_free_json);
        return j;
}

void itest_free_client(void *p)
{
        cudackpt_client_free(p);
}

void itest_free_conn(void *p)
{
        struct itest_conn *c = p;
        if (c->fd >= 0)
                close(c->fd);
        free(c->buf);
        free(c);
}

char *itest_strdupf(const char *fmt, ...)
{
        va_list ap;
        char *s = NULL;
        va_start(ap, fmt);
        int r = vasprintf(&s, fmt, ap);
        va_end(ap);
        ck_assert_msg(r >= 0, "out of memory");
        return itest_keep(s);
}

double itest_now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

/* Milliseconds left until deadline, for poll(); 0 once past. */
int itest_left_ms(double deadline)
{
        double left = deadline - itest_now_ms();
        if (left <= 0)
                return 0;
        return (int)left + 1;
}

int itest_wait_readable(int fd, double deadline)
{
        for (;;) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                int r = poll(&p, 1, itest_left_ms(deadline));
                if (r > 0)
                        return 0;
                if (r == 0)
                        return -ETIMEDOUT;
                if (errno != EINTR)
                        return -errno;
        }
}

int itest_pidfd_open(pid_t pid)
{
        return (int)syscall(SYS_pidfd_open, pid, 0);
}

pid_t itest_fork_stdio(int out, int err)
{
        pid_t pid = fork();
        ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
                int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (devnull >= 0)
                        dup2(devnull, STDIN_FILENO);
                dup2(out, STDOUT_FILENO);
                dup2(err, STDERR_FILENO);
        }
        return pid;
}

/* Waits up to timeout_ms for the process behind pidfd to exit.  Returns
 * true once it has (it is then a zombie for waitpid to reap). */
bool itest_pidfd_wait(int pidfd, int timeout_ms)
{
        int r = itest_wait_readable(pidfd, itest_now_ms() + timeout_ms);
        if (r == -ETIMEDOUT)
                return false;
        if (r < 0)
                ck_abort_msg("poll on pidfd: %s", strerror(-r));
        return true;
}

static int itest_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        (void)st;
        (void)flag;
        (void)ftw;
        remove(path);
        return 0;
}

static void itest_rm_rf(const char *path)
{
        nftw(path, itest_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void itest_write_file(const char *path, const char *text)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
        size_t len = strlen(text);
        ck_assert_msg(write(fd, text, len) == (ssize_t)len, "write %s: %s", path, strerror(errno));
        close(fd);
}

static void itest_cat_file(const char *path)
{
        FILE *f = fopen(path, "re");
        if (!f) {
                fprintf(stderr, "(cannot open %s: %s)\n", path, strerror(errno));
                return;
        }
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
                fwrite(buf, 1, n, stderr);
        fclose(f);
}

/* The environment a child gets: PATH and sanitizer options only, so that a
 * developer's CUDACKPT_SIM_* variables cannot change what a test sees. */
size_t itest_base_env(const char **env, size_t max)
{
        static const char *const keep[] = { "PATH", "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
                                            "TSAN_OPTIONS", NULL };
        size_t n = 0;
        for (size_t i = 0; keep[i] && n < max; i++) {
                const char *v = getenv(keep[i]);
                if (v)
                        env[n++] = itest_strdupf("%s=%s", keep[i], v);
        }
        return n;
}

const char *itest_need_env(const char *name)
{
        const char *v = getenv(name);
        ck_assert_msg(v && *v, "%s is not set: run the integration tests through ctest", name);
        return v;
}

/* ---- the daemon ---------------------------------------------------------- */

/* buf = dir/name, asserting it fits. */
static void itest_path(char *buf, size_t size, const char *dir, const char *name)
{
        int n = snprintf(buf, size, "%s/%s", dir, name);
        ck_assert_msg(n > 0 && (size_t)n < size, "path %s/%s too long", dir, name);
}

void itest_daemon_print_log(const struct itest_daemon *d)
{
        char path[160];
        itest_path(path, sizeof(path), d->dir, "daemon.log");
        fprintf(stderr, "----- daemon log (%s) -----\n", path);
        itest_cat_file(path);
        fprintf(stderr, "----- end of daemon log -----\n");
}

const char *itest_describe_status(int status)
{
        if (WIFEXITED(status))
                return itest_strdupf("exit status %d", WEXITSTATUS(status));
        if (WIFSIGNALED(status))
                return itest_strdupf("killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
        return itest_strdupf("wait status 0x%x", (unsigned)status);
}

/* Waits for READY=1 on nfd (which it closes), or asserts why it did not
 * come: the daemon exited or took too long. */
static void itest_daemon_await_ready(struct itest_daemon *d, int nfd)
{
        int r = test_daemon_await_ready(nfd, d->pidfd, ITEST_READY_TIMEOUT_MS);
        close(nfd);
        if (r == -ECHILD) {
                int status = 0;
                waitpid(d->pid, &status, 0);
                d->pid = 0;
                itest_daemon_running = false;
                itest_daemon_print_log(d);
                ck_abort_msg("the daemon exited before READY=1: %s", itest_describe_status(status));
        }
        if (r < 0) {
                itest_daemon_print_log(d);
                ck_abort_msg("the daemon sent no READY=1 within %d ms: %s", ITEST_READY_TIMEOUT_MS, strerror(-r));
        }
        struct stat st;
        ck_assert_msg(stat(d->sock, &st) == 0 && S_ISSOCK(st.st_mode),
                      "READY=1 came but %s is not a socket", d->sock);
}

/* Starts the daemon in d->dir (made anew unless again: then the same
 * directory, socket and configuration, the log appended to). */
static struct itest_daemon *itest_daemon_spawn(const struct itest_daemon_opts *opts, bool again)
{
        struct itest_daemon *d = &itest_the_daemon;
        ck_assert_msg(!itest_daemon_running, "one daemon per test");
        const char *daemon = itest_need_env("CUDACKPT_TEST_DAEMON");
        const char *driver = opts && opts->driver ? opts->driver : itest_need_env("CUDACKPT_TEST_SIM");
        char path[160], config[160];

        if (!again) {
                memset(d, 0, sizeof(*d));
                snprintf(d->dir, sizeof(d->dir), "%s/t-XXXXXX", itest_root[0] ? itest_root : "/tmp");
                ck_assert_msg(mkdtemp(d->dir), "mkdtemp: %s", strerror(errno));
                /* Another uid must reach the socket inside. */
                ck_assert_int_eq(chmod(d->dir, 0755), 0);
                itest_path(d->sock, sizeof(d->sock), d->dir, "sock");
                itest_path(path, sizeof(path), d->dir, "test-name");
                itest_write_file(path, tcase_name());
        }
        d->pidfd = -1;
        itest_path(config, sizeof(config), d->dir, "config.json");
        if (!again || (opts && opts->config_json))
                itest_write_file(config, opts && opts->config_json ? opts->config_json : "{}");

        char notify[160];
        itest_path(notify, sizeof(notify), d->dir, "notify");
        int nfd = test_daemon_notify_open(notify);
        ck_assert_msg(nfd >= 0, "the notify socket %s: %s", notify, strerror(-nfd));

        itest_path(path, sizeof(path), d->dir, "daemon.log");
        int logfd = open(path, O_WRONLY | O_CREAT | (again ? O_APPEND : O_TRUNC) | O_CLOEXEC, 0644);
        ck_assert_msg(logfd >= 0, "open %s: %s", path, strerror(errno));

        struct test_daemon_argv *argv = itest_keep(malloc(sizeof(*argv)));
        ck_assert_ptr_nonnull(argv);
        struct test_daemon_cmd cmd = {
                .daemon = daemon, .socket = d->sock, .driver = driver, .config = config, .log_level = "debug"
        };
        ck_assert_int_eq(test_daemon_argv(&cmd, argv), 0);
        const char *env[64];
        size_t n = itest_base_env(env, 32);
        env[n++] = itest_strdupf("NOTIFY_SOCKET=%s", notify);
        for (size_t i = 0; opts && opts->env && opts->env[i] && n < 63; i++)
                env[n++] = opts->env[i];
        env[n] = NULL;

        pid_t parent = getpid();
        pid_t pid = itest_fork_stdio(logfd, logfd);
        if (pid == 0) {
                /* Die with the test if it is killed before its teardown. */
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(127);
                execve(daemon, argv->argv, (char *const *)env);
                dprintf(STDERR_FILENO, "itest: execve %s: %s\n", daemon, strerror(errno));
                _exit(127);
        }
        close(logfd);
        d->pid = pid;
        itest_daemon_running = true;
        d->pidfd = itest_pidfd_open(pid);
        ck_assert_msg(d->pidfd >= 0, "pidfd_open: %s", strerror(errno));

        itest_daemon_await_ready(d, nfd);
        return d;
}

struct itest_daemon *itest_daemon_start(const struct itest_daemon_opts *opts)
{
        return itest_daemon_spawn(opts, false);
}

void itest_daemon_kill(struct itest_daemon *d)
{
        int status;

        ck_assert_msg(d->pid && !itest_daemon_exited(d), "the daemon died during the test");
        ck_assert_int_eq(kill(d->pid, SIGKILL), 0);
        status = itest_daemon_await_exit(d, ITEST_STOP_TIMEOUT_MS);
        ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the daemon ended with %s",
                      itest_describe_status(status));
}

struct itest_daemon *itest_daemon_restart(struct itest_daemon *d, const struct itest_daemon_opts *opts)
{
        ck_assert_msg(d == &itest_the_daemon && d->dir[0] && !d->pid, "restart a daemon that was stopped");
        return itest_daemon_spawn(opts, true);
}

struct itest_daemon *itest_daemon_start_default(void)
{
        return itest_daemon_start(NULL);
}

bool itest_daemon_exited(struct itest_daemon *d)
{
        if (!d->pid)
                return true;
        struct pollfd p = { .fd = d->pidfd, .events = POLLIN };
        return poll(&p, 1, 0) > 0;
}

void itest_daemon_stop(struct itest_daemon *d)
{
        if (!d->pid)
                return;
        ck_assert_msg(!itest_daemon_exited(d), "the daemon died during the test");
        ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
        int status = itest_daemon_await_exit(d, ITEST_STOP_TIMEOUT_MS);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                itest_daemon_print_log(d);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "the daemon ended with %s after SIGTERM, not exit status 0",
                      itest_describe_status(status));
}

int itest_daemon_await_exit(struct itest_daemon *d, int timeout_ms)
{
        ck_assert_msg(d->pid, "the daemon was already stopped");
        pid_t pid = d->pid;
        bool exited = itest_pidfd_wait(d->pidfd, timeout_ms);
        if (!exited)
                kill(pid, SIGKILL);
        int status = 0;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        d->pid = 0;
        close(d->pidfd);
        d->pidfd = -1;
        itest_daemon_running = false;
        if (!exited)
                itest_daemon_print_log(d);
        ck_assert_msg(exited, "the daemon did not exit within %d ms", timeout_ms);
        return status;
}

/* ---- fixtures ------------------------------------------------------------ */

void itest_setup(void)
{
        /* A test child whose runner died must not live on (its daemon and
         * targets follow it through their own PDEATHSIG). */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        signal(SIGPIPE, SIG_IGN);
        itest_daemon_running = false;
        itest_targets_reset();
}

void itest_teardown(void)
{
        /* Connections first, so the daemon sees its clients go before the
         * SIGTERM, as in real life. */
        for (size_t i = 0; i < itest_n_kept; i++)
                if (itest_kept[i].free_fn == itest_free_conn || itest_kept[i].free_fn == itest_free_client) {
                        itest_kept[i].free_fn(itest_kept[i].p);
                        itest_kept[i].p = NULL;
                }
        if (itest_daemon_running)
                itest_daemon_stop(&itest_the_daemon);
        itest_targets_kill_all();
        if (itest_the_daemon.dir[0]) {
                itest_rm_rf(itest_the_daemon.dir);
                itest_the_daemon.dir[0] = '\0';
        }
        for (size_t i = itest_n_kept; i > 0; i--)
                if (itest_kept[i - 1].p)
                        itest_kept[i - 1].free_fn(itest_kept[i - 1].p);
        free(itest_kept);
        itest_kept = NULL;
        itest_n_kept = itest_cap_kept = 0;
}

TCase *itest_tcase(Suite *s, const char *name, double timeout_s)
{
        TCase *tc = tcase_create(name);
        tcase_add_checked_fixture(tc, itest_setup, itest_teardown);
        tcase_set_timeout(tc, timeout_s);
        suite_add_tcase(s, tc);
        return tc;
}

Suite *itest_suite(const char *name, const char *tcase, double timeout_s, const TTest *const tests[],
                   TCase **ret_tc)
{
        Suite *s = suite_create(name);
        TCase *tc = itest_tcase(s, tcase, timeout_s);

        for (size_t i = 0; tests[i]; i++)
                tcase_add_test(tc, tests[i]);
        if (ret_tc)
                *ret_tc = tc;
        return s;
}

int itest_run(const char *name, const char *tcase, double timeout_s, const TTest *const tests[])
{
        return itest_main(itest_suite(name, tcase, timeout_s, tests, NULL));
}

int itest_main(Suite *s)
{
        signal(SIGPIPE, SIG_IGN);
        const char *base = getenv("CUDACKPT_TEST_TMPDIR");
        snprintf(itest_root, sizeof(itest_root), "%s/cudackpt-itest-XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(itest_root)) {
                fprintf(stderr, "mkdtemp %s: %s\n", itest_root, strerror(errno));
                return 1;
        }
        chmod(itest_root, 0755);

        itest_skips_begin(itest_root);
        SRunner *sr = srunner_create(s);
        srunner_run_all(sr, CK_ENV);
        int failed = srunner_ntests_failed(sr);
        int run = srunner_ntests_run(sr);
        srunner_free(sr);

        /* A test that reached its teardown removed its dir: those left are
         * of failed or killed tests.  Show what their daemon said. */
        DIR *dir = opendir(itest_root);
        struct dirent *de;
        while (dir && (de = readdir(dir))) {
                if (de->d_name[0] == '.')
                        continue;
                char path[512];
                snprintf(path, sizeof(path), "%s/%s/test-name", itest_root, de->d_name);
                fprintf(stderr, "===== daemon log of failed test ");
                itest_cat_file(path);
                fprintf(stderr, " =====\n");
                snprintf(path, sizeof(path), "%s/%s/daemon.log", itest_root, de->d_name);
                itest_cat_file(path);
                fprintf(stderr, "===== end =====\n");
        }
        if (dir)
                closedir(dir);
        int rc = itest_skips_report(run, failed);
        itest_rm_rf(itest_root);
        return rc;
}

const char *itest_daemon_log(const struct itest_daemon *d)
{
        char path[160];
        snprintf(path, sizeof(path), "%s/daemon.log", d->dir);
        FILE *f = fopen(path, "re");
        ck_assert_msg(f, "open %s: %s", path, strerror(errno));
        size_t cap = 1 << 16, n = 0;
        char *buf = malloc(cap);
        ck_assert(buf);
        for (size_t k; (k = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
                n += k;
                if (n + 1 == cap) {
                        buf = realloc(buf, cap *= 2);
                        ck_assert(buf);
                }
        }
        fclose(f);
        buf[n] = '\0';
        return itest_keep(buf);
}

const char *itest_await_log(const struct itest_daemon *d, const char *text, int timeout_ms)
{
        for (double t0 = itest_now_ms();;) {
                const char *log = itest_daemon_log(d), *at = strstr(log, text);
                if (at) {
                        while (at > log && at[-1] != '\n')
                                at--;
                        return itest_strdupf("%.*s", (int)strcspn(at, "\n"), at);
                }
                ck_assert_msg(itest_now_ms() - t0 < timeout_ms, "the daemon did not log \"%s\" within %d ms", text,
                              timeout_ms);
                nanosleep(&(struct timespec){ 0, 5000000 }, NULL);
        }
}


void itest_unkeep_last(void *p)
{
        if (itest_n_kept && itest_kept[itest_n_kept - 1].p == p) {
                itest_kept[itest_n_kept - 1].free_fn(p);
                itest_n_kept--;
        }
}
