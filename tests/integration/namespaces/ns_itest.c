/* ns_itest.c: the pid namespaces of test_namespaces.c (see ns_itest.h). */
#include "ns_itest.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

int ns_fail(char *msg, size_t size, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, size, fmt, ap);
        va_end(ap);
        return -1;
}

/* The host pid of a child of this process (its pidfd's fdinfo, through
 * the host's /proc), or -1. */
/* The host's /proc, opened before the namespace's pid 1 mounts its own
 * over it (own_proc()); until then the host's /proc anyway. */
static int host_proc_fd = AT_FDCWD;

pid_t ns_host_pid_of(pid_t child)
{
        char path[64], buf[1024];
        int pfd = (int)syscall(SYS_pidfd_open, child, 0), fd;
        ssize_t n = -1;

        /* The host's /proc (its fdinfo shows pids as its namespace does). */
        snprintf(path, sizeof(path), "self/fdinfo/%d", pfd);
        if (pfd >= 0 && (fd = openat(host_proc_fd, path, O_RDONLY | O_CLOEXEC)) >= 0) {
                n = read(fd, buf, sizeof(buf) - 1);
                close(fd);
        }
        if (pfd >= 0)
                close(pfd);
        const char *p = n > 0 ? (buf[n] = '\0', strstr(buf, "\nPid:")) : NULL;
        return p ? (pid_t)atoi(p + 5) : -1;
}

/* A simulated CUDA process started from inside the namespace: its pid
 * there, or -1.  Returns once it has exec'd (the simulator reads its
 * environment, which is the parent's until then): the end of a close-on-exec
 * pipe says so. */
pid_t ns_target(const struct ns_ctx *x)
{
        const char *preload = x->preload;
        int p[2];
        char c;
        pid_t pid;

        if (pipe2(p, O_CLOEXEC) < 0)
                return -1;
        pid = fork();
        if (pid == 0) {
                char *argv[] = { "sleep", "1000", NULL };
                char *env[] = { "CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=8", (char *)preload, "PATH=/usr/bin:/bin",
                                NULL };
                close(p[0]);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                execve("/bin/sleep", argv, env);
                _exit(127);
        }
        close(p[1]);
        while (pid > 0 && read(p[0], &c, 1) < 0 && errno == EINTR)
                ;
        close(p[0]);
        /* The exec has begun; await its end (this /proc is the
         * namespace's: by its pid here). */
        if (pid > 0) {
                const char *env[] = { preload, NULL };
                if (!itest_await_exec(pid, env))
                        return -1;
        }
        return pid;
}

/* One call; 0 with the reply (caller frees), or -1 with why in msg. */
int ns_call(struct ns_ctx *x, const char *method, const char *params, cJSON **ret, char *msg, size_t size)
{
        char *json = itest_strdupf("{\"method\":\"io.cudackpt.Process.%s\",\"parameters\":%s}", method, params);
        int r = itest_raw_call(x->sock, json, ITEST_REPLY_TIMEOUT_MS, ret, msg, size);

        free(json);
        return r;
}

/* Calls method on pid and checks the reply: error (NULL: success) and, on
 * success, state (NULL: not checked) and "pid" == pid. */
int ns_expect(struct ns_ctx *x, const char *method, pid_t pid, const char *error, const char *state, char *msg,
              size_t size)
{
        char params[64];
        cJSON *rep = NULL;
        const cJSON *p;
        int r = 0;

        snprintf(params, sizeof(params), "{\"pid\":%d}", (int)pid);
        if (ns_call(x, method, params, &rep, msg, size) < 0)
                return -1;
        const char *got = itest_error(rep);
        if ((error == NULL) != (got == NULL) || (error && strcmp(got, error) != 0))
                r = ns_fail(msg, size, "%s(%d) in the namespace: wanted %s, got %s", method, (int)pid,
                         error ? error : "success", itest_dump(rep));
        else if (!error && state && (!itest_str(rep, "state") || strcmp(itest_str(rep, "state"), state) != 0))
                r = ns_fail(msg, size, "%s(%d): wanted state %s: %s", method, (int)pid, state, itest_dump(rep));
        else if ((p = itest_get(rep, "pid")) && (!cJSON_IsNumber(p) || p->valuedouble != (double)pid))
                r = ns_fail(msg, size, "%s(%d): the reply names another pid: %s", method, (int)pid, itest_dump(rep));
        cJSON_Delete(rep);
        return r;
}

static int write_file(const char *path, const char *text)
{
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        ssize_t n;

        if (fd < 0)
                return -errno;
        n = write(fd, text, strlen(text));
        close(fd);
        return n == (ssize_t)strlen(text) ? 0 : -EIO;
}

static int enter(const struct ns_run *how, bool first, char *msg, size_t size)
{
        if (first && how->userns) {
                char map[64];
                /* Changing uids made this process undumpable, which makes
                 * its /proc files root's: it could not write its maps. */
                prctl(PR_SET_DUMPABLE, 1);
                if (unshare(CLONE_NEWUSER) < 0)
                        return ns_fail(msg, size, "unshare(CLONE_NEWUSER) as uid %u: %s", (unsigned)how->uid,
                                    strerror(errno));
                snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)how->uid);
                if (write_file("/proc/self/setgroups", "deny") < 0 || write_file("/proc/self/uid_map", map) < 0)
                        return ns_fail(msg, size, "cannot write the uid map: %s", strerror(errno));
                snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)how->uid);
                if (write_file("/proc/self/gid_map", map) < 0)
                        return ns_fail(msg, size, "cannot write the gid map: %s", strerror(errno));
        }
        if (unshare(CLONE_NEWPID) < 0)
                return ns_fail(msg, size, "unshare(CLONE_NEWPID): %s", strerror(errno));
        return 0;
}

/* The namespace's pid 1: a /proc of its own, in a mount namespace of its
 * own, as a container has (the CUDA driver, and so the simulator, needs
 * /proc/<getpid()> to be the calling process). */
static int own_proc(char *msg, size_t size)
{
        if (host_proc_fd == AT_FDCWD)
                host_proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (host_proc_fd < 0 || unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                return ns_fail(msg, size, "a /proc of the namespace's own: %s", strerror(errno));
        return 0;
}

/* The body of the namespace's pid 1 (or of the intermediate level). */
static int ns_level(const struct ns_run *how, int level, ns_fn fn, struct ns_ctx *x, char *msg, size_t size)
{
        int p[2], st, r;
        pid_t pid;

        if (enter(how, level == 1, msg, size) < 0)
                return -1;
        if (pipe2(p, O_CLOEXEC) < 0)
                return ns_fail(msg, size, "pipe: %s", strerror(errno));
        pid = fork();
        if (pid < 0)
                return ns_fail(msg, size, "fork: %s", strerror(errno));
        if (pid == 0) {
                char m[2048] = "";
                close(p[0]);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (own_proc(m, sizeof(m)) < 0)
                        r = -1;
                else if (level < how->depth)
                        r = ns_level(how, level + 1, fn, x, m, sizeof(m));
                else if (getpid() != 1)
                        r = ns_fail(m, sizeof(m), "pid %d, not 1, in the new namespace", (int)getpid());
                else
                        r = fn(x, m, sizeof(m));
                ssize_t w = write(p[1], m, strlen(m));
                (void)w;
                _exit(r == 0 ? 0 : 1);
        }
        close(p[1]);
        ssize_t n = read(p[0], msg, size - 1);
        msg[n > 0 ? n : 0] = '\0';
        close(p[0]);
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                return msg[0] ? -1 : ns_fail(msg, size, "the namespace's pid 1 %s", itest_describe_status(st));
        return 0;
}

static int ns_run_as(void *ctx, char *msg, size_t size);

struct ns_job {
        const struct ns_run *how;
        ns_fn fn;
        struct ns_ctx *x;
};

static int ns_run_as(void *ctx, char *msg, size_t size)
{
        struct ns_job *j = ctx;

        return ns_level(j->how, 1, j->fn, j->x, msg, size);
}

void ns_run_in(const struct ns_run *how, ns_fn fn, struct ns_ctx *x)
{
        char msg[2048];
        struct ns_job j = { how, fn, x };
        int r;

        if (how->uid != 0)
                r = itest_run_as(how->uid, ns_run_as, &j, msg, sizeof(msg));
        else
                r = ns_level(how, 1, fn, x, msg, sizeof(msg));
        ck_assert_msg(r == 0, "in the namespace: %s", msg);
}

