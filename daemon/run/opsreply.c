/* opsreply.c: the reply to one request's operation (ops_reply(), ops.h). */
#include "run/ops.h"

#include <math.h>

#include "cudackpt/protocol.h"
#include "host/target.h"

static void add_state(cJSON *p, int state)
{
        char buf[32];

        if (state >= 0)
                cJSON_AddStringToObject(p, "state", proto_state_string(state, buf, sizeof(buf)));
}

/* InsufficientGpuMemory's GPU and amounts. */
static void add_fit(cJSON *p, const struct fit_refusal *f)
{
        cJSON_AddStringToObject(p, "gpu", f->gpu);
        cJSON_AddNumberToObject(p, "needed_bytes", (double)f->needed);
        cJSON_AddNumberToObject(p, "free_bytes", (double)f->free);
}

static double ms(uint64_t ns)
{
        /* Microsecond resolution is what the numbers mean; more digits are noise. */
        return round((double)ns / 1000.0) / 1000.0;
}

/* The parameters of a driver step's failure (or a refusal of the fit). */
static void add_failure(cJSON *p, const struct driver *d, enum proto_method m, pid_t pid, const struct ops_result *r)
{
        char name[64];

        cJSON_AddNumberToObject(p, "pid", pid);
        cJSON_AddStringToObject(p, "method", proto_method_name(m));
        if (r->error != OPS_PROCESS_GONE)
                add_state(p, r->state);
        if (r->error == OPS_INVALID_STATE && ops_state_before(r->step) >= 0)
                cJSON_AddStringToObject(p, "required_state",
                                        proto_state_string(ops_state_before(r->step), name, sizeof(name)));
        if (r->error == OPS_PROCESS_STOPPED)
                cJSON_AddStringToObject(p, "stop", target_stop_name(r->stopped));
        if (m == PROTO_SUSPEND || m == PROTO_RESUME) {
                if (ops_step_name(r->step))
                        cJSON_AddStringToObject(p, "step", ops_step_name(r->step));
                if (r->rolled_back >= 0)
                        cJSON_AddBoolToObject(p, "rolled_back", r->rolled_back == 1);
        }
        if (r->error == OPS_TIMEOUT)
                cJSON_AddNumberToObject(p, "timeout_ms", r->timeout_ms);
        if (r->error == OPS_INVALID_GPU_MAPPING)
                cJSON_AddStringToObject(p, "reason", "the driver refused the GPU mapping");
        if (r->error == OPS_INSUFFICIENT_GPU_MEMORY)
                add_fit(p, &r->fit);
        if (r->error == OPS_DRIVER_ERROR) {
                cJSON_AddStringToObject(p, "cuda_error",
                                        driver_error_name(d, r->cu, name, sizeof(name)));
                cJSON_AddNumberToObject(p, "cuda_error_code", (double)r->cu);
        }
}

cJSON *ops_reply(const struct driver *d, enum proto_method m, pid_t pid, uid_t caller_uid,
                 const struct ops_result *r)
{
        cJSON *p = cJSON_CreateObject();

        if (!p)
                return NULL;
        if (r->error == OPS_QUEUE_FULL) {
                cJSON_AddNumberToObject(p, "pid", pid);
                cJSON_AddNumberToObject(p, "limit", r->limit);
                if (r->limit_key)
                        cJSON_AddStringToObject(p, "resource", r->limit_key);
                return proto_error_new(ops_error_name(r->error), p);
        }
        if (r->error == OPS_OK) {
                cJSON_AddNumberToObject(p, "pid", pid);
                add_state(p, r->state);
                if (m == PROTO_GET_RESTORE_THREAD_ID)
                        cJSON_AddNumberToObject(p, "restore_thread_id", r->restore_tid);
                if (m == PROTO_GET_STATE && r->in_flight >= 0)
                        cJSON_AddStringToObject(p, "in_flight", proto_method_name((enum proto_method)r->in_flight));
                if (!proto_method_read_only(m))
                        cJSON_AddNumberToObject(p, "duration_ms", ms(r->duration_ns));
                return proto_reply_new(p);
        }

        switch (r->error) {
        case OPS_DRIVER_UNAVAILABLE:
                cJSON_AddStringToObject(p, "reason", r->detail);
                break;
        case OPS_SHUTTING_DOWN:
                break;
        case OPS_PERMISSION_DENIED:
                cJSON_AddNumberToObject(p, "pid", pid);
                cJSON_AddNumberToObject(p, "caller_uid", caller_uid);
                if (r->detail[0])
                        cJSON_AddStringToObject(p, "reason", r->detail);
                break;
        case OPS_NO_SUCH_PROCESS:
        case OPS_NOT_CUDA_PROCESS:
                cJSON_AddNumberToObject(p, "pid", pid);
                break;
        case OPS_PROCESS_CHANGED:
                cJSON_AddNumberToObject(p, "pid", pid);
                cJSON_AddNumberToObject(p, "start_time", (double)r->start_time);
                cJSON_AddNumberToObject(p, "actual_start_time", (double)r->actual_start_time);
                break;
        default:
                add_failure(p, d, m, pid, r);
                break;
        }
        return proto_error_new(ops_error_name(r->error), p);
}
