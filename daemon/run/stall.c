/* stall.c: checking on a long operation's process and saying why it waits
 * (see stall.h).  The stat file is dup'ed on the loop: the op's worker
 * keeps its own until the op ends, which the loop sees first. */
#include "run/stall.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/log.h"
#include "host/target.h"

struct stall_check {
        uv_work_t work;
        pid_t pid, target_pid;
        enum proto_method method;
        uint64_t elapsed_ms;
        int stat_fd; /* owned */
        int stopped;   /* target_stopped() */
};

static void stall_check_work_cb(uv_work_t *w)
{
        struct stall_check *c = w->data;
        struct target_identity id = { .pid = c->pid, .pidfd = -1, .stat_fd = c->stat_fd, .status_fd = -1 };

        c->stopped = target_stopped(&id);
}

static void stall_check_done_cb(uv_work_t *w, int status)
{
        struct stall_check *c = w->data;

        (void)status;
        if (c->stopped > 0)
                log_warning("%s on pid %d has been running for %.1f s: every thread of process %d is stopped "
                            "(%s); the driver call returns once it runs again",
                            proto_method_name(c->method), (int)c->target_pid, (double)c->elapsed_ms / 1000.0,
                            (int)c->pid, target_stop_name(c->stopped));
        else
                log_warning("%s on pid %d has been running for %.1f s; its process is not stopped",
                            proto_method_name(c->method), (int)c->target_pid, (double)c->elapsed_ms / 1000.0);
        close(c->stat_fd);
        free(c);
}

void stall_check_start(uv_loop_t *loop, struct sched_target *t, enum proto_method method, uint64_t elapsed_ms)
{
        struct stall_check *c = calloc(1, sizeof(*c));
        int fd;

        if (!c)
                return;
        uv_mutex_lock(&t->lock);
        fd = t->watch_stat_fd >= 0 ? fcntl(t->watch_stat_fd, F_DUPFD_CLOEXEC, 3) : -1;
        c->pid = t->watch_pid;
        uv_mutex_unlock(&t->lock);
        c->target_pid = t->pid;
        c->method = method;
        c->elapsed_ms = elapsed_ms;
        c->stat_fd = fd;
        c->work.data = c;
        if (fd < 0) {
                /* Not pinned yet: every worker thread is taken. */
                log_warning("%s on pid %d has waited %.1f s for a worker thread", proto_method_name(method),
                            (int)t->pid, (double)elapsed_ms / 1000.0);
                free(c);
                return;
        }
        (void)uv_queue_work(loop, &c->work, stall_check_work_cb, stall_check_done_cb);
}
