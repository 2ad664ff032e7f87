/* manifestgpu.h: the manifest's device records, what the device plan of
 * restore --images needs to know of the node a job was dumped on
 * (devplan.h):
 *
 *   "devices": {"driver_version": "580.95.05",
 *               "gpus": [{"uuid": "GPU-...", "name": "NVIDIA H200",
 *                         "pci_bus_id": "00000000:18:00.0",
 *                         "memory_total_bytes": 150754820096, "index": 0}]}
 *
 * at the top (the GPUs the members held memory on, as ListGpus told them
 * on the dump's node), and in each member "gpu_memory": [{"uuid": ...,
 * "bytes": N}], what it held on each before it was suspended (as
 * ListProcesses told it).  A manifest without "devices" (an older dump,
 * a daemon without NVML) has none: the plan then falls back to the same
 * GPUs or --device-map.  Read, the records are checked as input from
 * anywhere. */
#ifndef CUDACKPT_CTL_MANIFESTGPU_H
#define CUDACKPT_CTL_MANIFESTGPU_H

#include <cJSON.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most GPUs a manifest may record. */
#define CTL_DEVREC_MAX_GPUS 1024

typedef struct ctl_devrec_gpu {
        char *uuid;
        char *name;               /* its model; "" when NVML did not say */
        char *pci_bus_id;         /* "" when NVML did not say */
        uint64_t total;           /* its memory in bytes; 0 not known */
        int index;                /* NVML's ordinal on the dump's node; -1 not known */
} ctl_devrec_gpu;

typedef struct ctl_devrec_use {
        char *uuid;               /* one of ctl_devrec.gpus */
        uint64_t bytes;           /* held there before the suspend */
} ctl_devrec_use;

typedef struct ctl_devrec_member {
        bool known;               /* its GPU memory was told (else the plan cannot be made) */
        ctl_devrec_use *use;
        size_t n_use;
} ctl_devrec_member;

typedef struct ctl_devrec {
        char *driver_version;     /* "" when NVML did not say */
        ctl_devrec_gpu *gpus;
        size_t n_gpus;
        ctl_devrec_member *members; /* in the order of the manifest's members */
        size_t n_members;
} ctl_devrec;

/* At dump: the records of the members (their pids, in the manifest's
 * order) from ListGpus' reply (its parameters) and ListProcesses' list
 * (taken before the suspend).  NULL when either is missing or says no
 * NVML, or out of memory: the manifest then has no records. */
ctl_devrec *ctl_devrec_collect(const cJSON *gpus_reply, const cJSON *processes, const int *pids, size_t n);

/* Adds d's keys to root, the manifest's object (its "members" array, in
 * the order d has them).  false when out of memory. */
bool ctl_devrec_write(const ctl_devrec *d, cJSON *root);
/* Reads root's records for its n_members members into *ret (NULL when
 * there are none).  -EINVAL when malformed, -ENOMEM. */
int ctl_devrec_read(const cJSON *root, size_t n_members, ctl_devrec **ret);
void ctl_devrec_free(ctl_devrec *d);

/* The record of GPU uuid in d, NULL when none. */
const ctl_devrec_gpu *ctl_devrec_find(const ctl_devrec *d, const char *uuid);

#endif
