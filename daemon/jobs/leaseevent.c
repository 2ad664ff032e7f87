/* leaseevent.c: what the lease table tells the outside world (leaseevent.h). */
#include "jobs/leaseevent.h"

#include <string.h>

#include "base/log.h"

static const char *const reason_names[] = {
        [METRICS_LEASES_RELEASED] = "released",     [METRICS_LEASES_FINISHED] = "finished",
        [METRICS_LEASES_EXPIRED] = "expired",       [METRICS_LEASES_CLOSED] = "closed",
        [METRICS_LEASES_EXITED] = "exited",         [METRICS_LEASES_SUPERSEDED] = "superseded",
        [METRICS_LEASES_NOT_HONOURED] = "not-honoured",
};

void lease_audit(const struct lease *l, const char *result, const char *detail)
{
        struct log_audit a = {
                .caller_uid = (unsigned)l->uid,
                .caller_pid = (int)l->caller_pid,
                .target_pid = l->n > 0 ? (int)l->m[0].pid : 0,
                .method = "Lease",
                .result = result,
                .detail = detail,
        };
        log_audit(&a);
}

void lease_member_event(struct watch_table *w, const struct lease *l, const struct lease_member *mb,
                        const char *type, const char *reason, const char *undo)
{
        struct watch_event e = WATCH_EVENT_INIT(type);

        e.pid = mb->pid;
        e.start_time = mb->start_time;
        e.owner = mb->owner;
        e.method = l->method;
        e.caller_uid = (long long)l->uid;
        e.lease = l->id;
        e.reason = reason;
        /* Alive only where an operation has just pinned it (taken, finished,
         * superseded): otherwise it may have exited and its pid be
         * another's, and a watcher of another pid namespace gets the event
         * only by the pid a scan noted while it lived. */
        e.gone = reason && strcmp(reason, reason_names[METRICS_LEASES_FINISHED]) != 0 &&
                 strcmp(reason, reason_names[METRICS_LEASES_SUPERSEDED]) != 0;
        e.undo = undo;
        watch_emit(w, &e);
}

const char *lease_reason_name(enum metrics_counter why)
{
        return reason_names[why];
}
