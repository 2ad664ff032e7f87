/* ops.h: one operation on one process: what a worker thread does for one
 * request.
 *
 * ops_execute() pins the target, applies the policy, makes the driver calls
 * of the method (two for Suspend and Resume, with the rollback rules), and
 * classifies the outcome into an error of the protocol.  It runs on a
 * worker thread and touches only the target it was given (publishing what
 * it learns there, schedtarget.h) and, around a mutating method's driver
 * calls, the busy table of its environment (procbusy.h).  It knows nothing
 * of queues: sched.h, above it, calls it.
 * ops_reply() turns the outcome into the Varlink reply, on the loop thread. */
#ifndef CUDACKPT_OPS_H
#define CUDACKPT_OPS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "cuda-api.h"

#include "base/config.h"
#include "run/driver.h"
#include "run/fit.h"
#include "run/opstep.h"
#include "auth/policy.h"
#include "run/procbusy.h"
#include "varlink/proto.h"
#include "run/schedtarget.h"

enum ops_error {
        OPS_OK,
        OPS_NO_SUCH_PROCESS,
        OPS_NOT_CUDA_PROCESS,
        OPS_PERMISSION_DENIED,
        OPS_INVALID_STATE,
        OPS_TIMEOUT,
        OPS_INVALID_GPU_MAPPING,
        OPS_NOT_SUPPORTED,
        OPS_PROCESS_GONE,
        OPS_PROCESS_CHANGED,
        OPS_PROCESS_STOPPED,
        OPS_DRIVER_UNAVAILABLE,
        OPS_DRIVER_ERROR,
        OPS_SHUTTING_DOWN,
        OPS_QUEUE_FULL,         /* a group member's step found its queue full */
        OPS_INSUFFICIENT_GPU_MEMORY, /* the restore would not fit (fit.h) */
};

struct ops_result {
        enum ops_error error;
        enum ops_step step;     /* the failing driver call */
        CUresult cu;            /* its result */
        int state;              /* the state after the operation as far as it is
                                 * known without another driver call, -1 unknown */
        int stopped;            /* ProcessStopped: TARGET_STOPPED_* */
        int restore_tid;        /* GetRestoreThreadId */
        int in_flight;          /* GetState answered while this method ran, -1 none */
        int rolled_back;        /* Suspend: -1 not applicable, 0 no, 1 yes */
        uint32_t timeout_ms;    /* the lock timeout that applied */
        unsigned limit;         /* QueueFull: the limit reached */
        const char *limit_key;  /* QueueFull: its configuration key (static) */
        uint64_t start_time;        /* ProcessChanged: what the caller said */
        uint64_t actual_start_time; /* ProcessChanged: what the process has */
        uint64_t duration_ns;   /* time spent in driver calls */
        bool pinned;            /* the process was pinned: the three below are its */
        pid_t pinned_pid;       /* the process (a thread id's process) */
        uint64_t pinned_start_time;
        struct policy_target pinned_owner;
        char detail[512];       /* DriverUnavailable reason */
        struct fit_refusal fit; /* InsufficientGpuMemory: where and how much */
};

/* What an operation works with besides its target (all owned by the
 * caller, shared by every worker). */
struct ops_env {
        const struct config *cfg;
        const struct driver *drv;
        struct procbusy *busy;            /* mutating methods enter their process here */
        const atomic_bool *want_progress; /* someone watches: checkpoints note progress */
        struct fit *fit;                  /* restores are checked, checkpoints recorded (fit.h) */
};

void ops_execute(const struct ops_env *env, struct sched_target *t, enum proto_method m,
                 const struct proto_request *req, const struct policy_caller *caller, struct ops_result *ret);

/* The error a failed driver call means, given whether the process still
 * lives and whether a GPU mapping was passed.  Pure, for the unit tests. */
enum ops_error ops_classify(enum ops_step step, CUresult r, bool alive, bool with_mapping);

/* Whether caller may call m on the process with this owner and start time
 * (the caller's start_time pin, then the policy).  On a refusal, sets
 * ret->error (and the start times of ProcessChanged) and leaves the rest of
 * *ret alone.  The one judgement for the worker, for GetStates answered from
 * a running operation and for refusals made before queueing. */
bool ops_judge(const struct config *cfg, const struct policy_caller *caller, enum proto_method m,
               const struct proto_request *req, const struct policy_target *owner, uint64_t start_time,
               struct ops_result *ret);

const char *ops_error_name(enum ops_error e);       /* full Varlink name, NULL for OK */
const char *ops_error_short_name(enum ops_error e); /* "InvalidState", "ok" */

cJSON *ops_reply(const struct driver *d, enum proto_method m, pid_t pid, uid_t caller_uid,
                 const struct ops_result *r);

#endif
