/* job.h: the command line of cudackptctl dump and restore --images, and
 * the barrier's own "criu-barrier SOCKET", each parsed here and handed to
 * the step that runs it (dump.c, jobrestore.c, criubarrier.c), which call
 * nothing back up.  Private to cudackptctl. */
#ifndef CUDACKPT_CTL_JOB_H
#define CUDACKPT_CTL_JOB_H

#include <stdbool.h>

/* Whether argv is a dump, a restore with --images, or the dump's barrier
 * (run by CRIU as an action script): those go to ctl_job_main(). */
bool ctl_job_wanted(int argc, char **argv);
int ctl_job_main(int argc, char **argv);

#endif
