/* watchevent.h: the events Watch sends, and their JSON.
 *
 * An event names a process in the daemon's pid namespace; watch.c sends it
 * to each watcher that may see it, with the pid as that watcher sees it
 * (watchevent_json()).  Leases (lease.c), the scheduler's hooks, progress
 * samples and the scan of processes make events (watchevent_of_*()). */
#ifndef CUDACKPT_WATCHEVENT_H
#define CUDACKPT_WATCHEVENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "auth/policy.h"
#include "jobs/procscan.h"
#include "jobs/progress.h"
#include "varlink/proto.h"

#define WATCH_STARTED "started"
#define WATCH_FINISHED "finished"
#define WATCH_STATE "state"
#define WATCH_PROGRESS "progress"
#define WATCH_LEASE_TAKEN "lease-taken"
#define WATCH_LEASE_ENDED "lease-ended"
#define WATCH_APPEARED "appeared"
#define WATCH_EXITED "exited"

struct watch_event {
        const char *type;               /* WATCH_* */
        pid_t pid;                      /* in the daemon's pid namespace */
        uint64_t start_time;            /* 0: unknown */
        struct policy_target owner;     /* who may see it */
        enum proto_method method;       /* PROTO_METHODS: none */
        enum proto_method group;        /* the group method it is part of; PROTO_METHODS: none */
        const char *result;             /* finished: "ok" or the error's short name */
        int state;                      /* -1: none */
        double duration_ms;             /* < 0: none */
        long long caller_uid;           /* < 0: none */
        uint64_t lease;                 /* 0: none */
        const char *reason;             /* lease-ended: why; NULL */
        const char *undo;               /* lease-ended: "ok", "failed", NULL when not undone */
        const char *command;            /* appeared: comm; NULL */
        const char *step;               /* progress: "checkpoint" or "restore" */
        const struct procscan_proc *proc; /* appeared, exited: the scan's entry */
        bool gone;                      /* the process has exited: its pid may name
                                         * another now, so it is never translated */
        int64_t bytes, total_bytes;     /* progress; < 0: unknown */
};

/* An event with the fields that do not apply at their "none" values. */
#define WATCH_EVENT_INIT(t)                                                                              \
        (struct watch_event)                                                                             \
        {                                                                                                \
                .type = (t), .method = PROTO_METHODS, .group = PROTO_METHODS, .state = -1,               \
                .duration_ms = -1, .caller_uid = -1, .bytes = -1, .total_bytes = -1                      \
        }

/* {"parameters": {"event": {...}}, "continues": true} for a watcher that
 * sees the process as vpid (0: no pid). */
cJSON *watchevent_json(const struct watch_event *e, pid_t vpid);

struct sched_op;

/* The events of an operation started or finished (its process as the
 * worker pinned it), of a progress sample, and of a process the scan saw
 * appear or exit (type WATCH_APPEARED or WATCH_EXITED). */
struct watch_event watchevent_of_op(const struct sched_op *op, const char *type);
struct watch_event watchevent_of_progress(const struct progress_sample *s);
struct watch_event watchevent_of_proc(const struct procscan_proc *p, const char *type);

#endif
