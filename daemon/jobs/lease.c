/* lease.c: the lease table (lease.h): its members, ending and undoing
 * leases, the timer, the holders' closing and the daemon's stop.  A grant
 * is leasegrant.c's, the reading back at start leaserestore.c's. */
#include "jobs/lease.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static void park(struct lease_table *t, struct lease *l);
static void holder_closing_cb(struct conn_hook *h, struct conn *c);

/* c (NULL: none) becomes the holder of on-close lease l: pinned while it
 * holds it (never idle), and its closing undoes it. */
void lease_hold_by(struct lease *l, struct conn *c)
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
        lease_unlist(t, l);
        t->n--;
        t->n_members -= (unsigned)l->n;
        share_give(&t->share, l->uid, l->privileged);
        lease_hold_by(l, NULL);
        free(l->m);
        free(l);
        lease_arm(t);
        lease_persist(t);
}

/* Ends l without an undo. */
void lease_end(struct lease_table *t, struct lease *l, enum metrics_counter why)
{
        char detail[96];

        snprintf(detail, sizeof(detail), "lease %" PRIu64 " %s", l->id, lease_reason_name(why));
        lease_audit(l, lease_reason_name(why), detail);
        metrics_count(t->metrics, why);
        unlink_lease(t, l);
}

/* Drops member i of l; the lease ends (for why) with its last member. */
void lease_drop_member(struct lease_table *t, struct lease *l, size_t i, enum metrics_counter why)
{
        lease_member_event(t->watch, l, &l->m[i], WATCH_LEASE_ENDED, lease_reason_name(why), NULL);
        l->m[i] = l->m[--l->n];
        t->n_members--;
        if (l->n == 0)
                lease_end(t, l, why);
        else
                lease_persist(t);
}

/* The lease granted that holds pid (pending ones are their calls'). */
struct lease *lease_find_member(struct lease_table *t, pid_t pid, size_t *ret_i)
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

/* The group that undoes l's call. */
static enum proto_method lease_undo_method(const struct lease *l)
{
        return l->method == PROTO_RESTORE_GROUP ? PROTO_CHECKPOINT_GROUP : PROTO_RESUME_GROUP;
}

/* What l's undo leaves its processes, as the log says it. */
static const char *lease_undo_state(const struct lease *l)
{
        return l->method == PROTO_RESTORE_GROUP ? "checkpointed" : "running";
}

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
                snprintf(detail, sizeof(detail), "lease %" PRIu64 " %s: %zu processes back to %s", l->id,
                         why, l->n, lease_undo_state(l));
                log_info("Lease %" PRIu64 " of uid %u (%s): undone, %zu processes %s again", l->id,
                         (unsigned)l->uid, why, l->n, lease_undo_state(l));
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

/* Brings l's processes back to where its call found them: running
 * (ResumeGroup) for a lock or suspend, checkpointed (CheckpointGroup) for
 * a RestoreGroup, by a group of the daemon's own on exactly the processes
 * leased (pinned by start time). */
void lease_undo(struct lease_table *t, struct lease *l, enum metrics_counter why)
{
        struct proto_group_request req = { .kind = PROTO_SELECT_PIDS };

        if (l->undoing)
                return;
        l->undoing = true;
        l->unclaimed = false;
        l->why = why;
        lease_hold_by(l, NULL);
        if (life_stopping(t->life)) {
                park(t, l);
                lease_arm(t);
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
        if (!req.pids || group_start_internal(t->groups, lease_undo_method(l), &t->self, &req, undo_ended_cb, l) < 0) {
                proto_group_request_free(&req);
                undo_ended_cb(l, NULL);
        }
        lease_arm(t);
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
        lease_arm(t);
}

/* The timer, for the nearest deadline or end of a claim's grace; never
 * once the daemon stops (stop_cb): what it would undo then is kept for
 * the next start, which counts the deadlines and the grace itself. */
void lease_arm(struct lease_table *t)
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

void lease_op_finished(struct lease_table *t, pid_t pid, uint64_t start_time, enum proto_method m,
                       const struct ops_result *r)
{
        size_t i;
        struct lease *l;

        if (t->n == 0 || proto_method_read_only(m))
                return;
        l = lease_find_member(t, pid, &i);
        if (!l || l->undoing)
                return;
        if (start_time && l->m[i].start_time != start_time) {
                lease_drop_member(t, l, i, METRICS_LEASES_EXITED); /* the pid names another process now */
                return;
        }
        if (r->error == OPS_PROCESS_GONE || r->error == OPS_NO_SUCH_PROCESS)
                lease_drop_member(t, l, i, METRICS_LEASES_EXITED);
        else if (r->state == CU_PROCESS_STATE_RUNNING)
                lease_drop_member(t, l, i, METRICS_LEASES_FINISHED);
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
                        lease_hold_by(l, NULL); /* as at the stop (stop_cb): the next start waits for a claim */
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
                        lease_hold_by(l, NULL);
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

/* ---- changes made by calls (leasecall.c) ---------------------------------- */

void lease_release(struct lease_table *t, struct lease *l)
{
        for (size_t i = 0; i < l->n; i++)
                lease_member_event(t->watch, l, &l->m[i], WATCH_LEASE_ENDED, lease_reason_name(METRICS_LEASES_RELEASED), NULL);
        lease_end(t, l, METRICS_LEASES_RELEASED);
}

void lease_renew(struct lease_table *t, struct lease *l, uint32_t ms)
{
        l->ms = ms;
        l->expires = uv_now(t->loop) + ms;
        l->deadline = leasestore_boottime_ms() + ms;
        lease_arm(t);
        lease_persist(t);
}

void lease_claim(struct lease_table *t, struct lease *l, struct conn *c)
{
        lease_hold_by(l, c);
        l->unclaimed = false;
        lease_arm(t);
}

