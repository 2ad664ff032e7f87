/* groupreply.h: what the group forms read of the daemon's replies alike,
 * in their progress (groupprogress.c) and their result (group.c). */
#ifndef CUDACKPT_CTL_GROUPREPLY_H
#define CUDACKPT_CTL_GROUPREPLY_H

#include <cJSON.h>

/* A duration member key of o in ms, -1 when absent or out of range. */
double ctl_group_ms(const cJSON *o, const char *key);

/* "Name: sentence" of a member's error (name, parameters object or
 * NULL), as ctl_describe_error() words it; the caller frees it. */
char *ctl_group_member_error(const char *name, const cJSON *params);

/* The short name of an error: what follows its interface. */
const char *ctl_group_short_name(const char *name);

#endif
