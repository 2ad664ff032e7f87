/* leaserestore.c: the lease table read back from the store at start
 * (lease_restore(), lease.h). */
#include "jobs/lease.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "base/log.h"
#include "jobs/leaseevent.h"
#include "jobs/leasestore.h"

/* l, read from the store, joins the table as what runs now allows. */
static void restore_one(struct lease_table *t, struct lease *l, bool same_boot, uint64_t now_boot)
{
        char detail[160];

        l->table = t;
        lease_link(t, l);
        share_take_anyway(&t->share, l->uid, l->privileged);
        for (size_t i = l->n; i-- > 0;) {
                pid_t pid = l->m[i].pid;
                uint64_t st = same_boot ? leasestore_start_time(pid) : 0;
                bool last = l->n == 1;

                if (st == l->m[i].start_time && lease_taker_may_act(t, l, &l->m[i]))
                        continue;
                if (st == l->m[i].start_time) {
                        /* A store written before the daemon judged its call,
                         * or edited: root does not act for its taker. */
                        log_warning("Lease %" PRIu64 " of uid %u: process %d (uids %u/%u/%u) is not one its taker "
                                    "may act on; it leaves the lease, as it is",
                                    l->id, (unsigned)l->uid, (int)pid, (unsigned)l->m[i].owner.ruid,
                                    (unsigned)l->m[i].owner.euid, (unsigned)l->m[i].owner.suid);
                        lease_drop_member(t, l, i, METRICS_LEASES_NOT_HONOURED);
                } else {
                        log_notice("Lease %" PRIu64 " of uid %u: process %d %s since the lease store was written; "
                                   "it leaves the lease",
                                   l->id, (unsigned)l->uid, (int)pid, st ? "is another process" : "exited");
                        lease_drop_member(t, l, i, METRICS_LEASES_EXITED);
                }
                if (last)
                        return; /* the lease ended with it */
        }
        snprintf(detail, sizeof(detail), "lease %" PRIu64 " on %zu processes read back at start", l->id, l->n);
        lease_audit(l, "restored", detail);
        if (l->pending) {
                /* Killed during its call: nobody learnt of it, and what the
                 * call did is undone. */
                log_notice("Lease %" PRIu64 " of uid %u pid %d: its %s was under way when the daemon ended, never "
                           "answered; undoing it",
                           l->id, (unsigned)l->uid, (int)l->caller_pid, proto_method_name(l->method));
                l->pending = false;
                lease_undo(t, l, METRICS_LEASES_CLOSED);
        } else if (l->undoing) {
                /* Its undo had begun, or was left by a daemon that stopped. */
                l->undoing = false;
                lease_undo(t, l, l->why);
        } else if (l->deadline && l->deadline <= now_boot) {
                log_notice("Lease %" PRIu64 " of uid %u: it expired while the daemon was not running", l->id,
                           (unsigned)l->uid);
                lease_undo(t, l, METRICS_LEASES_EXPIRED);
        } else {
                l->expires = l->deadline ? uv_now(t->loop) + (l->deadline - now_boot) : 0;
                l->unclaimed = l->on_close;
                l->claim_by = uv_now(t->loop) + t->cfg->lease_claim_grace_ms;
                log_info("Lease %" PRIu64 " of uid %u pid %d on %zu processes read back: %s%s", l->id,
                         (unsigned)l->uid, (int)l->caller_pid, l->n,
                         l->on_close ? "waiting for its holder to claim it" : "held",
                         l->deadline ? " until its deadline" : "");
        }
}

void lease_restore(struct lease_table *t)
{
        struct lease *head = NULL;
        uint64_t next_id = 1, now_boot = leasestore_boottime_ms();
        bool same_boot = false;
        unsigned n = 0;
        char why[256];
        int r;

        if (t->store_fd < 0)
                return;
        r = leasestore_load(t->store_fd, &head, &next_id, &same_boot, why, sizeof(why));
        t->loaded = true; /* a refused store is replaced by the next write */
        if (r == -ENOENT) {
                log_debug("No lease store at %s/" LEASESTORE_FILE ": no leases to read back", t->store_dir);
                return;
        }
        if (r < 0) {
                log_error("Refusing the lease store %s/" LEASESTORE_FILE ": %s; none of its leases is honoured (it "
                          "is replaced at the next change of leases)",
                          t->store_dir, why);
                return;
        }
        if (!same_boot && head)
                log_notice("The lease store %s/" LEASESTORE_FILE " was written before the machine last booted: its "
                           "processes are gone",
                           t->store_dir);
        if (next_id > t->next_id)
                t->next_id = next_id;
        t->loaded = false; /* one write, below, for all the changes */
        while (head) {
                struct lease *l = head;
                head = l->next;
                l->prev = l->next = NULL;
                restore_one(t, l, same_boot, now_boot);
                n++;
        }
        t->loaded = true;
        log_info("Lease store %s/" LEASESTORE_FILE ": %u leases read back, %u held; the next lease id is %" PRIu64,
                 t->store_dir, n, t->n, t->next_id);
        lease_persist(t);
        lease_arm(t);
}
