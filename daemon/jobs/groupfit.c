/* groupfit.c: a group's restore phase checked whole (groupfit.h). */
#include "jobs/groupfit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "host/target.h"

static void work_cb(uv_work_t *w)
{
        struct groupfit *gf = w->data;

        /* The estimate of a member without a record: its resident memory,
         * read from the process pinned afresh (the one of this start time). */
        for (size_t i = 0; i < gf->n; i++) {
                struct target_identity id;
                if (target_open(gf->procs[i].pid, &id) < 0)
                        continue;
                if (id.start_time == gf->procs[i].start_time)
                        (void)target_rss(&id, &gf->procs[i].rss);
                target_close(&id);
        }
        gf->result = fit_reserve(gf->fit, gf->procs, gf->n, gf->pairs, gf->n_pairs, &gf->refusal);
}

static void after_cb(uv_work_t *w, int status)
{
        struct groupfit *gf = w->data;

        (void)status;
        gf->done(gf);
}

int groupfit_start(struct groupfit *gf, uv_loop_t *loop, struct fit *fit, const struct members *ms, enum plan_phase p,
                   const struct proto_group_request *req, groupfit_done_cb done)
{
        memset(gf, 0, sizeof(*gf));
        gf->result = -ENODEV;
        if (p != PLAN_RESTORE || !fit || req->force || !fit_active(fit))
                return -ENODEV;
        gf->procs = calloc(ms->n ? ms->n : 1, sizeof(*gf->procs));
        if (!gf->procs)
                return -ENOMEM;
        for (size_t i = 0; i < ms->n; i++)
                if (members_active(&ms->m[i]) && plan_needs(p, ms->m[i].state))
                        gf->procs[gf->n++] = (struct fit_proc){ .pid = ms->m[i].s.pid,
                                                                .start_time = ms->m[i].s.start_time };
        gf->fit = fit;
        gf->pairs = req->pairs;
        gf->n_pairs = req->n_pairs;
        gf->done = done;
        gf->work.data = gf;
        if (gf->n == 0 || uv_queue_work(loop, &gf->work, work_cb, after_cb) < 0) {
                free(gf->procs);
                gf->procs = NULL;
                return -ENODEV;
        }
        return 0;
}

bool groupfit_refused(const struct groupfit *gf, struct ops_result *ret)
{
        if (gf->result != -ENOSPC)
                return false;
        memset(ret, 0, sizeof(*ret));
        *ret = (struct ops_result){ .error = OPS_INSUFFICIENT_GPU_MEMORY, .step = OPS_STEP_RESTORE, .state = -1,
                                    .restore_tid = -1, .rolled_back = -1, .in_flight = -1, .fit = gf->refusal };
        return true;
}

bool groupfit_held(const struct groupfit *gf)
{
        return gf->result == 0;
}

void groupfit_end(struct groupfit *gf)
{
        if (gf->result == 0)
                for (size_t i = 0; i < gf->n; i++)
                        fit_release(gf->fit, gf->procs[i].pid, gf->procs[i].start_time);
        free(gf->procs);
        gf->procs = NULL;
        gf->n = 0;
        gf->result = -ENODEV;
}
