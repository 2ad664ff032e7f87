/* status.h: GetStatus, the daemon's health for operators and probes.
 *
 * The reply is made on the loop thread from what the daemon already
 * holds: the driver it loaded at its start, how listings find processes,
 * and how much of each shared resource is in use in all.  No driver call,
 * no read of /proc.  It is open to every caller, so it holds counts only:
 * no pid, no uid, nothing of any one caller. */
#ifndef CUDACKPT_STATUS_H
#define CUDACKPT_STATUS_H

#include <cjson/cJSON.h>

struct server;

/* GetStatus's reply, or NULL when out of memory. */
cJSON *status_reply(const struct server *s);

#endif
