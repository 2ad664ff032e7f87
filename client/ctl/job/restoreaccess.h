/* restoreaccess.h: what a restored job holds, checked against its owner's
 * rights before it runs. */
#ifndef CUDACKPT_CTL_RESTOREACCESS_H
#define CUDACKPT_CTL_RESTOREACCESS_H

#include "criu.h"
#include "jobpin.h"

#include <stddef.h>
#include <sys/types.h>

/* Whether uid, with each process's own gid and groups and no capability,
 * could open every file each pinned process holds (descriptors, file
 * mappings, its executable, working directory and root) with the access
 * the process has to it, reached by the path the process holds it by.
 * Called while criu still holds the processes (nothing of them ran);
 * runs (n_runs) are the trees' criu runs, whose logs the processes hold
 * until then.  init, a run job's init (root's cudackpt-init, holding
 * only /dev/null and its own program, at paths root chose), is not
 * checked.  Then the processes' sockets, as restoresocks.h says (made
 * uid's; none on a port uid could not have taken).  0; -EACCES, what and why in refused; -errno, said on stderr
 * with prefix, when the check could not be made. */
int ctl_restore_access_check(const ctl_pins *pins, int init, uid_t uid, const ctl_criu_run *runs, size_t n_runs,
                             const char *prefix, char *refused, size_t size);

#endif
