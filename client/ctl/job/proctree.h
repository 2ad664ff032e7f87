/* proctree.h: the process tree read from /proc. */
#ifndef CUDACKPT_CTL_PROCTREE_H
#define CUDACKPT_CTL_PROCTREE_H

#include <stddef.h>
#include <stdint.h>

/* A snapshot of /proc: every pid with its parent. */
typedef struct ctl_proctree {
        int *pid;
        int *ppid;
        size_t n;
} ctl_proctree;

int ctl_proctree_scan(ctl_proctree *ret);
void ctl_proctree_free(ctl_proctree *t);
/* pid and every descendant of it in t (pid first); -ESRCH when pid is not in t. */
int ctl_proctree_subtree(const ctl_proctree *t, int pid, int **ret, size_t *ret_n);
/* The members of set (n pids) that have no proper ancestor in set, in the
 * order of set. */
int ctl_proctree_roots(const ctl_proctree *t, const int *set, size_t n, int **ret, size_t *ret_n);
/* The pids of t whose cgroup v2 path is cgroup or below it. */
int ctl_proctree_cgroup(const ctl_proctree *t, const char *cgroup, int **ret, size_t *ret_n);
/* Field 22 of /proc/PID/stat; 0 when it cannot be read. */
uint64_t ctl_proc_start_time(int pid);
/* Fields 4 (ppid) and 22 (start time) of /proc/PID/stat (either NULL). */
int ctl_proc_stat(int pid, int *ret_ppid, uint64_t *ret_start);

#endif
