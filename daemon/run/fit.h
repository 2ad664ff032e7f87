/* fit.h: whether a restore fits on the GPUs it goes to, decided before the
 * driver is asked.
 *
 * A restore that finds too little GPU memory fails with
 * CUDA_ERROR_OUT_OF_MEMORY and leaves the process checkpointed for good:
 * every later restore fails too (driver-behaviour.md, "A restore that does
 * not fit").  So a Restore (and Resume, and the restore phase of a group)
 * is refused, InsufficientGpuMemory, when what it needs on a GPU is more
 * than that GPU has free now, less what restores under way there have
 * been promised (their holds).  force skips the check.
 *
 * What a process needs on a GPU: what NVML showed it holding there just
 * before its checkpoint through the daemon (its record, kept on disk
 * across restarts: fitstore.h), or, without a record, its resident host
 * memory (a checkpointed process keeps its GPU memory in its host memory,
 * so this is an upper bound), put whole on each GPU the restore goes to
 * (each GPU of a gpu_mapping; without one, every GPU of the machine: which
 * the process used is not known, so it must fit on each).
 * Either is increased by restore_gpu_margin_mib per process and GPU: what
 * a restore takes beyond what the process held (performance.md).  A
 * process NVML lists on a GPU holds its memory already (it is not
 * checkpointed; the driver refuses its restore): it needs nothing.
 *
 * Records are a shared resource: max_gpu_records in all, and at most
 * max_gpu_records_per_uid of one owner (the process's real uid, root's
 * included).  An owner at its share loses its own oldest record for a new
 * one; when the table is full, the oldest record of the owner holding the
 * most goes, only if that owner holds more than the new record's owner
 * would; otherwise the new one is not kept (logged) and its process is
 * estimated.  So no owner's records push out those of an owner holding
 * fewer.
 *
 * Without NVML (or its memory query), nothing is checked.  Worker threads,
 * but fit_release(), which the loop thread may call too. */
#ifndef CUDACKPT_FIT_H
#define CUDACKPT_FIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "cuda-api.h"
#include "base/config.h"
#include "base/share.h"
#include "host/gpumem.h"
#include "run/fitstore.h"

/* Why a restore was refused: on gpu it needs needed bytes, and free are
 * free there. */
struct fit_refusal {
        char gpu[GPUMEM_UUID_MAX];
        uint64_t needed;
        uint64_t free;
};

/* A process about to be restored. */
struct fit_proc {
        pid_t pid;              /* in the daemon's (the initial) pid namespace */
        uint64_t start_time;
        uint64_t rss;           /* its resident memory, for the estimate; 0 unknown */
};

struct fit_hold;

struct fit {
        uv_mutex_t lock;                /* the records and the holds */
        uv_mutex_t store_lock;          /* one writer of the store at a time */
        const struct gpumem *gpumem;
        atomic_bool on;                 /* NVML is open and says what is free */
        uint64_t margin;                /* bytes */
        unsigned max_records;
        struct share owners;            /* records by owner (under lock) */
        int dir_fd;                     /* the store's directory (privdir.h); -1: in memory only */
        char *store;                    /* the store's path, for the log; NULL: in memory only */
        char boot_id[40];
        struct fit_record *recs;        /* oldest first */
        size_t n_recs, cap_recs;
        uint64_t gen;                   /* changes of the records */
        uint64_t saved_gen;             /* the last change on disk (store_lock) */
        struct fit_hold *holds;
        size_t n_holds, cap_holds;
};

/* Reads the records back from the store in dir_fd (the start): the
 * runtime directory, opened and checked by privdir_open(), taken (closed
 * by fit_free()); -1: none, in memory only.  dir names it in the log.
 * *why says what was wrong with the store ("" when all is well).  0 or
 * -ENOMEM. */
int fit_init(struct fit *f, const struct config *cfg, const struct gpumem *g, int dir_fd, const char *dir, char *why,
             size_t whylen);
/* NVML has been opened (or not): from now on restores are checked.  Loop. */
void fit_ready(struct fit *f);
bool fit_active(struct fit *f);
void fit_free(struct fit *f);

/* What pid holds on each GPU now (*ret->n 0 when nothing): taken just
 * before its checkpoint.  -ENODEV when not active. */
int fit_measure(struct fit *f, pid_t pid, struct fit_record *ret);
/* Its checkpoint succeeded: r (taken by fit_measure, start_time and uid
 * set) is kept, on disk before this returns, unless the shares above say
 * otherwise. */
void fit_keep(struct fit *f, const struct fit_record *r);
/* Its restore succeeded: its record goes (from the disk with the next
 * write: a record of a process that runs again is never used, NVML lists
 * the process). */
void fit_forget(struct fit *f, pid_t pid, uint64_t start_time);

/* Whether the restore of procs (together, with this mapping) fits.  0: it
 * does (or procs need nothing), and each process holds its share until
 * fit_release(); -ENOSPC: it does not, *ret says where; -ENODEV: cannot
 * be told (not active, NVML failed). */
int fit_reserve(struct fit *f, const struct fit_proc *procs, size_t n, const CUcheckpointGpuPair *pairs,
                unsigned n_pairs, struct fit_refusal *ret);
/* The holds of the process end (its restore was made, or will not be). */
void fit_release(struct fit *f, pid_t pid, uint64_t start_time);

#endif
