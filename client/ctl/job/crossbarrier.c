/* crossbarrier.c: the barrier across a job's parts (crossbarrier.h). */
#include "crossbarrier.h"

#include "barrier-line.h"
#include "criu.h"
#include "fdio.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* One byte from fd into *ret_c: 1, -EPIPE at its end, or -errno; -EINTR once
 * this command got a signal that asks it to stop (criu.h's noted ones,
 * held meanwhile, even before the wait): the wait has no bound of its
 * own.  fd may be non-blocking (a file status flag its giver set):
 * nothing there yet is no answer, so the byte is waited for. */
static int cross_read_byte(int fd, char *ret_c) {
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        int flags = fcntl(fd, F_GETFL), r = 0;
        sigset_t noted, old;
        ssize_t k;

        /* Waited for by poll, which a write-only end would never wake. */
        if (flags < 0 || (flags & O_ACCMODE) == O_WRONLY)
                return -EBADF;
        /* Blocked but while in ppoll: none is missed between the check
         * and the wait. */
        ctl_criu_signals_noted(&noted);
        sigprocmask(SIG_BLOCK, &noted, &old);
        while (r == 0) {
                if (ctl_criu_signal)
                        r = -EINTR;
                else if (ppoll(&pf, 1, NULL, &old) < 0)
                        r = errno == EINTR ? 0 : -errno;
                else if ((k = read(fd, ret_c, 1)) >= 0)
                        r = k == 1 ? 1 : -EPIPE;
                else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)
                        r = -errno;
        }
        sigprocmask(SIG_SETMASK, &old, NULL);
        return r;
}

int ctl_cross_barrier_wait(int fd, const char *verb, const char *prefix) {
        char c = 0;
        struct sigaction ign = { .sa_handler = SIG_IGN }, old;
        int r;

        if (fd < 0)
                return 0;
        /* The other end gone is a barrier not passed, not this command's end. */
        sigaction(SIGPIPE, &ign, &old);
        r = fdio_write_all(fd, BARRIER_LINE_READY "\n", strlen(BARRIER_LINE_READY "\n"));
        sigaction(SIGPIPE, &old, NULL);
        /* No timeout here: the other end's holder bounds the wait, and its
         * end closing (it died) lets none go on, as does a signal asking
         * this command to stop. */
        if (r == 0) {
                r = cross_read_byte(fd, &c);
                r = r < 0 ? r : c == BARRIER_LINE_GO ? 0 : -ECANCELED;
        }
        if (r == -EINTR)
                fprintf(stderr, "%sgot signal %d at the barrier across the job's parts: none was let go on\n", prefix,
                        (int) ctl_criu_signal);
        else if (r == -ECANCELED || r == -EPIPE)
                fprintf(stderr, "%sthe %s's other parts did not all get there: none was let go on\n", prefix, verb);
        else if (r < 0)
                fprintf(stderr, "%sthe barrier across the job's parts failed: %s\n", prefix, strerror(-r));
        return r == -EPIPE || r == -EINTR ? -ECANCELED : r;
}
