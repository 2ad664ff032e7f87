/* leasegrant.c: granting a lease (lease_grant(), lease.h): the lease in
 * the table, taking its members from older leases, and the "lease" of the
 * grant's reply. */
#include "jobs/lease.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "auth/access.h"
#include "base/log.h"
#include "jobs/leaseevent.h"
#include "jobs/leasestore.h"
#include "jobs/watch.h"

/* "lease": {"id", "lease_ms"?, "on_close", "secret"?} in reply's parameters. */
static void reply_grant(const struct lease *l, cJSON *reply)
{
        cJSON *p = reply ? cJSON_GetObjectItemCaseSensitive(reply, "parameters") : NULL;
        cJSON *o = p ? cJSON_AddObjectToObject(p, "lease") : NULL;
        char hex[2 * LEASE_SECRET_BYTES + 1];

        if (!o)
                return;
        cJSON_AddNumberToObject(o, "id", (double)l->id);
        if (l->ms)
                cJSON_AddNumberToObject(o, "lease_ms", l->ms);
        cJSON_AddBoolToObject(o, "on_close", l->on_close);
        if (l->has_secret) {
                leasestore_hex(l->secret, sizeof(l->secret), hex);
                cJSON_AddStringToObject(o, "secret", hex);
        }
}

/* A new lease of c's caller on members, in the table (ends members'
 * older leases), of id (0: a new one); NULL when out of memory. */
static struct lease *add_lease(struct lease_table *t, struct conn *c, enum proto_method m,
                               const struct proto_lease *want, const struct lease_member *members, size_t n,
                               uint64_t id)
{
        struct lease *l = calloc(1, sizeof(*l));

        if (l)
                l->m = calloc(n ? n : 1, sizeof(*l->m));
        if (!l || !l->m) {
                free(l);
                return NULL;
        }
        /* A process belongs to one lease: the newest. */
        for (size_t i = 0; i < n; i++) {
                size_t k;
                struct lease *old = lease_find_member(t, members[i].pid, &k);
                if (old && !old->undoing)
                        lease_drop_member(t, old, k, METRICS_LEASES_SUPERSEDED);
                else if (old)
                        /* Queued first, that undo will run after this call
                         * and bring the process back, ending this lease. */
                        log_warning("Process %d: lease %" PRIu64 " is being undone; the new %s's lease ends when "
                                    "that undo brings it back to running",
                                    (int)members[i].pid, old->id, proto_method_name(m));
        }
        memcpy(l->m, members, n * sizeof(*l->m));
        l->n = n;
        l->table = t;
        l->id = id ? id : t->next_id++;
        l->uid = c->caller.uid;
        l->privileged = access_privileged(t->cfg, &c->caller);
        l->caller_pid = c->caller.pid;
        /* Its call was counted since it came (lease_admit), and is given
         * back after: the lease is counted whatever the limits, since
         * nothing may stay paused unguarded. */
        share_take_anyway(&t->share, l->uid, l->privileged);
        l->method = m;
        l->on_close = want->on_close;
        l->ms = want->ms;
        l->expires = want->ms ? uv_now(t->loop) + want->ms : 0;
        l->deadline = want->ms ? leasestore_boottime_ms() + want->ms : 0;
        /* The holder's proof when it claims the lease after a restart. */
        l->has_secret = l->on_close && getrandom(l->secret, sizeof(l->secret), 0) == (ssize_t)sizeof(l->secret);
        if (l->on_close && !l->has_secret)
                log_warning("Lease %" PRIu64 ": no random secret (%s): it cannot be claimed after a restart", l->id,
                            strerror(errno));
        lease_link(t, l);
        if (l->on_close && !life_stopping(t->life))
                lease_hold_by(l, c);
        else if (l->on_close)
                l->unclaimed = true; /* its connection closes with the daemon */
        return l;
}

void lease_grant(struct lease_table *t, struct conn *c, enum proto_method m, const struct proto_lease *want,
                 const struct lease_member *members, size_t n, cJSON *reply)
{
        struct lease *p = want->pending ? lease_find_pending(t, want->pending) : NULL, *l;
        char detail[96];

        /* The pending lease becomes this one, under its id: every write
         * of the store holds one or the other (the pending one leaves the
         * table after the new one came, and the write below has both
         * changes). */
        l = add_lease(t, c, m, want, members, n, p ? p->id : 0);
        if (p) {
                lease_unlist(t, p);
                free(p->m);
                free(p);
        }

        if (!l) {
                log_error("%s by uid %u: out of memory for its lease; its processes stay as they are",
                          proto_method_name(m), (unsigned)c->caller.uid);
                return;
        }
        metrics_count(t->metrics, METRICS_LEASES_GRANTED);
        snprintf(detail, sizeof(detail), "lease %" PRIu64 " on %zu processes%s, %u ms", l->id, n,
                 l->on_close ? " until the connection closes" : "", (unsigned)l->ms);
        lease_audit(l, "granted", detail);
        for (size_t i = 0; i < n; i++)
                lease_member_event(t->watch, l, &l->m[i], WATCH_LEASE_TAKEN, NULL, NULL);
        reply_grant(l, reply);
        if (n == 0) {
                lease_end(t, l, METRICS_LEASES_FINISHED); /* nothing to guard */
        } else if (l->on_close && c->closing) {
                lease_undo(t, l, METRICS_LEASES_CLOSED); /* the holder is already gone */
        } else {
                lease_arm(t);
                lease_persist(t); /* before the reply goes out */
        }
}
