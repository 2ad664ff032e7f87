/* harness_run.c: functions and programs the integration tests run in
 * processes of their own, as other uids: itest_run_as(), itest_run_proc(),
 * and the executables staged for them (see harness.h). */
#include "harness_internal.h"

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
        pid_t pid = itest_fork_stdio(out[1], err[1]);
        if (pid == 0) {
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

