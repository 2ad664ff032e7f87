/* harness_fake.c: fake servers that stand in for the daemon on a socket,
 * answering with canned replies (see harness.h). */
#include "harness_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* A listening socket on path for a fake server; asserts it works. */
static int itest_fake_listen(const char *path)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        ck_assert(strlen(path) < sizeof(sa.sun_path));
        strcpy(sa.sun_path, path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_msg(fd >= 0, "socket: %s", strerror(errno));
        ck_assert_msg(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(fd, 4) == 0, "listen %s: %s",
                      path, strerror(errno));
        return fd;
}

pid_t itest_fake_server(const char *path, const char *const *replies, const char *request_file)
{
        int fd = itest_fake_listen(path);
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
        int fd = itest_fake_listen(path);
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

