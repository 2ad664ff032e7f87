/* jobs.h: what the calls that run over selected processes share: a group
 * operation (group.h) and ListProcesses (list.h).
 *
 * struct jobs holds the parts of the daemon such calls use, given at init,
 * and their slots: every caller's groups and listings in flight count in
 * one share by uid (max_groups_in_flight, ...).  A jobs_call is one such
 * call on its way from its parameters to its answer:
 *
 *   jobs_call_open()   parses the selector and makes the refusals due
 *                      before anything starts (no driver, pid namespaces
 *                      that cannot be translated, shutdown)
 *   jobs_call_take_slot()  a slot of the caller's share
 *   jobs_call_start()  holds its connection and the daemon's life, and
 *                      selects (select.h)
 *   jobs_call_end()    answers once, gives the slot back, lets go
 *
 * A call holds a reference on its connection, and a hold on the daemon's
 * life (life.h), until it has answered: a client that goes away does not
 * stop it, and the daemon exits only after it (a call still selecting
 * when the stop begins answers ShuttingDown).  The daemon's own calls (a
 * lease's undo, jobs_call_open_internal()) have no connection and take no
 * slot.  Loop thread only. */
#ifndef CUDACKPT_JOBS_H
#define CUDACKPT_JOBS_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "base/config.h"
#include "run/driver.h"
#include "base/life.h"
#include "base/metrics.h"
#include "varlink/proto.h"
#include "jobs/select.h"
#include "base/share.h"

struct conn;
struct sched;

struct jobs {
        uv_loop_t *loop;
        const struct config *cfg;
        const struct driver *drv;       /* whether there is one; its errors' texts */
        struct sched *sched;            /* the per-process queues every step goes through */
        struct metrics *metrics;
        struct select_source *source;   /* candidates, the driver's file */
        struct life *life;              /* each call holds it until it has answered */
        struct share slots;             /* callers' groups and listings in flight, by uid */
        unsigned n;                     /* groups and listings in flight, the daemon's too */
};

void jobs_init(struct jobs *js, uv_loop_t *loop, const struct config *cfg, const struct driver *drv,
               struct sched *sched, struct metrics *metrics, struct select_source *source, struct life *life);
void jobs_free(struct jobs *js);
/* Whether the daemon is stopping: calls are refused, none starts. */
bool jobs_stopping(const struct jobs *js);

struct jobs_call {
        struct jobs *jobs;
        struct conn *conn;              /* NULL for the daemon's own */
        const struct policy_caller *caller; /* the connection's, or the daemon's */
        enum proto_method method;
        bool reply;                     /* not oneway: answered */
        bool more;                      /* progress replies wanted */
        bool holds_slot;                /* counted in the jobs' slots */
        uint64_t t0;                    /* uv_hrtime() at arrival */
        struct proto_group_request req; /* its parameters (owned) */
        struct select_job sel;          /* its selection */
};

/* Parses call into jc (zeroed) and makes the refusals due before it
 * starts.  0; -errno when it was answered (or c closed) and jc cleared. */
int jobs_call_open(struct jobs *js, struct jobs_call *jc, struct conn *c, const struct proto_call *call);
/* A call of the daemon's own: caller must outlive it, req is taken over. */
void jobs_call_open_internal(struct jobs *js, struct jobs_call *jc, enum proto_method m,
                             const struct policy_caller *caller, struct proto_group_request *req);
/* A slot of the caller's share: 0, or -EAGAIN with *ret saying which
 * limit is in the way. */
int jobs_call_take_slot(struct jobs_call *jc, struct share_refusal *ret);
/* Answers msg (consumed) to a call that never started, and clears jc. */
void jobs_call_refuse(struct jobs_call *jc, cJSON *msg);
/* QueueFull for the limit why names (audited, counted). */
cJSON *jobs_call_queue_full(const struct jobs_call *jc, const struct share_refusal *why);
/* Counts it in flight, holds its connection, starts selecting. */
void jobs_call_start(struct jobs_call *jc, enum select_purpose purpose, void (*done_cb)(struct select_job *j));
/* After the selection failed (jc->sel.error, not a tree's root gone):
 * the answer, audited and counted; NULL with the connection closed for an
 * error the client cannot be told. */
cJSON *jobs_call_selection_error(struct jobs_call *jc, unsigned max_members);
/* Answers msg (consumed; NULL: nothing), gives the slot back, lets go of
 * the connection and clears jc. */
void jobs_call_end(struct jobs_call *jc, cJSON *msg);

/* An audit record of the call's caller, and the metrics of a client's
 * call (result: a static string). */
void jobs_call_audit(const struct jobs_call *jc, pid_t pid, const char *method, const char *result,
                     const char *detail, double ms);
void jobs_call_count(const struct jobs_call *jc, const char *result);

#endif
