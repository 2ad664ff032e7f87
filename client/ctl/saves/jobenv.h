/* jobenv.h: what `cudackptctl job start` takes from where it runs: the
 * file its job's output goes to, and, under Slurm, whether it is the
 * task Slurm signals.  Private to cudackptctl. */
#ifndef CUDACKPT_CTL_SAVES_JOBENV_H
#define CUDACKPT_CTL_SAVES_JOBENV_H

#include <stdbool.h>
#include <stddef.h>

/* The job's output: output, else this command's standard output when it
 * is a file (or a terminal, unless file_only: a job on several nodes
 * opens it on each), its path in buf; else NULL, said after prefix. */
const char *ctl_job_output(const char *output, bool file_only, const char *prefix, char *buf, size_t size);

/* Under Slurm ($SLURM_JOB_ID set), warns after prefix when this process's
 * parent is not slurmstepd: Slurm signals slurmstepd's children only, then
 * SIGKILLs the rest of the step as soon as they are gone, well before a
 * save could end. */
void ctl_job_check_slurm_task(const char *prefix);

#endif
