/* sched.c: the per-pid queues and their hand-off to worker threads. */
#include "sched.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static unsigned bucket_of(pid_t pid)
{
        return ((unsigned)pid * 2654435761u) % SCHED_BUCKETS;
}

static void on_async(uv_async_t *a);

void sched_init(struct sched *s, uv_loop_t *loop, const struct config *cfg,
                const struct driver *drv, sched_done_fn done)
{
        memset(s, 0, sizeof(*s));
        s->loop = loop;
        s->cfg = cfg;
        s->drv = drv;
        s->done = done;
        uv_async_init(loop, &s->async, on_async);
        s->async.data = s;
        /* Wake-ups alone never keep the loop running. */
        uv_unref((uv_handle_t *)&s->async);
}

void sched_close(struct sched *s)
{
        if (!uv_is_closing((uv_handle_t *)&s->async))
                uv_close((uv_handle_t *)&s->async, NULL);
}

static struct sched_target *find_target(struct sched *s, pid_t pid)
{
        for (struct sched_target *t = s->buckets[bucket_of(pid)]; t; t = t->next_in_bucket)
                if (t->pid == pid)
                        return t;
        return NULL;
}

static struct sched_target *target_new(struct sched *s, pid_t pid)
{
        struct sched_target *t = calloc(1, sizeof(*t));
        unsigned b = bucket_of(pid);

        if (!t)
                return NULL;
        if (uv_mutex_init(&t->lock) < 0) {
                free(t);
                return NULL;
        }
        t->pid = pid;
        t->sched = s;
        t->identity.pidfd = -1;
        t->last_state = -1;
        t->next_in_bucket = s->buckets[b];
        s->buckets[b] = t;
        s->n_targets++;
        return t;
}

static void target_free(struct sched *s, struct sched_target *t)
{
        struct sched_target **p = &s->buckets[bucket_of(t->pid)];

        while (*p != t)
                p = &(*p)->next_in_bucket;
        *p = t->next_in_bucket;
        s->n_targets--;
        target_close(&t->identity);
        uv_mutex_destroy(&t->lock);
        free(t);
}

static uint64_t now_ns(void)
{
        return uv_hrtime();
}

void sched_publish(struct sched_target *t, const struct target_identity *id, int state)
{
        bool wake;

        uv_mutex_lock(&t->lock);
        if (id) {
                t->known = true;
                t->owner = (struct policy_target){ id->ruid, id->euid, id->suid };
                t->start_time = id->start_time;
        }
        t->last_state = state;
        wake = t->want_wake && t->known && t->last_state >= 0;
        if (wake)
                t->want_wake = false;
        uv_mutex_unlock(&t->lock);
        if (wake)
                uv_async_send(&t->sched->async);
}

/* Answers t's waiting GetStates from the published state (loop thread). */
static void answer_waiters(struct sched *s, struct sched_target *t)
{
        struct sched_snapshot snap;
        struct sched_op *op;

        uv_mutex_lock(&t->lock);
        snap.known = t->known;
        snap.owner = t->owner;
        snap.start_time = t->start_time;
        snap.last_state = t->last_state;
        uv_mutex_unlock(&t->lock);
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
                if (op->req.has_start_time && op->req.start_time != snap.start_time) {
                        r->error = OPS_PROCESS_CHANGED;
                        r->start_time = op->req.start_time;
                        r->actual_start_time = snap.start_time;
                } else if (!policy_allowed(policy_decide(s->cfg, op->caller, &snap.owner, true))) {
                        r->error = OPS_PERMISSION_DENIED;
                }
                s->done(s, op);
        }
}

static void on_async(uv_async_t *a)
{
        struct sched *s = a->data;

        for (unsigned b = 0; b < SCHED_BUCKETS; b++)
                for (struct sched_target *t = s->buckets[b]; t; t = t->next_in_bucket)
                        if (t->waiters)
                                answer_waiters(s, t);
}

int sched_wait_state(struct sched *s, struct sched_op *op)
{
        struct sched_target *t = find_target(s, op->req.pid);
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
        op->target = t;
        op->sched = s;
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

        ops_execute(s->cfg, s->drv, op->target, op->method, &op->req, op->caller, &op->result);
}

static void start_next(struct sched *s, struct sched_target *t);

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
        t->running = NULL;
        t->depth--;
        s->n_ops--;
        s->n_running--;
        s->done(s, op);
        start_next(s, t);
}

static void start_next(struct sched *s, struct sched_target *t)
{
        struct sched_op *op = t->head;

        if (t->running)
                return;
        if (!op) {
                if (t->depth == 0)
                        target_free(s, t);
                return;
        }
        t->head = op->next;
        if (!t->head)
                t->tail = NULL;
        op->next = NULL;
        t->running = op;
        s->n_running++;
        op->work.data = op;
        /* uv_queue_work only fails on a NULL callback. */
        (void)uv_queue_work(s->loop, &op->work, work_cb, after_work_cb);
}

int sched_submit(struct sched *s, struct sched_op *op, unsigned *ret_limit)
{
        struct sched_target *t = find_target(s, op->req.pid);

        if (s->n_ops >= s->cfg->max_queue_total) {
                *ret_limit = s->cfg->max_queue_total;
                return -EAGAIN;
        }
        if (t && t->depth >= s->cfg->max_queue_per_pid) {
                *ret_limit = s->cfg->max_queue_per_pid;
                return -EAGAIN;
        }
        if (!t) {
                t = target_new(s, op->req.pid);
                if (!t)
                        return -ENOMEM;
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

bool sched_running_snapshot(struct sched *s, pid_t pid, struct sched_snapshot *ret)
{
        struct sched_target *t = find_target(s, pid);

        if (!t || !t->running)
                return false;
        uv_mutex_lock(&t->lock);
        ret->known = t->known;
        ret->owner = t->owner;
        ret->start_time = t->start_time;
        ret->last_state = t->last_state;
        uv_mutex_unlock(&t->lock);
        ret->running = t->running->method;
        return true;
}

unsigned sched_cancel_queued(struct sched *s)
{
        for (unsigned b = 0; b < SCHED_BUCKETS; b++) {
                struct sched_target *t = s->buckets[b];
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
                                s->done(s, op);
                        }
                        if (t->depth == 0)
                                target_free(s, t);
                        t = next;
                }
        }
        return s->n_running;
}

void sched_done(struct sched *s)
{
        for (unsigned b = 0; b < SCHED_BUCKETS; b++)
                while (s->buckets[b])
                        target_free(s, s->buckets[b]);
}
