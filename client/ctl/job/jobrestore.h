/* jobrestore.h: cudackptctl restore --images, a whole job back from disk
 * through CRIU. */
#ifndef CUDACKPT_CTL_JOBRESTORE_H
#define CUDACKPT_CTL_JOBRESTORE_H

#include "jobstep.h"

/* Runs the restore a asks for; returns the exit status. */
int ctl_job_restore(const ctl_job_args *a);

#endif
