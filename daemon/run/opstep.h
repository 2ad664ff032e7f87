/* opstep.h: the driver calls an operation is made of, and the checkpoint
 * state machine they move a process along (driver-behaviour.md): which
 * state each call needs, which its success leaves, and what a failure
 * says about the state without asking the driver again.  Pure; used by
 * ops.c as it runs an operation and by the group coordinator, which plans
 * its phases with them. */
#ifndef CUDACKPT_OPSTEP_H
#define CUDACKPT_OPSTEP_H

#include "cuda-api.h"

#include "varlink/proto.h"

enum ops_step {
        OPS_STEP_NONE,
        OPS_STEP_GET_STATE,
        OPS_STEP_GET_RESTORE_TID,
        OPS_STEP_LOCK,
        OPS_STEP_CHECKPOINT,
        OPS_STEP_RESTORE,
        OPS_STEP_UNLOCK,
};

/* The state a step needs (an ILLEGAL_STATE says the process is not in it)
 * and the one its success leaves; -1 for none. */
int ops_state_before(enum ops_step s);
int ops_state_after(enum ops_step s);
/* The state a failed step leaves as far as its result r tells, given the
 * state known before it (-1 unknown); -1 when not known. */
int ops_state_after_failure(enum ops_step s, CUresult r, int known);
/* The first driver call of a method that acts on one process. */
enum ops_step ops_first_step(enum proto_method m);
/* The step's name in replies ("lock"), NULL for OPS_STEP_NONE. */
const char *ops_step_name(enum ops_step s);

#endif
