/* group.h: the group coordinator: operations on groups of processes
 * (LockGroup, CheckpointGroup, RestoreGroup, UnlockGroup, SuspendGroup,
 * ResumeGroup).
 *
 * A group is the set of processes one selector names (pids, a cgroup, a
 * process tree), read and judged by the selection engine (select.h).  The
 * coordinator lives on the loop thread and moves a group through the
 * phases of its plan (plan.h); each phase fans out over the members and
 * waits for all of them (the barrier) before the next one starts.  Groups
 * sharing a member run one after the other, in arrival order.  Every
 * driver call goes through sched_submit() as a single call would, so it
 * never overlaps another operation on its process, and each member is
 * held (sched_hold) from its first step to its last, so no other caller's
 * mutating call comes between two of them; the coordinator itself never
 * blocks and never calls the driver.
 *
 * Leases live above (lease.h): a group that asks for one is admitted,
 * and granted one when it succeeds, through the hooks its owner gives at
 * init.  A lease's undo is a group of the daemon's own
 * (group_start_internal).  What groups share with ListProcesses (their
 * slots, the call's way to its answer) is in jobs.h. */
#ifndef CUDACKPT_GROUP_H
#define CUDACKPT_GROUP_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "jobs/grouplease.h"
#include "jobs/jobs.h"
#include "auth/policy.h"
#include "varlink/proto.h"
#include "base/share.h"

struct conn;
struct group;

/* Takes the final reply of a group the daemon started itself (consumed;
 * NULL when it could not be made). */
typedef void (*group_end_cb)(void *ctx, cJSON *msg);

/* Every group in flight, in arrival order (the server owns one). */
struct group_table {
        struct jobs *jobs;              /* the daemon's parts, the slots */
        struct group_lease_hooks lease;
        struct group *head, *tail;
        bool starting, again;           /* start_waiting() is running; look again */
};

void group_init(struct group_table *t, struct jobs *js, const struct group_lease_hooks *lease);

/* Takes a call of a group method: answers it at once (a parameter error,
 * a limit) or starts the group.  Loop thread. */
void group_call(struct group_table *t, struct conn *c, struct proto_call *call);

/* Starts a group of the daemon's own (a lease's undo): the caller is
 * caller (which must outlive it), req is taken over, members gone or
 * changed since are left out rather than failing it, and the final reply
 * goes to on_end.  0 or -ENOMEM. */
int group_start_internal(struct group_table *t, enum proto_method m, const struct policy_caller *caller,
                         struct proto_group_request *req, group_end_cb on_end, void *ctx);

#endif
