/* group.c: the group coordinator (group.h says how its phases flow). */
#include "group.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "access.h"
#include "conn.h"
#include "cudackpt/protocol.h"
#include "log.h"
#include "ops.h"
#include "pidns.h"
#include "plan.h"
#include "policy.h"
#include "procindex.h"
#include "proto.h"
#include "sched.h"
#include "server.h"
#include "lease.h"
#include "metrics.h"
#include "target.h"

/* Processes examined by one select work item: /proc reads of a few
 * thousand processes spread over the pool's threads. */
#define GROUP_CHUNK 128
/* Bound on a tree walk, whatever max_group_members says: the walk itself
 * costs memory before members are counted. */
#define GROUP_TREE_MAX 65536

struct member {
        pid_t pid;              /* in the daemon's pid namespace */
        pid_t vpid;             /* as the caller sees it: what replies say */
        uint64_t start_time;
        int pidfd;              /* the pin, held while the group runs; -1 */
        struct policy_target owner; /* its uids */
        char comm[32];
        char *cgroup;           /* ListProcesses: owned, NULL when unknown */
        bool excluded;          /* not part of the selection after all */
        bool hidden;            /* a CUDA process the caller may not know of (access.h):
                                 * counted in a refusal, never named */
        bool skipped;           /* never initialised CUDA (cgroup, tree) */
        bool gone;
        int state;              /* driver state, -1 unknown */
        int stopped;            /* TARGET_STOPPED_*, ListProcesses */
        int in_flight;          /* ListProcesses: the op running, -1 none */
        uint64_t duration_ns;
        bool failed;
        enum proto_method err_method;
        struct ops_result err;
        bool rb_failed;
        enum proto_method rb_method;
        struct ops_result rb_err;
};

struct chunk {
        uv_work_t work;
        struct group *g;
        size_t first, n;
};

struct group {
        struct group *prev, *next;
        struct server *srv;
        struct conn *conn;      /* NULL for the daemon's own groups */
        const struct policy_caller *caller; /* the connection's, or the daemon's */
        group_end_fn on_end;    /* the daemon's own groups: who takes the reply */
        void *end_ctx;
        bool lenient;           /* members gone or changed are left out, not errors */
        bool holds_slot;        /* counted in the table's slots share */
        enum proto_method method;
        bool reply, more;
        struct proto_group_request req;
        uint64_t t0;
        uint64_t t_scanned, t_selected; /* ListProcesses's times, for the debug log */
        enum plan_phase phase;
        uv_work_t scan;
        int scan_error;         /* -errno of the scan itself */
        pid_t *cand;            /* what the scan found */
        size_t n_cand;
        struct member *m;       /* members, by pid once selected */
        size_t n;
        unsigned chunks_left;
        unsigned pending;       /* steps of the phase not yet done */
        unsigned done, total;   /* for progress replies */
        bool failed;
        enum plan_phase failed_phase;
        size_t failed_at;
        bool rolled_back;
        uint64_t deadline_ns;
        /* The root of the caller's cgroup namespace in ours ("" when it
         * is ours), and a cgroup selector in ours (owned). */
        char cgroup_root[DISCOVER_CGROUP_MAX];
        bool cgroup_hidden;     /* that root is not known: no paths shown */
        char *cgroup_sel;
        struct gpumem_use *use; /* ListProcesses: NVML's GPU memory by pid */
        size_t n_use;
        bool have_use;          /* NVML answered: "gpus" in every entry */
};

static struct group_table *table_of(struct server *s)
{
        return &s->groups;
}

static bool listing(const struct group *g)
{
        return g->method == PROTO_LIST_PROCESSES;
}

static void audit(const struct group *g, pid_t pid, const char *method, const char *result,
                  const char *detail, double ms)
{
        struct log_audit a = {
                .caller_uid = (unsigned)g->caller->uid,
                .caller_pid = (int)g->caller->pid,
                .target_pid = (int)pid,
                .method = method,
                .result = result,
                .detail = detail,
                .duration_ms = ms,
        };
        log_audit(&a);
}

/* A call of a client answered without running (result: a static string). */
static void count_refusal(const struct group *g, const char *result)
{
        if (g->conn)
                metrics_op(&g->srv->metrics, g->method, result, uv_hrtime() - g->t0);
}

/* ---- replies --------------------------------------------------------------- */

static double ms_of(uint64_t ns)
{
        return round((double)ns / 1000.0) / 1000.0;
}

static void add_state(cJSON *o, int state)
{
        char buf[32];

        if (state >= 0)
                cJSON_AddStringToObject(o, "state", proto_state_string(state, buf, sizeof(buf)));
}

/* The error name and parameters ops_reply() gives a member's result. */
static void add_error(const struct group *g, cJSON *o, pid_t pid, enum proto_method m,
                      const struct ops_result *r, const char *name_key, const char *params_key)
{
        cJSON *msg = ops_reply(&g->srv->drv, m, pid, g->caller->uid, r);
        cJSON *e = msg ? cJSON_GetObjectItemCaseSensitive(msg, "error") : NULL;

        if (cJSON_IsString(e)) {
                cJSON_AddStringToObject(o, name_key, e->valuestring);
                if (params_key) {
                        cJSON *p = cJSON_DetachItemFromObjectCaseSensitive(msg, "parameters");
                        if (p)
                                cJSON_AddItemToObject(o, params_key, p);
                }
        }
        cJSON_Delete(msg);
}

static cJSON *member_json(const struct group *g, const struct member *mb)
{
        cJSON *o = cJSON_CreateObject();

        if (!o)
                return NULL;
        cJSON_AddNumberToObject(o, "pid", mb->vpid);
        cJSON_AddNumberToObject(o, "start_time", (double)mb->start_time);
        if (!mb->gone)
                add_state(o, mb->state);
        cJSON_AddNumberToObject(o, "duration_ms", ms_of(mb->duration_ns));
        if (mb->failed)
                add_error(g, o, mb->vpid, mb->err_method, &mb->err, "error", "error_parameters");
        if (mb->rb_failed)
                add_error(g, o, mb->vpid, mb->rb_method, &mb->rb_err, "rollback_error", NULL);
        return o;
}

static void add_members(const struct group *g, cJSON *p)
{
        cJSON *members = cJSON_AddArrayToObject(p, "members");
        cJSON *skipped = cJSON_AddArrayToObject(p, "skipped");

        if (!members || !skipped)
                return;
        for (size_t i = 0; i < g->n; i++) {
                const struct member *mb = &g->m[i];
                if (mb->excluded || mb->hidden)
                        continue;
                if (mb->skipped) {
                        cJSON *o = cJSON_CreateObject();
                        if (!o)
                                continue;
                        cJSON_AddNumberToObject(o, "pid", mb->vpid);
                        cJSON_AddNumberToObject(o, "start_time", (double)mb->start_time);
                        cJSON_AddStringToObject(o, "reason", CUDACKPT_SKIP_NOT_CUDA);
                        cJSON_AddItemToArray(skipped, o);
                } else {
                        cJSON_AddItemToArray(members, member_json(g, mb));
                }
        }
}

/* "gpus": the GPUs pid holds memory on now, as NVML says (none when it is
 * checkpointed). */
static void add_gpus(const struct group *g, cJSON *o, pid_t pid)
{
        cJSON *arr = cJSON_AddArrayToObject(o, "gpus");

        for (size_t i = 0; arr && i < g->n_use; i++) {
                const struct gpumem_use *u = &g->use[i];
                cJSON *e;
                if (u->pid != pid || !(e = cJSON_CreateObject()))
                        continue;
                cJSON_AddStringToObject(e, "uuid", g->srv->gpumem.uuid[u->gpu]);
                if (u->bytes != GPUMEM_NO_BYTES)
                        cJSON_AddNumberToObject(e, "memory_bytes", (double)u->bytes);
                cJSON_AddItemToArray(arr, e);
        }
}

static cJSON *list_reply(const struct group *g)
{
        cJSON *p = cJSON_CreateObject(), *arr;

        if (!p)
                return NULL;
        arr = cJSON_AddArrayToObject(p, "processes");
        for (size_t i = 0; arr && i < g->n; i++) {
                const struct member *mb = &g->m[i];
                cJSON *o;
                if (mb->excluded || mb->skipped || mb->gone || mb->hidden)
                        continue;
                o = cJSON_CreateObject();
                if (!o)
                        continue;
                cJSON_AddNumberToObject(o, "pid", mb->vpid);
                cJSON_AddNumberToObject(o, "uid", mb->owner.ruid);
                cJSON_AddNumberToObject(o, "start_time", (double)mb->start_time);
                cJSON_AddStringToObject(o, "command", mb->comm);
                cJSON_AddStringToObject(o, "cgroup", mb->cgroup ? mb->cgroup : "");
                if (mb->stopped > 0)
                        cJSON_AddStringToObject(o, "stop", target_stop_name(mb->stopped));
                else
                        add_state(o, mb->state);
                if (mb->in_flight >= 0)
                        cJSON_AddStringToObject(o, "in_flight", proto_method_name((enum proto_method)mb->in_flight));
                if (g->have_use)
                        add_gpus(g, o, mb->pid);
                cJSON_AddItemToArray(arr, o);
        }
        return proto_reply_new(p);
}

static cJSON *final_reply(struct group *g)
{
        cJSON *p;

        /* A listing that failed at its selection (a pid or tree root with
         * no process, the daemon named) answers as a single call would. */
        if (listing(g) && g->failed)
                return ops_reply(&g->srv->drv, g->m[g->failed_at].err_method, g->m[g->failed_at].vpid,
                                 g->caller->uid, &g->m[g->failed_at].err);
        if (listing(g))
                return list_reply(g);
        p = cJSON_CreateObject();
        if (!p)
                return NULL;
        if (!g->failed) {
                add_members(g, p);
                cJSON_AddNumberToObject(p, "duration_ms", ms_of(uv_hrtime() - g->t0));
                return proto_reply_new(p);
        }
        /* The first failure the caller may know of; hidden members only
         * as a count. */
        const struct member *f = NULL;
        unsigned hidden = 0;
        for (size_t i = 0; i < g->n; i++) {
                hidden += g->m[i].hidden;
                if (!f && g->m[i].failed && !g->m[i].hidden)
                        f = &g->m[i];
        }
        cJSON_AddStringToObject(p, "method", proto_method_name(g->method));
        cJSON_AddStringToObject(p, "phase", plan_phase_name(g->failed_phase));
        if (f) {
                cJSON_AddNumberToObject(p, "pid", f->vpid);
                add_error(g, p, f->vpid, f->err_method, &f->err, "error", "error_parameters");
        } else {
                cJSON *ep = cJSON_CreateObject();
                cJSON_AddStringToObject(p, "error", CUDACKPT_ERROR_PERMISSION_DENIED);
                if (ep) {
                        cJSON_AddNumberToObject(ep, "caller_uid", g->caller->uid);
                        cJSON_AddNumberToObject(ep, "refused", hidden);
                        cJSON_AddItemToObject(p, "error_parameters", ep);
                }
        }
        if (hidden)
                cJSON_AddNumberToObject(p, "refused", hidden);
        cJSON_AddBoolToObject(p, "rolled_back", g->rolled_back);
        add_members(g, p);
        return proto_error_new(CUDACKPT_ERROR_GROUP_FAILED, p);
}

static void progress(struct group *g, const struct member *mb)
{
        cJSON *p, *o;

        if (!g->conn || !g->more || !g->reply || g->conn->closing || listing(g))
                return;
        p = cJSON_CreateObject();
        o = p ? cJSON_AddObjectToObject(p, "progress") : NULL;
        if (!o) {
                cJSON_Delete(p);
                return;
        }
        cJSON_AddStringToObject(o, "phase", plan_phase_name(g->phase));
        cJSON_AddItemToObject(o, "member", member_json(g, mb));
        cJSON_AddNumberToObject(o, "done", g->done);
        cJSON_AddNumberToObject(o, "total", g->total);
        conn_send(g->conn, proto_reply_continues(p));
}

/* ---- lifetime -------------------------------------------------------------- */

static bool active(const struct member *mb);

static void start_waiting(struct server *srv);

static void member_drop(struct member *mb)
{
        if (mb->pidfd >= 0)
                close(mb->pidfd);
        mb->pidfd = -1;
        free(mb->cgroup);
        mb->cgroup = NULL;
}

static void group_free(struct group *g)
{
        for (size_t i = 0; i < g->n; i++)
                member_drop(&g->m[i]);
        free(g->m);
        free(g->cand);
        proto_group_request_done(&g->req);
        free(g->cgroup_sel);
        free(g->use);
        free(g);
}

/* Answers the call with msg (consumed) and lets go of the group. */
static void group_end(struct group *g, cJSON *msg)
{
        struct server *srv = g->srv;
        struct group_table *t = table_of(srv);
        struct conn *c = g->conn;

        g->phase = PLAN_END;
        if (!c)
                g->on_end(g->end_ctx, msg);
        else if (g->reply && !c->closing)
                conn_send(c, msg);
        else
                cJSON_Delete(msg);
        if (g->prev)
                g->prev->next = g->next;
        else
                t->head = g->next;
        if (g->next)
                g->next->prev = g->prev;
        else
                t->tail = g->prev;
        t->n--;
        if (g->holds_slot)
                share_give(&t->slots, g->caller->uid, access_privileged(srv->cfg, g->caller));
        if (g->req.lease.admitted)
                lease_unadmit(srv, g->caller);
        group_free(g);
        if (c) {
                conn_request_done(c);
                conn_unref(c);
        }
        start_waiting(srv);
        server_maybe_finish(srv);
}

/* A LockGroup or SuspendGroup that asked for a lease and succeeded. */
static void grant_lease(struct group *g, cJSON *msg)
{
        struct lease_member *lm = calloc(g->n ? g->n : 1, sizeof(*lm));
        size_t n = 0;

        if (!lm) {
                /* No lease can be kept: nothing may stay paused unguarded. */
                log_error("%s: out of memory for the lease; its members stay as they are",
                          proto_method_name(g->method));
                return;
        }
        for (size_t i = 0; i < g->n; i++)
                if (active(&g->m[i]))
                        lm[n++] = (struct lease_member){ .pid = g->m[i].pid, .vpid = g->m[i].vpid,
                                                         .start_time = g->m[i].start_time,
                                                         .owner = g->m[i].owner };
        lease_grant(g->srv, g->conn, g->method, &g->req.lease, lm, n, msg);
        free(lm);
}

static void group_finish(struct group *g)
{
        unsigned n = 0;
        char detail[96];

        if (!listing(g)) {
                for (size_t i = 0; i < g->n; i++)
                        n += !g->m[i].excluded && !g->m[i].skipped;
                if (g->failed)
                        snprintf(detail, sizeof(detail), "%u members, failed in %s%s", n,
                                 plan_phase_name(g->failed_phase), g->rolled_back ? ", rolled back" : "");
                else
                        snprintf(detail, sizeof(detail), "%u members", n);
                pid_t who = 0;
                for (size_t i = 0; i < g->n && !who; i++)
                        if (!g->m[i].excluded && !g->m[i].skipped)
                                who = g->m[i].pid;
                if (g->conn)
                        audit(g, g->failed ? g->m[g->failed_at].pid : who, proto_method_name(g->method),
                              g->failed ? ops_error_short_name(g->m[g->failed_at].err.error) : "ok", detail,
                              ms_of(uv_hrtime() - g->t0));
        }
        if (g->conn)
                metrics_op(&g->srv->metrics, g->method,
                           !g->failed      ? "ok"
                           : listing(g)    ? ops_error_short_name(g->m[g->failed_at].err.error)
                                           : "GroupFailed",
                           uv_hrtime() - g->t0);
        if (listing(g) && g->t_selected)
                log_debug("ListProcesses: %zu candidates; %.1f us to the scan's end, %.1f us more to the selection, "
                          "%.1f us for the states", g->n_cand, (double)(g->t_scanned - g->t0) / 1e3,
                          (double)(g->t_selected - g->t_scanned) / 1e3, (double)(uv_hrtime() - g->t_selected) / 1e3);
        cJSON *msg = final_reply(g);
        if (!g->failed && g->conn && g->req.lease.wanted)
                grant_lease(g, msg);
        group_end(g, msg);
}

/* ---- phases ---------------------------------------------------------------- */

static void advance(struct group *g);
static void step_done(struct sched *s, struct sched_op *op);

static bool active(const struct member *mb)
{
        return !mb->excluded && !mb->skipped && !mb->gone;
}

/* Whether member mb takes part in phase p. */
static bool needs(const struct member *mb, enum plan_phase p)
{
        return active(mb) && plan_needs(p, mb->state);
}

static void member_fail(struct group *g, size_t i, enum proto_method m, const struct ops_result *r)
{
        struct member *mb = &g->m[i];

        mb->failed = true;
        mb->err_method = m;
        mb->err = *r;
}

/* Queues phase p's step of member i; false when its queue refused it
 * (recorded as the member's failure). */
static bool submit(struct group *g, size_t i, enum plan_phase p)
{
        struct member *mb = &g->m[i];
        struct sched_op *op = calloc(1, sizeof(*op));
        enum ops_step st = plan_step(p);
        struct ops_result r = { .error = OPS_QUEUE_FULL, .state = -1, .restore_tid = -1,
                                .rolled_back = -1, .in_flight = -1 };
        struct share_refusal limit = { 0 };

        if (!op)
                goto refused;
        op->conn = g->conn;
        op->caller = g->caller;
        op->parent = g->method;
        op->method = plan_step_method(st);
        op->reply = true;
        op->done = step_done;
        op->ctx = g;
        op->index = (unsigned)i;
        op->req.pid = mb->pid;
        op->req.has_start_time = true;
        op->req.start_time = mb->start_time;
        if (st == OPS_STEP_LOCK) {
                op->req.has_timeout = true;
                op->req.timeout_ms = g->req.has_timeout ? g->req.timeout_ms : g->srv->cfg->default_lock_timeout_ms;
                op->req.deadline_ns = g->deadline_ns;
        }
        if (p == PLAN_RESTORE && g->req.n_pairs > 0) {
                op->req.pairs = calloc(g->req.n_pairs, sizeof(*op->req.pairs));
                if (!op->req.pairs) {
                        free(op);
                        goto refused;
                }
                memcpy(op->req.pairs, g->req.pairs, g->req.n_pairs * sizeof(*op->req.pairs));
                op->req.n_pairs = g->req.n_pairs;
        }
        if (sched_submit(&g->srv->sched, op, &limit) == 0) {
                g->pending++;
                return true;
        }
        proto_request_done(&op->req);
        free(op);
refused:
        r.limit = limit.limit;
        r.limit_key = limit.key;
        if (plan_is_rollback(p)) {
                mb->rb_failed = true;
                mb->rb_method = plan_step_method(st);
                mb->rb_err = r;
        } else {
                member_fail(g, i, plan_step_method(st), &r);
        }
        return false;
}

static void run_phase(struct group *g, enum plan_phase p)
{
        g->phase = p;
        g->done = g->total = 0;
        for (size_t i = 0; i < g->n; i++)
                g->total += needs(&g->m[i], p);
        if (p == PLAN_LOCK) {
                uint32_t t = g->req.has_timeout ? g->req.timeout_ms : g->srv->cfg->default_lock_timeout_ms;
                g->deadline_ns = t ? uv_hrtime() + (uint64_t)t * 1000000u : 0;
        }
        for (size_t i = 0; i < g->n; i++) {
                if (!needs(&g->m[i], p))
                        continue;
                /* ListProcesses answers from an operation in flight, as GetState does. */
                if (listing(g)) {
                        struct sched_snapshot snap;
                        if (sched_running_snapshot(&g->srv->sched, g->m[i].pid, &snap) && snap.known &&
                            snap.last_state >= 0 && snap.start_time == g->m[i].start_time) {
                                g->m[i].state = snap.last_state;
                                g->m[i].in_flight = (int)snap.running;
                                continue;
                        }
                }
                (void)submit(g, i, p);
        }
        if (g->pending == 0)
                advance(g);
}

static void record(struct group *g, struct sched_op *op)
{
        struct member *mb = &g->m[op->index];
        const struct ops_result *r = &op->result;
        enum ops_step st = plan_step(g->phase);

        mb->duration_ns += r->duration_ns;
        if (r->error == OPS_OK) {
                mb->state = st == OPS_STEP_GET_STATE ? r->state : ops_state_after(st);
                return;
        }
        if (r->error == OPS_PROCESS_GONE || r->error == OPS_NO_SUCH_PROCESS || r->error == OPS_PROCESS_CHANGED)
                mb->gone = true;
        else
                mb->state = r->state;
        if (listing(g)) {
                if (r->error == OPS_NOT_CUDA_PROCESS)
                        mb->skipped = true;
                if (r->error == OPS_PROCESS_STOPPED)
                        mb->stopped = r->stopped;
                return;
        }
        if (g->phase == PLAN_STATE && r->error == OPS_NOT_CUDA_PROCESS &&
            (g->req.kind != PROTO_SELECT_PIDS || g->lenient)) {
                mb->skipped = true;
                return;
        }
        if (plan_is_rollback(g->phase)) {
                if (g->phase != PLAN_RB_STATE) {
                        mb->rb_failed = true;
                        mb->rb_method = op->method;
                        mb->rb_err = *r;
                }
                return;
        }
        member_fail(g, op->index, op->method, r);
}

static void step_done(struct sched *s, struct sched_op *op)
{
        struct group *g = op->ctx;
        (void)s;

        if (!proto_method_read_only(op->method))
                audit(g, op->req.pid, proto_method_name(op->method), ops_error_short_name(op->result.error),
                      proto_method_name(g->method), (double)op->result.duration_ns / 1e6);
        record(g, op);
        g->done++;
        if (plan_changes(g->phase))
                progress(g, &g->m[op->index]);
        proto_request_done(&op->req);
        free(op);
        if (--g->pending == 0)
                advance(g);
}

static bool phase_failed(const struct group *g, size_t *ret_first)
{
        for (size_t i = 0; i < g->n; i++)
                if (g->m[i].failed) {
                        *ret_first = i;
                        return true;
                }
        return false;
}

static void plan_check(struct group *g)
{
        enum proto_method single = proto_group_single(g->method);

        for (size_t i = 0; i < g->n; i++) {
                struct member *mb = &g->m[i];
                struct ops_result r = { .error = OPS_INVALID_STATE, .state = mb->state, .restore_tid = -1,
                                        .rolled_back = -1, .in_flight = -1 };
                if (!active(mb) || plan_state_allowed(g->method, mb->state))
                        continue;
                r.step = ops_first_step(single);
                member_fail(g, i, single, &r);
        }
}

static bool all_running(const struct group *g)
{
        for (size_t i = 0; i < g->n; i++)
                if (active(&g->m[i]) && g->m[i].state != CU_PROCESS_STATE_RUNNING)
                        return false;
        return true;
}

static void advance(struct group *g)
{
        enum plan_phase next;
        size_t first;
        bool failed;

        if (g->phase == PLAN_STATE && !listing(g) && !phase_failed(g, &first))
                plan_check(g);
        failed = !plan_is_rollback(g->phase) && phase_failed(g, &first);
        if (failed && !listing(g)) {
                g->failed = true;
                g->failed_phase = g->phase;
                g->failed_at = first;
        }
        if (g->phase == PLAN_RB_UNLOCK)
                g->rolled_back = all_running(g);
        next = listing(g) ? PLAN_END : plan_after(g->method, g->phase, failed);
        if (next == PLAN_END)
                group_finish(g);
        else
                run_phase(g, next);
}

/* ---- select ---------------------------------------------------------------- */

static bool overlaps(const struct group *a, const struct group *b)
{
        for (size_t i = 0; i < a->n; i++) {
                if (!active(&a->m[i]))
                        continue;
                for (size_t j = 0; j < b->n; j++)
                        if (active(&b->m[j]) && a->m[i].pid == b->m[j].pid)
                                return true;
        }
        return false;
}

/* Whether an earlier group holds g back: one still selecting (its members
 * are not known yet) or one sharing a member.  ListProcesses waits for
 * nobody and holds nobody up. */
static bool held_back(const struct group *g)
{
        if (listing(g))
                return false;
        for (const struct group *e = g->prev; e; e = e->prev)
                if (!listing(e) && (e->phase == PLAN_SELECT || overlaps(e, g)))
                        return true;
        return false;
}

static void start_waiting(struct server *srv)
{
        struct group_table *t = table_of(srv);
        struct group *g;

        /* Starting a group can end it at once, which calls this again:
         * the outer loop then looks once more from the start. */
        if (t->starting) {
                t->again = true;
                return;
        }
        t->starting = true;
        do {
                t->again = false;
                for (g = t->head; g; g = g->next)
                        if (g->phase == PLAN_WAIT && !held_back(g)) {
                                run_phase(g, PLAN_STATE);
                                t->again = true; /* the list may have changed */
                                break;
                        }
        } while (t->again);
        t->starting = false;
}

/* A cgroup path of ours as the caller's cgroup namespace shows it; NULL
 * for one outside that namespace. */
static char *cgroup_for_caller(const struct group *g, const char *path)
{
        size_t n = strlen(g->cgroup_root);

        if (g->cgroup_hidden)
                return NULL;
        if (n == 0)
                return strdup(path);
        if (!discover_cgroup_within(path, g->cgroup_root))
                return NULL;
        return strdup(path[n] ? path + n : "/");
}

/* Pins and judges the candidates of one chunk (worker thread). */
static void chunk_work(uv_work_t *w)
{
        struct chunk *ch = w->data;
        struct group *g = ch->g;
        const struct config *cfg = g->srv->cfg;
        const struct policy_caller *caller = g->caller;
        const bool pids = g->req.kind == PROTO_SELECT_PIDS;
        const bool by_cgroup = g->req.kind == PROTO_SELECT_CGROUP;
        const enum proto_method judge_as = listing(g) ? PROTO_GET_STATE : proto_group_single(g->method);
        const pid_t self = getpid();
        char cg[DISCOVER_CGROUP_MAX];

        for (size_t i = ch->first; i < ch->first + ch->n; i++) {
                struct member *mb = &g->m[i];
                struct target_identity id;
                struct proto_request req = { .pid = g->cand[i] };
                struct ops_result r = { .state = -1, .restore_tid = -1, .rolled_back = -1, .in_flight = -1 };
                uid_t owner;
                int k;

                *mb = (struct member){ .pid = g->cand[i], .vpid = pids ? g->req.pids[i].pid : g->cand[i],
                                       .pidfd = -1, .state = -1, .in_flight = -1 };
                if (pids) {
                        req.has_start_time = g->req.pids[i].has_start_time;
                        req.start_time = g->req.pids[i].start_time;
                } else if (g->cand[i] == self || pidns_to_caller(&caller->pidns, g->cand[i], &mb->vpid) < 0) {
                        /* The daemon, or a process the caller cannot see. */
                        mb->excluded = true;
                        continue;
                }
                /* Cheapest test first: the cgroup (when it selects), the
                 * owner, then the maps; a listing reads the cgroup of the
                 * few CUDA processes last. */
                cg[0] = '\0';
                if (by_cgroup && (discover_cgroup(g->cand[i], cg, sizeof(cg)) < 0 ||
                                  !discover_cgroup_within(cg, g->cgroup_sel))) {
                        mb->excluded = true;
                        continue;
                }
                /* A listing shows what the caller may see: a first look at
                 * the owner spares reading the maps of everyone else's. */
                if (listing(g) && caller->uid != 0 && discover_owner(g->cand[i], &owner) == 0) {
                        struct policy_target t = { owner, owner, owner };
                        if (!policy_allowed(policy_decide(cfg, caller, &t, true))) {
                                mb->excluded = true;
                                continue;
                        }
                }
                if (!pids) {
                        k = discover_maps_driver(g->cand[i], &table_of(g->srv)->driver_lib);
                        if (k < 0 || (k == 0 && listing(g))) {
                                mb->excluded = true;
                                continue;
                        }
                        mb->skipped = k == 0;
                }
                k = target_open(g->cand[i], &id);
                if (k < 0) {
                        /* A listing by pids says which it named that has no
                         * process; one it may not open it leaves out. */
                        if (!pids || g->lenient || (listing(g) && k != -ESRCH)) {
                                mb->excluded = true; /* gone since the scan */
                                continue;
                        }
                        r.error = k == -ESRCH ? OPS_NO_SUCH_PROCESS : OPS_PERMISSION_DENIED;
                        member_fail(g, i, judge_as, &r);
                        continue;
                }
                if (id.pid != mb->pid) /* a thread id named its process */
                        (void)pidns_to_caller(&caller->pidns, id.pid, &mb->vpid);
                mb->pid = id.pid;
                mb->start_time = id.start_time;
                mb->owner = (struct policy_target){ id.ruid, id.euid, id.suid };
                mb->pidfd = id.pidfd;
                id.pidfd = -1;
                {
                        struct policy_target t = { id.ruid, id.euid, id.suid };
                        target_close(&id);
                        if (!pids && !access_may_read(cfg, caller, &t)) {
                                /* Another's process met by a tree or cgroup:
                                 * a group learns how many, not which; a
                                 * listing nothing. */
                                mb->excluded = mb->skipped || listing(g);
                                mb->hidden = !mb->excluded;
                                r.error = OPS_PERMISSION_DENIED;
                                if (mb->hidden)
                                        member_fail(g, i, judge_as, &r);
                                continue;
                        }
                        if (mb->skipped)
                                continue; /* not acted on: not judged */
                        if (id.pid == self) {
                                r.error = OPS_PERMISSION_DENIED;
                                member_fail(g, i, judge_as, &r);
                        } else if (!ops_judge(cfg, caller, judge_as, &req, &t, mb->start_time, &r)) {
                                if (listing(g) || (g->lenient && r.error == OPS_PROCESS_CHANGED))
                                        mb->excluded = true;
                                else
                                        member_fail(g, i, judge_as, &r);
                        }
                }
                if (listing(g) && !mb->excluded) {
                        (void)discover_comm(mb->pid, mb->comm, sizeof(mb->comm));
                        if (!by_cgroup && discover_cgroup(mb->pid, cg, sizeof(cg)) < 0)
                                cg[0] = '\0';
                        mb->cgroup = cg[0] ? cgroup_for_caller(g, cg) : NULL;
                }
        }
}

static int cmp_member(const void *a, const void *b)
{
        const struct member *x = a, *y = b;

        return (x->pid > y->pid) - (x->pid < y->pid);
}

static cJSON *too_large(unsigned limit, size_t n)
{
        cJSON *p = cJSON_CreateObject();

        if (p) {
                cJSON_AddNumberToObject(p, "limit", limit);
                cJSON_AddNumberToObject(p, "members", (double)n);
        }
        return proto_error_new(CUDACKPT_ERROR_GROUP_TOO_LARGE, p);
}

static void selected(struct group *g)
{
        size_t n = 0, acting = 0, first;

        g->t_selected = uv_hrtime();
        /* Compact, sort by pid, merge a process named twice (by a thread id). */
        for (size_t i = 0; i < g->n; i++) {
                if (g->m[i].excluded) {
                        member_drop(&g->m[i]);
                        continue;
                }
                g->m[n++] = g->m[i];
        }
        g->n = n;
        if (n > 1)
                qsort(g->m, n, sizeof(*g->m), cmp_member);
        n = 0;
        for (size_t i = 0; i < g->n; i++) {
                if (n > 0 && g->m[n - 1].pid == g->m[i].pid && !g->m[i].failed && !g->m[n - 1].failed) {
                        member_drop(&g->m[i]);
                        continue;
                }
                g->m[n++] = g->m[i];
        }
        g->n = n;
        if (g->srv->shutting_down) {
                count_refusal(g, "ShuttingDown");
                group_end(g, proto_error_new(CUDACKPT_ERROR_SHUTTING_DOWN, NULL));
                return;
        }
        if (phase_failed(g, &first)) {
                g->failed = true;
                g->failed_phase = PLAN_SELECT;
                g->failed_at = first;
                group_finish(g);
                return;
        }
        for (size_t i = 0; i < g->n; i++)
                acting += active(&g->m[i]);
        if (!listing(g) && acting > g->srv->cfg->max_group_members) {
                audit(g, 0, proto_method_name(g->method), "GroupTooLarge", NULL, 0);
                count_refusal(g, "GroupTooLarge");
                group_end(g, too_large(g->srv->cfg->max_group_members, acting));
                return;
        }
        g->phase = PLAN_WAIT;
        start_waiting(g->srv); /* g, and any that waited for g's selection */
}

/* A listing's GPU memory (gpumem.h), beside the chunks (worker thread). */
static void usage_work(uv_work_t *w)
{
        struct chunk *ch = w->data;
        struct group *g = ch->g;

        g->have_use = gpumem_usage(&g->srv->gpumem, &g->use, &g->n_use) == 0;
}

static void chunk_done(uv_work_t *w, int status)
{
        struct chunk *ch = w->data;
        struct group *g = ch->g;

        (void)status;
        free(ch);
        if (--g->chunks_left == 0)
                selected(g);
}

/* What the selector names, before any process is looked at (worker). */
static void scan_work(uv_work_t *w)
{
        struct group *g = w->data;
        const struct pidns *ns = &g->caller->pidns;
        pid_t root;
        size_t n;

        /* Pids the caller names are turned into ours here; one it cannot
         * see becomes -1, which no process has (NoSuchProcess). */
        switch (g->req.kind) {
        case PROTO_SELECT_PIDS:
                n = g->req.n_pids;
                g->cand = calloc(n, sizeof(*g->cand));
                if (!g->cand) {
                        g->scan_error = -ENOMEM;
                        return;
                }
                for (size_t i = 0; i < n; i++)
                        if (pidns_to_daemon(ns, g->req.pids[i].pid, &g->cand[i]) < 0)
                                g->cand[i] = -1;
                g->n_cand = n;
                return;
        case PROTO_SELECT_TREE:
                if (pidns_to_daemon(ns, g->req.tree, &root) < 0)
                        g->scan_error = -ESRCH;
                else
                        g->scan_error = discover_tree(root, GROUP_TREE_MAX, &g->cand, &g->n_cand);
                return;
        default:
                break;
        }
        /* Cgroup paths in and out are the caller's cgroup namespace's. */
        if (discover_cgroup_ns_root(g->caller->pid, g->cgroup_root, sizeof(g->cgroup_root)) < 0) {
                if (g->req.kind == PROTO_SELECT_CGROUP) {
                        g->scan_error = -EREMOTE;
                        return;
                }
                g->cgroup_hidden = true;
        }
        if (g->req.kind == PROTO_SELECT_CGROUP) {
                const char *sel = g->req.cgroup;
                if (g->cgroup_root[0] && strcmp(sel, "/") == 0)
                        sel = "";
                if (asprintf(&g->cgroup_sel, "%s%s", g->cgroup_root, sel) < 0) {
                        g->cgroup_sel = NULL;
                        g->scan_error = -ENOMEM;
                        return;
                }
        }
        /* A listing wants CUDA processes only; a group by cgroup also
         * reports the others it skips, so it reads every process. */
        if (!listing(g)) {
                g->scan_error = discover_all(&g->cand, &g->n_cand);
                return;
        }
        g->scan_error = group_candidates(g->srv, &g->cand, &g->n_cand);
}

int group_candidates(struct server *srv, pid_t **ret_pids, size_t *ret_n)
{
        struct group_table *t = table_of(srv);
        struct procindex *ix = atomic_load(&t->index);

        if (ix && !atomic_load(&t->index_lost)) {
                int r = procindex_candidates(ix, ret_pids, ret_n);
                if (r == 0) {
                        atomic_fetch_add(&t->scans_index, 1);
                        return 0;
                }
                if (r == -EOVERFLOW && !atomic_exchange(&t->index_lost, true))
                        log_warning("The process index is full (process_index_max %u) and has missed a process: "
                                    "ListProcesses and Watch scan /proc from now on",
                                    srv->cfg->process_index_max);
                else if (r != -EOVERFLOW)
                        log_debug("The process index failed (%s): scanning /proc", strerror(-r));
        }
        atomic_fetch_add(&t->scans_proc, 1);
        return discover_all(ret_pids, ret_n);
}

static void scan_done(uv_work_t *w, int status)
{
        struct group *g = w->data;

        g->t_scanned = uv_hrtime();
        (void)status;
        if (g->scan_error == -ESRCH) {
                /* The root of a tree has gone. */
                g->m = calloc(1, sizeof(*g->m));
                if (g->m) {
                        struct ops_result r = { .error = OPS_NO_SUCH_PROCESS, .state = -1, .restore_tid = -1,
                                                .rolled_back = -1, .in_flight = -1 };
                        g->n = 1;
                        g->m[0] = (struct member){ .pid = -1, .vpid = g->req.tree, .pidfd = -1, .state = -1,
                                                   .in_flight = -1, .gone = true };
                        member_fail(g, 0, proto_group_single(g->method), &r);
                        g->failed = true;
                        g->failed_phase = PLAN_SELECT;
                        g->failed_at = 0;
                        group_finish(g);
                        return;
                }
        }
        if (g->scan_error == -E2BIG) {
                count_refusal(g, "GroupTooLarge");
                group_end(g, too_large(g->srv->cfg->max_group_members, GROUP_TREE_MAX));
                return;
        }
        if (g->scan_error == -EREMOTE) {
                cJSON *p = cJSON_CreateObject();
                if (p)
                        cJSON_AddStringToObject(p, "reason", "the caller's cgroup namespace is not the daemon's, "
                                                             "and no cgroup2 mount of the caller shows its root");
                audit(g, 0, proto_method_name(g->method), "PermissionDenied", "cgroup namespace unknown", 0);
                count_refusal(g, "PermissionDenied");
                group_end(g, proto_error_new(CUDACKPT_ERROR_PERMISSION_DENIED, p));
                return;
        }
        if (g->scan_error < 0) {
                log_error("%s: cannot read the selection: %s", proto_method_name(g->method),
                          strerror(-g->scan_error));
                if (g->conn)
                        conn_close(g->conn);
                group_end(g, NULL);
                return;
        }
        g->n = g->n_cand;
        g->m = calloc(g->n ? g->n : 1, sizeof(*g->m));
        if (!g->m) {
                if (g->conn)
                        conn_close(g->conn);
                group_end(g, NULL);
                return;
        }
        if (g->n == 0) {
                selected(g);
                return;
        }
        /* A listing shows each process's GPU memory: NVML is asked (one call
         * per GPU) beside the chunks, before the state phase. */
        if (listing(g) && g->srv->gpumem_on) {
                struct chunk *ch = calloc(1, sizeof(*ch));
                if (ch) {
                        ch->g = g;
                        ch->work.data = ch;
                        g->chunks_left++;
                        (void)uv_queue_work(g->srv->loop, &ch->work, usage_work, chunk_done);
                }
        }
        /* Spread over the workers: a few candidates (the process index's)
         * cost tens of microseconds each in /proc, and they are examined at
         * once rather than one after another. */
        size_t per = (g->n + g->srv->cfg->workers - 1) / g->srv->cfg->workers;
        if (per > GROUP_CHUNK)
                per = GROUP_CHUNK;
        for (size_t first = 0; first < g->n; first += per) {
                struct chunk *ch = calloc(1, sizeof(*ch));
                size_t cnt = g->n - first < per ? g->n - first : per;
                if (!ch) {
                        /* Examine what is left here, on the loop: out of memory is
                         * no state to be fast in. */
                        struct chunk tmp = { .g = g, .first = first, .n = g->n - first };
                        tmp.work.data = &tmp;
                        chunk_work(&tmp.work);
                        break;
                }
                ch->g = g;
                ch->first = first;
                ch->n = cnt;
                ch->work.data = ch;
                g->chunks_left++;
                (void)uv_queue_work(g->srv->loop, &ch->work, chunk_work, chunk_done);
        }
        if (g->chunks_left == 0)
                selected(g);
}

/* Puts g at the end of the table and starts its selection. */
static void start_select(struct group *g)
{
        struct group_table *t = table_of(g->srv);

        g->phase = PLAN_SELECT;
        g->prev = t->tail;
        if (t->tail)
                t->tail->next = g;
        else
                t->head = g;
        t->tail = g;
        t->n++;
        g->scan.data = g;
        (void)uv_queue_work(g->srv->loop, &g->scan, scan_work, scan_done);
}

/* A slot of the caller's share of groups in flight, and for a lease its
 * share of leases; false when refused (answered). */
static bool admit(struct group *g, struct conn *c)
{
        struct server *srv = g->srv;
        struct share_refusal why = { 0 };
        cJSON *msg, *p;

        if (srv->shutting_down) {
                msg = proto_error_new(CUDACKPT_ERROR_SHUTTING_DOWN, NULL);
                goto refuse;
        }
        if (g->req.lease.wanted) {
                if (!lease_admit(srv, &c->caller, &why))
                        goto full;
                g->req.lease.admitted = true;
        }
        if (share_take(&table_of(srv)->slots, c->caller.uid, access_privileged(srv->cfg, &c->caller), &why) == 0) {
                g->holds_slot = true;
                return true;
        }
        if (g->req.lease.admitted)
                lease_unadmit(srv, &c->caller);
        g->req.lease.admitted = false;
full:
        p = cJSON_CreateObject();
        if (p) {
                cJSON_AddNumberToObject(p, "limit", why.limit);
                if (why.key)
                        cJSON_AddStringToObject(p, "resource", why.key);
        }
        msg = proto_error_new(CUDACKPT_ERROR_QUEUE_FULL, p);
        audit(g, 0, proto_method_name(g->method), "QueueFull", why.key, 0);
        count_refusal(g, "QueueFull");
refuse:
        if (g->reply)
                conn_send(c, msg);
        else
                cJSON_Delete(msg);
        return false;
}

/* A call refused before it starts, with an error whose only parameter is
 * reason (result: its short name, a static string; detail: for the audit
 * record); g is freed. */
static void refuse_early(struct group *g, const char *error, const char *result, const char *reason,
                         const char *detail)
{
        cJSON *p = g->reply ? cJSON_CreateObject() : NULL;

        if (p)
                cJSON_AddStringToObject(p, "reason", reason);
        count_refusal(g, result);
        audit(g, 0, proto_method_name(g->method), result, detail, 0);
        if (g->reply)
                conn_send(g->conn, proto_error_new(error, p));
        proto_group_request_done(&g->req);
        free(g);
}

void group_call(struct conn *c, const struct proto_call *call)
{
        struct server *srv = c->server;
        struct group *g;
        cJSON *err = NULL;

        g = calloc(1, sizeof(*g));
        if (!g) {
                conn_close(c);
                return;
        }
        if (proto_parse_group(call, srv->cfg->max_gpu_pairs, srv->cfg->max_group_members, &g->req, &err) < 0) {
                if (!call->oneway)
                        conn_send(c, err);
                else
                        cJSON_Delete(err);
                free(g);
                return;
        }
        g->srv = srv;
        g->conn = c;
        g->caller = &c->caller;
        g->method = call->method;
        g->reply = !call->oneway;
        g->more = call->more;
        g->t0 = uv_hrtime();
        /* Without a driver no member could be judged, listed or acted on. */
        if (!srv->drv.available) {
                refuse_early(g, CUDACKPT_ERROR_DRIVER_UNAVAILABLE, "DriverUnavailable", srv->drv.reason,
                             "no usable CUDA driver");
                return;
        }
        if (c->caller.pidns.unsupported) {
                refuse_early(g, CUDACKPT_ERROR_PERMISSION_DENIED, "PermissionDenied", PIDNS_UNSUPPORTED_REASON,
                             "pid namespaces cannot be translated");
                return;
        }
        if (!admit(g, c)) {
                proto_group_request_done(&g->req);
                free(g);
                return;
        }
        conn_ref(c);
        c->busy = true;
        start_select(g);
}

int group_start_internal(struct server *srv, enum proto_method m, const struct policy_caller *caller,
                         struct proto_group_request *req, group_end_fn on_end, void *ctx)
{
        struct group *g = calloc(1, sizeof(*g));

        if (!g)
                return -ENOMEM;
        g->srv = srv;
        g->caller = caller;
        g->on_end = on_end;
        g->end_ctx = ctx;
        g->lenient = true;
        g->method = m;
        g->reply = true;
        g->req = *req;
        *req = (struct proto_group_request){ 0 };
        g->t0 = uv_hrtime();
        start_select(g);
        return 0;
}
