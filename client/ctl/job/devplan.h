/* devplan.h: the device plan of restore --images, where each GPU of a
 * dumped job goes on this node, and the checks it must pass, decided from
 * the manifest's records (manifestgpu.h) and what this node's daemon tells
 * of its GPUs (ListGpus), before anything is touched.
 *
 *   - a GPU of the manifest that this node has keeps its place;
 *   - one named by --device-map goes where the map says;
 *   - any other goes onto a GPU of this node of the same model (NVML's
 *     name) that no other GPU of the job goes to and that has enough free:
 *     the one of the same ordinal first, else the first in this node's
 *     order;
 *   - enough: on each GPU of this node, the sum over the job's members
 *     that go there of what each held before its suspend, plus the
 *     daemon's margin per member (restore_gpu_margin_mib: the context's
 *     share), is at most what it has free now;
 *   - the driver is no older than the dump's (NVML's versions, compared
 *     numerically, major.minor[.patch]).
 *
 * The plan is whole or refused: the first check that fails says what is
 * missing.  --force keeps the placement but lets failed checks pass (as
 * the daemon's fit check does under --force).  Without records (an older
 * manifest, a member whose memory was not told) or without the node's
 * GPUs (no NVML there), no plan is made: restore goes on as before, onto
 * the same GPUs or --device-map.  Pure: no I/O. */
#ifndef CUDACKPT_CTL_DEVPLAN_H
#define CUDACKPT_CTL_DEVPLAN_H

#include "args.h"
#include "manifestgpu.h"

#include <cJSON.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A GPU of this node, as ListGpus tells it. */
typedef struct ctl_node_gpu {
        const char *uuid;
        const char *name;         /* "" not known */
        int index;                /* NVML's ordinal */
        bool free_known;
        uint64_t free;            /* bytes free now */
} ctl_node_gpu;

typedef struct ctl_node {
        const char *driver_version; /* "" not known */
        uint64_t margin;          /* bytes per member and GPU */
        const ctl_node_gpu *gpus;
        size_t n_gpus;
} ctl_node;

typedef enum ctl_plan_check {
        CTL_CHECK_OK,
        CTL_CHECK_FAILED,
        CTL_CHECK_UNKNOWN,        /* cannot be told (a side did not say): passes */
        CTL_CHECK_FORCED,         /* failed, passed by --force */
} ctl_plan_check;

typedef enum ctl_plan_how {
        CTL_PLAN_KEPT,            /* this node has it */
        CTL_PLAN_MAPPED,          /* --device-map */
        CTL_PLAN_CHOSEN,          /* the plan chose it */
        CTL_PLAN_NONE,            /* no GPU could be found */
} ctl_plan_how;

typedef enum ctl_plan_verdict {
        CTL_PLAN_FITS,
        CTL_PLAN_NO_RECORDS,      /* no plan: restore as before */
        CTL_PLAN_OLDER_DRIVER,
        CTL_PLAN_NO_GPU,          /* no GPU of the model left for one of the job's */
        CTL_PLAN_NO_MEMORY,
        CTL_PLAN_UNKNOWN_TARGET,  /* --device-map names a GPU this node lacks */
} ctl_plan_verdict;

typedef struct ctl_plan_entry {
        const ctl_devrec_gpu *from;
        int to;                   /* index into the node's gpus; -1 none */
        ctl_plan_how how;
        uint64_t need;            /* its members' bytes plus the margin each */
        unsigned members;         /* members that held memory on it */
        uint64_t need_there;      /* the sum over every entry going to the same GPU */
        ctl_plan_check model, memory;
} ctl_plan_entry;

typedef struct ctl_plan {
        ctl_plan_entry *e;        /* one per GPU of the records */
        size_t n;
        ctl_plan_verdict verdict;
        ctl_plan_check driver;
        size_t failed;            /* the entry the verdict is about (NO_GPU, NO_MEMORY, UNKNOWN_TARGET) */
} ctl_plan;

/* The plan for rec on node (map: --device-map, may be empty).  0 (the
 * verdict in ret), or -ENOMEM.  rec NULL: CTL_PLAN_NO_RECORDS. */
int ctl_plan_make(const ctl_devrec *rec, const ctl_node *node, const ctl_map *map, bool force, ctl_plan *ret);
void ctl_plan_free(ctl_plan *p);

/* A fitting plan as a device map (every GPU of the job, old=new) into
 * *ret, left empty when every GPU keeps its place.  0 or -ENOMEM. */
int ctl_plan_map(const ctl_plan *p, const ctl_node *node, ctl_map *ret);

/* Numerically, major.minor[.patch...]: <0, 0, >0 into *ret; -EINVAL when
 * either is not such a version. */
int ctl_version_cmp(const char *a, const char *b, int *ret);

/* The check's and the verdict's words ("ok", "older-driver", ...). */
const char *ctl_plan_check_name(ctl_plan_check c);
const char *ctl_plan_how_name(ctl_plan_how h);
const char *ctl_plan_verdict_name(ctl_plan_verdict v);

#endif
