/* leaseflush.c: writing the lease table to its store (lease.h).  A change
 * marks the table dirty; in the check phase of the loop turn that made it,
 * the table is written once for every change of the turn, on a thread of
 * libuv's pool (a write and two fsyncs: the loop thread never waits for
 * the disk), and the calls that wait for it (lease_when_written(),
 * lease_defer_end()) go on when it is done.  One write at a time from the
 * pool; a change made meanwhile is written by the next one, and a table
 * older than the one on disk is never written over it (generations).  The
 * loop thread writes itself only where the pool cannot be used (out of
 * memory) and at the stop, once no call is served any more. */
#include "jobs/lease.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/log.h"
#include "jobs/leasestore.h"

/* One write from the pool: a copy of the table's text, and the calls that
 * wait for it. */
struct flush_write {
        uv_work_t work;
        struct lease_table *t;
        char *text;
        size_t len;
        uint64_t gen;
        int r;
        char why[256];
        struct lease_wait *waiters;
};

/* text as the store, unless a newer table (gen) is already there; any
 * thread. */
static int write_gen(struct lease_table *t, const char *text, size_t len, uint64_t gen, char *why, size_t whylen)
{
        int r = 0;

        uv_mutex_lock(&t->write_lock);
        if (t->store_fd >= 0 && gen > t->disk_gen) {
                r = leasestore_write(t->store_fd, text, len, why, whylen);
                if (r == 0)
                        t->disk_gen = gen;
        }
        uv_mutex_unlock(&t->write_lock);
        return r;
}

/* A failure is logged once, until a write works again. */
static void record(struct lease_table *t, int r, const char *why)
{
        if (r < 0) {
                if (!t->store_failing)
                        log_error("Failed to write the lease store %s/%s: %s; a daemon that restarts now will not "
                                  "honour the leases held",
                                  t->store_dir, LEASESTORE_FILE, why);
                snprintf(t->store_why, sizeof(t->store_why), "the last write of %s/%s failed: %s", t->store_dir,
                         LEASESTORE_FILE, why);
                t->store_failing = true;
        } else if (t->store_failing) {
                log_notice("The lease store %s/%s is written again", t->store_dir, LEASESTORE_FILE);
                t->store_why[0] = '\0';
                t->store_failing = false;
        }
}

/* The table, now, on the loop thread: only where the pool cannot take it
 * (out of memory) and at the stop (lease_flush_close()). */
void lease_persist_now(struct lease_table *t)
{
        char why[256], *text = NULL;
        size_t len = 0;
        int r;

        t->dirty = false;
        if (t->store_fd < 0 || !t->loaded)
                return; /* not before the store was read back: it would lose it */
        r = leasestore_encode(t->head, t->next_id, &text, &len, why, sizeof(why));
        if (r == 0)
                r = write_gen(t, text, len, ++t->gen, why, sizeof(why));
        free(text);
        record(t, r, why);
}

static void run_waiters(struct lease_wait *w)
{
        while (w) {
                struct lease_wait *next = w->next;
                w->cb(w);
                w = next;
        }
}

static void start_write(struct lease_table *t);

static void work_cb(uv_work_t *req)
{
        struct flush_write *fw = req->data;

        fw->r = write_gen(fw->t, fw->text, fw->len, fw->gen, fw->why, sizeof(fw->why));
}

static void written_cb(uv_work_t *req, int status)
{
        struct flush_write *fw = req->data;
        struct lease_table *t = fw->t;

        (void)status; /* cancelled: fw->r says so */
        t->writing = false;
        if (t->closed) {
                uv_mutex_destroy(&t->write_lock);
        } else {
                record(t, fw->r, fw->why);
        }
        free(fw->text);
        run_waiters(fw->waiters);
        free(fw);
        if (!t->closed && (t->dirty || t->waiters))
                start_write(t);
}

/* The table as it is now, from the pool; the calls waiting go on once it
 * is written.  Where it cannot go to the pool, written now. */
static void start_write(struct lease_table *t)
{
        struct lease_wait *w = t->waiters;
        struct flush_write *fw = NULL;

        t->waiters = NULL;
        t->waiters_tail = &t->waiters;
        if (t->dirty && t->store_fd >= 0 && t->loaded)
                fw = calloc(1, sizeof(*fw));
        if (fw && leasestore_encode(t->head, t->next_id, &fw->text, &fw->len, fw->why, sizeof(fw->why)) == 0) {
                *fw = (struct flush_write){ .t = t, .text = fw->text, .len = fw->len, .gen = ++t->gen,
                                            .r = -ECANCELED, .waiters = w };
                snprintf(fw->why, sizeof(fw->why), "%s", "cancelled");
                fw->work.data = fw;
                if (uv_queue_work(t->loop, &fw->work, work_cb, written_cb) == 0) {
                        t->dirty = false;
                        t->writing = true;
                        return;
                }
                free(fw->text);
        }
        free(fw);
        if (t->dirty)
                lease_persist_now(t);
        run_waiters(w);
}

/* The check phase, after the loop turn's I/O callbacks: one write for
 * every change they deferred, then the calls that waited for it go on, in
 * the order they came (a write under way: once it is done). */
static void flush_cb(uv_check_t *h)
{
        struct lease_table *t = h->data;

        uv_check_stop(h);
        if (!t->writing)
                start_write(t);
}

void lease_persist(struct lease_table *t)
{
        if (t->store_fd < 0)
                return;
        t->dirty = true;
        if (!uv_is_active((uv_handle_t *)&t->flush))
                uv_check_start(&t->flush, flush_cb);
}

bool lease_when_written(struct lease_table *t, struct lease_wait *w)
{
        if (t->store_fd < 0 || (!t->dirty && !t->writing))
                return false;
        w->next = NULL;
        *t->waiters_tail = w;
        t->waiters_tail = &w->next;
        return true;
}

void lease_defer_begin(struct lease_table *t)
{
        t->deferring++;
}

bool lease_defer_end(struct lease_table *t, struct lease_wait *w)
{
        t->deferring--;
        if (!t->dirty || !w)
                return t->dirty;
        return lease_when_written(t, w);
}

void lease_flush_init(struct lease_table *t)
{
        uv_check_init(t->loop, &t->flush);
        t->flush.data = t;
        t->waiters_tail = &t->waiters;
        uv_mutex_init(&t->write_lock);
}

void lease_flush_close(struct lease_table *t)
{
        if (t->dirty)
                lease_persist_now(t);
        if (!uv_is_closing((uv_handle_t *)&t->flush))
                uv_close((uv_handle_t *)&t->flush, NULL);
        uv_mutex_lock(&t->write_lock);
        if (t->store_fd >= 0)
                close(t->store_fd);
        t->store_fd = -1;
        uv_mutex_unlock(&t->write_lock);
        t->closed = true;
        if (!t->writing)
                uv_mutex_destroy(&t->write_lock); /* else written_cb */
}
