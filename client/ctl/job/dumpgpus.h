/* dumpgpus.h: dump's part of the device plan: this node's GPUs asked of
 * the daemon (ListGpus) before the suspend, and the manifest's device
 * records (manifestgpu.h) made from them and from the members' GPU memory
 * (ListProcesses, also before the suspend). */
#ifndef CUDACKPT_CTL_DUMPGPUS_H
#define CUDACKPT_CTL_DUMPGPUS_H

#include "manifest.h"

#include <cudackpt/client.h>
#include <cJSON.h>

/* ListGpus' parameters, NULL when the daemon does not answer them (an
 * older daemon): the manifest then has no records. */
cJSON *ctl_dump_gpus_ask(cudackpt_client *client);
/* ListProcesses' list of selector's processes (their GPUs, before the
 * suspend), NULL when the daemon does not answer it. */
cJSON *ctl_dump_gpus_processes(cudackpt_client *client, const cJSON *selector);
/* m->devices from gpus (ctl_dump_gpus_ask()) and processes (ListProcesses'
 * list), for m's members; left NULL when they do not tell enough. */
void ctl_dump_gpus_record(ctl_manifest *m, const cJSON *gpus, const cJSON *processes);

#endif
