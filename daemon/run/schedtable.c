/* schedtable.c: targets by pid and the cache of idle ones (see schedtable.h). */
#include "run/schedtable.h"

#include <stdlib.h>
#include <string.h>

static unsigned bucket_of(pid_t pid)
{
        return ((unsigned)pid * 2654435761u) % SCHED_BUCKETS;
}

static void sweep_cb(uv_timer_t *timer);

void sched_table_init(struct sched_table *tb, uv_loop_t *loop, const struct config *cfg, uv_async_t *wake)
{
        memset(tb, 0, sizeof(*tb));
        tb->loop = loop;
        tb->cfg = cfg;
        tb->wake = wake;
        uv_timer_init(loop, &tb->sweep);
        tb->sweep.data = tb;
        /* The cache's sweep alone never keeps the loop running. */
        uv_unref((uv_handle_t *)&tb->sweep);
}

void sched_table_close(struct sched_table *tb)
{
        if (!uv_is_closing((uv_handle_t *)&tb->sweep))
                uv_close((uv_handle_t *)&tb->sweep, NULL);
}

struct sched_target *sched_table_find(struct sched_table *tb, pid_t pid)
{
        for (struct sched_target *t = tb->buckets[bucket_of(pid)]; t; t = t->next_in_bucket)
                if (t->pid == pid)
                        return t;
        return NULL;
}

struct sched_target *sched_table_add(struct sched_table *tb, pid_t pid)
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
        t->wake = tb->wake;
        t->identity.pidfd = -1;
        t->identity.stat_fd = -1;
        t->identity.status_fd = -1;
        t->last_state = -1;
        t->watch_stat_fd = -1;
        t->watch_status_fd = -1;
        t->ckpt_bytes = -1;
        t->total_bytes = -1;
        t->next_in_bucket = tb->buckets[b];
        tb->buckets[b] = t;
        tb->n_targets++;
        return t;
}

static void lru_unlink(struct sched_table *tb, struct sched_target *t)
{
        if (!t->cached)
                return;
        if (t->lru_prev)
                t->lru_prev->lru_next = t->lru_next;
        else
                tb->lru_head = t->lru_next;
        if (t->lru_next)
                t->lru_next->lru_prev = t->lru_prev;
        else
                tb->lru_tail = t->lru_prev;
        t->lru_prev = t->lru_next = NULL;
        t->cached = false;
        tb->n_cached--;
}

void sched_table_drop(struct sched_table *tb, struct sched_target *t)
{
        struct sched_target **p = &tb->buckets[bucket_of(t->pid)];

        lru_unlink(tb, t);
        while (*p != t)
                p = &(*p)->next_in_bucket;
        *p = t->next_in_bucket;
        tb->n_targets--;
        target_close(&t->identity);
        uv_mutex_destroy(&t->lock);
        free(t);
}

static uint64_t sweep_period(const struct sched_table *tb)
{
        uint64_t p = tb->cfg->cached_target_idle_ms / 2;

        return p < 100 ? 100 : p;
}

void sched_table_release(struct sched_table *tb, struct sched_target *t)
{
        if (tb->cfg->max_cached_targets == 0 || tb->cfg->cached_target_idle_ms == 0 ||
            !target_alive(&t->identity)) {
                sched_table_drop(tb, t);
                return;
        }
        t->cached = true;
        t->idle_since = uv_now(tb->loop);
        t->lru_prev = NULL;
        t->lru_next = tb->lru_head;
        if (tb->lru_head)
                tb->lru_head->lru_prev = t;
        else
                tb->lru_tail = t;
        tb->lru_head = t;
        tb->n_cached++;
        while (tb->n_cached > tb->cfg->max_cached_targets)
                sched_table_drop(tb, tb->lru_tail);
        if (!uv_is_active((uv_handle_t *)&tb->sweep))
                uv_timer_start(&tb->sweep, sweep_cb, sweep_period(tb), sweep_period(tb));
}

/* Drops cached targets idle too long or whose process has exited, so the
 * daemon keeps nothing about a process that has gone. */
static void sweep_cb(uv_timer_t *timer)
{
        struct sched_table *tb = timer->data;
        uint64_t now = uv_now(tb->loop);
        struct sched_target *t, *prev;

        for (t = tb->lru_tail; t; t = prev) {
                prev = t->lru_prev;
                if (now - t->idle_since >= tb->cfg->cached_target_idle_ms || !target_alive(&t->identity))
                        sched_table_drop(tb, t);
        }
        if (tb->n_cached == 0)
                uv_timer_stop(&tb->sweep);
}

void sched_table_revive(struct sched_table *tb, struct sched_target *t)
{
        lru_unlink(tb, t);
        uv_mutex_lock(&t->lock);
        t->known = false;
        t->last_state = -1;
        uv_mutex_unlock(&t->lock);
}
