/* grouplease.h: a group's lease (group.h).  Leases live above the groups
 * (lease.h): a group that asks for one reaches the lease table through
 * the hooks its owner gives at group_init() (leasehooks.h has the
 * daemon's): admitted into the caller's lease share at its arrival, its
 * lease written as pending before its first driver step, granted when
 * it succeeds. */
#ifndef CUDACKPT_GROUPLEASE_H
#define CUDACKPT_GROUPLEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "auth/policy.h"
#include "base/share.h"
#include "jobs/jobs.h"
#include "jobs/leasedata.h"
#include "jobs/members.h"
#include "varlink/proto.h"

struct conn;

/* What a group that asks for a lease needs of the lease layer above: a
 * place in the caller's lease share from its arrival (admit_cb: false,
 * with *ret saying which limit, when it is taken) until it is granted or
 * fails (unadmit_cb), the lease written as pending before its first
 * driver step (intend_cb, on the members selected), and the grant when it
 * succeeded (grant_cb: adds "lease" to the parameters of reply; c may
 * have closed).  The lease layer writes its store off the loop thread:
 * when_written_cb is true when done(arg) will run once the changes made
 * so far are on disk (or their write failed), false when nothing is left
 * to write. */
struct group_lease_hooks {
        bool (*admit_cb)(void *ctx, const struct policy_caller *caller, struct share_refusal *ret);
        void (*unadmit_cb)(void *ctx, const struct policy_caller *caller, struct proto_lease *want);
        void (*intend_cb)(void *ctx, const struct policy_caller *caller, enum proto_method m,
                          struct proto_lease *want, const struct lease_member *members, size_t n);
        void (*grant_cb)(void *ctx, struct conn *c, enum proto_method m, const struct proto_lease *want,
                         const struct lease_member *members, size_t n, cJSON *reply);
        bool (*when_written_cb)(void *ctx, void (*done)(void *arg), void *arg);
        void *ctx;
};

/* A place in jc's caller's lease share when it asks for a lease, and a
 * slot among the calls in flight; false when refused (answered). */
bool grouplease_admit(const struct group_lease_hooks *h, struct jobs_call *jc);
/* The place in the lease share back, when jc had one (the group ends). */
void grouplease_unadmit(const struct group_lease_hooks *h, struct jobs_call *jc);
/* Before a group's first driver step: a group that asks for a lease has
 * it written, pending (on the members of ms acting now), so that a daemon
 * killed meanwhile undoes it at its start.  True when the lease layer
 * still has changes to write (this one, or others': the lease of an
 * undo's group marked undoing): then done(arg) runs once they are on
 * disk, and the group takes its first step only then. */
bool grouplease_intend(const struct group_lease_hooks *h, struct jobs_call *call, const struct members *ms,
                       void (*done)(void *arg), void *arg);
/* At a group's end: a LockGroup or SuspendGroup that asked for a lease and
 * succeeded is granted it, on the members of ms acting now, with "lease"
 * in msg's parameters.  True when the lease layer still has changes to
 * write (the grant, leases its members left): then done(arg) runs once
 * they are on disk, and msg goes only then (lease.h's promise: nothing is
 * reported saved before it is). */
bool grouplease_finish(const struct group_lease_hooks *h, const struct jobs_call *call, const struct members *ms,
                       bool succeeded, cJSON *msg, void (*done)(void *arg), void *arg);

#endif
