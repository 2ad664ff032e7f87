/* stepdescent.h: whether a process descends from a slurmstepd of job J on
 * this node, the node's part's second rule of which processes are the
 * job's (nodepart.c; docs/slurm.md, "Which processes are the job's").  It
 * finds a job's task that cleared its environment (`env -i`, some
 * launchers), which the first rule (SLURM_JOB_ID in the environment)
 * misses.
 *
 * The walk goes up the parent chain (/proc/PID/stat's ppid), at most
 * STEPDESCENT_MAX_DEPTH links, each link pinned: the parent started no
 * later than the child, and the child still has that parent once the
 * parent was read (a pid reused meanwhile cannot splice a chain), every
 * file of one process read through one /proc/PID descriptor.  It stops at
 * the first ancestor that is a slurmstepd: real and effective uid 0, and
 * its command line exactly "slurmstepd: [J.S]" (S: batch, extern,
 * interactive or a step number; Slurm pads it with NULs).  The process
 * descends from job J's when that slurmstepd is J's and is the same
 * program as the reference: the slurmstepd of the caller's own step,
 * found among the caller's ancestors (st_dev and st_ino of /proc/PID/exe;
 * only where the caller may read a root process's exe, i.e. as root: the
 * job's owner may not, and then the uid 0 check stands for it).  And the
 * process must share the caller's UTS namespace (its host name): where
 * several slurmd share one pid space (the test cluster, or
 * --enable-multiple-slurmd), another node's slurmstepd of J is seen here
 * too.  Private to cudackptctl. */
#ifndef CUDACKPT_CTL_NODES_STEPDESCENT_H
#define CUDACKPT_CTL_NODES_STEPDESCENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The most parent links walked from a process to its slurmstepd: a job's
 * task is 1 below it, a launcher's worker a few more. */
#define STEPDESCENT_MAX_DEPTH 64

typedef struct stepdescent {
        char job[24];           /* SLURM_JOB_ID, digits */
        bool exe_known;         /* the reference's exe was read */
        dev_t exe_dev;
        ino_t exe_ino;
        char uts[64];           /* the caller's "uts:[N]" */
} stepdescent;

/* What a command line is: a slurmstepd's of job, of another job, or no
 * slurmstepd's. */
typedef enum { STEPDESCENT_NONE, STEPDESCENT_OTHER, STEPDESCENT_JOB } stepdescent_kind;

/* Of len bytes of a /proc/PID/cmdline (job: digits). */
stepdescent_kind stepdescent_cmdline_kind(const char *cmdline, size_t len, const char *job);

/* The reference: the caller's own step's slurmstepd of job, among its
 * ancestors.  0; -ESRCH when the caller descends from no slurmstepd of
 * job; -EINVAL for a job that is no number; -errno. */
int stepdescent_init(stepdescent *d, const char *job);

/* Whether pid, started at start_time (field 22 of /proc/PID/stat),
 * descends from a slurmstepd of d's job on this node.  False when it
 * cannot tell (a file unreadable, a link that changed, the walk too
 * deep). */
bool stepdescent_of(const stepdescent *d, int pid, uint64_t start_time);

#endif
