/* crossbarrier.c: the barrier across a job's parts (crossbarrier.h). */
#include "crossbarrier.h"

#include "fdio.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* One byte from fd into *ret_c: 1, 0 at its end, or -errno.  fd may be
 * non-blocking (a file status flag its giver set): nothing there yet is
 * no answer, so the byte is waited for. */
static int cross_read_byte(int fd, char *ret_c) {
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        int flags = fcntl(fd, F_GETFL);
        ssize_t k;

        /* Waited for by poll, which a write-only end would never wake. */
        if (flags < 0 || (flags & O_ACCMODE) == O_WRONLY)
                return -EBADF;
        for (;;) {
                if (poll(&pf, 1, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                k = read(fd, ret_c, 1);
                if (k >= 0)
                        return (int) k;
                if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)
                        return -errno;
        }
}

int ctl_cross_barrier_wait(int fd, const char *verb, const char *prefix) {
        char c = 0;
        struct sigaction ign = { .sa_handler = SIG_IGN }, old;
        int r;

        if (fd < 0)
                return 0;
        /* The other end gone is a barrier not passed, not this command's end. */
        sigaction(SIGPIPE, &ign, &old);
        r = fdio_write_all(fd, CTL_CROSS_BARRIER_READY, strlen(CTL_CROSS_BARRIER_READY));
        sigaction(SIGPIPE, &old, NULL);
        /* No timeout here: the other end's holder bounds the wait, and its
         * end closing (it died) lets none go on. */
        if (r == 0) {
                r = cross_read_byte(fd, &c);
                r = r < 0 ? r : c == CTL_CROSS_BARRIER_GO ? 0 : -ECANCELED;
        }
        if (r == -ECANCELED || r == -EPIPE)
                fprintf(stderr, "%sthe %s's other parts did not all get there: none was let go on\n", prefix, verb);
        else if (r < 0)
                fprintf(stderr, "%sthe barrier across the job's parts failed: %s\n", prefix, strerror(-r));
        return r == -EPIPE ? -ECANCELED : r;
}
