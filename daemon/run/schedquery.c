/* schedquery.c: what the loop reads of the operations running now
 * (sched.h). */
#include "run/sched.h"

struct sched_target *sched_running_target(struct sched *s, pid_t pid, uint64_t seq)
{
        struct sched_target *t = sched_table_find(&s->table, pid);

        return t && t->running && t->running->seq == seq ? t : NULL;
}

void sched_for_each_running(struct sched *s, void (*fn)(void *ctx, struct sched_target *t), void *ctx)
{
        for (unsigned b = 0; b < SCHED_BUCKETS; b++)
                for (struct sched_target *t = s->table.buckets[b]; t; t = t->next_in_bucket)
                        if (t->running)
                                fn(ctx, t);
}

void sched_read_target(struct sched_target *t, struct sched_snapshot *ret)
{
        uv_mutex_lock(&t->lock);
        ret->known = t->known;
        ret->owner = t->owner;
        ret->start_time = t->start_time;
        ret->last_state = t->last_state;
        uv_mutex_unlock(&t->lock);
}

bool sched_running_snapshot(struct sched *s, pid_t pid, struct sched_snapshot *ret)
{
        struct sched_target *t = sched_table_find(&s->table, pid);

        if (!t || (!t->running && !(t->holder && t->hold_begun)))
                return false;
        sched_read_target(t, ret);
        ret->running = t->running ? t->running->method : t->hold_method;
        return true;
}
