/* scmpeek.c: the descriptors in flight in a unix socket's queue, read
 * without taking them (scmpeek.h).
 *
 * CRIU dumps the descriptors a job had sent over a unix socket and not yet
 * received (SCM_RIGHTS), and restores them by opening each again, by its
 * path, as root, in the process that sent it, which sends it again and
 * closes its own: after the restore such a file is in no process's
 * descriptors but in the receiver's queue, where restoreaccess.c would
 * not see it.  It is read here as CRIU dumps it: every message peeked at
 * an advancing peek offset (SO_PEEK_OFF), which installs a copy of the
 * descriptors it carries in this process and leaves the queue whole. */
#include "scmpeek.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The most messages one queue is peeked for. */
#define SCM_MAX_MESSAGES 65536
/* The most descriptors one message carries (the kernel's SCM_MAX_FD). */
#define SCM_FDS 253

static bool scm_is_unix(int fd) {
        int domain = 0;
        socklen_t len = sizeof(domain);

        return getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && domain == AF_UNIX;
}

/* The descriptors of one control message, each (its queue first, if a
 * unix socket) to cb; every one of them closed or given away. */
static int scm_deliver(const int *fds, size_t n, int depth, int (*cb)(void *data, int fd), void *data) {
        int r = 0;

        for (size_t i = 0; i < n; i++) {
                if (r == 0)
                        r = ctl_scm_peek(fds[i], depth - 1, cb, data);
                if (r == 0)
                        r = cb(data, fds[i]);
                else
                        close(fds[i]);
        }
        return r;
}

/* fd's queue from the peek offset now (0). */
static int scm_walk(int fd, int depth, int (*cb)(void *data, int fd), void *data) {
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(SCM_FDS * sizeof(int))];
        } ctl;
        static char sink[65536];
        int r = 0;

        for (int k = 0; r == 0; k++) {
                struct iovec iov = { .iov_base = sink, .iov_len = sizeof(sink) };
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                                     .msg_controllen = sizeof(ctl.buf) };
                ssize_t got;

                if (k == SCM_MAX_MESSAGES)
                        return -E2BIG;
                got = recvmsg(fd, &mh, MSG_PEEK | MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
                if (got < 0)
                        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
                for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                        size_t n = c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS
                                           ? (c->cmsg_len - CMSG_LEN(0)) / sizeof(int)
                                           : 0;
                        int fds[SCM_FDS];

                        memcpy(fds, CMSG_DATA(c), n * sizeof(int));
                        if (n > 0 && depth <= 0) {
                                for (size_t i = 0; i < n; i++)
                                        close(fds[i]);
                                r = -ELOOP;
                        } else if (n > 0 && r == 0) {
                                r = scm_deliver(fds, n, depth, cb, data);
                        } else {
                                for (size_t i = 0; i < n; i++)
                                        close(fds[i]);
                        }
                }
                /* Nothing more (a stream's end), or descriptors cut off. */
                if (r == 0 && (mh.msg_flags & MSG_CTRUNC))
                        r = -EMSGSIZE;
                if (got == 0 && !(mh.msg_controllen > 0))
                        break;
        }
        return r;
}

int ctl_scm_peek(int fd, int depth, int (*cb)(void *data, int fd), void *data) {
        int old = -1, zero = 0, r;
        socklen_t len = sizeof(old);

        if (!scm_is_unix(fd))
                return 0;
        if (getsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &old, &len) < 0 ||
            setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof(zero)) < 0)
                return -errno;
        r = scm_walk(fd, depth, cb, data);
        if (setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &old, sizeof(old)) < 0 && r == 0)
                r = -errno;
        return r;
}

int ctl_scm_peek_of(int pidfd, int target, unsigned long ino, int depth, int (*cb)(void *data, int fd), void *data) {
        int fd = (int) syscall(SYS_pidfd_getfd, pidfd, target, 0), r;
        struct stat st;

        if (fd < 0)
                return -errno;
        r = fstat(fd, &st) < 0 ? -errno : st.st_ino != ino ? -ESTALE : ctl_scm_peek(fd, depth, cb, data);
        close(fd);
        return r == -EINVAL || r == -ENOTCONN ? 0 : r;
}
