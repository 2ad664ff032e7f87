/* dumptrees.h: what dump puts in the manifest: the process trees of the
 * job (the roots among the selected processes, each with every
 * descendant) and its CUDA members, each in its tree with the GPUs it
 * held. */
#ifndef CUDACKPT_CTL_DUMPTREES_H
#define CUDACKPT_CTL_DUMPTREES_H

#include "jobstep.h"
#include "manifest.h"

#include <cJSON.h>

/* Fills m's trees and members from /proc for a's selector; selected: the
 * suspended members as a Selector (NULL: none), processes: ListProcesses'
 * list before the suspend (for the GPUs; NULL: not known).  -ESRCH: no
 * tree; -E2BIG: more than CTL_JOB_MAX_TREES; -EXDEV: a member in none of
 * the trees (its pid in *ret_outside); -ENXIO: a pid namespace's tree
 * holding a process that entered it from outside; -ENOMEM. */
int ctl_dump_find_trees(const ctl_job_args *a, const cJSON *selected, const cJSON *processes, ctl_manifest *m,
                        int *ret_outside);

#endif
