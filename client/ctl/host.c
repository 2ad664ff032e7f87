/* host.c: a small file's contents, a program on $PATH, a program's output
 * within a time limit (host.h). */
#include "host.h"
#include "fdio.h"
#include "monotime.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* $PATH when it is not set. */
#define HOST_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* Reads at most size - 1 bytes of path into buf, NUL-terminated; returns
 * the length or -errno. */
ssize_t ctl_host_read_file(const char *path, char *buf, size_t size) {
        return fdio_read_at(AT_FDCWD, path, buf, size);
}

/* The first executable regular file called name in a directory of $PATH
 * (a default list when unset) into buf.  Empty components, which mean the
 * current directory, are not searched.  -ENOENT when there is none. */
int ctl_host_find_program(const char *name, char *buf, size_t size) {
        const char *path = secure_getenv("PATH");

        if (!path || !*path)
                path = HOST_DEFAULT_PATH;
        for (const char *p = path; *p;) {
                const char *end = strchrnul(p, ':');
                size_t len = (size_t) (end - p);
                struct stat st;
                int n;

                if (len > 0) {
                        n = snprintf(buf, size, "%.*s/%s", (int) len, p, name);
                        if (n > 0 && (size_t) n < size && stat(buf, &st) == 0 && S_ISREG(st.st_mode) &&
                            access(buf, X_OK) == 0)
                                return 0;
                }
                p = *end ? end + 1 : end;
        }
        return -ENOENT;
}

int ctl_host_find_criu(char *buf, size_t size) {
        const char *env = secure_getenv(CTL_HOST_CRIU_ENV);
        struct stat st;

        if (!env || !*env)
                return ctl_host_find_program("criu", buf, size);
        if ((size_t) snprintf(buf, size, "%s", env) >= size)
                return -ENAMETOOLONG;
        return stat(buf, &st) == 0 && S_ISREG(st.st_mode) && access(buf, X_OK) == 0 ? 0 : -ENOENT;
}

/* The file actions of s: stdin /dev/null and stdout (and stderr) the pipe
 * p when capturing, else stderr /dev/null with stdout; stdin and stdout
 * s->stdio_fd when it is set; keep a dup of
 * s->keep_fd put back at its number. */
static int host_file_actions(const ctl_spawn *s, posix_spawn_file_actions_t *fa, const int p[2], int keep) {
        int r = 0;

        /* dup2 clears O_CLOEXEC on what the child gets. */
        if (s->capture) {
                r = posix_spawn_file_actions_addopen(fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
                if (r == 0)
                        r = posix_spawn_file_actions_adddup2(fa, p[1], STDOUT_FILENO);
                if (r == 0)
                        r = s->capture_stderr ? posix_spawn_file_actions_adddup2(fa, p[1], STDERR_FILENO)
                                              : posix_spawn_file_actions_addopen(fa, STDERR_FILENO, "/dev/null",
                                                                                 O_WRONLY, 0);
        } else if (s->stdio_fd > 0) {
                r = posix_spawn_file_actions_adddup2(fa, s->stdio_fd, STDIN_FILENO);
                if (r == 0)
                        r = posix_spawn_file_actions_adddup2(fa, s->stdio_fd, STDOUT_FILENO);
        }
        if (r == 0 && keep >= 0)
                r = posix_spawn_file_actions_adddup2(fa, keep, s->keep_fd);
        return r;
}

/* The attributes of s: its own process group, its signals back to SIG_DFL. */
static int host_attr(const ctl_spawn *s, posix_spawnattr_t *attr) {
        short flags = 0;
        sigset_t def;
        int r = 0;

        sigemptyset(&def);
        for (size_t i = 0; i < s->n_default_signals; i++)
                sigaddset(&def, s->default_signals[i]);
        if (s->own_group)
                flags |= POSIX_SPAWN_SETPGROUP;
        if (s->n_default_signals)
                flags |= POSIX_SPAWN_SETSIGDEF;
        r = posix_spawnattr_setflags(attr, flags);
        if (r == 0 && s->own_group)
                r = posix_spawnattr_setpgroup(attr, 0);
        if (r == 0 && s->n_default_signals)
                r = posix_spawnattr_setsigdefault(attr, &def);
        return r;
}

int ctl_host_spawn(const ctl_spawn *s, pid_t *ret_pid, int *ret_fd) {
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        int p[2] = { -1, -1 }, keep = -1, r;

        if (s->capture && pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        /* The kept descriptor is dup'ed back onto its number in the child:
         * so it is inherited whatever its O_CLOEXEC. */
        if (s->keep_fd >= 0 && (keep = fcntl(s->keep_fd, F_DUPFD_CLOEXEC, 0)) < 0) {
                r = errno;
                goto out;
        }
        r = posix_spawn_file_actions_init(&fa);
        if (r != 0)
                goto out;
        r = posix_spawnattr_init(&attr);
        if (r == 0) {
                r = host_file_actions(s, &fa, p, keep);
                if (r == 0)
                        r = host_attr(s, &attr);
                if (r == 0)
                        r = (s->search ? posix_spawnp : posix_spawn)(ret_pid, s->path, &fa, &attr, s->argv,
                                                                      s->env ? s->env : environ);
                posix_spawnattr_destroy(&attr);
        }
        posix_spawn_file_actions_destroy(&fa);
out:
        if (keep >= 0)
                close(keep);
        if (p[1] >= 0)
                close(p[1]);
        if (r != 0 && p[0] >= 0)
                close(p[0]);
        else if (s->capture)
                *ret_fd = p[0];
        return -r;
}

/* Reads fd into out (size - 1 bytes at most, NUL-terminated) until its end
 * or the deadline; false when the deadline came first. */
static bool host_collect(int fd, char *out, size_t size, long long deadline) {
        size_t len = 0;
        bool in_time = true;

        for (;;) {
                struct pollfd pfd = { .fd = fd, .events = POLLIN };
                long long left = deadline - monotime_ms();
                char scratch[512];
                ssize_t k;
                int r;

                if (left <= 0) {
                        in_time = false;
                        break;
                }
                r = poll(&pfd, 1, left > INT_MAX ? INT_MAX : (int) left);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        break;
                if (r == 0) {
                        in_time = false;
                        break;
                }
                /* What does not fit is read and dropped, so the program never blocks on a full pipe. */
                k = len < size - 1 ? read(fd, out + len, size - 1 - len) : read(fd, scratch, sizeof(scratch));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                if (len < size - 1)
                        len += (size_t) k;
        }
        out[len] = '\0';
        return in_time;
}

int ctl_host_run_program(const char *path, char *const argv[], char *out, size_t size, int timeout_ms) {
        long long deadline = monotime_ms() + timeout_ms;
        bool timed_out;
        int fd, r, status;
        pid_t pid;

        out[0] = '\0';
        r = ctl_host_spawn(&(ctl_spawn) { .path = path, .argv = argv, .capture = true, .own_group = true,
                                          .keep_fd = -1 },
                           &pid, &fd);
        if (r < 0)
                return r;
        timed_out = !host_collect(fd, out, size, deadline);
        close(fd);
        if (timed_out)
                (void) kill(-pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return timed_out ? -ETIMEDOUT : status;
}
