/* proccreds.h: a process's group credentials, read from /proc. */
#ifndef CUDACKPT_CTL_PROCCREDS_H
#define CUDACKPT_CTL_PROCCREDS_H

#include <stddef.h>
#include <sys/types.h>

/* pid's fsgid and supplementary groups (*ret_groups appended to, *ret_n
 * of them, to free()).  0, or -errno. */
int ctl_proc_creds(int pid, gid_t *ret_gid, gid_t **ret_groups, size_t *ret_n);

#endif
