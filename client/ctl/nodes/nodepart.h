/* nodepart.h: the node's part of a job's phases (`cudackptctl node-part
 * VERB [LOCK_TIMEOUT_MS]`, hidden, run by the coordinator's step on each
 * node of the job, phases.h): says hello, then acts on each phase line
 * through its own node's daemon, holding an on-close lease for the whole
 * step, and answers each with one short line.  Private to cudackptctl.
 *
 * The lines (link.h carries them; each names its node):
 *   node -> {"node":N,"hello":1,"uid":U,"n":K,"found_by":{"environment":E,"descent":D}}
 *           K: the job's CUDA processes here; E, D: those each rule found
 *           (nodepart.c; one found by both counts in both)
 *           {"node":N,"hello":0,"error":E}     it cannot act here (then ends 0)
 *   coordinator -> {"phase":P}   P: lock, checkpoint, restore, unlock,
 *                                commit (keep what was done: the lease is
 *                                released) or rollback (undo it)
 *   node -> {"node":N,"phase":P,"ok":1,"ms":T} or {...,"ok":0,"error":E,"what":W}
 * Its input ending ends it, 0: its connection closes, and the daemon's
 * lease undo brings back to running whatever was not committed. */
#ifndef CUDACKPT_CTL_NODES_NODEPART_H
#define CUDACKPT_CTL_NODES_NODEPART_H

#include <stddef.h>

/* The longest line the node part reads. */
#define NODEPART_MAX_LINE 512u

/* main() of `cudackptctl node-part VERB JOB_UID [LOCK_TIMEOUT_MS]`. */
int ctl_nodepart_main(int argc, char **argv);

/* This node's name as a node's part says it, into buf: $SLURMD_NODENAME,
 * else the host name, else "?", made printable (job-part's too: the
 * coordinator of a job saved across nodes names the part saves by it). */
void ctl_nodepart_node_name(char *buf, size_t size);

#endif
