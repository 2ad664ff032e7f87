/* access.h: what a caller may learn of a process and do to it.
 *
 * The one rule, asked by every method, every reply, every error parameter
 * and every event that concerns a process:
 *
 *   sees     the caller's pid namespace contains the process (pidns.h);
 *            a process it does not see does not exist for it (NoSuchProcess)
 *   reads    it sees it, and the policy allows the read-only methods on
 *            it (policy.h): only then may anything the caller receives
 *            say that it is a CUDA process, its state, its leases or
 *            operations (ListProcesses, Watch, group replies and errors)
 *   acts     it sees it, and the policy allows the mutating methods
 *
 * A lease is managed (ReleaseLease, RenewLease) by its taker (the same
 * uid, from a pid namespace that sees every member) or by a caller who
 * acts on every member.  Privileged callers (root, the operator groups)
 * have capacity of their own in every shared resource (share.h).
 *
 * Pure functions of their arguments plus, for "sees", one ioctl: the loop
 * thread and workers both ask. */
#ifndef CUDACKPT_ACCESS_H
#define CUDACKPT_ACCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/config.h"
#include "auth/policy.h"

/* A process as a decision needs it: pid in the daemon's namespace and its
 * three user ids. */
struct access_proc {
        pid_t pid;
        struct policy_target owner;
};

/* Root or a member of an operator group, in the daemon's pid namespace:
 * has a reserve in every share.  A caller in another pid namespace (a
 * container's root included) is bound as an unprivileged uid. */
bool access_privileged(const struct config *cfg, const struct policy_caller *caller);

/* Whether caller's pid namespace contains pid (the daemon's); *ret_vpid
 * (may be NULL) gets its pid there.  Only for a live process, or one the
 * caller pinned: a pid number alone names whoever holds it now. */
bool access_sees(const struct policy_caller *caller, pid_t pid, pid_t *ret_vpid);

/* The policy alone, for a process already known to be seen. */
bool access_may_read(const struct config *cfg, const struct policy_caller *caller,
                     const struct policy_target *owner);
bool access_may_act(const struct config *cfg, const struct policy_caller *caller,
                    const struct policy_target *owner);

/* ReleaseLease and RenewLease on a lease taken by uid taker on procs. */
bool access_may_manage_lease(const struct config *cfg, const struct policy_caller *caller, uid_t taker,
                             const struct access_proc *procs, size_t n);

#endif
