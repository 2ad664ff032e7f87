/* phases.h: the coordinator of a job's phases across its nodes
 * (`cudackptctl suspend|resume|lock|unlock --slurm-job=J`): one step on
 * every node (slurm.h) running the node's part (nodepart.h), over the
 * link (link.h); phases with a barrier across the nodes (no node
 * checkpoints before every node locked, no node unlocks before every node
 * restored), any node failing or gone rolling every node back.  It knows
 * the phases, not the transport.  Private to cudackptctl. */
#ifndef CUDACKPT_CTL_NODES_PHASES_H
#define CUDACKPT_CTL_NODES_PHASES_H

#include <stdbool.h>

/* The longest a node's part may take to say hello, and a phase by
 * default (a checkpoint takes about 0.8 s per GiB). */
#define PHASES_HELLO_TIMEOUT_MS 60000
#define PHASES_PHASE_TIMEOUT_MS 600000

typedef struct ctl_phases_op {
        const char *prefix;        /* "cudackptctl: suspend --slurm-job 42: " */
        const char *verb;          /* lock, suspend, resume, unlock */
        const char *job;
        long long lock_timeout;    /* -1: the daemons' default */
        int timeout_ms;            /* each phase's limit, 0: PHASES_PHASE_TIMEOUT_MS */
        bool json;                 /* the summary as JSON on stdout */
        bool progress;             /* each node's answer to each phase on stderr */
} ctl_phases_op;

/* Whether --slurm-job=job does not go with the rest of a command line
 * (verb; selector: a selector given; lease_map: --lease-ms, --hold, --map
 * or --force given): true having said the usage error on stderr. */
bool ctl_phases_usage(const char *job, const char *verb, bool selector, bool lease_map);

/* Runs the verb on the job's nodes; returns the exit status (the group
 * commands': that of the first failing node's error). */
int ctl_phases_run(const ctl_phases_op *o);

#endif
