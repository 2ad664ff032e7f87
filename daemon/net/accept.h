/* accept.h: accepting connections on listening sockets without spinning.
 *
 * libuv's listener calls its callback again and again, in one loop, for
 * as long as accept() fails with anything but EAGAIN: a daemon out of
 * descriptors (EMFILE, ENFILE), or under a seccomp filter that refuses
 * accept4 (EPERM), would spin on its loop thread accepting nothing.  So
 * the daemon accepts itself: each listening socket is polled (uv_poll_t)
 * and accept4() called until EAGAIN, at most ACCEPT_BATCH times a turn.
 * When accept4() fails otherwise, every listening socket stops being
 * polled (they share the descriptor table) and polling starts again after
 * retry_ms (the configuration's accept_retry_ms), or as soon as the daemon
 * closes a connection when it was out of descriptors (accept_freed()); the
 * clients wait in the sockets' backlogs meanwhile.  Such an episode is logged once, at its
 * start, and once more at its end, when no client is left waiting in the
 * socket's backlog, and counted once in the metrics
 * (cudackpt_accept_pauses_total, by reason).  Loop thread only. */
#ifndef CUDACKPT_ACCEPT_H
#define CUDACKPT_ACCEPT_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "base/metrics.h"

#define ACCEPT_MAX 16   /* listening sockets */
#define ACCEPT_BATCH 64 /* connections accepted per socket and loop turn */

/* A connection accepted: fd, non-blocking and close-on-exec, is the
 * callback's to keep or close. */
typedef void (*accept_cb)(void *data, int fd);

struct accept_set {
        uv_loop_t *loop;
        struct metrics *metrics;
        uint64_t retry_ms;
        accept_cb cb;
        void *data;
        uv_poll_t polls[ACCEPT_MAX];
        int fds[ACCEPT_MAX];
        unsigned n;
        uv_timer_t retry;               /* the pause's end */
        bool paused;                    /* polls stopped, the timer running */
        bool descriptors;               /* ... for want of descriptors */
        bool failing;                   /* an episode: logged, not yet over */
        uint64_t failures;              /* accept4() failures in this episode */
        bool stopped;
};

void accept_init(struct accept_set *a, uv_loop_t *loop, struct metrics *metrics, uint64_t retry_ms, accept_cb cb,
                 void *data);
/* Accepts on fd, a listening socket made non-blocking here; the set owns
 * it from now on, even when this fails (-errno: it is closed). */
int accept_add(struct accept_set *a, int fd);
/* The daemon closed a descriptor of its own (a connection): a pause for
 * want of descriptors ends now. */
void accept_freed(struct accept_set *a);
/* Stops accepting and closes the sockets and the timer (the loop must run
 * once more); nothing where accept_init() never ran. */
void accept_stop(struct accept_set *a);

#endif
