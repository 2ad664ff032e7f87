/* criu_target.c: the process test_criu.c has CRIU dump and restore.
 *
 *   criu_target single|tree WATCH_PID RESULT_FILE MIB [DRIVER_FILE]
 *
 * DRIVER_FILE (the simulator's library, as the daemon loaded it) is mapped
 * as code, not loaded, before any fork: the daemon counts a process that
 * maps its driver as a CUDA process of a --tree or --cgroup selection, and
 * nothing of a sanitizer build's library runs here.
 *
 * Started by the test with CUDACKPT_SIM=1 (and the simulator's state slot)
 * in its environment, in a session of its own (the test calls setsid), with
 * /dev/null on fds 0-2 and a pipe on fd 3: what CRIU can dump without
 * --shell-job or external files.  It holds no other fd while it waits.
 *
 * Each process ("tree" makes the first fork two children first, three
 * simulated CUDA processes in all) fills MIB MiB with a pattern of its own,
 * starts a second thread (the sim's restore thread is the highest tid),
 * writes "PID\n" on fd 3 and closes it: the test reads the pipe to its EOF,
 * so it learns every pid and knows none holds the pipe any more.  On each
 * SIGUSR1 it checks the pattern and appends one line to RESULT_FILE,
 * opened and closed for the write: "ok PID N" or "mismatch PID N at
 * OFFSET", N counting the checks (so a restored process shows that its
 * counter came back too); the same line goes to its standard output (a
 * run --output job's log, which CRIU reopens by its path).  To RESULT_FILE
 * alone there follows "proc PID N own" when /proc/self and /proc/PID are
 * the same directory (the /proc it sees is its pid namespace's, as the CUDA
 * driver needs), else "proc PID N other".
 *
 * The second thread watches WATCH_PID (the test) and ends the process once
 * it is gone: a restored process is in no process group the test's runner
 * kills, and no parent-death signal can do it (CRIU restores that signal,
 * and the restored process's first parent is criu itself, which exits).
 *
 * With CRIU_TARGET_BIND=PATH in its environment, it first binds a unix
 * socket there and listens on it (a socket criu binds again on restore).
 * With CRIU_TARGET_TCP=PORT, it listens on 127.0.0.1:PORT (SO_REUSEADDR);
 * with CRIU_TARGET_UDP=PORT, it binds a UDP socket there; with
 * CRIU_TARGET_REUSEPORT=1, both have SO_REUSEPORT too; with
 * CRIU_TARGET_CONNECT=LPORT:RPORT, a TCP socket bound to 127.0.0.1:LPORT
 * connects to 127.0.0.1:RPORT.  With CRIU_TARGET_SCM=PATH, it opens PATH
 * (read only) and sends that descriptor over a socket pair it keeps,
 * never receiving it: a descriptor in flight, its own closed.
 *
 * Not linked with the sanitizers: CRIU would have to walk their terabytes
 * of shadow mappings. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static uint64_t *buf;
static size_t n_words;
static uint64_t seed;
static unsigned long checks;
static pid_t watch_pid;
static const char *result_path;

static uint64_t pattern(size_t i)
{
        /* splitmix64 of (seed, index) */
        uint64_t z = seed + (uint64_t)i * 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
}

static int fill(size_t mib, unsigned role)
{
        n_words = mib * 1024 * 1024 / sizeof(uint64_t);
        buf = mmap(NULL, n_words * sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (buf == MAP_FAILED)
                return -1;
        seed = 0x43524955ull * (role + 1) + 0x5157;
        for (size_t i = 0; i < n_words; i++)
                buf[i] = pattern(i);
        return 0;
}

/* Whether /proc/self and /proc/<getpid()> are one directory. */
static bool proc_is_own(void)
{
        char path[32];
        struct stat self, mine;
        snprintf(path, sizeof(path), "/proc/%d", (int)getpid());
        return stat("/proc/self", &self) == 0 && stat(path, &mine) == 0 && self.st_dev == mine.st_dev &&
               self.st_ino == mine.st_ino;
}

static void report(void)
{
        char line[128];
        size_t bad = n_words;
        for (size_t i = 0; i < n_words; i++)
                if (buf[i] != pattern(i)) {
                        bad = i;
                        break;
                }
        checks++;
        int n;
        if (bad == n_words)
                n = snprintf(line, sizeof(line), "ok %d %lu\n", (int)getpid(), checks);
        else
                n = snprintf(line, sizeof(line), "mismatch %d %lu at %zu\n", (int)getpid(), checks,
                             bad * sizeof(uint64_t));
        ssize_t w = write(STDOUT_FILENO, line, (size_t)n);
        /* Then whether /proc/<getpid()> is this process, as the CUDA driver
         * needs (a pid namespace of its own with the node's /proc: no). */
        n += snprintf(line + n, sizeof(line) - (size_t)n, "proc %d %lu %s\n", (int)getpid(), checks,
                      proc_is_own() ? "own" : "other");
        int fd = open(result_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
                return;
        w = write(fd, line, (size_t)n);
        (void)w;
        close(fd);
}

static void *watch(void *arg)
{
        (void)arg;
        const struct timespec tick = { 0, 100 * 1000 * 1000 };
        for (;;) {
                if (kill(watch_pid, 0) < 0 && errno == ESRCH)
                        _exit(0);
                nanosleep(&tick, NULL);
        }
        return NULL;
}

/* Fill, second thread, "PID\n" on fd 3, then answer SIGUSR1 for ever. */
static int run(size_t mib, unsigned role)
{
        if (fill(mib, role) < 0) {
                close(3);
                return 1;
        }
        pthread_t th;
        if (pthread_create(&th, NULL, watch, NULL) != 0) {
                close(3);
                return 1;
        }
        char line[32];
        int n = snprintf(line, sizeof(line), "%d\n", (int)getpid());
        if (write(3, line, (size_t)n) != n)
                return 1;
        close(3);

        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGUSR1);
        for (;;) {
                int sig = sigwaitinfo(&set, NULL);
                if (sig == SIGUSR1)
                        report();
        }
}

/* CRIU_TARGET_SCM's descriptor in flight, if any; 0 or -1. */
static int scm_in_flight(void)
{
        const char *path = getenv("CRIU_TARGET_SCM");
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } ctl;
        char byte = 'x';
        struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf) };
        int sp[2], fd;

        if (!path)
                return 0;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0 || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
                return -1;
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
        if (sendmsg(sp[0], &mh, 0) != 1)
                return -1;
        return close(fd);
}

/* CRIU_TARGET_CONNECT's connection, if any; 0 or -1. */
static int inet_connection(void)
{
        const char *ports = getenv("CRIU_TARGET_CONNECT");
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        unsigned lport, rport;
        int fd, on = 1;

        if (!ports)
                return 0;
        if (sscanf(ports, "%u:%u", &lport, &rport) != 2)
                return -1;
        sa.sin_port = htons((uint16_t)lport);
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) < 0 ||
            bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                return -1;
        sa.sin_port = htons((uint16_t)rport);
        return connect(fd, (struct sockaddr *)&sa, sizeof(sa));
}

/* A socket of type on 127.0.0.1 at the port the variable var names (none
 * without it), listening when a stream; 0 or -1. */
static int inet_socket(const char *var, int type)
{
        const char *port = getenv(var), *reuseport = getenv("CRIU_TARGET_REUSEPORT");
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        int fd, on = 1;

        if (!port)
                return 0;
        sa.sin_port = htons((uint16_t)atoi(port));
        fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
        if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) < 0)
                return -1;
        if (reuseport && strcmp(reuseport, "1") == 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)) < 0)
                return -1;
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || (type == SOCK_STREAM && listen(fd, 16) < 0))
                return -1;
        return 0;
}

int main(int argc, char **argv)
{
        if ((argc != 5 && argc != 6) || (strcmp(argv[1], "single") != 0 && strcmp(argv[1], "tree") != 0)) {
                fprintf(stderr, "usage: %s single|tree WATCH_PID RESULT_FILE MIB [DRIVER_FILE]\n", argv[0]);
                return 2;
        }
        if (argc == 6) {
                int fd = open(argv[5], O_RDONLY | O_CLOEXEC);
                void *code = fd < 0 ? MAP_FAILED : mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
                if (fd >= 0)
                        close(fd);
                if (code == MAP_FAILED)
                        return 1;
        }
        const char *bind_at = getenv("CRIU_TARGET_BIND");
        if (bind_at) {
                struct sockaddr_un sa = { .sun_family = AF_UNIX };
                int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (fd < 0 || strlen(bind_at) >= sizeof(sa.sun_path))
                        return 1;
                memcpy(sa.sun_path, bind_at, strlen(bind_at));
                if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 1) < 0)
                        return 1;
        }
        if (inet_socket("CRIU_TARGET_TCP", SOCK_STREAM) < 0 || inet_socket("CRIU_TARGET_UDP", SOCK_DGRAM) < 0 ||
            inet_connection() < 0 || scm_in_flight() < 0)
                return 1;
        watch_pid = (pid_t)atoi(argv[2]);
        result_path = argv[3];
        size_t mib = (size_t)strtoul(argv[4], NULL, 10);
        if (watch_pid <= 0 || mib == 0)
                return 2;

        /* Blocked before any thread or child exists, so every thread of
         * every process inherits it and only sigwaitinfo() takes it. */
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGUSR1);
        if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
                return 1;

        unsigned role = 0;
        if (strcmp(argv[1], "tree") == 0) {
                for (unsigned i = 1; i <= 2 && role == 0; i++) {
                        pid_t pid = fork();
                        if (pid < 0) {
                                close(3);
                                return 1;
                        }
                        if (pid == 0)
                                role = i;
                }
        }
        return run(mib, role);
}
