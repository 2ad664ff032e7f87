/* opstep.c: the checkpoint state machine of the driver calls (see opstep.h). */
#include "run/opstep.h"

const char *ops_step_name(enum ops_step s)
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
int ops_state_after(enum ops_step s)
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

/* The state a step needs, which an ILLEGAL_STATE says the process is not in. */
int ops_state_before(enum ops_step s)
{
        switch (s) {
        case OPS_STEP_LOCK:
                return CU_PROCESS_STATE_RUNNING;
        case OPS_STEP_CHECKPOINT:
        case OPS_STEP_UNLOCK:
                return CU_PROCESS_STATE_LOCKED;
        case OPS_STEP_RESTORE:
                return CU_PROCESS_STATE_CHECKPOINTED;
        default:
                return -1;
        }
}

/* The state a failed step leaves, as far as its result says it without
 * asking the driver again (driver-behaviour.md): a lock that timed out
 * leaves the process running, a checkpoint the driver cannot do leaves it
 * locked, a refused mapping leaves it checkpointed.  An ILLEGAL_STATE
 * changes nothing, so the state known before still holds unless it is the
 * one the step needed (then what we knew was stale).  Anything else: not
 * known. */
int ops_state_after_failure(enum ops_step s, CUresult r, int known)
{
        switch (r) {
        case CUDA_ERROR_NOT_READY:
                return s == OPS_STEP_LOCK ? CU_PROCESS_STATE_RUNNING : -1;
        case CUDA_ERROR_NOT_SUPPORTED:
                return s == OPS_STEP_CHECKPOINT ? CU_PROCESS_STATE_LOCKED : -1;
        case CUDA_ERROR_INVALID_VALUE:
                return s == OPS_STEP_RESTORE ? CU_PROCESS_STATE_CHECKPOINTED : -1;
        case CUDA_ERROR_ILLEGAL_STATE:
                return known >= 0 && known != ops_state_before(s) ? known : -1;
        default:
                return -1;
        }
}

/* The first driver call of a method. */
enum ops_step ops_first_step(enum proto_method m)
{
        switch (m) {
        case PROTO_LOCK:
        case PROTO_SUSPEND:
                return OPS_STEP_LOCK;
        case PROTO_CHECKPOINT:
                return OPS_STEP_CHECKPOINT;
        case PROTO_RESTORE:
        case PROTO_RESUME:
                return OPS_STEP_RESTORE;
        case PROTO_UNLOCK:
                return OPS_STEP_UNLOCK;
        default:
                return OPS_STEP_NONE;
        }
}
