/* watch.h: the watch command (the Watch stream) and metrics's one-shot
 * GetMetrics. */
#ifndef CUDACKPT_CTL_WATCH_H
#define CUDACKPT_CTL_WATCH_H

#include "selector.h"

#include <cudackpt/client.h>

#include <stdbool.h>

/* watch: the Watch stream, one line per event until the daemon closes it. */
typedef struct ctl_watch {
        const char *prefix;             /* "cudackptctl: watch: " */
        const ctl_selector *selector;   /* NULL or CTL_SELECT_NONE: every process */
        bool json;                      /* each event as one line of JSON */
} ctl_watch;

int ctl_watch_run(cudackpt_client *client, const ctl_watch *w);

/* metrics: GetMetrics's text on stdout, or into output (written beside it
 * and renamed over it, for node_exporter's textfile collector). */
int ctl_metrics_run(cudackpt_client *client, const char *prefix, const char *output);

#endif
