/* members.h: a group's members: who each one is, what it went through,
 * and how the group's replies show them.
 *
 * The coordinator (group.c) takes the members over from the selection
 * (select.h) and records each step's outcome here; the replies (members,
 * skipped, the first failure the caller may know of) are built from
 * these records alone.  Loop thread; no libuv, no driver call. */
#ifndef CUDACKPT_MEMBERS_H
#define CUDACKPT_MEMBERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "run/driver.h"
#include "run/ops.h"
#include "jobs/plan.h"
#include "auth/policy.h"
#include "varlink/proto.h"
#include "jobs/select.h"
#include "run/sched.h"

struct group_member {
        struct select_member s;         /* who it is; s.failed: its first failure */
        bool gone;                      /* exited, or its pid names another now */
        int state;                      /* driver state, -1 unknown */
        uint64_t duration_ns;           /* in driver calls, all steps */
        bool rb_failed;                 /* a rollback step failed: */
        enum proto_method rb_method;
        struct ops_result rb_err;
};

struct members {
        struct group_member *m;         /* by pid (owned) */
        size_t n;
        const struct driver *drv;       /* for the errors' texts */
        const struct policy_caller *caller;
};

/* Takes the selection's members over (j->m is NULL after); -ENOMEM. */
int members_take(struct members *ms, struct select_job *j);
/* Closes the pins and frees them. */
void members_clear(struct members *ms);
/* A member belongs to its group (holder) from its first step to its last:
 * its queue holds other callers' mutating calls back in between
 * (sched_hold), as a single Suspend's do across its two driver calls.
 * The active members were judged ones the caller may act on by the
 * selection; one that cannot be held is logged. */
void members_hold(const struct members *ms, struct sched *s, const void *holder, enum proto_method m);

/* Selected, acted on (not skipped) and not gone. */
bool members_active(const struct group_member *mb);
/* A step's failure, or a rollback step's, as method m's result r. */
void members_fail(struct group_member *mb, enum proto_method m, const struct ops_result *r);
void members_rollback_fail(struct group_member *mb, enum proto_method m, const struct ops_result *r);
/* The first member that failed; false when none. */
bool members_first_failed(const struct members *ms, size_t *ret);
/* Members in a state group method m does not converge from fail with
 * InvalidState, as the single call would. */
void members_check_states(struct members *ms, enum proto_method m);
/* Whether every active member runs. */
bool members_all_running(const struct members *ms);
/* Whether a and b share an active member. */
bool members_overlap(const struct members *a, const struct members *b);

/* ms in milliseconds, to the microsecond, as replies give durations. */
double members_ms(uint64_t ns);
/* A member as replies and progress show it. */
cJSON *members_json(const struct members *ms, const struct group_member *mb);
/* "members" and "skipped" into p (hidden members are in neither). */
void members_add(const struct members *ms, cJSON *p);
/* GroupFailed for group method m that failed in phase p: the first
 * failure the caller may know of, hidden members only as a count; p
 * (parameters, consumed) gets the rest. */
cJSON *members_failure_reply(const struct members *ms, enum proto_method m, enum plan_phase p, bool rolled_back,
                             cJSON *params);

#endif
