/* fitstore.h: what each checkpointed process held on each GPU (fit.h),
 * on disk, so that it outlives the daemon.
 *
 * One JSON file, FITSTORE_FILE in the runtime directory, written whole
 * after every change (storefile.h: atomically, fsync'ed) and read back at
 * start.  It is read as root, so it is never trusted: storefile.h's checks,
 * then every key and value (unknown keys, a pid twice, too many records
 * refuse the whole file).  Its start times count from the boot its boot id
 * names; records of another boot are dropped on reading. */
#ifndef CUDACKPT_FITSTORE_H
#define CUDACKPT_FITSTORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "host/gpumem.h"

#define FITSTORE_FILE "gpu-records.json"
#define FITSTORE_VERSION 2
/* The GPUs one record names: a process on more is recorded on its first. */
#define FIT_MAX_GPUS_PER_PROC 16

struct fit_gpu_use {
        char uuid[GPUMEM_UUID_MAX]; /* as NVML names it */
        uint64_t bytes;
};

struct fit_record {
        pid_t pid;
        uint64_t start_time;
        uid_t uid;              /* the process's owner (real uid): whose share it counts in */
        unsigned n;
        struct fit_gpu_use use[FIT_MAX_GPUS_PER_PROC];
};

/* The text of the store (malloc'ed), NULL when out of memory. */
char *fitstore_encode(const struct fit_record *recs, size_t n, const char *boot_id);
/* Parses text: 0 with *ret (malloc'ed, NULL when none) and *ret_n, the
 * records of boot boot_id only; -EINVAL with why set when it is not a
 * valid store of at most max records. */
int fitstore_decode(const char *text, size_t max, const char *boot_id, struct fit_record **ret, size_t *ret_n,
                    char *why, size_t whylen);

#endif
