/* group.h: operations on groups of processes, and ListProcesses.
 *
 * A group is the set of processes one selector names (pids, a cgroup, a
 * process tree).  The coordinator lives on the loop thread and moves a
 * group through phases; each phase fans out over the members and waits
 * for all of them (the barrier) before the next one starts:
 *
 *   select      the selection is read from /proc and every member pinned
 *               (pidfd, start time) and authorised, on worker threads, in
 *               chunks run in parallel; one refusal ends the group here
 *   (wait)      groups sharing a member run one after the other
 *   state       GetState of every member, through the per-process queues;
 *               the plan follows from the states (convergence)
 *   lock, checkpoint / restore, unlock
 *               the method's steps, each member's through its own queue
 *               (sched.c), so they never overlap another operation on it
 *   rollback    after a failure of LockGroup, CheckpointGroup or
 *               SuspendGroup: restore then unlock, back to running
 *
 * ListProcesses is the select and state phases of a group without the
 * rest.  Every driver call goes through sched_submit() as a single call
 * would; the coordinator itself never blocks and never calls the driver.
 *
 * Ownership: a group holds a reference on its connection until it has
 * answered; a client that goes away does not stop it. */
#ifndef CUDACKPT_GROUP_H
#define CUDACKPT_GROUP_H

#include <stdatomic.h>
#include <stdbool.h>

#include <cjson/cJSON.h>

#include "discover.h"
#include "proto.h"
#include "share.h"

struct conn;
struct group;
struct policy_caller;
struct proto_call;
struct proto_group_request;
struct server;

/* Takes the final reply of a group the daemon started itself (consumed;
 * NULL when it could not be made). */
typedef void (*group_end_fn)(void *ctx, cJSON *msg);

/* Every group in flight, in arrival order (server.c owns one). */
struct group_table {
        struct group *head, *tail;
        unsigned n;
        struct share slots;             /* callers' groups and listings, by uid (the
                                         * daemon's own take none) */
        bool starting, again;           /* start_waiting() is running; look again */
        struct discover_lib driver_lib; /* the loaded driver's file */
        /* The process index (procindex.h): set once on the loop thread when
         * it is ready, read by workers; NULL meanwhile or without one. */
        struct procindex *_Atomic index;
        atomic_bool index_lost;         /* it missed a process: scans from then on */
        atomic_ulong scans_index, scans_proc; /* candidate lists from each */
};

/* The processes that may be CUDA processes, for ListProcesses and Watch's
 * scans: the index's when there is one, else every process in /proc;
 * ascending, *ret_pids malloc()ed.  Worker threads. */
int group_candidates(struct server *srv, pid_t **ret_pids, size_t *ret_n);

/* Takes a call of a group method or of ListProcesses: answers it at once
 * (a parameter error, a limit) or starts the group.  Loop thread. */
void group_call(struct conn *c, const struct proto_call *call);

/* Starts a group of the daemon's own (a lease's undo): the caller is
 * caller (which must outlive it), req is taken over, members gone or
 * changed since are left out rather than failing it, and the final reply
 * goes to on_end.  0 or -ENOMEM. */
int group_start_internal(struct server *srv, enum proto_method m, const struct policy_caller *caller,
                         struct proto_group_request *req, group_end_fn on_end, void *ctx);

#endif
