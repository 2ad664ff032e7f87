/* watch.h: Watch, a stream of what happens to the processes a caller may
 * see.
 *
 * A Watch call (with "more": true) makes its connection a watcher until it
 * closes: every event of a process it may see (its pid namespace and the
 * policy, as for ListProcesses) and that its selector names (pids, a
 * cgroup or a process tree as the last scan saw them, or all) is sent as
 * one reply with "continues": true.  Events come from the
 * loop thread as things happen (an operation starting and ending, a state
 * reached, a lease taken or ended) and from a scan of /proc on a worker
 * thread every watch_scan_ms while watchers exist (CUDA processes appearing
 * and exiting; procscan.h) and samples of running checkpoints (progress.h).
 * No event makes a driver call.
 *
 * Memory: a watcher has at most one write in flight; the events of the
 * following loop turns gather in one buffer until it is written.  What a
 * watcher's buffers take (their allocated size, not the events' bytes) is
 * bounded by max_watcher_bytes, and all watchers' by max_watch_bytes: a
 * watcher that would pass either is cut off.  Sending never waits, so a
 * watcher never slows an operation.  Watchers are counted per uid
 * (max_watchers, max_watchers_per_uid, max_watchers_reserved), and the
 * memory they leave is given back to the system. */
#ifndef CUDACKPT_WATCH_H
#define CUDACKPT_WATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#include "base/config.h"
#include "base/life.h"
#include "base/metrics.h"
#include "auth/policy.h"
#include "jobs/progress.h"
#include "varlink/proto.h"
#include "jobs/select.h"
#include "base/share.h"
#include "jobs/watchbuf.h"
#include "jobs/watchevent.h"

struct conn;
struct sched;
struct sched_op;
struct watcher;

/* What the table is given at its start (the server's, outliving it). */
struct watch_deps {
        uv_loop_t *loop;
        const struct config *cfg;
        struct sched *sched;            /* running operations, for progress samples */
        struct metrics *metrics;
        struct select_source *source;   /* the scan's candidates */
        struct life *life;              /* stopping: no watcher and no scan starts */
};

struct watch_table {
        uv_loop_t *loop;
        const struct config *cfg;
        struct sched *sched;
        struct metrics *metrics;
        struct life *life;
        struct watcher *head;
        unsigned n;
        struct share share;             /* watchers, by uid (share.h) */
        struct watchbuf_pool pool;      /* what all watchers' buffers take (watchbuf.h) */
        size_t freed;                   /* ... and what left since the last trim */
        uv_timer_t trim_timer;          /* gives freed memory back to the system */
        uv_check_t flush;               /* writes each watcher's events once per loop turn */
        struct procscan scan;           /* CUDA processes appearing and exiting */
        struct progress progress;       /* samples of running checkpoints */
};

void watch_init(struct watch_table *t, const struct watch_deps *deps);
/* Closes the handles; the loop must run once more.  watch_free() after. */
void watch_close(struct watch_table *t);
void watch_free(struct watch_table *t);
/* Watch: makes c a watcher until it closes, or answers an error. */
void watch_call(struct watch_table *t, struct conn *c, struct proto_call *call);
void watch_emit(struct watch_table *t, const struct watch_event *e);
bool watch_active(const struct watch_table *t); /* any watcher connected */

/* The scheduler's hooks: a mutating operation started on a worker with its
 * process known, and one that ended. */
void watch_op_started(struct watch_table *t, const struct sched_op *op);
void watch_op_finished(struct watch_table *t, const struct sched_op *op);

#endif
