/* lease.c: granting, ending and undoing leases (lease.h). */
#include "lease.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "access.h"
#include "conn.h"
#include "cudackpt/protocol.h"
#include "group.h"
#include "log.h"
#include "metrics.h"
#include "server.h"
#include "watch.h"

struct lease {
        struct lease *prev, *next;
        struct server *srv;
        uint64_t id;
        struct conn *conn;              /* on_close: the holder; NULL once it closed */
        bool on_close;
        uint32_t ms;                    /* 0: no expiry */
        uint64_t expires;               /* uv_now() deadline; 0: none */
        uid_t uid;                      /* who took it */
        bool privileged;                /* ... with a reserve in the share (access.h) */
        pid_t caller_pid;
        enum proto_method method;
        struct lease_member *m;         /* owned */
        size_t n;
        bool undoing;                   /* its undo group runs */
        enum metrics_counter why;       /* what set the undo off; counted when it ends */
};

static struct lease_table *table_of(struct server *s)
{
        return &s->leases;
}

static const char *const reason_names[] = {
        [METRICS_LEASES_RELEASED] = "released",     [METRICS_LEASES_FINISHED] = "finished",
        [METRICS_LEASES_EXPIRED] = "expired",       [METRICS_LEASES_CLOSED] = "closed",
        [METRICS_LEASES_EXITED] = "exited",         [METRICS_LEASES_SUPERSEDED] = "superseded",
        [METRICS_LEASES_NOT_HONOURED] = "not-honoured",
};

static void audit(const struct lease *l, const char *result, const char *detail)
{
        struct log_audit a = {
                .caller_uid = (unsigned)l->uid,
                .caller_pid = (int)l->caller_pid,
                .target_pid = l->n > 0 ? (int)l->m[0].pid : 0,
                .method = "Lease",
                .result = result,
                .detail = detail,
        };
        log_audit(&a);
}

static void member_event(struct server *s, const struct lease *l, const struct lease_member *mb, const char *type,
                         const char *reason, const char *undo)
{
        struct watch_event e = WATCH_EVENT_INIT(type);

        e.pid = mb->pid;
        e.start_time = mb->start_time;
        e.owner = mb->owner;
        e.method = l->method;
        e.caller_uid = (long long)l->uid;
        e.lease = l->id;
        e.reason = reason;
        /* Alive only where an operation has just pinned it (taken, finished,
         * superseded): otherwise it may have exited and its pid be
         * another's, and a watcher of another pid namespace gets the event
         * only by the pid a scan noted while it lived. */
        e.gone = reason && strcmp(reason, reason_names[METRICS_LEASES_FINISHED]) != 0 &&
                 strcmp(reason, reason_names[METRICS_LEASES_SUPERSEDED]) != 0;
        e.undo = undo;
        watch_emit(s, &e);
}

/* ---- the table ------------------------------------------------------------- */

static void arm(struct server *s);

static void unlink_lease(struct server *s, struct lease *l)
{
        struct lease_table *t = table_of(s);

        if (l->prev)
                l->prev->next = l->next;
        else
                t->head = l->next;
        if (l->next)
                l->next->prev = l->prev;
        t->n--;
        t->n_members -= (unsigned)l->n;
        share_give(&t->share, l->uid, l->privileged);
        if (l->conn)
                l->conn->leases--;
        free(l->m);
        free(l);
        arm(s);
}

/* Ends l without an undo. */
static void end_lease(struct server *s, struct lease *l, enum metrics_counter why)
{
        char detail[96];

        snprintf(detail, sizeof(detail), "lease %" PRIu64 " %s", l->id, reason_names[why]);
        audit(l, reason_names[why], detail);
        metrics_count(&s->metrics, why);
        unlink_lease(s, l);
}

/* Drops member i of l; the lease ends (for why) with its last member. */
static void drop_member(struct server *s, struct lease *l, size_t i, enum metrics_counter why)
{
        member_event(s, l, &l->m[i], WATCH_LEASE_ENDED, reason_names[why], NULL);
        l->m[i] = l->m[--l->n];
        table_of(s)->n_members--;
        if (l->n == 0)
                end_lease(s, l, why);
}

static struct lease *find_member(struct server *s, pid_t pid, size_t *ret_i)
{
        for (struct lease *l = table_of(s)->head; l; l = l->next)
                for (size_t i = 0; i < l->n; i++)
                        if (l->m[i].pid == pid) {
                                *ret_i = i;
                                return l;
                        }
        return NULL;
}

/* ---- undo ------------------------------------------------------------------ */

static void undo_done(void *ctx, cJSON *msg)
{
        struct lease *l = ctx;
        struct server *s = l->srv;
        const cJSON *err = msg ? cJSON_GetObjectItemCaseSensitive(msg, "error") : NULL;
        bool ok = msg && !err;
        const char *why = reason_names[l->why];
        char detail[160];

        /* A daemon that stops while an undo waits ends it unmade: the stop's
         * rule, not the undo's failure. */
        if (!ok && cJSON_IsString(err) && strcmp(err->valuestring, CUDACKPT_ERROR_SHUTTING_DOWN) == 0) {
                for (size_t i = 0; i < l->n; i++)
                        log_warning("Lease %" PRIu64 " of uid %u pid %d (%s) not honoured: the daemon is stopping "
                                    "before its undo ran; process %d stays as it is",
                                    l->id, (unsigned)l->uid, (int)l->caller_pid, proto_method_name(l->method),
                                    (int)l->m[i].pid);
                snprintf(detail, sizeof(detail), "lease %" PRIu64 " %s: not honoured, the daemon is stopping", l->id,
                         why);
                audit(l, reason_names[METRICS_LEASES_NOT_HONOURED], detail);
                metrics_count(&s->metrics, METRICS_LEASES_NOT_HONOURED);
                cJSON_Delete(msg);
                unlink_lease(s, l);
                return;
        }
        metrics_count(&s->metrics, l->why);
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
        audit(l, ok ? "undone" : "UndoFailed", detail);
        metrics_count(&s->metrics, ok ? METRICS_UNDOS_OK : METRICS_UNDOS_FAILED);
        for (size_t i = 0; i < l->n; i++)
                member_event(s, l, &l->m[i], WATCH_LEASE_ENDED, why, ok ? "ok" : "failed");
        cJSON_Delete(msg);
        unlink_lease(s, l);
}

/* Brings l's processes back to running: ResumeGroup of the daemon's own
 * on exactly the processes leased (pinned by start time). */
static void undo(struct server *s, struct lease *l, enum metrics_counter why)
{
        struct proto_group_request req = { .kind = PROTO_SELECT_PIDS };

        if (l->undoing)
                return;
        l->undoing = true;
        l->why = why;
        if (l->conn) {
                l->conn->leases--;
                l->conn = NULL;
        }
        log_notice("Lease %" PRIu64 " of uid %u pid %d on %zu processes %s: undoing its %s", l->id,
                   (unsigned)l->uid, (int)l->caller_pid, l->n,
                   why == METRICS_LEASES_EXPIRED ? "expired" : "lost its connection", proto_method_name(l->method));
        req.pids = calloc(l->n ? l->n : 1, sizeof(*req.pids));
        if (req.pids) {
                for (size_t i = 0; i < l->n; i++)
                        req.pids[i] = (struct proto_pid_ref){ .pid = l->m[i].pid, .has_start_time = true,
                                                              .start_time = l->m[i].start_time };
                req.n_pids = (unsigned)l->n;
        }
        if (!req.pids || group_start_internal(s, PROTO_RESUME_GROUP, &table_of(s)->self, &req, undo_done, l) < 0) {
                proto_group_request_done(&req);
                undo_done(l, NULL);
        }
        arm(s);
}

static void on_timer(uv_timer_t *timer)
{
        struct server *s = timer->data;
        uint64_t now = uv_now(s->loop);
        struct lease *l, *next;

        for (l = table_of(s)->head; l; l = next) {
                next = l->next;
                if (!l->undoing && l->expires && l->expires <= now)
                        undo(s, l, METRICS_LEASES_EXPIRED);
        }
        arm(s);
}

static void arm(struct server *s)
{
        struct lease_table *t = table_of(s);
        uint64_t first = 0, now = uv_now(s->loop);

        for (struct lease *l = t->head; l; l = l->next)
                if (!l->undoing && l->expires && (!first || l->expires < first))
                        first = l->expires;
        if (!first) {
                uv_timer_stop(&t->timer);
                return;
        }
        uv_timer_start(&t->timer, on_timer, first > now ? first - now : 0, 0);
}

/* ---- the API --------------------------------------------------------------- */

void lease_init(struct server *s)
{
        struct lease_table *t = table_of(s);

        static const char *const keys[] = { "max_leases", "max_leases_per_uid", "max_leases_reserved" };

        t->next_id = 1;
        share_init(&t->share, keys, s->cfg->max_leases, s->cfg->max_leases_per_uid, s->cfg->max_leases_reserved);
        uv_timer_init(s->loop, &t->timer);
        t->timer.data = s;
        /* The undo's caller: root in the daemon's own pid namespace. */
        t->self = (struct policy_caller){ .uid = 0, .gid = 0, .pid = getpid(), .pidfd = -1 };
}

void lease_close(struct server *s)
{
        if (!uv_is_closing((uv_handle_t *)&table_of(s)->timer))
                uv_close((uv_handle_t *)&table_of(s)->timer, NULL);
}

void lease_grant(struct server *s, struct conn *c, enum proto_method m, const struct proto_lease *want,
                 const struct lease_member *members, size_t n, cJSON *reply)
{
        struct lease_table *t = table_of(s);
        struct lease *l;
        cJSON *p = reply ? cJSON_GetObjectItemCaseSensitive(reply, "parameters") : NULL, *o;

        if (s->shutting_down) {
                /* Its connection is about to close and nothing would undo it. */
                for (size_t i = 0; i < n; i++)
                        log_warning("Lease asked by uid %u pid %d (%s) not honoured: the daemon is stopping; "
                                    "process %d stays as it is",
                                    (unsigned)c->caller.uid, (int)c->caller.pid, proto_method_name(m),
                                    (int)members[i].pid);
                return; /* never granted: not counted as ended */
        }
        l = calloc(1, sizeof(*l));
        if (l)
                l->m = calloc(n ? n : 1, sizeof(*l->m));
        if (!l || !l->m) {
                free(l);
                log_error("%s by uid %u: out of memory for its lease; its processes stay as they are",
                          proto_method_name(m), (unsigned)c->caller.uid);
                return;
        }
        /* A process belongs to one lease: the newest. */
        for (size_t i = 0; i < n; i++) {
                size_t k;
                struct lease *old = find_member(s, members[i].pid, &k);
                if (old && !old->undoing)
                        drop_member(s, old, k, METRICS_LEASES_SUPERSEDED);
                else if (old)
                        /* Queued first, that undo will run after this call
                         * and bring the process back, ending this lease. */
                        log_warning("Process %d: lease %" PRIu64 " is being undone; the new %s's lease ends when "
                                    "that undo brings it back to running",
                                    (int)members[i].pid, old->id, proto_method_name(m));
        }
        memcpy(l->m, members, n * sizeof(*l->m));
        l->n = n;
        l->srv = s;
        l->id = t->next_id++;
        l->uid = c->caller.uid;
        l->privileged = access_privileged(s->cfg, &c->caller);
        l->caller_pid = c->caller.pid;
        /* Its call was counted since it came (lease_admit), and is given
         * back after: the lease is counted whatever the limits, since
         * nothing may stay paused unguarded. */
        share_take_anyway(&t->share, l->uid, l->privileged);
        l->method = m;
        l->on_close = want->on_close;
        l->ms = want->ms;
        l->expires = want->ms ? uv_now(s->loop) + want->ms : 0;
        l->next = t->head;
        if (t->head)
                t->head->prev = l;
        t->head = l;
        t->n++;
        t->n_members += (unsigned)n;
        if (l->on_close) {
                l->conn = c;
                c->leases++;
        }
        metrics_count(&s->metrics, METRICS_LEASES_GRANTED);
        {
                char detail[96];
                snprintf(detail, sizeof(detail), "lease %" PRIu64 " on %zu processes%s, %u ms", l->id, n,
                         l->on_close ? " until the connection closes" : "", (unsigned)l->ms);
                audit(l, "granted", detail);
        }
        for (size_t i = 0; i < n; i++)
                member_event(s, l, &l->m[i], WATCH_LEASE_TAKEN, NULL, NULL);
        o = p ? cJSON_AddObjectToObject(p, "lease") : NULL;
        if (o) {
                cJSON_AddNumberToObject(o, "id", (double)l->id);
                if (l->ms)
                        cJSON_AddNumberToObject(o, "lease_ms", l->ms);
                cJSON_AddBoolToObject(o, "on_close", l->on_close);
        }
        if (n == 0)
                end_lease(s, l, METRICS_LEASES_FINISHED); /* nothing to guard */
        else if (l->on_close && c->closing)
                undo(s, l, METRICS_LEASES_CLOSED); /* the holder is already gone */
        else
                arm(s);
}

void lease_op_finished(struct server *s, pid_t pid, uint64_t start_time, enum proto_method m,
                       const struct ops_result *r)
{
        size_t i;
        struct lease *l;

        if (table_of(s)->n == 0 || proto_method_read_only(m))
                return;
        l = find_member(s, pid, &i);
        if (!l || l->undoing)
                return;
        if (start_time && l->m[i].start_time != start_time) {
                drop_member(s, l, i, METRICS_LEASES_EXITED); /* the pid names another process now */
                return;
        }
        if (r->error == OPS_PROCESS_GONE || r->error == OPS_NO_SUCH_PROCESS)
                drop_member(s, l, i, METRICS_LEASES_EXITED);
        else if (r->state == CU_PROCESS_STATE_RUNNING)
                drop_member(s, l, i, METRICS_LEASES_FINISHED);
}

void lease_conn_closed(struct server *s, struct conn *c)
{
        struct lease *l, *next;

        if (c->leases == 0 || s->shutting_down)
                return;
        for (l = table_of(s)->head; l; l = next) {
                next = l->next;
                if (l->conn == c)
                        undo(s, l, METRICS_LEASES_CLOSED);
        }
}

void lease_shutdown(struct server *s)
{
        struct lease *l, *next;

        for (l = table_of(s)->head; l; l = next) {
                next = l->next;
                if (l->undoing)
                        continue;
                for (size_t i = 0; i < l->n; i++)
                        log_warning("Lease %" PRIu64 " of uid %u pid %d (%s) not honoured: the daemon is stopping; "
                                    "process %d stays as it is",
                                    l->id, (unsigned)l->uid, (int)l->caller_pid, proto_method_name(l->method),
                                    (int)l->m[i].pid);
                end_lease(s, l, METRICS_LEASES_NOT_HONOURED);
        }
}

/* Whether caller may release or renew l (access.h has the rule). */
static bool may_manage(const struct server *s, const struct policy_caller *caller, const struct lease *l)
{
        struct access_proc procs[16] = { { 0 } }, *p = procs;
        bool ok;

        if (l->n > 16 && !(p = calloc(l->n, sizeof(*p))))
                return false;
        for (size_t i = 0; i < l->n; i++)
                p[i] = (struct access_proc){ .pid = l->m[i].pid, .owner = l->m[i].owner };
        ok = access_may_manage_lease(s->cfg, caller, l->uid, p, l->n);
        if (p != procs)
                free(p);
        return ok;
}

bool lease_admit(struct server *s, const struct policy_caller *caller, struct share_refusal *ret)
{
        return share_take(&table_of(s)->share, caller->uid, access_privileged(s->cfg, caller), ret) == 0;
}

void lease_unadmit(struct server *s, const struct policy_caller *caller)
{
        share_give(&table_of(s)->share, caller->uid, access_privileged(s->cfg, caller));
}

/* The audit line of a release or renewal names who did it, and whose
 * lease it was. */
static void audit_managed(const struct conn *c, const struct lease *l, const char *what, uint32_t ms)
{
        char detail[160];
        struct log_audit a = {
                .caller_uid = (unsigned)c->caller.uid,
                .caller_pid = (int)c->caller.pid,
                .target_pid = l->n > 0 ? (int)l->m[0].pid : 0,
                .method = what,
                .result = "ok",
                .detail = detail,
        };

        if (ms)
                snprintf(detail, sizeof(detail), "lease %" PRIu64 " of uid %u pid %d on %zu processes, now %u ms",
                         l->id, (unsigned)l->uid, (int)l->caller_pid, l->n, (unsigned)ms);
        else
                snprintf(detail, sizeof(detail), "lease %" PRIu64 " of uid %u pid %d on %zu processes", l->id,
                         (unsigned)l->uid, (int)l->caller_pid, l->n);
        log_audit(&a);
}

void lease_call(struct conn *c, const struct proto_call *call)
{
        struct server *s = c->server;
        struct lease *l;
        cJSON *err = NULL, *p, *msg;
        uint64_t id;
        uint32_t ms;

        if (proto_parse_lease_call(call, &id, &ms, &err) < 0) {
                msg = err;
                goto reply;
        }
        for (l = table_of(s)->head; l; l = l->next)
                if (l->id == id)
                        break;
        if (!l || l->undoing || !may_manage(s, &c->caller, l)) {
                /* Another's lease is answered as one that does not exist. */
                p = cJSON_CreateObject();
                if (p)
                        cJSON_AddNumberToObject(p, "lease", (double)id);
                msg = proto_error_new(CUDACKPT_ERROR_NO_SUCH_LEASE, p);
                goto reply;
        }
        p = cJSON_CreateObject();
        if (p)
                cJSON_AddNumberToObject(p, "lease", (double)id);
        msg = proto_reply_new(p);
        audit_managed(c, l, proto_method_name(call->method), call->method == PROTO_RELEASE_LEASE ? 0 : ms);
        if (call->method == PROTO_RELEASE_LEASE) {
                for (size_t i = 0; i < l->n; i++)
                        member_event(s, l, &l->m[i], WATCH_LEASE_ENDED, reason_names[METRICS_LEASES_RELEASED], NULL);
                end_lease(s, l, METRICS_LEASES_RELEASED);
        } else {
                l->ms = ms;
                l->expires = uv_now(s->loop) + ms;
                if (p)
                        cJSON_AddNumberToObject(p, "lease_ms", ms);
                arm(s);
        }
reply:
        if (call->oneway)
                cJSON_Delete(msg);
        else
                conn_send(c, msg);
}
