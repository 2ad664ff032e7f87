/* list.h: ListProcesses, the CUDA processes a caller may see.
 *
 * A listing selects to list (select.h: what the caller may not see is left
 * out, each entry gets its command and cgroup), asks NVML for the GPU
 * memory of every process meanwhile (gpumem.h, once it is open), then
 * reads each entry's state: from an operation running on it when there is
 * one (as GetState answers), else through a GetState of the per-process
 * queues.  It shares its slots and its way to the answer with the groups
 * (jobs.h), and waits for no group nor holds one up. */
#ifndef CUDACKPT_LIST_H
#define CUDACKPT_LIST_H

#include <stdbool.h>

#include "host/gpumem.h"
#include "jobs/jobs.h"
#include "varlink/proto.h"

struct conn;

struct list_table {
        struct jobs *jobs;              /* the daemon's parts, the slots */
        const struct gpumem *gpumem;    /* NVML, read once gpumem_on */
        bool gpumem_on;                 /* it is open (list_gpumem_ready) */
        struct gpu_round *gpu_round;    /* ListGpus's NVML query in flight (gpulist.c), or NULL */
};

void list_init(struct list_table *t, struct jobs *js, const struct gpumem *gpumem);
/* NVML is open (loop thread): listings show GPU memory from now on. */
void list_gpumem_ready(struct list_table *t);

/* Takes a ListProcesses call: answers it at once (a parameter error, a
 * limit) or starts the listing.  Loop thread. */
void list_call(struct list_table *t, struct conn *c, struct proto_call *call);

#endif
