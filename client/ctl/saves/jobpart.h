/* jobpart.h: a node's part of a job that runs on several nodes
 * (`cudackptctl job start --slurm`, jobnodes.h): the hidden
 * `cudackptctl job-part --save=S --name=N [--output=PATH] -- COMMAND...`
 * that the coordinator's srun step runs on every node.  It asks its node's
 * daemon, as the job's user, to start COMMAND as the node's job, or to
 * restore the node's part save of a set, and to save it, each held at the
 * daemon's barrier until the coordinator says go (jobset.h names the
 * saves).  JSON lines: the coordinator's on stdin, its own on stdout
 * (link.h).  It ignores the signals Slurm sends a step's tasks and ends
 * when its input does: its connections then close, and the daemon stops
 * the node's job, or rolls back a part held at its barrier.  Private to
 * cudackptctl. */
#ifndef CUDACKPT_CTL_NODES_JOBPART_H
#define CUDACKPT_CTL_NODES_JOBPART_H

/* The longest line the coordinator sends. */
#define JOBPART_MAX_LINE 4096
/* How long forgetting the older saves waits for the job's call to end
 * (the daemon lets go of a restored save as the job ends). */
#define JOBPART_FORGET_WAIT_MS 10000

/* main() of `cudackptctl job-part ...`. */
int ctl_jobpart_main(int argc, char **argv);

#endif
