/* lease.h: leases on paused processes.
 *
 * A Lock or Suspend (single or group) may ask for a lease: the daemon then
 * brings its processes back to running (restore where checkpointed, then
 * unlock, all members restored before any is unlocked) when the
 * connection that asked closes (lease_on_close), when lease_ms has passed
 * since the reply, or at the first of the two, unless the lease ended
 * before:
 *
 *   released    ReleaseLease: the processes stay as they are
 *   finished    each process came back to running through a call
 *   exited      each process exited (or its pid came to name another)
 *   superseded  a newer lease took each process over
 *
 * An on-close lease pins its holder's connection (never closed for
 * idleness) and subscribes to its closing (conn_hook); the table
 * subscribes to the daemon's stop (life_on_stop).
 *
 * A process belongs to one lease at most.  The undo is a group of the
 * daemon's own (group_start_internal), through the same queues as any
 * call, made once: one that fails is logged and reported, never retried.
 *
 * The leases outlive the daemon: every change of the table is written to
 * the lease store (leasestore.h) before the reply that made it, and a call
 * that asks for a lease has it written, pending, before its first driver
 * step (lease_intend).  A daemon that stops undoes nothing and keeps its
 * leases there (an undo not yet made too, or one the stop cut short); its
 * timer no longer runs.  The
 * next start reads them back (lease_restore): an expired lease, a pending
 * one (its call was never answered), or one whose undo had begun, is
 * undone at once; an on-close
 * lease waits lease_claim_grace_ms for its holder to claim it with the
 * secret its grant's reply carried (ClaimLease), and is undone otherwise;
 * members whose pid names another process now leave it.
 * Everything here runs on the loop thread (lease.c has the table,
 * leasegrant.c the grant, leaserestore.c the reading back, leasecall.c the
 * calls). */
#ifndef CUDACKPT_LEASE_H
#define CUDACKPT_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "base/config.h"
#include "net/conn.h"
#include "jobs/leasedata.h"
#include "base/life.h"
#include "base/metrics.h"
#include "run/ops.h"
#include "auth/policy.h"
#include "varlink/proto.h"
#include "base/share.h"

struct conn;
struct group_table;
struct watch_table;

/* A call waiting for the store's write of the changes it made (cb, on the
 * loop thread, once written or failed: lease_store_durable() says). */
struct lease_wait {
        struct lease_wait *next;
        void (*cb)(struct lease_wait *w);
};

struct lease_table {
        uv_loop_t *loop;
        const struct config *cfg;
        struct metrics *metrics;
        struct life *life;              /* stopping: leases are kept, not undone */
        struct life_hook stop_hook;
        struct group_table *groups;     /* a lease's undo is a group of the daemon's own */
        struct watch_table *watch;      /* tells watchers of leases taken and ended */
        struct lease *head;
        unsigned n;                     /* held, undoing ones included */
        unsigned n_members;
        uint64_t next_id;
        struct share share;             /* held, by the takers' uids */
        uv_timer_t timer;               /* the nearest expiry */
        struct policy_caller self;      /* the daemon, as the caller of undos */
        int store_fd;                   /* the store's directory, checked (privdir.h); -1: none */
        char *store_dir;                /* its path, for the log and status */
        char store_why[320];            /* why there is none, or why the last write failed */
        uv_check_t flush;               /* the write, once per loop turn (leaseflush.c) */
        unsigned deferring;             /* inside lease_defer_begin() */
        bool dirty;                     /* a change not written yet */
        bool writing;                   /* a write on the pool */
        bool closed;                    /* lease_close() ran */
        struct lease_wait *waiters;     /* calls that go on once the next write is done */
        struct lease_wait **waiters_tail;
        uv_mutex_t write_lock;          /* one write of the store at a time; store_fd's closing */
        uint64_t gen;                   /* tables encoded (loop thread) */
        uint64_t disk_gen;              /* the newest on disk (write_lock) */
        bool loaded;                    /* the store was read: writing it may begin */
        bool store_failing;             /* the last write failed (logged once) */
};

/* What the table is given at its start (the server's, outliving it). */
struct lease_deps {
        uv_loop_t *loop;
        const struct config *cfg;
        struct metrics *metrics;
        struct life *life;
        struct group_table *groups;
        struct watch_table *watch;
};

/* runtime_dir: where the lease store lives, if only root may change it
 * (privdir.h; otherwise, or NULL, there is none: the log says so, and
 * lease_store_durable() too).  Subscribes to the daemon's stop (life_on_stop): the
 * leases are then kept in the store, their holders' connections close,
 * and the next start honours them. */
void lease_init(struct lease_table *t, const struct lease_deps *deps, const char *runtime_dir);
/* At start, once the driver is ready and the sockets are served, before
 * any call: reads the store back (lease.h's comment says what becomes of
 * each lease). */
void lease_restore(struct lease_table *t);
/* Once the daemon has stopped: closes the timer and frees what is left
 * (the store keeps it) and the share; the loop must run once more. */
void lease_close(struct lease_table *t);

/* Whether the leases held now will outlive a restart of the daemon: a
 * store in a directory only root may change, whose last write worked.
 * When not, *ret_why (when ret_why is not NULL) says why. */
bool lease_store_durable(const struct lease_table *t, const char **ret_why);

/* A call that asks for a lease is counted in its caller's lease share
 * from its arrival (lease_admit(): false, with *ret saying which limit is
 * in the way, when it is taken) until it is granted or fails
 * (lease_unadmit(), which also drops the lease lease_intend() wrote for
 * it unless it was granted), so that calls in flight together cannot
 * pass it (leasepending.c). */
bool lease_admit(struct lease_table *t, const struct policy_caller *caller, struct share_refusal *ret);
void lease_unadmit(struct lease_table *t, const struct policy_caller *caller, struct proto_lease *want);

/* Before the first driver step of an admitted call that asks for a lease
 * (want): the lease it would take on members is written to the store as
 * pending (want->pending, its id; 0 when it could not be), so that a
 * daemon killed during the call undoes what it did at its next start.
 * lease_grant() turns it into the lease granted.  For a single call,
 * lease_intend_pid() reads the process of pid first (its process, start
 * time and owner, from /proc) and pins the call to it (req->start_time):
 * -ESRCH when no process has pid.  Nothing is written for a caller who may
 * not act on every member (access.h's one rule): -EACCES, and for a single
 * call *ret says why as the worker would (ops_judge(): PermissionDenied,
 * or ProcessChanged for a start time that is not the process's). */
int lease_intend(struct lease_table *t, const struct policy_caller *caller, enum proto_method m,
                 struct proto_lease *want, const struct lease_member *members, size_t n);
int lease_intend_pid(struct lease_table *t, const struct policy_caller *caller, enum proto_method m,
                     struct proto_request *req, struct ops_result *ret);

/* Writes: a change of the table is written in the check phase of its
 * loop turn, once for all of the turn's changes, off the loop thread
 * (leaseflush.c).  A call whose reply (or first driver step) follows a
 * change keeps the promise above by waiting: lease_when_written() is true
 * when w->cb will run once the changes made so far are written (or their
 * write failed), false when nothing is left to write (go on now).
 * lease_defer_begin() and lease_defer_end() bracket a call's changes the
 * same way: lease_defer_end() is lease_when_written() when they left
 * something to write; with w NULL, whether a write is to come (nothing
 * waits for it). */
bool lease_when_written(struct lease_table *t, struct lease_wait *w);
void lease_defer_begin(struct lease_table *t);
/* The writes' handle and lock, at lease_init(); the last write, at
 * lease_close(). */
void lease_flush_init(struct lease_table *t);
void lease_flush_close(struct lease_table *t);
bool lease_defer_end(struct lease_table *t, struct lease_wait *w);

/* A Lock, Suspend, LockGroup or SuspendGroup that asked for want has
 * succeeded on these processes: grants the lease and adds "lease" to the
 * parameters of reply.  When c has already closed and want->on_close, the
 * lease is undone at once. */
void lease_grant(struct lease_table *t, struct conn *c, enum proto_method m, const struct proto_lease *want,
                 const struct lease_member *members, size_t n, cJSON *reply);

/* An operation on pid (start time start_time, 0 unknown) ended with r:
 * a process back to running or gone leaves its lease. */
void lease_op_finished(struct lease_table *t, pid_t pid, uint64_t start_time, enum proto_method m,
                       const struct ops_result *r);

/* ReleaseLease, RenewLease and ClaimLease (leasecall.c). */
void lease_call(struct lease_table *t, struct conn *c, struct proto_call *call);

/* Between lease.c and the rooms above it (leasedisk.c, leasegrant.c,
 * leaserestore.c, leasecall.c): a pending lease of this id; a new lease
 * in the table (its members counted); writing the table to the store;
 * taking a lease out of the table's list (its counts untouched: for a
 * pending one, whose members are not counted, all there is to do; not
 * written: the caller writes). */
struct lease *lease_find_pending(struct lease_table *t, uint64_t id);
void lease_link(struct lease_table *t, struct lease *l);
void lease_persist(struct lease_table *t);
/* The table written now, on the loop thread, for the one who must answer
 * and has no memory to wait with (out of memory): it blocks on the disk. */
void lease_persist_now(struct lease_table *t);
void lease_unlist(struct lease_table *t, struct lease *l);
/* Whether l's taker, as the store recorded it (its uid, and privileged:
 * root or an operator), may act on m by the one rule (access.h): a lease
 * read back acts for it only there. */
bool lease_taker_may_act(const struct lease_table *t, const struct lease *l, const struct lease_member *m);
/* At lease_init(): the store's directory, checked (privdir.h), or none
 * (logged, and store_why says why). */
void lease_open_store(struct lease_table *t, const char *dir);
/* c (NULL: none) becomes the holder of on-close lease l; the timer set for
 * the nearest deadline; the granted lease that holds pid (*ret_i, its
 * member); dropping member i of l (the lease ends, for why, with its
 * last); ending l without an undo; undoing l (its processes back to
 * running, by a group of the daemon's own). */
void lease_hold_by(struct lease *l, struct conn *c);
void lease_arm(struct lease_table *t);
struct lease *lease_find_member(struct lease_table *t, pid_t pid, size_t *ret_i);
void lease_drop_member(struct lease_table *t, struct lease *l, size_t i, enum metrics_counter why);
void lease_end(struct lease_table *t, struct lease *l, enum metrics_counter why);
void lease_undo(struct lease_table *t, struct lease *l, enum metrics_counter why);
/* The changes ReleaseLease, RenewLease and ClaimLease make (leasecall.c). */
void lease_release(struct lease_table *t, struct lease *l);
void lease_renew(struct lease_table *t, struct lease *l, uint32_t ms);
void lease_claim(struct lease_table *t, struct lease *l, struct conn *c);

#endif
