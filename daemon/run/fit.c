/* fit.c: a restore's fit on its GPUs, before the driver (fit.h). */
#include "run/fit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "base/log.h"
#include "base/storefile.h"
#include "host/target.h"
#include "varlink/uuid.h"

/* Most bytes the store of max_gpu_records records may take: a record is
 * far below 4 KiB. */
#define FIT_RECORD_BYTES 4096u

/* What a restore under way was promised on a GPU. */
struct fit_hold {
        pid_t pid;
        uint64_t start_time;
        unsigned gpu;
        uint64_t bytes;
};

static void prune(struct fit *f);

static int load(struct fit *f, size_t max, char *why, size_t whylen)
{
        char *text = NULL;
        size_t len;
        int r;

        storefile_remove_leftovers(f->dir_fd, FITSTORE_FILE);
        r = storefile_read(f->dir_fd, FITSTORE_FILE, max * FIT_RECORD_BYTES + 4096, &text, &len, why, whylen);

        if (r == -ENOENT) {
                why[0] = '\0';
                return 0;
        }
        if (r == 0)
                r = fitstore_decode(text, max, f->boot_id, &f->recs, &f->n_recs, why, whylen);
        free(text);
        if (r == -ENOMEM)
                return r;
        f->cap_recs = f->n_recs;
        for (size_t i = 0; i < f->n_recs; i++)
                share_take_anyway(&f->owners, f->recs[i].uid, false);
        if (r == 0 && f->recs)
                prune(f);
        return 0; /* a store refused is a store without records: why says so */
}

int fit_init(struct fit *f, const struct config *cfg, const struct gpumem *g, int dir_fd, const char *dir, char *why,
             size_t whylen)
{
        static const char *const keys[] = { "max_gpu_records", "max_gpu_records_per_uid", "" };

        memset(f, 0, sizeof(*f));
        f->gpumem = g;
        f->margin = cfg->restore_gpu_margin_mib << 20;
        f->max_records = cfg->max_gpu_records;
        share_init(&f->owners, keys, cfg->max_gpu_records, cfg->max_gpu_records_per_uid, 0);
        f->dir_fd = -1;
        atomic_init(&f->on, false);
        storefile_boot_id(f->boot_id);
        why[0] = '\0';
        if (uv_mutex_init(&f->lock) < 0 || uv_mutex_init(&f->store_lock) < 0) {
                if (dir_fd >= 0)
                        close(dir_fd);
                return -ENOMEM;
        }
        if (dir_fd < 0)
                return 0;
        f->dir_fd = dir_fd;
        if (asprintf(&f->store, "%s/%s", dir ? dir : ".", FITSTORE_FILE) < 0) {
                f->store = NULL;
                return -ENOMEM;
        }
        return load(f, f->max_records, why, whylen);
}

void fit_ready(struct fit *f)
{
        atomic_store(&f->on, f->gpumem->available && f->gpumem->get_memory);
}

bool fit_active(struct fit *f)
{
        return atomic_load(&f->on);
}

void fit_free(struct fit *f)
{
        uv_mutex_destroy(&f->lock);
        uv_mutex_destroy(&f->store_lock);
        if (f->dir_fd >= 0)
                close(f->dir_fd);
        f->dir_fd = -1;
        share_free(&f->owners);
        free(f->store);
        free(f->recs);
        free(f->holds);
}

/* ---- records ----------------------------------------------------------------- */

static struct fit_record *find(struct fit *f, pid_t pid)
{
        for (size_t i = 0; i < f->n_recs; i++)
                if (f->recs[i].pid == pid)
                        return &f->recs[i];
        return NULL;
}

/* Removes pid's record if it is of start_time, keeping the order (oldest
 * first).  Under f->lock. */
static void drop(struct fit *f, pid_t pid, uint64_t start_time)
{
        struct fit_record *e = find(f, pid);

        if (!e || e->start_time != start_time)
                return;
        share_give(&f->owners, e->uid, false);
        memmove(e, e + 1, (size_t)(f->recs + f->n_recs - (e + 1)) * sizeof(*e));
        f->n_recs--;
        f->gen++;
}

/* Writes the records as they are now, unless a write since change gen
 * was made has them already: the checkpoints of a group, ending together,
 * wait for one or two writes, not one each.  A failure costs only the
 * records of a restart: said, and the check goes on from memory. */
static void save(struct fit *f, uint64_t gen)
{
        char why[256], *text = NULL;
        uint64_t now;
        int r;

        if (f->dir_fd < 0)
                return;
        uv_mutex_lock(&f->store_lock);
        if (f->saved_gen >= gen)
                goto out;
        uv_mutex_lock(&f->lock);
        now = f->gen;
        text = fitstore_encode(f->recs, f->n_recs, f->boot_id);
        uv_mutex_unlock(&f->lock);
        r = text ? storefile_write(f->dir_fd, FITSTORE_FILE, text, strlen(text), why, sizeof(why)) : -ENOMEM;
        if (r == 0)
                f->saved_gen = now;
        else
                log_warning("Cannot write %s: %s: the GPU memory of checkpointed processes will not be known "
                            "after a restart", f->store, text ? why : "out of memory");
out:
        uv_mutex_unlock(&f->store_lock);
        cJSON_free(text);
}

int fit_measure(struct fit *f, pid_t pid, struct fit_record *ret)
{
        struct gpumem_use *use;
        size_t n;

        memset(ret, 0, sizeof(*ret));
        ret->pid = pid;
        if (!fit_active(f) || gpumem_usage(f->gpumem, &use, &n) < 0)
                return -ENODEV;
        for (size_t i = 0; i < n; i++)
                if (use[i].pid == pid && use[i].bytes != GPUMEM_NO_BYTES && ret->n < FIT_MAX_GPUS_PER_PROC) {
                        snprintf(ret->use[ret->n].uuid, GPUMEM_UUID_MAX, "%s", f->gpumem->uuid[use[i].gpu]);
                        ret->use[ret->n++].bytes = use[i].bytes;
                }
        free(use);
        return 0;
}

/* Drops the records of processes that have gone, reading /proc without
 * the lock (the loop thread takes it too). */
static void prune(struct fit *f)
{
        struct fit_record *copy = NULL;
        size_t n;

        uv_mutex_lock(&f->lock);
        n = f->n_recs;
        if (n && (copy = malloc(n * sizeof(*copy))))
                memcpy(copy, f->recs, n * sizeof(*copy));
        uv_mutex_unlock(&f->lock);
        if (!copy)
                return;
        for (size_t i = 0; i < n; i++) {
                uint64_t st;
                if (target_read_stat(copy[i].pid, &st, NULL) == 0 && st == copy[i].start_time)
                        continue;
                uv_mutex_lock(&f->lock);
                drop(f, copy[i].pid, copy[i].start_time);
                uv_mutex_unlock(&f->lock);
        }
        free(copy);
}

/* The oldest record of uid.  Under f->lock. */
static struct fit_record *oldest_of(struct fit *f, uid_t uid)
{
        for (size_t i = 0; i < f->n_recs; i++)
                if (f->recs[i].uid == uid)
                        return &f->recs[i];
        return NULL;
}

/* Room for a new record of uid, made by dropping one if the shares say
 * so (fit.h): uid's own oldest when it holds its share, else, when the
 * table is full, the oldest of the owner holding the most, if it holds
 * more than uid would.  false: the new record is not to be kept.  Under
 * f->lock. */
static bool make_room(struct fit *f, uid_t uid)
{
        const struct share_uid *top = NULL;
        struct fit_record *victim = NULL;
        unsigned mine;

        /* More than its share is possible after a restart with a lower
         * max_gpu_records_per_uid. */
        while (share_held(&f->owners, uid) >= f->owners.per_uid && (victim = oldest_of(f, uid)))
                drop(f, victim->pid, victim->start_time);
        mine = share_held(&f->owners, uid);
        victim = NULL;
        if (f->n_recs >= f->max_records) {
                for (size_t i = 0; i < f->owners.n_uids; i++)
                        if (!top || f->owners.uids[i].count > top->count)
                                top = &f->owners.uids[i];
                if (top && top->count > mine + 1)
                        victim = oldest_of(f, top->uid);
        }
        if (victim)
                drop(f, victim->pid, victim->start_time);
        return f->n_recs < f->max_records && share_held(&f->owners, uid) < f->owners.per_uid;
}

/* A free slot at the end of the records, NULL when out of memory.  Under
 * f->lock. */
static struct fit_record *append(struct fit *f)
{
        if (f->n_recs == f->cap_recs) {
                size_t cap = f->cap_recs ? f->cap_recs * 2 : 16;
                cap = cap < f->max_records ? cap : f->max_records;
                void *p = realloc(f->recs, cap * sizeof(*f->recs));
                if (!p)
                        return NULL;
                f->recs = p;
                f->cap_recs = cap;
        }
        return &f->recs[f->n_recs++];
}

void fit_keep(struct fit *f, const struct fit_record *r)
{
        struct fit_record *e;
        uint64_t gen;
        bool full, kept;

        uv_mutex_lock(&f->lock);
        full = f->n_recs >= f->max_records || share_held(&f->owners, r->uid) >= f->owners.per_uid;
        uv_mutex_unlock(&f->lock);
        if (full)
                prune(f);
        uv_mutex_lock(&f->lock);
        /* A pid recorded before is another (or the same) process now: its
         * old record goes, and the new one is placed as any other. */
        e = find(f, r->pid);
        if (e)
                drop(f, e->pid, e->start_time);
        kept = make_room(f, r->uid);
        if (kept && (e = append(f))) {
                *e = *r;
                share_take_anyway(&f->owners, r->uid, false);
                f->gen++;
        }
        gen = f->gen; /* records dropped above are a change too */
        uv_mutex_unlock(&f->lock);
        if (!kept)
                log_warning("The GPU memory of pid %d (uid %u) is not recorded: max_gpu_records (%u) are held by "
                            "owners holding no more than its own; its restore will be checked against an "
                            "estimate from its host memory",
                            (int)r->pid, (unsigned)r->uid, f->max_records);
        save(f, gen);
}

void fit_forget(struct fit *f, pid_t pid, uint64_t start_time)
{
        uv_mutex_lock(&f->lock);
        drop(f, pid, start_time);
        uv_mutex_unlock(&f->lock);
}

/* ---- the check ---------------------------------------------------------------- */

/* The index of the GPU named uuid, -1 when NVML knows none. */
static int gpu_index(const struct gpumem *g, const char *uuid)
{
        for (unsigned i = 0; i < g->n_gpus; i++)
                if (strcasecmp(g->uuid[i], uuid) == 0)
                        return (int)i;
        return -1;
}

/* Where a process checkpointed on GPU uuid is restored: the GPU the
 * mapping names for it, else the same one.  -1 when unknown here. */
static int target_gpu(const struct gpumem *g, const char *uuid, const CUcheckpointGpuPair *pairs, unsigned n_pairs)
{
        char from[UUID_STRING_MAX], to[UUID_STRING_MAX];

        for (unsigned i = 0; i < n_pairs; i++) {
                uuid_format(&pairs[i].oldUuid, from);
                if (strcasecmp(from, uuid) == 0) {
                        uuid_format(&pairs[i].newUuid, to);
                        return gpu_index(g, to);
                }
        }
        return gpu_index(g, uuid);
}

/* What the process needs on each GPU (need[], bytes), by its record or its
 * estimate. */
static void add_need(struct fit *f, const struct fit_proc *p, const CUcheckpointGpuPair *pairs, unsigned n_pairs,
                     uint64_t *need)
{
        const struct gpumem *g = f->gpumem;
        struct fit_record rec = { 0 };
        bool have;

        uv_mutex_lock(&f->lock);
        const struct fit_record *e = find(f, p->pid);
        have = e && e->start_time == p->start_time;
        if (have)
                rec = *e;
        uv_mutex_unlock(&f->lock);
        if (have) {
                for (unsigned i = 0; i < rec.n; i++) {
                        int d = target_gpu(g, rec.use[i].uuid, pairs, n_pairs);
                        if (d >= 0)
                                need[d] += rec.use[i].bytes + f->margin;
                }
                return;
        }
        if (p->rss == 0)
                return;
        /* The estimate goes whole onto each GPU the restore goes to: how a
         * process shares its memory among its GPUs is not known. */
        for (unsigned i = 0; i < n_pairs; i++) {
                char to[UUID_STRING_MAX];
                uuid_format(&pairs[i].newUuid, to);
                int d = gpu_index(g, to);
                if (d >= 0)
                        need[d] += p->rss + f->margin;
        }
        /* Without a mapping it comes back to the GPUs it used, which are
         * not known here: it must fit on each. */
        for (unsigned d = 0; n_pairs == 0 && d < g->n_gpus; d++)
                need[d] += p->rss + f->margin;
}

/* Whether pid holds GPU memory now (NVML lists it). */
static bool holds_memory(const struct gpumem_use *use, size_t n, pid_t pid)
{
        for (size_t i = 0; i < n; i++)
                if (use[i].pid == pid)
                        return true;
        return false;
}

static uint64_t held(const struct fit *f, unsigned gpu)
{
        uint64_t sum = 0;

        for (size_t i = 0; i < f->n_holds; i++)
                if (f->holds[i].gpu == gpu)
                        sum += f->holds[i].bytes;
        return sum;
}

/* Each process's share (per[i * n_gpus + d]) held: -ENOMEM when it cannot
 * be (nothing held then).  Under f->lock. */
static int hold(struct fit *f, const struct fit_proc *procs, size_t n, const uint64_t *per)
{
        unsigned n_gpus = f->gpumem->n_gpus;
        size_t want = f->n_holds;

        for (size_t i = 0; i < n * n_gpus; i++)
                want += per[i] != 0;
        if (want > f->cap_holds) {
                void *p = realloc(f->holds, want * sizeof(*f->holds));
                if (!p)
                        return -ENOMEM;
                f->holds = p;
                f->cap_holds = want;
        }
        for (size_t i = 0; i < n; i++)
                for (unsigned d = 0; d < n_gpus; d++)
                        if (per[i * n_gpus + d])
                                f->holds[f->n_holds++] = (struct fit_hold){ procs[i].pid, procs[i].start_time, d,
                                                                            per[i * n_gpus + d] };
        return 0;
}

/* Whether need fits beside the holds: 0, or -ENOSPC with *ret.  Under
 * f->lock: two restores checked at once each see the other's hold. */
static int compare(struct fit *f, const uint64_t *need, const uint64_t *free_now, struct fit_refusal *ret)
{
        for (unsigned d = 0; d < f->gpumem->n_gpus; d++) {
                uint64_t h = held(f, d), avail = free_now[d] > h ? free_now[d] - h : 0;
                if (need[d] > avail) {
                        snprintf(ret->gpu, sizeof(ret->gpu), "%s", f->gpumem->uuid[d]);
                        ret->needed = need[d];
                        ret->free = avail;
                        return -ENOSPC;
                }
        }
        return 0;
}

int fit_reserve(struct fit *f, const struct fit_proc *procs, size_t n, const CUcheckpointGpuPair *pairs,
                unsigned n_pairs, struct fit_refusal *ret)
{
        const struct gpumem *g = f->gpumem;
        uint64_t need[GPUMEM_MAX_GPUS] = { 0 }, free_now[GPUMEM_MAX_GPUS] = { 0 }, *per;
        struct gpumem_use *use = NULL;
        size_t n_use = 0;
        int r;

        if (!fit_active(f) || gpumem_usage(g, &use, &n_use) < 0)
                return -ENODEV;
        per = calloc(n * g->n_gpus + 1, sizeof(*per));
        if (!per) {
                free(use);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
                if (!holds_memory(use, n_use, procs[i].pid))
                        add_need(f, &procs[i], pairs, n_pairs, &per[i * g->n_gpus]);
        free(use);
        for (unsigned d = 0; d < g->n_gpus; d++) {
                uint64_t total;
                for (size_t i = 0; i < n; i++)
                        need[d] += per[i * g->n_gpus + d];
                if (need[d] && gpumem_free(g, d, &free_now[d], &total) < 0) {
                        /* This GPU cannot say: the driver will. */
                        need[d] = 0;
                        for (size_t i = 0; i < n; i++)
                                per[i * g->n_gpus + d] = 0;
                }
        }
        uv_mutex_lock(&f->lock);
        r = compare(f, need, free_now, ret);
        if (r == 0)
                r = hold(f, procs, n, per);
        uv_mutex_unlock(&f->lock);
        free(per);
        return r;
}

void fit_release(struct fit *f, pid_t pid, uint64_t start_time)
{
        size_t k = 0;

        uv_mutex_lock(&f->lock);
        for (size_t i = 0; i < f->n_holds; i++)
                if (f->holds[i].pid != pid || f->holds[i].start_time != start_time)
                        f->holds[k++] = f->holds[i];
        f->n_holds = k;
        uv_mutex_unlock(&f->lock);
}
