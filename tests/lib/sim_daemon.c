/* sim_daemon.c: cudackptd's command line, NOTIFY_SOCKET and READY=1 wait
 * for the C test programs (sim_daemon.h). */
#include "sim_daemon.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int test_daemon_argv(const struct test_daemon_cmd *cmd, struct test_daemon_argv *ret_argv)
{
        const char *const opt[4][2] = { { "--socket=", cmd->socket },
                                        { "--driver=", cmd->driver },
                                        { "--config=", cmd->config },
                                        { "--log-level=", cmd->log_level } };
        size_t a = 0;

        ret_argv->argv[a++] = (char *)cmd->daemon;
        for (size_t i = 0; i < 4; i++) {
                if (!opt[i][1])
                        continue;
                int n = snprintf(ret_argv->buf[i], sizeof(ret_argv->buf[i]), "%s%s", opt[i][0], opt[i][1]);
                if (n < 0 || (size_t)n >= sizeof(ret_argv->buf[i]))
                        return -ENAMETOOLONG;
                ret_argv->argv[a++] = ret_argv->buf[i];
        }
        ret_argv->argv[a] = NULL;
        return 0;
}

int test_daemon_notify_open(const char *path)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        (void)unlink(path);
        int nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (nfd < 0)
                return -errno;
        if (bind(nfd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int r = -errno;
                close(nfd);
                return r;
        }
        return nfd;
}

/* Reads the datagrams waiting on fd; true once one of them carries a line
 * READY=1 (a datagram holds newline-separated variables). */
static bool test_daemon_read_notify(int fd)
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

static long long test_daemon_now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int test_daemon_await_ready(int nfd, int pidfd, int timeout_ms)
{
        long long deadline = test_daemon_now_ms() + timeout_ms;
        for (;;) {
                long long left = deadline - test_daemon_now_ms();
                if (left <= 0)
                        return -ETIMEDOUT;
                struct pollfd p[2] = { { .fd = nfd, .events = POLLIN }, { .fd = pidfd, .events = POLLIN } };
                int r = poll(p, pidfd >= 0 ? 2 : 1, (int)left);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return -errno;
                if (r == 0)
                        return -ETIMEDOUT;
                if ((p[0].revents & POLLIN) && test_daemon_read_notify(nfd))
                        return 0;
                if (pidfd >= 0 && (p[1].revents & POLLIN))
                        return -ECHILD;
        }
}
