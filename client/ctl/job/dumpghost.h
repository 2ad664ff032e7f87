/* dumpghost.h: the deleted files of a job dumped for its owner, which
 * CRIU would make again by path, as root, when restoring it. */
#ifndef CUDACKPT_CTL_DUMPGHOST_H
#define CUDACKPT_CTL_DUMPGHOST_H

#include "jobpin.h"

#include <stddef.h>
#include <sys/types.h>

/* Whether every deleted file a pinned process holds open or mapped (on a
 * mount of its namespace: not a memfd, shared anonymous memory or SysV
 * segment) is at a path no one but root can make lead elsewhere: from
 * the process's root to the file's directory, no entry is a link, or in
 * a directory that is not root's, or that others may write to (unless
 * sticky and the entry is root's).  A job of uid 0 passes.  Called while
 * criu holds the processes (post-dump).  0; -EACCES, what and why in err;
 * -errno (said in err) when it could not be checked. */
int ctl_dump_ghost_check(const ctl_pins *pins, uid_t uid, char *err, size_t size);

#endif
