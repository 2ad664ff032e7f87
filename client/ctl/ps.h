/* ps.h: the ps command (ListProcesses). */
#ifndef CUDACKPT_CTL_PS_H
#define CUDACKPT_CTL_PS_H

#include "selector.h"

#include <cudackpt/client.h>

#include <stdbool.h>

/* ps: ListProcesses. */
typedef struct ctl_ps {
        const char *prefix;             /* "cudackptctl: ps: " */
        const ctl_selector *selector;   /* NULL or CTL_SELECT_NONE: every process */
        bool json;                      /* a JSON list of the daemon's objects */
} ctl_ps;

int ctl_ps_run(cudackpt_client *client, const ctl_ps *p);

#endif
