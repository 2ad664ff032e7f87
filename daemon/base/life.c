/* life.c: the hold count that decides when the daemon may exit (life.h). */
#include "base/life.h"

#include <assert.h>
#include <stddef.h>

void life_init(struct life *l, void (*stopped_cb)(struct life *l))
{
        *l = (struct life){ .stopped_cb = stopped_cb };
}

void life_hold(struct life *l)
{
        l->holds++;
}

static void maybe_stopped(struct life *l)
{
        if (!l->stopping || l->holds > 0 || l->stopped)
                return;
        l->stopped = true;
        if (l->stopped_cb)
                l->stopped_cb(l);
}

void life_release(struct life *l)
{
        assert(l->holds > 0);
        l->holds--;
        maybe_stopped(l);
}

bool life_stopping(const struct life *l)
{
        return l->stopping;
}

void life_on_stop(struct life *l, struct life_hook *h)
{
        struct life_hook **p = &l->hooks;

        while (*p)
                p = &(*p)->next;
        h->next = NULL;
        *p = h;
}

void life_stop(struct life *l)
{
        if (l->stopping)
                return;
        l->stopping = true;
        /* A hold taken here keeps a stop hook's release from ending the
         * life before the later hooks ran. */
        l->holds++;
        for (struct life_hook *h = l->hooks; h; h = h->next)
                h->stop_cb(h);
        life_release(l);
}
