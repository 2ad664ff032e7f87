/* accept.c: accepting connections, with a pause when accept4() fails
 * (accept.h). */
#include "net/accept.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"

static void poll_cb(uv_poll_t *p, int status, int events);

static void polls_start(struct accept_set *a)
{
        for (unsigned i = 0; i < a->n; i++)
                if (a->fds[i] >= 0)
                        (void)uv_poll_start(&a->polls[i], UV_READABLE, poll_cb);
}

static void retry_cb(uv_timer_t *t)
{
        struct accept_set *a = t->data;

        a->paused = false;
        polls_start(a);
}

/* accept4() failed with err: no socket is polled until retry_ms from now. */
static void pause_accepting(struct accept_set *a, int err)
{
        bool descriptors = err == EMFILE || err == ENFILE;

        a->failures++;
        if (!a->failing) {
                a->failing = true;
                metrics_count(a->metrics,
                              descriptors ? METRICS_ACCEPT_PAUSED_DESCRIPTORS : METRICS_ACCEPT_PAUSED_OTHER);
                log_error("Cannot accept connections: %s; accepting pauses and is retried every %llu ms "
                          "(accept_retry_ms) until it works again, clients waiting meanwhile",
                          strerror(err), (unsigned long long)a->retry_ms);
        }
        for (unsigned i = 0; i < a->n; i++)
                if (a->fds[i] >= 0)
                        (void)uv_poll_stop(&a->polls[i]);
        a->paused = true;
        a->descriptors = descriptors;
        (void)uv_timer_start(&a->retry, retry_cb, a->retry_ms, 0);
}

/* Nothing waits in a backlog: an episode of failures is over once the
 * clients that waited through it have all been accepted (an accept that
 * works between failures, as descriptors come free one at a time, is
 * still part of it). */
static void caught_up(struct accept_set *a)
{
        if (!a->failing)
                return;
        log_notice("Accepting connections again, after %llu failed attempts", (unsigned long long)a->failures);
        a->failing = false;
        a->failures = 0;
}

/* Whether a client waits in lfd's backlog.  accept4() takes a descriptor
 * before it looks at the backlog: a daemon at its limit hears EMFILE even
 * when nobody waits, which is no failure. */
static bool waiting(int lfd)
{
        struct pollfd pfd = { .fd = lfd, .events = POLLIN };

        return poll(&pfd, 1, 0) != 0;
}

static void poll_cb(uv_poll_t *p, int status, int events)
{
        struct accept_set *a = p->data;
        int lfd = a->fds[p - a->polls];

        (void)events;
        if (status < 0) {
                pause_accepting(a, -status);
                return;
        }
        for (int i = 0; i < ACCEPT_BATCH && !a->stopped && !a->paused; i++) {
                int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), e = errno;

                if (fd >= 0) {
                        a->cb(a->data, fd);
                } else if (e == EAGAIN || e == EWOULDBLOCK || ((e == EMFILE || e == ENFILE) && !waiting(lfd))) {
                        caught_up(a);
                        return;
                } else if (e != EINTR && e != ECONNABORTED) {
                        pause_accepting(a, e);
                }
        }
}

void accept_init(struct accept_set *a, uv_loop_t *loop, struct metrics *metrics, uint64_t retry_ms, accept_cb cb,
                 void *data)
{
        *a = (struct accept_set){ .loop = loop, .metrics = metrics, .retry_ms = retry_ms, .cb = cb, .data = data };
        uv_timer_init(loop, &a->retry);
        a->retry.data = a;
}

int accept_add(struct accept_set *a, int fd)
{
        int flags = fcntl(fd, F_GETFL), r;

        if (a->n >= ACCEPT_MAX) {
                close(fd);
                return -EMFILE;
        }
        if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        r = uv_poll_init(a->loop, &a->polls[a->n], fd);
        if (r < 0) {
                close(fd);
                return r;
        }
        a->polls[a->n].data = a;
        a->fds[a->n++] = fd;
        if (!a->paused)
                r = uv_poll_start(&a->polls[a->n - 1], UV_READABLE, poll_cb);
        return r;
}

void accept_freed(struct accept_set *a)
{
        if (!a->paused || !a->descriptors || a->stopped)
                return;
        (void)uv_timer_stop(&a->retry);
        a->paused = false;
        polls_start(a);
}

void accept_stop(struct accept_set *a)
{
        if (!a->loop || a->stopped)
                return;
        a->stopped = true;
        for (unsigned i = 0; i < a->n; i++) {
                uv_close((uv_handle_t *)&a->polls[i], NULL);
                /* uv_close() has taken the socket out of the loop's epoll set. */
                close(a->fds[i]);
                a->fds[i] = -1;
        }
        uv_close((uv_handle_t *)&a->retry, NULL);
}
