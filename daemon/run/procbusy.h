/* procbusy.h: the processes a mutating operation runs on now.
 *
 * A thread id and its process are two targets of the scheduler's queues
 * but one process for the driver.  Workers register the process around
 * the driver calls of a mutating operation (ops.c), and a second worker
 * wanting the same process waits here until the first one leaves, so that
 * their operations never overlap.  Worker threads only; sched owns it. */
#ifndef CUDACKPT_PROCBUSY_H
#define CUDACKPT_PROCBUSY_H

#include <sys/types.h>
#include <uv.h>

struct procbusy {
        uv_mutex_t lock;
        uv_cond_t cond;   /* a process was left */
        pid_t *pids;      /* owned: at most cap entries, one per worker thread */
        unsigned n, cap;
};

/* cap: the worker threads that may enter at once. */
int procbusy_init(struct procbusy *b, unsigned cap);
/* Accepts a zeroed or freed table. */
void procbusy_free(struct procbusy *b);

/* Waits while another worker acts on process pid (or the table is full),
 * then marks it busy until procbusy_leave(). */
void procbusy_enter(struct procbusy *b, pid_t pid);
void procbusy_leave(struct procbusy *b, pid_t pid);

#endif
