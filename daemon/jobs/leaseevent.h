/* leaseevent.h: what the lease table tells the outside world: the audit
 * line of a lease's change and the Watch event of each member (lease taken,
 * ended, undone), with the names of why a lease ended. */
#ifndef CUDACKPT_LEASEEVENT_H
#define CUDACKPT_LEASEEVENT_H

#include "jobs/leasedata.h"
#include "base/metrics.h"
#include "jobs/watch.h"

/* The name of why a lease ended (METRICS_LEASES_*), as audit lines and
 * events say it. */
const char *lease_reason_name(enum metrics_counter why);

/* An audit line "Lease" of l's taker: result, and detail. */
void lease_audit(const struct lease *l, const char *result, const char *detail);

/* Watch event type (WATCH_LEASE_*) about member mb of l, with reason (or
 * NULL) and undo (or NULL), to the watchers of w. */
void lease_member_event(struct watch_table *w, const struct lease *l, const struct lease_member *mb,
                        const char *type, const char *reason, const char *undo);

#endif
