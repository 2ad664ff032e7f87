/* schedtarget.c: publishing what a worker learnt of its target (see
 * schedtarget.h). */
#include "run/schedtarget.h"

void sched_target_publish(struct sched_target *t, const struct target_identity *id, int state)
{
        bool wake;

        uv_mutex_lock(&t->lock);
        if (id) {
                t->watch_stat_fd = id->stat_fd;
                t->watch_status_fd = id->status_fd;
                t->watch_pid = id->pid;
                t->known = true;
                t->owner = (struct policy_target){ id->ruid, id->euid, id->suid };
                t->start_time = id->start_time;
        }
        t->last_state = state;
        wake = t->want_wake && t->known && t->last_state >= 0;
        if (wake)
                t->want_wake = false;
        if (id && t->want_id_wake) {
                t->want_id_wake = false;
                wake = true;
        }
        uv_mutex_unlock(&t->lock);
        if (wake)
                uv_async_send(t->wake);
}
