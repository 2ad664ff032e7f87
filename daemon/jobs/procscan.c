/* procscan.c: the scan of CUDA processes for Watch (procscan.h). */
#include "jobs/procscan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/discover.h"
#include "base/log.h"
#include "host/target.h"

/* How deep a scan follows a CUDA process's parents, for tree selectors. */
#define PROCSCAN_MAX_ANCESTORS 64

struct scan {
        uv_work_t work;
        struct procscan *ps;
        struct procscan_proc *procs;
        size_t n;
        int error;
};

static int cmp_proc(const void *a, const void *b)
{
        const struct procscan_proc *x = a, *y = b;

        return (x->pid > y->pid) - (x->pid < y->pid);
}

static void procs_free(struct procscan_proc *procs, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(procs[i].cgroup);
                free(procs[i].ancestors);
                free(procs[i].vpids);
        }
        free(procs);
}

static void forget(struct procscan *ps)
{
        procs_free(ps->procs, ps->n_procs);
        ps->procs = NULL;
        ps->n_procs = 0;
        ps->have_baseline = false;
}

const struct procscan_proc *procscan_find(const struct procscan *ps, pid_t pid, uint64_t start_time)
{
        struct procscan_proc key = { .pid = pid };
        const struct procscan_proc *p;

        p = ps->n_procs ? bsearch(&key, ps->procs, ps->n_procs, sizeof(*ps->procs), cmp_proc) : NULL;
        return p && (!start_time || p->start_time == start_time) ? p : NULL;
}

void procscan_note_vpid(struct procscan_proc *p, ino_t ns, pid_t vpid)
{
        struct procscan_vpid *nv;

        for (size_t k = 0; k < p->n_vpids; k++)
                if (p->vpids[k].ns == ns)
                        return;
        nv = realloc(p->vpids, (p->n_vpids + 1) * sizeof(*nv));
        if (!nv)
                return;
        p->vpids = nv;
        p->vpids[p->n_vpids++] = (struct procscan_vpid){ .ns = ns, .vpid = vpid };
}

/* Lists the CUDA processes (worker thread). */
static void scan_work(uv_work_t *w)
{
        struct scan *sc = w->data;
        const struct discover_lib *lib = &sc->ps->source->driver_lib;
        pid_t *pids = NULL, self = getpid();
        char cg[DISCOVER_CGROUP_MAX];
        size_t n = 0;

        sc->error = select_candidates(sc->ps->source, &pids, &n);
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
                struct procscan_proc *p = &sc->procs[sc->n];
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
                p->ancestors = calloc(PROCSCAN_MAX_ANCESTORS, sizeof(*p->ancestors));
                for (pid_t q = p->pid; p->ancestors && p->n_ancestors < PROCSCAN_MAX_ANCESTORS;) {
                        if (discover_ppid(q, &q) < 0 || q <= 0)
                                break;
                        p->ancestors[p->n_ancestors++] = q;
                }
                sc->n++;
        }
        free(pids);
        qsort(sc->procs, sc->n, sizeof(*sc->procs), cmp_proc);
}

/* Both ascending by pid: two merges, the exits judged by what the old
 * scan knew of them, the arrivals by the new. */
static void compare(struct procscan *ps, struct procscan_proc *news, size_t n_new)
{
        struct procscan_proc *olds = ps->procs;
        size_t n_old = ps->n_procs;
        bool diff = ps->have_baseline;

        for (int pass = 0; pass < 2; pass++) {
                size_t i = 0, j = 0;
                if (pass == 1) {
                        /* The new scan is the truth from here. */
                        ps->procs = news;
                        ps->n_procs = n_new;
                        ps->found_cb(ps, news, n_new);
                }
                while (diff && (i < n_old || j < n_new)) {
                        const struct procscan_proc *o = i < n_old ? &olds[i] : NULL;
                        const struct procscan_proc *nw = j < n_new ? &news[j] : NULL;
                        bool gone = o && (!nw || o->pid < nw->pid), came = nw && (!o || nw->pid < o->pid);
                        bool changed = !gone && !came && o->start_time != nw->start_time;
                        if (pass == 0 && (gone || changed))
                                ps->exited_cb(ps, o);
                        if (pass == 1 && (came || changed))
                                ps->appeared_cb(ps, nw);
                        i += !came;
                        j += !gone;
                }
        }
        procs_free(olds, n_old);
}

static void arm(struct procscan *ps);

static void scan_done_cb(uv_work_t *w, int status)
{
        struct scan *sc = w->data;
        struct procscan *ps = sc->ps;

        (void)status;
        ps->scanning = false;
        if (sc->error < 0) {
                log_warning("Watch: cannot scan /proc: %s", strerror(-sc->error));
                procs_free(sc->procs, sc->n);
                free(sc);
                arm(ps);
                return;
        }
        if (!ps->wanted) {
                /* The last watcher left while it ran. */
                procs_free(sc->procs, sc->n);
                free(sc);
                return;
        }
        compare(ps, sc->procs, sc->n);
        ps->have_baseline = ps->wanted;
        free(sc);
        arm(ps);
}

static void on_timer_cb(uv_timer_t *timer)
{
        struct procscan *ps = timer->data;
        struct scan *sc;

        if (!ps->wanted || ps->scanning || life_stopping(ps->life))
                return;
        sc = calloc(1, sizeof(*sc));
        if (!sc) {
                arm(ps);
                return;
        }
        sc->ps = ps;
        sc->work.data = sc;
        ps->scanning = true;
        (void)uv_queue_work(ps->loop, &sc->work, scan_work, scan_done_cb);
}

/* The next scan, while wanted (the first one at once). */
static void arm(struct procscan *ps)
{
        if (!ps->wanted || ps->period_ms == 0 || ps->scanning || life_stopping(ps->life)) {
                if (!ps->wanted)
                        forget(ps);
                return;
        }
        uv_timer_start(&ps->timer, on_timer_cb, ps->have_baseline ? ps->period_ms : 0, 0);
}

void procscan_init(struct procscan *ps)
{
        uv_timer_init(ps->loop, &ps->timer);
        ps->timer.data = ps;
}

void procscan_close(struct procscan *ps)
{
        if (!uv_is_closing((uv_handle_t *)&ps->timer))
                uv_close((uv_handle_t *)&ps->timer, NULL);
        forget(ps);
}

void procscan_kick(struct procscan *ps)
{
        ps->wanted = true;
        if (!ps->scanning && !uv_is_active((uv_handle_t *)&ps->timer))
                arm(ps);
}

void procscan_stop(struct procscan *ps)
{
        ps->wanted = false;
        forget(ps);
        uv_timer_stop(&ps->timer);
}
