/* jobs.c: what group operations and ListProcesses share (jobs.h). */
#include "jobs/jobs.h"

#include <errno.h>
#include <stdlib.h>

#include "auth/access.h"
#include "net/conn.h"
#include "cudackpt/protocol.h"
#include "base/log.h"
#include "host/pidns.h"
#include "run/driver.h"

void jobs_init(struct jobs *js, uv_loop_t *loop, const struct config *cfg, const struct driver *drv,
               struct sched *sched, struct metrics *metrics, struct select_source *source, struct life *life)
{
        static const char *const keys[] = { "max_groups_in_flight", "max_groups_per_uid", "max_groups_reserved" };

        *js = (struct jobs){ .loop = loop, .cfg = cfg, .drv = drv, .sched = sched, .metrics = metrics,
                             .source = source, .life = life };
        share_init(&js->slots, keys, cfg->max_groups_in_flight, cfg->max_groups_per_uid, cfg->max_groups_reserved);
}

void jobs_free(struct jobs *js)
{
        share_free(&js->slots);
}

bool jobs_stopping(const struct jobs *js)
{
        return life_stopping(js->life);
}

void jobs_call_audit(const struct jobs_call *jc, pid_t pid, const char *method, const char *result,
                     const char *detail, double ms)
{
        struct log_audit a = {
                .caller_uid = (unsigned)jc->caller->uid,
                .caller_pid = (int)jc->caller->pid,
                .target_pid = (int)pid,
                .method = method,
                .result = result,
                .detail = detail,
                .duration_ms = ms,
        };
        log_audit(&a);
}

void jobs_call_count(const struct jobs_call *jc, const char *result)
{
        if (jc->conn)
                metrics_op(jc->jobs->metrics, jc->method, result, uv_hrtime() - jc->t0);
}

void jobs_call_refuse(struct jobs_call *jc, cJSON *msg)
{
        if (jc->reply)
                conn_send(jc->conn, msg);
        else
                cJSON_Delete(msg);
        proto_group_request_free(&jc->req);
}

/* A call refused before it starts, with an error whose only parameter is
 * reason (result: its short name, a static string; detail: for the audit
 * record). */
static void refuse_early(struct jobs_call *jc, const char *error, const char *result, const char *reason,
                         const char *detail)
{
        cJSON *p = jc->reply ? cJSON_CreateObject() : NULL;

        if (p)
                cJSON_AddStringToObject(p, "reason", reason);
        jobs_call_count(jc, result);
        jobs_call_audit(jc, 0, proto_method_name(jc->method), result, detail, 0);
        jobs_call_refuse(jc, jc->reply ? proto_error_new(error, p) : NULL);
}

int jobs_call_open(struct jobs *js, struct jobs_call *jc, struct conn *c, const struct proto_call *call)
{
        const CUuuid *unknown;
        cJSON *err = NULL;

        if (proto_parse_group(call, js->cfg->max_gpu_pairs, js->cfg->max_group_members, &jc->req, &err) < 0) {
                if (!call->oneway)
                        conn_send(c, err);
                else
                        cJSON_Delete(err);
                return -EINVAL;
        }
        jc->jobs = js;
        jc->conn = c;
        jc->caller = &c->caller;
        jc->method = call->method;
        jc->reply = !call->oneway;
        jc->more = call->more;
        jc->t0 = uv_hrtime();
        /* Without a driver no member could be judged, listed or acted on. */
        if (!js->drv->available) {
                refuse_early(jc, CUDACKPT_ERROR_DRIVER_UNAVAILABLE, "DriverUnavailable", js->drv->reason,
                             "no usable CUDA driver");
                return -ENODEV;
        }
        if (c->caller.pidns.unsupported) {
                refuse_early(jc, CUDACKPT_ERROR_PERMISSION_DENIED, "PermissionDenied", PIDNS_UNSUPPORTED_REASON,
                             "pid namespaces cannot be translated");
                return -EPERM;
        }
        /* Every new GPU of a group's mapping must be one this machine has,
         * as for a single Restore (proccall.c): checked before any member
         * is selected, with the UUID named, rather than refused by the
         * driver for each member after the group is under way. */
        unknown = driver_unknown_new_gpu(js->drv, jc->req.pairs, jc->req.n_pairs);
        if (unknown) {
                jobs_call_count(jc, "InvalidGpuMapping");
                jobs_call_audit(jc, 0, proto_method_name(jc->method), "InvalidGpuMapping", "unknown new GPU", 0);
                jobs_call_refuse(jc, jc->reply ? proto_unknown_gpu(0, jc->method, unknown) : NULL);
                return -EINVAL;
        }
        if (jobs_stopping(js)) {
                jobs_call_refuse(jc, proto_error_new(CUDACKPT_ERROR_SHUTTING_DOWN, NULL));
                return -ESHUTDOWN;
        }
        return 0;
}

void jobs_call_open_internal(struct jobs *js, struct jobs_call *jc, enum proto_method m,
                             const struct policy_caller *caller, struct proto_group_request *req)
{
        jc->jobs = js;
        jc->caller = caller;
        jc->method = m;
        jc->reply = true;
        jc->req = *req;
        *req = (struct proto_group_request){ 0 };
        jc->t0 = uv_hrtime();
}

int jobs_call_take_slot(struct jobs_call *jc, struct share_refusal *ret)
{
        struct jobs *js = jc->jobs;

        if (share_take(&js->slots, jc->caller->uid, access_privileged(js->cfg, jc->caller), ret) < 0)
                return -EAGAIN;
        jc->holds_slot = true;
        return 0;
}

cJSON *jobs_call_queue_full(const struct jobs_call *jc, const struct share_refusal *why)
{
        cJSON *p = cJSON_CreateObject();

        if (p) {
                cJSON_AddNumberToObject(p, "limit", why->limit);
                if (why->key)
                        cJSON_AddStringToObject(p, "resource", why->key);
        }
        jobs_call_audit(jc, 0, proto_method_name(jc->method), "QueueFull", why->key, 0);
        jobs_call_count(jc, "QueueFull");
        return proto_error_new(CUDACKPT_ERROR_QUEUE_FULL, p);
}

void jobs_call_start(struct jobs_call *jc, enum select_purpose purpose, void (*done_cb)(struct select_job *j))
{
        struct jobs *js = jc->jobs;

        js->n++;
        life_hold(js->life);
        if (jc->conn) {
                conn_ref(jc->conn);
                conn_request_begin(jc->conn);
        }
        jc->sel = (struct select_job){ .loop = js->loop, .cfg = js->cfg, .source = js->source, .caller = jc->caller,
                                       .req = &jc->req, .method = jc->method, .purpose = purpose,
                                       .lenient = !jc->conn, .done_cb = done_cb };
        select_start(&jc->sel);
}

cJSON *jobs_call_selection_error(struct jobs_call *jc, unsigned max_members)
{
        const char *result, *detail;
        cJSON *msg = select_error_reply(&jc->sel, max_members, &result, &detail);

        if (!msg) {
                if (jc->conn)
                        conn_close(jc->conn);
                return NULL;
        }
        if (detail)
                jobs_call_audit(jc, 0, proto_method_name(jc->method), result, detail, 0);
        jobs_call_count(jc, result);
        return msg;
}

void jobs_call_end(struct jobs_call *jc, cJSON *msg)
{
        struct jobs *js = jc->jobs;
        struct conn *c = jc->conn;

        if (c && jc->reply && !c->closing)
                conn_send(c, msg);
        else
                cJSON_Delete(msg);
        js->n--;
        if (jc->holds_slot)
                share_give(&js->slots, jc->caller->uid, access_privileged(js->cfg, jc->caller));
        select_job_clear(&jc->sel);
        proto_group_request_free(&jc->req);
        if (c) {
                conn_request_done(c);
                conn_unref(c);
        }
        life_release(js->life);
}
