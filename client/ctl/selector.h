/* selector.h: --pids, --cgroup and --tree parsed into the protocol's
 * Selector object. */
#ifndef CUDACKPT_CTL_SELECTOR_H
#define CUDACKPT_CTL_SELECTOR_H

#include <cJSON.h>

/* Which processes a group form or ps acts on. */
typedef enum ctl_selector_kind {
        CTL_SELECT_NONE,
        CTL_SELECT_PIDS,        /* --pids PID[:START_TIME][,...] */
        CTL_SELECT_CGROUP,      /* --cgroup PATH */
        CTL_SELECT_TREE,        /* --tree PID */
} ctl_selector_kind;

typedef struct ctl_selector {
        ctl_selector_kind kind;
        const char *arg;        /* the option's argument, as given */
        cJSON *json;            /* the protocol's Selector object, owned */
} ctl_selector;

/* "--pids", "--cgroup", "--tree" ("" for CTL_SELECT_NONE). */
const char *ctl_selector_option(ctl_selector_kind kind);

/* Parse the argument of a selector option into *sel (replacing what it
 * held).  -EINVAL for a malformed argument (an empty list or item, a bad
 * pid or start time, a cgroup path that is not absolute or has an empty,
 * "." or ".." component), -EEXIST for a pid listed twice, -ENOMEM.  sel
 * is unchanged on failure. */
int ctl_selector_parse(ctl_selector *sel, ctl_selector_kind kind, const char *arg);
void ctl_selector_free(ctl_selector *sel);

#endif
