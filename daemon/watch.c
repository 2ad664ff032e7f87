/* watch.c: watchers, the events they get, and the scan that finds CUDA
 * processes appearing and exiting (watch.h). */
#include "watch.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access.h"
#include "conn.h"
#include "cudackpt/protocol.h"
#include "discover.h"
#include "log.h"
#include "metrics.h"
#include "pidns.h"
#include "sched.h"
#include "server.h"
#include "target.h"

struct watcher {
        struct watcher *prev, *next;
        struct conn *conn;              /* NULL once closed during its set-up */
        struct proto_group_request sel; /* pids and tree in the daemon's namespace */
        char *cgroup_sel;               /* a cgroup selector in ours (owned) */
        bool ready;                     /* set up: events flowing */
        pid_t conn_pid;                 /* the caller, for its cgroup namespace */
        bool setup_pending;             /* setup is on a worker: it frees a closed watcher */
        char *out;                      /* events not yet handed to the connection */
        size_t out_len, out_cap;
        size_t in_flight;               /* the size of the buffer being written, 0 none */
        size_t mem;                     /* out_cap + in_flight, counted in the table's mem */
        bool cut;                       /* too much unread: on_flush closes it */
        bool privileged;                /* its caller has a reserve in the share */
        ino_t ns;                       /* its pid namespace when another than ours, else 0 */
        uv_work_t setup;                /* reads a cgroup selector's namespace root */
        int setup_error;
};

/* Memory freed by watchers that makes the daemon give memory back to the
 * system (malloc_trim), a little after the last of a burst left. */
#define WATCH_TRIM_BYTES (1024 * 1024)
#define WATCH_TRIM_DELAY_MS 1000

/* How deep a scan follows a CUDA process's parents, for tree selectors. */
#define WATCH_MAX_ANCESTORS 64

/* A CUDA process a scan found. */
struct watch_proc {
        pid_t pid;
        uint64_t start_time;
        struct policy_target owner;
        char comm[32];
        char *cgroup;                   /* owned; NULL when unknown */
        pid_t *ancestors;               /* owned: parent, its parent, ... up to 1 */
        size_t n_ancestors;
        /* Its pid in the pid namespaces of watchers of other namespaces,
         * taken while it lived: once it has exited the kernel cannot tell. */
        struct watch_vpid *vpids;       /* owned */
        size_t n_vpids;
};

struct watch_vpid {
        ino_t ns;
        pid_t vpid;
};

struct scan {
        uv_work_t work;
        struct server *srv;
        struct watch_proc *procs;
        size_t n;
        int error;
};

static struct watch_table *table_of(struct server *s)
{
        return &s->watch;
}

bool watch_active(const struct server *s)
{
        return s->watch.n > 0;
}

/* ---- sending --------------------------------------------------------------- */

static int cmp_proc(const void *a, const void *b);
static void on_flush(uv_check_t *check);

/* What the last scan knows of the process of e. */
static const struct watch_proc *proc_of(const struct server *s, const struct watch_event *e)
{
        const struct watch_table *t = &s->watch;
        struct watch_proc key = { .pid = e->pid };
        const struct watch_proc *p;

        if (e->proc)
                return e->proc;
        p = t->n_procs ? bsearch(&key, t->procs, t->n_procs, sizeof(*t->procs), cmp_proc) : NULL;
        return p && (!e->start_time || p->start_time == e->start_time) ? p : NULL;
}

/* Cgroup and tree selections follow the scan: a process is in them from
 * the first scan that finds it there. */
static bool selected(const struct server *s, const struct watcher *w, const struct watch_event *e)
{
        const struct watch_proc *p;

        switch (w->sel.kind) {
        case PROTO_SELECT_PIDS:
                for (unsigned i = 0; i < w->sel.n_pids; i++) {
                        const struct proto_pid_ref *r = &w->sel.pids[i];
                        if (r->pid == e->pid && (!r->has_start_time || !e->start_time || r->start_time == e->start_time))
                                return true;
                }
                return false;
        case PROTO_SELECT_CGROUP:
                p = proc_of(s, e);
                return p && p->cgroup && discover_cgroup_within(p->cgroup, w->cgroup_sel);
        case PROTO_SELECT_TREE:
                if (e->pid == w->sel.tree)
                        return true;
                p = proc_of(s, e);
                for (size_t i = 0; p && i < p->n_ancestors; i++)
                        if (p->ancestors[i] == w->sel.tree)
                                return true;
                return false;
        default:
                return true;
        }
}

static cJSON *event_json(const struct watch_event *e, pid_t vpid)
{
        cJSON *p = cJSON_CreateObject(), *o = p ? cJSON_AddObjectToObject(p, "event") : NULL;
        struct timespec ts;
        char buf[32];

        if (!o) {
                cJSON_Delete(p);
                return NULL;
        }
        clock_gettime(CLOCK_REALTIME, &ts);
        cJSON_AddStringToObject(o, "type", e->type);
        cJSON_AddNumberToObject(o, "time", (double)ts.tv_sec + (double)(ts.tv_nsec / 1000) / 1e6);
        if (vpid > 0)
                cJSON_AddNumberToObject(o, "pid", vpid);
        if (e->start_time)
                cJSON_AddNumberToObject(o, "start_time", (double)e->start_time);
        if (e->method < PROTO_METHODS)
                cJSON_AddStringToObject(o, "method", proto_method_name(e->method));
        if (e->group < PROTO_METHODS)
                cJSON_AddStringToObject(o, "group", proto_method_name(e->group));
        if (e->result)
                cJSON_AddStringToObject(o, "result", e->result);
        if (e->state >= 0)
                cJSON_AddStringToObject(o, "state", proto_state_string(e->state, buf, sizeof(buf)));
        if (e->duration_ms >= 0)
                cJSON_AddNumberToObject(o, "duration_ms", e->duration_ms);
        if (e->caller_uid >= 0)
                cJSON_AddNumberToObject(o, "caller_uid", (double)e->caller_uid);
        if (e->lease)
                cJSON_AddNumberToObject(o, "lease", (double)e->lease);
        if (e->reason)
                cJSON_AddStringToObject(o, "reason", e->reason);
        if (e->undo)
                cJSON_AddStringToObject(o, "undo", e->undo);
        if (e->command)
                cJSON_AddStringToObject(o, "command", e->command);
        if (e->step)
                cJSON_AddStringToObject(o, "step", e->step);
        if (e->owner.ruid != (uid_t)-1 && e->pid > 0)
                cJSON_AddNumberToObject(o, "uid", e->owner.ruid);
        if (e->bytes >= 0)
                cJSON_AddNumberToObject(o, "bytes", (double)e->bytes);
        if (e->total_bytes >= 0)
                cJSON_AddNumberToObject(o, "total_bytes", (double)e->total_bytes);
        return proto_reply_continues(p);
}

/* w's buffers now take mem bytes: the table's count follows. */
static void account(struct watch_table *t, struct watcher *w, size_t mem)
{
        t->mem = t->mem - w->mem + mem;
        if (!w->privileged)
                t->mem_unprivileged = t->mem_unprivileged - w->mem + mem;
        w->mem = mem;
}

/* Whether w's buffers may take mem bytes: its own bound, all watchers',
 * and for an unprivileged caller's the part of max_watch_bytes that the
 * watchers' reserve does not keep for privileged ones (in the proportion
 * max_watchers_reserved / max_watchers). */
static bool may_take(const struct server *s, const struct watcher *w, size_t mem)
{
        const struct watch_table *t = &s->watch;
        size_t all = s->cfg->max_watch_bytes;
        size_t unprivileged = all - all / t->share.limit * t->share.reserved;

        return mem <= s->cfg->max_watcher_bytes && t->mem - w->mem + mem <= all &&
               (w->privileged || t->mem_unprivileged - w->mem + mem <= unprivileged);
}

/* Hands w's pending output to its connection.  While a write is in flight
 * the next events wait in w->out: one write per watcher at a time. */
static void flush_one(struct server *s, struct watcher *w)
{
        struct conn *c = w->conn;
        char *data = w->out;
        size_t len = w->out_len, cap = w->out_cap;

        w->out = NULL;
        w->out_len = w->out_cap = 0;
        account(table_of(s), w, 0);
        conn_send_bytes(c, data, len);
        if (c->closing)
                return; /* w went with it (watch_conn_closed) */
        w->in_flight = conn_write_pending(c) ? cap : 0;
        account(table_of(s), w, w->in_flight);
}

static void arm_flush(struct server *s)
{
        if (!uv_is_active((uv_handle_t *)&table_of(s)->flush))
                uv_check_start(&table_of(s)->flush, on_flush);
}

/* The connection wrote all it had: the events gathered meanwhile go. */
static void on_drain_cb(struct conn *c)
{
        struct watcher *w = c->watcher;

        if (!w)
                return;
        account(table_of(c->server), w, w->out_cap);
        w->in_flight = 0;
        if (w->out_len > 0)
                arm_flush(c->server);
}

/* Appends an event to w's pending output, written at the end of this turn
 * of the loop (on_flush).  Never closes a connection itself: it runs in
 * the middle of the lease table's and the scheduler's updates.  A watcher
 * whose buffers would pass max_watcher_bytes, or all watchers' pass
 * max_watch_bytes, is cut by on_flush. */
static void queue_bytes(struct server *s, struct watcher *w, const char *data, size_t len)
{
        struct watch_table *t = table_of(s);
        size_t need = w->out_len + len;

        if (w->cut)
                return;
        if (need > w->out_cap) {
                size_t cap = w->out_cap ? w->out_cap : 1024;
                char *nb;
                while (cap < need)
                        cap *= 2;
                if (!may_take(s, w, cap + w->in_flight) || !(nb = realloc(w->out, cap))) {
                        w->cut = true;
                        goto arm;
                }
                w->out = nb;
                w->out_cap = cap;
                account(t, w, cap + w->in_flight);
        }
        memcpy(w->out + w->out_len, data, len);
        w->out_len = need;
arm:
        arm_flush(s);
}

/* The events of one loop turn, one write per watcher with none in flight. */
static void on_flush(uv_check_t *check)
{
        struct server *s = check->data;
        struct watcher *w, *next;

        uv_check_stop(check);
        for (w = table_of(s)->head; w; w = next) {
                next = w->next; /* a failed write may cut w off */
                if (!w->conn)
                        continue;
                if (w->cut) {
                        metrics_count(&s->metrics, METRICS_CUT_SLOW_READER);
                        log_warning("Disconnecting watcher uid %u pid %d: its unread events would take over %zu "
                                    "bytes (max_watcher_bytes %zu, all watchers' max_watch_bytes %zu)",
                                    (unsigned)w->conn->caller.uid, (int)w->conn->caller.pid, w->mem,
                                    s->cfg->max_watcher_bytes, s->cfg->max_watch_bytes);
                        conn_close(w->conn);
                } else if (w->out_len > 0 && w->in_flight == 0) {
                        flush_one(s, w);
                }
        }
}

/* pid (ours) as w's caller sees it; a process that has exited by the last
 * scan's note.  False when w may not see it. */
static bool vpid_for(const struct server *s, const struct watcher *w, const struct watch_event *e, pid_t *ret)
{
        const struct watch_proc *p;

        if (!e->gone && access_sees(&w->conn->caller, e->pid, ret))
                return true;
        if (e->gone && !w->conn->caller.pidns.other) {
                *ret = e->pid; /* the daemon's own namespace: no translation */
                return true;
        }
        if (!w->ns || !(p = proc_of(s, e)))
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
void watch_emit(struct server *s, const struct watch_event *e)
{
        struct watcher *w, *next;
        char *shared = NULL;
        size_t shared_len = 0;

        for (w = table_of(s)->head; w; w = next) {
                const struct policy_caller *caller;
                pid_t vpid = 0;
                next = w->next; /* queue_bytes may cut w off */
                if (!w->ready || !w->conn || w->conn->closing || !selected(s, w, e))
                        continue;
                caller = &w->conn->caller;
                if (e->pid > 0 && (!vpid_for(s, w, e, &vpid) || !access_may_read(s->cfg, caller, &e->owner)))
                        continue;
                metrics_count(&s->metrics, METRICS_WATCH_EVENTS);
                if (caller->pidns.other) {
                        cJSON *msg = event_json(e, vpid);
                        size_t len = 0;
                        char *data = msg ? proto_serialize(msg, &len) : NULL;
                        cJSON_Delete(msg);
                        if (data)
                                queue_bytes(s, w, data, len);
                        free(data);
                        continue;
                }
                if (!shared) {
                        cJSON *msg = event_json(e, vpid);
                        shared = msg ? proto_serialize(msg, &shared_len) : NULL;
                        cJSON_Delete(msg);
                        if (!shared)
                                return;
                }
                queue_bytes(s, w, shared, shared_len);
        }
        free(shared);
}

/* ---- operations ------------------------------------------------------------ */

static struct watch_event op_event(const struct sched_op *op, const char *type)
{
        struct watch_event e = WATCH_EVENT_INIT(type);
        struct sched_target *t = op->target;

        uv_mutex_lock(&t->lock);
        e.pid = t->known ? t->watch_pid : op->req.pid;
        e.start_time = t->start_time;
        e.owner = t->owner;
        uv_mutex_unlock(&t->lock);
        if (e.pid <= 0)
                e.pid = op->req.pid;
        e.method = op->method;
        e.group = proto_method_is_group(op->parent) ? op->parent : PROTO_METHODS;
        e.caller_uid = (long long)op->caller->uid;
        return e;
}

void watch_op_started(struct server *s, const struct sched_op *op)
{
        struct watch_event e;

        if (!watch_active(s))
                return;
        e = op_event(op, WATCH_STARTED);
        watch_emit(s, &e);
}

void watch_op_finished(struct server *s, const struct sched_op *op)
{
        const struct ops_result *r = &op->result;
        struct watch_event e;

        if (!watch_active(s) || !op->start_reported)
                return;
        e = op_event(op, WATCH_FINISHED);
        if (r->pinned) { /* what this operation pinned, not what an earlier one knew */
                e.pid = r->pinned_pid;
                e.start_time = r->pinned_start_time;
                e.owner = r->pinned_owner;
        }
        e.result = ops_error_short_name(r->error);
        e.gone = r->error == OPS_PROCESS_GONE;
        e.state = r->state;
        e.duration_ms = (double)(op->finished_ns - op->started_ns) / 1e6;
        watch_emit(s, &e);
        if (r->state >= 0 && r->state != op->state_before) {
                e.type = WATCH_STATE;
                e.result = NULL;
                e.duration_ms = -1;
                watch_emit(s, &e);
        }
}

/* ---- progress -------------------------------------------------------------- */

/* One reading of a running checkpoint's or restore's process (a worker
 * reads it: the loop reads no /proc). */
struct sample {
        uv_work_t work;
        struct server *srv;
        struct watch_event e;
        pid_t target;           /* the op's target and which op it was */
        uint64_t seq;
        int status_fd;          /* owned, a dup of the op's */
        uint64_t rss_start, rss;
        int error;
};

static void sample_work(uv_work_t *w)
{
        struct sample *sm = w->data;
        struct target_identity id = { .pid = sm->e.pid, .pidfd = -1, .status_fd = sm->status_fd };

        sm->error = target_rss(&id, &sm->rss);
}

static void sample_done(uv_work_t *w, int status)
{
        struct sched_target *t;
        struct sample *sm = w->data;
        struct server *s = sm->srv;

        (void)status;
        table_of(s)->sampling--;
        close(sm->status_fd);
        /* A reading that comes back after its op has ended says nothing new;
         * one a little below the last (the driver frees some memory as it
         * finishes) repeats the last: the progress never goes back. */
        t = sm->error == 0 ? sched_running_target(&s->sched, sm->target, sm->seq) : NULL;
        if (t) {
                uint64_t moved = sm->rss > sm->rss_start ? sm->rss - sm->rss_start : 0;
                if (t->progress_seq != sm->seq) {
                        t->progress_seq = sm->seq;
                        t->progress_peak = 0;
                }
                if (moved < t->progress_peak)
                        moved = t->progress_peak;
                t->progress_peak = moved;
                sm->e.bytes = (int64_t)moved;
                watch_emit(s, &sm->e);
        }
        free(sm);
}

static void sample_one(void *ctx, struct sched_target *t)
{
        struct server *s = ctx;
        struct sample *sm;
        int fd = -1;

        if (!t->running->start_reported)
                return;
        sm = calloc(1, sizeof(*sm));
        if (!sm)
                return;
        sm->e = WATCH_EVENT_INIT(WATCH_PROGRESS);
        uv_mutex_lock(&t->lock);
        if (t->in_checkpoint && t->watch_status_fd >= 0) {
                fd = fcntl(t->watch_status_fd, F_DUPFD_CLOEXEC, 3);
                sm->rss_start = t->rss_start;
                sm->e.total_bytes = t->total_bytes;
                sm->e.pid = t->watch_pid;
                sm->e.start_time = t->start_time;
                sm->e.owner = t->owner;
        }
        uv_mutex_unlock(&t->lock);
        if (fd < 0) {
                free(sm);
                return;
        }
        sm->srv = s;
        sm->status_fd = fd;
        sm->target = t->pid;
        sm->seq = t->running->seq;
        sm->e.method = t->running->method;
        sm->e.group = proto_method_is_group(t->running->parent) ? t->running->parent : PROTO_METHODS;
        sm->e.step = "checkpoint";
        sm->work.data = sm;
        table_of(s)->sampling++;
        (void)uv_queue_work(s->loop, &sm->work, sample_work, sample_done);
}

static void on_progress_timer(uv_timer_t *timer)
{
        struct server *s = timer->data;

        /* A pool too busy to have read the last ones is not given more. */
        if (table_of(s)->sampling == 0 && s->sched.n_running > 0)
                sched_for_each_running(&s->sched, sample_one, s);
}

/* ---- the scan -------------------------------------------------------------- */

static int cmp_proc(const void *a, const void *b)
{
        const struct watch_proc *x = a, *y = b;

        return (x->pid > y->pid) - (x->pid < y->pid);
}

static void scan_work(uv_work_t *w)
{
        struct scan *sc = w->data;
        const struct discover_lib *lib = &sc->srv->source.driver_lib;
        pid_t *pids = NULL, self = getpid();
        char cg[DISCOVER_CGROUP_MAX];
        size_t n = 0;

        sc->error = select_candidates(&sc->srv->source, &pids, &n);
        if (sc->error < 0)
                return;
        sc->procs = calloc(n ? n : 1, sizeof(*sc->procs));
        if (!sc->procs) {
                sc->error = -ENOMEM;
                free(pids);
                return;
        }
        for (size_t i = 0; i < n; i++) {
                struct target_identity id;
                struct watch_proc *p = &sc->procs[sc->n];
                if (pids[i] == self || discover_maps_driver(pids[i], lib) <= 0 || target_open(pids[i], &id) < 0)
                        continue;
                p->pid = id.pid;
                p->start_time = id.start_time;
                p->owner = (struct policy_target){ id.ruid, id.euid, id.suid };
                target_close(&id);
                if (discover_comm(p->pid, p->comm, sizeof(p->comm)) < 0)
                        p->comm[0] = '\0';
                if (discover_cgroup(p->pid, cg, sizeof(cg)) == 0)
                        p->cgroup = strdup(cg);
                p->ancestors = calloc(WATCH_MAX_ANCESTORS, sizeof(*p->ancestors));
                for (pid_t q = p->pid; p->ancestors && p->n_ancestors < WATCH_MAX_ANCESTORS;) {
                        if (discover_ppid(q, &q) < 0 || q <= 0)
                                break;
                        p->ancestors[p->n_ancestors++] = q;
                }
                sc->n++;
        }
        free(pids);
        qsort(sc->procs, sc->n, sizeof(*sc->procs), cmp_proc);
}

static void procs_free(struct watch_proc *procs, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(procs[i].cgroup);
                free(procs[i].ancestors);
                free(procs[i].vpids);
        }
        free(procs);
}

/* Notes the pid of every process of the scan in the namespace of every
 * watcher of another one (loop thread: one ioctl each). */
static void note_vpids(struct server *s, struct watch_proc *procs, size_t n)
{
        for (struct watcher *w = table_of(s)->head; w; w = w->next) {
                if (!w->ns || !w->conn)
                        continue;
                for (size_t i = 0; i < n; i++) {
                        struct watch_proc *p = &procs[i];
                        struct watch_vpid *nv;
                        pid_t vpid;
                        bool have = false;
                        for (size_t k = 0; k < p->n_vpids && !have; k++)
                                have = p->vpids[k].ns == w->ns;
                        if (have || pidns_to_caller(&w->conn->caller.pidns, p->pid, &vpid) < 0)
                                continue;
                        nv = realloc(p->vpids, (p->n_vpids + 1) * sizeof(*nv));
                        if (!nv)
                                continue;
                        p->vpids = nv;
                        p->vpids[p->n_vpids++] = (struct watch_vpid){ .ns = w->ns, .vpid = vpid };
                }
        }
}


static void proc_event(struct server *s, const struct watch_proc *p, const char *type)
{
        struct watch_event e = WATCH_EVENT_INIT(type);

        e.proc = p;
        e.gone = strcmp(type, WATCH_EXITED) == 0;
        e.pid = p->pid;
        e.start_time = p->start_time;
        e.owner = p->owner;
        e.command = p->comm;
        watch_emit(s, &e);
}

static void scan_arm(struct server *s);

static void scan_done(uv_work_t *w, int status)
{
        struct scan *sc = w->data;
        struct server *s = sc->srv;
        struct watch_table *t = table_of(s);

        (void)status;
        t->scanning = false;
        if (sc->error < 0) {
                log_warning("Watch: cannot scan /proc: %s", strerror(-sc->error));
                procs_free(sc->procs, sc->n);
                free(sc);
                scan_arm(s);
                return;
        }
        if (t->n == 0) {
                /* The last watcher left while it ran. */
                procs_free(sc->procs, sc->n);
                free(sc);
                return;
        }
        /* Both ascending by pid: two merges, the exits judged by what the
         * old scan knew of them, the arrivals by the new. */
        struct watch_proc *olds = t->procs, *news = sc->procs;
        size_t n_old = t->n_procs, n_new = sc->n;
        bool diff = t->n > 0 && t->have_baseline;
        for (int pass = 0; pass < 2; pass++) {
                size_t i = 0, j = 0;
                if (pass == 1) {
                        /* The new scan is the truth from here. */
                        t->procs = news;
                        t->n_procs = n_new;
                        note_vpids(s, news, n_new);
                }
                while (diff && (i < n_old || j < n_new)) {
                        const struct watch_proc *o = i < n_old ? &olds[i] : NULL;
                        const struct watch_proc *nw = j < n_new ? &news[j] : NULL;
                        bool gone = o && (!nw || o->pid < nw->pid), came = nw && (!o || nw->pid < o->pid);
                        bool changed = !gone && !came && o->start_time != nw->start_time;
                        if (pass == 0 && (gone || changed))
                                proc_event(s, o, WATCH_EXITED);
                        if (pass == 1 && (came || changed))
                                proc_event(s, nw, WATCH_APPEARED);
                        i += !came;
                        j += !gone;
                }
        }
        procs_free(olds, n_old);
        t->have_baseline = t->n > 0;
        free(sc);
        scan_arm(s);
}

static void on_scan_timer(uv_timer_t *timer)
{
        struct server *s = timer->data;
        struct watch_table *t = table_of(s);
        struct scan *sc;

        if (t->n == 0 || t->scanning || s->shutting_down)
                return;
        sc = calloc(1, sizeof(*sc));
        if (!sc) {
                scan_arm(s);
                return;
        }
        sc->srv = s;
        sc->work.data = sc;
        t->scanning = true;
        (void)uv_queue_work(s->loop, &sc->work, scan_work, scan_done);
}

/* The next scan, while watchers exist (the first one at once). */
static void scan_arm(struct server *s)
{
        struct watch_table *t = table_of(s);
        uint64_t period = s->cfg->watch_scan_ms;

        if (t->n == 0 || period == 0 || t->scanning || s->shutting_down) {
                if (t->n == 0) {
                        procs_free(t->procs, t->n_procs);
                        t->procs = NULL;
                        t->n_procs = 0;
                        t->have_baseline = false;
                }
                return;
        }
        uv_timer_start(&t->scan_timer, on_scan_timer, t->have_baseline ? period : 0, 0);
}

/* ---- watchers -------------------------------------------------------------- */

void watch_init(struct server *s)
{
        struct watch_table *t = table_of(s);

        uv_timer_init(s->loop, &t->scan_timer);
        t->scan_timer.data = s;
        uv_timer_init(s->loop, &t->progress_timer);
        t->progress_timer.data = s;
        uv_check_init(s->loop, &t->flush);
        t->flush.data = s;
        uv_timer_init(s->loop, &t->trim_timer);
        t->trim_timer.data = s;
        uv_unref((uv_handle_t *)&t->trim_timer);
        static const char *const keys[] = { "max_watchers", "max_watchers_per_uid", "max_watchers_reserved" };
        share_init(&t->share, keys, s->cfg->max_watchers, s->cfg->max_watchers_per_uid,
                   s->cfg->max_watchers_reserved);
}

void watch_close(struct server *s)
{
        struct watch_table *t = table_of(s);

        if (!uv_is_closing((uv_handle_t *)&t->scan_timer))
                uv_close((uv_handle_t *)&t->scan_timer, NULL);
        if (!uv_is_closing((uv_handle_t *)&t->progress_timer))
                uv_close((uv_handle_t *)&t->progress_timer, NULL);
        if (!uv_is_closing((uv_handle_t *)&t->flush))
                uv_close((uv_handle_t *)&t->flush, NULL);
        if (!uv_is_closing((uv_handle_t *)&t->trim_timer))
                uv_close((uv_handle_t *)&t->trim_timer, NULL);
        procs_free(t->procs, t->n_procs);
        t->procs = NULL;
        t->n_procs = 0;
}

/* The watcher is set up: it gets events from now on. */
static void watcher_ready(struct server *s, struct watcher *w)
{
        struct watch_table *t = table_of(s);
        struct watch_event e = WATCH_EVENT_INIT("watching");

        w->ready = true;
        conn_send(w->conn, event_json(&e, 0));
        /* The first watcher ready starts the scans (one set up before it may
         * still wait for its cgroup's root). */
        if (!t->scanning && !uv_is_active((uv_handle_t *)&t->scan_timer))
                scan_arm(s);
}

static void watcher_free(struct watcher *w)
{
        free(w->out);
        proto_group_request_done(&w->sel);
        free(w->cgroup_sel);
        free(w);
}

/* A cgroup selector is the caller's cgroup namespace's (worker thread). */
static void setup_work(uv_work_t *work)
{
        struct watcher *w = work->data;
        char root[DISCOVER_CGROUP_MAX];
        const char *sel = w->sel.cgroup;

        if (discover_cgroup_ns_root(w->conn_pid, root, sizeof(root)) < 0) {
                w->setup_error = -EREMOTE;
                return;
        }
        if (root[0] && strcmp(sel, "/") == 0)
                sel = "";
        if (asprintf(&w->cgroup_sel, "%s%s", root, sel) < 0) {
                w->cgroup_sel = NULL;
                w->setup_error = -ENOMEM;
        }
}

static void setup_done(uv_work_t *work, int status)
{
        struct watcher *w = work->data;
        struct conn *c = w->conn;
        cJSON *p;

        (void)status;
        w->setup_pending = false;
        if (!c) {
                watcher_free(w); /* closed meanwhile */
                return;
        }
        if (w->setup_error == 0) {
                watcher_ready(c->server, w);
                return;
        }
        /* Sending may close c, and with it free w: nothing of w after. */
        if (w->setup_error != -EREMOTE) {
                conn_close(c); /* out of memory: the client cannot be told */
                return;
        }
        p = cJSON_CreateObject();
        if (p)
                cJSON_AddStringToObject(p, "reason", "the caller's cgroup namespace is not the daemon's, "
                                                     "and no cgroup2 mount of the caller shows its root");
        conn_send(c, proto_error_new(CUDACKPT_ERROR_PERMISSION_DENIED, p));
        if (!c->closing)
                conn_close_after_write(c);
}

static cJSON *no_such_process(pid_t pid)
{
        cJSON *p = cJSON_CreateObject();

        if (p)
                cJSON_AddNumberToObject(p, "pid", pid);
        return proto_error_new(CUDACKPT_ERROR_NO_SUCH_PROCESS, p);
}

/* The selector of a Watch call, into the daemon's pids; false when it was
 * refused (answered). */
static bool take_selector(struct conn *c, const struct proto_call *call, struct watcher *w)
{
        struct server *s = c->server;
        cJSON *err = NULL, *p;
        pid_t root;

        if (proto_parse_group(call, 0, s->cfg->max_group_members, &w->sel, &err) < 0) {
                conn_send(c, err);
                return false;
        }
        /* The caller's pids into ours; one it cannot see matches nothing. */
        for (unsigned i = 0; i < w->sel.n_pids; i++)
                if (pidns_to_daemon(&c->caller.pidns, w->sel.pids[i].pid, &w->sel.pids[i].pid) < 0)
                        w->sel.pids[i].pid = -1;
        /* Cgroup and tree selections follow the scans: none, none selected. */
        if ((w->sel.kind == PROTO_SELECT_CGROUP || w->sel.kind == PROTO_SELECT_TREE) && s->cfg->watch_scan_ms == 0) {
                p = cJSON_CreateObject();
                if (p)
                        cJSON_AddStringToObject(p, "parameter", "selector");
                conn_send(c, proto_error_new(CUDACKPT_VARLINK_INVALID_PARAMETER, p));
                return false;
        }
        /* A tree's root must exist, as for a group. */
        if (w->sel.kind == PROTO_SELECT_TREE) {
                if (pidns_to_daemon(&c->caller.pidns, w->sel.tree, &root) < 0 ||
                    (kill(root, 0) < 0 && errno == ESRCH)) {
                        conn_send(c, no_such_process(w->sel.tree));
                        return false;
                }
                w->sel.tree = root;
        }
        return true;
}

/* A place among the watchers, within the caller's uid's share; false when
 * refused (answered). */
static bool admit(struct conn *c, struct watcher *w)
{
        struct server *s = c->server;
        struct share_refusal why = { 0 };
        cJSON *p;

        w->privileged = access_privileged(s->cfg, &c->caller);
        if (share_take(&table_of(s)->share, c->caller.uid, w->privileged, &why) == 0)
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

void watch_call(struct conn *c, const struct proto_call *call)
{
        struct server *s = c->server;
        struct watch_table *t = table_of(s);
        struct watcher *w;

        if (call->oneway)
                return;
        if (!call->more) {
                conn_send(c, proto_error_new(CUDACKPT_VARLINK_EXPECTED_MORE, NULL));
                return;
        }
        if (s->shutting_down) {
                conn_send(c, proto_error_new(CUDACKPT_ERROR_SHUTTING_DOWN, NULL));
                return;
        }
        w = calloc(1, sizeof(*w));
        if (!w) {
                conn_close(c);
                return;
        }
        if (!take_selector(c, call, w) || !admit(c, w)) {
                watcher_free(w);
                return;
        }
        w->conn = c;
        w->conn_pid = c->caller.pid;
        if (c->caller.pidns.other) {
                struct stat st;
                if (c->caller.pidns.fd >= 0 && fstat(c->caller.pidns.fd, &st) == 0)
                        w->ns = st.st_ino;
        }
        c->watcher = w;
        c->drain_cb = on_drain_cb;
        conn_ref(c);
        c->busy = true; /* serves nothing else until it closes */
        w->next = t->head;
        if (t->head)
                t->head->prev = w;
        t->head = w;
        t->n++;
        s->sched.report_starts = true;
        atomic_store(&s->sched.want_progress, true);
        if (t->n == 1 && s->cfg->progress_interval_ms > 0)
                uv_timer_start(&t->progress_timer, on_progress_timer, s->cfg->progress_interval_ms,
                               s->cfg->progress_interval_ms);
        if (w->sel.kind == PROTO_SELECT_CGROUP) {
                w->setup.data = w;
                w->setup_pending = true;
                (void)uv_queue_work(s->loop, &w->setup, setup_work, setup_done);
                return;
        }
        watcher_ready(s, w);
}

static void on_trim_timer(uv_timer_t *timer)
{
        struct server *s = timer->data;

        table_of(s)->freed = 0;
        (void)malloc_trim(0);
}

void watch_conn_closed(struct server *s, struct conn *c)
{
        struct watch_table *t = table_of(s);
        struct watcher *w = c->watcher;

        if (!w)
                return;
        c->watcher = NULL;
        c->drain_cb = NULL;
        share_give(&t->share, c->caller.uid, w->privileged);
        /* What its buffers took is freed (the one in flight with the
         * connection); after a burst of such, memory goes back to the
         * system, which the allocator alone would keep. */
        t->freed += w->mem;
        account(t, w, 0);
        if (t->freed >= WATCH_TRIM_BYTES || t->n == 1)
                uv_timer_start(&t->trim_timer, on_trim_timer, WATCH_TRIM_DELAY_MS, 0);
        if (w->prev)
                w->prev->next = w->next;
        else
                t->head = w->next;
        if (w->next)
                w->next->prev = w->prev;
        t->n--;
        w->conn = NULL;
        if (!w->setup_pending)
                watcher_free(w); /* else setup_done() frees it */
        if (t->n == 0) {
                /* What the scans knew is no baseline for a later watcher. */
                procs_free(t->procs, t->n_procs);
                t->procs = NULL;
                t->n_procs = 0;
                t->have_baseline = false;
                uv_timer_stop(&t->scan_timer);
                uv_timer_stop(&t->progress_timer);
                s->sched.report_starts = false;
                atomic_store(&s->sched.want_progress, false);
        }
        c->busy = false;
        conn_unref(c);
}
