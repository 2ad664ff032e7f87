/* runlimits.h: --limits-of=PIDFD of run (runlimits.c): the job gets the
 * resource limits and the umask of another process, named by a pidfd
 * (cudackptd's caller: a Slurm job's step, whose limits Slurm set from the
 * submitting shell's, PropagateResourceLimits: the locked memory an RDMA
 * network needs, the open files, the core size), not those of the daemon
 * that starts it.
 *
 * Read from /proc/PID/limits and /proc/PID/status (PID the pidfd's, from
 * /proc/self/fdinfo/FD), and only then the pidfd checked alive: a pid
 * reused meanwhile is never taken for it.  Applied to this process (run,
 * as root) before it starts the job's init, which inherits them; a limit
 * this process cannot set (a hard limit above its own without
 * CAP_SYS_RESOURCE) fails the start. */
#ifndef CUDACKPT_CTL_RUNLIMITS_H
#define CUDACKPT_CTL_RUNLIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>

#define CTL_RUN_LIMITS_MAX 16

typedef struct ctl_run_limits {
        size_t n;
        int resource[CTL_RUN_LIMITS_MAX];
        struct rlimit lim[CTL_RUN_LIMITS_MAX];
        mode_t umask;
        bool has_umask;
} ctl_run_limits;

/* The text of /proc/PID/limits into *ret (its umask untouched): 0, or
 * -EBADMSG for a line that is not the kernel's. */
int ctl_run_limits_parse(const char *text, ctl_run_limits *ret);
/* pidfd's process's limits and umask into *ret: 0, or -errno with a
 * sentence in err (-ESRCH: the process has ended). */
int ctl_run_limits_read(int pidfd, ctl_run_limits *ret, char *err, size_t err_size);
/* *l set on this process: 0, or -errno with a sentence in err. */
int ctl_run_limits_apply(const ctl_run_limits *l, char *err, size_t err_size);

#endif
