/* plan.c: the phase plan of a group operation (plan.h). */
#include "jobs/plan.h"

#include <stddef.h>

#include "cudackpt/protocol.h"

const char *plan_phase_name(enum plan_phase p)
{
        switch (p) {
        case PLAN_SELECT:
        case PLAN_WAIT:
                return CUDACKPT_PHASE_SELECT;
        case PLAN_STATE:
        case PLAN_RB_STATE:
                return CUDACKPT_PHASE_STATE;
        case PLAN_LOCK:
                return CUDACKPT_PHASE_LOCK;
        case PLAN_CHECKPOINT:
                return CUDACKPT_PHASE_CHECKPOINT;
        case PLAN_RESTORE:
        case PLAN_RB_RESTORE:
                return CUDACKPT_PHASE_RESTORE;
        case PLAN_UNLOCK:
        case PLAN_RB_UNLOCK:
                return CUDACKPT_PHASE_UNLOCK;
        default:
                return "end";
        }
}

enum ops_step plan_step(enum plan_phase p)
{
        switch (p) {
        case PLAN_LOCK:
                return OPS_STEP_LOCK;
        case PLAN_CHECKPOINT:
                return OPS_STEP_CHECKPOINT;
        case PLAN_RESTORE:
        case PLAN_RB_RESTORE:
                return OPS_STEP_RESTORE;
        case PLAN_UNLOCK:
        case PLAN_RB_UNLOCK:
                return OPS_STEP_UNLOCK;
        default:
                return OPS_STEP_GET_STATE;
        }
}

enum proto_method plan_step_method(enum ops_step s)
{
        static const enum proto_method methods[] = {
                [OPS_STEP_LOCK] = PROTO_LOCK,
                [OPS_STEP_CHECKPOINT] = PROTO_CHECKPOINT,
                [OPS_STEP_RESTORE] = PROTO_RESTORE,
                [OPS_STEP_UNLOCK] = PROTO_UNLOCK,
        };

        /* The others read the state. */
        if ((size_t)s < sizeof(methods) / sizeof(methods[0]) && methods[s] != PROTO_GET_STATE)
                return methods[s];
        return PROTO_GET_STATE;
}

bool plan_is_rollback(enum plan_phase p)
{
        return p == PLAN_RB_STATE || p == PLAN_RB_RESTORE || p == PLAN_RB_UNLOCK;
}

bool plan_changes(enum plan_phase p)
{
        return p >= PLAN_LOCK && p < PLAN_END && p != PLAN_RB_STATE;
}

bool plan_pausing(enum proto_method m)
{
        return m == PROTO_LOCK_GROUP || m == PROTO_CHECKPOINT_GROUP || m == PROTO_SUSPEND_GROUP;
}

bool plan_state_allowed(enum proto_method m, int st)
{
        switch (m) {
        case PROTO_LOCK_GROUP:
                return st == CU_PROCESS_STATE_RUNNING || st == CU_PROCESS_STATE_LOCKED;
        case PROTO_CHECKPOINT_GROUP:
                return st == CU_PROCESS_STATE_LOCKED || st == CU_PROCESS_STATE_CHECKPOINTED;
        case PROTO_RESTORE_GROUP:
                return st == CU_PROCESS_STATE_CHECKPOINTED || st == CU_PROCESS_STATE_LOCKED;
        case PROTO_UNLOCK_GROUP:
                return st == CU_PROCESS_STATE_LOCKED || st == CU_PROCESS_STATE_RUNNING;
        case PROTO_SUSPEND_GROUP:
        case PROTO_RESUME_GROUP:
                return st == CU_PROCESS_STATE_RUNNING || st == CU_PROCESS_STATE_LOCKED ||
                       st == CU_PROCESS_STATE_CHECKPOINTED;
        default:
                return false;
        }
}

bool plan_needs(enum plan_phase p, int st)
{
        switch (p) {
        case PLAN_STATE:
                return true;
        case PLAN_RB_STATE:
                return st < 0;
        default:
                return st == ops_state_before(plan_step(p));
        }
}

/* Each group method's steps, in order (unused places are PLAN_SELECT). */
static const struct {
        enum proto_method m;
        enum plan_phase steps[2];
} plans[] = {
        { PROTO_LOCK_GROUP, { PLAN_LOCK } },
        { PROTO_CHECKPOINT_GROUP, { PLAN_CHECKPOINT } },
        { PROTO_SUSPEND_GROUP, { PLAN_LOCK, PLAN_CHECKPOINT } },
        { PROTO_RESTORE_GROUP, { PLAN_RESTORE } },
        { PROTO_UNLOCK_GROUP, { PLAN_UNLOCK } },
        { PROTO_RESUME_GROUP, { PLAN_RESTORE, PLAN_UNLOCK } },
};

/* The phase after p on the way forward, PLAN_END after the last. */
static enum plan_phase next_forward(enum proto_method m, enum plan_phase p)
{
        for (size_t i = 0; i < sizeof(plans) / sizeof(plans[0]); i++)
                for (size_t k = 0; plans[i].m == m && k < 2; k++)
                        if (plans[i].steps[k] > p)
                                return plans[i].steps[k];
        return PLAN_END;
}

enum plan_phase plan_after(enum proto_method m, enum plan_phase p, bool failed)
{
        switch (p) {
        case PLAN_STATE:
                /* Nothing has changed yet: a failure ends it here. */
                return failed ? PLAN_END : next_forward(m, p);
        case PLAN_LOCK:
        case PLAN_CHECKPOINT:
        case PLAN_RESTORE:
        case PLAN_UNLOCK:
                /* Restoring and unlocking stop where they failed: no member
                 * unlocked while another is checkpointed. */
                if (failed)
                        return plan_pausing(m) ? PLAN_RB_STATE : PLAN_END;
                return next_forward(m, p);
        case PLAN_RB_STATE:
                return PLAN_RB_RESTORE;
        case PLAN_RB_RESTORE:
                return PLAN_RB_UNLOCK;
        default:
                return PLAN_END;
        }
}
