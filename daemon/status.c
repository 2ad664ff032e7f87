/* status.c: GetStatus's and GetMetrics's replies, from the counts the
 * daemon's parts keep (status.h). */
#include "status.h"

#include <stdbool.h>
#include <stdlib.h>

#include "jobs/jobs.h"
#include "jobs/lease.h"
#include "host/procindex.h"
#include "varlink/proto.h"
#include "run/sched.h"
#include "jobs/select.h"
#include "jobs/watch.h"

#ifndef CUDACKPT_VERSION
#define CUDACKPT_VERSION "0"
#endif

/* The driver the daemon loaded at its start (driver.h). */
static bool add_driver(cJSON *p, const struct status *s)
{
        const struct driver *d = s->drv;
        cJSON *o = cJSON_AddObjectToObject(p, "driver");

        if (!o || !cJSON_AddBoolToObject(o, "available", d->available) ||
            !cJSON_AddBoolToObject(o, "simulated", d->simulated) ||
            !cJSON_AddStringToObject(o, "path", s->cfg->driver_path ? s->cfg->driver_path : "") ||
            !cJSON_AddNumberToObject(o, "gpus", d->available ? d->n_devices : 0))
                return false;
        if (d->version > 0 && !cJSON_AddNumberToObject(o, "version", d->version))
                return false;
        if (!d->available && !cJSON_AddStringToObject(o, "reason", d->reason[0] ? d->reason : "not loaded"))
                return false;
        return true;
}

/* Why listings scan /proc rather than read the index, when they do for
 * want of one; NULL while it opens or when it is there. */
static const char *index_reason(const struct status *s, const struct procindex *ix)
{
        if (ix || *s->index_opening)
                return NULL;
        if (s->cfg->process_index_max == 0)
                return "process_index_max is 0";
        if (!s->source->driver_lib.known)
                return "the driver's file is not known";
        /* Written by the worker that opened it, read once it is done. */
        return s->index_why[0] ? s->index_why : "not opened";
}

/* How ListProcesses and Watch find the processes that may map the driver. */
static bool add_index(cJSON *p, const struct status *s)
{
        const struct procindex *ix = atomic_load(&s->source->index);
        bool lost = ix && atomic_load(&s->source->index_lost);
        const char *reason = index_reason(s, ix);
        cJSON *o = cJSON_AddObjectToObject(p, "process_index");

        if (!o || !cJSON_AddStringToObject(o, "source", ix && !lost ? procindex_hook(ix) : "proc") ||
            !cJSON_AddBoolToObject(o, "lost", lost) || !cJSON_AddBoolToObject(o, "opening", *s->index_opening))
                return false;
        return !reason || cJSON_AddStringToObject(o, "reason", reason);
}

/* Whether the leases held will outlive a restart (lease.h). */
static bool add_lease_store(cJSON *p, const struct status *s)
{
        const char *why = NULL;
        bool durable = lease_store_durable(s->leases, &why);
        cJSON *o = cJSON_AddObjectToObject(p, "lease_store");

        if (!o || !cJSON_AddBoolToObject(o, "durable", durable))
                return false;
        return durable || cJSON_AddStringToObject(o, "reason", why && why[0] ? why : "no lease store");
}

/* How much of each shared resource is in use, in all callers together. */
static bool add_counts(cJSON *p, const struct status *s)
{
        const struct {
                const char *key;
                unsigned n;
        } counts[] = {
                { "workers", s->cfg->workers },
                { "workers_busy", s->sched->n_running },
                { "queued", s->sched->n_ops - s->sched->n_running },
                { "groups", s->jobs->n },
                { "leases", s->leases->n },
                { "watchers", s->watch->n },
                { "connections", *s->n_conns },
        };

        for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
                if (!cJSON_AddNumberToObject(p, counts[i].key, counts[i].n))
                        return false;
        return true;
}

cJSON *status_reply(const struct status *s)
{
        cJSON *p = cJSON_CreateObject();

        if (!p || !cJSON_AddStringToObject(p, "version", CUDACKPT_VERSION) || !add_driver(p, s) ||
            !add_index(p, s) || !add_lease_store(p, s) || !add_counts(p, s)) {
                cJSON_Delete(p);
                return NULL;
        }
        return proto_reply_new(p);
}

cJSON *status_metrics_reply(const struct status *s)
{
        struct metrics_gauges g = {
                .connections = *s->n_conns,
                .running = s->sched->n_running,
                .queued = s->sched->n_ops - s->sched->n_running,
                .groups = s->jobs->n,
                .leases = s->leases->n,
                .leased_processes = s->leases->n_members,
                .lease_store_durable = lease_store_durable(s->leases, NULL),
                .watchers = s->watch->n,
                .workers = s->cfg->workers,
                .driver = s->drv->available,
                .simulated = s->drv->simulated,
                .driver_version = s->drv->version,
                .gpus = s->drv->n_devices,
                .scans_index = atomic_load(&s->source->scans_index),
                .scans_proc = atomic_load(&s->source->scans_proc),
        };
        struct procindex *ix = atomic_load(&s->source->index);
        char *text;
        cJSON *p;

        if (ix) {
                g.index_hook = procindex_hook(ix);
                g.process_index = !atomic_load(&s->source->index_lost);
                g.index_processes = procindex_last_size(ix);
        }
        text = metrics_text(s->metrics, &g);
        p = text ? cJSON_CreateObject() : NULL;
        if (p)
                cJSON_AddStringToObject(p, "text", text);
        free(text);
        return p ? proto_reply_new(p) : NULL;
}
