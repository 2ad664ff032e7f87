/* jobplan.h: restore --images' device plan on this node (devplan.h), made
 * before anything is touched: this node's GPUs asked of its daemon
 * (ListGpus), the plan made from the manifest's records, its lines
 * printed, a refused plan refused with what is missing, and --dry-run's
 * answer. */
#ifndef CUDACKPT_CTL_JOBPLAN_H
#define CUDACKPT_CTL_JOBPLAN_H

#include "args.h"
#include "jobstep.h"
#include "manifest.h"

/* The plan for m's job on this node.  Returns the exit status: 0 when it
 * fits or none could be made (restore then goes as before), else the
 * refusal's (CUDACKPT_EXIT_INSUFFICIENT_GPU_MEMORY, _NO_DEVICE_PLAN,
 * _INVALID_GPU_MAPPING, _UNREACHABLE), said on stderr.  *ret_map: the map
 * to restore with, left empty when every GPU keeps its place (or a's own
 * map stands).  With a->dry_run the plan and its checks are printed on
 * stdout (one JSON object with --json). */
int ctl_job_plan(const ctl_job_args *a, const ctl_manifest *m, ctl_map *ret_map);

#endif
