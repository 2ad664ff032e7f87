/* proccall.h: the calls on one process (GetState, Lock, Checkpoint,
 * Restore, Unlock, Suspend, Resume, GetRestoreThreadId).
 *
 * proccall_call() answers what can be answered at once (parameter errors,
 * a pid the caller cannot see, refusals and GetState from what a running
 * operation on the process has learnt, an unknown GPU of a mapping) and
 * queues the rest on the scheduler; proccall_op_done_cb() is the
 * operation's completion callback: it writes the audit record, grants the
 * lease asked for, and replies.  Loop thread only. */
#ifndef CUDACKPT_PROCCALL_H
#define CUDACKPT_PROCCALL_H

#include "base/config.h"
#include "run/driver.h"
#include "jobs/lease.h"
#include "base/life.h"
#include "base/metrics.h"
#include "varlink/proto.h"
#include "run/sched.h"

struct conn;

/* What the calls need: the server's, outliving the operations. */
struct proccall {
        const struct config *cfg;
        const struct driver *drv;
        struct sched *sched;
        struct metrics *metrics;
        struct life *life;              /* each queued operation holds it */
        struct lease_table *leases;     /* a call may ask for a lease */
};

void proccall_call(struct proccall *pc, struct conn *c, struct proto_call *call);
/* The scheduler's completion callback for the operations queued here. */
void proccall_op_done_cb(struct sched *s, struct sched_op *op);

#endif
