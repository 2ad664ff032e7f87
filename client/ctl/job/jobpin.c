/* jobpin.c: a job's processes held by pidfd, taken while CRIU holds them.
 *
 * dump and restore --images act on the job's processes after criu exits:
 * dump ends them once the images are on disk (or wakes them after a
 * failure), restore resumes their GPU state.  By then a process may have
 * exited and another, of anyone, taken its pid.  So each criu's action
 * script waits at post-dump or post-restore (the barrier, criu.c), while
 * every task of its tree is frozen and held by criu, and this process pins
 * them there: pidfd first, then what /proc says of it, then the pidfd
 * checked still alive (what was read was that process's).  Afterwards only
 * the pidfds are signalled, and the daemon is given each member's start
 * time read then, which another process at the pid does not have. */
#include "jobpin.h"

#include "proctree.h"
#include "monotime.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int pin_pidfd_open(int pid) {
        return (int) syscall(SYS_pidfd_open, pid, 0);
}

bool ctl_pin_alive(const ctl_pin *p) {
        struct pollfd pf = { .fd = p->pidfd, .events = POLLIN };

        /* A pidfd polls readable once its process has exited. */
        return p->pidfd >= 0 && poll(&pf, 1, 0) == 0;
}

int ctl_pins_add_tree(ctl_pins *s, const ctl_proctree *t, int root) {
        int *pids = NULL;
        size_t n = 0;
        ctl_pin *v;
        int r = ctl_proctree_subtree(t, root, &pids, &n);

        if (r < 0)
                return r;
        v = realloc(s->v, (s->n + n) * sizeof(*v));
        if (!v) {
                free(pids);
                return -ENOMEM;
        }
        s->v = v;
        for (size_t i = 0; i < n && r == 0; i++) {
                ctl_pin p = { .pid = pids[i], .pidfd = pin_pidfd_open(pids[i]) };

                /* Gone, or a zombie criu dumped as such: nothing to act on. */
                if (p.pidfd < 0 && errno == ESRCH)
                        continue;
                if (p.pidfd < 0) {
                        r = -errno;
                        break;
                }
                if (ctl_proc_stat(p.pid, NULL, &p.start_time) == 0 && ctl_pin_alive(&p))
                        s->v[s->n++] = p;
                else
                        close(p.pidfd);
        }
        free(pids);
        return r;
}

const ctl_pin *ctl_pins_find(const ctl_pins *s, int pid) {
        for (size_t i = 0; i < s->n; i++)
                if (s->v[i].pid == pid)
                        return &s->v[i];
        return NULL;
}

int ctl_pins_signal(const ctl_pins *s, int sig) {
        int r = 0;

        for (size_t i = 0; i < s->n; i++)
                if (syscall(SYS_pidfd_send_signal, s->v[i].pidfd, sig, NULL, 0) < 0 && errno != ESRCH && r == 0)
                        r = -errno;
        return r;
}

size_t ctl_pins_await_gone(const ctl_pins *s, int timeout_ms) {
        double deadline = monotime_ms_exact() + timeout_ms;
        size_t alive;

        for (;;) {
                alive = 0;
                for (size_t i = 0; i < s->n; i++)
                        alive += ctl_pin_alive(&s->v[i]);
                if (alive == 0 || monotime_ms_exact() >= deadline)
                        return alive;
                poll(NULL, 0, 5);
        }
}

void ctl_pins_free(ctl_pins *s) {
        for (size_t i = 0; s && i < s->n; i++)
                close(s->v[i].pidfd);
        if (s)
                free(s->v);
        if (s)
                *s = (ctl_pins) { 0 };
}
