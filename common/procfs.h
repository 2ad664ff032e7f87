/* procfs.h: the lines of /proc that the daemon and cudackptctl both read,
 * parsed once: /proc/PID/stat (whose command name may hold spaces and
 * parentheses) and the cgroup v2 line of /proc/PID/cgroup; and the walk
 * of the process tree they give.  Text in, no
 * I/O: each side reads the file its own way (a pidfd's directory, a
 * checked path). */
#ifndef CUDACKPT_COMMON_PROCFS_H
#define CUDACKPT_COMMON_PROCFS_H

#include <stddef.h>
#include <stdint.h>

/* Field n (3 or more) of a /proc/PID/stat line, or NULL: counting starts
 * after the last ')', which ends the command name (field 2). */
const char *procfs_stat_field(const char *stat_line, int n);

/* Field n as a decimal number: digits only, ended by a space, a newline
 * or the end.  0 or -EINVAL. */
int procfs_stat_u64(const char *stat_line, int n, uint64_t *ret);

/* Field 4, the parent's pid (0 for none): 0 or -EINVAL. */
int procfs_stat_ppid(const char *stat_line, int *ret_ppid);

/* The path of the "0::" line (cgroup v2) of a /proc/PID/cgroup text:
 * *ret_path points into text, *ret_len bytes long (to the newline or the
 * end).  0, or -ENOENT when there is no such line. */
int procfs_cgroup_v2(const char *text, const char **ret_path, size_t *ret_len);

/* The process tree walk: root and every descendant of it, breadth first
 * (root first), in a snapshot of n processes (pid[i] a child of ppid[i]),
 * each once.  -ESRCH when root is not in the snapshot, -E2BIG when more
 * than max processes would be in it, -ENOMEM; the list in *ret (to free())
 * and its length in *ret_n. */
int procfs_descendants(const int *pid, const int *ppid, size_t n, int root, size_t max, int **ret, size_t *ret_n);

#endif
