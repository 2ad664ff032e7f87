/* sched.h: per-process queues on top of worker threads: admission (the
 * callers' fair shares), order, and the hand-off of each operation to a
 * thread; ops.h does the operation itself.
 *
 * Every process named in a request gets a sched_target (schedtarget.h)
 * while operations on it are queued or running, and keeps it for a while
 * after in the cache of idle targets (schedtable.h): the target's pidfd
 * then spares the next request the pinning.  Its operations run one at a
 * time, in arrival order, on libuv's worker threads
 * (uv_queue_work; the pool is sized from the configuration before the loop
 * starts), or for GetState and GetRestoreThreadId on the lane (lane.h) when
 * it is free.  Different targets run in parallel.  Completion comes back to
 * the loop thread: for a mutating operation the finished hook runs first
 * (struct sched_hooks; it may touch state of the connection's features,
 * such as lease counts), then the op's done callback, which answers the
 * connection.  Workers touch no connection state.
 *
 * Ownership: sched owns the table, which owns the targets; the submitter
 * allocates ops and the done callback frees them. */
#ifndef CUDACKPT_SCHED_H
#define CUDACKPT_SCHED_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "run/lane.h"
#include "run/ops.h"
#include "auth/policy.h"
#include "run/procbusy.h"
#include "varlink/proto.h"
#include "run/schedtable.h"
#include "run/schedtarget.h"
#include "base/share.h"
#include "host/target.h"

struct conn;
struct sched;
struct sched_op;

typedef void (*sched_op_done_cb)(struct sched *s, struct sched_op *op);

struct sched_op {
        struct sched_op *next;       /* queue link */
        struct sched_target *target; /* set by sched_submit */
        struct sched *sched;         /* set by sched_submit */
        struct conn *conn;           /* referenced by the submitter until done */
        sched_op_done_cb done;       /* NULL: the scheduler's own done callback */
        void *ctx;                   /* for done: a group, say */
        unsigned index;              /* for done: a member of it */
        const struct policy_caller *caller; /* the connection's peer; lives as long as conn */
        enum proto_method method;
        struct proto_request req;    /* owned */
        bool reply;                  /* false for oneway calls */
        bool cancelled;              /* never started: the daemon is shutting down */
        bool state_waiter;           /* a GetState waiting for the running op's first state */
        bool privileged;             /* its caller has a reserve in the shares (access.h) */
        bool holds_queue;            /* counted in the queue share (loop only) */
        bool holds_worker;           /* counted in the worker share (loop only) */
        const void *holder;          /* the hold it is a step of (sched_hold), NULL: none */
        uint64_t queued_ns;          /* uv_hrtime() at submission */
        uint64_t started_ns, finished_ns; /* on the worker; 0 when it never ran */
        uint64_t dispatched_ms;      /* uv_now() when handed to a thread (loop only) */
        uint64_t seq;                /* which dispatch this is, for the stall watch */
        bool stall_warned;           /* the stall watch has looked at it (loop only) */
        enum proto_method parent;    /* the group method it is a step of, if
                                      * proto_method_is_group(); ops not of a
                                      * group leave it 0 (PROTO_GET_STATE, never
                                      * a group) */
        int state_before;            /* the state known when it started, -1 unknown (loop only) */
        bool start_reported;         /* hooks.started was called (loop only) */
        uv_work_t work;              /* data points back to the sched */
        struct ops_result result;    /* written by the worker, read in done */
};

/* A consistent copy of what the loop may read while an op runs. */
struct sched_snapshot {
        bool known;
        struct policy_target owner;
        uint64_t start_time;
        int last_state;
        enum proto_method running;
};

/* Told of every mutating operation on the loop thread: once it runs with
 * its process known (started), and when it has ended (finished, before the
 * done callback).  Read-only calls are not reported. */
struct sched_hooks {
        void (*started)(void *ctx, const struct sched_op *op);
        void (*finished)(void *ctx, const struct sched_op *op);
        void *ctx;
};

struct sched {
        uv_loop_t *loop;
        struct sched_hooks hooks;
        bool report_starts;     /* call hooks.started (someone watches) */
        atomic_bool want_progress; /* workers take progress baselines (someone watches) */
        /* report_starts and want_progress: set by sched_set_watched() only. */
        const struct config *cfg;
        const struct driver *drv;
        sched_op_done_cb done;
        struct sched_table table; /* the targets, and the cache of idle ones */
        unsigned n_ops;     /* queued + running, all targets */
        unsigned n_running;
        /* Fair shares by the callers' uids (share.h): ops queued or running,
         * and driver calls on threads.  A target whose next op finds its
         * caller's worker share taken waits (awaits_worker) until one of
         * that caller's ops ends; the oldest such op goes first. */
        struct share queue;
        struct share workers;
        unsigned n_awaiting;
        uv_async_t async;   /* a worker published a state that waiters want */
        uv_timer_t stall;   /* looks for long operations while any run */
        uint64_t op_seq;
        struct lane lane;   /* the warm thread for read-only calls */
        /* Processes a mutating operation runs on now (worker threads):
         * keeps the operations on a thread id and on its process apart. */
        struct procbusy busy;
        bool cancelling;    /* sched_cancel_queued() runs: no target is released */
        struct fit *fit;    /* the restores' fit (fit.h), set by the owner; NULL: none */
};

int sched_init(struct sched *s, uv_loop_t *loop, const struct config *cfg,
               const struct driver *drv, sched_op_done_cb done);
/* Worker threads beside cfg->workers for the daemon's short /proc and NVML
 * work, so that it never waits behind driver calls. */
#define SCHED_HOUSEKEEPING_THREADS 4

/* Queues op; -EAGAIN when a queue limit is reached (*ret says which).
 * max_queue_per_pid refuses unprivileged callers only: root, the operators
 * and the daemon's own work (a lease's undo) are bound by the global
 * queue limit and its reserve, so that strangers filling a process's
 * queue cannot keep them off it; so is the step of a hold's holder on its
 * process (the calls the hold keeps waiting cannot keep it out). */
int sched_submit(struct sched *s, struct sched_op *op, struct share_refusal *ret);

/* Holds pid for holder, a compound operation (a group, of which a lease's
 * undo is one) that makes several steps on it: once the first op whose
 * holder is this one has started, other callers' mutating ops on pid wait
 * in its queue until sched_unhold(), as they wait behind a single Suspend
 * across its two driver calls; read-only ops (GetState,
 * GetRestoreThreadId) still run between the steps.  Ops queued before
 * that first step may start before it.  method names the compound
 * operation for GetState's in_flight between its steps.  The caller must
 * be allowed to act on pid (a hold exists only on processes its holder
 * may act on) and must end the hold.  0, -EBUSY (another holder) or
 * -ENOMEM. */
int sched_hold(struct sched *s, pid_t pid, const void *holder, enum proto_method method);
/* Ends holder's hold of pid, if it has one; the ops waiting start. */
void sched_unhold(struct sched *s, pid_t pid, const void *holder);

/* The running op's view of a target, if an op on pid is running now or
 * a hold has begun on it (running then names the hold's method). */
bool sched_running_snapshot(struct sched *s, pid_t pid, struct sched_snapshot *ret);
/* While an op on pid runs but has not yet learnt the process's state, a
 * GetState waits here (without the driver) and is answered through done as
 * soon as the worker publishes one.  -EALREADY: the state is known now;
 * -ESRCH: nothing is running; -EAGAIN: its caller's queue share is taken
 * (sched_submit() says which limit). */
int sched_wait_state(struct sched *s, struct sched_op *op);
/* Closes the loop handles; the loop must run once more to finish them. */
void sched_close(struct sched *s);

/* Answers every queued, not started op through done with op->cancelled set;
 * running ones finish normally.  Returns the number still running. */
unsigned sched_cancel_queued(struct sched *s);
void sched_free(struct sched *s); /* no ops may remain */

/* The target of pid while the op with this seq runs on it, else NULL. */
struct sched_target *sched_running_target(struct sched *s, pid_t pid, uint64_t seq);
/* Calls fn for every target whose op runs now (loop thread). */
void sched_for_each_running(struct sched *s, void (*fn)(void *ctx, struct sched_target *t), void *ctx);

/* Between sched.c and the rooms beside it (schedquery.c, schedstall.c):
 * what the worker published of t, read under its lock; the stall watch's
 * timer started, while stall_warning_ms is set. */
void sched_read_target(struct sched_target *t, struct sched_snapshot *ret);
void sched_stall_arm(struct sched *s);


/* Someone watches (Watch, jobs/watch.h) or no one does any more: the
 * scheduler then reports each operation's start (hooks.started) and the
 * workers note checkpoint progress, or stop doing so. */
void sched_set_watched(struct sched *s, bool on);

#endif
