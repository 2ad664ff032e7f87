/* watch.c: watchers and the events they get (watch.h). */
#include "jobs/watch.h"

#include <malloc.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth/access.h"
#include "net/conn.h"
#include "cudackpt/protocol.h"
#include "base/log.h"
#include "host/pidns.h"
#include "run/sched.h"
#include "jobs/watchsel.h"

struct watcher {
        struct watcher *prev, *next;
        struct watch_table *table;
        struct conn *conn;              /* NULL once closed during its set-up */
        struct conn_hook closing;       /* on conn: its closing ends the watcher */
        struct proto_group_request sel; /* pids and tree in the daemon's namespace */
        char *cgroup_sel;               /* a cgroup selector in ours (owned) */
        bool ready;                     /* set up: events flowing */
        pid_t conn_pid;                 /* the caller, for its cgroup namespace */
        bool setup_pending;             /* setup is on a worker: it frees a closed watcher */
        struct watchbuf buf;            /* events not yet written; cut: on_flush_cb closes it */
        ino_t ns;                       /* its pid namespace when another than ours, else 0 */
        uv_work_t setup;                /* reads a cgroup selector's namespace root */
        int setup_error;
};

/* Memory freed by watchers that makes the daemon give memory back to the
 * system (malloc_trim), a little after the last of a burst left. */
#define WATCH_TRIM_BYTES (1024 * 1024)
#define WATCH_TRIM_DELAY_MS 1000

bool watch_active(const struct watch_table *t)
{
        return t->n > 0;
}

/* ---- sending --------------------------------------------------------------- */

static void on_flush_cb(uv_check_t *check);

/* What the last scan knows of the process of e. */
static const struct procscan_proc *proc_of(const struct watch_table *t, const struct watch_event *e)
{
        return e->proc ? e->proc : procscan_find(&t->scan, e->pid, e->start_time);
}

/* Hands w's pending output to its connection.  While a write is in flight
 * the next events wait in w->buf: one write per watcher at a time. */
static void flush_one(struct watch_table *t, struct watcher *w)
{
        struct conn *c = w->conn;
        size_t len, cap;
        char *data = watchbuf_take(&t->pool, &w->buf, &len, &cap);

        conn_send_bytes(c, data, len);
        if (c->closing)
                return; /* w went with it (watcher_closing_cb) */
        watchbuf_writing(&t->pool, &w->buf, conn_write_pending(c) ? cap : 0);
}

static void arm_flush(struct watch_table *t)
{
        if (!uv_is_active((uv_handle_t *)&t->flush))
                uv_check_start(&t->flush, on_flush_cb);
}

static void watcher_closing_cb(struct conn_hook *h, struct conn *c);

/* The connection wrote all it had: the events gathered meanwhile go. */
static void watcher_drained_cb(struct conn_hook *h, struct conn *c)
{
        struct watcher *w = (struct watcher *)((char *)h - offsetof(struct watcher, closing));

        (void)c;
        watchbuf_drained(&w->table->pool, &w->buf);
        if (w->buf.len > 0)
                arm_flush(w->table);
}

/* Appends an event to w's pending output, written at the end of this turn
 * of the loop (on_flush_cb).  Never closes a connection itself: it runs in
 * the middle of the lease table's and the scheduler's updates.  A watcher
 * whose buffer is cut (watchbuf.h) is closed by on_flush_cb. */
static void queue_bytes(struct watch_table *t, struct watcher *w, const char *data, size_t len)
{
        if (w->buf.cut)
                return;
        (void)watchbuf_append(&t->pool, &w->buf, data, len);
        arm_flush(t);
}

/* The events of one loop turn, one write per watcher with none in flight. */
static void on_flush_cb(uv_check_t *check)
{
        struct watch_table *t = check->data;
        struct watcher *w, *next;

        uv_check_stop(check);
        for (w = t->head; w; w = next) {
                next = w->next; /* a failed write may cut w off */
                if (!w->conn)
                        continue;
                if (w->buf.cut) {
                        metrics_count(t->metrics, METRICS_CUT_SLOW_READER);
                        log_warning("Disconnecting watcher uid %u pid %d: its unread events would take over %zu "
                                    "bytes (max_watcher_bytes %zu, all watchers' max_watch_bytes %zu)",
                                    (unsigned)w->conn->caller.uid, (int)w->conn->caller.pid, w->buf.mem,
                                    t->cfg->max_watcher_bytes, t->cfg->max_watch_bytes);
                        conn_close(w->conn);
                } else if (w->buf.len > 0 && w->buf.in_flight == 0) {
                        flush_one(t, w);
                }
        }
}

/* pid (ours) as w's caller sees it; a process that has exited by the last
 * scan's note.  False when w may not see it. */
static bool vpid_for(const struct watch_table *t, const struct watcher *w, const struct watch_event *e, pid_t *ret)
{
        const struct procscan_proc *p;

        if (!e->gone && access_sees(&w->conn->caller, e->pid, ret))
                return true;
        if (e->gone && !w->conn->caller.pidns.other) {
                *ret = e->pid; /* the daemon's own namespace: no translation */
                return true;
        }
        if (!w->ns || !(p = proc_of(t, e)))
                return false;
        for (size_t k = 0; k < p->n_vpids; k++)
                if (p->vpids[k].ns == w->ns) {
                        *ret = p->vpids[k].vpid;
                        return true;
                }
        return false;
}

/* The event is serialised once for the watchers in the daemon's pid
 * namespace, and once per watcher for the others (their pid differs). */
void watch_emit(struct watch_table *t, const struct watch_event *e)
{
        struct watcher *w, *next;
        char *shared = NULL;
        size_t shared_len = 0;

        for (w = t->head; w; w = next) {
                const struct policy_caller *caller;
                pid_t vpid = 0;
                next = w->next; /* queue_bytes may cut w off */
                if (!w->ready || !w->conn || w->conn->closing || !watchsel_selects(&w->sel, w->cgroup_sel, &t->scan, e))
                        continue;
                caller = &w->conn->caller;
                if (e->pid > 0 && (!vpid_for(t, w, e, &vpid) || !access_may_read(t->cfg, caller, &e->owner)))
                        continue;
                metrics_count(t->metrics, METRICS_WATCH_EVENTS);
                if (caller->pidns.other) {
                        cJSON *msg = watchevent_json(e, vpid);
                        size_t len = 0;
                        char *data = msg ? proto_serialize(msg, &len) : NULL;
                        cJSON_Delete(msg);
                        if (data)
                                queue_bytes(t, w, data, len);
                        free(data);
                        continue;
                }
                if (!shared) {
                        cJSON *msg = watchevent_json(e, vpid);
                        shared = msg ? proto_serialize(msg, &shared_len) : NULL;
                        cJSON_Delete(msg);
                        if (!shared)
                                return;
                }
                queue_bytes(t, w, shared, shared_len);
        }
        free(shared);
}

/* ---- what the events tell -------------------------------------------------- */

void watch_op_started(struct watch_table *t, const struct sched_op *op)
{
        struct watch_event e;

        if (!watch_active(t))
                return;
        e = watchevent_of_op(op, WATCH_STARTED);
        watch_emit(t, &e);
}

void watch_op_finished(struct watch_table *t, const struct sched_op *op)
{
        const struct ops_result *r = &op->result;
        struct watch_event e;

        if (!watch_active(t) || !op->start_reported)
                return;
        e = watchevent_of_op(op, WATCH_FINISHED);
        if (r->pinned) { /* what this operation pinned, not what an earlier one knew */
                e.pid = r->pinned_pid;
                e.start_time = r->pinned_start_time;
                e.owner = r->pinned_owner;
        }
        e.result = ops_error_short_name(r->error);
        e.gone = r->error == OPS_PROCESS_GONE;
        e.state = r->state;
        e.duration_ms = (double)(op->finished_ns - op->started_ns) / 1e6;
        watch_emit(t, &e);
        if (r->state >= 0 && r->state != op->state_before) {
                e.type = WATCH_STATE;
                e.result = NULL;
                e.duration_ms = -1;
                watch_emit(t, &e);
        }
}

static void progress_sample_cb(struct progress *pg, const struct progress_sample *s)
{
        struct watch_table *t = (struct watch_table *)((char *)pg - offsetof(struct watch_table, progress));
        struct watch_event e = watchevent_of_progress(s);

        watch_emit(t, &e);
}

static struct watch_table *table_of_scan(struct procscan *ps)
{
        return (struct watch_table *)((char *)ps - offsetof(struct watch_table, scan));
}

/* Notes the pid of every process of the scan in the namespace of every
 * watcher of another one (loop thread: one ioctl each). */
static void scan_found_cb(struct procscan *ps, struct procscan_proc *procs, size_t n)
{
        for (struct watcher *w = table_of_scan(ps)->head; w; w = w->next) {
                if (!w->ns || !w->conn)
                        continue;
                for (size_t i = 0; i < n; i++) {
                        pid_t vpid;
                        if (pidns_to_caller(&w->conn->caller.pidns, procs[i].pid, &vpid) == 0)
                                procscan_note_vpid(&procs[i], w->ns, vpid);
                }
        }
}

static void proc_event(struct procscan *ps, const struct procscan_proc *p, const char *type)
{
        struct watch_event e = watchevent_of_proc(p, type);

        watch_emit(table_of_scan(ps), &e);
}

static void scan_exited_cb(struct procscan *ps, const struct procscan_proc *p)
{
        proc_event(ps, p, WATCH_EXITED);
}

static void scan_appeared_cb(struct procscan *ps, const struct procscan_proc *p)
{
        proc_event(ps, p, WATCH_APPEARED);
}

/* ---- the table ------------------------------------------------------------- */

void watch_init(struct watch_table *t, const struct watch_deps *deps)
{
        static const char *const keys[] = { "max_watchers", "max_watchers_per_uid", "max_watchers_reserved" };

        *t = (struct watch_table){ .loop = deps->loop, .cfg = deps->cfg, .sched = deps->sched,
                                   .metrics = deps->metrics, .life = deps->life };
        t->scan = (struct procscan){ .loop = deps->loop, .source = deps->source, .life = deps->life,
                                     .period_ms = deps->cfg->watch_scan_ms, .found_cb = scan_found_cb,
                                     .exited_cb = scan_exited_cb, .appeared_cb = scan_appeared_cb };
        procscan_init(&t->scan);
        t->progress = (struct progress){ .loop = deps->loop, .sched = deps->sched,
                                         .interval_ms = deps->cfg->progress_interval_ms,
                                         .sample_cb = progress_sample_cb };
        progress_init(&t->progress);
        uv_check_init(t->loop, &t->flush);
        t->flush.data = t;
        uv_timer_init(t->loop, &t->trim_timer);
        t->trim_timer.data = t;
        uv_unref((uv_handle_t *)&t->trim_timer);
        share_init(&t->share, keys, t->cfg->max_watchers, t->cfg->max_watchers_per_uid, t->cfg->max_watchers_reserved);
        watchbuf_pool_init(&t->pool, t->cfg->max_watcher_bytes, t->cfg->max_watch_bytes, t->share.limit,
                           t->share.reserved);
}

void watch_close(struct watch_table *t)
{
        procscan_close(&t->scan);
        progress_close(&t->progress);
        if (!uv_is_closing((uv_handle_t *)&t->flush))
                uv_close((uv_handle_t *)&t->flush, NULL);
        if (!uv_is_closing((uv_handle_t *)&t->trim_timer))
                uv_close((uv_handle_t *)&t->trim_timer, NULL);
}

void watch_free(struct watch_table *t)
{
        share_free(&t->share);
}

/* ---- watchers -------------------------------------------------------------- */

/* The watcher is set up: it gets events from now on. */
static void watcher_ready(struct watcher *w)
{
        struct watch_event e = WATCH_EVENT_INIT("watching");

        w->ready = true;
        conn_send(w->conn, watchevent_json(&e, 0));
        /* The first watcher ready starts the scans (one set up before it may
         * still wait for its cgroup's root). */
        procscan_kick(&w->table->scan);
}

static void watcher_free(struct watcher *w)
{
        free(w->buf.out);
        proto_group_request_free(&w->sel);
        free(w->cgroup_sel);
        free(w);
}

/* A cgroup selector is the caller's cgroup namespace's (worker thread). */
static void setup_work(uv_work_t *work)
{
        struct watcher *w = work->data;

        w->setup_error = watchsel_cgroup(w->conn_pid, w->sel.cgroup, &w->cgroup_sel);
}

static void setup_done_cb(uv_work_t *work, int status)
{
        struct watcher *w = work->data;
        struct conn *c = w->conn;

        (void)status;
        w->setup_pending = false;
        if (!c) {
                watcher_free(w); /* closed meanwhile */
                return;
        }
        if (w->setup_error == 0) {
                watcher_ready(w);
                return;
        }
        /* Sending may close c, and with it free w: nothing of w after. */
        watchsel_refuse_cgroup(c, w->setup_error, w->sel.cgroup);
}

/* A place among the watchers, within the caller's uid's share; false when
 * refused (answered). */
static bool admit(struct watch_table *t, struct conn *c, struct watcher *w)
{
        struct share_refusal why = { 0 };
        cJSON *p;

        w->buf.privileged = access_privileged(t->cfg, &c->caller);
        if (share_take(&t->share, c->caller.uid, w->buf.privileged, &why) == 0)
                return true;
        p = cJSON_CreateObject();
        if (p) {
                cJSON_AddNumberToObject(p, "limit", why.limit);
                cJSON_AddStringToObject(p, "resource", why.key);
        }
        log_notice("Refusing a Watch of uid %u pid %d: %s (%u) reached", (unsigned)c->caller.uid,
                   (int)c->caller.pid, why.key, why.limit);
        conn_send(c, proto_error_new(CUDACKPT_ERROR_QUEUE_FULL, p));
        return false;
}

/* w joins the table, c serves nothing else until it closes. */
static void watcher_add(struct watch_table *t, struct conn *c, struct watcher *w)
{
        w->table = t;
        w->conn = c;
        w->conn_pid = c->caller.pid;
        if (c->caller.pidns.other) {
                struct stat st;
                if (c->caller.pidns.fd >= 0 && fstat(c->caller.pidns.fd, &st) == 0)
                        w->ns = st.st_ino;
        }
        w->closing.closing_cb = watcher_closing_cb;
        w->closing.drained_cb = watcher_drained_cb;
        conn_hook_add(c, &w->closing);
        conn_set_streaming(c, true);
        conn_ref(c);
        conn_request_begin(c);
        w->next = t->head;
        if (t->head)
                t->head->prev = w;
        t->head = w;
        t->n++;
        sched_set_watched(t->sched, true);
        if (t->n == 1)
                progress_start(&t->progress);
}

void watch_call(struct watch_table *t, struct conn *c, struct proto_call *call)
{
        struct watcher *w;

        if (call->oneway)
                return;
        if (!call->more) {
                conn_send(c, proto_error_new(CUDACKPT_VARLINK_EXPECTED_MORE, NULL));
                return;
        }
        if (life_stopping(t->life)) {
                conn_send(c, proto_error_new(CUDACKPT_ERROR_SHUTTING_DOWN, NULL));
                return;
        }
        w = calloc(1, sizeof(*w));
        if (!w) {
                conn_close(c);
                return;
        }
        if (!watchsel_take(t->cfg, c, call, &w->sel) || !admit(t, c, w)) {
                watcher_free(w);
                return;
        }
        watcher_add(t, c, w);
        if (w->sel.kind == PROTO_SELECT_CGROUP) {
                w->setup.data = w;
                w->setup_pending = true;
                (void)uv_queue_work(t->loop, &w->setup, setup_work, setup_done_cb);
                return;
        }
        watcher_ready(w);
}

static void on_trim_timer_cb(uv_timer_t *timer)
{
        struct watch_table *t = timer->data;

        t->freed = 0;
        (void)malloc_trim(0);
}

/* The watcher's connection is closing: the watcher goes with it. */
static void watcher_closing_cb(struct conn_hook *h, struct conn *c)
{
        struct watcher *w = (struct watcher *)((char *)h - offsetof(struct watcher, closing));
        struct watch_table *t = w->table;

        share_give(&t->share, c->caller.uid, w->buf.privileged);
        /* What its buffers took is freed (the one in flight with the
         * connection); after a burst of such, memory goes back to the
         * system, which the allocator alone would keep. */
        t->freed += watchbuf_release(&t->pool, &w->buf);
        if (t->freed >= WATCH_TRIM_BYTES || t->n == 1)
                uv_timer_start(&t->trim_timer, on_trim_timer_cb, WATCH_TRIM_DELAY_MS, 0);
        if (w->prev)
                w->prev->next = w->next;
        else
                t->head = w->next;
        if (w->next)
                w->next->prev = w->prev;
        t->n--;
        w->conn = NULL;
        if (!w->setup_pending)
                watcher_free(w); /* else setup_done_cb() frees it */
        if (t->n == 0) {
                /* What the scans knew is no baseline for a later watcher. */
                procscan_stop(&t->scan);
                progress_stop(&t->progress);
                sched_set_watched(t->sched, false);
        }
        conn_request_done(c); /* c is closing: nothing more is read */
        conn_unref(c);
}
