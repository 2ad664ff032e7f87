/* status.h: the status command (GetStatus), and its driver's line for
 * doctor. */
#ifndef CUDACKPT_CTL_STATUS_H
#define CUDACKPT_CTL_STATUS_H

#include <cudackpt/client.h>
#include <cJSON.h>

#include <stdbool.h>
#include <stddef.h>

/* What GetStatus says of the daemon's driver.  Strings sanitised. */
typedef struct ctl_driver_status {
        bool available;
        bool simulated;
        int version;            /* 13000 for CUDA 13.0; 0 when not known */
        long long gpus;         /* -1 when not said */
        char path[512];         /* the library as the daemon was told it */
        char reason[512];       /* why it is not available */
} ctl_driver_status;

/* The driver of GetStatus's parameters: 0, or -EBADMSG when they hold none. */
int ctl_status_driver(const cJSON *params, ctl_driver_status *ret);

/* "CUDA 13.0, 2 GPUs, from libcuda.so.1", "SIMULATED CUDA 13.0, ... (no GPU
 * is involved)" or "no usable CUDA driver (PATH): REASON". */
void ctl_status_describe_driver(const ctl_driver_status *d, char *buf, size_t size);

/* status: GetStatus in lines, or its parameters as JSON.  Returns the exit
 * status: CUDACKPT_EXIT_DRIVER_UNAVAILABLE when the daemon has no usable
 * driver (having printed its status all the same). */
int ctl_status_run(cudackpt_client *client, const char *prefix, bool json);

#endif
