/* runcgroup.h: the cgroup of a job that `cudackptctl run` starts:
 * PARENT/NAME on a cgroup v2 hierarchy, when PARENT is on one and can be
 * written (PARENT made if missing, its parent then on cgroup v2). */
#ifndef CUDACKPT_CTL_RUNCGROUP_H
#define CUDACKPT_CTL_RUNCGROUP_H

#include <stddef.h>

#define CTL_RUN_CGROUP_PARENT "/sys/fs/cgroup/cudackpt-jobs"

/* PARENT/name made afresh (an empty one left by an earlier job is taken
 * over) and opened (O_DIRECTORY) into *ret_fd, its path into path:
 * 0; -ENOTSUP when PARENT is not on a cgroup v2 hierarchy; -EEXIST when
 * a busy cgroup has the name; other -errno (-EROFS, -EACCES: not
 * writable). */
int ctl_run_cgroup_make(const char *parent, const char *name, int *ret_fd, char *path, size_t size);
/* The calling process moved into the cgroup fd: 0 or -errno. */
int ctl_run_cgroup_join(int fd);
/* path removed, if empty by then. */
void ctl_run_cgroup_remove(const char *path);

#endif
