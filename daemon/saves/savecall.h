/* savecall.h: the calls of the saves feature as they arrive: StartJob,
 * SaveJob, RestoreJob, ListSaves, RemoveSave, ListJobs and PassBarrier,
 * their parameters checked strictly (names and saves: 1 to 48 of
 * [A-Za-z0-9_.-], not starting with '.' or '-'; argv and environment
 * within max_job_argv entries, each environment entry KEY=VALUE; absolute
 * paths), then handed to savejobs.h (StartJob, ListJobs), saveops.h or
 * savebarrier.h (PassBarrier).
 * Every name is the caller's uid's: another uid's job or save is answered
 * as one that does not exist.  Loop thread only. */
#ifndef CUDACKPT_SAVECALL_H
#define CUDACKPT_SAVECALL_H

#include <stdbool.h>

#include "saves/savejobs.h"
#include "varlink/protomsg.h"

/* Whether s is a name a job or a save may have. */
bool savecall_name_ok(const char *s);
/* Answers the call on c, now or from a callback. */
void savecall_call(struct saves *t, struct conn *c, struct proto_call *call);

#endif
