/* Unit tests: the phase plan of group operations (plan.h). */
#include <check.h>
#include <stdlib.h>

#include "runner.h"
#include "jobs/plan.h"

#define RUNNING CU_PROCESS_STATE_RUNNING
#define LOCKED CU_PROCESS_STATE_LOCKED
#define CHECKPOINTED CU_PROCESS_STATE_CHECKPOINTED

/* The phases a method runs when nothing fails, from the state phase on. */
static void check_forward(enum proto_method m, const enum plan_phase *want, size_t n)
{
        enum plan_phase p = PLAN_STATE;

        for (size_t i = 0; i < n; i++) {
                p = plan_after(m, p, false);
                ck_assert_int_eq(p, want[i]);
        }
}

START_TEST(test_forward)
{
        static const enum plan_phase lock[] = { PLAN_LOCK, PLAN_END };
        static const enum plan_phase ckpt[] = { PLAN_CHECKPOINT, PLAN_END };
        static const enum plan_phase suspend[] = { PLAN_LOCK, PLAN_CHECKPOINT, PLAN_END };
        static const enum plan_phase restore[] = { PLAN_RESTORE, PLAN_END };
        static const enum plan_phase unlock[] = { PLAN_UNLOCK, PLAN_END };
        static const enum plan_phase resume[] = { PLAN_RESTORE, PLAN_UNLOCK, PLAN_END };

        check_forward(PROTO_LOCK_GROUP, lock, 2);
        check_forward(PROTO_CHECKPOINT_GROUP, ckpt, 2);
        check_forward(PROTO_SUSPEND_GROUP, suspend, 3);
        check_forward(PROTO_RESTORE_GROUP, restore, 2);
        check_forward(PROTO_UNLOCK_GROUP, unlock, 2);
        check_forward(PROTO_RESUME_GROUP, resume, 3);
        /* Not a group method: nothing to do after the states. */
        ck_assert_int_eq(plan_after(PROTO_LIST_PROCESSES, PLAN_STATE, false), PLAN_END);
}
END_TEST

/* A failure of a pausing method rolls back: the unknown states, restore,
 * unlock, in that order; the others stop where they failed. */
START_TEST(test_rollback)
{
        ck_assert(plan_pausing(PROTO_LOCK_GROUP));
        ck_assert(plan_pausing(PROTO_CHECKPOINT_GROUP));
        ck_assert(plan_pausing(PROTO_SUSPEND_GROUP));
        ck_assert(!plan_pausing(PROTO_RESTORE_GROUP));
        ck_assert(!plan_pausing(PROTO_UNLOCK_GROUP));
        ck_assert(!plan_pausing(PROTO_RESUME_GROUP));

        ck_assert_int_eq(plan_after(PROTO_SUSPEND_GROUP, PLAN_LOCK, true), PLAN_RB_STATE);
        ck_assert_int_eq(plan_after(PROTO_SUSPEND_GROUP, PLAN_CHECKPOINT, true), PLAN_RB_STATE);
        ck_assert_int_eq(plan_after(PROTO_LOCK_GROUP, PLAN_LOCK, true), PLAN_RB_STATE);
        ck_assert_int_eq(plan_after(PROTO_CHECKPOINT_GROUP, PLAN_CHECKPOINT, true), PLAN_RB_STATE);
        ck_assert_int_eq(plan_after(PROTO_SUSPEND_GROUP, PLAN_RB_STATE, false), PLAN_RB_RESTORE);
        ck_assert_int_eq(plan_after(PROTO_SUSPEND_GROUP, PLAN_RB_RESTORE, false), PLAN_RB_UNLOCK);
        ck_assert_int_eq(plan_after(PROTO_SUSPEND_GROUP, PLAN_RB_UNLOCK, false), PLAN_END);
        /* A rollback runs to its end whatever fails in it. */
        ck_assert_int_eq(plan_after(PROTO_SUSPEND_GROUP, PLAN_RB_RESTORE, true), PLAN_RB_UNLOCK);

        ck_assert_int_eq(plan_after(PROTO_RESUME_GROUP, PLAN_RESTORE, true), PLAN_END);
        ck_assert_int_eq(plan_after(PROTO_RESUME_GROUP, PLAN_UNLOCK, true), PLAN_END);
        ck_assert_int_eq(plan_after(PROTO_UNLOCK_GROUP, PLAN_UNLOCK, true), PLAN_END);
        /* A failure in the state phase changed nothing: no rollback. */
        ck_assert_int_eq(plan_after(PROTO_SUSPEND_GROUP, PLAN_STATE, true), PLAN_END);

        ck_assert(plan_is_rollback(PLAN_RB_STATE) && plan_is_rollback(PLAN_RB_RESTORE) &&
                  plan_is_rollback(PLAN_RB_UNLOCK));
        ck_assert(!plan_is_rollback(PLAN_RESTORE) && !plan_is_rollback(PLAN_UNLOCK) &&
                  !plan_is_rollback(PLAN_END));
}
END_TEST

/* Who takes part in a phase: every member in the state phases (the
 * rollback's only where unknown), then those in the step's starting state
 * (the barrier waits for these only: the others have converged). */
START_TEST(test_needs)
{
        ck_assert(plan_needs(PLAN_STATE, -1) && plan_needs(PLAN_STATE, LOCKED));
        ck_assert(plan_needs(PLAN_RB_STATE, -1));
        ck_assert(!plan_needs(PLAN_RB_STATE, RUNNING));
        ck_assert(plan_needs(PLAN_LOCK, RUNNING));
        ck_assert(!plan_needs(PLAN_LOCK, LOCKED));
        ck_assert(plan_needs(PLAN_CHECKPOINT, LOCKED));
        ck_assert(!plan_needs(PLAN_CHECKPOINT, CHECKPOINTED));
        ck_assert(plan_needs(PLAN_RESTORE, CHECKPOINTED) && plan_needs(PLAN_RB_RESTORE, CHECKPOINTED));
        ck_assert(!plan_needs(PLAN_RB_RESTORE, LOCKED));
        ck_assert(plan_needs(PLAN_UNLOCK, LOCKED) && plan_needs(PLAN_RB_UNLOCK, LOCKED));
        ck_assert(!plan_needs(PLAN_RB_UNLOCK, RUNNING) && !plan_needs(PLAN_UNLOCK, -1));
}
END_TEST

/* The states each method converges from. */
START_TEST(test_states_allowed)
{
        ck_assert(plan_state_allowed(PROTO_LOCK_GROUP, RUNNING) && plan_state_allowed(PROTO_LOCK_GROUP, LOCKED));
        ck_assert(!plan_state_allowed(PROTO_LOCK_GROUP, CHECKPOINTED));
        ck_assert(!plan_state_allowed(PROTO_CHECKPOINT_GROUP, RUNNING));
        ck_assert(plan_state_allowed(PROTO_CHECKPOINT_GROUP, CHECKPOINTED));
        ck_assert(!plan_state_allowed(PROTO_RESTORE_GROUP, RUNNING));
        ck_assert(plan_state_allowed(PROTO_RESTORE_GROUP, LOCKED));
        ck_assert(!plan_state_allowed(PROTO_UNLOCK_GROUP, CHECKPOINTED));
        ck_assert(plan_state_allowed(PROTO_SUSPEND_GROUP, CHECKPOINTED));
        ck_assert(plan_state_allowed(PROTO_RESUME_GROUP, RUNNING));
        ck_assert(!plan_state_allowed(PROTO_RESUME_GROUP, CU_PROCESS_STATE_FAILED));
        ck_assert(!plan_state_allowed(PROTO_RESUME_GROUP, -1));
        ck_assert(!plan_state_allowed(PROTO_GET_STATE, RUNNING));
}
END_TEST

/* Steps, their methods and the names replies give the phases. */
START_TEST(test_steps_and_names)
{
        ck_assert_int_eq(plan_step(PLAN_STATE), OPS_STEP_GET_STATE);
        ck_assert_int_eq(plan_step(PLAN_RB_STATE), OPS_STEP_GET_STATE);
        ck_assert_int_eq(plan_step(PLAN_RB_RESTORE), OPS_STEP_RESTORE);
        ck_assert_int_eq(plan_step(PLAN_RB_UNLOCK), OPS_STEP_UNLOCK);
        ck_assert_int_eq(plan_step_method(plan_step(PLAN_LOCK)), PROTO_LOCK);
        ck_assert_int_eq(plan_step_method(plan_step(PLAN_CHECKPOINT)), PROTO_CHECKPOINT);
        ck_assert_int_eq(plan_step_method(plan_step(PLAN_RB_RESTORE)), PROTO_RESTORE);
        ck_assert_int_eq(plan_step_method(plan_step(PLAN_UNLOCK)), PROTO_UNLOCK);
        ck_assert_int_eq(plan_step_method(plan_step(PLAN_STATE)), PROTO_GET_STATE);
        ck_assert_str_eq(plan_phase_name(PLAN_WAIT), "select");
        ck_assert_str_eq(plan_phase_name(PLAN_RB_STATE), "state");
        ck_assert_str_eq(plan_phase_name(PLAN_RB_RESTORE), "restore");
        ck_assert_str_eq(plan_phase_name(PLAN_RB_UNLOCK), "unlock");
        ck_assert_str_eq(plan_phase_name(PLAN_CHECKPOINT), "checkpoint");
        ck_assert_str_eq(plan_phase_name(PLAN_END), "end");
        /* Progress replies come from the phases that change processes. */
        ck_assert(!plan_changes(PLAN_STATE) && !plan_changes(PLAN_RB_STATE) && !plan_changes(PLAN_END));
        ck_assert(plan_changes(PLAN_LOCK) && plan_changes(PLAN_RB_RESTORE) && plan_changes(PLAN_RB_UNLOCK));
}
END_TEST

const char unit_suite_name[] = "plan";

void unit_tests(TCase *tc)
{
        tcase_add_test(tc, test_forward);
        tcase_add_test(tc, test_rollback);
        tcase_add_test(tc, test_needs);
        tcase_add_test(tc, test_states_allowed);
        tcase_add_test(tc, test_steps_and_names);
}
