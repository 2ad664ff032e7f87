/* lane.c: the warm thread for short read-only driver calls (see lane.h). */
#include "lane.h"

#include <errno.h>
#include <string.h>

static void lane_main(void *arg)
{
        struct lane *l = arg;

        uv_mutex_lock(&l->lock);
        for (;;) {
                while (!l->pending && !l->stop)
                        uv_cond_wait(&l->cond, &l->lock);
                if (!l->pending)
                        break; /* stop, and idle */
                uv_work_t *w = l->pending;
                l->pending = NULL;
                uv_mutex_unlock(&l->lock);
                l->work(w);
                uv_mutex_lock(&l->lock);
                l->finished = w;
                uv_async_send(&l->async);
        }
        uv_mutex_unlock(&l->lock);
}

static void on_finished(uv_async_t *a)
{
        struct lane *l = a->data;
        uv_work_t *w;

        uv_mutex_lock(&l->lock);
        w = l->finished;
        l->finished = NULL;
        uv_mutex_unlock(&l->lock);
        if (!w)
                return;
        l->busy = false;
        uv_unref((uv_handle_t *)&l->async);
        l->done(w, 0);
}

int lane_init(struct lane *l, uv_loop_t *loop, lane_work_fn work, lane_done_fn done)
{
        int r;

        memset(l, 0, sizeof(*l));
        l->loop = loop;
        l->work = work;
        l->done = done;
        r = uv_mutex_init(&l->lock);
        if (r < 0)
                return r;
        r = uv_cond_init(&l->cond);
        if (r < 0) {
                uv_mutex_destroy(&l->lock);
                return r;
        }
        uv_async_init(loop, &l->async, on_finished);
        l->async.data = l;
        /* An idle lane never keeps the loop running; a busy one does, as a
         * uv_queue_work() request would. */
        uv_unref((uv_handle_t *)&l->async);
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
        uv_ref((uv_handle_t *)&l->async);
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
                uv_close((uv_handle_t *)&l->async, NULL);
                uv_cond_destroy(&l->cond);
                uv_mutex_destroy(&l->lock);
        }
}
