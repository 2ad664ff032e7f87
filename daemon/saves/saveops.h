/* saveops.h: the calls on a caller's saves: SaveJob (a root `cudackptctl
 * dump` of the caller's job into a temporary name of its uid's directory,
 * renamed to the save once whole and on stable storage), RestoreJob (the
 * save checked on a worker, then a root `cudackptctl restore --wait` as a
 * job bound to the call, savejobs.h), ListSaves and RemoveSave.  The
 * directory work runs on worker threads (savestore.h); while a dump or a
 * restore works on a save, another call on it gets SaveBusy.  With
 * barrier, the dump or restore is a part held at a barrier (savebarrier.h).
 * The caller's uid scopes every name: another uid's save is NoSuchSave, as
 * a missing one.  Loop thread only. */
#ifndef CUDACKPT_SAVEOPS_H
#define CUDACKPT_SAVEOPS_H

#include <stdbool.h>

#include "saves/savejobs.h"
#include "varlink/protomsg.h"

/* The parameters of the calls on saves (validated by the caller). */
struct saveops_request {
        enum proto_method method;
        const char *name;               /* SaveJob: the job */
        const char *save;               /* SaveJob, RestoreJob, RemoveSave */
        bool leave_running, replace;    /* SaveJob */
        bool barrier;                   /* SaveJob, RestoreJob: held at a barrier (savebarrier.h) */
};

/* Answers the call on c (SaveJob, RestoreJob, ListSaves, RemoveSave), now
 * or from a callback. */
void saveops_call(struct saves *t, struct conn *c, const struct proto_call *call, const struct saveops_request *req);

#endif
