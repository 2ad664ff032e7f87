/* grouplease.c: a group's lease through the hooks of the lease layer
 * (grouplease.h). */
#include "jobs/grouplease.h"

#include <stdlib.h>

#include "base/log.h"

void grouplease_unadmit(const struct group_lease_hooks *h, struct jobs_call *jc)
{
        if (jc->req.lease.admitted)
                h->unadmit_cb(h->ctx, jc->caller, &jc->req.lease);
        jc->req.lease.admitted = false;
}

bool grouplease_admit(const struct group_lease_hooks *h, struct jobs_call *jc)
{
        struct share_refusal why = { 0 };

        if (jc->req.lease.wanted) {
                if (!h->admit_cb(h->ctx, jc->caller, &why))
                        goto full;
                jc->req.lease.admitted = true;
        }
        if (jobs_call_take_slot(jc, &why) == 0)
                return true;
        grouplease_unadmit(h, jc);
full:
        jobs_call_refuse(jc, jobs_call_queue_full(jc, &why));
        return false;
}

/* The members acting now, as a lease names them (malloc'ed); NULL when
 * out of memory. */
static struct lease_member *member_ids(const struct members *ms, size_t *ret_n)
{
        struct lease_member *ids = calloc(ms->n ? ms->n : 1, sizeof(*ids));

        *ret_n = 0;
        for (size_t i = 0; ids && i < ms->n; i++)
                if (members_active(&ms->m[i]))
                        ids[(*ret_n)++] = (struct lease_member){ .pid = ms->m[i].s.pid,
                                                                    .vpid = ms->m[i].s.vpid,
                                                                    .start_time = ms->m[i].s.start_time,
                                                                    .owner = ms->m[i].s.owner };
        return ids;
}

static void grant(const struct group_lease_hooks *h, const struct jobs_call *call, const struct members *ms,
                  cJSON *msg)
{
        size_t n;
        struct lease_member *ids = member_ids(ms, &n);

        if (!ids) {
                /* No lease can be kept: nothing may stay paused unguarded. */
                log_error("%s: out of memory for the lease; its members stay as they are",
                          proto_method_name(call->method));
                return;
        }
        h->grant_cb(h->ctx, call->conn, call->method, &call->req.lease, ids, n, msg);
        free(ids);
}

/* Whether the lease layer has changes still to write: then done(arg) runs
 * once they are on disk, and true comes back. */
static bool when_written(const struct group_lease_hooks *h, void (*done)(void *arg), void *arg)
{
        return h->when_written_cb && h->when_written_cb(h->ctx, done, arg);
}

bool grouplease_finish(const struct group_lease_hooks *h, const struct jobs_call *call, const struct members *ms,
                       bool succeeded, cJSON *msg, void (*done)(void *arg), void *arg)
{
        if (succeeded && call->conn && call->req.lease.wanted)
                grant(h, call, ms, msg);
        return when_written(h, done, arg);
}

bool grouplease_intend(const struct group_lease_hooks *h, struct jobs_call *call, const struct members *ms,
                       void (*done)(void *arg), void *arg)
{
        size_t n;
        struct lease_member *ids;

        if (call->req.lease.admitted) {
                ids = member_ids(ms, &n);
                if (ids)
                        h->intend_cb(h->ctx, call->caller, call->method, &call->req.lease, ids, n);
                free(ids);
        }
        return when_written(h, done, arg);
}

