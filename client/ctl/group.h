/* group.h: lock, checkpoint, restore, unlock, suspend and resume of a
 * group of processes (a selector), and the report of its members. */
#ifndef CUDACKPT_CTL_GROUP_H
#define CUDACKPT_CTL_GROUP_H

#include "lease.h"
#include "selector.h"

#include <cudackpt/client.h>
#include <cJSON.h>

#include <stdbool.h>

/* One group operation. */
struct ctl_held;

typedef struct ctl_group {
        const char *prefix;             /* "cudackptctl: suspend --pids 1,2: ", for errors */
        const char *method;             /* CUDACKPT_METHOD_*_GROUP */
        const ctl_selector *selector;
        long long lock_timeout;         /* timeout_ms, -1 for the daemon's default */
        const char *const *map;         /* gpu_mapping as ctl_map holds it, or NULL */
        bool force;                     /* restore, resume: force (no check of the fit) */
        bool json;                      /* print the reply's parameters as JSON */
        bool progress;                  /* ask for progress and show it on stderr */
        bool progress_tty;              /* ... rewriting a line per phase in place */
        long long lease_ms;             /* lock, suspend: lease_ms, -1 for none */
        bool lease_on_close;            /* lock, suspend: a lease held by this connection */
        struct ctl_held *ret_lease;     /* on success, when not NULL: the lease granted */
        cJSON **ret_members;            /* on success, when not NULL: a Selector of exactly the
                                         * members, pinned by start time (NULL when none) */
        bool quiet;                     /* print nothing on success (dump, restore --images
                                         * report the whole job themselves) */
} ctl_group;

/* Run g and print its result; returns the exit status. */
int ctl_group_run(cudackpt_client *client, const ctl_group *g);

#endif
