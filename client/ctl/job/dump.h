/* dump.h: cudackptctl dump, a whole job to disk through CRIU. */
#ifndef CUDACKPT_CTL_DUMP_H
#define CUDACKPT_CTL_DUMP_H

#include "jobstep.h"

/* Runs the dump a asks for; returns the exit status. */
int ctl_job_dump(const ctl_job_args *a);

#endif
