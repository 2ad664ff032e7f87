/* nstree.h: a dumped tree that is a pid namespace of its own (its root the
 * namespace's init, as `cudackptctl run` makes it): its processes keep
 * their pids inside the namespace, so a restore recreates them whatever
 * host pids are taken, and finds them again by those pids. */
#ifndef CUDACKPT_CTL_NSTREE_H
#define CUDACKPT_CTL_NSTREE_H

#include "jobpin.h"
#include "manifest.h"
#include "proctree.h"

#include <stdbool.h>
#include <stddef.h>

/* The NSpid line of /proc/PID/status: the pid in each namespace from ours
 * down (at most max); how many, or -errno. */
int ctl_ns_pids(int pid, int *ret, size_t max);

/* dump: when tree's root is the init of a pid namespace below ours, marks
 * it (pid_ns) and fills its ns_pids and its members' ns_pid (each pid as
 * the namespace sees it); mnt_ns when it has a mount namespace of its own.  0, or -errno (-EXDEV: a process of the tree
 * outside that namespace, which criu cannot dump with it). */
int ctl_nstree_fill(ctl_manifest *m, size_t tree);

/* restore, at post-restore: the namespace tree i's new root, the child of
 * criu_pid (the criu that restored it) that is the init of a pid namespace;
 * tree->root becomes its host pid.  -ESRCH when there is none. */
int ctl_nstree_locate(ctl_manifest_tree *tree, const ctl_proctree *t, int criu_pid);

/* restore, once tree's processes are pinned (t: the scan they were pinned
 * from): each member of m in the namespace tree (whose root is already the
 * new one) found among pins by its pid in the namespace, its pid and tree
 * replaced by the new host ones, and the tree's pids likewise.  -ESRCH
 * when a member is not there. */
int ctl_nstree_map(ctl_manifest *m, size_t tree, int old_root, const ctl_proctree *t, const ctl_pins *pins);

#endif
