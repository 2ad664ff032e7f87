/* schedtarget.h: one process's record in the scheduler, shared by the
 * worker running an operation on it and the loop thread.
 *
 * The loop owns the queue fields (sched.c) and the cache links
 * (schedtable.c); the worker running the target's op owns the pinned
 * identity; the rest is what that worker has learnt (owner, start time,
 * state, checkpoint progress), published under lock for the loop's
 * GetState answers, the stall watch and Watch's progress samples.  Below sched (queues) and ops (one operation):
 * ops.c fills it through sched_target_publish() without knowing the queues.
 *
 * Ownership: the scheduler's table creates and frees targets (schedtable.h). */
#ifndef CUDACKPT_SCHEDTARGET_H
#define CUDACKPT_SCHEDTARGET_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "auth/policy.h"
#include "host/target.h"
#include "varlink/proto.h"

struct sched_op;

struct sched_target {
        pid_t pid;
        struct sched_target *next_in_bucket;
        struct sched_op *head, *tail; /* queued, not yet started */
        struct sched_op *running;     /* the one op on a worker, or NULL */
        unsigned depth;               /* queued + running + waiters */
        struct sched_op *waiters;     /* GetStates answered once the running op
                                       * has published a state */
        uv_async_t *wake;             /* the scheduler's: wakes the loop for waiters */
        struct target_identity identity; /* pinned process; touched only by the worker
                                          * running this target's op */
        /* What the worker last learnt, for GetState answers while it runs. */
        uv_mutex_t lock;
        bool known;                   /* owner and start_time are valid */
        struct policy_target owner;
        uint64_t start_time;
        int last_state;               /* driver state, -1 when unknown */
        int watch_stat_fd;            /* the running op's pinned stat and status */
        int watch_status_fd;          /* files, -1 before it is pinned: for the
                                       * stall watch and progress to dup */
        pid_t watch_pid;              /* the running op's process */
        bool want_wake;               /* waiters exist: wake the loop on publish */
        bool want_id_wake;            /* a start to report: wake the loop once pinned */
        /* Progress of the running checkpoint: written by ops.c, sampled by
         * Watch's progress.c (which keeps its own high-water marks), under lock. */
        bool in_checkpoint;           /* a checkpoint runs, rss_start its baseline */
        uint64_t rss_start;           /* VmRSS when that step began */
        int64_t total_bytes;          /* what it should move; -1 unknown */
        int64_t ckpt_bytes;           /* what this process's last checkpoint moved; -1 unknown */
        uint64_t ckpt_start_time;     /* ... of the process with this start time */
        bool awaits_worker;           /* its next op waits for its caller's worker share */
        /* A hold (sched_hold() in sched.h; loop thread only): from the
         * start of the holder's first step on the process to the hold's
         * end, only the holder's steps and read-only calls start. */
        const void *holder;           /* NULL: none */
        enum proto_method hold_method; /* what holds it, for in_flight */
        bool hold_begun;              /* a step of the holder has started */
        bool finishing;               /* an op's done callback runs: t stays */
        /* The cache of idle targets (loop thread only). */
        bool cached;                  /* on the LRU list below, depth == 0 */
        struct sched_target *lru_prev, *lru_next; /* most recently used first */
        uint64_t idle_since;          /* uv_now() when it was cached */
};

/* Called by the worker when it learns a state (-1 unknown) and, with id,
 * when it has pinned the process: stores them and wakes the loop when a
 * waiting GetState or a start report wants them. */
void sched_target_publish(struct sched_target *t, const struct target_identity *id, int state);

#endif
