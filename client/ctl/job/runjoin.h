/* runjoin.h: --cgroups-of=FD of run and restore (runjoin.c): the job
 * joins every cgroup of another process, named by a pidfd (cudackptd's
 * caller: a Slurm job's step, whose cgroups account for it and limit the
 * GPUs it sees).
 *
 * The process's cgroups are read from /proc/PID/cgroup, PID the pidfd's
 * (/proc/self/fdinfo/FD), and only then the pidfd checked alive
 * (pidfd_send_signal 0): a pid reused meanwhile is never taken for it.
 * Each line names a hierarchy (cgroup v1: its controllers, each mounted
 * hierarchy; v2: the unified one); its cgroup.procs there is opened as
 * root, once, and what is opened is what the job is written into.  A
 * hierarchy whose cgroup is its root ("/") may be missing here (nothing to
 * join); one with any other cgroup must be joined, or the start fails. */
#ifndef CUDACKPT_CTL_RUNJOIN_H
#define CUDACKPT_CTL_RUNJOIN_H

#include <stddef.h>
#include <sys/types.h>

/* The most hierarchies joined. */
#define CTL_RUN_JOIN_MAX 32

typedef struct ctl_run_join {
        size_t n;
        int procs[CTL_RUN_JOIN_MAX]; /* each hierarchy's cgroup.procs, for writing (close-on-exec) */
        char *path[CTL_RUN_JOIN_MAX]; /* ... its path, for messages */
        int required[CTL_RUN_JOIN_MAX]; /* not its root cgroup: a failure to join fails */
} ctl_run_join;

/* /proc/PID/FILE of pidfd's process (PID its fdinfo's) into text, then the
 * pidfd checked alive, so that the text was that process's: 0, -EBADF (not
 * a pidfd) or -ESRCH (its process has ended, or the file cannot be read).
 * Also for --limits-of (runlimits.h). */
int ctl_run_pidfd_read(int pidfd, const char *file, char *text, size_t size);
/* The cgroups of pidfd's process opened into *ret (as above): 0, or
 * -errno with a sentence in err (-ESRCH: the process has ended; -EBADF:
 * not a pidfd); *ret is then empty. */
int ctl_run_join_open(int pidfd, ctl_run_join *ret, char *err, size_t err_size);
/* pid (a host pid) written into each: 0, or -errno with a sentence in err
 * (a required one failed). */
int ctl_run_join_move(const ctl_run_join *j, pid_t pid, char *err, size_t err_size);
void ctl_run_join_close(ctl_run_join *j);

#endif
