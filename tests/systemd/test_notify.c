/* test_notify.c: cudackptd's sd_notify protocol, as Type=notify and
 * WatchdogSec= rely on it.
 *
 * The test plays systemd's part: it owns the AF_UNIX datagram socket named
 * by NOTIFY_SOCKET, starts the daemon (on the simulated driver, with the
 * default configuration file that is installed) with WATCHDOG_USEC=200000
 * and WATCHDOG_PID set to the daemon's own pid, and expects
 *   - READY=1, sent by the daemon's pid, once the socket is served (and no
 *     WATCHDOG=1 before it);
 *   - WATCHDOG=1 about every 100 ms (half the period): at least 4 in a
 *     measured second, no more than 25, never two closer than 30 ms;
 *   - STATUS= lines while serving;
 *   - STOPPING=1 after SIGTERM, then exit status 0, the socket it bound
 *     removed.
 * A second run with WATCHDOG_PID naming another process must send READY=1
 * but no WATCHDOG=1: the variable says whom the watchdog is meant for.
 *
 * Usage: test-sd-notify DAEMON SIM CONFIG */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sdtest.h"
#include "sim_daemon.h"

#define TIMEOUT_MS 10000
#define MEASURE_MS 1000

struct note {
        char text[4096];
        pid_t sender;
        int64_t at_ms;
};

/* Receives one datagram; false when the deadline passes first. */
static bool recv_note(int fd, int64_t deadline, struct note *ret)
{
        for (;;) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                int64_t left = deadline - sdt_now_ms();
                int r = poll(&p, 1, left < 0 ? 0 : (int)left);
                if (r == 0)
                        return false;
                if (r < 0 && errno == EINTR)
                        continue;
                SDT_CHECK(r > 0, "poll: %s", strerror(errno));

                union {
                        struct cmsghdr h;
                        char buf[CMSG_SPACE(sizeof(struct ucred))];
                } control;
                struct iovec iov = { ret->text, sizeof(ret->text) - 1 };
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
                                     .msg_control = &control, .msg_controllen = sizeof(control) };
                ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        continue;
                SDT_CHECK(n >= 0, "recvmsg: %s", strerror(errno));
                ret->text[n] = '\0';
                ret->at_ms = sdt_now_ms();
                ret->sender = 0;
                for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
                                struct ucred uc;
                                memcpy(&uc, CMSG_DATA(c), sizeof(uc));
                                ret->sender = uc.pid;
                        }
                return true;
        }
}

/* Whether the newline-separated assignments of a notification hold line. */
static bool has_line(const char *text, const char *line)
{
        size_t n = strlen(line);

        for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
                if (strncmp(p, line, n) == 0 && (p[n] == '\n' || p[n] == '\0'))
                        return true;
        return false;
}

static bool has_prefix_line(const char *text, const char *prefix)
{
        size_t n = strlen(prefix);

        for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
                if (strncmp(p, prefix, n) == 0)
                        return true;
        return false;
}

static int open_notify_socket(const char *path)
{
        struct sockaddr_un sa;
        int fd = sdt_unix_socket(path, SOCK_DGRAM, &sa), one = 1;

        SDT_CHECK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "bind %s: %s", path,
                  strerror(errno));
        /* Like systemd, learn the sender of each notification. */
        SDT_CHECK(setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) == 0,
                  "SO_PASSCRED: %s", strerror(errno));
        return fd;
}

static void start_daemon(char **argv, const char *dir, const char *name, bool watchdog_self,
                         struct sdt_child *ret_child, char *ret_sock, size_t socklen)
{
        static char env_notify[PATH_MAX + 32], env_wd_pid[64];
        static struct test_daemon_argv daemon_argv;
        static const char *env[4];
        char notify[PATH_MAX];

        snprintf(notify, sizeof(notify), "%s/%s.notify", dir, name);
        snprintf(ret_sock, socklen, "%s/%s/io.cudackpt.Process", dir, name);
        snprintf(env_notify, sizeof(env_notify), "NOTIFY_SOCKET=%s", notify);
        SDT_CHECK(test_daemon_argv(&(struct test_daemon_cmd){ .daemon = argv[1], .socket = ret_sock,
                                                              .driver = argv[2], .config = argv[3] },
                                   &daemon_argv) == 0,
                  "the daemon's command line does not fit");
        env[0] = env_notify;
        env[1] = "WATCHDOG_USEC=200000";
        /* pid 1 is never the daemon: the watchdog is meant for someone else. */
        snprintf(env_wd_pid, sizeof(env_wd_pid), "WATCHDOG_PID=1");
        env[2] = watchdog_self ? NULL : env_wd_pid;
        env[3] = NULL;
        sdt_spawn((const char *const *)daemon_argv.argv,
                  &(struct sdt_spawn_opts){ .setenv = env, .watchdog_pid_self = watchdog_self },
                  ret_child);
}

/* Waits for READY=1 from the daemon; fails on a WATCHDOG=1 before it. */
static void expect_ready(int fd, const struct sdt_child *d)
{
        int64_t deadline = sdt_now_ms() + TIMEOUT_MS;
        struct note n;

        for (;;) {
                SDT_CHECK(recv_note(fd, deadline, &n), "no READY=1 within %d ms", TIMEOUT_MS);
                SDT_CHECK(n.sender == d->pid, "notification from pid %d, not the daemon's %d",
                          (int)n.sender, (int)d->pid);
                SDT_CHECK(!has_line(n.text, "WATCHDOG=1"), "WATCHDOG=1 before READY=1");
                if (has_line(n.text, "READY=1"))
                        return;
        }
}

static void expect_clean_exit(int fd, struct sdt_child *d, const char *sock)
{
        int64_t deadline = sdt_now_ms() + TIMEOUT_MS;
        struct stat st;
        struct note n;
        int status;

        SDT_CHECK(kill(d->pid, SIGTERM) == 0, "kill: %s", strerror(errno));
        do
                SDT_CHECK(recv_note(fd, deadline, &n), "no STOPPING=1 within %d ms of SIGTERM",
                          TIMEOUT_MS);
        while (!has_line(n.text, "STOPPING=1"));
        status = sdt_wait_exit(d, TIMEOUT_MS);
        SDT_CHECK(status >= 0, "daemon did not exit within %d ms of SIGTERM", TIMEOUT_MS);
        SDT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "daemon exit status 0x%x", status);
        SDT_CHECK(stat(sock, &st) < 0 && errno == ENOENT, "the daemon left its socket %s behind",
                  sock);
}

int main(int argc, char **argv)
{
        char sock[PATH_MAX], path[PATH_MAX];
        struct sdt_child d;
        struct note n;
        struct stat st;
        int fd, pings = 0, statuses = 0;
        int64_t first = -1, last = -1, min_gap = INT64_MAX, start, end;
        cJSON *reply;

        if (argc != 4) {
                fprintf(stderr, "usage: %s DAEMON SIM CONFIG\n", argv[0]);
                return 2;
        }
        const char *dir = sdt_tmpdir();

        /* Run 1: the watchdog is the daemon's. */
        snprintf(path, sizeof(path), "%s/a.notify", dir);
        fd = open_notify_socket(path);
        start_daemon(argv, dir, "a", true, &d, sock, sizeof(sock));
        expect_ready(fd, &d);

        /* Ready means serving: the socket is there, open to all (the daemon
         * authorises each call), and answers. */
        SDT_CHECK(stat(sock, &st) == 0 && S_ISSOCK(st.st_mode), "no socket at %s after READY=1", sock);
        SDT_CHECK((st.st_mode & 07777) == 0666, "socket mode %04o, expected 0666",
                  (unsigned)(st.st_mode & 07777));
        int c = sdt_connect(sock);
        reply = sdt_call(c, "org.varlink.service.GetInfo", NULL, TIMEOUT_MS);
        SDT_CHECK(cJSON_GetObjectItemCaseSensitive(reply, "parameters") &&
                          !cJSON_GetObjectItemCaseSensitive(reply, "error"),
                  "GetInfo after READY=1 failed");
        cJSON_Delete(reply);
        close(c);

        start = sdt_now_ms();
        end = start + MEASURE_MS;
        while (recv_note(fd, end, &n)) {
                SDT_CHECK(n.sender == d.pid, "notification from pid %d, not the daemon's %d",
                          (int)n.sender, (int)d.pid);
                if (has_prefix_line(n.text, "STATUS="))
                        statuses++;
                if (!has_line(n.text, "WATCHDOG=1"))
                        continue;
                if (last >= 0 && n.at_ms - last < min_gap)
                        min_gap = n.at_ms - last;
                if (first < 0)
                        first = n.at_ms;
                last = n.at_ms;
                pings++;
        }
        printf("%d WATCHDOG=1 in %d ms (smallest gap %lld ms), %d STATUS= updates\n", pings,
               MEASURE_MS, min_gap == INT64_MAX ? -1LL : (long long)min_gap, statuses);
        SDT_CHECK(pings >= 4 && pings <= 25, "%d watchdog pings in %d ms, expected about 10",
                  pings, MEASURE_MS);
        SDT_CHECK(min_gap >= 30, "two watchdog pings only %lld ms apart", (long long)min_gap);
        SDT_CHECK(statuses >= 1, "no STATUS= while serving");
        expect_clean_exit(fd, &d, sock);
        close(fd);

        /* Run 2: WATCHDOG_PID names another process. */
        snprintf(path, sizeof(path), "%s/b.notify", dir);
        fd = open_notify_socket(path);
        start_daemon(argv, dir, "b", false, &d, sock, sizeof(sock));
        expect_ready(fd, &d);
        end = sdt_now_ms() + 500;
        while (recv_note(fd, end, &n))
                SDT_CHECK(!has_line(n.text, "WATCHDOG=1"),
                          "WATCHDOG=1 sent although WATCHDOG_PID names another process");
        expect_clean_exit(fd, &d, sock);
        close(fd);

        printf("ok: READY=1, WATCHDOG=1 at half WATCHDOG_USEC, STATUS=, STOPPING=1, exit 0\n");
        return 0;
}
