/* lease.c: granting, ending, undoing and reading back leases (lease.h). */
#include "jobs/lease.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "auth/access.h"
#include "net/conn.h"
#include "cudackpt/protocol.h"
#include "jobs/group.h"
#include "jobs/leaseevent.h"
#include "jobs/leasestore.h"
#include "base/log.h"
#include "base/metrics.h"
#include "jobs/watch.h"

/* ---- the table ------------------------------------------------------------- */

static void arm(struct lease_table *t);
static void lease_undo(struct lease_table *t, struct lease *l, enum metrics_counter why);
static void park(struct lease_table *t, struct lease *l);
static void holder_closing_cb(struct conn_hook *h, struct conn *c);

/* c (NULL: none) becomes the holder of on-close lease l: pinned while it
 * holds it (never idle), and its closing undoes it. */
static void hold_by(struct lease *l, struct conn *c)
{
        if (l->conn) {
                conn_hook_remove(l->conn, &l->closing);
                conn_unpin(l->conn);
        }
        l->conn = c;
        if (c) {
                l->closing.closing_cb = holder_closing_cb;
                conn_hook_add(c, &l->closing);
                conn_pin(c);
        }
}

static void unlink_lease(struct lease_table *t, struct lease *l)
{
        if (l->prev)
                l->prev->next = l->next;
        else
                t->head = l->next;
        if (l->next)
                l->next->prev = l->prev;
        t->n--;
        t->n_members -= (unsigned)l->n;
        share_give(&t->share, l->uid, l->privileged);
        hold_by(l, NULL);
        free(l->m);
        free(l);
        arm(t);
        lease_persist(t);
}

/* Ends l without an undo. */
static void end_lease(struct lease_table *t, struct lease *l, enum metrics_counter why)
{
        char detail[96];

        snprintf(detail, sizeof(detail), "lease %" PRIu64 " %s", l->id, lease_reason_name(why));
        lease_audit(l, lease_reason_name(why), detail);
        metrics_count(t->metrics, why);
        unlink_lease(t, l);
}

/* Drops member i of l; the lease ends (for why) with its last member. */
static void drop_member(struct lease_table *t, struct lease *l, size_t i, enum metrics_counter why)
{
        lease_member_event(t->watch, l, &l->m[i], WATCH_LEASE_ENDED, lease_reason_name(why), NULL);
        l->m[i] = l->m[--l->n];
        t->n_members--;
        if (l->n == 0)
                end_lease(t, l, why);
        else
                lease_persist(t);
}

/* The lease granted that holds pid (pending ones are their calls'). */
static struct lease *find_member(struct lease_table *t, pid_t pid, size_t *ret_i)
{
        for (struct lease *l = t->head; l; l = l->next)
                for (size_t i = 0; !l->pending && i < l->n; i++)
                        if (l->m[i].pid == pid) {
                                *ret_i = i;
                                return l;
                        }
        return NULL;
}

/* ---- undo ------------------------------------------------------------------ */

static void undo_ended_cb(void *ctx, cJSON *msg)
{
        struct lease *l = ctx;
        struct lease_table *t = l->table;
        const cJSON *err = msg ? cJSON_GetObjectItemCaseSensitive(msg, "error") : NULL;
        bool ok = msg && !err;
        const char *why = lease_reason_name(l->why);
        char detail[160];

        /* A daemon that stops while an undo waits leaves it to the next
         * start: the stop's rule, not the undo's failure. */
        if (!ok && cJSON_IsString(err) && strcmp(err->valuestring, CUDACKPT_ERROR_SHUTTING_DOWN) == 0) {
                cJSON_Delete(msg);
                park(t, l);
                return;
        }
        metrics_count(t->metrics, l->why);
        if (ok) {
                snprintf(detail, sizeof(detail), "lease %" PRIu64 " %s: %zu processes back to running", l->id,
                         why, l->n);
                log_info("Lease %" PRIu64 " of uid %u (%s): undone, %zu processes running again", l->id,
                         (unsigned)l->uid, why, l->n);
        } else {
                const cJSON *p = msg ? cJSON_GetObjectItemCaseSensitive(msg, "parameters") : NULL;
                const cJSON *phase = p ? cJSON_GetObjectItemCaseSensitive(p, "phase") : NULL;
                const cJSON *e = p ? cJSON_GetObjectItemCaseSensitive(p, "error") : NULL;
                const cJSON *pid = p ? cJSON_GetObjectItemCaseSensitive(p, "pid") : NULL;
                snprintf(detail, sizeof(detail), "lease %" PRIu64 " %s: undo failed", l->id, why);
                log_error("Lease %" PRIu64 " of uid %u (%s): the undo failed%s%s%s%s, pid %d: %s; not retried, "
                          "its processes stay as they are",
                          l->id, (unsigned)l->uid, why, cJSON_IsString(phase) ? " in " : "",
                          cJSON_IsString(phase) ? phase->valuestring : "", cJSON_IsString(e) ? ": " : "",
                          cJSON_IsString(e) ? e->valuestring : "", cJSON_IsNumber(pid) ? pid->valueint : 0,
                          cJSON_IsString(err) ? err->valuestring : "no reply");
        }
        lease_audit(l, ok ? "undone" : "UndoFailed", detail);
        metrics_count(t->metrics, ok ? METRICS_UNDOS_OK : METRICS_UNDOS_FAILED);
        for (size_t i = 0; i < l->n; i++)
                lease_member_event(t->watch, l, &l->m[i], WATCH_LEASE_ENDED, why, ok ? "ok" : "failed");
        cJSON_Delete(msg);
        unlink_lease(t, l);
}

/* The daemon stops before l's undo ran: the store keeps it, and the next
 * start makes it. */
static void park(struct lease_table *t, struct lease *l)
{
        char detail[160];

        l->parked = true;
        log_notice("Lease %" PRIu64 " of uid %u pid %d (%s): the daemon is stopping before its undo was done; kept in "
                   "the lease store, the next start undoes it",
                   l->id, (unsigned)l->uid, (int)l->caller_pid, proto_method_name(l->method));
        snprintf(detail, sizeof(detail), "lease %" PRIu64 " %s: undo left to the next start", l->id,
                 lease_reason_name(l->why));
        lease_audit(l, "kept", detail);
        lease_persist(t);
}

/* Brings l's processes back to running: ResumeGroup of the daemon's own
 * on exactly the processes leased (pinned by start time). */
static void lease_undo(struct lease_table *t, struct lease *l, enum metrics_counter why)
{
        struct proto_group_request req = { .kind = PROTO_SELECT_PIDS };

        if (l->undoing)
                return;
        l->undoing = true;
        l->unclaimed = false;
        l->why = why;
        hold_by(l, NULL);
        if (life_stopping(t->life)) {
                park(t, l);
                arm(t);
                return;
        }
        log_notice("Lease %" PRIu64 " of uid %u pid %d on %zu processes %s: undoing its %s", l->id,
                   (unsigned)l->uid, (int)l->caller_pid, l->n,
                   why == METRICS_LEASES_EXPIRED ? "expired" : "lost its connection", proto_method_name(l->method));
        lease_persist(t); /* a restart before it ends makes it again */
        req.pids = calloc(l->n ? l->n : 1, sizeof(*req.pids));
        if (req.pids) {
                for (size_t i = 0; i < l->n; i++)
                        req.pids[i] = (struct proto_pid_ref){ .pid = l->m[i].pid, .has_start_time = true,
                                                              .start_time = l->m[i].start_time };
                req.n_pids = (unsigned)l->n;
        }
        if (!req.pids || group_start_internal(t->groups, PROTO_RESUME_GROUP, &t->self, &req, undo_ended_cb, l) < 0) {
                proto_group_request_free(&req);
                undo_ended_cb(l, NULL);
        }
        arm(t);
}

static void timer_cb(uv_timer_t *timer)
{
        struct lease_table *t = timer->data;
        uint64_t now = uv_now(t->loop);
        struct lease *l, *next;

        if (life_stopping(t->life))
                return; /* a stop is not an expiry nor a holder's leaving */
        for (l = t->head; l; l = next) {
                next = l->next;
                if (!l->undoing && l->expires && l->expires <= now)
                        lease_undo(t, l, METRICS_LEASES_EXPIRED);
                else if (!l->undoing && l->unclaimed && l->claim_by <= now) {
                        log_notice("Lease %" PRIu64 " of uid %u pid %d: its holder did not claim it within "
                                   "lease_claim_grace_ms (%u ms) of the start",
                                   l->id, (unsigned)l->uid, (int)l->caller_pid, (unsigned)t->cfg->lease_claim_grace_ms);
                        lease_undo(t, l, METRICS_LEASES_CLOSED);
                }
        }
        arm(t);
}

/* The timer, for the nearest deadline or end of a claim's grace; never
 * once the daemon stops (stop_cb): what it would undo then is kept for
 * the next start, which counts the deadlines and the grace itself. */
static void arm(struct lease_table *t)
{
        uint64_t first = 0, now = uv_now(t->loop);

        if (life_stopping(t->life)) {
                uv_timer_stop(&t->timer);
                return;
        }
        for (struct lease *l = t->head; l; l = l->next) {
                if (!l->undoing && l->expires && (!first || l->expires < first))
                        first = l->expires;
                if (!l->undoing && l->unclaimed && (!first || l->claim_by < first))
                        first = l->claim_by;
        }
        if (!first) {
                uv_timer_stop(&t->timer);
                return;
        }
        uv_timer_start(&t->timer, timer_cb, first > now ? first - now : 0, 0);
}

/* Puts l (its members counted) at the head of the table. */
void lease_link(struct lease_table *t, struct lease *l)
{
        l->prev = NULL;
        l->next = t->head;
        if (t->head)
                t->head->prev = l;
        t->head = l;
        t->n++;
        t->n_members += (unsigned)l->n;
}

/* ---- the API --------------------------------------------------------------- */

static void stop_cb(struct life_hook *h);

void lease_init(struct lease_table *t, const struct lease_deps *deps, const char *runtime_dir)
{
        static const char *const keys[] = { "max_leases", "max_leases_per_uid", "max_leases_reserved" };

        *t = (struct lease_table){ .loop = deps->loop, .cfg = deps->cfg, .metrics = deps->metrics, .life = deps->life,
                                   .groups = deps->groups, .watch = deps->watch, .stop_hook.stop_cb = stop_cb,
                                   .next_id = 1 };
        life_on_stop(t->life, &t->stop_hook);
        share_init(&t->share, keys, t->cfg->max_leases, t->cfg->max_leases_per_uid, t->cfg->max_leases_reserved);
        uv_timer_init(t->loop, &t->timer);
        t->timer.data = t;
        lease_flush_init(t);
        /* The undo's caller: root in the daemon's own pid namespace. */
        t->self = (struct policy_caller){ .uid = 0, .gid = 0, .pid = getpid(), .pidfd = -1 };
        lease_open_store(t, runtime_dir);
}

void lease_close(struct lease_table *t)
{
        if (!uv_is_closing((uv_handle_t *)&t->timer))
                uv_close((uv_handle_t *)&t->timer, NULL);
        /* What is left is in the store, for the next start. */
        lease_flush_close(t); /* the last write, and the store's directory closed */
        leasestore_free(t->head);
        t->head = NULL;
        share_free(&t->share);
        free(t->store_dir);
        t->store_dir = NULL;
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
                struct lease *old = find_member(t, members[i].pid, &k);
                if (old && !old->undoing)
                        drop_member(t, old, k, METRICS_LEASES_SUPERSEDED);
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
                hold_by(l, c);
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
                lease_unlink_pending(t, p);
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
        lease_reply_grant(l, reply);
        if (n == 0) {
                end_lease(t, l, METRICS_LEASES_FINISHED); /* nothing to guard */
        } else if (l->on_close && c->closing) {
                lease_undo(t, l, METRICS_LEASES_CLOSED); /* the holder is already gone */
        } else {
                arm(t);
                lease_persist(t); /* before the reply goes out */
        }
}

void lease_op_finished(struct lease_table *t, pid_t pid, uint64_t start_time, enum proto_method m,
                       const struct ops_result *r)
{
        size_t i;
        struct lease *l;

        if (t->n == 0 || proto_method_read_only(m))
                return;
        l = find_member(t, pid, &i);
        if (!l || l->undoing)
                return;
        if (start_time && l->m[i].start_time != start_time) {
                drop_member(t, l, i, METRICS_LEASES_EXITED); /* the pid names another process now */
                return;
        }
        if (r->error == OPS_PROCESS_GONE || r->error == OPS_NO_SUCH_PROCESS)
                drop_member(t, l, i, METRICS_LEASES_EXITED);
        else if (r->state == CU_PROCESS_STATE_RUNNING)
                drop_member(t, l, i, METRICS_LEASES_FINISHED);
}

/* A holder is closing: all its on-close leases are undone, at the first
 * one's hook, in the table's order (the others' hooks leave with them). */
static void holder_closing_cb(struct conn_hook *h, struct conn *c)
{
        struct lease *first = (struct lease *)((char *)h - offsetof(struct lease, closing));
        struct lease_table *t = first->table;
        struct lease *l, *next;

        for (l = t->head; l; l = next) {
                next = l->next;
                if (l->conn != c)
                        continue;
                if (!life_stopping(t->life)) {
                        lease_undo(t, l, METRICS_LEASES_CLOSED);
                } else {
                        hold_by(l, NULL); /* as at the stop (stop_cb): the next start waits for a claim */
                        l->unclaimed = true;
                }
        }
}

/* The daemon is stopping: the leases are kept in the store (their holders'
 * connections close), for the next start to honour. */
static void stop_cb(struct life_hook *h)
{
        struct lease_table *t = (struct lease_table *)((char *)h - offsetof(struct lease_table, stop_hook));
        bool kept = t->store_fd >= 0 && t->loaded;

        uv_timer_stop(&t->timer);
        for (struct lease *l = t->head; l; l = l->next) {
                /* The connections close with the daemon: the next start waits
                 * for the holder to claim its lease. */
                if (l->conn) {
                        hold_by(l, NULL);
                        l->unclaimed = true;
                }
                if (l->undoing || l->pending)
                        continue; /* a pending one's call ends first, in the drain */
                if (kept)
                        log_notice("Lease %" PRIu64 " of uid %u pid %d (%s) on %zu processes: the daemon is stopping; "
                                   "kept in the lease store for the next start",
                                   l->id, (unsigned)l->uid, (int)l->caller_pid, proto_method_name(l->method), l->n);
                else
                        for (size_t i = 0; i < l->n; i++)
                                log_warning("Lease %" PRIu64 " of uid %u pid %d (%s) not honoured: the daemon is "
                                            "stopping without a lease store; process %d stays as it is",
                                            l->id, (unsigned)l->uid, (int)l->caller_pid, proto_method_name(l->method),
                                            (int)l->m[i].pid);
        }
        lease_persist(t);
        if (!kept || t->store_failing)
                for (struct lease *l = t->head; l; l = l->next)
                        if (!l->pending)
                                metrics_count(t->metrics, METRICS_LEASES_NOT_HONOURED);
}

/* ---- changes made by calls (leasecall.c) -------------------------------------- */

void lease_release(struct lease_table *t, struct lease *l)
{
        for (size_t i = 0; i < l->n; i++)
                lease_member_event(t->watch, l, &l->m[i], WATCH_LEASE_ENDED, lease_reason_name(METRICS_LEASES_RELEASED), NULL);
        end_lease(t, l, METRICS_LEASES_RELEASED);
}

void lease_renew(struct lease_table *t, struct lease *l, uint32_t ms)
{
        l->ms = ms;
        l->expires = uv_now(t->loop) + ms;
        l->deadline = leasestore_boottime_ms() + ms;
        arm(t);
        lease_persist(t);
}

void lease_claim(struct lease_table *t, struct lease *l, struct conn *c)
{
        hold_by(l, c);
        l->unclaimed = false;
        arm(t);
}

/* ---- read back at start ------------------------------------------------------- */

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
                        drop_member(t, l, i, METRICS_LEASES_NOT_HONOURED);
                } else {
                        log_notice("Lease %" PRIu64 " of uid %u: process %d %s since the lease store was written; "
                                   "it leaves the lease",
                                   l->id, (unsigned)l->uid, (int)pid, st ? "is another process" : "exited");
                        drop_member(t, l, i, METRICS_LEASES_EXITED);
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
        arm(t);
}
