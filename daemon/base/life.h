/* life.h: the daemon's lifetime as a hold count.
 *
 * Everything that must finish before the daemon exits holds a reference
 * (start-up, the opening of the process index and of NVML, each running
 * driver operation, each open connection, each group in flight) and drops
 * it when done.  life_stop() marks the daemon stopping and tells the
 * subscribers (life_on_stop); once it is stopping and no hold is left,
 * stopped_cb runs, once, and closes what remains.  No room reads another
 * room's flags to decide when the daemon may exit.  Loop thread only. */
#ifndef CUDACKPT_LIFE_H
#define CUDACKPT_LIFE_H

#include <stdbool.h>

/* A subscriber to the stop, embedded in the subscriber's own object. */
struct life_hook {
        void (*stop_cb)(struct life_hook *h);
        struct life_hook *next;
};

struct life {
        unsigned holds;                      /* things that must finish before exit */
        bool stopping;                       /* life_stop() was called */
        void (*stopped_cb)(struct life *l);  /* once stopping and holds == 0 */
        struct life_hook *hooks;             /* stop_cb in the order added */
        bool stopped;                        /* stopped_cb has run */
};

void life_init(struct life *l, void (*stopped_cb)(struct life *l));
void life_hold(struct life *l);
/* Drops a hold; may call stopped_cb. */
void life_release(struct life *l);
bool life_stopping(const struct life *l);
/* h->stop_cb runs when life_stop() begins (h set by the caller). */
void life_on_stop(struct life *l, struct life_hook *h);
/* Marks l stopping, runs the stop hooks in the order they were added, then
 * calls stopped_cb if nothing holds l.  A second call does nothing. */
void life_stop(struct life *l);

#endif
