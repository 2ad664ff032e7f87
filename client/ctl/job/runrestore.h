/* runrestore.h: a job of `cudackptctl run`, restored by restore --images:
 * its name taken again, by its new init. */
#ifndef CUDACKPT_CTL_RUNRESTORE_H
#define CUDACKPT_CTL_RUNRESTORE_H

#include "jobpin.h"
#include "manifest.h"
#include "runreg.h"

/* When m is a job dumped with --run (its "run" record, one tree, a pid
 * namespace's): the name recorded for the tree's new root, by its pid and
 * the start time pinned at post-restore, as it ran (user, cgroup).  A name
 * this node's jobs already use, or the bounds reached, leave the job
 * running without it (said on stderr, with prefix).  The record, with
 * its new init, in *ret (NULL: not wanted): 0 when it was recorded, else
 * -errno (-ENOENT: not a run job, or not one dump --run wrote). */
int ctl_run_restored(const char *prefix, const ctl_manifest *m, const ctl_pins *pins, ctl_run_record *ret);

#endif
