/* group.c: the group coordinator (group.h says how its phases flow). */
#include "jobs/group.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "net/conn.h"
#include "cudackpt/protocol.h"
#include "base/log.h"
#include "jobs/groupfit.h"
#include "jobs/grouplease.h"
#include "jobs/members.h"
#include "run/ops.h"
#include "jobs/plan.h"
#include "varlink/proto.h"
#include "run/sched.h"

struct group {
        struct jobs_call call;          /* its caller, parameters and selection */
        struct group *prev, *next;
        struct group_table *table;
        group_end_cb on_end;            /* the daemon's own groups: who takes the reply */
        void *end_ctx;
        enum plan_phase phase;
        struct members ms;              /* once selected */
        unsigned pending;               /* steps of the phase not yet done */
        unsigned done, total;           /* for progress replies */
        bool failed;
        enum plan_phase failed_phase;
        size_t failed_at;
        bool rolled_back;
        bool stopped;                   /* a step was not made: the daemon is stopping */
        uint64_t deadline_ns;
        struct groupfit fit;            /* the restore phase's check (groupfit.h) */
        cJSON *end_msg;                 /* its reply, waiting for the lease store's write */
};

static const struct config *cfg_of(const struct group *g)
{
        return g->table->jobs->cfg;
}

/* ---- replies --------------------------------------------------------------- */

static cJSON *final_reply(const struct group *g)
{
        cJSON *p = cJSON_CreateObject();

        if (!p)
                return NULL;
        if (g->failed)
                return members_failure_reply(&g->ms, g->call.method, g->failed_phase, g->rolled_back, p);
        members_add(&g->ms, p);
        cJSON_AddNumberToObject(p, "duration_ms", members_ms(uv_hrtime() - g->call.t0));
        return proto_reply_new(p);
}

static void send_progress(struct group *g, const struct group_member *mb)
{
        struct conn *c = g->call.conn;
        cJSON *p, *o;

        if (!c || !g->call.more || !g->call.reply || c->closing)
                return;
        p = cJSON_CreateObject();
        o = p ? cJSON_AddObjectToObject(p, "progress") : NULL;
        if (!o) {
                cJSON_Delete(p);
                return;
        }
        cJSON_AddStringToObject(o, "phase", plan_phase_name(g->phase));
        cJSON_AddItemToObject(o, "member", members_json(&g->ms, mb));
        cJSON_AddNumberToObject(o, "done", g->done);
        cJSON_AddNumberToObject(o, "total", g->total);
        conn_send(c, proto_reply_continues(p));
}

/* ---- lifetime -------------------------------------------------------------- */

static void start_waiting(struct group_table *t);

/* Lets member i go: its part is over (the group ends, or it left it). */
static void unhold_member(struct group *g, size_t i)
{
        sched_unhold(g->table->jobs->sched, g->ms.m[i].s.pid, g);
}

/* Answers the call with msg (consumed) and lets go of the group. */
static void group_end(struct group *g, cJSON *msg)
{
        struct group_table *t = g->table;

        g->phase = PLAN_END;
        if (!g->call.conn) {
                g->on_end(g->end_ctx, msg);
                msg = NULL;
        }
        if (g->prev)
                g->prev->next = g->next;
        else
                t->head = g->next;
        if (g->next)
                g->next->prev = g->prev;
        else
                t->tail = g->prev;
        grouplease_unadmit(&t->lease, &g->call);
        for (size_t i = 0; i < g->ms.n; i++)
                unhold_member(g, i);
        members_clear(&g->ms);
        jobs_call_end(&g->call, msg);
        free(g);
        start_waiting(t);
}

static void finish_written_cb(void *arg)
{
        struct group *g = arg;

        group_end(g, g->end_msg);
}

static void group_finish(struct group *g)
{
        unsigned n = 0;
        pid_t who = 0;
        char detail[96];
        cJSON *msg;

        for (size_t i = 0; i < g->ms.n; i++) {
                n += !g->ms.m[i].s.skipped;
                if (!who && !g->ms.m[i].s.skipped)
                        who = g->ms.m[i].s.pid;
        }
        if (g->failed)
                snprintf(detail, sizeof(detail), "%u members, failed in %s%s", n, plan_phase_name(g->failed_phase),
                         g->rolled_back ? ", rolled back" : "");
        else
                snprintf(detail, sizeof(detail), "%u members", n);
        if (g->call.conn)
                jobs_call_audit(&g->call, g->failed ? g->ms.m[g->failed_at].s.pid : who,
                                proto_method_name(g->call.method),
                                g->failed ? ops_error_short_name(g->ms.m[g->failed_at].s.err.error) : "ok", detail,
                                members_ms(uv_hrtime() - g->call.t0));
        jobs_call_count(&g->call, g->failed ? "GroupFailed" : "ok");
        /* The daemon's own group (a lease's undo) that the stop cut short
         * is left to the next start, as one that had not begun is. */
        msg = g->stopped && !g->call.conn ? proto_error_new(CUDACKPT_ERROR_SHUTTING_DOWN, NULL) : final_reply(g);
        g->end_msg = msg; /* sent once the lease store has what the group changed */
        if (!grouplease_finish(&g->table->lease, &g->call, &g->ms, !g->failed, msg, finish_written_cb, g))
                group_end(g, msg);
}

/* ---- phases ---------------------------------------------------------------- */

static void advance(struct group *g);
static void step_done_cb(struct sched *s, struct sched_op *op);

/* Whether member mb takes part in phase p. */
static bool needs(const struct group_member *mb, enum plan_phase p)
{
        return members_active(mb) && plan_needs(p, mb->state);
}

/* The step of phase p for member i, owned by the caller; NULL when out
 * of memory. */
static struct sched_op *step_new(struct group *g, size_t i, enum plan_phase p)
{
        struct group_member *mb = &g->ms.m[i];
        struct sched_op *op = calloc(1, sizeof(*op));
        enum ops_step st = plan_step(p);

        if (!op)
                return NULL;
        op->conn = g->call.conn;
        op->caller = g->call.caller;
        op->parent = g->call.method;
        op->method = plan_step_method(st);
        op->reply = true;
        op->done = step_done_cb;
        op->ctx = g;
        op->holder = g;
        op->index = (unsigned)i;
        op->req.pid = mb->s.pid;
        op->req.has_start_time = true;
        op->req.start_time = mb->s.start_time;
        if (st == OPS_STEP_LOCK) {
                op->req.has_timeout = true;
                op->req.timeout_ms = g->call.req.has_timeout ? g->call.req.timeout_ms
                                                             : cfg_of(g)->default_lock_timeout_ms;
                op->req.deadline_ns = g->deadline_ns;
        }
        if (p == PLAN_RESTORE && g->call.req.n_pairs > 0) {
                op->req.pairs = calloc(g->call.req.n_pairs, sizeof(*op->req.pairs));
                if (!op->req.pairs) {
                        free(op);
                        return NULL;
                }
                memcpy(op->req.pairs, g->call.req.pairs, g->call.req.n_pairs * sizeof(*op->req.pairs));
                op->req.n_pairs = g->call.req.n_pairs;
        }
        op->req.fit_held = p == PLAN_RESTORE && groupfit_held(&g->fit);
        op->req.force = g->call.req.force;
        return op;
}

/* Queues phase p's step of member i; a refusal of its queue is recorded
 * as the member's failure. */
static void submit(struct group *g, size_t i, enum plan_phase p)
{
        struct sched_op *op = step_new(g, i, p);
        enum proto_method m = plan_step_method(plan_step(p));
        struct ops_result r = { .error = OPS_QUEUE_FULL, .state = -1, .restore_tid = -1,
                                .rolled_back = -1, .in_flight = -1 };
        struct share_refusal limit = { 0 };

        if (op && sched_submit(g->table->jobs->sched, op, &limit) == 0) {
                g->pending++;
                return;
        }
        if (op) {
                proto_request_free(&op->req);
                free(op);
        }
        r.limit = limit.limit;
        r.limit_key = limit.key;
        if (plan_is_rollback(p))
                members_rollback_fail(&g->ms.m[i], m, &r);
        else
                members_fail(&g->ms.m[i], m, &r);
}

static void submit_all(struct group *g, enum plan_phase p)
{
        for (size_t i = 0; i < g->ms.n; i++)
                if (needs(&g->ms.m[i], p))
                        submit(g, i, p);
        if (g->pending == 0)
                advance(g);
}

/* The restore phase was checked: it goes ahead whole, or every member it
 * would restore fails untouched. */
static void fit_done_cb(struct groupfit *gf)
{
        struct group *g = (struct group *)((char *)gf - offsetof(struct group, fit));
        struct ops_result r;

        if (!groupfit_refused(gf, &r)) {
                submit_all(g, g->phase);
                return;
        }
        for (size_t i = 0; i < g->ms.n; i++)
                if (needs(&g->ms.m[i], g->phase)) {
                        r.state = g->ms.m[i].state;
                        members_fail(&g->ms.m[i], PROTO_RESTORE, &r);
                }
        advance(g);
}

static void run_phase(struct group *g, enum plan_phase p)
{
        g->phase = p;
        g->done = g->total = 0;
        for (size_t i = 0; i < g->ms.n; i++)
                g->total += needs(&g->ms.m[i], p);
        if (p == PLAN_LOCK) {
                uint32_t t = g->call.req.has_timeout ? g->call.req.timeout_ms : cfg_of(g)->default_lock_timeout_ms;
                g->deadline_ns = t ? uv_hrtime() + (uint64_t)t * 1000000u : 0;
        }
        if (groupfit_start(&g->fit, g->table->jobs->loop, g->table->jobs->sched->fit, &g->ms, p, &g->call.req,
                           fit_done_cb) == 0)
                return;
        submit_all(g, p);
}

static void record(struct group *g, struct sched_op *op)
{
        struct group_member *mb = &g->ms.m[op->index];
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
        if (g->phase == PLAN_STATE && r->error == OPS_NOT_CUDA_PROCESS &&
            (g->call.req.kind != PROTO_SELECT_PIDS || !g->call.conn)) {
                mb->s.skipped = true;
                return;
        }
        if (plan_is_rollback(g->phase)) {
                if (g->phase != PLAN_RB_STATE)
                        members_rollback_fail(mb, op->method, r);
                return;
        }
        members_fail(mb, op->method, r);
}

static void step_done_cb(struct sched *s, struct sched_op *op)
{
        struct group *g = op->ctx;
        (void)s;

        if (!proto_method_read_only(op->method))
                jobs_call_audit(&g->call, op->req.pid, proto_method_name(op->method),
                                ops_error_short_name(op->result.error), proto_method_name(g->call.method),
                                (double)op->result.duration_ns / 1e6);
        g->stopped |= op->cancelled;
        record(g, op);
        if (!members_active(&g->ms.m[op->index]))
                unhold_member(g, op->index);
        g->done++;
        if (plan_changes(g->phase))
                send_progress(g, &g->ms.m[op->index]);
        proto_request_free(&op->req);
        free(op);
        if (--g->pending == 0)
                advance(g);
}

/* The barrier of the phase is passed: the plan says what follows. */
static void advance(struct group *g)
{
        enum plan_phase next;
        size_t first;
        bool failed;

        if (g->phase == PLAN_STATE && !members_first_failed(&g->ms, &first))
                members_check_states(&g->ms, g->call.method);
        failed = !plan_is_rollback(g->phase) && members_first_failed(&g->ms, &first);
        if (failed) {
                g->failed = true;
                g->failed_phase = g->phase;
                g->failed_at = first;
        }
        if (g->phase == PLAN_RB_UNLOCK)
                g->rolled_back = members_all_running(&g->ms);
        if (g->phase == PLAN_RESTORE)
                groupfit_end(&g->fit);
        next = plan_after(g->call.method, g->phase, failed);
        if (next == PLAN_END)
                group_finish(g);
        else
                run_phase(g, next);
}

/* ---- waiting for one another ----------------------------------------------- */

/* Whether an earlier group holds g back: one still selecting (its members
 * are not known yet) or one sharing a member. */
static bool held_back(const struct group *g)
{
        for (const struct group *e = g->prev; e; e = e->prev)
                if (e->phase == PLAN_SELECT || members_overlap(&e->ms, &g->ms))
                        return true;
        return false;
}

static void intend_written_cb(void *arg)
{
        run_phase(arg, PLAN_STATE);
}

static void start_waiting(struct group_table *t)
{
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
                                members_hold(&g->ms, g->table->jobs->sched, g, g->call.method);
                                g->phase = PLAN_STATE; /* no step before its pending lease is on disk */
                                if (!grouplease_intend(&t->lease, &g->call, &g->ms, intend_written_cb, g))
                                        run_phase(g, PLAN_STATE);
                                t->again = true; /* the list may have changed */
                                break;
                        }
        } while (t->again);
        t->starting = false;
}

/* ---- select ---------------------------------------------------------------- */

static void selected_cb(struct select_job *j)
{
        struct group *g = (struct group *)((char *)j - offsetof(struct group, call.sel));
        const struct jobs *js = g->table->jobs;
        size_t acting = 0, first;

        if (j->error < 0 && !(j->error == -ESRCH && j->n == 1)) {
                group_end(g, jobs_call_selection_error(&g->call, js->cfg->max_group_members));
                return;
        }
        if (members_take(&g->ms, j) < 0) {
                if (g->call.conn)
                        conn_close(g->call.conn);
                group_end(g, NULL);
                return;
        }
        if (j->error == 0 && jobs_stopping(js)) {
                jobs_call_count(&g->call, "ShuttingDown");
                group_end(g, proto_error_new(CUDACKPT_ERROR_SHUTTING_DOWN, NULL));
                return;
        }
        if (members_first_failed(&g->ms, &first)) {
                g->failed = true;
                g->failed_phase = PLAN_SELECT;
                g->failed_at = first;
                group_finish(g);
                return;
        }
        for (size_t i = 0; i < g->ms.n; i++)
                acting += members_active(&g->ms.m[i]);
        if (acting > js->cfg->max_group_members) {
                jobs_call_audit(&g->call, 0, proto_method_name(g->call.method), "GroupTooLarge", NULL, 0);
                jobs_call_count(&g->call, "GroupTooLarge");
                group_end(g, select_too_large(js->cfg->max_group_members, acting));
                return;
        }
        g->phase = PLAN_WAIT;
        start_waiting(g->table); /* g, and any that waited for g's selection */
}

/* Puts g at the end of the table and starts its selection. */
static void start_select(struct group *g)
{
        struct group_table *t = g->table;

        g->phase = PLAN_SELECT;
        g->prev = t->tail;
        if (t->tail)
                t->tail->next = g;
        else
                t->head = g;
        t->tail = g;
        g->ms.drv = t->jobs->drv;
        g->ms.caller = g->call.caller;
        jobs_call_start(&g->call, SELECT_TO_ACT, selected_cb);
}

/* ---- calls ----------------------------------------------------------------- */

void group_init(struct group_table *t, struct jobs *js, const struct group_lease_hooks *lease)
{
        *t = (struct group_table){ .jobs = js, .lease = *lease };
}

void group_call(struct group_table *t, struct conn *c, struct proto_call *call)
{
        struct group *g = calloc(1, sizeof(*g));

        if (!g) {
                conn_close(c);
                return;
        }
        if (jobs_call_open(t->jobs, &g->call, c, call) < 0 || !grouplease_admit(&t->lease, &g->call)) {
                free(g);
                return;
        }
        g->table = t;
        start_select(g);
}

int group_start_internal(struct group_table *t, enum proto_method m, const struct policy_caller *caller,
                         struct proto_group_request *req, group_end_cb on_end, void *ctx)
{
        struct group *g = calloc(1, sizeof(*g));

        if (!g)
                return -ENOMEM;
        jobs_call_open_internal(t->jobs, &g->call, m, caller, req);
        g->table = t;
        g->on_end = on_end;
        g->end_ctx = ctx;
        start_select(g);
        return 0;
}
