/* groupfit.h: a group's restore phase fits whole or not at all.
 *
 * Before the restore phase of a group (RestoreGroup, ResumeGroup, a
 * lease's undo) any member is asked of the driver, the members it
 * restores are checked together on a worker thread (fit.h: their needs
 * summed on each GPU): if they do not fit, every one of them fails with
 * InsufficientGpuMemory and none is touched; if they do, each holds its
 * share until its own restore step has been made, which then skips the
 * check (proto_request.fit_held).  Loop thread, but for the worker's part. */
#ifndef CUDACKPT_GROUPFIT_H
#define CUDACKPT_GROUPFIT_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "jobs/members.h"
#include "jobs/plan.h"
#include "run/fit.h"
#include "run/ops.h"

struct groupfit;
typedef void (*groupfit_done_cb)(struct groupfit *gf);

struct groupfit {
        uv_work_t work;
        struct fit *fit;
        struct fit_proc *procs;         /* the members restored (owned) */
        size_t n;
        const CUcheckpointGpuPair *pairs; /* the group's mapping (its request's) */
        unsigned n_pairs;
        int result;                     /* fit_reserve()'s */
        struct fit_refusal refusal;
        groupfit_done_cb done;
};

/* Starts the check of the members that phase p restores: 0, and done
 * comes on the loop thread; -errno when there is nothing to check (no
 * fit, force, nobody restored, out of memory): the phase goes on at once. */
int groupfit_start(struct groupfit *gf, uv_loop_t *loop, struct fit *fit, const struct members *ms, enum plan_phase p,
                   const struct proto_group_request *req, groupfit_done_cb done);
/* Whether the check refused the phase: *ret is then every member's
 * failure. */
bool groupfit_refused(const struct groupfit *gf, struct ops_result *ret);
/* Whether the members' steps go without a check of their own. */
bool groupfit_held(const struct groupfit *gf);
/* The holds of members whose steps did not release them end. */
void groupfit_end(struct groupfit *gf);

#endif
