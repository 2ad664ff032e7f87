/* gpus.h: the gpus command (ListGpus): this node's GPUs as the daemon's
 * NVML tells them, what the device plan of restore --images works with. */
#ifndef CUDACKPT_CTL_GPUS_H
#define CUDACKPT_CTL_GPUS_H

#include <cudackpt/client.h>

#include <stdbool.h>

/* gpus: one line per GPU, or ListGpus' parameters as JSON.  Returns the
 * exit status: 1 when the daemon has no NVML (said on stderr). */
int ctl_gpus_run(cudackpt_client *client, const char *prefix, bool json);

#endif
