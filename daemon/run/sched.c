/* sched.c: the per-pid queues and their hand-off to worker threads. */
#include "run/sched.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth/access.h"
#include "base/log.h"

static void async_cb(uv_async_t *a);

/* Hands a finished (or cancelled) op to whoever submitted it.  Meanwhile
 * its target stays (a hold that the callback ends leaves the next op to
 * the caller of finish()). */
static void finish(struct sched *s, struct sched_op *op)
{
        struct sched_target *t = op->target;
        bool outer = t->finishing;

        if (op->holds_queue) {
                op->holds_queue = false;
                share_give(&s->queue, op->caller->uid, op->privileged);
        }
        t->finishing = true;
        (op->done ? op->done : s->done)(s, op);
        t->finishing = outer;
}
static void work_cb(uv_work_t *w);
static void after_work_cb(uv_work_t *w, int status);

int sched_init(struct sched *s, uv_loop_t *loop, const struct config *cfg,
               const struct driver *drv, sched_op_done_cb done)
{
        memset(s, 0, sizeof(*s));
        if (procbusy_init(&s->busy, cfg->workers) < 0)
                return -ENOMEM;
        static const char *const queue_keys[] = { "max_queue_total", "max_queue_per_uid", "max_queue_reserved" };
        static const char *const worker_keys[] = { "workers", "workers_per_uid", "workers_reserved" };

        share_init(&s->queue, queue_keys, cfg->max_queue_total, cfg->max_queue_per_uid, cfg->max_queue_reserved);
        share_init(&s->workers, worker_keys, cfg->workers, cfg->workers_per_uid, cfg->workers_reserved);
        s->loop = loop;
        s->cfg = cfg;
        s->drv = drv;
        s->done = done;
        uv_async_init(loop, &s->async, async_cb);
        s->async.data = s;
        /* Wake-ups alone never keep the loop running. */
        uv_unref((uv_handle_t *)&s->async);
        sched_table_init(&s->table, loop, cfg, &s->async);
        uv_timer_init(loop, &s->stall);
        s->stall.data = s;
        uv_unref((uv_handle_t *)&s->stall);
        /* Without the lane the pool does its work too: not fatal. */
        if (cfg->read_only_lane)
                (void)lane_init(&s->lane, loop, cfg->lane_spin_us, work_cb, after_work_cb);
        return 0;
}

void sched_close(struct sched *s)
{
        if (!uv_is_closing((uv_handle_t *)&s->async))
                uv_close((uv_handle_t *)&s->async, NULL);
        sched_table_close(&s->table);
        if (!uv_is_closing((uv_handle_t *)&s->stall))
                uv_close((uv_handle_t *)&s->stall, NULL);
        lane_close(&s->lane);
}

static void target_free(struct sched *s, struct sched_target *t)
{
        if (t->awaits_worker)
                s->n_awaiting--;
        sched_table_drop(&s->table, t);
}

static uint64_t now_ns(void)
{
        return uv_hrtime();
}

/* Answers t's waiting GetStates from the published state (loop thread). */
static void answer_waiters(struct sched *s, struct sched_target *t)
{
        struct sched_snapshot snap;
        struct sched_op *op;

        sched_read_target(t, &snap);
        if (!snap.known || snap.last_state < 0)
                return;
        while ((op = t->waiters)) {
                struct ops_result *r = &op->result;
                t->waiters = op->next;
                op->next = NULL;
                t->depth--;
                s->n_ops--;
                *r = (struct ops_result){ .error = OPS_OK, .state = snap.last_state, .restore_tid = -1,
                                          .rolled_back = -1, .in_flight = -1 };
                if (t->running)
                        r->in_flight = (int)t->running->method;
                (void)ops_judge(s->cfg, op->caller, op->method, &op->req, &snap.owner, snap.start_time, r);
                finish(s, op);
        }
}

/* Reports the start of op, t's running one, once its process is known. */
static void report_start(struct sched *s, struct sched_target *t, struct sched_op *op)
{
        bool known;

        if (op->start_reported || proto_method_read_only(op->method) || !s->hooks.started ||
            !s->report_starts)
                return;
        uv_mutex_lock(&t->lock);
        known = t->known;
        if (!known)
                t->want_id_wake = true;
        uv_mutex_unlock(&t->lock);
        if (!known)
                return;
        op->start_reported = true;
        s->hooks.started(s->hooks.ctx, op);
}

static void async_cb(uv_async_t *a)
{
        struct sched *s = a->data;

        for (unsigned b = 0; b < SCHED_BUCKETS; b++)
                for (struct sched_target *t = s->table.buckets[b]; t; t = t->next_in_bucket) {
                        if (t->waiters)
                                answer_waiters(s, t);
                        if (t->running && !t->running->start_reported)
                                report_start(s, t, t->running);
                }
}

int sched_wait_state(struct sched *s, struct sched_op *op)
{
        struct sched_target *t = sched_table_find(&s->table, op->req.pid);
        bool known;

        if (!t || !t->running)
                return -ESRCH;
        uv_mutex_lock(&t->lock);
        known = t->known && t->last_state >= 0;
        if (!known)
                t->want_wake = true;
        uv_mutex_unlock(&t->lock);
        if (known)
                return -EALREADY;
        op->privileged = access_privileged(s->cfg, op->caller);
        if (share_take(&s->queue, op->caller->uid, op->privileged, NULL) < 0)
                return -EAGAIN; /* sched_submit() says which limit */
        op->holds_queue = true;
        op->target = t;
        op->sched = s;
        op->queued_ns = now_ns();
        op->state_waiter = true;
        op->next = t->waiters;
        t->waiters = op;
        t->depth++;
        s->n_ops++;
        return 0;
}

static void work_cb(uv_work_t *w)
{
        struct sched_op *op = w->data;
        struct sched *s = op->sched;
        struct ops_env env = { .cfg = s->cfg, .drv = s->drv, .busy = &s->busy, .want_progress = &s->want_progress,
                               .fit = s->fit };

        op->started_ns = uv_hrtime();
        ops_execute(&env, op->target, op->method, &op->req, op->caller, &op->result);
        op->finished_ns = uv_hrtime();
}

static void start_next(struct sched *s, struct sched_target *t);
static void admit_awaiting(struct sched *s);

static void after_work_cb(uv_work_t *w, int status)
{
        struct sched_op *op = w->data;
        struct sched *s = op->sched;
        struct sched_target *t = op->target;

        /* uv_cancel() is never called, so status is always 0. */
        (void)status;
        /* Waiters that the op never gave a state to ask the driver themselves,
         * first in the queue. */
        answer_waiters(s, t);
        while (t->waiters) {
                struct sched_op *wt = t->waiters;
                t->waiters = wt->next;
                wt->state_waiter = false;
                wt->next = t->head;
                t->head = wt;
                if (!t->tail)
                        t->tail = wt;
        }
        if (!proto_method_read_only(op->method))
                report_start(s, t, op); /* its process is known now, if ever */
        t->running = NULL;
        t->depth--;
        s->n_ops--;
        s->n_running--;
        if (!proto_method_read_only(op->method)) {
                uv_mutex_lock(&t->lock);
                t->want_id_wake = false;
                uv_mutex_unlock(&t->lock);
                if (s->hooks.finished)
                        s->hooks.finished(s->hooks.ctx, op);
        }
        if (op->holds_worker) {
                op->holds_worker = false;
                share_give(&s->workers, op->caller->uid, op->privileged);
        }
        finish(s, op);
        /* The oldest ops waiting for the worker given back go first. */
        admit_awaiting(s);
        start_next(s, t);
}

/* Callers whose worker share is taken, met in one walk of a queue. */
#define SCHED_BLOCKED_UIDS 8

/* Whether op must wait for t's hold to end: a mutating op of another
 * than the holder, once a step of the holder has started. */
static bool held_back(const struct sched_target *t, const struct sched_op *op)
{
        return t->holder && t->hold_begun && op->holder != t->holder && !proto_method_read_only(op->method);
}

/* The first op of t's queue that may have a worker now: the head, or, when
 * its caller's worker share is taken, the first op of another caller whose
 * share is not.  A caller that waits for its own share holds up no one
 * else's calls on the process; the ops of one uid keep their order.  Ops
 * held back by a hold are passed over.  *ret_prev: the op before it in the
 * queue, NULL for the head; *ret_share: NULL was for a worker share. */
static struct sched_op *admissible(struct sched *s, struct sched_target *t, struct sched_op **ret_prev,
                                   bool *ret_share)
{
        uid_t blocked[SCHED_BLOCKED_UIDS];
        size_t nb = 0;
        struct sched_op *prev = NULL;

        *ret_share = false;
        for (struct sched_op *op = t->head; op; prev = op, op = op->next) {
                bool behind = held_back(t, op);
                for (size_t i = 0; i < nb && !behind; i++)
                        behind = blocked[i] == op->caller->uid;
                if (behind)
                        continue;
                if (op->holds_worker ||
                    share_check(&s->workers, op->caller->uid, op->privileged, NULL) == SHARE_OK) {
                        *ret_prev = prev;
                        return op;
                }
                *ret_share = true;
                if (nb == SCHED_BLOCKED_UIDS)
                        return NULL;
                blocked[nb++] = op->caller->uid;
        }
        return NULL;
}

static void start_next(struct sched *s, struct sched_target *t)
{
        struct sched_op *op, *prev = NULL;
        bool share;

        if (t->running)
                return;
        if (!t->head) {
                if (t->depth == 0 && !t->holder)
                        sched_table_release(&s->table, t);
                return;
        }
        /* A worker thread only within its caller's share: one uid's calls
         * that the driver holds for long never take every thread. */
        op = admissible(s, t, &prev, &share);
        if (!op) {
                if (share && !t->awaits_worker) {
                        log_debug("%s on pid %d waits for the worker share of uid %u",
                                  proto_method_name(t->head->method), (int)t->pid, (unsigned)t->head->caller->uid);
                        t->awaits_worker = true;
                        s->n_awaiting++;
                }
                return;
        }
        if (!op->holds_worker) {
                (void)share_take(&s->workers, op->caller->uid, op->privileged, NULL); /* checked */
                op->holds_worker = true;
        }
        if (t->awaits_worker) {
                t->awaits_worker = false;
                s->n_awaiting--;
        }
        if (prev)
                prev->next = op->next;
        else
                t->head = op->next;
        if (t->tail == op)
                t->tail = prev;
        op->next = NULL;
        t->running = op;
        if (op->holder && op->holder == t->holder)
                t->hold_begun = true;
        s->n_running++;
        op->dispatched_ms = uv_now(s->loop);
        op->seq = ++s->op_seq;
        op->stall_warned = false;
        uv_mutex_lock(&t->lock);
        t->watch_stat_fd = t->watch_status_fd = -1; /* until this op has pinned its process */
        op->state_before = t->known ? t->last_state : -1;
        uv_mutex_unlock(&t->lock);
        sched_stall_arm(s);
        report_start(s, t, op);
        op->work.data = op;
        if (proto_method_read_only(op->method) && lane_submit(&s->lane, &op->work) == 0)
                return;
        /* uv_queue_work only fails on a NULL callback. */
        (void)uv_queue_work(s->loop, &op->work, work_cb, after_work_cb);
}

/* The oldest ops waiting for a worker share that can have one now. */
static void admit_awaiting(struct sched *s)
{
        while (s->n_awaiting > 0) {
                struct sched_target *best = NULL;
                struct sched_op *best_op = NULL, *prev;
                bool share;
                for (unsigned b = 0; b < SCHED_BUCKETS; b++)
                        for (struct sched_target *t = s->table.buckets[b]; t; t = t->next_in_bucket) {
                                struct sched_op *op;
                                if (!t->awaits_worker || t->running || !(op = admissible(s, t, &prev, &share)) ||
                                    (best_op && best_op->queued_ns <= op->queued_ns))
                                        continue;
                                best = t;
                                best_op = op;
                        }
                if (!best)
                        return;
                start_next(s, best);
                if (best->awaits_worker)
                        return; /* cannot happen: it was checked */
        }
}

int sched_submit(struct sched *s, struct sched_op *op, struct share_refusal *ret)
{
        struct sched_target *t = sched_table_find(&s->table, op->req.pid);
        int r;

        op->privileged = access_privileged(s->cfg, op->caller);
        if (share_check(&s->queue, op->caller->uid, op->privileged, ret) != SHARE_OK)
                return -EAGAIN;
        /* Privileged callers, and a holder's next step (the calls it holds
         * back must not keep it out), pass max_queue_per_pid. */
        if (t && t->depth >= s->cfg->max_queue_per_pid && !op->privileged && !(op->holder && op->holder == t->holder)) {
                *ret = (struct share_refusal){ .verdict = SHARE_FULL, .key = "max_queue_per_pid",
                                               .limit = s->cfg->max_queue_per_pid };
                return -EAGAIN;
        }
        r = share_take(&s->queue, op->caller->uid, op->privileged, ret);
        if (r < 0)
                return r;
        op->holds_queue = true;
        if (!t) {
                t = sched_table_add(&s->table, op->req.pid);
                if (!t) {
                        op->holds_queue = false;
                        share_give(&s->queue, op->caller->uid, op->privileged);
                        return -ENOMEM;
                }
        } else if (t->cached) {
                sched_table_revive(&s->table, t);
        }
        op->target = t;
        op->sched = s;
        op->queued_ns = now_ns();
        op->next = NULL;
        if (t->tail)
                t->tail->next = op;
        else
                t->head = op;
        t->tail = op;
        t->depth++;
        s->n_ops++;
        start_next(s, t);
        return 0;
}

int sched_hold(struct sched *s, pid_t pid, const void *holder, enum proto_method method)
{
        struct sched_target *t = sched_table_find(&s->table, pid);

        if (t && t->holder)
                return t->holder == holder ? 0 : -EBUSY;
        if (!t && !(t = sched_table_add(&s->table, pid)))
                return -ENOMEM;
        if (t->cached)
                sched_table_revive(&s->table, t);
        t->holder = holder;
        t->hold_method = method;
        t->hold_begun = false;
        return 0;
}

void sched_unhold(struct sched *s, pid_t pid, const void *holder)
{
        struct sched_target *t = sched_table_find(&s->table, pid);

        if (!t || t->holder != holder)
                return;
        t->holder = NULL;
        t->hold_begun = false;
        /* after_work_cb() goes on with t; sched_cancel_queued() walks the
         * table, which must not change under it, and empties every queue. */
        if (t->finishing || s->cancelling)
                return;
        start_next(s, t);
        admit_awaiting(s);
}

unsigned sched_cancel_queued(struct sched *s)
{
        s->cancelling = true;
        for (unsigned b = 0; b < SCHED_BUCKETS; b++) {
                struct sched_target *t = s->table.buckets[b];
                while (t) {
                        struct sched_target *next = t->next_in_bucket;
                        struct sched_op *op;
                        while ((op = t->waiters) || (op = t->head)) {
                                if (op == t->waiters)
                                        t->waiters = op->next;
                                else if (!(t->head = op->next))
                                        t->tail = NULL;
                                t->depth--;
                                s->n_ops--;
                                op->cancelled = true;
                                op->result = (struct ops_result){ .error = OPS_SHUTTING_DOWN,
                                                                  .state = -1,
                                                                  .restore_tid = -1,
                                                                  .rolled_back = -1,
                                                                  .in_flight = -1 };
                                finish(s, op);
                        }
                        if (t->depth == 0 && !t->holder)
                                target_free(s, t);
                        t = next;
                }
        }
        s->cancelling = false;
        return s->n_running;
}

void sched_free(struct sched *s)
{
        for (unsigned b = 0; b < SCHED_BUCKETS; b++)
                while (s->table.buckets[b])
                        target_free(s, s->table.buckets[b]);
        share_free(&s->queue);
        share_free(&s->workers);
        procbusy_free(&s->busy);
}

void sched_set_watched(struct sched *s, bool on)
{
        s->report_starts = on;
        atomic_store(&s->want_progress, on);
}
