/* schedtable.h: the scheduler's targets by pid, and the cache of idle ones.
 *
 * Every process named in a request has one sched_target here while
 * operations on it are queued or running (sched.c decides when), and keeps
 * it for a while after: an idle target that still pins a live process goes
 * to the cache, so the next request skips the pinning.  The cache holds at
 * most max_cached_targets, least recently used first out, and a sweep drops
 * those idle for cached_target_idle_ms or whose process has exited.
 *
 * Loop thread only.  Ownership: the table owns its targets. */
#ifndef CUDACKPT_SCHEDTABLE_H
#define CUDACKPT_SCHEDTABLE_H

#include <sys/types.h>
#include <uv.h>

#include "base/config.h"
#include "run/schedtarget.h"

#define SCHED_BUCKETS 1024

struct sched_table {
        uv_loop_t *loop;
        const struct config *cfg;
        uv_async_t *wake;       /* given to every target: the scheduler's wake-up */
        struct sched_target *buckets[SCHED_BUCKETS]; /* by pid, chained by next_in_bucket */
        unsigned n_targets;
        struct sched_target *lru_head, *lru_tail; /* cached idle targets, most recently used first */
        unsigned n_cached;
        uv_timer_t sweep;       /* drops stale cached targets while any exist */
};

void sched_table_init(struct sched_table *tb, uv_loop_t *loop, const struct config *cfg, uv_async_t *wake);
/* Closes the sweep timer; the loop must run once more to finish it. */
void sched_table_close(struct sched_table *tb);

struct sched_target *sched_table_find(struct sched_table *tb, pid_t pid);
/* A new target for pid (none may exist); NULL when out of memory. */
struct sched_target *sched_table_add(struct sched_table *tb, pid_t pid);
/* Removes t from the table (and the cache) and frees it. */
void sched_table_drop(struct sched_table *tb, struct sched_target *t);
/* t has nothing queued or running: cached while it pins a live process,
 * else dropped.  target_alive() does not block. */
void sched_table_release(struct sched_table *tb, struct sched_target *t);
/* t, perhaps cached, is taken up again: out of the cache, and what it
 * published belongs to earlier operations. */
void sched_table_revive(struct sched_table *tb, struct sched_target *t);

#endif
