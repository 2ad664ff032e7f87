/* status.h: GetStatus and GetMetrics, the daemon's health for operators,
 * probes and Prometheus.
 *
 * The replies are made on the loop thread from what the daemon already
 * holds: the driver it loaded at its start, how listings find processes,
 * and how much of each shared resource is in use in all.  No driver call,
 * no read of /proc.  They are open to every caller, so they hold counts
 * only: no pid, no uid, nothing of any one caller. */
#ifndef CUDACKPT_STATUS_H
#define CUDACKPT_STATUS_H

#include <stdbool.h>
#include <cjson/cJSON.h>

#include "base/config.h"
#include "run/driver.h"
#include "base/metrics.h"

struct jobs;
struct lease_table;
struct sched;
struct select_source;
struct watch_table;

/* Where the counts are read: the server's, outliving the replies. */
struct status {
        const struct config *cfg;
        const struct driver *drv;
        const struct sched *sched;
        const struct select_source *source; /* the process index, and how listings find processes */
        const struct jobs *jobs;          /* groups and listings in flight */
        const struct lease_table *leases;
        const struct watch_table *watch;
        const struct metrics *metrics;
        const unsigned *n_conns;          /* open connections */
        const bool *index_opening;        /* the process index is being opened */
        const char *index_why;            /* why there is none, once tried */
};

/* GetStatus's reply, or NULL when out of memory. */
cJSON *status_reply(const struct status *s);
/* GetMetrics's reply (the exposition text, metrics.h), or NULL when out of
 * memory. */
cJSON *status_metrics_reply(const struct status *s);

#endif
