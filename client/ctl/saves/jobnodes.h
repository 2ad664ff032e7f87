/* jobnodes.h: `cudackptctl job start --slurm`: a job that runs on every
 * node of the Slurm job it is started in, saved and restored whole.  The
 * coordinator (the batch script's task) runs one srun step whose task on
 * each node (jobpart.h) has that node's daemon start the node's job, or
 * restore the node's part of the newest set of saves that every node holds
 * whole (all held at their barrier, then all let go); a save signal saves
 * a new set, all parts held at their barrier until every node is ready,
 * then all let go, or none.  Private to cudackptctl. */
#ifndef CUDACKPT_CTL_NODES_JOBNODES_H
#define CUDACKPT_CTL_NODES_JOBNODES_H

#include <signal.h>
#include <stdbool.h>

/* How long every node's part has to say hello. */
#define JOBNODES_HELLO_TIMEOUT_MS 60000
/* How long a phase (every node's job started, its part ready at the
 * barrier, saved) may take by default. */
#define JOBNODES_PHASE_TIMEOUT_MS 600000
/* The most generations of a save one node's part may report. */
#define JOBNODES_MAX_GENS 64

typedef struct ctl_jobnodes_op {
        const char *prefix;     /* of every message: "cudackptctl: job: " */
        const char *name;       /* the job's name on each node */
        const char *save;       /* S: the set's saves are S.gG.nH (jobset.h) */
        const char *output;     /* where the jobs' output goes; NULL: nowhere */
        char *const *argv;      /* the command run on every node */
        sigset_t save_on;       /* the signals that save the job */
        int timeout_ms;         /* each phase's limit, 0: JOBNODES_PHASE_TIMEOUT_MS */
} ctl_jobnodes_op;

/* Runs the job on every node of $SLURM_JOB_ID until it ends (its exit
 * status, the first node's that failed) or is saved whole (0). */
int ctl_jobnodes_run(const ctl_jobnodes_op *o);

#endif
