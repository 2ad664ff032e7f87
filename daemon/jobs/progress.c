/* progress.c: samples of running checkpoints for Watch (progress.h). */
#include "jobs/progress.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "run/sched.h"
#include "host/target.h"

/* One reading of a running checkpoint's process (a worker reads it: the
 * loop reads no /proc). */
struct sample {
        uv_work_t work;
        struct progress *pg;
        struct progress_sample s;
        pid_t target;           /* the op's target and which op it was */
        uint64_t seq;
        int status_fd;          /* owned, a dup of the op's */
        uint64_t rss_start, rss;
        int error;
};

static void sample_work(uv_work_t *w)
{
        struct sample *sm = w->data;
        struct target_identity id = { .pid = sm->s.pid, .pidfd = -1, .stat_fd = -1, .status_fd = sm->status_fd };

        sm->error = target_rss(&id, &sm->rss);
}

/* The high-water mark of the op sm read, made when it is the first. */
static struct progress_peak *peak_of(struct progress *pg, const struct sample *sm)
{
        struct progress_peak *np;

        for (size_t i = 0; i < pg->n_peaks; i++)
                if (pg->peaks[i].target == sm->target && pg->peaks[i].seq == sm->seq)
                        return &pg->peaks[i];
        np = realloc(pg->peaks, (pg->n_peaks + 1) * sizeof(*np));
        if (!np)
                return NULL;
        pg->peaks = np;
        np = &pg->peaks[pg->n_peaks++];
        *np = (struct progress_peak){ .target = sm->target, .seq = sm->seq };
        return np;
}

/* Forgets the marks of ops that have ended. */
static void peaks_prune(struct progress *pg)
{
        size_t n = 0;

        for (size_t i = 0; i < pg->n_peaks; i++)
                if (sched_running_target(pg->sched, pg->peaks[i].target, pg->peaks[i].seq))
                        pg->peaks[n++] = pg->peaks[i];
        pg->n_peaks = n;
}

static void sample_done_cb(uv_work_t *w, int status)
{
        struct sample *sm = w->data;
        struct progress *pg = sm->pg;
        struct progress_peak *peak;

        (void)status;
        pg->sampling--;
        close(sm->status_fd);
        /* A reading that comes back after its op has ended says nothing new. */
        if (sm->error == 0 && sched_running_target(pg->sched, sm->target, sm->seq) && (peak = peak_of(pg, sm))) {
                uint64_t moved = sm->rss > sm->rss_start ? sm->rss - sm->rss_start : 0;
                if (moved < peak->bytes)
                        moved = peak->bytes;
                peak->bytes = moved;
                sm->s.bytes = (int64_t)moved;
                pg->sample_cb(pg, &sm->s);
        }
        free(sm);
}

static void sample_one(void *ctx, struct sched_target *t)
{
        struct progress *pg = ctx;
        struct sample *sm;
        int fd = -1;

        if (!t->running->start_reported)
                return;
        sm = calloc(1, sizeof(*sm));
        if (!sm)
                return;
        uv_mutex_lock(&t->lock);
        if (t->in_checkpoint && t->watch_status_fd >= 0) {
                fd = fcntl(t->watch_status_fd, F_DUPFD_CLOEXEC, 3);
                sm->rss_start = t->rss_start;
                sm->s.total_bytes = t->total_bytes;
                sm->s.pid = t->watch_pid;
                sm->s.start_time = t->start_time;
                sm->s.owner = t->owner;
        }
        uv_mutex_unlock(&t->lock);
        if (fd < 0) {
                free(sm);
                return;
        }
        sm->pg = pg;
        sm->status_fd = fd;
        sm->target = t->pid;
        sm->seq = t->running->seq;
        sm->s.method = t->running->method;
        sm->s.parent = t->running->parent;
        sm->work.data = sm;
        pg->sampling++;
        (void)uv_queue_work(pg->loop, &sm->work, sample_work, sample_done_cb);
}

static void on_timer_cb(uv_timer_t *timer)
{
        struct progress *pg = timer->data;

        /* A pool too busy to have read the last ones is not given more. */
        if (pg->sampling == 0 && pg->sched->n_running > 0) {
                peaks_prune(pg);
                sched_for_each_running(pg->sched, sample_one, pg);
        }
}

void progress_init(struct progress *pg)
{
        uv_timer_init(pg->loop, &pg->timer);
        pg->timer.data = pg;
}

void progress_close(struct progress *pg)
{
        if (!uv_is_closing((uv_handle_t *)&pg->timer))
                uv_close((uv_handle_t *)&pg->timer, NULL);
        free(pg->peaks);
        pg->peaks = NULL;
        pg->n_peaks = 0;
}

void progress_start(struct progress *pg)
{
        if (pg->interval_ms > 0)
                uv_timer_start(&pg->timer, on_timer_cb, pg->interval_ms, pg->interval_ms);
}

void progress_stop(struct progress *pg)
{
        uv_timer_stop(&pg->timer);
}
