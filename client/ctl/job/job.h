/* job.h: the command line of cudackptctl dump and restore --images, and
 * the barrier's own "criu-barrier SOCKET", each parsed here and handed to
 * the step that runs it (dump.c, jobrestore.c, criubarrier.c), which call
 * nothing back up.  Private to cudackptctl. */
#ifndef CUDACKPT_CTL_JOB_H
#define CUDACKPT_CTL_JOB_H

#include <getopt.h>

/* The options of dump and restore --images, for the verb table to tell
 * their words apart. */
extern const struct option ctl_job_options[];

/* The rows dump, restore (with --images) and criu-barrier of the verb
 * table: argv whole, the verb its first word that is not an option. */
int ctl_job_main(int argc, char **argv);

#endif
