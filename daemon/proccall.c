/* proccall.c: a call on one process, from the call to a queued operation
 * and from its result to the reply (proccall.h). */
#include "proccall.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/conn.h"
#include "cudackpt/protocol.h"
#include "jobs/lease.h"
#include "base/log.h"
#include "base/metrics.h"
#include "run/ops.h"
#include "host/pidns.h"
#include "varlink/proto.h"

static cJSON *simple_error(const char *name, pid_t pid, const char *method)
{
        cJSON *p = cJSON_CreateObject();

        if (p && pid > 0)
                cJSON_AddNumberToObject(p, "pid", pid);
        if (p && method)
                cJSON_AddStringToObject(p, "method", method);
        return proto_error_new(name, p);
}

/* Audits and counts a call answered before it reached a worker. */
static void audit(const struct conn *c, enum proto_method m, pid_t pid, const char *result,
                  const char *detail, double duration_ms);

static void audit_early(struct proccall *pc, struct conn *c, enum proto_method m, pid_t pid, const char *result,
                        const char *detail)
{
        audit(c, m, pid, result, detail, 0);
        metrics_op(pc->metrics, m, result, 0);
}

static void audit(const struct conn *c, enum proto_method m, pid_t pid, const char *result,
                  const char *detail, double duration_ms)
{
        struct log_audit a = {
                .caller_uid = (unsigned)c->caller.uid,
                .caller_pid = (int)c->caller.pid,
                .target_pid = (int)pid,
                .method = proto_method_name(m),
                .result = result,
                .detail = detail,
                .duration_ms = duration_ms,
        };
        log_audit(&a);
}

/* While an operation on a process runs, what it has learnt of the process
 * (owner, start time) decides refusals at once, for every method: a caller
 * with no rights to a process cannot fill its queue.  True when the call was
 * answered. */
static bool refuse_now(struct proccall *pc, struct conn *c, const struct proto_call *call,
                       const struct proto_request *req, const struct sched_snapshot *snap)
{
        struct ops_result r = { .state = -1, .restore_tid = -1, .rolled_back = -1, .in_flight = -1 };

        if (ops_judge(pc->cfg, &c->caller, call->method, req, &snap->owner, snap->start_time, &r))
                return false;
        audit_early(pc, c, call->method, req->pid, ops_error_short_name(r.error), NULL);
        conn_reply(c, call, ops_reply(pc->drv, call->method, req->caller_pid, c->caller.uid, &r));
        return true;
}

/* GetState while an operation on the same process runs: answer from what the
 * running operation has learnt, without the driver.  False when the answer
 * must wait for the driver after all. */
static bool answer_state_now(struct proccall *pc, struct conn *c, const struct proto_call *call,
                             const struct proto_request *req)
{
        struct sched_snapshot snap;
        struct ops_result r;

        if (!sched_running_snapshot(pc->sched, req->pid, &snap) || !snap.known ||
            snap.last_state < 0)
                return false;
        if (refuse_now(pc, c, call, req, &snap))
                return true;
        r = (struct ops_result){ .error = OPS_OK, .state = snap.last_state, .restore_tid = -1,
                                 .rolled_back = -1, .in_flight = (int)snap.running };
        metrics_op(pc->metrics, call->method, "ok", 0);
        conn_reply(c, call, ops_reply(pc->drv, call->method, req->caller_pid, c->caller.uid, &r));
        return true;
}

/* The caller's pid into the daemon's (pidns.h).  A pid the caller cannot
 * see is answered as one that does not exist.  True when req may go on. */
static bool translate_pid(struct proccall *pc, struct conn *c, const struct proto_call *call, struct proto_request *req)
{
        struct ops_result r = { .state = -1, .restore_tid = -1, .rolled_back = -1, .in_flight = -1 };
        char why[64];
        int k = pidns_to_daemon(&c->caller.pidns, req->caller_pid, &req->pid);

        if (k == 0)
                return true;
        if (k == -EOPNOTSUPP) {
                r.error = OPS_PERMISSION_DENIED;
                snprintf(r.detail, sizeof(r.detail), "%s", PIDNS_UNSUPPORTED_REASON);
                snprintf(why, sizeof(why), "pid namespaces cannot be translated");
        } else {
                r.error = OPS_NO_SUCH_PROCESS;
                snprintf(why, sizeof(why), "pid %d not in the caller's pid namespace", (int)req->caller_pid);
        }
        audit_early(pc, c, call->method, 0, ops_error_short_name(r.error), why);
        conn_reply(c, call, ops_reply(pc->drv, call->method, req->caller_pid, c->caller.uid, &r));
        return false;
}

/* Every new GPU of a mapping must be one this machine has.  The old ones
 * may come from another machine and are not looked up. */
static cJSON *check_mapping(const struct driver *d, const struct proto_call *call,
                            const struct proto_request *req)
{
        const CUuuid *unknown = driver_unknown_new_gpu(d, req->pairs, req->n_pairs);

        return unknown ? proto_unknown_gpu(req->caller_pid, call->method, unknown) : NULL;
}

/* QueueFull for a limit of the shares (share.h); pid 0 for none. */
static cJSON *queue_full(pid_t pid, const struct share_refusal *why)
{
        cJSON *p = cJSON_CreateObject();

        if (p) {
                if (pid > 0)
                        cJSON_AddNumberToObject(p, "pid", pid);
                cJSON_AddNumberToObject(p, "limit", why->limit);
                if (why->key)
                        cJSON_AddStringToObject(p, "resource", why->key);
        }
        return proto_error_new(CUDACKPT_ERROR_QUEUE_FULL, p);
}

/* What is answered without a worker: a GetState from what a running
 * operation has learnt, a refusal from it, an unknown GPU of a mapping.
 * True when the call was answered. */
static bool answered_before_queue(struct proccall *pc, struct conn *c, const struct proto_call *call,
                                  const struct proto_request *req)
{
        struct sched_snapshot snap;
        cJSON *err;

        if (call->method == PROTO_GET_STATE) {
                if (answer_state_now(pc, c, call, req))
                        return true;
        } else if (sched_running_snapshot(pc->sched, req->pid, &snap) && snap.known &&
                   refuse_now(pc, c, call, req, &snap)) {
                return true;
        }
        if (req->n_pairs > 0 && pc->drv->available) {
                err = check_mapping(pc->drv, call, req);
                if (err) {
                        audit_early(pc, c, call->method, req->pid, "InvalidGpuMapping", "unknown new GPU");
                        conn_reply(c, call, err);
                        return true;
                }
        }
        return false;
}

/* Writes the pending lease of req (lease_intend_pid()), deferred to the
 * loop turn's write (lease_defer_begin(): the caller ends it), unless the
 * caller may not act on its process: then the call is refused as the
 * worker would refuse it, and audited.  True when the call was answered. */
static bool refused_lease(struct proccall *pc, struct conn *c, const struct proto_call *call,
                          struct proto_request *req)
{
        struct ops_result r = { .state = -1, .restore_tid = -1, .rolled_back = -1, .in_flight = -1 };

        lease_defer_begin(pc->leases);
        if (lease_intend_pid(pc->leases, &c->caller, call->method, req, &r) != -EACCES)
                return false;
        (void)lease_defer_end(pc->leases, NULL); /* nothing written */
        audit_early(pc, c, call->method, req->pid, ops_error_short_name(r.error), NULL);
        conn_reply(c, call, ops_reply(pc->drv, call->method, req->caller_pid, c->caller.uid, &r));
        return true;
}

/* A leased call waiting for the store's write (lease_defer_end()): to
 * take its first driver step, or to send its reply. */
struct written_wait {
        struct lease_wait w; /* first: the callback's argument is this */
        struct proccall *pc;
        struct sched_op *op;
        cJSON *msg;
};

/* The end of a call that was queued: its reply (msg, or a closed
 * connection for NULL), and what it held. */
static void finish(struct proccall *pc, struct sched_op *op, cJSON *msg)
{
        struct conn *c = op->conn;

        if (op->req.lease.admitted)
                lease_unadmit(pc->leases, op->caller, &op->req.lease);
        if (op->reply && !c->closing)
                conn_send(c, msg);
        else
                cJSON_Delete(msg);
        proto_request_free(&op->req);
        free(op);
        conn_request_done(c);
        conn_unref(c);
        life_release(pc->life);
}

static void submit_written_cb(struct lease_wait *w)
{
        struct written_wait *ww = (struct written_wait *)w;
        struct proccall *pc = ww->pc;
        struct sched_op *op = ww->op;
        struct share_refusal limit = { 0 };
        int r;

        free(ww);
        r = sched_submit(pc->sched, op, &limit);
        if (r == 0)
                return;
        audit_early(pc, op->conn, op->method, op->req.pid, "QueueFull", limit.key);
        finish(pc, op, r == -EAGAIN ? queue_full(op->req.caller_pid, &limit) : NULL);
}

/* Ends lease_defer_begin(): when the loop turn's write is still to come,
 * the call waits for it (then cb goes on with op and msg) and true comes
 * back.  Out of memory, the write is made now, for this call alone. */
static bool wait_for_write(struct proccall *pc, struct sched_op *op, cJSON *msg,
                           void (*cb)(struct lease_wait *w))
{
        struct written_wait *ww = calloc(1, sizeof(*ww));

        if (!ww) {
                if (lease_defer_end(pc->leases, NULL))
                        lease_persist_now(pc->leases);
                return false;
        }
        *ww = (struct written_wait){ .w.cb = cb, .pc = pc, .op = op, .msg = msg };
        if (lease_defer_end(pc->leases, &ww->w))
                return true;
        free(ww);
        return false;
}

/* The pending lease's write, coalesced with the loop turn's others, before
 * op may reach a worker.  True when op waits for it (counted as queued). */
static bool submit_when_written(struct proccall *pc, struct sched_op *op)
{
        return wait_for_write(pc, op, NULL, submit_written_cb);
}

/* A new operation for call of c, on req (taken over once it is queued);
 * NULL when out of memory. */
static struct sched_op *new_op(struct proccall *pc, struct conn *c, const struct proto_call *call,
                               const struct proto_request *req)
{
        struct sched_op *op = calloc(1, sizeof(*op));

        if (!op)
                return NULL;
        op->conn = c;
        op->done = proccall_op_done_cb;
        op->ctx = pc;
        op->caller = &c->caller;
        op->method = call->method;
        op->req = *req;
        op->reply = !call->oneway;
        return op;
}

/* Queues op (or has it wait for a running one, or for the store's write):
 * true then.  False when the call was answered or refused now: op is
 * freed, and *req has its lease back, for the caller to give back. */
static bool enqueue(struct proccall *pc, struct conn *c, struct proto_call *call, struct sched_op *op,
                    struct proto_request *req)
{
        struct share_refusal limit = { 0 };
        int r;

        if (call->method == PROTO_GET_STATE) {
                /* An op is running but has not learnt the state yet: wait for it
                 * rather than for the whole operation. */
                r = sched_wait_state(pc->sched, op);
                if (r == 0)
                        return true;
                if (r == -EALREADY && answer_state_now(pc, c, call, req))
                        goto refused;
        }
        /* On disk before the worker may call the driver (lease.h), and only
         * for a process the caller may act on: refused now otherwise. */
        if (op->req.lease.admitted) {
                if (refused_lease(pc, c, call, &op->req))
                        goto refused;
                if (submit_when_written(pc, op))
                        return true;
        }
        r = sched_submit(pc->sched, op, &limit);
        if (r == 0)
                return true;
        audit_early(pc, c, call->method, req->pid, "QueueFull", limit.key);
        conn_reply(c, call, r == -EAGAIN ? queue_full(req->caller_pid, &limit) : NULL);
refused:
        req->lease = op->req.lease;
        free(op);
        return false;
}

void proccall_call(struct proccall *pc, struct conn *c, struct proto_call *call)
{
        struct proto_request req;
        struct sched_op *op;
        cJSON *err = NULL;
        struct share_refusal limit = { 0 };

        if (proto_parse_request(call, pc->cfg->max_gpu_pairs, &req, &err) < 0) {
                /* Parameter errors are not refusals: not audited. */
                conn_reply(c, call, err);
                return;
        }
        if (life_stopping(pc->life)) {
                conn_reply(c, call, proto_error_new(CUDACKPT_ERROR_SHUTTING_DOWN, NULL));
                goto out;
        }
        if (!translate_pid(pc, c, call, &req) || answered_before_queue(pc, c, call, &req))
                goto out;
        if (req.lease.wanted) {
                if (!lease_admit(pc->leases, &c->caller, &limit)) {
                        audit_early(pc, c, call->method, req.pid, "QueueFull", limit.key);
                        conn_reply(c, call, queue_full(req.caller_pid, &limit));
                        goto out;
                }
                req.lease.admitted = true;
        }
        op = new_op(pc, c, call, &req);
        if (!op) {
                conn_close(c);
                goto out;
        }
        if (!enqueue(pc, c, call, op, &req))
                goto out;
        conn_ref(c);
        life_hold(pc->life); /* until proccall_op_done_cb */
        conn_request_begin(c);
        return; /* req now belongs to op */
out:
        if (req.lease.admitted)
                lease_unadmit(pc->leases, &c->caller, &req.lease);
        proto_request_free(&req);
}

static void grant_lease(struct proccall *pc, struct conn *c, struct sched_op *op, cJSON *msg)
{
        const struct ops_result *r = &op->result;
        struct lease_member m = { .pid = r->pinned_pid, .vpid = op->req.caller_pid,
                                  .start_time = r->pinned_start_time, .owner = r->pinned_owner };

        if (r->pinned) /* a success pinned it */
                lease_grant(pc->leases, c, op->method, &op->req.lease, &m, 1, msg);
}

static void reply_written_cb(struct lease_wait *w)
{
        struct written_wait *ww = (struct written_wait *)w;
        struct proccall *pc = ww->pc;
        struct sched_op *op = ww->op;
        cJSON *msg = ww->msg;

        free(ww);
        finish(pc, op, msg);
}

void proccall_op_done_cb(struct sched *s, struct sched_op *op)
{
        struct proccall *pc = op->ctx;
        struct conn *c = op->conn;
        const struct ops_result *r = &op->result;
        bool refused = r->error == OPS_PERMISSION_DENIED || r->error == OPS_PROCESS_CHANGED;
        cJSON *msg;

        if (op->started_ns)
                log_debug("%s(%d): %.1f us to a worker, %.1f us there (driver %.1f us), %.1f us back",
                          proto_method_name(op->method), (int)op->req.pid,
                          (double)(op->started_ns - op->queued_ns) / 1e3,
                          (double)(op->finished_ns - op->started_ns) / 1e3, (double)r->duration_ns / 1e3,
                          (double)(uv_hrtime() - op->finished_ns) / 1e3);
        if (!proto_method_read_only(op->method) || refused)
                audit(c, op->method, op->req.pid, ops_error_short_name(r->error),
                      c->closing ? "client gone" : c->read_eof ? "client hung up" : NULL,
                      (double)r->duration_ns / 1e6);
        metrics_op(pc->metrics, op->method, op->cancelled ? "ShuttingDown" : ops_error_short_name(r->error),
                   uv_hrtime() - op->queued_ns);
        msg = op->cancelled ? simple_error(CUDACKPT_ERROR_SHUTTING_DOWN, 0, NULL)
                            : ops_reply(s->drv, op->method, op->req.caller_pid, c->caller.uid, r);
        if (op->req.lease.admitted) {
                /* A lease is granted whether or not its client is still
                 * there; the reply goes once the store has it. */
                lease_defer_begin(pc->leases);
                if (r->error == OPS_OK && op->req.lease.wanted && !op->cancelled)
                        grant_lease(pc, c, op, msg);
                lease_unadmit(pc->leases, op->caller, &op->req.lease);
                op->req.lease.admitted = false;
                if (wait_for_write(pc, op, msg, reply_written_cb))
                        return;
        } else if (!proto_method_read_only(op->method)) {
                /* Its end may have ended a lease (lease_op_finished(), run
                 * before this): the reply goes once the store has it. */
                lease_defer_begin(pc->leases);
                if (wait_for_write(pc, op, msg, reply_written_cb))
                        return;
        }
        finish(pc, op, msg);
}
