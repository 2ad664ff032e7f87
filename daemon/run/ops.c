/* ops.c: one request's driver calls, on a worker thread (its reply is
 * opsreply.c's).
 *
 * The order of a request is fixed: pin the process (pidfd), check the
 * caller's start time if given, apply the policy, call the driver, and
 * confirm afterwards that the pinned process still lives.  Suspend and
 * Resume never leave a process locked by their own failure: a Suspend whose
 * checkpoint fails unlocks again; a Resume whose restore fails leaves the
 * process checkpointed, as it found it. */
#include "run/ops.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "cudackpt/protocol.h"
#include "host/pidns.h"
#include "host/target.h"

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
        [OPS_PROCESS_STOPPED] = { CUDACKPT_ERROR_PROCESS_STOPPED, "ProcessStopped" },
        [OPS_DRIVER_UNAVAILABLE] = { CUDACKPT_ERROR_DRIVER_UNAVAILABLE, "DriverUnavailable" },
        [OPS_DRIVER_ERROR] = { CUDACKPT_ERROR_DRIVER_ERROR, "DriverError" },
        [OPS_SHUTTING_DOWN] = { CUDACKPT_ERROR_SHUTTING_DOWN, "ShuttingDown" },
        [OPS_QUEUE_FULL] = { CUDACKPT_ERROR_QUEUE_FULL, "QueueFull" },
        [OPS_INSUFFICIENT_GPU_MEMORY] = { CUDACKPT_ERROR_INSUFFICIENT_GPU_MEMORY, "InsufficientGpuMemory" },
};

const char *ops_error_name(enum ops_error e)
{
        return error_names[e].name;
}

const char *ops_error_short_name(enum ops_error e)
{
        return error_names[e].short_name;
}

struct run {
        const struct config *cfg;
        const struct driver *d;
        const struct ops_env *env;
        struct sched_target *t;
        const struct proto_request *req;
        struct ops_result *res;
        int known; /* the state as last seen, -1 unknown */
};

static void learn(struct run *x, int state)
{
        x->known = state;
        sched_target_publish(x->t, NULL, state);
}

/* Every driver call but GetRestoreThreadId waits, uncancellable, while all
 * threads of its target are stopped (driver-behaviour.md, "Stopped
 * targets").  Such a call is refused instead of made; true when step s may
 * go ahead.  A process stopped after this check still holds the worker
 * until it runs again (design.md says what answers meanwhile). */
static bool may_call(struct run *x, enum ops_step s)
{
        /* GetState is made right after the pin, whose read of the state answers;
         * a mutating call may first wait for its process's slot (procbusy),
         * so its check reads afresh. */
        int r = s == OPS_STEP_GET_STATE ? target_stopped_after_refresh(&x->t->identity)
                                        : target_stopped(&x->t->identity);

        if (r <= 0)
                return true; /* running, or gone: the call itself will say so */
        x->res->step = s;
        x->res->error = OPS_PROCESS_STOPPED;
        x->res->stopped = r;
        return false;
}

/* Records a driver call's outcome; true when it succeeded. */
static bool step_record(struct run *x, enum ops_step s, CUresult r)
{
        if (r == CUDA_SUCCESS) {
                int st = ops_state_after(s);
                if (st >= 0)
                        learn(x, st);
                return true;
        }
        x->res->step = s;
        x->res->cu = r;
        x->res->error = ops_classify(s, r, target_alive_settled(&x->t->identity, x->cfg->exit_wait_ms) == 1,
                                     x->req->n_pairs > 0);
        if (x->res->error != OPS_PROCESS_GONE && x->res->error != OPS_NOT_CUDA_PROCESS)
                learn(x, ops_state_after_failure(s, r, x->known));
        return false;
}

static bool do_lock(struct run *x, uint32_t timeout_ms)
{
        /* A group's lock phase has one deadline for all its members: what
         * is left of it when this member's turn comes. */
        if (x->req->deadline_ns) {
                uint64_t now = uv_hrtime();
                if (now >= x->req->deadline_ns) {
                        x->res->timeout_ms = timeout_ms;
                        x->res->step = OPS_STEP_LOCK;
                        x->res->cu = CUDA_ERROR_NOT_READY;
                        x->res->error = OPS_TIMEOUT;
                        learn(x, CU_PROCESS_STATE_RUNNING);
                        return false;
                }
                uint64_t left = (x->req->deadline_ns - now + 999999) / 1000000;
                if (timeout_ms == 0 || left < timeout_ms)
                        timeout_ms = (uint32_t)left;
        }
        x->res->timeout_ms = timeout_ms;
        return may_call(x, OPS_STEP_LOCK) &&
               step_record(x, OPS_STEP_LOCK, driver_lock(x->d, x->t->identity.pid, timeout_ms));
}

/* Progress (jobs/progress.h): while someone watches, a checkpoint notes the
 * process's resident memory as it begins, which the loop's sampler
 * compares with later readings, and as it ends what it moved, the next
 * checkpoint's total.  One read of the pinned status file each; nothing
 * when nobody watches. */
static void progress_begin(struct run *x)
{
        struct sched_target *t = x->t;
        uint64_t rss;

        if (!atomic_load(x->env->want_progress) || target_rss(&t->identity, &rss) < 0)
                return;
        uv_mutex_lock(&t->lock);
        if (t->ckpt_start_time != t->identity.start_time)
                t->ckpt_bytes = -1; /* measured on another process */
        t->in_checkpoint = true;
        t->rss_start = rss;
        t->total_bytes = t->ckpt_bytes;
        uv_mutex_unlock(&t->lock);
}

static void progress_end(struct run *x, bool ok)
{
        struct sched_target *t = x->t;
        uint64_t rss;
        bool measure;

        uv_mutex_lock(&t->lock);
        measure = t->in_checkpoint && ok;
        t->in_checkpoint = false;
        uv_mutex_unlock(&t->lock);
        if (!measure || target_rss(&t->identity, &rss) < 0)
                return;
        uv_mutex_lock(&t->lock);
        t->ckpt_bytes = rss > t->rss_start ? (int64_t)(rss - t->rss_start) : 0;
        t->ckpt_start_time = t->identity.start_time;
        uv_mutex_unlock(&t->lock);
}

/* What the process holds on its GPUs is taken just before its checkpoint
 * (NVML sees it no more afterwards) and kept once the checkpoint is made:
 * what its restore will need (fit.h). */
static bool do_checkpoint(struct run *x)
{
        struct fit_record rec;
        bool ok, measured;

        if (!may_call(x, OPS_STEP_CHECKPOINT))
                return false;
        measured = x->env->fit && fit_measure(x->env->fit, x->t->identity.pid, &rec) == 0 && rec.n > 0;
        progress_begin(x);
        ok = step_record(x, OPS_STEP_CHECKPOINT, driver_checkpoint(x->d, x->t->identity.pid));
        progress_end(x, ok);
        if (ok && measured) {
                rec.start_time = x->t->identity.start_time;
                rec.uid = x->t->identity.ruid;
                fit_keep(x->env->fit, &rec);
        }
        return ok;
}

/* Whether the restore may go to the driver: it fits on its GPUs, or the
 * caller said force, or its group checked it already (and holds its
 * share).  The refusal leaves the process as it was. */
static bool fits(struct run *x)
{
        struct fit_proc p = { .pid = x->t->identity.pid, .start_time = x->t->identity.start_time };

        if (!x->env->fit || x->req->force || x->req->fit_held)
                return true;
        (void)target_rss(&x->t->identity, &p.rss);
        if (fit_reserve(x->env->fit, &p, 1, x->req->pairs, x->req->n_pairs, &x->res->fit) != -ENOSPC)
                return true;
        x->res->step = OPS_STEP_RESTORE;
        x->res->error = OPS_INSUFFICIENT_GPU_MEMORY;
        return false;
}

/* A restore has no progress to show: the driver releases the process's
 * host memory at its end, not as it goes (measured on the H200). */
static bool do_restore(struct run *x)
{
        const struct target_identity *id = &x->t->identity;
        bool ok;

        if (!may_call(x, OPS_STEP_RESTORE) || !fits(x))
                return false;
        ok = step_record(x, OPS_STEP_RESTORE, driver_restore(x->d, id->pid, x->req->pairs, x->req->n_pairs));
        if (x->env->fit) {
                fit_release(x->env->fit, id->pid, id->start_time);
                if (ok)
                        fit_forget(x->env->fit, id->pid, id->start_time);
        }
        return ok;
}

static bool do_unlock(struct run *x)
{
        return may_call(x, OPS_STEP_UNLOCK) &&
               step_record(x, OPS_STEP_UNLOCK, driver_unlock(x->d, x->t->identity.pid));
}

static bool do_get_state(struct run *x)
{
        int st = -1;

        if (!may_call(x, OPS_STEP_GET_STATE) ||
            !step_record(x, OPS_STEP_GET_STATE, driver_get_state(x->d, x->t->identity.pid, &st)))
                return false;
        learn(x, st);
        return true;
}

/* A Suspend whose checkpoint failed unlocks again, unless the process has
 * gone or has been stopped since (the unlock would wait for it): then it
 * stays as the failure left it and rolled_back says false. */
static void roll_back_suspend(struct run *x)
{
        if (x->res->error == OPS_PROCESS_GONE)
                return;
        x->res->rolled_back = 0;
        if (x->res->error == OPS_PROCESS_STOPPED || target_stopped(&x->t->identity) != 0)
                return;
        if (driver_unlock(x->d, x->t->identity.pid) == CUDA_SUCCESS) {
                x->res->rolled_back = 1;
                learn(x, CU_PROCESS_STATE_RUNNING);
        }
}

/* Pins the process behind pid into t->identity (kept from an earlier
 * request while that process lives) and publishes it.  Returns the state
 * published before if it still holds, else -1 (-errno on failure). */
static int pin(struct sched_target *t, pid_t pid, const struct policy_caller *caller, int *ret_state)
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
        sched_target_publish(t, &t->identity, st);
        *ret_state = st;
        return 0;
}

/* Pins the process and judges the caller; false (with res->error set)
 * when the operation must not go ahead. */
static bool pin_and_judge(struct run *x, enum proto_method m, const struct policy_caller *caller)
{
        struct sched_target *t = x->t;
        struct ops_result *res = x->res;
        int r;

        if (!x->d->available) {
                res->error = OPS_DRIVER_UNAVAILABLE;
                snprintf(res->detail, sizeof(res->detail), "%s", x->d->reason);
                return false;
        }
        r = pin(t, x->req->pid, caller, &x->known);
        if (r < 0) {
                res->error = r == -ESRCH ? OPS_NO_SUCH_PROCESS : OPS_PERMISSION_DENIED;
                return false;
        }
        /* This operation's own process, whatever an earlier one had pinned. */
        res->pinned = true;
        res->pinned_pid = t->identity.pid;
        res->pinned_start_time = t->identity.start_time;
        res->pinned_owner = (struct policy_target){ t->identity.ruid, t->identity.euid, t->identity.suid };
        /* Locking the daemon would stop the one process that can unlock it;
         * checked on the pinned process, so a thread id of the daemon is
         * refused too. */
        if (t->identity.pid == getpid()) {
                res->error = OPS_PERMISSION_DENIED;
                return false;
        }
        struct policy_target owner = res->pinned_owner;
        return ops_judge(x->cfg, caller, m, x->req, &owner, t->identity.start_time, res);
}

/* The driver calls of method m. */
static void call_driver(struct run *x, enum proto_method m, const struct policy_caller *caller)
{
        const struct proto_request *req = x->req;
        uint32_t lock_ms = req->has_timeout ? req->timeout_ms : x->cfg->default_lock_timeout_ms;
        struct ops_result *res = x->res;

        switch (m) {
        case PROTO_GET_STATE:
                (void)do_get_state(x);
                break;
        case PROTO_GET_RESTORE_THREAD_ID:
                /* The one call that answers while the process is stopped:
                 * CRIU makes it with every thread seized. */
                /* The thread id goes back as the caller sees it; a thread
                 * that ended meanwhile cannot be named. */
                if (step_record(x, OPS_STEP_GET_RESTORE_TID,
                                driver_get_restore_tid(x->d, x->t->identity.pid, &res->restore_tid)) &&
                    pidns_to_caller(&caller->pidns, res->restore_tid, &res->restore_tid) < 0)
                        res->error = OPS_PROCESS_GONE;
                break;
        case PROTO_LOCK:
                (void)do_lock(x, lock_ms);
                break;
        case PROTO_CHECKPOINT:
                (void)do_checkpoint(x);
                break;
        case PROTO_RESTORE:
                (void)do_restore(x);
                break;
        case PROTO_UNLOCK:
                (void)do_unlock(x);
                break;
        case PROTO_SUSPEND:
                /* Never leave the process locked by our own failure.  The
                 * failing step's result is kept; the unlock's is not. */
                if (do_lock(x, lock_ms) && !do_checkpoint(x))
                        roll_back_suspend(x);
                break;
        case PROTO_RESUME:
                /* A failed restore leaves the process checkpointed: the
                 * driver undid nothing. */
                if (do_restore(x))
                        (void)do_unlock(x);
                break;
        default:
                break;
        }
}

void ops_execute(const struct ops_env *env, struct sched_target *t, enum proto_method m,
                 const struct proto_request *req, const struct policy_caller *caller, struct ops_result *res)
{
        struct run x = { .cfg = env->cfg, .d = env->drv, .env = env, .t = t, .req = req, .res = res, .known = -1 };
        uint64_t t0;

        memset(res, 0, sizeof(*res));
        res->state = -1;
        res->restore_tid = -1;
        res->rolled_back = -1;
        res->in_flight = -1;
        if (!pin_and_judge(&x, m, caller))
                return;

        /* The driver is called for what the client asked and nothing else:
         * any call can wait without end on a stopped process, so the state
         * the reply carries is the one the calls made imply (or the one
         * known before, for GetRestoreThreadId), never one asked afresh.
         * A GetState arriving while this runs is answered from what is
         * published.  With nothing known, that is the state the first step
         * works from: the driver makes progress only from it and refuses
         * at once from any other (ILLEGAL_STATE), so while the step runs
         * it is the process's state.  It is not taken as known for the
         * reply. */
        if (x.known < 0 && ops_state_before(ops_first_step(m)) >= 0)
                sched_target_publish(t, NULL, ops_state_before(ops_first_step(m)));
        if (!proto_method_read_only(m))
                procbusy_enter(env->busy, t->identity.pid);
        t0 = uv_hrtime();
        call_driver(&x, m, caller);
        res->duration_ns = uv_hrtime() - t0;
        if (!proto_method_read_only(m))
                procbusy_leave(env->busy, t->identity.pid);

        /* GetRestoreThreadId learns nothing of the state, and what the
         * daemon saw before may be stale: its reply carries none. */
        res->state = m == PROTO_GET_RESTORE_THREAD_ID ? -1 : x.known;
        if (res->error == OPS_OK && target_alive(&t->identity) != 1)
                res->error = OPS_PROCESS_GONE;
}
