/* lane.c: the warm thread for short read-only driver calls, and the
 * bounded spinning that keeps it and the loop awake between back-to-back
 * calls (see lane.h). */
#include "run/lane.h"

#include <errno.h>
#include <sched.h>
#include <string.h>

#include "cpu-relax.h"

/* After a job: waits up to spin_ns for the next one without sleeping, so
 * that a client's next call finds the thread awake and its core warm. */
static void lane_spin(struct lane *l)
{
        uint64_t until = uv_hrtime() + l->spin_ns;

        for (unsigned i = 1; !atomic_load_explicit(&l->pending, memory_order_acquire) &&
                             !atomic_load_explicit(&l->stop, memory_order_relaxed) && uv_hrtime() < until;
             i++) {
                cpu_relax();
                /* On a machine with no core to spare, let others run. */
                if (i % 16 == 0)
                        sched_yield();
        }
}

static void lane_main(void *arg)
{
        struct lane *l = arg;
        uint64_t last_end = 0;  /* when the job before ended, 0 before the first */
        bool back_to_back;      /* this job came within spin_ns of that */

        uv_mutex_lock(&l->lock);
        for (;;) {
                while (!l->pending && !l->stop)
                        uv_cond_wait(&l->cond, &l->lock);
                if (!l->pending)
                        break; /* stop, and idle */
                uv_work_t *w = l->pending;
                l->pending = NULL;
                uv_mutex_unlock(&l->lock);
                back_to_back = l->spin_ns && last_end && uv_hrtime() - last_end <= l->spin_ns;
                l->work(w);
                last_end = uv_hrtime();
                uv_mutex_lock(&l->lock);
                /* A loop that polls finds the result by itself (lane_poll_cb);
                 * one that sleeps, or may be going to, is woken.  Both sides
                 * store first, then load (sequentially consistent): at least
                 * one of them sees the other's store. */
                atomic_store(&l->finished, w);
                if (!atomic_load(&l->loop_polling))
                        uv_async_send(&l->async);
                if (back_to_back) {
                        uv_mutex_unlock(&l->lock);
                        lane_spin(l);
                        uv_mutex_lock(&l->lock);
                }
        }
        uv_mutex_unlock(&l->lock);
}

static void lane_poll_cb(uv_idle_t *h);

static void poll_start(struct lane *l)
{
        atomic_store(&l->loop_polling, true);
        uv_idle_start(&l->poll, lane_poll_cb);
}

static void lane_finished_cb(uv_async_t *a)
{
        struct lane *l = a->data;
        uv_work_t *w = atomic_exchange(&l->finished, NULL);
        bool back_to_back = l->back_to_back; /* the finished job's */

        if (!w)
                return; /* taken by the polling loop already */
        l->busy = false;
        uv_unref((uv_handle_t *)&l->async);
        /* Before done(), which may submit the next job at once. */
        l->last_end = uv_hrtime();
        l->done(w, 0);
        /* The reply is written by now: poll on for the client's next call
         * while calls come back to back (lane_poll_cb() stops otherwise). */
        if (back_to_back) {
                l->poll_until = uv_hrtime() + l->spin_ns;
                poll_start(l);
        }
}

/* Runs once per loop iteration while the loop polls; stops the polling
 * once the job in the lane has run for spin_us (a driver call can take
 * long, even wait on a stopped process: the loop then sleeps until its
 * result, which starts the polling again), or, with none in the lane, once
 * the window after the last one is over. */
static void lane_poll_cb(uv_idle_t *h)
{
        struct lane *l = h->data;
        uint64_t now;

        /* The job's result, without the wake-up the thread did not send. */
        if (atomic_load(&l->finished)) {
                l->n_polled++;
                lane_finished_cb(&l->async);
                return;
        }
        now = uv_hrtime();
        if (l->busy ? now - l->busy_since <= l->spin_ns : now < l->poll_until)
                return;
        atomic_store(&l->loop_polling, false);
        uv_idle_stop(h);
        /* A job that finished while the loop still polled sent no wake-up. */
        if (atomic_load(&l->finished)) {
                l->n_polled++;
                lane_finished_cb(&l->async);
        }
}

int lane_init(struct lane *l, uv_loop_t *loop, unsigned spin_us, lane_work_cb work, lane_after_work_cb done)
{
        int r;

        memset(l, 0, sizeof(*l));
        l->loop = loop;
        l->work = work;
        l->done = done;
        l->spin_ns = (uint64_t)spin_us * 1000;
        r = uv_mutex_init(&l->lock);
        if (r < 0)
                return r;
        r = uv_cond_init(&l->cond);
        if (r < 0) {
                uv_mutex_destroy(&l->lock);
                return r;
        }
        uv_async_init(loop, &l->async, lane_finished_cb);
        l->async.data = l;
        /* An idle lane never keeps the loop running; a busy one does, as a
         * uv_queue_work() request would.  The polling never does: it only
         * changes how the loop waits, not whether it runs. */
        uv_unref((uv_handle_t *)&l->async);
        uv_idle_init(loop, &l->poll);
        l->poll.data = l;
        uv_unref((uv_handle_t *)&l->poll);
        r = uv_thread_create(&l->thread, lane_main, l);
        if (r < 0)
                return r; /* lane_close() still releases the rest */
        l->started = true;
        return 0;
}

int lane_submit(struct lane *l, uv_work_t *w)
{
        if (l->busy || !l->started)
                return -EBUSY;
        l->busy = true;
        l->busy_since = uv_hrtime();
        uv_ref((uv_handle_t *)&l->async);
        l->back_to_back = l->spin_ns && l->last_end && uv_hrtime() - l->last_end <= l->spin_ns;
        if (l->back_to_back)
                poll_start(l);
        uv_mutex_lock(&l->lock);
        l->pending = w;
        uv_cond_signal(&l->cond);
        uv_mutex_unlock(&l->lock);
        return 0;
}

void lane_close(struct lane *l)
{
        if (!l->loop)
                return;
        if (l->started) {
                uv_mutex_lock(&l->lock);
                l->stop = true;
                uv_cond_signal(&l->cond);
                uv_mutex_unlock(&l->lock);
                uv_thread_join(&l->thread);
                l->started = false;
        }
        if (!uv_is_closing((uv_handle_t *)&l->async)) {
                uv_close((uv_handle_t *)&l->poll, NULL);
                uv_close((uv_handle_t *)&l->async, NULL);
                uv_cond_destroy(&l->cond);
                uv_mutex_destroy(&l->lock);
        }
}
