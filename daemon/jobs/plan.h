/* plan.h: the phase plan of a group operation, as pure logic.
 *
 * A group (group.h) moves through phases; each phase fans out over the
 * members and waits for all of them (the barrier) before the next one
 * starts.  This room says which phases a method has, in which order, who
 * takes part in each, which states a method converges from, and where a
 * failure leads (rollback or a stop where it failed).  It knows no libuv,
 * no driver and no group: group.c asks, the unit tests (test_plan.c) check.
 *
 *   select      the selection is read and every member pinned (select.h)
 *   wait        groups sharing a member run one after the other
 *   state       GetState of every member; the plan follows from the states
 *   lock, checkpoint / restore, unlock
 *               the method's steps
 *   rollback    after a failure of LockGroup, CheckpointGroup or
 *               SuspendGroup: the states a failure left unknown, restore,
 *               then unlock, back to running */
#ifndef CUDACKPT_PLAN_H
#define CUDACKPT_PLAN_H

#include <stdbool.h>

#include "run/ops.h"
#include "varlink/proto.h"

enum plan_phase {
        PLAN_SELECT,
        PLAN_WAIT,
        PLAN_STATE,
        PLAN_LOCK,
        PLAN_CHECKPOINT,
        PLAN_RESTORE,
        PLAN_UNLOCK,
        PLAN_RB_STATE,  /* rollback: learn the states a failure left unknown */
        PLAN_RB_RESTORE,
        PLAN_RB_UNLOCK,
        PLAN_END,
};

/* The phase's name in replies and logs ("select", "lock", ...; a rollback
 * phase has the name of its step; PLAN_END "end"). */
const char *plan_phase_name(enum plan_phase p);

/* The driver step each member makes in phase p (GetState for the state
 * phases), and the single-process method that step is. */
enum ops_step plan_step(enum plan_phase p);
enum proto_method plan_step_method(enum ops_step s);

/* Whether p is part of a rollback; whether its steps change a process
 * (what progress replies report). */
bool plan_is_rollback(enum plan_phase p);
bool plan_changes(enum plan_phase p);

/* Whether a failure of group method m brings every member back to running
 * (Lock, Checkpoint and Suspend groups pause a job). */
bool plan_pausing(enum proto_method m);

/* Whether group method m converges from a member in driver state st; any
 * other state is InvalidState. */
bool plan_state_allowed(enum proto_method m, int st);

/* Whether a member that takes part (selected, acted on, not gone) with
 * driver state st (-1 unknown) has a step in phase p. */
bool plan_needs(enum plan_phase p, int st);

/* The phase after p once its barrier is passed, for group method m;
 * failed: a member failed in p.  PLAN_END: the group answers. */
enum plan_phase plan_after(enum proto_method m, enum plan_phase p, bool failed);

#endif
