/* harness.c: daemon, targets, raw Varlink and other-uid helpers for the
 * integration tests (see harness.h for how a test's life goes).
 *
 * Everything waits with poll() and a deadline: on the notify socket for
 * READY=1, on a pidfd for a process's exit, on a socket for a reply.  No
 * helper sleeps to give something time to happen. */
#include "harness.h"

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

#define ITEST_MAX_TARGETS 64
#define ITEST_READY_TIMEOUT_MS 10000
#define ITEST_STOP_TIMEOUT_MS 10000

/* The per-run directory every test's own dir is made in; set by
 * itest_main() before the runner forks, so the test children inherit it. */
static char itest_root[64];

/* State of the current test (one per forked child). */
static struct itest_daemon itest_the_daemon;
static bool itest_daemon_running;
static pid_t itest_targets[ITEST_MAX_TARGETS];
static size_t itest_n_targets;

/* Things to free at teardown, so that sanitizer builds see no leaks. */
struct itest_kept {
        void *p;
        void (*free_fn)(void *p);
};
static struct itest_kept *itest_kept;
static size_t itest_n_kept, itest_cap_kept;

static void itest_keep_with(void *p, void (*free_fn)(void *p))
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

static void itest_free_json(void *p)
{
        cJSON_Delete(p);
}

cJSON *itest_keep_json(cJSON *j)
{
        itest_keep_with(j, itest_free_json);
        return j;
}

static void itest_free_client(void *p)
{
        cudackpt_client_free(p);
}

static void itest_free_conn(void *p)
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
static int itest_left_ms(double deadline)
{
        double left = deadline - itest_now_ms();
        if (left <= 0)
                return 0;
        return (int)left + 1;
}

static int itest_pidfd_open(pid_t pid)
{
        return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* Waits up to timeout_ms for the process behind pidfd to exit.  Returns
 * true once it has (it is then a zombie for waitpid to reap). */
static bool itest_pidfd_wait(int pidfd, int timeout_ms)
{
        double deadline = itest_now_ms() + timeout_ms;
        for (;;) {
                struct pollfd p = { .fd = pidfd, .events = POLLIN };
                int r = poll(&p, 1, itest_left_ms(deadline));
                if (r > 0)
                        return true;
                if (r == 0)
                        return false;
                if (errno != EINTR)
                        ck_abort_msg("poll on pidfd: %s", strerror(errno));
        }
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
static size_t itest_base_env(const char **env, size_t max)
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

/* Reads the datagrams waiting on the notify socket; true once one of them
 * carries a line READY=1. */
static bool itest_read_notify(int fd)
{
        bool ready = false;
        for (;;) {
                char buf[4096];
                ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
                if (n < 0)
                        return ready;
                buf[n] = '\0';
                char *save = NULL;
                for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
                        if (strcmp(line, "READY=1") == 0)
                                ready = true;
        }
}

const char *itest_describe_status(int status)
{
        if (WIFEXITED(status))
                return itest_strdupf("exit status %d", WEXITSTATUS(status));
        if (WIFSIGNALED(status))
                return itest_strdupf("killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
        return itest_strdupf("wait status 0x%x", (unsigned)status);
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
        (void)unlink(notify);
        int nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ck_assert_msg(nfd >= 0, "socket: %s", strerror(errno));
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        ck_assert(strlen(notify) < sizeof(sa.sun_path));
        strcpy(sa.sun_path, notify);
        ck_assert_msg(bind(nfd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "bind %s: %s", notify,
                      strerror(errno));

        itest_path(path, sizeof(path), d->dir, "daemon.log");
        int logfd = open(path, O_WRONLY | O_CREAT | (again ? O_APPEND : O_TRUNC) | O_CLOEXEC, 0644);
        ck_assert_msg(logfd >= 0, "open %s: %s", path, strerror(errno));

        const char *argv[] = {
                daemon,
                itest_strdupf("--socket=%s", d->sock),
                itest_strdupf("--driver=%s", driver),
                itest_strdupf("--config=%s", config),
                "--log-level=debug",
                NULL,
        };
        const char *env[64];
        size_t n = itest_base_env(env, 32);
        env[n++] = itest_strdupf("NOTIFY_SOCKET=%s", notify);
        for (size_t i = 0; opts && opts->env && opts->env[i] && n < 63; i++)
                env[n++] = opts->env[i];
        env[n] = NULL;

        pid_t parent = getpid();
        pid_t pid = fork();
        ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
                int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (devnull >= 0)
                        dup2(devnull, STDIN_FILENO);
                dup2(logfd, STDOUT_FILENO);
                dup2(logfd, STDERR_FILENO);
                /* Die with the test if it is killed before its teardown. */
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(127);
                execve(daemon, (char *const *)argv, (char *const *)env);
                dprintf(STDERR_FILENO, "itest: execve %s: %s\n", daemon, strerror(errno));
                _exit(127);
        }
        close(logfd);
        d->pid = pid;
        itest_daemon_running = true;
        d->pidfd = itest_pidfd_open(pid);
        ck_assert_msg(d->pidfd >= 0, "pidfd_open: %s", strerror(errno));

        double t0 = itest_now_ms();
        double deadline = t0 + ITEST_READY_TIMEOUT_MS;
        bool ready = false;
        while (!ready) {
                struct pollfd p[2] = { { .fd = nfd, .events = POLLIN }, { .fd = d->pidfd, .events = POLLIN } };
                int r = poll(p, 2, itest_left_ms(deadline));
                if (r < 0 && errno == EINTR)
                        continue;
                ck_assert_msg(r >= 0, "poll: %s", strerror(errno));
                if (r == 0) {
                        itest_daemon_print_log(d);
                        ck_abort_msg("the daemon sent no READY=1 within %d ms", ITEST_READY_TIMEOUT_MS);
                }
                if (p[0].revents & POLLIN)
                        ready = itest_read_notify(nfd);
                if (!ready && (p[1].revents & POLLIN)) {
                        int status = 0;
                        waitpid(pid, &status, 0);
                        d->pid = 0;
                        itest_daemon_running = false;
                        itest_daemon_print_log(d);
                        ck_abort_msg("the daemon exited before READY=1: %s", itest_describe_status(status));
                }
        }
        close(nfd);
        struct stat st;
        ck_assert_msg(stat(d->sock, &st) == 0 && S_ISSOCK(st.st_mode),
                      "READY=1 came but %s is not a socket", d->sock);
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
        itest_n_targets = 0;
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
        while (itest_n_targets > 0)
                itest_target_kill(itest_targets[itest_n_targets - 1]);
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

        SRunner *sr = srunner_create(s);
        srunner_run_all(sr, CK_ENV);
        int failed = srunner_ntests_failed(sr);
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
        itest_rm_rf(itest_root);
        return failed == 0 ? 0 : 1;
}

/* ---- targets ------------------------------------------------------------- */

/* Drops to uid/gid `uid` with exactly the supplementary groups given;
 * -errno on failure. */
static int itest_become_with(uid_t uid, const gid_t *groups, size_t n_groups)
{
        gid_t got[16];

        if (setgroups(n_groups, groups) < 0 || setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0)
                return -errno;
        if (getuid() != uid || geteuid() != uid || n_groups > 16 || getgroups(16, got) != (int)n_groups)
                return -EPERM;
        return 0;
}

static int itest_become(uid_t uid)
{
        return itest_become_with(uid, NULL, 0);
}

/* Forks and execs path; with ready, fd 3 of the child is a pipe whose
 * first byte (or EOF) the parent waits for after the exec. */
/* Reads /proc/PID/NAME whole into buf (NUL-terminated): its length, or
 * -errno. */
static ssize_t itest_read_proc(pid_t pid, const char *name, char *buf, size_t size)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        size_t n = 0;
        ssize_t k;
        while (n < size - 1 && ((k = read(fd, buf + n, size - 1 - n)) > 0 || (k < 0 && errno == EINTR)))
                if (k > 0)
                        n += (size_t)k;
        close(fd);
        buf[n] = '\0';
        return (ssize_t)n;
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

bool itest_await_exec(pid_t pid, const char *const *env)
{
        const size_t size = 1 << 16;
        char *buf = malloc(size);
        bool over = false;
        const char *lib = NULL;
        if (!buf)
                return false;
        for (const char *const *e = env; *e; e++)
                if (strncmp(*e, "LD_PRELOAD=", 11) == 0)
                        lib = strrchr(*e, '/'); /* maps names the real path: the file name */
        if (lib)
                lib++;
        for (int i = 0; i < 10000 && !over; i++) {
                ssize_t n = itest_read_proc(pid, "environ", buf, size);
                if (n == -EACCES) {
                        over = true; /* nothing to await by */
                        break;
                }
                over = n > 0;
                if (over && lib) {
                        n = itest_read_proc(pid, "maps", buf, size);
                        over = n == -EACCES || (n > 0 && memmem(buf, (size_t)n, lib, strlen(lib)));
                }
                if (n < 0 && n != -EACCES)
                        break;
                if (!over)
                        nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
        }
        free(buf);
        return over;
}

static pid_t itest_spawn_target(uid_t uid, const char *path, const char *const *argv, const char *const *env,
                                bool ready)
{
        ck_assert_msg(itest_n_targets < ITEST_MAX_TARGETS, "too many targets");
        int p[2], r[2] = { -1, -1 };
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        if (ready)
                ck_assert_int_eq(pipe2(r, O_CLOEXEC), 0);
        pid_t parent = getpid();
        pid_t pid = fork();
        ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
                close(p[0]);
                int err = 0;
                if (uid != (uid_t)-1)
                        err = itest_become(uid);
                if (err == 0) {
                        /* After the uid change, which clears it. */
                        prctl(PR_SET_PDEATHSIG, SIGKILL);
                        if (getppid() != parent)
                                _exit(127);
                        int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
                        if (devnull >= 0) {
                                dup2(devnull, STDIN_FILENO);
                                dup2(devnull, STDOUT_FILENO);
                        }
                        /* dup2 clears close-on-exec on fd 3. */
                        if (ready && dup2(r[1], 3) < 0)
                                err = -errno;
                        if (err == 0) {
                                execve(path, (char *const *)argv, (char *const *)env);
                                err = -errno;
                        }
                }
                ssize_t w = write(p[1], &err, sizeof(err));
                (void)w;
                _exit(127);
        }
        close(p[1]);
        if (ready)
                close(r[1]);
        /* EOF means the exec happened (the pipe is close-on-exec). */
        int err = 0;
        ssize_t n;
        do
                n = read(p[0], &err, sizeof(err));
        while (n < 0 && errno == EINTR);
        close(p[0]);
        if (n > 0) {
                waitpid(pid, NULL, 0);
                ck_abort_msg("starting target %s as uid %d failed: %s", path, (int)uid, strerror(-err));
        }
        itest_targets[itest_n_targets++] = pid;
        if (!ready)
                ck_assert_msg(itest_await_exec(pid, env), "target %s (pid %d) did not finish its exec", path,
                              (int)pid);
        if (ready) {
                struct pollfd pf = { .fd = r[0], .events = POLLIN };
                int k = poll(&pf, 1, ITEST_READY_TIMEOUT_MS);
                char c = 0;
                ssize_t got = k > 0 ? read(r[0], &c, 1) : -1;
                close(r[0]);
                ck_assert_msg(got == 1, "target %s did not signal readiness", path);
        }
        return pid;
}

pid_t itest_target_env(uid_t uid, const char *const *env)
{
        static const char *const argv[] = { "sleep", "3600", NULL };
        return itest_spawn_target(uid, "/bin/sleep", argv, env, false);
}

pid_t itest_target_exec(uid_t uid, const char *path, const char *const *argv, const char *const *env)
{
        return itest_spawn_target(uid, path, argv, env, true);
}

static pid_t itest_target_va(uid_t uid, const char *first, va_list ap)
{
        const char *env[32];
        size_t n = 0;
        for (const char *e = first; e && n < 31; e = va_arg(ap, const char *))
                env[n++] = e;
        env[n] = NULL;
        return itest_target_env(uid, env);
}

pid_t itest_target(const char *first, ...)
{
        va_list ap;
        va_start(ap, first);
        pid_t pid = itest_target_va((uid_t)-1, first, ap);
        va_end(ap);
        return pid;
}

pid_t itest_target_as(uid_t uid, const char *first, ...)
{
        va_list ap;
        va_start(ap, first);
        pid_t pid = itest_target_va(uid, first, ap);
        va_end(ap);
        return pid;
}

pid_t itest_sim_target(void)
{
        return itest_target("CUDACKPT_SIM=1", NULL);
}

pid_t itest_small_target(void)
{
        return itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=8", NULL);
}

pid_t itest_mapped_target(void)
{
        return itest_target(itest_sim_preload(), "CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=8", NULL);
}

void itest_target_kill(pid_t pid)
{
        for (size_t i = 0; i < itest_n_targets; i++) {
                if (itest_targets[i] != pid)
                        continue;
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                itest_targets[i] = itest_targets[--itest_n_targets];
                return;
        }
        ck_abort_msg("pid %d is not a target", (int)pid);
}

pid_t itest_dead_pid(void)
{
        pid_t pid = fork();
        ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0)
                _exit(0);
        ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
        ck_assert_msg(kill(pid, 0) < 0 && errno == ESRCH, "pid %d still exists", (int)pid);
        return pid;
}

uint64_t itest_start_time(pid_t pid)
{
        char path[64], buf[2048];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        ck_assert(n > 0);
        buf[n] = '\0';
        /* comm may hold spaces and parentheses: fields start after the last ')'. */
        char *p = strrchr(buf, ')');
        ck_assert(p);
        p++;
        /* p is before field 3; field 22 is 20 fields on. */
        for (int field = 3; field < 22; field++) {
                p = strchr(p + 1, ' ');
                ck_assert(p);
        }
        return strtoull(p + 1, NULL, 10);
}

/* ---- raw Varlink --------------------------------------------------------- */

struct itest_conn *itest_connect(struct itest_daemon *d)
{
        struct itest_conn *c = calloc(1, sizeof(*c));
        ck_assert(c);
        c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ck_assert_msg(c->fd >= 0, "socket: %s", strerror(errno));
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        strcpy(sa.sun_path, d->sock);
        ck_assert_msg(connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect %s: %s", d->sock,
                      strerror(errno));
        itest_keep_with(c, itest_free_conn);
        return c;
}

/* The child that connects as uid: it stays alive (its pid is the peer's)
 * until the test ends, and hands the socket over through fds[1]. */
static void itest_connect_child(struct itest_daemon *d, uid_t uid, int fd_out)
{
        char byte = 0;
        int fd = -1;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } u = { 0 };
        struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

        prctl(PR_SET_PDEATHSIG, SIGKILL);
        strcpy(sa.sun_path, d->sock);
        if (itest_become_with(uid, NULL, 0) == 0 &&
            (fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0 &&
            connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
                mh.msg_control = u.buf;
                mh.msg_controllen = sizeof(u.buf);
                struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(cm), &fd, sizeof(int));
        }
        if (sendmsg(fd_out, &mh, 0) < 0)
                _exit(1);
        while (read(fd_out, &byte, 1) < 0 && errno == EINTR)
                ;
        _exit(0);
}

struct itest_conn *itest_connect_as(struct itest_daemon *d, uid_t uid)
{
        int sp[2], fd = -1;
        char byte;
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } u;
        struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };

        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
        pid_t pid = fork();
        ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
                close(sp[0]);
                itest_connect_child(d, uid, sp[1]);
        }
        close(sp[1]);
        ck_assert_msg(recvmsg(sp[0], &mh, MSG_CMSG_CLOEXEC) == 1, "no word from the uid %d child", (int)uid);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        if (cm && cm->cmsg_type == SCM_RIGHTS)
                memcpy(&fd, CMSG_DATA(cm), sizeof(int));
        ck_assert_msg(fd >= 0, "uid %d could not connect to %s", (int)uid, d->sock);
        /* sp[0] stays open: the child lives until the test's process ends. */
        ck_assert_int_eq(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
        struct itest_conn *c = calloc(1, sizeof(*c));
        ck_assert(c);
        c->fd = fd;
        itest_keep_with(c, itest_free_conn);
        return c;
}

void itest_conn_close(struct itest_conn *c)
{
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
}

int itest_send_bytes(struct itest_conn *c, const void *buf, size_t len, bool bytewise)
{
        const char *p = buf;
        double deadline = itest_now_ms() + ITEST_REPLY_TIMEOUT_MS;
        while (len > 0) {
                ssize_t n = send(c->fd, p, bytewise ? 1 : len, MSG_NOSIGNAL);
                if (n > 0) {
                        p += n;
                        len -= (size_t)n;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno != EAGAIN)
                        return -errno;
                struct pollfd pf = { .fd = c->fd, .events = POLLOUT };
                int r = poll(&pf, 1, itest_left_ms(deadline));
                if (r == 0)
                        return -ETIMEDOUT;
        }
        return 0;
}

void itest_send(struct itest_conn *c, const char *json)
{
        int r = itest_send_bytes(c, json, strlen(json) + 1, false);
        ck_assert_msg(r == 0, "sending %s: %s", json, strerror(-r));
}

void itest_sendf(struct itest_conn *c, const char *fmt, ...)
{
        va_list ap;
        char *s = NULL;
        va_start(ap, fmt);
        int r = vasprintf(&s, fmt, ap);
        va_end(ap);
        ck_assert(r >= 0);
        itest_send(c, s);
        free(s);
}

int itest_recv_raw(struct itest_conn *c, int timeout_ms, cJSON **ret_reply)
{
        double deadline = itest_now_ms() + timeout_ms;
        for (;;) {
                char *nul = c->len ? memchr(c->buf, '\0', c->len) : NULL;
                if (nul) {
                        size_t mlen = (size_t)(nul - c->buf);
                        cJSON *j = cJSON_ParseWithLength(c->buf, mlen);
                        if (!j || !cJSON_IsObject(j)) {
                                cJSON_Delete(j);
                                fprintf(stderr, "itest: not a JSON object: %.*s\n", (int)mlen, c->buf);
                                memmove(c->buf, nul + 1, c->len - mlen - 1);
                                c->len -= mlen + 1;
                                return -EPROTO;
                        }
                        memmove(c->buf, nul + 1, c->len - mlen - 1);
                        c->len -= mlen + 1;
                        itest_keep_with(j, itest_free_json);
                        *ret_reply = j;
                        return 0;
                }
                if (c->fd < 0)
                        return -EBADF;
                struct pollfd p = { .fd = c->fd, .events = POLLIN };
                int r = poll(&p, 1, itest_left_ms(deadline));
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return -errno;
                if (r == 0)
                        return -ETIMEDOUT;
                if (c->cap - c->len < 65536) {
                        size_t cap = c->cap ? c->cap * 2 : 131072;
                        char *b = realloc(c->buf, cap);
                        if (!b)
                                return -ENOMEM;
                        c->buf = b;
                        c->cap = cap;
                }
                ssize_t n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
                if (n == 0 || (n < 0 && errno == ECONNRESET)) {
                        if (c->len)
                                fprintf(stderr, "itest: EOF after a partial message: %.*s\n", (int)c->len,
                                        c->buf);
                        return -ENODATA;
                }
                if (n < 0 && (errno == EINTR || errno == EAGAIN))
                        continue;
                if (n < 0)
                        return -errno;
                c->len += (size_t)n;
        }
}

cJSON *itest_recv_within(struct itest_conn *c, int timeout_ms)
{
        cJSON *j = NULL;
        int r = itest_recv_raw(c, timeout_ms, &j);
        ck_assert_msg(r != -ETIMEDOUT, "no reply within %d ms", timeout_ms);
        ck_assert_msg(r != -ENODATA, "the daemon closed the connection instead of replying");
        ck_assert_msg(r == 0, "reading a reply: %s", strerror(-r));
        return j;
}

cJSON *itest_recv(struct itest_conn *c)
{
        return itest_recv_within(c, ITEST_REPLY_TIMEOUT_MS);
}

cJSON *itest_callf(struct itest_conn *c, const char *fmt, ...)
{
        va_list ap;
        char *s = NULL;
        va_start(ap, fmt);
        int r = vasprintf(&s, fmt, ap);
        va_end(ap);
        ck_assert(r >= 0);
        itest_send(c, s);
        free(s);
        return itest_recv(c);
}

void itest_send_call(struct itest_conn *c, const char *method, const char *params)
{
        if (params)
                itest_sendf(c, "{\"method\":\"%s\",\"parameters\":%s}", method, params);
        else
                itest_sendf(c, "{\"method\":\"%s\"}", method);
}

cJSON *itest_call(struct itest_conn *c, const char *method, const char *params)
{
        itest_send_call(c, method, params);
        return itest_recv(c);
}

cJSON *itest_call_pid(struct itest_conn *c, const char *method, int pid)
{
        char params[64];
        snprintf(params, sizeof(params), "{\"pid\":%d}", pid);
        return itest_call(c, method, params);
}

cJSON *itest_await_in_flight(struct itest_conn *c, pid_t pid, const char *method, int timeout_ms)
{
        double deadline = itest_now_ms() + timeout_ms;
        cJSON *j = NULL;
        int n = 0;
        do {
                j = itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, (int)pid);
                itest_assert_ok(j);
                const char *f = itest_str(j, "in_flight");
                if (f && strcmp(f, method) == 0)
                        return j;
                /* Replies pile up in the kept list; drop the ones we pass. */
                if (itest_n_kept && itest_kept[itest_n_kept - 1].p == j) {
                        cJSON_Delete(j);
                        itest_n_kept--;
                }
                n++;
        } while (itest_now_ms() < deadline);
        ck_abort_msg("GetState did not show %s in flight within %d ms (%d calls)", method, timeout_ms, n);
}

void itest_assert_eof(struct itest_conn *c, int timeout_ms)
{
        cJSON *j = NULL;
        int r = itest_recv_raw(c, timeout_ms, &j);
        ck_assert_msg(r != 0, "expected the connection to be closed, got %s", itest_dump(j));
        ck_assert_msg(r != -ETIMEDOUT, "the connection was not closed within %d ms", timeout_ms);
        ck_assert_msg(r == -ENODATA, "expected EOF, got %s", strerror(-r));
}

bool itest_conn_readable(struct itest_conn *c)
{
        if (c->len && memchr(c->buf, '\0', c->len))
                return true;
        struct pollfd p = { .fd = c->fd, .events = POLLIN };
        return poll(&p, 1, 0) > 0;
}

const char *itest_error(const cJSON *reply)
{
        const cJSON *e = reply ? cJSON_GetObjectItemCaseSensitive(reply, "error") : NULL;
        return cJSON_IsString(e) ? e->valuestring : NULL;
}

const cJSON *itest_params(const cJSON *reply)
{
        return reply ? cJSON_GetObjectItemCaseSensitive(reply, "parameters") : NULL;
}

const char *itest_str(const cJSON *reply, const char *key)
{
        const cJSON *p = itest_params(reply);
        const cJSON *v = cJSON_IsObject(p) ? cJSON_GetObjectItemCaseSensitive(p, key) : NULL;
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

bool itest_has(const cJSON *reply, const char *key)
{
        const cJSON *p = itest_params(reply);
        return cJSON_IsObject(p) && cJSON_GetObjectItemCaseSensitive(p, key) != NULL;
}

bool itest_int(const cJSON *reply, const char *key, long long *ret)
{
        const cJSON *p = itest_params(reply);
        const cJSON *v = cJSON_IsObject(p) ? cJSON_GetObjectItemCaseSensitive(p, key) : NULL;
        if (!cJSON_IsNumber(v))
                return false;
        double d = v->valuedouble;
        if (d != (double)(long long)d)
                return false;
        *ret = (long long)d;
        return true;
}

const char *itest_dump(const cJSON *reply)
{
        if (!reply)
                return "(no reply)";
        char *s = cJSON_PrintUnformatted(reply);
        return s ? itest_keep(s) : "(unprintable)";
}

const char *itest_uuid_norm(const char *uuid)
{
        if (!uuid)
                return "(null)";
        if (strncasecmp(uuid, "GPU-", 4) == 0)
                uuid += 4;
        char *out = itest_keep(calloc(1, strlen(uuid) + 1));
        ck_assert(out);
        size_t n = 0;
        for (const char *p = uuid; *p; p++)
                if (*p != '-')
                        out[n++] = (char)((*p >= 'A' && *p <= 'Z') ? *p - 'A' + 'a' : *p);
        return out;
}

/* ---- client library ------------------------------------------------------ */

cudackpt_client *itest_client(struct itest_daemon *d)
{
        cudackpt_client *c = NULL;
        int r = cudackpt_client_connect(d->sock, &c);
        ck_assert_msg(r == 0 && c, "cudackpt_client_connect %s: %s", d->sock, strerror(-r));
        ck_assert_int_eq(cudackpt_client_set_timeout(c, ITEST_REPLY_TIMEOUT_MS), 0);
        itest_keep_with(c, itest_free_client);
        return c;
}

cJSON *itest_reply_json(const cudackpt_reply *r)
{
        ck_assert_msg(r->parameters_json, "reply without parameters_json");
        cJSON *j = cJSON_Parse(r->parameters_json);
        ck_assert_msg(cJSON_IsObject(j), "parameters_json is not an object: %s", r->parameters_json);
        /* Wrapped like a raw reply, so the raw accessors apply. */
        cJSON *w = cJSON_CreateObject();
        ck_assert(w);
        if (r->error)
                cJSON_AddStringToObject(w, "error", r->error);
        cJSON_AddItemToObject(w, "parameters", j);
        itest_keep_with(w, itest_free_json);
        return w;
}

/* ---- other uids and processes -------------------------------------------- */

bool itest_need_root(void)
{
        if (geteuid() == 0)
                return false;
        fprintf(stderr, "%s: skipped, needs root to switch uids\n", tcase_name());
        return true;
}

int itest_run_as(uid_t uid, itest_as_fn fn, void *ctx, char *msg, size_t msg_size)
{
        return itest_run_as_groups(uid, NULL, 0, fn, ctx, msg, msg_size);
}

int itest_run_as_groups(uid_t uid, const gid_t *groups, size_t n_groups, itest_as_fn fn, void *ctx, char *msg,
                        size_t msg_size)
{
        int p[2];
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        msg[0] = '\0';
        pid_t pid = fork();
        ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
                close(p[0]);
                char m[1024] = "";
                int r = itest_become_with(uid, groups, n_groups);
                if (r < 0)
                        snprintf(m, sizeof(m), "cannot become uid %d with %zu groups: %s", (int)uid, n_groups,
                                 strerror(-r));
                else
                        r = fn(ctx, m, sizeof(m));
                ssize_t w = write(p[1], m, strlen(m));
                (void)w;
                /* _exit: the test's teardown belongs to the parent. */
                _exit(r == 0 ? 0 : 1);
        }
        close(p[1]);
        size_t n = 0;
        for (;;) {
                ssize_t r = read(p[0], msg + n, msg_size - 1 - n);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        break;
                n += (size_t)r;
                if (n == msg_size - 1)
                        break;
        }
        msg[n] = '\0';
        close(p[0]);
        int status = 0;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        if (!WIFEXITED(status)) {
                snprintf(msg, msg_size, "the uid %d child died: %s", (int)uid, itest_describe_status(status));
                return -1;
        }
        return WEXITSTATUS(status) == 0 ? 0 : 1;
}

void itest_run_proc(uid_t uid, const char *const *argv, const char *const *env, int timeout_ms,
                    struct itest_proc_result *ret)
{
        int out[2], err[2];
        ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(err, O_CLOEXEC), 0);
        const char *base_env[40];
        if (!env) {
                size_t n = itest_base_env(base_env, 39);
                base_env[n] = NULL;
                env = base_env;
        }
        pid_t pid = fork();
        ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
                int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (devnull >= 0)
                        dup2(devnull, STDIN_FILENO);
                dup2(out[1], STDOUT_FILENO);
                dup2(err[1], STDERR_FILENO);
                if (uid != (uid_t)-1 && itest_become(uid) < 0) {
                        dprintf(STDERR_FILENO, "itest: cannot become uid %d\n", (int)uid);
                        _exit(126);
                }
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                execve(argv[0], (char *const *)argv, (char *const *)env);
                dprintf(STDERR_FILENO, "itest: execve %s: %s\n", argv[0], strerror(errno));
                _exit(127);
        }
        close(out[1]);
        close(err[1]);
        int pidfd = itest_pidfd_open(pid);
        ck_assert_msg(pidfd >= 0, "pidfd_open: %s", strerror(errno));
        memset(ret, 0, sizeof(*ret));
        size_t n_out = 0, n_err = 0;
        double deadline = itest_now_ms() + timeout_ms;
        bool open_out = true, open_err = true;
        while (open_out || open_err) {
                struct pollfd p[2] = { { .fd = open_out ? out[0] : -1, .events = POLLIN },
                                       { .fd = open_err ? err[0] : -1, .events = POLLIN } };
                int r = poll(p, 2, itest_left_ms(deadline));
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        break;
                for (int i = 0; i < 2; i++) {
                        if (!p[i].revents)
                                continue;
                        char *buf = i == 0 ? ret->out : ret->err;
                        size_t *len = i == 0 ? &n_out : &n_err;
                        char scratch[1024];
                        size_t room = sizeof(ret->out) - 1 - *len;
                        ssize_t k = read(p[i].fd, room ? buf + *len : scratch, room ? room : sizeof(scratch));
                        if (k <= 0) {
                                if (i == 0)
                                        open_out = false;
                                else
                                        open_err = false;
                        } else if (room) {
                                *len += (size_t)k;
                        }
                }
        }
        close(out[0]);
        close(err[0]);
        bool exited = itest_pidfd_wait(pidfd, itest_left_ms(deadline));
        close(pidfd);
        if (!exited)
                kill(pid, SIGKILL);
        int status = 0;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(exited, "%s did not exit within %d ms (stdout: %s, stderr: %s)", argv[0], timeout_ms,
                      ret->out, ret->err);
        ret->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Copies path to copy (which must not exist), mode 0755 whatever the
 * umask; closed before anyone execs or maps it (ETXTBSY). */
static void itest_copy_0755(const char *path, const char *copy)
{
        int in = open(path, O_RDONLY | O_CLOEXEC);
        ck_assert_msg(in >= 0, "open %s: %s", path, strerror(errno));
        int out = open(copy, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
        ck_assert_msg(out >= 0, "open %s: %s", copy, strerror(errno));
        for (;;) {
                char buf[65536];
                ssize_t n = read(in, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                ck_assert_msg(n >= 0, "read %s: %s", path, strerror(errno));
                if (n == 0)
                        break;
                for (ssize_t done = 0; done < n;) {
                        ssize_t w = write(out, buf + done, (size_t)(n - done));
                        if (w < 0 && errno == EINTR)
                                continue;
                        ck_assert_msg(w > 0, "write %s: %s", copy, strerror(errno));
                        done += w;
                }
        }
        close(in);
        ck_assert_msg(fchmod(out, 0755) == 0, "chmod %s: %s", copy, strerror(errno));
        ck_assert_msg(close(out) == 0, "close %s: %s", copy, strerror(errno));
}

const char *itest_stage_exe(struct itest_daemon *d, const char *path, const char *name)
{
        ck_assert_msg(d && d->dir[0], "itest_stage_exe needs the test's dir: start the daemon first");
        if (!name) {
                name = strrchr(path, '/');
                name = name ? name + 1 : path;
        }
        ck_assert_msg(*name && !strchr(name, '/'), "itest_stage_exe: bad name \"%s\"", name);
        char *copy = itest_strdupf("%s/%s", d->dir, name);
        struct stat st;
        if (stat(copy, &st) == 0)
                return copy;

        itest_copy_0755(path, copy);
        ck_assert_msg(stat(d->dir, &st) == 0 && (st.st_mode & 0755) == 0755, "%s is not open to other uids",
                      d->dir);
        return copy;
}

const char *itest_self_exe(void)
{
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        ck_assert(n > 0);
        self[n] = '\0';
        return itest_strdupf("%s", self);
}

pid_t itest_target_uids(uid_t r, uid_t e, uid_t s)
{
        const char *argv[] = { "itest-hold-uids", "--itest-hold-uids", itest_strdupf("%u", (unsigned)r),
                               itest_strdupf("%u", (unsigned)e), itest_strdupf("%u", (unsigned)s), NULL };
        static const char *const env[] = { "CUDACKPT_SIM=1", NULL };
        return itest_target_exec((uid_t)-1, itest_self_exe(), argv, env);
}

int itest_hold_uids(char **argv)
{
        uid_t r = (uid_t)strtoul(argv[2], NULL, 10);
        uid_t e = (uid_t)strtoul(argv[3], NULL, 10);
        uid_t s = (uid_t)strtoul(argv[4], NULL, 10);
        if (setgroups(0, NULL) < 0 || setresgid(ITEST_OTHER_UID, ITEST_OTHER_UID, ITEST_OTHER_UID) < 0 ||
            setresuid(r, e, s) < 0) {
                perror("itest-hold-uids");
                return 1;
        }
        return itest_ready_and_wait();
}

int itest_ready_and_wait(void)
{
        if (write(3, "1", 1) != 1)
                return 1;
        close(3);
        for (;;)
                pause();
}

/* ---- groups, process trees, other uids ------------------------------------ */

/* The sanitizer runtime this program runs with (a sanitizer build links
 * the simulator with it too), or NULL: /proc/self/maps names it. */
static const char *itest_sanitizer_runtime(void)
{
        FILE *f = fopen("/proc/self/maps", "re");
        char line[4096];
        const char *found = NULL;
        while (f && !found && fgets(line, sizeof(line), f)) {
                char *path = strchr(line, '/');
                if (!path)
                        continue;
                path[strcspn(path, "\n")] = '\0';
                const char *base = strrchr(path, '/') + 1;
                if (strncmp(base, "libasan.so", 10) == 0 || strncmp(base, "libtsan.so", 10) == 0)
                        found = itest_strdupf("%s", path);
        }
        if (f)
                fclose(f);
        return found;
}

const char *itest_sim_preload(void)
{
        const char *sim = itest_need_env("CUDACKPT_TEST_SIM");
        /* A sanitizer runtime must come first in a process's libraries:
         * a sanitizer build's simulator needs it preloaded before it. */
        const char *rt = itest_sanitizer_runtime();
        if (rt)
                return itest_strdupf("LD_PRELOAD=%s:%s", rt, sim);
        return itest_strdupf("LD_PRELOAD=%s", sim);
}

/* Whether others may read path and everything above it. */
static bool open_to_others(const char *path)
{
        char buf[4096];
        snprintf(buf, sizeof(buf), "%s", path);
        struct stat st;
        if (stat(buf, &st) < 0 || !(st.st_mode & S_IROTH))
                return false;
        for (char *slash = strrchr(buf, '/'); slash && slash != buf; slash = strrchr(buf, '/')) {
                *slash = '\0';
                if (stat(buf, &st) < 0 || !(st.st_mode & S_IXOTH))
                        return false;
        }
        return true;
}

/* LD_PRELOAD of the driver for a target of another uid: the daemon's own
 * file where that uid can open it, else a copy named libcuda.so.1 (which
 * counts as the driver by its name). */
const char *itest_sim_preload_for_others(struct itest_daemon *d)
{
        const char *sim = getenv("CUDACKPT_TEST_SIM");
        ck_assert(sim);
        const char *pre = itest_sim_preload();
        if (open_to_others(sim))
                return pre;
        /* The same list, with the copy in the simulator's place. */
        const char *at = strstr(pre, sim);
        ck_assert(at);
        return itest_strdupf("%.*s%s%s", (int)(at - pre), pre, itest_stage_exe(d, sim, "libcuda.so.1"),
                             at + strlen(sim));
}

size_t itest_children(pid_t pid, pid_t *ret, size_t max)
{
        char path[64];
        size_t n = 0;
        snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
        DIR *dir = opendir(path);
        struct dirent *e;
        while (dir && (e = readdir(dir))) {
                int tid = atoi(e->d_name);
                if (tid <= 0)
                        continue;
                char cpath[96];
                snprintf(cpath, sizeof(cpath), "/proc/%d/task/%d/children", (int)pid, tid);
                FILE *f = fopen(cpath, "re");
                if (!f)
                        continue;
                long v;
                while (n < max && fscanf(f, "%ld", &v) == 1)
                        ret[n++] = (pid_t)v;
                fclose(f);
        }
        if (dir)
                closedir(dir);
        return n;
}

cJSON *itest_await_state(struct itest_conn *c, pid_t pid, const char *state, int timeout_ms)
{
        double deadline = itest_now_ms() + timeout_ms;
        cJSON *j = NULL;
        do {
                j = itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, (int)pid);
                itest_assert_ok(j);
                const char *s = itest_str(j, "state");
                if (s && strcmp(s, state) == 0 && !itest_has(j, "in_flight"))
                        return j;
                if (itest_now_ms() >= deadline)
                        break;
                if (itest_n_kept && itest_kept[itest_n_kept - 1].p == j) {
                        cJSON_Delete(j);
                        itest_n_kept--;
                }
                /* The state changes at the end of a driver call: look often,
                 * not in a tight loop. */
                usleep(2000);
        } while (true);
        ck_abort_msg("pid %d did not reach state %s with nothing in flight within %d ms; last %s", (int)pid,
                     state, timeout_ms, itest_dump(j));
}

const cJSON *itest_get(const cJSON *reply, const char *key)
{
        const cJSON *p = itest_params(reply);
        return cJSON_IsObject(p) ? cJSON_GetObjectItemCaseSensitive(p, key) : NULL;
}

int itest_raw_call(const char *sock, const char *json, int timeout_ms, cJSON **ret_reply, char *msg,
                   size_t msg_size)
{
        *ret_reply = NULL;
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (fd < 0 || strlen(sock) >= sizeof(sa.sun_path)) {
                snprintf(msg, msg_size, "socket: %s", strerror(errno));
                if (fd >= 0)
                        close(fd);
                return -1;
        }
        strcpy(sa.sun_path, sock);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                snprintf(msg, msg_size, "connect %s: %s", sock, strerror(errno));
                close(fd);
                return -1;
        }
        size_t len = strlen(json) + 1;
        for (size_t done = 0; done < len;) {
                ssize_t w = send(fd, json + done, len - done, MSG_NOSIGNAL);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0) {
                        snprintf(msg, msg_size, "send: %s", strerror(errno));
                        close(fd);
                        return -1;
                }
                done += (size_t)w;
        }
        char *buf = NULL;
        size_t n = 0, cap = 0;
        double deadline = itest_now_ms() + timeout_ms;
        for (;;) {
                if (n && memchr(buf, '\0', n))
                        break;
                struct pollfd p = { .fd = fd, .events = POLLIN };
                int r = poll(&p, 1, itest_left_ms(deadline));
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0) {
                        snprintf(msg, msg_size, "no reply to %s within %d ms", json, timeout_ms);
                        goto fail;
                }
                if (cap - n < 65536) {
                        char *b = realloc(buf, cap + 131072);
                        if (!b) {
                                snprintf(msg, msg_size, "out of memory");
                                goto fail;
                        }
                        buf = b;
                        cap += 131072;
                }
                ssize_t k = recv(fd, buf + n, cap - n, 0);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        snprintf(msg, msg_size, "connection closed before the reply to %s", json);
                        goto fail;
                }
                n += (size_t)k;
        }
        close(fd);
        *ret_reply = cJSON_Parse(buf);
        free(buf);
        if (!cJSON_IsObject(*ret_reply)) {
                cJSON_Delete(*ret_reply);
                *ret_reply = NULL;
                snprintf(msg, msg_size, "the reply to %s is not a JSON object", json);
                return -1;
        }
        return 0;
fail:
        free(buf);
        close(fd);
        return -1;
}

char itest_proc_state(pid_t pid)
{
        char path[64], buf[512];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "re");
        ck_assert_msg(f, "%s: %s", path, strerror(errno));
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        const char *p = strrchr(buf, ')');
        ck_assert_msg(p && p[1] == ' ', "bad stat line %s", buf);
        return p[2];
}

void itest_await_proc_state(pid_t pid, char want, bool equal)
{
        double deadline = itest_now_ms() + 5000;
        char st;
        while (((st = itest_proc_state(pid)) == want) != equal) {
                ck_assert_msg(itest_now_ms() < deadline, "process %d stays in state %c", (int)pid, st);
                usleep(1000);
        }
}

/* A server on path that answers one connection: it saves the request
 * (up to its NUL) in request_file, sends each of replies with its NUL and
 * closes.  Returns its pid, to wait for. */
pid_t itest_fake_server(const char *path, const char *const *replies, const char *request_file)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        ck_assert(strlen(path) < sizeof(sa.sun_path));
        strcpy(sa.sun_path, path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_msg(fd >= 0, "socket: %s", strerror(errno));
        ck_assert_msg(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(fd, 4) == 0, "listen %s: %s",
                      path, strerror(errno));
        pid_t pid = fork();
        ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
                char buf[4096];
                size_t len = 0;
                int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
                if (c < 0)
                        _exit(1);
                while (len < sizeof(buf) && !memchr(buf, '\0', len)) {
                        ssize_t n = read(c, buf + len, sizeof(buf) - len);
                        if (n <= 0)
                                _exit(1);
                        len += (size_t)n;
                }
                FILE *f = fopen(request_file, "we");
                if (!f || fputs(buf, f) < 0 || fclose(f) != 0)
                        _exit(1);
                for (size_t i = 0; replies[i]; i++)
                        if (send(c, replies[i], strlen(replies[i]) + 1, MSG_NOSIGNAL) < 0)
                                _exit(1);
                close(c);
                _exit(0);
        }
        close(fd);
        return pid;
}

/* The child of itest_fake_server_calls(): a request, then a reply, for each
 * reply; the requests into request_file, one a line. */
static int fake_server_calls(int fd, const char *const *replies, const char *request_file)
{
        char buf[8192];
        size_t len = 0;
        int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
        FILE *f = fopen(request_file, "we");

        if (c < 0 || !f)
                return 1;
        for (size_t i = 0; replies[i]; i++) {
                char *nul;
                while (!(nul = memchr(buf, '\0', len))) {
                        ssize_t n = len < sizeof(buf) ? read(c, buf + len, sizeof(buf) - len) : -1;
                        if (n <= 0)
                                return 1;
                        len += (size_t)n;
                }
                if (fprintf(f, "%s\n", buf) < 0 || fflush(f) != 0)
                        return 1;
                len -= (size_t)(nul + 1 - buf);
                memmove(buf, nul + 1, len);
                if (send(c, replies[i], strlen(replies[i]) + 1, MSG_NOSIGNAL) < 0)
                        return 1;
        }
        close(c);
        return fclose(f) == 0 ? 0 : 1;
}

pid_t itest_fake_server_calls(const char *path, const char *const *replies, const char *request_file)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        ck_assert(strlen(path) < sizeof(sa.sun_path));
        strcpy(sa.sun_path, path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_msg(fd >= 0, "socket: %s", strerror(errno));
        ck_assert_msg(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(fd, 4) == 0, "listen %s: %s",
                      path, strerror(errno));
        pid_t pid = fork();
        ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0)
                _exit(fake_server_calls(fd, replies, request_file));
        close(fd);
        return pid;
}

void itest_await_fake_server(pid_t pid)
{
        int status = 0;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the fake server: %s",
                      itest_describe_status(status));
}
