/* watch.h: Watch, a stream of what happens to the processes a caller may
 * see.
 *
 * A Watch call (with "more": true) makes its connection a watcher until it
 * closes: every event of a process it may see (its pid namespace and the
 * policy, as for ListProcesses) and that its selector names (pids, a
 * cgroup or a process tree as the last scan saw them, or all) is sent as
 * one reply with "continues": true.  Events come from the
 * loop thread as things happen (an operation starting and ending, a state
 * reached, a lease taken or ended) and from a scan of /proc on a worker
 * thread every watch_scan_ms while watchers exist (CUDA processes appearing
 * and exiting).  No event makes a driver call.
 *
 * Memory: a watcher has at most one write in flight; the events of the
 * following loop turns gather in one buffer until it is written.  What a
 * watcher's buffers take (their allocated size, not the events' bytes) is
 * bounded by max_watcher_bytes, and all watchers' by max_watch_bytes: a
 * watcher that would pass either is cut off.  Sending never waits, so a
 * watcher never slows an operation.  Watchers are counted per uid
 * (max_watchers, max_watchers_per_uid, max_watchers_reserved), and the
 * memory they leave is given back to the system. */
#ifndef CUDACKPT_WATCH_H
#define CUDACKPT_WATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#include "policy.h"
#include "proto.h"
#include "share.h"

struct conn;
struct server;
struct sched_op;
struct watcher;
struct watch_proc;

#define WATCH_STARTED "started"
#define WATCH_FINISHED "finished"
#define WATCH_STATE "state"
#define WATCH_PROGRESS "progress"
#define WATCH_LEASE_TAKEN "lease-taken"
#define WATCH_LEASE_ENDED "lease-ended"
#define WATCH_APPEARED "appeared"
#define WATCH_EXITED "exited"

struct watch_event {
        const char *type;               /* WATCH_* */
        pid_t pid;                      /* in the daemon's pid namespace */
        uint64_t start_time;            /* 0: unknown */
        struct policy_target owner;     /* who may see it */
        enum proto_method method;       /* PROTO_METHODS: none */
        enum proto_method group;        /* the group method it is part of; PROTO_METHODS: none */
        const char *result;             /* finished: "ok" or the error's short name */
        int state;                      /* -1: none */
        double duration_ms;             /* < 0: none */
        long long caller_uid;           /* < 0: none */
        uint64_t lease;                 /* 0: none */
        const char *reason;             /* lease-ended: why; NULL */
        const char *undo;               /* lease-ended: "ok", "failed", NULL when not undone */
        const char *command;            /* appeared: comm; NULL */
        const char *step;               /* progress: "checkpoint" or "restore" */
        const struct watch_proc *proc;  /* appeared, exited: the scan's entry */
        bool gone;                      /* the process has exited: its pid may name
                                         * another now, so it is never translated */
        int64_t bytes, total_bytes;     /* progress; < 0: unknown */
};

struct watch_table {
        struct watcher *head;
        unsigned n;
        struct share share;             /* watchers, by uid (share.h) */
        size_t mem;                     /* what all watchers' events take (max_watch_bytes) */
        size_t mem_unprivileged;        /* ... those of unprivileged callers' watchers */
        size_t freed;                   /* ... and what left since the last trim */
        uv_timer_t trim_timer;          /* gives freed memory back to the system */
        uv_timer_t scan_timer;
        bool scanning;                  /* a scan is on a worker thread */
        bool have_baseline;             /* procs holds a scan's result */
        struct watch_proc *procs;       /* the last scan: CUDA processes by pid */
        size_t n_procs;
        uv_timer_t progress_timer;      /* samples checkpoints and restores */
        uv_check_t flush;               /* writes each watcher's events once per loop turn */
        unsigned sampling;              /* progress samples on worker threads */
};

/* An event with the fields that do not apply at their "none" values. */
#define WATCH_EVENT_INIT(t)                                                                              \
        (struct watch_event)                                                                             \
        {                                                                                                \
                .type = (t), .method = PROTO_METHODS, .group = PROTO_METHODS, .state = -1,               \
                .duration_ms = -1, .caller_uid = -1, .bytes = -1, .total_bytes = -1                      \
        }

void watch_init(struct server *s);
void watch_close(struct server *s);
/* Watch: makes c a watcher, or answers an error. */
void watch_call(struct conn *c, const struct proto_call *call);
void watch_conn_closed(struct server *s, struct conn *c);
void watch_emit(struct server *s, const struct watch_event *e);
bool watch_active(const struct server *s); /* any watcher connected */

/* The scheduler's hooks: a mutating operation started on a worker with its
 * process known, and one that ended. */
void watch_op_started(struct server *s, const struct sched_op *op);
void watch_op_finished(struct server *s, const struct sched_op *op);

#endif
