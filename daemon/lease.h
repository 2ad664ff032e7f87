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
 * A process belongs to one lease at most.  The undo is a group of the
 * daemon's own (group_start_internal), through the same queues as any
 * call, made once: one that fails is logged and reported, never retried.
 * A daemon that stops undoes nothing and logs each lease it leaves.
 * Everything here runs on the loop thread. */
#ifndef CUDACKPT_LEASE_H
#define CUDACKPT_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "ops.h"
#include "policy.h"
#include "proto.h"
#include "share.h"

struct conn;
struct lease;
struct server;

struct lease_member {
        pid_t pid;              /* in the daemon's pid namespace */
        pid_t vpid;             /* as the taker named it */
        uint64_t start_time;
        struct policy_target owner; /* its uids when the lease was taken */
};

struct lease_table {
        struct lease *head;
        unsigned n;                     /* held, undoing ones included */
        unsigned n_members;
        uint64_t next_id;
        struct share share;             /* held, by the takers' uids */
        uv_timer_t timer;               /* the nearest expiry */
        struct policy_caller self;      /* the daemon, as the caller of undos */
};

void lease_init(struct server *s);
/* Closes the timer; the loop must run once more. */
void lease_close(struct server *s);

/* A call that asks for a lease is counted in its caller's lease share
 * from its arrival (lease_admit(): false, with *ret saying which limit is
 * in the way, when it is taken) until it is granted or fails
 * (lease_unadmit()), so that calls in flight together cannot pass it. */
bool lease_admit(struct server *s, const struct policy_caller *caller, struct share_refusal *ret);
void lease_unadmit(struct server *s, const struct policy_caller *caller);

/* A Lock, Suspend, LockGroup or SuspendGroup that asked for want has
 * succeeded on these processes: grants the lease and adds "lease" to the
 * parameters of reply.  When c has already closed and want->on_close, the
 * lease is undone at once. */
void lease_grant(struct server *s, struct conn *c, enum proto_method m, const struct proto_lease *want,
                 const struct lease_member *members, size_t n, cJSON *reply);

/* An operation on pid (start time start_time, 0 unknown) ended with r:
 * a process back to running or gone leaves its lease. */
void lease_op_finished(struct server *s, pid_t pid, uint64_t start_time, enum proto_method m,
                       const struct ops_result *r);

/* c is closing: undo its on-close leases. */
void lease_conn_closed(struct server *s, struct conn *c);

/* ReleaseLease and RenewLease. */
void lease_call(struct conn *c, const struct proto_call *call);

/* The daemon is stopping: log and drop every lease not being undone. */
void lease_shutdown(struct server *s);

#endif
