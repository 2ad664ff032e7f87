/* crossbarrier.c: the barrier across a job's parts (crossbarrier.h). */
#include "crossbarrier.h"

#include "fdio.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int ctl_cross_barrier_wait(int fd, const char *verb, const char *prefix) {
        char c = 0;
        struct sigaction ign = { .sa_handler = SIG_IGN }, old;
        ssize_t k;
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
                do
                        k = read(fd, &c, 1);
                while (k < 0 && errno == EINTR);
                r = k < 0 ? -errno : c == CTL_CROSS_BARRIER_GO ? 0 : -ECANCELED;
        }
        if (r == -ECANCELED || r == -EPIPE)
                fprintf(stderr, "%sthe %s's other parts did not all get there: none was let go on\n", prefix, verb);
        else if (r < 0)
                fprintf(stderr, "%sthe barrier across the job's parts failed: %s\n", prefix, strerror(-r));
        return r == -EPIPE ? -ECANCELED : r;
}
