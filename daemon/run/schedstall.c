/* schedstall.c: the stall watch (sched.h): a timer looks for operations
 * that have run for stall_warning_ms and has stall.c check and log why,
 * once per operation. */
#include "run/sched.h"

#include "run/stall.h"

static void stall_look(void *ctx, struct sched_target *t)
{
        struct sched *s = ctx;
        struct sched_op *op = t->running;
        uint64_t now = uv_now(s->loop);

        if (!op || op->stall_warned || now - op->dispatched_ms < s->cfg->stall_warning_ms)
                return;
        op->stall_warned = true;
        stall_check_start(s->loop, t, op->method, now - op->dispatched_ms);
}

static void stall_cb(uv_timer_t *timer)
{
        struct sched *s = timer->data;

        if (s->n_running == 0) {
                uv_timer_stop(&s->stall);
                return;
        }
        sched_for_each_running(s, stall_look, s);
}

void sched_stall_arm(struct sched *s)
{
        uint64_t period = s->cfg->stall_warning_ms / 4;

        if (s->cfg->stall_warning_ms == 0 || uv_is_active((uv_handle_t *)&s->stall))
                return;
        if (period < 50)
                period = 50;
        uv_timer_start(&s->stall, stall_cb, period, period);
}
