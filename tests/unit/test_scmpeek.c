/* Unit tests: client/ctl/job/scmpeek.c, the descriptors in flight in a
 * unix socket's queue: every one seen (of each message, of a stream's and
 * a datagram socket's queue, and in the queue of a socket itself in
 * flight), the queue left whole (the receiver still gets them, its peek
 * offset as it was), a nesting deeper than asked refused (-ELOOP). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runner.h"

#include "scmpeek.h"

static void send_fd(int sk, int fd)
{
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } ctl;
        char byte = 'x';
        struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf) };
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
        ck_assert_int_eq(sendmsg(sk, &mh, 0), 1);
}

/* The descriptor a received message carries, or -1. */
static int recv_fd(int sk)
{
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } ctl;
        char byte;
        struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf) };
        int fd = -1;
        if (recvmsg(sk, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) != 1)
                return -1;
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        if (c && c->cmsg_type == SCM_RIGHTS)
                memcpy(&fd, CMSG_DATA(c), sizeof(int));
        return fd;
}

typedef struct seen {
        char paths[8][PATH_MAX];
        int n;
} seen;

static int note(void *data, int fd)
{
        seen *s = data;
        char link[64];
        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        ssize_t k = s->n < 8 ? readlink(link, s->paths[s->n], PATH_MAX - 1) : -1;
        if (k >= 0)
                s->paths[s->n++][k] = '\0';
        close(fd);
        return 0;
}

static int opened(const char *path)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        return fd;
}

static void expect_queue(int type)
{
        int sp[2], inner[2], off = -2;
        socklen_t len = sizeof(off);
        ck_assert_int_eq(socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sp), 0);
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, inner), 0);
        /* /dev/null, then inner[1] carrying /dev/zero in its own queue. */
        int null = opened("/dev/null"), zero = opened("/dev/zero");
        send_fd(sp[0], null);
        send_fd(inner[0], zero);
        send_fd(sp[0], inner[1]);
        close(null);
        close(zero);
        close(inner[0]);
        close(inner[1]);

        seen s = { .n = 0 };
        ck_assert_int_eq(ctl_scm_peek(sp[1], 2, note, &s), 0);
        ck_assert_int_eq(s.n, 3);
        ck_assert_str_eq(s.paths[0], "/dev/null");
        ck_assert_str_eq(s.paths[1], "/dev/zero");
        ck_assert(strncmp(s.paths[2], "socket:[", 8) == 0);
        /* Not one level deeper than asked. */
        s.n = 0;
        ck_assert_int_eq(ctl_scm_peek(sp[1], 1, note, &s), -ELOOP);

        /* The queue whole, its peek offset off again. */
        ck_assert_int_eq(getsockopt(sp[1], SOL_SOCKET, SO_PEEK_OFF, &off, &len), 0);
        ck_assert_int_eq(off, -1);
        int got = recv_fd(sp[1]);
        ck_assert_int_ge(got, 0);
        close(got);
        int sock = recv_fd(sp[1]);
        ck_assert_int_ge(sock, 0);
        got = recv_fd(sock);
        ck_assert_int_ge(got, 0);
        close(got);
        close(sock);
        close(sp[0]);
        close(sp[1]);
}

START_TEST(test_stream)
{
        expect_queue(SOCK_STREAM);
}
END_TEST

START_TEST(test_datagram)
{
        expect_queue(SOCK_DGRAM);
}
END_TEST

const char unit_suite_name[] = "scmpeek";

void unit_tests(TCase *tc)
{
        tcase_add_test(tc, test_stream);
        tcase_add_test(tc, test_datagram);
}
