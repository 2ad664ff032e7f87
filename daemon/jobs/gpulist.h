/* gpulist.h: ListGpus, the machine's GPUs as NVML tells them (their UUID,
 * model, PCI bus id, memory in all and free now), the driver's version and
 * the margin the restores' fit check adds per process and GPU (fit.h), so
 * that a client can plan where a job it restores goes (cudackptctl restore
 * --images: docs/migration.md).
 *
 * Open to every caller, as nvidia-smi shows the same to every user: it
 * names no process and no user (docs/security.md).  The free memory is
 * asked of NVML on a worker thread, never on the loop, one query at a
 * time: the calls that arrive while one runs are all answered from it, so
 * that a slow NVML holds one worker whatever the callers; each call holds a
 * slot of the caller's share of the calls in flight (jobs.h) until it has
 * answered.  Without NVML (or before it is open) the answer says so, with
 * no GPU.  Loop thread only. */
#ifndef CUDACKPT_GPULIST_H
#define CUDACKPT_GPULIST_H

#include "jobs/list.h"
#include "varlink/proto.h"

struct conn;

/* Takes a ListGpus call (t: the listings' table, for NVML and the slots). */
void gpulist_call(struct list_table *t, struct conn *c, struct proto_call *call);

#endif
