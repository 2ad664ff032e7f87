/* savecaller.h: whether a caller may have the daemon start processes for
 * it (StartJob, RestoreJob).
 *
 * The daemon's jobs run in the daemon's namespaces, with what root's
 * `cudackptctl run` gives them: a caller confined more than that (a
 * container's root, or any caller in a container) would get out through
 * its job.  So the caller must be in the daemon's pid and user namespaces
 * and, when it is root, hold every capability the daemon may hand on
 * (its bounding set) with no seccomp filter.  A mount namespace of its own
 * (Slurm's job_container/tmpfs, a node of a test cluster) is allowed: the
 * job runs as the caller's uid, which gains nothing there, or as root,
 * which with those capabilities reaches every mount anyway. */
#ifndef CUDACKPT_SAVECALLER_H
#define CUDACKPT_SAVECALLER_H

#include <stddef.h>

#include "auth/policy.h"

/* 0, or -EPERM with the reason in why (for the log; the caller is told
 * PermissionDenied). */
int savecaller_check(const struct policy_caller *c, char *why, size_t len);

#endif
