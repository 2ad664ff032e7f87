/* sdtest.c: process, socket and file helpers of the systemd tests (see
 * sdtest.h).  Deadlines are absolute CLOCK_MONOTONIC milliseconds. */
#include "sdtest.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "read_file.h"

#define SDT_MAX_CHILDREN 16

static char tmpdir_path[PATH_MAX];
static struct sdt_child *children[SDT_MAX_CHILDREN];
static pid_t main_pid;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        (void)st;
        (void)ftw;
        /* Best effort: a leftover file must not fail a test that passed. */
        if (flag == FTW_DP)
                (void)rmdir(path);
        else
                (void)unlink(path);
        return 0;
}

static void cleanup(void)
{
        /* Only the test process itself cleans up, not a child that failed
         * before exec. */
        if (getpid() != main_pid)
                return;
        for (int i = 0; i < SDT_MAX_CHILDREN; i++)
                if (children[i])
                        sdt_kill(children[i]);
        if (tmpdir_path[0])
                (void)nftw(tmpdir_path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void sdt_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
        va_list ap;

        fprintf(stderr, "FAIL %s:%d: ", file, line);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, " (%s)\n", cond);
        exit(1);
}

void sdt_skip(const char *fmt, ...)
{
        va_list ap;

        fprintf(stdout, "SKIP: ");
        va_start(ap, fmt);
        vfprintf(stdout, fmt, ap);
        va_end(ap);
        fprintf(stdout, "\n");
        exit(SDT_SKIP);
}

int64_t sdt_now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int remaining(int64_t deadline)
{
        int64_t left = deadline - sdt_now_ms();

        return left < 0 ? 0 : (int)left;
}

const char *sdt_tmpdir(void)
{
        const char *base = getenv("TMPDIR");

        if (tmpdir_path[0])
                return tmpdir_path;
        if (!main_pid) {
                main_pid = getpid();
                atexit(cleanup);
        }
        /* Short: the sockets inside must fit in sun_path (108 bytes). */
        if (!base || !*base || strlen(base) > 60)
                base = "/tmp";
        snprintf(tmpdir_path, sizeof(tmpdir_path), "%s/cudackpt-sd-XXXXXX", base);
        SDT_CHECK(mkdtemp(tmpdir_path) != NULL, "mkdtemp: %s", strerror(errno));
        return tmpdir_path;
}

static void register_child(struct sdt_child *c)
{
        if (!main_pid) {
                main_pid = getpid();
                atexit(cleanup);
        }
        for (int i = 0; i < SDT_MAX_CHILDREN; i++)
                if (!children[i]) {
                        children[i] = c;
                        return;
                }
        sdt_fail(__FILE__, __LINE__, "n < SDT_MAX_CHILDREN", "too many children");
}

static void unregister_child(struct sdt_child *c)
{
        for (int i = 0; i < SDT_MAX_CHILDREN; i++)
                if (children[i] == c)
                        children[i] = NULL;
}

static void child_setup(const struct sdt_spawn_opts *opts)
{
        static const char *const drop[] = { "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID",
                                            "LISTEN_FDS",    "LISTEN_PID",    "LISTEN_FDNAMES" };
        char buf[32];

        /* If the test dies, its daemon and targets go with it. */
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
                (void)unsetenv(drop[i]);
        for (const char *const *e = opts ? opts->setenv : NULL; e && *e; e++)
                (void)putenv((char *)*e);
        if (opts && opts->watchdog_pid_self) {
                /* After fork, before exec: the pid the daemon will have. */
                snprintf(buf, sizeof(buf), "%d", (int)getpid());
                (void)setenv("WATCHDOG_PID", buf, 1);
        }
        if (opts && opts->log_path) {
                int fd = open(opts->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                if (fd >= 0) {
                        (void)dup2(fd, STDOUT_FILENO);
                        (void)dup2(fd, STDERR_FILENO);
                }
        }
}

void sdt_spawn(const char *const *argv, const struct sdt_spawn_opts *opts,
               struct sdt_child *ret_child)
{
        int pipefd[2], err = 0;
        ssize_t n;
        pid_t pid;

        SDT_CHECK(pipe2(pipefd, O_CLOEXEC) == 0, "pipe2: %s", strerror(errno));
        fflush(NULL);
        pid = fork();
        SDT_CHECK(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
                close(pipefd[0]);
                child_setup(opts);
                execvp(argv[0], (char *const *)argv);
                err = errno;
                (void)!write(pipefd[1], &err, sizeof(err));
                _exit(127);
        }
        close(pipefd[1]);
        /* EOF: the CLOEXEC end closed because exec succeeded. */
        do
                n = read(pipefd[0], &err, sizeof(err));
        while (n < 0 && errno == EINTR);
        close(pipefd[0]);
        ret_child->pid = pid;
        ret_child->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        SDT_CHECK(ret_child->pidfd >= 0, "pidfd_open: %s", strerror(errno));
        register_child(ret_child);
        SDT_CHECK(n == 0, "cannot run %s: %s", argv[0], strerror(err));
}

int sdt_wait_exit(struct sdt_child *c, int timeout_ms)
{
        struct pollfd p = { .fd = c->pidfd, .events = POLLIN };
        int64_t deadline = sdt_now_ms() + timeout_ms;
        int status, r;

        for (;;) {
                r = poll(&p, 1, remaining(deadline));
                if (r > 0)
                        break;
                if (r == 0)
                        return -ETIMEDOUT;
                SDT_CHECK(errno == EINTR, "poll: %s", strerror(errno));
        }
        SDT_CHECK(waitpid(c->pid, &status, 0) == c->pid, "waitpid: %s", strerror(errno));
        close(c->pidfd);
        c->pidfd = -1;
        unregister_child(c);
        return status;
}

void sdt_kill(struct sdt_child *c)
{
        if (c->pidfd < 0)
                return;
        (void)syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
        (void)waitpid(c->pid, NULL, 0);
        close(c->pidfd);
        c->pidfd = -1;
        unregister_child(c);
}

char *sdt_read_file(const char *path)
{
        char *buf;
        ssize_t len = test_read_file(path, &buf);

        SDT_CHECK(len != -ENOMEM, "out of memory");
        if (len < 0)
                return NULL;
        /* Callers of environ-like files see NULs; keep the length reachable
         * by replacing them (entries never contain newlines here). */
        for (ssize_t i = 0; i < len; i++)
                if (buf[i] == '\0')
                        buf[i] = '\n';
        return buf;
}

static bool environ_has_now(const char *path, const char *entry)
{
        char *text, *line, *save = NULL;
        bool found = false;

        text = sdt_read_file(path);
        if (!text)
                return false;
        for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
                if (strcmp(line, entry) == 0)
                        found = true;
        free(text);
        return found;
}

bool sdt_environ_has(pid_t pid, const char *entry)
{
        int64_t deadline = sdt_now_ms() + SDT_ENVIRON_WAIT_MS;
        char path[64];

        snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
        /* The exec's close-on-exec descriptors close (sdt_spawn's pipe)
         * before the kernel sets the new image's environment: until then
         * /proc/PID/environ reads empty. */
        while (!environ_has_now(path, entry)) {
                if (sdt_now_ms() >= deadline)
                        return false;
                usleep(10000);
        }
        return true;
}

static bool is_socket_file(const char *path)
{
        struct stat st;

        return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

static bool is_listening(const char *path)
{
        char line[PATH_MAX + 128];
        bool found = false;
        FILE *f = fopen("/proc/net/unix", "re");

        if (!f)
                return true; /* nothing to check against: let connect() say */
        while (!found && fgets(line, sizeof(line), f)) {
                unsigned long flags;
                int off = 0;
                char *name;

                /* Num RefCount Protocol Flags Type St Inode Path */
                if (sscanf(line, "%*s %*s %*s %lx %*s %*s %*s %n", &flags, &off) < 1 || off == 0)
                        continue;
                name = line + off;
                name[strcspn(name, "\n")] = '\0';
                found = (flags & 0x10000) && strcmp(name, path) == 0;
        }
        fclose(f);
        return found;
}

void sdt_wait_socket_file(const char *path, int timeout_ms)
{
        int64_t deadline = sdt_now_ms() + timeout_ms;
        char dir[PATH_MAX], *slash;
        int fd;

        snprintf(dir, sizeof(dir), "%s", path);
        slash = strrchr(dir, '/');
        SDT_CHECK(slash != NULL, "socket path %s must be absolute", path);
        *slash = '\0';
        fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        SDT_CHECK(fd >= 0, "inotify_init1: %s", strerror(errno));
        SDT_CHECK(inotify_add_watch(fd, dir, IN_CREATE | IN_MOVED_TO | IN_ATTRIB) >= 0,
                  "inotify_add_watch %s: %s", dir, strerror(errno));
        /* Checked after the watch is in place, so a creation in between is
         * not missed. */
        while (!is_socket_file(path)) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                char ev[4096];
                int r = poll(&p, 1, remaining(deadline));
                SDT_CHECK(r != 0, "%s did not appear within %d ms", path, timeout_ms);
                SDT_CHECK(r > 0 || errno == EINTR, "poll: %s", strerror(errno));
                while (read(fd, ev, sizeof(ev)) > 0)
                        ;
        }
        close(fd);
        /* The file appears at bind(); a connect() before listen() is refused.
         * No file event marks listen(), so await the listening entry in
         * /proc/net/unix (flag __SO_ACCEPTCON, 0x10000). */
        while (!is_listening(path)) {
                SDT_CHECK(remaining(deadline) > 0, "%s was not listening within %d ms", path,
                          timeout_ms);
                poll(NULL, 0, 2);
        }
}

int sdt_unix_socket(const char *path, int type, struct sockaddr_un *ret_sa)
{
        int fd;

        *ret_sa = (struct sockaddr_un){ .sun_family = AF_UNIX };
        SDT_CHECK(strlen(path) < sizeof(ret_sa->sun_path), "socket path %s too long", path);
        strcpy(ret_sa->sun_path, path);
        fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
        SDT_CHECK(fd >= 0, "socket: %s", strerror(errno));
        return fd;
}

int sdt_connect(const char *path)
{
        struct sockaddr_un sa;
        int fd = sdt_unix_socket(path, SOCK_STREAM, &sa);

        SDT_CHECK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect %s: %s", path,
                  strerror(errno));
        return fd;
}

cJSON *sdt_call(int fd, const char *method, const char *parameters_json, int timeout_ms)
{
        int64_t deadline = sdt_now_ms() + timeout_ms;
        char *msg, buf[65536];
        size_t len = 0, sent = 0, mlen;
        cJSON *reply;
        int r;

        r = asprintf(&msg, "{\"method\":\"%s\",\"parameters\":%s}", method,
                     parameters_json ? parameters_json : "{}");
        SDT_CHECK(r > 0, "out of memory");
        mlen = (size_t)r + 1; /* the NUL terminates the Varlink message */
        while (sent < mlen) {
                struct pollfd p = { .fd = fd, .events = POLLOUT };
                r = poll(&p, 1, remaining(deadline));
                SDT_CHECK(r != 0, "%s: timed out sending", method);
                if (r < 0 && errno == EINTR)
                        continue;
                ssize_t n = send(fd, msg + sent, mlen - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        continue;
                SDT_CHECK(n > 0, "%s: send: %s", method, strerror(errno));
                sent += (size_t)n;
        }
        free(msg);
        while (len == 0 || memchr(buf, '\0', len) == NULL) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                SDT_CHECK(len < sizeof(buf) - 1, "%s: reply too long", method);
                r = poll(&p, 1, remaining(deadline));
                SDT_CHECK(r != 0, "%s: no reply within %d ms", method, timeout_ms);
                if (r < 0 && errno == EINTR)
                        continue;
                ssize_t n = recv(fd, buf + len, sizeof(buf) - 1 - len, MSG_DONTWAIT);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        continue;
                SDT_CHECK(n > 0, "%s: connection closed before the reply (%s)", method,
                          n == 0 ? "EOF" : strerror(errno));
                len += (size_t)n;
        }
        reply = cJSON_Parse(buf);
        SDT_CHECK(reply != NULL && cJSON_IsObject(reply), "%s: reply is not a JSON object: %s",
                  method, buf);
        return reply;
}
