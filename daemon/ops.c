/* ops.c: one request's driver calls, on a worker thread, and its reply.
 *
 * The order of a request is fixed: pin the process (pidfd), check the
 * caller's start time if given, apply the policy, call the driver, and
 * confirm afterwards that the pinned process still lives.  Suspend and
 * Resume never leave a process locked by their own failure: a Suspend whose
 * checkpoint fails unlocks again; a Resume whose restore fails leaves the
 * process checkpointed, as it found it. */
#include "ops.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "cudackpt/protocol.h"
#include "sched.h"
#include "target.h"

enum ops_error ops_classify(enum ops_step step, CUresult r, bool alive, bool with_mapping)
{
        if (r == CUDA_SUCCESS)
                return alive ? OPS_OK : OPS_PROCESS_GONE;
        if (!alive)
                return OPS_PROCESS_GONE;
        switch (r) {
        case CUDA_ERROR_NOT_INITIALIZED:
                return OPS_NOT_CUDA_PROCESS;
        case CUDA_ERROR_ILLEGAL_STATE:
                return OPS_INVALID_STATE;
        case CUDA_ERROR_NOT_READY:
                return step == OPS_STEP_LOCK ? OPS_TIMEOUT : OPS_DRIVER_ERROR;
        case CUDA_ERROR_NOT_SUPPORTED:
                return OPS_NOT_SUPPORTED;
        case CUDA_ERROR_INVALID_VALUE:
                return step == OPS_STEP_RESTORE && with_mapping ? OPS_INVALID_GPU_MAPPING
                                                                : OPS_DRIVER_ERROR;
        default:
                /* CUDA_ERROR_OPERATING_SYSTEM on a live process means the driver
                 * refused for its own reasons (a daemon not run as root, say). */
                return OPS_DRIVER_ERROR;
        }
}

bool ops_judge(const struct config *cfg, const struct policy_caller *caller, enum proto_method m,
               const struct proto_request *req, const struct policy_target *owner, uint64_t start_time,
               struct ops_result *ret)
{
        if (req->has_start_time && req->start_time != start_time) {
                ret->error = OPS_PROCESS_CHANGED;
                ret->start_time = req->start_time;
                ret->actual_start_time = start_time;
                return false;
        }
        if (!policy_allowed(policy_decide(cfg, caller, owner, proto_method_read_only(m)))) {
                ret->error = OPS_PERMISSION_DENIED;
                return false;
        }
        return true;
}

static const struct {
        const char *name;
        const char *short_name;
} error_names[] = {
        [OPS_OK] = { NULL, "ok" },
        [OPS_NO_SUCH_PROCESS] = { CUDACKPT_ERROR_NO_SUCH_PROCESS, "NoSuchProcess" },
        [OPS_NOT_CUDA_PROCESS] = { CUDACKPT_ERROR_NOT_CUDA_PROCESS, "NotCudaProcess" },
        [OPS_PERMISSION_DENIED] = { CUDACKPT_ERROR_PERMISSION_DENIED, "PermissionDenied" },
        [OPS_INVALID_STATE] = { CUDACKPT_ERROR_INVALID_STATE, "InvalidState" },
        [OPS_TIMEOUT] = { CUDACKPT_ERROR_TIMEOUT, "Timeout" },
        [OPS_INVALID_GPU_MAPPING] = { CUDACKPT_ERROR_INVALID_GPU_MAPPING, "InvalidGpuMapping" },
        [OPS_NOT_SUPPORTED] = { CUDACKPT_ERROR_NOT_SUPPORTED, "NotSupported" },
        [OPS_PROCESS_GONE] = { CUDACKPT_ERROR_PROCESS_GONE, "ProcessGone" },
        [OPS_PROCESS_CHANGED] = { CUDACKPT_ERROR_PROCESS_CHANGED, "ProcessChanged" },
        [OPS_DRIVER_UNAVAILABLE] = { CUDACKPT_ERROR_DRIVER_UNAVAILABLE, "DriverUnavailable" },
        [OPS_DRIVER_ERROR] = { CUDACKPT_ERROR_DRIVER_ERROR, "DriverError" },
        [OPS_SHUTTING_DOWN] = { CUDACKPT_ERROR_SHUTTING_DOWN, "ShuttingDown" },
};

const char *ops_error_name(enum ops_error e)
{
        return error_names[e].name;
}

const char *ops_error_short_name(enum ops_error e)
{
        return error_names[e].short_name;
}

static const char *step_name(enum ops_step s)
{
        static const char *const names[] = {
                [OPS_STEP_NONE] = NULL,           [OPS_STEP_GET_STATE] = "get_state",
                [OPS_STEP_GET_RESTORE_TID] = "get_restore_thread_id",
                [OPS_STEP_LOCK] = "lock",         [OPS_STEP_CHECKPOINT] = "checkpoint",
                [OPS_STEP_RESTORE] = "restore",   [OPS_STEP_UNLOCK] = "unlock",
        };
        return names[s];
}

/* The state each successful step leaves the process in. */
static int state_after(enum ops_step s)
{
        switch (s) {
        case OPS_STEP_LOCK:
        case OPS_STEP_RESTORE:
                return CU_PROCESS_STATE_LOCKED;
        case OPS_STEP_CHECKPOINT:
                return CU_PROCESS_STATE_CHECKPOINTED;
        case OPS_STEP_UNLOCK:
                return CU_PROCESS_STATE_RUNNING;
        default:
                return -1;
        }
}

struct run {
        const struct config *cfg;
        const struct driver *d;
        struct sched_target *t;
        const struct proto_request *req;
        struct ops_result *res;
};

/* Records a driver call's outcome; true when it succeeded. */
static bool step_done(struct run *x, enum ops_step s, CUresult r)
{
        if (r == CUDA_SUCCESS) {
                int st = state_after(s);
                if (st >= 0)
                        sched_publish(x->t, NULL, st);
                return true;
        }
        x->res->step = s;
        x->res->cu = r;
        x->res->error = ops_classify(s, r, target_alive_settled(&x->t->identity, x->cfg->exit_wait_ms) == 1,
                                     x->req->n_pairs > 0);
        return false;
}

static bool do_lock(struct run *x, uint32_t timeout_ms)
{
        x->res->timeout_ms = timeout_ms;
        return step_done(x, OPS_STEP_LOCK, driver_lock(x->d, x->t->identity.pid, timeout_ms));
}

static bool do_checkpoint(struct run *x)
{
        return step_done(x, OPS_STEP_CHECKPOINT, driver_checkpoint(x->d, x->t->identity.pid));
}

static bool do_restore(struct run *x)
{
        return step_done(x, OPS_STEP_RESTORE,
                         driver_restore(x->d, x->t->identity.pid, x->req->pairs, x->req->n_pairs));
}

static bool do_unlock(struct run *x)
{
        return step_done(x, OPS_STEP_UNLOCK, driver_unlock(x->d, x->t->identity.pid));
}

/* Pins the process behind pid into t->identity (kept from an earlier
 * request while that process lives) and publishes it.  Returns whether the
 * state published before is still good (-errno on failure). */
static int pin(struct sched_target *t, pid_t pid, const struct policy_caller *caller)
{
        int r, st = -1;

        /* A kept target outlives no process: if the one pinned earlier has
         * gone, the pid now names another one, or none.  Its user ids are
         * read again each time, since a process can change them.  A thread
         * id is resolved to its process afresh every time: the thread may
         * have ended and its id now name a thread of another process, while
         * the process pinned before lives on. */
        if (t->identity.pidfd >= 0 && (t->identity.pid != pid || target_alive(&t->identity) != 1 ||
                                       target_refresh(&t->identity) < 0))
                target_close(&t->identity);
        if (t->identity.pidfd < 0) {
                /* A caller naming itself is pinned by the pidfd of the
                 * connection's peer: the very process that asks. */
                if (caller->has_pidfd && pid == caller->pid)
                        r = target_open_pidfd(pid, caller->pidfd, &t->identity);
                else
                        r = target_open(pid, &t->identity);
                if (r < 0)
                        return r;
        } else {
                /* The operation before this one in the queue left the state. */
                uv_mutex_lock(&t->lock);
                st = t->known ? t->last_state : -1;
                uv_mutex_unlock(&t->lock);
        }
        sched_publish(t, &t->identity, st);
        return st >= 0;
}

void ops_execute(const struct config *cfg, const struct driver *d, struct sched_target *t,
                 enum proto_method m, const struct proto_request *req,
                 const struct policy_caller *caller, struct ops_result *res)
{
        struct run x = { .cfg = cfg, .d = d, .t = t, .req = req, .res = res };
        uint64_t t0 = uv_hrtime();
        bool have_state = false;
        int r;

        memset(res, 0, sizeof(*res));
        res->state = -1;
        res->restore_tid = -1;
        res->rolled_back = -1;
        res->in_flight = -1;

        if (!d->available) {
                res->error = OPS_DRIVER_UNAVAILABLE;
                snprintf(res->detail, sizeof(res->detail), "%s", d->reason);
                return;
        }
        r = pin(t, req->pid, caller);
        if (r < 0) {
                res->error = r == -ESRCH ? OPS_NO_SUCH_PROCESS : OPS_PERMISSION_DENIED;
                return;
        }
        /* Locking the daemon would stop the one process that can unlock it;
         * checked on the pinned process, so a thread id of the daemon is
         * refused too. */
        if (t->identity.pid == getpid()) {
                res->error = OPS_PERMISSION_DENIED;
                return;
        }
        {
                struct policy_target owner = { t->identity.ruid, t->identity.euid, t->identity.suid };
                if (!ops_judge(cfg, caller, m, req, &owner, t->identity.start_time, res))
                        return;
        }

        /* GetState requests that arrive while this operation runs are answered
         * from the published state: learn it first (one cheap driver call). */
        if (r == 0 && m != PROTO_GET_STATE) {
                int st;
                if (driver_get_state(d, t->identity.pid, &st) == CUDA_SUCCESS)
                        sched_publish(t, NULL, st);
        }
        if (!proto_method_read_only(m))
                sched_process_enter(t->sched, t->identity.pid);
        t0 = uv_hrtime();
        switch (m) {
        case PROTO_GET_STATE:
                if (step_done(&x, OPS_STEP_GET_STATE, driver_get_state(d, t->identity.pid, &res->state)))
                        have_state = true;
                break;
        case PROTO_GET_RESTORE_THREAD_ID:
                (void)step_done(&x, OPS_STEP_GET_RESTORE_TID,
                                driver_get_restore_tid(d, t->identity.pid, &res->restore_tid));
                break;
        case PROTO_LOCK:
                (void)do_lock(&x, req->has_timeout ? req->timeout_ms : cfg->default_lock_timeout_ms);
                break;
        case PROTO_CHECKPOINT:
                (void)do_checkpoint(&x);
                break;
        case PROTO_RESTORE:
                (void)do_restore(&x);
                break;
        case PROTO_UNLOCK:
                (void)do_unlock(&x);
                break;
        case PROTO_SUSPEND:
                if (!do_lock(&x, req->has_timeout ? req->timeout_ms : cfg->default_lock_timeout_ms))
                        break;
                if (!do_checkpoint(&x)) {
                        /* Never leave the process locked by our own failure.  The
                         * failing step's result is kept; the unlock's is not. */
                        if (res->error != OPS_PROCESS_GONE) {
                                CUresult u = driver_unlock(d, t->identity.pid);
                                res->rolled_back = u == CUDA_SUCCESS;
                                if (u == CUDA_SUCCESS)
                                        sched_publish(t, NULL, CU_PROCESS_STATE_RUNNING);
                        }
                }
                break;
        case PROTO_RESUME:
                if (!do_restore(&x))
                        break; /* still checkpointed: the driver undid nothing */
                (void)do_unlock(&x);
                break;
        default:
                break;
        }
        res->duration_ns = uv_hrtime() - t0;
        if (!proto_method_read_only(m))
                sched_process_leave(t->sched, t->identity.pid);

        /* The reply reports the state the driver reports now, success or not. */
        if (!have_state && res->error != OPS_PROCESS_GONE && res->error != OPS_NOT_CUDA_PROCESS) {
                int st;
                if (driver_get_state(d, t->identity.pid, &st) == CUDA_SUCCESS) {
                        res->state = st;
                        have_state = true;
                }
        }
        if (have_state)
                sched_publish(t, NULL, res->state);
        if (res->error == OPS_OK && target_alive(&t->identity) != 1)
                res->error = OPS_PROCESS_GONE;
}

static void add_state(cJSON *p, int state)
{
        char buf[32];

        if (state >= 0)
                cJSON_AddStringToObject(p, "state", proto_state_string(state, buf, sizeof(buf)));
}

static double ms(uint64_t ns)
{
        /* Microsecond resolution is what the numbers mean; more digits are noise. */
        return round((double)ns / 1000.0) / 1000.0;
}

cJSON *ops_reply(const struct driver *d, enum proto_method m, pid_t pid, uid_t caller_uid,
                 const struct ops_result *r)
{
        cJSON *p = cJSON_CreateObject();
        char name[64];

        if (!p)
                return NULL;
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
                cJSON_AddNumberToObject(p, "pid", pid);
                cJSON_AddStringToObject(p, "method", proto_method_name(m));
                if (r->error != OPS_PROCESS_GONE)
                        add_state(p, r->state);
                if (m == PROTO_SUSPEND || m == PROTO_RESUME) {
                        if (step_name(r->step))
                                cJSON_AddStringToObject(p, "step", step_name(r->step));
                        if (r->rolled_back >= 0)
                                cJSON_AddBoolToObject(p, "rolled_back", r->rolled_back == 1);
                }
                if (r->error == OPS_TIMEOUT)
                        cJSON_AddNumberToObject(p, "timeout_ms", r->timeout_ms);
                if (r->error == OPS_INVALID_GPU_MAPPING)
                        cJSON_AddStringToObject(p, "reason", "the driver refused the GPU mapping");
                if (r->error == OPS_DRIVER_ERROR) {
                        cJSON_AddStringToObject(p, "cuda_error",
                                                driver_error_name(d, r->cu, name, sizeof(name)));
                        cJSON_AddNumberToObject(p, "cuda_error_code", (double)r->cu);
                }
                break;
        }
        return proto_error_new(ops_error_name(r->error), p);
}
